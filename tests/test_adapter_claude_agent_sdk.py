"""adapters.claude_agent_sdk: the real Claude Code CLI (bundled with claude-agent-sdk), driven by a
stand-in for the Messages API on 127.0.0.1 (tests/anthropic_stand_in.py), gated by countersign.

One session: a Read the policy allows, a `Bash rm -rf` it denies, and four Writes it asks about,
decided approve / edit / reject / respond in turn by an authenticated reviewer in this process
(adapters.identity). The ledger verifies, and the DuckDB views (ledger.analytics.views) tell
what the SDK's messages, the model's tool results and the files on disk tell. Then the same
through the approval service (`countersign serve`, a real process), and the adapter's fail-closed
paths called directly."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")

from adapters.backend import BackendError, LocalBackend, ServiceBackend  # noqa: E402
from adapters.claude_agent_sdk import CountersignPermissions, countersign_options  # noqa: E402
from adapters.identity import RosterReviewers  # noqa: E402
from anthropic_stand_in import StandIn, bundled_cli, text, tool_use  # noqa: E402
from dsl import Policy  # noqa: E402
from ledger import Gate, verify  # noqa: E402
from ledger.proof.roster import load_roster  # noqa: E402
from service_support import setup  # noqa: E402

POLICY = """
policy "claude-agent-sdk-test"
group sups = ["sup-1", "sup-2", "sup-3"]
default deny "No rule covers this tool."

allow Read
allow Bash when not (args.command contains "rm ") id "shell"
deny Bash when args.command contains "rm -rf"
  reason "Never rm -rf; move the files to .trash/ instead."
ask Write
  reason "A person checks every write."
  approvers 1 from sups
  decisions approve, edit, reject, respond
  timeout 1h
  id "writes"
ask Edit approvers 2 from sups timeout 1h id "edits"
ask NotebookEdit
  reason "A person checks notebook edits."
  decisions approve, reject
  remember run
  timeout 1h
  id "notebooks"
"""

CLI = bundled_cli()
needs_cli = pytest.mark.skipif(CLI is None, reason="claude-agent-sdk's bundled claude CLI is not installed")

DECISIONS = ("approve", "edit", "reject", "respond")


def script(project: Path) -> tuple[list[list[dict]], dict[str, dict]]:
    calls = {
        "read": tool_use("Read", {"file_path": str(project / "notes.txt")}),
        "rm": tool_use("Bash", {"command": f"rm -rf {project / 'build'}", "description": "clean"}),
        **{d: tool_use("Write", {"file_path": str(project / f"{d}.txt"), "content": f"by the model ({d})\n"})
           for d in DECISIONS},
    }
    return [[calls[name]] for name in ("read", "rm", *DECISIONS)] + [[text("All done.")]], calls


class Reviewer(threading.Thread):
    """A reviewer in this process: decides each pending ask in turn (approve, edit, reject,
    respond), as the roster token's owner (never a name from the call)."""

    def __init__(self, backend_for, who: RosterReviewers, token: str, get_pending):
        super().__init__(daemon=True)
        self.backend_for, self.who, self.token, self.get_pending = backend_for, who, token, get_pending
        self.decided: list[tuple[int, str]] = []
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set() and len(self.decided) < len(DECISIONS):
                for request, digest, args in self.get_pending():
                    if any(r == request for r, _ in self.decided):
                        continue
                    decision = DECISIONS[len(self.decided)]
                    extra = {"edit": {"args": {**args, "content": "edited by the reviewer\n"}, "reason": "our wording"},
                             "reject": {"reason": "Not in this directory."},
                             "respond": {"message": "I wrote it myself; carry on."}}.get(decision, {})
                    backend = self.backend_for(self.token)
                    name = self.who(self.token)
                    backend.decide(request, decision, reviewer=name, digest=digest, **extra)
                    if decision == "edit":  # an edit alone waits for its approval (four-eyes allows the editor)
                        settled = backend.get(request)
                        if settled.waiting:
                            backend.decide(request, "approve", reviewer=name, digest=settled.args_digest)
                    self.decided.append((request, decision))
                time.sleep(0.02)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)


def run_session(options, api: StandIn, prompt: str = "Tidy the project.") -> list:
    """The SDK's messages of one query(); skips the test, with the reason, when the CLI could not
    start or never reached the stand-in (a login it wants, a network it needs)."""
    from claude_agent_sdk import query

    stderr: list[str] = []
    options.stderr = stderr.append

    async def main() -> list:
        return [message async for message in query(prompt=prompt, options=options)]

    try:
        return asyncio.run(asyncio.wait_for(main(), timeout=120))
    except Exception as exc:
        if not any(p.startswith("/v1/messages") for p in api.paths):
            pytest.skip(f"the bundled Claude Code CLI did not start or reach the stand-in: {exc!r}; "
                        f"stderr: {' | '.join(stderr[-5:])}")
        raise


def project_dir(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    (project / "build" / "keep.o").write_text("object")
    (project / "notes.txt").write_text("the notes\n")
    return project


def tool_results_of(messages) -> dict[str, tuple[bool, str]]:
    """tool_use_id → (is_error, text) from the SDK's UserMessages."""
    from claude_agent_sdk import ToolResultBlock, UserMessage

    found = {}
    for message in messages:
        if isinstance(message, UserMessage) and isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    content = block.content if isinstance(block.content, str) else \
                        "\n".join(b.get("text", "") for b in block.content or [])
                    found[block.tool_use_id] = (bool(block.is_error), content)
    return found


def transcript_tool_results(home: Path, session: str) -> dict[str, bool]:
    """tool_use_id → is_error from the transcript Claude Code itself wrote for the session
    (<CLAUDE_CONFIG_DIR>/projects/<project>/<session>.jsonl, one JSON entry a line)."""
    import json

    (path,) = (home / ".claude" / "projects").glob(f"*/{session}.jsonl")
    found = {}
    for line in path.read_text().splitlines():
        content = (json.loads(line).get("message") or {}).get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found[block["tool_use_id"]] = bool(block.get("is_error"))
    return found


def check_the_story(ledger: Path, messages, api: StandIn, calls: dict, project: Path, who: dict[str, str],
                    home: Path) -> None:
    """The SDK's messages, Claude Code's transcript, the model's view, the files and the DuckDB
    views agree."""
    from claude_agent_sdk import ResultMessage
    from ledger.analytics.views import connect

    assert verify(ledger).ok
    result = [m for m in messages if isinstance(m, ResultMessage)]
    assert result and not result[-1].is_error
    session = result[-1].session_id
    seen = tool_results_of(messages)
    assert seen == api.tool_results()  # what the SDK reported is what the model was sent
    assert transcript_tool_results(home, session) == {k: v[0] for k, v in seen.items()}
    ids = {name: block["id"] for name, block in calls.items()}

    # the files: Read ran, rm -rf did not, approve wrote the model's text, edit the reviewer's, the rest nothing
    assert (project / "build" / "keep.o").exists()
    assert (project / "approve.txt").read_text() == "by the model (approve)\n"
    assert (project / "edit.txt").read_text() == "edited by the reviewer\n"
    assert not (project / "reject.txt").exists() and not (project / "respond.txt").exists()

    assert seen[ids["read"]][0] is False and "the notes" in seen[ids["read"]][1]
    assert seen[ids["rm"]][0] is True and "Never rm -rf" in seen[ids["rm"]][1]
    assert seen[ids["approve"]][0] is False and seen[ids["edit"]][0] is False
    assert seen[ids["reject"]] == (True, seen[ids["reject"]][1]) and "Not in this directory." in seen[ids["reject"]][1]
    assert seen[ids["respond"]][0] is True and "I wrote it myself; carry on." in seen[ids["respond"]][1]

    con = connect(ledger)
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT call_id, tool, run, effect, status, decision, decided_by, edits, outcome, reason, result_digest "
        "FROM requests").fetchall()}
    assert set(rows) == set(ids.values())  # every call the model made, and only those
    by_name = {name: rows[ids[name]] for name in ids}
    assert all(r[1] == session for r in by_name.values())  # run = the SDK's session id
    assert by_name["read"][2:5] == ("allow", "executed", None) and by_name["read"][7] == "ok"
    assert by_name["rm"][2:5] == ("deny", "denied", "deny") and by_name["rm"][7] is None
    for name, decision, status in (("approve", "approve", "executed"), ("edit", "approve", "executed"),
                                   ("reject", "reject", "rejected"), ("respond", "respond", "responded")):
        tool, run, effect, st, dec, by, edits, outcome, reason, result_digest = by_name[name]
        assert (tool, effect, st, dec) == ("Write", "ask", status, decision), name
        assert by == who[name], name
        assert edits == (1 if name == "edit" else 0)
        assert (outcome == "ok" and result_digest) if status == "executed" else outcome is None
    assert by_name["reject"][8] == "Not in this directory."
    assert by_name["respond"][8] == "I wrote it myself; carry on."
    # the result recorded is what Claude Code reported (PostToolUse's tool_response)
    started = con.execute("SELECT count(*) FROM requests WHERE execution_started_at IS NOT NULL").fetchone()[0]
    assert started == 3


@needs_cli
def test_the_real_cli_with_a_local_ledger(tmp_path):
    s = setup(tmp_path / "roster", POLICY)
    roster = load_roster(s.roster)
    gate = Gate(Policy.from_text(POLICY, "test.policy"), tmp_path / "ledger")
    agent = LocalBackend(gate, "agent-1")
    project = project_dir(tmp_path)
    turns, calls = script(project)

    def pending():
        return [(p.request, p.digest, gate.arguments(p.request)) for p in gate.pending()]

    reviewer = Reviewer(lambda token: LocalBackend(gate, "unused"), RosterReviewers(roster), s.tokens["sup-2"], pending)
    with StandIn(turns) as api:
        options = countersign_options(agent, cwd=str(project), env=api.cli_env(tmp_path / "home"),
                                      wait_timeout=60, keep_result=True)
        reviewer.start()
        try:
            messages = run_session(options, api)
        finally:
            reviewer.stop.set()
            reviewer.join(5)
    assert not reviewer.errors, reviewer.errors
    gate.close()
    check_the_story(tmp_path / "ledger", messages, api, calls, project, {d: "sup-2" for d in DECISIONS},
                    tmp_path / "home")
    # keep_result: the Read's result is in the ledger, as Claude Code reported it
    with Gate(Policy.from_text(POLICY, "test.policy"), tmp_path / "ledger") as again:
        read = again.find(call_id=calls["read"]["id"])
        kept = again.result(read.request)
        assert kept.result_kept and kept.result["file"]["content"] == "the notes\n"


@needs_cli
def test_the_real_cli_through_the_approval_service(tmp_path):
    from service_process import Server

    s = setup(tmp_path / "svc", POLICY)
    project = project_dir(tmp_path)
    turns, calls = script(project)
    with Server(s) as server:
        agent = ServiceBackend(server.url, s.tokens["agent-1"])
        reviewers = {"sup-1": ServiceBackend(server.url, s.tokens["sup-1"], reviewer_token=s.tokens["sup-1"])}
        board = reviewers["sup-1"]

        def pending():
            return [(item["request"], item["args_digest"], item["args"])
                    for item in board._call("GET", "/v1/queue")["requests"]]

        class ServiceSide:  # the service authenticates the token itself: `who` only names it for the test
            def __call__(self, token):
                return "sup-1"

        reviewer = Reviewer(lambda token: board, ServiceSide(), s.tokens["sup-1"], pending)
        with StandIn(turns) as api:
            options = countersign_options(agent, cwd=str(project), env=api.cli_env(tmp_path / "home"), wait_timeout=60)
            reviewer.start()
            try:
                messages = run_session(options, api)
            finally:
                reviewer.stop.set()
                reviewer.join(5)
        assert not reviewer.errors, reviewer.errors
        agent.close()
    check_the_story(s.ledger, messages, api, calls, project, {d: "sup-1" for d in DECISIONS},
                    tmp_path / "home")


@pytest.fixture
def cli_user():
    """("nobody", a world-writable scratch directory), for running the CLI as a user other than
    root (the CLI refuses bypassPermissions as root); skips where there is no such user."""
    import pwd
    import shutil
    import tempfile

    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("Claude Code refuses bypassPermissions as root, and there is no user 'nobody' to run it as")
    scratch = Path(tempfile.mkdtemp(prefix="countersign-cli-"))
    scratch.chmod(0o777)
    yield "nobody", scratch
    shutil.rmtree(scratch, ignore_errors=True)


@needs_cli
@pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")  # the hook's ask reaches it
@pytest.mark.parametrize("mode,allowed", [
    ("acceptEdits", []), ("dontAsk", []), ("auto", []), ("plan", []), ("default", ["Write", "Bash"]),
    ("bypassPermissions", []),
])
def test_claude_codes_own_allow_never_skips_an_ask_or_a_deny(tmp_path, mode, allowed, request):
    """Claude Code would run these calls without asking (its mode or allowed_tools): the ask still
    waits for countersign's reviewer (here: a rejection) and the deny still holds."""
    from claude_agent_sdk import ClaudeAgentOptions

    gate = Gate(Policy.from_text(POLICY, "test.policy"), tmp_path / "ledger")
    agent = LocalBackend(gate, "agent-1")
    user, scratch = None, tmp_path
    if mode == "bypassPermissions" and hasattr(os, "geteuid") and os.geteuid() == 0:
        user, scratch = request.getfixturevalue("cli_user")  # Claude Code refuses bypassPermissions as root: the CLI runs as another user
    project = project_dir(scratch)
    if user:
        for path in (project, *project.rglob("*")):
            path.chmod(0o777)
    write = tool_use("Write", {"file_path": str(project / "w.txt"), "content": "x"})
    rm = tool_use("Bash", {"command": f"rm -rf {project / 'build'}", "description": "clean"})

    def reject_all():
        while not done.is_set():
            for p in gate.pending():
                gate.decide(p.request, "reject", by="sup-1", digest=p.digest, reason="No writes today.")
            time.sleep(0.02)

    done = threading.Event()
    reviewer = threading.Thread(target=reject_all, daemon=True)
    with StandIn([[write], [rm], [text("ok")]]) as api:
        common = dict(cwd=str(project), env=api.cli_env(scratch / "home"), allowed_tools=allowed, permission_mode=mode,
                      user=user)
        if mode == "bypassPermissions":  # countersign_options refuses it; wired by hand, the hook denies the ask
            permissions = CountersignPermissions(agent, wait_timeout=30)
            options = ClaudeAgentOptions(can_use_tool=permissions.can_use_tool, hooks=permissions.hooks(), **common)
        else:
            options = countersign_options(agent, wait_timeout=30, **common)
        reviewer.start()
        try:
            run_session(options, api)
        finally:
            done.set()
            reviewer.join(5)
    gate.close()
    assert verify(tmp_path / "ledger").ok
    assert not (project / "w.txt").exists() and (project / "build" / "keep.o").exists()
    seen = api.tool_results()
    assert seen[write["id"]][0] and seen[rm["id"]][0]
    assert ("No writes today." if mode != "bypassPermissions" else "bypassPermissions") in seen[write["id"]][1]


# --- the adapter's own paths, called directly (no CLI) ------------------------------------------

class Context:
    def __init__(self, tool_use_id):
        self.tool_use_id = tool_use_id


def pre_input(tool, args, call_id, **extra):
    return {"hook_event_name": "PreToolUse", "session_id": "s-1", "cwd": "/p", "tool_name": tool,
            "tool_input": args, "tool_use_id": call_id, "transcript_path": "/dev/null", **extra}


@pytest.fixture
def local(tmp_path):
    gate = Gate(Policy.from_text(POLICY, "test.policy"), tmp_path / "l")
    yield gate, LocalBackend(gate, "agent-1")
    gate.close()
    assert verify(tmp_path / "l").ok


def test_an_ask_that_no_one_decides_in_time_is_cancelled_and_denied(local):
    from claude_agent_sdk import PermissionResultDeny

    gate, agent = local
    adapter = CountersignPermissions(agent, wait_timeout=0.2)
    args = {"file_path": "/p/x", "content": "x"}
    pre = asyncio.run(adapter.pre_tool_use(pre_input("Write", args, "t-1"), "t-1", {}))
    assert pre["hookSpecificOutput"]["permissionDecision"] == "ask"
    answer = asyncio.run(adapter.can_use_tool("Write", args, Context("t-1")))
    assert isinstance(answer, PermissionResultDeny) and "not run" in answer.message
    assert gate.find(call_id="t-1").status == "cancelled"


def test_a_call_runs_at_most_once(local):
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

    gate, agent = local
    adapter = CountersignPermissions(agent)
    args = {"command": "ls", "description": "list"}
    assert asyncio.run(adapter.pre_tool_use(pre_input("Bash", args, "t-2"), "t-2", {})) == {}
    first = asyncio.run(adapter.can_use_tool("Bash", args, Context("t-2")))
    assert isinstance(first, PermissionResultAllow) and first.updated_input == args
    again = asyncio.run(adapter.can_use_tool("Bash", args, Context("t-2")))  # started: never twice
    assert isinstance(again, PermissionResultDeny) and "already ran" in again.message
    post = {**pre_input("Bash", args, "t-2"), "hook_event_name": "PostToolUse", "tool_response": {"stdout": "a"}}
    asyncio.run(adapter.post_tool_use(post, "t-2", {}))
    asyncio.run(adapter.post_tool_use(post, "t-2", {}))  # a second report changes nothing
    state = gate.find(call_id="t-2")
    assert state.status == "executed" and state.outcome == "ok"
    repeat = asyncio.run(adapter.pre_tool_use(pre_input("Bash", args, "t-2"), "t-2", {}))
    assert repeat["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_other_arguments_under_a_decided_call_id_are_refused(local):
    from claude_agent_sdk import PermissionResultDeny

    gate, agent = local
    adapter = CountersignPermissions(agent)
    asyncio.run(adapter.pre_tool_use(pre_input("Bash", {"command": "ls"}, "t-3"), "t-3", {}))
    answer = asyncio.run(adapter.can_use_tool("Bash", {"command": "rm -r /"}, Context("t-3")))
    assert isinstance(answer, PermissionResultDeny) and "CallIdConflict" in answer.message


def test_a_call_allowed_without_can_use_tool_is_recorded_by_post_tool_use_bound_to_its_digest(local):
    gate, agent = local
    adapter = CountersignPermissions(agent)
    args = {"file_path": "/p/a"}
    assert asyncio.run(adapter.pre_tool_use(pre_input("Read", args, "t-4"), "t-4", {})) == {}
    failure = {**pre_input("Read", args, "t-4"), "hook_event_name": "PostToolUseFailure", "error": "ENOENT"}
    asyncio.run(adapter.post_tool_use(failure, "t-4", {}))
    state = gate.find(call_id="t-4")
    assert (state.status, state.outcome, state.error) == ("executed", "error", "ENOENT")
    asyncio.run(adapter.pre_tool_use(pre_input("Read", {"file_path": "/p/b"}, "t-5"), "t-5", {}))
    other = {**pre_input("Read", {"file_path": "/etc/shadow"}, "t-5"), "hook_event_name": "PostToolUse",
             "tool_response": "..."}
    asyncio.run(adapter.post_tool_use(other, "t-5", {}))
    state = gate.find(call_id="t-5")
    assert state.outcome == "error" and "approved" in state.error


def test_backend_failures_and_bypass_mode_fail_closed(local):
    from claude_agent_sdk import PermissionResultDeny

    class Broken:
        def propose(self, *a, **k):
            raise BackendError("unreachable", "the service did not answer")

    adapter = CountersignPermissions(Broken())
    answer = asyncio.run(adapter.can_use_tool("Read", {"file_path": "/p/a"}, Context("t-6")))
    assert isinstance(answer, PermissionResultDeny) and "unreachable" in answer.message
    pre = asyncio.run(adapter.pre_tool_use(pre_input("Read", {"file_path": "/p/a"}, "t-6"), "t-6", {}))
    assert pre["hookSpecificOutput"]["permissionDecision"] == "deny"

    gate, agent = local
    bypass = pre_input("Write", {"file_path": "/p/y", "content": ""}, "t-7", permission_mode="bypassPermissions")
    pre = asyncio.run(CountersignPermissions(agent).pre_tool_use(bypass, "t-7", {}))
    assert pre["hookSpecificOutput"]["permissionDecision"] == "deny"
    with pytest.raises(ValueError):
        countersign_options(agent, permission_mode="bypassPermissions")
    with pytest.raises(ValueError):
        countersign_options(agent, can_use_tool=lambda *a: None)


def test_importing_the_adapter_does_not_import_the_sdk():
    import subprocess
    import sys

    from service_process import ENV, ROOT

    code = "import sys, adapters.claude_agent_sdk; assert 'claude_agent_sdk' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, check=True)


@needs_cli
def test_the_stand_in_drives_claude_p_with_command_hooks(tmp_path):
    """For `countersign hook claude-code` (another adapter): `claude -p --settings` against the
    stand-in runs a command hook for each tool call, with the payload fields the hook reads, and
    the hook's deny reaches the model."""
    import json
    import sys

    from anthropic_stand_in import hook_settings, run_cli

    project = project_dir(tmp_path)
    log = tmp_path / "hook.jsonl"
    hook = tmp_path / "hook.py"
    hook.write_text(
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        f"open({str(log)!r}, 'a').write(json.dumps(data) + '\\n')\n"
        "if data['hook_event_name'] == 'PreToolUse' and data['tool_name'] == 'Bash':\n"
        "    print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',\n"
        "        'permissionDecision': 'deny', 'permissionDecisionReason': 'no shell today'}}))\n")
    read = tool_use("Read", {"file_path": str(project / "notes.txt")})
    rm = tool_use("Bash", {"command": "rm -rf build", "description": "clean"})
    settings = hook_settings(tmp_path / "settings.json", f"{sys.executable} {hook}")
    with StandIn([[read], [rm], [text("ok")]]) as api:
        status, lines, stderr = run_cli(api, project, tmp_path / "home", "--settings", str(settings))
    if not any(p.startswith("/v1/messages") for p in api.paths):
        pytest.skip(f"the bundled Claude Code CLI did not start or reach the stand-in: {stderr[-500:]}")
    assert status == 0, stderr
    payloads = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(p["hook_event_name"], p["tool_use_id"]) for p in payloads] == [
        ("PreToolUse", read["id"]), ("PostToolUse", read["id"]), ("PreToolUse", rm["id"])]
    session = next(line for line in lines if line.get("type") == "system")["session_id"]
    assert all(p["session_id"] == session and p["cwd"] == str(project) for p in payloads)
    assert api.tool_results()[rm["id"]] == (True, api.tool_results()[rm["id"]][1])
    assert "no shell today" in api.tool_results()[rm["id"]][1]
    assert (project / "build" / "keep.o").exists()


def test_an_interrupted_wait_withdraws_the_call(local):
    gate, agent = local
    adapter = CountersignPermissions(agent)
    args = {"file_path": "/p/z", "content": "z"}

    async def main():
        await adapter.pre_tool_use(pre_input("Write", args, "t-8"), "t-8", {})
        task = asyncio.ensure_future(adapter.can_use_tool("Write", args, Context("t-8")))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    state = gate.find(call_id="t-8")
    assert state.status == "cancelled" and "stopped waiting" in state.reason


def test_a_quorum_of_two_keeps_can_use_tool_waiting_until_it_is_met(local):
    from claude_agent_sdk import PermissionResultAllow

    gate, agent = local
    adapter = CountersignPermissions(agent, wait_timeout=30)
    args = {"file_path": "/p/q", "old_string": "a", "new_string": "b"}

    async def main():
        await adapter.pre_tool_use(pre_input("Edit", args, "t-9"), "t-9", {})
        task = asyncio.ensure_future(adapter.can_use_tool("Edit", args, Context("t-9")))
        state = gate.find(call_id="t-9")
        await asyncio.to_thread(gate.decide, state.request, "approve", by="sup-1", digest=state.digest)
        await asyncio.sleep(0.5)
        assert not task.done()  # one of two
        await asyncio.to_thread(gate.decide, state.request, "approve", by="sup-3", digest=state.digest)
        return await asyncio.wait_for(task, 10)

    answer = asyncio.run(main())
    assert isinstance(answer, PermissionResultAllow) and answer.updated_input == args
    assert gate.find(call_id="t-9").status == "executing"  # started: Claude Code runs it now


# --- standing decisions: countersign's "don't ask again" -----------------------------------------

@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_remembered_decision_decides_the_sessions_later_calls_and_no_others(local, decision):
    """NotebookEdit's rule says `remember run` (the run is the session id): a reviewer decides the
    first call with remember="run"; the session's next call is allowed (or rejected) by
    countersign itself, with no wait; another session is asked again."""
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

    gate, agent = local
    adapter = CountersignPermissions(agent, wait_timeout=30)
    reviewer = LocalBackend(gate, "sup-1")
    first, second = ({"notebook_path": f"/p/{n}.ipynb", "new_source": n} for n in ("a", "b"))

    async def main():
        assert (await adapter.pre_tool_use(pre_input("NotebookEdit", first, "t-20"), "t-20", {})
                )["hookSpecificOutput"]["permissionDecision"] == "ask"
        task = asyncio.ensure_future(adapter.can_use_tool("NotebookEdit", first, Context("t-20")))
        await asyncio.sleep(0.2)
        state = gate.find(call_id="t-20")
        assert agent.details(state.request)["remember"] == ["run"]
        await asyncio.to_thread(reviewer.decide, state.request, decision, reviewer="sup-1", digest=state.digest,
                                reason="No notebook edits in this session." if decision == "reject" else None,
                                remember="run")
        return await asyncio.wait_for(task, 10)

    answer = asyncio.run(main())
    pre = asyncio.run(adapter.pre_tool_use(pre_input("NotebookEdit", second, "t-21"), "t-21", {}))
    if decision == "approve":
        assert isinstance(answer, PermissionResultAllow) and answer.updated_permissions is None
        assert pre == {}  # allowed by the standing approval: no ask, no person
        again = asyncio.run(adapter.can_use_tool("NotebookEdit", second, Context("t-21")))
        assert isinstance(again, PermissionResultAllow) and again.updated_input == second
        post = {**pre_input("NotebookEdit", second, "t-21"), "hook_event_name": "PostToolUse", "tool_response": "ok"}
        asyncio.run(adapter.post_tool_use(post, "t-21", {}))
        assert (gate.find(call_id="t-21").status, gate.find(call_id="t-21").outcome) == ("executed", "ok")
    else:
        assert isinstance(answer, PermissionResultDeny) and "No notebook edits" in answer.message
        assert pre["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "No notebook edits in this session." in pre["hookSpecificOutput"]["permissionDecisionReason"]
        assert gate.find(call_id="t-21").status == "rejected"
    other = asyncio.run(adapter.pre_tool_use(pre_input("NotebookEdit", second, "t-22", session_id="s-2"), "t-22", {}))
    assert other["hookSpecificOutput"]["permissionDecision"] == "ask"  # another session: asked again
    assert gate.find(call_id="t-22").status == "pending"


def test_a_decision_the_rule_does_not_let_be_remembered_is_refused_and_nothing_runs(local):
    from claude_agent_sdk import PermissionResultDeny

    gate, agent = local
    adapter = CountersignPermissions(agent, wait_timeout=0.3)
    args = {"file_path": "/p/w", "content": "w"}
    asyncio.run(adapter.pre_tool_use(pre_input("Write", args, "t-23"), "t-23", {}))
    state = gate.find(call_id="t-23")
    assert agent.details(state.request)["remember"] == []  # the writes rule has no remember clause
    with pytest.raises(BackendError) as refused:
        LocalBackend(gate, "sup-1").decide(state.request, "approve", reviewer="sup-1", digest=state.digest,
                                           remember="run")
    assert refused.value.code == "StandingDecision"
    assert gate.find(call_id="t-23").status == "pending" and not gate.find(call_id="t-23").approvals
    answer = asyncio.run(adapter.can_use_tool("Write", args, Context("t-23")))  # still nobody decided: closed
    assert isinstance(answer, PermissionResultDeny) and gate.find(call_id="t-23").status == "cancelled"
