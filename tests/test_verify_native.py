"""The compiled verifier (ledger.proof.fast.verify_fast) held to the reference (ledger.proof.verify, engine
"python").

The contract: verify_fast(path, expect_head) returns None (it declines, and the reference decides)
or a Report EQUAL to the reference's. It must never return a Report for a ledger the reference
rejects (soundness: it declines on any problem); for ordinary lawful ledgers (no torn tail, no
recovered or redacted event, no float in the arguments, no escaped character in an object key,
nesting of at most 64 levels, integers of at most 18 digits in bodies) it returns one
(completeness, which is what makes it fast).

1. completeness and equality on lawful ledgers: Gate-written, simulated, random histories of
   several segments, Forge-written with varied arguments and context (hypothesis), lines cut
   anywhere by the wrapper's reads, one read of 800 lines (checked on two threads), expected
   heads;
2. the documented declines: floats, escaped keys, torn tails, recovered and redacted events,
   deep nesting, long integers, expected heads that are no hash;
3. soundness against tampering: raw byte edits, line edits, and edits of bodies (re-hashed and
   re-chained, so that only the content or the law is wrong) and of DATA (some with the body's
   digest made to match a naive reading of the new spelling), from fixed catalogues, from a
   list of named edits, from unlawful random histories and from hypothesis;
4. the tamper matrix of tests/test_tamper_matrix.py through both engines;
5. the writer's compiled sealer (seal, valid_body), which shares the verifier's body grammar:
   what it takes, decode_event reads.

Every check is `fast is None or fast == reference` and `reference.ok or fast is None`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.ledger_factory as factory
from dsl.requirements import Quorum, Requirements
from ledger import events as ev
from ledger.proof import fast as fast_path
from ledger.store import native
from ledger.clock import ManualClock, add_seconds, format_ts, is_ts, parse_ts
from ledger.digest import ArgumentsError, canonical_spelling, value_digest
from ledger.workflow.gate import Gate
from ledger.store.lines import compose, split
from ledger.store.log import Ledger, list_segments
from ledger.proof.verify import verify
from support import START, build_matrix_ledger, build_mixed_ledger, policy
from tests.ledger_factory import Forge, read_lines, rebody, rechain

pytestmark = pytest.mark.skipif(
    not native.available(),
    reason="the compiled verifier (ledger/_native) is not built, not built from the ledger/_native.c beside it, "
    "or switched off by COUNTERSIGN_VERIFY=python: `pip install -e '.[test]'` builds it",
)

# The catalogues of edits below are sampled to keep the file fast (15 to 35 s): for a deeper run,
# COUNTERSIGN_NATIVE_EXHAUSTIVE=1 tries every edit of them (some 20,000 ledgers, minutes), and
# COUNTERSIGN_NATIVE_SCALE=N runs N times as many random edits and hypothesis examples.
EXHAUSTIVE = os.environ.get("COUNTERSIGN_NATIVE_EXHAUSTIVE") == "1"
SCALE = int(os.environ.get("COUNTERSIGN_NATIVE_SCALE", "1"))
HYPOTHESIS = settings(max_examples=120 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- the two engines -------------------------------------------------------------------------------


def reference(path: Path, expect_head: str | None = None):
    return verify(path, expect_head, engine="python")


def judge(path: Path, expect_head: str | None = None, what: object = ""):
    """(fast, reference) for the ledger at `path`, after asserting the contract: the fast path
    declines, or returns the reference's Report; and never accepts what the reference rejects."""
    fast = fast_path.verify_fast(path, expect_head)
    ref = reference(path, expect_head)
    if fast is not None:
        assert ref.ok, f"UNSOUND: the fast path accepted a ledger the reference rejects ({what}): {ref.problem or ref.unreadable}"
        assert fast == ref, f"the fast path's Report differs from the reference's ({what}):\nfast {fast}\nref  {ref}"
        # The same Report to the byte, as `--json` shows it (the order of the statuses included).
        assert msgspec.json.encode(fast) == msgspec.json.encode(ref), f"the Reports differ in order ({what})"
    return fast, ref


def assert_accepted(path: Path, expect_head: str | None = None, what: object = ""):
    """A lawful ledger of the common shape: the reference accepts it and so does the fast path,
    with the same Report."""
    fast, ref = judge(path, expect_head, what)
    assert ref.ok, f"the ledger under test is not lawful ({what}): {ref.problem or ref.unreadable}"
    assert fast is not None, f"COMPLETENESS: the fast path declined a plainly lawful ledger ({what})"
    return ref


def assert_declined(path: Path, expect_head: str | None = None, what: object = ""):
    fast, ref = judge(path, expect_head, what)
    assert fast is None, f"the fast path should have left this ledger to the reference ({what})"
    return ref


# --- ledgers as bytes ---------------------------------------------------------------------------------

Segments = list[tuple[str, list[bytes]]]  # (segment file name, its lines with their line feeds)


def snapshot(path: Path) -> Segments:
    return [(segment.name, lines) for segment, lines in read_lines(path)]


def materialize(directory: Path, segments: Segments) -> Path:
    """Write `segments` as the only files of `directory` (emptied first)."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name, lines in segments:
        (directory / name).write_bytes(b"".join(lines))
    return directory


def flat(segments: Segments) -> list[tuple[int, bytes]]:
    """(segment index, line) for every line, in order."""
    return [(index, line) for index, (_, lines) in enumerate(segments) for line in lines]


def regroup(template: Segments, placed: list[tuple[int, bytes]]) -> Segments:
    """The segments of `template` (names) holding the (segment index, line) pairs `placed`."""
    out: Segments = [(name, []) for name, _ in template]
    for index, line in placed:
        out[index][1].append(line)
    return out


def with_lines(template: Segments, new_lines: list[bytes]) -> Segments:
    """`template`'s segment layout (as many lines per segment) with `new_lines` in place; lines
    beyond the template's count go to the last segment, missing ones shorten the last segments."""
    out: Segments = []
    i = 0
    for k, (name, lines) in enumerate(template):
        take = len(lines) if k < len(template) - 1 else len(new_lines) - i
        out.append((name, new_lines[i : i + take]))
        i += take
    return out


def line_hash(line: bytes) -> str:
    return split(line)[1]


def body(line: bytes) -> bytes:
    return split(line)[0]


def data(line: bytes) -> bytes:
    return split(line)[2]


def with_data(line: bytes, new: bytes) -> bytes:
    """The line with other DATA (not hashed: the chain stays intact)."""
    b, h, _ = split(line)
    return b'{"body":' + b + b',"hash":"' + h.encode() + b'","data":' + new + b"}\n"


def rechained(lines: list[bytes], index: int, new_body: bytes) -> list[bytes]:
    """Line `index` with `new_body` and a hash that matches it, and every later line re-chained
    to it (a careful forger: seq, prev and hashes are all valid, only the content is wrong)."""
    out = list(lines)
    out[index] = rebody(out[index], new_body)
    if index + 1 < len(out):
        out = rechain(out, index + 1)
    return out


# --- JSON spans: where each value of a body or DATA is -----------------------------------------------


def _string_end(text: bytes, i: int) -> int:
    """Index just past the string starting at `i` (a quote)."""
    i += 1
    while True:
        c = text[i]
        if c == 0x5C:
            i += 2
        elif c == 0x22:
            return i + 1
        else:
            i += 1


def json_spans(text: bytes) -> tuple[list[tuple[tuple, int, int]], list[tuple[tuple, list[tuple[int, int]]]]]:
    """For canonical JSON `text`: the (path, start, end) of every value (the whole text first),
    and for every object its path and the (start, end) spans of its members (`"key":value`)."""
    values: list[tuple[tuple, int, int]] = []
    objects: list[tuple[tuple, list[tuple[int, int]]]] = []

    def value(i: int, path: tuple) -> int:
        c = text[i : i + 1]
        if c == b"{":
            members: list[tuple[int, int]] = []
            j = i + 1
            if text[j : j + 1] != b"}":
                while True:
                    key_end = _string_end(text, j)
                    key = json.loads(text[j:key_end])
                    start = j
                    j = value(key_end + 1, path + (key,))
                    members.append((start, j))
                    if text[j : j + 1] == b",":
                        j += 1
                        continue
                    break
            objects.append((path, members))
            end = j + 1
        elif c == b"[":
            j, n = i + 1, 0
            if text[j : j + 1] != b"]":
                while True:
                    j = value(j, path + (n,))
                    n += 1
                    if text[j : j + 1] == b",":
                        j += 1
                        continue
                    break
            end = j + 1
        elif c == b'"':
            end = _string_end(text, i)
        else:
            end = i
            while end < len(text) and text[end : end + 1] not in b",]}":
                end += 1
        values.append((path, i, end))
        return end

    value(0, ())
    values.sort(key=lambda v: (v[1], -v[2]))
    return values, objects


# --- lawful ledgers -----------------------------------------------------------------------------------

UNICODE = "é ✓ Zoë \U0001f600 \U00010348 \u2028\u2029 \x7f"
ESCAPED = 'q"uote\\ back\\slash \x00\x01\x08\x0b\x0c\x1f\x7f \n\r\t\b\f /'


def build_plain_mixed(path: Path, segment_bytes: int | None = None) -> None:
    """tests/support.build_mixed_ledger with an integer for its one float (the fast path leaves
    floats to the reference), in segments of `segment_bytes`, and a wire left pending."""
    g, _clock = build_mixed_ledger(path, item=25, segment_bytes=segment_bytes)
    w = g.propose("wire", {"amount": 5000, "to": "DE00 1234"}, proposer="agent", run="r4")
    g.approve(w.request, approver="sup-1", digest=w.args_digest)
    g.approve(w.request, approver="alice", digest=w.args_digest)  # pending: the sups quorum needs two
    g.propose("small_change", {"id": 6}, proposer="agent", run="r4")  # left pending
    g.close()


RICH_ARGS = {
    "": "",
    "amount": 999999999999999999,
    "neg": -999999999999999999,
    "zero": 0,
    "note": UNICODE,
    "esc": ESCAPED,
    "list": [1, -2, [], {}, [[[]]], None, True, False, "", {"k": [0]}],
    "obj": {"b": {}, "a": [], "ä": 1, "z\U0001f600": 2, "\x7f": 3, "\u2028": 4, "A": 5, "a b": 6},
    "t": True,
    "f": False,
    "n": None,
}


def build_forged(path: Path, segment_bytes: int | None = 1500) -> None:
    """Every kind of event but `recovered`, `redacted` and `roster`, all lawful, with idempotency
    keys, unicode and escapes in body strings, two quorums, an edit, an 18-digit rule line, varied
    arguments and context, two `policy` events (a reload), in segments of `segment_bytes`."""
    with Forge(path, segment_bytes=segment_bytes) as f:
        r1, d1 = f.propose("read/thing", RICH_ARGS, effect="allow", context={"cwd": "/srv", "user": {"name": "Zoë"}, "n": [1, 2]},
                           call_id="toolu_01 \U0001f600", rules=(("allow-read ✓", 999999999999999999),), reasons=(UNICODE, ESCAPED))
        f.append(ev.ExecutionStarted(request=r1, args_digest=d1, executor="worker-1", key="start/1"))
        f.executed(r1, d1)
        f.propose("drop", {"id": 2}, effect="deny", run=None, reasons=())
        r3, d3 = f.ask(quorum=2, approvers=["sup-1", "sup-2"], decisions=["approve", "reject"], timeout_message="too late \u2028 " + ESCAPED)
        f.append(ev.Approved(request=r3, approver="sup-1", args_digest=d3, comment=ESCAPED, key="r3/approved/sup-1"))
        f.approve(r3, "sup-2", d3, comment=UNICODE)
        f.start(r3, d3)
        f.executed(r3, d3, outcome="error", error='ZeroDivisionError: "division" by zero\n')
        r4, d4 = f.ask("wire", {"amount": 5000, "to": "DE00"}, quorum=2, approvers=["sup-1", "sup-2", "sup-3"])
        e4, d4b = f.edit(r4, "sup-1", {"amount": 4000, "to": "DE00", "memo": UNICODE}, d4, reason="less")
        f.append(ev.Approved(request=r4, approver="sup-3", args_digest=d4b, comment=None, key="k" * 256))
        f.append(ev.ExecutionStarted(request=r4, args_digest=d4b, executor=None, key="\U0001f600" * 256))
        f.executed(r4, d4b)
        r5, _ = f.ask()
        f.reject(r5, "x", reason=UNICODE)
        r6, _ = f.ask(decisions=["respond", "approve"])
        f.respond(r6, "sup-3", message=ESCAPED)
        r7, _ = f.ask()
        f.clock.advance(25 * 3600)
        f.expire(r7, message=None)
        r8, _ = f.ask()
        f.cancel(r8, by="agent", reason=None)
        r9, d9 = f.propose("two-quorums", {"x": [1, {"y": None}]})
        both = Requirements(
            quorums=(Quorum(1, ("sup-1", "sup-2"), group="sups"), Quorum(1, ("alice",), group=None)),
            decisions=("approve", "edit", "reject", "respond"),
            timeout_seconds=4 * 3600,
            timeout_message=None,
        )
        f.interrupt(r9, both)
        f.approve(r9, "sup-1", d9)
        f.approve(r9, "alice", d9)  # approved, not yet executed
        f.propose("never-interrupted", {})  # an ask with no interrupt recorded: a warning
        r11, d11 = f.ask("pending", {"q": ESCAPED})
        f.approve(r11, "sup-1", d11)  # approved
        r12, _ = f.ask("pending", {"q": 1}, quorum=3)
        f.append(ev.Cancelled(request=r12, by="ops \U0001f600", reason=ESCAPED, key=ESCAPED))
        r13, d13 = f.ask("left-pending", {"p": UNICODE}, quorum=2)
        f.approve(r13, "sup-1", d13)  # pending: one of two
        f.append(ev.PolicyLoaded(name="refunds " + UNICODE, digest="ab" * 32, by="ops \U0001f600", source=None))
        f.append(ev.PolicyLoaded(name=ESCAPED, digest="0" * 64, by="x", source="/etc/countersign/" + ESCAPED, key="policy/2"))


def no_sync():
    """Build test ledgers without waiting for the disk (durability is not under test here)."""
    import ledger.store.log

    return mock.patch.object(ledger.store.log, "_sync", lambda fd: None)


def no_redactions(rng, workflow, now, next_seq, stored=None):
    """ledger_factory._random_event without its redactions (the fast path declines those)."""
    return _random_event(rng, workflow, now, next_seq, None)


_random_event = factory._random_event


def build_random(path: Path, seed: int, steps: int, segment_bytes: int | None, redactions: bool = False) -> None:
    rng = random.Random(seed)
    if redactions:
        factory.random_history(path, rng, steps=steps, unlawful_end=False, segment_bytes=segment_bytes)
        return
    with mock.patch.object(factory, "_random_event", no_redactions):
        factory.random_history(path, rng, steps=steps, unlawful_end=False, segment_bytes=segment_bytes)


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, Path]:
    """Lawful ledgers of several segments that the fast path must accept; the tamper tests
    start from them."""
    root = tmp_path_factory.mktemp("native-bases")
    out = {"gate": root / "gate", "forged": root / "forged", "random": root / "random"}
    with no_sync():
        build_plain_mixed(out["gate"], segment_bytes=2500)
        build_forged(out["forged"])
        build_random(out["random"], seed=7, steps=45, segment_bytes=1800)
    for path in out.values():
        assert len(list_segments(path)) >= 3, path
    return out


class Scratch:
    """One ledger directory shown many variants: `show(segments)` makes its segment files those,
    writing only the files whose bytes differ from what is there."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, bytes] = {}

    def show(self, segments: Segments) -> Path:
        wanted = {name: b"".join(lines) for name, lines in segments}
        for name in list(self.files):
            if name not in wanted:
                (self.path / name).unlink()
                del self.files[name]
        for name, content in wanted.items():
            if self.files.get(name) != content:
                if name in self.files:  # a new file: truncating one in place can cost a flush (ext4)
                    (self.path / name).unlink()
                (self.path / name).write_bytes(content)
                self.files[name] = content
        return self.path


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Scratch:
    return Scratch(tmp_path_factory.mktemp("native-scratch") / "ledger")


def sample(groups: list[list], k: int, rng: random.Random) -> list:
    """Up to `k` items of each group (all of them with COUNTERSIGN_NATIVE_EXHAUSTIVE=1)."""
    if EXHAUSTIVE:
        return [item for group in groups for item in group]
    return [item for group in groups for item in (group if len(group) <= k else rng.sample(group, k))]


# --- 1. completeness and equality on lawful ledgers ------------------------------------------------------


@pytest.mark.parametrize("name", ["gate", "forged", "random"])
def test_the_lawful_bases_are_accepted_with_the_reference_report(bases, name):
    ref = assert_accepted(bases[name], what=name)
    assert ref.statuses and ref.count > 20


def test_the_forged_base_has_its_warning_and_every_status(bases):
    ref = assert_accepted(bases["forged"])
    assert any("is an ask with no interrupt recorded" in w for w in ref.warnings)
    assert {"executed", "denied", "rejected", "responded", "expired", "cancelled", "approved", "interrupting", "pending"} <= set(ref.statuses)


def test_the_mixed_ledger_of_support_is_judged_as_the_reference_does(tmp_path):
    g, _ = build_mixed_ledger(tmp_path / "l")
    g.close()
    judge(tmp_path / "l")  # it holds a float (2.5): the fast path may leave it to the reference
    build_plain_mixed(tmp_path / "plain")
    assert_accepted(tmp_path / "plain")


def test_a_ledger_of_only_its_genesis_and_one_segment_per_event(tmp_path):
    with Ledger(tmp_path / "g"):
        pass
    ref = assert_accepted(tmp_path / "g")
    assert ref.count == 1 and ref.statuses == {}
    build_plain_mixed(tmp_path / "tiny", segment_bytes=1)  # every commit its own segment
    assert len(list_segments(tmp_path / "tiny")) > 10
    assert_accepted(tmp_path / "tiny")


def test_the_sample_trace_simulated_through_the_retail_policy(tmp_path):
    """The shape of a real ledger: the sample calls through samples/retail.policy with the
    scripted reviewers (approvals, edits, rejections, responses, timeouts, pending requests)."""
    from dsl import Policy
    from ledger.workflow.simulate import read_calls, read_reviewers, simulate

    samples = Path(__file__).resolve().parent.parent / "samples"
    simulate(Policy.load(samples / "retail.policy"), read_calls(samples / "demo-calls.jsonl"), tmp_path / "l",
             reviewers=read_reviewers(samples / "demo-reviewer.json"))
    ref = assert_accepted(tmp_path / "l")
    assert ref.count > 24 and len(ref.statuses) >= 4


@pytest.mark.parametrize("seed", range(12))
def test_random_lawful_histories_are_accepted(tmp_path, seed):
    steps = [5, 20, 60, 150][seed % 4]
    segment_bytes = [None, 600, 1500, 4000][seed // 3 % 4]
    with no_sync():
        build_random(tmp_path / "l", seed, steps, segment_bytes)
    assert_accepted(tmp_path / "l", what=(seed, steps, segment_bytes))


def test_random_histories_that_end_unlawfully_are_declined(tmp_path):
    """The last event of each breaks a workflow rule (ledger_factory.random_history picks one
    of every kind it can: a decision by the proposer or twice, after the deadline, an execution
    not approved, a stale digest, an unknown or final request, ...)."""
    rules = set()
    with no_sync():
        for seed in range(40 * SCALE):
            path = tmp_path / f"l{seed}"
            rng = random.Random(seed)
            with mock.patch.object(factory, "_random_event", no_redactions):
                factory.random_history(path, rng, steps=rng.randint(3, 60), unlawful_end=True, segment_bytes=rng.choice([None, 900]))
            fast, ref = judge(path, what=seed)
            if not ref.ok:
                rules.add(ref.problem.code)
    assert len(rules) >= 8, rules


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_with_redactions_are_declined_or_equal(tmp_path, seed):
    build_random(tmp_path / "l", seed, 60, 1500, redactions=True)
    ref = reference(tmp_path / "l")
    assert ref.ok
    if ref.redactions:
        assert_declined(tmp_path / "l")
    else:
        assert_accepted(tmp_path / "l")


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1000, 4096])
def test_lines_cut_anywhere_by_the_read_chunks(bases, monkeypatch, chunk):
    """The wrapper feeds each segment in chunks and carries a cut line to the next one; every
    cut must give the same Report."""
    monkeypatch.setattr(fast_path, "CHUNK_BYTES", chunk)
    for name in ("gate", "forged"):
        assert_accepted(bases[name], what=(name, chunk))
    heads = [line_hash(line) for _, line in flat(snapshot(bases["forged"]))]
    assert_accepted(bases["forged"], heads[len(heads) // 2], what=chunk)


@pytest.mark.parametrize(
    "expect",
    ["\udcff", "\udcff" * 64, "\u00e9" * 32, "x" * 64, "\U0001f600" * 16, "0" * 65, " " * 64],
    ids=["lone-surrogate", "64-surrogates", "64-utf8-bytes", "64-x", "16-astral", "65-zeros", "64-spaces"],
)
def test_odd_expected_heads_are_declined_never_raised(bases, expect):
    """An expected head that is no hash (a lone surrogate comes from a command line read with
    surrogateescape) is not in the ledger: the fast path declines; it never raises."""
    ref = assert_declined(bases["forged"], expect, what=repr(expect))
    assert ref.problem.kind == "head"


def test_expected_heads(bases, tmp_path):
    for name, path in bases.items():
        hashes = [line_hash(line) for _, line in flat(snapshot(path))]
        for seq in (1, 2, len(hashes) // 2, len(hashes) - 1, len(hashes)):
            ref = assert_accepted(path, hashes[seq - 1], what=(name, seq))
            follows = len(hashes) - seq
            assert (f"the expected head is seq {seq}; {follows} events follow it" in ref.warnings) == (follows > 0)
        for absent in ("0" * 64, "f" * 64, hashes[-1].upper(), hashes[-1][:63] + "x", hashes[-1][:32], ""):
            ref = assert_declined(path, absent, what=(name, absent))
            assert ref.problem.kind == "head"
    # a head that was the last one before the ledger was cut
    copy = materialize(tmp_path / "cut", snapshot(bases["forged"]))
    segments = snapshot(copy)
    head = line_hash(segments[-1][1][-1])
    segments[-1][1].pop()
    materialize(copy, segments)
    assert assert_declined(copy, head).problem.kind == "head"


# Arguments and context the fast path reads itself: no floats, no escaped keys, shallow, integers
# of at most 18 digits; strings of any characters (controls, quotes, astral ones), empty ones too.
plain_keys = st.text(st.characters(min_codepoint=0x20, exclude_characters='"\\', exclude_categories=("Cs",)), max_size=6)
plain_scalars = st.none() | st.booleans() | st.integers(-(10**18) + 1, 10**18 - 1) | st.text(max_size=10)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_keys, inner, max_size=4),
    max_leaves=14,
)
plain_objects = st.dictionaries(plain_keys, plain_values, max_size=5)
body_text = st.text(max_size=12)


@settings(HYPOTHESIS, max_examples=50 * SCALE)
@given(
    calls=st.lists(st.tuples(plain_objects, plain_objects, plain_objects), min_size=1, max_size=4),
    strings=st.lists(body_text, min_size=6, max_size=6),
    segment_bytes=st.sampled_from([None, 400, 1200]),
)
def test_forged_ledgers_with_varied_arguments_are_accepted(tmp_path_factory, calls, strings, segment_bytes):
    tool, proposer, approver, comment, reason, run = strings
    approver = approver if approver != proposer else proposer + "x"
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as tmp:
        path = Path(tmp) / "l"
        with no_sync(), Forge(path, segment_bytes=segment_bytes) as f:
            for i, (args, context, edited) in enumerate(calls):
                if i % 2:
                    r, d = f.propose(tool, args, proposer=proposer, effect="allow", run=run or None, context=context, reasons=(reason,))
                else:
                    r, d = f.propose(tool, args, proposer=proposer, effect="ask", run=run, context=context, call_id=comment)
                    f.interrupt(r, quorum=1, approvers=None, timeout_message=reason)
                    if edited != args:
                        _, d = f.edit(r, approver, edited, d, reason=reason)
                    else:
                        f.approve(r, approver, d, comment=comment)
                f.start(r, d, executor=comment or None)
                f.executed(r, d, outcome="error", error=reason)
        assert_accepted(path, what=calls)


def nested(depth: int) -> dict:
    """Arguments `depth` levels deep (the arguments object is one level; each list or object in
    it one more: `{"a": [1]}` is two)."""
    value: object = 1
    for i in range(depth - 1):
        value = [value] if i % 2 else {"k": value}
    return value if isinstance(value, dict) else {"v": value}


def deep_proposal(path: Path, depth: int) -> None:
    """A ledger whose one allowed proposal has arguments and context `depth` levels deep (the
    data written as bytes: a writer refuses more than 100 levels counted from the data object)."""
    args = nested(depth)
    digest = value_digest(args)
    data_bytes = b'{"args":' + canonical_spelling(args) + b',"context":' + canonical_spelling(args) + b"}"
    with Forge(path) as f:
        r = f.append(
            ev.Proposed(run=None, proposer="agent", call_id=None, tool="t", args_digest=digest, context_digest=digest, policy="p",
                        policy_digest="f" * 64, effect="allow", rules=(), reasons=()),
            data_bytes,
        )
        f.start(r, digest)


@pytest.mark.parametrize("depth", [1, 2, 3, 30, 62])
def test_nesting_well_within_the_fast_paths_limit_is_accepted(tmp_path, depth):
    deep_proposal(tmp_path / "l", depth)
    assert_accepted(tmp_path / "l", what=depth)


@pytest.mark.parametrize("depth", [63, 64, 65, 66, 99, 100, 101, 150])
def test_deeper_nesting_is_declined_or_equal(tmp_path, depth):
    deep_proposal(tmp_path / "l", depth)
    judge(tmp_path / "l", what=depth)


@pytest.mark.parametrize("digits", [18, 19, 20, 40, 300, 301, 1000, 4299])
def test_long_integers_in_the_arguments(tmp_path, digits):
    n = int("9" * digits)
    with Forge(tmp_path / "l") as f:
        r, d = f.propose(args={"n": n, "m": -n, "l": [n, -n]}, effect="allow")
        f.start(r, d)
    if digits <= 18:
        assert_accepted(tmp_path / "l")
    else:
        judge(tmp_path / "l", what=digits)


def test_the_longest_integers_a_reader_reads_back(tmp_path):
    """4,300 characters, sign included (msgspec reads no more): a positive 4,300-digit integer
    is written and verifies; a negative one is refused by the writer, which wrote it before
    although no reader could read it back."""
    n = int("9" * 4300)
    with Forge(tmp_path / "l") as f:
        r, d = f.propose(args={"n": n}, effect="allow")
        f.start(r, d)
        with pytest.raises(ArgumentsError, match="4,300 characters"):
            f.propose(args={"m": -n}, effect="allow")
    fast, reference = judge(tmp_path / "l", what="4300 digits")
    assert reference.ok


@pytest.mark.parametrize("line", [10**17, 10**18 - 1, 10**18, 10**19, 2**63 - 1, 2**63, 2**64, 10**30])
def test_long_integers_in_a_body(tmp_path, line):
    with Forge(tmp_path / "l") as f:
        f.propose(effect="deny", rules=(("r", line),))
    if len(str(line)) <= 18:
        assert_accepted(tmp_path / "l")
    else:
        judge(tmp_path / "l", what=line)


def test_files_that_are_not_segments_are_ignored(bases, tmp_path):
    path = materialize(tmp_path / "l", snapshot(bases["forged"]))
    for name in ("events-000000002.jsonl", ".events-00000099.jsonl.tmp", "LOCK", "WRITERS", "events-00000001.jsonl.bak", "notes"):
        (path / name).write_bytes(b"garbage\n")
    (path / "quarantine").mkdir()
    (path / "quarantine" / "events-00000001.jsonl.12.torn").write_bytes(b'{"body":')
    assert_accepted(path)


def test_an_empty_last_segment_is_no_problem(bases, tmp_path):
    segments = snapshot(bases["forged"])
    path = materialize(tmp_path / "l", segments + [(f"events-{len(segments) + 1:08d}.jsonl", [])])
    judge(path)
    assert reference(path).ok


def test_lines_moved_across_a_segment_boundary_are_the_same_ledger(bases, tmp_path):
    segments = snapshot(bases["gate"])
    moved = [(segments[0][0], segments[0][1][:-2]), (segments[1][0], segments[0][1][-2:] + segments[1][1])] + segments[2:]
    assert_accepted(materialize(tmp_path / "l", moved))
    one = [(segments[0][0], [line for _, lines in segments for line in lines])]
    ref = assert_accepted(materialize(tmp_path / "one", one))
    assert ref == msgspec.structs.replace(reference(bases["gate"]), path=str(tmp_path / "one"))


# --- 2. what the fast path leaves to the reference ---------------------------------------------------


@pytest.mark.parametrize(
    "args, context",
    [
        ({"x": 1.5}, {}),
        ({"x": 1e22}, {}),
        ({"x": [0.1, -2.5e-07]}, {}),
        ({"x": 1}, {"load": 0.75}),
        ({"x": -0.0}, {}),
        ({"x": 2.0}, {}),
        ({'a"b': 1}, {}),
        ({"a\\b": 1}, {}),
        ({"a\nb": 1}, {}),
        ({"\x00": 1}, {}),
        ({"o": {"k\x1f": 1}}, {}),
        ({"x": 1}, {"c\tc": 1}),
        ({"x": [{"\x7f": 1, '"': 2}]}, {}),
    ],
    ids=repr,
)
def test_floats_and_escaped_keys_are_declined_or_equal(tmp_path, args, context):
    with Forge(tmp_path / "l") as f:
        r, d = f.ask(args=args, quorum=2)
        f.approve(r, "sup-1", d)
        f.propose("t", {"x": 1}, context=context, effect="deny")
        f.edit(r, "sup-2", args, d)
    judge(tmp_path / "l", what=(args, context))
    assert reference(tmp_path / "l").ok


@pytest.mark.parametrize(
    "tail",
    [b"{", b'{"body":{"kind":"approved"', b"\xff\xfe", b" ", b"null", b"{}", b'{"body":{},"hash":"' + b"0" * 64 + b'","data":null}'],
)
def test_a_torn_tail_is_declined(bases, tmp_path, tail):
    segments = snapshot(bases["forged"])
    segments[-1][1].append(tail)
    path = materialize(tmp_path / "l", segments)
    ref = assert_declined(path)
    assert ref.ok and any("torn line" in w for w in ref.warnings)


def test_a_last_line_without_its_line_feed_is_declined(bases, tmp_path):
    segments = snapshot(bases["forged"])
    segments[-1][1][-1] = segments[-1][1][-1].rstrip(b"\n")
    ref = assert_declined(materialize(tmp_path / "l", segments))
    assert ref.ok and any("lacks its line feed" in w for w in ref.warnings)
    # the same cut at the end of an earlier segment is corruption
    segments = snapshot(bases["forged"])
    segments[0][1][-1] = segments[0][1][-1].rstrip(b"\n")
    assert not assert_declined(materialize(tmp_path / "m", segments)).ok


def test_recovered_events_are_declined(bases, tmp_path):
    with Forge(tmp_path / "forged") as f:
        f.recovered()
    assert_declined(tmp_path / "forged")
    # a real recovery: a torn tail that the next writer quarantines
    path = materialize(tmp_path / "real", snapshot(bases["forged"]))
    with (path / list_segments(path)[-1].name).open("ab") as handle:
        handle.write(b'{"body":{"kind":"approved","seq":')
    Ledger(path).close()
    ref = assert_declined(path)
    assert ref.ok and any("moved a torn last line of" in w and "unfinished write" in w for w in ref.warnings)


def test_redacted_events_are_declined(tmp_path):
    from ledger.proof.redact import redact

    build_plain_mixed(tmp_path / "l")
    assert_accepted(tmp_path / "l")
    rows = [line for _, lines in read_lines(tmp_path / "l") for line in lines]
    target = next(i + 1 for i, line in enumerate(rows) if b'"tool":"small_change"' in line and b'"note"' in line)
    redact(tmp_path / "l", target, "args.note", reason="GDPR art. 17", by="dpo")
    ref = assert_declined(tmp_path / "l")
    assert ref.ok and ref.redactions
    # announced but not yet rewritten (a crash between the two steps)
    with Forge(tmp_path / "f") as f:
        r, d = f.propose(effect="deny")
        f.redacted(r, "args.amount", 10)
    ref = assert_declined(tmp_path / "f")
    assert ref.ok and ref.redactions


def test_a_missing_or_unreadable_ledger_is_declined(bases, tmp_path):
    assert fast_path.verify_fast(tmp_path / "nothing") is None
    (tmp_path / "empty").mkdir()
    assert fast_path.verify_fast(tmp_path / "empty") is None
    assert not reference(tmp_path / "empty").ok
    path = materialize(tmp_path / "l", snapshot(bases["forged"]))
    (path / "events-00000002.jsonl").unlink()
    assert_declined(path)  # a gap in the segment numbers
    (path / "events-00000002.jsonl").mkdir()
    assert_declined(path)  # a segment name that is not a regular file
    (path / "events-00000002.jsonl").rmdir()
    (path / "events-00000002.jsonl").symlink_to(tmp_path / "dangling")
    assert_declined(path)
    (path / "events-00000001.jsonl").write_bytes(b"")
    judge(path)


# --- 3. soundness against tampering ---------------------------------------------------------------


INSERTS = [b" ", b"\\", b'"', b"\xff", b"\n", b"0", b"-", b"{", b"}", b",", b":", b"\x00", b"\t", b"e", b".", b"\xc3", b"\xed\xa0\x80"]


def raw_mutation(segments: Segments, rng: random.Random) -> tuple[str, Segments]:
    """One random edit of the bytes: a flipped bit, a deleted, inserted or replaced byte."""
    sizes = [sum(len(line) for line in lines) for _, lines in segments]
    k = rng.choices(range(len(segments)), weights=[s + 1 for s in sizes])[0]
    blob = bytearray(b"".join(segments[k][1]))
    if not blob:
        return "nothing", segments
    at = rng.randrange(len(blob))
    op = rng.choice(["flip", "flip", "delete", "insert", "insert", "replace"])
    if op == "flip":
        blob[at] ^= 1 << rng.randrange(8)
    elif op == "delete":
        del blob[at]
    elif op == "insert":
        blob[at:at] = rng.choice(INSERTS)
    else:
        blob[at : at + 1] = rng.choice(INSERTS)
    out = list(segments)
    out[k] = (segments[k][0], bytes(blob).splitlines(keepends=True))
    return f"{op} at byte {at} of {segments[k][0]}", out


def line_mutation(segments: Segments, rng: random.Random) -> tuple[str, Segments]:
    """A line duplicated, removed, swapped with another or moved, with or without the chain
    recomputed after it."""
    placed = flat(segments)
    n = len(placed)
    i = rng.randrange(n)
    j = rng.randrange(n)
    op = rng.choice(["duplicate", "remove", "swap", "move"])
    if op == "duplicate":
        placed.insert(i + 1, placed[i])
    elif op == "remove":
        del placed[i]
    elif op == "swap":
        placed[i], placed[j] = (placed[i][0], placed[j][1]), (placed[j][0], placed[i][1])
    else:
        line = placed.pop(i)[1]
        placed.insert(min(j, len(placed)), (placed[min(j, len(placed) - 1)][0] if placed else 0, line))
    label = f"{op} line {i + 1} (and {j + 1})"
    if placed and rng.random() < 0.5:
        start = max(1, min(i, j))
        try:
            lines = rechain([line for _, line in placed], start)
        except Exception:  # a genesis moved past the start cannot be re-encoded; keep the raw edit
            lines = None
        if lines is not None:
            placed = [(placed[x][0], line) for x, line in enumerate(lines)]
            label += ", re-chained"
    return label, regroup(segments, placed)


@pytest.mark.parametrize("name", ["gate", "forged", "random"])
def test_random_byte_and_line_edits_are_never_accepted_wrongly(bases, scratch, name):
    original = snapshot(bases[name])
    head = line_hash(original[-1][1][-1])
    rng = random.Random(f"bytes-{name}")
    rejected = 0
    for round in range(300 * SCALE):
        mutate = raw_mutation if round % 3 else line_mutation
        label, segments = mutate(original, rng)
        path = scratch.show(segments)
        fast, ref = judge(path, head if round % 5 == 0 else None, what=(name, round, label))
        rejected += not ref.ok
    assert rejected > 160 * SCALE  # the edits do break ledgers


# Body edits. Every one is re-hashed and re-chained: the chain is intact and only the body's
# content, layout or law is wrong (or, for a few, nothing is: the property holds either way).

INT_SPELLINGS = [
    lambda n: b"0" + n, lambda n: b"-0", lambda n: n + b".0", lambda n: n + b"e0", lambda n: n + b"E0", lambda n: b"+" + n,
    lambda n: b"-" + n, lambda n: b"1" + b"0" * 19, lambda n: b"9" * 40, lambda n: b"0", lambda n: b"1", lambda n: b"2",
    lambda n: str(int(n) + 1).encode(), lambda n: str(int(n) - 1).encode(), lambda n: b'"' + n + b'"', lambda n: b"18446744073709551617",
    lambda n: b"-9223372036854775809", lambda n: b"9223372036854775807", lambda n: b"1e400", lambda n: b"0x1",
]

VALUE_REPLACEMENTS = [b"null", b"true", b"false", b"[]", b"{}", b'""', b"0", b'"x"', b"[null]", b'{"a":1}', b'"\\u0000"', b"nul", b""]


def string_variants(s: bytes) -> list[bytes]:
    """Other spellings and other contents of a JSON string `s` (with its quotes)."""
    inner = s[1:-1]
    out = [b'"' + inner + b'x"', b'"' + inner[:-1] + b'"', b'"' + inner + b'\\u0000"', b'"' + inner + b'\x01"', b'"' + inner + b' "']
    out += [b'"' + inner + bad + b'"' for bad in (b"\xc0\x80", b"\xe0\x80\x80", b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xed\xa0\x80",
                                                  b"\xf5\x80\x80\x80", b"\xff", b"\xc3", b"\x80", b"\\ud800", b"\\udc00x", b"\\ud83d\\ude00")]
    letter = re.search(rb"[A-Za-z]", inner)
    if letter:
        c = letter.group()
        at = letter.start()
        out.append(b'"' + inner[:at] + b"\\u%04x" % ord(c) + inner[at + 1 :] + b'"')
        out.append(b'"' + inner[:at] + b"\\u%04X" % ord(c) + inner[at + 1 :] + b'"')
        out.append(b'"' + inner[:at] + c.swapcase() + inner[at + 1 :] + b'"')
    if b"/" in inner:
        out.append(b'"' + inner.replace(b"/", b"\\/", 1) + b'"')
    for short, long in ((b"\\n", b"\\u000a"), (b"\\t", b"\\u0009"), (b"\\u001f", b"\\u001F"), (b"\\u0000", b"\\u0000\\u0000"), (b'\\"', b"\\u0022"), (b"\\\\", b"\\u005c")):
        if short in inner:
            out.append(b'"' + inner.replace(short, long, 1) + b'"')
    if b"\xc3\xa9" in inner:
        out.append(b'"' + inner.replace(b"\xc3\xa9", b"\\u00e9", 1) + b'"')
    if b"\x7f" in inner:
        out.append(b'"' + inner.replace(b"\x7f", b"\\u007f", 1) + b'"')
    if b"\xe2\x80\xa8" in inner:
        out.append(b'"' + inner.replace(b"\xe2\x80\xa8", b"\\u2028", 1) + b'"')
    if b"\xf0\x9f\x98\x80" in inner:
        out.append(b'"' + inner.replace(b"\xf0\x9f\x98\x80", b"\\ud83d\\ude00", 1) + b'"')
        out.append(b'"' + inner.replace(b"\xf0\x9f\x98\x80", b"\xed\xa0\xbd\xed\xb8\x80", 1) + b'"')  # CESU-8
    return out


def body_variants(text: bytes) -> list[list[tuple[str, bytes]]]:
    """Edits of a JSON text (a body, or DATA): every value respelled, replaced, and every
    object's members reordered, repeated, removed, spaced; one group per value and per object."""
    values, objects = json_spans(text)
    groups: list[list[tuple[str, bytes]]] = []
    for path, start, end in values:
        old = text[start:end]
        where = ".".join(map(str, path)) or "(all)"
        out: list[tuple[str, bytes]] = []
        groups.append(out)

        def put(new: bytes, label: str) -> None:
            if new != old:
                out.append((f"{where}: {label} {new[:40]!r}", text[:start] + new + text[end:]))

        if re.fullmatch(rb"-?[0-9]+", old):
            for spell in INT_SPELLINGS:
                put(spell(old), "int")
        elif old.startswith(b'"'):
            for new in string_variants(old):
                put(new, "string")
        for new in VALUE_REPLACEMENTS:
            put(new, "value")
        put(b" " + old, "space before")
        put(old + b" ", "space after")
    for path, members in objects:
        where = ".".join(map(str, path)) or "(top)"
        out = []
        groups.append(out)
        for m, (start, end) in enumerate(members):
            member = text[start:end]
            out.append((f"{where}: member {m} repeated", text[:end] + b"," + member + text[end:]))
            drop = text[:start] + text[end + 1 :] if m + 1 < len(members) else text[: start - (1 if m else 0)] + text[end:]
            out.append((f"{where}: member {m} removed", drop))
            if m + 1 < len(members):
                s2, e2 = members[m + 1]
                out.append((f"{where}: members {m} and {m + 1} swapped", text[:start] + text[s2:e2] + b"," + member + text[e2:]))
            colon = text.index(b":", _string_end(text, start))
            out.append((f"{where}: space after the colon of member {m}", text[: colon + 1] + b" " + text[colon + 1 :]))
        if members:
            out.append((f"{where}: an extra member", text[: members[-1][1]] + b',"extra":1' + text[members[-1][1] :]))
            out.append((f"{where}: an extra member first", text[: members[0][0]] + b'"extra":null,' + text[members[0][0] :]))
    return groups


KINDS = [k.encode() for k in ev.KINDS] + [b"Approved", b"unknown", b""]


def representative_lines(lines: list[bytes]) -> list[int]:
    """The index of the first and last line of each kind, and every genesis."""
    seen: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        kind = ev.decode_event(body(line)).__struct_config__.tag
        seen.setdefault(kind, []).append(i)
    return sorted({i for indexes in seen.values() for i in (indexes[0], indexes[-1])})


@pytest.mark.parametrize("name", ["forged", "gate"])
def test_the_catalogue_of_body_edits_re_chained(bases, scratch, name):
    """Values of one line of each kind respelled ("07", "-0", 1.0, a huge integer, an escaped
    letter, "\\/", uppercase hex, invalid UTF-8), replaced (null, true, [], {}), members
    repeated, removed, swapped or spaced, the kind changed; the hash and the chain recomputed."""
    template = snapshot(bases[name])
    lines = [line for _, line in flat(template)]
    rng = random.Random(f"body-{name}")
    tried = 0
    for index in representative_lines(lines):
        text = body(lines[index])
        groups = body_variants(text)
        old_kind = text[len(b'{"kind":"') : text.index(b'"', len(b'{"kind":"'))]
        groups.append([(f"kind {k!r}", text.replace(b'"kind":"' + old_kind + b'"', b'"kind":"' + k + b'"', 1)) for k in KINDS if k != old_kind])
        for label, new in sample(groups, 2, rng):
            if b"\n" in new or b',"hash":"' in new:
                continue
            path = scratch.show(with_lines(template, rechained(lines, index, new)))
            judge(path, what=(name, index + 1, label))
            tried += 1
    assert tried > 300


def replaced(line: bytes, **changes) -> bytes:
    """The line's body with some members replaced, encoded as msgspec encodes (canonically)."""
    event = ev.decode_event(body(line))
    return ev.encode_event(msgspec.structs.replace(event, **changes))


BAD_TIMES = [
    "2026-02-30T09:00:00.000000Z", "2026-02-29T09:00:00.000000Z", "2026-13-01T09:00:00.000000Z", "2026-00-10T09:00:00.000000Z",
    "2026-04-31T09:00:00.000000Z", "2026-02-01T24:00:00.000000Z", "2026-02-01T09:60:00.000000Z", "2026-02-01T09:00:60.000000Z",
    "0000-01-01T00:00:00.000000Z", "2026-02-01T09:00:00Z", "2026-02-01T09:00:00.000000", "2026-02-01 09:00:00.000000Z",
    "2026-02-01T09:00:00.000000z", "2026-02-01T09:00:00.0000000Z", "2026-02-01T09:00:00.000000+00:00", "",
    "\uff12\uff10\uff12\uff16-02-01T09:00:00.000000Z", "\u0662\u0660\u0662\u0666-02-01T09:00:00.000000Z", "2026-02-01T09:00:00.00000\u0660Z",
]
GOOD_EDGE_TIMES = ["0001-01-01T00:00:00.000000Z", "2024-02-29T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z", "2099-01-01T00:00:00.000000Z"]


def semantic_variants(lines: list[bytes], index: int) -> list[tuple[str, bytes]]:
    """Canonically encoded events that differ from line `index` in one member: times (invalid
    dates, backwards, far ahead), keys (0, 256, 257 characters), requests, people, effects,
    digests, requirements."""
    line = lines[index]
    event = ev.decode_event(body(line))
    kind = event.__struct_config__.tag
    proposals = {i + 1: ev.decode_event(body(l)) for i, l in enumerate(lines) if b'"kind":"proposed"' in l[:30]}
    out: list[tuple[str, bytes]] = []

    def put(label: str, **changes) -> None:
        out.append((f"{kind} {label}", replaced(line, **changes)))

    for t in BAD_TIMES + GOOD_EDGE_TIMES:
        put(f"ts {t!r}", ts=t)
    if index:
        before = ev.decode_event(body(lines[index - 1])).ts
        put("ts one microsecond before the previous one", ts=format_ts(parse_ts(before) - timedelta(microseconds=1)))
        put("ts of the previous one", ts=before)
    for key in ["", "k" * 256, "k" * 257, "\U0001f600" * 257, "\U0001f600" * 256, "\x00", '"', "\u2028", msgspec.UNSET, "x"]:
        put(f"key of {len(key) if isinstance(key, str) else 'none'}", key=key)
    put("seq 0", seq=0)
    put("seq -1", seq=-1)
    put("prev of zeros", prev="0" * 64)
    if hasattr(event, "request"):
        for request in {0, -1, 1, event.request - 1, event.request + 1, index + 1, index + 2, 10**18 - 1, *proposals}:
            put(f"request {request}", request=request)
    for who in ("approver", "editor", "by", "proposer", "executor"):
        if hasattr(event, who):
            for name in ("agent", "sup-1", "sup-2", "sup-3", "alice", "x", "", "Agent", "agent ", None):
                put(f"{who} {name!r}", **{who: name})
    if hasattr(event, "effect"):
        for effect in ("allow", "deny", "ask", "maybe", "ALLOW", ""):
            put(f"effect {effect}", effect=effect)
    if hasattr(event, "outcome"):
        for outcome in ("ok", "error", "reject", "maybe", ""):
            put(f"outcome {outcome}", outcome=outcome)
    for digest in ("args_digest", "context_digest", "replaces", "result_digest", "policy_digest"):
        if hasattr(event, digest):
            for other in ("1" * 64, "F" * 64, "1" * 63, value_digest({}), value_digest({"amount": 10}), None):
                put(f"{digest} {other!r}", **{digest: other})
    if kind == "interrupted":
        for t in BAD_TIMES + [event.ts, "2000-01-01T00:00:00.000000Z", add_seconds(event.ts, 1)]:
            put(f"deadline {t!r}", deadline=t)
        r = event.requirements
        for label, changes in [
            ("no quorum", dict(quorums=())),
            ("count 0", dict(quorums=(Quorum(0),))),
            ("count 5", dict(quorums=(Quorum(5, ("sup-1",)),))),
            ("approvers []", dict(quorums=(Quorum(1, ()),))),
            ("approvers agent", dict(quorums=(Quorum(1, ("agent",)),))),
            ("decisions []", dict(decisions=())),
            ("decisions maybe", dict(decisions=("approve", "maybe"))),
            ("decisions respond", dict(decisions=("respond",))),
            ("timeout 0", dict(timeout_seconds=0)),
            ("timeout 18 digits", dict(timeout_seconds=10**18 - 1)),
            ("on_timeout accept", dict(on_timeout="accept")),
        ]:
            put(f"requirements {label}", requirements=msgspec.structs.replace(r, **changes))
    if kind in ("proposed", "edited"):
        put("rule line -1", rules=(ev.RuleRef(id="r", line=-1),))
        put("rule line 19 digits", rules=(ev.RuleRef(id="r", line=10**18),))
        put("no rules", rules=())
    if kind == "policy":
        for name in ("", None, "p", 5):
            put(f"name {name!r}", name=name)
        for source in ("", None, "/p.policy", 5, ["p"]):
            put(f"source {source!r}", source=source)
        for digest in ("1" * 64, "F" * 64, "1" * 63, "1" * 65, "", None):
            put(f"digest {digest!r}", digest=digest)
    if kind == "genesis":
        put("format 2", format="countersign-ledger/2")
        put("format 1", format="countersign-ledger/1")  # then a `policy` event is unlawful (format-version)
        put("ledger id empty", ledger_id="")
    return out


@pytest.mark.parametrize("name", ["forged", "gate"])
def test_the_catalogue_of_semantic_edits_re_chained(bases, scratch, name):
    """Canonically encoded, re-hashed and re-chained events that break a rule or a format: an
    approver equal to the proposer, a request number of another event, a deadline passed, an
    invalid date, a key of 0 or 257 characters, an effect "maybe", ..."""
    template = snapshot(bases[name])
    lines = [line for _, line in flat(template)]
    rng = random.Random(f"semantic-{name}")
    tried = 0
    for index in representative_lines(lines):
        for label, new in sample([semantic_variants(lines, index)], 28, rng):
            path = scratch.show(with_lines(template, rechained(lines, index, new)))
            judge(path, what=(name, index + 1, label))
            tried += 1
    assert tried > 300


DATA_SPELLINGS = [b" null", b"null ", b"\tnull", b"\rnull", b"nul", b"NULL", b"{}", b"[]", b"0", b'""', b'{"args":{}}', b'{"args":{},"context":{}}', b"null null", b"\xff"]


def deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def data_variants(line: bytes) -> list[list[tuple[str, bytes]]]:
    """Other DATA for the line: respelled, reordered, with whitespace, numbers as 1E1, a value
    changed, `context` missing or extra members; for events without data, data."""
    d = data(line)
    if d == b"null":
        return [[(f"data {new!r}", new) for new in DATA_SPELLINGS if new != d]]
    groups = [[(f"data {label}", new) for label, new in group] for group in body_variants(d)]
    out: list[tuple[str, bytes]] = []
    groups.append(out)
    value = msgspec.json.decode(d)
    args = value["args"]
    if len(args) >= 2:
        out.append(("args keys reversed", b'{"args":' + msgspec.json.encode(dict(reversed(list(args.items())))) + d[len(b'{"args":') + len(msgspec.json.encode(args)) :]))
    out += [
        ("no context", b'{"args":' + msgspec.json.encode(args) + b"}"),
        ("context first", msgspec.json.encode({k: value[k] for k in reversed(list(value))})),
        ("context null", msgspec.json.encode({**value, "context": None})),
        ("context []", msgspec.json.encode({**value, "context": []})),
        ("args []", msgspec.json.encode({**value, "args": []})),
        ("args null", msgspec.json.encode({**value, "args": None})),
        ("an extra member", msgspec.json.encode({**value, "extra": 1})),
        ("a member before args", b'{"a":1,' + d[1:]),
        ("args twice", b'{"args":' + msgspec.json.encode(args) + b"," + d[1:]),
        ("nested deeply", msgspec.json.encode({**value, "args": {**args, "deep": deep(70)}})),
        ("data null", b"null"),
    ]
    for spelled in (b"1E1", b"10.0", b"1e1", b"10e0", b"010", b"1.0e1", b"100e-1"):
        if b":10," in d or b":10}" in d:
            out.append((f"10 spelled {spelled!r}", d.replace(b":10", b":" + spelled, 1)))
    return groups


@pytest.mark.parametrize("name", ["forged", "gate"])
def test_the_catalogue_of_data_edits(bases, scratch, name):
    """DATA is not hashed: an edit there leaves the chain intact. Keys out of order, a repeated
    key, whitespace, 1E1 for 10, a digest that no longer matches, `context` missing or extra,
    data on an event that carries none, ` null` for `null`."""
    template = snapshot(bases[name])
    lines = [line for _, line in flat(template)]
    rng = random.Random(f"data-{name}")
    tried = 0
    for index in representative_lines(lines):
        if lines[index].startswith(b'{"body":{"kind":"policy",'):
            continue  # a pinned policy's data: tests/test_audit.py tampers with it
        groups = data_variants(lines[index])
        for label, new in sample(groups[:-1], 2, rng) + groups[-1]:
            if b"\n" in new:
                continue
            changed = list(lines)
            changed[index] = with_data(lines[index], new)
            judge(scratch.show(with_lines(template, changed)), what=(name, index + 1, label))
            tried += 1
    assert tried > 150


def test_whitespace_around_a_null_data(bases, scratch):
    """` null` beside an event that carries no data: a data problem for the reference (it read
    the JSON value and let the spelling pass until a differential run showed it), and so a
    decline for the fast path."""
    template = snapshot(bases["forged"])
    lines = [line for _, line in flat(template)]
    index = next(i for i, line in enumerate(lines) if data(line) == b"null" and i > 0)
    for spelled in (b" null", b"null ", b"\tnull", b" null\t"):
        changed = list(lines)
        changed[index] = with_data(lines[index], spelled)
        fast, reference = judge(scratch.show(with_lines(template, changed)), what=spelled)
        assert reference.problem is not None and reference.problem.kind == "data", spelled  # section 2: no whitespace


# Each edit the contract names, once, on a line of the forged base: the reference must reject it
# (all but a few, marked) and the fast path decline.


def nth(lines: list[bytes], kind: str, n: int = 0) -> int:
    return [i for i, line in enumerate(lines) if line.startswith(b'{"body":{"kind":"%s"' % kind.encode())][n]


def body_edit(lines: list[bytes], i: int, old: bytes, new: bytes) -> list[bytes]:
    text = body(lines[i])
    assert old in text, (old, text)
    return rechained(lines, i, text.replace(old, new, 1))


def event_edit(lines: list[bytes], i: int, **changes) -> list[bytes]:
    return rechained(lines, i, replaced(lines[i], **changes))


def member_swap(lines: list[bytes], i: int, m: int) -> list[bytes]:
    text = body(lines[i])
    members = dict(json_spans(text)[1])[()]
    (s1, e1), (s2, e2) = members[m], members[m + 1]
    return rechained(lines, i, text[:s1] + text[s2:e2] + b"," + text[s1:e1] + text[e2:])


def member_repeat(lines: list[bytes], i: int, m: int) -> list[bytes]:
    text = body(lines[i])
    start, end = dict(json_spans(text)[1])[()][m]
    return rechained(lines, i, text[:end] + b"," + text[start:end] + text[end:])


def data_edit(lines: list[bytes], i: int, old: bytes | None, new: bytes) -> list[bytes]:
    d = data(lines[i])
    if old is not None:
        assert old in d, (old, d)
    out = list(lines)
    out[i] = with_data(lines[i], d.replace(old, new, 1) if old is not None else new)
    return out


def spelled_digest(text: bytes, sort: bool = True) -> str:
    """The structural digest of JSON `text` read naively: spaces skipped, repeated keys all kept,
    every number hashed as it is spelled (`-0`, `2.0`, `02`, `+2`), and with `sort` False the
    members of objects in the order they are stored. It equals the reference's digest for
    canonical text only."""
    i = 0

    def space() -> None:
        nonlocal i
        while text[i : i + 1] in (b" ", b"\t"):
            i += 1

    def value() -> bytes:
        nonlocal i
        space()
        c = text[i : i + 1]
        if c in (b"{", b"["):
            h = hashlib.sha256(b"o" if c == b"{" else b"l")
            i += 1
            items = []
            space()
            while text[i : i + 1] not in (b"}", b"]"):
                if c == b"{":
                    end = _string_end(text, i)
                    key = json.loads(text[i:end])
                    i = end
                    space()
                    i += 1  # the colon
                    items.append((key.encode(), value()))
                else:
                    items.append((b"", value()))
                space()
                if text[i : i + 1] == b",":
                    i += 1
                    space()
            i += 1
            for key, digest in sorted(items, key=lambda item: item[0]) if c == b"{" and sort else items:
                if c == b"{":
                    h.update(hashlib.sha256(b"s" + key).digest())
                h.update(digest)
            return h.digest()
        if c == b'"':
            end = _string_end(text, i)
            string = json.loads(text[i:end])
            i = end
            return hashlib.sha256(b"s" + string.encode()).digest()
        for literal, v in ((b"null", None), (b"true", True), (b"false", False)):
            if text.startswith(literal, i):
                i += len(literal)
                return bytes.fromhex(value_digest(v))
        start = i
        while text[i : i + 1] and text[i : i + 1] in b"+-0123456789.eE":
            i += 1
        return hashlib.sha256(b"d" + text[start:i]).digest()

    return value().hex()


def respelled(lines: list[bytes], args: bytes, context: bytes = b"{}", sort: bool = True) -> list[bytes]:
    """The denied proposal of the forged base with DATA `{"args":ARGS,"context":CONTEXT}` as
    given and its body's digests those of spelled_digest, hashed and re-chained."""
    i = nth(lines, "proposed", 1)
    new_body = replaced(lines[i], args_digest=spelled_digest(args, sort), context_digest=spelled_digest(context, sort))
    out = rechained(lines, i, new_body)
    out[i] = with_data(out[i], b'{"args":' + args + b',"context":' + context + b"}")
    return out


def earlier(ts: str) -> str:
    return format_ts(parse_ts(ts) - timedelta(microseconds=1))


SECOND = 1  # the forged base's first ask wanted two approvals: sup-1's, then (the second) sup-2's
ASK = 2  # its third proposal: Forge's default ask, of {"amount": 10}


def interrupt_of(lines: list[bytes], i: int) -> int:
    """The index of the interrupt of the request of line `i`."""
    request = ev.decode_event(body(lines[i])).request
    return next(j for j, line in enumerate(lines) if line.startswith(b'{"body":{"kind":"interrupted"')
                and ev.decode_event(body(line)).request == request)
NAMED_EDITS = {
    "request 07": lambda ls: body_edit(ls, nth(ls, "approved"), b'"request":6,', b'"request":06,'),
    "rule line -0": lambda ls: body_edit(ls, nth(ls, "proposed", ASK), b'"line":1}', b'"line":-0}'),
    "request 6.0": lambda ls: body_edit(ls, nth(ls, "approved"), b'"request":6,', b'"request":6.0,'),
    "request 6e0": lambda ls: body_edit(ls, nth(ls, "approved"), b'"request":6,', b'"request":6e0,'),
    "request of 23 digits": lambda ls: body_edit(ls, nth(ls, "approved"), b'"request":6,', b'"request":10000000000000000000006,'),
    "count of 19 digits": lambda ls: body_edit(ls, nth(ls, "interrupted"), b'"count":2,', b'"count":1000000000000000000,'),
    "\\u0073 for s": lambda ls: body_edit(ls, nth(ls, "approved"), b'"approver":"sup-1"', b'"approver":"\\u0073up-1"'),
    "\\/ for /": lambda ls: body_edit(ls, nth(ls, "proposed"), b'"tool":"read/thing"', b'"tool":"read\\/thing"'),
    "\\u001F for \\u001f": lambda ls: body_edit(ls, nth(ls, "approved"), b"\\u001f", b"\\u001F"),
    "\\u000a for \\n": lambda ls: body_edit(ls, nth(ls, "approved"), b"\\n", b"\\u000a"),
    "\\u00e9 for é": lambda ls: body_edit(ls, nth(ls, "approved", SECOND), "é".encode(), b"\\u00e9"),
    "a raw control character": lambda ls: body_edit(ls, nth(ls, "approved"), b"\\u001f", b"\x1f"),
    "comment true": lambda ls: body_edit(ls, nth(ls, "approved", SECOND), b'"comment":"', b'"comment":true,"x":"'),
    "reasons null": lambda ls: body_edit(ls, nth(ls, "proposed", ASK), b'"reasons":["a person checks this"]', b'"reasons":null'),
    "rules {}": lambda ls: body_edit(ls, nth(ls, "proposed", ASK), b'"rules":[{"id":"rule-1","line":1}]', b'"rules":{}'),
    "tool []": lambda ls: body_edit(ls, nth(ls, "proposed"), b'"tool":"read/thing"', b'"tool":[]'),
    "seq and ts swapped": lambda ls: member_swap(ls, nth(ls, "approved"), 1),
    "approver and args_digest swapped": lambda ls: member_swap(ls, nth(ls, "approved", SECOND), 5),
    "approver repeated": lambda ls: member_repeat(ls, nth(ls, "approved", SECOND), 5),
    "a space after a colon": lambda ls: body_edit(ls, nth(ls, "approved"), b'"approver":"', b'"approver": "'),
    "a space before the body's end": lambda ls: rechained(ls, nth(ls, "expired"), body(ls[nth(ls, "expired")])[:-1] + b" }"),
    "kind approved as rejected": lambda ls: body_edit(ls, nth(ls, "approved", SECOND), b'"kind":"approved"', b'"kind":"rejected"'),
    "kind approved as redacted": lambda ls: body_edit(ls, nth(ls, "approved", SECOND), b'"kind":"approved"', b'"kind":"redacted"'),
    "an approval turned into a rejection": lambda ls: rechained(ls, nth(ls, "approved", SECOND), ev.encode_event(ev.Rejected(
        seq=nth(ls, "approved", SECOND) + 1, ts=ev.decode_event(body(ls[nth(ls, "approved", SECOND)])).ts,
        prev=ev.decode_event(body(ls[nth(ls, "approved", SECOND)])).prev, request=6, approver="sup-2", reason="no"))),
    "request of a denied proposal": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), request=5),
    "request of an interrupt": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), request=7),
    "request of a later proposal": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), request=12),
    "approver is the proposer": lambda ls: event_edit(ls, nth(ls, "approved"), approver="agent"),
    "approved twice by one approver": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), approver="sup-1"),
    "approver not admitted": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), approver="sup-3"),
    "approved at the deadline": lambda ls: event_edit(ls, nth(ls, "interrupted"), deadline=ev.decode_event(body(ls[nth(ls, "approved")])).ts),
    "executed without a quorum": lambda ls: event_edit(ls, nth(ls, "interrupted"), requirements=Requirements.single(3, ("sup-1", "sup-2", "sup-3"))),
    "executed without an approval": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), approver="sup-1", request=30),
    "expired before the deadline": lambda ls: event_edit(ls, interrupt_of(ls, nth(ls, "expired")), deadline="2099-01-01T00:00:00.000000Z"),
    "ts before the previous one": lambda ls: event_edit(ls, nth(ls, "approved", SECOND), ts=earlier(ev.decode_event(body(ls[nth(ls, "approved", SECOND) - 1])).ts)),
    "ts 2026-02-30": lambda ls: event_edit(ls, nth(ls, "approved"), ts="2026-02-30T09:00:07.000000Z"),
    "ts month 13": lambda ls: event_edit(ls, nth(ls, "approved"), ts="2026-13-01T09:00:07.000000Z"),
    "ts second 60": lambda ls: event_edit(ls, nth(ls, "approved"), ts="2026-02-01T09:00:60.000000Z"),
    "ts year 0000": lambda ls: event_edit(ls, nth(ls, "genesis"), ts="0000-01-01T00:00:00.000000Z"),
    "ts in Arabic-Indic digits": lambda ls: event_edit(ls, nth(ls, "approved"), ts="٢٠٢٦-02-01T09:00:07.000000Z"),
    "deadline without microseconds": lambda ls: body_edit(ls, nth(ls, "interrupted"), b'.000000Z"}', b'Z"}'),
    "deadline 2026-02-30": lambda ls: event_edit(ls, nth(ls, "interrupted"), deadline="2026-02-30T09:00:00.000000Z"),
    "effect maybe": lambda ls: event_edit(ls, nth(ls, "proposed"), effect="maybe"),
    "outcome maybe": lambda ls: event_edit(ls, nth(ls, "executed"), outcome="maybe"),
    "key of 0 characters": lambda ls: event_edit(ls, nth(ls, "execution_started"), key=""),
    "key of 257 characters": lambda ls: event_edit(ls, nth(ls, "execution_started"), key="k" * 257),
    "key of 257 astral characters": lambda ls: event_edit(ls, nth(ls, "execution_started", 1), key="😀" * 257),
    "key null": lambda ls: body_edit(ls, nth(ls, "execution_started"), b'"key":"start/1"', b'"key":null'),
    # in the free text of a denied proposal (nothing refers to it: only the bytes are wrong)
    "overlong UTF-8 C0 80": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xc0\x80"'),
    "overlong UTF-8 E0 80 80": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xe0\x80\x80"'),
    "overlong UTF-8 F0 80 80 80": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xf0\x80\x80\x80"'),
    "UTF-8 beyond U+10FFFF F4 90 80 80": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xf4\x90\x80\x80"'),
    "surrogate in UTF-8 ED A0 80": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xed\xa0\x80"'),
    "UTF-8 lead byte F5": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xf5\x80\x80\x80"'),
    "UTF-8 cut short E2 82": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\xe2\x82"'),
    "UTF-8 continuation byte alone": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\x80"'),
    "escaped lone surrogate": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\\ud800"'),
    "escaped surrogate pair": lambda ls: body_edit(ls, nth(ls, "proposed", 1), b'"tool":"drop"', b'"tool":"drop\\ud83d\\ude00"'),
    # DATA respelled, with the body's digest made to match the respelling (read naively: repeated
    # keys kept, numbers hashed as spelled), then re-chained: only a verifier that reads DATA
    # exactly as the reference does declines these
    "data+digest: a repeated key": lambda ls: respelled(ls, b'{"id":2,"id":2}'),
    "data+digest: -0": lambda ls: respelled(ls, b'{"id":-0}'),
    "data+digest: 2.0": lambda ls: respelled(ls, b'{"id":2.0}'),
    "data+digest: 2e0": lambda ls: respelled(ls, b'{"id":2e0}'),
    "data+digest: 02": lambda ls: respelled(ls, b'{"id":02}'),
    "data+digest: +2": lambda ls: respelled(ls, b'{"id":+2}'),
    "data+digest: keys out of order": lambda ls: respelled(ls, b'{"id":2,"a":1}'),
    "data+digest: keys out of order, hashed in that order": lambda ls: respelled(ls, b'{"id":2,"a":1}', sort=False),
    "data+digest: an escaped key before a plain one, hashed in that order": lambda ls: respelled(ls, b'{"A":1,"\\n":2}', sort=False),
    "data+digest: an escaped key after a plain one": lambda ls: respelled(ls, b'{"\\n":2,"A":1}'),
    "data+digest: a quote in a key": lambda ls: respelled(ls, b'{"a\\"b":1}'),
    "data+digest: an escaped key": lambda ls: respelled(ls, b'{"\\u0069d":2}'),
    "data+digest: an escaped value": lambda ls: respelled(ls, b'{"id":"\\u0032"}'),
    "data+digest: a space": lambda ls: respelled(ls, b'{"id": 2}'),
    "data+digest: -0 in the context": lambda ls: respelled(ls, b'{"id":2}', b'{"n":-0}'),
    "data+digest: a repeated key in the context": lambda ls: respelled(ls, b'{"id":2}', b'{"n":1,"n":1}'),
    "a second genesis": lambda ls: rechained(ls + [ls[0]], len(ls), body(ls[0])),
    "data: args keys out of order": lambda ls: data_edit(ls, nth(ls, "proposed"), b'"amount":999999999999999999,"esc"', b'"esc"'),
    "data: a repeated key": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b'{"amount":10}', b'{"amount":10,"amount":10}'),
    "data: a space": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b'{"args":{', b'{"args": {'),
    "data: 1E1 for 10": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b'"amount":10', b'"amount":1E1'),
    "data: 10.0 for 10": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b'"amount":10', b'"amount":10.0'),
    "data: another amount": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b'"amount":10', b'"amount":11'),
    "data: \\u0041 in a value": lambda ls: data_edit(ls, nth(ls, "proposed"), b'"A":5', b'"\\u0041":5'),
    "data: no context": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b',"context":{}', b""),
    "data: an extra member": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), b',"context":{}', b',"context":{},"x":1'),
    "data: on an approval": lambda ls: data_edit(ls, nth(ls, "approved"), None, b'{"args":{}}'),
    "data: null for a proposal": lambda ls: data_edit(ls, nth(ls, "proposed", ASK), None, b"null"),
    "data: an edit's context": lambda ls: data_edit(ls, nth(ls, "edited"), None, data(ls[nth(ls, "edited")])[:-1] + b',"context":{}}'),
    "data: invalid UTF-8": lambda ls: data_edit(ls, nth(ls, "proposed"), "Zoë".encode(), b"Zo\xc0\x80"),
    "policy in a version 1 ledger": lambda ls: event_edit(ls, nth(ls, "genesis"), format=ev.FORMAT_V1),
    "policy by empty": lambda ls: event_edit(ls, nth(ls, "policy"), by=""),
    "policy by null": lambda ls: event_edit(ls, nth(ls, "policy"), by=None),
    "policy digest in capitals": lambda ls: event_edit(ls, nth(ls, "policy"), digest="AB" * 32),
    "policy name null": lambda ls: event_edit(ls, nth(ls, "policy"), name=None),
    "policy source 5": lambda ls: body_edit(ls, nth(ls, "policy"), b'"source":null', b'"source":5'),
    "policy without its source": lambda ls: body_edit(ls, nth(ls, "policy"), b',"source":null', b""),
    "policy with a request": lambda ls: body_edit(ls, nth(ls, "policy"), b',"name":', b',"request":6,"name":'),
    "policy with data": lambda ls: data_edit(ls, nth(ls, "policy"), None, b'{"args":{}}'),
    "data: ` null` beside an approval": lambda ls: data_edit(ls, nth(ls, "approved"), None, b" null"),
    "data: `null ` beside an approval": lambda ls: data_edit(ls, nth(ls, "approved"), None, b"null "),
}
# Edits the reference accepts: it reads the JSON value beside an event without data, not its
# spelling; 10.0 has 10's digest and is the canonical spelling of the float it reads; and escaped
# keys in their canonical order and spelling are lawful (the fast path leaves them to it).
LAWFUL_EDITS = {
    "data: ` null` beside an approval", "data: `null ` beside an approval", "data: 10.0 for 10",
    "data+digest: an escaped key after a plain one", "data+digest: a quote in a key",
}


@pytest.mark.parametrize("name", sorted(NAMED_EDITS))
def test_each_named_edit_is_rejected_and_declined(templates, scratch, name):
    segments, lines = templates["forged"]
    changed = NAMED_EDITS[name](lines)
    assert changed != lines
    fast, ref = judge(scratch.show(with_lines(segments, changed)), what=name)
    if name in LAWFUL_EDITS:
        return  # the reference accepts it; the fast path may decline, or agree
    assert not ref.ok, f"{name}: the reference accepts this edit"
    assert fast is None


# Workflow violations written by a Forge: canonical bodies, a valid chain, an unlawful history.


def _self_approval(f):
    r, d = f.ask()
    f.approve(r, "agent", d)


def _duplicate_approval(f):
    r, d = f.ask(quorum=2)
    f.approve(r, "sup-1", d)
    f.approve(r, "sup-1", d)


def _approval_after_deadline(f):
    r, d = f.ask(timeout_seconds=60)
    f.clock.advance(61)
    f.approve(r, "sup-1", d)


def _approval_at_deadline(f):
    r, d = f.ask(timeout_seconds=60)
    f.clock.advance(59)  # the approval's ts is the deadline exactly (one more second per event)
    f.approve(r, "sup-1", d)


def _execution_without_approval(f):
    r, d = f.ask()
    f.start(r, d)


def _execution_with_half_a_quorum(f):
    r, d = f.ask(quorum=2)
    f.approve(r, "sup-1", d)
    f.start(r, d)


def _execution_of_other_arguments(f):
    r, d = f.ask()
    f.approve(r, "sup-1", d)
    f.start(r, "1" * 64)


def _executed_without_start(f):
    r, d = f.propose(effect="allow")
    f.executed(r, d)


def _started_twice(f):
    r, d = f.propose(effect="allow")
    f.start(r, d)
    f.start(r, d)


def _executed_other_digest(f):
    r, d = f.propose(effect="allow")
    f.start(r, d)
    f.executed(r, "2" * 64)


def _same_time(f):
    f.step = 0
    f.propose(effect="deny")
    f.propose(effect="deny")


def _stale_approval(f):
    r, d = f.ask(quorum=2)
    f.edit(r, "sup-1", {"amount": 5}, d)
    f.approve(r, "sup-2", d)


def _edit_denied(f):
    r, d = f.ask()
    f.edit(r, "sup-1", {"amount": 5}, d, effect="deny")


def _edit_replaces_other(f):
    r, d = f.ask()
    f.edit(r, "sup-1", {"amount": 5}, "3" * 64)


def _early_expiry(f):
    r, _ = f.ask()
    f.expire(r)


def _expiry_at_deadline(f):
    r, _ = f.ask(timeout_seconds=60)
    f.clock.advance(59)
    f.expire(r)


def _cancel_after_start(f):
    r, d = f.propose(effect="allow")
    f.start(r, d)
    f.cancel(r)


def _interrupt_an_allow(f):
    r, _ = f.propose(effect="allow")
    f.interrupt(r)


def _interrupt_twice(f):
    r, _ = f.ask()
    f.interrupt(r)


def _not_an_approver(f):
    r, d = f.ask(approvers=["sup-1"])
    f.approve(r, "sup-2", d)


def _decision_not_allowed(f):
    r, _ = f.ask(decisions=["approve", "reject"])
    f.respond(r, "sup-1")


def _decision_before_interrupt(f):
    r, d = f.propose()
    f.approve(r, "sup-1", d)


def _unknown_request(f):
    f.approve(99, "sup-1", "1" * 64)


def _request_of_a_non_proposal(f):
    r, d = f.ask()
    f.approve(r + 1, "sup-1", d)


def _after_final(f):
    r, _ = f.ask()
    f.reject(r, "sup-1")
    f.cancel(r)


def _denied_then_started(f):
    r, d = f.propose(effect="deny")
    f.start(r, d)


def _second_genesis(f):
    f.genesis()


def _forged_recovered(f):
    f.recovered()


def _lawful_approval_by_the_edit(f):
    r, d = f.ask(quorum=1, approvers=["sup-1"])
    _, d2 = f.edit(r, "sup-1", {"amount": 5}, d)
    f.start(r, d2)


def _lawful_two_quorums(f):
    r, d = f.propose()
    f.interrupt(r, Requirements(quorums=(Quorum(1, ("sup-1",)), Quorum(1, ("sup-2",)))))
    f.approve(r, "sup-1", d)
    f.approve(r, "sup-2", d)
    f.start(r, d)


def _two_quorums_half_met(f):
    r, d = f.propose()
    f.interrupt(r, Requirements(quorums=(Quorum(1, ("sup-1",)), Quorum(1, ("sup-2",)))))
    f.approve(r, "sup-1", d)
    f.start(r, d)


def _approve_again_after_an_edit(f):
    r, d = f.ask(quorum=2, approvers=["sup-1", "sup-2", "sup-3"])
    f.approve(r, "sup-2", d)
    _, d2 = f.edit(r, "sup-1", {"amount": 5}, d)
    f.approve(r, "sup-2", d2)  # lawful: an edit starts the count afresh
    f.start(r, d2)


def _edit_by_the_proposer(f):
    r, d = f.ask()
    f.edit(r, "agent", {"amount": 5}, d)


WORKFLOW_CASES = {name.lstrip("_"): fn for name, fn in list(globals().items()) if name.startswith("_") and callable(fn) and fn.__code__.co_varnames[:1] == ("f",)}


@pytest.mark.parametrize("case", sorted(WORKFLOW_CASES))
def test_forged_histories_lawful_or_not(tmp_path, case):
    with Forge(tmp_path / "l") as f:
        f.propose(effect="deny")  # something before, so the case is not at seq 2
        WORKFLOW_CASES[case](f)
        f.propose(effect="allow")  # and something after
    fast, ref = judge(tmp_path / "l", what=case)
    if case == "forged_recovered":
        assert ref.ok and fast is None
    elif case.startswith("lawful") or case in ("approve_again_after_an_edit", "same_time", "expiry_at_deadline"):
        assert ref.ok, (case, ref.problem)
        assert fast is not None, f"COMPLETENESS: the fast path declined the lawful history {case}"
    else:
        assert not ref.ok, case


# Hypothesis: random JSON edits of a random value of a random line, re-chained.

odd_texts = st.sampled_from(
    [b"null", b"true", b"false", b"[]", b"{}", b'""', b"0", b"-0", b"07", b"1.0", b"1e0", b"1E22", b"-1", b"99999999999999999999",
     b'"\\u0041"', b'"\\/"', b" 1", b"1 ", b'"\xc0\x80"', b'"\xed\xa0\x80"', b'"\xf5"', b'"\\ud800"', b'"a\x01"', b"[1,]", b"{,}",
     b'{"a":1,"a":1}', b'"' + b"k" * 257 + b'"', b'""', b"1e400", b"-", b'"\\u00E9"', b'"\\u00e9"', b'"\\x41"', b"NaN", b"Infinity"]
)
any_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
spelled_json = st.one_of(
    any_json.map(msgspec.json.encode),
    any_json.map(lambda v: json.dumps(v).encode()),  # escaped, spaced
    any_json.map(lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()),
)


@st.composite
def replacement(draw, values: list[tuple[tuple, int, int]], text: bytes, donors: list[bytes]) -> bytes:
    """New text for one value: odd JSON, random JSON, or the same member's value in another line
    (a plausible edit: another request number, another approver, another time)."""
    path, start, end = draw(st.sampled_from(values))
    how = draw(st.sampled_from(["odd", "json", "donor", "donor", "bytes"]))
    if how == "odd":
        new = draw(odd_texts)
    elif how == "json":
        new = draw(spelled_json)
    elif how == "bytes":
        new = draw(st.binary(max_size=4))
    else:
        candidates = []
        for donor in donors:
            for p, s, e in json_spans(donor)[0]:
                if p == path:
                    candidates.append(donor[s:e])
        new = draw(st.sampled_from(candidates)) if candidates else draw(odd_texts)
    return text[:start] + new + text[end:]


@pytest.fixture(scope="module")
def templates(bases) -> dict[str, tuple[Segments, list[bytes]]]:
    """Each base as segments and as its list of lines."""
    out = {}
    for name, path in bases.items():
        segments = snapshot(path)
        out[name] = (segments, [line for _, line in flat(segments)])
    return out


@HYPOTHESIS
@given(st.data())
def test_random_edits_of_a_body_re_chained(templates, scratch, data_):
    name = data_.draw(st.sampled_from(sorted(templates)), label="base")
    template, lines = templates[name]
    index = data_.draw(st.integers(0, len(lines) - 1), label="line")
    text = body(lines[index])
    values = json_spans(text)[0][1:]  # not the whole body
    new = data_.draw(replacement(values, text, [body(line) for line in lines]), label="body")
    if b"\n" in new or b',"hash":"' in new:
        return
    path = scratch.show(with_lines(template, rechained(lines, index, new)))
    expect = data_.draw(st.sampled_from([None, line_hash(lines[-1]), line_hash(lines[len(lines) // 2])]), label="expect_head")
    judge(path, expect, what=(name, index + 1, new))


@HYPOTHESIS
@given(st.data())
def test_random_edits_of_data(templates, scratch, data_):
    name = data_.draw(st.sampled_from(sorted(templates)), label="base")
    template, lines = templates[name]
    index = data_.draw(st.integers(1, len(lines) - 1), label="line")
    text = data(lines[index])
    values = json_spans(text)[0]
    donors = [data(line) for line in lines if data(line) != b"null"]
    new = data_.draw(replacement(values, text, donors), label="data")
    if b"\n" in new:
        return
    changed = list(lines)
    changed[index] = with_data(lines[index], new)
    judge(scratch.show(with_lines(template, changed)), what=(name, index + 1, new))


@HYPOTHESIS
@given(st.data())
def test_random_byte_edits(templates, scratch, data_):
    name = data_.draw(st.sampled_from(sorted(templates)), label="base")
    template, lines = templates[name]
    k = data_.draw(st.integers(0, len(template) - 1), label="segment")
    blob = b"".join(template[k][1])
    at = data_.draw(st.integers(0, len(blob) - 1), label="at")
    op = data_.draw(st.sampled_from(["flip", "delete", "insert", "replace"]), label="op")
    if op == "flip":
        new = blob[:at] + bytes([blob[at] ^ (1 << data_.draw(st.integers(0, 7)))]) + blob[at + 1 :]
    elif op == "delete":
        new = blob[:at] + blob[at + 1 :]
    else:
        piece = data_.draw(st.sampled_from(INSERTS) | st.binary(min_size=1, max_size=3), label="piece")
        new = blob[:at] + piece + blob[at + (op == "replace") :]
    segments = list(template)
    segments[k] = (template[k][0], new.splitlines(keepends=True))
    expect = data_.draw(st.sampled_from([None, line_hash(lines[-1])]), label="expect_head")
    judge(scratch.show(segments), expect, what=(name, k, at, op))


# The writer's compiled sealer (ledger.store.native.sealer: _native.seal, _native.valid_body) uses the
# verifier's grammar of a body; when it says yes the writer skips decode_event. So its yes must
# be a body the reference reads: decode_event accepts it, in its canonical layout, with real times.


def assert_sealed_body_is_valid(new: bytes, what: object = "") -> bool:
    """Whether the sealer took `new`; if it did, that the reference reads it."""
    sealer = native._native
    sealed = sealer.seal(new, b"null")
    assert sealer.valid_body(new) == (sealed is not None), what
    if sealed is None:
        return False
    try:
        event = ev.decode_event(new)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise AssertionError(f"UNSOUND: the sealer took a body decode_event refuses ({what}): {exc}\n{new!r}") from None
    assert ev.encode_event(event) == new, f"UNSOUND: the sealer took a body not in its canonical layout ({what}): {new!r}"
    assert is_ts(event.ts) and is_ts(getattr(event, "deadline", event.ts)), f"UNSOUND: the sealer took an unreal time ({what})"
    assert sealed == (hashlib.sha256(new).hexdigest(), compose(new, None)[1]), what
    return True


def test_the_writers_sealer_takes_only_bodies_the_reference_reads(templates):
    """Every body of the catalogues (all of them: no files are written) through seal()."""
    took = tried = 0
    for name in ("forged", "gate"):
        lines = templates[name][1]
        for index in representative_lines(lines):
            text = body(lines[index])
            assert assert_sealed_body_is_valid(text, (name, index + 1))
            old_kind = text[len(b'{"kind":"') : text.index(b'"', len(b'{"kind":"'))]
            variants = [v for group in body_variants(text) for v in group] + semantic_variants(lines, index)
            variants += [(f"kind {k!r}", text.replace(b'"kind":"' + old_kind + b'"', b'"kind":"' + k + b'"', 1)) for k in KINDS]
            for label, new in variants:
                took += assert_sealed_body_is_valid(new, (name, index + 1, label))
                tried += 1
    assert tried > 10000 and took > 100


@HYPOTHESIS
@given(st.data())
def test_the_writers_sealer_on_random_edits(templates, data_):
    name = data_.draw(st.sampled_from(sorted(templates)), label="base")
    lines = templates[name][1]
    index = data_.draw(st.integers(0, len(lines) - 1), label="line")
    text = body(lines[index])
    new = data_.draw(replacement(json_spans(text)[0][1:], text, [body(line) for line in lines]), label="body")
    assert_sealed_body_is_valid(new, (name, index + 1))


# The compiled verifier checks the lines of one read on two threads when there are 256 or more:
# a ledger of one segment of 800 lines has its second half checked by the other thread.


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Segments, list[bytes]]:
    path = tmp_path_factory.mktemp("native-big") / "ledger"
    with no_sync():
        build_random(path, seed=11, steps=800, segment_bytes=None)
    segments = snapshot(path)
    assert len(segments) == 1 and len(segments[0][1]) > 512
    return segments, segments[0][1]


def test_a_ledger_read_by_two_threads(big, scratch):
    segments, lines = big
    path = scratch.show(segments)
    assert_accepted(path)
    assert_accepted(path, line_hash(lines[len(lines) * 3 // 4]))


def test_edits_in_either_half_of_a_ledger_read_by_two_threads(big, scratch):
    segments, lines = big
    rng = random.Random("big")
    half = len(lines) // 2
    for round in range(16 * SCALE):
        index = rng.randrange(1, half) if round % 4 == 0 else rng.randrange(half, len(lines))
        if round % 2:  # a byte of the line changed
            line = bytearray(lines[index])
            at = rng.randrange(len(line) - 1)
            line[at] ^= 1 << rng.randrange(8)
            changed = lines[:index] + [bytes(line)] + lines[index + 1 :]
            label = f"bit of byte {at} of line {index + 1}"
        else:  # a member of its body changed, re-hashed and re-chained
            label, new = rng.choice(semantic_variants(lines, index))
            changed = rechained(lines, index, new)
        judge(scratch.show([(segments[0][0], changed)]), what=label)


def test_thousands_of_open_and_closed_requests(tmp_path):
    """More open requests than the compiled verifier's first table holds (1024), half of them
    closed again (deleted slots), and more lines in one read than its first line array (4096)."""
    def proposal(i: int) -> tuple[ev.Event, dict]:
        args = {"i": i}
        return ev.Proposed(run=None, proposer="agent", call_id=None, tool="t", args_digest=value_digest(args),
                           context_digest=value_digest({}), policy="p", policy_digest="f" * 64,
                           effect=("ask", "allow")[i % 2], rules=(), reasons=()), {"args": args, "context": {}}

    with no_sync(), Ledger(tmp_path / "l", clock=ManualClock(START)) as led:
        first = led.append_batch([proposal(i) for i in range(2500)])
        led.append_batch([(ev.Cancelled(request=r.seq, by="ops", reason=None), None) for r in first[::2]])
        led.append_batch([proposal(i) for i in range(2500, 3000)])
    ref = assert_accepted(tmp_path / "l")
    assert ref.count > 4096 and ref.statuses == {"allowed": 1500, "interrupting": 250, "cancelled": 1250}
    # the same with the last request lawfully decided, and unlawfully: a cancel of a cancelled one
    segments = snapshot(tmp_path / "l")
    lines = segments[0][1]
    judge(materialize(tmp_path / "m", [(segments[0][0], lines + rechained_append(lines, ev.Cancelled(request=2, by="x", reason=None)))]))


def rechained_append(lines: list[bytes], event: ev.Event) -> list[bytes]:
    """One line more after `lines`: `event` with the next seq, the last line's hash and time."""
    last = ev.decode_event(body(lines[-1]))
    event = msgspec.structs.replace(event, seq=len(lines) + 1, ts=last.ts, prev=line_hash(lines[-1]))
    return [compose(ev.encode_event(event), None)[1]]


# --- 4. the tamper matrix through both engines ----------------------------------------------------


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    """The ledger of tests/test_tamper_matrix.py (several segments, every kind of step)."""
    path = tmp_path_factory.mktemp("native-matrix") / "ledger"
    build_matrix_ledger(path, 2500)
    assert_accepted(path)
    return path


@pytest.mark.parametrize("op", ["flip", "edit", "delete", "reorder", "duplicate", "insert"])
@pytest.mark.parametrize("position", ["first", "middle", "second-to-last", "last"])
def test_the_tamper_matrix_through_both_engines(matrix, tmp_path, op, position):
    from test_tamper_matrix import edited_value, field_cases, field_span, position_index

    template = snapshot(matrix)
    placed = flat(template)
    index = position_index(position, len(placed))
    seg, line = placed[index]
    head = line_hash(template[-1][1][-1])
    variants: list[tuple[str, list[tuple[int, bytes]]]] = []
    if op in ("flip", "edit"):
        for name, field in field_cases(matrix):
            if name != position:
                continue
            raw = line.rstrip(b"\n")
            start, end = field_span(raw, field)
            if op == "flip":
                middle = (start + end) // 2
                changed = raw[:middle] + bytes([raw[middle] ^ 0x01]) + raw[middle + 1 :]
            elif field == "hash":
                changed = raw[:start] + bytes(reversed(raw[start:end])) + raw[end:]
            else:
                changed = raw[:start] + edited_value(raw[start:end]) + raw[end:]
            variants.append((field, placed[:index] + [(seg, changed + b"\n")] + placed[index + 1 :]))
    elif op == "delete":
        variants.append(("", placed[:index] + placed[index + 1 :]))
    elif op == "reorder":
        other = index + 1 if index + 1 < len(placed) else index - 1
        swapped = list(placed)
        swapped[index], swapped[other] = (seg, placed[other][1]), (placed[other][0], line)
        variants.append(("", swapped))
    elif op == "duplicate":
        variants.append(("", placed[: index + 1] + [placed[index]] + placed[index + 1 :]))
    else:
        prev = "0" * 64 if index == 0 else line_hash(placed[index - 1][1])
        ts = ev.decode_event(body(line)).ts
        if index == 0:
            forged = ev.Genesis(seq=1, ts=ts, prev=prev, format=ev.FORMAT, ledger_id="f" * 32)
        else:
            forged = ev.Recovered(seq=index + 1, ts=ts, prev=prev, segment="events-00000001.jsonl", offset=0, fragment_bytes=1,
                                  fragment_sha256="0" * 64, quarantine="quarantine/x")
        variants.append(("", placed[:index] + [(seg, compose(ev.encode_event(forged), None)[1])] + placed[index:]))
    for field, changed in variants:
        path = materialize(tmp_path / "l", regroup(template, changed))
        for expect in (None, head):
            fast, ref = judge(path, expect, what=(op, position, field))
            if expect is not None:
                assert not ref.ok and fast is None, (op, position, field)  # caught, as by the checkpoint
