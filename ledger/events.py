"""The events of a ledger: msgspec Structs forming one tagged union on the field `kind`.

Every event carries `seq` (1, 2, 3, … with no gaps), `ts` (UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ`,
always six fractional digits so that text order is time order) and `prev` (the previous event's
hash; 64 zeros before the first event). The ledger fills these three in when it appends.

A request is identified by the `seq` of its `proposed` event; every later event about it names
that number in `request`. The life of a request:

    proposed ─ allow ─────────────────────────────► execution_started ─► executed
             ─ deny  (final)                        ▲
             ─ ask ─► interrupted ─► approved* ─────┘ (once the quorum approves the current digest)
                                  ─► edited ──► approved* ...
                                  ─► rejected | responded | expired | cancelled   (final)
                                  ─► escalated ─► (pending again, with the next stage's requirements)

Nothing a caller supplies as free-form JSON sits inside an event: `proposed` carries
`args_digest` and `context_digest`, `edited` carries `args_digest`, and the arguments and context
themselves are stored beside the event on the same line, in its `data` member (see
docs/ledger-format.md). So every member name in an event comes from this module, none is named
`hash`, and the line format can rely on that; and personal data can be redacted from `data`
without touching the hashed bytes.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec

from dsl.requirements import Remember, Requirements
from ledger.fieldpath import CANONICAL_PATTERN

FORMAT_V1 = "countersign-ledger/1"
FORMAT = "countersign-ledger/2"
"""The format a new ledger is written in. Version 2 is version 1 plus signed decisions (the
optional `signature` member of approved, edited, rejected, responded and cancelled events), the
`roster` event and the `policy` event; a version 1 ledger may hold none of them
(docs/ledger-format.md, section 11)."""
FORMATS = (FORMAT_V1, FORMAT)
GENESIS_PREV = "0" * 64

# Field types with their rules, so that decoding a body validates it (docs/ledger-format.md, 3).
# Exact lengths as well as patterns: a pattern's `$` also matches before a final newline.
# A field path in its one canonical spelling (ledger.fieldpath).
FieldPath = Annotated[str, msgspec.Meta(pattern=CANONICAL_PATTERN)]
Hex64 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$", min_length=64, max_length=64)]
Timestamp = Annotated[
    str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$", min_length=27, max_length=27)
]
Seq = Annotated[int, msgspec.Meta(ge=1)]
KEY_MAX_LENGTH = 256
# An idempotency key: 1 to 256 characters (Unicode code points), any of them.
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=KEY_MAX_LENGTH)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]  # at least one character (Unicode code point)
Effect = Literal["allow", "deny", "ask"]


class Event(msgspec.Struct, tag_field="kind", kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Fields every event has. `seq`, `ts` and `prev` are assigned by `Ledger.append`.

    `key` is an optional idempotency key chosen by the appender (for example
    "request 42/approved/fin-1"): appending an event whose key is already in the ledger returns
    the original event when everything but seq, ts and prev is the same, and is refused otherwise
    (ledger.store.log.KeyConflict). It is absent from the body when unset (never `null`), and, when
    present, it follows `prev` and is covered by the hash.
    """

    seq: int = 0
    ts: str = ""
    prev: str = ""  # checked by the verifier (a hash, or 64 zeros before the first event)
    key: Key | msgspec.UnsetType = msgspec.UNSET


KeyName = Annotated[str, msgspec.Meta(min_length=1, max_length=KEY_MAX_LENGTH)]
KeyId = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{8}$", min_length=8, max_length=8)]
# An Ed25519 signature (64 bytes) in standard base64 with its padding: 88 characters.
SignatureText = Annotated[str, msgspec.Meta(pattern="^[A-Za-z0-9+/]{86}==$", min_length=88, max_length=88)]


class Signature(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The signature of a decision (docs/ledger-format.md, section 11): who signed (`signer`:
    "reviewer", the decider's own key, or "service", the approval service's key attesting a
    session it authenticated), with which key (its signed-note name and 8-hex key id), when
    (`time`, spelled like `ts`, never later than the event's `ts`) and the Ed25519 signature
    `sig` (base64) of the decision statement (ledger.proof.decisions). `statement` is the
    statement's version: 2 (which binds the event's `prev`, and so every event before it), or
    absent for version 1 (signatures written before it)."""

    signer: Literal["reviewer", "service"]
    key: KeyName
    key_id: KeyId
    time: Timestamp
    sig: SignatureText
    statement: Literal[2] | msgspec.UnsetType = msgspec.UNSET


class RuleRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A rule that decided: its id and the line it starts on in the policy source."""

    id: str
    line: Annotated[int, msgspec.Meta(ge=0)]


class Genesis(Event, tag="genesis", kw_only=True, frozen=True):
    """The first event of every ledger (seq 1): the format and a random ledger id, so that
    two ledgers never share a chain. New ledgers are `countersign-ledger/2` (FORMAT)."""

    format: Literal["countersign-ledger/1", "countersign-ledger/2"]
    ledger_id: str


class Covered(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """How a proposal the policy answered `ask` was decided by a standing decision instead of a
    person (docs/ledger-format.md, section 3, `remembered`): `by` is the seq of the `remembered`
    event, `requirements` what the policy asked for this call (their `remember` admits the
    standing decision's scope), `session` the `session_id` of the call's context (a string), when
    it has one."""

    by: Seq
    requirements: Requirements
    session: str | None = None


class Proposed(Event, tag="proposed", kw_only=True, frozen=True):
    """An agent proposed a tool call and the policy decided its effect.

    `proposer` is the agent's identity from the caller's authenticated context; `run` groups the
    calls of one agent run; `call_id` is the agent framework's id for the call (e.g. a tool_use_id),
    used to make a retried proposal idempotent. `rules` are the rules that decided, `reasons` what
    the agent or the reviewer reads. `remembered` (absent unless set): the policy said ask, and a
    standing decision decided the call (Covered); it is then allowed or rejected without a person.
    """

    run: str | None
    proposer: str
    call_id: str | None
    tool: str
    args_digest: Hex64
    context_digest: Hex64
    policy: str
    policy_digest: Hex64
    effect: Effect
    rules: tuple[RuleRef, ...]
    reasons: tuple[str, ...]
    remembered: Covered | msgspec.UnsetType = msgspec.UNSET


class Interrupted(Event, tag="interrupted", kw_only=True, frozen=True):
    """An `ask` paused the call for a human: what a decision must meet, and when it expires (UTC)."""

    request: Seq
    requirements: Requirements
    deadline: Timestamp


class Approved(Event, tag="approved", kw_only=True, frozen=True):
    """One approver approved the arguments whose digest they saw (`args_digest`)."""

    request: Seq
    approver: str
    args_digest: Hex64
    comment: str | None
    signature: Signature | msgspec.UnsetType = msgspec.UNSET


class Edited(Event, tag="edited", kw_only=True, frozen=True):
    """A reviewer changed the arguments. The edited call was decided again by the policy
    (`effect`, `rules`); the edit counts as the editor's approval of the new digest, and
    `requirements` are those now in force (the strictest of the original and the new ones)."""

    request: Seq
    editor: str
    args_digest: Hex64
    replaces: Hex64
    policy_digest: Hex64
    effect: Effect
    rules: tuple[RuleRef, ...]
    requirements: Requirements
    reason: str | None
    signature: Signature | msgspec.UnsetType = msgspec.UNSET


class Rejected(Event, tag="rejected", kw_only=True, frozen=True):
    """A reviewer rejected the call. `reason` goes back to the agent as an instruction."""

    request: Seq
    approver: str
    reason: str
    signature: Signature | msgspec.UnsetType = msgspec.UNSET


class Responded(Event, tag="responded", kw_only=True, frozen=True):
    """A reviewer answered in place of the tool; `message` is returned to the agent as the result."""

    request: Seq
    approver: str
    message: str
    signature: Signature | msgspec.UnsetType = msgspec.UNSET


class Remembered(Event, tag="remembered", kw_only=True, frozen=True):
    """A reviewer made their decision of a request standing: written in the same write as, and
    just before, that decision (an approval that alone meets the requirements, or a rejection).
    Later calls of `tool` by the request's proposer, decided `ask` by the policy of
    `policy_digest` and by the same set of rules as the request, whose requirements admit `scope`,
    within it, with the arguments `args_digest` (None: any), are decided the same way without
    asking, until it is forgotten or another policy is loaded (docs/ledger-format.md, section 12). `scope.scope` says what `within` is: "run",
    the request's run; "session", the `session_id` of the request's context; "until", a time
    (`ts` plus `scope.seconds`). `reason` is the rejection's reason (None for an approval)."""

    request: Seq
    approver: str
    decision: Literal["approve", "reject"]
    tool: str
    policy_digest: Hex64
    scope: Remember
    within: str
    args_digest: Hex64 | None
    reason: str | None
    signature: Signature | msgspec.UnsetType = msgspec.UNSET


class Forgotten(Event, tag="forgotten", kw_only=True, frozen=True):
    """A standing decision (the `remembered` event at seq `standing`) revoked: from this event on
    it covers no call (docs/ledger-format.md, section 12). `by` is who revoked it (from the
    caller's authentication), `reason` why. Forgetting never lets anything run: the calls it no
    longer covers are asked about again (and a Gate cancels, in the same write, those it allowed
    that have not started)."""

    standing: Seq
    by: NonEmpty
    reason: str | None


class Expired(Event, tag="expired", kw_only=True, frozen=True):
    """The deadline passed without a decision; the safe default (`outcome`, always reject) applied."""

    request: Seq
    outcome: Literal["reject"]
    message: str | None


class Escalated(Event, tag="escalated", kw_only=True, frozen=True):
    """A stage of an escalating ask timed out with no decision, and the next one is in force
    (dsl.requirements, docs/ledger-format.md): `stage` is its number (2 for the first
    escalation), `requirements` the request's requirements' next stage
    (Requirements.escalated()), `deadline` this event's ts plus its timeout. The approvals given
    before it count no more. Version 2 only."""

    request: Seq
    stage: Annotated[int, msgspec.Meta(ge=2)]
    requirements: Requirements
    deadline: Timestamp


class Cancelled(Event, tag="cancelled", kw_only=True, frozen=True):
    """The proposer (or an operator) withdrew the call before it ran."""

    request: Seq
    by: str
    reason: str | None
    signature: Signature | msgspec.UnsetType = msgspec.UNSET


class ExecutionStarted(Event, tag="execution_started", kw_only=True, frozen=True):
    """Written, and made durable, before the tool runs: the digest of the arguments it runs with.
    A crash after this event and before `executed` leaves the outcome unknown, and the call is
    never run again."""

    request: Seq
    args_digest: Hex64
    executor: str | None


class Executed(Event, tag="executed", kw_only=True, frozen=True):
    """The tool ran. `outcome` is "ok" or "error"; `result_digest` is the structural digest of a
    JSON result (None when the result is not JSON, or None), `error` the exception's type and
    message. When the executor keeps the result (an opt-in), the line's data is `{"result": R}`
    (docs/ledger-format.md, section 5); otherwise null."""

    request: Seq
    args_digest: Hex64
    outcome: Literal["ok", "error"]
    result_digest: Hex64 | None
    error: str | None


class Recovered(Event, tag="recovered", kw_only=True, frozen=True):
    """A writer found a torn last line and moved it aside: a write that stopped part way (a crash;
    never acknowledged), or what is left of a line where the ledger was cut, which only a
    checkpoint or an expected head tells apart. Its size and SHA-256 are kept here, the bytes in
    `quarantine`."""

    segment: str
    offset: Annotated[int, msgspec.Meta(ge=0)]
    fragment_bytes: Annotated[int, msgspec.Meta(ge=1)]
    fragment_sha256: Hex64
    quarantine: str


class RosterRecorded(Event, tag="roster", kw_only=True, frozen=True):
    """A Gate started (or reloaded) with a roster of principals (ledger.proof.roster): its
    digest. The roster in force for a decision is the one the last such event before it names;
    `ledger verify --roster` checks each decision's signature against it. `by` is who started
    the Gate (an operating system account, or the service's principal). Version 2 only."""

    digest: Hex64
    by: str


class PinnedFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One source file of a pinned policy (dsl.sources): its path as the policy names it and the
    hex SHA-256 of its bytes. The bytes themselves are the event's data (docs/ledger-format.md,
    section 11.5)."""

    path: str
    sha256: Hex64


class PolicyLoaded(Event, tag="policy", kw_only=True, frozen=True):
    """A Gate started, or reloaded, deciding with a policy (dsl.Policy): its `name` and its
    `digest` (Policy.digest, hex SHA-256 of the source bytes: what the `policy_digest` of the
    proposals it decides carries). The policy in force after this event is the one it names, until
    the next such event. `by` is who loaded it (an operating system account, or the service's
    principal; at least one character); `source` the file it was read from, for people (not
    checked, not trusted; None when unknown). Version 2 only (docs/ledger-format.md, section 11.5).

    `files` (absent in events written before policies were pinned): the policy's source files,
    root first (dsl.sources), each with the SHA-256 of its bytes, which combine, with the roster
    groups it names, into `digest`. The line's data then holds the files' text and those groups
    (ledger.pinning), so that the text that decided is kept in the ledger, checked by the chain."""

    name: str
    digest: Hex64
    by: NonEmpty
    source: str | None
    files: Annotated[tuple[PinnedFile, ...], msgspec.Meta(min_length=1)] | msgspec.UnsetType = msgspec.UNSET


class Redacted(Event, tag="redacted", kw_only=True, frozen=True):
    """Personal data removed from the data beside an earlier event: at `path` (`args.card_number`,
    `args.items[0].cc`, `context.cwd`) of the data of event `target`, the value whose structural
    digest is `value_digest` was replaced by the marker `{"$redacted": value_digest}`. The chain
    still covers the arguments' digest, which the marker lets verify recompute. `by` is who
    redacted, `reason` why (a legal basis, a ticket)."""

    target: Seq
    path: FieldPath
    value_digest: Hex64
    reason: str
    by: str


AnyEvent = Union[
    Genesis,
    Proposed,
    Interrupted,
    Approved,
    Edited,
    Rejected,
    Responded,
    Remembered,
    Forgotten,
    Expired,
    Cancelled,
    ExecutionStarted,
    Executed,
    Recovered,
    Redacted,
    RosterRecorded,
    PolicyLoaded,
    Escalated,
]

KINDS = tuple(cls.__struct_config__.tag for cls in AnyEvent.__args__)
WITH_DATA = (Proposed, Edited)  # the events whose line carries data (arguments, context)
# an `executed` line may carry the tool's result as data, when the executor chose to keep it
SIGNABLE = (Approved, Edited, Rejected, Responded, Cancelled, Remembered)  # the decisions that may carry a `signature`


def decider(event: Event) -> str:
    """The identity an event of SIGNABLE records as its author: approver, editor, or `by`."""
    if isinstance(event, Edited):
        return event.editor
    if isinstance(event, Cancelled):
        return event.by
    return event.approver

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


encode_body = _encoder.encode
"""encode_event itself, without the Python call around it: for the writer's loop."""


def encode_event(event: Event) -> bytes:
    """The event's body bytes: compact JSON, `kind` first, then the fields in declaration order."""
    return _encoder.encode(event)


def decode_event(body: bytes) -> AnyEvent:
    """Decode and validate body bytes. Raises msgspec.ValidationError or msgspec.DecodeError."""
    return _decoder.decode(body)
