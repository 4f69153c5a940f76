"""The countersign policy language: parse → check → compile → evaluate.

    from dsl import Policy
    decision = Policy.load("samples/retail.policy").evaluate("get_user_details", {"user_id": "u1"})

The reference is docs/policy-language.md.
"""

from dsl.decision import Decision, RuleOutcome
from dsl.errors import Diagnostic, PolicyError, PolicyInputError, Span
from dsl.policy import Policy
from dsl.requirements import Requirements

__all__ = ["Decision", "Diagnostic", "Policy", "PolicyError", "PolicyInputError", "Requirements", "RuleOutcome", "Span"]
