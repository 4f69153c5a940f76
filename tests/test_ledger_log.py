"""The log on disk: genesis, durability, the writer lock, torn tails, segments, failed writes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import msgspec

from ledger import events as ev
from ledger.store import lines
from ledger.store import log as logmod
from ledger.digest import canonical_json, value_digest
from ledger.events import encode_event
from ledger.store.log import (
    ForeignAppend,
    KeyConflict,
    Ledger,
    LedgerBroken,
    LedgerCorrupt,
    LedgerError,
    LedgerLocked,
    LedgerReader,
    LedgerUnreadable,
    list_segments,
)
from ledger.proof.verify import verify


EMPTY = value_digest({})


def proposal(n: int = 0) -> tuple[ev.Proposed, dict]:
    """A lawful event with its data: an allowed proposal with no arguments."""
    event = ev.Proposed(
        run=None, proposer="op", call_id=None, tool=f"tool_{n}", args_digest=EMPTY, context_digest=EMPTY,
        policy="p", policy_digest="0" * 64, effect="allow", rules=(), reasons=(),
    )
    return event, {"args": {}, "context": {}}


def test_a_new_ledger_starts_with_its_genesis_event(tmp_path):
    with Ledger(tmp_path / "l") as led:
        assert led.head[0] == 1
    [record] = list(LedgerReader(tmp_path / "l").records())
    assert isinstance(record.event, ev.Genesis)
    assert record.event.prev == "0" * 64 and record.event.format == "countersign-ledger/2"


def test_reopening_continues_the_chain(tmp_path):
    with Ledger(tmp_path / "l") as led:
        led.append(*proposal())
        head = led.head
    with Ledger(tmp_path / "l") as led:
        assert led.head == head
        record = led.append(*proposal())
        assert record.seq == head[0] + 1 and record.event.prev == head[1]


def test_create_false_refuses_a_missing_ledger(tmp_path):
    with pytest.raises(LedgerUnreadable):
        Ledger(tmp_path / "missing", create=False)


def test_append_returns_after_one_sync_and_a_batch_shares_it(tmp_path, monkeypatch):
    calls = []
    real = logmod._sync
    monkeypatch.setattr(logmod, "_sync", lambda fd: calls.append(fd) or real(fd))
    with Ledger(tmp_path / "l") as led:
        calls.clear()
        led.append(*proposal())
        assert len(calls) == 1
        led.append_batch([proposal(i) for i in range(50)])
        assert len(calls) == 2
        assert led.head[0] == 52


def test_two_writers_append_to_one_ledger_without_gaps(tmp_path):
    path = tmp_path / "l"
    first, second = Ledger(path), Ledger(path)
    a = first.append(*proposal(1))
    b = second.append(*proposal(2))  # second catches up with what first appended
    c = first.append(*proposal(3))
    assert (a.seq, b.seq, c.seq) == (2, 3, 4)
    assert b.event.prev == a.hash and c.event.prev == b.hash
    assert second.head == b[:2] and second.refresh() == (c.seq, c.hash)
    first.close(), second.close()
    assert verify(path).ok and verify(path).count == 4


def test_an_exclusive_writer_excludes_every_other_writer(tmp_path):
    path = tmp_path / "l"
    shared = Ledger(path)
    with pytest.raises(LedgerLocked, match="another writer holds the ledger's lock"):
        Ledger(path, exclusive=True)
    shared.close()
    with Ledger(path, exclusive=True) as alone:
        assert alone.exclusive
        with pytest.raises(LedgerLocked, match="exclusively"):
            Ledger(path)
        alone.append(*proposal())
    with Ledger(path) as again:
        again.make_exclusive()
        assert again.exclusive
        with pytest.raises(LedgerLocked):
            Ledger(path)


def test_make_exclusive_is_refused_while_another_writer_is_open_and_the_writer_stays_usable(tmp_path):
    path = tmp_path / "l"
    one, two = Ledger(path), Ledger(path)
    with pytest.raises(LedgerLocked):
        one.make_exclusive()
    assert not one.exclusive
    one.append(*proposal())
    two.close()
    one.make_exclusive()
    with pytest.raises(LedgerLocked):
        Ledger(path)
    one.close()


def test_an_exclusive_writer_refuses_to_extend_events_it_did_not_see(tmp_path):
    path = tmp_path / "l"
    with Ledger(path, exclusive=True) as led:
        seq, prev = led.head
        event, data = proposal(9)
        stamped = msgspec.structs.replace(event, seq=seq + 1, ts="2099-01-01T00:00:00.000000Z", prev=prev)
        _, line = lines.compose(encode_event(stamped), canonical_json(data))
        with open(next(path.glob("events-*.jsonl")), "ab") as f:  # a writer that ignored WRITERS
            f.write(line)
        with pytest.raises(ForeignAppend):
            led.append(*proposal())
        with pytest.raises(LedgerBroken):  # its view (a Gate's workflow) is stale: it stops
            led.append(*proposal())
    assert verify(path).count == seq + 1


def test_the_writer_lock_holds_across_processes(tmp_path):
    path = tmp_path / "l"
    Ledger(path).close()
    script = textwrap.dedent(
        f"""
        import sys
        from ledger.store.log import Ledger, LedgerLocked
        try:
            Ledger({str(path)!r}).append(*__import__("test_ledger_log").proposal(7))
        except LedgerLocked:
            sys.exit(3)
        sys.exit(0)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    with Ledger(path, exclusive=True):
        assert subprocess.run([sys.executable, "-c", script], env=env).returncode == 3
    with Ledger(path):  # a shared writer does not keep another process from appending
        assert subprocess.run([sys.executable, "-c", script], env=env).returncode == 0
    assert verify(path).count == 2


def test_a_torn_last_line_is_quarantined_and_recorded(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal())
        acknowledged = led.head
    segment = next(path.glob("events-*.jsonl"))
    fragment = b'{"body":{"kind":"cancelled","seq":3,"ts":"2026'
    with open(segment, "ab") as f:
        f.write(fragment)
    assert verify(path).ok  # the fragment was never acknowledged: not part of the ledger
    with Ledger(path) as led:
        note = led.recovery
        assert note is not None and note.fragment_bytes == len(fragment)
        assert (path / note.quarantine).read_bytes() == fragment
    records = list(LedgerReader(path).records())
    assert (records[1].seq, records[1].hash) == acknowledged
    assert isinstance(records[2].event, ev.Recovered)
    assert records[2].event.fragment_bytes == len(fragment)
    assert verify(path).ok


def test_verify_warns_about_a_torn_tail_but_still_passes(tmp_path):
    path = tmp_path / "l"
    Ledger(path).close()
    with open(next(path.glob("events-*.jsonl")), "ab") as f:
        f.write(b"\x00\x00\x00")
    report = verify(path)
    assert report.ok and any("torn" in w for w in report.warnings)


def test_segments_rotate_and_verify_reads_them_all(tmp_path):
    path = tmp_path / "l"
    with Ledger(path, segment_bytes=2000) as led:
        for _ in range(40):
            led.append(*proposal())
    segments = sorted(path.glob("events-*.jsonl"))
    assert len(segments) > 3
    assert all(s.read_bytes().endswith(b"\n") for s in segments)
    seqs = [r.seq for r in LedgerReader(path).records()]
    assert seqs == list(range(1, 42))
    assert verify(path).ok


def test_a_segment_cut_short_before_the_last_is_corruption_not_a_torn_tail(tmp_path):
    path = tmp_path / "l"
    with Ledger(path, segment_bytes=600) as led:
        for _ in range(6):
            led.append(*proposal())
    first = sorted(path.glob("events-*.jsonl"))[0]
    first.write_bytes(first.read_bytes()[:-10])
    report = verify(path)
    assert not report.ok and report.problem.kind in ("format", "chain")


def test_a_failed_write_stops_the_writer_and_loses_nothing_acknowledged(tmp_path, monkeypatch):
    path = tmp_path / "l"
    led = Ledger(path)
    led.append(*proposal())
    acknowledged = led.head
    real_write = os.write

    def disk_full(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))  # part of the batch reaches the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(logmod.os, "write", disk_full)
    with pytest.raises(LedgerBroken):
        led.append_batch([proposal(1), proposal(2)])
    monkeypatch.setattr(logmod.os, "write", real_write)
    with pytest.raises(LedgerBroken):
        led.append(*proposal())  # never retried, never resumed
    assert led.head == acknowledged
    led.close()
    with Ledger(path) as again:  # whatever part of the batch remained is quarantined
        records = list(again.records())
    assert [r.hash for r in records if r.seq == acknowledged[0]] == [acknowledged[1]]
    assert verify(path).ok


def test_a_writer_refuses_to_extend_a_last_line_that_was_changed(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal())
    segment = next(path.glob("events-*.jsonl"))
    segment.write_bytes(segment.read_bytes().replace(b'"proposer":"op"', b'"proposer":"OP"'))
    with pytest.raises(LedgerCorrupt):
        Ledger(path)


def test_reader_reports_a_directory_without_segments_as_unreadable(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(LedgerUnreadable):
        LedgerReader(tmp_path / "empty")
    assert verify(tmp_path / "empty").exit_code == 2
    assert verify(tmp_path / "nope").exit_code == 2


# --- segments: created under a temporary name, never empty, never a temporary file read ----------


def test_a_new_segment_is_written_synced_renamed_and_its_directory_synced(tmp_path, monkeypatch):
    path = tmp_path / "l"
    steps = []
    real_rename, real_sync, real_dir = os.rename, logmod._sync, logmod._fsync_dir
    monkeypatch.setattr(logmod, "_sync", lambda fd: steps.append(("sync", os.readlink(f"/proc/self/fd/{fd}"))) or real_sync(fd))
    monkeypatch.setattr(logmod.os, "rename", lambda a, b: steps.append(("rename", os.path.basename(a), os.path.basename(b))) or real_rename(a, b))
    monkeypatch.setattr(logmod, "_fsync_dir", lambda p: steps.append(("dirsync", str(p))) or real_dir(p))
    with Ledger(path, segment_bytes=1500) as led:
        assert steps[-3:] == [
            ("sync", str(path / ".events-00000001.jsonl.tmp")),
            ("rename", ".events-00000001.jsonl.tmp", "events-00000001.jsonl"),
            ("dirsync", str(path)),
        ]
        steps.clear()
        while len(list(path.glob("events-*.jsonl"))) < 3:
            led.append(*proposal())
    renames = [s for s in steps if s[0] == "rename"]
    assert renames == [("rename", ".events-00000002.jsonl.tmp", "events-00000002.jsonl"),
                       ("rename", ".events-00000003.jsonl.tmp", "events-00000003.jsonl")]
    for r in renames:  # the temporary file was synced before the rename, the directory after it
        i = steps.index(r)
        assert steps[i - 1] == ("sync", str(path / r[1])) and steps[i + 1] == ("dirsync", str(path))
    assert all(s.stat().st_size > 0 for s in path.glob("events-*.jsonl"))
    assert not list(path.glob(".*.tmp"))
    assert verify(path).ok


def test_a_failed_rename_leaves_no_segment_and_stops_the_writer(tmp_path, monkeypatch):
    path = tmp_path / "l"
    led = Ledger(path, segment_bytes=1200)
    while len(list(path.glob("events-*.jsonl"))) < 2:
        led.append(*proposal())
    acknowledged = led.head
    segments = sorted(p.name for p in path.glob("events-*.jsonl"))

    def no_space(a, b):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(logmod.os, "rename", no_space)
    with pytest.raises(LedgerBroken):
        for _ in range(10):  # until the next commit needs a new segment
            acknowledged = led.append(*proposal())[:2]
    monkeypatch.undo()
    with pytest.raises(LedgerBroken):
        led.append(*proposal())
    led.close()
    assert sorted(p.name for p in path.glob("events-*.jsonl")) == segments
    assert not list(path.glob(".*.tmp"))  # removed after the failure
    assert verify(path).ok and (verify(path).count, verify(path).head) == acknowledged
    with Ledger(path, segment_bytes=1200) as again:
        assert again.append(*proposal()).seq == acknowledged[0] + 1
    assert verify(path).ok


def test_a_temporary_segment_left_by_a_crash_is_never_read_and_is_replaced(tmp_path):
    path = tmp_path / "l"
    with Ledger(path, segment_bytes=1500) as led:
        led.append(*proposal())
    stale = path / logmod.temp_name(2)
    stale.write_bytes(b'{"body":{"kind":"genesis"... a crash before the rename\n')
    (path / "events-000000002.jsonl").write_bytes(b"nine digits: not a segment either\n")
    assert [p.name for p in logmod.list_segments(path)] == ["events-00000001.jsonl"]
    assert verify(path).ok and not verify(path).warnings
    with Ledger(path, segment_bytes=1500) as led:
        while not (path / "events-00000002.jsonl").exists():
            led.append(*proposal())
    assert not stale.exists()
    assert verify(path).ok
    from ledger.analytics.views import query

    _, rows = query(path, "SELECT count(*), count(DISTINCT segment_file) FROM events")
    assert rows == [(verify(path).count, 2)]


def test_an_empty_last_segment_from_an_older_writer_is_appended_to(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal())
    (path / "events-00000002.jsonl").touch()  # the v0 writer created segments empty, then wrote
    with Ledger(path) as led:
        record = led.append(*proposal())
    assert record.segment == "events-00000002.jsonl" and record.seq == 3
    assert verify(path).ok


# --- group commit: threads share a write and a sync ----------------------------------------------


def test_concurrent_threads_share_commits_and_keep_their_own_order(tmp_path):
    path = tmp_path / "l"
    threads, each = 12, 25
    got: dict[int, list] = {}
    with Ledger(path, segment_bytes=20_000) as led:
        start = led.commits
        barrier = threading.Barrier(threads)

        def work(t):
            barrier.wait()
            got[t] = [led.append(*proposal(t * 1000 + n)) for n in range(each)]

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        commits = led.commits - start
    seqs = sorted(r.seq for rs in got.values() for r in rs)
    assert seqs == list(range(2, 2 + threads * each))
    assert commits < threads * each  # some appends shared a write and a sync
    for t, rs in got.items():
        assert [r.event.tool for r in rs] == [f"tool_{t * 1000 + n}" for n in range(each)]
        assert [r.seq for r in rs] == sorted(r.seq for r in rs)
    stored = {r.seq: r.hash for r in LedgerReader(path).records()}
    assert all(stored[r.seq] == r.hash for rs in got.values() for r in rs)
    assert verify(path).ok


def test_a_group_window_gathers_appends_into_one_commit(tmp_path):
    with Ledger(tmp_path / "l", group_window=0.2) as led:
        start = led.commits
        barrier = threading.Barrier(8)
        pool = [threading.Thread(target=lambda i=i: (barrier.wait(), led.append(*proposal(i)))) for i in range(8)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        assert led.commits - start <= 2
        assert led.head[0] == 9


def test_a_failed_sync_fails_every_append_of_its_commit_and_is_never_retried(tmp_path, monkeypatch):
    path = tmp_path / "l"
    led = Ledger(path)
    acknowledged = led.head
    syncs, entered, release = [], threading.Event(), threading.Event()
    real = logmod._sync

    def slow_then_failing(fd):
        syncs.append(fd)
        if len(syncs) == 1:  # the first commit holds the lead while the others queue up
            entered.set()
            release.wait(5)
            return real(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(logmod, "_sync", slow_then_failing)
    errors, first = [], []
    t0 = threading.Thread(target=lambda: first.append(led.append(*proposal(0))))
    t0.start()
    entered.wait(5)

    def queued(i):
        try:
            led.append(*proposal(i))
        except LedgerError as exc:
            errors.append(exc)

    pool = [threading.Thread(target=queued, args=(i,)) for i in range(1, 6)]
    for th in pool:
        th.start()
    time.sleep(0.1)
    release.set()
    for th in [t0, *pool]:
        th.join()
    assert len(first) == 1 and first[0].seq == acknowledged[0] + 1
    assert len(errors) == 5 and all(isinstance(e, LedgerBroken) for e in errors)
    assert len(syncs) == 2  # the failed sync was the second; nothing retried it
    with pytest.raises(LedgerBroken):
        led.append(*proposal())
    assert len(syncs) == 2
    led.close()
    assert verify(path).ok and verify(path).count == first[0].seq


# --- idempotency keys ------------------------------------------------------------------------------


def keyed(n: int, key: str, **changes) -> tuple[ev.Proposed, dict]:
    event, data = proposal(n)
    return msgspec.structs.replace(event, key=key, **changes), data


def test_a_retried_keyed_append_returns_the_original_and_appends_nothing(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        original = led.append(*keyed(1, "req-1/proposed"))
        head = led.head
        again = led.append(*keyed(1, "req-1/proposed", ts="2030-01-01T00:00:00.000000Z"))  # ts is not compared
        assert (again.seq, again.hash, again.body) == (original.seq, original.hash, original.body)
        assert led.head == head
    with Ledger(path) as led:  # the key survives a restart: it is in the body
        assert led.append(*keyed(1, "req-1/proposed")).hash == original.hash
        assert led.head == head
    assert b'"prev":"' + original.event.prev.encode() + b'","key":"req-1/proposed","run"' in original.body
    assert verify(path).count == head[0]


def test_the_same_key_with_other_content_is_a_conflict_and_the_batch_appends_nothing(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        original = led.append(*keyed(1, "k"))
        head = led.head
        with pytest.raises(KeyConflict) as caught:
            led.append_batch([proposal(5), keyed(2, "k")])
        assert caught.value.key == "k" and caught.value.seq == original.seq
        event, _ = keyed(1, "k")
        with pytest.raises(KeyConflict):  # same body, other data
            led.append(event, {"args": {}, "context": {"x": 1}})
        assert led.head == head
        with pytest.raises(KeyConflict):  # within one batch
            led.append_batch([keyed(3, "new"), keyed(4, "new")])
        assert led.head == head
        twice = led.append_batch([keyed(3, "new"), keyed(3, "new")])
        assert twice[0] == twice[1] and led.head[0] == head[0] + 1


def test_keys_appended_by_another_writer_are_seen(tmp_path):
    path = tmp_path / "l"
    one, two = Ledger(path), Ledger(path)
    two.append(*proposal(0))  # two builds no key index until it needs one
    assert two.append(*keyed(8, "shared")).seq == 3
    first = one.append(*keyed(9, "mine"))
    assert two.append(*keyed(9, "mine")).seq == first.seq  # two caught up with one's keys
    with pytest.raises(KeyConflict):
        one.append(*keyed(7, "shared"))
    one.close(), two.close()
    assert verify(path).count == 4


def test_a_key_is_a_string_of_1_to_256_characters(tmp_path):
    with Ledger(tmp_path / "l") as led:
        for bad in ("", "x" * 257, 7):
            with pytest.raises(ValueError):
                led.append(*keyed(1, bad))
        led.append(*keyed(1, "é" * 256))
    assert verify(tmp_path / "l").ok


def test_keyed_events_verify_everywhere_and_a_null_key_does_not(tmp_path):
    from independent_verifier import verify_dir
    from ledger.analytics.views import query

    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*keyed(1, 'a "quoted"\nkey'))
        led.append(*proposal(2))
    assert verify(path).ok and verify_dir(path)[0]
    _, rows = query(path, "SELECT seq, key FROM events ORDER BY seq")
    assert rows == [(1, None), (2, 'a "quoted"\nkey'), (3, None)]
    assert query(path, "SELECT count(*) FROM chain_breaks")[1] == [(0,)]
    # A body with "key":null is not canonical (an unset key is absent), whatever its hash says.
    segment = next(path.glob("events-*.jsonl"))
    text = segment.read_bytes().split(b"\n")
    body, _, data = lines.split(text[2])
    forged_body = body.replace(b',"run":', b',"key":null,"run":', 1)
    _, forged = lines.compose(forged_body, data)
    segment.write_bytes(b"\n".join(text[:2]) + b"\n" + forged)
    assert verify(path).problem.seq == 3
    assert verify_dir(path)[3] == 3
    assert query(path, "SELECT min(seq) FROM chain_breaks")[1] == [(3,)]


def test_a_ledger_is_not_used_across_fork_and_a_child_does_not_drop_its_locks(tmp_path):
    # In a fresh process: this one may hold threads (DuckDB's) that a fork would copy.
    script = textwrap.dedent(
        f"""
        import os, sys
        from ledger.store.log import Ledger, LedgerError, LedgerLocked
        led = Ledger({str(tmp_path / "l")!r}, exclusive=True)
        pid = os.fork()
        if pid == 0:
            try:
                led.append(*__import__("test_ledger_log").proposal(1))
                code = 1
            except LedgerError:
                code = 7
            led.close()  # closes the child's descriptors; the parent's flock stays
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 7, status
        try:
            Ledger({str(tmp_path / "l")!r})
            sys.exit("the child's close released the parent's exclusive lock")
        except LedgerLocked:
            pass
        assert led.append(*__import__("test_ledger_log").proposal(2)).seq == 2
        """
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_gates_share_a_ledger_with_plain_writers_and_an_exclusive_one_keeps_them_out(tmp_path):
    from support import gate

    path = tmp_path / "l"
    first = gate(path)
    second, plain = gate(path), Ledger(path)  # Gates are shared writers: each step folds the others' events
    plain.append(*proposal())
    first.propose("read_thing", {"id": 1}, proposer="agent")
    assert (second.get(2).tool, second.get(3).tool, second.ledger.head[0]) == ("tool_0", "read_thing", 3)
    first.close(), second.close(), plain.close()
    alone = Ledger(path, exclusive=True)
    g = gate(alone)  # a Gate given an exclusive Ledger keeps it so (what simulate does)
    with pytest.raises(LedgerLocked):
        gate(path)
    g.propose("read_thing", {"id": 2}, proposer="agent")
    g.close()
    assert verify(path).ok


def test_a_refused_append_in_a_group_commit_fails_alone_and_uses_no_seq(tmp_path, monkeypatch):
    path = tmp_path / "l"
    led = Ledger(path)
    led.append(*keyed(0, "taken"))
    entered, release = threading.Event(), threading.Event()
    real = logmod._sync
    calls = []

    def slow_first(fd):
        calls.append(fd)
        if len(calls) == 1:
            entered.set()
            release.wait(5)
        return real(fd)

    monkeypatch.setattr(logmod, "_sync", slow_first)
    results: dict[int, object] = {}

    def run(i, items):
        try:
            results[i] = led.append_batch(items)
        except LedgerError as exc:
            results[i] = exc

    t0 = threading.Thread(target=run, args=(0, [proposal(100)]))
    t0.start()
    entered.wait(5)
    queued = [
        threading.Thread(target=run, args=(1, [proposal(1), keyed(2, "fresh")])),
        threading.Thread(target=run, args=(2, [proposal(3), keyed(4, "taken")])),  # other content: refused
        threading.Thread(target=run, args=(3, [keyed(2, "fresh"), proposal(5)])),  # same as 1's: the original
    ]
    for th in queued:
        th.start()
        time.sleep(0.05)  # in this order
    release.set()
    for th in [t0, *queued]:
        th.join()
    assert isinstance(results[2], KeyConflict)
    assert len(calls) == 2  # everything queued shared the second commit
    one, three = results[1], results[3]
    assert [r.seq for r in one] == [4, 5] and [r.seq for r in three] == [5, 6]
    assert three[0] == one[1] and three[1].event.tool == "tool_5"
    led.close()
    assert [r.event.tool for r in list(LedgerReader(path).records())[1:]] == ["tool_0", "tool_100", "tool_1", "tool_2", "tool_5"]
    assert verify(path).ok


def test_deleting_the_last_line_feed_cannot_undo_the_last_decision(tmp_path):
    """A whole event that lacks only its line feed is kept (verify counts it, a writer restores
    the line feed); otherwise deleting one byte would drop a rejection and reopen the request."""
    from support import gate as open_gate

    path = tmp_path / "l"
    g = open_gate(path)
    p = g.propose("small_change", {"id": 3}, proposer="agent")
    g.reject(p.request, approver="bob", reason="Not eligible.")
    count = g.ledger.head[0]
    g.close()
    segment = max(path.glob("events-*.jsonl"))
    segment.write_bytes(segment.read_bytes()[:-1])
    report = verify(path)
    assert report.ok and report.count == count and any("lacks its line feed" in w for w in report.warnings)
    g = open_gate(path)
    assert g.get(p.request).status == "rejected"
    assert segment.read_bytes().endswith(b"\n") and not (path / "quarantine").exists()
    g.close()
    assert verify(path).ok and not verify(path).warnings


def _ledger_ending_in_a_proposal(path):
    from support import gate as open_gate

    g = open_gate(path)
    g.propose("small_change", {"id": 3}, proposer="agent")
    p = g.propose("read_thing", {"id": 1}, proposer="agent", context={"a": {"b": {"c": 1}}})  # allowed: nothing follows
    count = g.ledger.head[0]
    g.close()
    segment = max(path.glob("events-*.jsonl"))
    assert p.request == count and b'"seq":%d,' % count in segment.read_bytes().split(b"\n")[-2]
    return segment, count


def test_a_damaged_last_line_without_its_line_feed_stays_and_fails_verify(tmp_path):
    """The last line lacks its line feed, yet it is a whole line and the next link of the chain
    (seq, prev, hash), with DATA that parses but does not match its digest: it is that event
    (section 6), so verify fails on it, and a writer keeps it (restores the line feed) instead of
    quarantining it as a torn write, which would make that failure disappear."""
    path = tmp_path / "l"
    segment, count = _ledger_ending_in_a_proposal(path)
    lines = segment.read_bytes().split(b"\n")[:-1]
    lines[-1] = lines[-1].replace(b'"c":1', b'"c":2')  # body and hash kept, DATA changed
    segment.write_bytes(b"\n".join(lines))
    assert (verify(path).problem.seq, verify(path).problem.kind) == (count, "data")
    Ledger(path).close()
    assert segment.read_bytes().endswith(b'"c":2}}}}}\n') and not (path / "quarantine").exists()
    assert (verify(path).problem.seq, verify(path).problem.kind) == (count, "data")


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_a_write_cut_inside_data_after_a_closing_brace_is_a_torn_tail(tmp_path, cut):
    """A write cut part way through DATA, just after one of its `}`, still starts with the body
    and the hash and ends in `}`; its DATA is unfinished, so it is no whole line: verify warns of a
    torn tail and passes, and a writer quarantines it (nothing acknowledged is lost)."""
    path = tmp_path / "l"
    segment, count = _ledger_ending_in_a_proposal(path)
    data = segment.read_bytes()
    assert data.endswith(b"}}}}}\n")
    segment.write_bytes(data[: -1 - cut])  # without the line feed and `cut` closing braces
    report = verify(path)
    assert report.ok and report.count == count - 1 and any("torn" in w for w in report.warnings)
    Ledger(path).close()
    assert len(list((path / "quarantine").iterdir())) == 1
    report = verify(path)
    assert report.ok and report.count == count  # count - 1 events and the `recovered` one


def test_a_writer_refuses_an_event_verify_would_reject_and_writes_nothing(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        head = led.head
        event, data = proposal()
        bad = msgspec.structs.replace(event, effect="maybe")  # not allow, deny or ask
        with pytest.raises(LedgerError, match="invalid Proposed event"):
            led.append(bad, data)
        assert led.head == head
        led.append(event, data)
    assert verify(path).ok


def test_timestamps_never_go_backwards(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        first = led.append(*proposal(1)).event.ts
        event, data = proposal(2)
        late = led.append(msgspec.structs.replace(event, ts="2000-01-01T00:00:00.000000Z"), data)
        assert late.event.ts == first  # a clock behind the head gives the head's time
    assert verify(path).ok


def test_verify_flags_a_timestamp_earlier_than_the_one_before(tmp_path):
    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal(1))
        seq, prev = led.head
    event, data = proposal(2)
    stamped = msgspec.structs.replace(event, seq=seq + 1, ts="2000-01-01T00:00:00.000000Z", prev=prev)
    _, line = lines.compose(encode_event(stamped), canonical_json(data))
    with open(max(path.glob("events-*.jsonl")), "ab") as f:
        f.write(line)
    report = verify(path)
    assert report.problem.seq == seq + 1 and "time went backwards" in report.problem.message


def test_a_first_write_that_fails_leaves_a_ledger_that_opens_later(tmp_path):
    path = tmp_path / "l"
    with pytest.raises(Exception):
        Ledger(path, clock=lambda: "not a time")
    with Ledger(path) as led:  # nothing half-made stands in the way
        assert led.head[0] == 1
    assert verify(path).ok


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling symlink"])
def test_something_named_like_a_segment_that_is_not_a_file_makes_the_ledger_unreadable(tmp_path, kind):
    """Skipping it would hide a segment from verify, and a writer would fail half way through its
    recovery; reading a FIFO would block. Both refuse at once, naming it."""
    import os

    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal())
    odd = path / "events-00000002.jsonl"
    if kind == "directory":
        odd.mkdir()
    elif kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to(tmp_path / "nowhere")
    report = verify(path)
    assert report.exit_code == 2 and "events-00000002.jsonl" in report.unreadable
    with pytest.raises(LedgerUnreadable, match="not a regular file"):
        Ledger(path)


def test_a_writer_killed_writing_its_recovered_event_leaves_both_fragments_recorded(tmp_path):
    """A writer quarantined a torn tail and truncated the segment, then died part way through its
    `recovered` event, which is the new torn tail at the same offset. The next writer quarantines
    that one too (.torn.2) and records both, the earlier first; it used to record only the second."""
    import hashlib

    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal(1))
    (segment,) = list_segments(path)
    offset = segment.stat().st_size
    first = b'{"body":{"kind":"proposed","seq":3,"ts":"2026-0'  # the first writer's torn tail, already cut off
    (path / "quarantine").mkdir()
    (path / "quarantine" / f"{segment.name}.{offset}.torn").write_bytes(first)
    second = b'{"body":{"kind":"recovered","seq":3,"ts":"2026-'  # its recovered event, torn
    with segment.open("ab") as handle:
        handle.write(second)
    with Ledger(path) as led:
        notes = led.recoveries
    assert [n.fragment_sha256 for n in notes] == [hashlib.sha256(first).hexdigest(), hashlib.sha256(second).hexdigest()]
    recovered = [r.event for r in LedgerReader(path).records() if isinstance(r.event, ev.Recovered)]
    assert [e.quarantine for e in recovered] == [f"quarantine/{segment.name}.{offset}.torn", f"quarantine/{segment.name}.{offset}.torn.2"]
    assert verify(path).ok


@pytest.mark.parametrize("left", ["whole", "beginning", "empty"])
def test_a_quarantine_left_before_truncating_is_not_recorded_again(tmp_path, left):
    """A writer that died after writing the quarantine file (or part of it, or before writing it)
    but before truncating left the fragment in the segment: the next writer records it once."""
    path = tmp_path / "l"
    with Ledger(path) as led:
        led.append(*proposal(1))
    (segment,) = list_segments(path)
    offset = segment.stat().st_size
    torn = b'{"body":{"kind":"proposed","seq":3,"ts":"2026-0'
    (path / "quarantine").mkdir()
    (path / "quarantine" / f"{segment.name}.{offset}.torn").write_bytes({"whole": torn, "beginning": torn[:9], "empty": b""}[left])
    with segment.open("ab") as handle:
        handle.write(torn)
    with Ledger(path) as led:
        assert len(led.recoveries) == 1
    assert sum(isinstance(r.event, ev.Recovered) for r in LedgerReader(path).records()) == 1


def test_the_writer_refuses_an_integer_no_reader_can_read_back(tmp_path):
    """msgspec reads integers of at most 4,300 characters, sign included, so a negative
    4,300-digit one was written and then failed verify ("Integer value out of range"; found by
    the differential tests). The positive one of 4,300 digits is still written and read."""
    from ledger.digest import ArgumentsError
    from ledger_factory import Forge

    n = int("9" * 4300)
    with Forge(tmp_path / "l") as forge:
        forge.propose(args={"n": n}, effect="deny")
        with pytest.raises(ArgumentsError, match="4,300 characters"):
            forge.propose(args={"n": -n}, effect="deny")
    assert verify(tmp_path / "l", engine="python").ok


def test_every_record_names_the_segment_that_holds_it(tmp_path):
    """The writer names the Records of a commit after the active segment while it composes them,
    and again after the segment the commit opened: each Record's segment holds its line."""
    path = tmp_path / "l"
    with Ledger(path, segment_bytes=1500) as led:
        records = [r for _ in range(6) for r in led.append_batch([proposal(), proposal()])]
        records.append(led.append(*proposal()))
    assert len({r.segment for r in records}) >= 3
    for record in records:
        assert record.body in (path / record.segment).read_bytes(), record.seq
    assert verify(path).ok
