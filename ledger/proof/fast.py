"""The compiled verifier's driver: `verify_fast(path)` checks a whole ledger with the C module
(ledger/_native.c, reached through ledger.store.native) and returns the same Report as
ledger.proof.verify.verify would, or None when it declines (see ledger/store/native.py for when it
declines and why that is safe: it never accepts what the reference would reject)."""

from __future__ import annotations

from pathlib import Path

from ledger.proof.report import Report, close_report
from ledger.store import native
from ledger.store.lines import MAX_LINE_BYTES
from ledger.store.log import LedgerUnreadable, list_segments, segment_name
from ledger.workflow.machine import count_statuses

CHUNK_BYTES = 8 * 1024 * 1024  # read size; a longer line grows the buffer, up to the line limit


def verify_fast(path: str | Path, expect_head: str | None = None):
    """The Report `ledger.proof.verify.verify(path, expect_head)` gives, computed by the compiled
    verifier; None when it is not available or declines (see the module docstring). Never
    raises for a bad or unreadable ledger: it declines."""
    compiled = native.module()
    if compiled is None:
        return None
    if expect_head is not None and not (len(expect_head) == 64 and all(c in "0123456789abcdef" for c in expect_head)):
        return None  # no line has that hash: the reference reports the missing head
    try:
        segments = list_segments(Path(path))
    except (OSError, LedgerUnreadable):
        return None
    if not segments or not Path(path).is_dir():
        return None
    checker = compiled.Verifier(expect_head)
    buffer = bytearray(CHUNK_BYTES)
    for number, segment in enumerate(segments, start=1):
        if segment.name != segment_name(number):
            return None
        try:
            with segment.open("rb", buffering=0) as handle:
                if not _feed_segment(checker, handle, buffer):
                    return None
        except OSError:
            return None
    finished = checker.finish()
    if finished is None:
        return None
    count, head, head_seen_at, open_requests, final_counts = finished
    report = Report(path=str(path), count=count, head=head)
    statuses = count_statuses((status for _request, status in open_requests), final_counts)
    close_report(report, expect_head, head_seen_at, open_requests, statuses)
    return None if report.problem is not None else report  # a missing head: the reference reports it


_POLICY_LINE = b'{"body":{"kind":"policy",'


def _pinned_policies_hold(buffer: bytearray, used: int) -> bool:
    """Whether every `policy` line among the whole lines `buffer[:used]` that pins its policy has
    the data section 11.5 requires (ledger.pinning.data_problem, the reference's own check): the
    compiled module reads those lines' bodies and leaves their data to this. A line starts the
    buffer or follows a line feed; such a line is rare (one per policy a ledger keeps), and
    bytes.find finds them at memchr's pace."""
    at = 0 if buffer.startswith(_POLICY_LINE) else buffer.find(b"\n" + _POLICY_LINE, 0, used)
    while 0 <= at < used:
        start = at if at == 0 and buffer.startswith(_POLICY_LINE) else at + 1
        end = buffer.find(b"\n", start, used)
        if end < 0:
            return False
        if not _policy_line_holds(bytes(buffer[start:end])):
            return False
        at = buffer.find(b"\n" + _POLICY_LINE, end, used)
    return True


def _policy_line_holds(text: bytes) -> bool:
    from ledger import events as ev, pinning
    from ledger.store.log import LedgerCorrupt, RawLine, parse_line

    try:
        record = parse_line(RawLine("", 0, 0, text), -1)
    except LedgerCorrupt:
        return False
    if not isinstance(record.event, ev.PolicyLoaded):
        return False
    return pinning.data_problem(record.event, record.data) is None


def _feed_segment(checker, handle, buffer: bytearray) -> bool:
    """Feed one segment's bytes to the checker, chunk by chunk; a line cut by a chunk boundary
    is carried to the next chunk. False when the checker declines, the segment does not end in
    a line feed (a torn tail, or a cut segment: the reference verifier's to report) or a line is
    longer than MAX_LINE_BYTES (the buffer holds at most the limit and its line feed)."""
    kept = 0  # bytes at the start of `buffer` not yet consumed
    while True:
        if kept == len(buffer):  # one line longer than the buffer
            if kept > MAX_LINE_BYTES:
                return False
            buffer.extend(bytes(min(len(buffer), MAX_LINE_BYTES + 2 - len(buffer))))  # at most the limit, its line feed, one more
        with memoryview(buffer) as view:
            got = handle.readinto(view[kept:])
            if not got:
                return kept == 0
            filled = kept + got
            used = checker.feed(view[:filled])
        if used < 0:
            return False
        if not _pinned_policies_hold(buffer, used):
            return False
        buffer[: filled - used] = buffer[used:filled]
        kept = filled - used
