"""What the engine computes once decides as computing it every time (issue 9, section 5): runs of
literal tests of one expression in an `and` / `or` (`lower(a) contains ".ssh" or lower(a) endswith
".pem"`), PathValue's fields kept once computed, `under` a field, the plans' inline path fields, and
decisions with errors kept in the decision cache."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Policy, ast, subjects
from dsl.compiler import Env, compile_condition, compile_condition_generic
from dsl.parser import parse
from dsl.values import EvalError

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn, env):
    try:
        return ("value", fn(env))
    except EvalError as exc:
        return ("error", exc.message)


TESTS = ['contains ".ssh"', 'endswith ".pem"', 'startswith "/"', 'startswith "~"', '== "ls"', '!= "ls"',
         'in ["a", "b", null]', 'not in ["x"]', 'in "hello"', '< "m"', ">= 3", "== 1", 'contains "a"', "== null",
         'in [1, "a"]', "== true"]
SUBJECTS = ["lower(args.a)", "args.a", "len(args.a)", "path(args.p).name", "path(args.p).parts", "args.d.k"]
VALUES = st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.sampled_from(["", "ls", "a", "A.PEM", "/x", "~/y", ".SSH", "hello", "m"]) | st.lists(st.sampled_from(["a", "ls", 1]), max_size=3)


@PROPERTY
@given(st.sampled_from(SUBJECTS), st.lists(st.sampled_from(TESTS), min_size=2, max_size=6), st.sampled_from(["or", "and"]),
       st.dictionaries(st.sampled_from(["a", "p", "d"]), VALUES | st.sampled_from(["/home/u/.ssh/id", "rel/x.key", "/"]) | st.fixed_dictionaries({"k": VALUES}), max_size=3))
def test_a_run_of_tests_of_one_subject_decides_as_each_test_alone(subject, tests, junction, args):
    condition = f" {junction} ".join(f"{subject} {t}" for t in tests)
    try:
        policy = Policy.from_text(f"allow t when {condition}", "run.policy")
    except Exception:
        return  # the checker refuses some mixes (a number ordered with a string literal, ...)
    (node,) = parse(f"allow t when {condition}").of_type(ast.Rule)
    env = Env("t", args, {"cwd": "/home/u"}, home="/home/u")
    assert outcome(policy.rules[0].test, env) == outcome(compile_condition_generic(node.condition), env), condition


def test_a_run_inside_a_quantifier_computes_lower_once_per_item(monkeypatch):
    from dsl import compiler

    calls = []
    real = str.lower

    class Counting(str):
        def lower(self):
            calls.append(1)
            return real(self)

    (node,) = parse('allow t when any a in args.w: lower(a) contains ".ssh" or lower(a) contains ".aws" or lower(a) endswith ".pem"').of_type(ast.Rule)
    test = compile_condition(node.condition)
    words = [Counting("x"), Counting("y.PEM")]
    # Counting is not exactly str, so values.lower reads it: count its lower() calls
    monkeypatch.setattr(compiler.values, "lower", lambda v: v.lower())
    assert test(Env("t", {"w": words}, {})) is True
    assert len(calls) == 2


@pytest.mark.parametrize("text", ["/", "/a", "/a/b.txt", "/a/.bashrc", "/a/b/c.tar.gz", "/home/u/proj/x"])
def test_a_path_value_keeps_the_fields_it_computes(text):
    value = subjects.PathValue(text)
    parts = tuple(p for p in text.split("/") if p)
    assert value.parts == parts and value.parts is value.parts
    assert value.name == (parts[-1] if parts else "")
    assert value.parent == subjects.PathValue("/" + "/".join(parts[:-1]))


def test_a_path_value_with_computed_fields_equals_a_fresh_one():
    used = subjects.PathValue("/a/b")
    used.parts, used.name
    assert used == subjects.PathValue("/a/b") and hash(used) == hash(subjects.PathValue("/a/b"))
    assert repr(used) == "PathValue(text='/a/b')"


UNDER = 'default deny "no"\nallow t when path(args.p) under context.cwd id "in"'


@pytest.mark.parametrize(("path", "cwd", "allowed"), [
    ("/home/u/proj/x", "/home/u/proj", True), ("/home/u/proj", "/home/u/proj", True),
    ("/home/u/project", "/home/u/proj", False), ("/etc", "/", True), ("x/y", "/home/u", True),
    ("../x", "/home/u/proj", False), ("/home/u/proj/../x", "/home/u/proj", False), ("/a", "rel", False),
])
def test_under_a_field_decides_by_whole_segments(path, cwd, allowed):
    policy = Policy.from_text(UNDER, "u.policy")
    assert (policy.evaluate("t", {"p": path}, {"cwd": cwd}).effect == "allow") is allowed


def test_the_plan_writes_path_fields_and_under_a_field_inline():
    policy = Policy.from_text('default allow\nask t when path(args.p).ext in [".pem"] or path(args.p).parts contains ".ssh" '
                              'or not (path(args.p) under context.cwd) id "s"', "p.policy")
    policy.evaluate("t", {"p": "/home/u/a.pem"}, {"cwd": "/home/u"})
    plan = policy._compiled[(0,)][2]  # (tests, uses memo, the rules written as one function)
    inline = plan.source.split("except U:")[0].split("else:")[0]  # before any fallback to the predicate
    assert "append(0)" in inline and "(env)" not in inline
    for p, effect in [("/home/u/a.pem", "ask"), ("/home/u/.ssh/k", "ask"), ("/etc/x", "ask"), ("/home/u/a.txt", "allow"), ("/", "ask")]:
        assert policy.evaluate("t", {"p": p}, {"cwd": "/home/u"}).effect == effect, p


def test_a_decision_with_short_errors_is_kept_and_a_long_one_is_not():
    policy = Policy.from_text('default allow\ndeny t when path(args.p).name == "x" reason "no" id "r"', "e.policy")
    first = policy.evaluate("t", {"p": "rel"})  # relative, and no cwd: an error
    assert first.effect == "deny" and first.outcomes[0].error
    assert policy.evaluate("t", {"p": "rel"}) is first
    long_path = "r" * 5000
    assert policy.evaluate("t", {"p": long_path}) is not policy.evaluate("t", {"p": long_path})
    assert policy.evaluate("t", {"p": long_path}) == policy.evaluate("t", {"p": long_path})


@pytest.mark.parametrize("path, base", [("C:\\x", "/a/.."), ("C:\\x", "/"), ("/x", "C:\\"), ("C:\\x\\y", "D:\\x")])
def test_a_windows_path_is_never_under_a_posix_directory_read_from_a_field(path, base):
    # found by test_specialized: `under args.a` with a = "/a/.." (the root) took any path as inside it
    policy = Policy.from_text('default deny "no"\nallow t when path(args.p) under args.a', "w.policy")
    assert policy.evaluate("t", {"p": path, "a": base}, {"cwd": "/home/u"}).effect == "deny"
