"""Static analysis of a checked policy: rules that can never fire or never change a decision,
duplicates, allow and ask rules that overlap, and (given tool schemas) the tools no rule mentions.

    from dsl.analysis import analyze
    for finding in analyze(tree, tools):      # tree: dsl.parser.parse(text); tools: optional
        print(finding.render("x.policy", text))

`countersign policy check` runs it after the checks; its warnings do not stop a policy from loading
(`--strict` makes them errors). Every finding names the rule it is about and, as `related` notes,
the rules that cause it.

What "covers" means here, and why the findings are never wrong (they may miss things):

* **Effects.** Every rule that matches a call counts, and deny beats ask beats allow
  (`dsl.decision.decide`). So an allow is shadowed by a deny or an ask that matches whenever it
  does, and an ask by a deny. Two asks combine their requirements, so an ask never shadows an ask.
* **Conditions.** A rule B matches whenever a rule A does only when B has no condition, or when
  B's condition is *syntactically identical* to A's (same tree, literals of the same type and
  value; spans and layout ignored). Nothing cleverer: `x > 5` does not cover `x > 6` here. (An
  error counts as a match for deny and ask and never for allow, which keeps both cases sound:
  identical conditions error together.)
* **Selectors.** An exact name covers only itself. A glob covers an exact name when it matches it
  (as the rule index does at run time). A glob covers another glob only when that is provable on
  the patterns: every `*` of the inner glob must meet a `*` of the outer one, every `?` a `?` or a
  `*`, every other character itself (`mcp__*` covers `mcp__github__*`; `*_order` does not cover
  `get_*`, although every tool named so far might match both). Tool schemas are not used for this:
  a call may name any tool, listed or not.

Findings (`Finding.code`):

| code | severity | what |
|---|---|---|
| `never-fires` | warning | an allow (or ask) that a stronger rule covers on every tool it names: it never decides a call |
| `duplicate` | warning | the same effect, tools, condition (and, for ask, requirements) as an earlier rule |
| `redundant` | warning | an allow (deny) that an unconditional allow (deny) on the same or broader tools makes pointless: it never changes an effect |
| `shadowed-in-part` | note | as `never-fires`, but only for some of the rule's selectors |
| `overlap` | note | an allow that a conditional ask overrides when the ask's condition holds |
| `uncovered` | note | tools of the schemas that no rule mentions: they get the default |
| `no-rules` | note | a policy with no rules at all (an empty file, say): every call gets the default |

A rule reported as `never-fires` is never among the rules that decide a call (`Decision.deciding`).
A `duplicate` or `redundant` rule may be listed among them, but removing it changes no effect.
"""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dsl import ast
from dsl.errors import Diagnostic, Span, span_file
from dsl.values import glob_regex, selector_regex

_STRONGER = {"allow": ("deny", "ask"), "ask": ("deny",), "deny": ()}
_RANK = {"deny": 0, "ask": 1, "allow": 2}


@dataclass(frozen=True, slots=True)
class Related:
    """Another place a finding points at: the rule that causes it."""

    span: Span
    message: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One analysis result about one rule (or, for `uncovered`, about the file)."""

    severity: str  # "warning" or "note"
    code: str
    message: str
    span: Span | None
    help: str | None = None
    related: tuple[Related, ...] = ()

    def diagnostic(self, severity: str | None = None) -> Diagnostic:
        return Diagnostic(severity or self.severity, self.message, self.span, self.help)  # type: ignore[arg-type]

    def render(self, source_name: str, source_text: str, severity: str | None = None) -> str:
        """The finding as the checker renders diagnostics, then a `note:` at each related rule."""
        parts = [self.diagnostic(severity).render(source_name, source_text)]
        for r in self.related:
            parts.append(Diagnostic("note", r.message, r.span).render(source_name, source_text))  # type: ignore[arg-type]
        return "\n".join(parts)


# --- what the analysis compares -------------------------------------------------------------------


def shape(expr: ast.Expr | None, rename: dict[str, str] | None = None) -> Any:
    """A condition as a hashable tree without spans: equal shapes evaluate equally on every call.
    Literals keep their Python type (`1`, `1.0` and `true` differ), which is conservative.
    `rename` maps quantifier names to others (to compare `any c in S: P` with `all d in S: Q`)."""
    if expr is None:
        return None
    if isinstance(expr, ast.Literal):
        return ("lit", type(expr.value).__name__, expr.value)
    if isinstance(expr, ast.ListLiteral):
        return ("list", tuple(shape(i, rename) for i in expr.items))
    if isinstance(expr, ast.Path):
        root = rename.get(expr.root, expr.root) if rename else expr.root
        return ("path", root, tuple((type(k).__name__, k) for k in expr.keys))
    if isinstance(expr, ast.Call):
        return ("call", expr.name, tuple(shape(a, rename) for a in expr.args), tuple((type(k).__name__, k) for k in expr.keys))
    if isinstance(expr, ast.Compare):
        return ("cmp", expr.op, shape(expr.left, rename), shape(expr.right, rename))
    if isinstance(expr, ast.Not):
        return ("not", shape(expr.operand, rename))
    if isinstance(expr, ast.And):
        return ("and", tuple(shape(o, rename) for o in expr.operands))
    if isinstance(expr, ast.Or):
        return ("or", tuple(shape(o, rename) for o in expr.operands))
    if isinstance(expr, ast.Quantifier):
        var = rename.get(expr.var, expr.var) if rename else expr.var
        return ("quant", expr.kind, var, shape(expr.source, rename), shape(expr.body, rename))
    if isinstance(expr, ast.Arith):
        return ("arith", expr.op, shape(expr.left, rename), shape(expr.right, rename))
    if isinstance(expr, ast.Neg):
        return ("neg", shape(expr.operand, rename))
    if isinstance(expr, ast.Projection):
        steps = tuple(tuple((type(k).__name__, k) for k in step) for step in expr.steps)
        return ("project", shape(expr.base, rename), steps)
    raise TypeError(f"unknown expression node {expr!r}")  # pragma: no cover


def requirements_shape(rule: ast.Rule) -> Any:
    """An ask's requirement clauses without spans (reason and id are not requirements)."""
    out = []
    for c in rule.clauses:
        if isinstance(c, ast.ApproversClause):
            members = None if c.members is None else tuple(sorted({str(i.value) for i in c.members.items if isinstance(i, ast.Literal)}))
            out.append(("approvers", c.count, c.group, members))
        elif isinstance(c, ast.DecisionsClause):
            out.append(("decisions", tuple(sorted({n for n, _ in c.names}))))
        elif isinstance(c, ast.TimeoutClause):
            out.append(("timeout", c.seconds, c.on_timeout or "reject", c.message, _stages_shape(c)))
        elif isinstance(c, ast.RememberClause):
            out.append(("remember", c.scope, c.seconds))
    return tuple(sorted(out, key=repr))


def _stages_shape(c: ast.TimeoutClause) -> Any:
    """The escalation stages after a timeout clause (dsl.escalation), without spans."""
    out = []
    while c.escalation is not None:
        a = c.escalation.approvers
        c = c.escalation.timeout
        members = None if a is None or a.members is None else tuple(sorted({str(i.value) for i in a.members.items if isinstance(i, ast.Literal)}))
        out.append((None if a is None else (a.count, a.group, members), c.seconds, c.on_timeout or "reject", c.message))
    return tuple(out)


def _is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def covers(outer: str, inner: str) -> bool:
    """Does the selector `outer` match every tool name the selector `inner` matches? Exact when
    `inner` is a name; for two globs, True only when provable (see the module docstring)."""
    if not _is_glob(inner):
        return outer == inner if not _is_glob(outer) else selector_regex(outer).match(inner) is not None
    if not _is_glob(outer):
        return False
    return _glob_covers(outer, inner)


@lru_cache(maxsize=4096)
def _glob_covers(outer: str, inner: str) -> bool:
    # outer[i:] derives inner[j:] token by token: a `*` of outer absorbs any run of inner's tokens
    # (wildcards included), a `?` one token that is not `*`, a character itself.
    n, m = len(outer), len(inner)
    seen: dict[tuple[int, int], bool] = {}
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen[(i, j)] = True
        if i == n:
            if j == m:
                return True
            continue
        o = outer[i]
        if o == "*":
            stack.append((i + 1, j))
            if j < m:
                stack.append((i, j + 1))
        elif j < m and inner[j] != "*" and (o == "?" or (inner[j] == o)):
            stack.append((i + 1, j + 1))
    return False


@lru_cache(maxsize=4096)
def intersects(a: str, b: str) -> bool:
    """Could one tool name match both selectors?"""
    if not _is_glob(a):
        return covers(b, a)
    if not _is_glob(b):
        return covers(a, b)
    n, m = len(a), len(b)
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == n and j == m:
            return True
        if i < n and a[i] == "*":
            stack.append((i + 1, j))  # the star matches nothing more
            if j < m:
                stack.append((i, j + 1))  # it takes the next character b produces (or b's star ends)
        if j < m and b[j] == "*":
            stack.append((i, j + 1))
            if i < n:
                stack.append((i + 1, j))
        if i < n and j < m and a[i] != "*" and b[j] != "*" and (a[i] == "?" or b[j] == "?" or a[i] == b[j]):
            stack.append((i + 1, j + 1))
    return False


# --- the analysis ---------------------------------------------------------------------------------


def head_span(rule: ast.Rule) -> Span:
    """The rule's effect and selectors: where a finding about the rule points."""
    last = rule.selectors[-1].span if rule.selectors else rule.effect_span
    # replace, not Span(...): a rule of an included file keeps its file (dsl.errors.FileSpan)
    return dataclasses.replace(rule.effect_span, end_line=last.end_line, end_column=last.end_column)


def _at(rule: ast.Rule) -> str:
    file = span_file(rule.span)
    return f"the {rule.effect} at {file}:{rule.span.line}" if file else f"the {rule.effect} at line {rule.span.line}"


def _quoted(patterns: list[str]) -> str:
    shown = [f"'{p}'" for p in patterns]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


class _Rule:
    __slots__ = ("node", "index", "effect", "patterns", "shape", "requirements")

    def __init__(self, node: ast.Rule, index: int):
        self.node = node
        self.index = index
        self.effect = node.effect
        self.patterns = [s.pattern for s in node.selectors if s.pattern]
        self.shape = shape(node.condition)
        self.requirements = requirements_shape(node) if node.effect == "ask" else None

    def always_with(self, other: "_Rule") -> bool:
        """Does this rule match (count) on every call on which `other` does, tools aside?"""
        return self.shape is None or self.shape == other.shape

    def covering(self, pattern: str) -> list[str]:
        return [p for p in self.patterns if covers(p, pattern)]


def analyze(tree: ast.PolicyFile, tools: Any = None) -> list[Finding]:
    """Every finding for a checked policy, in source order (the `uncovered` note last).
    `tools`: a `dsl.schema.ToolSchemas`, for the tools no rule mentions."""
    rules = [_Rule(node, i) for i, node in enumerate(tree.of_type(ast.Rule))]
    findings: list[Finding] = []
    for r in rules:
        if not r.patterns:
            continue
        never, blockers = _shadowed(r, rules, findings)
        _duplicate(r, rules, findings)
        if not never:
            _redundant(r, rules, findings)
            _overlap(r, rules, findings, blockers)
    if not rules:
        defaults = tree.of_type(ast.DefaultDecl)
        effect = defaults[0].effect if defaults else "ask"
        findings.append(Finding("note", "no-rules", f"the policy has no rules: every call gets the default ({effect})", Span.point(1, 1), None, ()))
    findings.sort(key=lambda f: (f.span.line, f.span.column) if f.span else (0, 0))
    if tools is not None:
        note = coverage_note(tree, tools)
        if note is not None:
            findings.append(note)
    return findings


def _shadowed(r: _Rule, rules: list[_Rule], out: list[Finding]) -> tuple[bool, list[_Rule]]:
    """never-fires / shadowed-in-part. Returns whether the rule never fires, and the rules that
    shadow it (for some or all of its selectors)."""
    stronger = _STRONGER[r.effect]
    if not stronger:
        return False, []
    blockers: dict[str, _Rule] = {}
    for pattern in r.patterns:
        candidates = [b for b in rules if b is not r and b.effect in stronger and b.always_with(r) and b.covering(pattern)]
        if candidates:
            blockers[pattern] = min(candidates, key=lambda b: (_RANK[b.effect], b.index))
    if not blockers:
        return False, []
    causes = list(dict.fromkeys(blockers.values()))
    effects = {b.effect for b in causes}
    beats = "deny beats ask beats allow" if len(effects) > 1 else f"{causes[0].effect} beats {r.effect}"
    if len(causes) == 1:
        who = _at(causes[0].node)
    else:
        who = "the rules at lines " + ", ".join(str(b.node.span.line) for b in causes[:-1]) + f" and {causes[-1].node.span.line}"
    related = tuple(_cause(b, r, [p for p, x in blockers.items() if x is b]) for b in causes)
    if len(blockers) == len(dict.fromkeys(r.patterns)):
        out.append(Finding(
            "warning", "never-fires",
            f"this {r.effect} can never fire: {who} {'matches' if len(causes) == 1 else 'match'} every call it applies to ({beats})",
            head_span(r.node),
            _fix(r, causes),
            related,
        ))
        return True, causes
    out.append(Finding(
        "note", "shadowed-in-part",
        f"this {r.effect} never fires for {_quoted(list(blockers))}: {who} {'matches' if len(causes) == 1 else 'match'} every such call ({beats})",
        head_span(r.node),
        None,
        related,
    ))
    return False, causes


def _cause(b: _Rule, r: _Rule, patterns: list[str]) -> Related:
    why = "has no condition" if b.shape is None else "has the same condition"
    names = sorted({p for q in patterns for p in b.covering(q)})
    return Related(head_span(b.node), f"this {b.effect} {why} and covers {_quoted(patterns)} (as {_quoted(names)})" if names != patterns else f"this {b.effect} {why} and covers {_quoted(patterns)}")


def _fix(r: _Rule, causes: list[_Rule]) -> str:
    if r.effect == "allow" and all(b.effect == "deny" for b in causes):
        return "an allow made pointless by a broader deny: narrow the deny (a condition, fewer tools) or remove the allow"
    if r.effect == "allow":
        return "give the ask a condition that excludes what this allow means to let through, or remove the allow"
    return "narrow the deny (a condition, fewer tools) or remove this ask"


def _duplicate(r: _Rule, rules: list[_Rule], out: list[Finding]) -> None:
    for e in rules[: r.index]:
        if (e.effect == r.effect and set(e.patterns) == set(r.patterns) and e.shape == r.shape
                and e.requirements == r.requirements):
            out.append(Finding(
                "warning", "duplicate",
                f"duplicate rule: the same effect, tools and condition as {_at(e.node)}",
                head_span(r.node),
                "it never changes a decision; remove one (merge their reasons if both matter)",
                (Related(head_span(e.node), "the first of the two"),),
            ))
            return


def _same(a: _Rule, b: _Rule) -> bool:
    return a.effect == b.effect and set(a.patterns) == set(b.patterns) and a.shape == b.shape and a.requirements == b.requirements


def _redundant(r: _Rule, rules: list[_Rule], out: list[Finding]) -> None:
    """An allow or deny that one rule of the same effect, unconditional or with the same
    condition, covers on every tool: removing it changes no effect."""
    if r.effect == "ask":
        return  # asks combine their requirements: another ask never makes one pointless
    for b in rules:
        if b is r or b.effect != r.effect or _same(b, r) or not b.always_with(r):
            continue
        if not all(b.covering(p) for p in r.patterns):
            continue
        if b.index > r.index and r.always_with(b) and all(r.covering(p) for p in b.patterns):
            continue  # each covers the other: report only the later one
        verb = "denies" if r.effect == "deny" else "allows"
        extra = " (its reason is still added to the decision)" if r.effect == "deny" else ""
        out.append(Finding(
            "warning", "redundant",
            f"this {r.effect} never changes a decision: {_at(b.node)} already {verb} every call it applies to{extra}",
            head_span(r.node),
            "remove it, or narrow the broader rule",
            (_cause(b, r, r.patterns),),
        ))
        return


def _overlap(r: _Rule, rules: list[_Rule], out: list[Finding], reported: list[_Rule]) -> None:
    """An allow and an ask that can both apply to one call: the ask wins wherever both match
    (`reported`: the asks already named as shadowing some of the allow's selectors)."""
    if r.effect != "allow":
        return
    for a in rules:
        if a.effect != "ask" or a in reported:
            continue
        shared = [p for p in r.patterns if any(intersects(p, q) for q in a.patterns)]
        if not shared:
            continue
        if disjoint(a.node.condition, r.node.condition):
            continue  # never both true: `> 100` and `<= 100` on the same field
        if a.always_with(r):  # no condition (or the same one), but only some of the same tools
            message = f"{_at(a.node)} overrides this allow for the tools both rules match ({_quoted(shared)}; ask beats allow)"
            why = "this ask applies to some of the same tools"
        else:
            message = f"when the condition of {_at(a.node)} holds, it overrides this allow for {_quoted(shared)} (ask beats allow)"
            why = "this ask's condition decides which of the two applies"
        out.append(Finding("note", "overlap", message, head_span(r.node), None, (Related(head_span(a.node), why),)))


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def _number(expr: ast.Expr) -> int | float | None:
    if isinstance(expr, ast.Literal) and type(expr.value) in (int, float):
        return expr.value
    return None


def _range(expr: ast.Expr, rename: dict[str, str] | None = None) -> tuple[Any, tuple] | None:
    """`operand op number` (either way round) as (the operand's shape, (low, low included, high,
    high included)); None for any other condition."""
    if not isinstance(expr, ast.Compare) or expr.op not in _FLIP:
        return None
    op, subject, value = expr.op, expr.left, _number(expr.right)
    if value is None:
        op, subject, value = _FLIP[expr.op], expr.right, _number(expr.left)
    if value is None or _number(subject) is not None:
        return None
    inf = float("inf")
    bounds = {"<": (-inf, False, value, False), "<=": (-inf, False, value, True), ">": (value, False, inf, False),
              ">=": (value, True, inf, False), "==": (value, True, value, True)}[op]
    return shape(subject, rename), bounds


def _ranges_meet(a: tuple, b: tuple) -> bool:
    (lo1, lo1_in, hi1, hi1_in), (lo2, lo2_in, hi2, hi2_in) = a, b
    lo, lo_in = max((lo1, not lo1_in), (lo2, not lo2_in))  # the larger low; an excluded bound is larger
    hi, hi_in = min((hi1, hi1_in), (hi2, hi2_in))  # the smaller high; an excluded bound is smaller
    lo_in = not lo_in
    return lo < hi or (lo == hi and lo_in and hi_in)


def _in_range(value: Any, bounds: tuple) -> bool:
    lo, lo_in, hi, hi_in = bounds
    return (lo < value or (lo_in and lo == value)) and (value < hi or (hi_in and value == hi))


def _kind(value: Any) -> str:
    """A literal's type as `==` sees it (a boolean is not a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else "string"


def _values(expr: ast.Expr, rename: dict[str, str] | None) -> tuple[Any, bool, str, tuple] | None:
    """`x == v`, `x in [v, ...]` (or their negations `!=`, `not in`) with literals of one type:
    (x's shape, whether x must be one of them (else none of them), their type, the values)."""
    if not isinstance(expr, ast.Compare) or expr.op not in ("==", "!=", "in", "not_in"):
        return None
    if expr.op in ("==", "!="):
        for subject, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(other, ast.Literal) and not isinstance(subject, (ast.Literal, ast.ListLiteral)):
                return shape(subject, rename), expr.op == "==", _kind(other.value), (other.value,)
        return None
    items = expr.right.items if isinstance(expr.right, ast.ListLiteral) else None
    if not items or not all(isinstance(i, ast.Literal) for i in items) or isinstance(expr.left, (ast.Literal, ast.ListLiteral)):
        return None
    kinds = {_kind(i.value) for i in items}
    if len(kinds) != 1:
        return None  # a list of several types: membership may err for some values and not others
    return shape(expr.left, rename), expr.op == "in", kinds.pop(), tuple(i.value for i in items)


def _same_value(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b  # 1 == 1.0, as the language compares numbers


def _glob_ends(pattern: str) -> tuple[str, str]:
    """The literal text a glob's matches must start and end with: the pattern up to its first
    wildcard and after its last (a class `[...]` counts as a wildcard, as does a lone bracket, which
    only shortens the ends: safe)."""
    first = min((i for i, ch in enumerate(pattern) if ch in "*?[]"), default=None)
    if first is None:
        return pattern, pattern
    last = max(i for i, ch in enumerate(pattern) if ch in "*?[]")
    return pattern[:first], pattern[last + 1 :]


def _affix(expr: ast.Expr, rename: dict[str, str] | None) -> tuple[Any, str, str | None, str | None, bool, str | None] | None:
    """What `x glob P`, `x startswith "p"` or `x endswith "s"` says about x's text, when it must
    hold: (x's shape, the anchor of the prefix, the prefix, the suffix, whether to compare without
    case, the string glob pattern when there is one).

    A string glob (x is a field of the call) matches as `fnmatch` does, so its literal ends are
    the text's ends. A path glob (x is `path(...)`) is matched against the normalized path, with a
    relative pattern anchored at the cwd and `~` at the home; only a pattern that normalizing
    leaves as it is (no `.`, `..`, empty segment, `~` or backslash) is read here, its prefix tagged
    by its anchor (two relative patterns share the cwd), and compared without case (so a future
    case-insensitive path kind keeps this sound). Other operands of glob are not read."""
    if not isinstance(expr, ast.Compare) or isinstance(expr.left, (ast.Literal, ast.ListLiteral)):
        return None
    right, left = expr.right, expr.left
    if not (isinstance(right, ast.Literal) and isinstance(right.value, str)):
        return None
    text = right.value
    subject = shape(left, rename)
    if expr.op == "startswith":
        return subject, "text", text, None, False, None
    if expr.op == "endswith":
        return subject, "text", None, text, False, None
    if expr.op != "glob":
        return None
    if isinstance(left, ast.Path) and left.root in ("args", "context"):
        prefix, suffix = _glob_ends(text)
        return subject, "text", prefix, suffix, False, text
    if isinstance(left, ast.Call) and left.name == "path" and not left.keys:
        segments = text.split("/")
        if "\\" in text or text.startswith(("~", "**")) or any(seg in ("", ".", "..") for seg in segments[1 if text.startswith("/") else 0 :]):
            return None
        prefix, suffix = _glob_ends(text)
        return subject, "absolute" if text.startswith("/") else "relative", prefix, suffix, True, None
    return None


def _affixes_clash(x: tuple, y: tuple) -> bool:
    """Can no text have both ends? Prefixes of the same anchor of which neither starts the other,
    or suffixes of which neither ends the other."""
    fold = x[4] or y[4]

    def norm(t: str | None) -> str | None:
        return t.lower() if fold and t is not None else t
    (p1, s1), (p2, s2) = (norm(x[2]), norm(x[3])), (norm(y[2]), norm(y[3]))
    # a path's text is absolute: a `startswith` and an absolute pattern read the same prefix
    if p1 is not None and p2 is not None and (x[1] == y[1] or {x[1], y[1]} == {"text", "absolute"}):
        if not (p1.startswith(p2) or p2.startswith(p1)):
            return True
    if s1 is not None and s2 is not None and not (s1.endswith(s2) or s2.endswith(s1)):
        return True
    return False


def _value_fails(value: Any, affix: tuple) -> bool:
    """Is `x == value` (a string) incompatible with the text constraint `affix` (not a path glob)?"""
    _, anchor, prefix, suffix, fold, pattern = affix
    if anchor != "text" or fold or not isinstance(value, str):
        return False
    if pattern is not None:
        return glob_regex(pattern).match(value) is None
    return (prefix is not None and not value.startswith(prefix)) or (suffix is not None and not value.endswith(suffix))


def _facts(expr: ast.Expr, rename: dict[str, str] | None) -> tuple:
    return (shape(expr, rename), _range(expr, rename), _values(expr, rename), _affix(expr, rename))


def _contradict(x: tuple, y: tuple, x_expr: ast.Expr, y_expr: ast.Expr, rename: dict[str, str]) -> bool:
    """Is one of the two conditions false (not an error) whenever the other is true?"""
    sx, rx, vx, ax = x
    sy, ry, vy, ay = y
    if sx == ("not", sy) or sy == ("not", sx):
        return True  # P and not P
    if rx and ry and rx[0] == ry[0] and not _ranges_meet(rx[1], ry[1]):
        return True
    if vx and vy and vx[0] == vy[0]:
        (_, in_x, kind_x, xs), (_, in_y, kind_y, ys) = vx, vy
        if in_x and in_y and (kind_x == kind_y or "null" in (kind_x, kind_y)):
            if not any(_same_value(a, b) for a in xs for b in ys):
                return True  # one of xs and one of ys: no value is both
        if in_x != in_y and kind_x == kind_y:
            inside, outside = (xs, ys) if in_x else (ys, xs)
            if all(any(_same_value(a, b) for b in outside) for a in inside):
                return True  # one of `inside`, all of which `not in` excludes
    for v, r in ((vx, ry), (vy, rx)):
        if v and r and v[0] == r[0] and v[1] and v[2] == "number" and not any(_in_range(n, r[1]) for n in v[3]):
            return True
    if ax and ay and ax[0] == ay[0] and _affixes_clash(ax, ay):
        return True
    for v, a in ((vx, ay), (vy, ax)):
        if v and a and v[0] == a[0] and v[1] and v[2] == "string" and all(_value_fails(s, a) for s in v[3]):
            return True
    if isinstance(x_expr, ast.Quantifier) and isinstance(y_expr, ast.Quantifier) and x_expr.kind != y_expr.kind:
        # `any c in S: P` and `all d in S: Q` over the same list: when all of S has Q, P is false
        # for each item if P and Q cannot both hold for one item (and an empty S makes `any` false).
        inner = dict(rename)
        inner[y_expr.var] = x_expr.var
        if shape(x_expr.source) == shape(y_expr.source, rename):
            return _disjoint(x_expr.body, y_expr.body, inner)
    return False


def disjoint(a: ast.Expr | None, b: ast.Expr | None) -> bool:
    """True when no call can make both conditions true, and when either is true the other is
    false, not an error (so an ask that errs, which counts, is never hidden beside a true allow).
    Some part of `a` that must hold and some part of `b` that must hold:

    * compare the same operand with numbers whose ranges do not meet (`args.n > 100`,
      `args.n <= 100`; `args.n in [1, 2]`, `args.n > 10`);
    * with `==` or `in` against literals of one type that share no value (`== "a"`, `in ["b",
      "c"]`), or with `==`/`in` and `!=`/`not in` where the second excludes every value the first
      allows (`== "view"`, `!= "view"`); literals of different types are not read (`x == true`
      beside `x == "a"`: the second errs where the first is false);
    * with globs, `startswith` or `endswith` whose literal ends cannot meet (`glob "a*"`, `glob
      "b*"`; `glob "*.py"`, `endswith ".js"`), or with a string literal such a pattern refuses
      (`== "view"`, `glob "edit*"`); see `_affix` for which globs are read;
    * are one the other negated (`P`, `not P`);
    * are `any c in S: P` and `all d in S: Q` over the same S, with P and Q disjoint in this sense.

    False whenever unsure (a note is then shown): a missed contradiction is only a spurious note,
    a wrong one would hide a real overlap."""
    return _disjoint(a, b, {})


def _disjoint(a: ast.Expr | None, b: ast.Expr | None, rename: dict[str, str]) -> bool:
    if a is None or b is None:
        return False
    parts_a = a.operands if isinstance(a, ast.And) else (a,)
    parts_b = b.operands if isinstance(b, ast.And) else (b,)
    facts_b = [(y, _facts(y, rename)) for y in parts_b]
    for x in parts_a:
        fx = _facts(x, None)  # `a`'s names stay; `rename` takes `b`'s quantifier names to `a`'s
        for y, fy in facts_b:
            if _contradict(fx, fy, x, y, rename):
                return True
    return False


def uncovered_tools(tree: ast.PolicyFile, tools: Any) -> list[str]:
    """The tools in `tools` (a ToolSchemas) that no rule's selector matches: they get the default."""
    patterns = [s.pattern for r in tree.of_type(ast.Rule) for s in r.selectors if s.pattern]
    exact = {p for p in patterns if not _is_glob(p)}
    globs = [selector_regex(p) for p in patterns if _is_glob(p)]
    return [n for n in tools.names() if n not in exact and not any(g.match(n) for g in globs)]


def coverage_note(tree: ast.PolicyFile, tools: Any) -> Finding | None:
    missing = uncovered_tools(tree, tools)
    if not missing:
        return None
    defaults = tree.of_type(ast.DefaultDecl)
    effect = defaults[0].effect if defaults else "ask"
    n = len(missing)
    listed = textwrap.fill(", ".join(missing), width=96, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)
    return Finding(
        "note", "uncovered",
        f"{n} tool{'s' if n != 1 else ''} of {tools.origin} {'are' if n != 1 else 'is'} not mentioned by any rule "
        f"and get{'s' if n == 1 else ''} the default ({effect}):\n{listed}",
        None,
    )
