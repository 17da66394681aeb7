"""Which files Iceberg's native ``rewrite_data_files`` may touch (PURE): the planned partitions of each
planned spec as data, one ``PartitionScope`` per partition (its spec and, per partition field, the field's
transform of its source column and the partition's raw value), turned into Iceberg's ``Expression`` by
spark_native.py. A transform term (``day(ts) = 19723``, ``bucket(16, id) = 3``) projects exactly onto a
spec with that transform of that column (Iceberg's ``ProjectionUtil.projectTransformPredicate``), so hidden
partitions are selected as the manifests store them; a spec without it is not narrowed by the term, which
is why spark_native.py checks the files the filter selects before anything runs.

A partition whose value or transform Iceberg's expressions cannot state exactly through py4j (a float,
binary, UUID or nanosecond value; a partition field whose source column was dropped; an unknown
transform) is refused by name: the exact-bin rewrite (method rewrite) compacts it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from compactor.formats.iceberg.state import IcebergState, PartitionValue

#: transforms with no parameter that Iceberg's ``Expressions`` names as terms
TIME_TRANSFORMS = ("year", "month", "day", "hour")
#: Python values of a partition that py4j hands to Java as Iceberg binds them exactly (str, int, bool,
#: Decimal; None: IS NULL)
_EXACT = (str, int, bool, Decimal)


@dataclass(frozen=True)
class FieldTerm:
    """One partition field's condition: ``transform(source) = value`` (``value`` None: IS NULL)."""

    source: str
    #: identity, year, month, day, hour, bucket, truncate
    transform: str
    #: bucket's number of buckets, truncate's width
    parameter: int | None
    value: str | int | bool | Decimal | None


@dataclass(frozen=True)
class PartitionScope:
    """One planned partition of one spec: every field's term (none: the unpartitioned spec); a ``void``
    field (always null) adds none."""

    spec_id: int
    terms: tuple[FieldTerm, ...]


class ScopeProblem(Exception):
    """Why a planned partition cannot be stated as Iceberg's filter (not a CompactorError: the caller words it)."""


_PARAMETRIC = re.compile(r"^(bucket|truncate)\[(\d+)\]$")


def partition_scope(state: IcebergState, spec_id: int, partition: tuple[PartitionValue, ...],
                    what: str) -> PartitionScope:
    """The scope of the partition ``partition`` of spec ``spec_id`` (``what``'s: a data or delete file's path,
    for messages); raises ScopeProblem naming what cannot be stated."""
    spec = state.spec(spec_id)
    if len(spec.fields) != len(partition):
        raise ScopeProblem(f"{what}: its partition tuple does not match spec {spec_id}")
    columns = {c.name: c.type for c in state.columns}
    terms: list[FieldTerm] = []
    for field, value in zip(spec.fields, partition, strict=True):
        transform, parameter = field.transform, None
        if transform == "void":
            continue
        found = _PARAMETRIC.match(transform)
        if found:
            transform, parameter = found.group(1), int(found.group(2))
        elif transform not in ("identity", *TIME_TRANSFORMS):
            raise ScopeProblem(f"partition field {field.name} uses the {field.transform} transform, which compactor "
                               "does not state as Iceberg's filter")
        if field.source is None:
            raise ScopeProblem(f"partition field {field.name}: its source column was dropped")
        raw = value.value
        if "_ns" in columns.get(field.source, ""):
            raise ScopeProblem(f"partition field {field.name}: nanosecond timestamps are not passed to Iceberg's "
                               "filter exactly")
        if raw is not None and not isinstance(raw, _EXACT):
            raise ScopeProblem(f"partition field {field.name}: its value {value.text} ({type(raw).__name__}) is not "
                               "passed to Iceberg's filter exactly")
        terms.append(FieldTerm(field.source, transform, parameter, raw))
    return PartitionScope(spec_id, tuple(terms))


def planned_scopes(state: IcebergState, groups: Sequence[Sequence[str]]) -> list[PartitionScope]:
    """The partitions of ``groups`` (each an action's files, of one partition of one spec), in order, one
    scope per distinct partition; raises ScopeProblem."""
    by_path = {f.path: f for f in state.files}
    out: dict[tuple[int, tuple[object, ...]], PartitionScope] = {}
    for paths in groups:
        files = [by_path[p] for p in paths if p in by_path]
        if not files:
            continue
        keys = {f.partition_key for f in files}
        if len(keys) != 1:
            raise ScopeProblem(f"an action's files are in {len(keys)} partitions: a native rewrite is scoped per "
                               "partition")
        first = files[0]
        out.setdefault(first.partition_key, partition_scope(state, first.spec_id, first.partition, first.path))
    return list(out.values())
