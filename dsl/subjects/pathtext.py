"""The checks every path text passes before it is read, POSIX or Windows (dsl.subjects.paths,
dsl.subjects.winpaths): one place, so both kinds refuse the same inputs the same way."""

from __future__ import annotations

from typing import Any

from dsl.values import EvalError


def check_text(raw: Any, what: str) -> None:
    """Raise EvalError for what no path reading accepts: a non-string, an empty string, a NUL
    byte, or a shell expansion (`$HOME`, backticks) that `path()` does not expand."""
    if not isinstance(raw, str):
        raise EvalError(f"{what} must be a string")
    if raw == "":
        raise EvalError(f"{what} is empty")
    if "\x00" in raw:
        raise EvalError(f"{what} contains a NUL byte")
    if "$" in raw or "`" in raw:
        raise EvalError(f"{what} {raw!r} holds a shell expansion that is not expanded here")
