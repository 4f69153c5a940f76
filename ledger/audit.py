"""`ledger audit`: does every recorded decision follow the policy that the ledger says made it?

Every `proposed` event records the policy that decided it (`policy_digest`) and what it decided
(`effect`, `rules`); every `edited` event the same for the edited call, which re-entered the
policy. The ledger keeps the text of each policy by that digest (ledger.pinning) and the call
beside each event (its arguments and context). `audit` decides each recorded call again, through
the Gate's own `decide` (ledger.workflow.deciding) with the pinned policy and what came before
the call, and compares: a call *conforms* when the effect and the rules (id and line, in order)
are the ones recorded. So the ledger shows not only what was decided, but that the decision
followed the policy.

A policy that reads the run's history (`run`, calls(), sources(), ...) is given, for each call,
the history the Gate gave it: the replay folds the ledger's events into the Gate's own per-run
index as it reads them (ledger.replay, ledger.workflow.history), when a pinned policy reads
history.

A call that cannot be decided again is *not checkable*, never conforming: the policy's text is
not in the ledger (written before policies were pinned, or by a writer that did not pin it), it
does not load, the call's arguments or context were redacted, or the policy reads history and
some of the run's earlier data was redacted. Each is counted by why.

The audit reads the ledger as recorded; whether it was tampered with is `ledger verify`'s
question (a pinned text is checked against its digest all the same).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger import replay
from ledger.replay import Call, NOT_DECIDABLE, Replay
from ledger.workflow.deciding import decide, rule_refs

LISTED = 1000  # calls listed in each list of a report; the counts cover all


class Rule(msgspec.Struct, frozen=True):
    id: str
    line: int


class Finding(msgspec.Struct, frozen=True):
    """A call whose recorded decision is not what its policy decides (or that cannot be
    checked: then `reason` says why, and the `decided_` members are empty)."""

    seq: int
    request: int
    kind: str  # proposal, edit
    ts: str
    tool: str
    policy_digest: str
    recorded_effect: str
    recorded_rules: list[Rule]
    decided_effect: str | None = None
    decided_rules: list[Rule] | None = None
    reason: str | None = None


class PolicySeen(msgspec.Struct):
    digest: str
    name: str
    pinned: bool
    calls: int = 0


class AuditReport(msgspec.Struct):
    """What `audit` found. `calls` = `conforming` + `differing` + `unchecked`; the lists hold the
    first LISTED of each; `unchecked_by_reason` counts the unchecked calls by why."""

    path: str
    events: int = 0
    calls: int = 0
    conforming: int = 0
    differing: int = 0
    unchecked: int = 0
    unchecked_by_reason: dict[str, int] = msgspec.field(default_factory=dict)
    policies: list[PolicySeen] = msgspec.field(default_factory=list)
    differences: list[Finding] = msgspec.field(default_factory=list)
    not_checkable: list[Finding] = msgspec.field(default_factory=list)

    @property
    def conforms(self) -> bool:
        """Every call was decided again and agreed."""
        return self.differing == 0 and self.unchecked == 0


def _rules(refs) -> list[Rule]:
    return [Rule(r.id, r.line) for r in refs]


def audit(path: str | Path, listed: int = LISTED) -> AuditReport:
    """Audit the ledger at `path` (module docstring). Raises LedgerUnreadable (not a ledger) and
    LedgerCorrupt (a line that is not an event)."""
    source = Replay(path)
    report = AuditReport(path=str(path))
    seen: dict[str, PolicySeen] = {}
    for item in source:
        if type(item) is not Call:
            continue
        report.calls += 1
        entry = seen.get(item.policy_digest)
        if entry is None:
            entry = seen[item.policy_digest] = PolicySeen(item.policy_digest, item.policy,
                                                          item.policy_digest in source.policies.pins)
        entry.calls += 1
        finding, reason = check_call(item, source.policies)
        if reason is not None:
            report.unchecked += 1
            category = reason.split(":")[0]
            report.unchecked_by_reason[category] = report.unchecked_by_reason.get(category, 0) + 1
            if len(report.not_checkable) < listed:
                report.not_checkable.append(finding)
        elif finding is not None:
            report.differing += 1
            if len(report.differences) < listed:
                report.differences.append(finding)
        else:
            report.conforming += 1
    report.events = source.events
    report.policies = list(seen.values())
    return report


def check_call(call: Call, policies: replay.Policies) -> tuple[Finding | None, str | None]:
    """(None, None) when the call conforms; (its Finding, None) when it differs; (its Finding,
    why) when it cannot be checked."""
    policy, why = policies.get(call.policy_digest)
    if policy is not None and call.missing is None and call.history_missing is not None and policy.reads_history:
        why = call.history_missing
    if policy is None or call.missing is not None or why is not None:
        why = why or call.missing
        return _finding(call, reason=why), why
    try:
        decision = decide(policy, call.tool, call.args, call.context, call.before)
    except Exception as exc:  # a call of a shape no policy decides (PolicyInputError): never conforming
        why = f"{NOT_DECIDABLE}: {exc}"
        return _finding(call, reason=why), why
    decided = rule_refs(decision)
    if decision.effect == call.effect and decided == tuple(call.rules):
        return None, None
    return _finding(call, decided_effect=decision.effect, decided_rules=_rules(decided)), None


def _finding(call: Call, **more) -> Finding:
    return Finding(seq=call.seq, request=call.request, kind=call.kind, ts=call.ts, tool=call.tool,
                   policy_digest=call.policy_digest, recorded_effect=call.effect, recorded_rules=_rules(call.rules),
                   **more)
