"""Each live file's deletion vector as the log describes it: its unique id (the protocol's: storage type,
path or inline data, ``@offset``) and its cardinality (the rows it deletes), read by compactor's own log
replay (read/log_replay.py) without materialising a single bitmap. A purge lists these ids in the plan, and
apply compares them with the table as it is then: a DELETE that changed a file's DV since planning leaves its
path live but its id different."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compactor.errors import TableReadError
from compactor.formats.delta.read.log_replay import dv_key, replay
from compactor.models.table import TableLocation


@dataclass(frozen=True)
class DeletionVectorRef:
    """One live file's deletion vector: the protocol's unique id and the rows it deletes."""

    id: str
    cardinality: int


def logged_deletion_vectors(where: TableLocation, version: int) -> Mapping[str, DeletionVectorRef] | None:
    """Logical path -> its deletion vector, for every live file that has one, at ``version``; None when
    the replay cannot read the log with certainty or the table has moved past ``version`` meanwhile (the
    caller then asks delta-rs)."""
    try:
        r = replay(where)
    except TableReadError:
        return None
    if r.version != version:
        return None
    return {path: DeletionVectorRef(dv_key(dv), int(dv.get("cardinality") or 0))
            for path, dv in r.deletion_vectors.items()}
