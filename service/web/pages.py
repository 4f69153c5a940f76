"""The inbox's pages: each endpoint reads the service (service.core.Service) as the session's
principal and renders one template (service.web.render).

    GET  /inbox/login, POST /inbox/login, POST /inbox/logout
    GET  /inbox                       the queue (filters tool, run, group)
    GET  /inbox/queue/rows            the queue's rows alone, which static/inbox.js polls
    GET  /inbox/requests/{id}         a request in full, with the decision forms the rule allows
    POST /inbox/requests/{id}/decide  one decision, signed by the service for the session's reviewer
    GET  /inbox/history, /inbox/runs/{run}, /inbox/dashboard

Identity: the reviewer is the session's principal (service.web.sessions), looked up in the
roster in force on every request, so a reviewer removed by a reload is logged out, and so is a
session whose token the reloaded roster no longer lists for them (rotated or revoked); a form's
fields never name anyone (an `approver` field is not read). Every POST carries the session's
CSRF token (the login form: a token of its own in a cookie and the form, compared: the
"double submit" pattern, since there is no session yet). Every refusal is a page saying why,
with the HTTP status and the stable code of the JSON API (service.errors).
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ledger.analytics import dashboard as analytics
from ledger.proof.roster import token_hash
from service.api import MAX_BODY_BYTES, digits
from service.core import Service
from service.errors import ApiError, from_exception
from service.web import charts
from service.web.render import json_diff, page, seconds_until
from service.web.sessions import COOKIE, Session, Sessions

log = logging.getLogger("countersign.service")

LOGIN_COOKIE = "countersign_login"
DECISIONS = ("approve", "edit", "reject", "respond")
HISTORY_PAGE = 50
MAX_RUBBER_STAMP_SECONDS = 86_400.0
MAX_FORM_BYTES = MAX_BODY_BYTES
"""A logged-in reviewer's form: the edit form carries the new arguments as JSON, which a ledger
line (16 MiB) bounds anyway."""
MAX_LOGIN_FORM_BYTES = 64 * 1024
"""The log-in form, which anyone may send: a token (at most 512 characters), a CSRF token and a
path; no reason to hold more of a stranger's bytes in memory."""


class Refused(Exception):
    """A page that refuses: `status`, `title`, `message`, and an optional link (href, text)."""

    def __init__(self, status: int, title: str, message: str, link: tuple[str, str] | None = None, code: str = ""):
        super().__init__(message)
        self.status, self.title, self.message, self.link, self.code = status, title, message, link, code


def _refusal(request: Request, exc: Refused) -> Response:
    return page(request, "refused.html", status=exc.status, http_status=exc.status, title=exc.title, message=exc.message, link=exc.link,
                code=exc.code)


def _from_api(error: ApiError) -> Refused:
    """A refusal of the service, as a page: a stale digest links to the request's current version."""
    found = error.request and error.code not in ("unknown_request", "not_found")
    link = (f"/inbox/requests/{error.request}", f"Open request {error.request} as it is now") if found else None
    titles = {"stale_digest": "Someone changed this request meanwhile",
              "request_final": "This request is already decided", "not_pending": "This request is not waiting",
              "unknown_request": "No such request", "not_found": "No such page",
              "ledger_corrupt": "The ledger does not verify", "forbidden": "Not yours to see"}
    message = error.message
    if error.code == "stale_digest":
        message = ("The arguments you saw are no longer the request's arguments: another reviewer edited them after "
                   "you opened the page. Nothing was recorded. Read the current version and decide again. (" + message + ")")
    return Refused(error.status, titles.get(error.code, "The decision was refused"), message, link, error.code)


class Inbox:
    """The endpoints over one service and its sessions."""

    def __init__(self, service: Service, sessions: Sessions | None = None):
        self.service, self.sessions = service, sessions or Sessions()

    # --- the frame every endpoint runs in -----------------------------------------------------

    def endpoint(self, fn: Callable[..., Awaitable[Response]], *, login: bool = True, post: bool = False):
        """Wrap `fn(request, form)`: find the session (GET without one: to the login page), read
        and check the form of a POST (CSRF), and turn every refusal into a page."""

        @functools.wraps(fn)
        async def run(request: Request) -> Response:
            try:
                session = None
                if login:
                    session = self._session(request)
                    if session is None:
                        if post:
                            raise Refused(403, "You are not logged in",
                                          "Your session ended (you logged out, stayed away too long, or the service "
                                          "restarted). Nothing was recorded.", ("/inbox/login", "Log in again"), "unauthenticated")
                        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                        return RedirectResponse(f"/inbox/login?next={quote(target)}", status_code=303)
                form = await self._form(request, session) if post else None
                return await fn(request, form)
            except Refused as exc:
                return _refusal(request, exc)
            except Exception as exc:  # the service's refusals (stale digest, ...) as pages; a bug as a plain 500
                error = from_exception(exc)
                if error is None:
                    log.error("unexpected error serving %s %s", request.method, request.url.path, exc_info=exc)
                    return _refusal(request, Refused(500, "Something went wrong",
                                                     "The service failed to answer; its log says why.", code="internal"))
                return _refusal(request, _from_api(error))

        return run

    def _session(self, request: Request) -> Session | None:
        session = self.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            return None
        principal = self.service.roster.principal(session.principal)
        if (principal is None or principal.kind not in ("reviewer", "admin")
                or session.token_sha256 not in principal.token_sha256):  # removed, or its token rotated or revoked
            self.sessions.drop(session.id)
            return None
        request.state.session, request.state.principal = session, principal
        return session

    async def _form(self, request: Request, session: Session | None) -> Any:
        """The POST's form, read whole and counted as it arrives (a chunked body has no declared
        length) and refused past its limit before any parsing: MAX_FORM_BYTES in a session,
        MAX_LOGIN_FORM_BYTES for the log-in form, which anyone may send. Then the CSRF check."""
        limit = MAX_FORM_BYTES if session is not None else MAX_LOGIN_FORM_BYTES
        too_large = Refused(413, "The form is too large", f"This form may hold at most {limit:,} bytes. Nothing was "
                            "recorded.", code="body_too_large")
        declared = request.headers.get("content-length")
        if declared is not None and digits(declared) and int(declared) > limit:
            raise too_large
        received = 0

        async def counted() -> Any:
            nonlocal received
            message = await request.receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise too_large
            return message

        reading = Request(request.scope, counted)
        await reading.body()  # kept by the Request: form() parses it from memory
        try:
            form = await reading.form(max_files=0, max_fields=32, max_part_size=limit)
        except HTTPException as exc:  # starlette's refusal of a malformed form (too many fields, ...)
            raise Refused(422, "The form could not be read", f"{exc.detail} Nothing was recorded.",
                          code="invalid_body") from None
        token = form.get("csrf")
        expected = session.csrf if session is not None else request.cookies.get(LOGIN_COOKIE)
        if not expected or not isinstance(token, str) or not secrets.compare_digest(token.encode(), expected.encode()):
            raise Refused(403, "The form's security token does not match",
                          "This form did not come from your current session (it is older than your last log-in, or "
                          "another site made your browser send it), so nothing was done. Reload the page and try again.",
                          (request.headers.get("referer") or "/inbox", "Back"), "csrf")
        return form

    def _secure(self, request: Request) -> bool:
        """Whether cookies get Secure: the request came over https, or the service's --public-url
        is https (behind a TLS-terminating proxy every request reaches uvicorn as plain http, and
        uvicorn trusts no X-Forwarded-Proto: app.run sets proxy_headers=False)."""
        return request.url.scheme == "https" or self.service.public_url.lower().startswith("https://")

    # --- logging in and out -------------------------------------------------------------------

    async def login_form(self, request: Request, form: Any) -> Response:
        token = secrets.token_urlsafe(24)
        response = page(request, "login.html", csrf=token, next=_local(request.query_params.get("next")), error=None)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=self._secure(request),
                            path="/inbox/login", max_age=3600)
        return response

    async def login(self, request: Request, form: Any) -> Response:
        token = form.get("token")
        principal = self.service.roster.authenticate(token.strip()) if isinstance(token, str) and token.strip() else None
        if principal is None or principal.kind not in ("reviewer", "admin"):
            why = ("That token belongs to an agent: agents propose calls and never review them."
                   if principal is not None and principal.kind == "agent" else
                   "The roster lists no reviewer with that token." if principal is None else
                   f"That token belongs to a principal of kind {principal.kind}, which has no inbox.")
            response = page(request, "login.html", status=403, csrf=form.get("csrf"), next=_local(form.get("next")),
                            error=why)
            return response
        session = self.sessions.create(principal.name, token_hash(token.strip()))
        response = RedirectResponse(_local(form.get("next")), status_code=303)
        response.set_cookie(COOKIE, session.id, httponly=True, samesite="strict", secure=self._secure(request), path="/inbox")
        response.delete_cookie(LOGIN_COOKIE, path="/inbox/login")
        return response

    async def logout(self, request: Request, form: Any) -> Response:
        self.sessions.drop(request.state.session.id)
        response = RedirectResponse("/inbox/login", status_code=303)
        response.delete_cookie(COOKIE, path="/inbox", httponly=True, samesite="strict", secure=self._secure(request))
        return response

    # --- the queue ----------------------------------------------------------------------------

    async def _queue(self, request: Request) -> dict:
        q = request.query_params
        filters = {k: q.get(k) or None for k in ("tool", "run", "group")}
        principal = request.state.principal
        rows, hidden = await run_in_threadpool(self.service.queue, principal, **filters,
                                               everyone=principal.kind == "admin")
        now = self.service.clock()
        for row in rows:
            row["seconds_left"] = seconds_until(row["deadline"], now)
        return {"rows": rows, "hidden": hidden, "filters": filters,
                "query": urlencode({k: v for k, v in filters.items() if v})}

    async def queue(self, request: Request, form: Any) -> Response:
        return page(request, "queue.html", **await self._queue(request))

    async def queue_rows(self, request: Request, form: Any) -> Response:
        return page(request, "queue_rows.html", **await self._queue(request))

    # --- one request --------------------------------------------------------------------------

    async def request_page(self, request: Request, form: Any) -> Response:
        rid = _request_id(request)
        principal = request.state.principal
        item = await run_in_threadpool(self.service.in_full, principal, rid)
        diff = json_diff(item["original_args"], item["args"]) if item["original_args"] is not None else None
        forms = [d for d in item["decisions"] if d in DECISIONS] if item["may_decide"] and principal.kind == "reviewer" else []
        item["seconds_left"] = seconds_until(item["deadline"], self.service.clock())
        return page(request, "request.html", item=item, diff=diff, forms=forms, done=request.query_params.get("done"))

    async def decide(self, request: Request, form: Any) -> Response:
        rid = _request_id(request)
        decision = form.get("decision")
        if decision not in DECISIONS:
            raise Refused(422, "Unknown decision", f"A decision is one of {', '.join(DECISIONS)}.", _back(rid))
        digest = form.get("digest")
        if not isinstance(digest, str) or not digest:
            raise Refused(422, "The form lacks the arguments' digest",
                          "A decision is bound to the digest of the arguments you saw; this form has none.", _back(rid))
        text = {name: (form.get(name) or "").strip() or None for name in ("reason", "message", "comment", "remember")}
        args = None
        if decision == "edit":
            args = _edited_args(form.get("args"), rid)
        if decision == "reject" and not text["reason"]:
            raise Refused(422, "A rejection needs a reason", "Say what the agent should do instead; the reason is "
                          "returned to it.", _back(rid), "invalid_call")
        if decision == "respond" and not text["message"]:
            raise Refused(422, "A response needs a message", "The message is returned to the agent in place of the "
                          "tool's result.", _back(rid), "invalid_call")
        # The reviewer is the session's principal: no field of the form names anyone.
        await run_in_threadpool(self.service.decide, request.state.principal, rid, decision, digest=digest, args=args,
                                reason=text["reason"], message=text["message"], comment=text["comment"],
                                remember=text["remember"] if decision in ("approve", "reject") else None)
        return RedirectResponse(f"/inbox/requests/{rid}?done={decision}", status_code=303)

    # --- history, runs, dashboard -------------------------------------------------------------

    async def history(self, request: Request, form: Any) -> Response:
        q = request.query_params
        filters = {k: q.get(k) or None for k in ("q", "tool", "status", "decided_by")}
        before = q.get("before")
        before_seq = int(before) if before and digits(before) and len(before) < 19 else None
        rows = await run_in_threadpool(self.service.history, request.state.principal, tool=filters["tool"],
                                       status=filters["status"], decided_by=filters["decided_by"], text=filters["q"],
                                       before=before_seq, limit=HISTORY_PAGE)
        more = rows[-1]["request"] if len(rows) == HISTORY_PAGE else None
        next_query = urlencode({**{k: v for k, v in filters.items() if v}, "before": more}) if more else None
        return page(request, "history.html", rows=rows, filters=filters, next_query=next_query)

    async def run_page(self, request: Request, form: Any) -> Response:
        run = request.path_params["run"]
        rows = await run_in_threadpool(self.service.history, request.state.principal, run=run, limit=500)
        return page(request, "run.html", run=run, rows=rows)

    async def dashboard(self, request: Request, form: Any) -> Response:
        text = request.query_params.get("rubber_stamp") or "10"
        try:
            threshold = float(text)
            if not 0 < threshold <= MAX_RUBBER_STAMP_SECONDS:
                raise ValueError
        except ValueError:
            raise Refused(422, "Bad threshold", f"rubber_stamp is a number of seconds above 0 and at most "
                          f"{MAX_RUBBER_STAMP_SECONDS:g}.", ("/inbox/dashboard", "The dashboard"), "invalid_parameter") from None

        def compute() -> analytics.Dashboard:
            records, total = analytics.tail_records(self.service.ledger_path)
            return analytics.dashboard(records, total_events=total, rubber_stamp_seconds=threshold)

        d = await run_in_threadpool(compute)
        graphs = {
            "queue": charts.line_chart([(ts[:16].replace("T", " "), n) for ts, n in d.queue],
                                       title="Requests waiting for a person", unit="requests"),
            "by_tool": charts.paired_bar_chart([(k, v.p50, v.p90) for k, v in d.by_tool.items()], names=("p50 s", "p90 s"),
                                               title="Seconds to decision by tool"),
            "by_approver": charts.paired_bar_chart([(k, v.p50, v.p90) for k, v in d.by_approver.items()],
                                                   names=("p50 s", "p90 s"), title="Seconds to decision by approver"),
            "edit_rate": charts.line_chart([(k.replace("T", " "), 100 * e / n) for k, n, e in d.edit_rate],
                                           title="Share of decided asks that were edited", unit="% edited"),
            "load": charts.bar_chart(list(d.load.items()), title="Decisions per approver", unit="decisions"),
        }
        stamp_by: dict[str, int] = {}
        for s in d.rubber_stamps:
            stamp_by[s.approver] = stamp_by.get(s.approver, 0) + 1
        graphs["stamps"] = charts.bar_chart(sorted(stamp_by.items(), key=lambda kv: -kv[1]),
                                            title=f"Approvals within {threshold:g} s of the interrupt", unit="approvals")
        return page(request, "dashboard.html", d=d, graphs=graphs, threshold=threshold, limit=analytics.DEFAULT_LIMIT)


def _local(target: Any) -> str:
    """`target` when it is a path of the inbox (never another site: no open redirect), else /inbox."""
    if isinstance(target, str) and target.startswith("/inbox") and not target.startswith("//") and "\\" not in target:
        return target
    return "/inbox"


def _back(rid: int) -> tuple[str, str]:
    return (f"/inbox/requests/{rid}", f"Back to request {rid}")


def _request_id(request: Request) -> int:
    text = request.path_params["request"]
    if not digits(text) or len(text) > 19 or int(text) < 1:
        raise Refused(404, "No such request", f"{text!r} is not a request id (a positive integer).", ("/inbox", "The queue"),
                      "unknown_request")
    return int(text)


def _edited_args(text: Any, rid: int) -> dict:
    """The edit form's JSON text as an object (checked again here: the page's script is a convenience)."""
    if not isinstance(text, str) or not text.strip():
        raise Refused(422, "The edit has no arguments", "Write the new arguments as a JSON object.", _back(rid), "invalid_body")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise Refused(422, "The edited arguments are not JSON", f"{exc}. Nothing was recorded.", _back(rid),
                      "malformed_json") from None
    if not isinstance(value, dict):
        raise Refused(422, "The edited arguments are not an object",
                      f"A tool's arguments are a JSON object ({{...}}), not a {type(value).__name__}.", _back(rid), "invalid_body")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
