"""`countersign simulate`: run a trace of tool calls through the Gate."""

from datetime import datetime, timezone
from typing import NoReturn, Optional

import typer

from cli.output import EXIT_FAIL, EXIT_USAGE, Interrupts, count, echo_json, fail, ignore_interrupts, interrupted, load_policy, table


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
    resume: bool = typer.Option(False, "--resume", help="Simulate only the calls the ledger does not hold yet: the "
                                "rest of an interrupted run (nothing when it holds the whole trace)."),
    again: bool = typer.Option(False, "--again", help="Append the whole trace even when the ledger already holds it "
                               "(a second copy of every call)."),
) -> None:
    """Feed every call through the Gate with scripted reviewers and a simulated clock.

    Approved and allowed calls run on a no-op executor. Every input is validated before the
    ledger is touched; a bad line is reported with its number and nothing is written. The
    reviewer file format is described in ledger/workflow/simulate.py and the README.

    A ledger that already holds the trace (its calls' proposals, in order: the same tools,
    arguments, contexts, proposers, runs and call ids) is not appended to twice: the command
    says so and exits 1, writing nothing; --again appends it anyway. A ledger holding the first
    calls of it (an interrupted run) is refused the same way; --resume simulates the rest.

    Ctrl-C stops after the call in progress (each call is proposed, reviewed and run whole),
    says what was written and how to resume, and exits 130; a second Ctrl-C stops at once.

    Example: countersign simulate --policy samples/retail.policy --calls samples/demo-calls.jsonl
    --reviewer samples/demo-reviewer.json --ledger build/demo-ledger
    """
    from ledger.workflow.gate import GateError
    from ledger.store.log import LedgerError
    from ledger.workflow.simulate import Held, InputFileError, Simulation, read_calls, read_reviewers

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
    if resume and again:
        fail("--resume and --again exclude each other: --resume adds what the ledger lacks, --again the whole trace")
    try:
        sim = Simulation(the_policy, ledger, script, start=moment, gap_seconds=gap, proposer=proposer)
    except (LedgerError, GateError) as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"cannot write the ledger at {ledger}: {exc.strerror or exc}", EXIT_USAGE)
    with sim, Interrupts() as interrupts:
        try:
            held = Held() if again else sim.held(trace)
            if held.calls and not resume:
                _refuse_held(ledger, calls, trace, held)
            if held.calls:
                typer.echo(f"{ledger} holds the first {count(held.calls, 'call')} of the trace's {len(trace):,} (requests "
                           f"{held.first_request} to {held.last_request}): " + (
                               "nothing to simulate" if held.complete else f"simulating the remaining {len(trace) - held.calls:,}"),
                           err=True)
            summary = sim.run(trace, skip=held.calls, stop=interrupts.requested)
        except KeyboardInterrupt:  # the second Ctrl-C: at once, perhaps inside a call
            _interrupted(ledger, sim, trace, None, at_once=True)
        except (LedgerError, GateError) as exc:
            fail(str(exc), EXIT_USAGE)
        except OSError as exc:
            fail(f"cannot write the ledger at {ledger}: {exc.strerror or exc}", EXIT_USAGE)
        if summary.stopped:
            _interrupted(ledger, sim, trace, summary, at_once=False)
    if as_json:
        echo_json(summary)
        return
    after = f" (after the first {summary.skipped:,}, which the ledger held)" if summary.skipped else ""
    typer.echo(f"simulated {summary.calls} calls{after} through policy {the_policy.name!r} into {ledger}")
    rows = [[k, v] for k, v in sorted(summary.effects.items())]
    table(["policy effect", "calls"], rows)
    table(["final status", "requests"], [[k, v] for k, v in sorted(summary.outcomes.items(), key=lambda kv: -kv[1])])
    typer.echo(f"executed {summary.executed} (edited before running: {summary.edited})")
    for refusal in summary.refused:
        typer.echo(f"refused review step: {refusal}")
    typer.echo(f"ledger: {summary.events} events, head {summary.head}")


def _refuse_held(ledger: str, calls_file: str, trace: list, held) -> NoReturn:
    """Exit 1: the ledger holds the trace, or its beginning; nothing was written."""
    n = len(trace)
    how = ("Nothing was written. (A call is recognised by its tool, arguments, context, proposer, run and call id, "
           "in the trace's order.)")
    if held.complete:
        fail(f"{ledger} already holds this trace: its {count(n, 'call')} are requests {held.first_request} to "
             f"{held.last_request}. --again appends it a second time. {how}", EXIT_FAIL)
    fail(f"{ledger} holds the first {held.calls:,} of this trace's {count(n, 'call')} (through line {held.last_line} of "
         f"{calls_file}; requests {held.first_request} to {held.last_request}): an interrupted run. --resume simulates "
         f"the remaining {n - held.calls:,}; --again appends the whole trace anew. {how}", EXIT_FAIL)


def _interrupted(ledger: str, sim, trace: list, summary, *, at_once: bool) -> NoReturn:
    """Ctrl-C: say what the ledger holds now and how to go on, and exit 130."""
    ignore_interrupts()  # a further Ctrl-C must not cut this report, nor the Gate's close, short
    try:
        events, head = sim.gate.ledger.refresh()
    except Exception:  # stopped inside a write: the head this writer knew
        events, head = sim.gate.ledger.head
    where = f"the ledger at {ledger} holds {count(events, 'event')}, the last seq {events} (head {head})"
    if at_once:
        message = (f"inside a call: {where}. The call in progress may be recorded in part (a proposal not yet reviewed "
                   "or run stays as it is). Run the same command with --resume to go on after the last call the ledger "
                   "holds.")
    else:
        left = len(trace) - summary.skipped - summary.calls
        message = (f"{summary.calls:,} of the trace's {len(trace):,} calls simulated"
                   + (f" (after the {summary.skipped:,} the ledger held)" if summary.skipped else "")
                   + (f", through line {summary.last_line} of the calls file" if summary.last_line else "")
                   + f"; {where}. Run the same command with --resume to simulate the remaining {left:,}.")
    try:
        sim.close()  # the snapshot, and the ledger's lock given back
    except Exception:  # stopped inside a write: the next writer recovers what it left
        pass
    interrupted(message)
