"""The Gate's questions about requests, for agents and reviewers: one request (`get`), the queue
(`pending`), a call id (`find`), a request's history and its run's earlier calls, its arguments
(one, or many in one pass), the decisions it allows, and `wait` until it is decided. Each
catches up with the ledger first (unless told not to) and returns copies the caller may keep.
"""

from __future__ import annotations

import copy
import time
from typing import Callable, Any

import msgspec

from ledger.clock import format_ts, seconds_between
from ledger.store.log import Record
from ledger.workflow.machine import RequestState
from ledger.workflow.snapshot import Unusable

WAKE_SECONDS = 1.0
"""`Gate.wait` looks at its request's deadline at least this often (seconds)."""

DECISIONS = ("approve", "edit", "reject", "respond")


def _request_id(request: object) -> int:
    from ledger.workflow.errors import InvalidCall

    if isinstance(request, bool) or not isinstance(request, int):
        raise InvalidCall(f"a request id is an integer, not {type(request).__name__}")
    return request


def decisions_of(state: RequestState) -> tuple[str, ...]:
    """The decisions a request's rule allows while it is pending, in DECISIONS' order, else ()."""
    if state.status != "pending" or state.requirements is None:
        return ()
    return tuple(d for d in DECISIONS if d in state.requirements.decisions)


class Reading:
    """The reading half of a Gate (module docstring); the Gate gives `_lock`, `_commit`,
    `_open_state`, `_copy_of`, `_read_data`, `_call_data`, `workflow`, `ledger`, `clock`."""

    def get(self, request: int, *, refresh: bool = True) -> RequestState:
        """A snapshot of one request's state, after catching up with the ledger (`refresh=False`:
        as this Gate last saw it, without taking the lock). Raises UnknownRequest."""
        _request_id(request)
        with self._lock:
            if refresh:
                self._commit(lambda: [])
            return self._copy_of(request)

    def pending(self, *, limit: int | None = None, tool: str | None = None, run: str | None = None) -> list[RequestState]:
        """Snapshots of the requests waiting for a human decision, oldest first (after catching up
        and expiring what is due): the first `limit` of them (None: all), of `tool` and of `run`
        when given."""
        with self._lock:
            self._commit(lambda: [])
            chosen = []
            for request in sorted(self.workflow.pending):
                state = self.workflow.pending[request]
                if (tool is None or state.tool == tool) and (run is None or state.run == run):
                    if limit is not None and len(chosen) >= limit:
                        break
                    chosen.append(request)
            return [self._copy_of(r) for r in chosen]

    def pending_count(self) -> int:
        """How many requests wait for a human decision, as of this Gate's last catch-up."""
        return len(self.workflow.pending)

    def find(self, *, call_id: str) -> RequestState | None:
        """The request proposed with this call id, or None (after catching up)."""
        with self._lock:
            self._commit(lambda: [])
            request = self.workflow.request_of(call_id)
            return None if request is None else self._copy_of(request)

    def earlier_in_run(self, request: int, *, limit: int = 20) -> list[RequestState]:
        """Up to `limit` requests of the same run proposed before `request`, newest first
        (after catching up): what the agent did before it asked."""
        with self._lock:
            self._commit(lambda: [])
            state = self._open_state(request)
            if state.run is None:
                return []
            found = {r: s for r, s in self.workflow.requests.items() if s.run == state.run and r < request}
            if self._snapshot is not None:
                try:
                    for s in self._snapshot.of_run(state.run, request, limit):
                        found.setdefault(s.request, s)
                except Unusable:
                    pass
            return [copy.copy(found[r]) for r in sorted(found, reverse=True)[:limit]]

    def recent(self, *, before: int | None = None, limit: int = 50,
               match: Callable[[RequestState], bool] | None = None, scan: int = 20_000) -> list[RequestState]:
        """Up to `limit` requests proposed before seq `before` (None: any), newest first, for
        which `match(state)` is true (after catching up): history and search for a person.
        Looks at no more than `scan` requests (so a search that matches little answers in
        bounded time; page on with `before` = the last request shown)."""
        with self._lock:
            self._commit(lambda: [])
            top = before if before is not None else self._seen[0] + 1
            found = {r: s for r, s in self.workflow.requests.items() if r < top}
            if self._snapshot is not None:
                try:
                    for s in self._snapshot.recent(top, scan):
                        found.setdefault(s.request, s)
                except Unusable:
                    pass
            out = []
            for r in sorted(found, reverse=True)[:scan]:
                if match is None or match(found[r]):
                    out.append(copy.copy(found[r]))
                    if len(out) >= limit:
                        break
            return out

    def history(self, request: int) -> list[Record]:
        """The stored events of a request, in order (read by their seqs: no scan)."""
        with self._lock:
            state = self._open_state(request)
            records = self.ledger.records_at(state.seqs)
            return [records[seq] for seq in state.seqs if seq in records]

    def stored_arguments(self, request: int) -> Any:
        """The arguments a request was last decided on (the proposal's, or the last edit's), as
        stored in the ledger and not checked (a redacted value shows as its marker), or None."""
        with self._lock:
            state = self._open_state(request)
        data = self.ledger.data_at([state.data_seq or request]).get(state.data_seq or request)
        try:
            return msgspec.json.decode(data)["args"] if data is not None else None
        except (msgspec.DecodeError, KeyError, TypeError):
            return None

    def original_arguments(self, request: int) -> Any:
        """The arguments the agent proposed (before any edit), read from the ledger, or None when
        they cannot be read (redacted, say)."""
        data = self.ledger.data_at([request]).get(request)
        try:
            return msgspec.json.decode(data)["args"] if data is not None else None
        except (msgspec.DecodeError, KeyError, TypeError):
            return None

    def stored_context(self, request: int) -> Any:
        """The context the call was proposed with (what the policy read as `context`), read from
        the ledger, or None when it cannot be read (redacted, say)."""
        _request_id(request)
        data = self.ledger.data_at([request]).get(request)
        try:
            return msgspec.json.decode(data)["context"] if data is not None else None
        except (msgspec.DecodeError, KeyError, TypeError):
            return None

    def allowed_decisions(self, request: int) -> tuple[str, ...]:
        """The decisions the request's rule allows while it is pending (approve, edit, reject,
        respond), else ()."""
        with self._lock:
            return decisions_of(self._open_state(request))

    def wait(self, request: int, *, timeout: float | None = None) -> RequestState:
        """Block until the request is no longer waiting (decided, expired, cancelled; an allowed
        or denied one returns at once) or `timeout` seconds passed; returns its state either way.
        Sleeps until the ledger grows (the Store's `wait_for_growth`: file-change notification,
        ledger.store.watch), then catches up; at the request's deadline it commits the expiry
        itself, so silence rejects on time even when no one else touches the ledger."""
        _request_id(request)
        give_up = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._lock:
            state = self.get(request)
        while state.status in ("pending", "interrupting"):
            now = time.monotonic()
            if give_up is not None and now >= give_up:
                break
            # Wake at the deadline (by this Gate's clock, looked at again at least every second,
            # since a test's clock moves without real time passing) or when the ledger grows.
            pause = WAKE_SECONDS if give_up is None else min(WAKE_SECONDS, give_up - now)
            if state.deadline is not None:
                pause = min(pause, max(0.0, seconds_between(format_ts(self.clock()), state.deadline)))
            grew = self.ledger.wait_for_growth(pause, since=self._seen[0])
            due = state.deadline is not None and state.deadline <= format_ts(self.clock())
            if grew or due:
                with self._lock:
                    state = self.get(request)
        return state

    def arguments(self, request: int) -> dict:
        """The current (possibly edited) arguments of a request that can still run. Raises
        UnknownRequest, or KeyError when the request is final and its arguments were released."""
        with self._lock:
            state = self._open_state(request)
            if state.final:
                raise KeyError(request)
            return copy.deepcopy(self._call_data(request)["args"])

    def arguments_of(self, states: list[RequestState], *, checked: bool = True) -> dict[int, Any]:
        """The current arguments of many open requests (as `pending()` returns them), read from
        the ledger in one pass: request → arguments (final ones left out). `checked=False` skips
        checking them against their digests, for a summary on a screen (about half the time for
        a long queue): what runs is always checked, and an approval binds the digest, so
        arguments changed in the files are refused before anything runs."""
        with self._lock:
            live = [s for s in (self._open_state(s.request) for s in states) if not s.final]
            if checked:
                data = self._read_data(live)
                return {s.request: copy.deepcopy(data[s.request]["args"]) for s in live}
            seqs = {s.data_seq or s.request for s in live}
            data = self.ledger.data_at(seqs)
            out = {}
            for s in live:
                try:
                    out[s.request] = msgspec.json.decode(data[s.data_seq or s.request])["args"]
                except (KeyError, TypeError, msgspec.DecodeError):
                    out[s.request] = None
            return out
