"""The countersign policy language: parse → check → compile → evaluate.

    from dsl import Policy
    decision = Policy.load("samples/retail.policy").evaluate("get_user_details", {"user_id": "u1"})

The reference is docs/policy-language.md.

The names below are imported on first use (PEP 562): the ledger reads `dsl.requirements` and
`dsl.jsoninput` without paying for the compiler (about 100 ms) in a process that never loads a
policy, such as `countersign review list`.
"""

from importlib import import_module
from typing import TYPE_CHECKING

_WHERE = {
    "Decision": "dsl.decision", "RuleOutcome": "dsl.decision",
    "Diagnostic": "dsl.errors", "PolicyError": "dsl.errors", "PolicyInputError": "dsl.errors", "Span": "dsl.errors",
    "Policy": "dsl.policy", "Requirements": "dsl.requirements",
}

__all__ = ["Decision", "Diagnostic", "Policy", "PolicyError", "PolicyInputError", "Requirements", "RuleOutcome", "Span"]

if TYPE_CHECKING:
    from dsl.decision import Decision, RuleOutcome
    from dsl.errors import Diagnostic, PolicyError, PolicyInputError, Span
    from dsl.policy import Policy
    from dsl.requirements import Requirements


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dsl' has no attribute {name!r}")
