"""adapters.backend: the same steps on a local Gate and on `countersign serve` (a real process
on 127.0.0.1), with the same answers: allow, deny with its reason, ask → approve / edit /
reject / respond, a kept result replayed, errors as BackendError codes."""

from __future__ import annotations

import asyncio

import pytest

from adapters.backend import AsyncBackend, BackendError, LocalBackend, Outcome, ServiceBackend, connect
from dsl import Policy
from ledger import Gate, verify
from service_process import Server
from service_support import setup
from support import POLICY_TEXT


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = setup(tmp_path_factory.mktemp("svc"))
    with Server(s) as server:
        yield s, server


@pytest.fixture(params=["local", "service"])
def pair(request, tmp_path, served):
    """(agent backend, reviewer backend deciding as sup-1 and sup-2)."""
    if request.param == "local":
        gate = Gate(Policy.from_text(POLICY_TEXT, "test.policy"), tmp_path / "l")
        yield LocalBackend(gate, "agent-1"), {"sup-1": LocalBackend(gate, "sup-1"), "sup-2": LocalBackend(gate, "sup-2")}
        gate.close()
        assert verify(tmp_path / "l").ok
    else:
        s, server = served
        agent = ServiceBackend(server.url, s.tokens["agent-1"])
        reviewers = {n: ServiceBackend(server.url, s.tokens["agent-1"], reviewer_token=s.tokens[n])
                     for n in ("sup-1", "sup-2")}
        yield agent, reviewers
        agent.close()


def _decide(reviewers, who, request, decision, **kw):
    return reviewers[who].decide(request, decision, reviewer=who, **kw)


def test_allow_runs_and_deny_carries_its_reason(pair):
    agent, _ = pair
    v = agent.propose("read_thing", {"id": 1}, run="r")
    assert v.effect == "allow" and v.status == "allowed"
    done = agent.execute(v.request, lambda a: {"thing": a["id"]})
    assert done.outcome == "ok" and done.result == {"thing": 1}
    d = agent.propose("drop_thing", {"id": 1})
    assert d.effect == "deny" and "archive them instead" in d.reason
    with pytest.raises(BackendError) as caught:
        agent.start(d.request)
    assert caught.value.code  # the service's code or the Gate's error name


def test_ask_waits_for_a_quorum_then_runs_with_the_edited_arguments(pair):
    agent, reviewers = pair
    v = agent.propose("big_change", {"amount": 500}, run="r", call_id=f"bc-{id(pair)}")
    assert v.effect == "ask" and set(v.decisions) == {"approve", "edit", "reject", "respond"}
    assert v.needs and v.timeout_seconds == 4 * 3600
    assert agent.wait(v.request, 0.2).waiting
    edited = _decide(reviewers, "sup-1", v.request, "edit", digest=v.args_digest, args={"amount": 400}, reason="cap")
    assert edited.status == "pending"  # one of two
    _decide(reviewers, "sup-2", v.request, "approve", digest=edited.args_digest)
    settled = agent.wait(v.request, 10)
    assert settled.status == "approved" and settled.edits == 1 and not settled.waiting
    seen = []
    done = agent.execute(v.request, lambda a: seen.append(a) or "ok", keep_result=True)
    assert seen == [{"amount": 400}] and done.result_kept
    again = agent.execute(v.request, lambda a: seen.append(a))
    assert again.replayed and again.result == "ok" and len(seen) == 1
    assert agent.find(f"bc-{id(pair)}").status == "executed"


@pytest.mark.parametrize("decision,field", [("reject", "reason"), ("respond", "message")])
def test_reject_and_respond_reach_the_agent_as_an_instruction(pair, decision, field):
    agent, reviewers = pair
    v = agent.propose("big_change", {"amount": 1, "n": decision})
    _decide(reviewers, "sup-1", v.request, decision, digest=v.args_digest, **{field: "use the sandbox"})
    settled = agent.wait(v.request, 10)
    assert settled.status == ("rejected" if decision == "reject" else "responded")
    assert settled.reason == "use the sandbox" and settled.decided_by == "sup-1"


def test_an_agent_cancels_its_own_call(pair):
    agent, _ = pair
    v = agent.propose("small_change", {"n": "cancel"})
    assert agent.cancel(v.request, "the hook gave up waiting").status == "cancelled"


def test_async_backend_awaits_an_async_tool(pair):
    agent, _ = pair

    async def main():
        a = AsyncBackend(agent)
        v = await a.propose("read_thing", {"id": 2})

        async def tool(args):
            await asyncio.sleep(0)
            return args["id"] * 10

        return await a.execute(v.request, tool, keep_result=True)

    done = asyncio.run(main())
    assert isinstance(done, Outcome) and done.result == 20 and done.result_kept


def test_service_errors_are_codes_and_a_bad_token_is_refused(served):
    s, server = served
    with pytest.raises(BackendError) as caught:
        ServiceBackend(server.url, "cst_wrong").propose("read_thing", {})
    assert caught.value.code == "unauthenticated"
    with pytest.raises(BackendError) as caught:
        ServiceBackend("http://127.0.0.1:9", "t").propose("read_thing", {})  # nobody listens on port 9
    assert caught.value.code == "unreachable"


def test_connect_reads_the_environment(tmp_path, served):
    s, server = served
    assert isinstance(connect(environ={"COUNTERSIGN_URL": server.url, "COUNTERSIGN_TOKEN": "x"}), ServiceBackend)
    (tmp_path / "p.policy").write_text(POLICY_TEXT)
    local = connect(environ={"COUNTERSIGN_POLICY": str(tmp_path / "p.policy"), "COUNTERSIGN_LEDGER": str(tmp_path / "l"),
                             "COUNTERSIGN_PROPOSER": "me"})
    assert isinstance(local, LocalBackend) and local.proposer == "me"
    local.close()
    for environ, code in (({}, "not_configured"), ({"COUNTERSIGN_URL": server.url}, "unauthenticated")):
        with pytest.raises(BackendError) as caught:
            connect(environ=environ)
        assert caught.value.code == code


def test_roster_reviewers_take_the_name_from_a_token_only(served):
    from adapters.identity import RosterReviewers
    from ledger.proof.roster import load_roster

    s, _ = served
    who = RosterReviewers(load_roster(s.roster))
    assert who(s.tokens["sup-1"]) == "sup-1"
    for token, code in ((s.tokens["agent-1"], "forbidden"), ("cst_nope", "unauthenticated"), (None, "unauthenticated")):
        with pytest.raises(BackendError) as caught:
            who(token)
        assert caught.value.code == code


def test_a_result_is_reported_by_its_digest_unless_kept_and_a_failed_report_says_the_call_ran(pair):
    from adapters.backend import OutcomeUnrecorded
    from ledger.digest import value_digest

    agent, _ = pair
    v = agent.propose("read_thing", {"id": "digest-only"})
    done = agent.execute(v.request, lambda a: {"secret": "stays here"})
    assert done.result == {"secret": "stays here"} and not done.result_kept
    assert done.result_digest == value_digest({"secret": "stays here"})
    odd = agent.propose("read_thing", {"id": "not-json"})
    assert agent.execute(odd.request, lambda a: object()).result_digest is None  # ran; no digest to record

    class Refusing:  # a backend whose outcome report fails after the tool ran
        def __init__(self, inner):
            self.inner = inner

        def start(self, request):
            return self.inner.start(request)

        def finish(self, request, **kwargs):
            raise BackendError("unreachable", "the service went away")

    v = agent.propose("read_thing", {"id": "lost-report"})
    runs = []
    with pytest.raises(OutcomeUnrecorded) as caught:
        asyncio.run(AsyncBackend(Refusing(agent)).execute(v.request, lambda a: runs.append(1) or "the answer"))
    assert runs == [1] and caught.value.outcome.result == "the answer" and "the call ran" in str(caught.value)
    assert agent.get(v.request).status == "executing"  # never runs again


def test_a_result_or_an_error_holding_a_lone_surrogate_is_recorded_through_either_backend(pair):
    """A tool's text cut in the middle of a surrogate pair: the call ran, so its outcome is
    recorded (the result without a digest, the error's surrogate as a backslash escape), by
    `finish` as by `execute`, never refused (the request would stay "executing" for ever)."""
    agent, _ = pair
    for n, report in enumerate([dict(outcome="ok", result={"text": "cut \ud83d"}, keep_result=True),
                                dict(outcome="error", error="cut \ud83d")]):
        v = agent.propose("read_thing", {"id": f"surrogate-{n}"})
        agent.start(v.request)
        done = agent.finish(v.request, **report)
        assert done.result_digest is None and done.error in (None, "cut \\ud83d")
        assert agent.get(v.request).status == "executed"

    def fails(args):
        raise RuntimeError("cut \ud83d")

    v = agent.propose("read_thing", {"id": "surrogate-raise"})
    assert agent.execute(v.request, fails).error == "RuntimeError: cut \\ud83d"
    assert agent.get(v.request).status == "executed"


REMEMBERING = POLICY_TEXT + '''
ask send_mail reason "A person reads outgoing mail." remember run id "mail"
'''


@pytest.mark.parametrize("kind", ["local", "service"])
def test_a_reviewer_may_remember_an_approval_for_the_run_through_either_backend(tmp_path, kind):
    s = setup(tmp_path / "svc", REMEMBERING)
    if kind == "local":
        gate = Gate(Policy.from_text(REMEMBERING, "test.policy"), tmp_path / "l")
        agent, reviewer, server = LocalBackend(gate, "agent-1"), LocalBackend(gate, "sup-1"), None
    else:
        server = Server(s).start()
        agent = ServiceBackend(server.url, s.tokens["agent-1"])
        reviewer = ServiceBackend(server.url, s.tokens["agent-1"], reviewer_token=s.tokens["sup-1"])
    try:
        first = agent.propose("send_mail", {"to": "a@example.com"}, run="r1")
        assert first.effect == "ask"
        reviewer.decide(first.request, "approve", reviewer="sup-1", digest=first.args_digest, remember="run")
        again = agent.propose("send_mail", {"to": "b@example.com"}, run="r1")
        elsewhere = agent.propose("send_mail", {"to": "b@example.com"}, run="r2")
        assert again.status == "allowed" and elsewhere.status == "pending"
        with pytest.raises(BackendError):  # the rule allows a run, not 8 hours
            reviewer.decide(elsewhere.request, "approve", reviewer="sup-1", digest=elsewhere.args_digest, remember="8h")
    finally:
        if server is not None:
            server.stop()
        else:
            gate.close()
            assert verify(tmp_path / "l").ok


def test_connect_proposes_as_an_agent_the_person_at_the_same_account_may_approve(tmp_path):
    """A new user's finding: connect() proposed as the OS account, so `countersign review
    approve` from the same account was refused as self-approval."""
    from adapters.backend import _os_account

    (tmp_path / "p.policy").write_text(POLICY_TEXT)
    local = connect(environ={"COUNTERSIGN_POLICY": str(tmp_path / "p.policy"), "COUNTERSIGN_LEDGER": str(tmp_path / "l")})
    try:
        assert local.proposer == f"agent:{_os_account()}"
        v = local.propose("small_change", {})
        assert LocalBackend(local.gate, _os_account()).decide(v.request, "approve", reviewer=_os_account(),
                                                              digest=v.args_digest).status == "approved"
    finally:
        local.close()


def test_the_shapes_are_frozen_records_as_frozen_dataclasses_were():
    """Verdict, Settled, Outcome, Started (adapters.backend._Record): construction by position or
    keyword with defaults, equality and hashing by value, a repr, no assignment, pickling."""
    import pickle

    from adapters.backend import Outcome, Settled, Started, Verdict

    v = Verdict(1, "t", "ask", "pending", "d", reasons=("a ", "b"))
    assert v == Verdict(request=1, tool="t", effect="ask", status="pending", args_digest="d", reasons=("a ", "b"))
    assert hash(v) == hash(Verdict(1, "t", "ask", "pending", "d", ("a ", "b")))
    assert (v.rules, v.decisions, v.needs, v.duplicate, v.remember, v.reason) == ((), (), None, False, (), "a b")
    assert v != Verdict(1, "t", "ask", "pending", "e") and v != (1, "t")
    assert repr(Started(3, {"x": 1}, "d")) == "Started(request=3, args={'x': 1}, args_digest='d')"
    assert Settled(2, "approved", "d").runnable and not Settled(2, "pending", "d", waiting=True).runnable
    assert pickle.loads(pickle.dumps(Outcome(4, "ok", result=[1]))) == Outcome(4, "ok", None, None, False, [1], False)
    with pytest.raises(AttributeError):
        v.status = "allowed"
    with pytest.raises(AttributeError):
        del v.status
    for bad in (lambda: Started(1, {}), lambda: Started(1, {}, "d", "extra"), lambda: Started(1, {}, "d", request=2),
                lambda: Started(1, {}, "d", nope=1)):
        with pytest.raises(TypeError):
            bad()
