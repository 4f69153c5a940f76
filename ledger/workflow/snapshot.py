"""A Gate's snapshot: the workflow's state as of one event, kept in SQLite in the store's cache
directory (`ledger.store.base.Store.cache_dir`), so that opening a Gate costs its pending
requests and the events after the snapshot, not the whole ledger, and a Gate that keeps only a
working set in memory finds any other request's state when it needs it.

Tables (one file, `gate.sqlite`):
- `meta`: one row: the format and the schema (a digest of RequestState's shape: a snapshot of
  another version of the code is not read), the ledger's id, the seq, hash and ts of the last
  event covered, and the store's place of that event (a hint for `record_at`); the digests the
  last `roster` and the last `policy` event covered name (empty: no such event); the standing
  decisions (`remembered` events) that may still cover a call (machine.Standing, a msgpack list);
  the digests of the policies whose text a `policy` event keeps (`pinned`, a JSON list).
- `current(request, version, pending, state)`: every request's state as of `meta.seq`
  (RequestState as msgpack); `version` is the seq of the last event that changed it.
- `history(request, version, until, state)`: states that were current for seqs [version,
  until), kept for HORIZON events, so that a Gate that has folded less than `meta.seq` still
  finds a request's state as of its own seq; further behind, it is told to reopen (Behind).
- `call_ids(call_id, request)`, `edits(seq, request)`, `redacted(target, seq, path)`: the
  Workflow's indexes; `call_id_filter(chunk, bits)`: a Bloom filter of the call ids (CallIdFilter),
  so that the common case, a call id never seen, costs no query.

Trust. A snapshot is a cache, never trusted over the ledger: opening checks its format and
schema, that it belongs to this ledger (ledger_id), and that the event at its seq still has the
hash it recorded; then the Gate verifies every event after it as a replay does. A missing,
unreadable, corrupt, foreign or stale snapshot is rebuilt from the ledger. What opening from a
snapshot skips is verifying the events the snapshot covers (chain and workflow rules): the Gate
that wrote it verified them as it folded them, and `ledger verify` checks them all.
`Gate(..., full_verify=True)` replays and verifies the whole ledger on open instead.

Concurrency. Any number of Gates, in any number of processes, read and write one snapshot.
SQLite in WAL mode gives each read a consistent view and serializes the writes. A write
advances `meta.seq` only, and only by a Gate that knows every change between the snapshot's seq
and its own (its `base`, the seq from which it kept every change in memory, is at most
`meta.seq`), so the tables always hold the state as of `meta.seq` exactly. Commits are not
synced (synchronous=NORMAL): a crash may lose the last writes, never make the file inconsistent.
"""

from __future__ import annotations

import hashlib
from hashlib import blake2b as _blake2b
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import msgspec

from ledger.store.log import make_dir, shared_mode
from ledger.workflow.machine import RequestState, Standing

FORMAT = 8  # 2: `current` has the run column; 3: `redacted` keyed by its seq and path; 4: meta has the roster;
# 5: meta has the policy digest; 6: meta has the standing decisions; 7: a standing decision has its
# request's proposer and rules, and the requests it allowed that have not started; 8: meta has the
# digests of the pinned policies
FILE_NAME = "gate.sqlite"
HORIZON = 100_000
"""Events for which a superseded state is kept (history): a Gate that has folded up to this
many events less than the snapshot still finds the states as of its own seq."""

BUSY_SECONDS = 0.25

SCHEMA = hashlib.sha256(msgspec.json.encode(msgspec.json.schema(RequestState))).hexdigest()

_ENCODE = msgspec.msgpack.Encoder().encode
_DECODE = msgspec.msgpack.Decoder(RequestState).decode
_DECODE_STANDING = msgspec.msgpack.Decoder(list[Standing]).decode

_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), format INTEGER, schema TEXT,"
    " ledger_id TEXT, seq INTEGER, hash TEXT, ts TEXT, place TEXT, roster TEXT, policy_digest TEXT, standing BLOB,"
    " pinned TEXT)",
    "CREATE TABLE IF NOT EXISTS current (request INTEGER PRIMARY KEY, version INTEGER NOT NULL,"
    " pending INTEGER NOT NULL, run TEXT, state BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS current_run ON current (run, request) WHERE run IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS current_pending ON current (pending) WHERE pending = 1",
    "CREATE TABLE IF NOT EXISTS history (request INTEGER NOT NULL, version INTEGER NOT NULL, until INTEGER NOT NULL,"
    " state BLOB NOT NULL, PRIMARY KEY (request, version))",
    "CREATE INDEX IF NOT EXISTS history_until ON history (until)",
    "CREATE TABLE IF NOT EXISTS call_ids (call_id TEXT PRIMARY KEY, request INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS call_id_filter (chunk INTEGER PRIMARY KEY, bits BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS edits (seq INTEGER PRIMARY KEY, request INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS redacted (target INTEGER NOT NULL, seq INTEGER NOT NULL, path TEXT NOT NULL,"
    " PRIMARY KEY (target, seq, path))",
)


def _tables(db: sqlite3.Connection) -> None:
    """Create the tables; a file of another FORMAT (SQLite's user_version) has its tables dropped
    first: its layout may differ, and it is only a cache."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != FORMAT:
            names = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for name in names:
                db.execute(f'DROP TABLE IF EXISTS "{name}"')
            db.execute(f"PRAGMA user_version = {FORMAT}")
        for statement in _TABLES:
            db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a directory this account cannot search
        return False


class Behind(Exception):
    """The snapshot cannot answer as of this Gate's seq (it moved back, or on past HORIZON, or
    was replaced): the Gate must reopen from it."""


class Unusable(Exception):
    """The snapshot file cannot be used here (unwritable directory, a database error): the Gate
    goes on without one."""


@dataclass
class Loaded:
    """What opening reads: the last event covered (seq, hash, ts, place) and the requests that
    stay in memory (pending or interrupting)."""

    seq: int
    hash: str
    ts: str
    place: Any
    pending: list[RequestState]
    call_ids: "CallIdFilter"
    roster: str | None = None  # the digest the last `roster` event covered names (None: no such event)
    policy_digest: str | None = None  # the digest the last `policy` event covered names (None: no such event)
    standing: list[Standing] | None = None  # the standing decisions as of `seq`
    pinned: list[str] | None = None  # the digests of the policies a `policy` event pins (ledger.pinning)


class CallIdFilter:
    """A Bloom filter of call ids (Bloom, 1970): `might_hold(call_id)` is False only for a call id
    never added, so a new call id, the common case, is known new without a query. FILTER_BITS bits
    (1 MiB), FILTER_HASHES positions per id from one BLAKE2b digest: about 1 false positive in
    20,000 lookups at 250,000 call ids, 1 in 50 at 1,000,000 (a false positive costs one query,
    never a wrong answer). Kept in CHUNK_BYTES chunks, of which a save writes the changed ones,
    ORed into the stored ones (bits are only ever set), so writers never undo each other."""

    FILTER_BITS = 1 << 23
    FILTER_HASHES = 5
    CHUNK_BYTES = 4096

    def __init__(self, chunks: dict[int, bytes] | None = None):
        self._bits = bytearray(self.FILTER_BITS // 8)
        for chunk, bits in (chunks or {}).items():
            start = chunk * self.CHUNK_BYTES
            if 0 <= start and len(bits) == self.CHUNK_BYTES and start + len(bits) <= len(self._bits):
                self._bits[start : start + len(bits)] = bits
        self._changed: set[int] = set()
        self._last: tuple[str | None, tuple[int, ...]] = (None, ())

    def _positions(self, call_id: str) -> tuple[int, ...]:
        if call_id == self._last[0]:  # a propose asks, then adds, the same id
            return self._last[1]
        value = int.from_bytes(_blake2b(call_id.encode("utf-8", "surrogatepass"), digest_size=16).digest(), "big")
        mask = self.FILTER_BITS - 1  # FILTER_HASHES slices of 23 bits of the 128
        positions = (value & mask, (value >> 23) & mask, (value >> 46) & mask, (value >> 69) & mask, (value >> 92) & mask)
        self._last = (call_id, positions)
        return positions

    def add(self, call_id: str) -> None:
        bits, changed, size = self._bits, self._changed, self.CHUNK_BYTES
        for position in self._positions(call_id):
            bits[position >> 3] |= 1 << (position & 7)
            changed.add((position >> 3) // size)

    def might_hold(self, call_id: str) -> bool:
        bits = self._bits
        for position in self._positions(call_id):
            if not bits[position >> 3] & (1 << (position & 7)):
                return False
        return True

    def changed(self) -> dict[int, bytes]:
        """The chunks changed since the last call (and forgets them)."""
        size = self.CHUNK_BYTES
        out = {c: bytes(self._bits[c * size : (c + 1) * size]) for c in self._changed}
        self._changed = set()
        return out


def _pending(state: RequestState) -> int:
    return 1 if state.status in ("pending", "interrupting") else 0


class Snapshot:
    """One snapshot file (see the module docstring). Methods raise Unusable when SQLite fails;
    the lookups raise Behind. Thread-safe (one connection, one lock)."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / FILE_NAME
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._meta_seq: int | None = None  # meta.seq as last read or written

    # --- the connection ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        for attempt in (1, 2):
            try:
                make_dir(self.path.parent, like=self.path.parent.parent)
                # A short wait for the write lock: a save that cannot have it soon is skipped and
                # made later (reads, in WAL mode, do not wait for writers).
                db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=NORMAL")
                    _tables(db)
                except sqlite3.DatabaseError:
                    db.close()
                    raise
                self._share_files()
                self._db = db
                return db
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or isinstance(exc, sqlite3.OperationalError) or not _exists(self.path):
                    raise Unusable(f"{self.path}: {exc}") from None
                self._discard()  # not a database (corrupt, or another file): rebuilt
            except OSError as exc:
                raise Unusable(f"{self.path}: {exc.strerror or exc}") from None
        raise Unusable(str(self.path))

    def _share_files(self) -> None:
        """Give the files SQLite made the ledger directory's read and write bits (SQLite makes
        them 0644): the other accounts that open Gates on this ledger save to them too."""
        mode = shared_mode(self.path.parent.parent)
        for suffix in ("", "-wal", "-shm"):
            try:
                name = f"{self.path}{suffix}"
                if os.stat(name).st_uid == os.geteuid():
                    os.chmod(name, mode)
            except OSError:
                pass

    def _discard(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except OSError:
                pass

    def _run(self, work, *, write: bool = False):
        """`work(db)` in one transaction (IMMEDIATE for writes), under this object's lock. SQLite
        errors become Unusable; a corrupt file is discarded on the way."""
        with self._lock:
            db = self._connect()
            try:
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = work(db)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return result
            except sqlite3.DatabaseError as exc:
                if not isinstance(exc, sqlite3.OperationalError):  # malformed: start again next time
                    self.close_locked()
                    self._discard()
                raise Unusable(f"{self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self.close_locked()

    def close_locked(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            finally:
                self._db = None

    # --- opening ----------------------------------------------------------------------------

    def load(self, ledger_id: str) -> Loaded | None:
        """The snapshot's last event and its pending requests, or None when there is no usable
        snapshot of this ledger (empty, another format or schema, another ledger)."""

        def work(db: sqlite3.Connection) -> Loaded | None:
            row = db.execute("SELECT format, schema, ledger_id, seq, hash, ts, place, roster, policy_digest, standing, pinned"
                             " FROM meta").fetchone()
            if row is None or row[:3] != (FORMAT, SCHEMA, ledger_id) or not row[3]:
                return None
            pending = [_DECODE(blob) for (blob,) in db.execute("SELECT state FROM current WHERE pending = 1 ORDER BY request")]
            self._meta_seq = row[3]
            seen = CallIdFilter(dict(db.execute("SELECT chunk, bits FROM call_id_filter")))
            return Loaded(row[3], row[4], row[5], json.loads(row[6]) if row[6] else None, pending, seen, row[7] or None,
                          row[8] or None, _DECODE_STANDING(row[9]) if row[9] else [], json.loads(row[10]) if row[10] else [])

        try:
            return self._run(work)
        except (msgspec.DecodeError, ValueError):
            return None

    def reset(self, ledger_id: str) -> None:
        """Empty the snapshot and make it this ledger's, covering nothing yet (seq 0)."""

        def work(db: sqlite3.Connection) -> None:
            for table in ("current", "history", "call_ids", "call_id_filter", "edits", "redacted", "meta"):
                db.execute(f"DELETE FROM {table}")
            db.execute("INSERT INTO meta VALUES (1, ?, ?, ?, 0, '', '', '', '', '', NULL, '')", (FORMAT, SCHEMA, ledger_id))
            self._meta_seq = 0

        self._run(work, write=True)

    # --- writing ----------------------------------------------------------------------------

    def save(self, *, ledger_id: str, base: int, seq: int, hash: str, ts: str, place: Any,
             states: dict[int, tuple[int, int, RequestState]], call_ids: dict[str, int], edits: dict[int, int],
             redacted: Iterable[tuple[int, int, str]], call_id_filter: "CallIdFilter | None" = None,
             roster: str | None = None, policy_digest: str | None = None,
             standing: Iterable[Standing] = (), pinned: Iterable[str] = ()) -> int | None:
        """Advance the snapshot to `seq` with the states that changed after `base` (request ->
        (seq of its first change after base, seq of its last, state as of `seq`)) and the index
        entries. Writes only when the snapshot is this ledger's and base <= its seq < `seq`. The
        state each replaces goes to `history`, valid until that first change (the states between
        the first and the last change are not kept: a Gate that needs one opens again). Returns
        the snapshot's seq afterwards (None: not this ledger's, or not one this Gate may extend)."""

        def work(db: sqlite3.Connection) -> int | None:
            row = db.execute("SELECT format, schema, ledger_id, seq FROM meta").fetchone()
            if row is None or row[:3] != (FORMAT, SCHEMA, ledger_id):
                return None
            at = row[3] or 0
            self._meta_seq = at
            if at >= seq:
                return at
            if base > at:
                return None  # the snapshot moved back (rebuilt): this Gate does not know what it lacks
            for request, (first, version, state) in states.items():
                old = db.execute("SELECT version, state FROM current WHERE request = ?", (request,)).fetchone()
                if old is not None and old[0] < first:
                    db.execute("INSERT OR REPLACE INTO history VALUES (?, ?, ?, ?)", (request, old[0], first, old[1]))
                db.execute("INSERT OR REPLACE INTO current VALUES (?, ?, ?, ?, ?)",
                           (request, version, _pending(state), state.run, _ENCODE(state)))
            db.executemany("INSERT OR IGNORE INTO call_ids VALUES (?, ?)", call_ids.items())
            if call_id_filter is not None:
                for chunk, bits in call_id_filter.changed().items():
                    old = db.execute("SELECT bits FROM call_id_filter WHERE chunk = ?", (chunk,)).fetchone()
                    merged = bits if old is None else (int.from_bytes(old[0], "big") | int.from_bytes(bits, "big")).to_bytes(len(bits), "big")
                    db.execute("INSERT OR REPLACE INTO call_id_filter VALUES (?, ?)", (chunk, merged))
            db.executemany("INSERT OR IGNORE INTO edits VALUES (?, ?)", edits.items())
            db.executemany("INSERT OR IGNORE INTO redacted VALUES (?, ?, ?)", redacted)
            db.execute("UPDATE meta SET seq = ?, hash = ?, ts = ?, place = ?, roster = ?, policy_digest = ?, standing = ?,"
                       " pinned = ?", (seq, hash, ts, json.dumps(place), roster or "", policy_digest or "",
                                       _ENCODE(list(standing)), json.dumps(sorted(pinned))))
            db.execute("DELETE FROM history WHERE until <= ?", (seq - HORIZON,))
            self._meta_seq = seq
            return seq

        return self._run(work, write=True)

    # --- lookups (as of a Gate's seq `seen`; `floor`: the seq up to which it relies on the file) ---
    # Each is one statement that reads `meta` beside the row (SQLite runs a statement on one
    # consistent view), so a snapshot reset or replaced between two statements cannot answer.

    def _query(self, sql: str, args: tuple, ledger_id: str, floor: int) -> list:
        with self._lock:
            db = self._connect()
            try:
                rows = db.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as exc:
                if not isinstance(exc, sqlite3.OperationalError):
                    self.close_locked()
                    self._discard()
                raise Unusable(f"{self.path}: {exc}") from None
        if not rows or rows[0][:3] != (FORMAT, SCHEMA, ledger_id) or (rows[0][3] or 0) < floor:
            raise Behind("the snapshot no longer holds what this Gate left to it")
        return rows

    _META = "SELECT m.format, m.schema, m.ledger_id, m.seq"

    def state(self, request: int, *, ledger_id: str, seen: int, floor: int) -> RequestState | None:
        """The state of `request` as of seq `seen`, or None when it was never proposed (as of
        `seen`). Raises Behind, Unusable."""
        if request > seen:
            return None
        [row] = self._query(self._META + ", c.version, c.state, (SELECT h.state FROM history h WHERE h.request = ?1"
                            " AND h.version <= ?2 AND h.until > ?2 ORDER BY h.version DESC LIMIT 1)"
                            " FROM meta m LEFT JOIN current c ON c.request = ?1", (request, seen), ledger_id, floor)
        version, current, older = row[4:]
        if version is None:
            return None
        if version <= seen:
            return _DECODE(current)
        if older is None:
            raise Behind(f"request {request}'s state as of seq {seen} is no longer kept")
        return _DECODE(older)

    def of_run(self, run: str, before: int, limit: int) -> list[RequestState]:
        """Up to `limit` requests of `run` proposed before seq `before`, newest first, as the
        snapshot holds them now (for a person to read, not for a rule)."""
        def work(db: sqlite3.Connection) -> list[RequestState]:
            rows = db.execute("SELECT state FROM current WHERE run = ? AND request < ? ORDER BY request DESC LIMIT ?",
                              (run, before, limit))
            return [_DECODE(blob) for (blob,) in rows]

        return self._run(work)

    def recent(self, before: int, limit: int) -> list[RequestState]:
        """Up to `limit` requests proposed before seq `before`, newest first, as the snapshot
        holds them now (for a person to read, not for a rule)."""
        def work(db: sqlite3.Connection) -> list[RequestState]:
            rows = db.execute("SELECT state FROM current WHERE request < ? ORDER BY request DESC LIMIT ?", (before, limit))
            return [_DECODE(blob) for (blob,) in rows]

        return self._run(work)

    def request_of(self, call_id: str, *, ledger_id: str, seen: int, floor: int) -> int | None:
        [row] = self._query(self._META + ", (SELECT request FROM call_ids WHERE call_id = ?) FROM meta m", (call_id,),
                            ledger_id, floor)
        return row[4] if row[4] is not None and row[4] <= seen else None

    def edit_request(self, seq: int, *, ledger_id: str, seen: int, floor: int) -> int | None:
        [row] = self._query(self._META + ", (SELECT request FROM edits WHERE seq = ?) FROM meta m", (seq,), ledger_id, floor)
        return row[4] if row[4] is not None and seq <= seen else None

    def redacted_paths(self, target: int, *, ledger_id: str, seen: int, floor: int) -> list[str]:
        rows = self._query(self._META + ", r.seq, r.path FROM meta m LEFT JOIN redacted r ON r.target = ? ORDER BY r.seq",
                           (target,), ledger_id, floor)
        return [path for *_m, seq, path in rows if seq is not None and seq <= seen]


class Archive:
    """A Snapshot seen from one Gate: the lookups a Workflow makes (ledger.workflow.machine
    Archive), answered as of the Gate's seq."""

    def __init__(self, snapshot: Snapshot, gate: Any, call_ids: CallIdFilter | None = None):
        self.snapshot, self.gate = snapshot, gate
        self.call_ids = call_ids if call_ids is not None else CallIdFilter()  # every call id folded, or in the snapshot

    def _at(self) -> dict:
        return {"ledger_id": self.gate._ledger_id, "seen": self.gate._seen[0], "floor": self.gate._floor}

    def load(self, request: int) -> RequestState | None:
        return self.snapshot.state(request, **self._at())

    def request_of(self, call_id: str) -> int | None:
        if not self.call_ids.might_hold(call_id):
            return None
        return self.snapshot.request_of(call_id, **self._at())

    def edit_request(self, seq: int) -> int | None:
        return self.snapshot.edit_request(seq, **self._at())

    def redacted_paths(self, target: int) -> list[str]:
        return self.snapshot.redacted_paths(target, **self._at())
