"""A ninth hostile review: the adapters (adapters/: LangChain / LangGraph, the MCP proxy, the
OpenAI Agents SDK, the Claude Agent SDK, the shared Backend) against the rules of the domain:
fail closed, run only the approved payload and only once, identities from authentication only,
kept results that verify, data minimality. Each finding is xfail (strict) until fixed: the test
asserts what the rule (or the adapter's own docs) promises, so it fails today."""

from __future__ import annotations

import asyncio

import pytest

from adapters.backend import LocalBackend
from adapters.identity import RosterReviewers
from dsl import Policy
from ledger import Gate
from ledger.proof.roster import load_roster
from service_support import setup

TWO_ASKS = """
policy "attacks9"
default deny "No rule covers this tool."
group sups = ["sup-1", "sup-2", "sup-3"]

allow lookup

ask read_file
  reason "A person checks reads."
  decisions approve, reject
  timeout 1h

ask delete_file
  reason "A person checks deletes."
  decisions approve, reject
  timeout 1h
"""


@pytest.fixture
def local(tmp_path):
    """(setup, gate, LocalBackend as agent-1, RosterReviewers) on a fresh ledger under TWO_ASKS."""
    s = setup(tmp_path / "files", TWO_ASKS)
    gate = Gate(Policy.from_text(TWO_ASKS, "t.policy"), tmp_path / "ledger")
    yield s, gate, LocalBackend(gate, "agent-1"), RosterReviewers(load_roster(s.roster))
    gate.close()


# --- LangGraph: a resume is matched to an interrupt by position, not by request ---------------

def test_a_node_re_run_never_applies_one_calls_approval_to_another_call(local, tmp_path):
    """HIGH. LangGraph hands a re-run node its earlier resumes by position (the n-th interrupt()
    of the task gets the n-th resume). A node gating two calls (read_file, then delete_file, of
    the same path: the same argument digest) interrupts for the read (resume 0: approve) and,
    on the re-run, for the delete (resume 1: reject). On the re-run after the rejection the read
    no longer interrupts (it is executed), so the delete's interrupt() is the task's first and
    gets resume 0 — the read's approval. `_decision_step` reads neither the resume's request nor
    its tool, only its digest, and the Gate's approval is bound to the argument digest alone, so
    sup-1's approval of the read is recorded as an approval of the delete: the delete runs though
    its reviewer rejected it, and the ledger says sup-1 approved it. Fix: put the request (and
    tool) in the REVIEW payload's resume (`resume()` does) and refuse a resume whose request is
    not the one interrupting; better, bind a decision's digest to the request (the Gate's
    approve could take the request's proposal seq, as signing's `basis` does)."""
    pytest.importorskip("langgraph")
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command
    from typing_extensions import TypedDict

    from adapters.langchain import countersign_call, resume

    s, gate, backend, who = local
    ran: list = []

    class St(TypedDict, total=False):
        path: str
        out: list

    def node(st):
        a = countersign_call(backend, "read_file", {"path": st["path"]},
                             lambda a: ran.append(("read", a)) or "contents", reviewers=who)
        b = countersign_call(backend, "delete_file", {"path": st["path"]},
                             lambda a: ran.append(("delete", a)) or "gone", reviewers=who)
        return {"out": [a.status, b.status]}

    g = StateGraph(St)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    graph = g.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t1"}}
    out = graph.invoke({"path": "/etc/app.conf"}, cfg)
    read = out["__interrupt__"][0].value
    assert read["tool"] == "read_file"
    out = graph.invoke(Command(resume=resume(read, "approve", token=s.tokens["sup-1"])), cfg)
    delete = out["__interrupt__"][0].value
    assert delete["tool"] == "delete_file"
    out = graph.invoke(Command(resume=resume(delete, "reject", token=s.tokens["sup-2"], reason="Never.")), cfg)

    assert ("delete", {"path": "/etc/app.conf"}) not in ran
    state = gate.get(delete["request"])
    assert state.status == "rejected" and state.decided_by == "sup-2"


# --- OpenAI Agents: the in-process reviewer sees the model's arguments, approves the ledger's --

def test_an_in_process_reviewer_approves_only_the_arguments_shown(tmp_path):
    """HIGH. `resolve` builds each Pending from the SDK item's arguments (what the model asked)
    but with `settled.args_digest`, the ledger's current digest. When someone edited the call in
    the inbox meanwhile (a quorum of two: the edit is one approval, the call still waits), the
    in-process reviewer is shown {"to": "acme"}, approves with the digest of {"to": "mallory"},
    and the Gate (rightly) takes that digest as what they saw: the wire goes to mallory on the
    strength of an approval whose reviewer never saw mallory. The digest binding is defeated by
    the adapter pairing stale arguments with a fresh digest. Fix: build Pending.args from the
    ledger (Backend.details / the request's current arguments) in the same read as the digest,
    as the LangChain adapter's REVIEW payload does."""
    pytest.importorskip("agents")
    from agents import Runner
    from test_adapter_openai_agents import Local, agent_for, call, say

    from adapters.openai_agents import Decision, resolve
    from ledger.digest import value_digest

    b = Local(tmp_path)
    ran: list = []
    shown: list = []
    agent, _model, _run = agent_for(b, [[call("wire", {"to": "acme", "amount": 900}, "c-wire")], [say("wired")]], ran)

    async def main():
        result = await Runner.run(agent, "pay acme")
        (state,) = b.gate.pending()
        # sup-3 edits the call in the web inbox (one of the two approvals the rule needs)
        b.gate.decide(state.request, "edit", by="sup-3", args={"to": "mallory", "amount": 900}, digest=state.digest)

        def review(pending):
            shown.append(pending)
            return Decision("approve", b.tokens["sup-1"])  # sup-1 approves what they were shown

        resumed = await resolve(result, review=review, reviewers=b.reviewers)
        await Runner.run(agent, resumed)

    try:
        asyncio.run(main())
    finally:
        b.close()
    (pending,) = shown
    assert value_digest(pending.args) == pending.args_digest, "the reviewer approved arguments they were not shown"
    assert ran in ([], [("wire", pending.args["to"], 900)])


# --- the MCP proxy ----------------------------------------------------------------------------

def test_the_wrapped_mcp_server_never_gets_the_proxys_countersign_token(monkeypatch):
    """MEDIUM (data minimality, a credential). `countersign mcp-proxy --url U --token-env VAR`
    reads the agent's bearer token from $VAR, then `open_gateway` starts the wrapped server
    with `env=dict(os.environ)`: the server (third-party code the proxy exists to distrust)
    inherits the token and can use the approval service as the agent: propose calls in its
    name, `start` an approved request before the proxy does (the real call is then refused as
    executing), report a forged outcome / kept result for the agent's requests, cancel its
    pending asks. The mcp SDK's own default is a short safe list (get_default_environment).
    Fix: drop the token variable (and every COUNTERSIGN_* variable) from the server's
    environment, or start from the SDK's default list plus what the operator names."""
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from contextlib import asynccontextmanager

    import adapters.mcp_proxy as proxy

    seen: dict = {}

    @asynccontextmanager
    async def fake_stdio_client(params, errlog=None):
        seen["env"] = dict(params.env or {})
        raise OSError("not started (test)")
        yield  # pragma: no cover

    monkeypatch.setenv("COUNTERSIGN_TOKEN", "cst_secret-agent-token")
    monkeypatch.setattr(proxy, "stdio_client", fake_stdio_client)

    async def main():
        with pytest.raises(proxy.ProxyError):
            async with proxy.open_gateway(["some-mcp-server"], backend=None):
                pass

    anyio.run(main)
    assert "cst_secret-agent-token" not in seen["env"].values()


def _init_result(server_name: str):
    from mcp import types

    return types.InitializeResult(protocol_version="2025-06-18", capabilities=types.ServerCapabilities(
        tools=types.ToolsCapability()), server_info=types.Implementation(name=server_name, version="1"))


def test_a_wrapped_mcp_server_cannot_choose_the_name_the_policy_judges_it_by():
    """MEDIUM. Without `--server-name`, the proxy proposes every call as
    `mcp__<serverInfo.name>__<tool>` with context {"server": serverInfo.name}: the name the
    wrapped server reports about itself in `initialize`. A third-party server (an `npx -y`
    package that updates itself) that calls itself "github" is judged by the rules a team wrote
    for the GitHub server (`allow mcp__github__*`), and `server_name_of` keeps `__`, so
    "github__admin" also lands inside another server's namespace. Claude Code takes the name
    from the user's own configuration, never from the server. Fix: require `--server-name`
    (or derive the default from the command the operator gave), never from serverInfo."""
    pytest.importorskip("mcp")
    from adapters.mcp_proxy import Gateway, ProxyError, ProxyOptions

    try:
        gateway = Gateway(upstream=None, init=_init_result("github"), backend=None, options=ProxyOptions())
    except (ProxyError, ValueError):
        return  # refusing to guess a name is a fix too
    assert not gateway.ledger_tool("merge_pull_request").startswith("mcp__github__")


# --- a tool that ran, and an outcome the service refuses ------------------------------------------

def test_a_call_that_ran_is_never_reported_to_the_model_as_not_run(tmp_path):
    """MEDIUM. ServiceBackend.execute runs the tool, then POSTs the whole result to
    /v1/requests/{id}/outcome even with keep_result=False (where only its digest is recorded).
    A result near or over 16 MiB (a file read, a page fetched; any upstream can return one) is
    refused with 413 body_too_large, so (1) the outcome is never recorded: the request stands
    "executing" for ever, contradicting "every call and its outcome is in the ledger"; and
    (2) the OpenAI Agents invoker (and LangChain's middleware, same `except BackendError`)
    tells the model "countersign did not run this call" although it ran, inviting a retry
    under a new call id: a second real run. Fix: send the digest (computed client side) when
    the result is not kept, or fall back to the digest alone on 413 as mcp_proxy._finish does
    for InvalidCall; and once `start` succeeded never say "did not run": say the outcome
    could not be recorded, and hand back the live result."""
    pytest.importorskip("agents")
    from agents import Agent, Runner, function_tool
    from service_process import Server
    from test_adapter_openai_agents import POLICY, ScriptedModel, call, say

    from adapters.backend import ServiceBackend
    from adapters.openai_agents import gate_tools

    s = setup(tmp_path / "svc", POLICY)
    ran: list = []

    @function_tool
    def lookup_order(order: int) -> str:
        """Look an order up (an allowed tool with a large answer)."""
        ran.append(order)
        return "x" * (17 * 1024 * 1024)

    with Server(s) as server:
        backend = ServiceBackend(server.url, s.tokens["agent-1"])
        model = ScriptedModel([[call("lookup_order", {"order": 7}, "c-big")], [say("ok")]])
        agent = gate_tools(Agent(name="a", model=model, tools=[lookup_order]), backend, run="r-big")
        asyncio.run(Runner.run(agent, "look order 7 up"))
        settled = backend.find("r-big/c-big")
        backend.close()
    assert ran == [7]
    told = model.tool_outputs()["c-big"]
    assert "did not run" not in told, told
    assert settled.status == "executed"


def test_the_unauthenticated_mcp_listener_refuses_a_non_loopback_address(tmp_path):
    """MEDIUM (fail closed). `--listen HOST:PORT` serves tools/call with no authentication: every
    caller proposes as the proxy's proposer. The docs say "keep it on 127.0.0.1", but the CLI
    takes `--listen 0.0.0.0:8765` (or a LAN address) and starts: anyone on the network calls the
    tools as the agent, and since the mcp SDK turns its DNS-rebinding check (Host / Origin) on
    only for 127.0.0.1, localhost and ::1, even a browser page can reach it. A typo or a
    container default should fail closed. Fix: refuse a non-loopback HOST (usage error) unless
    authentication is configured, or an explicit --insecure-listen names the risk."""
    pytest.importorskip("typer")
    from typer.testing import CliRunner

    from cli.main import app
    from cli.output import EXIT_USAGE

    (tmp_path / "p.policy").write_text('policy "x"\ndefault deny "no"\n')
    result = CliRunner().invoke(app, ["mcp-proxy", "--policy", str(tmp_path / "p.policy"), "--ledger",
                                      str(tmp_path / "ledger"), "--listen", "0.0.0.0:0", "--",
                                      str(tmp_path / "no-such-server")])
    assert result.exit_code == EXIT_USAGE, result.output  # refused before anything starts
