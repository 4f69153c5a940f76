"""The policy language's keywords (grammars/policy.lark), apart from the parser so that what only
prints a tree (dsl.fmt's rule_text, which the compiler uses for rule ids) does not import Lark."""

STATEMENT_KEYWORDS = ("policy", "default", "group", "home", "let", "include", "allow", "deny", "ask")
CLAUSE_KEYWORDS = ("when", "reason", "approvers", "decisions", "timeout", "remember", "id")
OPERATOR_KEYWORDS = ("and", "or", "not", "in", "startswith", "endswith", "contains", "glob", "under", "any", "all")
KEYWORDS = STATEMENT_KEYWORDS + CLAUSE_KEYWORDS + OPERATOR_KEYWORDS + ("from", "else")
