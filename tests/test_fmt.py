"""`countersign policy fmt`: one canonical layout that keeps every comment, is idempotent, and
never changes what a policy decides.

Properties (hypothesis, over generated policies laid out with random spacing, redundant
parentheses and comments between any two tokens):
* fmt(fmt(p)) == fmt(p);
* every comment of p is in fmt(p), exactly as many times;
* fmt(p) parses to the same syntax tree as p (spans aside);
* fmt(p) decides random calls exactly as p: same effect, deciding rules (by position), every
  rule's outcome, requirements.
The three samples are formatted too, and decide their case files' calls as before.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy, PolicyError, Span, ast
from dsl.cases import parse_cases
from dsl.fmt import format_policy, quote
from dsl.parser import parse, parse_with_comments
from policy_gen import calls, policy_texts

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ["retail", "airline", "coding-agent"]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
runner = CliRunner()


def shape(node):
    """A syntax tree without its source positions (and with each literal's type)."""
    if isinstance(node, Span):
        return None
    if isinstance(node, (tuple, list)):
        return tuple(shape(n) for n in node)
    if dataclasses.is_dataclass(node):
        fields = tuple(
            (f.name, shape(getattr(node, f.name))) for f in dataclasses.fields(node) if "span" not in f.name
        )
        extra = (type(node.value).__name__,) if isinstance(node, ast.Literal) else ()
        return (type(node).__name__, fields, extra)
    return node


def comments_of(text: str) -> Counter:
    return Counter(str(tok).rstrip() for tok in parse_with_comments(text)[1])


def same_decisions(a: Policy, b: Policy, tool: str, args: dict, context: dict) -> None:
    da, db = a.evaluate(tool, args, context), b.evaluate(tool, args, context)
    pos_a = {r.rule_id: r.order for r in a.rules}
    pos_b = {r.rule_id: r.order for r in b.rules}
    assert da.effect == db.effect
    assert da.by_default == db.by_default
    assert da.requirements == db.requirements
    assert [pos_a[r] for r in da.deciding] == [pos_b[r] for r in db.deciding]
    assert [(pos_a[o.rule], o.counted, o.error, o.effect, o.reason) for o in da.outcomes] == [
        (pos_b[o.rule], o.counted, o.error, o.effect, o.reason) for o in db.outcomes
    ]


# --- properties -------------------------------------------------------------------------------


@FAST
@given(policy_texts())
def test_fmt_is_idempotent_keeps_every_comment_and_the_syntax_tree(generated):
    text, comments = generated
    once = format_policy(text)
    assert format_policy(once) == once
    assert comments_of(once) == Counter(comments) == comments_of(text)
    assert shape(parse(once)) == shape(parse(text))
    assert once.endswith("\n") and "\n\n\n" not in once and not any(line != line.rstrip() for line in once.split("\n"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(policy_texts(), st.lists(calls(), min_size=1, max_size=6))
def test_the_formatted_policy_decides_random_calls_as_the_original(generated, drawn):
    text, _ = generated
    try:
        original = Policy.from_text(text, "gen.policy")
    except PolicyError:
        return  # the property is about policies that load; the tree comparison covers the rest
    formatted = Policy.from_text(format_policy(text), "gen.policy")
    for tool, args, context in drawn:
        same_decisions(original, formatted, tool, args, context)


# --- the samples ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_the_samples_round_trip_through_fmt(name):
    path = ROOT / "samples" / f"{name}.policy"
    text = path.read_text(encoding="utf-8")
    once = format_policy(text, str(path))
    assert format_policy(once) == once
    assert comments_of(once) == comments_of(text)
    assert shape(parse(once)) == shape(parse(text))
    original, formatted = Policy.from_text(text, str(path)), Policy.from_text(once, str(path))
    assert not formatted.warnings or [w.message for w in formatted.warnings] == [w.message for w in original.warnings]
    cases = ROOT / "samples" / f"{name}.cases"
    for case in parse_cases(cases.read_text(encoding="utf-8"), str(cases)):
        same_decisions(original, formatted, case.tool, case.args, case.context)


# --- the layout -------------------------------------------------------------------------------


def test_fmt_puts_each_clause_on_its_own_line_indented_two_spaces():
    text = 'ask refund when args.amount > 100 reason "Big." approvers 2 from fin timeout 4h id "big" group fin = ["a","b","c"]'
    assert format_policy(text) == (
        "ask refund when args.amount > 100\n"
        '  reason "Big."\n'
        "  approvers 2 from fin\n"
        "  timeout 4h\n"
        '  id "big"\n'
        'group fin = ["a", "b", "c"]\n'
    )


def test_fmt_normalizes_spacing_quoting_and_parentheses():
    text = (
        'allow  "read_file" ,mcp__x__*,"my tool"   when((args . a=="\\u00e9\\/x")) and not args.b in [1,2,]\n'
        'deny "deny" when args["x y"][ -1 ]!=1e3 or (args.a == 1 or args.b == 2) reason "say \\"no\\"\\ttab"\n'
    )
    assert format_policy(text) == (
        'allow read_file, mcp__x__*, "my tool" when args.a == "é/x" and not (args.b in [1, 2])\n'
        'deny "deny" when args["x y"][-1] != 1e3 or (args.a == 1 or args.b == 2)\n'
        '  reason "say \\"no\\"\\ttab"\n'
    )


def test_fmt_breaks_a_long_condition_before_and_or():
    ors = " or ".join(f'args.command contains "word-number-{i}"' for i in range(6))
    text = f"deny Bash when args.ok == true and ({ors}) reason \"r\""
    out = format_policy(text).split("\n")
    assert out == [
        "deny Bash",
        "  when args.ok == true",
        '    and (args.command contains "word-number-0" or args.command contains "word-number-1"',
        '         or args.command contains "word-number-2" or args.command contains "word-number-3"',
        '         or args.command contains "word-number-4" or args.command contains "word-number-5")',
        '  reason "r"',
        "",
    ]


def test_fmt_wraps_long_selector_lists_under_the_first_selector():
    names = ", ".join(f"tool_number_{i}" for i in range(12))
    out = format_policy(f"allow {names}").split("\n")
    assert out[0].startswith("allow tool_number_0, ") and out[1].startswith("      tool_number_")
    assert all(len(line) <= 100 for line in out)


def test_fmt_keeps_blank_lines_between_statements_collapsed_to_one():
    text = "# head\n\n\n\nallow a\nallow b\n\n\n# about c\nallow c   # trailing\n"
    assert format_policy(text) == "# head\n\nallow a\nallow b\n\n# about c\nallow c  # trailing\n"


def test_comments_inside_a_multiline_condition_stay_beside_their_operand():
    text = (
        "deny Bash\n"
        "  when args.a == 1   # the first\n"
        "    # about the second\n"
        "    or args.b == 2\n"
        "    or args.c == 3\n"
        '  reason "r"  # why\n'
    )
    assert format_policy(text) == (
        "deny Bash\n"
        "  when args.a == 1  # the first\n"
        "    # about the second\n"
        "    or args.b == 2 or args.c == 3\n"
        '  reason "r"  # why\n'
    )


def test_comments_in_odd_places_move_to_a_line_boundary_and_are_kept():
    text = 'ask # a\nt # b\n, # c\nu when args # d\n. x # e\n== 1 approvers # f\n1 id "x" # g\n'
    out = format_policy(text)
    assert comments_of(out) == comments_of(text)
    assert format_policy(out) == out
    # a..e trail the head and the condition, which share a line now: five end-of-line comments on
    # one line cannot stay there, so they go on lines of their own before the rule
    assert out == '# a\n# b\n# c\n# d\n# e\nask t, u when args.x == 1\n  approvers 1  # f\n  id "x"  # g\n'


def test_quote_escapes_only_what_it_must():
    assert quote('a"b\\c\n\t') == '"a\\"b\\\\c\\n\\t"'
    assert quote("é 日本 ✓") == '"é 日本 ✓"'
    assert quote("\u200b\x7f") == '"\\u200b\\u007f"'
    assert quote("\U000e0001") == '"\\udb40\\udc01"'


def test_fmt_refuses_text_that_does_not_parse():
    with pytest.raises(PolicyError):
        format_policy("allow t when args.x ==")


# --- the command ------------------------------------------------------------------------------


def run(*args):
    result = runner.invoke(app, ["policy", "fmt", *map(str, args)])
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_fmt_prints_the_formatted_policy(tmp_path):
    path = tmp_path / "p.policy"
    path.write_text("allow   a  when args.x==1 # c\n")
    result = run(path)
    assert result.exit_code == 0 and result.stdout == "allow a when args.x == 1  # c\n"
    assert path.read_text() == "allow   a  when args.x==1 # c\n"


def test_fmt_check_exits_1_with_a_diff_when_not_formatted_and_0_when_formatted(tmp_path):
    path = tmp_path / "p.policy"
    path.write_text("allow a reason  \"x\"\n")
    result = run(path, "--check")
    assert result.exit_code == 1
    assert f"--- {path}" in result.stdout and '-allow a reason  "x"' in result.stdout and '+  reason "x"' in result.stdout
    assert "not formatted" in result.stderr
    path.write_text(format_policy(path.read_text()))
    assert run(path, "--check").exit_code == 0


def test_fmt_write_rewrites_the_file_atomically_keeping_its_mode(tmp_path):
    path = tmp_path / "p.policy"
    path.write_text("allow a when args.x==1\n")
    os.chmod(path, 0o640)
    result = run(path, "--write")
    assert result.exit_code == 0
    assert path.read_text() == "allow a when args.x == 1\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["p.policy"]  # no temporary file left behind
    assert run(path, "--check").exit_code == 0


def test_fmt_on_a_syntax_error_exits_2_and_writes_nothing(tmp_path):
    path = tmp_path / "p.policy"
    path.write_text("allow a when args.x ==\n")
    result = run(path, "--write")
    assert result.exit_code == 2
    assert f"{path}:1:23: error: unexpected end of file" in result.stderr and "cannot be formatted" in result.stderr
    assert path.read_text() == "allow a when args.x ==\n"
    assert run(path, "--check", "--write").exit_code == 2
    assert run(tmp_path / "missing.policy").exit_code == 2


def test_fmt_keeps_the_meaning_of_every_compliance_policy():
    """Every policy of tests/compliance/*.json: idempotent, same tree, same comments, and the same
    decision for each of its cases."""
    import json

    checked = 0
    for path in sorted((ROOT / "tests" / "compliance").glob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            text = group.get("policy") if isinstance(group, dict) else None
            text = "\n".join(text) if isinstance(text, list) else text
            if not isinstance(text, str):
                continue
            try:
                tree = parse(text)
            except PolicyError:
                continue
            once = format_policy(text)
            assert format_policy(once) == once and shape(parse(once)) == shape(tree), text
            assert comments_of(once) == comments_of(text)
            try:
                original = Policy.from_text(text)
            except PolicyError:
                continue
            formatted = Policy.from_text(once)
            for case in group.get("cases", []):
                if isinstance(case.get("tool"), str) and isinstance(case.get("args", {}), dict):
                    context = case.get("context") if isinstance(case.get("context"), dict) else {}
                    same_decisions(original, formatted, case["tool"], case.get("args", {}), context)
            checked += 1
    assert checked >= 20
