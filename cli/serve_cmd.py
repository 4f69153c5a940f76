"""`countersign serve`: the approval service (service.app) over one ledger and one policy."""

from __future__ import annotations

from typing import Optional

import typer

from cli.output import EXIT_USAGE, fail


def serve(
    policy: str = typer.Option(..., "--policy", "-p", help="The .policy file that decides every call."),
    ledger: str = typer.Option(..., "--ledger", "-l", help="The ledger directory (created if missing)."),
    roster: str = typer.Option(..., "--roster", "-r", help="The roster (TOML): principals, their token hashes and keys."),
    key: str = typer.Option(..., "--key", "-k", help="The service's private key (`ledger keygen`): it signs every "
                            "decision made through the service; the roster lists its public key under a "
                            "principal of kind \"service\"."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8470, "--port", min=0, max=65535, help="TCP port."),
    public_url: str = typer.Option("", "--public-url", help="The address people reach the service at "
                                   "(for the links in notifications), e.g. https://approvals.example.com."),
    webhooks: Optional[str] = typer.Option(None, "--webhooks", help="Notify webhooks on interrupt, decision and "
                                           "expiry: a TOML file of \\[\\[webhook]] entries (docs/notifications.md)."),
    deliveries: Optional[str] = typer.Option(None, "--deliveries", help="Where every delivery attempt is recorded "
                                             "(JSON Lines; default: LEDGER/cache/deliveries.jsonl); the cursor of "
                                             "notifications sits beside it."),
    trust_snapshot: bool = typer.Option(False, "--trust-snapshot", help="Open from the Gate's snapshot instead of "
                                        "replaying and checking the whole ledger (every decision's signature) at "
                                        "start: only when the ledger's directory is out of every agent's reach."),
    ssl_certfile: Optional[str] = typer.Option(None, "--ssl-certfile", help="Serve HTTPS with this certificate (PEM)."),
    ssl_keyfile: Optional[str] = typer.Option(None, "--ssl-keyfile", help="The certificate's private key (PEM)."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn's log level: critical, error, warning, info, debug."),
) -> None:
    """Serve the approval API (/v1) and the reviewers' web inbox (/inbox) over one ledger.

    Agents authenticate with a roster token (`Authorization: Bearer ...`) and propose calls;
    reviewers list, read and decide requests; every decision is signed with --key. SIGHUP reloads
    the policy and the roster (both recorded in the ledger); SIGTERM stops after the requests in
    flight. docs/service.md describes the API; GET /v1/openapi.json is its OpenAPI document.

    Example: countersign serve --policy samples/retail.policy --ledger build/ledger --roster roster.toml --key service.key
    """
    import signal

    # cli.main lets SIGPIPE end a command quietly (`countersign ... | head`); a server must instead
    # outlive every client that hangs up mid-answer (the write then fails with EPIPE, handled).
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        from service.app import run
        from service.core import Service, ServiceError
    except ImportError as exc:
        fail(f"the service needs its extra packages ({exc.name} is missing): pip install 'countersign[serve]'", EXIT_USAGE)
    try:
        service = Service(policy=policy, ledger=ledger, roster=roster, key=key, public_url=public_url, trust_snapshot=trust_snapshot,
                          webhooks=webhooks, deliveries=deliveries)
    except ServiceError as exc:
        from cli.output import visible

        # a policy's diagnostics are several lines (file:line:col, the line, carets): each printed as such
        lines = [visible(line) for line in str(exc).splitlines()] or [""]
        typer.echo("\n".join([f"error: {lines[0]}", *lines[1:]]), err=True)
        raise typer.Exit(EXIT_USAGE)
    except OSError as exc:
        fail(f"{exc.filename or ledger}: {exc.strerror or exc}", EXIT_USAGE)
    import logging

    # the service's own lines (a reload, a tampered ledger, a failed delivery) beside uvicorn's
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(levelname)s:     %(message)s")
    typer.echo(f"countersign: serving {ledger} with policy {service.policy.name} on http://{host}:{port} "
               f"(the service signs as {service.loaded.principal.name})", err=True)
    run(service, host=host, port=port, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, log_level=log_level)
