"""Export a ledger's views to files that analysts' tools read: Parquet, CSV or JSON Lines.

    written = export("ledger-dir", "out-dir", "parquet", None)   # every view, one file each
    [(w.view, w.path, w.rows) for w in written]

Each view goes to OUT/<view>.<ext> (`parquet`, `csv`, `jsonl`), written by DuckDB's COPY
(https://duckdb.org/docs/sql/statements/copy) from the connection of ledger.analytics.views:

- parquet keeps every column's type: integers, doubles, booleans, TIMESTAMPTZ (UTC), JSON (a
  string column with Parquet's JSON logical type, which DuckDB reads back as JSON), lists and
  structs as Parquet's nested types.
- csv (RFC 4180, a header row, SQL NULL as the empty field): a list, struct or map as its compact
  JSON text (DuckDB's to_json), a JSON column as its JSON text, a time as ISO 8601 in UTC ending in
  Z (2026-01-05T09:00:20.000000Z, the ledger's spelling), a BLOB as base64.
- jsonl (one JSON object a line, https://jsonlines.org): JSON columns as JSON values, lists as
  arrays, structs as objects, times and BLOBs as in csv.

These are the conventions of `countersign ledger query --format` (cli.output), so an exported
file and a query's output agree. A time inside a list or a struct (no view has one today) keeps
DuckDB's own spelling in csv and jsonl.

A file is written under a temporary name beside its target and renamed into place once whole, so
an interrupted or failed export never leaves a file that looks complete. Existing targets are
refused (ExportError, before anything is written) unless `force`.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

FORMATS = {"parquet": "parquet", "csv": "csv", "jsonl": "jsonl"}  # format → file extension
# Views that are not data to analyse: the raw line pieces and the bytes of a torn tail.
SKIPPED = ("ledger_lines", "torn_tail")
TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # ledger.clock.format_ts, in DuckDB's strftime


class ExportError(ValueError):
    """The export cannot be made as asked: an unknown format or view, targets that exist."""


class Written(NamedTuple):
    """One file written: the view, where, and how many rows."""

    view: str
    path: Path
    rows: int


@contextmanager
def _connection(path: str | Path):
    """The DuckDB connection whose views are exported (the only place this module gets one): the
    projection's (ledger.analytics.query.open_views), refreshed first."""
    from ledger.analytics.query import open_views

    with open_views(path) as views:
        yield views.con


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_names(con) -> list[str]:
    """Every view to export by default: those of ledger.analytics.views.VIEWS but SKIPPED, in
    that order, then any other view the connection has (not DuckDB's own, not one whose name
    starts with `_`: a helper of the others), by name."""
    from ledger.analytics.views import VIEWS

    present = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    known = [v for v in VIEWS if v not in SKIPPED and v in present]
    others = sorted(v for v in present if v not in VIEWS and not v.startswith("_"))
    return known + others


def _select(con, view: str, fmt: str) -> str:
    """The SELECT that COPY writes for `view` in `fmt`: every column as it is for parquet; for csv
    and jsonl, times as ISO 8601 text in UTC, BLOBs as base64, and (csv) nested values as JSON."""
    if fmt == "parquet":
        return f"SELECT * FROM {_quote(view)}"
    columns = con.execute(f"DESCRIBE SELECT * FROM {_quote(view)}").fetchall()
    out = []
    for name, kind, *_rest in columns:
        q = _quote(name)
        if kind in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMP"):
            out.append(f"strftime({q}, {_literal(TS_FORMAT)}) AS {q}")
        elif kind == "BLOB":
            out.append(f"to_base64({q}) AS {q}")
        elif fmt == "csv" and (kind.endswith("]") or kind.startswith(("STRUCT(", "MAP(", "UNION("))):
            out.append(f"CAST(to_json({q}) AS VARCHAR) AS {q}")
        else:
            out.append(q)
    return f"SELECT {', '.join(out) or '*'} FROM {_quote(view)}"


_OPTIONS = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER true", "jsonl": "FORMAT json"}


def export(path: str | Path, out: str | Path, fmt: str = "parquet", views: Iterable[str] | None = None, *,
           force: bool = False, written: Callable[[Written], None] | None = None) -> list[Written]:
    """Write each of `views` (None: `view_names`, every view but SKIPPED) of the ledger at `path`
    to OUT/<view>.<ext> in `fmt` (parquet, csv or jsonl), creating the directory `out`. Returns
    what was written, in order; `written` is called with each file as soon as it is whole (what
    a caller stopped part way, by Ctrl-C, can report).

    Raises ExportError for an unknown format or view, or when a target exists and not `force`
    (then nothing is written); ledger.store.log.LedgerUnreadable when `path` is not a ledger;
    OSError when `out` cannot be written; duckdb.Error when a view cannot be read. A file is
    complete once it has its name: each is written under a temporary name and renamed."""
    if fmt not in FORMATS:
        raise ExportError(f"the format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    out = Path(out)
    with _connection(path) as con:
        con.execute("SET TimeZone = 'UTC'")  # the times written are UTC whatever the connection's default
        available = view_names(con)
        if views is None:
            chosen = available
        else:
            chosen = list(dict.fromkeys(views))
            present = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
            unknown = [v for v in chosen if v not in present or v.startswith("_")]
            if unknown:
                raise ExportError(f"no such view: {', '.join(unknown)} (the views: {', '.join(available + list(SKIPPED))})")
        targets = [(v, out / f"{v}.{FORMATS[fmt]}") for v in chosen]
        existing = [str(t) for _v, t in targets if t.exists() or t.is_symlink()]
        if existing and not force:
            raise ExportError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: nothing was "
                              "written (--force replaces them)")
        out.mkdir(parents=True, exist_ok=True)
        done = []
        for view, target in targets:
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            try:
                rows = con.execute(f"COPY ({_select(con, view, fmt)}) TO {_literal(str(temporary))} ({_OPTIONS[fmt]})").fetchone()
                os.replace(temporary, target)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
            done.append(Written(view, target, int(rows[0]) if rows else 0))
            if written is not None:
                written(done[-1])
        return done
