"""The checker's part for the history constructs (docs/policy-language.md, "History and
provenance"): the types of `run` and of the history functions, their literal arguments, and the
bound on scans: a scan over the run's calls (`any/all ... in run` or `in calls(...)`) nested in
another is refused, since it costs the square of the run's length.

Called by `dsl.checker._Checker` (`path`, `call_result`, `quantifier`)."""

from __future__ import annotations

from typing import Any

from dsl import ast
from dsl.history_eval import HISTORY_FUNCTIONS, HISTORY_ROOT, LITERAL_ARGUMENT, is_scan

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


def scan_nesting(checker: Any, q: ast.Quantifier, scans: list) -> bool:
    """Refuse a scan over the run's calls inside another (`scans`: the enclosing ones). Returns
    whether `q` is a scan (the caller pushes it while checking the body)."""
    if not is_scan(q.source):
        return False
    if scans:
        checker.error("a scan over the run's calls inside another scan over them costs the square of the run's length",
                      q.source.span, "look the value up instead: sources(x), from_tool(x, \"tool\"), or count with calls(\"tool\")")
    return True


def is_history_root(name: str) -> bool:
    return name == HISTORY_ROOT


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeio" else "a ") + kind
