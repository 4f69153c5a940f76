"""Simulate the Gate on a trace of tool calls, with scripted reviewers and a simulated clock.

The calls file is JSON Lines, one call per line: `{"tool": "...", "args": {...}}`. Optional fields
used when present: `run` (else `task`) groups calls into agent runs, `proposer` (else the
simulation's default), `context` (else `cwd` and `permission_mode` when present), `call_id`.
Other fields are ignored. Blank lines are skipped.

The reviewer file (JSON) scripts the humans; without one, every ask is approved by as many
eligible reviewers as its quorum needs: the first two minutes after it was raised, each further
one thirty seconds later. Its shape:

    {
      "reviewers": ["reviewer-1", "reviewer-2"],   // who decides when a rule names no group
      "default": {"decision": "approve"},
      "rules": [                                   // the first rule that matches decides
        {"tool": "cancel_*", "args": {"reason": "ordered by mistake"},
         "decision": "reject", "reason": "Ask the customer to confirm first.", "after": "5m"},
        {"tool": "return_*", "decision": "edit", "set": {"payment_method_id": "gift_card_1"}},
        {"rule": "desk-confirms-change", "decision": "timeout"},
        {"tool": "get_store_hours", "decision": "respond", "message": "9 to 5."},
        {"tool": "modify_user_address", "decision": "leave"}
      ]
    }

A rule matches on `tool` (a glob), `rule` (a deciding rule id) and `args` (top-level values the
call's arguments must equal), all optional. Decisions: approve, edit (`set` replaces arguments,
then the remaining quorum approves), reject (`reason`), respond (`message`), timeout (the clock
moves past the deadline and the Gate expires the request), leave (nobody decides; the request
stays pending). `by` lists who decides, in order (default: the eligible reviewers, never the
proposer); `after` is how long the reviewer takes (default 2m).

Time starts at `start` (or at the ledger's last event, if that is later: ledger timestamps
never go backwards) and moves `gap` seconds between calls and `after` for each review. Every
file is read and validated before the ledger is touched: a bad line is reported with its number
and nothing is written.

A trace run twice into one ledger would be recorded twice. `Simulation.held(calls)` says how much
of a trace the ledger already holds: the proposals of its calls, in the trace's order, one after
the other (each call is recognised by its tool, argument and context digests, proposer, run and
call id, what its `proposed` event records); `run(calls, skip=N)` goes on after the first N.
`run(calls, stop=...)` stops between two calls when `stop()` says so (a person's Ctrl-C): every
call is then proposed, reviewed and run whole, or not at all.
"""

from __future__ import annotations

import fnmatch
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Literal

import msgspec

from dsl import Policy
from ledger import events as ev
from ledger.store import lines
from ledger.clock import ManualClock, parse_duration
from ledger.digest import ArgumentsError, encode_arguments
from ledger.workflow.gate import Gate, GateError
from ledger.store.log import Ledger
from dsl.jsoninput import json_kind, parse_json_object
from ledger.workflow.machine import RequestState, Violation

DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
DEFAULT_REVIEWERS = ["reviewer-1", "reviewer-2", "reviewer-3"]


class InputFileError(ValueError):
    """A calls or reviewer file is malformed. `line` is 1-based (None for whole-file problems)."""

    def __init__(self, path: str, line: int | None, message: str):
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.message = path, line, message


class Call(msgspec.Struct, frozen=True):
    """One call of a trace: where it was in the file and what to propose."""

    line: int
    tool: str
    args: dict[str, Any]
    run: str | None = None
    proposer: str | None = None
    context: dict[str, Any] = {}
    call_id: str | None = None


class ReviewRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    decision: Literal["approve", "edit", "reject", "respond", "timeout", "leave"]
    tool: str = "*"
    rule: str | None = None
    args: dict[str, Any] = {}
    by: list[str] | None = None
    after: str = "2m"
    reason: str | None = None
    message: str | None = None
    set: dict[str, Any] = {}


class Reviewers(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    reviewers: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_REVIEWERS))
    default: ReviewRule = ReviewRule(decision="approve")
    rules: list[ReviewRule] = []


class Summary(msgspec.Struct):
    """What a simulation did. Counts are of calls; `outcomes` counts each call's request by its
    status when the simulation ended (a request left pending by one call may expire during a
    later one); `refused` lists review steps the Gate refused (each `line: message`), which a
    reviewer file can provoke on purpose. `skipped`: the trace's first calls not run (`run`'s
    `skip`, those the ledger held); `stopped`: `stop()` ended the run before the trace's end,
    after `calls` of them; `last_line`: the calls file's line of the last call run (0: none)."""

    calls: int = 0
    skipped: int = 0
    stopped: bool = False
    last_line: int = 0
    effects: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    executed: int = 0
    edited: int = 0
    refused: list[str] = []
    events: int = 0
    head: str = ""
    started: str = ""
    ended: str = ""


# --- reading inputs ---------------------------------------------------------------------------


def read_calls(path: str | Path) -> list[Call]:
    """Every call of a JSON Lines trace. Raises InputFileError at the first malformed line,
    including a call id used again for another call (the Gate would refuse it part way)."""
    path = str(path)
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise InputFileError(path, None, exc.strerror or str(exc)) from None
    calls = []
    call_ids: dict[str, tuple[int, tuple]] = {}
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                call = _call(path, number, text)
                if call.call_id is not None:
                    identity = (call.tool, encode_arguments(call.args)[0], call.proposer, encode_arguments(call.context)[0])
                    first = call_ids.setdefault(call.call_id, (number, identity))
                    if first[1] != identity:
                        raise InputFileError(path, number, f"call_id {call.call_id!r} was used at line {first[0]} for another call")
                calls.append(call)
        except UnicodeDecodeError:
            raise InputFileError(path, len(calls) + 1, "the file is not valid UTF-8") from None
    return calls


def _call(path: str, number: int, text: str) -> Call:
    try:
        item = parse_json_object(text, "the line")
    except ValueError as exc:
        raise InputFileError(path, number, str(exc)) from None
    tool = item.get("tool")
    if not isinstance(tool, str) or not tool:
        raise InputFileError(path, number, 'every call needs "tool", a non-empty string')
    if "args" not in item:
        raise InputFileError(path, number, 'every call needs "args", a JSON object')
    args = item["args"]
    if not isinstance(args, dict):
        raise InputFileError(path, number, f'"args" must be a JSON object, not {json_kind(args)}')
    run = item.get("run", item.get("task"))
    context = item.get("context")
    if context is None:
        context = {k: item[k] for k in ("cwd", "permission_mode") if k in item}
    if not isinstance(context, dict):
        raise InputFileError(path, number, f'"context" must be a JSON object, not {json_kind(context)}')
    try:
        stored = len(encode_arguments(args)[1]) + len(encode_arguments(context)[1]) + len(b'{"args":,"context":}')
    except ArgumentsError as exc:
        raise InputFileError(path, number, f"the call cannot be recorded: {exc}") from None
    if stored + lines.OVERHEAD > lines.MAX_LINE_BYTES:  # the Gate would refuse it part way (and it could never run)
        raise InputFileError(path, number, f"the call cannot be recorded: its arguments and context take {stored:,} bytes, and a "
                             f"ledger line is at most {lines.MAX_LINE_BYTES:,} (docs/ledger-format.md, section 2)")
    proposer = item.get("proposer")
    if proposer is not None and (not isinstance(proposer, str) or not proposer):
        raise InputFileError(path, number, '"proposer" must be a non-empty string')
    for name in ("tool", "proposer", "run", "call_id"):
        value = item.get(name if name != "run" else ("run" if "run" in item else "task"))
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InputFileError(path, number, f'"{name}" holds a lone surrogate, which is not Unicode text') from None
    call_id = item.get("call_id")
    return Call(
        line=number,
        tool=tool,
        args=args,
        run=str(run) if run is not None else None,
        proposer=proposer,
        context=context,
        call_id=str(call_id) if call_id is not None else None,
    )


def read_reviewers(path: str | Path | None) -> Reviewers:
    """The reviewer script, or the default (approve everything) when `path` is None."""
    if path is None:
        return Reviewers()
    path = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputFileError(path, None, exc.strerror or str(exc)) from None
    try:
        spec = msgspec.convert(parse_json_object(data.decode("utf-8"), "the reviewer file"), type=Reviewers)
    except UnicodeDecodeError:
        raise InputFileError(path, None, "the file is not valid UTF-8") from None
    except (ValueError, msgspec.ValidationError) as exc:
        raise InputFileError(path, None, f"not a valid reviewer file: {exc}") from None
    for rule in [spec.default, *spec.rules]:
        try:
            if parse_duration(rule.after) > 365 * 86400:
                raise ValueError(f"'after' is at most 365 days, not {rule.after}")
        except ValueError as exc:
            raise InputFileError(path, None, str(exc)) from None
        if rule.decision == "reject" and not (rule.reason or "").strip():
            raise InputFileError(path, None, "a reject needs a reason (it is what the agent reads)")
        if rule.decision == "respond" and rule.message is None:
            raise InputFileError(path, None, "a respond needs a message")
    if not spec.reviewers:
        raise InputFileError(path, None, '"reviewers" cannot be empty')
    return spec


# --- recognising a trace the ledger holds ------------------------------------------------------


class Held(msgspec.Struct, frozen=True):
    """How much of a trace a ledger holds (`Simulation.held`).

    - `calls`: how many of the trace's calls, from the first, the ledger holds in order (0: none
      of it; the trace's length when `complete`). A call whose call id an earlier call of the
      trace used proposes nothing (the Gate returns the first proposal), and counts with it.
    - `complete`: the whole trace is in the ledger.
    - `at_end`: the proposals found are the ledger's last ones (an interrupted run, which
      `run(calls, skip=calls)` continues); False when something was proposed after them.
    - `first_request`, `last_request`: the seqs of the first and last proposal found (0: none).
    - `last_line`: the calls file's line of the last call found (0: none).
    """

    calls: int = 0
    complete: bool = False
    at_end: bool = False
    first_request: int = 0
    last_request: int = 0
    last_line: int = 0


def _identity(tool: str, args_digest: str, context_digest: str, proposer: str, run: str | None, call_id: str | None) -> tuple:
    return (tool, args_digest, context_digest, proposer, run, call_id)


def held(ledger: Ledger, calls: list[Call], proposer: str = "agent") -> Held:
    """How much of `calls` (`proposer`: the proposer of calls naming none) the ledger holds: its
    longest run of proposals equal, one after the other, to the trace's first calls; a complete
    occurrence of the trace anywhere wins over a partial one, the last one over earlier ones.

    One pass over the ledger's `proposed` events (Knuth-Morris-Pratt over the trace's
    identities: linear in the ledger and the trace, whatever repeats they hold), holding only the
    trace's identities and the seqs of as many proposals as the trace has calls."""
    from collections import deque

    wanted: list[tuple] = []  # the identities of the calls that propose, in order
    index: list[int] = []  # the trace's index of each
    seen_ids: set[str] = set()
    for i, call in enumerate(calls):
        if call.call_id is not None:
            if call.call_id in seen_ids:
                continue  # the Gate returns the first proposal of this call id: nothing is recorded
            seen_ids.add(call.call_id)
        wanted.append(_identity(call.tool, encode_arguments(call.args)[0], encode_arguments(call.context)[0],
                                call.proposer or proposer, call.run, call.call_id))
        index.append(i)
    m = len(wanted)
    if m == 0:
        return Held()
    fail = [0] * m  # fail[k]: the longest proper prefix of wanted[:k + 1] that is also its suffix
    k = 0
    for i in range(1, m):
        while k and wanted[i] != wanted[k]:
            k = fail[k - 1]
        if wanted[i] == wanted[k]:
            k += 1
        fail[i] = k
    recent: deque[int] = deque(maxlen=m)  # the seqs of the last m proposals
    state, complete_at = 0, None
    for record in ledger.records(kind="proposed"):
        e = record.event
        if not isinstance(e, ev.Proposed):
            continue
        found = _identity(e.tool, e.args_digest, e.context_digest, e.proposer, e.run, e.call_id)
        recent.append(record.seq)
        while state and found != wanted[state]:
            state = fail[state - 1]
        if found == wanted[state]:
            state += 1
        if state == m:
            complete_at = (recent[0], record.seq)
            state = fail[m - 1]
    if complete_at is not None:
        last = index[-1]
        return Held(calls=len(calls), complete=True, at_end=complete_at[1] == (recent[-1] if recent else 0),
                    first_request=complete_at[0], last_request=complete_at[1], last_line=calls[last].line)
    if state == 0:
        return Held()
    # The trace's calls up to the next one that proposes (the repeats of a call id included).
    through = index[state] if state < m else len(calls)
    return Held(calls=through, at_end=True, first_request=recent[-state], last_request=recent[-1],
                last_line=calls[through - 1].line)


# --- running ----------------------------------------------------------------------------------


def _matches(rule: ReviewRule, state: RequestState, args: dict) -> bool:
    if not fnmatch.fnmatchcase(state.tool, rule.tool):
        return False
    if rule.rule is not None and rule.rule not in state.rules:
        return False
    return all(k in args and args[k] == v for k, v in rule.args.items())


def _eligible(state: RequestState, spec: Reviewers, rule: ReviewRule) -> list[str]:
    if rule.by is not None:
        return list(rule.by)
    pool: list[str] = []
    for quorum in state.requirements.quorums if state.requirements is not None else ():
        for who in quorum.approvers if quorum.approvers is not None else spec.reviewers:
            if who not in pool:
                pool.append(who)
    return [who for who in pool if who != state.proposer]


class Simulation:
    """Runs calls through a Gate. `run(calls)` returns a Summary; the Gate stays open until
    `close()` so callers can inspect it."""

    def __init__(
        self,
        policy: Policy,
        ledger_path: str | Path,
        reviewers: Reviewers | None = None,
        *,
        start: datetime = DEFAULT_START,
        gap_seconds: float = 20,
        proposer: str = "agent",
    ):
        self.clock = ManualClock(start)
        # The trace's clock is simulated: no other writer may interleave real time with it.
        self.gate = Gate(policy, Ledger(ledger_path, clock=self.clock, exclusive=True), clock=self.clock, pin_policy=True)
        last, _hash = self.gate.ledger.head
        if last:  # a ledger's timestamps never go backwards: go on from its last event
            from ledger.clock import parse_ts

            self.clock.set(max(start, parse_ts(self.gate.ledger.record_at(last).event.ts)))
        self.spec = reviewers or Reviewers()
        self.gap = gap_seconds
        self.proposer = proposer
        self.summary = Summary()

    def held(self, calls: list[Call]) -> Held:
        """How much of `calls` the ledger already holds (`held`)."""
        return held(self.gate.ledger, calls, self.proposer)

    def run(self, calls: list[Call], *, skip: int = 0, stop: Callable[[], bool] | None = None) -> Summary:
        """Run `calls` after the first `skip`, checking `stop()` before each: when it is true the
        run ends there (`Summary.stopped`), every call before it proposed, reviewed and run."""
        summary = self.summary
        summary.started = self.clock().isoformat()
        summary.skipped = skip
        requests = []
        for call in calls[skip:]:
            if stop is not None and stop():
                summary.stopped = True
                break
            self.clock.advance(self.gap)
            self.gate.expire()
            requests.append(self._one(call))
            summary.last_line = call.line
        for request in requests:  # the statuses at the end, as the ledger holds them
            self._count(summary.outcomes, "duplicate" if request is None else self.gate.get(request).status)
        summary.events, summary.head = self.gate.ledger.head
        summary.ended = self.clock().isoformat()
        return summary

    def _count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def _one(self, call: Call) -> int | None:
        """Propose, review and run one call; its request, or None for a duplicate proposal."""
        s = self.summary
        s.calls += 1
        proposal = self.gate.propose(
            call.tool,
            call.args,
            proposer=call.proposer or self.proposer,
            run=call.run,
            context=call.context,
            call_id=call.call_id,
        )
        self._count(s.effects, proposal.effect)
        if proposal.duplicate:
            return None
        if proposal.effect == "ask":
            self._review(call, proposal.request)
        state = self.gate.get(proposal.request)
        if state.executable:
            self.gate.execute(proposal.request, lambda args: None, executor="simulate-noop")
            s.executed += 1
            state = self.gate.get(proposal.request)
        if state.edits:
            s.edited += 1
        return proposal.request

    def _review(self, call: Call, request: int) -> None:
        state = self.gate.get(request)
        args = self.gate.arguments(request)
        rule = next((r for r in self.spec.rules if _matches(r, state, args)), self.spec.default)
        if rule.decision == "leave":
            return
        if rule.decision == "timeout":
            assert state.deadline is not None
            deadline = datetime.strptime(state.deadline, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
            self.clock.set(max(self.clock(), deadline + timedelta(seconds=1)))
            self.gate.expire()
            return
        delay = parse_duration(rule.after)
        people = _eligible(state, self.spec, rule)
        try:
            if not people:
                raise GateError("no eligible reviewer for this request")
            self.clock.advance(delay)
            if rule.decision == "reject":
                self.gate.reject(request, approver=people[0], reason=rule.reason or "")
            elif rule.decision == "respond":
                self.gate.respond(request, approver=people[0], message=rule.message or "")
            else:
                if rule.decision == "edit":
                    self.gate.edit(request, editor=people[0], args={**args, **rule.set}, reason=rule.reason)
                    people = people[1:]
                for i, who in enumerate(people):
                    if self.gate.get(request).status != "pending":
                        break
                    if i or rule.decision == "edit":
                        self.clock.advance(30)  # each further approver thirty seconds later
                    self.gate.approve(request, approver=who, digest=self.gate.get(request).digest)
        except (Violation, GateError) as exc:
            self.summary.refused.append(f"line {call.line}: {call.tool}: {exc}")

    def close(self) -> None:
        """Close the Gate (a second close does nothing)."""
        self.gate.close()

    def __enter__(self) -> "Simulation":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def simulate(
    policy: Policy,
    calls: list[Call],
    ledger_path: str | Path,
    reviewers: Reviewers | None = None,
    **options: Any,
) -> Summary:
    """Run `calls` through a Gate over `ledger_path` (created if missing, appended to if not)."""
    sim = Simulation(policy, ledger_path, reviewers, **options)
    try:
        return sim.run(calls)
    finally:
        sim.close()
