"""Append rates: countersign's writer against a bare loop and against the eventsourcing library.

All three write the same events (bench.ledger_gen.events: the agent-gate workload, arguments
beside the proposals) to a fresh store on the same disk, with the same durability:

- `ledger batched`: `Ledger.append_batch` of 1,000 events at a time (one lock, one write, one
  fdatasync per batch). Everything the writer does is timed: catching up under the lock, stamping
  seq/ts/prev, encoding, validating each body as verify would, hashing, writing, syncing.
- `bare loop`: the limit: for each event only stamp seq/ts/prev, encode the body, SHA-256 it,
  compose the line; one os.write and one fdatasync per batch of 1,000. No lock, no checks.
- `ledger single`: `Ledger.append` of one event at a time, each durable (one fdatasync each);
  beside it the same bare loop with one event per write and sync (the disk's sync rate).
- `eventsourcing`: the same events through eventsourcing's Application and Aggregate API (one
  aggregate per request, every event carrying the same members and arguments) on its SQLite
  recorder, in WAL mode with `PRAGMA synchronous=FULL` set on every connection (read back and
  reported): one transaction, so one WAL sync, per `save` of 1,000 events (batched) or of one
  event (single).

Rounds alternate between the contenders so that drift on a shared machine hits all of them; the
median of the rounds is reported.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import time
from pathlib import Path

import msgspec

from bench import ledger_gen
from ledger.clock import format_ts, utc_now
from ledger.events import encode_event
from ledger.store.lines import DATA_MARK, HASH_MARK, PREFIX, SUFFIX
from ledger.store.log import Ledger, segment_name

BATCH = 1000
_sync = getattr(os, "fdatasync", os.fsync)


def _fresh(work: Path, name: str) -> Path:
    path = work / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def ledger_batched(items, work: Path, batch: int = BATCH) -> float:
    path = _fresh(work, "append-ledger")
    with Ledger(path) as ledger:
        started = time.perf_counter()
        for i in range(0, len(items), batch):
            ledger.append_batch(items[i : i + batch])
        elapsed = time.perf_counter() - started
    return elapsed


def bare_loop(items, work: Path, batch: int = BATCH) -> float:
    path = _fresh(work, "append-bare")
    path.mkdir(parents=True)
    fd = os.open(path / segment_name(1), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    replace, sha256, encode = msgspec.structs.replace, hashlib.sha256, encode_event
    tail, null = SUFFIX + b"\n", b"null"
    seq, prev = 1, "0" * 64
    try:
        started = time.perf_counter()
        for i in range(0, len(items), batch):
            now = format_ts(utc_now())
            chunks = []
            for event, data in items[i : i + batch]:
                seq += 1
                body = encode(replace(event, seq=seq, ts=now, prev=prev))
                prev = sha256(body).hexdigest()
                chunks.append(b"".join((PREFIX, body, HASH_MARK, prev.encode(), DATA_MARK, data or null, tail)))
            payload = b"".join(chunks)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            _sync(fd)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
    return elapsed


def ledger_single(items, work: Path) -> float:
    path = _fresh(work, "append-single")
    with Ledger(path) as ledger:
        started = time.perf_counter()
        for event, data in items:
            ledger.append(event, data)
        return time.perf_counter() - started


# --- eventsourcing --------------------------------------------------------------------------------


def _eventsourcing():
    """The eventsourcing side: an Application whose SQLite connections use synchronous=FULL.
    Returns (make_app(db path) -> app, Request aggregate class, the version), or None when the
    library is missing."""
    try:
        import eventsourcing
        import eventsourcing.sqlite as es_sqlite
        from eventsourcing.application import Application
        from eventsourcing.domain import Aggregate, event
    except ImportError:
        return None

    if not getattr(es_sqlite.SQLiteConnectionPool, "_countersign_full_sync", False):
        original = es_sqlite.SQLiteConnectionPool._create_connection

        def create_connection(self):
            connection = original(self)
            connection._sqlite_conn.execute("PRAGMA synchronous=FULL")
            return connection

        es_sqlite.SQLiteConnectionPool._create_connection = create_connection
        es_sqlite.SQLiteConnectionPool._countersign_full_sync = True

    class Request(Aggregate):
        """One tool call's life: the proposal creates it, every later event is a step."""

        @event("Proposed")
        def __init__(self, body: dict, data: dict | None):
            self.steps = 0

        @event("Stepped")
        def step(self, body: dict):
            self.steps += 1

    def make_app(db: Path):
        return Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(db)})

    from importlib import metadata

    return make_app, Request, metadata.version("eventsourcing")


def _es_inputs(items):
    """The same events as plain values, for the other library (converted before timing)."""
    out = []
    for event, data in items:
        body = {k: v for k, v in msgspec.to_builtins(event).items() if k not in ("seq", "ts", "prev")}
        out.append((body, msgspec.json.decode(data) if data else None))
    return out


def es_run(es, inputs, work: Path, batch: int) -> tuple[float, int]:
    """Seconds to save `inputs` in transactions of `batch` events; and the synchronous pragma read back."""
    make_app, Request, _ = es
    directory = _fresh(work, f"append-es-{batch}")
    directory.mkdir(parents=True)
    app = make_app(directory / "events.sqlite")
    aggregates: dict[int, object] = {}
    seq = 1
    try:
        started = time.perf_counter()
        pending: list = []
        for body, data in inputs:
            seq += 1
            if body["kind"] == "proposed":
                aggregate = Request(body=body, data=data)
                aggregates[seq] = aggregate
            else:
                aggregate = aggregates[body["request"]]
                aggregate.step(body=body)
            pending.append(aggregate)
            if len(pending) >= batch:
                app.save(*pending)
                pending = []
        if pending:
            app.save(*pending)
        elapsed = time.perf_counter() - started
        with app.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA synchronous")
            synchronous = cursor.fetchone()[0]
    finally:
        app.close()
    return elapsed, synchronous


def run(work: Path, batched_events: int, single_events: int, rounds: int = 3, log=print) -> dict:
    items = ledger_gen.events(batched_events + 1)
    singles = items[:single_events]
    es = _eventsourcing()
    es_inputs = _es_inputs(items) if es else None
    es_singles = es_inputs[:single_events] if es else None
    times: dict[str, list[float]] = {k: [] for k in ("ledger_batched", "bare_loop", "ledger_single", "bare_single",
                                                     "es_batched", "es_single")}
    synchronous = None
    for r in range(rounds):
        log(f"bench: ledger append round {r + 1}/{rounds}")
        times["ledger_batched"].append(ledger_batched(items, work))
        times["bare_loop"].append(bare_loop(items, work))
        times["ledger_single"].append(ledger_single(singles, work))
        times["bare_single"].append(bare_loop(singles, work, batch=1))
        if es:
            elapsed, synchronous = es_run(es, es_inputs, work, BATCH)
            times["es_batched"].append(elapsed)
            times["es_single"].append(es_run(es, es_singles, work, 1)[0])
    # The ledger the countersign writer produced must verify (the events are lawful).
    from ledger.proof.verify import verify

    report = verify(work / "append-ledger")
    size = sum(p.stat().st_size for p in (work / "append-ledger").glob("*.jsonl"))
    n = {"ledger_batched": len(items), "bare_loop": len(items), "es_batched": len(items),
         "ledger_single": len(singles), "bare_single": len(singles), "es_single": len(singles)}
    rates = {k: round(n[k] / statistics.median(v)) for k, v in times.items() if v}
    for name in ("append-ledger", "append-bare", "append-single", f"append-es-{BATCH}", "append-es-1"):
        shutil.rmtree(work / name, ignore_errors=True)
    out = {
        "events_batched": len(items),
        "events_single": len(singles),
        "batch": BATCH,
        "rounds": rounds,
        "rate_events_per_s": rates,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items() if v},
        "written_ledger_verifies": report.ok,
        "bytes_per_event": round(size / (len(items) + 1), 1),
        "eventsourcing": {"version": es[2], "sqlite_journal_mode": "wal", "sqlite_synchronous": synchronous}
        if es else None,
    }
    out["batched_vs_bare"] = round(rates["ledger_batched"] / rates["bare_loop"], 3)
    out["single_vs_bare_single"] = round(rates["ledger_single"] / rates["bare_single"], 3)
    if es:
        out["batched_vs_eventsourcing"] = round(rates["ledger_batched"] / rates["es_batched"], 2)
        out["single_vs_eventsourcing"] = round(rates["ledger_single"] / rates["es_single"], 2)
    return out
