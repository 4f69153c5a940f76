"""The Gate's history index: every run's earlier calls, folded from the ledger's events, for
policies that read history (`Policy.reads_history`; docs/policy-language.md, "History and
provenance").

    index = HistoryIndex()
    for record in ledger.records():
        index.fold(record)
    policy.evaluate(tool, args, context, history=index.run("run-42"))

`fold` takes the records in seq order (a record at or below the last folded seq is ignored, so
folding twice is harmless) and updates the `dsl.history.History` of the record's run: a proposal
adds a call (its arguments from the line's data), the later events of its request change its
status (ledger.events: interrupted → pending; approved / edited until the quorum of the
requirements in force is met → allowed, counted afresh from an escalation; rejected, responded, expired, cancelled; execution_started
→ running; executed → executed or failed, with the kept result), and a standing decision decides
a proposal it covers. Nothing but the records is read, so the index at seq N is a function of
the ledger's first N events: a replay folds the same index and the policy decides the same.

Bounds: each run as `dsl.history` bounds it (RUN_MAX_CALLS calls, RUN_MAX_BYTES bytes); over all
runs MAX_BYTES of recorded arguments and results: past it, the runs whose last event is oldest are
dropped, and a run dropped is, from then on, a history that errors (its earlier calls are no
longer known; a condition on it never allows). A call without a run (`run` null) has no run to
read: `run(None)` is a broken history, whose every read is an evaluation error.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgspec

from dsl.history import History
from ledger import events as ev
from ledger.workflow.machine import Tally

MAX_BYTES = 64 * 1024 * 1024
"""What the index keeps of all runs' recorded arguments and results (bytes of JSON text)."""
MAX_DROPPED = 100_000
"""How many dropped run ids the index remembers (past it, the oldest are forgotten: a run that
old and that long silent starts again with an empty history)."""

NO_RUN = ("the call was proposed without a run, so there is no run's history to read (propose it with "
          "run=..., the agent's conversation or task id)")
_DROPPED = "the run's history was dropped from the Gate's index (its runs' history exceeded {mb} MiB)"


class HistoryIndex:
    """Per-run histories (module docstring). `last_seq` is the seq of the last record folded."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.last_seq = 0
        self.runs: OrderedDict[str, History] = OrderedDict()  # by the seq of the run's last event
        self.dropped: OrderedDict[str, None] = OrderedDict()
        # request seq → (run, its call record, the tally of its approvals or None)
        self._requests: dict[int, list] = {}
        self._standing: dict[int, str] = {}  # remembered seq → approve | reject
        self._bytes = 0

    def run(self, run: str | None) -> History | None:
        """The history of `run` as folded so far (None: none of its calls yet). A call proposed
        without a run has no run's history to read: a broken History, whose every read is an
        evaluation error (fail closed: an empty history would let "at most 5 payouts per run"
        allow every payout of a host that never names its runs)."""
        if run is None:
            history = History()
            history.fail(NO_RUN)
            return history
        history = self.runs.get(run)
        if history is None and run in self.dropped:
            return self._broken()
        return history

    def _broken(self) -> History:
        history = History()
        history.fail(_DROPPED.format(mb=self.max_bytes // (1024 * 1024)))
        return history

    def fold(self, record: Any) -> None:
        """Fold one ledger record (`ledger.store.log.Record`: seq, event, data bytes)."""
        if record.seq <= self.last_seq:
            return
        self.last_seq = record.seq
        event = record.event
        if isinstance(event, ev.Proposed):
            self._proposed(record.seq, event, record.data)
            return
        if isinstance(event, ev.Remembered):
            self._standing[record.seq] = event.decision
        request = getattr(event, "request", None)
        entry = self._requests.get(request) if request is not None else None
        if entry is None:
            return
        run, call, tally = entry
        history = self.runs.get(run)
        if history is None or call is None:  # dropped meanwhile
            self._requests.pop(request, None)
            return
        before = history.bytes
        if isinstance(event, ev.Interrupted):
            entry[2] = Tally(event.requirements)
            history.set_status(call, "pending")
        elif isinstance(event, ev.Escalated):
            # the next stage counts afresh, as the workflow does: a stage-1 approval is no
            # approval of stage 2 (the call stays pending until the new stage's quorum is met)
            entry[2] = Tally(event.requirements)
        elif isinstance(event, ev.Approved):
            history.add_decider(call, event.approver)
            if tally is not None:
                tally.add(event.approver)
                if tally.met:
                    history.set_status(call, "allowed")
        elif isinstance(event, ev.Edited):
            history.add_decider(call, event.editor)
            data = _decoded(record.data)
            if isinstance(data, dict) and isinstance(data.get("args"), dict):
                history.set_args(call, data["args"])
            entry[2] = tally = Tally(event.requirements)
            tally.add(event.editor)
            history.set_status(call, "allowed" if tally.met else "pending")
        elif isinstance(event, (ev.Rejected, ev.Responded)):
            history.add_decider(call, event.approver)
            history.set_status(call, "rejected" if isinstance(event, ev.Rejected) else "responded")
        elif isinstance(event, ev.Cancelled):
            history.add_decider(call, event.by)
            history.set_status(call, "cancelled")
        elif isinstance(event, ev.Expired):
            history.set_status(call, "expired")
        elif isinstance(event, ev.ExecutionStarted):
            history.set_status(call, "running")
        elif isinstance(event, ev.Executed):
            history.set_status(call, "executed" if event.outcome == "ok" else "failed")
            data = _decoded(record.data) if record.data not in (b"null", b"") else None
            if isinstance(data, dict) and "result" in data:
                history.set_result(call, data["result"])
        else:
            return
        self._touch(run, history, before)
        if history.broken is not None or event.__struct_config__.tag in ("rejected", "responded", "cancelled",
                                                                          "expired", "executed"):
            self._requests.pop(request, None)  # final: nothing more happens to it

    def _proposed(self, seq: int, event: ev.Proposed, data: bytes) -> None:
        run = event.run
        if run is None:
            return
        history = self.runs.get(run)
        if history is None:
            history = self._broken() if run in self.dropped else History()
            self.runs[run] = history
        decoded = _decoded(data)
        args = decoded.get("args") if isinstance(decoded, dict) else None
        before = history.bytes
        call = history.add_call(seq, event.tool, args if isinstance(args, dict) else {}, event.effect,
                                tuple(r.id for r in event.rules))
        if call is not None and event.remembered is not msgspec.UNSET:  # a standing decision decided it
            decision = self._standing.get(event.remembered.by)
            if decision is not None:
                history.set_status(call, "allowed" if decision == "approve" else "rejected")
        if call is not None and call["status"] in ("pending", "allowed"):  # later events change it
            self._requests[seq] = [run, call, None]
        self._touch(run, history, before)

    def _touch(self, run: str, history: History, before: int) -> None:
        """The run's last event is the newest: move it last; drop the oldest runs past the bound."""
        self.runs.move_to_end(run)
        self._bytes += history.bytes - before
        while self._bytes > self.max_bytes and len(self.runs) > 1:
            old, dropped = self.runs.popitem(last=False)
            self._bytes -= dropped.bytes
            self.dropped[old] = None
            if len(self.dropped) > MAX_DROPPED:
                self.dropped.popitem(last=False)
            for call in dropped.calls:
                self._requests.pop(call["seq"], None)


def _decoded(data: bytes) -> Any:
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, TypeError):
        return None
