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
