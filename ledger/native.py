"""The compiled verifier (ledger/_native.c): a fast path in front of the reference verifier.

`verify_fast(path)` checks a whole ledger with the C module and returns the same Report as
`ledger.verify.verify` would, or None when it declines. It declines whenever the ledger is not
plainly intact and lawful, or holds anything it leaves to the reference verifier: a problem of
any kind (the reference then finds it and words it), a torn tail, a `recovered` or `redacted`
event, a float or an escaped object key in the arguments, nesting deeper than 64 levels, an
integer of more than 18 digits in a body or 300 in the arguments, more than 64 quorums or 1,024
named approvers in one requirements object, an expected head that is not 64 lowercase hex digits,
a line longer than ledger.lines.MAX_LINE_BYTES (declined as soon as that many bytes hold no line
feed: its buffer never grows past the limit, and the reference verifier reads such a line in
bounded chunks).
So it never accepts what the reference would reject: what it accepts it checks
completely (docs/ledger-format.md, section 6, with the workflow rules), and everything else is
the reference's to judge. tests/test_verify_native.py holds the two to that, on lawful and on
tampered ledgers.

The module is optional: it is built by hatch_build.py when a C compiler and OpenSSL's headers
are there, and a build of another source than the ledger/_native.c beside it is not used.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

try:
    from ledger import _native
except ImportError:  # not built: no compiler, COUNTERSIGN_NO_NATIVE, or a wheel without it
    _native = None

from ledger.lines import MAX_LINE_BYTES

CHUNK_BYTES = 8 * 1024 * 1024  # read size; a longer line grows the buffer, up to the line limit


def _current() -> bool:
    """Whether the built module is the build of the source beside it (a checkout), or the source
    is absent (an installed wheel)."""
    if _native is None:
        return False
    source = Path(__file__).with_name("_native.c")
    try:
        return hashlib.sha256(source.read_bytes()).hexdigest() == _native.SOURCE_SHA256
    except FileNotFoundError:
        return True


_USABLE = _current() and os.environ.get("COUNTERSIGN_VERIFY") != "python"


def sealer():
    """`seal(body: bytes, data: bytes) -> (hash, line) | None` of the compiled module, or None
    when it is not usable. For a body in the module's grammar (the stricter one: then
    ledger.events.decode_event accepts it too) it returns the body's SHA-256 (hex) and the whole
    line with its line feed; None only says the caller must check the body with decode_event and
    compose the line itself. The writer uses it to skip that decode, about half its time per
    event."""
    return _native.seal if _USABLE else None


def available() -> bool:
    """Whether the compiled verifier is built, current and not switched off
    (COUNTERSIGN_VERIFY=python)."""
    return _USABLE


def verify_fast(path: str | Path, expect_head: str | None = None):
    """The Report `ledger.verify.verify(path, expect_head)` gives, computed by the compiled
    verifier; None when it is not available or declines (see the module docstring). Never
    raises for a bad or unreadable ledger: it declines."""
    from ledger.log import LedgerUnreadable, list_segments, segment_name  # both import this module
    from ledger.verify import Report, close_report
    from ledger.workflow import count_statuses

    if not _USABLE:
        return None
    if expect_head is not None and not (len(expect_head) == 64 and all(c in "0123456789abcdef" for c in expect_head)):
        return None  # no line has that hash: the reference reports the missing head
    try:
        segments = list_segments(Path(path))
    except (OSError, LedgerUnreadable):
        return None
    if not segments or not Path(path).is_dir():
        return None
    checker = _native.Verifier(expect_head)
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
        buffer[: filled - used] = buffer[used:filled]
        kept = filled - used
