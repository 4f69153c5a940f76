"""The command line: exit codes, error messages without tracebacks, and nothing half-written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
runner = CliRunner()


def run(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in (result.stdout + result.stderr)
    return result


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "ledger"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", path)
    assert result.exit_code == 0, result.stderr
    return path


def test_help_does_not_import_duckdb():
    code = "import sys, cli.main; print('duckdb' in sys.modules, 'lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("name", ["retail", "airline", "coding-agent"])
def test_the_sample_policies_check_clean(name):
    result = run("policy", "check", SAMPLES / f"{name}.policy")
    assert result.exit_code == 0 and ": ok:" in result.stdout
    assert "warning" not in result.stderr


def test_a_policy_error_points_at_file_line_and_column_and_exits_2(tmp_path):
    bad = tmp_path / "bad.policy"
    bad.write_text('policy "x"\nask refund when args.amount > 100\n  aprovers 2 from supervisors\n')
    result = run("policy", "check", bad)
    assert result.exit_code == 2
    assert f"{bad}:3:3: error: unknown keyword 'aprovers'" in result.stderr
    assert "  aprovers 2 from supervisors" in result.stderr and "^^^^^^^^" in result.stderr
    assert "did you mean 'approvers'?" in result.stderr


def test_every_check_error_is_reported_at_once(tmp_path):
    bad = tmp_path / "bad.policy"
    bad.write_text('deny a when arg.x == 1\nask b when "a" > 3\ngroup g = ["x"]\ngroup g = ["y"]\n')
    result = run("policy", "check", bad)
    assert result.exit_code == 2
    for fragment in (":1:1: error: a deny rule needs a reason", ":1:13: error: unknown name 'arg'",
                     ":2:12: error:", ":4:7: error: group 'g' is already defined"):
        assert fragment in result.stderr, result.stderr
    assert "4 errors" in result.stderr


def test_a_missing_policy_file_is_a_clear_error(tmp_path):
    result = run("policy", "check", tmp_path / "nope.policy")
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_eval_prints_the_effect_and_each_matching_rule_with_its_line():
    args = json.dumps({"order_id": "#W1", "item_ids": ["1", "2", "3"], "payment_method_id": "x"})
    result = run("policy", "eval", SAMPLES / "retail.policy", "--tool", "return_delivered_order_items", "--args", args)
    assert result.exit_code == 0
    assert "effect: ask" in result.stdout
    assert "[supervisors-large-orders] ask: condition holds" in result.stdout
    assert "needs approval by 2 from supervisors (sup-1, sup-2, sup-3)" in result.stdout


def test_eval_explains_a_condition_that_could_not_be_evaluated():
    result = run("policy", "eval", SAMPLES / "retail.policy", "--tool", "transfer_to_human_agents", "--args", "{}")
    assert "effect: deny" in result.stdout
    assert "could not be evaluated (missing field args.summary)" in result.stdout
    assert "an allow never counts on an error" in result.stdout


@pytest.mark.parametrize(("args", "effect"), [('{"amount": 5}', "allow"), ('{"amount": 500}', "ask"), ('{"amount": -1}', "deny"),
                                              ("{}", "deny")])
def test_eval_exits_0_whatever_the_effect(tmp_path, args, effect):
    # docs/policy-tools.md: eval reports a decision; only input it cannot use exits otherwise (2)
    policy = tmp_path / "refunds.policy"
    policy.write_text('deny refund when args.amount <= 0 reason "Positive amounts only."\n'
                      'ask refund when args.amount > 100\nallow refund when args.amount <= 100\n', encoding="utf-8")
    result = run("policy", "eval", policy, "--tool", "refund", "--args", args)
    assert result.exit_code == 0 and f"effect: {effect}" in result.stdout
    policy.write_text("allow refund when\n", encoding="utf-8")
    assert run("policy", "eval", policy, "--tool", "refund", "--args", args).exit_code == 2


def test_eval_json_is_machine_readable():
    result = run("policy", "eval", SAMPLES / "retail.policy", "--tool", "get_user_details", "--args", '{"user_id": "u"}',
                 "--context", '{"run_id": "r"}', "--json")
    decision = json.loads(result.stdout)
    assert decision["effect"] == "allow" and decision["policy"] == "retail-support"


@pytest.mark.parametrize(
    "args, message",
    [
        ("[1, 2]", "--args must be a JSON object, not a list"),
        ("{oops", "--args is not valid JSON"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"a": NaN}', "NaN is not a JSON number"),
    ],
)
def test_eval_refuses_arguments_that_are_not_a_json_object(args, message):
    result = run("policy", "eval", SAMPLES / "retail.policy", "--tool", "t", "--args", args)
    assert result.exit_code == 2 and message in result.stderr


def test_simulate_then_verify_the_demo(demo_ledger):
    result = run("ledger", "verify", demo_ledger)
    assert result.exit_code == 0
    assert "intact" in result.stdout and "1 pending" in result.stdout


def test_verify_names_the_seq_of_a_changed_byte(demo_ledger, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(demo_ledger, copy)
    segment = next(copy.glob("events-*.jsonl"))
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[9] = lines[9].replace(b'"ts":"2026', b'"ts":"2027', 1)
    segment.write_bytes(b"".join(lines))
    result = run("ledger", "verify", copy)
    assert result.exit_code == 1 and "FAILED at seq 10" in result.stdout


def test_verify_with_the_reference_verifier_alone_says_the_same(demo_ledger, monkeypatch):
    from ledger.proof import fast

    calls = []
    monkeypatch.setattr(fast, "verify_fast", lambda *a, **k: calls.append(a))  # declines, and counts
    reference = run("ledger", "verify", demo_ledger, "--reference", "--json")
    assert calls == []  # --reference never asks the compiled verifier
    monkeypatch.undo()
    auto = run("ledger", "verify", demo_ledger, "--json")
    assert reference.exit_code == auto.exit_code == 0
    assert json.loads(reference.stdout) == json.loads(auto.stdout)


def test_verify_against_a_checkpoint_with_the_reference_verifier_alone(demo_ledger, tmp_path, monkeypatch):
    import shutil

    from ledger.proof import fast

    copy = tmp_path / "copy"
    shutil.copytree(demo_ledger, copy)
    assert run("ledger", "keygen", "--out", tmp_path / "k").exit_code == 0
    assert run("ledger", "checkpoint", copy, "--key", tmp_path / "k.key", "--out", tmp_path / "c.checkpoint").exit_code == 0
    calls = []
    monkeypatch.setattr(fast, "verify_fast", lambda *a, **k: calls.append(a))
    result = run("ledger", "verify", copy, "--reference", "--checkpoint", tmp_path / "c.checkpoint", "--pubkey", tmp_path / "k.pub")
    assert result.exit_code == 0 and "intact" in result.stdout and calls == []  # --reference was passed on


def test_a_missing_expected_head_is_said_plainly(demo_ledger):
    result = run("ledger", "verify", demo_ledger, "--expect-head", "ab" * 32)
    assert result.exit_code == 1
    assert "events verified, none of them with the expected head" in result.stdout and "before it" not in result.stdout


@pytest.mark.parametrize("command", [["ledger", "verify"], ["ledger", "verify", "--reference"], ["ledger", "stats"], ["ledger", "project"]])
def test_a_ledger_directory_that_cannot_be_listed_says_permission_denied(demo_ledger, monkeypatch, command):
    """glob read an unlistable directory as empty: 'no ledger segments' (found by a new user's
    trial, with the directory's mode 000; as root, listing is refused here by a stand-in)."""
    import os

    real = os.listdir

    def listdir(path="."):
        if Path(path) == Path(demo_ledger):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    result = run(*command[:2], demo_ledger, *command[2:])
    assert result.exit_code == 2 and "Permission denied" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_verify_exit_2_for_an_unreadable_ledger(tmp_path):
    result = run("ledger", "verify", tmp_path / "nothing-here")
    assert result.exit_code == 2 and "no such ledger directory" in result.stderr


def test_verify_json_report(demo_ledger):
    result = run("ledger", "verify", demo_ledger, "--json")
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["exit_code"] == 0 and report["count"] > 20


@pytest.mark.parametrize(
    "content, line, message",
    [
        ('{"tool": "a", "args": {}}\n{"tool": "b", "args": [1]}\n', 2, '"args" must be a JSON object, not a list'),
        ('{"tool": "a", "args": {}}\n\n{"tool": "b", "args": {}\n', 3, "not valid JSON"),
        ('{"args": {}}\n', 1, '"tool"'),
        ('{"tool": "a"}\n', 1, '"args"'),
        ('{"tool": "a", "args": {}, "context": "x"}\n', 1, '"context" must be a JSON object'),
    ],
)
def test_a_malformed_calls_file_names_the_line_and_writes_nothing(tmp_path, content, line, message):
    calls = tmp_path / "calls.jsonl"
    calls.write_text(content)
    ledger = tmp_path / "ledger"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", calls, "--ledger", ledger)
    assert result.exit_code == 2
    assert f"{calls}:{line}:" in result.stderr and message in result.stderr
    assert not ledger.exists()


def test_a_malformed_reviewer_file_writes_nothing(tmp_path):
    reviewer = tmp_path / "r.json"
    reviewer.write_text('{"rules": [{"decision": "reject"}]}')
    ledger = tmp_path / "ledger"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--reviewer", reviewer, "--ledger", ledger)
    assert result.exit_code == 2 and "a reject needs a reason" in result.stderr
    assert not ledger.exists()


def test_simulate_json_summary_counts_every_call(tmp_path):
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--ledger", tmp_path / "l", "--json")
    summary = json.loads(result.stdout)
    calls = sum(1 for line in (SAMPLES / "demo-calls.jsonl").read_text().splitlines() if line.strip())
    assert summary["calls"] == calls == sum(summary["effects"].values()) == sum(summary["outcomes"].values())


def test_the_simulation_summary_counts_what_the_ledger_holds_at_the_end(tmp_path):
    """A request left pending by the first pass over the trace expires during the second; the
    summary counted it pending (found by a new user's trial)."""
    from ledger.proof.verify import verify

    twice = tmp_path / "twice.jsonl"
    twice.write_text((SAMPLES / "demo-calls.jsonl").read_text() * 2)
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", twice, "--reviewer",
                 SAMPLES / "demo-reviewer.json", "--ledger", tmp_path / "l", "--json")
    summary = json.loads(result.stdout)
    assert summary["outcomes"] == verify(tmp_path / "l").statuses
    assert summary["outcomes"]["expired"] == 3


def test_a_second_simulation_cannot_write_while_a_writer_holds_the_ledger(tmp_path):
    from ledger.store.log import Ledger

    with Ledger(tmp_path / "l"):
        result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                     "--ledger", tmp_path / "l")
    assert result.exit_code == 2 and "another writer holds the ledger's lock" in result.stderr


# --- values chosen by an agent are shown as written, never as markup or terminal controls ---------

HOSTILE_TOOLS = ["[/]", "[bold]x", "esc\x1b[31mred", "line\nbreak"]


@pytest.fixture(scope="module")
def hostile_ledger(tmp_path_factory) -> Path:
    """A ledger whose tool names (an agent's choice) are Rich markup and terminal controls."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "p.policy").write_text('policy "p"\ndefault allow "ok"\n')
    (root / "calls.jsonl").write_text("".join(json.dumps({"tool": t, "args": {}}) + "\n" for t in HOSTILE_TOOLS))
    path = root / "ledger"
    result = run("simulate", "--policy", root / "p.policy", "--calls", root / "calls.jsonl", "--ledger", path)
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize("command", [["stats"], ["query", "select tool from requests order by request"]])
def test_stats_and_query_show_markup_and_control_characters_as_written(hostile_ledger, command):
    result = run("ledger", command[0], hostile_ledger, *command[1:])
    assert result.exit_code == 0, result.output
    assert result.exception is None
    for shown in ["[/]", "[bold]x", "esc\\x1b[31mred", "line\\nbreak"]:
        assert shown in result.stdout
    assert "\x1b" not in result.stdout and "line\nbreak" not in result.stdout


def test_a_query_column_named_like_markup_is_shown_as_written(hostile_ledger):
    result = run("ledger", "query", hostile_ledger, 'select tool as "[red]t[/red]" from requests')
    assert result.exit_code == 0, result.output
    assert "[red]t[/red]" in result.stdout


def test_visible_escapes_every_control_character_and_nothing_else():
    from cli.output import visible

    assert visible("a\x00b\x1b[1m\n\r\t\x7f\x85\u202e\u2028\ud800") == "a\\x00b\\x1b[1m\\n\\r\\t\\x7f\\x85\\u202e\\u2028\\ud800"
    assert visible("é ✓ [/] \\ \"q\" 日本") == "é ✓ [/] \\ \"q\" 日本"


def test_usability_fixes_from_a_new_users_run(tmp_path):
    """An empty cases file is an error (a run that tests nothing must not pass); fmt --check on a
    formatted file says 'already formatted'; a public key given to checkpoint is named as such;
    a DuckDB error keeps its hint lines as lines."""
    from typer.testing import CliRunner

    from cli.main import app

    runner = CliRunner()
    policy = tmp_path / "p.policy"
    policy.write_text('allow read_thing\n', encoding="utf-8")
    (tmp_path / "empty.cases").write_text("# nothing yet\n", encoding="utf-8")
    result = runner.invoke(app, ["policy", "test", str(policy), str(tmp_path / "empty.cases")])
    assert result.exit_code == 2 and "holds no case" in result.stderr
    result = runner.invoke(app, ["policy", "fmt", str(policy), "--check"])
    assert result.exit_code == 0 and "already formatted" in result.stderr
    assert runner.invoke(app, ["ledger", "keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    from support import gate

    g = gate(tmp_path / "l")
    g.propose("read_thing", {"id": 1}, proposer="agent")
    g.close()
    result = runner.invoke(app, ["ledger", "checkpoint", str(tmp_path / "l"), "--key", str(tmp_path / "k.pub")])
    assert result.exit_code == 2 and "holds no private key" in result.stderr
    result = runner.invoke(app, ["ledger", "query", str(tmp_path / "l"), "select nosuchcol from requests"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: query failed:") and any(line.startswith("  LINE 1:") for line in lines[1:])


@pytest.mark.parametrize("command", ["explain", "eval"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_lone_surrogate_in_the_arguments_is_shown_escaped_not_a_traceback(command, as_json):
    # JSON input may carry "\ud800", which no UTF-8 output can hold (a new user's trial)
    args = [sys.executable, "-c", "from cli.main import app; app()", "policy", command, str(SAMPLES / "coding-agent.policy"),
            "--tool", "Bash", "--args", '{"command": "ls \\ud800"}'] + (["--json"] if as_json else [])
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env={"PYTHONIOENCODING": "utf-8", "PATH": "/usr/bin:/bin"})
    assert "Traceback" not in done.stderr and "UnicodeEncodeError" not in done.stderr, done.stderr
    assert done.returncode in (0, 1) and done.stdout
    if command == "explain":  # the call's text is shown, escaped
        assert "\\ud800" in done.stdout
    if as_json:
        json.loads(done.stdout)


def test_eval_names_the_rules_that_covered_the_tool_but_did_not_hold():
    result = run("policy", "eval", SAMPLES / "coding-agent.policy", "--tool", "Bash", "--args", '{"command": "npm test"}',
                 "--context", '{"cwd": "/home/u/proj"}')
    assert result.exit_code == 0
    assert "(policy default)" in result.stdout and "[read-only-shell] allow" in result.stdout and "policy explain" in result.stdout
