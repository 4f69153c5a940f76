"""The countersign ledger: events, the hash-chained log, verification, the approval workflow
(the Gate) and DuckDB views.

    from ledger import Gate, Ledger, verify
"""

from ledger.gate import CallIdConflict, Execution, ExecutionInProgress, ExecutionUnknown, Gate, GateError, InvalidCall, Proposal
from ledger.log import Ledger, LedgerBroken, LedgerCorrupt, LedgerError, LedgerLocked, LedgerReader, LedgerUnreadable
from ledger.verify import Report, verify
from ledger.workflow import RequestState, Violation

__all__ = [
    "CallIdConflict", "Execution", "ExecutionInProgress", "ExecutionUnknown", "Gate", "GateError", "InvalidCall", "Ledger",
    "LedgerBroken", "LedgerCorrupt", "LedgerError", "LedgerLocked", "LedgerReader", "LedgerUnreadable",
    "Proposal", "Report", "RequestState", "Violation", "verify",
]
