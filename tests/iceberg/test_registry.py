"""Iceberg's registry line as the shared layers read it: its detection (a ``metadata/`` folder, yielding to
Delta), plan integrity's refusal of a path in its metadata folder (a visible name, matched as a whole path
part: a partition folder that merely starts with it is data), its plan words, and the catalog types."""

from __future__ import annotations

from pathlib import Path

from compactor.formats import get_format
from compactor.formats.discover import detect_at
from compactor.models.catalog import CATALOG_TYPES
from compactor.models.formats import format_spec, metadata_names
from compactor.planning.integrity import path_problem
from compactor.planning.vocabulary import action_types, skip_reasons


def test_the_registry_line() -> None:
    spec = format_spec("iceberg")
    assert spec is not None and spec.catalog_only and spec.path_planning and spec.absolute_paths and spec.retention
    assert spec.retention_keys == frozenset({"expire_snapshots", "remove_orphan_files"})
    assert spec.yields_to == frozenset({"delta"}) and spec.strategies == frozenset({"bin_pack"})
    assert "metadata" in metadata_names()
    assert get_format("iceberg").name == "iceberg" and get_format("iceberg").libraries == ("pyiceberg",)
    assert action_types("iceberg") == frozenset({"compact", "expire_snapshots", "remove_orphan_files",
                                                 "rewrite_position_deletes", "rewrite_manifests"})
    assert {"iceberg_delete_files", "iceberg_older_spec", "iceberg_not_parquet", "iceberg_nothing_to_expire",
            "iceberg_no_orphan_files"} <= set(skip_reasons())
    assert {"sql", "rest"} <= set(CATALOG_TYPES)


def test_a_folder_holding_metadata_is_an_iceberg_table(tmp_path: Path) -> None:
    (tmp_path / "t" / "metadata").mkdir(parents=True)
    found = detect_at(str(tmp_path / "t"))
    assert found is not None and found.format == "iceberg" and found.evidence == "metadata/"
    assert detect_at(str(tmp_path)) is None


def test_plan_integrity_refuses_the_metadata_folder_and_keeps_data_that_starts_with_its_name() -> None:
    assert path_problem("metadata/00001-x.metadata.json", absolute_ok=True) is not None
    assert path_problem("file:///wh/db/t/metadata/snap-1.avro", absolute_ok=True) is not None
    assert path_problem("file:///wh/db/t/data/metadata_source=x/00000-0-a.parquet", absolute_ok=True) is None
    assert path_problem("metadata_source=x/part-0.parquet") is None  # a Delta partition folder
    assert path_problem("_delta_log.tmp/x.parquet") is not None  # a hidden name still matches as a prefix
