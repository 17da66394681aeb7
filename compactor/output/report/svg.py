"""Tiny inline-SVG charts. Every mark carries data attributes so tests (and people) can read values.

Charts are drawn in a fixed coordinate system (``viewBox``) and scaled to the page width by CSS, so the
layout (what fits, what is thinned out) is the same at every width: labels are placed with an estimate
of their width and never overlap (a browser test measures them).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

W, H = 1000, 240
PAD_L, PAD_R, PAD_B = 80, 16, 44
EM = 0.66  # a generous glyph width for sans-serif fonts (DejaVu Sans digits are 0.636 em)
GREEN = "#2e7d32"
FONT_L, FONT_T = 11, 13  # label and title font sizes (CSS .l and .t)
TITLE_Y, LEGEND_Y = 17, 36


def _esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def text_width(s: str, size: float = FONT_L) -> float:
    """A generous estimate of the rendered width of ``s`` in a sans-serif font."""
    return len(s) * size * EM


def _ellipsize(s: str, width: float, size: float = FONT_L, *, middle: bool = False) -> str:
    """``s`` shortened to ``width`` with an ellipsis: at the end, or in the middle (partition labels
    share their start, "segment=enterprise-…-007", and differ at the end)."""
    if text_width(s, size) <= width:
        return s
    keep = max(1, int(width / (size * EM)) - 1)
    if middle and keep >= 4:
        return s[:(keep + 1) // 2] + "…" + s[len(s) - keep // 2:]
    return s[:keep] + "…"


def _legend(items: Sequence[tuple[str, str]], x: float, y: float) -> tuple[list[str], float]:
    """Legend items (name, colour) left to right on one row; returns the SVG and the row's right edge."""
    out = []
    for name, color in items:
        out.append(f'<rect class="legend" x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14:.1f}" y="{y:.1f}" class="l">{_esc(name)}</text>')
        x += 14 + text_width(name) + 18
    return out, x


def bar_chart(chart: str, title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float], str]],
              *, marker_index: float | None = None, marker_label: str = "", highlight: Sequence[bool] = (),
              y_label: str = "", width: int = W, height: int = H,
              value_format: Callable[[float], str] | None = None, x_title: str = "",
              notes: Sequence[str] = (), y_max: float | None = None,
              legend: Sequence[tuple[str, str]] = ()) -> str:
    """Grouped bars. series: (name, values, css color). marker_index: x position (in slots) of a vertical
    marker. highlight[i] draws slot i's bars in orange (``data-planned``); notes[i] (when not empty) is a
    short word drawn on slot i (a green mark where the word does not fit). y_max: the axis top at least.
    legend: extra legend entries (name, colour) after the series."""
    fmt = value_format or _fmt
    n = max(1, len(labels))
    top = max([v for _, vals, _ in series for v in vals] + [0, y_max or 0])
    top = top if top > 0 else 1
    legend_items = [(name, color) for name, _, color in series] if len(series) > 1 or legend else []
    legend_items += list(legend)
    legend_row = bool(legend_items)
    plot_t = (LEGEND_Y + 12) if legend_row else (TITLE_Y + 16)
    plot_b = height - PAD_B
    plot_l, plot_r = PAD_L, width - PAD_R
    plot_w, plot_h = plot_r - plot_l, plot_b - plot_t
    slot = plot_w / n
    group_w = min(slot * 0.8, 56.0 * len(series))
    bw = max(1.0, group_w / max(1, len(series)))
    out = [f'<svg class="chart" data-chart="{_esc(chart)}" viewBox="0 0 {width} {height}" '
           f'preserveAspectRatio="xMidYMid meet" role="img" aria-label="{_esc(title)}">',
           f'<text x="{plot_l}" y="{TITLE_Y}" class="t">{_esc(_ellipsize(title, plot_w, FONT_T))}</text>']
    if legend_row:
        items, _ = _legend(legend_items, plot_l, LEGEND_Y)
        out += items
    # y axis: three gridlines with values, the unit under the top value
    for frac in (0.0, 0.5, 1.0):
        y = plot_b - plot_h * frac
        out.append(f'<line x1="{plot_l}" y1="{y:.1f}" x2="{plot_r}" y2="{y:.1f}" class="{"axis" if frac == 0 else "grid"}"/>')
        out.append(f'<text x="{plot_l - 6}" y="{y + 4:.1f}" class="l" text-anchor="end">{_esc(fmt(top * frac))}</text>')
    if y_label:
        out.append(f'<text x="{plot_l - 6}" y="{plot_t + 18:.1f}" class="l u" text-anchor="end">'
                   f'{_esc(_ellipsize(y_label, plot_l - 8))}</text>')
    for s_i, (name, values, color) in enumerate(series):
        for i, v in enumerate(values):
            h = plot_h * (max(0.0, v) / top)
            x = plot_l + i * slot + (slot - group_w) / 2 + s_i * bw
            hl = bool(highlight[i]) if i < len(highlight) else False
            planned = ' data-planned="true"' if hl else ""
            out.append(f'<rect class="bar{" hl" if hl else ""}" x="{x:.1f}" y="{plot_b - h:.1f}" width="{bw:.1f}" '
                       f'height="{h:.1f}" fill="{color}" data-series="{_esc(name)}" data-label="{_esc(labels[i])}" '
                       f'data-value="{v:g}"{planned}><title>{_esc(labels[i])}: '
                       f'{_esc(name)} {_esc(fmt(v))}</title></rect>')
    for i, note in enumerate(notes):
        if not note:
            continue
        cx = plot_l + i * slot + slot / 2
        if text_width(note) <= slot - 4:
            out.append(f'<text x="{cx:.1f}" y="{plot_b - 5:.1f}" class="l note" text-anchor="middle" '
                       f'data-note="{_esc(note)}">{_esc(note)}</text>')
        else:
            mw = max(1.0, min(slot * 0.6, 8.0))
            out.append(f'<rect class="note" x="{cx - mw / 2:.1f}" y="{plot_b - 4:.1f}" width="{mw:.1f}" height="4" '
                       f'fill="{GREEN}" data-note="{_esc(note)}"><title>{_esc(labels[i])}: {_esc(note)}</title></rect>')
    # x labels: centred under their slot when every label fits in it; otherwise every step-th label,
    # starting at its slot (so none reaches into the y axis or a neighbour), shortened with an ellipsis
    widest = max((text_width(s) for s in labels), default=0.0)
    room = 150.0
    if widest <= slot - 8:
        for i in range(n):
            out.append(f'<text x="{plot_l + i * slot + slot / 2:.1f}" y="{plot_b + 16}" class="l" '
                       f'text-anchor="middle">{_esc(labels[i])}</text>')
    else:
        step = 1
        while step < n and min(widest, room) > slot * step - 8:
            step += 1
        for i in range(0, n, step):
            x = plot_l + i * slot + 1
            room_i = min(room, slot * step - 8, width - 2 - x)
            out.append(f'<text x="{x:.1f}" y="{plot_b + 16}" class="l" text-anchor="start">'
                       f'{_esc(_ellipsize(labels[i], room_i, middle=True))}</text>')
    if x_title:
        out.append(f'<text x="{plot_r}" y="{height - 6}" class="l u" text-anchor="end">{_esc(x_title)}</text>')
    if marker_index is not None:
        x = plot_l + marker_index * slot
        out.append(f'<line class="marker" data-marker="{_esc(marker_label)}" x1="{x:.1f}" y1="{plot_t}" x2="{x:.1f}" '
                   f'y2="{plot_b}"/>')
        anchor, dx = ("end", -4) if x > plot_r - text_width(marker_label) - 8 else ("start", 4)
        out.append(f'<text x="{x + dx:.1f}" y="{plot_t + 11}" class="l mk" text-anchor="{anchor}">'
                   f'{_esc(marker_label)}</text>')
    out.append("</svg>")
    return "".join(out)


def _fmt(v: float) -> str:
    v = float(v)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.1f}{unit}"
    return f"{v:.1f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v)}"


def fmt_percent(v: float) -> str:
    return f"{v:g}%"


def fmt_bytes(v: float) -> str:
    from compactor.units import format_size

    return format_size(int(v)) if v else "0"
