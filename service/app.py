"""The Starlette application of `countersign serve`, and how it runs under uvicorn.

Why Starlette (and not FastAPI): the API is a dozen routes whose bodies msgspec already decodes
and checks (the ledger's own types, with forbid_unknown_fields), and whose OpenAPI document is
generated from those same structs (service.openapi); FastAPI would add pydantic, a second
schema system, and hundreds of milliseconds to every start. uvicorn serves it: one process, one
event loop, blocking ledger steps in its worker threads (where steps on the one shared Gate share commits).

Signals: SIGTERM and SIGINT stop accepting, let the requests in flight finish (their commits
are durable before they are answered), then close the Gates (uvicorn's graceful shutdown);
SIGHUP reloads the policy and the roster, and records both digests in the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

import msgspec

from ledger.store.log import LedgerError
from ledger.workflow.errors import GateError
from ledger.workflow.machine import Violation
from service import api
from service.core import Service, ServiceError
from service.errors import INTERNAL, NOT_FOUND, ApiError, from_exception

log = logging.getLogger("countersign.service")


def _error(error: ApiError) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="countersign"'} if error.status == 401 else None
    return Response(msgspec.json.encode(error.body()), status_code=error.status, media_type="application/json",
                    headers=headers)


async def _known(request: Request, exc: Exception) -> Response:
    error = from_exception(exc)
    if error is None:
        return await _unexpected(request, exc)
    return _error(error)


async def _http(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        return _error(ApiError(404, NOT_FOUND, f"no such endpoint: {request.method} {request.url.path}"))
    if exc.status_code == 405:
        return _error(ApiError(405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"))
    return _error(ApiError(exc.status_code, "http_error", str(exc.detail)))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unexpected error serving %s %s", request.method, request.url.path, exc_info=exc)
    return _error(ApiError(500, INTERNAL, "the service failed to answer this request; its log says why"))


def _reload_on_hangup(service: Service) -> None:
    def reload() -> None:
        try:
            service.reload(service.loaded.principal.name)
        except ServiceError as exc:
            log.error("SIGHUP: nothing was reloaded: %s", exc)
        except Exception:
            log.exception("SIGHUP: the reload failed")

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals
        loop.add_signal_handler(signal.SIGHUP, lambda: loop.run_in_executor(None, reload))


def create_app(service: Service, *, web: bool = True) -> Starlette:
    """The ASGI application over `service` (closed when the application shuts down). `web`:
    mount the reviewers' web inbox (service.web) beside the API."""
    routes: list[Any] = list(api.routes)
    if web:
        try:
            from service import web as web_pages
        except ImportError:  # the inbox is not installed in this build
            web_pages = None
        if web_pages is not None:
            routes += web_pages.routes(service)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        service.start_watch(asyncio.get_running_loop())
        _reload_on_hangup(service)
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, service.close)

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        ApiError: _known, Violation: _known, GateError: _known, LedgerError: _known,
        HTTPException: _http, Exception: _unexpected,
    })
    app.state.service = service
    return app


def run(service: Service, *, host: str = "127.0.0.1", port: int = 8470, ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None, log_level: str = "info") -> None:
    """Serve `service` with uvicorn until SIGTERM or SIGINT (graceful: requests in flight finish)."""
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM (or SIGINT) once its graceful shutdown is over, so that the
        process dies of it (status -15); a stop that let every request finish is a success for
        a service manager, so the process exits 0 instead."""

        @contextlib.contextmanager
        def capture_signals(self):
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

    config = uvicorn.Config(create_app(service), host=host, port=port, ssl_certfile=ssl_certfile,
                            ssl_keyfile=ssl_keyfile, log_level=log_level, timeout_graceful_shutdown=5,
                            proxy_headers=False, server_header=False, access_log=False)
    Server(config).run()
