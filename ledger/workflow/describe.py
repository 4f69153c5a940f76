"""A request described for a person or a program: the plain data (JSON-ready dicts) that
`countersign review list|show --json`, the approval service's API and its web inbox all show.

    brief(state, args)            a queue row: id, tool, run, proposer, status, digest, reasons,
                                  rules, times, quorum progress, the decisions allowed, args
    in_full(gate, request)        brief + the decision, the original arguments of an edited call,
                                  the context the policy read, the deciding rules with their policy
                                  and line, the run's earlier calls and every event of the
                                  request's history
    quorum(state)                 who approved, how many more, who may, the requirement in words

Times are ledger timestamps (UTC text, docs/ledger-format.md section 3). Raises what the Gate's
reading methods raise (UnknownRequest).
"""

from __future__ import annotations

import functools
from typing import Any

from ledger.store.log import Record
from ledger.workflow.machine import RequestState
from ledger.workflow.reading import decisions_of

UNREAD = object()  # `brief(..., args=UNREAD)`: read the arguments through the gate


@functools.lru_cache(maxsize=256)
def _describe(requirements) -> str:
    return requirements.describe()  # the same few requirements recur across a long queue


def quorum(state: RequestState) -> dict:
    """{"approved_by": [names], "more_needed": int, "who_may": [names] | None (anyone but the
    proposer), "needs": the requirement in words | None}."""
    reqs = state.requirements
    if reqs is None:
        return {"approved_by": list(state.approvals), "more_needed": 0, "who_may": None, "needs": None}
    approvers = set(state.approvals)
    more = 0
    for q in reqs.quorums:
        counted = len(approvers) if q.approvers is None else len(approvers & set(q.approvers))
        more = max(more, q.count - counted) if q.approvers is None else more + max(0, q.count - counted)
    may = None if any(q.approvers is None for q in reqs.quorums) else sorted({a for q in reqs.quorums for a in q.approvers})
    return {"approved_by": list(state.approvals), "more_needed": more, "who_may": may, "needs": _describe(reqs)}


def may_decide(state: RequestState, who: str) -> bool:
    """Whether `who` may give a decision on the request now: it is pending, `who` is not its
    proposer (four-eyes), has not approved these arguments yet, and a quorum admits them."""
    if state.status != "pending" or state.requirements is None or who == state.proposer or who in state.approvals:
        return False
    return state.tally().allows(who)


def brief(gate: Any, state: RequestState, *, args: Any = UNREAD) -> dict:
    """A queue row (module docstring). `args`: the request's arguments when the caller has read
    them already (None: not shown); otherwise they are read through `gate` (None once final)."""
    out = {
        "request": state.request,
        "tool": state.tool,
        "run": state.run,
        "proposer": state.proposer,
        "call_id": state.call_id,
        "status": state.status,
        "effect": state.effect,
        "args_digest": state.digest,
        "reasons": list(state.reasons),
        "rules": list(state.rules),
        "proposed_at": state.proposed_at,
        "deadline": state.deadline,
        "quorum": quorum(state),
        "decisions": list(decisions_of(state)),
    }
    if args is not UNREAD:
        out["args"] = args
    else:
        try:
            out["args"] = gate.arguments(state.request)
        except KeyError:
            out["args"] = None  # final: the Gate released them (the ledger keeps them)
    return out


def outcome(state: RequestState) -> dict:
    """How the request ended, so far: the decision, who and when, the reason or response, the
    number of edits, the execution's outcome."""
    return {"decision": state.decision, "decided_by": state.decided_by, "decided_at": state.decided_at,
            "reason": state.reason, "edits": state.edits, "outcome": state.outcome,
            "executed_at": state.executed_at, "result_digest": state.result_digest, "error": state.error}


def event_line(record: Record) -> dict:
    """One event of a request's history: {"seq", "ts", "kind", "by", "text"} (`text` in words)."""
    event = record.event
    kind = type(event).__struct_config__.tag
    who = next((getattr(event, n) for n in ("approver", "editor", "by", "proposer", "executor") if getattr(event, n, None)), None)
    text = kind + (f" by {who}" if who else "")
    for name in ("effect", "outcome", "reason", "message", "comment", "error"):
        value = getattr(event, name, None)
        if isinstance(value, str) and value:
            text += f"; {name}: {value}"
    signature = getattr(event, "signature", None)
    signer = getattr(signature, "signer", None)
    return {"seq": record.seq, "ts": event.ts, "kind": kind, "by": who, "text": text,
            "signed": signer if isinstance(signer, str) else None}


def rules_at(records: list[Record]) -> list[dict]:
    """The rules that decided the proposal and each edit: [{"seq", "rule", "policy", "line", "at"}]
    (`at`: `policy "NAME", line N` in words; `line` 0 when unknown)."""
    out, name = [], None
    for record in records:
        event = record.event
        name = getattr(event, "policy", None) or name  # an edit re-enters the proposal's policy
        for rule in getattr(event, "rules", ()) or ():
            where = ", ".join(x for x in (f'policy "{name}"' if name else "", f"line {rule.line}" if rule.line else "") if x)
            out.append({"seq": record.seq, "rule": rule.id, "policy": name, "line": rule.line, "at": where})
    return out


def in_full(gate: Any, request: int, *, earlier: int = 10) -> dict:
    """The request in full (module docstring): `brief` and `outcome`, plus "history",
    "rules_at", "original_args" (None unless edited), "context" (the proposal's, as stored;
    None when it cannot be read) and "earlier_in_run" (up to `earlier` of the run's calls
    before it, newest first). Raises UnknownRequest."""
    state = gate.get(request)
    item = brief(gate, state)
    item.update(outcome(state))
    if item["args"] is None:  # final: the arguments it was decided on, as stored (a redaction shows its marker)
        item["args"] = gate.stored_arguments(request)
    records = gate.history(request)
    item["history"] = [event_line(r) for r in records]
    item["rules_at"] = rules_at(records)
    item["original_args"] = gate.original_arguments(request) if state.edits else None
    item["context"] = gate.stored_context(request)
    item["earlier_in_run"] = [{"request": s.request, "tool": s.tool, "status": s.status, "proposed_at": s.proposed_at}
                              for s in gate.earlier_in_run(request, limit=earlier)]
    item["remember"] = remember_choices(state)
    item["standing"] = state.standing
    return item


def remember_choices(state: RequestState) -> list[str]:
    """The `remember` values a reviewer may give a decision of this request (its rule's
    `remember` clause, docs/policy-language.md): [] when none; "run" and/or "session"; or
    durations up to the rule's (whole hours, and the rule's own when it is not one)."""
    allowance = state.requirements.rememberable if state.requirements is not None and state.status == "pending" else None
    return remember_choices_of(allowance)


def remember_choices_of(allowance: Any) -> list[str]:
    """The `remember` values an allowance (a Requirements' `rememberable`, or None) admits, as
    `remember_choices` lists them."""
    if allowance is None:
        return []
    if allowance.scope == "run":
        return ["run"]
    if allowance.scope == "session":
        return ["run", "session"]
    seconds = allowance.seconds or 0
    choices = [f"{h}h" for h in (1, 8, 24) if h * 3600 < seconds]
    return choices + [f"{seconds}s"]


def kind_of(event: Any) -> str:
    """An event's kind, as stored (`proposed`, `approved`, ...)."""
    return type(event).__struct_config__.tag


def stream_item(record: Record) -> dict:
    """One event for a stream of a run's events: `event_line` and its "request" (the proposal's
    seq; None for an event about no request). No arguments: a stream says what happened."""
    item = event_line(record)
    event = record.event
    item["request"] = record.seq if kind_of(event) == "proposed" else getattr(event, "request", None)
    for name in ("tool", "run", "effect", "outcome", "deadline"):
        value = getattr(event, name, None)
        if isinstance(value, str):
            item[name] = value
    return item
