"""Summary numbers for a ledger, computed in SQL over the views of ledger.analytics.views.

    s = stats("ledger-dir")
    s.pending, s.oldest_pending_seconds, s.decision_p50_seconds, s.edit_rate

Everything is derived from the `events`, `requests` and `decision_times` views, so the numbers
are those of the history as recorded; run `verify` first to know that the history is intact and
lawful. Units: counts are integers, durations are seconds (float), rates are fractions in [0, 1].

`stats` reads the ledger's columnar projection (DIR/projection/, ledger.analytics.projection),
refreshed first (built on first use), which reads each line once; when the projection cannot
cover every line (a line fails one of its checks) or cannot be written, the views over the log
(ledger.analytics.views) are read. Both give the same Stats.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import msgspec


class ToolStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counts for one tool. `requests` = allowed + denied + asks (by the policy's effect); the
    decision counts (approved, rejected, responded, expired, cancelled) and `edited` are over its
    asks; `pending` are asks waiting for a decision now; `executed` / `failed` are requests whose
    recorded outcome is "ok" / "error"."""

    requests: int
    allowed: int
    denied: int
    asks: int
    approved: int
    rejected: int
    responded: int
    expired: int
    cancelled: int
    edited: int
    pending: int
    executed: int
    failed: int


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    """What `stats()` returns.

    - `events`: lines in the ledger (one event each when the ledger is intact).
    - `requests`: proposed calls; `by_status`: status → count (the statuses of
      ledger.workflow.RequestState).
    - `pending`: requests waiting for a human decision; `oldest_pending_seconds`: how long the
      oldest of them has waited since it was proposed, in seconds, measured at `as_of` (None when
      nothing is pending).
    - `as_of`: the instant ages are measured at (UTC): the later of the `now` given to `stats`
      (the wall clock by default) and the last event's ts, so a clock behind the ledger never
      gives a negative age; `views_stats` and `projection_stats` without `now` use the last
      event's ts alone.
    - `decisions`: decision → count over all requests (approve, reject, respond, expire, cancel,
      deny); a request approved and then cancelled counts as cancel, as in RequestState.
    - `decided_asks`: asks with a decision; `decision_p50_seconds`, `decision_p90_seconds`: the
      median and 90th percentile (linear interpolation) of their seconds from proposal to
      decision (None when no ask was decided).
    - `asks`, `edited_asks`, `edit_rate` = edited_asks / asks (None when there are no asks).
    - `by_tool`: tool → ToolStats.
    """

    events: int
    requests: int
    by_status: dict[str, int]
    pending: int
    oldest_pending_seconds: float | None
    as_of: datetime | None
    decisions: dict[str, int]
    decided_asks: int
    decision_p50_seconds: float | None
    decision_p90_seconds: float | None
    asks: int
    edited_asks: int
    edit_rate: float | None
    by_tool: dict[str, ToolStats]


def stats(path: str | Path, now: datetime | None = None, *, projection: bool | None = None) -> Stats:
    """Compute the Stats of the ledger directory at `path`.

    `now` (a timezone-aware datetime) is the instant the queue's age is measured at; by default
    the wall clock, so that on a live ledger a request pending for 8 s shows 8 s (not its age at
    the last event, which a queue nobody touches never moves). Give `now` for a result that
    depends only on the ledger (the last event's ts, or any instant).
    `projection`: None or True (the default) reads the projection (ledger.analytics.projection),
    refreshed first and built when there is none; False reads the views over the log only.
    Whenever the projection does not cover the whole ledger (a line failed a check) or cannot be
    written, the views over the log are read: they tell the history as recorded.
    Raises ValueError for a naive `now`, ledger.store.log.LedgerUnreadable when `path` is not a ledger.
    """
    if now is None:
        now = datetime.now(timezone.utc)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if projection is not False:
        result = projection_stats(path, now, create=True)
        if result is not None:
            return result
    return views_stats(path, now)


def views_stats(path: str | Path, now: datetime | None = None) -> Stats:
    """The Stats computed over the views of ledger.analytics.views (every line parsed at each call);
    ages measured at `now`, by default at the last event's ts."""
    from ledger.analytics.views import connect

    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    con = connect(path)
    try:
        return _stats(con, now, _VIEW_SOURCES)
    finally:
        con.close()


def projection_stats(path: str | Path, now: datetime | None = None, *, create: bool = False) -> Stats | None:
    """The Stats read from the ledger's projection, refreshed first (made when `create`); None
    when there is no projection (and not `create`), it cannot be written, or it does not cover
    every line of the ledger (a line failed one of its checks: then only the views tell the
    history as recorded). Raises LedgerUnreadable when `path` is not a ledger."""
    from ledger.analytics import projection as proj

    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if not create and not proj.exists(path):
        return None
    try:
        with proj.opened(path, create=create, quick=True) as (con, state):
            if not state.complete:
                return None
            if con is not None:
                return _stats(con, now, _PROJECTION_SOURCES)
        from ledger.analytics.query import open_views

        with open_views(path) as views:  # up to date: read-only
            return _stats(views.con, now, _PROJECTION_SOURCES)
    except proj.ProjectionError:
        return None


_QUERY = """
WITH r AS MATERIALIZED (
    SELECT tool, effect, status, decision, edited, outcome, proposed_at,
           (epoch_us(decided_at) - epoch_us(proposed_at)) / 1e6 AS seconds
    FROM @REQUESTS
),
tools AS (
    SELECT tool,
           struct_pack(
               requests := count(*),
               allowed := count(*) FILTER (WHERE effect = 'allow'),
               denied := count(*) FILTER (WHERE effect = 'deny'),
               asks := count(*) FILTER (WHERE effect = 'ask'),
               approved := count(*) FILTER (WHERE effect = 'ask' AND decision = 'approve'),
               rejected := count(*) FILTER (WHERE effect = 'ask' AND decision = 'reject'),
               responded := count(*) FILTER (WHERE effect = 'ask' AND decision = 'respond'),
               expired := count(*) FILTER (WHERE effect = 'ask' AND decision = 'expire'),
               cancelled := count(*) FILTER (WHERE effect = 'ask' AND decision = 'cancel'),
               edited := count(*) FILTER (WHERE effect = 'ask' AND edited),
               pending := count(*) FILTER (WHERE status = 'pending'),
               executed := count(*) FILTER (WHERE outcome = 'ok'),
               failed := count(*) FILTER (WHERE outcome = 'error')
           ) AS counts
    FROM r GROUP BY tool
)
SELECT
    (@EVENTS) AS events,
    (@LAST_TS) AS last_ts,
    (SELECT count(*) FROM r) AS requests,
    (SELECT list(struct_pack(k := status, n := n)) FROM (SELECT status, count(*) AS n FROM r GROUP BY status)) AS by_status,
    (SELECT list(struct_pack(k := decision, n := n))
       FROM (SELECT decision, count(*) AS n FROM r WHERE decision IS NOT NULL GROUP BY decision)) AS decisions,
    (SELECT count(*) FROM r WHERE status = 'pending') AS pending,
    (SELECT min(proposed_at) FROM r WHERE status = 'pending') AS oldest_pending,
    (SELECT count(*) FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS decided_asks,
    (SELECT quantile_cont(seconds, 0.5) FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS p50,
    (SELECT quantile_cont(seconds, 0.9) FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS p90,
    (SELECT count(*) FROM r WHERE effect = 'ask') AS asks,
    (SELECT count(*) FROM r WHERE effect = 'ask' AND edited) AS edited_asks,
    (SELECT list(struct_pack(k := tool, v := counts)) FROM tools) AS by_tool
"""


# Where the query reads: the views (ledger.analytics.views), or the projection's tables (ledger.analytics.projection).
_VIEW_SOURCES = {
    "@REQUESTS": "requests",
    "@EVENTS": "SELECT count(*) FROM events",
    "@LAST_TS": "SELECT ts FROM events WHERE valid AND ts IS NOT NULL ORDER BY position DESC LIMIT 1",
}
# The same numbers from the projection (ledger.analytics.projection): the final requests pre-counted by
# every column the query groups or filters on (`final_summary`, n rows each) and their seconds to
# decision (`final_seconds`, for the quantiles); the open requests one by one. Counts are sums of
# n, which equal the counts over the requests themselves.
_PROJECTION_QUERY = """
WITH o AS MATERIALIZED (
    SELECT tool, effect, status, decision, edited, outcome, proposed_at,
           (epoch_us(decided_at) - epoch_us(proposed_at)) / 1e6 AS seconds
    FROM open_requests
),
r AS MATERIALIZED (
    SELECT tool, effect, status, decision, edited, outcome, 1::BIGINT AS n FROM o
    UNION ALL
    SELECT tool, effect, status, decision, edited, outcome, n FROM final_summary
),
secs AS (
    SELECT seconds FROM o WHERE effect = 'ask' AND decision IS NOT NULL
    UNION ALL
    SELECT seconds FROM final_seconds
),
tools AS (
    SELECT tool,
           struct_pack(
               requests := sum(n)::BIGINT,
               allowed := coalesce(sum(n) FILTER (WHERE effect = 'allow'), 0)::BIGINT,
               denied := coalesce(sum(n) FILTER (WHERE effect = 'deny'), 0)::BIGINT,
               asks := coalesce(sum(n) FILTER (WHERE effect = 'ask'), 0)::BIGINT,
               approved := coalesce(sum(n) FILTER (WHERE effect = 'ask' AND decision = 'approve'), 0)::BIGINT,
               rejected := coalesce(sum(n) FILTER (WHERE effect = 'ask' AND decision = 'reject'), 0)::BIGINT,
               responded := coalesce(sum(n) FILTER (WHERE effect = 'ask' AND decision = 'respond'), 0)::BIGINT,
               expired := coalesce(sum(n) FILTER (WHERE effect = 'ask' AND decision = 'expire'), 0)::BIGINT,
               cancelled := coalesce(sum(n) FILTER (WHERE effect = 'ask' AND decision = 'cancel'), 0)::BIGINT,
               edited := coalesce(sum(n) FILTER (WHERE effect = 'ask' AND edited), 0)::BIGINT,
               pending := coalesce(sum(n) FILTER (WHERE status = 'pending'), 0)::BIGINT,
               executed := coalesce(sum(n) FILTER (WHERE outcome = 'ok'), 0)::BIGINT,
               failed := coalesce(sum(n) FILTER (WHERE outcome = 'error'), 0)::BIGINT
           ) AS counts
    FROM r GROUP BY tool
)
SELECT
    (SELECT events FROM meta) AS events,
    (SELECT last_ts FROM meta) AS last_ts,
    (SELECT coalesce(sum(n), 0)::BIGINT FROM r) AS requests,
    (SELECT list(struct_pack(k := status, n := n)) FROM (SELECT status, sum(n)::BIGINT AS n FROM r GROUP BY status)) AS by_status,
    (SELECT list(struct_pack(k := decision, n := n))
       FROM (SELECT decision, sum(n)::BIGINT AS n FROM r WHERE decision IS NOT NULL GROUP BY decision)) AS decisions,
    (SELECT coalesce(sum(n), 0)::BIGINT FROM r WHERE status = 'pending') AS pending,
    (SELECT min(proposed_at) FROM o WHERE status = 'pending') AS oldest_pending,
    (SELECT coalesce(sum(n), 0)::BIGINT FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS decided_asks,
    (SELECT quantile_cont(seconds, 0.5) FROM secs) AS p50,
    (SELECT quantile_cont(seconds, 0.9) FROM secs) AS p90,
    (SELECT coalesce(sum(n), 0)::BIGINT FROM r WHERE effect = 'ask') AS asks,
    (SELECT coalesce(sum(n), 0)::BIGINT FROM r WHERE effect = 'ask' AND edited) AS edited_asks,
    (SELECT list(struct_pack(k := tool, v := counts)) FROM tools) AS by_tool
"""
_PROJECTION_SOURCES = {"@QUERY": _PROJECTION_QUERY}


def _query(sources: dict[str, str]) -> str:
    if "@QUERY" in sources:
        return sources["@QUERY"]
    text = _QUERY
    for marker, sql in sources.items():
        text = text.replace(marker, sql)
    return text


def _stats(con, now: datetime | None, sources: dict[str, str]) -> Stats:
    cursor = con.execute(_query(sources))
    names = [d[0] for d in cursor.description]
    row = dict(zip(names, cursor.fetchone()))
    as_of = now if now is not None else row["last_ts"]
    if as_of is not None and row["last_ts"] is not None:
        as_of = max(as_of, row["last_ts"])  # ledger timestamps never go backwards; nor do ages
    if as_of is not None:
        as_of = as_of.astimezone(timezone.utc)
    oldest_seconds = None
    if row["pending"] and row["oldest_pending"] is not None and as_of is not None:
        oldest_seconds = (as_of - row["oldest_pending"]).total_seconds()
    asks, edited = row["asks"], row["edited_asks"]
    return Stats(
        events=row["events"],
        requests=row["requests"],
        by_status={e["k"]: e["n"] for e in sorted(row["by_status"] or [], key=lambda e: e["k"])},
        pending=row["pending"],
        oldest_pending_seconds=oldest_seconds,
        as_of=as_of,
        decisions={e["k"]: e["n"] for e in sorted(row["decisions"] or [], key=lambda e: e["k"])},
        decided_asks=row["decided_asks"],
        decision_p50_seconds=row["p50"],
        decision_p90_seconds=row["p90"],
        asks=asks,
        edited_asks=edited,
        edit_rate=(edited / asks) if asks else None,
        by_tool={e["k"]: ToolStats(**e["v"]) for e in sorted(row["by_tool"] or [], key=lambda e: e["k"])},
    )
