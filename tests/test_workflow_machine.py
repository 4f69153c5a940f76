"""Random sequences of workflow steps (a hypothesis state machine) never execute a call without
its approvals, never run a call twice, and always run it with the approved arguments.

The invariants are checked by an audit written here from the rules, independently of
ledger.workflow.machine, over the events the Gate actually stored.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from ledger import events as ev
from ledger.clock import ManualClock
from ledger.workflow.gate import GateError
from ledger.store.log import LedgerReader
from ledger.proof.verify import verify
from ledger.workflow.machine import Violation
from support import START, gate

PEOPLE = ["agent", "alice", "bob", "sup-1", "sup-2", "sup-3"]
TOOLS = ["read_thing", "drop_thing", "small_change", "big_change", "wire", "unlisted_tool"]


def admits(requirements, who: str) -> bool:
    return any(q.approvers is None or who in q.approvers for q in requirements.quorums)


def audit(path: Path) -> dict[int, int]:
    """Replay the stored events with the rules written out plainly; return executions per request."""
    requests: dict[int, dict] = {}
    started: dict[int, int] = {}
    for record in LedgerReader(path).records():
        e, kind = record.event, record.event.__struct_config__.tag
        if kind == "proposed":
            requests[record.seq] = {"proposer": e.proposer, "effect": e.effect, "digest": e.args_digest,
                                    "approvals": set(), "requirements": None, "deadline": None}
            continue
        if kind in ("genesis", "recovered"):
            continue
        r = requests[e.request]
        if kind == "interrupted":
            assert r["effect"] == "ask"
            r["requirements"], r["deadline"] = e.requirements, e.deadline
        elif kind in ("approved", "edited", "rejected", "responded"):
            who = e.editor if kind == "edited" else e.approver
            assert who != r["proposer"], "the proposer decided its own call"
            assert e.ts < r["deadline"], "a decision after the deadline"
            assert admits(r["requirements"], who), "a decision by someone no quorum admits"
            if kind == "approved":
                assert e.args_digest == r["digest"]
                r["approvals"].add(who)
            elif kind == "edited":
                r["digest"], r["requirements"] = e.args_digest, e.requirements
                r["approvals"] = {who} if admits(e.requirements, who) else set()
        elif kind == "expired":
            assert e.ts >= r["deadline"], "expired before the deadline"
        elif kind == "execution_started":
            started[e.request] = started.get(e.request, 0) + 1
            assert started[e.request] == 1, "a call started twice"
            assert e.args_digest == r["digest"], "ran with other arguments than approved"
            if r["effect"] != "allow":
                assert r["effect"] == "ask", "a denied call ran"
                for q in r["requirements"].quorums:
                    counted = {a for a in r["approvals"] if q.approvers is None or a in q.approvers}
                    assert len(counted) >= q.count, "ran without one of its quorums"
    return started


class Workflow(RuleBasedStateMachine):
    requests = Bundle("requests")

    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.clock = ManualClock(START)
        self.gate = gate(self.dir / "l", self.clock)
        self.runs: dict[int, list[dict]] = {}
        self.expected_args: dict[int, dict] = {}

    def teardown(self):
        self.gate.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def attempt(self, fn, *args, **kwargs):
        head = self.gate.ledger.head
        try:
            return fn(*args, **kwargs)
        except (Violation, GateError):
            # a refused step appends nothing of its own; the step first expired what was due
            added = list(self.gate.ledger.records(head[0] + 1))
            assert all(type(r.event).__name__ == "Expired" for r in added), "a refused step appended something"
            return None

    @rule(target=requests, tool=st.sampled_from(TOOLS), amount=st.sampled_from([1, 500, 2000]),
          proposer=st.sampled_from(["agent", "sup-1"]))
    def propose(self, tool, amount, proposer):
        p = self.gate.propose(tool, {"amount": amount}, proposer=proposer)
        self.expected_args[p.request] = {"amount": amount}
        return p.request

    @rule(request=requests, who=st.sampled_from(PEOPLE), current=st.booleans())
    def approve(self, request, who, current):
        digest = self.gate.get(request).digest if current else self.gate.get(request).original_digest
        self.attempt(self.gate.approve, request, approver=who, digest=digest)

    @rule(request=requests)
    def approve_until_the_quorum_is_met(self, request):
        for who in ["sup-1", "sup-2", "alice", "sup-3", "bob"]:  # for a large wire: sups and alice
            state = self.gate.get(request)
            if state.status != "pending":
                break
            self.attempt(self.gate.approve, request, approver=who, digest=state.digest)

    @rule(request=requests, who=st.sampled_from(PEOPLE), amount=st.sampled_from([2, 400, 5000]))
    def edit(self, request, who, amount):
        if self.attempt(self.gate.edit, request, editor=who, args={"amount": amount}) is not None:
            self.expected_args[request] = {"amount": amount}
            event("an edit was accepted")

    @rule(request=requests, who=st.sampled_from(PEOPLE))
    def reject(self, request, who):
        self.attempt(self.gate.reject, request, approver=who, reason="not now")

    @rule(request=requests, who=st.sampled_from(PEOPLE))
    def respond(self, request, who):
        self.attempt(self.gate.respond, request, approver=who, message="answered")

    @rule(request=requests)
    def cancel(self, request):
        self.attempt(self.gate.cancel, request, by="agent")

    @rule(seconds=st.sampled_from([60, 3600, 5 * 3600, 30 * 3600]))
    def wait(self, seconds):
        self.clock.advance(seconds)

    @rule()
    def expire(self):
        self.gate.expire()

    @rule(request=requests)
    def execute(self, request):
        def tool(args):
            self.runs.setdefault(request, []).append(args)
            return {"ok": True}

        result = self.attempt(self.gate.execute, request, tool)
        if result is not None and not result.replayed:
            event(f"ran a call whose effect was {self.gate.get(request).effect}")

    @rule()
    def restart(self):
        self.gate.close()
        self.gate = gate(self.dir / "l", self.clock)

    @invariant()
    def history_is_lawful_and_each_call_ran_at_most_once_with_its_approved_arguments(self):
        started = audit(self.dir / "l")
        for request, runs in self.runs.items():
            assert len(runs) == 1, "the tool ran more than once"
            assert runs[0] == self.expected_args[request]
            assert started.get(request) == 1
        assert verify(self.dir / "l").ok

    @invariant()
    def the_index_of_pending_requests_is_the_pending_requests(self):
        workflow = self.gate.workflow
        assert workflow.pending == {r: s for r, s in workflow.requests.items() if s.status == "pending"}


Workflow.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_workflow_state_machine = Workflow.TestCase


def test_every_event_kind_is_a_leaf_class_and_those_that_step_a_request_name_it():
    """Workflow.check and apply find a kind by its class (`type(event) in _NOT_OF_A_REQUEST`):
    that holds while no event class has a subclass, and the kinds outside the set are exactly
    those with a `request` member."""
    from ledger.workflow.machine import _NOT_OF_A_REQUEST

    kinds = ev.Event.__subclasses__()
    assert len(kinds) >= 18
    for kind in kinds:
        assert kind.__subclasses__() == [], kind
        assert (kind not in _NOT_OF_A_REQUEST) == ("request" in kind.__struct_fields__), kind
