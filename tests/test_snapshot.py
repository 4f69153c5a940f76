"""A Gate's snapshot (ledger/workflow/snapshot.py): opening costs the events after it; a missing,
corrupt, foreign or stale one is rebuilt, never trusted over the ledger; pending requests keep
their arguments from the ledger; and any interleaving of Gates, saves, reopenings and lost
snapshots gives every Gate the view a full replay gives (a hypothesis state machine)."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ledger import verify
from ledger.clock import ManualClock
from ledger.store.log import Ledger, LedgerCorrupt
from ledger.workflow import catchup
from ledger.workflow import gate as gate_module
from ledger.workflow import snapshot as snap
from ledger.workflow.gate import Gate, GateError
from ledger.workflow.machine import Violation
from dsl import Policy
from support import POLICY_TEXT, START, policy


def _counting(monkeypatch) -> list[int]:
    """The seqs a Gate checks as it folds (ledger.proof.verify.check_record, as ledger.workflow.catchup calls it)."""
    seen: list[int] = []
    original = catchup.check_record

    def check(record, *args, **kwargs):
        seen.append(record.seq)
        return original(record, *args, **kwargs)

    monkeypatch.setattr(catchup, "check_record", check)
    return seen


def _build(path, n: int, clock: ManualClock) -> list[int]:
    asks = []
    with Gate(policy(), path, clock=clock) as g:
        for i in range(n):
            g.propose("read_thing", {"i": i}, proposer="agent", call_id=f"c{i}")
            if i % 10 == 0:
                asks.append(g.propose("small_change", {"i": i}, proposer="agent").request)
    return asks


def test_opening_from_the_snapshot_folds_only_the_events_after_it(tmp_path, monkeypatch):
    clock = ManualClock(START)
    _build(tmp_path / "l", 200, clock)
    head = Ledger(tmp_path / "l").head[0]
    with Ledger(tmp_path / "l") as plain:  # another writer appends after the snapshot
        plain.append_batch([])
    with Gate(policy(), tmp_path / "l", clock=clock) as other:
        other.propose("read_thing", {"late": 1}, proposer="agent")
        # closed: its snapshot covers everything
    folded = _counting(monkeypatch)
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        assert folded == []  # nothing after the snapshot
        g.propose("read_thing", {"more": 1}, proposer="agent")
    folded.clear()
    with Gate(None, tmp_path / "l", clock=clock, snapshot=False) as full:
        assert len(folded) == head + 2
        assert full.get(head + 2).status == "allowed"


def test_pending_requests_survive_a_restart_with_their_arguments_read_from_the_ledger(tmp_path):
    clock = ManualClock(START)
    asks = _build(tmp_path / "l", 30, clock)
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        assert [s.request for s in g.pending()] == asks
        big = g.propose("big_change", {"amount": 5, "note": "ü"}, proposer="agent", context={"cwd": "/x"})
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        g.edit(big.request, editor="sup-1", args={"amount": 4, "note": "ü"})
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        state = g.approve(big.request, approver="sup-2", digest=g.get(big.request).digest)
        assert state.status == "approved"
        runs = []
        g.execute(big.request, lambda args: runs.append(args))
        assert runs == [{"amount": 4, "note": "ü"}]
    assert verify(tmp_path / "l").ok


def test_arguments_changed_in_the_files_are_refused_before_they_run(tmp_path):
    clock = ManualClock(START)
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        p = g.propose("small_change", {"to": "alice"}, proposer="agent")
    segment = next((tmp_path / "l").glob("events-*.jsonl"))
    segment.write_bytes(segment.read_bytes().replace(b'"to":"alice"', b'"to":"mallo"'))
    with Gate(policy(), tmp_path / "l", clock=clock) as g:  # opens from the snapshot: the data is not read yet
        g.approve(p.request, approver="bob", digest=p.args_digest)
        with pytest.raises(LedgerCorrupt, match="do not match their digests"):
            g.execute(p.request, lambda args: pytest.fail("ran with arguments no one approved"))


@pytest.mark.parametrize("damage", ["garbage", "foreign", "stale", "schema", "deleted", "empty-file"])
def test_a_snapshot_that_cannot_be_trusted_is_rebuilt(tmp_path, damage, monkeypatch):
    clock = ManualClock(START)
    asks = _build(tmp_path / "l", 40, clock)
    db = tmp_path / "l" / "cache" / snap.FILE_NAME
    if damage == "garbage":
        for suffix in ("-wal", "-shm"):
            (tmp_path / "l" / "cache" / f"{snap.FILE_NAME}{suffix}").unlink(missing_ok=True)
        db.write_bytes(b"not a database at all" * 100)
    elif damage == "foreign":
        _build(tmp_path / "other", 5, clock)
        shutil.rmtree(tmp_path / "l" / "cache")
        shutil.copytree(tmp_path / "other" / "cache", tmp_path / "l" / "cache")
    elif damage == "stale":  # the ledger was rolled back to an older copy: the snapshot is ahead
        shutil.copytree(tmp_path / "l", tmp_path / "old")
        with Gate(policy(), tmp_path / "l", clock=clock) as g:
            g.propose("read_thing", {"newer": 1}, proposer="agent")
        shutil.rmtree(tmp_path / "old" / "cache")
        shutil.copytree(tmp_path / "l" / "cache", tmp_path / "old" / "cache")
        tmp_path.joinpath("l").rename(tmp_path / "gone")
        tmp_path.joinpath("old").rename(tmp_path / "l")
    elif damage == "schema":
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET schema = 'another'")
    elif damage == "deleted":
        shutil.rmtree(tmp_path / "l" / "cache")
    elif damage == "empty-file":
        for suffix in ("-wal", "-shm"):
            (tmp_path / "l" / "cache" / f"{snap.FILE_NAME}{suffix}").unlink(missing_ok=True)
        db.write_bytes(b"")
    folded = _counting(monkeypatch)
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        head = g.ledger.head[0]
        assert len(folded) == head  # a full replay
        assert [s.request for s in g.pending()] == asks
    folded.clear()
    with Gate(policy(), tmp_path / "l", clock=clock):
        assert folded == []  # the rebuilt snapshot is used


def test_a_gate_whose_snapshot_directory_cannot_be_written_works_without_one(tmp_path):
    clock = ManualClock(START)
    _build(tmp_path / "l", 3, clock)
    shutil.rmtree(tmp_path / "l" / "cache")
    (tmp_path / "l" / "cache").write_text("a file where the directory would be")
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        p = g.propose("small_change", {}, proposer="agent")
        assert g.approve(p.request, approver="bob", digest=p.args_digest).status == "approved"


def test_a_call_id_repeat_is_found_once_its_request_lives_only_in_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(gate_module, "SAVE_EVERY", 1)  # every commit saves and forgets
    clock = ManualClock(START)
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        first = g.propose("read_thing", {"a": 1}, proposer="agent", call_id="toolu_1")
        for i in range(5):
            g.propose("read_thing", {"i": i}, proposer="agent")
        assert first.request not in g.workflow.requests  # forgotten: in the snapshot only
        again = g.propose("read_thing", {"a": 1}, proposer="agent", call_id="toolu_1")
        assert again.duplicate and again.request == first.request
        with pytest.raises(gate_module.CallIdConflict):
            g.propose("read_thing", {"a": 2}, proposer="agent", call_id="toolu_1")
        assert g.find(call_id="toolu_1").request == first.request


def test_a_gate_far_behind_the_snapshot_opens_again_and_agrees(tmp_path, monkeypatch):
    monkeypatch.setattr(snap, "HORIZON", 3)
    monkeypatch.setattr(gate_module, "SAVE_EVERY", 1)
    clock = ManualClock(START)
    slow = Gate(policy(), tmp_path / "l", clock=clock)
    p = slow.propose("read_thing", {"x": 1}, proposer="agent")
    slow._save()  # forgotten by the slow Gate: it will need the snapshot to know request p
    with Gate(policy(), tmp_path / "l", clock=clock) as fast:
        fast.execute(p.request, lambda args: "ran")
        for i in range(10):
            fast.propose("read_thing", {"i": i}, proposer="agent")
    # The snapshot now holds p as executed, and its state as of the slow Gate's seq is gone.
    replay = slow.execute(p.request, lambda args: pytest.fail("ran twice"))
    assert replay.replayed and replay.outcome == "ok"
    slow.close()


# --- any interleaving agrees with a full replay -------------------------------------------------------

TOOLS = ["read_thing", "drop_thing", "small_change", "big_change"]
PEOPLE = ["sup-1", "sup-2", "sup-3", "bob", "agent"]
POLICIES = [policy(), Policy.from_text(POLICY_TEXT + "\n# another file\n", "other.policy")]


def _view(g: Gate, requests) -> dict:
    return {r: dataclasses.asdict(g.get(r, refresh=False)) for r in requests}


class Gates(RuleBasedStateMachine):
    """Three Gates on one ledger, each saving its snapshot after every few events, with
    reopenings, lost and damaged snapshot files, expiries; after every step each Gate, caught
    up, holds for every request the state a full replay and verify gives."""

    def __init__(self):
        super().__init__()
        import tempfile
        from pathlib import Path

        self.dir = Path(tempfile.mkdtemp(prefix="snapshot-machine-"))
        self.path = self.dir / "l"
        self.clock = ManualClock(START)
        self.gates = [Gate(policy(), self.path, clock=self.clock) for _ in range(3)]
        self.requests: list[int] = []

    def teardown(self):
        for g in self.gates:
            g.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(g=st.integers(0, 2), tool=st.sampled_from(TOOLS), amount=st.integers(0, 1500), call=st.integers(0, 6))
    def propose(self, g, tool, amount, call):
        try:
            p = self.gates[g].propose(tool, {"amount": amount}, proposer="agent", call_id=f"c{call}" if call else None)
        except (Violation, GateError):
            return
        if p.request not in self.requests:
            self.requests.append(p.request)

    @precondition(lambda self: self.requests)
    @rule(g=st.integers(0, 2), pick=st.integers(0, 1000), who=st.sampled_from(PEOPLE),
          what=st.sampled_from(["approve", "reject", "edit", "respond", "cancel", "execute"]))
    def decide(self, g, pick, who, what):
        gate = self.gates[g]
        request = self.requests[pick % len(self.requests)]
        try:
            state = gate.get(request)
            if what == "approve":
                gate.approve(request, approver=who, digest=state.digest)
            elif what == "reject":
                gate.reject(request, approver=who, reason="no")
            elif what == "edit":
                gate.edit(request, editor=who, args={"amount": 3})
            elif what == "respond":
                gate.respond(request, approver=who, message="done")
            elif what == "cancel":
                gate.cancel(request, by=who)
            else:
                gate.execute(request, lambda args: "ran")
        except (Violation, GateError):
            pass

    @rule(g=st.integers(0, 2), which=st.sampled_from([0, 1]))
    def load_policy(self, g, which):
        """A reload (`policy` event): every Gate must then know it, from its fold or its snapshot."""
        self.gates[g].record_policy(POLICIES[which], "ops")

    @rule(g=st.integers(0, 2))
    def save(self, g):
        self.gates[g]._save()

    @rule(g=st.integers(0, 2), full=st.booleans())
    def reopen(self, g, full):
        self.gates[g].close()
        self.gates[g] = Gate(policy(), self.path, clock=self.clock, full_verify=full)

    @rule(how=st.sampled_from(["delete", "garbage"]))
    def lose_the_snapshot(self, how):
        db = self.path / "cache" / snap.FILE_NAME
        for suffix in ("", "-wal", "-shm"):
            (self.path / "cache" / f"{snap.FILE_NAME}{suffix}").unlink(missing_ok=True)
        if how == "garbage":
            db.write_bytes(b"garbage" * 50)

    @rule(seconds=st.sampled_from([60, 3600, 5 * 3600]))
    def time_passes(self, seconds):
        self.clock.advance(seconds)

    @invariant()
    def every_gate_agrees_with_a_full_replay(self):
        with Gate(None, self.path, clock=self.clock, snapshot=False) as fresh:
            expected = _view(fresh, self.requests)
            for g in self.gates:
                g.refresh()  # may expire what is due: then the fresh Gate is behind
            fresh.refresh()
            expected = _view(fresh, self.requests)
            in_force = fresh.workflow.policy_digest
        for g in self.gates:
            assert _view(g, self.requests) == expected
            assert g.workflow.policy_digest == in_force


@pytest.fixture
def small_saves(monkeypatch):
    monkeypatch.setattr(gate_module, "SAVE_EVERY", 2)
    monkeypatch.setattr(snap, "HORIZON", 5)


def test_any_interleaving_of_gates_and_snapshots_agrees_with_a_full_replay(small_saves):
    machine = Gates.TestCase
    machine.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    machine().runTest()


def test_a_snapshot_advances_only_from_a_gate_that_knows_every_change_since_its_seq(tmp_path):
    from ledger.workflow.machine import RequestState

    def state(request: int, status: str) -> RequestState:
        return RequestState(request=request, tool="t", run=None, proposer="a", call_id=None, effect="allow", rules=(),
                            reasons=(), proposed_at="", digest="d", original_digest="d", status=status)

    s = snap.Snapshot(tmp_path)
    at = {"ledger_id": "L", "hash": "h", "ts": "", "place": None, "call_ids": {}, "edits": {}, "redacted": []}
    assert s.save(base=0, seq=5, states={2: (2, 2, state(2, "allowed"))}, **at) is None  # not this ledger's yet
    s.reset("L")
    assert s.save(base=0, seq=5, states={2: (2, 2, state(2, "allowed"))}, **at) == 5
    assert s.save(base=7, seq=9, states={}, **at) is None  # would leave out the changes in (5, 7]
    assert s.save(base=3, seq=5, states={}, **at) == 5  # nothing new: stays
    # request 2 started at seq 7 and ran at seq 8, both after the last save
    assert s.save(base=5, seq=8, states={2: (7, 8, state(2, "executed"))}, **at) == 8
    look = {"ledger_id": "L", "floor": 8}
    assert s.state(2, seen=8, **look).status == "executed"
    assert s.state(2, seen=6, **look).status == "allowed"  # as of an earlier seq: from the history
    with pytest.raises(snap.Behind):
        s.state(2, seen=7, **look)  # "executing", between two changes no save saw apart: not kept
    assert s.state(9, seen=8, **look) is None  # proposed after the Gate's seq: not yet
    with pytest.raises(snap.Behind):
        s.state(2, seen=8, ledger_id="L", floor=9)  # the snapshot holds less than the Gate left to it
    with pytest.raises(snap.Behind):
        s.state(2, seen=8, ledger_id="M", floor=0)  # another ledger's
    s.reset("L")
    with pytest.raises(snap.Behind):
        s.state(2, seen=8, **look)
    s.close()


from hypothesis import given  # noqa: E402


@given(added=st.lists(st.text(max_size=40), max_size=60), other=st.lists(st.text(max_size=40), max_size=60))
@settings(deadline=None, max_examples=60)
def test_the_call_id_filter_never_forgets_an_id_across_saves_and_writers(tmp_path_factory, added, other):
    one, two = snap.CallIdFilter(), snap.CallIdFilter()
    for call_id in added:
        one.add(call_id)
    for call_id in other:
        two.add(call_id)
    s = snap.Snapshot(tmp_path_factory.mktemp("f"))
    s.reset("L")
    at = {"ledger_id": "L", "hash": "h", "ts": "", "place": None, "states": {}, "call_ids": {}, "edits": {}, "redacted": []}
    s.save(base=0, seq=3, call_id_filter=one, **at)
    s.save(base=3, seq=4, call_id_filter=two, **at)  # ORed into the first writer's bits
    loaded = s.load("L").call_ids
    assert all(loaded.might_hold(c) for c in added + other)
    s.close()


def test_a_snapshot_file_of_another_format_is_rebuilt_with_the_current_tables(tmp_path, monkeypatch):
    clock = ManualClock(START)
    _build(tmp_path / "l", 20, clock)
    db = tmp_path / "l" / "cache" / snap.FILE_NAME
    with sqlite3.connect(db) as conn:  # as an older version left it: another layout, another user_version
        conn.execute("DROP TABLE current")
        conn.execute("CREATE TABLE current (request INTEGER PRIMARY KEY, version INTEGER, pending INTEGER, state BLOB)")
        conn.execute("PRAGMA user_version = 1")
    folded = _counting(monkeypatch)
    with Gate(policy(), tmp_path / "l", clock=clock) as g:
        assert len(folded) == g.ledger.head[0]  # rebuilt
        assert g._snapshot is not None  # and kept: the new tables took the save
    folded.clear()
    with Gate(policy(), tmp_path / "l", clock=clock):
        assert folded == []
