"""The Gate's own errors (a step the workflow's rules refuse raises a
ledger.workflow.machine.Violation instead)."""

from __future__ import annotations


class GateError(Exception):
    """Base of the Gate's own errors (workflow violations are `ledger.workflow.Violation`)."""


class InvalidCall(GateError):
    """A proposed call is malformed: empty tool name, arguments that are not a JSON object, ..."""


class CallIdConflict(GateError):
    """A call id was proposed again with different arguments or a different tool."""


class ExecutionUnknown(GateError):
    """The call was started but its outcome was never recorded (a crash while it ran). It is
    never run again; someone must find out what happened."""


class ExecutionInProgress(GateError):
    """The call is running now, in another thread; its outcome is not recorded yet."""


class PolicyMismatch(GateError):
    """An edit in a Gate whose policy is not the one that decided the call: the edited call must
    re-enter the same policy (another one, older or laxer, could allow what the call's denies)."""

    def __init__(self, message: str, request: int | None = None):
        super().__init__(message)
        self.request = request


class NotAllowedToCancel(GateError):
    """A cancel by someone who neither proposed the call nor may decide it."""

    def __init__(self, message: str, request: int | None = None):
        super().__init__(message)
        self.request = request


class NoPolicy(GateError):
    """This Gate was opened without a policy (a reviewer's): it cannot propose or edit."""


class UnsignedDecision(GateError):
    """A call whose approval or edit is not signed as its Gate's roster requires (Gate.require_signatures)."""


class UnknownPolicy(GateError):
    """A call proposed under a policy its Gate does not trust (Gate.trust_policies)."""
