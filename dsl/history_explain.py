"""What `policy explain` shows of a history read (dsl.explain.Step.seqs): the seqs of the ledger
events it used (docs/policy-language.md, "History and provenance")."""

from __future__ import annotations

from typing import Any

from dsl import ast, history, values
from dsl.history_eval import HISTORY_FUNCTIONS, HISTORY_ROOT


def seqs_used(node: Any, value: Any, children: list, env: Any) -> tuple[int, ...]:
    """The seqs a traced node read: of the calls of `run` and `calls()` (before any field was
    read), of the origins `sources()` found, and of the first result of each tool in which
    `from_tool()` found its value (at most 10). Empty for any other node, and for a lookup that
    found nothing."""
    if isinstance(node, ast.Path) and node.root == HISTORY_ROOT:
        if node.keys:  # `run[0].tool`: the one call read, or all of them for len-like reads
            return ()
        return history.seqs_of(value)
    if not isinstance(node, ast.Call) or node.name not in HISTORY_FUNCTIONS:
        return ()
    if node.name in ("calls", "sources"):
        return history.seqs_of(value) if not node.keys else ()
    if node.name == "from_tool" and value is True and children:
        try:  # the first result of each tool the pattern covers (not every occurrence: linear in a scan)
            return history.of(env.history).first_results(children[0].value, node.args[1].value)
        except values.EvalError:
            return ()
    if node.name == "total" and children:
        return history.seqs_of(children[0].value)
    return ()
