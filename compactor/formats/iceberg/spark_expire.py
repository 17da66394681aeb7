"""Commit a planned snapshot expiry with Iceberg's own Java library in the spark engine's session: for tables
pyiceberg 0.12 cannot commit to (format version 3), where the local engine skips the expiry.

Iceberg's ``ExpireSnapshots`` (``RemoveSnapshots``) expires more than the ids it is given: every snapshot
older than the table's ``history.expire.max-snapshot-age-ms`` (or a branch's own age) beyond its
``min-snapshots-to-keep``, and drops branches and tags older than their maximum ref age. So the expiry is
built to expire by id only (``expireOlderThan`` at the start of time, nothing by age), never deletes a
file itself (``cleanExpiredFiles(false)``: the caller deletes the planned files through the deletion
gate), and is checked before it commits:

- the table as pyiceberg reads it: every planned snapshot still there, not current, held by no branch or
  tag (``expire.unexpirable``) and still allowed by the plan's own rule (the caller's ``check``); no branch
  or tag old enough for Iceberg to drop it with the expiry;
- the Java table's current snapshot is the one pyiceberg checked, and the update applied to it without
  committing (``apply()``: the snapshots it would remove) removes exactly the planned ids.

The commit then re-applies on the metadata the catalog holds (Iceberg's own retry on a concurrent commit);
a branch or tag made on a planned snapshot since fails it (``Cannot expire ... Still referenced by refs``)
and nothing is committed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from compactor.errors import ApplyError, StalePlanError
from compactor.formats.iceberg.expire import unexpirable
from compactor.formats.iceberg.spark import java_table
from compactor.formats.iceberg.spark_rewrite import check_runtime
from compactor.models.table import TableLocation
from compactor.runtime.iceberg_catalog import cause

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

#: Iceberg's table property of the longest a branch or tag lives (``TableProperties.MAX_REF_AGE_MS``)
MAX_REF_AGE = "history.expire.max-ref-age-ms"


def dropped_refs(md: TableMetadata, now_ms: int) -> list[str]:
    """The branches and tags (not ``main``) Iceberg's expiry would drop as too old: their snapshot older than
    their own ``max-ref-age-ms``, else the table's."""
    default = md.properties.get(MAX_REF_AGE)
    out = []
    for name, ref in sorted(md.refs.items()):
        limit = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else int(default) if default else None
        snap = md.snapshot_by_id(ref.snapshot_id)
        if name != "main" and limit is not None and snap is not None and now_ms - snap.timestamp_ms > limit:
            out.append(f"{ref.snapshot_ref_type.value} '{name}' is older than its maximum ref age ({limit} ms): "
                       "Iceberg's expiry would drop it")
    return out


def expire_in_jvm(spark: Any, location: TableLocation, table: Table, snapshot_ids: Sequence[int], where: str,
                  check: Callable[[TableMetadata], list[str]], *, now_ms: int) -> None:
    """Expire exactly ``snapshot_ids`` from ``table`` through Iceberg's Java library (module docstring); no
    file is deleted. Raises StalePlanError when the table no longer lets them expire as planned (nothing
    committed), ApplyError when Iceberg's commit failed."""
    check_runtime(spark)
    ids = sorted(set(snapshot_ids))
    table.refresh()
    md = table.metadata
    problems = unexpirable(md, ids) + check(md) + dropped_refs(md, now_ms)
    if problems:
        raise StalePlanError(f"{where}: not expired, the plan is stale: {'; '.join(problems)}", hint="plan again")
    with java_table(spark, location) as jtable:
        current = jtable.currentSnapshot()
        if current is None or current.snapshotId() != md.current_snapshot_id:
            raise StalePlanError(f"{where}: not expired, the table changed while it was checked", hint="plan again")
        update = _expiry(spark, jtable, ids)
        try:
            removed = sorted(int(s.snapshotId()) for s in update.apply())
        except Exception as e:  # noqa: BLE001 - py4j wraps Iceberg's refusals (a ref still holding one)
            raise StalePlanError(f"{where}: not expired, Iceberg refuses it: {cause(e)}", hint="plan again") from None
        if removed != ids:
            raise StalePlanError(f"{where}: not expired: Iceberg's expiry would remove snapshot(s) {removed}, the plan "
                                 f"lists {ids}", hint="plan again")
        try:
            update.commit()
        except Exception as e:  # noqa: BLE001
            message = cause(e)
            if "Still referenced by refs" in message:
                raise StalePlanError(f"{where}: not expired, the plan is stale: {message}", hint="plan again") from None
            raise ApplyError(f"{where}: Iceberg's expiry was not committed: {message}; nothing was deleted") from None


def _expiry(spark: Any, jtable: Any, ids: Sequence[int]) -> Any:
    """Iceberg's ExpireSnapshots of exactly ``ids``: nothing by age, no file deleted."""
    update = jtable.expireSnapshots()
    for i in ids:
        update = update.expireSnapshotId(i)
    return update.expireOlderThan(spark._jvm.java.lang.Long.MIN_VALUE).cleanExpiredFiles(False)
