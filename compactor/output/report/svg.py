"""Tiny inline-SVG charts. Every mark carries data attributes so tests (and people) can read values."""

from __future__ import annotations

import html
import math
from typing import Sequence

W, H, PAD_L, PAD_B, PAD_T = 640, 220, 48, 40, 18


def _esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def bar_chart(chart: str, title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float], str]],
              *, marker_index: float | None = None, marker_label: str = "", highlight: Sequence[bool] = (),
              y_label: str = "") -> str:
    """Grouped bars. series: (name, values, css color). marker_index: x position of a vertical marker."""
    n = max(1, len(labels))
    top = max([v for _, vals, _ in series for v in vals] + [1])
    plot_w, plot_h = W - PAD_L - 10, H - PAD_B - PAD_T
    slot = plot_w / n
    bw = max(1.0, slot * 0.8 / max(1, len(series)))
    out = [f'<svg class="chart" data-chart="{_esc(chart)}" viewBox="0 0 {W} {H}" role="img" aria-label="{_esc(title)}">',
           f'<text x="{PAD_L}" y="12" class="t">{_esc(title)}</text>',
           f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - 10}" y2="{H - PAD_B}" class="axis"/>',
           f'<text x="4" y="{PAD_T + 8}" class="l">{_esc(_fmt(top))}</text>',
           f'<text x="4" y="{H - PAD_B}" class="l">0</text>']
    if y_label:
        out.append(f'<text x="4" y="{PAD_T + 22}" class="l">{_esc(y_label)}</text>')
    for s_i, (name, values, color) in enumerate(series):
        for i, v in enumerate(values):
            h = 0 if top == 0 else plot_h * (v / top)
            x = PAD_L + i * slot + slot * 0.1 + s_i * bw
            hl = bool(highlight[i]) if i < len(highlight) else False
            planned = ' data-planned="true"' if hl else ""
            out.append(f'<rect class="bar{" hl" if hl else ""}" x="{x:.1f}" y="{H - PAD_B - h:.1f}" width="{bw:.1f}" '
                       f'height="{h:.1f}" fill="{color}" data-series="{_esc(name)}" data-label="{_esc(labels[i])}" '
                       f'data-value="{v:g}"{planned}><title>{_esc(labels[i])}: '
                       f'{_esc(name)} {_esc(_fmt(v))}</title></rect>')
    step = max(1, math.ceil(n / 8))
    for i in range(0, n, step):
        out.append(f'<text x="{PAD_L + i * slot + slot / 2:.1f}" y="{H - PAD_B + 14}" class="l" '
                   f'text-anchor="middle">{_esc(labels[i][:16])}</text>')
    if marker_index is not None:
        x = PAD_L + marker_index * slot
        out.append(f'<line class="marker" data-marker="{_esc(marker_label)}" x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" '
                   f'y2="{H - PAD_B}"/>')
        anchor, dx = ("end", -3) if x > W - 60 else ("start", 3)
        out.append(f'<text x="{x + dx:.1f}" y="{PAD_T + 10}" class="l" text-anchor="{anchor}">{_esc(marker_label)}</text>')
    if len(series) > 1:
        for s_i, (name, _, color) in enumerate(series):
            out.append(f'<rect x="{W - 150}" y="{PAD_T + s_i * 14}" width="10" height="10" fill="{color}"/>'
                       f'<text x="{W - 136}" y="{PAD_T + 9 + s_i * 14}" class="l">{_esc(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _fmt(v: float) -> str:
    v = float(v)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.1f}{unit}"
    return f"{v:g}"
