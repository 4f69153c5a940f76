"""Finding one event of a file ledger by its seq without reading the ledger.

A segment holds consecutive seqs, one line each, and every line starts with the same bytes up to
its seq (`{"body":{"kind":"<kind>","seq":<N>,`: docs/ledger-format.md, section 2, the canonical
layout). So the segment holding seq N is found by a binary search over the segments' first seqs,
and the line by a binary search over byte offsets within it: from any offset, the next line
starts after the next line feed and names its seq in its first bytes. A probe reads the bytes up
to that line feed and a few dozen more, so finding an event costs O(log size) small reads
(a line longer than the probe's window costs one read of it).

Nothing here checks a line beyond its first bytes: callers parse and check the line they find
(`ledger.store.log.parse_line`, the hash chain). A file that is not a ledger, or a seq that is not
there, gives None, never a wrong answer without a check: the line found is always one whose
first bytes name the seq asked for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO

from ledger.store.lines import MAX_LINE_BYTES

# The first bytes of every line (anchored, no nested repetition: linear); the kind is at most 32.
_HEAD = re.compile(rb'\{"body":\{"kind":"[a-z_]{1,32}","seq":([0-9]{1,19}),')
_HEAD_BYTES = 80  # enough for the longest kind and a 19-digit seq
_PROBE = 4096  # bytes read at once while looking for a line feed
_SCAN = 64 * 1024  # below this span, the search reads it at once


def head_seq(first_bytes: bytes) -> int | None:
    """The seq a line names in its first bytes, or None when they are not a ledger line's."""
    match = _HEAD.match(first_bytes)
    return int(match.group(1)) if match else None


def _next_line(handle: BinaryIO, offset: int, end: int) -> tuple[int, int | None] | None:
    """`(start, seq)` of the first line starting at or after `offset` (a line starts at 0 or
    after a line feed), before `end`; seq None when its first bytes are not a line's. None when
    no line starts in [offset, end)."""
    start = offset
    if offset > 0:
        position = offset - 1  # a line starts at `offset` when the byte before it is a line feed
        handle.seek(position)
        while True:
            block = handle.read(min(_PROBE, end - position))
            if not block:
                return None
            found = block.find(b"\n")
            if found >= 0:
                start = position + found + 1
                break
            position += len(block)
            if position - offset > MAX_LINE_BYTES + 1:
                return None  # no line is that long: not a ledger's segment
    if start >= end:
        return None
    handle.seek(start)
    return start, head_seq(handle.read(_HEAD_BYTES))


def first_seq(segment: Path) -> int | None:
    """The seq of a segment's first line, or None (empty, unreadable, not a ledger line)."""
    try:
        with segment.open("rb") as handle:
            return head_seq(handle.read(_HEAD_BYTES))
    except OSError:
        return None


def offset_of(segment: Path, seq: int) -> int | None:
    """The byte offset of the line of `seq` in `segment`, or None when it is not there."""
    try:
        with segment.open("rb") as handle:
            return _offset_of(handle, seq)
    except OSError:
        return None


def _offset_of(handle: BinaryIO, seq: int) -> int | None:
    end = handle.seek(0, 2)
    found = _next_line(handle, 0, end)
    if found is None or found[1] is None or found[1] > seq:
        return None
    lo, lo_seq = found
    hi = end
    # Invariant: a line starts at lo and names lo_seq <= seq; the line of seq starts before hi.
    while hi - lo > _SCAN and lo_seq != seq:
        mid = (lo + hi) // 2
        probe = _next_line(handle, mid, hi)
        if probe is None or probe[1] is None or probe[1] > seq:
            hi = mid
        else:
            lo, lo_seq = probe
    if lo_seq == seq:
        return lo
    # The span is small: read it at once and look at each line's first bytes.
    handle.seek(lo)
    span = handle.read(hi - lo + _HEAD_BYTES)
    start = 0
    while start < hi - lo:
        current = head_seq(span[start : start + _HEAD_BYTES])
        if current is None or current > seq:
            return None
        if current == seq:
            return lo + start
        start = span.find(b"\n", start) + 1
        if start == 0:
            return None
    return None
