"""The approval-fatigue report as one self-contained HTML page (`countersign ledger report --out`).

    html = render(report(con, now=...), ledger_name="build/demo-ledger")

The page is rendered with Jinja2 (autoescaping on: every name from the ledger is escaped) from
templates/report.html beside this module; its charts are inline SVG from
ledger.analytics.svg_charts (that module says why not a charting library), its style sheet is
inline, and it holds no script. A Content-Security-Policy in the page itself forbids every
fetch (`default-src 'none'`), so the file opens the same with no network, and nothing a name in
the ledger could smuggle in can load anything either.

What it shows: the ledger's head hash and coverage, what verify said, then one section per
question of issue 13 (section 3), each with a chart, a sentence on what to look for, and for
rules and rubber stamps a table of ids, tools, rules, reviewers, counts and times. No tool
argument, context, reason or message is on the page (ledger.analytics.report never reads them).

Raises jinja2.TemplateError only for a broken template (a bug).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ledger.analytics import svg_charts as charts
from ledger.analytics.report import CANDIDATE_MIN_ENDED, CANDIDATE_SHARE, Report

TEMPLATES = Path(__file__).resolve().parent / "templates"
MOST_BARS = 20
"""Rows drawn in a bar chart (the largest); the tables and --json have them all."""


def _when(moment: datetime | None) -> str:
    return "–" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _percent(value: float) -> str:
    return f"{100 * value:.0f} %"


def _bin_label(low: float, high: float | None) -> str:
    """A histogram bin's label, short enough for eleven side by side: <1s, 10–30s, 1–5m, ≥4h."""
    def short(seconds: float) -> tuple[str, str]:
        if seconds < 60:
            return f"{seconds:g}", "s"
        if seconds < 3600:
            return f"{seconds / 60:g}", "m"
        return f"{seconds / 3600:g}", "h"
    if high is None:
        return "≥" + "".join(short(low))
    if low == 0:
        return "<" + "".join(short(high))
    (a, unit_a), (b, unit_b) = short(low), short(high)
    return f"{a}–{b}{unit_b}" if unit_a == unit_b else f"{a}{unit_a}–{b}{unit_b}"


def _charts(r: Report) -> dict[str, str]:
    starts = [b.start for b in r.buckets]
    width, name = r.window.bucket_seconds, r.window.bucket
    label = lambda i: starts[i].strftime("%Y-%m-%d %H:%M UTC")  # noqa: E731 -- a one-line tooltip helper
    b = r.buckets
    out: dict[str, str] = {}
    out["queue"] = charts.time_chart(
        starts, [charts.Series("most waiting at once", [x.queue_max for x in b])], style="step", whole=True,
        title="Queue size over time", y_label="asks waiting (requests)", bucket_seconds=width, bucket_name=name,
        tooltip=lambda i: f"{label(i)}: at most {b[i].queue_max} waiting, {b[i].queue_end} at the end; {b[i].asks} new asks")

    def latency(rows, title: str, what: str) -> str:
        rows = rows[:MOST_BARS]
        high = max((x.p90_seconds for x in rows), default=0)
        unit, per = charts.duration_unit(high)
        return charts.bar_chart(
            [f"{x.key} ({x.decisions})" for x in rows],
            [charts.Series("median (p50)", [x.p50_seconds / per for x in rows]),
             charts.Series("90th percentile (p90)", [x.p90_seconds / per for x in rows])],
            title=title, x_label=f"{unit} from the interrupt to {what}",
            value_format=lambda v: charts.duration(v * per))

    out["by_tool"] = latency(r.by_tool, "Time to decision by tool", "a person's decision")
    out["by_approver"] = latency(r.by_approver, "Time to decision by reviewer", "the reviewer's decision")
    s = r.rubber_stamps
    out["stamps"] = charts.histogram(
        [_bin_label(h.from_seconds, h.to_seconds) for h in s.histogram], [h.approvals for h in s.histogram],
        [h.rubber_stamp for h in s.histogram], title="Approvals by seconds taken",
        x_label="time from the arguments being shown to the approval", y_label="approvals",
        marked_name=f"faster than {s.threshold_seconds:g} s (rubber stamps)", other_name="slower")
    stampers = s.by_approver[:MOST_BARS]
    out["stamps_by_approver"] = charts.bar_chart(
        [x.approver for x in stampers],
        [charts.Series("rubber stamps", [x.rubber_stamps for x in stampers], charts.MARK),
         charts.Series("other approvals", [x.approvals - x.rubber_stamps for x in stampers], charts.COLORS[0])],
        stacked=True, whole=True, title="Rubber stamps by reviewer", x_label="approvals (events)")
    rates = r.rates.buckets
    rate_starts = [x.start for x in rates]
    out["drift"] = charts.time_chart(
        rate_starts, [charts.Series("edited", [x.edit_share for x in rates]),
                      charts.Series("rejected", [x.reject_share for x in rates], charts.MARK)],
        title="Edit rate and reject rate over time", y_label="share of decided asks (%)",
        bucket_seconds=r.rates.bucket_seconds, bucket_name=r.rates.bucket, y_format=_percent, y_top=0.1,
        tooltip=lambda i: (f"{rate_starts[i].strftime('%Y-%m-%d %H:%M UTC')}: {rates[i].decided} decided, "
                           f"{rates[i].edited} edited ({_share(rates[i].edit_share)}), "
                           f"{rates[i].rejected} rejected ({_share(rates[i].reject_share)})"))
    load = r.load[:MOST_BARS]
    out["load"] = charts.bar_chart(
        [x.approver for x in load],
        [charts.Series("approve", [x.approve for x in load], charts.COLORS[0]),
         charts.Series("edit", [x.edit for x in load], charts.COLORS[1]),
         charts.Series("reject", [x.reject for x in load], charts.MARK),
         charts.Series("respond", [x.respond for x in load], charts.COLORS[4])],
        stacked=True, whole=True, title="Load per reviewer", x_label="actions (approvals, edits, rejections, responses)")
    rules = r.rules[:MOST_BARS]
    out["rules"] = charts.bar_chart(
        [_rule_name(x.rule) for x in rules],
        [charts.Series("approved unchanged", [x.approved_unchanged for x in rules], charts.COLORS[2]),
         charts.Series("edited, rejected, responded, expired or cancelled",
                       [x.ended - x.approved_unchanged for x in rules], charts.COLORS[1]),
         charts.Series("still waiting", [x.pending for x in rules], charts.COLORS[6])],
        stacked=True, whole=True, title="Asks by rule, and how they ended", x_label="asks (requests)")
    out["expiries"] = charts.time_chart(
        starts, [charts.Series("expired", [x.expired for x in b], charts.MARK)], style="bars", whole=True,
        title="Expiries over time", y_label="asks expired (requests)", bucket_seconds=width, bucket_name=name,
        tooltip=lambda i: f"{label(i)}: {b[i].expired} expired")
    return out


def _rule_name(rule: str | None) -> str:
    return "(the policy's default)" if rule is None else rule


def render(report: Report, *, ledger_name: str) -> str:
    """The page for `report` (a ledger.analytics.report.Report); `ledger_name` titles it."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(when=_when, share=_share, duration=charts.duration, rule=_rule_name,
                       count=lambda n: f"{n:,}")
    return env.get_template("report.html").render(
        r=report, name=ledger_name, graphs=_charts(report), most_bars=MOST_BARS,
        candidate_min=CANDIDATE_MIN_ENDED, candidate_share=CANDIDATE_SHARE)
