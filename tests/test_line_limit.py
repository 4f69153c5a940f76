"""The ledger's line length limit (docs/ledger-format.md, section 2): the writer refuses a longer
event and writes nothing; every reader reports a longer line at its seq or byte offset without
holding it, and accepts a line at the limit; memory stays bounded for a torn tail of any size."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.proof import fast
from ledger.store import native
from ledger.proof.checkpoint import ledger_tail
from ledger.workflow.gate import InvalidCall
from ledger.store.lines import MAX_LINE_BYTES, OVERHEAD
from ledger.store.log import Ledger, LedgerCorrupt, LedgerReader, LineTooLong, list_segments
from ledger.store.scan import last_line, long_lines, read_lines
from ledger.proof.verify import Redactions, verify
from ledger_factory import Forge
from support import gate

ROOT = Path(__file__).resolve().parent.parent


def _segment(path: Path) -> Path:
    return list_segments(path)[-1]


def _with_proposal_of(path: Path, size: int) -> Path:
    """A ledger (genesis, then an allowed proposal) whose second line is exactly `size` bytes, line
    feed not counted (`size` at most the limit: the writer makes it)."""
    probe = path.with_name(path.name + "-probe")
    with Forge(probe) as f:
        f.propose("Write", {"content": ""}, effect="allow")
    base = len(_segment(probe).read_bytes().split(b"\n")[1])
    shutil.rmtree(probe)
    with Forge(path) as f:
        f.propose("Write", {"content": "x" * (size - base)}, effect="allow")
    assert len(_segment(path).read_bytes().split(b"\n")[1]) == size
    return path


@pytest.fixture(scope="module")
def at_limit(tmp_path_factory) -> Path:
    return _with_proposal_of(tmp_path_factory.mktemp("limit") / "l", MAX_LINE_BYTES)


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "l"
    shutil.copytree(source, target)
    return target


def _one_over(source: Path, tmp_path: Path) -> tuple[Path, int]:
    """The ledger at the limit with one more byte in line 2's DATA; returns it and line 2's offset."""
    path = _copy(source, tmp_path)
    segment = _segment(path)
    first, second, rest = segment.read_bytes().split(b"\n", 2)
    segment.write_bytes(first + b"\n" + second.replace(b'"content":"x', b'"content":"xx', 1) + b"\n" + rest)
    return path, len(first) + 1


# --- the writer -----------------------------------------------------------------------------------


def test_the_writer_accepts_a_line_at_the_limit_and_it_verifies(at_limit):
    report = verify(at_limit, engine="python")
    assert report.ok and report.count == 2


def test_the_writer_refuses_one_byte_over_the_limit_and_appends_nothing(at_limit, tmp_path):
    path = _copy(at_limit, tmp_path)
    before = _segment(path).read_bytes()
    content = json.loads(before.split(b"\n")[1])["data"]["args"]["content"]
    with Ledger(path) as led:
        with pytest.raises(LineTooLong, match="at most 16,777,216 bytes") as caught:
            # the same proposal as line 2 but one byte longer (seq 3 has as many digits as seq 2)
            record = next(LedgerReader(path).records())
            led.append(ev.Proposed(run="run-1", proposer="agent", call_id=None, tool="Write",
                                   args_digest="0" * 64, context_digest="0" * 64, policy="p", policy_digest="0" * 64,
                                   effect="allow", rules=(), reasons=()),
                       {"args": {"content": content + "x" * 200}, "context": {}})
        assert caught.value.size > MAX_LINE_BYTES and record.seq == 1
        assert led.head[0] == 2
    assert _segment(path).read_bytes() == before


def test_a_batch_holding_one_event_over_the_limit_appends_none_of_its_events(tmp_path):
    with Forge(tmp_path / "l") as f:
        before = _segment(f.path).read_bytes()
        small = ev.Cancelled(request=1, by="x", reason=None)
        with pytest.raises(LineTooLong):
            f.ledger.append_batch([(small, None), (ev.Cancelled(request=1, by="x", reason="r" * MAX_LINE_BYTES), None)])
        assert _segment(f.path).read_bytes() == before


def test_the_compiled_sealer_refuses_a_line_over_the_limit():
    seal = native.sealer()
    if seal is None:
        pytest.skip("the compiled module is not built")
    from ledger import _native

    assert _native.MAX_LINE_BYTES == MAX_LINE_BYTES
    with pytest.raises(ValueError, match="at most"):
        seal(b"{}", b"x" * (MAX_LINE_BYTES - OVERHEAD - 1))


def test_the_gate_refuses_a_call_it_cannot_record_and_records_nothing(tmp_path):
    g = gate(tmp_path / "l")
    try:
        head = g.ledger.head
        with pytest.raises(InvalidCall, match="cannot be recorded"):
            g.propose("get_user_details", {"user_id": "u" * MAX_LINE_BYTES}, proposer="agent")
        assert g.ledger.head == head and not g.workflow.requests
    finally:
        g.close()


def test_simulate_reports_a_call_too_long_to_record_at_its_line_without_a_traceback(tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"tool": "get_user_details", "args": {"user_id": "u1"}}\n'
                     + json.dumps({"tool": "get_user_details", "args": {"user_id": "u" * MAX_LINE_BYTES}}) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "simulate", "--policy", str(ROOT / "samples/retail.policy"), "--calls", str(calls),
         "--ledger", str(tmp_path / "led")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
    assert "calls.jsonl:2: the call cannot be recorded" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "led").exists()


# --- the readers ----------------------------------------------------------------------------------


def test_the_reader_reports_a_line_over_the_limit_with_its_line_and_offset(at_limit, tmp_path):
    path, offset = _one_over(at_limit, tmp_path)
    with pytest.raises(LedgerCorrupt, match=f"16,777,217 bytes long.*at byte {offset}") as caught:
        list(LedgerReader(path).lines())
    assert caught.value.line == 2


def test_the_reader_reads_a_line_at_the_limit(at_limit):
    assert [len(raw.text) for raw in LedgerReader(at_limit).lines()][1] == MAX_LINE_BYTES


def test_verify_reports_a_line_over_the_limit_at_its_seq(at_limit, tmp_path):
    path, _ = _one_over(at_limit, tmp_path)
    for engine in ("python", "auto"):
        report = verify(path, engine=engine)
        assert report.problem is not None and report.problem.seq == 2 and report.problem.kind == "format"
        assert "over the limit" in report.problem.message


def test_the_compiled_verifier_accepts_a_line_at_the_limit_and_declines_one_over(at_limit, tmp_path):
    if not native.available():
        pytest.skip("the compiled verifier is not built")
    assert fast.verify_fast(at_limit) == verify(at_limit, engine="python")
    path, _ = _one_over(at_limit, tmp_path)
    assert fast.verify_fast(path) is None


def test_verify_warns_of_a_torn_tail_over_the_limit_without_reading_it(at_limit, tmp_path):
    path = _copy(at_limit, tmp_path)
    with _segment(path).open("ab") as handle:
        handle.write(b"y" * (MAX_LINE_BYTES + 1))
    report = verify(path)
    assert report.ok and report.count == 2
    assert any("16777217 bytes" in w and "more than a line may hold" in w for w in report.warnings)


def test_a_writer_quarantines_a_torn_tail_over_the_limit_and_records_it(at_limit, tmp_path):
    path = _copy(at_limit, tmp_path)
    size = _segment(path).stat().st_size
    with _segment(path).open("ab") as handle:
        handle.write(b"y" * (MAX_LINE_BYTES + 1))
    with Ledger(path) as led:
        assert led.recovery is not None and led.recovery.fragment_bytes == MAX_LINE_BYTES + 1
        assert led.recovery.offset == size
    assert (path / led.recovery.quarantine).stat().st_size == MAX_LINE_BYTES + 1
    assert verify(path).ok


def test_a_writer_refuses_to_extend_a_last_line_over_the_limit(at_limit, tmp_path):
    path, _ = _one_over(at_limit, tmp_path)
    with pytest.raises(LedgerCorrupt, match="over the limit"):
        Ledger(path)


def test_the_checkpoint_tail_reads_a_last_line_at_the_limit_and_reports_one_over(at_limit, tmp_path):
    assert ledger_tail(at_limit)[0] == 2
    path, offset = _one_over(at_limit, tmp_path)
    with pytest.raises(LedgerCorrupt, match=f"at byte {offset}.*over the limit"):
        ledger_tail(path)


def test_redactions_are_read_past_a_line_over_the_limit(at_limit, tmp_path):
    path, _ = _one_over(at_limit, tmp_path)
    redacted = (b'{"body":{"kind":"redacted","seq":3,"ts":"2026-02-01T09:00:03.000000Z","prev":"' + b"0" * 64
                + b'","target":2,"path":"args.content","value_digest":"' + b"1" * 64 + b'","reason":"r","by":"b"},"hash":"'
                + b"2" * 64 + b'","data":null}\n')
    with _segment(path).open("ab") as handle:
        handle.write(redacted)
    assert Redactions.collect(path).of(2) == {("args", "content"): "1" * 64}


def test_the_projection_stops_before_a_line_over_the_limit(at_limit, tmp_path):
    from ledger.analytics import projection as proj

    path, _ = _one_over(at_limit, tmp_path)
    result = proj.refresh(path, create=True)
    assert result.problem is not None and "over the limit" in result.problem and result.events == 1


def test_the_projection_covers_a_line_at_the_limit(at_limit, tmp_path):
    from ledger.analytics import projection as proj

    path = _copy(at_limit, tmp_path)
    result = proj.refresh(path, create=True)
    assert result.problem is None and result.events == 2


def test_the_views_refuse_a_ledger_with_a_line_over_the_limit_naming_where(at_limit, tmp_path):
    from ledger.analytics.views import LinesTooLong, query

    path, offset = _one_over(at_limit, tmp_path)
    with pytest.raises(LinesTooLong, match=f"line 2 \\(at byte {offset}\\) is 16,777,217 bytes"):
        query(path, "SELECT count(*) FROM events")


def test_the_views_read_a_line_at_the_limit(at_limit):
    from ledger.analytics.views import query

    assert query(at_limit, "SELECT count(*) FROM events WHERE valid")[1] == [(2,)]


# --- the scanner ----------------------------------------------------------------------------------

_LINES = st.lists(st.binary(max_size=14).map(lambda b: b.replace(b"\n", b"")), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_LINES, st.binary(max_size=14).map(lambda b: b.replace(b"\n", b"")), st.integers(1, 10))
def test_read_lines_gives_each_line_or_its_size_when_over_the_limit(lines, tail, limit):
    data = b"".join(line + b"\n" for line in lines) + tail
    pieces = list(read_lines(io.BufferedReader(io.BytesIO(data), buffer_size=4), limit=limit))
    expected = [(line, True) for line in lines] + ([(tail, False)] if tail else [])
    assert len(pieces) == len(expected)
    offset = 0
    for number, (piece, (line, terminated)) in enumerate(zip(pieces, expected), start=1):
        assert piece.number == number and piece.offset == offset and piece.size == len(line)
        assert piece.terminated == terminated
        assert piece.text == (line if len(line) <= limit else None)
        offset += len(line) + 1


@settings(max_examples=300, deadline=None)
@given(_LINES, st.binary(max_size=14).map(lambda b: b.replace(b"\n", b"")), st.integers(1, 10), st.integers(1, 10))
def test_long_lines_finds_the_first_line_over_the_limit(lines, tail, limit, chunk):
    chunk = min(chunk, limit)
    data = b"".join(line + b"\n" for line in lines) + tail
    found = long_lines(io.BytesIO(data), limit, chunk)
    every = [(line, True) for line in lines] + ([(tail, False)] if tail else [])
    offsets = [sum(len(line) + 1 for line, _ in every[:i]) for i in range(len(every))]
    first = next((i for i, (line, _) in enumerate(every) if len(line) > limit), None)
    if first is None:
        assert found is None
    else:
        assert found == (first + 1, offsets[first], len(every[first][0]), every[first][1])


@settings(max_examples=200, deadline=None)
@given(_LINES.filter(bool), st.integers(1, 10))
def test_last_line_reads_the_last_line_or_says_it_is_over_the_limit(lines, limit):
    data = b"".join(line + b"\n" for line in lines)
    offset, text = last_line(io.BytesIO(data), len(data), limit)
    assert offset == len(data) - len(lines[-1]) - 1
    assert text == (lines[-1] if len(lines[-1]) <= limit else None)


@settings(max_examples=8, deadline=None)
@given(st.integers(-2, 2))
def test_the_reader_at_the_real_limit_accepts_up_to_it_and_reports_beyond(tmp_path_factory, delta):
    segment = tmp_path_factory.mktemp("scan") / "s"
    line = b"z" * (MAX_LINE_BYTES + delta)
    segment.write_bytes(b"a\n" + line + b"\nb\n")
    with segment.open("rb") as handle:
        pieces = list(read_lines(handle))
    assert [(p.offset, p.size, p.terminated) for p in pieces] == [(0, 1, True), (2, len(line), True), (3 + len(line), 1, True)]
    assert (pieces[1].text is None) == (delta > 0)


# --- memory ---------------------------------------------------------------------------------------

# VmHWM, the process's own peak resident set: getrusage's ru_maxrss survives exec on Linux, so
# a child forked from a large pytest would report the parent's peak.
_PEAK = """
import re, sys
sys.path.insert(0, "tests")
{action}
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024)
"""
_TORN_MB = 200
_BOUND = 150 * 1024 * 1024  # well below the tail's 200 MB (and the 491 MB verify took before the limit)


def _torn_ledger(tmp_path: Path) -> Path:
    with Forge(tmp_path / "l") as f:
        f.propose("t", {"i": 1}, effect="allow")
    block = b"x" * (1 << 20)
    with _segment(tmp_path / "l").open("ab") as handle:
        for _ in range(_TORN_MB):
            handle.write(block)
    return tmp_path / "l"


def _peak(action: str) -> int:
    result = subprocess.run([sys.executable, "-c", _PEAK.format(action=action)], capture_output=True, text=True, cwd=ROOT,
                            check=True)
    return int(result.stdout.split()[-1])


def test_verify_of_a_200_mb_torn_tail_stays_under_a_fixed_memory_bound(tmp_path):
    path = _torn_ledger(tmp_path)
    peak = _peak(f"from ledger.proof.verify import verify\nr = verify({str(path)!r})\nassert r.ok and r.count == 2, r")
    assert peak < _BOUND, f"peak RSS {peak / 2**20:.0f} MiB"


def test_recovering_a_200_mb_torn_tail_stays_under_a_fixed_memory_bound(tmp_path):
    path = _torn_ledger(tmp_path)
    peak = _peak(f"from ledger.store.log import Ledger\nled = Ledger({str(path)!r})\nassert led.recovery.fragment_bytes == {_TORN_MB << 20}")
    assert peak < _BOUND, f"peak RSS {peak / 2**20:.0f} MiB"


def test_the_views_refuse_a_200_mb_torn_tail_within_a_fixed_memory_bound(tmp_path):
    path = _torn_ledger(tmp_path)
    peak = _peak(f"from ledger.analytics.views import LinesTooLong, query\n"
                 f"try:\n    query({str(path)!r}, 'SELECT 1')\nexcept LinesTooLong:\n    pass\nelse:\n    raise SystemExit(1)")
    assert peak < _BOUND, f"peak RSS {peak / 2**20:.0f} MiB"


# --- the regular expression audit -----------------------------------------------------------------


def test_a_msgspec_message_names_the_form_not_the_regex_as_the_pattern_did():
    from ledger.store.log import _without_regex

    old = re.compile(r"matching regex '.*' (?=- at `)", re.DOTALL)
    for message in ["Expected `str` matching regex '^[0-9a-f]{64}$' - at `$.prev`",
                    "Object contains unknown field `matching regex 'x` - at `$`", "no pattern here",
                    "a matching regex '1' - at `x` and matching regex '2' - at `y`"]:
        assert _without_regex(message) == old.sub("in the form docs/ledger-format.md gives ", message)
