"""Attacks on the projection refresh of ecc0769: per-line checks in C (ledger._native.check_lines)
and event rows composed in C (chunk_lines) and inserted on a writer thread while the fold checks
the same lines (ledger/analytics/projection.py, _Projector.hand_off / trim / settle).

The writer inserts the rows of EVERY line of a block, the lines after the fold's first problem
included, and only afterwards does `trim` delete the rows after that problem. So whatever the
insert does with a line no check has looked at yet (a tampered or garbage line) happens before any
check: these tests hold it to the contract that the projection reports verify's first problem,
never holds a row that is not a line it accepted, and that a rebuild gives the same tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.analytics import projection as proj
from ledger.analytics.query import run
from ledger.proof.verify import verify
from ledger.store import native
from tests.ledger_factory import Forge, read_lines, write_lines
from tests.test_projection_data import assert_as_verify

needs_native = pytest.mark.skipif(not native.available(), reason="the compiled module (ledger/_native) is not usable here")


def _small_ledger(path: Path, requests: int = 3) -> None:
    with Forge(path) as forge:
        for _ in range(requests):
            request, digest = forge.ask()
            forge.approve(request, "alice", digest)


def _append_raw(path: Path, *raw: bytes) -> str:
    """Append raw lines (each given without its line feed) to the last segment; its name."""
    name, lines = read_lines(path)[-1]
    lines += [line + b"\n" for line in raw]
    write_lines([(name, lines)])
    return name.name


def _positions(path: Path) -> list[int]:
    return [r[0] for r in run(path, "SELECT position FROM event_rows ORDER BY position").rows]


@needs_native
@pytest.mark.xfail(strict=True, reason="the writer thread mends rows of lines the fold never accepted; "
                   "_mended_line raises on a line without ,\"body\": and the refresh raises ValueError")
@pytest.mark.parametrize("garbage", [b"hello", b'{"body":not json', b'{"body":{"x":1},"hash":"zz"'])
def test_a_garbage_line_after_lawful_ones_is_reported_not_raised(tmp_path, garbage):
    """HIGH. One line that is not JSON anywhere in the log (a disk error, a torn write followed by
    more lines, or a forger) makes every refresh, so every `countersign ledger query`, raise
    ValueError / LineError / JSONDecodeError from the writer thread, instead of reporting verify's
    problem at that line: the writer hands the whole block to DuckDB, which refuses the line's
    row, and the mend path (_mended_line) cannot parse it. Before ecc0769 only accepted lines
    reached the insert, so this could not happen; with COUNTERSIGN_VERIFY=python it still works."""
    path = tmp_path / "ledger"
    _small_ledger(path)
    _append_raw(path, garbage)
    assert not verify(path, engine="python").ok
    assert_as_verify(path)


@needs_native
@pytest.mark.xfail(strict=True, reason="bytes.splitlines also splits at a carriage return: a row of a line after the "
                   "problem is cut in two and its second half, which claims position 0, is mended and inserted")
def test_a_line_after_the_problem_cannot_smuggle_a_row_into_event_rows(tmp_path):
    """HIGH. The writer's mend path splits the composed rows with bytes.splitlines, which breaks at
    a raw carriage return too (JSON whitespace, so DuckDB read the row whole). A forger appends two
    lines after a lawful ledger: one whose row DuckDB refuses (its data is not JSON: that starts the
    mend path), and one whose data holds `\\r` followed by a complete chunk row of its own choosing
    at position 0. The second half is taken as a row of its own, is `missing`, is mended and
    inserted; `trim` deletes only positions after the fold's last line, so the forged event (any
    kind, any approver) stays in event_rows and in `events`, and every refresh (the problem
    lines are read again each time) inserts another copy."""
    path = tmp_path / "ledger"
    _small_ledger(path)
    name, lines = read_lines(path)[-1]
    victim = lines[3].rstrip(b"\n")  # an `approved` line, to be shown again at position 0
    fake_hash = b"0" * 64
    smuggled = (b'{"position":0,"segment_file":"' + name.name.encode() + b'","line":1,"file_offset":0,'
                b'"data_sha256":null,' + victim[1:])
    _append_raw(
        path,
        b'{"body":{"x":1},"hash":"' + fake_hash + b'","data":nope}',  # a row DuckDB refuses: the mend path runs
        b'{"body":{"y":1},"hash":"' + fake_hash + b'","data":{"x":\r' + smuggled + b"}}",
    )
    report = verify(path, engine="python")
    assert not report.ok and report.problem.seq == 11
    assert_as_verify(path)
    assert _positions(path) == list(range(1, 11))
    assert _positions(path) == list(range(1, 11))  # a second refresh reads the problem lines again


@needs_native
@pytest.mark.xfail(strict=True, reason="Thread.join interrupted by Ctrl-C marks the writer stopped (CPython 3.11, bpo-45274): "
                   "settle returns while the writer still uses the connection; ROLLBACK and close are refused")
def test_ctrl_c_while_the_writer_inserts_leaves_the_projection_usable(tmp_path, monkeypatch):
    """MEDIUM. Ctrl-C (KeyboardInterrupt) that arrives while the fold waits for the writer thread
    (settle -> Thread.join) leaves the writer running: on Python 3.11 an interrupted join releases
    the thread's lock and marks it stopped, so run's `finally: settle()` returns at once. The
    refresh then calls ROLLBACK and con.close() while the writer is inside DuckDB on the same
    connection: both are refused ("connection is busy with another call"), the KeyboardInterrupt
    becomes a ResourceInUseException, and the connection with its open transaction is leaked in
    DuckDB's instance cache, so every later refresh in the same process (a server, a notebook)
    fails with a write-write conflict until the process ends. Found with a real SIGALRM timer
    during a refresh whose fold stopped early in a large block."""
    import signal
    import threading
    import time

    path = tmp_path / "ledger"
    _small_ledger(path, 30)
    original = proj._Projector._insert_event_lines

    def slow_insert(self, lines, longest=None):
        if threading.current_thread() is not threading.main_thread():  # the writer: busy inside DuckDB a while
            self.con.execute("SELECT sum(i) FROM range(400000000) t(i)").fetchall()
        return original(self, lines, longest)

    monkeypatch.setattr(proj._Projector, "_insert_event_lines", slow_insert)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(BaseException) as raised:
            proj.refresh(path)
            time.sleep(10)  # the refresh was quicker than the timer: the test proves nothing
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    writers = [t for t in threading.enumerate() if t.name == "countersign-projection-writer"]
    for writer in writers:
        writer.join(30)
    monkeypatch.setattr(proj._Projector, "_insert_event_lines", original)
    assert raised.type is KeyboardInterrupt, raised.value
    assert writers == []  # the refresh returned with its writer still at work on the connection
    assert_as_verify(path)
