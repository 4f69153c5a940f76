"""verify: intact ledgers pass; any change, removal, reordering or unlawful step is named by seq."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.store.log import Ledger
from ledger.proof.verify import verify
from ledger.workflow.gate import Gate
from support import START, build_mixed_ledger, gate, policy

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
json_args = st.dictionaries(st.text(max_size=8), json_values, max_size=5)


def lines_of(path: Path) -> list[bytes]:
    return [line for seg in sorted(path.glob("events-*.jsonl")) for line in seg.read_bytes().splitlines(keepends=True)]


def rewrite(path: Path, lines: list[bytes]) -> None:
    for seg in path.glob("events-*.jsonl"):
        seg.unlink()
    (path / "events-00000001.jsonl").write_bytes(b"".join(lines))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "l"
    g, _ = build_mixed_ledger(path)
    g.close()
    return path


def copy_of(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(path, target)
    return target


def test_an_intact_ledger_verifies_with_its_count_and_head(mixed):
    report = verify(mixed)
    assert report.ok and report.exit_code == 0
    assert report.count == len(lines_of(mixed))
    assert report.head == lines_of(mixed)[-1][len(b'{"body":') :].split(b',"hash":"')[1][:64].decode()


@pytest.mark.parametrize(
    "tamper, expected_seq",
    [
        (lambda ls: ls[:5] + ls[6:], 6),  # a line deleted
        (lambda ls: ls[:5] + [ls[6], ls[5]] + ls[7:], 6),  # two lines swapped
        (lambda ls: ls[:6] + [ls[5]] + ls[6:], 7),  # a line duplicated
        (lambda ls: ls[1:], 1),  # the genesis removed
        (lambda ls: ls[:-1] + [ls[-1][:-20] + b"\n"], None),  # the last line cut short
    ],
    ids=["delete", "swap", "duplicate", "drop-genesis", "cut-last"],
)
def test_removing_reordering_or_repeating_lines_is_named_by_seq(mixed, tmp_path, tamper, expected_seq):
    path = copy_of(mixed, tmp_path)
    original = lines_of(path)
    rewrite(path, tamper(original))
    report = verify(path)
    assert not report.ok and report.exit_code == 1
    assert report.problem.seq == (expected_seq or len(original))


def test_a_dropped_last_event_is_caught_by_the_expected_head(mixed, tmp_path):
    path = copy_of(mixed, tmp_path)
    head = verify(path).head
    rewrite(path, lines_of(path)[:-1])
    assert verify(path).ok  # on its own a truncated chain is still a chain
    report = verify(path, expect_head=head)
    assert not report.ok and report.problem.kind == "head"


def test_an_earlier_expected_head_is_accepted_with_a_note(mixed):
    lines = lines_of(mixed)
    earlier = lines[3].split(b',"hash":"')[1][:64].decode()
    report = verify(mixed, expect_head=earlier)
    assert report.ok and any("seq 4" in w for w in report.warnings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(json_args, min_size=1, max_size=4), where=st.floats(0, 1, exclude_max=True), byte=st.integers(0, 255))
def test_any_single_byte_change_is_detected_and_named(calls, where, byte):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l"
        g = gate(path)
        for i, args in enumerate(calls):
            tool = ("read_thing", "small_change")[i % 2]
            p = g.propose(tool, args, proposer="agent")
            if p.effect == "ask":
                g.approve(p.request, approver="bob", digest=p.args_digest)
            g.execute(p.request, lambda a: a)
        g.close()
        report = verify(path)
        assert report.ok, report.problem
        segment = next(path.glob("events-*.jsonl"))
        data = bytearray(segment.read_bytes())
        position = int(where * len(data))
        if data[position] == byte:
            byte = (byte + 1) % 256
        data[position] = byte
        segment.write_bytes(bytes(data))
        tampered_line = data[:position].count(b"\n") + 1
        after = verify(path, expect_head=report.head)
        assert not after.ok
        if after.problem is not None and after.problem.seq is not None:
            assert after.problem.seq == tampered_line
        else:  # only the final newline: the last line became a torn tail, so the head is gone
            assert after.problem.kind == "head" and position == len(data) - 1


def forged(path: Path, steps) -> None:
    """Write events straight to the log (no workflow checks), the way an attacker or a bug would."""
    from ledger.digest import value_digest

    empty = value_digest({})
    with Ledger(path) as led:
        for step in steps:
            if step[0] == "propose":
                _, effect, proposer = step
                led.append(
                    ev.Proposed(
                        run=None, proposer=proposer, call_id=None, tool="t", args_digest=empty, context_digest=empty,
                        policy="p", policy_digest="0" * 64, effect=effect, rules=(), reasons=(),
                    ),
                    {"args": {}, "context": {}},
                )
            elif step[0] == "interrupt":
                from dsl.requirements import Requirements

                led.append(ev.Interrupted(request=step[1], requirements=Requirements.single(step[2]), deadline="2099-01-01T00:00:00.000000Z"))
            elif step[0] == "approve":
                led.append(ev.Approved(request=step[1], approver=step[2], args_digest=empty, comment=None))
            elif step[0] == "start":
                led.append(ev.ExecutionStarted(request=step[1], args_digest=empty, executor=None))
            elif step[0] == "done":
                led.append(ev.Executed(request=step[1], args_digest=empty, outcome="ok", result_digest=None, error=None))


@pytest.mark.parametrize(
    "steps, seq, code",
    [
        ([("propose", "ask", "agent"), ("interrupt", 2, 1), ("start", 2)], 4, "not-approved"),
        ([("propose", "ask", "agent"), ("interrupt", 2, 1), ("approve", 2, "agent")], 4, "self-approval"),
        ([("propose", "ask", "agent"), ("interrupt", 2, 2), ("approve", 2, "a"), ("approve", 2, "a")], 5, "duplicate-approval"),
        ([("propose", "ask", "agent"), ("interrupt", 2, 2), ("approve", 2, "a"), ("start", 2)], 5, "not-approved"),
        ([("propose", "allow", "agent"), ("start", 2), ("done", 2), ("start", 2)], 5, "request-final"),
        ([("propose", "allow", "agent"), ("start", 2), ("start", 2)], 4, "already-executed"),
        ([("propose", "deny", "agent"), ("start", 2)], 3, "request-final"),
        ([("propose", "allow", "agent"), ("done", 2)], 3, "not-started"),
        ([("approve", 7, "a")], 2, "unknown-request"),
    ],
)
def test_an_unlawful_history_with_valid_hashes_is_named_by_seq_and_rule(tmp_path, steps, seq, code):
    forged(tmp_path / "l", steps)
    report = verify(tmp_path / "l")
    assert report.exit_code == 1
    assert (report.problem.kind, report.problem.seq, report.problem.code) == ("workflow", seq, code)


def test_data_nested_too_deeply_to_read_is_a_data_problem_at_its_seq_not_a_crash(tmp_path):
    """Data beside a body nested far deeper than a writer allows (an edit of the file; msgspec
    and the digest run out of stack) is reported at its seq by verify and refused by a Gate."""
    from ledger.store.log import LedgerCorrupt

    path = tmp_path / "ledger"
    g = gate(path)
    p = g.propose("read_thing", {"id": 1}, proposer="agent")
    g.close()
    (segment,) = sorted(path.glob("events-*.jsonl"))
    lines = segment.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(lines) if b'"seq":%d,' % (p.request) in line)
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    lines[index] = lines[index].rsplit(b',"data":', 1)[0] + b',"data":{"args":{"id":' + deep + b'},"context":{}}}'
    segment.write_bytes(b"\n".join(lines))
    report = verify(path)
    assert (report.problem.seq, report.problem.kind) == (p.request, "data")
    assert "nests too deeply" in report.problem.message
    with gate(path) as opened:  # from the snapshot, which covers that event: its data is read when needed
        with pytest.raises(LedgerCorrupt):
            opened.execute(p.request, lambda args: pytest.fail("ran data no one proposed"))
    with pytest.raises(LedgerCorrupt, match="nests too deeply"):
        Gate(policy(), path, full_verify=True)
    with pytest.raises(LedgerCorrupt, match="nests too deeply"):  # the snapshot went with the failed full verify
        gate(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(20, 300))
def test_the_workflow_that_drops_closed_requests_judges_every_event_as_the_full_one(seed, steps):
    """verify replays with Workflow(keep_final=False), which keeps one byte per closed request;
    on random histories (lawful and unlawful candidate events, redactions of proposals and edits)
    it must raise the same Violation, with the same message, for every event, and count the same
    statuses, as the Workflow the Gate uses."""
    import random

    from ledger.clock import add_seconds
    from ledger.workflow.machine import MisplacedGenesis, Violation, Workflow
    from tests.ledger_factory import _random_event

    rng = random.Random(seed)
    full = Workflow()
    history, stored, now = [], {}, "2026-03-01T12:00:00.000000Z"
    for seq in range(2, steps + 2):
        now = add_seconds(now, rng.choice([0, 1, 61, 4000]))
        event, data = _random_event(rng, full, now, seq, stored)
        try:
            full.check(event)
        except Violation:
            history.append((seq, event, False))
            continue
        full.apply(seq, event)
        history.append((seq, event, True))
        if data is not None:
            stored[seq] = data
    targets = {e.target for _, e, _ in history if isinstance(e, ev.Redacted)}
    compact = Workflow(keep_final=False, edit_targets=targets)
    judged = Workflow()
    for seq, event, lawful in history:
        outcomes = []
        for workflow in (judged, compact):
            try:
                workflow.check(event)
                outcomes.append(None)
            except Violation as exc:
                outcomes.append((exc.code, exc.message))
        assert outcomes[0] == outcomes[1], (seq, event)
        assert (outcomes[0] is None) == lawful
        if lawful:
            judged.apply(seq, event)
            compact.apply(seq, event)
    assert compact.status_counts() == judged.status_counts() == full.status_counts()
    assert set(compact.requests) == {r for r, s in judged.requests.items() if not s.final}
    genesis = ev.Genesis(ts=now, format="countersign-ledger/1", ledger_id="x")
    for workflow in (judged, compact):
        if judged.requests:
            with pytest.raises(MisplacedGenesis):
                workflow.check(genesis)


@pytest.mark.parametrize("spelled", [b" null", b"null ", b"\tnull"])
def test_whitespace_around_the_null_data_of_an_event_is_a_data_problem(mixed, tmp_path, spelled):
    """Section 2 allows no whitespace outside strings; the reference read the JSON value and let
    ` null` pass beside an event that carries no data (found by the differential tests)."""
    copy = copy_of(mixed, tmp_path)
    segment = sorted(copy.glob("events-*.jsonl"))[0]
    lines = segment.read_bytes().splitlines(keepends=True)
    assert lines[0].endswith(b',"data":null}\n')  # the genesis
    lines[0] = lines[0].replace(b',"data":null}', b',"data":' + spelled + b"}")
    segment.write_bytes(b"".join(lines))
    for engine in ("auto", "python"):
        report = verify(copy, engine=engine)
        assert report.problem is not None and (report.problem.seq, report.problem.kind) == (1, "data"), engine


def test_requirements_without_a_quorum_are_a_format_problem(mixed, tmp_path):
    """Section 3: `quorums` holds at least one. Both verifiers let an empty list pass (found by
    a new user's trial): a request that no approval could ever satisfy."""
    from ledger_factory import all_lines, rebody, rechain, rewrite

    copy = copy_of(mixed, tmp_path)
    lines = all_lines(copy)
    index = next(i for i, line in enumerate(lines) if line.startswith(b'{"body":{"kind":"interrupted"'))
    body = lines[index][len(b'{"body":') : lines[index].index(b',"hash":"')]
    start = body.index(b'"quorums":[') + len(b'"quorums":[')
    emptied = body[:start] + body[body.index(b'],"decisions"') :]
    lines[index] = rebody(lines[index], emptied)
    rewrite(copy, rechain(lines, index + 1))
    for engine in ("auto", "python"):
        report = verify(copy, engine=engine)
        assert report.problem is not None and (report.problem.seq, report.problem.kind) == (index + 1, "format"), engine
        assert "quorums" in report.problem.message
