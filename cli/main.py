"""The `countersign` console script."""

import typer

from cli.output import EXIT_INTERRUPTED, interrupt_reported
from cli import (checkpoint_cmd, hook_cmd, import_cmd, ledger_cmd, mcp_cmd, policy_cmd, replay_cmd, review_cmd, roster_cmd,
                 serve_cmd, simulate_cmd)

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help=(
        "countersign: a policy gate and a hash-chained ledger for AI agent tool calls that need a "
        "person's approval."
    ),
)
app.add_typer(policy_cmd.app, name="policy")
policy_cmd.app.add_typer(import_cmd.app, name="import")  # policy import claude-settings
app.add_typer(ledger_cmd.app, name="ledger")
app.add_typer(review_cmd.app, name="review")
app.add_typer(roster_cmd.app, name="roster")
app.add_typer(hook_cmd.app, name="hook")  # the adapter itself is imported inside the command
app.command("simulate")(simulate_cmd.simulate)
app.command("serve")(serve_cmd.serve)
app.command("mcp-proxy")(mcp_cmd.mcp_proxy)
ledger_cmd.app.command("keygen")(checkpoint_cmd.keygen)
ledger_cmd.app.command("checkpoint")(checkpoint_cmd.checkpoint)
ledger_cmd.app.command("prove")(checkpoint_cmd.prove)
app.command("verify-proof")(checkpoint_cmd.verify_proof)
ledger_cmd.app.command("audit")(replay_cmd.audit)  # the recorded decisions against their pinned policies
policy_cmd.app.command("whatif")(replay_cmd.whatif)  # the recorded proposals under another policy


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"countersign {version('countersign')}")
        except PackageNotFoundError:
            typer.echo("countersign (not installed)")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """countersign: a policy gate and a hash-chained ledger for AI agent tool calls that need a
    person's approval."""


def main() -> None:
    import signal

    # `countersign ... | head` closes the pipe early; end quietly, as cat or ls do, instead of
    # reporting a write error.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # Ctrl-C: Typer turns the KeyboardInterrupt into exit code 130 without a word. A command
    # that writes for long says what it wrote and how to go on (cli.output.interrupted); for the
    # others, one line, and no traceback from the interpreter's exit.
    try:
        app()
    except KeyboardInterrupt:  # outside Typer's own handling (its parsing of the command line)
        _interrupted_quietly()
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED and not interrupt_reported():
            _interrupted_quietly()
        raise


def _interrupted_quietly() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    typer.echo("interrupted (Ctrl-C)", err=True)
    raise SystemExit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
