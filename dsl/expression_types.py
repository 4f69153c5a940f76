"""Load-time types of the expressions of `dsl.expressions` (arithmetic, joined lists, projections,
`sum min max count keys values json email matches`, `url(x, scheme)`), for `dsl.checker`.

Each function takes the running checker (`dsl.checker._Checker`: its `expr` types an operand,
its `error` reports at a span with a hint) and returns the node's type, or None after reporting
an error. Types are the checker's strings ("number", "list[string]", "any", ...). As everywhere
in the checker, a field read at run time is "any": only what is certain at load is an error here,
and a wrong type at run time is an evaluation error, which never allows.
"""

from __future__ import annotations

import re
from typing import Any

from dsl import ast, checker as types
from dsl.expressions import FUNCTIONS, projection_text

_NUMERIC = (types.NUMBER, types.ANY)


def arith(chk: Any, expr: ast.Arith) -> str | None:
    left, right = chk.expr(expr.left), chk.expr(expr.right)
    if left is None or right is None:
        return None
    op = expr.op
    if op == "+" and (types.is_list(left) or types.is_list(right)):
        for side, kind in ((expr.left, left), (expr.right, right)):
            if not types.is_list(kind) and kind != types.ANY:
                chk.error(f"'+' joins a list with a list, not with {types.describe(kind)}", side.span,
                          "both sides of a join must be lists; a missing or null one is an evaluation error")
                return None
        if left == right:
            return left
        return types.LIST
    for side, kind in ((expr.left, left), (expr.right, right)):
        if kind not in _NUMERIC:
            what = "adds numbers or joins lists" if op == "+" else "works on numbers"
            chk.error(f"'{op}' {what}, not {types.describe(kind)}", side.span)
            return None
    if op == "/" and isinstance(expr.right, ast.Literal) and expr.right.value == 0:
        chk.error("division by zero", expr.right.span, "a division by zero is an evaluation error on every call")
        return None
    if left == types.ANY and right == types.ANY and op == "+":
        return types.ANY  # two fields: numbers or lists, known at run time
    return types.NUMBER


def neg(chk: Any, expr: ast.Neg) -> str | None:
    kind = chk.expr(expr.operand)
    if kind is None:
        return None
    if kind not in _NUMERIC:
        chk.error(f"'-' negates a number, not {types.describe(kind)}", expr.operand.span)
        return None
    return types.NUMBER


def projection(chk: Any, p: ast.Projection) -> str | None:
    kind = chk.expr(p.base)
    if kind is None:
        return None
    for n, step in enumerate(p.steps):
        if kind != types.ANY and not types.is_list(kind):
            where = p.base.span if n == 0 else p.span
            chk.error(f"[*] goes over a list, not {types.describe(kind)}", where,
                      "read a field of an object with .name; [*] takes every item of a list")
            return None
        kind = types.item_type(kind) if kind != types.ANY else types.ANY
        for key in step:
            kind = chk.step(kind, key, p)
            if kind is None:
                return None
    return f"list[{kind}]" if kind not in (types.ANY, types.LIST) and not types.is_list(kind) else types.LIST


def _arity(chk: Any, call: ast.Call, fewest: int, most: int) -> bool:
    n = len(call.args)
    if fewest <= n <= most:
        return True
    wanted = str(fewest) if fewest == most else f"{fewest} or {most}"
    chk.error(f"{call.name}() takes {wanted} argument{'s' if most > 1 else ''}, not {n}", call.span)
    return False


def _pattern(chk: Any, expr: ast.Expr) -> bool:
    """matches()'s pattern: a string literal RE2 compiles (else an error at it)."""
    from dsl.patterns import PatternError, compile_pattern

    if not (isinstance(expr, ast.Literal) and isinstance(expr.value, str)):
        chk.error("a matches() pattern must be a string literal", expr.span, 'for example matches(args.iban, "^[A-Z]{2}[0-9]{2}")')
        return False
    try:
        compile_pattern(expr.value)
    except PatternError as exc:
        chk.error(f"RE2 refuses this pattern: {exc}", expr.span,
                  "RE2 syntax has no backreferences and no lookaround: what it matches, it matches in time linear in the text")
        return False
    return True


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")


def _scheme(chk: Any, expr: ast.Expr) -> bool:
    """url()'s second argument: a scheme, as a string literal."""
    if not (isinstance(expr, ast.Literal) and isinstance(expr.value, str) and _SCHEME.fullmatch(expr.value)):
        chk.error("url()'s second argument is the scheme to read a bare host with, a string literal such as \"https\"",
                  expr.span, 'url(args.link, "https") reads www.example.com/x as https://www.example.com/x')
        return False
    return True


def call(chk: Any, call: ast.Call) -> str | None:
    """The type of a call of one of `dsl.expressions.FUNCTIONS`, or of `url(x, scheme)` (before
    its field reads)."""
    fewest, most = FUNCTIONS.get(call.name, (1, 2))
    if not _arity(chk, call, fewest, most):
        return None
    arg = call.args[0]
    kind = chk.expr(arg)
    if kind is None:
        return None
    name = call.name
    if name in ("sum", "min", "max", "count"):
        if kind != types.ANY and not types.is_list(kind):
            hint = "len() gives the length of a string or an object" if name == "count" and kind in (types.STRING, types.OBJECT) else None
            chk.error(f"{name}() takes a list, not {types.describe(kind)}", arg.span, hint)
            return None
        item = types.item_type(kind) if kind != types.ANY else types.ANY
        allowed = (types.NUMBER, types.ANY) if name == "sum" else (types.NUMBER, types.STRING, types.ANY)
        if name != "count" and item not in allowed:
            what = "adds numbers" if name == "sum" else "compares numbers or strings"
            chk.error(f"{name}() {what}, not the items of {types.describe(kind)}", arg.span)
            return None
        if name in ("min", "max"):
            return item
        return types.NUMBER
    if name in ("keys", "values"):
        if kind not in (types.OBJECT, types.ANY):
            chk.error(f"{name}() takes an object, not {types.describe(kind)}", arg.span)
            return None
        return f"list[{types.STRING}]" if name == "keys" else types.LIST
    if kind not in ((types.STRING, types.PATH, types.ANY) if name == "matches" else (types.STRING, types.ANY)):
        chk.error(f"{name}() takes a string, not {types.describe(kind)}", arg.span)
        return None
    if name == "json":
        return types.ANY  # any JSON value: known when the call comes
    if name == "email":
        return types.EMAIL
    if name == "matches":
        return types.BOOL if _pattern(chk, call.args[1]) else None
    if name == "url":
        return types.URL if _scheme(chk, call.args[1]) else None
    raise TypeError(f"unknown function {name}")  # pragma: no cover - FUNCTIONS lists the names


__all__ = ["arith", "neg", "projection", "call", "projection_text"]
