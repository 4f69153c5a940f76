"""Signed decisions: the statement a decider's key signs, and its check against a roster.

docs/ledger-format.md section 11 is the byte-exact definition. A decision event (approved,
edited, rejected, responded, cancelled) of a countersign-ledger/2 ledger may carry a `signature`
member, last in its BODY. The signed *statement* (version 2, `"statement":2` in the signature)
is UTF-8 text of ten lines, each ending in a line feed:

    countersign-decision/2
    ledger <ledger_id of the genesis>
    request <the request's seq>
    basis <seq of the event holding the arguments decided on: the proposal, or the last edit>
    args <their digest, 64 hex>
    prev <the decision event's prev: the hash of the event before it>
    kind <approved | edited | rejected | responded | cancelled>
    signer <reviewer | service>
    time <the signature's time, spelled like ts>
    content <hex(H(CONTENT))>

Version 1 (a signature without `statement`, written before version 2) has nine lines: the first
is `countersign-decision/1` and there is no `prev` line. `prev` binds the whole history before
the decision (the proposal's tool and policy, the interrupt's requirements, every earlier
decision): a rewrite of any of it, every hash chained again, no longer verifies.

CONTENT is the event's BODY as stored without `seq`, `ts`, `prev` (which the ledger assigns when
it appends) and without `signature`: `{"kind":"K"` followed by the BODY's bytes from just after
the `prev` member up to the `,"signature":` member, and `}`. So the key, the request, the
decider, every member of the decision and the arguments' digest are signed as stored; `basis`
binds the decision to one round of arguments (an approval of `A` cannot be replayed after an
edit to `B` and back to `A`), and `ledger` to one ledger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import msgspec

from ledger import events as ev
from ledger.events import encode_event

TYPE_CHECKING = False  # typing.TYPE_CHECKING; the keys and the roster are imported when a decision is signed or checked
if TYPE_CHECKING:
    from ledger.proof.keys import SigningKey
    from ledger.proof.roster import Roster

STATEMENT_FORMAT = "countersign-decision/2"
STATEMENT_FORMAT_1 = "countersign-decision/1"
Signer = Literal["reviewer", "service"]
SIGNATURE_MEMBER = b',"signature":{'
_PREFIX = re.compile(rb'\{"kind":"([a-z_]+)","seq":[0-9]+,"ts":"[^"]*","prev":"[0-9a-f]*"')
RECOVERY = "countersign"  # the Gate's own name when it cancels an ask whose write was cut short


@dataclass(frozen=True)
class Signing:
    """How a Gate signs the decisions it is given: with `key`, as `signer` ("reviewer": the
    decider's own key; "service": the service's key attesting a session it authenticated)."""

    key: SigningKey
    signer: Signer = "reviewer"


def content(body: bytes) -> bytes:
    """CONTENT of a decision's BODY bytes (module docstring). Raises ValueError for bytes that do
    not start as a BODY does."""
    start = _PREFIX.match(body)
    if start is None or not body.endswith(b"}"):
        raise ValueError("not the body of an event")
    end = body.rfind(SIGNATURE_MEMBER)  # a `"` inside a string is escaped: only the member matches
    if end < start.end():
        end = len(body) - 1
    return b'{"kind":"' + start.group(1) + b'"' + body[start.end():end] + b"}"


def statement(*, ledger_id: str, request: int, basis: int, args: str, kind: str, signer: str, time: str,
              content_digest: str, prev: str | None = None) -> bytes:
    """The bytes a decision's key signs (module docstring): version 2 with `prev`, version 1
    without."""
    head = (f"{STATEMENT_FORMAT}\nledger {ledger_id}\nrequest {request}\nbasis {basis}\nargs {args}\nprev {prev}\n"
            if prev is not None else
            f"{STATEMENT_FORMAT_1}\nledger {ledger_id}\nrequest {request}\nbasis {basis}\nargs {args}\n")
    return (head + f"kind {kind}\nsigner {signer}\ntime {time}\ncontent {content_digest}\n").encode("utf-8")


def _statement_of(event, body: bytes, ledger_id: str, basis: int, args: str, signer: str, time: str,
                  prev: str | None) -> bytes:
    import hashlib

    return statement(ledger_id=ledger_id, request=event.request, basis=basis, args=args,
                     kind=event.__struct_config__.tag, signer=signer, time=time,
                     content_digest=hashlib.sha256(content(body)).hexdigest(), prev=prev)


def sign(event, key: SigningKey, *, signer: Signer, ledger_id: str, basis: int, args: str, prev: str):
    """`event` (one of ledger.events.SIGNABLE, its `ts` set: the signature's time) with its
    `signature`, made with `key` over the version 2 statement. `basis` and `args` are the
    request's arguments before this decision (RequestState.data_seq and .digest); `prev` is the
    hash of the event the decision will follow (the writer's head, under the commit lock)."""
    from ledger.proof.keys import b64

    unsigned = msgspec.structs.replace(event, signature=msgspec.UNSET)
    message = _statement_of(unsigned, encode_event(unsigned), ledger_id, basis, args, signer, event.ts, prev)
    signature = ev.Signature(signer=signer, key=key.name, key_id=key.public.id.hex(), time=event.ts,
                             sig=b64(key.sign(message)), statement=2)
    return msgspec.structs.replace(event, signature=signature)


def problem(event, body: bytes, *, ledger_id: str, basis: int, args: str, proposer: str, status: str,
            roster: Roster) -> str | None:
    """What is wrong with decision `event` (stored as `body`) under `roster`, or None.

    `basis`, `args`, `proposer` and `status` are its request's, before the decision. Rules
    (docs/ledger-format.md section 11.3): the decision is signed; by a key the roster lists; the
    signature's time is not after the event's `ts`; it verifies; a `reviewer` signature is by the
    key of the principal the event names as decider, a reviewer (or, cancelling its own call,
    the proposer's agent); a `service` signature is by a `service` principal's key and attests a
    decider the roster lists with that kind. The one exception: the Gate's own cancel of an ask
    whose interrupt was never written (`by` "countersign", request still interrupting), which is
    no one's decision and can only stop a call."""
    from ledger.proof.keys import MalformedError, unb64

    kind = event.__struct_config__.tag
    who = ev.decider(event)
    signature = event.signature
    if signature is msgspec.UNSET:
        if isinstance(event, ev.Cancelled) and who == RECOVERY and status == "interrupting":
            return None
        return f"the {kind} decision by {who} is not signed"
    found = roster.key(signature.key, signature.key_id)
    if found is None:
        return f"the {kind} decision by {who} is signed with the key {signature.key}+{signature.key_id}, which the roster does not list"
    holder, public = found
    if signature.time > event.ts:
        return f"the {kind} decision by {who} was signed at {signature.time}, after its time {event.ts}"
    try:
        raw = unb64(signature.sig, "the signature")
        prev = event.prev if signature.statement == 2 else None
        message = _statement_of(event, body, ledger_id, basis, args, signature.signer, signature.time, prev)
    except (MalformedError, ValueError):
        raw, message = b"", b""
    if not raw or not public.verify(raw, message):
        return (f"the signature of the {kind} decision by {who} does not verify with {holder.name}'s key: the decision, "
                "its request or its arguments are not what was signed")
    allowed = ("reviewer", "agent") if isinstance(event, ev.Cancelled) and who == proposer else ("reviewer",)
    if signature.signer == "reviewer":
        if holder.name != who:
            return f"the {kind} decision recorded as {who}'s is signed with {holder.name}'s key"
        if holder.kind not in allowed:
            return f"the {kind} decision by {who} is signed by a principal of kind {holder.kind}, not a reviewer"
        if holder.kind == "agent" and who != proposer:
            return f"the {kind} decision by {who} is signed by an agent"
        return None
    if holder.kind != "service":
        return f"the {kind} decision by {who} is signed as the service's with the key of {holder.name}, a {holder.kind}"
    decider = roster.principal(who)
    if decider is None or decider.kind not in allowed:
        what = "is not in the roster" if decider is None else f"is a {decider.kind}, not a reviewer"
        return f"the service attests the {kind} decision by {who}, who {what}"
    return None
