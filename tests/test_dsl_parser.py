"""Property tests for loading policies: the parser and checker never crash, generated conditions
load and agree with a reference evaluator, and every diagnostic says where it is.

(a) Any text either loads or raises `PolicyError`, never another exception: random text, token
    soup over the language's own vocabulary, and valid policies with characters inserted, deleted
    and replaced.
(b) Random condition ASTs, rendered to text, load and evaluate to a Decision, and the Decision
    agrees with `Oracle`, an independent evaluator written from the language's rules (strict
    typing, null equals only null, Kleene logic, an error never allows).
(c) Every diagnostic renders as `name:line:col: severity: message`, with a position inside the text.
"""

from __future__ import annotations

import fnmatch
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from dsl import Decision, Policy, PolicyError
from dsl.parser import parse

ROOT = Path(__file__).resolve().parent.parent
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = "policies/fuzz.policy"

# --- (a) nothing but PolicyError -------------------------------------------------------------


def load_or_policy_error(text: str, name: str = SOURCE) -> Policy | None:
    """Policy.from_text, with any PolicyError turned into None. Any other exception propagates and
    fails the test."""
    try:
        return Policy.from_text(text, name)
    except PolicyError as exc:
        assert exc.diagnostics, "a PolicyError must carry at least one diagnostic"
        assert exc.errors, "a PolicyError must carry at least one error"
        return None


VALID_POLICIES = [
    'policy "small"\ndefault deny "Nothing else."\nallow read_file\n',
    """# a policy using most of the language
policy "tour"
default ask "A person decides." approvers 1 from leads decisions approve, reject timeout 2h
group leads = ["ann", "bob"]
allow read_file, list_dir, mcp__fs__read_*
allow "my tool" when args["a b"].c[-1] == 3 and not exists(context.dry_run)
deny rm when args.path startswith "/" or args.path glob "*.env" reason "Delete inside the project only."
ask deploy when lower(args.env) in ["prod", "production"] or len(args.targets) > 2
  reason "Production deploys need a lead." approvers 2 from leads timeout 1h30m else reject "Expired." id "prod"
ask pay when args.amount >= 100.5 and args.currency != null approvers 1 from ["ann"] decisions approve, edit, reject
""",
]
VALID_POLICIES += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "samples").glob("*.policy"))]

VOCABULARY = [
    "policy", "default", "group", "allow", "deny", "ask", "when", "reason", "approvers", "from",
    "decisions", "timeout", "else", "id", "and", "or", "not", "in", "startswith", "endswith",
    "contains", "glob", "true", "false", "null", "tool", "args", "context", "len", "lower", "exists",
    "approve", "edit", "reject", "respond", "==", "!=", "<", "<=", ">", ">=", "=", "(", ")", "[", "]",
    ",", ".", "*", "?", "#", '"x"', '"a b"', '""', "0", "1", "-1", "2.5", "1e3", "4h", "30m", "0s",
    "read_file", "mcp__*", "admins", "a", "\n", "'", "@", "\\", "aprovers", "alow", "wen",
]


def mutate(text: str, ops: list[tuple[str, float, float, str]]) -> str:
    """Apply insert / delete / replace / duplicate operations at fractional positions."""
    for kind, at, span, piece in ops:
        n = len(text)
        i = min(n, int(at * (n + 1)))
        j = min(n, i + 1 + int(span * 12))
        if kind == "insert":
            text = text[:i] + piece + text[i:]
        elif kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "replace":
            text = text[:i] + piece + text[i + 1 :]
        else:  # duplicate a short slice
            text = text[:j] + text[i:j] + text[j:]
    return text


PIECES = st.one_of(st.sampled_from(VOCABULARY), st.characters(), st.sampled_from(list('"()[],.=<>!#*?\n \t-_\\')))
MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["insert", "delete", "replace", "duplicate"]), st.floats(0, 1), st.floats(0, 1), PIECES),
    min_size=1,
    max_size=6,
)


def exercise(policy: Policy) -> None:
    """Evaluate a few calls on a loaded policy: each must give a Decision."""
    tools = {sel for rule in policy.rules for sel in rule.selectors} or {"t"}
    for tool in sorted(tools)[:8]:
        for args in ({}, {"path": "/x", "amount": 5, "command": "ls"}):
            decision = policy.evaluate(tool.replace("*", "x").replace("?", "y"), args, {"cwd": "/x"})
            assert isinstance(decision, Decision)
            assert decision.effect in ("allow", "deny", "ask")


@FAST
@given(st.text(max_size=300))
def test_random_text_loads_or_raises_policy_error(text):
    policy = load_or_policy_error(text)
    if policy is not None:
        exercise(policy)


@FAST
@given(st.lists(st.sampled_from(VOCABULARY), max_size=40).map(" ".join))
def test_token_soup_loads_or_raises_policy_error(text):
    policy = load_or_policy_error(text)
    if policy is not None:
        exercise(policy)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID_POLICIES), MUTATIONS)
def test_mutated_valid_policies_load_or_raise_policy_error(original, ops):
    text = mutate(original, ops)
    policy = load_or_policy_error(text)
    if policy is not None:
        exercise(policy)


@pytest.mark.parametrize("text", VALID_POLICIES, ids=lambda t: t.split("\n")[0][:30])
def test_the_unmutated_corpus_is_valid(text):
    """The mutation test only means something if what it mutates is valid to begin with."""
    exercise(Policy.from_text(text, SOURCE))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("allow t when args.n == " + "9" * 5000, "is too long"),
        ("allow t when args.items[" + "9" * 5000 + "] == 1", "is too long"),
        ("ask t approvers " + "9" * 5000, "is too long"),
        ("ask t timeout " + "9" * 5000 + "m", "is too long"),
        ("allow t when " + "not " * 2000 + "true", "nests more than 100 levels"),
        ("allow t when " + "lower(" * 300 + "args.s" + ")" * 300 + ' == "a"', "nests more than 100 levels"),
        ("allow t\u2028 when args.a == 1\n $", "unexpected character"),
        ("# a\u2028b\u0085c\x0cd\nallow t when args.a == 1 @", "unexpected character '@'"),
        ("\r'", "unexpected character"),
        ("# \ud800\nallow t", "lone surrogate"),
    ],
    ids=["long-int", "long-index", "long-quorum", "long-duration", "deep-not", "deep-calls", "u2028", "line-separators", "bare-cr", "surrogate"],
)
def test_inputs_that_used_to_crash_the_loader_are_diagnostics(text, message):
    """Each of these raised something other than PolicyError before (VisitError, RecursionError,
    IndexError, UnicodeEncodeError)."""
    with pytest.raises(PolicyError) as info:
        Policy.from_text(text, SOURCE)
    assert any(message in d.message for d in info.value.errors), info.value.render()


def test_a_long_or_chain_loads_and_evaluates():
    """Lark's recursive transformer overflowed the stack at about 600 operands; the AST is flat."""
    text = "allow t when " + " or ".join(f"args.n == {i}" for i in range(3000))
    policy = Policy.from_text(text, SOURCE)
    assert policy.evaluate("t", {"n": 2999}).effect == "allow"
    assert policy.evaluate("t", {"n": -1}).effect == "ask"


def _text_of(text: str, span) -> str:
    lines = text.split("\n")
    if span.line == span.end_line:
        return lines[span.line - 1][span.column - 1 : span.end_column]
    middle = lines[span.line : span.end_line - 1]
    return "\n".join([lines[span.line - 1][span.column - 1 :], *middle, lines[span.end_line - 1][: span.end_column]])


def test_spans_cover_a_node_s_text_and_parentheses_belong_to_the_enclosing_node():
    """The parser builds the AST as it reduces, with no parse tree, and computes each span from the
    first and last token: keywords count, a parenthesized operand's own span leaves the
    parentheses out, and the node around it takes them in. The spans of a rule reach across lines."""
    text = 'ask t when not (args.a == 1) and ((len(args.b))) > 2 or any c in shell(args.c): (c.program == "rm")\n  reason "r"'
    rule = parse(text).statements[0]
    assert _text_of(text, rule.span) == text
    or_ = rule.condition
    assert _text_of(text, or_.span) == text.split(" when ")[1].split("\n")[0]
    and_, quantifier = or_.operands
    not_, compare = and_.operands
    assert _text_of(text, not_.span) == "not (args.a == 1)"
    assert _text_of(text, not_.operand.span) == "args.a == 1"
    assert _text_of(text, compare.span) == "((len(args.b))) > 2"
    assert _text_of(text, compare.left.span) == "len(args.b)"
    assert _text_of(text, quantifier.span) == 'any c in shell(args.c): (c.program == "rm")'
    assert _text_of(text, quantifier.body.span) == 'c.program == "rm"'
    assert _text_of(text, rule.clauses[0].span) == 'reason "r"'


def test_twenty_thousand_nested_nots_parse_without_recursion():
    """The callbacks run as the LALR parser reduces, so no step of building the AST recurses; the
    checker then refuses the depth with a diagnostic at its place."""
    text = "allow t when " + "not " * 20000 + "args.a == 1"
    condition = parse(text).statements[0].condition
    assert type(condition).__name__ == "Not"
    with pytest.raises(PolicyError, match="nests more than"):
        Policy.from_text(text, SOURCE)


def test_line_separators_other_than_newline_do_not_move_positions():
    """Lark counts lines at \\n only; a U+2028 in a comment must not shift the reported line, nor
    the condition text recorded for a rule."""
    text = "# one\u2028two\x0bthree\nallow t when args.a == 1 id \"r\"\n"
    policy = Policy.from_text(text, SOURCE)
    outcome = policy.evaluate("t", {"a": 1}).outcomes[0]
    assert outcome.line == 2
    assert outcome.condition == "args.a == 1"
    with pytest.raises(PolicyError) as info:
        Policy.from_text(text + "deny x when args.a == 1 reason 7\n", SOURCE)
    (error,) = info.value.errors
    assert (error.span.line, error.span.column) == (3, 32)
    assert f"{SOURCE}:3:32: error:" in info.value.render()


# --- (b) generated conditions: load, evaluate, agree with a reference evaluator --------------

# A condition is a small tree of tuples:
#   ("bool", True|False)            ("path", root, keys)           ("lit", value)
#   ("list", [values])              ("call", name, arg)            ("cmp", op, left, right)
#   ("not", x)                      ("and", [xs])                  ("or", [xs])
#   ("paren", x)  (only changes the rendering)

KEYS = ["a", "b", "flag", "items", "reason", "in", "x y"]
STRINGS = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6) | st.sampled_from(["", "a", "ab", "A", "/tmp/", ".env", "x y"])
NUMBERS = st.integers(-5, 5) | st.floats(-10, 10, allow_nan=False, allow_infinity=False) | st.sampled_from([0.5, 1e3, 2**70])
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, STRINGS)


@st.composite
def paths(draw):
    # Mostly one key from the few that ARGS usually holds, so that paths resolve often enough for
    # every pairing of operator and value type to come up; sometimes deeper paths and indexes.
    root = draw(st.sampled_from(["args"] * 5 + ["context"]))
    first = draw(st.sampled_from(["a", "b", "flag"] * 5 + KEYS))
    deeper = draw(st.integers(0, 3)) == 0
    rest = draw(st.lists(st.sampled_from(KEYS) | st.integers(-2, 2), min_size=1, max_size=2)) if deeper else []
    return ("path", root, (first, *rest))


@st.composite
def homogeneous_lists(draw):
    kind = draw(st.sampled_from([st.booleans(), NUMBERS, STRINGS]))
    return ("list", draw(st.lists(kind, max_size=4)))


def literals(values=SCALARS):
    return values.map(lambda v: ("lit", v))


@st.composite
def comparisons(draw):
    left = draw(paths())
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not_in", "startswith", "endswith", "contains", "glob", "len", "lower", "exists", "bare", "pp", "tool"]))
    if op in ("==", "!="):
        return ("cmp", op, left, draw(literals() | homogeneous_lists()))
    if op in ("<", "<=", ">", ">="):
        return ("cmp", op, left, draw(literals(NUMBERS | STRINGS)))
    if op in ("in", "not_in"):
        return ("cmp", op, left, draw(homogeneous_lists() | literals(STRINGS)))
    if op in ("startswith", "endswith"):
        return ("cmp", op, left, draw(literals(STRINGS)))
    if op == "contains":
        return ("cmp", op, left, draw(literals(st.booleans() | NUMBERS | STRINGS)))
    if op == "glob":
        return ("cmp", op, left, ("lit", draw(st.text(alphabet="ab*?[]!", max_size=5))))
    if op == "len":
        return ("cmp", draw(st.sampled_from(["==", "<", ">="])), ("call", "len", left), ("lit", draw(st.integers(0, 3))))
    if op == "lower":
        return ("cmp", draw(st.sampled_from(["==", "startswith", "in"])), ("call", "lower", left), draw(literals(STRINGS)))
    if op == "exists":
        return ("call", "exists", left)
    if op == "bare":
        return left
    if op == "pp":
        return ("cmp", draw(st.sampled_from(["==", "!=", "<", "in", "contains"])), left, draw(paths()))
    return ("cmp", "==", ("path", "tool", ()), ("lit", draw(st.sampled_from(["t", "u"]))))


def conditions(max_leaves: int = 6):
    # one_of picks its branches evenly: weight the comparisons well above the literals
    leaves = st.one_of(comparisons(), comparisons(), comparisons(), comparisons(), st.booleans().map(lambda b: ("bool", b)))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            inner.map(lambda x: ("not", x)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: ("and", xs)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: ("or", xs)),
            inner.map(lambda x: ("paren", x)),
        ),
        max_leaves=max_leaves,
    )


def render_value(value) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def render(node, context: str = "or") -> str:
    """Text for a condition tree. `context` is the loosest operator the surrounding text allows
    without parentheses: "or", "and" or "not" (an operand of not, or of a comparison)."""
    tag = node[0]
    if tag == "bool":
        return render_value(node[1])
    if tag == "lit":
        return render_value(node[1])
    if tag == "list":
        return "[" + ", ".join(render_value(v) for v in node[1]) + "]"
    if tag == "path":
        text = node[1]
        for key in node[2]:
            if isinstance(key, int):
                text += f"[{key}]"
            elif key.isidentifier():
                text += "." + key
            else:
                text += "[" + json.dumps(key) + "]"
        return text
    if tag == "call":
        return f"{node[1]}({render(node[2])})"
    if tag == "cmp":
        op = {"not_in": "not in"}.get(node[1], node[1])
        return f"{render(node[2], 'not')} {op} {render(node[3], 'not')}"
    if tag == "paren":
        return "(" + render(node[1]) + ")"
    if tag == "not":
        return "not " + render(node[1], "not")
    joined = f" {tag} ".join(render(x, "and" if tag == "or" else "not") for x in node[1])
    needs_parens = (tag == "or" and context != "or") or (tag == "and" and context == "not")
    return f"({joined})" if needs_parens else joined


class OracleError(Exception):
    """The reference evaluator's 'this condition cannot be evaluated'."""


class Contested(Exception):
    """A case where v0's membership test is deliberately laxer than `==` (see the report in
    test_dsl_semantics.test_membership_in_a_mixed_list_is_as_strict_as_equality); not modelled."""


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    return "object"


def _structurally_equal(a, b) -> bool:
    if _kind(a) != _kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_structurally_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_structurally_equal(a[k], b[k]) for k in a)
    return a == b


class Oracle:
    """Evaluates a condition tree to True, False or raises OracleError, from the rules alone."""

    def __init__(self, tool, args, context):
        self.env = {"tool": tool, "args": args, "context": context}

    def value(self, node):
        tag = node[0]
        if tag in ("lit", "bool"):
            return node[1]
        if tag == "list":
            return list(node[1])
        if tag == "path":
            v = self.env[node[1]]
            for key in node[2]:
                if isinstance(key, str):
                    if not isinstance(v, dict) or key not in v:
                        raise OracleError(f"no field {key}")
                    v = v[key]
                else:
                    if not isinstance(v, list) or not -len(v) <= key < len(v):
                        raise OracleError(f"no item {key}")
                    v = v[key]
            return v
        if tag == "call":
            if node[1] == "exists":
                try:
                    self.value(node[2])
                except OracleError:
                    return False
                return True
            v = self.value(node[2])
            if node[1] == "len":
                if _kind(v) not in ("string", "list", "object"):
                    raise OracleError("len")
                return len(v)
            if _kind(v) != "string":
                raise OracleError("lower")
            return v.lower()
        return self.truth(node)

    def equal(self, a, b) -> bool:
        if a is None or b is None:
            return a is None and b is None
        if _kind(a) != _kind(b):
            raise OracleError("== across types")
        return _structurally_equal(a, b)

    def member(self, item, container) -> bool:
        if _kind(container) == "string":
            if _kind(item) != "string":
                raise OracleError("non-string in a string")
            return item in container
        if _kind(container) != "list":
            raise OracleError("in needs a list or a string")
        # `item in list` is `item == x` for some x, with Kleene or over the items.
        outcomes = []
        for x in container:
            try:
                outcomes.append(self.equal(item, x))
            except OracleError:
                outcomes.append(None)
        if True in outcomes:
            return True
        if None in outcomes:
            if False in outcomes:
                raise Contested()  # v0 answers False here; strict == would be an error
            raise OracleError("no item of that type")
        return False

    def truth(self, node) -> bool:
        tag = node[0]
        if tag == "bool":
            return node[1]
        if tag == "paren":
            return self.truth(node[1])
        if tag == "path":
            v = self.value(node)
            if v is not True and v is not False:
                raise OracleError("not a boolean")
            return v
        if tag == "call":
            return self.value(node)
        if tag == "not":
            return not self.truth(node[1])
        if tag in ("and", "or"):
            decisive = tag == "or"  # the operand value that settles the result
            error = None
            for x in node[1]:
                try:
                    if self.truth(x) is decisive:
                        return decisive
                except OracleError as exc:
                    error = exc
            if error is not None:
                raise error
            return not decisive
        op, left, right = node[1], self.value(node[2]), self.value(node[3])
        if op == "==":
            return self.equal(left, right)
        if op == "!=":
            return not self.equal(left, right)
        if op in ("<", "<=", ">", ">="):
            if _kind(left) != _kind(right) or _kind(left) not in ("number", "string"):
                raise OracleError("order")
            if isinstance(left, float) and math.isnan(left) or isinstance(right, float) and math.isnan(right):
                raise OracleError("nan")
            return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
        if op == "in":
            return self.member(left, right)
        if op == "not_in":
            return not self.member(left, right)
        if op == "contains":
            return self.member(right, left)
        if op in ("startswith", "endswith"):
            if _kind(left) != "string" or _kind(right) != "string":
                raise OracleError("affix")
            return left.startswith(right) if op == "startswith" else left.endswith(right)
        if op == "glob":
            if _kind(left) != "string":
                raise OracleError("glob")
            return fnmatch.fnmatchcase(left, right)
        raise AssertionError(op)


def oracle_verdict(node, tool, args, context) -> str:
    try:
        return "true" if Oracle(tool, args, context).truth(node) else "false"
    except OracleError:
        return "error"


JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)
VALUES = st.one_of(SCALARS, SCALARS, SCALARS, JSON)  # mostly scalars: they meet the most operators
ARGS = st.one_of(
    st.fixed_dictionaries({"a": VALUES, "b": VALUES, "flag": VALUES}, optional={k: JSON for k in KEYS[3:]}),
    st.fixed_dictionaries({"a": VALUES, "b": VALUES}),
    st.dictionaries(st.sampled_from(KEYS), JSON, max_size=5),
)
CONTEXTS = st.none() | st.dictionaries(st.sampled_from(KEYS), JSON, max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(conditions(), st.sampled_from(["t", "u"]), ARGS, CONTEXTS)
@example(("cmp", "in", ("path", "args", ("a",)), ("list", [1, 2])), "t", {"a": 2.0}, None)
@example(("cmp", "in", ("path", "args", ("a",)), ("list", ["x"])), "t", {"a": None}, None)
@example(("cmp", "<", ("path", "args", ("a",)), ("lit", 3)), "t", {"a": True}, None)
@example(("cmp", "==", ("path", "args", ("a",)), ("lit", 1)), "t", {"a": True}, None)
@example(("cmp", "!=", ("path", "args", ("a",)), ("lit", None)), "t", {}, None)
@example(("and", [("path", "args", ("flag",)), ("bool", False)]), "t", {}, None)
@example(("or", [("path", "args", ("flag",)), ("bool", True)]), "t", {"flag": 3}, None)
def test_generated_conditions_load_evaluate_and_agree_with_the_oracle(condition, tool, args, context):
    text = render(condition)
    try:
        expected = oracle_verdict(condition, tool, args, context if context is not None else {})
    except Contested:
        assume(False)
    allow = Policy.from_text(f'default deny "no"\nallow t, u when {text} id "r"\n', SOURCE)
    deny = Policy.from_text(f'deny t, u when {text} reason "r" id "r"\nallow t, u id "base"\n', SOURCE)
    # the only warnings a generated condition may get: exists(args) is always true, and a literal a
    # normalized value is never spelled as (`lower(x) == "A"`)
    assert all("exists(" in w.message or "comparison is never true" in w.message or "comparison is always true" in w.message
               for w in allow.warnings)

    got = allow.evaluate(tool, args, context)
    assert isinstance(got, Decision)
    errored = [o.rule for o in got.outcomes if o.error is not None]
    verdict = "true" if got.effect == "allow" else ("error" if errored else "false")
    assert verdict == expected, f"{text!r} on {args!r}: policy says {verdict}, oracle says {expected}\n" + "\n".join(got.explain())

    # The same condition on a deny rule: an error counts as matched.
    got = deny.evaluate(tool, args, context)
    assert got.effect == ("allow" if expected == "false" else "deny"), f"{text!r} on {args!r}"


@FAST
@given(conditions(max_leaves=12))
def test_rendered_conditions_parse_to_one_rule(condition):
    tree = parse(f"allow t when {render(condition)}", SOURCE)
    assert len(tree.statements) == 1


# --- (c) diagnostics say where they are --------------------------------------------------------


def assert_located(exc: PolicyError, text: str, name: str) -> None:
    rendered = exc.render()
    lines = text.split("\n")  # Lark counts lines at \n only (not at \r, \v, \f, U+2028, ...)
    for d in exc.diagnostics:
        assert d.span is not None, f"a diagnostic without a position: {d}"
        line, column = d.span.line, d.span.column
        assert f"{name}:{line}:{column}: {d.severity}: {d.message}" in rendered
        assert 1 <= line <= max(1, len(lines)), (d, len(lines))
        assert 1 <= column <= len(lines[line - 1] if lines else "") + 1, (d, lines[line - 1] if lines else "")


NAMES = st.sampled_from(["x.policy", "dir/sub/my policy.policy", "<policy>", "C:\\p\\a.policy"])


@FAST
@given(st.text(max_size=200), NAMES)
def test_diagnostics_for_random_text_carry_name_line_and_column(text, name):
    try:
        Policy.from_text(text, name)
    except PolicyError as exc:
        assert_located(exc, text, name)


@FAST
@given(st.sampled_from(VALID_POLICIES), MUTATIONS, NAMES)
def test_diagnostics_for_mutated_policies_carry_name_line_and_column(original, ops, name):
    text = mutate(original, ops)
    try:
        Policy.from_text(text, name)
    except PolicyError as exc:
        assert_located(exc, text, name)


def test_a_rendered_diagnostic_shows_the_line_and_a_caret_under_the_span():
    text = 'allow read\ndeny refund when arg.amount > 100 reason "no"\n'
    with pytest.raises(PolicyError) as info:
        Policy.from_text(text, "retail.policy")
    assert info.value.render().splitlines() == [
        "retail.policy:2:18: error: unknown name 'arg'",
        '    2 | deny refund when arg.amount > 100 reason "no"',
        "      |                  ^^^^^^^^^^",
        "  help: did you mean 'args'?",
    ]
