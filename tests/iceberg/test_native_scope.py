"""The planned partitions as Iceberg's native rewrite is filtered to them (formats/iceberg/native_scope.py,
PURE), and its options (spark_native.rewrite_options), on pyiceberg-written tables: no JVM. The filter built
from them is exercised against Iceberg's own planner in tests/iceberg/test_spark_native.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from compactor.formats.iceberg.native_scope import FieldTerm, ScopeProblem, planned_scopes  # noqa: E402
from compactor.formats.iceberg.spark_native import rewrite_options  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.planning.actions import CompactAction, Precondition  # noqa: E402
from tests.iceberg.tables import catalog, make_table  # noqa: E402


def test_each_spec_states_its_own_fields_and_a_null_value_is_is_null(tmp_path: Path) -> None:
    table = make_table(tmp_path, "two_specs")
    st = state_of(table, "db.two_specs")
    by_spec = {f.spec_id: f for f in st.files}
    old, new = planned_scopes(st, [[by_spec[0].path], [by_spec[1].path]])
    assert old.spec_id == 0 and [(t.source, t.transform) for t in old.terms] == [("grp", "identity")]
    assert new.spec_id == 1 and [(t.source, t.transform) for t in new.terms] == [("grp", "identity"), ("ts", "day")]
    assert isinstance(new.terms[1].value, int)  # days since the epoch, as the manifest stores it

    strings = state_of(make_table(tmp_path, "identity_string"), "db.identity_string")
    nulls = [f for f in strings.files if f.partition[0].value is None]
    (scope,) = planned_scopes(strings, [[f.path for f in nulls]])
    assert scope.terms == (FieldTerm("cat", "identity", None, None),)


def test_a_bucket_keeps_its_width_and_files_of_two_partitions_are_refused(tmp_path: Path) -> None:
    st = state_of(make_table(tmp_path, "bucket"), "db.bucket")
    first = st.files[0]
    (scope,) = planned_scopes(st, [[first.path]])
    assert scope.terms == (FieldTerm("id", "bucket", 4, first.partition[0].value),)
    other = next(f for f in st.files if f.partition_key != first.partition_key)
    with pytest.raises(ScopeProblem, match="2 partitions"):
        planned_scopes(st, [[first.path, other.path]])


def test_a_float_partition_value_is_refused_by_name(tmp_path: Path) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField

    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
    table = catalog(tmp_path).create_table("db.f", schema=schema,
                                           partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "x")))
    table.append(pa.table({"id": [1, 2], "x": [0.5, 0.5]}, schema=schema.as_arrow()))
    st = state_of(table, "db.f")
    with pytest.raises(ScopeProblem, match=r"partition field x: its value 0\.5 \(float\)"):
        planned_scopes(st, [[f.path for f in st.files]])


def _compact(files: int, *, target: int = 1000, small: int = 750) -> CompactAction:
    paths = tuple(f"p{i}" for i in range(files))
    return CompactAction(target_file_size=target, min_file_size=small, input_files=files, bins=(paths,),
                         precondition=Precondition.of(1, paths), method="optimize")


def test_rewrite_options_take_the_policys_sizes_and_the_fewest_planned_files() -> None:
    options = rewrite_options([_compact(7), _compact(3)])
    assert options["target-file-size-bytes"] == "1000" and options["min-file-size-bytes"] == "750"
    assert options["min-input-files"] == "3"
    assert int(options["max-file-size-bytes"]) > 1 << 40  # no file is rewritten for being large
    assert options["partial-progress.enabled"] == "false" and options["use-starting-sequence-number"] == "true"
    # Iceberg wants min below target: min_file_size may equal target_file_size in a policy
    assert rewrite_options([_compact(2, small=1000)])["min-file-size-bytes"] == "999"


def test_delete_thresholds_take_the_files_the_plan_took_for_their_deletes(tmp_path: Path) -> None:
    """Iceberg's planner must take a file the plan took alone for its deletes (plan.delete_candidates): its
    ratio of file-scoped deletes, or its count of delete files where they are not file-scoped."""
    from compactor.formats.iceberg.spark_native import delete_thresholds
    from tests.iceberg.tables import commit_position_deletes

    table = make_table(tmp_path, "identity_int")
    st = state_of(table, "db.identity_int")
    first, second = [f for f in st.files if f.partition[0].value == 0][:2]
    assert delete_thresholds([_with(first.path)], st) == {"delete-ratio-threshold": "1.0"}  # no deletes

    commit_position_deletes(table, {first.path: [0, 1, 2]}, file_scoped=True)
    commit_position_deletes(table, {second.path: [0]})  # partition-scoped: Iceberg does not count its rows
    st = state_of(table, "db.identity_int")
    alone = delete_thresholds([_with(first.path)], st)
    assert alone == {"delete-ratio-threshold": repr(3 / first.record_count)}
    assert delete_thresholds([_with(second.path)], st) == {"delete-ratio-threshold": "1.0",
                                                          "delete-file-threshold": "1"}
    # small files packed together are taken for their size: no threshold follows from them
    assert delete_thresholds([_with(first.path, second.path)], st) == {"delete-ratio-threshold": "1.0"}


def _with(*paths: str) -> CompactAction:
    return CompactAction(target_file_size=1 << 20, min_file_size=1 << 19, input_files=len(paths), bins=(paths,),
                         precondition=Precondition.of(1, paths), method="optimize")
