"""The tamper matrix of issue 4: for events at the first, middle, second-to-last and last positions
of a multi-segment ledger, and for every field of each, flip a bit and edit the value; for each
position delete, reorder, duplicate and insert a line. Verification against a signed checkpoint
taken before the tampering must fail every time and name the first bad seq. A full rewrite with
recomputed hashes passes local verification and fails the checkpoint check.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.store import lines
from ledger.proof.checkpoint import generate_key, make_checkpoint, verify_against_checkpoint
from ledger.events import decode_event, encode_event
from ledger.store.log import list_segments
from ledger.proof.verify import verify
import msgspec

from support import build_matrix_ledger

SEGMENT_BYTES = 2500


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, object]:
    """A ledger of several segments with every kind of step, and a checkpoint of all of it."""
    path = tmp_path_factory.mktemp("matrix") / "ledger"
    build_matrix_ledger(path, SEGMENT_BYTES)
    assert len(list_segments(path)) >= 4
    checkpoint, _ = make_checkpoint(path, generate_key("matrix-key"))
    return path, checkpoint


def all_lines(path: Path) -> list[tuple[Path, int, bytes]]:
    """(segment, index within it, line without its newline) for every line, in order."""
    out = []
    for segment in list_segments(path):
        for i, line in enumerate(segment.read_bytes().split(b"\n")[:-1]):
            out.append((segment, i, line))
    return out


def write_lines(path: Path, placed: list[tuple[Path, bytes]]) -> None:
    """Rewrite the segments from (segment, line) pairs, keeping each line in its segment."""
    by_segment: dict[Path, list[bytes]] = {s: [] for s in list_segments(path)}
    for segment, line in placed:
        by_segment[segment].append(line)
    for segment, content in by_segment.items():
        segment.write_bytes(b"".join(line + b"\n" for line in content))


def members(body: bytes) -> dict[str, tuple[int, int]]:
    """Byte span (start, end) of each top-level member's value in a body object."""
    spans, depth, i, key, start, in_string = {}, 0, 0, None, None, False
    while i < len(body):
        ch = body[i : i + 1]
        if in_string:
            if ch == b"\\":
                i += 2
                continue
            if ch == b'"':
                in_string = False
        elif ch == b'"':
            if depth == 1 and key is None and start is None:
                end = body.index(b'"', i + 1)
                key = body[i + 1 : end].decode()
                i = end + 2  # past the closing quote and the colon
                start = i
                continue
            in_string = True
        elif ch in b"{[":
            depth += 1
        elif ch in b"}]":
            depth -= 1
            if depth == 0 and key is not None:
                spans[key] = (start, i)
        elif ch == b"," and depth == 1:
            spans[key] = (start, i)
            key, start = None, None
        i += 1
    return spans


POSITIONS = ["first", "middle", "second-to-last", "last"]


def position_index(name: str, count: int) -> int:
    return {"first": 0, "middle": count // 2, "second-to-last": count - 2, "last": count - 1}[name]


def field_cases(path: Path) -> list[tuple[str, str]]:
    """(position, field) for every field of the event at each position."""
    rows = all_lines(path)
    cases = []
    for name in POSITIONS:
        line = rows[position_index(name, len(rows))][2]
        body, _, data = lines.split(line)
        cases += [(name, f"body.{member}") for member in members(body)]
        cases.append((name, "hash"))
        if data != b"null":
            cases.append((name, "data"))
    return cases


def field_span(line: bytes, field: str) -> tuple[int, int]:
    """Byte span of a field's value within a whole line."""
    body, _, data = lines.split(line)
    body_start = len(lines.PREFIX)
    if field == "hash":
        start = body_start + len(body) + len(lines.HASH_MARK)
        return start, start + 64
    if field == "data":
        start = len(line) - len(lines.SUFFIX) - len(data)
        return start, start + len(data)
    start, end = members(body)[field.split(".", 1)[1]]
    return body_start + start, body_start + end


def edited_value(raw: bytes) -> bytes:
    """A different, well-formed JSON value of the same kind."""
    value = json.loads(raw)
    if isinstance(value, bool):
        new = not value
    elif isinstance(value, (int, float)):
        new = value + 1
    elif isinstance(value, str):
        new = value[:-1] + ("x" if not value.endswith("x") else "y") if value else "x"
    elif isinstance(value, list):
        new = value + ["x"]
    elif isinstance(value, dict):
        new = {**value, "x": 1}
    else:
        new = "x"
    return json.dumps(new, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.fixture
def copy(original, tmp_path):
    path, checkpoint = original
    target = tmp_path / "ledger"
    shutil.copytree(path, target)
    return target, checkpoint


def assert_caught_at(path: Path, checkpoint, seq: int) -> None:
    report, _ = verify_against_checkpoint(path, checkpoint)
    assert not report.ok, "tampering went unnoticed"
    assert report.problem.seq == seq, report.problem


def test_the_untouched_ledger_verifies_against_its_checkpoint(original):
    path, checkpoint = original
    report, _ = verify_against_checkpoint(path, checkpoint)
    assert report.ok, report.problem


@pytest.mark.parametrize("op", ["flip", "edit"])
@pytest.mark.parametrize("position", POSITIONS)
def test_flipping_a_bit_or_editing_any_field_is_named_by_seq(copy, op, position):
    path, checkpoint = copy
    rows = all_lines(path)
    index = position_index(position, len(rows))
    segment, _, line = rows[index]
    fields = [field for name, field in field_cases(path) if name == position]
    assert len(fields) >= 5
    for field in fields:
        start, end = field_span(line, field)
        if op == "flip":
            middle = (start + end) // 2
            changed = line[:middle] + bytes([line[middle] ^ 0x01]) + line[middle + 1 :]
        elif field == "hash":  # the hash is 64 hex digits without quotes: another hash
            changed = line[:start] + hashlib.sha256(line[start:end]).hexdigest().encode() + line[end:]
        else:
            changed = line[:start] + edited_value(line[start:end]) + line[end:]
        assert changed != line
        placed = [(s, changed if i == index else l) for i, (s, _, l) in enumerate(rows)]
        write_lines(path, placed)
        assert_caught_at(path, checkpoint, index + 1)
    write_lines(path, [(s, l) for s, _, l in rows])  # restored: the ledger verifies again
    assert verify_against_checkpoint(path, checkpoint)[0].ok


@pytest.mark.parametrize("position", POSITIONS)
def test_deleting_a_line_is_named_by_seq(copy, position):
    path, checkpoint = copy
    rows = all_lines(path)
    index = position_index(position, len(rows))
    write_lines(path, [(s, l) for i, (s, _, l) in enumerate(rows) if i != index])
    assert_caught_at(path, checkpoint, index + 1)


@pytest.mark.parametrize("position", POSITIONS)
def test_reordering_two_lines_is_named_by_seq(copy, position):
    path, checkpoint = copy
    rows = all_lines(path)
    index = position_index(position, len(rows))
    other = index + 1 if index + 1 < len(rows) else index - 1
    placed = [(s, l) for s, _, l in rows]
    placed[index], placed[other] = (placed[index][0], rows[other][2]), (placed[other][0], rows[index][2])
    write_lines(path, placed)
    assert_caught_at(path, checkpoint, min(index, other) + 1)


@pytest.mark.parametrize("position", POSITIONS)
def test_duplicating_a_line_is_named_by_seq(copy, position):
    path, checkpoint = copy
    rows = all_lines(path)
    index = position_index(position, len(rows))
    placed = []
    for i, (s, _, l) in enumerate(rows):
        placed.append((s, l))
        if i == index:
            placed.append((s, l))
    write_lines(path, placed)
    assert_caught_at(path, checkpoint, index + 2)


@pytest.mark.parametrize("position", POSITIONS)
def test_inserting_a_forged_line_is_named_by_seq(copy, position):
    path, checkpoint = copy
    rows = all_lines(path)
    index = position_index(position, len(rows))
    # A forged event that is well formed, hashed and lawful where it stands (it takes the seq and
    # prev of the line it is put before), so the break shows at the original line after it.
    prev = "0" * 64 if index == 0 else lines.split(rows[index - 1][2])[1]
    ts = decode_event(lines.split(rows[index][2])[0]).ts
    if index == 0:
        forged = ev.Genesis(seq=1, ts=ts, prev=prev, format=ev.FORMAT, ledger_id="f" * 32)
    else:
        forged = ev.Recovered(seq=index + 1, ts=ts, prev=prev, segment="events-00000001.jsonl", offset=0,
                              fragment_bytes=1, fragment_sha256="0" * 64, quarantine="quarantine/x")
    _, forged_line = lines.compose(encode_event(forged), None)
    placed = [(s, l) for s, _, l in rows]
    placed.insert(index, (rows[index][0], forged_line.rstrip(b"\n")))
    write_lines(path, placed)
    assert_caught_at(path, checkpoint, index + 2)


def test_a_full_rewrite_with_recomputed_hashes_passes_locally_and_fails_the_checkpoint(copy):
    path, checkpoint = copy
    rows = all_lines(path)
    prev, placed = "0" * 64, []
    for segment, _, line in rows:
        body, _, data = lines.split(line)
        event = decode_event(body)
        if type(event).__name__ == "Approved" and event.comment == "ok":
            event = msgspec.structs.replace(event, comment="approved after a phone call")  # the rewritten history
        event = msgspec.structs.replace(event, prev=prev)
        prev, new_line = lines.compose(encode_event(event), data)
        placed.append((segment, new_line.rstrip(b"\n")))
    write_lines(path, placed)
    assert verify(path).ok  # every link recomputed: the chain alone cannot tell
    report, _ = verify_against_checkpoint(path, checkpoint)
    assert not report.ok and report.problem.kind == "checkpoint"


def test_the_checkpoint_covers_the_whole_ledger_so_the_hashes_are_real(original):
    path, checkpoint = original
    assert checkpoint.size == len(all_lines(path))
    last = all_lines(path)[-1][2]
    assert lines.split(last)[1] == checkpoint.head
    assert hashlib.sha256(lines.split(last)[0]).hexdigest() == checkpoint.head


# --- standing decisions (docs/ledger-format.md, section 12) ------------------------------------


@pytest.fixture(scope="module")
def standing_original(tmp_path_factory) -> tuple[Path, object, dict[str, int]]:
    """A ledger holding the events standing decisions add: a `remembered` event, a proposal it
    decided (`remembered` member) and a `forgotten` event; with a checkpoint of all of it."""
    from dsl import Policy
    from ledger.clock import ManualClock
    from ledger.store.log import Ledger
    from ledger.workflow.gate import Gate
    from support import START

    path = tmp_path_factory.mktemp("standing") / "ledger"
    clock = ManualClock(START)
    policy = Policy.from_text('ask t remember session\n', "standing.policy")
    with Gate(policy, Ledger(path, segment_bytes=SEGMENT_BYTES, clock=clock), clock=clock) as gate:
        p = gate.propose("t", {"n": 1}, proposer="agent", run="r1", context={"session_id": "s1"})
        gate.approve(p.request, approver="sup-1", digest=p.args_digest, remember="session")
        q = gate.propose("t", {"n": 2}, proposer="agent", run="r2", context={"session_id": "s1"})
        assert q.status == "allowed"
        gate.forget(p.request + 2, by="sup-1", reason="done")
        gate.propose("t", {"n": 3}, proposer="agent", run="r2", context={"session_id": "s1"})
    checkpoint, _ = make_checkpoint(path, generate_key("standing-key"))
    return path, checkpoint, {"remembered": p.request + 2, "proposed": q.request, "forgotten": q.request + 1}


@pytest.mark.parametrize("op", ["flip", "edit"])
@pytest.mark.parametrize("kind", ["remembered", "proposed", "forgotten"])
def test_flipping_or_editing_any_field_of_the_standing_events_is_named_by_seq(standing_original, tmp_path, op, kind):
    original, checkpoint, seqs = standing_original
    path = tmp_path / "ledger"
    shutil.copytree(original, path)
    rows = all_lines(path)
    index = seqs[kind] - 1
    segment, _, line = rows[index]
    assert f'"kind":"{kind}"'.encode() in line
    body, _, data = lines.split(line)
    fields = [f"body.{member}" for member in members(body)] + ["hash"] + (["data"] if data != b"null" else [])
    assert len(fields) >= 8
    for field in fields:
        start, end = field_span(line, field)
        if op == "flip":
            middle = (start + end) // 2
            changed = line[:middle] + bytes([line[middle] ^ 0x01]) + line[middle + 1 :]
        elif field == "hash":
            changed = line[:start] + hashlib.sha256(line[start:end]).hexdigest().encode() + line[end:]
        else:
            changed = line[:start] + edited_value(line[start:end]) + line[end:]
        assert changed != line
        write_lines(path, [(s, changed if i == index else l) for i, (s, _, l) in enumerate(rows)])
        assert_caught_at(path, checkpoint, index + 1)
    write_lines(path, [(s, l) for s, _, l in rows])
    assert verify_against_checkpoint(path, checkpoint)[0].ok
