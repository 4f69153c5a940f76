"""A columnar projection of a ledger: derived, rebuildable, never authoritative.

    DIR/projection/
      LOCK                 held (flock, exclusive) while the projection is refreshed or read
      projection.duckdb    a DuckDB database: the tables below
      .chunk-*.jsonl       rows on their way into the database (removed at once; a crash may leave one)

`refresh(DIR)` brings the projection up to date with the log: it reads only the complete lines
after the last line it covers (it remembers that line's segment, offset, seq and hash), checks
each of them, folds them into the requests' states with ledger.workflow.Workflow, and appends
the new rows, all in one DuckDB transaction. The `stats` of ledger.analytics.stats read it instead of
parsing every line through the views of ledger.analytics.views when it is present and covers the whole
ledger.

Tables:

- `meta` (one row): the format, the ledger id, `events` (lines covered = the last seq), `head`
  (the hash of the last line covered), where that line is (`head_segment`, `head_offset`,
  `end_offset`), `last_ts` (the last event's ts as TIMESTAMPTZ) and the open workflow state.
- `events`: one row per line: seq, ts (TIMESTAMPTZ), kind, request, actor (approver, editor or
  `by`), segment (its number) and file_offset (bytes before the line in its segment).
- `final_requests`: one row per request that is final (denied, rejected, responded, expired,
  cancelled, executed); never changes once written.
- `open_requests`: the same columns for every other request, and its folded state (`state`,
  JSON); rewritten at every refresh.
- the view `requests`: both.
- `final_summary`: the final requests counted by (tool, effect, status, decision, edited,
  outcome), and `final_seconds`: the seconds from proposal to decision of the decided final
  asks; both kept as final requests are added, so that stats read a few hundred rows and one
  column instead of every request.

What is checked for each line projected: the line layout, that the body decodes as an event and
is in its canonical layout, `seq` is the previous one + 1, `prev` the previous hash, the stored
hash SHA-256 of the body, the genesis first, and every workflow rule. A line that fails stops the
refresh there (`Refresh.problem`): what came before stays projected, `complete` is false, and
ledger.analytics.stats falls back to the views, which report the history as recorded. Not checked: the
data beside the bodies and the spelling of timestamps, which the projection does not use (the
timestamps are converted exactly as the views convert them). Run `ledger verify` for those.

Before reading on, a refresh checks that the line it last covered is still there, byte for
byte the one whose hash it stored (`head`); if not (the log was truncated, rewritten or replaced)
the projection is dropped and rebuilt from the log alone. Deleting DIR/projection/ and running
`refresh` again gives the same tables. The projection lives in a subdirectory, so no file of it
is ever taken for a segment (segments are DIR/events-NNNNNNNN.jsonl only).

duckdb is imported only inside the functions of this module.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Iterator

import msgspec

from ledger import events as ev
from ledger.store import lines as ln
from ledger.store.log import LedgerUnreadable, list_segments, segment_name
from ledger.workflow.machine import RequestState, Standing, Violation, Workflow

FORMAT = "countersign-projection/2"
DIRECTORY = "projection"
DATABASE = "projection.duckdb"
LOCK = "LOCK"
CHUNK_EVENTS = 250_000  # rows collected in memory before they go into the database

_decode = ev.decode_event
_encode = ev.encode_event


class ProjectionError(Exception):
    """The projection cannot be read or written (e.g. the ledger directory is read-only)."""


class Refresh(msgspec.Struct, kw_only=True):
    """What a refresh found. `events`: lines covered; `head`: the hash of the last one; `added`:
    lines projected by this refresh; `rebuilt`: the projection was (re)built from the first line
    (`reason` says why); `complete`: every complete line of the ledger is covered (false when a
    line failed a check: `problem`, at `problem_seq`); `seconds`: how long it took."""

    events: int = 0
    head: str = ev.GENESIS_PREV
    added: int = 0
    rebuilt: bool = False
    reason: str | None = None
    complete: bool = False
    problem: str | None = None
    problem_seq: int | None = None
    seconds: float = 0.0


def directory(path: str | Path) -> Path:
    return Path(path) / DIRECTORY


def exists(path: str | Path) -> bool:
    """Whether the ledger at `path` has a projection (it may be behind the log)."""
    return (directory(path) / DATABASE).is_file()


def remove(path: str | Path) -> None:
    """Delete the projection (it can always be rebuilt from the log)."""
    shutil.rmtree(directory(path), ignore_errors=True)


# --- the schema -------------------------------------------------------------------------------------

_REQUEST_COLUMNS = {
    "request": "BIGINT",
    "tool": "VARCHAR",
    "run": "VARCHAR",
    "proposer": "VARCHAR",
    "call_id": "VARCHAR",
    "effect": "VARCHAR",
    "rule": "VARCHAR",
    "status": "VARCHAR",
    "decision": "VARCHAR",
    "proposed_at": "TIMESTAMPTZ",
    "decided_at": "TIMESTAMPTZ",
    "decided_by": "VARCHAR",
    "deadline": "TIMESTAMPTZ",
    "edits": "BIGINT",
    "edited": "BOOLEAN",
    "approvals": "BIGINT",
    "outcome": "VARCHAR",
    "executed_at": "TIMESTAMPTZ",
}
_SUMMARY_KEYS = ("tool", "effect", "status", "decision", "edited", "outcome")
_SECONDS_SQL = "(epoch_us(decided_at) - epoch_us(proposed_at)) / 1e6"  # as ledger.analytics.stats computes it
_TS_COLUMNS = {name for name, t in _REQUEST_COLUMNS.items() if t == "TIMESTAMPTZ"}
_EVENT_COLUMNS = {
    "seq": "BIGINT",
    "ts": "TIMESTAMPTZ",
    "kind": "VARCHAR",
    "request": "BIGINT",
    "actor": "VARCHAR",
    "segment": "INTEGER",
    "file_offset": "BIGINT",
}
_SCHEMA = [
    """CREATE TABLE meta (
        format VARCHAR, ledger_id VARCHAR, events BIGINT, head VARCHAR,
        head_segment INTEGER, head_offset BIGINT, end_offset BIGINT,
        last_ts TIMESTAMPTZ, workflow BLOB)""",
    "CREATE TABLE events (" + ", ".join(f"{c} {t}" for c, t in _EVENT_COLUMNS.items()) + ")",
    "CREATE TABLE final_requests (" + ", ".join(f"{c} {t}" for c, t in _REQUEST_COLUMNS.items()) + ")",
    "CREATE TABLE open_requests (" + ", ".join(f"{c} {t}" for c, t in _REQUEST_COLUMNS.items()) + ", state VARCHAR)",
    "CREATE VIEW requests AS SELECT * FROM final_requests UNION ALL SELECT * EXCLUDE (state) FROM open_requests",
    # What stats need of the final requests, kept as they are added: counts by what stats group
    # on, and the seconds to decision of the decided asks (their quantiles need every value).
    "CREATE TABLE final_summary (" + ", ".join(f"{c} {_REQUEST_COLUMNS[c]}" for c in _SUMMARY_KEYS) + ", n BIGINT)",
    "CREATE TABLE final_seconds (seconds DOUBLE)",
]
TABLES = ("meta", "events", "final_requests", "open_requests", "final_summary", "final_seconds")


def _ts_sql(expr: str) -> str:
    from ledger.analytics.views import _ts_sql as views_ts  # the views' conversion, so both read times alike

    return views_ts(expr)


# --- the fold ---------------------------------------------------------------------------------------


class _FinalRequest:
    """What the fold keeps of a final request: that it is final (any later event about it, but a
    redaction, is a violation), and its status for the message."""

    __slots__ = ("request", "status")
    final = True
    executable = False

    def __init__(self, request: int, status: str):
        self.request, self.status = request, status


class _Requests(dict):
    """Workflow.requests for the projection: the open requests' states in memory; a final one
    is looked up (as a _FinalRequest) among the rows already projected, on demand."""

    def __init__(self, lookup):
        super().__init__()
        self._lookup = lookup

    def __missing__(self, key):
        found = self._lookup(key)
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self._lookup(key) is not None


class _Discard(dict):
    """A mapping that keeps nothing (Workflow.by_call_id: the Gate's, not needed to check)."""

    def __setitem__(self, key, value) -> None:
        pass


_ACTOR = {"approved": "approver", "rejected": "approver", "responded": "approver", "edited": "editor", "cancelled": "by"}
_STATE_DECODER = msgspec.json.Decoder(RequestState)
_LINES = msgspec.json.Encoder()
# A row holds strings of at most two events (a request's proposal and its decision), each inside
# a line of at most MAX_LINE_BYTES and spelled here as there (msgspec's escapes): DuckDB's
# read_json refuses objects over its maximum_object_size (16 MiB by default), so it is set above.
_MAX_ROW_BYTES = 2 * ln.MAX_LINE_BYTES + (1 << 20)
_STATE_FIELDS = {f.name for f in dataclass_fields(RequestState)}


def _request_row(state: RequestState) -> dict:
    return {
        "request": state.request,
        "tool": state.tool,
        "run": state.run,
        "proposer": state.proposer,
        "call_id": state.call_id,
        "effect": state.effect,
        "rule": state.rules[0] if state.rules else None,
        "status": state.status,
        "decision": state.decision,
        "proposed_at": state.proposed_at,
        "decided_at": state.decided_at,
        "decided_by": state.decided_by,
        "deadline": state.deadline,
        "edits": state.edits,
        "edited": state.edits > 0,
        "approvals": len(state.approvals),
        "outcome": state.outcome,
        "executed_at": state.executed_at,
    }


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


# The Workflow's indexes of its open requests, made again from them on load (not stored).
_DERIVED = ("requests", "by_call_id", "pending", "interrupting", "_deadlines", "archive", "_standing_by")


def _dump_workflow(workflow: Workflow) -> bytes:
    """The fold's state other than the requests (msgpack, no code): every attribute a
    Workflow has beside `requests`, `by_call_id` and the indexes made from the open requests."""
    aux = {k: v for k, v in vars(workflow).items() if k not in _DERIVED}
    aux["standing"] = list(workflow.standing.values())  # indexed again on load (Workflow.add_standing)
    return msgspec.msgpack.encode({k: (sorted(v, key=repr) if isinstance(v, set) else v) for k, v in aux.items()})


def _load_workflow(workflow: Workflow, blob: bytes | None) -> None:
    if not blob:
        return
    for name, value in msgspec.msgpack.decode(blob).items():
        if name in _DERIVED:  # a projection written before they were left out
            continue
        if name == "standing":
            workflow.standing, workflow._standing_by = {}, {}
            for item in msgspec.convert(value, list[Standing]):
                workflow.add_standing(item)
            continue
        current = getattr(workflow, name, None)
        if isinstance(current, set):
            value = {_freeze(v) for v in value}
        elif isinstance(current, dict):
            value = {k: _freeze(v) for k, v in value.items()}
        elif isinstance(current, tuple):
            value = _freeze(value)
        setattr(workflow, name, value)


# --- reading the log --------------------------------------------------------------------------------


class _Stop(Exception):
    """A line failed a check: the refresh stops before it."""

    def __init__(self, seq: int, message: str):
        super().__init__(message)
        self.seq, self.message = seq, message


class _Projector:
    """One refresh, inside one DuckDB transaction on `con`."""

    def __init__(self, con, root: Path, chunk_dir: Path):
        self.con, self.root, self.chunk_dir = con, root, chunk_dir
        self.events: list[dict] = []
        self.finals: list[dict] = []
        self.recent_finals: dict[int, str] = {}  # request → status, final in this refresh and not yet written
        self.workflow = Workflow()
        self.workflow.requests = _Requests(self._lookup_final)
        self.workflow.by_call_id = _Discard()

    def _lookup_final(self, request: Any) -> _FinalRequest | None:
        if not isinstance(request, int):
            return None
        status = self.recent_finals.get(request)
        if status is None:
            row = self.con.execute("SELECT status FROM final_requests WHERE request = ?", [request]).fetchone()
            if row is None:
                return None
            status = row[0]
        return _FinalRequest(request, status)

    def load(self, meta: dict | None) -> None:
        self.con.execute("CREATE OR REPLACE TEMP TABLE _chunk AS SELECT * FROM final_requests LIMIT 0")
        if meta is None:
            return
        _load_workflow(self.workflow, meta["workflow"])
        self.workflow.by_call_id = _Discard()
        self.workflow.seen_genesis = meta["events"] > 0
        for request, state in self.con.execute("SELECT request, state FROM open_requests").fetchall():
            decoded = _STATE_DECODER.decode(state)
            dict.__setitem__(self.workflow.requests, request, decoded)
            if decoded.status == "pending":
                self.workflow.add_pending(decoded)
            elif decoded.status == "interrupting":
                self.workflow.interrupting[request] = decoded

    def run(self, seq: int, head: str, segment: int, offset: int, ledger_id: str | None):
        """Fold the complete lines after (segment, offset). Returns (seq, head, head segment,
        head offset, end offset, ledger id, problem)."""
        segments = list_segments(self.root)
        names = [p.name for p in segments]
        if not names:
            raise LedgerUnreadable(f"{self.root}: no ledger segments in this directory")
        expected_names = [segment_name(i + 1) for i in range(len(names))]
        problem: _Stop | None = None
        # the first segment number that is missing: the segments before it are folded, as far as they go
        gap = next((i + 1 for i, (name, want) in enumerate(zip(names, expected_names)) if name != want), None)
        head_segment, head_offset, end_offset = segment, 0, offset
        workflow = self.workflow
        requests = workflow.requests
        check, apply = workflow.check, workflow.apply
        sha256 = hashlib.sha256
        split = ln.split
        prefix, hash_mark, data_mark, suffix = ln.PREFIX, ln.HASH_MARK, ln.DATA_MARK, ln.SUFFIX
        assert len(prefix) == 8 and len(hash_mark) == 9 and len(data_mark) == 9
        events, finals, recent = self.events, self.finals, self.recent_finals
        number = segment if segment > 0 else 1
        pos = offset
        while problem is None:
            if gap is not None and number >= gap:
                problem = _Stop(seq + 1, f"{segment_name(gap)} is missing (the segment numbers have a gap)")
                break
            path = self.root / segment_name(number)
            following = (self.root / segment_name(number + 1)).exists()  # before reading to the end
            tail = 0  # bytes after the segment's last line feed
            try:
                handle = open(path, "rb")
            except FileNotFoundError:
                if number == 1 and seq == 0:
                    raise LedgerUnreadable(f"{self.root}: no ledger segments in this directory") from None
                problem = _Stop(seq + 1, f"{segment_name(number)} disappeared while it was read")
                break
            try:
                with handle:
                    handle.seek(pos)
                    # Whole lines, a block at a time (bounded memory: no line is over the limit).
                    for data, base, tail in _blocks(handle, pos):
                        if data is None:  # a line over the limit, which a line feed ends
                            raise _Stop(seq + 1, f"{ln.too_long(tail)} (at byte {base} of {segment_name(number)})")
                        end = len(data)
                        start = 0
                        while start < end:
                            nl = data.index(b"\n", start)
                            text = data[start:nl]
                            expected = seq + 1
                            # The layout of ledger.store.lines.split, inline; the hash's spelling is checked
                            # below by comparing it with the body's SHA-256 in lowercase hex.
                            cut = text.find(hash_mark, 8)
                            if not text.startswith(prefix) or cut < 0 or text[cut + 73 : cut + 82] != data_mark or text[-1:] != suffix:
                                try:
                                    split(text)
                                except ln.LineError as exc:
                                    raise _Stop(expected, str(exc)) from None
                                raise _Stop(expected, "the line does not have the ledger's layout")
                            body, digest = text[8:cut], text[cut + 9 : cut + 73].decode("ascii", "replace")
                            try:
                                event = _decode(body)
                            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                                raise _Stop(expected, f"the body is not a valid event: {exc}") from None
                            if event.seq != expected:
                                raise _Stop(expected, f"seq is {event.seq}, expected {expected}")
                            if event.prev != head:
                                raise _Stop(expected, "prev is not the previous event's hash")
                            if sha256(body).hexdigest() != digest:
                                raise _Stop(expected, "the hash does not match the body")
                            if _encode(event) != body:
                                raise _Stop(expected, "the body is not in its canonical layout")
                            kind = event.__struct_config__.tag
                            if expected == 1:
                                if kind != "genesis":
                                    raise _Stop(expected, "the first event is not the genesis")
                                ledger_id = event.ledger_id
                            try:
                                check(event)
                                apply(expected, event)
                            except Violation as exc:
                                raise _Stop(expected, f"workflow: {exc.code}: {exc.message}") from None
                            except Exception as exc:  # anything the fold cannot take is not projected
                                raise _Stop(expected, f"workflow: {type(exc).__name__}: {exc}") from None
                            request = getattr(event, "request", None)
                            actor = None
                            if kind == "proposed":
                                request = expected
                                state = dict.get(requests, expected)
                                if state is not None and state.final:  # denied
                                    finals.append(_request_row(state))
                                    recent[expected] = state.status
                                    dict.__delitem__(requests, expected)
                            elif request is not None:
                                actor = getattr(event, _ACTOR.get(kind, "-"), None)
                                if isinstance(request, int):
                                    state = dict.get(requests, request)
                                    if state is not None and state.final:
                                        finals.append(_request_row(state))
                                        recent[request] = state.status
                                        dict.__delitem__(requests, request)
                            events.append({
                                "seq": expected, "ts": event.ts, "kind": kind,
                                "request": request if isinstance(request, int) else None,
                                "actor": actor if isinstance(actor, str) else None,
                                "segment": number, "file_offset": base + start,
                            })
                            seq, head = expected, digest
                            head_segment, head_offset, end_offset = number, base + start, base + nl + 1
                            start = nl + 1
                            if len(events) >= CHUNK_EVENTS:
                                self.flush()
            except _Stop as stop:
                problem = stop
                break
            if not following and not (gap is not None and number + 1 == gap):
                break
            if tail:
                problem = _Stop(seq + 1, f"{segment_name(number)} ends without a line feed but is not the last segment")
                break
            number, pos = number + 1, 0
        self.flush()
        return seq, head, head_segment, head_offset, end_offset, ledger_id, problem

    def _write_rows(self, table: str, rows: list[dict], columns: dict[str, str], ts_columns: set[str]) -> None:
        if not rows:
            return
        if table == "final_requests":
            self._write_rows("_chunk", rows, columns, ts_columns)
            keys = ", ".join(_SUMMARY_KEYS)
            self.con.execute("INSERT INTO final_requests SELECT * FROM _chunk")
            self.con.execute(f"INSERT INTO final_seconds SELECT {_SECONDS_SQL} FROM _chunk "
                             "WHERE effect = 'ask' AND decision IS NOT NULL")
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE _summary AS SELECT {keys}, sum(n)::BIGINT AS n FROM ("
                f"SELECT * FROM final_summary UNION ALL SELECT {keys}, count(*) FROM _chunk GROUP BY ALL) GROUP BY ALL"
            )
            self.con.execute("DELETE FROM final_summary")
            self.con.execute("INSERT INTO final_summary SELECT * FROM _summary")
            self.con.execute("DROP TABLE _summary")
            self.con.execute("DELETE FROM _chunk")
            return
        chunk = self.chunk_dir / f".chunk-{os.getpid()}-{table}.jsonl"
        with open(chunk, "wb") as handle:
            handle.write(_LINES.encode_lines(rows))
        spec = "{" + ", ".join(f"'{c}': '{'VARCHAR' if c in ts_columns else t}'" for c, t in columns.items()) + "}"
        select = ", ".join(_ts_sql(c) if c in ts_columns else c for c in columns)
        try:
            self.con.execute(
                f"INSERT INTO {table} SELECT {select} FROM read_json('{_sql_path(chunk)}', format = 'newline_delimited', "
                f"columns = {spec}, maximum_object_size = {_MAX_ROW_BYTES})"
            )
        finally:
            chunk.unlink(missing_ok=True)

    def flush(self) -> None:
        self._write_rows("events", self.events, _EVENT_COLUMNS, {"ts"})
        self._write_rows("final_requests", self.finals, _REQUEST_COLUMNS, _TS_COLUMNS)
        self.events.clear()
        self.finals.clear()
        self.recent_finals.clear()

    def write_open(self) -> None:
        """Rewrite open_requests from the fold's open states."""
        self.con.execute("DELETE FROM open_requests")
        rows = []
        for request, state in dict.items(self.workflow.requests):
            row = _request_row(state)
            row["state"] = msgspec.json.encode(state).decode()
            rows.append(row)
        self._write_rows("open_requests", rows, {**_REQUEST_COLUMNS, "state": "VARCHAR"}, _TS_COLUMNS)


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


# --- refreshing -------------------------------------------------------------------------------------


@contextmanager
def _locked(root: Path, create: bool) -> Iterator[Path]:
    pdir = root / DIRECTORY
    if create:
        try:
            pdir.mkdir(exist_ok=True)
        except OSError as exc:
            raise ProjectionError(f"{pdir}: cannot create the projection ({exc.strerror})") from None
    try:
        fd = os.open(pdir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ProjectionError(f"{pdir}: cannot open the projection's lock ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield pdir
    finally:
        os.close(fd)


def _connect(db: Path):
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("SET TimeZone = 'UTC'")
    return con


def _read_meta(con) -> dict | None:
    try:
        cursor = con.execute("SELECT * FROM meta")
    except Exception:
        return None
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], row))


_BLOCK_BYTES = 8 << 20  # read size of the projection's pass; at most ln.MAX_LINE_BYTES (_blocks relies on it)


def _blocks(handle, pos: int):
    """`(data, base, tail)` for the rest of an open segment from `pos`: each `data` is whole lines
    (ending in a line feed; empty when a block ended none) starting at byte `base`, read
    _BLOCK_BYTES at a time; `tail` is the number of bytes after the last line feed so far (its
    last value: the unterminated end). A line longer than ledger.store.lines.MAX_LINE_BYTES that a line
    feed ends is yielded as `(None, its offset, its size)`, last; it is never held whole, and an
    unterminated run of any length is only counted."""
    carry, base = b"", pos
    while True:
        chunk = handle.read(_BLOCK_BYTES)
        if not chunk:
            return
        data = carry + chunk if carry else chunk
        # Only the first line can be over the limit: every later one lies inside `chunk`.
        first = data.find(b"\n")
        if first > ln.MAX_LINE_BYTES:
            yield None, base, first
            return
        if first < 0 and len(data) > ln.MAX_LINE_BYTES:  # over the limit: count it, holding nothing more
            size = len(data)
            del data, carry
            while chunk := handle.read(_BLOCK_BYTES):
                nl = chunk.find(b"\n")
                if nl >= 0:
                    yield None, base, size + nl
                    return
                size += len(chunk)
            yield b"", base, size  # unterminated: a torn tail
            return
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        yield data[:cut], base, len(carry)
        base += cut


def _head_still_there(root: Path, meta: dict) -> str | None:
    """None when the line the projection last covered is still in the log, unchanged; else why not."""
    if meta["events"] == 0:
        return None
    path = root / segment_name(meta["head_segment"])
    try:
        with open(path, "rb") as handle:
            handle.seek(meta["head_offset"])
            text = handle.read(min(meta["end_offset"] - meta["head_offset"], ln.MAX_LINE_BYTES + 1))
    except OSError:
        return f"{path.name}, which holds the last line projected, cannot be read"
    if not text.endswith(b"\n"):
        return (f"{path.name} no longer holds the last line projected at the offset it was read from "
                "(a redaction rewrites a segment; a truncation cuts it)")
    try:
        body, digest, _ = ln.split(text)
    except ln.LineError:
        return "the last line projected is no longer a ledger line"
    if digest != meta["head"] or hashlib.sha256(body).hexdigest() != digest:
        return f"head hash mismatch: the log no longer holds the line with hash {meta['head']} where it was projected"
    try:
        if _decode(body).seq != meta["events"]:
            return "the last line projected has another seq"
    except (msgspec.ValidationError, msgspec.DecodeError):
        return "the last line projected is no longer an event"
    return None


def _create(con) -> None:
    for table in ("requests",):
        con.execute(f"DROP VIEW IF EXISTS {table}")
    for table in TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    for statement in _SCHEMA:
        con.execute(statement)


def _refresh_locked(root: Path, pdir: Path, con, rebuild: bool) -> Refresh:
    started = time.perf_counter()
    result = Refresh()
    meta = None if rebuild else _read_meta(con)
    if meta is not None and meta.get("format") != FORMAT:
        meta, result.reason = None, f"the projection's format is {meta.get('format')!r}, not {FORMAT!r}"
    if meta is not None:
        why = _head_still_there(root, meta)
        if why is not None:
            meta, result.reason = None, why
    elif result.reason is None:
        result.reason = "rebuild asked for" if rebuild else "no projection yet"
    con.execute("BEGIN TRANSACTION")
    try:
        if meta is None:
            _create(con)
            result.rebuilt = True
        projector = _Projector(con, root, pdir)
        projector.load(meta)
        if meta is None:
            start = (0, ev.GENESIS_PREV, 1, 0, None)
        else:
            start = (meta["events"], meta["head"], meta["head_segment"], meta["end_offset"], meta["ledger_id"])
        seq, head, head_segment, head_offset, end_offset, ledger_id, problem = projector.run(*start)
        added = seq - start[0]
        if added or meta is None:
            projector.write_open()
            row = con.execute(
                "SELECT ts FROM events WHERE seq > ? AND ts IS NOT NULL ORDER BY seq DESC LIMIT 1", [start[0]]
            ).fetchone()
            last_ts = row[0] if row is not None else (meta["last_ts"] if meta is not None else None)
            con.execute("DELETE FROM meta")
            con.execute(
                "INSERT INTO meta VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [FORMAT, ledger_id, seq, head, head_segment, head_offset, end_offset, last_ts, _dump_workflow(projector.workflow)],
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    result.events, result.head, result.added = seq, head, added
    if problem is not None:
        result.problem, result.problem_seq = problem.message, problem.seq
    result.complete = problem is None and seq > 0
    result.seconds = time.perf_counter() - started
    return result


def _open(root: Path, pdir: Path):
    """Connect to the projection's database; a file DuckDB cannot open is deleted (it is derived
    data) and started afresh."""
    import duckdb

    db = pdir / DATABASE
    try:
        return _connect(db)
    except duckdb.Error:
        for name in (DATABASE, DATABASE + ".wal"):
            (pdir / name).unlink(missing_ok=True)
        return _connect(db)


@contextmanager
def opened(path: str | Path, *, create: bool = True, rebuild: bool = False) -> Iterator[tuple[Any, Refresh]]:
    """Refresh the projection of the ledger at `path` and yield `(connection, Refresh)`, the
    projection locked until the block ends (read the tables through the connection). `create`
    makes one when there is none (else ProjectionError); `rebuild` starts from the first line.
    Raises LedgerUnreadable when `path` is not a ledger, ProjectionError when the projection
    cannot be written."""
    root = Path(path)
    if not root.is_dir():
        raise LedgerUnreadable(f"{root}: no such ledger directory")
    if not list_segments(root):
        raise LedgerUnreadable(f"{root}: no ledger segments in this directory")
    if not create and not exists(root):
        raise ProjectionError(f"{root}: no projection")
    with _locked(root, create) as pdir:
        try:
            con = _open(root, pdir)
        except OSError as exc:
            raise ProjectionError(f"{pdir}: cannot open the projection ({exc})") from None
        try:
            result = _refresh_locked(root, pdir, con, rebuild)
            yield con, result
        finally:
            con.close()


def refresh(path: str | Path, *, create: bool = True, rebuild: bool = False) -> Refresh:
    """Bring the projection up to date with the log (see the module docstring); returns what was
    done. Arguments and errors as `opened`."""
    with opened(path, create=create, rebuild=rebuild) as (_, result):
        return result


def snapshot(con) -> dict[str, list[tuple]]:
    """Every table's rows in a fixed order (what a rebuild must reproduce)."""
    order = {"meta": "1", "events": "seq", "final_requests": "request", "open_requests": "request",
             "final_summary": "ALL", "final_seconds": "ALL"}
    out = {}
    for table in TABLES:
        rows = con.execute(f"SELECT * FROM {table} ORDER BY {order[table]}").fetchall()
        out[table] = rows
    return out


def check(path: str | Path) -> list[str]:
    """Rebuild the projection from the log alone in a temporary directory and compare it with
    the one in the ledger (refreshed first). Returns the tables that differ (empty: identical)."""
    import tempfile

    root = Path(path)
    with opened(root, create=False) as (con, _):
        mine = snapshot(con)
    with tempfile.TemporaryDirectory(dir=root / DIRECTORY) as scratch:
        pdir = Path(scratch)
        con = _connect(pdir / DATABASE)
        try:
            _refresh_locked(root, pdir, con, True)
            fresh = snapshot(con)
        finally:
            con.close()
    return [t for t in TABLES if mine[t] != fresh[t]]
