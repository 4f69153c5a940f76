"""A tool's result kept in the ledger (issue 12 section 2): `keep_result=True` records it beside
its digest, so that a step re-run after a restart (LangGraph re-runs a node on resume) gets the
first run's result back; verify (Python and compiled) checks it against the digest."""

from __future__ import annotations

import json

import pytest

from dsl import Policy
from ledger import Gate, verify
from ledger.proof import fast
from ledger.store import native

POLICY = 'policy "p"\ndefault ask "a person decides"\nallow lookup\n'


@pytest.fixture()
def policy():
    return Policy.from_text(POLICY, "p.policy")


def _segment_lines(path):
    files = sorted(p for p in path.iterdir() if p.name.endswith(".jsonl"))
    return files[-1], files[-1].read_bytes().splitlines(keepends=True)


def test_a_kept_result_comes_back_on_replay_in_a_new_gate(tmp_path, policy):
    with Gate(policy, tmp_path / "l") as gate:
        first = gate.run("lookup", {"id": 7}, lambda a: {"id": a["id"], "name": "Ada"}, proposer="agent",
                         call_id="c1", keep_result=True)
    assert first.execution.result_kept and first.execution.result == {"id": 7, "name": "Ada"}
    calls = []
    with Gate(policy, tmp_path / "l") as gate:  # a restart: the step runs again with the same call id
        again = gate.run("lookup", {"id": 7}, lambda a: calls.append(a), proposer="agent", call_id="c1",
                         keep_result=True)
        assert gate.result(again.proposal.request).result == {"id": 7, "name": "Ada"}
    assert calls == []  # never run twice
    assert again.execution.replayed and again.execution.result_kept
    assert again.execution.result == {"id": 7, "name": "Ada"}
    assert again.execution.result_digest == first.execution.result_digest
    assert verify(tmp_path / "l").ok


def test_without_keep_result_only_the_digest_is_recorded(tmp_path, policy):
    with Gate(policy, tmp_path / "l") as gate:
        gate.run("lookup", {"id": 1}, lambda a: "secret", proposer="agent", call_id="c")
        again = gate.run("lookup", {"id": 1}, lambda a: "x", proposer="agent", call_id="c")
    assert again.execution.replayed and not again.execution.result_kept and again.execution.result is None
    assert again.execution.result_digest is not None
    _, lines = _segment_lines(tmp_path / "l")
    assert all(b'"secret"' not in line for line in lines)


def test_finish_keeps_a_result_reported_from_elsewhere(tmp_path, policy):
    with Gate(policy, tmp_path / "l") as gate:
        p = gate.propose("lookup", {"id": 2}, proposer="agent")
        gate.start(p.request)
        done = gate.finish(p.request, outcome="ok", result=[1, 2.5, "three"], keep_result=True)
        assert done.result_kept
        replay = gate.start(p.request)
    assert replay.replayed and replay.result == [1, 2.5, "three"]


def test_none_an_error_and_a_non_json_result_keep_nothing(tmp_path, policy):
    with Gate(policy, tmp_path / "l") as gate:
        a = gate.run("lookup", {"id": 1}, lambda a: None, proposer="agent", keep_result=True).execution
        b = gate.run("lookup", {"id": 2}, lambda a: 1 / 0, proposer="agent", keep_result=True).execution
        c = gate.run("lookup", {"id": 3}, lambda a: object(), proposer="agent", keep_result=True).execution
    assert not (a.result_kept or b.result_kept or c.result_kept)
    assert c.outcome == "ok" and c.result_digest is None
    assert verify(tmp_path / "l").ok


@pytest.mark.parametrize("change", [(b'{"refund":10}', b'{"refund":99}'), (b'{"refund":10}', b'{"refund":1e1}'),
                                    (b'{"result":{"refund":10}}', b'{"result":{"refund":10},"x":1}')])
def test_a_changed_kept_result_fails_verify_at_its_seq(tmp_path, policy, change):
    with Gate(policy, tmp_path / "l") as gate:
        gate.run("lookup", {"id": 1}, lambda a: {"refund": 10}, proposer="agent", keep_result=True)
    if native.available():
        assert fast.verify_fast(tmp_path / "l", None).ok  # the compiled verifier reads kept results
    path, lines = _segment_lines(tmp_path / "l")
    (index,) = [i for i, line in enumerate(lines) if b'"result":{' in line]
    lines[index] = lines[index].replace(*change)
    path.write_bytes(b"".join(lines))
    if native.available():
        assert fast.verify_fast(tmp_path / "l", None) is None  # declined: the reference verifier decides
    report = verify(tmp_path / "l", engine="python")
    assert report.problem is not None and report.problem.kind == "data"
    assert report.problem.seq == json.loads(lines[index])["body"]["seq"]


def test_data_beside_an_executed_event_without_a_digest_fails_verify(tmp_path, policy):
    with Gate(policy, tmp_path / "l") as gate:
        gate.run("lookup", {"id": 1}, lambda a: None, proposer="agent")
    path, lines = _segment_lines(tmp_path / "l")
    index = len(lines) - 1
    assert b'"executed"' in lines[index] and lines[index].endswith(b'"data":null}\n')
    lines[index] = lines[index].replace(b'"data":null}', b'"data":{"result":1}}')
    path.write_bytes(b"".join(lines))
    report = verify(tmp_path / "l")
    assert report.problem is not None and report.problem.kind == "data"


def test_the_independent_verifier_reads_a_kept_result_by_the_format_document(tmp_path, policy):
    from tests.independent_verifier import verify_dir

    with Gate(policy, tmp_path / "l") as gate:
        gate.run("lookup", {"id": 1}, lambda a: {"refund": 10, "to": ["a", "b"]}, proposer="agent", keep_result=True)
    assert verify_dir(tmp_path / "l")[0]
    path, lines = _segment_lines(tmp_path / "l")
    path.write_bytes(b"".join(lines).replace(b'"to":["a","b"]', b'"to":["a","c"]'))
    ok, *rest = verify_dir(tmp_path / "l")
    assert not ok and "result" in str(rest)
