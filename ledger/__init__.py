"""The countersign ledger: events, the hash-chained log, verification, the approval workflow
(the Gate) and DuckDB views.

    from ledger import Gate, Ledger, verify

The names below are imported on first use (PEP 562), so that a process which needs only the
Gate (`countersign hook claude-code`, once per tool call) does not import verification,
checkpoints or asyncio (about 40 ms of its cold start).
"""

import os
from importlib import import_module
from typing import TYPE_CHECKING

from ledger.store.log import OPEN_CHECKS

_WHERE = {
    "AsyncGate": "ledger.workflow.async_gate",
    **dict.fromkeys(("CallIdConflict", "Execution", "ExecutionInProgress", "ExecutionUnknown", "Gate", "GateError",
                     "InvalidCall", "Proposal", "Run"), "ledger.workflow.gate"),
    **dict.fromkeys(("Ledger", "LedgerBroken", "LedgerCorrupt", "LedgerError", "LedgerLocked", "LedgerReader",
                     "LedgerUnreadable"), "ledger.store.log"),
    "Report": "ledger.proof.verify", "verify": "ledger.proof.verify",
    "RequestState": "ledger.workflow.machine", "Violation": "ledger.workflow.machine",
}

__all__ = [
    "AsyncGate", "CallIdConflict", "Execution", "ExecutionInProgress", "ExecutionUnknown", "Gate", "GateError", "InvalidCall", "Ledger",
    "LedgerBroken", "LedgerCorrupt", "LedgerError", "LedgerLocked", "LedgerReader", "LedgerUnreadable",
    "Proposal", "Report", "RequestState", "Run", "Violation", "verify",
]

if TYPE_CHECKING:
    from ledger.proof.verify import Report, verify
    from ledger.store.log import Ledger, LedgerBroken, LedgerCorrupt, LedgerError, LedgerLocked, LedgerReader, LedgerUnreadable
    from ledger.workflow.async_gate import AsyncGate
    from ledger.workflow.gate import CallIdConflict, Execution, ExecutionInProgress, ExecutionUnknown, Gate, GateError, InvalidCall, Proposal, Run
    from ledger.workflow.machine import RequestState, Violation


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")


def _refuse_if_behind_checkpoint(path) -> None:
    """The writer's checkpoint check (ledger.proof.checkpoint.refuse_if_behind_checkpoint: a
    ledger shorter than, or diverging from, its latest signed checkpoint is never extended),
    registered here so that it is in force for every writer, however the writer was imported:
    importing any ledger module runs this package first. The checkpoint module (and verification
    with it) is imported only when the ledger has a checkpoints/ directory; without one there
    is no checkpoint to contradict (checkpoint_files lists none)."""
    if not os.path.isdir(os.path.join(path, "checkpoints")):  # ledger.proof.checkpoint.CHECKPOINTS_DIR
        return
    from ledger.proof.checkpoint import refuse_if_behind_checkpoint

    refuse_if_behind_checkpoint(path)


OPEN_CHECKS.append(_refuse_if_behind_checkpoint)
