"""The specialized predicates `Policy.evaluate` runs (`dsl.compiler.compile_condition`) decide
exactly as the generic ones (`compile_condition_generic`, every operator through `dsl.values`):
the same value or an EvalError with the same message, on random conditions and random calls.

The conditions aim at what the specialization changes: a literal of every type on either side of
every operator (strings, numbers, booleans, null, lists mixing them), field reads of one and two
keys and by index, `path()` and `url()` of the same field used several times in one condition
(values shared through Env.memo), `under` and `glob` with absolute, relative and home patterns,
quantifiers over `shell()` whose bodies are program sets or read other fields, and quantifiers
over argument lists. The calls carry values of every JSON type, NaN, -0.0, nested objects,
shell text the parser refuses and paths that cannot be resolved.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Policy, PolicyError, ast
from dsl.compiler import Env, compile_condition_generic
from dsl.decision import RuleOutcome, decide
from dsl.parser import parse
from dsl.values import EvalError

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


STRINGS = ["", "a", "rm", "ls", "git", "x y", "1", "true", "/home/u", "/home/u/proj", "é", "A", "ab", "null", "a@X.org", "{\"a\": [1]}"]
NUMBERS = ["0", "1", "-1", "2.5", "1e3", "-0.0", "1000", "3"]
FIELDS = ["args.a", "args.b", "args.n", "args.items", "args.items[0]", "args.items[-1]", "args.d.k", "args.d.m",
          'args["x y"]', "context.cwd", "context.user", "tool", "args.flag", "args.d"]
PATH_FIELDS = ["args.p", "args.a", "context.cwd"]
# A Windows cwd with a POSIX home, and the reverse: a path from `~` is of the home's kind, a
# literal directory of the cwd's, so the two may be of different kinds in one call
MIXED_CONTEXTS = [{"cwd": "C:\\Users\\u\\proj", "home": "/home/u"}, {"cwd": "/home/u/proj", "home": "C:\\Users\\u"}]
PATH_RIGHTS = ["/", "/home/u", "/home/u/proj", "/home/u/", "/etc/../home", "proj", "~/proj", "~", "~other/x", "$HOME/x",
               "C:/x", "", "/a/b\\c"]
GLOBS = ["/**/.env", "/home/*/proj/**", "*.py", "**/x", "/", "~/*", "/a/$x", "?", "[ab]*", "/**", "/home/u/proj/*.py", "proj/*",
         "/**/*.py", "/**/.git/**", "/**/proj/**", "/**/*", "/**/*.", "/**/u/proj", "/home/**/*.py", "/**/[ab]", "/**/a?.py",
         "/**/**", "/**/.ssh/**/id*", "/home/u/../u/proj/**"]
PROGRAM_LISTS = ['["rm"]', '["rm", "dd"]', '["ls", "cat", "git", "echo", "cd"]', "[]", '["rm", 3]', '["rm", null]']


def literal_scalar():
    return st.one_of(
        st.sampled_from(STRINGS).map(q),
        st.sampled_from(NUMBERS),
        st.sampled_from(["true", "false", "null"]),
    )


def literal():
    items = st.lists(literal_scalar(), max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
    return st.one_of(literal_scalar(), literal_scalar(), items)


OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "startswith", "endswith", "contains"]


@st.composite
def env_atom(draw) -> str:
    form = draw(st.integers(0, 16))
    field = draw(st.sampled_from(FIELDS))
    if form >= 15:  # arithmetic, joined lists, projections, aggregates (dsl.expressions)
        from policy_gen import extended_comparison

        kind, tokens = draw(extended_comparison())
        text = " ".join(tokens)
        return f"({text})" if kind == "quant" else text
    if form <= 1:  # a string field against string literals (or a list with a stray item)
        strings = st.sampled_from(STRINGS + PATHS[:3]).map(q)
        right = draw(strings | st.lists(strings | st.sampled_from(["null", "1", "true"]), max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"))
        return f"{draw(st.sampled_from(['args.a', 'context.user', 'args.items[0]', 'args.d.k']))} {draw(st.sampled_from(OPS))} {right}"
    if form == 2:  # a number field against number literals
        numbers = st.sampled_from(NUMBERS)
        right = draw(numbers | st.lists(numbers | st.sampled_from(["null", '"1"', "true"]), max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"))
        return f"{draw(st.sampled_from(['args.n', 'args.items[-1]', 'args.d.m']))} {draw(st.sampled_from(OPS))} {right}"
    if form == 3:
        return f"{field} {draw(st.sampled_from(OPS))} {draw(literal())}"
    if form == 4:
        return f"{draw(literal())} {draw(st.sampled_from(['==', '!=', 'contains', 'in', '<', '>']))} {field}"
    if form == 5:
        other = draw(st.sampled_from(FIELDS))
        return f"{field} {draw(st.sampled_from(OPS))} {other}"
    if form == 6:
        return draw(st.sampled_from([f"len({field}) > {draw(st.sampled_from(['0', '2']))}", f"lower({field}) == {q(draw(st.sampled_from(STRINGS)))}",
                                     f"exists({field if field != 'tool' else 'args.a'})", "args.flag", "args.d.k"]))
    if form == 7:
        p = draw(st.sampled_from(PATH_FIELDS))
        return f"path({p}) under {q(draw(st.sampled_from(PATH_RIGHTS)))}"
    if form == 8:
        p = draw(st.sampled_from(PATH_FIELDS))
        return f"path({p}) glob {q(draw(st.sampled_from(GLOBS)))}"
    if form == 9:
        p = draw(st.sampled_from(PATH_FIELDS))
        part = draw(st.sampled_from(["", ".name", ".ext", ".parent", ".text", ".parts"]))
        op = draw(st.sampled_from(["==", "under", "glob", "startswith", "in", "contains"]))
        right = draw(st.sampled_from(PATH_RIGHTS + ['[".env", "x"]', '["home", "u"]'] if op != "glob" else GLOBS))
        right = right if right.startswith("[") else q(right)
        return f"path({p}){part} {op} {right}"
    if form == 10:
        return f"url(args.u).{draw(st.sampled_from(['host', 'port', 'scheme', 'path']))} {draw(st.sampled_from(['==', 'endswith', 'glob', '!=']))} " + (
            draw(st.sampled_from([q("docs.python.org"), q("*.example.com"), q(".org"), "443", "null"]))
        )
    if form == 11:
        return draw(st.sampled_from([
            "len(shell(args.cmd)) > 1", 'shell(args.cmd)[0].program == "rm"', 'shell(args.cmd)[-1].argv startswith ["git"]',
            "path(args.p) under context.cwd", "path(args.p) under args.a", "path(args.p) glob \"*.env\"",
            # the plan's path(x).secret, lower() of a value, and `exists(x) and ...` kept inline for a missing x
            "path(args.p).secret", "not path(args.a).secret", "exists(args.p) and path(args.p).secret",
            "exists(args.a) and path(args.a).secret and path(args.a) under context.cwd",
            "(exists(args.p) and path(args.p).secret) or (exists(args.a) and path(args.a).secret)",
            "lower(path(args.p).name) == \"head\"", "lower(path(args.p).ext) in [\".pem\", \"\"]",
            "exists(args.d.k) and lower(args.d.k) == \"a\"", "lower(lower(args.a)) startswith \"a\"",
        ]))
    if form == 12:
        return f"{field} glob {q(draw(st.sampled_from(GLOBS)))}"
    if form == 13:
        return f"{field} {draw(st.sampled_from(['startswith', 'endswith']))} [{', '.join(q(s) for s in draw(st.lists(st.sampled_from(STRINGS), max_size=3)))}]"
    return quantifier_text(draw)


def quantifier_text(draw) -> str:
    kind = draw(st.sampled_from(["any", "all"]))
    if draw(st.booleans()):
        body = draw(st.sampled_from([
            "c.program == \"rm\"", "c.program != \"ls\"", f"c.program in {draw(st.sampled_from(PROGRAM_LISTS))}",
            f"c.program not in {draw(st.sampled_from(PROGRAM_LISTS))}", "c.flags contains \"force\"", "c.flags contains \"recursive\"",
            "c.argv startswith [\"git\", \"push\"]", "c.argv endswith [\"/\"]", "c.argv == [\"ls\"]", "len(c.args) > 0", "c.dynamic",
            "c.nested", "c.wrappers contains \"sudo\"", "c.program == args.a", "c.program in args.items",
            "(c.program == \"rm\" and c.flags contains \"force\")", "(c.program == \"git\" or c.nested)", "not c.program == \"rm\"",
            "path(c.args[0]) under \"/etc\"", "c.program startswith \"r\"", "c.program < \"m\"", "c.redirects contains \"/dev/null\"",
            "(any x in args.items: x == c.program)", "lower(c.program) == \"rm\"", "c.text contains \"rm\"", "exists(c.program)",
        ]))
        return f"({kind} c in shell(args.cmd): {body})"
    body = draw(st.sampled_from([
        "x == 1", "x > 2", "x in [1, 2, \"a\"]", "x startswith \"a\"", "x", "x == args.a", "x.k == 1", "len(x) > 1",
        "x contains \"a\"", "x == null", "not x == true", "(x == 1 or x == \"a\")", "x[0] == 1", "path(x) under \"/home\"",
    ]))
    return f"({kind} x in {draw(st.sampled_from(['args.items', 'args.a', 'args.d', 'path(args.p).parts']))}: {body})"


def conditions():
    return st.recursive(
        env_atom(),
        lambda inner: st.one_of(
            inner.map(lambda c: f"not ({c})"),
            st.lists(inner, min_size=2, max_size=4).map(lambda cs: " and ".join(f"({c})" for c in cs)),
            st.lists(inner, min_size=2, max_size=4).map(lambda cs: " or ".join(f"({c})" for c in cs)),
        ),
        max_leaves=6,
    )


COMMANDS = ["ls -la", "rm -rf /", "sudo rm -fr /tmp/x", "git push --force origin main", "echo 'unterminated", "cd src && ls",
            "cat <<'EOF' | sh\nrm -rf /\nEOF", "x=$(whoami); echo $x", "", "PATH=/tmp; ls", "ls > /dev/null", "dd if=/dev/zero",
            "bash -c \"$X\"", "a\x00b", "find . -exec rm {} ;", "(("]
PATHS = ["/home/u/proj/.env", ".env", "~/x", "src/../../etc/passwd", "/home/u/projX/a.py", "", "/", "/etc/passwd", "$HOME/x",
         "C:\\x", "/home/u/proj/", "/home/u/proj/a.py", "~bob/x", "/a//b/./c", "/a/..", "/a/.", "/..", "/.", "//", "/a/../b",
         "/.env", "/a/.b./c", "/home/u/.git/config", "/x.py", "/home/u/proj/.git", "/a\x00b", "/a/`b`", "/home/./u", "/ab.py",
         "/home/u/proj/sub/x.py", "/home/u/.ssh/id_rsa", "/a\\b", "/home/u/x.env", "/a/b.git/c", "/a/xproj/b",
         "/a/b.pyc", "/proj", "/home/u/proj/HEAD", "/home/u/.SSH/ID_RSA", "/proc/1/environ", "/a/.config/gh/x"]
URLS = ["https://docs.python.org/3/", "https://a.example.com/x", "http://EXAMPLE.com.:443", "not a url", "https://user@evil.org/"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 4), st.sampled_from([2.5, 1000.0, -0.0, math.nan, 1e3, 2**70]),
    st.sampled_from(STRINGS + PATHS[:4]),
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["k", "m", "a"]), inner, max_size=3), max_leaves=6)


@st.composite
def call_args(draw) -> tuple[str, dict, dict]:
    args: dict = {}
    for key in ["a", "b", "n", "items", "d", "x y", "cmd", "p", "u", "flag", "o"]:
        if draw(st.integers(0, 9)) == 3:
            continue  # a missing field, now and then
        odd = draw(st.integers(0, 9)) == 3  # now and then a value of another type
        if key == "cmd":
            value = draw(SCALARS if odd else st.sampled_from(COMMANDS))
        elif key == "p":
            value = draw(SCALARS if odd else st.sampled_from(PATHS))
        elif key == "u":
            value = draw(SCALARS if odd else st.sampled_from(URLS))
        elif key == "items":
            value = draw(st.lists(SCALARS, max_size=4) | st.sampled_from([["rm", "ls"], ["a", 1], ["git", "push"], [1, 2]]))
        elif odd or key in ("b", "x y"):
            value = draw(JSON)
        elif key == "a":
            value = draw(st.sampled_from(STRINGS + PATHS))
        elif key == "n":
            value = draw(st.sampled_from([0, 1, -1, 2.5, 3, 1000, -0.0, math.nan, 2**70]))
        elif key == "flag":
            value = draw(st.booleans())
        elif key == "o":  # objects for projections: args.o[*].price, args.o[*].tags[*]
            item = st.fixed_dictionaries({"price": st.sampled_from([0.1, 0.2, 250.1, 3, -1, 2**70, math.nan, "x"]),
                                          "tags": st.lists(st.sampled_from(["a", 1, None]), max_size=2)})
            value = draw(st.lists(item, max_size=3) | st.lists(item | SCALARS, max_size=3))
        elif key == "d":
            value = draw(st.dictionaries(st.sampled_from(["k", "m"]), SCALARS, max_size=2))
        else:
            value = draw(JSON)
        args[key] = value
    context = draw(st.sampled_from([
        {"cwd": "/home/u/proj", "user": "a"}, {"cwd": "/home/u/proj", "home": "/home/v", "user": "rm"}, {}, {"cwd": 3, "user": 1}, {"cwd": "rel"},
        *MIXED_CONTEXTS,
    ]))
    return draw(st.sampled_from(["t", "u"])), args, context


def _loads(condition: str) -> bool:
    try:
        Policy.from_text(f"allow t when {condition}")
    except PolicyError:
        return False
    return True


def outcome(fn, env):
    try:
        value = fn(env)
    except EvalError as exc:
        return ("error", exc.message)
    return ("value", value, type(value))


@PROPERTY
@given(st.lists(conditions(), min_size=1, max_size=4), st.lists(call_args(), min_size=1, max_size=6))
def test_specialized_predicates_agree_with_the_generic_ones(drawn, calls):
    valid = [c for c in drawn if _loads(c)]  # the checker refuses some (a boolean ordered, ...)
    if not valid:
        return
    effects = ["allow t, u", 'deny t, u, "*"', "ask t, u"]
    text = 'home "/home/u"\n' + "\n".join(
        f"{effects[i % 3]} when {c}" + (' reason "no"' if i % 3 == 1 else "") for i, c in enumerate(valid)
    )
    policy = Policy.from_text(text, "spec.policy")
    nodes = parse(text).of_type(ast.Rule)
    generic = [compile_condition_generic(n.condition) for n in nodes]
    for tool, args, context in calls:
        # the rules of one call share one memo, as in Policy.evaluate
        shared = Env(tool, args, context, home=policy.home, memo={})
        for rule, reference in zip(policy.rules, generic):
            plain = Env(tool, args, context, home=policy.home)
            expected = outcome(reference, plain)
            assert outcome(rule.test, plain) == expected, (rule.condition_text, args, context)
            assert outcome(rule.test, shared) == expected, (rule.condition_text, args, context)
        # and the decision (by the generated plan, the predicates, or both) is what the generic
        # predicates give, on a first call of the tool and on later ones
        expected_decision = reference_decision(policy, generic, tool, args, context)
        assert policy.evaluate(tool, args, context) == expected_decision
        assert policy.evaluate(tool, args, context) == expected_decision


def reference_decision(policy: Policy, generic: list, tool: str, args: dict, context: dict):
    """What Policy.evaluate decides, with the generic predicates and no plan."""
    outcomes = []
    for rule in policy.rules_for(tool):
        error = None
        if rule.test is None:
            holds = True
        else:
            result = outcome(generic[rule.order], Env(tool, args, context, home=policy.home))
            holds, error = (result[1], None) if result[0] == "value" else (False, result[1])
        if holds is True or error is not None:
            outcomes.append(RuleOutcome(rule=rule.rule_id, line=rule.line, effect=rule.effect, counted=holds or rule.effect != "allow",
                                        error=error, reason=rule.reason, condition=rule.condition_text))
    return decide(outcomes, policy._requirements, policy.default, policy.name, policy.digest)


def test_the_specialized_forms_are_exercised():
    """A few hand-picked conditions and calls where the fast paths and the fallbacks meet."""
    cases = [
        ('args.a in ["x", 1]', {"a": "y"}),  # a string not found, a number in the list: mismatch error
        ('args.a in ["x", null]', {"a": "y"}),  # null never mismatches
        ("args.a in [1, 2.0]", {"a": 2}),
        ("args.a in [1, 2.0]", {"a": True}),  # a boolean is not a number
        ("args.a == 1", {"a": True}),
        ("args.a == 1", {"a": 1.0}),
        ("args.a > 1", {"a": math.nan}),
        ('args.a > "b"', {"a": 3}),
        ('args.a contains "x"', {"a": ["x", 3]}),
        ('args.a contains "x"', {"a": ["y", 3]}),
        ('args.a contains "x"', {"a": ["y", None]}),
        ('args.a startswith ["git", "push"]', {"a": ["git", "push", "x"]}),
        ('args.a endswith ["x"]', {"a": []}),
        ('args.a startswith ["1"]', {"a": [1]}),
        ('path(args.p) under "/"', {"p": "rel"}),
        ('path(args.p) under "/home/u"', {"p": "/home/u"}),
        ('path(args.p) under "/home/u"', {"p": "/home/uX"}),
        ('path(args.p) glob "/"', {"p": "/"}),
        ('(any c in shell(args.cmd): c.program in ["rm", 3])', {"cmd": "ls"}),
        ('(all c in shell(args.cmd): c.program in ["ls"])', {"cmd": "echo 'x"}),
        ('(all c in shell(args.cmd): c.program in ["ls"])', {"cmd": ""}),
        ("args.d.k == 1", {"d": {"m": 1}}),
        ("args.d.k == 1", {"d": [1]}),
    ]
    for condition, args in cases:
        policy = Policy.from_text(f"allow t when {condition}", "spec.policy")
        (node,) = parse(f"allow t when {condition}").of_type(ast.Rule)
        reference = compile_condition_generic(node.condition)
        for memo in (None, {}):
            env = Env("t", args, {"cwd": "/home/u/proj"}, memo=memo)
            assert outcome(policy.rules[0].test, env) == outcome(reference, env), (condition, args)


GRID_LITERALS = ['"a"', '""', '"ab"', '"/home/u"', "1", "0", "-0.0", "2.5", "true", "false", "null", "[]", '["a"]', '["a", "b"]',
                 '["a", 1]', '["a", null]', "[1, 2.5]", "[1, true]", "[true]", "[null]", '["/home/u", "x"]', '[["a"]]']
GRID_VALUES = ["a", "", "ab", "b", "/home/u", 1, 0, -0.0, 1.0, 2.5, math.nan, 2**70, True, False, None, [], ["a"], ["a", "b"],
               ["a", 1], ["b", None], [1], [True], ("a",), {"a": 1}, {}, [["a"]]]
GRID_OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "startswith", "endswith", "contains", "glob"]


def _grid_check(condition: str, envs: list[Env]) -> None:
    try:
        policy = Policy.from_text(f"allow t when {condition}\ndeny t when {condition} reason \"r\"", "grid.policy")
    except PolicyError:
        return
    (node, _) = parse(policy.source_text).of_type(ast.Rule)
    reference = compile_condition_generic(node.condition)
    for env in envs:
        assert outcome(policy.rules[0].test, env) == outcome(reference, env), (condition, env.args)
        # the generated plan decides as the predicates do
        expected = reference_decision(policy, [reference, reference], "t", env.args, env.context)
        assert policy.evaluate("t", env.args, env.context) == expected, (condition, env.args)


def test_every_operator_with_every_literal_agrees_on_values_of_every_type():
    envs = [Env("t", {"v": v}, {"cwd": "/home/u"}) for v in GRID_VALUES] + [Env("t", {}, {})]
    for op in GRID_OPS:
        for lit in GRID_LITERALS:
            _grid_check(f"args.v {op} {lit}", envs)
            _grid_check(f"{lit} {op} args.v", envs)
            _grid_check(f"path(args.v) {op} {lit}", envs)


SHELL_BODIES = [
    'c.program == "rm"', 'c.program != "rm"', 'c.program == "ls"', 'c.program != "ls"', 'c.program == ""',
    *(f"c.program {op} {lst}" for op in ("in", "not in") for lst in PROGRAM_LISTS + ['["rm", "ls", "cd"]', '[""]']),
    'c.flags contains "force"', 'c.argv startswith ["git", "push"]', 'c.argv endswith ["/"]', "c.dynamic",
    'c.program == args.a', 'path(c.args[0]) under "/tmp"', '(c.program == "rm" and c.flags contains "recursive")',
]


def test_quantifier_bodies_over_every_command_agree():
    envs = [Env("t", {"cmd": cmd, "a": "rm"}, {"cwd": "/home/u"}) for cmd in COMMANDS + ["rm -rf / && ls", "ls; ls", 3, None]]
    envs.append(Env("t", {}, {}))
    for kind in ("any", "all"):
        for body in SHELL_BODIES:
            _grid_check(f"{kind} c in shell(args.cmd): {body}", envs)
            _grid_check(f"not ({kind} c in shell(args.cmd): {body})", envs)


def test_path_subjects_agree_for_every_path_and_pattern():
    envs = [Env("t", {"p": p}, ctx) for p in PATHS + [3, None, "/home/u/proj/sub/.env", "/home/u/.ssh/id"]
            for ctx in ({"cwd": "/home/u/proj"}, {}, {"cwd": "/home/u/proj", "home": "/home/u"})]
    for right in PATH_RIGHTS:
        _grid_check(f"path(args.p) under {q(right)}", envs)
    for pattern in GLOBS:
        _grid_check(f"path(args.p) glob {q(pattern)}", envs)
        _grid_check(f"path(args.p) glob {q(pattern)} and path(args.p) under \"/home\"", [e._replace(memo={}) for e in envs])


def test_nested_fields_and_exists_agree_on_every_shape():
    shapes = [None, 1, "a", [1], {"k": 1}, {"k": {"m": "a"}}, {"k": None}, {"k": [1]}, {"m": 1}, {}]
    envs = [Env("t", {"v": v}, {"cwd": "/"}) for v in shapes] + [Env("t", {}, {})]
    for field in ("args.v", "args.v.k", "args.v.k.m", "context.cwd", "context.v.k"):
        for condition in (f"exists({field})", f"not exists({field})", f"{field} == 1", f"{field} == null", f"{field} != \"a\"",
                          f"exists({field}) and {field} == 1", f"{field}"):
            _grid_check(condition, envs)


PLAN_SHAPES = [
    "path(args.p).secret", "not path(args.p).secret", "exists(args.p) and path(args.p).secret",
    "exists(args.p) and path(args.p).secret and path(args.p) under context.cwd",
    "(exists(args.p) and path(args.p).secret) or (exists(args.q) and path(args.q).secret)",
    "exists(args.q) and lower(args.q) == \"head\"", "lower(path(args.p).name) == \"head\"",
    "lower(path(args.p).name) in [\"head\", \".env\"]", "lower(args.p) contains \".env\"",
]


@pytest.mark.parametrize("condition", PLAN_SHAPES)
def test_the_plans_secret_lower_and_exists_guards_decide_as_the_predicates(condition):
    values_ = PATHS + [None, 3, ["/x"], {"k": 1}]
    contexts = [{"cwd": "/home/u/proj"}, {"cwd": "C:\\proj"}, {}, {"cwd": "rel"}, *MIXED_CONTEXTS]
    envs = [Env("t", {"p": p}, c) for p in values_ for c in contexts]
    envs += [Env("t", {"p": p, "q": q}, {"cwd": "/home/u/proj"}) for p in values_[:12] for q in values_]
    envs += [Env("t", {}, c) for c in contexts] + [Env("t", {"q": q}, {}) for q in values_]
    _grid_check(condition, envs)


# Loops over commands in the plans: bodies that read a command's list fields and paths made from
# them (the sample policy's shell rules), where a value the loop cannot compute exactly (a path()
# that fails, a Windows path, an index out of range) leaves the rule to its predicate.
LOOP_BODIES = [
    "path(c.cwd) under context.cwd and (all p in c.paths: path(p, c.cwd) under context.cwd and not path(p, c.cwd).secret)",
    'any a in c.args: a in ["/", "~", "*"] or (a startswith "/" and path(a) == "/")',
    'c.program == "rm" and (any a in c.args: not (path(a, c.cwd) under context.cwd))',
    'c.program != "cd" or (len(c.args) == 1 and c.args[0] != "-")', 'c.args[-1] == "x"', 'c.args[2] == "/"',
    "c.program != \"git\" or path(c.cwd) == path(context.cwd)", "path(c.cwd) != path(context.cwd)",
    "any r in c.redirects: path(r, c.cwd).secret", 'all r in c.redirects: r == "/dev/null"',
    'any a in c.args: path(a, "/").secret or path(a, "/").parts contains ".git" or lower(path(a, "/").name) == "head"',
    'any a in c.args: path(a, c.cwd) under "/home/u"', "c.read_only and not c.dynamic and len(c.wrappers) == 0",
    'not c.dynamic and c.cwd != "" and ((any p in c.paths: path(p, c.cwd).secret) or (any r in c.redirects: path(r, c.cwd).secret))',
    'any a in c.args: any b in c.paths: a == b', 'any a in c.args: path(a, args.base) under context.cwd',
    'any a in c.args: lower(a) == "head" or a glob "*.env"',
]
LOOP_COMMANDS = COMMANDS + [
    "cd /tmp && cat x", "cat ~/.ssh/id_rsa", "rm -rf ../x", "rm -rf /home/u/proj/build", "echo \"\" > .env", "cd \"$D\" && ls",
    "ls C:\\\\x", "cat ./a/../b .git/HEAD", "cd - && ls", "git -C x status", "git status", "cat /etc/passwd > /dev/null",
    "ls 2>/dev/null", "cd sub && git status", "rm -rf ~ x", "cat a b c x", "cd x; cd y; rm -r z",
    "cat C:/proj/.env", "cat D:\\\\x", "cd .. && git status", "cat sub/.SSH/id_rsa", "cd C:/proj && git status",
]
LOOP_CONTEXTS = [{"cwd": "/home/u/proj"}, {"cwd": "/home/u/proj", "home": "/home/u"}, {}, {"cwd": "C:\\proj"}, {"cwd": "rel"},
                 {"cwd": "/home/u/proj/"}, {"cwd": "/"}, {"cwd": "c:\\Proj"}, {"cwd": "\\\\srv\\share\\p"}, *MIXED_CONTEXTS]


@pytest.mark.parametrize("body", LOOP_BODIES)
def test_the_plans_loops_over_commands_decide_as_the_predicates(body):
    envs = [Env("t", {"cmd": cmd, "base": base}, ctx) for cmd in LOOP_COMMANDS for ctx in LOOP_CONTEXTS
            for base in ("/home/u", 3)]
    envs.append(Env("t", {}, {"cwd": "/home/u/proj"}))
    for kind in ("any", "all"):
        _grid_check(f"{kind} c in shell(args.cmd): {body}", envs)
        _grid_check(f"not ({kind} c in shell(args.cmd): {body})", envs)


def test_the_loops_run_inline_in_the_plan():
    """The sample's shell rules are loops in the generated function, not calls of predicates."""
    policy = Policy.load(SAMPLES / "coding-agent.policy")
    source = policy._plan("Bash")[2].source
    assert "for c" in source and "(P, env, " in source and " for i" in source
    assert source.count("except U:") >= 9, source  # every shell rule of the sample is a loop


def test_a_rule_that_raises_in_the_plan_leaves_the_later_rules_to_the_plan():
    text = 'allow t when path(args.p) under "/home"\ndeny t when args.n == 1 reason "one"\nask t when args.s == "x"'
    policy = Policy.from_text(text, "p.policy")
    decision = policy.evaluate("t", {"p": "rel", "n": 1, "s": "x"}, {})
    assert decision.effect == "deny"
    assert [(o.rule, o.error is not None) for o in decision.outcomes] == [
        (policy.rules[0].rule_id, True), (policy.rules[1].rule_id, False), (policy.rules[2].rule_id, False)]
    assert policy.evaluate("t", {"p": "rel", "n": 1, "s": "x"}, {}) is decision  # kept in the decision cache


# The plans' variant for a call whose cwd is a Windows path: paths are WinPathValues, compared by
# drive and folded parts; a shape it cannot write exactly (a glob) is left to the predicate.
WINDOWS_SHAPES = [
    "path(args.p) under context.cwd", "not (path(args.p) under context.cwd)", 'path(args.p) under "/"',
    'path(args.p) under "/proj"', 'path(args.p) under "/home/u"', 'not (path(args.p) under "/home/u/proj")', "path(args.p).secret", "exists(args.p) and path(args.p).secret",
    '(exists(args.p) and path(args.p).secret) or (exists(args.q) and path(args.q).secret)',
    'path(args.p).parts contains ".git" or path(args.p).parts contains "Proj"',
    'lower(path(args.p).text) contains "/.git/" or lower(path(args.p).text) contains "\\\\.git\\\\"',
    'lower(path(args.p).name) in ["head", ".env", "ß"]', 'path(args.p).name == "HEAD"', 'path(args.p).ext == ".PY"',
    'path(args.p) glob "/**/.git/**"', "path(args.p) under context.cwd and not path(args.p).secret",
    'path(args.p).parts startswith ["proj"]',
]
WINDOWS_PATHS = ["C:\\proj\\a.py", "c:\\PROJ\\.Git\\config", "C:/proj/.env", "\\\\server\\share\\x", "D:\\other", "C:\\proj",
                 "proj\\x", "..\\x", "/x", "C:\\proj\\HEAD", "C:\\Users\\me\\.ssh\\id_rsa", "C:\\proj\\ä.PY", "C:\\proj\\ß",
                 "C:\\proj\\a:b", "C:\\proj\\con", "", 3, None, "~\\x", "C:\\proj\\x. ", "%USERPROFILE%\\x", "/home/u/proj/a", "~/proj/a", "~"]
WINDOWS_CONTEXTS = [{"cwd": "C:\\proj"}, {"cwd": "c:\\Proj\\"}, {"cwd": "\\\\server\\share"},
                    {"cwd": "C:\\proj", "home": "C:\\Users\\me"}, {"cwd": "/home/u/proj"}, *MIXED_CONTEXTS]


@pytest.mark.parametrize("condition", WINDOWS_SHAPES)
def test_the_plans_windows_variant_decides_as_the_predicates(condition):
    envs = [Env("t", {"p": p, "q": q}, c) for p in WINDOWS_PATHS for q in ("C:\\x\\.env", 3) for c in WINDOWS_CONTEXTS]
    envs += [Env("t", {}, c) for c in WINDOWS_CONTEXTS]
    _grid_check(condition, envs)


def test_a_posix_literal_under_a_windows_cwd_is_read_in_the_calls_context():
    # a `~` path with a POSIX home and a Windows cwd was allowed by the fast `under`: the literal
    # was read as POSIX and the path as Windows, and the two never compared as the reference does
    policy = Policy.from_text('''home "/home/u"
default ask
ask Read when not (path(args.file_path) under "/home/u/proj") reason "outside"
allow Read
''')
    decision = policy.evaluate("Read", {"file_path": "~/proj/a"}, {"cwd": "C:\\Users\\u\\proj"})
    assert decision.effect == "ask"


def test_the_windows_variant_is_written_inline():
    policy = Policy.load(SAMPLES / "coding-agent.policy")
    source = policy._plan("Edit")[2].source
    assert "if not W:" in source and "_win_under(" in source, source


def test_a_rule_the_plan_cannot_write_leaves_no_type_check_assumed_for_the_next():
    """Found by CI's hypothesis run (2026-12-07): the deny rule's `and` has no shape the plan
    writer can write (a path test after two comparisons), and giving up on it left its first
    operand's guard (`args.a` is a number) assumed; the ask rule after it then compared the
    string "" with 0 without its type check, got false instead of the error that makes an ask
    count, and the call was allowed. Fail closed: it asks."""
    text = ('home "/home/u"\n'
            'allow t when args.a == ""\n'
            'deny t when (args.a == 0) and (args.a == "") and (path(args.p) under "proj") reason "no"\n'
            'ask t when (args.a != "") or (args.a == 0)\n')
    policy = Policy.from_text(text, "spec.policy")
    for _ in range(3):  # the first call and the later ones (the plan is built on first use)
        decision = policy.evaluate("t", {"a": "", "p": "/home/u/proj/x"}, {"cwd": "/home/u/proj"})
        assert decision.effect == "ask", decision
        assert any(o.error == "compares a string with a number" for o in decision.outcomes)
