"""`python -m bench --only analytics` (bench/analytics.py, issue 13) runs end to end on a small
ledger: every part, and every side's answers equal countersign's (main returns 1 otherwise). No
timing is asserted: the numbers are the benchmark's business."""

from __future__ import annotations

from bench import analytics
from bench.__main__ import main


def test_the_analytics_part_runs_and_every_side_agrees(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COUNTERSIGN_BENCH_DIR", str(tmp_path))
    status = main(["--only", "analytics", "--events", "1000", "--analytics-repeats", "1", "--no-write"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "question" not in line]
    assert len(rows) == 4 and all(row.endswith("| yes, yes, yes, yes |") for row in rows), printed
    assert "refresh: question 1 after 9,999 new events" in printed and "(counts right: yes)" in printed
    assert "targets (the targets are for 1,000,000 events; this run has 1,000):" in printed
    # The work directory is cleaned up; only the cached ledger stays.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger-1000-s1-v1"]


def test_the_baseline_fold_agrees_with_the_views_where_the_generated_workload_does_not_go(tmp_path):
    """Expiry, a cancel after an approval, an edit meeting the quorum, one approval of two, an ask
    not yet interrupted: the fold the baselines use (read_json_auto) and countersign's `requests`
    view give the same status, decision and decision time."""
    import duckdb

    from bench import ledger_gen
    from dsl.requirements import Requirements
    from ledger import events as ev
    from ledger.analytics.views import query
    from ledger.digest import encode_arguments
    from ledger.store.log import Ledger

    path = tmp_path / "l"
    one = Requirements.single(1, ("sup-1", "sup-2"), "sups", decisions=("approve", "edit"), timeout_seconds=60)
    two = Requirements.single(2, ("sup-1", "sup-2"), "sups", timeout_seconds=60)
    digest, args = encode_arguments({"x": 1})
    edited, _ = encode_arguments({"x": 2})
    empty, _ = encode_arguments({})
    data = b'{"args":' + args + b',"context":{}}'
    later, past = "2099-01-01T00:00:00.000000Z", "2000-01-01T00:00:00.000000Z"
    proposal = ev.Proposed(run="r", proposer="agent", call_id=None, tool="t", args_digest=digest, context_digest=empty,
                           policy="p", policy_digest=ledger_gen.POLICY_DIGEST, effect="ask",
                           rules=(ev.RuleRef(id="ask", line=1),), reasons=("why",))
    with Ledger(path) as ledger:
        ledger.append_batch([(proposal, data)] * 5)  # requests 2 to 6
        ledger.append_batch([
            (ev.Interrupted(request=2, requirements=one, deadline=past), None),
            (ev.Expired(request=2, outcome="reject", message="too late"), None),
            (ev.Interrupted(request=3, requirements=one, deadline=later), None),
            (ev.Approved(request=3, approver="sup-1", args_digest=digest, comment=None), None),
            (ev.Cancelled(request=3, by="agent", reason="not needed"), None),
            (ev.Interrupted(request=4, requirements=one, deadline=later), None),
            (ev.Edited(request=4, editor="sup-2", args_digest=edited, replaces=digest,
                       policy_digest=ledger_gen.POLICY_DIGEST, effect="ask", rules=(ev.RuleRef(id="ask", line=1),),
                       requirements=one, reason="narrower"), b'{"args":{"x":2}}'),
            (ev.Interrupted(request=5, requirements=two, deadline=later), None),
            (ev.Approved(request=5, approver="sup-1", args_digest=digest, comment=None), None),
        ])
    sql = "SELECT request, status, decision, decided_at FROM requests ORDER BY request"
    _cols, expected = query(path, sql)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    source = f"read_json_auto('{path}/events-*.jsonl')"
    baseline = analytics.QUESTIONS["requests_by_status"]["baseline"].replace("@SOURCE", source)
    folded = baseline.rsplit("SELECT status", 1)[0] + sql.replace("requests", "folded")
    assert con.execute(folded).fetchall() == expected
    assert [(r, s, d) for r, s, d, _at in expected] == [
        (2, "expired", "expire"), (3, "cancelled", "cancel"), (4, "approved", "approve"), (5, "pending", None),
        (6, "interrupting", None)]
