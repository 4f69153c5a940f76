"""adapters.langchain.countersign_call in a plain LangGraph graph with a SQLite checkpointer,
across real processes: the first runs until the review interrupt and exits; the second resumes
with an approval, runs the tool and dies before LangGraph saves the step; the third resumes from
the checkpoint and gets the kept result from the ledger, the tool not running again. Also the
helper's deny and reject in one process (InMemorySaver), sync and async."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from adapters.backend import LocalBackend  # noqa: E402
from adapters.identity import RosterReviewers  # noqa: E402
from adapters.langchain import Gated, acountersign_call, countersign_call, resume  # noqa: E402
from dsl import Policy  # noqa: E402
from langchain_support import POLICY_TEXT  # noqa: E402
from ledger import Gate, verify  # noqa: E402
from ledger.analytics.views import connect  # noqa: E402
from ledger.proof.roster import load_roster  # noqa: E402
from service_process import ENV, ROOT, TESTS  # noqa: E402
from service_support import setup  # noqa: E402


def worker(directory, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TESTS / "langgraph_restart_worker.py"), str(directory), *args],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)


def test_a_restarted_process_resumes_from_the_checkpoint_and_gets_the_recorded_result(tmp_path):
    s = setup(tmp_path / "files", POLICY_TEXT)
    first = worker(tmp_path, "start")
    assert first.returncode == 0, first.stderr
    (review,) = json.loads(first.stdout)["interrupts"]
    assert review["tool"] == "refund" and review["args"] == {"order": 7, "amount": 10} and review["run"] == "order-7"

    second = worker(tmp_path, "resume", s.tokens["sup-1"])
    assert second.returncode == 17, second.stderr  # died right after the tool ran
    assert len((tmp_path / "ran.txt").read_text().splitlines()) == 1

    third = worker(tmp_path, "finish")
    assert third.returncode == 0, third.stderr
    state = json.loads(third.stdout)["state"]
    assert state["status"] == "executed" and state["replayed"] is True and state["after"] is True
    assert state["result"] == {"refunded": 10, "order": 7}
    assert len((tmp_path / "ran.txt").read_text().splitlines()) == 1  # the tool ran once in all

    assert verify(tmp_path / "ledger").ok
    con = connect(tmp_path / "ledger")
    (row,) = con.execute("SELECT request, status, outcome, decided_by, run, call_id FROM requests").fetchall()
    assert row[:5] == (state["request"], "executed", "ok", "sup-1", "order-7")
    assert row[5].startswith("order-7:pay:") and row[5].endswith(":refund")
    (started,) = con.execute("SELECT count(*) FROM events WHERE kind = 'execution_started'").fetchone()
    assert started == 1


class State(TypedDict, total=False):
    tool: str
    args: dict
    outcome: dict


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_helper_answers_a_deny_and_a_rejection_without_running(tmp_path, mode):
    s = setup(tmp_path / "files", POLICY_TEXT)
    gate = Gate(Policy.from_text(POLICY_TEXT, "t.policy"), tmp_path / "ledger")
    backend = LocalBackend(gate, "agent-1")
    reviewers = RosterReviewers(load_roster(s.roster))
    ran = []

    def fn(args):
        ran.append(args)
        return "done"

    def as_dict(done: Gated) -> dict:
        return {"status": done.status, "message": done.message, "result": done.result, "by": done.decided_by}

    def node(state: State) -> State:
        return {"outcome": as_dict(countersign_call(backend, state["tool"], state["args"], fn, reviewers=reviewers))}

    async def anode(state: State) -> State:
        async def afn(args):
            return fn(args)

        return {"outcome": as_dict(await acountersign_call(backend, state["tool"], state["args"], afn,
                                                           reviewers=reviewers))}

    builder = StateGraph(State)
    builder.add_node("gated", node if mode == "sync" else anode)
    builder.add_edge(START, "gated")
    builder.add_edge("gated", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    def invoke(value, thread):
        cfg = {"configurable": {"thread_id": thread}}
        return graph.invoke(value, cfg) if mode == "sync" else asyncio.run(graph.ainvoke(value, cfg))

    out = invoke({"tool": "delete_account", "args": {"user": "bob"}}, "t-deny")
    assert out["outcome"]["status"] == "denied" and "never by the agent" in out["outcome"]["message"]
    out = invoke({"tool": "refund", "args": {"order": 1, "amount": 2}}, "t-reject")
    review = out["__interrupt__"][0].value
    out = invoke(Command(resume=resume(review, "reject", token=s.tokens["sup-2"], reason="Not this one.")), "t-reject")
    assert out["outcome"] == {"status": "rejected", "message": "Not this one.", "result": None, "by": "sup-2"}
    out = invoke({"tool": "lookup", "args": {"order": 1}}, "t-allow")
    assert out["outcome"]["status"] == "executed" and out["outcome"]["result"] == "done"
    assert ran == [{"order": 1}]
    gate.close()
    assert verify(tmp_path / "ledger").ok


@pytest.mark.parametrize("keep", [True, False])
def test_a_node_gating_two_calls_gets_the_first_result_back_only_when_kept(tmp_path, keep):
    """The node re-runs from its start on the second call's resume: the first call (allowed,
    ran) is replayed, its result from the ledger when kept (the default), else None with
    result_kept False; the tool runs once either way."""
    s = setup(tmp_path / "files", POLICY_TEXT)
    gate = Gate(Policy.from_text(POLICY_TEXT, "t.policy"), tmp_path / "ledger")
    backend = LocalBackend(gate, "agent-1")
    reviewers = RosterReviewers(load_roster(s.roster))
    ran = []
    seen = []

    def node(state: State) -> State:
        first = countersign_call(backend, "lookup", {"order": 1}, lambda a: ran.append(a) or {"shipped": True},
                                 reviewers=reviewers, keep_result=keep)
        seen.append((first.result, first.replayed, first.result_kept))
        second = countersign_call(backend, "refund", {"order": 1, "amount": 2}, lambda a: "refunded",
                                  reviewers=reviewers, keep_result=keep)
        return {"outcome": {"first": first.result, "second": second.status}}

    builder = StateGraph(State)
    builder.add_node("gated", node)
    builder.add_edge(START, "gated")
    builder.add_edge("gated", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t-two"}}
    review = graph.invoke({}, cfg)["__interrupt__"][0].value
    out = graph.invoke(Command(resume=resume(review, "approve", token=s.tokens["sup-1"])), cfg)
    assert ran == [{"order": 1}] and out["outcome"]["second"] == "executed"
    assert seen == [({"shipped": True}, False, keep), ({"shipped": True} if keep else None, True, keep)]
    gate.close()
    assert verify(tmp_path / "ledger").ok
