"""`countersign policy fmt`: one canonical layout for policy files, comments kept.

`format_policy(text, name)` parses the text (a syntax error raises `PolicyError`; the checks are
not needed, so a file with a check error can still be formatted) and prints it again:

* Statements stay in the order written, each starting on its own line. Where the source had one or
  more blank lines between two statements (or comments), there is exactly one; elsewhere none.
  The file ends with one newline; lines carry no trailing spaces.
* A rule's head is `EFFECT sel1, sel2, ...`; selectors are bare where the grammar allows
  (`mcp__github__*`) and quoted otherwise (`"my tool"`, `"deny"`). A head longer than the width
  (100 columns) wraps between selectors, continuation lines aligned under the first selector.
* `when CONDITION` stays on the head line when the whole line fits; otherwise it goes on its own
  line, indented two spaces. Every other clause (`reason`, `approvers`, `decisions`, `timeout`,
  `remember`, `id`) is on its own line, indented two spaces, in the order written. A default keeps its
  reason where it was written (after the effect, or as a clause).
* A condition that does not fit is broken before `or`/`and`: as many operands per line as fit,
  continuation lines of the `when` indented four spaces and starting with the operator; inside
  parentheses they are aligned after the `(`; a quantifier whose body does not fit puts the body
  on the next line, two spaces in. Comparisons (except a list on their right), calls and paths
  never break, so such a line may be longer than the width.
* A literal list that does not fit (on the right of a comparison, in a group, after `approvers N
  from`) wraps between items, aligned after the `[`.
* Spacing is normalized (`a == b`, `f(x)`, `[a, b]`, `x.y`, no trailing comma); parentheses are
  exactly those the syntax tree needs, plus around an `and` inside an `or`, around a comparison or
  quantifier under `not` (`not (a == b)`) and around a quantifier that is an operand of
  `and`/`or`. Strings are printed
  with double quotes and the shortest escapes (`\\"`, `\\\\`, `\\n`, `\\t`, ...; invisible
  characters as `\\uXXXX`, everything else as itself); numbers and durations as written.
* `let NAME(P, ...) = BODY` stays on one line when it fits; otherwise `let NAME(P, ...) =` ends
  the line and the body follows, two spaces in, broken as a condition is (continuation lines
  four spaces in). `include "FILE"` is one line.
* Every comment is kept, with its text as written (trailing spaces removed). A comment on a line of
  its own between statements stays there. Inside a statement, a comment on a line of its own goes
  before the clause it preceded (or before the part of the statement it was inside, such as a
  multi-line condition), indented like that clause; a comment at the end of a line stays at the
  end of the last line of the clause it followed, two spaces after it. When one clause collects
  two or more end-of-line comments (a condition spread over lines, say), they all move to lines of
  their own before it.

The result is idempotent (`format_policy(format_policy(t)) == format_policy(t)`), parses to the
same syntax tree, so it decides every call as the original (only the default rule ids `L<line>`
follow the new line numbers), and tests/test_fmt.py checks all three with hypothesis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dsl import ast, escalation
from dsl.errors import source_lines
from dsl.keywords import KEYWORDS

WIDTH = 100
INDENT = 2  # clauses
CONTINUATION = 4  # a broken condition's continuation lines under `  when`

_TOOL_PATTERN = re.compile(r"[A-Za-z0-9_*?][A-Za-z0-9_*?.\-]*\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = frozenset(KEYWORDS) | {"true", "false", "null"}
_WS = " \t\r\f"  # what the grammar ignores besides newlines


def format_policy(text: str, name: str = "<policy>") -> str:
    """The canonical layout of a policy's text. Raises `PolicyError` on a syntax error."""
    from dsl.parser import parse_with_comments  # Lark: not for rule_text, which the compiler uses

    text = text.removeprefix("\ufeff")
    tree, tokens = parse_with_comments(text, name)
    return _Formatter(text, tree, tokens).run()


def expr_text(expr: ast.Expr, source_text: str) -> str:
    """A condition (or any sub-expression) on one line, as `fmt` prints it."""
    return _Printer(source_lines(source_text)).flat(expr, "top")


def rule_text(rule: ast.Rule, source_text: str | list[str]) -> str:
    """What a rule matches and does, on one line as `fmt` prints it: `EFFECT sel, sel when
    CONDITION` (no clauses, no comments). Layout, comments and `fmt` leave it unchanged; numbers
    keep their spelling (`1e3`), as `fmt` keeps it. `source_text`: the policy's text or its lines."""
    lines = source_lines(source_text) if isinstance(source_text, str) else source_text
    head = rule.effect + " " + ", ".join(selector_text(s.pattern) for s in rule.selectors)
    if rule.condition is None:
        return head
    return head + " when " + _Printer(lines).flat(rule.condition, "top")


# --- printing expressions ---------------------------------------------------------------------


def quote(text: str) -> str:
    """A string literal: double quotes, JSON escapes only where needed, invisible characters as
    \\uXXXX."""
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code > 0xFFFF:  # a surrogate pair, as JSON writes it
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
    out.append('"')
    return "".join(out)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def selector_text(pattern: str) -> str:
    if _TOOL_PATTERN.match(pattern) and pattern not in _RESERVED:
        return pattern
    return quote(pattern)


def _keys_text(keys: tuple[str | int, ...]) -> str:
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif _NAME.match(key):
            out += "." + key
        else:
            out += "[" + quote(key) + "]"
    return out


# Where an expression stands decides whether it needs parentheses:
#   top: a whole condition, a quantifier's body, a call's argument, a list item, inside ( )
#   or / and: an operand of or / and;  not: the operand of not;  operand: a comparison's side or
#   a quantifier's list.
_PARENS = {
    ast.Or: ("or", "and", "not", "operand"),  # an or inside an or: the grouping as written
    ast.And: ("or", "and", "not", "operand"),  # an and inside an or: for the reader
    ast.Not: ("operand",),
    ast.Compare: ("not", "operand"),
    ast.Quantifier: ("or", "and", "not", "operand"),  # its body would swallow what follows
}


_ARITH_LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2}


def _needs_parens(expr: ast.Expr, ctx: str) -> bool:
    return ctx in _PARENS.get(type(expr), ())


class _Printer:
    def __init__(self, lines: list[str], width: int = WIDTH):
        self.lines = lines
        self.width = width
        # Comments kept inside a broken condition (see _Formatter.attach_in_condition), by the
        # id() of the operand of an and/or they stand before / after, and the ids of the nodes
        # that hold such an operand (those never print on one line).
        self.before: dict[int, list[_Comment]] = {}
        self.after: dict[int, _Comment] = {}
        self.commented: set[int] = set()

    def literal(self, lit: ast.Literal) -> str:
        value = lit.value
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, str):
            return quote(value)
        span = lit.span
        if span is not None and span.line == span.end_line and 0 < span.line <= len(self.lines):
            written = self.lines[span.line - 1][span.column - 1 : span.end_column]
            if re.fullmatch(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", written):
                return written  # numbers as written: 1e3 stays 1e3
        return repr(value) if isinstance(value, float) else str(value)

    def flat(self, expr: ast.Expr, ctx: str = "top") -> str:
        text = self._flat(expr)
        return f"({text})" if _needs_parens(expr, ctx) else text

    def _flat(self, expr: ast.Expr) -> str:
        if isinstance(expr, ast.Literal):
            return self.literal(expr)
        if isinstance(expr, ast.ListLiteral):
            return "[" + ", ".join(self.flat(i) for i in expr.items) + "]"
        if isinstance(expr, ast.Path):
            return expr.root + _keys_text(expr.keys)
        if isinstance(expr, ast.Call):
            return f"{expr.name}(" + ", ".join(self.flat(a) for a in expr.args) + ")" + _keys_text(expr.keys)
        if isinstance(expr, ast.Compare):
            op = "not in" if expr.op == "not_in" else expr.op
            return f"{self.flat(expr.left, 'operand')} {op} {self.flat(expr.right, 'operand')}"
        if isinstance(expr, ast.Not):
            return "not " + self.flat(expr.operand, "not")
        if isinstance(expr, (ast.And, ast.Or)):
            word = "and" if isinstance(expr, ast.And) else "or"
            return f" {word} ".join(self.flat(o, word) for o in expr.operands)
        if isinstance(expr, ast.Quantifier):
            return f"{self.quantifier_head(expr)} {self.flat(expr.body)}"
        if isinstance(expr, (ast.Arith, ast.Neg)):
            return self.arith(expr)
        if isinstance(expr, ast.Projection):
            return self._flat(expr.base) + "".join("[*]" + _keys_text(step) for step in expr.steps)
        raise TypeError(f"cannot print {expr!r}")  # pragma: no cover

    def arith(self, expr: ast.Arith | ast.Neg) -> str:
        """`a + b * c`, `-x`: parentheses where the tree's grouping differs from the precedence
        and left-associativity of `+ -` below `* /` below unary minus (and around any test)."""
        if isinstance(expr, ast.Neg):
            return "-" + self.arith_operand(expr.operand, 3, False)
        level = _ARITH_LEVEL[expr.op]
        return f"{self.arith_operand(expr.left, level, False)} {expr.op} {self.arith_operand(expr.right, level, True)}"

    def arith_operand(self, expr: ast.Expr, level: int, right: bool) -> str:
        if isinstance(expr, ast.Arith):
            inner = _ARITH_LEVEL[expr.op]
            text = self.arith(expr)
            return f"({text})" if inner < level or (right and inner == level) else text
        if isinstance(expr, ast.Neg):
            return self.arith(expr)
        if isinstance(expr, ast.Literal) and level == 3 and type(expr.value) in (int, float):
            return f"({self.literal(expr)})"  # -(5): `--5` would not read back; the parser folds `-5`
        return self.flat(expr, "operand")

    def quantifier_head(self, q: ast.Quantifier) -> str:
        return f"{q.kind} {q.var} in {self.flat(q.source, 'operand')}:"

    # Layout: `lay` returns the lines of `expr` whose first character stands at column `col` of
    # the current line (the first line holds no indentation); later lines are whole lines.
    # `ci` is where the continuation lines of an and/or chain at this level start; `tail` is how
    # many characters (closing parentheses) will follow the expression on its last line.

    def lay(self, expr: ast.Expr, col: int, ci: int, ctx: str = "top", tail: int = 0) -> list[str]:
        text = self.flat(expr, ctx)
        if col + len(text) + tail <= self.width and id(expr) not in self.commented:
            return [text]
        if _needs_parens(expr, ctx):
            lines = self.lay_bare(expr, col + 1, col + 1, tail + 1)
            lines[0] = "(" + lines[0]
            lines[-1] += ")"
            return lines
        return self.lay_bare(expr, col, ci, tail)

    def lay_bare(self, expr: ast.Expr, col: int, ci: int, tail: int = 0) -> list[str]:
        if isinstance(expr, (ast.And, ast.Or)):
            word = "and" if isinstance(expr, ast.And) else "or"
            last = len(expr.operands) - 1
            out = self.lay(expr.operands[0], col, ci, word)
            broken = self.comment_after(expr.operands[0], out) or len(out) > 1
            for n, operand in enumerate(expr.operands[1:], 1):
                end = (col if len(out) == 1 else 0) + len(out[-1])
                piece = f"{word} {self.flat(operand, word)}"
                leading = self.before.get(id(operand), ())
                if (
                    not broken
                    and not leading
                    and id(operand) not in self.commented
                    and end + 1 + len(piece) + (tail if n == last else 0) <= self.width
                ):
                    out[-1] += " " + piece
                    broken = self.comment_after(operand, out)
                    continue
                out.extend(" " * ci + c.text for c in leading)
                sub = self.lay(operand, ci + len(word) + 1, ci, word, tail if n == last else 0)
                out.append(" " * ci + f"{word} " + sub[0])
                out.extend(sub[1:])
                broken = self.comment_after(operand, out) or len(sub) > 1
            return out
        if isinstance(expr, ast.Not):
            sub = self.lay(expr.operand, col + 4, ci, "not", tail)
            return ["not " + sub[0]] + sub[1:]
        if isinstance(expr, ast.Quantifier):
            head = self.quantifier_head(expr)
            body = self.lay(expr.body, ci + 2, ci + 2, "top", tail)
            return [head, " " * (ci + 2) + body[0]] + body[1:]
        if isinstance(expr, ast.Compare) and isinstance(expr.right, ast.ListLiteral) and expr.right.items:
            op = "not in" if expr.op == "not_in" else expr.op
            opening = f"{self.flat(expr.left, 'operand')} {op} ["
            return self.fill(opening, [self.flat(i) for i in expr.right.items], "]", col, tail)
        return [self.flat(expr)]  # other comparisons, calls, paths and literals do not break

    def comment_after(self, operand: ast.Expr, out: list[str]) -> bool:
        """Put the comment kept after `operand` (if any) at the end of its last line; True when
        there was one (the next operand then starts a new line)."""
        c = self.after.get(id(operand))
        if c is not None:
            out[-1] += "  " + c.text
        return c is not None

    def fill(self, opening: str, items: list[str], closing: str, col: int, tail: int = 0) -> list[str]:
        """`opening item, item, ... closing` with the first character at column `col`, wrapped
        between items, continuation lines aligned after `opening`."""
        lines = [opening]
        align = col + len(opening)
        for i, text in enumerate(items):
            last = i == len(items) - 1
            piece = text + (closing if last else ",")
            start = col if len(lines) == 1 else 0
            if i == 0 or start + len(lines[-1]) + 1 + len(piece) + (tail if last else 0) <= self.width:
                lines[-1] += ("" if i == 0 else " ") + piece
            else:
                lines.append(" " * align + piece)
        if not items:
            lines[-1] += closing
        return lines


# --- statements and comments ------------------------------------------------------------------


@dataclass
class _Comment:
    line: int
    text: str
    own_line: bool  # nothing but whitespace before it on its line


@dataclass
class _Element:
    """A part of a statement printed on lines of its own: the head (with the condition when it
    fits on the head line), the `when` condition, or one clause."""

    kind: str
    start: int
    end: int
    node: Any = None
    leading: list[_Comment] = field(default_factory=list)
    trailing: list[_Comment] = field(default_factory=list)


@dataclass
class _Item:
    """A top-level line group: a statement or a comment on a line of its own."""

    start: int
    end: int
    statement: Any = None
    comment: _Comment | None = None
    blank_before: bool = False
    elements: list[_Element] = field(default_factory=list)


class _Formatter:
    def __init__(self, text: str, tree: ast.PolicyFile, tokens: list):
        self.text = text
        self.lines = source_lines(text)
        self.raw_lines = text.split("\n")
        self.printer = _Printer(self.lines)
        self.tree = tree
        self.comments = []
        for tok in tokens:
            before = self.raw_lines[tok.line - 1][: tok.column - 1]
            self.comments.append(_Comment(tok.line, str(tok).rstrip(), before.strip(_WS) == ""))

    def run(self) -> str:
        items = [_Item(s.span.line, s.span.end_line, statement=s) for s in self.tree.statements]
        top_comments = []
        pending: dict[int, list[_Comment]] = {}
        for c in self.comments:
            owner = self.owner(items, c)
            if owner is None:
                top_comments.append(_Item(c.line, c.line, comment=c))
                continue
            condition = owner.statement.body if isinstance(owner.statement, ast.LetDecl) else getattr(owner.statement, "condition", None)
            if condition is not None and condition.span.line <= c.line <= condition.span.end_line:
                if self.attach_in_condition(condition, c):
                    continue
            pending.setdefault(id(owner), []).append(c)
        for item in items:
            item.elements = self.elements(item.statement)
            for c in pending.get(id(item), ()):
                self.attach(item.elements, c)
        items = sorted(items + top_comments, key=lambda i: (i.start, i.comment is None))
        out: list[str] = []
        previous_end = None
        for item in items:
            if previous_end is not None and self.blank_between(previous_end, item.start):
                out.append("")
            previous_end = item.end
            if item.comment is not None:
                out.append(item.comment.text)
            else:
                out.extend(self.render(item))
        return "\n".join(line.rstrip() for line in out) + "\n" if out else ""

    # which comment goes where

    def owner(self, items: list[_Item], c: _Comment) -> _Item | None:
        if c.own_line:
            return next((i for i in items if i.start < c.line < i.end), None)
        candidates = [i for i in items if i.start <= c.line]
        return candidates[-1] if candidates else None

    def attach_in_condition(self, expr: ast.Expr, c: _Comment) -> bool:
        """Keep a comment that stands between two operands of an and/or there: on its own line
        before the operand it preceded, or at the end of the line of the operand it followed.
        The chain then breaks at that operand. Searched from the outermost chain inwards, through
        not, quantifier bodies and and/or operands (never inside a comparison or a call, which
        do not break). Returns False when the comment is not between two operands."""
        if isinstance(expr, (ast.And, ast.Or)):
            ops = expr.operands
            for i in range(1, len(ops)):
                if c.own_line and ops[i - 1].span.end_line < c.line < ops[i].span.line:
                    self.printer.before.setdefault(id(ops[i]), []).append(c)
                    self.printer.commented.add(id(expr))
                    return True
                if not c.own_line and ops[i - 1].span.end_line == c.line < ops[i].span.line:
                    self.printer.after[id(ops[i - 1])] = c
                    self.printer.commented.add(id(expr))
                    return True
            children: tuple = ops
        elif isinstance(expr, ast.Not):
            children = (expr.operand,)
        elif isinstance(expr, ast.Quantifier):
            children = (expr.body,)
        else:
            return False
        for child in children:
            if child.span.line <= c.line <= child.span.end_line:
                if self.attach_in_condition(child, c):
                    self.printer.commented.add(id(expr))
                    return True
                return False
        return False

    @staticmethod
    def attach(elements: list[_Element], c: _Comment) -> None:
        if c.own_line:
            inside = next((e for e in elements if e.start < c.line < e.end), None)
            # else the element it precedes; after the last one (a closing parenthesis can end a
            # statement below its last element): before the last element
            target = inside or next((e for e in elements if e.start > c.line), elements[-1])
            target.leading.append(c)
        else:
            [e for e in elements if e.start <= c.line][-1].trailing.append(c)

    def blank_between(self, end: int, start: int) -> bool:
        return any(self.raw_lines[n - 1].strip(_WS) == "" for n in range(end + 1, start))

    # statements → elements

    def elements(self, s: Any) -> list[_Element]:
        span = s.span
        if isinstance(s, ast.Rule):
            head_end = max(sel.span.end_line for sel in s.selectors)
            head = _Element("head", span.line, head_end, s)
            elements = [head]
            if s.condition is not None:
                if self.inline_condition(s):
                    head.kind, head.end = "head+when", s.condition.span.end_line
                else:
                    elements.append(_Element("when", s.condition.span.line, s.condition.span.end_line, s.condition))
            elements += [_Element("clause", c.span.line, c.span.end_line, c) for c in s.clauses]
        elif isinstance(s, ast.LetDecl):
            if self.inline_let(s):
                elements = [_Element("head+let", span.line, span.end_line, s)]
            else:
                elements = [_Element("head", span.line, s.name_span.end_line, s),
                            _Element("let-body", s.body.span.line, s.body.span.end_line, s.body)]
        elif isinstance(s, ast.DefaultDecl):
            head_end = self.default_reason_line(s) if s.reason is not None else s.effect_span.end_line
            elements = [_Element("head", span.line, head_end, s)]
            elements += [_Element("clause", c.span.line, c.span.end_line, c) for c in s.clauses]
        else:
            elements = [_Element("head", span.line, span.end_line, s)]
        return elements

    def default_reason_line(self, d: ast.DefaultDecl) -> int:
        """The line of a default's reason string (the tree keeps no span for it): the first `"`
        after the effect keyword, past whitespace and comments."""
        offset = sum(len(line) + 1 for line in self.raw_lines[: d.effect_span.end_line - 1]) + d.effect_span.end_column
        text = self.text
        while offset < len(text):
            ch = text[offset]
            if ch == "#":
                newline = text.find("\n", offset)
                offset = len(text) if newline < 0 else newline
            elif ch in _WS or ch == "\n":
                offset += 1
            else:
                break
        return text.count("\n", 0, offset) + 1

    def head_text(self, rule: ast.Rule) -> list[str]:
        """`EFFECT sel, sel, ...`, wrapped between selectors under the first one."""
        indent = len(rule.effect) + 1
        names = [selector_text(s.pattern) for s in rule.selectors]
        lines = [rule.effect + " " + names[0]]
        for name in names[1:]:
            if len(lines[-1]) + 2 + len(name) + 1 <= self.printer.width:  # + 1: the comma after it
                lines[-1] += ", " + name
            else:
                lines[-1] += ","
                lines.append(" " * indent + name)
        return lines

    def inline_condition(self, rule: ast.Rule) -> bool:
        head = self.head_text(rule)
        if id(rule.condition) in self.printer.commented:
            return False
        return len(head) == 1 and len(head[0]) + 6 + len(self.printer.flat(rule.condition)) <= self.printer.width

    @staticmethod
    def let_head(s: ast.LetDecl) -> str:
        return f"let {s.name}" + (f"({', '.join(name for name, _ in s.params)})" if s.params is not None else "")

    def inline_let(self, s: ast.LetDecl) -> bool:
        """`let NAME(P) = BODY` on one line when it fits (and no comment sits inside the body);
        else `let NAME(P) =` with the body on the lines below, two spaces in."""
        if id(s.body) in self.printer.commented:
            return False
        return len(self.let_head(s)) + 3 + len(self.printer.flat(s.body)) <= self.printer.width

    # rendering

    def render(self, item: _Item) -> list[str]:
        out: list[str] = []
        for element in item.elements:
            indent = 0 if element.kind.startswith("head") else INDENT
            trailing = element.trailing
            leading = element.leading
            if len(trailing) > 1:
                leading, trailing = sorted(leading + trailing, key=lambda c: c.line), []
            out.extend(" " * indent + c.text for c in leading)
            lines = self.element_lines(item.statement, element)
            lines = [" " * indent + lines[0]] + lines[1:]
            if trailing:
                lines[-1] += "  " + trailing[0].text
            out.extend(lines)
        return out

    def element_lines(self, s: Any, element: _Element) -> list[str]:
        p = self.printer
        if element.kind == "head+when":
            return [self.head_text(s)[0] + " when " + p.flat(s.condition)]
        if element.kind == "head+let":
            return [self.let_head(s) + " = " + p.flat(s.body)]
        if element.kind == "let-body":
            return p.lay(element.node, INDENT, CONTINUATION)
        if isinstance(s, ast.LetDecl):
            return [self.let_head(s) + " ="]
        if isinstance(s, ast.IncludeDecl):
            return ["include " + quote(s.path)]
        if element.kind == "when":
            return ["when " + line if i == 0 else line for i, line in enumerate(p.lay(element.node, INDENT + 5, CONTINUATION))]
        if element.kind == "clause":
            c = element.node
            if isinstance(c, ast.ApproversClause) and c.members is not None and c.members.items:
                opening = f"approvers {c.count} from ["
                return p.fill(opening, [p.flat(i) for i in c.members.items], "]", INDENT)
            return [self.clause(c)]
        if isinstance(s, ast.Rule):
            return self.head_text(s)
        if isinstance(s, ast.DefaultDecl):
            return [f"default {s.effect}" + (" " + quote(s.reason) if s.reason is not None else "")]
        if isinstance(s, ast.PolicyDecl):
            return ["policy " + quote(s.name)]
        if isinstance(s, ast.HomeDecl):
            return ["home " + quote(s.path)]
        if isinstance(s, ast.GroupDecl):
            return p.fill(f"group {s.name} = [", [p.flat(i) for i in s.members.items], "]", 0)
        raise TypeError(f"cannot print {s!r}")  # pragma: no cover

    def clause(self, c: ast.Clause) -> str:
        p = self.printer
        if isinstance(c, ast.ReasonClause):
            return "reason " + quote(c.text)
        if isinstance(c, ast.ApproversClause):
            text = f"approvers {c.count}"
            if c.group is not None:
                text += f" from {c.group}"
            elif c.members is not None:
                text += " from " + p.flat(c.members)
            return text
        if isinstance(c, ast.DecisionsClause):
            return "decisions " + ", ".join(name for name, _ in c.names)
        if isinstance(c, ast.TimeoutClause):
            text = f"timeout {c.text}"
            if c.escalation is not None:
                return text + " else " + escalation.text_of(c.escalation, self.clause, self.clause)
            if c.on_timeout is not None:
                text += f" else {c.on_timeout}"
                if c.message is not None:
                    text += " " + quote(c.message)
            return text
        if isinstance(c, ast.RememberClause):
            return "remember " + c.scope
        if isinstance(c, ast.IdClause):
            return "id " + quote(c.rule_id)
        raise TypeError(f"cannot print {c!r}")  # pragma: no cover
