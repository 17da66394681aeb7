"""Which Delta tables compactor can compact, with which engine (PURE): the table features compactor's own
commit writer honours (and those only delta-spark's OPTIMIZE can), the ones delta-rs cannot write where it
commits instead, and the ones compactor's own rewrite cannot copy. The planner skips such tables and apply
refuses them again on the state it commits against; apply imports this, not the planner."""

from __future__ import annotations

from collections.abc import Mapping

from compactor.formats.delta.read.facts import DeltaProtocol, delta_facts
from compactor.models.state import TableState

#: writer features delta-rs 1.6 cannot write (its commits would corrupt or be refused): where delta-rs commits
#: compactor's changes (log_writer's fallback: a store reached through a locking provider) such a table is refused
DELTA_RS_UNWRITABLE = frozenset({
    "clustering", "liquid", "rowTracking", "domainMetadata", "inCommitTimestamp", "identityColumns",
    "typeWidening", "typeWidening-preview", "catalogManaged", "catalogOwned-preview", "icebergCompatV1",
    "icebergCompatV2", "icebergWriterCompatV1", "variantType", "variantType-preview",
})
#: table features compactor's own commit writer (formats/delta/apply/log_writer.py) honours in a dataChange=false
#: swap, each as PROTOCOL.md asks of such a writer: it adds whole files holding its inputs' rows less those their
#: deletion vectors delete, in the table's current schema (physical names and field ids under columnMapping; the
#: current types under typeWidening, whose metadata it leaves as it is), and removes each input as the log spelled
#: its add, with its deletion vector descriptor (deletionVectors); it writes no change data (changeDataFeed: a
#: dataChange=false commit has none), no new row (appendOnly, invariants, checkConstraints, generatedColumns,
#: identityColumns: no value is generated, the high water mark stands), no domain (domainMetadata: every domain is
#: preserved by not touching it), no new deletion vector; with inCommitTimestamps enabled its commitInfo comes
#: first with an ``inCommitTimestamp`` past the previous commit's; it leaves checkpoints of tables with a feature
#: delta-rs does not know to their next writer (delta-rs' checkpoint could drop their domains); v2Checkpoint
#: allows the classic checkpoints delta-rs writes; vacuumProtocolCheck binds VACUUM only. Features readers alone
#: need (timestampNtz) ask nothing of a swap.
COMPACTOR_WRITES = frozenset({
    "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "timestampNtz",
    "deletionVectors", "vacuumProtocolCheck", "allowColumnDefaults", "v2Checkpoint", "columnMapping",
    "identityColumns", "domainMetadata", "inCommitTimestamp", "typeWidening", "typeWidening-preview",
})
#: features compactor's rewrite must not touch, each with why and what does it instead
NATIVE_ONLY = {
    "rowTracking": "compactor cannot preserve row ids (a copy must keep each row's id and commit version in the "
                   "materialized columns, and fresh ids need the row id high water mark)",
    "clustering": "compactor's bin-packing would undo the table's clustering (delta-spark's OPTIMIZE clusters it)",
    "liquid": "compactor's bin-packing would undo the table's clustering (delta-spark's OPTIMIZE clusters it)",
}
#: storage options of a store written through a lock (delta-rs' DynamoDB locking on S3): compactor's
#: put-if-absent would bypass the lock, so delta-rs commits there
LOCKING_OPTIONS = ("AWS_S3_LOCKING_PROVIDER", "aws_s3_locking_provider", "DELTA_DYNAMO_TABLE_NAME",
                   "delta_dynamo_table_name")


def compactor_commits(protocol: DeltaProtocol, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether compactor writes this table's commits itself (else delta-rs does, its fallback): every feature
    of the protocol is one compactor's writer honours, and no locking provider guards the store."""
    if any((storage_options or {}).get(k) for k in LOCKING_OPTIONS):
        return False
    features = set(protocol.writer_features) | set(protocol.reader_features)
    return protocol.min_writer_version <= 7 and features <= COMPACTOR_WRITES


#: features whose data files compactor's own rewrite cannot copy as they are (deletion vectors: only files
#: that actually carry one, see plan.py's _rewrite_eligibility)
UNREWRITABLE = frozenset({"columnMapping"})
#: engines whose rewrite of a file with a deletion vector is proved (formats/delta/apply/deletes.py hands
#: them the deleted positions): the local engine (tests/apply/test_deletion_vector_rewrite.py) and the
#: spark engine's ``method: rewrite`` (Spark's ``_metadata.row_index``, engines/spark.py; both in
#: tests/interop/test_local_dv_spark.py). ``method: auto`` still gives such files to native OPTIMIZE
#: (apply/context.py only_native_can)
REWRITES_DELETION_VECTORS = frozenset({"local", "spark"})
#: engines whose rewrite of a column-mapped table (name and id mode) is proved: they read and write files in
#: the table's physical names and field ids (formats/delta/read/column_mapping.py): the local engine
#: (tests/apply/test_column_mapping_rewrite.py) and the spark engine's ``method: rewrite``
#: (engines/spark_schema.py, tests/interop/test_local_dv_spark.py); ``method: auto`` still gives such tables
#: to native OPTIMIZE
REWRITES_COLUMN_MAPPING = frozenset({"local", "spark"})
#: the change data feed's bookkeeping columns delta-spark's UPDATE, DELETE and MERGE write into data files (all
#: null / false), which compactor's rewrite leaves out once each footer proves it (apply/rewrite.py
#: CHANGE_DATA_COLUMNS)
CHANGE_DATA_COLUMN_NAMES = frozenset({"_change_type", "__is_cdc"})


def native_possible(engine: str, method: str) -> bool:
    """delta-spark's own OPTIMIZE may run (spark engine, method auto or optimize): it writes every table
    feature delta-spark supports, so nothing is refused at plan time; apply refuses, naming the feature,
    when the Delta jars turn out not to load and the table needs them."""
    return engine == "spark" and method in ("auto", "optimize")


def purge_possible(engine: str, state: TableState) -> bool:
    """A purge of soft-deleted rows may run: on the spark engine delta-spark's REORG TABLE ... APPLY (PURGE)
    (needs the Delta jars; whatever the compaction method and the table's features), on the local engine
    compactor's own rewrite of the purge's bins (formats/delta/apply/purge.py), which drops the rows the
    vectors delete, where that rewrite may rewrite the table at all (not on row tracking, for one)."""
    return engine == "spark" or (engine == "local" and unsupported_reason(state, engine) is None)


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
    native = sorted(feats & NATIVE_ONLY.keys())
    if native:  # each feature named, with why (one reason names every feature it stands for)
        by_reason: dict[str, list[str]] = {}
        for f in native:
            by_reason.setdefault(NATIVE_ONLY[f], []).append(f)
        return "; ".join(f"{', '.join(fs)}: {why}" for why, fs in by_reason.items())
    by_delta_rs = sorted(feats & DELTA_RS_UNWRITABLE)
    if by_delta_rs and not delta_facts(state).compactor_commits:
        return (f"writer feature(s) {', '.join(by_delta_rs)} cannot be written by delta-rs, which commits compactor's "
                "changes to this store (a locking provider guards it)")
    unknown = sorted(feats - COMPACTOR_WRITES)
    if unknown:
        return (f"table feature(s) {', '.join(unknown)}: compactor's commit writer does not honour "
                f"{'them' if len(unknown) > 1 else 'it'}, so it leaves the table alone")
    bad = sorted(feats & UNREWRITABLE)
    if maps_columns(state):
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


def maps_columns(state: TableState) -> bool:
    """Whether the table maps its columns to physical names (``delta.columnMapping.mode`` name or id)."""
    return state.properties.get("delta.columnMapping.mode", "none") not in ("none", None)

