"""`countersign simulate`: run a trace of tool calls through the Gate."""

from datetime import datetime, timezone
from typing import Optional

import typer

from cli.output import EXIT_USAGE, echo_json, fail, load_policy, table


def simulate(
    policy: str = typer.Option(..., "--policy", help="The .policy file."),
    calls: str = typer.Option(..., "--calls", help="JSON Lines, one call per line: {\"tool\": ..., \"args\": {...}}."),
    ledger: str = typer.Option(..., "--ledger", help="The ledger directory (created if missing, appended to if not)."),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="A reviewer script (JSON); default: approve every ask."),
    proposer: str = typer.Option("agent", "--proposer", help="The proposer of calls that name none."),
    start: str = typer.Option("2026-01-05T09:00:00Z", "--start", help="Simulated start time (UTC, ISO 8601)."),
    gap: float = typer.Option(20.0, "--gap", help="Simulated seconds between calls."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    roster: Optional[str] = typer.Option(
        None, "--roster", help="A roster (TOML): `approvers N from GROUP` in the policy may name its groups."
    ),
) -> None:
    """Feed every call through the Gate with scripted reviewers and a simulated clock.

    Approved and allowed calls run on a no-op executor. Every input is validated before the
    ledger is touched; a bad line is reported with its number and nothing is written. The
    reviewer file format is described in ledger/workflow/simulate.py and the README.

    Example: countersign simulate --policy samples/retail.policy --calls samples/demo-calls.jsonl
    --reviewer samples/demo-reviewer.json --ledger build/demo-ledger
    """
    from ledger.workflow.gate import GateError
    from ledger.store.log import LedgerError
    from ledger.workflow.simulate import InputFileError, read_calls, read_reviewers
    from ledger.workflow.simulate import simulate as run

    try:
        moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--start is not an ISO 8601 time: {start!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    if not 1000 <= moment.year <= 9000:
        fail("--start must fall between the years 1000 and 9000")
    if not (0 <= gap <= 86400):  # also refuses nan
        fail("--gap is a number of seconds from 0 to 86400")
    the_policy = load_policy(policy, roster)
    try:
        trace = read_calls(calls)
        script = read_reviewers(reviewer)
    except InputFileError as exc:
        fail(str(exc), EXIT_USAGE)
    try:
        summary = run(the_policy, trace, ledger, script, start=moment, gap_seconds=gap, proposer=proposer)
    except (LedgerError, GateError) as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"cannot write the ledger at {ledger}: {exc.strerror or exc}", EXIT_USAGE)
    if as_json:
        echo_json(summary)
        return
    typer.echo(f"simulated {summary.calls} calls through policy {the_policy.name!r} into {ledger}")
    rows = [[k, v] for k, v in sorted(summary.effects.items())]
    table(["policy effect", "calls"], rows)
    table(["final status", "requests"], [[k, v] for k, v in sorted(summary.outcomes.items(), key=lambda kv: -kv[1])])
    typer.echo(f"executed {summary.executed} (edited before running: {summary.edited})")
    for refusal in summary.refused:
        typer.echo(f"refused review step: {refusal}")
    typer.echo(f"ledger: {summary.events} events, head {summary.head}")
