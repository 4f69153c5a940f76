"""Forge ledgers for tests: well-formed, hash-chained lines whose history may break any rule.

`Forge` writes through ledger.store.log.Ledger.append, which stamps seq/ts/prev and hashes the body but
does not check the workflow, so a test can write exactly the history it needs:

    with Forge(tmp_path / "l") as f:
        r, digest = f.ask(quorum=2, approvers=["sup-1", "sup-2"])
        f.approve(r, "sup-1", digest)
        f.approve(r, "sup-1", digest)          # duplicate-approval, at the seq this returns

Every method returns the seq of the event it appended. Time moves one second per event (see
`step`) unless a test moves `clock` itself. The line-level helpers below (`read_lines`,
`write_lines`, `rebody`, `rechain`) tamper with the bytes of an existing ledger.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from dsl.requirements import Quorum, Requirements, Stage
from ledger import events as ev
from ledger.clock import ManualClock, add_seconds, format_ts
from ledger.digest import value_digest
from ledger.store.lines import compose, split
from ledger.store.log import Ledger, list_segments

START = datetime(2026, 2, 1, 9, 0, tzinfo=timezone.utc)


class Forge:
    """A ledger writer with one method per event kind and no workflow checks."""

    def __init__(self, path: Path, *, start: datetime = START, step: float = 1.0, segment_bytes: int | None = None):
        self.clock = ManualClock(start)
        self.step = step
        kwargs = {"segment_bytes": segment_bytes} if segment_bytes else {}
        self.ledger = Ledger(path, clock=self.clock, **kwargs)
        self.path = Path(path)
        self.requirements: dict[int, Requirements] = {}

    # --- plumbing -------------------------------------------------------------------------------

    def append(self, event: ev.Event, data: dict | None = None) -> int:
        self.clock.advance(self.step)
        return self.ledger.append(event, data).seq

    def now(self) -> str:
        return format_ts(self.clock())

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> "Forge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- events ---------------------------------------------------------------------------------

    def propose(
        self,
        tool: str = "refund",
        args: dict | None = None,
        *,
        proposer: str = "agent",
        effect: str = "ask",
        run: str | None = "run-1",
        call_id: str | None = None,
        rules: tuple[tuple[str, int], ...] = (("rule-1", 1),),
        reasons: tuple[str, ...] = ("a person checks this",),
        context: dict | None = None,
    ) -> tuple[int, str]:
        """Append a `proposed` event; returns (request, args digest)."""
        args = {"amount": 10} if args is None else args
        context = {} if context is None else context
        digest = value_digest(args)
        seq = self.append(
            ev.Proposed(
                run=run,
                proposer=proposer,
                call_id=call_id,
                tool=tool,
                args_digest=digest,
                context_digest=value_digest(context),
                policy="forged",
                policy_digest="f" * 64,
                effect=effect,
                rules=tuple(ev.RuleRef(id=i, line=n) for i, n in rules),
                reasons=reasons,
            ),
            {"args": args, "context": context},
        )
        return seq, digest

    def interrupt(self, request: int, requirements: Requirements | None = None, *, deadline: str | None = None, **kw: Any) -> int:
        """Append an `interrupted` event. `kw` builds one-quorum Requirements (quorum=,
        approvers=, decisions=, ...) when `requirements` is not given; the deadline defaults to
        now + timeout_seconds."""
        if requirements is None:
            if "decisions" in kw:
                kw["decisions"] = tuple(kw["decisions"])
            requirements = Requirements.single(kw.pop("quorum", 1), kw.pop("approvers", None), **kw)
        self.requirements[request] = requirements
        self.clock.advance(self.step)
        ts = self.now()
        deadline = deadline or add_seconds(ts, requirements.timeout_seconds)
        return self.ledger.append(ev.Interrupted(ts=ts, request=request, requirements=requirements, deadline=deadline)).seq

    def ask(self, tool: str = "refund", args: dict | None = None, *, proposer: str = "agent", **requirements: Any) -> tuple[int, str]:
        """`propose` (effect ask) then `interrupt`; returns (request, args digest)."""
        request, digest = self.propose(tool, args, proposer=proposer, effect="ask")
        self.interrupt(request, **requirements)
        return request, digest

    def approve(self, request: int, approver: str, digest: str, comment: str | None = None) -> int:
        return self.append(ev.Approved(request=request, approver=approver, args_digest=digest, comment=comment))

    def edit(
        self,
        request: int,
        editor: str,
        args: dict,
        replaces: str,
        *,
        effect: str = "ask",
        requirements: Requirements | None = None,
        reason: str | None = None,
    ) -> tuple[int, str]:
        """Append an `edited` event; returns (seq, new args digest). Requirements default to
        those the request was interrupted with."""
        requirements = requirements or self.requirements.get(request) or Requirements()
        self.requirements[request] = requirements
        digest = value_digest(args)
        seq = self.append(
            ev.Edited(
                request=request,
                editor=editor,
                args_digest=digest,
                replaces=replaces,
                policy_digest="f" * 64,
                effect=effect,
                rules=(ev.RuleRef(id="rule-1", line=1),),
                requirements=requirements,
                reason=reason,
            ),
            {"args": args},
        )
        return seq, digest

    def reject(self, request: int, approver: str, reason: str = "no") -> int:
        return self.append(ev.Rejected(request=request, approver=approver, reason=reason))

    def respond(self, request: int, approver: str, message: str = "done by hand") -> int:
        return self.append(ev.Responded(request=request, approver=approver, message=message))

    def escalate(self, request: int, stage: int = 2, requirements: Requirements | None = None, *,
                 deadline: str | None = None) -> int:
        """Append an `escalated` event: by default to the next stage of the requirements last
        recorded for `request` (or those themselves when they have none), until now + its timeout."""
        base = self.requirements.get(request) or Requirements()
        requirements = requirements or base.escalated() or base
        self.requirements[request] = requirements
        self.clock.advance(self.step)
        ts = self.now()
        deadline = deadline or add_seconds(ts, requirements.timeout_seconds)
        return self.ledger.append(ev.Escalated(ts=ts, request=request, stage=stage, requirements=requirements, deadline=deadline)).seq

    def expire(self, request: int, message: str | None = "too late") -> int:
        return self.append(ev.Expired(request=request, outcome="reject", message=message))

    def cancel(self, request: int, by: str = "agent", reason: str | None = None) -> int:
        return self.append(ev.Cancelled(request=request, by=by, reason=reason))

    def start(self, request: int, digest: str, executor: str | None = None) -> int:
        return self.append(ev.ExecutionStarted(request=request, args_digest=digest, executor=executor))

    def executed(self, request: int, digest: str, outcome: str = "ok", error: str | None = None) -> int:
        result = value_digest({"ok": True}) if outcome == "ok" else None
        return self.append(ev.Executed(request=request, args_digest=digest, outcome=outcome, result_digest=result, error=error))

    def redacted(self, target: int, path: str = "args.amount", value: Any = 10, *, digest: str | None = None) -> int:
        """Append a `redacted` event announcing `path` of `target`, whose value is `value` (the
        line itself is not rewritten: the value stays, which verify accepts)."""
        digest = digest or value_digest(value)
        return self.append(ev.Redacted(target=target, path=path, value_digest=digest, reason="GDPR art. 17", by="dpo"))

    def genesis(self) -> int:
        return self.append(ev.Genesis(format=ev.FORMAT, ledger_id="f" * 32))

    def recovered(self) -> int:
        return self.append(
            ev.Recovered(
                segment="events-00000001.jsonl",
                offset=123,
                fragment_bytes=45,
                fragment_sha256=hashlib.sha256(b"x").hexdigest(),
                quarantine="quarantine/events-00000001.jsonl.123.torn",
            )
        )


# --- tampering with the bytes of a ledger ---------------------------------------------------------


def read_lines(path: Path) -> list[tuple[Path, list[bytes]]]:
    """Every segment with its lines (each with its newline, the torn tail without)."""
    return [(seg, seg.read_bytes().splitlines(keepends=True)) for seg in list_segments(Path(path))]


def write_lines(segments: list[tuple[Path, list[bytes]]]) -> None:
    for seg, lines in segments:
        seg.write_bytes(b"".join(lines))


def all_lines(path: Path) -> list[bytes]:
    return [line for _, lines in read_lines(path) for line in lines]


def rewrite(path: Path, lines: list[bytes]) -> None:
    """Replace the whole ledger by one segment holding `lines`."""
    segments = list_segments(Path(path))
    for seg in segments[1:]:
        seg.unlink()
    segments[0].write_bytes(b"".join(lines))


def body_of(line: bytes) -> dict:
    body, _, _ = split(line)
    return msgspec.json.decode(body)


def rebody(line: bytes, body: bytes) -> bytes:
    """The line with `body` in place of its body and a hash that matches it (a careful forger)."""
    _, _, data = split(line)
    return compose(body, data)[1]


def rechain(lines: list[bytes], start: int = 0) -> list[bytes]:
    """Renumber and rehash every line from index `start` on so the chain is intact again: seq =
    index + 1, prev = the previous line's hash. Bodies are re-encoded in msgspec's field order."""
    out = list(lines[:start])
    prev = split(out[-1])[1] if out else ev.GENESIS_PREV
    for index in range(start, len(lines)):
        body, _, data = split(lines[index])
        event = msgspec.structs.replace(ev.decode_event(body), seq=index + 1, prev=prev)
        prev, line = compose(ev.encode_event(event), data)
        out.append(line)
    return out


# --- random histories ---------------------------------------------------------------------------------

PEOPLE = ("agent", "sup-1", "sup-2", "sup-3", "x")


def _random_event(rng, workflow, now: str, next_seq: int, stored: dict[int, dict] | None = None,
                  escalation: bool = False) -> tuple[ev.Event, dict | None]:
    """One plausible next event (lawful or not) for the requests `workflow` knows. `stored` maps
    the seqs of events with data to their data (for redactions). With `escalation`, interrupts
    may carry escalation stages and `escalated` events come too (without it, the random choices
    are those made before escalation existed, so the same seed gives the same history)."""
    if escalation and workflow.requests and rng.random() < 0.15:
        return _random_escalation(rng, rng.choice(list(workflow.requests.values())), now), None
    states = list(workflow.requests.values())
    if stored and rng.random() < 0.08:
        target = rng.choice(list(stored))
        # context.cwd only where it exists, or of an edit (which the workflow refuses first)
        has_cwd = "cwd" in stored[target].get("context", {"cwd": 0})
        path = rng.choice(["args.n", "args.n", "args.n", "context.cwd"] if has_cwd else ["args.n"])
        value = stored[target]["args"]["n"] if path == "args.n" else "/srv"
        return ev.Redacted(ts=now, target=target, path=path, value_digest=value_digest(value), reason="r", by="dpo"), None
    if not states or rng.random() < 0.2:
        args = {"n": rng.randint(0, 3)}
        context = rng.choice([{}, {"cwd": "/srv"}])
        return (
            ev.Proposed(
                ts=now, run="r", proposer=rng.choice(["agent", "agent", "sup-1"]), call_id=None, tool=rng.choice(["a", "b"]),
                args_digest=value_digest(args), context_digest=value_digest(context), policy="p", policy_digest="f" * 64,
                effect=rng.choice(["ask", "ask", "ask", "allow", "deny"]), rules=(ev.RuleRef(id=rng.choice(["r1", "r2"]), line=1),),
                reasons=(),
            ),
            {"args": args, "context": context},
        )
    state = rng.choice(states)
    request = state.request if rng.random() < 0.97 else rng.randint(1, next_seq)
    digest = state.digest if rng.random() < 0.9 else rng.choice([state.original_digest, "1" * 64])
    who = rng.choice(PEOPLE)
    kind = rng.choice(["interrupt"] * 3 + ["approve"] * 5 + ["edit"] * 2 + ["reject", "respond", "expire", "cancel"] + ["start", "executed"] * 2)
    if kind == "interrupt":
        quorums = [
            Quorum(rng.choice([1, 1, 2, 3]), rng.choice([None, ("sup-1", "sup-2"), ("sup-1", "sup-2", "sup-3")]))
            for _ in range(rng.choice([1, 1, 1, 2]))  # sometimes two quorums, both to be met
        ]
        req = Requirements(
            quorums=tuple(quorums),
            decisions=rng.choice([("approve", "edit", "reject"), ("approve", "edit", "reject", "respond"), ("approve", "reject")]),
            timeout_seconds=rng.choice([60, 3600]),
        )
        if escalation and rng.random() < 0.5:
            stages = tuple(Stage((Quorum(1, rng.choice([("sup-2",), ("sup-3",), ("sup-1", "sup-3")])),), rng.choice([60, 600]),
                                 rng.choice([None, "late"])) for _ in range(rng.choice([1, 2])))
            req = msgspec.structs.replace(req, escalation=stages)
        return ev.Interrupted(ts=now, request=request, requirements=req, deadline=add_seconds(now, req.timeout_seconds)), None
    if kind == "approve":
        return ev.Approved(ts=now, request=request, approver=who, args_digest=digest, comment=None), None
    if kind == "edit":
        args = {"n": rng.randint(4, 40)}
        base = state.requirements or Requirements()
        other = Requirements(
            quorums=(Quorum(rng.choice([1, 2]), rng.choice([None, ("sup-2",), ("sup-1", "sup-2")])),),
            decisions=base.decisions, timeout_seconds=base.timeout_seconds,
        )
        return (
            ev.Edited(
                ts=now, request=request, editor=who, args_digest=value_digest(args), replaces=digest, policy_digest="f" * 64,
                effect=rng.choice(["ask", "ask", "allow", "deny"]), rules=(), requirements=rng.choice([base, base, other]), reason=None,
            ),
            {"args": args},
        )
    if kind == "reject":
        return ev.Rejected(ts=now, request=request, approver=who, reason="no"), None
    if kind == "respond":
        return ev.Responded(ts=now, request=request, approver=who, message="m"), None
    if kind == "expire":
        return ev.Expired(ts=now, request=request, outcome="reject", message=None), None
    if kind == "cancel":
        return ev.Cancelled(ts=now, request=request, by=who, reason=None), None
    if kind == "start":
        return ev.ExecutionStarted(ts=now, request=request, args_digest=digest, executor=None), None
    return ev.Executed(ts=now, request=request, args_digest=digest, outcome=rng.choice(["ok", "error"]), result_digest=None, error=None), None


def _random_escalation(rng, state, now: str) -> ev.Escalated:
    """An `escalated` event for `state`: mostly the next stage exactly, sometimes not."""
    following = (state.requirements.escalated() if state.requirements is not None else None) or Requirements()
    stage = state.stage + 1 if rng.random() < 0.9 else rng.choice([2, 3, 4])
    deadline = add_seconds(now, following.timeout_seconds if rng.random() < 0.9 else 1)
    return ev.Escalated(ts=now, request=state.request, stage=stage, requirements=following, deadline=deadline)


def random_history(path: Path, rng, *, steps: int, unlawful_end: bool, segment_bytes: int | None = None,
                   escalation: bool = False) -> None:
    """Write a random history of `steps` events after the genesis, every one lawful (checked with
    ledger.workflow.Workflow) except, when `unlawful_end`, the last, which breaks some rule.
    `escalation`: escalating asks and `escalated` events too (_random_event)."""
    from ledger.workflow.machine import Violation, Workflow

    clock = ManualClock(START)
    kwargs = {"segment_bytes": segment_bytes} if segment_bytes else {}
    with Ledger(path, clock=clock, **kwargs) as ledger:
        workflow = Workflow()
        workflow.apply(1, next(iter(ledger.records())).event)
        stored: dict[int, dict] = {}
        for step in range(steps):
            clock.advance(rng.choice([0, 1, 30, 61, 600, 4000]))
            now = format_ts(clock())
            want_lawful = not (unlawful_end and step == steps - 1)
            for _ in range(50):
                # (only with escalation: a test may stand in its own _random_event, of the older signature)
                event, data = _random_event(rng, workflow, now, ledger.head[0] + 1, stored,
                                            **({"escalation": True} if escalation else {}))
                try:
                    workflow.check(event)
                    lawful = True
                except Violation:
                    lawful = False
                if lawful == want_lawful:
                    record = ledger.append(event, data)
                    if data is not None:
                        stored[record.seq] = data
                    if lawful:
                        workflow.apply(record.seq, record.event)
                    break
