"""countersign for the OpenAI Agents SDK (`openai-agents` 0.24, package `agents`; issue 12).

    from adapters.backend import connect
    from adapters.openai_agents import gate_tools, run_gated

    agent = gate_tools(Agent(name="support", tools=[refund, lookup_order]), connect(), run="support")
    result = await run_gated(agent, "Refund order 7", timeout=600)   # one conversation: its own run

What each piece does, in the SDK's own terms (its human-in-the-loop guide: a tool's
`needs_approval`, `RunResult.interruptions`, `RunState.approve` / `RunState.reject`, and
`Runner.run(agent, state)` to resume):

- `gate_tools` / `countersign_tool` wrap each FunctionTool. Its `needs_approval` proposes the call
  to countersign (Backend.propose, the SDK's call id as the ledger's `call_id`): an ask that waits
  for a person is True (the run pauses with an interruption), allow and deny are False. Its
  invocation proposes again (a repeated call id returns the same request and records nothing),
  so countersign decides even when the SDK skipped `needs_approval` (its sticky approvals, an
  approval given by hand): a deny returns the policy's reason as the tool's output and never runs
  the function; an allowed or approved call runs through AsyncBackend.execute, at most once, with
  the arguments Backend.start returns (the approved ones, edits included), not the model's; a
  call still waiting in countersign, rejected, responded, expired or cancelled never runs.
- `resolve(result)` takes each interruption of a gated tool to countersign's decision: one given
  in this process by `review` (a reviewer authenticated by their token: adapters.identity, or
  the service for a ServiceBackend; shown the request's current arguments and their digest,
  read together from countersign and checked against each other, and the decision binds that
  digest: an edit made meanwhile is shown again, never approved unseen), else the one made in
  the web inbox, the service's API or `countersign review`, waited for (a quorum above one
  keeps it waiting until met). Then on the RunState: approve (and edit) → `state.approve(item)`,
  the tool runs with the approved arguments; reject → `state.reject(item,
  rejection_message=reason)`, the reason is the tool's output the model sees; respond →
  `state.reject(item, rejection_message=message)`: the SDK has no "respond", and a rejection
  message is the one way it lets text stand in for a tool's output without running the tool
  (the SDK's own record says rejected; the ledger says responded). The SDK's sticky decisions,
  `always_approve` / `always_reject`, become countersign's standing decisions (below).
- `run_gated` runs, resolves and resumes until the run ends or no interruption is countersign's.

Runs and conversations. An Agent (and so its gated tools) serves every conversation; the SDK's
run is one RunState (a `Runner.run` with new input, with its pauses and resumes). countersign's
run for a call is that SDK run's when the run carries a conversation id in its context (the
context mapping's key, or the context object's attribute, `countersign_conversation`): the
ledger's run is "<gate_tools run>/<conversation>" (the conversation alone without a gate_tools
run), and the call ids are scoped by it. `run_gated` gives every run it starts a fresh one
(`conversation=` names it instead, e.g. to replay a run from its start); a mapping context is
carried in the RunState and so survives `to_string` / `from_string`. A run without one (a plain
`Runner.run(agent, input)`) is proposed under the gate_tools run itself, which every
conversation shares: no sticky decision is accepted for it.

Fail closed: an error from the backend, an unknown decision, an unauthenticated reviewer, a
request whose arguments do not match their digest or a wait past `timeout` never runs the call.
A call that ran is never reported as not run: when its outcome cannot be recorded, the model
reads that it ran, with its output, and that the record is missing.

Sticky decisions. A reviewer's `Decision("always_approve", ...)` / `Decision("always_reject",
...)` (the SDK's `RunState.approve(item, always_approve=True)` / `reject(item,
always_reject=True)`) is recorded as countersign's standing decision (docs/policy-language.md,
"Remembered decisions"): the approval or rejection with `remember="run"` and any arguments
(`pattern=None`: the SDK's sticky decision is per tool, whatever the arguments). Scope "run",
the narrowest countersign has, because the SDK's own lasts for its run (the RunState's context,
across its pauses and resumes) and countersign's run is then that conversation's (above), never
the gate_tools run shared by every conversation of the agent; "session" or a duration would
outlive it. Later calls of the tool in that conversation are then decided by countersign itself
(allowed: they run; rejected: the model reads the standing rejection's reason), with no
interruption and no person; another conversation is asked again. The SDK's own
sticky flag is not set: countersign is the one memory (in the ledger, revocable with
`countersign forget`/Gate.forget, forgotten on a policy edit), and a later call it does not
cover (another rule asks, one without `remember`) is asked about again. Where the ask's rule
has no `remember` clause allowing a run, or the call's run is not one conversation's (a run
without `countersign_conversation`: the gate_tools run, shared), the sticky decision is refused
(BackendError "sticky_not_allowed"), nothing is recorded and the call does not run: decide it
alone. A call the SDK approved by itself (`state.approve(...)` by hand, or
an SDK-side always_approve) runs only when countersign allows it (a standing decision covers
it, or the policy allows it); one still waiting in countersign is withdrawn and does not run.

The framework is imported only inside the functions of this module (an optional extra:
`pip install 'countersign[openai-agents]'`).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import time
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Awaitable, Callable
from uuid import uuid4

from adapters.backend import WAITING, AsyncBackend, BackendError, ServiceBackend, Settled

GATING_ATTRIBUTE = "_countersign_gating"  # set on a gated FunctionTool: its _Gating
RAN = ("allowed", "approved", "executing", "executed")  # statuses whose call may run (or ran)
DECISIONS = ("approve", "edit", "reject", "respond")
STICKY = {"always_approve": "approve", "always_reject": "reject"}  # the SDK's → countersign's, remembered:
STICKY_SCOPE = "run"  # for the run (module docstring: the SDK's sticky decision lasts for its run)
CONVERSATION = "countersign_conversation"  # the run context's key / attribute naming one SDK run (module docstring)
REFUSED_STICKY = ("StandingDecision", "standing_decision")  # the rule does not allow remembering (Gate, service)
DEFAULT_DENY = "countersign's policy denies this call."
SYNC_MARKER = "__agents_sync_function_tool__"  # agents.tool marks a plain function's invoker with it
STALE = ("StaleDigest", "stale_digest")  # a decision for arguments edited since they were shown (Gate, service)
MAX_STALE = 3  # times in a row a reviewer is shown newer arguments before resolve gives up (raises)
READS = 3  # reads of a request's arguments and digest that may disagree before it is refused
STARTED_BEFORE = ("ExecutionInProgress", "execution_in_progress", "ExecutionUnknown", "execution_unknown")


# --- what an in-process reviewer sees and answers --------------------------------------------

@dataclass(frozen=True)
class Pending:
    """An interruption waiting for a person: `request` (the ledger's), `tool`, `call_id` (the
    SDK's), `args` (the request's current arguments, read from countersign: an edit made in the
    inbox or by an earlier reviewer included, not the model's call item), `args_digest` (the
    digest of exactly these `args`, read with them and checked against them: the decision binds
    it, so a reviewer approves only what they were shown), `reason` (the ask's rule),
    `decisions` the rule allows, `needs` ("2 from sups"), `round` (1 for the first decision this
    process asks for, 2 for the next one a quorum still needs, ...), `item` (the SDK's
    ToolApprovalItem), `remember` the scopes the rule lets a decision be remembered for (a
    sticky always_approve / always_reject needs "run" among them; () when none)."""

    request: int
    tool: str
    call_id: str
    args: dict
    args_digest: str
    reason: str
    decisions: tuple[str, ...]
    needs: str | None
    round: int
    item: Any
    remember: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    """A reviewer's answer to a Pending. `decision`: approve, edit (with `args`), reject (with
    `reason`), respond (with `message`), or the SDK's sticky always_approve / always_reject (with
    `reason`): an approval or rejection countersign remembers for the run (module docstring); `token` the reviewer's credential (a roster token:
    `countersign roster add NAME --kind reviewer`), from which their name is taken, never from
    this object; `comment` for the ledger."""

    decision: str
    token: str | None
    args: dict | None = None
    reason: str | None = None
    message: str | None = None
    comment: str | None = None


Review = Callable[[Pending], "Decision | None | Awaitable[Decision | None]"]


# --- gating the tools --------------------------------------------------------------------------

@dataclass(frozen=True)
class _Run:
    """countersign's run for one call: `name` (the ledger's run, or None), `conversation` (the
    SDK run's conversation id, or None: then `name` is the gate_tools run, which every
    conversation of the agent shares, and no sticky decision is accepted under it)."""

    name: str | None
    conversation: str | None

    def call_id(self, sdk_call_id: str) -> str:
        """The ledger's call id: the SDK's, under the run when there is one (a provider that
        numbers its calls per response repeats ids across runs)."""
        return f"{self.name}/{sdk_call_id}" if self.name else sdk_call_id


@dataclass
class _Gating:
    backend: AsyncBackend
    run: str | None
    keep_result: bool
    invoke: Callable[[Any, str], Awaitable[Any]]  # the tool's own on_invoke_tool

    def run_for(self, context: Any) -> _Run:
        """countersign's run for a call made in an SDK run whose context object is `context`
        (the RunContextWrapper's `.context`): the conversation's when it names one."""
        conversation = _conversation(context)
        if conversation is None:
            return _Run(self.run, None)
        return _Run(f"{self.run}/{conversation}" if self.run else conversation, conversation)


def _conversation(context: Any) -> str | None:
    """The conversation id an SDK run's context carries (CONVERSATION), or None. One that is
    there but not a non-empty string raises BackendError (the call does not run)."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        value = context.get(CONVERSATION)
    else:
        value = getattr(context, CONVERSATION, None)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BackendError("invalid_conversation", f"the run context's {CONVERSATION} must be a non-empty string, "
                           f"not {value!r}")
    return value


def conversation_of(run: Any) -> str | None:
    """The conversation id of an SDK run (a RunResult, a RunState, a RunContextWrapper or the
    context object itself), or None: the ledger's run of its calls is "<gate_tools run>/<it>"."""
    from agents import RunContextWrapper, RunResult, RunState

    if isinstance(run, RunResult) or hasattr(run, "context_wrapper"):  # a RunResult (or a streamed one)
        run = run.context_wrapper
    elif isinstance(run, RunState):
        run = run._context  # the SDK keeps it there; no public accessor in 0.24
    if isinstance(run, RunContextWrapper):
        run = run.context
    return _conversation(run)


def _async(backend) -> AsyncBackend:
    return backend if isinstance(backend, AsyncBackend) else AsyncBackend(backend)


def gating_of(tool: Any) -> _Gating | None:
    """The countersign gating of a FunctionTool, or None when it is not gated."""
    return getattr(tool, GATING_ATTRIBUTE, None)


def countersign_tool(tool: Any, backend, *, run: str | None = None, keep_result: bool = False, **function_tool_options):
    """A gated copy of `tool` (a FunctionTool, or a plain function turned into one with
    `agents.function_tool(fn, **function_tool_options)`). `backend`: a LocalBackend,
    ServiceBackend or AsyncBackend (adapters.backend). `run`: the ledger's run name, which also
    scopes the call ids. `keep_result`: record the tool's output in the ledger (when JSON), so a
    replayed call returns it. A tool already gated is returned as it is. Raises TypeError for
    anything but a function or FunctionTool, and for a tool with its own `needs_approval`
    (countersign's policy says which calls need a person: put that rule in the policy)."""
    from agents import FunctionTool, function_tool

    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise TypeError(f"countersign_tool takes a function or a FunctionTool, not {type(tool).__name__}")
        tool = function_tool(tool, **function_tool_options)
    elif function_tool_options:
        raise TypeError("function_tool options apply to a plain function, not to a FunctionTool")
    if gating_of(tool) is not None:
        return tool
    if tool.needs_approval is not False:
        raise TypeError(f"tool {tool.name!r} has its own needs_approval: countersign's policy decides which "
                        "calls need a person (write the rule there)")
    gated = copy.copy(tool)  # the copy's invoker is bound to the copy (the SDK's failure handling)
    gating = _Gating(_async(backend), run, keep_result, gated.on_invoke_tool)
    gated.on_invoke_tool = _invoker(gated, gating)
    if getattr(gating.invoke, SYNC_MARKER, False):  # the SDK refuses a timeout on a sync tool: keep telling it
        setattr(gated.on_invoke_tool, SYNC_MARKER, True)
    gated.needs_approval = _needs_approval(gated, gating)
    setattr(gated, GATING_ATTRIBUTE, gating)
    return gated


def gate_tools(agent_or_tools: Any, backend, *, run: str | None = None, keep_result: bool = False):
    """Gate every tool of an Agent (its `tools` list is replaced; the agent is returned) or of a
    list of tools (a new list is returned). Raises TypeError for a tool countersign cannot gate:
    a hosted tool (it runs on the provider's servers), a shell or computer tool, or an agent's
    MCP servers (put `countersign mcp-proxy` in front of them instead); handoff agents are
    gated by their own gate_tools call."""
    from agents import Agent

    if isinstance(agent_or_tools, Agent):
        if agent_or_tools.mcp_servers:
            raise TypeError("the agent's MCP servers' tools cannot be gated here: run each server behind "
                            "`countersign mcp-proxy` instead")
        agent_or_tools.tools = gate_tools(list(agent_or_tools.tools), backend, run=run, keep_result=keep_result)
        return agent_or_tools
    return [_gate_one(tool, backend, run, keep_result) for tool in agent_or_tools]


def _gate_one(tool, backend, run, keep_result):
    from agents import FunctionTool

    if not isinstance(tool, FunctionTool):
        raise TypeError(f"countersign gates FunctionTools; {type(tool).__name__} {getattr(tool, 'name', '')!r} "
                        "cannot be gated (remove it or gate it another way)")
    return countersign_tool(tool, backend, run=run, keep_result=keep_result)


def _parse(arguments: str | None) -> dict | None:
    try:
        value = json.loads(arguments or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _needs_approval(tool, gating: _Gating):
    async def needs_approval(run_context, params: dict, call_id: str) -> bool:
        """True while countersign waits for a person. A backend error is False here because the
        invocation proposes again and refuses to run (the tool's output says why)."""
        try:
            run = gating.run_for(getattr(run_context, "context", None))
            verdict = await gating.backend.propose(tool.name, params, run=run.name, call_id=run.call_id(call_id))
        except BackendError:
            return False
        return verdict.status in WAITING

    return needs_approval


def _invoker(tool, gating: _Gating):
    async def invoke(ctx, arguments: str) -> Any:
        """The SDK's on_invoke_tool: countersign decides, then the tool's own invocation runs
        with the approved arguments, or the model gets the reason it did not."""
        args = _parse(arguments)
        if args is None:
            return "countersign: the arguments are not a JSON object; the call did not run."
        backend = gating.backend
        try:
            run = gating.run_for(getattr(ctx, "context", None))
            verdict = await backend.propose(tool.name, args, run=run.name, call_id=run.call_id(ctx.tool_call_id))
        except BackendError as exc:
            return f"countersign could not record this call ({exc.code}: {exc.message}); it did not run."
        if verdict.effect == "deny":
            return verdict.reason or DEFAULT_DENY
        if verdict.status in WAITING:
            # The SDK approved what countersign has not (approve() called by hand, an SDK-side
            # always_approve no standing decision of countersign's covers): withdraw it, so the
            # ledger does not keep a call nobody will run.
            note = ("approved inside the Agents SDK only (countersign has no approval or standing decision "
                    "covering it); it needs countersign's approval and did not run.")
            try:
                await backend.cancel(verdict.request, "the agent's host approved it without countersign")
            except BackendError:
                pass
            return f"countersign: this call (request {verdict.request}) was {note}"
        if verdict.status not in RAN:
            try:
                settled = await backend.get(verdict.request)
            except BackendError as exc:
                return f"countersign could not read this call ({exc.code}: {exc.message}); it did not run."
            return _said(settled)
        raised: list[BaseException] = []
        returned: list[Any] = []  # the tool's output once it ran: the call ran, whatever is recorded

        async def run_tool(approved: dict) -> Any:
            text = json.dumps(approved)
            context = ctx
            if approved != args:  # edited: a tool that reads its ToolContext sees what it runs with
                context = copy.copy(ctx)
                context.tool_arguments = text
            try:
                result = await gating.invoke(context, text)
            except Exception as exc:  # recorded as the outcome, then raised as the SDK would
                raised.append(exc)
                raise
            returned.append(result)
            return result

        try:
            outcome = await backend.execute(verdict.request, run_tool, keep_result=gating.keep_result)
        except BackendError as exc:
            if raised:  # it ran and failed; the failure goes on to the SDK, recorded or not
                raise raised[0] from None
            if returned:  # it ran: never tell the model otherwise (it would retry: a second real run)
                return _ran_unrecorded(verdict.request, returned[0], exc)
            if exc.code in STARTED_BEFORE:
                return (f"countersign: this call (request {verdict.request}) was started before and its outcome "
                        f"is not known ({exc.code}): it may have run; it was not run again.")
            return f"countersign did not run this call ({exc.code}: {exc.message})."
        if outcome.outcome == "ok":
            if outcome.replayed and not outcome.result_kept:
                return f"countersign: this call ran before (request {outcome.request}); its result was not kept."
            return outcome.result
        if raised:
            raise raised[0]
        return f"countersign: the tool failed: {outcome.error}"

    return invoke


def _ran_unrecorded(request: int, result: Any, exc: BackendError) -> str:
    """What the model reads for a call that ran but whose outcome countersign could not record:
    that it ran, why the record is missing, and the tool's output."""
    if isinstance(result, str):
        output = result
    else:
        try:
            output = json.dumps(result)
        except (TypeError, ValueError):
            output = str(result)
    return (f"countersign: this call ran (request {request}), but its outcome could not be recorded "
            f"({exc.code}: {exc.message}). The tool's output:\n{output}")


def _said(settled: Settled) -> str:
    """What the model reads for a call that did not run: the reviewer's reason or response."""
    if settled.reason:
        return settled.reason
    who = f" by {settled.decided_by}" if settled.decided_by else ""
    return f"countersign: the call was {settled.status}{who}; it did not run."


# --- resolving interruptions -----------------------------------------------------------------

async def resolve(result: Any, *, review: Review | None = None, reviewers: Callable[[str | None], str] | None = None,
                  timeout: float | None = None):
    """Decide every interruption of a gated tool through countersign; returns the RunState to
    resume with (`Runner.run(agent, state)`).

    `result`: a RunResult with interruptions, or a RunState (one restored with
    RunState.from_string after a restart). `review(pending) -> Decision | None` (may be
    async): an in-process reviewer, asked once per decision still needed (so twice for a
    quorum of two); None leaves the rest to the inbox, the API or `countersign review`.
    `reviewers(token) -> name`: who a Decision's token is, for a local ledger
    (adapters.identity.RosterReviewers); the service authenticates the token itself.
    `timeout`: seconds to wait for each call's decision (None: until the ask's own deadline,
    whose safe default the Gate applies); past it the call is withdrawn (cancelled in the
    ledger) and the model told so.

    Interruptions of tools countersign does not gate are left as they are (the resumed run
    pauses on them again). Raises BackendError (the state is left as it was for that call,
    which does not run): `unauthenticated` / `forbidden` for a Decision without a reviewer's
    token, `sticky_not_allowed` for an always_approve / always_reject the ask's rule does not
    let be remembered for the run, or made in a run that is not one conversation's (nothing
    recorded), `invalid_decision`, `inconsistent_arguments` for arguments that do not match their digest when read (never
    shown), or the backend's refusal (a decision the rule does not allow, a reviewer deciding
    twice, a stale digest MAX_STALE times in a row: a stale one is shown again first).
    """
    state = result.to_state() if hasattr(result, "to_state") else result
    items = result.interruptions if hasattr(result, "interruptions") else state.get_interruptions()
    wrapper = getattr(state, "_context", None)  # the run's RunContextWrapper (no public accessor in 0.24)
    context = getattr(wrapper, "context", None)
    for item in items:
        gating = _gating_for(item)
        if gating is None:
            continue
        settled = await _settle(item, gating.run_for(context), gating, review, reviewers, timeout)
        if settled.status in RAN:
            state.approve(item)  # the tool's invocation runs it with the approved arguments
        else:
            state.reject(item, rejection_message=_said(settled))
    return state


def _gating_for(item) -> _Gating | None:
    agent = getattr(item, "agent", None)
    for tool in getattr(agent, "tools", None) or ():
        if getattr(tool, "name", None) == item.tool_name and gating_of(tool) is not None:
            return gating_of(tool)
    return None


async def _settle(item, run: _Run, gating: _Gating, review, reviewers, timeout) -> Settled:
    backend = gating.backend
    args = _parse(item.arguments)
    if args is None:
        return Settled(request=0, status="denied", args_digest="",
                       reason="countersign: the arguments are not a JSON object; the call did not run.")
    verdict = await backend.propose(item.tool_name, args, run=run.name, call_id=run.call_id(item.call_id))
    if verdict.effect == "deny":
        return Settled(request=verdict.request, status="denied", args_digest=verdict.args_digest,
                       reason=verdict.reason or DEFAULT_DENY)
    settled = await backend.get(verdict.request)
    give_up = None if timeout is None else time.monotonic() + max(0.0, timeout)
    asking, rounds, stale = review is not None, 0, 0
    while settled.waiting:
        if asking:
            view = await _current(backend, verdict.request)
            if view.get("status") not in WAITING:  # decided meanwhile: nothing left to ask
                settled = await backend.get(verdict.request)
                continue
            quorum = view.get("quorum") or {}
            pending = Pending(verdict.request, item.tool_name, item.call_id, view["args"], view["args_digest"],
                              verdict.reason, tuple(view.get("decisions") or verdict.decisions),
                              quorum.get("needs") or verdict.needs, rounds + 1, item,
                              tuple(view.get("remember") or ()))
            answer = review(pending)
            answer = await answer if inspect.isawaitable(answer) else answer
            if answer is None:
                asking = False  # the rest is decided elsewhere: wait for it
                continue
            try:  # the decision binds the digest of the arguments shown, never a later one
                settled = await _decide(backend, verdict.request, pending.args_digest, answer, reviewers, run)
            except BackendError as exc:
                stale += 1
                if exc.code not in STALE or stale > MAX_STALE:
                    raise
                settled = await backend.get(verdict.request)  # edited meanwhile: show the new arguments
                continue
            rounds, stale = rounds + 1, 0
            continue
        left = None if give_up is None else give_up - time.monotonic()
        if left is not None and left <= 0:
            why = f"no decision within {timeout:g} s; the agent withdrew the call"
            try:
                return await backend.cancel(verdict.request, why)
            except BackendError:  # decided meanwhile: take that decision
                settled = await backend.get(verdict.request)
                if settled.waiting:
                    raise
                return settled
        settled = await backend.wait(verdict.request, left)
    return settled


async def _current(backend: AsyncBackend, request: int) -> dict:
    """The request as its reviewer is shown it (Backend.details): its current arguments and
    their digest in one read, checked against each other before anything is shown. A read whose
    two halves disagree (an edit landed between them) is read again; one that keeps disagreeing
    (or a backend that cannot describe a request) is refused: nobody approves unseen arguments."""
    from ledger.digest import ArgumentsError, value_digest

    details = getattr(backend.backend, "details", None)
    if details is None:
        raise BackendError("unsupported_backend", f"{type(backend.backend).__name__} cannot show a request's "
                           "current arguments; no in-process review is possible with it", request)
    for _ in range(READS):
        view = await asyncio.to_thread(details, request)
        if view.get("status") not in WAITING:
            return view
        args, digest = view.get("args"), view.get("args_digest")
        try:
            if isinstance(args, dict) and isinstance(digest, str) and value_digest(args) == digest:
                return view
        except ArgumentsError:
            pass
    raise BackendError("inconsistent_arguments", f"request {request}: the arguments read do not match their "
                       f"digest ({READS} reads); they are not shown to a reviewer", request)


async def _decide(backend: AsyncBackend, request: int, digest: str, answer: Decision, reviewers,
                  run: _Run) -> Settled:
    """Record an in-process decision for the reviewer the token authenticates (fail closed). A
    sticky one is the approval or rejection remembered for the run, or refused whole: also when
    the run is not one conversation's (the gate_tools run every conversation shares)."""
    if not isinstance(answer, Decision):
        raise BackendError("invalid_decision", f"review must return a Decision or None, not {type(answer).__name__}",
                           request)
    if answer.decision not in DECISIONS and answer.decision not in STICKY:
        raise BackendError("invalid_decision", f"unknown decision {answer.decision!r}: one of "
                           f"{', '.join((*DECISIONS, *STICKY))}", request)
    fields = dict(digest=digest, args=answer.args, reason=answer.reason, message=answer.message,
                  comment=answer.comment)
    decision = answer.decision
    if decision in STICKY:
        if run.name is None or run.conversation is None:
            where = (f"gate_tools' run {run.name!r}, which every conversation of the agent shares"
                     if run.name is not None else "no run at all")
            raise BackendError("sticky_not_allowed", f"{decision} is remembered for the SDK's run, and this run's "
                               f"calls are proposed under {where}: start the conversation with run_gated (or give "
                               f"its run context a per-conversation {CONVERSATION!r}); nothing was recorded: "
                               "decide this call alone", request)
        decision = STICKY[decision]
        fields.update(remember=STICKY_SCOPE, pattern=None)
    try:
        return await _record_decision(backend, request, decision, fields, answer, reviewers)
    except BackendError as exc:
        if answer.decision in STICKY and exc.code in REFUSED_STICKY:
            raise BackendError("sticky_not_allowed", f"{answer.decision}: the policy's rule does not let this "
                               f"decision be remembered for the run ({exc.message}); nothing was recorded: "
                               "decide this call alone (approve, edit, reject or respond)", request) from None
        raise


async def _record_decision(backend: AsyncBackend, request: int, decision: str, fields: dict, answer: Decision,
                           reviewers) -> Settled:
    inner = backend.backend
    if isinstance(inner, ServiceBackend):
        if not answer.token:
            raise BackendError("unauthenticated", "the decision carries no reviewer token", request)
        as_reviewer = ServiceBackend(inner.url, inner.token, reviewer_token=answer.token, timeout=inner.timeout)
        try:
            return await asyncio.to_thread(as_reviewer.decide, request, decision, **fields)
        finally:
            as_reviewer.close()
    if reviewers is None:
        raise BackendError("unauthenticated", "an in-process decision on a local ledger needs `reviewers` "
                           "(token → name, e.g. adapters.identity.RosterReviewers) to say who decided", request)
    name = reviewers(answer.token)  # raises BackendError unauthenticated / forbidden
    return await backend.decide(request, decision, reviewer=name, **fields)


async def run_gated(agent: Any, input: Any, *, review: Review | None = None,
                    reviewers: Callable[[str | None], str] | None = None, timeout: float | None = None,
                    max_pauses: int = 100, conversation: str | None = None, **runner_options: Any):
    """`Runner.run(agent, input, **runner_options)`, then resolve and resume while the run
    pauses on countersign's interruptions (at most `max_pauses` times). Returns the last
    RunResult: its `interruptions` are empty, or are tools countersign does not gate.

    The run is one conversation (module docstring): its context carries `conversation` (a fresh
    id when None; the one `context` already names is kept) under CONVERSATION, so its calls,
    and any sticky decision made in it, are countersign's run "<gate_tools run>/<conversation>".
    A mapping `context` is copied with the key added (the tools read the copy); None becomes
    {CONVERSATION: id}; another object must carry the attribute itself (TypeError otherwise).
    `input` a RunState (one restored from text) keeps the conversation its context names.
    `conversation_of(result)` reads it back."""
    from agents import RunState, Runner

    context = runner_options.pop("context", None)
    if isinstance(input, RunState):
        if conversation is not None or context is not None:
            raise TypeError("a RunState carries its own context (and conversation): resume it without "
                            "`conversation` or `context`")
        result = await Runner.run(agent, input, **runner_options)
    else:
        context = _with_conversation(context, conversation)
        result = await Runner.run(agent, input, context=context, **runner_options)
    for _ in range(max_pauses):
        if not result.interruptions or not any(_gating_for(i) for i in result.interruptions):
            return result
        state = await resolve(result, review=review, reviewers=reviewers, timeout=timeout)
        result = await Runner.run(agent, state, **runner_options)
    return result


def _with_conversation(context: Any, conversation: str | None) -> Any:
    """The context for a new run of run_gated: one naming its conversation (run_gated)."""
    if conversation is not None and (not isinstance(conversation, str) or not conversation):
        raise TypeError(f"conversation must be a non-empty string, not {conversation!r}")
    named = _conversation(context)
    if named is not None:
        if conversation is not None and conversation != named:
            raise TypeError(f"the context names conversation {named!r} and conversation= {conversation!r}")
        return context
    conversation = conversation or uuid4().hex
    if context is None:
        return {CONVERSATION: conversation}
    if isinstance(context, Mapping):
        return {**context, CONVERSATION: conversation}
    raise TypeError(f"run_gated carries the conversation in the run context: give this {type(context).__name__} "
                    f"context a {CONVERSATION!r} attribute (one per conversation), or pass a mapping")
