"""`countersign ledger report` (issue 13, section 3): the numbers of ledger.analytics.report checked
against values computed by hand on a small ledger made through a Gate with a manual clock; the
--json keys; the page's contents (no arguments, no reasons); the page in a real browser (Debian's
Chromium through Playwright, every request but the file itself refused).

The ledger (seconds after START; every ask interrupts when proposed):

    t     request                                    then
    0     L1 lookup      (rule lookups)            alice approves at 3        a rubber stamp (3 s)
    50    read_thing     allowed
    55    drop_thing     denied
    100   L2 lookup                                alice approves at 160      60 s
    200   L3 lookup                                bob approves at 320        120 s
    400   L4 lookup                                bob approves at 430        30 s
    500   L5 lookup                                alice approves at 520      20 s
    600   C1 change      (rule changes)            bob edits at 660           approved by the edit, 60 s
    700   C2 change                                carol rejects at 1000      300 s
    800   C3 change      (timeout 1 h)             expires at 5000
    900   B1 big         (rule big, 2 from sups)   sup-1 edits at 960, sup-2 approves at 964:
                                                   64 s to decide, a rubber stamp of the edit (4 s)
    950   X  other_thing (the policy's default)    alice approves at 960 (10 s: not under 10 s),
                                                   the agent cancels at 1500
    1100  P1 lookup                                still waiting

Time to decision (a person's): 3, 20, 30, 60, 60, 64, 120, 300 s. The queue holds C2, C3, B1 and
X at 950 (the peak, 4); X leaves it at its approval (960), not at its cancel.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from ledger.analytics import report as rep
from ledger.analytics.report_page import render
from ledger.analytics.views import COLUMNS, connect
from ledger.clock import ManualClock
from ledger.workflow.gate import Gate

START = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)  # a Monday
ROOT = Path(__file__).resolve().parents[1]
SECRET_ARG = "ARG-SECRET-7731"
SECRET_REASON = "REASON-SECRET-5512"

POLICY = """
policy "report-test"
default ask "No rule covers this tool."
group sups = ["sup-1", "sup-2", "sup-3"]

allow read_thing
deny drop_thing reason "Never drop things."
ask lookup reason "A person checks lookups." timeout 4h id "lookups"
ask change reason "A person checks changes." decisions approve, edit, reject timeout 1h id "changes"
ask big reason "Two supervisors." approvers 2 from sups decisions approve, edit, reject timeout 4h id "big"
"""


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    return make(tmp_path_factory.mktemp("report") / "ledger")


def make(path: Path) -> Path:
    """The module docstring's ledger, its steps in time order."""
    clock = ManualClock(START)
    g = Gate(Policy.from_text(POLICY, "report-test.policy"), path, clock=clock)
    asks: dict[str, object] = {}

    def at(seconds: float) -> None:
        clock.set(START + timedelta(seconds=seconds))

    def propose(name: str, tool: str, n: int = 0) -> None:
        asks[name] = g.propose(tool, {"q": SECRET_ARG, "n": n}, proposer="agent", run="run-1")

    def approve(name: str, who: str) -> None:
        request = asks[name].request
        g.approve(request, approver=who, digest=g.get(request).digest)

    steps = [
        (0, lambda: propose("L1", "lookup", 1)), (3, lambda: approve("L1", "alice")),
        (50, lambda: g.execute(g.propose("read_thing", {"q": SECRET_ARG}, proposer="agent").request, lambda a: None)),
        (55, lambda: g.propose("drop_thing", {"q": SECRET_ARG}, proposer="agent")),
        (100, lambda: propose("L2", "lookup", 2)), (160, lambda: approve("L2", "alice")),
        (200, lambda: propose("L3", "lookup", 3)), (320, lambda: approve("L3", "bob")),
        (400, lambda: propose("L4", "lookup", 4)), (430, lambda: approve("L4", "bob")),
        (500, lambda: propose("L5", "lookup", 5)), (520, lambda: approve("L5", "alice")),
        (600, lambda: propose("C1", "change", 1)),
        (660, lambda: g.edit(asks["C1"].request, editor="bob", args={"q": SECRET_ARG, "n": 10}, reason=SECRET_REASON)),
        (700, lambda: propose("C2", "change", 2)), (800, lambda: propose("C3", "change", 3)),
        (900, lambda: propose("B1", "big", 1)), (950, lambda: propose("X", "other_thing")),
        (960, lambda: g.edit(asks["B1"].request, editor="sup-1", args={"q": SECRET_ARG, "n": 20}, reason=SECRET_REASON)),
        (960, lambda: approve("X", "alice")),
        (964, lambda: approve("B1", "sup-2")),
        (1000, lambda: g.reject(asks["C2"].request, approver="carol", reason=SECRET_REASON)),
        (1100, lambda: propose("P1", "lookup", 6)),
        (1500, lambda: g.cancel(asks["X"].request, by="agent", reason=SECRET_REASON)),
        (5000, lambda: g.expire()),
    ]
    for seconds, step in steps:
        at(seconds)
        step()
    g.close()
    return path


NOW = START + timedelta(seconds=6000)


def numbers(path: Path, **kwargs) -> rep.Report:
    con = connect(path)
    try:
        return rep.report(con, now=NOW, **{"rubber_stamp_seconds": 10.0, **kwargs})
    finally:
        con.close()


def test_the_totals_match_the_hand_count(ledger):
    r = numbers(ledger)
    t = r.totals
    assert (t.requests, t.asks) == (13, 11)
    assert (t.decided, t.approved, t.approved_unchanged, t.edited, t.rejected, t.responded) == (8, 7, 5, 2, 1, 0)
    assert (t.expired, t.cancelled) == (1, 1)
    assert (t.edit_share, t.reject_share) == (0.25, 0.125)
    assert t.p50_seconds == 60.0 and t.p90_seconds == pytest.approx(174.0)  # rank 6.3 of 8: 120 + 0.3 * 180
    assert (t.approvals, t.rubber_stamps) == (7, 2)
    c = r.coverage
    assert c.events == r.window.events and c.first_seq == 1 and c.last_seq == c.events
    assert c.first_at == START and c.last_at == START + timedelta(seconds=5000)
    assert r.window.since == START and r.window.until == c.last_at + timedelta(microseconds=1)
    assert (r.window.bucket, r.window.bucket_seconds, len(r.buckets)) == ("minute", 60, 84)


def test_time_to_decision_by_tool_and_by_approver(ledger):
    r = numbers(ledger)
    tools = {x.key: (x.decisions, x.p50_seconds, x.p90_seconds) for x in r.by_tool}
    assert tools["lookup"] == (5, 30.0, pytest.approx(96.0))  # 3, 20, 30, 60, 120
    assert tools["change"] == (2, 180.0, pytest.approx(276.0))  # 60, 300 (the expiry is no one's decision)
    assert tools["big"] == (1, 64.0, 64.0)  # from the interrupt to the quorum's second step
    assert set(tools) == {"lookup", "change", "big"}  # X was cancelled: no decision of a person
    people = {x.key: (x.decisions, x.p50_seconds, x.p90_seconds) for x in r.by_approver}
    assert people == {"alice": (3, 20.0, pytest.approx(52.0)), "bob": (3, 60.0, pytest.approx(108.0)),
                      "carol": (1, 300.0, 300.0), "sup-2": (1, 64.0, 64.0)}
    assert [x.key for x in r.by_tool][0] == "lookup"  # the most decisions first


def test_rubber_stamps_count_from_the_interrupt_or_the_latest_edit(ledger):
    s = numbers(ledger).rubber_stamps
    assert (s.approvals, s.rubber_stamps, s.share) == (7, 2, 2 / 7)
    assert [(x.request, x.approver, x.seconds) for x in s.recent] == [
        (s.recent[0].request, "sup-2", 4.0), (1 + 1, "alice", 3.0)]  # newest first; L1 is request 2 (genesis is 1)
    assert s.recent[0].tool == "big"
    assert {x.approver: (x.approvals, x.rubber_stamps) for x in s.by_approver} == {
        "alice": (4, 1), "bob": (2, 0), "sup-2": (1, 1)}
    bins = {(b.from_seconds, b.to_seconds): b.approvals for b in s.histogram}
    assert bins[(2.0, 5.0)] == 2 and bins[(10.0, 30.0)] == 2  # 3 s and 4 s; X's 10 s and L5's 20 s
    assert sum(bins.values()) == 7
    assert [b.rubber_stamp for b in s.histogram].count(True) == 4  # <1, 1-2, 2-5, 5-10
    # strictly faster: X's approval after exactly 10 s counts from 10.5 s on
    assert numbers(ledger, rubber_stamp_seconds=10.5).rubber_stamps.rubber_stamps == 3
    assert numbers(ledger, rubber_stamp_seconds=0).rubber_stamps.rubber_stamps == 0


def test_load_per_reviewer(ledger):
    load = {x.approver: x for x in numbers(ledger).load}
    assert {a: (x.actions, x.approve, x.edit, x.reject, x.respond, x.requests, x.rubber_stamps)
            for a, x in load.items()} == {
        "alice": (4, 4, 0, 0, 0, 4, 1), "bob": (3, 2, 1, 0, 0, 3, 0), "carol": (1, 0, 0, 1, 0, 1, 0),
        "sup-1": (1, 0, 1, 0, 0, 1, 0), "sup-2": (1, 1, 0, 0, 0, 1, 1)}
    assert load["alice"].share == 0.4 and list(load)[0] == "alice"


def test_rules_and_the_allow_rule_candidate(ledger):
    rules = {x.rule: x for x in numbers(ledger).rules}
    lookups = rules["lookups"]
    assert (lookups.asks, lookups.ended, lookups.approved_unchanged, lookups.pending) == (6, 5, 5, 1)
    assert lookups.unchanged_share == 1.0 and lookups.candidate
    changes = rules["changes"]
    assert (changes.asks, changes.ended, changes.approved_unchanged, changes.approved_edited, changes.rejected,
            changes.expired) == (3, 3, 0, 1, 1, 1)
    assert not changes.candidate and changes.unchanged_share == 0.0
    assert (rules["big"].asks, rules["big"].approved_edited) == (1, 1)
    default = rules[None]  # the policy's default ask
    assert (default.asks, default.cancelled, default.policy) == (1, 1, "report-test")
    assert list(rules)[0] == "lookups"


def test_expiries_and_the_queue(ledger):
    r = numbers(ledger)
    assert (r.expiries.expired, r.expiries.ended, r.expiries.share) == (1, 10, 0.1)
    assert [(x.tool, x.expired) for x in r.expiries.by_tool] == [("change", 1)]
    q = r.queue
    assert (q.waiting, q.oldest_seconds) == (1, 4900.0)  # P1, proposed at 1100, at NOW (6000)
    assert (q.peak, q.peak_at) == (4, START + timedelta(seconds=950))
    width = timedelta(seconds=r.window.bucket_seconds)
    by_start = {b.start: b for b in r.buckets}

    def bucket(seconds: float) -> rep.Bucket:
        moment = START + timedelta(seconds=seconds)
        return next(b for s, b in by_start.items() if s <= moment < s + width)

    # X left the queue at its approval (960): from then C3 and (from 1100) P1 wait
    assert bucket(1200).queue_end == 2 and bucket(r.buckets[-1].start.timestamp() - START.timestamp()).queue_end == 1
    assert sum(b.expired for b in r.buckets) == 1 and bucket(5000).expired == 1
    assert sum(b.asks for b in r.buckets) == 11 and sum(b.decided for b in r.buckets) == 8
    assert sum(b.rubber_stamps for b in r.buckets) == 2 and sum(b.approvals for b in r.buckets) == 7
    assert max(b.queue_max for b in r.buckets) == 4


def test_a_window_counts_what_happened_inside_it(ledger):
    r = numbers(ledger, since=START + timedelta(seconds=600), until=START + timedelta(seconds=1000))
    t = r.totals
    assert (t.requests, t.asks) == (5, 5)  # C1, C2, C3, B1, X
    assert (t.decided, t.edited, t.rejected) == (2, 2, 0)  # C1 and B1; C2's rejection at 1000 is outside
    assert (t.approvals, t.rubber_stamps) == (2, 1)  # X's (10 s) and B1's (4 s)
    assert r.window.since == START + timedelta(seconds=600) and r.window.bucket == "minute"
    assert r.buckets[0].start == START + timedelta(seconds=600) and len(r.buckets) == 7
    assert r.queue.peak == 4
    with pytest.raises(ValueError):
        numbers(ledger, since=START + timedelta(seconds=10), until=START)


def test_the_edit_and_reject_rates_have_their_own_buckets(ledger):
    r = numbers(ledger)
    assert r.rates.bucket_seconds >= r.window.bucket_seconds
    assert sum(b.decided for b in r.rates.buckets) == 8 and sum(b.edited for b in r.rates.buckets) == 2
    for b in r.rates.buckets:
        assert b.edit_share == (b.edited / b.decided if b.decided else None)


@pytest.mark.parametrize("span, name, most", [
    (timedelta(hours=2), "minute", 120), (timedelta(days=5), "hour", 120), (timedelta(days=100), "day", 100),
    (timedelta(days=3 * 365), "week", 158), (timedelta(days=10 * 365), "3 weeks", 174),
])
def test_buckets_fit_the_span(span, name, most):
    since = datetime(2026, 3, 4, 9, 17, 23, tzinfo=timezone.utc)  # a Wednesday
    got, seconds, origin, count = rep.choose_buckets(since, since + span)
    assert got == name and count <= rep.MAX_BUCKETS and abs(count - most) <= 2
    start = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=origin)
    assert start <= since < start + timedelta(seconds=seconds)
    if seconds % 604_800 == 0:
        assert start.weekday() == 0 and start.time().isoformat() == "00:00:00"  # weeks start on Monday


def test_the_report_reads_only_documented_columns_and_never_the_arguments(ledger, tmp_path):
    """The same numbers from plain tables named `requests` and `events` holding only the columns
    views.COLUMNS documents, less the arguments, the context and the bodies: what a columnar
    projection with the same names and columns gives."""
    import duckdb

    con = connect(ledger)
    kept = {name: [c for c in COLUMNS[name] if c not in ("args", "context", "data", "body")]
            for name in ("requests", "events")}
    for name, columns in kept.items():
        listed = ", ".join('"' + c + '"' for c in columns)
        con.execute(f"COPY (SELECT {listed} FROM {name}) TO '{tmp_path / name}.parquet' (FORMAT parquet)")
    con.close()
    other = duckdb.connect()
    other.execute("SET TimeZone = 'UTC'")
    for name in kept:
        other.execute(f"CREATE TABLE {name} AS SELECT * FROM '{tmp_path / name}.parquet'")
    assert rep.report(other, now=NOW) == numbers(ledger)
    assert other.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_report%'").fetchone() == (0,)


runner = CliRunner()

TOP_KEYS = ["generated_at", "rubber_stamp_seconds", "coverage", "window", "totals", "queue", "buckets", "rates",
            "by_tool", "by_approver", "rubber_stamps", "load", "rules", "expiries", "verify"]
NESTED_KEYS = {
    "coverage": ["events", "first_seq", "last_seq", "first_at", "last_at", "head"],
    "window": ["since", "until", "events", "bucket", "bucket_seconds"],
    "totals": ["requests", "asks", "ask_share", "decided", "approved", "approved_unchanged", "edited", "rejected",
               "responded", "expired", "cancelled", "approvals", "rubber_stamps", "edit_share", "reject_share",
               "p50_seconds", "p90_seconds"],
    "queue": ["waiting", "oldest_seconds", "peak", "peak_at"],
    "buckets[]": ["start", "asks", "decided", "approved", "edited", "rejected", "responded", "expired", "approvals",
                  "rubber_stamps", "queue_max", "queue_end", "edit_share", "reject_share"],
    "rates": ["bucket", "bucket_seconds", "buckets"],
    "rates.buckets[]": ["start", "decided", "edited", "rejected", "edit_share", "reject_share"],
    "by_tool[]": ["key", "decisions", "p50_seconds", "p90_seconds"],
    "by_approver[]": ["key", "decisions", "p50_seconds", "p90_seconds"],
    "rubber_stamps": ["threshold_seconds", "approvals", "rubber_stamps", "share", "histogram", "by_approver", "recent"],
    "rubber_stamps.histogram[]": ["from_seconds", "to_seconds", "approvals", "rubber_stamp"],
    "rubber_stamps.by_approver[]": ["approver", "approvals", "rubber_stamps", "share"],
    "rubber_stamps.recent[]": ["request", "tool", "approver", "seconds", "at"],
    "load[]": ["approver", "actions", "approve", "edit", "reject", "respond", "requests", "rubber_stamps", "share"],
    "rules[]": ["policy", "rule", "asks", "ended", "approved_unchanged", "approved_edited", "rejected", "responded",
                "expired", "cancelled", "pending", "unchanged_share", "candidate"],
    "expiries": ["expired", "ended", "share", "by_tool"],
    "expiries.by_tool[]": ["tool", "expired"],
    "verify": ["ok", "problem"],
}


def _at(document: dict, path: str) -> dict:
    value = document
    for part in path.split("."):
        value = value[part.removesuffix("[]")]
        if part.endswith("[]"):
            value = value[0]
    return value


def test_json_keys_are_stable_and_documented(ledger):
    result = runner.invoke(app, ["ledger", "report", str(ledger), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert list(document) == TOP_KEYS
    for path, keys in NESTED_KEYS.items():
        assert list(_at(document, path)) == keys, path
    assert document["verify"] == {"ok": True, "problem": None}
    assert document["totals"]["asks"] == 11 and document["rules"][0]["rule"] == "lookups"
    assert SECRET_ARG not in result.stdout and SECRET_REASON not in result.stdout
    help_text = runner.invoke(app, ["ledger", "report", "--help"], terminal_width=200).stdout
    docs = (ROOT / "docs" / "report.md").read_text()
    for path, keys in NESTED_KEYS.items():
        for key in [path.split(".")[-1].removesuffix("[]"), *keys]:
            assert key in help_text, f"{key} is not in the command's help"
            assert f"`{key}`" in docs, f"`{key}` is not in docs/report.md"


def test_the_page_holds_no_argument_or_reason_and_names_the_head(ledger, tmp_path):
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["ledger", "report", str(ledger), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert SECRET_ARG not in html and SECRET_REASON not in html
    head = numbers(ledger).coverage.head
    assert head in html and "intact and lawful" in html
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "default-src 'none'" in html
    assert html.count("<svg") == 9 and "allow-rule candidate" in html


def test_the_command_refuses_what_it_cannot_do(ledger, tmp_path):
    assert runner.invoke(app, ["ledger", "report", str(ledger)]).exit_code == 2  # neither --out nor --json
    inside = runner.invoke(app, ["ledger", "report", str(ledger), "--out", str(ledger / "r.html")])
    assert inside.exit_code == 2 and "inside the ledger" in inside.stderr and not (ledger / "r.html").exists()
    bad = runner.invoke(app, ["ledger", "report", str(ledger), "--json", "--since", "yesterday"])
    assert bad.exit_code == 2 and "ISO 8601" in bad.stderr
    backwards = runner.invoke(app, ["ledger", "report", str(ledger), "--json", "--since", "2026-03-02T13:00:00Z",
                                    "--until", "2026-03-02"])
    assert backwards.exit_code == 2
    missing = runner.invoke(app, ["ledger", "report", str(tmp_path / "none"), "--json"])
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    window = runner.invoke(app, ["ledger", "report", str(ledger), "--json", "--since", "2026-03-02T12:10:00",
                                 "--until", "2026-03-02T12:16:40+00:00", "--rubber-stamp", "10.5"])
    assert window.exit_code == 0, window.output
    document = json.loads(window.stdout)
    # times as every --json writes them (cli.output): the ledger's spelling, six fraction digits, Z
    assert document["window"]["since"] == "2026-03-02T12:10:00.000000Z" and document["totals"]["requests"] == 5
    assert document["rubber_stamp_seconds"] == 10.5 and document["totals"]["rubber_stamps"] == 2


def test_a_ledger_that_does_not_verify_says_so_on_the_page(ledger, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(ledger, copy)
    segment = sorted(copy.glob("events-*.jsonl"))[0]
    segment.write_bytes(segment.read_bytes().replace(b'"approver":"carol"', b'"approver":"carl!"', 1))
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["ledger", "report", str(copy), "--out", str(out), "--json"])
    assert result.exit_code == 0 and "does not verify" in result.stderr
    assert json.loads(result.stdout)["verify"]["ok"] is False
    assert "NO:" in out.read_text()


def test_an_empty_history_still_draws_every_chart(tmp_path):
    g = Gate(Policy.from_text(POLICY, "report-test.policy"), tmp_path / "l", clock=ManualClock(START))
    g.close()
    con = connect(tmp_path / "l")
    r = rep.report(con, now=NOW)
    con.close()
    assert r.coverage.events == 1 and r.totals.asks == 0 and r.totals.p50_seconds is None and len(r.buckets) == 1
    html = render(r, ledger_name="l")
    assert html.count("<svg") == 9 and html.count("Nothing to draw") >= 8
    msgspec.json.encode(r)


# --- in a real browser ---------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_the_page_opens_in_chromium_with_no_network(ledger, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    out = tmp_path / "report.html"
    assert runner.invoke(app, ["ledger", "report", str(ledger), "--out", str(out)]).exit_code == 0
    url = out.resolve().as_uri()
    refused, problems = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 940, "height": 900})
            context.route("**/*", lambda route: route.continue_() if route.request.url == url
                          else (refused.append(route.request.url), route.abort()))
            page = context.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(url, wait_until="load")
            sections = page.locator("section.chart")
            assert sections.count() == 8
            sizes = []
            for i in range(sections.count()):
                charts = sections.nth(i).locator("svg.chart")
                assert charts.count() >= 1, sections.nth(i).get_attribute("id")
                for j in range(charts.count()):
                    box = charts.nth(j).bounding_box()
                    sizes.append((sections.nth(i).get_attribute("id"), box["width"], box["height"]))
            assert len(sizes) == 9 and all(w > 300 and h > 100 for _, w, h in sizes), sizes
            assert page.locator("#head").inner_text() == numbers(ledger).coverage.head
            assert page.locator("svg.chart rect[fill]").count() > 20  # bars were drawn, not only frames
            assert "Approval report" in page.title()
        finally:
            browser.close()
    assert refused == [] and problems == []


def test_names_from_the_ledger_are_escaped_on_the_page(tmp_path):
    """A tool, a reviewer or a rule is named by whoever wrote the policy or runs the agent: on the
    page (text and SVG alike) it is text, never markup."""
    clock = ManualClock(START)
    g = Gate(Policy.from_text(POLICY, "report-test.policy"), tmp_path / "l", clock=clock)
    tool, reviewer = '<img src=x onerror="fetch(1)">', "</svg><script>alert(1)</script>"
    p = g.propose(tool, {"q": 1}, proposer="agent")
    clock.advance(2)
    g.approve(p.request, approver=reviewer, digest=p.args_digest)
    g.close()
    out = tmp_path / "r.html"
    assert runner.invoke(app, ["ledger", "report", str(tmp_path / "l"), "--out", str(out)]).exit_code == 0
    html = out.read_text()
    assert "<script" not in html and "<img" not in html and html.count("</svg>") == 9
    assert "&lt;img src=x onerror=&#34;fetch(1)&#34;&gt;" in html or "&lt;img src=x onerror=&quot;fetch(1)&quot;&gt;" in html
