"""Regressions from a hostile review of the compiled module (ledger/_native.c, ledger/store/native.py).

1. The writer's compiled sealer (`_native.seal`, `_native.valid_body`) claims a grammar stricter
   than ledger.events.decode_event ("its yes is enough"), so the writer skips decode_event when it
   says yes. But the body grammar reads every argument digest (`args_digest`, `context_digest`,
   `replaces`) and `prev` with `quoted64`: any 64 bytes between quotes, not 64 lowercase hex
   digits, not even valid JSON escapes. The verifier is safe (it compares those fields with known
   good hex before accepting), the writer is not: `Ledger.append` now writes a line that `verify`
   rejects, where it used to refuse the event (LedgerError).
2. `verify(path, expect_head)` with the default engine raises (UnicodeEncodeError) for an
   expected head holding a lone surrogate, where the reference reports that the head is not in
   the ledger: the compiled Verifier encodes it to UTF-8 strictly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.requirements import Requirements
from ledger import events as ev
from ledger.proof import fast
from ledger.store import native
from ledger.digest import value_digest
from ledger.store.lines import split
from ledger.store.log import Ledger, LedgerError
from ledger.proof.verify import verify

GOOD = value_digest({"amount": 10})
# 64 bytes between the quotes once JSON-encoded, none of them a lowercase-hex digest.
BAD_DIGESTS = {
    "upper": "A" * 64,
    "non-hex": "Z" * 64,
    "space": " " * 64,
    "escaped-backslash": "a" * 62 + "\\",  # encoded as a...a\\ : 64 bytes
    "escaped-quote": "a" * 62 + '"',  # encoded as a...a\" : 64 bytes
}


def _bad_events(bad: str) -> dict[str, tuple[ev.Event, dict | None]]:
    args = {"args": {"amount": 10}, "context": {}}
    proposed = dict(run=None, proposer="agent", call_id=None, tool="t", args_digest=GOOD, context_digest=value_digest({}),
                    policy="p", policy_digest="f" * 64, effect="allow", rules=(), reasons=())
    return {
        "proposed.args_digest": (ev.Proposed(**{**proposed, "args_digest": bad}), args),
        "proposed.context_digest": (ev.Proposed(**{**proposed, "context_digest": bad}), args),
        "approved.args_digest": (ev.Approved(request=1, approver="x", args_digest=bad, comment=None), None),
        "edited.replaces": (
            ev.Edited(request=1, editor="x", args_digest=GOOD, replaces=bad, policy_digest="f" * 64, effect="ask", rules=(),
                      requirements=Requirements(), reason=None),
            {"args": {"amount": 10}},
        ),
        "execution_started.args_digest": (ev.ExecutionStarted(request=1, args_digest=bad, executor=None), None),
        "executed.args_digest": (
            ev.Executed(request=1, args_digest=bad, outcome="ok", result_digest=None, error=None), None
        ),
    }


@pytest.mark.parametrize("which", sorted(BAD_DIGESTS))
@pytest.mark.parametrize("field", sorted(_bad_events("x" * 64)))
def test_the_writer_refuses_a_digest_that_is_not_lowercase_hex(tmp_path: Path, field: str, which: str):
    """Ledger.append must not write a body that verify rejects (ledger/store/log.py: "Never write what
    verify would reject"); with the compiled sealer it does, for every argument digest."""
    event, data = _bad_events(BAD_DIGESTS[which])[field]
    path = tmp_path / "l"
    with Ledger(path) as ledger:
        with pytest.raises(LedgerError):
            ledger.append(event, data)
    report = verify(path, engine="python")
    assert report.ok, f"the writer appended a line verify rejects: {report.problem}"


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built or not current")
@pytest.mark.parametrize("which", sorted(BAD_DIGESTS))
@pytest.mark.parametrize("field", sorted(_bad_events("x" * 64)))
def test_valid_body_never_says_yes_where_decode_event_says_no(field: str, which: str):
    event, _ = _bad_events(BAD_DIGESTS[which])[field]
    body = ev.encode_event(ev_stamp(event))
    with pytest.raises(Exception):
        ev.decode_event(body)
    assert not native._native.valid_body(body), body
    assert native._native.seal(body, b"null") is None, body


def ev_stamp(event: ev.Event) -> ev.Event:
    import msgspec

    return msgspec.structs.replace(event, seq=2, ts="2026-01-01T00:00:00.000000Z", prev="0" * 64)


def test_a_prev_that_is_not_json_is_not_a_valid_body():
    """`prev` is read the same way: 64 bytes that are not even a JSON string (a bad escape)."""
    if not native.available():
        pytest.skip("the compiled module is not built or not current")
    good = ev.encode_event(ev_stamp(ev.Approved(request=1, approver="x", args_digest=GOOD, comment=None)))
    bad = good.replace(b'"prev":"' + b"0" * 64 + b'"', b'"prev":"' + b"\\q" * 32 + b'"')
    assert bad != good
    with pytest.raises(Exception):
        ev.decode_event(bad)
    assert not native._native.valid_body(bad)


def test_an_expected_head_with_a_lone_surrogate_is_reported_not_raised(tmp_path: Path):
    """verify() never raises for what it is asked to check; the reference reports the head
    missing, and the default engine (the compiled verifier first) must give the same Report."""
    path = tmp_path / "l"
    Ledger(path).close()
    head = "\ud800" * 64
    reference = verify(path, head, engine="python")
    assert reference.problem is not None and reference.problem.kind == "head"
    assert verify(path, head) == reference
    assert fast.verify_fast(path, head) is None


def _many_approvals(path: Path, approvals: int) -> None:
    """A lawful ledger of one pending ask whose requirements hold 63 named quorums of 16
    identities each (each met by one approval) and last a quorum of anyone that is never met, then
    `approvals` approvals by distinct people: written as canonical chained lines (about 400 bytes
    each), as an attacker with write access to the directory could."""
    import msgspec

    from dsl.requirements import Quorum
    from ledger.digest import canonical_json
    from ledger.store.lines import compose

    names = [f"name-{i:05d}" for i in range(63 * 16)]
    quorums = tuple(Quorum(1, tuple(names[i * 16 : (i + 1) * 16])) for i in range(63)) + (Quorum(10**17, None),)
    requirements = Requirements(quorums=quorums, decisions=("approve",), timeout_seconds=10**9)
    digest = value_digest({})
    lines, prev = [], ev.GENESIS_PREV

    def emit(event: ev.Event, data: dict | None = None) -> None:
        nonlocal prev
        body = ev.encode_event(msgspec.structs.replace(event, seq=len(lines) + 1, ts="2026-01-01T00:00:00.000000Z", prev=prev))
        prev, line = compose(body, canonical_json(data) if data is not None else None)
        lines.append(line)

    emit(ev.Genesis(format=ev.FORMAT, ledger_id="x"))
    emit(ev.Proposed(run=None, proposer="p", call_id=None, tool="t", args_digest=digest, context_digest=digest, policy="p",
                     policy_digest="f" * 64, effect="ask", rules=(), reasons=()), {"args": {}, "context": {}})
    emit(ev.Interrupted(request=2, requirements=requirements, deadline="9999-01-01T00:00:00.000000Z"))
    for i in range(63):
        emit(ev.Approved(request=2, approver=names[i * 16], args_digest=digest, comment=None))
    for i in range(approvals):
        emit(ev.Approved(request=2, approver=f"anyone-{i:06d}", args_digest=digest, comment=None))
    path.mkdir()
    (path / "events-00000001.jsonl").write_bytes(b"".join(lines))


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built or not current")
def test_thousands_of_approvals_of_one_request_verify_alike(tmp_path: Path):
    """The ledger that made both verifiers quadratic (each approval re-counted every quorum over
    every approval so far: 2,000 approvals took 1.6 s compiled and 40 s in Python, 8,000 over
    half a minute compiled): both now count approvals as they come (ledger.workflow.Tally and
    its C twin), and agree."""
    _many_approvals(tmp_path / "l", 2000)
    report = fast.verify_fast(tmp_path / "l")
    assert report is not None and report.ok and report.count == 2000 + 66
    assert report == verify(tmp_path / "l", engine="python")


def test_the_reference_counts_each_approval_once_not_every_approval_again(tmp_path: Path, monkeypatch):
    """Without timing anything: how often the reference asks a quorum whether it admits someone
    does not grow with the number of approvals (it grew with their square)."""
    from dsl.requirements import Quorum

    asked = []
    original = Quorum.admits
    monkeypatch.setattr(Quorum, "admits", lambda self, who: asked.append(who) or original(self, who))
    counts = []
    for n in (100, 400):
        asked.clear()
        _many_approvals(tmp_path / str(n), n)
        assert verify(tmp_path / str(n), engine="python").ok
        counts.append(len(asked))
    assert counts[0] == counts[1], counts


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built or not current")
def test_a_verifier_is_used_once_and_only_after_its_init():
    """Misuse through the module's own API is refused rather than trusted: a second __init__
    would keep the first ledger's requests, and an uninitialized one starts at seq 0."""
    from ledger import _native

    checker = _native.Verifier()
    with pytest.raises(RuntimeError):
        checker.__init__()
    bare = _native.Verifier.__new__(_native.Verifier)
    with pytest.raises(RuntimeError):
        bare.feed(b"\n")
    assert bare.finish() is None


@pytest.mark.skipif(not native.available(), reason="the compiled module is not built or not current")
def test_a_chunk_of_empty_lines_is_declined():
    """An empty line is no ledger line. (Lines are now indexed 16,384 at a time; indexing a whole
    chunk of empty lines first reserved about a gigabyte.)"""
    from ledger import _native

    assert _native.Verifier().feed(b"\n" * 1_000_000) == -1
