"""One process of tests/test_adapter_langgraph.py: a LangGraph graph whose node gates a refund
with adapters.langchain.countersign_call, checkpointed in SQLite (langgraph-checkpoint-sqlite).

    python langgraph_restart_worker.py DIR start            # runs until the interrupt; prints it
    python langgraph_restart_worker.py DIR resume TOKEN     # approves; dies right after the tool ran
    python langgraph_restart_worker.py DIR finish           # a new process resumes from the checkpoint

DIR holds the policy, the roster (tests/service_support.setup), the ledger, the checkpoint
database and ran.txt (one line per time the tool really ran). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict


class State(TypedDict, total=False):
    order: int
    status: str
    result: Any
    replayed: bool
    request: int
    after: bool


def main(directory: Path, step: str, token: str | None = None) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command

    from adapters.backend import LocalBackend
    from adapters.identity import RosterReviewers
    from adapters.langchain import countersign_call, resume
    from dsl import Policy
    from ledger import Gate
    from ledger.proof.roster import load_roster

    gate = Gate(Policy.load(directory / "files" / "test.policy"), directory / "ledger")
    backend = LocalBackend(gate, "agent-1")
    reviewers = RosterReviewers(load_roster(directory / "files" / "roster.toml"))

    def refund(args: dict) -> dict:
        with open(directory / "ran.txt", "a") as ran:
            ran.write(json.dumps(args) + "\n")
        return {"refunded": args["amount"], "order": args["order"]}

    def pay(state: State) -> State:
        done = countersign_call(backend, "refund", {"order": state["order"], "amount": 10}, refund,
                                reviewers=reviewers)
        if step == "resume" and done.ran and not done.replayed:
            os._exit(17)  # the tool ran; the process dies before LangGraph saves the step
        return {"status": done.status, "result": done.result, "replayed": done.replayed, "request": done.request}

    def after(state: State) -> State:
        return {"after": True}

    builder = StateGraph(State)
    builder.add_node("pay", pay)
    builder.add_node("after", after)
    builder.add_edge(START, "pay")
    builder.add_edge("pay", "after")
    builder.add_edge("after", END)
    connection = sqlite3.connect(directory / "checkpoints.sqlite", check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(connection))
    config = {"configurable": {"thread_id": "order-7"}}

    if step == "start":
        out = graph.invoke({"order": 7}, config)
    elif step == "resume":
        review = graph.get_state(config).interrupts[0].value
        out = graph.invoke(Command(resume=resume(review, "approve", token=token)), config)
    else:
        out = graph.invoke(None, config)
    pending = [i.value for i in out.get("__interrupt__", ())]
    print(json.dumps({"state": {k: v for k, v in out.items() if k != "__interrupt__"}, "interrupts": pending}))
    gate.close()
    connection.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], *sys.argv[3:])
