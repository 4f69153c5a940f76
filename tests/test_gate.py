"""The Gate: every workflow step, what it refuses, and that a refusal appends nothing."""

from __future__ import annotations

import math

import shutil

import pytest

from ledger import verify
from ledger.clock import ManualClock
from ledger.workflow.gate import CallIdConflict, ExecutionInProgress, ExecutionUnknown, Gate, InvalidCall
from ledger.store.log import LedgerCorrupt
from ledger.workflow import machine as wf
from support import START, gate, policy


@pytest.fixture
def clock():
    return ManualClock(START)


@pytest.fixture
def g(tmp_path, clock):
    the_gate = gate(tmp_path / "ledger", clock)
    yield the_gate
    the_gate.close()


def refused(g, exc_type, fn, *args, **kwargs):
    """Assert the step raises exc_type and the ledger did not grow."""
    head = g.ledger.head
    with pytest.raises(exc_type):
        fn(*args, **kwargs)
    assert g.ledger.head == head


def test_allowed_call_runs_once_and_a_second_execute_replays_the_outcome(g):
    runs = []
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    assert (p.effect, p.status) == ("allow", "allowed")
    first = g.execute(p.request, lambda args: runs.append(args) or {"n": len(runs)})
    second = g.execute(p.request, lambda args: runs.append(args))
    assert runs == [{"id": 1}]
    assert first.outcome == second.outcome == "ok"
    assert second.replayed and not first.replayed
    assert first.result_digest == second.result_digest


def test_denied_call_never_runs_and_returns_the_reason(g):
    p = g.propose("drop_thing", {"id": 2}, proposer="agent")
    assert p.effect == "deny"
    assert p.reasons == ("Never drop things; archive them instead.",)
    refused(g, wf.RequestFinal, g.execute, p.request, lambda args: pytest.fail("ran"))


def test_ask_waits_for_approval_before_running(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    assert (p.effect, p.status) == ("ask", "pending")
    refused(g, wf.NotApproved, g.execute, p.request, lambda args: pytest.fail("ran"))
    g.approve(p.request, approver="alice", digest=p.args_digest)
    assert g.execute(p.request, lambda args: "done").outcome == "ok"


def test_approval_binds_to_the_digest_the_approver_saw(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    refused(g, wf.StaleDigest, g.approve, p.request, approver="alice", digest="0" * 64)


def test_the_proposer_never_decides_its_own_call(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    refused(g, wf.SelfApproval, g.approve, p.request, approver="agent", digest=p.args_digest)
    refused(g, wf.SelfApproval, g.reject, p.request, approver="agent", reason="no")


def test_only_the_group_may_approve(g):
    p = g.propose("big_change", {"amount": 5}, proposer="agent")
    refused(g, wf.NotAnApprover, g.approve, p.request, approver="alice", digest=p.args_digest)


def test_quorum_counts_distinct_approvers(g):
    p = g.propose("big_change", {"amount": 5}, proposer="agent")
    assert g.approve(p.request, approver="sup-1", digest=p.args_digest).status == "pending"
    refused(g, wf.DuplicateApproval, g.approve, p.request, approver="sup-1", digest=p.args_digest)
    assert g.approve(p.request, approver="sup-2", digest=p.args_digest).status == "approved"


def test_execution_uses_the_approved_arguments_not_the_callers_objects(g):
    args = {"amount": 5, "items": [1]}
    p = g.propose("big_change", args, proposer="agent")
    args["amount"] = 999  # the caller changes its dict after proposing
    args["items"].append(2)
    for who in ("sup-1", "sup-2"):
        g.approve(p.request, approver=who, digest=p.args_digest)
    seen = []
    g.execute(p.request, lambda a: seen.append(a))
    assert seen == [{"amount": 5, "items": [1]}]


def test_an_edit_reenters_the_policy_and_a_denied_edit_is_refused(g):
    p = g.propose("big_change", {"amount": 5}, proposer="agent")
    refused(g, wf.EditDenied, g.edit, p.request, editor="sup-1", args={"amount": 5000})
    assert g.get(p.request).digest == p.args_digest


def test_an_edit_counts_as_the_editors_approval_and_earlier_approvals_stop_counting(g):
    p = g.propose("big_change", {"amount": 5}, proposer="agent")
    g.approve(p.request, approver="sup-1", digest=p.args_digest)
    state = g.edit(p.request, editor="sup-2", args={"amount": 4})
    assert state.status == "pending" and set(state.approvals) == {"sup-2"}
    refused(g, wf.StaleDigest, g.approve, p.request, approver="sup-1", digest=p.args_digest)
    assert g.approve(p.request, approver="sup-1", digest=state.digest).status == "approved"
    seen = []
    g.execute(p.request, lambda a: seen.append(a))
    assert seen == [{"amount": 4}]


def test_edit_needs_edit_among_the_allowed_decisions(g, tmp_path):
    from dsl import Policy
    from ledger.workflow.gate import Gate

    policy = Policy.from_text('ask t decisions approve, reject', "t.policy")
    other = Gate(policy, tmp_path / "other", clock=ManualClock(START))
    p = other.propose("t", {"a": 1}, proposer="agent")
    refused(other, wf.DecisionNotAllowed, other.edit, p.request, editor="bob", args={"a": 2})
    other.close()


def test_rejection_needs_a_reason_and_is_final(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    refused(g, InvalidCall, g.reject, p.request, approver="bob", reason="  ")
    g.reject(p.request, approver="bob", reason="Ask the customer first.")
    state = g.get(p.request)
    assert (state.status, state.reason) == ("rejected", "Ask the customer first.")
    refused(g, wf.RequestFinal, g.approve, p.request, approver="alice", digest=p.args_digest)


def test_a_response_answers_the_agent_and_nothing_runs(g):
    p = g.propose("big_change", {"amount": 5}, proposer="agent")
    g.respond(p.request, approver="sup-1", message="Done by hand.")
    assert g.get(p.request).status == "responded"
    refused(g, wf.RequestFinal, g.execute, p.request, lambda a: pytest.fail("ran"))


def test_respond_needs_respond_among_the_allowed_decisions(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    refused(g, wf.DecisionNotAllowed, g.respond, p.request, approver="bob", message="x")


def test_silence_never_approves(g, clock):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    clock.advance(3599)
    assert g.expire() == []
    clock.advance(1)
    assert g.expire() == [p.request]
    state = g.get(p.request)
    assert (state.status, state.decision) == ("expired", "expire")
    refused(g, wf.RequestFinal, g.execute, p.request, lambda a: pytest.fail("ran"))


def test_a_late_decision_finds_the_request_expired(g, clock):
    # whoever touches the ledger after the deadline expires the request first: silence rejects
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    clock.advance(3600)
    with pytest.raises(wf.RequestFinal, match=r"already expired \(expired at "):
        g.approve(p.request, approver="bob", digest=p.args_digest)
    assert g.expire() == [] and g.get(p.request).status == "expired"


def test_pending_requests_survive_a_restart(tmp_path, clock):
    g1 = gate(tmp_path / "l", clock)
    p = g1.propose("big_change", {"amount": 5}, proposer="agent")
    g1.approve(p.request, approver="sup-1", digest=p.args_digest)
    g1.close()
    g2 = gate(tmp_path / "l", clock)
    [pending] = g2.pending()
    assert pending.request == p.request and set(pending.approvals) == {"sup-1"}
    assert g2.arguments(p.request) == {"amount": 5}
    g2.approve(p.request, approver="sup-2", digest=p.args_digest)
    assert g2.execute(p.request, lambda a: a).outcome == "ok"
    g2.close()


def test_an_execution_outcome_survives_a_restart_and_is_not_rerun(tmp_path, clock):
    g1 = gate(tmp_path / "l", clock)
    p = g1.propose("read_thing", {}, proposer="agent")
    g1.execute(p.request, lambda a: 42)
    g1.close()
    g2 = gate(tmp_path / "l", clock)
    again = g2.execute(p.request, lambda a: pytest.fail("ran twice"))
    assert again.replayed and again.outcome == "ok"
    g2.close()


def test_a_crash_while_running_leaves_the_outcome_unknown_and_never_reruns(tmp_path, clock):
    g1 = gate(tmp_path / "l", clock)
    p = g1.propose("read_thing", {}, proposer="agent")

    def crash(args):
        raise KeyboardInterrupt  # stands for the process dying mid-call

    with pytest.raises(KeyboardInterrupt):
        g1.execute(p.request, crash)
    refused(g1, ExecutionUnknown, g1.execute, p.request, lambda a: pytest.fail("reran"))
    g1.close()
    g2 = gate(tmp_path / "l", clock)
    refused(g2, ExecutionUnknown, g2.execute, p.request, lambda a: pytest.fail("reran"))
    g2.close()


def test_a_failing_tool_is_recorded_as_an_error_outcome(g):
    p = g.propose("read_thing", {}, proposer="agent")
    result = g.execute(p.request, lambda a: {}["missing"])
    assert result.outcome == "error" and result.error.startswith("KeyError")
    assert isinstance(result.exception, KeyError)
    assert g.get(p.request).status == "executed"


def test_a_repeated_call_id_is_idempotent(g):
    first = g.propose("small_change", {"id": 3}, proposer="agent", call_id="toolu_1")
    head = g.ledger.head
    again = g.propose("small_change", {"id": 3}, proposer="agent", call_id="toolu_1")
    assert again.duplicate and again.request == first.request
    assert g.ledger.head == head
    refused(g, CallIdConflict, g.propose, "small_change", {"id": 4}, proposer="agent", call_id="toolu_1")


@pytest.mark.parametrize(
    "tool, args, kwargs",
    [
        ("read_thing", [1, 2], {}),
        ("read_thing", "x", {}),
        ("", {}, {}),
        ("read_thing", {"x": math.nan}, {}),
        ("read_thing", {"x": math.inf}, {}),
        ("read_thing", {1: "non-string key"}, {}),
        ("read_thing", {"x": object()}, {}),
        ("read_thing", {}, {"context": [1]}),
        ("read_thing", {}, {"proposer": ""}),
    ],
)
def test_malformed_calls_are_refused_with_a_clear_error(g, tool, args, kwargs):
    kwargs = {"proposer": "agent", **kwargs}
    refused(g, InvalidCall, g.propose, tool, args, **kwargs)


def test_unknown_request_is_refused(g):
    refused(g, wf.UnknownRequest, g.approve, 999, approver="bob", digest="0" * 64)
    refused(g, wf.UnknownRequest, g.execute, 999, lambda a: None)


def test_cancel_withdraws_a_call_before_it_runs(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    g.cancel(p.request, by="agent", reason="user changed their mind")
    assert g.get(p.request).status == "cancelled"
    refused(g, wf.RequestFinal, g.approve, p.request, approver="bob", digest=p.args_digest)


def test_a_gate_refuses_to_extend_a_tampered_ledger(tmp_path, clock):
    g1 = gate(tmp_path / "l", clock)
    first = g1.propose("read_thing", {"id": 1}, proposer="agent").request  # after the policy event pinning its text
    g1.propose("read_thing", {"id": 2}, proposer="agent")
    g1.close()
    segment = next((tmp_path / "l").glob("events-*.jsonl"))
    data = segment.read_bytes()
    segment.write_bytes(data.replace(b'"proposer":"agent"', b'"proposer":"agenT"', 1))
    # A snapshot covers both events: opening trusts them (docs: what a snapshot skips)...
    gate(tmp_path / "l", clock).close()
    # ...a full verify on open does not, nor does a Gate without the snapshot.
    with pytest.raises(LedgerCorrupt) as info:
        Gate(policy(), tmp_path / "l", clock=clock, full_verify=True)
    assert info.value.seq == first
    shutil.rmtree(tmp_path / "l" / "cache")
    with pytest.raises(LedgerCorrupt) as info:
        gate(tmp_path / "l", clock)
    assert info.value.seq == first


def test_every_step_leaves_a_ledger_that_verifies(tmp_path):
    from support import build_mixed_ledger

    g, _ = build_mixed_ledger(tmp_path / "l")
    head = g.ledger.head
    g.close()
    report = verify(tmp_path / "l")
    assert report.ok, report.problem
    assert (report.count, report.head) == head
    assert report.statuses == {"executed": 3, "denied": 1, "rejected": 1, "responded": 1, "expired": 1, "cancelled": 1}


def test_a_call_two_ask_rules_match_needs_every_quorum(g):
    p = g.propose("wire", {"amount": 500}, proposer="agent")
    assert {(q.count, q.group) for q in p.requirements.quorums} == {(2, "sups"), (1, None)}
    g.approve(p.request, approver="sup-1", digest=p.args_digest)
    assert g.approve(p.request, approver="sup-2", digest=p.args_digest).status == "pending"  # no owner yet
    refused(g, wf.NotApproved, g.execute, p.request, lambda a: pytest.fail("ran"))
    refused(g, wf.NotAnApprover, g.approve, p.request, approver="carol", digest=p.args_digest)
    assert g.approve(p.request, approver="bob", digest=p.args_digest).status == "approved"


@pytest.mark.parametrize(
    "step",
    [
        lambda g, p: g.propose("read_thing", {}, proposer="agent", run=5),
        lambda g, p: g.propose("read_thing", {}, proposer="agent", call_id=7),
        lambda g, p: g.propose("read_thing", {}, proposer=["agent"]),
        lambda g, p: g.propose("read\ud800", {}, proposer="agent"),
        lambda g, p: g.approve(p.request, approver=5, digest=p.args_digest),
        lambda g, p: g.approve(p.request, approver="bob", digest=p.args_digest, comment=3),
        lambda g, p: g.approve(str(p.request), approver="bob", digest=p.args_digest),
        lambda g, p: g.edit(p.request, editor=None, args={"id": 4}),
        lambda g, p: g.reject(p.request, approver="bob\ud800", reason="no"),
        lambda g, p: g.respond(p.request, approver="bob", message=b"bytes"),
        lambda g, p: g.cancel(p.request, by=1.5),
    ],
)
def test_a_badly_typed_parameter_is_refused_and_the_ledger_stays_usable(g, tmp_path, clock, step):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    refused(g, InvalidCall, step, g, p)
    g.close()
    assert verify(tmp_path / "ledger").ok
    gate(tmp_path / "ledger", clock).close()


def test_a_clock_stepped_back_never_reopens_an_expired_request(g, clock):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    clock.advance(3601)
    assert g.expire() == [p.request]
    refused(g, wf.RequestFinal, g.approve, p.request, approver="bob", digest=p.args_digest)
    clock.advance(-7200)  # NTP, or a restored snapshot
    refused(g, wf.RequestFinal, g.approve, p.request, approver="bob", digest=p.args_digest)
    assert g.get(p.request).status == "expired"
    stamps = [r.event.ts for r in g.ledger.records()]
    assert stamps == sorted(stamps)


def test_a_slow_tool_does_not_hold_up_other_steps(g):
    import threading

    started, release = threading.Event(), threading.Event()
    p = g.propose("read_thing", {}, proposer="agent")

    def slow(args):
        started.set()
        release.wait(10)
        return "done"

    worker = threading.Thread(target=g.execute, args=(p.request, slow))
    worker.start()
    assert started.wait(10)
    other = g.propose("read_thing", {"id": 2}, proposer="agent")  # would deadlock if execute held the lock
    assert other.status == "allowed"
    with pytest.raises(ExecutionInProgress):
        g.execute(p.request, lambda a: pytest.fail("ran twice"))
    release.set()
    worker.join(10)
    assert g.get(p.request).status == "executed"


def test_a_tool_error_message_that_is_not_unicode_is_recorded_escaped(g):
    p = g.propose("read_thing", {}, proposer="agent")

    def broken(args):
        raise ValueError("bad \ud800 byte")

    result = g.execute(p.request, broken)
    assert result.outcome == "error" and "\\ud800" in result.error
    assert g.get(p.request).status == "executed"


@pytest.mark.parametrize(
    "change",
    [{"proposer": "other-agent"}, {"context": {"cwd": "/elsewhere"}}, {"tool": "big_change"}],
)
def test_a_repeated_call_id_with_another_proposer_or_context_is_a_conflict(g, change):
    call = {"tool": "small_change", "proposer": "agent", "context": {"cwd": "/srv"}}
    g.propose(call["tool"], {"id": 3}, proposer=call["proposer"], context=call["context"], call_id="toolu_9")
    changed = {**call, **change}
    refused(g, CallIdConflict, g.propose, changed["tool"], {"id": 3}, proposer=changed["proposer"],
            context=changed["context"], call_id="toolu_9")


def _nested(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def test_arguments_nested_past_the_limit_or_unwritable_numbers_are_refused_before_anything_is_written(g):
    """A writer keeps every value to MAX_NESTING levels, so that every reader of the ledger can
    read it; deeper arguments (or context, or an edit) and an integer Python cannot write are an
    InvalidCall, and the ledger does not grow."""
    from ledger.digest import MAX_NESTING

    # {"x": [...]}: the object is level 1, so MAX_NESTING - 1 lists fit and one more does not
    fits = g.propose("read_thing", {"x": _nested(MAX_NESTING - 1)}, proposer="agent")
    assert g.execute(fits.request, lambda args: "ok").outcome == "ok"
    refused(g, InvalidCall, g.propose, "read_thing", {"x": _nested(MAX_NESTING)}, proposer="agent")
    refused(g, InvalidCall, g.propose, "read_thing", {"x": _nested(990)}, proposer="agent")
    refused(g, InvalidCall, g.propose, "read_thing", {"id": 1}, proposer="agent", context={"c": _nested(MAX_NESTING)})
    refused(g, InvalidCall, g.propose, "read_thing", {"amount": 10**5000}, proposer="agent")
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    refused(g, InvalidCall, g.edit, p.request, editor="alice", args={"id": _nested(MAX_NESTING)})
    assert verify(g.ledger.path).ok


def test_a_failure_before_the_tool_runs_leaves_no_execution_started(g, monkeypatch):
    """The tool's copy of the approved arguments is made before `execution_started` is written:
    if making it fails, the request can still run later instead of being stuck as executing."""
    import copy as copy_module

    p = g.propose("read_thing", {"id": 1}, proposer="agent")

    def broken(value, memo=None):
        raise MemoryError("no room for the copy")

    monkeypatch.setattr(copy_module, "deepcopy", broken)
    refused(g, MemoryError, g.execute, p.request, lambda args: pytest.fail("ran"))
    monkeypatch.undo()
    assert g.execute(p.request, lambda args: "done").outcome == "ok"


def test_run_decides_and_runs_an_allowed_call_in_two_syncs(tmp_path, clock):
    with gate(tmp_path / "l", clock) as g:
        before = g.ledger.commits
        calls = []
        done = g.run("read_thing", {"id": 7}, lambda args: calls.append(args) or "read", proposer="agent", call_id="c1")
        assert g.ledger.commits - before == 2  # proposal with its start, then the outcome
        assert calls == [{"id": 7}] and done.execution.outcome == "ok" and done.execution.result == "read"
        assert g.get(done.proposal.request).status == "executed"
        again = g.run("read_thing", {"id": 7}, lambda args: calls.append(args), proposer="agent", call_id="c1")
        assert again.proposal.duplicate and again.execution.replayed and calls == [{"id": 7}]
        asked = g.run("small_change", {"id": 1}, lambda args: pytest.fail("ran an ask"), proposer="agent")
        assert asked.execution is None and asked.proposal.status == "pending"
        denied = g.run("drop_thing", {}, lambda args: pytest.fail("ran a deny"), proposer="agent")
        assert denied.execution is None and denied.proposal.effect == "deny"
        failed = g.run("read_thing", {"id": 8}, lambda args: 1 / 0, proposer="agent")
        assert failed.execution.outcome == "error" and "ZeroDivisionError" in failed.execution.error
    assert verify(tmp_path / "l").ok


def test_expiring_many_requests_is_one_write(tmp_path, clock):
    with gate(tmp_path / "l", clock) as g:
        for i in range(50):
            g.propose("small_change", {"i": i}, proposer="agent")
        clock.advance(2 * 3600)
        before = g.ledger.commits
        assert len(g.expire()) == 50
        assert g.ledger.commits - before == 1
