"""One agent or reviewer process of tests/test_gate_processes.py (not a test module: run as a script).

    python tests/gate_process_worker.py LEDGER OUT ROLE SLOT INCARNATION SEED STEPS [--edits]

ROLE is `agent` or `reviewer`. The process opens one Gate on LEDGER (an agent's and an editing
reviewer's with the test policy, a plain reviewer's with none) and takes STEPS random steps chosen
by SEED. Every step the Gate acknowledged (returned without raising) is written to
OUT/acks-SLOT-INCARNATION.jsonl and fsync'd before the next step starts; a refusal (a Violation or
GateError) is written there too, with its code and message. The tool an agent executes writes one
fsync'd line to OUT/effects-SLOT-INCARNATION.jsonl, so runs can be counted after a SIGKILL.

After its steps the process prints `done` and waits for one line on stdin: `dump N` makes it
catch up once (`refresh`) and write its view of requests 1..N (`get(r, refresh=False)`) to
OUT/view-SLOT-INCARNATION.json, then print `dumped` and exit; anything else just exits.

The only Gate attribute read beyond its methods is `gate.ledger.head` (the Store interface's head,
issue 10 section 1): the seq and hash an acknowledged step ended at.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

import msgspec

from dsl import Policy
from ledger import Gate, GateError, Violation

POLICY_TEXT = """
policy "processes"
default ask "No rule covers this tool."
group sups = ["sup-1", "sup-2", "sup-3"]

allow read
deny drop reason "Never drop things."

ask quick
  reason "Anyone but the proposer checks it, within two seconds."
  timeout 2s
  id "quick"

ask pair
  reason "Two supervisors check it."
  approvers 2 from sups
  decisions approve, edit, reject, respond
  timeout 1h
  id "pair"
deny pair when args.amount > 1000 reason "Too big for an agent."

ask wire approvers 2 from sups timeout 1h id "wire-sups"
ask wire when args.amount > 100 approvers 1 from ["alice", "bob"] id "wire-owner"
"""
"""The test policy: allowed reads, denied drops, asks with a 2 s deadline (so expiry races the
reviewers), asks needing two supervisors, a tool under two quorums, and unknown tools (the
default ask)."""

QUICK_TIMEOUT_SECONDS = 2
TOOLS = ("read", "read", "read", "drop", "quick", "quick", "pair", "pair", "wire", "mystery")
REVIEWERS = ("sup-1", "sup-2", "sup-3", "alice", "bob", "agent")  # "agent" proposes the shared calls: self-approval
SHARED_CALL_IDS = 24  # call ids every agent draws from: repeats across processes


def policy() -> Policy:
    return Policy.from_text(POLICY_TEXT, "processes.policy")


def shared_call(n: int) -> tuple[str, dict]:
    """The tool and arguments of shared call id `call-n`: the same in every process, so a repeat
    is a duplicate (and two agents may both try to execute it)."""
    return TOOLS[n % len(TOOLS)], {"shared": n, "amount": 50 + 97 * n}


class Journal:
    """An append-only JSON Lines file, each line fsync'd before `write` returns."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, entry: dict) -> None:
        os.write(self.fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
        os.fsync(self.fd)


def head(gate: Gate) -> list | None:
    """The (seq, hash) this Gate's store ended its last commit at, when the store says."""
    found = getattr(getattr(gate, "ledger", None), "head", None)
    return list(found) if isinstance(found, tuple) else None


class Worker:
    def __init__(self, ledger: str, out: str, role: str, slot: int, incarnation: int, seed: int, edits: bool):
        self.role, self.slot, self.incarnation = role, slot, incarnation
        self.rng = random.Random(seed)
        self.edits = edits
        name = f"{slot}-{incarnation}"
        self.acks = Journal(os.path.join(out, f"acks-{name}.jsonl"))
        self.effects = Journal(os.path.join(out, f"effects-{name}.jsonl"))
        self.view_path = os.path.join(out, f"view-{name}.json")
        self.gate = Gate(policy() if role == "agent" or edits else None, ledger)
        self.known: dict[int, str] = {}  # request → status as last seen (agents: their calls; reviewers: what they listed)
        self.seen_digest: dict[int, str] = {}  # request → the argument digest this process last saw
        self.step_no = 0

    # --- journal ---------------------------------------------------------------------------

    def ack(self, op: str, request: int | None, *, appended: bool, **fields) -> None:
        self.acks.write({"ack": op, "request": request, "head": head(self.gate) if appended else None,
                         "step": self.step_no, "slot": self.slot, "inc": self.incarnation, **fields})

    def refused(self, op: str, request: int | None, exc: Exception, **fields) -> None:
        code = getattr(exc, "code", type(exc).__name__)
        self.acks.write({"refused": op, "request": request, "code": code, "message": str(exc),
                         "step": self.step_no, "slot": self.slot, "inc": self.incarnation, **fields})

    def tool(self, request: int):
        def run(args: dict):
            self.effects.write({"request": request, "args": args, "slot": self.slot, "inc": self.incarnation})
            return {"ran": request}

        return run

    # --- agents ----------------------------------------------------------------------------

    def agent_step(self) -> None:
        rng = self.rng
        pick = rng.random()
        if pick < 0.45 or not self.known:
            self.propose()
        elif pick < 0.75:
            self.execute()
        elif pick < 0.85:
            self.wait()
        elif pick < 0.92:
            request = rng.choice(sorted(self.known))
            who = f"agent-{self.slot}"
            self.guard("cancel", request, lambda: self.gate.cancel(request, by=who, reason="changed my mind"), who=who)
        else:
            self.look()

    def propose(self) -> None:
        rng = self.rng
        call_id, proposer = None, f"agent-{self.slot}"
        if rng.random() < 0.4:
            n = rng.randrange(SHARED_CALL_IDS)
            tool, args = shared_call(n)
            call_id, proposer = f"call-{n}", "agent"
            if rng.random() < 0.1:
                args = {**args, "amount": args["amount"] + 1}  # the id again with other arguments: CallIdConflict
        else:
            tool = rng.choice(TOOLS)
            args = {"amount": rng.choice((5, 50, 500, 5000)), "slot": self.slot, "step": self.step_no,
                    "inc": self.incarnation}
            if rng.random() < 0.2:
                call_id = f"own-{self.slot}-{self.incarnation}-{self.step_no}"
        try:
            p = self.gate.propose(tool, args, proposer=proposer, call_id=call_id, run=f"run-{self.slot}")
        except (Violation, GateError) as exc:
            self.refused("propose", None, exc, tool=tool, call_id=call_id, args=args)
            return
        self.known[p.request] = p.status
        self.seen_digest[p.request] = p.args_digest
        self.ack("propose", p.request, appended=not p.duplicate, tool=tool, args=args, call_id=call_id, proposer=proposer,
                 effect=p.effect, status=p.status, digest=p.args_digest, duplicate=p.duplicate)

    def execute(self) -> None:
        rng = self.rng
        runnable = [r for r, s in self.known.items() if s in ("allowed", "approved")]
        request = rng.choice(runnable) if runnable and rng.random() < 0.8 else rng.choice(sorted(self.known))
        try:
            done = self.gate.execute(request, self.tool(request), executor=f"agent-{self.slot}")
        except (Violation, GateError) as exc:
            self.refused("execute", request, exc)
            self.known[request] = "refused"
            return
        self.known[request] = "executed"
        self.ack("execute", request, appended=not done.replayed, outcome=done.outcome, replayed=done.replayed)

    def wait(self) -> None:
        waiting = [r for r, s in self.known.items() if s == "pending"]
        request = self.rng.choice(waiting) if waiting else self.rng.choice(sorted(self.known))
        state = self.gate.wait(request, timeout=self.rng.choice((0.0, 0.05, 0.3)))
        self.known[request] = state.status
        self.ack("wait", request, appended=False, status=state.status, decided_by=state.decided_by, decided_at=state.decided_at)

    def look(self) -> None:
        if self.rng.random() < 0.5:
            n = self.rng.randrange(SHARED_CALL_IDS)
            state = self.gate.find(call_id=f"call-{n}")
            if state is not None:
                self.known[state.request] = state.status  # another agent's call: two processes may execute it
                self.seen_digest[state.request] = state.digest
            self.ack("find", None if state is None else state.request, appended=False, call_id=f"call-{n}")
        else:
            for request in list(self.known):
                self.known[request] = self.gate.get(request, refresh=False).status
            self.gate.refresh()
            self.ack("refresh", None, appended=False)

    # --- reviewers -------------------------------------------------------------------------

    def reviewer_step(self) -> None:
        rng = self.rng
        pending = self.gate.pending()
        # Nobody looks at most quick asks in time (and at every third one never): they expire.
        forgotten = rng.random() < 0.9
        pending = [s for s in pending if s.tool != "quick" or not (forgotten or s.request % 3 == 0)]
        for state in pending:
            self.known[state.request] = state.status
            self.seen_digest.setdefault(state.request, state.digest)
        if rng.random() < 0.25 and self.known:
            request = rng.choice(sorted(self.known))  # perhaps long decided by now: a stale view
        elif pending:
            # The oldest half the time: every reviewer goes for it, on purpose.
            request = pending[0].request if rng.random() < 0.5 else rng.choice(pending).request
        else:
            time.sleep(0.01)
            return
        if rng.random() < 0.5:
            self.seen_digest[request] = self.gate.get(request, refresh=False).digest  # looked again
        digest = self.seen_digest.get(request)
        if rng.random() < 0.3:
            time.sleep(rng.uniform(0, 0.02))  # a person reads before deciding: others decide meanwhile
        who = rng.choice(REVIEWERS)
        pick = rng.random()
        gate = self.gate
        if pick < 0.55:
            self.guard("approve", request, lambda: gate.approve(request, approver=who, digest=digest), who=who, digest=digest)
        elif pick < 0.67 and self.edits:
            amount = rng.choice((7, 70, 700, 7000))  # 7000 on `pair`: the policy denies the edit
            self.guard("edit", request, lambda: gate.edit(request, editor=who, args={"amount": amount, "edited": True},
                                                            digest=digest, reason="adjusted"), who=who, digest=digest)
        elif pick < 0.8:
            self.guard("reject", request, lambda: gate.reject(request, approver=who, reason="not now", digest=digest), who=who)
        elif pick < 0.9:
            self.guard("respond", request, lambda: gate.respond(request, approver=who, message="done by hand", digest=digest), who=who)
        else:
            self.guard("cancel", request, lambda: gate.cancel(request, by=who, reason="withdrawn", digest=digest), who=who)

    def guard(self, op: str, request: int, step, **fields) -> None:
        try:
            state = step()
        except (Violation, GateError) as exc:
            self.refused(op, request, exc, **fields)
            return
        self.known[request] = state.status
        self.seen_digest[request] = state.digest
        self.ack(op, request, appended=True, status=state.status, digest_now=state.digest,
                 decided_by=state.decided_by, **fields)

    # --- the run ---------------------------------------------------------------------------

    def run(self, steps: int) -> None:
        step = self.agent_step if self.role == "agent" else self.reviewer_step
        for self.step_no in range(steps):
            step()
        print("done", flush=True)
        order = sys.stdin.readline().split()
        if order[:1] == ["dump"]:
            self.dump(int(order[1]))
            print("dumped", flush=True)
        self.gate.close()

    def dump(self, last: int) -> None:
        self.gate.refresh()
        view = {}
        for request in range(1, last + 1):
            try:
                view[request] = msgspec.to_builtins(self.gate.get(request, refresh=False))
            except Violation:  # not a proposal
                pass
        with open(self.view_path, "w", encoding="utf-8") as handle:
            json.dump(view, handle)


def main(argv: list[str]) -> None:
    ledger, out, role, slot, incarnation, seed, steps = argv[:7]
    worker = Worker(ledger, out, role, int(slot), int(incarnation), int(seed), "--edits" in argv[7:])
    worker.run(int(steps))


if __name__ == "__main__":
    if os.environ.get("COUNTERSIGN_TEST_SAVE_EVERY"):  # the snapshot saved every few events: its paths under load
        from ledger.workflow import gate as gate_module

        gate_module.SAVE_EVERY = int(os.environ["COUNTERSIGN_TEST_SAVE_EVERY"])
    main(sys.argv[1:])
