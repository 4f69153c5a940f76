"""The numbers behind the reviewers' dashboard (service.web renders them as charts).

    d = dashboard(tail_records("ledger-dir"), rubber_stamp_seconds=10)
    d.queue            [(ts, pending)]: the number of requests waiting for a person, after each change
    d.by_tool          {tool: Latency(n, p50, p90)}: seconds from the interrupt to the final decision
    d.by_approver      {name: Latency}: the same, by whoever made the final decision
    d.rubber_stamps    [Stamp]: approvals given less than `rubber_stamp_seconds` after the interrupt
    d.edit_rate        [(bucket start ts, decided asks, edited asks)], by the day (hour on a short span)
    d.load             {name: decisions}: approvals, edits, rejections and responses each reviewer gave

The requests are folded with the workflow's own state machine (ledger.workflow.machine.Workflow),
so "pending" means what the Gate means by it (a quorum of two leaves the queue at the second
approval, not the first). Bounded: only the last `limit` events are decoded (DEFAULT_LIMIT); the
events of a request proposed before that window are skipped (`skipped` counts them), and the
page says so. Units: seconds (float); timestamps are ledger timestamps (UTC text,
docs/ledger-format.md section 3). Percentiles interpolate linearly between ranks, as
ledger.analytics.stats does.

Raises LedgerUnreadable / LedgerCorrupt (ledger.store.log) from `tail_records` for a directory
that is not a ledger or a line that is not an event; `dashboard` itself raises nothing on odd
input (an event the machine refuses is skipped and counted).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ledger import events as ev
from ledger.clock import parse_ts
from ledger.store.log import LedgerReader, Record, parse_line
from ledger.workflow.machine import Workflow

DEFAULT_LIMIT = 200_000
"""Events decoded for one dashboard: about a second of work and tens of MB at most; the page says
when the ledger holds more."""
MAX_POINTS = 400
"""Points kept of the queue-size series (the largest of each stretch, so a peak is never lost)."""
DECIDING = (ev.Approved, ev.Edited, ev.Rejected, ev.Responded)


@dataclass(frozen=True)
class Latency:
    """Seconds from the interrupt to the final decision: how many (`n`), median, 90th percentile."""

    n: int
    p50: float
    p90: float


@dataclass(frozen=True)
class Stamp:
    """An approval given `seconds` after the request's interrupt."""

    request: int
    tool: str
    approver: str
    seconds: float
    ts: str


@dataclass
class Dashboard:
    """What `dashboard` returns (module docstring). `events`: events read; `first_seq`,
    `last_seq`: the window; `total_events`: events in the ledger (more than `events` when the
    window cut the start off); `approvals`: approval events in the window."""

    events: int = 0
    first_seq: int = 0
    last_seq: int = 0
    total_events: int = 0
    skipped: int = 0
    rubber_stamp_seconds: float = 10.0
    queue: list[tuple[str, int]] = field(default_factory=list)
    by_tool: dict[str, Latency] = field(default_factory=dict)
    by_approver: dict[str, Latency] = field(default_factory=dict)
    rubber_stamps: list[Stamp] = field(default_factory=list)
    approvals: int = 0
    edit_rate: list[tuple[str, int, int]] = field(default_factory=list)
    load: dict[str, int] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.total_events > self.events


def tail_records(path: str | Path, limit: int = DEFAULT_LIMIT) -> tuple[list[Record], int]:
    """The last `limit` events of the ledger at `path`, decoded, and the number of events in it.
    Every line is scanned (to count them) but only the last `limit` are held and decoded. Raises
    LedgerUnreadable, LedgerCorrupt."""
    reader = LedgerReader(path)
    tail: collections.deque = collections.deque(maxlen=max(1, limit))
    total = 0
    for raw in reader.lines():
        tail.append(raw)
        total += 1
    first = total - len(tail) + 1
    return [parse_line(raw, first + i) for i, raw in enumerate(tail)], total


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` (0..1) percentile of `values` (not empty), interpolated between ranks."""
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _latencies(samples: dict[str, list[float]]) -> dict[str, Latency]:
    return {key: Latency(len(v), percentile(v, 0.5), percentile(v, 0.9)) for key, v in sorted(samples.items()) if v}


def _seconds(start: str, end: str) -> float:
    return (parse_ts(end) - parse_ts(start)).total_seconds()


def _thin(points: list[tuple[str, int]], most: int) -> list[tuple[str, int]]:
    """At most `most` points: of each run of consecutive points the largest (first on ties),
    and always the last point."""
    if len(points) <= most:
        return points
    step = -(-len(points) // (most - 1))
    out = [max(points[i:i + step], key=lambda p: p[1]) for i in range(0, len(points), step)]
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def dashboard(records: Iterable[Record], *, total_events: int | None = None, rubber_stamp_seconds: float = 10.0,
              max_points: int = MAX_POINTS) -> Dashboard:
    """Fold `records` (in seq order, e.g. from `tail_records`) into a Dashboard."""
    out = Dashboard(rubber_stamp_seconds=rubber_stamp_seconds)
    workflow = Workflow()
    interrupted_at: dict[int, str] = {}
    edited: set[int] = set()
    pending: set[int] = set()
    by_tool: dict[str, list[float]] = collections.defaultdict(list)
    by_approver: dict[str, list[float]] = collections.defaultdict(list)
    buckets: dict[str, list[int]] = {}
    decided: list[tuple[str, bool]] = []  # (decision ts, edited) of every ask decided in the window
    load: collections.Counter = collections.Counter()
    for record in records:
        event = record.event
        out.events += 1
        out.first_seq = out.first_seq or record.seq
        out.last_seq = record.seq
        request = record.seq if isinstance(event, ev.Proposed) else getattr(event, "request", None)
        if request is not None and not isinstance(event, ev.Proposed) and workflow.get(request) is None:
            out.skipped += 1  # proposed before the window
            continue
        try:
            workflow.apply(record.seq, event)
        except Exception:  # noqa: BLE001 -- an event the machine refuses here (a ledger that verify would flag): skipped
            out.skipped += 1
            continue
        if request is None:
            continue
        state = workflow.get(request)
        if state is None:
            continue
        if isinstance(event, ev.Interrupted):
            interrupted_at[request] = event.ts
        if isinstance(event, DECIDING):
            load[getattr(event, "approver", None) or event.editor] += 1
        if isinstance(event, ev.Edited):
            edited.add(request)
        if isinstance(event, ev.Approved):
            out.approvals += 1
            start = interrupted_at.get(request)
            if start is not None:
                seconds = _seconds(start, event.ts)
                if seconds < rubber_stamp_seconds:
                    out.rubber_stamps.append(Stamp(request, state.tool, event.approver, seconds, event.ts))
        waiting = state.status in ("pending", "interrupting") and request in interrupted_at
        if waiting and request not in pending:
            pending.add(request)
            out.queue.append((event.ts, len(pending)))
        elif not waiting and request in pending:
            pending.discard(request)
            out.queue.append((event.ts, len(pending)))
            seconds = _seconds(interrupted_at[request], event.ts)
            by_tool[state.tool].append(seconds)
            if state.decided_by:
                by_approver[state.decided_by].append(seconds)
            decided.append((event.ts, request in edited))
    out.total_events = max(total_events or 0, out.events)
    out.queue = _thin(out.queue, max_points)
    out.by_tool, out.by_approver = _latencies(by_tool), _latencies(by_approver)
    out.load = dict(load.most_common())
    if decided:
        span = _seconds(decided[0][0], decided[-1][0])
        width = 13 if span < 2 * 86_400 else 10  # by the hour ("2024-05-01T13") on a short span, else by the day
        for ts, was_edited in decided:
            bucket = buckets.setdefault(ts[:width], [0, 0])
            bucket[0] += 1
            bucket[1] += was_edited
        out.edit_rate = [(key, n, e) for key, (n, e) in buckets.items()]
    return out
