"""Plan a policy's Iceberg maintenance (PURE): from the state at the planned snapshot, one
``rewrite_position_deletes`` action per partition holding at least ``min_input_files`` live position delete
files (listing every one of them: Iceberg's action, filtered to the partition with ``rewrite-all``, rewrites
them all), and one ``rewrite_manifests`` action per partition spec whose data manifests in the snapshot
number at least ``min_count`` (listing the manifests Iceberg's action rewrites for that spec: its data
manifests, and its delete manifests when there is more than one); or skips saying why not. A partition is
planned only when the rewrite makes its delete files fewer (``expected_delete_files``: Iceberg writes one
per partition, or with the table's default ``file`` granularity one per data file they apply to), so a
table converges. Deterministic: partitions, specs and paths sorted.

Not planned: position deletes of a format-version 3 table (Iceberg's action turns them into deletion
vectors, a different operation), deletion vectors and equality deletes (not what the action rewrites), and
a partition whose spec has a transform Iceberg's filter cannot select exactly (``void``, or a dropped source
column). The local engine plans neither action: pyiceberg 0.12 rewrites neither delete files nor manifests."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from compactor.formats.iceberg.maintenance_actions import (
    IcebergMaintenanceSkip,
    RewriteManifestsAction,
    RewritePositionDeletesAction,
)
from compactor.formats.iceberg.read import SPEC_COLUMN
from compactor.formats.iceberg.state import IcebergDeleteFile, IcebergManifest, IcebergState, PartitionValue, Spec
from compactor.planning.actions import Action, Precondition
from compactor.planning.plan import Skip, SkipReason
from compactor.policy.model import Compaction

#: the transforms Iceberg's expressions select a partition value of exactly (``bucket[16]`` -> ``bucket``)
SELECTABLE = frozenset({"identity", "bucket", "truncate", "year", "month", "day", "hour"})
#: Iceberg's ``commit.manifest.target-size-bytes`` default: the size its manifest rewrite aims at
MANIFEST_TARGET = 8 * 2**20


def transform_name(transform: str) -> str:
    """``bucket[16]`` -> ``bucket``."""
    return transform.split("[", 1)[0]


def unselectable(spec: Spec) -> str | None:
    """Why Iceberg's filter cannot select exactly one partition of ``spec``, or None."""
    for f in spec.fields:
        if f.source is None:
            return f"partition field {f.name}'s source column was dropped"
        if transform_name(f.transform) not in SELECTABLE:
            return f"partition field {f.name} has transform {f.transform}"
    return None


def partition_values(columns: Sequence[str], spec_id: int, partition: Sequence[PartitionValue]) -> dict[str, str | None]:
    """A file's partition as the plan names it: every partition column, its spec's fields' texts, the spec
    column when the table has several specs (read.py)."""
    values: dict[str, str | None] = {c: None for c in columns}
    values.update({v.name: v.text for v in partition})
    if SPEC_COLUMN in values:
        values[SPEC_COLUMN] = str(spec_id)
    return values


def plan_maintenance(c: Compaction, st: IcebergState, columns: Sequence[str], *, version: int | None,
                     engine: str) -> tuple[list[Action], list[Skip]]:
    """The maintenance actions of one table, or skips saying why not (module docstring)."""
    wanted = [name for name, on in (("compaction.position_deletes", c.position_deletes.enabled),
                                    ("compaction.manifests", c.manifests.enabled)) if on]
    if not wanted or st.snapshot_id is None:
        return [], []
    if engine != "spark":
        return [], [Skip(IcebergMaintenanceSkip.NEEDS_SPARK, None, {"engine": engine},
                         f"{' and '.join(wanted)}: the {engine} engine does not rewrite Iceberg's delete files or "
                         "manifests (pyiceberg 0.12 has no such operation): the spark engine runs Iceberg's own "
                         "actions")]
    actions: list[Action] = []
    skips: list[Skip] = []
    # manifests first: their rewrite leaves every delete file live, so a position delete rewrite planned at
    # the same snapshot still finds its inputs; the other way round the manifests would have changed
    if c.manifests.enabled:
        a, s = _manifests(st, c.manifests.min_count, version)
        actions += a
        skips += s
    if c.position_deletes.enabled:
        a, s = _position_deletes(st, columns, c.position_deletes.min_input_files, version)
        actions += a
        skips += s
    return actions, skips


#: the table property saying whether a position delete file Iceberg writes names one data file (``file``,
#: Iceberg 1.12's default) or a partition's (``partition``): its rewrite writes one per data file, or one
GRANULARITY = "write.delete.granularity"


def expected_delete_files(paths: Sequence[str], targets: Mapping[str, set[str]], per_file: bool) -> int:
    """The delete files Iceberg's rewrite of ``paths`` writes: none for deletes of no live data file; else
    one, or with ``per_file`` granularity one per live data file they apply to (an upper bound: a
    partition-scoped delete file applies to every older file of its partition)."""
    live = {t for p in paths for t in targets.get(p, ())}
    if not live:
        return 0
    return len(live) if per_file else 1


def _position_deletes(st: IcebergState, columns: Sequence[str], min_files: int,
                      version: int | None) -> tuple[list[Action], list[Skip]]:
    if st.format_version >= 3:
        return [], [Skip(SkipReason.UNSUPPORTED, None, {"format_version": st.format_version},
                         "compaction.position_deletes: a format-version 3 table keeps deletion vectors; Iceberg's "
                         "action would turn its position delete files into them, which is not planned")]
    by_partition: dict[tuple[int, tuple[object, ...]], list[IcebergDeleteFile]] = {}
    for d in st.delete_files:
        if d.kind == "position":
            by_partition.setdefault(d.partition_key, []).append(d)
    targets = st.live.delete_targets()
    per_file = st.properties.get(GRANULARITY, "file") != "partition"
    actions: list[Action] = []
    skips: list[Skip] = []
    below = no_gain = 0
    for key in sorted(by_partition, key=repr):
        files = sorted(by_partition[key], key=lambda d: d.path)
        if len(files) < min_files:
            below += 1
            continue
        values = partition_values(columns, files[0].spec_id, files[0].partition)
        why = unselectable(st.spec(files[0].spec_id))
        if why is not None:
            skips.append(Skip(SkipReason.UNSUPPORTED, values, {"files": len(files)},
                              f"{len(files)} position delete file(s): {why}, which Iceberg's filter cannot select "
                              "exactly"))
            continue
        paths = tuple(d.path for d in files)
        dangling = sum(1 for p in paths if not targets.get(p))
        outputs = expected_delete_files(paths, targets, per_file)
        if outputs >= len(paths):
            no_gain += 1
            continue
        size = sum(d.size for d in files)
        actions.append(RewritePositionDeletesAction(
            partition=values, spec_id=files[0].spec_id, files=paths, min_input_files=min_files, dangling=dangling,
            input_files=len(paths), input_bytes=size, expected_output_files=outputs,
            precondition=Precondition.of(version, paths),
            reason=f"{len(paths)} position delete file(s) in one partition (>= {min_files}), {dangling} of them "
                   "applying to no live data file"))
    if not actions and not skips:
        most = max((len(v) for v in by_partition.values()), default=0)
        skips.append(Skip(IcebergMaintenanceSkip.FEW_DELETE_FILES, None,
                          {"partitions": below, "most_files": most, "min_input_files": min_files,
                           "no_reduction": no_gain},
                          f"no partition holds {min_files} position delete files or more that Iceberg's rewrite "
                          f"would make fewer (the most: {most}, in {len(by_partition)} partition(s) with any; "
                          f"{no_gain} would not shrink: {GRANULARITY} is "
                          f"{'file' if per_file else 'partition'})"))
    return actions, skips


def rewritten_manifests(manifests: Sequence[IcebergManifest], properties: Mapping[str, str]) -> list[IcebergManifest]:
    """The manifests of one spec that Iceberg's rewrite takes: per content (data, deletes), all of them
    unless there is one no bigger than its target size (then it leaves that one alone)."""
    try:
        target = int(properties.get("commit.manifest.target-size-bytes", MANIFEST_TARGET))
    except ValueError:
        target = MANIFEST_TARGET
    out: list[IcebergManifest] = []
    for content in ("data", "deletes"):
        mine = [m for m in manifests if m.content == content]
        if len(mine) > 1 or (mine and math.ceil(sum(m.length for m in mine) / max(1, target)) > 1):
            out += mine
    return out


def _manifests(st: IcebergState, min_count: int, version: int | None) -> tuple[list[Action], list[Skip]]:
    by_spec: dict[int, list[IcebergManifest]] = {}
    for m in st.manifests:
        by_spec.setdefault(m.spec_id, []).append(m)
    actions: list[Action] = []
    counts = {spec: sum(1 for m in ms if m.content == "data") for spec, ms in by_spec.items()}
    for spec_id in sorted(by_spec):
        if counts[spec_id] < min_count:
            continue
        chosen = sorted(rewritten_manifests(by_spec[spec_id], st.properties), key=lambda m: m.path)
        paths = tuple(m.path for m in chosen)
        size = sum(m.length for m in chosen)
        outputs = sum(max(1, math.ceil(sum(m.length for m in chosen if m.content == c) / MANIFEST_TARGET))
                      for c in ("data", "deletes") if any(m.content == c for m in chosen))
        actions.append(RewriteManifestsAction(
            spec_id=spec_id, files=paths, min_count=min_count, entries=sum(m.live_files for m in chosen),
            input_files=len(paths), input_bytes=size, expected_output_files=outputs,
            precondition=Precondition.of(version, paths),
            reason=f"{counts[spec_id]} data manifest(s) of partition spec {spec_id} in the current snapshot "
                   f"(>= {min_count})"))
    if actions:
        return actions, []
    most = max(counts.values(), default=0)
    return [], [Skip(IcebergMaintenanceSkip.FEW_MANIFESTS, None, {"most_manifests": most, "min_count": min_count},
                     f"no partition spec has {min_count} data manifests or more in the current snapshot (the most: "
                     f"{most})")]
