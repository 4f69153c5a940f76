"""Charts as inline SVG text, for the self-contained report page (ledger.analytics.report_page).

    time_chart(starts, [Series("waiting", values)], title=..., y_label=..., bucket_seconds=3600)
    bar_chart(labels, [Series("p50", a), Series("p90", b)], title=..., x_label=..., stacked=False)
    histogram(labels, counts, marked, title=..., x_label=..., y_label=..., marked_name=...)

Each returns one `<svg>` element (a string) with a title, axes with ticks, gridlines, axis labels
with their units, a legend when there is more than one series, and a native tooltip (`<title>`)
on every bar and every bucket: no script, no font, nothing fetched. With nothing to draw it
returns the same frame with a note, so every chart has its place and size on the page.

Why our own SVG and not a charting library: plotly (checked: 7.1.0 installs here) embeds its
JavaScript; a page of eight small charts made with `to_html(include_plotlyjs=True)` weighed
4.9 MB and took headless Chromium 1.5-1.9 s to load on this machine, against 85 KB and 0.10 s
for the report's nine charts on five days of history, in the same run (Playwright, load event,
3 loads each). Its charts are drawn by script, so a viewer with scripts off (a mail client, a
locked-down browser) would see nothing. Matplotlib would add about 50 MB of dependencies to
`pip install countersign` for static output of the same kind. The few shapes a report needs
(lines over time, bars, a histogram) are the small amount of code below; the web inbox draws
its own in service/web/charts.py for the same reasons.

Every text drawn comes from html.escape (a tool's or a reviewer's name comes from the ledger).
Sizes are SVG user units; the viewBox lets a chart scale down with the page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH = 760
CHAR = 6.4
"""About the width of one character of the 11-unit sans-serif labels, in SVG units."""
MAX_LABEL = 230
"""The bar charts' label column at most, SVG units; a longer label is cut (… and a tooltip)."""
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#999999")
"""Okabe and Ito's palette, told apart with the common colour-vision deficiencies."""
MARK = "#D55E00"


@dataclass(frozen=True)
class Series:
    """One series: its `name` (the legend) and one value per bucket or per bar (None: no value,
    a gap in a line); `color` defaults to the palette's next."""

    name: str
    values: Sequence[float | None]
    color: str | None = None


def nice_ticks(high: float, count: int = 5, *, whole: bool = False) -> list[float]:
    """Ticks from 0 to at least `high` at a step of 1, 2 or 5 times a power of ten (at least 1
    when `whole`: a count has no tick at 0.5)."""
    if not high > 0 or not math.isfinite(high):
        return [0.0, 1.0]
    raw = high / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if whole:
        step = max(1, step)
    n = math.ceil(high / step - 1e-9)
    return [i * step for i in range(n + 1)]


def number(value: float) -> str:
    """A tick or value label: 1,234 / 12.5 / 0.35."""
    if value == 0:
        return "0"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2g}" if abs(value) < 1 else f"{value:.1f}"


def duration_unit(seconds: float) -> tuple[str, float]:
    """(unit name, seconds per unit) for an axis whose largest value is `seconds`."""
    if seconds < 120:
        return "seconds", 1.0
    if seconds < 2 * 3600:
        return "minutes", 60.0
    if seconds < 3 * 86_400:
        return "hours", 3600.0
    return "days", 86_400.0


def duration(seconds: float | None) -> str:
    """A duration for a person: 0.35 s, 12 s, 4.5 min, 2.3 h, 1.5 d."""
    if seconds is None:
        return "–"
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"


def _cut(label: str, width: float) -> str:
    most = max(4, int(width / CHAR))
    return label if len(label) <= most else label[: most - 1] + "…"


def _open(height: float, title: str, desc: str = "") -> list[str]:
    return [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
            f'width="{WIDTH}" height="{height:.0f}" role="img" aria-label="{escape(title)}">',
            f"<title>{escape(title)}</title>", *([f"<desc>{escape(desc)}</desc>"] if desc else [])]


def _empty(parts: list[str], left: float, top: float, w: float, h: float) -> None:
    parts.append(f'<rect class="plot" x="{left}" y="{top}" width="{w:.1f}" height="{h:.1f}"/>')
    parts.append(f'<text class="empty" x="{left + w / 2:.1f}" y="{top + h / 2:.1f}" text-anchor="middle">'
                 "Nothing to draw in this window.</text>")


def _legend(parts: list[str], series: Sequence[Series], colors: list[str], x_right: float, y: float) -> None:
    x = x_right
    for s, color in reversed(list(zip(series, colors))):
        x -= len(s.name) * CHAR + 24
        parts.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                     f'<text class="legend" x="{x + 14:.1f}" y="{y}">{escape(s.name)}</text>')


def _colors(series: Sequence[Series]) -> list[str]:
    return [s.color or COLORS[i % len(COLORS)] for i, s in enumerate(series)]


def _time_labels(starts: Sequence[datetime], bucket_seconds: int, most: int = 7) -> list[tuple[int, str, str]]:
    """(index, first line, second line) of the buckets labelled on a time axis: evenly spaced;
    the second line (the date, or the year) only where it changes."""
    n = len(starts)
    step = max(1, math.ceil(n / most))
    out, last_second = [], None
    for i in range(0, n, step):
        t = starts[i]
        if bucket_seconds < 86_400:
            first, second = t.strftime("%H:%M"), t.strftime("%d %b %Y")
        else:
            first, second = t.strftime("%d %b"), t.strftime("%Y")
        out.append((i, first, second if second != last_second else ""))
        last_second = second
    return out


def time_chart(starts: Sequence[datetime], series: Sequence[Series], *, title: str, y_label: str, bucket_seconds: int,
               bucket_name: str, style: str = "line", y_format: Callable[[float], str] = number,
               y_top: float | None = None, whole: bool = False, tooltip: Callable[[int], str] | None = None,
               height: int = 250) -> str:
    """A chart over time: one point (style "line"), a step ("step", filled below) or a bar
    ("bars", the series side by side) per bucket of `bucket_seconds` starting at `starts`.
    `y_top`: the axis's least top (e.g. 0.1 for a share); `whole`: the values are counts (whole
    ticks); `tooltip(i)`: the text over bucket i."""
    left, right, top, bottom = 66, 16, 30, 54
    w, h = WIDTH - left - right, height - top - bottom
    parts = _open(height, title)
    n = len(starts)
    values = [v for s in series for v in s.values if v is not None]
    if n == 0 or not values or max(values) <= 0 and style != "line":
        _empty(parts, left, top, w, h)
        parts.append("</svg>")
        return "".join(parts)
    colors = _colors(series)
    ticks = nice_ticks(max(max(values), y_top or 0), whole=whole)
    high = ticks[-1]
    slot = w / n

    def x(i: float) -> float:
        return left + slot * (i + 0.5)

    def y(v: float) -> float:
        return top + h - h * v / high

    parts.append(f'<rect class="plot" x="{left}" y="{top}" width="{w}" height="{h}"/>')
    for t in ticks:
        parts.append(f'<line class="grid" x1="{left}" y1="{y(t):.1f}" x2="{left + w}" y2="{y(t):.1f}"/>'
                     f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{escape(y_format(t))}</text>')
    for i, first, second in _time_labels(starts, bucket_seconds):
        parts.append(f'<line class="axis" x1="{x(i):.1f}" y1="{top + h}" x2="{x(i):.1f}" y2="{top + h + 4}"/>'
                     f'<text class="tick" x="{x(i):.1f}" y="{top + h + 16}" text-anchor="middle">{escape(first)}</text>')
        if second:
            parts.append(f'<text class="tick" x="{x(i):.1f}" y="{top + h + 29}" text-anchor="middle">{escape(second)}</text>')
    parts.append(f'<line class="axis" x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}"/>')
    parts.append(f'<text class="axis-label" x="{left + w / 2:.1f}" y="{height - 6}" text-anchor="middle">'
                 f"time (UTC), one {escape(bucket_name)} per {'bar' if style == 'bars' else 'point'}</text>")
    parts.append(f'<text class="axis-label" transform="translate(14,{top + h / 2:.1f}) rotate(-90)" text-anchor="middle">'
                 f"{escape(y_label)}</text>")
    if style == "bars":
        k = len(series)
        bar = max(1.0, slot * 0.8 / k)
        for j, (s, color) in enumerate(zip(series, colors)):
            for i, v in enumerate(s.values):
                if v:
                    x0 = left + slot * i + slot * 0.1 + j * bar
                    parts.append(f'<rect x="{x0:.1f}" y="{y(v):.1f}" width="{bar:.1f}" height="{top + h - y(v):.1f}" fill="{color}"/>')
    else:
        for s, color in zip(series, colors):
            if style == "step":  # each bucket's value held across its width
                points = []
                for i, v in enumerate(s.values):
                    points += [f"{left + slot * i:.1f},{y(v or 0):.1f}", f"{left + slot * (i + 1):.1f},{y(v or 0):.1f}"]
                parts.append(f'<path d="M{left},{top + h}L{"L".join(points)}L{left + w},{top + h}Z" fill="{color}" '
                             'fill-opacity="0.18" stroke="none"/>')
                parts.append(f'<path d="M{"L".join(points)}" fill="none" stroke="{color}" stroke-width="1.8"/>')
                continue
            d, run = [], 0
            for i, v in enumerate(s.values):
                if v is None:
                    run = 0
                    continue
                d.append(f"{'L' if run else 'M'}{x(i):.1f},{y(v):.1f}")
                run += 1
            parts.append(f'<path d="{"".join(d)}" fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round"/>')
            dots = [i for i, v in enumerate(s.values) if v is not None and (
                n <= 60 or ((i == 0 or s.values[i - 1] is None) and (i == n - 1 or s.values[i + 1] is None)))]
            parts.extend(f'<circle cx="{x(i):.1f}" cy="{y(s.values[i]):.1f}" r="2.6" fill="{color}"/>' for i in dots)
    if tooltip is not None:
        for i in range(n):
            parts.append(f'<rect class="hover" x="{left + slot * i:.1f}" y="{top}" width="{slot:.2f}" height="{h}">'
                         f"<title>{escape(tooltip(i))}</title></rect>")
    if len(series) > 1:
        _legend(parts, series, colors, left + w, top - 10)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(labels: Sequence[str], series: Sequence[Series], *, title: str, x_label: str, stacked: bool = False,
              x_format: Callable[[float], str] = number, value_format: Callable[[float], str] | None = None,
              whole: bool = False) -> str:
    """Horizontal bars, one row per label: the series side by side (`stacked` False, e.g. p50
    and p90) or end to end (True, e.g. a reviewer's approvals, edits, rejections). Each bar's
    value (each row's total when stacked) is written after it, with `value_format`; `whole`:
    the values are counts."""
    value_format = value_format or x_format
    colors = _colors(series)
    rows = len(labels)
    per_row = 18 if stacked else 14 * len(series) + 6
    label_w = min(MAX_LABEL, max(60, max((len(s) for s in labels), default=0) * CHAR))
    left, right, top = label_w + 14, 84, 30 if len(series) > 1 else 12
    height = top + max(rows, 2) * (per_row + 6) + 42
    w, h = WIDTH - left - right, height - top - 42
    parts = _open(height, title)
    totals = [sum(s.values[r] or 0 for s in series) if stacked else max((s.values[r] or 0) for s in series)
              for r in range(rows)]
    if rows == 0 or max(totals, default=0) <= 0:
        _empty(parts, left, top, w, h)
        parts.append("</svg>")
        return "".join(parts)
    ticks = nice_ticks(max(totals), whole=whole)
    high = ticks[-1]

    def x(v: float) -> float:
        return left + w * v / high

    parts.append(f'<rect class="plot" x="{left}" y="{top}" width="{w}" height="{h}"/>')
    for t in ticks:
        parts.append(f'<line class="grid" x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{top + h}"/>'
                     f'<text class="tick" x="{x(t):.1f}" y="{top + h + 15}" text-anchor="middle">{escape(x_format(t))}</text>')
    parts.append(f'<text class="axis-label" x="{left + w / 2:.1f}" y="{height - 6}" text-anchor="middle">{escape(x_label)}</text>')
    for r, label in enumerate(labels):
        y0 = top + 6 + r * (per_row + 6)
        shown = _cut(label, label_w)
        parts.append(f'<text class="label" x="{label_w + 6:.1f}" y="{y0 + per_row / 2 + 4:.1f}" text-anchor="end">'
                     f"{escape(shown)}{f'<title>{escape(label)}</title>' if shown != label else ''}</text>")
        start = 0.0
        for j, (s, color) in enumerate(zip(series, colors)):
            v = s.values[r] or 0
            tip = f"{label}: {s.name} {value_format(v)}"
            if stacked:
                if v > 0:
                    parts.append(f'<rect x="{x(start):.1f}" y="{y0:.1f}" width="{max(1.0, x(start + v) - x(start)):.1f}" '
                                 f'height="{per_row}" fill="{color}"><title>{escape(tip)}</title></rect>')
                start += v
            else:
                yy = y0 + j * 14
                parts.append(f'<rect x="{left}" y="{yy:.1f}" width="{max(1.0, x(v) - left):.1f}" height="12" fill="{color}">'
                             f"<title>{escape(tip)}</title></rect>"
                             f'<text class="value" x="{x(v) + 4:.1f}" y="{yy + 10:.1f}">{escape(value_format(v))}</text>')
        if stacked:
            parts.append(f'<text class="value" x="{x(start) + 4:.1f}" y="{y0 + per_row / 2 + 4:.1f}">{escape(value_format(start))}</text>')
    if len(series) > 1:
        _legend(parts, series, colors, left + w, top - 10)
    parts.append("</svg>")
    return "".join(parts)


def histogram(labels: Sequence[str], counts: Sequence[int], marked: Sequence[bool], *, title: str, x_label: str,
              y_label: str, marked_name: str, other_name: str, height: int = 250) -> str:
    """Vertical bars over ordered bins (`labels`), the `marked` ones in the warning colour (e.g.
    approvals faster than the rubber-stamp threshold), with a legend for both kinds."""
    left, right, top, bottom = 66, 16, 30, 46
    w, h = WIDTH - left - right, height - top - bottom
    parts = _open(height, title)
    n = len(labels)
    if n == 0 or max(counts, default=0) <= 0:
        _empty(parts, left, top, w, h)
        parts.append("</svg>")
        return "".join(parts)
    ticks = nice_ticks(max(counts), whole=True)
    high = ticks[-1]
    slot = w / n

    def y(v: float) -> float:
        return top + h - h * v / high

    parts.append(f'<rect class="plot" x="{left}" y="{top}" width="{w}" height="{h}"/>')
    for t in ticks:
        parts.append(f'<line class="grid" x1="{left}" y1="{y(t):.1f}" x2="{left + w}" y2="{y(t):.1f}"/>'
                     f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{escape(number(t))}</text>')
    for i, (label, count, mark) in enumerate(zip(labels, counts, marked)):
        x0 = left + slot * i
        color = MARK if mark else COLORS[0]
        if count:
            parts.append(f'<rect x="{x0 + slot * 0.12:.1f}" y="{y(count):.1f}" width="{slot * 0.76:.1f}" '
                         f'height="{top + h - y(count):.1f}" fill="{color}"><title>{escape(label)}: {count:,}</title></rect>'
                         f'<text class="value" x="{x0 + slot / 2:.1f}" y="{y(count) - 4:.1f}" text-anchor="middle">{count:,}</text>')
        parts.append(f'<text class="tick" x="{x0 + slot / 2:.1f}" y="{top + h + 15}" text-anchor="middle">{escape(label)}</text>')
    edge = sum(1 for m in marked if m)
    if 0 < edge < n:
        xm = left + slot * edge
        parts.append(f'<line class="threshold" x1="{xm:.1f}" y1="{top - 4}" x2="{xm:.1f}" y2="{top + h}"/>')
    parts.append(f'<text class="axis-label" x="{left + w / 2:.1f}" y="{height - 6}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text class="axis-label" transform="translate(14,{top + h / 2:.1f}) rotate(-90)" text-anchor="middle">'
                 f"{escape(y_label)}</text>")
    _legend(parts, [Series(marked_name, []), Series(other_name, [])], [MARK, COLORS[0]], left + w, top - 10)
    parts.append("</svg>")
    return "".join(parts)
