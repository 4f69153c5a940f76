"""Escalating asks (`timeout 4h else escalate approvers 1 from managers timeout 1h else reject`):
the requirements, the Gate with a manual clock, the workflow rules on `escalated` events, and
that verify (reference and compiled) and the projection read a ledger holding them."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from dsl import Policy
from dsl.requirements import Quorum, Requirements, Stage, strictest
from ledger import events as ev
from ledger import verify
from ledger.clock import ManualClock, add_seconds, format_ts
from ledger.proof import fast
from ledger.workflow import machine as wf
from ledger.workflow.gate import Gate
from ledger.analytics import views as log_views
from ledger.analytics.query import open_views
from ledger.store.log import Ledger
from support import START
from tests.ledger_factory import random_history
from tests.test_columnar import KEYED, _rows, _types

POLICY = """
policy "escalation"
default deny "No rule covers this tool."
group desk = ["d1", "d2"]
group managers = ["m1"]
group security = ["s1"]

ask pay approvers 1 from desk timeout 4h else escalate approvers 1 from managers timeout 1h else reject "Nobody decided in time." id "pay"
ask wire approvers 2 from desk timeout 1h else escalate approvers 1 from managers timeout 1h else escalate approvers 1 from security timeout 30m id "wire"
ask plain approvers 1 from desk timeout 1h id "plain"
"""

HOUR = 3600


@pytest.fixture
def clock():
    return ManualClock(START)


@pytest.fixture
def g(tmp_path, clock):
    the_gate = Gate(Policy.from_text(POLICY, "escalation.policy"), tmp_path / "ledger", clock=clock)
    yield the_gate
    the_gate.close()


def events_of(g, request):
    return [r.event for r in g.ledger.records() if getattr(r.event, "request", None) == request]


def refused(g, exc_type, fn, *args, **kwargs):
    head = g.ledger.head
    with pytest.raises(exc_type):
        fn(*args, **kwargs)
    assert g.ledger.head == head


# --- the Gate ---------------------------------------------------------------------------------


def test_stage_one_times_out_escalates_and_a_manager_approves(g, clock):
    p = g.propose("pay", {"amount": 900}, proposer="agent")
    assert (p.effect, p.status) == ("ask", "pending")
    assert p.deadline == add_seconds(g.get(p.request).proposed_at, 4 * HOUR)
    refused(g, wf.NotAnApprover, g.approve, p.request, approver="m1", digest=p.args_digest)  # not yet: stage 1 is the desk's
    clock.advance(4 * HOUR)
    assert g.expire() == []  # escalated, not expired
    state = g.get(p.request)
    assert (state.status, state.stage) == ("pending", 2)
    assert state.requirements.quorums == (Quorum(1, ("m1",), "managers"),)
    assert state.deadline == add_seconds(format_ts(clock()), HOUR)
    escalated = [e for e in events_of(g, p.request) if isinstance(e, ev.Escalated)]
    assert len(escalated) == 1 and escalated[0].stage == 2 and escalated[0].deadline == state.deadline
    g.approve(p.request, approver="m1", digest=p.args_digest)
    assert g.get(p.request).status == "approved"
    ran = []
    out = g.execute(p.request, lambda args: ran.append(args) or "paid")
    assert out.outcome == "ok" and ran == [{"amount": 900}]
    report = verify(g.ledger.path, engine="python")
    assert report.ok, report.problem


def test_the_last_stage_expires_as_a_rejection_with_its_message(g, clock):
    p = g.propose("pay", {"amount": 900}, proposer="agent")
    clock.advance(4 * HOUR)
    g.refresh()
    clock.advance(HOUR - 1)
    assert g.expire() == [] and g.get(p.request).status == "pending"
    clock.advance(1)
    assert g.expire() == [p.request]
    state = g.get(p.request)
    assert (state.status, state.decision, state.reason) == ("expired", "expire", "Nobody decided in time.")
    refused(g, wf.RequestFinal, g.execute, p.request, lambda a: pytest.fail("ran"))
    kinds = [e.__struct_config__.tag for e in events_of(g, p.request)]
    assert kinds == ["interrupted", "escalated", "expired"]


def test_a_desk_approver_cannot_decide_stage_two(g, clock):
    p = g.propose("pay", {"amount": 900}, proposer="agent")
    clock.advance(4 * HOUR)
    g.refresh()
    refused(g, wf.NotAnApprover, g.approve, p.request, approver="d1", digest=p.args_digest)
    refused(g, wf.NotAnApprover, g.reject, p.request, approver="d2", reason="no")
    assert g.get(p.request).status == "pending"


def test_approvals_of_an_earlier_stage_count_no_more(g, clock):
    # wire needs 2 from the desk; one desk approval, then stage 2: the manager decides afresh,
    # and stage 3 (security) after that: neither the desk's nor the manager's counts
    p = g.propose("wire", {"to": "x"}, proposer="agent")
    g.approve(p.request, approver="d1", digest=p.args_digest)
    clock.advance(HOUR)
    g.refresh()
    state = g.get(p.request)
    assert (state.status, state.stage, dict(state.approvals)) == ("pending", 2, {})
    clock.advance(HOUR)
    g.refresh()
    state = g.get(p.request)
    assert (state.status, state.stage) == ("pending", 3)
    refused(g, wf.NotAnApprover, g.approve, p.request, approver="m1", digest=p.args_digest)
    clock.advance(1800)
    assert g.expire() == [p.request]
    assert g.get(p.request).reason == "No one decided in time; the call was not run. Do not retry it without asking the user."
    assert verify(g.ledger.path, engine="python").ok


def test_an_ask_without_escalation_expires_as_before(g, clock):
    p = g.propose("plain", {}, proposer="agent")
    clock.advance(HOUR)
    assert g.expire() == [p.request]
    interrupted = next(e for e in events_of(g, p.request) if isinstance(e, ev.Interrupted))
    assert interrupted.requirements.escalation is msgspec.UNSET
    assert b"escalation" not in ev.encode_event(interrupted)


def test_escalation_survives_a_restart(tmp_path, clock):
    policy = Policy.from_text(POLICY, "escalation.policy")
    g1 = Gate(policy, tmp_path / "l", clock=clock)
    p = g1.propose("pay", {"amount": 1}, proposer="agent")
    g1.close()
    clock.advance(4 * HOUR)
    g2 = Gate(None, tmp_path / "l", clock=clock)  # a reviewer's Gate escalates as well
    g2.refresh()
    assert g2.get(p.request).stage == 2
    g2.close()
    g3 = Gate(policy, tmp_path / "l", clock=clock)
    g3.approve(p.request, approver="m1", digest=p.args_digest)
    assert g3.get(p.request).status == "approved"
    g3.close()


def test_an_edit_at_stage_two_combines_with_stage_two_of_the_policy(g, clock):
    p = g.propose("pay", {"amount": 900}, proposer="agent")
    clock.advance(4 * HOUR)
    g.refresh()
    g.edit(p.request, editor="m1", args={"amount": 800})
    state = g.get(p.request)
    assert state.status == "approved"  # the manager's edit is their approval of stage 2
    assert state.requirements.quorums == (Quorum(1, ("m1",), "managers"),)


# --- verify and the projection ----------------------------------------------------------------


def test_the_compiled_verifier_declines_and_the_reference_judges(g, clock):
    p = g.propose("pay", {"amount": 1}, proposer="agent")
    clock.advance(4 * HOUR)
    g.refresh()
    g.approve(p.request, approver="m1", digest=p.args_digest)
    assert fast.verify_fast(g.ledger.path) is None
    report = verify(g.ledger.path)
    assert report.ok and report.count == len(list(g.ledger.records()))


# --- the workflow rules -----------------------------------------------------------------------


def _fold_to_pending(requirements: Requirements, ts: str = "2026-03-01T12:00:00.000000Z"):
    w = wf.Workflow()
    w.step(1, ev.Genesis(ts=ts, format=ev.FORMAT, ledger_id="a" * 32))
    w.step(2, ev.Proposed(ts=ts, run=None, proposer="agent", call_id=None, tool="pay", args_digest="0" * 64,
                          context_digest="0" * 64, policy="p", policy_digest="1" * 64, effect="ask", rules=(),
                          reasons=()))
    deadline = add_seconds(ts, requirements.timeout_seconds)
    w.step(3, ev.Interrupted(ts=ts, request=2, requirements=requirements, deadline=deadline))
    return w, deadline


ESCALATING = Requirements.single(1, ["d1"], "desk", timeout_seconds=60,
                                 escalation=(Stage((Quorum(1, ("m1",), "managers"),), 30, "late"),))


def test_an_escalating_request_does_not_expire():
    w, deadline = _fold_to_pending(ESCALATING)
    with pytest.raises(wf.MustEscalate):
        w.check(ev.Expired(ts=deadline, request=2, outcome="reject", message=None))


def test_escalation_only_at_the_deadline_and_exactly_the_next_stage():
    w, deadline = _fold_to_pending(ESCALATING)
    nxt = ESCALATING.escalated()
    good = ev.Escalated(ts=deadline, request=2, stage=2, requirements=nxt, deadline=add_seconds(deadline, 30))
    early = msgspec.structs.replace(good, ts="2026-03-01T12:00:59.000000Z", deadline=add_seconds("2026-03-01T12:00:59.000000Z", 30))
    with pytest.raises(wf.NotExpired):
        w.check(early)
    with pytest.raises(wf.EscalationMismatch):
        w.check(msgspec.structs.replace(good, stage=3))
    with pytest.raises(wf.EscalationMismatch):
        w.check(msgspec.structs.replace(good, deadline=add_seconds(deadline, 3600)))
    with pytest.raises(wf.EscalationMismatch):  # anyone may approve: weaker than the next stage
        w.check(msgspec.structs.replace(good, requirements=Requirements(timeout_seconds=30)))
    w.step(4, good)
    with pytest.raises(wf.NoEscalation):  # stage 2 is the last
        w.check(ev.Escalated(ts=good.deadline, request=2, stage=3, requirements=nxt, deadline=add_seconds(good.deadline, 30)))
    w.step(5, ev.Expired(ts=good.deadline, request=2, outcome="reject", message="late"))
    assert w.get(2).status == "expired"


def test_a_request_without_escalation_cannot_escalate():
    plain = Requirements.single(1, ["d1"], "desk", timeout_seconds=60)
    w, deadline = _fold_to_pending(plain)
    with pytest.raises(wf.NoEscalation):
        w.check(ev.Escalated(ts=deadline, request=2, stage=2, requirements=plain, deadline=add_seconds(deadline, 60)))


def test_escalated_is_a_version_2_event():
    w, deadline = _fold_to_pending(Requirements(timeout_seconds=60))
    w.format = ev.FORMAT_V1
    with pytest.raises(wf.FormatVersion):
        w.check(ev.Escalated(ts=deadline, request=2, stage=2, requirements=Requirements(), deadline=deadline))


# --- requirements -----------------------------------------------------------------------------


def test_requirements_without_escalation_encode_as_before():
    r = Requirements.single(2, ["a", "b"], "g", timeout_seconds=60, timeout_message="m")
    assert msgspec.json.encode(r) == (
        b'{"quorums":[{"count":2,"approvers":["a","b"],"group":"g"}],"decisions":["approve","edit","reject"],'
        b'"timeout_seconds":60,"on_timeout":"reject","timeout_message":"m"}')
    assert msgspec.json.encode(strictest([r, Requirements(timeout_seconds=30)])).count(b"escalation") == 0


quorums = st.sampled_from([Quorum(1), Quorum(1, ("a",)), Quorum(2, ("a", "b")), Quorum(1, ("b", "c"))])
stages = st.builds(Stage, st.tuples(quorums), st.integers(1, 5), st.none())
requirements = st.builds(
    lambda q, t, later: Requirements(quorums=(q,), timeout_seconds=t, escalation=tuple(later) if later else msgspec.UNSET),
    quorums, st.integers(1, 5), st.lists(stages, max_size=2))


def _in_force(r: Requirements, at: int):
    """The quorums `r` asks for `at` seconds after the interrupt, or None once it expired."""
    stage = r
    while at >= stage.timeout_seconds:
        at -= stage.timeout_seconds
        stage = stage.escalated()
        if stage is None:
            return None
    return stage.quorums


@settings(max_examples=300, deadline=None)
@given(st.lists(requirements, min_size=1, max_size=4))
def test_combined_requirements_are_at_every_moment_the_stages_in_force(reqs):
    combined = strictest(reqs)
    total = sum(s.timeout_seconds for s in (combined, *combined.stages))
    assert total == min(sum(s.timeout_seconds for s in (r, *r.stages)) for r in reqs)  # ends with the first to end
    for at in range(total + 1):
        got = _in_force(combined, at)
        parts = [_in_force(r, at) for r in reqs]
        if at == total:
            assert got is None and any(p is None for p in parts)  # silence never approves
            continue
        assert got is not None and all(p is not None for p in parts)
        for part in parts:  # every quorum in force somewhere is one the combination asks for (or implies)
            for q in part:
                assert any(q.implied_by(c) for c in got)


# --- the views: the projection equals the log views --------------------------------------------


def build_escalation_ledger(path, clock) -> dict[str, int]:
    """Requests through every escalation path: approved at stage 2, expired at stage 2, a desk
    approval dropped by the escalation, three stages to expiry, an edit at stage 2, one still
    pending at stage 2, and one ask without escalation."""
    g = Gate(Policy.from_text(POLICY, "escalation.policy"), path, clock=clock)
    ids = {}
    try:
        ids["approved-2"] = g.propose("pay", {"n": 1}, proposer="agent", run="r").request
        ids["expired-2"] = g.propose("pay", {"n": 2}, proposer="agent", run="r").request
        p = g.propose("wire", {"n": 3}, proposer="agent", run="r")
        ids["three-stages"] = p.request
        g.approve(p.request, approver="d1", digest=p.args_digest)
        ids["edited-2"] = g.propose("pay", {"n": 4}, proposer="agent", run="r").request
        ids["plain"] = g.propose("plain", {"n": 5}, proposer="agent", run="r").request
        clock.advance(HOUR)
        g.refresh()  # plain expires, wire escalates
        clock.advance(3 * HOUR)
        g.refresh()  # the pays escalate, wire to stage 3
        state = g.get(ids["approved-2"])
        g.approve(state.request, approver="m1", digest=state.digest)
        state = g.get(ids["edited-2"])
        g.edit(state.request, editor="m1", args={"n": 40})
        g.execute(state.request, lambda a: "ok")
        clock.advance(HOUR)
        g.refresh()  # expired-2 and wire expire
        ids["pending-2"] = g.propose("pay", {"n": 6}, proposer="agent", run="r").request
        clock.advance(4 * HOUR)
        g.refresh()
    finally:
        g.close()
    return ids


def test_the_projection_gives_the_rows_the_log_views_give(tmp_path, clock):
    path = tmp_path / "ledger"
    ids = build_escalation_ledger(path, clock)
    assert verify(path, engine="python").ok
    log = log_views.connect(path)
    try:
        with open_views(path) as views:
            assert views.coverage.complete
            for view in KEYED:
                assert _types(views.con, view) == _types(log, view), view
                mine, theirs = _rows(views.con, view), _rows(log, view)
                assert mine == theirs, view
            for con in (views.con, log):
                assert con.execute("SELECT count(*) FROM violations").fetchone()[0] == 0
                rows = dict(con.execute("SELECT request, status FROM requests").fetchall())
                assert [rows[ids[k]] for k in ("approved-2", "expired-2", "three-stages", "edited-2", "plain", "pending-2")] == [
                    "approved", "expired", "expired", "executed", "expired", "pending"]
                stages = con.execute("SELECT request, stage FROM events WHERE kind = 'escalated' ORDER BY position").fetchall()
                assert (ids["three-stages"], 3) in stages and (ids["pending-2"], 2) in stages
                approved_by = dict(con.execute("SELECT request, approved_by FROM requests").fetchall())
                assert approved_by[ids["approved-2"]] == ["m1"] and approved_by[ids["three-stages"]] == []
    finally:
        log.close()


@pytest.mark.parametrize("tamper", ["expire-instead", "wrong-stage", "early"])
def test_an_unlawful_escalation_is_the_same_violation_in_both(tmp_path, clock, tamper):
    """verify and the log views name the same rule for a hand-written unlawful line."""
    path = tmp_path / "ledger"
    g = Gate(Policy.from_text(POLICY, "escalation.policy"), path, clock=clock)
    p = g.propose("pay", {"n": 1}, proposer="agent")
    state = g.get(p.request)
    g.close()
    clock.advance(4 * HOUR if tamper != "early" else HOUR)
    ledger = Ledger(path, clock=clock)
    now = format_ts(clock())
    following = state.requirements.escalated()
    if tamper == "expire-instead":
        bad = ev.Expired(request=p.request, outcome="reject", message=None)
        code = "escalates"
    else:
        bad = ev.Escalated(request=p.request, stage=3 if tamper == "wrong-stage" else 2, requirements=following,
                           deadline=add_seconds(now, HOUR))
        code = "escalation-mismatch" if tamper == "wrong-stage" else "not-expired"
    ledger.append(bad)
    ledger.close()
    report = verify(path, engine="python")
    assert report.problem is not None and (report.problem.kind, report.problem.code) == ("workflow", code)
    log = log_views.connect(path)
    try:
        assert log.execute("SELECT code FROM violations").fetchall() == [(code,)]
    finally:
        log.close()


def test_an_escalation_notifies_the_next_stage_as_an_interrupt(g, clock):
    from service.notify_bodies import notice_of

    p = g.propose("pay", {"n": 1}, proposer="agent")
    clock.advance(4 * HOUR)
    g.refresh()
    record = next(r for r in g.ledger.records() if isinstance(r.event, ev.Escalated))
    notice = notice_of(record, g.get(p.request))
    assert (notice.event, notice.status, notice.groups) == ("interrupt", "pending", frozenset({"managers"}))
    assert notice.deadline == record.event.deadline


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), unlawful=st.booleans())
def test_random_histories_with_escalations_read_the_same_everywhere(tmp_path_factory, seed, unlawful):
    """A random history with escalating asks and `escalated` events (lawful, or with an unlawful
    last event): the compiled verifier declines or agrees, and the projection and the log views
    give the same rows; on an unlawful end, the log views' first violation is verify's."""
    path = tmp_path_factory.mktemp("random") / "ledger"
    random_history(path, random.Random(seed), steps=120, unlawful_end=unlawful, escalation=True)
    report = verify(path, engine="python")
    assert report.ok != unlawful
    compiled = fast.verify_fast(path)
    assert compiled is None or (compiled.ok and compiled.count == report.count)
    log = log_views.connect(path)
    try:
        if report.ok:
            with open_views(path) as views:
                for view in KEYED:
                    assert _rows(views.con, view) == _rows(log, view), view
        elif report.problem.kind == "workflow":
            first = log.execute("SELECT seq, code FROM violations ORDER BY position LIMIT 1").fetchone()
            assert first == (report.problem.seq, report.problem.code)
    finally:
        log.close()


# --- fmt and explain ----------------------------------------------------------------------------


def test_fmt_round_trips_escalation_and_is_idempotent():
    from dsl.fmt import format_policy

    text = ('group desk = ["d1"]\ngroup managers = ["m1"]\nask pay approvers 1 from desk timeout 4h else escalate '
            'approvers 1 from managers timeout 1h else escalate approvers 1 from ["s1", "s2"] timeout 30m else reject "late" id "pay"\n')
    once = format_policy(text)
    assert "timeout 4h else escalate approvers 1 from managers timeout 1h else escalate approvers 1 from [\"s1\", \"s2\"] timeout 30m else reject \"late\"" in once
    assert format_policy(once) == once
    assert Policy.from_text(once, "a.policy").evaluate("pay", {}).requirements == Policy.from_text(text, "b.policy").evaluate("pay", {}).requirements


def test_explain_names_the_stages():
    decision = Policy.from_text(POLICY, "escalation.policy").evaluate("pay", {})
    line = next(x for x in decision.explain() if "needs approval" in x)
    assert "escalates after 14400s to 1 from managers (m1) for 3600s, then expires as reject" in line
    plain = Policy.from_text(POLICY, "escalation.policy").evaluate("plain", {})
    assert any("expires after 3600s as reject" in x for x in plain.explain())
