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

With external groups (`check(tree, groups={NAME: (identity, ...)})`, a roster's groups: see
`dsl.policy.Policy.from_text`) an `approvers N from GROUP` may also name one of them; a group the
policy defines that is also an external one with other members is an error (a name means one
group; the same members in both places are one group), and so is a
quorum larger than the external group. Without them, an unknown group's help says to pass
`--roster FILE` if it is a roster group.

Field values are only known at run time; a path has type `any` here, and a wrong type at run
time makes the condition error, which fails closed (see `dsl.compiler`).

With tool schemas (`check(tree, tools=ToolSchemas)`, see `dsl.schema`) the checker also knows the
tools and their arguments: a selector that names no known tool, an `args` path the schema of a
tool the rule covers does not have, and a comparison of the wrong type or with a value outside the
schema's `enum` are errors. A condition is then checked once for every tool its rule covers, with
`args.*` typed from that tool's schema; a path guarded by `exists()` (`exists(args.x) and ...`,
`not exists(args.x) or ...`) may be missing from some of them.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Mapping

from dsl import ast, escalation, history_check
from dsl.errors import Diagnostic, Span, span_where
from dsl.requirements import DECISIONS, MAX_REMEMBER_SECONDS, REMEMBER_SCOPES, TIMEOUT_OUTCOMES
from dsl.schema import ArgType, ToolSchemas, enum_allows
from dsl.subjects import Command, PathValue, UrlValue, winpaths
from dsl.subjects.emails import EmailValue
from dsl.expressions import FUNCTIONS as _EXTENDED_FUNCTIONS, NODES as _EXTENDED_NODES, is_extended_call

ROOTS = ("tool", "args", "context", "run")
FUNCTIONS = {"len": 1, "lower": 1, "exists": 1, "path": 1, "shell": 1, "url": 1, **history_check.HISTORY_FUNCTIONS}
FUNCTIONS.update({name: most for name, (_, most) in _EXTENDED_FUNCTIONS.items()})  # dsl.expressions

# Load-time types of expressions. "any" is a field whose type is only known at run time. Lists may
# carry their item type ("list[command]"); "list" alone is a list of unknown items. The normalized
# subjects have their own types, with typed fields (dsl.subjects).
STRING, NUMBER, BOOL, NULL, LIST, OBJECT, ANY = "string", "number", "bool", "null", "list", "object", "any"
PATH, COMMAND, URL, EMAIL = "path", "command", "url", "email"
SUBJECT_FIELDS = {PATH: PathValue.FIELDS, COMMAND: Command.FIELDS, URL: UrlValue.FIELDS, EMAIL: EmailValue.FIELDS,
                  history_check.CALL: history_check.CALL_FIELDS, history_check.ORIGIN: history_check.ORIGIN_FIELDS}

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

# Bounds that keep requirements meaningful and representable (a deadline must be a date; a quorum
# fits every integer column an auditor may load it into).
MAX_QUORUM = 1000
MAX_TIMEOUT_SECONDS = 365 * 86400


_SUGGEST_CANDIDATES = 200  # difflib compares each candidate in time quadratic in the names' length


def _suggest(name: str, choices: Iterable[str]) -> str | None:
    """"did you mean ...?" for the closest of `choices` (difflib's ratio at least 0.6), or None.
    Past _SUGGEST_CANDIDATES choices (a file of thousands of lets) only those of a length the
    ratio allows (the shorter at least 3/7 of the longer) and the same first letter are compared,
    at most that many."""
    import difflib  # for a misspelled name only

    pool = list(choices)
    if len(pool) > _SUGGEST_CANDIDATES:
        pool = [c for c in pool if c[:1] == name[:1] and 7 * min(len(c), len(name)) >= 3 * max(len(c), len(name))]
        pool = pool[:_SUGGEST_CANDIDATES]
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
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
    let_names: tuple[str, ...] = ()  # the policy's lets (dsl.lets sets them), offered in the hints of unknown names

    def __init__(self, tools: ToolSchemas | None = None, external: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.groups: dict[str, ast.GroupDecl] = {}
        self.external = external  # the roster's groups, None when none was given
        self.depth = 0
        self.too_deep = False  # the nesting error of the condition being checked was reported
        # id(and/or node) → its exists() guards (`_exists_guards`): a nested `and` is asked again
        # by each enclosing one, which a chain of lets (`let b = a and ...`) makes cubic otherwise
        self.guard_memo: dict[int, tuple[ast.Expr, tuple]] = {}
        self.scope: dict[str, str] = {}  # quantifier variables in force → their types
        # the enclosing quantifiers, innermost last, each with whether its list is made of the
        # run's calls (a scan): what a history read may cost in their bodies (dsl.history_check)
        self.quantifiers: list[tuple[ast.Quantifier, bool]] = []
        # With tool schemas: the tool whose schema types `args` while a condition is checked, the
        # schemas of quantifier variables, the exists()-guarded paths in force, and what the
        # per-tool passes found (reported once per rule, see `schema_condition`).
        self.tools = tools
        self.tool: str | None = None
        self.args_schema: ArgType | None = None
        self.scope_schemas: dict[str, ArgType | None] = {}
        self.guards: tuple[tuple[str, tuple], ...] = ()
        self.unknown: dict[tuple[Span, str, str, bool], dict[str, list[str]]] = {}
        self.enum_errors: set[tuple[str, Span]] = set()
        self.exists_unknown: dict[tuple[Span, str], dict[str, list[str]]] = {}
        self.seen_types: dict[Span, tuple[str, str]] = {}
        # The programs an `and` pins a quantifier's command to (`c.program == "rm" and ...`), for
        # the flag names a hint gives (`dsl.hints`).
        self.programs: dict[str, frozenset[str]] = {}

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
        for name, group in self.groups.items():
            if self.external is not None and name in self.external:
                members = {i.value for i in group.members.items if isinstance(i, ast.Literal) and isinstance(i.value, str)}
                if members != set(self.external[name]):  # the same members in both places mean one group
                    self.error(f"group '{name}' is defined in the policy (line {group.span.line}) with other members "
                               "than the roster's", group.name_span,
                               "a name means one group: give both the same members, or rename one of them")
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
                        self.error(f"rule id '{clause.rule_id}' is already used", clause.span, f"first used at {span_where(ids[clause.rule_id].span)}")
                    else:
                        ids[clause.rule_id] = clause
        order = {"error": 0, "warning": 1}
        unique = list(dict.fromkeys(self.diagnostics))  # one problem is reported once
        return sorted(
            unique,
            key=lambda d: (order[d.severity], d.span.line if d.span else 0, d.span.column if d.span else 0),
        )

    def group(self, group: ast.GroupDecl) -> None:
        if group.name in self.groups:
            self.error(f"group '{group.name}' is already defined", group.name_span, f"first defined at {span_where(self.groups[group.name].span)}")
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
        covered = self.selected_tools(rule) if self.tools is not None else []
        cond = rule.condition
        if (rule.effect in ("deny", "ask") and isinstance(cond, ast.Quantifier) and cond.kind == "all"
                and isinstance(cond.source, ast.Call) and cond.source.name == "shell"):
            self.warning(
                f"this {rule.effect} applies only when every command of the string matches, so `ls; rm x` slips past",
                cond.span, f"a {rule.effect} on commands usually means `any c in shell(...)`",
            )
        if rule.effect == "allow" and cond is not None:
            self.allow_over_text(cond)
        if rule.condition is not None:
            if covered:
                self.schema_condition(rule.condition, covered)
            else:
                self.condition(rule.condition)
        if rule.effect == "deny" and not any(c.text.strip() for c in rule.clauses if isinstance(c, ast.ReasonClause)):
            self.error(
                "a deny rule needs a reason",
                rule.effect_span,
                'add reason "..." : it is what the agent reads, so say what to do instead',
            )
        self.clauses(rule.effect, rule.clauses, rule.effect_span)

    def allow_over_text(self, cond: ast.Expr) -> None:
        """Warnings for an allow that a command line can satisfy with one harmless part: `any c in
        shell(...)` (`git status; rm -rf ~` has one git command) and a prefix or a glob of the raw
        command text (`git status; rm -rf ~` starts with "git"). Only the operands that must hold
        (the condition itself, or an operand of its top-level `and`)."""
        operands = cond.operands if isinstance(cond, ast.And) else (cond,)
        for op in operands:
            if (isinstance(op, ast.Quantifier) and op.kind == "any" and isinstance(op.source, ast.Call)
                    and op.source.name == "shell"):
                self.warning(
                    "this allow holds when any one command of the string matches, so `git status; rm -rf ~` is allowed",
                    op.span, "an allow on commands usually means `all c in shell(...)`",
                )
            elif (isinstance(op, ast.Compare) and isinstance(op.left, ast.Path) and op.left.root == "args"
                    and op.left.keys[-1:] in (("command",), ("cmd",), ("script",))
                    and isinstance(op.right, ast.Literal) and type(op.right.value) is str
                    and (op.op in ("startswith", "contains") or (op.op == "glob" and "*" in op.right.value))):
                self.warning(
                    f"this allow matches the command's text, so `{op.right.value.strip('*') or 'x'}; rm -rf ~` is allowed too",
                    op.span, "read the commands with `all c in shell(args.command): ...` (c.program, c.args)",
                )

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
            ast.RememberClause: "remember",
            ast.IdClause: "id",
        }
        for clause in clauses:
            kind = type(clause)
            if kind in seen:
                self.error(f"'{names[kind]}' is written twice", clause.span, f"first at line {seen[kind].span.line}")
                continue
            seen[kind] = clause
            if kind in (ast.ApproversClause, ast.DecisionsClause, ast.TimeoutClause, ast.RememberClause) and effect != "ask":
                self.error(f"'{names[kind]}' applies only to ask", clause.span, f"this is {_article(effect)} rule")
                continue
            if isinstance(clause, ast.ApproversClause):
                self.approvers(clause)
            elif isinstance(clause, ast.DecisionsClause):
                self.decisions(clause)
            elif isinstance(clause, ast.TimeoutClause):
                self.timeout(clause)
            elif isinstance(clause, ast.RememberClause):
                self.remember(clause)
            elif isinstance(clause, ast.IdClause) and not clause.rule_id.strip():
                self.error("a rule id cannot be empty", clause.span)

    def approvers(self, clause: ast.ApproversClause) -> None:
        if clause.count < 1:
            self.error("a quorum needs at least one approver", clause.span)
        elif clause.count > MAX_QUORUM:
            self.error(f"a quorum of {clause.count} approvers is more than {MAX_QUORUM}", clause.span)
        size = None
        if clause.group is not None:
            group = self.groups.get(clause.group)
            external = self.external.get(clause.group) if self.external is not None else None
            if group is not None:
                size = len({i.value for i in group.members.items if isinstance(i, ast.Literal)})
            elif external is not None:
                size = len(set(external))
                if not size:
                    self.error(f"roster group '{clause.group}' has no members", clause.source_span)
            else:
                self.unknown_group(clause)
        elif clause.members is not None:
            self.members(clause.members, "the approver list")
            size = len({i.value for i in clause.members.items if isinstance(i, ast.Literal)})
        if size is not None and 0 < size < clause.count:
            self.error(
                f"the quorum needs {clause.count} approvers but only {size} may approve",
                clause.span,
                "a request here could never be approved: add approvers to the group, or lower the quorum",
            )

    def unknown_group(self, clause: ast.ApproversClause) -> None:
        """`approvers N from G` where G is neither the policy's group nor an external one: did
        you mean one of either; without external groups, also that a roster could define it."""
        names = list(self.groups) + list(self.external or ())
        hint = _suggest(clause.group, names)
        if self.external is None:
            roster = "pass --roster FILE if it is a roster group"
            hint = f"{hint} or {roster}" if hint else roster
        self.error(f"unknown group '{clause.group}'", clause.source_span, hint)

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

    def remember(self, clause: ast.RememberClause) -> None:
        if clause.seconds is None:
            if clause.scope not in REMEMBER_SCOPES:
                hint = _suggest(clause.scope, REMEMBER_SCOPES) or "remember run, remember session or a duration such as remember 8h"
                self.error(f"unknown scope '{clause.scope}' to remember", clause.scope_span, hint)
        elif clause.seconds <= 0:
            self.error("a remembered decision must last longer than zero", clause.span)
        elif clause.seconds > MAX_REMEMBER_SECONDS:
            self.error("a decision may be remembered for at most 365 days", clause.span)

    def timeout(self, clause: ast.TimeoutClause, escalating: bool = False) -> None:
        if clause.escalation is not None and not escalating:
            escalation.check(self, clause)  # its stages, each checked by this method (escalating=True)
        if clause.seconds <= 0:
            self.error("a timeout must be longer than zero", clause.span)
        elif clause.seconds > MAX_TIMEOUT_SECONDS:
            self.error("a timeout may be at most 365 days", clause.span, "a request nobody decides for a year expires anyway")
        if clause.on_timeout is None or clause.on_timeout in TIMEOUT_OUTCOMES:
            return
        if clause.on_timeout in ("approve", "allow", "edit", "respond"):
            self.error(
                f"a timeout cannot {clause.on_timeout}",
                clause.on_timeout_span,
                "silence never means yes: write 'else reject' (the default)",
            )
        else:
            hint = _suggest(clause.on_timeout, (*TIMEOUT_OUTCOMES, "escalate")) or "write 'else reject' (the default)"
            self.error(f"unknown timeout outcome '{clause.on_timeout}'", clause.on_timeout_span, hint)

    # --- tool schemas (only with check(tree, tools=...)) ------------------------------------

    def selected_tools(self, rule: ast.Rule) -> list[str]:
        """The known tools a rule covers, in schema order; an error for each selector covering none."""
        assert self.tools is not None
        covered: dict[str, None] = {}
        for selector in rule.selectors:
            if not selector.pattern:
                continue
            names = self.tools.matching(selector.pattern)
            if not names and selector.is_glob:
                self.error(f"no tool matches '{selector.pattern}'", selector.span, f"no tool in {self.tools.origin} has a name it matches")
            elif not names:
                hint = _suggest(selector.pattern, self.tools.names()) or f"{self.tools.origin} has no tool of that name"
                self.error(f"unknown tool '{selector.pattern}'", selector.span, hint)
            covered.update(dict.fromkeys(names))
        return list(covered)

    def schema_condition(self, expr: ast.Expr, covered: list[str]) -> None:
        """Check a rule's condition once as written, then once for each tool the rule covers with
        `args` typed by that tool's schema. What only the schemas reveal is reported once, with the
        tools it concerns and the types the schema gave."""
        assert self.tools is not None
        start = len(self.diagnostics)
        self.condition(expr)
        plain = {(d.severity, d.message, d.span) for d in self.diagnostics[start:]}
        self.unknown, self.exists_unknown = {}, {}
        found: dict[tuple, tuple[Diagnostic, list[str], list[str]]] = {}
        for tool in covered:
            self.tool, self.args_schema, self.seen_types = tool, self.tools.args_of(tool), {}
            before = len(self.diagnostics)
            try:
                self.condition(expr)
            finally:
                self.tool, self.args_schema = None, None
            new, self.diagnostics[before:] = self.diagnostics[before:], []
            for d in new:
                key = (d.severity, d.message, d.span)
                if key in plain:
                    continue
                if key not in found:
                    found[key] = (d, [], [])
                found[key][1].append(tool)
                notes = found[key][2]
                for span, (text, kind) in sorted(self.seen_types.items(), key=lambda item: (item[0].line, item[0].column)):
                    note = f"{text} is {describe(kind)}"
                    if d.span is not None and _within(span, d.span) and note not in notes:
                        notes.append(note)
        for d, tools, notes in found.values():
            where = f"the schema of {_names(tools)}"
            if (d.message, d.span) in self.enum_errors or not notes:
                help = f"{d.help}, according to {where}" if d.help else f"according to {where}"
            else:
                help = f"{'; '.join(notes)} in {where}"
                if d.help and not d.help.startswith("values of different types"):
                    help += f"; {d.help}"
            self.diagnostics.append(Diagnostic(d.severity, d.message, d.span, help))
        for (span, shown, key, top), by_tool in self.unknown.items():
            tools = list(by_tool)
            choices = list(dict.fromkeys(c for cs in by_tool.values() for c in cs))
            message = f"{shown} is not an argument of {_names(tools)}" if top else f"{shown} is not in the schema of {_names(tools)}"
            hint = _suggest(key, choices)
            if hint is None:
                listed = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
                hint = f"{'its arguments' if top else 'the fields there'} are {listed}" if choices else ("it takes no arguments" if top else "that object lists no fields")
            if len(tools) < len(covered):
                hint += f"; the rule's other tools have it: write exists({shown}) and ... to test it only where it is"
            self.error(message, span, hint)
        for (span, shown), by_tool in self.exists_unknown.items():
            if len(by_tool) == len(covered):
                choices = list(dict.fromkeys(c for cs in by_tool.values() for c in cs))
                last = shown.rsplit(".", 1)[-1]
                hint = _suggest(last, choices)
                where = f"the schema of {_names(list(by_tool))}"
                self.error(
                    f"exists({shown}) is always false: no tool this rule covers has {shown}",
                    span,
                    f"{hint[:-1]} ({where})?" if hint else f"according to {where}",
                )

    def root_schema(self, root: str) -> ArgType | None:
        """The schema of a path's root in the pass for one tool: `args`, or a quantifier's item."""
        if root in self.scope:
            return self.scope_schemas.get(root)
        return self.args_schema if root == "args" else None

    def walk(self, path: ast.Path, fields_at_miss: bool = False):
        """The schema of `path` for the current tool, without reporting: None when it does not
        exist there (an unknown field, a field of a string, an index of an object). With
        `fields_at_miss`: the field names of the object where it went missing (for a hint)."""
        node = self.root_schema(path.root)
        for key in path.keys:
            if node is None or node.kind == ANY:
                return [] if fields_at_miss else node
            child = None
            if (node.kind == OBJECT and isinstance(key, str)) or (node.kind == LIST and isinstance(key, int)):
                child = node.child(key)
            if child is None:
                return node.field_names() if fields_at_miss else None
            node = child
        return [] if fields_at_miss else node

    def items_schema(self, source: ast.Expr) -> ArgType | None:
        """The schema of the items a quantifier goes over, when it goes over a path with one."""
        if self.tool is None or not isinstance(source, ast.Path):
            return None
        node = self.walk(source)
        return node.items if node is not None and node.kind == LIST else None

    def schema_path(self, path: ast.Path, node: ArgType) -> str | None:
        """The type of `path` from the current tool's schema; records a field the schema does not
        have (reported once per rule by `schema_condition`) unless an exists() guards it."""
        for i, key in enumerate(path.keys):
            if node.kind == ANY:
                return ANY
            here = ast.Path(path.root, path.keys[: i + 1], path.span).text
            if node.kind == OBJECT and isinstance(key, int):
                self.error(f"{ast.Path(path.root, path.keys[:i], path.span).text} is an object: it has fields, not items", path.span, 'read a field: .name or ["name"]')
                return None
            if node.kind == OBJECT or (node.kind == LIST and isinstance(key, int)):
                child = node.child(key)
                if child is None:
                    if self.guarded(path.root, path.keys[: i + 1]):
                        return ANY
                    top = path.root == "args" and i == 0
                    self.unknown.setdefault((path.span, here, str(key), top), {})[self.tool or ""] = node.field_names()
                    return None
                node = child
                continue
            prefix = ast.Path(path.root, path.keys[:i], path.span)
            self.seen_types[prefix.span] = (prefix.text, node.type_name)
            return self.step(node.type_name, key, path)  # a field of a scalar, a list read by name
        self.seen_types[path.span] = (path.text, node.type_name)
        return node.type_name

    def guarded(self, root: str, missing: tuple) -> bool:
        """Is a path whose prefix `missing` may not exist guarded by an exists() that is false
        whenever it does not (`exists(args.x) and ...`, `not exists(args.x) or ...`)?"""
        return any(r == root and keys[: len(missing)] == missing for r, keys in self.guards)

    def enum_values(self, cmp: ast.Compare) -> None:
        """A literal compared with a field whose schema lists its values must be one of them."""
        pairs: list[tuple[ast.Expr, ast.Expr, bool]] = []  # (field, literal side, field is a list)
        if cmp.op in ("==", "!="):
            pairs = [(cmp.left, cmp.right, False), (cmp.right, cmp.left, False)]
        elif cmp.op in ("in", "not_in"):
            pairs = [(cmp.left, cmp.right, False), (cmp.right, cmp.left, True)]
        elif cmp.op == "contains":
            pairs = [(cmp.right, cmp.left, False), (cmp.left, cmp.right, True)]
        for field_expr, other, of_items in pairs:
            if not isinstance(field_expr, ast.Path) or self.root_schema(field_expr.root) is None:
                continue
            node = self.walk(field_expr)
            if node is not None and of_items:
                node = node.items if node.kind == LIST else None
            if node is None or node.enum is None:
                continue
            if isinstance(other, ast.ListLiteral) and not of_items:
                literals = [i for i in other.items if isinstance(i, ast.Literal)]
            elif isinstance(other, ast.Literal):
                literals = [other]
            else:
                literals = []
            allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in node.enum[:10]) + (", ..." if len(node.enum) > 10 else "")
            what = f"an item of {field_expr.text}" if of_items else field_expr.text
            for lit in literals:
                kinds = {literal_type(v) for v in node.enum if not isinstance(v, (list, dict))}
                if literal_type(lit.value) in kinds and not enum_allows(node.enum, lit.value):  # another type: a type error
                    shown = json.dumps(lit.value, ensure_ascii=False)
                    message = f"{shown} is not a value {what} can have"
                    self.enum_errors.add((message, lit.span))
                    self.error(message, lit.span, f"{what} is one of {allowed}")

    # --- conditions ---------------------------------------------------------------------------

    def condition(self, expr: ast.Expr) -> None:
        self.too_deep = False
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
            if not self.too_deep:  # once per condition: every node that deep would say it again
                self.too_deep = True
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
            outer = (self.guards, self.tool, self.args_schema, self.scope_schemas)
            outer_programs = self.programs
            if isinstance(expr, ast.And):
                self.programs = {**self.programs, **_pinned_programs(expr)}
            self.guards = self.guards + _exists_guards(expr, self.guard_memo)
            if self.tool is not None and _settled_by_tool(expr, self.tool):
                # `tool == "a" and ...` is false for any other tool: its schema does not apply here
                self.tool, self.args_schema, self.scope_schemas = None, None, {}
            try:
                for operand in expr.operands:
                    self.boolean_operand(operand, word)
            finally:
                self.guards, self.tool, self.args_schema, self.scope_schemas = outer
                self.programs = outer_programs
            return BOOL
        if isinstance(expr, ast.Compare):
            return self.compare(expr)
        if isinstance(expr, ast.Quantifier):
            return self.quantifier(expr)
        if isinstance(expr, _EXTENDED_NODES):  # arithmetic, joined lists, [*] (dsl.expression_types)
            from dsl import expression_types

            return {ast.Arith: expression_types.arith, ast.Neg: expression_types.neg,
                    ast.Projection: expression_types.projection}[type(expr)](self, expr)
        raise TypeError(f"unknown expression node {expr!r}")  # pragma: no cover

    def quantifier(self, q: ast.Quantifier) -> str | None:
        source = self.expr(q.source)
        if source is not None and not is_list(source) and source != ANY:
            self.error(f"'{q.kind}' goes over a list, not {describe(source)}", q.source.span)
        if q.var in ROOTS or q.var in FUNCTIONS or q.var in self.scope:
            self.error(f"the name '{q.var}' is already taken", q.var_span, "choose another name for the item")
        outer, outer_schemas = dict(self.scope), dict(self.scope_schemas)
        self.scope[q.var] = item_type(source) if source is not None and is_list(source) else ANY
        self.scope_schemas[q.var] = self.items_schema(q.source)
        self.quantifiers.append((q, history_check.reads_run(q.source)))
        try:
            self.boolean_operand(q.body, f"{q.kind} ...:")
        finally:
            self.scope, self.scope_schemas = outer, outer_schemas
            self.quantifiers.pop()
        return BOOL

    def path(self, path: ast.Path) -> str | None:
        if path.root in self.scope:
            kind = self.scope[path.root]
        elif path.root in ROOTS:
            if path.root == "run":  # the run's earlier calls (dsl.history_check)
                history_check.linear_read(self, "reading `run`", path)
                kind = history_check.RUN_TYPE
                for key in path.keys:
                    kind = self.step(kind, key, path) if kind is not None else None
                return kind
            if path.root == "tool":
                if path.keys:
                    self.error("tool is the tool's name, a string; it has no fields", path.span, "fields are under args")
                    return None
                return STRING
            kind = OBJECT
        else:
            choices = ROOTS + tuple(f for f in FUNCTIONS if f not in history_check.HISTORY_FUNCTIONS) + tuple(self.scope) + self.let_names
            hint = _suggest(path.root, choices) or "conditions read tool, args.<field> or context.<field>" + (
                ", a quantifier's item where it is bound, or a let (an item bound where a let is used is not visible in its "
                "body: pass it as an argument)" if self.let_names else "")
            self.error(f"unknown name '{path.root}'", path.span, hint)
            return None
        schema = self.root_schema(path.root)
        if schema is not None:
            return self.schema_path(path, schema)
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
                # an index reads one item only (`shell(x)[0]` misses `ls; rm x`): a quantifier
                # over the items is what an author of a rule on "the command" means
                self.error(f"{describe(kind)} has items, not fields", path.span,
                           f"ask about its items with a quantifier: `any x in ...: x.{key} ...` (or `all`); "
                           "an index such as [0] reads only the first")
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
        if call.name in history_check.HISTORY_FUNCTIONS:
            if call.name in history_check.LINEAR_FUNCTIONS:
                history_check.linear_read(self, f"{call.name}()", call)
            return history_check.call_result(self, call)
        if is_extended_call(call):  # sum, min, ..., url(x, scheme) (dsl.expression_types)
            from dsl import expression_types

            return expression_types.call(self, call)
        arity = FUNCTIONS.get(call.name)
        if arity is None:
            known = ", ".join(FUNCTIONS)
            lets = f"; the lets are {', '.join(self.let_names)}" if self.let_names else ""
            self.error(f"unknown function '{call.name}'", call.name_span,
                       _suggest(call.name, tuple(FUNCTIONS) + self.let_names) or f"the functions are {known}{lets}")
            return None
        if call.name == "path" and len(call.args) == 2:  # path(x, base): x resolved against the path base
            base = self.expr(call.args[1])
            if base is not None and base not in (STRING, PATH, ANY):
                self.error(f"path()'s second argument is a directory, a string or a path, not {describe(base)}", call.args[1].span)
                return None
        elif len(call.args) != arity:
            self.error(f"{call.name}() takes {arity} argument, not {len(call.args)}", call.span,
                       "path(x, base) resolves x against the directory base" if call.name == "path" else None)
            return None
        arg = call.args[0]
        if call.name == "exists":
            if not isinstance(arg, ast.Path) or (arg.root not in ("args", "context") and arg.root not in self.scope):
                self.error("exists() takes a field path under args or context", arg.span, "for example exists(args.force)")
                return None
            if not arg.keys:
                self.warning(f"exists({arg.root}) is always true", call.span)
            elif self.tool is not None and self.root_schema(arg.root) is not None and self.walk(arg) is None:
                self.exists_unknown.setdefault((arg.span, arg.text), {})[self.tool] = self.walk(arg, fields_at_miss=True)
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
        if self.tool is not None and op in ("==", "!=", "in", "not_in", "contains"):
            self.enum_values(cmp)
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
        self.normal_forms(cmp)
        return BOOL

    def normal_form(self, expr: ast.Expr) -> str | None:
        """Which normalized value `expr` is, if any: the result of lower(), a URL's host or scheme,
        a path (as a whole, or its ext), a command's program or flags."""
        keys = expr.keys if isinstance(expr, (ast.Call, ast.Path)) else ()
        if isinstance(expr, ast.Call):
            if expr.name in ("lower", "path") and not keys:
                return expr.name
            if expr.name == "url" and keys in (("host",), ("scheme",)):
                return keys[0]
            if expr.name == "path" and keys in (("ext",), ("parts",)):
                return keys[0]
            if expr.name == "shell" and len(keys) == 2 and isinstance(keys[0], int) and keys[1] in _COMMAND_FORMS:
                return keys[1]
        if isinstance(expr, ast.Path) and expr.root in self.scope and len(keys) <= 1:
            kind, field = self.scope[expr.root], keys[0] if keys else None
            if kind == COMMAND and field in _COMMAND_FORMS:
                return field
            if kind == URL and field in ("host", "scheme"):
                return field
            if kind == PATH and field in (None, "ext", "parts"):
                return field or "path"
        return None

    def normal_forms(self, cmp: ast.Compare) -> None:
        """A literal compared with a normalized value in a spelling that value never has (upper
        case after lower(), `"-r"` among flags, `"/bin/rm"` as a program, a relative path) makes
        a condition that is never true: a deny that never fires. A warning at the literal."""
        op = cmp.op
        for subject, other, subject_left in ((cmp.left, cmp.right, True), (cmp.right, cmp.left, False)):
            form = self.normal_form(subject)
            if form is None:
                continue
            # Only where the literal is what the value must equal, hold or start with: `x == "A"`,
            # `x in ["A"]`, `x contains "A"`, `"A" in x`, `x startswith "A"`, `x glob "A*"`; not
            # where the literal holds the value (`"a b" contains x`) or orders it (`x > "M"`).
            if op in ("<", "<=", ">", ">=", "under"):
                continue
            if op in ("contains", "startswith", "endswith", "glob") and not subject_left:
                continue
            if op in ("in", "not_in") and subject_left and not isinstance(other, ast.ListLiteral):
                continue
            if op == "glob" and isinstance(other, ast.Literal) and "[" in str(other.value):
                continue  # a character class may spell either case
            literals = other.items if isinstance(other, ast.ListLiteral) else (other,)
            as_op = op if not (op in ("in", "not_in") and not subject_left) else "contains"
            programs = self.programs.get(subject.root) if isinstance(subject, ast.Path) else None
            fix = None
            for literal in literals:
                if isinstance(literal, ast.Literal) and isinstance(literal.value, str):
                    why = _never(form, as_op, literal.value, programs)
                    if why is not None:
                        if fix is None:
                            from dsl.hints import rewrite  # imports dsl.fmt and the parser: for a mistake only

                            fix = rewrite(cmp, form, subject, lambda t: _never(form, as_op, t, programs) is not None, programs) or ""
                        outcome = "always true" if cmp.op in ("!=", "not_in") else "never true"
                        self.warning(f"this comparison is {outcome}: {why}", literal.span, f"write `{fix}`" if fix else None)

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


_COMMAND_FORMS = ("program", "flags", "wrappers", "args")
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def bidi_warnings(text: str) -> list[Diagnostic]:
    """A warning at every bidirectional control character (U+202A-U+202E, U+2066-U+2069): it can
    make a line display differently from how it parses ("Trojan Source", CVE-2021-42574), so a
    reviewer would approve a rule that is not the one that runs."""
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        for m in _BIDI_CONTROLS.finditer(line):
            out.append(Diagnostic("warning", f"a bidirectional control character (U+{ord(m.group()):04X}) can make this line "
                                  "read differently from how it runs", Span.point(number, m.start() + 1),
                                  "remove it, or write it as a \\u escape inside a string"))
    return out


def _pinned_programs(expr: ast.And) -> dict[str, frozenset[str]]:
    """`c.program == "rm"` or `c.program in ["rm", "rmdir"]` among the operands of an `and`: the
    programs the command `c` must be for the `and` to hold."""
    out: dict[str, frozenset[str]] = {}
    for operand in expr.operands:
        if not (isinstance(operand, ast.Compare) and operand.op in ("==", "in")):
            continue
        field, value = operand.left, operand.right
        if not (isinstance(field, ast.Path) and field.keys == ("program",)):
            continue
        if isinstance(value, ast.Literal) and isinstance(value.value, str) and operand.op == "==":
            out[field.root] = frozenset({value.value})
        elif isinstance(value, ast.ListLiteral) and all(isinstance(i, ast.Literal) and isinstance(i.value, str) for i in value.items) and value.items:
            out[field.root] = frozenset(i.value for i in value.items)
    return out


def _never(form: str, op: str, text: str, programs: frozenset[str] | None = None) -> str | None:
    """Why `text` can never be (or be in) a value of the normalized `form` under `op`, or None.
    `programs`: the programs the command is known to be (for the names of its flags)."""
    whole = op in ("==", "!=", "in", "not_in", "contains")
    if form in ("lower", "host", "scheme") and text != text.lower():
        return {"lower": "lower() gives lower case", "host": "a URL's host is lower case",
                "scheme": "a URL's scheme is lower case"}[form] + f", and {json.dumps(text)} is not"
    if form == "host" and whole and op != "contains" and (text.endswith(".") or not text.isascii()):
        return f"a URL's host has no trailing dot and is ASCII (IDNA), and {json.dumps(text)} is not"
    if form == "path" and op in ("==", "!=", "in", "not_in") and winpaths.is_windows_text(text):
        if not winpaths.is_normal(text):
            return f"a Windows path() is absolute and normalized (C:\\dir\\name, no . or .., no trailing separator, period or space), and {json.dumps(text)} is not"
    elif form == "path" and op in ("==", "!=", "in", "not_in"):
        if not text.startswith("/") or "//" in text or re.search(r"(^|/)\.\.?(/|$)", text) or (text.endswith("/") and text != "/"):
            return f"path() is absolute and normalized (no ~, . or .., // or trailing /), and {json.dumps(text)} is not; use glob or under for relative patterns"
    if form == "ext" and op in ("==", "!=", "in", "not_in") and text and not text.startswith("."):
        return f"a path's ext starts with its dot (\".{text}\")"
    if form == "program" and whole and ("/" in text or " " in text):
        return (f"a command's program is the basename; compare .path for {json.dumps(text)}" if " " not in text
                else f"a command's program is one word; {json.dumps(text)} has its arguments")
    if form == "wrappers" and whole and ("/" in text or " " in text):
        return f"wrappers are kept by their basename (\"{text.rsplit('/', 1)[-1]}\")"
    if form == "args" and whole and text.startswith("-") and len(text) > 1:
        return f"args holds the words that are not flags: {json.dumps(text)} is in .flags (without dashes), or search .argv"
    if form == "host" and whole and ("/" in text or "://" in text):
        return f"a URL's host has no scheme or path ({json.dumps(text)})"
    if form == "scheme" and whole and (":" in text or "/" in text):
        return f"a URL's scheme is written without ':' or '//' (\"{text.split(':', 1)[0]}\")"
    if form == "parts" and whole and ("/" in text or "\\" in text):
        return f"a path's parts are single names, without '/' ({json.dumps(text)})"
    if form == "flags" and whole and text.startswith("-"):
        from dsl.hints import flag_names  # imports dsl.fmt and the parser: for a mistake only

        names = flag_names(text, programs) if text.strip("-") else None
        if not names:
            return "flags are kept without their dashes"
        shown = " and ".join(json.dumps(n) for n in names)
        split = ", and a cluster of short flags is split" if len(names) > 1 else ""
        return f"flags are kept without their dashes{split} ({shown})"
    return None


def _exists_guards(expr: ast.And | ast.Or, memo: dict[int, tuple]) -> tuple[tuple[str, tuple], ...]:
    """The paths an `and` (its `exists(p)` operands) or an `or` (its `not exists(p)` operands)
    guards: when p is missing, the guard alone settles the result (false and x = false, true or x
    = true), so the other operands may read p. `memo`: id(node) → (node, its guards); keeping
    the node keeps its id from being reused while the memo lives."""
    known = memo.get(id(expr))
    if known is not None and known[0] is expr:
        return known[1]
    out = []
    for operand in expr.operands:
        if isinstance(expr, ast.Or):
            if not isinstance(operand, ast.Not):
                if isinstance(operand, ast.Or):
                    out += _exists_guards(operand, memo)
                continue
            operand = operand.operand
        elif isinstance(operand, ast.And):
            out += _exists_guards(operand, memo)
            continue
        if isinstance(operand, ast.Call) and operand.name == "exists" and not operand.keys and len(operand.args) == 1:
            (arg,) = operand.args
            if isinstance(arg, ast.Path):
                out.append((arg.root, arg.keys))
    memo[id(expr)] = (expr, tuple(out))
    return memo[id(expr)][1]


def _settled_by_tool(expr: ast.And | ast.Or, tool: str) -> bool:
    """Is this `and` false (this `or` true) for calls of `tool` whatever the arguments, because
    one operand tests the tool's name (`tool == "a"`, `tool in ["a", "b"]`, `tool != "a"`)?"""
    settles = not isinstance(expr, ast.And)  # an `and` is settled by a false operand, an `or` by a true one
    for operand in expr.operands:
        if not isinstance(operand, ast.Compare) or operand.op not in ("==", "!=", "in", "not_in"):
            continue
        left, right = operand.left, operand.right
        if operand.op in ("==", "!=") and isinstance(left, ast.Literal):
            left, right = right, left
        if not (isinstance(left, ast.Path) and left.root == "tool" and not left.keys):
            continue
        if isinstance(right, ast.Literal) and isinstance(right.value, str) and operand.op in ("==", "!="):
            holds = right.value == tool
        elif isinstance(right, ast.ListLiteral) and operand.op in ("in", "not_in") and all(
            isinstance(i, ast.Literal) and isinstance(i.value, str) for i in right.items
        ):
            holds = any(i.value == tool for i in right.items)
        else:
            continue
        if operand.op in ("!=", "not_in"):
            holds = not holds
        if holds is settles:
            return True
    return False


def _within(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)


def _names(names: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`, `a, b, c, d, e and 3 more`."""
    if len(names) > 6:
        return ", ".join(names[:5]) + f" and {len(names) - 5} more"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _comparable(a: str, b: str) -> bool:
    """Could `==` ever compare values of these load-time types without an error?"""
    if ANY in (a, b) or NULL in (a, b) or a == b:
        return True
    if {a, b} == {PATH, STRING}:
        return True  # a path equals the string of its text
    return is_list(a) and is_list(b)


def check(tree: ast.PolicyFile, tools: ToolSchemas | None = None, groups: Mapping[str, tuple[str, ...]] | None = None) -> list[Diagnostic]:
    """Every diagnostic for `tree`: errors first, then warnings, each group in source order.

    With `tools` (see `dsl.schema`), also the errors only the tools' schemas reveal: unknown tools,
    unknown argument paths, wrong types and values outside an enum. With `groups` (external group
    name → member identities, a roster's), `approvers N from G` may name one of them (see the
    module's docstring)."""
    return _Checker(tools, groups).run(tree)
