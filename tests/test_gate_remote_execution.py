"""Gate.start / Gate.finish: an execution the caller runs elsewhere (an agent of the approval
service runs its own tool and reports the outcome). The same rules as Gate.execute: the start is
durable before the tool runs, it uses the approved (possibly edited) arguments, it runs at most
once, and an outcome is reported once."""

from __future__ import annotations

import pytest

from ledger import verify
from ledger.clock import ManualClock
from ledger.digest import value_digest
from ledger.workflow import machine as wf
from ledger.workflow.gate import Execution, ExecutionUnknown, InvalidCall
from support import START, gate


@pytest.fixture
def g(tmp_path):
    the_gate = gate(tmp_path / "ledger", ManualClock(START))
    yield the_gate
    the_gate.close()


def test_start_returns_the_approved_arguments_and_finish_records_the_outcome(g):
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    g.edit(p.request, editor="sup-1", args={"id": 4}, digest=p.args_digest)
    state = g.get(p.request)
    if state.status != "approved":
        g.approve(p.request, approver="sup-2", digest=state.digest)
    digest, args = g.start(p.request, executor="agent")
    assert args == {"id": 4} and digest == g.get(p.request).digest
    assert g.get(p.request).status == "executing"
    done = g.finish(p.request, outcome="ok", result={"done": True})
    assert (done.outcome, done.result_digest) == ("ok", value_digest({"done": True}))
    state = g.get(p.request)
    assert (state.status, state.outcome, state.result_digest) == ("executed", "ok", value_digest({"done": True}))
    assert verify(g.ledger.path).ok


def test_a_started_request_never_starts_again_and_an_executed_one_replays(g):
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    g.start(p.request)
    with pytest.raises(ExecutionUnknown):
        g.start(p.request)
    g.finish(p.request, outcome="error", error="Timeout: the shop did not answer")
    again = g.start(p.request)
    assert isinstance(again, Execution) and again.replayed and again.error == "Timeout: the shop did not answer"


def test_an_outcome_is_reported_once_and_only_after_a_start(g):
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    head = g.ledger.head
    with pytest.raises(wf.NotStarted):
        g.finish(p.request, outcome="ok")
    assert g.ledger.head == head
    g.start(p.request)
    g.finish(p.request, outcome="ok")
    with pytest.raises(wf.AlreadyExecuted):
        g.finish(p.request, outcome="error", error="late")


def test_a_request_that_may_not_run_does_not_start(g):
    denied = g.propose("drop_thing", {"id": 2}, proposer="agent")
    asked = g.propose("small_change", {"id": 3}, proposer="agent")
    with pytest.raises(wf.RequestFinal):
        g.start(denied.request)
    with pytest.raises(wf.NotApproved):
        g.start(asked.request)


@pytest.mark.parametrize("outcome, kwargs", [("maybe", {}), ("ok", {"error": "x"}), ("error", {}), ("error", {"error": " "}),
                                             ("ok", {"result_digest": "ab"})])
def test_a_malformed_outcome_is_refused(g, outcome, kwargs):
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    g.start(p.request)
    with pytest.raises(InvalidCall):
        g.finish(p.request, outcome=outcome, **kwargs)
    assert g.get(p.request).status == "executing"


@pytest.mark.parametrize("result", [{1, 2}, {"text": "cut here: \ud83d"}, float("nan"), "ok\udc00"])
@pytest.mark.parametrize("keep", [False, True])
def test_a_result_that_is_not_json_is_recorded_as_an_ok_without_a_digest_as_execute_records_it(g, tmp_path, result, keep):
    """The call ran: finish records what execute records for the same result (an outcome
    without a digest), never leaves the request "executing" for ever."""
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    g.start(p.request)
    done = g.finish(p.request, outcome="ok", result=result, keep_result=keep)
    assert (done.outcome, done.result_digest, done.result_kept) == ("ok", None, False)
    state = g.get(p.request)
    assert (state.status, state.outcome, state.result_digest) == ("executed", "ok", None)
    q = g.propose("read_thing", {"id": 2}, proposer="agent")
    ran = g.execute(q.request, lambda args: result, keep_result=keep)
    assert (ran.outcome, ran.result_digest, ran.result_kept) == (done.outcome, done.result_digest, done.result_kept)
    assert verify(g.ledger.path).ok


def test_an_error_with_a_lone_surrogate_is_recorded_escaped(g):
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    g.start(p.request)
    done = g.finish(p.request, outcome="error", error="cut here: \ud83d")
    assert done.error == "cut here: \\ud83d" and g.get(p.request).status == "executed"
    assert verify(g.ledger.path).ok
