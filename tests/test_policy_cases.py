"""`countersign policy test`: table-driven cases next to a policy; the samples' case files pass and
exercise every rule; failures name both locations; malformed input exits 2 with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from dsl.cases import CasesError, default_cases_path, parse_cases, run_cases

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ["retail", "airline", "coding-agent"]
runner = CliRunner()

POLICY = """policy "shop"
default ask "A person decides."
allow get_order
deny refund when args.amount <= 0
  reason "A refund amount must be positive."
ask refund when args.amount > 100
  reason "Big refunds need finance."
  id "big-refund"
allow refund when args.amount <= 100
allow never_called
"""
# The rules without an id clause, by the line they start on: their ids come from their text.
ID = {rule.line: rule.rule_id for rule in Policy.from_text(POLICY).rules}


def run(*args):
    result = runner.invoke(app, ["policy", "test", *map(str, args)])
    assert "Traceback" not in result.stdout + result.stderr
    return result


@pytest.fixture
def shop(tmp_path) -> Path:
    path = tmp_path / "shop.policy"
    path.write_text(POLICY)
    return path


# --- the samples ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_the_sample_case_files_pass_and_exercise_every_rule(name):
    policy = Policy.load(ROOT / "samples" / f"{name}.policy")
    path = default_cases_path(ROOT / "samples" / f"{name}.policy")
    assert path == ROOT / "samples" / f"{name}.cases"
    cases = parse_cases(path.read_text(encoding="utf-8"), str(path))
    assert len(cases) >= 15
    report = run_cases(policy, cases, str(path))
    assert [(r.case.line, r.problems) for r in report.failed] == []
    assert report.unexercised == ()
    assert report.default_cases > 0
    assert {c.effect for c in cases} == {"allow", "deny", "ask"}


@pytest.mark.parametrize("name", SAMPLES)
def test_policy_test_command_passes_on_the_samples_with_the_default_cases_path(name):
    result = run(ROOT / "samples" / f"{name}.policy")
    assert result.exit_code == 0, result.stderr
    assert "0 failed" in result.stdout and "every rule was exercised by some case" in result.stdout


# --- results ----------------------------------------------------------------------------------


def test_a_failing_case_names_the_case_line_and_the_policy_lines_and_exits_1(shop, tmp_path):
    cases = tmp_path / "shop.cases"
    cases.write_text(
        "# comment\n"
        'get_order {"id": "A1"} => allow\n'
        f'refund {{"amount": 500}} => allow {ID[9]}\n'
        f'refund {{"amount": -1}} => deny {ID[4]}\n'
    )
    result = run(shop)
    assert result.exit_code == 1
    assert f"{cases}:3: FAIL: refund {{\"amount\": 500}}" in result.stderr
    assert "expected allow, got ask" in result.stderr
    assert f"{shop}:6: ask rule big-refund decided" in result.stderr
    assert f"{shop}:9: expected rule {ID[9]} (allow) did not decide: its condition was false" in result.stderr
    assert "reason: Big refunds need finance." in result.stderr
    assert "3 cases" in result.stdout and "2 passed, 1 failed" in result.stdout


def test_unexercised_rules_and_an_unused_default_are_listed(shop, tmp_path):
    cases = tmp_path / "c.cases"
    cases.write_text('refund {"amount": 5} => allow\n')
    result = run(shop, cases)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "rules no case exercised (4):" in lines
    assert f"  {shop}:3: allow [{ID[3]}] get_order" in lines
    assert f"  {shop}:10: allow [{ID[10]}] never_called" in lines
    assert "no case was decided by the policy's default" in lines


def test_expected_rules_are_the_exact_deciding_set_and_default_means_no_rule_decided(shop):
    policy = Policy.load(shop)
    cases = parse_cases(
        'refund {"amount": 500} => ask big-refund\n'
        'refund {"amount": 500} => ask "big-refund"\n'
        "other => ask default\n"
        "get_order => allow default\n"
        f'refund {{"amount": 50}} => allow {ID[9]} {ID[3]}\n'
    )
    results = run_cases(policy, cases).results
    assert [r.passed for r in results] == [True, True, True, False, False]
    assert results[3].problems == (f"expected the default to decide, but rules decided: {ID[3]}",)
    assert results[4].problems == (f"expected the deciding rules {ID[9]}, {ID[3]}, got {ID[9]}",)
    assert "its selectors do not cover refund" in results[4].locations[-1].note


def test_the_report_as_json(shop, tmp_path):
    cases = tmp_path / "shop.cases"
    cases.write_text('refund {"amount": 500} => ask big-refund\nrefund {"amount": 0} => allow\n')
    result = run(shop, "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [r["passed"] for r in data["results"]] == [True, False]
    assert data["results"][1]["locations"][0] == {"line": 4, "note": f"deny rule {ID[4]} decided", "rule": ID[4]}


# --- the file format --------------------------------------------------------------------------


def test_a_context_line_sets_the_context_and_a_case_context_is_merged_over_it():
    cases = parse_cases(
        'Read {"file_path": "a"} => allow\n'
        'context {"cwd": "/p", "home": "/h"}\n'
        'Read {"file_path": "b"} => allow\n'
        'Read {"file_path": "c"} context {"cwd": "/q"} => allow\n'
        'context {} => allow    # a tool named context\n'
    )
    assert [c.context for c in cases] == [None, {"cwd": "/p", "home": "/h"}, {"cwd": "/q", "home": "/h"}, {"cwd": "/p", "home": "/h"}]
    assert cases[3].tool == "context" and cases[3].args == {}


def test_a_case_continues_on_indented_lines_and_hashes_inside_json_are_data():
    cases = parse_cases(
        '"my tool" {"q": "a # b => c",\n'
        '   # a comment inside the case\n'
        '   "n": [1,\n'
        "         2]}\n"
        "  => deny   # trailing comment\n"
        "\n"
        "get => allow\n"
    )
    assert [(c.line, c.tool, c.args, c.effect) for c in cases] == [
        (1, "my tool", {"q": "a # b => c", "n": [1, 2]}, "deny"),
        (7, "get", {}, "allow"),
    ]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('get {"a": 1} => alow\n', 1, "unknown effect 'alow'; did you mean 'allow'?"),
        ('\nget {"a": 1}\n', 2, "expected '=>'"),
        ('get {"a": 1 => allow\n', 1, "the arguments: not valid JSON"),
        ("get [1] => allow\n", 1, "expected '=>'"),
        ('get {"a": 1} junk => allow\n', 1, "expected '=>' and the expected effect, found 'junk => allow'"),
        ('get {"a": 1} =>\n', 1, "expected an effect"),
        ("get context 3 => allow\n", 1, "'context' is followed by a JSON object"),
        ('get => allow default L1\n', 1, "'default' means no rule decided"),
        ("  get => allow\n", 1, "an indented line continues a case"),
        ('context {"cwd": "/x"} extra\n', 1, "unexpected 'extra' after the context"),
        ("=> allow\n", 1, "a case starts with the tool's name"),
        ('get {"a":\n  \n  1} => allow\n', 1, "not valid JSON"),
        ('get {"a": 1, "a": 2} => allow\n', 1, "the arguments: duplicate key 'a'"),
        ('get {"a": NaN} => allow\n', 1, "NaN is not a JSON number"),
        ('get {"a": 1e999} => allow\n', 1, "too large for a number"),
        ('get context {"cwd": "/a", "cwd": "/b"} => allow\n', 1, "duplicate key 'cwd'"),
    ],
)
def test_a_malformed_case_is_an_error_at_its_line(text, line, message):
    with pytest.raises(CasesError) as info:
        parse_cases(text, "x.cases")
    assert info.value.line == line and message in info.value.message, info.value.message


def test_malformed_cases_and_unknown_rule_ids_exit_2_with_file_and_line(shop, tmp_path):
    cases = tmp_path / "shop.cases"
    cases.write_text('# one\nrefund {"amount": 5} => allow L99\n')
    result = run(shop)
    assert result.exit_code == 2
    assert f"{cases}:2: the policy has no rule 'L99'" in result.stderr
    cases.write_text('refund {"amount": 5} => maybe\n')
    result = run(shop)
    assert result.exit_code == 2 and f"{cases}:1: unknown effect 'maybe'" in result.stderr
    assert run(shop, tmp_path / "missing.cases").exit_code == 2
    bad = tmp_path / "bad.policy"
    bad.write_text("allow t when\n")
    assert run(bad, cases).exit_code == 2


def test_default_cases_path_replaces_the_policy_suffix():
    assert default_cases_path("a/b/retail.policy") == Path("a/b/retail.cases")
    assert default_cases_path("rules.txt") == Path("rules.txt.cases")
