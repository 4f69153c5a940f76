"""The overlap note of `policy check` (dsl.analysis.disjoint) sees conditions that cannot hold
together: `== "view"` beside `!= "view"`, disjoint globs, ranges and sets (issue 9, section 6).

Sound means: when the analysis says two conditions are disjoint, no call makes the allow's true
while the ask's is true or an error (an ask that errs counts). Each case is checked against the
evaluator on a universe of values, and a property test draws pairs of comparisons at random.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Policy
from dsl.analysis import analyze, disjoint
from dsl.parser import parse

VALUES = [
    None, True, False, -1, 0, 1, 1.0, 5, 10, 15, 20, 25, "", "a", "b", "c", "ab", "ba", "view", "edit", "edit-x",
    "x.py", "x.js", "A", "/etc/passwd", "/home/u/x", [1], ["a"], {"k": 1},
]
PATHS = ["/etc/passwd", "/etc/x.py", "/home/u/a", "/home/u/b/c", "/w/a/x", "/w/b/x", "a/x", "b/x", "/", "x.js", "~/.bashrc"]
COMMANDS = ["ls", "ls; cat x", "rm -rf x", "ls; rm x", "cat x | grep y", "", "echo 'x"]


def overlap_noted(ask: str, allow: str) -> bool:
    text = f"ask t when {ask}\nallow t when {allow}\n"
    return any(f.code == "overlap" for f in analyze(parse(text, "t.policy")))


def both_count(ask: str, allow: str) -> list[dict]:
    """The calls (of the universe) on which the ask and the allow both count."""
    policy = Policy.from_text(f"ask t when {ask}\nallow t when {allow}\n")
    found = []
    for x, p, command in itertools.product(VALUES, PATHS, COMMANDS):
        args = {"x": x, "p": p, "command": command}
        counted = {o.effect for o in policy.evaluate("t", args, {"cwd": "/w", "home": "/home/u"}).outcomes if o.counted}
        if counted == {"ask", "allow"}:
            found.append(args)
    return found


@pytest.mark.parametrize(
    "ask, allow",
    [
        ('args.x == "view"', 'args.x != "view"'),
        ('args.x != "view"', 'args.x == "view"'),
        ('args.x == null', 'args.x != null'),
        ('args.x in ["a", "b"]', 'args.x in ["c", "view"]'),
        ('args.x in ["a", "b"]', 'args.x not in ["a", "b", "c"]'),
        ('args.x == "a"', 'args.x in ["c", "view"]'),
        ('args.x in [1, 5]', 'args.x > 10'),
        ('args.x < 10', 'args.x > 20'),
        ('args.x glob "a*"', 'args.x glob "b*"'),
        ('args.x glob "*.py"', 'args.x endswith ".js"'),
        ('args.x startswith "edit"', 'args.x == "view"'),
        ('args.x == "view"', 'args.x glob "edit*"'),
        ('path(args.p) glob "/etc/**"', 'path(args.p) glob "/home/**"'),
        ('path(args.p) glob "a/*"', 'path(args.p) glob "b/*"'),
        ('path(args.p) glob "/etc/**"', 'path(args.p) startswith "/home/"'),
        ('args.x == "a" and args.p == "x"', 'args.x != "a"'),
        ('any c in shell(args.command): c.program == "rm"', 'all d in shell(args.command): d.program in ["ls", "cat"]'),
        ('all c in shell(args.command): c.program == "rm"', 'any d in shell(args.command): d.program == "ls"'),
    ],
)
def test_contradictory_conditions_are_no_overlap(ask, allow):
    assert not overlap_noted(ask, allow)
    assert both_count(ask, allow) == []


@pytest.mark.parametrize(
    "ask, allow",
    [
        ('args.x == true', 'args.x == "a"'),  # "a" == true is an error, and an ask that errs counts
        ('args.x in ["a", 1]', 'args.x not in ["a"]'),  # a list of two types errs for some values
        ('args.x glob "a*"', 'args.x glob "*b"'),  # "ab"
        ('args.x glob "a*b"', 'args.x glob "ab*"'),  # "ab"
        ('path(args.p) glob "/w/a/*"', 'path(args.p) glob "a/*"'),  # a relative pattern is under the cwd
        ('path(args.p) glob "/w/../etc/*"', 'path(args.p) glob "/etc/*"'),  # normalized, the same pattern
        ('all c in shell(args.command): c.program == "rm"', 'all d in shell(args.command): d.program == "ls"'),  # ""
        ('any c in shell(args.command): c.program == "rm"', 'all d in shell(args.x): d.program == "ls"'),
        ('args.x != "a"', 'args.x != "b"'),
    ],
)
def test_conditions_that_can_both_count_keep_their_note(ask, allow):
    assert overlap_noted(ask, allow)


def test_a_true_beside_a_string_is_an_overlap_the_evaluator_confirms():
    assert both_count('args.x == true', 'args.x == "a"') == [{"x": "a", "p": p, "command": c} for p in PATHS for c in COMMANDS]


OPERANDS = ["args.x", "len(args.x)", "lower(args.x)"]
LITERALS = ['"a"', '"b"', '"view"', "1", "5", "10", "true", "null", '"ab"']
COMPARISONS = st.one_of(
    st.builds(lambda o, op, v: f"{o} {op} {v}", st.sampled_from(OPERANDS), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), st.sampled_from(LITERALS)),
    st.builds(lambda o, op, vs: f"{o} {op} [{', '.join(vs)}]", st.sampled_from(OPERANDS), st.sampled_from(["in", "not in"]),
              st.lists(st.sampled_from(LITERALS), min_size=1, max_size=3)),
    st.builds(lambda o, op, t: f'{o} {op} "{t}"', st.sampled_from(OPERANDS), st.sampled_from(["glob", "startswith", "endswith"]),
              st.sampled_from(["a*", "*b", "a*b", "b*", "view", "?", "[ab]*", "e*t", "a", "b", "ab"])),
)
CONDITIONS = st.lists(COMPARISONS, min_size=1, max_size=2).map(" and ".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(CONDITIONS, CONDITIONS)
def test_disjoint_never_hides_an_overlap(ask, allow):
    text = f"ask t when {ask}\nallow t when {allow}\n"
    try:
        policy = Policy.from_text(text)
    except Exception:  # a comparison the checker refuses (`"a" > 1`)
        return
    rules = parse(text, "t.policy").statements
    conditions = [r.condition for r in rules if hasattr(r, "condition")]
    if not disjoint(*conditions):
        return
    for x in VALUES:
        counted = {o.effect for o in policy.evaluate("t", {"x": x}).outcomes if o.counted}
        assert counted != {"ask", "allow"}, (ask, allow, x)
