"""Output helpers shared by every command: errors, JSON, tables."""

from typing import Any, NoReturn, Sequence

import typer

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `error: message` to stderr and exit with `code` (2: bad input, 1: a failed check)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def echo_json(value: Any) -> None:
    """Print a msgspec-encodable value as indented JSON."""
    import msgspec

    typer.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """Render rows as a Rich table on stdout."""
    import sys

    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    for column in columns:
        t.add_column(str(column))
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    # Off a terminal Rich would squeeze the table into 80 columns; let it take what it needs.
    Console(width=None if sys.stdout.isatty() else 240).print(t)


def load_policy(path: str) -> Any:
    """Load a policy for a command, or exit 2 with its diagnostics (file:line:col, line, caret)."""
    from dsl import Policy, PolicyError

    try:
        return Policy.load(path)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except PolicyError as exc:
        typer.echo(exc.render(), err=True)
        n = len(exc.errors)
        typer.echo(f"{path}: {n} error{'s' if n != 1 else ''}; the policy was not loaded", err=True)
        raise typer.Exit(EXIT_USAGE)
