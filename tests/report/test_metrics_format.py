"""write_metrics: Prometheus text exposition format checked by a strict parser, JSON lines, atomic writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compactor.errors import CompactorError
from compactor.formats.delta.plan.actions import VacuumAction
from compactor.models.results import ActionResult, RunResults, compute_run_totals
from compactor.output.metrics import write_metrics
from compactor.planning.actions import CompactAction
from compactor.planning.plan import Plan, Skip, TablePlan
from compactor.planning.vocabulary import rewrite_types

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"'
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{((?:{_LABEL})(?:,{_LABEL})*)?\}})? (\S+)$")


def parse_prometheus(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A strict reader of the text format (version 0.0.4): HELP/TYPE once per family and before its samples,
    valid names and escapes, float values, no duplicate series, a final newline."""
    assert text.endswith("\n")
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    typed: dict[str, str] = {}
    helped: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert re.fullmatch(_NAME, name) and name not in helped, line
            helped.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in typed and kind in ("gauge", "counter", "untyped"), line
            assert not any(k[0] == name for k in samples), f"TYPE after samples: {line}"
            typed[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, labels = m.group(1), m.group(2) or ""
            assert name in typed, f"sample before its TYPE: {line}"
            pairs = tuple((k, re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n" else e.group(1), v))
                          for k, v in re.findall(_LABEL, labels))
            key = (name, pairs)
            assert key not in samples, f"duplicate series {line}"
            samples[key] = float(m.group(m.lastindex))
    return samples


def _plan(name: str = "t") -> Plan:
    compact = CompactAction(partition={"day": "1"}, input_files=8, input_bytes=8000, expected_output_files=1,
                            target_file_size=1 << 20, min_file_size=1 << 19)
    vacuum = VacuumAction(input_files=0, retention_hours=168)
    t = TablePlan(name, "/lake/t", "delta", "local", 3, actions=(compact, vacuum),
                  skipped=(Skip("too_few_small_files", {"day": "2"}, {"small_files": 2}),),
                  files_before=12, files_after=5, bytes_before=20_000)
    broken = TablePlan("broken", "/lake/b", "delta", "local", None, error="cannot read")
    return Plan("0.1", "2026-01-01T00:00:00Z", "p", {}, tables=(t, broken))


def _run(name: str = "t") -> RunResults:
    results = [ActionResult(name, "compact", {"day": "1"}, "success", 8, 1, 8000, 7900, duration_s=1.5),
               ActionResult(name, "compact", {"day": "2"}, "error", 0, 0, 0, 0, duration_s=0.5, error="boom"),
               ActionResult("other", "vacuum", {}, "skipped")]
    return RunResults("20260101T000000Z-abc", "0.1", "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z", "local", {},
                      {}, results=results, totals=compute_run_totals(results, rewrite_types()))


def test_prometheus_plan_and_run_samples(tmp_path: Path) -> None:
    out = write_metrics(tmp_path / "m" / "compactor.prom", plan=_plan(), run=_run())
    s = parse_prometheus(out.read_text())
    lab = (("table", "t"), ("format", "delta"))
    assert s[("compactor_table_files", lab)] == 12
    assert s[("compactor_table_small_files", lab)] == 8 + 2  # planned inputs + small files left in skipped partitions
    assert s[("compactor_plan_bytes_to_rewrite", lab)] == 8000  # vacuum rewrites nothing
    assert s[("compactor_plan_actions", lab)] == 2 and s[("compactor_plan_files_after", lab)] == 5
    assert s[("compactor_plan_table_error", (("table", "broken"), ("format", "delta")))] == 1
    t = (("table", "t"),)
    assert s[("compactor_apply_bytes_rewritten", t)] == 8000  # the failed action rewrote nothing
    assert s[("compactor_apply_failures", t)] == 1 and s[("compactor_apply_duration_seconds", t)] == 2.0
    assert s[("compactor_apply_actions", t + (("status", "error"),))] == 1
    assert s[("compactor_apply_actions", (("table", "other"), ("status", "skipped")))] == 1
    assert ("compactor_apply_last_run_timestamp_seconds", ()) in s
    assert [p.name for p in out.parent.iterdir()] == ["compactor.prom"]  # no temp file left behind


def test_label_values_are_escaped(tmp_path: Path) -> None:
    name = 'we"ird\\name\nx'
    s = parse_prometheus(write_metrics(tmp_path / "x.prom", run=_run(name)).read_text())
    assert s[("compactor_apply_files_removed", (("table", name),))] == 8


def test_jsonl_has_one_object_per_sample(tmp_path: Path) -> None:
    out = write_metrics(tmp_path / "m.jsonl", plan=_plan())
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["metric"] for r in rows} >= {"compactor_table_files", "compactor_plan_bytes_to_rewrite"}
    assert all(set(r) == {"metric", "labels", "value", "timestamp"} for r in rows)
    # an explicit format wins over the suffix
    assert parse_prometheus(write_metrics(tmp_path / "m.jsonl", plan=_plan(), format="prometheus").read_text())


def test_rewrite_replaces_the_whole_file(tmp_path: Path) -> None:
    p = tmp_path / "c.prom"
    write_metrics(p, plan=_plan("first"))
    write_metrics(p, run=_run("second"))
    text = p.read_text()
    assert 'table="first"' not in text and 'table="second"' in text


def test_unknown_suffix_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CompactorError, match="metrics format"):
        write_metrics(tmp_path / "m.csv", plan=_plan())
