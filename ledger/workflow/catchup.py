"""How a Gate follows its ledger: a projection that catches up (issue 10).

`CatchUp` holds the workflow's state as of the events it has folded (`workflow`, `_seen`), opens
from the snapshot (ledger.workflow.snapshot) and checks the events after it, or replays and
checks the whole ledger; folds what other writers appended; saves what changed to the snapshot
and keeps in memory only the pending requests; and reads an open request's arguments from the
ledger when a step needs them, checked against their digest. The Gate (ledger.workflow.gate)
adds the steps, each one commit that first folds through `_fold`.

State (all of it guarded by the Gate's lock): `_seen` (seq, hash) of the last event folded;
`_base`, the seq from which every change is in memory (`_dirty`); `_floor`, the seq up to which
the Gate relies on the snapshot for what it forgot; `_last_ts`, the latest ts seen.
"""

from __future__ import annotations

from typing import Any

import msgspec

from dsl.cache import BoundedCache
from ledger import events as ev
from ledger.digest import ArgumentsError, value_digest
from ledger.proof.verify import Redactions, check_record
from ledger.store.log import LedgerCorrupt, LedgerError, Record
from ledger.workflow.errors import GateError
from ledger.workflow.machine import RequestState, UnknownRequest, Violation, Workflow
from ledger.workflow.snapshot import Archive, Behind, Snapshot, Unusable

SAVE_REPLAY = 20_000
"""A full replay writes the snapshot every this many events (memory stays bounded)."""

DATA_BYTES = 16 * 1024 * 1024
"""What a Gate keeps of open requests' arguments in memory (an estimate, bytes): its own
proposals, for their execution, and those it read; the rest is read from the ledger when needed."""


class CatchUp:
    """The catching-up half of a Gate (module docstring). Its subclass sets `ledger`,
    `_ledger_id`, `_snapshot` (a Snapshot or None), `_broken`, `_lock`, then calls `_open`."""

    ledger: Any
    _snapshot: Snapshot | None
    _broken: LedgerCorrupt | None
    _ledger_id: str

    @property
    def seen(self) -> int:
        """The seq of the last event this Gate has folded (0 before any)."""
        return self._seen[0]

    def _open(self, full_verify: bool = False) -> None:
        """Load the snapshot and verify the events after it, or (none usable, or `full_verify`)
        replay and verify the whole ledger, rebuilding the snapshot on the way. Read without the
        lock: the files only grow; the first step catches up with what was appended meanwhile.
        A snapshot that another Gate resets meanwhile (Behind) is read again, then left out."""
        self._live = False  # folding what the ledger held when the Gate opened (require_signatures)
        try:
            self._open_tries(full_verify)
        finally:
            self._live = True

    def _open_tries(self, full_verify: bool) -> None:
        for attempt in range(3):
            try:
                return self._open_once(full_verify)
            except Unusable:
                self._snapshot = None  # a file SQLite cannot use: left out (the Gate holds everything)
            except Behind:
                if attempt == 1:
                    self._snapshot = None
        self._snapshot = None
        self._open_once(full_verify)

    def _open_once(self, full_verify: bool) -> None:
        # request → {"args", "context"} of open requests read or proposed here, bounded in bytes:
        # evicted ones are read from the ledger again when needed (`_call_data`)
        self._data = BoundedCache(DATA_BYTES, "gate data")
        # request → (seq of its first, seq of its last change not yet in the snapshot)
        self._dirty: dict[int, tuple[int, int]] = {}
        self._redacted_new: list[tuple[int, int, str]] = []  # (target, seq, path) not yet in the snapshot
        # the runs' history (ledger.workflow.history), built when a policy first reads it
        self._history = None
        loaded = None
        if self._snapshot is not None and not full_verify:
            try:
                loaded = self._snapshot.load(self._ledger_id)
                if loaded is not None and self._snapshot_head_problem(loaded):
                    loaded = None
            except Unusable:
                self._snapshot = None
        archive = Archive(self._snapshot, self, loaded.call_ids if loaded else None) if self._snapshot is not None else None
        self.workflow = Workflow(archive=archive)
        self.workflow.format = self.ledger.format  # what the genesis allows, when it is not folded again
        if loaded is not None:
            # The events up to the snapshot's seq were verified by the Gate that wrote it.
            self._seen = (loaded.seq, loaded.hash)  # seq and hash of the last event folded
            self._base = self._floor = loaded.seq  # every change after _base is in memory; the snapshot holds _floor
            self._last_ts = loaded.ts
            self.workflow.roster = loaded.roster
            self.workflow.policy_digest = loaded.policy_digest
            self.workflow.pinned = set(loaded.pinned or ())
            for standing in loaded.standing or ():
                self.workflow.add_standing(standing)
            for state in loaded.pending:
                self.workflow.requests[state.request] = state
                if state.status == "pending":
                    self.workflow.add_pending(state)
                elif state.status == "interrupting":
                    self.workflow.interrupting[state.request] = state
            start = loaded.seq + 1
        else:
            self._seen, self._base, self._floor, self._last_ts = (0, ev.GENESIS_PREV), 0, 0, ""
            if self._snapshot is not None:
                try:
                    self._snapshot.reset(self._ledger_id)
                except Unusable:
                    self._snapshot, self.workflow.archive = None, None
            start = 1
        # Read without the lock up to the head the writer saw whole under it: never a line being
        # written or a torn tail being moved aside. The first step's catch-up reads the rest.
        head = self.ledger.head[0]
        self._redactions = Redactions.from_records(self.ledger.records(start, kind="redacted", until=head))
        self._fold(self.ledger.records(start, until=head), saving=loaded is None)
        self._save()

    def _snapshot_head_problem(self, loaded) -> bool:
        """Whether the ledger's event at the snapshot's seq lacks the hash it recorded (the ledger
        was cut or rewritten since: the snapshot is stale)."""
        place = loaded.place
        if not (isinstance(place, list) and len(place) == 2 and all(type(x) is int and x >= 0 for x in place)):
            place = None  # a hint that is not one: search instead
        try:
            return self.ledger.record_at(loaded.seq, place).hash != loaded.hash
        except (LedgerError, ValueError, TypeError, OSError):
            return True

    def _fold(self, records, *, saving: bool = False) -> None:
        """Check and fold events not yet seen, in order (those already folded are skipped).
        `saving`: a full replay, which writes the snapshot every SAVE_REPLAY events."""
        if self._broken is not None:
            raise self._broken
        for record in records:
            if record.seq <= self._seen[0]:
                continue
            if isinstance(record.event, ev.Redacted) and record.event.target not in self._redactions.paths:
                # A redaction rewrites an earlier line (it needs the ledger to itself, so no Gate
                # was open): open again, from the snapshot and the files as stored now.
                self._open()
                return
            self._fold_one(record)
            if saving and record.seq - self._base >= SAVE_REPLAY:
                self._save()

    def _fold_one(self, record: Record) -> None:
        seq, prev = self._seen
        try:
            problem = check_record(record, seq + 1, prev, self._last_ts, self._redactions)
            if problem is not None:
                raise LedgerCorrupt(problem.seq, problem.message, problem.segment, problem.line)
            if getattr(self, "signers", None) is not None and (
                    untrusted := self._trust_problem(record, getattr(self, "_live", False))):
                raise LedgerCorrupt(record.seq, untrusted, record.segment, record.line)
            try:
                self.workflow.step(record.seq, record.event)
            except Violation as exc:
                raise LedgerCorrupt(record.seq, f"unlawful history: {exc.message}", record.segment, record.line) from None
            if isinstance(record.event, ev.Redacted) and (problem := self._redactions.announcement_problem(record)):
                raise LedgerCorrupt(problem.seq, problem.message, problem.segment, problem.line)
        except LedgerCorrupt as exc:
            self._broken = exc
            raise
        self._folded(record)

    def _folded(self, record: Record) -> None:
        """What follows an event's fold: its request marked changed, the head moved. (The Gate
        keeps the arguments of a call it proposed itself; others' are read when needed.)"""
        event, seq = record.event, record.seq
        request = seq if isinstance(event, ev.Proposed) else getattr(event, "request", None)
        if request is not None:
            first = self._dirty.get(request, (seq, seq))[0]
            self._dirty[request] = (first, seq)
        if isinstance(event, ev.Proposed):
            if event.call_id is not None and self.workflow.archive is not None:
                self.workflow.archive.call_ids.add(event.call_id)
        elif isinstance(event, ev.Redacted):
            self._redacted_new.append((event.target, seq, event.path))
        elif request is not None:
            self._data.pop(request)  # an edit's new arguments, or a final request's: read again if ever needed
        self._seen = (seq, record.hash)
        self._last_ts = max(self._last_ts, event.ts)
        if self._history is not None:
            self._history.fold(record)

    def _save(self) -> None:
        """Write what changed since the last save to the snapshot, then keep in memory only the
        pending requests (the snapshot holds the rest). Nothing happens without a snapshot. A
        save that cannot be made now (another process holds the snapshot's write lock, the disk
        is full) changes nothing: the Gate keeps what it holds and tries again at its next save;
        a snapshot SQLite cannot read is left out when a lookup meets it (`_lost_snapshot`)."""
        if self._snapshot is None or self._seen[0] == 0:
            return
        states = {}
        for request, (first, last) in self._dirty.items():
            state = self.workflow.requests.get(request)
            if state is not None:
                states[request] = (first, last, state)
        try:
            at = self._snapshot.save(
                ledger_id=self._ledger_id, base=self._base, seq=self._seen[0], hash=self._seen[1], ts=self._last_ts,
                place=self.ledger.locate(self._seen[0]), states=states, call_ids=dict(self.workflow.by_call_id),
                edits=dict(self.workflow.edits), redacted=self._redacted_new, call_id_filter=self.workflow.archive.call_ids,
                roster=self.workflow.roster, policy_digest=self.workflow.policy_digest, pinned=self.workflow.pinned,
                standing=self.workflow.standing.values())
        except Unusable:
            return
        if at != self._seen[0]:
            # Not written: the snapshot moved back (rebuilt), or another Gate saved past this one's
            # seq (its rows may be newer than this Gate's view): keep everything in memory.
            return
        self._base = self._floor = self._seen[0]
        self._dirty, self._redacted_new = {}, []
        self.workflow.forget(list(self.workflow.requests))  # all but the pending: read again when needed

    def _lost_snapshot(self) -> None:
        """The snapshot became unreadable while this Gate relied on it for what it forgot: leave
        it out and open again from the ledger alone (a full replay; everything in memory)."""
        if self._snapshot is not None:
            self._snapshot.close()
        self._snapshot = None
        self._open()

    def _call_data(self, request: int) -> dict:
        """`{"args", "context"}` of an open request: the current arguments and the proposal's
        context, read from the ledger (the snapshot holds where, not what) and checked against
        the digests its state carries. Raises LedgerCorrupt when the stored data does not match."""
        data = self._data.get(request)
        if data is None:
            data = self._read_data([self._open_state(request)])[request]
        return data

    def _read_data(self, states: list[RequestState]) -> dict[int, dict]:
        """The data of these open requests (request → {"args", "context"}), from `_data` or read
        from the ledger in one pass (Store.records_at), each checked against its state's
        digests (and kept in `_data` as room allows). Raises LedgerCorrupt."""
        found = {s.request: d for s in states if (d := self._data.get(s.request)) is not None}
        missing = [s for s in states if s.request not in found]
        if not missing:
            return found
        seqs = {s.request for s in missing} | {s.data_seq for s in missing if s.data_seq}
        try:
            records = self.ledger.records_at(seqs)
        except LedgerError as exc:
            raise LedgerCorrupt(min(seqs), f"the stored arguments cannot be read: {exc}") from None
        for state in missing:
            try:
                proposal = records[state.request].data_value() or {}
                args = proposal.get("args")
                if state.data_seq and state.data_seq != state.request:
                    args = (records[state.data_seq].data_value() or {}).get("args")
                ok = value_digest(args) == state.digest and value_digest(proposal.get("context")) == state.context_digest
            except (KeyError, ArgumentsError, msgspec.DecodeError, RecursionError, AttributeError):
                ok = False
            if not ok:
                raise LedgerCorrupt(state.data_seq or state.request, "the stored arguments or context do not match their digests")
            data = records[state.data_seq or state.request].data
            found[state.request] = {"args": args, "context": proposal.get("context")}
            self._data.put(state.request, found[state.request], 4 * len(data) + 200)
        return found

    def _open_state(self, request: int) -> RequestState:
        """The state of a request (from memory or the snapshot). Raises UnknownRequest."""
        for _attempt in range(3):
            try:
                state = self.workflow.get(request)
                break
            except Behind:  # the snapshot cannot answer as of this Gate's seq: open again from it
                self._open()
            except Unusable:
                self._lost_snapshot()
        else:
            raise GateError("the snapshot kept changing while this Gate read it; try again")
        if state is None:
            raise UnknownRequest(f"request {request} was never proposed", request)
        return state

    def _copy_of(self, request: int) -> RequestState:
        """A copy of the request's state that the caller may keep: its own containers, made
        without copy.copy's generic path (a queue of 10,000 is copied in milliseconds)."""
        state = self._open_state(request)
        snapshot = object.__new__(RequestState)
        fields = dict(state.__dict__)
        fields.pop("_tally", None)
        fields["approvals"], fields["approvers"], fields["seqs"] = dict(state.approvals), list(state.approvers), list(state.seqs)
        snapshot.__dict__.update(fields)
        return snapshot
