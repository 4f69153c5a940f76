"""An eleventh hostile review: the Claude Code hook, its tree cache, the small HTTP/1.1 client,
kept results and the AsyncGate. Each finding is xfail (strict) until fixed: the test asserts
what the rule (or the code's own docs) promises, so it fails today."""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from adapters.backend import LocalBackend
from adapters.claude_code import ClaudeCodeHook
from dsl import Policy
from ledger.workflow.gate import Gate

ME = getpass.getuser()

POLICY = f"""
policy "attacks11"
default ask "A maintainer decides."
  approvers 1 from maintainers
  decisions approve, edit, reject, respond
  timeout 1h
group maintainers = ["{ME}", "alice"]
allow Read
"""


def _payload(event: str, tool: str, args: dict | None, use_id: str, session: str = "s1", **extra) -> dict:
    p = {"session_id": session, "transcript_path": f"/home/u/.claude/projects/x/{session}.jsonl", "cwd": "/work/repo",
         "permission_mode": "default", "hook_event_name": event, "tool_name": tool, "tool_use_id": use_id, **extra}
    if args is not None:
        p["tool_input"] = args
    return p


@pytest.fixture
def local(tmp_path):
    gate = Gate(Policy.from_text(POLICY, "attacks11.policy"), tmp_path / "ledger")
    yield (lambda **kw: ClaudeCodeHook(lambda proposer: LocalBackend(gate, proposer), **kw)), gate
    gate.close()


def test_dialog_run_of_the_original_is_not_recorded_as_the_reviewers_edit(local):
    """HIGH. What: PreToolUse answers "ask" (Claude Code's dialog shows {"file_path": "/etc/x"}).
    While the dialog is open, alice edits the pending request on countersign's queue to
    /tmp/ok (the edit approves it). The person at the dialog approves what it shows; Claude Code
    runs /etc/x, and PostToolUse reports tool_input /etc/x. `_find` accepts the *original*
    digest, and `_ran` then starts and finishes the request, whose execution_started/executed
    name the edited digest: the ledger says /tmp/ok ran, approved by alice, while /etc/x ran.
    Why: the ledger must never say more than what happened (and here says something else ran).
    Fix: in `_ran`, when the input that ran matches only the original digest of an edited
    request, do not start/finish it (report MismatchedInput), or record the run against the
    original arguments; accept the original digest only where the hook answered with
    updatedInput and Claude Code reports the pre-edit tool_input."""
    hook, gate = local
    h = hook(on_ask="dialog")
    original = {"file_path": "/etc/x", "content": "x"}
    reply = h.handle(_payload("PreToolUse", "Write", original, "tu-edit"))
    assert reply.output["hookSpecificOutput"]["permissionDecision"] == "ask"
    state = LocalBackend(gate, "x").find("tu-edit")
    gate.edit(state.request, editor="alice", args={"file_path": "/tmp/ok", "content": "x"}, digest=state.args_digest)
    h.handle(_payload("PostToolUse", "Write", original, "tu-edit", tool_response={"ok": True}))
    after = gate.get(state.request)
    # what ran was /etc/x: the ledger must not show the edited call as executed
    assert after.status != "executed", f"ledger says request {state.request} ran with the edited args {gate.arguments(state.request) if after.status != 'executed' else after.digest}"


MORE_APPROVERS = f"""
policy "attacks11-quorum"
default deny "no"
group maintainers = ["{ME}", "alice", "bob"]
ask Deploy reason "Deploys need two maintainers." approvers 2 from maintainers
"""


def test_post_tool_use_does_not_invent_a_dialog_approval_the_hook_never_offered(tmp_path):
    """MEDIUM. What: Deploy needs 2 maintainers, so PreToolUse never offers Claude Code's dialog
    (`_dialog_settles` is False) and waits on the queue; Claude Code kills the hook at its
    timeout (or the agent runs in bypassPermissions / an allow rule), a non-blocking error, and
    the call runs. PostToolUse then calls `decide(approve, reviewer=<OS account>, comment=
    "approved in Claude Code's permission dialog")` unconditionally for any still-pending
    request: the ledger shows an approval the person never gave, for a request whose policy
    said one person's dialog cannot settle it. Why: the ledger must not say more than happened;
    an invented approval also counts toward the quorum of a later, real reviewer. Fix: record
    at PreToolUse that the dialog was offered (e.g. a note event, or the Gate's call data) and
    let PostToolUse approve only such requests; otherwise report the run as unapproved."""
    from adapters.claude_code import context_of

    gate = Gate(Policy.from_text(MORE_APPROVERS, "q.policy"), tmp_path / "ledger")
    try:
        post = _payload("PostToolUse", "Deploy", {"env": "prod"}, "tu-q", permission_mode="bypassPermissions",
                        tool_response={"ok": True})
        # the PreToolUse that the hook was killed in: proposed, pending, never answered
        v = LocalBackend(gate, "claude-code:s1").propose("Deploy", {"env": "prod"}, call_id="tu-q", run="s1",
                                                         context=context_of(post))
        assert v.status == "pending"
        ClaudeCodeHook(lambda p: LocalBackend(gate, p)).handle(post)
        state = gate.get(v.request)
        assert ME not in state.approvals, f"ledger shows {ME}'s approval {state.approvals}"
    finally:
        gate.close()


# --- adapters/http1.py: a broken or hostile service must fail closed, not hang -------------------

def _serve(kind: str):
    """A loopback server answering each connection with `kind`: "interim" (1xx forever) or
    "trickle" (a body one byte at a time, forever). Returns (url, stop)."""
    import socket
    import threading
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    stop = threading.Event()

    def one(conn):
        try:
            conn.recv(65536)
            if kind == "interim":
                while not stop.is_set():
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    time.sleep(0.05)
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n")
                while not stop.is_set():
                    conn.sendall(b" ")
                    time.sleep(0.05)
        except OSError:
            pass
        finally:
            conn.close()

    def loop():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()
        srv.close()

    threading.Thread(target=loop, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", stop.set


@pytest.mark.parametrize("kind", ["interim", "trickle"])
def test_a_service_that_never_finishes_its_answer_fails_the_call_in_bounded_time(kind):
    """MEDIUM. What: ServiceBackend(timeout=0.5) proposes to a service that sends 1xx interim
    responses without end (http1 skips them in a `while True`), or a 100 MB Content-Length body
    one byte every 50 ms. The socket timeout applies to each read, so neither ever times out:
    the hook's PreToolUse (and every adapter's propose/wait) hangs until Claude Code kills the
    hook, whose timeout is a non-blocking error, after which Claude Code goes on with its own
    permission flow. Why: fail closed means a bounded, denying answer; "silence never means
    yes" (and the body is also read whole into memory, unbounded). Fix: one deadline per
    exchange in Connection.request (time.monotonic, checked in _line/_exactly/read loops and
    used to shrink the socket timeout), a cap on interim responses, and a cap on body size."""
    import threading

    from adapters.backend import BackendError, ServiceBackend

    url, stop = _serve(kind)
    outcome: list = []

    def propose():
        try:
            outcome.append(ServiceBackend(url, "t", timeout=0.5).propose("Read", {"file_path": "/x"}))
        except BackendError as exc:
            outcome.append(exc)
        except Exception as exc:  # noqa: BLE001 - any failure is fail-closed enough here
            outcome.append(exc)

    t = threading.Thread(target=propose, daemon=True)
    t.start()
    t.join(6.0)
    hung = t.is_alive()
    stop()
    t.join(3.0)
    assert not hung, "propose() was still waiting on the service after 6 s with timeout=0.5"
    assert outcome and isinstance(outcome[0], Exception)


def test_a_tool_use_id_reused_in_another_session_records_that_sessions_run(local):
    """LOW-MEDIUM. What: session s1 runs Write X under tool_use_id "tu-r" (dialog, then
    PostToolUse: executed). Session s2 (a resumed/forked conversation, or any payload reusing
    the id) sends the same tool_use_id with the same input: PreToolUse correctly refuses to
    ride on s1's request (the context differs, CallIdConflict) and proposes it under the
    derived id, which asks; the person approves in the dialog and it runs. PostToolUse's
    `_find` looks up the bare tool_use_id first, accepts s1's request (same tool, same
    digest, no check of session/proposer), sees "executed" and returns "recorded before": s2's
    run is never recorded and its request stays pending. Why: a call that ran must be in the
    ledger (and the converse, a fresh approved request of s1 would be consumed by s2's run).
    Fix: in `_find`, accept a request only when its run/proposer matches the payload's
    session (as PreToolUse's conflict check does), then try the derived id."""
    hook, gate = local
    h = hook(on_ask="dialog")
    args = {"file_path": "/work/repo/a.txt", "content": "x"}
    assert h.handle(_payload("PreToolUse", "Write", args, "tu-r", session="s1")).output["hookSpecificOutput"][
        "permissionDecision"] == "ask"
    h.handle(_payload("PostToolUse", "Write", args, "tu-r", session="s1", tool_response={"ok": 1}))
    assert h.handle(_payload("PreToolUse", "Write", args, "tu-r", session="s2")).output["hookSpecificOutput"][
        "permissionDecision"] == "ask"
    reply = h.handle(_payload("PostToolUse", "Write", args, "tu-r", session="s2", tool_response={"ok": 2}))
    from adapters.claude_code import derived_call_id

    theirs = LocalBackend(gate, "x").find(derived_call_id("tu-r", "Write", args))
    assert theirs is not None
    assert theirs.status == "executed", f"s2's run is not in the ledger: request {theirs.request} is {theirs.status}; {reply}"


def test_an_asyncgate_execute_cancelled_during_its_start_is_not_running_forever(tmp_path):
    """LOW. What: AsyncGate.execute awaits `gate._start(..., running_here=True)` in a worker
    thread; cancelling the task while that thread works (the commit's fsync) raises
    CancelledError in the coroutine, but the thread still records execution_started and adds
    the request to `gate._running`, and nothing ever calls `_release` (only `_run_started`
    does). From then on this process answers ExecutionInProgress ("running now; its outcome is
    not recorded yet") for a tool that never ran, and `finish` refuses to record any outcome.
    The module docstring promises a cancelled call is ExecutionUnknown on a later try, as a
    crash. Fix: shield the start (asyncio.shield on the to_thread future and release on
    cancel after it completes), or claim `_running` only in the coroutine after the start
    returns."""
    from ledger.workflow.async_gate import AsyncGate
    from ledger.workflow.gate import ExecutionUnknown
    from tests.support import cancel_while_written

    gate = Gate(Policy.from_text('policy "a"\nallow t\n', "a.policy"), tmp_path / "ledger")
    p = gate.propose("t", {}, proposer="agent")
    try:
        cancel_while_written(gate, "_start", lambda: AsyncGate(gate).execute(p.request, lambda args: "ran"))
        with pytest.raises(ExecutionUnknown):
            gate.execute(p.request, lambda args: "again")
    finally:
        gate.close()


def test_a_tool_response_with_a_lone_surrogate_still_records_that_the_call_ran(local):
    """MEDIUM. What: a Write approved in the dialog runs; Claude Code's PostToolUse carries a
    tool_response whose text holds a lone surrogate (JS strings may: output cut at a length
    limit in the middle of a surrogate pair; JSON.stringify writes it as "\\ud83d"). The hook
    starts the request, then `Gate.finish` computes value_digest(result), gets ArgumentsError
    and raises InvalidCall: no `executed` is ever written, the request stays "executing" (the
    outcome unknown, as after a crash) although the call ran and succeeded. `execute` does the
    opposite for the same result (`_result_record`: "never raises: a result that cannot be
    recorded is an outcome without a digest"). Any agent of the service reporting such a result
    hits the same. Fix: in `finish`, as in `_result_record`, record the outcome "ok" without a
    digest (or with a digest of a sanitised value) instead of refusing."""
    import json

    hook, gate = local
    h = hook(on_ask="dialog")
    args = {"file_path": "/work/repo/s.txt", "content": "x"}
    h.handle(_payload("PreToolUse", "Write", args, "tu-s"))
    raw = json.dumps(_payload("PostToolUse", "Write", args, "tu-s", tool_response={"text": "cut here: "}))
    raw = raw.replace("cut here: ", "cut here: \\ud83d")  # exactly what JSON.stringify writes for it
    reply = h.handle(raw)
    state = LocalBackend(gate, "x").find("tu-s")
    assert state.status == "executed", f"request {state.request} is {state.status}: {reply}"


def test_post_tool_use_does_not_approve_a_stage_the_dialog_was_never_judged_for(tmp_path):
    """LOW (found by the final attack). PreToolUse stamps the dialog mark on the proposal, then
    judges stage 1 (two approvers: no dialog, it waits on the queue). Killed, the call runs; the
    ask escalates to a stage one approval by the OS account meets. PostToolUse must not record a
    dialog approval for that stage: no dialog was shown for it."""
    from adapters.claude_code import context_of
    from ledger.clock import ManualClock

    from tests.support import START

    clock = ManualClock(START)
    policy = Policy.from_text(f'policy "esc"\ndefault deny "no"\ngroup maintainers = ["{ME}", "alice", "bob"]\n'
                              f'ask Deploy reason "two" approvers 2 from maintainers\n'
                              f'  timeout 1m else escalate approvers 1 from ["{ME}"] timeout 1h else reject\n', "e.policy")
    gate = Gate(policy, tmp_path / "ledger", clock=clock)
    try:
        post = _payload("PostToolUse", "Deploy", {"env": "prod"}, "tu-e", tool_response={"ok": True})
        context = {**context_of(post), "countersign_on_ask": "dialog"}  # as PreToolUse in dialog mode records it
        v = LocalBackend(gate, "claude-code:s1").propose("Deploy", {"env": "prod"}, call_id="tu-e", run="s1", context=context)
        assert v.status == "pending"
        clock.advance(120)
        gate.expire()
        assert gate.get(v.request).stage == 2
        ClaudeCodeHook(lambda p: LocalBackend(gate, p)).handle(post)
        assert ME not in gate.get(v.request).approvals
    finally:
        gate.close()
