"""The writer's compiled sealer (`_native.seal`, `_native.valid_body`): its yes must imply the
reference's yes, because the writer then skips `decode_event` (ledger/store/log.py). Events of every
kind are built with members drawn from valid and invalid values alike (digests that are not
lowercase hex, times that do not exist, negative numbers, keys of 0 or 257 characters, any text)
and encoded as the writer encodes them; whenever valid_body says yes, decode_event must accept
the body, the body must be its own canonical encoding, and its times must be real; and seal must
return the body's SHA-256 and the line of docs/ledger-format.md section 2."""

from __future__ import annotations

import hashlib

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl.requirements import Quorum, Requirements
from ledger import events as ev
from ledger.store import native
from ledger.clock import is_ts
from ledger.store.lines import compose

pytestmark = pytest.mark.skipif(not native.available(), reason="the compiled module is not built here (no C compiler or OpenSSL headers)")

GOOD_HEX = "ab" * 32
GOOD_TS = "2026-11-30T12:00:00.000000Z"

hexish = st.one_of(
    st.just(GOOD_HEX),
    st.text(alphabet="0123456789abcdefABCDEF", min_size=63, max_size=65),
    st.text(min_size=64, max_size=64),
)
times = st.one_of(
    st.just(GOOD_TS),
    st.sampled_from(["2026-02-29T00:00:00.000000Z", "2024-02-29T23:59:59.999999Z", "0000-01-01T00:00:00.000000Z",
                     "2026-13-01T00:00:00.000000Z", "2026-01-01T24:00:00.000000Z", "2026-01-01T00:00:60.000000Z",
                     "2026-01-01T00:00:00.000000z", "2026-01-01T00:00:00.00000Z", "２026-01-01T00:00:00.000000Z"]),
    st.text(max_size=30),
)
texts = st.text(max_size=12)
maybe_texts = st.none() | texts
ints = st.one_of(st.integers(-3, 3), st.integers(-(2**70), 2**70))
keys = st.one_of(st.just(msgspec.UNSET), st.text(min_size=0, max_size=3), st.text(min_size=255, max_size=258))
quorums = st.builds(Quorum, count=ints, approvers=st.none() | st.lists(texts, max_size=3).map(tuple), group=maybe_texts)
requirements = st.builds(
    Requirements,
    quorums=st.lists(quorums, max_size=2).map(tuple),
    decisions=st.lists(st.sampled_from(["approve", "edit", "reject", "respond", "maybe"]), max_size=3).map(tuple),
    timeout_seconds=ints,
    on_timeout=st.sampled_from(["reject", "approve"]),
    timeout_message=maybe_texts,
)
rules = st.lists(st.builds(ev.RuleRef, id=texts, line=ints), max_size=2).map(tuple)
effects = st.sampled_from(["allow", "deny", "ask", "maybe"])
common = {"seq": ints, "ts": times, "prev": hexish, "key": keys}

events = st.one_of(
    st.builds(ev.Genesis, format=st.sampled_from([ev.FORMAT, "countersign-ledger/2"]), ledger_id=texts, **common),
    st.builds(ev.Proposed, run=maybe_texts, proposer=texts, call_id=maybe_texts, tool=texts, args_digest=hexish,
              context_digest=hexish, policy=texts, policy_digest=hexish, effect=effects, rules=rules,
              reasons=st.lists(texts, max_size=2).map(tuple), **common),
    st.builds(ev.Interrupted, request=ints, requirements=requirements, deadline=times, **common),
    st.builds(ev.Approved, request=ints, approver=texts, args_digest=hexish, comment=maybe_texts, **common),
    st.builds(ev.Edited, request=ints, editor=texts, args_digest=hexish, replaces=hexish, policy_digest=hexish,
              effect=effects, rules=rules, requirements=requirements, reason=maybe_texts, **common),
    st.builds(ev.Rejected, request=ints, approver=texts, reason=texts, **common),
    st.builds(ev.Responded, request=ints, approver=texts, message=texts, **common),
    st.builds(ev.Expired, request=ints, outcome=st.sampled_from(["reject", "approve"]), message=maybe_texts, **common),
    st.builds(ev.Cancelled, request=ints, by=texts, reason=maybe_texts, **common),
    st.builds(ev.ExecutionStarted, request=ints, args_digest=hexish, executor=maybe_texts, **common),
    st.builds(ev.Executed, request=ints, args_digest=hexish, outcome=st.sampled_from(["ok", "error", "maybe"]),
              result_digest=st.none() | hexish, error=maybe_texts, **common),
)


def _encode(event) -> bytes | None:
    try:
        return ev.encode_event(event)
    except (msgspec.EncodeError, UnicodeEncodeError, OverflowError):
        return None  # a lone surrogate or an integer msgspec cannot write: no body at all


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=events, data=st.sampled_from([b"null", b'{"args":{}}', b'{"args":{"a":1},"context":{}}']))
def test_a_body_the_sealer_accepts_is_one_the_reference_accepts(event, data):
    body = _encode(event)
    if body is None:
        return
    sealed = native.sealer()(body, data)
    assert (sealed is not None) == native._native.valid_body(body)
    if sealed is None:
        return
    decoded = ev.decode_event(body)  # raises if the sealer said yes to a body the reference refuses
    assert ev.encode_event(decoded) == body
    assert is_ts(decoded.ts)
    if isinstance(decoded, ev.Interrupted):
        assert is_ts(decoded.deadline)
    assert sealed == compose(body, None if data == b"null" else data)
    assert sealed[0] == hashlib.sha256(body).hexdigest()


def test_the_sealer_accepts_the_events_a_writer_writes():
    """Completeness, which is the writer's speed: well-formed events of every kind are sealed."""
    common = {"seq": 7, "ts": GOOD_TS, "prev": GOOD_HEX}
    samples = [
        ev.Genesis(format=ev.FORMAT, ledger_id="l-1", **common),
        ev.Proposed(run="r", proposer="agent \"é\" \n", call_id=None, tool="refund", args_digest=GOOD_HEX, context_digest=GOOD_HEX,
                    policy="p", policy_digest=GOOD_HEX, effect="ask", rules=(ev.RuleRef(id="r1", line=3),), reasons=("why",),
                    key="k" * 256, **common),
        ev.Interrupted(request=2, requirements=Requirements.single(2, ["a", "b"], "finance"), deadline=GOOD_TS, **common),
        ev.Approved(request=2, approver="a", args_digest=GOOD_HEX, comment="ok 👍", **common),
        ev.Edited(request=2, editor="b", args_digest=GOOD_HEX, replaces=GOOD_HEX, policy_digest=GOOD_HEX, effect="allow", rules=(),
                  requirements=Requirements(), reason=None, **common),
        ev.Rejected(request=2, approver="a", reason="no", **common),
        ev.Responded(request=2, approver="a", message="done", **common),
        ev.Expired(request=2, outcome="reject", message=None, **common),
        ev.Cancelled(request=2, by="agent", reason=None, **common),
        ev.ExecutionStarted(request=2, args_digest=GOOD_HEX, executor="worker-1", **common),
        ev.Executed(request=2, args_digest=GOOD_HEX, outcome="error", result_digest=None, error="boom\x00", **common),
    ]
    for event in samples:
        body = ev.encode_event(event)
        assert native.sealer()(body, b"null") == compose(body, None), type(event).__name__
