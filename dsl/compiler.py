"""Checked syntax tree → pure Python predicates, indexed by tool name.

Each condition becomes a closure `test(env) -> bool` that raises `EvalError` when the call does not
fit it (a missing field, a wrong type). Closures read only the call (`env.tool`, `env.args`,
`env.context`): no clock, no I/O, no randomness, so a decision replays identically.

`and`, `or` and `not` use three-valued (Kleene) logic so that the result does not depend on
operand order: `false and error` is false, `true or error` is true, and anything else involving an
error is an error. What an error *means* is decided per rule in `dsl.policy`: it counts as matched
for deny and ask, and as not matched for allow.

Rules are indexed by exact tool name; glob selectors (`mcp__github__*`) are tried in order and the
result is cached per tool name, so a decision only visits the rules that can apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from dsl import ast, subjects, values
from dsl.requirements import DEFAULT_DECISIONS, Quorum, Requirements
from dsl.values import EvalError

_NO_VARS: dict[str, Any] = {}


class Env(NamedTuple):
    """What a condition can see: the tool name, its arguments, the caller's context, the items a
    quantifier has bound (`vars`) and the policy's `home` (used when the context has none)."""

    tool: str
    args: dict
    context: dict
    vars: dict = _NO_VARS
    home: str | None = None
    trace: list | None = None  # only the traced predicates (compile_condition_traced) write here

    def cwd(self) -> str | None:
        cwd = self.context.get("cwd")
        return cwd if isinstance(cwd, str) else None

    def home_dir(self) -> str | None:
        home = self.context.get("home")
        return home if isinstance(home, str) else self.home


Fn = Callable[[Env], Any]

_MISSING = object()


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """One rule ready to evaluate. `order` is its position in the file (0-based)."""

    order: int
    rule_id: str
    effect: str
    line: int
    span: Any
    selectors: tuple[str, ...]
    test: Fn | None
    reason: str | None
    requirements: Requirements | None
    condition_text: str | None


# --- conditions -------------------------------------------------------------------------------


# Nodes that always yield true or false. Any other node used as a condition, or as an operand of
# `and`, `or` or `not` (a bare field, a function's result such as `url(args.u).port`), must hold a
# boolean at run time: anything else is an error, never Python's truthiness, which would allow.
_BOOLEAN_NODES = (ast.Compare, ast.Not, ast.And, ast.Or, ast.Quantifier)


def _shown(expr: ast.Expr) -> str:
    if isinstance(expr, ast.Path):
        return expr.text
    if isinstance(expr, ast.Call):
        return _key_text(f"{expr.name}(...)", expr.keys)
    return "the condition"


def compile_condition(expr: ast.Expr) -> Fn:
    """A predicate for a checked condition: returns True or False, or raises EvalError."""
    return _operand(expr)


def _as_bool(fn: Fn, text: str) -> Fn:
    def test(env: Env) -> bool:
        value = fn(env)
        if value is True or value is False:
            return value
        raise EvalError(f"{text} is {values._a(values.kind(value))}, not true or false")

    return test


def _compile(expr: ast.Expr) -> Fn:
    if isinstance(expr, ast.Literal):
        value = expr.value
        return lambda env: value
    if isinstance(expr, ast.ListLiteral):
        items = [item.value for item in expr.items]  # the checker allows only literals here
        return lambda env: items
    if isinstance(expr, ast.Path):
        return _compile_path(expr)
    if isinstance(expr, ast.Call):
        return _compile_call(expr)
    if isinstance(expr, ast.Not):
        operand = _operand(expr.operand)
        return lambda env: not operand(env)
    if isinstance(expr, ast.And):
        return _compile_and([_operand(o) for o in expr.operands])
    if isinstance(expr, ast.Or):
        return _compile_or([_operand(o) for o in expr.operands])
    if isinstance(expr, ast.Compare):
        return _compile_compare(expr)
    if isinstance(expr, ast.Quantifier):
        return _compile_quantifier(expr)
    raise TypeError(f"cannot compile {expr!r}")  # pragma: no cover


def _compile_quantifier(q: ast.Quantifier) -> Fn:
    """`any` is the three-valued `or` of the body over the items, `all` the `and`: `any` over an
    empty list is false, `all` is true; an item for which the body errors makes the answer an
    error unless another item decides it (true for `any`, false for `all`)."""
    source, body, var, deciding = _compile(q.source), _operand(q.body), q.var, q.kind == "any"

    def test(env: Env) -> bool:
        items = source(env)
        if values.kind(items) != "list":
            raise EvalError(f"'{q.kind}' goes over a list, not {values._a(values.kind(items))}")
        error = None
        for item in items:
            scope = Env(env.tool, env.args, env.context, {**env.vars, var: item}, env.home)
            try:
                if body(scope) is deciding:
                    return deciding
            except EvalError as exc:
                error = error or exc
        if error is not None:
            raise error
        return not deciding

    return test


def _operand(expr: ast.Expr) -> Fn:
    fn = _compile(expr)
    return fn if isinstance(expr, _BOOLEAN_NODES) else _as_bool(fn, _shown(expr))


def _compile_and(fns: list[Fn]) -> Fn:
    def test(env: Env) -> bool:
        error = None
        for fn in fns:
            try:
                if not fn(env):
                    return False
            except EvalError as exc:
                error = error or exc
        if error is not None:
            raise error
        return True

    return test


def _compile_or(fns: list[Fn]) -> Fn:
    def test(env: Env) -> bool:
        error = None
        for fn in fns:
            try:
                if fn(env):
                    return True
            except EvalError as exc:
                error = error or exc
        if error is not None:
            raise error
        return False

    return test


def _key_text(base: str, keys: tuple[str | int, ...]) -> str:
    return ast.Path(base, keys, None).text if base.isidentifier() else base + ast.Path("_", keys, None).text[1:]


def _reader(base: str, keys: tuple[str | int, ...]) -> Callable[[Any], Any]:
    """A function reading `keys` (fields and indexes) from a value, raising EvalError with the
    source spelling (`args.items[0]`) of whatever is missing or of the wrong type."""
    steps = [(key, _key_text(base, keys[:i]), _key_text(base, keys[: i + 1])) for i, key in enumerate(keys)]

    def read(value: Any) -> Any:
        for key, parent, here in steps:
            if type(key) is str:
                fields = getattr(type(value), "FIELDS", None)
                if fields is not None:  # a normalized subject: a path, a command, a url
                    if key not in fields:
                        raise EvalError(f"{parent} has no field {key}")
                    value = getattr(value, key)
                    continue
                if not isinstance(value, dict):  # isinstance, as values.kind: a dict subclass is an object
                    raise EvalError(f"{parent} is {values._a(values.kind(value))}, so {here} does not exist")
                # dict.get reads what is stored: a defaultdict must not invent a missing field
                value = dict.get(value, key, _MISSING)
                if value is _MISSING:
                    raise EvalError(f"missing field {here}")
            else:
                if not isinstance(value, (list, tuple)):  # what values.kind calls a list
                    raise EvalError(f"{parent} is {values._a(values.kind(value))}, so {here} does not exist")
                try:
                    value = value[key]
                except IndexError:
                    raise EvalError(f"missing item {here} ({parent} has {len(value)})") from None
        return value

    return read


def _compile_path(path: ast.Path) -> Fn:
    root = path.root
    if root == "tool":
        return lambda env: env.tool
    read = _reader(root, path.keys)
    if root == "args":
        return lambda env: read(env.args)
    if root == "context":
        return lambda env: read(env.context)
    return lambda env: read(env.vars[root])  # a quantifier's item (the checker knows every other name)


def _compile_call(call: ast.Call) -> Fn:
    fn = _compile_call_result(call)
    if not call.keys:
        return fn
    read = _reader(f"{call.name}(...)", call.keys)
    return lambda env: read(fn(env))


def _compile_call_result(call: ast.Call) -> Fn:
    (arg,) = call.args
    if call.name == "exists":
        get = _compile_path(arg)  # the checker guarantees a path under args or context

        def exists(env: Env) -> bool:
            try:
                get(env)
            except EvalError:
                return False
            return True

        return exists
    inner = _compile(arg)
    if call.name == "path":
        return lambda env: subjects.make_path(inner(env), env.cwd(), env.home_dir())
    if call.name == "shell":
        return lambda env: subjects.parse_shell(inner(env))
    if call.name == "url":
        return lambda env: subjects.parse_url(inner(env))
    if call.name == "len":
        return lambda env: values.length(inner(env))
    if call.name == "lower":
        return lambda env: values.lower(inner(env))
    raise TypeError(f"unknown function {call.name}")  # pragma: no cover - the checker stops it


def _compile_compare(cmp: ast.Compare) -> Fn:
    left, right, op = _compile(cmp.left), _compile(cmp.right), cmp.op
    if op == "==":
        return lambda env: values.equal(left(env), right(env))
    if op == "!=":
        return lambda env: not values.equal(left(env), right(env))
    if op in ("<", "<=", ">", ">="):
        return lambda env: values.order(op, left(env), right(env))
    if op == "in":
        return lambda env: values.member(left(env), right(env))
    if op == "not_in":
        return lambda env: not values.member(left(env), right(env))
    if op == "contains":
        return lambda env: values.contains(left(env), right(env))
    if op in ("startswith", "endswith"):
        return lambda env: values.affix(op, left(env), right(env))
    if op == "glob":
        pattern = cmp.right.value  # a string literal, checked at load
        regex = values.glob_regex(pattern)

        def glob(env: Env) -> bool:
            value = left(env)
            if isinstance(value, subjects.PathValue):  # path globs: * within a segment, ** across
                return subjects.path_glob(value, pattern, env.cwd(), env.home_dir())
            return values.glob(value, regex)

        return glob
    if op == "under":

        def under(env: Env) -> bool:
            cwd, home = env.cwd(), env.home_dir()
            return subjects.under(subjects.make_path(left(env), cwd, home), subjects.make_path(right(env), cwd, home))

        return under
    raise TypeError(f"unknown operator {op}")  # pragma: no cover


# --- rules ------------------------------------------------------------------------------------


def requirements_of(clauses: tuple[ast.Clause, ...], groups: dict[str, tuple[str, ...]]) -> Requirements:
    """The Requirements an ask rule (or a default ask) writes, with defaults for what it omits."""
    fields: dict[str, Any] = {}
    for clause in clauses:
        if isinstance(clause, ast.ApproversClause):
            if clause.group is not None:
                quorum = Quorum(clause.count, tuple(sorted(set(groups[clause.group]))), clause.group)
            elif clause.members is not None:
                quorum = Quorum(clause.count, tuple(sorted({i.value for i in clause.members.items})))
            else:
                quorum = Quorum(clause.count)
            fields["quorums"] = (quorum,)
        elif isinstance(clause, ast.DecisionsClause):
            names = {name for name, _ in clause.names}
            fields["decisions"] = tuple(d for d in ("approve", "edit", "reject", "respond") if d in names) or DEFAULT_DECISIONS
        elif isinstance(clause, ast.TimeoutClause):
            fields["timeout_seconds"] = clause.seconds
            fields["timeout_message"] = clause.message
    return Requirements(**fields)


def compile_rule(order: int, rule: ast.Rule, groups: dict[str, tuple[str, ...]], source_lines: list[str]) -> CompiledRule:
    rule_id = next((c.rule_id for c in rule.clauses if isinstance(c, ast.IdClause)), None)
    reason = next((c.text for c in rule.clauses if isinstance(c, ast.ReasonClause)), None)
    condition_text = None
    if rule.condition is not None:
        condition_text = _source_slice(source_lines, rule.condition.span)
    return CompiledRule(
        order=order,
        rule_id=rule_id or f"L{rule.span.line}",
        effect=rule.effect,
        line=rule.span.line,
        span=rule.span,
        selectors=tuple(s.pattern for s in rule.selectors),
        test=compile_condition(rule.condition) if rule.condition is not None else None,
        reason=reason,
        requirements=requirements_of(rule.clauses, groups) if rule.effect == "ask" else None,
        condition_text=condition_text,
    )


def _source_slice(lines: list[str], span) -> str:
    if span.line == span.end_line:
        return lines[span.line - 1][span.column - 1 : span.end_column]
    parts = [lines[span.line - 1][span.column - 1 :]]
    parts += lines[span.line : span.end_line - 1]
    parts.append(lines[span.end_line - 1][: span.end_column])
    return " ".join(p.strip() for p in parts)


class RuleIndex:
    """Rules by tool name. `candidates(tool)` returns, in file order, every rule with a selector
    that names or globs `tool`; the answer for each tool name is cached (bounded)."""

    CACHE_LIMIT = 4096

    def __init__(self, rules: list[CompiledRule]):
        self._exact: dict[str, list[CompiledRule]] = {}
        self._globs: list[tuple[Any, CompiledRule]] = []
        for rule in rules:
            for selector in rule.selectors:
                if "*" in selector or "?" in selector:
                    self._globs.append((values.selector_regex(selector), rule))
                else:
                    self._exact.setdefault(selector, []).append(rule)
        self._cache: dict[str, tuple[CompiledRule, ...]] = {}

    def candidates(self, tool: str) -> tuple[CompiledRule, ...]:
        hit = self._cache.get(tool)
        if hit is not None:
            return hit
        found = {r.order: r for r in self._exact.get(tool, ())}
        for regex, rule in self._globs:
            if rule.order not in found and regex.match(tool):
                found[rule.order] = rule
        result = tuple(found[k] for k in sorted(found))
        if len(self._cache) >= self.CACHE_LIMIT:
            self._cache.clear()
        self._cache[tool] = result
        return result


# --- traced predicates (for `countersign policy explain`) -------------------------------------
#
# `compile_condition_traced` builds a second predicate for a condition that returns exactly what
# `compile_condition` returns (or raises the same EvalError) and, as it goes, appends one
# `TraceStep` per node it evaluated to `env.trace`. It is a separate compile mode so that the
# predicates `Policy.evaluate` runs stay as they are: nothing on the normal path checks for a
# trace. The operators, functions and field reads are not re-implemented here: each traced node
# evaluates its operands, binds their values to reserved variables and hands them to the very
# closures `_compile_compare` and `_compile_call_result` build. Only `and`, `or`, `not` and the
# quantifiers are written again, because their steps are what an explanation is about; they keep
# the compiled semantics (Kleene logic, the first error in operand order, Python truthiness of an
# operand) and tests/test_explain.py checks the two modes agree on random conditions and calls.
#
# Operands after the one that settled an `and`/`or` (and items after the one that settled an
# `any`/`all`) are evaluated too, for the explanation only: whatever they do cannot change the
# result (an error there is recorded, never raised).

_LEFT, _RIGHT, _ARG = "$left", "$right", "$arg"  # not NAMEs: no policy variable can shadow them


class TraceStep(NamedTuple):
    """One evaluated node of a condition.

    - `node`: the AST node (or a `TracedItem` for one item of a quantifier);
    - `value`: what it evaluated to (None when it raised);
    - `error`: the EvalError's message when it could not be evaluated;
    - `children`: the steps of its operands, in evaluation order;
    - `subject`: for a call with fields (`path(args.p).name`), the value before the fields were read.
    """

    node: Any
    value: Any
    error: str | None
    children: list
    subject: Any = None


class TracedItem(NamedTuple):
    """The node of a quantifier's item: its position in the list and the item itself."""

    quantifier: ast.Quantifier
    index: int
    item: Any


def compile_condition_traced(expr: ast.Expr) -> Fn:
    """`compile_condition`, recording a TraceStep per evaluated node into `env.trace` (a list the
    caller provides; the step of `expr` itself is appended last, after its operands' steps)."""
    return _traced_operand(expr)


def _traced_step(node: Any, body: Fn) -> Fn:
    """Run `body` with a fresh child list and record one step for `node` in the caller's list."""

    def run(env: Env) -> Any:
        children: list = []
        try:
            value = body(env._replace(trace=children))
        except EvalError as exc:
            env.trace.append(TraceStep(node, None, exc.message, children))
            raise
        env.trace.append(TraceStep(node, value, None, children))
        return value

    return run


def _traced_operand(expr: ast.Expr) -> Fn:
    if isinstance(expr, ast.Path):  # a bare field as an operand of and/or/not must hold a boolean
        return _traced_step(expr, _as_bool(_compile_path(expr), expr.text))
    if not isinstance(expr, _BOOLEAN_NODES):  # as in _operand: a call's result must be a boolean too
        return _as_bool(_traced(expr), _shown(expr))
    return _traced(expr)


def _traced(expr: ast.Expr) -> Fn:
    if isinstance(expr, (ast.Literal, ast.ListLiteral, ast.Path)):
        return _traced_step(expr, _compile(expr))
    if isinstance(expr, ast.Call):
        return _traced_call(expr)
    if isinstance(expr, ast.Not):
        operand = _traced_operand(expr.operand)
        return _traced_step(expr, lambda env: not operand(env))
    if isinstance(expr, (ast.And, ast.Or)):
        return _traced_step(expr, _traced_junction([_traced_operand(o) for o in expr.operands], isinstance(expr, ast.Or)))
    if isinstance(expr, ast.Compare):
        return _traced_compare(expr)
    if isinstance(expr, ast.Quantifier):
        return _traced_quantifier(expr)
    raise TypeError(f"cannot compile {expr!r}")  # pragma: no cover


def _settled_after(fn: Fn, env: Env) -> None:
    """Evaluate an operand whose value can no longer change the result, for the trace only."""
    try:
        fn(env)
    except EvalError:
        pass
    except RecursionError:
        env.trace.append(TraceStep(None, None, "the arguments are nested too deeply to evaluate", []))


def _traced_junction(fns: list[Fn], deciding: bool) -> Fn:
    """`and` (deciding=False: a false operand settles it) or `or` (deciding=True), as
    `_compile_and` / `_compile_or` decide them."""

    def test(env: Env) -> bool:
        error = None
        settled = False
        for fn in fns:
            if settled:
                _settled_after(fn, env)
                continue
            try:
                if bool(fn(env)) is deciding:
                    settled = True
            except EvalError as exc:
                error = error or exc
        if settled:
            return deciding
        if error is not None:
            raise error
        return not deciding

    return test


def _traced_call(call: ast.Call) -> Fn:
    if call.name == "exists":  # reads its path without failing: the path is not an operand
        return _traced_step(call, _compile_call(call))
    arg = _traced(call.args[0])
    apply = _compile_call_result(ast.Call(call.name, (ast.Path(_ARG, (), call.span),), call.span, call.name_span))
    read = _reader(f"{call.name}(...)", call.keys) if call.keys else None

    def run(env: Env) -> Any:
        children: list = []
        subject = None
        try:
            value = arg(env._replace(trace=children))
            value = subject = apply(env._replace(vars={**env.vars, _ARG: value}))
            if read is not None:
                value = read(subject)
        except EvalError as exc:
            env.trace.append(TraceStep(call, None, exc.message, children, subject))
            raise
        env.trace.append(TraceStep(call, value, None, children, subject if read is not None else None))
        return value

    return run


def _traced_compare(cmp: ast.Compare) -> Fn:
    left, right = _traced(cmp.left), _traced(cmp.right)
    # The operator itself is the compiled one, reading its operands from reserved variables (a
    # glob keeps its literal pattern, which `_compile_compare` reads at compile time).
    slot_right = cmp.right if cmp.op == "glob" else ast.Path(_RIGHT, (), cmp.right.span)
    apply = _compile_compare(ast.Compare(cmp.op, ast.Path(_LEFT, (), cmp.left.span), slot_right, cmp.span))

    def body(env: Env) -> Any:
        a = left(env)
        b = right(env)
        return apply(env._replace(vars={**env.vars, _LEFT: a, _RIGHT: b}))

    return _traced_step(cmp, body)


def _traced_quantifier(q: ast.Quantifier) -> Fn:
    """As `_compile_quantifier`; every item gets a step (its body's steps are its children)."""
    source, body, var, deciding = _traced(q.source), _traced_operand(q.body), q.var, q.kind == "any"

    def test(env: Env) -> bool:
        items = source(env)
        if values.kind(items) != "list":
            raise EvalError(f"'{q.kind}' goes over a list, not {values._a(values.kind(items))}")
        error = None
        settled = False
        for index, item in enumerate(items):
            children: list = []
            scope = env._replace(vars={**env.vars, var: item}, trace=children)
            node = TracedItem(q, index, item)
            if settled:
                _settled_after(body, scope)
                env.trace.append(TraceStep(node, children[-1].value if children else None, children[-1].error if children else None, children))
                continue
            try:
                value = body(scope)
            except EvalError as exc:
                error = error or exc
                env.trace.append(TraceStep(node, None, exc.message, children))
                continue
            env.trace.append(TraceStep(node, value, None, children))
            if value is deciding:
                settled = True
        if settled:
            return deciding
        if error is not None:
            raise error
        return not deciding

    return _traced_step(q, test)
