"""`matches(x, "pattern")`: regular expressions in RE2 syntax, matched in time linear in the text.

RE2 (https://github.com/google/re2/wiki/Syntax, through the `google-re2` package) compiles a
pattern to an automaton and never backtracks, so a pattern cannot take time exponential in the
text as Python's `re` can (`(a+)+$`). What RE2 refuses (backreferences `\\1`, lookaround
`(?=...)`, possessive quantifiers, a program larger than its memory budget) is a load error at the
pattern; the pattern is a string literal of the policy, compiled once when the policy loads and
kept by its compiled rule (so the compiled patterns are as many as the policy's `matches()`).

Each pattern may use at most `MAX_MEMORY` bytes (RE2's `max_mem`: its program and the cache of its
DFA); when the DFA cache is exhausted RE2 falls back to its NFA, still linear in the text.
"""

from __future__ import annotations

from typing import Any

from dsl.values import EvalError, _a, kind

MAX_MEMORY = 2 << 20  # bytes per compiled pattern (RE2's default is 8 MB)


class PatternError(ValueError):
    """RE2 refuses the pattern; the message is RE2's."""


def compile_pattern(pattern: str) -> Any:
    """The compiled pattern (a `re2` object). Raises PatternError with RE2's reason."""
    import re2  # google-re2: imported by the policies that use matches() only

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.max_mem = MAX_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None
    except (TypeError, ValueError, UnicodeError) as exc:  # a lone surrogate: not UTF-8
        raise PatternError(str(exc)) from None


def matches(compiled: Any, value: Any) -> bool:
    """Whether the pattern matches somewhere in the string `value` (a path reads as its text).
    Raises EvalError for what is not a string."""
    if kind(value) == "path":
        value = value.text if hasattr(value, "text") else str(value)
    if kind(value) != "string":
        raise EvalError(f"matches() takes a string, not {_a(kind(value))}")
    try:
        return compiled.search(value) is not None
    except UnicodeEncodeError:  # a lone surrogate from the input is not UTF-8, which RE2 reads
        raise EvalError("matches() cannot read a string with a lone surrogate") from None
