"""The Gate: the approval workflow over a policy and a ledger.

    gate = Gate(Policy.load("samples/retail.policy"), "ledger-dir")
    p = gate.propose("cancel_pending_order", {"order_id": "#W1", "reason": "ordered by mistake"},
                     proposer="agent-7", run="run-42")
    if p.effect == "ask":
        gate.approve(p.request, approver="sup-1", digest=p.args_digest)
    result = gate.execute(p.request, cancel_order)     # runs once, with the approved arguments

Every step is first checked against the workflow rules (ledger.workflow.machine); an illegal step
raises that rule's Violation and appends nothing. A legal step is appended to the ledger, durably,
before the Gate's state changes and before anything runs. Opening a Gate loads its snapshot
(ledger.workflow.snapshot) and verifies the events after it (or, with none usable, or
`full_verify=True`, replays and verifies the whole ledger), so pending requests survive a restart
and opening a large ledger costs milliseconds.

The Gate is a projection that catches up: any number of Gates, in any number of threads and
processes, share one ledger. Every step takes the ledger's commit lock, reads and checks the events
other writers appended since this Gate last looked (chain and workflow, as a replay checks them),
folds them in, expires the requests whose deadline has passed, checks the step against the
now-current state, appends it and releases the lock. Two reviewers racing on one request: the
second gets the Violation naming who decided and when.

Identities (`proposer`, `approver`, `editor`) must come from the caller's authenticated context,
never from the tool's arguments; the Gate records them and enforces four-eyes, but cannot
authenticate them itself.
"""

from __future__ import annotations

import copy
import hashlib
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import msgspec

from dsl.requirements import MAX_REMEMBER_SECONDS, Remember, Requirements

if TYPE_CHECKING:  # the compiler is imported by whoever loads a policy, not by a reviewer's Gate
    from dsl import Decision, Policy
    from ledger.proof.roster import Roster  # annotations only: a Gate without signers never reads a roster
from ledger import events as ev, pinning
from ledger.clock import Clock, add_seconds, format_ts, utc_now
from ledger.digest import ArgumentsError, encode_arguments, value_digest
from ledger.proof import decisions
from ledger.proof.decisions import RECOVERY, Signing
from ledger.store.lines import MAX_LINE_BYTES
from ledger.store.log import Ledger, LedgerCorrupt, LineTooLong, Record
from ledger.workflow.catchup import CatchUp
from ledger.workflow.deciding import Before, decide, rule_refs
from ledger.workflow.errors import (  # noqa: F401 (the Gate's errors, named here as before)
    CallIdConflict,
    ExecutionInProgress,
    ExecutionUnknown,
    GateError,
    InvalidCall,
    NoPolicy,
    NotAllowedToCancel,
    PolicyMismatch,
    UnknownPolicy,
    UnsignedDecision,
)
from ledger.workflow.reading import DECISIONS, Reading, _request_id
from ledger.workflow.snapshot import Behind, Snapshot, Unusable
from ledger.workflow.machine import (
    AlreadyExecuted,
    EditDenied,
    NotPending,
    RequestFinal,
    StaleDigest,
    StandingDecision,
    RequestState,
    UnknownRequest,
    combined_requirements,
    deadline_after,
    decided_by_whom,
)

_NO_CONTEXT = encode_arguments({})  # the digest and spelling of an empty context, made once

_HEX64 = re.compile(r"[0-9a-f]{64}")  # a digest as the ledger spells it (ledger.events.Hex64)

LAST_TS = "9999-12-31T23:59:59.999999Z"  # the latest time the ledger can spell: a deadline past it waits for a person

SAVE_EVERY = 1_000
"""A Gate writes its snapshot (ledger.workflow.snapshot) when it has folded this many events since
its last save, and on close."""

# RECOVERY (ledger.proof.decisions): who cancels an ask whose write was cut short, the Gate itself
CUT_SHORT = ("The call's interrupt was never recorded (the write that proposed it was cut short); it was not run "
             "and no one was asked. Propose it again, with a new call id.")

DEFAULT_EXPIRY_MESSAGE = "No one decided in time; the call was not run. Do not retry it without asking the user."


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


_DURATION = re.compile(r"(?:[0-9]+[smhd])+")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def remember_scope(remember: object) -> Remember | None:
    """What a decision's `remember` asks for: None; "run"; "session"; or a duration as a policy
    writes one ("8h", "1h30m": until the decision's time plus it). Raises InvalidCall."""
    if remember is None:
        return None
    if remember in ("run", "session"):
        return Remember(remember)  # type: ignore[arg-type]
    if isinstance(remember, str) and _DURATION.fullmatch(remember):
        seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)([smhd])", remember))
        if 0 < seconds <= MAX_REMEMBER_SECONDS:
            return Remember("until", seconds)
    raise InvalidCall(f"remember must be 'run', 'session' or a duration such as '8h' (at most 365d), not {remember!r}")


def _session_of(context: object) -> str | None:
    """The session a call belongs to: its context's `session_id`, when that is a non-empty string."""
    session = context.get("session_id") if isinstance(context, dict) else None
    return session if isinstance(session, str) and session else None


def _remember(remember: object, pattern: object) -> tuple[Remember, bool] | None:
    """A decision's `remember` and `pattern` ("exact": only the request's arguments; None: any),
    checked. Raises InvalidCall."""
    scope = remember_scope(remember)
    if pattern not in (None, "exact"):
        raise InvalidCall(f"pattern must be 'exact' or None, not {pattern!r}")
    if scope is None:
        if pattern is not None:
            raise InvalidCall("a pattern needs remember")
        return None
    return scope, pattern == "exact"


def _printable(text: str) -> str:
    """Text safe to store: lone surrogates become backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


ERROR_CHARS = 65_536
"""The most characters of a tool's error message an `executed` event records (the rest is cut,
and the cut said): the outcome must always fit in a ledger line (ledger.store.lines.MAX_LINE_BYTES)."""


# A kept result leaves this much of a ledger line for the event's body; a larger one keeps its
# digest only (the outcome must always be recordable).
RESULT_ROOM = 4_096


def _result_record(result: Any, keep: bool) -> tuple[str | None, bytes | None]:
    """(the result's structural digest or None, the `executed` line's data or None) for an "ok"
    outcome: the data `{"result": R}` only when `keep`, the result is JSON other than null, and
    it fits in a line (docs/ledger-format.md, section 5). Never raises: a result that cannot be
    recorded is an outcome without a digest."""
    if result is None:
        return None, None
    try:
        digest, spelled = encode_arguments(result)
    except ArgumentsError:
        return None, None
    if not keep or len(spelled) + RESULT_ROOM > MAX_LINE_BYTES:
        return digest, None
    return digest, b'{"result":' + spelled + b"}"


_HEX64 = re.compile(r"[0-9a-f]{64}")


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
    standing: int | None = None  # the seq of the standing decision that decided an ask, if one did


@dataclass(frozen=True)
class Execution:
    """What `execute` returns. `result` is the callable's return value on the run that executed
    it; when the outcome was replayed from the ledger (`replayed`), the result the first run kept
    (`keep_result=True`), else None. `result_kept` says whether the ledger holds the result
    itself (beside its digest). `error` is "Type: message" when the callable raised; the
    exception itself is in `exception`."""

    request: int
    outcome: str
    result_digest: str | None
    error: str | None
    replayed: bool
    result: Any = None
    exception: BaseException | None = None
    result_kept: bool = False


@dataclass(frozen=True)
class Run:
    """What `run` returns: the Proposal, and the Execution when the call ran (or had run)."""

    proposal: Proposal
    execution: Execution | None


class Gate(CatchUp, Reading):
    """Decides, pauses and records tool calls. See the module docstring for a tour.

    `policy` decides proposals and edits; None opens a reviewer's Gate, which approves, rejects,
    responds, cancels, expires and reads, but raises NoPolicy for `propose` and `edit`.
    `ledger` is a Ledger or a directory path (opened as a shared writer, created if missing).
    `clock` returns an aware datetime (UTC); every event's `ts` comes from it. Raises
    LedgerCorrupt when the existing ledger does not verify (a Gate never extends a tampered or
    unlawful history), and from any later step when events another writer appended do not (the
    Gate then stops: every later step raises LedgerCorrupt again).

    Many Gates may be open on one ledger, in one process or many: each step catches up under the
    ledger's commit lock (module docstring). A Ledger opened with `exclusive=True` still works,
    and keeps every other writer out.

    `roster` (ledger.proof.roster): the Gate records its digest in a `roster` event when it opens,
    unless the last one recorded is the same (`operator` is who started it). `ledger verify
    --roster` checks each later decision's signature against it. The decision methods take
    `signing` (ledger.proof.decisions.Signing) to sign the decision they record.

    `record_policy(policy, operator)` records the policy the Gate decides with in a `policy` event
    (unless the last one recorded is the same) and decides with it from then on: the approval
    service calls it after opening and after each reload.

    `pin_policy`: before its first proposal under a policy whose text no `policy` event of the
    ledger keeps yet, the Gate records one that keeps it (ledger.pinning; `operator` as `by`), in
    the same write as the proposal, so that every decision it records can be checked against the
    text that made it (`countersign ledger audit`). Not on a version 1 ledger. Off by default
    here, so that a Gate's ledger keeps the layout it had (the first proposal at seq 2); every
    writer countersign ships turns it on (the adapters, `simulate`, `mcp-proxy`; the service pins
    through `record_policy`).
    """

    def __init__(self, policy: Policy | None, ledger: Ledger | str | Path, *, clock: Clock = utc_now,
                 snapshot: bool = True, full_verify: bool = False, roster: Roster | None = None,
                 operator: str = RECOVERY, signers: Roster | None = None, trusted_policies=None,
                 pin_policy: bool = False):
        self.policy = policy
        self.pin_policy = pin_policy
        self.operator = operator
        self.clock = clock
        # Gates of one process opened by path share one writer, and so its commits (group commit)
        self.ledger = ledger if isinstance(ledger, Ledger) else Ledger.shared(ledger, clock=clock)
        self._closed = False
        self._lock = threading.RLock()
        self._running: set[int] = set()  # requests whose tool is running in some thread of this process
        self._broken: LedgerCorrupt | None = None
        self._expired: list[int] = []  # the requests the last `expire()` expired
        self._ledger_id = self.ledger.ledger_id
        self.signers: Roster | None = None  # see `require_signatures`
        self.rosters: dict[str, Roster] = {}  # every roster `require_signatures` was given, by digest
        self.trusted_policies: frozenset[str] | None = None  # see `trust_policies`
        # given here, they hold from the first event the Gate folds as it opens (with full_verify,
        # from the genesis: a snapshot in the ledger's directory is only as safe as the directory)
        self.require_signatures(signers)
        self.trust_policies(trusted_policies)
        self._snapshot: Snapshot | None = None
        if snapshot and (where := self.ledger.cache_dir()) is not None:
            self._snapshot = Snapshot(where)
        try:
            self._open(full_verify)
            if roster is not None:
                self.record_roster(roster, operator)
        except BaseException:
            if not isinstance(ledger, Ledger):
                self.ledger.close()  # the share this Gate took of the process's writer
            raise

    def require_signatures(self, roster: Roster | None) -> None:
        """From now on, trust no decision `roster` does not vouch for (None: no check; a Gate
        without a roster). Whoever can write the ledger's files can append a lawful-looking
        decision; it must neither make anything run nor reach anyone:

        - a call runs (`execute`, `start`) only when every approval and edit of it is signed as
          `ledger verify --roster` requires, by a key the roster lists
          (ledger.proof.decisions.problem); otherwise UnsignedDecision, nothing appended;
        - a decision another writer appended, folded while the roster in force (the last
          `roster` event) is one this Gate was given, must be signed so: otherwise the Gate
          stops, as for any tampering (LedgerCorrupt at its seq), before the decision's status
          or text is visible through it. So does a `roster` event naming a roster this Gate
          was not given, folded after it opened (decisions after it could not be checked).

        Decisions under rosters this Gate was not given, folded while it opens (a ledger whose
        roster changed while no Gate of this roster was open), are left to `ledger verify
        --roster`, as is whatever the snapshot holds."""
        self.signers = roster
        if roster is not None:
            self.rosters[roster.digest] = roster

    def trust_policies(self, digests) -> None:
        """Run only calls proposed under a policy whose digest is in `digests` (None: any).
        Another writer may append a proposal decided `allow` by a policy of its own; `execute`
        and `start` refuse it (UnknownPolicy, nothing appended)."""
        self.trusted_policies = None if digests is None else frozenset(digests)

    def _trust_problem(self, record: Record, live: bool) -> str | None:
        """Under `require_signatures`: what is wrong with another writer's `record` before it is
        folded (see there), or None. Under the lock, with the state before the record."""
        event = record.event
        if isinstance(event, ev.RosterRecorded):
            # after a roster this Gate was given, every later one must be one too (as it opens
            # as well: a roster event an intruder appended must not switch the checks off)
            if event.digest not in self.rosters and (live or self.workflow.roster in self.rosters):
                return (f"a roster this Gate was not given ({event.digest[:12]}…) was recorded by {event.by}: the "
                        "decisions after it could not be checked")
            return None
        if not isinstance(event, ev.SIGNABLE):
            return None
        roster = self.rosters.get(self.workflow.roster or "")
        if roster is None:
            return "a decision under a roster this Gate was not given" if live and self.workflow.roster else None
        state = self.workflow.get(event.request)
        if state is None:
            return None  # the workflow's own check reports it
        problem = decisions.problem(event, record.body, ledger_id=self._ledger_id, basis=state.data_seq,
                                    args=state.digest, proposer=state.proposer, status=state.status, roster=roster)
        return None if problem is None else f"{problem} (a decision not made through countersign)"

    def _signature_problem(self, state: RequestState) -> str | None:
        """What is wrong with the signatures of the approvals and edits that let `state` run
        (under `self.signers`), or None. Under the lock."""
        assert self.signers is not None
        records = self.ledger.records_at(state.seqs)
        basis, args = state.request, state.original_digest
        for seq in state.seqs:
            record = records.get(seq)
            if record is None:
                return f"the event at seq {seq} cannot be read"
            event = record.event
            if isinstance(event, (ev.Approved, ev.Edited)):
                problem = decisions.problem(event, record.body, ledger_id=self._ledger_id, basis=basis, args=args,
                                            proposer=state.proposer, status="pending", roster=self.signers)
                if problem is not None:
                    return f"seq {seq}: {problem}"
            if isinstance(event, ev.Edited):
                basis, args = seq, event.args_digest
        return None

    def _standing_problem(self, seq: int) -> str | None:
        """What is wrong, under `self.signers`, with the signatures of the standing decision at
        `seq` (its `remembered` event, and the decision that follows it), or None. Checked as the
        request's own approvals are (ledger.proof.decisions.problem), against the request it was
        made on: the arguments it had then are still its current ones (its decision made it
        approved or final). Under the lock."""
        assert self.signers is not None
        records = self.ledger.records_at([seq, seq + 1])
        first = records.get(seq)
        if first is None or not isinstance(first.event, ev.Remembered):
            return f"the event at seq {seq} is no standing decision, or cannot be read"
        origin = self.workflow.get(first.event.request)
        if origin is None:
            return f"the request of the standing decision at seq {seq} is unknown"
        for at in (seq, seq + 1):
            record = records.get(at)
            if record is None:
                return f"the event at seq {at} cannot be read"
            if not isinstance(record.event, ev.SIGNABLE) or record.event.request != origin.request:
                return f"the event at seq {at} is not the standing decision's"
            problem = decisions.problem(record.event, record.body, ledger_id=self._ledger_id, basis=origin.data_seq,
                                        args=origin.digest, proposer=origin.proposer, status="pending",
                                        roster=self.signers)
            if problem is not None:
                return f"standing decision at seq {seq}: {problem}"
        return None

    def record_roster(self, roster: Roster, operator: str) -> None:
        """Append a `roster` event with the roster's digest, unless the last one has it."""
        _text("operator", operator)
        with self._lock:
            def step() -> list[tuple[ev.Event, Any]]:
                if self.workflow.roster == roster.digest:  # folded, or kept by the snapshot
                    return []
                event = ev.RosterRecorded(ts=self._now(), digest=roster.digest, by=operator)
                self.workflow.check(event)
                return [(event, None)]

            self._commit(step)
        self.roster = roster

    def record_policy(self, policy: Policy, operator: str) -> None:
        """Decide with `policy` from now on, and say so in the ledger: append a `policy` event
        (ledger.events.PolicyLoaded: its name, its digest, `operator` as `by`, its source_name as
        `source`) unless the last one recorded has its digest. The service calls it after
        opening its Gate and after each reload, so that the ledger shows which policy was in force
        when (the proposals' `policy_digest` says which one decided each). The last digest
        recorded is the Workflow's `policy_digest`, folded or kept by the snapshot: no ledger read.

        Raises InvalidCall for an empty `operator`, FormatVersion (appending nothing) on a
        countersign-ledger/1 ledger, LedgerCorrupt as every step does. `policy` replaces
        `self.policy` once the event is in the ledger (or was already the last recorded)."""
        _text("operator", operator)
        digest, name, source = (getattr(policy, a, None) for a in ("digest", "name", "source_name"))
        if not (isinstance(digest, str) and _HEX64.fullmatch(digest) and isinstance(name, str)):
            raise InvalidCall(f"record_policy needs a loaded Policy (dsl.Policy), not {type(policy).__name__}")
        name, source = _printable(name), _printable(source) if isinstance(source, str) else None
        with self._lock:
            def step() -> list[tuple[ev.Event, Any]]:
                if self.workflow.policy_digest == digest and (digest in self.workflow.pinned or pinning.pin(policy) is None):
                    return []  # folded, or kept by the snapshot (and its text kept, when it can be)
                return self._policy_event(policy, operator, name, source)

            self._commit(step)
            self.policy = policy

    def _policy_event(self, policy: Policy, operator: str, name: str, source: str | None) -> list[tuple[ev.Event, Any]]:
        """[the `policy` event recording `policy`, with its text when it can be pinned, and its
        data], checked against the current state (under the commit lock)."""
        pinned = pinning.pin(policy)
        files, data = pinned if pinned is not None else (msgspec.UNSET, None)
        event = ev.PolicyLoaded(ts=self._now(), name=name, digest=policy.digest, by=operator, source=source, files=files)
        self.workflow.check(event)
        return [(event, data)]

    def _pins(self, policy: Policy) -> list[tuple[ev.Event, Any]]:
        """Under the commit lock, before a step that decides with `policy`: the `policy` event that
        pins it (see the class docstring, `pin_policy`), or nothing when its text is kept already,
        pinning is off, the ledger is version 1, or the policy cannot be pinned."""
        digest = getattr(policy, "digest", None)
        if not self.pin_policy or digest in self.workflow.pinned or self.workflow.format != ev.FORMAT:
            return []
        if pinning.pin(policy) is None:
            return []
        source = getattr(policy, "source_name", None)
        return self._policy_event(policy, self.operator, _printable(policy.name),
                                  _printable(source) if isinstance(source, str) else None)

    def _commit(self, step: Callable[[], list[tuple[ev.Event, Any]]]) -> list[Record]:
        """One step: under the ledger's commit lock, fold what other writers appended, expire what
        is due, then `step()` checks against the current state and returns the events to append.
        Returns the appended Records (already folded). When requests were due, their expiry is
        committed first (one write for all of them) and the step runs in the next commit. A
        snapshot that can no longer answer for this Gate (Behind) makes it open again and retry.

        The caller holds the Gate's lock; it is given up while the commit is in flight (and taken
        again before this returns), so that steps of other threads on this same Gate join the
        commit (group commit: one write and one sync for all of them) instead of waiting for it.
        `build` takes the lock for itself: it may run in another thread (the commit's leader).
        A step after this one in the same commit folds this step's events (as the ledger hands
        them on); this step's own fold, after the commit, skips what is folded already."""
        while True:
            expired = False

            def build(new: Iterable[Record]) -> list[tuple[ev.Event, Any]]:
                nonlocal expired
                with self._lock:
                    self._fold(new)
                    due = self._due()
                    if due:
                        expired = True
                        return due
                    items = step()
                    # The states the appended events change, read now, under the lock: once it is
                    # released, another Gate may save the snapshot past this Gate's view of them.
                    for event, _data in items:
                        if (request := getattr(event, "request", None)) is not None:
                            self.workflow.get(request)
                    return items

            since = self._seen[0]
            held = self._lock._release_save()  # every level of the RLock (as threading.Condition.wait does)
            failed: BaseException | None = None
            try:
                records = self.ledger.transact(build, since=since)
            except BaseException as exc:  # handled below, once the lock is held again
                failed = exc
            finally:
                self._lock._acquire_restore(held)
            if failed is not None:
                if isinstance(failed, LineTooLong):  # nothing was appended: the step did not happen
                    raise InvalidCall(f"this step cannot be recorded: {failed}") from None
                if isinstance(failed, Behind):
                    self._open()
                    continue
                if isinstance(failed, Unusable):
                    self._lost_snapshot()
                    continue
                raise failed
            for record in records:
                if expired and isinstance(record.event, ev.Expired):
                    self._expired.append(record.event.request)
                if record.seq <= self._seen[0]:  # folded by a later step of this Gate in the same commit
                    continue
                self.workflow.apply(record.seq, record.event)
                self._folded(record)
            if self._seen[0] - self._base >= SAVE_EVERY:
                self._save()
            if not expired:
                return records

    def _due(self) -> list[tuple[ev.Event, Any]]:
        """Under the commit lock, caught up: an `expired` event for every pending request whose
        deadline has passed (an `escalated` one instead when its requirements have a next stage),
        and a `cancelled` one for every ask whose interrupt was never
        recorded (a Gate writes both in one commit, so under the lock such an ask is the mark of
        a write cut short by a crash: it would otherwise wait for ever, with no deadline and in no
        queue). Oldest first."""
        if not self.workflow.pending and not self.workflow.interrupting:
            return []
        now = self._now()
        events: list[tuple[ev.Event, Any]] = []
        for s in self.workflow.due(now):
            following = s.requirements.escalated() if s.requirements is not None else None
            if following is not None:  # not expired: the next stage decides (dsl.requirements, Escalation)
                events.append((ev.Escalated(ts=now, request=s.request, stage=s.stage + 1, requirements=following,
                                            deadline=deadline_after(now, following.timeout_seconds)), None))
            else:
                events.append((ev.Expired(ts=now, request=s.request, outcome="reject",
                                          message=(s.requirements.timeout_message if s.requirements else None) or DEFAULT_EXPIRY_MESSAGE), None))
        events += [(ev.Cancelled(ts=now, request=r, by=RECOVERY, reason=CUT_SHORT), None) for r in sorted(self.workflow.interrupting)]
        return events

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

    def refresh(self) -> None:
        """Catch up with the ledger now (and expire what is due). Raises LedgerCorrupt."""
        with self._lock:
            self._commit(lambda: [])

    def _policy(self) -> Policy:
        if self.policy is None:
            raise NoPolicy("this Gate was opened without a policy (a reviewer's Gate): it cannot decide calls or edits")
        return self.policy

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
        ledger.store.lines.MAX_LINE_BYTES (nothing is appended, so it can never run), and
        CallIdConflict when `call_id` was already proposed with other arguments. A repeated `call_id` with the same call returns the first
        Proposal (`duplicate=True`) and appends nothing. NoPolicy on a reviewer's Gate.
        """
        return self._propose(tool, args, proposer=proposer, run=run, context=context, call_id=call_id)[0]

    def _propose(self, tool: str, args: dict, *, proposer: str, run: str | None, context: dict | None,
                 call_id: str | None, start: bool = False, executor: str | None = None) -> tuple[Proposal, dict | None]:
        """`propose`; with `start`, an allowed call's `execution_started` goes into the same
        write as its proposal, and the second value is the arguments to run it with (else None)."""
        policy = self._policy()
        _text("the tool name", tool)
        _text("the proposer (from the caller's authenticated context)", proposer)
        _text("run", run, optional=True)
        _text("call_id", call_id, optional=True)
        if not isinstance(args, dict):
            raise InvalidCall(f"the arguments must be a JSON object, not {type(args).__name__}")
        if context is not None and not isinstance(context, dict):
            raise InvalidCall(f"the context must be a JSON object, not {type(context).__name__}")
        try:
            digest, args_json = encode_arguments(args)
            context_digest, context_json = encode_arguments(context) if context else _NO_CONTEXT
        except ArgumentsError as exc:
            raise InvalidCall(f"the call cannot be recorded: {exc}") from None
        # The policy sees the arguments as stored, not the caller's objects, which it could change
        # later. It reads nothing but the call and its context, so it decides outside the lock.
        stored_args = msgspec.json.decode(args_json)
        stored_context = msgspec.json.decode(context_json)
        # A policy that reads the run's history decides under the commit lock, caught up: on the
        # ledger prefix just before this proposal (what a replay of the ledger gives it again).
        reads_history = policy.reads_history
        decision = None if reads_history else decide(policy, tool, stored_args, stored_context, Before(run=run))
        session = _session_of(stored_context)
        data = b'{"args":' + args_json + b',"context":' + context_json + b"}"
        with self._lock:
            repeat: list[Proposal] = []
            claimed: list[int] = []  # the request this step marked running, if it starts one
            deadline = None

            def step() -> list[tuple[ev.Event, Any]]:
                nonlocal deadline, decision
                if call_id is not None and self.workflow.request_of(call_id) is not None:
                    repeat.append(self._repeat(call_id, tool, digest, proposer, context_digest))
                    return []
                pins = self._pins(policy)  # the text of the policy that decides, kept first
                if reads_history:
                    decision = decide(policy, tool, stored_args, stored_context,
                                      Before(self._seen[0] + 1 + len(pins), run, self._run_history(run)))
                ts = self._now()
                request = self._seen[0] + 1 + len(pins)  # under the commit lock, caught up: this event's seq
                covered: ev.Covered | msgspec.UnsetType = msgspec.UNSET
                if decision.effect == "ask" and decision.requirements is not None and decision.requirements.rememberable:
                    by = self.workflow.covering(tool=tool, policy_digest=decision.policy_digest, run=run, session=session,
                                                args_digest=digest, ts=ts, proposer=proposer, rules=decision.deciding,
                                                requirements=decision.requirements)
                    if by is not None and self.signers is not None and self._standing_problem(by) is not None:
                        # signed by no one the roster in force lists: a person is asked (recording
                        # no coverage is always lawful; another standing decision would not be)
                        by = None
                    if by is not None:
                        covered = ev.Covered(by=by, requirements=decision.requirements, session=session)
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
                    remembered=covered,
                )
                items: list[tuple[ev.Event, Any]] = [*pins, (proposed, data)]
                allowed = decision.effect == "allow" or (
                    covered is not msgspec.UNSET and self.workflow.standing[covered.by].decision == "approve")
                if start and allowed:
                    # Lawful by construction: an allowed request may run, with its own digest.
                    items.append((ev.ExecutionStarted(ts=ts, request=request, args_digest=digest, executor=executor), None))
                    claimed.append(request)
                    self._running.add(request)  # under the lock, before any other step can see the start
                if decision.effect == "ask" and covered is msgspec.UNSET:
                    assert decision.requirements is not None
                    if decision.requirements.stages and self.workflow.format == ev.FORMAT_V1:
                        raise GateError(f"this ask escalates, which needs a {ev.FORMAT} ledger; this one is {ev.FORMAT_V1}")
                    try:
                        deadline = add_seconds(ts, decision.requirements.timeout_seconds)
                    except (OverflowError, ValueError):  # the ledger's time is near the end of year 9999
                        deadline = LAST_TS
                    items.append((ev.Interrupted(ts=ts, request=request, requirements=decision.requirements, deadline=deadline), None))
                self.workflow.check(proposed)
                return items

            try:
                records = self._commit(step)
            except BaseException as exc:
                for request in claimed:  # the start was not recorded: nothing runs
                    self._running.discard(request)
                if isinstance(exc, InvalidCall):  # a call that cannot be recorded never runs
                    raise InvalidCall(str(exc).replace("this step cannot be recorded", "the call cannot be recorded")) from None
                raise
            if repeat:
                return repeat[0], None
            records = [r for r in records if not isinstance(r.event, ev.PolicyLoaded)]
            request = records[0].seq
            state = self._open_state(request)
            # Kept for its execution (read again from the ledger if evicted), unless an edit folded
            # since the commit (the lock was given up meanwhile) replaced these arguments.
            if state.status not in ("denied", "rejected") and state.data_seq in (0, request):
                self._data.put(request, {"args": stored_args, "context": msgspec.json.decode(context_json)},
                               4 * len(data) + 200)
            started = None
            if len(records) > 1 and isinstance(records[1].event, ev.ExecutionStarted):
                # the tool's own copy of the arguments as stored, made before it runs
                started = msgspec.json.decode(args_json)
            return Proposal(
                request=request,
                tool=tool,
                effect=decision.effect,
                status=state.status,
                args_digest=digest,
                reasons=decision.reasons if state.standing is None or state.reason is None else (state.reason,),
                rules=decision.deciding,
                requirements=decision.requirements,
                deadline=deadline,
                decision=decision,
                standing=state.standing,
            ), started

    def _run_history(self, run: str | None, before: int | None = None):
        """The history of `run` (a dsl.history.History, None for none) as of the events folded,
        for a policy that reads it; `before`: only the calls proposed before that seq (an edit's
        re-decision). The index (ledger.workflow.history) is built from the ledger the first time
        (the records up to the last one folded, already checked when they were folded), then
        kept up by every fold."""
        if self._history is None:
            from ledger.workflow.history import HistoryIndex

            index = HistoryIndex()
            for record in self.ledger.records(1, until=self._seen[0]):
                index.fold(record)
            self._history = index
        history = self._history.run(run)
        return history.before(before) if history is not None and before is not None else history

    def _repeat(self, call_id: str, tool: str, digest: str, proposer: str, context_digest: str) -> Proposal:
        state = self._open_state(self.workflow.request_of(call_id))
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
            standing=state.standing,
        )

    def _rule_refs(self, decision: Decision) -> tuple[ev.RuleRef, ...]:
        return rule_refs(decision)

    # --- deciding -----------------------------------------------------------------------------

    def _decide_one(self, request: int, make: Callable[[], ev.Event], digest: str | None = None,
                    data: bytes | None = None, signing: Signing | None = None,
                    remember: tuple[Remember, bool] | None = None) -> RequestState:
        """Commit the event `make()` builds against the current state; `digest`, when given, must
        be the request's current argument digest (what the decider saw). With `signing`, the event
        is signed as composed (ledger.proof.decisions): its time is the event's, which the ledger
        keeps or moves later, never earlier. With `remember` (the scope, and whether only these
        arguments), a `remembered` event (`_standing`) goes just before the decision, in the
        same write; both are checked first, so a scope the request's rule does not admit appends
        nothing."""
        with self._lock:
            def step() -> list[tuple[ev.Event, Any]]:
                if digest is not None:
                    state = self.workflow.get(request)
                    if state is not None and not state.final and state.digest != digest:
                        raise StaleDigest(f"the decision is for arguments {digest[:12]}…, the request's are now "
                                          f"{state.digest[:12]}…", request)
                event = make()
                items: list[tuple[ev.Event, Any]] = []
                prev = self._seen[1]
                if remember is not None:
                    standing = self._standing(request, event, *remember)
                    if signing is not None and (state := self.workflow.get(request)) is not None:
                        standing = decisions.sign(standing, signing.key, signer=signing.signer, ledger_id=self._ledger_id,
                                                  basis=state.data_seq, args=state.digest, prev=prev)
                    self.workflow.check(standing)
                    items.append((standing, None))
                    # the decision follows it: its prev is the standing decision's hash, as the
                    # ledger will stamp it (seq and prev; its ts is already at least the head's)
                    stamped = msgspec.structs.replace(standing, seq=self._seen[0] + 1, prev=prev)
                    prev = hashlib.sha256(ev.encode_event(stamped)).hexdigest()
                if signing is not None and (state := self.workflow.get(request)) is not None:
                    # under the commit lock, caught up: the head is the event this decision follows
                    event = decisions.sign(event, signing.key, signer=signing.signer, ledger_id=self._ledger_id,
                                           basis=state.data_seq, args=state.digest, prev=prev)
                self.workflow.check(event)
                return items + [(event, data)]

            try:
                self._commit(step)
            except (RequestFinal, NotPending) as exc:  # a race lost: say who decided and when
                state = self.workflow.get(request)
                said = decided_by_whom(state) if state is not None else ""
                if not said:
                    raise
                raise type(exc)(exc.message + said, request) from None
            return self._copy_of(request)

    def _standing(self, request: int, decision: ev.Event, scope: Remember, exact: bool) -> ev.Remembered:
        """The `remembered` event that makes `decision` (an approval or a rejection, its ts set)
        standing for `scope`: within the request's run, its context's session, or until the
        decision's time plus the seconds. Raises InvalidCall when the request has no run or
        session to be remembered for; the workflow checks the rest (StandingDecision)."""
        state = self._open_state(request)
        if state.status == "pending" and (state.requirements is None or state.requirements.rememberable is None):
            raise StandingDecision(f"request {request}: the rule that asked does not let its decision be remembered "
                                   "(no `remember` clause)", request)
        if scope.scope == "run":
            if state.run is None:
                raise InvalidCall(f"request {request} was proposed without a run: it cannot be remembered for its run")
            within = state.run
        elif scope.scope == "session":
            session = _session_of(self._call_data(request).get("context"))
            if session is None:
                raise InvalidCall(f"request {request}'s context has no session_id: it cannot be remembered for its session")
            within = session
        else:
            try:
                within = add_seconds(decision.ts, scope.seconds or 0)
            except (OverflowError, ValueError):
                within = LAST_TS
        rejection = isinstance(decision, ev.Rejected)
        return ev.Remembered(
            ts=decision.ts, request=request, approver=ev.decider(decision), decision="reject" if rejection else "approve",
            tool=state.tool, policy_digest=state.policy_digest, scope=scope, within=within,
            args_digest=state.digest if exact else None, reason=decision.reason if rejection else None)

    def approve(self, request: int, *, approver: str, digest: str, comment: str | None = None,
                signing: Signing | None = None, remember: str | None = None, pattern: str | None = None) -> RequestState:
        """Record one approval of the arguments whose digest the approver saw.

        Raises a Violation: StaleDigest (the arguments changed), SelfApproval, NotAnApprover,
        DuplicateApproval, DecisionNotAllowed, DeadlinePassed, NotPending, RequestFinal (naming
        who decided and when), UnknownRequest. Returns the request's state; `status` is
        "approved" once the quorum is met.

        `remember` makes the approval standing (docs/ledger-format.md, `remembered`): "run",
        "session" or a duration ("8h"); `pattern` "exact" limits it to these arguments (None:
        any arguments of the tool). Refused with StandingDecision (nothing appended) when the
        request's requirements do not admit that scope, or one approval does not meet them;
        InvalidCall when the request has no run or session to remember it for.
        """
        _request_id(request)
        _text("approver", approver)
        _text("digest", digest)
        _text("comment", comment, optional=True, empty_ok=True)
        return self._decide_one(request, lambda: ev.Approved(ts=self._now(), request=request, approver=approver,
                                                             args_digest=digest, comment=comment), signing=signing,
                                remember=_remember(remember, pattern))

    def edit(self, request: int, *, editor: str, args: dict, reason: str | None = None,
             digest: str | None = None, signing: Signing | None = None, policy: Policy | None = None) -> RequestState:
        """Replace the arguments. The edited call re-enters the policy: a deny refuses the edit
        (EditDenied, nothing appended); otherwise the edit counts as the editor's approval of the
        new arguments, under requirements never weaker than before. `digest`, when given, must be
        the arguments the editor saw (StaleDigest). Other refusals as `approve`; NoPolicy on a
        reviewer's Gate. `policy`: decide the edit with this one instead of the Gate's (the one
        that decided the call, when the Gate has moved on to another)."""
        policy = policy or self._policy()
        _request_id(request)
        _text("editor", editor)
        _text("reason", reason, optional=True, empty_ok=True)
        if not isinstance(args, dict):
            raise InvalidCall(f"the arguments must be a JSON object, not {type(args).__name__}")
        try:
            new_digest, args_json = encode_arguments(args)
        except ArgumentsError as exc:
            raise InvalidCall(f"the edit cannot be recorded: {exc}") from None
        stored = msgspec.json.decode(args_json)

        def make() -> ev.Event:
            state = self._open_state(request)
            if state.policy_digest and state.policy_digest != policy.digest:
                raise PolicyMismatch(
                    f"request {request} was decided by the policy with digest {state.policy_digest[:12]}…; this Gate "
                    f"holds {policy.digest[:12]}…: an edit re-enters the policy that decided the call, so edit it "
                    "with that policy", request)
            # a history-reading policy sees the run's calls proposed before this request, as of
            # the ledger prefix just before this edit (what ledger audit gives it again)
            history = self._run_history(state.run, before=request) if policy.reads_history else None
            decision = decide(policy, state.tool, stored, self._call_data(request).get("context"),
                              Before(request, state.run, history))
            if decision.effect == "deny":
                raise EditDenied("the policy denies the edited call: " + " ".join(decision.reasons), request)
            assert state.requirements is not None or state.status != "pending"
            requirements = combined_requirements(
                state.requirements or Requirements(),
                decision.requirements if decision.effect == "ask" else None,
                stage=state.stage,
            )
            if not requirements.satisfiable():
                raise EditDenied("no one could approve the edited call under the combined requirements", request)
            return ev.Edited(
                ts=self._now(),
                request=request,
                editor=editor,
                args_digest=new_digest,
                replaces=state.digest,
                policy_digest=decision.policy_digest,
                effect=decision.effect,
                rules=self._rule_refs(decision),
                requirements=requirements,
                reason=reason,
            )

        return self._decide_one(request, make, digest, b'{"args":' + args_json + b"}", signing)

    def reject(self, request: int, *, approver: str, reason: str, digest: str | None = None,
               signing: Signing | None = None, remember: str | None = None, pattern: str | None = None) -> RequestState:
        """Reject the call. `reason` is returned to the agent as an instruction, so it is required.
        `digest`, when given, must be the arguments the approver saw (StaleDigest). `remember`
        and `pattern` make the rejection standing, as for `approve`: the calls it covers are
        rejected with this reason."""
        _request_id(request)
        _text("approver", approver)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidCall("a rejection needs a reason: it tells the agent what to do instead")
        _text("reason", reason)
        return self._decide_one(request, lambda: ev.Rejected(ts=self._now(), request=request, approver=approver,
                                                             reason=reason), digest, signing=signing,
                                remember=_remember(remember, pattern))

    def respond(self, request: int, *, approver: str, message: str, digest: str | None = None,
                signing: Signing | None = None) -> RequestState:
        """Answer in place of the tool; `message` goes back to the agent as the call's result."""
        _request_id(request)
        _text("approver", approver)
        _text("the response", message, empty_ok=True)
        return self._decide_one(request, lambda: ev.Responded(ts=self._now(), request=request, approver=approver,
                                                              message=message), digest, signing=signing)

    def cancel(self, request: int, *, by: str, reason: str | None = None, digest: str | None = None,
               signing: Signing | None = None) -> RequestState:
        """Withdraw a call that has not started running: by its proposer, or by someone its
        requirements would let decide it (a cancel stops the call as a rejection does, so no one
        else may). Raises NotAllowedToCancel, and the Violations of the workflow."""
        _request_id(request)
        _text("by", by)
        _text("reason", reason, optional=True, empty_ok=True)

        def make() -> ev.Event:
            state = self._open_state(request)
            if by != state.proposer and not state.final and (state.requirements is None or not state.tally().allows(by)):
                raise NotAllowedToCancel(f"{by} neither proposed request {request} nor may decide it, so cannot cancel it", request)
            return ev.Cancelled(ts=self._now(), request=request, by=by, reason=reason)

        return self._decide_one(request, make, digest, signing=signing)

    def decide(self, request: int, decision: str, *, by: str, digest: str | None = None, args: dict | None = None,
               reason: str | None = None, message: str | None = None, comment: str | None = None,
               signing: Signing | None = None, policy: Policy | None = None, remember: str | None = None,
               pattern: str | None = None) -> RequestState:
        """One entry point for a decision: "approve" (needs `digest`), "edit" (`args`), "reject"
        (`reason`), "respond" (`message`), by the authenticated `by`. Raises InvalidCall for an
        unknown decision or a missing part, or `remember` on an edit or a response; otherwise as
        the named method."""
        if (remember is not None or pattern is not None) and decision not in ("approve", "reject"):
            raise InvalidCall("only an approval or a rejection can be remembered")
        if decision == "approve":
            if digest is None:
                raise InvalidCall("an approval names the argument digest the approver saw")
            return self.approve(request, approver=by, digest=digest, comment=comment, signing=signing,
                                remember=remember, pattern=pattern)
        if decision == "edit":
            if args is None:
                raise InvalidCall("an edit needs the new arguments")
            return self.edit(request, editor=by, args=args, reason=reason, digest=digest, signing=signing, policy=policy)
        if decision == "reject":
            return self.reject(request, approver=by, reason=reason or "", digest=digest, signing=signing,
                               remember=remember, pattern=pattern)
        if decision == "respond":
            if message is None:
                raise InvalidCall("a response needs the message the agent gets in place of the tool's result")
            return self.respond(request, approver=by, message=message, digest=digest, signing=signing)
        raise InvalidCall(f"unknown decision {decision!r}: one of {', '.join(DECISIONS)}")

    def forget(self, standing: int, *, by: str, reason: str | None = None, signing: Signing | None = None) -> list[int]:
        """Revoke the standing decision recorded at seq `standing` (a `forgotten` event): from
        now on it decides no call, and the calls it covered are asked about again. The calls it
        allowed that have not started are cancelled in the same write (a `cancelled` event each,
        by `by`, signed with `signing` when given, as `cancel` signs): no person approved them,
        and the one who did no longer does. `by` is the authenticated caller: a reviewer, or an
        operator (forgetting never lets anything run). Returns the requests cancelled. Raises
        NotStanding (nothing appended) when `standing` is no standing decision in force,
        InvalidCall for an empty `by`."""
        _request_id(standing)
        _text("by", by)
        _text("reason", reason, optional=True, empty_ok=True)
        cancelled: list[int] = []
        with self._lock:
            def step() -> list[tuple[ev.Event, Any]]:
                cancelled.clear()
                ts = self._now()
                event = ev.Forgotten(ts=ts, standing=standing, by=by, reason=reason)
                self.workflow.check(event)
                items: list[tuple[ev.Event, Any]] = [(event, None)]
                sd = self.workflow.standing[standing]
                seq, prev = self._seen[0] + 1, self._seen[1]
                why = f"the standing decision at seq {standing} that allowed it was forgotten" + (
                    f": {reason}" if reason else "")
                for request in sorted(sd.open):
                    state = self.workflow.get(request)
                    if state is None or state.status != "allowed" or request in self._running:
                        continue
                    # each signed decision names the hash of the event before it, as the ledger
                    # will stamp it (seq and prev; the ts is already at least the head's)
                    prev = hashlib.sha256(ev.encode_event(msgspec.structs.replace(items[-1][0], seq=seq, prev=prev))).hexdigest()
                    seq += 1
                    stop: ev.Event = ev.Cancelled(ts=ts, request=request, by=by, reason=why)
                    if signing is not None:
                        stop = decisions.sign(stop, signing.key, signer=signing.signer, ledger_id=self._ledger_id,
                                              basis=state.data_seq, args=state.digest, prev=prev)
                    self.workflow.check(stop)
                    items.append((stop, None))
                    cancelled.append(request)
                return items

            self._commit(step)
        return list(cancelled)

    def expire(self) -> list[int]:
        """Apply the timeout's safe default (reject) to every pending request whose deadline has
        passed, in one write. Returns their ids. Silence never approves. (Every other step, and
        `refresh`, `get`, `pending` and `wait`, expire what is due as well.)"""
        with self._lock:
            self._expired = []
            self._commit(lambda: [])
            return list(self._expired)

    # --- executing ----------------------------------------------------------------------------

    def execute(self, request: int, fn: Callable[[dict], Any], *, executor: str | None = None,
                keep_result: bool = False) -> Execution:
        """Run `fn(arguments)` once, with the approved arguments, and record the outcome.

        `execution_started` is durable before `fn` runs. A second call returns the recorded
        outcome without running anything (`replayed=True`), with the result itself when the first
        run kept it. `keep_result`: record the result beside its digest (a JSON value other than
        None, under RESULT_ROOM bytes short of a ledger line; otherwise its digest only), so that
        a framework that re-runs a step after a restart gets the first run's result back. Keep
        only results without personal data: a kept result cannot be redacted yet.
        An exception from `fn` is recorded as outcome "error" and returned in the Execution, not
        raised. Raises NotApproved (and the other Violations) when the request may not run,
        ExecutionUnknown when an earlier run (in any process) started and never recorded its
        outcome, or is running in another process.
        """
        started = self._start(request, executor, running_here=True)
        if isinstance(started, Execution):
            return started
        return self._run_started(request, started[0], started[1], fn, keep_result)

    def result(self, request: int) -> Execution:
        """The recorded outcome of an executed request, with its kept result (see `execute`).
        Raises UnknownRequest, and KeyError when the request has no recorded outcome yet."""
        with self._lock:
            state = self._open_state(request)
            if state.status != "executed":
                raise KeyError(request)
            return self._replayed(state)

    def _replayed(self, state: RequestState) -> Execution:
        """The Execution an executed request's events record, its kept result read from the
        ledger (a corrupt line raises as the Ledger does). Under the lock."""
        kept, result = False, None
        if state.result_digest is not None and state.seqs:
            record = self.ledger.records_at([state.seqs[-1]]).get(state.seqs[-1])
            if record is not None and isinstance(record.event, ev.Executed) and record.data != b"null":
                value = msgspec.json.decode(record.data).get("result")
                if value_digest(value) == state.result_digest:  # the line was checked when folded; checked again
                    kept, result = True, value
        return Execution(state.request, state.outcome or "", state.result_digest, state.error, replayed=True,
                         result=result, result_kept=kept)

    def start(self, request: int, *, executor: str | None = None) -> tuple[str, dict] | Execution:
        """Begin an execution the caller runs itself, elsewhere (an agent of the approval
        service): record `execution_started`, durably, and return (the digest of the arguments
        to run with, a copy of those arguments: the approved, possibly edited ones). The caller
        then reports the outcome with `finish`. A request already executed returns its recorded
        Execution (`replayed=True`) and starts nothing. Raises as `execute`; a request started
        and not finished raises ExecutionUnknown: it never runs twice."""
        return self._start(request, executor, running_here=False)

    def _start(self, request: int, executor: str | None, *, running_here: bool) -> tuple[str, dict] | Execution:
        _request_id(request)
        _text("executor", executor, optional=True)
        with self._lock:
            outcome: list[Execution] = []
            args: dict = {}

            def step() -> list[tuple[ev.Event, Any]]:
                nonlocal args
                state = self.workflow.get(request)
                if state is None:
                    raise UnknownRequest(f"request {request} was never proposed", request)
                if state.status == "executed":
                    outcome.append(self._replayed(state))
                    return []
                if request in self._running:
                    raise ExecutionInProgress(f"request {request} is running now; its outcome is not recorded yet")
                if state.status == "executing":
                    raise ExecutionUnknown(
                        f"request {request} started running and its outcome was never recorded (or it is running in "
                        "another process); it will not run again"
                    )
                started = ev.ExecutionStarted(ts=self._now(), request=request, args_digest=state.digest, executor=executor)
                self.workflow.check(started)  # raises when the request may not run
                if self.signers is not None and (
                        (state.approvers and (problem := self._signature_problem(state)))
                        or (state.standing is not None and (problem := self._standing_problem(state.standing)))):
                    raise UnsignedDecision(f"request {request} will not run: {problem} (a decision not made through "
                                           "countersign, or by someone the roster does not list)")
                if self.trusted_policies is not None and state.policy_digest not in self.trusted_policies:
                    raise UnknownPolicy(f"request {request} will not run: it was decided by a policy this Gate does "
                                        f"not hold (digest {state.policy_digest[:12]}…), not by the one it decides with")
                # The tool gets its own copy of the approved arguments, made before anything is
                # written: nothing that can fail may stand between the start and the tool's run.
                # They must be the ones the start names (an edit may have replaced a cached copy).
                cached = self._data.get(request)  # what is read from the ledger is checked there already
                if cached is not None and value_digest(cached["args"]) != state.digest:
                    self._data.pop(request)
                args = copy.deepcopy(self._call_data(request)["args"])
                if running_here:
                    claimed.append(request)
                    self._running.add(request)  # under the lock, before any other step can see the start
                return [(started, None)]

            claimed: list[int] = []
            try:
                self._commit(step)
            except BaseException:
                for r in claimed:  # the start was not recorded: nothing runs
                    self._running.discard(r)
                raise
            if outcome:
                return outcome[0]
            return self._open_state(request).digest, args

    def finish(self, request: int, *, outcome: str, result: Any = None, error: str | None = None,
               keep_result: bool = False, result_digest: str | None = None) -> Execution:
        """Record the outcome of an execution begun with `start`: `outcome` "ok" (with the
        tool's JSON `result`, whose structural digest is recorded, or None; with `keep_result`
        the result itself too, as `execute` says; or, instead of the result, its
        `result_digest` alone, 64 lowercase hex digits, docs/ledger-format.md section 4, which
        the executor computed: a result never sent leaves the executor) or "error" (with
        `error`, the failure's text, cut to ERROR_CHARS). The call has run by now, so what it
        returned never stops its outcome from being recorded, as in `execute`: a result that is
        not JSON (a lone surrogate, NaN, a set, nested too deeply) is an "ok" outcome without a
        digest, and an error's lone surrogates are recorded as backslash escapes. Raises
        InvalidCall for another outcome, an "error" without its text, an "ok" with one, or a
        malformed `result_digest` (the caller's own mistakes), NotStarted when the request was
        not started, AlreadyExecuted when its outcome is recorded already (an outcome is
        reported once), UnknownRequest."""
        _request_id(request)
        if outcome not in ("ok", "error"):
            raise InvalidCall(f"an outcome is \"ok\" or \"error\", not {outcome!r}")
        data = None
        if outcome == "error":
            if not isinstance(error, str) or not error.strip():
                raise InvalidCall("an \"error\" outcome needs the failure's text")
            error_text, result_digest = _error_text(error), None
        else:
            if error is not None:
                raise InvalidCall("an \"ok\" outcome carries no error")
            if result_digest is not None:
                if result is not None or keep_result:
                    raise InvalidCall("give the result or its digest, not both (a kept result needs the result)")
                if not isinstance(result_digest, str) or not _HEX64.fullmatch(result_digest):
                    raise InvalidCall("a result digest is 64 lowercase hexadecimal digits")
            else:  # what `execute` records for the same result (never raises)
                result_digest, data = _result_record(result, keep_result)
            error_text = None
        with self._lock:
            def step() -> list[tuple[ev.Event, Any]]:
                state = self.workflow.get(request)
                if state is None:
                    raise UnknownRequest(f"request {request} was never proposed", request)
                if state.status == "executed":
                    raise AlreadyExecuted(f"request {request}'s outcome is recorded already ({state.outcome})", request)
                if request in self._running:
                    raise ExecutionInProgress(f"request {request} is running in this process, which records its outcome")
                done = ev.Executed(ts=self._now(), request=request, args_digest=state.digest, outcome=outcome,
                                   result_digest=result_digest, error=error_text)
                self.workflow.check(done)
                return [(done, data)]

            self._commit(step)
        return Execution(request, outcome, result_digest, error_text, replayed=False, result=result,
                         result_kept=data is not None)

    def _run_started(self, request: int, digest: str, args: dict, fn: Callable[[dict], Any],
                     keep_result: bool = False) -> Execution:
        """Run `fn(args)` for a request whose `execution_started` is durable (and which is in
        `_running`), and record the outcome."""
        # The tool runs outside the Gate's lock, so that a slow tool does not hold up every other
        # proposal and decision; `_running` keeps a second execute() of this request out meanwhile.
        try:
            try:
                result, exception = fn(args), None
            except Exception as exc:  # the tool's failure is an outcome to record, not a Gate failure
                result, exception = None, exc
        except BaseException:  # interrupted: the outcome stays unknown, and the call never runs again
            self._release(request)
            raise
        return self._record_run(request, digest, result, exception, keep_result)

    def _release(self, request: int) -> None:
        with self._lock:
            self._running.discard(request)

    def _record_run(self, request: int, digest: str, result: Any, exception: BaseException | None,
                    keep_result: bool) -> Execution:
        """Record the outcome of a tool this process ran for `request` (in `_running`): "ok" with
        `result`, or "error" with `exception`; then release the request's running mark, whatever
        happens. (AsyncGate awaits the tool between `_start` and this.)"""
        outcome_text = "ok" if exception is None else "error"
        error = None if exception is None else _error_text(f"{type(exception).__name__}: {exception}")
        try:
            result_digest, data = _result_record(result, keep_result) if exception is None else (None, None)
            with self._lock:
                def step() -> list[tuple[ev.Event, Any]]:
                    state = self.workflow.get(request)
                    if state is not None and state.status == "executed":
                        # another Gate (or process) reported an outcome while the tool ran: the
                        # first one recorded stands; a second would make the ledger unlawful
                        return []
                    done = ev.Executed(ts=self._now(), request=request, args_digest=digest, outcome=outcome_text,
                                       result_digest=result_digest, error=error)
                    self.workflow.check(done)
                    return [(done, data)]

                self._commit(step)
        finally:
            self._release(request)
        return Execution(request, outcome_text, result_digest, error, replayed=False, result=result, exception=exception,
                         result_kept=data is not None)

    def run(self, tool: str, args: dict, fn: Callable[[dict], Any], *, proposer: str, run: str | None = None,
            context: dict | None = None, call_id: str | None = None, executor: str | None = None,
            keep_result: bool = False) -> "Run":
        """Decide a call and, when the policy allows it, run it at once: the proposal and the
        start of its execution are one durable write (one sync), its outcome a second, where
        `propose` then `execute` make three (`keep_result` as there). An ask or a deny runs nothing: the Run holds the
        Proposal only (`wait` for the decision, then `execute`). A repeated `call_id` runs what
        `execute` would (nothing twice: a run already recorded is replayed). Raises as `propose`
        and `execute`."""
        _text("executor", executor, optional=True)
        proposal, started = self._propose(tool, args, proposer=proposer, run=run, context=context, call_id=call_id,
                                          start=True, executor=executor)
        if started is not None:
            return Run(proposal, self._run_started(proposal.request, proposal.args_digest, started, fn, keep_result))
        if proposal.duplicate and proposal.status in ("allowed", "approved", "executed"):
            return Run(proposal, self.execute(proposal.request, fn, executor=executor, keep_result=keep_result))
        return Run(proposal, None)

    def close(self) -> None:
        """Write the snapshot (what changed since the last save) and close the ledger (give back
        this Gate's share of its process's writer). A second close does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._broken is None:
                self._save()
            if self._snapshot is not None:
                self._snapshot.close()
        self.ledger.close()

    def __enter__(self) -> "Gate":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
