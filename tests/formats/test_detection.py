"""Which format a folder is a table of: each registered format's own ``detect`` (compactor/models/formats.py),
asked of one listing per folder by discover and name by name for a bare path; two formats claiming one
folder are resolved by a policy's ``format:`` or by the registry's ``yields_to``, else refused naming both.
And the registry itself: a format registered from outside is read by every layer, and gone once closed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import write_deltalake

from compactor.cli import cli
from compactor.errors import TableReadError
from compactor.formats import get_format
from compactor.formats.discover import Claim, detect_at, discover_tables, format_at
from compactor.models.formats import FORMAT_NAMES, FORMATS, FormatSpec, format_spec, metadata_names, register_format
from compactor.models.table import TableLocation
from compactor.planning.integrity import path_problem
from compactor.policy.schema import load_schema
from compactor.runtime.journal import is_data_file
from tests.formats.contract import toy_format

TOY = toy_format.__name__
#: a format claiming the folders Iceberg claims (``metadata/``) without yielding to Delta: a UniForm table's folder
#: is then ambiguous (Iceberg's own entry yields to Delta: a UniForm table is committed through its Delta log)
RIVAL = FormatSpec("rival", TOY, TOY, "tests.formats.mirror_probe", ("metadata",))


def _delta(path: Path) -> None:
    write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))


def _sink_log(path: Path) -> None:
    (path / "_spark_metadata").mkdir(parents=True)
    (path / "_spark_metadata" / "0").write_text("v1\n")


def _table_format_enum() -> list[str]:
    enum: list[str] = load_schema("policy.schema.json")["$defs"]["table"]["properties"]["format"]["enum"]
    return enum


def test_a_registered_format_is_read_everywhere_until_its_registration_closes() -> None:
    before = (tuple(FORMAT_NAMES), _table_format_enum(), metadata_names())
    with register_format(toy_format.SPEC) as spec:
        assert spec.name in FORMAT_NAMES and format_spec(spec.name) is spec and FORMATS[-1] is spec
        assert spec.name in _table_format_enum()  # the policy schema's enum, read after the registration
        assert toy_format.MANIFEST in metadata_names()
        assert path_problem(toy_format.MANIFEST) is not None and not is_data_file(f"x/{toy_format.MANIFEST}/y.parquet")
        assert get_format(spec.name).name == spec.name
        with pytest.raises(ValueError, match="already registered"):
            register_format(spec)
    assert (tuple(FORMAT_NAMES), _table_format_enum(), metadata_names()) == before
    assert path_problem(toy_format.MANIFEST) is None and is_data_file(f"x/{toy_format.MANIFEST}/y.parquet")


def test_a_registry_entry_must_name_its_metadata() -> None:
    with pytest.raises(ValueError, match="metadata names no entry"):
        register_format(FormatSpec("bare", TOY, TOY, TOY, ()))
    assert "bare" not in FORMAT_NAMES


def test_each_format_detects_its_own_tables_by_folder_or_by_file(tmp_path: Path) -> None:
    _delta(tmp_path / "lake" / "d")
    _sink_log(tmp_path / "lake" / "s")
    (tmp_path / "lake" / "plain").mkdir()
    (tmp_path / "lake" / "plain" / "x.parquet").write_bytes(b"not a table")
    with register_format(toy_format.SPEC):
        (tmp_path / "lake" / "toy").mkdir()
        toy_format.create(TableLocation(str(tmp_path / "lake" / "toy")))
        found = {p: detect_at(str(tmp_path / "lake" / p)) for p in ("d", "s", "toy", "plain")}
        assert {p: (d.format, d.evidence) if d else None for p, d in found.items()} == {
            "d": ("delta", "_delta_log"), "s": ("spark_file_sink", "_spark_metadata"),
            "toy": ("toy", toy_format.MANIFEST), "plain": None}
        assert [discover_tables(str(tmp_path), fmt=f) for f in ("delta", "spark_file_sink", "toy")] == \
            [["lake/d"], ["lake/s"], ["lake/toy"]]
    with pytest.raises(TableReadError, match="unknown table format 'toy'"):
        discover_tables(str(tmp_path), fmt="toy")


def test_a_bare_path_two_formats_claim_is_refused_naming_both(tmp_path: Path) -> None:
    t = tmp_path / "t"
    _delta(t)
    _sink_log(t)
    with pytest.raises(TableReadError) as e:
        detect_at(str(t))
    assert str(e.value).startswith(f"{t} is a delta table (it has _delta_log) and a spark_file_sink table "
                                   "(it has _spark_metadata): compactor cannot tell which format to plan it as")
    assert "`format:`" in str(e.value)
    r = CliRunner().invoke(cli, ["inspect", str(t)], catch_exceptions=False)
    assert r.exit_code == 2 and "cannot tell which format" in r.output and "Traceback" not in r.output, r.output
    # a policy names the format: discover looks for that format only, and finds the table
    assert discover_tables(str(tmp_path), fmt="delta") == ["t"] == discover_tables(str(tmp_path), fmt="spark_file_sink")


def test_a_format_that_yields_steps_aside_and_says_so(tmp_path: Path) -> None:
    uniform, mirrored = tmp_path / "uniform", tmp_path / "mirrored"
    _delta(uniform)
    (uniform / "metadata").mkdir()
    (mirrored / "metadata").mkdir(parents=True)
    found = detect_at(str(uniform))  # a UniForm table: Iceberg metadata beside the Delta log
    assert found is not None and (found.format, found.yielded) == ("delta", (Claim("iceberg", "metadata/"),))
    assert format_at(str(uniform)) is get_format("delta")
    alone = detect_at(str(mirrored))
    assert alone is not None and (alone.format, alone.yielded) == ("iceberg", ())
    # discover looks for the policy's format: Iceberg's policy finds both, Delta's the Delta table
    assert discover_tables(str(tmp_path), fmt="iceberg") == ["mirrored", "uniform"]
    assert discover_tables(str(tmp_path), fmt="delta") == ["uniform"]
    with register_format(RIVAL), pytest.raises(TableReadError, match="a delta table .* and a rival table"):
        detect_at(str(uniform))


def test_discover_lists_another_format_s_table_like_any_folder(tmp_path: Path) -> None:
    """Discover stops at the tables of the policy's format only, as it did before formats detected
    themselves: a folder another format claims (or that looks like its metadata) hides no table below it."""
    _delta(tmp_path / "x" / "metadata" / "inner")
    assert detect_at(str(tmp_path / "x")) is not None  # Iceberg claims x (it holds metadata/)
    assert discover_tables(str(tmp_path)) == ["x/metadata/inner"]
