"""`countersign mcp-proxy`: countersign in front of an MCP server (adapters.mcp_proxy).

The `mcp` SDK is imported only when the command runs, so `countersign --help` stays fast and the
rest of the CLI works without the `mcp` extra."""

from __future__ import annotations

import os
from typing import List, Optional

import typer

from adapters.mcp_names import LOOPBACK_HOSTS, loopback_host
from adapters.mcp_names import server_name as checked_server_name
from cli.output import EXIT_USAGE, fail, visible


def _listen_address(text: str) -> tuple[str, int]:
    """HOST:PORT, HOST one of the loopback hosts (exit 2 otherwise: the listener authenticates no one)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"--listen takes HOST:PORT (e.g. 127.0.0.1:8765), not {text!r}", EXIT_USAGE)
    host = host.strip("[]")
    if not loopback_host(host):
        fail(f"--listen {text}: the proxy authenticates no one, so it listens only on loopback "
             f"({', '.join(LOOPBACK_HOSTS)}), not on {host!r}", EXIT_USAGE)
    return host, int(port)


def mcp_proxy(
    command: List[str] = typer.Argument(..., metavar="-- SERVER_COMMAND...",
                                        help="The MCP server to start (over stdio), after `--`."),
    policy: Optional[str] = typer.Option(None, "--policy", "-p", help="The .policy file that decides every "
                                         "tools/call (with --ledger)."),
    ledger: Optional[str] = typer.Option(None, "--ledger", "-l", help="The ledger directory (created if missing)."),
    url: Optional[str] = typer.Option(None, "--url", help="The approval service (`countersign serve`) instead of a "
                                      "local ledger, with the agent's token in --token-env."),
    token_env: str = typer.Option("COUNTERSIGN_TOKEN", "--token-env", help="The environment variable holding the "
                                  "agent's token for --url (never the token itself on the command line)."),
    proposer: Optional[str] = typer.Option(None, "--proposer", help="Who proposes, for a local ledger (default: "
                                           "$COUNTERSIGN_PROPOSER, else mcp-proxy/<server>; not your own account, "
                                           "which could then not approve the agent's calls)."),
    server_name: Optional[str] = typer.Option(None, "--server-name", help="Required: the server's name in the tool "
                                              "names the policy sees, mcp__<server>__<tool> (use the key of .mcp.json "
                                              "so Claude Code's hook and the proxy agree; never taken from the server)."),
    bare_tool_names: bool = typer.Option(False, "--bare-tool-names", help="Propose the tool's own name, without "
                                         "mcp__<server>__."),
    ask_timeout: float = typer.Option(55.0, "--ask-timeout", min=0, help="Seconds an asked call waits for a "
                                      "reviewer; then it is withdrawn and does not run (below your client's own "
                                      "request timeout, 60 s in most clients)."),
    progress_every: float = typer.Option(10.0, "--progress-every", min=0.05, help="Seconds between the progress "
                                         "notifications a waiting ask sends to a client that asked for progress."),
    keep_results: bool = typer.Option(False, "--keep-results", help="Record each tool's result itself in the "
                                      "ledger, not only its digest (results without personal data only)."),
    listen: Optional[str] = typer.Option(None, "--listen", help="Serve streamable HTTP at HOST:PORT (path /mcp) "
                                         "instead of stdio. No authentication: HOST must be 127.0.0.1, localhost or ::1."),
) -> None:
    """Put countersign in front of an MCP server: every tools/call is decided by the policy
    (allow forwards it, deny answers with the reason, ask waits for `countersign review`) and
    recorded in the ledger with its outcome; everything else passes through.

    The server runs without countersign's variables (COUNTERSIGN_*, the --token-env one, any
    holding the token).

    Example: countersign mcp-proxy --policy team.policy --ledger ~/.countersign/ledger --server-name files -- npx -y @modelcontextprotocol/server-filesystem ~/work
    """
    address = _listen_address(listen) if listen else None
    if url and (policy or ledger):
        fail("give --url (the service) or --policy and --ledger (a local ledger), not both", EXIT_USAGE)
    if not url and not (policy and ledger):
        fail("give --policy and --ledger (a local ledger), or --url (the approval service)", EXIT_USAGE)
    token = os.environ.get(token_env) if url else None
    if url and not token:
        fail(f"--url needs the agent's token in the environment variable {token_env}", EXIT_USAGE)
    try:
        server = checked_server_name(server_name)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    from adapters.backend import BackendError, LocalBackend, ServiceBackend
    from ledger.store.log import LedgerError

    try:
        if url:
            backend = ServiceBackend(url, token)
        else:
            from dsl import Policy, PolicyError
            from ledger import Gate

            try:
                loaded = Policy.load(policy)
            except PolicyError as exc:
                lines = [visible(line) for line in str(exc).splitlines()] or [""]
                typer.echo("\n".join([f"error: {lines[0]}", *lines[1:]]), err=True)
                raise typer.Exit(EXIT_USAGE)
            except OSError as exc:
                fail(f"{policy}: {exc.strerror or exc}", EXIT_USAGE)
            name = (proposer or os.environ.get("COUNTERSIGN_PROPOSER")
                    or "mcp-proxy/" + server)
            backend = LocalBackend(Gate(loaded, ledger, pin_policy=True), name)
    except BackendError as exc:
        fail(exc.message, EXIT_USAGE)
    except LedgerError as exc:
        fail(f"{ledger}: {exc}", EXIT_USAGE)
    except OSError as exc:
        fail(f"{exc.filename or ledger}: {exc.strerror or exc}", EXIT_USAGE)
    try:
        from adapters.mcp_proxy import ProxyError, ProxyOptions, run_proxy
    except ImportError as exc:
        backend.close()
        fail(f"mcp-proxy needs the mcp package ({exc.name} is missing): pip install 'countersign[mcp]'", EXIT_USAGE)
    import logging

    logging.basicConfig(level=logging.WARNING, format="countersign mcp-proxy: %(levelname)s: %(message)s")
    options = ProxyOptions(server_name=server, bare_tool_names=bare_tool_names, ask_timeout=ask_timeout,
                           progress_seconds=progress_every, keep_results=keep_results)
    try:
        run_proxy(list(command), backend, options, listen=address, hidden_env=(token_env,) if url else (),
                  secrets=(token,) if token else ())
    except ProxyError as exc:
        fail(str(exc), 1)
    except KeyboardInterrupt:
        pass
    finally:
        backend.close()
