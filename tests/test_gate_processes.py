"""Issue 10 section 5: many agent and reviewer processes on one ledger, killed at random, and what
must hold after every run.

K agent processes propose (allowed, denied, asks; with call ids, some shared by every agent, so
repeats and two executions of one call happen across processes), execute what may run (a tool
whose effect is an fsync'd line in a per-process file), wait and cancel; M reviewer processes
approve with the digest they saw, edit, reject, respond and cancel at random, going for the
oldest request together half the time, so they race on purpose. The coordinator SIGKILLs any of
them at random moments and starts a new process in its place. Each process journals every step
its Gate acknowledged (and every refusal) in an fsync'd file before going on
(tests/gate_process_worker.py). After the run:

- the ledger verifies, and its seqs are gapless;
- no request was started twice, nor without its quorum: the quorum and the approvals are read from
  the ledger's own events by a fold written here, independent of ledger.workflow;
- every acknowledged step is in the ledger, at the seq and hash the Gate ended it at;
- every effect line has an execution_started of that request with the arguments the tool got,
  each request's tool ran at most once, and every outcome "ok" has its effect line;
- every surviving process's view (after one catch-up) is exactly what a fresh Gate replays, and
  the independent fold gives every request the same status;
- a reviewer refused because someone else decided first is told who decided and when, and the
  ledger holds that decision.

Each run draws a random seed and names it when it fails; COUNTERSIGN_SEED=N replays its choices
(the processes' interleaving is the scheduler's). `make test` runs one short run (3 agents, 3
reviewers, 120 steps each, 5 kills; about 10 s); COUNTERSIGN_LONG_TESTS=1 runs four of 4 agents,
4 reviewers, 400 steps and 40 kills each.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from ledger import Gate, LedgerReader, verify
from ledger import events as ev
from gate_process_worker import QUICK_TIMEOUT_SECONDS

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("gate_process_worker.py")

LONG = os.environ.get("COUNTERSIGN_LONG_TESTS", "") not in ("", "0")
SEED = int(os.environ.get("COUNTERSIGN_SEED") or random.randrange(2**31))
SHORT = dict(agents=3, reviewers=3, steps=120, kills=5)
LONG_RUN = dict(agents=4, reviewers=4, steps=400, kills=40)


# --- running the processes ----------------------------------------------------------------------


class Slot:
    """One agent or reviewer place; a killed process is replaced by a new incarnation."""

    def __init__(self, number: int, role: str):
        self.number, self.role, self.incarnation = number, role, 0
        self.proc: subprocess.Popen | None = None
        self.done = False


class Run:
    """Start the processes, kill some at random, collect their views. `rng` decides everything
    that is not the scheduler's."""

    def __init__(self, ledger: Path, out: Path, seed: int, *, agents: int, reviewers: int, steps: int, kills: int,
                 save_every: int | None = None):
        self.ledger, self.out, self.steps, self.kills = ledger, out, steps, kills
        self.rng = random.Random(seed)
        self.lines: queue.Queue = queue.Queue()
        self.slots = [Slot(i, "agent") for i in range(agents)] + [Slot(agents + i, "reviewer") for i in range(reviewers)]
        self.killed: list[tuple[int, int]] = []
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(WORKER.parent)])}
        if save_every is not None:
            self.env["COUNTERSIGN_TEST_SAVE_EVERY"] = str(save_every)

    def start(self, slot: Slot) -> None:
        slot.done = False
        args = [sys.executable, str(WORKER), str(self.ledger), str(self.out), slot.role, str(slot.number),
                str(slot.incarnation), str(self.rng.randrange(2**31)), str(self.steps)]
        if slot.role == "reviewer" and slot.number % 2 == 0:
            args.append("--edits")
        err = open(self.out / f"stderr-{slot.number}-{slot.incarnation}.txt", "wb")
        slot.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=ROOT,
                                     env=self.env, text=True)
        err.close()
        proc, incarnation = slot.proc, slot.incarnation

        def read() -> None:
            for line in proc.stdout:
                self.lines.put((slot.number, incarnation, line.strip()))

        threading.Thread(target=read, daemon=True).start()

    def stderr(self, slot: Slot) -> str:
        return (self.out / f"stderr-{slot.number}-{slot.incarnation}.txt").read_text(errors="replace")[-4000:]

    def collect(self, timeout: float) -> None:
        """Note the `done` lines that arrived within `timeout` seconds; fail on a process that died."""
        try:
            number, incarnation, line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line == "done" and self.slots[number].incarnation == incarnation:
            self.slots[number].done = True
        for slot in self.slots:
            code = slot.proc.poll()
            if code is not None and not slot.done:
                raise AssertionError(f"{slot.role} {slot.number}.{slot.incarnation} exited {code}:\n{self.stderr(slot)}")

    def go(self, deadline_seconds: float) -> list[tuple[int, int]]:
        """Run to the end; return the (slot, incarnation) of the processes that dumped a view."""
        began = time.monotonic()
        give_up = began + deadline_seconds
        try:
            for slot in self.slots:
                self.start(slot)
            # Kill moments spread over the time the first incarnations are expected to take.
            moments = sorted(self.rng.uniform(0.5, 0.5 + self.steps * 0.03) for _ in range(self.kills))
            while not all(s.done for s in self.slots):
                assert time.monotonic() < give_up, "the run did not finish in time (a process hangs?)"
                if moments and time.monotonic() - began >= moments[0]:
                    moments.pop(0)
                    running = [s for s in self.slots if not s.done]
                    victim = running[self.rng.randrange(len(running))]
                    victim.proc.send_signal(signal.SIGKILL)
                    victim.proc.wait()
                    self.killed.append((victim.number, victim.incarnation))
                    victim.incarnation += 1
                    self.start(victim)
                self.collect(0.02)
            # Let the 2 s deadlines pass and expire them all, so that no step is due while the
            # survivors catch up one by one and dump what they see.
            time.sleep(QUICK_TIMEOUT_SECONDS + 0.3)
            with Gate(None, self.ledger) as last:
                last.refresh()
            head = sum(1 for _ in LedgerReader(self.ledger).records())
            for slot in self.slots:
                slot.proc.stdin.write(f"dump {head}\n")
                slot.proc.stdin.flush()
            for slot in self.slots:
                slot.proc.wait(timeout=max(1.0, give_up - time.monotonic()))
                assert slot.proc.returncode == 0, f"{slot.role} {slot.number}: {self.stderr(slot)}"
            return [(s.number, s.incarnation) for s in self.slots]
        finally:
            for slot in self.slots:
                if slot.proc is not None and slot.proc.poll() is None:
                    slot.proc.kill()
                    slot.proc.wait()


# --- what the ledger says, folded independently -------------------------------------------------


class Request:
    """A request as this file's own fold sees it (no ledger.workflow code)."""

    def __init__(self, event: ev.Proposed, args: dict):
        self.tool, self.effect, self.proposer, self.call_id = event.tool, event.effect, event.proposer, event.call_id
        self.digest, self.args = event.args_digest, args
        self.status = {"allow": "allowed", "deny": "denied", "ask": "interrupting"}[event.effect]
        self.requirements = None
        self.approvals: set[str] = set()
        self.started = 0
        self.outcome: str | None = None
        # (verb, who, ts) as a lost race names them; a policy's deny is "decided" when proposed
        self.decisions: list[tuple[str, str | None, str]] = [("decided", None, event.ts)] if event.effect == "deny" else []

    def quorum_met(self) -> bool:
        """Every quorum of the requirements in force counts enough distinct approvers of the current
        arguments that it admits (dsl/requirements.py: Quorum.approvers None admits anyone)."""
        return all(
            sum(1 for who in self.approvals if q.approvers is None or who in q.approvers) >= q.count
            for q in self.requirements.quorums
        )


def fold(records: list) -> dict[int, Request]:
    """Fold the ledger's events into Requests, asserting as it goes what the run must never
    show: a start without the quorum or with other arguments, a second start, an outcome without
    a start."""
    requests: dict[int, Request] = {}
    for record in records:
        e = record.event
        if isinstance(e, ev.Proposed):
            requests[record.seq] = Request(e, (record.data_value() or {}).get("args"))
            continue
        r = requests.get(getattr(e, "request", None))
        if r is None:
            continue
        if isinstance(e, ev.Interrupted):
            r.requirements, r.status = e.requirements, "pending"
        elif isinstance(e, ev.Approved):
            assert e.args_digest == r.digest, (record.seq, "an approval of other arguments than the current ones")
            r.approvals.add(e.approver)
            if r.status == "pending" and r.quorum_met():
                r.status = "approved"
                r.decisions.append(("approved", e.approver, e.ts))
        elif isinstance(e, ev.Edited):
            r.digest, r.args, r.requirements = e.args_digest, record.data_value()["args"], e.requirements
            r.approvals = {e.editor} if any(q.approvers is None or e.editor in q.approvers for q in e.requirements.quorums) else set()
            if r.quorum_met():
                r.status = "approved"
                r.decisions.append(("approved", e.editor, e.ts))
        elif isinstance(e, (ev.Rejected, ev.Responded, ev.Cancelled, ev.Expired)):
            verb, who = {ev.Rejected: ("rejected", "approver"), ev.Responded: ("answered", "approver"),
                         ev.Cancelled: ("cancelled", "by"), ev.Expired: ("expired", None)}[type(e)]
            r.status = {"answered": "responded"}.get(verb, verb)
            r.decisions.append((verb, getattr(e, who) if who else None, e.ts))
        elif isinstance(e, ev.ExecutionStarted):
            assert r.started == 0, (record.seq, "a request started twice")
            if r.effect == "allow":
                assert r.status == "allowed", (record.seq, r.status)
            else:
                assert r.requirements is not None and r.quorum_met(), (record.seq, "started without its quorum")
                assert r.status == "approved", (record.seq, r.status)
            assert e.args_digest == r.digest, (record.seq, "started with other arguments than approved")
            r.started, r.status = 1, "executing"
        elif isinstance(e, ev.Executed):
            assert r.status == "executing", (record.seq, "an outcome without a start")
            r.status, r.outcome = "executed", e.outcome
    return requests


# --- the checks -------------------------------------------------------------------------------


def journal(path: Path) -> list[dict]:
    """The entries of a journal; a last line a SIGKILL cut short is not one."""
    text = path.read_text(encoding="utf-8")
    entries = []
    for line in text.splitlines(keepends=True):
        if line.endswith("\n"):
            entries.append(json.loads(line))
    return entries


ACTOR = {"approve": (ev.Approved, "approver"), "edit": (ev.Edited, "editor"), "reject": (ev.Rejected, "approver"),
         "respond": (ev.Responded, "approver"), "cancel": (ev.Cancelled, "by")}
NAMED = re.compile(r"\((approved|rejected|answered|expired|cancelled|decided) (?:by (.+) )?at (\S+)\)$")


def check_ack(ack: dict, records: list, requests: dict[int, Request]) -> None:
    op, request, at = ack["ack"], ack["request"], ack["head"]
    if at is not None:  # the step appended: the Gate's head is the step's last event, still there
        seq, digest = at
        assert seq <= len(records) and records[seq - 1].hash == digest, ("an acknowledged step is not where it was", ack)
        last = records[seq - 1].event
    if op == "propose":
        proposed = records[request - 1]
        assert isinstance(proposed.event, ev.Proposed), ack
        e = proposed.event
        assert (e.tool, e.call_id, e.proposer, e.effect) == (ack["tool"], ack["call_id"], ack["proposer"], ack["effect"]), ack
        assert proposed.data_value()["args"] == ack["args"], ack
        if not ack["duplicate"]:  # a repeat answers with the current digest, perhaps an edit's
            assert e.args_digest == ack["digest"], ack
        if at is not None:
            assert (seq == request) if e.effect != "ask" else (seq == request + 1 and isinstance(last, ev.Interrupted)
                                                                and last.request == request), ack
    elif op in ACTOR:
        kind, field = ACTOR[op]
        assert isinstance(last, kind) and last.request == request and getattr(last, field) == ack["who"], (ack, last)
        if op == "approve":
            assert last.args_digest == ack["digest"], ack
        if op == "edit":
            assert last.replaces == ack["digest"], ack
    elif op == "execute":
        r = requests[request]
        assert r.started == 1 and r.status == "executed" and r.outcome == ack["outcome"], (ack, r.status)
        if at is not None:
            assert isinstance(last, ev.Executed) and last.request == request, ack
    elif op == "wait":
        final = ("denied", "rejected", "responded", "expired", "cancelled", "executed")
        if ack["status"] in final:
            assert requests[request].status == ack["status"], (ack, requests[request].status)


def check_refusal(entry: dict, requests: dict[int, Request], reviewer: bool) -> None:
    """A step refused because the request is no longer pending names who decided and when."""
    if entry.get("code") not in ("request-final", "not-pending") or entry["request"] is None:
        return
    r = requests[entry["request"]]
    named = NAMED.search(entry["message"])
    if reviewer:  # a reviewer only decides requests it saw pending, so someone decided them
        assert named, ("a lost race does not say who decided", entry)
    if named:
        verb, who, ts = named.groups()
        assert (verb, who, ts) in r.decisions, ("the refusal names a decision the ledger does not hold", entry, r.decisions)


def check_run(ledger: Path, out: Path, survivors: list[tuple[int, int]], reviewers: set[int]) -> dict:
    report = verify(ledger)
    assert report.ok, report.problem
    records = list(LedgerReader(ledger).records())
    assert [r.seq for r in records] == list(range(1, len(records) + 1)), "seqs have a gap"
    requests = fold(records)

    acks = refusals = 0
    for path in sorted(out.glob("acks-*.jsonl")):
        slot = int(path.stem.split("-")[1])
        for entry in journal(path):
            if "ack" in entry:
                acks += 1
                check_ack(entry, records, requests)
            else:
                refusals += 1
                check_refusal(entry, requests, slot in reviewers)

    runs: Counter = Counter()
    for path in sorted(out.glob("effects-*.jsonl")):
        for effect in journal(path):
            r = requests[effect["request"]]
            assert r.started == 1, ("the tool ran without an execution_started", effect)
            assert effect["args"] == r.args, ("the tool ran with other arguments than were approved", effect, r.args)
            runs[effect["request"]] += 1
    assert all(n == 1 for n in runs.values()), ("a tool ran twice", [r for r, n in runs.items() if n > 1])
    for request, r in requests.items():
        if r.outcome == "ok":
            assert runs[request] == 1, ("an outcome ok without its effect", request)

    with Gate(None, ledger) as fresh:
        replayed = {str(request): msgspec.to_builtins(fresh.get(request, refresh=False)) for request in requests}
    for request, r in requests.items():
        status = replayed[str(request)]["status"]
        assert r.status == status, ("the independent fold and the Gate disagree", request, r.status, status)
    for number, incarnation in survivors:
        view = json.loads((out / f"view-{number}-{incarnation}.json").read_text())
        assert view.keys() == replayed.keys(), (number, incarnation)
        for request, state in view.items():
            assert json.loads(json.dumps(replayed[request])) == state, ("a survivor's view differs", number, request)
    statuses = Counter(r.status for r in requests.values())
    return {"events": len(records), "acks": acks, "refusals": refusals, "runs": sum(runs.values()), **statuses}


def run_once(tmp: Path, seed: int, **shape) -> dict:
    ledger, out = tmp / "ledger", tmp / "out"
    out.mkdir(parents=True)
    run = Run(ledger, out, seed, **shape)
    Gate(None, ledger).close()  # created before anyone starts: every process joins one ledger
    survivors = run.go(deadline_seconds=600 if LONG else 150)
    reviewers = {s.number for s in run.slots if s.role == "reviewer"}
    summary = check_run(ledger, out, survivors, reviewers)
    summary["killed"] = len(run.killed)
    return summary


@pytest.mark.parametrize("save_every", [None, 3], ids=["saves-rarely", "saves-every-3-events"])
def test_agents_and_reviewers_in_many_processes_killed_at_random_keep_one_lawful_ledger(tmp_path, save_every):
    seeds = [SEED] if not LONG else [SEED] + [random.Random(SEED).randrange(2**31) + i for i in range(1, 4)]
    for i, seed in enumerate(seeds):
        try:
            summary = run_once(tmp_path / str(i), seed, save_every=save_every, **(LONG_RUN if LONG else SHORT))
        except BaseException as exc:
            raise AssertionError(f"seed {seed} (COUNTERSIGN_SEED={seed} replays its choices): {exc!r}") from exc
        print(f"seed {seed}: {summary}")
        # The run exercised what it claims to: asks decided every way, runs, refusals, kills.
        assert summary["acks"] > 50 and summary["refusals"] > 0 and summary["runs"] > 0, summary
        assert summary.get("approved", 0) + summary.get("executed", 0) > 0 and summary.get("expired", 0) > 0, summary
