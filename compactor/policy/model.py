"""Typed, frozen policy models: what the compiler front end produces and every later stage reads.

Sizes are bytes and durations are seconds (already parsed). ``SourceRef`` and ``TablePolicy.locations``
let later stages (the planner rejecting a ``where`` on a non-partition column, say) report errors at the
policy's file:line:col.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from compactor.models.formats import DEFAULT_FORMAT
from compactor.models.table import TableIdentifier

Strategy = Literal["bin_pack", "z_order", "sort"]
Order = Literal["benefit", "bytes_asc", "bytes_desc", "oldest_first"]
Method = Literal["auto", "rewrite", "optimize"]
DownstreamReaders = Literal["unknown", "none", "reprocess_ok"]

MIB = 2**20
DEFAULT_TARGET_FILE_SIZE = 128 * MIB
DEFAULT_MIN_FILE_RATIO = 0.75
DAY = 86400
DEFAULT_DELETED_FILE_RETENTION = 7 * DAY
SAFE_MIN_RETENTION = 7 * DAY
#: how old a snapshot must be before ``expire_snapshots`` may expire it (default), and the age below which
#: it needs ``allow_unsafe_retention`` (time travel and lagging readers read old snapshots): SAFE_MIN_RETENTION
DEFAULT_SNAPSHOT_RETENTION = 7 * DAY
#: how old a file no snapshot references must be before ``remove_orphan_files`` may delete it (default), and
#: the age below which it needs ``allow_unsafe_retention`` (a writer's files are unreferenced until it commits)
DEFAULT_ORPHAN_AGE = 3 * DAY
SAFE_MIN_ORPHAN_AGE = 1 * DAY


@dataclass(frozen=True)
class SourceRef:
    """Where something was declared: a policy file (relative to the project) and a 1-based line/col."""

    file: str
    line: int = 0
    col: int = 0
    #: which layer of the merge the value comes from: table, namespace <c>.<n>, catalog <c>, file defaults,
    #: project defaults ("" for positions that are no merged value)
    layer: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Triggers:
    """When a partition is worth compacting: enough small files, a file reduction, a share of small files."""

    min_input_files: int = 5
    #: compact a partition only if (files now - predicted files after) > this
    min_file_reduction: int = 0
    #: compact only if small files / all files in the partition >= this (0..1)
    min_small_file_ratio: float = 0.0
    #: a file whose deletes remove this share of its rows is a candidate whatever its size; None: the format's
    #: default. Iceberg: at least this share (``delete-ratio-threshold``, default 0.3), rewritten even alone;
    #: Delta: more than this share (delta-spark's ``spark.databricks.delta.optimize.maxDeletedRowsRatio``,
    #: default 0.05), in bins of two files or more as OPTIMIZE packs them (FormatSpec.trigger_keys names the
    #: formats that take it)
    max_deleted_rows_ratio: float | None = None
    #: a file with at least this many delete files is a candidate whatever its size, even alone (Iceberg's
    #: ``delete-file-threshold``); None: no such trigger
    delete_file_threshold: int | None = None


@dataclass(frozen=True)
class Lookback:
    """Only partitions whose ``column`` value is within ``seconds`` of now (a date/timestamp column)."""

    column: str
    seconds: int
    #: strftime format of the partition value; None = ISO date/timestamp
    date_format: str | None = None


@dataclass(frozen=True)
class PartitionScope:
    """Which partitions compaction considers (``where``, ``lookback``, ``skip_latest``)."""

    #: replaceWhere-style predicate on partition columns (Spark SQL), e.g. "date >= '2024-01-01'"
    where: str | None = None
    lookback: Lookback | None = None
    #: skip the N newest partitions (by partition value order); they are usually still being written
    skip_latest: int = 0


@dataclass(frozen=True)
class Budget:
    """The most one run compacts of a table: bytes and partitions (``order`` says which go first)."""

    max_bytes_per_run: int | None = None
    max_partitions_per_run: int | None = None


#: Iceberg's own defaults: ``min-input-files`` of rewrite_position_delete_files, and the table property
#: ``commit.manifest.min-count-to-merge``
DEFAULT_MIN_DELETE_FILES = 5
DEFAULT_MIN_MANIFESTS = 100


@dataclass(frozen=True)
class PositionDeletes:
    """``compaction.position_deletes`` (Iceberg): rewrite a partition's position delete files into few when it
    holds at least ``min_input_files`` of them (the spark engine: Iceberg's rewrite_position_delete_files)."""

    enabled: bool = False
    min_input_files: int = DEFAULT_MIN_DELETE_FILES


@dataclass(frozen=True)
class Manifests:
    """``compaction.manifests`` (Iceberg): rewrite the current snapshot's manifests of a partition spec when
    it has at least ``min_count`` of them (the spark engine: Iceberg's rewrite_manifests)."""

    enabled: bool = False
    min_count: int = DEFAULT_MIN_MANIFESTS


#: ``compaction.purge``'s default share of a partition's rows soft-deleted before it is purged (delta-spark's
#: default ``maxDeletedRowsRatio``)
DEFAULT_PURGE_RATIO = 0.05


@dataclass(frozen=True)
class Purge:
    """``compaction.purge`` (Delta): rewrite a partition's files with deletion vectors, dropping their
    soft-deleted rows (delta-spark's ``REORG TABLE ... APPLY (PURGE)``), when its soft-deleted rows are more
    than ``min_deleted_rows`` or more than ``min_deleted_ratio`` of its rows; whatever the files' sizes."""

    enabled: bool = False
    #: None: no row-count trigger (only the ratio)
    min_deleted_rows: int | None = None
    min_deleted_ratio: float = DEFAULT_PURGE_RATIO


@dataclass(frozen=True)
class Compaction:
    """A policy's ``compaction:`` block: strategy, file sizes, triggers, partition scope, budget and order."""

    enabled: bool = True
    strategy: Strategy = "bin_pack"
    z_order_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    #: files smaller than this are candidates; default 75% of target_file_size
    min_file_size: int = int(DEFAULT_TARGET_FILE_SIZE * DEFAULT_MIN_FILE_RATIO)
    triggers: Triggers = field(default_factory=Triggers)
    partitions: PartitionScope = field(default_factory=PartitionScope)
    #: skip partitions with files modified more recently than this many seconds
    quiet_period: int | None = None
    budget: Budget = field(default_factory=Budget)
    order: Order = "benefit"
    #: spark engine only: "rewrite" (Spark rewrites, compactor commits), "optimize" (the format's native
    #: compaction: delta-spark OPTIMIZE, needs the Delta jars; Iceberg's rewrite_data_files), "auto" (rewrite,
    #: and for Delta optimize where only delta-spark can do the job: formats/delta/context.only_native_can).
    #: The local engine always rewrites Delta tables and skips Iceberg's optimize (formats/iceberg/plan.py).
    method: Method = "auto"
    #: Iceberg's own maintenance, planned whatever ``enabled`` says of the data files (each has its own switch)
    position_deletes: PositionDeletes = field(default_factory=PositionDeletes)
    manifests: Manifests = field(default_factory=Manifests)
    #: Delta's purge of soft-deleted rows, planned whatever ``enabled`` says of the small files
    purge: Purge = field(default_factory=Purge)


@dataclass(frozen=True)
class Vacuum:
    """A policy's ``retention.vacuum``: whether to plan a VACUUM of the table (off by default)."""

    enabled: bool = False
    dry_run_first: bool = True


@dataclass(frozen=True)
class ExpireSnapshots:
    """``retention.expire_snapshots`` (Iceberg): expire the snapshots older than ``older_than``, never the
    current one, one a branch or tag points to, or the newest ``retain_last`` of the current history."""

    enabled: bool = False
    #: seconds
    older_than: int = DEFAULT_SNAPSHOT_RETENTION
    retain_last: int = 1


@dataclass(frozen=True)
class RemoveOrphanFiles:
    """``retention.remove_orphan_files`` (Iceberg): delete the files under the table's location that no
    snapshot references, older than ``older_than``."""

    enabled: bool = False
    #: seconds
    older_than: int = DEFAULT_ORPHAN_AGE


@dataclass(frozen=True)
class Retention:
    """A policy's ``retention:`` block. Delta: the VACUUM horizon, log retention and the table properties;
    Iceberg: snapshot expiry and orphan-file removal; both: ``allow_unsafe_retention``, ``min_reader_lag``
    (each format takes its own keys: compactor/models/formats.py ``retention_keys``)."""

    #: VACUUM horizon; table property delta.deletedFileRetentionDuration
    deleted_file_retention: int = DEFAULT_DELETED_FILE_RETENTION
    #: table property delta.logRetentionDuration (None = leave the table's value alone)
    log_retention: int | None = None
    vacuum: Vacuum = field(default_factory=Vacuum)
    allow_unsafe_retention: bool = False
    #: the longest a reader (stream, time-travel job) may lag; retention never goes below it
    min_reader_lag: int | None = None
    #: whether the planner should set the table properties to match (set_properties actions)
    manage_properties: bool = True
    expire_snapshots: ExpireSnapshots = field(default_factory=ExpireSnapshots)
    remove_orphan_files: RemoveOrphanFiles = field(default_factory=RemoveOrphanFiles)


@dataclass(frozen=True)
class FileSource:
    """The streaming query's file source: its checkpoint's ``sources/N`` log grows like the sink's."""

    compact_interval: int | None = None
    cleanup_delay: int | None = None
    max_file_age: int | None = None
    clean_source: str | None = None
    source_archive_dir: str | None = None


@dataclass(frozen=True)
class Sink:
    """Settings for Spark Structured Streaming file-sink outputs (format: spark_file_sink)."""

    compact_interval: int | None = None
    min_batches_to_retain: int | None = None
    cleanup_delay: int | None = None
    #: sink writeStream option ``retention`` and the horizon of ``sink_prune``
    retention: int | None = None
    #: replaced data files are deleted only this long after the manifest swap
    grace_period: int = 3600
    writer_stopped_check: bool = True
    #: the newest log file must be at least this old (writer stopped)
    quiet_period: int = 600
    #: the writing query's checkpoint dir; its commits/ must also be quiet
    checkpoint: str | None = None
    downstream_streaming_readers: DownstreamReaders = "unknown"
    #: plan sink_prune actions (drop manifest entries older than retention)
    prune: bool = False
    #: with prune: also delete the pruned data files after grace_period
    prune_delete_files: bool = False
    #: the writing query's file source (its settings are emitted by `compactor compile`)
    source: FileSource | None = None


@dataclass(frozen=True)
class Discover:
    """The tables under a folder (``root``) or in a catalog's namespace (``catalog``, ``namespace``) whose
    relative path or name matches ``include`` and no ``exclude`` glob."""

    root: str | None = None
    include: tuple[str, ...] = ("**",)
    exclude: tuple[str, ...] = ()
    #: a catalog of the target (profiles.yml ``catalogs:``) and the namespace (Glue: database) to list
    catalog: str | None = None
    namespace: str | None = None


#: a table named in a catalog of the target: ``catalog.namespace.table`` (the identifier its reference carries)
CatalogRef = TableIdentifier


@dataclass(frozen=True)
class DbtRef:
    """The dbt node a table comes from (compactor.yml ``dbt: {manifest}``): a model, snapshot or seed whose
    ``meta.compactor`` holds its policy. ``relation``: ``schema.alias`` as dbt writes it."""

    unique_id: str
    name: str
    resource_type: str
    relation: str


@dataclass(frozen=True)
class TablePolicy:
    """One table's declared maintenance policy, with defaults already merged."""

    name: str
    #: a registered format (compactor/models/formats.py)
    format: str = DEFAULT_FORMAT
    #: local path or URI; None for catalog tables (identified by ``name``) and discover entries
    path: str | None = None
    discover: Discover | None = None
    #: the table by its name in a catalog of the target (resolved through the catalog's API at plan time;
    #: a discover over a catalog gives each table it expands to its name there)
    catalog: TableIdentifier | None = None
    tags: tuple[str, ...] = ()
    #: the dbt node the policy was written on (None: a policy file's table)
    dbt: DbtRef | None = None
    owner: str | None = None
    description: str | None = None
    enabled: bool = True
    compaction: Compaction = field(default_factory=Compaction)
    retention: Retention | None = None
    sink: Sink | None = None
    #: where the table entry starts
    source: SourceRef = field(default_factory=lambda: SourceRef("<memory>"))
    #: dotted key inside the table entry ("compaction.partitions.where") -> SourceRef of its value
    locations: Mapping[str, SourceRef] = field(default_factory=dict)
    #: every value the merged entry declares (dotted key -> value as written), for `compile --explain`
    declared: Mapping[str, object] = field(default_factory=dict, compare=False)

    @property
    def is_catalog_table(self) -> bool:
        return self.path is None and self.discover is None and self.catalog is None

    @property
    def maintenance(self) -> tuple[str, ...]:
        """What the policy plans beside compaction, in `compactor ls`'s words: Iceberg's own maintenance its
        ``compaction:`` block enables (position delete files, manifests), and what its ``retention:`` block
        enables (a VACUUM, snapshot expiry, orphan-file removal)."""
        c, r = self.compaction, self.retention
        own = tuple(name for name, on in (("rewrite_manifests", c.manifests.enabled),
                                          ("rewrite_position_deletes", c.position_deletes.enabled)) if on)
        if r is None:
            return own
        return own + tuple(name for name, on in (
            ("vacuum", r.vacuum.enabled), ("expire_snapshots", r.expire_snapshots.enabled),
            ("remove_orphan_files", r.remove_orphan_files.enabled)) if on)

    def location(self, key: str) -> SourceRef:
        """Best known position of ``key`` (falls back to parents, then the table entry)."""
        parts = key.split(".")
        while parts:
            ref = self.locations.get(".".join(parts))
            if ref is not None:
                return ref
            parts.pop()
        return self.source
