"""SQL over a ledger's history, answered from its columnar projection.

    with open_views("ledger-dir") as views:
        views.con.sql("SELECT tool, status, count(*) FROM requests GROUP BY ALL").show()
        views.coverage.events, views.coverage.complete
    answer = run("ledger-dir", "SELECT * FROM pending")   # columns, types, rows, coverage

Every query first refreshes the projection (ledger.analytics.projection): the first one builds it
from the log (every line read and checked once), later ones read only the lines appended since.
The views (`events`, `requests`, `pending`, `decision_times`, `rates_by_*`, `chain_breaks`,
`violations`, `torn_tail`, `coverage`; docs/views.md) are persistent views in the projection's
DuckDB file, which the query reads through a read-only connection.

The rows cover the lines the projection verified (`coverage`): on an intact ledger, all of them.
When a line fails a check, the projection stops before it and `coverage.complete` is false; the
problem is the one row of `chain_breaks` or `violations`. `source="log"` reads the log itself
through ledger.analytics.views instead (every line parsed at every query, the history as recorded,
lawful or not: minutes on a million events).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import msgspec

from ledger.analytics import projection as proj
from ledger.analytics.views import QueryRefused, _lit, check_select


class Coverage(msgspec.Struct, frozen=True, kw_only=True):
    """Which lines the rows cover. `events`: lines 1..events were checked and projected; `head`:
    the hash of line `events`; `complete`: every complete line of the log is covered;
    `problem_seq` / `problem`: the line that stopped the projection and why; `torn_bytes`: bytes
    after the last line feed (an unfinished write or a cut, which only a checkpoint or an expected
    head tells apart); `source`: "projection" or "log"; `built`: the projection was (re)built by
    this call (`reason`)."""

    events: int
    head: str
    complete: bool
    problem_seq: int | None = None
    problem: str | None = None
    torn_bytes: int = 0
    source: str = "projection"
    built: bool = False
    reason: str | None = None


class Answer(msgspec.Struct, kw_only=True):
    """What `run` returns: column names, their DuckDB types (text, e.g. `JSON`, `VARCHAR[]`), the
    rows (tuples of Python values), and the Coverage of the rows."""

    columns: list[str]
    types: list[str]
    rows: list[tuple]
    coverage: Coverage


class Views:
    """An open, read-only connection to the views (`con`) and the Coverage of their rows."""

    def __init__(self, con: Any, coverage: Coverage):
        self.con, self.coverage = con, coverage


def _coverage(result: proj.Refresh) -> Coverage:
    return Coverage(events=result.events, head=result.head, complete=result.complete, problem_seq=result.problem_seq,
                    problem=result.problem, torn_bytes=result.torn_bytes, built=result.rebuilt,
                    reason=result.reason if result.rebuilt else None)


@contextmanager
def open_views(path: str | Path, *, progress: proj.Progress | None = None) -> Iterator[Views]:
    """Refresh the projection of the ledger at `path` (building it when there is none) and yield
    Views over it (read-only when the projection was up to date, else the refreshing connection:
    run only SELECTs through it, as `run` does); the projection stays locked (no refresh by another process) until the block
    ends. `progress(done, total)` is told the bytes read while it refreshes. Raises
    ledger.store.log.LedgerUnreadable when `path` is not a ledger, projection.ProjectionError when
    no projection can be written (neither in the ledger's directory nor in the cache)."""
    import duckdb

    root = Path(path)
    for quick in (True, False):
        with proj.opened(root, progress=progress, quick=quick) as (con, result):
            if con is not None:  # it was refreshed: read through the same connection (a second open costs more)
                con.execute("RESET memory_limit")  # the refresh's bound; a query or an export may need more
                yield Views(con, _coverage(result))
                return
            pdir = proj._where(root, False)
            try:
                ro = proj._connect(pdir / proj.DATABASE, read_only=True)
            except duckdb.Error:
                if not quick:
                    raise
                (pdir / proj.STATE).unlink(missing_ok=True)  # damaged: the slow path rebuilds it
                continue
            try:
                yield Views(ro, _coverage(result))
            finally:
                ro.close()
            return


def _fetch(con, sql: str) -> tuple[list[str], list[str], list[tuple]]:
    cursor = con.execute(sql)
    description = cursor.description or []
    return [d[0] for d in description], [str(d[1]) for d in description], cursor.fetchall()


def run(path: str | Path, sql: str, *, source: str = "projection", progress: proj.Progress | None = None) -> Answer:
    """Run one read-only SQL statement over the views of the ledger at `path`.

    The statement must be a single SELECT: COPY, ATTACH, INSTALL, SET and the like are refused
    with QueryRefused (an audit query never writes), and the connection may read no file. With
    `source="log"` the statement runs over ledger.analytics.views (the log parsed in SQL). Raises
    QueryRefused, ledger.store.log.LedgerUnreadable, projection.ProjectionError, and duckdb errors
    for SQL that does not run."""
    if source == "log":
        from ledger.analytics import views as log_views

        con = log_views.connect(path)
        try:
            check_select(con, sql)
            con.execute(f"SET allowed_directories = [{_lit(str(Path(path).resolve()) + '/')}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
            columns, types, rows = _fetch(con, sql)
        finally:
            con.close()
        # the log read as recorded: nothing was checked, every line is a row (chain_breaks and
        # violations say what is wrong with any of them)
        return Answer(columns=columns, types=types, rows=rows,
                      coverage=Coverage(events=0, head="", complete=False, source="log"))
    if source != "projection":
        raise ValueError(f"source must be 'projection' or 'log', not {source!r}")
    with open_views(path, progress=progress) as views:
        con = views.con
        check_select(con, sql)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        columns, types, rows = _fetch(con, sql)
        return Answer(columns=columns, types=types, rows=rows, coverage=views.coverage)


def query(path: str | Path, sql: str) -> tuple[list[str], list[tuple]]:
    """`(column names, rows)` of `run(path, sql)`."""
    answer = run(path, sql)
    return answer.columns, answer.rows


def coverage(path: str | Path, *, progress: proj.Progress | None = None) -> Coverage:
    """The Coverage of the ledger's projection, refreshed first (built when there is none)."""
    with proj.opened(path, progress=progress, quick=True) as (_, result):
        return _coverage(result)


__all__ = ["Answer", "Coverage", "QueryRefused", "Views", "check_select", "coverage", "open_views", "query", "run"]
