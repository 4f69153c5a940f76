"""Reading back what a ledger recorded about its calls, to decide them again.

`ledger audit` (ledger.audit) decides every recorded proposal and edit again under the policy it
records (pinned by digest, ledger.pinning) and `policy whatif` (ledger.whatif) under another
policy; both read the ledger through `Replay`, one pass over its lines in order:

- `Call`: a `proposed` or an `edited` event, with the call as the Gate gave it to its policy:
  the tool, the arguments and context as stored beside the event (an edit's context is its
  proposal's), and `Before` (ledger.workflow.deciding), what came before it. `missing` says why
  the call cannot be given back whole: its arguments or context were redacted (a marker stands
  where a value was: docs/ledger-format.md, section 10), or the data is not there.
- `Interrupt`: an `interrupted` event (an ask that waits for people: its requirements, its time,
  its deadline).
- `Escalate`: an `escalated` event (the next stage of an escalating ask in force: its number and
  requirements).
- `Started`: an `execution_started` event (the call ran, or began to).
- `Closed`: a request made final otherwise (rejected, responded, expired, cancelled).

Every other line is passed over without being decoded (its kind is read from the first bytes of
the line, which the canonical layout fixes: section 3), unless the replay keeps the runs' history
for policies that read it (`history`): then every line is decoded and folded, in seq order, into
the same per-run index the Gate keeps (ledger.workflow.history.HistoryIndex), and each `Call`'s
`Before.history` is what the Gate gave its policy: for a proposal, its run's history as of the
event just before it; for an edit, the calls of its run proposed before the edited request, as of
the event just before the edit. That object is the live index: it holds for the call until the
next item is drawn from the replay. A run some of whose folded data was redacted has a history
other than the one the Gate read before the redaction: its later calls carry `history_missing`
(REDACTED_HISTORY), and a policy that reads history cannot be checked on them. Replay does not verify the chain: `ledger
verify` does; a pinned text is still checked against its digest before it decides anything.

The policies are found first (`pinned_policies`: a scan of the segments for `policy` lines, at
the pace of bytes.find), so a proposal recorded before the event that pins its policy is decided
too: a policy is content-addressed by its digest, wherever in the ledger its text is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, NamedTuple

import msgspec

from ledger import events as ev, pinning
from ledger.digest import REDACTED
from ledger.store.log import LedgerCorrupt, LedgerReader, RawLine, list_segments, parse_line
from ledger.workflow.deciding import Before
from ledger.workflow.history import HistoryIndex

_KIND_AT = len(b'{"body":{"kind":"')
_POLICY_LINE = b'{"body":{"kind":"policy",'
_READ = {b"policy", b"proposed", b"edited", b"interrupted", b"escalated", b"execution_started",
         b"rejected", b"responded", b"expired", b"cancelled"}
_FINAL = {b"rejected", b"responded", b"expired", b"cancelled", b"execution_started"}
_MARKER = b'{"' + REDACTED.encode() + b'":'  # how a redaction marker starts in canonical data

# Why a call cannot be decided again (the categories reports group by).
TEXT_UNAVAILABLE = "policy text unavailable"
TEXT_UNREADABLE = "policy text unreadable"
REDACTED_DATA = "arguments or context redacted"
NO_DATA = "arguments not recorded"
NOT_DECIDABLE = "call not decidable"
REDACTED_HISTORY = "run history redacted"


class Call(NamedTuple):
    """A recorded decision of the policy: a proposal (`kind` "proposal") or an edit ("edit")."""

    seq: int
    request: int
    kind: str
    ts: str
    tool: str
    proposer: str
    args: dict | None
    context: dict | None
    missing: str | None  # why args/context are not whole (REDACTED_DATA, NO_DATA), else None
    policy_digest: str
    policy: str  # the policy's name as recorded (a proposal's; an edit's proposal's)
    effect: str
    rules: tuple[ev.RuleRef, ...]
    before: Before
    event: ev.Proposed | ev.Edited
    # why the run's history in `before` is not the one the Gate read (REDACTED_HISTORY), else None;
    # matters only to a policy that reads history
    history_missing: str | None = None


class Interrupt(NamedTuple):
    request: int
    ts: str
    requirements: Any  # dsl.requirements.Requirements
    deadline: str | None = None


class Escalate(NamedTuple):
    request: int
    ts: str
    stage: int
    requirements: Any  # dsl.requirements.Requirements: the stage's, as recorded


class Closed(NamedTuple):
    """A request became final without running (rejected, responded, expired, cancelled)."""

    request: int


class Started(NamedTuple):
    request: int
    ts: str


def pinned_policies(path: str | Path) -> dict[str, tuple[ev.PolicyLoaded, bytes]]:
    """digest → (the first `policy` event that pins it, its data), for every policy whose text
    the ledger keeps. Reads the segments in blocks and decodes only the `policy` lines. Lines
    that do not decode are left out (ledger verify reports them)."""
    found: dict[str, tuple[ev.PolicyLoaded, bytes]] = {}
    try:
        segments = list_segments(Path(path))
    except OSError:
        return found
    for segment in segments:
        try:
            data = segment.read_bytes()
        except OSError:
            continue
        at = 0 if data.startswith(_POLICY_LINE) else data.find(b"\n" + _POLICY_LINE)
        while at >= 0:
            start = at if at == 0 and data.startswith(_POLICY_LINE) else at + 1
            end = data.find(b"\n", start)
            if end < 0:
                break  # a torn tail: not an event
            try:
                record = parse_line_bytes(data[start:end])
            except LedgerCorrupt:
                record = None
            if record is not None and isinstance(record.event, ev.PolicyLoaded) and record.event.files is not msgspec.UNSET:
                found.setdefault(record.event.digest, (record.event, record.data))
            at = data.find(b"\n" + _POLICY_LINE, end)
    return found


def parse_line_bytes(text: bytes):
    """The Record of one line's bytes (without its line feed). Raises LedgerCorrupt."""
    return parse_line(RawLine("", 0, 0, text), -1)


class Policies:
    """The pinned policies of a ledger, loaded on first use: `get(digest)` → (dsl.Policy, None)
    or (None, why not)."""

    def __init__(self, pins: dict[str, tuple[ev.PolicyLoaded, bytes]]):
        self.pins = pins
        self._loaded: dict[str, tuple[Any, str | None]] = {}

    def get(self, digest: str) -> tuple[Any, str | None]:
        kept = self._loaded.get(digest)
        if kept is None:
            pin = self.pins.get(digest)
            if pin is None:
                kept = (None, TEXT_UNAVAILABLE)
            else:
                try:
                    kept = (pinning.load(*pin), None)
                except pinning.PinError as exc:
                    kept = (None, f"{TEXT_UNREADABLE}: {exc}")
            self._loaded[digest] = kept
        return kept


class Replay:
    """One pass over a ledger's recorded calls (module docstring). Raises LedgerUnreadable from
    the constructor when `path` is not a ledger; iterating raises LedgerCorrupt for a line that
    is not an event (ledger verify names what is wrong).

    `history`: keep the runs' history index for policies that read it (True), or not (False);
    None (ledger audit): keep it when a policy the ledger pins reads history."""

    def __init__(self, path: str | Path, history: bool | None = None):
        self.path = Path(path)
        self.reader = LedgerReader(path)
        self.policies = Policies(pinned_policies(path))
        if history is None:
            history = any(getattr(self.policies.get(digest)[0], "reads_history", False) for digest in self.policies.pins)
        self.history = HistoryIndex() if history else None
        self.events = 0  # lines read so far

    def __iter__(self) -> Iterator[Call | Interrupt | Escalate | Started]:
        # An edit is decided with its proposal's tool and context: kept for the requests that may
        # still be edited (asks not yet final or started).
        asks: dict[int, tuple[str, str, dict | None, str | None, str | None, str]] = {}
        decode_data = msgspec.json.decode
        index = self.history
        run_of: dict[int, str] = {}  # with history: request → its run, until the request is final
        redacted_runs: set[str] = set()  # with history: runs some of whose folded data is redacted
        seq = 0
        for raw in self.reader.lines():
            seq += 1
            text = raw.text
            end = text.find(b'"', _KIND_AT)
            kind = text[_KIND_AT:end] if text.startswith(b'{"body":{"kind":"') else None
            if kind is not None and kind not in _READ and index is None:
                continue
            record = parse_line(raw, seq)
            event = record.event
            if isinstance(event, ev.Proposed):
                args, context, missing = _call_data(record.data, decode_data, ("args", "context"))
                history = index.run(event.run) if index is not None else None
                call = Call(record.seq, record.seq, "proposal", event.ts, event.tool, event.proposer, args, context,
                            missing, event.policy_digest, event.policy, event.effect, event.rules,
                            Before(record.seq, event.run, history), event,
                            REDACTED_HISTORY if event.run in redacted_runs else None)
                if event.effect == "ask":
                    asks[record.seq] = (event.tool, event.proposer, context, missing, event.run, event.policy)
                yield call
            elif isinstance(event, ev.Edited):
                origin = asks.get(event.request)
                args, _, missing = _call_data(record.data, decode_data, ("args",))
                if origin is None:
                    tool, proposer, context, missing, run, name = "", "", None, NO_DATA, None, ""
                else:
                    tool, proposer, context, proposal_missing, run, name = origin
                    missing = missing or proposal_missing
                history = index.run(run) if index is not None else None
                if history is not None:
                    history = history.before(event.request)  # as the Gate's edit: the calls before the request
                yield Call(record.seq, event.request, "edit", event.ts, tool, proposer, args, context, missing,
                           event.policy_digest, name, event.effect, event.rules, Before(record.seq, run, history), event,
                           REDACTED_HISTORY if run in redacted_runs else None)
            elif isinstance(event, ev.Interrupted):
                yield Interrupt(event.request, event.ts, event.requirements, event.deadline)
            elif isinstance(event, ev.Escalated):
                yield Escalate(event.request, event.ts, event.stage, event.requirements)
            elif isinstance(event, ev.ExecutionStarted):
                asks.pop(event.request, None)
                yield Started(event.request, event.ts)
            elif kind in _FINAL:
                asks.pop(getattr(event, "request", 0), None)
                yield Closed(getattr(event, "request", 0))
            if index is not None:
                # after the call was handed on: its own event is in the history of the next ones
                _note_redacted(record, event, run_of, redacted_runs)
                index.fold(record)
        self.events = seq


def _note_redacted(record, event, run_of: dict[int, str], redacted_runs: set[str]) -> None:
    """Keep `run_of` (request → run) and add to `redacted_runs` the run of a record whose data
    holds a redaction marker (what the history index folds from it is not what it was)."""
    if isinstance(event, ev.Proposed):
        run = event.run
        if run is not None:
            run_of[record.seq] = run
    else:
        request = getattr(event, "request", None)
        run = run_of.get(request) if request is not None else None
        if run is not None and isinstance(event, (ev.Executed, ev.Rejected, ev.Responded, ev.Expired, ev.Cancelled)):
            run_of.pop(request, None)  # final: no later event of it changes the history
    if run is not None and _MARKER in record.data:
        redacted_runs.add(run)


def _call_data(data: bytes, decode, members: tuple[str, ...]) -> tuple[dict | None, dict | None, str | None]:
    """(args, context, why not whole) from a proposal's or an edit's data bytes."""
    if _MARKER in data:
        return None, None, REDACTED_DATA
    try:
        value = decode(data)
    except msgspec.DecodeError:
        return None, None, NO_DATA
    if not isinstance(value, dict) or not all(isinstance(value.get(m), dict) for m in members):
        return None, None, NO_DATA
    return value["args"], value.get("context"), None
