"""One output convention for every command that prints data (issue 13, section 2): --format
table|csv|json|jsonl and --json; JSON columns as JSON values, lists as lists, CSV cells as compact
JSON text, times in UTC ending in Z; `policy eval --json` with the same keys whatever the decision."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.main import app
from cli.output import emit

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
runner = CliRunner()


def run(*args: str, env: dict | None = None):
    result = runner.invoke(app, [str(a) for a in args], env=env)
    assert "Traceback" not in (result.stdout + result.stderr), result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "ledger"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", path)
    assert result.exit_code == 0, result.stderr
    return path


# --- the shared rendering ---------------------------------------------------------------------


def _duck_result(sql: str):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cursor = con.execute(sql)
    return [d[0] for d in cursor.description], [d[1] for d in cursor.description], cursor.fetchall()


VALUES_SQL = """
SELECT 'null'::JSON AS j_null, '"a"'::JSON AS j_text, NULL::JSON AS sql_null, [1, 2] AS list,
       {'a': 1, 'b': ['{"x": [1, 2]}'::JSON]} AS struct, TIMESTAMPTZ '2026-01-05 09:00:20.5+00' AS ts,
       TIMESTAMP '2026-01-05 09:00:20' AS naive, 1.50::DECIMAL(4, 2) AS dec, '\\x00x'::BLOB AS blob,
       map([1], ['{"k": null}'::JSON]) AS m, 'inf'::DOUBLE AS inf, true AS yes, 1 AS a, 2 AS a,
       DATE '2020-01-02' AS day, ['[1]'::JSON, 'null'::JSON] AS json_list
"""


def test_json_writes_json_columns_as_values_lists_as_lists_and_times_in_utc_with_z(capsys):
    columns, types, rows = _duck_result(VALUES_SQL)
    emit(columns, rows, "json", types)
    [row] = json.loads(capsys.readouterr().out)
    assert row == {
        "j_null": None, "j_text": "a", "sql_null": None, "list": [1, 2], "struct": {"a": 1, "b": [{"x": [1, 2]}]},
        "ts": "2026-01-05T09:00:20.500000Z", "naive": "2026-01-05T09:00:20.000000Z", "dec": 1.5, "blob": "AHg=",
        "m": {"1": {"k": None}}, "inf": None, "yes": True, "a": 1, "a_1": 2, "day": "2020-01-02", "json_list": [[1], None],
    }


def test_a_decimal_is_a_json_number_written_exactly(capsys):
    columns, types, rows = _duck_result("SELECT 12345678901234567890.123456789::DECIMAL(38, 9) AS d")
    emit(columns, rows, "jsonl", types)
    assert capsys.readouterr().out == '{"d":12345678901234567890.123456789}\n'


def test_jsonl_is_one_compact_object_a_line_equal_to_json(capsys):
    columns, types, rows = _duck_result(VALUES_SQL + " UNION ALL " + VALUES_SQL)
    emit(columns, rows, "jsonl", types)
    lines = capsys.readouterr().out.splitlines()
    emit(columns, rows, "json", types)
    assert [json.loads(line) for line in lines] == json.loads(capsys.readouterr().out)
    assert len(lines) == 2 and all(": " not in line for line in lines)


def test_csv_writes_lists_structs_and_json_as_compact_json_text_never_a_python_repr(capsys):
    columns, types, rows = _duck_result(VALUES_SQL)
    emit(columns, rows, "csv", types)
    header, row = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    cells = dict(zip(header, row))
    assert cells["j_null"] == "null" and cells["sql_null"] == ""  # JSON null is not SQL NULL
    assert cells["j_text"] == '"a"'  # a JSON string keeps its quotes: the cell is JSON text
    assert cells["list"] == "[1,2]" and cells["struct"] == '{"a":1,"b":[{"x":[1,2]}]}'
    assert cells["ts"] == "2026-01-05T09:00:20.500000Z" and cells["dec"] == "1.50" and cells["yes"] == "true"
    assert cells["json_list"] == "[[1],null]"
    assert "'" not in "".join(row)  # no Python repr anywhere


def test_the_table_shows_the_same_cells_as_csv(capsys):
    columns, types, rows = _duck_result("SELECT [1, 2] AS list, 'null'::JSON AS j, {'a': 'b'} AS s")
    emit(columns, rows, "table", types)
    out = capsys.readouterr().out
    assert "[1,2]" in out and "null" in out and '{"a":"b"}' in out and "'" not in out


def test_json_escapes_what_a_terminal_would_act_on_and_stays_the_same_value(capsys):
    emit(["t"], [["a\x1b[31m\u202eb\x7f\x85"], ["\ud800"]], "jsonl")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x7f" not in out and "\x85" not in out
    assert [json.loads(line)["t"] for line in out.splitlines()] == ["a\x1b[31m\u202eb\x7f\x85", "\ud800"]


# --- ledger query -----------------------------------------------------------------------------

EVENTS_SQL = ("select seq, kind, ts, args, context, data, rules from events "
              "where kind in ('proposed', 'executed') order by seq limit 4")


def test_ledger_query_json_has_json_values_not_strings_holding_json(demo_ledger):
    result = run("ledger", "query", demo_ledger, EVENTS_SQL, "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    proposed = [r for r in rows if r["kind"] == "proposed"]
    executed = [r for r in rows if r["kind"] == "executed"]
    assert proposed and executed
    assert all(isinstance(r["args"], dict) and r["context"] == {} for r in proposed)
    assert all(r["data"] == {"args": r["args"], "context": {}} for r in proposed)
    assert all(r["data"] is None and r["args"] is None for r in executed)  # null, never the string "null"
    assert all(isinstance(r["rules"], list) and set(r["rules"][0]) == {"id", "line"} for r in proposed)
    assert all(r["ts"].endswith("Z") and "T" in r["ts"] for r in rows)


def test_ledger_query_json_flag_is_format_json_and_jsonl_has_the_same_rows(demo_ledger):
    by_flag = run("ledger", "query", demo_ledger, EVENTS_SQL, "--json")
    by_format = run("ledger", "query", demo_ledger, EVENTS_SQL, "--format", "json")
    lines = run("ledger", "query", demo_ledger, EVENTS_SQL, "--format", "jsonl")
    assert by_flag.stdout == by_format.stdout
    assert [json.loads(line) for line in lines.stdout.splitlines()] == json.loads(by_flag.stdout)


def test_ledger_query_csv_has_compact_json_cells(demo_ledger):
    result = run("ledger", "query", demo_ledger, EVENTS_SQL, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    proposed = next(r for r in rows if r["kind"] == "proposed")
    executed = next(r for r in rows if r["kind"] == "executed")
    assert json.loads(proposed["args"]) and proposed["context"] == "{}"
    assert json.loads(proposed["rules"])[0]["id"] and proposed["rules"].startswith('[{"id":')
    assert executed["data"] == "" and executed["args"] == ""  # SQL NULL: the empty field
    assert proposed["ts"].endswith("Z")


def test_ledger_query_keeps_json_null_apart_from_sql_null(demo_ledger):
    sql = ("select json_extract(args, '$.nothing') as absent, json('null') as json_null, "
           "json_extract(args, '$') as whole from events where kind = 'proposed' order by seq limit 1")
    [row] = json.loads(run("ledger", "query", demo_ledger, sql, "--json").stdout)
    assert row["absent"] is None and row["json_null"] is None and isinstance(row["whole"], dict)
    [cells] = list(csv.DictReader(io.StringIO(run("ledger", "query", demo_ledger, sql, "--format", "csv").stdout)))
    assert cells["absent"] == "" and cells["json_null"] == "null" and json.loads(cells["whole"]) == row["whole"]


def test_ledger_query_refuses_an_unknown_format_and_json_beside_another_format(demo_ledger):
    assert run("ledger", "query", demo_ledger, "select 1", "--format", "xml").exit_code == 2
    result = run("ledger", "query", demo_ledger, "select 1", "--json", "--format", "csv")
    assert result.exit_code == 2 and "--json is --format json" in result.stderr


def test_ledger_query_of_a_statement_describe_cannot_take_still_prints(demo_ledger):
    result = run("ledger", "query", demo_ledger, "summarize select request from requests", "--format", "jsonl")
    assert result.exit_code == 0 and json.loads(result.stdout.splitlines()[0])["column_name"] == "request"


def test_indented_json_with_text_beyond_ascii_keeps_its_layout(capsys):
    emit(["name"], [["Zoë \u202e"]], "json")
    out = capsys.readouterr().out
    assert out.startswith("[\n  {\n") and "Zoë \\u202e" in out and json.loads(out) == [{"name": "Zoë \u202e"}]


# --- policy eval --json ----------------------------------------------------------------------

EVAL_POLICY = """policy "refunds"
default ask "No rule covers this tool; a person decides."
group finance = ["fin-1", "fin-2", "fin-3"]

allow get_order
deny refund when args.amount <= 0
  reason "A refund amount must be positive."
ask refund when args.amount > 100
  reason "Refunds above 100 need two people from finance."
  approvers 2 from finance
  timeout 4h else reject
  remember run
allow refund when args.amount <= 100
"""
DECISION_KEYS = {"effect", "by_default", "policy", "policy_digest", "reasons", "deciding", "outcomes", "requirements"}
OUTCOME_KEYS = {"rule", "line", "effect", "counted", "error", "reason", "condition"}
REQUIREMENT_KEYS = {"quorums", "decisions", "timeout_seconds", "on_timeout", "timeout_message", "remember"}


@pytest.mark.parametrize("tool, args, effect", [
    ("get_order", {"id": 1}, "allow"),                      # no condition, no reason
    ("refund", {"amount": 50}, "allow"),
    ("refund", {"amount": -1}, "deny"),                     # a reason
    ("refund", {"amount": 250}, "ask"),                     # requirements with remember
    ("refund", {"order": "A1"}, "deny"),                    # conditions that could not be evaluated
    ("close_account", {}, "ask"),                           # the default
])
def test_policy_eval_json_has_the_same_keys_whatever_the_decision(tmp_path, tool, args, effect):
    policy = tmp_path / "refunds.policy"
    policy.write_text(EVAL_POLICY)
    result = run("policy", "eval", policy, "--tool", tool, "--args", json.dumps(args), "--json")
    assert result.exit_code == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["effect"] == effect and set(decision) == DECISION_KEYS
    assert all(set(o) == OUTCOME_KEYS for o in decision["outcomes"])
    if effect == "ask":
        assert set(decision["requirements"]) == REQUIREMENT_KEYS
        assert all(set(q) == {"count", "approvers", "group"} for q in decision["requirements"]["quorums"])
    else:
        assert decision["requirements"] is None
    if (tool, effect) == ("refund", "ask") and "amount" in args:
        assert decision["requirements"]["remember"] == {"scope": "run", "seconds": None}
        assert decision["requirements"]["quorums"] == [{"count": 2, "approvers": ["fin-1", "fin-2", "fin-3"], "group": "finance"}]


# --- review list, roster check ---------------------------------------------------------------


def _now_gate(path: Path):
    """A Gate of tests.support's policy whose clock starts now: `review list` expires what is due."""
    from datetime import datetime, timezone

    from ledger.clock import ManualClock
    from tests.support import gate

    return gate(path, ManualClock(datetime.now(timezone.utc)))


@pytest.fixture()
def queue(tmp_path) -> Path:
    path = tmp_path / "queue"
    g = _now_gate(path)
    g.propose("small_change", {"id": 7, "items": [1, 2]}, proposer="agent-1", run="r1")
    g.propose("big_change", {"amount": 5}, proposer="agent-1")
    g.close()
    return path


def test_review_list_formats_carry_the_same_records(queue):
    as_json = json.loads(run("review", "list", "-l", queue, "--json").stdout)
    assert json.loads(run("review", "list", "-l", queue, "--format", "json").stdout) == as_json
    lines = run("review", "list", "-l", queue, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == as_json and len(as_json) == 2
    rows = list(csv.DictReader(io.StringIO(run("review", "list", "-l", queue, "--format", "csv").stdout)))
    assert [int(r["request"]) for r in rows] == [r["request"] for r in as_json]
    first = rows[0]
    assert json.loads(first["args"]) == {"id": 7, "items": [1, 2]} and first["args"] == '{"id":7,"items":[1,2]}'
    assert json.loads(first["quorum"]) == as_json[0]["quorum"] and json.loads(first["decisions"]) == as_json[0]["decisions"]
    assert first["run"] == "r1" and rows[1]["run"] == "" and first["proposed_at"].endswith("Z")


def test_review_list_csv_of_an_empty_queue_is_its_header(tmp_path):
    from cli.review_cmd import BRIEF_FIELDS

    g = _now_gate(tmp_path / "l")
    g.propose("read_thing", {}, proposer="agent-1")
    g.close()
    assert run("review", "list", "-l", tmp_path / "l", "--format", "csv").stdout.strip() == ",".join(BRIEF_FIELDS)
    assert run("review", "list", "-l", tmp_path / "l", "--format", "jsonl").stdout == ""


def test_review_list_brief_fields_are_the_header(queue):
    from cli.review_cmd import BRIEF_FIELDS

    assert tuple(json.loads(run("review", "list", "-l", queue, "--json").stdout)[0]) == BRIEF_FIELDS


def test_roster_check_formats(tmp_path):
    roster = tmp_path / "team.toml"
    assert run("roster", "add", roster, "fin-1", "--kind", "reviewer", "--group", "finance", "--token").exit_code == 0
    assert run("roster", "add", roster, "agent-7", "--kind", "agent", "--token").exit_code == 0
    whole = json.loads(run("roster", "check", roster, "--json").stdout)
    assert whole["ok"] and [p["name"] for p in whole["principals"]] == ["agent-7", "fin-1"]
    lines = run("roster", "check", roster, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [
        {k: p[k] for k in ("name", "kind", "groups", "keys", "token_sha256")} for p in whole["principals"]]
    rows = list(csv.DictReader(io.StringIO(run("roster", "check", roster, "--format", "csv").stdout)))
    assert rows[1]["groups"] == '["finance"]' and json.loads(rows[1]["token_sha256"]) == whole["principals"][1]["token_sha256"]


# --- ledger stats: the queue's age from now, tables that fit the terminal --------------------


def test_stats_measures_the_oldest_wait_from_now_on_a_live_ledger(tmp_path):
    """A request pending for 8 s shows about 8 s (it showed 0 s: measured at the last event)."""
    from datetime import datetime, timedelta, timezone

    from ledger.clock import ManualClock
    from tests.support import gate

    clock = ManualClock(datetime.now(timezone.utc) - timedelta(seconds=8))
    g = gate(tmp_path / "l", clock)
    g.propose("small_change", {"id": 1}, proposer="agent-1")  # the last event, 8 s ago
    g.close()
    result = run("ledger", "stats", tmp_path / "l", "--json")
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    assert s["pending"] == 1 and 8 <= s["oldest_pending_seconds"] < 60
    assert s["as_of"].endswith("Z")
    table = run("ledger", "stats", tmp_path / "l", env={"COLUMNS": "80"})
    import re

    assert 8 <= float(re.search(r"the oldest waiting ([\d.]+)s", table.stdout).group(1)) < 60


LONG_TOOLS = ["modify_pending_order_items", "modify_pending_order_address", "mcp__filesystem__read_multiple_files"]


@pytest.fixture(scope="module")
def long_names_ledger(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("names") / "l"
    calls = path.parent / "calls.jsonl"
    calls.write_text("".join(json.dumps({"tool": t, "args": {"n": i}}) + "\n" for i, t in enumerate(LONG_TOOLS * 2)))
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", calls, "--ledger", path)
    assert result.exit_code == 0, result.stderr
    return path


def _table_lines(stdout: str) -> list[str]:
    return stdout.split("\n\n", 1)[1].splitlines()


def test_stats_tables_fit_80_columns_with_whole_headers_and_distinct_names(long_names_ledger, demo_ledger):
    from cli.render_stats import COUNTS

    for ledger in (long_names_ledger, demo_ledger):
        result = run("ledger", "stats", ledger, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.stderr
        assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
        headers = [line.split() for line in _table_lines(result.stdout) if line.startswith("tool ")]
        assert sorted(h for line in headers for h in line[1:]) == sorted(COUNTS)  # every header, whole
    shown = [line.split()[0] for line in _table_lines(run("ledger", "stats", long_names_ledger, env={"COLUMNS": "80"}).stdout)
             if line.startswith(("modify", "mcp"))]
    assert len(set(shown)) == len(LONG_TOOLS)  # the cut names still tell the tools apart
    assert any(name.startswith("modify_pe") and name.endswith("items") for name in shown)


def test_stats_table_widens_to_one_table_with_whole_names_when_there_is_room(long_names_ledger):
    from cli.render_stats import COUNTS

    result = run("ledger", "stats", long_names_ledger, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.stderr
    lines = _table_lines(result.stdout)
    assert lines[0] == "by tool" and lines[1].split() == ["tool", *COUNTS]
    assert all(len(line) <= 160 for line in lines)
    assert {line.split()[0] for line in lines[2:]} == set(LONG_TOOLS)


def test_stats_csv_is_the_by_tool_table_and_jsonl_the_json_on_one_line(demo_ledger):
    from cli.render_stats import COUNTS

    whole = json.loads(run("ledger", "stats", demo_ledger, "--json").stdout)
    rows = list(csv.DictReader(io.StringIO(run("ledger", "stats", demo_ledger, "--format", "csv").stdout)))
    assert {r["tool"]: {c: int(r[c]) for c in COUNTS} for r in rows} == whole["by_tool"]
    [line] = run("ledger", "stats", demo_ledger, "--format", "jsonl").stdout.splitlines()
    one = json.loads(line)
    assert {k: v for k, v in one.items() if k not in ("as_of", "oldest_pending_seconds")} == {
        k: v for k, v in whole.items() if k not in ("as_of", "oldest_pending_seconds")}


# --- a torn last line: what verify can know ---------------------------------------------------


def test_verify_words_a_torn_last_line_as_what_it_can_know(demo_ledger, tmp_path):
    import shutil

    path = tmp_path / "torn"
    shutil.copytree(demo_ledger, path)
    segment = sorted(path.glob("events-*.jsonl"))[-1]
    with segment.open("ab") as handle:
        handle.write(b'{"body":{"kind":"approved","seq":')  # a write that stopped part way, or a cut
    result = run("ledger", "verify", path)
    assert result.exit_code == 0, result.stdout + result.stderr
    warning = result.stderr
    assert "never acknowledged" not in warning
    assert "torn line" in warning and "an unfinished write, or the ledger cut mid-line" in warning
    assert "checkpoint" in warning and "expected head" in warning and "--expect-head" in warning
    report = json.loads(run("ledger", "verify", path, "--json").stdout)
    assert any("unfinished write" in w for w in report["warnings"])
    # The next writer moves it aside; verify then reports the recovery in the same words.
    from ledger.store.log import Ledger

    Ledger(path).close()
    result = run("ledger", "verify", path)
    assert result.exit_code == 0 and "never acknowledged" not in result.stderr
    assert "moved a torn last line" in result.stderr and "unfinished write" in result.stderr


# --- ledger export --------------------------------------------------------------------------

# What `ledger export` reads: ledger.analytics.export._connection is views.connect, the views over the
# log, which `ledger query --log` reads too (drop the flag when _connection reads the projection).
EXPORT_SOURCE: list[str] = []  # the export reads the projection's views, as ledger query does
EXPORTED = ["events", "requests", "pending", "decision_times", "rates_by_tool", "rates_by_rule", "rates_by_approver",
            "chain_breaks", "violations", "coverage"]


def _canonical(objects) -> list[str]:
    return sorted(json.dumps(o, sort_keys=True) for o in objects)


def _query_objects(ledger: Path, view: str) -> list[dict]:
    result = run("ledger", "query", ledger, f"select * from {view}", "--format", "jsonl", *EXPORT_SOURCE)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def exported(demo_ledger, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    for fmt in ("parquet", "csv", "jsonl"):
        result = run("ledger", "export", demo_ledger, "--out", out, "--format", fmt)
        assert result.exit_code == 0, result.stderr
    return out


def test_export_writes_every_view_but_the_raw_lines_in_each_format(exported):
    for ext in ("parquet", "csv", "jsonl"):
        assert sorted(p.stem for p in exported.glob(f"*.{ext}")) == sorted(EXPORTED)
    assert not list(exported.glob(".*"))  # no temporary file left behind


def test_exported_parquet_reads_back_with_duckdb_with_the_rows_and_types_of_ledger_query(demo_ledger, exported):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for view in EXPORTED:
        cursor = con.execute(f"SELECT * FROM read_parquet('{exported / (view + '.parquet')}')")
        types = [d[1] for d in cursor.description]
        rows = cursor.fetchall()
        columns = [d[0] for d in cursor.description]
        described = run("ledger", "query", demo_ledger, f"describe select * from {view}", "--format", "jsonl",
                        *EXPORT_SOURCE).stdout
        assert [str(t) for t in types] == [json.loads(line)["column_type"] for line in described.splitlines()]  # types kept
        buffer = io.StringIO()
        from contextlib import redirect_stdout

        with redirect_stdout(buffer):
            emit(columns, rows, "jsonl", types)
        from_parquet = [json.loads(line) for line in buffer.getvalue().splitlines()]
        assert _canonical(from_parquet) == _canonical(_query_objects(demo_ledger, view)), view
    # the demo's events: one a line of its segments (87 from samples/retail.policy and the demo's calls,
    # and the policy event that keeps the policy's text)
    events = sum(len(seg.read_bytes().splitlines()) for seg in Path(demo_ledger).glob("events-*.jsonl"))
    assert events == 88
    assert con.execute(f"SELECT count(*) FROM read_parquet('{exported / 'events.parquet'}')").fetchone()[0] == events


def test_exported_jsonl_has_the_rows_of_ledger_query_as_json_values(demo_ledger, exported):
    for view in EXPORTED:
        lines = (exported / f"{view}.jsonl").read_text().splitlines()
        assert _canonical(json.loads(line) for line in lines) == _canonical(_query_objects(demo_ledger, view)), view
    proposed = next(json.loads(line) for line in (exported / "events.jsonl").read_text().splitlines() if '"proposed"' in line)
    assert isinstance(proposed["args"], dict) and isinstance(proposed["rules"], list) and proposed["ts"].endswith("Z")


def test_exported_csv_has_the_rows_of_ledger_query_csv(demo_ledger, exported):
    for view in EXPORTED:
        query = run("ledger", "query", demo_ledger, f"select * from {view}", "--format", "csv", *EXPORT_SOURCE).stdout
        expected = list(csv.reader(io.StringIO(query)))
        got = list(csv.reader(io.StringIO((exported / f"{view}.csv").read_text())))
        assert got[0] == expected[0], view
        assert sorted(got[1:]) == sorted(expected[1:]), view


def test_export_refuses_to_overwrite_unless_forced_and_names_unknown_views(demo_ledger, exported, tmp_path):
    before = (exported / "requests.parquet").stat().st_mtime_ns
    refused = run("ledger", "export", demo_ledger, "--out", exported, "--view", "requests")
    assert refused.exit_code == 2 and "already exist" in refused.stderr and "--force" in refused.stderr
    assert (exported / "requests.parquet").stat().st_mtime_ns == before
    forced = run("ledger", "export", demo_ledger, "--out", exported, "--view", "requests", "--force", "--json")
    assert forced.exit_code == 0 and json.loads(forced.stdout) == [
        {"view": "requests", "path": str(exported / "requests.parquet"), "rows": 24}]
    unknown = run("ledger", "export", demo_ledger, "--out", tmp_path / "x", "--view", "nope")
    assert unknown.exit_code == 2 and "no such view: nope" in unknown.stderr and not (tmp_path / "x").exists()
    # the raw lines are the log itself, not a view of the projection
    raw = run("ledger", "export", demo_ledger, "--out", tmp_path / "raw", "--view", "ledger_lines", "--format", "jsonl")
    assert raw.exit_code == 2 and "no such view: ledger_lines" in raw.stderr
    assert run("ledger", "export", demo_ledger, "--out", tmp_path / "y", "--format", "xlsx").exit_code == 2


def test_export_gets_its_connection_in_one_place(monkeypatch, demo_ledger, tmp_path):
    """The views are read through `_connection` alone: the projection's."""
    from ledger.analytics import export as module

    calls = []
    real = module._connection

    def spy(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(module, "_connection", spy)
    written = module.export(demo_ledger, tmp_path / "o", "jsonl", ["pending"])
    assert calls == [demo_ledger] and [(w.view, w.rows) for w in written] == [("pending", 1)]


# --- Ctrl-C inside DuckDB ---------------------------------------------------------------------


@pytest.fixture()
def sigint_restored():
    """`cli.output.interrupted` ignores later Ctrl-Cs, right for a process about to exit; give this
    one its handler back (children started later would inherit the ignoring)."""
    import signal

    saved = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, saved)


@pytest.mark.parametrize("command", [["query", "select 1"], ["stats"], ["export", "--out", "OUT"]])
def test_a_query_duckdb_stopped_on_ctrl_c_exits_130_without_a_traceback(monkeypatch, demo_ledger, tmp_path, sigint_restored,
                                                                        command):
    """DuckDB stops a query on Ctrl-C and raises RuntimeError("Query interrupted"), not KeyboardInterrupt."""
    import ledger.analytics.export
    import ledger.analytics.query
    import ledger.analytics.stats

    def stopped(*args, **kwargs):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(ledger.analytics.query, "run", stopped)
    monkeypatch.setattr(ledger.analytics.stats, "stats", stopped)
    monkeypatch.setattr(ledger.analytics.export, "_connection", stopped)
    args = [str(tmp_path / "out") if a == "OUT" else a for a in command]
    result = run("ledger", args[0], demo_ledger, *args[1:])
    assert result.exit_code == 130 and result.stderr.startswith("interrupted: "), result.stderr
    assert not (tmp_path / "out").exists()


# --- a ledger that does not verify: each command says what its numbers cover --------------------------


def test_audit_export_and_report_of_a_tampered_ledger_say_what_they_cover(demo_ledger, tmp_path):
    """Found by a newcomer: `ledger audit` said "every call conforms" of a ledger verify rejects
    without a word, and `export` and `report` said their rows were the history as recorded when
    they hold only the lines before the problem."""
    import shutil

    path = tmp_path / "ledger"
    shutil.copytree(demo_ledger, path)
    segment = sorted(path.glob("events-*.jsonl"))[-1]
    lines = segment.read_bytes().split(b"\n")
    mark = b'"data":{"args":{"'
    at = next(k for k, line in enumerate(lines) if k > len(lines) // 2 and mark in line)
    cut = lines[at].index(mark) + len(mark)
    lines[at] = lines[at][:cut] + b"X" + lines[at][cut + 1 :]  # one byte of a key of the stored arguments
    segment.write_bytes(b"\n".join(lines))
    seq = json.loads(lines[at])["body"]["seq"]

    audit = run("ledger", "audit", path)
    assert f"does not verify (seq {seq}: data:" in audit.stderr
    export = run("ledger", "export", path, "--format", "csv", "--out", tmp_path / "out")
    assert export.exit_code == 0
    assert f"the rows written cover seq 1 to {seq - 1}" in export.stderr
    report = run("ledger", "report", path, "--out", tmp_path / "r.html")
    assert "the report covers the lines before the first problem" in report.stderr
    assert "cover the lines before the first problem" in (tmp_path / "r.html").read_text()
