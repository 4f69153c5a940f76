"""A local stand-in for the Anthropic Messages API, for driving the real Claude Code CLI in tests
(no network, no key): a threaded HTTP server on 127.0.0.1 that answers `POST /v1/messages`
with scripted assistant turns, and records every request it got.

    script = [[tool_use("Read", {"file_path": "/p/a.txt"})], [text("done")]]
    with StandIn(script) as api:
        env = api.cli_env(home)        # ANTHROPIC_BASE_URL, a dummy key, telemetry off ...
        ... run `claude -p ...` or the Agent SDK with env ...
    api.tool_results()                 # {tool_use_id: (is_error, text)} as the model saw them

    # or the CLI alone, with command hooks from a settings file:
    status, lines, stderr = run_cli(api, project, home, "--settings", str(hook_settings(path, "my-hook")))

Which turn answers a request: the number of assistant messages already in its `messages` (the
CLI sends the whole conversation each time), so the n-th model call of the main conversation gets
script[n]; past the end of the script, and for a request that offers no tools (a side query such
as a title), the answer is a short text that ends the turn.

The wire format is the Messages API's (https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/api/messages-streaming): with `"stream": true` (the CLI 2.1 asks
for it) a `text/event-stream` of message_start, content_block_start / content_block_delta
(text_delta, input_json_delta) / content_block_stop per block, message_delta with the
stop_reason, message_stop; otherwise one JSON message. `POST /v1/messages/count_tokens` answers
a fixed count; every other path 404.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from pathlib import Path
from typing import Any

MODEL = "claude-stand-in"

CLI_SWITCHES = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, update checks
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}
"""The CLI's environment switches for an offline run (Claude Code's settings documentation,
"Environment variables")."""

_ids = count(1)


def text(value: str) -> dict:
    """An assistant text block."""
    return {"type": "text", "text": value}


def tool_use(name: str, arguments: dict, tool_use_id: str | None = None) -> dict:
    """An assistant tool_use block; its id is unique in this process unless given."""
    return {"type": "tool_use", "id": tool_use_id or f"toolu_standin_{os.getpid()}_{next(_ids):04d}",
            "name": name, "input": arguments}


class StandIn:
    """The server (a context manager): `url`, `requests` (every JSON body, in order),
    `script` (a list of turns, each a list of blocks made by `text` / `tool_use`)."""

    def __init__(self, script: list[list[dict]]):
        self.script = script
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                stand_in._record(self.path, None)
                self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"stand-in"}}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                stand_in._record(self.path, body)
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    self._send(200, "application/json", b'{"input_tokens": 10}')
                elif path == "/v1/messages" and isinstance(body, dict):
                    blocks = stand_in.answer(body)
                    if body.get("stream"):
                        self._stream(blocks)
                    else:
                        self._send(200, "application/json", json.dumps(_message(blocks, done=True)).encode())
                else:
                    self.do_GET()

            def _send(self, status: int, kind: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, blocks: list[dict]) -> None:
                chunks = []

                def event(kind: str, data: dict) -> None:
                    chunks.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())

                event("message_start", {"type": "message_start", "message": _message([], done=False)})
                for index, block in enumerate(blocks):
                    if block["type"] == "text":
                        event("content_block_start", {"type": "content_block_start", "index": index,
                                                      "content_block": {"type": "text", "text": ""}})
                        event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                      "delta": {"type": "text_delta", "text": block["text"]}})
                    else:
                        event("content_block_start", {"type": "content_block_start", "index": index,
                                                      "content_block": {**block, "input": {}}})
                        event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                      "delta": {"type": "input_json_delta",
                                                                "partial_json": json.dumps(block["input"])}})
                    event("content_block_stop", {"type": "content_block_stop", "index": index})
                event("message_delta", {"type": "message_delta",
                                        "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
                                        "usage": {"output_tokens": 5}})
                event("message_stop", {"type": "message_stop"})
                payload = b"".join(chunks)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def _record(self, path: str, body: Any) -> None:
        with self._lock:
            self.paths.append(path)
            if isinstance(body, dict):
                self.requests.append(body)

    def answer(self, body: dict) -> list[dict]:
        """The blocks of the turn this request gets (see the module's docstring)."""
        if not body.get("tools"):
            return [text("ok")]
        turn = sum(1 for m in body.get("messages") or () if m.get("role") == "assistant")
        return self.script[turn] if turn < len(self.script) else [text("done")]

    def tool_results(self) -> dict[str, tuple[bool, str]]:
        """Every tool_result the CLI sent back to the model: tool_use_id → (is_error, its text)."""
        found: dict[str, tuple[bool, str]] = {}
        with self._lock:
            bodies = list(self.requests)
        for body in bodies:
            for message in body.get("messages") or ():
                content = message.get("content")
                for block in content if isinstance(content, list) else ():
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        found[block["tool_use_id"]] = (bool(block.get("is_error")), _text_of(block.get("content")))
        return found

    def cli_env(self, home: Path) -> dict[str, str]:
        """The environment for the CLI: this server, a dummy key, the offline switches, and a
        HOME / CLAUDE_CONFIG_DIR of the test's own (the CLI writes its state there)."""
        home.mkdir(parents=True, exist_ok=True)
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "sk-ant-stand-in-not-a-key",
                "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), **CLI_SWITCHES}

    def __enter__(self) -> "StandIn":
        self._thread = threading.Thread(target=self._server.serve_forever, name="anthropic-stand-in", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _message(blocks: list[dict], *, done: bool) -> dict:
    return {"id": f"msg_standin_{next(_ids):04d}", "type": "message", "role": "assistant", "model": MODEL,
            "content": blocks, "stop_reason": _stop_reason(blocks) if done else None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5 if done else 1}}


def _stop_reason(blocks: list[dict]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def hook_settings(path: Path, command: str, events=("PreToolUse", "PostToolUse", "PostToolUseFailure")) -> Path:
    """Write a Claude Code settings file at `path` that runs `command` (a shell command line) as
    the hook of every tool for each of `events` (Claude Code's hooks documentation: "hooks" →
    event → [{"matcher", "hooks": [{"type": "command", "command"}]}]). Returns `path`."""
    entry = [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
    path.write_text(json.dumps({"hooks": {event: entry for event in events}}))
    return path


def run_cli(api: StandIn, cwd: Path, home: Path, *args: str, prompt: str = "go", timeout: float = 120,
            env: dict | None = None) -> tuple[int, list[dict], str]:
    """Run the bundled `claude -p PROMPT --output-format stream-json --verbose ARGS...` (for
    example `--settings FILE`) in `cwd` against the stand-in: (exit status, the JSON lines it
    printed, its stderr). Raises FileNotFoundError when no bundled CLI is installed."""
    import subprocess

    cli = bundled_cli()
    if cli is None:
        raise FileNotFoundError("claude-agent-sdk's bundled claude CLI is not installed")
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **api.cli_env(home), **(env or {})}
    done = subprocess.run([str(cli), "-p", prompt, "--output-format", "stream-json", "--verbose", *args],
                          cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout)
    lines = []
    for line in done.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    return done.returncode, lines, done.stderr


def bundled_cli() -> Path | None:
    """The `claude` executable the installed claude-agent-sdk bundles, or None."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return path if path.is_file() and os.access(path, os.X_OK) else None
