"""What an `ask` needs before a call may run, and how several of them combine.

An ask rule asks for a *quorum*: a number of distinct approvers, optionally from a set of
identities (`approvers 2 from finance`). When several ask rules match one call, every one of them
must be satisfied, so their requirements combine (`strictest`) by keeping *all* their quorums
(a call that needs two people from finance and one from security needs both), allowing only the
decisions every rule allows, and expiring at the earliest timeout. One approval counts towards
every quorum whose set admits the approver. This is how multi-party review works in practice
(every matching owner group must approve), and it never makes a call impossible to approve just
because two rules name different groups.

An ask may escalate (`timeout 4h else escalate approvers 1 from managers timeout 1h else
reject`): when a stage's timeout passes with no decision, the next `Stage` comes into force with
its own quorum and timeout, and the approvals given so far no longer count (the new stage counts
afresh). The last stage always ends in a rejection: silence never approves. Escalating
requirements combine stage by stage over time (`strictest`, docs/policy-language.md
"Escalation"): at every moment the combination asks for the quorums of the stage each rule is in
at that moment, it moves to a new stage whenever one of the rules does, and it expires when the
first rule's last stage ends.
"""

from __future__ import annotations

from typing import Annotated, Collection, Iterable, Literal

import msgspec

DECISIONS = ("approve", "edit", "reject", "respond")
DEFAULT_DECISIONS = ("approve", "edit", "reject")
DEFAULT_TIMEOUT_SECONDS = 24 * 3600
TIMEOUT_OUTCOMES = ("reject",)
REMEMBER_SCOPES = ("run", "session")  # narrowest first; a duration is the third kind, "until"
MAX_REMEMBER_SECONDS = 365 * 24 * 3600
MAX_STAGES = 3  # stages of one ask rule, its first included: `else escalate` at most twice (a load error beyond)

Decision = Literal["approve", "edit", "reject", "respond"]
Positive = Annotated[int, msgspec.Meta(ge=1)]


class Quorum(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`count` distinct approvers (≥ 1) from `approvers` (sorted identities; None: anyone but the
    proposer). `group` is the group name the rule wrote, for display."""

    count: Positive = 1
    approvers: tuple[str, ...] | None = None
    group: str | None = None

    def admits(self, who: str) -> bool:
        return self.approvers is None or who in self.approvers

    def met_by(self, approvers: Collection[str]) -> bool:
        return sum(1 for who in set(approvers) if self.admits(who)) >= self.count

    def implied_by(self, other: "Quorum") -> bool:
        """True when every set of approvals that meets `other` also meets this quorum."""
        if other.count < self.count:
            return False
        if self.approvers is None:
            return True
        return other.approvers is not None and set(other.approvers) <= set(self.approvers)

    def describe(self) -> str:
        who = (
            "anyone but the proposer"
            if self.approvers is None
            else (f"{self.group} (" if self.group else "") + ", ".join(self.approvers) + (")" if self.group else "")
        )
        return f"{self.count} from {who}"


class Remember(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """How far a standing decision of an ask may reach (the rule's `remember` clause,
    docs/policy-language.md "Remembered decisions"): `scope` "run" (the request's run), "session"
    (the `session_id` of the call's context; a session scope also admits a run scope) or "until"
    (a time: `seconds` is the longest a reviewer may choose, from the decision's ts)."""

    scope: Literal["run", "session", "until"]
    seconds: Positive | None = None

    def admits(self, other: "Remember") -> bool:
        """Does this allowance admit a standing decision of `other`'s scope (and, for until, of
        at most `other.seconds`)? run ⊂ session; durations compare by length; a duration and a
        run or session scope are never comparable (one is bounded in time, the other in place)."""
        if self.scope == "until" or other.scope == "until":
            return self.scope == other.scope == "until" and (other.seconds or 0) <= (self.seconds or 0)
        return REMEMBER_SCOPES.index(other.scope) <= REMEMBER_SCOPES.index(self.scope)

    def describe(self) -> str:
        return f"remember for up to {self.seconds}s" if self.scope == "until" else f"remember for the {self.scope}"


def narrowest_remember(items: Iterable[Remember | None]) -> Remember | None:
    """The allowance that every one of `items` admits, or None: any None (a rule without
    `remember`), or a duration beside a run or session scope, leaves nothing to remember."""
    found = list(items)
    if not found or any(r is None for r in found):
        return None
    narrowest = found[0]
    for r in found[1:]:
        if narrowest.admits(r):  # type: ignore[union-attr]
            narrowest = r
        elif not r.admits(narrowest):  # type: ignore[union-attr, arg-type]
            return None
    return narrowest


class Stage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A later stage of an escalating ask: the quorums that may decide once the stage before it
    timed out, the seconds it lasts (from the `escalated` event that starts it), and the text the
    agent receives if it is the last stage and expires (None: the default text)."""

    quorums: Annotated[tuple[Quorum, ...], msgspec.Meta(min_length=1)]
    timeout_seconds: Positive
    timeout_message: str | None = None


class Requirements(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The conditions a human decision must meet.

    - `quorums`: every one must be met by the distinct approvers of the current arguments; the
      proposer never counts (four-eyes).
    - `decisions`: the decisions a reviewer may give, a subset of approve, edit, reject, respond.
    - `timeout_seconds`: seconds from the interrupt until the request expires.
    - `on_timeout`: what expiry means; always "reject" (silence never approves).
    - `timeout_message`: the text the agent receives on expiry, if the author wrote one.
    - `remember`: how far a reviewer may make the decision standing (Remember); unset (and absent
      from the encoding) when it may not be remembered.
    - `escalation`: the stages that follow this one, in order (Stage), when the ask escalates
      instead of expiring; unset (and absent from the encoding, so requirements without
      escalation encode as before it existed) when this stage is the last. The decisions and
      `remember` stay those of the rule in every stage.
    """

    quorums: Annotated[tuple[Quorum, ...], msgspec.Meta(min_length=1)] = (Quorum(),)  # at least one (docs/ledger-format.md, 3)
    decisions: tuple[Decision, ...] = DEFAULT_DECISIONS
    timeout_seconds: Positive = DEFAULT_TIMEOUT_SECONDS
    on_timeout: Literal["reject"] = "reject"
    timeout_message: str | None = None
    remember: Remember | msgspec.UnsetType = msgspec.UNSET
    escalation: Annotated[tuple[Stage, ...], msgspec.Meta(min_length=1)] | msgspec.UnsetType = msgspec.UNSET

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages after this one (empty when it is the last)."""
        return () if self.escalation is msgspec.UNSET else self.escalation  # type: ignore[return-value]

    def escalated(self) -> "Requirements | None":
        """The requirements in force once this stage times out: the next stage's quorums,
        timeout and message, the same decisions and `remember`, and the stages after it. None when
        this stage is the last (its timeout expires the request)."""
        stages = self.stages
        if not stages:
            return None
        nxt, rest = stages[0], stages[1:]
        return msgspec.structs.replace(self, quorums=nxt.quorums, timeout_seconds=nxt.timeout_seconds,
                                       timeout_message=nxt.timeout_message,
                                       escalation=rest if rest else msgspec.UNSET)

    def describe_escalation(self) -> str:
        """` to 1 from managers (m1) for 3600s, then expires as reject` (each later stage, the
        last one's end), or "" when this stage is the last."""
        if not self.stages:
            return ""
        parts = [f"{' and '.join(q.describe() for q in s.quorums)} for {s.timeout_seconds}s" for s in self.stages]
        return " to " + ", then to ".join(parts) + f", then expires as {self.on_timeout}"

    @property
    def rememberable(self) -> Remember | None:
        """`remember`, or None when unset."""
        return None if self.remember is msgspec.UNSET else self.remember  # type: ignore[return-value]

    @classmethod
    def single(
        cls, count: int = 1, approvers: Iterable[str] | None = None, group: str | None = None, **rest
    ) -> "Requirements":
        """Requirements with one quorum: `count` approvers from `approvers` (None: anyone)."""
        members = tuple(sorted(set(approvers))) if approvers is not None else None
        return cls(quorums=(Quorum(count, members, group),), **rest)

    def satisfiable(self) -> bool:
        """False when some quorum needs more approvers than its set holds."""
        return all(bool(quorums) and all(q.approvers is None or len(q.approvers) >= q.count for q in quorums)
                   for quorums in [self.quorums] + [s.quorums for s in self.stages])

    def allows(self, who: str) -> bool:
        """May `who` decide (approve, edit, reject, respond)? True when some quorum admits them."""
        return any(q.admits(who) for q in self.quorums)

    def met_by(self, approvers: Collection[str]) -> bool:
        """True when the distinct `approvers` meet every quorum."""
        return all(q.met_by(approvers) for q in self.quorums)

    def describe(self) -> str:
        return " and ".join(q.describe() for q in self.quorums)


def combine_quorums(quorums: Iterable[Quorum]) -> tuple[Quorum, ...]:
    """All the quorums, without duplicates and without those another one implies, in order."""
    items: list[Quorum] = []
    for q in quorums:
        if q not in items:
            items.append(q)
    kept = []
    for i, q in enumerate(items):
        if any(j != i and q.implied_by(other) and not (other.implied_by(q) and j > i) for j, other in enumerate(items)):
            continue
        kept.append(q)
    return tuple(kept)


def strictest(items: Iterable[Requirements]) -> Requirements:
    """Combine requirements so that meeting the result meets every one of them.

    Without escalation: all the quorums, the decisions every one allows, the earliest timeout
    (ties keep the first one's message), the narrowest `remember`. With escalation, the same
    over time (`_combined_stages`): the result's stages are the intervals between the moments
    any of them changes stage, each asking for the quorums of the stages in force then, up to
    the earliest end of a last stage (whose message it keeps). Raises ValueError on an empty input.
    """
    reqs = list(items)
    if not reqs:
        raise ValueError("strictest() needs at least one Requirements")
    if len(reqs) == 1:
        return reqs[0]
    allowed = set(reqs[0].decisions)
    for r in reqs[1:]:
        allowed &= set(r.decisions)
    remember = narrowest_remember(r.rememberable for r in reqs)
    first, *later = _combined_stages(reqs)
    return Requirements(
        quorums=first.quorums,
        decisions=tuple(d for d in DECISIONS if d in allowed),
        timeout_seconds=first.timeout_seconds,
        on_timeout="reject",
        timeout_message=first.timeout_message,
        remember=msgspec.UNSET if remember is None else remember,
        escalation=tuple(later) if later else msgspec.UNSET,
    )


def _combined_stages(reqs: list[Requirements]) -> list[Stage]:
    """The stages of `strictest(reqs)`, the current one first. Each requirement is a timeline:
    stage k is in force from the sum of the timeouts before it to that sum plus its own. The
    combination ends at the earliest end of any timeline (ties: the first one's, and its last
    stage's message), and changes stage at every moment before that where any timeline does; in
    each interval it asks for the quorums of every stage in force (combine_quorums). Without
    escalation this is one stage: all the quorums, the earliest timeout."""
    timelines = []  # per requirement: [(end, stage)] with `end` the second its stage ends, from the interrupt
    for r in reqs:
        at, spans = 0, []
        for stage in (Stage(r.quorums, r.timeout_seconds, r.timeout_message), *r.stages):
            at += stage.timeout_seconds
            spans.append((at, stage))
        timelines.append(spans)
    last = min(timelines, key=lambda spans: spans[-1][0])
    end = last[-1][0]
    cuts = sorted({at for spans in timelines for at, _ in spans if at < end} | {end})
    stages, start = [], 0
    for cut in cuts:
        in_force = [next(stage for at, stage in spans if at > start) for spans in timelines]
        stages.append(Stage(combine_quorums(q for s in in_force for q in s.quorums), cut - start,
                            last[-1][1].timeout_message if cut == end else None))
        start = cut
    return stages
