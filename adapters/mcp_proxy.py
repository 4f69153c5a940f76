"""An MCP gateway: countersign in front of any MCP server (`countersign mcp-proxy`).

    countersign mcp-proxy --policy P --ledger L --server-name files -- python my_server.py
    countersign mcp-proxy --url http://127.0.0.1:8470 --token-env COUNTERSIGN_TOKEN --server-name s -- npx some-server
    countersign mcp-proxy --policy P --ledger L --server-name files --listen 127.0.0.1:8765 -- python my_server.py

The proxy is an MCP server to its client (over stdio, or streamable HTTP with `--listen`) and an
MCP client to the wrapped server, which it starts as a subprocess over stdio (the `mcp` SDK's
low-level `Server`, `ClientSession`, `stdio_client` / `stdio_server` and its streamable HTTP app;
mcp 2.3). What passes through untouched: the wrapped server's name, version, instructions and
capabilities for tools, resources (list, templates, read), prompts (list, get) and completions;
`tools/list` with its pagination; progress the server reports while a call runs. What is decided:
every `tools/call`, by countersign (docs/adapters/mcp-proxy.md):

- the call is proposed to the Gate (or the approval service) as `mcp__<server>__<tool>` (Claude
  Code's spelling, so one policy serves both; `bare_tool_names` for the tool's own name), with
  the context `{"server": <server>}`, `run` one id per client connection, and `call_id`
  `<run>#<JSON-RPC id as JSON>` (JSON-RPC ids are unique within a session: MCP spec,
  "Requests"; as JSON, the ids 1 and "1" stay two calls). `<server>` is the operator's name for
  the server, never the name it gives itself (adapters.mcp_names); a tool whose name holds `__`
  is neither listed nor proposed;
- allow: `execution_started` is recorded, the call is forwarded with the recorded arguments,
  and the outcome is recorded with the result's digest (the result itself with `keep_results`);
  a result with `isError` is an "error" outcome;
- deny: a CallToolResult with `isError: true` whose text is the policy's reason;
- ask: the proxy waits for a reviewer (`countersign review`, the web inbox), at most
  `ask_timeout` seconds, reporting progress meanwhile when the client asked for it; a timeout
  or the client's `notifications/cancelled` withdraws the request (cancel), so a late approval
  never runs it. Approve runs the approved (possibly edited) arguments; reject's reason and
  respond's message come back as an `isError` result.

Why an `isError` result and not a JSON-RPC error: the MCP specification ("Tools", error
handling) reserves JSON-RPC errors for protocol problems (an unknown tool, malformed
arguments) and says tool errors are reported in the result with `isError` "so the LLM can see
them and potentially handle them"; hosts such as Claude Desktop show a JSON-RPC error to the
user but do not reliably hand its text to the model. A reason the model cannot read cannot be
acted on. A respond is an `isError` result as well: a tool with an `outputSchema` must return
structured content that conforms to it (the SDK's client refuses one that does not), and a
reviewer's message cannot; `isError` results are exempt. Each refusal carries
`_meta["countersign"]`: the request, the effect, the decision and the rules.

Fail closed: a tool the wrapped server does not list (after one refresh) is refused before it
is proposed; a backend error (the ledger, the policy, the service) refuses the call; the server
crashing or its connection closing is an "error" outcome and an `isError` result. Nothing is
forwarded before the Gate has recorded its start.

The wrapped server runs with this process's environment minus countersign's own variables
(`COUNTERSIGN_*`, the token's variable, any variable holding the token): it is the code the proxy
exists to distrust, and the agent's token would let it act as the agent at the service.

Errors: `open_gateway`/`run_proxy` raise ProxyError when the wrapped server cannot be started or
initialized, or the options name no usable server name.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server

from adapters.backend import WAITING, AsyncBackend, BackendError, Outcome, Settled, Started, Verdict
from adapters.mcp_names import LOOPBACK_HOSTS, loopback_host, server_environment, server_name, tool_name_refused

log = logging.getLogger("countersign.mcp_proxy")

META_KEY = "countersign"  # the key of the _meta object each refusal carries
ERROR_TEXT_CHARS = 2000  # how much of a failed result's text the ledger's error records


class ProxyError(Exception):
    """The wrapped server could not be started or initialized, or has no usable name."""


@dataclass
class ProxyOptions:
    """How the proxy decides and records.

    `server_name`: the name in `mcp__<server>__<tool>` and in the context, required (the
    operator's name for the server, never its own `serverInfo.name`; cleaned and checked by
    adapters.mcp_names.server_name); `bare_tool_names`: propose the tool's own name instead;
    `ask_timeout`: seconds to wait for a reviewer before withdrawing the call (the safe default:
    silence never approves); `progress_seconds`: how often a waiting ask reports progress to a
    client that gave a progress token (keeps clients that reset their timeout on progress
    waiting); `keep_results`: record each result itself in the ledger beside its digest
    (Gate.finish keep_result: only for results without personal data)."""

    server_name: str | None = None
    bare_tool_names: bool = False
    ask_timeout: float = 55.0
    progress_seconds: float = 10.0
    keep_results: bool = False


def _text_result(text: str, meta: dict) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True,
                                _meta={META_KEY: meta})


def _error_text(result: types.CallToolResult) -> str:
    """The text blocks of a failed result, for the ledger's `error` (cut to ERROR_TEXT_CHARS)."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return (" ".join(texts).strip() or "the server reported an error (isError) with no text")[:ERROR_TEXT_CHARS]


class Gateway:
    """The handlers of one proxy: `upstream` the session with the wrapped server (initialized,
    `init` its InitializeResult), `backend` where calls are decided. `build_server()` gives the
    low-level Server to run over a transport. Every handler runs in the caller's task, so a
    cancelled request (the client's `notifications/cancelled`) cancels its wait. Raises
    ProxyError when `options.server_name` is missing or refused (adapters.mcp_names)."""

    def __init__(self, upstream: ClientSession, init: types.InitializeResult, backend: AsyncBackend,
                 options: ProxyOptions | None = None):
        self.upstream, self.init, self.backend = upstream, init, backend
        self.options = options or ProxyOptions()
        try:
            self.server_name = server_name(self.options.server_name)
        except ValueError as exc:
            raise ProxyError(str(exc)) from None
        self.process_run = uuid.uuid4().hex  # a connection whose state cannot be read gets this run
        self._tools: dict[str, types.Tool] | None = None  # name -> the wrapped server's tool, all pages
        self._refused: set[str] = set()  # the tool names already logged as refused

    # --- names and runs --------------------------------------------------------------------------

    def ledger_tool(self, name: str) -> str:
        """The tool name the policy sees: `mcp__<server>__<tool>`, or the bare name."""
        return name if self.options.bare_tool_names else f"mcp__{self.server_name}__{name}"

    def run_of(self, ctx: Any) -> str:
        """One run id per client connection: kept in the SDK's per-connection state (the
        connection a request context's session belongs to); stdio serves one connection."""
        connection = getattr(getattr(ctx, "session", None), "_connection", None)
        state = getattr(connection, "state", None)
        if not isinstance(state, dict):
            return f"mcp-{self.process_run}"
        run = state.get("countersign_run")
        if run is None:
            run = state["countersign_run"] = f"mcp-{uuid.uuid4().hex}"
        return run

    @staticmethod
    def call_id(run: str, request_id: Any) -> str | None:
        """`<run>#<the JSON-RPC id as JSON>`: the ids 1 and "1" are two requests (JSON-RPC 2.0,
        "Request object": a String or a Number), so they are two calls."""
        return None if request_id is None else f"{run}#{json.dumps(request_id)}"

    # --- tools ---------------------------------------------------------------------------------

    def _offered(self, tools: list[types.Tool]) -> list[types.Tool]:
        """The tools whose names are not refused (tool_name_refused); a refused one is logged once."""
        offered = []
        for tool in tools:
            why = tool_name_refused(tool.name)
            if why is None:
                offered.append(tool)
            elif tool.name not in self._refused:
                self._refused.add(tool.name)
                log.warning("the MCP server %s lists the tool %r; it is not offered: %s", self.server_name, tool.name, why)
        return offered

    async def _all_tools(self) -> dict[str, types.Tool]:
        tools: dict[str, types.Tool] = {}
        cursor = None
        for _ in range(1000):  # a server that pages forever is not followed forever
            page = await self.upstream.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.update((tool.name, tool) for tool in self._offered(page.tools))
            cursor = page.next_cursor
            if not cursor:
                break
        self._tools = tools
        return tools

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        result = await self.upstream.list_tools(params=params)
        result = result.model_copy(update={"tools": self._offered(result.tools)})
        if params is None or params.cursor is None:
            if result.next_cursor is None:
                self._tools = {tool.name: tool for tool in result.tools}
        return result

    async def _known(self, name: str) -> bool:
        if self._tools is not None and name in self._tools:
            return True
        return name in await self._all_tools()

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """Decide one `tools/call` and answer it (see the module's docstring)."""
        name, args = params.name, dict(params.arguments or {})
        meta: dict[str, Any] = {"tool": self.ledger_tool(name)}
        if (why := tool_name_refused(name)) is not None:  # before anything is asked of the server
            return _text_result(f"countersign refuses the tool {name!r}: {why}; the call did not run.",
                                meta | {"status": "refused_name"})
        try:
            known = await self._known(name)
        except Exception as exc:  # the server is gone, or answered nonsense
            return _text_result(f"The MCP server {self.server_name} could not list its tools ({exc}); "
                                "the call did not run.", meta | {"status": "error"})
        if not known:
            return _text_result(f"The MCP server {self.server_name} has no tool named {name!r}; the call did not "
                                "run.", meta | {"status": "unknown_tool"})
        run = self.run_of(ctx)
        call_id = self.call_id(run, ctx.request_id)
        sync = self.backend.backend

        def propose_and_start() -> tuple[Verdict, Started | Outcome | BackendError | None]:
            # one worker-thread hop for an allowed call's two steps (a hop costs about as much
            # as a step's durable write on a busy machine): the start is taken at once
            verdict = sync.propose(meta["tool"], args, run=run, context={"server": self.server_name}, call_id=call_id)
            if verdict.status != "allowed" or verdict.duplicate:
                return verdict, None
            try:
                return verdict, sync.start(verdict.request)
            except BackendError as exc:
                return verdict, exc

        try:
            # shielded: a worker thread is not interrupted, and a cancellation arriving meanwhile
            # would discard what it recorded (a started call would then never get its outcome)
            with anyio.CancelScope(shield=True):
                verdict, started = await anyio.to_thread.run_sync(propose_and_start)
        except BackendError as exc:
            return self._backend_failure(exc, meta)
        meta |= {"request": verdict.request, "effect": verdict.effect, "rules": list(verdict.rules)}
        if started is not None:
            meta |= {"status": "allowed", "decision": None}
            return await self._execute(ctx, name, verdict.request, meta, started)
        try:
            settled = await self._settle(ctx, verdict, meta)
        except BackendError as exc:
            return self._backend_failure(exc, meta)
        if isinstance(settled, types.CallToolResult):
            return settled
        meta |= {"status": settled.status, "decision": settled.decision}
        if settled.decided_by:
            meta["decided_by"] = settled.decided_by
        if settled.runnable or settled.status == "executed":
            return await self._execute(ctx, name, verdict.request, meta)
        return self._refusal(verdict, settled, meta)

    async def _settle(self, ctx: Any, verdict: Verdict, meta: dict) -> Settled | types.CallToolResult:
        """Where the proposed call stands once no person is awaited: at once for allow and
        deny; for an ask, after a reviewer's decision, or a withdrawal at `ask_timeout` or at
        the client's cancellation."""
        if verdict.status not in WAITING:
            if verdict.status in ("allowed", "denied") and not verdict.duplicate:
                return Settled(verdict.request, verdict.status, verdict.args_digest)
            return await self.backend.get(verdict.request)
        give_up = time.monotonic() + max(0.0, self.options.ask_timeout)
        waited = 0
        try:
            while True:
                left = give_up - time.monotonic()
                settled = await self.backend.wait(verdict.request, max(0.0, min(self.options.progress_seconds, left)))
                if not settled.waiting:
                    return settled
                if time.monotonic() >= give_up:
                    break
                waited += 1
                await self._report_waiting(ctx, verdict, waited)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._withdraw(verdict.request, "the MCP client cancelled the request")
            raise
        reason = f"no reviewer decided within {self.options.ask_timeout:g} s (mcp-proxy --ask-timeout)"
        settled = await self._withdraw(verdict.request, reason)
        if settled is not None and settled.status == "cancelled":
            return _text_result(f"No reviewer decided within {self.options.ask_timeout:g} s, so the call was "
                                f"withdrawn and did not run (countersign request {verdict.request}). "
                                f"It needed: {verdict.reason or verdict.needs or 'a reviewer'}",
                                meta | {"status": "cancelled", "decision": "cancel", "timed_out": True})
        # a decision landed between the last wait and the cancel: it stands
        return await self.backend.get(verdict.request)

    async def _withdraw(self, request: int, reason: str) -> Settled | None:
        try:
            return await self.backend.cancel(request, reason)
        except BackendError as exc:  # decided meanwhile, or the ledger failed: nothing runs either way
            log.warning("could not withdraw request %s: %s", request, exc.message)
            return None

    async def _report_waiting(self, ctx: Any, verdict: Verdict, waited: int) -> None:
        """Progress for a client that gave a progress token (a no-op otherwise)."""
        session = getattr(ctx, "session", None)
        if session is None:
            return
        try:
            await session.report_progress(float(waited), None,
                                          f"waiting for a reviewer: countersign request {verdict.request}"
                                          + (f" ({verdict.needs})" if verdict.needs else ""))
        except Exception as exc:  # progress is a courtesy; the wait goes on
            log.debug("progress not sent: %s", exc)

    async def _execute(self, ctx: Any, name: str, request: int, meta: dict,
                       started: Started | Outcome | BackendError | None = None) -> types.CallToolResult:
        """Record the start (unless `started` is its answer already), forward with the recorded
        (approved, possibly edited) arguments, record the outcome; an executed request is not
        forwarded again."""
        try:
            if started is None:
                with anyio.CancelScope(shield=True):  # as the proposal's: the start must not be lost
                    started = await self.backend.start(request)
            elif isinstance(started, BackendError):
                raise started
        except BackendError as exc:
            return self._backend_failure(exc, meta)
        if isinstance(started, Outcome):  # it ran before (a repeated call id): never twice
            if started.outcome == "ok" and started.result_kept and isinstance(started.result, dict):
                return types.CallToolResult.model_validate(started.result)
            return _text_result(f"This call already ran (countersign request {request}, outcome {started.outcome}); "
                                "it does not run twice and its result was not kept.",
                                meta | {"status": "executed", "replayed": True})

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            try:
                await ctx.session.report_progress(progress, total, message)
            except Exception:
                pass

        try:
            result = await self.upstream.call_tool(name, started.args, progress_callback=on_progress)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._finish(request, "error", error="the MCP client cancelled the request while the server "
                                   "ran it (it may have run)")
            raise
        except Exception as exc:  # the server crashed, closed its pipe, or answered what the SDK refuses
            text = f"{type(exc).__name__}: {exc}"
            await self._finish(request, "error", error=f"the MCP server failed: {text}")
            return _text_result(f"The MCP server {self.server_name} failed while running this call ({text}).",
                                meta | {"status": "executed", "outcome": "error"})
        if not isinstance(result, types.CallToolResult):  # an input-required or claimed result: not forwarded
            await self._finish(request, "error", error=f"the MCP server answered {type(result).__name__}")
            return _text_result("The MCP server asked for input the proxy cannot relay; the call did not finish.",
                                meta | {"status": "executed", "outcome": "error"})
        if result.is_error:
            await self._finish(request, "error", error=_error_text(result))
        else:
            await self._finish(request, "ok", result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        return result

    async def _finish(self, request: int, outcome: str, *, result: Any = None, error: str | None = None) -> None:
        """Record the outcome. The call has run by now: a failure to record it is logged and
        the result still goes back (hiding it would only make the model try again; the ledger
        then shows the request executing, its outcome unknown)."""
        try:
            await self.backend.finish(request, outcome=outcome, result=result, error=error,
                                      keep_result=self.options.keep_results and outcome == "ok")
        except BackendError as exc:
            if exc.code == "InvalidCall" and result is not None:  # a result the ledger cannot digest
                try:
                    await self.backend.finish(request, outcome=outcome, result=None)
                    return
                except BackendError as again:
                    exc = again
            log.error("the outcome of request %s was not recorded: %s", request, exc.message)

    def _refusal(self, verdict: Verdict, settled: Settled, meta: dict) -> types.CallToolResult:
        status = settled.status
        if status == "denied":
            text = f"Denied by policy: {verdict.reason or 'no reason given'}"
        elif status == "rejected":
            text = f"A reviewer rejected this call: {settled.reason or 'no reason given'}"
        elif status == "responded":
            text = settled.reason or ""
        elif status == "expired":
            text = f"No reviewer decided before the request's deadline; the call did not run. {settled.reason or ''}".strip()
        elif status == "cancelled":
            text = f"The call was withdrawn and did not run: {settled.reason or 'no reason given'}"
        else:  # executing (its outcome unknown) or anything new: never run
            text = f"This call cannot run now (countersign request {settled.request} is {status})."
        if settled.reason is not None and status in ("rejected", "responded", "cancelled", "expired"):
            meta = meta | {"reason": settled.reason}
        return _text_result(text, meta)

    def _backend_failure(self, exc: BackendError, meta: dict) -> types.CallToolResult:
        log.error("countersign refused a call to %s: %s: %s", meta.get("tool"), exc.code, exc.message)
        return _text_result(f"countersign could not decide this call, so it did not run ({exc.code}: {exc.message}).",
                            meta | {"status": "error", "error": exc.code})

    # --- everything else passes through ----------------------------------------------------------

    def _forward(self, request_type: type, result_type: type):
        async def handler(ctx: Any, params: Any) -> Any:
            return await self.upstream.send_request(request_type(params=params), result_type)
        return handler

    def build_server(self) -> Server:
        """A low-level Server offering what the wrapped server offers (its capabilities decide
        which handlers exist, and so what the proxy's own `initialize` answers)."""
        caps = self.init.capabilities
        handlers: dict[str, Any] = {"on_list_tools": self.list_tools, "on_call_tool": self.call_tool}
        if caps.resources is not None:
            handlers["on_list_resources"] = self._forward(types.ListResourcesRequest, types.ListResourcesResult)
            handlers["on_list_resource_templates"] = self._forward(types.ListResourceTemplatesRequest,
                                                                   types.ListResourceTemplatesResult)
            handlers["on_read_resource"] = self._forward(types.ReadResourceRequest, types.ReadResourceResult)
        if caps.prompts is not None:
            handlers["on_list_prompts"] = self._forward(types.ListPromptsRequest, types.ListPromptsResult)
            handlers["on_get_prompt"] = self._forward(types.GetPromptRequest, types.GetPromptResult)
        if caps.completions is not None:
            handlers["on_completion"] = self._forward(types.CompleteRequest, types.CompleteResult)
        info = self.init.server_info
        return Server(info.name, version=info.version, title=info.title, description=info.description,
                      instructions=self.init.instructions, website_url=info.website_url, icons=info.icons, **handlers)

    def initialization_options(self, server: Server):
        # list_changed is not advertised: the proxy does not relay the server's change
        # notifications (a client sees a changed list on its next tools/list)
        return server.create_initialization_options(NotificationOptions())


@asynccontextmanager
async def open_gateway(command: list[str], backend: AsyncBackend, options: ProxyOptions | None = None,
                       *, env: dict[str, str] | None = None, hidden_env: tuple[str, ...] = (),
                       secrets: tuple[str, ...] = (), cwd: str | None = None,
                       errlog=None) -> AsyncIterator[Gateway]:
    """Start the wrapped server (`command`), initialize it, and yield the Gateway. Its
    environment is `env` (by default this process's) without countersign's variables: every
    `COUNTERSIGN_*`, the ones named in `hidden_env` (the `--token-env` variable) and any holding
    one of `secrets` (mcp_names.server_environment; the SDK adds its safe defaults: PATH, HOME,
    ...). Raises ProxyError when the server cannot start or initialize, or `options` give no
    usable server name; the server stops on exit."""
    if not command:
        raise ProxyError("no server command: give it after `--`")
    environ = server_environment(os.environ if env is None else env, hidden_env, secrets)
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=environ, cwd=cwd)
    try:
        async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
            async with ClientSession(read, write) as session:
                try:
                    init = await session.initialize()
                except Exception as exc:
                    raise ProxyError(f"the MCP server {command[0]} did not initialize: {exc}") from exc
                yield Gateway(session, init, backend, options)
    except OSError as exc:
        raise ProxyError(f"cannot start the MCP server {command[0]}: {exc}") from exc


async def serve_stdio(gateway: Gateway) -> None:
    """Serve one client over this process's stdin/stdout until it closes stdin."""
    server = gateway.build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, gateway.initialization_options(server))


async def serve_http(gateway: Gateway, host: str, port: int, *, path: str = "/mcp",
                     ready: Any = None) -> None:
    """Serve streamable HTTP at http://host:port/mcp (each MCP session its own run) until
    SIGINT/SIGTERM. The proxy authenticates no one: `host` must be a loopback host (ProxyError
    otherwise; the SDK then checks the Host and Origin headers against DNS rebinding).
    `ready(port)` is called once bound."""
    import signal

    import uvicorn

    if not loopback_host(host):
        raise ProxyError(f"will not serve on {host}: the proxy authenticates no one (loopback only)")
    # uvicorn stops on SIGTERM or SIGINT, then raises the signal again once it has stopped, to
    # end the process by it; handled here, the proxy instead returns and stops its server itself
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)
    server = gateway.build_server()
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    if ready is not None:
        async def announce() -> None:
            while not http.started:
                await anyio.sleep(0.02)
            bound = port
            for s in (http.servers[0].sockets if http.servers else ()):
                bound = s.getsockname()[1]
            ready(bound)
        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await http.serve()
            tg.cancel_scope.cancel()
    else:
        await http.serve()


def run_proxy(command: list[str], backend, options: ProxyOptions | None = None, *,
              listen: tuple[str, int] | None = None, hidden_env: tuple[str, ...] = (),
              secrets: tuple[str, ...] = ()) -> None:
    """Run the proxy until its client goes (stdio) or it is stopped (HTTP). `backend` is a
    synchronous Backend (adapters.backend); it is awaited through AsyncBackend. `listen` must be
    a loopback host (mcp_names.loopback_host; ProxyError otherwise): nobody is authenticated.
    `hidden_env` and `secrets`: as open_gateway's."""
    if listen is not None and not loopback_host(listen[0]):
        raise ProxyError(f"--listen {listen[0]}: the proxy authenticates no one, so it listens only on "
                         f"{', '.join(LOOPBACK_HOSTS)}")

    async def main() -> None:
        async with open_gateway(command, AsyncBackend(backend), options, hidden_env=hidden_env,
                                secrets=secrets) as gateway:
            if listen is None:
                await serve_stdio(gateway)
            else:
                host, port = listen

                def ready(bound: int) -> None:
                    print(f"countersign mcp-proxy: {gateway.server_name} at http://{host}:{bound}/mcp",
                          file=sys.stderr, flush=True)

                await serve_http(gateway, host, port, ready=ready)

    try:
        anyio.run(main)
    except BaseExceptionGroup as group:  # the SDK's task groups wrap what their bodies raise
        failure = _first(group, ProxyError)
        if failure is not None:
            raise failure from None
        raise


def _first(group: BaseExceptionGroup, kind: type[BaseException]) -> BaseException | None:
    for exc in group.exceptions:
        if isinstance(exc, kind):
            return exc
        if isinstance(exc, BaseExceptionGroup) and (found := _first(exc, kind)) is not None:
            return found
    return None

