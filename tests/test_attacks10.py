"""A tenth hostile review: standing ("remembered") decisions (docs/policy-language.md "Remembered
decisions", docs/ledger-format.md section 12) against the rules of the domain: no call runs
that no person approved for it, identities from authentication only, and the ledger never says
more than what happened. Each finding is xfail (strict) until fixed: the test asserts what the
rule (or the code's own docs) promises, so it fails today."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsl import Policy
from ledger.clock import ManualClock
from ledger.proof.verify import verify
from ledger.workflow.gate import Gate

from support import START


def _gate(tmp_path: Path, text: str) -> tuple[Gate, ManualClock]:
    clock = ManualClock(START)
    return Gate(Policy.from_text(text, "attacks10.policy"), tmp_path / "ledger", clock=clock), clock


# --- scope: a run or a session is a name the agent chooses ---------------------------------------

SHARED_SCOPES = """
policy "attacks10-scopes"
ask deploy
  reason "A person checks deploys."
  remember session
  id "deploy"
"""


@pytest.mark.parametrize("scope", ["run", "session"])
def test_another_agent_cannot_put_its_call_into_a_run_or_session_someone_approved(tmp_path, scope):
    """HIGH. What: sup-1 looks at agent-1's deploy in run "r-1" / session "s-1" and approves it
    with `remember run` (or `session`). agent-2, a different authenticated principal, proposes a
    deploy with run "r-1" (or context.session_id "s-1") and it is *allowed* at once: no person saw
    it, and the ledger records it as decided by sup-1's standing approval. Why it matters: the
    run and the session are names the caller chooses (service/api.py takes `run` and `context`
    from the agent's request body; service/core.py itself says "a run's name is the agents'
    choice: another agent's calls in it are not theirs" and hides them from agents), so any agent
    that learns or guesses a run or session name (they are shown in queues, webhooks, the web
    form, logs) inherits every standing approval made in it. Workflow.covering binds the decision
    to (policy, tool, scope, run/session, args) and excludes only the reviewer as proposer, never
    the proposer the reviewer looked at. Related: a run or session scope never ends, so the
    same agent may reuse a run name months later and still be covered. Fix: record the
    request's proposer in the `remembered` event and cover only that proposer's calls (in
    Workflow.covering, the Gate and both verifiers: docs/ledger-format.md section 12), and
    consider bounding `run`/`session` scopes in time as well."""
    gate, _clock = _gate(tmp_path, SHARED_SCOPES)
    p = gate.propose("deploy", {"env": "dev"}, proposer="agent-1", run="r-1", context={"session_id": "s-1"})
    gate.approve(p.request, approver="sup-1", digest=p.args_digest, remember=scope)
    mine = gate.propose("deploy", {"env": "dev", "n": 2}, proposer="agent-1", run="r-1", context={"session_id": "s-1"})
    assert mine.status == "allowed"  # the approval covers the agent the reviewer looked at
    if scope == "run":
        theirs = gate.propose("deploy", {"env": "prod"}, proposer="agent-2", run="r-1")
    else:
        theirs = gate.propose("deploy", {"env": "prod"}, proposer="agent-2", run="mine", context={"session_id": "s-1"})
    gate.close()
    assert theirs.status == "pending", f"agent-2's call was {theirs.status} by standing decision {theirs.standing}"


# --- what a standing approval covers: the tool, not the rule that asked ----------------------------

TWO_RULES = """
policy "attacks10-rules"
group sups = ["sup-1", "sup-2"]
ask deploy
  reason "A person checks deploys."
  remember run
  id "deploy"
ask deploy when args.env == "prod"
  reason "Production: a supervisor checks the change itself."
  approvers 1 from sups
  remember run
  id "prod"
"""


def test_approving_a_dev_deploy_for_the_run_does_not_approve_a_prod_deploy(tmp_path):
    """MEDIUM. What: the policy asks about every deploy (rule "deploy") and, separately and more
    strictly, about production deploys (rule "prod": a supervisor, its own reason); both let a
    decision be remembered for the run. sup-1 reviews a *dev* deploy and clicks "approve,
    remember for this run" (pattern any). The agent's next call in the run is a *prod* deploy:
    it is allowed without anyone seeing it. Why it matters: the policy author wrote the prod rule
    precisely so that prod is looked at separately; its `remember run` says "a reviewer of a prod
    deploy may remember it", not "an approval of a dev deploy pre-approves prod". Coverage checks
    the tool, the policy digest, the scope and that the reviewer alone meets the *new* call's
    quorums, but never which rules asked: the reviewer approved a call with reasons ("A person
    checks deploys.") and the covered call carries others ("Production: ...") that no one read.
    (The reverse, a prod approval covering dev, is fine: test_sticky checks it.) Fix: record R's
    deciding ask rules in the `remembered` event and cover only calls whose deciding ask rules are
    among them (or whose requirements are no stricter than R's), in Workflow.covering and in the
    verifiers (section 12)."""
    gate, _clock = _gate(tmp_path, TWO_RULES)
    p = gate.propose("deploy", {"env": "dev"}, proposer="agent-1", run="r-1")
    assert p.rules == ("deploy",)
    gate.approve(p.request, approver="sup-1", digest=p.args_digest, remember="run")
    assert gate.propose("deploy", {"env": "dev", "n": 2}, proposer="agent-1", run="r-1").status == "allowed"
    prod = gate.propose("deploy", {"env": "prod"}, proposer="agent-1", run="r-1")
    gate.close()
    assert set(prod.rules) == {"deploy", "prod"}
    assert prod.status == "pending", f"a prod deploy was {prod.status} by the dev approval {prod.standing}"


# --- policy reload: an edit "forgets", a revert remembers again ----------------------------------

REMEMBERING = """
policy "attacks10-reload"
ask deploy
  reason "A person checks deploys."
  remember run
  id "deploy"
"""

NOT_REMEMBERING = """
policy "attacks10-reload"
ask deploy
  reason "A person checks every deploy."
  id "deploy"
"""


def test_a_policy_edit_forgets_standing_decisions_for_good(tmp_path):
    """LOW-MEDIUM. What: under policy X (deploy: `remember run`) sup-1 approves a deploy for run
    "r-1". The operator edits the policy to Y (no `remember`: every deploy is asked); the docs
    say "a policy edit forgets every standing decision", and indeed under Y the run is asked
    again. Later the operator reloads X again (a revert, a rollback of the config repository, a
    deployment of an older image): the old standing approval, now possibly a year old, covers the
    run's deploys again, though nobody made any decision since the edit. Why it matters: an
    operator who removed `remember` after an incident is told the edit forgot the approvals;
    they come back silently with the old text, and a run scope never expires. Fix: let a
    standing decision stand only while the policy it was made under has been in force without
    interruption (a `policy` event naming another digest ends all standing decisions of other
    digests: the Workflow already folds `policy` events), or say in the docs that only a
    `forgotten` event revokes one and record a `forgotten` for each on a policy change."""
    gate, _clock = _gate(tmp_path, REMEMBERING)
    x, y = gate.policy, Policy.from_text(NOT_REMEMBERING, "attacks10.policy")
    gate.record_policy(x, "operator")
    p = gate.propose("deploy", {"n": 1}, proposer="agent-1", run="r-1")
    gate.approve(p.request, approver="sup-1", digest=p.args_digest, remember="run")
    gate.record_policy(y, "operator")
    gate.policy = y
    assert gate.propose("deploy", {"n": 2}, proposer="agent-1", run="r-1").status == "pending"
    gate.record_policy(x, "operator")
    gate.policy = x
    again = gate.propose("deploy", {"n": 3}, proposer="agent-1", run="r-1")
    gate.close()
    assert verify(tmp_path / "ledger").ok
    assert again.status == "pending", f"the reverted policy's call was {again.status} by standing decision {again.standing}"


# --- the roster: a removed reviewer's plain approval stops; their standing approval does not -------

ROSTER_POLICY = """
policy "attacks10-roster"
ask notify
  reason "A person checks notices."
  remember run
  id "notify"
ask wire
  reason "A person checks wires."
  id "wire"
"""


def test_a_reviewer_removed_from_the_roster_approves_nothing_more(tmp_path):
    """HIGH. What: in the service, sup-1 approves a `notify` with `remember run`, and approves a
    `wire` plainly. The admin removes sup-1 from the roster (left the company, token or key
    stolen) and reloads. The wire sup-1 approved will not run: `start` refuses it
    (UnsignedDecision: "the service attests the approved decision by sup-1, who is not in the
    roster"). But a *new* notify in the run is allowed and `start` hands the agent its arguments:
    sup-1's standing approval keeps approving new calls indefinitely (a run scope never ends), and
    `ledger verify --roster` with the current roster does not pass the ledger either. Why it
    matters: require_signatures promises "a call runs only when every approval ... of it is signed
    ... by a key the roster lists"; a covered call has no approval of its own, and
    Gate._signature_problem looks only at the request's own events, so the one decision that let
    it run (the `remembered` event at `state.standing` and its approval) is never checked.
    Revoking a reviewer is exactly when one wants their standing decisions gone. Fix: have
    Gate.covering skip (or the Gate's propose refuse) standing decisions whose `remembered`
    event and decision do not pass decisions.problem under the roster in force, and check them
    again in _signature_problem before a covered call starts; or have a roster change end the
    standing decisions of principals it no longer lists."""
    pytest.importorskip("starlette")
    from service_support import setup

    s = setup(tmp_path / "files", ROSTER_POLICY)
    svc = s.service()
    try:
        agent, sup1 = svc.roster.principal("agent-1"), svc.roster.principal("sup-1")
        n = svc.propose(agent, "notify", {"to": "ann"}, run="r-1")
        svc.decide(sup1, n.request, "approve", digest=n.args_digest, remember="run")
        w = svc.propose(agent, "wire", {"amount": 5}, run="r-1")
        svc.decide(sup1, w.request, "approve", digest=w.args_digest)
        blocks = s.roster.read_text().split("[[principal]]")
        s.roster.write_text("[[principal]]".join(b for b in blocks if 'name = "sup-1"' not in b))
        assert svc.reload("root-admin")["changed"]
        agent = svc.roster.principal("agent-1")
        assert svc.roster.principal("sup-1") is None
        with pytest.raises(Exception, match="not in the roster"):  # sup-1's plain approval no longer runs anything
            svc.start(agent, w.request)
        later = svc.propose(agent, "notify", {"to": "everyone@example.com"}, run="r-1")
        ran = None
        if later.status == "allowed":
            ran = svc.start(agent, later.request)
    finally:
        svc.close()
    assert later.status == "pending" and ran is None, (
        f"sup-1, removed from the roster, still approved request {later.request} ({later.status}); it started: {ran!r}")


# --- the OpenAI Agents SDK adapter: always_approve for "the run" given to gate_tools ---------------

def test_openai_always_approve_in_one_conversation_does_not_approve_the_next_conversation(tmp_path):
    """MEDIUM. What: adapters/openai_agents.py maps the SDK's `always_approve` to a standing
    approval for countersign's run, and that run is the `run` given to gate_tools when the agent
    is gated (its module docstring's own example: `gate_tools(Agent(...), connect(),
    run="ticket-42")`, once, at module level). An Agent object is reused for every conversation
    (`Runner.run(agent, input)` per user message or per user). A reviewer's always_approve in
    conversation 1 therefore approves the tool in conversation 2, another user's, another
    RunState: its call runs with no interruption and no person. Why it matters: the adapter's
    docstring justifies scope "run" by "the SDK's own lasts for its run (the RunState's
    context, across its pauses and resumes)": the SDK forgets at the end of the RunState,
    countersign never does (a run scope has no end). Fix: scope the standing decision to
    the SDK run itself: give each Runner.run / RunState its own countersign run (e.g. a
    per-run id kept in the RunState's context, as the call ids should be) or refuse
    always_approve unless the caller gives a per-conversation run; and say so in the docs."""
    pytest.importorskip("agents")
    from agents import Agent, Runner

    import test_adapter_openai_agents as oa
    from adapters.openai_agents import Decision, gate_tools, run_gated

    b = oa.Local(tmp_path)
    try:
        ran: list = []
        script = [[oa.call("notify", {"to": "ann"}, "c-1")], [oa.say("done")],  # conversation 1
                  [oa.call("notify", {"to": "everyone"}, "c-9")], [oa.say("done")]]  # conversation 2
        model = oa.ScriptedModel(script)
        agent = gate_tools(Agent(name="support", model=model, tools=oa.make_tools(ran)), b.backend, run="support-bot")

        def review(pending):
            return Decision("always_approve", b.tokens["sup-1"])

        first = asyncio.run(run_gated(agent, "notify ann", review=review, reviewers=b.reviewers))
        assert first.final_output == "done" and ran == [("notify", "ann")]
        second = asyncio.run(Runner.run(agent, "notify everyone"))  # another conversation, no reviewer
    finally:
        b.close()
    assert ("notify", "everyone") not in ran, "conversation 2's call ran on conversation 1's always_approve"
    assert [i.tool_name for i in second.interruptions] == ["notify"]


# --- forget: what a standing decision already let through stays runnable -------------------------

def test_forgetting_a_standing_approval_stops_the_calls_it_let_through_that_have_not_run(tmp_path):
    """LOW-MEDIUM. What: sup-1's standing approval (remember run) covers the agent's next
    deploys: each is recorded `allowed` at once. The agent proposes several but has not started
    them yet (the service's agent proposes, then calls POST /v1/requests/{id}/start when it gets
    to it). sup-1 sees the flood, and forgets the standing decision (POST
    /v1/standing/{seq}/forget). The calls already covered stay `allowed` and `execute` runs them
    afterwards. Why it matters: the docs say that from the `forgotten` event "the calls it covered
    are asked about again"; a reviewer revoking an approval because it is being abused expects
    the calls that no person looked at to stop, and a covered call carries no deadline, so it may
    be started days later. A plain approval is different: a person approved that very call. Fix:
    have `forgotten` end (or return to a person: interrupt) the covered requests of that
    standing decision that have not started (workflow: a covered request whose `standing` is
    forgotten is no longer executable; section 12), or document that forget only affects
    proposals after it and offer a way to cancel the covered ones."""
    gate, _clock = _gate(tmp_path, SHARED_SCOPES.replace("remember session", "remember run"))
    p = gate.propose("deploy", {"n": 0}, proposer="agent-1", run="r-1")
    gate.approve(p.request, approver="sup-1", digest=p.args_digest, remember="run")
    covered = gate.propose("deploy", {"n": 1}, proposer="agent-1", run="r-1")
    assert covered.status == "allowed" and covered.standing is not None
    gate.forget(covered.standing, by="sup-1", reason="being abused")
    assert gate.propose("deploy", {"n": 2}, proposer="agent-1", run="r-1").status == "pending"
    ran: list = []
    try:
        gate.execute(covered.request, lambda args: ran.append(args) or "deployed")
    except Exception:  # refused: what the fix does
        pass
    gate.close()
    assert ran == [], "a call allowed only by a forgotten standing decision ran after the forget"
