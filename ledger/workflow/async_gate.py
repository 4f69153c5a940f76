"""The Gate for asyncio code: the same steps, awaited (issue 12: OpenAI Agents' tools, the Claude
Agent SDK's callbacks and LangChain's async middleware are coroutines).

    gate = AsyncGate(Gate(policy, "ledger-dir"))        # or AsyncGate.open(policy, "ledger-dir")
    p = await gate.propose("refund", {"order": 7}, proposer="agent-1", run="r1")
    state = await gate.wait(p.request, timeout=600)
    done = await gate.execute(p.request, refund_tool)   # an async or a plain callable

One implementation: every step is the wrapped Gate's own, run in a worker thread
(`asyncio.to_thread`), since a step may wait for the ledger's commit lock and a sync to disk and
must not stall the event loop. The Gate is thread-safe and lets many threads share one commit
(its module docstring), so concurrent coroutines cost one write between them, as threads do.

Only the tool itself runs on the event loop: `execute` and `run` await a coroutine function
between the durable `execution_started` and the outcome (a plain function runs in a thread).
Cancelling the task while the tool runs leaves the outcome unknown, as a crash does: the call
never runs again (ExecutionUnknown on a later try), at most once before all else. So does
cancelling it while the start is being written: the worker thread finishes the start (a thread
cannot be stopped), and the request is then released as after a crash, since no tool runs.

`wait` sleeps in slices of at most WAIT_SLICE seconds, so a cancelled waiter frees its thread
soon after, while the Gate's own wait wakes as soon as the ledger grows.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from ledger.store.log import Ledger
from ledger.workflow.gate import Execution, Gate, Proposal, Run, _request_id, _text
from ledger.workflow.machine import RequestState

WAIT_SLICE = 1.0  # seconds


class AsyncGate:
    """Awaitable twins of the Gate's steps (see the module docstring); `gate` is the Gate they
    run on, still usable from threads. Raises what the Gate's steps raise."""

    def __init__(self, gate: Gate):
        self.gate = gate

    @classmethod
    async def open(cls, policy, ledger: Ledger | str | Path, **options: Any) -> "AsyncGate":
        """Open a Gate (which replays or reads its snapshot: blocking work) in a thread."""
        return cls(await asyncio.to_thread(Gate, policy, ledger, **options))

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(method, *args, **kwargs)

    # --- proposing and deciding ---------------------------------------------------------------

    async def propose(self, tool: str, args: dict, **kwargs: Any) -> Proposal:
        return await self._call(self.gate.propose, tool, args, **kwargs)

    async def approve(self, request: int, **kwargs: Any) -> RequestState:
        return await self._call(self.gate.approve, request, **kwargs)

    async def edit(self, request: int, **kwargs: Any) -> RequestState:
        return await self._call(self.gate.edit, request, **kwargs)

    async def reject(self, request: int, **kwargs: Any) -> RequestState:
        return await self._call(self.gate.reject, request, **kwargs)

    async def respond(self, request: int, **kwargs: Any) -> RequestState:
        return await self._call(self.gate.respond, request, **kwargs)

    async def cancel(self, request: int, **kwargs: Any) -> RequestState:
        return await self._call(self.gate.cancel, request, **kwargs)

    async def decide(self, request: int, decision: str, **kwargs: Any) -> RequestState:
        return await self._call(self.gate.decide, request, decision, **kwargs)

    # --- reading ------------------------------------------------------------------------------

    async def get(self, request: int) -> RequestState:
        return await self._call(self.gate.get, request)

    async def arguments(self, request: int) -> dict:
        return await self._call(self.gate.arguments, request)

    async def result(self, request: int) -> Execution:
        return await self._call(self.gate.result, request)

    async def wait(self, request: int, *, timeout: float | None = None) -> RequestState:
        """Gate.wait, awaited: until the request no longer waits, or `timeout` seconds passed."""
        _request_id(request)
        give_up = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            left = WAIT_SLICE if give_up is None else min(WAIT_SLICE, max(0.0, give_up - time.monotonic()))
            state = await self._call(self.gate.wait, request, timeout=left)
            if state.status not in ("pending", "interrupting"):
                return state
            if give_up is not None and time.monotonic() >= give_up:
                return state

    # --- executing ----------------------------------------------------------------------------

    async def start(self, request: int, *, executor: str | None = None) -> tuple[str, dict] | Execution:
        return await self._call(self.gate.start, request, executor=executor)

    async def finish(self, request: int, **kwargs: Any) -> Execution:
        return await self._call(self.gate.finish, request, **kwargs)

    async def execute(self, request: int, fn: Callable[[dict], Any], *, executor: str | None = None,
                      keep_result: bool = False) -> Execution:
        """Gate.execute with `fn` a coroutine function (awaited on this loop) or a plain one (run
        in a thread)."""
        _text("executor", executor, optional=True)
        started = await self._claiming(lambda: self.gate._start(request, executor, running_here=True),
                                       lambda out: None if isinstance(out, Execution) else request)
        if isinstance(started, Execution):
            return started
        return await self._run_started(request, started[0], started[1], fn, keep_result)

    async def run(self, tool: str, args: dict, fn: Callable[[dict], Any], *, proposer: str, run: str | None = None,
                  context: dict | None = None, call_id: str | None = None, executor: str | None = None,
                  keep_result: bool = False) -> Run:
        """Gate.run, awaited, `fn` as in `execute`."""
        _text("executor", executor, optional=True)
        proposal, started = await self._claiming(
            lambda: self.gate._propose(tool, args, proposer=proposer, run=run, context=context, call_id=call_id,
                                       start=True, executor=executor),
            lambda out: None if out[1] is None else out[0].request)
        if started is not None:
            return Run(proposal, await self._run_started(proposal.request, proposal.args_digest, started, fn, keep_result))
        if proposal.duplicate and proposal.status in ("allowed", "approved", "executed"):
            return Run(proposal, await self.execute(proposal.request, fn, executor=executor, keep_result=keep_result))
        return Run(proposal, None)

    async def _claiming(self, step: Callable[[], Any], claimed: Callable[[Any], int | None]) -> Any:
        """`step()` in a worker thread, where it may write a start and claim its request in the
        Gate's `_running` (`claimed(result)` says which request, or None). When this coroutine is
        cancelled meanwhile, the thread still finishes the step, and the claim is released (by
        the thread, or here if it is done): no tool runs for it, so the request is left as a
        crash leaves it (ExecutionUnknown on a later try), not "running now" for as long as the
        process lives."""
        guard = threading.Lock()
        held: list[int] = []  # the claim the finished step made, while this coroutine may still take it
        abandoned = False

        def work() -> Any:
            out = step()
            request = claimed(out)
            if request is not None:
                with guard:
                    if abandoned:
                        self.gate._release(request)
                    else:
                        held.append(request)
            return out

        try:
            return await asyncio.to_thread(work)
        except BaseException:  # cancelled (or the step failed, claiming nothing)
            with guard:
                abandoned = True
                for request in held:  # done, but this coroutine will not run the tool
                    self.gate._release(request)
            raise

    async def _run_started(self, request: int, digest: str, args: dict, fn: Callable[[dict], Any],
                           keep_result: bool) -> Execution:
        try:
            try:
                if inspect.iscoroutinefunction(fn):
                    result = await fn(args)
                else:
                    result = await asyncio.to_thread(fn, args)
                    if inspect.isawaitable(result):  # a callable object whose __call__ is async
                        result = await _awaited(result)
                exception = None
            except Exception as exc:  # the tool's failure is an outcome to record
                result, exception = None, exc
        except BaseException:  # cancelled: the outcome stays unknown; the call never runs again
            self.gate._release(request)
            raise
        return await self._call(self.gate._record_run, request, digest, result, exception, keep_result)

    async def close(self) -> None:
        await self._call(self.gate.close)

    async def __aenter__(self) -> "AsyncGate":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value
