"""Arithmetic (exact decimals), joined lists, projections `[*]` and the aggregates: what they
compute, how they print, and that every evaluator computes the same (dsl.expressions,
dsl.numbers). The compliance cases of tests/compliance/expressions.json say what the language
means; these check the implementation against references (Python's fractions) on random input."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsl import Policy, PolicyError, ast
from dsl.compiler import Env, _compile, compile_condition, compile_condition_generic, compile_condition_traced
from dsl.explain import explain
from dsl.fmt import format_policy
from dsl.parser import parse
from dsl.values import EvalError, as_decimal
from test_fmt import shape as syntax_shape

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


shape = syntax_shape  # the tree without its spans, as tests/test_fmt.py compares them


def condition_of(text: str) -> ast.Expr:
    return parse(f"allow t when {text}").statements[0].condition


def outcomes(text: str, args: dict) -> list:
    """What the generic, the specialized and the traced predicates give for `text` on `args`."""
    expr = condition_of(text)
    out = []
    for make in (compile_condition_generic, compile_condition, compile_condition_traced):
        fn = make(expr)
        try:
            out.append(("value", fn(Env("t", args, {}, trace=[]))))
        except EvalError as exc:
            out.append(("error", exc.message))
    return out


def holds(text: str, args: dict) -> bool | str:
    results = outcomes(text, args)
    assert results[0] == results[1] == results[2], (text, args, results)
    kind, value = results[0]
    return value if kind == "value" else "error: " + value


# --- exact decimals ---------------------------------------------------------------------------

DECIMALS = st.builds(lambda n, scale: Decimal(n).scaleb(-scale), st.integers(-10**9, 10**9), st.integers(0, 4))


@PROPERTY
@given(DECIMALS, DECIMALS)
def test_sums_and_products_of_written_decimals_are_exact(a, b):
    """a + b and a * b equal the exact decimal result, for numbers as JSON carries them (floats)."""
    args = {"a": float(a), "b": float(b), "sum": float(a + b), "product": float(a * b)}
    assert holds("args.a + args.b == args.sum", args) is True
    assert holds("args.a - args.b == args.sum - 2 * args.b", args) is True
    # a product of up to 22 significant digits is not what a float holds: compare with the exact
    # one (a literal is a float too, exact up to 15 significant digits: this one is an integer)
    exact = a * b
    if len(exact.normalize().as_tuple().digits) <= 15:
        assert holds(f"args.a * args.b == {exact}", args) is True
    assert holds(f"args.a * args.b < {math.floor(exact) + 1}", args) is True  # an integer literal is exact


def test_the_classic_cases():
    assert holds("0.1 + 0.2 == 0.3", {}) is True
    assert holds("args.a + args.b == 0.3", {"a": 0.1, "b": 0.2}) is True
    assert holds("args.amount * 2 > 1000.10", {"amount": 500.05}) is False
    assert holds("args.amount * 2 > 1000.10", {"amount": 500.06}) is True
    assert holds("1 / 3 * 3 < 1", {}) is True
    assert holds("2 - 3 * 4 == -10 and (2 - 3) * 4 == -4 and 8 / 4 / 2 == 1 and -2 * 3 == -6", {}) is True
    assert holds("args.a / args.b == 0.5", {"a": 1, "b": 2}) is True


@pytest.mark.parametrize("text, args, message", [
    ("args.a / args.b > 0", {"a": 1, "b": 0}, "division by zero"),
    ("args.a / args.b > 0", {"a": 1, "b": 0.0}, "division by zero"),
    ("args.a + 1 > 0", {"a": "1"}, "'+' works on numbers, not a string"),
    ("args.a + 1 > 0", {"a": True}, "not a bool"),
    ("args.a + 1 > 0", {"a": None}, "not a null"),
    ("args.a + 1 > 0", {"a": math.nan}, "finite numbers"),
    ("args.a + 1 > 0", {"a": math.inf}, "finite numbers"),
    ("-args.a > 0", {"a": "x"}, "'-' works on numbers"),
    ("args.a * args.b > 0", {"a": 10**4000, "b": 10**3000}, "out of range"),
    ("args.a / args.b > 0", {"a": 1e-300, "b": 10**6000}, "out of range"),
    ("args.a + args.b == []", {"a": [1], "b": None}, "'+' joins two lists, not a list and a null"),
    ("args.a + args.b == []", {"a": [1]}, "missing field args.b"),
])
def test_what_arithmetic_refuses_is_an_evaluation_error(text, args, message):
    result = holds(text, args)
    assert isinstance(result, str) and message in result, result


# --- random expression trees against fractions ------------------------------------------------

LEAVES = st.one_of(st.integers(-50, 50).map(str), st.sampled_from(["0.1", "0.2", "2.5", "1e3", "0.25", "-0.5", "args.x", "args.y"]))


@st.composite
def arith_text(draw, depth: int = 0) -> str:
    if depth >= 4 or draw(st.integers(0, 2)) == 0:
        leaf = draw(LEAVES)
        return f"-{leaf}" if not leaf.startswith("-") and draw(st.integers(0, 5)) == 0 else leaf
    op = draw(st.sampled_from(["+", "-", "*", "/"]))
    left, right = draw(arith_text(depth + 1)), draw(arith_text(depth + 1))
    if draw(st.booleans()):
        right = f"({right})"
    if draw(st.booleans()):
        left = f"({left})"
    return f"{left} {op} {right}"


def reference(expr: ast.Expr, args: dict) -> Fraction:
    """Exact rational arithmetic, no rounding at all; ZeroDivisionError for a zero divisor."""
    if isinstance(expr, ast.Literal):
        return Fraction(Decimal(repr(expr.value))) if isinstance(expr.value, float) else Fraction(expr.value)
    if isinstance(expr, ast.Path):
        return Fraction(Decimal(repr(args[expr.keys[0]])))
    if isinstance(expr, ast.Neg):
        return -reference(expr.operand, args)
    a, b = reference(expr.left, args), reference(expr.right, args)
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[expr.op]()


def largest(expr: ast.Expr, args: dict) -> Fraction:
    """The largest magnitude of any value `expr` computes on the way (exact): a quotient rounded
    to 34 digits is off by up to 1e-34 of itself, which a later sum carries over whole, so a
    result that cancels to 0 (`-1 + 3 / 0.1 * (0.1 / 3)`) is off by that much of its terms."""
    if isinstance(expr, (ast.Literal, ast.Path)):
        return abs(reference(expr, args))
    if isinstance(expr, ast.Neg):
        return largest(expr.operand, args)
    return max(abs(reference(expr, args)), largest(expr.left, args), largest(expr.right, args))


@PROPERTY
@given(arith_text(), st.sampled_from([0.1, 3, -2.5, 0.0, 7]), st.sampled_from([0.2, 4, 0, 1e-3]))
@example("-1 + -0 - -3 / -0.1 * (0.1 / -3)", 0.1, 0.2)  # cancels to 0 after a rounded quotient
def test_random_arithmetic_agrees_with_exact_fractions_and_every_evaluator(text, x, y):
    """The value is the exact rational one, to 34 significant digits (exactly when no quotient
    needed rounding); a zero divisor is the error 'division by zero'; the three evaluators agree
    on every comparison of it."""
    args = {"x": x, "y": y}
    expr = condition_of(f"{text} == 0").left
    try:
        expected = reference(expr, args)
    except ZeroDivisionError:
        expected = None
    try:
        value = _compile(expr)(Env("t", args, {}))
    except EvalError as exc:
        assert expected is None and exc.message == "division by zero", (text, exc.message)
    else:
        assert expected is not None, text
        got = Fraction(as_decimal(value))  # a lone literal is still its float
        if "/" not in text:
            assert got == expected, text  # + - * of short decimals never round
        else:
            assert abs(got - expected) <= largest(expr, args) * Fraction(1, 10**30), text
    for op in ("==", "<", ">="):
        assert len({repr(o) for o in outcomes(f"{text} {op} 1", args)}) == 1


@PROPERTY
@given(arith_text())
def test_fmt_prints_arithmetic_with_the_fewest_parentheses_that_keep_its_tree(text):
    policy = f"allow t when {text} == 1\n"
    once = format_policy(policy)
    assert shape(parse(once)) == shape(parse(policy))
    assert format_policy(once) == once


def test_fmt_drops_redundant_parentheses_and_keeps_needed_ones():
    assert format_policy("allow t when (a.x*2)+(3) - (1 - 2) > - (1)\n".replace("a.x", "args.x")) == \
        "allow t when args.x * 2 + 3 - (1 - 2) > -1\n"
    assert format_policy("allow t when -(args.x + 1) * -args.y / (2 * 3) == 0\n") == \
        "allow t when -(args.x + 1) * -args.y / (2 * 3) == 0\n"
    assert format_policy("allow t when any r in (args.to+args.cc) : r == \"x\"\n") == \
        "allow t when any r in args.to + args.cc: r == \"x\"\n"
    assert format_policy("allow t when sum( args.items [ * ] . price ) > 1 and args.o[*][*][0] == []\n") == \
        "allow t when sum(args.items[*].price) > 1 and args.o[*][*][0] == []\n"


# --- joined lists, projections, aggregates ----------------------------------------------------


def test_projections_read_each_item_and_a_second_star_joins():
    orders = {"orders": [{"lines": [{"sku": "a", "n": 1}, {"sku": "b", "n": 2}]}, {"lines": [{"sku": "c", "n": 3}]}]}
    assert holds('args.orders[*].lines[*].sku == ["a", "b", "c"]', orders) is True
    assert holds("sum(args.orders[*].lines[*].n) == 6", orders) is True
    assert holds("count(args.orders[*].lines) == 2 and count(args.orders[*].lines[*]) == 1", {"orders": [{"lines": [{}]}, {"lines": []}]}) is True
    assert holds('args.rows[*][0] == ["a", "b"]', {"rows": [["a", 1], ["b", 2]]}) is True
    assert holds('shell(args.c)[*].program == ["ls", "rm"]', {"c": "ls; sudo rm -rf x"}) is True
    assert holds("args.o[*].x == []", {"o": [{"x": 1}, {"y": 2}]}) == "error: missing field args.o[*].x"
    assert holds("args.o[*].x[*] == []", {"o": [{"x": 1}]}) == "error: [*] goes over a list, but args.o[*].x is a number"


def test_aggregates():
    assert holds("sum(args.a) == 0 and count(args.a) == 0", {"a": []}) is True
    assert holds("min(args.a) == -1 and max(args.a) == 2.5", {"a": [1, -1, 2.5]}) is True
    assert holds('max(args.a) == "b"', {"a": ["a", "b", "B"]}) is True
    assert holds("max(args.a) > 0", {"a": [1, math.nan]}).startswith("error: ")
    assert holds("max(args.a) > 0", {"a": [math.nan]}) == "error: max() cannot order NaN"
    assert holds("min(args.a) > 0", {"a": [True]}) == "error: min() compares numbers or strings, not a bool"
    assert holds("count(args.a) > 0", {"a": "abc"}) == "error: count() takes a list, not a string"
    assert holds("sum(args.a + args.b) == 0.6", {"a": [0.1, 0.2], "b": [0.3]}) is True


def test_explain_shows_the_computed_values_as_json():
    policy = Policy.from_text('default deny "no"\nallow t when sum(args.items[*].price) * 2 > 1000.10')
    report = explain(policy, "t", {"items": [{"price": 250.10}, {"price": 249.95}]})
    compare = report.rules[0].steps
    product = compare.children[0]
    assert (product.kind, product.text, product.shown, product.value) == ("arith", "sum(args.items[*].price) * 2", "1000.10", 1000.1)
    assert product.children[0].value == 500.05 and product.children[0].children[0].kind == "projection"
    assert b'"value":1000.1' in msgspec.json.encode(report)


@pytest.mark.parametrize("text, message", [
    ('args.a + "x" == 1', "'+' adds numbers or joins lists, not a string"),
    ("[1] + 2 == [1]", "'+' joins a list with a list, not with a number"),
    ("true * 2 == 1", "'*' works on numbers, not a bool"),
    ("args.a / 0 > 1", "division by zero"),
    ('-"x" == 1', "'-' negates a number, not a string"),
    ('max([true]) == 1', "max() compares numbers or strings, not the items of a list of bools"),
    ("sum(args.a)", "a condition must be true or false, but this is a number"),
    ('len(args.a)[*] == []', "[*] goes over a list, not a number"),
    ("args.a[*] == 1", "'==' compares a list with a number"),
])
def test_load_time_type_errors(text, message):
    with pytest.raises(PolicyError) as info:
        Policy.from_text(f"allow t when {text}")
    assert message in info.value.render()


def test_minus_five_is_one_literal_however_it_is_written():
    for text in ("-5", "- 5", "-(5)", "- (5)"):
        expr = condition_of(f"args.a == {text}").right
        assert isinstance(expr, ast.Literal) and expr.value == -5
    assert isinstance(condition_of("args.a == -args.b").right, ast.Neg)


# --- keys, values, json, email, matches, url(x, scheme) --------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.sampled_from([0.1, 2.5, -0.0]) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


@PROPERTY
@given(JSON_VALUES)
def test_json_reads_back_what_was_written(value):
    import json

    args = {"t": json.dumps(value), "v": value}
    assert holds("json(args.t) == args.v", args) is True
    if isinstance(value, dict):
        assert holds("keys(json(args.t)) == keys(args.v) and values(json(args.t)) == values(args.v)", args) is True


@PROPERTY
@given(st.text(max_size=12))
def test_json_of_any_text_is_a_value_or_an_evaluation_error(text):
    result = holds("json(args.t) == null or true", {"t": text})
    assert result is True or result.startswith("error: json()'s text")


LOCAL = st.text(alphabet="abcXYZ019.+-_'é", min_size=1, max_size=10)
DOMAIN = st.lists(st.text(alphabet="abcXY09-ü", min_size=1, max_size=6), min_size=1, max_size=3).map(".".join)


@PROPERTY
@given(LOCAL, DOMAIN, st.booleans())
def test_an_address_normalizes_to_one_that_reads_back_the_same(local, domain, dot):
    from dsl.subjects.emails import parse_email

    try:
        first = parse_email(f"{local}@{domain}{'.' if dot else ''}")
    except EvalError:
        return
    again = parse_email(first.text)
    assert again == first
    assert first.domain == first.domain.lower() and first.domain.isascii() and not first.domain.endswith(".")
    assert first.local == local  # as written (NFC: these letters are composed already)
    assert holds("email(args.a).text == email(args.b).text", {"a": f"{local}@{domain}", "b": first.text}) is True


@pytest.mark.parametrize("address", [
    "Bob <bob@x.org>", '"a b"@x.org', "a@b@x.org", "a..b@x.org", ".a@x.org", "a.@x.org", "a@[192.0.2.1]", "a@192.0.2.1",
    "a b@x.org", "a@x.org (comment)", "a\u200b@x.org", "a@x..org", "", "@x.org", "a@", "x" * 65 + "@x.org", "a@" + "b" * 260,
])
def test_what_is_not_a_plain_address_is_an_evaluation_error(address):
    assert str(holds("email(args.a).domain == \"x.org\"", {"a": address})).startswith("error: ")


@PROPERTY
@given(st.text(alphabet="ab(|)*+?^$.", max_size=8), st.text(alphabet="ab", max_size=12))
def test_matches_agrees_with_python_re_on_patterns_both_accept(pattern, text):
    """RE2 and Python's re agree on the syntax both read (no backreferences, no lookaround)."""
    import re

    try:
        expected = re.search(pattern, text) is not None
    except re.error:
        return
    try:
        policy = Policy.from_text(f'allow t when matches(args.s, "{pattern}")')
    except PolicyError as exc:
        assert "RE2 refuses this pattern" in exc.render()
        return
    assert (policy.evaluate("t", {"s": text}).effect == "allow") is expected
    assert holds(f'matches(args.s, "{pattern}")', {"s": text}) is expected


def test_a_pattern_re2_refuses_is_a_load_error_at_the_pattern():
    with pytest.raises(PolicyError) as info:
        Policy.from_text('allow t\n  when args.x == 1 or matches(args.s, "(a)\\\\1")', "p.policy")
    assert info.value.render().startswith("p.policy:2:39: error: RE2 refuses this pattern: invalid escape sequence: \\1")


@pytest.mark.parametrize("text, host", [
    ("www.example.com/x", "www.example.com"), ("example.com", "example.com"), ("//Example.COM./a", "example.com"),
    ("localhost:8080/x", "localhost"), ("http://a.example/", "a.example"), ("ｅｘａｍｐｌｅ.com", "example.com"),
])
def test_url_with_a_scheme_reads_a_bare_host(text, host):
    assert holds(f'url(args.u, "https").host == "{host}"', {"u": text}) is True
    assert holds('url(args.u, "https").scheme in ["https", "http"]', {"u": text}) is True


@pytest.mark.parametrize("text", ["mailto:a@b.example", "javascript:alert(1)", "a@b.example/x", "a.example:b@c.example", "", "/x", 3])
def test_url_with_a_scheme_refuses_what_could_be_read_two_ways(text):
    assert str(holds('url(args.u, "https").host == "x"', {"u": text})).startswith("error: ")


def test_explain_shows_an_address_and_a_match():
    policy = Policy.from_text('default deny "no"\nallow t when email(args.to).domain == "x.org" and matches(args.s, "^a")')
    report = explain(policy, "t", {"to": "Bob@X.ORG", "s": "abc"})
    left = report.rules[0].steps.children[0].children[0]
    assert (left.text, left.value, left.subject) == ("email(args.to).domain", "x.org", "Bob@x.org")
    assert report.rules[0].steps.children[1].result == "true"
