"""The JSON API under /v1 (docs/service.md; the OpenAPI document is service.openapi).

Agents (roster kind `agent`):
    POST /v1/proposals                      propose a call: the decision; for ask, what it waits for
    GET  /v1/requests/{id}                  one of its requests, in full
    GET  /v1/requests/{id}/wait?timeout=S   long-poll until decided (or S seconds, at most 60)
    GET  /v1/runs/{run}/events              server-sent events of a run (Last-Event-ID: a seq)
    POST /v1/requests/{id}/start            begin running an allowed or approved call: its arguments
    POST /v1/requests/{id}/outcome          report how it ran
    GET  /v1/calls/{call_id}                look a request up by the agent's call id
Reviewers (kind `reviewer`; admins read):
    GET  /v1/queue                          pending requests they may decide, oldest first
    POST /v1/requests/{id}/decision         approve / edit / reject / respond / cancel, bound to a digest
    GET  /v1/history                        decided requests, newest first, with filters and search
Admins: POST /v1/admin/reload (policy and roster again, recorded), GET /v1/admin/deliveries
(the webhooks' recent delivery attempts, service.notify). Anyone: GET /v1/health,
GET /v1/openapi.json.

Request bodies are decoded by msgspec into the structs below: an unknown member (a forged
`approver`, `proposer`) is refused with 422 `invalid_body`, so no identity ever comes from a body.
Every refusal is a JSON error (service.errors).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ledger.proof.roster import Principal
from ledger.store.lines import MAX_LINE_BYTES
from ledger.workflow import describe
from ledger.workflow.gate import Execution, Proposal
from service import auth
from service.core import END, Service, ServiceError
from service.errors import INVALID_BODY, MALFORMED_JSON, TIMEOUT_RANGE, ApiError

log = logging.getLogger("countersign.service")

MAX_BODY_BYTES = MAX_LINE_BYTES  # a call that cannot fit in a ledger line cannot be recorded anyway
MAX_WAIT_SECONDS = 60.0
KEEPALIVE_SECONDS = 15.0  # an SSE comment line this often keeps proxies from closing an idle stream


# --- request bodies -------------------------------------------------------------------------

class ProposalBody(msgspec.Struct, forbid_unknown_fields=True):
    """A tool call to decide. `args` and `context` are JSON objects; `call_id` makes a retry of
    the same call return the first decision."""

    tool: str
    args: dict[str, Any]
    run: str | None = None
    context: dict[str, Any] | None = None
    call_id: str | None = None


class DecisionBody(msgspec.Struct, forbid_unknown_fields=True):
    """A reviewer's decision on the arguments whose digest they saw. approve: `comment`
    optional; edit: `args` (the new arguments), `reason` optional; reject: `reason` (required:
    it tells the agent what to do instead); respond: `message` (returned in place of the tool's
    result); cancel: `reason` optional. approve and reject: `remember` makes the decision
    standing ("run", "session" or a duration such as "8h", within what the rule's `remember`
    clause allows) and `pattern` "exact" limits it to these arguments (docs/ledger-format.md,
    section 12)."""

    decision: Literal["approve", "edit", "reject", "respond", "cancel"]
    digest: str
    args: dict[str, Any] | None = None
    reason: str | None = None
    message: str | None = None
    comment: str | None = None
    remember: str | None = None
    pattern: Literal["exact"] | None = None


class ForgetBody(msgspec.Struct, forbid_unknown_fields=True):
    """Why a standing decision is revoked (optional)."""

    reason: str | None = None


class StartBody(msgspec.Struct, forbid_unknown_fields=True):
    """Nothing yet: the executor is the authenticated agent."""


class OutcomeBody(msgspec.Struct, forbid_unknown_fields=True):
    """How the call ran: "ok" with the tool's JSON `result` (its digest is recorded; with
    `keep_result` the result too, so that a re-run of the step gets it back from `start`) or
    with `result_digest` alone (the agent computed it: the result never leaves the agent), or
    "error" with the failure's text."""

    outcome: Literal["ok", "error"]
    result: Any = None
    error: str | None = None
    keep_result: bool = False
    result_digest: str | None = None  # instead of `result`: its digest (section 4), the result kept by the agent


BODIES = (ProposalBody, DecisionBody, StartBody, OutcomeBody, ForgetBody)


def digits(text: str) -> bool:
    """Whether `text` is `[0-9]+`: ASCII decimal digits only. (str.isdigit also takes '²' and
    other scripts' digits, which int() refuses or reads as numbers nobody wrote.)"""
    return text.isascii() and text.isdecimal()


async def _body(request: Request, kind: type) -> Any:
    """The request's JSON body decoded as `kind`. Raises ApiError 400/413/422."""
    declared = request.headers.get("content-length")
    if declared is not None and digits(declared) and int(declared) > MAX_BODY_BYTES:
        raise ApiError(413, "body_too_large", f"the body is larger than {MAX_BODY_BYTES:,} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise ApiError(413, "body_too_large", f"the body is larger than {MAX_BODY_BYTES:,} bytes")
    if not data.strip() and kind is StartBody:
        return StartBody()
    try:
        json.loads(data)  # a syntax error is told apart from a wrong shape
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, MALFORMED_JSON, f"the body is not JSON: {exc}") from None
    try:
        return msgspec.json.decode(bytes(data), type=kind)
    except msgspec.ValidationError as exc:
        raise ApiError(422, INVALID_BODY, f"the body is not a {kind.__name__[:-4].lower()}: {exc}") from None
    except msgspec.DecodeError as exc:
        if kind is OutcomeBody:
            # JSON that msgspec refuses but Python reads: a string holding a lone surrogate (a
            # JavaScript string cut in the middle of a pair). The call has run: its outcome is
            # recorded (Gate.finish records such a result without a digest), never refused.
            try:
                return msgspec.convert(json.loads(data), type=kind)
            except msgspec.ValidationError as again:
                raise ApiError(422, INVALID_BODY, f"the body is not an outcome: {again}") from None
        raise ApiError(400, MALFORMED_JSON, f"the body is not JSON: {exc}") from None


def _request_id(request: Request) -> int:
    text = request.path_params["request"]
    if not digits(text) or len(text) > 19 or int(text) < 1:
        raise ApiError(404, "unknown_request", f"no request has the id {text!r}: an id is a positive integer")
    return int(text)


def _number(request: Request, name: str, default: float | None, low: float, high: float) -> float | None:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ApiError(422, TIMEOUT_RANGE, f"{name} must be a number, not {text!r}") from None
    if not low <= value <= high:
        raise ApiError(422, TIMEOUT_RANGE, f"{name} must be between {low:g} and {high:g}")
    return value


def _integer(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    """The query parameter `name` as an integer `[0-9]+` between `low` and `high`, or `default`
    when absent. Raises ApiError 422 `invalid_parameter`."""
    text = request.query_params.get(name)
    if text is None:
        return default
    if not digits(text) or len(text) > 19 or not low <= int(text) <= high:
        raise ApiError(422, TIMEOUT_RANGE, f"{name} must be an integer between {low} and {high}, not {text[:40]!r}")
    return int(text)


def _json(data: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(data), status_code=status, media_type="application/json")


def _service(request: Request) -> Service:
    return request.app.state.service


def _principal(request: Request, *kinds: str) -> Principal:
    principal = auth.authenticate(_service(request).roster, request.headers.get("authorization"))
    return auth.require(principal, *kinds) if kinds else principal


def _links(service: Service, request: int) -> dict:
    links = {"request": f"/v1/requests/{request}", "wait": f"/v1/requests/{request}/wait"}
    if service.public_url:
        links["inbox"] = f"{service.public_url}/inbox/requests/{request}"
    return links


def proposal_view(service: Service, p: Proposal) -> dict:
    out = {
        "request": p.request, "tool": p.tool, "effect": p.effect, "status": p.status, "args_digest": p.args_digest,
        "reasons": list(p.reasons), "rules": list(p.rules), "deadline": p.deadline, "duplicate": p.duplicate,
        "waits_for": None, "links": _links(service, p.request),
    }
    if p.requirements is not None and p.status in ("pending", "interrupting"):
        out["waits_for"] = {"needs": p.requirements.describe(), "decisions": list(p.requirements.decisions),
                            "timeout_seconds": p.requirements.timeout_seconds,
                            "remember": describe.remember_choices_of(p.requirements.rememberable)}
    return out


def state_view(service: Service, state, still_waiting: bool | None = None) -> dict:
    item = describe.brief(None, state, args=None)
    del item["args"]
    item.update(describe.outcome(state))
    item["links"] = _links(service, state.request)
    if still_waiting is not None:
        item["waiting"] = still_waiting
    return item


def execution_view(e: Execution) -> dict:
    return {"request": e.request, "outcome": e.outcome, "result_digest": e.result_digest, "error": e.error,
            "replayed": e.replayed, "result_kept": e.result_kept, "result": e.result if e.result_kept else None}


# --- endpoints ------------------------------------------------------------------------------

async def propose(request: Request) -> Response:
    agent = _principal(request, "agent")
    body = await _body(request, ProposalBody)
    service = _service(request)
    p = await run_in_threadpool(service.propose, agent, body.tool, body.args, run=body.run, context=body.context,
                                call_id=body.call_id)
    return _json(proposal_view(service, p), 200 if p.duplicate else 201)


async def get_request(request: Request) -> Response:
    principal = _principal(request)
    return _json(await run_in_threadpool(_service(request).in_full, principal, _request_id(request)))


async def wait(request: Request) -> Response:
    principal = _principal(request)
    rid = _request_id(request)
    timeout = _number(request, "timeout", 30.0, 0.0, MAX_WAIT_SECONDS)
    service = _service(request)
    state, waiting = await service.wait(principal, rid, timeout)
    return _json(state_view(service, state, waiting))


async def start(request: Request) -> Response:
    agent = _principal(request, "agent")
    rid = _request_id(request)
    await _body(request, StartBody)
    started = await run_in_threadpool(_service(request).start, agent, rid)
    if isinstance(started, Execution):
        return _json({"request": rid, "started": False, "execution": execution_view(started)})
    digest, args = started
    return _json({"request": rid, "started": True, "args_digest": digest, "args": args})


async def outcome(request: Request) -> Response:
    agent = _principal(request, "agent")
    rid = _request_id(request)
    body = await _body(request, OutcomeBody)
    done = await run_in_threadpool(_service(request).finish, agent, rid, outcome=body.outcome, result=body.result,
                                   error=body.error, keep_result=body.keep_result, result_digest=body.result_digest)
    return _json(execution_view(done))


async def by_call_id(request: Request) -> Response:
    principal = _principal(request)
    service = _service(request)
    state = await run_in_threadpool(service.find, principal, request.path_params["call_id"])
    return _json(state_view(service, state))


async def queue(request: Request) -> Response:
    principal = _principal(request, "reviewer", "admin")
    q = request.query_params
    limit = _integer(request, "limit", None, 1, 10_000)
    everyone = q.get("all") in ("1", "true", "yes") or principal.kind == "admin"
    rows, hidden = await run_in_threadpool(_service(request).queue, principal, tool=q.get("tool"), run=q.get("run"),
                                           group=q.get("group"), limit=limit, everyone=everyone)
    return _json({"requests": rows, "hidden": hidden,
                  "note": (f"{hidden} pending request{'s' if hidden != 1 else ''} you may not decide "
                           "(another group's, or your own) are not listed") if hidden else None})


async def decide(request: Request) -> Response:
    principal = _principal(request, "reviewer", "agent")
    rid = _request_id(request)
    body = await _body(request, DecisionBody)
    if principal.kind == "agent" and body.decision != "cancel":
        raise ApiError(403, "forbidden", f"{principal.name} is an agent: it may only cancel its own calls", rid)
    service = _service(request)
    state = await run_in_threadpool(service.decide, principal, rid, body.decision, digest=body.digest, args=body.args,
                                    reason=body.reason, message=body.message, comment=body.comment,
                                    remember=body.remember, pattern=body.pattern)
    return _json(state_view(service, state))


async def forget(request: Request) -> Response:
    """Revoke a standing decision (the seq of its `remembered` event) as the token's reviewer."""
    principal = _principal(request, "reviewer")
    text = request.path_params["seq"]
    if not digits(text) or len(text) > 19 or int(text) < 1:
        raise ApiError(404, "not_standing", f"no standing decision has the seq {text!r}: a seq is a positive integer")
    body = await _body(request, ForgetBody)
    service = _service(request)
    await run_in_threadpool(service.forget, principal, int(text), body.reason)
    return _json({"standing": int(text), "forgotten": True})


async def history(request: Request) -> Response:
    principal = _principal(request)
    q = request.query_params
    before = _integer(request, "before", None, 1, 2 ** 63 - 1)
    limit = _integer(request, "limit", 50, 1, 500)
    rows = await run_in_threadpool(_service(request).history, principal, tool=q.get("tool"), run=q.get("run"),
                                   status=q.get("status"), decided_by=q.get("decided_by"), text=q.get("q"),
                                   before=before, limit=limit)
    return _json({"requests": rows, "next_before": rows[-1]["request"] if len(rows) == limit else None})


async def run_events(request: Request) -> Response:
    """Server-sent events (the WHATWG HTML standard, section 9.2): `id` is the event's seq, so a
    client that reconnects with Last-Event-ID misses nothing; `event` its kind; `data` JSON."""
    principal = _principal(request)
    run = request.path_params["run"]
    since_text = request.headers.get("last-event-id") or request.query_params.get("since")
    service = _service(request)
    if since_text is not None and (not digits(since_text) or len(since_text) > 19):
        raise ApiError(422, TIMEOUT_RANGE, "Last-Event-ID (or since) must be a seq")
    since = int(since_text) if since_text is not None else await run_in_threadpool(lambda: _head(service))

    def own(proposer: str) -> bool:
        return principal.kind != "agent" or proposer == principal.name

    queue = service.open_stream(run, principal)  # before the stored events are read: nothing falls between

    async def stream():
        last = since
        for item in await run_in_threadpool(service.run_events, principal, run, since):
            last = item["seq"]
            yield _sse(item)
        while True:
            try:
                entry = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except asyncio.TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if entry is END:  # this client read too slowly: it reconnects with Last-Event-ID
                return
            proposer, item = entry
            if item["seq"] > last and own(proposer):
                last = item["seq"]
                yield _sse(item)

    return _EventStream(stream(), lambda: service.close_stream(run, queue, principal))


class _EventStream(StreamingResponse):
    """A text/event-stream response that calls `release` once it is over, however it ends (the
    client gone, the stream ended, or never started)."""

    def __init__(self, content: Any, release: Any):
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self._release = release

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _head(service: Service) -> int:
    with service.gate() as gate:
        gate.refresh()
        return gate.seen


def _sse(item: dict) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (item["seq"], item["kind"].encode(), msgspec.json.encode(item))


async def reload(request: Request) -> Response:
    admin = _principal(request, "admin")
    try:
        done = await run_in_threadpool(_service(request).reload, admin.name)
    except ServiceError as exc:
        raise ApiError(422, "reload_failed", f"nothing was reloaded: {exc}") from None
    return _json(done)


async def deliveries(request: Request) -> Response:
    _principal(request, "admin")
    limit = _integer(request, "limit", 100, 1, 1000)
    notifier = _service(request).notifier
    if notifier is None:
        return _json({"enabled": False, "webhooks": [], "queued": 0, "queued_bytes": 0, "dropped": 0, "cursor": None,
                      "deliveries": []})
    return _json(await run_in_threadpool(notifier.summary, limit))


async def health(request: Request) -> Response:
    return _json({"status": "ok"})


async def openapi(request: Request) -> Response:
    from service.openapi import document

    return JSONResponse(document())


routes = [
    Route("/v1/health", health, methods=["GET"]),
    Route("/v1/openapi.json", openapi, methods=["GET"]),
    Route("/v1/proposals", propose, methods=["POST"]),
    Route("/v1/requests/{request}", get_request, methods=["GET"]),
    Route("/v1/requests/{request}/wait", wait, methods=["GET"]),
    Route("/v1/requests/{request}/start", start, methods=["POST"]),
    Route("/v1/requests/{request}/outcome", outcome, methods=["POST"]),
    Route("/v1/requests/{request}/decision", decide, methods=["POST"]),
    Route("/v1/standing/{seq}/forget", forget, methods=["POST"]),
    Route("/v1/calls/{call_id:path}", by_call_id, methods=["GET"]),
    Route("/v1/runs/{run:path}/events", run_events, methods=["GET"]),
    Route("/v1/queue", queue, methods=["GET"]),
    Route("/v1/history", history, methods=["GET"]),
    Route("/v1/admin/reload", reload, methods=["POST"]),
    Route("/v1/admin/deliveries", deliveries, methods=["GET"]),
]
