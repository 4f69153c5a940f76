"""The syntax tree of a policy file, as the parser builds it and before any check.

Every node carries the `Span` it came from, so that the checker, the compiler and the explanation
of a decision can all point back at the source. Nodes are frozen: later stages derive new data,
they never patch the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from dsl.errors import Span

# --- conditions -------------------------------------------------------------------------------

Scalar = Union[str, int, float, bool, None]


@dataclass(frozen=True, slots=True)
class Literal:
    """A string, integer, decimal (a Python float), boolean or null written in the policy."""

    value: Scalar
    span: Span


@dataclass(frozen=True, slots=True)
class ListLiteral:
    """`[a, b, ...]`. The checker requires every item to be a literal."""

    items: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Path:
    """A field path: a root name (`tool`, `args`, `context`) and the keys below it.

    `keys` holds object keys as `str` and list indexes as `int` (negative counts from the end).
    """

    root: str
    keys: tuple[str | int, ...]
    span: Span

    @property
    def text(self) -> str:
        """The path written back in source form: `args.items[0]`, `args["content-type"]`."""
        out = self.root
        for key in self.keys:
            if isinstance(key, int):
                out += f"[{key}]"
            elif key.isidentifier():
                out += f".{key}"
            else:
                out += "[" + _quote(key) + "]"
        return out


@dataclass(frozen=True, slots=True)
class Call:
    """A function call: `len(x)`, `lower(x)`, `exists(path)`, `url(args.u).host` (`keys` are the
    fields and indexes read from the result, as in a Path)."""

    name: str
    args: tuple["Expr", ...]
    span: Span
    name_span: Span
    keys: tuple[str | int, ...] = ()


@dataclass(frozen=True, slots=True)
class Compare:
    """A binary test. `op` is one of `== != < <= > >= in not_in startswith endswith contains glob
    under`."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Not:
    operand: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Quantifier:
    """`any NAME in SOURCE: BODY` or `all NAME in SOURCE: BODY`: BODY is tested with NAME bound to
    each item of the list SOURCE."""

    kind: str
    var: str
    var_span: Span
    source: "Expr"
    body: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Arith:
    """`left OP right` with OP one of `+ - * /`: arithmetic on numbers (exact decimals, see
    dsl.numbers), and `+` also joins two lists (dsl.expressions)."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Neg:
    """`-operand`: a number negated. (`-5` written with its digits is a Literal.)"""

    operand: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Projection:
    """`base[*].keys...`: the list of what `keys` reads from each item of the list `base` (a Path
    or a Call with the accessors before the first `[*]`). `steps` holds the keys after each
    `[*]`: a second `[*]` goes over the items of each result and joins them into one list
    (`args.orders[*].lines[*].price`: every price of every line of every order)."""

    base: "Expr"
    steps: tuple[tuple[str | int, ...], ...]
    span: Span


Expr = Union[Literal, ListLiteral, Path, Call, Compare, Not, And, Or, Quantifier, Arith, Neg, Projection]


def children(node: "Expr") -> tuple:
    """The expressions directly under `node` (every kind of Expr; a Literal or a Path has none).
    The one list of what each node holds: every walk over a condition uses it, so a node added
    to the language is seen by all of them (dsl.history_eval.reads_history missed an Arith once,
    and the Gate decided `len(run) + 1 > 2` without the run)."""
    kind = type(node)
    if kind is Call:
        return node.args
    if kind is ListLiteral:
        return node.items
    if kind is Compare or kind is Arith:
        return (node.left, node.right)
    if kind is Not or kind is Neg:
        return (node.operand,)
    if kind is And or kind is Or:
        return node.operands
    if kind is Quantifier:
        return (node.source, node.body)
    if kind is Projection:
        return (node.base,)
    return ()

# --- rule clauses -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReasonClause:
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class ApproversClause:
    """`approvers N [from GROUP | from [...]]`. `group` names a group; `members` is an inline list."""

    count: int
    group: str | None
    members: ListLiteral | None
    span: Span
    source_span: Span | None


@dataclass(frozen=True, slots=True)
class DecisionsClause:
    names: tuple[tuple[str, Span], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TimeoutClause:
    """`timeout 4h [else reject ["message"]]` or `timeout 4h else escalate ...`; `seconds` is the
    parsed duration; `escalation` the next stage (then `on_timeout` is None)."""

    seconds: int
    text: str
    on_timeout: str | None
    on_timeout_span: Span | None
    message: str | None
    span: Span
    escalation: "Escalation | None" = None


@dataclass(frozen=True, slots=True)
class Escalation:
    """`escalate [approvers N from G] timeout D [else ...]`: the stage an ask moves to when the
    stage before it times out. `approvers` None is an error the checker reports (escalate to
    nobody); `keyword_span` is the span of `escalate`."""

    approvers: ApproversClause | None
    timeout: TimeoutClause
    keyword_span: Span
    span: Span


@dataclass(frozen=True, slots=True)
class RememberClause:
    """`remember run`, `remember session` or `remember 8h`: the widest scope a reviewer may give a
    standing decision of this ask. `scope` is the word or the duration as written; `seconds` the
    parsed duration (None for a word)."""

    scope: str
    seconds: int | None
    scope_span: Span
    span: Span


@dataclass(frozen=True, slots=True)
class IdClause:
    rule_id: str
    span: Span


Clause = Union[ReasonClause, ApproversClause, DecisionsClause, TimeoutClause, RememberClause, IdClause]

# --- statements -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selector:
    """A tool name, or a glob over tool names when it contains `*` or `?`."""

    pattern: str
    span: Span

    @property
    def is_glob(self) -> bool:
        return "*" in self.pattern or "?" in self.pattern


@dataclass(frozen=True, slots=True)
class Rule:
    """`EFFECT selectors [when CONDITION] clauses...`: one rule, as written."""

    effect: str
    effect_span: Span
    selectors: tuple[Selector, ...]
    condition: Expr | None
    clauses: tuple[Clause, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class DefaultDecl:
    """`default EFFECT ["reason"] clauses...`: what happens when no rule matches."""

    effect: str
    effect_span: Span
    reason: str | None
    clauses: tuple[Clause, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class GroupDecl:
    """`group NAME = ["a", "b"]`: a named set of approver identities."""

    name: str
    name_span: Span
    members: ListLiteral
    span: Span


@dataclass(frozen=True, slots=True)
class HomeDecl:
    """`home "/home/me"`: the home directory `~` stands for when the call's context has none."""

    path: str
    span: Span


@dataclass(frozen=True, slots=True)
class PolicyDecl:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class LetDecl:
    """`let NAME = EXPR` (`params` None: a named value, used as `NAME`) or `let NAME(P, ...) = EXPR`
    (`params`: the parameters' names and spans, used as `NAME(ARG, ...)`). Expanded where it is
    used by `dsl.lets`; later stages never see it."""

    name: str
    name_span: Span
    params: tuple[tuple[str, Span], ...] | None
    body: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class IncludeDecl:
    """`include "FILE.policy"`: the statements of FILE, a path relative to this file's folder, read
    in place of this statement (`dsl.includes`)."""

    path: str
    path_span: Span
    span: Span


Statement = Union[PolicyDecl, DefaultDecl, GroupDecl, HomeDecl, LetDecl, IncludeDecl, Rule]


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """The statements of one file, in source order."""

    statements: tuple[Statement, ...]

    def of_type(self, kind: type) -> list:
        return [s for s in self.statements if isinstance(s, kind)]


def _quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)
