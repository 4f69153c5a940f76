"""The reviewers' web inbox (issue 11, section 3): server-rendered pages under /inbox over the
same Service as the JSON API, with sessions, CSRF tokens, a live queue, one page per request
with its decision forms, history, runs and a dashboard of charts drawn as SVG on the server.

    routes(service) -> [Mount("/inbox", ...)]      service.app.create_app mounts it

Modules: sessions (cookies and CSRF tokens), pages (the endpoints), render (templates, headers,
JSON and diff helpers), charts (SVG). templates/ are Jinja2 (autoescape on); static/ holds the
one script and the style sheet, written for this project (nothing from a CDN: the inbox works
with no network). The numbers of the dashboard come from ledger.analytics.dashboard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.routing import Mount, Route, Router, request_response
from starlette.staticfiles import StaticFiles

from service.web.pages import Inbox
from service.web.render import SECURITY_HEADERS
from service.web.sessions import Sessions

STATIC = Path(__file__).parent / "static"


class _Headers:
    """ASGI wrapper that adds the security headers (service.web.render) to every response of
    the inbox, pages, redirects and static files alike."""

    def __init__(self, app: Any):
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in self.headers}
                message = {**message, "headers": [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                           + self.headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def routes(service: Any, sessions: Sessions | None = None) -> list[Any]:
    """The inbox's routes over `service` (one session store per call)."""
    inbox = Inbox(service, sessions)
    e = inbox.endpoint
    router = Router(routes=[
        Route("/", e(inbox.queue), methods=["GET"]),
        Route("/login", e(inbox.login_form, login=False), methods=["GET"]),
        Route("/login", e(inbox.login, login=False, post=True), methods=["POST"]),
        Route("/logout", e(inbox.logout, post=True), methods=["POST"]),
        Route("/queue/rows", e(inbox.queue_rows), methods=["GET"]),
        Route("/requests/{request}", e(inbox.request_page), methods=["GET"]),
        Route("/requests/{request}/decide", e(inbox.decide, post=True), methods=["POST"]),
        Route("/history", e(inbox.history), methods=["GET"]),
        Route("/runs/{run:path}", e(inbox.run_page), methods=["GET"]),
        Route("/dashboard", e(inbox.dashboard), methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ], redirect_slashes=True)
    # /inbox itself (no slash) is the queue too, with the same headers
    return [Route("/inbox", _Headers(request_response(e(inbox.queue))), methods=["GET"]),
            Mount("/inbox", app=_Headers(router))]
