"""Where an adapter's calls are decided: a Gate on a local ledger, or the approval service.

Every adapter (Claude Code's hook, the MCP gateway, LangChain, OpenAI Agents, the Claude Agent
SDK) proposes a tool call, waits while a person decides, runs the call with the approved
arguments and records the outcome. It does so through a Backend, so that the same adapter works
in one process with a ledger directory or against `countersign serve` (docs/service.md) with a
token:

    backend = LocalBackend(Gate(policy, "ledger-dir"), proposer="agent-1")
    backend = ServiceBackend("http://127.0.0.1:8470", token=os.environ["COUNTERSIGN_TOKEN"])
    backend = connect()   # from COUNTERSIGN_URL + COUNTERSIGN_TOKEN, or COUNTERSIGN_POLICY + COUNTERSIGN_LEDGER

    verdict = backend.propose("refund", {"order": 7}, run="r1", call_id="call-1")
    if verdict.effect == "ask":
        settled = backend.wait(verdict.request, timeout=600)   # never an approval by silence
    outcome = backend.execute(verdict.request, tool_function, keep_result=True)

The shapes (Verdict, Settled, Outcome, Started) are frozen records (what a frozen dataclass gives,
without importing dataclasses: `_Record`) built from the service's JSON views (service/api.py:
proposal_view, state_view, execution_view) or from the Gate's own objects,
so an adapter never depends on which backend it has.

Identities: the proposer is the authenticated agent: the roster principal of the token for the
service, the `proposer` given by the host for a local Gate (the host authenticates it: the OS
account, its own login). A reviewer's decision (`decide`) carries the reviewer's identity from
the same place: a reviewer token for the service, the host's `by` locally; never a tool argument
or a form field.

Errors: BackendError (a `code` as in docs/service.md's table, and the message). An adapter that
gets one fails closed: the call does not run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from urllib.parse import quote, urlsplit

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hook process never needs it)
if TYPE_CHECKING:  # the annotations' names (never evaluated: __future__ annotations)
    from typing import Any, Callable

WAITING = ("pending", "interrupting")
SERVICE_WAIT_SLICE = 55.0  # seconds per long-poll: the service allows 60 (service/api.py MAX_WAIT_SECONDS)


class BackendError(Exception):
    """A step the backend refused or could not take: `code` is the service's error code
    (docs/service.md), or the Gate's error class name for a local Gate; `request` when known."""

    def __init__(self, code: str, message: str, request: int | None = None):
        super().__init__(message)
        self.code, self.message, self.request = code, message, request


class OutcomeUnrecorded(BackendError):
    """The tool RAN (its `outcome`, with the live result, is here) but reporting how it went
    failed: the request stays "executing" in the ledger and never runs again. An adapter tells
    the model the call ran and hands it the result, never that it did not run (which would
    invite a second real run under another call id)."""

    def __init__(self, code: str, message: str, outcome: "Outcome"):
        super().__init__(code, f"the call ran, but its outcome could not be recorded: {message}", outcome.request)
        self.outcome = outcome


class _Record:
    """What @dataclass(frozen=True) gave these shapes, without importing dataclasses (with inspect,
    about 7 ms of every hook's start, and 0.5 ms per class): the fields are the class's
    annotations in order, a field with a class attribute has that default; construction by
    position or keyword (TypeError for a missing, unknown or repeated field), equality and
    hashing by the fields' values, a repr naming them, and no assignment (AttributeError)."""

    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(cls.__dict__.get("__annotations__", {}))

    def __init__(self, *args: Any, **kwargs: Any):
        fields, name = self._fields, type(self).__name__
        if len(args) > len(fields):
            raise TypeError(f"{name}() takes {len(fields)} arguments, {len(args)} were given")
        values = dict(zip(fields, args))
        for key, value in kwargs.items():
            if key not in fields:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            values[key] = value
        for field in fields:
            if field not in values:
                if not hasattr(type(self), field):
                    raise TypeError(f"{name}() missing required argument {field!r}")
                values[field] = getattr(type(self), field)
        self.__dict__.update(values)

    def _values(self) -> tuple:
        return tuple(self.__dict__[f] for f in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={self.__dict__[f]!r}' for f in self._fields)})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")


class Verdict(_Record):
    """What the policy said about a proposed call. `effect` allow, deny or ask; `status` where
    the request stands now (a repeated call id may already be approved or executed);
    `decisions` the decisions a reviewer may give (an ask's rule says which), `remember` the
    `remember` values a reviewer's approval or rejection may carry (the rule's `remember` clause:
    () when it may not be remembered; docs/policy-language.md "Remembered decisions"), `needs` the
    requirement in words ("2 from finance"), `timeout_seconds` the ask's timeout, `deadline` a
    ledger timestamp; `link` the web inbox's page for it (service with --public-url only)."""

    request: int
    tool: str
    effect: str
    status: str
    args_digest: str
    reasons: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    needs: str | None = None
    timeout_seconds: int | None = None
    deadline: str | None = None
    duplicate: bool = False
    link: str | None = None
    remember: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """The reasons in one sentence, for the model ("" when none)."""
        return " ".join(r.strip() for r in self.reasons if r.strip())


class Settled(_Record):
    """Where a request stands: `status` (allowed, denied, pending, approved, executing, executed,
    rejected, responded, expired, cancelled), `decision` (approve, reject, respond, expire,
    cancel or None), `decided_by`, `reason` (a rejection's reason or a response's message: an
    instruction to the model), `edits` (how many times a reviewer edited the arguments),
    `outcome` of the execution, `waiting` (still waiting for a person); `tool`, and the `run`
    and `proposer` it was proposed with (None when the source did not say)."""

    request: int
    status: str
    args_digest: str
    decision: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    edits: int = 0
    outcome: str | None = None
    waiting: bool = False
    tool: str | None = None
    run: str | None = None
    proposer: str | None = None

    @property
    def runnable(self) -> bool:
        """Whether the call may run now (allowed by the policy, or approved)."""
        return self.status in ("allowed", "approved")


class Outcome(_Record):
    """How the call ran: "ok" (with `result`, on this run or kept from the first) or "error";
    `replayed` when it ran before and nothing ran now; `result_kept` when the ledger holds the
    result itself."""

    request: int
    outcome: str
    result_digest: str | None = None
    error: str | None = None
    replayed: bool = False
    result: Any = None
    result_kept: bool = False


class Started(_Record):
    """A started execution: the arguments to run with (the approved, possibly edited ones)."""

    request: int
    args: dict
    args_digest: str


# --- from the service's JSON views or the Gate's objects ---------------------------------------

def verdict_of(view: dict) -> Verdict:
    waits = view.get("waits_for") or {}
    return Verdict(request=view["request"], tool=view["tool"], effect=view["effect"], status=view["status"],
                   args_digest=view["args_digest"], reasons=tuple(view.get("reasons") or ()),
                   rules=tuple(view.get("rules") or ()), decisions=tuple(waits.get("decisions") or ()),
                   needs=waits.get("needs"), timeout_seconds=waits.get("timeout_seconds"),
                   deadline=view.get("deadline"), duplicate=bool(view.get("duplicate")),
                   link=(view.get("links") or {}).get("inbox"), remember=tuple(waits.get("remember") or ()))


def settled_of(view: dict) -> Settled:
    status = view["status"]
    return Settled(request=view["request"], status=status, args_digest=view.get("args_digest") or "",
                   decision=view.get("decision"), decided_by=view.get("decided_by"), reason=view.get("reason"),
                   edits=view.get("edits") or 0, outcome=view.get("outcome"),
                   waiting=bool(view.get("waiting", status in WAITING)), tool=view.get("tool"), run=view.get("run"),
                   proposer=view.get("proposer"))


def outcome_of(view: dict) -> Outcome:
    return Outcome(request=view["request"], outcome=view["outcome"], result_digest=view.get("result_digest"),
                   error=view.get("error"), replayed=bool(view.get("replayed")), result=view.get("result"),
                   result_kept=bool(view.get("result_kept")))


def _verdict_of_proposal(p) -> Verdict:
    from ledger.workflow.describe import remember_choices_of

    reqs = p.requirements if p.status in WAITING else None
    return Verdict(request=p.request, tool=p.tool, effect=p.effect, status=p.status, args_digest=p.args_digest,
                   reasons=tuple(p.reasons), rules=tuple(p.rules),
                   decisions=tuple(reqs.decisions) if reqs else (), needs=reqs.describe() if reqs else None,
                   timeout_seconds=reqs.timeout_seconds if reqs else None, deadline=p.deadline,
                   duplicate=p.duplicate, remember=tuple(remember_choices_of(reqs.rememberable)) if reqs else ())


def _settled_of_state(state) -> Settled:
    return Settled(request=state.request, status=state.status, args_digest=state.digest, decision=state.decision,
                   decided_by=state.decided_by, reason=state.reason, edits=state.edits, outcome=state.outcome,
                   waiting=state.status in WAITING, tool=state.tool, run=state.run, proposer=state.proposer)


def _outcome_of_execution(e) -> Outcome:
    return Outcome(request=e.request, outcome=e.outcome, result_digest=e.result_digest, error=e.error,
                   replayed=e.replayed, result=e.result, result_kept=e.result_kept)


# --- a Gate in this process ------------------------------------------------------------------

class LocalBackend:
    """A Gate in this process (ledger.Gate, opened by the caller, who closes it). `proposer` is
    the authenticated agent every proposal is recorded for; `signing` signs reviewers'
    decisions (ledger.proof.decisions.Signing) when the ledger is verified with a roster."""

    def __init__(self, gate, proposer: str, *, signing=None):
        self.gate, self.proposer, self.signing = gate, proposer, signing

    def _guard(self, step: Callable[[], Any]) -> Any:
        from ledger.store.log import LedgerError
        from ledger.workflow.errors import GateError
        from ledger.workflow.machine import Violation

        try:
            return step()
        except (GateError, LedgerError, Violation) as exc:
            raise BackendError(type(exc).__name__, str(exc), getattr(exc, "request", None)) from exc

    def propose(self, tool: str, args: dict, *, run: str | None = None, context: dict | None = None,
                call_id: str | None = None) -> Verdict:
        return _verdict_of_proposal(self._guard(lambda: self.gate.propose(
            tool, args, proposer=self.proposer, run=run, context=context, call_id=call_id)))

    def get(self, request: int) -> Settled:
        return _settled_of_state(self._guard(lambda: self.gate.get(request)))

    def details(self, request: int) -> dict:
        """The request as a reviewer sees it (ledger.workflow.describe.brief: its current
        arguments, digest, the decisions allowed, quorum progress, and `remember`: the values a
        decision's `remember` may take, [] when none): a JSON-ready dict."""
        from ledger.workflow import describe

        def view() -> dict:
            state = self.gate.get(request)
            return {**describe.brief(self.gate, state), "remember": describe.remember_choices(state)}

        return self._guard(view)

    def find(self, call_id: str) -> Settled | None:
        state = self._guard(lambda: self.gate.find(call_id=call_id))
        return None if state is None else _settled_of_state(state)

    def wait(self, request: int, timeout: float | None) -> Settled:
        return _settled_of_state(self._guard(lambda: self.gate.wait(request, timeout=timeout)))

    def start(self, request: int) -> Started | Outcome:
        started = self._guard(lambda: self.gate.start(request, executor=self.proposer))
        if isinstance(started, tuple):
            return Started(request, started[1], started[0])
        return _outcome_of_execution(started)

    def finish(self, request: int, *, outcome: str, result: Any = None, error: str | None = None,
               keep_result: bool = False, result_digest: str | None = None) -> Outcome:
        return _outcome_of_execution(self._guard(lambda: self.gate.finish(
            request, outcome=outcome, result=result, error=error, keep_result=keep_result,
            result_digest=result_digest)))

    def execute(self, request: int, fn: Callable[[dict], Any], *, keep_result: bool = False) -> Outcome:
        """Run `fn(args)` once with the approved arguments and record how it went (Gate.execute)."""
        return _outcome_of_execution(self._guard(lambda: self.gate.execute(
            request, fn, executor=self.proposer, keep_result=keep_result)))

    def cancel(self, request: int, reason: str | None = None) -> Settled:
        """Withdraw the agent's own call (a hook that gave up waiting)."""
        return _settled_of_state(self._guard(lambda: self.gate.cancel(request, by=self.proposer, reason=reason)))

    def decide(self, request: int, decision: str, *, reviewer: str, digest: str, args: dict | None = None,
               reason: str | None = None, message: str | None = None, comment: str | None = None,
               remember: str | None = None, pattern: str | None = None) -> Settled:
        """A reviewer's decision: `reviewer` is who the host authenticated (never a tool argument).
        `remember` ("run", "session" or a duration such as "8h") makes an approval or a
        rejection a standing one, where the ask's rule allows it (docs/policy-language.md,
        "Remembered decisions"); `pattern` "exact" limits it to these arguments."""
        return _settled_of_state(self._guard(lambda: self.gate.decide(
            request, decision, by=reviewer, digest=digest, args=args, reason=reason, message=message,
            comment=comment, signing=self.signing, remember=remember, pattern=pattern)))

    def close(self) -> None:
        self.gate.close()


# --- the approval service ----------------------------------------------------------------------

class ServiceBackend:
    """`countersign serve` over HTTP (docs/service.md), with the agent's bearer `token` (the
    roster says who it is). `reviewer_token`: a reviewer's, for `decide` (an in-process review,
    as LangChain's resume is). Speaks HTTP/1.1 through adapters.http1 (a hook starts a process
    per tool call: no HTTP library to import, not even http.client), one kept-alive connection
    per thread.
    `timeout`: seconds per HTTP exchange beyond a long-poll's own."""

    def __init__(self, url: str, token: str, *, reviewer_token: str | None = None, timeout: float = 30.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError("invalid_url", f"the service URL must be http(s)://host[:port], not {url!r}")
        self.url, self.token, self.reviewer_token, self.timeout = url.rstrip("/"), token, reviewer_token, timeout
        self._parts = parts
        self._local = threading.local()  # .connection: this thread's

    def _connect(self, timeout: float):
        from adapters.http1 import Connection

        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = Connection(self._parts.hostname, self._parts.port,
                                                             tls=self._parts.scheme == "https", timeout=timeout)
        connection.settimeout(timeout)
        return connection

    def _call(self, method: str, path: str, body: Any = None, *, token: str | None = None,
              wait: float = 0.0) -> Any:
        """One JSON exchange; raises BackendError with the service's error code, or `unreachable`."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token or self.token}", "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        prefix = self._parts.path.rstrip("/")
        for attempt in (0, 1):  # a kept-alive connection the server closed: one fresh try
            connection = self._connect(self.timeout + wait)
            try:
                response = connection.request(method, prefix + path, body=payload, headers=headers)
                data = response.body
                break
            except OSError as exc:
                connection.close()
                self._local.connection = None
                # retry only what cannot have been applied twice harmfully: reads, or a fresh connection's failure
                if attempt or method != "GET":
                    raise BackendError("unreachable", f"the service at {self.url} did not answer: {exc}") from None
        try:
            answer = json.loads(data) if data else None
        except ValueError:
            raise BackendError("bad_answer", f"the service answered {response.status} with no JSON") from None
        if response.status >= 400:
            error = (answer or {}).get("error") if isinstance(answer, dict) else None
            error = error if isinstance(error, dict) else {}
            raise BackendError(error.get("code") or f"http_{response.status}",
                               error.get("message") or f"HTTP {response.status}", error.get("request"))
        return answer

    def propose(self, tool: str, args: dict, *, run: str | None = None, context: dict | None = None,
                call_id: str | None = None) -> Verdict:
        body = {"tool": tool, "args": args, "run": run, "context": context, "call_id": call_id}
        return verdict_of(self._call("POST", "/v1/proposals", {k: v for k, v in body.items() if v is not None}))

    def get(self, request: int) -> Settled:
        return settled_of(self._call("GET", f"/v1/requests/{int(request)}"))

    def details(self, request: int) -> dict:
        """GET /v1/requests/{id}: the request as a reviewer sees it (as LocalBackend.details, and
        more: its history, the rules with their policy lines)."""
        return self._call("GET", f"/v1/requests/{int(request)}")

    def find(self, call_id: str) -> Settled | None:
        try:
            return settled_of(self._call("GET", "/v1/calls/" + quote(call_id, safe="")))
        except BackendError as exc:
            if exc.code in ("unknown_call_id", "unknown_request", "http_404"):
                return None
            raise

    def wait(self, request: int, timeout: float | None) -> Settled:
        give_up = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            left = SERVICE_WAIT_SLICE if give_up is None else max(0.0, min(SERVICE_WAIT_SLICE, give_up - time.monotonic()))
            settled = settled_of(self._call("GET", f"/v1/requests/{int(request)}/wait?timeout={left:.3f}", wait=left))
            if not settled.waiting or (give_up is not None and time.monotonic() >= give_up):
                return settled

    def start(self, request: int) -> Started | Outcome:
        answer = self._call("POST", f"/v1/requests/{int(request)}/start", {})
        if answer.get("started"):
            return Started(request, answer["args"], answer["args_digest"])
        return outcome_of(answer["execution"])

    def finish(self, request: int, *, outcome: str, result: Any = None, error: str | None = None,
               keep_result: bool = False, result_digest: str | None = None) -> Outcome:
        """POST the outcome. An "ok" result is sent only when it is to be kept (and fits in
        KEEP_LIMIT bytes); otherwise only its digest, computed here: the result never leaves
        the agent's process, and no size limit can leave a call that ran unrecorded. An error's
        lone surrogates go as backslash escapes (the service reads only Unicode text, and the
        Gate records them so)."""
        if isinstance(error, str):
            error = error.encode("utf-8", "backslashreplace").decode("utf-8")
        body: dict[str, Any] = {"outcome": outcome, "error": error}
        if outcome == "ok" and result_digest is None and result is not None:
            result_digest, spelled = _digest_of(result)
            if keep_result and spelled is not None and len(spelled) <= KEEP_LIMIT:
                body.update(result=result, keep_result=True)
                result_digest = None
        if result_digest is not None:
            body["result_digest"] = result_digest
        return outcome_of(self._call("POST", f"/v1/requests/{int(request)}/outcome", body))

    def execute(self, request: int, fn: Callable[[dict], Any], *, keep_result: bool = False) -> Outcome:
        """start, run `fn(args)` here, report the outcome (an exception from `fn` is an "error"
        outcome, returned, not raised). Raises OutcomeUnrecorded when the tool ran and its
        outcome could not be reported."""
        started = self.start(request)
        if isinstance(started, Outcome):
            return started
        try:
            result, failure = fn(started.args), None
        except Exception as exc:
            result, failure = None, exc
        return _report(self.finish, request, result, failure, keep_result)

    def cancel(self, request: int, reason: str | None = None) -> Settled:
        state = self.get(request)
        body = {"decision": "cancel", "digest": state.args_digest, "reason": reason}
        return settled_of(self._call("POST", f"/v1/requests/{int(request)}/decision", body))

    def decide(self, request: int, decision: str, *, reviewer: str | None = None, digest: str,
               args: dict | None = None, reason: str | None = None, message: str | None = None,
               comment: str | None = None, remember: str | None = None, pattern: str | None = None) -> Settled:
        """A reviewer's decision with `reviewer_token` (the token says who; `reviewer` is ignored:
        the service never takes an identity from a body). `remember`, `pattern`: as
        LocalBackend.decide."""
        if not self.reviewer_token:
            raise BackendError("unauthenticated", "deciding through the service needs a reviewer's token")
        body = {"decision": decision, "digest": digest, "args": args, "reason": reason, "message": message,
                "comment": comment, "remember": remember, "pattern": pattern}
        return settled_of(self._call("POST", f"/v1/requests/{int(request)}/decision",
                                     {k: v for k, v in body.items() if v is not None}, token=self.reviewer_token))

    def close(self) -> None:
        """Close this thread's connection (another thread's closes with its thread)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


KEEP_LIMIT = 8 * 1024 * 1024
"""Bytes of a result's JSON sent to be kept; a larger one is recorded by its digest alone (the
service's body limit is 16 MiB, docs/service.md)."""


def _digest_of(value: Any) -> tuple[str | None, bytes | None]:
    """(the structural digest of `value`, its canonical JSON), or (None, None) when it is not
    JSON (an object, NaN, nested too deeply): such a result is recorded without a digest."""
    from ledger.digest import ArgumentsError, encode_arguments

    try:
        return encode_arguments(value)
    except (ArgumentsError, RecursionError):
        return None, None


def _report(finish: Callable[..., Outcome], request: int, result: Any, failure: BaseException | None,
            keep_result: bool) -> Outcome:
    """Report a run's outcome through `finish`; the live Outcome (with the result). Raises
    OutcomeUnrecorded when the report fails: the tool ran."""
    if failure is not None:
        live = Outcome(request, "error", None, f"{type(failure).__name__}: {failure}", False, None, False)
        kwargs: dict[str, Any] = {"outcome": "error", "error": live.error}
    else:
        live = Outcome(request, "ok", None, None, False, result, False)
        digest, spelled = _digest_of(result) if result is not None else (None, None)
        if keep_result and spelled is not None and len(spelled) <= KEEP_LIMIT:
            kwargs = {"outcome": "ok", "result": result, "keep_result": True}
        else:  # the digest alone (None for a result that is not JSON)
            kwargs = {"outcome": "ok", "result_digest": digest}
    try:
        done = finish(request, **kwargs)
    except BackendError as exc:
        raise OutcomeUnrecorded(exc.code, exc.message, live) from exc
    return Outcome(request, live.outcome, done.result_digest, done.error if failure else None, False,
                   live.result, done.result_kept)


async def _report_async(finish, request: int, result: Any, failure: BaseException | None,
                        keep_result: bool) -> Outcome:
    return await _to_thread(_report, finish, request, result, failure, keep_result)


# --- for asyncio code ----------------------------------------------------------------------------

async def _to_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """asyncio.to_thread, imported when first awaited: a hook process (one per tool call) that
    never awaits does not pay for importing asyncio."""
    import asyncio

    return await asyncio.to_thread(fn, *args, **kwargs)


class AsyncBackend:
    """A Backend's steps awaited, each in a worker thread (asyncio.to_thread); `execute` awaits a
    coroutine function `fn` on the loop between the durable start and the outcome. Cancelling
    the task while the tool runs leaves the outcome unknown: the call never runs again."""

    def __init__(self, backend):
        self.backend = backend

    async def propose(self, tool: str, args: dict, **kwargs: Any) -> Verdict:
        return await _to_thread(self.backend.propose, tool, args, **kwargs)

    async def get(self, request: int) -> Settled:
        return await _to_thread(self.backend.get, request)

    async def find(self, call_id: str) -> Settled | None:
        return await _to_thread(self.backend.find, call_id)

    async def wait(self, request: int, timeout: float | None) -> Settled:
        """Waits in slices of at most a second, so a cancelled waiter frees its thread soon."""
        give_up = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            left = 1.0 if give_up is None else max(0.0, min(1.0, give_up - time.monotonic()))
            settled = await _to_thread(self.backend.wait, request, left)
            if not settled.waiting or (give_up is not None and time.monotonic() >= give_up):
                return settled

    async def start(self, request: int) -> Started | Outcome:
        return await _to_thread(self.backend.start, request)

    async def finish(self, request: int, **kwargs: Any) -> Outcome:
        return await _to_thread(lambda: self.backend.finish(request, **kwargs))

    async def execute(self, request: int, fn: Callable[[dict], Any], *, keep_result: bool = False) -> Outcome:
        """Backend.execute, awaited; raises OutcomeUnrecorded as there."""
        import inspect

        started = await self.start(request)
        if isinstance(started, Outcome):
            return started
        try:
            result = await fn(started.args) if inspect.iscoroutinefunction(fn) else await _to_thread(fn, started.args)
            if inspect.isawaitable(result):
                result = await result
            failure = None
        except Exception as exc:  # the tool's failure is an outcome to record
            result, failure = None, exc
        return await _report_async(self.backend.finish, request, result, failure, keep_result)

    async def cancel(self, request: int, reason: str | None = None) -> Settled:
        return await _to_thread(self.backend.cancel, request, reason)

    async def decide(self, request: int, decision: str, **kwargs: Any) -> Settled:
        return await _to_thread(lambda: self.backend.decide(request, decision, **kwargs))

    async def close(self) -> None:
        await _to_thread(self.backend.close)


# --- from the environment --------------------------------------------------------------------

ENVIRONMENT = {
    "COUNTERSIGN_URL": "the approval service's URL (with COUNTERSIGN_TOKEN, the agent's token)",
    "COUNTERSIGN_TOKEN": "the agent's bearer token for the service (countersign roster add)",
    "COUNTERSIGN_POLICY": "a .policy file, for a local ledger (with COUNTERSIGN_LEDGER)",
    "COUNTERSIGN_LEDGER": "the ledger directory, for a local ledger",
    "COUNTERSIGN_PROPOSER": "who proposes, for a local ledger (default: agent:<the OS account>, another identity than "
                            "the person, who may then approve with `countersign review`)",
}


def connect(*, url: str | None = None, token: str | None = None, policy: str | None = None,
            ledger: str | None = None, proposer: str | None = None, environ: dict | None = None):
    """A Backend from the arguments, else the environment (ENVIRONMENT): the service when a URL
    is given, else a local Gate on the ledger with the policy. Raises BackendError
    `not_configured` when neither is complete, `unauthenticated` for a URL without a token."""
    env = os.environ if environ is None else environ
    url = url or env.get("COUNTERSIGN_URL")
    if url:
        token = token or env.get("COUNTERSIGN_TOKEN")
        if not token:
            raise BackendError("unauthenticated", "COUNTERSIGN_URL is set but COUNTERSIGN_TOKEN is not")
        return ServiceBackend(url, token)
    policy = policy or env.get("COUNTERSIGN_POLICY")
    ledger = ledger or env.get("COUNTERSIGN_LEDGER")
    if not (policy and ledger):
        raise BackendError("not_configured", "set COUNTERSIGN_URL and COUNTERSIGN_TOKEN (the service), or "
                           "COUNTERSIGN_POLICY and COUNTERSIGN_LEDGER (a local ledger)")
    from dsl import Policy
    from ledger import Gate

    # Not the OS account itself: the person at this account reviews with `countersign review`
    # (as that account), and no one approves their own call (four-eyes).
    return LocalBackend(Gate(Policy.load(policy), ledger, pin_policy=True),
                        proposer or env.get("COUNTERSIGN_PROPOSER") or f"agent:{_os_account()}")


def _os_account() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}" if hasattr(os, "getuid") else "unknown"
