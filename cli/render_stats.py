"""Render a ledger.analytics.stats.Stats for a terminal: the queue, decisions, timing, then one row a tool.

The by-tool table is plain aligned text sized to the terminal (`COLUMNS`, else the terminal's
width; off a terminal, wide enough for any name): headers are never cut, counts are right-aligned,
and the tool column takes what is left. When all thirteen counts and a readable tool name do not
fit in one table (an 80-column terminal), they are printed as two: the calls by the policy's
effect, then the asks by their decision, each repeating the tool."""

from typing import Any, Sequence

import typer

from cli.output import plain, say, visible

# The by-tool counts (ledger.analytics.stats.ToolStats), in two groups that each fit 80 columns
# beside a 20-character tool name.
CALLS = ("requests", "allowed", "denied", "asks", "pending", "executed", "failed")
DECISIONS = ("approved", "rejected", "responded", "expired", "cancelled", "edited")
COUNTS = CALLS + DECISIONS
MIN_TOOL = 16  # the narrowest tool column before the table is split in two
WIDE = 200  # the width off a terminal (a file, a pipe) when COLUMNS does not say


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 10:  # a sub-second p50 must not read as 1s
        return f"{seconds:.2f}s".replace(".00s", "s")
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def width() -> int:
    """The columns to fit: COLUMNS when set, else the terminal's width, else WIDE."""
    import shutil

    return max(20, shutil.get_terminal_size((WIDE, 24)).columns)


def render(s: Any, columns: int | None = None) -> None:
    """Print the Stats `s` in `columns` characters a line (default: `width()`)."""
    columns = width() if columns is None else columns
    as_of = plain(s.as_of) if s.as_of else "-"
    typer.echo(f"{s.events} events, {s.requests} requests, as of {as_of}")
    typer.echo(f"queue now: {s.pending} pending, the oldest waiting {_duration(s.oldest_pending_seconds)}")
    statuses = [f"{n} {status}" for status, n in sorted(s.by_status.items(), key=lambda kv: -kv[1])]
    for line in _listed("requests by status: ", statuses, columns):
        say(line)
    decisions = [f"{n} {d}" for d, n in sorted(s.decisions.items(), key=lambda kv: -kv[1])]
    for line in _listed("decisions: ", decisions, columns):
        say(line)
    typer.echo(
        f"time to decision ({s.decided_asks} decided asks): p50 {_duration(s.decision_p50_seconds)}, "
        f"p90 {_duration(s.decision_p90_seconds)}"
    )
    rate = f"{s.edit_rate:.1%}" if s.edit_rate is not None else "-"
    typer.echo(f"edit rate: {rate} ({s.edited_asks} of {s.asks} asks edited)")
    tools = sorted(s.by_tool.items(), key=lambda kv: (-kv[1].requests, kv[0]))
    if not tools:
        return
    rows = [(visible(tool), {c: getattr(t, c) for c in COUNTS}) for tool, t in tools]
    chosen = tables(rows, columns)
    tool_width = min(_tool_width(rows, group, columns) for _title, group in chosen)  # the same in both tables
    for title, group in chosen:
        typer.echo("")
        typer.echo(title)
        typer.echo("\n".join(lines(rows, group, tool_width)))


def _listed(label: str, items: Sequence[str], columns: int) -> list[str]:
    """`label` and the items separated by commas, in lines of at most `columns` characters where
    the items allow (a line breaks only between items; the later lines are indented)."""
    lines = [label.rstrip() + (" -" if not items else "")]
    for i, item in enumerate(items):
        text = item + ("," if i < len(items) - 1 else "")
        if lines[-1].endswith(":") or len(lines[-1]) + 1 + len(text) <= columns:
            lines[-1] += " " + text
        else:
            lines.append("  " + text)
    return lines


def _need(rows: Sequence[tuple[str, dict]], group: Sequence[str]) -> int:
    """The characters the counts of `group` take, two spaces before each."""
    return sum(2 + max(len(c), *(len(str(r[c])) for _t, r in rows)) for c in group)


def _tool_width(rows: Sequence[tuple[str, dict]], group: Sequence[str], columns: int) -> int:
    from rich.cells import cell_len

    natural = max(len("tool"), *(cell_len(t) for t, _r in rows))
    return max(min(natural, columns - _need(rows, group)), min(natural, MIN_TOOL))


def tables(rows: Sequence[tuple[str, dict]], columns: int) -> list[tuple[str, Sequence[str]]]:
    """The tables to print, `(title, counts)`: one with every count when it fits beside a tool
    column of MIN_TOOL characters (or the longest name, if shorter), else two."""
    from rich.cells import cell_len

    natural = max(len("tool"), *(cell_len(t) for t, _r in rows))
    if min(natural, MIN_TOOL) + _need(rows, COUNTS) <= columns:
        return [("by tool", COUNTS)]
    return [("by tool: the calls, by the policy's effect", CALLS), ("by tool: the asks, by their decision", DECISIONS)]


def _last_cells(text: str, cells: int) -> str:
    """The end of `text` that takes at most `cells` cells."""
    from rich.cells import cell_len

    out = ""
    for char in reversed(text):
        if cell_len(char + out) > cells:
            break
        out = char + out
    return out


def lines(rows: Sequence[tuple[str, dict]], group: Sequence[str], tool_width: int) -> list[str]:
    """The header and one line a tool: the tool in `tool_width` cells (a longer name keeps its
    beginning and its end around a …: names of one family share their beginning, as
    modify_pending_order_items and modify_pending_order_address do), the counts right-aligned
    under their whole header."""
    from rich.cells import cell_len, set_cell_size

    def fit(text: str) -> str:
        if cell_len(text) <= tool_width:
            return set_cell_size(text, tool_width)
        head = (tool_width - 1) // 2
        tail = tool_width - 1 - head
        return set_cell_size(set_cell_size(text, head) + "…" + _last_cells(text, tail), tool_width)

    widths = [max(len(c), *(len(str(r[c])) for _t, r in rows)) for c in group]
    out = [(fit("tool") + "".join(f"  {c:>{w}}" for c, w in zip(group, widths))).rstrip()]
    for tool, r in rows:
        out.append(fit(tool) + "".join(f"  {r[c]:>{w}}" for c, w in zip(group, widths)))
    return out
