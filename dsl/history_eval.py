"""How the compiler evaluates the history constructs (docs/policy-language.md, "History and
provenance"): the root `run` and the functions `calls`, `total`, `sources`, `from_user`,
`from_tool`, over `Env.history` (a dsl.history.History, None for an empty run).

Only the generic evaluator knows them: the specialized predicates (`dsl.compiler._fast`) call
these closures for any node that reads history, and the plans (`compile_plan`) never take such a
node as a shape (it raises `_NoShape` there), so the three evaluators agree by construction. The one
specialization is `indexed_quantifier`: `any`/`all` over `run` whose body compares `c.tool`,
`c.effect` or `c.status` with literals is a count in the history's index, which gives exactly
what the loop over the calls gives (tests/test_history.py compares them).
"""

from __future__ import annotations

from typing import Any, Callable

from dsl import ast, history

HISTORY_FUNCTIONS = {"calls": 1, "total": 2, "sources": 1, "from_user": 1, "from_tool": 2}
HISTORY_ROOT = "run"
# The functions whose second argument (or only one, for calls) must be a string literal: a tool
# name or glob, or a dotted field path.
LITERAL_ARGUMENT = {"calls": 0, "from_tool": 1, "total": 1}
SCANS = ("calls",)  # besides `run`: a value whose items a quantifier scans


def reads_history(expr: Any) -> bool:
    """Whether a condition (or any node under it) reads the run's history."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Path):
            if e.root == HISTORY_ROOT:
                return True
        elif isinstance(e, ast.Call):
            if e.name in HISTORY_FUNCTIONS:
                return True
            stack.extend(e.args)
        elif isinstance(e, ast.Compare):
            stack += (e.left, e.right)
        elif isinstance(e, (ast.And, ast.Or)):
            stack.extend(e.operands)
        elif isinstance(e, ast.Not):
            stack.append(e.operand)
        elif isinstance(e, ast.Quantifier):
            stack += (e.source, e.body)
        elif isinstance(e, ast.ListLiteral):
            stack.extend(e.items)
        elif isinstance(e, ast.Arith):  # `count(calls("pay")) + 1 > 3`
            stack += (e.left, e.right)
        elif isinstance(e, ast.Neg):
            stack.append(e.operand)
        elif isinstance(e, ast.Projection):  # `sum(run[*].args.amount) > 500`
            stack.append(e.base)
    return False


def is_scan(source: Any) -> bool:
    """Whether a quantifier's source is a list of the run's calls (`run`, `calls(...)`)."""
    return (isinstance(source, ast.Path) and source.root == HISTORY_ROOT) or (
        isinstance(source, ast.Call) and source.name in SCANS)


def compile_run(keys: tuple, reader: Callable[[str, tuple], Callable[[Any], Any]]) -> Callable:
    """`run`, `run[0].tool`, ...: the earlier calls, then the keys read from them."""
    if not keys:
        return lambda env: history.of(env.history).calls_list()
    read = reader(HISTORY_ROOT, keys)
    return lambda env: read(history.of(env.history).calls_list())


def compile_call(call: ast.Call, compile_expr: Callable[[Any], Callable]) -> Callable:
    """The closure of a history function's result (the checker made its literal arguments
    string literals)."""
    name = call.name
    if name == "calls":
        pattern = call.args[0].value
        return lambda env: history.of(env.history).tool_calls(pattern)
    if name == "total":
        items, field = compile_expr(call.args[0]), call.args[1].value
        return lambda env: history.total(items(env), field)
    value = compile_expr(call.args[0])
    if name == "sources":
        return lambda env: history.sources(env.history, env.context, value(env))
    if name == "from_user":
        return lambda env: history.from_user(env.context, value(env))
    if name == "from_tool":
        pattern = call.args[1].value
        return lambda env: history.from_tool(env.history, value(env), pattern)
    raise TypeError(f"unknown history function {name}")  # pragma: no cover - the checker stops it


def _counted_test(body: Any, var: str) -> tuple[str, str, frozenset] | None:
    """(field, op, literals) when `body` is `VAR.FIELD == "lit"`, `!=`, `in [...]` or `not in
    [...]` with FIELD one of history.COUNTED_FIELDS and string literals only; else None."""
    if not isinstance(body, ast.Compare) or body.op not in ("==", "!=", "in", "not_in"):
        return None
    left, right = body.left, body.right
    if not (isinstance(left, ast.Path) and left.root == var and len(left.keys) == 1 and left.keys[0] in history.COUNTED_FIELDS):
        return None
    if body.op in ("==", "!="):
        if not (isinstance(right, ast.Literal) and type(right.value) is str):
            return None
        literals = frozenset((right.value,))
    else:
        if not (isinstance(right, ast.ListLiteral) and all(isinstance(i, ast.Literal) and type(i.value) is str for i in right.items)):
            return None
        literals = frozenset(i.value for i in right.items)
    return left.keys[0], body.op, literals


def indexed_quantifier(q: ast.Quantifier) -> Callable | None:
    """`any/all c in run: c.FIELD OP LITERALS` as counts in the history's index, or None.

    With n earlier calls and k of them whose FIELD is among the literals: `any ==/in` is k > 0,
    `any !=/not in` is k < n, `all ==/in` is k == n, `all !=/not in` is k == 0. Every call record
    has the three fields as strings, so the body never errors and these are exactly the loop's
    answers."""
    if not (isinstance(q.source, ast.Path) and q.source.root == HISTORY_ROOT and not q.source.keys):
        return None
    test = _counted_test(q.body, q.var)
    if test is None:
        return None
    field, op, literals = test
    positive, deciding = op in ("==", "in"), q.kind == "any"

    def counted(env: Any) -> bool:
        h = history.of(env.history)
        n = len(h.calls_list())
        k = sum(h.count(field, lit) for lit in literals)
        if deciding:
            return k > 0 if positive else k < n
        return k == n if positive else k == 0

    return counted
