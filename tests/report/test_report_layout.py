"""The HTML report's layout, measured in headless Chromium: the lake overview first, tables by benefit,
charts as wide as the page, every chart visible, no two labels overlapping, no label cut off; and a
partition already at its ideal file count is not "100% small"."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from compactor import api
from compactor.api import ProjectOptions
from compactor.output.report.png import chromium_cmd, find_chromium
from compactor.tasks.report import TableReport
from tests.apply.helpers import make_table

#: run in the page after load: bounding boxes of every chart and every label, written to data attributes
MEASURE = """
<script>
window.addEventListener('load', function () {
  var problems = [], overlaps = [], charts = document.querySelectorAll('svg.chart');
  var vw = document.documentElement.clientWidth, main = document.querySelector('main');
  var ms = getComputedStyle(main);
  var content = main.clientWidth - parseFloat(ms.paddingLeft) - parseFloat(ms.paddingRight);
  function where(svg) {
    var sec = svg.closest('section');
    return (sec.getAttribute('data-table') || sec.getAttribute('data-section')) + '/' + svg.getAttribute('data-chart');
  }
  charts.forEach(function (svg) {
    var r = svg.getBoundingClientRect(), st = getComputedStyle(svg), name = where(svg);
    if (r.width < 100 || r.height < 50 || st.display === 'none' || st.visibility !== 'visible' || st.opacity === '0')
      problems.push(name + ': not visible');
    if (r.left < -0.5 || r.right > vw + 0.5) problems.push(name + ': outside the page width');
    if (r.width < 0.45 * content) problems.push(name + ': ' + Math.round(r.width) + 'px of ' + Math.round(content));
    if (!svg.querySelector('rect[data-value]')) problems.push(name + ': no marks');
    var boxes = Array.prototype.map.call(svg.querySelectorAll('text'), function (t) {
      return {t: t.textContent, b: t.getBoundingClientRect()};
    });
    boxes.forEach(function (x) {
      var b = x.b;
      if (b.width === 0) return;
      if (b.left < r.left - 1 || b.right > r.right + 1 || b.top < r.top - 1 || b.bottom > r.bottom + 1)
        problems.push(name + ': label cut off: ' + x.t);
    });
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i].b, b = boxes[j].b;
      var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 0.5 && h > 0.5) overlaps.push(name + ': "' + boxes[i].t + '" x "' + boxes[j].t + '"');
    }
  });
  // a row of charts spans the content width
  document.querySelectorAll('.grid').forEach(function (g) {
    var rows = {};
    Array.prototype.forEach.call(g.children, function (c) {
      var r = c.getBoundingClientRect(), k = Math.round(r.top);
      rows[k] = rows[k] || {l: r.left, r: r.right};
      rows[k].l = Math.min(rows[k].l, r.left); rows[k].r = Math.max(rows[k].r, r.right);
    });
    Object.keys(rows).forEach(function (k) {
      if (rows[k].r - rows[k].l < content - 2) problems.push('a row of charts is ' + Math.round(rows[k].r - rows[k].l) +
                                                            'px wide of ' + Math.round(content));
    });
  });
  document.body.setAttribute('data-layout', JSON.stringify({charts: charts.length, width: vw, content: content,
                                                            problems: problems, overlaps: overlaps}));
});
</script>
"""


def _policy(name: str, path: Path) -> str:
    return (f"  - name: {name}\n    path: {path}\n    compaction:\n      target_file_size: 1MiB\n"
            "      triggers: {min_input_files: 2}\n")


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four tables (planned, many long partitions, compacted twice, unreadable) and a report of them."""
    root = tmp_path_factory.mktemp("layout")
    make_table(root / "lake" / "orders", partitions=12, appends=4)
    segs = root / "lake" / "segments"
    for _ in range(2):  # 70 partitions with long names: labels must be thinned and shortened
        write_deltalake(str(segs), pa.table({"segment": [f"enterprise-north-america-region-{i:03d}" for i in range(70)],
                                             "id": list(range(70))}), partition_by=["segment"], mode="append")
    n = make_table(root / "lake" / "users", partitions=2, appends=3)
    proj = root / "proj"
    (proj / "policies").mkdir(parents=True)
    (proj / "compactor.yml").write_text("name: layout\n")
    (proj / "policies" / "p.yml").write_text("version: 1\ntables:\n" + _policy("orders", root / "lake" / "orders")
                                             + _policy("segments", segs) + _policy("users", root / "lake" / "users")
                                             + _policy("gone", root / "lake" / "gone"))
    users = ProjectOptions(project_dir=proj, select=("users",))
    assert api.apply(users).ok
    make_table(root / "lake" / "users", partitions=2, appends=3, start=n)
    assert api.apply(users).ok
    out = root / "report.html"
    r = subprocess.run([sys.executable, "-m", "compactor", "report", "--project-dir", str(proj), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _chromium() -> str:
    binary = find_chromium()
    assert binary, "Chromium is required for the report layout test (./scripts/test installs Debian's chromium)"
    return binary


def _measure(report: Path, tmp: Path, width: int) -> dict:
    page = tmp / f"measure-{width}.html"
    page.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    out = subprocess.run(chromium_cmd(_chromium(), str(tmp / f"profile-{width}"), f"--window-size={width},1200",
                                      "--dump-dom", page.as_uri()),
                         check=True, capture_output=True, text=True, timeout=120)
    m = re.search(r'data-layout="([^"]*)"', out.stdout)
    assert m, "the measuring script did not run"
    import html

    return json.loads(html.unescape(m.group(1)))


@pytest.mark.parametrize("width", [1280, 760])
def test_layout_in_chromium(lake: Path, tmp_path: Path, width: int) -> None:
    layout = _measure(lake, tmp_path, width)
    assert 0 < layout["width"] <= width
    assert layout["charts"] >= 10
    assert layout["overlaps"] == [], layout["overlaps"]
    assert layout["problems"] == [], layout["problems"]


def test_screenshot(lake: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    subprocess.run(chromium_cmd(_chromium(), str(tmp_path / "profile-shot"), f"--screenshot={shot}",
                                "--window-size=1280,2600", lake.as_uri()), check=True, capture_output=True, timeout=120)
    assert shot.stat().st_size > 50_000  # a real page of charts, not a blank one


def test_overview_first_then_tables_by_benefit(lake: Path) -> None:
    page = lake.read_text()
    overview = page.index('<section class="overview" data-section="lake">')
    sections = [(m.start(), m.group(1)) for m in re.finditer(r'<section class="table" data-table="([^"]+)">', page)]
    assert overview < sections[0][0]
    assert [name for _, name in sections] == ["segments", "orders", "users", "gone"]  # 70, 36 and 0 files saved
    benefits = [int(b) for b in re.findall(r'<h2 id="t-[^"]+" data-benefit="(\d+)"', page)]
    assert benefits == sorted(benefits, reverse=True)
    tiles = re.findall(r'data-tile="([^"]+)"', page)
    assert tiles[:4] == ["tables", "files", "small-file share", "bytes"]
    # the trend over runs is labelled with the runs' dates
    trend = re.search(r'data-chart="lake-trend-files".*?</svg>', page, re.S).group(0)
    labels = set(re.findall(r'data-label="([^"]+)"', trend))  # one per run, told apart
    date = r"(\d{4}-\d\d-\d\d|[A-Z][a-z]{2} \d\d \d\d:\d\d(:\d\d)?)( \(\d+\))?"
    assert len(labels) == 2 and all(re.fullmatch(date, x) for x in labels), labels


def test_a_partition_at_its_ideal_file_count_is_not_shown_as_small(lake: Path) -> None:
    page = lake.read_text()
    users = re.search(r'<section class="table" data-table="users">.*?</section>', page, re.S).group(0)
    share = re.search(r'data-chart="small-file-share".*?</svg>', users, re.S).group(0)
    # two partitions, each one file far below the 1 MiB target: compact as they can be
    assert re.findall(r'data-series="small-file share %" data-label="[^"]*" data-value="([^"]+)"', share) == ["0", "0"]
    assert share.count('data-note="ideal"') == 2
    orders = re.search(r'<section class="table" data-table="orders">.*?</section>', page, re.S).group(0)
    share = re.search(r'data-chart="small-file-share".*?</svg>', orders, re.S).group(0)
    assert set(re.findall(r'data-value="([^"]+)"', share)) == {"100"} and 'data-note' not in share


def test_run_labels_are_dates_kept_apart() -> None:
    from compactor.output.report.html import _run_labels

    assert _run_labels(["2026-01-01T10:00:00+00:00", "2026-01-02T10:00:00+00:00"]) == ["2026-01-01", "2026-01-02"]
    assert _run_labels(["2026-01-01T10:00:00+00:00", "2026-01-01T11:30:00+00:00"]) == ["Jan 01 10:00", "Jan 01 11:30"]
    assert _run_labels(["2026-01-01T10:00:01+00:00", "2026-01-01T10:00:02+00:00"]) == ["Jan 01 10:00:01",
                                                                                        "Jan 01 10:00:02"]
    assert _run_labels(["2026-01-01T10:00:01+00:00"] * 2) == ["Jan 01 10:00:01", "Jan 01 10:00:01 (2)"]


def test_small_share_rule() -> None:
    t = TableReport("t", "delta", "/t", target_file_size=100, min_file_size=75,
                    partitions={"one_small_file": (1, 1, 10), "two_fit_in_one": (2, 2, 60), "ideal_two": (2, 1, 150),
                                "three_for_two": (3, 3, 150), "big": (1, 0, 500)})
    assert t.small_share("one_small_file") == 0  # files == ceil(10 / 100) == 1
    assert t.small_share("two_fit_in_one") == 1.0
    assert t.small_share("ideal_two") == 0  # ceil(150 / 100) == 2 files: already ideal
    assert t.small_share("three_for_two") == 1.0
    assert t.small_share("big") == 0
    assert t.mergeable_small_files == 5
