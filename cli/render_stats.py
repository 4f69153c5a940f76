"""Render a ledger.analytics.stats.Stats for a terminal: the queue, decisions, timing, then one row a tool."""

from typing import Any

import typer

from cli.output import say, table


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def render(s: Any) -> None:
    as_of = s.as_of.isoformat().replace("+00:00", "Z") if s.as_of else "-"
    typer.echo(f"{s.events} events, {s.requests} requests, as of {as_of}")
    typer.echo(f"queue now: {s.pending} pending, the oldest waiting {_duration(s.oldest_pending_seconds)}")
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(s.by_status.items(), key=lambda kv: -kv[1]))
    say(f"requests by status: {statuses or '-'}")
    decisions = ", ".join(f"{n} {d}" for d, n in sorted(s.decisions.items(), key=lambda kv: -kv[1]))
    say(f"decisions: {decisions or '-'}")
    typer.echo(
        f"time to decision ({s.decided_asks} decided asks): p50 {_duration(s.decision_p50_seconds)}, "
        f"p90 {_duration(s.decision_p90_seconds)}"
    )
    rate = f"{s.edit_rate:.1%}" if s.edit_rate is not None else "-"
    typer.echo(f"edit rate: {rate} ({s.edited_asks} of {s.asks} asks edited)")
    columns = ["tool", "requests", "allowed", "denied", "asks", "approved", "rejected", "responded", "expired", "edited", "pending", "failed"]
    rows = [
        [tool, *(getattr(t, c) for c in columns[1:])]
        for tool, t in sorted(s.by_tool.items(), key=lambda kv: (-kv[1].requests, kv[0]))
    ]
    if rows:
        table(columns, rows, title="by tool")
