"""countersign for LangChain agents and LangGraph graphs (issue 12, section 1).

Two ways in, one review loop:

    from adapters.langchain import CountersignMiddleware
    agent = create_agent(model, tools, checkpointer=InMemorySaver(),
                         middleware=[CountersignMiddleware(backend, reviewers=RosterReviewers(roster))])

    from adapters.langchain import countersign_call          # inside a node of a plain LangGraph graph
    done = countersign_call(backend, "refund", {"order": 7}, refund, reviewers=who)

Every tool call is proposed to countersign (adapters.backend: a local Gate or the approval
service): `run` is the thread id of the runnable config, `call_id` the model's tool call id (the
helper's: thread, checkpoint namespace and tool), `context` what the host passes.

- allow: the tool runs through Backend.execute: recorded, at most once. A node LangGraph runs
  again (a resume, a restart) gets the recorded outcome back instead of running the tool twice,
  and the result itself when it was kept in the ledger (`keep_result`: off by default for the
  middleware, whose tool calls are one LangGraph task each; on by default for `countersign_call`,
  whose node re-runs from its start on every resume and needs each earlier call's result).
- deny: the tool never runs; the model gets a ToolMessage (status "error") with the policy's reason.
- ask: a LangGraph `interrupt()` per call (REVIEW payload below). The resume is a decision —
  approve / edit / reject / respond, as the matching rule allows — by an authenticated reviewer,
  recorded with the argument digest the reviewer saw; or "check", when the decision was made in
  the approval service or its inbox. While the request still waits (a quorum of two has one
  approval; a refused resume) the call interrupts again. A rejection's reason or a response's
  message comes back to the model as the call's ToolMessage.

The resume (what `Command(resume=...)` carries; `resume()` builds one). Each names the request
R and call C of the REVIEW payload it answers:

    {"type": "approve", "request": R, "call_id": C, "token": T, "digest": D}
    {"type": "edit", ..., "args": {...}}                           # or LangChain's
        "edited_action": {"name": tool, "args": {...}}
    {"type": "reject", ..., "reason": "..."}                       # or "message"
    {"type": "respond", ..., "message": "..."}
    {"type": "check", "request": R, "call_id": C}

An approve or a reject may carry `"remember": "run" | "session" | "8h"` (and `"pattern":
"exact"`): the decision then stands for the later calls of the same tool in that scope, which
countersign decides without asking (docs/policy-language.md, "Remembered decisions"; the run is
the thread id, so `"run"` is this thread). Only as far as the ask's rule allows: the payload's
"remember" lists what it allows ([] when the rule has no `remember` clause); a resume asking for
more is refused whole (nothing recorded, the call interrupts again with the refusal), as is
`remember` on an edit or a response. LangChain's own HITL has no sticky decision; this is
countersign's.

`token` says who decides: `reviewers(token)` names the reviewer (adapters.identity.RosterReviewers,
or a host's callable raising BackendError "unauthenticated"); with a ServiceBackend and no
`reviewers`, the service authenticates the token itself. A name in the resume is never read.
`digest` is the REVIEW payload's: a decision about arguments that changed since is refused.

Fail closed: a resume that names no request ("unbound_resume") or another request or call than
the one interrupting ("wrong_request"), is not a decision, carries no token the reviewers know (or
an agent's), names a decision the rule does not allow, or that the backend refuses records
nothing, runs nothing, and the call interrupts again with the refusal in the payload ("refused").
A backend error while proposing or reading raises (the graph run stops; nothing ran).

Why the loop is safe to run again: LangGraph re-runs a node from its start on every resume and
hands back the earlier resumes by position, not by request (langgraph.types.interrupt: the n-th
interrupt() of the task gets the n-th resume; an interrupt id names a position too). The loop
takes one resume per interrupt and applies it only to the request it names. A resume for a call
that no longer interrupts (it ran since) lands on the next call's interrupt: refused as
"wrong_request", that call interrupts again and takes the next resume, its own — so one call's
approval is never applied to another, even when both have the same argument digest (read_file,
then delete_file, of one path). A resume applied again to its own request is a no-op in the Gate:
a repeated approval is a DuplicateApproval, a repeated edit or approval of arguments edited since
a StaleDigest, a repeated reject or respond finds the request decided (the loop ends first). So
the second run consumes the same resumes as the first, records nothing new, and stops at the same
interrupt.

The REVIEW payload (the interrupt's value): {"type": "countersign_review", "request", "tool",
"call_id", "run", "args" (the current, possibly edited ones), "digest", "decisions" (the rule's),
"reasons", "rules", "needs" ("2 from sups"), "approved_by", "more_needed", "deadline", "link",
"remember" (the `remember` values the rule allows: [] none; ["run"]; ["run", "session"]; durations
up to the rule's, e.g. ["1h", "8h", "28800s"], any shorter one allowed too), "refused" ({"code",
"message"} of the last resume, or None)}.

LangGraph stores resume values in its checkpointer: a token in a resume is stored there too, and
LangGraph replays it on every re-run of the task. It is only ever applied to the request it was
given for (above), where the reviewer's decision is already recorded (the replay is a no-op). Use
short-lived reviewer tokens still (anyone reading the checkpointer reads them), or decide in the
service's inbox and resume with "check".

langchain and langgraph are imported inside the functions and classes that need them (the
`langchain` extra), so importing this module costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Generator

from adapters.backend import AsyncBackend, BackendError, Outcome, ServiceBackend, Settled, Verdict

REVIEW = "countersign_review"
DECISIONS = ("approve", "edit", "reject", "respond")
CHECK = "check"
FINAL_MESSAGES = {
    "expired": "No one decided this call in time; it did not run.",
    "cancelled": "This call was withdrawn; it did not run.",
    "executing": "This call started before and how it went was never recorded: it does not run again.",
}


# --- what a gated call came to ------------------------------------------------------------------

@dataclass(frozen=True)
class Gated:
    """What `countersign_call` returns. `status`: "executed" (the tool ran, now or before),
    "failed" (it ran and raised or reported an error), "denied", "rejected", "responded",
    "expired", "cancelled", or "executing" (started before and never finished: it does not run
    again, and may or may not have run). `result` the tool's result (the kept one when `replayed`;
    None when `replayed` and not `result_kept`: it ran before and its result was not kept);
    `message` the instruction for the agent (the policy's reason, the rejection's reason, the
    response, the error)."""

    request: int
    status: str
    result: Any = None
    message: str | None = None
    replayed: bool = False
    decided_by: str | None = None
    result_kept: bool = False

    @property
    def ran(self) -> bool:
        return self.status in ("executed", "failed")


@dataclass(frozen=True)
class _Decided:
    """Where the review loop left a call: `settled` is runnable (run it) or final (don't)."""

    verdict: Verdict
    settled: Settled


@dataclass(frozen=True)
class _Op:
    """One backend step the review loop asks its driver to take (sync or awaited)."""

    name: str
    args: tuple
    kwargs: dict


# --- the review loop (shared by the sync and the async drivers) ---------------------------------

def _review(tool: str, args: dict, *, call_id: str | None, run: str | None, context: dict | None,
            reviewers: Callable[[str | None], str] | None, service: bool) -> Generator[_Op, Any, _Decided]:
    """Propose the call, then interrupt until it is decided (module docstring). Yields the backend
    steps; raises GraphInterrupt (LangGraph's) while a person must decide."""
    from langgraph.types import interrupt

    verdict = yield _Op("propose", (tool, args), {"run": run, "context": context, "call_id": call_id})
    settled = yield _Op("get", (verdict.request,), {})
    refused = None
    while settled.waiting:
        view = yield _Op("details", (verdict.request,), {})
        allowed = tuple(view.get("decisions") or verdict.decisions)
        payload = _payload(verdict, view, allowed, call_id, run, refused)
        answer = interrupt(payload, response_schema=_answer_schema(allowed))
        refused = None
        try:
            _check_bound(answer, verdict.request, call_id)
            step = _decision_step(answer, tool, view, allowed, reviewers, service)
            if step is not None:
                yield step
        except BackendError as exc:
            refused = {"code": exc.code, "message": exc.message}
        settled = yield _Op("get", (verdict.request,), {})
    return _Decided(verdict, settled)


def _payload(verdict: Verdict, view: dict, allowed: tuple, call_id, run, refused) -> dict:
    quorum = view.get("quorum") or {}
    return {
        "type": REVIEW,
        "request": verdict.request,
        "tool": verdict.tool,
        "call_id": call_id,
        "run": run,
        "args": view.get("args"),
        "digest": view.get("args_digest") or verdict.args_digest,
        "decisions": list(allowed),
        "reasons": list(verdict.reasons),
        "rules": list(verdict.rules),
        "needs": quorum.get("needs") or verdict.needs,
        "approved_by": list(quorum.get("approved_by") or ()),
        "more_needed": quorum.get("more_needed"),
        "deadline": view.get("deadline") or verdict.deadline,
        "link": verdict.link,
        "remember": list(view.get("remember") or verdict.remember),
        "refused": refused,
    }


def _answer_schema(allowed: tuple) -> dict:
    """The JSON Schema of a resume, shown to clients (LangGraph does not check a dict schema:
    `_decision_step` does)."""
    return {
        "type": "object",
        "required": ["type", "request", "call_id"],
        "properties": {
            "type": {"enum": [*allowed, CHECK]},
            "request": {"type": "integer", "description": "the REVIEW payload's request (the one this answers)"},
            "call_id": {"type": "string", "description": "the REVIEW payload's call_id"},
            "token": {"type": "string", "description": "the reviewer's token (who decides)"},
            "digest": {"type": "string", "description": "the digest of the arguments the reviewer saw"},
            "args": {"type": "object", "description": "edit: the new arguments"},
            "reason": {"type": "string", "description": "reject: what the agent should do instead"},
            "message": {"type": "string", "description": "respond: the answer in place of the tool's result"},
            "remember": {"type": "string", "description": "approve, reject: make the decision standing for "
                         "later calls of the tool (one of the payload's \"remember\", or a shorter duration)"},
            "pattern": {"enum": ["exact"], "description": "with remember: only calls with these arguments"},
        },
    }


def _check_bound(answer: Any, request: int, call_id: str | None) -> None:
    """Refuse (BackendError) a resume that does not name the request and call interrupting now.

    LangGraph hands a re-run task its earlier resumes by position (the n-th interrupt() of the
    task gets the n-th resume: langgraph.types.interrupt), and an interrupt-id-keyed resume
    (`Command(resume={id: value})`) names a position too (the id is the task's namespace and the
    count of its resumes). When a call that interrupted before no longer does (it ran), its
    resume lands on the next call's interrupt, and two calls of one node may have the same
    argument digest: only the request the resume names tells them apart. So a decision is
    applied to the request it names, never to the one that happens to be interrupting."""
    if not isinstance(answer, dict):
        return  # not a decision at all: _decision_step says so
    named = answer.get("request")
    if named is None:
        raise BackendError("unbound_resume", f"a resume names the request it answers (\"request\": {request}, "
                           f"\"call_id\": {json.dumps(call_id)}: the REVIEW payload's; resume() puts them in)")
    if type(named) is not int or named != request or answer.get("call_id") != call_id:
        raise BackendError("wrong_request", f"this resume answers request {named!r} (call "
                           f"{json.dumps(answer.get('call_id'), default=str)}), not request {request} "
                           f"(call {json.dumps(call_id)}) waiting here: nothing was recorded")


def _decision_step(answer: Any, tool: str, view: dict, allowed: tuple,
                   reviewers: Callable[[str | None], str] | None, service: bool) -> _Op | None:
    """The backend's `decide` step for one resume, or None for "check". Raises BackendError for
    anything that is not a decision this reviewer may give (nothing is recorded then)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("type"), str):
        raise BackendError("invalid_decision", "a resume is a decision: {\"type\": \"approve\", \"token\": ..., "
                           "\"digest\": ...} (or \"edit\", \"reject\", \"respond\", \"check\")")
    kind = answer["type"]
    if kind == CHECK:
        return None
    if kind not in DECISIONS:
        raise BackendError("invalid_decision", f"unknown decision {kind!r}: one of {', '.join((*DECISIONS, CHECK))}")
    if kind not in allowed:
        raise BackendError("decision_not_allowed", f"the rule allows {', '.join(allowed)} for this call, not {kind}")
    token = answer.get("token")
    if reviewers is not None:
        try:
            reviewer = reviewers(token)  # raises BackendError unauthenticated / forbidden
        except BackendError:
            raise
        except Exception as exc:  # a host's callable that fails otherwise: still no decision
            raise BackendError("unauthenticated", f"the reviewer could not be authenticated: {exc}") from None
        if not isinstance(reviewer, str) or not reviewer:
            raise BackendError("unauthenticated", "the reviewers callable named no one")
    elif service:
        if not isinstance(token, str) or not token:
            raise BackendError("unauthenticated", "the decision carries no reviewer's token")
        reviewer = None  # the service authenticates the token
    else:
        raise BackendError("unauthenticated", "no reviewers were given to authenticate a decision with: pass "
                           "reviewers=RosterReviewers(roster) (or a callable token -> name)")
    digest = answer.get("digest")
    if not isinstance(digest, str) or not digest:
        raise BackendError("invalid_decision", "a decision names the digest of the arguments the reviewer saw")
    fields: dict[str, Any] = {"reviewer": reviewer, "digest": digest}
    if kind == "edit":
        new_args = answer.get("args")
        edited = answer.get("edited_action")
        if new_args is None and isinstance(edited, dict):
            if edited.get("name", tool) != tool:
                raise BackendError("invalid_decision", f"an edit changes the arguments of {tool}, not the tool")
            new_args = edited.get("args")
        if not isinstance(new_args, dict):
            raise BackendError("invalid_decision", "an edit carries the new arguments as an object (\"args\")")
        if _digest_of(new_args) == view.get("args_digest"):
            kind = "approve"  # the same arguments: an approval (and so a no-op when run again)
        else:
            fields.update(args=new_args, reason=_text(answer.get("reason")))
    elif kind == "reject":
        fields["reason"] = _text(answer.get("reason")) or _text(answer.get("message"))
    elif kind == "respond":
        message = answer.get("message")
        if not isinstance(message, str):
            raise BackendError("invalid_decision", "a response carries the message the agent gets (\"message\")")
        fields["message"] = message
    if kind == "approve" and _text(answer.get("comment")):
        fields["comment"] = answer["comment"]
    fields.update(_standing(answer))
    # the service authenticates the reviewer's own token (again, when `reviewers` named them here)
    return _Op("decide", (view["request"], kind), {"token": token if service else None, **fields})


def _standing(answer: dict) -> dict:
    """A resume's `remember` and `pattern` (module docstring), checked for their shape; whether
    the rule allows them is the backend's to say (it refuses, recording nothing)."""
    remember, pattern = answer.get("remember"), answer.get("pattern")
    if remember is None and pattern is None:
        return {}
    if answer["type"] not in ("approve", "reject"):
        raise BackendError("invalid_decision", f"only an approval or a rejection can be remembered, not {answer['type']}")
    if not isinstance(remember, str) or not remember:
        raise BackendError("invalid_decision", "remember is \"run\", \"session\" or a duration such as \"8h\"")
    if pattern not in (None, "exact"):
        raise BackendError("invalid_decision", f"pattern is \"exact\" or absent (any arguments), not {pattern!r}")
    return {"remember": remember, "pattern": pattern}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _digest_of(args: dict) -> str | None:
    from ledger.digest import ArgumentsError, value_digest

    try:
        return value_digest(args)
    except ArgumentsError:
        return None


# --- drivers: take the loop's backend steps ----------------------------------------------------

def _details(backend: Any, request: int) -> dict:
    """The request as a reviewer sees it (Backend.details): its current arguments, digest,
    allowed decisions and quorum progress."""
    details = getattr(backend, "details", None)
    if details is None:
        raise BackendError("unsupported_backend", f"{type(backend).__name__} cannot describe a request")
    return details(request)


def _decide(backend: Any, request: int, kind: str, *, token: str | None, **fields: Any) -> Settled:
    if token is not None:  # the service authenticates the reviewer's own token
        reviewer = ServiceBackend(backend.url, backend.token, reviewer_token=token, timeout=backend.timeout)
        try:
            return reviewer.decide(request, kind, **fields)
        finally:
            reviewer.close()
    return backend.decide(request, kind, **fields)


def _step(backend: Any, op: _Op) -> Any:
    if op.name == "details":
        return _details(backend, *op.args)
    if op.name == "decide":
        return _decide(backend, *op.args, **op.kwargs)
    return getattr(backend, op.name)(*op.args, **op.kwargs)


def _drive(loop: Generator[_Op, Any, _Decided], backend: Any) -> _Decided:
    """Run the review loop against a sync Backend; a BackendError from a step goes back into the
    loop (which refuses the resume, or lets it raise)."""
    reply: Any = None
    error: BackendError | None = None
    while True:
        try:
            op = loop.throw(error) if error is not None else loop.send(reply)
        except StopIteration as stop:
            return stop.value
        try:
            reply, error = _step(backend, op), None
        except BackendError as exc:
            reply, error = None, exc


async def _adrive(loop: Generator[_Op, Any, _Decided], backend: AsyncBackend) -> _Decided:
    """`_drive` with each step awaited in a worker thread (AsyncBackend's way); the loop itself,
    and so `interrupt()`, runs on the event loop in the caller's context."""
    import asyncio

    reply: Any = None
    error: BackendError | None = None
    while True:
        try:
            op = loop.throw(error) if error is not None else loop.send(reply)
        except StopIteration as stop:
            return stop.value
        try:
            reply, error = await asyncio.to_thread(_step, backend.backend, op), None
        except BackendError as exc:
            reply, error = None, exc


def _sync(backend: Any) -> Any:
    return backend.backend if isinstance(backend, AsyncBackend) else backend


def _thread_id(config: Any) -> str | None:
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def _refusal(decided: _Decided) -> tuple[str, str]:
    """(status, message for the agent) of a call that will not run."""
    settled = decided.settled
    if settled.status == "denied":
        return "denied", decided.verdict.reason or "The policy denies this call."
    message = settled.reason or FINAL_MESSAGES.get(settled.status) or f"This call did not run ({settled.status})."
    return settled.status, message


# --- a node of a plain LangGraph graph -----------------------------------------------------------

def _call_names(tool: str, call_id: str | None, run: str | None) -> tuple[str, str | None]:
    from langgraph.config import get_config

    config = get_config()
    thread = _thread_id(config)
    if call_id is None:
        namespace = (config.get("configurable") or {}).get("checkpoint_ns") or ""
        if thread is None or not namespace:
            raise BackendError("no_call_id", "countersign_call outside a checkpointed graph task needs a call_id")
        call_id = f"{thread}:{namespace}:{tool}"
    return call_id, run if run is not None else thread


def countersign_call(backend: Any, tool: str, args: dict, fn: Callable[[dict], Any], *, call_id: str | None = None,
                     run: str | None = None, context: dict | None = None,
                     reviewers: Callable[[str | None], str] | None = None, keep_result: bool = True) -> Gated:
    """Decide and run `fn(args)` from inside a node of a LangGraph graph compiled with a
    checkpointer (an ask interrupts the node: module docstring). Safe to run again: after a
    resume or a restart the node calls it again and gets the recorded outcome (with the kept
    result) without `fn` running twice.

    `call_id` defaults to "<thread id>:<checkpoint namespace>:<tool>" (stable while LangGraph
    re-runs the task; give one yourself when a node gates the same tool twice); `run` to the
    thread id. `fn` gets the approved (possibly edited) arguments.

    `keep_result` (default True, unlike CountersignMiddleware's): LangGraph re-runs the node from
    its start on every resume, so each gated call before the one interrupting is replayed, and
    the node's code after it needs its result: kept in the ledger (it must be JSON), it comes back
    as `result`. A kept result cannot be redacted from the append-only ledger: pass False for
    results holding personal data, and then do not rely on `result` when `replayed` (it is None,
    `result_kept` False); gate one call per node then, so what the node returns is saved in the
    graph's state (the checkpointer) when it ends.

    Raises GraphInterrupt while a person must decide, what `fn` raised (after recording the
    failure), and BackendError when the backend fails (nothing ran)."""
    call_id, run = _call_names(tool, call_id, run)
    sync = _sync(backend)
    decided = _drive(_review(tool, args, call_id=call_id, run=run, context=context, reviewers=reviewers,
                             service=isinstance(sync, ServiceBackend)), sync)
    if not decided.settled.runnable and decided.settled.status != "executed":
        status, message = _refusal(decided)
        return Gated(decided.verdict.request, status, message=message, decided_by=decided.settled.decided_by)
    failure: list[BaseException] = []

    def tool_fn(approved: dict) -> Any:
        try:
            return fn(approved)
        except Exception as exc:
            failure.append(exc)
            raise

    outcome = sync.execute(decided.verdict.request, tool_fn, keep_result=keep_result)
    if failure:
        raise failure[0]
    return _gated(decided, outcome)


async def acountersign_call(backend: Any, tool: str, args: dict, fn: Callable[[dict], Any], *,
                            call_id: str | None = None, run: str | None = None, context: dict | None = None,
                            reviewers: Callable[[str | None], str] | None = None, keep_result: bool = True) -> Gated:
    """`countersign_call` for an async node: `fn` may be a coroutine function (awaited on the
    loop between the durable start and the outcome, AsyncBackend.execute)."""
    call_id, run = _call_names(tool, call_id, run)
    abackend = backend if isinstance(backend, AsyncBackend) else AsyncBackend(backend)
    decided = await _adrive(_review(tool, args, call_id=call_id, run=run, context=context, reviewers=reviewers,
                                    service=isinstance(abackend.backend, ServiceBackend)), abackend)
    if not decided.settled.runnable and decided.settled.status != "executed":
        status, message = _refusal(decided)
        return Gated(decided.verdict.request, status, message=message, decided_by=decided.settled.decided_by)
    failure: list[BaseException] = []

    async def tool_fn(approved: dict) -> Any:
        try:
            result = fn(approved)
            if hasattr(result, "__await__"):
                result = await result
            return result
        except Exception as exc:
            failure.append(exc)
            raise

    outcome = await abackend.execute(decided.verdict.request, tool_fn, keep_result=keep_result)
    if failure:
        raise failure[0]
    return _gated(decided, outcome)


def _gated(decided: _Decided, outcome) -> Gated:
    status = "executed" if outcome.outcome == "ok" else "failed"
    return Gated(decided.verdict.request, status, result=outcome.result, message=outcome.error,
                 replayed=outcome.replayed, decided_by=decided.settled.decided_by, result_kept=outcome.result_kept)


# --- the resume a host sends ------------------------------------------------------------------

def resume(payload: dict, decision: str, *, token: str | None = None, **fields: Any) -> dict:
    """A resume for a REVIEW payload: `resume(p, "approve", token=t)`, `resume(p, "edit",
    token=t, args={...})`, `resume(p, "reject", token=t, reason="...")`, `resume(p, "respond",
    token=t, message="...")`, `resume(p, "check")`; an approve or reject may add
    `remember="run"` (and `pattern="exact"`) to make it standing, as the payload's "remember" allows. The request, call id and digest are the
    payload's: the resume answers that request only (a call waiting on another refuses it)."""
    answer = {**fields, "type": decision, "request": payload["request"], "call_id": payload["call_id"]}
    if decision != CHECK:
        answer.update(token=token, digest=payload["digest"])
    return answer


# --- LangChain's create_agent ------------------------------------------------------------------

_CLASS: list[type] = []


def _middleware_class() -> type:
    if _CLASS:
        return _CLASS[0]
    from langchain_core.messages import ToolMessage

    from langchain.agents.middleware.types import AgentMiddleware

    class CountersignMiddleware(AgentMiddleware):
        __doc__ = _MIDDLEWARE_DOC

        def __init__(self, backend: Any, *, reviewers: Callable[[str | None], str] | None = None,
                     context: dict | Callable[[Any], dict | None] | None = None,
                     call_id: Callable[[Any], str] | None = None, keep_result: bool = False):
            super().__init__()
            if isinstance(context, Mapping) and "session_id" in context:
                # One middleware serves every thread of the agent: a fixed session_id would make
                # a `remember session` decision in one thread stand in all of them.
                raise ValueError("a static `context` gives every thread the same session_id, so a decision "
                                 "remembered for the session would stand in every thread: pass a callable "
                                 "(ToolCallRequest -> dict) giving each thread's own session_id, or leave "
                                 "session_id out (then only `remember run`, this thread, is possible)")
            self.backend = _sync(backend)
            self.abackend = backend if isinstance(backend, AsyncBackend) else AsyncBackend(self.backend)
            self.reviewers, self.context, self.call_id, self.keep_result = reviewers, context, call_id, keep_result

        # -- the pieces both paths share

        def _names(self, request) -> tuple[str, str | None, str | None, dict | None]:
            tool_call = request.tool_call
            call_id = self.call_id(request) if self.call_id is not None else tool_call.get("id")
            if not call_id:
                raise BackendError("no_call_id", f"the model's call of {tool_call['name']} has no id: countersign "
                                   "cannot tell a re-run from a new call (a chat model returns tool call ids)")
            config = getattr(request.runtime, "config", None) if request.runtime is not None else None
            if not config:
                from langgraph.config import get_config

                config = get_config()
            context = self.context(request) if callable(self.context) else self.context
            return tool_call["name"], str(call_id), _thread_id(config), context

        def _loop(self, request):
            tool, call_id, run, context = self._names(request)
            args = request.tool_call.get("args") or {}
            return _review(tool, args, call_id=call_id, run=run, context=context, reviewers=self.reviewers,
                           service=isinstance(self.backend, ServiceBackend))

        def _message(self, request, content: Any, status: str, meta: dict) -> Any:
            tool_call = request.tool_call
            return ToolMessage(content=content, name=tool_call["name"], tool_call_id=tool_call.get("id") or "",
                               status=status, response_metadata={"countersign": meta})

        def _meta(self, decided: _Decided, status: str) -> dict:
            return {"request": decided.verdict.request, "status": status, "effect": decided.verdict.effect,
                    "rules": list(decided.verdict.rules), "decided_by": decided.settled.decided_by,
                    "edits": decided.settled.edits}

        def _not_run(self, request, decided: _Decided) -> Any:
            status, message = _refusal(decided)
            return self._message(request, message, "success" if status == "responded" else "error",
                                 self._meta(decided, status))

        def _ran(self, request, decided: _Decided, outcome, live: list, edited_args: list) -> Any:
            """The ToolMessage (or Command) of a call that ran: the live one, or one rebuilt from
            the ledger's record when it ran before (`outcome.replayed`)."""
            if live and not outcome.replayed:
                message = live[0]
            elif outcome.outcome != "ok":
                return self._message(request, outcome.error or "The tool failed.", "error",
                                     self._meta(decided, "failed"))
            elif isinstance(outcome.result, dict) and "content" in outcome.result:
                message = self._message(request, outcome.result["content"], outcome.result.get("status") or "success",
                                        {})
            else:
                return self._message(request, "This call ran before and its result was not kept "
                                     "(keep_result=False, or not JSON).", "error", self._meta(decided, "executed"))
            if not isinstance(message, ToolMessage):
                return message  # a Command from the tool, passed on as it is
            meta = self._meta(decided, "executed" if message.status != "error" else "failed")
            meta["replayed"] = outcome.replayed
            update: dict[str, Any] = {"response_metadata": {**message.response_metadata, "countersign": meta}}
            if decided.settled.edits and isinstance(message.content, str):
                shown = f" It ran with {json.dumps(edited_args[0], sort_keys=True)}." if edited_args else ""
                update["content"] = ("A reviewer edited the arguments of this call before it ran." + shown
                                     + "\n\n" + message.content)
            return message.model_copy(update=update)

        def _runner(self, request, handler, live: list, edited_args: list):
            def run(approved: dict) -> Any:
                if approved != request.tool_call.get("args"):
                    edited_args.append(approved)
                try:
                    result = handler(request.override(tool_call={**request.tool_call, "args": approved}))
                except Exception as exc:
                    live.append(_Raised(exc))
                    raise
                live.append(result)
                return _recorded(result)
            return run

        # -- the hooks

        def wrap_tool_call(self, request, handler):
            """Propose, review (interrupting), then run the tool through Backend.execute, or
            answer with a ToolMessage (the policy's reason, a rejection, a response)."""
            try:
                decided = _drive(self._loop(request), self.backend)
            except BackendError as exc:
                return self._message(request, f"countersign could not decide this call, so it did not run: "
                                     f"{exc.message}", "error", {"status": "error", "code": exc.code})
            if not decided.settled.runnable and decided.settled.status != "executed":
                return self._not_run(request, decided)
            live: list = []
            edited_args: list = []
            try:
                outcome = self.backend.execute(decided.verdict.request, self._runner(request, handler, live, edited_args),
                                               keep_result=self.keep_result)
            except BackendError as exc:  # ExecutionUnknown: it started once and never said how it went
                if live:  # the tool ran (OutcomeUnrecorded): its answer stands; only the record is missing
                    return self._reraise_or(None, live) or self._ran(request, decided, _ran_unrecorded(decided), live,
                                                                     edited_args)
                return self._message(request, f"This call did not run now: {exc.message}", "error",
                                     self._meta(decided, "unknown"))
            return self._reraise_or(outcome, live) or self._ran(request, decided, outcome, live, edited_args)

        async def awrap_tool_call(self, request, handler):
            """`wrap_tool_call` for async agents (`ainvoke`, `astream`), through AsyncBackend."""
            try:
                decided = await _adrive(self._loop(request), self.abackend)
            except BackendError as exc:
                return self._message(request, f"countersign could not decide this call, so it did not run: "
                                     f"{exc.message}", "error", {"status": "error", "code": exc.code})
            if not decided.settled.runnable and decided.settled.status != "executed":
                return self._not_run(request, decided)
            live: list = []
            edited_args: list = []

            async def run(approved: dict) -> Any:
                if approved != request.tool_call.get("args"):
                    edited_args.append(approved)
                try:
                    result = await handler(request.override(tool_call={**request.tool_call, "args": approved}))
                except Exception as exc:
                    live.append(_Raised(exc))
                    raise
                live.append(result)
                return _recorded(result)

            try:
                outcome = await self.abackend.execute(decided.verdict.request, run, keep_result=self.keep_result)
            except BackendError as exc:
                if live:  # the tool ran (OutcomeUnrecorded): its answer stands; only the record is missing
                    return self._reraise_or(None, live) or self._ran(request, decided, _ran_unrecorded(decided), live,
                                                                     edited_args)
                return self._message(request, f"This call did not run now: {exc.message}", "error",
                                     self._meta(decided, "unknown"))
            return self._reraise_or(outcome, live) or self._ran(request, decided, outcome, live, edited_args)

        @staticmethod
        def _reraise_or(outcome, live: list) -> None:
            """A tool that raised (LangChain's ToolNode passes some errors on): its failure is
            recorded; raise it again, as it would have been without countersign."""
            if live and isinstance(live[0], _Raised):
                raise live[0].exc
            return None

    CountersignMiddleware.__qualname__ = CountersignMiddleware.__name__
    CountersignMiddleware.__module__ = __name__
    _CLASS.append(CountersignMiddleware)
    return CountersignMiddleware


@dataclass(frozen=True)
class _Raised:
    exc: BaseException


def _ran_unrecorded(decided: "_Decided") -> Outcome:
    """The Outcome of a call whose tool ran here but whose report failed (OutcomeUnrecorded):
    never told to the model as a call that did not run (it would retry it: a second real run)."""
    return Outcome(decided.verdict.request, "ok")


class ToolReportedError(Exception):
    """Recorded as the outcome "error" when the tool's ToolMessage says status "error" (the
    ToolNode caught the tool's exception and answered the model with it)."""


def _recorded(result: Any) -> Any:
    """What the ledger keeps of a tool's answer: a ToolMessage's content and status (a Command
    is kept as nothing: LangGraph's own object, not JSON). An error ToolMessage raises
    ToolReportedError, so the outcome recorded is "error"."""
    content = getattr(result, "content", None)
    status = getattr(result, "status", None)
    if status == "error":
        raise ToolReportedError(content if isinstance(content, str) else json.dumps(content, default=str))
    if content is None or type(result).__name__ == "Command":
        return None
    return {"content": content, "status": status or "success"}


_MIDDLEWARE_DOC = """Gate every tool call of a `langchain.agents.create_agent` agent with countersign
(the module docstring of adapters.langchain says how). The agent needs a checkpointer: an ask is a
LangGraph interrupt.

`backend`: adapters.backend LocalBackend / ServiceBackend (or an AsyncBackend around one; the
async hook wraps a sync one itself). `reviewers`: a callable token -> reviewer's name
(adapters.identity.RosterReviewers) that raises BackendError for a token it does not accept;
required with a local ledger, optional with the service (which authenticates the token).
`context`: a dict, or a callable (ToolCallRequest -> dict) giving the same dict every time it
runs for a call (it is part of the call's identity). A dict is the same for every thread, so it
may not hold a `session_id` (ValueError: a decision remembered for that session would stand in
every thread); a session is per conversation: give it with a callable, e.g. from the request's
runtime / state. `call_id`: a callable (ToolCallRequest ->
str), when the model's tool call ids are not unique across the ledger.

`keep_result` (default False): keep each tool's answer (its ToolMessage content and status) in
the ledger itself. Off, the ledger records only the answer's digest. create_agent runs each tool
call as its own LangGraph task (a Send per call), so a call that ran is run through this
middleware again only when the process died after the tool ran and before LangGraph saved the
step: the tool does not run twice either way; with keep_result=True the model gets the kept
answer back, without it a ToolMessage (status "error") saying the call ran and its answer was not
kept. Turn it on only for tools whose answers may sit in an append-only ledger for good: a kept
result cannot be redacted (and the checkpointer holds the ToolMessage anyway, where the host can
delete it).
"""


def __getattr__(name: str) -> Any:
    """`CountersignMiddleware` is built on first use (PEP 562), so that importing this module
    imports no LangChain: it must subclass LangChain's AgentMiddleware for create_agent."""
    if name == "CountersignMiddleware":
        return _middleware_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
