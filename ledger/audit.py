"""`ledger audit`: does every recorded decision follow the policy that the ledger says made it?

Every `proposed` event records the policy that decided it (`policy_digest`) and what it decided
(`effect`, `rules`); every `edited` event the same for the edited call, which re-entered the
policy. The ledger keeps the text of each policy by that digest (ledger.pinning) and the call
beside each event (its arguments and context). `audit` decides each recorded call again, through
the Gate's own `decide` (ledger.workflow.deciding) with the pinned policy and what came before
the call, and compares: a call *conforms* when the effect and the rules (id and line, in order)
are the ones recorded, a proposal's reasons are the ones it gives (they go back to the agent as
its instructions), and, for an ask, the requirements recorded are the ones it gives: the
`interrupted` event's (and its deadline, its ts plus their timeout), a standing decision's
`covered` ones, and an edit's the combination the Gate makes (ledger.workflow.machine.
combined_requirements) of the requirements in force (interrupted, escalated, or edited before) with
the edited call's. Who may approve, how many, for how long and to whom it escalates are part of
the decision: a ledger whose effect and rules are right but whose approvers are not does not
conform. So the ledger shows not only what was decided, but that the decision followed the policy.

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

from dsl.requirements import Requirements
from ledger import events as ev, replay
from ledger.replay import Call, Closed, Escalate, Interrupt, NOT_DECIDABLE, Replay, Started
from ledger.workflow.deciding import decide, rule_refs
from ledger.workflow.machine import combined_requirements, deadline_after

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
    # what else differs when the effect and rules agree (the requirements of an ask), else None
    detail: str | None = None


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
    # conforming asks whose `interrupted` event is still to come: request → (call, requirements decided)
    asked: dict[int, tuple[Call, Requirements]] = {}
    # open asks: request → (the requirements in force as recorded, the stage)
    in_force: dict[int, tuple[Requirements, int]] = {}

    def differs(call: Call, detail: str, conforming: bool) -> None:
        if conforming:
            report.conforming -= 1
        report.differing += 1
        if len(report.differences) < listed:
            report.differences.append(_finding(call, decided_effect=call.effect, decided_rules=_rules(call.rules),
                                               detail=detail))

    for item in source:
        kind = type(item)
        if kind is Interrupt:
            in_force[item.request] = (item.requirements, 1)
            pending = asked.pop(item.request, None)
            if pending is not None:
                call, decided = pending
                if item.requirements != decided:
                    differs(call, f"the ask's requirements are {_text(item.requirements)}; the policy's are "
                                  f"{_text(decided)}", True)
                elif item.deadline != deadline_after(item.ts, decided.timeout_seconds):
                    differs(call, f"the ask's deadline is {item.deadline}; its timeout gives "
                                  f"{deadline_after(item.ts, decided.timeout_seconds)}", True)
            continue
        if kind is Escalate:
            in_force[item.request] = (item.requirements, item.stage)
            continue
        if kind is Started or kind is Closed:
            in_force.pop(item.request, None)
            asked.pop(item.request, None)
            continue
        if kind is not Call:
            continue
        report.calls += 1
        entry = seen.get(item.policy_digest)
        if entry is None:
            entry = seen[item.policy_digest] = PolicySeen(item.policy_digest, item.policy,
                                                          item.policy_digest in source.policies.pins)
        entry.calls += 1
        finding, reason, decision = _check(item, source.policies)
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
            if decision is not None and item.kind == "proposal" and tuple(item.event.reasons) != tuple(decision.reasons):
                # the reasons go back to the agent as its instructions: a forged one is a forged decision
                differs(item, f"the recorded reasons are {list(item.event.reasons)!r}; the policy gives "
                              f"{list(decision.reasons)!r}", True)
            elif decision is not None:
                _requirements(item, decision, asked, in_force, differs)
        if item.kind == "edit" and item.request in in_force:
            in_force[item.request] = (item.event.requirements, in_force[item.request][1])
    report.events = source.events
    report.policies = list(seen.values())
    return report


def _text(requirements: Requirements) -> str:
    try:
        return requirements.describe()
    except Exception:  # a description is only words: never let it stop the audit
        return repr(requirements)


def _requirements(call: Call, decision, asked, in_force, differs) -> None:
    """Check (or, for a proposal's interrupt, arrange to check) the requirements a conforming
    call recorded against those its decision gives (module docstring)."""
    event = call.event
    if call.kind == "proposal":
        if call.effect != "ask" or decision.requirements is None:
            return
        covered = getattr(event, "remembered", None)
        if isinstance(covered, ev.Covered):
            if covered.requirements != decision.requirements:
                differs(call, f"the standing decision covered requirements {_text(covered.requirements)}; the "
                              f"policy's are {_text(decision.requirements)}", True)
            return
        asked[call.request] = (call, decision.requirements)
        return
    state = in_force.get(call.request)
    if state is None:
        return  # an edit of a request not seen pending: ledger verify judges it
    original, stage = state
    expected = combined_requirements(original, decision.requirements if decision.effect == "ask" else None,
                                     stage=stage)
    if event.requirements != expected:
        differs(call, f"the edit's requirements are {_text(event.requirements)}; combined with the policy's "
                      f"they are {_text(expected)}", True)


def check_call(call: Call, policies: replay.Policies) -> tuple[Finding | None, str | None]:
    """(None, None) when the call's effect and rules conform; (its Finding, None) when they
    differ; (its Finding, why) when it cannot be checked. (The requirements of an ask are checked
    by `audit`, which reads the events around the call.)"""
    return _check(call, policies)[:2]


def _check(call: Call, policies: replay.Policies):
    """`check_call`, and the Decision when the call was decided again (else None)."""
    policy, why = policies.get(call.policy_digest)
    if policy is not None and call.missing is None and call.history_missing is not None and policy.reads_history:
        why = call.history_missing
    if policy is None or call.missing is not None or why is not None:
        why = why or call.missing
        return _finding(call, reason=why), why, None
    try:
        decision = decide(policy, call.tool, call.args, call.context, call.before)
    except Exception as exc:  # a call of a shape no policy decides (PolicyInputError): never conforming
        why = f"{NOT_DECIDABLE}: {exc}"
        return _finding(call, reason=why), why, None
    decided = rule_refs(decision)
    if decision.effect == call.effect and decided == tuple(call.rules):
        return None, None, decision
    return _finding(call, decided_effect=decision.effect, decided_rules=_rules(decided)), None, None


def _finding(call: Call, **more) -> Finding:
    return Finding(seq=call.seq, request=call.request, kind=call.kind, ts=call.ts, tool=call.tool,
                   policy_digest=call.policy_digest, recorded_effect=call.effect, recorded_rules=_rules(call.rules),
                   **more)
