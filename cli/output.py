"""Output helpers shared by every command: errors, JSON, tables."""

import re
from typing import Any, NoReturn, Sequence

import typer

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


# Characters a terminal acts on instead of showing: C0 and C1 controls and DEL (category Cc), the
# line and paragraph separators, and the bidirectional overrides and isolates, which can make text
# read in another order than it is stored; and lone surrogates, which cannot be printed at all.
_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: "re.Match[str]") -> str:
    c = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(text: str) -> str:
    """`text` with every control character written as its escape (ESC as \\x1b, a newline as
    \\n): text that came from a ledger, a proof or an agent can neither drive the terminal nor
    start a line of its own that looks like countersign's output."""
    if text.isascii() and text.isprintable():  # the common case, checked in C: nothing to escape
        return text
    return _UNSHOWN.sub(_escape, text)


def count(n: int, noun: str) -> str:
    """`1 rule`, `2 rules`, `1,024 values`: a count with its noun."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def say(text: str, err: bool = False) -> None:
    """typer.echo a line that may hold text from a ledger or a proof, its controls made visible."""
    typer.echo(visible(text), err=err)


def verified_before(report) -> str:
    """The line under a failed verification (a ledger.proof.verify.Report with a problem): how many
    events verified before it, and the last good head."""
    n = report.count
    events = f"{n:,} event{'' if n == 1 else 's'}"
    if report.problem is not None and report.problem.kind == "head":
        return f"  {events} verified, none of them with the expected head; the head is {report.head}"
    return f"  {events} before it verified; last good head {report.head}"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `error: message` to stderr and exit with `code` (2: bad input, 1: a failed check).
    The message is one line: a control character in it (a value from a ledger) is shown escaped."""
    typer.echo(f"error: {visible(message)}", err=True)
    raise typer.Exit(code)


def echo_json(value: Any) -> None:
    """Print a msgspec-encodable value as indented JSON. A string holding a lone surrogate (JSON
    input may carry one: `"\ud800"`) cannot be UTF-8: such a value is written with the standard
    library's encoder, which escapes it as JSON allows (`"\ud800"`) instead of failing."""
    import msgspec

    try:
        text = msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    except UnicodeEncodeError:
        import json

        text = json.dumps(msgspec.to_builtins(value), indent=2)
    typer.echo(text)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """Render rows as a Rich table on stdout. Every header and cell is a Text, never markup: a
    value such as `[/]` or `[bold]` (a tool name an agent chose) is shown as written, and its
    control characters escaped."""
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: Any) -> Text:
        return Text("" if value is None else visible(str(value)))

    t = Table(title=None if title is None else cell(title), show_lines=False)
    for column in columns:
        t.add_column(cell(column))
    for row in rows:
        t.add_row(*(cell(v) for v in row))
    # Off a terminal Rich would squeeze the table into 80 columns; let it take what it needs.
    Console(width=None if sys.stdout.isatty() else 240).print(t)


def columns(headers: Sequence[str], rows: Sequence[Sequence[Any]], widths: Sequence[int]) -> None:
    """Print rows as plain aligned columns, each at most its width in `widths` (a longer cell is
    cut and ends in …), two spaces apart: fast for thousands of rows, where a Rich table takes
    seconds, and readable in an 80-column terminal when the widths add up to less. Cells are
    shown with their control characters escaped (`visible`)."""
    def fit(value: Any, width: int) -> str:
        text = visible("" if value is None else str(value))
        return text if len(text) <= width else text[: width - 1] + "…"

    body = [[fit(v, w) for v, w in zip(row, widths)] for row in rows]
    used = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(u) for h, u in zip(headers, used)).rstrip()]
    lines += ["  ".join(c.ljust(u) for c, u in zip(r, used)).rstrip() for r in body]
    typer.echo("\n".join(lines))


def roster_groups(path: str | None) -> dict[str, tuple[str, ...]] | None:
    """The groups of the roster at `path` (name → members, `Roster.groups`), None without one;
    exit 2 with the roster's error (FILE:LINE: ...) when it cannot be read."""
    if path is None:
        return None
    from ledger.proof.roster import RosterError, load_roster

    try:
        return load_roster(path).groups()
    except RosterError as exc:
        fail(str(exc))


def load_policy(path: str, roster: str | None = None) -> Any:
    """Load a policy for a command, or exit 2 with its diagnostics (file:line:col, line, caret).
    With `roster` (a roster file), `approvers N from GROUP` may name the roster's groups."""
    from dsl import Policy, PolicyError

    groups = roster_groups(roster)
    try:
        return Policy.load(path, groups=groups)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except PolicyError as exc:
        typer.echo(exc.render(), err=True)
        n = len(exc.errors)
        typer.echo(f"{path}: {n} error{'s' if n != 1 else ''}; the policy was not loaded", err=True)
        raise typer.Exit(EXIT_USAGE)
