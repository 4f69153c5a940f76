"""`countersign hook claude-code` (adapters.claude_code): every real PreToolUse payload of the
corpus answered as the policy says; the ask answered in Claude Code's dialog (PostToolUse →
approved by the OS account and executed; PermissionDenied → cancelled) or on countersign's queue
(approve / edit / reject / respond by a reviewer in another thread or through the service; silence
→ deny and cancelled); errors fail closed; the ledger verifies and the DuckDB views agree."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest
import hypothesis
from hypothesis import strategies as st

from adapters.backend import LocalBackend, ServiceBackend
from adapters.claude_code import ClaudeCodeHook, context_of, derived_call_id, main, settings
from dsl import Policy
from dsl.claude_import import hook_context
from ledger import Gate, verify
from ledger.analytics.views import connect as views
from ledger.store import log as logmod
from service_process import Server
from service_support import setup

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "claude_code_pretooluse_payloads.jsonl"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpus/claude_code_pretooluse_payloads.jsonl")
SAMPLE = ROOT / "samples" / "coding-agent.policy"
ME = getpass.getuser()
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}

POLICY = f"""
policy "hook-test"
default ask "No rule covers this tool; a maintainer decides."
  approvers 1 from maintainers
  decisions approve, edit, reject, respond
  timeout 1h
group maintainers = ["{ME}", "alice"]

allow Read
deny Bash when args.command == "rm -rf /" reason "Never delete the root; delete specific paths."
ask Deploy reason "Deploys need two maintainers." approvers 2 from maintainers
"""

SERVICE_POLICY = """
policy "hook-service-test"
default ask "No rule covers this tool; a supervisor decides."
  approvers 1 from sups
  decisions approve, edit, reject, respond
  timeout 1h
group sups = ["sup-1", "sup-2", "sup-3"]

allow Read
deny Bash when args.command == "rm -rf /" reason "Never delete the root; delete specific paths."
"""


def payload(event: str, tool: str, args: dict | None, use_id: str, session: str = "s1", **extra) -> dict:
    p = {"session_id": session, "transcript_path": f"/home/u/.claude/projects/x/{session}.jsonl", "cwd": "/work/repo",
         "permission_mode": "default", "hook_event_name": event, "tool_name": tool, "tool_use_id": use_id, **extra}
    if args is not None:
        p["tool_input"] = args
    return p


def decision(reply) -> tuple[str, str, dict | None]:
    assert reply.exit_code == 0, reply.stderr
    out = reply.output["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out.get("permissionDecisionReason", ""), out.get("updatedInput")


def requests_view(path: Path) -> dict[int, dict]:
    con = views(path)
    try:
        cur = con.execute("SELECT request, status, decision, decided_by, outcome, call_id, proposer FROM requests")
        names = [d[0] for d in cur.description]
        return {row[0]: dict(zip(names, row)) for row in cur.fetchall()}
    finally:
        con.close()


@pytest.fixture
def local(tmp_path):
    """(hook factory, the Gate, the ledger path): hooks on one local Gate."""
    path = tmp_path / "ledger"
    gate = Gate(Policy.from_text(POLICY, "hook-test.policy"), path)

    def backend_for(proposer):
        return LocalBackend(gate, proposer)

    def hook(**kw):
        return ClaudeCodeHook(backend_for, **kw)

    yield hook, gate, path
    gate.close()
    assert verify(path).ok


def reviewer_thread(path: Path, script: list[tuple], seen: list) -> threading.Thread:
    """A reviewer in another thread, on its own Gate: for each pending request (in order) one
    (decision, by, kwargs) of `script`."""
    def work():
        reviewer = Gate(Policy.from_text(POLICY, "hook-test.policy"), path)
        try:
            for step in script:
                give_up = time.monotonic() + 20
                while time.monotonic() < give_up:
                    pending = [s for s in reviewer.pending() if s.request not in seen]
                    if pending:
                        break
                    time.sleep(0.02)
                else:
                    return
                state = pending[0]
                seen.append(state.request)
                what, by, kw = step
                reviewer.decide(state.request, what, by=by, digest=state.digest, **kw)
        finally:
            reviewer.close()

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t


# --- the corpus ---------------------------------------------------------------------------------

@pytest.mark.skipif(not CORPUS.exists(), reason="the shared corpus is absent")
def test_every_corpus_payload_gets_valid_output_and_the_policys_decision(tmp_path, monkeypatch):
    monkeypatch.setattr(logmod, "_sync", lambda fd: None)  # durability is not what this test checks: speed
    policy = Policy.load(SAMPLE)
    path = tmp_path / "ledger"
    gate = Gate(policy, path)
    hook = ClaudeCodeHook(lambda proposer: LocalBackend(gate, proposer), on_ask="dialog", reviewer="alice", wait=0)
    rows = [json.loads(line)["payload"] for line in CORPUS.read_text().splitlines() if line.strip()]
    counts: dict[str, int] = {}
    repeats = windows = 0
    first_input: dict[str, object] = {}
    for p in rows:
        reply = hook.handle(p)
        if p.get("hook_event_name") != "PreToolUse":
            assert reply.exit_code == 2 and reply.output is None and "not run" in reply.stderr
            counts["blocked"] = counts.get("blocked", 0) + 1
            continue
        got, reason, updated = decision(reply)
        assert updated is None
        args = p.get("tool_input")
        if not isinstance(args, dict):
            assert got == "deny" and "no tool_input" in reason
            counts["no-input"] = counts.get("no-input", 0) + 1
            continue
        assert "could not decide" not in reason, reason  # no CallIdConflict, no error
        assert {k: v for k, v in context_of(p).items() if k in ("cwd", "home")} == hook_context(p)
        stored = msgspec.json.decode(msgspec.json.encode(args))
        expected = policy.evaluate(p["tool_name"], stored, context_of(p)).effect
        assert got == expected, (p["tool_name"], args, reason)
        if got == "deny":
            assert reason
        counts[got] = counts.get(got, 0) + 1
        use_id = p.get("tool_use_id")
        if use_id in first_input and first_input[use_id] != args:
            repeats += 1
        first_input.setdefault(use_id, args)
        windows += ":\\" in json.dumps(args)
    gate.close()
    assert sum(counts.values()) == len(rows) == 4226
    assert counts["no-input"] >= 164 and counts["allow"] and counts["deny"] and counts["ask"]
    assert windows > 500
    report = verify(path)
    assert report.ok
    print(counts, "windows", windows)


def test_a_second_input_under_one_tool_use_id_is_decided_on_its_own(local):
    hook, gate, path = local
    h = hook(reviewer="alice")
    summary = {"tool_name": "Bash", "tool_use_id": "tu-1", "session_id": "s1", "hook_event_name": "PreToolUse",
               "tool_summary": {"command": "ls"}}
    got, reason, _ = decision(h.handle(summary))
    assert got == "deny" and "no tool_input" in reason and gate.find(call_id="tu-1") is None
    assert decision(h.handle(payload("PreToolUse", "Read", {"file_path": "/work/repo/a"}, "tu-2")))[0] == "allow"
    # the same id again with another input: proposed as a call of its own, and the policy asks
    got, _, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/x", "content": "y"}, "tu-2")))
    assert got == "ask"
    derived = derived_call_id("tu-2", "Write", {"file_path": "/etc/x", "content": "y"})
    assert gate.find(call_id=derived).status == "pending" and gate.find(call_id="tu-2").status == "allowed"
    # the first input again is the first call (no second request); PostToolUse finds each by its input
    assert decision(h.handle(payload("PreToolUse", "Read", {"file_path": "/work/repo/a"}, "tu-2")))[0] == "allow"
    assert h.handle(payload("PostToolUse", "Read", {"file_path": "/work/repo/a"}, "tu-2", tool_response={})).output == {}
    assert gate.find(call_id="tu-2").status == "executed" and gate.find(call_id=derived).status == "pending"


def test_a_run_reported_in_another_session_never_consumes_this_sessions_request(local):
    """PostToolUse finds a request by its tool_use_id within the payload's session only: session
    s2 reporting a run under s1's tool_use_id neither approves nor runs s1's pending request."""
    hook, gate, path = local
    h = hook(on_ask="dialog")
    args = {"file_path": "/work/repo/b.txt", "content": "x"}
    assert decision(h.handle(payload("PreToolUse", "Write", args, "tu-s", session="s1")))[0] == "ask"
    reply = h.handle(payload("PostToolUse", "Write", args, "tu-s", session="s2", tool_response={"ok": 1}))
    assert "never proposed" in reply.output["systemMessage"]
    mine = gate.find(call_id="tu-s")
    assert (mine.status, mine.approvals) == ("pending", {})


# --- Claude Code's dialog -----------------------------------------------------------------------

def test_dialog_mode_records_the_person_at_the_dialog_and_what_ran(local):
    hook, gate, path = local
    h = hook(on_ask="dialog", wait=0.2)
    assert h.reviewer == ME
    # allowed, then ran
    assert decision(h.handle(payload("PreToolUse", "Read", {"file_path": "/work/repo/a"}, "t-read")))[0] == "allow"
    h.handle(payload("PostToolUse", "Read", {"file_path": "/work/repo/a"}, "t-read", tool_response={"file": "x"}))
    # denied, with the policy's reason for the model
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Bash", {"command": "rm -rf /"}, "t-rm")))
    assert got == "deny" and reason == "Never delete the root; delete specific paths."
    # asked in the dialog, approved there, ran
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/x"}, "t-ok")))
    assert got == "ask" and ME in reason
    h.handle(payload("PostToolUse", "Write", {"file_path": "/etc/x"}, "t-ok", tool_response={"ok": True}))
    # asked, then Claude Code's auto-mode classifier refused it
    assert decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/y"}, "t-no")))[0] == "ask"
    h.handle(payload("PermissionDenied", "Write", {"file_path": "/etc/y"}, "t-no", reason="looks destructive"))
    # asked, approved, failed
    assert decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/z"}, "t-fail")))[0] == "ask"
    h.handle(payload("PostToolUseFailure", "Write", {"file_path": "/etc/z"}, "t-fail", error="EACCES"))
    # a quorum one person cannot meet is not offered in the dialog: it waits on the queue, then is cancelled
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Deploy", {"env": "prod"}, "t-deploy")))
    assert got == "deny" and "one approval does not meet" in reason and "cancelled" in reason
    # a PostToolUse repeated records nothing twice
    assert h.handle(payload("PostToolUse", "Write", {"file_path": "/etc/x"}, "t-ok", tool_response={})).output == {}

    states = {cid: gate.find(call_id=cid) for cid in ("t-read", "t-rm", "t-ok", "t-no", "t-fail", "t-deploy")}
    assert states["t-read"].status == "executed" and states["t-read"].outcome == "ok"
    assert states["t-rm"].status == "denied"
    ok = states["t-ok"]
    assert (ok.status, ok.outcome, ok.decided_by, ok.approvers, ok.proposer) == ("executed", "ok", ME, [ME], "claude-code:s1")
    assert states["t-no"].status == "cancelled" and "looks destructive" in states["t-no"].reason
    assert states["t-fail"].status == "executed" and states["t-fail"].outcome == "error" and "EACCES" in states["t-fail"].error
    assert states["t-deploy"].status == "cancelled"
    gate.close()
    view = {row["call_id"]: row for row in requests_view(path).values()}
    for cid, state in states.items():
        row = view[cid]
        assert (row["status"], row["outcome"], row["decided_by"], row["proposer"]) == \
            (state.status, state.outcome, state.decided_by, state.proposer), cid


def test_a_call_that_ran_without_the_dialog_gets_no_invented_approval(local):
    """PostToolUse records the dialog's approval only where PreToolUse offered the dialog (its
    proposal's context says so: countersign_on_ask "dialog", and one approval settles it). A
    wait-mode ask whose hook Claude Code stopped, or a quorum of two, that ran anyway ran
    without countersign's approval: no one's approval is recorded, and the request is cancelled
    with a reason saying it ran (no reviewer is asked about it afterwards)."""
    hook, gate, path = local
    # wait mode: the proposal the hook was stopped in (no reviewer answered), then the run
    stopped = LocalBackend(gate, "claude-code:s1").propose(
        "Write", {"file_path": "/etc/q"}, call_id="t-stopped", run="s1",
        context=context_of(payload("PreToolUse", "Write", {"file_path": "/etc/q"}, "t-stopped")))
    assert stopped.status == "pending"
    reply = hook(on_ask="dialog").handle(payload("PostToolUse", "Write", {"file_path": "/etc/q"}, "t-stopped",
                                                 permission_mode="bypassPermissions", tool_response={"ok": 1}))
    assert "without countersign's approval" in reply.output["systemMessage"]
    state = gate.get(stopped.request)
    assert (state.status, state.approvals, state.decided_by) == ("cancelled", {}, "claude-code:s1")
    assert "ran this call without countersign's approval" in state.reason and "bypassPermissions" in state.reason
    # dialog mode: a quorum of two is never offered in the dialog, so its run is not approved either
    dialog = hook(on_ask="dialog", wait=0.2)
    h_ctx = context_of(payload("PreToolUse", "Deploy", {"env": "prod"}, "t-two"))
    two = LocalBackend(gate, "claude-code:s1").propose("Deploy", {"env": "prod"}, call_id="t-two", run="s1",
                                                       context={**h_ctx, "countersign_on_ask": "dialog"})
    gate.approve(two.request, approver="alice", digest=two.args_digest)  # one of two, on the queue
    dialog.handle(payload("PostToolUse", "Deploy", {"env": "prod"}, "t-two", tool_response={}))
    state = gate.get(two.request)
    assert ME not in state.approvals and state.status == "cancelled"
    # the dialog offered (the hook's own PreToolUse) is still recorded as the person's approval
    assert decision(dialog.handle(payload("PreToolUse", "Write", {"file_path": "/etc/r"}, "t-offered")))[0] == "ask"
    assert gate.stored_context(gate.find(call_id="t-offered").request)["countersign_on_ask"] == "dialog"
    dialog.handle(payload("PostToolUse", "Write", {"file_path": "/etc/r"}, "t-offered", tool_response={}))
    state = gate.find(call_id="t-offered")
    assert (state.status, state.decided_by) == ("executed", ME)


def test_the_proposer_never_approves_its_own_call(local):
    hook, gate, path = local
    h = hook(on_ask="dialog", reviewer="claude-code:s1", wait=0.2)  # as if the agent's identity sat at the dialog
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/x"}, "t-self")))
    assert got == "deny" and "proposed the call" in reason


# --- countersign's queue ------------------------------------------------------------------------

def test_wait_mode_approve_edit_reject_respond_and_silence(local):
    hook, gate, path = local
    h = hook(on_ask="wait", wait=20)
    seen: list[int] = []
    t = reviewer_thread(path, [
        ("approve", "alice", {}),
        ("edit", "alice", {"args": {"file_path": "/work/repo/safe.txt"}, "reason": "inside the project"}),
        ("reject", "alice", {"reason": "Not today; open a ticket instead."}),
        ("respond", "alice", {"message": "The file already says that."}),
    ], seen)
    got, reason, updated = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/a"}, "w-approve")))
    assert got == "allow" and "alice" in reason and updated is None
    got, reason, updated = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/b"}, "w-edit")))
    assert got == "allow" and updated == {"file_path": "/work/repo/safe.txt"}
    h.handle(payload("PostToolUse", "Write", updated, "w-edit", tool_response={"ok": 1}))
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/c"}, "w-reject")))
    assert (got, reason) == ("deny", "Not today; open a ticket instead.")
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/d"}, "w-respond")))
    assert (got, reason) == ("deny", "The file already says that.")
    t.join(10)
    h.wait = 0.3
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/e"}, "w-silence")))
    assert got == "deny" and "No reviewer decided within 0.3 seconds" in reason and "cancelled" in reason
    expect = {"w-approve": ("approved", "alice"), "w-edit": ("executed", "alice"), "w-reject": ("rejected", "alice"),
              "w-respond": ("responded", "alice"), "w-silence": ("cancelled", "claude-code:s1")}
    for cid, (status, by) in expect.items():
        state = gate.find(call_id=cid)
        assert (state.status, state.decided_by) == (status, by), cid
    gate.close()
    view = {row["call_id"]: row for row in requests_view(path).values()}
    for cid, (status, by) in expect.items():
        assert (view[cid]["status"], view[cid]["decided_by"]) == (status, by), cid


# --- errors -------------------------------------------------------------------------------------

def test_errors_fail_closed_without_a_traceback(local, tmp_path):
    hook, gate, path = local
    h = hook()
    for bad in ("not json", "[1, 2]", json.dumps({"hook_event_name": "Stop"}), json.dumps({"tool_name": "Read"})):
        reply = h.handle(bad)
        assert reply.exit_code == 2 and "not run" in reply.stderr and "Traceback" not in reply.stderr
    got, reason, _ = decision(h.handle({"hook_event_name": "PreToolUse", "tool_input": {}}))
    assert got == "deny" and "tool_name" in reason

    def broken(proposer):
        raise OSError("the disk is gone")

    got, reason, _ = decision(ClaudeCodeHook(broken).handle(payload("PreToolUse", "Read", {"file_path": "/a"}, "x")))
    assert got == "deny" and "the disk is gone" in reason
    reply = ClaudeCodeHook(broken).handle(payload("PostToolUse", "Read", {"file_path": "/a"}, "x", tool_response=1))
    assert reply.exit_code == 0 and "the disk is gone" in reply.output["systemMessage"]
    # a call PreToolUse never proposed is reported, not invented
    reply = h.handle(payload("PostToolUse", "Read", {"file_path": "/a"}, "never", tool_response=1))
    assert "never proposed" in reply.output["systemMessage"]


def run_cli(args: list[str], stdin: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.entry", "hook", "claude-code", *args], input=stdin, cwd=ROOT,
                          env={**ENV, **env}, capture_output=True, text=True, timeout=60)


def test_the_cli_process(tmp_path):
    policy = tmp_path / "p.policy"
    policy.write_text(POLICY)
    env = {"COUNTERSIGN_POLICY": str(policy), "COUNTERSIGN_LEDGER": str(tmp_path / "ledger")}
    r = run_cli([], json.dumps(payload("PreToolUse", "Read", {"file_path": "/work/repo/a"}, "c1")), env)
    assert r.returncode == 0 and json.loads(r.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow"
    r = run_cli([], json.dumps(payload("PostToolUse", "Read", {"file_path": "/work/repo/a"}, "c1", tool_response="x")), env)
    assert r.returncode == 0 and json.loads(r.stdout) == {}
    r = run_cli([], json.dumps(payload("PreToolUse", "Bash", {"command": "rm -rf /"}, "c2")), env)
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "Never delete" in out["permissionDecisionReason"]
    r = run_cli(["--on-ask", "wait", "--wait", "0"], json.dumps(payload("PreToolUse", "Write", {"file_path": "/etc/x"}, "c3")), env)
    assert json.loads(r.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny" and r.returncode == 0
    r = run_cli([], "{oops", env)
    assert r.returncode == 2 and "not JSON" in r.stderr and not r.stdout and "Traceback" not in r.stderr
    r = run_cli([], json.dumps(payload("PreToolUse", "Read", {"file_path": "C:\\Users\\me\\a.txt"}, "c4",
                                       cwd="C:\\Users\\me")), env)
    assert r.returncode == 0 and json.loads(r.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow"
    # a policy that does not load: deny, with the reason
    bad = tmp_path / "bad.policy"
    bad.write_text("allow (")
    r = run_cli([], json.dumps(payload("PreToolUse", "Read", {"file_path": "/a"}, "c5")),
                {"COUNTERSIGN_POLICY": str(bad), "COUNTERSIGN_LEDGER": str(tmp_path / "ledger")})
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "does not load" in out["permissionDecisionReason"]
    # not configured: exit 2 (blocks), no traceback
    r = run_cli([], json.dumps(payload("PreToolUse", "Read", {"file_path": "/a"}, "c6")),
                {"COUNTERSIGN_POLICY": "", "COUNTERSIGN_LEDGER": "", "COUNTERSIGN_URL": ""})
    assert json.loads(r.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny" and "COUNTERSIGN_POLICY" in r.stdout
    r = run_cli(["settings", "--timeout", "120"], "", {})
    hooks = json.loads(r.stdout)["hooks"]
    assert set(hooks) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied"}
    pre = hooks["PreToolUse"][0]["hooks"][0]
    assert pre["timeout"] == 120 and "--wait 105" in pre["command"]
    assert verify(tmp_path / "ledger").ok


def test_settings_give_every_event_a_timeout():
    s = settings(timeout=60)
    for event, entries in s["hooks"].items():
        assert entries[0]["matcher"] == "*" and entries[0]["hooks"][0]["timeout"] > 0
    assert "--wait 45" in s["hooks"]["PreToolUse"][0]["hooks"][0]["command"]


# --- through the service ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = setup(tmp_path_factory.mktemp("hooksvc"), SERVICE_POLICY)
    with Server(s) as server:
        yield s, server


def test_through_the_service_wait_and_dialog(served):
    s, server = served
    agent = ServiceBackend(server.url, s.tokens["agent-1"])
    sup = ServiceBackend(server.url, s.tokens["agent-1"], reviewer_token=s.tokens["sup-1"])
    h = ClaudeCodeHook(lambda proposer: agent, on_ask="wait", wait=20, reviewer="ignored")

    def decide_soon(call_id, what, **kw):
        def work():
            for _ in range(400):
                state = agent.find(call_id)
                if state is not None and state.waiting:
                    sup.decide(state.request, what, digest=state.args_digest, **kw)
                    return
                time.sleep(0.025)
        t = threading.Thread(target=work, daemon=True)
        t.start()
        return t

    assert decision(h.handle(payload("PreToolUse", "Read", {"file_path": "/a"}, "sv-read")))[0] == "allow"
    h.handle(payload("PostToolUse", "Read", {"file_path": "/a"}, "sv-read", tool_response={"x": 1}))
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Bash", {"command": "rm -rf /"}, "sv-rm")))
    assert got == "deny" and "Never delete" in reason
    t = decide_soon("sv-edit", "edit", args={"file_path": "/tmp/ok"}, reason="safer")
    got, _, updated = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/x"}, "sv-edit")))
    t.join(5)
    assert got == "allow" and updated == {"file_path": "/tmp/ok"}
    h.handle(payload("PostToolUse", "Write", updated, "sv-edit", tool_response={"ok": 1}))
    t = decide_soon("sv-respond", "respond", message="Already done.")
    assert decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/y"}, "sv-respond")))[:2] == \
        ("deny", "Already done.")
    t.join(5)
    h.wait = 0.2
    got, reason, _ = decision(h.handle(payload("PreToolUse", "Write", {"file_path": "/etc/z"}, "sv-silence")))
    assert got == "deny" and "cancelled" in reason
    # the dialog, with the person's reviewer token
    d = ClaudeCodeHook(lambda proposer: sup, on_ask="dialog")
    assert decision(d.handle(payload("PreToolUse", "Write", {"file_path": "/etc/w"}, "sv-dialog")))[0] == "ask"
    d.handle(payload("PostToolUse", "Write", {"file_path": "/etc/w"}, "sv-dialog", tool_response={}))
    states = {cid: agent.find(cid) for cid in ("sv-read", "sv-rm", "sv-edit", "sv-respond", "sv-silence", "sv-dialog")}
    assert [states[c].status for c in states] == ["executed", "denied", "executed", "responded", "cancelled", "executed"]
    assert states["sv-dialog"].decided_by == "sup-1" and states["sv-edit"].decided_by == "sup-1"
    # the cold CLI through the service
    env = {"COUNTERSIGN_URL": server.url, "COUNTERSIGN_TOKEN": s.tokens["agent-1"], "COUNTERSIGN_POLICY": "",
           "COUNTERSIGN_LEDGER": ""}
    r = run_cli([], json.dumps(payload("PreToolUse", "Read", {"file_path": "/b"}, "sv-cli")), env)
    assert json.loads(r.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow", r.stderr
    agent.close()
    sup.close()


OPTION_WORDS = ["--on-ask", "--on-ask=wait", "--on-ask=dialog", "--on-ask=", "dialog", "wait", "maybe", "--wait",
                "--wait=7.5", "30", "-5", "nan", "x1", "--policy", "--policy=p.policy", "p.policy", "--pol",
                "--ledger", "--ledger=dir", "--url", "--url=http://h:1", "--keep-result", "--keep-result=1",
                "--print-settings", "--timeout", "--timeout=60", "settings", "other", "--", "-h", "--help", ""]


@hypothesis.given(st.lists(st.sampled_from(OPTION_WORDS), max_size=7))
@hypothesis.settings(max_examples=600, deadline=None)
def test_the_fast_option_reader_agrees_with_argparse(words):
    """adapters.claude_code.parse_options reads the usual command lines without argparse: whatever
    it reads itself is what argparse reads (it hands every other command line to argparse)."""
    from adapters.claude_code import _plain_options, parser

    fast = _plain_options(words)
    if fast is None:
        return
    try:
        slow = parser().parse_args(words)
    except SystemExit:
        pytest.fail(f"argparse refuses {words!r}, the fast reader read {vars(fast)}")
    assert repr(sorted(vars(fast).items())) == repr(sorted(vars(slow).items()))  # repr: nan is nan
