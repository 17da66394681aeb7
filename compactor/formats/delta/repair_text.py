"""How `compactor repair` words one Delta table's repair (``RepairOutcome.text``): the rows live twice it
found, the files it removes and restores, and the rows, as proved on the files."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from compactor.formats.delta.repair import RepairResult


def repair_text(table: str, r: RepairResult) -> tuple[str, ...]:
    """The lines of ``r`` (clean, would_repair or repaired) for the table named ``table``."""
    if r.status == "clean":
        return (f"{table}: no duplicate rewrites (versions {r.window.first_version}..{r.window.last_version} "
                "scanned)",)
    lines = []
    verb = "would repair" if r.status == "would_repair" else "repaired"
    for d in r.duplicates:
        rows = "?" if d.rows is None else f"{d.rows:,}"
        lines.append(f"{table}: {verb} rows live twice: version {d.later_version} ({d.kind}) made "
                     f"{rows} rows of {len(d.files)} file(s) live a second time")
    where = f" in version(s) {', '.join(map(str, r.commits))}" if r.commits else ""
    copied = f" ({r.files_copied} as new copies: VACUUM may delete the originals)" if r.files_copied else ""
    lines.append(f"  {r.files_removed} file(s) removed, {r.files_restored} restored{copied}{where}: "
                 f"{r.rows_removed:,} rows removed, {r.rows_restored:,} restored, "
                 f"{r.rows_deduplicated:,} duplicated rows gone (proved on the files)")
    if r.proposal is not None:
        lines += [f"    - {p}" for p in r.proposal.remove]
        lines += [f"    + {p}" for p in r.proposal.restore]
    return tuple(lines)
