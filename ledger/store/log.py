"""The ledger on disk: an append-only, hash-chained directory of JSON Lines segments.

    DIR/
      events-00000001.jsonl   segments, in order; one event per line (see ledger.store.lines)
      events-00000002.jsonl
      LOCK                    the append lock: held (flock, exclusive) for the span of one write
      WRITERS                 every open writer holds a shared flock; an exclusive writer (a Gate)
                              holds it exclusively, so that no one else appends while it is open
      quarantine/             torn fragments moved aside on recovery
      .events-NNNNNNNN.jsonl.tmp   a segment being created (never read as a segment)

`LedgerReader` reads any ledger without a lock. `Ledger` is a writer; several writers, in one
process or many, may append to one ledger at the same time. Each append (or batch) takes the
append lock, catches up with what other writers appended since (the true head and the current
segment), recovers a torn tail a crashed writer left, writes whole lines, fdatasyncs, and
releases the lock; it returns only after the bytes are on disk. Threads of one process share one
write and one sync (group commit). An event may carry an idempotency `key`: appending it again
with the same content returns the original event, with other content raises KeyConflict. The
protocol, byte for byte, is docs/ledger-format.md section 7.

Neither class verifies the chain; that is `ledger.proof.verify`'s job (the Gate verifies when it replays).
"""

from __future__ import annotations

import collections
import errno
import itertools
import fcntl
import hashlib
import os
import re
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import msgspec

from ledger.store import lines, native
from ledger.store import seek, watch
from ledger.store.scan import capped, last_line, last_newline, read_lines
from ledger.store.base import Store
from ledger.clock import Clock, format_ts, utc_now
from ledger.digest import canonical_json
from ledger.events import (
    FORMAT,
    GENESIS_PREV,
    KEY_MAX_LENGTH,
    AnyEvent,
    Event,
    Genesis,
    Recovered,
    decode_event,
    encode_body,
    encode_event,
)

SEGMENT_PREFIX = "events-"
SEGMENT_SUFFIX = ".jsonl"
SEGMENT_GLOB = f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"
SEGMENT_NAME = re.compile(r"events-(\d{8})\.jsonl")
TEMP_PREFIX = "."  # a segment being created is `.events-NNNNNNNN.jsonl.tmp` until it is renamed
TEMP_SUFFIX = ".tmp"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
LOCK_FILE = "LOCK"
WRITERS_FILE = "WRITERS"
QUARANTINE_DIR = "quarantine"
CACHE_DIR = "cache"  # derived data (a Gate's snapshot): never part of the ledger

_sync = getattr(os, "fdatasync", os.fsync)

# The start of a line whose body carries a `key` (it follows `prev`; docs/ledger-format.md 3).
# Anchored at a line start, so a member named "prev" inside DATA cannot match.
# Each quantifier is followed by a byte its class excludes, so a match attempt is linear.
_KEYED_LINE = re.compile(rb'\{"body":\{"kind":"[a-z_]+","seq":[0-9]+,"ts":"[^"\n]*","prev":"[0-9a-f]{64}","key":"')
_COPY_BYTES = 1 << 20  # chunk size for copying and hashing fragments of any size

OPEN_CHECKS: list[Callable[[Path], None]] = []
"""What a writer checks before it appends to a ledger directory: each callable gets the path and
raises a LedgerError to refuse. The layers above storage register theirs here, so that storage
imports none of them: the package `ledger` (which runs before any of its modules) registers
ledger.proof.checkpoint's `refuse_if_behind_checkpoint` (a ledger shorter than, or diverging
from, its latest signed checkpoint is never extended), so every writer, however it was
imported, runs the check."""


class LedgerError(Exception):
    """Base of the ledger's errors."""


class LedgerUnreadable(LedgerError):
    """The path is not a readable ledger (missing, not a directory, no segments)."""


class LedgerLocked(LedgerError):
    """The ledger is held exclusively by another writer (a Gate), or an exclusive writer was
    asked for while other writers are open."""


class LedgerCorrupt(LedgerError):
    """A line cannot be read as a ledger event. `seq` is the seq the line should have had."""

    def __init__(self, seq: int | None, message: str, segment: str | None = None, line: int | None = None):
        where = f" ({segment}, line {line})" if segment else ""
        super().__init__(f"seq {seq}: {message}{where}" if seq is not None else message + where)
        self.seq, self.message, self.segment, self.line = seq, message, segment, line


class LedgerBroken(LedgerError):
    """A write or fsync failed. The writer stops: nothing more is appended, nothing is retried."""


class ForeignAppend(LedgerError):
    """An exclusive writer found events it did not write: some process appended without taking
    the WRITERS lock. Nothing was appended; the exclusive writer's view (a Gate's workflow) is
    stale, so it stops (later appends raise LedgerBroken)."""


class LineTooLong(LedgerError, ValueError):
    """An event's line would be longer than ledger.store.lines.MAX_LINE_BYTES (docs/ledger-format.md,
    section 2): it is refused and nothing of its append is written. `size` is the line's length
    in bytes (line feed not counted); `event` the refused event's kind."""

    def __init__(self, kind: str, size: int):
        super().__init__(
            f"refusing to append a {kind} event of {size:,} bytes: a ledger line is at most "
            f"{lines.MAX_LINE_BYTES:,} bytes (docs/ledger-format.md, section 2), and nothing of this append was written"
        )
        self.kind, self.size = kind, size


class KeyConflict(LedgerError):
    """An event's idempotency key is already in the ledger (at `seq`) with other content."""

    def __init__(self, key: str, seq: int, message: str):
        super().__init__(message)
        self.key, self.seq = key, seq


class Record(NamedTuple):
    """One event as stored: its seq and hash, the decoded event, the exact body bytes that were
    hashed, the raw data bytes (`b"null"` when none) and where it sits (`line` is 1-based in the
    segment when read, 0 when the writer returned it)."""

    seq: int
    hash: str
    event: AnyEvent
    body: bytes
    data: bytes
    segment: str
    line: int

    def data_value(self) -> dict | None:
        """The decoded data (`{"args": ..., "context": ...}`) or None."""
        return msgspec.json.decode(self.data)


class RawLine(NamedTuple):
    segment: str
    line: int  # 1-based within the segment
    offset: int  # byte offset within the segment
    text: bytes  # without the newline


class TornTail(NamedTuple):
    """Bytes after the last newline of the last segment: a write that never completed.
    `fragment` is None when they are more than ledger.store.lines.MAX_LINE_BYTES (then no whole line,
    and not read); `size` is their number."""

    segment: str
    offset: int
    fragment: bytes | None
    size: int = -1


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:08d}{SEGMENT_SUFFIX}"


def temp_name(number: int) -> str:
    """The name a segment has while it is being created: never a segment name."""
    return f"{TEMP_PREFIX}{segment_name(number)}{TEMP_SUFFIX}"


def list_segments(path: Path) -> list[Path]:
    """The segment files of a ledger directory (named exactly `events-NNNNNNNN.jsonl`), in order.
    Raises LedgerUnreadable when something of that name is not a regular file (a directory, a
    FIFO, a dangling symlink): skipping it would hide a segment, and reading a FIFO would block;
    OSError (PermissionError) when the directory cannot be listed. No directory: no segments."""
    try:
        names = os.listdir(path)  # unlike glob, says when the directory cannot be read
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = sorted(path / name for name in names if SEGMENT_NAME.fullmatch(name))
    for p in found:
        if not p.is_file():
            raise LedgerUnreadable(f"{p}: named like a segment but not a regular file; move it out of the ledger directory")
    return found


def shared_mode(directory: Path) -> int:
    """The mode of a file made in the ledger's `directory`: the directory's read and write bits
    (0755 gives 0644; a directory a reviewers' group shares, 2775, gives 0664), so that every
    account the directory admits can use what any of them creates (docs/ledger-format.md 7.1)."""
    try:
        return os.stat(directory).st_mode & 0o666
    except OSError:
        return 0o644


def open_created(path: Path, flags: int, mode: int) -> int:
    """os.open(path, flags | O_CREAT, mode), and the mode set again on a file this account owns
    (the umask may have taken bits the directory asks for). Raises OSError as os.open."""
    fd = os.open(path, flags | os.O_CREAT, mode)
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, mode)
    except OSError:
        pass  # not ours, or a file system without modes: it is used as it is
    return fd


def make_dir(path: Path, like: Path) -> None:
    """Make the directory `path` (if missing) with the mode of `like`, the ledger's directory,
    set again past the umask (see shared_mode)."""
    if path.is_dir():
        return
    try:
        mode = os.stat(like).st_mode & 0o7777
    except OSError:
        mode = 0o755
    path.mkdir(mode=mode, exist_ok=True)
    try:
        if os.stat(path).st_uid == os.geteuid():
            os.chmod(path, mode)
    except OSError:
        pass


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (os.write may write fewer). Raises OSError as os.write."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LedgerReader:
    """Reads a ledger directory in order. Takes no lock; a reader sees a prefix of the events.

    Raises LedgerUnreadable from the constructor when `path` is not a ledger. After `lines()` or
    `records()` has been consumed, `torn` says whether the last segment ended in a torn line (on a
    ledger being written, that may also be a write in progress).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise LedgerUnreadable(f"{self.path}: no such ledger directory")
        if not self.path.is_dir():
            raise LedgerUnreadable(f"{self.path}: not a directory")
        try:
            self.segments = list_segments(self.path)
        except OSError as exc:
            raise LedgerUnreadable(f"{self.path}: {exc.strerror}") from None
        if not self.segments:
            raise LedgerUnreadable(f"{self.path}: no ledger segments ({SEGMENT_GLOB}) in this directory")
        self.torn: TornTail | None = None

    def lines(self) -> Iterator[RawLine]:
        """Every complete line of every segment, without its newline.

        Raises LedgerCorrupt (with `seq` None; the caller knows how many lines came before) when
        the segment numbers have a gap, a segment before the last does not end in a line feed, or
        a line is longer than ledger.store.lines.MAX_LINE_BYTES (it is skipped over, never held whole;
        its segment, line number and byte offset are named). An unterminated last line of any
        length is the torn tail, not an error.
        """
        last = len(self.segments) - 1
        for i, segment in enumerate(self.segments):
            if segment.name != segment_name(i + 1):
                raise LedgerCorrupt(None, f"segment {segment_name(i + 1)} is missing (the next one is {segment.name})")
            try:
                handle = segment.open("rb")
            except OSError as exc:
                raise LedgerUnreadable(f"{segment}: {exc.strerror}") from None
            with handle:
                # Bounded reads: a line over the limit is measured, never held, and nothing past the
                # segment's size when the reader came to it is read (ledger.store.scan).
                for number, offset, text, size, terminated in read_lines(capped(handle)):
                    if not terminated:
                        if i == last:
                            self.torn = TornTail(segment.name, offset, text, size)
                            return
                        # A segment before the last one was cut short: that is not a crash of the
                        # current writer, so it is reported as corruption, not quarantined.
                        raise LedgerCorrupt(
                            None, f"{segment.name} ends without a line feed but is not the last segment", segment.name, number
                        )
                    if text is None:
                        raise LedgerCorrupt(None, f"{lines.too_long(size)}, at byte {offset}", segment.name, number)
                    yield RawLine(segment.name, number, offset, text)

    def records(self) -> Iterator[Record]:
        """Every event, decoded. Raises LedgerCorrupt for a line that is not a valid event; the
        chain (seq, prev, hash) is *not* checked here."""
        expected = 1
        for raw in self.lines():
            yield parse_line(raw, expected)
            expected += 1


def parse_line(raw: RawLine, expected_seq: int) -> Record:
    """Decode one raw line into a Record. Raises LedgerCorrupt (naming `expected_seq`)."""
    try:
        body, digest, data = lines.split(raw.text)
    except lines.LineError as exc:
        raise LedgerCorrupt(expected_seq, str(exc), raw.segment, raw.line) from None
    try:
        event = decode_event(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        # msgspec names a pattern by its whole regex; the format document names it by its field
        message = _without_regex(str(exc))
        raise LedgerCorrupt(expected_seq, f"the body is not a valid event: {message}", raw.segment, raw.line) from None
    return Record(event.seq, digest, event, body, data, raw.segment, raw.line)


def _without_regex(message: str) -> str:
    """msgspec's message with its "matching regex '<pattern>' " (up to the last "- at `") worded
    as the format document's form. A scan with str.find, linear in the message (the pattern
    `matching regex '.*' (?=- at `)` this replaces backtracked over the rest of the message
    from every occurrence, quadratic in a message naming a long unknown member)."""
    start = message.find(_REGEX_OPEN)
    end = message.rfind(_REGEX_CLOSE)
    if start < 0 or end < start + len(_REGEX_OPEN):
        return message
    return message[:start] + "in the form docs/ledger-format.md gives " + message[end + 2 :]


_REGEX_OPEN, _REGEX_CLOSE = "matching regex '", "' - at `"


class RecoveryNote(NamedTuple):
    """What a writer found and did about a torn tail."""

    segment: str
    offset: int
    fragment_bytes: int
    fragment_sha256: str
    quarantine: str

    def __str__(self) -> str:
        return (
            f"{self.segment}: a torn last line ({self.fragment_bytes} bytes at offset {self.offset}: an unfinished "
            f"write, or the ledger cut mid-line) was moved to {self.quarantine}"
        )

    def event(self) -> Recovered:
        return Recovered(
            segment=self.segment,
            offset=self.offset,
            fragment_bytes=self.fragment_bytes,
            fragment_sha256=self.fragment_sha256,
            quarantine=self.quarantine,
        )


def _holds_beginning(segment: Path, offset: int, earlier: Path) -> bool:
    """Whether the bytes of the file `earlier` are the beginning of those of `segment` from
    `offset` (or nothing): compared in chunks, both may be of any size."""
    with earlier.open("rb") as a, segment.open("rb") as b:
        b.seek(offset)
        while chunk := a.read(_COPY_BYTES):
            if b.read(len(chunk)) != chunk:
                return False
    return True


def content_of(event: Event, data: bytes | None) -> bytes:
    """What an idempotency key binds: the body with `seq`, `ts` and `prev` left out (they are the
    writer's, and a retry comes later), then a line feed, then the data bytes (`null` when none)."""
    neutral = msgspec.structs.replace(event, seq=0, ts="", prev="")
    return encode_event(neutral) + b"\n" + (data if data is not None else b"null")


class _Item(NamedTuple):
    event: Event
    data: bytes | None  # canonical data bytes, None for `null`
    key: str | None
    content: bytes | None  # content_of(...) for a keyed event


_new_tuple = tuple.__new__  # an _Item or Record without its generated __new__ (the writer makes one per event)


def continues(record, expected: int, prev: str) -> bool:
    """Section 6's exception (docs/ledger-format.md): is the Record read from the bytes after the
    last line feed a whole line that is line `expected` of the chain? Its `seq` is `expected`, its
    `prev` is `prev`, its hash is that of its body, and its DATA is null or a JSON object (the
    layout of section 2, which check 1 requires: a write cut inside DATA leaves it unfinished)."""
    if record.seq != expected or record.event.prev != prev or hashlib.sha256(record.body).hexdigest() != record.hash:
        return False
    if record.data == b"null":
        return True
    try:
        return record.data.startswith(b"{") and isinstance(msgspec.json.decode(record.data), dict)
    except (msgspec.DecodeError, RecursionError):  # no writer nests that deep: not one of its lines
        return False


class _Request:
    """One append_batch call waiting for (or taking part in) a commit."""

    __slots__ = ("items", "records", "error", "done")

    def __init__(self, items: list[_Item]):
        self.items = items
        self.records: list[Record] | None = None
        self.error: BaseException | None = None
        self.done = False

    def result(self) -> list[Record]:
        if self.error is not None:
            raise self.error
        assert self.records is not None
        return self.records


class _Transaction(_Request):
    """One transact call: its items are made at its turn in the commit, by `build`, from the
    Records after seq `since` (None: after this writer's head when the commit began)."""

    __slots__ = ("build", "since")

    def __init__(self, build: Callable[[list[Record]], Sequence[tuple[Event, dict | bytes | None]]], since: int | None):
        super().__init__([])
        self.build, self.since = build, since


NEAR = 256  # records_at reads on through this many lines rather than search again

RECENT_BYTES = 8 * 1024 * 1024
"""The Records a writer keeps of its last commits and catch-ups (bounded in bytes), from which a
transaction gets what it has not seen without reading the files."""

_SHARED: dict[tuple[int, str], "Ledger"] = {}  # (pid, real path) → the writer Gates of this process share
_SHARED_LOCK = threading.RLock()  # re-entered when a collected writer's __del__ runs inside `shared`


class Ledger(Store):
    """A writer of a ledger directory; any number of them may append to one ledger at once.

    `Ledger(path)` creates the directory and its genesis event if needed (`create=False` refuses:
    LedgerUnreadable), joins the ledger's writers (a shared flock on WRITERS; LedgerLocked if a
    Gate holds the ledger exclusively), and, under the append lock, moves a torn last line to
    `quarantine/` and records a `recovered` event about it (`recovery` says what was done).

    `append` and `append_batch` return once the bytes are on disk (fdatasync). Each commit takes
    the append lock (flock on LOCK, blocking), catches up with events other writers appended
    since (and a torn tail one of them left, which it quarantines and records), writes, syncs and
    releases the lock; so seqs stay gapless and lines whole across processes. Threads of one
    process are committed together: appends that arrive while a commit is in flight (or within
    `group_window` seconds of the first) share the next write and sync. A new segment is started
    before a commit that would make the current one exceed `segment_bytes` (unless it is empty);
    it is written under a temporary name, synced, renamed, and the directory synced.

    `exclusive=True` (what a Gate uses) holds WRITERS exclusively for the writer's life: it raises
    LedgerLocked while any other writer is open, and other writers get LedgerLocked while it is.
    `clock` supplies `ts` for events that do not carry one (read once per commit).
    `segment_bytes` is in bytes, `group_window` in seconds (0: no waiting). A Ledger belongs to
    the process that opened it (after fork, open a new one). Use it as a context manager, or call
    `close()`. The constructor raises LedgerUnreadable, LedgerLocked, LedgerCorrupt (a last line
    whose hash does not match its body), LedgerBroken (the genesis or a `recovered` event could
    not be written); the protocol is docs/ledger-format.md section 7.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        clock: Clock = utc_now,
        exclusive: bool = False,
        group_window: float = 0.0,
    ):
        self.path = Path(path)
        self.segment_bytes = segment_bytes
        self.clock = clock
        self.group_window = group_window
        self.recovery: RecoveryNote | None = None  # what opening found
        self._earlier_notes: list[RecoveryNote] = []  # set by _quarantine, taken by _notes_with_earlier
        self.recoveries: list[RecoveryNote] = []  # every torn tail this writer quarantined
        self.completed_tail = False  # a last line lacking only its line feed was completed
        self.commits = 0  # writes (each with one sync) this writer made; for tests and benchmarks
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._leading = False
        self._closed = False
        self._broken: str | None = None
        self._exclusive = exclusive
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._writers_fd: int | None = None
        self._segment_number, self._segment_size, self._ino = 0, 0, 0
        self._paths: tuple[int, str, str] = (-1, "", "")  # _watched's: segment number, its path, the next one's
        self._recent: collections.deque[Record] = collections.deque()  # the last Records written or read (RECENT_BYTES)
        self._recent_bytes = 0
        self._shares = 0  # users of a writer from Ledger.shared (0: not shared)
        self._shared_key: tuple[int, str] | None = None
        self._tip: tuple[int, str] = (0, GENESIS_PREV)
        self._tip_ts = ""  # the head's ts: no event this writer appends is earlier
        self._keys: dict[str, tuple[int, int, int]] | None = None  # key → (seq, segment number, offset)
        self._first_seqs: dict[int, int] = {}  # segment number → the seq of its first line (ledger.store.seek)
        self._ledger_id: str | None = None
        self._format: str | None = None
        if not self.path.exists():
            if not create:
                raise LedgerUnreadable(f"{self.path}: no such ledger directory")
            self.path.mkdir(parents=True, exist_ok=True)
            if self.path.parent.exists():
                _fsync_dir(self.path.parent)
        elif not self.path.is_dir():
            raise LedgerUnreadable(f"{self.path}: not a directory")
        elif not create and not list_segments(self.path):  # before a lock file is made in a wrong directory
            raise LedgerUnreadable(f"{self.path}: no ledger segments ({SEGMENT_GLOB}) in this directory")
        self._mode = shared_mode(self.path)
        try:
            self._writers_fd = self._join_writers(exclusive)
            self._lock_fd = open_created(self.path / LOCK_FILE, os.O_RDWR, self._mode)
            with self._append_lock():
                self._open_for_append(create)
        except BaseException:
            self.close()
            raise

    # --- opening ------------------------------------------------------------------------------

    def _join_writers(self, exclusive: bool) -> int:
        fd = open_created(self.path / WRITERS_FILE, os.O_RDWR, shared_mode(self.path))
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LedgerLocked(self._locked_message(exclusive)) from None
            raise
        return fd

    def _locked_message(self, exclusive: bool) -> str:
        if exclusive:
            return f"{self.path}: another writer holds the ledger's lock (an exclusive writer needs the ledger to itself)"
        return f"{self.path}: another writer holds the ledger's lock exclusively (a Gate is open on it)"

    @contextmanager
    def _append_lock(self) -> Iterator[None]:
        """Hold LOCK exclusively (blocking) for one commit."""
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _open_for_append(self, create: bool) -> None:
        """Find the head and the active segment, recover a torn tail. Runs under the append lock."""
        for check in OPEN_CHECKS:  # e.g. never extend a ledger shorter than its checkpoint
            check(self.path)
        segments = list_segments(self.path)
        if not segments:
            if not create:
                raise LedgerUnreadable(f"{self.path}: no ledger segments in this directory")
            self._commit_now(Genesis(format=FORMAT, ledger_id=uuid.uuid4().hex))
            return
        current = segments[-1]
        self.recovery = self._quarantine_torn_tail(current)
        self._tip = self._read_head(segments)
        self._use_segment(self._number_of(current))
        if self.recovery is None:
            self.recovery = self._unrecorded_quarantine()
        if self._tip[0] == 0:
            raise LedgerCorrupt(1, "the ledger has segments but no events")
        if self.recovery is not None:
            for note in self._notes_with_earlier(self.recovery):
                self.recoveries.append(note)
                self._commit_now(note.event())

    def _commit_now(self, event: Event) -> Record:
        """Append one event the writer itself makes (genesis, recovered). Under the append lock."""
        request = _Request([_Item(event, None, None, None)])
        self._commit_locked([request])
        return request.result()[0]

    @staticmethod
    def _number_of(segment: Path) -> int:
        return int(segment.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)])

    def _use_segment(self, number: int) -> None:
        """Make segment `number` (which exists) the one appended to."""
        fd = os.open(self.path / segment_name(number), os.O_WRONLY | os.O_APPEND)
        st = os.fstat(fd)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._segment_number, self._segment_size, self._ino = fd, number, st.st_size, st.st_ino

    def _quarantine_torn_tail(self, segment: Path) -> RecoveryNote | None:
        """Move the bytes after the last line feed of `segment` to quarantine/ (synced), truncate
        the segment to its last line feed (synced). Runs under the append lock. A failed write,
        sync or truncation stops the writer (LedgerBroken); the next writer starts afresh."""
        try:
            return self._quarantine(segment)
        except OSError as exc:
            self._broken = exc.strerror or str(exc)
            raise LedgerBroken(f"{self.path}: moving a torn tail to quarantine failed ({self._broken}); the writer stopped") from exc

    def _quarantine(self, segment: Path) -> RecoveryNote | None:
        size = segment.stat().st_size
        if size == 0:
            return None
        with segment.open("rb") as handle:
            # Backwards in chunks: a torn tail of any size costs time, not memory.
            offset = last_newline(handle, size) + 1
            if offset == size:
                return None
            # Over the limit it cannot be a whole line: it is copied to quarantine in chunks,
            # never held. Within the limit it is read to be judged.
            fragment = None
            if size - offset <= lines.MAX_LINE_BYTES:
                handle.seek(offset)
                fragment = handle.read(size - offset)
        if fragment is not None and self._continues_chain(segment, offset, fragment):
            # A whole, valid event that lacks only its line feed: a crash can cut just the last
            # byte of a write, and dropping the event would let anyone undo the last decision
            # (a rejection, say) by deleting one byte. Keep it: restore the line feed.
            fd = os.open(segment, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            self.completed_tail = True
            return None
        qdir = self.path / QUARANTINE_DIR
        make_dir(qdir, like=self.path)
        base = f"{segment.name}.{offset}.torn"
        target, n = qdir / base, 1
        earlier: list[Path] = []
        while target.exists():
            earlier.append(target)
            n += 1
            target = qdir / f"{base}.{n}"
        # A file here with other bytes was cut from this offset by a writer that died before its
        # `recovered` event was durable (the bytes now here may be that very event, torn): it is
        # recorded before this one. A file holding these bytes, or the first of them, or nothing,
        # was left by a writer that died before truncating (a quarantine file is whole and synced
        # before the cut): this quarantine records the bytes.
        self._earlier_notes = [
            self._note_for(p, segment.name, offset) for p in earlier if not _holds_beginning(segment, offset, p)
        ]
        digest = hashlib.sha256()
        fd = open_created(target, os.O_WRONLY | os.O_EXCL, self._mode)
        try:
            with segment.open("rb") as handle:
                handle.seek(offset)
                while chunk := handle.read(min(_COPY_BYTES, size - handle.tell())):
                    digest.update(chunk)
                    write_all(fd, chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(qdir)
        _fsync_dir(self.path)
        fd = os.open(segment, os.O_WRONLY)
        try:
            os.ftruncate(fd, offset)
            os.fsync(fd)
        finally:
            os.close(fd)
        return RecoveryNote(
            segment=segment.name,
            offset=offset,
            fragment_bytes=size - offset,
            fragment_sha256=digest.hexdigest(),
            quarantine=f"{QUARANTINE_DIR}/{target.name}",
        )

    def _continues_chain(self, segment: Path, offset: int, fragment: bytes) -> bool:
        """Is `fragment` (the bytes after the last line feed of `segment`, at `offset`) a whole line
        (DATA included) that is the next link of the chain (seq, prev, hash)? Then it stands, and
        verify judges it like any other line (docs/ledger-format.md, sections 6 and 7.5); anything
        less is a torn write. A write cut anywhere, inside DATA too, leaves no whole line."""

        if offset > 0:
            with segment.open("rb") as handle:
                previous = last_line(handle, offset)[1]
            if previous is None:  # a line over the limit: not one a writer extends
                return False
            try:
                last = parse_line(RawLine(segment.name, 0, 0, previous), -1)
            except LedgerCorrupt:
                return False
            seq, head = last.seq, last.hash
        else:
            earlier = [p for p in list_segments(self.path) if p.name < segment.name]
            saved = self._tip_ts
            seq, head = self._read_head(earlier)
            self._tip_ts = saved  # _read_head sets it; the head of the ledger is read later
        try:
            record = parse_line(RawLine(segment.name, 0, offset, fragment), seq + 1)
        except LedgerCorrupt:
            return False
        return continues(record, seq + 1, head)

    def _unrecorded_quarantine(self) -> RecoveryNote | None:
        """A fragment a crashed writer quarantined and cut off without appending its `recovered`
        event: a quarantine file named for the active segment at exactly its current size (once
        recorded, the event follows that offset, so the segment is longer). Under the append lock."""
        qdir = self.path / QUARANTINE_DIR
        if not qdir.is_dir():
            return None
        base = f"{segment_name(self._segment_number)}.{self._segment_size}.torn"
        found: list[tuple[int, Path]] = []
        for p in qdir.iterdir():
            if p.name == base:
                found.append((1, p))
            elif p.name.startswith(base + ".") and p.name[len(base) + 1 :].isdigit():
                found.append((int(p.name[len(base) + 1 :]), p))
        if not found:
            return None
        _, target = max(found)  # the last one written is the one whose truncation took effect
        if not target.stat().st_size:
            return None
        return self._note_for(target, segment_name(self._segment_number), self._segment_size)

    @staticmethod
    def _note_for(path: Path, segment: str, offset: int) -> RecoveryNote:
        """The note of the fragment quarantined in `path`, cut from `segment` at `offset` (the file
        is hashed in chunks: a fragment may be of any size)."""
        digest, size = hashlib.sha256(), 0
        with path.open("rb") as handle:
            while chunk := handle.read(_COPY_BYTES):
                digest.update(chunk)
                size += len(chunk)
        return RecoveryNote(
            segment=segment,
            offset=offset,
            fragment_bytes=size,
            fragment_sha256=digest.hexdigest(),
            quarantine=f"{QUARANTINE_DIR}/{path.name}",
        )

    def _notes_with_earlier(self, note: RecoveryNote) -> list[RecoveryNote]:
        """`note`, after the notes of earlier fragments cut from its offset and never recorded."""
        earlier, self._earlier_notes = self._earlier_notes, []
        return [*earlier, note]

    def _read_head(self, segments: list[Path]) -> tuple[int, str]:
        """Seq and hash of the last event, read from the end of the last non-empty segment (which
        ends in a line feed: its torn tail was quarantined). Raises LedgerCorrupt when that line
        is not an event, or is longer than ledger.store.lines.MAX_LINE_BYTES (never read whole)."""
        for segment in reversed(segments):
            size = segment.stat().st_size
            if size == 0:
                continue
            with segment.open("rb") as handle:
                start, text = last_line(handle, size)
            if text is None:
                raise LedgerCorrupt(None, f"the last line of {segment.name} (at byte {start}): {lines.too_long(size - 1 - start)}; "
                                    "refusing to extend it", segment.name)
            record = parse_line(RawLine(segment.name, 0, 0, text), expected_seq=-1)
            if hashlib.sha256(record.body).hexdigest() != record.hash:
                raise LedgerCorrupt(record.seq, "the last event's hash does not match its body; refusing to extend it")
            self._tip_ts = record.event.ts
            return record.seq, record.hash
        return 0, GENESIS_PREV

    # --- catching up with other writers (under the append lock) -------------------------------

    def _catch_up(self) -> tuple[bool, list[RecoveryNote]]:
        """Bring the head, the active segment and the key index up to date with the files.

        Cheap when nothing changed: one stat of the active segment (size and inode) and one of
        the next segment's name. Returns (whether events were found that this writer did not
        append, the notes of the torn tails it quarantined, to record in this order). Raises LedgerCorrupt when the files were
        changed behind the writers' backs (a segment replaced, shrunk or removed)."""
        active_path, following_path = self._watched()
        try:
            st = os.stat(active_path)
        except FileNotFoundError:
            raise LedgerCorrupt(None, f"{segment_name(self._segment_number)}, the segment being appended to, was removed") from None
        if st.st_ino == self._ino and st.st_size == self._segment_size and not os.path.exists(following_path):
            return False, []
        active = self.path / segment_name(self._segment_number)
        if st.st_ino != self._ino:
            raise LedgerCorrupt(None, f"{active.name} was replaced by another file; refusing to extend it")
        if st.st_size < self._segment_size:
            raise LedgerCorrupt(None, f"{active.name} shrank from {self._segment_size} to {st.st_size} bytes; refusing to extend it")
        last = self._segment_number
        while (self.path / segment_name(last + 1)).exists():
            last += 1
        note = self._quarantine_torn_tail(self.path / segment_name(last))
        before = self._tip
        if self._keys is not None:
            self._scan_forward(self._segment_number, self._segment_size)
        else:
            found = self._read_head([self.path / segment_name(n) for n in range(self._segment_number, last + 1)])
            if found[0] != 0:
                self._tip = found
        self._use_segment(last)
        if note is None:
            note = self._unrecorded_quarantine()
        notes = self._notes_with_earlier(note) if note is not None else []
        self.recoveries.extend(notes)
        return self._tip != before, notes

    def _scan_forward(self, number: int, offset: int) -> None:
        """Read every line from (segment `number`, `offset`) to the end: check that each extends
        the chain, advance the head, and index the keys. Used once the key index exists."""
        seq, prev = self._tip
        while True:
            segment = self.path / segment_name(number)
            if not segment.exists():
                break
            with segment.open("rb") as handle:
                handle.seek(offset)
                for _number, at, text, size, terminated in read_lines(handle, offset):
                    if not terminated:
                        break  # a write in progress elsewhere cannot be: we hold the lock; quarantined before
                    if text is None:
                        raise LedgerCorrupt(seq + 1, f"{lines.too_long(size)}, at byte {at}; refusing to extend it", segment.name)
                    record = parse_line(RawLine(segment.name, 0, at, text), seq + 1)
                    if record.seq != seq + 1 or record.event.prev != prev or hashlib.sha256(record.body).hexdigest() != record.hash:
                        raise LedgerCorrupt(seq + 1, "an event another writer appended does not extend the chain; refusing to extend it",
                                            segment.name)
                    seq, prev = record.seq, record.hash
                    self._tip_ts = record.event.ts
                    key = getattr(record.event, "key", msgspec.UNSET)
                    if isinstance(key, str):
                        self._keys.setdefault(key, (seq, number, at))
            number, offset = number + 1, 0
        self._tip = (seq, prev)

    def _build_key_index(self) -> None:
        """Index every keyed event of the ledger (first occurrence of each key). Under the lock."""
        keys: dict[str, tuple[int, int, int]] = {}
        for number in range(1, self._segment_number + 1):
            segment = self.path / segment_name(number)
            end = self._segment_size if number == self._segment_number else None
            with segment.open("rb") as handle:  # line by line, bounded (ledger.store.scan)
                for _number, start, text, _size, terminated in read_lines(handle):
                    if end is not None and start >= end:
                        break
                    # not whole, too long or unkeyed: not this writer's business; verify reports it
                    if not terminated or text is None or not _KEYED_LINE.match(text):
                        continue
                    try:
                        record = parse_line(RawLine(segment.name, 0, start, text), -1)
                    except LedgerCorrupt:
                        continue
                    key = getattr(record.event, "key", msgspec.UNSET)
                    if isinstance(key, str):
                        keys.setdefault(key, (record.seq, number, start))
        self._keys = keys

    def _stored(self, number: int, offset: int) -> Record:
        """The record of the line at `offset` in segment `number`."""
        segment = self.path / segment_name(number)
        with segment.open("rb") as handle:
            handle.seek(offset)
            text = handle.readline(lines.MAX_LINE_BYTES + 1)  # an indexed line is within the limit
        return parse_line(RawLine(segment.name, 0, offset, text.rstrip(b"\n")), -1)

    # --- appending ----------------------------------------------------------------------------

    @property
    def head(self) -> tuple[int, str]:
        """`(seq, hash)` of the last event this writer appended or found, as of its last commit
        (other processes may have appended since; `refresh()` looks)."""
        return self._tip

    @property
    def exclusive(self) -> bool:
        """Whether this writer holds the ledger exclusively (no other writer can be open)."""
        return self._exclusive

    def refresh(self) -> tuple[int, str]:
        """Catch up with what other writers appended (under the append lock) and return the head.
        Raises LedgerCorrupt as a commit would, ForeignAppend for an exclusive writer."""
        self._usable()
        with self._cond:
            while self._leading:
                self._cond.wait()
            self._leading = True
        try:
            with self._append_lock():
                foreign, notes = self._catch_up()
                for note in notes:
                    self._commit_now(note.event())
                if foreign and self._exclusive:
                    self._broken = "events were appended by a writer outside the locking protocol"
                    raise ForeignAppend(f"{self.path}: events were appended by a writer that did not take the WRITERS lock; "
                                        "the writer stopped")
        finally:
            with self._cond:
                self._leading = False
                self._cond.notify_all()
        return self._tip

    def _watched(self) -> tuple[str, str]:
        """The active segment's path and the next one's, as strings (two stats a commit use them:
        made once per segment, not per commit)."""
        if self._paths[0] != self._segment_number:
            base = str(self.path) + os.sep
            self._paths = (self._segment_number, base + segment_name(self._segment_number),
                           base + segment_name(self._segment_number + 1))
        return self._paths[1], self._paths[2]

    def grew(self) -> bool:
        """Whether the files may hold events this writer has not seen: the segment it appends to
        changed size or identity, or a next one exists. No lock, two stats: for polling."""
        active, following = self._watched()
        try:
            st = os.stat(active)
        except OSError:
            return True
        return (st.st_size, st.st_ino) != (self._segment_size, self._ino) or os.path.exists(following)

    @classmethod
    def shared(cls, path: str | Path, *, clock: Clock = utc_now) -> "Ledger":
        """This process's shared writer of the ledger at `path` (opened on first use, as
        `Ledger(path, clock=clock)`), so that its users' commits are grouped (see `transact`).
        Each call takes one share; `close()` gives it back, and closes the writer with the last."""
        key = (os.getpid(), os.path.realpath(path))
        with _SHARED_LOCK:
            writer = _SHARED.get(key)
            if writer is None or writer._closed or writer._broken is not None:
                writer = cls(path, clock=clock)
                writer._shared_key = key
                _SHARED[key] = writer
            writer._shares += 1
            return writer

    def wait_for_growth(self, timeout: float, since: int | None = None) -> bool:
        """Block until other writers may have appended (`grew`), or this writer holds events
        after seq `since` (appended for another of its users), or `timeout` seconds pass
        (False). Sleeps in the file system's change notification (ledger.store.watch)."""
        if since is None:
            return watch.wait_for_growth(self.path, self.grew, timeout)
        return watch.wait_for_growth(self.path, lambda: self._tip[0] > since or self.grew(), timeout)

    def make_exclusive(self) -> None:
        """Hold the ledger exclusively from now on (what a Gate needs). Raises LedgerLocked when
        another writer is open; this writer then stays a shared one. Catches up with the files."""
        self._usable()
        if self._exclusive:
            return
        try:
            fcntl.flock(self._writers_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            # Converting a flock may drop the shared lock first; take it back.
            try:
                fcntl.flock(self._writers_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                self.close()
                raise LedgerLocked(self._locked_message(True) + "; this writer lost its place and was closed") from None
            raise LedgerLocked(self._locked_message(True)) from None
        self.refresh()  # events other writers appended before we held it are theirs, not foreign
        self._exclusive = True

    def append(self, event: Event, data: dict | bytes | None = None) -> Record:
        """Append one event (with optional data: `{"args": ..., "context": ...}`) durably.
        Returns its Record (the original one when its `key` was already appended); see append_batch."""
        return self.append_batch([(event, data)])[0]

    def append_batch(self, items: Sequence[tuple[Event, dict | bytes | None]]) -> list[Record]:
        """Append several events in order, with consecutive seqs, in one write and one sync.

        Returns one Record per item. An item whose event has a `key` already in the ledger (or
        earlier in this batch) with the same content (content_of: everything but seq, ts and prev,
        and the data) appends nothing and returns the original Record; with other content the
        whole call raises KeyConflict and appends none of its items. Also raises: LedgerBroken if
        a write or sync failed (now or before: the writer stops and never retries), LedgerError
        when closed or used in another process than the one that opened it, ArgumentsError
        (from ledger.digest) for data JSON cannot carry, LineTooLong for an event whose line would be
        longer than ledger.store.lines.MAX_LINE_BYTES (the whole call appends nothing), ValueError for a key that is not a string
        of 1 to KEY_MAX_LENGTH characters, LedgerCorrupt when the files were changed behind the
        writers' backs, ForeignAppend (exclusive writers).
        """
        prepared = [self._prepare(event, data) for event, data in items]
        request = _Request(prepared)
        return self._queue_and_commit(request)

    def transact(self, build: Callable[[list[Record]], Sequence[tuple[Event, dict | bytes | None]]], *,
                 since: int | None = None) -> list[Record]:
        """One commit that first sees everything before it: under the append lock, catch up with
        the files, call `build(new)` with the Records after seq `since` (None: those appended
        since this writer last looked: by other writers, and the `recovered` events of torn
        tails it just quarantined), and append the items `build` returns (none: nothing is
        written). Returns the appended Records. What a Gate's step needs: fold what others did,
        check the step against the now-current state, append, release (docs/ledger-format.md
        section 7).

        Transactions and appends that arrive while a commit is in flight share the next one
        (group commit: one lock, one write, one sync): each `build` runs in turn, and its `new`
        holds the Records the ones before it in the same commit will append. So `build` may run
        in another thread than its caller's, while its caller waits in this call; it must be
        quick, and must not take a lock its caller holds, nor append through this writer. An
        exception from it appends nothing of this transaction and propagates to its caller; the
        other errors are append_batch's."""
        tx = _Transaction(build, since)
        return self._queue_and_commit(tx)

    def _queue_and_commit(self, request: _Request) -> list[Record]:
        """Queue `request` and wait: a commit in flight, when it ends, hands the lead to one
        waiter, which commits everything queued (group commit, docs/ledger-format.md 7.4)."""
        with self._cond:
            self._usable()
            self._queue.append(request)
            while self._leading and not request.done:
                self._cond.wait()
            if request.done:
                return request.result()
            self._leading = True
        try:
            if self.group_window > 0:
                time.sleep(self.group_window)
            with self._cond:
                batch, self._queue = self._queue, []
            self._lead(batch)
        finally:
            with self._cond:
                self._leading = False
                self._cond.notify_all()
        return request.result()

    def _remember(self, records: Iterable[Record]) -> None:
        """Keep `records` (the newest, in order) among the recent ones, within RECENT_BYTES; read
        one at a time, so that a long run costs the budget, not its length."""
        recent = self._recent
        for record in records:
            if recent and record.seq != recent[-1].seq + 1:  # a gap: keep one run only
                recent.clear()
                self._recent_bytes = 0
            recent.append(record)
            self._recent_bytes += len(record.body) + len(record.data)
            while len(recent) > 1 and self._recent_bytes > RECENT_BYTES:
                old = recent.popleft()
                self._recent_bytes -= len(old.body) + len(old.data)

    def _after(self, since: int, until: int) -> Iterator[Record]:
        """The Records with seq in (since, until]: from the recent ones when they reach back that
        far, else read from the files one at a time (a long gap is never held whole). Under the
        append lock."""
        if since >= until:
            return iter(())
        recent = self._recent
        if recent and recent[0].seq <= since + 1 and recent[-1].seq == until:  # one run, ending at `until`
            start = since + 1 - recent[0].seq
            return iter([recent[i] for i in range(start, start + until - since)])
        return self.records(since + 1, until=until)

    def _records_after(self, number: int, offset: int, seq: int) -> Iterator[Record]:
        """The Records stored after byte `offset` of segment `number` (whose event before is
        `seq`), up to the head: the lines another writer appended. Under the append lock, after
        _catch_up (every line is whole). `line` is 0: the segment's line numbers are not counted."""
        end_seq = self._tip[0]
        while seq < end_seq:
            segment = self.path / segment_name(number)
            with segment.open("rb") as handle:
                handle.seek(offset)
                for _number, at, text, size, terminated in read_lines(handle, offset):
                    if not terminated or seq >= end_seq:
                        break
                    if text is None:
                        raise LedgerCorrupt(seq + 1, f"{lines.too_long(size)}, at byte {at}", segment.name)
                    record = parse_line(RawLine(segment.name, 0, at, text), seq + 1)
                    seq += 1
                    yield record
            number, offset = number + 1, 0

    def _prepare(self, event: Event, data: dict | bytes | None) -> _Item:
        if not isinstance(event, Event):
            raise TypeError(f"not an event: {type(event).__name__}")
        data_bytes = canonical_json(data) if isinstance(data, dict) else data
        if data_bytes is not None and len(data_bytes) + lines.OVERHEAD > lines.MAX_LINE_BYTES:
            # Refused before the lock is taken: the data alone is over the limit (the exact
            # length, with the body, is checked when the line is composed).
            raise LineTooLong(type(event).__struct_config__.tag, len(data_bytes) + lines.OVERHEAD)
        key = event.key
        if key is msgspec.UNSET:
            return _new_tuple(_Item, (event, data_bytes, None, None))
        if not isinstance(key, str) or not 1 <= len(key) <= KEY_MAX_LENGTH:
            raise ValueError(f"an idempotency key is a string of 1 to {KEY_MAX_LENGTH} characters, not {key!r}")
        return _Item(event, data_bytes, key, content_of(event, data_bytes))

    def _usable(self) -> None:
        if os.getpid() != self._pid:
            raise LedgerError(f"{self.path}: this writer was opened by process {self._pid}; open a new Ledger after fork")
        if self._broken is not None:
            raise LedgerBroken(f"{self.path}: the writer stopped after a failed write ({self._broken})")
        if self._closed:
            raise LedgerError("the ledger is closed")

    def _lead(self, batch: list[_Request]) -> None:
        """Commit the queued requests: one lock, one write, one sync. Every request ends done."""
        try:
            if self._broken is not None or self._closed:
                self._usable()
            with self._append_lock():
                number, offset, seq_before = self._segment_number, self._segment_size, self._tip[0]
                foreign, notes = self._catch_up()
                if foreign and self._exclusive:
                    self._broken = "events were appended by a writer outside the locking protocol"
                    raise ForeignAppend(
                        f"{self.path}: events were appended by a writer that did not take the WRITERS lock; "
                        "this exclusive writer's view is stale: nothing was appended and the writer stopped"
                    )
                if self._tip[0] != seq_before and any(isinstance(r, _Transaction) for r in batch):
                    self._remember(self._records_after(number, offset, seq_before))
                if notes:
                    batch = [_Request([_Item(note.event(), None, None, None) for note in notes])] + batch
                self._commit_locked(batch, seq_before)
        except BaseException as exc:
            for request in batch:
                if not request.done and request.error is None:
                    request.error = exc
        finally:
            for request in batch:
                request.done = True

    def _commit_locked(self, batch: list[_Request], seq_before: int | None = None) -> None:
        """Compose, write and sync the lines of `batch` after the current head (which the caller
        has caught up). Sets each request's records or error. Under the append lock. A
        transaction's items are built at its turn (`seq_before`: the head before the catch-up,
        where a transaction without `since` starts)."""
        head = self._tip[0]
        seq, prev = self._tip
        tip_ts = self._tip_ts
        now: str | None = None  # one reading of the clock per commit
        chunks: list[bytes] = []  # the lines of the commit
        # The Record of each new line, named after the active segment (made again below in the rare
        # commit that opens a new one): made here, it costs no second pass.
        fresh: list[Record] = []
        make, name = _new_tuple, segment_name(self._segment_number)
        fresh_keys: list[tuple[str, int]] = []  # (key, index into fresh) of the keyed new lines
        plans: list[tuple[_Request, list[Any] | None, int, int]] = []  # per request: its plan and its span of fresh
        batch_keys: dict[str, tuple[bytes, int, int]] = {}  # key → (content, index into fresh, seq), this commit
        replace, null = msgspec.structs.replace, b"null"
        seal, encode = native.sealer(), encode_body
        for request in batch:
            first = len(fresh)
            try:
                if isinstance(request, _Transaction):
                    since = seq_before if request.since is None else request.since
                    made = request.build(itertools.chain(self._after(since, head), fresh[max(0, since - head):]))
                    request.items = [self._prepare(event, data) for event, data in made]
                if self._keys is None and any(item.key is not None for item in request.items):
                    self._build_key_index()
                # None while the request's records are fresh[first:] in order; a list (indexes
                # into fresh, or stored Records) once a key finds an earlier event.
                plan: list[Any] | None = None
                added_keys: dict[str, tuple[bytes, int, int]] = {}
                local_seq, local_prev, local_ts = seq, prev, tip_ts
                for event, item_data, key, content in request.items:
                    if key is not None:
                        known = added_keys.get(key) or batch_keys.get(key)
                        if known is not None:
                            if known[0] != content:
                                raise KeyConflict(key, known[2], f"idempotency key {key!r} was appended just before "
                                                  f"(seq {known[2]}) with other content")
                            plan = list(range(first, len(fresh))) if plan is None else plan
                            plan.append(known[1])
                            continue
                        stored = self._keys.get(key) if self._keys is not None else None
                        if stored is not None:
                            original = self._stored(stored[1], stored[2])
                            if content_of(original.event, original.data) != content:
                                raise KeyConflict(key, original.seq, f"idempotency key {key!r} is already in the "
                                                  f"ledger at seq {original.seq} with other content")
                            plan = list(range(first, len(fresh))) if plan is None else plan
                            plan.append(original)
                            continue
                    local_seq += 1
                    ts = event.ts
                    if not ts:
                        ts = now = now or format_ts(self.clock())
                    # Timestamps never go backwards in a ledger (verify checks it): a clock that
                    # stepped back, or another writer's clock ahead of ours, gives the head's time.
                    if ts < local_ts:
                        ts = local_ts
                    local_ts = ts
                    stamped = replace(event, seq=local_seq, ts=ts, prev=local_prev)
                    body = encode(stamped)
                    data = item_data if item_data is not None else null
                    size = len(body) + len(data) + lines.OVERHEAD  # the line's exact length, line feed not counted
                    if size > lines.MAX_LINE_BYTES:  # docs/ledger-format.md section 2: fails this request alone
                        raise LineTooLong(type(event).__struct_config__.tag, size)
                    # Never write what verify would reject: the body must decode as a valid event
                    # (types, patterns, ranges); a wrong one fails this request alone. The
                    # compiled sealer's grammar is the stricter one: its yes is enough.
                    sealed = seal(body, data) if seal is not None else None
                    if sealed is None:
                        try:
                            decode_event(body)
                        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                            raise LedgerError(f"refusing to append an invalid {type(event).__name__} event: {exc}") from None
                        sealed = lines.compose(body, data)
                    digest = sealed[0]
                    chunks.append(sealed[1])
                    index = len(fresh)
                    fresh.append(make(Record, (local_seq, digest, stamped, body, data, name, 0)))
                    if key is not None:
                        added_keys[key] = (content, index, local_seq)
                        fresh_keys.append((key, index))
                    if plan is not None:
                        plan.append(index)
                    local_prev = digest
            except Exception as exc:  # this request fails alone; its seqs are not used
                request.error = exc
                del fresh[first:], chunks[first:]
                while fresh_keys and fresh_keys[-1][1] >= first:
                    fresh_keys.pop()
                continue
            batch_keys.update(added_keys)
            seq, prev, tip_ts = local_seq, local_prev, local_ts
            plans.append((request, plan, first, len(fresh)))
        payload = b"".join(chunks)
        rotate = bool(payload) and (
            self._segment_number == 0
            or (self._segment_size > 0 and self._segment_size + len(payload) > self.segment_bytes)
        )
        number = self._segment_number + 1 if rotate else self._segment_number
        base = 0 if rotate else self._segment_size
        if payload:
            self._write(payload, rotate)
        if fresh and fresh[0].segment != segment_name(number):  # the commit opened a new segment
            name = segment_name(number)
            fresh = [make(Record, (r.seq, r.hash, r.event, r.body, r.data, name, 0)) for r in fresh]
        records = fresh
        if self._keys is not None and fresh_keys:
            offsets = [base]
            for chunk in chunks:
                offsets.append(offsets[-1] + len(chunk))
            for key, index in fresh_keys:
                self._keys.setdefault(key, (fresh[index][0], number, offsets[index]))
        if payload:
            self._tip = (seq, prev)
            self._tip_ts = tip_ts
            self.commits += 1
            self._remember(records)
        for request, plan, first, end in plans:
            request.records = records[first:end] if plan is None else [records[p] if isinstance(p, int) else p for p in plan]

    def _write(self, payload: bytes, rotate: bool) -> None:
        """Write and sync `payload`: appended to the active segment, or as the first lines of the
        next one (temporary name, sync, rename, directory sync). On failure the writer stops."""
        try:
            if rotate:
                self._create_segment(self._segment_number + 1, payload)
                return
            size_before = self._segment_size
            try:
                write_all(self._fd, payload)
                _sync(self._fd)
            except OSError:
                try:  # best effort: leave no partial commit behind; the next writer quarantines what remains
                    os.ftruncate(self._fd, size_before)
                except OSError:
                    pass
                raise
            self._segment_size += len(payload)
        except OSError as exc:
            self._broken = exc.strerror or str(exc)
            raise LedgerBroken(f"{self.path}: writing failed ({self._broken}); the writer stopped") from exc

    def _create_segment(self, number: int, payload: bytes) -> None:
        """Segment `number`, holding `payload`, made durable before it appears under its name."""
        target = self.path / segment_name(number)
        if target.exists():  # the caller caught up under the lock; only a writer outside the protocol gets here
            raise LedgerCorrupt(None, f"{target.name} appeared while this writer held the append lock")
        temp = self.path / temp_name(number)
        fd = open_created(temp, os.O_WRONLY | os.O_APPEND | os.O_TRUNC, self._mode)
        try:
            write_all(fd, payload)
            _sync(fd)
            os.rename(temp, target)
            _fsync_dir(self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        st = os.fstat(fd)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._segment_number, self._segment_size, self._ino = fd, number, len(payload), st.st_ino

    # --- reading and closing ------------------------------------------------------------------

    def records(self, from_seq: int = 1, *, kind: str | None = None, until: int | None = None) -> Iterator[Record]:
        """The stored events from seq `from_seq` on, in order, up to the last whole line (read
        without the lock: a prefix of the ledger). The start is found by seq (ledger.store.seek),
        so reading the tail of a large ledger costs the tail. `kind` keeps only the events of that
        kind, recognized by their first bytes and decoded alone. `line` is 0 in Records read from
        a seq other than 1. Raises LedgerCorrupt for a line that is not an event, or over
        MAX_LINE_BYTES; LedgerUnreadable when `from_seq` is past the head by more than one.
        `until`: stop after that seq (what a reader without the lock reads up to a head it knows
        whole, never a line being written)."""
        if from_seq <= 1 and kind is None:
            for record in LedgerReader(self.path).records():
                if until is not None and record.seq > until:
                    return
                yield record
            return
        start = self.locate(max(1, from_seq))
        if start is None:
            if self.locate(from_seq - 1) is not None:
                return  # from the seq after the last: nothing yet
            raise LedgerUnreadable(f"{self.path}: no event with seq {from_seq} or {from_seq - 1}")
        prefix = None if kind is None else b'{"body":{"kind":"' + kind.encode("ascii") + b'",'
        for seq, raw in self._raw_lines(from_seq, start, until):
            if prefix is None or raw.text.startswith(prefix):
                yield parse_line(raw, seq)

    def _raw_lines(self, seq: int, start: tuple[int, int], until: int | None = None) -> Iterator[tuple[int, RawLine]]:
        """`(seq, RawLine)` of the whole lines from `start` (the place of `seq`) on, across
        segments, up to `until`; each segment read no further than its size when reached."""
        number, offset = start
        while True:
            segment = self.path / segment_name(number)
            try:
                handle = segment.open("rb")
            except FileNotFoundError:
                return
            with handle:
                handle.seek(offset)
                for _n, at, text, size, terminated in read_lines(capped(handle), offset):
                    if until is not None and seq > until:
                        return
                    if not terminated:
                        return  # a write in progress, or a torn tail: not an event yet
                    if text is None:
                        raise LedgerCorrupt(seq, f"{lines.too_long(size)}, at byte {at}", segment.name)
                    yield seq, RawLine(segment.name, 0, at, text)
                    seq += 1
            number, offset = number + 1, 0

    def data_at(self, seqs: Iterable[int]) -> dict[int, bytes]:
        """The data bytes beside the bodies of these seqs (as `records_at`, without decoding the
        events: each line's seq read from its first bytes, its layout split). A seq with no whole
        line, or whose line is not one, is left out. The bytes are not checked against any
        digest: the caller checks them, or only shows them."""
        found: dict[int, bytes] = {}
        for seq, raw in self._lines_at(seqs):
            if seek.head_seq(raw.text[:80]) == seq:
                try:
                    found[seq] = lines.split(raw.text)[2]
                except lines.LineError:
                    continue
        return found

    def records_at(self, seqs: Iterable[int]) -> dict[int, Record]:
        """The stored Records of these seqs, read in seq order in few passes: a seq within
        NEAR lines of the one before is reached by reading on (only the lines wanted are
        decoded), a farther one by `locate`. A seq with no whole line is left out."""
        return {seq: parse_line(raw, seq) for seq, raw in self._lines_at(seqs)}

    def _lines_at(self, seqs: Iterable[int]) -> Iterator[tuple[int, RawLine]]:
        """`(seq, RawLine)` of these seqs, in seq order (see records_at)."""
        wanted = sorted(set(seqs))
        i = 0
        while i < len(wanted):
            start = self.locate(wanted[i])
            if start is None:
                i += 1
                continue
            for seq, raw in self._raw_lines(wanted[i], start):
                if seq == wanted[i]:
                    yield seq, raw
                    i += 1
                    if i == len(wanted) or wanted[i] - seq > NEAR:
                        break
            else:
                break  # the files end before the next seq wanted

    def locate(self, seq: int) -> tuple[int, int] | None:
        """`(segment number, byte offset)` of the line of `seq`, found without reading the ledger
        (ledger.store.seek: binary searches), or None when no line names that seq."""
        if seq < 1:
            return None
        first = self._first_seqs
        number = max(self._segment_number, 1)
        while (self.path / segment_name(number + 1)).exists():  # segments other writers started
            number += 1
        lo, hi = 1, number  # the last segment whose first seq is <= seq
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mid not in first:
                found = seek.first_seq(self.path / segment_name(mid))
                if found is None:
                    return None
                first[mid] = found
            if first[mid] <= seq:
                lo = mid
            else:
                hi = mid - 1
        offset = seek.offset_of(self.path / segment_name(lo), seq)
        return None if offset is None else (lo, offset)

    def record_at(self, seq: int, hint: tuple[int, int] | None = None) -> Record:
        """The stored Record of `seq`: read at `hint` (segment number, offset) when the line there
        names that seq, else found by `locate`. Raises LedgerUnreadable when there is no whole
        line of that seq, LedgerCorrupt when the line is not an event."""
        for place in (hint, None):
            if place is None:
                place = self.locate(seq)
                if place is None:
                    break
            number, offset = place
            segment = self.path / segment_name(number)
            try:
                with segment.open("rb") as handle:
                    handle.seek(offset)
                    for _n, at, text, size, terminated in read_lines(handle, offset):
                        if terminated and text is not None and seek.head_seq(text[:80]) == seq:
                            return parse_line(RawLine(segment.name, 0, at, text), seq)
                        break
            except OSError:
                pass
            if hint is None:
                break
            hint = None
        raise LedgerUnreadable(f"{self.path}: no whole line holds the event with seq {seq}")

    @property
    def ledger_id(self) -> str:
        """The ledger's identity: its genesis event's `ledger_id`. Raises LedgerCorrupt when the
        first line is not a genesis."""
        if self._ledger_id is None:
            record = self.record_at(1, (1, 0))
            if not isinstance(record.event, Genesis):
                raise LedgerCorrupt(1, "the first event is not a genesis", record.segment)
            self._ledger_id, self._format = record.event.ledger_id, record.event.format
        return self._ledger_id

    @property
    def format(self) -> str:
        """The format its genesis names (ledger.events.FORMATS). Raises as `ledger_id`."""
        if self._format is None:
            self.ledger_id
        return self._format

    def cache_dir(self) -> Path:
        """Where data derived from this ledger may be kept (a Gate's snapshot): the directory
        `cache/` inside the ledger's (docs/ledger-format.md, section 1: not part of the ledger)."""
        return self.path / CACHE_DIR

    def close(self) -> None:
        """Wait for a commit in flight, fail the queued ones (LedgerError), release the locks. A
        shared writer (`shared`) is closed when its last share is given back."""
        key = getattr(self, "_shared_key", None)
        if key is not None:
            with _SHARED_LOCK:
                self._shares -= 1
                if self._shares > 0:
                    return
                if _SHARED.get(key) is self:
                    del _SHARED[key]
        self._close_now()

    def _close_now(self) -> None:
        cond = getattr(self, "_cond", None)
        if cond is not None:
            with cond:
                self._closed = True
                while self._leading and os.getpid() == self._pid:
                    cond.wait()
                for request in self._queue:
                    request.error, request.done = LedgerError("the ledger was closed"), True
                self._queue = []
                cond.notify_all()
        for name in ("_fd", "_lock_fd", "_writers_fd"):
            fd = getattr(self, name, None)
            if fd is not None:
                setattr(self, name, None)
                os.close(fd)  # closing, not LOCK_UN: a forked child must not drop its parent's locks

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close must not keep the lock for the process's life
        try:
            self._close_now()
        except Exception:
            pass

