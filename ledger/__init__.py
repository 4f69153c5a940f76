"""The countersign ledger: events, the hash-chained log, verification, the approval workflow
(the Gate) and DuckDB views.

    from ledger import Gate, Ledger, verify
"""

# The checkpoint module registers the writer's checkpoint check (ledger.store.log.OPEN_CHECKS):
# imported here, it is in force for every writer.
from ledger.proof import checkpoint as _checkpoint  # noqa: F401
from ledger.workflow.async_gate import AsyncGate
from ledger.workflow.gate import CallIdConflict, Execution, ExecutionInProgress, ExecutionUnknown, Gate, GateError, InvalidCall, Proposal, Run
from ledger.store.log import Ledger, LedgerBroken, LedgerCorrupt, LedgerError, LedgerLocked, LedgerReader, LedgerUnreadable
from ledger.proof.verify import Report, verify
from ledger.workflow.machine import RequestState, Violation

__all__ = [
    "AsyncGate", "CallIdConflict", "Execution", "ExecutionInProgress", "ExecutionUnknown", "Gate", "GateError", "InvalidCall", "Ledger",
    "LedgerBroken", "LedgerCorrupt", "LedgerError", "LedgerLocked", "LedgerReader", "LedgerUnreadable",
    "Proposal", "Report", "RequestState", "Run", "Violation", "verify",
]
