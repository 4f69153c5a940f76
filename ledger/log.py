"""The ledger on disk: an append-only, hash-chained directory of JSON Lines segments.

    DIR/
      events-00000001.jsonl   segments, in order; one event per line (see ledger.lines)
      events-00000002.jsonl
      LOCK                    held (flock) by the one writer
      quarantine/             torn fragments moved aside on recovery

`LedgerReader` reads any ledger without a lock. `Ledger` is the writer: it takes an exclusive
lock, recovers a torn tail, and appends events, returning only after the bytes are fsync'd.
Neither verifies the chain; that is `ledger.verify`'s job (the Gate verifies when it replays).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import msgspec

from ledger import lines
from ledger.clock import Clock, format_ts, utc_now
from ledger.digest import canonical_json
from ledger.events import FORMAT, GENESIS_PREV, AnyEvent, Event, Genesis, Recovered, decode_event, encode_event

SEGMENT_PREFIX = "events-"
SEGMENT_SUFFIX = ".jsonl"
SEGMENT_GLOB = f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"
SEGMENT_NAME = re.compile(r"events-(\d{8})\.jsonl")
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
LOCK_FILE = "LOCK"
QUARANTINE_DIR = "quarantine"

_sync = getattr(os, "fdatasync", os.fsync)


class LedgerError(Exception):
    """Base of the ledger's errors."""


class LedgerUnreadable(LedgerError):
    """The path is not a readable ledger (missing, not a directory, no segments)."""


class LedgerLocked(LedgerError):
    """Another writer holds the ledger's lock."""


class LedgerCorrupt(LedgerError):
    """A line cannot be read as a ledger event. `seq` is the seq the line should have had."""

    def __init__(self, seq: int | None, message: str, segment: str | None = None, line: int | None = None):
        where = f" ({segment}, line {line})" if segment else ""
        super().__init__(f"seq {seq}: {message}{where}" if seq is not None else message + where)
        self.seq, self.message, self.segment, self.line = seq, message, segment, line


class LedgerBroken(LedgerError):
    """A write or fsync failed. The writer stops: nothing more is appended, nothing is retried."""


class Record(NamedTuple):
    """One event as stored: its seq and hash, the decoded event, the exact body bytes that were
    hashed, the raw data bytes (`b"null"` when none) and where it sits."""

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
    """Bytes after the last newline of the last segment: a write that never completed."""

    segment: str
    offset: int
    fragment: bytes


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:08d}{SEGMENT_SUFFIX}"


def list_segments(path: Path) -> list[Path]:
    """The segment files of a ledger directory (named exactly `events-NNNNNNNN.jsonl`), in order."""
    return sorted(p for p in path.glob(SEGMENT_GLOB) if SEGMENT_NAME.fullmatch(p.name) and p.is_file())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LedgerReader:
    """Reads a ledger directory in order. Takes no lock; a reader sees a prefix of the events.

    Raises LedgerUnreadable from the constructor when `path` is not a ledger. After `lines()` or
    `records()` has been consumed, `torn` says whether the last segment ended in a torn line.
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
        the segment numbers have a gap or a segment before the last does not end in a line feed.
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
                offset = 0
                for number, text in enumerate(handle, start=1):
                    if not text.endswith(b"\n"):
                        if i == last:
                            self.torn = TornTail(segment.name, offset, text)
                            return
                        # A segment before the last one was cut short: that is not a crash of the
                        # current writer, so it is reported as corruption, not quarantined.
                        raise LedgerCorrupt(
                            None, f"{segment.name} ends without a line feed but is not the last segment", segment.name, number
                        )
                    yield RawLine(segment.name, number, offset, text[:-1])
                    offset += len(text)

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
        raise LedgerCorrupt(expected_seq, f"the body is not a valid event: {exc}", raw.segment, raw.line) from None
    return Record(event.seq, digest, event, body, data, raw.segment, raw.line)


class RecoveryNote(NamedTuple):
    """What opening the ledger found and did about a torn tail."""

    segment: str
    offset: int
    fragment_bytes: int
    fragment_sha256: str
    quarantine: str

    def __str__(self) -> str:
        return (
            f"{self.segment}: a torn last line ({self.fragment_bytes} bytes at offset {self.offset}, never "
            f"acknowledged) was moved to {self.quarantine}"
        )


class Ledger:
    """The single writer of a ledger directory.

    `Ledger(path)` creates the directory and its genesis event if needed (`create=False` refuses),
    takes the writer lock (LedgerLocked if another writer holds it), moves a torn last line to
    `quarantine/` and records a `recovered` event about it (`recovery` says what was done), then
    appends after the current head. `append` and `append_batch` return once the bytes are on
    disk (fdatasync). `clock` supplies `ts` for events that do not carry one. A new segment is
    started when the current one reaches `segment_bytes`.

    Use it as a context manager, or call `close()`, to release the lock.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        clock: Clock = utc_now,
    ):
        self.path = Path(path)
        self.segment_bytes = segment_bytes
        self.clock = clock
        self.recovery: RecoveryNote | None = None
        self._mutex = threading.Lock()
        self._broken: str | None = None
        self._fd: int | None = None
        if not self.path.exists():
            if not create:
                raise LedgerUnreadable(f"{self.path}: no such ledger directory")
            self.path.mkdir(parents=True)
            if self.path.parent.exists():
                _fsync_dir(self.path.parent)
        elif not self.path.is_dir():
            raise LedgerUnreadable(f"{self.path}: not a directory")
        self._lock_fd = self._acquire_lock()
        try:
            self._open_for_append(create)
        except BaseException:
            self.close()
            raise

    # --- opening ------------------------------------------------------------------------------

    def _acquire_lock(self) -> int:
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LedgerLocked(f"{self.path}: another writer holds the ledger's lock") from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    def _open_for_append(self, create: bool) -> None:
        from ledger.checkpoint import refuse_if_behind_checkpoint  # never extend a ledger shorter than its checkpoint

        refuse_if_behind_checkpoint(self.path)
        segments = list_segments(self.path)
        if not segments:
            if not create:
                raise LedgerUnreadable(f"{self.path}: no ledger segments in this directory")
            self._start_segment(1)
            self._seq, self._head = 0, GENESIS_PREV
            self.append(Genesis(format=FORMAT, ledger_id=uuid.uuid4().hex))
            return
        current = segments[-1]
        self.recovery = self._quarantine_torn_tail(current)
        self._seq, self._head = self._read_head(segments)
        self._segment_number = int(current.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)])
        self._fd = os.open(current, os.O_WRONLY | os.O_APPEND)
        self._segment_size = os.fstat(self._fd).st_size
        if self._seq == 0:
            raise LedgerCorrupt(1, "the ledger has segments but no events")
        if self.recovery is not None:
            note = self.recovery
            self.append(
                Recovered(
                    segment=note.segment,
                    offset=note.offset,
                    fragment_bytes=note.fragment_bytes,
                    fragment_sha256=note.fragment_sha256,
                    quarantine=note.quarantine,
                )
            )

    def _quarantine_torn_tail(self, segment: Path) -> RecoveryNote | None:
        with segment.open("rb") as handle:
            data = handle.read()
        if not data or data.endswith(b"\n"):
            return None
        offset = data.rfind(b"\n") + 1
        fragment = data[offset:]
        qdir = self.path / QUARANTINE_DIR
        qdir.mkdir(exist_ok=True)
        base = f"{segment.name}.{offset}.torn"
        target, n = qdir / base, 1
        while target.exists():
            n += 1
            target = qdir / f"{base}.{n}"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, fragment)
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
            fragment_bytes=len(fragment),
            fragment_sha256=hashlib.sha256(fragment).hexdigest(),
            quarantine=f"{QUARANTINE_DIR}/{target.name}",
        )

    def _read_head(self, segments: list[Path]) -> tuple[int, str]:
        """Seq and hash of the last event, read from the end of the last non-empty segment."""
        for segment in reversed(segments):
            size = segment.stat().st_size
            if size == 0:
                continue
            with segment.open("rb") as handle:
                chunk = 4096
                while True:
                    start = max(0, size - chunk)
                    handle.seek(start)
                    data = handle.read(size - start)
                    cut = data.rfind(b"\n", 0, len(data) - 1)
                    if cut >= 0 or start == 0:
                        break
                    chunk *= 2
            text = data[cut + 1 : -1]
            record = parse_line(RawLine(segment.name, 0, 0, text), expected_seq=-1)
            if hashlib.sha256(record.body).hexdigest() != record.hash:
                raise LedgerCorrupt(record.seq, "the last event's hash does not match its body; refusing to extend it")
            return record.seq, record.hash
        return 0, GENESIS_PREV

    def _start_segment(self, number: int) -> None:
        target = self.path / segment_name(number)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        os.fsync(fd)
        _fsync_dir(self.path)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._segment_number, self._segment_size = fd, number, 0

    # --- appending ----------------------------------------------------------------------------

    @property
    def head(self) -> tuple[int, str]:
        """`(seq, hash)` of the last event appended."""
        return self._seq, self._head

    def append(self, event: Event, data: dict | bytes | None = None) -> Record:
        """Append one event (with optional data: `{"args": ..., "context": ...}`) durably."""
        return self.append_batch([(event, data)])[0]

    def append_batch(self, items: Sequence[tuple[Event, dict | bytes | None]]) -> list[Record]:
        """Append several events with one write and one fsync, in order; all get consecutive seqs.

        Returns the stored Records. Raises LedgerBroken if the write or the fsync fails (the
        writer then refuses further appends), ArgumentsError for data JSON cannot carry.
        """
        with self._mutex:
            if self._broken is not None:
                raise LedgerBroken(f"{self.path}: the writer stopped after a failed write ({self._broken})")
            if self._fd is None:
                raise LedgerError("the ledger is closed")
            seq, prev = self._seq, self._head
            chunks: list[bytes] = []
            records: list[Record] = []
            for event, data in items:
                seq += 1
                ts = event.ts or format_ts(self.clock())
                stamped = msgspec.structs.replace(event, seq=seq, ts=ts, prev=prev)
                body = encode_event(stamped)
                data_bytes = canonical_json(data) if isinstance(data, dict) else data
                digest, line = lines.compose(body, data_bytes)
                chunks.append(line)
                records.append(
                    Record(seq, digest, stamped, body, data_bytes or b"null", segment_name(self._segment_number), 0)
                )
                prev = digest
            payload = b"".join(chunks)
            if self._segment_size > 0 and self._segment_size + len(payload) > self.segment_bytes:
                self._start_segment(self._segment_number + 1)
                records = [r._replace(segment=segment_name(self._segment_number)) for r in records]
            self._write(payload)
            self._seq, self._head = seq, prev
            return records

    def _write(self, payload: bytes) -> None:
        size_before = self._segment_size
        try:
            view = memoryview(payload)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            _sync(self._fd)
        except OSError as exc:
            self._broken = exc.strerror or str(exc)
            try:  # best effort: leave no partial batch behind; recovery handles what remains
                os.ftruncate(self._fd, size_before)
            except OSError:
                pass
            raise LedgerBroken(f"{self.path}: writing failed ({self._broken}); the writer stopped") from exc
        self._segment_size += len(payload)

    # --- reading and closing ------------------------------------------------------------------

    def records(self) -> Iterator[Record]:
        """Every stored event, in order (reads the files; see LedgerReader)."""
        return LedgerReader(self.path).records()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if getattr(self, "_lock_fd", None) is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close must not keep the lock for the process's life
        try:
            self.close()
        except Exception:
            pass
