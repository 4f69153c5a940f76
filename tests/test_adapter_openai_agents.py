"""adapters.openai_agents: a real openai-agents Agent, driven by a scripted Model (the SDK's Model
interface; no network, no keys, tracing off), with its tools gated by countersign on a local
Gate and on `countersign serve` (a real process on 127.0.0.1).

One run proposes three calls at once: lookup_order (allowed: runs), delete_order (denied: the
model reads the policy's reason, the function never runs) and refund (asked: the run pauses).
The ask is decided approve / edit / reject / respond in turn; then the ledger verifies and the
DuckDB `requests` view tells the same story as the SDK's items (the outputs the model read)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

pytest.importorskip("agents")

from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from adapters.backend import BackendError, LocalBackend, ServiceBackend  # noqa: E402
from adapters.identity import RosterReviewers  # noqa: E402
from adapters.openai_agents import Decision, countersign_tool, gate_tools, gating_of, resolve, run_gated  # noqa: E402
from dsl import Policy  # noqa: E402
from ledger import Gate, verify  # noqa: E402
from ledger.analytics.views import connect as views  # noqa: E402
from ledger.digest import value_digest  # noqa: E402
from ledger.proof.roster import load_roster  # noqa: E402
from service_process import Server  # noqa: E402
from service_support import setup  # noqa: E402

set_tracing_disabled(True)

POLICY = """
policy "openai-agents-test"
default ask "No rule covers this tool."
group sups = ["sup-1", "sup-2", "sup-3"]

allow lookup_order
deny delete_order reason "Orders are never deleted; cancel them instead."

ask refund
  reason "A person checks refunds."
  decisions approve, edit, reject, respond
  timeout 1h
  id "refund"

ask notify
  reason "A person checks notices."
  remember run
  id "notify"

ask wire
  reason "Two supervisors check wires."
  approvers 2 from sups
  decisions approve, edit, reject, respond
  timeout 1h
  id "wire"
"""

DENY_REASON = "Orders are never deleted; cancel them instead."


# --- a scripted model ---------------------------------------------------------------------------

def call(name: str, args: dict, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=call_id, call_id=call_id, type="function_call", name=name,
                                    arguments=json.dumps(args))


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])])


class ScriptedModel(Model):
    """Answers each model call with the next step of `script` (a list of output items) and keeps
    every input it was given, so a test reads what the model saw."""

    def __init__(self, script: list[list]):
        self.script, self.inputs = list(script), []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        self.inputs.append(input)
        if not self.script:
            raise AssertionError("the model was called more often than scripted")
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")

    def tool_outputs(self) -> dict[str, str]:
        """call_id → the output the model read last."""
        seen = self.inputs[-1] if self.inputs else []
        return {i["call_id"]: i["output"] for i in seen if isinstance(i, dict) and i.get("type") == "function_call_output"}


def make_tools(ran: list):
    @function_tool
    def lookup_order(order: int) -> str:
        """Look an order up."""
        ran.append(("lookup_order", order))
        return f"order {order}: shipped"

    @function_tool
    def delete_order(order: int) -> str:
        """Delete an order."""
        ran.append(("delete_order", order))
        return "deleted"

    @function_tool
    async def refund(order: int, amount: int) -> str:
        """Refund part of an order."""
        await asyncio.sleep(0)
        ran.append(("refund", order, amount))
        return f"refunded {amount} on order {order}"

    @function_tool
    async def wire(ctx: ToolContext, to: str, amount: int) -> str:
        """Wire money."""
        assert json.loads(ctx.tool_arguments) == {"to": to, "amount": amount}  # an edit reaches the context too
        ran.append(("wire", to, amount))
        return f"wired {amount} to {to}"

    @function_tool
    def notify(to: str) -> str:
        """Send a notice."""
        ran.append(("notify", to))
        return f"notified {to}"

    return [lookup_order, delete_order, refund, wire, notify]


THREE_CALLS = [call("lookup_order", {"order": 7}, "c-lookup"), call("delete_order", {"order": 7}, "c-delete"),
               call("refund", {"order": 7, "amount": 50}, "c-refund")]


# --- backends -------------------------------------------------------------------------------------

class Local:
    """A Gate on a fresh ledger; reviewers authenticated by roster tokens (adapters.identity)."""

    kind = "local"

    def __init__(self, tmp_path, files=None):
        self.s = files or setup(tmp_path / "files", POLICY)  # `files`: reopen another's (a restart)
        self.gate = Gate(Policy.from_text(POLICY, "openai-agents-test.policy"), self.s.ledger)
        self.backend = LocalBackend(self.gate, "agent-1")
        self.reviewers = RosterReviewers(load_roster(self.s.roster))
        self.tokens = self.s.tokens
        self.ledger = self.s.ledger

    def reviewer(self, name: str):
        return LocalBackend(self.gate, name)

    def close(self):
        self.gate.close()


class Served:
    """`countersign serve` with the agent's token; the service authenticates reviewers' tokens."""

    kind = "service"

    def __init__(self, s, server):
        self.s, self.server = s, server
        self.backend = ServiceBackend(server.url, s.tokens["agent-1"])
        self.reviewers = None
        self.tokens = s.tokens
        self.ledger = s.ledger

    def reviewer(self, name: str):
        return ServiceBackend(self.server.url, self.s.tokens["agent-1"], reviewer_token=self.s.tokens[name])

    def close(self):
        self.backend.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = setup(tmp_path_factory.mktemp("svc"), POLICY)
    with Server(s) as server:
        yield s, server


@pytest.fixture
def local(tmp_path):
    b = Local(tmp_path)
    yield b
    b.close()


@pytest.fixture(params=["local", "service"])
def anywhere(request, tmp_path, served):
    b = Local(tmp_path) if request.param == "local" else Served(*served)
    yield b
    b.close()


_runs = iter(range(1, 10**6))
CONV = "conv-1"  # the conversation the tests' run_gated calls name: the ledger's run is "<run>/conv-1"


def agent_for(b, script, ran, **options):
    """An Agent with the four tools gated on `b` under a fresh run name (the service's ledger is shared)."""
    model = ScriptedModel(script)
    run = f"oa-{b.kind}-{next(_runs)}-{time.monotonic_ns()}"
    agent = gate_tools(Agent(name="support", model=model, tools=make_tools(ran)), b.backend, run=run, **options)
    return agent, model, run


def found(b, run, call_id):
    """Where a call stands, from the backend (the DuckDB views take a second to open: kept for
    the tests that compare them with the SDK's items)."""
    return b.backend.find(f"{run}/{call_id}")


def rows(b, run):
    con = views(b.ledger)
    try:
        cur = con.execute("SELECT call_id, tool, effect, status, decision, decided_by, reason, edits, outcome, "
                          "result_digest, proposer, approved_by FROM requests WHERE run = ? ORDER BY request", [run])
        names = [d[0] for d in cur.description]
        return {r[0].rsplit("/", 1)[1]: dict(zip(names, r)) for r in cur.fetchall()}
    finally:
        con.close()


# --- the run: allow, deny, ask decided four ways ---------------------------------------------------

EXPECTED = {
    "approve": dict(decision=Decision("approve", None, comment="fine"), status="executed", ran=("refund", 7, 50),
                    output="refunded 50 on order 7", edits=0),
    "edit": dict(decision=Decision("edit", None, args={"order": 7, "amount": 40}, reason="at most 40"),
                 status="executed", ran=("refund", 7, 40), output="refunded 40 on order 7", edits=1),
    "reject": dict(decision=Decision("reject", None, reason="Refunds over 30 need the customer's photo."),
                   status="rejected", ran=None, output="Refunds over 30 need the customer's photo.", edits=0),
    "respond": dict(decision=Decision("respond", None, message="Refunded by hand already; tell the customer."),
                    status="responded", ran=None, output="Refunded by hand already; tell the customer.", edits=0),
}


@pytest.mark.parametrize("decision", list(EXPECTED))
def test_allow_deny_and_an_ask_decided_in_process(anywhere, decision):
    b, want = anywhere, EXPECTED[decision]
    ran, asked = [], []
    agent, model, run = agent_for(b, [THREE_CALLS, [say("done")]], ran)

    def review(pending):
        asked.append(pending)
        d = want["decision"]
        return Decision(d.decision, b.tokens["sup-1"], d.args, d.reason, d.message, d.comment)

    result = asyncio.run(run_gated(agent, "refund order 7", conversation=CONV, review=review, reviewers=b.reviewers))
    assert result.final_output == "done" and not result.interruptions

    # the reviewer was asked once, about the refund alone, with the rule's reason and decisions
    assert [(p.tool, p.call_id, p.args, p.reason) for p in asked] == [
        ("refund", "c-refund", {"order": 7, "amount": 50}, "A person checks refunds.")]
    assert set(asked[0].decisions) == {"approve", "edit", "reject", "respond"}

    # what really ran: the allowed call, and the refund only when approved (with the edited arguments)
    assert ran == [("lookup_order", 7)] + ([want["ran"]] if want["ran"] else [])
    outputs = model.tool_outputs()  # what the model read
    assert outputs == {"c-lookup": "order 7: shipped", "c-delete": DENY_REASON, "c-refund": want["output"]}

    # the SDK's own items say the same
    sdk = {i.raw_item["call_id"]: i.output for i in result.new_items if type(i).__name__ == "ToolCallOutputItem"}
    assert sdk == outputs
    # its approval record: approve and edit are approvals; reject and respond are rejections
    # whose message the model read (the SDK has no "respond": docs/adapters/openai-agents.md)
    assert result.context_wrapper.is_tool_approved("refund", "c-refund") is (want["status"] == "executed")

    # the ledger verifies, and its views tell the same story
    assert verify(b.ledger).ok
    table = rows(b, f"{run}/{CONV}")
    assert set(table) == {"c-lookup", "c-delete", "c-refund"}
    lookup, delete, refund = table["c-lookup"], table["c-delete"], table["c-refund"]
    assert (lookup["effect"], lookup["status"], lookup["outcome"]) == ("allow", "executed", "ok")
    assert lookup["result_digest"] == value_digest(outputs["c-lookup"])
    assert (delete["effect"], delete["status"], delete["outcome"]) == ("deny", "denied", None)
    assert refund["effect"] == "ask" and refund["status"] == want["status"] and refund["edits"] == want["edits"]
    assert refund["decided_by"] == "sup-1" and {r["proposer"] for r in table.values()} == {"agent-1"}
    if want["status"] == "executed":
        assert refund["outcome"] == "ok" and refund["result_digest"] == value_digest(outputs["c-refund"])
    else:
        assert refund["outcome"] is None and refund["reason"] == outputs["c-refund"]


def test_a_quorum_of_two_keeps_the_call_paused_until_met(anywhere):
    b, ran, asked = anywhere, [], []
    agent, model, run = agent_for(b, [[call("wire", {"to": "acme", "amount": 900}, "c-wire")], [say("wired")]], ran)
    order = iter(["sup-1", "sup-2"])

    def review(pending):
        asked.append(pending.round)
        return Decision("approve", b.tokens[next(order)])

    result = asyncio.run(run_gated(agent, "pay acme", conversation=CONV, review=review, reviewers=b.reviewers))
    assert asked == [1, 2]  # asked again after the first approval, while one was missing
    assert ran == [("wire", "acme", 900)] and result.final_output == "wired"
    row = rows(b, f"{run}/{CONV}")["c-wire"]
    assert row["status"] == "executed" and list(row["approved_by"]) == ["sup-1", "sup-2"]
    assert verify(b.ledger).ok


def test_resolve_waits_for_decisions_made_elsewhere(anywhere):
    """No in-process reviewer: the decision comes from another principal (the inbox, the API,
    `countersign review`); resolve waits until the quorum is met, then the run continues."""
    b, ran = anywhere, []
    agent, model, run = agent_for(b, [[call("wire", {"to": "acme", "amount": 5}, "c-wire")], [say("ok")]], ran)

    async def main():
        result = await Runner.run(agent, "pay")
        assert [i.tool_name for i in result.interruptions] == ["wire"]
        assert found(b, run, "c-wire").status == "pending"

        def elsewhere():
            time.sleep(0.3)
            v = b.backend.find(f"{run}/c-wire")
            first = b.reviewer("sup-2").decide(v.request, "edit", reviewer="sup-2", digest=v.args_digest,
                                               args={"to": "acme", "amount": 4}, reason="round down")
            time.sleep(0.3)
            b.reviewer("sup-3").decide(v.request, "approve", reviewer="sup-3", digest=first.args_digest)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        state = await resolve(result, timeout=30)
        thread.join()
        return await Runner.run(agent, state)

    result = asyncio.run(main())
    assert ran == [("wire", "acme", 4)] and result.final_output == "ok"
    assert model.tool_outputs() == {"c-wire": "wired 4 to acme"}
    row = rows(b, run)["c-wire"]
    assert row["status"] == "executed" and row["edits"] == 1 and list(row["approved_by"]) == ["sup-2", "sup-3"]


def test_silence_past_the_timeout_withdraws_the_call(local):
    ran = []
    agent, model, run = agent_for(local, [[call("refund", {"order": 1, "amount": 5}, "c-r")], [say("gave up")]], ran)
    result = asyncio.run(run_gated(agent, "refund", conversation=CONV, timeout=0.3))
    assert ran == [] and result.final_output == "gave up"
    row = found(local, f"{run}/{CONV}", "c-r")
    assert row.status == "cancelled" and row.decided_by == "agent-1"
    assert model.tool_outputs()["c-r"] == row.reason and "no decision within 0.3 s" in row.reason
    assert verify(local.ledger).ok


# --- identities and decisions countersign refuses: fail closed --------------------------------------

@pytest.mark.parametrize("token,code", [(None, "unauthenticated"), ("cst_not-in-the-roster", "unauthenticated"),
                                        ("agent-1", "forbidden")])
def test_a_wrong_or_missing_reviewer_identity_fails_closed(anywhere, token, code):
    b, ran = anywhere, []
    agent, model, run = agent_for(b, [[call("refund", {"order": 2, "amount": 9}, "c-r")]], ran)
    token = b.tokens.get(token, token) if token else None

    async def main():
        result = await Runner.run(agent, "refund")
        with pytest.raises(BackendError) as caught:
            await resolve(result, review=lambda p: Decision("approve", token), reviewers=b.reviewers)
        return caught.value

    error = asyncio.run(main())
    assert error.code == code
    assert ran == []
    row = found(b, run, "c-r")
    assert row.status == "pending" and row.decision is None and row.decided_by is None


def test_a_local_decision_without_an_authenticator_fails_closed(local):
    ran = []
    agent, _, run = agent_for(local, [[call("refund", {"order": 3, "amount": 9}, "c-r")]], ran)

    async def main():
        result = await Runner.run(agent, "refund")
        with pytest.raises(BackendError) as caught:
            await resolve(result, review=lambda p: Decision("approve", local.tokens["sup-1"]))  # no reviewers=
        return caught.value

    assert asyncio.run(main()).code == "unauthenticated" and ran == []
    assert found(local, run, "c-r").status == "pending"


@pytest.mark.parametrize("decision", ["always_approve", "always_reject", "maybe"])
def test_sticky_decisions_the_rule_does_not_allow_and_unknown_ones_are_refused(anywhere, decision):
    """refund's rule has no `remember` clause: a sticky decision is refused whole (no approval
    or rejection recorded either), and the call stays paused; it does not run."""
    b, ran, asked = anywhere, [], []
    agent, _, run = agent_for(b, [[call("refund", {"order": 4, "amount": 9}, "c-r")]], ran)

    def review(pending):
        asked.append(pending.remember)
        return Decision(decision, b.tokens["sup-1"], reason="No refunds this run.")

    async def main():
        result = await Runner.run(agent, "refund")
        with pytest.raises(BackendError) as caught:
            await resolve(result, review=review, reviewers=b.reviewers)
        return caught.value

    error = asyncio.run(main())
    assert error.code == ("invalid_decision" if decision == "maybe" else "sticky_not_allowed")
    assert asked == [()]  # the reviewer was told nothing can be remembered here
    row = found(b, run, "c-r")
    assert ran == [] and (row.status, row.decision, row.decided_by) == ("pending", None, None)
    if b.kind == "local":
        assert [type(r.event).__name__ for r in b.gate.history(row.request)] == ["Proposed", "Interrupted"]
    assert verify(b.ledger).ok


NOTICES = [[call("notify", {"to": "ann"}, "c-n1")], [call("notify", {"to": "bob"}, "c-n2")], [say("done")]]


@pytest.mark.parametrize("decision", ["always_approve", "always_reject"])
def test_a_sticky_decision_is_remembered_for_the_run_and_not_beyond(anywhere, decision):
    """notify's rule says `remember run`: the SDK's always_approve / always_reject is countersign's
    standing approval / rejection for the run (run_gated's conversation). The run's second notice
    is decided by it (no interruption, no person); the same tool in another run is asked about
    again."""
    b, ran, asked = anywhere, [], []
    agent, model, run = agent_for(b, NOTICES, ran)

    def review(pending):
        asked.append((pending.call_id, pending.remember))
        return Decision(decision, b.tokens["sup-1"], reason="No notices in this run.")

    result = asyncio.run(run_gated(agent, "notify", conversation=CONV, review=review, reviewers=b.reviewers))
    assert result.final_output == "done" and asked == [("c-n1", ("run",))]  # one person, once
    first, second = found(b, f"{run}/{CONV}", "c-n1"), found(b, f"{run}/{CONV}", "c-n2")
    outputs = model.tool_outputs()
    if decision == "always_approve":
        assert ran == [("notify", "ann"), ("notify", "bob")]
        assert outputs == {"c-n1": "notified ann", "c-n2": "notified bob"}
        assert (first.status, first.decided_by) == ("executed", "sup-1")
        assert second.status == "executed"
    else:
        assert ran == [] and outputs == {"c-n1": "No notices in this run.", "c-n2": "No notices in this run."}
        assert (first.status, second.status) == ("rejected", "rejected")
    assert "c-n2" not in {i.call_id for i in result.interruptions}

    other, _, other_run = agent_for(b, [[call("notify", {"to": "cyd"}, "c-n1")]], ran)
    paused = asyncio.run(Runner.run(other, "notify"))  # another run: asked again
    assert [i.tool_name for i in paused.interruptions] == ["notify"]
    assert found(b, other_run, "c-n1").status == "pending" and ("notify", "cyd") not in ran
    assert verify(b.ledger).ok
    table = rows(b, f"{run}/{CONV}")
    assert table["c-n2"]["effect"] == "ask" and table["c-n2"]["status"] == second.status


def test_an_approval_given_only_inside_the_sdk_never_runs_the_call(local):
    """The SDK's own approve (here its sticky always_approve) bypasses needs_approval; the
    invocation still asks countersign, which has not approved: nothing runs, the call is
    withdrawn, and the model reads why."""
    ran = []
    agent, model, run = agent_for(local, [[call("refund", {"order": 5, "amount": 9}, "c-r")],
                                          [call("refund", {"order": 6, "amount": 9}, "c-r2")], [say("stopped")]], ran)

    async def main():
        result = await Runner.run(agent, "refund")
        state = result.to_state()
        state.approve(result.interruptions[0], always_approve=True)
        return await Runner.run(agent, state)

    result = asyncio.run(main())
    assert ran == [] and result.final_output == "stopped"
    assert found(local, run, "c-r").status == "cancelled" and found(local, run, "c-r2").status == "cancelled"
    assert "did not run" in model.tool_outputs()["c-r2"]
    assert verify(local.ledger).ok


# --- the wrapping itself -------------------------------------------------------------------------

def test_gating_keeps_the_tool_and_refuses_what_it_cannot_gate(local):
    from agents import WebSearchTool

    lookup = make_tools([])[0]
    gated = countersign_tool(lookup, local.backend)
    assert gating_of(gated) is not None and gating_of(lookup) is None  # a copy: the original is untouched
    assert gated.name == lookup.name and gated.params_json_schema == lookup.params_json_schema
    assert countersign_tool(gated, local.backend) is gated

    def plain(order: int) -> str:
        """A plain function."""
        return str(order)

    assert gating_of(countersign_tool(plain, local.backend)).run is None
    with pytest.raises(TypeError):
        gate_tools([WebSearchTool()], local.backend)
    with pytest.raises(TypeError):
        countersign_tool(function_tool(plain, needs_approval=True), local.backend)


def test_a_failing_tool_is_recorded_as_an_error_once(local):
    ran = []

    @function_tool(failure_error_function=None)
    def lookup_order(order: int) -> str:
        """Fails."""
        ran.append(order)
        raise RuntimeError("the order service is down")

    model = ScriptedModel([[call("lookup_order", {"order": 1}, "c-f")]])
    agent = gate_tools(Agent(name="a", model=model, tools=[lookup_order]), local.backend, run="failing")
    with pytest.raises(Exception, match="the order service is down"):
        asyncio.run(Runner.run(agent, "look"))
    row = found(local, "failing", "c-f")
    assert ran == [1] and row.status == "executed" and row.outcome == "error"


def test_a_paused_run_survives_a_restart(tmp_path):
    """The run pauses, its RunState is saved as text and every process stops; a reviewer decides
    on the ledger meanwhile (as `countersign review` does); a new process restores the state,
    resolves it and resumes: the refund runs once, with the edited arguments."""
    b, ran = Local(tmp_path), []
    agent, model, run = agent_for(b, [[call("refund", {"order": 8, "amount": 70}, "c-r")]], ran)
    saved = asyncio.run(Runner.run(agent, "refund")).to_state().to_string()
    b.close()

    reviewer_gate = Gate(Policy.from_text(POLICY, "openai-agents-test.policy"), b.ledger)
    request = reviewer_gate.find(call_id=f"{run}/c-r")
    reviewer_gate.decide(request.request, "edit", by="sup-1", args={"order": 8, "amount": 60}, digest=request.digest)
    reviewer_gate.close()

    from agents import RunState

    later = Local(tmp_path, files=b.s)
    model2 = ScriptedModel([[say("refunded 60")]])
    agent2 = gate_tools(Agent(name="support", model=model2, tools=make_tools(ran)), later.backend, run=run)

    async def resume():
        state = await RunState.from_string(agent2, saved)
        return await Runner.run(agent2, await resolve(state, timeout=5))

    result = asyncio.run(resume())
    assert ran == [("refund", 8, 60)] and result.final_output == "refunded 60"
    assert model2.tool_outputs() == {"c-r": "refunded 60 on order 8"}
    assert found(later, run, "c-r").status == "executed"
    later.close()
    assert verify(b.ledger).ok


def test_two_asks_in_one_pause_and_arguments_that_are_not_an_object(local):
    """Every interruption of a pause is settled before the run resumes; arguments the policy
    cannot read (not a JSON object) make the SDK ask without consulting countersign, and
    resolve refuses them: nothing is recorded, nothing runs, the model reads why."""
    ran = []
    bad = ResponseFunctionToolCall(id="c-bad", call_id="c-bad", type="function_call", name="refund", arguments="[7, 50]")
    agent, model, run = agent_for(local, [[call("refund", {"order": 1, "amount": 5}, "c-1"),
                                           call("wire", {"to": "acme", "amount": 3}, "c-2"), bad], [say("ok")]], ran)
    tokens = {"refund": iter(["sup-1"]), "wire": iter(["sup-1", "sup-2"])}
    result = asyncio.run(run_gated(agent, "go", conversation=CONV, reviewers=local.reviewers,
                                   review=lambda p: Decision("approve", local.tokens[next(tokens[p.tool])])))
    assert sorted(ran) == [("refund", 1, 5), ("wire", "acme", 3)] and result.final_output == "ok"
    outputs = model.tool_outputs()
    assert outputs["c-1"] == "refunded 5 on order 1" and outputs["c-2"] == "wired 3 to acme"
    assert "not a JSON object" in outputs["c-bad"] and found(local, f"{run}/{CONV}", "c-bad") is None


@pytest.mark.parametrize("keep", [True, False])
def test_a_call_replayed_under_the_same_run_runs_once(local, keep):
    """The same run and call id again (a run replayed from its start: the same conversation): the
    tool does not run a second time; the model reads the kept result, or that it was not kept."""
    ran, outputs = [], []
    for _ in range(2):
        model = ScriptedModel([[call("lookup_order", {"order": 9}, "c-once")], [say("ok")]])
        agent = gate_tools(Agent(name="a", model=model, tools=make_tools(ran)), local.backend, run="replayed",
                           keep_result=keep)
        asyncio.run(run_gated(agent, "look", conversation="replayed-conv"))
        outputs.append(model.tool_outputs()["c-once"])
    assert ran == [("lookup_order", 9)]
    assert outputs[0] == "order 9: shipped"
    if keep:
        assert outputs[1] == "order 9: shipped"
    else:
        assert "its result was not kept" in outputs[1]


# --- what an in-process reviewer is shown is what their decision binds ---------------------------

def test_the_next_reviewer_of_a_quorum_is_shown_the_edited_arguments(anywhere):
    """sup-1 edits in this process (one of the two approvals); sup-2, asked next, is shown the
    edited arguments with their digest, read from countersign, not the model's call item."""
    b, ran, shown = anywhere, [], []
    agent, model, run = agent_for(b, [[call("wire", {"to": "acme", "amount": 900}, "c-wire")], [say("wired")]], ran)

    def review(pending):
        shown.append(pending)
        if pending.round == 1:
            return Decision("edit", b.tokens["sup-1"], args={"to": "acme", "amount": 500}, reason="at most 500")
        return Decision("approve", b.tokens["sup-2"])

    asyncio.run(run_gated(agent, "pay acme", conversation=CONV, review=review, reviewers=b.reviewers))
    assert [(p.round, p.args) for p in shown] == [(1, {"to": "acme", "amount": 900}),
                                                  (2, {"to": "acme", "amount": 500})]
    assert all(value_digest(p.args) == p.args_digest for p in shown)
    assert ran == [("wire", "acme", 500)]
    row = rows(b, f"{run}/{CONV}")["c-wire"]
    assert row["status"] == "executed" and list(row["approved_by"]) == ["sup-1", "sup-2"]


def test_an_edit_landing_while_the_reviewer_looks_is_shown_to_them_again(anywhere):
    """sup-3 edits elsewhere after sup-1 was shown the call and before sup-1's answer: sup-1's
    approval names the digest they saw, countersign refuses it as stale, and sup-1 is asked
    again with the new arguments; nothing is approved that they did not see."""
    b, ran, shown = anywhere, [], []
    agent, model, run = agent_for(b, [[call("wire", {"to": "acme", "amount": 900}, "c-wire")], [say("wired")]], ran)

    def review(pending):
        shown.append(pending)
        if len(shown) == 1:  # the inbox edit lands now
            b.reviewer("sup-3").decide(pending.request, "edit", reviewer="sup-3", digest=pending.args_digest,
                                       args={"to": "mallory", "amount": 900})
        if pending.args["to"] == "mallory":
            return Decision("reject", b.tokens["sup-1"], reason="Not to mallory.")
        return Decision("approve", b.tokens["sup-1"])

    asyncio.run(run_gated(agent, "pay acme", conversation=CONV, review=review, reviewers=b.reviewers))
    assert [p.args["to"] for p in shown] == ["acme", "mallory"] and [p.round for p in shown] == [1, 1]
    assert all(value_digest(p.args) == p.args_digest for p in shown)
    assert ran == [] and model.tool_outputs()["c-wire"] == "Not to mallory."
    row = rows(b, f"{run}/{CONV}")["c-wire"]
    assert row["status"] == "rejected" and row["decided_by"] == "sup-1"


def test_arguments_that_do_not_match_their_digest_are_never_shown(local):
    """A read whose arguments and digest disagree is read again, then refused: the reviewer is
    not asked, nothing is decided, nothing runs."""
    ran, shown = [], []

    class Torn(LocalBackend):
        def details(self, request):
            view = super().details(request)
            return {**view, "args": {**view["args"], "amount": 1}}

    backend = Torn(local.gate, "agent-1")
    model = ScriptedModel([[call("refund", {"order": 7, "amount": 50}, "c-r")]])
    agent = gate_tools(Agent(name="a", model=model, tools=make_tools(ran)), backend, run="torn")

    async def main():
        result = await Runner.run(agent, "refund")
        with pytest.raises(BackendError) as caught:
            await resolve(result, review=lambda p: shown.append(p) or Decision("approve", local.tokens["sup-1"]),
                          reviewers=local.reviewers)
        return caught.value

    assert asyncio.run(main()).code == "inconsistent_arguments"
    assert shown == [] and ran == [] and found(local, "torn", "c-r").status == "pending"


# --- a call that ran is never reported as not run ------------------------------------------------

def test_a_call_that_ran_but_whose_outcome_was_not_recorded_is_reported_as_run(local):
    """Recording the outcome fails after the tool ran (the service refused it, or went away):
    the model reads that the call ran, with its output, and that the outcome is not recorded;
    the same call again is not run a second time, and the model reads that it may have run."""
    ran = []

    class Refusing(LocalBackend):
        def finish(self, request, **kwargs):
            raise BackendError("body_too_large", "the outcome is over the service's limit", request)

    backend = Refusing(local.gate, "agent-1")
    outputs = []
    for _ in range(2):
        model = ScriptedModel([[call("lookup_order", {"order": 7}, "c-big")], [say("ok")]])
        agent = gate_tools(Agent(name="a", model=model, tools=make_tools(ran)), backend, run="unrecorded")
        asyncio.run(Runner.run(agent, "look order 7 up"))
        outputs.append(model.tool_outputs()["c-big"])
    assert ran == [("lookup_order", 7)]
    assert "did not run" not in outputs[0] and "ran" in outputs[0] and "could not be recorded" in outputs[0]
    assert outputs[0].endswith("order 7: shipped") and "body_too_large" in outputs[0]
    assert "did not run" not in outputs[1] and "may have run" in outputs[1]
    assert found(local, "unrecorded", "c-big").status == "executing"


# --- a sticky decision lasts for one conversation (one SDK run), not for the agent ------------------

def test_a_sticky_decision_stays_in_its_conversation_across_a_saved_and_restored_state(tmp_path):
    """Two conversations of one gated Agent. run_gated gives the first its own run (a fresh
    conversation id in its context); sup-1's always_approve there covers only it. The second
    (its context names "conv-b") pauses on the same tool, is saved as text and restored in a new
    process: the conversation comes back with the context, its call is still asked (the first's
    standing approval does not reach it) and runs once approved, under "<run>/conv-b"."""
    from agents import RunState

    from adapters.openai_agents import CONVERSATION, conversation_of

    b, ran = Local(tmp_path), []
    script = [[call("notify", {"to": "ann"}, "c-1")], [call("notify", {"to": "bob"}, "c-2")], [say("done")],
              [call("notify", {"to": "cyd"}, "c-1")]]  # the provider numbers calls per conversation: c-1 again
    agent, model, run = agent_for(b, script, ran)
    first = asyncio.run(run_gated(agent, "notify", reviewers=b.reviewers,
                                  review=lambda p: Decision("always_approve", b.tokens["sup-1"])))
    conv_a = conversation_of(first)
    assert first.final_output == "done" and ran == [("notify", "ann"), ("notify", "bob")]
    assert len(conv_a) == 32 and found(b, f"{run}/{conv_a}", "c-2").status == "executed"

    paused = asyncio.run(Runner.run(agent, "notify", context={CONVERSATION: "conv-b"}))
    assert [i.tool_name for i in paused.interruptions] == ["notify"] and ("notify", "cyd") not in ran
    assert found(b, f"{run}/conv-b", "c-1").status == "pending"
    saved = paused.to_state().to_string()
    b.close()

    later = Local(tmp_path, files=b.s)
    model2 = ScriptedModel([[say("sent")]])
    agent2 = gate_tools(Agent(name="support", model=model2, tools=make_tools(ran)), later.backend, run=run)

    async def resume():
        state = await RunState.from_string(agent2, saved)
        assert conversation_of(state) == "conv-b"
        return await run_gated(agent2, state, reviewers=later.reviewers,
                               review=lambda p: Decision("approve", later.tokens["sup-2"]))

    result = asyncio.run(resume())
    assert result.final_output == "sent" and ran[-1] == ("notify", "cyd") and len(ran) == 3
    row = found(later, f"{run}/conv-b", "c-1")
    assert (row.status, row.decided_by) == ("executed", "sup-2")
    later.close()
    assert verify(b.ledger).ok


def test_a_sticky_decision_in_a_run_shared_by_every_conversation_is_refused(local):
    """A plain Runner.run names no conversation: its calls are proposed under gate_tools' run,
    which every conversation of the agent shares; an always_approve there would reach them all,
    so it is refused whole (nothing recorded, the call stays paused and does not run)."""
    ran = []
    agent, _, run = agent_for(local, [[call("notify", {"to": "ann"}, "c-n")]], ran)

    async def main():
        result = await Runner.run(agent, "notify")
        with pytest.raises(BackendError) as caught:
            await resolve(result, review=lambda p: Decision("always_approve", local.tokens["sup-1"]),
                          reviewers=local.reviewers)
        return caught.value

    error = asyncio.run(main())
    assert error.code == "sticky_not_allowed" and "every conversation" in error.message
    row = found(local, run, "c-n")
    assert ran == [] and (row.status, row.decision) == ("pending", None)
    assert [type(r.event).__name__ for r in local.gate.history(row.request)] == ["Proposed", "Interrupted"]


def test_run_gated_carries_the_conversation_in_the_context(local):
    """A mapping context is copied with the conversation added (the caller's is untouched); one
    that names a conversation keeps it; an object without the attribute is refused (it may be
    shared by conversations: run_gated does not write into it)."""
    from adapters.openai_agents import CONVERSATION, conversation_of

    seen = []

    @function_tool
    def lookup_order(ctx: ToolContext, order: int) -> str:
        """Look an order up."""
        seen.append(dict(ctx.context))
        return "shipped"

    def agent(script):
        return gate_tools(Agent(name="a", model=ScriptedModel(script), tools=[lookup_order]), local.backend,
                          run=f"ctx-{time.monotonic_ns()}")

    mine = {"user": "ann"}
    result = asyncio.run(run_gated(agent([[call("lookup_order", {"order": 1}, "c-1")], [say("ok")]]), "look",
                                   context=mine))
    assert mine == {"user": "ann"} and seen == [{"user": "ann", CONVERSATION: conversation_of(result)}]
    named = asyncio.run(run_gated(agent([[say("ok")]]), "hi", context={CONVERSATION: "mine"}))
    assert conversation_of(named) == "mine"

    class Deps:
        pass

    with pytest.raises(TypeError):
        asyncio.run(run_gated(agent([[say("ok")]]), "hi", context=Deps()))
    with pytest.raises(TypeError):
        asyncio.run(run_gated(agent([[say("ok")]]), "hi", context={CONVERSATION: "a"}, conversation="b"))
