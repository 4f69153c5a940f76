"""`verify`: prove a ledger's chain is intact and its history lawful.

For every line, in order, it checks:
1. the layout (ledger.store.lines), that the body decodes as an event whose members have the documented
   types and values, and that it is in its one canonical layout (member order, no spacing, no
   repeated member), which only msgspec's own encoding of the event has;
2. `seq` is one more than the previous event's (the first is 1, and it is the genesis);
3. `prev` is the previous event's hash (64 zeros for the first);
4. the stored hash is SHA-256 of the body bytes *as stored*; nothing is re-encoded;
5. `ts` (and an interrupt's `deadline`) is a real UTC time in the ledger's spelling, and no `ts` is
   earlier than the previous event's;
6. the data beside the body: present exactly for proposed and edited events (and a kept result,
   and a pinned policy's text), its arguments' and context's digests (the text's) equal those
   in the body, and it is spelled canonically;
7. the workflow rules (ledger.workflow.machine), through the same fold the Gate uses;
8. with `rosters`: every decision is signed, by a key the roster in force lists, of the principal
   the event names (ledger.proof.decisions; docs/ledger-format.md section 11).
It stops at the first problem and names its seq. `expect_head` additionally requires a hash an
auditor saved earlier to be in the chain, which detects truncation and rewrites behind that point.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ledger import events as ev
from ledger.clock import is_ts
from ledger.events import encode_event
from ledger.fieldpath import FieldPathError, parse_field_path
from ledger.proof import decisions, fast
from ledger.proof.data import check_data
from ledger.proof.report import EXIT_BAD, EXIT_OK, EXIT_UNREADABLE, Problem, Report, close_report  # noqa: F401 (re-exported)
from ledger.store.lines import LineError
from ledger.store.lines import split as lines_split
from ledger.store.log import LedgerCorrupt, LedgerReader, LedgerUnreadable, RawLine, continues, list_segments, parse_line  # noqa: F401
from ledger.store.scan import read_lines
from ledger.workflow.machine import Violation, Workflow

# What a torn last line can be, as far as the ledger alone tells (docs/ledger-format.md, section 6):
# the last write of a writer that stopped part way (never acknowledged), or what is left of a line
# when the ledger was cut in the middle of it, with every event after it gone. The bytes look the
# same; a signed checkpoint or a head saved earlier says whether events are missing.
TORN_CAUSES = ("an unfinished write, or the ledger cut mid-line (events after it lost), which only a checkpoint or an "
               "expected head can tell apart (ledger verify --checkpoint FILE --pubkey KEY, or --expect-head HASH)")

TYPE_CHECKING = False  # typing.TYPE_CHECKING; the roster (tomllib, the keys) only where a caller gives one
if TYPE_CHECKING:
    from ledger.proof.roster import Roster


def verify(path: str | Path, expect_head: str | None = None, *, engine: str = "auto",
           rosters: Sequence[Roster] = (), signed_from: int = 1) -> Report:
    """Verify the ledger at `path`. Never raises for a bad ledger; the Report says what is wrong.

    `engine` "auto" first tries the compiled verifier (ledger.proof.fast), which returns the same
    Report for an intact, lawful ledger of the common shape and otherwise declines; then, or with
    `engine` "python", this module's reference verifier decides.

    `rosters` (ledger.proof.roster): also check every decision's signature against the roster in
    force at that point: the one whose digest the last `roster` event before it records, or,
    before any such event, the first roster given. A decision whose roster was not given is a
    problem (kind `signature`), like an unsigned, wrongly signed or foreign-signed one.
    `signed_from`: the seq from which decisions are checked (a ledger that began signing after its
    first decisions; the caller says where, not the ledger, which a writer of its files could
    extend); the decisions before it are counted in `Report.unchecked_decisions`."""
    if engine not in ("auto", "python"):
        raise ValueError(f"engine must be 'auto' or 'python', not {engine!r}")
    if engine == "auto" and not rosters:  # the compiled verifier does not read signatures
        report = fast.verify_fast(path, expect_head)
        if report is not None:
            return report
    report = Report(path=str(path))
    try:
        reader = LedgerReader(path)
    except LedgerUnreadable as exc:
        report.unreadable = str(exc)
        return report
    redactions = Redactions.collect(path)
    workflow = Workflow(keep_final=False, edit_targets=redactions.paths)  # memory: one byte per closed request
    prev, expected, prev_ts = ev.GENESIS_PREV, 1, ""
    head_seen_at: int | None = None
    signatures = Signatures(rosters, signed_from) if rosters else None
    try:
        for raw in reader.lines():  # raises LedgerCorrupt for a gap between segments
            try:
                record = parse_line(raw, expected)
            except LedgerCorrupt as exc:
                report.problem = Problem(expected, "format", exc.message, segment=raw.segment, line=raw.line)
                return report
            problem = admit(record, expected, prev, prev_ts, workflow, redactions, signatures)
            if problem is not None:
                report.problem = problem
                return report
            prev_ts = record.event.ts
            if isinstance(record.event, ev.Recovered):
                e = record.event
                report.warnings.append(
                    f"seq {record.seq}: a writer moved a torn last line of {e.fragment_bytes} bytes from {e.segment} to "
                    f"{e.quarantine}: {TORN_CAUSES}"
                )
            if isinstance(record.event, ev.Redacted):
                e = record.event
                report.redactions.append(
                    f"seq {record.seq}: the value at {e.path} of seq {e.target} was redacted by {e.by} ({e.reason})"
                )
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
    finish_report(report, reader, expected, prev, prev_ts, workflow, redactions, expect_head, head_seen_at,
                  signatures=signatures)
    if signatures is not None:
        report.unchecked_decisions = signatures.unchecked
    return report


def finish_report(report: Report, reader, expected: int, prev: str, prev_ts: str, workflow: Workflow, redactions: "Redactions",
                  expect_head: str | None, head_seen_at: int | None, complete_tail: bool = True,
                  signatures: "Signatures | None" = None):
    """The end of a verification, after the last complete line (`expected` the next seq, `prev`
    and `prev_ts` the last line's hash and time): the torn tail of section 6 (counted when it is a
    whole line continuing the chain and `complete_tail`, else a warning), the expected head, the
    statuses and the asks never interrupted. Sets `report.problem` on a failure. Returns the Record
    of a counted tail (the caller may need its hash), else None. A counted tail is an event like
    any other: `signatures` checks it as the lines before it were checked."""
    completed = None
    if reader.torn is not None:
        t = reader.torn
        completed = complete_torn_tail(t, expected, prev, prev_ts, workflow, redactions, signatures) if complete_tail else None
        if isinstance(completed, Problem):
            report.problem = completed
            return None
        if completed is not None:
            # A whole, valid event that lacks only its line feed is an event: a crash can cut the
            # last byte of a write, and ignoring it would let anyone undo the last decision by
            # deleting one byte. (A writer restores the line feed when it opens the ledger.)
            report.count, report.head = completed.seq, completed.hash
            if expect_head is not None and completed.hash == expect_head:
                head_seen_at = completed.seq
            report.warnings.append(
                f"{t.segment}: the last event (seq {completed.seq}) lacks its line feed; it is counted, and a writer "
                "restores the line feed"
            )
        elif t.fragment is None:  # over the limit: no whole line, and never read whole
            report.warnings.append(
                f"{t.segment} ends in a torn line ({t.size} bytes at offset {t.offset}, more than a line may hold), not "
                f"counted: {TORN_CAUSES}; the next writer moves it to quarantine/"
            )
        else:
            report.warnings.append(
                f"{t.segment} ends in a torn line ({len(t.fragment)} bytes at offset {t.offset}), not counted: "
                f"{TORN_CAUSES}; the next writer moves it to quarantine/"
            )
    close_report(report, expect_head, head_seen_at, [(state.request, state.status) for state in workflow.requests.values()],
                 workflow.status_counts())
    return completed


def complete_torn_tail(torn, expected: int, prev: str, prev_ts: str, workflow: Workflow, redactions: Redactions,
                       signatures: "Signatures | None" = None):
    """A torn tail (ledger.store.log.TornTail) that is a whole line continuing the chain, checked as the
    event `expected` after `prev` and `prev_ts` and applied to `workflow`: its Record; the
    Problem it has under checks 2 to 7; or None when it is not such a line (a real torn write,
    or bytes over the line limit, which were not read)."""
    if torn.fragment is None:
        return None
    try:
        record = parse_line(RawLine(torn.segment, 0, torn.offset, torn.fragment), expected)
    except LedgerCorrupt:
        return None
    if not continues(record, expected, prev):
        return None
    return admit(record, expected, prev, prev_ts, workflow, redactions, signatures) or record


def admit(record, expected: int, prev: str, prev_ts: str, workflow: Workflow, redactions: "Redactions",
          signatures: "Signatures | None") -> Problem | None:
    """Every check of section 6 (and, with rosters, section 11.3) of one event, in order: the line
    (check_record), the workflow rules (the event is then folded into `workflow`), its signature,
    a redaction's announcement. The first Problem, or None. Each line of a ledger, the whole ones
    and a counted torn tail alike, goes through here, so no check applies to one and not the other."""
    problem = check_record(record, expected, prev, prev_ts, redactions)
    if problem is not None:
        return problem
    before = signatures.before(record, workflow) if signatures is not None else None
    try:
        workflow.step(record.seq, record.event)
    except Violation as exc:
        return Problem(record.seq, "workflow", exc.message, exc.code, record.segment, record.line or None)
    if signatures is not None and (problem := signatures.check(record, before)) is not None:
        return problem
    if isinstance(record.event, ev.Redacted):
        return redactions.announcement_problem(record)
    return None


class Signatures:
    """The signature check of `verify` with rosters: which roster is in force (the `roster`
    events seen so far), and each decision checked against it (ledger.proof.decisions).

    The rosters are given in the order the ledger used them (a roster used twice is given twice):
    a `roster` event may keep the roster in force or move to a later one of that order, never back
    to an earlier one. A `roster` event is a line like any other, which whoever can write the files
    can append: without the order, one naming an earlier roster would bring back a key it removed."""

    def __init__(self, rosters: Sequence[Roster], signed_from: int = 1):
        self.rosters = list(rosters)
        self.by_digest = {r.digest: r for r in rosters}
        self.signed_from = signed_from
        self.unchecked = 0  # decisions before signed_from
        self.at: int | None = 0  # the index of the roster in force in `rosters` (None: not given)
        self.reached = 0  # the furthest index a roster event has moved to: never back before it
        self.in_force: Roster | None = rosters[0]
        self.recorded: tuple[int, str] | None = None  # (seq, digest) of the last roster event
        self.back: tuple[int, str] | None = None  # (seq, message) of a roster event that went back
        self.ledger_id = ""

    def _recorded(self, seq: int, digest: str) -> None:
        self.recorded = (seq, digest)
        if self.at is not None and self.rosters[self.at].digest == digest:
            return
        # from the furthest roster reached, not from where an unknown roster left it (a roster
        # event naming a digest no one gave would otherwise reset the order)
        later = next((i for i in range(self.reached + 1, len(self.rosters)) if self.rosters[i].digest == digest), None)
        if later is None and digest in self.by_digest and seq >= self.signed_from:
            self.back = (seq, f"this roster event names {self.by_digest[digest].source} (digest {digest[:12]}…), which "
                              "comes before the roster in force in the order the rosters were given: a roster event may "
                              "only move to a later roster (give each roster in the order the ledger used them, one used "
                              "again given again)")
        self.at = later
        self.reached = self.reached if later is None else later
        self.in_force = None if later is None else self.rosters[later]

    def before(self, record, workflow: Workflow) -> tuple[int, str, str, str] | None:
        """For a decision: its request's (basis, args digest, proposer, status) before it."""
        event = record.event
        if isinstance(event, ev.Genesis):
            self.ledger_id = event.ledger_id
        elif isinstance(event, ev.RosterRecorded):
            self._recorded(record.seq, event.digest)
        elif isinstance(event, ev.SIGNABLE):
            state = workflow.get(event.request)
            if state is not None:
                return state.data_seq, state.digest, state.proposer, state.status
        return None

    def check(self, record, before) -> Problem | None:
        if self.back is not None and self.back[0] == record.seq:
            return Problem(record.seq, "signature", self.back[1], segment=record.segment, line=record.line)
        if before is None:
            return None
        if record.seq < self.signed_from:
            self.unchecked += 1
            return None
        basis, args, proposer, status = before
        if self.in_force is None:
            seq, digest = self.recorded
            message = (f"the roster in force for this decision (recorded at seq {seq}, digest {digest[:12]}…) is not "
                       "among the rosters given")
        else:
            message = decisions.problem(record.event, record.body, ledger_id=self.ledger_id, basis=basis, args=args,
                                        proposer=proposer, status=status, roster=self.in_force)
        if message is None:
            return None
        return Problem(record.seq, "signature", message, segment=record.segment, line=record.line)


class Redactions:
    """The redactions a ledger records, and what checking their targets' data found.

    `paths[target seq]` maps each field path redacted in that event's data (a tuple of keys and
    indexes) to the digest of the value removed. check_record honours a marker only there. What
    is wrong with one announced path (the target's data has no such field, or holds a value of
    another digest) is kept in `findings` and reported at the `redacted` event's own seq, after
    the workflow rules (`announcement_problem`): the announcement is at fault, not the target.
    """

    def __init__(self, paths: dict[int, dict[tuple, str]] | None = None):
        self.paths: dict[int, dict[tuple, str]] = paths or {}
        self.findings: dict[tuple[int, tuple], str] = {}

    @classmethod
    def collect(cls, path: str | Path) -> "Redactions":
        """Scan a ledger for `redacted` events: a quick first pass over the segment files that
        decodes only the lines of those events (found by their first bytes, which the canonical
        layout fixes), whole or torn. The main pass checks each of them in full, so a bogus one
        still fails verification at its own seq. When one field is announced twice, the first
        announcement counts (the second is unlawful)."""
        found: dict[int, dict[tuple, str]] = {}

        def note(raw: RawLine) -> None:
            if not raw.text.startswith(_REDACTED_LINE):
                return
            try:
                event = parse_line(raw, -1).event
                parts = parse_field_path(event.path)
            except (LedgerCorrupt, FieldPathError, AttributeError):
                return  # the main pass reports what is wrong with this line
            found.setdefault(event.target, {}).setdefault(parts, event.value_digest)

        # Every line of every segment file, whatever else is wrong with the ledger: a damaged
        # line elsewhere must not hide a redaction and so shift the first problem verify reports.
        # Bytes after the last line feed count only when they are a whole line that continues
        # the chain (seq, prev, hash): otherwise they are no event of the ledger (section 6).
        try:
            segments = list_segments(Path(path))
        except OSError:
            segments = []
        # Lines are read bounded (ledger.store.scan): one over the limit fails check 1, so it holds no
        # announcement, and only its length is read.
        complete, last = 0, b""
        for index, segment in enumerate(segments):
            try:
                with segment.open("rb") as handle:
                    for number, _offset, text, _size, whole in read_lines(handle):
                        if whole:
                            complete, last = complete + 1, text
                        if text is None:
                            continue
                        if not whole and index == len(segments) - 1 and not _continues(text, complete, last):
                            continue
                        if text.startswith(_REDACTED_LINE):
                            note(RawLine(segment.name, number, 0, text))
            except OSError:
                continue  # reported by the main pass
        return cls(found)

    @classmethod
    def from_records(cls, records) -> "Redactions":
        """The same from a Store's `redacted` Records (`store.records(from_seq, kind="redacted")`),
        for a reader that checks only the events after some seq: a redaction's target is always
        earlier than its announcement, so the announcements after that seq are all that the
        events after it can need."""
        found: dict[int, dict[tuple, str]] = {}
        for record in records:
            try:
                parts = parse_field_path(record.event.path)
            except (FieldPathError, AttributeError):
                continue  # the fold reports what is wrong with this event
            found.setdefault(record.event.target, {}).setdefault(parts, record.event.value_digest)
        return cls(found)

    def of(self, seq: int) -> dict[tuple, str] | None:
        return self.paths.get(seq)

    def announcement_problem(self, record) -> Problem | None:
        """For a `redacted` event's Record: the Problem with what it announces, found when its
        target's data was checked; None when there is none (or the target was not checked)."""
        event = record.event
        message = self.findings.get((event.target, parse_field_path(event.path)))
        if message is None:
            return None
        return Problem(record.seq, "data", message, segment=record.segment, line=record.line)


_REDACTED_LINE = b'{"body":{"kind":"redacted",'


def _continues(tail: bytes, complete: int, last: bytes) -> bool:
    """Whether unterminated last bytes are a whole line that is line `complete + 1` of the chain:
    its seq, its prev (the hash stored on `last`, the previous line) and its own hash."""
    try:
        record = parse_line(RawLine("", 0, 0, tail), complete + 1)
        if last is None:  # the line before was over the limit: nothing continues it
            return False
        previous = lines_split(last)[1] if last else ev.GENESIS_PREV
    except (LedgerCorrupt, LineError):
        return False
    return continues(record, complete + 1, previous)


def check_record(record, expected: int, prev: str, prev_ts: str = "", redactions: Redactions | None = None) -> Problem | None:
    """Checks 2 to 6 of the module docstring for one Record; None when it passes. `prev_ts` is
    the previous event's ts: no event is earlier than the one before it. `redactions` are the
    ledger's redactions (Redactions.collect); what is wrong with one of them is noted there."""
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
            if not is_ts(text):
                return problem("format", f"{name} {text!r} is not a UTC time YYYY-MM-DDTHH:MM:SS.ffffffZ")
    if event.ts < prev_ts:
        return problem("chain", f"ts {event.ts} is earlier than the previous event's ({prev_ts}): time went backwards")
    if (seq == 1) != isinstance(event, ev.Genesis):
        return problem("format", "the first event, and only the first, is the genesis")
    paths = redactions.of(record.seq) if redactions is not None else None
    return check_data(record, problem, paths, redactions)
