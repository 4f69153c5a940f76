"""`policy whatif`: what another policy would have decided on the calls a ledger recorded.

Every recorded proposal is decided again under the new policy, through the Gate's own `decide`
(ledger.workflow.deciding), with its recorded arguments, context and what came before it, and
compared with the effect recorded. The report says:

- which calls change effect, counted by transition (allow→ask, ask→deny, ...) and by the new
  policy's deciding rules (`(default)` when its default decided);
- the reviewer load before and after: asks by approver group (a quorum's `group`, else its
  approvers, else `anyone`) and by UTC day. Before, an ask is a recorded `interrupted` event (so a
  call a standing decision covered is not counted: no person was asked); after, a proposal the
  new policy answers ask (whether a standing decision would have covered it cannot be known).
  Per day is over the days that had proposals;
- the calls a new deny would have stopped: the proposals the new policy denies, recorded
  otherwise, that started executing (an `execution_started` event).

A policy that reads the run's history is given, for each proposal, the run as the ledger records
it just before that proposal (the calls, their effects and outcomes under the policy that did
decide: ledger.replay keeps the Gate's per-run index as it reads), not as the new policy would
have shaped it. Proposals whose arguments or context were redacted cannot be decided again (nor,
by a policy that reads history, those of a run some of whose earlier data was redacted): they are
counted as not checkable, in no transition. Edits are not replayed: an edit exists only because a person
was asked, which the new policy may not have done.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec

from ledger.replay import Call, Closed, Interrupt, NOT_DECIDABLE, Replay, Started
from ledger.workflow.deciding import decide

LISTED = 1000  # calls listed in each list; the counts cover all
DEFAULT_RULE = "(default)"


class Change(msgspec.Struct, frozen=True):
    """One transition (`from_effect` → `to_effect`) under one set of new deciding rules."""

    from_effect: str
    to_effect: str
    rules: str  # the new deciding rule ids, comma-separated, or "(default)"
    calls: int
    first_seq: int


class ChangedCall(msgspec.Struct):
    seq: int
    ts: str
    tool: str
    from_effect: str
    to_effect: str
    rules: str
    reason: str | None  # the new decision's first reason
    executed: bool = False  # the call started executing (whatever the new policy says of it)


class GroupLoad(msgspec.Struct):
    group: str
    asks_before: int
    asks_after: int
    per_day_before: float
    per_day_after: float


class DayLoad(msgspec.Struct):
    day: str
    group: str
    asks_before: int
    asks_after: int


class WhatIfReport(msgspec.Struct):
    """What `whatif` found; the lists hold the first LISTED of each (counts cover all)."""

    path: str
    policy: str
    policy_digest: str
    proposals: int = 0
    replayed: int = 0
    changed: int = 0
    unchecked: int = 0
    unchecked_by_reason: dict[str, int] = msgspec.field(default_factory=dict)
    days: int = 0
    transitions: dict[str, int] = msgspec.field(default_factory=dict)  # "allow→ask" → calls
    changes: list[Change] = msgspec.field(default_factory=list)
    load: list[GroupLoad] = msgspec.field(default_factory=list)
    load_by_day: list[DayLoad] = msgspec.field(default_factory=list)
    stopped: int = 0
    stopped_calls: list[ChangedCall] = msgspec.field(default_factory=list)
    changed_calls: list[ChangedCall] = msgspec.field(default_factory=list)


def group_names(requirements) -> list[str]:
    """The approver groups an ask's requirements name, one per quorum (see the module docstring)."""
    if requirements is None:
        return ["anyone"]
    out = []
    for q in requirements.quorums:
        out.append(q.group or (",".join(q.approvers) if q.approvers else "anyone"))
    return list(dict.fromkeys(out))


def whatif(path: str | Path, policy, listed: int = LISTED) -> WhatIfReport:
    """Replay the proposals of the ledger at `path` under `policy` (a dsl.Policy). Raises
    LedgerUnreadable and LedgerCorrupt as ledger.replay.Replay does."""
    source = Replay(path, history=bool(getattr(policy, "reads_history", False)))
    report = WhatIfReport(path=str(path), policy=policy.name, policy_digest=policy.digest)
    transitions: Counter = Counter()
    changes: dict[tuple[str, str, str], list[int]] = {}  # → [calls, first seq]
    before: Counter = Counter()  # (day, group) → asks
    after: Counter = Counter()
    days: set[str] = set()
    waiting: dict[int, ChangedCall] = {}  # changed proposals not yet seen starting (or ending)
    stopped: list[ChangedCall] = []
    for item in source:
        kind = type(item)
        if kind is Interrupt:
            for group in group_names(item.requirements):
                before[(item.ts[:10], group)] += 1
            continue
        if kind is Started:
            hit = waiting.pop(item.request, None)
            if hit is not None:
                hit.executed = True  # the call ran, whatever it changes to
                if hit.to_effect == "deny":
                    report.stopped += 1
                    if len(stopped) < listed:
                        stopped.append(hit)
            continue
        if kind is Closed:
            waiting.pop(item.request, None)
            continue
        if kind is not Call or item.kind != "proposal":
            continue
        report.proposals += 1
        days.add(item.ts[:10])
        if item.missing is not None or (item.history_missing is not None and source.history is not None):
            _unchecked(report, item.missing or item.history_missing)
            continue
        try:
            decision = decide(policy, item.tool, item.args, item.context, item.before)
        except Exception as exc:  # a call of a shape no policy decides
            _unchecked(report, f"{NOT_DECIDABLE}: {exc}")
            continue
        report.replayed += 1
        new = decision.effect
        if new == "ask":
            for group in group_names(decision.requirements):
                after[(item.ts[:10], group)] += 1
        if new == item.effect:
            continue
        report.changed += 1
        transitions[f"{item.effect}→{new}"] += 1
        rules = ",".join(decision.deciding) or DEFAULT_RULE
        entry = changes.setdefault((item.effect, new, rules), [0, item.seq])
        entry[0] += 1
        changed = ChangedCall(item.seq, item.ts, item.tool, item.effect, new, rules,
                              decision.reasons[0] if decision.reasons else None)
        if len(report.changed_calls) < listed:
            report.changed_calls.append(changed)
        waiting[item.request] = changed
    report.days = len(days)
    report.transitions = dict(sorted(transitions.items(), key=lambda kv: (-kv[1], kv[0])))
    report.changes = sorted((Change(f, t, r, n, first) for (f, t, r), (n, first) in changes.items()),
                            key=lambda c: (-c.calls, c.from_effect, c.to_effect, c.rules))
    groups: Counter = Counter()
    groups_after: Counter = Counter()
    for (_day, group), n in before.items():
        groups[group] += n
    for (_day, group), n in after.items():
        groups_after[group] += n
    per = max(report.days, 1)
    report.load = sorted((GroupLoad(g, groups[g], groups_after[g], round(groups[g] / per, 2), round(groups_after[g] / per, 2))
                          for g in set(groups) | set(groups_after)), key=lambda g: (-max(g.asks_before, g.asks_after), g.group))
    report.load_by_day = [DayLoad(day, group, before[(day, group)], after[(day, group)])
                          for day, group in sorted(set(before) | set(after))]
    report.stopped_calls = stopped
    return report


def _unchecked(report: WhatIfReport, why: str) -> None:
    report.unchecked += 1
    category = why.split(":")[0]
    report.unchecked_by_reason[category] = report.unchecked_by_reason.get(category, 0) + 1
