"""The `countersign` console script."""

import typer

from cli import checkpoint_cmd, import_cmd, ledger_cmd, policy_cmd, simulate_cmd

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
app.command("simulate")(simulate_cmd.simulate)
ledger_cmd.app.command("keygen")(checkpoint_cmd.keygen)
ledger_cmd.app.command("checkpoint")(checkpoint_cmd.checkpoint)
ledger_cmd.app.command("prove")(checkpoint_cmd.prove)
app.command("verify-proof")(checkpoint_cmd.verify_proof)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
