"""Charts as inline SVG, drawn on the server: no script, no library, nothing fetched (the
dashboard works offline and under a CSP that forbids inline script; SVG markup is not script).

    line_chart([(label, value)], title=..., unit=...)                 a step line, e.g. queue size
    bar_chart([(label, value)], title=..., unit=...)                  horizontal bars
    paired_bar_chart([(label, a, b)], names=("p50", "p90"), ...)      two bars per label

Every label goes through markupsafe.escape (a tool's or a reviewer's name comes from the
ledger). Sizes are in SVG user units; the viewBox makes the chart scale with the page.
"""

from __future__ import annotations

from markupsafe import Markup, escape

WIDTH = 640
ROW = 22
CHAR_WIDTH = 6.2
"""About the width of a character of the charts' 11-unit sans-serif labels, in SVG units."""
MIN_LABEL, MAX_LABEL = 60, 240
"""The bar charts' label column, SVG units: a longer label is cut by the SVG's edge."""
VALUE_ROOM = 90
"""Room right of the longest bar for its value and unit, SVG units."""


def _fmt(value: float) -> str:
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"


def line_chart(points: list[tuple[str, float]], *, title: str, unit: str = "", height: int = 180) -> Markup:
    """A step line through `points` (x: their order, labelled by the first and last label)."""
    if not points:
        return Markup(f'<p class="empty">{escape(title)}: nothing to draw yet.</p>')
    left, right, top, bottom = 44, 10, 10, 30
    w, h = WIDTH - left - right, height - top - bottom
    high = max(max(v for _, v in points), 1)
    n = len(points)

    def x(i: int) -> float:
        return left + (w * i / (n - 1) if n > 1 else w / 2)

    def y(v: float) -> float:
        return top + h - h * v / high

    path = [f"M{x(0):.1f},{y(points[0][1]):.1f}"]
    for i in range(1, n):
        path.append(f"H{x(i):.1f}V{y(points[i][1]):.1f}")
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>",
             f'<line class="axis" x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}"/>',
             f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + h}"/>',
             f'<text class="tick" x="{left - 6}" y="{top + 4}" text-anchor="end">{_fmt(high)}</text>',
             f'<text class="tick" x="{left - 6}" y="{top + h}" text-anchor="end">0</text>',
             f'<path class="line" d="{" ".join(path)}"/>',
             *(f'<circle class="dot" cx="{x(0):.1f}" cy="{y(points[0][1]):.1f}" r="3"/>' for _ in range(n == 1)),
             f'<text class="tick" x="{left}" y="{height - 8}">{escape(points[0][0])}</text>',
             f'<text class="tick" x="{left + w}" y="{height - 8}" text-anchor="end">{escape(points[-1][0])}</text>',
             f'<text class="tick" x="{left + 4}" y="{top + 12}">{escape(unit)}</text>',
             "</svg>"]
    return Markup("".join(parts))


def bar_chart(items: list[tuple[str, float]], *, title: str, unit: str = "") -> Markup:
    """One horizontal bar per item, its value written after it."""
    return paired_bar_chart([(label, value, None) for label, value in items], names=(unit, ""), title=title)


def paired_bar_chart(items: list[tuple[str, float, float | None]], *, names: tuple[str, str], title: str) -> Markup:
    """Two bars per label (the second may be None): e.g. p50 and p90 of a latency."""
    if not items:
        return Markup(f'<p class="empty">{escape(title)}: nothing to draw yet.</p>')
    # The label column fits the longest label (a tool name such as exchange_delivered_order_items),
    # within reason; the right margin fits a value and its unit ("9,890 p90 s", "78 decisions").
    longest = max(len(label) for label, _, _ in items)
    label_w = min(MAX_LABEL, max(MIN_LABEL, round(longest * CHAR_WIDTH)))
    left_pad = label_w + 10
    w = WIDTH - left_pad - VALUE_ROOM
    high = max(1.0, max(max(a, b or 0) for _, a, b in items))  # below 1 the bars keep their scale
    paired = any(b is not None for _, _, b in items)
    row = ROW * (2 if paired else 1) + 6
    height = row * len(items) + (24 if paired else 6)
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>"]
    for i, (label, a, b) in enumerate(items):
        y0 = 4 + i * row
        parts.append(f'<text class="label" x="{label_w}" y="{y0 + 15}" text-anchor="end">{escape(label)}</text>')
        for j, (value, cls) in enumerate(((a, "bar"), (b, "bar2"))):
            if value is None:
                continue
            y = y0 + j * ROW
            bw = max(1.0, w * value / high)
            parts.append(f'<rect class="{cls}" x="{left_pad}" y="{y + 3}" width="{bw:.1f}" height="{ROW - 6}"/>')
            parts.append(f'<text class="tick" x="{left_pad + bw + 4:.1f}" y="{y + 15}">{_fmt(value)}'
                         f'{(" " + escape(names[j])) if names[j] else ""}</text>')
    if paired:
        parts.append(f'<rect class="bar" x="{left_pad}" y="{height - 16}" width="10" height="10"/>'
                     f'<text class="tick" x="{left_pad + 14}" y="{height - 7}">{escape(names[0])}</text>'
                     f'<rect class="bar2" x="{left_pad + 70}" y="{height - 16}" width="10" height="10"/>'
                     f'<text class="tick" x="{left_pad + 84}" y="{height - 7}">{escape(names[1])}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
