"""The approval workflow as a fold over ledger events: the same code checks a live step and
replays a ledger.

`Workflow.check(event)` raises a `Violation` (a specific subclass per rule) when the event would
break a rule, and changes nothing; `Workflow.apply(seq, event)` records an event that passed.
The Gate calls `check`, appends, then `apply`; `ledger verify` calls both for every event, so
a step the Gate refuses is exactly a step the verifier flags.

The rules (each a Violation subclass, `code` in parentheses):
- an event names a request that was proposed (unknown-request);
- nothing happens to a request after it is final: denied, rejected, responded, expired,
  cancelled or executed (request-final);
- only an ask is interrupted, once (not-interruptible);
- decisions (approve, edit, reject, respond) need a pending request (not-pending), a decision the
  requirements allow (decision-not-allowed), an approver other than the proposer (self-approval)
  who is among the allowed approvers (not-an-approver), and a time before the deadline
  (deadline-passed);
- an approval names the current arguments digest (stale-digest), once per approver and digest
  (duplicate-approval); every quorum of the requirements counts the distinct approvers of the
  current digest that it admits;
- an edit is one the policy did not deny (edit-denied);
- expiry only at or after the deadline, of a pending request (not-expired), whose requirements
  have no next stage (escalates);
- escalation (an `escalated` event) likewise only at or after the deadline of a pending request
  (not-pending, not-expired) whose requirements have a next stage (no-escalation), recording
  exactly that stage: its number, its requirements (Requirements.escalated) and the deadline its
  timeout gives from the event's ts (escalation-mismatch); the approvals given before it count no
  more (the new stage counts afresh);
- execution starts only when the request is allowed or its quorum approved the current digest
  (not-approved), with exactly the approved digest (digest-mismatch), at most once
  (already-executed); `executed` follows its own `execution_started` with the same digest
  (not-started, digest-mismatch);
- a redaction names an earlier event that stores data, a proposal or an edit (redaction-target),
  of a request that is final, so its arguments are no longer needed (redaction-too-early), and a
  field neither redacted before nor inside a field redacted before (already-redacted);
  `context.…` only for a proposal;
- a `remembered` event (a standing decision) is by someone who may decide the pending request,
  in a scope its requirements admit, and only an approval that alone meets the requirements, or
  a rejection, may stand (standing-decision), of a request decided by the policy in force (the
  last `policy` event's digest, when there is one); it stands once its own decision (the same
  reviewer, the same kind) is the request's next event, and until a `forgotten` event names it
  or a `policy` event names another digest (for good);
  a proposal recorded as decided by a standing decision names exactly the one `covering` finds
  for it (not-covered); a `forgotten` event names a standing decision in force (not-standing);
- a decision's `signature`, a `roster` event and a `policy` event only in a
  countersign-ledger/2 ledger (format-version). Signatures themselves are checked against a roster by ledger verify
  (ledger.proof.decisions), not here: the workflow has no roster.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable
from typing import Protocol
from dataclasses import dataclass, field

import msgspec

from dsl.requirements import Remember, Requirements, strictest
from ledger import events as ev
from ledger.clock import add_seconds

LAST_TS = "9999-12-31T23:59:59.999999Z"  # the latest time the ledger can spell: a deadline past it waits for a person


def deadline_after(ts: str, seconds: int) -> str:
    """`ts` plus `seconds` as the ledger spells it, or LAST_TS when that is past year 9999."""
    try:
        return add_seconds(ts, seconds)
    except (OverflowError, ValueError):
        return LAST_TS


FINAL = ("denied", "rejected", "responded", "expired", "cancelled", "executed")
_FINAL_CODE = {status: code for code, status in enumerate(FINAL, start=1)}  # one byte per final request


class Violation(Exception):
    """An event that breaks a workflow rule. `code` names the rule; `request` the request."""

    code = "violation"

    def __init__(self, message: str, request: int | None = None):
        super().__init__(message)
        self.message = message
        self.request = request


class UnknownRequest(Violation):
    code = "unknown-request"


class RequestFinal(Violation):
    code = "request-final"


class NotInterruptible(Violation):
    code = "not-interruptible"


class NotPending(Violation):
    code = "not-pending"


class DecisionNotAllowed(Violation):
    code = "decision-not-allowed"


class SelfApproval(Violation):
    code = "self-approval"


class NotAnApprover(Violation):
    code = "not-an-approver"


class DeadlinePassed(Violation):
    code = "deadline-passed"


class StaleDigest(Violation):
    code = "stale-digest"


class DuplicateApproval(Violation):
    code = "duplicate-approval"


class EditDenied(Violation):
    code = "edit-denied"


class NotExpired(Violation):
    code = "not-expired"


class MustEscalate(Violation):
    """An `expired` event for a request whose requirements have a next stage: it escalates."""

    code = "escalates"


class NoEscalation(Violation):
    """An `escalated` event for a request whose requirements have no next stage."""

    code = "no-escalation"


class EscalationMismatch(Violation):
    """An `escalated` event whose stage, requirements or deadline are not the next stage's."""

    code = "escalation-mismatch"


class NotApproved(Violation):
    code = "not-approved"


class DigestMismatch(Violation):
    code = "digest-mismatch"


class AlreadyExecuted(Violation):
    code = "already-executed"


class NotStarted(Violation):
    code = "not-started"


class MisplacedGenesis(Violation):
    code = "misplaced-genesis"


class RedactionTarget(Violation):
    code = "redaction-target"


class RedactionTooEarly(Violation):
    code = "redaction-too-early"


class AlreadyRedacted(Violation):
    code = "already-redacted"


class StandingDecision(Violation):
    """A `remembered` event that may not stand (see the module docstring)."""

    code = "standing-decision"


class NotCovered(Violation):
    """A proposal recorded as decided by a standing decision that does not cover it."""

    code = "not-covered"


class NotStanding(Violation):
    """A `forgotten` event naming no standing decision in force (never made, expired, or
    forgotten already)."""

    code = "not-standing"


class Standing(msgspec.Struct, kw_only=True):
    """A standing decision (ledger.events.Remembered), as the Workflow indexes it. `live` once its
    own decision followed it. `proposer` and `rules` are those of the request it was made on
    (its proposer; the ids of the rules that decided it): it covers only that proposer's calls
    that the same set of rules asked about. `open`: the requests it allowed that have neither
    started nor ended (what forgetting it cancels)."""

    seq: int
    request: int
    proposer: str
    rules: tuple[str, ...]
    approver: str
    decision: str
    tool: str
    policy_digest: str
    scope: Remember
    within: str
    args_digest: str | None
    reason: str | None
    ts: str
    live: bool = False
    open: set[int] = msgspec.field(default_factory=set)

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        """Where Workflow indexes it: policy digest, tool, proposer, scope, run or session ("" for
        a time), arguments digest ("" for any)."""
        return (self.policy_digest, self.tool, self.proposer, self.scope.scope,
                "" if self.scope.scope == "until" else self.within, self.args_digest or "")


class FormatVersion(Violation):
    """What version 2 of the format adds (a signed decision, a `roster` or a `policy` event) in a
    ledger whose genesis says version 1."""

    code = "format-version"


_LOG_V2 = (ev.RosterRecorded, ev.PolicyLoaded, ev.Remembered, ev.Forgotten, ev.Escalated)  # the events that version 2 adds
# The kinds that do not step an existing request (every event kind is a class with no subclass)
_NOT_OF_A_REQUEST = frozenset({ev.Genesis, ev.Proposed, ev.Recovered, ev.RosterRecorded, ev.PolicyLoaded, ev.Forgotten,
                               ev.Redacted})


class Tally:
    """The distinct approvers of a request's current arguments, counted per quorum as they come:
    `met` is `requirements.met_by(approvers)` and `allows(who)` is `requirements.allows(who)`,
    without re-counting. met_by counts every quorum over every approval, so N approvals of one
    request cost O(N² x identities) and a ledger of a few MB could keep verify busy for hours; here
    an approval costs one step per quorum that names the approver. The quorums that admit anyone
    count every approver, so one count serves them all: the distinct approvers against the largest
    of their counts. (ledger/_native.c keeps the same tally.)"""

    __slots__ = ("requirements", "approvers", "_quorums_of", "_counts", "_unmet", "_anyone", "_anyone_needed")

    def __init__(self, requirements: Requirements):
        self.requirements = requirements
        self.approvers: set[str] = set()
        self._quorums_of: dict[str, list[int]] = {}  # identity → the named quorums that list it
        self._counts = [0] * len(requirements.quorums)
        self._unmet = 0  # named quorums whose count is not reached
        self._anyone = False
        self._anyone_needed = 0
        for i, quorum in enumerate(requirements.quorums):
            if quorum.approvers is None:
                self._anyone = True
                self._anyone_needed = max(self._anyone_needed, quorum.count)
                continue
            if quorum.count > 0:
                self._unmet += 1
            for who in set(quorum.approvers):  # a name listed twice counts once (Quorum.admits)
                self._quorums_of.setdefault(who, []).append(i)

    def allows(self, who: str) -> bool:
        return self._anyone or who in self._quorums_of

    def add(self, who: str) -> None:
        """Count an approval by `who` (a second one by the same identity counts nothing)."""
        if who in self.approvers:
            return
        self.approvers.add(who)
        quorums = self.requirements.quorums
        for i in self._quorums_of.get(who, ()):
            self._counts[i] += 1
            if self._counts[i] == quorums[i].count:
                self._unmet -= 1

    @property
    def met(self) -> bool:
        return self._unmet == 0 and len(self.approvers) >= self._anyone_needed


@dataclass
class RequestState:
    """Everything known about one request, folded from its events.

    `status` is one of: allowed, denied, interrupting (an ask whose interrupt is not yet recorded),
    pending, approved, executing, executed, rejected, responded, expired, cancelled.
    Timestamps are ledger timestamps (UTC text).
    """

    request: int
    tool: str
    run: str | None
    proposer: str
    call_id: str | None
    effect: str
    rules: tuple[str, ...]
    reasons: tuple[str, ...]
    proposed_at: str
    digest: str
    original_digest: str
    status: str
    context_digest: str = ""
    requirements: Requirements | None = None
    deadline: str | None = None
    approvals: dict[str, str] = field(default_factory=dict)  # approver → ts, for `digest` only
    approvers: list[str] = field(default_factory=list)  # everyone who approved or edited, in order
    edits: int = 0
    decision: str | None = None  # approve, reject, respond, expire, cancel
    decided_at: str | None = None
    decided_by: str | None = None
    reason: str | None = None  # a rejection reason, a response, an expiry or cancel message
    executed_at: str | None = None
    outcome: str | None = None
    result_digest: str | None = None
    error: str | None = None
    data_seq: int = 0  # the seq of the event holding the current arguments: the proposal, or the last edit
    policy_digest: str = ""  # the digest of the policy that decided the proposal
    seqs: list[int] = field(default_factory=list)  # the seqs of the request's events, in order
    standing: int | None = None  # the seq of the standing decision that decided the proposal, if one did
    remembering: int | None = None  # the seq of a `remembered` event whose decision has not followed yet
    stage: int = 1  # the stage of an escalating ask in force (1 until an `escalated` event)

    @property
    def final(self) -> bool:
        return self.status in FINAL

    def tally(self) -> Tally:
        """`approvals` counted against `requirements` (which must be set). Kept beside the fields,
        not among them (a projection stores the fields), and rebuilt from them when it no longer
        matches: after a decode, an edit, or on a copy."""
        tally = self.__dict__.get("_tally")
        if tally is None or tally.requirements is not self.requirements or len(tally.approvers) != len(self.approvals):
            assert self.requirements is not None
            tally = Tally(self.requirements)
            for who in self.approvals:
                tally.add(who)
            self.__dict__["_tally"] = tally
        return tally

    @property
    def executable(self) -> bool:
        return self.status in ("allowed", "approved")


def decided_by_whom(state: RequestState) -> str:
    """` (by NAME at TS)` for a decided request: what a reviewer who lost a race is told."""
    if state.decided_at is None:
        return ""
    done = _DECIDED.get(state.decision or "", "decided")
    return f" ({done} by {state.decided_by} at {state.decided_at})" if state.decided_by else f" ({done} at {state.decided_at})"


_DECIDED = {"approve": "approved", "reject": "rejected", "respond": "answered", "expire": "expired", "cancel": "cancelled"}


class Archive(Protocol):
    """Where a Workflow finds what it does not hold in memory (a Gate's snapshot,
    ledger.workflow.snapshot): the state of a request, the request of a call id or of an edit's
    seq, the paths redacted in an event's data. Each answers as of the events the Workflow has
    folded; None (or empty) when there is none."""

    def load(self, request: int) -> RequestState | None: ...

    def request_of(self, call_id: str) -> int | None: ...

    def edit_request(self, seq: int) -> int | None: ...

    def redacted_paths(self, target: int) -> list[str]: ...


class Workflow:
    """The states of all requests of one ledger. `requests[seq]` is the request proposed at seq.

    `keep_final=False` is for replaying a whole ledger once (verify): a request's state is dropped
    when it becomes final, keeping only its final status in one byte at index `seq` (no rule
    needs more of it), so memory is about one byte per event plus the requests still open, instead
    of about 1.5 KB per request. `requests` then holds only the open requests, `by_call_id` is not
    kept (only the Gate uses it), and the map of edits (which a redaction may name) keeps only the
    seqs in `edit_targets` when that is given. `status_counts()` works in both modes.

    `archive` (with keep_final=True): `requests`, `by_call_id`, `edits` and `redacted` hold a
    working set, and whatever is not there is asked of the archive (`get`, `request_of`, ...);
    `forget` drops what the archive holds from memory. A Gate over a large ledger keeps its
    pending requests and what changed since its last snapshot, not the whole history."""

    def __init__(self, *, keep_final: bool = True, edit_targets: Collection[int] | None = None,
                 archive: Archive | None = None) -> None:
        self.requests: dict[int, RequestState] = {}
        self.by_call_id: dict[str, int] = {}
        self.seen_genesis = False
        self.edits: dict[int, int] = {}  # seq of an edited event → its request
        self.redacted: dict[int, list[str]] = {}  # target seq → the field paths redacted so far
        self.keep_final = keep_final
        self._edit_targets = None if keep_final or edit_targets is None else frozenset(edit_targets)
        self._closed = bytearray()  # with keep_final False: seq of a request → _FINAL_CODE of its status, 0 if none
        # The pending requests (interrupted, not yet decided) by request, so that expiring them
        # does not scan every request ever made (the Gate keeps them all).
        self.pending: dict[int, RequestState] = {}
        # Asks whose interrupt is not recorded yet (the Gate writes both in one commit).
        self.interrupting: dict[int, RequestState] = {}
        self._deadlines: list[tuple[str, int]] = []  # (deadline, request) of pending requests: a heap, stale entries skipped
        self.archive = archive
        # The genesis's format, once folded (a Gate opened from its snapshot is told it): a
        # version 1 ledger holds no signature and no roster event. None: not known, not checked.
        self.format: str | None = None
        # The digest the last `roster` event names (a Gate opened from its snapshot is told it):
        # the roster a later decision is checked against. None: no roster event yet.
        self.roster: str | None = None
        # The digest the last `policy` event names (a Gate opened from its snapshot is told it):
        # the policy in force, as the ledger records it. None: no policy event yet.
        self.policy_digest: str | None = None
        # The digests of the policies whose text a `policy` event keeps (ledger.pinning; a Gate
        # opened from its snapshot is told them): a Gate pins its policy once, before it decides.
        self.pinned: set[str] = set()
        # The standing decisions (`remembered` events) that may still cover a call, by seq, and
        # by (policy digest, tool, scope, run or session, arguments: Standing.key) so that finding
        # the ones a proposal may meet costs the few made for its tool, its run or session and its
        # arguments (or any), not a scan of history. Those that lasted until a time are dropped
        # once a proposal comes after it.
        self.standing: dict[int, Standing] = {}
        self._standing_by: dict[tuple[str, str, str, str, str, str], list[int]] = {}

    def add_standing(self, standing: Standing) -> None:
        """Index a standing decision (from a `remembered` event, or a snapshot)."""
        self.standing[standing.seq] = standing
        self._standing_by.setdefault(standing.key, []).append(standing.seq)

    def covering(self, *, tool: str, policy_digest: str, run: str | None, session: str | None, args_digest: str,
                 ts: str, proposer: str, rules: Iterable[str], requirements: Requirements | None) -> int | None:
        """The seq of the standing decision that decides a call the policy answered `ask` with
        `requirements`, or None. It covers the call when: it is live, for the same tool and policy
        digest, made on a request of the same proposer whose deciding rules (`rules`: their ids)
        are the same set as the call's, the requirements' `remember` admits its scope, the call
        is in its scope (the same run, the same session, or `ts` before its time), its
        `args_digest` is None or the call's, its reviewer is not the proposer, and the
        requirements let that reviewer alone decide so
        (an approval: "approve" offered and one approval by them meets every quorum; a
        rejection: some quorum admits them). Among those, a rejection before an approval, then
        the latest. A function of its arguments and the events folded so far, nothing else."""
        allowance = requirements.rememberable if requirements is not None else None
        if allowance is None or not self.standing:
            return None
        places = [("until", "")]
        if run is not None:
            places.append(("run", run))
        if session is not None:
            places.append(("session", session))
        keys = [(policy_digest, tool, proposer, scope, within, args) for scope, within in places
                for args in ("", args_digest)]
        asked = frozenset(rules)
        best: tuple[bool, int] | None = None
        for key in keys:
            seqs = self._standing_by.get(key)
            if not seqs:
                continue
            if key[3] == "until":  # proposals come in time order: a time passed stays passed
                seqs[:] = [s for s in seqs if ts < self.standing[s].within or not self._drop_standing(s)]
            for seq in seqs:
                sd = self.standing[seq]
                if not sd.live or not allowance.admits(sd.scope) or sd.args_digest not in (None, args_digest):
                    continue
                if sd.approver == proposer or (sd.scope.scope == "until" and not ts < sd.within):
                    continue
                if sd.proposer != proposer or frozenset(sd.rules) != asked:
                    continue
                assert requirements is not None
                if sd.decision == "approve":
                    if "approve" not in requirements.decisions or not requirements.met_by((sd.approver,)):
                        continue
                elif not requirements.allows(sd.approver):
                    continue
                rank = (sd.decision == "reject", seq)
                if best is None or rank > best:
                    best = rank
        return None if best is None else best[1]

    def _drop_standing(self, seq: int) -> bool:
        del self.standing[seq]
        return True

    def _end_standing(self, seq: int) -> None:
        """Drop a standing decision from the indexes: it covers no call from now on."""
        sd = self.standing.pop(seq, None)
        if sd is not None:
            seqs = self._standing_by.get(sd.key, [])
            if sd.seq in seqs:
                seqs.remove(sd.seq)
            if not seqs:
                self._standing_by.pop(sd.key, None)

    def get(self, request: int) -> RequestState | None:
        """The state of a request (from memory, else the archive, then kept in memory), or None
        when it was never proposed (or its state was dropped: keep_final=False)."""
        state = self.requests.get(request)
        if state is None and self.archive is not None:
            state = self.archive.load(request)
            if state is not None:
                self.requests[request] = state
                if state.status == "pending":
                    self.add_pending(state)
                elif state.status == "interrupting":
                    self.interrupting[request] = state
        return state

    def add_pending(self, state: RequestState) -> None:
        """Count a request as pending (its deadline kept in a heap, for `due`)."""
        self.pending[state.request] = state
        if state.deadline is not None:
            heap = self._deadlines
            if len(heap) > 2 * len(self.pending) + 64:  # mostly requests no longer pending: start again
                heap[:] = [(s.deadline, r) for r, s in self.pending.items() if s.deadline is not None]
                heapq.heapify(heap)
            else:
                heapq.heappush(heap, (state.deadline, state.request))

    def due(self, now: str) -> list[RequestState]:
        """The pending requests whose deadline is at or before `now`, oldest request first: the
        earliest deadlines are looked at, not every pending request."""
        heap, found = self._deadlines, []
        while heap and heap[0][0] <= now:
            deadline, request = heapq.heappop(heap)
            state = self.pending.get(request)
            if state is not None and state.deadline == deadline:
                found.append(state)
        for state in found:  # still pending until their expiry is applied
            heapq.heappush(heap, (state.deadline, state.request))
        return sorted(found, key=lambda s: s.request)

    def request_of(self, call_id: str) -> int | None:
        """The request proposed with `call_id`, or None."""
        request = self.by_call_id.get(call_id)
        if request is None and self.archive is not None:
            request = self.archive.request_of(call_id)
        return request

    def edit_request(self, seq: int) -> int | None:
        """The request of the edit recorded at `seq`, or None when `seq` is not an edit."""
        request = self.edits.get(seq)
        if request is None and self.archive is not None:
            request = self.archive.edit_request(seq)
        return request

    def redacted_paths(self, target: int) -> list[str]:
        """The field paths redacted so far in the data of the event at `target`, in order."""
        paths = self.redacted.get(target)
        if paths is None and self.archive is not None:
            paths = self.archive.redacted_paths(target) or None
        return paths or []

    def forget(self, requests: Iterable[int]) -> None:
        """Drop these requests' states from memory, and the indexes (call ids, edits,
        redactions): the archive holds them. A pending request is kept (the queue is in memory)."""
        for request in requests:
            state = self.requests.get(request)
            if state is not None and request not in self.pending and state.status != "interrupting":
                del self.requests[request]
        self.by_call_id.clear()
        self.edits.clear()
        self.redacted.clear()

    def final_status(self, request: int) -> str | None:
        """The final status of a request whose state was dropped (keep_final=False), else None."""
        code = self._closed[request] if 0 <= request < len(self._closed) else 0
        return FINAL[code - 1] if code else None

    def status_of(self, request: int) -> str | None:
        """The status of a request, or None when it was never proposed."""
        state = self.get(request)
        return state.status if state is not None else self.final_status(request)

    def status_counts(self) -> dict[str, int]:
        """How many requests are in each status (statuses with none left out)."""
        return count_statuses(
            (state.status for state in self.requests.values()),
            ((status, self._closed.count(code)) for status, code in _FINAL_CODE.items()),
        )

    def _drop_if_final(self, state: RequestState) -> None:
        if self.keep_final or state.status not in _FINAL_CODE:
            return
        request = state.request
        if len(self._closed) <= request:
            self._closed.extend(bytes(request + 1 - len(self._closed)))
        self._closed[request] = _FINAL_CODE[state.status]
        del self.requests[request]

    # --- checking -----------------------------------------------------------------------------

    def _state(self, request: int) -> RequestState:
        state = self.get(request)
        if state is None:
            dropped = self.final_status(request)
            if dropped is not None:
                raise RequestFinal(f"request {request} is already {dropped}", request)
            raise UnknownRequest(f"request {request} was never proposed", request)
        if state.final:
            raise RequestFinal(f"request {request} is already {state.status}", request)
        return state

    def _decider(self, state: RequestState, who: str, decision: str, ts: str) -> None:
        if state.status != "pending":
            raise NotPending(f"request {state.request} is {state.status}, not pending a decision", state.request)
        reqs = state.requirements
        assert reqs is not None
        if decision not in reqs.decisions:
            raise DecisionNotAllowed(
                f"'{decision}' is not among the allowed decisions ({', '.join(reqs.decisions)})", state.request
            )
        if who == state.proposer:
            raise SelfApproval(f"{who} proposed request {state.request} and cannot decide it", state.request)
        if not state.tally().allows(who):
            raise NotAnApprover(f"{who} is not among the approvers of request {state.request}", state.request)
        if state.deadline is not None and ts >= state.deadline:
            raise DeadlinePassed(f"request {state.request} expired at {state.deadline}", state.request)

    def check(self, event: ev.Event) -> None:
        """Raise the Violation `event` would commit; change nothing."""
        if self.format == ev.FORMAT_V1 and (
            isinstance(event, _LOG_V2) or getattr(event, "signature", msgspec.UNSET) is not msgspec.UNSET
            or getattr(event, "remembered", msgspec.UNSET) is not msgspec.UNSET
        ):
            what = (f"a {event.__struct_config__.tag} event" if isinstance(event, _LOG_V2)
                    else "a proposal decided by a standing decision" if isinstance(event, ev.Proposed) else "a signed decision")
            raise FormatVersion(f"{what} needs a {ev.FORMAT} ledger; this one is {ev.FORMAT_V1}", getattr(event, "request", None))
        if self.format == ev.FORMAT_V1 and isinstance(event, (ev.Interrupted, ev.Edited)) and event.requirements.stages:
            raise FormatVersion(f"escalating requirements need a {ev.FORMAT} ledger; this one is {ev.FORMAT_V1}", event.request)
        if type(event) in _NOT_OF_A_REQUEST:  # one set lookup instead of the chain below for most events
            if isinstance(event, ev.Genesis):
                if self.seen_genesis or self.requests or self._closed:
                    raise MisplacedGenesis("a genesis event may only open the ledger")
                return
            if isinstance(event, ev.Proposed):
                if event.remembered is not msgspec.UNSET:
                    self._check_covered(event)
                return
            if isinstance(event, (ev.Recovered, ev.RosterRecorded, ev.PolicyLoaded)):
                return
            if isinstance(event, ev.Forgotten):
                sd = self.standing.get(event.standing)
                if sd is None or (sd.scope.scope == "until" and not event.ts < sd.within):
                    raise NotStanding(f"seq {event.standing} is no standing decision in force (never made, expired, or "
                                      "forgotten already)", sd.request if sd is not None else None)
                return
            if isinstance(event, ev.Redacted):
                self._check_redaction(event)
                return
        state = self._state(event.request)
        # the kinds are disjoint: the most frequent are tested first
        if isinstance(event, ev.ExecutionStarted):
            if state.status == "executing":
                raise AlreadyExecuted(f"request {state.request} was already started", state.request)
            if not state.executable:
                raise NotApproved(f"request {state.request} is {state.status}; it may not run", state.request)
            if event.args_digest != state.digest:
                raise DigestMismatch(
                    f"execution uses arguments {event.args_digest[:12]}…, the approved ones are {state.digest[:12]}…",
                    state.request,
                )
        elif isinstance(event, ev.Executed):
            if state.status != "executing":
                raise NotStarted(f"request {state.request} has no execution_started before its outcome", state.request)
            if event.args_digest != state.digest:
                raise DigestMismatch("the outcome names other arguments than the execution started with", state.request)
        elif isinstance(event, ev.Remembered):
            self._check_remembered(state, event)
        elif isinstance(event, ev.Interrupted):
            if state.status != "interrupting":
                raise NotInterruptible(f"request {state.request} is {state.status}; only a new ask is interrupted", state.request)
        elif isinstance(event, ev.Approved):
            self._decider(state, event.approver, "approve", event.ts)
            if event.args_digest != state.digest:
                raise StaleDigest(
                    f"the approval is for arguments {event.args_digest[:12]}…, the request's are {state.digest[:12]}…",
                    state.request,
                )
            if event.approver in state.approvals:
                raise DuplicateApproval(f"{event.approver} already approved these arguments", state.request)
        elif isinstance(event, ev.Edited):
            self._decider(state, event.editor, "edit", event.ts)
            if event.replaces != state.digest:
                raise StaleDigest(f"the edit replaces {event.replaces[:12]}…, the request's arguments are {state.digest[:12]}…", state.request)
            if event.effect == "deny":
                raise EditDenied("the policy denies the edited call", state.request)
        elif isinstance(event, ev.Rejected):
            self._decider(state, event.approver, "reject", event.ts)
        elif isinstance(event, ev.Responded):
            self._decider(state, event.approver, "respond", event.ts)
        elif isinstance(event, ev.Expired):
            if state.status != "pending":
                raise NotPending(f"request {state.request} is {state.status}; only a pending request expires", state.request)
            if event.ts < (state.deadline or ""):
                raise NotExpired(f"request {state.request} expires at {state.deadline}, not before", state.request)
            if state.requirements is not None and state.requirements.stages:
                raise MustEscalate(f"request {state.request} escalates to stage {state.stage + 1} at its deadline; it does not "
                                   "expire", state.request)
        elif isinstance(event, ev.Escalated):
            self._check_escalated(state, event)
        elif isinstance(event, ev.Cancelled):
            if state.status in ("executing",):
                raise AlreadyExecuted(f"request {state.request} is already running", state.request)

    def _check_remembered(self, state: RequestState, event: ev.Remembered) -> None:
        request = state.request
        self._decider(state, event.approver, event.decision, event.ts)
        reqs = state.requirements
        assert reqs is not None
        allowance = reqs.rememberable

        def refuse(why: str) -> None:
            raise StandingDecision(f"request {request}: {why}", request)

        if allowance is None:
            refuse("its requirements do not let a decision of it be remembered")
        if not allowance.admits(event.scope):
            refuse(f"a standing decision scoped {_scope_text(event.scope)} is wider than the rule allows ({_scope_text(allowance)})")
        if (event.tool, event.policy_digest) != (state.tool, state.policy_digest):
            refuse("a standing decision names the request's own tool and policy digest")
        if self.policy_digest is not None and event.policy_digest != self.policy_digest:
            refuse("the request was decided by a policy no longer in force (the last `policy` event names another "
                   "digest): its decision cannot be remembered")
        if event.args_digest is not None and event.args_digest != state.digest:
            refuse("a standing decision's arguments are the request's current ones, or any")
        if event.scope.scope == "run" and event.within != state.run:
            refuse(f"a standing decision for the run names the request's run ({state.run!r}), not {event.within!r}")
        if event.scope.scope == "until":
            try:
                until = add_seconds(event.ts, event.scope.seconds or 0)
            except (OverflowError, ValueError):
                until = None
            if event.within != until:
                refuse(f"a standing decision for {event.scope.seconds}s lasts until {until}, not {event.within}")
        if event.decision == "approve" and not reqs.met_by((event.approver,)):
            refuse(f"an approval stands only where one approval meets the requirements ({reqs.describe()})")
        if event.decision == "approve" and event.approver in state.approvals:
            refuse(f"{event.approver} already approved these arguments")
        if (event.decision == "reject") != (event.reason is not None):
            refuse("a standing rejection carries its reason, a standing approval none")

    def _check_escalated(self, state: RequestState, event: ev.Escalated) -> None:
        request = state.request
        if state.status != "pending":
            raise NotPending(f"request {request} is {state.status}; only a pending request escalates", request)
        if event.ts < (state.deadline or ""):
            raise NotExpired(f"request {request} escalates at {state.deadline}, not before", request)
        following = state.requirements.escalated() if state.requirements is not None else None
        if following is None:
            raise NoEscalation(f"request {request} is at its last stage ({state.stage}): it expires, it does not escalate",
                               request)
        if event.stage != state.stage + 1:
            raise EscalationMismatch(f"request {request} is at stage {state.stage}; it escalates to stage {state.stage + 1}, "
                                     f"not {event.stage}", request)
        if event.requirements != following:
            raise EscalationMismatch(f"the requirements of stage {event.stage} are not the next stage of request {request}'s",
                                     request)
        deadline = deadline_after(event.ts, following.timeout_seconds)
        if event.deadline != deadline:
            raise EscalationMismatch(f"stage {event.stage} of request {request} lasts until {deadline}, not {event.deadline}",
                                     request)

    def _check_covered(self, event: ev.Proposed) -> None:
        covered = event.remembered
        assert isinstance(covered, ev.Covered)
        found = None
        if event.effect == "ask":
            found = self.covering(tool=event.tool, policy_digest=event.policy_digest, run=event.run,
                                  session=covered.session, args_digest=event.args_digest, ts=event.ts,
                                  proposer=event.proposer, rules=(r.id for r in event.rules),
                                  requirements=covered.requirements)
        if found != covered.by:
            raise NotCovered(
                f"the proposal names the standing decision at seq {covered.by}, which does not cover it"
                + (f" (seq {found} does)" if found is not None else ""))

    def _check_redaction(self, event: ev.Redacted) -> None:
        target = event.target
        proposal = self.status_of(target) is not None
        request = target if proposal else self.edit_request(target)
        if request is None:
            raise RedactionTarget(f"seq {target} is not an earlier proposal or edit; only those store data")
        if event.path.startswith("context") and not proposal:
            raise RedactionTarget(f"seq {target} is an edit, which stores no context")
        status = self.status_of(request)
        if status not in _FINAL_CODE:
            raise RedactionTooEarly(
                f"request {request} is {status} and may still run; it is redacted once final", request
            )
        earlier = self.redacted_paths(target)
        if event.path in earlier:
            raise AlreadyRedacted(f"{event.path} of seq {target} is already redacted", request)
        for outer in earlier:  # in the order they were redacted
            if inside(event.path, outer):
                raise AlreadyRedacted(f"{event.path} of seq {target} is inside {outer}, which is already redacted", request)

    # --- applying -----------------------------------------------------------------------------

    def apply(self, seq: int, event: ev.Event) -> None:
        """Record an event that passed `check`. `seq` is the event's seq in the ledger."""
        if type(event) in _NOT_OF_A_REQUEST:  # one set lookup instead of the chain below for most events
            if isinstance(event, ev.Genesis):
                self.seen_genesis = True
                self.format = event.format
                return
            if isinstance(event, ev.RosterRecorded):  # about the log, not about a request
                self.roster = event.digest
                return
            if isinstance(event, ev.PolicyLoaded):  # about the log, not about a request
                self.policy_digest = event.digest
                if event.files is not msgspec.UNSET:
                    self.pinned.add(event.digest)
                # Another policy in force ends, for good, every standing decision made under another
                # one: reloading an older text does not bring them back.
                for ended in [seq for seq, sd in self.standing.items() if sd.policy_digest != event.digest]:
                    self._end_standing(ended)
                return
            if isinstance(event, ev.Recovered):
                return
            if isinstance(event, ev.Forgotten):
                self._end_standing(event.standing)
                return
            if isinstance(event, ev.Redacted):
                if event.target not in self.redacted:
                    self.redacted[event.target] = self.redacted_paths(event.target)
                self.redacted[event.target].append(event.path)
                return
            if isinstance(event, ev.Proposed):
                status = {"allow": "allowed", "deny": "denied", "ask": "interrupting"}.get(event.effect, "denied")
                self.requests[seq] = RequestState(
                    request=seq,
                    tool=event.tool,
                    run=event.run,
                    proposer=event.proposer,
                    call_id=event.call_id,
                    effect=event.effect,
                    rules=tuple(r.id for r in event.rules),
                    reasons=event.reasons,
                    proposed_at=event.ts,
                    digest=event.args_digest,
                    original_digest=event.args_digest,
                    status=status,
                    context_digest=event.context_digest,
                    decided_at=event.ts if status == "denied" else None,
                    decision="deny" if status == "denied" else None,
                    data_seq=seq,
                    policy_digest=event.policy_digest,
                    seqs=[seq],
                )
                if event.remembered is not msgspec.UNSET:
                    state, sd = self.requests[seq], self.standing[event.remembered.by]
                    state.standing, state.requirements = sd.seq, event.remembered.requirements
                    state.decided_at, state.decided_by, state.decision = event.ts, sd.approver, sd.decision
                    state.status = "allowed" if sd.decision == "approve" else "rejected"
                    state.reason = sd.reason
                    status = state.status
                    if status == "allowed":
                        sd.open.add(seq)
                if status == "interrupting":
                    self.interrupting[seq] = self.requests[seq]
                if event.call_id is not None and self.keep_final:
                    self.by_call_id[event.call_id] = seq
                self._drop_if_final(self.requests[seq])
                return
        state = self.requests.get(event.request) or self.get(event.request)
        state.seqs.append(seq)
        if state.remembering is not None:
            # A standing decision stands once its own decision follows it as the request's next
            # event (the Gate writes both in one write); anything else, and it never does.
            sd = self.standing.get(state.remembering)
            decision = "approve" if isinstance(event, ev.Approved) else "reject" if isinstance(event, ev.Rejected) else None
            if sd is not None and decision == sd.decision and ev.decider(event) == sd.approver:
                sd.live = True
            state.remembering = None
        # the kinds are disjoint: the most frequent are tested first
        if isinstance(event, ev.ExecutionStarted):
            state.status = "executing"
        elif isinstance(event, ev.Executed):
            state.status = "executed"
            state.executed_at, state.outcome = event.ts, event.outcome
            state.result_digest, state.error = event.result_digest, event.error
        elif isinstance(event, ev.Remembered):
            state.remembering = seq
            self.add_standing(Standing(
                seq=seq, request=state.request, proposer=state.proposer, rules=state.rules, approver=event.approver, decision=event.decision, tool=event.tool,
                policy_digest=event.policy_digest, scope=event.scope, within=event.within,
                args_digest=event.args_digest, reason=event.reason, ts=event.ts))
        elif isinstance(event, ev.Interrupted):
            state.requirements, state.deadline, state.status = event.requirements, event.deadline, "pending"
        elif isinstance(event, ev.Escalated):
            # The next stage: its approvers decide afresh, until its own deadline.
            state.requirements, state.deadline, state.stage = event.requirements, event.deadline, event.stage
            state.approvals = {}
            state.__dict__.pop("_tally", None)
            self.add_pending(state)  # its new deadline, in the heap `due` reads
        elif isinstance(event, ev.Approved):
            state.tally().add(event.approver)
            state.approvals[event.approver] = event.ts
            state.approvers.append(event.approver)
            self._maybe_approved(state, event.ts, event.approver)
        elif isinstance(event, ev.Edited):
            if self._edit_targets is None or seq in self._edit_targets:
                self.edits[seq] = event.request
            state.digest = event.args_digest
            state.data_seq = seq
            state.edits += 1
            state.requirements = event.requirements
            # Earlier approvals were of other arguments; the edit is the editor's approval of the
            # new ones, if the requirements now in force still admit the editor.
            state.approvals = {}
            state.__dict__.pop("_tally", None)  # counted afresh against the edit's requirements
            tally = state.tally()
            if tally.allows(event.editor):
                tally.add(event.editor)
                state.approvals[event.editor] = event.ts
            state.approvers.append(event.editor)
            self._maybe_approved(state, event.ts, event.editor)
        elif isinstance(event, ev.Rejected):
            self._final(state, "rejected", "reject", event.ts, event.approver, event.reason)
        elif isinstance(event, ev.Responded):
            self._final(state, "responded", "respond", event.ts, event.approver, event.message)
        elif isinstance(event, ev.Expired):
            self._final(state, "expired", "expire", event.ts, None, event.message)
        elif isinstance(event, ev.Cancelled):
            self._final(state, "cancelled", "cancel", event.ts, event.by, event.reason)
        if state.status == "pending":
            if state.request not in self.pending:
                self.add_pending(state)
        else:
            self.pending.pop(state.request, None)
        if state.status != "interrupting":
            self.interrupting.pop(state.request, None)
        if state.standing is not None and state.status != "allowed":  # started, or cancelled
            sd = self.standing.get(state.standing)
            if sd is not None:
                sd.open.discard(state.request)
        self._drop_if_final(state)

    @staticmethod
    def _maybe_approved(state: RequestState, ts: str, who: str) -> None:
        if state.tally().met:
            state.status = "approved"
            state.decision, state.decided_at, state.decided_by = "approve", ts, who

    @staticmethod
    def _final(state: RequestState, status: str, decision: str, ts: str, who: str | None, text: str | None) -> None:
        state.status, state.decision, state.decided_at, state.decided_by, state.reason = status, decision, ts, who, text

    def step(self, seq: int, event: ev.Event) -> None:
        """`check` then `apply`: one event of a replay."""
        self.check(event)
        self.apply(seq, event)


def _scope_text(scope: Remember) -> str:
    return f"for {scope.seconds}s" if scope.scope == "until" else f"to the {scope.scope}"


def count_statuses(open_statuses: Iterable[str], final_counts: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Requests by status, in the order verify reports them: the statuses of the open requests in
    the order given (the order proposed), then `(status, number)` of the dropped final ones;
    statuses with none left out. (The compiled verifier counts the same way.)"""
    counts: dict[str, int] = {}
    for status in open_statuses:
        counts[status] = counts.get(status, 0) + 1
    for status, n in final_counts:
        if n:
            counts[status] = counts.get(status, 0) + n
    return counts


def inside(path: str, outer: str) -> bool:
    """Whether the field path `path` names a value strictly inside the one `outer` names (both in
    their canonical spelling, ledger.fieldpath): `args.card.number` is inside `args.card`, not
    inside `args.car`."""
    return len(path) > len(outer) and path.startswith(outer) and path[len(outer)] in ".["


def combined_requirements(original: Requirements, reevaluated: Requirements | None, stage: int = 1) -> Requirements:
    """Requirements after an edit: never weaker than those in force (`original`). An edit at
    stage `stage` of an escalating ask combines with the same stage of the re-evaluated
    requirements (or their last, when they have fewer): the stages before it timed out already."""
    if reevaluated is None:
        return original
    for _ in range(stage - 1):
        reevaluated = reevaluated.escalated() or reevaluated
    return strictest([original, reevaluated])
