"""The Gate: the approval workflow over a policy and a ledger.

    gate = Gate(Policy.load("samples/retail.policy"), "ledger-dir")
    p = gate.propose("cancel_pending_order", {"order_id": "#W1", "reason": "ordered by mistake"},
                     proposer="agent-7", run="run-42")
    if p.effect == "ask":
        gate.approve(p.request, approver="sup-1", digest=p.args_digest)
    result = gate.execute(p.request, cancel_order)     # runs once, with the approved arguments

Every step is first checked against the workflow rules (ledger.workflow); an illegal step raises
that rule's Violation and appends nothing. A legal step is appended to the ledger, durably, before
the Gate's state changes and before anything runs. Opening a Gate replays (and verifies) the
ledger, so pending requests survive a restart.

Identities (`proposer`, `approver`, `editor`) must come from the caller's authenticated context,
never from the tool's arguments; the Gate records them and enforces four-eyes, but cannot
authenticate them itself.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import msgspec

from dsl import Decision, Policy
from dsl.requirements import Requirements
from ledger import events as ev
from ledger.clock import Clock, add_seconds, format_ts, utc_now
from ledger.digest import ArgumentsError, encode_arguments, value_digest
from ledger.log import Ledger, LedgerCorrupt, LineTooLong
from ledger.verify import Redactions, check_record
from ledger.workflow import (
    EditDenied,
    RequestState,
    UnknownRequest,
    Violation,
    Workflow,
    combined_requirements,
)

DEFAULT_EXPIRY_MESSAGE = "No one decided in time; the call was not run. Do not retry it without asking the user."


class GateError(Exception):
    """Base of the Gate's own errors (workflow violations are `ledger.workflow.Violation`)."""


class InvalidCall(GateError):
    """A proposed call is malformed: empty tool name, arguments that are not a JSON object, ..."""


class CallIdConflict(GateError):
    """A call id was proposed again with different arguments or a different tool."""


class ExecutionUnknown(GateError):
    """The call was started but its outcome was never recorded (a crash while it ran). It is
    never run again; someone must find out what happened."""


class ExecutionInProgress(GateError):
    """The call is running now, in another thread; its outcome is not recorded yet."""


def _text(name: str, value: object, *, optional: bool = False, empty_ok: bool = False) -> str | None:
    """Check a text parameter before it goes into the ledger. Raises InvalidCall."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidCall(f"{name} must be a string, not {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise InvalidCall(f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidCall(f"{name} holds a lone surrogate, which is not Unicode text") from None
    return value


def _request_id(request: object) -> int:
    if isinstance(request, bool) or not isinstance(request, int):
        raise InvalidCall(f"a request id is an integer, not {type(request).__name__}")
    return request


def _printable(text: str) -> str:
    """Text safe to store: lone surrogates become backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


ERROR_CHARS = 65_536
"""The most characters of a tool's error message an `executed` event records (the rest is cut,
and the cut said): the outcome must always fit in a ledger line (ledger.lines.MAX_LINE_BYTES)."""


def _error_text(text: str) -> str:
    """`_printable(text)`, cut to ERROR_CHARS characters."""
    if len(text) > ERROR_CHARS:
        text = f"{text[:ERROR_CHARS]}... ({len(text) - ERROR_CHARS:,} more characters not recorded)"
    return _printable(text)


@dataclass(frozen=True)
class Proposal:
    """What `propose` returns. `request` is the id for every later step; `args_digest` is what an
    approver must approve. `decision` is None for a repeated call id (`duplicate`)."""

    request: int
    tool: str
    effect: str
    status: str
    args_digest: str
    reasons: tuple[str, ...]
    rules: tuple[str, ...]
    requirements: Requirements | None
    deadline: str | None
    decision: Decision | None
    duplicate: bool = False


@dataclass(frozen=True)
class Execution:
    """What `execute` returns. `result` is the callable's return value on the run that executed
    it, None when the outcome was replayed from the ledger (`replayed`). `error` is
    "Type: message" when the callable raised; the exception itself is in `exception`."""

    request: int
    outcome: str
    result_digest: str | None
    error: str | None
    replayed: bool
    result: Any = None
    exception: BaseException | None = None


class Gate:
    """Decides, pauses and records tool calls. See the module docstring for a tour.

    `ledger` is a Ledger or a directory path (opened, created if missing). `clock` returns an aware
    datetime (UTC); every event's `ts` comes from it. Raises LedgerCorrupt when the existing
    ledger does not verify (a Gate never extends a tampered or unlawful history).

    One Gate per ledger: the Gate keeps the workflow's state in memory, so it holds its ledger
    exclusively (`Ledger(exclusive=True)`, or `make_exclusive()` on a Ledger it is given) for as
    long as it is open. It raises LedgerLocked when another writer (another Gate, or any Ledger in
    any process) has the ledger open, and other writers get LedgerLocked while it does. Plain
    Ledger appenders, without a Gate, may be many processes.
    """

    def __init__(self, policy: Policy, ledger: Ledger | str | Path, *, clock: Clock = utc_now):
        self.policy = policy
        self.clock = clock
        if isinstance(ledger, Ledger):
            ledger.make_exclusive()
            self.ledger = ledger
        else:
            self.ledger = Ledger(ledger, clock=clock, exclusive=True)
        self.workflow = Workflow()
        self._data: dict[int, dict] = {}  # request → {"args", "context"} while it can still run
        self._lock = threading.RLock()
        self._running: set[int] = set()  # requests whose tool is running in some thread right now
        self._last_ts = ""
        self._replay()

    # --- replay -------------------------------------------------------------------------------

    def _replay(self) -> None:
        prev, expected = ev.GENESIS_PREV, 1
        redactions = Redactions.collect(self.ledger.path)
        for record in self.ledger.records():
            problem = check_record(record, expected, prev, self._last_ts, redactions)
            if problem is not None:
                raise LedgerCorrupt(problem.seq, problem.message, problem.segment, problem.line)
            try:
                self.workflow.step(record.seq, record.event)
            except Violation as exc:
                raise LedgerCorrupt(record.seq, f"unlawful history: {exc.message}", record.segment, record.line) from None
            if isinstance(record.event, ev.Redacted) and (problem := redactions.announcement_problem(record)):
                raise LedgerCorrupt(problem.seq, problem.message, problem.segment, problem.line)
            self._remember(record.seq, record.event, record.data_value())
            prev, expected = record.hash, expected + 1
            self._last_ts = max(self._last_ts, record.event.ts)

    def _remember(self, seq: int, event: ev.Event, data: dict | None) -> None:
        if isinstance(event, ev.Proposed):
            if event.effect != "deny":
                self._data[seq] = data
        elif isinstance(event, ev.Edited):
            self._data[event.request]["args"] = data["args"]
        elif hasattr(event, "request"):
            state = self.workflow.requests.get(event.request)
            if state is not None and state.final:
                self._data.pop(event.request, None)

    def _append(self, event: ev.Event, data: dict | bytes | None = None) -> int:
        """Check, append durably, then apply. Returns the event's seq."""
        self.workflow.check(event)
        try:
            record = self.ledger.append(event, data)
        except LineTooLong as exc:  # nothing was appended: the step did not happen
            raise InvalidCall(f"this step cannot be recorded: {exc}") from None
        self.workflow.apply(record.seq, record.event)
        self._remember(record.seq, record.event, msgspec.json.decode(record.data) if data is not None else None)
        return record.seq

    def _now(self) -> str:
        """The clock's time, but never earlier than the last event's: a clock stepped back (NTP,
        a restored VM) must not reopen a request whose deadline has passed. Ledger timestamps
        never go backwards."""
        try:
            now = format_ts(self.clock())
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise GateError(f"the clock gave no usable UTC time: {exc}") from None
        self._last_ts = max(self._last_ts, now)
        return self._last_ts

    # --- proposing ----------------------------------------------------------------------------

    def propose(
        self,
        tool: str,
        args: dict,
        *,
        proposer: str,
        run: str | None = None,
        context: dict | None = None,
        call_id: str | None = None,
    ) -> Proposal:
        """Decide a tool call and record it; an ask also records the interrupt and its deadline.

        Raises InvalidCall for a malformed call, or one whose ledger line would be longer than
        ledger.lines.MAX_LINE_BYTES (nothing is appended, so it can never run), and
        CallIdConflict when `call_id` was already proposed with other arguments. A repeated `call_id` with the same call returns the first
        Proposal (`duplicate=True`) and appends nothing.
        """
        _text("the tool name", tool)
        _text("the proposer (from the caller's authenticated context)", proposer)
        _text("run", run, optional=True)
        _text("call_id", call_id, optional=True)
        if not isinstance(args, dict):
            raise InvalidCall(f"the arguments must be a JSON object, not {type(args).__name__}")
        if context is not None and not isinstance(context, dict):
            raise InvalidCall(f"the context must be a JSON object, not {type(context).__name__}")
        context = context or {}
        try:
            digest, args_json = encode_arguments(args)
            context_digest, context_json = encode_arguments(context)
        except ArgumentsError as exc:
            raise InvalidCall(f"the call cannot be recorded: {exc}") from None
        with self._lock:
            if call_id is not None and call_id in self.workflow.by_call_id:
                return self._repeat(call_id, tool, digest, proposer, context_digest)
            # The policy sees the arguments as stored, not the caller's objects, which it could change later.
            stored_args = msgspec.json.decode(args_json)
            decision = self.policy.evaluate(tool, stored_args, msgspec.json.decode(context_json))
            ts = self._now()
            request = self.ledger.head[0] + 1  # the Gate is the ledger's only writer
            proposed = ev.Proposed(
                ts=ts,
                run=run,
                proposer=proposer,
                call_id=call_id,
                tool=tool,
                args_digest=digest,
                context_digest=context_digest,
                policy=decision.policy,
                policy_digest=decision.policy_digest,
                effect=decision.effect,
                rules=self._rule_refs(decision),
                reasons=decision.reasons,
            )
            data = b'{"args":' + args_json + b',"context":' + context_json + b"}"
            items: list[tuple[ev.Event, Any]] = [(proposed, data)]
            deadline = None
            if decision.effect == "ask":
                assert decision.requirements is not None
                deadline = add_seconds(ts, decision.requirements.timeout_seconds)
                items.append((ev.Interrupted(ts=ts, request=request, requirements=decision.requirements, deadline=deadline), None))
            self.workflow.check(proposed)
            try:
                records = self.ledger.append_batch(items)
            except LineTooLong as exc:  # nothing was appended: a call that cannot be recorded never runs
                raise InvalidCall(f"the call cannot be recorded: {exc}") from None
            assert records[0].seq == request
            for record in records:
                self.workflow.apply(record.seq, record.event)
            if decision.effect != "deny":
                self._data[request] = {"args": stored_args, "context": msgspec.json.decode(context_json)}
            state = self.workflow.requests[request]
            return Proposal(
                request=request,
                tool=tool,
                effect=decision.effect,
                status=state.status,
                args_digest=digest,
                reasons=decision.reasons,
                rules=decision.deciding,
                requirements=decision.requirements,
                deadline=deadline,
                decision=decision,
            )

    def _repeat(self, call_id: str, tool: str, digest: str, proposer: str, context_digest: str) -> Proposal:
        state = self.workflow.requests[self.workflow.by_call_id[call_id]]
        if (state.tool, state.original_digest, state.proposer, state.context_digest) != (tool, digest, proposer, context_digest):
            raise CallIdConflict(
                f"call id {call_id!r} was proposed before (request {state.request}) with another tool, "
                "arguments, proposer or context"
            )
        return Proposal(
            request=state.request,
            tool=state.tool,
            effect=state.effect,
            status=state.status,
            args_digest=state.digest,
            reasons=state.reasons,
            rules=state.rules,
            requirements=state.requirements,
            deadline=state.deadline,
            decision=None,
            duplicate=True,
        )

    def _rule_refs(self, decision: Decision) -> tuple[ev.RuleRef, ...]:
        lines = {o.rule: o.line for o in decision.outcomes}
        return tuple(ev.RuleRef(id=rule, line=lines.get(rule, 0)) for rule in decision.deciding)

    # --- deciding -----------------------------------------------------------------------------

    def approve(self, request: int, *, approver: str, digest: str, comment: str | None = None) -> RequestState:
        """Record one approval of the arguments whose digest the approver saw.

        Raises a Violation: StaleDigest (the arguments changed), SelfApproval, NotAnApprover,
        DuplicateApproval, DecisionNotAllowed, DeadlinePassed, NotPending, RequestFinal,
        UnknownRequest. Returns the request's state; `status` is "approved" once the quorum is met.
        """
        _request_id(request)
        _text("approver", approver)
        _text("digest", digest)
        _text("comment", comment, optional=True, empty_ok=True)
        with self._lock:
            self._append(ev.Approved(ts=self._now(), request=request, approver=approver, args_digest=digest, comment=comment))
            return self.get(request)

    def edit(self, request: int, *, editor: str, args: dict, reason: str | None = None) -> RequestState:
        """Replace the arguments. The edited call re-enters the policy: a deny refuses the edit
        (EditDenied, nothing appended); otherwise the edit counts as the editor's approval of the
        new arguments, under requirements never weaker than before. Other refusals as `approve`."""
        _request_id(request)
        _text("editor", editor)
        _text("reason", reason, optional=True, empty_ok=True)
        if not isinstance(args, dict):
            raise InvalidCall(f"the arguments must be a JSON object, not {type(args).__name__}")
        try:
            digest, args_json = encode_arguments(args)
        except ArgumentsError as exc:
            raise InvalidCall(f"the edit cannot be recorded: {exc}") from None
        with self._lock:
            state = self._open_state(request)
            stored = msgspec.json.decode(args_json)
            decision = self.policy.evaluate(state.tool, stored, self._data.get(request, {}).get("context"))
            if decision.effect == "deny":
                raise EditDenied("the policy denies the edited call: " + " ".join(decision.reasons), request)
            assert state.requirements is not None or state.status != "pending"
            requirements = combined_requirements(
                state.requirements or Requirements(),
                decision.requirements if decision.effect == "ask" else None,
            )
            if not requirements.satisfiable():
                raise EditDenied("no one could approve the edited call under the combined requirements", request)
            self._append(
                ev.Edited(
                    ts=self._now(),
                    request=request,
                    editor=editor,
                    args_digest=digest,
                    replaces=state.digest,
                    policy_digest=decision.policy_digest,
                    effect=decision.effect,
                    rules=self._rule_refs(decision),
                    requirements=requirements,
                    reason=reason,
                ),
                b'{"args":' + args_json + b"}",
            )
            return self.get(request)

    def reject(self, request: int, *, approver: str, reason: str) -> RequestState:
        """Reject the call. `reason` is returned to the agent as an instruction, so it is required."""
        _request_id(request)
        _text("approver", approver)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidCall("a rejection needs a reason: it tells the agent what to do instead")
        _text("reason", reason)
        with self._lock:
            self._append(ev.Rejected(ts=self._now(), request=request, approver=approver, reason=reason))
            return self.get(request)

    def respond(self, request: int, *, approver: str, message: str) -> RequestState:
        """Answer in place of the tool; `message` goes back to the agent as the call's result."""
        _request_id(request)
        _text("approver", approver)
        _text("the response", message, empty_ok=True)
        with self._lock:
            self._append(ev.Responded(ts=self._now(), request=request, approver=approver, message=message))
            return self.get(request)

    def cancel(self, request: int, *, by: str, reason: str | None = None) -> RequestState:
        """Withdraw a call that has not started running."""
        _request_id(request)
        _text("by", by)
        _text("reason", reason, optional=True, empty_ok=True)
        with self._lock:
            self._append(ev.Cancelled(ts=self._now(), request=request, by=by, reason=reason))
            return self.get(request)

    def expire(self) -> list[int]:
        """Apply the timeout's safe default (reject) to every pending request whose deadline has
        passed. Returns their ids. Silence never approves."""
        with self._lock:
            now = self._now()
            due = sorted(  # oldest request first, as the ledger has always recorded them
                (s for s in self.workflow.pending.values() if s.deadline is not None and s.deadline <= now),
                key=lambda s: s.request,
            )
            for state in due:
                message = (state.requirements.timeout_message if state.requirements else None) or DEFAULT_EXPIRY_MESSAGE
                self._append(ev.Expired(ts=now, request=state.request, outcome="reject", message=message))
            return [s.request for s in due]

    # --- executing ----------------------------------------------------------------------------

    def execute(self, request: int, fn: Callable[[dict], Any], *, executor: str | None = None) -> Execution:
        """Run `fn(arguments)` once, with the approved arguments, and record the outcome.

        `execution_started` is durable before `fn` runs. A second call returns the recorded
        outcome without running anything (`replayed=True`). An exception from `fn` is recorded
        as outcome "error" and returned in the Execution, not raised. Raises NotApproved (and the
        other Violations) when the request may not run, ExecutionUnknown when an earlier run
        started and never recorded its outcome.
        """
        _request_id(request)
        _text("executor", executor, optional=True)
        with self._lock:
            state = self.workflow.requests.get(request)
            if state is None:
                raise UnknownRequest(f"request {request} was never proposed", request)
            if state.status == "executed":
                return Execution(request, state.outcome or "", state.result_digest, state.error, replayed=True)
            if request in self._running:
                raise ExecutionInProgress(f"request {request} is running now; its outcome is not recorded yet")
            if state.status == "executing":
                raise ExecutionUnknown(
                    f"request {request} started running and its outcome was never recorded; it will not run again"
                )
            started = ev.ExecutionStarted(ts=self._now(), request=request, args_digest=state.digest, executor=executor)
            self.workflow.check(started)  # raises when the request may not run
            # The tool gets its own copy of the approved arguments, made before anything is
            # written: nothing that can fail may stand between the start and the tool's run.
            args = copy.deepcopy(self._data[request]["args"])
            self._append(started)
            self._running.add(request)
            digest = state.digest
        # The tool runs outside the Gate's lock, so that a slow tool does not hold up every other
        # proposal and decision; `_running` keeps a second execute() of this request out meanwhile.
        result, exception, error = None, None, None
        try:
            try:
                result = fn(args)
                outcome = "ok"
            except Exception as exc:  # the tool's failure is an outcome to record, not a Gate failure
                outcome, exception, error = "error", exc, _error_text(f"{type(exc).__name__}: {exc}")
            try:
                result_digest = value_digest(result) if outcome == "ok" else None
            except ArgumentsError:
                result_digest = None
            with self._lock:
                self._append(
                    ev.Executed(
                        ts=self._now(),
                        request=request,
                        args_digest=digest,
                        outcome=outcome,
                        result_digest=result_digest,
                        error=error,
                    )
                )
        finally:
            with self._lock:
                self._running.discard(request)
        return Execution(request, outcome, result_digest, error, replayed=False, result=result, exception=exception)

    # --- reading ------------------------------------------------------------------------------

    def _open_state(self, request: int) -> RequestState:
        state = self.workflow.requests.get(request)
        if state is None:
            raise UnknownRequest(f"request {request} was never proposed", request)
        return state

    def get(self, request: int) -> RequestState:
        """A snapshot of one request's state. Raises UnknownRequest."""
        with self._lock:
            state = self._open_state(request)
            snapshot = copy.copy(state)
            snapshot.approvals = dict(state.approvals)
            snapshot.approvers = list(state.approvers)
            return snapshot

    def pending(self) -> list[RequestState]:
        """Snapshots of the requests waiting for a human decision, oldest first."""
        with self._lock:
            return [self.get(s.request) for s in self.workflow.requests.values() if s.status == "pending"]

    def arguments(self, request: int) -> dict:
        """The current (possibly edited) arguments of a request that can still run. Raises
        UnknownRequest, or KeyError when the request is final and its arguments were released."""
        with self._lock:
            self._open_state(request)
            return copy.deepcopy(self._data[request]["args"])

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> "Gate":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
