"""`countersign policy ...`: commands for policy authors."""

from typing import List, Optional

import typer

from cli.output import EXIT_USAGE, echo_json, fail, load_policy

app = typer.Typer(no_args_is_help=True, help="Check and evaluate .policy files.")


@app.command()
def check(
    file: str = typer.Argument(..., help="The .policy file."),
    tools: Optional[List[str]] = typer.Option(
        None,
        "--tools",
        help="The tools' argument schemas (JSON: a list of tools, ToolEmu toolkits, or an MCP tools/list answer); repeat for several files.",
    ),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors (exit 2)."),
    open_schemas: bool = typer.Option(
        False, "--open-schemas", help="Read object schemas as JSON Schema does: a field not listed is allowed unless additionalProperties is false."
    ),
) -> None:
    """Load a policy and report every error (exit 2), warning and note.

    Warnings include the static analysis (rules that can never fire, duplicates, allow and ask
    rules that overlap); they do not change the exit code unless --strict. With --tools, unknown
    tools, unknown argument paths and comparisons of the wrong type are errors, and the tools no
    rule mentions are listed.

    Example: countersign policy check samples/retail.policy --tools ../shared/corpus/tau_bench_tools.json
    """
    import dataclasses

    from dsl import Policy, PolicyError
    from dsl.analysis import analyze
    from dsl.parser import parse
    from dsl.schema import ToolSchemaError, combine, load_tools

    schemas = None
    if tools:
        loaded = []
        for path in tools:
            try:
                loaded.append(load_tools(path, closed=not open_schemas))
            except OSError as exc:
                fail(f"cannot read {path}: {exc.strerror or exc}")
            except ToolSchemaError as exc:
                fail(str(exc))
        schemas = loaded[0] if len(loaded) == 1 else combine(loaded)
    try:
        policy = Policy.load(file, tools=schemas)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except PolicyError as exc:
        typer.echo(exc.render(), err=True)
        n = len(exc.errors)
        typer.echo(f"{file}: {n} error{'s' if n != 1 else ''}; the policy was not loaded", err=True)
        raise typer.Exit(EXIT_USAGE)
    # Under --strict every warning is shown as the error it then is; notes stay notes.
    severity = "error" if strict else None
    findings = analyze(parse(policy.source_text, file), schemas)
    for warning in policy.warnings:
        shown = dataclasses.replace(warning, severity="error") if strict else warning
        typer.echo(shown.render(file, policy.source_text), err=True)
    for finding in findings:
        typer.echo(finding.render(file, policy.source_text, severity if finding.severity == "warning" else None), err=True)
    warnings = len(policy.warnings) + sum(1 for f in findings if f.severity == "warning")
    if strict and warnings:
        typer.echo(f"{file}: {warnings} warning{'s' if warnings != 1 else ''}, errors under --strict", err=True)
        raise typer.Exit(EXIT_USAGE)
    against = f", checked against {len(schemas)} tools of {schemas.origin}" if schemas is not None else ""
    typer.echo(
        f"{file}: ok: policy {policy.name!r}, {len(policy.rules)} rules, default {policy.default.effect}, "
        f"sha256 {policy.digest}{against}"
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
