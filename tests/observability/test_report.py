"""The HTML report from the demo lake, before and after apply, checked in a real headless Chromium."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from compactor import api
from compactor.api import ProjectOptions
from compactor.output.report.html import build_report
from compactor.output.report.png import chromium_cmd, find_chromium
from compactor.tasks.demo import build_demo
from compactor.tasks.report import collect_report


def _dom(html_file: Path, tmp: Path) -> str:
    binary = find_chromium()
    assert binary, "Chromium is required for the report test (.ci/run installs Debian's chromium)"
    shot = tmp / f"{html_file.stem}.png"
    subprocess.run(chromium_cmd(binary, str(tmp / "profile-shot"), f"--screenshot={shot}", "--window-size=900,1400",
                                html_file.as_uri()), check=True, capture_output=True, timeout=90)
    assert shot.stat().st_size > 5000  # a real screenshot was taken
    out = subprocess.run(chromium_cmd(binary, str(tmp / "profile-dom"), "--dump-dom", html_file.as_uri()),
                         check=True, capture_output=True, text=True, timeout=90)
    return out.stdout


def test_report_before_and_after_apply_in_a_browser(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo", with_sink=False)
    opts = ProjectOptions(project_dir=demo.project_dir, select=("events",))

    before = tmp_path / "before.html"
    before.write_text(build_report(collect_report(opts)))
    html = before.read_text()
    assert not re.search(r"(src|href)=\"?https?://", html)  # self-contained: opens offline
    dom = _dom(before, tmp_path)
    assert 'data-rendered="yes"' in dom and '<pre id="errors"></pre>' in dom  # charts drawn, no script errors
    assert len(re.findall(r'data-chart="size-histogram"', dom)) == 1
    # six date partitions, all small files, all planned for compaction
    assert len(re.findall(r'data-planned="true"', dom)) == 6
    bars = re.findall(r'data-series="now" data-label="[^"]*" data-value="(\d+)"', dom)
    assert sum(int(b) for b in bars) == 300
    assert "before last apply" not in dom and 'data-chart="trend-files"' not in dom

    run = api.apply(opts)
    assert run.ok
    after = tmp_path / "after.html"
    r = subprocess.run([sys.executable, "-m", "compactor", "report", "--project-dir", str(demo.project_dir),
                        "--select", "events", "--out", str(after), "--png-dir", str(tmp_path / "png")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    dom = _dom(after, tmp_path)
    assert 'data-rendered="yes"' in dom and '<pre id="errors"></pre>' in dom
    now = [int(v) for v in re.findall(r'data-series="now" data-label="[^"]*" data-value="(\d+)"', dom)]
    was = [int(v) for v in re.findall(r'data-series="before last apply" data-label="[^"]*" data-value="(\d+)"', dom)]
    assert sum(now) == 6 and sum(was) == 300
    assert 'data-planned="true"' not in dom  # nothing left to compact
    assert re.search(r'data-chart="trend-files".*data-series="removed" data-label="[^"]*" data-value="300"', dom, re.S)
    assert 'data-marker="target"' in dom
    pngs = sorted(p.name for p in (tmp_path / "png").glob("*.png"))
    assert "events-size-histogram.png" in pngs and len(pngs) >= 4


@pytest.mark.spark
def test_report_draws_sink_manifest_and_checkpoint_growth(spark, tmp_path: Path) -> None:
    from compactor.output.report.html import _table_section
    from tests.sink.helpers import add_input, run_query

    src, out, cp = tmp_path / "in", tmp_path / "lake" / "clicks", tmp_path / "lake" / "cp"
    for b in range(5):
        add_input(src, b)
    run_query(spark, src, out, cp)
    proj = tmp_path / "proj"
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: p\n")
    (proj / "policies" / "s.yml").write_text(
        f"version: 1\ntables:\n  - name: clicks\n    path: {out}\n    format: spark_file_sink\n"
        f"    sink: {{checkpoint: {cp}, downstream_streaming_readers: none, quiet_period: 0m}}\n")
    (rep,) = collect_report(ProjectOptions(project_dir=proj))
    # the writer (minBatchesToRetain 2, cleanupDelay 0) deleted batches 0 and 1 after compacting at 2
    assert [(b, c) for b, _, _, c in rep.manifest] == [(2, True), (3, False), (4, False)]
    compact, b3, b4 = rep.manifest
    assert compact[2] == 3 * b3[2] and b3[2] == b4[2] == 2  # 2.compact lists batches 0-2, 2 partitions each
    assert compact[1] > b3[1]
    assert [b for b, *_ in rep.checkpoint_sources["0"]][-1] == 4  # the file source's log, up to batch 4
    html = _table_section(rep)
    for chart in ("manifest-bytes", "manifest-entries", "checkpoint-source-0-entries"):
        assert f'data-chart="{chart}"' in html
    assert html.count('data-planned="true"') >= 2  # the .compact files are highlighted in both manifest charts
