"""The generated plans of issue 9 section 5 (real policies decide in a few microseconds) decide
as the reference evaluator: what they read from make_path's cache and keep per call, the errors
they carry as values instead of calling the predicates, the shapes they now write inline
(`path(field) under path(word)`, `path(x, "/")` and its fields, runs of tests of one value),
and the byte bounds of the caches behind them.

Every case compares `Policy.evaluate` with the generic predicates (`compile_condition_generic`,
no plan, no cache) on the same call: the same Decision, errors and their messages included.
"""

from __future__ import annotations

import gc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Policy, ast, subjects
from dsl.cache import BUDGETS, MB, estimate_size
from dsl.compiler import Env, clear_caches, compile_condition_generic
from dsl.decision import RuleOutcome, decide
from dsl.parser import parse
from dsl.subjects import paths
from dsl.subjects.winpaths import WinStr
from dsl.values import EvalError

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(policy: Policy, tool: str, args: dict, context: dict):
    """The Decision of the generic predicates (see tests/test_corpus_decisions.py)."""
    nodes = parse(policy.source_text).of_type(ast.Rule)
    outcomes = []
    for rule in policy.rules_for(tool):
        error, holds = None, True
        if nodes[rule.order].condition is not None:
            try:
                holds = compile_condition_generic(nodes[rule.order].condition)(Env(tool, args, context, home=policy.home))
            except EvalError as exc:
                holds, error = False, exc.message
        if holds is True or error is not None:
            outcomes.append(RuleOutcome(rule=rule.rule_id, line=rule.line, effect=rule.effect, counted=holds or rule.effect != "allow",
                                        error=error, reason=rule.reason, condition=rule.condition_text))
    return decide(outcomes, policy._requirements, policy.default, policy.name, policy.digest)


def agree(text: str, calls: list[tuple[str, dict, dict]]) -> Policy:
    policy = Policy.from_text(text, "p.policy")
    for tool, args, context in calls:
        expected = reference(policy, tool, args, context)
        for _ in range(2):  # a first sight, then what the caches kept
            assert policy.evaluate(tool, args, context) == expected, (args, context)
        clear_caches()
        assert policy.evaluate(tool, args, context) == expected, (args, context)
    return policy


CONTEXTS = [{"cwd": "/home/u/proj"}, {}, {"cwd": "rel"}, {"cwd": ""}, {"cwd": "C:\\proj"}, {"cwd": "c:/Proj/sub"},
            {"cwd": "/home/u/proj", "home": "/home/u"}, {"cwd": "C:\\proj", "home": "/home/u"}, {"cwd": 3}, {"cwd": "\\\\srv\\share"}]
COMMANDS = ["rm -rf build", "rm -rf ..", "rm -rf /home/u", "cd x || rm -rf y", "rm -rf ~", "rm -rf ~/x", "cd C:/proj && rm -r a",
            "rm -rf 'C:\\proj'", "cat ~/.ssh/id_rsa", "cat a b c", "cd \"$D\" && cat x", "ls http://x.example/y", "cat '*.{ts,tsx}'",
            "cd /tmp && cat .env", "echo x > .env", "git status", "cd .. && git status", "ls 2>/dev/null", "cat C:\\\\x .git/config"]


@pytest.mark.parametrize("body", [
    'c.program == "rm" and (any a in c.args: a in ["/", "~"] or (a startswith "/" and path(a) == "/") or path(context.cwd) under path(a, c.cwd))',
    "any a in c.args: path(context.cwd) under path(a, c.cwd)",
    "not c.dynamic and c.cwd != \"\" and ((any p in c.paths: path(p, c.cwd).secret) or (any r in c.redirects: path(r, c.cwd).secret))",
    "c.read_only and path(c.cwd) under context.cwd and (all p in c.paths: path(p, c.cwd) under context.cwd and not path(p, c.cwd).secret)",
    "c.program != \"git\" or path(c.cwd) == path(context.cwd)",
    'any a in c.args: path(a, "/").secret or lower(path(a, "/").name) == "head"',
])
@pytest.mark.parametrize("kind", ["any", "all"])
def test_a_loop_whose_items_error_is_decided_in_the_plan_as_the_predicates_decide_it(body, kind):
    """A command whose path() is refused (no cwd, an unknown directory after `||` or `cd $D`,
    `~` with no home, a URL or a glob under a Windows cwd): the loop carries its error as a
    value, and another item can still decide the rule."""
    calls = [("t", {"cmd": cmd}, ctx) for cmd in COMMANDS for ctx in CONTEXTS]
    agree(f'default allow\nask t when {kind} c in shell(args.cmd): {body} reason "r"', calls)
    agree(f'allow t when {kind} c in shell(args.cmd): {body}', calls)


@pytest.mark.parametrize("condition", [
    "path(args.p) under context.cwd", "not (path(args.p) under context.cwd)", 'path(args.p) under "/home/u"',
    'path(args.p) glob "/**/.git/**"', "path(args.p).holds_secrets", 'path(args.p, "/").glob_secret or path(args.p, "/").secret',
    '(exists(args.p) and path(args.p).holds_secrets) or (exists(args.q) and (path(args.q, "/").secret or lower(args.q) contains ".env"))',
    'path(args.p).parts contains ".git" or path(args.p).parts contains ".ssh" or lower(path(args.p).text) contains "/.env"'
    ' or lower(path(args.p).text) endswith ".pem" or lower(path(args.p).text) endswith ".key" or path(args.p).name == "HEAD"',
])
def test_a_rule_whose_paths_are_refused_is_decided_in_the_plan_as_the_predicates_decide_it(condition):
    values = ["/home/u/proj/a.py", "a.py", "~/x", "", "*.{ts,tsx}", "C:\\proj\\.git\\config", "/home/u/.ssh/id_rsa", 3, None,
              "/home/u/proj/HEAD", "x/../../.env"]
    calls = [("t", {"p": p, "q": q}, ctx) for p in values for q in ("*.env", 4) for ctx in CONTEXTS]
    calls += [("t", {}, ctx) for ctx in CONTEXTS]
    agree(f'default allow\nask t when {condition} reason "r"', calls)


def test_the_sample_decides_calls_without_a_cwd_without_calling_its_predicates(monkeypatch):
    """The errors of a call that has no cwd (every relative word refused) are carried by the
    plan: no rule's predicate runs (each used to cost tens of microseconds)."""
    policy = Policy.load(paths_sample())
    expected = {}
    calls = [("Bash", {"command": "find /x -type f | wc -l && du -sh /x"}, {}), ("Edit", {"file_path": "/x/a.py"}, {}),
             ("Bash", {"command": "cd \"C:/p\" && ls a || echo no; ls b"}, {"cwd": "C:\\p"}),
             ("Grep", {"pattern": "x", "path": "C:\\p", "glob": "*.{ts,tsx}"}, {"cwd": "C:\\p"})]
    for tool, args, context in calls:
        expected[tool, repr(args)] = reference(policy, tool, args, context)
    from dsl import compiler

    monkeypatch.setattr(compiler, "_item_decided", _refuse_item)  # nor the predicate of a loop's body
    for rule in policy.rules:
        if rule.test is not None:
            object.__setattr__(rule, "test", _refuse)
    fresh = Policy(name=policy.name, digest=policy.digest, source_name=policy.source_name, source_text=policy.source_text,
                   rules=list(policy.rules), default=policy.default, groups=policy.groups, warnings=policy.warnings, home=policy.home)
    for tool, args, context in calls:
        assert fresh.evaluate(tool, args, context) == expected[tool, repr(args)], (tool, args)


def paths_sample():
    from pathlib import Path

    return Path(__file__).resolve().parents[1] / "samples" / "coding-agent.policy"


def _refuse(env):
    raise AssertionError("a rule's predicate was called")


def _refuse_item(test, env, item):
    raise AssertionError("a loop body's predicate was called")


class Text(str):
    """A str subclass (not what JSON gives): make_path's cache is not keyed by it."""


def test_a_cwd_or_home_that_is_a_str_subclass_is_decided_as_the_reference():
    calls = [("t", {"p": "a.py"}, {"cwd": Text("/home/u/proj")}), ("t", {"p": "~/x"}, {"cwd": "/home/u/proj", "home": Text("/home/u")}),
             ("t", {"p": "A.PY"}, {"cwd": WinStr("C:\\Proj")}), ("t", {"p": "/home/u/proj/x"}, {"cwd": Text("/home/u/proj")})]
    agree('default allow\nask t when path(args.p) under context.cwd and not path(args.p).secret reason "r"', calls)
    agree('default allow\nask t when path(args.p).name == "a.py" reason "r"', calls)


def test_runs_of_tests_of_one_value_decide_as_the_tests_one_by_one():
    values = ["/a/.git/x", "/a/.GIT/x", "/a/b.pem", "/a/B.KEY", "/a/head", "/a/HEAD", "/a/x", "C:\\a\\.Git\\x", "rel", 3]
    calls = [("t", {"p": p, "s": s}, ctx) for p in values for s in ("abc", "xyz", "ab", 5)
             for ctx in ({"cwd": "/a"}, {"cwd": "C:\\a"}, {})]
    agree('default allow\nask t when path(args.p).parts contains ".git" or path(args.p).parts contains ".husky" '
          'or lower(path(args.p).text) endswith ".pem" or lower(path(args.p).text) endswith ".key" '
          'or lower(path(args.p).text) contains "/.git/" or lower(path(args.p).name) == "head" reason "r"', calls)
    agree('default allow\nask t when args.s == "abc" or args.s == "xyz" or args.s startswith "x" or args.s startswith "a" reason "r"', calls)
    agree('default allow\nask t when args.s contains "a" and args.s contains "b" and args.s endswith "c" reason "r"', calls)


# --- the caches' byte bounds ---------------------------------------------------------------

SEGMENT = st.text(alphabet=st.sampled_from("abcXYZ._-é€😀 "), min_size=1, max_size=12)


@PROPERTY
@given(st.lists(SEGMENT, min_size=1, max_size=12), st.booleans(), st.booleans())
def test_a_kept_path_is_charged_at_least_what_it_holds(segments, windows, relative):
    """make_path's cache charges each value what it holds once every field it may compute
    later is computed (parts, name, secret, holds_secrets, glob_secret), non-ASCII text and
    the WinStr of a Windows path included: its budget bounds what it keeps."""
    sep = "\\" if windows else "/"
    cwd = "C:\\Users\\me\\proj" if windows else "/home/me/proj"
    raw = sep.join(segments) if relative else ("C:\\" if windows else "/") + sep.join(segments)
    try:
        value = subjects.make_path(raw, cwd, None)
    except EvalError:
        return
    for name in ("parts", "name", "ext", "secret", "holds_secrets", "glob_secret", "text"):
        getattr(value, name)
    key = (raw, cwd, None)
    seen: set[int] = set()
    held = estimate_size(key, seen) + estimate_size(value, seen)
    assert held <= paths.value_cost(value, raw + cwd)


def test_the_caches_stay_within_their_budgets_and_64_mb_together():
    from dsl import compiler
    from dsl.subjects import secrets, shell, urls

    assert sum(BUDGETS.values()) == 64 * MB
    policy = Policy.load(paths_sample())
    clear_caches()
    for i in range(3000):  # distinct long paths and commands: every cache fills and evicts
        word = f"dir{i}/" + "é" * 200 + f"/file{i}.py"
        policy.evaluate("Read", {"file_path": "/home/u/proj/" + word}, {"cwd": "/home/u/proj"})
        policy.evaluate("Read", {"file_path": "C:\\proj\\" + word.replace("/", "\\")}, {"cwd": "C:\\proj"})
        policy.evaluate("Bash", {"command": f"cat {word} x{i} && cd sub{i} && ls {word}"}, {"cwd": "/home/u/proj"})
        policy.evaluate("WebFetch", {"url": f"https://h{i}.example.com/" + "é" * 50}, {})
    gc.collect()
    for cache in (compiler._SHELL_CACHE, compiler._ITEM_PATHS, paths.PATH_CACHE, paths._BASES, secrets._SECRET_CACHE,
                  urls._HOSTS, shell._CACHE):
        assert 0 <= cache.bytes <= cache.budget, cache
        assert cache.budget == BUDGETS[cache.name]
