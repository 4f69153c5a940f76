"""The one way a call is decided: by its policy, from the call and what came before it.

The Gate decides every proposal and every edit through `decide`, and `ledger audit` and `policy
whatif` (ledger.replay) decide the recorded ones again through it, so that a replay reproduces a
decision exactly when the Gate's inputs are given back: the policy (pinned by its digest), the
call (tool, arguments and context as stored in the ledger) and what came before it in the ledger
(`Before`). A policy is pure (docs/policy-language.md): it reads nothing else.

`Before` says where the call stands in its ledger: the seq its proposal has (or will have: the
Gate decides before it takes the commit lock, so it may not know it), its run, and `history`, the
history of the call's run that history conditions read (`dsl.history.History`, from the per-run
index ledger.workflow.history.HistoryIndex folds from the ledger's events: the Gate keeps it as it
folds events, a replay keeps the same index as it reads them, and both give a proposal the run's
history as of the event just before it, an edit the calls proposed before its request as of the
event just before the edit). Policies without history conditions (`Policy.reads_history` false)
ignore it, and the Gate and the replays give them none.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from dsl.decision import Decision
from ledger import events as ev


class Before(NamedTuple):
    """What came before a call in its ledger: the `seq` of its proposal (None when not known yet),
    its `run` (None: none), and the `history` of its run as of the events before it (a
    dsl.history.History; None: none kept, or the run has no calls yet)."""

    seq: int | None = None
    run: str | None = None
    history: Any = None


NOTHING_BEFORE = Before()


def decide(policy: Any, tool: str, args: Mapping[str, Any], context: Mapping[str, Any] | None,
           before: Before = NOTHING_BEFORE) -> Decision:
    """The Decision of `policy` (a dsl.Policy) on the call: `tool`, its `args` (a JSON object as
    the ledger stores it), its `context` (the same, or None) and `before`. Raises what
    Policy.evaluate raises (PolicyInputError for a call of the wrong shape); never for a
    condition that does not fit the call (that fails closed inside the Decision)."""
    return policy.evaluate(tool, args, context, history=before.history)


def rule_refs(decision: Decision) -> tuple[ev.RuleRef, ...]:
    """The `rules` a proposal or an edit records for `decision`: each deciding rule's id and the
    line it starts on (0 when no outcome names it)."""
    lines = {o.rule: o.line for o in decision.outcomes}
    return tuple(ev.RuleRef(id=rule, line=lines.get(rule, 0)) for rule in decision.deciding)
