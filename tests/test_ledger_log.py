"""The log on disk: genesis, durability, the writer lock, torn tails, segments, failed writes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

from ledger import events as ev
from ledger import log as logmod
from ledger.log import Ledger, LedgerBroken, LedgerCorrupt, LedgerLocked, LedgerReader, LedgerUnreadable
from ledger.digest import value_digest
from ledger.verify import verify


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
    assert record.event.prev == "0" * 64 and record.event.format == "countersign-ledger/1"


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


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    first = Ledger(tmp_path / "l")
    with pytest.raises(LedgerLocked):
        Ledger(tmp_path / "l")
    first.close()
    Ledger(tmp_path / "l").close()


def test_the_lock_holds_across_processes(tmp_path):
    path = tmp_path / "l"
    Ledger(path).close()
    script = textwrap.dedent(
        f"""
        import sys
        from ledger.log import Ledger, LedgerLocked
        try:
            Ledger({str(path)!r})
        except LedgerLocked:
            sys.exit(3)
        sys.exit(0)
        """
    )
    with Ledger(path):
        assert subprocess.run([sys.executable, "-c", script]).returncode == 3
    assert subprocess.run([sys.executable, "-c", script]).returncode == 0


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
