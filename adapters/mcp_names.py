"""What the MCP proxy trusts the operator for: the server's name, the listening address, and the
wrapped server's environment (`countersign mcp-proxy`; docs/adapters/mcp-proxy.md).

No `mcp` import here: the CLI checks its options with these before it loads the SDK.

- `server_name(text)`: the `<server>` of `mcp__<server>__<tool>`, from the operator's
  `--server-name` only (never the server's own `serverInfo.name`: a third-party server would
  then choose the rules it is judged by). Characters other than letters, digits, `_` and `-`
  become `_` (Claude Code normalizes an `.mcp.json` key the same way, so its hook and the proxy
  name a tool alike); a name that is empty, holds `__`, or ends with `_` is refused (ValueError):
  `github__x` or `github_` would put its tools inside `mcp__github__*`.
- `tool_name_refused(name)`: why a tool the wrapped server lists is never offered or proposed
  (a name holding `__` can pose as another namespace: `mcp__github__merge` under
  `--bare-tool-names`), else None.
- `loopback_host(host)`: whether `--listen` may bind there: only 127.0.0.1, localhost and ::1,
  the hosts for which the mcp SDK (mcp/server/lowlevel/server.py, `streamable_http_app`) turns on
  its Host / Origin check against DNS rebinding. The listener authenticates no one.
- `server_environment(environ, hidden, secrets)`: the wrapped server's environment: the proxy's
  own minus every `COUNTERSIGN_*` variable, the variables named in `hidden` (the `--token-env`
  one; names compared without case) and any variable holding one of `secrets` (the token).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

OUR_PREFIX = "COUNTERSIGN_"  # every variable of ours (adapters.backend.ENVIRONMENT and the rest)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def server_name(text: str | None) -> str:
    """The cleaned server name (see the module's docstring). Raises ValueError when missing or
    when it could land in another server's namespace."""
    if text is None or not text.strip():
        raise ValueError("the MCP server needs a name from you (--server-name NAME: the key of its entry in "
                         ".mcp.json); the name the server gives itself is never used")
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", text.strip())
    if "__" in cleaned or cleaned.endswith("_"):
        raise ValueError(f"the server name {text!r} (as {cleaned!r}) holds '__' or ends with '_', so its tools "
                         f"would fall under another server's mcp__<server>__ names; choose another")
    return cleaned


def tool_name_refused(name: str) -> str | None:
    """Why this tool name is refused, or None when it may be offered and proposed."""
    if "__" in name:
        return "its name holds '__', which could name a tool of another server (mcp__<server>__<tool>)"
    return None


def loopback_host(host: str) -> bool:
    """Exactly one of LOOPBACK_HOSTS (spelled as the SDK compares them: `LOCALHOST` or
    127.0.0.2 would be loopback, but unprotected against DNS rebinding)."""
    return host in LOOPBACK_HOSTS


def server_environment(environ: Mapping[str, str], hidden: Iterable[str] = (),
                       secrets: Iterable[str] = ()) -> dict[str, str]:
    """`environ` without countersign's variables (see the module's docstring), and without any
    variable whose value is one of `secrets` (the agent's token, under whatever other name)."""
    names = {name.upper() for name in hidden if name}
    values = {value for value in secrets if value}
    return {key: value for key, value in environ.items()
            if not key.upper().startswith(OUR_PREFIX) and key.upper() not in names and value not in values}
