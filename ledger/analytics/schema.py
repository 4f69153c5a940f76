"""The projection's tables and views: their DuckDB types and the SQL that creates them.

The views carry the names and columns of the log views (ledger.analytics.views: `events`,
`requests`, `pending`, `decision_times`, `rates_by_tool`, `rates_by_rule`, `rates_by_approver`,
`chain_breaks`, `violations`, `torn_tail`; docs/views.md lists every column) so that a query
written for one runs on the other. They are persistent views in the projection's database
file (DIR/projection/projection.duckdb), so any DuckDB client can open the file read-only and
query them by name.

What differs from the log views, and why:
- `events` holds the lines the projection covers, each verified when it was projected (so
  `valid`, `hash_ok` and `canonical` are true and `invalid_reason` is NULL); it has no `body`
  column (the body's bytes stay in the log: `countersign ledger query --log` reads them, with
  the view `ledger_lines`).
- `chain_breaks` and `violations` hold the first problem the projection met (verify's first
  problem), not one row per later problem: the lines after it are not projected.
- `coverage` (one row) says which lines the rows cover and what was checked.

duckdb is not imported here: this module only writes SQL text.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.analytics import views as log_views

FORMAT = "countersign-projection/6"  # 6: the data beside the bodies is checked (a `data` problem in chain_breaks)


def duck_type(shape: Any) -> str:
    """The DuckDB type of a from_json structure (ledger.analytics.views._sql_type): `"VARCHAR"`,
    `["VARCHAR"]` (a list), `{"a": "BIGINT"}` (a struct)."""
    if isinstance(shape, str):
        return shape
    if isinstance(shape, list):
        return duck_type(shape[0]) + "[]"
    return "STRUCT(" + ", ".join(f'"{name}" {duck_type(t)}' for name, t in shape.items()) + ")"


BODY_SHAPE: dict[str, Any] = json.loads(log_views._STRUCTURE)
BODY_TYPE = duck_type(BODY_SHAPE)  # read_json parses each body into this struct
REQUIREMENTS_TYPE = duck_type(BODY_SHAPE["requirements"])
QUORUMS_TYPE = duck_type(BODY_SHAPE["requirements"]["quorums"])

# The physical columns of `event_rows`: the events view's columns that are stored (the others are
# constants or derived; see EVENTS_VIEW).
_BODY_COLUMNS = log_views._body_columns()


def _member_type(name: str) -> str:
    if name == "deadline":
        return "TIMESTAMPTZ"
    if name == "deadline_text":
        return "VARCHAR"
    return duck_type(BODY_SHAPE[name])


EVENT_ROWS_COLUMNS: dict[str, str] = {
    "position": "BIGINT", "seq": "BIGINT", "ts": "TIMESTAMPTZ", "ts_text": "VARCHAR", "kind": "VARCHAR",
    "request": "BIGINT",
    **{m: _member_type(m) for m in _BODY_COLUMNS},
    "prev": "VARCHAR", "hash": "VARCHAR", "data": "JSON", "segment_file": "VARCHAR", "line": "BIGINT",
    "file_offset": "BIGINT",
    # the first 32 hex digits of SHA-256 of the data bytes as stored (NULL for null): a segment read
    # again (a redaction) has its data checked again only where these bytes changed
    "data_sha256": "VARCHAR",
}


def event_rows_select(source: str) -> str:
    """SQL: the event_rows columns from `source`, rows of read_json over the chunk lines
    `{"position":P,"segment_file":F,"line":L,"file_offset":O,"data_sha256":S,"body":{...},"hash":"...","data":...}`
    (a ledger line with its place in front). The body's members are typed as the log views type
    them (nested defaults applied as msgspec decodes them)."""
    members = []
    for m in _BODY_COLUMNS:
        if m == "deadline":
            members.append("CAST(j.deadline AS TIMESTAMPTZ) AS deadline")
        elif m == "deadline_text":
            members.append("j.deadline AS deadline_text")
        else:
            members.append(f'{log_views._member_sql(m)} AS "{m}"')
    return (
        "SELECT position, j.seq AS seq, CAST(j.ts AS TIMESTAMPTZ) AS ts, j.ts AS ts_text, j.kind AS kind, "
        "CASE WHEN j.kind = 'proposed' THEN j.seq ELSE j.request END AS request, "
        + ", ".join(members)
        + ", j.prev AS prev, hash, CASE WHEN json_type(data) = 'NULL' THEN NULL ELSE data END AS data, "
        f"segment_file, line, file_offset, data_sha256 FROM (SELECT *, body AS j FROM {source})"
    )


def chunk_columns() -> str:
    """read_json's `columns` for the chunk lines of event_rows_select."""
    spec = {"position": "BIGINT", "segment_file": "VARCHAR", "line": "BIGINT", "file_offset": "BIGINT",
            "data_sha256": "VARCHAR", "body": BODY_TYPE, "hash": "VARCHAR", "data": "JSON"}
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in spec.items()) + "}"


# `requests`: the log view's columns, in its order (the fold writes them from RequestState).
REQUEST_COLUMNS: dict[str, str] = {
    "request": "BIGINT", "tool": "VARCHAR", "run": "VARCHAR", "proposer": "VARCHAR", "call_id": "VARCHAR",
    "policy": "VARCHAR", "policy_digest": "VARCHAR", "effect": "VARCHAR", "rule": "VARCHAR", "rules": "VARCHAR[]",
    "reasons": "VARCHAR[]", "proposed_at": "TIMESTAMPTZ", "proposed_at_text": "VARCHAR", "status": "VARCHAR",
    "decision": "VARCHAR", "decided_at": "TIMESTAMPTZ", "decided_by": "VARCHAR", "reason": "VARCHAR",
    "approvers": "VARCHAR[]", "approved_by": "VARCHAR[]", "approvals": "BIGINT", "quorum": "BIGINT",
    "quorums": QUORUMS_TYPE, "requirements": REQUIREMENTS_TYPE, "deadline": "TIMESTAMPTZ", "deadline_text": "VARCHAR",
    "interrupted_at": "TIMESTAMPTZ", "edited": "BOOLEAN", "edits": "BIGINT", "digest": "VARCHAR",
    "original_digest": "VARCHAR", "execution_started_at": "TIMESTAMPTZ", "executor": "VARCHAR",
    "executed_at": "TIMESTAMPTZ", "outcome": "VARCHAR", "result_digest": "VARCHAR", "error": "VARCHAR",
    "events": "BIGINT", "last_event_at": "TIMESTAMPTZ",
}
REQUEST_TS = {"proposed_at", "decided_at", "deadline", "interrupted_at", "execution_started_at", "executed_at",
              "last_event_at"}
"""Timestamps the fold writes as ledger text (converted as the log views convert them)."""


def request_rows_select(source: str, extra: tuple[str, ...] = ()) -> str:
    cols = [f"CAST({c} AS TIMESTAMPTZ) AS {c}" if c in REQUEST_TS else c for c in REQUEST_COLUMNS]
    return "SELECT " + ", ".join(cols + list(extra)) + f" FROM {source}"


def request_json_columns(extra: dict[str, str] | None = None) -> str:
    spec = {c: ("VARCHAR" if c in REQUEST_TS else t) for c, t in REQUEST_COLUMNS.items()}
    spec.update(extra or {})
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in spec.items()) + "}"


SUMMARY_KEYS = ("tool", "effect", "status", "decision", "edited", "outcome")

COVERAGE_COLUMNS = {
    "events": "BIGINT: lines the views cover: seq 1 to `events`, each checked when it was projected",
    "head": "VARCHAR: the hash of line `events` (the head the rows are verified up to)",
    "first_ts": "TIMESTAMPTZ (UTC): the first event's ts",
    "last_ts": "TIMESTAMPTZ (UTC): line `events`'s ts",
    "complete": "BOOLEAN: every complete line of the log is covered (no problem stopped the projection)",
    "problem_seq": "BIGINT: the line that stopped the projection (its rows are in chain_breaks or violations), or NULL",
    "problem": "VARCHAR: what is wrong with it, or NULL",
    "torn_bytes": "BIGINT: bytes after the last line feed of the last segment (an unfinished write or a cut), 0 when none",
    "refreshed_at": "TIMESTAMPTZ (UTC): when the projection last read the log (wall clock)",
    "checked": "VARCHAR: what was checked for each line covered",
    "not_checked": "VARCHAR: what only `countersign ledger verify` checks",
}

CHECKED = ("line layout; body decodes as an event in its canonical layout; seq, prev and hash chain; ts and deadline "
           "spelling and order; genesis first; the data beside the body (arguments and context against their digests, "
           "kept results, pinned policy texts, redaction markers against the digests the redacted events name, "
           "canonical spelling: ledger.proof.data, as verify checks it); every workflow rule (ledger.workflow.machine)")
NOT_CHECKED = "decision signatures, checkpoints; run countersign ledger verify"

TABLES: dict[str, str] = {
    "meta": """CREATE TABLE meta (
        format VARCHAR, ledger_id VARCHAR, events BIGINT, head VARCHAR,
        head_segment INTEGER, head_offset BIGINT, end_offset BIGINT, head_line BIGINT,
        first_ts TIMESTAMPTZ, last_ts TIMESTAMPTZ, last_ts_text VARCHAR, refreshed_at TIMESTAMPTZ,
        torn_segment VARCHAR, torn_offset BIGINT, torn_bytes BIGINT, torn_sha256 VARCHAR,
        workflow BLOB, directory_ctime_ns BIGINT)""",
    "segments": """CREATE TABLE segments (
        segment INTEGER, segment_file VARCHAR, inode UBIGINT, size BIGINT, mtime_ns BIGINT,
        first_position BIGINT, lines BIGINT, ctime_ns BIGINT)""",
    "problems": """CREATE TABLE problems (
        seq BIGINT, kind VARCHAR, code VARCHAR, detail VARCHAR, event_kind VARCHAR, request BIGINT,
        segment_file VARCHAR, line BIGINT)""",
    "event_rows": "CREATE TABLE event_rows (" + ", ".join(f'"{c}" {t}' for c, t in EVENT_ROWS_COLUMNS.items()) + ")",
    "final_requests": "CREATE TABLE final_requests (" + ", ".join(f"{c} {t}" for c, t in REQUEST_COLUMNS.items()) + ")",
    "open_requests": "CREATE TABLE open_requests (" + ", ".join(f"{c} {t}" for c, t in REQUEST_COLUMNS.items())
    + ", state VARCHAR, aux VARCHAR)",
    # What stats need of the final requests, kept as they are added: counts by what stats group
    # on, and the seconds to decision of the decided asks (quantiles need every value).
    "final_summary": "CREATE TABLE final_summary (" + ", ".join(f"{c} {REQUEST_COLUMNS[c]}" for c in SUMMARY_KEYS)
    + ", n BIGINT)",
    "final_seconds": "CREATE TABLE final_seconds (seconds DOUBLE)",
    # rates_by_approver's counts, added by each refresh (a reviewer may have a row per refresh)
    "review_counts": """CREATE TABLE review_counts (
        approver VARCHAR, requests BIGINT, actions BIGINT, approve BIGINT, reject BIGINT, edit BIGINT, respond BIGINT)""",
}

_EVENTS_VIEW = (
    "CREATE VIEW events AS SELECT position, seq, ts, ts_text, kind, request, "
    + ", ".join(f'"{m}"' for m in _BODY_COLUMNS)
    + ", prev, hash, hash AS body_sha256, true AS hash_ok, true AS valid, NULL::VARCHAR AS invalid_reason, "
    "true AS canonical, data, json_extract(data, '$.args') AS args, json_extract(data, '$.context') AS context, "
    "segment_file, line, file_offset FROM event_rows"
)

EVENT_COLUMNS = [c for c in log_views.EVENT_COLUMNS if c != "body"]
"""The columns of the projection's `events` view, in order: the log view's but `body`."""


def _log_request_views() -> dict[str, str]:
    """pending, decision_times, rates_by_tool, rates_by_rule: the log views' SQL, which reads
    only `requests`, made persistent."""
    out = {}
    for statement in log_views._request_sql():
        head = statement.strip().split("\n", 1)[0]
        name = head.split()[-2]
        if name in ("pending", "decision_times", "rates_by_tool", "rates_by_rule"):
            out[name] = statement.replace("CREATE OR REPLACE TEMP VIEW", "CREATE VIEW", 1)
    return out


VIEWS: dict[str, str] = {
    "requests": "CREATE VIEW requests AS SELECT * FROM final_requests UNION ALL SELECT * EXCLUDE (state, aux) FROM open_requests",
    "events": _EVENTS_VIEW,
    **_log_request_views(),
    "rates_by_approver": """CREATE VIEW rates_by_approver AS
WITH c AS (
    SELECT approver, sum(requests)::BIGINT AS requests, sum(actions)::BIGINT AS actions, sum(approve)::BIGINT AS approve,
           sum(reject)::BIGINT AS reject, sum(edit)::BIGINT AS edit, sum(respond)::BIGINT AS respond
    FROM review_counts GROUP BY approver
)
SELECT approver, requests, actions, approve, reject, edit, respond,
       approve / actions AS approve_share, reject / actions AS reject_share,
       edit / actions AS edit_share, respond / actions AS respond_share
FROM c""",
    "chain_breaks": """CREATE VIEW chain_breaks AS
SELECT seq, code AS problem, kind, detail, segment_file, line, 0 AS check_order
FROM problems WHERE kind IN ('format', 'chain', 'data')""",
    "violations": """CREATE VIEW violations AS
SELECT seq, request, code, detail, event_kind AS kind, segment_file, line, seq AS position
FROM problems WHERE kind = 'workflow'""",
    "torn_tail": """CREATE VIEW torn_tail AS
SELECT torn_segment AS segment_file, torn_offset AS file_offset, torn_bytes AS fragment_bytes, torn_sha256 AS fragment_sha256
FROM meta WHERE torn_bytes > 0""",
    "coverage": f"""CREATE VIEW coverage AS
SELECT m.events, m.head, m.first_ts, m.last_ts,
       NOT EXISTS (SELECT 1 FROM problems) AS complete,
       (SELECT min(seq) FROM problems) AS problem_seq,
       (SELECT any_value(detail) FROM problems) AS problem,
       coalesce(m.torn_bytes, 0) AS torn_bytes, m.refreshed_at,
       {log_views._lit(CHECKED)} AS checked, {log_views._lit(NOT_CHECKED)} AS not_checked
FROM meta m""",
}
"""view name → CREATE VIEW statement, in an order that creates each after what it reads."""

VIEW_NAMES = ("events", "requests", "pending", "decision_times", "rates_by_tool", "rates_by_rule", "rates_by_approver",
              "chain_breaks", "violations", "torn_tail", "coverage")


def columns_doc() -> dict[str, dict[str, str]]:
    """view → column → "TYPE: meaning": the log views' documentation, adjusted to the projection."""
    doc = {name: dict(log_views.COLUMNS[name]) for name in VIEW_NAMES if name in log_views.COLUMNS}
    doc["events"].pop("body", None)
    for column, text in doc["events"].items():  # the log views give a body member's from_json shape: the SQL type here
        at = text.find(": the body member")
        if at > 0 and column in EVENT_ROWS_COLUMNS:
            doc["events"][column] = EVENT_ROWS_COLUMNS[column] + text[at:]
    doc["events"]["valid"] = "BOOLEAN: true (every projected line was checked; see `coverage`)"
    doc["events"]["hash_ok"] = "BOOLEAN: true (the hash was checked when the line was projected)"
    doc["events"]["canonical"] = "BOOLEAN: true (the layout was checked when the line was projected)"
    doc["events"]["invalid_reason"] = "VARCHAR: NULL (a line that fails a check is not projected)"
    doc["events"]["body_sha256"] = "VARCHAR: SHA-256 (hex) of the body bytes as stored (= hash: checked)"
    doc["chain_breaks"]["check_order"] = "INTEGER: 0 (the projection keeps only the first problem)"
    doc["chain_breaks"]["kind"] = ("VARCHAR: format, chain or data (the data beside the body: its problem is bad-data, or "
                                   "bad-redaction at a redacted event whose announcement does not hold), as verify's Problem.kind")
    doc["chain_breaks"]["problem"] = "VARCHAR: one of CHAIN_PROBLEMS, or bad-data / bad-redaction (kind data)"
    doc["coverage"] = dict(COVERAGE_COLUMNS)
    return doc


VIEW_PURPOSE = {
    "events": "One row per line covered: every body member of every event kind as a typed column, the data beside "
              "the body as JSON (`args`, `context`), and where the line is.",
    "requests": "One row per request (a `proposed` event): its state folded from its events by the workflow "
                "(ledger.workflow.RequestState).",
    "pending": "The requests waiting for a person now: who may decide, what is still missing, the digest an approval "
               "must name.",
    "decision_times": "One row per decided ask: seconds from the proposal to the decision.",
    "rates_by_tool": "Requests and their outcomes counted per tool, with shares of the asks.",
    "rates_by_rule": "The same per deciding rule (a request decided by several rules counts for each).",
    "rates_by_approver": "Per reviewer: approvals, rejections, edits and responses, with shares.",
    "chain_breaks": "The first problem with the chain, the line format or the data beside a body, when a line stopped "
                    "the projection (verify's kind `chain`, `format` or `data`); empty on an intact ledger.",
    "violations": "The first event that breaks a workflow rule, when one stopped the projection (verify's kind "
                  "`workflow`); empty on a lawful ledger.",
    "torn_tail": "The bytes after the last line feed of the last segment, if any: an unfinished write, or a cut that "
                 "only a checkpoint or an expected head tells apart.",
    "coverage": "One row: which lines the rows cover (seq 1 to `events`), whether that is every line, and what was "
                "checked.",
}


def views_markdown() -> str:
    """docs/views.md: every view and column, with its type and meaning (tests/test_columnar.py
    checks that the file is this text)."""
    out = [
        "# The views: SQL over a ledger's history",
        "",
        "<!-- Generated from ledger/analytics/schema.py (views_markdown); tests/test_columnar.py checks it. -->",
        "",
        "`countersign ledger query DIR \"SQL\"` runs one read-only SELECT over these views; `countersign ledger export`",
        "writes them as Parquet, CSV or JSON Lines; `countersign ledger stats` and `ledger report` read them.",
        "",
        "They live in the ledger's columnar projection, `DIR/projection/projection.duckdb`: a DuckDB database",
        "derived from the log, never authoritative, rebuilt from the log whenever it is deleted. The first query",
        "builds it (every line read and checked once; a progress bar on a terminal), every later query first",
        "reads the lines appended since. A ledger directory that cannot be written gets its projection in",
        "`$XDG_CACHE_HOME/countersign/projections/` instead.",
        "",
        "Any DuckDB client can open the file read-only while no query is refreshing it:",
        "",
        "```python",
        "import duckdb",
        "con = duckdb.connect(\"DIR/projection/projection.duckdb\", read_only=True)",
        "con.sql(\"SELECT tool, median(seconds) FROM decision_times GROUP BY tool\").show()",
        "```",
        "",
        "or, from the DuckDB CLI, `ATTACH 'DIR/projection/projection.duckdb' AS ledger (READ_ONLY); SELECT * FROM ledger.pending;`.",
        "Run `countersign ledger query DIR \"select 1\"` first so that it holds every line.",
        "",
        "## What the rows cover",
        "",
        "Each line is checked once, when it is projected (its data again when its segment is rewritten, as a redaction "
        "does): " + CHECKED + ".",
        "A line that fails stops the projection before it: the rows cover the lines before it, `coverage.complete`",
        "is false, and the problem is the one row of `chain_breaks` or `violations` (the problem `ledger verify`",
        "reports first). `countersign ledger query` says so on stderr. Not checked here: " + NOT_CHECKED + ".",
        "A line already projected is read again only when its file shows a change: a sealed segment whose inode, size or",
        "times differ, the head segment when its inode changes or it changed without growing, and the last line projected",
        "(its body and its data). A line of the head segment edited in place and followed by an append before the next",
        "query is not read again (the two are not told apart without reading the segment again); `ledger verify` finds it.",
        "",
        "`countersign ledger query --log DIR \"SQL\"` runs the same SQL over views that parse the log itself at",
        "every query (ledger/analytics/views.py): the history as recorded, lawful or not, every problem a row of",
        "`chain_breaks` / `violations`, and the view `ledger_lines` with each line's bytes; minutes on a million",
        "events.",
        "",
        "Times are `TIMESTAMPTZ` in UTC; durations are seconds (`DOUBLE`); shares are fractions in [0, 1].",
        "",
        "A `JSON` column's fields are JSON too: `args.amount` compares and sorts as JSON text (`max(args.amount)` of",
        "999.99 and 3000 is 999.99). Cast a field to compare or add it as a number or a string:",
        "`max((args->>'amount')::DECIMAL(18, 2))`, `args->>'to'` (`->>` gives its text). Arguments are in `events`:",
        "a request's proposal is the event at `position = request` (an edit's arguments are on its `edited` event):",
        "",
        "```sql",
        "SELECT r.request, r.tool, (e.args->>'amount')::DECIMAL(18, 2) AS amount",
        "FROM requests r JOIN events e ON e.position = r.request",
        "WHERE r.status = 'executed' ORDER BY amount DESC NULLS LAST LIMIT 5",
        "```",
        "",
    ]
    doc = columns_doc()
    for view in VIEW_NAMES:
        out += [f"## `{view}`", "", VIEW_PURPOSE[view], "", "| column | type | meaning |", "|---|---|---|"]
        for column, text in doc[view].items():
            kind, _, meaning = text.partition(": ")
            if not meaning and " " in kind and not kind.isupper():
                kind, meaning = "", kind
            out.append(f"| `{column}` | {kind.replace('|', '/')} | {meaning.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)
