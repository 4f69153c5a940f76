"""Claude Code's hooks, decided by countersign: `countersign hook claude-code` (docs/adapters/claude-code.md).

Claude Code runs the command once per hook event with one JSON object on stdin and reads its
answer from stdout and the exit code (Claude Code's hooks reference, "Hook input and output";
the input shapes as the Claude Agent SDK types them: claude_agent_sdk.types PreToolUseHookInput,
PostToolUseHookInput, PostToolUseFailureHookInput; PermissionDenied's as the bundled CLI builds
it: tool_name, tool_input, tool_use_id, reason). `hook_event_name` says which:

    PreToolUse          propose the call (tool_name, tool_input; context cwd, home, session_id,
                        permission_mode; run = session_id; call id = tool_use_id) and answer
                        hookSpecificOutput.permissionDecision: allow, deny (the policy's reason,
                        an instruction to the model, as permissionDecisionReason) or ask
    PostToolUse         record that the call ran: execution_started, then executed "ok" with the
                        digest of tool_response (the response itself only with --keep-result)
    PostToolUseFailure  the same, executed "error" with the payload's `error`
    PermissionDenied    Claude Code's auto-mode classifier refused the call: the request is
                        cancelled by its proposer with that reason (it never ran)

An ask is answered in one of two ways (`on_ask`):

- "dialog": Claude Code shows its own permission dialog. The person who answers it is the OS
  account running Claude Code (getpass.getuser(): authenticated by the operating system, never
  by the agent); the agent proposes as `claude-code:<session_id>`, another identity, so four-eyes
  holds. When the call then runs, PostToolUse records that person's approval of the arguments
  the dialog showed, then the execution and its outcome. The dialog is offered only when that
  one approval can settle the request (the person may decide it, "approve" is an allowed
  decision, and one more approval meets the quorum); otherwise the hook waits on countersign's
  queue as in "wait", and says why. Through the service, the person's approval needs their
  reviewer token (COUNTERSIGN_REVIEWER_TOKEN); without one every ask waits on the queue.
  The proposal records that the hook answers asks so: its context holds
  `countersign_on_ask: "dialog"` (DIALOG_CONTEXT). PostToolUse records the dialog's approval only
  for a request whose recorded context says so, that no one has approved yet, and that one
  approval by the person settles: the dialog was offered for it. A call that ran while its
  request still waited otherwise (an ask needing two approvers, or any ask in "wait" mode, whose
  hook Claude Code stopped at its timeout and then ran the call anyway, as in bypassPermissions)
  ran without countersign's approval: no approval is invented; the
  request is cancelled by its proposer with a reason saying that Claude Code ran it without
  countersign's approval (so that no reviewer is asked about a call that already ran), and the
  user is told.
- "wait": the hook waits on countersign's own queue (`countersign review`, the approval service,
  its web inbox) for at most `wait` seconds (the hook's `timeout` minus a margin). approve →
  allow (edit: allow with `updatedInput`, the edited arguments); reject → deny with the
  reviewer's reason; respond → deny with the reviewer's message; silence → the request is
  cancelled and the call denied. Never allow by timeout.

A repeated tool_use_id: the same call again answers as the first (one request, never run
twice). A tool_use_id proposed before with another input (164 corpus payloads log a summary
first, then the full input) never rides on the first's decision: the second input is proposed
as a call of its own, with the call id `<tool_use_id>#<digest>` (16 hex digits of the digest of
the tool and the input), and decided by the policy on what it holds; PostToolUse finds the
request whose arguments are the ones that ran. A payload without a `tool_input` object cannot be
judged and is denied, proposing nothing.

Errors fail closed and never print a traceback: a PreToolUse that cannot be decided (the ledger
unavailable, a policy that does not load, a call that cannot be recorded) is denied with the
reason; input that is not a JSON object, or an event this hook does not handle, exits 2 with the
reason on stderr (Claude Code blocks a PreToolUse on exit 2). For the events after a call ran,
where nothing can be blocked any more, a failure to record is reported to the user
(`systemMessage`) and on stderr.

Imports are lazy: the hook runs once per tool call in a fresh process, so it imports neither
typer nor the CLI (cli/entry.py dispatches here first) and loads the policy only for a local
ledger.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a hook process never needs it
if TYPE_CHECKING:  # the annotations' names only (they are never evaluated: __future__ annotations)
    from typing import Any, Callable

EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied")
ON_ASK = ("dialog", "wait")
DEFAULT_TIMEOUT = 300  # seconds: the `timeout` the printed settings give PreToolUse
POST_TIMEOUT = 60  # seconds: the `timeout` of the events that only record
MARGIN = 15  # seconds the hook keeps for itself between giving up waiting and Claude Code's timeout
DEFAULT_WAIT = DEFAULT_TIMEOUT - MARGIN
PROPOSER_PREFIX = "claude-code"
DERIVED_SEP = "#"  # <tool_use_id>#<16 hex>: a second input under one tool_use_id

DIALOG_COMMENT = "approved in Claude Code's permission dialog"
DIALOG_CONTEXT = "countersign_on_ask"  # in a proposal's context: "dialog" when the hook may answer its ask with the dialog


class Reply:
    """What the hook process prints and how it exits: `output` (a JSON object for stdout, or
    None), `exit_code` (0, or 2: a blocking error whose reason is `stderr`), `stderr`."""

    __slots__ = ("output", "exit_code", "stderr")

    def __init__(self, output: dict | None = None, exit_code: int = 0, stderr: str = ""):
        self.output, self.exit_code, self.stderr = output, exit_code, stderr

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.output, self.exit_code, self.stderr) == (other.output, other.exit_code, other.stderr)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass without frozen=True

    def __repr__(self) -> str:
        return f"Reply(output={self.output!r}, exit_code={self.exit_code!r}, stderr={self.stderr!r})"

    @property
    def stdout(self) -> str:
        return "" if self.output is None else json.dumps(self.output, ensure_ascii=False)


def pre_tool_use(decision: str, reason: str | None = None, updated_input: dict | None = None) -> Reply:
    """A PreToolUse answer: hookSpecificOutput.permissionDecision allow / deny / ask."""
    out: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": decision}
    if reason:
        out["permissionDecisionReason"] = reason
    if updated_input is not None:
        out["updatedInput"] = updated_input
    return Reply({"hookSpecificOutput": out})


def deny(reason: str) -> Reply:
    return pre_tool_use("deny", reason)


def blocked(reason: str) -> Reply:
    """Exit code 2 with the reason on stderr: what Claude Code treats as a blocking error for
    any event (for PreToolUse it blocks the call and shows the reason to the model)."""
    return Reply(None, 2, reason)


def recorded(event: str, note: str | None = None) -> Reply:
    """The answer to an event after the call ran: nothing to decide; `note` (a failure to record)
    goes to the user as systemMessage and to stderr."""
    if not note:
        return Reply({})
    return Reply({"systemMessage": f"countersign: {note}"}, 0, f"countersign: {event}: {note}")


class CannotDecide(Exception):
    """A call the hook cannot put to the policy (no tool_input, a call id reused twice over)."""


class Call:
    """One tool call as Claude Code describes it: `event`, `tool`, `args` (tool_input, or None
    when it is not an object), `tool_use_id`, `session`, `context` (context_of), `payload`."""

    __slots__ = ("event", "tool", "args", "tool_use_id", "session", "context", "payload")

    def __init__(self, event: str, tool: str, args: dict | None, tool_use_id: str | None, session: str | None,
                 context: dict, payload: dict):
        self.event, self.tool, self.args, self.tool_use_id = event, tool, args, tool_use_id
        self.session, self.context, self.payload = session, context, payload

    def __repr__(self) -> str:
        return (f"Call(event={self.event!r}, tool={self.tool!r}, args={self.args!r}, tool_use_id={self.tool_use_id!r}, "
                f"session={self.session!r}, context={self.context!r})")


def call_of(payload: dict) -> Call:
    event = payload.get("hook_event_name")
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise CannotDecide("the hook input names no tool (tool_name)")
    args = payload.get("tool_input")
    session = payload.get("session_id")
    session = session if isinstance(session, str) and session else None
    use_id = payload.get("tool_use_id")
    use_id = use_id if isinstance(use_id, str) and use_id else None
    return Call(event, tool, args if isinstance(args, dict) else None, use_id, session, context_of(payload), payload)


def context_of(payload: dict) -> dict:
    """The policy's `context`: `cwd`, and `home` when the transcript path shows it (as
    dsl.claude_import.hook_context says, written out here so that a hook through the service
    imports no part of the policy language), `session_id` and `permission_mode` when the
    payload has them. The transcript path itself is left out."""
    context: dict[str, str] = {}
    cwd = payload.get("cwd")
    if isinstance(cwd, str):
        context["cwd"] = cwd
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and "/.claude/" in transcript and transcript.startswith("/"):
        context["home"] = transcript.split("/.claude/", 1)[0] or "/"
    elif isinstance(transcript, str) and "\\.claude\\" in transcript and transcript[1:3] == ":\\":
        context["home"] = transcript.split("\\.claude\\", 1)[0]
    for name in ("session_id", "permission_mode"):
        value = payload.get(name)
        if isinstance(value, str):
            context[name] = value
    return context


def proposer_of(session: str | None) -> str:
    """The agent's identity on a local ledger: `claude-code:<session_id>` (never the OS account,
    which answers the dialog)."""
    return f"{PROPOSER_PREFIX}:{session}" if session else PROPOSER_PREFIX


def derived_call_id(tool_use_id: str, tool: str, args: dict) -> str:
    """The call id of a second, different input under one tool_use_id (module docstring): 16 hex
    digits of SHA-256 over the tool and the input as canonical JSON (sorted keys), so that
    PreToolUse and PostToolUse derive the same id without importing the ledger."""
    import hashlib

    text = json.dumps({"tool": tool, "args": args}, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return f"{tool_use_id}{DERIVED_SEP}{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def os_account() -> str:
    """Who sits at Claude Code's dialog: the OS account running it."""
    from adapters.backend import _os_account

    return _os_account()


class ClaudeCodeHook:
    """Answers one hook payload at a time (`handle`), through the Backend `backend_for(proposer)`
    returns (adapters.backend: a LocalBackend on a Gate, or a ServiceBackend; the proposer is
    ignored by the service, which knows its agent from the token). `on_ask` "dialog" or "wait",
    `wait` seconds at most (module docstring); `reviewer`: who answers Claude Code's dialog
    (default the OS account); `keep_result`: record tool_response itself beside its digest.
    `handle` never raises."""

    def __init__(self, backend_for: Callable[[str], Any], *, on_ask: str = "dialog", wait: float = DEFAULT_WAIT,
                 reviewer: str | None = None, keep_result: bool = False):
        if on_ask not in ON_ASK:
            raise ValueError(f"on_ask is one of {', '.join(ON_ASK)}, not {on_ask!r}")
        self.backend_for, self.on_ask, self.wait = backend_for, on_ask, max(0.0, float(wait))
        self.reviewer = reviewer or os_account()
        self.keep_result = keep_result

    # --- entry ------------------------------------------------------------------------------

    def handle(self, payload: Any) -> Reply:
        """The Reply to one payload (a dict, or the JSON text of one)."""
        if isinstance(payload, (str, bytes)):
            try:
                payload = json.loads(payload)
            except ValueError as exc:
                return blocked(f"countersign: the hook input is not JSON ({exc}); the call was not run")
        if not isinstance(payload, dict):
            return blocked("countersign: the hook input is not a JSON object; the call was not run")
        event = payload.get("hook_event_name")
        if event not in EVENTS:
            return blocked(f"countersign: this hook handles {', '.join(EVENTS)}, not {event!r}; the call was not run")
        try:
            if event == "PreToolUse":
                return self._pre(payload)
            return self._after(event, payload)
        except Exception as exc:  # fail closed: a decision that cannot be made denies; never a traceback
            message = _error_text(exc)
            if event == "PreToolUse":
                return deny(f"countersign could not decide this call, so it was not run: {message}")
            return recorded(event, f"could not record the call's outcome: {message}")

    # --- PreToolUse -------------------------------------------------------------------------

    def _pre(self, payload: dict) -> Reply:
        from adapters.backend import BackendError

        try:
            call = call_of(payload)
            if call.args is None:
                raise CannotDecide("the hook input has no tool_input object, so the call cannot be judged")
        except CannotDecide as exc:
            return deny(f"countersign: {exc}; it was not run.")
        if self.on_ask == "dialog":
            call.context[DIALOG_CONTEXT] = "dialog"  # recorded with the proposal: PostToolUse reads it back
        backend = self.backend_for(proposer_of(call.session))
        try:
            verdict, call_id = self._propose(backend, call)
            return self._answer(backend, call, verdict)
        except BackendError as exc:
            return deny(f"countersign could not decide this call, so it was not run: {exc.message}")
        except CannotDecide as exc:
            return deny(f"countersign: {exc}; it was not run.")

    def _propose(self, backend, call: Call):
        """Propose under tool_use_id, or its derived id when that id holds another input."""
        from adapters.backend import BackendError

        kwargs = {"run": call.session, "context": call.context}
        if call.tool_use_id is None:
            return backend.propose(call.tool, call.args, call_id=None, **kwargs), None
        try:
            return backend.propose(call.tool, call.args, call_id=call.tool_use_id, **kwargs), call.tool_use_id
        except BackendError as exc:
            if exc.code not in ("CallIdConflict", "call_id_conflict"):
                raise
        derived = derived_call_id(call.tool_use_id, call.tool, call.args)
        try:
            return backend.propose(call.tool, call.args, call_id=derived, **kwargs), derived
        except BackendError as exc:
            if exc.code in ("CallIdConflict", "call_id_conflict"):
                raise CannotDecide(f"the tool_use_id {call.tool_use_id!r} was proposed before with this input and "
                                   "another context or by another agent") from None
            raise

    def _answer(self, backend, call: Call, verdict) -> Reply:
        label = f"countersign request {verdict.request}"
        status = verdict.status
        if status == "allowed":
            return pre_tool_use("allow", verdict.reason or f"Allowed by the policy ({label}).")
        if status == "denied":
            return deny(verdict.reason or f"Denied by the policy ({label}).")
        if status in ("pending", "interrupting"):
            if self.on_ask == "dialog":
                can, why = self._dialog_settles(backend, verdict)
                if can:
                    needs = verdict.reason or "The policy asks a person to decide this call."
                    return pre_tool_use("ask", f"{needs} Approving here is recorded as {self.reviewer}'s approval "
                                               f"({label}).")
                return self._wait(backend, call, verdict.request, note=why)
            return self._wait(backend, call, verdict.request)
        return self._settled(backend, backend.get(verdict.request), call)

    def _dialog_settles(self, backend, verdict) -> tuple[bool, str]:
        """Whether one approval by the person at Claude Code's dialog settles the request."""
        gate = getattr(backend, "gate", None)
        if gate is None:  # the service: the person's approval goes through their reviewer token
            if getattr(backend, "reviewer_token", None):
                return True, ""
            return False, "no reviewer token (COUNTERSIGN_REVIEWER_TOKEN) for the person at Claude Code's dialog"
        from ledger.workflow.machine import Tally

        state = gate.get(verdict.request)
        reqs = state.requirements
        who = self.reviewer
        if reqs is None or "approve" not in reqs.decisions:
            return False, "the policy does not let this call be approved as it stands"
        if who == state.proposer:
            return False, f"{who} proposed the call"
        tally = Tally(reqs)
        for approver in state.approvals:
            tally.add(approver)
        if not tally.allows(who):
            return False, f"{who}, at Claude Code's dialog, is not among its approvers ({verdict.needs or 'see the policy'})"
        tally.add(who)
        if not tally.met:
            return False, f"one approval does not meet its requirement ({getattr(verdict, 'needs', None) or reqs.describe()})"
        return True, ""

    def _dialog_offered(self, backend, state) -> tuple[bool, str]:
        """Whether PreToolUse answered this waiting request with Claude Code's dialog (module
        docstring): its recorded context says the hook offers it, no one has approved it yet, and
        one approval by the person at the dialog settles it. Else (False, why not)."""
        gate = getattr(backend, "gate", None)
        if gate is not None:
            current = gate.get(state.request)
            context, approved, stage = gate.stored_context(state.request), list(current.approvals), current.stage
        else:
            view = backend.details(state.request)
            context, approved = view.get("context"), (view.get("quorum") or {}).get("approved_by") or []
            stage = view.get("stage") or 1
        if not isinstance(context, dict) or context.get(DIALOG_CONTEXT) != "dialog":
            return False, "the hook did not offer Claude Code's dialog for it (it waited on countersign's queue)"
        if stage != 1:  # PreToolUse judged the first stage's approvers; a later stage's were never offered a dialog
            return False, "it escalated after PreToolUse answered it (the dialog was judged for its first stage)"
        if approved:
            return False, f"it waited on countersign's queue for more approvals than {', '.join(approved)}'s"
        return self._dialog_settles(backend, state)

    def _wait(self, backend, call: Call, request: int, note: str = "") -> Reply:
        """Wait on countersign's queue; silence cancels the request and denies the call."""
        from adapters.backend import BackendError

        settled = backend.wait(request, timeout=self.wait)
        if settled.waiting:
            reason = f"No reviewer decided within {self.wait:g} seconds"
            try:
                settled = backend.cancel(request, reason=f"{reason}: Claude Code's hook stopped waiting")
            except BackendError:  # decided meanwhile: answer what was decided
                settled = backend.get(request)
            if settled.waiting or settled.status == "cancelled":
                why = f" ({note})" if note else ""
                return deny(f"{reason}{why}; the call was not run (countersign request {request} was cancelled). "
                            "Do not retry it without asking the user.")
        return self._settled(backend, settled, call)

    def _settled(self, backend, settled, call: Call) -> Reply:
        """The answer for a request that is no longer waiting."""
        label = f"countersign request {settled.request}"
        status = settled.status
        if status in ("allowed", "approved"):
            reason = f"Approved by {settled.decided_by} ({label})." if status == "approved" else f"Allowed ({label})."
            updated = None
            if settled.edits:  # run what the reviewer approved, not what the model proposed
                updated = current_arguments(backend, settled.request)
                reason = f"Approved with edited arguments by {settled.decided_by} ({label})."
            return pre_tool_use("allow", reason, updated)
        if status == "rejected":
            return deny(settled.reason or f"A reviewer rejected this call ({label}).")
        if status == "responded":
            return deny(settled.reason if settled.reason is not None else f"A reviewer answered in place of the tool ({label}).")
        if status in ("executed", "executing"):
            return deny(f"This call (tool_use_id {call.tool_use_id}) ran already; it is not run twice ({label}).")
        if status == "expired":
            return deny(settled.reason or f"No one decided in time; the call was not run ({label}).")
        if status == "cancelled":
            return deny(settled.reason or f"The call was withdrawn and not run ({label}).")
        if status == "denied":
            return deny(settled.reason or f"Denied by the policy ({label}).")
        return deny(f"countersign request {settled.request} is {status}; the call was not run.")

    # --- after the call ---------------------------------------------------------------------

    def _after(self, event: str, payload: dict) -> Reply:
        from adapters.backend import BackendError

        try:
            call = call_of(payload)
        except CannotDecide as exc:
            return recorded(event, str(exc))
        if call.tool_use_id is None:
            return recorded(event, "the hook input has no tool_use_id, so the call cannot be found in the ledger")
        backend = self.backend_for(proposer_of(call.session))
        try:
            state = self._find(backend, call)
            if state is None:
                return recorded(event, f"{call.tool} call {call.tool_use_id} was never proposed to countersign "
                                       "(its PreToolUse did not reach the hook); nothing was recorded")
            if event == "PermissionDenied":
                return self._denied(backend, call, state)
            return self._ran(backend, event, call, state)
        except BackendError as exc:
            return recorded(event, f"could not record {call.tool} call {call.tool_use_id}: {exc.message}")

    def _find(self, backend, call: Call):
        """The request for this call: under tool_use_id, or its derived id, proposed in this
        session (its run is the payload's session_id and, on a local ledger, its proposer
        `claude-code:<session_id>`: a tool_use_id reused by another session is that session's
        call, as PreToolUse's conflict check has it), whose tool is this one and whose arguments
        (as proposed, or as edited) are the input that ran."""
        from ledger.digest import ArgumentsError, value_digest

        try:
            digest = value_digest(call.args) if call.args is not None else None
        except ArgumentsError:
            digest = None
        proposer = getattr(backend, "proposer", None)  # a local ledger's; the service answers its agent's calls only
        found = []
        for call_id in (call.tool_use_id, derived_call_id(call.tool_use_id, call.tool, call.args or {})):
            state = backend.find(call_id)
            if state is not None and (state.run != call.session or proposer not in (None, state.proposer)):
                continue  # another session's call under the same id
            if state is not None and (state.tool in (None, call.tool)):
                found.append(state)
                if digest is None or digest in (state.args_digest, original_digest(backend, state)):
                    return state
        if found:
            raise MismatchedInput(found[0].request)
        return None

    def _ran(self, backend, event: str, call: Call, state) -> Reply:
        """Record an execution Claude Code reports: the dialog's approval first when the request
        still waits for one, then the start and the outcome."""
        from adapters.backend import BackendError, Outcome

        request, status = state.request, state.status
        if status == "executed":
            return recorded(event)  # recorded before (a repeated hook): once only
        if status in ("pending", "interrupting", "allowed", "approved"):
            # What ran is the input of this PostToolUse. The approval and the start are recorded
            # only for the arguments the request holds now: a reviewer may have edited it on
            # countersign's queue while Claude Code's dialog showed (and then ran) the original.
            from ledger.digest import ArgumentsError, value_digest

            try:
                ran = value_digest(call.args) if call.args is not None else None
            except ArgumentsError:
                ran = None
            if ran != state.args_digest:
                return recorded(event, f"the call ran with arguments other than those countersign request {request} "
                                       "now holds (edited on countersign's queue meanwhile?); its run is not recorded")
        if status in ("pending", "interrupting"):
            offered, why = self._dialog_offered(backend, state)
            if not offered:
                return self._unapproved(backend, event, call, state, why)
            try:
                state = backend.decide(request, "approve", reviewer=self.reviewer, digest=state.args_digest,
                                       comment=DIALOG_COMMENT)
            except BackendError as exc:
                return recorded(event, f"the call ran after Claude Code's dialog, but countersign refused "
                                       f"{self.reviewer}'s approval of request {request}: {exc.message}; "
                                       "the ledger does not show it as run")
            status = state.status
        if status in ("allowed", "approved"):
            started = backend.start(request)
            if isinstance(started, Outcome):
                return recorded(event)
        elif status != "executing":
            return recorded(event, f"the call ran, but countersign request {request} is {status}; "
                                   "the ledger does not show it as run")
        if event == "PostToolUse":
            backend.finish(request, outcome="ok", result=_json_value(call.payload.get("tool_response")),
                           keep_result=self.keep_result)
        else:
            error = call.payload.get("error")
            error = error if isinstance(error, str) and error.strip() else "the tool failed"
            if call.payload.get("is_interrupt") is True:
                error = f"interrupted: {error}"
            backend.finish(request, outcome="error", error=error)
        return recorded(event)

    def _unapproved(self, backend, event: str, call: Call, state, why: str) -> Reply:
        """A call that ran while its request still waited, without the dialog's approval: no
        approval is recorded for anyone. The ledger has no event for a run outside the gate, so
        the request is cancelled by its proposer with a reason that says the call ran (its
        permission mode) and why no approval is recorded; no reviewer is then asked about a call
        that already ran, and no later expiry says it did not run. The user is told."""
        from adapters.backend import BackendError

        request = state.request
        mode = call.context.get("permission_mode")
        said = (f"Claude Code ran this call without countersign's approval (permission_mode {mode}; the hook's "
                f"answer was not an allow: {why}); no approval was given for it and its outcome is not recorded")
        try:
            backend.cancel(request, reason=said)
        except BackendError as exc:
            return recorded(event, f"the call ran without countersign's approval ({why}); request {request} could "
                                   f"not be closed: {exc.message}; the ledger does not show it as run")
        return recorded(event, f"the call ran without countersign's approval ({why}); request {request} is "
                               "cancelled with that reason, and the ledger does not show it as approved or run")

    def _denied(self, backend, call: Call, state) -> Reply:
        """PermissionDenied: Claude Code refused a call the hook had let through or asked about;
        it never ran. Cancelled by its proposer with Claude Code's reason."""
        from adapters.backend import BackendError

        if state.status in ("executed", "executing") or state.status in ("denied", "rejected", "responded", "expired",
                                                                          "cancelled"):
            return recorded("PermissionDenied")
        reason = call.payload.get("reason")
        reason = reason if isinstance(reason, str) and reason.strip() else "no reason given"
        try:
            backend.cancel(state.request, reason=f"Claude Code denied the call: {reason}")
        except BackendError as exc:
            return recorded("PermissionDenied", f"could not record the denial of request {state.request}: {exc.message}")
        return recorded("PermissionDenied")


class MismatchedInput(Exception):
    """PostToolUse's input is neither the proposed nor the approved arguments of its request."""

    def __init__(self, request: int):
        super().__init__(f"the input that ran is not the one countersign request {request} decided; "
                         "the ledger does not show it as run")
        self.request = request


def original_digest(backend, state) -> str | None:
    """The digest the request was proposed with (before any edit): local only; the service's
    view names the current digest, which an edited call runs with."""
    gate = getattr(backend, "gate", None)
    if gate is None or not state.edits:
        return None
    return gate.get(state.request).original_digest


def current_arguments(backend, request: int) -> dict:
    """The current (approved, possibly edited) arguments of an open request, without starting it:
    the Gate's `arguments`, or the service's request view (GET /v1/requests/{id}, docs/service.md)."""
    gate = getattr(backend, "gate", None)
    if gate is not None:
        return gate.arguments(request)
    view = backend._call("GET", f"/v1/requests/{int(request)}")
    args = view.get("args")
    if not isinstance(args, dict):
        from adapters.backend import BackendError

        raise BackendError("bad_answer", f"the service gave no arguments for request {request}")
    return args


def _json_value(value: Any) -> Any:
    return value


def _error_text(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    text = " ".join(str(text).split())
    return text if len(text) <= 500 else text[:497] + "..."


# --- configuration and the process ------------------------------------------------------------

ENVIRONMENT = {
    "COUNTERSIGN_POLICY": "a .policy file, for a local ledger (with COUNTERSIGN_LEDGER)",
    "COUNTERSIGN_LEDGER": "the ledger directory, for a local ledger",
    "COUNTERSIGN_URL": "the approval service's URL (with COUNTERSIGN_TOKEN, the agent's token)",
    "COUNTERSIGN_TOKEN": "the agent's bearer token for the service",
    "COUNTERSIGN_REVIEWER_TOKEN": "through the service, --on-ask dialog: the token of the person at Claude Code's dialog",
    "COUNTERSIGN_ON_ASK": "dialog or wait (default dialog)",
    "COUNTERSIGN_HOOK_WAIT": f"seconds an ask waits on countersign's queue (default {DEFAULT_WAIT})",
}


def parser():
    import argparse

    ap = argparse.ArgumentParser(
        prog="countersign hook claude-code",
        description="Decide Claude Code's tool calls: reads one hook input (JSON) on stdin, writes Claude Code's "
                    "hook output on stdout. Install with `countersign hook claude-code settings`.",
        epilog="Environment: " + "; ".join(f"{k}: {v}" for k, v in ENVIRONMENT.items()))
    ap.add_argument("--on-ask", choices=ON_ASK, default=None,
                    help="answer an ask with Claude Code's own dialog, or wait on countersign's queue")
    ap.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                    help=f"how long an ask waits on countersign's queue (default {DEFAULT_WAIT}; keep it under the "
                         "hook's timeout)")
    ap.add_argument("--policy", help="the .policy file (local ledger)")
    ap.add_argument("--ledger", help="the ledger directory (local ledger)")
    ap.add_argument("--url", help="the approval service's URL (its token in COUNTERSIGN_TOKEN)")
    ap.add_argument("--keep-result", action="store_true", help="record tool_response itself, not only its digest")
    ap.add_argument("action", nargs="?", choices=("settings",),
                    help="settings: print the settings.json snippet that installs this hook")
    ap.add_argument("--print-settings", action="store_true", help="the same as the settings action")
    ap.add_argument("--timeout", type=int, default=None,
                    help=f"with settings: the PreToolUse hook's timeout in seconds (default {DEFAULT_TIMEOUT})")
    return ap


_VALUED = {"--on-ask": "on_ask", "--wait": "wait", "--policy": "policy", "--ledger": "ledger", "--url": "url",
           "--timeout": "timeout"}
_SWITCHES = {"--keep-result": "keep_result", "--print-settings": "print_settings"}


def parse_options(argv: list[str] | None = None):
    """The command line's options, as `parser().parse_args(argv)` gives them. The command lines
    Claude Code runs (the options spelled out, each value after its option or after `=`) are
    read here without importing argparse, which with its formatter costs about 5 ms of every
    hook's start; any other (--help, an abbreviation, a value argparse would refuse or read
    differently) goes to argparse, which answers it or prints its error and raises SystemExit."""
    fast = _plain_options(sys.argv[1:] if argv is None else argv)
    return fast if fast is not None else parser().parse_args(argv)


def _plain_options(argv: list[str]):
    """A types.SimpleNamespace of the options when every word is one `parse_options` reads here,
    else None."""
    import types

    values: dict[str, Any] = {"on_ask": None, "wait": None, "policy": None, "ledger": None, "url": None,
                              "keep_result": False, "action": None, "print_settings": False, "timeout": None}
    words = iter(argv)
    for word in words:
        if word in _SWITCHES:
            values[_SWITCHES[word]] = True
            continue
        if word == "settings" and values["action"] is None:
            values["action"] = "settings"
            continue
        name, eq, value = word.partition("=")
        if name not in _VALUED or (eq and not value):
            return None
        if not eq:
            value = next(words, None)
            if value is None or value.startswith("-"):  # argparse may read it as an option, or a number
                return None
        try:
            if name == "--wait":
                values["wait"] = float(value)
            elif name == "--timeout":
                values["timeout"] = int(value)
            elif name == "--on-ask" and value not in ON_ASK:
                return None
            else:
                values[_VALUED[name]] = value
        except ValueError:
            return None
    return types.SimpleNamespace(**values)


def settings(command: str = "countersign hook claude-code", *, on_ask: str = "dialog", timeout: int = DEFAULT_TIMEOUT,
             extra: str = "") -> dict:
    """The settings.json `hooks` block installing the hook for all four events: PreToolUse with
    `timeout` seconds and `--wait` MARGIN seconds less (so the hook gives up and denies before
    Claude Code kills it), the recording events with POST_TIMEOUT."""
    wait = max(1, timeout - MARGIN)
    pre = f"{command} --on-ask {on_ask} --wait {wait}{extra}"
    post = f"{command}{extra}"

    def entry(cmd: str, seconds: int) -> list:
        return [{"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": seconds}]}]

    return {"hooks": {"PreToolUse": entry(pre, timeout), "PostToolUse": entry(post, POST_TIMEOUT),
                      "PostToolUseFailure": entry(post, POST_TIMEOUT), "PermissionDenied": entry(post, POST_TIMEOUT)}}


def backends(options, environ=None) -> Callable[[str], Any]:
    """`proposer → Backend` from the options and the environment (adapters.backend.connect's
    variables). A local Gate is opened once, on first use, and shared by the backends."""
    env = os.environ if environ is None else environ
    url = options.url or env.get("COUNTERSIGN_URL")
    opened: dict[str, Any] = {}

    def backend_for(proposer: str):
        if "backend" in opened:
            if getattr(opened["backend"], "gate", None) is not None:
                opened["backend"].proposer = proposer
            return opened["backend"]
        from adapters.backend import BackendError, LocalBackend, ServiceBackend

        if url:
            token = env.get("COUNTERSIGN_TOKEN")
            if not token:
                raise BackendError("unauthenticated", "COUNTERSIGN_URL is set but COUNTERSIGN_TOKEN is not")
            backend = ServiceBackend(url, token, reviewer_token=env.get("COUNTERSIGN_REVIEWER_TOKEN") or None)
        else:
            policy = options.policy or env.get("COUNTERSIGN_POLICY")
            ledger = options.ledger or env.get("COUNTERSIGN_LEDGER")
            if not (policy and ledger):
                raise BackendError("not_configured", "set COUNTERSIGN_POLICY and COUNTERSIGN_LEDGER (a local ledger), "
                                   "or COUNTERSIGN_URL and COUNTERSIGN_TOKEN (the service)")
            from dsl.policy import Policy
            from ledger.workflow.gate import Gate

            try:
                loaded = Policy.load(policy, cache=True)  # the checked tree kept between hook calls (dsl.tree_cache)
            except OSError as exc:
                raise BackendError("policy_unreadable", f"the policy {policy} cannot be read: {exc.strerror or exc}") from None
            except Exception as exc:  # PolicyError: its first diagnostics
                raise BackendError("policy_error", f"the policy {policy} does not load: {_error_text(exc)}") from None
            try:
                gate = Gate(loaded, ledger, pin_policy=True)
            except Exception as exc:
                raise BackendError("ledger_unavailable", f"the ledger {ledger} cannot be opened: {_error_text(exc)}") from None
            backend = LocalBackend(gate, proposer)
        opened["backend"] = backend
        return backend

    backend_for.close = lambda: opened["backend"].close() if "backend" in opened else None  # type: ignore[attr-defined]
    return backend_for


def main(argv: list[str] | None = None, stdin=None, stdout=None, stderr=None, environ=None) -> int:
    """The hook process: parse the options, read stdin, print the Reply; returns the exit code."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    env = os.environ if environ is None else environ
    try:
        options = parse_options(argv)
    except SystemExit as exc:  # argparse printed its message; an unusable command line blocks the call
        return 0 if exc.code == 0 else 2
    if options.action == "settings" or options.print_settings:
        on_ask = options.on_ask or env.get("COUNTERSIGN_ON_ASK") or "dialog"
        extra = ""
        for flag, value in (("--policy", options.policy), ("--ledger", options.ledger), ("--url", options.url)):
            if value:
                extra += f" {flag} {_quote(value)}"
        print(json.dumps(settings(on_ask=on_ask, timeout=options.timeout or DEFAULT_TIMEOUT, extra=extra), indent=2),
              file=stdout)
        return 0
    reply = run(stdin.read(), options, env)
    if reply.stdout:
        print(reply.stdout, file=stdout)
    if reply.stderr:
        print(reply.stderr, file=stderr)
    return reply.exit_code


def run(text: str, options, environ=None) -> Reply:
    """One hook call: the Reply to the payload `text` with these options; never raises."""
    env = os.environ if environ is None else environ
    open_backends = None
    try:
        on_ask = options.on_ask or env.get("COUNTERSIGN_ON_ASK") or "dialog"
        wait = options.wait if options.wait is not None else float(env.get("COUNTERSIGN_HOOK_WAIT") or DEFAULT_WAIT)
        if on_ask not in ON_ASK:
            raise ValueError(f"COUNTERSIGN_ON_ASK is one of {', '.join(ON_ASK)}, not {on_ask!r}")
        open_backends = backends(options, env)
        hook = ClaudeCodeHook(open_backends, on_ask=on_ask, wait=wait, keep_result=options.keep_result)
        return hook.handle(text)
    except Exception as exc:  # a configuration error: fail closed by exit code 2 (blocks a PreToolUse)
        return blocked(f"countersign: the hook is misconfigured, so the call was not run: {_error_text(exc)}")
    finally:
        if open_backends is not None:
            try:
                open_backends.close()
            except Exception:  # closing writes the Gate's snapshot; the steps are durable already
                pass


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


if __name__ == "__main__":
    sys.exit(main())
