"""Output helpers shared by every command: errors, JSON, tables."""

import re
from typing import Any, NoReturn, Sequence

import typer

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


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
    """Print a value (a msgspec Struct, a dict, a list, ...) as JSON indented by two spaces,
    written by the convention of `emit` (`plain`, `json_text`): datetimes in UTC ending in Z,
    Decimals as numbers, controls escaped; a string holding a lone surrogate (JSON input may
    carry one: `"\\ud800"`) is written escaped, as JSON allows, instead of failing."""
    typer.echo(json_text(plain(value), indent=2))


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


_aligned = columns  # `emit` takes a parameter of that name


# --- Ctrl-C -------------------------------------------------------------------------------------

_reported = False  # whether this process already said what an interrupt left behind


def interrupted(message: str) -> NoReturn:
    """Ctrl-C stopped a command: print `interrupted: message` (what was written, how to go on)
    to stderr and exit 130. Later Ctrl-Cs are ignored, so the exit itself is not interrupted
    into a traceback."""
    global _reported
    ignore_interrupts()
    _reported = True
    typer.echo(f"interrupted: {visible(message)}", err=True)
    raise typer.Exit(EXIT_INTERRUPTED)


def is_interrupt(exc: BaseException) -> bool:
    """Whether `exc` is Ctrl-C: a KeyboardInterrupt, or how DuckDB reports the query it stopped
    on one (duckdb.InterruptException, or a RuntimeError "Query interrupted")."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if type(exc).__name__ == "InterruptException":
        return True
    return isinstance(exc, RuntimeError) and str(exc).strip() == "Query interrupted"


def interrupt_reported() -> bool:
    """Whether a command said what its interrupt left behind (`interrupted`); cli.main says
    something general for the ones that did not."""
    return _reported


def ignore_interrupts() -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class Interrupts:
    """Inside `with Interrupts() as i:` the first Ctrl-C (SIGINT) only asks to stop: `i.requested()`
    turns true, and the command stops at its next safe point (between two steps that must each
    be whole), saying so on stderr at once. A second Ctrl-C raises KeyboardInterrupt where the
    program is, as usual. Outside the main thread (where Python runs signal handlers) it does
    nothing: Ctrl-C raises KeyboardInterrupt as usual."""

    def __init__(self, notice: str = "stopping after the call in progress (Ctrl-C again stops at once)"):
        self.notice = notice
        self._asked = False
        self._previous: Any = None

    def requested(self) -> bool:
        return self._asked

    def _handle(self, signum: int, frame: Any) -> None:
        if self._asked:
            raise KeyboardInterrupt
        self._asked = True
        typer.echo(self.notice, err=True)

    def __enter__(self) -> "Interrupts":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal

        if self._previous is not None and signal.getsignal(signal.SIGINT) == self._handle:
            signal.signal(signal.SIGINT, self._previous)


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


# --- data output: one convention for every command that prints rows ------------------------------
#
# `--format table|csv|json|jsonl` (and `--json`, the same as `--format json`) on every command that
# prints rows. What each format writes, for every value DuckDB or a command may hand over:
#
# - json: one array of objects (a row → {column: value}), indented by two spaces; jsonl: one
#   object a line, compact (JSON Lines, https://jsonlines.org).
# - A JSON column (DuckDB type JSON, also inside a list or a struct) is its JSON value, never a
#   string holding JSON: the text `null` is null, `{"a":1}` an object. Lists are arrays, structs
#   and maps objects, Decimals numbers written exactly, timestamps ISO 8601 in UTC ending in Z
#   (the ledger's own spelling, six fraction digits; a timestamp without a zone is taken as
#   UTC, the views' zone), dates and times ISO 8601, intervals seconds, BLOBs base64 (RFC 4648),
#   UUIDs text, NaN and infinities null (JSON has no such numbers).
# - csv: RFC 4180 with a header row. A list, struct, map or JSON cell is its value as compact JSON
#   text (a JSON column's string value with its quotes: `"a"`), never a Python repr; SQL NULL is
#   the empty field; booleans true/false; the scalars as in json, unquoted.
# - table: aligned text for a person, cells written as in csv, control characters escaped.
# - Column names repeated in one result (`select 1 a, 2 a`) become distinct JSON keys: the
#   second `a` is `a_1`, as DuckDB names them in a table it creates.
#
# Every character a terminal would act on is written escaped in JSON (`\u001b`, `\u202e`: the same
# value, valid JSON); in csv it is escaped only when standard output is a terminal (a file or a
# pipe gets the data as it is).

FORMATS = ("table", "csv", "json", "jsonl")


def format_option(default: str = "table", formats: Sequence[str] = FORMATS, what: str = "") -> Any:
    """The `--format` typer Option of a command that prints rows (`what`: text appended to the help)."""
    return typer.Option(default, "--format", metavar="|".join(formats),
                        help=f"Output format: {', '.join(formats)} (--json is --format json){what}.")


def chosen_format(fmt: str, as_json: bool, formats: Sequence[str] = FORMATS) -> str:
    """The format a command was asked for: `--json` means json; exit 2 for a format it does not
    write, or for --json beside another --format."""
    fmt = fmt.strip().lower()
    if fmt not in formats:
        fail(f"--format must be one of {', '.join(formats)}, not {fmt!r}")
    if as_json and fmt not in ("json", formats[0]):
        fail(f"--json is --format json: give one of them, not --json with --format {fmt}")
    return "json" if as_json else fmt


def _utc_text(moment: Any) -> str:
    from datetime import timezone

    from ledger.clock import format_ts

    return format_ts(moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc))


def plain(value: Any) -> Any:
    """`value` (a DuckDB result value, or any msgspec-encodable one) as the JSON value it is written
    as (see the comment above): None, bool, int, float, Decimal, str, list and dict (str keys) only."""
    import base64
    import datetime as dt
    import decimal
    import enum

    if value is None or isinstance(value, (bool, int, float, str, decimal.Decimal)):
        return value
    if isinstance(value, dt.datetime):
        return _utc_text(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k if isinstance(k, str) else cell(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=json_text)
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "__struct_fields__") or hasattr(value, "__dataclass_fields__"):
        import msgspec

        return plain(msgspec.to_builtins(value, builtin_types=(dt.datetime, dt.date, dt.time, dt.timedelta, decimal.Decimal)))
    return str(value)  # UUID, an enum's member, anything else: its text


def _is_json(duck_type: Any) -> bool:
    return duck_type is not None and str(duck_type) == "JSON"


def _holds_json(duck_type: Any) -> bool:
    """Whether a DuckDB type is JSON or holds JSON inside a list, array, struct or map."""
    if duck_type is None:
        return False
    if _is_json(duck_type):
        return True
    if getattr(duck_type, "id", None) in ("list", "array", "struct", "map", "union"):
        return any(_holds_json(child) for _name, child in duck_type.children if not isinstance(child, int))
    return False


def _parse_json(text: Any) -> Any:
    import msgspec

    if not isinstance(text, str):
        return plain(text)
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:  # not JSON after all (DuckDB checks a JSON cast): keep the text
        return text


def _converter(duck_type: Any):
    """A function from a DuckDB value of `duck_type` to its JSON value (`plain`), parsing the JSON
    it holds (a JSON column arrives as a str; so does a JSON member of a struct or a list)."""
    if not _holds_json(duck_type):
        return plain
    if _is_json(duck_type):
        return lambda v: None if v is None else _parse_json(v)
    children = dict((name, child) for name, child in duck_type.children)
    if duck_type.id in ("list", "array"):
        each = _converter(children["child"])
        return lambda v: None if v is None else [each(x) for x in v]
    if duck_type.id == "map":
        value = _converter(children["value"])
        return lambda v: None if v is None else {k if isinstance(k, str) else cell(plain(k)): value(x) for k, x in v.items()}
    if duck_type.id == "struct":
        members = {name: _converter(child) for name, child in children.items()}
        return lambda v: None if v is None else {k: members.get(k, plain)(x) for k, x in v.items()}
    return plain  # a union: its member's value as it came


def duck_types(types: Sequence[Any] | None, n: int) -> list[Any]:
    """`n` DuckDB types from a cursor's description type codes or DESCRIBE's type names (text);
    None for each one unknown (its values are then written by their Python type)."""
    if types is None or len(types) != n:
        return [None] * n
    out = []
    for t in types:
        if isinstance(t, str):
            import duckdb

            try:
                t = duckdb.sqltype(t)
            except Exception:  # a type this DuckDB cannot spell back: write its values by their Python type
                t = None
        out.append(t)
    return out


_COMPACT = None
# What `visible` escapes but the JSON encoder leaves as it is (it escapes the C0 controls, and a
# raw line feed in its text is the indentation's).
_JSON_UNSHOWN = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _encoder():
    global _COMPACT
    if _COMPACT is None:
        import msgspec

        _COMPACT = msgspec.json.Encoder(decimal_format="number")
    return _COMPACT


def _without_surrogates(value: Any, found: list[str], mark: str) -> Any:
    """`value` with every string (value or key) holding a lone surrogate, which UTF-8 cannot
    hold, replaced by the placeholder `\\x00MARK:N\\x00` (N its place in `found`; MARK random,
    so that no string of the value can be mistaken for one)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            found.append(value)
            return f"\x00{mark}:{len(found) - 1}\x00"
    if isinstance(value, list):
        return [_without_surrogates(v, found, mark) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k, found, mark): _without_surrogates(v, found, mark) for k, v in value.items()}
    return value


def json_text(value: Any, indent: int | None = None) -> str:
    """A `plain` value as JSON text: compact, or indented by `indent`; every character a terminal
    acts on (controls, DEL, C1, line separators, bidirectional overrides) written as its \\u
    escape, which JSON allows anywhere in a string and which stands for the same character. A
    lone surrogate (JSON input may carry `"\\ud800"`) is written as that escape too."""
    import msgspec

    found: list[str] = []
    try:
        data = _encoder().encode(value)
    except UnicodeEncodeError:
        import secrets

        mark = secrets.token_hex(8)
        data = _encoder().encode(_without_surrogates(value, found, mark))
    if indent is not None:
        data = msgspec.json.format(data, indent=indent)
    text = data.decode("utf-8")
    if found:  # each placeholder back as the standard library writes the string: "\ud800"
        import json

        for n, original in enumerate(found):
            text = text.replace(f'"\\u0000{mark}:{n}\\u0000"', json.dumps(original), 1)
    if text.isascii():  # C0 controls are escaped by the encoder already; DEL is ASCII
        return text.replace("\x7f", "\\u007f")
    return _JSON_UNSHOWN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def cell(value: Any) -> str:
    """A `plain` value as one CSV field or table cell: the empty text for None, true/false,
    numbers and text as they are, a list or an object as compact JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json_text(value)
    return str(value)


def _keys(columns: Sequence[str]) -> list[str]:
    """The column names as distinct JSON keys: a repeated `a` becomes `a_1`, `a_2`, ..."""
    seen: set[str] = set()
    out = []
    for name in columns:
        key, n = name, 0
        while key in seen:
            n += 1
            key = f"{name}_{n}"
        seen.add(key)
        out.append(key)
    return out


def emit(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, types: Sequence[Any] | None = None, *,
         widths: Sequence[int] | None = None, title: str | None = None) -> None:
    """Print rows in `fmt` (table, csv, json or jsonl; the rules in the comment above) on stdout.

    `columns` are the names; `rows` hold DuckDB or Python values (lists, dicts and structs,
    datetimes, Decimals, bytes, ...); `types` the DuckDB type of each column (a cursor's
    description type codes, or DESCRIBE's type names), which say which ones hold JSON (read as
    text otherwise). The table is `columns()`'s plain aligned text when `widths` is given (fast
    for many rows), else a Rich table under `title`."""
    import sys

    convert = [_converter(t) for t in duck_types(types, len(columns))]
    if fmt in ("json", "jsonl"):
        keys = _keys(columns)
        objects = ({k: c(v) for k, c, v in zip(keys, convert, row)} for row in rows)
        if fmt == "json":
            typer.echo(json_text(list(objects), indent=2))
        else:
            write = sys.stdout.write
            for obj in objects:
                write(json_text(obj) + "\n")
            sys.stdout.flush()
        return
    # A JSON column's value is written as JSON text, so that `"a"` (a JSON string) and `a` (the
    # bare word, which is not JSON) stay apart: the same text as in the json format.
    json_columns = [_is_json(t) for t in duck_types(types, len(columns))]

    def text(c, is_json, v):
        value = c(v)
        return json_text(value) if is_json and v is not None else cell(value)

    cells = ([text(c, j, v) for c, j, v in zip(convert, json_columns, row)] for row in rows)
    if fmt == "csv":
        import csv

        shown = sys.stdout.isatty()
        writer = csv.writer(sys.stdout)
        writer.writerow([visible(c) if shown else _printable(c) for c in columns])
        for row in cells:
            writer.writerow([visible(c) if shown else _printable(c) for c in row])
        sys.stdout.flush()
    elif widths is not None:
        _aligned(columns, list(cells), widths)
    else:
        table(columns, list(cells), title=title)


def _printable(text: str) -> str:
    """`text`, with a lone surrogate (which UTF-8 cannot hold) written as the text `\\ud800`."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def integrity_warning(directory: str) -> None:
    """Numbers from a ledger that does not verify describe a history that may not be true: say so
    on stderr (ledger.proof.verify, the compiled verifier when it is built)."""
    from ledger.proof.verify import verify as run_verify

    report = run_verify(directory)
    if report.problem is not None:
        p = report.problem
        where = f"seq {p.seq}" if p.seq is not None else "the head"
        say(f"warning: {directory} does not verify ({where}: {p.kind}: {p.message}); "
            "these results describe the history as recorded", err=True)
