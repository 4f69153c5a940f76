"""What an `ask` needs before a call may run, and how several of them combine.

When more than one `ask` rule matches a call, the request must satisfy all of them at once, so
their requirements combine to the strictest (`strictest`): the largest quorum, only approvers
every rule admits, only decisions every rule allows, the earliest timeout.
"""

from __future__ import annotations

from typing import Annotated, Iterable, Literal

import msgspec

DECISIONS = ("approve", "edit", "reject", "respond")
DEFAULT_DECISIONS = ("approve", "edit", "reject")
DEFAULT_TIMEOUT_SECONDS = 24 * 3600
TIMEOUT_OUTCOMES = ("reject",)


Decision = Literal["approve", "edit", "reject", "respond"]
Positive = Annotated[int, msgspec.Meta(ge=1)]


class Requirements(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The conditions a human decision must meet.

    - `quorum`: how many distinct approvers must approve the same arguments digest (≥ 1). The
      proposer never counts (four-eyes).
    - `approvers`: the identities allowed to decide, sorted; `None` means anyone but the proposer.
    - `groups`: the group names the approvers came from, for display only.
    - `decisions`: the decisions a reviewer may give, a subset of approve, edit, reject, respond.
    - `timeout_seconds`: seconds from the interrupt until the request expires.
    - `on_timeout`: what expiry means; always "reject" (silence never approves).
    - `timeout_message`: the text the agent receives on expiry, if the author wrote one.
    """

    quorum: Positive = 1
    approvers: tuple[str, ...] | None = None
    groups: tuple[str, ...] = ()
    decisions: tuple[Decision, ...] = DEFAULT_DECISIONS
    timeout_seconds: Positive = DEFAULT_TIMEOUT_SECONDS
    on_timeout: Literal["reject"] = "reject"
    timeout_message: str | None = None

    def satisfiable(self) -> bool:
        """False when fewer identities may approve than the quorum needs."""
        return self.approvers is None or len(self.approvers) >= self.quorum

    def allows(self, approver: str) -> bool:
        return self.approvers is None or approver in self.approvers


def strictest(items: Iterable[Requirements]) -> Requirements:
    """Combine requirements so that meeting the result meets every one of them.

    Raises ValueError on an empty input. Ties on the timeout keep the first one's message.
    """
    reqs = list(items)
    if not reqs:
        raise ValueError("strictest() needs at least one Requirements")
    if len(reqs) == 1:
        return reqs[0]
    approvers: set[str] | None = None
    groups: list[str] = []
    for r in reqs:
        if r.approvers is not None:
            approvers = set(r.approvers) if approvers is None else approvers & set(r.approvers)
        groups.extend(g for g in r.groups if g not in groups)
    allowed = set(reqs[0].decisions)
    for r in reqs[1:]:
        allowed &= set(r.decisions)
    earliest = min(reqs, key=lambda r: r.timeout_seconds)
    return Requirements(
        quorum=max(r.quorum for r in reqs),
        approvers=tuple(sorted(approvers)) if approvers is not None else None,
        groups=tuple(groups),
        decisions=tuple(d for d in DECISIONS if d in allowed),
        timeout_seconds=earliest.timeout_seconds,
        on_timeout="reject",
        timeout_message=earliest.timeout_message,
    )
