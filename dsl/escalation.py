"""Escalating asks: `timeout 4h else escalate approvers 1 from managers timeout 1h else reject`.

When a stage's timeout passes with no decision the request does not expire: the next stage comes
into force, with its own approvers and timeout, and the approvals given so far no longer count.
The last stage always ends in a rejection (silence never approves). A rule has at most
MAX_STAGES stages, its first included. The reference is docs/policy-language.md "Escalation";
the ledger records each escalation as an `escalated` event (docs/ledger-format.md).

This module holds what the checker, the compiler and the formatter do with the construct, so that
each of them only calls it:
- `check(checker, clause)`: the errors of a timeout clause's escalation chain;
- `stages_of(clause, quorum_of)`: the chain as dsl.requirements.Stage values;
- `text_of(escalation, approvers_text)`: the chain as `fmt` prints it.
"""

from __future__ import annotations

from typing import Callable

from dsl import ast
from dsl.requirements import MAX_STAGES, Quorum, Stage


def check(checker, clause: ast.TimeoutClause) -> None:
    """Report the errors of the stages after `clause` (the rule's first timeout) on `checker`
    (dsl.checker._Checker: its `error`, `approvers` and `timeout`): escalating to nobody (no
    approvers), and more than MAX_STAGES stages. Each stage's approvers and timeout are checked
    as a rule's own are (unknown group, quorum larger than the group, timeout bounds)."""
    stage, current = 1, clause
    while current.escalation is not None:
        stage += 1
        esc = current.escalation
        if stage > MAX_STAGES:
            checker.error(
                f"an ask may have at most {MAX_STAGES} stages; this escalation is stage {stage}",
                esc.keyword_span,
                f"end stage {MAX_STAGES} with 'else reject' (silence never approves, and a request must end)",
            )
            return
        if esc.approvers is None:
            checker.error(
                "this escalates to nobody: an escalation names who decides next",
                esc.keyword_span,
                "write 'else escalate approvers 1 from GROUP timeout 1h'",
            )
        else:
            checker.approvers(esc.approvers)
        checker.timeout(esc.timeout, escalating=True)
        current = esc.timeout


def stages_of(clause: ast.TimeoutClause, quorum_of: Callable[[ast.ApproversClause], Quorum]) -> tuple[Stage, ...]:
    """The stages after `clause`, in order (empty without escalation). `quorum_of` turns a
    stage's approvers clause into its Quorum (as the compiler does for a rule's own)."""
    stages = []
    current = clause
    while current.escalation is not None:
        esc = current.escalation
        assert esc.approvers is not None  # the checker refuses an escalation to nobody
        current = esc.timeout
        stages.append(Stage((quorum_of(esc.approvers),), current.seconds, current.message))
    return tuple(stages)


def text_of(escalation: ast.Escalation, approvers_text: Callable[[ast.ApproversClause], str],
            timeout_text: Callable[[ast.TimeoutClause], str]) -> str:
    """`escalate approvers 1 from managers timeout 1h else reject "..."` as `fmt` prints it."""
    parts = ["escalate"]
    if escalation.approvers is not None:
        parts.append(approvers_text(escalation.approvers))
    parts.append(timeout_text(escalation.timeout))
    return " ".join(parts)
