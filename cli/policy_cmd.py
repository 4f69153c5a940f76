"""`countersign policy ...`: commands for policy authors."""

from typing import Optional

import typer

from cli.output import EXIT_USAGE, echo_json, fail, load_policy

app = typer.Typer(no_args_is_help=True, help="Check and evaluate .policy files.")


@app.command()
def check(file: str = typer.Argument(..., help="The .policy file.")) -> None:
    """Load a policy and report every error (exit 2) and warning.

    Example: countersign policy check samples/retail.policy
    """
    policy = load_policy(file)
    for warning in policy.warnings:
        typer.echo(warning.render(file, policy.source_text), err=True)
    typer.echo(
        f"{file}: ok: policy {policy.name!r}, {len(policy.rules)} rules, default {policy.default.effect}, "
        f"sha256 {policy.digest}"
    )


@app.command("eval")
def eval_(
    file: str = typer.Argument(..., help="The .policy file."),
    tool: str = typer.Option(..., "--tool", help="The tool's name."),
    args: str = typer.Option("{}", "--args", help="The arguments, a JSON object."),
    context: Optional[str] = typer.Option(None, "--context", help="The caller's context, a JSON object (cwd, run_id, ...)."),
    as_json: bool = typer.Option(False, "--json", help="Print the decision as JSON."),
) -> None:
    """Decide one call: the effect, every rule that matched with its line, and why.

    Example: countersign policy eval samples/retail.policy --tool cancel_pending_order
    --args '{"order_id": "#W1", "reason": "ordered by mistake"}'
    """
    from ledger.jsoninput import parse_json_object

    try:
        arguments = parse_json_object(args, "--args")
        ctx = parse_json_object(context, "--context") if context is not None else None
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    policy = load_policy(file)
    decision = policy.evaluate(tool, arguments, ctx)
    if as_json:
        echo_json(decision)
        return
    typer.echo(f"policy {policy.name!r} (sha256 {policy.digest[:16]}…), tool {tool}")
    for line in decision.explain():
        typer.echo(line)
