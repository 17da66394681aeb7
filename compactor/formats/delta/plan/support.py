"""Which Delta tables compactor can compact, with which engine (PURE): the table features delta-rs cannot
write and the ones compactor's own rewrite cannot copy. The planner skips such tables and apply refuses
them again on the state it commits against; apply imports this, not the planner."""

from __future__ import annotations

from compactor.formats.delta.read.facts import delta_facts
from compactor.models.state import TableState

#: writer features delta-rs 1.6 cannot write (its commits would corrupt or be refused)
DELTA_RS_UNWRITABLE = frozenset({
    "clustering", "liquid", "rowTracking", "domainMetadata", "inCommitTimestamp", "identityColumns",
    "typeWidening", "typeWidening-preview", "catalogManaged", "catalogOwned-preview", "icebergCompatV1",
    "icebergCompatV2", "icebergWriterCompatV1", "variantType", "variantType-preview",
})
#: features whose data files compactor's own rewrite cannot copy as they are (deletion vectors: only files
#: that actually carry one, see plan.py's _rewrite_eligibility)
UNREWRITABLE = frozenset({"columnMapping"})
#: engines whose rewrite of a file with a deletion vector is proved (formats/delta/apply/deletes.py hands
#: them the deleted positions, tests/apply/test_deletion_vector_rewrite.py): the local engine. The spark
#: engine's rewrite honours the same per-input deletes, but is left to its native OPTIMIZE until a
#: delta-spark test proves it
REWRITES_DELETION_VECTORS = frozenset({"local"})
#: engines whose rewrite of a column-mapped table (name and id mode) is proved: the local engine reads and
#: writes files in the table's physical names and field ids (formats/delta/read/column_mapping.py,
#: tests/apply/test_column_mapping_rewrite.py)
REWRITES_COLUMN_MAPPING = frozenset({"local"})
#: the change data feed's bookkeeping columns delta-spark's UPDATE, DELETE and MERGE write into data files (all
#: null / false), which compactor's rewrite leaves out once each footer proves it (apply/rewrite.py
#: CHANGE_DATA_COLUMNS)
CHANGE_DATA_COLUMN_NAMES = frozenset({"_change_type", "__is_cdc"})


def native_possible(engine: str, method: str) -> bool:
    """delta-spark's own OPTIMIZE may run (spark engine, method auto or optimize): it writes every table
    feature delta-spark supports, so nothing is refused at plan time; apply refuses, naming the feature,
    when the Delta jars turn out not to load and the table needs them."""
    return engine == "spark" and method in ("auto", "optimize")


def purge_possible(engine: str) -> bool:
    """A purge of soft-deleted rows may run: on the spark engine delta-spark's REORG TABLE ... APPLY (PURGE)
    (needs the Delta jars; whatever the compaction method), on the local engine compactor's own rewrite of
    the purge's bins (formats/delta/apply/purge.py), which drops the rows the vectors delete."""
    return engine in ("spark", "local")


def purge_droppable(engine: str) -> frozenset[str] | None:
    """The columns a table lacks that the engine's purge leaves out of the files it rewrites: any on the
    spark engine (REORG drops them), only the change data feed's bookkeeping columns on the local engine
    (the rewrite leaves those out once each footer proves them empty: apply/rewrite.py CHANGE_DATA_COLUMNS)."""
    return None if engine == "spark" else CHANGE_DATA_COLUMN_NAMES


def unsupported_reason(state: TableState, engine: str, method: str = "rewrite") -> str | None:
    """Why compactor cannot compact this table with ``engine``/``method``, or None."""
    if native_possible(engine, method):
        return None
    feats = set(delta_facts(state).protocol.writer_features) | set(delta_facts(state).protocol.reader_features)
    bad = sorted(feats & DELTA_RS_UNWRITABLE)
    if bad:
        return f"writer feature(s) {', '.join(bad)} cannot be written by delta-rs, which commits compactor's changes"
    bad = sorted(feats & UNREWRITABLE)
    if state.properties.get("delta.columnMapping.mode", "none") not in ("none", None):
        bad = sorted(set(bad) | {"columnMapping"})
    if engine in REWRITES_COLUMN_MAPPING:
        bad = [f for f in bad if f != "columnMapping"]
    if bad:
        return f"table uses {', '.join(bad)}: its data files cannot be rewritten safely by compactor"
    facts = delta_facts(state)
    if facts.deletion_vectors_enabled and facts.has_deletion_vectors is None:
        return ("table uses deletionVectors and delta-rs cannot read them to tell which files carry one, so "
                "compactor's own rewrite leaves the table alone")
    return None
