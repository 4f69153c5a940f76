"""`countersign ledger ...`: commands for auditors."""

from pathlib import Path
from typing import List, Optional

import typer

from cli.output import (count as _count, integrity_warning, EXIT_USAGE, chosen_format, echo_json, emit, fail, format_option, interrupted, is_interrupt,
                        json_text, plain, say, verified_before, visible)

app = typer.Typer(no_args_is_help=True, help="Verify, query and summarize ledgers.")


@app.command()
def verify(
    directory: str = typer.Argument(..., help="The ledger directory."),
    expect_head: Optional[str] = typer.Option(None, "--expect-head", help="A head hash saved earlier; it must still be in the chain."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    checkpoint: Optional[str] = typer.Option(None, "--checkpoint", help="A signed checkpoint the ledger must extend (needs --pubkey)."),
    pubkey: Optional[str] = typer.Option(None, "--pubkey", help="The public key the checkpoint must be signed with."),
    from_checkpoint: bool = typer.Option(
        False, "--from-checkpoint", help="Trust the checkpoint's events (checked against its root) and verify in full only what follows."
    ),
    reference: bool = typer.Option(
        False, "--reference", help="Use only the reference (Python) verifier, about 20 times slower than the compiled one."
    ),
    rosters: List[str] = typer.Option(
        [], "--roster", help="Check every decision's signature against this roster (TOML); repeatable, in the order the "
        "ledger used them: each decision against the roster the ledger recorded before it (the first given where none "
        "was); a roster event may not go back to an earlier one."
    ),
    signed_from: int = typer.Option(
        1, "--signed-from", min=1, metavar="SEQ", help="With --roster: check the decisions from this seq on (a ledger "
        "that began signing after its first decisions); the ones before it are counted, not checked."
    ),
) -> None:
    """Check every link of the hash chain and every workflow rule.

    With --roster, also check that every decision is signed by its decider's key as the roster
    lists it (docs/ledger-format.md section 11): an unsigned, wrongly signed or foreign-signed
    decision is a problem at its seq.

    The compiled verifier (when it was built) checks an intact, lawful ledger of the common shape;
    everything else, and every problem, goes to the reference verifier, which words the report.

    With --checkpoint and --pubkey, also check the checkpoint's signature and that the ledger
    extends it (a consistency proof), which detects truncation, rollback and a rewrite with
    recomputed hashes.

    Exit 0: intact and lawful. Exit 1: tampered or unlawful (the first bad seq is named).
    Exit 2: unreadable.

    Example: countersign ledger verify build/demo-ledger
    """
    if expect_head is not None:
        expect_head = _hash_option(expect_head, "--expect-head")
    loaded = []
    if rosters:
        from ledger.proof.roster import RosterError, load_roster

        if checkpoint is not None or pubkey is not None or from_checkpoint:
            fail("--roster is not combined with --checkpoint yet: run `ledger verify DIR --roster R` as a second command",
                 EXIT_USAGE)
        try:
            loaded = [load_roster(r) for r in rosters]
        except RosterError as exc:
            fail(str(exc), EXIT_USAGE)
    if checkpoint is not None or pubkey is not None or from_checkpoint:
        from cli.checkpoint_cmd import verify_with_checkpoint

        verify_with_checkpoint(directory, checkpoint, pubkey, from_checkpoint, expect_head, as_json, engine="python" if reference else "auto")
        return
    from ledger.proof.verify import verify as run_verify

    if signed_from != 1 and not loaded:
        fail("--signed-from needs --roster: it says from where decisions must be signed", EXIT_USAGE)
    report = run_verify(directory, expect_head=expect_head, engine="python" if reference else "auto", rosters=loaded,
                        signed_from=signed_from)
    if report.unreadable is None:
        _stored_checkpoint_warning(directory, report)
    if as_json:
        echo_json({**_report_dict(report), "ok": report.ok, "exit_code": report.exit_code})
        raise typer.Exit(report.exit_code)
    if report.unreadable is not None:
        fail(report.unreadable, EXIT_USAGE)
    for warning in report.warnings:
        say(f"warning: {warning}", err=True)
    p = report.problem
    if p is not None:
        where = f"seq {p.seq}" if p.seq is not None else "head"
        code = f" [{p.code}]" if p.code else ""
        say(f"{directory}: FAILED at {where}: {p.kind}{code}: {p.message}")
        if p.kind == "checkpoint":  # the chain itself held; it is not the ledger the checkpoint signed
            say("  the checkpoint does not vouch for this ledger")
        else:
            say(verified_before(report))
        raise typer.Exit(report.exit_code)
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(report.statuses.items()))
    say(f"{directory}: intact: {report.count} events, head {report.head}")
    if loaded:
        which = "every decision" if signed_from == 1 else f"every decision from seq {signed_from} on"
        say(f"  {which} is signed by its decider, by a key the roster in force gives them ({_count(len(loaded), 'roster')} given)"
            + (f"; {_count(report.unchecked_decisions, 'decision')} before seq {signed_from} NOT checked"
               if signed_from > 1 else ""))
    if statuses:
        say(f"  requests: {statuses}")
    if report.redactions:
        say(f"  {_count(len(report.redactions), 'value')} redacted:")
        for line in report.redactions:
            say(f"    {line}")


def _stored_checkpoint_warning(directory: str, report) -> None:
    """A chain that verifies says nothing of events cut from its end: the checkpoints kept in
    DIR/checkpoints/ do. A ledger that contradicts the latest of them (shorter, another head,
    another ledger) gets a warning, not a failure: without --pubkey that checkpoint is not
    authenticated (anyone who can cut the ledger can also edit it). The writer's check, reused."""
    from ledger.proof.checkpoint import behind_checkpoint
    from ledger.store.log import LedgerError

    try:
        problem = behind_checkpoint(directory)
    except (LedgerError, OSError):  # the ledger's own problem, which verify reports
        return
    if problem is not None:
        report.warnings.append(
            f"{problem}; a writer refuses to append to it. The stored checkpoint's signature was not checked: "
            "run `countersign ledger verify DIR --checkpoint FILE --pubkey KEY` with a checkpoint and key you trust"
        )


def _hash_option(value: str, option: str) -> str:
    """A 64-digit hex hash given on the command line, lower-cased; exit 2 for anything else."""
    value = value.strip().lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        fail(f"{option} must be a hash of 64 hex digits")
    return value


def _fail_on_query_error(exc: Exception) -> None:
    import duckdb

    if is_interrupt(exc):  # Ctrl-C inside DuckDB, which stops the query and raises: nothing was written
        interrupted("the query stopped; nothing was written")

    from ledger.store.log import LedgerUnreadable
    from ledger.analytics.projection import ProjectionError
    from ledger.analytics.views import QueryRefused

    if isinstance(exc, (LedgerUnreadable, QueryRefused, ProjectionError)):
        fail(str(exc))
    if isinstance(exc, duckdb.Error):  # a user's SQL mistake or an unreadable file, without a traceback
        lines = str(exc).splitlines() or [""]
        say(f"error: query failed: {visible(lines[0])}", err=True)
        for line in lines[1:]:  # DuckDB's hints (candidate bindings, a caret under the mistake)
            say(f"  {visible(line)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    if isinstance(exc, OSError):
        fail(f"cannot read the ledger: {exc.strerror or exc}")


def _report_dict(report) -> dict:
    import msgspec

    return msgspec.to_builtins(report)


@app.command()
def query(
    directory: str = typer.Argument(..., help="The ledger directory."),
    sql: str = typer.Argument(..., help="One SQL statement over the views (events, requests, pending, ...)."),
    fmt: str = format_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON (--format json)."),
    log: bool = typer.Option(False, "--log", help="Read the log itself (every line parsed in SQL, the history as "
                             "recorded, lawful or not) instead of the projection: slow on a large ledger."),
) -> None:
    """Run one read-only SQL statement (a SELECT) over the ledger's views (docs/views.md).

    Views: events, requests, pending, decision_times, rates_by_tool, rates_by_rule,
    rates_by_approver, chain_breaks, violations, torn_tail, coverage.

    They read the ledger's columnar projection (DIR/projection/projection.duckdb), built from the
    log on the first query and brought up to date at every later one. Its rows cover the lines it
    verified: a warning says when a line stopped it.

    json and jsonl write a JSON column (args, context, data) as its JSON value, a list as an
    array, a struct as an object, a time in UTC as 2026-01-05T09:00:20.000000Z; csv writes a list,
    struct or JSON cell as compact JSON text.

    Example: countersign ledger query build/demo-ledger "select tool, status from requests"
    """
    fmt = chosen_format(fmt, as_json)
    from ledger.analytics.query import run

    try:
        answer = run(directory, sql, source="log" if log else "projection", progress=_progress())
    except Exception as exc:
        _fail_on_query_error(exc)
        raise
    if not log:
        _coverage_warning(directory, answer.coverage)
    emit(answer.columns, answer.rows, fmt, answer.types)


def _progress():
    """A progress bar on stderr while the projection reads much of the log (a terminal only)."""
    import sys

    if not sys.stderr.isatty():
        return None
    state: dict = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            if total < (32 << 20):  # a few seconds at most: no bar
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            bar = Progress("projecting the ledger", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                           transient=True, console=_stderr_console())
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("project", total=total)
        state["bar"].update(state["task"], completed=done)
        if done >= total:
            state.pop("bar").stop()

    return update


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _coverage_warning(directory: str, coverage) -> None:
    """Rows that do not cover the whole log: say which lines they cover and why they stop."""
    if coverage.built and coverage.reason not in (None, "no projection yet"):
        say(f"note: the projection was rebuilt from the log ({coverage.reason})", err=True)
    if coverage.problem is not None:
        say(
            f"warning: {directory}: the rows cover seq 1 to {coverage.events:,}, which verified; seq {coverage.problem_seq} "
            f"fails a check ({coverage.problem}) and the lines from it on are not in the views "
            "(chain_breaks / violations hold the problem; --log reads the history as recorded; run ledger verify)",
            err=True,
        )
    if coverage.torn_bytes:
        say(
            f"note: {directory}: the last segment ends with {coverage.torn_bytes:,} bytes after its last line feed: an "
            "unfinished write, or a cut that only a checkpoint or an expected head (ledger verify --expect-head/--checkpoint) "
            "tells apart; they are not in the views",
            err=True,
        )


def _coverage(directory: str):
    """The projection brought up to date (built when there is none, a progress bar on a
    terminal): the Coverage of its rows (ledger.analytics.query.coverage), None when no
    projection can be written."""
    from ledger.analytics.projection import ProjectionError
    from ledger.analytics.query import coverage as projection_coverage

    try:
        return projection_coverage(directory, progress=_progress())
    except ProjectionError:
        return None


def _history_warning(directory: str, covered, checked_rows: bool = False) -> None:
    """Numbers from a ledger whose lines do not all verify describe a history that may not be
    true: say so, from the projection's coverage (a full verify when there is none). With
    `checked_rows` the results are the projection's rows, which stop before the problem (export);
    else they are the history as recorded (stats reads the log's views then)."""
    if covered is None:
        integrity_warning(directory)
    elif covered.problem is not None and checked_rows:
        say(f"warning: {directory} does not verify (seq {covered.problem_seq}: {covered.problem}); the rows written "
            f"cover seq 1 to {covered.problem_seq - 1:,}, the lines before it (run ledger verify)", err=True)
    elif covered.problem is not None:
        say(f"warning: {directory} does not verify (seq {covered.problem_seq}: {covered.problem}); "
            "these results describe the history as recorded", err=True)


@app.command()
def stats(
    directory: str = typer.Argument(..., help="The ledger directory."),
    fmt: str = format_option(what="; csv: the by-tool table; jsonl: the json on one line"),
    as_json: bool = typer.Option(False, "--json", help="Print the statistics as JSON (--format json)."),
) -> None:
    """The queue now, decisions by kind, time to decision (p50, p90) and the edit rate, then
    the counts by tool.

    The oldest pending request's wait is measured from now (the wall clock; from the last event
    if that is later). The by-tool table fits the terminal's width (COLUMNS), in two tables when
    one does not fit. json (and jsonl, on one line) is the whole ledger.analytics.stats.Stats;
    csv the by-tool counts, one row a tool.

    Example: countersign ledger stats build/demo-ledger
    """
    fmt = chosen_format(fmt, as_json)
    from ledger.analytics.stats import stats as run_stats

    try:
        covered = _coverage(directory)
        result = run_stats(directory)
    except Exception as exc:
        _fail_on_query_error(exc)
        raise
    _history_warning(directory, covered)
    if fmt == "json":
        echo_json(result)
        return
    if fmt == "jsonl":
        typer.echo(json_text(plain(result)))
        return
    from cli.render_stats import COUNTS, render

    if fmt == "csv":
        tools = sorted(result.by_tool.items(), key=lambda kv: (-kv[1].requests, kv[0]))
        emit(["tool", *COUNTS], [[tool, *(getattr(t, c) for c in COUNTS)] for tool, t in tools], "csv")
        return
    render(result)


@app.command()
def export(
    directory: str = typer.Argument(..., help="The ledger directory."),
    out: str = typer.Option(..., "--out", help="The directory to write into (created if missing): one file a view."),
    fmt: str = typer.Option("parquet", "--format", metavar="parquet|csv|jsonl",
                            help="parquet (keeps every type), csv (lists and JSON as JSON text) or jsonl (JSON values)."),
    views: List[str] = typer.Option([], "--view", metavar="NAME", help="A view to export (repeatable; default: every "
                                    "view but ledger_lines and torn_tail)."),
    force: bool = typer.Option(False, "--force", help="Replace files that exist (otherwise nothing is written)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON: [{view, path, rows}]."),
) -> None:
    """Write the ledger's views to OUT/<view>.parquet (or .csv, .jsonl) for notebooks, BI tools
    and DuckDB itself.

    Parquet keeps the columns' types (times as TIMESTAMPTZ in UTC, JSON as JSON, lists and
    structs nested); csv writes a list, struct or JSON cell as compact JSON text; jsonl JSON
    values; csv and jsonl write times as 2026-01-05T09:00:20.000000Z. The rows are those `ledger
    query "select * from VIEW"` prints. A file is written under a temporary name and renamed
    once whole; files that exist are refused unless --force.

    Example: countersign ledger export build/demo-ledger --out build/demo-export
    """
    from ledger.analytics.export import FORMATS, ExportError
    from ledger.analytics.export import export as run_export

    if fmt not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    written: list = []
    try:
        covered = _coverage(directory)
        run_export(directory, out, fmt, views or None, force=force, written=written.append)
    except ExportError as exc:
        fail(str(exc))
    except (KeyboardInterrupt, Exception) as exc:
        if is_interrupt(exc):
            whole = ", ".join(str(w.path) for w in written) or "none"
            interrupted(f"the export stopped after {_count(len(written), 'file')} written whole ({whole}); the file in "
                        "progress was removed. Run the same command " + ("with --force to write every file anew" if written
                                                                         else "again"))
        _fail_on_query_error(exc)
        raise
    _history_warning(directory, covered, checked_rows=True)
    if as_json:
        echo_json([{"view": w.view, "path": str(w.path), "rows": w.rows} for w in written])
        return
    for w in written:
        say(f"{w.path}: {_count(w.rows, 'row')} of {w.view}")


@app.command()
def project(
    directory: str = typer.Argument(..., help="The ledger directory."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Start again from the first line (the projection is derived data)."),
    check: bool = typer.Option(False, "--check", help="Also rebuild it from the log alone elsewhere and compare: exit 1 if they differ."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
) -> None:
    """Make or refresh the ledger's columnar projection (DIR/projection/), which every view
    (`ledger query`, `stats`, `export`, `report`) reads; they refresh it themselves, so this
    command is for building it ahead of time, rebuilding it, or checking it.

    Only the lines after the last one projected are read; a segment that changed since (a
    redaction) is read again; if the last line projected is no longer in the log (a truncation or
    a rewrite: its hash differs) the projection is rebuilt from the log alone. A line that fails a
    check stops it there (exit 1): the views cover the lines before it.

    Example: countersign ledger project build/demo-ledger
    """
    from ledger.analytics import projection as proj
    from ledger.store.log import LedgerUnreadable

    try:
        result = proj.refresh(directory, rebuild=rebuild, progress=_progress())
        differ = proj.check(directory) if check else None
    except (LedgerUnreadable, proj.ProjectionError) as exc:
        fail(str(exc))
    except OSError as exc:  # the directory or a file of it cannot be read or written
        fail(f"{directory}: {exc.strerror or exc}")
    except (KeyboardInterrupt, Exception) as exc:
        if not is_interrupt(exc):
            raise
        interrupted(f"the projection of {directory} was not brought up to date; it is derived data, never the ledger: "
                    f"`countersign ledger project {directory}` again goes on from what it holds, or rebuilds it")
    if as_json:
        import msgspec

        where = str(proj._where(Path(directory), False) / proj.DATABASE)
        echo_json({**msgspec.to_builtins(result), "check_differs": differ, "database": where})
    else:
        if result.rebuilt:
            say(f"{directory}: projection built from the first line ({result.reason})")
        typer.echo(
            f"{directory}: projection covers {result.events} events, head {result.head} "
            f"({result.added} added in {result.seconds:.2f}s)"
        )
        say(f"  database: {proj._where(Path(directory), False) / proj.DATABASE} (any DuckDB client may open it read-only)")
        if result.problem is not None:
            say(f"  stopped at seq {result.problem_seq}: {result.problem}; the views cover the lines before it (run ledger verify)")
        if differ is not None:
            typer.echo(f"  check: {'identical to a rebuild from the log' if not differ else 'differs from a rebuild in ' + ', '.join(differ)}")
    if result.problem is not None or differ:
        raise typer.Exit(1)


@app.command()
def redact(
    directory: str = typer.Argument(..., help="The ledger directory."),
    seq: int = typer.Argument(..., help="The seq of the proposed or edited event whose data holds the value."),
    path: str = typer.Option(..., "--path", help="The field: args.card_number, args.items[0].cc, context.cwd."),
    reason: str = typer.Option(..., "--reason", help="Why (a legal basis, a ticket); recorded in the chain."),
    by: Optional[str] = typer.Option(None, "--by", help="Who redacts; recorded in the chain (default: the operating system's user name)."),
) -> None:
    """Remove one value (personal data, a secret) from the data beside an event, keeping verify
    passing: a `redacted` event is appended, then the value is replaced by a marker carrying its
    digest. The request must be final, and no Gate may have the ledger open.

    Example: countersign ledger redact build/demo-ledger 12 --path args.payment_method_id
    --reason "customer request #481" --by dpo@example.com
    """
    from ledger.store.log import LedgerError
    from ledger.proof.redact import control_character
    from ledger.proof.redact import redact as run_redact

    if by is None:
        import getpass

        try:
            by = getpass.getuser()
        except (KeyError, OSError):  # no user name known for this uid
            fail("no user name is known for this process; say who redacts with --by")
    for option, text in (("--reason", reason), ("--by", by)):
        bad = control_character(text)
        if bad is not None:  # a newline or an escape would print as a line of verify's own
            fail(f"{option} holds the control character {bad!r}; write it on one line of printable text")
    try:
        done = run_redact(directory, seq, path, reason=reason, by=by)
    except LedgerError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {exc.filename or directory}: {exc.strerror or exc}")
    if done.rewritten:
        say(f"{directory}: redacted {done.path} of seq {done.target} (recorded at seq {done.seq}; value digest {done.value_digest})")
    else:
        say(f"{directory}: {done.path} of seq {done.target} was already redacted (seq {done.seq})")


def _moment(text: Optional[str], option: str):
    """An ISO 8601 date or date-time given on the command line, as an aware datetime (UTC when
    it names no offset); exit 2 for anything else."""
    if text is None:
        return None
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"{option} must be a date or a date and time (ISO 8601: 2026-12-01 or 2026-12-01T09:30:00Z), not {text!r}")
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _umask() -> int:
    """The process's umask (os.umask only reads it by setting it: set back at once)."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _integrity(directory: str):
    """What verify says of the ledger now, for the report's header (and a warning, as `query`
    and `stats` give one, when it does not verify)."""
    from ledger.analytics.report import Integrity
    from ledger.proof.verify import verify as run_verify

    checked = run_verify(directory)
    p = checked.problem
    if p is None and checked.unreadable is None:
        return Integrity(ok=True, problem=None)
    problem = checked.unreadable or f"{'seq ' + str(p.seq) if p.seq is not None else 'the head'}: {p.kind}: {p.message}"
    say(f"warning: {directory} does not verify ({problem}); the report covers the lines before the first problem "
        "(the rows that verified)", err=True)
    return Integrity(ok=False, problem=problem)


@app.command()
def report(
    directory: str = typer.Argument(..., help="The ledger directory."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the report as one self-contained HTML page to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print the report's numbers as JSON (keys below)."),
    rubber_stamp: float = typer.Option(
        10.0, "--rubber-stamp", min=0, metavar="SECONDS",
        help="An approval given in less than this many seconds after its arguments were shown is a rubber stamp."),
    since: Optional[str] = typer.Option(None, "--since", help="Count from this time on (ISO 8601; UTC unless it says; default: the first event)."),
    until: Optional[str] = typer.Option(None, "--until", help="Count up to this time, excluded (default: up to the last event, included)."),
) -> None:
    """The approval-fatigue report: queue size over time, time to decision
    by tool and by reviewer (p50, p90), rubber-stamp approvals, edit and
    reject rates over time (drift), load per reviewer, the rules that raise
    the most asks and how often those end approved unchanged (allow-rule
    candidates), and expiries.

    --out writes one HTML page that needs no network (inline SVG charts, no
    script); --json prints the same numbers. Only ids, tools, rules,
    reviewers, counts and times appear, never a tool's arguments.
    Definitions: docs/report.md.

    JSON keys (stable; times UTC, durations seconds, shares 0..1 or null):
    generated_at, rubber_stamp_seconds;
    coverage {events, first_seq, last_seq, first_at, last_at, head};
    window {since, until, events, bucket, bucket_seconds};
    totals {requests, asks, ask_share, decided, approved,
    approved_unchanged, edited, rejected, responded, expired, cancelled,
    approvals, rubber_stamps, edit_share, reject_share, p50_seconds,
    p90_seconds};
    queue {waiting, oldest_seconds, peak, peak_at};
    buckets [{start, asks, decided, approved, edited, rejected, responded,
    expired, approvals, rubber_stamps, queue_max, queue_end, edit_share,
    reject_share}];
    rates {bucket, bucket_seconds, buckets [{start, decided, edited,
    rejected, edit_share, reject_share}]};
    by_tool, by_approver [{key, decisions, p50_seconds, p90_seconds}];
    rubber_stamps {threshold_seconds, approvals, rubber_stamps, share,
    histogram [{from_seconds, to_seconds, approvals, rubber_stamp}],
    by_approver [{approver, approvals, rubber_stamps, share}],
    recent [{request, tool, approver, seconds, at}]};
    load [{approver, actions, approve, edit, reject, respond, requests,
    rubber_stamps, share}];
    rules [{policy, rule, asks, ended, approved_unchanged, approved_edited,
    rejected, responded, expired, cancelled, pending, unchanged_share,
    candidate}];
    expiries {expired, ended, share, by_tool [{tool, expired}]};
    verify {ok, problem}.

    Example: countersign ledger report build/demo-ledger --out report.html
    """
    import os
    from datetime import datetime, timezone
    from pathlib import Path

    import msgspec

    if out is None and not as_json:
        fail("say where the page goes (--out report.html), or ask for the numbers (--json)")
    start, end = _moment(since, "--since"), _moment(until, "--until")
    if start is not None and end is not None and end <= start:
        fail("--until must be later than --since")
    target = None
    if out is not None:
        target = Path(out)
        try:
            inside = target.resolve().parent.is_relative_to(Path(directory).resolve())
        except OSError as exc:
            fail(f"{out}: {exc.strerror or exc}")
        if inside:
            fail(f"{out} is inside the ledger directory {directory}: write the report elsewhere")
        if target.is_dir():
            fail(f"{out} is a directory: name the file to write")
    from ledger.analytics.report import report as make_report

    try:
        from ledger.analytics.query import open_views

        with open_views(directory, progress=_progress()) as views:
            _coverage_warning(directory, views.coverage)
            numbers = make_report(views.con, now=datetime.now(timezone.utc), rubber_stamp_seconds=rubber_stamp,
                                  since=start, until=end)
    except ValueError as exc:  # a window with no time in it
        fail(str(exc))
    except Exception as exc:
        _fail_on_query_error(exc)
        raise
    numbers = msgspec.structs.replace(numbers, verify=_integrity(directory))
    if target is not None:
        from ledger.analytics.report_page import render

        page = render(numbers, ledger_name=directory).encode()
        import tempfile

        temporary = None
        try:
            # a fresh name made with O_EXCL (mkstemp): a predictable one could be a link planted
            # by whoever else writes that directory, and the page would overwrite what it points at
            handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            temporary = Path(name)
            with os.fdopen(handle, "wb") as stream:
                stream.write(page)
            os.chmod(temporary, 0o666 & ~_umask())
            os.replace(temporary, target)
        except OSError as exc:
            if temporary is not None:
                temporary.unlink(missing_ok=True)
            fail(f"cannot write {out}: {exc.strerror or exc}")
    if as_json:
        echo_json(numbers)
    else:
        c = numbers.coverage
        say(f"{out}: report of {_count(c.events, 'event')} (seq {c.first_seq} to {c.last_seq}), "
            f"{len(page) / 1024:,.0f} KB; head {c.head}")
