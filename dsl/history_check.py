"""The checker's part for the history constructs (docs/policy-language.md, "History and
provenance"): the types of `run` and of the history functions, their literal arguments, and the
bound on scans. Reading the run costs time linear in its length when it goes over its calls
(`run`, `calls()`, `sources()`, and whatever is made of them: `run[*].tool`,
`count(calls("pay"))`, `total(calls("pay"), "args.n")`), and a constant when it looks a value up in the index (`from_user()`,
`from_tool()`). A quantifier's body is evaluated once per item, so inside the body of a
quantifier whose list is made of the run's calls (a *scan*) no other linear read is allowed, and
inside the body of any other quantifier (over a call's own list: `any r in args.to: ...`) none but
`sources(item)` (its cost is the item's occurrences; `calls()` and `run` do not depend on the
item and belong outside the quantifier). So every condition costs at most the run's length
times the size of the call (tests/test_history.py measures it as a ratio).

Called by `dsl.checker._Checker` (`path`, `call_result`, `quantifier`)."""

from __future__ import annotations

from typing import Any

from dsl import ast
from dsl.history_eval import HISTORY_FUNCTIONS, HISTORY_ROOT, LITERAL_ARGUMENT

CALL, ORIGIN = "call", "origin"
RUN_TYPE = f"list[{CALL}]"
CALL_FIELDS = {"seq": "number", "tool": "string", "args": "object", "effect": "string", "status": "string",
               "decided_by": "list[string]", "rules": "list[string]", "result": "any"}
ORIGIN_FIELDS = {"kind": "string", "tool": "any", "seq": "any", "field": "string"}
_WHAT = {"calls": "a tool name or a glob, such as \"refund*\"", "from_tool": "a tool name or a glob, such as \"*web*\"",
         "total": "a dotted field path, such as \"args.amount\""}


def call_result(checker: Any, call: ast.Call) -> str | None:
    """The load-time type of a history function's result, or None after an error."""
    arity = HISTORY_FUNCTIONS[call.name]
    if len(call.args) != arity:
        checker.error(f"{call.name}() takes {arity} argument{'s' if arity > 1 else ''}, not {len(call.args)}", call.span)
        return None
    literal = LITERAL_ARGUMENT.get(call.name)
    for i, arg in enumerate(call.args):
        if i == literal:
            if not (isinstance(arg, ast.Literal) and isinstance(arg.value, str) and arg.value):
                checker.error(f"{call.name}()'s {'first' if i == 0 else 'second'} argument must be a string literal",
                              arg.span, f"it is {_WHAT[call.name]}: the history is looked up by it at load")
                return None
            continue
        kind = checker.expr(arg)
        if kind is None:
            return None
        if call.name == "total":
            if not (kind == "any" or kind.startswith("list")):
                checker.error(f"total() sums over a list, not {_a(kind)}", arg.span)
                return None
        elif kind not in ("string", "number", "any", "path"):
            checker.error(f"{call.name}() looks up a string or a number, not {_a(kind)}", arg.span,
                          f"for each item of a list: `all x in LIST: {call.name}(x{', ...' if arity > 1 else ''})`")
            return None
    return {"calls": RUN_TYPE, "total": "number", "sources": f"list[{ORIGIN}]", "from_user": "bool", "from_tool": "bool"}[call.name]


LINEAR_FUNCTIONS = ("calls", "sources")  # their cost grows with the run's length (total() sums the list it is given)


def reads_run(expr: Any) -> bool:
    """Whether evaluating `expr` goes over the run's calls (`run` or a function of LINEAR_FUNCTIONS
    anywhere in it): a quantifier over such a list is a scan."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if (isinstance(e, ast.Path) and e.root == HISTORY_ROOT) or (isinstance(e, ast.Call) and e.name in LINEAR_FUNCTIONS):
            return True
        stack.extend(ast.children(e))
    return False


def linear_read(checker: Any, what: str, node: Any) -> None:
    """Refuse `node` (a `run` path or a call of LINEAR_FUNCTIONS, named `what`) where the
    enclosing quantifiers (`checker.quantifiers`: (quantifier, is it a scan) pairs, innermost
    last) would evaluate it once per item."""
    if not checker.quantifiers:
        return
    if any(scan for _q, scan in checker.quantifiers):
        checker.error(f"{what} inside a scan over the run's calls costs the square of the run's length", node.span,
                      "look the value up instead: sources(x), from_tool(x, \"tool\"), or count with calls(\"tool\") "
                      "outside the scan")
    elif what != "sources()":
        checker.error(f"{what} inside a quantifier is read again for each item", node.span,
                      "it does not depend on the item: write it outside the quantifier (`... and len(calls(\"t\")) > 2`), "
                      "or look the item up with sources(x) or from_tool(x, \"tool\")")


def is_history_root(name: str) -> bool:
    return name == HISTORY_ROOT


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeio" else "a ") + kind
