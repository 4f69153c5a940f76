"""The views served from the columnar projection (ledger.analytics.query, ledger.analytics.schema).

- On ledgers written by the Gate, by the simulator and at random, every view gives the same rows
  and the same column types from the projection as from the log itself (ledger.analytics.views),
  `events` but its `body`.
- A broken ledger: the projection covers the lines before the first problem, and its one row of
  `chain_breaks` or `violations` is the first row the log views give (verify's problem).
- A redaction rewrites a segment: the next query reads that segment again and shows the marker,
  without a rebuild. Data beside a body that DuckDB's JSON reader refuses does not stop it.
- A query cannot write or read files; any DuckDB client can open the projection read-only and
  query the views by name; a ledger directory that cannot be written gets its projection in the
  cache.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from ledger.analytics import projection as proj
from ledger.analytics import schema
from ledger.analytics import views as log_views
from ledger.analytics.query import QueryRefused, coverage, open_views, query, run
from ledger.proof.redact import redact
from ledger.proof.verify import verify
from ledger.store.log import list_segments
from ledger.workflow.simulate import read_calls, read_reviewers, simulate
from tests.ledger_factory import Forge, random_history, read_lines, rechain, write_lines
from tests.test_views import build_gate_ledger

ROOT = Path(__file__).resolve().parents[1]
# the projection's views that the log views also have, and a key that orders their rows
KEYED = {
    "events": "position", "requests": "request", "pending": "request", "decision_times": "request",
    "rates_by_tool": "tool", "rates_by_rule": "policy, rule", "rates_by_approver": "approver",
    "torn_tail": "segment_file",
}


def copy_ledger(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for segment in list_segments(source):
        shutil.copyfile(segment, target / segment.name)
    return target


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("columnar")
    out = {"gate": base / "gate"}
    build_gate_ledger(out["gate"], segment_bytes=4096)
    out["simulated"] = base / "simulated"
    simulate(Policy.load(ROOT / "samples" / "retail.policy"), read_calls(ROOT / "samples" / "demo-calls.jsonl"),
             out["simulated"], reviewers=read_reviewers(ROOT / "samples" / "demo-reviewer.json"))
    out["random"] = base / "random"
    random_history(out["random"], random.Random(20261207), steps=400, unlawful_end=False, segment_bytes=6000)
    return out


def _rows(con, view: str) -> list[tuple]:
    columns = [c for c in (r[0] for r in con.execute(f"DESCRIBE {view}").fetchall()) if c != "body"]
    select = ", ".join(f'"{c}"' for c in columns)
    return con.execute(f"SELECT {select} FROM {view} ORDER BY {KEYED[view]}").fetchall()


def _types(con, view: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {view}").fetchall() if r[0] != "body"]


@pytest.mark.parametrize("which", ["gate", "simulated", "random"])
def test_every_view_gives_the_rows_the_log_gives(ledgers, tmp_path, which):
    path = copy_ledger(ledgers[which], tmp_path / "ledger")
    assert verify(path).ok
    log = log_views.connect(path)
    try:
        with open_views(path) as views:
            assert views.coverage.complete and views.coverage.built
            assert views.coverage.events == verify(path).count
            for view in KEYED:
                assert _types(views.con, view) == _types(log, view), view
                mine, theirs = _rows(views.con, view), _rows(log, view)
                assert len(mine) == len(theirs), view
                for a, b in zip(mine, theirs):
                    assert a == b, (view, a, b)
            assert views.con.execute("SELECT count(*) FROM chain_breaks").fetchone()[0] == 0
            assert views.con.execute("SELECT count(*) FROM violations").fetchone()[0] == 0
            assert log.execute("SELECT count(*) FROM chain_breaks").fetchone()[0] == 0
    finally:
        log.close()


def test_the_views_have_the_documented_columns(ledgers, tmp_path):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    doc = schema.columns_doc()
    with open_views(path) as views:
        for view in schema.VIEW_NAMES:
            columns = [r[0] for r in views.con.execute(f"DESCRIBE {view}").fetchall()]
            assert columns == list(doc[view]) or set(columns) == set(doc[view]), view
            assert all(doc[view][c] for c in columns), view
        assert [r[0] for r in views.con.execute("DESCRIBE events").fetchall()] == schema.EVENT_COLUMNS


def test_appended_lines_are_in_the_next_query(ledgers, tmp_path):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    before = query(path, "SELECT count(*) FROM events")[1][0][0]
    with Forge(path) as forge:
        forge.clock.set(forge.clock() .replace(year=2027))
        request, digest = forge.ask(proposer="agent-7")
    answer = run(path, "SELECT status, proposer FROM requests WHERE request = " + str(request))
    assert answer.rows == [("pending", "agent-7")] and not answer.coverage.built
    assert query(path, "SELECT count(*) FROM events")[1][0][0] == before + 2
    assert query(path, "SELECT count(*) FROM pending WHERE request = " + str(request))[1] == [(1,)]


# --- broken ledgers -------------------------------------------------------------------------------


def _tamper_hash(path: Path) -> None:
    segments = read_lines(path)
    seg, lines = segments[1]
    lines[2] = lines[2].replace(b'"ts":"2026-03-01T1', b'"ts":"2026-03-01T0', 1)
    write_lines([(seg, lines)])


def _delete_line(path: Path) -> None:
    segments = read_lines(path)
    seg, lines = segments[1]
    del lines[1]
    write_lines([(seg, lines)])


def _forge_self_approval(path: Path) -> None:
    with Forge(path) as forge:
        forge.clock.set(forge.clock().replace(year=2027))
        request, digest = forge.ask(proposer="agent-9")
        forge.approve(request, "agent-9", digest)


@pytest.mark.parametrize("tamper, view", [(_tamper_hash, "chain_breaks"), (_delete_line, "chain_breaks"),
                                          (_forge_self_approval, "violations")])
def test_a_broken_ledger_shows_its_first_problem(ledgers, tmp_path, tamper, view):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    assert coverage(path).complete
    tamper(path)
    report = verify(path)
    assert not report.ok
    log = log_views.connect(path)
    try:
        first = log.execute(f"SELECT * FROM {view} ORDER BY seq{', check_order' if view == 'chain_breaks' else ''} LIMIT 1").fetchone()
    finally:
        log.close()
    with open_views(path) as views:
        cov = views.coverage
        assert not cov.complete and cov.problem_seq == report.problem.seq == first[0]
        assert cov.events == report.problem.seq - 1
        mine = views.con.execute(f"SELECT * FROM {view}").fetchall()
        assert len(mine) == 1
        if view == "chain_breaks":
            assert mine[0][:3] == first[:3] and mine[0][4:6] == first[4:6]  # seq, problem, kind; where
        else:
            assert mine[0][:3] == first[:3] and mine[0][4:] == first[4:]  # seq, request, code; kind, where
        assert mine[0][3] == report.problem.message
        assert views.con.execute("SELECT max(position) FROM events").fetchone()[0] == cov.events
        row = views.con.execute("SELECT complete, problem_seq FROM coverage").fetchone()
        assert row == (False, cov.problem_seq)
    # the CLI says which lines the rows cover
    result = CliRunner().invoke(app, ["ledger", "query", str(path), "select count(*) from events"])
    assert result.exit_code == 0
    assert f"the rows cover seq 1 to {cov.events:,}" in result.output


def test_a_torn_tail_is_reported_and_not_a_problem(ledgers, tmp_path):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    last = list_segments(path)[-1]
    with open(last, "ab") as handle:
        handle.write(b'{"body":{"kind":"propo')
    with open_views(path) as views:
        assert views.coverage.complete and views.coverage.torn_bytes == 22
        assert views.con.execute("SELECT fragment_bytes FROM torn_tail").fetchall() == [(22,)]
    log = log_views.connect(path)
    assert log.execute("SELECT segment_file, file_offset, fragment_bytes, fragment_sha256 FROM torn_tail").fetchall() == \
        query(path, "SELECT segment_file, file_offset, fragment_bytes, fragment_sha256 FROM torn_tail")[1]
    log.close()


# --- data beside the bodies -----------------------------------------------------------------------


def test_a_redaction_is_in_the_next_query_without_a_rebuild(ledgers, tmp_path):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    target = query(path, "SELECT request FROM requests WHERE status = 'executed' AND tool = 'small_change' LIMIT 1")[1][0][0]
    before = query(path, f"SELECT args FROM events WHERE position = {target}")[1][0][0]
    assert '"id":3' in before
    redact(path, target, "args.id", reason="test", by="dpo")
    answer = run(path, f"SELECT json_extract(args, '$.id') FROM events WHERE position = {target}")
    assert not answer.coverage.built
    assert "redacted" in answer.rows[0][0]
    result = proj.refresh(path)
    assert not result.rebuilt
    assert proj.check(path) == []  # the same as a projection made after the redaction


@pytest.mark.parametrize("change", ["a lone surrogate", "not JSON", "not UTF-8"])
def test_data_that_duckdb_cannot_read_stops_the_projection_where_verify_stops(tmp_path, change):
    """Data changed beside its digest fails verify's data check, however unreadable (to DuckDB or at
    all): the projection stops before that line, without an error, and holds the lines before it."""
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        a, _ = forge.propose(args={"note": "fine"})
        b, _ = forge.propose(args={"note": "lone"})
        forge.propose(args={"note": "after"})
    segments = read_lines(path)
    seg, lines = segments[0]
    if change == "a lone surrogate":
        lines[b - 1] = lines[b - 1].replace(b'"lone"', b'"\\ud800x"')
    elif change == "not JSON":
        lines[b - 1] = lines[b - 1].replace(b'"lone"}', b'"lone"')
    else:
        lines[b - 1] = lines[b - 1].replace(b'"data":{', b'"data":{"args":{"x":"\xff"},"y":', 1)
    write_lines([(seg, lines)])
    report = verify(path)
    assert report.problem.seq == b and report.problem.kind == "data"
    answer = run(path, "SELECT position, json_extract_string(args, '$.note') FROM events WHERE kind = 'proposed' ORDER BY 1")
    assert not answer.coverage.complete and answer.coverage.problem_seq == b
    assert answer.coverage.problem == report.problem.message
    assert answer.rows == [(a, "fine")]


# --- access ---------------------------------------------------------------------------------------


def test_a_query_cannot_write_or_read_files(ledgers, tmp_path):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    for sql in ("DELETE FROM event_rows", "COPY event_rows TO '/tmp/x.csv'", "SELECT 1; SELECT 2", "ATTACH '/tmp/y.db'"):
        with pytest.raises(QueryRefused):
            run(path, sql)
    with pytest.raises(duckdb.Error):
        run(path, "SELECT * FROM read_text('/etc/hostname')")
    with pytest.raises(duckdb.Error):
        run(path, "SELECT * FROM read_json_auto('" + str(list_segments(path)[0]) + "')")


def test_any_duckdb_client_can_read_the_projection(ledgers, tmp_path):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    coverage(path)
    con = duckdb.connect(str(path / "projection" / "projection.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM pending").fetchone()[0] == 2
        assert con.execute("SELECT complete FROM coverage").fetchone()[0] is True
    finally:
        con.close()
    # attached under another name, the views still find their tables
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{path / 'projection' / 'projection.duckdb'}' AS p (READ_ONLY)")
        assert con.execute("SELECT count(*) FROM p.pending").fetchone()[0] == 2
    finally:
        con.close()


def test_a_ledger_directory_that_cannot_be_written_gets_its_projection_in_the_cache(ledgers, tmp_path, monkeypatch):
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == path and mode == os.W_OK
                        else real_access(p, mode, **kw))
    answer = run(path, "SELECT count(*) FROM requests")
    assert answer.rows[0][0] > 0
    assert not (path / "projection").exists()
    assert (proj.fallback_directory(path) / proj.DATABASE).is_file()


def test_docs_views_md_lists_every_view_and_column():
    assert (ROOT / "docs" / "views.md").read_text() == schema.views_markdown(), (
        "docs/views.md is generated: python -c 'from ledger.analytics.schema import views_markdown; "
        "open(\"docs/views.md\", \"w\").write(views_markdown())'"
    )


# --- hypothesis: any history, refreshed at any points ------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), cuts=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4),
       unlawful=st.booleans())
def test_refreshed_at_any_points_the_views_equal_the_log_views(tmp_path_factory, seed, cuts, unlawful):
    """A random history (lawful, or with an unlawful last event), its bytes revealed in steps as a
    writer would (torn lines included), the projection refreshed after each: at the end every view
    equals the log views (the lines before the first problem), and the tables equal a rebuild."""
    source = tmp_path_factory.mktemp("source") / "ledger"
    random_history(source, random.Random(seed), steps=80, unlawful_end=unlawful, segment_bytes=3000)
    segments = [(p.name, p.read_bytes()) for p in list_segments(source)]
    total = sum(len(b) for _, b in segments)
    target = tmp_path_factory.mktemp("target") / "ledger"
    target.mkdir()
    for cut in sorted(int(total * c) for c in cuts) + [total]:
        remaining = cut
        for name, data in segments:
            if remaining <= 0:
                break
            (target / name).write_bytes(data[:remaining])
            remaining -= len(data)
        if list_segments(target):
            proj.refresh(target)
    report = verify(target)
    with open_views(target) as views:
        assert views.coverage.complete == report.ok
        if not report.ok:
            assert views.coverage.problem_seq == report.problem.seq
        log = log_views.connect(target)
        try:
            if report.ok:
                for view in KEYED:
                    assert _rows(views.con, view) == _rows(log, view), view
            else:  # the requests of the lines before the problem
                limit = views.coverage.events
                mine = views.con.execute("SELECT request, status FROM requests ORDER BY 1").fetchall()
                replayed = _replay_statuses(target, limit)
                assert mine == replayed
        finally:
            log.close()
    assert proj.check(target) == []


def _replay_statuses(path: Path, limit: int) -> list[tuple[int, str]]:
    from ledger.store.log import LedgerReader
    from ledger.workflow.machine import Workflow

    workflow = Workflow()
    for record in LedgerReader(path).records():
        if record.seq > limit:
            break
        workflow.step(record.seq, record.event)
    return sorted((r, s.status) for r, s in workflow.requests.items())


def test_query_and_stats_read_only_what_is_new_and_never_run_a_full_verify(ledgers, tmp_path, monkeypatch):
    """The newcomer's waits: every `stats` and `query` parsed every line and then ran a full verify."""
    import ledger.proof.verify as verify_module

    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    assert coverage(path).built
    with Forge(path) as forge:
        forge.clock.set(forge.clock().replace(year=2027))
        forge.ask(proposer="agent-7")
    result = proj.refresh(path)
    assert result.added == 2 and not result.rebuilt  # the two new lines, nothing else

    def no_verify(*args, **kwargs):
        raise AssertionError("a query ran a full verify")

    monkeypatch.setattr(verify_module, "verify", no_verify)
    runner = CliRunner()
    for args in (["ledger", "query", str(path), "select count(*) from pending"], ["ledger", "stats", str(path)],
                 ["ledger", "stats", str(path), "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output


def test_a_query_or_export_is_not_held_to_the_refresh_memory_bound(ledgers, tmp_path):
    """A new user's JSONL export of 100,000 events ran out of memory: the refresh's 256 MB bound
    was left on the connection the export read through."""
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    for _ in range(2):  # the refreshing connection, then a read-only one
        with open_views(path) as views:
            limit = views.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
            assert limit != proj.MEMORY_LIMIT and not limit.startswith("256")


def test_stats_show_a_sub_second_time_to_decision_as_it_is():
    from cli.render_stats import _duration

    assert _duration(0.75) == "0.75s" and _duration(1.6) == "1.60s" and _duration(2.0) == "2s" and _duration(45) == "45s"


def test_a_projection_of_the_previous_format_is_rebuilt(ledgers, tmp_path):
    """Format 2 had tables named `events` and `requests`; a query over a ledger projected by that
    version failed ("Existing object events is of type Table")."""
    path = copy_ledger(ledgers["gate"], tmp_path / "ledger")
    (path / "projection").mkdir()
    con = duckdb.connect(str(path / "projection" / "projection.duckdb"))
    con.execute("CREATE TABLE meta (format VARCHAR, events BIGINT)")
    con.execute("INSERT INTO meta VALUES ('countersign-projection/2', 5)")
    con.execute("CREATE TABLE events (seq BIGINT)")
    con.execute("CREATE TABLE final_requests (request BIGINT)")
    con.execute("CREATE VIEW requests AS SELECT * FROM final_requests")
    con.close()
    answer = run(path, "SELECT count(*) FROM events")
    assert answer.coverage.built and "format" in answer.coverage.reason
    assert answer.rows[0][0] == verify(path).count


def test_the_counts_each_refresh_adds_compact_to_one_row_per_key():
    con = duckdb.connect()
    con.execute(schema.TABLES["final_summary"])
    con.execute(schema.TABLES["review_counts"])
    con.execute("INSERT INTO final_summary VALUES ('t','ask','executed','approve',false,'ok',2), "
                "('t','ask','executed','approve',false,'ok',3), ('u','allow','executed',NULL,false,'ok',1)")
    con.execute("INSERT INTO review_counts VALUES ('a',1,2,1,1,0,0), ('a',1,1,1,0,0,0), ('b',1,1,0,0,1,0)")
    proj._compact_counts(con, "final_summary", schema.SUMMARY_KEYS, ("n",))
    proj._compact_counts(con, "review_counts", ("approver",), ("requests", "actions", "approve", "reject", "edit", "respond"))
    assert con.execute("SELECT * FROM final_summary ORDER BY tool").fetchall() == [
        ("t", "ask", "executed", "approve", False, "ok", 5), ("u", "allow", "executed", None, False, "ok", 1)]
    assert con.execute("SELECT * FROM review_counts ORDER BY approver").fetchall() == [
        ("a", 2, 3, 2, 1, 0, 0), ("b", 1, 1, 0, 0, 1, 0)]
