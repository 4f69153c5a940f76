"""adapters.langchain: LangChain's create_agent with CountersignMiddleware, driven by a scripted chat
model and LangGraph's InMemorySaver (no network): allow runs, deny answers with the reason, ask
interrupts per call and is decided approve / edit / reject / respond by an authenticated
reviewer; a quorum of two stays paused until the second approval; a node run again gets the kept
result; a resume without a reviewer's token runs nothing. The ledger verifies and its DuckDB
views tell the story the agent's messages tell. Also through `countersign serve` (a real process)
and with async tools."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware.types import AgentMiddleware  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from adapters.backend import LocalBackend, ServiceBackend  # noqa: E402
from adapters.identity import RosterReviewers  # noqa: E402
from adapters.langchain import CountersignMiddleware, resume  # noqa: E402
from dsl import Policy  # noqa: E402
from langchain_support import POLICY_TEXT, ScriptedChatModel, calls, done  # noqa: E402
from ledger import Gate, verify  # noqa: E402
from ledger.analytics.views import connect  # noqa: E402
from ledger.proof.roster import load_roster  # noqa: E402
from service_support import setup  # noqa: E402


class World:
    """A roster with tokens (tests/service_support.py), a Gate on a fresh ledger, the tools (each
    call noted in `ran`), and agents built on a script."""

    def __init__(self, tmp: Path, **gate_options):
        self.s = setup(tmp / "files", POLICY_TEXT)
        self.ledger = tmp / "ledger"
        self.gate = Gate(Policy.from_text(POLICY_TEXT, "langchain-test.policy"), self.ledger, **gate_options)
        self.backend = LocalBackend(self.gate, "agent-1")
        self.reviewers = RosterReviewers(load_roster(self.s.roster))
        self.ran: list[tuple] = []
        ran = self.ran

        @tool
        def lookup(order: int) -> str:
            """Look up an order."""
            ran.append(("lookup", order))
            return f"order {order}: shipped"

        @tool
        def delete_account(user: str) -> str:
            """Delete a customer's account."""
            ran.append(("delete_account", user))
            return "deleted"

        @tool
        def refund(order: int, amount: int) -> str:
            """Refund an order."""
            ran.append(("refund", order, amount))
            return f"refunded {amount} on order {order}"

        @tool
        def wire(amount: int) -> str:
            """Wire money."""
            ran.append(("wire", amount))
            return f"wired {amount}"

        @tool
        def notify(to: str) -> str:
            """Send a notice."""
            ran.append(("notify", to))
            return f"notified {to}"

        self.tools = [lookup, delete_account, refund, wire, notify]

    def agent(self, *script: AIMessage, middleware=None, backend=None, **options):
        middleware = middleware if middleware is not None else [
            CountersignMiddleware(backend or self.backend, reviewers=self.reviewers, **options)]
        return create_agent(ScriptedChatModel(script=list(script)), self.tools, checkpointer=InMemorySaver(),
                            middleware=middleware)

    def token(self, name: str) -> str:
        return self.s.tokens[name]

    def rows(self, sql: str, *params) -> list[dict]:
        con = connect(self.ledger)
        cursor = con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def close_and_verify(self) -> None:
        self.gate.close()
        assert verify(self.ledger).ok


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    yield w
    w.gate.close()


def config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def review_of(out: dict) -> dict:
    """The one pending interrupt's payload."""
    pending = out.get("__interrupt__") or ()
    assert len(pending) == 1, pending
    return pending[0].value


def tool_messages(out: dict) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def test_allow_deny_and_an_ask_decided_approve_edit_reject_respond(world):
    agent = world.agent(
        calls(("c1", "lookup", {"order": 7}), ("c2", "delete_account", {"user": "bob"}),
              ("c3", "refund", {"order": 7, "amount": 10})),
        calls(("c4", "refund", {"order": 8, "amount": 50})),
        calls(("c5", "refund", {"order": 9, "amount": 20})),
        calls(("c6", "refund", {"order": 10, "amount": 30})),
        done(),
    )
    cfg = config("thread-1")
    out = agent.invoke({"messages": [{"role": "user", "content": "sort out orders 7 to 10"}]}, cfg)
    review = review_of(out)
    assert world.ran == [("lookup", 7)]  # allowed ran; denied never; asked waits
    state = world.gate.find(call_id="c3")
    assert review["type"] == "countersign_review" and review["request"] == state.request
    assert review["tool"] == "refund" and review["args"] == {"order": 7, "amount": 10}
    assert review["digest"] == state.digest and review["run"] == "thread-1" and review["call_id"] == "c3"
    assert review["decisions"] == ["approve", "edit", "reject", "respond"]
    assert review["reasons"] == ["A person checks refunds."] and review["rules"] == ["refund"]
    assert review["needs"] and review["more_needed"] == 1 and review["refused"] is None

    out = agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"))), cfg)
    review = review_of(out)
    assert review["call_id"] == "c4" and world.ran[-1] == ("refund", 7, 10)
    out = agent.invoke(Command(resume=resume(review, "edit", token=world.token("sup-2"),
                                             args={"order": 8, "amount": 25}, reason="half now")), cfg)
    review = review_of(out)
    assert review["call_id"] == "c5" and world.ran[-1] == ("refund", 8, 25)
    out = agent.invoke(Command(resume=resume(review, "reject", token=world.token("sup-1"),
                                             reason="Ask the customer first.")), cfg)
    review = review_of(out)
    assert review["call_id"] == "c6"
    out = agent.invoke(Command(resume=resume(review, "respond", token=world.token("sup-3"),
                                             message="Refunded by hand: 30.")), cfg)
    assert "__interrupt__" not in out and out["messages"][-1].content == "All done."
    assert world.ran == [("lookup", 7), ("refund", 7, 10), ("refund", 8, 25)]  # each once

    got = tool_messages(out)
    assert (got["c1"].content, got["c1"].status) == ("order 7: shipped", "success")
    assert (got["c2"].content, got["c2"].status) == ("Accounts are closed by support, never by the agent.", "error")
    assert (got["c3"].content, got["c3"].status) == ("refunded 10 on order 7", "success")
    assert got["c4"].status == "success" and got["c4"].content.endswith("refunded 25 on order 8")
    assert '"amount": 25' in got["c4"].content and got["c4"].content.startswith("A reviewer edited")
    assert (got["c5"].content, got["c5"].status) == ("Ask the customer first.", "error")
    assert (got["c6"].content, got["c6"].status) == ("Refunded by hand: 30.", "success")

    # the ledger's story, read by DuckDB, is the agent's
    world.close_and_verify()
    rows = {r["call_id"]: r for r in world.rows("SELECT * FROM requests ORDER BY request")}
    called = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert sorted(rows) == sorted(called) == sorted(got)
    expected = {"c1": ("allow", "executed", None, None), "c2": ("deny", "denied", "deny", None),
                "c3": ("ask", "executed", "approve", "sup-1"), "c4": ("ask", "executed", "approve", "sup-2"),
                "c5": ("ask", "rejected", "reject", "sup-1"), "c6": ("ask", "responded", "respond", "sup-3")}
    for call_id, message in got.items():
        row = rows[call_id]
        meta = message.response_metadata["countersign"]
        assert (row["effect"], row["status"], row["decision"], row["decided_by"]) == expected[call_id]
        assert row["request"] == meta["request"] and row["run"] == "thread-1" and row["proposer"] == "agent-1"
        assert row["decided_by"] == meta["decided_by"] and row["edits"] == meta["edits"]
        if row["status"] == "executed":
            assert row["outcome"] == "ok" and message.status == "success" and row["result_digest"]
        if row["status"] in ("rejected", "responded"):
            assert row["reason"] == message.content
    assert rows["c4"]["edits"] == 1 and rows["c4"]["approvers"] == ["sup-2"]


def test_a_quorum_of_two_stays_paused_until_the_second_approval(world):
    agent = world.agent(calls(("w1", "wire", {"amount": 900})), done())
    cfg = config("thread-q")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "wire it"}]}, cfg))
    assert review["decisions"] == ["approve", "reject"] and review["more_needed"] == 2
    assert review["needs"].startswith("2 from sups")

    review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"))), cfg))
    assert review["approved_by"] == ["sup-1"] and review["more_needed"] == 1 and review["refused"] is None
    assert world.ran == [] and world.gate.find(call_id="w1").status == "pending"
    # the same reviewer again counts once
    review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"))), cfg))
    assert review["refused"]["code"] == "DuplicateApproval" and review["more_needed"] == 1
    # a decision this rule does not allow
    review = review_of(agent.invoke(Command(resume=resume(review, "respond", token=world.token("sup-2"),
                                                          message="no")), cfg))
    assert review["refused"]["code"] == "decision_not_allowed" and world.ran == []

    out = agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-2"))), cfg)
    assert "__interrupt__" not in out and world.ran == [("wire", 900)]
    assert tool_messages(out)["w1"].content == "wired 900"
    world.close_and_verify()
    (row,) = world.rows("SELECT * FROM requests")
    assert row["status"] == "executed" and row["approved_by"] == ["sup-1", "sup-2"] and row["quorum"] == 2
    # LangGraph ran the node once per resume (four times), handing back every earlier resume:
    # the ledger holds each approval once
    kinds = [r["kind"] for r in world.rows("SELECT kind FROM events WHERE request = ? ORDER BY seq", row["request"])]
    assert kinds.count("approved") == 2 and kinds.count("execution_started") == 1


@pytest.mark.parametrize("who,code", [(None, "unauthenticated"), ("cst_unknown", "unauthenticated"),
                                      ("agent-1", "forbidden"), ("agent-2", "forbidden")])
def test_a_resume_without_a_reviewers_token_runs_nothing(world, who, code):
    agent = world.agent(calls(("r1", "refund", {"order": 1, "amount": 5})), done())
    cfg = config(f"thread-{who}")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "refund"}]}, cfg))
    token = world.s.tokens.get(who, who)
    review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=token)), cfg))
    assert review["refused"]["code"] == code and world.ran == []
    # a name in the resume is never read
    review = review_of(agent.invoke(Command(resume={**resume(review, "approve", token=token), "reviewer": "sup-1",
                                                    "by": "sup-1"}), cfg))
    assert review["refused"]["code"] == code
    for bad, bad_code in (("approve please", "invalid_decision"), ({"type": "yes", "request": review["request"], "call_id": "r1"},
                                                                     "invalid_decision"),
                          ({"type": "approve", "token": world.token("sup-1"), "request": review["request"],
                            "call_id": "r1"}, "invalid_decision"),  # no digest
                          # a resume is bound to the request (and call) it answers
                          ({"type": "approve", "token": world.token("sup-1"), "digest": review["digest"]},
                           "unbound_resume"),
                          ({**resume(review, "approve", token=world.token("sup-1")), "request": review["request"] + 1},
                           "wrong_request"),
                          ({**resume(review, "approve", token=world.token("sup-1")), "request": str(review["request"])},
                           "wrong_request"),
                          ({**resume(review, "approve", token=world.token("sup-1")), "call_id": "r2"}, "wrong_request"),
                          ({"type": "check"}, "unbound_resume"),
                          ({**resume(review, "approve", token=world.token("sup-1")), "digest": "0" * 64}, "StaleDigest"),
                          (resume(review, "reject", token=world.token("sup-1")), "InvalidCall")):  # reject needs a reason
        review = review_of(agent.invoke(Command(resume=bad), cfg))
        assert review["refused"]["code"] == bad_code, bad
    assert world.ran == []
    state = world.gate.find(call_id="r1")
    assert state.status == "pending" and not state.approvals
    world.close_and_verify()
    (row,) = world.rows("SELECT status, decision, approvals FROM requests")
    assert row == {"status": "pending", "decision": None, "approvals": 0}


def test_without_reviewers_a_local_ledger_takes_no_decision(world):
    agent = world.agent(calls(("n1", "refund", {"order": 1, "amount": 5})), done(),
                        middleware=[CountersignMiddleware(world.backend)])
    cfg = config("thread-n")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "refund"}]}, cfg))
    review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"))), cfg))
    assert review["refused"]["code"] == "unauthenticated" and world.ran == []


class CrashOnce(AgentMiddleware):
    """Outside countersign's middleware: the first time a tool call comes back, raise, as a
    process that dies after the tool ran and before LangGraph saved the step would."""

    def __init__(self):
        super().__init__()
        self.crashed = False

    def wrap_tool_call(self, request, handler):
        result = handler(request)
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("the process died before the checkpoint")
        return result


def test_a_node_run_again_gets_the_kept_result_and_the_tool_runs_once(world):
    agent = world.agent(calls(("k1", "lookup", {"order": 3})), done(),
                        middleware=[CrashOnce(), CountersignMiddleware(world.backend, reviewers=world.reviewers,
                                                                       keep_result=True)])
    cfg = config("thread-k")
    with pytest.raises(RuntimeError, match="died"):
        agent.invoke({"messages": [{"role": "user", "content": "look"}]}, cfg)
    assert world.ran == [("lookup", 3)] and world.gate.find(call_id="k1").status == "executed"
    out = agent.invoke(None, cfg)  # LangGraph runs the failed tool node again
    message = tool_messages(out)["k1"]
    assert message.content == "order 3: shipped" and message.response_metadata["countersign"]["replayed"]
    assert world.ran == [("lookup", 3)]
    world.close_and_verify()


def test_by_default_no_result_is_kept_and_a_node_run_again_is_told_so(world):
    agent = world.agent(calls(("k2", "lookup", {"order": 4})), done(),
                        middleware=[CrashOnce(), CountersignMiddleware(world.backend, reviewers=world.reviewers)])
    cfg = config("thread-k2")
    with pytest.raises(RuntimeError, match="died"):
        agent.invoke({"messages": [{"role": "user", "content": "look"}]}, cfg)
    request = world.gate.find(call_id="k2").request
    kept = world.gate.result(request)
    assert not kept.result_kept and kept.result is None  # only the result's digest is in the ledger
    out = agent.invoke(None, cfg)
    message = tool_messages(out)["k2"]
    assert message.status == "error" and "not kept" in message.content
    assert world.ran == [("lookup", 4)]  # it ran once, and is not run again
    world.close_and_verify()
    (row,) = world.rows("SELECT status, outcome FROM requests")
    assert row == {"status": "executed", "outcome": "ok"}


def test_async_agent_with_async_tools(world):
    ran = []

    @tool
    async def lookup(order: int) -> str:
        """Look up an order."""
        await asyncio.sleep(0)
        ran.append(order)
        return f"order {order}: shipped"

    @tool
    async def refund(order: int, amount: int) -> str:
        """Refund an order."""
        ran.append((order, amount))
        return f"refunded {amount}"

    world.tools = [lookup, refund]
    agent = world.agent(calls(("a1", "lookup", {"order": 1}), ("a2", "refund", {"order": 1, "amount": 4})), done())
    cfg = config("thread-async")

    async def main():
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
        review = review_of(out)
        out = await agent.ainvoke(Command(resume=resume(review, "edit", token=world.token("sup-1"),
                                                        args={"order": 1, "amount": 3})), cfg)
        return out

    out = asyncio.run(main())
    got = tool_messages(out)
    assert ran == [1, (1, 3)] and got["a1"].content == "order 1: shipped" and got["a2"].content.endswith("refunded 3")
    world.close_and_verify()
    rows = {r["call_id"]: r for r in world.rows("SELECT * FROM requests")}
    assert rows["a2"]["edits"] == 1 and rows["a2"]["decided_by"] == "sup-1" and rows["a2"]["outcome"] == "ok"


def test_through_the_approval_service_a_token_or_a_check(world, tmp_path):
    from service_process import Server

    s = world.s
    with Server(s) as server:
        agent_backend = ServiceBackend(server.url, s.tokens["agent-1"])
        agent = world.agent(calls(("s1", "refund", {"order": 2, "amount": 9})),
                            calls(("s2", "wire", {"amount": 70})), done(),
                            middleware=[CountersignMiddleware(agent_backend)])  # the service authenticates
        cfg = config("thread-svc")
        review = review_of(agent.invoke({"messages": [{"role": "user", "content": "go"}]}, cfg))
        review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=s.tokens["agent-2"])), cfg))
        assert review["refused"]["code"] in ("forbidden", "unauthenticated") and world.ran == []
        review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=s.tokens["sup-1"])), cfg))
        assert world.ran == [("refund", 2, 9)] and review["tool"] == "wire"
        # the wire is decided in the service (its inbox, another program) and the resume only checks
        inbox = {n: ServiceBackend(server.url, s.tokens["agent-1"], reviewer_token=s.tokens[n]) for n in ("sup-1", "sup-2")}
        review = review_of(agent.invoke(Command(resume=resume(review, "check")), cfg))  # nothing decided yet
        assert review["refused"] is None and world.ran == [("refund", 2, 9)]
        inbox["sup-1"].decide(review["request"], "approve", digest=review["digest"])
        review = review_of(agent.invoke(Command(resume=resume(review, "check")), cfg))
        assert review["approved_by"] == ["sup-1"] and review["more_needed"] == 1
        inbox["sup-2"].decide(review["request"], "approve", digest=review["digest"])
        out = agent.invoke(Command(resume=resume(review, "check")), cfg)
        assert "__interrupt__" not in out and world.ran == [("refund", 2, 9), ("wire", 70)]
        got = tool_messages(out)
        assert got["s2"].response_metadata["countersign"]["decided_by"] == "sup-2"
        for b in (agent_backend, *inbox.values()):
            b.close()
    assert verify(s.ledger).ok


@pytest.mark.parametrize("where", ["local", "service"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_remembered_decision_decides_the_threads_later_calls_and_no_others(world, decision, where):
    """notify's rule says `remember session`: an approve or reject resumed with remember="run"
    stands for the thread (the run): its second notice runs (or is rejected) without an
    interrupt; another thread is asked again."""
    from service_process import Server

    server = Server(world.s).start() if where == "service" else None
    try:
        backend = ServiceBackend(server.url, world.s.tokens["agent-1"]) if server else world.backend
        middleware = lambda: [CountersignMiddleware(backend, reviewers=None if server else world.reviewers)]  # noqa: E731
        agent = world.agent(calls(("n1", "notify", {"to": "ann"})), calls(("n2", "notify", {"to": "bob"})), done(),
                            middleware=middleware())
        cfg = config(f"thread-remember-{decision}-{where}")  # (call ids are one namespace in the ledger)
        review = review_of(agent.invoke({"messages": [{"role": "user", "content": "tell them"}]}, cfg))
        assert review["tool"] == "notify" and review["remember"] == ["run", "session"]
        fields = {"reason": "No notices in this thread."} if decision == "reject" else {}
        out = agent.invoke(Command(resume=resume(review, decision, token=world.token("sup-1"), remember="run",
                                                 **fields)), cfg)
        assert "__interrupt__" not in out and out["messages"][-1].content == "All done."  # no second person
        got = tool_messages(out)
        if decision == "approve":
            assert world.ran == [("notify", "ann"), ("notify", "bob")]
            assert (got["n2"].content, got["n2"].status) == ("notified bob", "success")
        else:
            assert world.ran == []
            assert (got["n2"].content, got["n2"].status) == ("No notices in this thread.", "error")

        other = world.agent(calls(("m1", "notify", {"to": "cyd"})), done(), middleware=middleware())
        review = review_of(other.invoke({"messages": [{"role": "user", "content": "tell cyd"}]},
                                        config(f"thread-other-{decision}-{where}")))
        assert review["tool"] == "notify" and ("notify", "cyd") not in world.ran  # another run: asked again
        if server:
            backend.close()
    finally:
        if server:
            server.stop()
    ledger = world.s.ledger if server else world.ledger
    if not server:
        world.gate.close()
    assert verify(ledger).ok
    con = connect(ledger)
    try:
        (standing,) = con.execute("SELECT count(*) FROM events WHERE kind = 'remembered'").fetchone()
    finally:
        con.close()
    assert standing == 1


def test_a_session_is_per_thread_a_static_session_id_is_refused(world):
    """One middleware serves every thread of the agent: a static context holding a session_id
    would make a `remember session` decision in one thread stand in all of them, so it is
    refused. A callable context giving each thread its own session works: a decision remembered
    for thread A's session decides A's next notice, and thread B (same agent) is asked again."""
    from langgraph.config import get_config

    with pytest.raises(ValueError, match="session_id"):
        CountersignMiddleware(world.backend, reviewers=world.reviewers, context={"session_id": "s-1"})
    CountersignMiddleware(world.backend, reviewers=world.reviewers, context={"tenant": "acme"})  # no session: fine

    def per_thread(request):
        return {"session_id": "session-" + get_config()["configurable"]["thread_id"]}

    middleware = CountersignMiddleware(world.backend, reviewers=world.reviewers, context=per_thread)  # one, shared
    agent = world.agent(calls(("n1", "notify", {"to": "ann"})), calls(("n2", "notify", {"to": "bob"})), done(),
                        middleware=[middleware])
    cfg = config("thread-A")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "tell them"}]}, cfg))
    out = agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"), remember="session")), cfg)
    assert "__interrupt__" not in out and world.ran == [("notify", "ann"), ("notify", "bob")]
    other = world.agent(calls(("m1", "notify", {"to": "cyd"})), done(), middleware=[middleware])  # (call ids: new)
    review = review_of(other.invoke({"messages": [{"role": "user", "content": "tell cyd"}]}, config("thread-B")))
    assert review["tool"] == "notify" and ("notify", "cyd") not in world.ran  # another thread's session: asked
    world.close_and_verify()


def test_a_decision_the_rule_does_not_let_be_remembered_is_refused_whole(world):
    agent = world.agent(calls(("r1", "refund", {"order": 3, "amount": 5})), done())
    cfg = config("thread-no-remember")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "refund"}]}, cfg))
    assert review["remember"] == []  # refund's rule has no remember clause
    for bad, code in ((resume(review, "approve", token=world.token("sup-1"), remember="run"), "StandingDecision"),
                      (resume(review, "reject", token=world.token("sup-1"), reason="no", remember="run"),
                       "StandingDecision"),
                      (resume(review, "respond", token=world.token("sup-1"), message="x", remember="run"),
                       "invalid_decision"),
                      (resume(review, "approve", token=world.token("sup-1"), remember="run", pattern="same"),
                       "invalid_decision")):
        review = review_of(agent.invoke(Command(resume=bad), cfg))
        assert review["refused"]["code"] == code, bad
    state = world.gate.find(call_id="r1")
    assert world.ran == [] and state.status == "pending" and not state.approvals
    # wider than the rule allows: notify's `remember session` does not admit 8 hours
    agent = world.agent(calls(("n1", "notify", {"to": "ann"})), done())
    cfg = config("thread-too-wide")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "tell ann"}]}, cfg))
    review = review_of(agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"),
                                                          remember="8h")), cfg))
    assert review["refused"]["code"] == "StandingDecision" and world.ran == []
    world.close_and_verify()
    assert world.rows("SELECT count(*) AS n FROM events WHERE kind IN ('remembered', 'approved', 'rejected')") == [
        {"n": 0}]


def test_a_failing_tool_is_recorded_and_not_run_again(world):
    tries = []

    @tool
    def lookup(order: int) -> str:
        """Look up an order."""
        tries.append(order)
        raise ValueError("the order database is down")

    world.tools = [lookup]
    agent = world.agent(calls(("f1", "lookup", {"order": 5})), done())
    cfg = config("thread-f")
    with pytest.raises(ValueError, match="database is down"):  # LangChain's ToolNode raises it: so do we
        agent.invoke({"messages": [{"role": "user", "content": "look"}]}, cfg)
    out = agent.invoke(None, cfg)  # run again: the recorded failure answers, the tool does not run
    message = tool_messages(out)["f1"]
    assert tries == [5] and message.status == "error" and "database is down" in message.content
    world.close_and_verify()
    (row,) = world.rows("SELECT status, outcome, error FROM requests")
    assert row == {"status": "executed", "outcome": "error", "error": "ValueError: the order database is down"}


def test_an_ask_nobody_answers_in_time_expires_and_never_runs(tmp_path):
    from datetime import datetime, timezone

    from ledger.clock import ManualClock

    clock = ManualClock(datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc))
    world = World(tmp_path, clock=clock)
    agent = world.agent(calls(("e1", "refund", {"order": 1, "amount": 5})), done())
    cfg = config("thread-e")
    review = review_of(agent.invoke({"messages": [{"role": "user", "content": "refund"}]}, cfg))
    clock.advance(2 * 3600)  # the rule's timeout is an hour
    out = agent.invoke(Command(resume=resume(review, "approve", token=world.token("sup-1"))), cfg)
    message = tool_messages(out)["e1"]
    assert message.status == "error" and "not run" in message.content and world.ran == []
    assert message.response_metadata["countersign"]["status"] == "expired"
    world.close_and_verify()


def test_two_asks_in_one_turn_are_answered_by_interrupt_id(world):
    agent = world.agent(calls(("p1", "refund", {"order": 1, "amount": 1}), ("p2", "refund", {"order": 2, "amount": 2})),
                        done())
    cfg = config("thread-p")
    out = agent.invoke({"messages": [{"role": "user", "content": "two refunds"}]}, cfg)
    pending = {i.value["call_id"]: i for i in out["__interrupt__"]}
    assert sorted(pending) == ["p1", "p2"]
    out = agent.invoke(Command(resume={pending["p1"].id: resume(pending["p1"].value, "approve",
                                                                token=world.token("sup-1"))}), cfg)
    assert world.ran == [("refund", 1, 1)] and review_of(out)["call_id"] == "p2"  # the other still waits
    pending = {i.value["call_id"]: i for i in out["__interrupt__"]}
    out = agent.invoke(Command(resume={pending["p2"].id: resume(pending["p2"].value, "reject", token=world.token("sup-2"),
                                                                reason="One is enough.")}), cfg)
    got = tool_messages(out)
    assert world.ran == [("refund", 1, 1)] and got["p2"].content == "One is enough."
    world.close_and_verify()


def test_a_resume_under_another_calls_interrupt_id_decides_nothing(world):
    """Command(resume={id: value}) routes by interrupt id (a task and a position), not by
    request: p1's approval sent under p2's id is refused there, and p1 still waits."""
    agent = world.agent(calls(("q1", "refund", {"order": 1, "amount": 1}), ("q2", "refund", {"order": 1, "amount": 1})),
                        done())
    cfg = config("thread-q")
    out = agent.invoke({"messages": [{"role": "user", "content": "two refunds"}]}, cfg)
    pending = {i.value["call_id"]: i for i in out["__interrupt__"]}
    assert pending["q1"].value["digest"] == pending["q2"].value["digest"]  # the same arguments
    out = agent.invoke(Command(resume={pending["q2"].id: resume(pending["q1"].value, "approve",
                                                                token=world.token("sup-1"))}), cfg)
    again = {i.value["call_id"]: i.value for i in out["__interrupt__"]}
    assert again["q2"]["refused"]["code"] == "wrong_request" and world.ran == []
    assert all(not world.gate.get(p.value["request"]).approvals for p in pending.values())
    world.close_and_verify()
    assert [r["status"] for r in world.rows("SELECT status FROM requests")] == ["pending", "pending"]


def test_a_call_that_ran_but_whose_outcome_was_not_recorded_is_not_told_as_not_run(world):
    """attacks9 finding 5 for this adapter: the tool ran, the report of its outcome failed
    (OutcomeUnrecorded): the model gets the tool's real answer, never "did not run" (which
    would invite a retry under a new call id, a second real run)."""
    from adapters.backend import BackendError, _report

    class LosesReports(LocalBackend):
        def execute(self, request, fn, *, keep_result=False):
            started = self.start(request)

            def finish(request, **kwargs):
                raise BackendError("unreachable", "the service went away")

            return _report(finish, request, fn(started.args), None, keep_result)

    agent = world.agent(calls(("u1", "lookup", {"order": 9})), done(), backend=LosesReports(world.gate, "agent-1"))
    out = agent.invoke({"messages": [{"role": "user", "content": "look"}]}, config("thread-u"))
    message = tool_messages(out)["u1"]
    assert world.ran == [("lookup", 9)] and "shipped" in message.content and "did not run" not in message.content
    world.close_and_verify()
    (row,) = world.rows("SELECT status FROM requests")
    assert row == {"status": "executing"}  # never runs again
