"""`countersign policy ...`: commands for policy authors."""

import json
from typing import List, Optional

import typer

from cli.output import count as _count, EXIT_USAGE, echo_json, fail, load_policy, roster_groups, say

app = typer.Typer(no_args_is_help=True, help="Check and evaluate .policy files.")

_ROSTER = typer.Option(
    None, "--roster", help="A roster (TOML, see `countersign roster`): `approvers N from GROUP` may name its groups, "
    "resolved now into their members (the policy's digest covers the ones it names)."
)


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
    roster: Optional[str] = _ROSTER,
) -> None:
    """Load a policy and report every error (exit 2), warning and note.

    Warnings include the static analysis (rules that can never fire, duplicates, allow and ask
    rules that overlap); they do not change the exit code unless --strict. With --tools, unknown
    tools, unknown argument paths and comparisons of the wrong type are errors, and the tools no
    rule mentions are listed. With --roster, a group the policy does not define may be one of
    the roster's; the groups used are listed.

    Example: countersign policy check samples/retail.policy --tools ../shared/corpus/tau_bench_tools.json
    """
    import dataclasses

    from dsl import Policy, PolicyError
    from dsl.analysis import analyze
    from dsl.errors import Diagnostic, span_file
    from dsl.lets import reread
    from dsl.schema import ToolSchemaError, combine, load_tools

    groups = roster_groups(roster)
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
        policy = Policy.load(file, tools=schemas, groups=groups)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except PolicyError as exc:
        typer.echo(exc.render(), err=True)
        n = len(exc.errors)
        typer.echo(f"{file}: {n} error{'s' if n != 1 else ''}; the policy was not loaded", err=True)
        raise typer.Exit(EXIT_USAGE)
    # Under --strict every warning is shown as the error it then is; notes stay notes.
    severity = "error" if strict else None
    findings = analyze(reread(policy)[0], schemas)  # lets expanded, includes read (dsl.lets)

    def source(span) -> tuple[str, str]:  # where a diagnostic points: the file, or one it includes
        included = span_file(span)
        return (included, policy.included[included]) if included in policy.included else (file, policy.source_text)

    for warning in policy.warnings:
        shown = dataclasses.replace(warning, severity="error") if strict else warning
        typer.echo(shown.render(*source(shown.span)), err=True)
    for finding in findings:
        parts = [finding.diagnostic(severity if finding.severity == "warning" else None).render(*source(finding.span))]
        parts += [Diagnostic("note", r.message, r.span).render(*source(r.span)) for r in finding.related]
        typer.echo("\n".join(parts), err=True)
    warnings = len(policy.warnings) + sum(1 for f in findings if f.severity == "warning")
    if strict and warnings:
        typer.echo(f"{file}: {warnings} warning{'s' if warnings != 1 else ''}, errors under --strict", err=True)
        raise typer.Exit(EXIT_USAGE)
    against = f", checked against {len(schemas)} tools of {schemas.origin}" if schemas is not None else ""
    used = policy.external_groups
    if used:  # the digest is then not the file's own sha256 (dsl.policy.policy_digest)
        listed = ", ".join(f"{name} ({len(members)})" for name, members in used.items())
        against += f", roster group{'s' if len(used) != 1 else ''} {listed} of {roster}"
    typer.echo(
        f"{file}: ok: policy {policy.name!r}, {_count(len(policy.rules), 'rule')}, default {policy.default.effect}, "
        f"sha256 {policy.digest}{against}"
    )


_HISTORY = typer.Option(None, "--history", help="The run's earlier calls, for a policy that reads history: a JSON "
                        "file holding a list of calls (tool, args, status, result, ...; docs/policy-tools.md).")


def _history(history_file: str | None):
    """The dsl.history.History of a --history file, None without one; exits 2 on a bad file."""
    if history_file is None:
        return None
    from dsl.history import History
    from dsl.jsoninput import parse_json
    from ledger.digest import MAX_NESTING, check_nesting

    try:
        with open(history_file, encoding="utf-8") as f:
            calls = parse_json(f.read(), "--history")
        # a ledger's arguments and results nest at most MAX_NESTING levels (ledger.digest), inside
        # the list and a call: deeper is no recorded run, and would exhaust the stack downstream
        check_nesting(calls, MAX_NESTING + 2)
        return History.from_calls(calls)
    except (OSError, ValueError) as exc:
        fail(f"--history: {exc}", EXIT_USAGE)


@app.command("eval")
def eval_(
    file: str = typer.Argument(..., help="The .policy file."),
    tool: str = typer.Option(..., "--tool", help="The tool's name."),
    args: str = typer.Option("{}", "--args", help="The arguments, a JSON object."),
    context: Optional[str] = typer.Option(None, "--context", help="The caller's context, a JSON object (cwd, run_id, ...)."),
    as_json: bool = typer.Option(False, "--json", help="Print the decision as one JSON object, with the same keys "
                                 "whatever the decision (listed below; null or empty when they do not apply)."),
    roster: Optional[str] = _ROSTER,
    history_file: Optional[str] = _HISTORY,
) -> None:
    """Decide one call: the effect, every rule that matched with its line, and why.

    With --json, one object with always these keys: effect (allow, deny or ask), by_default (no
    rule counted: the policy's default applied), policy, policy_digest, reasons (list of text),
    deciding (the ids of the rules that decided; empty for the default), outcomes (every rule
    that counted or could not be evaluated, in file order, each with rule, line, effect, counted,
    error, reason, condition), requirements (null unless ask: quorums, each with count, approvers
    and group; decisions, timeout_seconds, on_timeout, timeout_message, remember: null or with
    scope and seconds).

    Example: countersign policy eval samples/retail.policy --tool cancel_pending_order
    --args '{"order_id": "#W1", "reason": "ordered by mistake"}'
    """
    from dsl.jsoninput import parse_json_object

    if not tool.strip():
        fail("--tool must name a tool", EXIT_USAGE)
    try:
        arguments = parse_json_object(args, "--args")
        ctx = parse_json_object(context, "--context") if context is not None else None
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    history = _history(history_file)
    policy = load_policy(file, roster)
    decision = policy.evaluate(tool, arguments, ctx, history=history)
    if as_json:
        echo_json(decision_json(decision))
        return
    typer.echo(f"policy {policy.name!r} (sha256 {policy.digest[:16]}…), tool {tool}")
    for line in decision.explain():
        say(line)
    shown = {o.rule for o in decision.outcomes}
    missed = [r for r in policy.rules_for(tool) if r.rule_id not in shown]
    if missed:  # a rule the author expected to decide, and why it did not: `policy explain`
        names = ", ".join(f"line {r.line} [{r.rule_id}] {r.effect}" for r in missed[:6]) + (", ..." if len(missed) > 6 else "")
        say(f"  covered by {len(missed)} rule{'s' if len(missed) != 1 else ''} whose condition did not hold: {names} "
            "(policy explain shows why)")


def decision_json(decision) -> dict:
    """A dsl.Decision as `policy eval --json` prints it: every key always present (the Decision
    Struct leaves out its defaults, so its own encoding has fewer keys for some decisions)."""
    r = decision.requirements
    return {
        "effect": decision.effect,
        "by_default": decision.by_default,
        "policy": decision.policy,
        "policy_digest": decision.policy_digest,
        "reasons": list(decision.reasons),
        "deciding": list(decision.deciding),
        "outcomes": [{"rule": o.rule, "line": o.line, "effect": o.effect, "counted": o.counted, "error": o.error,
                      "reason": o.reason, "condition": o.condition} for o in decision.outcomes],
        "requirements": None if r is None else {
            "quorums": [{"count": q.count, "approvers": None if q.approvers is None else list(q.approvers), "group": q.group}
                        for q in r.quorums],
            "decisions": list(r.decisions),
            "timeout_seconds": r.timeout_seconds,
            "on_timeout": r.on_timeout,
            "timeout_message": r.timeout_message,
            "remember": None if r.rememberable is None else {"scope": r.rememberable.scope, "seconds": r.rememberable.seconds},
        },
    }


# --- explain, test, fmt (tooling for policy authors) ------------------------------------------


@app.command("explain")
def explain_(
    file: str = typer.Argument(..., help="The .policy file."),
    tool: str = typer.Option(..., "--tool", help="The tool's name."),
    args: str = typer.Option("{}", "--args", help="The arguments, a JSON object."),
    context: Optional[str] = typer.Option(None, "--context", help="The caller's context, a JSON object (cwd, home, ...)."),
    as_json: bool = typer.Option(False, "--json", help="Print the explanation as JSON."),
    roster: Optional[str] = _ROSTER,
    history_file: Optional[str] = _HISTORY,
) -> None:
    """Explain a decision: every rule that covers the tool (matched or not), what each condition
    and sub-condition evaluated to, the normalized subjects they saw, exact or prefix matching,
    the item that decided a quantifier, and the precedence that decided.

    Example: countersign policy explain samples/coding-agent.policy --tool Bash
    --args '{"command": "sudo rm -rf /"}' --context '{"cwd": "/home/u/proj"}'
    """
    from cli.render_policy import explanation_lines
    from dsl.explain import explain
    from dsl.jsoninput import parse_json_object

    if not tool.strip():
        fail("--tool must name a tool", EXIT_USAGE)
    try:
        arguments = parse_json_object(args, "--args")
        ctx = parse_json_object(context, "--context") if context is not None else None
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    history = _history(history_file)
    policy = load_policy(file, roster)
    report = explain(policy, tool, arguments, ctx, history=history)
    if as_json:
        echo_json(report)
        return
    for line in explanation_lines(report):
        say(line)  # the call's own text may hold controls or a lone surrogate: shown escaped


@app.command("test")
def test_(
    file: str = typer.Argument(..., help="The .policy file."),
    cases: Optional[str] = typer.Argument(None, help="The cases file (default: FILE with .cases instead of .policy)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    roster: Optional[str] = _ROSTER,
) -> None:
    """Run table-driven cases against a policy: exit 0 when all pass, 1 when one fails (each
    failure with the case's file:line and the policy lines involved), 2 for a malformed cases
    file or policy. Lists the rules no case exercised.

    A case is one line: TOOL {"json": "args"} [context {"cwd": "..."}] => EFFECT [RULE_ID ...]
    (see docs/policy-tools.md). Example: countersign policy test samples/retail.policy
    """
    from cli.output import EXIT_FAIL
    from cli.render_policy import report_lines
    from dsl.cases import CasesError, default_cases_path, parse_cases, run_cases

    path = cases if cases is not None else str(default_cases_path(file))
    policy = load_policy(file, roster)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except UnicodeDecodeError:
        fail(f"{path} is not valid UTF-8")
    try:
        parsed = parse_cases(text, path)
    except CasesError as exc:
        fail(f"{exc.source}:{exc.line}: {exc.message}")
    if not parsed:  # a run that tests nothing must not pass as one that tested everything
        fail(f"{path} holds no case (a case is a line: TOOL {{args}} => EFFECT)")
    try:
        report = run_cases(policy, parsed, path)
    except CasesError as exc:  # a case names a rule id the policy does not have
        fail(f"{exc.source}:{exc.line}: {exc.message}")
    if as_json:
        echo_json(report)
    else:
        failures, summary = report_lines(report)
        for line in failures:
            typer.echo(line, err=True)
        for line in summary:
            typer.echo(line)
    if report.failed:
        raise typer.Exit(EXIT_FAIL)


@app.command("fmt")
def fmt_(
    file: str = typer.Argument(..., help="The .policy file."),
    check: bool = typer.Option(False, "--check", help="Exit 1 (printing a diff) when the file is not formatted; change nothing."),
    write: bool = typer.Option(False, "--write", help="Rewrite the file in place (atomically) when it is not formatted."),
) -> None:
    """Print the policy in the canonical layout (comments kept). With --check, exit 1 and print a
    unified diff when the file differs from it; with --write, replace the file. A syntax error
    exits 2.

    Example: countersign policy fmt samples/retail.policy --check
    """
    import difflib

    from cli.output import EXIT_FAIL
    from dsl import PolicyError
    from dsl.fmt import format_policy

    if check and write:
        fail("--check and --write exclude each other", EXIT_USAGE)
    try:
        original = open(file, "rb").read().decode("utf-8")
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except UnicodeDecodeError:
        fail(f"{file} is not valid UTF-8")
    try:
        formatted = format_policy(original, file)
    except PolicyError as exc:
        typer.echo(exc.render(), err=True)
        fail(f"{file} cannot be formatted: it does not parse", EXIT_USAGE)
    if check:
        if formatted == original:
            typer.echo(f"{file}: already formatted", err=True)
            return
        diff = difflib.unified_diff(
            original.splitlines(keepends=True), formatted.splitlines(keepends=True), f"{file}", f"{file} (formatted)"
        )
        typer.echo("".join(line if line.endswith("\n") else line + "\n" for line in diff), nl=False)
        typer.echo(f"{file}: not formatted (run: countersign policy fmt --write {file})", err=True)
        raise typer.Exit(EXIT_FAIL)
    if write:
        if formatted != original:
            _replace_atomically(file, formatted)
            typer.echo(f"{file}: formatted", err=True)
        else:
            typer.echo(f"{file}: already formatted", err=True)
        return
    typer.echo(formatted, nl=False)


def _replace_atomically(path: str, text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk and rename it over
    `path` (keeping its permissions): a reader sees the old file or the new one, never half."""
    import os
    import tempfile

    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=".fmt-", suffix=".policy", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
