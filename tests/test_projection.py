"""The columnar projection (ledger.analytics.projection) and the stats read from it.

- An incremental refresh after any cut point (mid-line and across segments included) gives the
  same tables as a rebuild from the log alone, and the same Stats as the views.
- The projection-backed Stats equal the views-based Stats on a Gate-built ledger, on the
  simulated sample trace (corpus-like: real policy, reviewer script) and on random histories.
- A log rewritten (with recomputed hashes), truncated or replaced behind the projection makes it
  refuse its stored head (head hash mismatch) and rebuild; a tampered or unlawful line stops it,
  and stats fall back to the views.
- Appends that land while a refresh runs are picked up by the next one.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from ledger.analytics import projection as proj
from ledger.clock import parse_ts
from ledger.store.log import Ledger, LedgerReader, list_segments
from ledger.workflow.simulate import read_calls, read_reviewers, simulate
from ledger.analytics.stats import projection_stats, stats, views_stats
from ledger.proof.verify import verify
from tests.ledger_factory import Forge, random_history, read_lines, rechain, write_lines
from tests.test_views import build_gate_ledger

ROOT = Path(__file__).resolve().parents[1]
LATER = datetime(2099, 1, 1, tzinfo=timezone.utc)  # `stats` measures ages at the wall clock unless told an instant


@pytest.fixture(scope="module")
def gate_ledger(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gate") / "ledger"
    build_gate_ledger(path, segment_bytes=4096)
    return path


@pytest.fixture(scope="module")
def simulated_ledger(tmp_path_factory) -> Path:
    """The sample trace through the retail policy with the scripted reviewers: approvals, edits,
    rejections, responses, timeouts and requests left pending, as on the corpus."""
    path = tmp_path_factory.mktemp("sim") / "ledger"
    policy = Policy.load(ROOT / "samples" / "retail.policy")
    calls = read_calls(ROOT / "samples" / "demo-calls.jsonl")
    reviewers = read_reviewers(ROOT / "samples" / "demo-reviewer.json")
    simulate(policy, calls, path, reviewers=reviewers)
    return path


@pytest.fixture(scope="module")
def random_ledger(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("random") / "ledger"
    random_history(path, random.Random(20260401), steps=300, unlawful_end=False, segment_bytes=6000)
    assert len(list_segments(path)) > 3
    return path


def copy_ledger(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for segment in list_segments(source):
        shutil.copyfile(segment, target / segment.name)
    return target


def assert_same_stats(path: Path) -> None:
    """Projection-backed and views-based Stats are identical, at the last event and at a later now."""
    via_views = views_stats(path)
    via_projection = projection_stats(path, create=True)
    assert via_projection is not None, proj.refresh(path)
    assert via_projection == via_views
    later = via_views.as_of + timedelta(hours=3)
    assert projection_stats(path, later) == views_stats(path, later)
    assert stats(path, via_views.as_of) == via_views  # the default uses the projection, now present


@pytest.mark.parametrize("which", ["gate_ledger", "simulated_ledger", "random_ledger"])
def test_projection_stats_equal_views_stats(request, tmp_path, which):
    path = copy_ledger(request.getfixturevalue(which), tmp_path / "ledger")
    assert verify(path).ok
    assert_same_stats(path)
    result = proj.refresh(path)
    assert result.complete and result.added == 0 and not result.rebuilt
    assert result.events == verify(path).count
    assert proj.check(path) == []
    # The projection is never read as part of the ledger.
    assert [p.name for p in list_segments(path)] == [p.name for p in list_segments(request.getfixturevalue(which))]
    assert verify(path).count == result.events


def test_incremental_refresh_equals_a_rebuild_at_random_cut_points(gate_ledger, random_ledger, tmp_path):
    rng = random.Random(7)
    for n, source in enumerate((gate_ledger, random_ledger)):
        segments = [(p.name, p.read_bytes()) for p in list_segments(source)]
        total = sum(len(b) for _, b in segments)
        cuts = sorted(rng.sample(range(1, total), 3)) + [total]
        target = tmp_path / f"ledger-{n}"
        target.mkdir()
        for cut in cuts:
            # The ledger as it was when `cut` bytes had been written (a torn last line included).
            remaining = cut
            for name, data in segments:
                if remaining <= 0:
                    break
                (target / name).write_bytes(data[:remaining])
                remaining -= len(data)
            result = proj.refresh(target)
            report = verify(target, engine="python")
            assert proj.check(target) == []
            if not report.ok:
                # the gate ledger's redacted lines hold markers its later `redacted` events announce: a cut
                # before those is a ledger verify rejects too (the data is checked), and the projection stops there
                assert not result.complete and result.problem_seq == report.problem.seq and report.problem.kind == "data"
                continue
            assert result.complete, result
            assert result.events == sum(1 for _ in LedgerReader(target).lines())
            assert projection_stats(target) == views_stats(target)
        assert proj.refresh(target).events == verify(source).count


def test_a_rewritten_log_makes_the_projection_refuse_its_head_and_rebuild(gate_ledger, tmp_path):
    path = copy_ledger(gate_ledger, tmp_path / "ledger")
    first = proj.refresh(path)
    assert first.complete and first.rebuilt
    # A careful forger changes an early event and recomputes every later hash and prev.
    segments = read_lines(path)
    flat = [line for _, lines in segments for line in lines]
    index = next(i for i, line in enumerate(flat) if b'"approver":"alice"' in line)
    flat[index] = flat[index].replace(b'"approver":"alice"', b'"approver":"mallory"')
    flat = rechain(flat, index)
    out, i = [], 0
    for seg, lines in segments:
        out.append((seg, flat[i : i + len(lines)]))
        i += len(lines)
    write_lines(out)
    assert verify(path).ok  # the chain alone cannot tell; a checkpoint would
    result = proj.refresh(path)
    assert result.rebuilt and result.complete
    # every segment was written again: the first is read again and found the same, the one with
    # the forged line is not what was projected
    assert "is not the line projected at seq" in result.reason, result.reason
    assert result.head != first.head and result.events == first.events
    assert projection_stats(path) == views_stats(path)
    assert proj.check(path) == []


def test_a_truncated_or_replaced_log_makes_the_projection_rebuild(gate_ledger, tmp_path):
    path = copy_ledger(gate_ledger, tmp_path / "ledger")
    proj.refresh(path)
    last = list_segments(path)[-1]
    data = last.read_bytes()
    last.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])  # the last line removed
    result = proj.refresh(path)
    assert result.rebuilt and result.complete and "no longer holds the last line projected" in result.reason
    assert projection_stats(path) == views_stats(path)
    # Another ledger in the same directory.
    for segment in list_segments(path):
        segment.unlink()
    with Forge(path) as forge:
        request, digest = forge.ask()
        forge.approve(request, "sup-1", digest)
    result = proj.refresh(path)
    assert result.rebuilt and result.complete and result.events == 4
    assert projection_stats(path) == views_stats(path)


def test_a_tampered_or_unlawful_line_stops_the_projection_and_stats_use_the_views(gate_ledger, tmp_path):
    path = copy_ledger(gate_ledger, tmp_path / "ledger")
    before = proj.refresh(path)
    # A line appended after the projected head that does not match its hash.
    with Forge(path) as forge:
        request, digest = forge.propose(effect="allow")
        forge.start(request, digest)
    segments = read_lines(path)
    seg, lines = segments[-1]
    lines[-1] = lines[-1].replace(b'"executor":null', b'"executor":"eve"')
    write_lines([(seg, lines)])
    result = proj.refresh(path)
    assert not result.complete and result.problem_seq == before.events + 2
    assert "hash" in result.problem
    assert result.events == before.events + 1  # the good line before it is projected
    assert projection_stats(path) is None
    assert stats(path, LATER) == views_stats(path, LATER)
    # An unlawful event (a proposer approving its own call) with a valid hash.
    other = copy_ledger(gate_ledger, tmp_path / "other")
    proj.refresh(other)
    with Forge(other) as forge:
        request, digest = forge.ask(proposer="agent-9")
        bad = forge.approve(request, "agent-9", digest)
    result = proj.refresh(other)
    assert not result.complete and result.problem_seq == bad and "self-approval" in result.problem
    assert stats(other, LATER) == views_stats(other, LATER)


def test_appends_during_a_refresh_are_picked_up_by_the_next(gate_ledger, tmp_path, monkeypatch):
    path = copy_ledger(gate_ledger, tmp_path / "ledger")
    proj.refresh(path)
    forge = Forge(path, segment_bytes=4096)
    forge.clock.set(parse_ts(list(LedgerReader(path).records())[-1].event.ts))
    request, digest = forge.propose("read_file", effect="allow")  # something new for the refresh to read
    appended = [forge.start(request, digest)]
    original = proj._Projector.write_open

    def append_meanwhile(self, **kwargs):  # the log grows after the refresh has read it, before it commits
        for _ in range(3):
            request, digest = forge.propose("read_file", effect="allow")
            appended.append(forge.start(request, digest))
        original(self, **kwargs)

    monkeypatch.setattr(proj._Projector, "write_open", append_meanwhile)
    first = proj.refresh(path)
    monkeypatch.setattr(proj._Projector, "write_open", original)
    forge.close()
    count = verify(path).count
    assert first.complete and first.events < count == appended[-1]
    second = proj.refresh(path)
    assert second.complete and second.events == count and second.added == count - first.events
    assert proj.check(path) == []
    assert projection_stats(path) == views_stats(path)


def _writer(path: str, n: int) -> None:
    with Forge(Path(path), segment_bytes=2048) as forge:
        for i in range(n):
            request, digest = forge.propose("read_file", {"i": i}, effect="allow")
            forge.start(request, digest)
            forge.executed(request, digest)


def test_refreshes_while_another_process_appends(tmp_path):
    path = tmp_path / "ledger"
    Forge(path).close()
    proj.refresh(path)
    writer = multiprocessing.get_context("spawn").Process(target=_writer, args=(str(path), 60))
    writer.start()
    seen = []
    while writer.is_alive():
        result = proj.refresh(path)
        assert result.problem is None, result
        seen.append(result.events)
    writer.join()
    assert writer.exitcode == 0
    assert seen == sorted(seen)
    final = proj.refresh(path)
    assert final.complete and final.events == 1 + 60 * 3 == verify(path).count
    assert proj.check(path) == []
    assert projection_stats(path) == views_stats(path)


def test_a_damaged_projection_is_rebuilt(gate_ledger, tmp_path):
    path = copy_ledger(gate_ledger, tmp_path / "ledger")
    proj.refresh(path)
    (path / "projection" / proj.DATABASE).write_bytes(b"not a database" * 100)
    result = proj.refresh(path)
    assert result.rebuilt and result.complete
    assert projection_stats(path) == views_stats(path)
    proj.remove(path)
    assert not proj.exists(path)
    assert stats(path, LATER) == views_stats(path, LATER)  # no projection: stats make one
    assert proj.exists(path)
    # a damaged database beside a STATE that says it is up to date: the query rebuilds it
    (path / "projection" / proj.DATABASE).write_bytes(b"not a database" * 100)
    assert stats(path, LATER) == views_stats(path, LATER)


def test_project_command(gate_ledger, tmp_path):
    path = copy_ledger(gate_ledger, tmp_path / "ledger")
    runner = CliRunner()
    result = runner.invoke(app, ["ledger", "project", str(path), "--check"])
    assert result.exit_code == 0, result.output
    assert "projection covers" in result.output and "identical to a rebuild" in result.output
    def numbers(output: str) -> dict:  # without the wall clock's instant and the ages measured at it
        return {k: v for k, v in json.loads(output).items() if k not in ("as_of", "oldest_pending_seconds")}

    plain = runner.invoke(app, ["ledger", "stats", str(path), "--json"])
    assert plain.exit_code == 0
    proj.remove(path)
    assert numbers(runner.invoke(app, ["ledger", "stats", str(path), "--json"]).output) == numbers(plain.output)
    with Forge(path) as forge:
        request, digest = forge.ask(proposer="agent-9")
        forge.approve(request, "agent-9", digest)
    result = runner.invoke(app, ["ledger", "project", str(path)])
    assert result.exit_code == 1 and "stopped at seq" in result.output


def test_a_missing_segment_stops_the_projection_where_verify_stops(tmp_path):
    """The segments before the gap are folded; the stop is at the seq the missing segment's first
    line would have had, as verify reports it (not at seq 1 with nothing kept)."""
    path = tmp_path / "l"
    random_history(path, random.Random(7), steps=120, unlawful_end=False, segment_bytes=6000)
    segments = list_segments(path)
    assert len(segments) >= 4
    segments[2].unlink()
    report = verify(path)
    result = proj.refresh(path, rebuild=True)
    assert result.events == report.count and result.problem_seq == report.problem.seq
    assert "missing" in result.problem
