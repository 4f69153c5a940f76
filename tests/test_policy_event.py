"""The `policy` event (ledger.events.PolicyLoaded, docs/ledger-format.md section 11.5): which policy
a Gate decides with, recorded by `Gate.record_policy` once per distinct digest; known again after a
reopen (from the snapshot and by a full replay); accepted by `ledger verify`, the independent
verifier and the DuckDB views; refused in a version 1 ledger; malformed or tampered, caught."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from independent_verifier import verify_dir
from ledger import events as ev
from ledger.analytics.views import connect
from ledger.clock import ManualClock
from ledger.proof.checkpoint import generate_key, make_checkpoint, verify_against_checkpoint
from ledger.proof.fast import verify_fast
from ledger.proof.verify import verify
from ledger.store import native
from ledger.store.lines import compose, split
from ledger.workflow import snapshot as snap
from ledger.workflow.gate import Gate, InvalidCall
from ledger.workflow.machine import FormatVersion, Workflow
from ledger.store.log import LedgerCorrupt, LedgerReader
from support import START, POLICY_TEXT, policy
from test_tamper_matrix import edited_value, members
from test_snapshot import _counting  # the seqs a Gate checks as it folds

OTHER_TEXT = POLICY_TEXT + "\n# reloaded: the same rules, another file\n"


def other_policy() -> Policy:
    return Policy.from_text(OTHER_TEXT, "/etc/countersign/test-v2.policy")


def policy_events(path: Path) -> list[ev.PolicyLoaded]:
    return [r.event for r in LedgerReader(path).records() if isinstance(r.event, ev.PolicyLoaded)]




def _ledger_with_policies(path: Path) -> tuple[ManualClock, list[int]]:
    """A Gate opened without a policy loads one, decides calls with it, reloads another, decides
    again. Returns the clock and the requests."""
    clock = ManualClock(START)
    requests = []
    with Gate(None, path, clock=clock) as g:
        g.record_policy(policy(), "ops")
        requests.append(g.propose("read_thing", {"i": 1}, proposer="agent").request)
        p = g.propose("small_change", {"i": 2}, proposer="agent")
        requests.append(p.request)
        clock.advance(60)
        g.approve(p.request, approver="sup-1", digest=p.args_digest)
        g.record_policy(other_policy(), "svc-gate")
        requests.append(g.propose("drop_thing", {"i": 3}, proposer="agent").request)
    return clock, requests


# --- recording -------------------------------------------------------------------------------------


def test_one_event_per_distinct_digest_and_the_gate_decides_with_the_policy_recorded(tmp_path):
    clock = ManualClock(START)
    first, second = policy(), other_policy()
    with Gate(None, tmp_path / "l", clock=clock) as g:
        g.record_policy(first, "ops")
        g.record_policy(first, "ops")  # the same digest: nothing
        g.record_policy(Policy.from_text(POLICY_TEXT, "elsewhere.policy"), "someone-else")  # same bytes, same digest
        assert g.policy.digest == g.workflow.policy_digest == first.digest
        p = g.propose("read_thing", {}, proposer="agent")
        g.record_policy(second, "svc-gate")
        q = g.propose("read_thing", {}, proposer="agent")
        g.record_policy(second, "svc-gate")
        g.record_policy(first, "ops")  # back to the first: another change, recorded
    recorded = policy_events(tmp_path / "l")
    assert [(e.name, e.digest, e.by, e.source) for e in recorded] == [
        ("test", first.digest, "ops", "test.policy"),
        ("test", second.digest, "svc-gate", "/etc/countersign/test-v2.policy"),
        ("test", first.digest, "ops", "test.policy"),
    ]
    decided = {r.seq: r.event for r in LedgerReader(tmp_path / "l").records() if isinstance(r.event, ev.Proposed)}
    assert decided[p.request].policy_digest == first.digest and decided[q.request].policy_digest == second.digest


def test_the_event_is_written_in_its_documented_member_order(tmp_path):
    with Gate(None, tmp_path / "l", clock=ManualClock(START)) as g:
        g.record_policy(policy(), "ops")
    line = (tmp_path / "l" / "events-00000001.jsonl").read_bytes().splitlines()[-1]
    body = split(line)[0]
    assert list(msgspec.json.decode(body)) == ["kind", "seq", "ts", "prev", "name", "digest", "by", "source", "files"]
    # the policy's text beside it (docs/ledger-format.md section 11.5)
    assert list(msgspec.json.decode(split(line)[2])) == ["files", "groups"]


@pytest.mark.parametrize("operator", ["", "   ", None, 7, "\ud800"])
def test_an_operator_that_is_no_name_is_refused_and_nothing_is_written(tmp_path, operator):
    with Gate(None, tmp_path / "l", clock=ManualClock(START)) as g:
        with pytest.raises(InvalidCall):
            g.record_policy(policy(), operator)
        with pytest.raises(InvalidCall):
            g.record_policy("test.policy", "ops")  # a path, not a loaded policy
        assert g.policy is None and g.ledger.head[0] == 1


def test_a_source_path_that_is_not_unicode_is_stored_escaped(tmp_path):
    loaded = Policy.from_text(POLICY_TEXT, "/srv/p\udcff.policy")  # a file name of undecodable bytes
    with Gate(None, tmp_path / "l", clock=ManualClock(START)) as g:
        g.record_policy(loaded, "ops")
    assert policy_events(tmp_path / "l")[0].source == "/srv/p\\udcff.policy"
    assert verify(tmp_path / "l").ok


# --- reopening ---------------------------------------------------------------------------------------


def test_the_policy_in_force_survives_a_reopen_from_the_snapshot_and_a_full_replay(tmp_path, monkeypatch):
    path = tmp_path / "l"
    clock, _ = _ledger_with_policies(path)
    ledger_id = next(iter(LedgerReader(path).records())).event.ledger_id
    loaded = snap.Snapshot(path / "cache").load(ledger_id)
    assert loaded is not None and loaded.policy_digest == other_policy().digest  # the snapshot keeps it
    folded = _counting(monkeypatch)
    with Gate(None, path, clock=clock) as g:
        assert folded == []  # nothing read again: the snapshot said which policy is in force
        assert g.workflow.policy_digest == other_policy().digest
        g.record_policy(other_policy(), "svc-gate")
        assert g.ledger.head[0] == len(list(LedgerReader(path).records()))
    count = len(list(LedgerReader(path).records()))
    for kwargs in ({"full_verify": True}, {"snapshot": False}):
        folded.clear()
        with Gate(None, path, clock=clock, **kwargs) as g:
            assert len(folded) == count  # a full replay folds the policy events again
            assert g.workflow.policy_digest == other_policy().digest
            g.record_policy(other_policy(), "svc-gate")
    assert len(policy_events(path)) == 2


def test_a_snapshot_of_the_previous_format_is_rebuilt_and_then_knows_the_policy(tmp_path, monkeypatch):
    path = tmp_path / "l"
    clock, _ = _ledger_with_policies(path)
    db = path / "cache" / snap.FILE_NAME
    with sqlite3.connect(db) as conn:  # as version 4 left it: meta without the policy digest
        conn.execute("ALTER TABLE meta DROP COLUMN policy_digest")
        conn.execute("PRAGMA user_version = 4")
    folded = _counting(monkeypatch)
    with Gate(None, path, clock=clock) as g:
        assert len(folded) == g.ledger.head[0]  # rebuilt by a full replay
        assert g.workflow.policy_digest == other_policy().digest
    folded.clear()
    with Gate(None, path, clock=clock) as g:
        assert folded == [] and g.workflow.policy_digest == other_policy().digest


def test_a_gate_folds_the_policy_another_gate_recorded_before_deciding_whether_to_record(tmp_path):
    clock = ManualClock(START)
    with Gate(policy(), tmp_path / "l", clock=clock) as a, Gate(policy(), tmp_path / "l", clock=clock) as b:
        a.record_policy(policy(), "ops")
        b.record_policy(policy(), "ops")  # a's event is folded under the commit lock first
        b.record_policy(other_policy(), "ops")
        a.record_policy(other_policy(), "ops")
        assert a.workflow.policy_digest == b.workflow.policy_digest == other_policy().digest
    assert [e.digest for e in policy_events(tmp_path / "l")] == [policy().digest, other_policy().digest]


# --- verifying --------------------------------------------------------------------------------------


def test_ledger_verify_and_the_independent_verifier_accept_it(tmp_path):
    path = tmp_path / "l"
    _ledger_with_policies(path)
    report = verify(path)
    assert report.ok, report.problem
    assert verify(path, engine="python") == report
    ok, count, head, bad, message = verify_dir(path)
    assert (ok, count, head, bad) == (True, report.count, report.head, None), message
    result = CliRunner().invoke(app, ["ledger", "verify", str(path)])
    assert result.exit_code == 0 and "intact" in result.output, result.output


def test_the_compiled_verifier_accepts_it_with_the_reference_report(tmp_path):
    """ledger/_native.c reads the `policy` event (a ledger the service writes holds one from its
    start: left to the reference, its verify would run some 20 times slower)."""
    if not native.available():
        pytest.skip("the compiled verifier is not built")
    path = tmp_path / "l"
    _ledger_with_policies(path)
    fast = verify_fast(path)
    assert fast is not None and fast == verify(path, engine="python")
    assert msgspec.json.encode(fast) == msgspec.json.encode(verify(path, engine="python"))


def _append_raw(path: Path, members_json: str) -> int:
    """Append, by hand, a `policy` line whose members after `prev` are `members_json` (raw JSON
    text, `,"name":...`), chained correctly (seq, prev, hash): only its members can be wrong.
    Returns its seq."""
    records = list(LedgerReader(path).records())
    last = records[-1]
    seq = last.seq + 1
    body = (f'{{"kind":"policy","seq":{seq},"ts":"{last.event.ts}","prev":"{last.hash}"' + members_json + "}").encode()
    segment = sorted(path.glob("events-*.jsonl"))[-1]
    segment.write_bytes(segment.read_bytes() + compose(body, None)[1])
    return seq


GOOD = {"name": '"p"', "digest": '"' + "a" * 64 + '"', "by": '"ops"', "source": "null"}


def _members_json(**changed: str | None) -> str:
    fields = {**GOOD, **changed}
    return "".join(f',"{k}":{v}' for k, v in fields.items() if v is not None)


MALFORMED = {
    "empty by": _members_json(by='""'),
    "by null": _members_json(by="null"),
    "digest in capitals": _members_json(digest='"' + "A" * 64 + '"'),
    "digest too short": _members_json(digest='"' + "a" * 63 + '"'),
    "digest null": _members_json(digest="null"),
    "name null": _members_json(name="null"),
    "source a number": _members_json(source="5"),
    "source missing": _members_json(source=None),
    "name missing": _members_json(name=None),
    "an extra member": _members_json() + ',"reason":"x"',
    "members out of order": ',"digest":"' + "a" * 64 + '","name":"p","by":"ops","source":null',
    "name twice": _members_json().replace(',"digest"', ',"name":"q","digest"'),
}


def test_a_well_formed_hand_appended_policy_line_passes(tmp_path):
    path = tmp_path / "l"
    _ledger_with_policies(path)
    for source in ("null", '"/srv/p.policy"'):
        _append_raw(path, _members_json(source=source, by='"é"'))
        assert verify(path).ok and verify_dir(path)[0]


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_policy_event_is_a_format_problem_at_its_seq_for_both_verifiers(tmp_path, name):
    path = tmp_path / "l"
    _ledger_with_policies(path)
    seq = _append_raw(path, MALFORMED[name])
    report = verify(path)
    assert report.problem is not None and report.problem.seq == seq and report.problem.kind == "format", report.problem
    ok, _count, _head, bad, message = verify_dir(path)
    assert not ok and bad == seq, message
    assert verify_fast(path) is None  # the compiled verifier leaves it to the reference
    con = connect(path)  # the views see the same line as not valid, where verify stops
    first = con.execute("SELECT seq, kind FROM chain_breaks ORDER BY seq, check_order LIMIT 1").fetchone()
    assert first == (seq, "format")
    con.close()


def test_a_version_1_ledger_refuses_a_policy_event(tmp_path, monkeypatch):
    import ledger.store.log as log

    path = tmp_path / "l"
    monkeypatch.setattr(log, "FORMAT", ev.FORMAT_V1)
    with Gate(policy(), path, clock=ManualClock(START)) as g:
        g.propose("read_thing", {}, proposer="agent")
    monkeypatch.undo()
    with Gate(policy(), path, clock=ManualClock(START)) as g:
        head = g.ledger.head[0]
        with pytest.raises(FormatVersion, match="a policy event needs a countersign-ledger/2 ledger"):
            g.record_policy(other_policy(), "ops")
        assert g.ledger.head[0] == head and g.workflow.policy_digest is None
    assert verify(path).ok and verify_dir(path)[0]
    seq = _append_raw(path, _members_json())  # written by hand: refused by every reader
    report = verify(path)
    assert report.problem.seq == seq and report.problem.code == "format-version", report.problem
    assert verify_fast(path) is None
    ok, _count, _head, bad, message = verify_dir(path)
    assert not ok and bad == seq and "countersign-ledger/2" in message
    with pytest.raises(LedgerCorrupt, match="unlawful history: a policy event needs a countersign-ledger/2 ledger"):
        Gate(None, path, snapshot=False)


# --- the DuckDB views ---------------------------------------------------------------------------------


def test_the_views_read_policy_events_as_events_of_no_request(tmp_path):
    path = tmp_path / "l"
    _ledger_with_policies(path)
    records = list(LedgerReader(path).records())
    con = connect(path)
    try:
        got = con.execute('SELECT seq, name, digest, "by", source, request, valid, canonical, invalid_reason '
                          "FROM events WHERE kind = 'policy' ORDER BY seq").fetchall()
        expected = [(r.seq, r.event.name, r.event.digest, r.event.by, r.event.source, None, True, True, None)
                    for r in records if isinstance(r.event, ev.PolicyLoaded)]
        assert got == expected and len(got) == 2
        assert con.execute("SELECT count(*) FROM chain_breaks").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM violations").fetchone() == (0,)
        workflow = Workflow()
        for r in records:
            workflow.step(r.seq, r.event)
        statuses = dict(con.execute("SELECT request, status FROM requests").fetchall())
        assert statuses == {request: state.status for request, state in workflow.requests.items()}
        assert con.execute("SELECT count(*) FROM events").fetchone() == (len(records),)
    finally:
        con.close()
    result = CliRunner().invoke(app, ["ledger", "stats", str(path)])
    assert result.exit_code == 0, result.output


# --- tampering ----------------------------------------------------------------------------------------


def _policy_line(path: Path) -> tuple[Path, int, bytes, int]:
    """(segment, index in it, line, seq) of the first policy event."""
    for segment in sorted(path.glob("events-*.jsonl")):
        for index, line in enumerate(segment.read_bytes().split(b"\n")[:-1]):
            body = msgspec.json.decode(split(line)[0])
            if body["kind"] == "policy":
                return segment, index, line, body["seq"]
    raise AssertionError("no policy event")


@pytest.mark.parametrize("op", ["flip", "edit"])
def test_every_field_of_a_policy_event_tampered_with_is_caught_at_its_seq(tmp_path, op):
    path = tmp_path / "l"
    _ledger_with_policies(path)
    segment, index, line, seq = _policy_line(path)
    assert seq < verify(path).count  # events follow it: the chain runs through it
    original = segment.read_bytes()
    body = split(line)[0]
    start = len(b'{"body":')
    spans = {f"body.{k}": (start + a, start + b) for k, (a, b) in members(body).items()}
    hash_start = start + len(body) + len(b',"hash":"')
    spans["hash"] = (hash_start, hash_start + 64)
    assert set(spans) == {"body." + m for m in ("kind", "seq", "ts", "prev", "name", "digest", "by", "source", "files")} | {"hash"}
    for field, (a, b) in spans.items():
        if op == "flip":
            middle = (a + b) // 2
            changed = line[:middle] + bytes([line[middle] ^ 0x01]) + line[middle + 1:]
        elif field == "hash":
            changed = line[:a] + hashlib.sha256(line[a:b]).hexdigest().encode() + line[b:]
        else:
            changed = line[:a] + edited_value(line[a:b]) + line[b:]
        assert changed != line
        lines = original.split(b"\n")
        lines[index] = changed
        segment.write_bytes(b"\n".join(lines))
        report = verify(path)
        assert not report.ok and report.problem.seq == seq, (field, report.problem)
        assert verify_dir(path)[3] == seq, field
    segment.write_bytes(original)
    assert verify(path).ok


def test_a_policy_event_rewritten_with_every_hash_recomputed_fails_the_checkpoint(tmp_path):
    """Who can rewrite the files can name another policy and chain every hash again: a plain
    verify cannot tell, a checkpoint taken before does."""
    path = tmp_path / "l"
    _ledger_with_policies(path)
    checkpoint, _ = make_checkpoint(path, generate_key("audit"))
    lines = [line for seg in sorted(path.glob("events-*.jsonl")) for line in seg.read_bytes().splitlines(keepends=True)]
    prev, out = ev.GENESIS_PREV, []
    for line in lines:
        body, _, data = split(line)
        event = ev.decode_event(body)
        if isinstance(event, ev.PolicyLoaded):  # the pinned text goes too: it would not match the digest
            event = msgspec.structs.replace(event, digest="f" * 64, name="forged", files=msgspec.UNSET)
            data = b"null"
        prev, new = compose(ev.encode_event(msgspec.structs.replace(event, prev=prev)), data)
        out.append(new)
    for seg in sorted(path.glob("events-*.jsonl"))[1:]:
        seg.unlink()
    (path / "events-00000001.jsonl").write_bytes(b"".join(out))
    shutil.rmtree(path / "cache", ignore_errors=True)
    assert verify(path).ok
    report, _ = verify_against_checkpoint(path, checkpoint)
    assert not report.ok and report.problem.kind == "checkpoint"


# --- the documented example ----------------------------------------------------------------------------


def test_the_documented_example_line(tmp_path):
    """docs/ledger-format.md 11.5: the policy file's bytes, its digest, and the line, byte for byte."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "ledger-format.md").read_text(encoding="utf-8")
    source = b'policy "refunds"\ndefault deny "Ask a person."\n'
    assert f"whose {len(source)} bytes are" in doc
    assert "".join("    " + line + "\n" for line in source.decode().splitlines()) in doc
    loaded = Policy.from_text(source.decode(), "/etc/countersign/refunds.policy", source_bytes=source)
    assert loaded.digest == hashlib.sha256(source).hexdigest() and loaded.digest in doc
    ts = "2026-01-01T00:00:00.000000Z"
    genesis = ev.Genesis(seq=1, ts=ts, prev=ev.GENESIS_PREV, format=ev.FORMAT, ledger_id="0123456789abcdef0123456789abcdef")
    first_hash, first = compose(ev.encode_event(genesis), None)
    assert first_hash in doc
    event = ev.PolicyLoaded(seq=2, ts=ts, prev=first_hash, name=loaded.name, digest=loaded.digest, by="ops",
                            source=loaded.source_name)
    _, second = compose(ev.encode_event(event), None)
    assert "    " + second.decode() in doc
    path = tmp_path / "l"
    path.mkdir()
    (path / "events-00000001.jsonl").write_bytes(first + second)
    assert verify(path).ok and verify_dir(path)[0]
    assert json.loads(second)["body"]["kind"] == "policy"
