"""Run-time operations on JSON values, with the strict typing that keeps conditions fail-closed.

Arguments arrive as decoded JSON: dict, list, str, int, float, bool, None. The operators here never
coerce: comparing a number with a string, ordering booleans, or reading a field of a list raises
`EvalError`, and the compiler turns that into a condition that errors. An error never allows (see
`dsl.compiler`). Booleans are not numbers here, although Python treats them as ints.
"""

from __future__ import annotations

import fnmatch
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

from dsl import globs


class EvalError(Exception):
    """A condition could not be evaluated for this call: a missing field or a wrong type."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


_FAILURE_SHOWN = 200  # characters of the exception's own text kept in the message


def failure_message(exc: BaseException) -> str:
    """What a condition records when something other than an EvalError escaped it (a defect in a
    subject or an operator, never expected): the exception's type and the start of its text. The
    text depends only on the call and the policy, so a replay records the same message. The
    condition then counts as an error: matched for deny and ask, not matched for allow."""
    try:
        text = str(exc)
    except Exception:  # an exception whose own text fails
        text = ""
    if len(text) > _FAILURE_SHOWN:
        text = text[:_FAILURE_SHOWN] + "..."
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate from the input
    return f"the condition could not be evaluated ({type(exc).__name__}: {text})"


TOO_DEEP = "the arguments are nested too deeply to evaluate"


def error_text(exc: BaseException) -> str:
    """What a condition that raised `exc` records: an EvalError's message, TOO_DEEP for a
    RecursionError, else `failure_message(exc)`."""
    if isinstance(exc, EvalError):
        return exc.message
    if isinstance(exc, RecursionError):
        return TOO_DEEP
    return failure_message(exc)


# The lead of every error `shell()` raises for a text it cannot read (not valid shell, a script
# only known at run time, ...). The error is the input's, not any rule's: every rule that reads the
# same text meets it, so `dsl.decision.decide` gives it as one reason instead of each rule's own.
UNPARSEABLE_COMMAND = "this command cannot be parsed: "


def unparseable_command(detail: str) -> EvalError:
    """The EvalError for a shell text the parser refuses: `UNPARSEABLE_COMMAND` + the parser's message."""
    return EvalError(detail if detail.startswith(UNPARSEABLE_COMMAND) else UNPARSEABLE_COMMAND + detail)


def is_input_error(message: str | None) -> bool:
    """Is this evaluation error one of the call's input (see `UNPARSEABLE_COMMAND`)?"""
    return message is not None and message.startswith(UNPARSEABLE_COMMAND)


def kind(value: Any) -> str:
    """The JSON type name of a decoded value: null, bool, number, string, list or object."""
    if value is None:
        return "null"
    t = type(value)
    if t is bool:
        return "bool"
    if t is int or t is float:
        return "number"
    if t is str:
        return "string"
    if t is list or t is tuple:
        return "list"
    if t is dict:
        return "object"
    if t is Decimal:  # a result of arithmetic (dsl.numbers)
        return "number"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "object"
    return getattr(t, "KIND", None) or type(value).__name__


def _deep_equal(a: Any, b: Any) -> bool:
    ka, kb = kind(a), kind(b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    if ka == "object":
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if type(a) is Decimal or type(b) is Decimal:
        return as_decimal(a) == as_decimal(b)
    return a == b


def as_decimal(value: Any) -> Decimal:
    """A number as an exact Decimal, to compare it with a result of arithmetic (dsl.numbers): an
    int exactly, a float as the shortest decimal that reads back as it (`repr`: 0.3, not
    0.299999999999999988897769753748...), a Decimal as it is."""
    t = type(value)
    if t is Decimal:
        return value
    if t is float or isinstance(value, float):
        return Decimal(repr(float(value)))
    return Decimal(int(value))


def _text(value: Any) -> Any:
    """A normalized path stands for its text wherever a string is expected."""
    return value.text if kind(value) == "path" else value


def equal(a: Any, b: Any) -> bool:
    """`==`. Null equals only null; a path equals the string of its text; otherwise both sides
    must have the same type."""
    a, b = _text(a), _text(b)
    ka, kb = kind(a), kind(b)
    if ka == "null" or kb == "null":
        return ka == kb
    if ka != kb:
        raise EvalError(f"compares {_a(ka)} with {_a(kb)}")
    return _deep_equal(a, b)


def order(op: str, a: Any, b: Any) -> bool:
    """`< <= > >=` on two numbers or two strings (strings by code point)."""
    ka, kb = kind(a), kind(b)
    if ka != kb or ka not in ("number", "string"):
        raise EvalError(f"'{op}' cannot order {_a(ka)} and {_a(kb)}")
    if a != a or b != b:  # NaN (not JSON, but Python's json.loads accepts it) is false on every side
        raise EvalError(f"'{op}' cannot order NaN")
    if type(a) is Decimal or type(b) is Decimal:
        a, b = as_decimal(a), as_decimal(b)
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def _caseless(a: str, b: str) -> tuple[str, str]:
    """Both strings by their comparison key when either is caseless (a str subclass with a `fold`:
    the text of a Windows path, dsl.subjects.winpaths.WinStr); else as they are."""
    fold = getattr(type(a), "fold", None) or getattr(type(b), "fold", None)
    return (fold(a), fold(b)) if fold is not None else (a, b)


def member(item: Any, container: Any) -> bool:
    """`item in container`: list membership, or a substring of a string."""
    item = _text(item)
    kc = kind(container)
    if kc == "string":
        if kind(item) != "string":
            raise EvalError(f"looks for {_a(kind(item))} in a string")
        item, container = _caseless(item, container)
        return item in container
    if kc != "list":
        raise EvalError(f"'in' needs a list or a string, not {_a(kc)}")
    # `x in [a, b]` means `x == a or x == b` under the language's three-valued `or`: an equal
    # item makes it true; otherwise an item `==` would refuse to compare makes it an error.
    ki = kind(item)
    if ki == "string" and type(container) is not list and type(container) is not tuple:
        find = getattr(type(container), "find_caseless", None)
        if find is not None:  # a Windows path's parts (dsl.subjects.winpaths.WinParts)
            return find(container, item)
    mismatch = None
    for x in container:
        kx = kind(x)
        if ki == "null" or kx == "null":
            if ki == kx:
                return True
        elif kx != ki:
            mismatch = mismatch or kx
        elif _deep_equal(item, x):
            return True
    if mismatch is not None:
        raise EvalError(f"compares {_a(ki)} with {_a(mismatch)} in the list")
    return False


def contains(container: Any, item: Any) -> bool:
    """`container contains item`: a substring, or a list element."""
    return member(item, container)


def affix(op: str, text: Any, part: Any) -> bool:
    """`startswith` and `endswith` on two strings (a path reads as its text), or on two lists
    (`c.argv startswith ["git", "push"]`: the first items of the left list equal the right one)."""
    text, part = _text(text), _text(part)
    kt, kp = kind(text), kind(part)
    if kt == kp == "list":
        n = len(part)
        if n > len(text):
            return False
        window = text[:n] if op == "startswith" else text[len(text) - n :]
        return all(_deep_equal(x, y) for x, y in zip(window, part))
    if kt != "string" or kp != "string":
        raise EvalError(f"'{op}' works on two strings or two lists, not {_a(kt)} and {_a(kp)}")
    text, part = _caseless(text, part)
    return text.startswith(part) if op == "startswith" else text.endswith(part)


@lru_cache(maxsize=4096)  # keyed by the policy's literal patterns: bounded by the policy
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled, case-sensitive glob: `*` any run of characters (including `/`), `?` one
    character, `[abc]` a class, as Python's `fnmatch.fnmatchcase`. Linear in the text matched:
    `fnmatch.translate` (Python 3.9 and later) writes each piece between two stars as an atomic
    group `(?>.*?PIECE)` taken at its leftmost place, the greedy wildcard algorithm of dsl.globs:
    O(n * m) for a text of n characters and a pattern of m."""
    return re.compile(fnmatch.translate(pattern), re.DOTALL)


@lru_cache(maxsize=4096)  # keyed by the policy's selectors: bounded by the policy
def selector_regex(pattern: str) -> re.Pattern[str]:
    """A compiled tool selector: `*` any run of characters, `?` one character, and every other
    character itself (brackets included, unlike `glob`). Matches in O(n * m) for a tool name of
    n characters and a selector of m (the greedy wildcard algorithm, see dsl.globs)."""
    return globs.selector_regex(pattern)


def glob(text: Any, regex: re.Pattern[str]) -> bool:
    if kind(text) != "string":
        raise EvalError(f"'glob' matches strings, not {_a(kind(text))}")
    return regex.match(text) is not None


def length(value: Any) -> int:
    k = kind(value)
    if k not in ("string", "list", "object"):
        raise EvalError(f"len() takes a string, list or object, not {_a(k)}")
    return len(value)


def lower(value: Any) -> str:
    if kind(value) != "string":
        raise EvalError(f"lower() takes a string, not {_a(kind(value))}")
    return value.lower()


def _a(k: str) -> str:
    return ("an " if k[:1] in ("a", "e", "i", "o", "u") else "a ") + k
