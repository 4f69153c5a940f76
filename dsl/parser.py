"""Policy text → syntax tree (`dsl.ast.PolicyFile`).

Lark parses `grammars/policy.lark` with LALR(1) and its contextual lexer; a Transformer turns the
parse tree into frozen AST nodes with source spans. Two choices a reader may question:

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

from lark import Lark, Token, Tree, v_args
from lark import __version__ as lark_version
from lark.exceptions import GrammarError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.visitors import Transformer_NonRecursive

from dsl import ast
from dsl.errors import Diagnostic, PolicyError, Span, source_lines
from dsl.grammar import grammar_text

STATEMENT_KEYWORDS = ("policy", "default", "group", "home", "allow", "deny", "ask")
CLAUSE_KEYWORDS = ("when", "reason", "approvers", "decisions", "timeout", "id")
OPERATOR_KEYWORDS = ("and", "or", "not", "in", "startswith", "endswith", "contains", "glob", "under", "any", "all")
KEYWORDS = STATEMENT_KEYWORDS + CLAUSE_KEYWORDS + OPERATOR_KEYWORDS + ("from", "else")

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
    options = dict(parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True, cache=_parser_cache())
    # Where only keywords may stand (after a rule's selectors, at the start of a statement), the
    # contextual lexer would read `allowed` as `allow` + `ed` and `reasons` as `reason` + `s`:
    # every word-like keyword gets a callback that refuses a keyword glued to the next letters.
    plain = Lark(grammar_text(), **options)
    words = [t.name for t in plain.terminals if t.pattern.type == "str" and re.fullmatch(r"[a-z]+", t.pattern.value)]
    callbacks = {name: _whole_word for name in words}
    callbacks["COMMENT"] = _collect_comment  # comments are ignored by the grammar; fmt keeps them
    return Lark(grammar_text(), **options, lexer_callbacks=callbacks)


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
    """Parse policy source text. Raises `PolicyError` (one diagnostic) on a syntax error."""
    source = _SOURCE.set(text)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise PolicyError(name, text, (_diagnose(exc, text),)) from None
    except _GluedKeyword as exc:
        raise PolicyError(name, text, (_glued(exc.token, text),)) from None
    finally:
        _SOURCE.reset(source)
    try:
        return _ToAst().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, _SyntaxProblem):
            raise PolicyError(name, text, (exc.orig_exc.diagnostic,)) from None
        raise


# --- spans ------------------------------------------------------------------------------------


def _token_span(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, max(tok.column, tok.end_column - 1))


def _meta_span(meta) -> Span:
    return Span(meta.line, meta.column, meta.end_line, max(meta.column, meta.end_column - 1))


def _join(a: Span, b: Span) -> Span:
    return Span(a.line, a.column, b.end_line, b.end_column)


def _span_of(node) -> Span:
    if isinstance(node, Token):
        return _token_span(node)
    return node.span


# --- tree → AST -------------------------------------------------------------------------------


def _decode_string(tok: Token) -> str:
    try:
        text = json.loads(tok, strict=False)
        text.encode("utf-8")  # a lone surrogate escape (\ud800) is not text anything can store
        return text
    except json.JSONDecodeError as exc:
        raise _SyntaxProblem(
            f"invalid string literal: {exc.msg}",
            _token_span(tok),
            "strings use JSON escapes: \\\" \\\\ \\n \\t \\uXXXX",
        ) from None
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


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):  # non-recursive: `not not ... x` or a long `or` chain nests deeply
    def __init__(self) -> None:
        super().__init__(visit_tokens=False)  # no method is named after a terminal: tokens pass as they are
        # Lark looks a method up again for every node, and each lookup of a v_args(meta=True)
        # method builds a new wrapper (functools.update_wrapper): about a third of the transform of
        # a large policy. Look each one up once per parse.
        self._methods = {name: getattr(self, name) for name, member in vars(_ToAst).items() if hasattr(member, "visit_wrapper")}

    def _call_userfunc(self, tree, new_children=None):
        method = self._methods.get(tree.data)
        if method is None:
            return super()._call_userfunc(tree, new_children)
        children = new_children if new_children is not None else tree.children
        try:  # as Lark's Transformer._call_userfunc does it
            return method.visit_wrapper(method, tree.data, children, tree.meta)
        except GrammarError:
            raise
        except Exception as exc:
            raise VisitError(tree.data, tree, exc)

    # statements

    def start(self, meta, children):
        return ast.PolicyFile(tuple(children))

    def policy_decl(self, meta, children):
        return ast.PolicyDecl(_decode_string(children[0]), _meta_span(meta))

    def default_decl(self, meta, children):
        effect, reason, *clauses = children
        return ast.DefaultDecl(
            effect=str(effect),
            effect_span=_token_span(effect),
            reason=_decode_string(reason) if reason is not None else None,
            clauses=tuple(clauses),
            span=_meta_span(meta),
        )

    def group_decl(self, meta, children):
        name, members = children
        return ast.GroupDecl(str(name), _token_span(name), members, _meta_span(meta))

    def rule(self, meta, children):
        effect, selectors, condition, *clauses = children
        return ast.Rule(
            effect=str(effect),
            effect_span=_token_span(effect),
            selectors=selectors,
            condition=condition,
            clauses=tuple(clauses),
            span=_meta_span(meta),
        )

    def effect(self, meta, children):
        return children[0]

    def selectors(self, meta, children):
        return tuple(children)

    def bare_selector(self, meta, children):
        return ast.Selector(str(children[0]), _token_span(children[0]))

    def quoted_selector(self, meta, children):
        return ast.Selector(_decode_string(children[0]), _token_span(children[0]))

    # clauses

    def reason(self, meta, children):
        return ast.ReasonClause(_decode_string(children[0]), _meta_span(meta))

    def approvers(self, meta, children):
        count, source = children
        group = str(source) if isinstance(source, Token) else None
        members = source if isinstance(source, ast.ListLiteral) else None
        source_span = _span_of(source) if source is not None else None
        return ast.ApproversClause(_int(count, count), group, members, _meta_span(meta), source_span)

    def group_ref(self, meta, children):
        return children[0]

    def decisions(self, meta, children):
        return ast.DecisionsClause(tuple((str(t), _token_span(t)) for t in children), _meta_span(meta))

    def timeout(self, meta, children):
        duration, on_timeout, message = children
        return ast.TimeoutClause(
            seconds=_parse_duration(duration),
            text=str(duration),
            on_timeout=str(on_timeout) if on_timeout is not None else None,
            on_timeout_span=_token_span(on_timeout) if on_timeout is not None else None,
            message=_decode_string(message) if message is not None else None,
            span=_meta_span(meta),
        )

    def rule_id(self, meta, children):
        return ast.IdClause(_decode_string(children[0]), _meta_span(meta))

    # conditions

    def or_(self, meta, children):
        left, right = children
        operands = (left.operands if isinstance(left, ast.Or) else (left,)) + (right,)
        return ast.Or(operands, _meta_span(meta))

    def and_(self, meta, children):
        left, right = children
        operands = (left.operands if isinstance(left, ast.And) else (left,)) + (right,)
        return ast.And(operands, _meta_span(meta))

    def not_(self, meta, children):
        return ast.Not(children[0], _meta_span(meta))

    def compare(self, meta, children):
        left, op, right = children
        return ast.Compare(str(op), left, right, _meta_span(meta))

    def _binary(op):  # noqa: N805 - a factory used while building the class
        def method(self, meta, children):
            left, right = children
            return ast.Compare(op, left, right, _meta_span(meta))

        return method

    in_ = _binary("in")
    not_in = _binary("not_in")
    startswith = _binary("startswith")
    endswith = _binary("endswith")
    contains = _binary("contains")
    glob = _binary("glob")
    under = _binary("under")
    del _binary

    def quantifier(self, meta, children):
        kind, name, source, body = children
        return ast.Quantifier(str(kind), str(name), _token_span(name), source, body, _meta_span(meta))

    def home_decl(self, meta, children):
        return ast.HomeDecl(_decode_string(children[0]), _meta_span(meta))

    def call(self, meta, children):
        name, *rest = children
        args = tuple(a for a in rest if a is not None and not isinstance(a, (str, int)))
        keys = tuple(k for k in rest if isinstance(k, (str, int)) and not isinstance(k, bool))  # accessors
        return ast.Call(str(name), args, _meta_span(meta), _token_span(name), keys)

    def path(self, meta, children):
        root, *keys = children
        return ast.Path(str(root), tuple(keys), _meta_span(meta))

    def field(self, meta, children):
        return str(children[0])

    def key(self, meta, children):
        return _decode_string(children[0])

    def index(self, meta, children):
        return _int(children[0], children[0])

    def string(self, meta, children):
        return ast.Literal(_decode_string(children[0]), _meta_span(meta))

    def number(self, meta, children):
        text = str(children[0])
        if any(c in text for c in ".eE"):
            value: int | float = float(text)
            if value in (float("inf"), float("-inf")):
                raise _SyntaxProblem(f"number {text} is too large", _meta_span(meta))
        else:
            value = _int(text, children[0])
        return ast.Literal(value, _meta_span(meta))

    def true(self, meta, children):
        return ast.Literal(True, _meta_span(meta))

    def false(self, meta, children):
        return ast.Literal(False, _meta_span(meta))

    def null(self, meta, children):
        return ast.Literal(None, _meta_span(meta))

    def list(self, meta, children):
        return ast.ListLiteral(tuple(c for c in children if c is not None), _meta_span(meta))


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
        return Diagnostic("error", f"unexpected '{value}'", span, f"expected {_expected_words(expected)}")
    if isinstance(exc, UnexpectedCharacters):
        ch = exc.char
        help = None
        if ch == "'":
            help = "strings are written in double quotes"
        elif exc.allowed:
            help = f"expected {_expected_words(exc.allowed)}"
        return Diagnostic("error", f"unexpected character {ch!r}", Span.point(exc.line, exc.column), help)
    return Diagnostic("error", str(exc), None)  # pragma: no cover - Lark has no other kinds
