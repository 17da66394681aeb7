"""PNG charts for wikis and PR comments: each chart rendered by headless Chromium (Debian's chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from compactor.errors import UsageError

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_cmd(binary: str, profile_dir: str, *args: str) -> list[str]:
    return [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", *args]


def write_pngs(report_html: str, out_dir: Path) -> list[Path]:
    """One PNG per chart: <table>-<chart>.png."""
    binary = find_chromium()
    if binary is None:
        raise UsageError("PNG output needs Chromium", hint="apt-get install chromium, or use --format html")
    from compactor.output.report.style import CSS

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    sections = re.findall(r'<section class="overview" data-section="(lake)">(.*?)</section>', report_html, re.S)
    sections += re.findall(r'<section class="table" data-table="([^"]*)">(.*?)</section>', report_html, re.S)
    with tempfile.TemporaryDirectory() as tmp:
        for table, body in sections:
            for svg, chart in re.findall(r'(?s)(<svg class="chart" data-chart="([^"]+)".*?</svg>)', body):
                box = re.search(r'viewBox="0 0 (\d+) (\d+)"', svg)
                if box is None:
                    continue  # not a chart compactor drew
                w, h = map(int, box.groups())
                page = Path(tmp) / "chart.html"
                page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><style>{CSS} body{{margin:0}}"
                                f".chart{{width:{w}px;margin:0;border:0}}</style></head><body>{svg}</body></html>")
                full = chart if chart.startswith(f"{table}-") else f"{table}-{chart}"  # lake-trend-files
                name = re.sub(r"[^A-Za-z0-9_.-]+", "_", full) + ".png"
                target = out_dir / name
                subprocess.run(chromium_cmd(binary, str(Path(tmp) / "profile"), f"--screenshot={target}",
                                            f"--window-size={w},{h}", page.as_uri()),
                               check=True, capture_output=True, timeout=60)
                written.append(target)
    return written
