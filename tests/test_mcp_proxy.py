"""`countersign mcp-proxy` (adapters/mcp_proxy.py) against a small MCP server written here.

The server (MCPServer from the `mcp` SDK, in a file this test writes) has read_file, send_email,
delete_all and crash; the policy allows read_file, denies delete_all, asks for send_email. An MCP
client (the SDK's ClientSession over stdio) starts `python -m cli.main mcp-proxy ... -- python
server.py`, lists the tools, reads a resource through the proxy, and calls: an allowed call, a
denied one, an unknown tool, and four asks a reviewer (a reviewer's Gate on the same ledger, in
this process) decides approve / edit / reject / respond; then one the client gives up on (its
cancellation withdraws the request), and a crash of the server. The ledger verifies and the
DuckDB `requests` view tells the same story as the client saw. Over streamable HTTP
(`--listen 127.0.0.1:PORT`): one allowed call, and an ask no one answers within --ask-timeout.
In-process (a Gateway over a stand-in upstream): JSON-RPC ids 1 and "1" are two calls; a tool
whose name holds `__` is neither listed nor proposed; the server's name comes from the
operator only. Through the service: the server's environment holds none of countersign's
variables nor the agent's token.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from mcp import types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from dsl import Policy  # noqa: E402
from ledger import Gate, verify  # noqa: E402
from ledger.analytics.views import query  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

SERVER = textwrap.dedent('''
    import json, os, sys
    from mcp.server.mcpserver import MCPServer

    if os.environ.get("DUMP_ENV_TO"):  # what the proxy let through to the server
        with open(os.environ["DUMP_ENV_TO"], "w") as out:
            json.dump(dict(os.environ), out)

    server = MCPServer("files", instructions="A small file and mail server for the proxy's tests.")
    SENT = []

    @server.tool()
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    @server.tool()
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        SENT.append(to)
        return f"sent to {to}: {body}"

    @server.tool()
    def delete_all() -> str:
        """Delete everything."""
        raise SystemExit("delete_all must never run")

    @server.tool()
    def crash() -> str:
        """Exit at once."""
        os._exit(3)

    @server.resource("memo://readme")
    def readme() -> str:
        return "the readme"

    if __name__ == "__main__":
        server.run()
''')

POLICY = textwrap.dedent('''
    policy "mcp-proxy-test"
    default deny "No rule covers this tool."

    allow mcp__files__read_file
    allow mcp__files__crash
    deny mcp__files__delete_all
      reason "Deleting everything is never allowed."
    ask mcp__files__send_email
      reason "A person reads every email before it goes."
      decisions approve, edit, reject, respond
      timeout 1h
''')

REVIEWER = "reviewer-1"


@pytest.fixture()
def setup(tmp_path):
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "test.policy").write_text(POLICY)
    return tmp_path


def proxy_command(tmp: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "mcp-proxy", "--policy", str(tmp / "test.policy"),
            "--ledger", str(tmp / "ledger"), "--server-name", "files", "--proposer", "agent-1", *extra,
            "--", sys.executable, str(tmp / "server.py")]


def proxy_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COUNTERSIGN_PROPOSER": ""}


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def decide_next(ledger: Path, decision: str, **kwargs) -> int:
    """As a reviewer would from `countersign review`: wait for the pending ask, then decide it."""
    with Gate(Policy.load(ledger.parent / "test.policy"), ledger) as gate:  # an edit is decided again
        for _ in range(500):
            pending = gate.pending()
            if pending:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("no ask reached the queue")
        state = pending[0]
        gate.decide(state.request, decision, by=REVIEWER, digest=state.digest, **kwargs)
        return state.request


async def ask_and_decide(session: ClientSession, ledger: Path, call_args: dict, decision: str, **kwargs):
    results = {}

    async def call() -> None:
        results["result"] = await session.call_tool("send_email", call_args)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        results["request"] = await anyio.to_thread.run_sync(lambda: decide_next(ledger, decision, **kwargs))
    return results["result"], results["request"]


def requests_view(ledger: Path) -> dict[int, dict]:
    columns, rows = query(ledger, "SELECT request, tool, run, call_id, proposer, effect, status, decision, "
                                  "decided_by, reason, edited, outcome, result_digest, error FROM requests ORDER BY request")
    return {row[0]: dict(zip(columns, row)) for row in rows}


def test_stdio_proxy_decides_every_call(setup):
    tmp, ledger = setup, setup / "ledger"
    params = StdioServerParameters(command=sys.executable, args=proxy_command(setup, "--ask-timeout", "30",
                                                                         "--progress-every", "0.2")[1:],
                                   env=proxy_env(), cwd=str(ROOT))
    seen: dict[str, object] = {}

    async def client() -> None:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                seen["init"] = init
                seen["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
                seen["resource"] = (await session.read_resource("memo://readme")).contents[0].text
                seen["allowed"] = await session.call_tool("read_file", {"path": "/etc/motd"})
                seen["denied"] = await session.call_tool("delete_all", {})
                seen["unknown"] = await session.call_tool("format_disk", {})
                seen["approve"] = await ask_and_decide(session, ledger, {"to": "a@example.com", "body": "hi"}, "approve")
                seen["edit"] = await ask_and_decide(session, ledger, {"to": "b@example.com", "body": "hi"}, "edit",
                                                    args={"to": "b@example.com", "body": "hello, edited"})
                seen["reject"] = await ask_and_decide(session, ledger, {"to": "c@example.com", "body": "hi"}, "reject",
                                                      reason="Not to customers on a Friday.")
                seen["respond"] = await ask_and_decide(session, ledger, {"to": "d@example.com", "body": "hi"}, "respond",
                                                       message="Draft it instead; I will send it myself.")
                # the client gives up waiting (its timeout sends notifications/cancelled): the ask is withdrawn
                progress: list[str] = []

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append(message or "")

                with pytest.raises(Exception):
                    await session.call_tool("send_email", {"to": "e@example.com", "body": "hi"}, read_timeout_seconds=1.0,
                                            progress_callback=on_progress)
                seen["progress"] = progress
                for _ in range(200):  # the withdrawal lands shortly after
                    if any(r["status"] == "cancelled" for r in requests_view(ledger).values()):
                        break
                    await anyio.sleep(0.05)
                seen["crash"] = await session.call_tool("crash", {})
                seen["after_crash"] = await session.call_tool("read_file", {"path": "/x"})

    anyio.run(client)

    init = seen["init"]
    assert init.server_info.name == "files" and "file and mail server" in (init.instructions or "")
    assert init.capabilities.tools is not None and init.capabilities.resources is not None
    assert seen["tools"] == ["crash", "delete_all", "read_file", "send_email"]
    assert seen["resource"] == "the readme"

    allowed = seen["allowed"]
    assert not allowed.is_error and text_of(allowed) == "contents of /etc/motd"
    assert allowed.structured_content == {"result": "contents of /etc/motd"}

    denied = seen["denied"]
    assert denied.is_error and "Deleting everything is never allowed." in text_of(denied)
    assert denied.meta["countersign"]["effect"] == "deny"

    unknown = seen["unknown"]
    assert unknown.is_error and "no tool named 'format_disk'" in text_of(unknown)

    approved, approve_request = seen["approve"]
    assert not approved.is_error and text_of(approved) == "sent to a@example.com: hi"
    edited, edit_request = seen["edit"]
    assert not edited.is_error and text_of(edited) == "sent to b@example.com: hello, edited"
    rejected, reject_request = seen["reject"]
    assert rejected.is_error and "Not to customers on a Friday." in text_of(rejected)
    responded, respond_request = seen["respond"]
    assert responded.is_error and text_of(responded) == "Draft it instead; I will send it myself."
    assert responded.meta["countersign"]["decision"] == "respond"

    # while the abandoned ask waited, the client that asked for progress heard why
    assert seen["progress"] and all(m.startswith("waiting for a reviewer: countersign request") for m in seen["progress"])

    crash = seen["crash"]
    assert crash.is_error and "failed while running" in text_of(crash)
    assert seen["after_crash"].is_error  # the server is gone: nothing is forwarded, every call is an error

    # the ledger: lawful, and the views tell what the client saw
    report = verify(ledger)
    assert report.ok, report
    rows = requests_view(ledger)
    by_tool: dict[str, list[dict]] = {}
    for row in rows.values():
        by_tool.setdefault(row["tool"], []).append(row)
    assert "mcp__files__format_disk" not in by_tool  # an unknown tool is refused before it is proposed
    runs = {row["run"] for row in rows.values()}
    assert len(runs) == 1  # one run per client session
    run = runs.pop()
    assert all(row["call_id"].startswith(run + "#") for row in rows.values())
    assert len({row["call_id"] for row in rows.values()}) == len(rows)
    assert {row["proposer"] for row in rows.values()} == {"agent-1"}

    (read1, read2) = by_tool["mcp__files__read_file"]
    assert (read1["effect"], read1["status"], read1["outcome"]) == ("allow", "executed", "ok")
    assert read1["result_digest"]
    (delete,) = by_tool["mcp__files__delete_all"]
    assert (delete["effect"], delete["status"], delete["outcome"]) == ("deny", "denied", None)
    emails = {row["request"]: row for row in by_tool["mcp__files__send_email"]}
    assert (emails[approve_request]["status"], emails[approve_request]["decision"], emails[approve_request]["outcome"]) == ("executed", "approve", "ok")
    assert emails[approve_request]["decided_by"] == REVIEWER
    assert emails[edit_request]["edited"] and emails[edit_request]["outcome"] == "ok"
    assert (emails[reject_request]["status"], emails[reject_request]["reason"]) == ("rejected", "Not to customers on a Friday.")
    assert (emails[respond_request]["status"], emails[respond_request]["reason"]) == ("responded", "Draft it instead; I will send it myself.")
    (cancelled,) = [row for row in emails.values() if row["status"] == "cancelled"]
    assert cancelled["decision"] == "cancel" and "cancelled" in cancelled["reason"]
    (crashed,) = by_tool["mcp__files__crash"]
    assert (crashed["status"], crashed["outcome"]) == ("executed", "error") and "failed" in crashed["error"]
    assert (read2["status"], read2["outcome"]) == ("executed", "error")  # the server was gone

    # the edited call ran with the edited arguments: the kept digest is of what ran
    with Gate(None, ledger) as gate:
        assert gate.get(edit_request).status == "executed"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_proxy(setup):
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    process = subprocess.Popen(proxy_command(setup, "--listen", f"127.0.0.1:{port}", "--ask-timeout", "0.5",
                                             "--keep-results"),
                               cwd=ROOT, env=proxy_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and "http://" not in line:  # the proxy says where it listens
            line = process.stderr.readline()
            if not line and process.poll() is not None:
                raise AssertionError(f"the proxy exited with {process.returncode}")
        assert f"http://127.0.0.1:{port}/mcp" in line
        seen: dict[str, object] = {}

        async def client() -> None:
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    seen["allowed"] = await session.call_tool("read_file", {"path": "/srv/a"})
                    seen["timed_out"] = await session.call_tool("send_email", {"to": "x@example.com", "body": "hi"})

        anyio.run(client)
    finally:
        process.terminate()  # SIGTERM: the proxy stops its server and exits 0
        try:
            status = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            status = process.wait()
        process.stderr.close()
    assert status == 0

    assert not seen["allowed"].is_error and text_of(seen["allowed"]) == "contents of /srv/a"
    timed_out = seen["timed_out"]
    assert timed_out.is_error and "No reviewer decided within 0.5 s" in text_of(timed_out)
    assert timed_out.meta["countersign"]["timed_out"] is True
    assert verify(setup / "ledger").ok
    rows = list(requests_view(setup / "ledger").values())
    assert [(r["tool"], r["status"], r["outcome"]) for r in rows] == [
        ("mcp__files__read_file", "executed", "ok"), ("mcp__files__send_email", "cancelled", None)]
    with Gate(None, setup / "ledger") as gate:  # --keep-results: the result itself is in the ledger
        kept = gate.result(rows[0]["request"])
        assert kept.result_kept and kept.result["content"][0]["text"] == "contents of /srv/a"


def test_cli_refuses_what_it_cannot_run(setup, tmp_path):
    base = [sys.executable, "-m", "cli.main", "mcp-proxy"]
    run = lambda *args: subprocess.run([*base, *args], cwd=ROOT, env=proxy_env(), capture_output=True, text=True,
                                       stdin=subprocess.DEVNULL, timeout=60)
    named = ("--server-name", "files")
    no_backend = run(*named, "--", sys.executable, str(setup / "server.py"))
    assert no_backend.returncode == 2 and "--policy and --ledger" in no_backend.stderr
    bad = tmp_path / "bad.policy"
    bad.write_text("allow\n")
    bad_policy = run("--policy", str(bad), "--ledger", str(tmp_path / "l"), *named, "--", sys.executable, "x.py")
    assert bad_policy.returncode == 2 and "error:" in bad_policy.stderr and "server-name" not in bad_policy.stderr
    no_token = run("--url", "http://127.0.0.1:9", "--token-env", "NO_SUCH_TOKEN_VAR", *named, "--", "true")
    assert no_token.returncode == 2 and "NO_SUCH_TOKEN_VAR" in no_token.stderr
    no_server = run("--policy", str(setup / "test.policy"), "--ledger", str(tmp_path / "l2"), *named, "--",
                    str(tmp_path / "no-such-server"))
    assert no_server.returncode == 1 and "cannot start" in no_server.stderr
    not_mcp = run("--policy", str(setup / "test.policy"), "--ledger", str(tmp_path / "l2"), *named, "--", "true")
    assert not_mcp.returncode == 1 and "did not initialize" in not_mcp.stderr.splitlines()[-1]
    # refused before anything starts (in process: CliRunner, as fast as a usage error should be)
    from typer.testing import CliRunner

    from cli.main import app

    local = ("mcp-proxy", "--policy", str(setup / "test.policy"), "--ledger", str(tmp_path / "l3"))
    refuse = lambda *args: CliRunner().invoke(app, [*local, *args, "--", str(tmp_path / "no-such-server")])
    # the policy judges a server by the operator's name for it, never the server's own
    unnamed = refuse()
    assert unnamed.exit_code == 2 and "--server-name" in unnamed.output
    for name in ("github__admin", "github_", "git..hub", " "):
        refused = refuse("--server-name", name)
        assert refused.exit_code == 2 and "error:" in refused.output, name
    # an unauthenticated listener: loopback only
    for address in ("0.0.0.0:0", "[::]:0", "192.168.1.10:8765", "127.0.0.2:8765", "LOCALHOST:8765"):
        refused = refuse(*named, "--listen", address)
        assert refused.exit_code == 2 and "loopback" in refused.output, (address, refused.output)
    assert not (tmp_path / "l3").exists()


def test_proxy_through_the_approval_service(setup, tmp_path):
    """--url and --token-env: the proxy proposes through `countersign serve` as the roster's
    agent; a reviewer approves the ask through the service with a reviewer's token."""
    from service_process import Server
    from service_support import setup as service_setup

    from adapters.backend import ServiceBackend

    svc = service_setup(tmp_path / "svc", POLICY.replace("ask mcp__files__send_email",
                                                          "ask mcp__files__send_email\n  approvers 1 from [\"alice\"]"))
    with Server(svc) as server:
        dump = tmp_path / "server-env.json"
        env = {**proxy_env(), "AGENT_TOKEN": svc.tokens["agent-1"], "ALSO_THE_TOKEN": svc.tokens["agent-1"],
               "COUNTERSIGN_URL": server.url, "COUNTERSIGN_HOOK_SECRET": "s3cret", "DUMP_ENV_TO": str(dump),
               "A_SERVER_SETTING": "kept"}
        params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env, args=[
            "-m", "cli.main", "mcp-proxy", "--url", server.url, "--token-env", "AGENT_TOKEN", "--server-name", "files",
            "--", sys.executable, str(setup / "server.py")])
        reviewer = ServiceBackend(server.url, svc.tokens["agent-1"], reviewer_token=svc.tokens["alice"])
        seen = {}

        def approve_next() -> int:
            with Gate(None, svc.ledger) as gate:  # reads the queue; the decision goes through the service
                for _ in range(500):
                    if pending := gate.pending():
                        break
                    time.sleep(0.02)
                else:
                    raise AssertionError("no ask reached the queue")
            settled = reviewer.decide(pending[0].request, "approve", digest=pending[0].digest)
            assert settled.status == "approved" and settled.decided_by == "alice"
            return pending[0].request

        async def client() -> None:
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    seen["allowed"] = await session.call_tool("read_file", {"path": "/a"})
                    seen["denied"] = await session.call_tool("delete_all", {})

                    async def ask() -> None:
                        seen["asked"] = await session.call_tool("send_email", {"to": "z@example.com", "body": "hi"})

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(ask)
                        seen["request"] = await anyio.to_thread.run_sync(approve_next)

        try:
            anyio.run(client)
        finally:
            reviewer.close()
    assert text_of(seen["allowed"]) == "contents of /a"
    assert seen["denied"].is_error and "Deleting everything is never allowed." in text_of(seen["denied"])
    assert not seen["asked"].is_error and text_of(seen["asked"]) == "sent to z@example.com: hi"
    assert verify(svc.ledger).ok
    rows = list(requests_view(svc.ledger).values())
    assert [(r["tool"], r["proposer"], r["status"], r["outcome"]) for r in rows] == [
        ("mcp__files__read_file", "agent-1", "executed", "ok"),
        ("mcp__files__delete_all", "agent-1", "denied", None),
        ("mcp__files__send_email", "agent-1", "executed", "ok")]
    assert rows[2]["decided_by"] == "alice"
    # the wrapped server got the proxy's environment without countersign's variables and the token
    server_env = json.loads(dump.read_text())
    assert server_env["A_SERVER_SETTING"] == "kept" and server_env["PATH"]
    assert not [key for key in server_env if key.upper().startswith("COUNTERSIGN_")]
    assert "AGENT_TOKEN" not in server_env and svc.tokens["agent-1"] not in server_env.values()


# --- in process: a Gateway over a stand-in upstream ----------------------------------------------

class StandIn:
    """The wrapped server, as far as the Gateway sees it: lists `names`, runs every call it gets."""

    def __init__(self, names: list[str]):
        self.tools = [types.Tool(name=name, input_schema={"type": "object"}) for name in names]
        self.calls: list[tuple[str, dict]] = []

    async def list_tools(self, params=None):
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(self, name, args, progress_callback=None):
        self.calls.append((name, args))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"ran {name}")])


class Request:
    """What the Gateway reads of the SDK's request context: the JSON-RPC id (no session: one run)."""

    def __init__(self, request_id):
        self.request_id, self.session = request_id, None


def gateway_for(tmp_path: Path, names: list[str], **options):
    from adapters.backend import AsyncBackend, LocalBackend
    from adapters.mcp_proxy import Gateway, ProxyOptions

    # the extra rules would allow the `__` tools: refusing them is the proxy's doing, not the policy's
    gate = Gate(Policy.from_text(POLICY + "allow mcp__files__*\nallow x__y\n", "t.policy"), tmp_path / "ledger")
    init = types.InitializeResult(protocol_version="2025-06-18", capabilities=types.ServerCapabilities(
        tools=types.ToolsCapability()), server_info=types.Implementation(name="github", version="1"))
    upstream = StandIn(names)
    gateway = Gateway(upstream, init, AsyncBackend(LocalBackend(gate, "agent-1")),
                      ProxyOptions(server_name="files", **options))
    return gateway, upstream, gate


def test_json_rpc_ids_1_and_the_string_1_are_two_calls(tmp_path):
    gateway, upstream, gate = gateway_for(tmp_path, ["read_file"])

    async def main():
        return [await gateway.call_tool(Request(rid), types.CallToolRequestParams(name="read_file",
                                                                                  arguments={"path": "/a"}))
                for rid in (1, "1")]

    try:
        results = anyio.run(main)
    finally:
        gate.close()
    assert [text_of(r) for r in results] == ["ran read_file", "ran read_file"]
    assert len(upstream.calls) == 2  # neither is taken for a repeat of the other
    call_ids = sorted(row["call_id"] for row in requests_view(tmp_path / "ledger").values())
    run = f"mcp-{gateway.process_run}"
    assert call_ids == sorted([f"{run}#1", f'{run}#"1"'])


@pytest.mark.parametrize("bare", [False, True])
def test_a_tool_name_holding_a_double_underscore_is_never_offered_or_proposed(tmp_path, bare):
    gateway, upstream, gate = gateway_for(tmp_path, ["read_file", "x__y", "mcp__github__merge"],
                                          bare_tool_names=bare)

    async def main():
        listed = await gateway.list_tools(Request(1), None)
        calls = [await gateway.call_tool(Request(i), types.CallToolRequestParams(name=name, arguments={}))
                 for i, name in enumerate(["x__y", "mcp__github__merge"], 2)]
        return listed, calls

    try:
        listed, calls = anyio.run(main)
    finally:
        gate.close()
    assert [tool.name for tool in listed.tools] == ["read_file"]
    assert all(r.is_error and "'__'" in text_of(r) and r.meta["countersign"]["status"] == "refused_name" for r in calls)
    assert upstream.calls == []
    assert requests_view(tmp_path / "ledger") == {}  # refused before it is proposed


def test_the_server_name_comes_from_the_operator_only():
    from adapters.mcp_names import server_name
    from adapters.mcp_proxy import Gateway, ProxyError, ProxyOptions

    init = types.InitializeResult(protocol_version="2025-06-18", capabilities=types.ServerCapabilities(),
                                  server_info=types.Implementation(name="files", version="1"))
    with pytest.raises(ProxyError, match="--server-name"):
        Gateway(None, init, None, ProxyOptions())
    for name in ("github__admin", "github_", "a..b", "", "  "):
        with pytest.raises(ValueError):
            server_name(name)
        with pytest.raises(ProxyError):
            Gateway(None, init, None, ProxyOptions(server_name=name))
    assert server_name("my.files") == "my_files" and server_name("_files-2") == "_files-2"
    gateway = Gateway(None, init, None, ProxyOptions(server_name="docs"))
    assert gateway.ledger_tool("read") == "mcp__docs__read"
