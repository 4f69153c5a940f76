"""The compiled per-line check (ledger._native.check_lines) that the columnar projection trusts to
skip its own checks of a line that need no earlier line (ledger/analytics/projection.py).

The contract: a line it flags 1 passes every one of those checks in Python (the layout, the body
decoded and in its one canonical spelling, the hash, real times, the data against the body's
digests in its canonical spelling: ledger.proof.data with no redaction). It may flag 0 a line
Python accepts (it is then checked in Python); it must never flag 1 one Python refuses. Held on
lawful ledgers of every kind of step, on their lines edited byte by byte, and on bodies and data
edited by a careful forger (the hash made to match)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.clock import is_ts
from ledger.proof.data import check_data
from ledger.proof.report import Problem
from ledger.store import native
from ledger.store.lines import LineError, split
from support import build_matrix_ledger, build_mixed_ledger
from tests.ledger_factory import random_history, read_lines, rebody
from tests.test_views import build_gate_ledger

pytestmark = pytest.mark.skipif(not native.available(), reason="the compiled module (ledger/_native) is not usable here")


class _Record:
    def __init__(self, event, data: bytes):
        self.seq, self.event, self.data = event.seq, event, data


def python_accepts(line: bytes) -> bool:
    """Every check of one line (no line feed) that needs no earlier line, in Python."""
    try:
        body, digest, data = split(line)
        event = ev.decode_event(body)
    except (LineError, msgspec.ValidationError, msgspec.DecodeError, ValueError):
        return False
    if hashlib.sha256(body).hexdigest() != digest or ev.encode_event(event) != body:
        return False
    for value in (event.ts, getattr(event, "deadline", None)):
        if value is not None and not is_ts(value):
            return False
    return check_data(_Record(event, data), lambda kind, message: Problem(None, kind, message), None) is None


def flags(lines: list[bytes]) -> bytes:
    return native.module().check_lines(b"".join(line.rstrip(b"\n") + b"\n" for line in lines))


def assert_sound(lines: list[bytes]) -> None:
    got = flags(lines)
    assert len(got) == len(lines)
    for flag, line in zip(got, lines):
        assert flag in (0, 1)
        if flag:
            assert python_accepts(line.rstrip(b"\n")), line


@pytest.fixture(scope="module")
def lawful(tmp_path_factory) -> list[bytes]:
    """The lines of lawful ledgers: every kind of Gate step, the tamper matrix's, random histories."""
    base = tmp_path_factory.mktemp("lawful")
    gate, _ = build_mixed_ledger(base / "mixed", item=3)
    gate.close()
    build_matrix_ledger(base / "matrix", segment_bytes=4096)
    build_gate_ledger(base / "gate")
    for seed in range(4):
        random_history(base / f"random{seed}", random.Random(seed), steps=60, unlawful_end=False, escalation=seed % 2 == 1)
    return [line for directory in sorted(base.iterdir()) for _, lines in read_lines(directory) for line in lines]


def test_lawful_lines_are_flagged_as_python_judges_them_and_most_pass(lawful):
    got = flags(lawful)
    assert_sound(lawful)
    # completeness is what makes the projection fast: the kinds it reads pass
    passed = [line for flag, line in zip(got, lawful) if flag]
    assert len(passed) >= 0.8 * len(lawful), (len(passed), len(lawful))
    kinds = {msgspec.json.decode(split(line.rstrip(b"\n"))[0])["kind"] for line in passed}
    assert {"genesis", "proposed", "approved", "executed", "rejected"} <= kinds


def test_one_call_splits_the_lines_over_two_threads_with_the_same_flags(lawful):
    many = (lawful * (1 + 900 // len(lawful)))[:900]
    assert flags(many) == b"".join(flags([line]) for line in many)


def test_only_whole_lines_are_flagged():
    module = native.module()
    assert module.check_lines(b"") == b""
    assert module.check_lines(b'{"body":') == b""
    assert module.check_lines(b"\n\nnot a line\n") == b"\x00\x00\x00"


_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(data=st.data())
def test_a_line_edited_byte_by_byte_is_never_flagged_unless_python_accepts_it(lawful, data):
    line = bytearray(data.draw(st.sampled_from(lawful)).rstrip(b"\n"))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(line) - 1))
        how = data.draw(st.sampled_from(["replace", "insert", "delete"]))
        byte = data.draw(st.sampled_from(list(b'0123456789abcdef"\\{}[],:.-eEZT ') + [0x80, 0xC3, 0xFF, 0x7F]))
        if how == "replace":
            line[at] = byte
        elif how == "insert":
            line.insert(at, byte)
        elif len(line) > 1:
            del line[at]
    assert_sound([bytes(line).replace(b"\n", b" ")])


_BODY_EDITS = {
    "a member's value": lambda b: {**b, "ts": b["ts"].replace("Z", "+00:00")},
    "an impossible date": lambda b: {**b, "ts": b["ts"][:5] + "02-30" + b["ts"][10:]},
    "an hour of 24": lambda b: {**b, "ts": b["ts"][:11] + "24" + b["ts"][13:]},
    "an extra member": lambda b: {**b, "extra": 1},
    "a member removed": lambda b: {k: v for k, v in b.items() if k != "prev"},
    "a digest changed": lambda b: {**b, **({"args_digest": "0" * 64} if "args_digest" in b else {"prev": "1" * 64})},
    "an unknown kind": lambda b: {**b, "kind": "proposal"},
}


@_SETTINGS
@given(data=st.data())
def test_a_forged_body_with_a_matching_hash_is_never_flagged_unless_python_accepts_it(lawful, data):
    line = data.draw(st.sampled_from(lawful)).rstrip(b"\n")
    body = msgspec.json.decode(split(line)[0])
    edit = data.draw(st.sampled_from(sorted(_BODY_EDITS)))
    edited = _BODY_EDITS[edit](body)
    spelled = msgspec.json.encode(edited)
    if data.draw(st.booleans()):
        spelled = spelled.replace(b":", b": ", 1)
    assert_sound([rebody(line, spelled)])


_DATA_EDITS = {
    "arguments": lambda d: {**d, "args": {**d["args"], "forged": 1}} if isinstance(d, dict) and "args" in d else {"args": {}},
    "no data": lambda d: None,
    "data where none belongs": lambda d: {"args": {}} if d is None else d,
    "spelling": lambda d: d,  # re-spelled with a space below
    "a float for an int": lambda d: {**d, "args": {k: (v + 0.0 if type(v) is int else v) for k, v in d["args"].items()}}
    if isinstance(d, dict) and isinstance(d.get("args"), dict) else d,
}


@_SETTINGS
@given(data=st.data())
def test_changed_data_is_never_flagged_unless_python_accepts_it(lawful, data):
    line = data.draw(st.sampled_from(lawful)).rstrip(b"\n")
    body, digest, stored = split(line)
    edit = data.draw(st.sampled_from(sorted(_DATA_EDITS)))
    new = msgspec.json.encode(_DATA_EDITS[edit](msgspec.json.decode(stored)))
    if edit == "spelling":
        new = new.replace(b":", b" :", 1)
    assert_sound([b'{"body":' + body + b',"hash":"' + digest.encode() + b'","data":' + new + b"}"])


def test_a_line_over_the_limit_is_flagged_0_and_the_next_one_is_still_read(lawful):
    from ledger.store.lines import MAX_LINE_BYTES

    line = next(line for line in lawful if flags([line]) == b"\x01").rstrip(b"\n")
    over = line[:-1] + b" " * (MAX_LINE_BYTES + 1 - len(line)) + b"}"
    assert native.module().check_lines(over + b"\n" + line + b"\n") == b"\x00\x01"
