"""Run-time meaning of the expressions added for reuse and expressiveness (issue 14, section 2):
arithmetic and list joining (`ast.Arith`, `ast.Neg`), projections (`ast.Projection`,
`args.items[*].price`) and the functions over values `sum min max count keys values json email
matches`, with `url(x, "https")`.

`compile_node` and `compile_call` give the generic closures (`env -> value`, raising EvalError)
that `dsl.compiler` uses for these nodes in all its modes: the specialized predicates and the
generated plans do not specialize them (they fall back to these closures), and the traced mode
records them as steps. Their load-time types are `dsl.expression_types`'. Every function here is
pure and linear in its input, and fails closed: a value of the wrong type, a missing field, a
division by zero, JSON that does not parse, an address that is not one, is an EvalError.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from dsl import ast, numbers
from dsl.values import EvalError, _a, kind, order

# The functions this module defines, by name → (fewest, most) arguments. `url` is dsl.compiler's
# with one argument; with two it is here.
FUNCTIONS: dict[str, tuple[int, int]] = {
    "sum": (1, 1), "min": (1, 1), "max": (1, 1), "count": (1, 1),
    "keys": (1, 1), "values": (1, 1), "json": (1, 1), "email": (1, 1), "matches": (2, 2),
}

# The nodes whose subtrees the specialized predicates leave to these closures.
NODES = (ast.Arith, ast.Neg, ast.Projection)

Fn = Callable[[Any], Any]


def is_extended_call(call: ast.Call) -> bool:
    """A call this module compiles: one of FUNCTIONS, or `url(x, scheme)` (and types: url() with
    more arguments, for the message)."""
    return call.name in FUNCTIONS or (call.name == "url" and len(call.args) >= 2)


def uses_extended(expr: Any) -> bool:
    """Whether a condition (or part of one) holds one of this module's nodes or calls."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, NODES) or (isinstance(e, ast.Call) and is_extended_call(e)):
            return True
        stack.extend(ast.children(e))
    return False


# --- arithmetic and joining lists -------------------------------------------------------------


def binary(op: str, a: Any, b: Any) -> Any:
    """`a OP b`: `+` joins two lists (a new list, the left's items then the right's) or adds two
    numbers; `- * /` work on numbers (dsl.numbers: exact decimals). Anything else, null and a
    list with a number included, is an EvalError."""
    if op == "+":
        ka, kb = kind(a), kind(b)
        if ka == "list" or kb == "list":
            if ka != kb:
                raise EvalError(f"'+' joins two lists, not {_a(ka)} and {_a(kb)}")
            return [*a, *b]
    return numbers.arithmetic(op, a, b)


def compile_node(expr: ast.Expr, compile: Callable[[ast.Expr], Fn]) -> Fn:
    """The closure of an Arith, a Neg or a Projection; `compile` compiles its operands."""
    if isinstance(expr, ast.Arith):
        left, right, op = compile(expr.left), compile(expr.right), expr.op
        return lambda env: binary(op, left(env), right(env))
    if isinstance(expr, ast.Neg):
        operand = compile(expr.operand)
        return lambda env: numbers.negate(operand(env))
    if isinstance(expr, ast.Projection):
        return _compile_projection(expr, compile)
    raise TypeError(f"cannot compile {expr!r}")  # pragma: no cover


# --- projections ------------------------------------------------------------------------------


def _base_text(expr: ast.Expr) -> str:
    if isinstance(expr, ast.Path):
        return expr.text
    if isinstance(expr, ast.Call):
        return f"{expr.name}(...)" + ast.Path("_", expr.keys, None).text[1:]
    return "the value"  # pragma: no cover - the parser makes a projection of a path or a call


def projection_text(p: ast.Projection) -> str:
    """A projection written back (`args.items[*].price`), for messages."""
    out = _base_text(p.base)
    for step in p.steps:
        out += "[*]" + ast.Path("_", step, None).text[1:]
    return out


def _compile_projection(p: ast.Projection, compile: Callable[[ast.Expr], Fn]) -> Fn:
    from dsl.compiler import _reader  # the field reader every path uses, with its messages

    base = compile(p.base)
    text = _base_text(p.base)
    stages = []
    for step in p.steps:
        over = text
        text += "[*]"
        stages.append((over, _reader(text, step) if step else None))
        text += ast.Path("_", step, None).text[1:]

    def project(env: Any) -> list:
        values = [base(env)]
        for over, read in stages:
            out = []
            for v in values:
                if kind(v) != "list":
                    raise EvalError(f"[*] goes over a list, but {over} is {_a(kind(v))}")
                out.extend(v if read is None else (read(item) for item in v))
            values = out
        return values

    return project


# --- functions over values --------------------------------------------------------------------


def _list_of(value: Any, name: str) -> Any:
    if kind(value) != "list":
        raise EvalError(f"{name}() takes a list, not {_a(kind(value))}")
    return value


def extreme(items: Any, name: str) -> Any:
    """`min(list)` / `max(list)`: the least / greatest item of a non-empty list of numbers or of
    strings (by code point), as it is. An empty list, a mix or another kind is an EvalError."""
    _list_of(items, name)
    if not items:
        raise EvalError(f"{name}() of an empty list")
    best = items[0]
    first = kind(best)
    if first not in ("number", "string"):
        raise EvalError(f"{name}() compares numbers or strings, not {_a(first)}")
    for item in items[1:]:
        if kind(item) != first:
            raise EvalError(f"{name}() compares items of one kind, not {_a(first)} and {_a(kind(item))}")
        if order("<" if name == "min" else ">", item, best):
            best = item
    if best != best:  # a lone NaN (order refuses it beside another item)
        raise EvalError(f"{name}() cannot order NaN")
    return best


def count(items: Any) -> int:
    """`count(list)`: how many items."""
    return len(_list_of(items, "count"))


def keys(obj: Any) -> list:
    """`keys(object)`: its keys, in the order the JSON text gave them."""
    if kind(obj) != "object":
        raise EvalError(f"keys() takes an object, not {_a(kind(obj))}")
    return list(obj)


def values_of(obj: Any) -> list:
    """`values(object)`: its values, in the order of its keys."""
    if kind(obj) != "object":
        raise EvalError(f"values() takes an object, not {_a(kind(obj))}")
    return list(obj.values())


MAX_JSON_TEXT = 1_000_000  # characters; json() of a longer text is an error


def json_value(text: Any) -> Any:
    """`json(text)`: the JSON value a string holds, read as the arguments of a call are
    (dsl.jsoninput's strict rules: no duplicate key, which the tool may resolve the other way;
    no NaN or Infinity; no number beyond a double). Linear in the text. Raises EvalError for what
    is not a string, a text over MAX_JSON_TEXT characters, and text that is not such JSON."""
    from dsl.jsoninput import parse_json

    if kind(text) != "string":
        raise EvalError(f"json() takes a string, not {_a(kind(text))}")
    if len(text) > MAX_JSON_TEXT:
        raise EvalError(f"json() reads at most {MAX_JSON_TEXT:,} characters")
    try:
        return parse_json(str(text), "json()'s text")
    except ValueError as exc:
        raise EvalError(str(exc)) from None


_SCHEME_LIKE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(?!//)")
_WITH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_PORT_AFTER_HOST = re.compile(r"[0-9]+(?:[/?#]|\Z)")
# The WHATWG URL standard's special schemes: `http:/evil.example` and `https:443/x` are URLs of
# these (host evil.example, host 443) to a browser or a fetch library, never a host `http`.
_SPECIAL_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp", "file"})


def url_with_scheme(text: Any, scheme: str) -> Any:
    """`url(x, scheme)`: `x` as `url(x)` reads it when it has a scheme and `//`; otherwise the
    host form `www.example.com/x` (or `//www.example.com/x`) read as `scheme://www.example.com/x`.
    Fails closed where a host form could be read two ways: text such as `mailto:a@b` or
    `javascript:...` or `http:/evil.example` (a scheme without `//`, not a `host:port` with a
    port of digits; a host named like a special scheme, `https:443`, is one too) and a host form with `@` (is
    `a.com@b.com` a host with a user, or a mail address?) are errors."""
    from dsl.subjects import parse_url

    if kind(text) != "string":
        raise EvalError(f"url() takes a string, not {_a(kind(text))}")
    if _WITH_SCHEME.match(text):
        return parse_url(text)
    rest = text[2:] if text.startswith("//") else text
    m = _SCHEME_LIKE.match(rest)
    if m is not None and (m.group(1).lower() in _SPECIAL_SCHEMES or not _PORT_AFTER_HOST.match(rest, m.end())):
        raise EvalError(f"{text!r} has the scheme {m.group(1)!r} and no '//': not a host to read as {scheme}://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise EvalError(f"{text!r} has no scheme and an '@' before its path: a user at a host, or an address?")
    return parse_url(f"{scheme}://{rest}")


_UNARY: dict[str, Callable[[Any], Any]] = {
    "sum": numbers.total,
    "min": lambda v: extreme(v, "min"),
    "max": lambda v: extreme(v, "max"),
    "count": count,
    "keys": keys,
    "values": values_of,
    "json": json_value,
}


def compile_call(call: ast.Call, compile: Callable[[ast.Expr], Fn]) -> Fn:
    """The closure of a call `is_extended_call` accepts, before any field read after it (the
    caller reads `call.keys`)."""
    args = [compile(a) for a in call.args]
    fn = _UNARY.get(call.name)
    if fn is not None:
        (arg,) = args
        return lambda env: fn(arg(env))
    if call.name == "email":
        from dsl.subjects.emails import parse_email

        (arg,) = args
        return lambda env: parse_email(arg(env))
    if call.name == "matches":
        from dsl.patterns import compile_pattern, matches

        compiled = compile_pattern(call.args[1].value)  # a string literal RE2 accepts: the checker saw to it
        text = args[0]
        return lambda env: matches(compiled, text(env))
    if call.name == "url":
        scheme = call.args[1].value.lower()  # a scheme literal: the checker saw to it
        text = args[0]
        return lambda env: url_with_scheme(text(env), scheme)
    raise TypeError(f"unknown function {call.name}")  # pragma: no cover - the checker stops it
