"""countersign for the Claude Agent SDK (claude-agent-sdk >= 0.2, which drives the Claude Code CLI):
a `can_use_tool` callback that waits on countersign's decision, and the PreToolUse / PostToolUse /
PostToolUseFailure hooks that propose every call and record how it ran.

    from adapters.backend import connect
    from adapters.claude_agent_sdk import countersign_options

    options = countersign_options(connect(), cwd="/srv/project", max_turns=20)
    async with ClaudeSDKClient(options) as client:     # or query(prompt=..., options=options)
        ...

How a tool call goes (the order is Claude Code's: PreToolUse hooks, then its permission rules,
then `can_use_tool` when the rules would prompt, then the tool, then PostToolUse or
PostToolUseFailure; docs: "Handling permissions" and "Hooks" of the Agent SDK):

1. PreToolUse proposes the call: run = the session id, call id = the tool_use_id, context =
   {"cwd": the session's cwd}. A deny answers `permissionDecision: "deny"` with the policy's
   reason (the model gets it as the tool's error). An ask answers `"ask"`, which makes Claude
   Code consult `can_use_tool` even for a tool its own rules allow without asking (Read inside
   the project, an `allowed_tools` entry). An allow gives no opinion: Claude Code's own rules
   still hold (both must allow), and where they would prompt, `can_use_tool` allows.
2. `can_use_tool` proposes the same call again (the same call id: the Gate returns the first
   proposal, and refuses other arguments with CallIdConflict), waits for the decision of an ask
   (in the web inbox, `countersign review`, or an authenticated reviewer in the host program),
   and on allow / approve records the execution's start (durably, before the tool runs) and
   returns `PermissionResultAllow(updated_input=<the approved arguments>)`: an edit is the
   reviewer's arguments, and what runs is bound to the approved digest. Deny, reject, respond,
   expiry and cancel return `PermissionResultDeny(message=...)`: the policy's reason, the
   rejection's reason, the reviewer's response (the SDK has no way to hand the model a result
   in place of the tool's, so a response is the denied tool's message; the model reads it).
3. PostToolUse records the outcome "ok" with the result's digest (the result itself with
   `keep_result`), PostToolUseFailure "error" with Claude Code's error text. For a call that
   did not pass through `can_use_tool` (allowed by the policy and by Claude Code's rules) the
   start is recorded there, just before the outcome, after checking that the arguments that
   ran have the allowed digest. Arguments that ran with another digest are recorded as an
   "error" outcome naming both digests.

Execute at most once: a call id whose request already started or ran is denied (by PreToolUse
and by `can_use_tool`), and an outcome is recorded once (a second PostToolUse is ignored).

Fail closed: a BackendError, any other exception, an unknown state, or a wait that ends with
the call still undecided (the adapter's `wait_timeout`, then the call is cancelled) denies the
call with the reason in the message; nothing raises out of a decision. The ask's own timeout
(the policy's `timeout`) is applied by the Gate as a rejection (silence never approves).

Claude Code's own rules never skip countersign: a PreToolUse "ask" makes Claude Code consult
`can_use_tool` in every permission mode ("default", "acceptEdits", "dontAsk", "auto", "plan",
"bypassPermissions") and for tools in `allowed_tools`, and a hook's "deny" holds in all of them
(measured with the bundled CLI 2.1.337; the SDK's CanUseToolShadowedWarning does not apply to
these calls). Still, the SDK documents that "bypassPermissions" never consults `can_use_tool`,
and a CLI that did as documented would run an asked call unapproved: so `countersign_options`
refuses that mode, and the PreToolUse hook denies an ask made under it (fail closed).

Standing decisions ("don't ask again"). Claude Code's own "always allow" is a permission rule
(`PermissionResultAllow.updated_permissions`, offered as `ToolPermissionContext.suggestions`)
that it keeps outside the ledger; this adapter never returns one, and has no in-process reviewer
who could choose it: a person decides in the inbox, `countersign review`, the service's API or
Backend.decide, and makes the decision standing there with `remember` where the ask's rule
allows it (docs/policy-language.md, "Remembered decisions"). The run is the session id (unless
`run` is given), so `remember run` covers the rest of the Claude session. A later call it covers
is proposed as any other and comes back `allowed` (PreToolUse gives no opinion, `can_use_tool`
allows it at once with its arguments, PostToolUse records how it ran) or `rejected` (denied with
the standing rejection's reason); no one is asked.

The SDK is imported inside the functions that build its objects (claude_agent_sdk, an optional
extra: `pip install 'countersign[claude-agent-sdk]'`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from adapters.backend import AsyncBackend, BackendError, Outcome, Settled, Verdict

log = logging.getLogger("countersign.adapters.claude_agent_sdk")

RUNNABLE = ("allowed", "approved")
WAITING = ("pending", "interrupting")
REMEMBERED_CALLS = 4096
"""How many calls (tool_use_id → run, context, request) the adapter keeps between PreToolUse and
PostToolUse; older ones are looked up in the ledger by call id (each entry is a few hundred bytes)."""

NO_BYPASS = ("countersign: permission_mode 'bypassPermissions' never consults can_use_tool, so a call the "
             "policy asks about could not wait for a person; use 'default' or 'acceptEdits'")


@dataclass(frozen=True)
class _Call:
    request: int
    run: str | None
    context: dict | None


class CountersignPermissions:
    """The callback and the hooks for one backend (adapters.backend: LocalBackend, ServiceBackend
    or an AsyncBackend around one). `wait_timeout`: seconds an ask may wait here before the
    call is cancelled and denied (None: until the ask's own timeout, when the Gate rejects it).
    `keep_result`: keep each tool's result in the ledger, not only its digest. `run`: the run
    name for every call (default: the session id Claude Code gives the hooks). `cwd`: the
    context's cwd when no hook gave one. `interrupt`: deny with `interrupt=True` (the turn stops)
    instead of letting the model go on with the reason."""

    def __init__(self, backend, *, wait_timeout: float | None = None, keep_result: bool = False,
                 run: str | None = None, cwd: str | None = None, interrupt: bool = False):
        self.backend = backend if isinstance(backend, AsyncBackend) else AsyncBackend(backend)
        self.wait_timeout, self.keep_result, self.run, self.cwd = wait_timeout, keep_result, run, cwd
        self.interrupt = interrupt
        self.session: str | None = None  # the last session id a hook saw
        self._calls: OrderedDict[str, _Call] = OrderedDict()

    # --- the permission callback -------------------------------------------------------------

    async def can_use_tool(self, tool_name: str, tool_input: dict, context: Any):
        """The SDK's CanUseTool: PermissionResultAllow with the arguments to run, or
        PermissionResultDeny with the reason (see the module's docstring)."""
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        call_id = getattr(context, "tool_use_id", None) or None
        try:
            verdict = await self._propose(tool_name, tool_input, call_id)
            if verdict.status in ("executing", "executed"):
                return PermissionResultDeny(message=_already_ran(verdict.request), interrupt=self.interrupt)
            settled = await self._settle(verdict)
            if not settled.runnable:
                return PermissionResultDeny(message=_refusal(verdict, settled), interrupt=self.interrupt)
            started = await self.backend.start(verdict.request)
            if isinstance(started, Outcome):
                return PermissionResultDeny(message=_already_ran(verdict.request), interrupt=self.interrupt)
            return PermissionResultAllow(updated_input=started.args)
        except BackendError as exc:
            return PermissionResultDeny(message=_failed(exc), interrupt=self.interrupt)
        except Exception as exc:  # nothing raises out of a decision: closed
            log.exception("can_use_tool failed for %s", call_id)
            return PermissionResultDeny(message=f"countersign could not decide this call ({type(exc).__name__}); "
                                        "it was not run.", interrupt=self.interrupt)

    async def _propose(self, tool: str, args: dict, call_id: str | None) -> Verdict:
        """Propose with the run and context PreToolUse used for this call id (the Gate's repeat
        check then compares tool, arguments and context), else with the adapter's own."""
        known = self._calls.get(call_id) if call_id else None
        if known is not None:
            run, context = known.run, known.context
        else:
            run = self.run or self.session
            context = {"cwd": self.cwd} if self.cwd else None
        verdict = await self.backend.propose(tool, args, run=run, context=context, call_id=call_id)
        if call_id:
            self._remember(call_id, _Call(verdict.request, run, context))
        return verdict

    async def _settle(self, verdict: Verdict) -> Settled:
        """Where the request stands once no person is awaited: at once for an allow or a deny;
        an ask waits (up to `wait_timeout`, then the agent withdraws the call)."""
        if verdict.status not in WAITING:
            return await self.backend.get(verdict.request)
        try:
            settled = await self.backend.wait(verdict.request, self.wait_timeout)
        except BaseException:  # the session was interrupted (the SDK cancels the callback): withdraw the call
            self._withdraw(verdict.request, "The agent's session stopped waiting; not run.")
            raise
        if settled.waiting:
            try:
                settled = await self.backend.cancel(verdict.request, "No decision within the agent's wait; not run.")
            except BackendError:  # decided meanwhile: read what stands
                settled = await self.backend.get(verdict.request)
        return settled

    def _withdraw(self, request: int, reason: str) -> None:
        """Cancel a waiting request from a task being cancelled (no await is possible there):
        the backend's own call, in this thread; a failure leaves the ask to its timeout."""
        try:
            self.backend.backend.cancel(request, reason)
        except Exception as exc:
            log.warning("could not withdraw request %s: %s", request, exc)

    # --- the hooks ----------------------------------------------------------------------------

    async def pre_tool_use(self, hook_input: dict, tool_use_id: str | None, context: Any) -> dict:
        """PreToolUse: propose the call; deny, ask (so `can_use_tool` waits), or no opinion."""
        call_id = hook_input.get("tool_use_id") or tool_use_id
        self.session = hook_input.get("session_id") or self.session
        run = self.run or hook_input.get("session_id")
        cwd = hook_input.get("cwd") or self.cwd
        context_data = {"cwd": cwd} if cwd else None
        try:
            verdict = await self.backend.propose(hook_input["tool_name"], hook_input.get("tool_input") or {},
                                                 run=run, context=context_data, call_id=call_id)
        except BackendError as exc:
            return _pre("deny", _failed(exc))
        except Exception as exc:
            log.exception("PreToolUse failed for %s", call_id)
            return _pre("deny", f"countersign could not decide this call ({type(exc).__name__}); it was not run.")
        if call_id:
            self._remember(call_id, _Call(verdict.request, run, context_data))
        if verdict.status in WAITING:
            if hook_input.get("permission_mode") == "bypassPermissions":
                return _pre("deny", NO_BYPASS)
            return _pre("ask", _asking(verdict))
        if verdict.status in RUNNABLE:
            return {}  # Claude Code's own rules decide whether can_use_tool is consulted
        if verdict.status in ("executing", "executed"):
            return _pre("deny", _already_ran(verdict.request))
        try:
            settled = await self.backend.get(verdict.request)
        except BackendError as exc:
            return _pre("deny", _failed(exc))
        return _pre("deny", _refusal(verdict, settled))

    async def post_tool_use(self, hook_input: dict, tool_use_id: str | None, context: Any) -> dict:
        """PostToolUse and PostToolUseFailure: record the outcome of the call that ran (once)."""
        call_id = hook_input.get("tool_use_id") or tool_use_id
        failed = hook_input.get("hook_event_name") == "PostToolUseFailure"
        try:
            await self._record(call_id, hook_input, failed)
        except BackendError as exc:
            log.warning("countersign could not record the outcome of %s: %s %s", call_id, exc.code, exc.message)
        except Exception:
            log.exception("countersign could not record the outcome of %s", call_id)
        return {}

    async def _record(self, call_id: str | None, hook_input: dict, failed: bool) -> None:
        known = self._calls.pop(call_id, None) if call_id else None
        if known is not None:
            state = await self.backend.get(known.request)
        else:
            state = await self.backend.find(call_id) if call_id else None
        if state is None:
            log.warning("a %s call ran that countersign never decided (call id %r)", hook_input.get("tool_name"), call_id)
            return
        if state.status == "executed":
            return  # recorded already: an outcome is reported once
        if state.status in RUNNABLE:  # allowed without can_use_tool: start now, bound to the digest
            started = await self.backend.start(state.request)
            if isinstance(started, Outcome):
                return
            digest = started.args_digest
        elif state.status == "executing":
            digest = state.args_digest
        else:
            log.warning("request %s (%s) ran although it stands %s", state.request, call_id, state.status)
            return
        ran_with = _digest_or_none(hook_input.get("tool_input"))
        if ran_with != digest:
            await self.backend.finish(state.request, outcome="error", error=(
                f"Claude Code ran the call with arguments of digest {ran_with} where {digest} was approved"))
        elif failed:
            await self.backend.finish(state.request, outcome="error",
                                      error=str(hook_input.get("error") or "the tool failed"))
        else:
            await self.backend.finish(state.request, outcome="ok", result=_json_or_none(hook_input.get("tool_response")),
                                      keep_result=self.keep_result)

    def _remember(self, call_id: str, call: _Call) -> None:
        self._calls[call_id] = call
        self._calls.move_to_end(call_id)
        while len(self._calls) > REMEMBERED_CALLS:
            self._calls.popitem(last=False)

    # --- wiring ------------------------------------------------------------------------------

    def hooks(self, timeout: float | None = None) -> dict:
        """The SDK's `hooks` option: PreToolUse, PostToolUse and PostToolUseFailure for every tool
        (HookMatcher with no matcher). `timeout`: seconds per hook call (the SDK's default 60)."""
        from claude_agent_sdk import HookMatcher

        return {"PreToolUse": [HookMatcher(hooks=[self.pre_tool_use], timeout=timeout)],
                "PostToolUse": [HookMatcher(hooks=[self.post_tool_use], timeout=timeout)],
                "PostToolUseFailure": [HookMatcher(hooks=[self.post_tool_use], timeout=timeout)]}


def countersign_options(backend, *, wait_timeout: float | None = None, keep_result: bool = False,
                        run: str | None = None, interrupt: bool = False, hook_timeout: float | None = None,
                        **options: Any):
    """ClaudeAgentOptions(**options) with countersign's `can_use_tool` and hooks wired in (the
    caller's own hooks are kept beside them; Claude Code runs a hook event's matchers
    concurrently). The other arguments are CountersignPermissions'. Raises ValueError for a
    `can_use_tool` or `permission_prompt_tool_name` of the caller's (one permission callback per
    session), and for permission_mode "bypassPermissions" (see the module's docstring). The
    CountersignPermissions is on the result's `can_use_tool.__self__`."""
    from claude_agent_sdk import ClaudeAgentOptions

    if options.get("can_use_tool") is not None or options.get("permission_prompt_tool_name"):
        raise ValueError("countersign_options sets can_use_tool itself; drop the caller's permission callback")
    if options.get("permission_mode") == "bypassPermissions":
        raise ValueError(NO_BYPASS)
    cwd = options.get("cwd")
    permissions = CountersignPermissions(backend, wait_timeout=wait_timeout, keep_result=keep_result, run=run,
                                         cwd=None if cwd is None else str(cwd), interrupt=interrupt)
    hooks = {event: list(matchers) for event, matchers in (options.pop("hooks", None) or {}).items()}
    for event, matchers in permissions.hooks(hook_timeout).items():
        hooks.setdefault(event, []).extend(matchers)
    return ClaudeAgentOptions(can_use_tool=permissions.can_use_tool, hooks=hooks, **options)


# --- messages for the model -------------------------------------------------------------------

def _pre(decision: str, reason: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                                   "permissionDecisionReason": reason}}


def _asking(verdict: Verdict) -> str:
    text = verdict.reason or "countersign asks a person about this call."
    needs = f" Waiting for {verdict.needs}." if verdict.needs else ""
    link = f" {verdict.link}" if verdict.link else ""
    return f"{text}{needs} (countersign request {verdict.request}){link}"


def _refusal(verdict: Verdict, settled: Settled) -> str:
    """What the model is told about a call that does not run, by where it stands."""
    if settled.status == "denied":
        return verdict.reason or "countersign's policy denies this call."
    if settled.status == "rejected":
        who = f" by {settled.decided_by}" if settled.decided_by else ""
        return f"Rejected{who}: {settled.reason or 'no reason given'}"
    if settled.status == "responded":
        return settled.reason or "A reviewer answered in place of running this call."
    if settled.status == "expired":
        return settled.reason or "No one decided in time; the call was not run."
    if settled.status == "cancelled":
        return settled.reason or "The call was withdrawn before anyone decided; it was not run."
    return f"countersign: the call stands {settled.status}; it was not run."


def _already_ran(request: int) -> str:
    return f"This call already ran (countersign request {request}); a call never runs twice."


def _failed(exc: BackendError) -> str:
    return f"countersign could not decide this call ({exc.code}: {exc.message}); it was not run."


def _digest_or_none(args: Any) -> str | None:
    from ledger.digest import ArgumentsError, args_digest

    try:
        return args_digest(args)
    except ArgumentsError:
        return None


def _json_or_none(value: Any) -> Any:
    import json

    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return None
