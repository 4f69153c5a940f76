"""The numbers of the approval-fatigue report (`countersign ledger report`), computed in SQL.

    with ledger.analytics.query.open_views("ledger-dir") as views:  # the projection's views
        r = report(views.con, now=datetime.now(timezone.utc), rubber_stamp_seconds=10)
    r.buckets            [Bucket]: asks, decisions, edits, rejections, expiries, approvals, rubber
                         stamps and the queue's size, per time bucket (hour, day, week ...)
    r.by_tool            [Latency]: seconds from the interrupt to a person's decision, p50 / p90
    r.by_approver        [Latency]: the same, by the person whose decision ended the wait
    r.rubber_stamps      RubberStamps: approvals given less than `rubber_stamp_seconds` after the
                         arguments they approve were put before a person
    r.load               [ApproverLoad]: approvals, edits, rejections and responses per reviewer
    r.rules              [RuleAsks]: the rules that raise asks, and how those asks ended
    r.expiries           Expiries: asks nobody decided before their deadline

What it reads: only the views `requests` and `events` of ledger.analytics.views, and only
columns documented in its COLUMNS (never `args`, `context`, `data` or `body`): the same names
and columns serve whether the views read the JSON Lines files or a columnar projection. The
two are copied once into temporary tables (`_report_*`, dropped before returning) so that each
view is computed once, whatever the number of questions asked of it. The other views are not
needed: `pending` is the queue now only, `rates_by_*` carry no time to window them by, and
`decision_times` measures from the proposal and counts expiries and cancellations, which the
report keeps apart.

What a person sees is minimal: request ids, tools, policy and rule ids, reviewer names, counts
and times. No argument, context, reason or message leaves the ledger through a report.

Definitions (docs/report.md gives the same, for readers of the page):

- An *ask* is a request the policy sent to a person: effect `ask` and an `interrupted` event (a
  proposal a standing decision covered is decided without asking, so it is not an ask here).
- A *person's decision* ends an ask with approve, reject or respond (`requests.decision`,
  taken by `requests.decided_by`); expiries and cancellations are not a person's decision.
  *Time to decision* runs from the interrupt (`requests.interrupted_at`) to that decision.
- An *approval* is an `approved` event. Its latency runs from the moment the arguments it
  approves were put before a person: the request's interrupt, or the latest edit before it.
  An approval faster than `rubber_stamp_seconds` (strictly) is a *rubber stamp*.
- An ask *waits* (is in the queue) from its interrupt until its final decision, or until the
  approval that met its quorums when it was cancelled after that; an ask still pending waits on.
- *Edit rate* and *reject rate*: among the asks a person decided in a bucket, the share that
  were edited (by anyone, before the decision) and the share rejected.
- *Approved unchanged*: an ask whose decision is approve and whose arguments no one edited.
  A rule is an allow-rule *candidate* when at least CANDIDATE_MIN_ENDED of its asks ended and
  at least CANDIDATE_SHARE of those ended approved unchanged.

The window: `since` (inclusive) to `until` (exclusive), by default the ledger's first and last
event (the last included). Each count is of what happened in the window, at its own time: an
ask counts when it was proposed, a decision or an expiry when it was taken, an approval or a
reviewer's action when it was recorded. The queue counts the asks waiting, whenever they
started. `now` is when the report is made: the queue's size now and the age of its oldest ask
are measured at it.

Buckets: the smallest width of BUCKET_WIDTHS (a minute up to a week) that cuts the window into
at most MAX_BUCKETS, then whole weeks; buckets start at multiples of the width from a Monday at
midnight UTC, so days start at midnight and weeks on Monday.

Units: times are timezone-aware datetimes (UTC), durations seconds (float), shares fractions in
[0, 1] (None when their denominator is 0). Percentiles interpolate linearly between ranks
(DuckDB's quantile_cont), as ledger.analytics.stats does.

Raises duckdb.Error when a view cannot be read (an unreadable segment) and ValueError for a
window that ends before it starts or a negative threshold.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

import msgspec

MAX_BUCKETS = 200
"""At most this many points in a series over time."""
BUCKET_WIDTHS: tuple[tuple[str, int], ...] = (
    ("minute", 60), ("5 minutes", 300), ("15 minutes", 900), ("hour", 3600), ("day", 86_400), ("week", 604_800),
)
"""(name, seconds), tried in order; a window too long for weeks gets buckets of several weeks."""
RATE_WIDTHS: tuple[tuple[str, int], ...] = (*BUCKET_WIDTHS[:4], ("6 hours", 21_600), *BUCKET_WIDTHS[4:])
MIN_DECIDED_PER_POINT = 10
"""The edit and reject rates are drawn over buckets of their own: the smallest width of
RATE_WIDTHS, no narrower than the other buckets, that holds this many decided asks a bucket on
average (a share of two decisions is noise), else the widest that still gives 4 points."""
MONDAY = datetime(1970, 1, 5, tzinfo=timezone.utc)
"""The buckets' origin: every width above divides a week, so buckets align on days and weeks."""
LATENCY_EDGES: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0)
"""Upper edges (seconds) of the approval-latency histogram's bins; the threshold is added as an
edge so the bins below it are exactly the rubber stamps; the last bin is open."""
RECENT_STAMPS = 50
"""Rubber stamps listed one by one (the most recent); the others are counted."""
CANDIDATE_MIN_ENDED = 5
CANDIDATE_SHARE = 0.95


class Coverage(msgspec.Struct, frozen=True, kw_only=True):
    """The whole ledger: `events` lines, their seq and time range, and `head`, the last line's
    stored hash (what `ledger verify` prints as the head of an intact ledger)."""

    events: int
    first_seq: int | None
    last_seq: int | None
    first_at: datetime | None
    last_at: datetime | None
    head: str | None


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """What the report counts: from `since` (inclusive) to `until` (exclusive), `events` events;
    buckets of `bucket` (`bucket_seconds` long) starting at `buckets[0].start`."""

    since: datetime
    until: datetime
    events: int
    bucket: str
    bucket_seconds: int


class Totals(msgspec.Struct, frozen=True, kw_only=True):
    """Counts over the window. `requests`: proposals; `asks`: those put before a person;
    `decided`: asks a person decided (= approved + rejected + responded); `edited`: decided asks
    whose arguments were edited; `expired`, `cancelled`: asks that ended so; `approvals`:
    approved events; `rubber_stamps`: those faster than the threshold. `ask_share` = asks /
    requests; `edit_share`, `reject_share` = edited, rejected / decided; `p50_seconds`,
    `p90_seconds`: time to decision over the decided asks."""

    requests: int
    asks: int
    ask_share: float | None
    decided: int
    approved: int
    approved_unchanged: int
    edited: int
    rejected: int
    responded: int
    expired: int
    cancelled: int
    approvals: int
    rubber_stamps: int
    edit_share: float | None
    reject_share: float | None
    p50_seconds: float | None
    p90_seconds: float | None


class Queue(msgspec.Struct, frozen=True, kw_only=True):
    """The queue at `now` (whatever the window): asks `waiting`, the oldest since its interrupt
    `oldest_seconds` ago (None when none waits), and the most that ever waited at once in the
    window (`peak`) and when that was first reached (`peak_at`)."""

    waiting: int
    oldest_seconds: float | None
    peak: int
    peak_at: datetime | None


class Bucket(msgspec.Struct, frozen=True, kw_only=True):
    """One stretch of time from `start`, `Window.bucket_seconds` long (the last one is cut at the
    window's end). `asks`: asks proposed; `decided`, `approved`, `edited`, `rejected`,
    `responded`: asks a person decided, and how; `expired`; `approvals`, `rubber_stamps`:
    approved events and the fast ones; `queue_max`: the most asks waiting at any instant of it;
    `queue_end`: those waiting at its end; `edit_share`, `reject_share`: edited, rejected /
    decided (None when nothing was decided)."""

    start: datetime
    asks: int
    decided: int
    approved: int
    edited: int
    rejected: int
    responded: int
    expired: int
    approvals: int
    rubber_stamps: int
    queue_max: int
    queue_end: int
    edit_share: float | None
    reject_share: float | None


class RateBucket(msgspec.Struct, frozen=True, kw_only=True):
    """The asks a person decided from `start`, `Rates.bucket_seconds` long: `decided`, of them
    `edited` and `rejected`, and their shares (None when nothing was decided)."""

    start: datetime
    decided: int
    edited: int
    rejected: int
    edit_share: float | None
    reject_share: float | None


class Rates(msgspec.Struct, frozen=True, kw_only=True):
    """The edit and reject rates over time, in buckets of `bucket` (`bucket_seconds`) chosen so
    each holds about MIN_DECIDED_PER_POINT decisions (see RATE_WIDTHS)."""

    bucket: str
    bucket_seconds: int
    buckets: list[RateBucket]


class Latency(msgspec.Struct, frozen=True, kw_only=True):
    """Time to decision for one tool or one reviewer (`key`): `decisions` asks, the median and
    90th percentile, seconds."""

    key: str
    decisions: int
    p50_seconds: float
    p90_seconds: float


class HistogramBin(msgspec.Struct, frozen=True, kw_only=True):
    """Approvals whose latency is at least `from_seconds` and below `to_seconds` (None: no
    upper bound); `rubber_stamp`: the bin lies below the threshold."""

    from_seconds: float
    to_seconds: float | None
    approvals: int
    rubber_stamp: bool


class Stamp(msgspec.Struct, frozen=True, kw_only=True):
    """One rubber stamp: `approver` approved `request` (a call of `tool`) at `at`, `seconds`
    after its arguments were put before a person."""

    request: int
    tool: str
    approver: str
    seconds: float
    at: datetime


class StampsByApprover(msgspec.Struct, frozen=True, kw_only=True):
    approver: str
    approvals: int
    rubber_stamps: int
    share: float


class RubberStamps(msgspec.Struct, frozen=True, kw_only=True):
    """Approvals in the window (`approvals`), those faster than `threshold_seconds`
    (`rubber_stamps`, `share` of approvals), their latencies (`histogram`), per reviewer
    (`by_approver`, most stamps first) and the `recent` ones (up to RECENT_STAMPS, newest first)."""

    threshold_seconds: float
    approvals: int
    rubber_stamps: int
    share: float | None
    histogram: list[HistogramBin]
    by_approver: list[StampsByApprover]
    recent: list[Stamp]


class ApproverLoad(msgspec.Struct, frozen=True, kw_only=True):
    """A reviewer's actions in the window: `actions` = approve + edit + reject + respond (events),
    on `requests` distinct requests; `rubber_stamps` among the approvals; `share`: of all the
    reviewers' actions."""

    approver: str
    actions: int
    approve: int
    edit: int
    reject: int
    respond: int
    requests: int
    rubber_stamps: int
    share: float


class RuleAsks(msgspec.Struct, frozen=True, kw_only=True):
    """The asks one rule raised in the window (`rule` None: the policy's default; an ask several
    rules raised counts under each) and how they ended: `ended` (any decision) = approved_unchanged
    + approved_edited + rejected + responded + expired + cancelled; `pending` still wait.
    `unchanged_share` = approved_unchanged / ended; `candidate`: see the module docstring."""

    policy: str
    rule: str | None
    asks: int
    ended: int
    approved_unchanged: int
    approved_edited: int
    rejected: int
    responded: int
    expired: int
    cancelled: int
    pending: int
    unchanged_share: float | None
    candidate: bool


class ToolExpiries(msgspec.Struct, frozen=True, kw_only=True):
    tool: str
    expired: int


class Expiries(msgspec.Struct, frozen=True, kw_only=True):
    """Asks that expired in the window (`expired`), their `share` of the asks that ended in it,
    and by tool (most first)."""

    expired: int
    ended: int
    share: float | None
    by_tool: list[ToolExpiries]


class Integrity(msgspec.Struct, frozen=True, kw_only=True):
    """What `ledger verify` said when the report was made (filled by the command, not by
    `report`): `ok`, and the problem it named."""

    ok: bool
    problem: str | None


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """What `report` returns; the module docstring says what each part counts."""

    generated_at: datetime
    rubber_stamp_seconds: float
    coverage: Coverage
    window: Window
    totals: Totals
    queue: Queue
    buckets: list[Bucket]
    rates: Rates
    by_tool: list[Latency]
    by_approver: list[Latency]
    rubber_stamps: RubberStamps
    load: list[ApproverLoad]
    rules: list[RuleAsks]
    expiries: Expiries
    verify: Integrity | None = None


# --- the window and its buckets -----------------------------------------------------------------


def _us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (exact, unlike .timestamp())."""
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _at(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)


def _cover(since: datetime, until: datetime, seconds: int) -> tuple[int, int]:
    """(origin in µs since the epoch, count) of the buckets `seconds` wide that cover [since, until)."""
    start, end, width = _us(since), _us(until), seconds * 1_000_000
    origin = start - (start - _us(MONDAY)) % width
    return origin, max(1, -(-(end - origin) // width))


def choose_buckets(since: datetime, until: datetime, most: int = MAX_BUCKETS) -> tuple[str, int, int, int]:
    """(name, width in seconds, origin in µs since the epoch, count) of the buckets that cover
    [since, until): the first width of BUCKET_WIDTHS giving at most `most`, else whole weeks."""
    for name, seconds in BUCKET_WIDTHS:
        origin, count = _cover(since, until, seconds)
        if count <= most:
            return name, seconds, origin, count
    weeks = 2
    while _cover(since, until, weeks * 604_800)[1] > most:
        weeks += 1
    return (f"{weeks} weeks", weeks * 604_800, *_cover(since, until, weeks * 604_800))


def choose_rate_buckets(since: datetime, until: datetime, decided: int, narrowest: int) -> tuple[str, int, int, int]:
    """Like choose_buckets, for the edit and reject rates: the first width of RATE_WIDTHS at least
    `narrowest` seconds wide, with at most MAX_BUCKETS buckets, that holds MIN_DECIDED_PER_POINT
    of the `decided` asks a bucket on average; else the widest of those that still gives 4
    buckets; else the narrowest of them; else choose_buckets'."""
    fitting = []
    for name, seconds in RATE_WIDTHS:
        origin, count = _cover(since, until, seconds)
        if seconds < narrowest or count > MAX_BUCKETS:
            continue
        if decided >= MIN_DECIDED_PER_POINT * count:
            return name, seconds, origin, count
        fitting.append((name, seconds, origin, count))
    several = [f for f in fitting if f[3] >= 4]
    if several:
        return several[-1]
    return fitting[0] if fitting else choose_buckets(since, until)


# --- SQL ------------------------------------------------------------------------------------------

_TABLES = ("_report_events", "_report_requests", "_report_asks", "_report_approvals")

# Every event, its small columns only: the coverage, the reviewers' actions and the approvals'
# latencies come from it. `actor` is who acted, as the views' rates_by_approver counts them.
_EVENTS_SQL = """
CREATE OR REPLACE TEMP TABLE _report_events AS
SELECT position, seq, ts, kind, request, valid, hash,
       CASE kind WHEN 'approved' THEN approver WHEN 'edited' THEN editor
                 WHEN 'rejected' THEN approver WHEN 'responded' THEN approver END AS actor
FROM events
"""

_REQUESTS_SQL = """
CREATE OR REPLACE TEMP TABLE _report_requests AS
SELECT request, tool, policy, rules, effect, status, decision, decided_at, decided_by,
       proposed_at, interrupted_at, edited, quorums, approved_by
FROM requests
"""

# The asks, with when each stopped waiting (`left_at`; NULL while it waits). A cancel after the
# quorums were met (all of them, as the `pending` view counts approvals) ended the wait at the
# last approving step, not at the cancel.
_ASKS_SQL = """
CREATE OR REPLACE TEMP TABLE _report_asks AS
WITH approving AS (
    SELECT request, max(ts) AS last_approving_at
    FROM _report_events WHERE valid AND kind IN ('approved', 'edited') GROUP BY request
)
SELECT r.request, r.tool, r.policy, r.rules, r.status, r.decision, r.decided_at, r.decided_by,
       r.proposed_at, r.interrupted_at, coalesce(r.edited, false) AS edited,
       r.decision IN ('approve', 'reject', 'respond') AND r.decided_by IS NOT NULL AS by_person,
       CASE WHEN r.decision IS NULL OR r.status IN ('pending', 'interrupting') THEN NULL
            WHEN r.decision = 'cancel' AND coalesce(list_bool_and(list_transform(r.quorums, lambda q:
                     len(list_filter(r.approved_by, lambda a: q.approvers IS NULL OR list_contains(q.approvers, a))) >= q.count
                 )), false)
                 THEN least(coalesce(a.last_approving_at, r.decided_at), r.decided_at)
            ELSE r.decided_at END AS left_at,
       (epoch_us(r.decided_at) - epoch_us(r.interrupted_at)) / 1e6 AS seconds
FROM _report_requests r LEFT JOIN approving a ON a.request = r.request
WHERE r.effect = 'ask' AND r.interrupted_at IS NOT NULL
"""

# Every approval in the window with its latency: from the latest interrupt, edit or escalation of its
# request recorded before it (an as-of join on the position in the ledger).
_APPROVALS_SQL = """
CREATE OR REPLACE TEMP TABLE _report_approvals AS
WITH shown AS (
    SELECT request, position, ts FROM _report_events WHERE valid AND kind IN ('interrupted', 'edited', 'escalated')
),
appr AS (
    SELECT request, position, ts, actor FROM _report_events
    WHERE valid AND kind = 'approved' AND ts >= $since AND ts < $until
)
SELECT appr.request, appr.ts AS approved_at, appr.actor AS approver, r.tool,
       (epoch_us(appr.ts) - epoch_us(shown.ts)) / 1e6 AS seconds
FROM appr ASOF JOIN shown ON appr.request = shown.request AND appr.position > shown.position
JOIN _report_requests r ON r.request = appr.request
"""

# The queue's size after each instant anything entered or left it (levels), over the whole
# history; a bucket's size at its start is the last level before it (an as-of join).
_LEVELS_CTE = """
deltas AS (
    SELECT epoch_us(interrupted_at) AS us, 1 AS d FROM _report_asks
    UNION ALL
    SELECT epoch_us(left_at), -1 FROM _report_asks WHERE left_at IS NOT NULL
),
levels AS (
    SELECT us, sum(sum(d)) OVER (ORDER BY us) AS level FROM deltas GROUP BY us
)"""

_IN = "{col} >= $since AND {col} < $until"


def _bucket_of(col: str) -> str:
    return f"(epoch_us({col}) - $origin) // $width"


def _buckets_sql() -> str:
    return f"""
WITH idx AS (
    SELECT range AS i, $origin + range * $width AS start_us,
           least($origin + (range + 1) * $width, $until_us) AS end_us
    FROM range($n)
),
{_LEVELS_CTE},
asks AS (
    SELECT {_bucket_of('proposed_at')} AS i, count(*) AS asks
    FROM _report_asks WHERE {_IN.format(col='proposed_at')} GROUP BY ALL
),
decided AS (
    SELECT {_bucket_of('decided_at')} AS i,
           count(*) FILTER (WHERE by_person) AS decided,
           count(*) FILTER (WHERE by_person AND decision = 'approve') AS approved,
           count(*) FILTER (WHERE by_person AND edited) AS edited,
           count(*) FILTER (WHERE by_person AND decision = 'reject') AS rejected,
           count(*) FILTER (WHERE by_person AND decision = 'respond') AS responded,
           count(*) FILTER (WHERE decision = 'expire') AS expired
    FROM _report_asks WHERE {_IN.format(col='decided_at')} GROUP BY ALL
),
approvals AS (
    SELECT {_bucket_of('approved_at')} AS i, count(*) AS approvals,
           count(*) FILTER (WHERE seconds < $threshold) AS rubber_stamps
    FROM _report_approvals GROUP BY ALL
),
peaks AS (
    SELECT (us - $origin) // $width AS i, max(level) AS peak
    FROM levels WHERE us >= $since_us AND us < $until_us GROUP BY ALL
),
before_start AS (
    SELECT idx.i, l.level FROM idx ASOF LEFT JOIN levels l ON idx.start_us > l.us
),
at_end AS (
    SELECT idx.i, l.level FROM idx ASOF LEFT JOIN levels l ON idx.end_us > l.us
)
SELECT idx.i,
       coalesce(asks.asks, 0), coalesce(decided.decided, 0), coalesce(decided.approved, 0),
       coalesce(decided.edited, 0), coalesce(decided.rejected, 0), coalesce(decided.responded, 0),
       coalesce(decided.expired, 0), coalesce(approvals.approvals, 0), coalesce(approvals.rubber_stamps, 0),
       greatest(coalesce(before_start.level, 0), coalesce(peaks.peak, 0)),
       coalesce(at_end.level, 0)
FROM idx
LEFT JOIN asks USING (i) LEFT JOIN decided USING (i) LEFT JOIN approvals USING (i)
LEFT JOIN peaks USING (i) LEFT JOIN before_start USING (i) LEFT JOIN at_end USING (i)
ORDER BY idx.i
"""


_RATES_SQL = f"""
WITH decided AS (
    SELECT {_bucket_of('decided_at')} AS i, count(*) AS decided, count(*) FILTER (WHERE edited) AS edited,
           count(*) FILTER (WHERE decision = 'reject') AS rejected
    FROM _report_asks WHERE by_person AND {_IN.format(col='decided_at')} GROUP BY ALL
)
SELECT range AS i, coalesce(decided, 0), coalesce(edited, 0), coalesce(rejected, 0)
FROM range($n) LEFT JOIN decided ON decided.i = range ORDER BY range
"""


def _latency_sql(key: str) -> str:
    return f"""
SELECT {key}, count(*), quantile_cont(seconds, 0.5), quantile_cont(seconds, 0.9)
FROM _report_asks WHERE by_person AND {_IN.format(col='decided_at')}
GROUP BY {key} ORDER BY count(*) DESC, {key}
"""


_TOTALS_SQL = f"""
SELECT (SELECT count(*) FROM _report_requests WHERE {_IN.format(col='proposed_at')}),
       (SELECT count(*) FROM _report_asks WHERE {_IN.format(col='proposed_at')}),
       count(*) FILTER (WHERE by_person),
       count(*) FILTER (WHERE by_person AND decision = 'approve'),
       count(*) FILTER (WHERE by_person AND decision = 'approve' AND NOT edited),
       count(*) FILTER (WHERE by_person AND edited),
       count(*) FILTER (WHERE by_person AND decision = 'reject'),
       count(*) FILTER (WHERE by_person AND decision = 'respond'),
       count(*) FILTER (WHERE decision = 'expire'),
       count(*) FILTER (WHERE decision = 'cancel'),
       quantile_cont(seconds, 0.5) FILTER (WHERE by_person),
       quantile_cont(seconds, 0.9) FILTER (WHERE by_person),
       (SELECT count(*) FROM _report_approvals),
       (SELECT count(*) FILTER (WHERE seconds < $threshold) FROM _report_approvals)
FROM _report_asks WHERE {_IN.format(col='decided_at')}
"""

_QUEUE_SQL = f"""
WITH {_LEVELS_CTE.strip()},
before AS (SELECT level FROM levels WHERE us < $since_us ORDER BY us DESC LIMIT 1),
inside AS (SELECT us, level FROM levels WHERE us >= $since_us AND us < $until_us)
SELECT (SELECT count(*) FROM _report_asks WHERE status = 'pending'),
       (SELECT (epoch_us($now) - min(epoch_us(interrupted_at))) / 1e6 FROM _report_asks WHERE status = 'pending'),
       (SELECT level FROM before),
       (SELECT max(level) FROM inside),
       (SELECT min(us) FROM inside WHERE level = (SELECT max(level) FROM inside))
"""

_STAMPS_BY_APPROVER_SQL = """
SELECT approver, count(*) AS approvals, count(*) FILTER (WHERE seconds < $threshold) AS stamps
FROM _report_approvals GROUP BY approver ORDER BY stamps DESC, approvals DESC, approver
"""

_RECENT_STAMPS_SQL = f"""
SELECT request, tool, approver, seconds, approved_at FROM _report_approvals WHERE seconds < $threshold
ORDER BY approved_at DESC, request DESC LIMIT {RECENT_STAMPS}
"""

_LOAD_SQL = f"""
WITH acts AS (
    SELECT e.actor, e.kind, e.request FROM _report_events e JOIN _report_requests r ON r.request = e.request
    WHERE e.valid AND e.actor IS NOT NULL AND {_IN.format(col='e.ts')}
),
stamps AS (
    SELECT approver AS actor, count(*) FILTER (WHERE seconds < $threshold) AS stamps FROM _report_approvals GROUP BY ALL
)
SELECT acts.actor, count(*) AS actions,
       count(*) FILTER (WHERE kind = 'approved'), count(*) FILTER (WHERE kind = 'edited'),
       count(*) FILTER (WHERE kind = 'rejected'), count(*) FILTER (WHERE kind = 'responded'),
       count(DISTINCT request), coalesce(any_value(stamps.stamps), 0),
       count(*) / sum(count(*)) OVER ()
FROM acts LEFT JOIN stamps USING (actor)
GROUP BY acts.actor ORDER BY actions DESC, acts.actor
"""

_RULES_SQL = f"""
WITH asked AS (
    SELECT policy, unnest(CASE WHEN len(rules) = 0 THEN [NULL::VARCHAR] ELSE rules END) AS rule,
           status, decision, edited
    FROM _report_asks WHERE {_IN.format(col='proposed_at')}
)
SELECT policy, rule, count(*) AS asks,
       count(*) FILTER (WHERE decision IS NOT NULL AND status NOT IN ('pending', 'interrupting')) AS ended,
       count(*) FILTER (WHERE decision = 'approve' AND NOT edited) AS unchanged,
       count(*) FILTER (WHERE decision = 'approve' AND edited),
       count(*) FILTER (WHERE decision = 'reject'), count(*) FILTER (WHERE decision = 'respond'),
       count(*) FILTER (WHERE decision = 'expire'), count(*) FILTER (WHERE decision = 'cancel'),
       count(*) FILTER (WHERE status IN ('pending', 'interrupting'))
FROM asked GROUP BY policy, rule ORDER BY asks DESC, unchanged DESC, policy, rule NULLS LAST
"""

_EXPIRIES_SQL = f"""
SELECT tool, count(*) AS expired FROM _report_asks
WHERE decision = 'expire' AND {_IN.format(col='decided_at')}
GROUP BY tool ORDER BY expired DESC, tool
"""


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _histogram_sql(edges: list[float]) -> str:
    bounds = [0.0, *edges]
    parts = []
    for low, high in zip(bounds, [*edges, None]):
        cond = f"seconds >= {low!r}" + ("" if high is None else f" AND seconds < {high!r}")
        parts.append(f"count(*) FILTER (WHERE {cond})")
    return f"SELECT {', '.join(parts)} FROM _report_approvals"


def report(con, *, now: datetime, rubber_stamp_seconds: float = 10.0, since: datetime | None = None,
           until: datetime | None = None) -> Report:
    """The report over the views `requests` and `events` of `con` (a duckdb connection: the
    projection's, ledger.analytics.query.open_views, or the log's, ledger.analytics.views.connect). `now`, `since` and `until` are aware datetimes;
    `rubber_stamp_seconds` >= 0. Creates temporary tables named `_report_*` on `con` and drops
    them before returning. Raises ValueError (a window that ends before it starts, a negative
    threshold, a naive datetime) and duckdb.Error."""
    for name, moment in (("now", now), ("since", since), ("until", until)):
        if moment is not None and moment.tzinfo is None:
            raise ValueError(f"{name} must be timezone-aware")
    if not (rubber_stamp_seconds >= 0 and math.isfinite(rubber_stamp_seconds)):
        raise ValueError(f"the rubber-stamp threshold must be a number of seconds >= 0, not {rubber_stamp_seconds}")
    try:
        con.execute(_EVENTS_SQL)
        con.execute(_REQUESTS_SQL)
        con.execute(_ASKS_SQL)
        coverage = _coverage(con)
        window_since = since or coverage.first_at or now
        window_until = until or (coverage.last_at + timedelta(microseconds=1) if coverage.last_at else now)
        if window_until <= window_since:
            raise ValueError(f"the window ends ({window_until.isoformat()}) before it starts ({window_since.isoformat()})")
        bucket, width, origin, count = choose_buckets(window_since, window_until)
        params = {"since": window_since, "until": window_until, "since_us": _us(window_since),
                  "until_us": _us(window_until), "threshold": float(rubber_stamp_seconds)}
        con.execute(_APPROVALS_SQL, {"since": window_since, "until": window_until})
        in_window = con.execute("SELECT count(*) FROM _report_events WHERE ts >= $since AND ts < $until",
                                {"since": window_since, "until": window_until}).fetchone()[0]
        window = Window(since=window_since, until=window_until, events=in_window, bucket=bucket, bucket_seconds=width)
        buckets = _buckets(con, {**params, "origin": origin, "width": width * 1_000_000, "n": count})
        totals = _totals(con, params)
        rates = _rates(con, params, *choose_rate_buckets(window_since, window_until, totals.decided, width))
        return Report(
            generated_at=now,
            rubber_stamp_seconds=float(rubber_stamp_seconds),
            coverage=coverage,
            window=window,
            totals=totals,
            queue=_queue(con, params, now),
            buckets=buckets,
            rates=rates,
            by_tool=_latencies(con, "tool", params),
            by_approver=_latencies(con, "decided_by", params),
            rubber_stamps=_rubber_stamps(con, params),
            load=_load(con, params),
            rules=_rules(con, params),
            expiries=_expiries(con, params),
        )
    finally:
        for table in _TABLES:
            con.execute(f"DROP TABLE IF EXISTS {table}")


def _pick(params: dict, sql: str) -> dict:
    """The parameters `sql` names (DuckDB refuses a named parameter a statement does not use)."""
    return {k: v for k, v in params.items() if re.search(rf"\${k}\b", sql)}


def _run(con, sql: str, params: dict) -> list[tuple]:
    return con.execute(sql, _pick(params, sql)).fetchall()


def _coverage(con) -> Coverage:
    n, first_seq, last_seq, first_at, last_at, head = con.execute(
        "SELECT count(*), min(seq), max(seq), min(ts), max(ts), arg_max(hash, position) FROM _report_events"
    ).fetchone()
    return Coverage(events=n, first_seq=first_seq, last_seq=last_seq, first_at=first_at, last_at=last_at, head=head)


def _buckets(con, params: dict) -> list[Bucket]:
    origin, width = params["origin"], params["width"]
    out = []
    for i, asks, decided, approved, edited, rejected, responded, expired, approvals, stamps, qmax, qend in _run(
            con, _buckets_sql(), params):
        out.append(Bucket(start=_at(origin + i * width), asks=asks, decided=decided, approved=approved, edited=edited,
                          rejected=rejected, responded=responded, expired=expired, approvals=approvals,
                          rubber_stamps=stamps, queue_max=int(qmax), queue_end=int(qend),
                          edit_share=_share(edited, decided), reject_share=_share(rejected, decided)))
    return out


def _rates(con, params: dict, name: str, seconds: int, origin: int, count: int) -> Rates:
    width = seconds * 1_000_000
    rows = _run(con, _RATES_SQL, {**params, "origin": origin, "width": width, "n": count})
    return Rates(bucket=name, bucket_seconds=seconds, buckets=[
        RateBucket(start=_at(origin + i * width), decided=d, edited=e, rejected=r, edit_share=_share(e, d),
                   reject_share=_share(r, d)) for i, d, e, r in rows])


def _totals(con, params: dict) -> Totals:
    (requests, asks, decided, approved, unchanged, edited, rejected, responded, expired, cancelled, p50, p90,
     approvals, stamps) = _run(con, _TOTALS_SQL, params)[0]
    return Totals(requests=requests, asks=asks, ask_share=_share(asks, requests), decided=decided, approved=approved,
                  approved_unchanged=unchanged, edited=edited, rejected=rejected, responded=responded, expired=expired,
                  cancelled=cancelled, approvals=approvals, rubber_stamps=stamps, edit_share=_share(edited, decided),
                  reject_share=_share(rejected, decided), p50_seconds=p50, p90_seconds=p90)


def _queue(con, params: dict, now: datetime) -> Queue:
    waiting, oldest, before, peak_inside, peak_us = _run(con, _QUEUE_SQL, {**params, "now": now})[0]
    before = int(before or 0)
    if peak_inside is None or before >= peak_inside:  # the peak was already there when the window began
        peak, peak_at = before, params["since"] if before else None
    else:
        peak, peak_at = int(peak_inside), _at(peak_us)
    return Queue(waiting=waiting, oldest_seconds=oldest, peak=peak, peak_at=peak_at)


def _latencies(con, key: str, params: dict) -> list[Latency]:
    return [Latency(key=k, decisions=n, p50_seconds=p50, p90_seconds=p90)
            for k, n, p50, p90 in _run(con, _latency_sql(key), params)]


def _rubber_stamps(con, params: dict) -> RubberStamps:
    threshold = params["threshold"]
    edges = sorted({*LATENCY_EDGES, threshold} - {0.0})
    counts = _run(con, _histogram_sql(edges), params)[0]
    bounds = [0.0, *edges]
    histogram = [HistogramBin(from_seconds=low, to_seconds=high, approvals=n, rubber_stamp=high is not None and high <= threshold)
                 for low, high, n in zip(bounds, [*edges, None], counts)]
    by_approver = [StampsByApprover(approver=a, approvals=n, rubber_stamps=s, share=s / n)
                   for a, n, s in _run(con, _STAMPS_BY_APPROVER_SQL, params)]
    recent = [Stamp(request=r, tool=t, approver=a, seconds=s, at=at) for r, t, a, s, at in _run(con, _RECENT_STAMPS_SQL, params)]
    approvals = sum(counts)
    stamps = sum(b.approvals for b in histogram if b.rubber_stamp)
    return RubberStamps(threshold_seconds=threshold, approvals=approvals, rubber_stamps=stamps,
                        share=_share(stamps, approvals), histogram=histogram, by_approver=by_approver, recent=recent)


def _load(con, params: dict) -> list[ApproverLoad]:
    return [ApproverLoad(approver=a, actions=n, approve=ap, edit=ed, reject=rj, respond=rs, requests=rq,
                         rubber_stamps=st, share=float(sh))
            for a, n, ap, ed, rj, rs, rq, st, sh in _run(con, _LOAD_SQL, params)]


def _rules(con, params: dict) -> list[RuleAsks]:
    out = []
    for policy, rule, asks, ended, unchanged, edited, rejected, responded, expired, cancelled, pending in _run(
            con, _RULES_SQL, params):
        share = _share(unchanged, ended)
        out.append(RuleAsks(policy=policy, rule=rule, asks=asks, ended=ended, approved_unchanged=unchanged,
                            approved_edited=edited, rejected=rejected, responded=responded, expired=expired,
                            cancelled=cancelled, pending=pending, unchanged_share=share,
                            candidate=ended >= CANDIDATE_MIN_ENDED and share is not None and share >= CANDIDATE_SHARE))
    return out


def _expiries(con, params: dict) -> Expiries:
    by_tool = [ToolExpiries(tool=t, expired=n) for t, n in _run(con, _EXPIRIES_SQL, params)]
    expired = sum(t.expired for t in by_tool)
    ended = _run(con, f"SELECT count(*) FROM _report_asks WHERE decision IS NOT NULL AND {_IN.format(col='decided_at')}",
                 params)[0][0]
    return Expiries(expired=expired, ended=ended, share=_share(expired, ended), by_tool=by_tool)
