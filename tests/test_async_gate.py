"""AsyncGate: the Gate's steps awaited (ledger/workflow/async_gate.py), one implementation."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ledger import AsyncGate, Gate, verify
from ledger.workflow.errors import ExecutionUnknown
from tests.support import cancel_while_written, policy


def _run(coro):
    return asyncio.run(coro)


def test_an_async_tool_runs_once_after_an_approval_given_from_another_thread(tmp_path):
    async def main():
        gate = await AsyncGate.open(policy(), tmp_path / "l")
        p = await gate.propose("small_change", {"n": 1}, proposer="agent", run="r")
        assert p.effect == "ask"

        def reviewer():
            with Gate(None, tmp_path / "l") as other:
                other.approve(p.request, approver="sup-1", digest=p.args_digest)

        waiting = asyncio.create_task(gate.wait(p.request, timeout=30))
        await asyncio.sleep(0.05)
        threading.Thread(target=reviewer).start()
        state = await waiting
        assert state.status == "approved"
        calls = []

        async def tool(args):
            calls.append(args)
            await asyncio.sleep(0)
            return {"done": args["n"]}

        done = await gate.execute(p.request, tool, keep_result=True)
        again = await gate.execute(p.request, tool)
        await gate.close()
        return calls, done, again

    calls, done, again = _run(main())
    assert calls == [{"n": 1}] and done.outcome == "ok" and done.result == {"done": 1}
    assert again.replayed and again.result == {"done": 1}
    assert verify(tmp_path / "l").ok


def test_many_coroutines_propose_at_once_and_each_gets_its_own_request(tmp_path):
    async def main():
        async with await AsyncGate.open(policy(), tmp_path / "l") as gate:
            runs = await asyncio.gather(*(gate.run("read_thing", {"i": i}, lambda a: a["i"] * 2, proposer="agent")
                                          for i in range(40)))
        return runs

    runs = _run(main())
    assert sorted(r.execution.result for r in runs) == [2 * i for i in range(40)]
    assert len({r.proposal.request for r in runs}) == 40
    assert verify(tmp_path / "l").ok


def test_a_tool_that_raises_is_an_error_outcome_and_a_deny_runs_nothing(tmp_path):
    async def main():
        async with await AsyncGate.open(policy(), tmp_path / "l") as gate:
            async def broken(args):
                raise RuntimeError("disk full")

            failed = await gate.run("read_thing", {}, broken, proposer="agent")
            denied = await gate.run("drop_thing", {}, broken, proposer="agent")
        return failed, denied

    failed, denied = _run(main())
    assert failed.execution.outcome == "error" and "disk full" in failed.execution.error
    assert denied.proposal.effect == "deny" and denied.execution is None


def test_a_cancelled_tool_leaves_the_outcome_unknown_and_never_runs_again(tmp_path):
    started = []

    async def main():
        gate = await AsyncGate.open(policy(), tmp_path / "l")

        async def slow(args):
            started.append(1)
            await asyncio.sleep(30)

        task = asyncio.create_task(gate.run("read_thing", {}, slow, proposer="agent", call_id="c"))
        while not started:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        again = await gate.run("read_thing", {}, slow, proposer="agent", call_id="c")
        assert again.proposal.duplicate and again.proposal.status == "executing" and again.execution is None
        with pytest.raises(ExecutionUnknown):
            await gate.execute(again.proposal.request, slow)
        await gate.close()

    _run(main())
    assert started == [1]


def test_a_run_cancelled_while_its_start_is_written_runs_nothing_and_is_not_running_forever(tmp_path):
    """AsyncGate.run proposes and starts in one worker thread; cancelled meanwhile, the thread
    still records the start (and claims the request), but no tool runs: the claim is released,
    so a later try answers ExecutionUnknown (as after a crash), not "running now"."""
    gate = Gate(policy(), tmp_path / "l")
    ran = []
    try:
        cancel_while_written(gate, "_propose", lambda: AsyncGate(gate).run(
            "read_thing", {}, lambda args: ran.append(1), proposer="agent", call_id="c"))
        request = gate.find(call_id="c").request
        assert gate.get(request).status == "executing" and not gate._running
        with pytest.raises(ExecutionUnknown):
            gate.execute(request, lambda args: ran.append(2))
    finally:
        gate.close()
    assert ran == []


def test_a_cancelled_wait_returns_promptly(tmp_path):
    async def main():
        async with await AsyncGate.open(policy(), tmp_path / "l") as gate:
            p = await gate.propose("small_change", {}, proposer="agent")
            task = asyncio.create_task(gate.wait(p.request))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return (await gate.get(p.request)).status

    assert _run(main()) == "pending"
