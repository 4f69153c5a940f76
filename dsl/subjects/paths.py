"""`path(x)`: absolute, lexically normalized paths, and path patterns (see dsl.subjects)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from dsl import globs
from dsl.cache import BUDGETS, BoundedCache, char_bytes
from dsl.subjects.pathtext import check_text
from dsl.subjects.secrets import clear_secret_cache, glob_climbs_to_secrets, glob_may_be_secret, holds_secrets, is_secret
from dsl.values import EvalError


@dataclass(frozen=True, slots=True)
class PathValue:
    """An absolute, lexically normalized POSIX path (`text` starts with "/", has no "." or ".."
    segments, no repeated or trailing "/" except the root itself).

    `parts`, `name` and `ext` are computed from `text` on first use and kept (a rule reads them
    several times per call: `path(x).parts contains ".git" or path(x).parts contains ".ssh"`);
    the kept values take no part in equality, hashing or the repr."""

    text: str
    _parts: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _name: str | None = field(default=None, init=False, repr=False, compare=False)
    _secret: bool | None = field(default=None, init=False, repr=False, compare=False)
    _holds: bool | None = field(default=None, init=False, repr=False, compare=False)
    _glob: bool | None = field(default=None, init=False, repr=False, compare=False)
    # the text path() was given, before `..` and `.` were resolved: what `glob_secret` reads too
    # (`{.ssh/*,a/../../}` is `/}` once resolved, while rg matches its first alternative)
    _pattern: str | None = field(default=None, init=False, repr=False, compare=False)

    KIND = "path"
    FIELDS = {"text": "string", "name": "string", "ext": "string", "parent": "path", "parts": "list[string]",
              "drive": "string", "style": "string", "secret": "bool", "holds_secrets": "bool", "glob_secret": "bool"}
    # What a Windows path (dsl.subjects.winpaths.WinPathValue) has too: a POSIX path has no drive.
    drive = ""
    style = "posix"

    @property
    def secret(self) -> bool:
        """Whether the path is or is inside a file that holds credentials (dsl.subjects.secrets);
        kept, as `parts` (a path from make_path's cache is asked again by later calls)."""
        secret = self._secret
        if secret is None:
            secret = is_secret(self.parts)
            object.__setattr__(self, "_secret", secret)
        return secret

    @property
    def holds_secrets(self) -> bool:
        """Whether a search rooted here reaches a secret: the path is secret, or a directory that
        holds secrets below it, or above one (dsl.subjects.secrets.holds_secrets: `/`, the homes,
        `/proc`, `/etc`, `/run/secrets`, `~/.config`). Kept, as `secret`."""
        holds = self._holds
        if holds is None:
            holds = holds_secrets(self.parts)
            object.__setattr__(self, "_holds", holds)
        return holds

    @property
    def glob_secret(self) -> bool:
        """Whether the path, read as a glob pattern (`*`, `?`, `[...]`, `{a,b}`), may match a
        secret (dsl.subjects.secrets.glob_may_be_secret: `*.[p]em`, `{.ssh,x}/*`, `**/id_*`), as
        written or as resolved against the cwd (a pattern's `..` may stand inside braces, and the
        cwd may be inside a secret directory)."""
        found = self._glob
        if found is None:  # kept, as `secret` (what it reads, the text and the pattern, never change)
            pattern = self._pattern if self._pattern is not None else self.text
            found = glob_may_be_secret(pattern) or glob_may_be_secret(self.text) or glob_climbs_to_secrets(pattern)
            object.__setattr__(self, "_glob", found)
        return found

    @property
    def parts(self) -> tuple[str, ...]:
        parts = self._parts
        if parts is None:
            text = self.text
            # a normalized text has no empty segment but the root's: split it once, as is
            parts = tuple(text[1:].split("/")) if text != "/" else ()
            object.__setattr__(self, "_parts", parts)
        return parts

    @property
    def name(self) -> str:
        name = self._name
        if name is None:
            name = self.text[self.text.rfind("/") + 1 :]
            object.__setattr__(self, "_name", name)
        return name

    @property
    def ext(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot > 0 else ""

    @property
    def parent(self) -> "PathValue":
        text = self.text
        cut = text.rfind("/")
        return PathValue(text[:cut]) if cut > 0 else PathValue("/")

    def __str__(self) -> str:
        return self.text


_DRIVE_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _windows_form(raw: str) -> bool:
    """Whether `raw` starts with a drive letter (`C:`) or holds a backslash: no POSIX path.
    (A substring search: a regex alternation tried at every position cost 20 ns a character.)"""
    return "\\" in raw or (raw[1:2] == ":" and raw[:1] in _DRIVE_LETTERS)


def _lexical(parts: Iterable[str], base: tuple[str, ...] = ()) -> list[str]:
    """`parts` resolved lexically after `base`, which is already normalized (no "", "." or "..")."""
    out: list[str] = list(base)
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
    check_text(raw, what)
    if _windows_form(raw):
        raise EvalError(f"{what} {raw!r} is not a POSIX path")
    if raw == "~" or raw.startswith("~/"):
        if not home:
            raise EvalError(f"{what} {raw!r} starts with ~ but no home is known (context.home or the policy's home)")
        return _lexical(raw[2:].split("/"), _base(home, None, None, "the home directory"))
    if raw.startswith("~"):
        raise EvalError(f"{what} {raw!r} names another user's home, which is not known here")
    if raw.startswith("/"):
        return _lexical(raw.split("/"))
    if not cwd:
        if what in ("context.cwd", "the home directory"):  # the base itself: nothing to resolve it against
            raise EvalError(f"{what} {raw!r} is relative: it must be an absolute path")
        raise EvalError(f"{what} {raw!r} is relative and the call has no context.cwd")
    # the base is normalized once (a chain of `cd`s makes a long cwd, shared by every word after
    # it): each word costs its own parts in Python, not the cwd's
    return _lexical(raw.split("/"), _base(cwd, None, home, "context.cwd"))


# (raw, cwd, home, what) → the segments of a cwd or a home made absolute; and (cwd, home) → the
# text of the cwd so made. A chain of `cd`s makes a long cwd, and every word after it is
# resolved against it: each word costs its own parts, not the cwd's.
_BASES = BoundedCache(BUDGETS["path_bases"], "path_bases")


def _base(raw: str, cwd: str | None, home: str | None, what: str) -> tuple[str, ...]:
    """_absolute of a cwd or a home, kept (the same few repeat for every word of a call). Raises
    EvalError as _absolute does (a refusal is not kept)."""
    key = (raw, cwd, home, what)
    hit = _BASES.get(key) if type(raw) is str and type(cwd) in _STR_OR_NONE and type(home) in _STR_OR_NONE else None
    if hit is None:
        hit = tuple(_absolute(raw, cwd, home, what))
        if type(raw) is str and type(cwd) in _STR_OR_NONE and type(home) in _STR_OR_NONE:
            texts = raw + (cwd or "") + (home or "")
            # the key's texts, the segments (a copy of the characters and an object each), the tuple
            _BASES.put(key, hit, 2 * char_bytes(texts) + 64 * len(hit) + 300)
    return hit


def _base_text(cwd: str, home: str | None) -> str:
    """The normalized text of a cwd (`_base` joined), kept with it. Raises EvalError."""
    key = ("text", cwd, home)
    hit = _BASES.get(key) if type(cwd) is str and type(home) in _STR_OR_NONE else None
    if hit is None:
        hit = "/" + "/".join(_base(cwd, None, home, "context.cwd"))
        if type(cwd) is str and type(home) in _STR_OR_NONE:
            _BASES.put(key, hit, char_bytes(cwd) + char_bytes(home or "") + char_bytes(hit) + 200)
    return hit


MAX_PATH_TEXT = 100_000  # characters of a path or a pattern, cwd and home included; longer is an error


# (text, cwd, home) → PathValue or WinPathValue. The words of a command and the paths of a
# session repeat (the same cwd, the same files), and several rules of one call make the same
# path(p, c.cwd); the values are immutable, so one made earlier is the same answer. Only exact
# `str` texts of at most _CACHED_PATH_TEXT characters are kept (a WinStr, a str subclass equal to
# its text, reads differently). A refusal is kept as its message (`Refused`) and raised again:
# a call whose paths start with `~` and no home is known refuses the same path for every rule.
PATH_CACHE = _PATH_CACHE = BoundedCache(BUDGETS["paths"], "paths")
_CACHED_PATH_TEXT = 8192
_STR_OR_NONE = (str, type(None))


class Refused(NamedTuple):
    """A kept refusal of make_path: the EvalError's message."""

    message: str


def make_path(raw: object, cwd: str | None, home: str | None) -> PathValue:
    """`path(x)`: see the module docstring. Raises EvalError for what is not a usable path, and
    for a path, cwd or home longer than MAX_PATH_TEXT characters (Linux's PATH_MAX is 4,096)."""
    if type(raw) is str and type(cwd) in _STR_OR_NONE and type(home) in _STR_OR_NONE:
        key = (raw, cwd, home)
        hit = _PATH_CACHE.get(key)
        if hit is not None:
            if type(hit) is Refused:
                raise EvalError(hit.message)
            return hit
        texts = raw + (cwd or "") + (home or "")
        try:
            value = _make(raw, cwd, home)
        except EvalError as exc:
            if len(texts) <= _CACHED_PATH_TEXT:
                _PATH_CACHE.put(key, Refused(exc.message), 2 * char_bytes(texts) + 2 * char_bytes(exc.message) + 400)
            raise
        if len(texts) <= _CACHED_PATH_TEXT:
            _PATH_CACHE.put(key, value, value_cost(value, texts))
        return value
    if isinstance(raw, PathValue):
        return raw
    return _make(raw, cwd, home)


def value_cost(value: object, texts: str) -> int:
    """What a kept path() value costs a cache, in bytes, with every field it may compute later
    (parts, name, secret): an upper bound of `dsl.cache.estimate_size` of the key and the value.
    `texts`: the key's texts joined (raw, cwd, home). A POSIX path: the characters four times
    (the key, the text, the parts, the name; 4 bytes each unless ASCII), each part's own object
    (a str of about 50 bytes and a tuple slot: at most one per "/" or "\\"), and the objects
    themselves (key tuple, value, cache node). A Windows path holds more: its text, drive and
    each part are WinStr (a str with a dict holding its fold, about 500 bytes each), and the
    folded text, the folded parts and the parts as written are kept beside them."""
    chars = char_bytes(texts)
    if type(value) is _winpaths.WinPathValue:
        return 2 * chars + 6 * char_bytes(value.text) + 600 * len(value.key) + 1400
    return 4 * chars + 64 * (texts.count("/") + texts.count("\\") + 1) + 600


def clear_path_cache() -> None:
    """Forget every kept path() value and what the secrets table answered for a path or a
    pattern (benchmarks time the first sight of a path)."""
    _PATH_CACHE.clear()
    _BASES.clear()
    clear_secret_cache()


def _make(raw: object, cwd: str | None, home: str | None) -> PathValue:
    _check_length(raw, cwd, home)
    if type(raw) is _winpaths.WinPathValue or _winpaths.wants_windows(raw, cwd, home):
        return _winpaths.make_windows_path(raw, cwd, home)
    if type(raw) is str and cwd and raw not in ("", ".", "..") and "/" not in raw and raw[0] != "~":
        # one relative segment (a command's word, most often): the cwd's text and the word, as
        # _absolute resolves it (the same checks, in the same order), without joining the cwd's
        # segments again for each word
        check_text(raw, "the path")
        if _windows_form(raw):
            raise EvalError(f"the path {raw!r} is not a POSIX path")
        base = _base_text(cwd, home)
        value = PathValue(base + raw if base == "/" else base + "/" + raw)
        object.__setattr__(value, "_pattern", raw)
        return value
    value = PathValue("/" + "/".join(_absolute(raw, cwd, home, "the path")))
    if type(raw) is str and raw != value.text:
        object.__setattr__(value, "_pattern", raw)
    return value


def _check_length(*texts: object) -> None:
    for text in texts:
        if isinstance(text, str) and len(text) > MAX_PATH_TEXT:
            raise EvalError(f"the path is longer than {MAX_PATH_TEXT:,} characters")


def under(path: PathValue, base: PathValue) -> bool:
    """True when `path` is `base` or inside it, segment by segment (not a string prefix)."""
    if type(path) is not PathValue or type(base) is not PathValue:
        return _winpaths.under(path, base)  # a Windows path: only under a Windows path
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
    if type(path) is _winpaths.WinPathValue:
        return _winpaths.path_glob(path, pattern, cwd, home)
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


# Windows paths are their own module; imported last, as it reads PathValue from here.
from dsl.subjects import winpaths as _winpaths  # noqa: E402
