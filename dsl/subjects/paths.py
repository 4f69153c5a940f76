"""`path(x)`: absolute, lexically normalized paths, and path patterns (see dsl.subjects)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from dsl import globs
from dsl.cache import BUDGETS, BoundedCache
from dsl.values import EvalError


@dataclass(frozen=True, slots=True)
class PathValue:
    """An absolute, lexically normalized POSIX path (`text` starts with "/", has no "." or ".."
    segments, no repeated or trailing "/" except the root itself)."""

    text: str

    KIND = "path"
    FIELDS = {"text": "string", "name": "string", "ext": "string", "parent": "path", "parts": "list[string]"}

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.text.split("/") if p)

    @property
    def name(self) -> str:
        parts = self.parts
        return parts[-1] if parts else ""

    @property
    def ext(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot > 0 else ""

    @property
    def parent(self) -> "PathValue":
        parts = self.parts
        return PathValue("/" + "/".join(parts[:-1])) if len(parts) > 1 else PathValue("/")

    def __str__(self) -> str:
        return self.text


_WINDOWS = re.compile(r"^[A-Za-z]:|\\")


def _lexical(parts: Iterable[str]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return out


def _absolute(raw: str, cwd: str | None, home: str | None, what: str) -> list[str]:
    """The normalized segments of `raw` made absolute. Raises EvalError."""
    if not isinstance(raw, str):
        raise EvalError(f"{what} must be a string")
    if raw == "":
        raise EvalError(f"{what} is empty")
    if "\x00" in raw:
        raise EvalError(f"{what} contains a NUL byte")
    if "$" in raw or "`" in raw:
        raise EvalError(f"{what} {raw!r} holds a shell expansion that is not expanded here")
    if _WINDOWS.search(raw):
        raise EvalError(f"{what} {raw!r} is not a POSIX path")
    if raw == "~" or raw.startswith("~/"):
        if not home:
            raise EvalError(f"{what} {raw!r} starts with ~ but no home is known (context.home or the policy's home)")
        base = _absolute(home, None, None, "the home directory")
        return _lexical(base + raw[2:].split("/"))
    if raw.startswith("~"):
        raise EvalError(f"{what} {raw!r} names another user's home, which is not known here")
    if raw.startswith("/"):
        return _lexical(raw.split("/"))
    if not cwd:
        raise EvalError(f"{what} {raw!r} is relative and the call has no context.cwd")
    base = _absolute(cwd, None, home, "context.cwd")
    return _lexical(base + raw.split("/"))


MAX_PATH_TEXT = 100_000  # characters of a path or a pattern, cwd and home included; longer is an error


def make_path(raw: object, cwd: str | None, home: str | None) -> PathValue:
    """`path(x)`: see the module docstring. Raises EvalError for what is not a usable path, and
    for a path, cwd or home longer than MAX_PATH_TEXT characters (Linux's PATH_MAX is 4,096)."""
    if isinstance(raw, PathValue):
        return raw
    _check_length(raw, cwd, home)
    return PathValue("/" + "/".join(_absolute(raw, cwd, home, "the path")))


def _check_length(*texts: object) -> None:
    for text in texts:
        if isinstance(text, str) and len(text) > MAX_PATH_TEXT:
            raise EvalError(f"the path is longer than {MAX_PATH_TEXT:,} characters")


def under(path: PathValue, base: PathValue) -> bool:
    """True when `path` is `base` or inside it, segment by segment (not a string prefix)."""
    parts, prefix = path.parts, base.parts
    return parts[: len(prefix)] == prefix


# segments → compiled pattern; a relative pattern's segments hold the call's cwd, so bounded in bytes
_GLOB_CACHE = BoundedCache(BUDGETS["path_glob"], "path_glob")


def _path_glob_regex(segments: tuple[str, ...]) -> re.Pattern[str]:
    """A regex over a path's text ("" for the root) that matches the pattern's segments, in
    O(n * m) for a path of n characters and a pattern of m (dsl.globs.path_regex)."""
    regex = _GLOB_CACHE.get(segments)
    if regex is None:
        regex = globs.path_regex(segments)
        # the compiled program is about 4 bytes a code for each character of its source, plus the key
        _GLOB_CACHE.put(segments, regex, 8 * len(regex.pattern) + sum(map(len, segments)) + 64 * len(segments))
    return regex


def path_glob(path: PathValue, pattern: str, cwd: str | None, home: str | None) -> bool:
    """Match a path against a path pattern: `*` within one segment, `?` one character, `**` any
    number of whole segments (including none). A relative pattern is anchored at `cwd`, one
    starting with `~` at the home, like a path. Raises EvalError when the pattern cannot be
    anchored, or when it, the cwd or the home is longer than MAX_PATH_TEXT characters."""
    _check_length(pattern, cwd, home)
    if pattern.startswith("**"):
        if not cwd:
            raise EvalError(f"the pattern {pattern!r} is relative and the call has no context.cwd")
        segments = tuple(_absolute(cwd, None, home, "context.cwd")) + tuple(p for p in pattern.split("/") if p not in ("", "."))
    else:
        # Wildcards are kept as segments; only "." and ".." are resolved.
        segments = tuple(_absolute(pattern, cwd, home, "the pattern"))
    # The root is the path with no segments; match it as the empty string against the segments.
    return _path_glob_regex(segments).match(path.text if path.text != "/" else "") is not None
