"""What `policy explain` shows of a history read (dsl.explain.Step.seqs): the seqs of the ledger
events it used (docs/policy-language.md, "History and provenance")."""

from __future__ import annotations

from typing import Any

from dsl import ast, history, values
from dsl.history_eval import HISTORY_FUNCTIONS, HISTORY_ROOT


def seqs_used(node: Any, value: Any, children: list, env: Any) -> tuple[int, ...]:
    """The seqs a traced node read: of the calls of `run` and `calls()` (before any field was
    read), of the origins `sources()` found, and of the results `from_tool()` found its value
    in. Empty for any other node, and for a lookup that found nothing."""
    if isinstance(node, ast.Path) and node.root == HISTORY_ROOT:
        if node.keys:  # `run[0].tool`: the one call read, or all of them for len-like reads
            return ()
        return history.seqs_of(value)
    if not isinstance(node, ast.Call) or node.name not in HISTORY_FUNCTIONS:
        return ()
    if node.name in ("calls", "sources"):
        return history.seqs_of(value) if not node.keys else ()
    if node.name == "from_tool" and value is True and children:
        looked_up = children[0].value
        pattern = node.args[1].value
        regex = values.selector_regex(pattern)
        try:
            found = history.of(env.history).origins(looked_up)
        except values.EvalError:
            return ()
        return tuple(dict.fromkeys(seq for kind, tool, seq, _ in found if kind == "result" and regex.match(tool)))
    if node.name == "total" and children:
        return history.seqs_of(children[0].value)
    return ()
