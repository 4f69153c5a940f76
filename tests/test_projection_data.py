"""The projection checks the data beside the bodies as `ledger verify` does (ledger.proof.data):
a line whose arguments, context, kept result or spelling fail stops the projection before it,
with verify's problem (kind `data`) as the one row of `chain_breaks`; redaction markers count
only where a `redacted` event announces them, and an announcement that does not hold stops it at
the `redacted` event, as verify does. Built from scratch, refreshed line by line, or with the
segment read again after the projection held it, the verdict is verify's.

And a refresh decodes only the open requests its events name (open_requests is read on demand)."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.analytics import projection as proj
from ledger.analytics.query import run
from ledger.digest import redaction_marker, value_digest
from ledger.proof.redact import redact
from ledger.proof.verify import verify
from tests.ledger_factory import Forge, random_history, read_lines, write_lines
from tests.test_projection import copy_ledger
from tests.test_views import build_gate_ledger


@pytest.fixture(scope="module")
def gate(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "gate"
    build_gate_ledger(path, segment_bytes=4096)
    return path


def assert_as_verify(path: Path) -> None:
    """The projection's coverage and first problem are verify's, and a rebuild gives the same tables."""
    report = verify(path, engine="python")
    answer = run(path, "SELECT seq, kind, detail FROM chain_breaks UNION ALL SELECT seq, 'workflow', detail FROM violations")
    assert answer.coverage.complete == report.ok, (answer.coverage, report.problem)
    if report.ok:
        assert answer.rows == [] and answer.coverage.events == report.count
    else:
        assert answer.coverage.problem_seq == report.problem.seq
        assert answer.coverage.events == report.problem.seq - 1
        assert answer.rows == [(report.problem.seq, report.problem.kind, report.problem.message)]
    assert proj.check(path) == []


def _change_data(path: Path, seq: int, change) -> None:
    """Replace the data of line `seq` by change(data) (a dict, or bytes as stored); the body and hash stay."""
    segments = read_lines(path)
    for name, lines in segments:
        for i, line in enumerate(lines):
            body, digest, data = _split(line.rstrip(b"\n"))
            if msgspec.json.decode(body)["seq"] == seq:
                new = change(msgspec.json.decode(data))
                new = new if isinstance(new, bytes) else msgspec.json.encode(new, order="sorted")
                lines[i] = b'{"body":' + body + b',"hash":"' + digest + b'","data":' + new + b"}\n"
                write_lines([(name, lines)])
                return
    raise AssertionError(f"no line {seq}")


def _split(line: bytes) -> tuple[bytes, bytes, bytes]:
    from ledger.store.lines import split

    body, digest, data = split(line)
    return body, digest.encode(), data


# --- the data of one line -----------------------------------------------------------------------------


def _first_proposal(path: Path) -> int:
    return run(path, "SELECT min(request) FROM requests").rows[0][0]


TAMPERS = {
    "arguments": lambda d: {**d, "args": {**d["args"], "forged": 1}},
    "context": lambda d: {**d, "context": {"cwd": "/elsewhere"}},
    "no data": lambda d: b"null",
    "an extra member": lambda d: {**d, "extra": 1},
    "spelling": lambda d: msgspec.json.encode(d, order="sorted").replace(b":", b": ", 1),
    "a lone surrogate (DuckDB cannot read it)": lambda d: msgspec.json.encode(d, order="sorted").replace(
        b'{"args":{', b'{"args":{"\\ud800":0,', 1),
    "a marker no redaction announces": lambda d: {**d, "args": {k: redaction_marker(value_digest(v)) for k, v in d["args"].items()}},
}


@pytest.fixture(params=["compiled", "python"])
def line_checks(request, monkeypatch) -> str:
    """The projection's per-line checks in C (ledger._native.check_lines, when built) or all in Python."""
    if request.param == "python":
        monkeypatch.setattr(proj.native, "module", lambda: None)
    return request.param


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
@pytest.mark.parametrize("when", ["before the projection", "after the projection"])
def test_data_changed_beside_a_proposal_stops_the_projection_where_verify_stops(gate, tmp_path, tamper, when, line_checks):
    path = copy_ledger(gate, tmp_path / "ledger")
    target = _first_proposal(path)
    if when == "before the projection":
        proj.remove(path)
    else:
        assert run(path, "SELECT 1").coverage.complete
    _change_data(path, target, TAMPERS[tamper])
    report = verify(path, engine="python")
    assert not report.ok and report.problem.seq == target and report.problem.kind == "data"
    assert_as_verify(path)


@pytest.mark.parametrize("tamper", ["no data", "arguments", "spelling"])
def test_the_data_of_the_last_projected_line_changed_in_place_stops_the_projection(tmp_path, tamper, line_checks):
    """Nothing after the line moves, and its hash does not cover its data: the refresh checks the
    data beside the head line as it was projected (found by the hypothesis test below)."""
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        forge.propose("read", effect="allow")
        last, _ = forge.propose("read", {"n": 1}, effect="deny")
    assert run(path, "SELECT 1").coverage.complete
    _change_data(path, last, TAMPERS[tamper])
    assert_as_verify(path)


def test_a_kept_result_changed_stops_the_projection(tmp_path):
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        request, digest = forge.propose("read", effect="allow")
        forge.start(request, digest)
        done = forge.append(_executed(request, digest), {"result": {"ok": True}})
        forge.propose("read", effect="deny")
    assert_as_verify(path)
    _change_data(path, done, lambda d: {"result": {"ok": False}})
    assert verify(path, engine="python").problem.seq == done
    assert_as_verify(path)


def _executed(request: int, digest: str):
    from ledger import events as ev

    return ev.Executed(request=request, args_digest=digest, outcome="ok", result_digest=value_digest({"ok": True}), error=None)


def test_data_beside_an_event_that_carries_none_stops_the_projection(tmp_path):
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        request, _ = forge.propose("read", effect="deny")
        other, _ = forge.propose("read", effect="deny")
    assert_as_verify(path)
    segments = read_lines(path)
    name, lines = segments[0]
    lines[0] = lines[0][: -len(b"null}\n")] + b'{"x":1}}\n'  # the genesis
    write_lines([(name, lines)])
    assert verify(path, engine="python").problem.seq == 1
    assert_as_verify(path)


# --- redactions -----------------------------------------------------------------------------------------


def _denied(forge: Forge, **args) -> int:
    request, _ = forge.propose("wire", args, effect="deny")
    return request


def test_a_real_redaction_keeps_the_projection_complete_before_during_and_after(tmp_path):
    path = tmp_path / "ledger"
    with Forge(path, segment_bytes=2048) as forge:
        target = _denied(forge, iban="DE00", n=1)
        for n in range(30):
            _denied(forge, iban="other", n=n)
    assert run(path, "SELECT 1").coverage.complete  # projected with the value
    redact(path, target, "args.iban", reason="test", by="dpo")  # the segment rewritten, the event appended
    assert verify(path, engine="python").ok
    assert_as_verify(path)  # read again (the marker checked with the announcement), then the event
    assert "$redacted" in run(path, f"SELECT args::VARCHAR FROM events WHERE position = {target}").rows[0][0]
    proj.remove(path)
    assert_as_verify(path)  # built from scratch with the marker in place


@pytest.mark.parametrize("announce", ["another value", "a field that does not exist"])
@pytest.mark.parametrize("projected", [False, True])
def test_a_redaction_whose_announcement_does_not_hold_stops_at_its_own_line(tmp_path, announce, projected):
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        target = _denied(forge, amount=10)
        _denied(forge, amount=11)
    if projected:
        assert run(path, "SELECT 1").coverage.complete
    with Forge(path) as forge:
        forge.clock.set(forge.clock().replace(year=2027))
        if announce == "another value":
            bad = forge.redacted(target, "args.amount", value=12)
        else:
            bad = forge.redacted(target, "args.nothing", value=12)
        forge.propose("read", effect="deny")
    report = verify(path, engine="python")
    assert not report.ok and report.problem.seq == bad and report.problem.kind == "data", report.problem
    assert_as_verify(path)


def test_an_announced_redaction_whose_value_is_still_there_is_lawful(tmp_path):
    """verify accepts a `redacted` event whose target still holds the value (a redaction stopped
    before it rewrote the segment); so does the projection, whether the line is in the same
    refresh or an earlier one."""
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        target = _denied(forge, amount=10)
    assert run(path, "SELECT 1").coverage.complete
    with Forge(path) as forge:
        forge.clock.set(forge.clock().replace(year=2027))
        forge.redacted(target, "args.amount", value=10)
        second = _denied(forge, amount=20, card="1234")
        forge.redacted(second, "args.card", value="1234")
    assert verify(path, engine="python").ok
    assert_as_verify(path)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), at=st.floats(0.0, 1.0), tamper=st.sampled_from(sorted(TAMPERS)),
       cut=st.floats(0.0, 1.0))
def test_any_history_with_one_line_of_data_changed_is_judged_as_verify_judges_it(tmp_path_factory, seed, at, tamper, cut,
                                                                               line_checks):
    """A random history, projected up to a random line, then the data of a random line with
    data changed: the refreshed projection (built incrementally, or read again) agrees with verify."""
    path = tmp_path_factory.mktemp("history") / "ledger"
    random_history(path, random.Random(seed), steps=40, unlawful_end=False, segment_bytes=3000)
    with_data = [s for s, in run(path, "SELECT position FROM events WHERE kind IN ('proposed', 'edited')").rows]
    target = with_data[min(int(at * len(with_data)), len(with_data) - 1)]
    if cut < 0.5:
        proj.remove(path)
    _change_data(path, target, TAMPERS[tamper])
    assert_as_verify(path)


# --- what a refresh reads -----------------------------------------------------------------------------


def test_a_refresh_decodes_only_the_open_requests_its_events_name(tmp_path, monkeypatch):
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        asks = [forge.propose(args={"n": n}, effect="ask")[0] for n in range(3)]
        for n in range(200):
            forge.propose("read", {"n": n}, effect="allow")
    assert run(path, "SELECT 1").coverage.complete
    decoded = []
    real = proj._STATE_DECODER

    class Counting:
        def decode(self, data):
            state = real.decode(data)
            decoded.append(state.request)
            return state

    monkeypatch.setattr(proj, "_STATE_DECODER", Counting())
    with Forge(path) as forge:
        forge.clock.set(forge.clock().replace(year=2027))
        forge.interrupt(asks[1])
    assert proj.refresh(path).complete
    assert decoded == [asks[1]]
    assert run(path, "SELECT request, status FROM requests WHERE tool = 'refund' ORDER BY 1").rows == [
        (asks[0], "interrupting"), (asks[1], "pending"), (asks[2], "interrupting")]
    assert proj.check(path) == []
