"""Policy text → syntax tree (`dsl.ast.PolicyFile`).

Lark reads `grammars/policy.lark` and builds its LALR(1) tables and contextual lexer; callbacks run
as the parser reduces build frozen AST nodes with source spans (no parse tree in between). Text that
parses is read by our own loop over those tables and callbacks (`dsl.lalr`, about twice as fast as
`Lark.parse`: a policy of 1,000 rules is 16,500 tokens and 45,000 reductions); anything it does not
read is parsed again by Lark, whose error is the one reported. Two choices a reader may question:

* LALR rather than Earley: the language is unambiguous by construction (every statement and
  clause starts with a keyword), LALR is linear, and its errors name the one token that went
  wrong, which is what an author needs.
* Syntax errors stop at the first one. After a syntax error the rest of the file cannot be trusted
  to mean anything, and a cascade of follow-on errors hides the real one. Semantic checks
  (`dsl.checker`) report every problem at once.

`parse(text, name)` returns the tree or raises `PolicyError` with one diagnostic.
"""

from __future__ import annotations

import contextvars
import difflib
import hashlib
import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token
from lark import __version__ as lark_version
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from dsl import ast
from dsl.errors import Diagnostic, PolicyError, Span, source_lines
from dsl.grammar import grammar_text
from dsl.lalr import TableParser

from dsl.keywords import CLAUSE_KEYWORDS, KEYWORDS, OPERATOR_KEYWORDS, STATEMENT_KEYWORDS  # noqa: F401 (named here as before)

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# How terminals read in an error message.
_TERMINAL_WORDS = {
    "STRING": "a string",
    "NAME": "a name",
    "TOOL_PATTERN": "a tool name",
    "NUMBER": "a number",
    "INT": "a whole number",
    "SIGNED_INT": "a whole number",
    "DURATION": "a duration such as 30m or 4h",
    "COMPARE": "a comparison (== != < <= > >=)",
    "$END": "the end of the file",
}


def _parser_cache() -> str | bool:
    """Where Lark keeps the parser tables it builds from the grammar, so that a new process reads
    them (a few milliseconds) instead of building them (about 0.1 s, twice): a file in
    `$XDG_CACHE_HOME/countersign` or `~/.cache/countersign`, named after the grammar, Lark and
    Python versions. Lark stores the tables as a pickle, and reading a pickle can run code, so the
    cache is used only when that folder (created with mode 700) and the file belong to this user
    and no one else may write them. Otherwise, or when COUNTERSIGN_NO_PARSER_CACHE is set, the
    tables are built in memory as before (False)."""
    if os.environ.get("COUNTERSIGN_NO_PARSER_CACHE"):
        return False
    try:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "countersign"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        digest = hashlib.sha256(grammar_text().encode("utf-8")).hexdigest()[:16]
        path = folder / f"policy-grammar-{digest}-lark{lark_version}-py{sys.version_info[0]}{sys.version_info[1]}.pickle"
        uid = os.getuid()
        for place in (folder, path):
            if place == path and not path.exists():
                continue
            st = place.stat()
            if st.st_uid != uid or st.st_mode & 0o022:
                return False
        return str(path)
    except (OSError, RuntimeError, AttributeError):  # no home, a read-only one, no getuid (Windows)
        return False


@lru_cache(maxsize=1)
def _lark() -> Lark:
    # No parse tree: `_Builder` makes the AST as the parser reduces (about twice as fast as a tree
    # with positions and a transform after it), from every token, keywords included (spans).
    # Where only keywords may stand (after a rule's selectors, at the start of a statement), the
    # contextual lexer would read `allowed` as `allow` + `ed` and `reasons` as `reason` + `s`:
    # every word-like keyword gets a callback that refuses a keyword glued to the next letters.
    callbacks = {name: _whole_word for name in _words()}
    callbacks["COMMENT"] = _collect_comment  # comments are ignored by the grammar; fmt keeps them
    return Lark(grammar_text(), **_OPTIONS, cache=_parser_cache(), lexer_callbacks=callbacks, transformer=_Builder())


_OPTIONS = dict(parser="lalr", lexer="contextual", keep_all_tokens=True, maybe_placeholders=True)


@lru_cache(maxsize=1)
def _words() -> frozenset[str]:
    """The terminals that are a word-like keyword (`allow`, `reason`, ...): a string of letters."""
    plain = Lark(grammar_text(), **_OPTIONS, cache=_parser_cache())
    return frozenset(t.name for t in plain.terminals if t.pattern.type == "str" and re.fullmatch(r"[a-z]+", t.pattern.value))


@lru_cache(maxsize=1)
def _table_parser() -> TableParser | None:
    """Our loop over Lark's tables (dsl.lalr), or None when this Lark lays them out otherwise."""
    try:
        return TableParser(_lark(), _words(), "COMMENT", "WS")
    except Exception:  # noqa: BLE001 - Unhandled, or a Lark whose objects differ more: Lark alone
        return None


_SOURCE: contextvars.ContextVar[str] = contextvars.ContextVar("policy_source", default="")
_COMMENTS: contextvars.ContextVar[list | None] = contextvars.ContextVar("policy_comments", default=None)


def _collect_comment(tok: Token) -> Token:
    """Lexer callback for COMMENT: while `parse_with_comments` runs, keep each comment token."""
    sink = _COMMENTS.get()
    if sink is not None:
        sink.append(tok)
    return tok


def parse_with_comments(text: str, name: str = "<policy>") -> tuple[ast.PolicyFile, list[Token]]:
    """`parse`, also returning the comment tokens (`# ...` to the end of the line, with `line` and
    `column`) in source order. The grammar ignores comments; `dsl.fmt` puts them back."""
    comments: list[Token] = []
    sink = _COMMENTS.set(comments)
    try:
        tree = parse(text, name)
    finally:
        _COMMENTS.reset(sink)
    return tree, comments


class _GluedKeyword(Exception):
    """A keyword token that is only the start of a longer word (raised by the lexer callback)."""

    def __init__(self, token: Token):
        super().__init__(str(token))
        self.token = token


def _whole_word(tok: Token) -> Token:
    text, end = _SOURCE.get(), tok.end_pos
    if end is not None and end < len(text) and (text[end] == "_" or (text[end].isascii() and text[end].isalnum())):
        raise _GluedKeyword(tok)
    return tok


def _glued(tok: Token, text: str) -> Diagnostic:
    word = re.match(r"[A-Za-z0-9_]+", text[tok.start_pos :]).group(0)
    span = Span(tok.line, tok.column, tok.line, tok.column + len(word) - 1)
    close = difflib.get_close_matches(word, KEYWORDS, n=1, cutoff=0.75)
    help = f"did you mean '{close[0]}'?" if close else f"'{tok}' is a keyword only as a whole word: write '{tok} {word[len(tok):]}' if that is meant"
    return Diagnostic("error", f"unknown keyword '{word}'", span, help)


class _SyntaxProblem(Exception):
    """Raised inside the transformer for a malformed token (bad escape, overflowing number)."""

    def __init__(self, message: str, span: Span, help: str | None = None):
        super().__init__(message)
        self.diagnostic = Diagnostic("error", message, span, help)


def parse(text: str, name: str = "<policy>") -> ast.PolicyFile:
    """Parse policy source text. Raises `PolicyError` (one diagnostic) on a syntax error.

    Text that parses is read by our loop over Lark's tables (dsl.lalr: the same tree, about
    twice as fast); anything it does not read is parsed again by Lark, whose error is reported."""
    table = _table_parser()
    if table is not None:
        try:
            tree, comments = table.parse(text)
        except Exception:  # noqa: BLE001 - Lark parses it again, and raises what it raises
            pass
        else:
            sink = _COMMENTS.get()
            if sink is not None:
                sink.extend(comments)
            return tree
    return _parse_with_lark(text, name)


def _parse_with_lark(text: str, name: str) -> ast.PolicyFile:
    """`parse` by Lark's own parser: the reference the table parser must agree with, and the one
    that says what is wrong with a text."""
    source = _SOURCE.set(text)
    try:
        return _lark().parse(text)
    except UnexpectedInput as exc:
        raise PolicyError(name, text, (_diagnose(exc, text),)) from None
    except _GluedKeyword as exc:
        raise PolicyError(name, text, (_glued(exc.token, text),)) from None
    except _SyntaxProblem as exc:
        raise PolicyError(name, text, (exc.diagnostic,)) from None
    finally:
        _SOURCE.reset(source)


# --- spans ------------------------------------------------------------------------------------


def _new_span(line: int, column: int, end_line: int, end_column: int, *, _new=object.__new__, _set_line=Span.line.__set__,
              _set_column=Span.column.__set__, _set_end_line=Span.end_line.__set__,
              _set_end_column=Span.end_column.__set__) -> Span:
    """`Span(line, column, end_line, end_column)` in half the time: a frozen dataclass's
    `__init__` sets each field through `object.__setattr__`, and the parser makes a span for
    nearly every node and token (about 12,000 for a policy of 1,000 rules)."""
    span = _new(Span)
    _set_line(span, line)
    _set_column(span, column)
    _set_end_line(span, end_line)
    _set_end_column(span, end_column)
    return span


def _token_span(tok: Token) -> Span:
    column, end_column = tok.column, tok.end_column - 1
    return _new_span(tok.line, column, tok.end_line, end_column if end_column > column else column)


def _start_of(item) -> tuple[int, int]:
    if isinstance(item, Token):
        return item.line, item.column
    if type(item) is tuple:  # the selectors of a rule
        return _start_of(item[0])
    return item.span.line, item.span.column


def _end_of(item) -> tuple[int, int]:
    if isinstance(item, Token):
        return item.end_line, item.end_column - 1  # Lark's end column is one past the last character
    if type(item) is tuple:
        return _end_of(item[-1])
    return item.span.end_line, item.span.end_column


def _span(children: list) -> Span:
    """From the first character of a node's first child to the last of its last: the parser keeps
    every token (keywords and punctuation too), so this is the whole text the node was read from.
    `None` children are the placeholders of absent optional parts."""
    first, last = children[0], children[-1]
    if first is None:
        first = next(c for c in children if c is not None)
    if last is None:
        last = next(c for c in reversed(children) if c is not None)
    # the common cases inline (a token, a node), the others (a rule's selectors) by the helpers
    if isinstance(first, Token):
        line, column = first.line, first.column
    elif type(first) is tuple:
        line, column = _start_of(first)
    else:
        line, column = first.span.line, first.span.column
    if isinstance(last, Token):
        end_line, end_column = last.end_line, last.end_column - 1
    elif type(last) is tuple:
        end_line, end_column = _end_of(last)
    else:
        end_line, end_column = last.span.end_line, last.span.end_column
    return _new_span(line, column, end_line, end_column)


def _span_of(node) -> Span:
    if isinstance(node, Token):
        return _token_span(node)
    return node.span


class _Accessor:
    """`.name`, `["key"]` or `[0]` after a path or a call: the key and where it was written."""

    __slots__ = ("key", "span")

    def __init__(self, key: str | int, span: Span):
        self.key = key
        self.span = span


class _Parenthesized:
    """`( expr )`: the expression, and the span of the text with its parentheses. The expression's
    own span leaves them out (a diagnostic points at the expression); an enclosing node's span
    takes them in (`not (a or b)` ends at the `)`). Every callback that takes an expression
    unwraps it with `_bare`."""

    __slots__ = ("node", "span")

    def __init__(self, node, span: Span):
        self.node = node
        self.span = span


def _bare(item):
    return item.node if type(item) is _Parenthesized else item


_STAR = object()  # the key of a `[*]` accessor


def _split_at_stars(children: list) -> tuple[list, list[list]]:
    """A path's or a call's children cut at each `[*]`: those before the first, and the
    accessors after each."""
    head: list = []
    steps: list[list] = []
    for c in children:
        if isinstance(c, _Accessor) and c.key is _STAR:
            steps.append([])
        elif steps:
            steps[-1].append(c)
        else:
            head.append(c)
    return head, steps


def _projected(base, steps: list[list], children: list):
    """`base`, or the Projection of `base` by the accessors after each `[*]`."""
    if not steps:
        return base
    return ast.Projection(base, tuple(tuple(a.key for a in step) for step in steps), _span(children))


# --- tokens and nodes → AST -------------------------------------------------------------------


_WINDOWS_PATH_LITERAL = re.compile(r"[A-Za-z]:\\|\\\\[^\\]")  # a drive (C:\) or a share (\\host)


def _decode_string(tok: Token) -> str:
    try:
        # Without a backslash the text between the quotes is the value; json.loads reads escapes.
        text = tok[1:-1] if "\\" not in tok else json.loads(tok, strict=False)
        text.encode("utf-8")  # a lone surrogate escape (\ud800) is not text anything can store
        return text
    except json.JSONDecodeError as exc:
        help_text = ("strings use JSON escapes: \\\" \\\\ \\n \\t \\uXXXX; a backslash meant as itself is doubled "
                     "(a regular expression's \\d is written \"\\\\d\")")
        if _WINDOWS_PATH_LITERAL.match(tok[1:]):  # "C:\Users\me" or "\\server\share"
            doubled = json.dumps(tok[1:-1])
            help_text = (f"a backslash starts an escape: write a Windows path with each backslash doubled, {doubled}, "
                         f"or with forward slashes, \"{tok[1:-1].replace(chr(92), '/')}\" (path() reads both)")
        raise _SyntaxProblem(f"invalid string literal: {exc.msg}", _token_span(tok), help_text) from None
    except UnicodeEncodeError:
        raise _SyntaxProblem(
            "the string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text",
            _token_span(tok),
            "write the character itself, or escape it as a surrogate pair",
        ) from None


def _int(text: str, tok: Token) -> int:
    # Python refuses to convert integers of more than 4300 digits (a ValueError); say it as a
    # syntax error at the token rather than letting the exception escape the parser.
    try:
        return int(text)
    except ValueError:
        raise _SyntaxProblem(f"number {str(tok)[:20]}... is too long", _token_span(tok)) from None


def _parse_duration(tok: Token) -> int:
    total, digits = 0, ""
    for ch in str(tok):
        if ch.isdigit():
            digits += ch
        else:
            total += _int(digits, tok) * _DURATION_UNITS[ch]
            digits = ""
    return total


class _Builder:
    """Lark's callbacks, run as the LALR parser reduces each rule (`Lark(transformer=...)`): they
    build the AST directly, with no parse tree in between, and so nothing recurses however deeply
    a condition nests. Every token is kept (`keep_all_tokens`), so a node's span is that of its
    first and last child (`_span`), keywords and brackets included. A callback gets the list of a
    rule's children; an absent optional part is `None`."""

    # statements

    def start(self, children):
        return ast.PolicyFile(tuple(children))

    def policy_decl(self, children):  # "policy" STRING
        return ast.PolicyDecl(_decode_string(children[1]), _span(children))

    def home_decl(self, children):  # "home" STRING
        return ast.HomeDecl(_decode_string(children[1]), _span(children))

    def default_decl(self, children):  # "default" effect [STRING] clause*
        _, effect, reason, *clauses = children
        return ast.DefaultDecl(
            effect=str(effect),
            effect_span=_token_span(effect),
            reason=_decode_string(reason) if reason is not None else None,
            clauses=tuple(clauses),
            span=_span(children),
        )

    def group_decl(self, children):  # "group" NAME "=" list
        _, name, _, members = children
        return ast.GroupDecl(str(name), _token_span(name), members, _span(children))

    def let_decl(self, children):  # "let" NAME [let_params] "=" expr
        _, name, params, _, body = children
        return ast.LetDecl(str(name), _token_span(name), params, _bare(body), _span(children))

    def let_params(self, children):  # "(" [NAME ("," NAME)*] ")"
        return tuple((str(t), _token_span(t)) for t in children if isinstance(t, Token) and t.type == "NAME")

    def include_decl(self, children):  # "include" STRING
        return ast.IncludeDecl(_decode_string(children[1]), _token_span(children[1]), _span(children))

    def rule(self, children):  # effect selectors ["when" expr] clause*
        effect, selectors, _, condition, *clauses = children
        return ast.Rule(
            effect=str(effect),
            effect_span=_token_span(effect),
            selectors=selectors,
            condition=_bare(condition),
            clauses=tuple(clauses),
            span=_span(children),
        )

    def effect(self, children):
        return children[0]

    def selectors(self, children):  # selector ("," selector)*
        return tuple(children[::2])

    def bare_selector(self, children):
        return ast.Selector(str(children[0]), _token_span(children[0]))

    def quoted_selector(self, children):
        return ast.Selector(_decode_string(children[0]), _token_span(children[0]))

    # clauses

    def reason(self, children):  # "reason" STRING
        return ast.ReasonClause(_decode_string(children[1]), _span(children))

    def approvers(self, children):  # "approvers" INT ["from" source]
        _, count, _, source = children
        group = str(source) if isinstance(source, Token) else None
        members = source if isinstance(source, ast.ListLiteral) else None
        source_span = _span_of(source) if source is not None else None
        return ast.ApproversClause(_int(count, count), group, members, _span(children), source_span)

    def group_ref(self, children):
        return children[0]

    def decisions(self, children):  # "decisions" NAME ("," NAME)*
        return ast.DecisionsClause(tuple((str(t), _token_span(t)) for t in children[1::2]), _span(children))

    def timeout(self, children):  # "timeout" DURATION ["else" NAME [STRING]] | "timeout" DURATION "else" escalation
        if len(children) == 4:
            _, duration, _, escalation = children
            return ast.TimeoutClause(_parse_duration(duration), str(duration), None, None, None, _span(children), escalation)
        _, duration, _, on_timeout, message = children
        return ast.TimeoutClause(
            seconds=_parse_duration(duration),
            text=str(duration),
            on_timeout=str(on_timeout) if on_timeout is not None else None,
            on_timeout_span=_token_span(on_timeout) if on_timeout is not None else None,
            message=_decode_string(message) if message is not None else None,
            span=_span(children),
        )

    def escalation(self, children):  # "escalate" [approvers] timeout
        keyword, approvers, timeout = children
        return ast.Escalation(approvers, timeout, _token_span(keyword), _span(children))

    def remember(self, children):  # "remember" (NAME | DURATION)
        _, scope = children
        seconds = _parse_duration(scope) if scope.type == "DURATION" else None
        return ast.RememberClause(str(scope), seconds, _token_span(scope), _span(children))

    def rule_id(self, children):  # "id" STRING
        return ast.IdClause(_decode_string(children[1]), _span(children))

    # conditions

    def or_(self, children):  # expr "or" expr
        left, right = _bare(children[0]), _bare(children[2])
        operands = (left.operands if isinstance(left, ast.Or) else (left,)) + (right,)
        return ast.Or(operands, _span(children))

    def and_(self, children):
        left, right = _bare(children[0]), _bare(children[2])
        operands = (left.operands if isinstance(left, ast.And) else (left,)) + (right,)
        return ast.And(operands, _span(children))

    def not_(self, children):  # "not" expr
        return ast.Not(_bare(children[1]), _span(children))

    def operand(self, children):  # "(" expr ")"
        return _Parenthesized(_bare(children[1]), _span(children))

    def compare(self, children):
        left, op, right = children
        return ast.Compare(str(op), _bare(left), _bare(right), _span(children))

    def _binary(op):  # noqa: N805 - a factory used while building the class
        def method(self, children):  # left KEYWORD right, or left "not" "in" right
            return ast.Compare(op, _bare(children[0]), _bare(children[-1]), _span(children))

        return method

    in_ = _binary("in")
    not_in = _binary("not_in")
    startswith = _binary("startswith")
    endswith = _binary("endswith")
    contains = _binary("contains")
    glob = _binary("glob")
    under = _binary("under")
    del _binary

    def quantifier(self, children):  # (any | all) NAME "in" operand ":" expr
        kind, name, _, source, _, body = children
        return ast.Quantifier(str(kind), str(name), _token_span(name), _bare(source), _bare(body), _span(children))

    def call(self, children):  # NAME "(" [expr ("," expr)*] ")" accessor*
        name = children[0]
        args = tuple(_bare(c) for c in children[1:] if c is not None and not isinstance(c, (Token, _Accessor)))
        head, steps = _split_at_stars(children)
        keys = tuple(c.key for c in head if isinstance(c, _Accessor))
        node = ast.Call(str(name), args, _span(head), _token_span(name), keys)
        return _projected(node, steps, children)

    def path(self, children):  # NAME accessor*
        head, steps = _split_at_stars(children)
        return _projected(ast.Path(str(children[0]), tuple(c.key for c in head[1:]), _span(head)), steps, children)

    def arith_op(self, children):  # left ("+" | "-" | "*" | "/") right
        left, op, right = children
        return ast.Arith(str(op), _bare(left), _bare(right), _span(children))

    def neg(self, children):  # "-" unary
        operand = _bare(children[1])
        if isinstance(operand, ast.Literal) and type(operand.value) in (int, float):
            # `- 5` is the number -5, as `-5` is: one tree for both spellings (fmt prints `-5`)
            return ast.Literal(-operand.value, _span(children))
        return ast.Neg(operand, _span(children))

    def star(self, children):  # "[" "*" "]"
        return _Accessor(_STAR, _span(children))

    def field(self, children):  # "." NAME
        return _Accessor(str(children[1]), _span(children))

    def key(self, children):  # "[" STRING "]"
        return _Accessor(_decode_string(children[1]), _span(children))

    def index(self, children):  # "[" SIGNED_INT "]"
        return _Accessor(_int(children[1], children[1]), _span(children))

    def string(self, children):
        return ast.Literal(_decode_string(children[0]), _token_span(children[0]))

    def number(self, children):
        tok = children[0]
        text = str(tok)
        if "." in text or "e" in text or "E" in text:
            value: int | float = float(text)
            if value in (float("inf"), float("-inf")):
                raise _SyntaxProblem(f"number {text} is too large", _token_span(tok))
        else:
            value = _int(text, tok)
        return ast.Literal(value, _token_span(tok))

    def true(self, children):
        return ast.Literal(True, _token_span(children[0]))

    def false(self, children):
        return ast.Literal(False, _token_span(children[0]))

    def null(self, children):
        return ast.Literal(None, _token_span(children[0]))

    def list(self, children):  # "[" [expr ("," expr)* [","]] "]"
        items = tuple(_bare(c) for c in children if c is not None and not isinstance(c, Token))
        return ast.ListLiteral(items, _span(children))


# --- syntax errors ----------------------------------------------------------------------------


def _expected_words(expected: set[str] | frozenset[str]) -> str:
    words = []
    for name in sorted(expected):
        if name in _TERMINAL_WORDS:
            words.append(_TERMINAL_WORDS[name])
            continue
        try:
            pattern = _lark().get_terminal(name).pattern
        except KeyError:
            words.append(name.lower())
            continue
        if pattern.type == "str":
            words.append(f"'{pattern.value}'")
        else:
            words.append(name.lower())
    unique = sorted(set(words))
    if len(unique) > 8:
        unique = unique[:8] + ["..."]
    return ", ".join(unique)


# Words and operators of other languages an author may reach for, and what this one writes
_OTHER_LANGUAGES = {
    "matches": "a regular expression is a function: matches(args.name, \"^test_[a-z]+$\") (RE2 syntax)",
    "&&": "write `and`", "||": "write `or`", "==": None, "!": "write `not`",
    "&": "write `and`", "|": "write `or`",
    "regex": "a regular expression is written matches(x, \"pattern\") (RE2 syntax); `glob` matches a wildcard pattern",
}
_OTHER_LANGUAGES = {k: v for k, v in _OTHER_LANGUAGES.items() if v is not None}


def _diagnose(exc: UnexpectedInput, text: str) -> Diagnostic:
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        exc = UnexpectedEOF(exc.expected)  # Lark reports a premature end as a token; say it plainly
    if isinstance(exc, UnexpectedEOF):
        lines = source_lines(text) or [""]
        span = Span.point(len(lines), len(lines[-1]) + 1)
        return Diagnostic("error", "unexpected end of file", span, f"expected {_expected_words(exc.expected)}")
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        span = _token_span(tok)
        value = str(tok)
        expected = set(exc.expected)
        if value.isidentifier() and value not in KEYWORDS:
            # Suggest the keywords that may stand here, if one is close; else any close keyword.
            here = [w for w in KEYWORDS if w.upper() in expected or w in _expected_words(expected)]
            close = difflib.get_close_matches(value, here, n=1, cutoff=0.6) or difflib.get_close_matches(value, KEYWORDS, n=1, cutoff=0.7)
            if close:
                return Diagnostic("error", f"unknown keyword '{value}'", span, f"did you mean '{close[0]}'?")
        help = _OTHER_LANGUAGES.get(value)
        if value == "," and "RPAR" in expected and "RSQB" not in expected:
            help = "a list is written in square brackets: `c.program in [\"ls\", \"pwd\"]`"
        return Diagnostic("error", f"unexpected '{value}'", span, help or f"expected {_expected_words(expected)}")
    if isinstance(exc, UnexpectedCharacters):
        ch = exc.char
        help = None
        if ch == "'":
            help = "strings are written in double quotes"
        elif (text[exc.pos_in_stream : exc.pos_in_stream + 2] in _OTHER_LANGUAGES
              or text[exc.pos_in_stream : exc.pos_in_stream + 1] in _OTHER_LANGUAGES):
            two = text[exc.pos_in_stream : exc.pos_in_stream + 2]
            help = _OTHER_LANGUAGES.get(two) or _OTHER_LANGUAGES[two[:1]]
        elif exc.allowed:
            help = f"expected {_expected_words(exc.allowed)}"
        return Diagnostic("error", f"unexpected character {ch!r}", Span.point(exc.line, exc.column), help)
    return Diagnostic("error", str(exc), None)  # pragma: no cover - Lark has no other kinds
