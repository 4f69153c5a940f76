"""Every refusal of the service as a JSON error with a stable code and an HTTP status.

    {"error": {"code": "stale_digest", "message": "...", "request": 12}}

`code` is stable (clients branch on it; docs/service.md lists every one); `message` is for a
person and may change; `request` is there when the refusal is about one request. No refusal
carries a stack trace: an unexpected exception is logged on the server and answered as
`internal` (500).
"""

from __future__ import annotations

from ledger.store.log import LedgerCorrupt, LedgerError
from ledger.workflow import errors as gate_errors
from ledger.workflow import machine as wf


class ApiError(Exception):
    """A refusal: `status` (HTTP), `code` (stable, snake_case), `message` (for a person)."""

    def __init__(self, status: int, code: str, message: str, request: int | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.request = status, code, message, request

    def body(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.request is not None:
            error["request"] = self.request
        return {"error": error}


# Workflow violations (ledger.workflow.machine): code → HTTP status. The code is the violation's
# own (`stale-digest`), spelled with underscores.
_VIOLATION_STATUS = {
    wf.UnknownRequest: 404,
    wf.SelfApproval: 403,
    wf.NotAnApprover: 403,
    wf.DecisionNotAllowed: 403,
    wf.EditDenied: 422,
    wf.StaleDigest: 409,
    wf.RequestFinal: 409,
    wf.NotPending: 409,
    wf.NotInterruptible: 409,
    wf.DuplicateApproval: 409,
    wf.DeadlinePassed: 409,
    wf.NotApproved: 409,
    wf.AlreadyExecuted: 409,
    wf.NotStarted: 409,
    wf.DigestMismatch: 409,
}

_GATE_ERRORS = {
    gate_errors.InvalidCall: (422, "invalid_call"),
    gate_errors.CallIdConflict: (409, "call_id_conflict"),
    gate_errors.ExecutionUnknown: (409, "execution_unknown"),
    gate_errors.ExecutionInProgress: (409, "execution_in_progress"),
    gate_errors.PolicyMismatch: (409, "policy_mismatch"),
    gate_errors.NotAllowedToCancel: (403, "not_allowed_to_cancel"),
    gate_errors.NoPolicy: (503, "no_policy"),
    gate_errors.UnsignedDecision: (409, "unsigned_decision"),
    gate_errors.UnknownPolicy: (409, "unknown_policy"),
}


def from_exception(exc: BaseException) -> ApiError | None:
    """The ApiError a Gate or workflow exception stands for, or None for an unexpected one."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, wf.Violation):
        status = next((s for cls, s in _VIOLATION_STATUS.items() if isinstance(exc, cls)), 409)
        return ApiError(status, exc.code.replace("-", "_"), exc.message, getattr(exc, "request", None))
    for cls, (status, code) in _GATE_ERRORS.items():
        if isinstance(exc, cls):
            return ApiError(status, code, str(exc), getattr(exc, "request", None))
    if isinstance(exc, LedgerCorrupt):
        return ApiError(503, "ledger_corrupt", f"the ledger does not verify; the service stopped deciding: {exc}")
    if isinstance(exc, LedgerError):
        return ApiError(503, "ledger_unavailable", f"the ledger cannot be written now: {exc}")
    return None


# Codes the service itself gives (besides the workflow's and the Gate's above): docs/service.md.
UNAUTHENTICATED = "unauthenticated"  # 401: no token, or one the roster does not list
FORBIDDEN = "forbidden"  # 403: a principal of the wrong kind, or another agent's request
MALFORMED_JSON = "malformed_json"  # 400: the body is not JSON
INVALID_BODY = "invalid_body"  # 422: JSON, but not the shape the endpoint takes (an unknown field among them)
NOT_FOUND = "not_found"  # 404: no such endpoint or call id
TIMEOUT_RANGE = "invalid_parameter"  # 422: a query parameter out of range
TOO_MANY_STREAMS = "too_many_streams"  # 429: the principal holds MAX_STREAMS_PER_PRINCIPAL event streams open (service.core)
INTERNAL = "internal"  # 500: a bug; the server's log has the details
