"""Shared builders for tests: a small policy, a manual clock, a mixed ledger; the docs' shell deny."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from dsl import Policy
from ledger.clock import ManualClock
from ledger.workflow.gate import Gate
from ledger.store.log import Ledger

START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)

POLICY_TEXT = """
policy "test"
default ask "No rule covers this tool."
group sups = ["sup-1", "sup-2", "sup-3"]

allow read_thing
deny drop_thing reason "Never drop things; archive them instead."

ask small_change
  reason "A person checks small changes."
  timeout 1h
  id "small"

ask big_change
  reason "Two supervisors check big changes."
  approvers 2 from sups
  decisions approve, edit, reject, respond
  timeout 4h
  id "big"
deny big_change when args.amount > 1000
  reason "Changes above 1000 are not made by agents."

# A large wire needs both quorums: two supervisors and one account owner.
ask wire approvers 2 from sups timeout 4h id "wire-sups"
ask wire when args.amount > 100 approvers 1 from ["alice", "bob"] id "wire-owner"
"""


def policy() -> Policy:
    return Policy.from_text(POLICY_TEXT, "test.policy")


def gate(path: Path, clock: ManualClock | None = None) -> Gate:
    return Gate(policy(), path, clock=clock or ManualClock(START))


def build_mixed_ledger(path: Path, *, item: float | int = 2.5, segment_bytes: int | None = None) -> tuple[Gate, ManualClock]:
    """A ledger with every kind of step: allow+execute, deny, ask approved, an edit approved by a
    quorum of two, a reject, a respond, an expiry, a cancel and an execution that failed. `item`
    is a number among the edited arguments (a float by default), `segment_bytes` the writer's
    segment size. Returns the open Gate (the caller closes it) and its clock."""
    clock = ManualClock(START)
    if segment_bytes is None:
        g = gate(path, clock)
    else:
        g = Gate(policy(), Ledger(path, clock=clock, segment_bytes=segment_bytes), clock=clock)
    a = g.propose("read_thing", {"id": 1}, proposer="agent", run="r1")
    g.execute(a.request, lambda args: {"found": True})
    g.propose("drop_thing", {"id": 2}, proposer="agent", run="r1")
    b = g.propose("small_change", {"id": 3, "note": "é ✓"}, proposer="agent", run="r1", context={"cwd": "/srv"})
    clock.advance(60)
    g.approve(b.request, approver="alice", digest=b.args_digest)
    g.execute(b.request, lambda args: None)
    c = g.propose("big_change", {"amount": 500, "items": [1, item, None, True]}, proposer="agent", run="r2")
    clock.advance(120)
    g.edit(c.request, editor="sup-1", args={"amount": 400, "items": [1, item, None, True]}, reason="less")
    clock.advance(60)
    g.approve(c.request, approver="sup-2", digest=g.get(c.request).digest, comment="ok")
    g.execute(c.request, lambda args: 1 / 0)
    d = g.propose("small_change", {"id": 4}, proposer="agent", run="r2")
    g.reject(d.request, approver="bob", reason="Ask the customer first.")
    e = g.propose("big_change", {"amount": 10}, proposer="agent", run="r3")
    g.respond(e.request, approver="sup-3", message="Done by hand.")
    f = g.propose("unknown_tool", {}, proposer="agent", run="r3")
    clock.advance(25 * 3600)
    g.expire()
    h = g.propose("small_change", {"id": 5}, proposer="agent", run="r3")
    g.cancel(h.request, by="agent", reason="no longer needed")
    assert f.effect == "ask"
    return g, clock


def make_read_only(monkeypatch, directory: Path) -> None:
    """Make every write under `directory` fail with EROFS, as on a read-only mount (chmod does not
    stop root): os.open with a write flag, os.mkdir, os.link and os.replace raise."""
    import errno
    import os

    top = os.path.realpath(directory)
    real = {name: getattr(os, name) for name in ("open", "mkdir", "link", "replace")}

    def inside(path) -> bool:
        real_path = os.path.realpath(os.fspath(path))
        return real_path == top or real_path.startswith(top + os.sep)

    def refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    def fake_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC) and inside(path):
            refuse(path)
        return real["open"](path, flags, *args, **kwargs)

    def fake_mkdir(path, *args, **kwargs):
        if inside(path):
            refuse(path)
        return real["mkdir"](path, *args, **kwargs)

    def fake_two(name):
        def fake(src, dst, *args, **kwargs):
            if inside(dst):
                refuse(dst)
            return real[name](src, dst, *args, **kwargs)

        return fake

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
    monkeypatch.setattr(os, "link", fake_two("link"))
    monkeypatch.setattr(os, "replace", fake_two("replace"))


def build_matrix_ledger(path: Path, segment_bytes: int) -> None:
    """The tamper matrix's ledger: four rounds of an allowed call run, an ask approved by two
    and run, and a denied call, in segments of `segment_bytes` (several of them)."""
    clock = ManualClock(START)
    gate = Gate(policy(), Ledger(path, segment_bytes=segment_bytes, clock=clock), clock=clock)
    for i in range(4):
        a = gate.propose("read_thing", {"id": i, "note": "é ✓"}, proposer="agent", run=f"r{i}", context={"cwd": "/srv"})
        gate.execute(a.request, lambda args: {"ok": True})
        b = gate.propose("big_change", {"amount": 100 + i}, proposer="agent", run=f"r{i}")
        clock.advance(60)
        gate.approve(b.request, approver="sup-1", digest=b.args_digest)
        gate.approve(b.request, approver="sup-2", digest=b.args_digest, comment="ok")
        gate.execute(b.request, lambda args: None)
        gate.propose("drop_thing", {"id": i}, proposer="agent")
    gate.close()


# The docs' deny example under `default allow` (docs/policy-language.md, "Shell commands"): what
# the shell tests try to get past
DOCS_DENY = Policy.from_text("""
default allow
deny Bash when any c in shell(args.command):
    c.program == "rm" and c.flags contains "recursive" and c.flags contains "force"
    and any a in c.args: path(a) == "/"
  reason "Recursive forced deletion of / is never run."
""", "docs.policy")


def cancel_while_written(gate: Gate, method: str, make_task) -> None:
    """Cancel an AsyncGate coroutine while its worker thread is inside `gate.<method>` (slowed by
    0.3 s after the method has written), then give the thread time to finish and put the method
    back. `make_task()` returns the coroutine to run; its CancelledError is expected."""
    import asyncio
    import time

    import pytest

    real = getattr(gate, method)

    def slow(*a, **kw):
        out = real(*a, **kw)
        time.sleep(0.3)  # the durable write is done; the coroutine is cancelled meanwhile
        return out

    async def main():
        task = asyncio.create_task(make_task())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.5)

    setattr(gate, method, slow)
    try:
        asyncio.run(main())
    finally:
        setattr(gate, method, real)
