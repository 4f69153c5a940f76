"""`countersign hook claude-code` under the real Claude Code CLI: the `claude` executable that
claude-agent-sdk bundles, run as `claude -p --output-format stream-json --settings FILE` against a
stand-in for the Messages API on 127.0.0.1 (tests/anthropic_stand_in.py; no network, no key).
The settings are the hook's own (adapters.claude_code.settings: PreToolUse, PostToolUse,
PostToolUseFailure, PermissionDenied), its command `python -m cli.entry hook claude-code` (the
console script's path) on a local ledger; a second command hook beside it only logs which events
Claude Code fired.

The scripted model makes four calls: a Read the policy allows, a Read of a missing file it allows
(it fails: PostToolUseFailure), a `Bash rm -rf <project>/build` it denies, and a Write it asks
about. (The denied command deletes only the test's own directory: these tests may run as root,
and a hook that failed open must not be able to harm the machine; whether it ran is visible on
disk.)

- `--on-ask wait`: a reviewer in another thread, on the same ledger, decides the Write: approve,
  edit (the CLI writes the reviewer's text), reject or respond (the model gets the reason or the
  message as the tool's error).
- `--on-ask dialog`: `-p` has no dialog. Claude Code turns the hook's `ask` into a refusal (a
  `permission_denied` system message, the ask's reason as the tool's error) in every permission
  mode tried, fires no PermissionDenied hook, and never runs the call: the request stays pending
  in the ledger (no one approved it) until the policy's timeout expires it. Fails closed.

After each session the ledger verifies, and the DuckDB `requests` view agrees with the CLI's
stream-json output (tool results, `permission_denials`, the hook decision in `tool_result_meta`)
and with what the stand-in was sent. Skips, with the reason, when the bundled CLI is missing or
cannot start."""

from __future__ import annotations

import getpass
import json
import shlex
import sys
import threading
import time
from pathlib import Path

import pytest

from adapters.claude_code import settings
from anthropic_stand_in import StandIn, bundled_cli, run_cli, text, tool_use
from dsl import Policy
from ledger import Gate, verify
from ledger.analytics.views import connect as views

ROOT = Path(__file__).resolve().parent.parent
CLI = bundled_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="claude-agent-sdk's bundled claude CLI is not installed")

RM_REASON = "Never rm -rf; move the files to .trash/ instead."
ASK_REASON = "A person checks every write."
POLICY = f"""
policy "hook-cli-test"
default deny "No rule covers this tool."
group maintainers = ["alice", "{getpass.getuser()}"]

allow Read
deny Bash when args.command contains "rm -rf" reason "{RM_REASON}"
ask Write reason "{ASK_REASON}"
  approvers 1 from maintainers
  decisions approve, edit, reject, respond
  timeout 1h
"""

MODEL_TEXT = "by the model\n"
EDITED_TEXT = "edited by the reviewer\n"
REJECT_REASON = "Not in this directory; write under docs/."
RESPOND_MESSAGE = "I wrote it myself; carry on."

LOG_HOOK = """import json, sys
data = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"event": data.get("hook_event_name"), "id": data.get("tool_use_id")}) + "\\n")
"""


class Reviewer(threading.Thread):
    """A reviewer in another thread, on its own Gate over the same ledger (opened, and so
    created, before the CLI starts): decides the first pending request (the Write) with
    `decision`, as "alice"."""

    def __init__(self, policy: Path, ledger: Path, decision: str):
        super().__init__(daemon=True)
        self.gate = Gate(Policy.load(policy), ledger)
        self.decision = decision
        self.decided: int | None = None
        self.errors: list[BaseException] = []

    def run(self) -> None:
        gate = self.gate
        try:
            give_up = time.monotonic() + 60
            while not (pending := gate.pending()):
                if time.monotonic() > give_up:
                    return
                time.sleep(0.05)
            state = pending[0]
            extra = {"edit": {"args": {**gate.arguments(state.request), "content": EDITED_TEXT}, "reason": "our wording"},
                     "reject": {"reason": REJECT_REASON},
                     "respond": {"message": RESPOND_MESSAGE}}.get(self.decision, {})
            settled = gate.decide(state.request, self.decision, by="alice", digest=state.digest, **extra)
            if self.decision == "edit" and settled.status == "pending":  # an edit alone may wait for its approval
                gate.decide(state.request, "approve", by="alice", digest=settled.digest)
            self.decided = state.request
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)
        finally:
            gate.close()


class Session:
    """One `claude -p` session with the hook installed: the CLI's exit status, stream-json lines
    and stderr, what the stand-in saw, the hook events Claude Code fired, the scripted calls."""

    def __init__(self, tmp_path: Path, on_ask: str, mode: str = "default", decision: str | None = None):
        self.project = tmp_path / "project"
        (self.project / "build").mkdir(parents=True)
        (self.project / "build" / "keep.o").write_text("object")
        (self.project / "notes.txt").write_text("the notes\n")
        self.policy = tmp_path / "hook-cli-test.policy"
        self.policy.write_text(POLICY)
        self.ledger = tmp_path / "ledger"
        self.events_log = tmp_path / "events.jsonl"
        self.calls = {
            "read": tool_use("Read", {"file_path": str(self.project / "notes.txt")}),
            "missing": tool_use("Read", {"file_path": str(self.project / "missing.txt")}),
            "rm": tool_use("Bash", {"command": f"rm -rf {self.project / 'build'}", "description": "clean"}),
            "write": tool_use("Write", {"file_path": str(self.project / "w.txt"), "content": MODEL_TEXT}),
        }
        self.ids = {name: block["id"] for name, block in self.calls.items()}
        hooks = settings(f"{shlex.quote(sys.executable)} -m cli.entry hook claude-code", on_ask=on_ask, timeout=60)
        (tmp_path / "log_hook.py").write_text(LOG_HOOK)
        log_command = f"{shlex.quote(sys.executable)} {tmp_path / 'log_hook.py'} {self.events_log}"
        for entries in hooks["hooks"].values():
            entries[0]["hooks"].append({"type": "command", "command": log_command, "timeout": 30})
        settings_file = tmp_path / "settings.json"
        settings_file.write_text(json.dumps(hooks))

        self.reviewer = Reviewer(self.policy, self.ledger, decision) if decision else None
        env = {"PYTHONPATH": str(ROOT), "COUNTERSIGN_POLICY": str(self.policy), "COUNTERSIGN_LEDGER": str(self.ledger)}
        script = [[self.calls[name]] for name in ("read", "missing", "rm", "write")] + [[text("All done.")]]
        with StandIn(script) as api:
            if self.reviewer:
                self.reviewer.start()
            self.status, self.lines, self.stderr = run_cli(
                api, self.project, tmp_path / "home", "--settings", str(settings_file), "--permission-mode", mode,
                prompt="Tidy the project.", env=env)
            if self.reviewer:
                self.reviewer.join(10)
        if not any(p.startswith("/v1/messages") for p in api.paths):
            pytest.skip(f"the bundled Claude Code CLI ({CLI}) did not start or reach the stand-in: "
                        f"exit {self.status}, stderr {self.stderr[-500:]!r}")
        self.model_saw = api.tool_results()

    # --- what the CLI printed (stream-json) -------------------------------------------------

    def result(self) -> dict:
        (result,) = [line for line in self.lines if line.get("type") == "result"]
        return result

    def session_id(self) -> str:
        return next(line for line in self.lines if line.get("type") == "system")["session_id"]

    def tool_results(self) -> dict[str, tuple[bool, str]]:
        """tool_use_id → (is_error, text) from the CLI's `user` lines."""
        found = {}
        for line in self.lines:
            content = (line.get("message") or {}).get("content") if line.get("type") == "user" else None
            for block in content if isinstance(content, list) else ():
                if block.get("type") == "tool_result":
                    body = block.get("content")
                    body = body if isinstance(body, str) else "\n".join(b.get("text", "") for b in body or [])
                    found[block["tool_use_id"]] = (bool(block.get("is_error")), body)
        return found

    def hook_decisions(self) -> dict[str, str]:
        """tool_use_id → "accept" / "reject": the permission decision the CLI says the hook made
        (`tool_result_meta[].permission_decision`, source "hook")."""
        found = {}
        for line in self.lines:
            for meta in line.get("tool_result_meta") or ():
                decision = meta.get("permission_decision") or {}
                if decision.get("source") == "hook":
                    found[meta["id"]] = decision["decision"]
        return found

    def tool_uses(self) -> list[str]:
        return [block["id"] for line in self.lines if line.get("type") == "assistant"
                for block in line["message"]["content"] if block.get("type") == "tool_use"]

    def events(self) -> dict[str, list[str]]:
        """tool_use_id → the hook events Claude Code fired for it, in order (the logging hook)."""
        found: dict[str, list[str]] = {}
        for line in self.events_log.read_text().splitlines():
            entry = json.loads(line)
            found.setdefault(entry["id"], []).append(entry["event"])
        return found

    # --- what the ledger says ---------------------------------------------------------------

    def requests(self) -> dict[str, dict]:
        """call_id → the DuckDB `requests` row (a dict)."""
        con = views(self.ledger)
        try:
            cur = con.execute("SELECT * FROM requests")
            names = [d[0] for d in cur.description]
            return {row[names.index("call_id")]: dict(zip(names, row)) for row in cur.fetchall()}
        finally:
            con.close()


def check_common(s: Session, write_runs: bool) -> dict[str, dict]:
    """What every session shows alike: the CLI finished; what it printed is what the model was
    sent; the allowed Read ran, the failing one is recorded with its error, the rm never ran and
    the model got the policy's reason; the ledger verifies and its view names exactly the calls
    the model made, in this session's run. Returns the view's rows by call name."""
    ids = s.ids
    assert s.status == 0, s.stderr[-2000:]
    result = s.result()
    assert result["subtype"] == "success" and not result["is_error"]
    seen = s.tool_results()
    assert seen == s.model_saw  # the CLI's output and the next request to the model agree
    assert set(seen) == set(ids.values()) and s.tool_uses() == [ids[n] for n in ("read", "missing", "rm", "write")]
    assert verify(s.ledger).ok

    # the events Claude Code fired; PermissionDenied never (it is for auto mode's classifier)
    assert s.events() == {ids["read"]: ["PreToolUse", "PostToolUse"],
                          ids["missing"]: ["PreToolUse", "PostToolUseFailure"],
                          ids["rm"]: ["PreToolUse"],
                          ids["write"]: ["PreToolUse", "PostToolUse"] if write_runs else ["PreToolUse"]}

    assert seen[ids["read"]][0] is False and "the notes" in seen[ids["read"]][1]
    assert seen[ids["missing"]][0] is True
    assert seen[ids["rm"]][0] is True and RM_REASON in seen[ids["rm"]][1]
    assert (s.project / "build" / "keep.o").exists()
    refused = {d["tool_use_id"] for d in result["permission_denials"]}
    assert refused == {ids["rm"]} | (set() if write_runs else {ids["write"]})
    decisions = s.hook_decisions()
    assert decisions[ids["read"]] == decisions[ids["missing"]] == "accept" and decisions[ids["rm"]] == "reject"

    rows = s.requests()
    assert set(rows) == set(ids.values())  # every call the model made, and only those
    by_name = {name: rows[ids[name]] for name in ids}
    session = s.session_id()
    assert all(r["run"] == session and r["proposer"] == f"claude-code:{session}" for r in by_name.values())
    read, missing, rm = by_name["read"], by_name["missing"], by_name["rm"]
    assert (read["effect"], read["status"], read["outcome"]) == ("allow", "executed", "ok") and read["result_digest"]
    assert (missing["effect"], missing["status"], missing["outcome"]) == ("allow", "executed", "error")
    assert missing["error"] == seen[ids["missing"]][1]  # PostToolUseFailure's error is what the model saw
    assert (rm["effect"], rm["status"], rm["decision"]) == ("deny", "denied", "deny")
    assert rm["reasons"] == [RM_REASON] and rm["execution_started_at"] is None
    # the view's "executed" is the CLI's "the hook accepted it and it ran", call by call
    for name, row in by_name.items():
        assert (row["status"] == "executed") == (ids[name] not in refused), name
    return by_name


EXPECT = {  # decision → (the Write runs, its status, what the file holds, what the model is told)
    "approve": (True, "executed", MODEL_TEXT, "File created successfully"),
    "edit": (True, "executed", EDITED_TEXT, "File created successfully"),
    "reject": (False, "rejected", None, REJECT_REASON),
    "respond": (False, "responded", None, RESPOND_MESSAGE),
}


@pytest.mark.parametrize("decision", list(EXPECT))
def test_wait_mode_a_reviewer_on_the_same_ledger_decides_the_ask(tmp_path, decision):
    s = Session(tmp_path, "wait", decision=decision)
    assert s.reviewer is not None and not s.reviewer.errors, s.reviewer.errors
    runs, status, on_disk, told = EXPECT[decision]
    by_name = check_common(s, write_runs=runs)
    write_id = s.ids["write"]
    is_error, seen = s.tool_results()[write_id]
    assert is_error is (not runs) and told in seen
    target = s.project / "w.txt"
    assert (target.read_text() if target.exists() else None) == on_disk
    assert s.hook_decisions()[write_id] == ("accept" if runs else "reject")

    row = by_name["write"]
    assert row["request"] == s.reviewer.decided
    assert (row["effect"], row["status"], row["decided_by"]) == ("ask", status, "alice")
    assert row["reasons"] == [ASK_REASON]
    assert row["edits"] == (1 if decision == "edit" else 0)
    if decision == "edit":  # the ledger's current arguments are the ones that ran
        assert row["digest"] != row["original_digest"]
    if runs:
        assert row["outcome"] == "ok" and row["result_digest"] and row["executor"] == f"claude-code:{s.session_id()}"
    else:
        assert row["outcome"] is None and row["execution_started_at"] is None
        assert row["reason"] == (REJECT_REASON if decision == "reject" else RESPOND_MESSAGE)


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_dialog_mode_in_print_mode_fails_closed(tmp_path, mode):
    """`-p` has no permission dialog: Claude Code refuses the hook's ask (even in acceptEdits,
    which would write without asking), fires no PermissionDenied, and the Write never runs; the
    request stays pending (no approval recorded) until the policy's timeout."""
    s = Session(tmp_path, "dialog", mode=mode)
    by_name = check_common(s, write_runs=False)
    write_id = s.ids["write"]
    is_error, seen = s.tool_results()[write_id]
    assert is_error and ASK_REASON in seen
    assert not (s.project / "w.txt").exists()
    (refusal,) = [line for line in s.lines if line.get("type") == "system" and line.get("subtype") == "permission_denied"]
    assert (refusal["tool_use_id"], refusal["decision_reason_type"]) == (write_id, "hook")
    row = by_name["write"]
    assert (row["effect"], row["status"], row["decision"], row["approvals"]) == ("ask", "pending", None, 0)
    assert row["execution_started_at"] is None
