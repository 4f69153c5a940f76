"""Static analysis (dsl.analysis): rules that can never fire, duplicates, redundant rules, allow and
ask overlaps, coverage; selector covering; `policy check` warnings and --strict.

The property tests hold the analysis to its promise against the evaluator itself: a rule reported
as never firing is never among the deciding rules of any call, and a rule reported as a duplicate
or redundant can be removed without changing any call's effect.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from dsl.analysis import analyze, covers, intersects
from dsl.parser import parse
from dsl.schema import ToolSchemas
from dsl.values import selector_regex

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def findings(text: str, tools=None):
    return analyze(parse(text, "t.policy"), tools)


def codes(text: str) -> list[tuple[str, int]]:
    """(code, line) of every finding."""
    return [(f.code, f.span.line) for f in findings(text) if f.span is not None]


# --- can never fire ---------------------------------------------------------------------------


def test_an_allow_under_an_unconditional_deny_can_never_fire():
    text = 'deny refund reason "never"\nallow refund when args.amount < 5\n'
    (f,) = findings(text)
    assert (f.severity, f.code, f.span.line) == ("warning", "never-fires", 2)
    assert f.message == "this allow can never fire: the deny at line 1 matches every call it applies to (deny beats allow)"
    assert f.help.startswith("an allow made pointless by a broader deny")
    (r,) = f.related
    assert r.span.line == 1 and r.message == "this deny has no condition and covers 'refund'"


def test_the_deny_may_come_later_in_the_file_and_be_broader():
    text = "allow mcp__github__get_issue\nask mcp__github__*\ndeny mcp__* reason \"no MCP\"\n"
    assert codes(text) == [("never-fires", 1), ("never-fires", 2)]
    f = findings(text)[0]
    assert f.related[0].message == "this deny has no condition and covers 'mcp__github__get_issue' (as 'mcp__*')"


def test_an_ask_under_a_deny_and_an_allow_under_an_ask_can_never_fire():
    assert codes('deny t reason "r"\nask t when args.x == 1\n') == [("never-fires", 2)]
    text = "ask t\nallow t when args.x == 1\n"
    (f,) = findings(text)
    assert f.code == "never-fires" and "(ask beats allow)" in f.message


def test_identical_conditions_cover_each_other():
    text = 'ask wire when args.x == 1 and args.y == "a"\nallow wire when args.x == 1 and args.y == "a"\n'
    (f,) = findings(text)
    assert f.code == "never-fires" and f.related[0].message == "this ask has the same condition and covers 'wire'"
    # layout and spans do not matter, literal types do
    assert codes('deny t when (args.x==1) reason "r"\nallow t when (args.x ==  1)\n') == [("never-fires", 2)]
    assert ("never-fires", 2) not in codes('deny t when args.x == 1 reason "r"\nallow t when args.x == 1.0\n')


@pytest.mark.parametrize(
    "text",
    [
        'deny t when args.x > 5 reason "r"\nallow t when args.x > 6\n',  # implication is not attempted
        'deny t when args.x == 1 reason "r"\nallow t\n',  # a conditional deny leaves the allow its other calls
        'deny a* reason "r"\nallow b\n',
        'deny *_order reason "r"\nallow get_*\n',  # no proof that every get_* ends in _order
        'deny get_? reason "r"\nallow get_*\n',
        'deny t, u when args.x == 1 reason "r"\nallow t when args.x == 1 and args.y\n',
        'ask t when args.x == 1\nallow t\n',
        "ask t\nask t when args.x == 1\n",  # asks combine their requirements
        'deny t reason "r"\ndeny t when args.x reason "s"\n',  # redundant, but it does decide
    ],
)
def test_no_never_fires_warning_when_the_rule_can_decide(text):
    assert "never-fires" not in [c for c, _ in codes(text)]


def test_a_rule_shadowed_for_some_of_its_tools_gets_a_note():
    text = 'deny mcp__* reason "r"\nallow mcp__github__get_issue, other\n'
    (f,) = findings(text)
    assert (f.severity, f.code) == ("note", "shadowed-in-part")
    assert f.message == "this allow never fires for 'mcp__github__get_issue': the deny at line 1 matches every such call (deny beats allow)"


def test_several_blockers_together_can_cover_a_rule():
    text = 'deny a reason "r"\nask b\nallow a, b\n'
    (f,) = findings(text)
    assert f.code == "never-fires" and "the rules at lines 1 and 2" in f.message and "deny beats ask beats allow" in f.message
    assert [r.span.line for r in f.related] == [1, 2]


# --- duplicates, redundant rules, overlaps ---------------------------------------------------


def test_a_duplicate_rule_is_reported_at_the_second():
    text = 'allow a, b when args.x == 1\nallow b, a when args.x == 1 reason "again"\n'
    (f,) = findings(text)
    assert (f.severity, f.code, f.span.line) == ("warning", "duplicate", 2)
    assert f.message == "duplicate rule: the same effect, tools and condition as the allow at line 1"
    assert f.related[0].span.line == 1


def test_asks_with_different_requirements_are_not_duplicates():
    text = 'group g = ["a", "b"]\nask t approvers 1\nask t approvers 2 from g\nask t approvers 1 id "x"\n'
    assert codes(text) == [("duplicate", 4)]


def test_an_allow_or_deny_under_a_broader_one_of_the_same_effect_is_redundant():
    text = 'deny a when args.q reason "x"\ndeny a, b reason "y"\nallow get_order\nallow get_*\n'
    assert codes(text) == [("redundant", 1), ("redundant", 3)]
    f = findings(text)[0]
    assert f.message == "this deny never changes a decision: the deny at line 2 already denies every call it applies to (its reason is still added to the decision)"
    # two rules covering each other: only the later one is reported
    assert codes("allow *\nallow *, x\n") == [("redundant", 2)]


def test_a_conditional_ask_overlapping_an_allow_is_a_note():
    text = "ask refund when args.amount > 50\nallow refund when args.amount <= 100\nallow other\n"
    (f,) = findings(text)
    assert (f.severity, f.code, f.span.line) == ("note", "overlap", 2)
    assert f.message == "when the condition of the ask at line 1 holds, it overrides this allow for 'refund' (ask beats allow)"
    assert codes("ask mcp__*__write when args.x\nallow mcp__github__*\n") == [("overlap", 2)]
    assert codes("ask mcp__*__write when args.x\nallow mcp__github__read\n") == []


@pytest.mark.parametrize(
    "ask, allow, overlap",
    [
        ("args.amount > 100", "args.amount <= 100", False),
        ("100 < args.amount", "args.amount <= 100", False),
        ("args.amount >= 100", "args.amount < 100", False),
        ("args.amount >= 100", "args.amount <= 100", True),  # both at 100
        ("args.amount > 100", "args.amount < 100.5", True),
        ("args.amount == 3", "args.amount > 3", False),
        ("len(args.items) > 2", "len(args.items) <= 2 and args.ok", False),
        ("args.kind == \"refund\" and args.n > 1", "args.kind == \"exchange\"", False),
        ("args.flag == true", "args.flag == false", False),
        ("args.kind == \"a\"", "args.kind != \"a\"", False),
        ("args.flag == true", "args.flag == \"x\"", True),  # "x" == true errs, and the ask counts
        ("args.amount > 100", "len(args.amount) <= 100", True),  # another operand
        ("args.amount > 100 or args.x", "args.amount <= 100", True),
        ("not (args.amount > 3)", "args.amount > 3 and args.ok", False),
        ("args.ok and not args.x", "args.x", False),
    ],
)
def test_conditions_that_cannot_both_hold_are_no_overlap(ask, allow, overlap):
    """The allow applies only when its condition is true (an error never allows), and then the
    ask's comparison of the same operand with a number or literal outside its range is false: no
    call gets both, so no note; the analysis stays silent only when it can show that."""
    text = f"ask refund when {ask}\nallow refund when {allow}\n"
    assert (codes(text) == [("overlap", 2)]) is overlap
    if not overlap:  # and indeed no call counts both rules
        policy = Policy.from_text(text)
        values = [-1, 0, 2, 2.5, 3, 99, 100, 100.5, 101, "refund", "exchange", "a", True, False, None, [1, 2], [1, 2, 3]]
        for amount, kind, flag, items, ok in itertools.product(values, ["refund", "exchange", 1], [True, False, "x"], [[1], [1, 2, 3], "ab"], [True, None]):
            args = {"amount": amount, "kind": kind, "flag": flag, "items": items, "ok": ok, "n": amount, "x": True}
            counted = {o.effect for o in policy.evaluate("refund", args).outcomes if o.counted}
            assert counted != {"ask", "allow"}, args


def test_the_samples_have_no_warnings():
    for name in ("retail", "airline", "coding-agent"):
        text = (ROOT / "samples" / f"{name}.policy").read_text(encoding="utf-8")
        assert [f for f in findings(text) if f.severity == "warning"] == [], name


def test_coverage_lists_the_tools_no_rule_mentions():
    tools = ToolSchemas.from_json([{"name": n} for n in ("get_a", "get_b", "put_a", "drop")], "tools.json")
    text = 'default deny "no"\nallow get_*\nask put_a when args.x\n'
    f = findings(text, tools)[-1]
    assert f.code == "uncovered" and f.span is None
    assert f.message == "1 tool of tools.json is not mentioned by any rule and gets the default (deny):\n    drop"


# --- selector covering ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outer, inner, expected",
    [
        ("a", "a", True), ("a", "b", False), ("a*", "a", True), ("a*", "ab", True), ("*", "x", True),
        ("a*", "a*", True), ("mcp__*", "mcp__github__*", True), ("*", "a?b*", True), ("a?", "ab", True),
        ("a?", "a*", False), ("a*", "*a", False), ("*_order", "get_*", False), ("a", "a*", False),
        ("?*", "a*", True), ("a*b", "a*c*b", True), ("a*c*b", "a*b", False), ("tool_[ab]*", "tool_[ab]x", True),
        ("tool_[ab]*", "tool_a", False),
    ],
)
def test_covers(outer, inner, expected):
    assert covers(outer, inner) is expected


GLOB = st.text(alphabet="ab*?", min_size=0, max_size=5)
NAMES = ["".join(p) for n in range(0, 6) for p in itertools.product("ab", repeat=n)]


@settings(max_examples=400, deadline=None)
@given(GLOB, GLOB)
def test_covers_is_sound(outer, inner):
    """Whenever covers() says so, every name the inner selector matches, the outer one matches."""
    if covers(outer, inner):
        o, i = selector_regex(outer), selector_regex(inner)
        assert all(o.match(n) for n in NAMES if i.match(n))


@settings(max_examples=400, deadline=None)
@given(GLOB, GLOB)
def test_intersects_finds_every_overlap(a, b):
    ra, rb = selector_regex(a), selector_regex(b)
    if any(ra.match(n) and rb.match(n) for n in NAMES):
        assert intersects(a, b)


# --- the promise, checked against the evaluator ----------------------------------------------

TOOL_NAMES = ["a", "ab", "b", "mcp__x", "mcp__y", "zz"]
SELECTORS = ["a", "ab", "b", "mcp__x", "a*", "*", "mcp__*", "?b", "mcp__?", "*b"]
CONDITIONS = [None, "args.x == 1", "args.x > 2", "args.y", "exists(args.x)", "args.x == 1 and args.y", "not args.y", "args.x in [1, 3]"]
X_VALUES = [None, 1, 3, "s"]  # None: the field is missing
Y_VALUES = [None, True, False, 1]
CALLS = [
    (tool, {k: v for k, v in (("x", x), ("y", y)) if v is not None})
    for tool in TOOL_NAMES for x in X_VALUES for y in Y_VALUES
]

RULE = st.tuples(
    st.sampled_from(["allow", "deny", "ask"]),
    st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=3, unique=True),
    st.sampled_from(CONDITIONS),
)


def render(rules, default: str) -> str:
    lines = [f"default {default}" + (' "no"' if default == "deny" else "")]
    for effect, selectors, condition in rules:
        line = f"{effect} {', '.join(selectors)}"
        if condition:
            line += f" when {condition}"
        if effect == "deny":
            line += ' reason "r"'
        lines.append(line)
    return "\n".join(lines) + "\n"


def effects(policy: Policy) -> list[str]:
    return [policy.evaluate(tool, args).effect for tool, args in CALLS]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RULE, min_size=1, max_size=7), st.sampled_from(["ask", "deny", "allow"]))
def test_never_fires_never_names_a_rule_that_decides_a_call(rules, default):
    text = render(rules, default)
    policy = Policy.from_text(text)
    found = findings(text)
    never = {f"L{f.span.line}" for f in found if f.code == "never-fires"}
    for tool, args in CALLS:
        decision = policy.evaluate(tool, args)
        assert not never & set(decision.deciding), (text, tool, args, decision.deciding)
    # a duplicate or redundant rule can go without changing any effect
    before = effects(policy)
    lines = text.splitlines()
    for f in found:
        if f.code in ("duplicate", "redundant"):
            without = "\n".join(line for n, line in enumerate(lines, 1) if n != f.span.line) + "\n"
            assert effects(Policy.from_text(without)) == before, (text, f.message)


def test_the_property_sees_never_fires_findings():
    """The generated policies do produce the findings the property is about."""
    text = render([("deny", ["*"], None), ("allow", ["a", "mcp__*"], "args.x == 1"), ("ask", ["?b"], None)], "ask")
    assert [c for c, _ in codes(text)] == ["never-fires", "never-fires"]


# --- the command line -------------------------------------------------------------------------


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_check_prints_warnings_with_both_locations_and_exits_0(tmp_path):
    policy = tmp_path / "p.policy"
    policy.write_text('policy "p"\ndeny refund reason "never"\n\nallow refund when args.amount < 5\n')
    result = run("policy", "check", policy)
    assert result.exit_code == 0 and ": ok:" in result.stdout
    assert f"{policy}:4:1: warning: this allow can never fire: the deny at line 2" in result.stderr
    assert f"{policy}:2:1: note: this deny has no condition and covers 'refund'" in result.stderr
    assert "    4 | allow refund when args.amount < 5" in result.stderr
    assert "    2 | deny refund" in result.stderr


def test_strict_turns_warnings_into_errors(tmp_path):
    policy = tmp_path / "p.policy"
    policy.write_text('deny refund reason "never"\nallow refund when args.amount < 5\n')
    result = run("policy", "check", policy, "--strict")
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{policy}:2:1: error: this allow can never fire" in result.stderr
    assert "1 warning, errors under --strict" in result.stderr
    # checker warnings count too; notes do not
    policy.write_text("default allow\nallow t\n")
    assert run("policy", "check", policy, "--strict").exit_code == 2
    policy.write_text("ask t when args.x\nallow t\n")
    result = run("policy", "check", policy, "--strict")
    assert result.exit_code == 0 and "note: when the condition of the ask at line 1 holds" in result.stderr


def test_strict_passes_the_samples():
    for name in ("retail", "airline", "coding-agent"):
        assert run("policy", "check", ROOT / "samples" / f"{name}.policy", "--strict").exit_code == 0


def test_an_unconditional_ask_on_some_of_the_same_tools_is_an_overlap_note():
    text = "ask mcp__*__write\nallow mcp__github__*\n"
    (f,) = findings(text)
    assert (f.code, f.span.line) == ("overlap", 2)
    assert f.message == "the ask at line 1 overrides this allow for the tools both rules match ('mcp__github__*'; ask beats allow)"
    # an ask that shadows the allow on a selector is reported once, as shadowing
    assert codes("ask a\nallow a, b\n") == [("shadowed-in-part", 2)]


@pytest.mark.parametrize(
    "condition, warning",
    [
        ('lower(args.q) contains "DROP TABLE"', "lower() gives lower case"),
        ('url(args.u).host == "Evil.com"', "a URL's host is lower case"),
        ('url(args.u).host glob "*.EVIL.com"', "a URL's host is lower case"),
        ('url(args.u).host in ["evil.com."]', "no trailing dot"),
        ('any c in shell(args.c): c.flags contains "-r"', 'flags are kept without their dashes ("r")'),
        ('any c in shell(args.c): "--force" in c.flags', 'flags are kept without their dashes ("force")'),
        ('any c in shell(args.c): c.program == "/bin/rm"', "the basename; compare .path"),
        ('shell(args.c)[0].program == "/bin/rm"', "the basename"),
        ('path(args.p) == "~/.bashrc"', "path() is absolute and normalized"),
        ('path(args.p) == ".env"', "path() is absolute and normalized"),
        ('path(args.p) in ["/etc/", "/a/./b"]', "path() is absolute and normalized"),
        ('path(args.p).ext == "env"', 'starts with its dot (".env")'),
        ('path(args.p) != "/etc/"', "always true"),
        ('lower(args.q) contains "drop table"', None),
        ('url(args.u).host glob "*.evil.com"', None),
        ('any c in shell(args.c): c.flags contains "r" and c.program == "rm"', None),
        ('path(args.p) == "/etc/passwd" or path(args.p) glob "**/.env" or path(args.p).ext == ".pem"', None),
        ('args.program == "/bin/rm"', None),  # not a normalized value
        # where the literal holds or orders the value, or has a character class: no warning
        ('lower(args.q) > "M"', None),
        ('url(args.u).host >= "A"', None),
        ('lower(args.q) in "Hello world"', None),
        ('any c in shell(args.c): c.program in "/usr/bin/rm /usr/bin/shred"', None),
        ('any c in shell(args.c): "/usr/bin/rm" contains c.program', None),
        ('lower(args.q) glob "*[!A-Z]*"', None),
        ('"DROP" in lower(args.q)', "lower() gives lower case"),
        ('any c in shell(args.c): c.program == "rm -rf"', "is one word"),
        ('any c in shell(args.c): c.wrappers contains "/usr/bin/sudo"', 'by their basename ("sudo")'),
        ('any c in shell(args.c): c.args contains "-rf"', "args holds the words that are not flags"),
        ('url(args.u).host == "https://evil.com"', "has no scheme or path"),
        ('url(args.u).scheme == "http:"', 'without \':\' or \'//\' ("http")'),
        ('path(args.p).parts contains ".ssh/id_rsa"', "single names"),
        ('any c in shell(args.c): c.args contains "-"', None),  # `-` (stdin) is an argument
    ],
)
def test_a_literal_a_normalized_value_never_equals_is_a_warning(condition, warning):
    """A deny whose literal is spelled as the normalized value never is (upper case after lower(),
    a flag with its dashes, a full path as a program, a relative path) never fires: the checker
    says so at the literal."""
    policy = Policy.from_text(f'deny t when {condition} reason "r"\n')
    found = [w.message for w in policy.warnings if "comparison is" in w.message]
    if warning is None:
        assert found == []
    else:
        assert found and any(warning in m for m in found), found


def test_a_policy_without_rules_is_a_note():
    (f,) = findings("")
    assert (f.severity, f.code, f.message) == ("note", "no-rules", "the policy has no rules: every call gets the default (ask)")
    (f,) = findings('default deny "Nothing runs here."')
    assert "(deny)" in f.message


def test_a_bidirectional_control_character_is_a_warning_at_its_column():
    """Trojan Source (CVE-2021-42574): the line shows one thing and parses as another."""
    policy = Policy.from_text('deny Bash when args.command == "rm \u202e -rf" reason "x"\n')
    (w,) = policy.warnings
    assert (w.span.line, w.span.column) == (1, 36) and "U+202E" in w.message
    assert Policy.from_text('deny Bash when args.command == "rm \\u202e" reason "x"\n').warnings == []  # an escape is visible


def test_a_deny_with_all_over_shell_is_a_warning():
    """`deny ... when all c in shell(...)` fires only when every command matches: `ls; rm x`
    slips past a deny meant for rm."""
    policy = Policy.from_text('deny Bash when all c in shell(args.command): c.program == "rm" reason "r"\n')
    assert any("slips past" in w.message for w in policy.warnings)
    assert not Policy.from_text('allow Bash when all c in shell(args.command): c.program == "ls"\n').warnings


def test_an_allow_that_one_harmless_command_satisfies_is_a_warning():
    """`allow ... when any c in shell(...)` or a prefix of the raw text lets `git status; rm -rf ~`
    through (a new user's first policies, which `policy check` called ok)."""
    for condition in ('any c in shell(args.command): c.program in ["git", "ls"]',
                      'args.command startswith "git"', 'args.command glob "git *"', 'args.cmd contains "pytest"',
                      'exists(args.command) and (any c in shell(args.command): c.program == "ls")'):
        policy = Policy.from_text(f"allow Bash when {condition}\n")
        assert any("is allowed" in w.message for w in policy.warnings), condition
        (w,) = [w for w in policy.warnings if "is allowed" in w.message]
        assert w.span.line == 1 and w.span.column > 16, condition
    for condition in ('all c in shell(args.command): c.program in ["git", "ls"]', 'args.command == "git status"',
                      'not (any c in shell(args.command): c.program == "rm")', 'args.path startswith "/tmp"'):
        assert not Policy.from_text(f"allow Bash when {condition}\n").warnings, condition
    assert not Policy.from_text('deny Bash when any c in shell(args.command): c.program == "rm" reason "r"\n').warnings
