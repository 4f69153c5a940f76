"""ledger.analytics.dashboard: the numbers behind the inbox's charts, on ledgers built with a
manual clock so every duration is known."""

from __future__ import annotations

from support import START, build_mixed_ledger, gate

from ledger.analytics.dashboard import Dashboard, dashboard, percentile, tail_records
from ledger.clock import ManualClock


def _ledger(tmp_path):
    clock = ManualClock(START)
    g = gate(tmp_path / "l", clock)
    a = g.propose("small_change", {"id": 1}, proposer="bot", run="r")  # approved after 5 s: a rubber stamp
    clock.advance(5)
    g.approve(a.request, approver="alice", digest=a.args_digest)
    b = g.propose("big_change", {"amount": 10}, proposer="bot", run="r")  # edited (the editor counts), then approved
    clock.advance(30)
    g.edit(b.request, editor="sup-1", args={"amount": 5})
    clock.advance(30)
    state = g.get(b.request)
    g.approve(b.request, approver="sup-2", digest=state.digest)
    c = g.propose("small_change", {"id": 2}, proposer="bot", run="r")  # rejected after 200 s
    clock.advance(200)
    g.reject(c.request, approver="alice", reason="no")
    g.propose("small_change", {"id": 3}, proposer="bot", run="r")  # still waiting
    g.close()
    return tmp_path / "l"


def test_latencies_rubber_stamps_edits_load_and_queue(tmp_path):
    records, total = tail_records(_ledger(tmp_path))
    d = dashboard(records, total_events=total, rubber_stamp_seconds=10)
    assert not d.truncated and d.skipped == 0 and d.events == total
    assert [(s.approver, s.seconds) for s in d.rubber_stamps] == [("alice", 5.0)]
    assert d.approvals == 2
    small, big = d.by_tool["small_change"], d.by_tool["big_change"]
    assert (small.n, small.p50, small.p90) == (2, 102.5, 180.5)
    assert (big.n, big.p50) == (1, 60.0)  # a quorum of two: it leaves the queue at the second decision
    assert d.by_approver["sup-2"].p50 == 60.0 and d.by_approver["alice"].n == 2
    assert d.load == {"alice": 2, "sup-1": 1, "sup-2": 1}
    assert sum(n for _, n, _ in d.edit_rate) == 3 and sum(e for _, _, e in d.edit_rate) == 1
    sizes = [n for _, n in d.queue]
    assert max(sizes) == 1 and sizes[-1] == 1  # one at a time here; the last one still waits
    assert len(dashboard(records, rubber_stamp_seconds=1000).rubber_stamps) == 2  # alice's after 5 s and sup-2's after 60 s


def test_a_window_skips_requests_proposed_before_it(tmp_path):
    path = _ledger(tmp_path)
    records, total = tail_records(path, limit=4)
    d = dashboard(records, total_events=total)
    assert d.truncated and d.events == 4 and d.total_events == total and d.first_seq == total - 3
    assert d.skipped >= 1


def test_the_mixed_ledger_folds_without_errors(tmp_path):
    g, _ = build_mixed_ledger(tmp_path / "m")
    g.close()
    d = dashboard(tail_records(tmp_path / "m")[0])
    assert isinstance(d, Dashboard) and d.skipped == 0 and d.by_tool


def test_percentile_interpolates_between_ranks():
    assert percentile([1.0], 0.9) == 1.0
    assert percentile([0.0, 10.0], 0.5) == 5.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.9) == 3.7


def test_a_long_queue_series_is_thinned_keeping_peaks():
    from ledger.analytics.dashboard import _thin

    points = [(str(i), i % 7) for i in range(10_000)]
    thin = _thin(points, 100)
    assert len(thin) <= 101 and max(n for _, n in thin) == 6 and thin[-1] == points[-1]
