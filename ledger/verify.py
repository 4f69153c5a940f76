"""`verify`: prove a ledger's chain is intact and its history lawful.

For every line, in order, it checks:
1. the layout (ledger.lines), that the body decodes as an event whose members have the documented
   types and values, and that it is in its one canonical layout (member order, no spacing, no
   repeated member), which only msgspec's own encoding of the event has;
2. `seq` is one more than the previous event's (the first is 1, and it is the genesis);
3. `prev` is the previous event's hash (64 zeros for the first);
4. the stored hash is SHA-256 of the body bytes *as stored*; nothing is re-encoded;
5. `ts` (and an interrupt's `deadline`) is a real UTC time in the ledger's spelling, and no `ts` is
   earlier than the previous event's;
6. the data beside the body: present exactly for proposed and edited events, its arguments'
   and context's digests equal those in the body, and it is spelled canonically;
7. the workflow rules (ledger.workflow), through the same fold the Gate uses.
It stops at the first problem and names its seq. `expect_head` additionally requires a hash an
auditor saved earlier to be in the chain, which detects truncation and rewrites behind that point.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.clock import parse_ts
from ledger.digest import ArgumentsError, canonical_spelling, value_digest
from ledger.events import encode_event
from ledger.log import LedgerCorrupt, LedgerReader, LedgerUnreadable, RawLine, parse_line
from ledger.workflow import Violation, Workflow

EXIT_OK, EXIT_BAD, EXIT_UNREADABLE = 0, 1, 2


class Problem(msgspec.Struct, frozen=True):
    """The first thing wrong: the seq where it is, the kind (`format`, `chain`, `data`,
    `workflow`, `head`), a rule code for workflow problems, and a message."""

    seq: int | None
    kind: str
    message: str
    code: str | None = None
    segment: str | None = None
    line: int | None = None


class Report(msgspec.Struct):
    """What verification found. `exit_code`: 0 intact and lawful, 1 tampered or unlawful,
    2 unreadable. `head` is the last good event's hash; `count` how many events were good."""

    path: str
    count: int = 0
    head: str = ev.GENESIS_PREV
    problem: Problem | None = None
    unreadable: str | None = None
    warnings: list[str] = []
    statuses: dict[str, int] = {}

    @property
    def ok(self) -> bool:
        return self.problem is None and self.unreadable is None

    @property
    def exit_code(self) -> int:
        if self.unreadable is not None:
            return EXIT_UNREADABLE
        return EXIT_OK if self.problem is None else EXIT_BAD


def verify(path: str | Path, expect_head: str | None = None) -> Report:
    """Verify the ledger at `path`. Never raises for a bad ledger; the Report says what is wrong."""
    report = Report(path=str(path))
    try:
        reader = LedgerReader(path)
    except LedgerUnreadable as exc:
        report.unreadable = str(exc)
        return report
    workflow = Workflow()
    prev, expected, prev_ts = ev.GENESIS_PREV, 1, ""
    head_seen_at: int | None = None
    try:
        for raw in reader.lines():  # raises LedgerCorrupt for a gap between segments
            try:
                record = parse_line(raw, expected)
            except LedgerCorrupt as exc:
                report.problem = Problem(expected, "format", exc.message, segment=raw.segment, line=raw.line)
                return report
            problem = check_record(record, expected, prev, prev_ts)
            if problem is not None:
                report.problem = problem
                return report
            prev_ts = record.event.ts
            if isinstance(record.event, ev.Recovered):
                e = record.event
                report.warnings.append(
                    f"seq {record.seq}: a torn line of {e.fragment_bytes} bytes (never acknowledged) was moved from "
                    f"{e.segment} to {e.quarantine}"
                )
            try:
                workflow.step(record.seq, record.event)
            except Violation as exc:
                report.problem = Problem(record.seq, "workflow", exc.message, exc.code, record.segment, record.line)
                return report
            prev, report.count, report.head = record.hash, record.seq, record.hash
            if expect_head is not None and record.hash == expect_head:
                head_seen_at = record.seq
            expected += 1
    except LedgerUnreadable as exc:
        report.unreadable = str(exc)
        return report
    except LedgerCorrupt as exc:
        report.problem = Problem(expected, "format", exc.message, segment=exc.segment, line=exc.line)
        return report
    if report.count == 0:
        report.problem = Problem(1, "format", "the ledger has no events")
        return report
    if reader.torn is not None:
        t = reader.torn
        completed = _complete_tail(t, expected, prev, prev_ts, workflow)
        if completed is not None:
            # A whole, valid event that lacks only its line feed is an event: a crash can cut the
            # last byte of a write, and ignoring it would let anyone undo the last decision by
            # deleting one byte. (A writer restores the line feed when it opens the ledger.)
            if isinstance(completed, Problem):
                report.problem = completed
                return report
            report.count, report.head = completed.seq, completed.hash
            if expect_head is not None and completed.hash == expect_head:
                head_seen_at = completed.seq
            report.warnings.append(
                f"{t.segment}: the last event (seq {completed.seq}) lacks its line feed; it is counted, and a writer "
                "restores the line feed"
            )
        else:
            report.warnings.append(
                f"{t.segment} ends in a torn line ({len(t.fragment)} bytes at offset {t.offset}) that was never "
                "acknowledged; the next writer moves it to quarantine/"
            )
    if expect_head is not None:
        if head_seen_at is None:
            report.problem = Problem(
                None,
                "head",
                f"the expected head {expect_head} is not in this ledger: it was truncated or rewritten",
            )
            return report
        if head_seen_at != report.count:
            report.warnings.append(f"the expected head is seq {head_seen_at}; {report.count - head_seen_at} events follow it")
    for state in workflow.requests.values():
        report.statuses[state.status] = report.statuses.get(state.status, 0) + 1
        if state.status == "interrupting":
            report.warnings.append(f"request {state.request} is an ask with no interrupt recorded")
    return report


def _complete_tail(torn, expected: int, prev: str, prev_ts: str, workflow: Workflow):
    """The Record of a torn tail that is a whole line continuing the chain (None when it is not),
    or the Problem such a line has under the remaining checks (data, workflow)."""
    try:
        record = parse_line(RawLine(torn.segment, 0, torn.offset, torn.fragment), expected)
    except LedgerCorrupt:
        return None
    if record.seq != expected or record.event.prev != prev or hashlib.sha256(record.body).hexdigest() != record.hash:
        return None
    problem = check_record(record, expected, prev, prev_ts)
    if problem is not None:
        return problem
    try:
        workflow.step(record.seq, record.event)
    except Violation as exc:
        return Problem(record.seq, "workflow", exc.message, exc.code, record.segment, None)
    return record


def check_record(record, expected: int, prev: str, prev_ts: str = "") -> Problem | None:
    """Checks 2 to 6 of the module docstring for one Record; None when it passes. `prev_ts` is
    the previous event's ts: no event is earlier than the one before it."""
    event, seq = record.event, record.seq

    def problem(kind: str, message: str) -> Problem:
        return Problem(expected, kind, message, segment=record.segment, line=record.line)

    if seq != expected:
        return problem("chain", f"seq is {seq}, expected {expected} (a gap, a duplicate or a reordering)")
    if event.prev != prev:
        return problem("chain", "prev is not the previous event's hash (an event was removed, inserted or changed before it)")
    if hashlib.sha256(record.body).hexdigest() != record.hash:
        return problem("chain", "the hash does not match the body: the event was changed after it was written")
    if encode_event(event) != record.body:
        return problem("format", "the body is not in its one canonical layout (member order, spacing or a repeated member)")
    for name in ("ts", "deadline"):
        text = getattr(event, name, None)
        if text is not None:
            try:
                parse_ts(text)
            except ValueError:
                return problem("format", f"{name} {text!r} is not a UTC time YYYY-MM-DDTHH:MM:SS.ffffffZ")
    if event.ts < prev_ts:
        return problem("chain", f"ts {event.ts} is earlier than the previous event's ({prev_ts}): time went backwards")
    if (seq == 1) != isinstance(event, ev.Genesis):
        return problem("format", "the first event, and only the first, is the genesis")
    return _check_data(record, problem)


def _check_data(record, problem) -> Problem | None:
    event = record.event
    try:
        data = msgspec.json.decode(record.data)
    except msgspec.DecodeError as exc:
        return problem("data", f"the data beside the body is not JSON: {exc}")
    if not isinstance(event, ev.WITH_DATA):
        if data is not None:
            return problem("data", f"a {event.__struct_config__.tag} event carries no data")
        return None
    if not isinstance(data, dict) or not isinstance(data.get("args"), dict):
        return problem("data", "the data beside the body has no arguments object")
    expected_keys = {"args", "context"} if isinstance(event, ev.Proposed) else {"args"}
    if set(data) != expected_keys:
        return problem("data", f"the data must hold exactly {sorted(expected_keys)}")
    try:
        if value_digest(data["args"]) != event.args_digest:
            return problem("data", "the stored arguments do not match their digest in the chain")
        if isinstance(event, ev.Proposed) and value_digest(data["context"]) != event.context_digest:
            return problem("data", "the stored context does not match its digest in the chain")
    except ArgumentsError as exc:
        return problem("data", f"the stored data is not a JSON value: {exc}")
    # The chain covers values, not spellings; requiring the one canonical spelling also catches
    # an edit that keeps every value (1e22 → 1E22), so no stored byte changes unnoticed.
    if canonical_spelling(data) != record.data:
        return problem("data", "the stored data is not in its canonical spelling: it was changed after it was written")
    return None
