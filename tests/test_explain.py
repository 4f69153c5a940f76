"""`countersign policy explain`: every rule considered, every sub-condition's value and the
normalized subject it saw, exact or prefix matching, the deciding item of a quantifier, and the
precedence that decided; built by the traced compile mode, which must agree with the compiled
predicates (a hypothesis property over random conditions and calls)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy, PolicyError, PolicyInputError, ast
from dsl.cases import parse_cases
from dsl.compiler import Env, compile_condition_traced
from dsl.explain import Explanation, Step, explain
from dsl.parser import parse
from dsl.values import EvalError
from policy_gen import calls, policy_texts

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
CODING = Policy.load(ROOT / "samples" / "coding-agent.policy")
PROJECT = {"cwd": "/home/u/proj", "home": "/home/u"}


def walk(step: Step):
    yield step
    for child in step.children:
        yield from walk(child)


def rule_trace(report: Explanation, rule_id: str):
    return next(r for r in report.rules if r.rule == rule_id)


def outcome(fn, env):
    try:
        return ("value", fn(env))
    except EvalError as exc:
        return ("error", exc.message)
    except RecursionError:  # pragma: no cover - not produced by the generated calls
        return ("recursion", None)


# --- the traced mode agrees with the compiled predicates ------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(policy_texts(), st.lists(calls(), min_size=1, max_size=8))
def test_traced_conditions_return_exactly_what_the_compiled_ones_return(generated, drawn):
    text, _ = generated
    try:
        policy = Policy.from_text(text, "gen.policy")
    except PolicyError:
        return
    nodes = parse(text).of_type(ast.Rule)
    traced = {r.rule_id: compile_condition_traced(nodes[r.order].condition) for r in policy.rules if r.test is not None}
    for tool, args, context in drawn:
        env = Env(tool, args, context, home=policy.home)
        for rule in policy.rules:
            if rule.test is None:
                continue
            trace: list = []
            assert outcome(traced[rule.rule_id], env._replace(trace=trace)) == outcome(rule.test, env)
            assert trace and trace[-1].node is nodes[rule.order].condition  # the root's step comes last
        report = explain(policy, tool, args, context)  # raises if a rule's traced outcome differs
        decision = policy.evaluate(tool, args, context)
        assert (report.effect, report.deciding, report.by_default) == (decision.effect, decision.deciding, decision.by_default)
        assert [r.rule for r in report.rules] == [r.rule_id for r in policy.rules_for(tool)]


def test_normal_evaluation_never_records_a_trace():
    """The compiled predicates take an Env without a trace: nothing on the normal path writes one."""
    env = Env("Bash", {"command": "sudo rm -rf /"}, dict(PROJECT))
    for rule in CODING.rules_for("Bash"):
        assert env.trace is None
        outcome(rule.test, env)
    assert CODING.evaluate("Bash", {"command": "sudo rm -rf /"}, PROJECT).effect == "deny"


# --- what an explanation says -----------------------------------------------------------------


def test_explain_lists_every_rule_that_covers_the_tool_whether_it_matched_or_not():
    report = explain(CODING, "Bash", {"command": "git status"}, PROJECT)
    assert [r.rule for r in report.rules] == [r.rule_id for r in CODING.rules_for("Bash")]
    assert report.rules_not_covering == len(CODING.rules) - len(report.rules)
    results = {r.rule: (r.result, r.counted, r.deciding) for r in report.rules}
    assert results["read-only-shell"] == ("true", True, True)
    assert results["no-force-push"] == ("false", False, False)
    assert all(r.covered_by == "Bash" for r in report.rules)
    assert report.effect == "allow" and report.precedence.rule == "deny beats ask beats allow: only allow rules counted (1)"


def test_explain_shows_the_normalized_commands_and_the_item_that_decided():
    report = explain(CODING, "Bash", {"command": "cd /tmp && sudo rm -r -f /"}, PROJECT)
    rule = rule_trace(report, "no-recursive-delete")
    assert rule.deciding and rule.result == "true"
    quantifier = rule.steps
    assert quantifier.kind == "any" and quantifier.result == "true"
    subject = quantifier.children[0]
    assert subject.text == "shell(args.command)" and subject.shown == "[cd /tmp, rm -r -f / (via sudo)]"
    assert subject.value[1]["flags"] == ["R", "f", "force", "r", "recursive"] and subject.value[1]["wrappers"] == ["sudo"]
    items = quantifier.children[1:]
    assert [(i.text, i.result, i.role) for i in items] == [
        ("c = cd /tmp", "false", None),
        ("c = rm -r -f / (via sudo)", "true", "decided"),
    ]
    texts = {s.text: s for s in walk(items[1])}
    assert texts['c.flags contains "force"'].match == "membership"
    assert texts['c.flags contains "force"'].children[0].shown == '["R", "f", "force", "r", "recursive"]'


def test_explain_says_whether_a_list_comparison_is_exact_or_a_prefix():
    policy = Policy.from_text(
        'deny Bash when any c in shell(args.command): c.argv == ["find"] reason "A bare find."\n'
        'ask Bash when any c in shell(args.command): c.argv startswith ["find"]\n'
    )
    report = explain(policy, "Bash", {"command": "find . -name x"})
    exact = next(s for s in walk(report.rules[0].steps) if s.kind == "compare")
    prefix = next(s for s in walk(report.rules[1].steps) if s.kind == "compare")
    assert (exact.text, exact.result, exact.match) == ('c.argv == ["find"]', "false", "exact")
    assert "whole list" in exact.how
    assert (prefix.text, prefix.result, prefix.match) == ('c.argv startswith ["find"]', "true", "prefix")
    assert "first items" in prefix.how
    assert report.effect == "ask"
    assert explain(policy, "Bash", {"command": "find"}).effect == "deny"


def test_explain_shows_the_path_resolved_against_the_cwd():
    report = explain(CODING, "Read", {"file_path": ".env"}, PROJECT)
    rule = rule_trace(report, "secrets")
    assert rule.deciding
    secret = next(s for s in walk(rule.steps) if s.text == "path(args.file_path).secret")
    assert secret.shown == "true" and secret.subject == "/home/u/proj/.env"
    assert secret.children[0].shown == '".env"'


def test_explain_shows_a_path_field_with_its_subject_and_under_by_segments():
    report = explain(CODING, "Write", {"file_path": "/home/u/projX/a.py", "content": ""}, PROJECT)
    under = next(s for s in walk(rule_trace(report, "edit-in-project").steps) if s.kind == "compare")
    assert under.result == "false" and under.match == "under"
    assert under.how.endswith("/home/u/projX/a.py under /home/u/proj")
    name = next(s for s in walk(rule_trace(report, "code-running-files").steps) if s.text == "path(args.file_path).name")
    assert name.shown == '"a.py"' and name.subject == "/home/u/projX/a.py"


def test_explain_shows_a_url_with_its_host():
    report = explain(CODING, "WebFetch", {"url": "https://Docs.Python.org./3/"}, PROJECT)
    steps = list(walk(rule_trace(report, "docs-sites").steps))
    host = next(s for s in steps if s.text == "url(args.url).host")
    assert host.shown == '"docs.python.org"' and host.subject == "https://Docs.Python.org./3/ (host docs.python.org)"
    assert report.effect == "allow"


def test_explain_reports_an_error_with_its_message_and_that_it_never_allows():
    policy = Policy.from_text('allow refund when args.amount <= 100\ndeny refund when args.amount > 500 reason "Too much."\n')
    report = explain(policy, "refund", {"order": "A1"})
    allow, deny = report.rules
    assert (allow.result, allow.counted, allow.error) == ("error", False, "missing field args.amount")
    assert "an allow never counts on an error" in allow.why
    assert (deny.result, deny.counted, deny.deciding) == ("error", True, True)
    assert "fail closed" in deny.why
    assert deny.steps.children[0].error == "missing field args.amount"
    assert report.effect == "deny"


def test_explain_marks_the_operand_that_settled_an_and_and_those_evaluated_after_it():
    policy = Policy.from_text("allow t when args.a == 1 and args.b == 2 and args.c == 3\n")
    steps = explain(policy, "t", {"a": 1, "b": 0, "c": 3}).rules[0].steps
    assert [(c.text, c.result, c.role) for c in steps.children] == [
        ("args.a == 1", "true", None),
        ("args.b == 2", "false", "decided"),
        ("args.c == 3", "true", "after"),
    ]
    steps = explain(policy, "t", {"a": 1, "b": 2}).rules[0].steps
    assert steps.result == "error" and [c.role for c in steps.children] == [None, None, "decided"]


def test_explain_names_the_precedence_and_the_default():
    policy = Policy.from_text(
        'default allow\nask t when args.x > 1\ndeny t when args.x > 5 reason "no"\nallow t\nallow u when args.y == 1\n'
    )
    report = explain(policy, "t", {"x": 9})
    assert report.precedence.rule == "deny beats ask beats allow: deny wins over ask and allow"
    ids = [rule.rule_id for rule in policy.rules]
    assert report.precedence.counted == {"deny": (ids[1],), "ask": (ids[0],), "allow": (ids[2],)}
    assert [r.deciding for r in report.rules] == [False, True, False]
    assert "deny beats ask" in report.rules[0].why
    unknown = explain(policy, "v", {})
    assert unknown.by_default and unknown.rules == () and "default (allow) applies" in unknown.precedence.rule
    failed = explain(policy, "u", {})
    assert failed.effect == "deny" and "an error never allows" in failed.precedence.rule


def test_explain_refuses_a_call_of_the_wrong_shape():
    with pytest.raises(PolicyInputError):
        explain(CODING, "Bash", ["not", "an", "object"])


@pytest.mark.parametrize("name", ["retail", "airline", "coding-agent"])
def test_explain_agrees_with_evaluate_on_every_sample_case(name):
    policy = Policy.load(ROOT / "samples" / f"{name}.policy")
    path = ROOT / "samples" / f"{name}.cases"
    for case in parse_cases(path.read_text(encoding="utf-8"), str(path)):
        report = explain(policy, case.tool, case.args, case.context)
        assert report.decision == policy.evaluate(case.tool, case.args, case.context)
        assert report.effect == case.effect
        msgspec.json.encode(report)  # everything in it is JSON


# --- the command ------------------------------------------------------------------------------


def run(*args):
    result = runner.invoke(app, ["policy", "explain", *map(str, args)])
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_explain_command_prints_rules_steps_and_precedence():
    result = run(ROOT / "samples/coding-agent.policy", "--tool", "Bash", "--args", '{"command": "sudo rm -rf /"}',
                 "--context", json.dumps(PROJECT))
    assert result.exit_code == 0
    out = result.stdout
    assert "effect: deny" in out
    assert "precedence: deny beats ask beats allow: deny wins over ask" in out
    line = next(r.line for r in CODING.rules if r.rule_id == "no-recursive-delete")
    assert f"* line {line} [no-recursive-delete] deny Bash, bash  (selector Bash)" in out
    assert "    TRUE: the condition holds: the rule counts; it decides" in out
    assert "shell(args.command) = [rm -rf / (via sudo)]" in out
    assert "c = rm -rf / (via sudo)   <- decided" in out
    assert "[read-only-shell] allow Bash, bash" in out and "FALSE: the condition is false" in out
    assert f"rules considered: {len(CODING.rules_for('Bash'))} rules cover Bash, in file order" in out


def test_explain_command_json_is_the_explanation():
    result = run(ROOT / "samples/retail.policy", "--tool", "cancel_pending_order", "--args",
                 '{"order_id": "#W1", "reason": "no longer needed"}', "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["effect"] == "ask" and data["deciding"] == ["desk-confirms-change"]
    retail = Policy.load(ROOT / "samples/retail.policy")
    assert [r["rule"] for r in data["rules"]] == [r.rule_id for r in retail.rules_for("cancel_pending_order")]
    reason_rule = next(r for r in data["rules"] if r["condition"] and r["condition"].startswith("args.reason not in"))
    assert reason_rule["steps"]["kind"] == "compare" and reason_rule["steps"]["match"] == "membership"
    assert reason_rule["steps"]["children"][0] == {
        "text": "args.reason", "line": reason_rule["line"], "column": reason_rule["steps"]["column"],
        "kind": "path", "result": "value", "value": "no longer needed", "shown": '"no longer needed"',
    }
    assert data["precedence"]["winner"] == "ask"


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--args", "[1]"], "--args"), (["--args", "{"], "--args"), (["--context", "3"], "--context")],
)
def test_explain_command_refuses_malformed_input_with_exit_2(extra, message):
    result = run(ROOT / "samples/retail.policy", "--tool", "get_order_details", *extra)
    assert result.exit_code == 2 and message in result.stderr


@pytest.mark.parametrize(("others", "tail"), [(1, "(1 other rule does not cover it)"), (2, "(2 other rules do not cover it)")])
def test_explain_counts_the_rules_in_good_grammar(tmp_path, others, tail):
    policy = tmp_path / "p.policy"
    policy.write_text("allow t\n" + "".join(f"allow other{i}\n" for i in range(others)), encoding="utf-8")
    out = run(policy, "--tool", "t").stdout
    assert f"rules considered: 1 rule covers t, in file order {tail}" in out
    out = run(policy, "--tool", "nothing").stdout
    assert f"no rule covers nothing ({others + 1} other rules do not cover it)" in out
