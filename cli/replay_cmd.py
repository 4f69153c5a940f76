"""`countersign ledger audit` and `countersign policy whatif`: the recorded calls decided again
(ledger.audit, ledger.whatif). Output by cli/output.py's conventions: tables for a person, each
row short enough for an 80-column terminal; `--format csv|jsonl` one row per call listed;
`--format json` (or `--json`) the whole report."""

from typing import Optional

import typer

from cli.output import (integrity_warning, EXIT_FAIL, EXIT_OK, EXIT_USAGE, chosen_format, count, echo_json, emit, fail, format_option,
                        load_policy, say)

SHOWN = 20  # rows of each table by default (--limit)


def _short(text: str | None, width: int) -> str:
    text = text or ""
    return text if len(text) <= width else text[: width - 1] + "…"


def _rules(rules) -> str:
    return ",".join(r.id for r in rules or ()) or "(default)"


def _read(run, directory: str):
    from ledger.store.log import LedgerCorrupt, LedgerUnreadable

    try:
        return run()
    except LedgerUnreadable as exc:
        fail(str(exc), EXIT_USAGE)
    except LedgerCorrupt as exc:
        fail(f"{directory}: {exc} (run `countersign ledger verify {directory}`)", EXIT_USAGE)


def audit(
    directory: str = typer.Argument(..., help="The ledger directory."),
    fmt: str = format_option(what="; csv and jsonl: one row per call that differs or cannot be checked"),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON (--format json)."),
    allow_unchecked: bool = typer.Option(
        False, "--allow-unchecked", help="Exit 0 when every call that could be checked conforms, even if some could "
        "not be (redacted arguments, a policy whose text the ledger does not keep)."),
    limit: int = typer.Option(SHOWN, "--limit", min=1, help="Rows of each table."),
) -> None:
    """Decide every recorded proposal and edit again under the policy it records (its text, kept
    in the ledger by digest), with its recorded arguments and context, and report every one
    whose recorded effect or rules differ: the ledger proves that each decision followed its
    policy.

    A call whose policy text the ledger does not keep (written before policies were pinned), or
    whose arguments or context were redacted, is not checkable, and counted apart, never as
    conforming. The audit reads the ledger as recorded: `ledger verify` says whether it was
    tampered with.

    Exit 0: every call conforms. Exit 1: some call differs, or (without --allow-unchecked) some
    cannot be checked. Exit 2: not a readable ledger.

    Example: countersign ledger audit build/demo-ledger
    """
    fmt = chosen_format(fmt, as_json)
    from ledger.audit import audit as run_audit
    from ledger.replay import TEXT_UNAVAILABLE

    report = _read(lambda: run_audit(directory), directory)
    integrity_warning(directory)  # the audit reads the history as recorded: say when it does not verify
    failed = report.differing > 0 or (report.unchecked > 0 and not allow_unchecked)
    code = EXIT_FAIL if failed else EXIT_OK
    if fmt == "json":
        echo_json({**_plain(report), "conforms": report.conforms, "exit_code": code})
        raise typer.Exit(code)
    findings = report.differences + report.not_checkable
    if fmt in ("csv", "jsonl"):
        emit(["seq", "request", "kind", "ts", "tool", "recorded_effect", "recorded_rules", "decided_effect",
              "decided_rules", "reason", "detail"],
             [[f.seq, f.request, f.kind, f.ts, f.tool, f.recorded_effect, _rules(f.recorded_rules), f.decided_effect,
               None if f.decided_rules is None else _rules(f.decided_rules), f.reason, f.detail] for f in findings], fmt)
        raise typer.Exit(code)
    verdict = ("every call conforms to its policy" if report.conforms else
               f"{count(report.differing, 'call')} differ{'s' if report.differing == 1 else ''} from its policy"
               if report.differing else "no call differs from its policy")
    say(f"{directory}: {count(report.calls, 'call')} decided again under {count(len(report.policies), 'policy')}: "
        f"{report.conforming:,} conform, {report.differing:,} differ, {report.unchecked:,} not checkable")
    if report.policies:
        emit(["policy", "digest", "text kept", "calls"],
             [[_short(p.name, 24), p.digest[:12] + "…", "yes" if p.pinned else "NO", f"{p.calls:,}"]
              for p in sorted(report.policies, key=lambda p: -p.calls)[:limit]], "table", title="Policies")
    if report.differences:
        emit(["seq", "tool", "recorded", "decided"],
             [[f.seq, _short(f.tool, 20), _short(f"{f.recorded_effect} {_rules(f.recorded_rules)}", 22),
               _short(f.detail or f"{f.decided_effect} {_rules(f.decided_rules)}", 22)] for f in report.differences[:limit]],
             "table", title="Decisions that differ from their policy")
    if report.unchecked:
        firsts: dict[str, int] = {}
        for f in report.not_checkable:
            firsts.setdefault((f.reason or "").split(":")[0], f.seq)
        emit(["why", "calls", "first seq"],
             [[reason, f"{n:,}", firsts.get(reason, "")] for reason, n in sorted(report.unchecked_by_reason.items(),
                                                                                key=lambda kv: -kv[1])],
             "table", title="Not checkable")
    if report.unchecked_by_reason.get(TEXT_UNAVAILABLE):
        say("hint: the ledger does not keep the text of the policy that decided those calls. A Gate made in Python "
            "keeps it with Gate(..., pin_policy=True); countersign's CLI, service and adapters always do")
    say(f"{directory}: {verdict}" + ("" if not report.unchecked else
                                     f"; {count(report.unchecked, 'call')} could not be checked"))
    raise typer.Exit(code)


def whatif(
    policy_path: str = typer.Argument(..., metavar="NEW.policy", help="The policy to replay the ledger under."),
    ledger: str = typer.Option(..., "--ledger", help="The ledger directory whose proposals are replayed."),
    roster: Optional[str] = typer.Option(None, "--roster", help="A roster whose groups the policy may name."),
    fmt: str = format_option(what="; csv and jsonl: one row per call whose effect changes"),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON (--format json)."),
    limit: int = typer.Option(SHOWN, "--limit", min=1, help="Rows of each table."),
) -> None:
    """Replay the proposals a ledger recorded under another policy: which past calls would
    change effect (allow→ask, ask→deny, ...), by transition and by the new policy's rules; the
    change in reviewer load (asks per day, per approver group); and the executed calls a new
    deny would have stopped. Useful before deploying a stricter policy, and before relaxing one.

    Nothing is written. Exit 0 (2: the policy does not load, or the ledger is not readable).

    Example: countersign policy whatif stricter.policy --ledger build/demo-ledger
    """
    fmt = chosen_format(fmt, as_json)
    policy = load_policy(policy_path, roster)
    from ledger.whatif import whatif as run_whatif

    report = _read(lambda: run_whatif(ledger, policy), ledger)
    if fmt == "json":
        echo_json(_plain(report))
        return
    if fmt in ("csv", "jsonl"):
        emit(["seq", "ts", "tool", "from", "to", "rules", "reason", "executed"],
             [[c.seq, c.ts, c.tool, c.from_effect, c.to_effect, c.rules, c.reason, c.executed]
              for c in report.changed_calls], fmt)
        return
    say(f"{policy_path} on {ledger}: {count(report.replayed, 'proposal')} replayed, {report.changed:,} would change "
        f"effect, {report.stopped:,} executed call{'' if report.stopped == 1 else 's'} would be denied"
        + (f"; {report.unchecked:,} not checkable" if report.unchecked else ""))
    if report.transitions:
        emit(["change", "calls"], [[t, f"{n:,}"] for t, n in report.transitions.items()], "table",
             title="Calls that change effect")
        emit(["change", "new rule", "calls", "first seq"],
             [[f"{c.from_effect}→{c.to_effect}", _short(c.rules, 34), f"{c.calls:,}", c.first_seq]
              for c in report.changes[:limit]], "table", title="By the new policy's rule")
    if report.load:
        emit(["approver group", "asks", "asks new", "per day", "per day new"],
             [[_short(g.group, 24), f"{g.asks_before:,}", f"{g.asks_after:,}", f"{g.per_day_before:,.2f}",
               f"{g.per_day_after:,.2f}"] for g in report.load[:limit]], "table",
             title=f"Reviewer load over {count(report.days, 'day')}")
    if report.stopped_calls:
        emit(["seq", "tool", "new rule", "reason"],
             [[c.seq, _short(c.tool, 18), _short(c.rules, 18), _short(c.reason, 26)] for c in report.stopped_calls[:limit]],
             "table", title="Executed calls a new deny would have stopped")
    if report.unchecked:
        emit(["why", "calls"], [[r, f"{n:,}"] for r, n in report.unchecked_by_reason.items()], "table",
             title="Not checkable")


def _plain(report) -> dict:
    import msgspec

    return msgspec.to_builtins(report)
