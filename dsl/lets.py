"""`let`: named values and predicates, expanded where they are used.

    let internal(addr) = addr endswith "@example.com"
    let big = args.amount > 500
    deny send_email when not all r in args.to: internal(r) reason "..."

`expand(statements)` replaces every use of a let by its body, with the arguments put in place of
the parameters (the syntax tree the parser built, the lets inlined): the rules that come out hold
only the ordinary nodes of `dsl.ast`, so the checker, the three evaluators of `dsl.compiler`, the
static analysis and the rule index treat them as if the body had been written in place. The rules
as written are kept beside them (`Expansion.written`): rule ids and the condition text a decision
records are those of the rule as written, and `explain` shows each use (`Expansion.uses`).

The rules of the language (docs/policy-language.md, "let and include"):

* A let is pure and not recursive. Its body sees its parameters, `tool`, `args`, `context` and the
  lets defined before it, nothing else (a quantifier's item at the place of use is not visible in
  the body: pass it as an argument). A name is defined before it is used, in rules too: a use
  before the definition, and a let that uses itself, are errors at the use.
* A let `NAME = ...` is used as `NAME` (with fields and indexes after it when its body is a field
  path or a function's result: `let to = args.to` ... `to[0]`); a let `NAME(P, ...) = ...` is
  called with as many arguments. A parameter read with fields (`p.host`) needs an argument that
  can have them (a path or a function's result), as if written in place.
* A let's name may not be that of a root (`tool`, `args`, `context`), a function or another let;
  a parameter's not that of a root, a function, a let or another parameter; a quantifier's item
  not that of a let.
* Substitution never captures: a quantifier of the body whose item has the name of an item
  bound where the let is used is renamed (`x` → `x_2`).
* Bounded: a rule's condition, or a let's body, with every let expanded has at most
  MAX_EXPANDED_NODES nodes (a let used twice in a let used twice ... grows exponentially); more is
  an error at the use that crossed the limit.

Each let's body is also checked on its own (`check`, with its parameters of unknown type), so a
mistake in a let no rule uses is reported too; a diagnostic inside a let's body says where that
let is used.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from dsl import ast
from dsl.errors import Diagnostic, Span, span_file, span_where

# Nodes of one rule's condition (or one let's body) once every let in it is expanded. A
# hand-written condition has tens; a let used in a let used in ... doubles at every level.
MAX_EXPANDED_NODES = 5000
# How deeply the expander follows a condition; the checker stops at dsl.checker.MAX_NESTING.
_MAX_DEPTH = 200


@dataclass(frozen=True, slots=True)
class LetUse:
    """Where a let was expanded: its `name`, the span of the use, the span of the let's name in
    its definition, its parameters (None for a value) and the use as written (the Path or Call
    node: `internal(r)`, `big`)."""

    name: str
    use: Span
    definition: Span
    params: tuple[str, ...] | None
    written: Any = None


@dataclass
class Expansion:
    """What `expand` returns.

    - `tree`: the statements without lets (and includes), each rule's condition expanded;
    - `written`: every rule as written, in the order of `tree`'s rules (the same object when it
      uses no let);
    - `bodies`: each let and its expanded body (None when expanding it failed), in order;
    - `uses`: id(node) → (node, LetUse) for every node of `tree` that stands for a use;
    - `diagnostics`: the errors found while expanding;
    - `failed`: the spans of the uses that could not be expanded (left as written).
    """

    tree: ast.PolicyFile
    written: tuple[ast.Rule, ...]
    bodies: tuple[tuple[ast.LetDecl, ast.Expr | None], ...] = ()
    uses: dict[int, tuple[Any, LetUse]] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed: set[Span] = field(default_factory=set)

    def use_of(self, node: Any) -> LetUse | None:
        entry = self.uses.get(id(node))
        return entry[1] if entry is not None and entry[0] is node else None


def has_lets(statements) -> bool:
    return any(type(s) is ast.LetDecl for s in statements)


class _TooBig(Exception):
    pass


class _Expander:
    def __init__(self) -> None:
        self.lets: dict[str, tuple[ast.LetDecl, ast.Expr | None, int, dict[str, int]]] = {}
        self.all_lets: dict[str, ast.LetDecl] = {}  # every let of the policy, for "defined later"
        self.current: ast.LetDecl | None = None  # the let whose body is being expanded
        self.uses: dict[int, tuple[Any, LetUse]] = {}
        self.diagnostics: list[Diagnostic] = []
        self.size = 0  # nodes of the condition being built
        self.limited_at: Span | None = None
        self.failed: set[Span] = set()  # where a use could not be expanded

    def error(self, message: str, span: Span | None, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic("error", message, span, help))

    # --- statements -----------------------------------------------------------------------

    def run(self, statements) -> Expansion:
        from dsl.checker import FUNCTIONS, ROOTS

        for s in statements:
            # a let named like a root or a function is an error (below) and not a let: its uses
            # stay what they are, so no second error follows from reading them as the let
            if type(s) is ast.LetDecl and s.name not in self.all_lets and s.name not in ROOTS and s.name not in FUNCTIONS:
                self.all_lets[s.name] = s
        out, written, bodies = [], [], []
        for s in statements:
            if type(s) is ast.LetDecl:
                body = self.let(s, ROOTS, FUNCTIONS)
                bodies.append((s, body))
            elif type(s) is ast.IncludeDecl:
                continue
            elif type(s) is ast.Rule and s.condition is not None:
                condition = self.top(s.condition, s.condition.span)
                written.append(s)
                out.append(s if condition is s.condition else dataclasses.replace(s, condition=condition))
            else:
                if type(s) is ast.Rule:
                    written.append(s)
                out.append(s)
        return Expansion(ast.PolicyFile(tuple(out)), tuple(written), tuple(bodies), self.uses, self.diagnostics, self.failed)

    def let(self, s: ast.LetDecl, roots, functions) -> ast.Expr | None:
        if s.name in roots:
            self.error(f"a let cannot be named '{s.name}': it is a root of every condition", s.name_span, "choose another name")
        elif s.name in functions:
            self.error(f"a let cannot be named '{s.name}': it is a function", s.name_span, "choose another name")
        elif s.name in self.lets:
            self.error(f"let '{s.name}' is already defined", s.name_span, f"first defined at {span_where(self.lets[s.name][0].span)}")
            return None
        seen: set[str] = set()
        for param, span in s.params or ():
            if param in roots or param in functions:
                self.error(f"a parameter cannot be named '{param}': it is a {'root' if param in roots else 'function'}", span,
                           "choose another name")
            elif param in self.all_lets:
                self.error(f"a parameter cannot be named '{param}': a let is named so (at {span_where(self.all_lets[param].span)})", span,
                           "choose another name")
            elif param in seen:
                self.error(f"parameter '{param}' is listed twice", span)
            seen.add(param)
        self.current = s
        try:
            body = self.top(s.body, s.span, scope=frozenset(seen))
        finally:
            self.current = None
        occurrences: dict[str, int] = {}
        if seen:  # a let without parameters has none to count
            _count_roots(body, seen, occurrences)
        if s.name in self.all_lets:
            # the expander counted the nodes it made (`grow`); a body left unexpanded (too big) is counted here
            size = self.size if self.limited_at is None else _count(body)
            self.lets[s.name] = (s, body, size, occurrences)
        return body

    def top(self, expr: ast.Expr, span: Span, scope: frozenset = frozenset()) -> ast.Expr:
        """`expr` with every let expanded (itself when it uses none)."""
        self.size = 0
        self.limited_at = None
        try:
            return self.expand(expr, scope, 0)
        except _TooBig:
            self.error(
                f"with its lets expanded this condition has more than {MAX_EXPANDED_NODES} nodes",
                self.limited_at or span,
                "a let used several times in a let that is itself used several times grows quickly: "
                "write the shared part once, or split the rule",
            )
            # left as written: its uses of lets are not names the checker knows, and nothing more
            # is to be said of them than this error
            stack = [expr]
            while stack:
                node = stack.pop()
                if (type(node) is ast.Path and node.root in self.all_lets) or (type(node) is ast.Call and node.name in self.all_lets):
                    self.failed.add(node.span)
                    if type(node) is ast.Call:
                        self.failed.add(node.name_span)
                stack.extend(ast.children(node))
            return expr

    # --- expressions ------------------------------------------------------------------------

    def grow(self, n: int, span: Span) -> None:
        self.size += n
        if self.size > MAX_EXPANDED_NODES:
            self.limited_at = self.limited_at or span
            raise _TooBig

    def expand(self, expr: ast.Expr, scope: frozenset, depth: int) -> ast.Expr:
        if depth > _MAX_DEPTH:  # the checker reports the nesting; nothing deeper is expanded
            return expr
        kind = type(expr)
        if kind is ast.Literal:
            self.grow(1, expr.span)
            return expr
        if kind is ast.Path:
            if expr.root in scope or expr.root not in self.all_lets:
                self.grow(1, expr.span)
                return expr
            return self.use(expr, expr.root, (), expr.keys, scope, depth, called=False)
        if kind is ast.Call:
            if expr.name in self.all_lets:
                return self.use(expr, expr.name, expr.args, expr.keys, scope, depth, called=True)
            self.grow(1, expr.span)
            args = tuple(self.expand(a, scope, depth + 1) for a in expr.args)
            return expr if _same(args, expr.args) else dataclasses.replace(expr, args=args)
        if kind is ast.ListLiteral:
            self.grow(1, expr.span)
            items = tuple(self.expand(i, scope, depth + 1) for i in expr.items)
            return expr if _same(items, expr.items) else dataclasses.replace(expr, items=items)
        if kind is ast.Compare or kind is ast.Arith:
            self.grow(1, expr.span)
            left, right = self.expand(expr.left, scope, depth + 1), self.expand(expr.right, scope, depth + 1)
            return expr if left is expr.left and right is expr.right else dataclasses.replace(expr, left=left, right=right)
        if kind is ast.Not or kind is ast.Neg:
            self.grow(1, expr.span)
            operand = self.expand(expr.operand, scope, depth + 1)
            return expr if operand is expr.operand else dataclasses.replace(expr, operand=operand)
        if kind is ast.And or kind is ast.Or:
            self.grow(1, expr.span)
            operands = tuple(self.expand(o, scope, depth + 1) for o in expr.operands)
            return expr if _same(operands, expr.operands) else dataclasses.replace(expr, operands=operands)
        if kind is ast.Quantifier:
            self.grow(1, expr.span)
            if expr.var in self.all_lets:
                self.error(f"the name '{expr.var}' is already taken", expr.var_span,
                           f"a let is named so (at {span_where(self.all_lets[expr.var].span)}): choose another name for the item")
            source = self.expand(expr.source, scope, depth + 1)
            body = self.expand(expr.body, scope | {expr.var}, depth + 1)
            return expr if source is expr.source and body is expr.body else dataclasses.replace(expr, source=source, body=body)
        if kind is ast.Projection:
            self.grow(1, expr.span)
            base = self.expand(expr.base, scope, depth + 1)
            return expr if base is expr.base else dataclasses.replace(expr, base=base)
        return expr  # a node of another part of the language: nothing of a let inside it

    def use(self, node, name: str, args: tuple, keys: tuple, scope: frozenset, depth: int, called: bool) -> ast.Expr:
        """The expansion of one use of let `name` (`node`: the Path or Call as written); `node`
        itself after an error (the checker then says nothing more about it)."""
        result = self._use(node, name, args, keys, scope, depth, called)
        if result is node:
            self.failed.add(node.span)
            if called:
                self.failed.add(node.name_span)
        return result

    def _use(self, node, name: str, args: tuple, keys: tuple, scope: frozenset, depth: int, called: bool) -> ast.Expr:
        span = node.span
        name_span = node.name_span if called else dataclasses.replace(span, end_line=span.line, end_column=span.column + len(name) - 1)
        current = self.current
        if current is not None and current.name == name:
            self.error(f"let '{name}' uses itself", name_span, "a let is not recursive: write the condition without it")
            return node
        entry = self.lets.get(name)
        if entry is None:
            later = self.all_lets[name]
            self.error(f"'{name}' is used before its definition (at {span_where(later.span)})", name_span,
                       "a let is visible only after it: move its definition above this use")
            return node
        let, body, body_size, occurrences = entry
        if body is None:  # its definition had an error, already reported
            return node
        if let.params is None and called:
            self.error(f"'{name}' is a value, not a function: write {name} without parentheses", node.span,
                       f"let {name} at {span_where(let.span)} has no parameters")
            return node
        if let.params is not None and not called:
            n = len(let.params)
            self.error(f"'{name}' takes {n} argument{'s' if n != 1 else ''}: write {name}({', '.join(p for p, _ in let.params)})",
                       node.span, f"let {name} is defined at {span_where(let.span)}")
            return node
        params = let.params or ()
        if len(args) != len(params):
            self.error(f"{name}() takes {len(params)} argument{'s' if len(params) != 1 else ''}, not {len(args)}", node.span,
                       f"let {name}({', '.join(p for p, _ in params)}) is defined at {span_where(let.span)}")
            return node
        before = self.size
        expanded_args, sizes = [], []
        for a in args:
            start = self.size
            expanded_args.append(self.expand(a, scope, depth + 1))
            sizes.append(self.size - start)  # the nodes `grow` counted for it
        self.size = before  # the arguments count where the body reads them (below)
        growth = body_size + sum(occurrences.get(p, 0) * (n - 1) for (p, _), n in zip(params, sizes))
        self.grow(max(growth, 1), span)
        env: dict[str, ast.Expr] = {p: a for (p, _), a in zip(params, expanded_args)}
        result = _Substitution(env, scope, self).run(body)
        if result is None:
            return node
        if keys:
            with_keys = _with_keys(result, keys)
            if with_keys is None:
                self.error(f"'{name}' is not a field path or a function's result, so it has no fields", node.span,
                           f"its body (at {span_where(let.span)}) is a condition or a literal")
                return node
            result = with_keys
        else:
            result = dataclasses.replace(result)  # a node of its own, so that this use is known by it
        shown_params = tuple(p for p, _ in params) if let.params is not None else None
        self.uses[id(result)] = (result, LetUse(name, node.span, let.name_span, shown_params, node))
        return result


class _Substitution:
    """The body of a let with its parameters replaced by the arguments of one use. `scope`: the
    items bound where the let is used (a quantifier of the body named like one is renamed)."""

    def __init__(self, env: dict[str, ast.Expr], scope: frozenset, expander: _Expander):
        self.env = env
        self.avoid = set(scope)
        self.expander = expander
        self.failed = False

    def run(self, body: ast.Expr) -> ast.Expr | None:
        if not self.env and not self.avoid:
            return body
        result = self.sub(body, self.env)
        return None if self.failed else result

    def sub(self, expr: ast.Expr, env: dict[str, ast.Expr]) -> ast.Expr:
        kind = type(expr)
        if kind is ast.Path:
            arg = env.get(expr.root)
            if arg is None:
                return expr
            out = _with_keys(arg, expr.keys)
            if out is None:
                self.failed = True
                self.expander.error(
                    f"the let reads {ast.Path(expr.root, expr.keys, expr.span).text}, but this argument has no fields",
                    arg.span, "pass a field path or a function's result (args.x, url(args.u)) where the let reads fields")
                return expr
            return out
        if kind is ast.Literal:
            return expr
        new = None
        if kind is ast.Call:
            args = tuple(self.sub(a, env) for a in expr.args)
            new = None if _same(args, expr.args) else dataclasses.replace(expr, args=args)
        elif kind is ast.ListLiteral:
            items = tuple(self.sub(i, env) for i in expr.items)
            new = None if _same(items, expr.items) else dataclasses.replace(expr, items=items)
        elif kind is ast.Compare or kind is ast.Arith:
            left, right = self.sub(expr.left, env), self.sub(expr.right, env)
            new = None if left is expr.left and right is expr.right else dataclasses.replace(expr, left=left, right=right)
        elif kind is ast.Not or kind is ast.Neg:
            operand = self.sub(expr.operand, env)
            new = None if operand is expr.operand else dataclasses.replace(expr, operand=operand)
        elif kind is ast.And or kind is ast.Or:
            operands = tuple(self.sub(o, env) for o in expr.operands)
            new = None if _same(operands, expr.operands) else dataclasses.replace(expr, operands=operands)
        elif kind is ast.Quantifier:
            source = self.sub(expr.source, env)
            var, inner = expr.var, env
            if var in self.avoid or any(_mentions(a, var) for a in env.values()):
                var = _fresh(var, self.avoid | set(env) | _names(expr.body))
                inner = {**env, expr.var: ast.Path(var, (), expr.var_span)}
            elif var in env:
                inner = {k: v for k, v in env.items() if k != var}
            body = self.sub(expr.body, inner)
            if source is not expr.source or body is not expr.body or var != expr.var:
                new = dataclasses.replace(expr, var=var, source=source, body=body)
        elif kind is ast.Projection:
            base = self.sub(expr.base, env)
            new = None if base is expr.base else dataclasses.replace(expr, base=base)
        if new is None:
            return expr
        entry = self.expander.uses.get(id(expr))
        if entry is not None and entry[0] is expr:  # a use of another let inside this body
            self.expander.uses[id(new)] = (new, entry[1])
        return new


def _with_keys(node: ast.Expr, keys: tuple) -> ast.Expr | None:
    """`node` with `keys` read from it (a path or a call takes them), or None when it cannot."""
    if not keys:
        return node
    if type(node) is ast.Path:
        return ast.Path(node.root, node.keys + keys, node.span)
    if type(node) is ast.Call:
        return dataclasses.replace(node, keys=node.keys + keys)
    return None


def _same(new: tuple, old: tuple) -> bool:
    return all(a is b for a, b in zip(new, old))


def _count(expr) -> int:
    """Nodes of an expression (every node of dsl.ast below a condition counts one)."""
    if expr is None:
        return 0
    n, stack = 0, [expr]
    while stack:
        node = stack.pop()
        n += 1
        stack.extend(ast.children(node))
    return n


def _count_roots(expr, names: set[str], out: dict[str, int]) -> None:
    """How many times each name of `names` stands as a path's root in `expr`."""
    stack = [expr] if expr is not None else []
    while stack:
        node = stack.pop()
        if type(node) is ast.Path and node.root in names:
            out[node.root] = out.get(node.root, 0) + 1
        stack.extend(ast.children(node))


def _names(expr) -> set[str]:
    """Every path root and quantifier item named in `expr`."""
    out, stack = set(), [expr]
    while stack:
        node = stack.pop()
        if type(node) is ast.Path:
            out.add(node.root)
        elif type(node) is ast.Quantifier:
            out.add(node.var)
        stack.extend(ast.children(node))
    return out


def _mentions(expr, name: str) -> bool:
    return name in _names(expr)


def _fresh(var: str, taken: set[str]) -> str:
    n = 2
    while f"{var}_{n}" in taken:
        n += 1
    return f"{var}_{n}"


def expand(statements) -> Expansion:
    """Expand every let of `statements` (a policy's, includes already read: `dsl.includes`)."""
    return _Expander().run(statements)


# --- checking the bodies --------------------------------------------------------------------------


def check(expansion: Expansion, tools: Any = None, groups: Mapping[str, tuple[str, ...]] | None = None) -> list[Diagnostic]:
    """`dsl.checker.check` of the expanded tree, with every let's expanded body checked on its own
    (its parameters of unknown type) and the expansion's own errors; a diagnostic inside a let's
    body says where the let is used. Errors first, then warnings."""
    from dsl.checker import ANY, _Checker

    class _LetChecker(_Checker):
        let_names = tuple(let.name for let, _ in expansion.bodies)  # for the hints of unknown names

        def run(self, tree):
            for let, body in expansion.bodies:
                if body is None:
                    continue
                self.scope = {p: ANY for p, _ in let.params or ()}
                try:
                    self.expr(body)
                finally:
                    self.scope = {}
            return super().run(tree)

    found = _LetChecker(tools, groups).run(expansion.tree)
    # An expansion error stands where the checker would only see an unknown name: one message.
    at = {d.span for d in expansion.diagnostics} | expansion.failed
    found = [d for d in found if d.span not in at]
    found = [_located(d, expansion) for d in found]
    return sort(list(dict.fromkeys(expansion.diagnostics + found)))


def _located(d: Diagnostic, expansion: Expansion) -> Diagnostic:
    """`d`, with where the let it points into is used when it points into a let's body."""
    if d.span is None:
        return d
    for let, _ in expansion.bodies:
        if _within(d.span, let.span):
            uses = sorted({(span_file(u.use) or "", u.use.line, u.use.column) for _, u in expansion.uses.values()
                           if u.name == let.name and u.definition == let.name_span})
            if not uses:
                return d
            shown = ", ".join(f"{f}:{line}:{col}" if f else f"line {line}" for f, line, col in uses[:3])
            more = f" and {len(uses) - 3} more" if len(uses) > 3 else ""
            note = f"in let '{let.name}', used at {shown}{more}"
            return dataclasses.replace(d, help=f"{d.help}; {note}" if d.help else note)
    return d


def _within(inner: Span, outer: Span) -> bool:
    return (span_file(inner) == span_file(outer)
            and (outer.line, outer.column) <= (inner.line, inner.column)
            and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column))


def sort(diagnostics: list[Diagnostic], files: Mapping[str, int] | None = None) -> list[Diagnostic]:
    """Errors first, then warnings; each by file (the loaded file, then included ones in the order
    read) and position."""
    order = {"error": 0, "warning": 1}
    files = files or {}

    def key(d: Diagnostic):
        file = span_file(d.span)
        return (order.get(d.severity, 2), 0 if file is None else 1 + files.get(file, len(files)),
                d.span.line if d.span else 0, d.span.column if d.span else 0)

    return sorted(diagnostics, key=key)


# --- the tree a loaded policy was compiled from ---------------------------------------------------


def reread(policy) -> tuple[ast.PolicyFile, Expansion | None, Any]:
    """(the statements `policy` was compiled from, lets expanded; the Expansion, None without
    lets; the `dsl.includes.Assembly`, None without includes), read again from `policy.sources`:
    no file is read and nothing is checked (the policy loaded, so none of it fails)."""
    from dsl import includes
    from dsl.parser import parse

    tree = parse(policy.source_text, policy.source_name)
    assembly = None
    if includes.has_includes(tree.statements):
        root_path, data = policy.sources[0]
        assembly = includes.gather(tree, root_path, data, policy.source_name, includes.memory_reader(dict(policy.sources)))
        tree = ast.PolicyFile(assembly.statements)
    expansion = None
    if has_lets(tree.statements):
        expansion = expand(tree.statements)
        tree = expansion.tree
    return tree, expansion, assembly


def printer(policy, expansion: Expansion | None = None, assembly: Any = None):
    """A `dsl.fmt` printer for the nodes of `policy` that reads each number as written in the file
    it comes from, and knows which nodes stand for a let's use (`use_of`)."""
    from dsl.errors import source_lines
    from dsl.fmt import _Printer

    class _ReusePrinter(_Printer):
        def literal(self, lit: ast.Literal) -> str:
            other = assembly.lines_of(lit.span) if assembly is not None else None
            if other is None:
                return super().literal(lit)
            self.lines = other
            try:
                return super().literal(lit)
            finally:
                self.lines = root

        @staticmethod
        def use_of(node) -> LetUse | None:
            return expansion.use_of(node) if expansion is not None else None

        def _flat(self, expr) -> str:
            # a let's use prints as written (`internal(r)`), but for the node `expanded` unfolds
            use = self.use_of(expr) if expr is not self.unfold else None
            if use is not None and use.written is not None:
                return super()._flat(use.written)
            return super()._flat(expr)

        def expanded(self, expr) -> str:
            """`flat(expr)` with the let's use `expr` stands for shown expanded (its body)."""
            self.unfold = expr
            try:
                return self.flat(expr)
            finally:
                self.unfold = None

    _ReusePrinter.unfold = None

    root = source_lines(policy.source_text)
    return _ReusePrinter(root)


def use_text(use: LetUse) -> tuple[str, str]:
    """(`NAME` or `NAME(P, ...)`, where it is defined) for an explanation."""
    head = use.name if use.params is None else f"{use.name}({', '.join(use.params)})"
    file = span_file(use.definition)
    where = f"{file}:{use.definition.line}" if file else f"line {use.definition.line}"
    return head, where
