"""Analytics at scale (issue 13, section 1): three questions about a ledger's history, and `ledger
stats`, answered by countersign and, side by side in the same run, by DuckDB on the raw JSON Lines
and on a native DuckDB table of the same rows.

The questions (their SQL in QUESTIONS, and written into the results):

1. requests by status          countersign: the `requests` view, grouped by status
2. time to decision p50 by tool countersign: the `decision_times` view, quantile_cont(seconds, 0.5)
3. approvals per approver      countersign: the `rates_by_approver` view (approvers who only
                                rejected, edited or responded included, with 0)

and `ledger stats` (ledger.analytics.stats.stats; the baselines compute the same numbers in one query).

On a ledger of N events (bench.ledger_gen's agent workload, default 1,000,000), its segments
hard-linked into a directory of this benchmark's own (the last one copied) so that whatever
countersign builds beside them (DIR/projection/) is built here, from nothing, on every run:

- countersign warm: in this process, `ledger.analytics.query.query(DIR, SQL)` (what `countersign
  ledger query` runs: the views of the columnar projection, refreshed first) and `ledger.analytics.stats.stats(DIR)`: the first call timed alone (it may
  build the projection: reported as `first_ms`), then the median of REPEATS further calls.
- countersign cold: a new process per call, `countersign ledger query DIR SQL --format json` for
  each question and `countersign ledger stats DIR --json`: spawn to exit, and the process's peak
  resident memory (ru_maxrss of os.wait4, from a small launcher process: see _LAUNCH). The files
  are in the page cache by then ("cold" is the process, not the disk).
- DuckDB `read_json_auto` on the same segments (`DIR/events-*.jsonl`, default options), one
  connection, warm (median of REPEATS after a first call).
- DuckDB native table: `CREATE TABLE ledger_rows AS SELECT * FROM read_json_auto(...)` in a
  database file beside the ledger (its build, checkpoint included, reported apart), then the same
  SQL over the table, warm. The targets compare with this side.
- DuckDB native table of requests folded at its build (`folded_requests`, made from `ledger_rows`
  with the baselines' fold; build reported apart): questions 1, 2 and stats read it, question 3
  reads `ledger_rows`. Not a target: what a store that keeps requests folded (as countersign's
  projection does) costs at best.
- refresh: the ledger copied (bench.ledger_stats._copy_for_appending: hard links but the last
  segment, the projection copied when there is one), 3 events appended by a real writer and
  question 1 asked on the copy (once to settle, then the median of 3: "nothing new"). The 3 first
  events make the copy a ledger a writer has opened before, as any live ledger is: the first writer
  creates its LOCK and WRITERS files, which changes the directory, and a projection reads its head
  segment again after the directory changed (a rename over a segment changes it too). Then 9,999
  lawful events appended by a real writer
  (bench.ledger_stats._append_lawful), question 1 asked once more: refresh = that time less the
  "nothing new" time: what reading, checking and folding the new lines into the projection
  costs (the target counts as not met while the "nothing new" queries spread wider than it).

Every answer is compared with countersign's warm answer (`agree` in the results): the cold CLI's
JSON, both baselines, and after the append the new counts. How the baselines were made fair:

- They read the same bytes and answer the same questions with one SQL statement each. To fold a
  request (status, decision and its time) they need the request's events: one GROUP BY request
  takes the last event's kind, the last rejection, response, expiry or cancel, and the approvals
  since the last edit (an edit is the editor's approval) counted against the largest quorum count
  in force; a deny is decided at its proposal. That is the workflow of ledger.workflow as the
  generated ledgers exercise it (no standing decisions, no approver groups), not all of it; the
  agreement check says whether it sufficed on this run, and tests/test_bench_analytics.py checks
  it on expiries, cancels, edits and a partial quorum. (The same fold with window functions took
  twice as long: the faster SQL is the fairer baseline.)
- They trust every line: no hash, chain, layout, schema or workflow check, which countersign makes
  once per line when it projects it (at the first query, which `first_ms` reports).
- The native table is built once and never refreshed; its build time is reported, not counted.
- DuckDB runs with its defaults (threads = cores) everywhere; countersign opens a new connection per
  call, as the CLI does.

Targets (TARGETS; issue 13, for 1,000,000 events; checked at any N, the results say which N):
each question and stats ≤ 1 s warm and ≤ 3× the native table's time in the same run; a cold CLI
call ≤ 2 s; peak memory of a cold CLI call ≤ 500 MB; refresh after 10,000 new events ≤ 200 ms.

    python -m bench --only analytics                                  # 1,000,000 events
    python -m bench --only analytics --events 100000 --label analytics-before
    python -m bench --only analytics --analytics-parts baselines      # the DuckDB sides alone
    python -m bench --only analytics --events 10000 --analytics-repeats 3 --no-write

Parts (--analytics-parts, comma-separated): baselines, warm, cold, refresh. `make bench` (the full
run) includes this part at 1,000,000 events (100,000 with --quick). Results:
bench/results/<date>-<label>-analytics.json (or <date>-<label>.json when the label says analytics).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench import ledger_gen
from bench.ledger_stats import _append_lawful, _copy_for_appending
from bench.timing import ROOT, environment, loadavg

RESULTS = ROOT / "bench" / "results"
EVENTS = 1_000_000
REPEATS = 5
APPENDED = 10_000  # _append_lawful writes whole requests of 3 events: 9,999
PARTS = ("baselines", "warm", "cold", "refresh")
MB = 1_000_000

TARGETS = {
    "events": EVENTS,
    "warm_ms": {"what": "each question and stats, countersign warm (median after the first call), ms", "max": 1000},
    "warm_vs_native": {"what": "each question and stats, countersign warm / the native DuckDB table's time "
                       "for the same question in the same run", "max": 3.0},
    "cold_cli_ms": {"what": "each cold CLI call (`ledger query ... --format json`, `ledger stats --json`), "
                    "spawn to exit, ms", "max": 2000},
    "peak_memory_mb": {"what": "peak resident memory of each cold CLI call, MB (10^6 bytes)", "max": 500},
    "refresh_ms": {"what": "the next query after 10,000 new events less the same query with nothing new, ms",
                   "max": 200},
}

# --- the questions -------------------------------------------------------------------------------

# The baselines' fold of the raw lines into requests, in one pass (GROUP BY request): the last
# event's kind gives the status; the approvals since the last edit (an edit is the editor's
# approval), counted against the largest quorum count in force, say whether an approval decided;
# a later rejection, response, expiry or cancel is the last decision. @SOURCE is read_json_auto(...)
# or the table; @MATERIALIZED is set where `e` is read twice (stats).
_FOLD = """
e AS @MATERIALIZED (
    SELECT body.seq AS seq, body.kind AS kind,
           CASE WHEN body.kind = 'proposed' THEN body.seq ELSE body.request END AS request,
           CAST(body.ts AS TIMESTAMPTZ) AS ts, body.tool AS tool, body.effect AS effect,
           body.outcome AS outcome,
           list_max(list_transform(body.requirements.quorums, lambda q: q.count)) AS quorum
    FROM @SOURCE
),
per_request AS (
    SELECT request,
           any_value(tool) FILTER (WHERE kind = 'proposed') AS tool,
           any_value(effect) FILTER (WHERE kind = 'proposed') AS effect,
           any_value(ts) FILTER (WHERE kind = 'proposed') AS proposed_at,
           arg_max(kind, seq) AS last_kind,
           arg_max(kind, seq) FILTER (WHERE kind IN ('rejected', 'responded', 'expired', 'cancelled')) AS final_kind,
           max(ts) FILTER (WHERE kind IN ('rejected', 'responded', 'expired', 'cancelled')) AS final_at,
           arg_max(quorum, seq) FILTER (WHERE quorum IS NOT NULL) AS quorum,
           coalesce(max(seq) FILTER (WHERE kind = 'edited'), 0) AS last_edit,
           list(struct_pack(seq := seq, ts := ts) ORDER BY seq) FILTER (WHERE kind IN ('approved', 'edited')) AS acts,
           count(*) FILTER (WHERE kind = 'edited') > 0 AS edited,
           arg_max(outcome, seq) FILTER (WHERE kind = 'executed') AS outcome
    FROM e WHERE request IS NOT NULL GROUP BY request
),
approvals AS (
    SELECT *, list_filter(coalesce(acts, []), lambda a: a.seq >= last_edit) AS current
    FROM per_request WHERE tool IS NOT NULL
),
folded AS (
    SELECT request, tool, effect, proposed_at, edited, outcome,
           CASE WHEN effect = 'deny' THEN 'deny'
                WHEN final_kind IS NOT NULL THEN CASE final_kind WHEN 'rejected' THEN 'reject' WHEN 'responded' THEN 'respond'
                                                                 WHEN 'expired' THEN 'expire' ELSE 'cancel' END
                WHEN len(current) >= quorum THEN 'approve' END AS decision,
           CASE WHEN effect = 'deny' THEN proposed_at
                WHEN final_kind IS NOT NULL THEN final_at
                WHEN len(current) >= quorum THEN current[quorum].ts END AS decided_at,
           CASE last_kind
               WHEN 'proposed' THEN CASE effect WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied'
                                                ELSE 'interrupting' END
               WHEN 'interrupted' THEN 'pending'
               WHEN 'approved' THEN CASE WHEN len(current) >= quorum THEN 'approved' ELSE 'pending' END
               WHEN 'edited' THEN CASE WHEN len(current) >= quorum THEN 'approved' ELSE 'pending' END
               WHEN 'rejected' THEN 'rejected' WHEN 'responded' THEN 'responded'
               WHEN 'expired' THEN 'expired' WHEN 'cancelled' THEN 'cancelled'
               WHEN 'execution_started' THEN 'executing' WHEN 'executed' THEN 'executed'
           END AS status
    FROM approvals
)"""
_FOLD_ONCE = _FOLD.replace("@MATERIALIZED ", "")

_BY_STATUS = "SELECT status, count(*) AS requests FROM @REQUESTS GROUP BY status ORDER BY status"
_P50_BY_TOOL = """SELECT tool, quantile_cont((epoch_us(decided_at) - epoch_us(proposed_at)) / 1e6, 0.5) AS p50_seconds
FROM @REQUESTS WHERE effect = 'ask' AND decision IS NOT NULL GROUP BY tool ORDER BY tool"""
# Every reviewer who acted (as rates_by_approver), with the number of approved events.
_APPROVALS = """SELECT coalesce(body.approver, body.editor) AS approver,
       count(*) FILTER (WHERE body.kind = 'approved') AS approvals
FROM @SOURCE WHERE body.kind IN ('approved', 'edited', 'rejected', 'responded')
GROUP BY 1 ORDER BY 1"""

# Per question: the SQL over countersign's views; the baselines' (@SOURCE: read_json_auto(...) or
# the native table); and over a native table of requests folded at its build (`folded`).
QUESTIONS: dict[str, dict[str, str]] = {
    "requests_by_status": {
        "what": "requests by status",
        "countersign": "SELECT status, count(*) AS requests FROM requests GROUP BY status ORDER BY status",
        "baseline": "WITH" + _FOLD_ONCE + "\n" + _BY_STATUS.replace("@REQUESTS", "folded"),
        "folded": _BY_STATUS.replace("@REQUESTS", "folded_requests"),
    },
    "decision_p50_by_tool": {
        "what": "time to decision p50 by tool",
        "countersign": "SELECT tool, quantile_cont(seconds, 0.5) AS p50_seconds FROM decision_times "
        "GROUP BY tool ORDER BY tool",
        "baseline": "WITH" + _FOLD_ONCE + "\n" + _P50_BY_TOOL.replace("@REQUESTS", "folded"),
        "folded": _P50_BY_TOOL.replace("@REQUESTS", "folded_requests"),
    },
    "approvals_by_approver": {
        "what": "approvals per approver",
        "countersign": "SELECT approver, approve AS approvals FROM rates_by_approver ORDER BY approver",
        "baseline": _APPROVALS,
        "folded": _APPROVALS.replace("@SOURCE", "ledger_rows"),  # needs no fold
    },
}

# ledger.analytics.stats.Stats's numbers (as_of and the oldest pending age left out).
_STATS = """r AS MATERIALIZED (
    SELECT tool, effect, status, decision, edited, outcome,
           (epoch_us(decided_at) - epoch_us(proposed_at)) / 1e6 AS seconds
    FROM @REQUESTS
),
tools AS (
    SELECT tool, struct_pack(
               requests := count(*),
               allowed := count(*) FILTER (WHERE effect = 'allow'),
               denied := count(*) FILTER (WHERE effect = 'deny'),
               asks := count(*) FILTER (WHERE effect = 'ask'),
               approved := count(*) FILTER (WHERE effect = 'ask' AND decision = 'approve'),
               rejected := count(*) FILTER (WHERE effect = 'ask' AND decision = 'reject'),
               responded := count(*) FILTER (WHERE effect = 'ask' AND decision = 'respond'),
               expired := count(*) FILTER (WHERE effect = 'ask' AND decision = 'expire'),
               cancelled := count(*) FILTER (WHERE effect = 'ask' AND decision = 'cancel'),
               edited := count(*) FILTER (WHERE effect = 'ask' AND edited),
               pending := count(*) FILTER (WHERE status = 'pending'),
               executed := count(*) FILTER (WHERE outcome = 'ok'),
               failed := count(*) FILTER (WHERE outcome = 'error')) AS counts
    FROM r GROUP BY tool
)
SELECT (@EVENTS) AS events,
       (SELECT count(*) FROM r) AS requests,
       (SELECT list(struct_pack(k := status, n := n)) FROM (SELECT status, count(*) AS n FROM r GROUP BY status)) AS by_status,
       (SELECT list(struct_pack(k := decision, n := n))
          FROM (SELECT decision, count(*) AS n FROM r WHERE decision IS NOT NULL GROUP BY decision)) AS decisions,
       (SELECT count(*) FROM r WHERE status = 'pending') AS pending,
       (SELECT count(*) FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS decided_asks,
       (SELECT quantile_cont(seconds, 0.5) FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS decision_p50_seconds,
       (SELECT quantile_cont(seconds, 0.9) FROM r WHERE effect = 'ask' AND decision IS NOT NULL) AS decision_p90_seconds,
       (SELECT count(*) FROM r WHERE effect = 'ask') AS asks,
       (SELECT count(*) FROM r WHERE effect = 'ask' AND edited) AS edited_asks,
       (SELECT list(struct_pack(k := tool, v := counts)) FROM tools) AS by_tool"""
STATS_BASELINE = ("WITH" + _FOLD.replace("@MATERIALIZED", "MATERIALIZED") + ",\n"
                  + _STATS.replace("@REQUESTS", "folded").replace("@EVENTS", "SELECT count(*) FROM e"))
STATS_FOLDED = "WITH " + _STATS.replace("@REQUESTS", "folded_requests").replace("@EVENTS", "SELECT count(*) FROM ledger_rows")
FOLDED_TABLE = "CREATE TABLE folded_requests AS WITH" + _FOLD_ONCE.replace("@SOURCE", "ledger_rows") + "\nSELECT * FROM folded"

STATS_KEYS = ("events", "requests", "by_status", "pending", "decisions", "decided_asks", "decision_p50_seconds",
              "decision_p90_seconds", "asks", "edited_asks", "by_tool")
NAMES = (*QUESTIONS, "stats")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# --- answers, normalised for comparison ------------------------------------------------------------


def _value(v: Any) -> Any:
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, 6)
    return v


def _rows(rows) -> list[list]:
    return [[_value(v) for v in row] for row in rows]


def _stats_answer(d: dict) -> dict:
    """The comparable part of a Stats (as builtins) or of the baseline's stats row."""
    out = {k: d.get(k) for k in STATS_KEYS}
    for k in ("decision_p50_seconds", "decision_p90_seconds"):
        out[k] = _value(out[k])
    for k in ("by_status", "decisions"):
        if isinstance(out[k], list):  # the baseline's list of {k, n}
            out[k] = {e["k"]: e["n"] for e in out[k]}
        out[k] = dict(sorted((out[k] or {}).items()))
    if isinstance(out["by_tool"], list):
        out["by_tool"] = {e["k"]: e["v"] for e in out["by_tool"]}
    out["by_tool"] = {t: dict(sorted(c.items())) for t, c in sorted((out["by_tool"] or {}).items())}
    return out


def _first_difference(a: Any, b: Any) -> str | None:
    if a == b:
        return None
    return f"{json.dumps(a, default=str)[:300]} != {json.dumps(b, default=str)[:300]}"


# --- timing ---------------------------------------------------------------------------------------


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _warm(call: Callable[[], Any], repeats: int) -> tuple[dict, Any]:
    """The first call alone, then the median (min, max) of `repeats` more; (timings, last answer)."""
    started = time.perf_counter()
    answer = call()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - started)
    return {"first_ms": _ms(first), "median_ms": _ms(statistics.median(times)) if times else None,
            "min_ms": _ms(min(times)) if times else None, "max_ms": _ms(max(times)) if times else None,
            "calls": repeats}, answer


def _cli() -> list[str]:
    """The `countersign` console script beside this interpreter, else `python -m cli.entry` (what the
    script runs)."""
    script = Path(sys.executable).parent / "countersign"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "cli.entry"]


# Runs one command and reports its wall time and peak memory. A launcher of its own because Linux
# carries a process's peak RSS across exec: a child spawned straight from this process (hundreds of
# MB once DuckDB has run here) would report this process's peak as its own. Forked from this small
# process instead, the command's ru_maxrss is its own (at least the launcher's ~10 MB).
_LAUNCH = """
import json, os, sys, time
argv, out, err = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_pid, status, usage = os.wait4(pid, 0)
took = time.perf_counter() - started
print(json.dumps({"seconds": took, "maxrss": usage.ru_maxrss, "exit": os.waitstatus_to_exitcode(status)}))
"""


def _cold(argv: list[str]) -> dict:
    """One new process: wall ms from spawn to exit, its peak RSS (MB), exit status and stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        launched = subprocess.run([sys.executable, "-c", _LAUNCH, json.dumps(argv), str(out), str(err)],
                                  cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        report = json.loads(launched.stdout)
        stdout = out.read_text("utf-8", "replace")
        stderr = err.read_text("utf-8", "replace")
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    peak = report["maxrss"] * (1 if sys.platform == "darwin" else 1024) / MB
    return {"ms": _ms(report["seconds"]), "peak_mb": round(peak, 1), "exit": report["exit"], "stdout": stdout,
            "stderr_tail": stderr[-2000:]}


# --- the parts ------------------------------------------------------------------------------------


def _private_copy(source: Path, target: Path) -> None:
    """The cached ledger's segments in a directory of this run's own: hard links, the last one copied
    (nothing here is meant to write to the segments, but a hard link would carry any write back)."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    segments = sorted(source.glob("events-*.jsonl"))
    for segment in segments[:-1]:
        os.link(segment, target / segment.name)
    shutil.copyfile(segments[-1], target / segments[-1].name)


def baselines(path: Path, work: Path, repeats: int) -> dict:
    """DuckDB on the raw segments (read_json_auto) and on a native table of the same rows."""
    import duckdb

    source = f"read_json_auto({_lit(str(path / 'events-*.jsonl'))})"
    database = work / "native.duckdb"
    database.unlink(missing_ok=True)
    con = duckdb.connect(str(database))
    con.execute("SET TimeZone = 'UTC'")
    out: dict = {"raw": {}, "native": {}, "duckdb": duckdb.__version__,
                 "source": source, "table": "ledger_rows"}
    try:
        for name, sql in [*((q, QUESTIONS[q]["baseline"]) for q in QUESTIONS), ("stats", STATS_BASELINE)]:
            text = sql.replace("@SOURCE", source)
            _log(f"bench analytics: DuckDB read_json_auto: {name}")
            timing, answer = _warm(lambda: _fetch(con, text), repeats)
            out["raw"][name] = {**timing, "answer": _answer(name, *answer)}
        _log("bench analytics: DuckDB native table: CREATE TABLE AS")
        started = time.perf_counter()
        con.execute(f"CREATE TABLE ledger_rows AS SELECT * FROM {source}")
        con.execute("CHECKPOINT")
        out["native_build_ms"] = _ms(time.perf_counter() - started)
        out["native_rows"] = con.execute("SELECT count(*) FROM ledger_rows").fetchone()[0]
        out["native_mb"] = round(database.stat().st_size / MB, 1)
        for name, sql in [*((q, QUESTIONS[q]["baseline"]) for q in QUESTIONS), ("stats", STATS_BASELINE)]:
            text = sql.replace("@SOURCE", "ledger_rows")
            _log(f"bench analytics: DuckDB native table: {name}")
            timing, answer = _warm(lambda: _fetch(con, text), repeats)
            out["native"][name] = {**timing, "answer": _answer(name, *answer)}
        _log("bench analytics: DuckDB native table of requests folded at its build")
        started = time.perf_counter()
        con.execute(FOLDED_TABLE)
        con.execute("CHECKPOINT")
        out["folded_build_ms"] = _ms(time.perf_counter() - started)
        out["folded"] = {}
        for name, text in [*((q, QUESTIONS[q]["folded"]) for q in QUESTIONS), ("stats", STATS_FOLDED)]:
            _log(f"bench analytics: DuckDB folded table: {name}")
            timing, answer = _warm(lambda: _fetch(con, text), repeats)
            out["folded"][name] = {**timing, "answer": _answer(name, *answer)}
    finally:
        con.close()
        database.unlink(missing_ok=True)
    return out


def _fetch(con, sql: str) -> tuple[list[str], list[tuple]]:
    cursor = con.execute(sql)
    return [d[0] for d in cursor.description], cursor.fetchall()


def _answer(name: str, columns: list[str], rows: list[tuple]) -> Any:
    if name != "stats":
        return _rows(rows)
    return _stats_answer(dict(zip(columns, rows[0])))


def warm(path: Path, repeats: int) -> dict:
    """countersign in this process: views.query per question, stats.stats."""
    import msgspec

    from ledger.analytics.query import query
    from ledger.analytics.stats import stats

    out: dict = {}
    for name, q in QUESTIONS.items():
        _log(f"bench analytics: countersign warm: {name}")
        timing, (_columns, rows) = _warm(lambda: query(path, q["countersign"]), repeats)
        out[name] = {**timing, "answer": _rows(rows)}
    _log("bench analytics: countersign warm: stats")
    timing, result = _warm(lambda: stats(path), repeats)
    out["stats"] = {**timing, "answer": _stats_answer(msgspec.to_builtins(result))}
    out["projection_mb"] = _projection_mb(path)
    return out


def _projection_mb(path: Path) -> float | None:
    projection = path / "projection"
    if not projection.is_dir():
        return None
    return round(sum(p.stat().st_size for p in projection.rglob("*") if p.is_file()) / MB, 1)


def cold(path: Path) -> dict:
    """A new `countersign` process per question (`ledger query --format json`) and for `ledger stats --json`."""
    cli = _cli()
    out: dict = {"command": cli}
    # Untimed: the modules compiled (__pycache__) and in the page cache, as for anyone's second call.
    subprocess.run([sys.executable, "-c", "import cli.main, ledger.analytics.query, ledger.analytics.stats, duckdb"],
                   cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    for name, q in QUESTIONS.items():
        _log(f"bench analytics: countersign cold: ledger query ({name})")
        run = _cold([*cli, "ledger", "query", str(path), q["countersign"], "--format", "json"])
        answer = None
        if run["exit"] == 0:
            objects = json.loads(run["stdout"])
            answer = _rows([list(o.values()) for o in objects])
        out[name] = {k: run[k] for k in ("ms", "peak_mb", "exit")} | {"answer": answer}
        if run["exit"]:
            out[name]["stderr_tail"] = run["stderr_tail"]
    _log("bench analytics: countersign cold: ledger stats --json")
    run = _cold([*cli, "ledger", "stats", str(path), "--json"])
    out["stats"] = {k: run[k] for k in ("ms", "peak_mb", "exit")}
    out["stats"]["answer"] = _stats_answer(json.loads(run["stdout"])) if run["exit"] == 0 else None
    if run["exit"]:
        out["stats"]["stderr_tail"] = run["stderr_tail"]
    return out


def refresh(path: Path, work: Path, settle_calls: int = 3) -> dict:
    """Question 1 on a copy, with nothing new and then after APPENDED lawful events."""
    from ledger.analytics.query import query
    from ledger.store.log import Ledger

    sql = QUESTIONS["requests_by_status"]["countersign"]
    copy = work / "append"
    _log(f"bench analytics: refresh: copying the ledger, {settle_calls} queries with nothing new")
    _copy_for_appending(path, copy)
    try:
        _append_lawful(copy, 3)  # a ledger some writer opened before (see the module docstring)
        started = time.perf_counter()
        _cols, before = query(copy, sql)
        first = time.perf_counter() - started
        nothing_new = []
        for _ in range(settle_calls):
            started = time.perf_counter()
            query(copy, sql)
            nothing_new.append(time.perf_counter() - started)
        with Ledger(copy) as ledger:
            head_before = ledger.head[0]
        _log(f"bench analytics: refresh: appending {APPENDED:,} events, then the query")
        _append_lawful(copy, APPENDED)
        with Ledger(copy) as ledger:
            appended = ledger.head[0] - head_before
        started = time.perf_counter()
        _cols, after = query(copy, sql)
        after_s = time.perf_counter() - started
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    grew = dict(after)
    for status, n in before:
        grew[status] = grew.get(status, 0) - n
    grew = {k: v for k, v in grew.items() if v}
    return {"question": "requests_by_status", "appended_events": appended, "first_on_copy_ms": _ms(first),
            "nothing_new_ms": _ms(statistics.median(nothing_new)),
            "nothing_new_spread_ms": _ms(max(nothing_new) - min(nothing_new)), "after_append_ms": _ms(after_s),
            "refresh_ms": _ms(after_s - statistics.median(nothing_new)),
            "requests_added": grew, "agree": grew == {"executed": appended // 3}}


# --- verdicts and output --------------------------------------------------------------------------


def agreement(out: dict) -> dict:
    """For each question: which sides gave countersign's warm answer (None: not measured)."""
    res: dict = {}
    ref_side = out.get("warm")
    for name in NAMES:
        entry = {}
        ref = ref_side[name]["answer"] if ref_side else None
        if ref is None and out.get("baselines"):
            ref = out["baselines"]["native"][name]["answer"]  # the baselines checked against each other
        if ref is None:
            res[name] = entry
            continue
        for side, getter in (("cold_cli", lambda: out["cold"][name]["answer"]),
                             ("read_json_auto", lambda: out["baselines"]["raw"][name]["answer"]),
                             ("native_table", lambda: out["baselines"]["native"][name]["answer"]),
                             ("folded_table", lambda: out["baselines"]["folded"][name]["answer"])):
            try:
                got = getter()
            except (KeyError, TypeError):
                continue
            entry[side] = got == ref
            diff = _first_difference(got, ref)
            if diff:
                entry[side + "_difference"] = diff
        res[name] = entry
    return res


def verdicts(out: dict) -> dict:
    res: dict = {}
    w, b, c, r = out.get("warm"), out.get("baselines"), out.get("cold"), out.get("refresh")
    for name in NAMES:
        if w:
            ms = w[name]["median_ms"]
            res[f"{name}.warm_ms"] = {"value": ms, "max": TARGETS["warm_ms"]["max"], "met": ms <= TARGETS["warm_ms"]["max"]}
            if b:
                native = b["native"][name]["median_ms"]
                ratio = round(ms / native, 2) if native else math.inf
                res[f"{name}.warm_vs_native"] = {"value": ratio, "native_ms": native,
                                                 "max": TARGETS["warm_vs_native"]["max"],
                                                 "met": ratio <= TARGETS["warm_vs_native"]["max"]}
        if c:
            res[f"{name}.cold_cli_ms"] = {"value": c[name]["ms"], "max": TARGETS["cold_cli_ms"]["max"],
                                          "met": c[name]["exit"] == 0 and c[name]["ms"] <= TARGETS["cold_cli_ms"]["max"]}
            res[f"{name}.peak_memory_mb"] = {"value": c[name]["peak_mb"], "max": TARGETS["peak_memory_mb"]["max"],
                                             "met": c[name]["peak_mb"] <= TARGETS["peak_memory_mb"]["max"]}
    if r:
        # A difference smaller than the spread of the queries it is taken from tells nothing: not met.
        limit = TARGETS["refresh_ms"]["max"]
        resolved = r["nothing_new_spread_ms"] <= limit
        res["refresh_ms"] = {"value": r["refresh_ms"], "max": limit, "met": resolved and r["refresh_ms"] <= limit,
                             "resolved": resolved}
    return res


def _cell(d: dict | None, key: str = "median_ms") -> str:
    if not d or d.get(key) is None:
        return "-"
    v = d[key]
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms"


def render(out: dict) -> str:
    s = out["settings"]
    m = out["machine"]
    w, b, c = out.get("warm") or {}, out.get("baselines") or {}, out.get("cold") or {}
    lines = [f"Analytics on {s['events']:,} events ({out['ledger']['bytes'] / MB:.0f} MB, {out['ledger']['segments']} "
             f"segments); {m['cpus']} CPUs, {m['memory_gb']} GB; DuckDB {b.get('duckdb') or out['versions'].get('duckdb')}; "
             f"commit {out['versions']['countersign_commit']}",
             "",
             "| question | countersign warm (first call) | cold CLI (peak memory) | DuckDB read_json_auto | "
             "native table | warm / native | native table of requests folded at build | "
             "agree: CLI, read_json_auto, native, folded |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name in NAMES:
        what = QUESTIONS[name]["what"] if name in QUESTIONS else "ledger stats"
        wn, cn = w.get(name), c.get(name)
        warm_cell = f"{_cell(wn)} ({_cell(wn, 'first_ms')})" if wn else "-"
        cold_cell = f"{_cell(cn, 'ms')} ({cn['peak_mb']:.0f} MB)" if cn else "-"
        raw, native = (b.get("raw") or {}).get(name), (b.get("native") or {}).get(name)
        folded = (b.get("folded") or {}).get(name)
        ratio = "-"
        if wn and native and native["median_ms"]:
            ratio = f"{wn['median_ms'] / native['median_ms']:.1f}×"
        agree = out["agreement"].get(name, {})
        marks = ", ".join({True: "yes", False: "NO"}[agree[k]] if k in agree else "-"
                          for k in ("cold_cli", "read_json_auto", "native_table", "folded_table"))
        lines.append(f"| {what} | {warm_cell} | {cold_cell} | {_cell(raw)} | {_cell(native)} | {ratio} | {_cell(folded)} "
                     f"| {marks} |")
    lines.append("")
    if b:
        lines.append(f"native table: built in {_cell(b, 'native_build_ms')} ({b['native_rows']:,} rows, {b['native_mb']} MB); "
                     f"the table of folded requests from it in {_cell(b, 'folded_build_ms')}")
    if w and w.get("projection_mb") is not None:
        lines.append(f"countersign's projection: {w['projection_mb']} MB")
    r = out.get("refresh")
    if r:
        lines.append(f"refresh: question 1 after {r['appended_events']:,} new events {_cell(r, 'after_append_ms')}, "
                     f"with nothing new {_cell(r, 'nothing_new_ms')}: refresh {r['refresh_ms']:.0f} ms "
                     f"(counts right: {'yes' if r['agree'] else 'NO'})")
    lines.append("")
    scale = "" if s["events"] >= TARGETS["events"] else f" (the targets are for {TARGETS['events']:,} events; this run has {s['events']:,})"
    lines.append("targets" + scale + ":")
    for key, v in out["verdicts"].items():
        why = "" if v.get("resolved", True) else "; lost in the noise: the queries with nothing new spread wider"
        lines.append(f"- {key}: {'met' if v['met'] else 'NOT MET'} ({v['value']}, at most {v['max']}{why})")
    return "\n".join(lines)


def run(events: int = EVENTS, parts=PARTS, repeats: int = REPEATS) -> dict:
    """Measure; the results as a dict (what main writes)."""
    import duckdb

    parts = tuple(p for p in PARTS if p in set(parts))
    out = environment()
    out["versions"]["duckdb"] = duckdb.__version__
    out["loadavg_before"] = loadavg()
    source, info = ledger_gen.cached(events, log=_log)
    out["settings"] = {"events": info["events"], "parts": list(parts), "repeats": repeats, "appended": APPENDED,
                       "workdir": str(ledger_gen.workdir()), "cli": _cli()}
    out["ledger"] = {"source": str(source), **info}
    out["targets"] = TARGETS
    out["sql"] = {name: {k: q[k] for k in ("countersign", "baseline", "folded")} for name, q in QUESTIONS.items()}
    out["sql"]["stats"] = {"countersign": "ledger.analytics.stats.stats(DIR) / countersign ledger stats DIR --json",
                           "baseline": STATS_BASELINE, "folded": STATS_FOLDED}
    out["sql"]["folded_table"] = FOLDED_TABLE
    work = Path(tempfile.mkdtemp(prefix="analytics-", dir=ledger_gen.workdir()))
    try:
        path = work / "ledger"
        _private_copy(source, path)
        if "baselines" in parts:
            out["baselines"] = baselines(path, work, repeats)
            out["loadavg_after_baselines"] = loadavg()
        if "warm" in parts:
            out["warm"] = warm(path, repeats)
            out["loadavg_after_warm"] = loadavg()
        if "cold" in parts:
            out["cold"] = cold(path)
            out["loadavg_after_cold"] = loadavg()
        if "refresh" in parts:
            out["refresh"] = refresh(path, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["loadavg_after"] = loadavg()
    out["agreement"] = agreement(out)
    out["verdicts"] = verdicts(out)
    return out


def main(label: str = "run", write: bool = True, events: int | None = None, parts=PARTS,
         repeats: int | None = None) -> int:
    out = run(events or EVENTS, parts, REPEATS if repeats is None else repeats)
    print(render(out))
    if write:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        name = label if "analytics" in label else f"{label}-analytics"
        target = RESULTS / f"{stamp}-{name}.json"
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        print(f"\nbench analytics: results in {target.relative_to(ROOT)}")
    disagree = [f"{q}.{k}" for q, e in out["agreement"].items() for k, v in e.items() if v is False]
    if out.get("refresh") and not out["refresh"]["agree"]:
        disagree.append("refresh.counts")
    if disagree:
        print("bench analytics: answers differ: " + ", ".join(disagree), file=sys.stderr)
        return 1
    return 0
