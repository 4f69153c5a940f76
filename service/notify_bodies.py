"""What a notification says, as a webhook body, and its signature (docs/notifications.md).

    notice = notice_of(record, state, public_url)     # None: the event notifies nobody
    body = generic_body(notice) | slack_body(notice)  # bytes: compact JSON
    headers = signature_headers(secret, body, delivery_id, now=time.time())

A Notice carries the request id, the tool, the run, the status, the policy's reasons, who
decided, the deadline and a link to the inbox: never the call's arguments, nor a reviewer's
free text (a rejection reason, a response), which may hold personal data. (Issue 11 allows
arguments "unless the rule says so"; the policy language has no such clause yet, so none are
ever sent.)

Signature: `X-Countersign-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`,
the scheme of Stripe's and Slack's signed requests (a timestamp inside the signed bytes, so a
receiver refuses replays older than its tolerance), and `X-Countersign-Delivery: <id>`, the same
for every attempt of one notification (receivers deduplicate on it).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import msgspec

from ledger import events as ev
from ledger.store.log import Record
from ledger.workflow.machine import RequestState

SIGNATURE_HEADER = "X-Countersign-Signature"
DELIVERY_HEADER = "X-Countersign-Delivery"
MAX_TEXT = 200  # characters of an agent-chosen string (tool, run) in a body: a body stays small

_DECISIONS = {ev.Approved: "approve", ev.Edited: "edit", ev.Rejected: "reject", ev.Responded: "respond",
              ev.Cancelled: "cancel"}


@dataclass(frozen=True)
class Notice:
    """One notification, before it is shaped for a receiver. `event`: interrupt, decision or
    expiry; `decision`: approve, edit, reject, respond or cancel (decisions only); `groups`: the
    policy groups whose quorums decide the request (for a webhook's `groups` filter)."""

    event: str
    request: int
    tool: str
    run: str | None
    status: str
    reasons: tuple[str, ...]
    decided_by: str | None
    decision: str | None
    deadline: str | None
    link: str | None
    ledger_seq: int
    ts: str
    groups: frozenset[str]


def _short(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _groups(requirements: Any) -> frozenset[str]:
    return frozenset(q.group for q in getattr(requirements, "quorums", ()) if q.group)


def notice_of(record: Record, state: RequestState, public_url: str = "") -> Notice | None:
    """The notice of a ledger event about an asked request (`state`: the request as the watch
    folded it, at or after this event), or None: only `interrupted` (and `escalated`, an interrupt
    for the next stage's approvers), the decisions (approved, edited, rejected, responded,
    cancelled) and `expired` of requests that asked notify."""
    event = record.event
    if state.requirements is None:  # never asked: an allowed call cancelled before it ran, say
        return None
    decision = _DECISIONS.get(type(event))
    if isinstance(event, (ev.Interrupted, ev.Escalated)):
        # an escalation asks the next stage's approvers: for them it is a new interrupt
        kind, status, by = "interrupt", "pending", None
        groups = _groups(event.requirements)
    elif isinstance(event, ev.Expired):
        kind, status, by = "expiry", "expired", None
        groups = _groups(state.requirements)
    elif decision is not None:
        kind, by = "decision", ev.decider(event)
        if decision in ("approve", "edit"):
            # this approval completed the quorum when the request's decision was taken at its time
            status = "approved" if state.decision == "approve" and state.decided_at == event.ts else "pending"
        else:
            status = {"reject": "rejected", "respond": "responded", "cancel": "cancelled"}[decision]
        groups = _groups(state.requirements) | _groups(getattr(event, "requirements", None))
    else:
        return None
    base = public_url.rstrip("/")
    return Notice(event=kind, request=state.request, tool=_short(state.tool) or "", run=_short(state.run),
                  status=status, reasons=tuple(state.reasons), decided_by=_short(by), decision=decision,
                  deadline=getattr(event, "deadline", None) or state.deadline,
                  link=f"{base}/inbox/requests/{state.request}" if base else None,
                  ledger_seq=record.seq, ts=event.ts, groups=groups)


def generic_body(n: Notice) -> bytes:
    """The generic JSON object (docs/notifications.md lists its members)."""
    return msgspec.json.encode({
        "event": n.event, "request": n.request, "tool": n.tool, "run": n.run, "status": n.status,
        "decision": n.decision, "reasons": list(n.reasons), "decided_by": n.decided_by, "deadline": n.deadline,
        "link": n.link, "ledger_seq": n.ledger_seq, "ts": n.ts,
    })


def slack_escape(text: str) -> str:
    """Text safe inside Slack's mrkdwn: `&`, `<` and `>` escaped, as Slack's "Formatting text
    for app surfaces" asks, so an agent's tool name cannot become a link or an @channel."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_VERBS = {"approve": "approved", "edit": "edited", "reject": "rejected", "respond": "answered", "cancel": "cancelled"}


def _headline(n: Notice) -> str:
    if n.event == "interrupt":
        return f"Request {n.request} waits for a decision"
    if n.event == "expiry":
        return f"Request {n.request} expired without a decision (rejected)"
    text = f"Request {n.request} {_VERBS.get(n.decision or '', n.status)} by {n.decided_by or 'someone'}"
    if n.decision in ("approve", "edit") and n.status == "pending":
        text += " (more approvals needed)"
    return text


def slack_body(n: Notice) -> bytes:
    """A Slack incoming-webhook message: `text` (the fallback for notifications) and `blocks`
    (a section and a context block; Slack's Block Kit reference, "section" and "context")."""
    head = slack_escape(_headline(n))
    title = f"<{n.link}|{head}>" if n.link else head
    lines = [f"*{title}*", f"Tool: `{slack_escape(n.tool)}`" + (f"  ·  Run: `{slack_escape(n.run)}`" if n.run else "")]
    if n.reasons:
        lines.append("Reasons: " + "; ".join(slack_escape(r) for r in n.reasons))
    text = "\n".join(lines)
    if len(text) > 2900:  # a section's text holds 3000 characters at most
        text = text[:2899] + "…"
    context = [f"ledger seq {n.ledger_seq}", n.ts]
    if n.deadline and n.event == "interrupt":
        context.insert(0, f"deadline {n.deadline}")
    return msgspec.json.encode({
        "text": head,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(context)}]},
        ],
    })


def body_of(n: Notice, fmt: str) -> bytes:
    return slack_body(n) if fmt == "slack" else generic_body(n)


def sign(secret: bytes, body: bytes, timestamp: int) -> str:
    """The X-Countersign-Signature value: `t=<timestamp>,v1=<hex HMAC-SHA256 of b"<t>." + body>`."""
    mac = hmac.new(secret, b"%d." % timestamp + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: bytes, body: bytes, header: str, now: int, tolerance: int = 300) -> bool:
    """Whether `header` signs `body` with `secret` within `tolerance` seconds of `now` (what a
    receiver does; docs/notifications.md gives the same in ten lines)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    t = parts.get("t", "")
    if not (t.isascii() and t.isdecimal()) or abs(now - int(t)) > tolerance:  # [0-9]+ ('²' passes isdigit)
        return False
    expected = hmac.new(secret, parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


def signature_headers(secret: bytes | None, body: bytes, delivery: str, now: float) -> dict[str, str]:
    headers = {"Content-Type": "application/json", DELIVERY_HEADER: delivery, "User-Agent": "countersign-webhooks/1"}
    if secret is not None:
        headers[SIGNATURE_HEADER] = sign(secret, body, int(now))
    return headers
