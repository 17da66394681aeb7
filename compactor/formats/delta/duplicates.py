"""Duplicate rewrites in a Delta log, found from the commits alone (PURE: no I/O in this module).

The signature of the delta-rs hazard (README, "Safety model"): a ``dataChange=false`` commit removes a
file that an earlier commit already removed (and nobody re-added since) and adds new files. Its adds then
hold a second copy of that file's rows: the earlier commit's adds hold the first. Any writer can produce
it (compactor, delta-rs ``optimize``, a Spark job committing through delta-rs, Delta Kernel); delta-spark's
own conflict checker refuses it, and delta-rs refuses it whenever one side changes data (DELETE, UPDATE,
MERGE: measured, see tests/duplicates), so only ``dataChange=false`` commits are considered.

The replay walks the commits in order and keeps, for every path it has seen, whether it is live, which
commits removed it since it was last added, and which duplicates its rows carry:

- a *duplicate* is born at the later commit (its new adds are the extra copy, its *carriers*). A second
  form is a *resurrection*: a commit re-adds a path that a live compaction already rewrote (a stale
  repair would do this); the re-added path is the extra copy;
- a later compaction that removes a carrier passes the duplicate on to its own adds (it joins the
  duplicate's *chain*); a commit that removes carriers and adds nothing new (a repair) ends it;
- a commit that re-adds files a duplicate removed is legitimate when every remaining remover of the file
  has been reverted (that is what a repair does), and removing a file re-added in between is too;
- a duplicate whose earlier copies were all reverted since is void (its copy is now the only one).

``repair_plan`` turns the open duplicates into one ``dataChange=false`` commit: remove every live carrier,
re-add the files the chain consumed that no commit outside the chain removed (they are still on storage
until VACUUM). Repairs of repairs and three-way overlaps converge because a repair is just another commit
the replay understands: it ends the duplicates whose carriers it removes, and its re-adds are checked like
any other add.

Only the commits given are known: a path first seen being removed is assumed live before the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compactor.formats.delta.log import Commit

#: commit metadata compactor's repair commits carry (the versions of the commits they revert)
REPAIR_OF = "compactor.repair_of"


@dataclass
class Duplicate:
    """One duplicate rewrite: ``later`` removed files ``earlier`` had removed already (or re-added files a
    live compaction had rewritten); ``files`` are those files, whose rows are now live twice."""

    later: int
    #: file -> the versions that removed it before ``later`` (and were not reverted)
    earlier: dict[str, list[int]]
    #: the paths ``later`` added that hold the extra copy
    extra: frozenset[str]
    #: ``later`` and the compactions that rewrote its extra copy since (versions, in order); empty for a
    #: resurrection
    chain: list[int]
    kind: str = "double_remove"  # | "resurrection"
    status: str = "open"  # | "repaired" | "void"
    resolved_by: int | None = None
    #: set when the duplicate cannot be repaired by reverting its chain (rows were changed since)
    unrepairable: str | None = None

    @property
    def files(self) -> list[str]:
        return sorted(self.earlier)

    @property
    def earlier_versions(self) -> list[int]:
        return sorted({v for vs in self.earlier.values() for v in vs})


@dataclass
class Analysis:
    """The result of a replay (``analyse``)."""

    first_version: int | None
    last_version: int | None
    duplicates: list[Duplicate]
    commits: dict[int, Commit]
    #: paths the replay knows to be live at the end (added in the window and not removed since)
    live: set[str]
    #: path -> removers since its last add (paths known not live)
    gone: dict[str, list[int]]
    #: live path -> the duplicates (by ``later``) whose extra copy it holds
    carry: dict[str, set[int]]
    #: commits reverted by a repair (the chains of repaired duplicates)
    reverted: set[int]
    #: the most recent add / remove action seen per path (stats, size, partition values)
    last_add: dict[str, Mapping[str, Any]]
    last_remove: dict[str, Mapping[str, Any]]
    #: paths removed by a commit that added nothing new (a repair), not re-added since
    dropped: set[str] = field(default_factory=set)

    @property
    def open(self) -> list[Duplicate]:
        return [d for d in self.duplicates if d.status == "open"]

    def carriers(self, dup: Duplicate) -> list[str]:
        return sorted(p for p, ids in self.carry.items() if dup.later in ids)


def analyse(commits: Iterable[Commit]) -> Analysis:
    """Replay ``commits`` (consecutive versions, oldest first) and find every duplicate rewrite."""
    live: set[str] = set()
    gone: dict[str, list[int]] = {}
    carry: dict[str, set[int]] = {}
    held: dict[str, set[int]] = {}  # removed path -> the duplicates it carried when it was removed
    dropped: set[str] = set()  # paths removed by a commit that added nothing new (a repair)
    dups: dict[int, Duplicate] = {}
    reverted: set[int] = set()
    by_version: dict[int, Commit] = {}
    last_add: dict[str, Mapping[str, Any]] = {}
    last_remove: dict[str, Mapping[str, Any]] = {}
    first = last = None
    for c in commits:
        first = c.version if first is None else first
        last = c.version
        if not c.adds and not c.removes:
            continue
        by_version[c.version] = c
        rewrite = not c.data_change
        # classify against the state before this commit
        removed_before = {p: list(gone[p]) for p in c.removes if p in gone}
        new_adds = frozenset(p for p in c.adds if p not in live and p not in gone)
        readds = {p: list(gone[p]) for p in c.adds if p in gone and p not in c.removes}
        # apply the removes; a file that held extra copies passes them on even when removed again
        carried: set[int] = set()
        for p, action in c.removes.items():
            if p in live:
                live.discard(p)
                held[p] = carry.pop(p, set())
                if not new_adds:
                    dropped.add(p)
            carried |= held.get(p, set())
            gone.setdefault(p, []).append(c.version)
            last_remove[p] = action
        # apply the adds
        for p, action in c.adds.items():
            live.add(p)
            gone.pop(p, None)
            held.pop(p, None)
            dropped.discard(p)
            last_add[p] = action
        # the extra copies this commit consumed move on to its new adds, or end here
        for dup_id in sorted(carried):
            d = dups[dup_id]
            if not rewrite and d.unrepairable is None:
                d.unrepairable = (f"version {c.version} changed data in files that hold the duplicated rows: "
                                  "reverting the rewrites would undo that change")
            if new_adds:
                d.chain.append(c.version)
                for p in new_adds:
                    carry.setdefault(p, set()).add(dup_id)
            elif not any(dup_id in ids for ids in carry.values()):
                d.status, d.resolved_by = "repaired", c.version
                reverted.update(d.chain)
        if not rewrite:
            continue
        # a second removal of files already removed, with new adds: the adds are an extra copy
        doubled = {p: [v for v in vs if v not in reverted] for p, vs in removed_before.items()}
        doubled = {p: vs for p, vs in doubled.items() if vs}
        # a re-add of a file that a live (not reverted) commit removed: the file is an extra copy itself
        resurrected = {p: [v for v in vs if v not in reverted] for p, vs in readds.items()}
        resurrected = {p: vs for p, vs in resurrected.items() if vs}
        if not (doubled and new_adds) and not resurrected:
            continue
        if doubled and new_adds:
            d = Duplicate(c.version, {**doubled, **resurrected}, new_adds | frozenset(resurrected), [c.version])
        else:
            d = Duplicate(c.version, resurrected, frozenset(resurrected), [], kind="resurrection")
        dups[c.version] = d
        for p in d.extra:
            carry.setdefault(p, set()).add(c.version)
    # a duplicate whose earlier copies were all reverted since holds the only copy now
    for d in dups.values():
        if d.status != "open":
            continue
        d.earlier = {p: [v for v in vs if v not in reverted] for p, vs in d.earlier.items()}
        d.earlier = {p: vs for p, vs in d.earlier.items() if vs}
        if not d.earlier:
            d.status = "void"
        elif not any(d.later in ids for ids in carry.values()):
            d.status = "repaired"  # its copy left the table without a repair commit we could name
    return Analysis(first, last, sorted(dups.values(), key=lambda d: d.later), by_version, live, gone, carry,
                    reverted, last_add, last_remove, dropped)


# ----------------------------------------------------------------------------- the repair, as data


@dataclass(frozen=True)
class RepairPlan:
    """One dataChange=false commit that removes every extra copy (``remove``) and restores the files the
    reverted chain consumed that nobody else holds (``restore``)."""

    duplicates: tuple[int, ...]  # the ``later`` versions repaired
    chain: tuple[int, ...]  # every commit reverted
    remove: tuple[str, ...]
    restore: tuple[str, ...]
    #: (commit, path) pairs: every file a reverted commit consumed, with multiplicity, plus the
    #: resurrected files removed as they are; their rows must equal the rows of ``remove``
    consumed: tuple[tuple[int, str], ...]
    #: why the repair must not be committed (empty when it may)
    unrepairable: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.remove and not self.restore


def repair_plan(analysis: Analysis, live_now: Iterable[str]) -> RepairPlan:
    """PURE: the repair of every open duplicate of ``analysis``. ``live_now``: the table's live paths
    (from a snapshot at ``analysis.last_version``).

    Every open double removal is reverted with its chain (B doubles A's files, C doubles B's: both are
    reverted, and the files only they removed are restored). A re-add is reverted unless every commit
    that had removed the file is being reverted: then it is part of the restore. Every file the reverted
    chain consumed must end with exactly one live copy: restored, still live, or held by a commit outside
    the chain; the plan says why not when that does not hold."""
    live = set(live_now)
    by_id = {d.later: d for d in analysis.open}
    void: set[int] = set()
    problems: list[str] = []
    for _ in range(len(by_id) + 2):
        ids = {i for i, d in by_id.items() if d.kind == "double_remove" or i not in void}
        while True:  # a file holding several extra copies reverts the chains of all of them
            carried = set().union(*((c - void) for c in analysis.carry.values() if c & ids)) & set(by_id)
            if carried <= ids:
                break
            ids |= carried
        chain_set = {v for i in ids for v in by_id[i].chain}
        # a re-add of files that only commits being reverted had removed is the restore itself
        now_void = {i for i, d in by_id.items() if d.kind == "resurrection"
                    and all(v in chain_set for vs in d.earlier.values() for v in vs)}
        if now_void == void:
            break
        void = now_void
    else:
        problems.append("the duplicates' chains and re-added files depend on each other in a way compactor "
                        "cannot resolve")
    chosen = [by_id[i] for i in sorted(ids)]
    problems += [f"version {d.later}: {d.unrepairable}" for d in chosen if d.unrepairable]
    for d in chosen:  # the other copy must be whole: none of its files dropped by a (stale) repair
        for r in d.earlier_versions:
            lost = sorted(p for p in analysis.commits[r].adds if p in analysis.dropped)
            if lost:
                problems.append(f"version {d.later}: the other copy (version {r}) is incomplete: {lost[0]} was "
                                "removed without being rewritten")
    # commits a repair already reverted (their copies were removed, their inputs restored) stay reverted
    chain_set -= analysis.reverted
    chain = sorted(chain_set)
    adds_of_chain = {p for v in chain for p in analysis.commits[v].adds}
    extra = {p for d in chosen for p in d.extra}
    remove = sorted(p for p, carried in analysis.carry.items() if (carried - void) & ids)
    missing = [p for p in remove if p not in live]
    if missing:
        problems.append(f"{len(missing)} file(s) holding duplicated rows are not live in the snapshot "
                        f"(e.g. {missing[0]}): the log window and the snapshot disagree")
    remove_set = set(remove)
    consumed: list[tuple[int, str]] = []
    restore: set[str] = set()
    rewritten: set[str] = set()
    for v in chain:
        for p in analysis.commits[v].removes:
            if p in adds_of_chain:
                # an intermediate extra copy, rewritten again within the chain: its rows are counted in
                # the files it came from, once; every further rewrite of it made one more copy
                if p in rewritten:
                    consumed.append((v, p))
                rewritten.add(p)
                continue
            consumed.append((v, p))
            if p in extra or p in live:
                continue
            if all(r in chain_set or r in analysis.reverted for r in analysis.gone.get(p, [])):
                restore.add(p)
    for p in sorted({p for _, p in consumed}):
        if p in remove_set or p in adds_of_chain:
            continue
        outside = [r for r in analysis.gone.get(p, []) if r not in chain_set and r not in analysis.reverted]
        copies = (p in restore) + (p in live) + len(outside)
        if copies != 1:
            problems.append(f"{p} would be live {copies} times after the repair (removed by versions "
                            f"{analysis.gone.get(p, [])}): not repaired automatically")
    consumed += [(d.later, p) for d in chosen for p in d.extra if p in live and p not in adds_of_chain]
    return RepairPlan(tuple(sorted(ids)), tuple(chain), tuple(remove), tuple(sorted(restore)), tuple(consumed),
                      tuple(problems))


def describe(d: Duplicate, rows: Mapping[str, int | None] | None = None) -> dict[str, Any]:
    """A duplicate as plain data for reports (plan ``duplicate_rewrite``, inspect, run results)."""
    n = None
    if rows is not None:
        counts = [rows.get(p) for p in d.files]
        n = None if any(c is None for c in counts) else sum(c or 0 for c in counts)
    return {"kind": d.kind, "earlier_versions": d.earlier_versions, "later_version": d.later,
            "files": d.files, "rows": n, "chain": list(d.chain), "status": d.status,
            "repaired_by": d.resolved_by, "repairable": d.unrepairable is None,
            **({"reason": d.unrepairable} if d.unrepairable else {})}


