"""Checks that refuse a policy which would otherwise be silently wrong.

`check(tree)` returns every diagnostic it finds, in source order; any `error` stops the policy from
loading (see `dsl.policy.Policy.from_text`). What it catches:

* names: unknown path roots (`arg.x`), unknown functions, unknown groups, unknown decisions, with a
  "did you mean" where one is close;
* types known at load time: `"a" > 3`, `len(3)`, `lower(true)`, a condition that is a literal
  string or null, a glob pattern that is not a string literal;
* rules: a `deny` without a reason, requirement clauses on rules that are not `ask`, a clause
  written twice, a quorum larger than its approver group, a timeout that would approve, duplicate
  rule ids;
* statements: duplicate groups, more than one `policy` or `default`.

Field values are only known at run time; a path has type `any` here, and a wrong type at run
time makes the condition error, which fails closed (see `dsl.compiler`).
"""

from __future__ import annotations

import difflib
from typing import Iterable

from dsl import ast
from dsl.errors import Diagnostic, Span
from dsl.requirements import DECISIONS, TIMEOUT_OUTCOMES
from dsl.subjects import Command, PathValue, UrlValue

ROOTS = ("tool", "args", "context")
FUNCTIONS = {"len": 1, "lower": 1, "exists": 1, "path": 1, "shell": 1, "url": 1}

# Load-time types of expressions. "any" is a field whose type is only known at run time. Lists may
# carry their item type ("list[command]"); "list" alone is a list of unknown items. The normalized
# subjects have their own types, with typed fields (dsl.subjects).
STRING, NUMBER, BOOL, NULL, LIST, OBJECT, ANY = "string", "number", "bool", "null", "list", "object", "any"
PATH, COMMAND, URL = "path", "command", "url"
SUBJECT_FIELDS = {PATH: PathValue.FIELDS, COMMAND: Command.FIELDS, URL: UrlValue.FIELDS}

_ORDERED = (NUMBER, STRING)
_STRINGISH = (STRING, PATH, ANY)  # a path reads as its text where a string is expected


def is_list(kind: str | None) -> bool:
    return kind == LIST or (kind or "").startswith("list[")


def item_type(kind: str) -> str:
    return kind[5:-1] if kind.startswith("list[") else ANY


def describe(kind: str) -> str:
    """A type for a message: "a string", "an object", "a list of commands"."""
    if kind.startswith("list["):
        return f"a list of {item_type(kind)}s"
    return _article(kind)

# How deeply conditions may nest (`not not ...`, parentheses inside comparisons, calls inside
# calls). The checker, the compiler and evaluation all recurse over a condition, so a limit far
# above anything written by hand keeps a pathological file a diagnostic instead of a RecursionError.
MAX_NESTING = 100


def _suggest(name: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeio" else "a ") + kind


def literal_type(value) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, (int, float)):
        return NUMBER
    return STRING


class _Checker:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.groups: dict[str, ast.GroupDecl] = {}
        self.depth = 0
        self.scope: dict[str, str] = {}  # quantifier variables in force → their types

    def error(self, message: str, span: Span | None, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic("error", message, span, help))

    def warning(self, message: str, span: Span | None, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic("warning", message, span, help))

    # --- statements ---------------------------------------------------------------------------

    def run(self, tree: ast.PolicyFile) -> list[Diagnostic]:
        policies = tree.of_type(ast.PolicyDecl)
        for extra in policies[1:]:
            self.error("a file declares one policy", extra.span, f"the first is at line {policies[0].span.line}")
        for group in tree.of_type(ast.GroupDecl):
            self.group(group)
        homes = tree.of_type(ast.HomeDecl)
        for extra in homes[1:]:
            self.error("a policy has one home", extra.span, f"the first is at line {homes[0].span.line}")
        for home in homes[:1]:
            if not home.path.startswith("/"):
                self.error("the home must be an absolute path", home.span, 'for example home "/home/me"')
        defaults = tree.of_type(ast.DefaultDecl)
        for extra in defaults[1:]:
            self.error("a policy has one default", extra.span, f"the first is at line {defaults[0].span.line}")
        for default in defaults:
            self.default(default)
        ids: dict[str, ast.IdClause] = {}
        for rule in tree.of_type(ast.Rule):
            self.rule(rule)
            for clause in rule.clauses:
                if isinstance(clause, ast.IdClause):
                    if clause.rule_id in ids:
                        first = ids[clause.rule_id].span.line
                        self.error(f"rule id '{clause.rule_id}' is already used", clause.span, f"first used at line {first}")
                    else:
                        ids[clause.rule_id] = clause
        order = {"error": 0, "warning": 1}
        return sorted(
            self.diagnostics,
            key=lambda d: (order[d.severity], d.span.line if d.span else 0, d.span.column if d.span else 0),
        )

    def group(self, group: ast.GroupDecl) -> None:
        if group.name in self.groups:
            first = self.groups[group.name].span.line
            self.error(f"group '{group.name}' is already defined", group.name_span, f"first defined at line {first}")
            return
        self.groups[group.name] = group
        self.members(group.members, f"group '{group.name}'")

    def members(self, members: ast.ListLiteral, what: str) -> None:
        if not members.items:
            self.error(f"{what} has no members", members.span)
        seen: set[str] = set()
        for item in members.items:
            if not (isinstance(item, ast.Literal) and isinstance(item.value, str)):
                self.error("approver identities are strings", item.span)
            elif item.value in seen:
                self.warning(f"'{item.value}' is listed twice in {what}", item.span)
            else:
                seen.add(item.value)

    def default(self, default: ast.DefaultDecl) -> None:
        reasons = [default.reason or ""] + [c.text for c in default.clauses if isinstance(c, ast.ReasonClause)]
        if default.effect == "deny" and not any(r.strip() for r in reasons):
            self.error(
                "a default deny needs a reason",
                default.effect_span,
                'the reason is what the agent reads: default deny "Tell the agent what to do instead."',
            )
        if default.effect == "allow":
            self.warning(
                "default allow lets every tool that no rule mentions run without a person",
                default.effect_span,
                "the safe default is ask (the default when none is written) or deny",
            )
        if default.reason and self.has(default.clauses, ast.ReasonClause):
            self.error("the default has two reasons", self.first(default.clauses, ast.ReasonClause).span)
        if self.has(default.clauses, ast.IdClause):
            self.error("'id' names a rule; the default has no id", self.first(default.clauses, ast.IdClause).span)
        self.clauses(default.effect, default.clauses, default.effect_span)

    def rule(self, rule: ast.Rule) -> None:
        seen_patterns: set[str] = set()
        for selector in rule.selectors:
            if not selector.pattern:
                self.error("a tool name cannot be empty", selector.span)
            elif selector.pattern in seen_patterns:
                self.warning(f"tool '{selector.pattern}' is listed twice", selector.span)
            seen_patterns.add(selector.pattern)
        if rule.condition is not None:
            self.condition(rule.condition)
        if rule.effect == "deny" and not any(c.text.strip() for c in rule.clauses if isinstance(c, ast.ReasonClause)):
            self.error(
                "a deny rule needs a reason",
                rule.effect_span,
                'add reason "..." : it is what the agent reads, so say what to do instead',
            )
        self.clauses(rule.effect, rule.clauses, rule.effect_span)

    @staticmethod
    def has(clauses, kind) -> bool:
        return any(isinstance(c, kind) for c in clauses)

    @staticmethod
    def first(clauses, kind):
        return next(c for c in clauses if isinstance(c, kind))

    def clauses(self, effect: str, clauses: tuple[ast.Clause, ...], effect_span: Span) -> None:
        seen: dict[type, ast.Clause] = {}
        names = {
            ast.ReasonClause: "reason",
            ast.ApproversClause: "approvers",
            ast.DecisionsClause: "decisions",
            ast.TimeoutClause: "timeout",
            ast.IdClause: "id",
        }
        for clause in clauses:
            kind = type(clause)
            if kind in seen:
                self.error(f"'{names[kind]}' is written twice", clause.span, f"first at line {seen[kind].span.line}")
                continue
            seen[kind] = clause
            if kind in (ast.ApproversClause, ast.DecisionsClause, ast.TimeoutClause) and effect != "ask":
                self.error(f"'{names[kind]}' applies only to ask", clause.span, f"this is {_article(effect)} rule")
                continue
            if isinstance(clause, ast.ApproversClause):
                self.approvers(clause)
            elif isinstance(clause, ast.DecisionsClause):
                self.decisions(clause)
            elif isinstance(clause, ast.TimeoutClause):
                self.timeout(clause)
            elif isinstance(clause, ast.IdClause) and not clause.rule_id.strip():
                self.error("a rule id cannot be empty", clause.span)

    def approvers(self, clause: ast.ApproversClause) -> None:
        if clause.count < 1:
            self.error("a quorum needs at least one approver", clause.span)
        size = None
        if clause.group is not None:
            group = self.groups.get(clause.group)
            if group is None:
                self.error(f"unknown group '{clause.group}'", clause.source_span, _suggest(clause.group, self.groups))
            else:
                size = len({i.value for i in group.members.items if isinstance(i, ast.Literal)})
        elif clause.members is not None:
            self.members(clause.members, "the approver list")
            size = len({i.value for i in clause.members.items if isinstance(i, ast.Literal)})
        if size is not None and 0 < size < clause.count:
            self.error(
                f"the quorum needs {clause.count} approvers but only {size} may approve",
                clause.span,
                "the proposer never counts, so a request here could never be approved",
            )

    def decisions(self, clause: ast.DecisionsClause) -> None:
        names = []
        for name, span in clause.names:
            if name not in DECISIONS:
                hint = _suggest(name, DECISIONS) or f"the decisions are {', '.join(DECISIONS)}"
                self.error(f"unknown decision '{name}'", span, hint)
            elif name in names:
                self.warning(f"decision '{name}' is listed twice", span)
            names.append(name)
        if "reject" not in names:
            self.error(
                "the decisions must include reject",
                clause.span,
                "a person must always be able to say no (and give the agent a reason)",
            )

    def timeout(self, clause: ast.TimeoutClause) -> None:
        if clause.seconds <= 0:
            self.error("a timeout must be longer than zero", clause.span)
        if clause.on_timeout is None or clause.on_timeout in TIMEOUT_OUTCOMES:
            return
        if clause.on_timeout in ("approve", "allow", "edit", "respond"):
            self.error(
                f"a timeout cannot {clause.on_timeout}",
                clause.on_timeout_span,
                "silence never means yes: write 'else reject' (the default)",
            )
        else:
            hint = _suggest(clause.on_timeout, TIMEOUT_OUTCOMES) or "write 'else reject' (the default)"
            self.error(f"unknown timeout outcome '{clause.on_timeout}'", clause.on_timeout_span, hint)

    # --- conditions ---------------------------------------------------------------------------

    def condition(self, expr: ast.Expr) -> None:
        kind = self.expr(expr)
        if kind in (BOOL, ANY, None):  # None: an error was already reported below
            return
        self.error(f"a condition must be true or false, but this is {_article(kind)}", expr.span)

    def boolean_operand(self, expr: ast.Expr, context: str) -> None:
        kind = self.expr(expr)
        if kind not in (BOOL, ANY, None):
            self.error(f"'{context}' needs true or false, but this is {_article(kind)}", expr.span)

    def expr(self, expr: ast.Expr) -> str | None:
        """The load-time type of `expr`, or None when an error was reported inside it."""
        if self.depth >= MAX_NESTING:
            self.error(f"the condition nests more than {MAX_NESTING} levels deep", expr.span, "split it into several rules")
            return None
        self.depth += 1
        try:
            return self._expr(expr)
        finally:
            self.depth -= 1

    def _expr(self, expr: ast.Expr) -> str | None:
        if isinstance(expr, ast.Literal):
            return literal_type(expr.value)
        if isinstance(expr, ast.ListLiteral):
            ok = True
            for item in expr.items:
                if not isinstance(item, ast.Literal):
                    self.error("list items must be literal values", item.span)
                    ok = False
            kinds = {literal_type(i.value) for i in expr.items if isinstance(i, ast.Literal)}
            return (f"list[{kinds.pop()}]" if len(kinds) == 1 else LIST) if ok else None
        if isinstance(expr, ast.Path):
            return self.path(expr)
        if isinstance(expr, ast.Call):
            return self.call(expr)
        if isinstance(expr, ast.Not):
            self.boolean_operand(expr.operand, "not")
            return BOOL
        if isinstance(expr, (ast.And, ast.Or)):
            word = "and" if isinstance(expr, ast.And) else "or"
            for operand in expr.operands:
                self.boolean_operand(operand, word)
            return BOOL
        if isinstance(expr, ast.Compare):
            return self.compare(expr)
        if isinstance(expr, ast.Quantifier):
            return self.quantifier(expr)
        raise TypeError(f"unknown expression node {expr!r}")  # pragma: no cover

    def quantifier(self, q: ast.Quantifier) -> str | None:
        source = self.expr(q.source)
        if source is not None and not is_list(source) and source != ANY:
            self.error(f"'{q.kind}' goes over a list, not {describe(source)}", q.source.span)
        if q.var in ROOTS or q.var in FUNCTIONS or q.var in self.scope:
            self.error(f"the name '{q.var}' is already taken", q.var_span, "choose another name for the item")
        outer = dict(self.scope)
        self.scope[q.var] = item_type(source) if source is not None and is_list(source) else ANY
        try:
            self.boolean_operand(q.body, f"{q.kind} ...:")
        finally:
            self.scope = outer
        return BOOL

    def path(self, path: ast.Path) -> str | None:
        if path.root in self.scope:
            kind = self.scope[path.root]
        elif path.root in ROOTS:
            if path.root == "tool":
                if path.keys:
                    self.error("tool is the tool's name, a string; it has no fields", path.span, "fields are under args")
                    return None
                return STRING
            kind = OBJECT
        else:
            choices = ROOTS + tuple(FUNCTIONS) + tuple(self.scope)
            hint = _suggest(path.root, choices) or "conditions read tool, args.<field> or context.<field>"
            self.error(f"unknown name '{path.root}'", path.span, hint)
            return None
        for key in path.keys:
            kind = self.step(kind, key, path)
            if kind is None:
                return None
        return kind

    def step(self, kind: str, key: str | int, path: ast.Path | ast.Call) -> str | None:
        """The type of `value[key]` for a value of type `kind`; None after reporting an error."""
        if kind in SUBJECT_FIELDS:
            fields = SUBJECT_FIELDS[kind]
            if isinstance(key, str) and key in fields:
                return fields[key]
            shown = key if isinstance(key, str) else f"[{key}]"
            hint = _suggest(str(key), fields) or f"its fields are {', '.join(fields)}"
            self.error(f"{_article(kind)} has no field '{shown}'", path.span, hint)
            return None
        if kind in (STRING, NUMBER, BOOL, NULL):
            self.error(f"{_article(kind)} has no fields or items", path.span)
            return None
        if is_list(kind):
            if isinstance(key, str):
                self.error(f"{describe(kind)} has items, not fields", path.span, "use an index: [0]")
                return None
            return item_type(kind)
        return ANY

    def call(self, call: ast.Call) -> str | None:
        kind = self.call_result(call)
        for key in call.keys:
            if kind is None:
                return None
            kind = self.step(kind, key, call)
        return kind

    def call_result(self, call: ast.Call) -> str | None:
        arity = FUNCTIONS.get(call.name)
        if arity is None:
            known = ", ".join(FUNCTIONS)
            self.error(f"unknown function '{call.name}'", call.name_span, _suggest(call.name, FUNCTIONS) or f"the functions are {known}")
            return None
        if len(call.args) != arity:
            self.error(f"{call.name}() takes {arity} argument, not {len(call.args)}", call.span)
            return None
        (arg,) = call.args
        if call.name == "exists":
            if not isinstance(arg, ast.Path) or (arg.root not in ("args", "context") and arg.root not in self.scope):
                self.error("exists() takes a field path under args or context", arg.span, "for example exists(args.force)")
                return None
            if not arg.keys:
                self.warning(f"exists({arg.root}) is always true", call.span)
            return BOOL
        kind = self.expr(arg)
        if kind is None:
            return None
        if call.name == "len":
            if kind not in (STRING, OBJECT, ANY) and not is_list(kind):
                self.error(f"len() takes a string, list or object, not {describe(kind)}", arg.span)
                return None
            return NUMBER
        expected = {"lower": (STRING, ANY), "path": (STRING, PATH, ANY), "shell": (STRING, ANY), "url": (STRING, ANY)}[call.name]
        if kind not in expected:
            self.error(f"{call.name}() takes a string, not {describe(kind)}", arg.span)
            return None
        return {"lower": STRING, "path": PATH, "shell": f"list[{COMMAND}]", "url": URL}[call.name]

    def compare(self, cmp: ast.Compare) -> str | None:
        left, right = self.expr(cmp.left), self.expr(cmp.right)
        if left is None or right is None:
            return BOOL
        op = cmp.op
        shown = op.replace("_", " ")
        if op in ("==", "!="):
            if not _comparable(left, right):
                self.error(
                    f"'{shown}' compares {describe(left)} with {describe(right)}",
                    cmp.span,
                    "values of different types are never equal; a wrong type at run time is an error, which never allows",
                )
        elif op in ("<", "<=", ">", ">="):
            for side, kind in ((cmp.left, left), (cmp.right, right)):
                if kind not in _ORDERED + (ANY,):
                    self.error(f"'{op}' orders numbers or strings, not {describe(kind)}", side.span)
                    return BOOL
            if left != right and ANY not in (left, right):
                self.error(f"'{op}' compares {_article(left)} with {_article(right)}", cmp.span)
        elif op in ("in", "not_in"):
            if right not in (STRING, ANY) and not is_list(right):
                self.error(f"'{shown}' needs a list or a string on its right, not {describe(right)}", cmp.right.span)
            elif right == STRING and left not in _STRINGISH:
                self.error(f"'{shown}' on a string looks for a substring; this is {describe(left)}", cmp.left.span)
            elif isinstance(cmp.right, ast.ListLiteral):
                self.membership(shown, left, cmp.right, cmp.span)
            elif is_list(right) and not _comparable(left, item_type(right)):
                self.error(f"'{shown}' looks for {describe(left)} in {describe(right)}", cmp.span)
        elif op in ("startswith", "endswith"):
            if is_list(left) or is_list(right):
                for side, kind in ((cmp.left, left), (cmp.right, right)):
                    if not is_list(kind) and kind != ANY:
                        self.error(f"'{op}' compares a list with a list, not with {describe(kind)}", side.span)
            else:
                for side, kind in ((cmp.left, left), (cmp.right, right)):
                    if kind not in _STRINGISH:
                        self.error(f"'{op}' works on strings or lists, not {describe(kind)}", side.span)
        elif op == "contains":
            if left not in (STRING, ANY) and not is_list(left):
                self.error(f"'contains' looks inside a string or a list, not {describe(left)}", cmp.left.span)
            elif left == STRING and right not in _STRINGISH:
                self.error(f"a string contains substrings, not {describe(right)}", cmp.right.span)
            elif isinstance(cmp.left, ast.ListLiteral):  # `[...] contains x` is `x in [...]`
                self.membership("contains", right, cmp.left, cmp.span)
            elif is_list(left) and not _comparable(item_type(left), right):
                self.error(f"'contains' looks for {describe(right)} in {describe(left)}", cmp.span)
        elif op == "glob":
            if left not in _STRINGISH:
                self.error(f"'glob' matches strings or paths, not {describe(left)}", cmp.left.span)
            if not (isinstance(cmp.right, ast.Literal) and isinstance(cmp.right.value, str)):
                self.error("a glob pattern must be a string literal", cmp.right.span, 'for example args.path glob "*.env"')
        elif op == "under":
            for side, kind in ((cmp.left, left), (cmp.right, right)):
                if kind not in _STRINGISH:
                    self.error(f"'under' compares paths, not {describe(kind)}", side.span)
        return BOOL

    def membership(self, shown: str, item: str, items: ast.ListLiteral, span: Span) -> None:
        """A value of load-time type `item` looked up in a literal list: an error when no item of the
        list could ever equal it (run time would raise the same error on every call)."""
        if item == PATH:
            item = STRING  # a path is compared by its text
        if item == ANY or not items.items:
            return
        kinds = {literal_type(i.value) for i in items.items if isinstance(i, ast.Literal)}
        if item not in kinds and NULL not in kinds and item != NULL:
            self.error(f"'{shown}' looks for {_article(item)} in a list of {' and '.join(sorted(kinds))} values", span)


def _comparable(a: str, b: str) -> bool:
    """Could `==` ever compare values of these load-time types without an error?"""
    if ANY in (a, b) or NULL in (a, b) or a == b:
        return True
    if {a, b} == {PATH, STRING}:
        return True  # a path equals the string of its text
    return is_list(a) and is_list(b)


def check(tree: ast.PolicyFile) -> list[Diagnostic]:
    """Every diagnostic for `tree`: errors first, then warnings, each group in source order."""
    return _Checker().run(tree)
