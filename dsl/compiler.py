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

import collections
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any, Callable, NamedTuple

from dsl import ast, escalation, expressions, globs, history_eval, subjects, values
from dsl.cache import BUDGETS, BoundedCache, char_bytes
from dsl.requirements import DEFAULT_DECISIONS, Quorum, Remember, Requirements
from dsl.subjects import paths, urls, winpaths
from dsl.rule_ids import implicit_id
from dsl.subjects.secrets import is_secret_text
from dsl.values import EvalError

_NO_VARS: dict[str, Any] = {}
_new_env = tuple.__new__  # Env(...) without NamedTuple's __new__ (every field given, in order)


class Env(NamedTuple):
    """What a condition can see: the tool name, its arguments, the caller's context, the items a
    quantifier has bound (`vars`) and the policy's `home` (used when the context has none)."""

    tool: str
    args: dict
    context: dict
    vars: dict = _NO_VARS
    home: str | None = None
    trace: list | None = None  # only the traced predicates (compile_condition_traced) write here
    # One call's normalized subjects (`path(args.file_path)`, `url(args.u)`), computed once for
    # all the rules of the call; a dict `Policy.evaluate` makes per call when a rule of the tool
    # uses one, else None (the subject is then computed where it is used).
    memo: dict | None = None
    # The run's earlier calls (a dsl.history.History; None: an empty run), read by `run`,
    # calls(), sources(), from_tool() (dsl.history).
    history: Any = None

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
    uses_memo: bool = False  # its predicate keeps path()/url()/shell() values in Env.memo
    shape: tuple | None = None  # its condition's shape for compile_plan (None: the predicate is called)
    reads_history: bool = False  # its condition reads the run's history (dsl.history_eval)


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
    """A predicate for a checked condition: returns True or False, or raises EvalError.

    The predicate is specialized (see "specialized predicates" below); it returns exactly what
    `compile_condition_generic(expr)` returns, or raises an EvalError with the same message.
    It is the hot path, so it is not wrapped by `guarded`: any other exception (a defect in a
    subject or an operator) escapes it, and its callers (`Policy.evaluate`, the plans of
    `compile_plan`) record it as `guarded` does, with a try that costs nothing until it raises."""
    return _fast_operand(expr, None)


def compile_condition_generic(expr: ast.Expr) -> Fn:
    """The reference predicate: every operator through the generic operations of `dsl.values`.
    The specialized predicates must agree with it (tests/test_specialized.py). Wrapped by
    `guarded`: it raises only EvalError (or RecursionError)."""
    return guarded(_operand(expr))


def guarded(fn: Fn) -> Fn:
    """`fn` with the condition boundary's rule applied: an exception other than EvalError (and
    RecursionError, which callers report as nesting too deep) is raised again as an EvalError
    with `values.failure_message`, so that it makes the whole condition an error (matched for
    deny and ask, not for allow), never an exception out of a decision."""

    def test(env: Env) -> Any:
        try:
            return fn(env)
        except (EvalError, RecursionError):
            raise
        except Exception as exc:
            raise EvalError(values.failure_message(exc)) from exc

    return test


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
    if isinstance(expr, expressions.NODES):  # arithmetic, joined lists, [*]
        return expressions.compile_node(expr, _compile)
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
            scope = env._replace(vars={**env.vars, var: item})
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


@lru_cache(maxsize=4096)
def _key_text(base: str, keys: tuple[str | int, ...]) -> str:
    return ast.Path(base, keys, None).text if base.isidentifier() else base + ast.Path("_", keys, None).text[1:]


@lru_cache(maxsize=4096)  # rules read the same fields: one reader each (it keeps no state)
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
    if root == history_eval.HISTORY_ROOT:
        return history_eval.compile_run(path.keys, _reader)
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
    if call.name in history_eval.HISTORY_FUNCTIONS:
        return history_eval.compile_call(call, _compile)
    if expressions.is_extended_call(call):  # sum, min, ..., url(x, scheme)
        return expressions.compile_call(call, _compile)
    if call.name == "path" and len(call.args) == 2:
        inner, base = _compile(call.args[0]), _compile(call.args[1])
        return lambda env: _path_from(inner(env), base(env), env)
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
            if isinstance(value, _PATH_TYPES):  # path globs: * within a segment, ** across
                return subjects.path_glob(value, pattern, env.cwd(), env.home_dir())
            if type(value) is subjects.WinStr:  # a name or part of a Windows path: caseless
                return winpaths.string_glob(value, pattern)
            return values.glob(value, regex)

        return glob
    if op == "under":

        def under(env: Env) -> bool:
            cwd, home = env.cwd(), env.home_dir()
            return subjects.under(subjects.make_path(left(env), cwd, home), subjects.make_path(right(env), cwd, home))

        return under
    raise TypeError(f"unknown operator {op}")  # pragma: no cover


# --- specialized predicates -------------------------------------------------------------------
#
# `compile_condition` builds the predicates `Policy.evaluate` runs. They decide exactly as the
# generic closures above (`compile_condition_generic`), but use what is known at load time:
#
# * an operand that is a literal fixes the comparison: `x == "lit"` checks `type(v) is str` and
#   compares; `x in ["a", "b"]` is a frozenset lookup; `x startswith "p"` is str.startswith. Any
#   value of another type (a path, a list, a missing field, a wrong type) goes to the generic
#   operation of `dsl.values`, which gives the value or raises the error, with its message;
# * field reads of one or two keys are straight-line code (the generic reader for every error);
# * a quantifier's body that reads only its item is compiled to a function of the item (no
#   environment per item); `any/all c in shell(x): c.program in [...]` (or `==`, `not in`,
#   `!=`) is a set operation on the programs of the parsed command, computed once per text;
# * `path(...)` and `url(...)` of a field are computed once per call and shared by every rule of
#   the call (`Env.memo`), and `shell(...)` once per text (its failures too: a text the shell
#   parser refuses is not parsed again); these functions are pure, so this changes no value;
# * `path(...) glob "/abs/pattern"` and `path(...) under "/abs/dir"` resolve the pattern and the
#   directory at load (an absolute one does not depend on the call's cwd or home).
#
# A specialized closure takes one argument: the call's Env, or, inside a quantifier whose body
# reads only its item (`item_var`), the item itself. `_EnvNeeded` says a body needs the Env.
# tests/test_specialized.py checks the two compile modes agree on random conditions and calls.


class _EnvNeeded(Exception):
    """A quantifier's body reads more than its item (args, context, path(), another variable)."""


class _CommandItem(str):
    """The name of a quantifier's item when the items are the Commands of shell()."""


class _Failure(NamedTuple):
    """A memoized EvalError: the message is raised again as a new EvalError."""

    message: str


class _Shell(NamedTuple):
    """A shell text parsed once: its commands and the set of their programs."""

    commands: tuple
    programs: frozenset


_SHELL_CACHE = BoundedCache(BUDGETS["compiler.shell"], "compiler.shell")  # text → _Shell or _Failure
_SUBJECT_TYPES = (subjects.PathValue, subjects.WinPathValue, subjects.Command, subjects.UrlValue)
_PATH_TYPES = (subjects.PathValue, subjects.WinPathValue)
_WIN_PARTS, _WIN_STR = winpaths.WinParts, winpaths.WinStr
_MEMO_FUNCTIONS = ("path", "url", "shell")


def clear_caches() -> None:
    """Forget every parsed shell text (this module's cache and `dsl.subjects`'), every kept
    `path()` value (the plans' too) and URL host: the next `shell()` of any text parses it again. Decisions
    do not change; only their cost does (benchmarks use it to time the first sight of a command)."""
    _SHELL_CACHE.clear()
    _ITEM_PATHS.clear()
    subjects.clear_shell_cache()
    paths.clear_path_cache()
    urls.clear_host_cache()


def _shell_parsed(text: Any) -> _Shell:
    """`shell(text)` as a _Shell; raises the EvalError `subjects.parse_shell` raises."""
    if type(text) is str:
        hit = _SHELL_CACHE.get(text)
        if hit is None:
            try:
                # not through parse_shell's own cache: the Commands are kept once, here
                commands = subjects.parse_shell_uncached(text)
            except EvalError as exc:
                hit = _Failure(exc.message)
            else:
                hit = _Shell(commands, frozenset(c.program for c in commands))
            _SHELL_CACHE.put(text, hit)
        if type(hit) is _Failure:
            raise EvalError(hit.message)
        return hit
    commands = tuple(subjects.parse_shell(text))  # raises for what is not a string
    return _Shell(commands, frozenset(c.program for c in commands))


def _fast_operand(expr: ast.Expr, item_var: str | None) -> Fn:
    fn = _fast(expr, item_var)
    if isinstance(expr, _BOOLEAN_NODES) or (isinstance(expr, ast.Call) and expr.name == "exists" and not expr.keys):
        return fn  # exists() always yields true or false
    return _as_bool(fn, _shown(expr))


def _fast(expr: ast.Expr, item_var: str | None) -> Fn:
    if isinstance(expr, expressions.NODES) or (isinstance(expr, ast.Call) and expressions.uses_extended(expr)):
        # not specialized: the generic closure (dsl.expressions), on the call's Env; a comparison
        # of its value goes to dsl.values for any value the specialized tests do not know
        if item_var is not None:
            raise _EnvNeeded
        return _compile(expr)
    if isinstance(expr, ast.Literal):
        value = expr.value
        return lambda x: value
    if isinstance(expr, ast.ListLiteral):
        items = [item.value for item in expr.items]
        return lambda x: items
    if isinstance(expr, ast.Path):
        return _fast_path(expr, item_var)
    if isinstance(expr, ast.Call):
        return _fast_call(expr, item_var)
    if isinstance(expr, ast.Not):
        operand = _fast_operand(expr.operand, item_var)
        return lambda x: not operand(x)
    if isinstance(expr, ast.And):
        return _fast_junction(_fast_operands(expr.operands, item_var, False), False)
    if isinstance(expr, ast.Or):
        return _fast_junction(_fast_operands(expr.operands, item_var, True), True)
    if isinstance(expr, ast.Compare):
        return _fast_compare(expr, item_var)
    if isinstance(expr, ast.Quantifier):
        if item_var is not None:
            raise _EnvNeeded
        return _fast_quantifier(expr)
    raise TypeError(f"cannot compile {expr!r}")  # pragma: no cover


def _fast_junction(fns: list[Fn], deciding: bool) -> Fn:
    """`and` (deciding=False) and `or` (deciding=True) as `_compile_and` / `_compile_or`: the
    first operand that is `deciding` settles it, else the first error in operand order, else
    `not deciding`. Operands are boolean nodes or wrapped by _as_bool: they yield True or False."""
    if len(fns) != 2:
        return _compile_or(fns) if deciding else _compile_and(fns)
    a, b = fns
    if deciding:

        def either(x: Any) -> bool:
            try:
                if a(x):
                    return True
            except EvalError as first:
                try:
                    if b(x):
                        return True
                except EvalError:
                    pass
                raise first
            return b(x)

        return either

    def both(x: Any) -> bool:
        try:
            if not a(x):
                return False
        except EvalError as first:
            try:
                if not b(x):
                    return False
            except EvalError:
                pass
            raise first
        return b(x)

    return both


# --- one subject, several tests: `lower(a) contains ".ssh" or lower(a) endswith ".pem" or ...` ---
#
# Consecutive operands of an `and` / `or` that compare the same expression (the same text, spans
# aside) with literals are one operand here: the expression is computed once (`lower(a)`, a field,
# `path(x).name`) and each literal test is applied to its value. This decides as the operands one
# by one: the expression is pure, and the literal side cannot fail, so when the expression raises,
# every one of those operands raises that same error; otherwise each test gives what its operand
# gives (True, False or its own EvalError), and Kleene's `and` / `or` is associative, with the
# first error in operand order kept. For a string value and string literals (the common case) the
# tests are string methods on the value (one `startswith` with a tuple of prefixes, ...).

_VALUE = "$value"  # the compared value, as the name of a quantifier's item: no policy name is this
_SHARED_OPS = frozenset(("==", "!=", "<", "<=", ">", ">=", "in", "not_in", "contains", "startswith", "endswith"))


def _node_key(node: Any) -> Any:
    """A node's structure without its spans (two spellings of `lower(a)` at two places agree)."""
    if isinstance(node, tuple):
        return tuple(_node_key(n) for n in node)
    if isinstance(node, ast.Literal):
        return ("Literal", type(node.value), node.value)
    fields = getattr(type(node), "__dataclass_fields__", None)
    if fields is None:
        return node
    return (type(node).__name__,) + tuple(_node_key(getattr(node, f)) for f in fields if not f.endswith("span"))


def _literal_test(cmp: ast.Compare) -> bool:
    """A comparison whose right side is a literal (or a list of literals) and whose operator reads
    only the two values (no cwd, no home: not glob nor under)."""
    return cmp.op in _SHARED_OPS and isinstance(cmp.right, (ast.Literal, ast.ListLiteral))


def _fast_operands(operands: tuple[ast.Expr, ...], item_var: str | None, deciding: bool) -> list[Fn]:
    """The operands of an `and` (deciding=False) or `or` (True), with runs of literal tests of one
    expression made one operand (see above)."""
    out: list[Fn] = []
    i = 0
    while i < len(operands):
        first = operands[i]
        j = i + 1
        if isinstance(first, ast.Compare) and _literal_test(first):
            key = _node_key(first.left)
            while j < len(operands) and isinstance(operands[j], ast.Compare) and _literal_test(operands[j]) and _node_key(operands[j].left) == key:
                j += 1
        if j - i >= 2:
            try:
                out.append(_shared_tests(operands[i:j], item_var, deciding))
                i = j
                continue
            except _EnvNeeded:
                if item_var is not None:
                    raise
        out.append(_fast_operand(first, item_var))
        i += 1
    return out


def _shared_tests(run: tuple[ast.Compare, ...], item_var: str | None, deciding: bool) -> Fn:
    get = _fast(run[0].left, item_var)
    value = ast.Path(_VALUE, (), run[0].left.span)
    tests = [_fast_compare(ast.Compare(c.op, value, c.right, c.span), _VALUE) for c in run]
    on_str = _string_tests(run, deciding)

    def shared(x: Any) -> bool:
        v = get(x)
        if on_str is not None and type(v) is str:
            return on_str(v)
        error = None
        for test in tests:
            try:
                if test(v) is deciding:
                    return deciding
            except EvalError as exc:
                if error is None:
                    error = exc
        if error is not None:
            raise error
        return not deciding

    return shared


def _string_tests(run: tuple[ast.Compare, ...], deciding: bool) -> Callable[[str], bool] | None:
    """For a string value, the run's tests as string operations, when each is one whose answer on
    a string never errors: ==, != with a string; contains, startswith, endswith with a string;
    in, not in a list of strings (and nulls) or a string. None otherwise (each test is applied)."""
    equal, unequal, prefixes, suffixes, inside, among, not_among = set(), [], [], [], [], [], []
    for c in run:
        lit = c.right.value if isinstance(c.right, ast.Literal) else _MISSING
        if isinstance(c.right, ast.ListLiteral):
            items = [i.value for i in c.right.items]
            if c.op not in ("in", "not_in") or not all(type(i) is str or i is None for i in items):
                return None
            names = frozenset(i for i in items if type(i) is str)
            if c.op == "in":
                among.append(names)
            else:
                not_among.append(names)
            continue
        if type(lit) is not str:
            return None
        if c.op == "==":
            equal.add(lit)
        elif c.op == "!=":
            unequal.append(lit)
        elif c.op == "contains":
            inside.append(lit)
        elif c.op == "startswith":
            prefixes.append(lit)
        elif c.op == "endswith":
            suffixes.append(lit)
        else:
            return None  # `in "text"` is a substring the other way round; orders: each test
    matches = frozenset(equal.union(*among))
    starts, ends, parts, differs, outside = tuple(prefixes), tuple(suffixes), tuple(inside), tuple(unequal), tuple(not_among)
    if deciding:  # or: some test holds

        def any_holds(v: str) -> bool:
            if v in matches or (starts and v.startswith(starts)) or (ends and v.endswith(ends)):
                return True
            for part in parts:
                if part in v:
                    return True
            for lit in differs:
                if v != lit:
                    return True
            for names in outside:
                if v not in names:
                    return True
            return False

        return any_holds

    def all_hold(v: str) -> bool:  # and: every test holds
        if equal and (len(equal) > 1 or v not in equal):
            return False
        for names in among:
            if v not in names:
                return False
        for p in starts:
            if not v.startswith(p):
                return False
        for e in ends:
            if not v.endswith(e):
                return False
        for part in parts:
            if part not in v:
                return False
        for lit in differs:
            if v == lit:
                return False
        for names in outside:
            if v in names:
                return False
        return True

    return all_hold


def _fast_reader(base: str, keys: tuple[str | int, ...]) -> Callable[[Any], Any]:
    """`_reader(base, keys)` with straight-line code for one or two keys; anything unusual (a
    missing field, another type, a dict subclass) goes to `_reader`, which raises its error."""
    slow = _reader(base, keys)
    if len(keys) == 1 and type(keys[0]) is str:
        key = keys[0]
        typed = tuple(t for t in _SUBJECT_TYPES if key in t.FIELDS)
        get = attrgetter(key)

        def read1(value: Any) -> Any:
            t = type(value)
            if t is dict:
                v = value.get(key, _MISSING)
                if v is not _MISSING:
                    return v
            elif t in typed:
                return get(value)
            return slow(value)

        return read1
    if len(keys) == 2 and type(keys[0]) is str and type(keys[1]) is str:
        k1, k2 = keys

        def read2(value: Any) -> Any:
            if type(value) is dict:
                v = value.get(k1, _MISSING)
                if type(v) is dict:
                    v = v.get(k2, _MISSING)
                    if v is not _MISSING:
                        return v
            return slow(value)

        return read2
    if len(keys) == 1 and type(keys[0]) is int:
        index = keys[0]

        def read_index(value: Any) -> Any:
            t = type(value)
            if t is list or t is tuple:
                try:
                    return value[index]
                except IndexError:
                    pass
            return slow(value)

        return read_index
    return slow


def _fast_path(path: ast.Path, item_var: str | None) -> Fn:
    root, keys = path.root, path.keys
    if root == history_eval.HISTORY_ROOT and root != item_var:  # the generic reader (dsl.history_eval)
        if item_var is not None:
            raise _EnvNeeded
        return _compile_path(path)
    if item_var is not None:
        if root != item_var:
            raise _EnvNeeded
        if type(item_var) is _CommandItem and len(keys) == 1 and keys[0] in subjects.Command.FIELDS:
            return attrgetter(keys[0])  # every item is a Command: a field is an attribute
        return _fast_reader(root, keys) if keys else (lambda item: item)
    if root == "tool":
        return lambda env: env.tool
    read = _fast_reader(root, keys)
    if root in ("args", "context"):
        slot = 1 if root == "args" else 2  # Env's fields: tool, args, context, ...
        if len(keys) == 1 and type(keys[0]) is str:
            key, slow = keys[0], _reader(root, keys)

            def field(env: Env) -> Any:
                d = env[slot]
                if type(d) is dict:
                    v = d.get(key, _MISSING)
                    if v is not _MISSING:
                        return v
                return slow(d)

            return field
        if not keys:
            return lambda env: env[slot]
        return lambda env: read(env[slot])
    if not keys:
        return lambda env: env.vars[root]
    if len(keys) == 1 and type(keys[0]) is str and keys[0] in subjects.Command.FIELDS:
        get, command = attrgetter(keys[0]), subjects.Command  # `c.args` of an item of shell()

        def var_field(env: Env) -> Any:
            v = env.vars[root]
            return get(v) if type(v) is command else read(v)

        return var_field
    return lambda env: read(env.vars[root])


def _path_from(raw: Any, base: Any, env: Env) -> subjects.PathValue:
    """`path(raw, base)`: `raw` resolved against the directory `base`, itself made a path (against
    the call's cwd and home). A base of "" is a command's unknown directory (`Command.cwd`): an
    error, whatever `raw` is."""
    if base == "." and env.cwd() is not None:  # where most commands run: the call's cwd itself
        return _make_path(raw, env)
    if base == "":
        raise EvalError("the directory the command runs in is not known from the text (after cd $X, cd -, pushd, "
                        "a function or a cd that may have failed, or under a wrapper that may change it: env, sudo, "
                        "su, chroot and the like)")
    try:
        directory = subjects.make_path(base, env.cwd(), env.home_dir()).text
    except EvalError as exc:
        if exc.message.endswith(_RELATIVE_WITHOUT_CWD):
            # the base is the command's own directory (`c.cwd`: "." for most commands), a word the
            # author never wrote: say what it is, and what the call lacks
            raise EvalError(f"the directory the command runs in ({base!r}) is relative and the call has no "
                            "context.cwd: pass the agent's working directory as context.cwd") from None
        raise
    if type(directory) is not str:  # a Windows path's text (a WinStr): its plain text reads the same, and is cached
        directory = str.__str__(directory)
    return subjects.make_path(raw, directory, env.home_dir())


# how dsl.subjects.paths refuses a relative path when the call has no cwd
_RELATIVE_WITHOUT_CWD = "is relative and the call has no context.cwd"


def _make_path(raw: Any, env: Env) -> subjects.PathValue:
    """`subjects.make_path(raw, cwd, home)`, without its work for a path that is already its own
    normalized form (`_plain_path`; under a Windows cwd, `/x` is a Windows path)."""
    if _plain_path(raw) is not _MISSING and not winpaths.is_windows_text(env.cwd()):
        return subjects.PathValue(raw)
    return subjects.make_path(raw, env.cwd(), env.home_dir())


_NOT_NORMAL_ENDS = ("/", "/.", "/..")


def _shell_of(call: ast.Call) -> Fn:
    """`shell(x)` as a _Shell (commands and programs), once per text, and once per call when x is
    a field (Env.memo)."""
    text_of = _fast(call.args[0], None)
    key = _memo_key(call)
    if key is None:
        return lambda env: _shell_parsed(text_of(env))

    def parsed(env: Env) -> _Shell:
        memo = env.memo
        if memo is not None:
            hit = memo.get(key)
            if hit is not None:
                return hit
            hit = memo[key] = _shell_parsed(text_of(env))  # an error is kept by _shell_parsed
            return hit
        return _shell_parsed(text_of(env))

    return parsed


def _memo_key(call: ast.Call) -> tuple | None:
    """The key of `call`'s value in Env.memo: a subject function of a field of the call's
    arguments or context (not of a quantifier's item, which changes within a call)."""
    if len(call.args) != 1:
        return None
    (arg,) = call.args
    if call.name in _MEMO_FUNCTIONS and isinstance(arg, ast.Path) and arg.root in ("args", "context"):
        return (call.name, arg.root, arg.keys)
    return None


def uses_memo(expr: ast.Expr | None) -> bool:
    """Whether a condition's specialized predicate keeps values in Env.memo."""
    stack = [expr] if expr is not None else []
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Call) and _memo_key(e) is not None:
            return True
        if isinstance(e, ast.Compare) and e.op == "under" and _under_base_key(e.right) is not None:
            return True
        stack.extend(ast.children(e))
    return False


def _memoized(key: tuple, make: Fn) -> Fn:
    """`make(env)`, computed once per call (Env.memo), its EvalError too."""

    def once(env: Env) -> Any:
        memo = env.memo
        if memo is None:
            return make(env)
        hit = memo.get(key)
        if hit is None:
            try:
                hit = make(env)
            except EvalError as exc:
                hit = _Failure(exc.message)
            memo[key] = hit
        if type(hit) is _Failure:
            raise EvalError(hit.message)
        return hit

    return once


def _fast_call(call: ast.Call, item_var: str | None) -> Fn:
    fn = _fast_call_result(call, item_var)
    if not call.keys:
        return fn
    read = _fast_reader(f"{call.name}(...)", call.keys)
    return lambda x: read(fn(x))


def _fast_call_result(call: ast.Call, item_var: str | None) -> Fn:
    if call.name in history_eval.HISTORY_FUNCTIONS:  # the generic closures (dsl.history_eval)
        if item_var is not None:
            raise _EnvNeeded
        return _compile_call_result(call)
    if len(call.args) == 2:  # path(x, base)
        if item_var is not None:
            raise _EnvNeeded
        inner, base = _fast(call.args[0], None), _fast(call.args[1], None)
        return lambda env: _path_from(inner(env), base(env), env)
    (arg,) = call.args
    name = call.name
    if name == "exists":
        if item_var is None and isinstance(arg, ast.Path) and arg.root in ("args", "context") and len(arg.keys) == 1 and type(arg.keys[0]) is str:
            slot, key, get = (1 if arg.root == "args" else 2), arg.keys[0], _compile_path(arg)

            def exists_field(env: Env) -> bool:
                d = env[slot]
                if type(d) is dict:
                    return key in d
                try:
                    get(env)
                except EvalError:
                    return False
                return True

            return exists_field
        get = _fast_path(arg, item_var)

        def exists(x: Any) -> bool:
            try:
                get(x)
            except EvalError:
                return False
            return True

        return exists
    if name in ("path", "shell") or (name == "url" and item_var is None):
        if item_var is not None:
            raise _EnvNeeded  # path() resolves against the call's cwd and home; shell/url: the generic way
        inner = _fast(arg, None)
        if name == "path":

            def make(env: Env) -> Any:
                return _make_path(inner(env), env)

        elif name == "url":

            def make(env: Env) -> Any:
                return subjects.parse_url(inner(env))

        else:
            parsed = _shell_of(call)
            return lambda env: list(parsed(env).commands)
        key = _memo_key(call)
        return make if key is None else _memoized(key, make)
    inner = _fast(arg, item_var)
    if name == "url":
        return lambda item: subjects.parse_url(inner(item))
    if name == "len":

        def length(x: Any) -> int:
            v = inner(x)
            t = type(v)
            if t is str or t is list or t is dict or t is tuple:
                return len(v)
            return values.length(v)

        return length
    if name == "lower":

        def lower(x: Any) -> str:
            v = inner(x)
            if type(v) is str or type(v) is _WIN_STR:  # str.lower of a WinStr is a plain str
                return v.lower()
            return values.lower(v)

        return lower
    raise TypeError(f"unknown function {name}")  # pragma: no cover - the checker stops it


def _is_number(value: Any) -> bool:
    t = type(value)
    return (t is int or t is float) and value == value  # not a bool, not NaN


def _fast_compare(cmp: ast.Compare, item_var: str | None) -> Fn:
    op, left_node, right_node = cmp.op, cmp.left, cmp.right
    left, right = _fast(left_node, item_var), _fast(right_node, item_var)
    lit = right_node.value if isinstance(right_node, ast.Literal) else _MISSING
    if op in ("==", "!="):
        fn = _fast_equal(left, right, left_node, right_node)
        if op == "==":
            return fn
        return lambda x: not fn(x)
    if op in ("<", "<=", ">", ">="):
        return _fast_order(op, left, right, left_node, right_node)
    if op in ("in", "not_in"):
        fn = _fast_member(left, right, right_node)
        if op == "in":
            return fn
        return lambda x: not fn(x)
    if op == "contains":
        if isinstance(left_node, ast.ListLiteral):  # `[...] contains x` is `x in [...]`
            return _fast_member(right, left, left_node)
        if type(lit) is str:

            def contains(x: Any) -> bool:
                c = left(x)
                t = type(c)
                if t is str:
                    return lit in c
                if t is _WIN_PARTS:  # a Windows path's parts: folded, as values.member compares them
                    return c.find_caseless(lit)
                if t is tuple or t is list:
                    if lit in c:
                        return True
                    for item in c:
                        if type(item) is not str and item is not None:
                            return values.contains(c, lit)
                    return False
                return values.contains(c, lit)

            return contains
        return lambda x: values.contains(left(x), right(x))
    if op in ("startswith", "endswith"):
        return _fast_affix(op, left, right, right_node)
    if op == "glob":
        return _fast_glob(left, lit, item_var)
    if op == "under":
        if item_var is not None:
            raise _EnvNeeded
        return _fast_under(left, right, lit, right_node)
    raise TypeError(f"unknown operator {op}")  # pragma: no cover


def _fast_equal(left: Fn, right: Fn, left_node: ast.Expr, right_node: ast.Expr) -> Fn:
    """`==` as values.equal: null equals only null; two strings, two numbers or two booleans
    compare as Python does; anything else goes to values.equal (paths, lists, objects, errors)."""
    if isinstance(right_node, ast.Literal):
        lit, get, lit_first = right_node.value, left, False
    elif isinstance(left_node, ast.Literal):
        lit, get, lit_first = left_node.value, right, True
    else:
        return lambda x: values.equal(left(x), right(x))
    if lit is None:
        # values.equal(v, null) is true for null and false for everything else, never an error
        return lambda x: get(x) is None
    t_lit = type(lit)

    def generic(v: Any) -> bool:
        return values.equal(lit, v) if lit_first else values.equal(v, lit)

    if t_lit is str:

        def eq_str(x: Any) -> bool:
            v = get(x)
            if type(v) is str:
                return v == lit
            return generic(v)

        return eq_str
    if t_lit is bool:

        def eq_bool(x: Any) -> bool:
            v = get(x)
            if type(v) is bool:
                return v is lit
            return generic(v)

        return eq_bool
    if t_lit is int or t_lit is float:

        def eq_number(x: Any) -> bool:
            v = get(x)
            t = type(v)
            if t is int or t is float:
                return v == lit
            return generic(v)

        return eq_number
    return lambda x: values.equal(left(x), right(x))  # pragma: no cover - literals are the types above


def _fast_order(op: str, left: Fn, right: Fn, left_node: ast.Expr, right_node: ast.Expr) -> Fn:
    """`< <= > >=` with a literal number or string on the right: a value of the same type (not
    NaN) compares as Python does; anything else goes to values.order."""
    lit = right_node.value if isinstance(right_node, ast.Literal) else None
    if type(lit) in (int, float, str) and lit == lit:
        return _specialize_order(op, lit, type(lit) is str, left)
    return lambda x: values.order(op, left(x), right(x))


def _specialize_order(op: str, lit: Any, is_str: bool, left: Fn) -> Fn | None:
    """The four operators written out (no call per comparison)."""
    if is_str:
        if op == "<":
            def lt(x: Any) -> bool:
                v = left(x)
                return v < lit if type(v) is str else values.order(op, v, lit)
            return lt
        if op == "<=":
            def le(x: Any) -> bool:
                v = left(x)
                return v <= lit if type(v) is str else values.order(op, v, lit)
            return le
        if op == ">":
            def gt(x: Any) -> bool:
                v = left(x)
                return v > lit if type(v) is str else values.order(op, v, lit)
            return gt
        def ge(x: Any) -> bool:
            v = left(x)
            return v >= lit if type(v) is str else values.order(op, v, lit)
        return ge
    if op == "<":
        def nlt(x: Any) -> bool:
            v = left(x)
            t = type(v)
            return v < lit if (t is int or t is float) and v == v else values.order(op, v, lit)
        return nlt
    if op == "<=":
        def nle(x: Any) -> bool:
            v = left(x)
            t = type(v)
            return v <= lit if (t is int or t is float) and v == v else values.order(op, v, lit)
        return nle
    if op == ">":
        def ngt(x: Any) -> bool:
            v = left(x)
            t = type(v)
            return v > lit if (t is int or t is float) and v == v else values.order(op, v, lit)
        return ngt
    def nge(x: Any) -> bool:
        v = left(x)
        t = type(v)
        return v >= lit if (t is int or t is float) and v == v else values.order(op, v, lit)
    return nge


def _fast_member(item: Fn, container: Fn, container_node: ast.Expr) -> Fn:
    """`x in [literals]` as values.member: a string (a number, a boolean) is looked up among the
    list's strings (numbers, booleans); when it is not there and the list holds an item of
    another type (not null), values.member decides (it raises the mismatch). `x in "literal"` is
    a substring test on a string. Anything else goes to values.member."""
    if isinstance(container_node, ast.Literal) and type(container_node.value) is str:
        text = container_node.value

        def substring(x: Any) -> bool:
            v = item(x)
            if type(v) is str:
                return v in text
            return values.member(v, text)

        return substring
    if not isinstance(container_node, ast.ListLiteral):
        return lambda x: values.member(item(x), container(x))
    items = [i.value for i in container_node.items]
    kinds = [values.kind(i) for i in items]
    strings = frozenset(i for i, k in zip(items, kinds) if k == "string")
    strings_only = all(k in ("string", "null") for k in kinds)  # a string not found is false
    numbers_ok = all(i == i for i, k in zip(items, kinds) if k == "number")  # no NaN literal
    numbers = frozenset(i for i, k in zip(items, kinds) if k == "number") if numbers_ok else None
    numbers_only = all(k in ("number", "null") for k in kinds)

    def member(x: Any) -> bool:
        v = item(x)
        t = type(v)
        if t is str:
            if v in strings:
                return True
            if strings_only:
                return False
        elif (t is int or t is float) and numbers is not None and v == v:
            if v in numbers:
                return True
            if numbers_only:
                return False
        return values.member(v, items)

    return member


def _fast_affix(op: str, left: Fn, right: Fn, right_node: ast.Expr) -> Fn:
    """`startswith` / `endswith` with a literal string (str methods) or a literal list of strings
    (a slice compared with the list); anything else goes to values.affix."""
    if isinstance(right_node, ast.Literal) and type(right_node.value) is str:
        part = right_node.value
        if op == "startswith":

            def starts(x: Any) -> bool:
                v = left(x)
                if type(v) is str:
                    return v.startswith(part)
                return values.affix(op, v, part)

            return starts

        def ends(x: Any) -> bool:
            v = left(x)
            if type(v) is str:
                return v.endswith(part)
            return values.affix(op, v, part)

        return ends
    if isinstance(right_node, ast.ListLiteral) and all(type(i.value) is str for i in right_node.items):
        # values.affix on two lists: the first (last) n items deep-equal the literal's strings,
        # which for a list or tuple is slice equality (a string equals only an equal string).
        as_list = [i.value for i in right_node.items]
        as_tuple, n = tuple(as_list), len(as_list)
        start = op == "startswith"

        def list_affix(x: Any) -> bool:
            v = left(x)
            t = type(v)
            if t is tuple or t is list:
                if n > len(v):
                    return False
                window = v[:n] if start else v[len(v) - n :]
                return window == (as_tuple if t is tuple else as_list)
            return values.affix(op, v, as_list)

        return list_affix
    return lambda x: values.affix(op, left(x), right(x))


def _path_matcher(segments: tuple[str, ...]) -> Callable[[str], bool]:
    """A test of a normalized path's text ("" for the root) against the segments of an absolute
    path pattern, deciding as `subjects.path_glob`'s regex does (`*` and `?` within a segment,
    `**` any number of whole segments). Common shapes need no regex: `/**/NAME` (the last
    segment is NAME), `/**/NAME/**` (some segment is NAME), `/**/*SUFFIX` (the last segment ends
    with SUFFIX). Other patterns use `dsl.globs.path_regex`, the greedy wildcard algorithm at
    both levels: O(n * m) for a path of n characters and a pattern of m."""

    def literal(seg: str) -> bool:
        return "*" not in seg and "?" not in seg

    if len(segments) == 2 and segments[0] == "**" and segments[1] != "**":
        last = segments[1]
        if literal(last):
            tail = "/" + last
            return lambda text: text.endswith(tail)
        if last[0] == "*" and len(last) > 1 and literal(last[1:]):
            suffix = last[1:]  # a non-empty suffix without "/" lies within the last segment
            return lambda text: text.endswith(suffix)
    if len(segments) == 3 and segments[0] == segments[2] == "**" and literal(segments[1]):
        middle = "/" + segments[1] + "/"
        return lambda text: middle in text + "/"
    regex = globs.path_regex(segments)  # O(n * m), see dsl.globs
    return lambda text: regex.match(text) is not None


def _fast_glob(left: Fn, pattern: str, item_var: str | None) -> Fn:
    """`glob` with its literal pattern: a string through the compiled glob; a path through the
    path pattern, resolved at load when it is absolute (an absolute pattern does not depend on
    the call's cwd or home). Otherwise, as `_compile_compare` does it."""
    regex = values.glob_regex(pattern)
    matches = None
    if pattern.startswith("/"):
        try:
            segments = subjects.make_path(pattern, None, None).parts
        except EvalError:
            pass  # the pattern raises at run time, the generic way
        else:
            matches = _path_matcher(segments)
    if matches is None and item_var is not None:
        raise _EnvNeeded

    def glob(x: Any) -> bool:
        value = left(x)
        t = type(value)
        if t is str:
            return regex.match(value) is not None
        if t is subjects.WinPathValue:  # a Windows path: the pattern is read in the call's context
            return subjects.path_glob(value, pattern, x.cwd(), x.home_dir())
        if t is subjects.WinStr:
            return winpaths.string_glob(value, pattern)
        if isinstance(value, subjects.PathValue):  # path globs: * within a segment, ** across
            if matches is not None:
                text = value.text
                return matches(text if text != "/" else "")
            return subjects.path_glob(value, pattern, x.cwd(), x.home_dir())
        return values.glob(value, regex)

    return glob


def _under_base_key(right_node: ast.Expr) -> tuple | None:
    """The Env.memo key of `under`'s directory when it is a field (`under context.cwd`): the key
    `path(context.cwd)` has, since `under` makes the same path of it."""
    if isinstance(right_node, ast.Path) and right_node.root in ("args", "context"):
        return ("path", right_node.root, right_node.keys)
    return None


def _fast_under(left: Fn, right: Fn, base_lit: Any, right_node: ast.Expr | None = None) -> Fn:
    """`under` with a literal absolute directory, resolved at load: for two normalized paths,
    segment containment is `text == base` or `text` starting with `base + "/"` (the root contains
    every path). A directory read from a field (`under context.cwd`) is made a path once per call
    (Env.memo) and compared the same way. Otherwise, as `_compile_compare` does it."""
    base = None
    if type(base_lit) is str and base_lit.startswith("/"):
        try:
            base = subjects.make_path(base_lit, None, None).text
        except EvalError:
            base = None
    if base is None:
        key = _under_base_key(right_node) if right_node is not None else None

        def make_base(env: Env) -> subjects.PathValue:
            return _make_path(right(env), env)

        base_of = make_base if key is None else _memoized(key, make_base)

        def under(env: Env) -> bool:
            value = left(env)  # the path first, then the directory: the generic order of errors
            if type(value) is not subjects.PathValue:
                value = _make_path(value, env)
            directory = base_of(env)
            if type(directory) is not subjects.PathValue or type(value) is not subjects.PathValue:
                return subjects.under(value, directory)  # a Windows path on either side: by drive and parts
            b, text = directory.text, value.text
            return b == "/" or text == b or (text.startswith(b) and text[len(b) : len(b) + 1] == "/")

        return under
    # The literal is read in the call's context as the generic `under` reads it: under a Windows
    # cwd it is a Windows path (on the cwd's drive), so a POSIX path (`~/x` with a POSIX home)
    # is not under it. Only a cwd that is not Windows text lets the load-time text stand.
    if base == "/":

        def under_root(env: Env) -> bool:
            value = left(env)
            if type(value) is not subjects.PathValue:
                value = _make_path(value, env)  # raises for what is not a path
            if type(value) is subjects.WinPathValue or winpaths.is_windows_text(env.context.get("cwd")):
                return subjects.under(value, subjects.make_path(base_lit, env.cwd(), env.home_dir()))
            return True

        return under_root
    prefix = base + "/"

    def under_base(env: Env) -> bool:
        value = left(env)
        if type(value) is not subjects.PathValue:
            value = _make_path(value, env)
        if type(value) is subjects.WinPathValue or winpaths.is_windows_text(env.context.get("cwd")):
            return subjects.under(value, subjects.make_path(base_lit, env.cwd(), env.home_dir()))
        text = value.text
        return text == base or text.startswith(prefix)

    return under_base


def _program_test(body: ast.Expr, var: str) -> tuple[bool, frozenset] | None:
    """For a body `c.program == "x"`, `!= "x"`, `in [strings]` or `not in [strings]`: whether it
    is positive (== or in) and the names. A command's program is always a string."""
    if not isinstance(body, ast.Compare):
        return None
    left, right = body.left, body.right
    if not (isinstance(left, ast.Path) and left.root == var and left.keys == ("program",)):
        return None
    if body.op in ("==", "!=") and isinstance(right, ast.Literal) and type(right.value) is str:
        return body.op == "==", frozenset((right.value,))
    if body.op in ("in", "not_in") and isinstance(right, ast.ListLiteral) and all(type(i.value) is str for i in right.items):
        return body.op == "in", frozenset(i.value for i in right.items)
    return None


def _fast_quantifier(q: ast.Quantifier) -> Fn:
    """As `_compile_quantifier`."""
    deciding = q.kind == "any"
    source_node = q.source
    counted = history_eval.indexed_quantifier(q)
    if counted is not None:  # over `run`, answered from the history's counts
        return counted
    shell_source = isinstance(source_node, ast.Call) and source_node.name == "shell" and not source_node.keys
    if shell_source:
        parsed = _shell_of(source_node)
        programs = _program_test(q.body, q.var)
        if programs is not None:
            positive, names = programs
            # any: some program is (not) among the names; all: every program is (not) among them
            if deciding and positive:
                return lambda env: not names.isdisjoint(parsed(env).programs)
            if deciding:
                return lambda env: not parsed(env).programs <= names
            if positive:
                return lambda env: parsed(env).programs <= names
            return lambda env: names.isdisjoint(parsed(env).programs)

        def items_of(env: Env) -> Any:
            return parsed(env).commands

    else:
        source = _fast(source_node, None)

        def items_of(env: Env) -> Any:
            items = source(env)
            t = type(items)
            if t is not list and t is not tuple and values.kind(items) != "list":
                raise EvalError(f"'{q.kind}' goes over a list, not {values._a(values.kind(items))}")
            return items

    try:
        pred = _fast_operand(q.body, _CommandItem(q.var) if shell_source else q.var)
    except _EnvNeeded:
        pred = None
    if pred is not None:

        def over_items(env: Env) -> bool:
            error = None
            for item in items_of(env):
                try:
                    if pred(item) is deciding:
                        return deciding
                except EvalError as exc:
                    if error is None:
                        error = exc
            if error is not None:
                raise error
            return not deciding

        return over_items
    body, var = _fast_operand(q.body, None), q.var

    def over_env(env: Env) -> bool:
        items = items_of(env)
        scope = {**env.vars}  # one scope per evaluation, the item rebound in place
        inner = _new_env(Env, (env.tool, env.args, env.context, scope, env.home, env.trace, env.memo, env.history))  # env._replace(vars=scope)
        error = None
        for item in items:
            scope[var] = item
            try:
                if body(inner) is deciding:
                    return deciding
            except EvalError as exc:
                if error is None:
                    error = exc
        if error is not None:
            raise error
        return not deciding

    return over_env


# --- plans: one generated function per set of candidate rules ---------------------------------
#
# The rules a call of one tool runs are known once its name is: `compile_plan` writes them as one
# Python function, so that what several rules read is read once (`args.file_path`, the parsed
# `shell(args.command)`, the normalized `path(args.file_path)`), and each rule whose condition has
# a simple shape is an inline expression instead of a chain of closures. A shape is built at load
# from the checked condition (`shape_of`): comparisons of a field, `len()` of a field, a tool name,
# `path()` of a field with an absolute glob or `under`, `exists()`, quantifiers over `shell()`
# with bodies over a command's typed fields, and `and`, `or`, `not` of those.
#
# Each rule's inline expression runs only under guards: the values it reads are present and of
# the types for which the expression is exactly what the predicate computes (a string compared
# with a string literal, a number not NaN ordered with a number, a path made, a parsed shell
# text). Under its guards nothing raises, so `and`/`or`/`not` are Python's. The guards of a
# rule's first leaf are checked before it; every other leaf checks its own where Python's
# `and`/`or` reach it (a leaf the predicate would not evaluate either never undecides the rule)
# and raises _Undecided there when one fails. The rule is then decided again with errors as
# values (`_PlanWriter.body3`: Kleene's logic, each error the message the predicate raises), and
# only what that cannot compute either (a value of another kind, a field of another type) goes to
# the rule's own predicate; when that raises, the function records the error as that rule's
# outcome and goes on. A quantifier over `shell()` is a loop, and its body may read a command's
# list fields (`any a in c.args: ...`) and paths made from them (`path(p, c.cwd)`); an item
# the body cannot decide exactly is decided the same way, item by item. Values several rules
# read (`path(args.file_path)`, its fields, `lower()` of a text, an `under` two rules share) are
# made once per call, when a rule first reads them, and a field's path is read from make_path's
# cache. The generated text holds only generated names: every literal, key and pattern is passed
# as a constant, never written into it.

_UNKNOWN = object()  # a nested field under a value that is not exactly a dict: its predicate reads it


class _NoShape(Exception):
    """A condition (or part of one) the plan writes as a call of the rule's predicate."""


def shape_of(expr: ast.Expr | None) -> tuple | None:
    """The shape of a checked condition for `compile_plan`, or None (the predicate is called)."""
    if expr is None:
        return None
    try:
        return _shape(expr, None)
    except _NoShape:
        return None


def _shape(e: ast.Expr, scope: dict[str, str] | None) -> tuple:
    """`scope`: None at the top of a condition; inside a quantifier, its variables and what each
    holds ("cmd": a Command of shell(), "str": a string of a command's list field)."""
    if isinstance(e, (ast.And, ast.Or)):
        return ("and" if isinstance(e, ast.And) else "or", tuple(_shape(o, scope) for o in e.operands))
    if isinstance(e, ast.Not):
        return ("not", _shape(e.operand, scope))
    if isinstance(e, ast.Compare):
        return _shape_compare(e, scope)
    if isinstance(e, ast.Quantifier):
        src = e.source
        if scope is None:
            if not (isinstance(src, ast.Call) and src.name == "shell" and not src.keys):
                raise _NoShape
            shell = ("shell", _field(src.args[0]))
            programs = _program_test(e.body, e.var)
            if programs is not None:
                return ("programs", e.kind == "any", programs[0], programs[1], shell)
            return ("quant", e.kind == "any", shell, e.var, _shape(e.body, {e.var: "cmd"}), _item_test(e))
        # over a list of strings of a command: `any a in c.args: ...`, `all p in c.paths: ...`
        items = _value(src, scope)
        if items[0] != "c" or items[3] is not tuple or e.var in scope:
            raise _NoShape
        return ("iquant", e.kind == "any", items, e.var, _shape(e.body, {**scope, e.var: "str"}))
    if isinstance(e, ast.Call) and e.name == "exists" and not e.keys and scope is None:
        return ("exists", _field(e.args[0]))
    if isinstance(e, ast.Path):  # a bare field as a condition holds a boolean
        return ("bool", _value(e, scope))
    if isinstance(e, ast.Call) and e.name == "path" and len(e.keys) == 1 and e.keys[0] in _PATH_BOOLS:  # path(x).secret
        return ("bool", _value(e, scope))
    raise _NoShape


def _item_test(q: ast.Quantifier) -> Callable[[Env, Any], Any]:
    """`test(env, command)`: the quantifier's body for one command, as its specialized
    predicate evaluates it for that item (`_fast_quantifier`): True or False, or it raises. A
    plan's loop calls it for an item whose value it cannot compute exactly (a path() that
    fails, a Windows path), so the rule is still decided in the loop, its errors recorded as
    the predicate records them."""
    try:
        pred = _fast_operand(q.body, _CommandItem(q.var))
    except _EnvNeeded:
        pred = None
    if pred is not None:
        return lambda env, item: pred(item)
    body, var = _fast_operand(q.body, None), q.var

    def test(env: Env, item: Any) -> Any:
        scope = {**env.vars, var: item}
        return body(_new_env(Env, (env.tool, env.args, env.context, scope, env.home, env.trace, env.memo, env.history)))

    return test


def _field(e: ast.Expr) -> tuple:
    if isinstance(e, ast.Path):
        if e.root == "tool" and not e.keys:
            return ("tool",)
        if e.root in ("args", "context") and e.keys and all(type(k) is str for k in e.keys):
            return ("f", e.root, e.keys)
    raise _NoShape


_ITEM_TYPES = {"string": str, "list[string]": tuple, "bool": bool}


def _value(e: ast.Expr, scope: dict[str, str] | None) -> tuple:
    """("f", root, keys), ("tool",), ("len", field), ("path", field), ("pathprop", name, path);
    inside a quantifier also: ("c", var, field, type) of a command, ("cidx", ("c", ...), index),
    ("clen", ("c", ...)), ("it", var) a string item, ("ipath", raw, base) and ("ipathprop",
    name, ipath) of a path made from them (base None for `path(x)`, else a value); and
    ("lower", value) of a string value."""
    if isinstance(e, ast.Call) and e.name == "lower" and not e.keys and len(e.args) == 1:
        return ("lower", _value(e.args[0], scope))
    if scope:
        if isinstance(e, ast.Path) and e.root in scope:
            if scope[e.root] == "str":
                if e.keys:
                    raise _NoShape
                return ("it", e.root)
            if not e.keys or e.keys[0] not in subjects.Command.FIELDS:
                raise _NoShape
            value = ("c", e.root, e.keys[0], _ITEM_TYPES[subjects.Command.FIELDS[e.keys[0]]])
            if len(e.keys) == 1:
                return value
            if len(e.keys) == 2 and type(e.keys[1]) is int and value[3] is tuple:
                return ("cidx", value, e.keys[1])
            raise _NoShape
        if isinstance(e, ast.Call) and e.name == "len" and not e.keys and len(e.args) == 1:
            inner = _value(e.args[0], scope)
            if inner[0] == "c" and inner[3] in (str, tuple):
                return ("clen", inner)
            raise _NoShape
        if isinstance(e, ast.Call) and e.name == "path" and len(e.keys) <= 1 and _reads_item(e, scope):
            raw = _value(e.args[0], scope)
            if _value_type(raw) is not str:
                raise _NoShape
            base = None
            if len(e.args) == 2:
                right = e.args[1]
                if isinstance(right, ast.Literal) and type(right.value) is str:
                    base = ("lit", right.value)
                else:
                    base = _value(right, scope)
                    if _value_type(base) is not str:
                        raise _NoShape
            made = ("ipath", raw, base)
            if not e.keys:
                return made
            if e.keys[0] not in _PATH_PROPERTIES:
                raise _NoShape
            return ("ipathprop", e.keys[0], made)
    if isinstance(e, ast.Path):
        return _field(e)
    if isinstance(e, ast.Call) and not e.keys and e.name in ("len", "path") and len(e.args) == 1:
        return (e.name, _field(e.args[0]))
    if isinstance(e, ast.Call) and e.name == "path" and len(e.keys) == 1 and e.keys[0] in _PATH_PROPERTY_TYPES:
        if len(e.args) == 1:
            return ("pathprop", e.keys[0], ("path", _field(e.args[0])))
        right = e.args[1]
        if isinstance(right, ast.Literal) and type(right.value) is str:  # path(args.glob, "/").secret
            return ("pathprop", e.keys[0], ("pathat", _field(e.args[0]), right.value))
    raise _NoShape


def _reads_item(e: ast.Expr, scope: dict[str, str]) -> bool:
    """Whether an expression reads one of the quantifiers' items (or is `path(x, base)`)."""
    if isinstance(e, ast.Path):
        return e.root in scope
    if isinstance(e, ast.Call):
        return len(e.args) == 2 or any(_reads_item(a, scope) for a in e.args)
    return False


def _value_type(v: tuple) -> type | None:
    """The type a value shape always has, or None (a field: any JSON value)."""
    kind = v[0]
    if kind == "c":
        return v[3]
    if kind in ("it", "cidx", "lower", "ipath"):
        return str
    if kind in ("clen", "len"):
        return int
    if kind in ("ipathprop", "pathprop"):
        return _PATH_PROPERTY_TYPES[v[1]]
    return None


# A normalized path's fields from its text, for the plans (as PathValue computes them)
_PATH_PROPERTIES = {
    "name": (lambda text: text[text.rfind("/") + 1 :], str),
    "ext": (lambda text: subjects.PathValue(text).ext, str),
    "parts": (lambda text: tuple(text[1:].split("/")) if text != "/" else (), tuple),
    "text": (lambda text: text, str),
    "secret": (is_secret_text, bool),
}
# The fields a plan reads from a path() of the call's arguments (a PathValue or WinPathValue it
# makes once per call): those above, and those that read the text as written too
_PATH_PROPERTY_TYPES = {**{name: known for name, (_, known) in _PATH_PROPERTIES.items()}, "holds_secrets": bool, "glob_secret": bool}
_PATH_BOOLS = frozenset(name for name, known in _PATH_PROPERTY_TYPES.items() if known is bool)


def _shape_compare(e: ast.Compare, scope: dict[str, str] | None) -> tuple:
    op, right = e.op, e.right
    value = _value(e.left, scope)
    if value[0] == "ipath":  # a path made from a quantifier's item: by its normalized text
        if op == "under" and isinstance(right, ast.Literal) and type(right.value) is str and right.value.startswith("/"):
            try:
                return ("iunder", value, ("lit", subjects.make_path(right.value, None, None).text))
            except EvalError:
                raise _NoShape from None
        if op == "under" and isinstance(right, ast.Path) and not (scope and right.root in scope):
            return ("iunder", value, ("path", _field(right)))
        if op in ("==", "!=") and isinstance(right, ast.Literal) and type(right.value) is str:
            return ("cmp", op, value, right.value)  # a path equals the string of its text
        if op in ("==", "!=") and isinstance(right, ast.Call) and right.name == "path" and not right.keys:
            other = _value(right, scope)
            if other[0] in ("path", "ipath"):
                return ("ipatheq", value, other, op == "==")
        raise _NoShape
    if value[0] == "path":
        # a literal pattern or directory: resolved at load when it is an absolute POSIX one (the
        # POSIX variant compares texts), else None (only the Windows variant, which reads it in
        # the call's context as the predicate does, is written inline)
        if op == "glob":
            try:
                segments = subjects.make_path(right.value, None, None).parts if right.value.startswith("/") else None
            except EvalError:
                segments = None
            return ("pathglob", value, segments, right.value)
        if op == "under" and isinstance(right, ast.Literal) and type(right.value) is str:
            try:
                text = subjects.make_path(right.value, None, None).text if right.value.startswith("/") else None
            except EvalError:
                text = None
            return ("under", value, text, right.value)
        if op == "under" and isinstance(right, ast.Path):
            return ("underfield", value, ("path", _field(right)))
        if op == "under" and scope and isinstance(right, ast.Call) and right.name == "path" and not right.keys:
            other = _value(right, scope)
            if other[0] == "ipath":  # `path(context.cwd) under path(a, c.cwd)`: a field's path under a made one
                return ("underi", value, other)
        raise _NoShape
    if op == "under":
        raise _NoShape
    if isinstance(right, ast.Literal):
        lit = right.value
        if op == "glob":
            return ("strglob", value, values.glob_regex(lit))
        if op in ("in", "not_in"):
            if type(lit) is not str:
                raise _NoShape
            return ("substring", value, lit, op == "not_in")
        if lit is not None and type(lit) not in (str, int, float, bool):
            raise _NoShape  # pragma: no cover - literals are these types
        if op in ("<", "<=", ">", ">=") and (type(lit) is bool or lit is None or lit != lit):
            raise _NoShape
        if op in ("startswith", "endswith", "contains") and type(lit) is not str:
            raise _NoShape
        return ("cmp", op, value, lit)
    if not isinstance(right, ast.ListLiteral):
        raise _NoShape
    items = [i.value for i in right.items]
    kinds = {values.kind(i) for i in items}
    if op in ("in", "not_in"):
        if kinds <= {"string", "null"}:
            return ("member", value, str, frozenset(i for i in items if type(i) is str), op == "not_in")
        if kinds <= {"number", "null"}:
            return ("member", value, float, frozenset(i for i in items if i is not None), op == "not_in")
        raise _NoShape
    if op in ("startswith", "endswith") and kinds <= {"string"}:
        return ("listaffix", value, tuple(items), op == "startswith")
    raise _NoShape


class _WinText:
    """The plans' type of a Windows path's text, name or ext (a WinStr): only lower() reads it."""


class _WinPath:
    """The plans' type of a WinPathValue made in a loop: only `under`, `==` and `.secret` read it."""


class _PathText:
    """The plans' type of a POSIX path of a field in body3: its `.text` is read."""


# the leaves whose value (s[2]) body3 computes with value3 when it may be refused
_VALUE_LEAVES = ("cmp", "member", "substring", "strglob", "bool")


class _WinParts:
    """The plans' type of a Windows path's parts, held as their folds (`WinPathValue.key[1:]`):
    only `contains` reads them."""


class _PlanWriter:
    """Writes the source of one plan function (see `compile_plan`)."""

    def __init__(self) -> None:
        self.consts: dict[str, Any] = {}
        self.const_ids: dict[tuple, str] = {}
        self.values: dict[tuple, str] = {}  # shape of a shared value → its variable
        self.prelude: list[str] = []
        self.loops = 0
        # True while writing a rule's variant for a call whose cwd is a Windows path: its paths
        # are WinPathValues (`wpath`), compared by their folded keys (see `cond` and `value`)
        self.windows = False
        # the guards known to hold where the expression being written runs (see `cond`)
        self.assumed: set[str] = set()
        self.made: dict[str, str] = {}  # a variable made on first read → what makes it (see path_var)
        self.temps = 0  # the variables of body3
        self.with_errors = True  # write body3's code (see compile_plan)

    @staticmethod
    def _runs(parts: tuple) -> list[tuple]:
        """The operands of an and/or, with each run of consecutive comparisons of one value with
        string literals made one ("run", value, comparisons) operand (see `tests_of`)."""
        out: list[tuple] = []
        for part in parts:
            if part[0] == "cmp" and type(part[3]) is str and part[1] in ("==", "contains", "startswith", "endswith"):
                last = out[-1] if out else None
                if last is not None and last[0] == "run" and last[1] == part[2]:
                    out[-1] = ("run", part[2], last[2] + (part,))
                    continue
                if last is not None and last[0] == "cmp" and last[2] == part[2] and type(last[3]) is str and last[1] in ("==", "contains", "startswith", "endswith"):
                    out[-1] = ("run", part[2], (last, part))
                    continue
            out.append(part)
        return out

    def tests_of(self, junction: str, run: tuple, item: str | None) -> tuple[list[str], str, list[str]]:
        """A run of comparisons of one value with string literals, in an and/or: the value is
        read once (its guards checked once: they are the same for every test), and under `or`
        the tests that share an operator are one test: `parts contains ".git" or parts
        contains ".husky"` is one set lookup, `x endswith "a" or x endswith "b"` one endswith
        of a tuple, `x == "a" or x == "b"` one set lookup. Each test gives what it gives alone
        (the value is exactly a str or a tuple of str here), so the junction is unchanged."""
        _, v, tests = run
        expr, known, guards = self.value(v, item)
        if known is None:  # a field: a string for every test of the run
            guards = guards + self.typed(expr, known, str)
            known = str
        if known not in (str, tuple, _WinParts, _WinText):
            return self.cond((junction, tests), item)  # pragma: no cover - the shapes give these types
        var = expr
        if expr.startswith("(") and " is not N else (" in expr:  # a value made on first read: read once
            var = expr[1 : expr.index(" ")]
        read = [False]

        def first() -> str:  # the value's expression where it is first read, its name after
            if read[0]:
                return var
            read[0] = True
            return expr

        exprs: list[str] = []
        done: set[str] = set()
        for _, op, _, lit in tests:
            if junction == "or" and op not in done:
                same = [t[3] for t in tests if t[1] == op]
                if len(same) > 1:
                    done.add(op)
                    if op == "contains" and known in (tuple, _WinParts):
                        folded = frozenset(winpaths.fold(x) for x in same) if known is _WinParts else frozenset(same)
                        exprs.append(f"not {self.const(folded)}.isdisjoint({first()})")
                        continue
                    if op in ("startswith", "endswith") and known is str:
                        exprs.append(f"{first()}.{op}({self.const(tuple(same))})")
                        continue
                    if op == "==" and known is str:
                        exprs.append(f"{first()} in {self.const(frozenset(same))}")
                        continue
                    done.discard(op)
            if op in done:
                continue
            _, x, _ = self.compare(("cmp", op, v, lit), item, (first(), known, []))
            exprs.append(f"({x})")
        return guards, f" {junction} ".join(exprs), []

    def quant_rule(self, s: tuple, order: int, call: list[str]) -> list[str]:
        """A rule whose condition is one quantifier over shell() (`any c in shell(x): ...`), as a
        loop that decides it whatever its items hold. An item the body cannot decide exactly
        (_Undecided: a path() that refuses its text, a Windows path) is decided again with
        errors as values (`body3`), and when that cannot either, by the body's own predicate
        (`_item_test`); an item that errors is an error of the rule unless another item decides
        it, as `_fast_quantifier` records it (the first EvalError in item order; any other
        exception ends the loop, as it ends the predicate). Only a text shell() refuses leaves
        the rule to its predicate, which raises the parser's error."""
        _, any_, shell, name, body, item_test = s
        var = self.shared(shell)
        self.loops += 1
        loop, result, error = f"c{self.loops}", f"q{self.loops}", f"e{self.loops}"
        assumed = self.assumed
        self.assumed = set()  # each item checks its guards (an item that fails one is decided again)
        try:
            g, x, p = self.cond(body, {name: loop})
            try:
                slow = self.body3(body, {name: loop}, "h")
            except _NoShape:
                slow = []
        finally:
            self.assumed = assumed
        if p:  # pragma: no cover - a body's quantifiers are expressions
            raise _NoShape
        again = ["            h = None"]
        if slow:
            again += ["            try:", *("                " + line for line in slow),
                      "            except Exception:  # _Undecided, or a defect: the body's predicate decides the item",
                      "                h = None"]
        return [
            f"if {var} is not None:",
            f"    {result} = {not any_}",
            f"    {error} = None",
            f"    for {loop} in {var}.commands:",
            "        try:",  # the common path: the body decides the item, and only a deciding item stops
            f"            if {'' if any_ else 'not '}({self._lazy(g, x)}):",
            f"                {result} = {any_}",
            "                break",
            "        except U:",
            *again,
            "            if h is None:",
            "                try:",
            f"                    h = _item_decided({self.const(item_test)}, env, {loop})",
            "                except ERRORS as exc:  # the predicate raises it out of the quantifier",
            f"                    {error} = _error_text(exc)",
            f"                    {result} = None",
            "                    break",
            f"            if h is {any_}:",
            f"                {result} = {any_}",
            "                break",
            f"            if type(h) is E and {error} is None:",
            f"                {error} = h.message",
            f"    if {result} is None or ({result} is {not any_} and {error} is not None):",
            f"        append(({order}, {error}, False))",
            f"    elif {result}:",
            f"        append({order})",
            "else:",
            *("    " + line for line in call),
        ]

    # --- a loop's body with errors as values ----------------------------------------------
    #
    # `body3` writes statements that set a variable to True, False or an _Err (the message of
    # the EvalError the body's predicate raises), for an item the fast body could not decide:
    # Kleene's `and`/`or` (the first operand that decides settles it, else the first error in
    # operand order, as `_compile_and` and `_fast_junction`), `not`, `any`/`all` over a list
    # (as `_fast_quantifier`), and leaves whose paths may be refused: each value in the order
    # the predicate computes it (the left side first), the first refusal being the leaf's
    # error. What else cannot be computed exactly (a guard of another kind, a value of the
    # other path kind) raises _Undecided, and the body's predicate decides the item.

    def _tmp(self) -> str:
        self.temps += 1
        return f"k{self.temps}"

    def body3(self, s: tuple, item: dict, target: str) -> list[str]:
        if not self.with_errors:
            raise _NoShape
        kind = s[0]
        if kind in ("and", "or"):
            deciding = kind == "or"
            names, lines = [], []
            for i, part in enumerate(s[1]):
                v = self._tmp()
                names.append(v)
                inner = self.body3(part, item, v) + [f"if {v} is {deciding}: {target} = {deciding}"]
                lines += inner if i == 0 else [f"if {target} is None:", *("    " + line for line in inner)]
                if i == 0:
                    lines.insert(0, f"{target} = None")
            # none decided: the first error in operand order, else the other value (a call, not
            # nested conditionals: an `or` of thousands of operands)
            return lines + [f"if {target} is None: {target} = _first_error(({', '.join(names)},), {not deciding})"]
        if kind == "not":
            v = self._tmp()
            return self.body3(s[1], item, v) + [f"{target} = (not {v}) if type({v}) is bool else {v}"]
        if kind == "iquant":
            _, any_, items, name, body = s
            source, _, guards = self.value(items, item)
            if guards:
                raise _NoShape
            self.loops += 1
            loop, v, error = f"i{self.loops}", self._tmp(), self._tmp()
            inner = self.body3(body, {**item, name: loop}, v)
            return [
                f"{target} = {not any_}",
                f"{error} = None",
                f"for {loop} in {source}:",
                *("    " + line for line in inner),
                f"    if {v} is {any_}:",
                f"        {target} = {any_}",
                "        break",
                f"    if {error} is None and type({v}) is E: {error} = {v}",
                f"if {target} is {not any_} and {error} is not None: {target} = {error}",
            ]
        if kind in ("iunder", "ipatheq", "underi", "underfield", "under", "pathglob") or (
                kind in _VALUE_LEAVES and self._fallible(s[2] if kind == "cmp" else s[1])):
            return self.leaf3(s, item, target)
        if kind in ("quant", "programs"):  # a loop inside the rule: its predicate decides
            raise _NoShape
        g, x, p = self.cond(s, item)  # a leaf that cannot fail but by its guards
        if p or "_ip" in x:  # pragma: no cover - the leaves that make paths are value3's
            raise _NoShape
        if not g:
            return [f"{target} = True if ({x}) else False"]
        return [f"if not ({' and '.join(dict.fromkeys(g))}): raise U", f"{target} = True if ({x}) else False"]

    @staticmethod
    def _fallible(v: tuple) -> bool:
        """Whether a value shape reads a path that may be refused."""
        return v[0] in ("ipath", "ipathprop", "path", "pathprop", "pathat", "lower") and (
            v[0] != "lower" or _PlanWriter._fallible(v[1]))

    def value3(self, v: tuple, item: dict) -> tuple[list[str], str, type]:
        """(lines that set a variable, the variable, its type when it is not an _Err) for a
        value that may be refused."""
        kind = v[0]
        var = self._tmp()
        if kind == "ipath":
            raw, known, guards = self.value(v[1], item)
            guards = guards + self.typed(raw, known, str)
            base = "None"
            if v[2] is not None:
                base, known2, g2 = self.value(v[2], item)
                guards = guards + g2 + self.typed(base, known2, str)
            if guards:
                raise _NoShape
            if self.windows:
                return [f"{var} = _ipw3(P, env, {raw}, {base})"], var, _WinPath
            return [f"{var} = _ip3(P, env, {raw}, {base})"], var, str
        if kind == "ipathprop":
            prop = v[1]
            if prop == "secret":
                lines, made, known = self.value3(v[2], item)
                if self.windows:
                    return lines + [f"{var} = {made} if type({made}) is E else {made}.secret"], var, bool
                return [lines[0].replace("_ip3(", "_ips3(", 1).replace(made, var, 1)], var, bool
            if self.windows:
                raise _NoShape
            lines, made, _ = self.value3(v[2], item)
            fn, known = _PATH_PROPERTIES[prop]
            return lines + [f"{var} = {made} if type({made}) is E else {self.const(fn)}({made})"], var, known
        if kind in ("path", "pathat"):
            made = self._field_path3(v)
            want = "WPV" if self.windows else "PV"
            return [f"{var} = {made}",
                    f"if type({var}) is not E and type({var}) is not {want}: raise U"], var, (_WinPath if self.windows else _PathText)
        if kind == "pathprop":
            prop, made = v[1], self._field_path3(v[2])
            known = _PATH_PROPERTY_TYPES[prop]
            if known is bool:  # the same field on a POSIX and a Windows path
                return [f"{var} = {made}", f"if type({var}) is not E: {var} = {var}.{prop}"], var, bool
            want = "WPV" if self.windows else "PV"
            lines = [f"{var} = {made}", f"if type({var}) is not E and type({var}) is not {want}: raise U"]
            if self.windows:
                field, known = (f"{var}.key[1:]", _WinParts) if prop == "parts" else (f"{var}.{prop}", _WinText)
            else:
                field = f"{var}.{prop}"
            return lines + [f"if type({var}) is not E: {var} = {field}"], var, known
        raise _NoShape

    def _field_path3(self, v: tuple) -> str:
        """The expression of `path(field)` or `path(field, "lit")` with errors as values, made
        once per call from what the fast path made of it (`_pv3`)."""
        field = v[1]
        if field[0] != "f":
            raise _NoShape
        read = self.const(_reader(field[1], field[2]))
        _, made = self.path_var(v)  # what the fast path made of it (a value, a refusal, M)
        base = "None" if v[0] == "path" else self.const(v[2])
        return self._lazy_var(("pv3", *v), "f", f"_pv3({made}, {read}, {field[1]}, {base}, env)")

    def leaf3(self, s: tuple, item: dict, target: str) -> list[str]:
        """A leaf whose values may be refused: each value in the predicate's order, the first
        refusal being the leaf's value, else the comparison."""
        kind = s[0]
        if kind in ("iunder", "ipatheq", "underi", "underfield"):
            sides = [s[1], s[2]]
        else:
            sides = [s[2] if kind == "cmp" else s[1]]
        lines: list[str] = []
        got = []
        pad = ""
        for side in sides:
            if side[0] == "lit":
                got.append((self.const(side[1]), str))
                continue
            if side[0] == "lower":
                raise _NoShape
            more, var, known = self.value3(side, item)
            lines += [pad + line for line in more]
            lines.append(pad + f"if type({var}) is E: {target} = {var}")
            lines.append(pad + "else:")
            pad += "    "
            if known is _PathText:
                var, known = f"{var}.text", str
            got.append((var, known))
        if kind == "underfield":
            (left, _), (base, _) = got
            expr = f"_win_under({left}, {base})" if self.windows else f"_under_text({left}, {base})"
        elif kind == "under":
            (text, _), = got
            if self.windows or s[2] is None:  # the literal is read in the call's context (it may be refused too)
                raise _NoShape
            base = s[2]
            expr = "True" if base == "/" else f"{text} == {self.const(base)} or {text}.startswith({self.const(base + '/')})"
        elif kind == "pathglob":
            (text, _), = got
            if self.windows:  # the pattern is read in the call's context, and may be refused
                var = self._tmp()
                lines.append(pad + f"{var} = _win_glob3({text}, {self.const(s[3])}, CW, HO)")
                lines.append(pad + f"if type({var}) is E: {target} = {var}")
                lines.append(pad + "else:")
                pad += "    "
                expr = var
            else:
                if s[2] is None:
                    raise _NoShape
                expr = self.path_match(text, s[2])
        elif kind == "iunder":
            (left, _), (base, known) = got
            if self.windows:
                if known is str:  # a literal directory: read in the call's context by the predicate
                    raise _NoShape
                expr = f"_win_under({left}, {base})"
            else:
                expr = f"_under_text({left}, {base})"
        elif kind == "underi":
            (left, _), (right, _) = got
            expr = f"_win_under({left}, {right})" if self.windows else f"_under_text({left}, {right})"
        elif kind == "ipatheq":
            (left, _), (right, known) = got
            if self.windows:
                expr = f"{left}.text {'==' if s[3] else '!='} {right}.text"
            else:
                expr = f"{left} {'==' if s[3] else '!='} {right}"
        else:
            (value, known), = got
            g, expr, p = self.leaf_with(s, item, (value, known, []))
            if g or p:
                raise _NoShape
        return lines + [pad + f"{target} = True if ({expr}) else False"]

    def leaf_with(self, s: tuple, item: dict, value: tuple) -> tuple[list[str], str, list[str]]:
        """A leaf over one value given as (expression, type, guards)."""
        kind = s[0]
        if kind == "cmp":
            return self.compare(s, item, value)
        expr, known, guards = value
        if kind == "bool":
            if known is not bool:
                raise _NoShape
            return guards, expr, []
        if kind == "member":
            _, _, of, names, negate = s
            guards = guards + self.typed(expr, known, of)
            test = f"{expr} in {self.const(names)}"
            return guards, f"not ({test})" if negate else test, []
        if kind == "substring":
            _, _, text, negate = s
            guards = guards + self.typed(expr, known, str)
            test = f"{expr} in {self.const(text)}"
            return guards, f"not ({test})" if negate else test, []
        if kind == "strglob":
            return guards + self.typed(expr, known, str), f"{self.const(s[2])}.match({expr}) is not None", []
        raise _NoShape

    def _lazy(self, guards: list[str], expr: str) -> str:
        """`expr` run only when its guards hold (those not known to hold already), else
        raising _Undecided where it stands."""
        needed = [g for g in dict.fromkeys(guards) if g not in self.assumed]
        if not needed:
            return expr
        return f"({expr}) if {' and '.join(needed)} else _u()"

    def const(self, value: Any) -> str:
        key = (type(value), value) if _hashable(value) else ("id", id(value))
        name = self.const_ids.get(key)
        if name is None:
            name = self.const_ids[key] = f"C{len(self.consts)}"
            self.consts[name] = value
        return name

    # shared values, computed once at the top of the function

    def shared(self, v: tuple) -> str:
        name = self.values.get(v)
        if name is not None:
            return name
        kind = v[0]
        if kind == "tool":
            name = f"v{len(self.values)}"
            self.prelude += [f"{name} = env[0]", f"t{name} = type({name})"]
        elif kind == "f":
            name = f"v{len(self.values)}"
            root, keys = v[1], v[2]
            self.prelude.append(f"{name} = {root}.get({self.const(keys[0])}, M)")
            for key in keys[1:]:
                self.prelude += [
                    f"if type({name}) is dict: {name} = {name}.get({self.const(key)}, M)",
                    f"elif {name} is not M: {name} = X",
                ]
            self.prelude.append(f"t{name} = type({name})")
        elif kind == "shell":
            field = self.shared(v[1])
            name = f"s{len(self.values)}"
            self.prelude.append(f"{name} = _parsed_or_none({field})")
        else:  # pragma: no cover - shapes only share these
            raise _NoShape
        self.values[v] = name
        return name

    # Paths of the call's fields, made once per call and only when a rule reaches them: `path(x)`
    # and `path(x, "lit")` are a variable `aN` that holds N (not made yet) until a guard first
    # reads it, `(aN if aN is not N else (aN := _pv(...)))`, and holds the PathValue or
    # WinPathValue make_path gives (from its cache: the call's files repeat), or M when path()
    # refuses the text. Every expression that reads the path runs after one of its guards (see
    # `cond`), so it reads `aN` itself. Its fields are kept the same way (`pathN`: made on first
    # use), and so is `lower()` of a field or of a path's text (computed once per call, not once
    # per `or` operand that reads it).

    def _context(self) -> None:
        """The call's cwd and home as path() reads them (Env.cwd, Env.home_dir), and W: whether
        the cwd is a Windows path (then `/x` is Windows too, and the Windows variant decides)."""
        if ("windows",) in self.values:
            return
        self.values[("windows",)] = "W"
        self.prelude += [
            "CW = context.get('cwd')",
            "XT = True",  # the cwd and home are exact str (or None): make_path's cache is keyed by them
            "if type(CW) is not str: XT, CW = (False, CW) if isinstance(CW, str) else (True, None)",
            "HO = env[4]",
            "if 'home' in context and isinstance(context['home'], str):",
            "    HO = context['home']",
            "    if type(HO) is not str: XT = False",
            # winpaths.is_windows_text, written out: a drive letter (`C:`) or a leading backslash
            "W = CW is not None and CW[:1] != '/' and (CW[:1] == '\\\\' or (CW[1:2] == ':' and CW[:1] in LETTERS))",
        ]

    def _lazy_var(self, key: tuple, prefix: str, make: str) -> str:
        """The expression of a variable computed by `make` on its first read in a call."""
        name = self.values.get(key)
        if name is None:
            name = self.values[key] = f"{prefix}{len(self.values)}"
            self.prelude.append(f"{name} = N")
            self.made[name] = make
        return f"({name} if {name} is not N else ({name} := {self.made[name]}))"

    def path_var(self, v: tuple) -> tuple[str, str]:
        """For ("path", field) or ("pathat", field, lit): its variable and the expression that
        makes it on first read."""
        field = self.shared(v[1])
        self._context()
        if v[0] == "path":
            # make_path's cache read here (a text seen before: one dict lookup, no call; a refusal
            # it keeps fails every guard below, as M does), else _pv makes it
            memo = f"env[6], {self.const(('path', v[1][1], v[1][2]))}" if v[1][0] == "f" else "None"  # _memo_key's
            make = f"(FP(({field}, CW, HO)) if XT and type({field}) is str else None) or _pv({field}, CW, HO, {memo})"
        else:
            make = f"_pv_at({field}, {self.const(v[2])}, env)"
        expr = self._lazy_var(("pv", *v), "a", make)
        return expr[1 : expr.index(" ")], expr

    def path_ref(self, v: tuple) -> tuple[str, list[str]]:
        """A path of a field in the variant being written: its variable and its guard (a POSIX
        path in the POSIX variant, a Windows path in the Windows one)."""
        var, make = self.path_var(v)
        return var, [f"type({make}) is {'WPV' if self.windows else 'PV'}"]

    def path_text(self, v: tuple) -> tuple[str, list[str]]:
        """The normalized text of a POSIX path of a field (POSIX variant only), and its guard."""
        if self.windows:
            raise _NoShape
        var, guards = self.path_ref(v)
        return f"{var}.text", guards

    def path_prop(self, prop: str, v: tuple) -> tuple[str, type, list[str]]:
        """A field of the path of a field: expression, type for the plans, guards. A boolean
        field reads the same on a POSIX and a Windows path (no variant needed)."""
        known = _PATH_PROPERTY_TYPES[prop]
        if known is bool:
            var, make = self.path_var(v)
            return f"{var}.{prop}", bool, [f"type({make}) in PVS"]
        var, guards = self.path_ref(v)
        if prop == "text":
            return f"{var}.text", (_WinText if self.windows else str), guards
        if self.windows:
            if prop == "parts":  # the parts by their folds (WinParts.find_caseless compares them)
                return self._lazy_var(("wparts", var), "n", f"{var}.key[1:]"), _WinParts, guards
            return self._lazy_var((prop, var), "n", f"{var}.{prop}"), _WinText, guards
        return self._lazy_var((prop, var), "n", f"{var}.{prop}"), known, guards

    # conditions: (guards, expression, statements to run first)

    def cond(self, s: tuple, item: str | None) -> tuple[list[str], str, list[str]]:
        """(guards, expression, statements to run first) of a condition's shape. The guards are
        those of its first leaf, which is evaluated whenever the condition is: the caller checks
        them before the expression (and falls back to the predicate when they fail). Every
        other leaf checks its own guards where Python's `and`/`or` reach it, and raises
        _Undecided there when one fails (`_lazy`): a leaf the predicate would not evaluate
        either (`false and E`, `true or E`, Kleene's logic) never undecides the rule, and a
        leaf it would evaluate is computed exactly or undecides it."""
        kind = s[0]
        if kind in ("and", "or"):
            guards, exprs, pre = [], [], []
            assumed = self.assumed
            try:  # restored however it ends: a later operand with no shape must not leave the
                # first one's guards assumed for the next rule written (a type check skipped)
                for i, part in enumerate(self._runs(s[1])):
                    g, x, p = self.tests_of(kind, part, item) if part[0] == "run" else self.cond(part, item)
                    if i == 0:
                        guards = g
                        self.assumed = assumed | set(g)  # checked before any later operand runs
                    else:
                        x = self._lazy(g, x)
                    exprs.append(f"({x})")
                    pre += p
            finally:
                self.assumed = assumed
            return guards, f" {kind} ".join(exprs), pre
        if kind == "not":
            g, x, p = self.cond(s[1], item)
            return g, f"not ({x})", p
        if kind == "bool":
            expr, known, guards = self.value(s[1], item)
            if known is bool:
                return guards, expr, []
            if known is not None:
                raise _NoShape
            return guards + [f"t{expr} is bool"], expr, []
        if kind == "exists":
            var = self.shared(s[1])
            return [f"{var} is not X"], f"{var} is not M", []
        if kind == "cmp":
            return self.compare(s, item)
        if kind == "member":
            _, v, of, names, negate = s
            expr, known, guards = self.value(v, item)
            guards = guards + self.typed(expr, known, of)
            test = f"{expr} in {self.const(names)}"
            return guards, f"not ({test})" if negate else test, []
        if kind == "substring":
            _, v, text, negate = s
            expr, known, guards = self.value(v, item)
            guards = guards + self.typed(expr, known, str)
            test = f"{expr} in {self.const(text)}"
            return guards, f"not ({test})" if negate else test, []
        if kind == "listaffix":
            _, v, words, start = s
            expr, known, guards = self.value(v, item)
            if known is tuple:
                lit = self.const(words)
            elif known is None and v[0] == "f":
                guards = guards + [f"t{expr} is list"]
                lit = self.const(list(words))
            else:
                raise _NoShape
            n = len(words)
            if start:
                return guards, f"{expr}[:{n}] == {lit}", []
            return guards, f"len({expr}) >= {n} and {expr}[len({expr}) - {n}:] == {lit}", []
        if kind == "strglob":
            expr, known, guards = self.value(s[1], item)
            return guards + self.typed(expr, known, str), f"{self.const(s[2])}.match({expr}) is not None", []
        if kind == "pathglob":
            if self.windows:  # the pattern is read in the call's context (winpaths.path_glob)
                var, guards = self.path_ref(s[1])
                return guards, f"_win_glob({var}, {self.const(s[3])}, CW, HO)", []
            if s[2] is None:  # not an absolute POSIX pattern: the predicate reads it
                raise _NoShape
            text, guards = self.path_text(s[1])
            return guards, self.path_match(text, s[2]), []
        if kind in ("underfield", "under") and self.windows:  # by drive and folded parts (winpaths.under)
            var, guards = self.path_ref(s[1])
            if kind == "underfield":  # kept for the call: `under` and `not under` rules read it
                base, g2 = self.path_ref(s[2])
                return guards + g2, self._lazy_var(("wunder", var, base), "u", f"_win_under({var}, {base})"), []
            return guards, f"_win_under_literal(env, {var}, {self.const(s[3])})", []
        if kind == "underfield":  # both POSIX paths: containment by text, as _fast_under
            text, guards = self.path_text(s[1])
            base, g2 = self.path_text(s[2])
            return guards + g2, self._lazy_var(("under", text, base), "u", f"_under_text({text}, {base})"), []
        if kind == "under":
            if s[2] is None:  # not an absolute POSIX directory: the predicate reads it
                raise _NoShape
            text, guards = self.path_text(s[1])
            base = s[2]
            if base == "/":
                return guards, "True", []
            return guards, f"{text} == {self.const(base)} or {text}.startswith({self.const(base + '/')})", []
        if kind == "programs":
            _, any_, positive, names, shell = s
            var, c = self.shared(shell), self.const(names)
            expr = {
                (True, True): f"not {c}.isdisjoint({var}.programs)",
                (True, False): f"not ({var}.programs <= {c})",
                (False, True): f"{var}.programs <= {c}",
                (False, False): f"{c}.isdisjoint({var}.programs)",
            }[(any_, positive)]
            return [f"{var} is not None"], expr, []
        if kind == "quant":  # over shell(): a loop before the rule; an item it cannot decide exactly undecides it
            if item is not None:
                raise _NoShape
            _, any_, shell, name, body, _ = s
            var = self.shared(shell)
            self.loops += 1
            loop, result = f"c{self.loops}", f"q{self.loops}"
            assumed = self.assumed
            self.assumed = set()  # the loop runs before its rule: no guard of the rule holds yet
            try:
                g, x, p = self.cond(body, {name: loop})
            finally:
                self.assumed = assumed
            if p:  # pragma: no cover - a body's quantifiers are expressions
                raise _NoShape
            pre = [
                f"{result} = None",
                f"if {' and '.join([f'{var} is not None', *dict.fromkeys(g)])}:",
                "    try:",
                f"        {result} = {not any_}",
                f"        for {loop} in {var}.commands:",
                f"            if {'' if any_ else 'not '}({x}):",
                f"                {result} = {any_}",
                "                break",
                "    except U:",
                f"        {result} = None",
            ]
            return [f"{result} is not None"], result, pre
        if kind == "iquant":  # over a command's list of strings: an expression (it stops where Python's any/all do)
            _, any_, items, name, body = s
            source, _, g0 = self.value(items, item)
            self.loops += 1
            loop = f"i{self.loops}"
            g, x, p = self.cond(body, {**item, name: loop})
            if p:  # pragma: no cover - as above
                raise _NoShape
            return g0, f"{'any' if any_ else 'all'}(({self._lazy(g, x)}) for {loop} in {source})", []
        if kind in ("iunder", "ipatheq") and self.windows:  # Windows paths: by drive and folded parts
            left, _, g = self.value(s[1], item)
            side = s[2]
            if side[0] == "path":
                right, g2 = self.path_ref(side)
                g = g + g2
            elif side[0] == "ipath":
                right, _, g2 = self.value(side, item)
                g = g + g2
            else:  # a literal directory: read in the call's context by the predicate
                raise _NoShape
            if kind == "iunder":
                return g, f"_win_under({left}, {right})", []
            return g, f"{left}.text {'==' if s[3] else '!='} {right}.text", []  # WinStr == folds, as values.equal
        if kind == "underi":  # a field's path under a path made from a quantifier's item
            left, g = self.path_ref(s[1]) if self.windows else self.path_text(s[1])
            right, _, g2 = self.value(s[2], item)
            if self.windows:
                return g + g2, f"_win_under({left}, {right})", []
            return g + g2, f"_under_text({left}, {right})", []
        if kind == "iunder":  # a made path's text under a plain path: containment by text, as _fast_under
            path, _, g = self.value(s[1], item)
            base, known, g2 = self.value(s[2], item)
            return g + g2, f"_under_text({path}, {base})", []
        if kind == "ipatheq":
            left, _, g = self.value(s[1], item)
            right, _, g2 = self.value(s[2], item)
            return g + g2, f"{left} {'==' if s[3] else '!='} {right}", []
        raise _NoShape

    def value(self, v: tuple, item: str | None) -> tuple[str, type | None, list[str]]:
        """An expression for a value, its type when known, and the guards it needs."""
        kind = v[0]
        if kind == "c":
            return f"{item[v[1]]}.{v[2]}", v[3], []
        if kind == "clen":
            return f"len({item[v[1][1]]}.{v[1][2]})", int, []
        if kind == "cidx":  # out of range: undecided (the predicate says what it is)
            return f"_at({item[v[1][1]]}.{v[1][2]}, {v[2]})", str, []
        if kind == "it":
            return item[v[1]], str, []
        if kind == "lit":
            return self.const(v[1]), str, []
        if kind == "path":  # a POSIX path's text
            text, guards = self.path_text(v)
            return text, str, guards
        if kind == "ipath":  # the normalized text of a POSIX path (a WinPathValue in the Windows variant), else undecided
            raw, known, guards = self.value(v[1], item)
            guards = guards + self.typed(raw, known, str)
            made, of = ("_ipw", _WinPath) if self.windows else ("_ip", str)
            if v[2] is None:
                return f"{made}(P, env, {raw}, None)", of, guards
            base, known, g2 = self.value(v[2], item)
            return f"{made}(P, env, {raw}, {base})", of, guards + g2 + self.typed(base, known, str)
        if kind == "ipathprop":
            path, _, guards = self.value(v[2], item)
            fn, known = _PATH_PROPERTIES[v[1]]
            if self.windows:
                if v[1] != "secret":
                    raise _NoShape
                return f"{path}.secret", bool, guards
            if v[1] == "secret":  # kept with the path's text
                return path.replace("_ip(P,", "_ips(P,", 1), known, guards
            return f"{self.const(fn)}({path})", known, guards
        if kind == "len":
            var = self.shared(v[1])
            return f"len({var})", int, [f"(t{var} is str or t{var} is list or t{var} is dict)"]
        if kind in ("f", "tool"):
            return self.shared(v), None, []
        if kind == "pathprop":
            return self.path_prop(v[1], v[2])
        if kind == "lower":
            expr, known, guards = self.value(v[1], item)
            if known is not _WinText:  # str.lower of a WinStr is a plain str, as values.lower gives
                guards = guards + self.typed(expr, known, str)
            if v[1][0] in ("f", "pathprop"):  # a value of the call: lowered once per call
                return self._lazy_var(("lower", expr), "l", f"{expr}.lower()"), str, guards
            return f"{expr}.lower()", str, guards
        raise _NoShape

    def typed(self, expr: str, known: type | None, want: type) -> list[str]:
        """Guards that `expr` holds a `want` (str, bool, or float for any number)."""
        if known is not None:
            if known is want or (want is float and known is int):
                return []
            raise _NoShape
        if want is float:
            return [f"(t{expr} is int or t{expr} is float)"]
        return [f"t{expr} is {want.__name__}"]

    def compare(self, s: tuple, item: str | None, value: tuple | None = None) -> tuple[list[str], str, list[str]]:
        """A comparison with a literal; `value`: its left side's (expression, type, guards)
        when the caller has it already (a run of tests of one value, see `tests_of`)."""
        _, op, v, lit = s
        expr, known, guards = value if value is not None else self.value(v, item)
        c = self.const(lit)
        if known is _WinPath and type(lit) is str and op in ("==", "!="):
            return guards, f"{expr}.text {op} {c}", []  # a path equals the string of its text; a WinStr folds
        if lit is None:
            if op not in ("==", "!="):
                raise _NoShape
            if known is None:
                guards = guards + [f"{expr} is not M", f"{expr} is not X"]
            return guards, f"{expr} is {'' if op == '==' else 'not '}None", []
        t = type(lit)
        if t is bool:
            if op not in ("==", "!="):
                raise _NoShape
            return guards + self.typed(expr, known, bool), f"{expr} is {'' if op == '==' else 'not '}{c}", []
        if t is str:
            if op == "contains" and known is tuple:  # a command's list of strings
                return guards, f"{c} in {expr}", []
            if op == "contains" and known is _WinParts:  # folded parts: the literal folded (WinParts.find_caseless)
                return guards, f"{self.const(winpaths.fold(lit))} in {expr}", []
            guards = guards + self.typed(expr, known, str)
            if op == "startswith":
                return guards, f"{expr}.startswith({c})", []
            if op == "endswith":
                return guards, f"{expr}.endswith({c})", []
            if op == "contains":
                return guards, f"{c} in {expr}", []
            return guards, f"{expr} {op} {c}", []
        # a number
        if op in ("startswith", "endswith", "contains"):
            raise _NoShape
        guards = guards + self.typed(expr, known, float)
        if op in ("<", "<=", ">", ">=") and known is None:
            guards.append(f"{expr} == {expr}")  # NaN cannot be ordered: the predicate raises
        return guards, f"{expr} {op} {c}", []

    def path_match(self, var: str, segments: tuple[str, ...]) -> str:
        """`_path_matcher`'s test written inline (the root's text "/" decides as "" does)."""

        def literal(seg: str) -> bool:
            return "*" not in seg and "?" not in seg

        if len(segments) == 2 and segments[0] == "**" and segments[1] != "**":
            last = segments[1]
            if literal(last):
                return f"{var}.endswith({self.const('/' + last)})"
            if last[0] == "*" and len(last) > 1 and literal(last[1:]):
                return f"{var}.endswith({self.const(last[1:])})"
        if len(segments) == 3 and segments[0] == segments[2] == "**" and literal(segments[1]):
            middle = "/" + segments[1] + "/"
            return f"({self.const(middle)} in {var} or {var}.endswith({self.const(middle[:-1])}))"
        return f"{self.const(_path_matcher(segments))}({var} if {var} != '/' else '')"


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _plain_path(raw: Any) -> Any:
    """The text of `path(raw)` when raw is an absolute path already normalized (no empty, "." or
    ".." segment, no trailing "/") holding none of the characters make_path refuses (NUL, "$",
    "`", a backslash): it is then its own normalized form. Else _MISSING (make_path decides)."""
    if (
        type(raw) is str
        and raw[:1] == "/"
        and len(raw) <= subjects.MAX_PATH_TEXT
        and "//" not in raw
        and "/./" not in raw
        and "/../" not in raw
        and "\\" not in raw
        and "$" not in raw
        and "`" not in raw
        and "\x00" not in raw
        and (raw == "/" or not raw.endswith(_NOT_NORMAL_ENDS))
    ):
        return raw
    return _MISSING


def _parsed_or_none(text: Any) -> _Shell | None:
    """The parsed shell text, or None when it is not a string or the parser refuses it (the
    predicate then raises the error)."""
    if type(text) is not str:
        return None
    hit = _SHELL_CACHE.get(text)
    if hit is None:
        try:
            hit = _shell_parsed(text)
        except Exception:  # EvalError, RecursionError, or a defect: the predicate raises it again
            return None
    return hit if type(hit) is _Shell else None


_NOT_YET = object()  # a plan's variable not computed yet in this call (see _PlanWriter.path_var)


_FIND_PATH, _TOUCH_PATH = paths.PATH_CACHE.lookups()


def _path_value(raw: Any, cwd: str | None, home: str | None, memo: dict | None = None, key: tuple | None = None) -> Any:
    """`path(raw)` in a call with this cwd and home (as `_make_path` makes it: make_path, whose
    cache keeps the values of the texts a session repeats, with the fields they computed); the
    _Err of its refusal; _MISSING for a field that holds no string (the rule's predicate then
    raises the error). A text seen before is found in make_path's cache here, without the calls
    around it. One made here (a text make_path does not keep: too long) is also left in the
    call's Env.memo under `key`, where the predicates of the call's other rules find it."""
    if type(raw) is not str:  # a field's JSON value: path() refuses all but a string
        return _MISSING
    if (cwd is None or type(cwd) is str) and (home is None or type(home) is str):
        found = (raw, cwd, home)  # make_path's key (`key` is the memo's)
        hit = _FIND_PATH(found)
        if hit is not None:
            try:
                _TOUCH_PATH(found)
            except KeyError:  # evicted by another thread meanwhile: still the right value
                pass
            return hit if type(hit) is not paths.Refused else _Err(hit.message)
    try:
        value = subjects.make_path(raw, cwd, home)
    except EvalError as exc:
        if memo is not None:
            memo.setdefault(key, _Failure(exc.message))
        return _Err(exc.message)
    except Exception:
        return _MISSING
    if memo is not None:
        memo.setdefault(key, value)
    return value


def _path_value_at(raw: Any, base: str, env: Env) -> Any:
    """`path(raw, base)` as `_path_from` makes it; the _Err of its refusal; or _MISSING for a
    field that holds no string (the predicate's error then names the field: see _path_value3)."""
    if type(raw) is not str:
        return _MISSING
    try:
        return _path_from(raw, base, env)
    except EvalError as exc:
        return _Err(exc.message)
    except Exception:
        return _MISSING


def _path_value3(made: Any, read: Callable[[Any], Any], root: Any, base: Any, env: Env) -> Any:
    """A plan's path of a field (`made`: what the plan made of it, see `_path_value` and
    `_path_value_at`) with errors as values: the value, or the _Err of its refusal; a field
    the plan did not make a path of (missing, no string) is read again as the predicate reads
    it, for its error (`base`: None for path(field), else the literal of path(field, base))."""
    t = type(made)
    if t is subjects.PathValue or t is subjects.WinPathValue or t is _Err:
        return made
    if t is paths.Refused:  # a refusal make_path's cache kept, read by the plan itself
        return _Err(made.message)
    return _field_path3(read, root, env) if base is None else _field_path_at3(read, root, base, env)


def _win_glob(path: Any, pattern: str, cwd: str | None, home: str | None) -> bool:
    """`path glob pattern` for a Windows path, as the predicate reads it (winpaths.path_glob, the
    pattern anchored in the call's context); raises _Undecided where that raises an EvalError."""
    try:
        return winpaths.path_glob(path, pattern, cwd, home)
    except EvalError:
        raise _Undecided from None


def _win_glob3(path: Any, pattern: str, cwd: str | None, home: str | None) -> Any:
    """`_win_glob` with its error as a value (see _PlanWriter.body3)."""
    try:
        return winpaths.path_glob(path, pattern, cwd, home)
    except EvalError as exc:
        return _Err(exc.message)


def _win_under_literal(env: Env, path: Any, literal: str) -> bool:
    """`path under "/x"` (or `"C:\\x"`) for a Windows path: the literal is read in the call's
    context, as the predicate reads it; where that refuses it, _Undecided (the rule's predicate
    raises the error)."""
    try:
        return subjects.under(path, subjects.make_path(literal, env.cwd(), env.home_dir()))
    except EvalError:
        raise _Undecided from None


class _Err(str):
    """An evaluation error as a value in a plan (see _PlanWriter.body3): its message (a str
    subclass, made by str's own constructor)."""

    __slots__ = ()
    message = property(str.__str__)  # the message as a plain str


class _Undecided(Exception):
    """Raised in a plan's loop over commands by a value it cannot compute exactly there (a path
    that is not a plain POSIX path, an index out of range): the loop's rule is then decided by
    its predicate, which computes the value (or its error) the general way."""


# (raw, base, cwd, home) → (value, secret) of a path a plan's loop made (value: the text of a
# POSIX path, or the WinPathValue of a Windows path), or _MISSING when path() refuses it; only
# exact str texts, at most _CACHED_ITEM_TEXT long
_ITEM_PATHS = BoundedCache(BUDGETS["plan_paths"], "plan_paths")
_CACHED_ITEM_TEXT = 8192  # characters of the texts of a key (a command's code given with -c, -e: a few KB)
_STR_OR_NONE = (str, type(None))


def _item_made(memo: dict, env: Env, raw: str, base: str | None) -> Any:
    """(value, secret) of `path(raw)` (base None) or `path(raw, base)` as the predicates make it
    (`_make_path`, `_path_from`): value is the normalized text of a POSIX path (a str; its
    PathValue under a Windows cwd), or the WinPathValue of a Windows path; _MISSING when path()
    raises. `memo` holds one call's
    answers; _ITEM_PATHS those of earlier calls (the same words in the same cwd)."""
    key = (raw, base)
    made = memo.get(key)
    if made is not None:
        return made
    cwd, home = env.cwd(), env.home_dir()
    wide = None
    if type(raw) is str and type(base) in _STR_OR_NONE and type(cwd) in _STR_OR_NONE and type(home) in _STR_OR_NONE:
        wide = (raw, base, cwd, home)
        made = _ITEM_PATHS.get(wide)
        if made is not None:
            memo[key] = made
            return made
    refusal = None
    try:
        value = _make_path(raw, env) if base is None else _path_from(raw, base, env)
    except EvalError as exc:
        value, refusal = None, _Err(exc.message)
    except Exception:
        value = None
    t = type(value)
    if t is subjects.PathValue:
        secret = value._secret
        if secret is None:  # from the text, split once (a long cwd: each word's text is long)
            secret = is_secret_text(value.text)
            object.__setattr__(value, "_secret", secret)
        # under a Windows cwd a literal the loop compares with is a Windows path, while `~/x` with
        # a POSIX home is a POSIX one: the predicate reads both in the call's context (the value
        # is kept as a PathValue, which neither _item_path nor _item_win_path takes)
        made = (value if winpaths.is_windows_text(cwd) else value.text, secret)
    elif t is subjects.WinPathValue:
        made = (value, value.secret)
    else:
        made = refusal if refusal is not None else _MISSING
    memo[key] = made
    if wide is not None and len(raw) + len(base or "") + len(cwd or "") + len(home or "") <= _CACHED_ITEM_TEXT:
        texts = raw + (base or "") + (cwd or "") + (home or "")
        if True:
            # the key's texts, and what the entry keeps alive: a POSIX path's text, a Windows path
            # (as make_path's cache counts it), a PathValue under a Windows cwd
            cost = 2 * char_bytes(texts) + 400
            if type(made) is _Err:
                cost += 2 * char_bytes(made.message) + 100
            elif made is not _MISSING:
                cost += char_bytes(made[0]) + 100 if type(made[0]) is str else paths.value_cost(value, texts)
            _ITEM_PATHS.put(wide, made, cost)
    return made


def _item_path(memo: dict, env: Env, raw: str, base: str | None) -> str:
    """The text of the POSIX path `_item_made` makes; raises _Undecided when it makes none (an
    error, a Windows path, any path under a Windows cwd)."""
    made = _item_made(memo, env, raw, base)
    if type(made) is not tuple or type(made[0]) is not str:
        raise _Undecided
    return made[0]


def _item_secret(memo: dict, env: Env, raw: str, base: str | None) -> bool:
    """`.secret` of the POSIX path `_item_made` makes; raises _Undecided when it makes none."""
    made = _item_made(memo, env, raw, base)
    if type(made) is not tuple or type(made[0]) is not str:
        raise _Undecided
    return made[1]


def _item_win_path(memo: dict, env: Env, raw: str, base: str | None) -> Any:
    """The WinPathValue of `path(raw)` or `path(raw, base)` (the call's cwd is a Windows path);
    raises _Undecided when it is not one (an error, a POSIX path)."""
    made = _item_made(memo, env, raw, base)
    if type(made) is not tuple or type(made[0]) is not subjects.WinPathValue:
        raise _Undecided
    return made[0]


# The same, for a loop's item its body decides with errors as values (see _PlanWriter.body3):
# a path() that refuses the text gives its _Err (the message the predicate raises), a value of
# the other kind raises _Undecided.

def _item_path3(memo: dict, env: Env, raw: str, base: str | None) -> Any:
    made = _item_made(memo, env, raw, base)
    if type(made) is _Err:
        return made
    if made is _MISSING or type(made[0]) is not str:
        raise _Undecided
    return made[0]


def _item_secret3(memo: dict, env: Env, raw: str, base: str | None) -> Any:
    made = _item_made(memo, env, raw, base)
    if type(made) is _Err:
        return made
    if made is _MISSING or type(made[0]) is not str:
        raise _Undecided
    return made[1]


def _item_win_path3(memo: dict, env: Env, raw: str, base: str | None) -> Any:
    made = _item_made(memo, env, raw, base)
    if type(made) is _Err:
        return made
    if made is _MISSING or type(made[0]) is not subjects.WinPathValue:
        raise _Undecided
    return made[0]


def _field_path3(read: Callable[[Any], Any], root: Any, env: Env) -> Any:
    """`path(field)` as the predicate makes it (`_make_path` of the field's value): the value,
    or the _Err of the EvalError the field's reading or path() raises."""
    try:
        return _make_path(read(root), env)
    except EvalError as exc:
        return _Err(exc.message)


def _field_path_at3(read: Callable[[Any], Any], root: Any, base: str, env: Env) -> Any:
    """`path(field, "base")` as the predicate makes it (`_path_from`), or the _Err of the
    EvalError the field's reading or path() raises."""
    try:
        return _path_from(read(root), base, env)
    except EvalError as exc:
        return _Err(exc.message)


def _item_decided(item_test: Callable[[Env, Any], Any], env: Env, item: Any) -> Any:
    """An item of a plan's loop decided by the body's predicate: True, False, or the _Err of
    the EvalError it raises (any other exception is raised: it ends the predicate's loop)."""
    try:
        return item_test(env, item)
    except EvalError as exc:
        return _Err(exc.message)


def _first_error(results: tuple, otherwise: bool) -> Any:
    """The first of `results` that is not `otherwise` (an _Err), else `otherwise`."""
    for result in results:
        if result is not otherwise:
            return result
    return otherwise


def _undecided() -> Any:
    """Raise _Undecided: a plan's value a leaf needs is not one it can compute exactly."""
    raise _Undecided


def _item_at(items: tuple, index: int) -> str:
    try:
        return items[index]
    except IndexError:
        raise _Undecided from None


def _under_text(path: str, base: str) -> bool:
    """`under` of two normalized POSIX texts (`subjects.under`: segment by segment)."""
    return base == "/" or path == base or (path.startswith(base) and path[len(base) : len(base) + 1] == "/")


# Whatever a rule's predicate raises is recorded as that rule's error (an EvalError's message,
# or any other exception as `values.failure_message`), and the plan goes on with the next rule.
_PLAN_ERRORS = Exception


def _rule_lines(w: _PlanWriter, rule: CompiledRule, call: list[str]) -> list[str]:
    """One rule's lines in a plan: its shape inline under the guards of its first leaf, and
    `call` (its predicate) when one fails, when a later leaf undecides it (_Undecided, see
    `_PlanWriter.cond`) or when the rule has no shape the writer can write."""
    if rule.shape is None:
        return call
    try:
        if rule.shape[0] == "quant":
            return w.quant_rule(rule.shape, rule.order, call)
        guards, expr, pre = w.cond(rule.shape, None)
    except _NoShape:
        return call
    undecides = "_u()" in expr or "_win_glob(" in expr or "_win_under_literal(" in expr  # may raise _Undecided
    fallback = call
    if guards or undecides:
        try:
            slow = w.body3(rule.shape, {}, "h")
        except _NoShape:
            slow = []
        if slow:  # the rule with errors as values (see _PlanWriter.body3), then its predicate
            fallback = [
                "try:", *("    " + line for line in slow),
                "except Exception:  # _Undecided, or a defect: the predicate decides",
                "    h = None",
                "if h is None:", *("    " + line for line in call),
                f"elif h is True: append({rule.order})",
                f"elif type(h) is E: append(({rule.order}, h.message, False))",
            ]
    if not undecides:  # only the first leaf's guards can fail: checked, then the expression
        if not guards:
            return [*pre, f"if {expr}: append({rule.order})"]
        check = " and ".join(dict.fromkeys(guards))
        if ":=" in check:  # guards that make paths: kept for the next rule that has the same
            check = w._lazy_var(("guard", check), "g", check)
        return [*pre, f"if {check}:", f"    if {expr}: append({rule.order})", "else:",
                *("    " + line for line in fallback)]
    test = w._lazy(guards, expr)
    return [*pre, "try:", f"    if {test}: append({rule.order})", "except U:", *("    " + line for line in fallback)]


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _trimmed(w: _PlanWriter, prelude: list[str], body: list[str]) -> tuple[list[str], list[str]]:
    """The plan's lines without the work no rule needs: a value computed at the top that nothing
    reads (`tv0 = type(v0)` for a field compared with no literal), and the check of a variable
    made on first read where only one place reads it (`(n if n is not N else (n := X))` is
    `(n := X)` there, and `n` needs no initial N): the same function, fewer steps per call."""
    words = collections.Counter(_NAME.findall("\n".join(prelude + body)))
    text = "\n".join(body)
    for name, make in w.made.items():
        lazy = f"({name} if {name} is not N else ({name} := {make}))"
        uses = text.count(lazy)
        if uses == 1 and words[name] == 4 + _NAME.findall(make).count(name):  # its own lazy form, and the initial N
            text = text.replace(lazy, f"({make})")
            prelude = [line for line in prelude if line != f"{name} = N"]
        elif uses == 1:  # read again below the one place that makes it: made there, unchecked
            text = text.replace(lazy, f"({name} := {make})")
            prelude = [line for line in prelude if line != f"{name} = N"]
    body = text.split("\n")
    words = collections.Counter(_NAME.findall("\n".join(prelude + body)))
    kept = []
    for line in prelude:
        target = line.split(" = ", 1)[0] if " = " in line and not line.startswith(("if ", "elif ")) else None
        if target is not None and target.isidentifier() and words[target] == 1 and target.startswith("t"):
            continue  # a field's type nothing compares
        kept.append(line)
    return kept, body


def compile_plan(rules: tuple[CompiledRule, ...]) -> Callable[[Env, Callable[[int], None]], int] | None:
    """See `_compile_plan`. A function Python cannot compile (nesting past its parser's limits,
    in a policy of extreme conditions) is written again without the errors-as-values code, and
    when that fails too, the rules are left to their predicates (None)."""
    for with_errors in (True, False):
        try:
            return _compile_plan(rules, with_errors)
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            continue
    return None


def _compile_plan(rules: tuple[CompiledRule, ...], with_errors: bool = True) -> Callable[[Env, Callable[[int], None]], int] | None:
    """One function for the rules a call of some tool runs (in file order): `plan(env, append)`
    appends the position of every rule that holds, and `(position, error text, False)` for
    every rule whose predicate raised (`values.error_text`; the key `Policy._with_errors`
    builds), and returns -1; or it returns the index (in `rules`) of a rule whose predicate
    yielded neither true nor false, from which the caller goes on. None when no rule has a
    shape (the predicates are called one by one)."""
    if not any(r.shape is not None for r in rules):
        return None
    w = _PlanWriter()
    w.with_errors = with_errors
    body: list[str] = []
    for index, rule in enumerate(rules):
        if rule.test is None:
            body.append(f"append({rule.order})")
            continue
        call = [
            "try:",
            f"    r = {w.const(rule.test)}(env)",
            "except ERRORS as exc:",
            f"    append(({rule.order}, _error_text(exc), False))",
            "else:",
            f"    if r is True: append({rule.order})",
            f"    elif r is not False: return {index}",
        ]
        posix = _rule_lines(w, rule, call)
        if "W" not in w.values.values() or rule.shape is None:
            body += posix
            continue
        w.windows = True  # the variant for a call whose cwd is a Windows path
        try:
            windows = _rule_lines(w, rule, call)
        finally:
            w.windows = False
        if windows == posix:
            body += posix
        else:
            body += ["if not W:", *("    " + line for line in posix), "else:", *("    " + line for line in windows)]
    lines = [
        "def plan(env, append):",  # Policy.evaluate calls it only for exact dicts
        "    args = env[1]",
        "    context = env[2]",
    ]
    if any("(P, env, " in line for line in body):
        lines.append("    P = {}")  # the paths made in the loops, for this call
    prelude, body = _trimmed(w, w.prelude, body)
    lines += ["    " + line for line in prelude]
    lines += ["    " + line for line in body]
    lines.append("    return -1")
    namespace = {
        "M": _MISSING, "X": _UNKNOWN, "N": _NOT_YET, "ERRORS": _PLAN_ERRORS, "EvalError": EvalError, "_u": _undecided, "E": _Err, "_first_error": _first_error,
        "_ip3": _item_path3, "_ips3": _item_secret3, "_ipw3": _item_win_path3, "_pv3": _path_value3, "_item_decided": _item_decided,
        "PV": subjects.PathValue, "WPV": subjects.WinPathValue, "_pv": _path_value, "_pv_at": _path_value_at, "LETTERS": winpaths.LETTERS,
        "FP": _FIND_PATH, "PVS": _PATH_TYPES,
        "_parsed_or_none": _parsed_or_none, "U": _Undecided, "_error_text": values.error_text, "_win_under": winpaths.under,
        "_win_under_literal": _win_under_literal, "_win_glob": _win_glob, "_win_glob3": _win_glob3, "_ip": _item_path, "_ipw": _item_win_path, "_ips": _item_secret, "_at": _item_at,
        "_under_text": _under_text, **w.consts,
    }
    text = "\n".join(lines)
    exec(compile(text, "<countersign plan>", "exec"), namespace)
    plan = namespace["plan"]
    plan.source = text  # for a reader (and the tests)
    return plan


# --- rules ------------------------------------------------------------------------------------


def requirements_of(clauses: tuple[ast.Clause, ...], groups: dict[str, tuple[str, ...]]) -> Requirements:
    """The Requirements an ask rule (or a default ask) writes, with defaults for what it omits."""
    fields: dict[str, Any] = {}

    def quorum_of(clause: ast.ApproversClause) -> Quorum:
        if clause.group is not None:
            return Quorum(clause.count, tuple(sorted(set(groups[clause.group]))), clause.group)
        if clause.members is not None:
            return Quorum(clause.count, tuple(sorted({i.value for i in clause.members.items})))
        return Quorum(clause.count)

    for clause in clauses:
        if isinstance(clause, ast.ApproversClause):
            fields["quorums"] = (quorum_of(clause),)
        elif isinstance(clause, ast.DecisionsClause):
            names = {name for name, _ in clause.names}
            fields["decisions"] = tuple(d for d in ("approve", "edit", "reject", "respond") if d in names) or DEFAULT_DECISIONS
        elif isinstance(clause, ast.TimeoutClause):
            fields["timeout_seconds"] = clause.seconds
            fields["timeout_message"] = clause.message
            if clause.escalation is not None:  # the later stages (dsl.escalation)
                fields["escalation"] = escalation.stages_of(clause, quorum_of)
        elif isinstance(clause, ast.RememberClause):
            fields["remember"] = (Remember("until", clause.seconds) if clause.seconds is not None
                                  else Remember(clause.scope))  # type: ignore[arg-type]
    return Requirements(**fields)


def compile_rule(order: int, rule: ast.Rule, groups: dict[str, tuple[str, ...]], source_lines: list[str]) -> CompiledRule:
    rule_id = next((c.rule_id for c in rule.clauses if isinstance(c, ast.IdClause)), None)
    reason = next((c.text for c in rule.clauses if isinstance(c, ast.ReasonClause)), None)
    condition_text = None
    if rule.condition is not None:
        condition_text = _source_slice(source_lines, rule.condition.span)
    return CompiledRule(
        order=order,
        rule_id=rule_id or implicit_id(rule, source_lines),
        effect=rule.effect,
        line=rule.span.line,
        span=rule.span,
        selectors=tuple(s.pattern for s in rule.selectors),
        test=compile_condition(rule.condition) if rule.condition is not None else None,
        reason=reason,
        requirements=requirements_of(rule.clauses, groups) if rule.effect == "ask" else None,
        condition_text=condition_text,
        uses_memo=uses_memo(rule.condition),
        shape=shape_of(rule.condition),
        reads_history=rule.condition is not None and history_eval.reads_history(rule.condition),
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

    CACHE_LIMIT = 4096  # entries of the caches of dsl.policy.Policy that are keyed by the policy

    def __init__(self, rules: list[CompiledRule]):
        self._exact: dict[str, list[CompiledRule]] = {}
        self._globs: list[tuple[Any, CompiledRule]] = []
        for rule in rules:
            for selector in rule.selectors:
                if "*" in selector or "?" in selector:
                    self._globs.append((values.selector_regex(selector), rule))
                else:
                    self._exact.setdefault(selector, []).append(rule)
        # tool name → candidates; one tuple per set of candidates, shared by the names that have it
        self._cache = BoundedCache(BUDGETS["rule_index"], "rule_index")
        self._shared: dict[tuple[int, ...], tuple[CompiledRule, ...]] = {}

    def candidates(self, tool: str) -> tuple[CompiledRule, ...]:
        hit = self._cache.get(tool)
        if hit is not None:
            return hit
        found = {r.order: r for r in self._exact.get(tool, ())}
        for regex, rule in self._globs:
            if rule.order not in found and regex.match(tool):
                found[rule.order] = rule
        key = tuple(sorted(found))
        result = self._shared.get(key)
        if result is None:
            result = tuple(found[k] for k in key)
            if len(self._shared) >= self.CACHE_LIMIT:
                self._shared.clear()
            self._shared[key] = result
        # the entry's cost is its key (the tuple of rules is shared, and the rules are the policy's)
        self._cache.put(tool, result, sys.getsizeof(tool) + 8 * len(result))
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
    caller provides; the step of `expr` itself is appended last, after its operands' steps).
    Wrapped by `guarded`, as `compile_condition_generic`."""
    return guarded(_traced_operand(expr))


def _traced_step(node: Any, body: Fn) -> Fn:
    """Run `body` with a fresh child list and record one step for `node` in the caller's list."""

    def run(env: Env) -> Any:
        children: list = []
        try:
            value = body(env._replace(trace=children))
        except EvalError as exc:
            env.trace.append(TraceStep(node, None, exc.message, children))
            raise
        except RecursionError:
            raise
        except Exception as exc:  # a defect: the whole condition errors, as in Policy.evaluate
            env.trace.append(TraceStep(node, None, values.failure_message(exc), children))
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
    if isinstance(expr, (ast.Literal, ast.ListLiteral, ast.Path, ast.Projection)):
        return _traced_step(expr, _compile(expr))
    if isinstance(expr, ast.Arith):
        left, right, op = _traced(expr.left), _traced(expr.right), expr.op
        return _traced_step(expr, lambda env: expressions.binary(op, left(env), right(env)))
    if isinstance(expr, ast.Neg):
        operand = _traced(expr.operand)
        return _traced_step(expr, lambda env: expressions.numbers.negate(operand(env)))
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
    except Exception:  # recorded by the operand's own step; the result is settled already
        pass


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
    if call.name in ("exists", "calls"):  # reads its path (its pattern) without failing: not an operand
        return _traced_step(call, _compile_call(call))
    if len(call.args) == 2 and call.name not in history_eval.LITERAL_ARGUMENT:  # path(x, base), url(x, scheme), matches(x, pattern): traced as one step
        return _traced_step(call, _compile_call(call))
    arg = _traced(call.args[0])
    # the first argument read from a reserved variable; a history function's literal second
    # argument (a tool pattern, a field path) stays as written, read at compile time
    apply = _compile_call_result(ast.Call(call.name, (ast.Path(_ARG, (), call.span),) + call.args[1:], call.span, call.name_span))
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
        except RecursionError:
            raise
        except Exception as exc:  # a defect: the whole condition errors, as in Policy.evaluate
            env.trace.append(TraceStep(call, None, values.failure_message(exc), children, subject))
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
