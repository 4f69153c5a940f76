"""A columnar projection of a ledger: derived, rebuildable, never authoritative.

    DIR/projection/
      LOCK                 held (flock, exclusive) while the projection is refreshed or read
      projection.duckdb    a DuckDB database: the tables and views below
      .chunk-*.jsonl       rows on their way into the database (removed at once; a crash may leave one,
                           which the next refresh removes)
      STATE                what the last complete refresh covered (up_to_date: no database opened)
      COMPACT              the database still holds replaced values in its free blocks (see _compact)

`refresh(DIR)` brings the projection up to date with the log: it reads only the complete lines
after the last line it covers (it remembers that line's segment, offset, line number, seq and
hash), checks each of them, folds them into the requests' states with ledger.workflow.Workflow,
and appends the new rows, all in one DuckDB transaction. Every view of ledger.analytics.schema
(`events`, `requests`, `pending`, ..., `coverage`) reads these tables; ledger.analytics.query
refreshes before each query, so the views are always as current as the log.

Tables (ledger.analytics.schema.TABLES):

- `meta` (one row): the format, the ledger id, `events` (lines covered = the last seq), `head`
  (the hash of the last line covered), where that line is (`head_segment`, `head_offset`,
  `end_offset`, `head_line`), the first and last ts, when the log was last read, the torn tail
  (bytes after the last line feed), and the open workflow state (msgpack).
- `segments`: one row per segment read: its inode, size, mtime and ctime as first seen by the
  refresh that last read it (before reading: a file changed while it was read counts as changed),
  its first position and lines. A segment that changed since (a redaction rewrites one) is read
  again: its lines must keep their hashes (only the data beside them may change) and a sealed
  segment must hold nothing after them, else the projection is rebuilt from the log alone. The
  head segment grows, so only its inode counts, and the ledger directory's ctime (`meta`): a
  redaction renames a file into the directory, which an append never does, and two renames can
  give a segment its first inode back (ext4 reuses a freed inode).
- `event_rows`: one row per line covered, every body member a typed column, the data beside it
  as JSON (the `events` view adds the constant and derived columns).
- `final_requests`: one row per request that is final (denied, rejected, responded, expired,
  cancelled, executed); never changes once written (but for its data, which is not here).
- `open_requests`: the same columns for every other request, its folded state (`state`, JSON)
  and what the fold keeps beside it (`aux`, JSON); a row is read (decoded) only when an event
  of a refresh names its request, and rewritten when an event touches it.
- `problems` (0 or 1 row): the first line that failed a check, which stopped the projection
  (verify's kind: format, chain, data or workflow).
- `review_counts`: per reviewer, the requests acted on and the approvals, rejections, edits and
  responses, added by each refresh (the view `rates_by_approver` sums them).
- `final_summary` and `final_seconds`: the final requests counted by (tool, effect, status,
  decision, edited, outcome) and their seconds to decision, kept as they are added, so that
  `stats` read a few hundred rows instead of every request.

What is checked for each line projected (schema.CHECKED): the line layout, that the body decodes
as an event in its canonical layout, `seq` is the previous one + 1, `prev` the previous hash,
the stored hash is SHA-256 of the body, ts and deadline are real UTC times in the ledger's
spelling and ts never goes backwards, the genesis first and only first, the data beside the
body (verify's own check, ledger.proof.data: arguments, context, kept results and pinned policy
texts against the digests in the body, markers only where a `redacted` event announces them,
canonical spelling; a `redacted` event's announcement against its target's data), and every
workflow rule. A line that fails stops the refresh there (`Refresh.problem`, the `problems`
table): what came before stays projected and `coverage.complete` is false. The data of a
segment read again (a redaction rewrote it) is checked again; data that fails makes the
projection rebuild, which stops at that line. Not checked (schema.NOT_CHECKED): signatures and
checkpoints; `ledger verify` checks those.

Before reading on, a refresh checks that the line it last covered is still there, byte for
byte the one whose hash it stored (`head`), and that every earlier segment is the file it read;
if not (the log was truncated, rewritten or replaced) the projection is dropped and rebuilt from
the log alone. Deleting DIR/projection/ and refreshing again gives the same tables.

duckdb is imported only inside the functions of this module.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Callable, Iterator

import msgspec

from ledger import events as ev
from ledger.analytics import schema
from ledger.clock import is_ts, parse_ts, utc_now
from ledger.fieldpath import FieldPathError, parse_field_path
from ledger.proof.data import check_data
from ledger.proof.report import Problem
from ledger.store import lines as ln, native
from ledger.store.log import LedgerUnreadable, list_segments, segment_name
from ledger.workflow.machine import RequestState, Standing, Violation, Workflow

FORMAT = schema.FORMAT
DIRECTORY = "projection"
DATABASE = "projection.duckdb"
LOCK = "LOCK"
STATE = "STATE"  # what the last refresh covered, for a check that needs no database (up_to_date)
COMPACT = "COMPACT"  # present from the commit that replaced or dropped rows until the file is copied afresh (_compact)
CHUNK_EVENTS = 20_000  # lines collected in memory before they go into the database (about 20 MB)
KEEP_ROW_GROUPS_FROM = 2_048  # a refresh adding this many lines leaves DuckDB's row groups as they are (see _commit)
TABLES = tuple(schema.TABLES)
MEMORY_LIMIT = "256MB"  # DuckDB's, for every connection to a projection
CHECKPOINT_THRESHOLD = "256KB"  # DuckDB's, for a refreshing connection (see _connect)
LONG_LINES_MEMORY_LIMIT = "1GB"  # while a chunk holding a line over 4 MiB goes in (a 16 MiB line needs about 200 MB)

Progress = Callable[[int, int], None]
"""progress(bytes read, bytes to read): called as a refresh reads the log."""

_decode = ev.decode_event
_encode = ev.encode_event


class ProjectionError(Exception):
    """The projection cannot be read or written (e.g. the ledger directory is read-only)."""


class Refresh(msgspec.Struct, kw_only=True):
    """What a refresh found. `events`: lines covered; `head`: the hash of the last one; `added`:
    lines projected by this refresh; `rebuilt`: the projection was (re)built from the first line
    (`reason` says why); `resynced`: segments read again because they changed (a redaction);
    `rewritten`: rows whose data the resync replaced (the database is then copied into a new
    file, so that no replaced value stays in the old one's free blocks);
    `complete`: every complete line of the ledger is covered (false when a line failed a check:
    `problem`, at `problem_seq`); `torn_bytes`: bytes after the last line feed; `seconds`: how
    long it took."""

    events: int = 0
    head: str = ev.GENESIS_PREV
    added: int = 0
    rebuilt: bool = False
    reason: str | None = None
    resynced: list[str] = []
    rewritten: int = 0
    complete: bool = False
    problem: str | None = None
    problem_seq: int | None = None
    torn_bytes: int = 0
    seconds: float = 0.0


def directory(path: str | Path) -> Path:
    return Path(path) / DIRECTORY


def exists(path: str | Path) -> bool:
    """Whether the ledger at `path` has a projection (it may be behind the log)."""
    return (directory(path) / DATABASE).is_file()


def remove(path: str | Path) -> None:
    """Delete the projection (it can always be rebuilt from the log)."""
    shutil.rmtree(directory(path), ignore_errors=True)


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
    """Workflow.requests for the projection: the states of the requests this refresh proposed or
    read; any other is looked up on demand among the rows already projected (`lookup`): an open
    one (its state decoded from `open_requests`, then kept here) or a final one (a
    _FinalRequest). A refresh so decodes only the open requests its events name, not every
    request still open (an allowed call whose execution is never recorded stays open for good)."""

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


_STATE_DECODER = msgspec.json.Decoder(RequestState)
# The kinds whose line carries data even when the body alone does not say so (ledger.proof.data):
# any other kind's data must be exactly null, which needs no decoding to see.
_DATA_KINDS = frozenset({"proposed", "edited", "policy"})
_DATA_BODIES = (b'{"kind":"proposed",', b'{"kind":"edited",', b'{"kind":"policy",')  # the same, by the body's first bytes
_MARKER = b'"$redacted"'  # in data: a marker may stand for a redacted value (ledger.digest.REDACTED)
_LINES = msgspec.json.Encoder()
# A chunk line holds a ledger line (at most MAX_LINE_BYTES) and a few numbers; a request row
# strings of at most two events: DuckDB's read_json refuses objects over maximum_object_size.
_MAX_ROW_BYTES = 2 * ln.MAX_LINE_BYTES + (1 << 20)
_STATE_FIELDS = {f.name for f in dataclass_fields(RequestState)}


def _quorum_dict(q) -> dict:
    return {"count": q.count, "approvers": list(q.approvers) if q.approvers is not None else None, "group": q.group}


def _requirements_dict(r) -> dict | None:
    """Requirements as the views type them (every member present, nested structs included)."""
    if r is None:
        return None
    out = msgspec.to_builtins(r)
    out["quorums"] = [_quorum_dict(q) for q in r.quorums]
    remember = out.get("remember")
    out["remember"] = None if remember is None else {"scope": remember.get("scope"), "seconds": remember.get("seconds")}
    for name in schema.BODY_SHAPE["requirements"]:
        out.setdefault(name, None)
    return out


# aux: what the fold keeps of a request beside its RequestState, for the columns the state lacks:
# [policy name, interrupted_at, execution_started_at, executor, last_event_at, reviewers who acted on it]
_POLICY, _INTERRUPTED, _STARTED, _EXECUTOR, _LAST, _ACTORS = range(6)
# rates_by_approver's counts, kept as the fold goes: kind → its slot in [requests, actions, approve,
# reject, edit, respond] (requests: those the reviewer acted on, each counted once)
_REVIEW_SLOT = {"approved": 2, "rejected": 3, "edited": 4, "responded": 5}


_REQUIREMENT_COLUMNS: dict[Any, tuple] = {}  # Requirements → (quorum, quorums, requirements) columns; few distinct


def _requirement_columns(r) -> tuple:
    if r is None:
        return None, None, None
    found = _REQUIREMENT_COLUMNS.get(r)
    if found is None:
        if len(_REQUIREMENT_COLUMNS) > 1024:
            _REQUIREMENT_COLUMNS.clear()
        found = _REQUIREMENT_COLUMNS[r] = (
            max(q.count for q in r.quorums) if r.quorums else None, [_quorum_dict(q) for q in r.quorums],
            _requirements_dict(r),
        )
    return found


def _request_row(state: RequestState, aux: list) -> dict:
    quorum, quorums, requirements = _requirement_columns(state.requirements)
    return {
        "request": state.request, "tool": state.tool, "run": state.run, "proposer": state.proposer,
        "call_id": state.call_id, "policy": aux[_POLICY], "policy_digest": state.policy_digest,
        "effect": state.effect, "rule": state.rules[0] if state.rules else None, "rules": list(state.rules),
        "reasons": list(state.reasons), "proposed_at": state.proposed_at, "proposed_at_text": state.proposed_at,
        "status": state.status, "decision": state.decision, "decided_at": state.decided_at,
        "decided_by": state.decided_by, "reason": state.reason, "approvers": list(state.approvers),
        "approved_by": list(state.approvals), "approvals": len(state.approvals),
        "quorum": quorum, "quorums": quorums, "requirements": requirements, "deadline": state.deadline, "deadline_text": state.deadline,
        "interrupted_at": aux[_INTERRUPTED], "edited": state.edits > 0, "edits": state.edits,
        "digest": state.digest, "original_digest": state.original_digest,
        "execution_started_at": aux[_STARTED], "executor": aux[_EXECUTOR], "executed_at": state.executed_at,
        "outcome": state.outcome, "result_digest": state.result_digest, "error": state.error,
        "events": len(state.seqs), "last_event_at": aux[_LAST],
    }


def _request_lines(rows: list[dict]) -> list[bytes]:
    """The JSON lines (each ending in a line feed) of request rows."""
    return [line + b"\n" for line in _LINES.encode_lines(rows).splitlines()] if rows else []


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
        if name in _DERIVED:
            continue
        if name == "standing":
            workflow.standing, workflow._standing_by = {}, {}
            for item in msgspec.convert(value, list[Standing]):
                workflow.add_standing(item)
            continue
        current = getattr(workflow, name, None)
        if isinstance(current, set):
            value = {_freeze(v) for v in value}
        elif isinstance(current, dict):  # values as the fold keeps them (Workflow.redacted appends to its lists)
            value = dict(value)
        elif isinstance(current, tuple):
            value = _freeze(value)
        elif isinstance(current, bytearray):
            value = bytearray(value)
        setattr(workflow, name, value)


# --- strings DuckDB's JSON reader refuses -------------------------------------------------------------

# A \uD800-\uDFFF escape that is not half of a pair: valid JSON (msgspec reads it) that DuckDB's
# reader refuses. Such a line is stored with U+FFFD in its place (the log keeps the bytes).
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [_mend(v) for v in value]
    if isinstance(value, dict):
        return {_mend(k): _mend(v) for k, v in value.items()}
    return value


def _mended_line(line: bytes) -> bytes:
    """A chunk line DuckDB could not read, made readable: lone surrogates replaced; data that is
    not JSON (or not UTF-8) replaced by null (verify reports it). The line is
    `{"position":...,"file_offset":N,` + a ledger line without its `{`."""
    place_end = line.index(b',"body":')
    place = json.loads(line[:place_end] + b"}")
    body, digest, data = ln.split(b"{" + line[place_end + 1 :].rstrip(b"\n"))
    try:
        data_value = json.loads(data)
    except ValueError:
        data_value = None
    value = {**place, "body": json.loads(body), "hash": digest, "data": data_value}
    return json.dumps(_mend(value), ensure_ascii=False, allow_nan=False).encode("utf-8", "replace")


# --- reading the log --------------------------------------------------------------------------------


class _WriterFailed(Exception):
    """The writer thread's insert failed (its error is the cause): never a problem of a line."""


class _Stop(Exception):
    """A line failed a check: the refresh stops before it. `kind` is verify's (format, chain,
    data, workflow), `code` chain_breaks' problem or the Violation's code."""

    def __init__(self, seq: int, message: str, kind: str = "format", code: str = "unparseable",
                 event_kind: str | None = None, request: int | None = None):
        super().__init__(message)
        self.seq, self.message, self.kind, self.code = seq, message, kind, code
        self.event_kind, self.request = event_kind, request
        self.segment_file: str | None = None
        self.line: int | None = None


_ACTOR_KINDS = frozenset({"approved", "rejected", "responded", "edited", "cancelled"})


# --- the data beside the bodies (check 6 of ledger.proof.verify) --------------------------------------


class _Line:
    """What ledger.proof.data.check_data reads of a line: its seq, its decoded body, its data bytes."""

    __slots__ = ("seq", "event", "data")

    def __init__(self, seq: int, event: ev.Event, data: bytes):
        self.seq, self.event, self.data = seq, event, data


def _data_problem(kind: str, message: str) -> Problem:
    return Problem(None, kind, message)


class _Redactions:
    """The ledger's redactions as verify reads them (ledger.proof.verify.Redactions.collect: the
    `redacted` lines of every segment, those after the lines projected included), collected at
    most once per refresh and only when a line needs them: data holding a marker or failing
    without them, a `redacted` event, a segment read again. `checked`: the targets whose
    announced paths were checked (their findings are in the collection)."""

    def __init__(self, root: Path):
        self.root = root
        self._found = None
        self.checked: set[int] = set()

    def get(self, fresh: bool = False):
        if self._found is None or fresh:
            from ledger.proof.verify import Redactions

            self._found, self.checked = Redactions.collect(self.root), set()
        return self._found


def _data_check(line: _Line, redactions: _Redactions) -> str | None:
    """What is wrong with the data beside `line`, worded as verify words it, or None. Checked
    first without redactions (most data holds no marker, and then the redactions change
    nothing but what their own events are blamed for); with the ledger's redactions when the data
    holds a marker or fails without them, as verify checks it."""
    found = check_data(line, _data_problem, None)
    if found is not None or _MARKER in line.data:
        collected = redactions.get()
        paths = collected.of(line.seq)
        if paths:
            found = check_data(line, _data_problem, paths, collected)
            redactions.checked.add(line.seq)
    return None if found is None else found.message


class _Projector:
    """One refresh, inside one DuckDB transaction on `con`."""

    def __init__(self, con, root: Path, chunk_dir: Path, progress: Progress | None = None):
        self.con, self.root, self.chunk_dir, self.progress = con, root, chunk_dir, progress
        self.lines: list[bytes] = []  # chunk lines of event_rows, waiting for the writer or the next flush
        self._writer: threading.Thread | None = None  # inserting a block handed off (hand_off)
        self._writer_done = threading.Event()  # set by the writer when it ends
        self._writer_error: BaseException | None = None
        self.inserted_through = 0  # the last position handed off
        compiled = native.module()
        self.compose = compiled.chunk_lines if compiled is not None else None  # None: rows composed by the fold
        self.check_lines = compiled.check_lines if compiled is not None else None
        self.finals: list[dict] = []
        self.recent_finals: dict[int, str] = {}  # request → status, final in this refresh and not yet written
        self.aux: dict[int, list] = {}  # request → aux, for the open requests
        self.touched: set[int] = set()  # open requests changed by this refresh
        self.closed: set[int] = set()  # requests that were open at the start and are final now
        self.seen: dict[str, list[int]] = {}  # segment name → [first position, lines] read by this refresh
        self.flushes = 0
        self.reviews: dict[str, list[int]] = {}  # reviewer → counts added by this refresh (_REVIEW_SLOT)
        self.observed: dict[str, tuple[int, int, int, int]] = {}  # segment name → its stat when first opened
        self.redactions = _Redactions(root)
        self.workflow = Workflow()
        self.workflow.requests = _Requests(self._lookup)
        self.workflow.by_call_id = _Discard()

    def _lookup(self, request: Any) -> RequestState | _FinalRequest | None:
        """A request not in memory, from the rows already projected: a final one as a
        _FinalRequest; an open one decoded from `open_requests` and kept in memory (with its aux,
        and in Workflow.pending or .interrupting, as Workflow.get keeps what an archive gives),
        so that the fold changes that state; None when it was never proposed. A request that
        became final in this refresh is in final_requests (or recent_finals) and still in
        open_requests until write_open: the final row wins."""
        if not isinstance(request, int):
            return None
        status = self.recent_finals.get(request)
        if status is not None:
            return _FinalRequest(request, status)
        self.settle()
        try:
            row = self.con.execute(
                "SELECT status, state, aux FROM (SELECT 0 AS o, status, NULL AS state, NULL AS aux FROM final_requests "
                "WHERE request = $1 UNION ALL SELECT 1, NULL, state, aux FROM open_requests WHERE request = $1) ORDER BY o LIMIT 1",
                [request]).fetchone()
        except Exception as exc:  # raised inside Workflow.check: the database's failure, never a violation
            raise _WriterFailed(f"reading the projected requests failed: {exc}") from exc
        if row is None:
            return None
        if row[1] is None:
            return _FinalRequest(request, row[0])
        state = _STATE_DECODER.decode(row[1])
        dict.__setitem__(self.workflow.requests, request, state)
        self.aux[request] = json.loads(row[2])
        if state.status == "pending":
            self.workflow.add_pending(state)
        elif state.status == "interrupting":
            self.workflow.interrupting[request] = state
        return state

    def load(self, meta: dict | None) -> None:
        """The fold's state as the last refresh left it (meta's workflow). The open requests stay
        in `open_requests` until an event names one (_lookup): nothing in Workflow.check or
        apply reads a request that no event names (the pending and interrupting maps, which only
        the Gate's queue reads, are kept for the requests in memory; a standing decision's `open`
        set holds request numbers, in meta)."""
        if meta is None:
            return
        _load_workflow(self.workflow, meta["workflow"])
        self.workflow.by_call_id = _Discard()
        self.workflow.seen_genesis = meta["events"] > 0

    def run(self, seq: int, head: str, segment: int, head_offset: int, offset: int, line_no: int, last_ts: str,
            ledger_id: str | None):
        """Fold the complete lines after (segment, offset), the last line covered being at
        `head_offset` of `segment` (line `line_no`). Returns (seq, head, head segment,
        head offset, end offset, head line, last ts text, ledger id, problem, torn) where torn is
        (segment name, offset, bytes) of the bytes after the last line feed, or None. Every row
        is inserted when it returns; when it raises, the writer thread has stopped too."""
        try:
            return self._fold(seq, head, segment, head_offset, offset, line_no, last_ts, ledger_id)
        except _WriterFailed as failed:
            raise failed.__cause__ from None
        finally:
            self.settle(raise_error=False)  # after a return, flush has settled it already

    def hand_off(self, block: bytes, flags: bytes, first_position: int, name: str, first_line: int,
                 first_offset: int) -> None:
        """Insert the event_rows of the whole lines of `block` (bytes of segment `name` from
        `first_offset`, its first line numbered `first_line`, assumed at `first_position`) that
        the compiled module checked (`flags`, ledger._native.check_lines) on the writer thread,
        while the fold checks the same lines: the module composes the rows (chunk_lines) and
        DuckDB parses and inserts them, both without the GIL, and the connection has one DuckDB
        thread (_connect), so that the two share two cores without slowing each other. Only
        checked lines get a row here (the fold composes the rows of the others it takes), so
        every row is a canonical line whose members cannot shadow its place; the rows of lines
        after the fold's first problem are deleted (`trim`). Until `settle`, nothing else may
        use the connection."""
        self.settle()
        self.inserted_through = first_position + len(flags) - 1
        compose, done = self.compose, threading.Event()

        def insert() -> None:
            try:
                rows, longest = compose(block, flags, first_position, name, first_line, first_offset)
                self._insert_event_lines(rows, longest)
            except BaseException as exc:  # re-raised on the fold's thread by settle
                self._writer_error = exc
            finally:
                done.set()

        self._writer = threading.Thread(target=insert, name="countersign-projection-writer", daemon=True)
        self._writer_done = done
        self._writer.start()

    def trim(self, seq: int) -> None:
        """Delete the rows handed off for lines after `seq`, the last line the fold took."""
        self.settle()
        if self.inserted_through > seq:
            self.con.execute("DELETE FROM event_rows WHERE position > ?", [seq])
            self.inserted_through = seq

    def settle(self, raise_error: bool = True) -> None:
        """Wait for the rows handed off to be inserted; raise _WriterFailed from what the insert
        raised. A Ctrl-C while it waits is raised only once the writer has stopped: the
        connection is in use until then (and Thread.join interrupted by one may take a running
        thread for stopped: CPython bpo-45274), so it waits on an Event instead."""
        writer = self._writer
        if writer is None:
            return
        interrupted = None
        while True:
            try:
                if self._writer_done.wait(0.05):
                    break
            except KeyboardInterrupt as exc:
                interrupted = exc
        writer.join()
        self._writer = None
        error, self._writer_error = self._writer_error, None
        if interrupted is not None:
            raise interrupted
        if error is not None and raise_error:
            raise _WriterFailed(f"inserting the rows of the lines read failed: {error}") from error

    def _fold(self, seq: int, head: str, segment: int, head_offset: int, offset: int, line_no: int, last_ts: str,
              ledger_id: str | None):
        segments = list_segments(self.root)
        names = [p.name for p in segments]
        if not names:
            raise LedgerUnreadable(f"{self.root}: no ledger segments in this directory")
        expected_names = [segment_name(i + 1) for i in range(len(names))]
        problem: _Stop | None = None
        torn = None
        # the first segment number that is missing: the segments before it are folded, as far as they go
        gap = next((i + 1 for i, (name, want) in enumerate(zip(names, expected_names)) if name != want), None)
        head_segment, end_offset, head_line = segment, offset, line_no
        workflow = self.workflow
        requests = workflow.requests
        check, apply = workflow.check, workflow.apply
        sha256 = hashlib.sha256
        split = ln.split
        check_lines = self.check_lines
        composed = self.compose is not None  # the writer thread inserts each block's rows (hand_off)
        prefix, hash_mark, data_mark, suffix = ln.PREFIX, ln.HASH_MARK, ln.DATA_MARK, ln.SUFFIX
        assert len(prefix) == 8 and len(hash_mark) == 9 and len(data_mark) == 9
        chunk, finals, recent, auxes, touched = self.lines, self.finals, self.recent_finals, self.aux, self.touched
        seen = self.seen
        reviews = self.reviews
        ts_ok: dict[str, bool] = {}
        since_flush = 0  # lines folded since the last flush
        number = segment if segment > 0 else 1
        pos = offset
        total = sum(p.stat().st_size for p in segments if p.name >= segment_name(number)) - pos if self.progress else 0
        done = 0
        while problem is None:
            if gap is not None and number >= gap:
                problem = _Stop(seq + 1, f"{segment_name(gap)} is missing (the segment numbers have a gap)", "format",
                                "segment-missing")
                break
            name = segment_name(number)
            path = self.root / name
            following = (self.root / segment_name(number + 1)).exists()  # before reading to the end
            tail = 0  # bytes after the segment's last line feed
            line = line_no if number == segment else 0
            try:
                handle = open(path, "rb")
            except FileNotFoundError:
                if number == 1 and seq == 0:
                    raise LedgerUnreadable(f"{self.root}: no ledger segments in this directory") from None
                problem = _Stop(seq + 1, f"{name} disappeared while it was read", "format", "segment-missing")
                break
            self.observed.setdefault(name, _fstat(handle))  # what is read is this file, not what the name holds later
            try:
                with handle:
                    handle.seek(pos)
                    # Whole lines, a block at a time (bounded memory: no line is over the limit).
                    for data, base, tail in _blocks(handle, pos):
                        if data is None:  # a line over the limit, which a line feed ends
                            raise _Stop(seq + 1, f"{ln.too_long(tail)} (at byte {base} of {name})")
                        end = len(data)
                        start = 0
                        # the checks of each line that need no earlier line, in C on two threads: a
                        # line it passes skips them here (one it is unsure of is checked here in full)
                        flags = check_lines(data) if check_lines is not None else b""
                        if composed and data:
                            self.hand_off(data, flags, seq + 1, name, line + 1, base)
                        index = 0
                        first_of_block = seq + 1
                        try:
                            while start < end:
                                nl = data.index(b"\n", start)
                                text = data[start:nl]
                                expected = seq + 1
                                line += 1
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
                                checked = flags[index] if flags else 0
                                index += 1
                                try:
                                    event = _decode(body)
                                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                                    raise _Stop(expected, f"the body is not a valid event: {exc}") from None
                                if event.seq != expected:
                                    raise _Stop(expected, f"seq is {event.seq}, expected {expected} (a gap, a duplicate or a reordering)",
                                                "chain", "seq-gap")
                                if event.prev != head:
                                    raise _Stop(expected, "prev is not the previous event's hash (an event was removed, inserted or "
                                                "changed before it)", "chain", "prev-mismatch")
                                if not checked and sha256(body).hexdigest() != digest:
                                    raise _Stop(expected, "the hash does not match the body: the event was changed after it was written",
                                                "chain", "hash-mismatch")
                                if not checked and _encode(event) != body:
                                    raise _Stop(expected, "the body is not in its one canonical layout (member order, spacing or a "
                                                "repeated member)", "format", "not-canonical")
                                ts = event.ts
                                for label, value in () if checked else (("ts", ts), ("deadline", getattr(event, "deadline", None))):
                                    if value is not None:
                                        good = ts_ok.get(value)
                                        if good is None:
                                            good = ts_ok[value] = is_ts(value)
                                            if len(ts_ok) > 4096:
                                                ts_ok.clear()
                                        if not good:
                                            raise _Stop(expected, f"{label} {value!r} is not a UTC time YYYY-MM-DDTHH:MM:SS.ffffffZ",
                                                        "format", "bad-ts")
                                if ts < last_ts:
                                    raise _Stop(expected, f"ts {ts} is earlier than the previous event's ({last_ts}): time went backwards",
                                                "chain", "ts-backwards")
                                kind = event.__struct_config__.tag
                                if (expected == 1) != (kind == "genesis"):
                                    raise _Stop(expected, "the first event, and only the first, is the genesis", "format",
                                                "genesis-misplaced")
                                if expected == 1:
                                    ledger_id = event.ledger_id
                                if checked:  # data C checked needs the redactions only when it holds a marker
                                    if text.find(_MARKER, cut + 82) >= 0:
                                        wrong = _data_check(_Line(expected, event, text[cut + 82 : -1]), self.redactions)
                                        if wrong is not None:
                                            raise _Stop(expected, wrong, "data", "bad-data")
                                else:
                                    beside = text[cut + 82 : -1]  # the data beside the body
                                    if beside != b"null" or kind in _DATA_KINDS:  # any other kind's null data is right
                                        wrong = _data_check(_Line(expected, event, beside), self.redactions)
                                        if wrong is not None:
                                            raise _Stop(expected, wrong, "data", "bad-data")
                                request = getattr(event, "request", None)
                                try:
                                    check(event)
                                    if kind == "redacted":  # verify blames a redaction's announcement after its rules
                                        self._check_announcement(expected, event)
                                    apply(expected, event)
                                except (_Stop, _WriterFailed):
                                    raise
                                except Violation as exc:
                                    raise _Stop(expected, exc.message, "workflow", exc.code, kind,
                                                exc.request if isinstance(exc.request, int) else request) from None
                                except Exception as exc:  # anything the fold cannot take is not projected
                                    raise _Stop(expected, f"{type(exc).__name__}: {exc}", "workflow", "unfoldable", kind,
                                                request if isinstance(request, int) else None) from None
                                if kind == "proposed":
                                    request = expected
                                    aux = auxes[expected] = [event.policy, None, None, None, ts, []]
                                elif isinstance(request, int):
                                    aux = auxes.get(request)
                                    if aux is not None:
                                        aux[_LAST] = ts
                                        if kind == "interrupted":
                                            aux[_INTERRUPTED] = ts
                                        elif kind == "execution_started":
                                            aux[_STARTED], aux[_EXECUTOR] = ts, event.executor
                                        elif kind in _REVIEW_SLOT:
                                            actor = event.editor if kind == "edited" else event.approver
                                            counts = reviews.get(actor)
                                            if counts is None:
                                                counts = reviews[actor] = [0, 0, 0, 0, 0, 0]
                                            counts[1] += 1
                                            counts[_REVIEW_SLOT[kind]] += 1
                                            if actor not in aux[_ACTORS]:
                                                aux[_ACTORS].append(actor)
                                                counts[0] += 1
                                else:
                                    request = None
                                if request is not None:
                                    state = dict.get(requests, request)
                                    if state is not None:
                                        if state.final:
                                            finals.append(_request_row(state, auxes.pop(request)))
                                            recent[request] = state.status
                                            dict.__delitem__(requests, request)
                                            touched.discard(request)
                                            self.closed.add(request)
                                        else:
                                            touched.add(request)
                                if not checked or not composed:  # the writer composed the others' (hand_off)
                                    beside = text[cut + 82 : -1]
                                    fingerprint = b"null" if beside == b"null" else b'"%s"' % sha256(beside).hexdigest()[:32].encode()
                                    chunk.append(b'{"position":%d,"segment_file":"%s","line":%d,"file_offset":%d,"data_sha256":%s,%s\n'
                                                 % (expected, name.encode(), line, base + start, fingerprint, text[1:]))
                                seq, head, last_ts = expected, digest, ts
                                head_segment, head_offset, end_offset, head_line = number, base + start, base + nl + 1, line
                                start = nl + 1
                                since_flush += 1
                                if since_flush >= CHUNK_EVENTS:
                                    self.flush()
                                    since_flush = 0
                        finally:  # the lines of this block folded (before a problem, if one stopped it)
                            if seq >= first_of_block:
                                counted = seen.get(name)
                                if counted is None:
                                    seen[name] = [first_of_block, seq - first_of_block + 1]
                                else:
                                    counted[1] += seq - first_of_block + 1
                        if self.progress is not None:
                            done += len(data)
                            self.progress(done, total)
            except _Stop as stop:
                stop.segment_file, stop.line = name, line
                problem = stop
                break
            if not following and not (gap is not None and number + 1 == gap):
                if tail:
                    torn = (name, path.stat().st_size - tail, tail)
                break
            if tail:
                problem = _Stop(seq + 1, f"{name} ends without a line feed but is not the last segment", "format",
                                "unterminated")
                problem.segment_file, problem.line = name, line + 1
                break
            number, pos = number + 1, 0
        self.flush()
        self.trim(seq)
        return seq, head, head_segment, head_offset, end_offset, head_line, last_ts, ledger_id, problem, torn

    def _check_announcement(self, seq: int, event: ev.Redacted) -> None:
        """Raise _Stop when what the `redacted` event at `seq` announces does not hold: its
        target's data has no such field, or holds there neither the value of the digest announced
        nor its marker (verify's Redactions.announcement_problem, found by checking the target's
        data with every redaction the ledger announces for it)."""
        try:
            parts = parse_field_path(event.path)
        except FieldPathError:
            return
        target = event.target
        collected = self.redactions.get()
        if parts not in (collected.of(target) or {}):  # written after the redactions were collected
            collected = self.redactions.get(fresh=True)
        if target not in self.redactions.checked:
            line = self._line_at(seq, target)
            wrong = check_data(line, _data_problem, collected.of(target), collected)
            if wrong is not None:  # projected with other data: the segment changed since (it is read again next time)
                raise _Stop(seq, f"the data of seq {target}, which the redaction names, changed after it was projected: "
                            f"{wrong.message}", "data", "bad-redaction")
            self.redactions.checked.add(target)
        message = collected.findings.get((target, parts))
        if message is not None:
            raise _Stop(seq, message, "data", "bad-redaction")

    def _line_at(self, seq: int, position: int) -> _Line:
        """The line projected at `position` (a redaction's target, before `seq`), with its data
        as the log holds it now: read again where event_rows says it is (after a flush). Raises
        _Stop when it is no longer there (the segment changed while it was read; the next
        refresh reads it again), _WriterFailed when the database fails."""
        try:
            self.flush()  # every line folded so far is in event_rows once it returns
            row = self.con.execute("SELECT segment_file, file_offset, hash FROM event_rows WHERE position = ?",
                                   [position]).fetchone()
        except _WriterFailed:
            raise
        except Exception as exc:  # the database's failure, not the line's: never a problem of the ledger
            raise _WriterFailed(f"reading event_rows failed: {exc}") from exc
        try:
            with open(self.root / row[0], "rb") as handle:
                handle.seek(row[1])
                body, digest, data = ln.split(handle.readline(ln.MAX_LINE_BYTES + 1).rstrip(b"\n"))
            if digest == row[2] and hashlib.sha256(body).hexdigest() == digest:
                return _Line(position, _decode(body), data)
        except (OSError, TypeError, ln.LineError, msgspec.ValidationError, msgspec.DecodeError):
            pass
        raise _Stop(seq, f"seq {position}, which the redaction names, is no longer where it was projected (its segment "
                    "changed while it was read)", "data", "bad-redaction")

    def _insert_lines(self, table: str, select: Callable[[str], str], columns: str, lines: list[bytes] | bytes, key: str,
                      mend: Callable[[bytes], bytes], longest: int | None = None) -> None:
        """Insert JSON lines (a list, or one bytes object of lines whose longest is `longest`
        bytes) through read_json into `table`: a line DuckDB's reader refuses (a lone surrogate,
        data that is not JSON) is mended and inserted on its own."""
        if not lines:
            return
        chunk = self.chunk_dir / f".chunk-{os.getpid()}-{table}.jsonl"
        # DuckDB's reader sizes its buffers by maximum_object_size: the longest line here, not the most allowed
        longest = (max(map(len, lines)) if longest is None else longest) + 1024
        source = (f"read_json('{_sql_path(chunk)}', format = 'newline_delimited', columns = {columns}, "
                  f"maximum_object_size = {min(longest, _MAX_ROW_BYTES)}, ignore_errors = true)")
        raised = longest > (4 << 20)
        try:
            if raised:
                self.con.execute(f"SET memory_limit = '{LONG_LINES_MEMORY_LIMIT}'")
            with open(chunk, "wb") as handle:
                handle.write(lines) if isinstance(lines, bytes) else handle.writelines(lines)
            self.con.execute(f"INSERT INTO {table} {select(source)}")
            # a line the reader refused is a row of NULLs (ignore_errors): mend those lines
            refused = self.con.execute(f"DELETE FROM {table} WHERE {key} IS NULL").fetchone()[0]
            if refused:
                if isinstance(lines, bytes):  # rows end at a line feed only (a raw \r is JSON's whitespace)
                    lines = [row + b"\n" for row in lines.split(b"\n")[:-1]]
                # the keys of these lines (a final request's may be in any order): those not in the table were refused
                keys = [json.loads(line[: line.index(b",")] + b"}")[key] for line in lines]
                present = {r[0] for r in self.con.execute(
                    f"SELECT {key} FROM {table} WHERE {key} IN (SELECT unnest(?::BIGINT[]))", [keys]).fetchall()}
                missing = [line for line, k in zip(lines, keys) if k not in present]
                with open(chunk, "wb") as handle:
                    handle.writelines(mend(line) + b"\n" for line in missing)
                strict = source.replace(", ignore_errors = true", "")
                self.con.execute(f"INSERT INTO {table} {select(strict)}")
        finally:
            chunk.unlink(missing_ok=True)
            if raised:
                self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")

    def _insert_requests(self, table: str, rows: list[dict] | list[bytes], extra: dict[str, str] | None = None) -> None:
        """Insert request rows (dicts, or their JSON lines from _request_lines) into `table`."""
        lines = rows if rows and isinstance(rows[0], bytes) else _request_lines(rows)
        extra = extra or {}
        self._insert_lines(
            table, lambda source: schema.request_rows_select(source, tuple(extra)),
            schema.request_json_columns(extra), lines, "request",
            lambda line: _LINES.encode(_mend(json.loads(line))),
        )

    def _insert_event_lines(self, lines: list[bytes] | bytes, longest: int | None = None) -> None:
        self._insert_lines("event_rows", schema.event_rows_select, schema.chunk_columns(), lines, "position", _mended_line,
                           longest)

    def flush(self) -> None:
        """Insert every row collected so far (waiting for the writer thread first: what needs no
        connection is done before, while it may still run)."""
        final_lines = _request_lines(self.finals)
        stats = self._final_stats(self.finals)
        self.settle()
        self._insert_event_lines(self.lines)
        self.lines.clear()
        if self.finals:
            self._insert_requests("final_requests", final_lines)
            seconds, columns, counts = stats
            if seconds:
                self.con.execute("INSERT INTO final_seconds SELECT unnest(?::DOUBLE[])", [seconds])
            unnests = ", ".join(f"unnest(?::{schema.REQUEST_COLUMNS[key]}[])" for key in schema.SUMMARY_KEYS)
            self.con.execute(f"INSERT INTO final_summary SELECT {unnests}, unnest(?::BIGINT[])", [*columns, counts])
            self.flushes += 1
        self.finals.clear()
        self.recent_finals.clear()

    @staticmethod
    def _final_stats(rows: list[dict]) -> tuple[list[float], list[list], list[int]]:
        """What stats read of these final requests: the seconds to decision of the decided asks
        (whole microseconds from proposed_at to decided_at, over 1e6: epoch_us in DuckDB), and the counts
        by schema.SUMMARY_KEYS as columns of keys and a list of counts (stats sum them: a key may
        have a row per flush; `compact_summary` merges them). Computed from the rows, with
        DuckDB's spelling of a lone surrogate (_mend), instead of read back from the table."""
        microsecond = timedelta(microseconds=1)
        seconds = [((parse_ts(row["decided_at"]) - parse_ts(row["proposed_at"])) // microsecond) / 1e6
                   for row in rows if row["effect"] == "ask" and row["decision"] is not None]
        counts = Counter(tuple(row[key] for key in schema.SUMMARY_KEYS) for row in rows)
        keys = [tuple(_mend(value) for value in key) for key in counts]
        return seconds, [list(column) for column in zip(*keys)], list(counts.values())

    def write_reviews(self) -> None:
        """Add this refresh's counts per reviewer to `review_counts` (the view sums the rows)."""
        if self.reviews:
            self.con.executemany("INSERT INTO review_counts VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 [[actor, *counts] for actor, counts in self.reviews.items()])

    def write_open(self, everything: bool) -> None:
        """Rewrite the rows of open_requests that changed: those touched by this refresh and
        those that became final (all of them when `everything`)."""
        if everything:
            self.con.execute("DELETE FROM open_requests")
            changed = list(dict.keys(self.workflow.requests))
        else:
            gone = sorted(self.touched | self.closed)
            if gone:
                self.con.execute("CREATE OR REPLACE TEMP TABLE _gone AS SELECT unnest(?::BIGINT[]) AS request", [gone])
                self.con.execute("DELETE FROM open_requests WHERE request IN (SELECT request FROM _gone)")
                self.con.execute("DROP TABLE _gone")
            changed = sorted(self.touched)
        rows = []
        for request in changed:
            state = dict.get(self.workflow.requests, request)
            if state is None:
                continue
            aux = self.aux[request]
            row = _request_row(state, aux)
            row["state"] = msgspec.json.encode(state).decode()
            row["aux"] = json.dumps(aux)
            rows.append(row)
        self._insert_requests("open_requests", rows, {"state": "VARCHAR", "aux": "VARCHAR"})


def _sql_path(path: Path) -> str:
    """`path` as a DuckDB string literal, absolute (a relative `md:x/...` names a MotherDuck
    database to DuckDB, which then installs an extension from the network)."""
    return os.path.abspath(path).replace("'", "''")


# --- refreshing -------------------------------------------------------------------------------------


@contextmanager
def _locked(pdir: Path, create: bool) -> Iterator[Path]:
    if create:
        try:
            pdir.mkdir(parents=True, exist_ok=True)
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


def _connect(db: Path, read_only: bool = False):
    import duckdb

    con = duckdb.connect(os.path.abspath(db), read_only=read_only)  # absolute: see _sql_path
    con.execute("SET TimeZone = 'UTC'")
    if not read_only:
        # bounded: a refresh inserts a chunk at a time (DuckDB spills what does not fit); a query
        # keeps DuckDB's default (80 % of the machine's memory): an export may need more
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        # A refresh's commit writes its rows into the database file at once instead of into the
        # write-ahead log first and the file again when the connection closes (DuckDB checkpoints a
        # commit that would take the log past this threshold): one write instead of two, and
        # readers that open the file next find no log to replay.
        con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
        # One DuckDB thread while the fold runs beside the writer thread (_Projector.hand_off): on
        # two cores two DuckDB threads and the fold slow each other down, and one thread parses a
        # chunk of a few thousand lines faster than two. `opened` resets it before a query.
        con.execute("SET threads = 1")
    return con


def _commit(con, added: int) -> None:
    """Commit a refresh that added `added` lines. DuckDB's checkpoint (the commit writes the rows
    into the file: _connect) also merges the last row groups when they fit in fewer, rewriting
    every row of them: after a few refreshes of 10,000 lines it rewrote 80,000 rows of every column,
    and a commit took 40 to 300 ms instead of 40. A refresh that adds at least
    KEEP_ROW_GROUPS_FROM lines leaves the row groups as they are (its own form one of that many
    rows or more); smaller refreshes let DuckDB merge, so tiny row groups do not pile up."""
    keep = added >= KEEP_ROW_GROUPS_FROM
    if keep:
        con.execute("SET max_vacuum_tasks = 0")
    con.execute("COMMIT")
    if keep:
        con.execute("RESET max_vacuum_tasks")


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


def _head_still_there(con, root: Path, meta: dict) -> str | None:
    """None when the line the projection last covered is still in the log, unchanged (its body,
    and the data beside it, which the hash does not cover: a forged head line's data would
    otherwise go unseen, nothing after it moving); else why not."""
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
        body, digest, data = ln.split(text[:-1])
    except ln.LineError:
        return "the last line projected is no longer a ledger line"
    if digest != meta["head"] or hashlib.sha256(body).hexdigest() != digest:
        return f"head hash mismatch: the log no longer holds the line with hash {meta['head']} where it was projected"
    fingerprint = None if data == b"null" else hashlib.sha256(data).hexdigest()[:32]
    row = con.execute("SELECT data_sha256 FROM event_rows WHERE position = ?", [meta["events"]]).fetchone()
    if len(text) != meta["end_offset"] - meta["head_offset"] or row is None or row[0] != fingerprint:
        return "the data beside the last line projected changed after it was projected"
    try:
        if _decode(body).seq != meta["events"]:
            return "the last line projected has another seq"
    except (msgspec.ValidationError, msgspec.DecodeError):
        return "the last line projected is no longer an event"
    return None


def _stat(path: Path) -> tuple[int, int, int, int] | None:
    """(inode, size, mtime ns, ctime ns) of `path`, or None. The ctime, unlike the mtime, cannot
    be set back (os.utime sets it to now)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _fstat(handle) -> tuple[int, int, int, int]:
    st = os.fstat(handle.fileno())
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _directory_ctime(root: Path) -> int | None:
    """The ctime (ns) of the ledger directory: it changes when a file is created, renamed or
    removed in it (a redaction's rename, a new segment), never on an append."""
    try:
        return root.stat().st_ctime_ns
    except OSError:
        return None


def _changed_segments(con, root: Path, meta: dict, directory_ctime: int | None) -> list[tuple[int, str]]:
    """The covered segments that are not the files the projection read: (number, name). A sealed
    segment must have the inode, size, mtime and ctime recorded; the head segment (which may grow)
    its inode, in a directory whose ctime is the one recorded (else it is read again: a file
    was renamed into the directory), and, when it has not grown, its mtime and ctime too."""
    changed = []
    for number, name, inode, size, mtime, ctime in con.execute(
        "SELECT segment, segment_file, inode, size, mtime_ns, ctime_ns FROM segments ORDER BY segment"
    ).fetchall():
        now = _stat(root / name)
        if number == meta["head_segment"]:
            if now is None or now[0] != inode or directory_ctime is None or directory_ctime != meta["directory_ctime_ns"]:
                changed.append((number, name))
            elif now[1] == size == meta["end_offset"] and now[2:] != (mtime, ctime):
                changed.append((number, name))  # not grown but written: changed in place (an append is told from
                # an edit only when nothing was appended since)
        elif now != (inode, size, mtime, ctime):
            changed.append((number, name))
    return changed


def _resync(con, root: Path, pdir: Path, number: int, name: str, meta: dict, observed: dict,
            redactions: _Redactions) -> str | None:
    """Read a covered segment that changed again: each of its lines must be the line projected at
    its position (the same stored hash, the body's SHA-256), only the data beside it may differ
    (a redaction replaced a value by its marker), and that data must pass verify's check with the
    ledger's redactions (_data_check); the data and offsets are updated. Returns why
    the projection must be rebuilt instead (a rebuild stops at a line whose data fails), or None. A sealed segment must hold nothing after
    the lines projected from it; the head segment's further lines are read by the refresh. The
    segment's stat is taken before it is read (into `observed`)."""
    rows = con.execute("SELECT position, hash FROM event_rows WHERE segment_file = ? ORDER BY position", [name]).fetchall()
    try:
        with open(root / name, "rb") as handle:
            observed.setdefault(name, _fstat(handle))
            raw = handle.read()
    except OSError as exc:
        return f"{name} cannot be read ({exc.strerror})"
    updates: list[bytes] = []
    places: dict[int, tuple[int, int]] = {}  # position → (offset, line feed) in `raw`
    offset, head_offset, end_offset = 0, None, None
    for i, (position, stored) in enumerate(rows):
        nl = raw.find(b"\n", offset)
        if nl < 0:
            return f"{name} has fewer lines than were projected from it"
        text = raw[offset:nl]
        try:
            body, digest, data = ln.split(text)
        except ln.LineError:
            return f"line {i + 1} of {name} is no longer a ledger line"
        if digest != stored or hashlib.sha256(body).hexdigest() != digest:
            return f"line {i + 1} of {name} is not the line projected at seq {position}"
        fingerprint = b"null" if data == b"null" else b'"%s"' % hashlib.sha256(data).hexdigest()[:32].encode()
        updates.append(b'{"position":%d,"file_offset":%d,"data_sha256":%s,"data":%s}\n' % (position, offset, fingerprint, data))
        places[position] = (offset, nl)
        if position == meta["events"]:
            head_offset, end_offset = offset, nl + 1
        offset = nl + 1
    if number != meta["head_segment"] and offset != len(raw):
        return f"{name} holds more than the lines projected from it"
    chunk = pdir / f".chunk-{os.getpid()}-resync.jsonl"
    try:
        with open(chunk, "wb") as handle:
            handle.writelines(updates)
        source = (f"read_json('{_sql_path(chunk)}', format = 'newline_delimited', columns = "
                  f"{{'position': 'BIGINT', 'file_offset': 'BIGINT', 'data_sha256': 'VARCHAR', 'data': 'JSON'}}, "
                  f"maximum_object_size = {_MAX_ROW_BYTES}, ignore_errors = true)")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _resync AS SELECT * FROM {source}")
        # the data whose bytes changed (a redaction's markers, or a forgery) must pass verify's check;
        # a line the reader refused (a row of NULLs) counts as changed
        for (position,) in con.execute(
            "SELECT e.position FROM event_rows e LEFT JOIN _resync r ON e.position = r.position WHERE e.segment_file = ? "
            "AND (r.position IS NULL OR e.data_sha256 IS DISTINCT FROM r.data_sha256) ORDER BY 1", [name]).fetchall():
            start, nl = places[position]
            body, _, data = ln.split(raw[start:nl])
            try:
                wrong = _data_check(_Line(position, _decode(body), data), redactions)
            except (msgspec.ValidationError, msgspec.DecodeError):
                wrong = "the body no longer decodes"
            if wrong is not None:
                return f"the data beside seq {position} in {name} fails its check: {wrong}"
        meta["_rewritten"] = meta.get("_rewritten", 0) + con.execute(
            "SELECT count(*) FROM _resync r JOIN event_rows e ON e.position = r.position WHERE e.data::VARCHAR IS DISTINCT FROM "
            "(CASE WHEN json_type(r.data) = 'NULL' THEN NULL ELSE r.data END)::VARCHAR").fetchone()[0]
        con.execute("UPDATE event_rows SET file_offset = r.file_offset, data_sha256 = r.data_sha256, "
                    "data = CASE WHEN json_type(r.data) = 'NULL' THEN NULL ELSE r.data END "
                    "FROM _resync r WHERE event_rows.position = r.position AND r.position IS NOT NULL")
        con.execute("DROP TABLE _resync")
    finally:
        chunk.unlink(missing_ok=True)
    if head_offset is not None:
        meta["head_offset"], meta["end_offset"] = head_offset, end_offset
    con.execute("UPDATE segments SET inode = ?, size = ?, mtime_ns = ?, ctime_ns = ? WHERE segment = ?",
                [*observed[name], number])
    return None


def _create(con) -> None:
    """Drop whatever an earlier projection left (views and tables of any format: `events` and
    `requests` were tables in format 2) and create this format's tables and views."""
    views = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchall()]
    for view in views:
        con.execute(f'DROP VIEW IF EXISTS "{view}" CASCADE')
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()]
    for table in tables:
        con.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
    for statement in schema.TABLES.values():
        con.execute(statement)
    for statement in schema.VIEWS.values():
        con.execute(statement)


def _compact_counts(con, table: str, keys: tuple[str, ...], counts: tuple[str, ...]) -> None:
    """One row per key in a table of counts that each refresh adds rows to (final_summary,
    review_counts): the rows of a key summed into one."""
    sums = ", ".join(f"sum({c})::BIGINT" for c in counts)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _counts AS SELECT {', '.join(keys)}, {sums} FROM {table} GROUP BY ALL")
    con.execute(f"DELETE FROM {table}")
    con.execute(f"INSERT INTO {table} SELECT * FROM _counts")
    con.execute("DROP TABLE _counts")


def _record_segments(con, root: Path, from_segment: int, first_positions: dict[str, tuple[int, int]],
                     observed: dict[str, tuple[int, int, int, int]]) -> None:
    """Record inode, size, mtime and ctime of every segment from `from_segment` on (what was just
    read), as first seen by this refresh (`observed`): a file renamed over a segment after it was
    read is another file, which the next refresh reads again."""
    con.execute("DELETE FROM segments WHERE segment >= ?", [from_segment])
    for path in list_segments(root):
        number = int(path.name[7:15])
        if number < from_segment:
            continue
        st = observed.get(path.name) or _stat(path)
        if st is None or path.name not in first_positions:
            continue
        first, count = first_positions[path.name]
        inode, size, mtime, ctime = st
        con.execute("INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [number, path.name, inode, size, mtime, first, count, ctime])


def _refresh_locked(root: Path, pdir: Path, con, rebuild: bool, progress: Progress | None = None) -> Refresh:
    started = time.perf_counter()
    result = Refresh()
    directory_ctime = _directory_ctime(root)  # before anything is read: a rename after it shows next time
    for leftover in pdir.glob(".chunk-*"):  # a refresh killed mid-flush left it (it holds ledger data)
        leftover.unlink(missing_ok=True)
    observed: dict[str, tuple[int, int, int, int]] = {}
    meta = None if rebuild else _read_meta(con)
    if meta is not None and meta.get("format") != FORMAT:
        meta, result.reason = None, f"the projection's format is {meta.get('format')!r}, not {FORMAT!r}"
    (pdir / STATE).unlink(missing_ok=True)  # written again after the commit
    con.execute("BEGIN TRANSACTION")
    try:
        redactions = _Redactions(root)
        if meta is not None:
            for number, name in _changed_segments(con, root, meta, directory_ctime):
                why = _resync(con, root, pdir, number, name, meta, observed, redactions)
                if why is not None:
                    meta, result.reason = None, why
                    break
                result.resynced.append(name)
            result.rewritten = meta.pop("_rewritten", 0) if meta is not None else 0
        if meta is not None:
            why = _head_still_there(con, root, meta)
            if why is not None:
                meta, result.reason = None, why
        elif result.reason is None:
            result.reason = "rebuild asked for" if rebuild else "no projection yet"
        if meta is None:
            _create(con)
            result.rebuilt = True
        projector = _Projector(con, root, pdir, progress)
        projector.observed, projector.redactions = observed, redactions
        projector.load(meta)
        if meta is None:
            start = (0, ev.GENESIS_PREV, 1, 0, 0, 0, "", None)
        else:
            start = (meta["events"], meta["head"], meta["head_segment"], meta["head_offset"], meta["end_offset"], meta["head_line"],
                     meta["last_ts_text"] or "", meta["ledger_id"])
        seq, head, head_segment, head_offset, end_offset, head_line, last_ts, ledger_id, problem, torn = projector.run(*start)
        added = seq - start[0]
        projector.write_open(everything=meta is None)
        projector.write_reviews()
        if projector.flushes and con.execute("SELECT count(*) FROM final_summary").fetchone()[0] > 4096:
            _compact_counts(con, "final_summary", schema.SUMMARY_KEYS, ("n",))
        if projector.reviews and con.execute("SELECT count(*) FROM review_counts").fetchone()[0] > 4096:
            _compact_counts(con, "review_counts", ("approver",),
                            ("requests", "actions", "approve", "reject", "edit", "respond"))
        first_ts = meta["first_ts"] if meta is not None else None
        if first_ts is None and seq > 0:
            first_ts = con.execute("SELECT ts FROM event_rows WHERE position = 1").fetchone()[0]
        con.execute("DELETE FROM meta")
        con.execute(
            "INSERT INTO meta VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS TIMESTAMPTZ), ?, ?, ?, ?, ?, ?, ?, ?)",
            [FORMAT, ledger_id, seq, head, head_segment, head_offset, end_offset, head_line, first_ts,
             last_ts or None, last_ts or None, utc_now(), torn[0] if torn else None, torn[1] if torn else None,
             torn[2] if torn else 0, _tail_sha256(root / torn[0], torn[1]) if torn else None,
             _dump_workflow(projector.workflow), directory_ctime],
        )
        con.execute("DELETE FROM problems")
        if problem is not None:
            con.execute("INSERT INTO problems VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [problem.seq, problem.kind, problem.code, problem.message, problem.event_kind, problem.request,
                         problem.segment_file, problem.line])
        from_segment = start[2]
        counts = {name: (first, n) for name, (first, n) in projector.seen.items()}
        old = con.execute("SELECT segment_file, first_position, lines FROM segments WHERE segment = ?", [from_segment]).fetchone()
        if old is not None:
            first, n = counts.get(old[0], (old[1], 0))
            counts[old[0]] = (old[1], old[2] + n)
        _record_segments(con, root, from_segment, counts, observed)
        if result.rewritten or (result.rebuilt and result.reason != "no projection yet"):
            (pdir / COMPACT).touch()  # before the commit: a crash after it must still lead to the copy
        _commit(con, added)
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except Exception:  # a failed COMMIT ends the transaction itself: the error to report is the first
            pass
        raise
    result.events, result.head, result.added = seq, head, added
    if problem is not None:
        message = f"workflow: {problem.code}: {problem.message}" if problem.kind == "workflow" else problem.message
        result.problem, result.problem_seq = message, problem.seq
    result.complete = problem is None and seq > 0
    result.torn_bytes = torn[2] if torn else 0
    _write_state(root, pdir, con, result)
    result.seconds = time.perf_counter() - started
    return result


def _write_state(root: Path, pdir: Path, con, result: Refresh) -> None:
    """Write STATE after a commit: the head, and every segment's inode, size and mtime as read."""
    if not result.complete or result.torn_bytes or (pdir / COMPACT).exists():
        return
    meta = _read_meta(con)
    segments = con.execute("SELECT segment_file, inode, size, mtime_ns, ctime_ns FROM segments ORDER BY segment").fetchall()
    state = {"format": FORMAT, "events": meta["events"], "head": meta["head"], "end_offset": meta["end_offset"],
             "head_segment": segment_name(meta["head_segment"]), "directory_ctime_ns": meta["directory_ctime_ns"],
             "segments": [list(row) for row in segments]}
    temporary = pdir / (STATE + ".tmp")
    temporary.write_bytes(msgspec.json.encode(state))
    os.replace(temporary, pdir / STATE)


def up_to_date(root: Path, pdir: Path) -> Refresh | None:
    """A Refresh saying nothing is to be done, when STATE shows that the log is exactly what the
    projection covers (no new line, no new segment, no segment changed); else None. Reads one
    small file and stats the segments: no database is opened."""
    try:
        state = msgspec.json.decode((pdir / STATE).read_bytes())
        if state["format"] != FORMAT or not (pdir / DATABASE).is_file() or (pdir / COMPACT).exists():
            return None
        names = [p.name for p in list_segments(root)]
        recorded = state["segments"]
        if names != [row[0] for row in recorded] or names[-1] != state["head_segment"]:
            return None
        if state["directory_ctime_ns"] is None or _directory_ctime(root) != state["directory_ctime_ns"]:
            return None
        for name, inode, size, mtime, ctime in recorded:
            now = _stat(root / name)
            if now is None:
                return None
            if name == state["head_segment"]:
                # grown, or changed in place since it was read (a same-size edit changes only the times)
                if now[0] != inode or now[1] != state["end_offset"] or (size, mtime, ctime) != (now[1], now[2], now[3]):
                    return None
            elif now != (inode, size, mtime, ctime):
                return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, LedgerUnreadable):
        return None
    return Refresh(events=state["events"], head=state["head"], complete=state["events"] > 0)


def _tail_sha256(path: Path, offset: int) -> str | None:
    """SHA-256 (hex) of the bytes of `path` from `offset` to its end, read in blocks."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            while block := handle.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _open(pdir: Path):
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


def _compact(pdir: Path) -> None:
    """Copy the projection's database into a new file (COPY FROM DATABASE: the tables and views,
    none of the free blocks) and rename it over the old one. Its name starts `.chunk-` so that a
    copy left by a crash is removed by the next refresh."""
    import duckdb

    db, fresh = pdir / DATABASE, pdir / ".chunk-compact.duckdb"
    for name in (fresh, Path(str(fresh) + ".wal")):
        name.unlink(missing_ok=True)
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute(f"ATTACH '{_sql_path(db)}' AS old (READ_ONLY)")
        con.execute(f"ATTACH '{_sql_path(fresh)}' AS fresh")
        con.execute("COPY FROM DATABASE old TO fresh")
        con.execute("DETACH fresh")
        con.execute("DETACH old")
    finally:
        con.close()
    with open(fresh, "rb") as handle:
        os.fsync(handle.fileno())
    (pdir / (DATABASE + ".wal")).unlink(missing_ok=True)  # the old file's (its contents are in the copy)
    os.replace(fresh, db)


def fallback_directory(root: Path) -> Path:
    """Where the projection of a ledger whose directory cannot be written lives:
    $XDG_CACHE_HOME/countersign/projections/<SHA-256 of the ledger's resolved path, 16 digits>."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / "countersign" / "projections" / key


def _where(root: Path, create: bool) -> Path:
    """The projection's directory: DIR/projection, or the fallback when DIR cannot be written
    (an auditor's read-only copy, or a path holding `?`, which DuckDB reads as options)."""
    pdir = root / DIRECTORY
    if "?" in os.path.abspath(pdir):  # DuckDB reads `?` in a database path as the start of options
        return fallback_directory(root)
    if pdir.is_dir() and os.access(pdir, os.W_OK):
        return pdir
    if not pdir.exists() and os.access(root, os.W_OK):
        return pdir
    fallback = fallback_directory(root)
    if fallback.is_dir() or create:
        return fallback
    return pdir


@contextmanager
def opened(path: str | Path, *, create: bool = True, rebuild: bool = False,
           progress: Progress | None = None, quick: bool = False) -> Iterator[tuple[Any, Refresh]]:
    """Refresh the projection of the ledger at `path` and yield `(connection, Refresh)`, the
    projection locked until the block ends (read the tables through the connection). `create`
    makes one when there is none (else ProjectionError); `rebuild` starts from the first line;
    `progress(done, total)` is told the bytes read. With `quick`, when STATE shows the projection
    is up to date (up_to_date) no database is opened and the connection yielded is None. Raises
    LedgerUnreadable when `path` is not a ledger, ProjectionError when the projection cannot be
    written."""
    root = Path(path)
    if not root.is_dir():
        raise LedgerUnreadable(f"{root}: no such ledger directory")
    if not list_segments(root):
        raise LedgerUnreadable(f"{root}: no ledger segments in this directory")
    pdir = _where(root, create)
    if not create and not (pdir / DATABASE).is_file():
        raise ProjectionError(f"{root}: no projection")
    with _locked(pdir, create):
        if quick and not rebuild:
            current = up_to_date(root, pdir)
            if current is not None:
                yield None, current
                return
        try:
            con = _open(pdir)
        except OSError as exc:
            raise ProjectionError(f"{pdir}: cannot open the projection ({exc})") from None
        try:
            result = _refresh_locked(root, pdir, con, rebuild, progress)
            if (pdir / COMPACT).exists():
                # values replaced (a redaction) or tables dropped: DuckDB leaves their bytes in
                # the file's free blocks, where a copy of the file would carry them on
                con.close()
                _compact(pdir)
                (pdir / COMPACT).unlink()
                con = _open(pdir)
                _write_state(root, pdir, con, result)
            con.execute("RESET threads")  # a query or an export uses every core (_connect)
            yield con, result
        finally:
            con.close()


def refresh(path: str | Path, *, create: bool = True, rebuild: bool = False, progress: Progress | None = None) -> Refresh:
    """Bring the projection up to date with the log (see the module docstring); returns what was
    done. Arguments and errors as `opened`."""
    with opened(path, create=create, rebuild=rebuild, progress=progress) as (_, result):
        return result


_ORDER = {"review_counts": "ALL", "meta": None, "segments": "segment", "problems": "ALL", "event_rows": "position",
          "final_requests": "request", "open_requests": "request", "final_summary": "ALL", "final_seconds": "ALL"}


def snapshot(con) -> dict[str, list[tuple]]:
    """Every table's rows in a fixed order (what a rebuild must reproduce); the meta row without
    when it was refreshed and the directory's ctime, and segments without their inode, mtime and
    ctime (a copy has others)."""
    out = {}
    for table in TABLES:
        if table == "meta":
            out[table] = con.execute("SELECT * EXCLUDE (refreshed_at, directory_ctime_ns) FROM meta").fetchall()
        elif table == "segments":
            out[table] = con.execute("SELECT segment, segment_file, size, first_position, lines FROM segments ORDER BY segment").fetchall()
        elif table == "review_counts":  # rows per refresh: compare the sums
            out[table] = con.execute("SELECT approver, sum(requests), sum(actions), sum(approve), sum(reject), sum(edit), "
                                     "sum(respond) FROM review_counts GROUP BY ALL ORDER BY ALL").fetchall()
        elif table == "final_summary":  # rows per refresh: compare the sums
            keys = ", ".join(schema.SUMMARY_KEYS)
            out[table] = con.execute(f"SELECT {keys}, sum(n)::BIGINT FROM final_summary GROUP BY ALL ORDER BY ALL").fetchall()
        else:
            out[table] = con.execute(f"SELECT * FROM {table} ORDER BY {_ORDER[table]}").fetchall()
    return out


def check(path: str | Path) -> list[str]:
    """Rebuild the projection from the log alone in a temporary directory and compare it with
    the one in the ledger (refreshed first). Returns the tables that differ (empty: identical)."""
    import tempfile

    root = Path(path)
    with opened(root, create=False) as (con, _):
        mine = snapshot(con)
        pdir = _where(root, False)
    with tempfile.TemporaryDirectory(dir=pdir) as scratch:
        scratch_dir = Path(scratch)
        con = _connect(scratch_dir / DATABASE)
        try:
            _refresh_locked(root, scratch_dir, con, True)
            fresh = snapshot(con)
        finally:
            con.close()
    return [t for t in TABLES if mine[t] != fresh[t]]
