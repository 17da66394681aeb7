"""Report trends after two real applies: files removed/added, bytes rewritten, live files and mean size."""

from __future__ import annotations

import re
from pathlib import Path

from compactor import api
from compactor.api import ProjectOptions
from compactor.output.report.html import build_report, write_report
from compactor.tasks.report import collect_report
from tests.apply.helpers import make_table, one_table_project


def _values(page: str, chart: str, series: str) -> list[float]:
    svg = re.search(rf'data-chart="{chart}".*?</svg>', page, re.S).group(0)
    return [float(v) for v in re.findall(rf'data-series="{series}" data-label="[^"]*" data-value="([^"]+)"', svg)]


def test_trends_after_two_applies(tmp_path: Path) -> None:
    t = tmp_path / "lake" / "t"
    n = make_table(t, partitions=2, appends=4)
    p = one_table_project(tmp_path / "proj", t)
    opts = ProjectOptions(project_dir=p)
    first = api.apply(opts)
    make_table(t, partitions=2, appends=2, start=n)
    second = api.apply(opts)
    assert first.ok and second.ok

    [rep] = collect_report(opts)
    page = build_report([rep], generated_at="2026-01-01T00:00:00Z")
    assert _values(page, "trend-files", "removed") == [8, 6]  # 4 files per partition, then 1 old + 2 new
    assert _values(page, "trend-files", "added") == [2, 2]
    assert _values(page, "trend-bytes", "bytes rewritten") == [first.totals.bytes_rewritten,
                                                               second.totals.bytes_rewritten]
    assert _values(page, "trend-file-count", "files") == [2, 2]
    mean = _values(page, "trend-mean-size", "mean size")
    assert mean[1] > mean[0] > 0  # the second apply folded more rows into the same two files
    # before vs after the last apply: 6 files before it, 2 now
    assert sum(_values(page, "size-histogram", "before last apply")) == 6
    assert sum(_values(page, "size-histogram", "now")) == 2
    out = write_report(tmp_path / "out" / "r.html", [rep])
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")
