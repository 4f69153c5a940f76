"""Webhook notifications of the approval service: on interrupt, decision and expiry (issue 11,
section 4; docs/notifications.md).

    notifier = Notifier(config, lookup=service.watched, public_url=..., directory=ledger.cache_dir(),
                        ledger_id=...)
    service.listeners.append(notifier)     # the watch calls it with every new ledger Record
    notifier.catch_up(ledger, head)        # what a previous run had not settled, before the watch runs
    notifier.start() ... notifier.stop(drain_seconds=2.0)

Threads: the listener runs in the service's watch thread and only builds bodies and enqueues
them (a dict lookup and a JSON encoding per event and webhook); one worker thread of the
Notifier sends them. Delivery is at least once:
- each attempt's outcome goes to `deliveries.jsonl` (JSON Lines: delivery id, the URL's host,
  the event's seq, status code or error, attempt, time; rotated to `.1` past ROTATE_BYTES);
- `notify-cursor.json` holds the last ledger seq whose notifications were all settled
  (delivered, given up after the last attempt, refused by the receiver, or dropped from a full
  queue). A restarted service sends again what came after it: a notification may repeat (with
  its same delivery id), none is lost unless dropped or given up, which the file records.
Retries: network errors, 408, 425, 429 and 5xx are retried with exponential backoff and jitter
(backoff_seconds × 2^(n−1), capped, scaled by a random 0.5 to 1.0; a Retry-After in seconds is
honoured up to the cap), at most `attempts` tries. Any other status ends the delivery (a 3xx is
not followed: a webhook that moved is a configuration to fix, and following it would send the
signed body elsewhere).

Why httpx (not urllib): one Client keeps connections to a receiver alive across deliveries,
takes one timeout for connect, read and write, never follows a redirect unless told to, and
raises one exception family (httpx.HTTPError) for every network failure; it is already what the
service's tests use.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from ledger.store.log import Record
from ledger.workflow.machine import RequestState, UnknownRequest
from service.notify_bodies import Notice, body_of, notice_of, signature_headers
from service.webhooks import Webhook, WebhooksConfig

log = logging.getLogger("countersign.notify")

DELIVERIES_FILE = "deliveries.jsonl"
CURSOR_FILE = "notify-cursor.json"
ROTATE_BYTES = 8 * 1024 * 1024  # deliveries.jsonl is moved to deliveries.jsonl.1 (one generation) past this
MAX_CATCH_UP = 100_000  # seqs a restart reads back at most (a cursor older than that skips, with a warning)
RETRY_STATUSES = frozenset({408, 425, 429})


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(order=True)
class _Job:
    """One notification to one webhook. Ordered by `order` (the enqueue order: the oldest is
    dropped first); `due` is when the next attempt may start (time.monotonic())."""

    order: int
    due: float = field(compare=False)
    id: str = field(compare=False)
    seq: int = field(compare=False)
    request: int = field(compare=False)
    event: str = field(compare=False)
    hook: Webhook = field(compare=False)
    body: bytes = field(compare=False, repr=False)
    attempt: int = field(default=0, compare=False)


class DeliveryLog:
    """deliveries.jsonl: one JSON object per attempt (module docstring), appended; bounded in
    bytes by rotating to `.1`. Thread-safe."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def append(self, row: dict) -> None:
        line = json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.exists() and self.path.stat().st_size > ROTATE_BYTES:
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line)
            except OSError as exc:  # a full disk must not stop deliveries: the log says so
                log.warning("cannot record a delivery in %s: %s", self.path, exc)

    def recent(self, limit: int) -> list[dict]:
        """The last `limit` rows, newest first (read from the file's tail)."""
        with self._lock:
            try:
                with open(self.path, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    size = f.tell()
                    f.seek(max(0, size - limit * 1024))  # a row is a few hundred bytes
                    tail = f.read()
            except FileNotFoundError:
                return []
        rows = []
        for line in reversed(tail.splitlines()[1:] if len(tail) < size else tail.splitlines()):
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
            if len(rows) >= limit:
                break
        return rows


class Cursor:
    """notify-cursor.json: {"seq": N, "ledger": id}, replaced atomically when it moves. Settling
    may happen out of order (retries), so the cursor is one less than the oldest unsettled seq."""

    def __init__(self, path: Path, ledger_id: str):
        self.path, self.ledger_id = path, ledger_id
        self._outstanding: dict[int, int] = {}  # seq → notifications of it not yet settled
        self._scanned = 0
        self._written = -1
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()  # the watch thread and the worker both save

    def read(self) -> int | None:
        """The stored seq, or None (no file, another ledger's, or unreadable)."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("ledger") != self.ledger_id or not isinstance(data.get("seq"), int):
            return None
        return data["seq"]

    @property
    def seq(self) -> int:
        with self._lock:
            return min(self._outstanding) - 1 if self._outstanding else self._scanned

    def scanned(self, seq: int, jobs: int) -> None:
        """Every notification of `seq` (there are `jobs`) is enqueued."""
        with self._lock:
            if jobs:
                self._outstanding[seq] = self._outstanding.get(seq, 0) + jobs
            self._scanned = max(self._scanned, seq)

    def settled(self, seq: int) -> None:
        with self._lock:
            left = self._outstanding.get(seq, 0) - 1
            if left > 0:
                self._outstanding[seq] = left
            else:
                self._outstanding.pop(seq, None)

    def save(self) -> None:
        with self._save_lock:
            self._save()

    def _save(self) -> None:
        seq = self.seq
        if seq == self._written:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"seq": seq, "ledger": self.ledger_id}))
            os.replace(tmp, self.path)
            self._written = seq
        except OSError as exc:  # an old cursor only repeats notifications (at least once)
            log.warning("cannot save the notification cursor %s: %s", self.path, exc)


def http_sender() -> Callable[[Webhook, bytes, dict], tuple[int, dict]]:
    """A function posting a body to a webhook with httpx: (status, response headers). Raises
    httpx.HTTPError on a network failure or timeout."""
    import httpx

    client = httpx.Client(follow_redirects=False)

    def send(hook: Webhook, body: bytes, headers: dict) -> tuple[int, dict]:
        response = client.post(hook.url, content=body, headers=headers, timeout=hook.timeout_seconds)
        return response.status_code, dict(response.headers)

    send.close = client.close  # type: ignore[attr-defined]
    return send


class Notifier:
    """Turns ledger events into webhook deliveries (module docstring). `lookup(request)` gives a
    request's state as the watch folded it (called in the watch thread); `directory` holds the
    deliveries file and the cursor unless `deliveries` names the file (the cursor then sits
    beside it); `sender` and `rand` are for tests."""

    def __init__(self, config: WebhooksConfig, *, lookup: Callable[[int], RequestState], ledger_id: str,
                 directory: Path, public_url: str = "", deliveries: str | Path | None = None,
                 sender: Callable | None = None, rand: Callable[[], float] = random.random):
        self.config, self.lookup, self.ledger_id, self.public_url = config, lookup, ledger_id, public_url
        log_path = Path(deliveries) if deliveries else Path(directory) / DELIVERIES_FILE
        self.log = DeliveryLog(log_path)
        self.cursor = Cursor(log_path.with_name(CURSOR_FILE), ledger_id)
        self._sender = sender
        self._rand = rand
        self._jobs: dict[int, _Job] = {}  # order → job waiting (not in flight)
        self._heap: list[tuple[float, int]] = []  # (due, order); entries of jobs no longer waiting are skipped
        self._bytes = 0
        self._order = 0
        self._dropped = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._drain_until = 0.0
        self._thread: threading.Thread | None = None

    # --- the listener (the watch thread) ------------------------------------------------------

    def __call__(self, records: list[Record]) -> None:
        """Enqueue the notifications of these records (in seq order). Never raises."""
        for record in records:
            try:
                jobs = self._jobs_of(record)
            except Exception:
                log.exception("cannot build the notifications of ledger seq %d; none is sent", record.seq)
                jobs = []
            self.cursor.scanned(record.seq, len(jobs))
            for job in jobs:
                self._enqueue(job)
        self.cursor.save()

    def _jobs_of(self, record: Record) -> list[_Job]:
        request = getattr(record.event, "request", None)
        if not isinstance(request, int) or type(record.event).__struct_config__.tag not in (
                "interrupted", "escalated", "approved", "edited", "rejected", "responded", "cancelled", "expired"):
            return []
        try:
            state = self.lookup(request)
        except UnknownRequest:
            return []
        notice = notice_of(record, state, self.public_url)
        if notice is None:
            return []
        jobs = []
        for index, hook in enumerate(self.config.hooks):
            if not self._wants(hook, notice):
                continue
            body = body_of(notice, hook.format)
            jobs.append(_Job(order=0, due=0.0, id=self._delivery_id(record.seq, hook), seq=record.seq,
                             request=notice.request, event=notice.event, hook=hook, body=body))
        return jobs

    @staticmethod
    def _wants(hook: Webhook, notice: Notice) -> bool:
        return notice.event in hook.events and (hook.groups is None or bool(hook.groups & notice.groups))

    def _delivery_id(self, seq: int, hook: Webhook) -> str:
        """Stable across restarts and attempts: the ledger, the seq and the webhook."""
        import hashlib

        digest = hashlib.sha256(f"{self.ledger_id}\n{seq}\n{hook.format}\n{hook.url}".encode()).hexdigest()
        return f"{seq}-{digest[:16]}"

    def _enqueue(self, job: _Job) -> None:
        with self._cond:
            self._order += 1
            job.order, job.due = self._order, time.monotonic()
            self._put(job)
            dropped = []
            limits = self.config.delivery
            while len(self._jobs) > limits.queue_limit or (self._bytes > limits.queue_bytes and len(self._jobs) > 1):
                oldest = self._jobs.pop(min(self._jobs))
                self._bytes -= len(oldest.body)
                dropped.append(oldest)
            self._cond.notify()
        for old in dropped:
            self._dropped += 1
            log.warning("the notification queue is full: dropped delivery %s (ledger seq %d) to %s", old.id, old.seq,
                        old.hook.host)
            self._record(old, None, "the queue was full", "dropped")
            self.cursor.settled(old.seq)

    def _put(self, job: _Job) -> None:  # under the lock
        self._jobs[job.order] = job
        self._bytes += len(job.body)
        heapq.heappush(self._heap, (job.due, job.order))

    def catch_up(self, read: Callable[[Iterable[int]], dict[int, Record]], head: int) -> None:
        """Before the watch starts: enqueue the notifications of the seqs after the stored cursor
        up to `head` (what the watch will not deliver). `read(seqs)` is Ledger.records_at. With
        no cursor (a first start), nothing before `head` is sent."""
        stored = self.cursor.read()
        if stored is None or stored > head:
            if stored is not None:
                log.warning("the notification cursor (seq %d) is past the ledger's head (%d): starting at the head",
                            stored, head)
            self.cursor.scanned(head, 0)
            self.cursor.save()
            return
        start = stored + 1
        if head - stored > MAX_CATCH_UP:
            log.warning("notifications of ledger seqs %d to %d were never sent (the service was down too long)",
                        start, head - MAX_CATCH_UP)
            start = head - MAX_CATCH_UP + 1
        self.cursor.scanned(start - 1, 0)
        for first in range(start, head + 1, 1000):
            records = read(range(first, min(head, first + 999) + 1))
            self([records[s] for s in sorted(records)])
        self.cursor.scanned(head, 0)
        self.cursor.save()

    # --- the worker -------------------------------------------------------------------------

    def start(self) -> None:
        if self._sender is None:
            self._sender = http_sender()
        self._thread = threading.Thread(target=self._work, name="countersign-notify", daemon=True)
        self._thread.start()

    def stop(self, drain_seconds: float = 2.0) -> None:
        """Send what is due for up to `drain_seconds`, then stop. What is left stays after the
        cursor: the next start sends it."""
        with self._cond:
            self._stopping = True
            self._drain_until = time.monotonic() + drain_seconds
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(drain_seconds + max((h.timeout_seconds for h in self.config.hooks), default=0) + 1)
        close = getattr(self._sender, "close", None)
        if close is not None:
            close()
        self.cursor.save()

    def _next(self) -> _Job | None:
        """The next job due, waiting for it; None when stopping and nothing more is due in time."""
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][1] not in self._jobs:
                    heapq.heappop(self._heap)
                if self._heap and self._heap[0][0] <= now:
                    if self._stopping and now >= self._drain_until:
                        return None
                    _, order = heapq.heappop(self._heap)
                    job = self._jobs.pop(order)
                    self._bytes -= len(job.body)
                    return job
                if self._stopping and (not self._heap or self._heap[0][0] >= self._drain_until or now >= self._drain_until):
                    return None
                wait = self._heap[0][0] - now if self._heap else None
                if self._stopping:
                    wait = min(wait if wait is not None else 1.0, self._drain_until - now)
                self._cond.wait(wait)

    def _work(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                self._attempt(job)
            except Exception:  # a bug must not end every later delivery
                log.exception("delivery %s failed unexpectedly", job.id)
                self.cursor.settled(job.seq)
            self.cursor.save()

    def _attempt(self, job: _Job) -> None:
        job.attempt += 1
        headers = signature_headers(job.hook.secret, job.body, job.id, time.time())
        status, error, retry_after = None, None, None
        try:
            status, response_headers = self._sender(job.hook, job.body, headers)
            retry_after = _seconds({k.lower(): v for k, v in response_headers.items()}.get("retry-after"))
        except Exception as exc:  # httpx.HTTPError, or what a sender raises: the receiver was not reached
            error = f"{type(exc).__name__}: {exc}"[:300]
        if status is not None and 200 <= status < 300:
            self._record(job, status, None, "delivered")
            self.cursor.settled(job.seq)
            return
        retryable = status is None or status in RETRY_STATUSES or status >= 500
        limits = self.config.delivery
        if not retryable or job.attempt >= limits.attempts:
            outcome = "failed" if retryable else "refused"
            self._record(job, status, error, outcome)
            log.warning("delivery %s (ledger seq %d) to %s %s after %d attempt%s: %s", job.id, job.seq, job.hook.host,
                        outcome, job.attempt, "s" if job.attempt > 1 else "", error or f"HTTP {status}")
            self.cursor.settled(job.seq)
            return
        delay = min(limits.backoff_cap_seconds, limits.backoff_seconds * 2 ** (job.attempt - 1))
        delay *= 0.5 + 0.5 * self._rand()  # jitter: receivers coming back are not hit by every sender at once
        if retry_after is not None:
            delay = max(delay, min(retry_after, limits.backoff_cap_seconds))
        self._record(job, status, error, "retry", retry_in=round(delay, 3))
        with self._cond:
            job.due = time.monotonic() + delay
            self._put(job)
            self._cond.notify()

    def _record(self, job: _Job, status: int | None, error: str | None, outcome: str, **extra: Any) -> None:
        self.log.append({"delivery": job.id, "host": job.hook.host, "format": job.hook.format, "seq": job.seq,
                         "request": job.request, "event": job.event, "attempt": job.attempt, "status": status,
                         "error": error, "outcome": outcome, "time": _iso(time.time()), **extra})

    # --- for the admin endpoint ---------------------------------------------------------------

    def summary(self, limit: int = 100) -> dict:
        with self._cond:
            queued, queued_bytes = len(self._jobs), self._bytes
        return {
            "enabled": True,
            "webhooks": [{"host": h.host, "format": h.format, "events": sorted(h.events),
                          "groups": sorted(h.groups) if h.groups else None, "signed": h.secret is not None}
                         for h in self.config.hooks],
            "queued": queued, "queued_bytes": queued_bytes, "dropped": self._dropped, "cursor": self.cursor.seq,
            "deliveries": self.log.recent(limit),
        }


def _seconds(value: str | None) -> float | None:
    """A Retry-After given in seconds (RFC 9110, 10.2.3); an HTTP-date is ignored (the backoff applies)."""
    if value is None or not (value.strip().isascii() and value.strip().isdecimal()):  # [0-9]+ ('²' passes isdigit)
        return None
    return float(value.strip())
