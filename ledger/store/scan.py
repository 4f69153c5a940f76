"""Reading a segment's lines in bounded memory, whatever the file holds.

A ledger line is at most `ledger.store.lines.MAX_LINE_BYTES` bytes, not counting its line feed
(docs/ledger-format.md, section 2). A file can still hold more: a torn write of any size, a
tampered segment. Every reader goes through this module, which never holds more than one line
of the limit (plus one read chunk) in memory: a longer line is measured by reading on in chunks
to its line feed, and reported as too long, without its bytes.

- `read_lines(handle)`: every line from the handle's position, as `Piece`s.
- `long_lines(handle)`: the first line longer than the limit, found by a scan in chunks (a few
  C calls per MiB), for readers that read the file by other means (DuckDB's views).
- `last_line(handle, end)`: the last complete line before `end`, read backwards in chunks.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator, NamedTuple

from ledger.store.lines import MAX_LINE_BYTES

CHUNK_BYTES = 1 << 20  # read size when skipping or scanning; at most MAX_LINE_BYTES (long_lines relies on it)


class Piece(NamedTuple):
    """One line of a file. `text` is its bytes without the line feed, or None when it is longer
    than the limit (`size` bytes, line feed not counted). `terminated` is False for the bytes
    after the last line feed. `number` is 1-based, `offset` the byte offset of its first byte."""

    number: int
    offset: int
    text: bytes | None
    size: int
    terminated: bool


_piece, _Piece = tuple.__new__, Piece  # a Piece without NamedTuple's __new__ (one per line)


def read_lines(handle: BinaryIO, offset: int = 0, number: int = 1, limit: int = MAX_LINE_BYTES) -> Iterator[Piece]:
    """The lines of a binary file from its current position (`offset`, the position's byte offset,
    and `number`, the number of the line there, label them). Reads blocks of at most CHUNK_BYTES
    and the limit, and holds at most `limit` bytes of a line besides one block: a longer line is
    yielded with `text` None and its size, counted as the blocks go by. Time linear in the bytes
    read. Leaves the handle's position past what it read. Raises OSError as reading does."""
    chunk = min(CHUNK_BYTES, limit)
    read, make = handle.read, _piece
    held: list[bytes] = []  # the current line's bytes so far (no line feed yet), unless too long
    held_size, too_long = 0, False
    while True:
        block = read(chunk)
        if not block:
            if held_size:
                yield make(_Piece, (number, offset, None if too_long else b"".join(held), held_size, False))
            return
        parts = block.split(b"\n")
        last = parts.pop()  # after the block's last line feed
        if parts:
            first = parts[0]
            size = held_size + len(first)
            if not held_size:
                text = first if size <= limit else None
            else:
                text = None if too_long or size > limit else b"".join(held) + first
            yield make(_Piece, (number, offset, text, size, True))
            offset += size + 1
            number += 1
            for i in range(1, len(parts)):  # inside the block: shorter than a block, so within the limit
                text = parts[i]
                yield make(_Piece, (number, offset, text, len(text), True))
                offset += len(text) + 1
                number += 1
            held, held_size, too_long = [], 0, False
        if last:
            held_size += len(last)
            if held_size > limit:
                held, too_long = [], True
            elif not too_long:
                held.append(last)


class Capped:
    """A binary file read no further than `end` bytes: what a reader without the lock reads of a
    segment, so that bytes written after it looked (a torn tail moved aside by a writer, and the
    lines appended in its place) are never joined to what it read before."""

    __slots__ = ("_handle", "_left")

    def __init__(self, handle: BinaryIO, end: int):
        self._handle = handle
        self._left = max(0, end - handle.tell())

    def read(self, size: int = -1) -> bytes:
        size = self._left if size is None or size < 0 else min(size, self._left)
        block = self._handle.read(size) if size else b""
        self._left -= len(block)
        return block


def capped(handle: BinaryIO) -> Capped:
    """`handle` (an open regular file) read up to its size as of now, from its position."""
    import os

    return Capped(handle, os.fstat(handle.fileno()).st_size)


class LongLine(NamedTuple):
    """A line longer than the limit: its 1-based number, byte offset and size (without a line
    feed; for an unterminated one, to the end of the file), and whether a line feed ends it."""

    number: int
    offset: int
    size: int
    terminated: bool


def long_lines(handle: BinaryIO, limit: int = MAX_LINE_BYTES, chunk_bytes: int = CHUNK_BYTES) -> LongLine | None:
    """The first line of the file (from its start) longer than `limit` bytes, or None. Reads in
    chunks of `chunk_bytes` (≤ `limit`): a line inside one chunk is shorter than the limit, so
    only the run of bytes without a line feed across chunk boundaries needs counting. Linear time."""
    if not 0 < chunk_bytes <= limit:
        raise ValueError("long_lines reads chunks of at most the limit")
    handle.seek(0)
    run = 0  # bytes since the last line feed (the current line's length so far)
    start = 0  # offset of the current line
    number = 1
    position = 0
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            return LongLine(number, start, run, False) if run > limit else None
        first = chunk.find(b"\n")
        if first < 0:
            run += len(chunk)
        else:
            if run + first > limit:
                return LongLine(number, start, run + first, True)
            last = chunk.rfind(b"\n")
            number += chunk.count(b"\n")
            start = position + last + 1
            run = len(chunk) - last - 1
        position += len(chunk)


def last_newline(handle: BinaryIO, end: int, floor: int = 0) -> int:
    """The offset of the last line feed in [floor, end), or -1: read backwards in chunks of
    CHUNK_BYTES, so a long run without one costs time, not memory."""
    position = end
    while position > floor:
        start = max(floor, position - CHUNK_BYTES)
        handle.seek(start)
        found = handle.read(position - start).rfind(b"\n")
        if found >= 0:
            return start + found
        position = start
    return -1


def last_line(handle: BinaryIO, end: int, limit: int = MAX_LINE_BYTES) -> tuple[int, bytes | None]:
    """`(offset, text)` of the line whose line feed is the byte just before `end` (`end` > 0,
    `handle` a binary file with a line feed at `end - 1`); `text` is None when it is longer than
    `limit` (nothing of it is then held; finding its offset reads it backwards in chunks).
    Reads at most `limit + 1` bytes of a line within the limit."""
    floor = max(0, end - 2 - limit)  # where the line feed before a line of `limit` bytes is
    start = last_newline(handle, end - 1, floor) + 1
    if start == 0 and floor > 0:
        start = last_newline(handle, floor) + 1
    if end - 1 - start > limit:
        return start, None
    handle.seek(start)
    return start, handle.read(end - 1 - start)
