"""Windows paths in `path()`: drive letters, UNC shares, backslashes, compared case-insensitively.

A Windows agent's tools receive `C:\\Users\\me\\proj\\app.py`, `c:/Users/me/proj/app.py`,
`\\\\server\\share\\x` or `\\\\?\\C:\\x`. `path()` reads them as Windows does and gives a
`WinPathValue`: the same language type `path` as a POSIX `PathValue` (same fields, the same
operators, one set of rules for both), but its own Python class, so that code written for POSIX
text (the compiler's fast paths test `type(v) is PathValue`) can never misread a Windows path as
POSIX: a Windows value takes the generic operations, which dispatch here. Two fields tell them
apart in a rule: `style` ("posix" or "windows") and `drive` ("C:", `\\\\server\\share`, "" on POSIX).

Which reading applies (`wants_windows`): a path starting with a drive letter (`C:`) or a
backslash is Windows; a path starting with `/` or relative is Windows when `context.cwd` is a
Windows path (on Windows `/x` is `\\x`, rooted on the current drive), POSIX otherwise; `~` follows
the kind of the home.

Normalization follows Microsoft's "File path formats on Windows systems" (.NET docs, "Path
normalization") and "Naming Files, Paths, and Namespaces" (Win32 docs):

* both `/` and `\\` separate segments, and runs of separators collapse;
* `.` and `..` are resolved lexically, never above the root: the drive (`C:\\`) or the share
  (`\\\\server\\share`);
* the drive letter is upper-cased; a drive-relative path (`C:foo`) resolves against a Windows cwd
  on the same drive (Windows keeps one current directory per drive, which is not known here for
  another drive: an error); a rooted path without a drive (`\\foo`, `/foo`) takes the cwd's drive
  or share (an error without a Windows cwd);
* trimming: the last segment (when the path does not end in a separator) loses all its trailing
  periods and spaces, any other segment one trailing period. Where the docs leave Windows'
  reading open (a segment still ending in a period or a space after that, or made only of periods
  and spaces, such as `...`) the path is an error: guessing either way would let a rule be
  bypassed, or let an allow match another file;
* DOS device paths: `\\\\.\\C:\\x` and `\\\\.\\UNC\\server\\share\\x` are read as `C:\\x` and
  `\\\\server\\share\\x` (a `..` climbing above the volume, into the device namespace, is an error);
  `\\\\?\\` paths skip normalization in Windows, so one is read only when it is already in normal
  form (no `/`, no `.` or `..`, no empty segment, no trailing period or space), else an error;
  any other device (`\\\\.\\pipe\\x`, `\\\\?\\Volume{...}`, `\\\\?\\GLOBALROOT`, `\\??\\`) is an error;
* fail closed, an error rather than a guess: a colon after the drive (an NTFS alternate data
  stream, `file.txt:s` or `file.txt::$DATA`, which would name the same file as `file.txt`), the
  characters Windows forbids in names (`< > " | ? *` and U+0000-U+001F), a reserved device name
  as a segment (`CON`, `PRN`, `AUX`, `NUL`, `COM0`-`COM9`, `LPT0`-`LPT9`, with superscript digits,
  `CONIN$`, `CONOUT$`, also with an extension: `nul.txt`), a segment shaped like an 8.3 short name
  (`PROGRA~1`, `GIT~1`: an alias of a long name that only the file system knows, the class of
  git's CVE-2014-9390), `$` or a backtick (an unexpanded shell expansion, as for POSIX paths) and
  `%NAME%` (an unexpanded cmd.exe variable).

Comparison is case-insensitive, as NTFS names are: the text, name, ext, parts and drive of a
Windows path are `WinStr`, a str whose `==`, hash, `in`, `startswith`, `endswith` and globs compare
the `fold` of both sides: each character's simple uppercase mapping (the per-character mapping
Windows' upcase table approximates; `ß` stays `ß`, so `straße` and `STRASSE` differ, as on NTFS),
with `/` read as `\\`. The fold happens at comparison, so the fields keep the case written.
"""

from __future__ import annotations

import re
from functools import lru_cache
from string import ascii_letters
from typing import Any

from dsl.subjects.paths import PathValue as _PosixPath  # paths.py imports this module at its end
from dsl.subjects.paths import path_glob as _posix_glob
from dsl.subjects.pathtext import check_text
from dsl.values import EvalError

LETTERS = _LETTERS = frozenset(ascii_letters)
_SEPARATORS = re.compile(r"[\\/]+")
# Names the Win32 layer maps to devices ("Naming Files, Paths, and Namespaces"), compared folded.
_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{p}{d}" for p in ("COM", "LPT") for d in "0123456789\u00b9\u00b2\u00b3"]
)
_FORBIDDEN = re.compile(r'[\x00-\x1f<>"|?*]')
_SHORT_NAME = re.compile(r"[^~.]{1,6}~[0-9]+(?:\.[^.]{0,3})?\Z")
_CMD_VARIABLE = re.compile(r"%[^%\\/]+%")


def _upcase_table() -> dict[int, str]:
    """The simple uppercase mapping of each BMP character that has a one-character uppercase."""
    table = {}
    for cp in range(0x10000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        upper = chr(cp).upper()
        if len(upper) == 1 and upper != chr(cp):
            table[cp] = upper
    return table


_UPCASE: dict[int, str] | None = None


def fold(text: str) -> str:
    """The comparison key of Windows path text: every character by its simple uppercase mapping
    (BMP only, one character to one), `/` as `\\`. Linear in the text.

    That is `str.upper` but for the characters `upper` maps to more than one (`ß` to `SS`: the
    102 of the BMP) and those outside the BMP, which the key keeps as written: each distinct
    one present is set aside (replaced by a placeholder `upper` leaves alone, then put back),
    a few scans in C. A text holding more than `_KEPT_AT_MOST` distinct ones, or a placeholder,
    is folded character by character through the table (`_fold_by_table`, the reference)."""
    global _KEPT
    if text.isascii():
        return text.upper().replace("/", "\\")
    if _KEPT is None:
        _KEPT = _kept_pattern()
    found = _KEPT.search(text)
    if found is None:
        return text.upper().replace("/", "\\")
    if _PLACEHOLDERS.search(text):
        return _fold_by_table(text)
    work, kept = text, []
    while found is not None:
        if len(kept) == _KEPT_AT_MOST:
            return _fold_by_table(text)
        holder = chr(0xF0000 + len(kept))
        kept.append((holder, found.group()))
        work = work.replace(found.group(), holder)
        found = _KEPT.search(work, found.start())
    work = work.upper()
    for holder, char in kept:
        work = work.replace(holder, char)
    return work.replace("/", "\\")


def _fold_by_table(text: str) -> str:
    """`fold` character by character, through the table of simple uppercase mappings."""
    global _UPCASE
    if _UPCASE is None:
        _UPCASE = _upcase_table()
    return text.translate(_UPCASE).replace("/", "\\")


# What `fold` keeps as written where `str.upper` would change it: the BMP characters whose
# uppercase is more than one character (102 in Python 3.11's tables: `ß`, `ŉ`, `ﬀ`, ...), and
# every character outside the BMP but plane 15 (private use, caseless), whose characters serve
# as placeholders; at most _KEPT_AT_MOST distinct ones. Built from the running Python's own
# tables on the first non-ASCII text (about 10 ms), as _UPCASE is.
_KEPT: re.Pattern[str] | None = None
_PLACEHOLDERS = re.compile("[\U000F0000-\U000FFFFF]")
_KEPT_AT_MOST = 8


def _kept_pattern() -> re.Pattern[str]:
    expanding = "".join(ch for ch in map(chr, range(0x10000)) if len(ch.upper()) != 1)
    return re.compile("[" + re.escape(expanding) + "\U00010000-\U000EFFFF\U00100000-\U0010FFFF]")


class WinStr(str):
    """A string of a Windows path (its text, name, ext, parts, drive): equal to a string with the
    same `fold`, and its `in`, `startswith`, `endswith` and globs compare folded too (dsl.values
    and the compiler's glob dispatch on `fold`). Its hash is the fold's, so it must not be looked
    up among plain strings in a set (a plain string hashes by its own case); dsl.values compares
    item by item."""

    # (no __slots__: a str subclass cannot have any, and `key` is kept per instance)
    key: str

    def __new__(cls, text: str = "") -> "WinStr":
        self = super().__new__(cls, text)
        self.key = fold(text)  # folded once: rules compare the same parts many times
        return self

    @staticmethod
    def keyed(text: str, key: str) -> "WinStr":
        """A WinStr whose fold is known (`key == fold(text)`)."""
        self = str.__new__(WinStr, text)
        self.key = key
        return self

    @staticmethod
    def fold(text: str) -> str:
        return text.key if type(text) is WinStr else fold(text)

    def __eq__(self, other: object) -> bool:
        if type(other) is str:
            return self.key == fold(other)
        if isinstance(other, str):
            return self.key == WinStr.fold(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self.key)

    def __reduce__(self) -> tuple:
        return (WinStr, (str(self),))

    def __contains__(self, part: object) -> bool:
        return isinstance(part, str) and WinStr.fold(part) in self.key

    def startswith(self, prefix: Any, *rest: Any) -> bool:  # type: ignore[override]
        if isinstance(prefix, str) and not rest:
            return self.key.startswith(WinStr.fold(prefix))
        return str.startswith(self, prefix, *rest)

    def endswith(self, suffix: Any, *rest: Any) -> bool:  # type: ignore[override]
        if isinstance(suffix, str) and not rest:
            return self.key.endswith(WinStr.fold(suffix))
        return str.endswith(self, suffix, *rest)


class WinParts(tuple):
    """A Windows path's parts: a tuple of WinStr whose `contains` (dsl.values.member) folds the
    item once and compares the parts' kept keys."""

    __slots__ = ()

    def find_caseless(self, item: str) -> bool:
        key = WinStr.fold(item)
        return any(part.key == key for part in self)


_PATH_FIELDS = {
    "text": "string", "name": "string", "ext": "string", "parent": "path", "parts": "list[string]",
    "drive": "string", "style": "string", "secret": "bool", "holds_secrets": "bool", "glob_secret": "bool",
}


class WinPathValue:
    """An absolute, normalized Windows path (immutable). `drive` is `C:` (upper case) or
    `\\\\server\\share`; `parts` the segments below it (trimmed as Windows trims them); `text`
    the drive, `\\`, and the parts joined by `\\` (`C:\\Users\\me`, `C:\\` for the root,
    `\\\\server\\share\\dir`). `key` is the folded drive and parts, which equality, `under` and
    globs compare; `folded` is `/` and the folded parts joined by `/`, the text globs match. The
    parts (one WinStr each) are made on first use: most rules read only the name or the key.
    Build one with `make_windows_path`."""

    __slots__ = ("drive", "text", "key", "folded", "_names", "_parts", "_pattern", "_secret", "_holds", "_glob")

    KIND = "path"
    FIELDS = _PATH_FIELDS
    style = "windows"

    @classmethod
    def of(cls, drive: str, parts: list[str], keys: list[str], joined: str | None = None,
           folded_joined: str | None = None) -> "WinPathValue":
        """The value of normalized `parts` below `drive`, their folds `keys` known; `joined` and
        `folded_joined`, when the caller has them, are the parts and the keys joined by `\\`
        (not joined again: a path may have 50,000 parts)."""
        self = object.__new__(cls)
        put = object.__setattr__
        drive_key = fold(drive)
        if joined is None or folded_joined is None:
            joined, folded_joined = "\\".join(parts), "\\".join(keys)
        put(self, "drive", WinStr.keyed(drive, drive_key))
        put(self, "text", WinStr.keyed(drive + "\\" + joined, drive_key + "\\" + folded_joined))
        put(self, "key", (drive_key, *keys))
        put(self, "folded", "/" + folded_joined.replace("\\", "/"))
        put(self, "_names", tuple(parts))
        put(self, "_pattern", None)
        put(self, "_parts", None)
        put(self, "_secret", None)
        put(self, "_holds", None)
        put(self, "_glob", None)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a WinPathValue is immutable")

    @property
    def secret(self) -> bool:
        """Whether the path is or is inside a file that holds credentials (dsl.subjects.secrets),
        compared in lower case as on POSIX; kept, as PathValue keeps it (a path from make_path's
        cache is asked again by later calls, and by several rules of one call)."""
        secret = self._secret
        if secret is None:
            from dsl.subjects.secrets import is_secret

            secret = is_secret(self._names)
            object.__setattr__(self, "_secret", secret)
        return secret

    @property
    def holds_secrets(self) -> bool:
        """As PathValue.holds_secrets: `C:\\` and `C:\\Users\\me` hold secrets below them. Kept."""
        holds = self._holds
        if holds is None:
            from dsl.subjects.secrets import holds_secrets

            holds = holds_secrets(self._names)
            object.__setattr__(self, "_holds", holds)
        return holds

    @property
    def glob_secret(self) -> bool:
        """As PathValue.glob_secret: of the text as written (before `..` was resolved) or of
        the folded text."""
        found = self._glob
        if found is None:  # kept
            from dsl.subjects.secrets import glob_may_be_secret

            pattern = self._pattern
            found = (pattern is not None and glob_may_be_secret(pattern)) or glob_may_be_secret(self.folded)
            object.__setattr__(self, "_glob", found)
        return found

    @property
    def parts(self) -> "WinParts":
        parts = self._parts
        if parts is None:
            parts = WinParts(map(WinStr.keyed, self._names, self.key[1:]))
            object.__setattr__(self, "_parts", parts)
        return parts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WinPathValue) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"WinPathValue({str(self)!r})"

    @property
    def name(self) -> str:
        return WinStr.keyed(self._names[-1], self.key[-1]) if self._names else WinStr("")

    @property
    def ext(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return WinStr(name[dot:]) if dot > 0 else WinStr("")

    @property
    def parent(self) -> "WinPathValue":
        return WinPathValue.of(self.drive, list(self._names[:-1]), list(self.key[1:-1]))

    def __str__(self) -> str:
        return str.__str__(self.text)


def is_windows_text(text: Any) -> bool:
    """Whether a string has a Windows form of its own: a drive letter (`C:`) or a leading `\\`."""
    return isinstance(text, str) and (text[:1] == "\\" or (text[1:2] == ":" and text[:1] in _LETTERS))


def wants_windows(raw: Any, cwd: str | None, home: str | None) -> bool:
    """Whether `path(raw)` reads `raw` as a Windows path (see the module docstring)."""
    if type(raw) is not str or not raw:
        return False
    if is_windows_text(raw):
        return True
    if raw[0] == "~":
        return is_windows_text(home) or raw[1:2] == "\\"
    return is_windows_text(cwd)


def make_windows_path(raw: Any, cwd: str | None, home: str | None, what: str = "the path") -> WinPathValue:
    """`path(raw)` for a Windows path. Raises EvalError for what is not a usable Windows path."""
    if isinstance(raw, WinPathValue):
        return raw
    hit = _PLAIN_CACHE.get(raw) if type(raw) is str else None
    if hit is not None:
        return hit
    tried = False
    if (type(raw) is str and raw[1:3] in (":\\", ":/") and raw[0] in _LETTERS
            and "$" not in raw and "`" not in raw and "%" not in raw):
        tried = True
        # the common case, `C:\\dir\\name` already in normal form: one fold, one split; it
        # depends on nothing else, so it is kept (a call's cwd is read for every path it has)
        text = _plain_text(raw[2:])
        folded = fold(text) if text is not None else ""
        if text is not None and not _reserved_in(folded):
            # the same pieces, folded (fold maps one character to one)
            parts, keys = (text.split("\\"), folded.split("\\")) if text else ([], [])
            hit = WinPathValue.of(raw[0].upper() + ":", parts, keys, text, folded)
            if text != raw[3:]:  # written otherwise (`/`, separators in a row): as _parse keeps it
                object.__setattr__(hit, "_pattern", raw)
            if len(raw) <= _PLAIN_CACHE_TEXT:
                if len(_PLAIN_CACHE) >= _PLAIN_CACHE_ENTRIES:
                    _PLAIN_CACHE.clear()
                _PLAIN_CACHE[raw] = hit
            return hit
    drive, parts = _parse(raw, cwd, home, what, pattern=False, plain_tried=tried)
    joined = "\\".join(parts)
    folded_joined = fold(joined)  # one fold: no part holds a separator
    keys = folded_joined.split("\\") if parts else []
    value = WinPathValue.of(drive, parts, keys, joined, folded_joined)
    if type(raw) is str:
        object.__setattr__(value, "_pattern", raw)  # what glob_secret reads beside the folded text
    return value


def is_normal(text: str) -> bool:
    """Whether `text` is, but for case and `/` for `\\`, the text of an absolute Windows path
    (what `path()` of it gives): a literal `==` can then match."""
    try:
        value = make_windows_path(text, None, None)
    except EvalError:
        return False
    return fold(value.text) == fold(text)


# make_windows_path's results for absolute paths already in normal form, which depend on the text
# alone: at most 512 of at most 1,024 characters (the text, its fold and the parts' strings:
# about 5 MB at most), cleared when full. Pure: a hit is the value the text always gives.
_PLAIN_CACHE: dict[str, WinPathValue] = {}
_PLAIN_CACHE_ENTRIES = 512
_PLAIN_CACHE_TEXT = 1024


def under(path: Any, base: Any) -> bool:
    """`path under base` when either is a Windows path: the same drive or share (folded) and the
    base's parts a prefix of the path's. A POSIX path is never under a Windows path, nor the
    reverse."""
    if not (isinstance(path, WinPathValue) and isinstance(base, WinPathValue)):
        return False
    n = len(base.key)
    return path.key[:n] == base.key


def path_glob(path: WinPathValue, pattern: str, cwd: str | None, home: str | None) -> bool:
    """A path pattern against a Windows path, case-insensitively, with `/` and `\\` both
    separators. `/**` (or `\\**`) at the start matches under every drive and share (`/**/.env` is
    any `.env`); otherwise the pattern is anchored like a path: `C:/x/**`, `//server/share/**`,
    `/x/**` on the cwd's drive, `~/...` at a Windows home, a relative one (and `**/...`) at a
    Windows cwd. The match itself is `dsl.subjects.paths.path_glob` on the folded segments.
    Raises EvalError when the pattern cannot be anchored."""
    segments: list[str] | tuple[str, ...]
    drive: str | None
    if pattern[1:3] == "**" and pattern[:1] in ("/", "\\") and pattern[3:4] in ("", "/", "\\"):
        return _posix_glob(_PosixPath(path.folded), _any_root(pattern), None, None)
    if pattern.startswith("**"):
        if not is_windows_text(cwd):
            raise EvalError(f"the pattern {pattern!r} is relative and the call has no Windows context.cwd")
        base = make_windows_path(cwd, None, home, "context.cwd")
        drive, segments = base.drive, list(base.parts) + [s for s in _SEPARATORS.split(pattern) if s not in ("", ".")]
    else:
        drive, segments = _parse(pattern, cwd, home, "the pattern", pattern=True)
    if drive is not None and fold(drive) != path.key[0]:
        return False
    return _posix_glob(_PosixPath(path.folded), "/" + "/".join(fold(s) for s in segments), None, None)


def string_glob(text: str, pattern: str) -> bool:
    """A string glob (`glob` on a name, ext or part of a Windows path): both sides folded."""
    from dsl.values import glob_regex

    return glob_regex(fold(pattern)).match(fold(text)) is not None


# --- parsing ------------------------------------------------------------------------------


def _parse(raw: Any, cwd: str | None, home: str | None, what: str, pattern: bool,
           plain_tried: bool = False) -> tuple[str, list[str]]:
    """(drive, parts) of `raw` made absolute and normalized. Raises EvalError. `plain_tried`:
    the caller found that the text after a drive is not in normal form (`_plain_parts`), so
    that scan of up to MAX_PATH_TEXT characters is not made twice."""
    check_text(raw, what)
    if _CMD_VARIABLE.search(raw):
        raise EvalError(f"{what} {raw!r} holds a %VARIABLE% that is not expanded here")
    head = raw[:4].replace("/", "\\")
    if head in ("\\\\?\\", "\\\\.\\") or raw.startswith("\\??\\"):
        return _device(raw, what, pattern)
    if raw[:2] in ("\\\\", "//", "\\/", "/\\"):
        pieces = _SEPARATORS.split(raw[2:], 2)  # the server, the share, and what is below them
        if len(pieces) < 2 or not pieces[0] or not pieces[1]:
            raise EvalError(f"{what} {raw!r} is a UNC path without a server and a share")
        for piece in pieces[:2]:
            if piece in (".", "..") or _FORBIDDEN.search(piece) or ":" in piece:
                raise EvalError(f"{what} {raw!r} has {piece!r} as its server or share, which Windows does not allow")
        drive = "\\\\" + pieces[0] + "\\" + pieces[1]
        return drive, _segments(_split(pieces[2]) if len(pieces) > 2 else [], [], raw, what, pattern, clamp=True)
    if raw[1:2] == ":" and raw[:1] in _LETTERS:
        drive = raw[0].upper() + ":"
        rest = raw[2:]
        if rest[:1] in ("\\", "/"):
            plain = None if pattern or plain_tried else _plain(rest, [])
            return drive, plain if plain is not None else _segments(_split(rest), [], raw, what, pattern, clamp=True)
        base = _cwd(cwd, home, raw, what)
        if base.key[0] != drive:
            raise EvalError(f"{what} {raw!r} is relative to the current directory of drive {drive}, which is not known here")
        return drive, _segments(_split(rest), list(base.parts), raw, what, pattern, clamp=True)
    if raw[:1] in ("\\", "/"):
        base = _cwd(cwd, home, raw, what, rooted=True)
        return base.drive, _segments(_split(raw), [], raw, what, pattern, clamp=True)
    if raw[:1] == "~":
        if raw != "~" and raw[1:2] not in ("\\", "/"):
            raise EvalError(f"{what} {raw!r} names another user's home, which is not known here")
        if not home:
            raise EvalError(f"{what} {raw!r} starts with ~ but no home is known (context.home or the policy's home)")
        if not is_windows_text(home):
            raise EvalError(f"{what} {raw!r} is a Windows path and the home {home!r} is not a Windows path")
        base = make_windows_path(home, None, None, "the home directory")
        return base.drive, _segments(_split(raw[1:]), list(base.parts), raw, what, pattern, clamp=True)
    base = _cwd(cwd, home, raw, what)
    plain = None if pattern else _plain(raw, list(base.parts))
    return base.drive, plain if plain is not None else _segments(_split(raw), list(base.parts), raw, what, pattern, clamp=True)


# A segment in normal form holds none of these (what a name may not hold, `:` for a stream, `~`
# for a short name) and ends in neither a period nor a space; a text holding none of them anywhere
# needs no check segment by segment (`_plain_text`, `_segments`): a few scans of the whole text
# in C, where a regex per segment (or one tried at every position) cost 50-120 ns a character.
_NOT_IN_A_NAME = re.compile(r'[\x00-\x1f<>"|?*:~]')
_REFUSED_CHARS = re.compile(r'[\x00-\x1f<>"|?*:]')  # the same but `~` (a short name is read per segment)
# the stems of the reserved device names (`_RESERVED`), searched in folded text
_RESERVED_STEMS = ("CON", "PRN", "AUX", "NUL", "COM", "LPT")
# (searched in folded text, where every separator is `\\` and every letter upper case)
_RESERVED_SEGMENT = re.compile(r"(?:^|\\)(?:CON|PRN|AUX|NUL|COM.|LPT.)(?:[. ][^\\]*)?(?:\\|\Z)")


def _split(text: str) -> list[str]:
    """`text` cut at every separator (`\\` or `/`). Unlike `_SEPARATORS.split`, a run of
    separators leaves empty pieces between them: for `_segments`, which skips them."""
    return text.replace("/", "\\").split("\\")


def _reserved_in(folded: str) -> bool:
    """Whether some segment of a folded text is a reserved device name (as `_name` reads one).
    Only a text holding one of their stems is searched segment by segment."""
    for stem in _RESERVED_STEMS:
        if stem in folded:
            return _RESERVED_SEGMENT.search(folded) is not None
    return False


def _plain_text(rest: str) -> str | None:
    """`rest` with its separators as `\\`, a run of them read as one and none at either end (how
    Win32 normalization joins the segments), when its segments need nothing else: no `.` or
    `..`, none ending in a period or a space, nothing a name may not hold, no `~`. Else None.
    "" for no segment at all. A few scans of the text in C."""
    if _NOT_IN_A_NAME.search(rest):
        return None
    text = rest.replace("/", "\\")
    if "\\\\" in text:
        text = _SEPARATOR_RUN.sub("\\\\", text)
    ended = text + "\\"
    if ".\\" in ended or " \\" in ended:  # a segment ending in a period or a space ("." and ".." too)
        return None
    return text.strip("\\")  # (at most one at each end, after the runs were made one)


_SEPARATOR_RUN = re.compile(r"\\{2,}")


def _plain_parts(rest: str) -> list[str] | None:
    """The segments of `rest` when they need no normalization or check but their separators
    (`_plain_text`), else None."""
    text = _plain_text(rest)
    if text is None:
        return None
    return text.split("\\") if text else []


def _plain(rest: str, base: list[str]) -> list[str] | None:
    """`base` and the segments of `rest` when they need no normalization or check, else None."""
    text = _plain_text(rest)
    if text is not None and not _reserved_in(fold(text)):
        return base + (text.split("\\") if text else [])
    return None


def _cwd(cwd: str | None, home: str | None, raw: str, what: str, rooted: bool = False) -> WinPathValue:
    if not cwd:
        if what in ("context.cwd", "the home directory"):  # the base itself: nothing to resolve it against
            raise EvalError(f"{what} {raw!r} is relative: it must be an absolute path")
        raise EvalError(f"{what} {raw!r} is relative and the call has no context.cwd")
    if not is_windows_text(cwd):
        kind = "rooted without a drive" if rooted else "a relative Windows path"
        raise EvalError(f"{what} {raw!r} is {kind} and context.cwd {cwd!r} is not a Windows path")
    return make_windows_path(cwd, None, home, "context.cwd")


def _device(raw: str, what: str, pattern: bool) -> tuple[str, list[str]]:
    """A DOS device path: `\\\\.\\` (normalized) or `\\\\?\\` (verbatim) before a drive or UNC."""
    verbatim = raw.startswith("\\\\?\\")
    if raw.startswith("\\??\\"):
        raise EvalError(f"{what} {raw!r} is an NT object path, not a file path read here")
    rest = raw[4:]
    if verbatim:
        if "/" in rest:
            raise EvalError(f"{what} {raw!r} is a \\\\?\\ path (not normalized by Windows) holding '/', which is not a separator there")
        pieces = rest.split("\\")
    else:
        pieces = _SEPARATORS.split(rest)
    volume = pieces[0]
    if len(volume) == 2 and volume[1] == ":" and volume[0] in _LETTERS:
        drive, below = volume[0].upper() + ":", pieces[1:]
    elif fold(volume) == "UNC" and len(pieces) >= 3 and pieces[1] and pieces[2]:
        drive, below = "\\\\" + pieces[1] + "\\" + pieces[2], pieces[3:]
    else:
        raise EvalError(f"{what} {raw!r} names a device or a volume ({volume!r}), not a drive or a share")
    if verbatim:
        if below and below[-1] == "":
            below = below[:-1]  # `\\?\C:\dir\`: the trailing separator
        for seg in below:
            if seg in ("", ".", "..") or seg.endswith((".", " ")):
                raise EvalError(f"{what} {raw!r} is a \\\\?\\ path that Windows does not normalize, and its segment {seg!r} is not in normal form")
        return drive, _segments(below, [], raw, what, pattern, clamp=False)
    return drive, _segments(below, [], raw, what, pattern, clamp=False)


@lru_cache(maxsize=512)  # glob patterns are literals of the policy: a few, short
def _any_root(pattern: str) -> str:
    """A `/**...` pattern as the POSIX pattern of its folded segments, `.` and `..` resolved,
    nothing else checked."""
    out: list[str] = []
    for piece in _SEPARATORS.split(pattern):
        if piece in ("", "."):
            continue
        if piece == "..":
            if out:
                out.pop()
            continue
        out.append(piece)
    return "/" + "/".join(fold(p) for p in out)


def _segments(pieces: list[str], base: list[str], raw: str, what: str, pattern: bool, clamp: bool) -> list[str]:
    """`base` (normalized segments) extended by `pieces` as Windows normalizes them: `.` dropped,
    `..` removing the segment before (at the root: kept at the root when `clamp`, else an error),
    each name trimmed and checked. Raises EvalError. What a name may not hold, and a reserved
    device name, are first looked for in all the pieces at once: a check that cannot fail is
    not made segment by segment (50,000 segments of 100,000 characters)."""
    out = list(base)
    ends_open = not raw.endswith(("\\", "/"))
    last = len(pieces) - 1
    joined = "\\".join(pieces)
    clean = not pattern and _REFUSED_CHARS.search(joined) is None  # no character a name may not hold, no `:`
    # some segment may name a device. `str.upper` finds every stem `fold` would show (fold is
    # upper but where upper gives several characters, or outside the BMP: never for a letter of
    # a stem) and a few more (`ŉ` is `ʼN`): a false alarm costs `_name`'s own check, in a third
    # of fold's time on a text that is not ASCII
    upper = joined.upper() if not pattern else ""
    reserved = any(stem in upper for stem in _RESERVED_STEMS)
    if clean and not reserved and "~" not in joined:
        # nothing to resolve or trim either (no `..`, no segment ending in a period or a space;
        # empty pieces and `.` dropped): the pieces are the segments, checked in a few scans
        core = list(filter(None, pieces))  # an empty piece (separators in a row) is skipped
        if "." in core:
            core = [piece for piece in core if piece != "."]
        ended = "\\".join(core) + "\\"
        if " \\" not in ended and "..\\" not in ended:  # no name ending in a space or two periods, no `..`
            if ".\\" not in ended:
                return out + core
            # names ending in one period: Windows trims it (the last name loses its trailing
            # periods and spaces, here that one period, as every other name does)
            trimmed = ended.replace(".\\", "\\")
            if " \\" not in trimmed:  # (a name left ending in a space: `_name` says why it is refused)
                return out + trimmed.split("\\")[:-1]
    append = out.append
    for i, piece in enumerate(pieces):
        if piece in ("", "."):
            continue
        if piece == "..":
            if out:
                out.pop()
            elif not clamp:
                raise EvalError(f"{what} {raw!r} climbs above its volume into the device namespace")
            continue
        if pattern:
            append(piece)
            continue
        if clean and not reserved:
            # `_name` written out for what it accepts without a message (`_name` raises the rest):
            # a name as it is, or with one trailing period trimmed when it is not the last
            end = piece[-1]
            if end not in ". ":
                name = piece
            elif end == "." and not (i == last and ends_open):
                name = piece[:-1]
            else:
                name = ""
            if name and name[-1] not in ". " and ("~" not in name or _SHORT_NAME.match(name) is None):
                append(name)
                continue
        append(_name(piece, i == last and ends_open, raw, what, clean, reserved))
    return out


# A segment that needs no trimming and holds nothing refused (no `~`: no short name); only a
# reserved device name of 3 or 4 characters before its first period is left to check.
_ORDINARY = re.compile(r'[^\x00-\x1f<>"|?*:~]*[^\x00-\x1f<>"|?*:~. ]\Z')


def _name(seg: str, final: bool, raw: str, what: str, clean: bool = False, reserved: bool = True) -> str:
    """One segment trimmed as Win32 normalization trims it, then checked. Raises EvalError.
    `clean`: the caller found no character a name may not hold, nor `:`, in any segment (only
    `~` is left to look for here); `reserved`: some segment may be a reserved device name (when
    not, none is looked for here). Each check skipped that way is one that cannot fail."""
    ordinary = (seg[-1] not in ". " and "~" not in seg) if clean else _ORDINARY.match(seg) is not None
    if ordinary:
        if not reserved:
            return seg
        dot = seg.find(".")
        base = (seg if dot < 0 else seg[:dot]).rstrip(" ")
        if not 3 <= len(base) <= 4 or fold(base) not in _RESERVED:
            return seg
    if final:
        name = seg.rstrip(". ")
    else:
        name = seg[:-1] if seg.endswith(".") else seg
        if name.endswith((".", " ")):
            raise EvalError(f"{what} {raw!r} has the segment {seg!r}, whose trailing periods or spaces Windows' reading leaves open")
    if not name or name.strip(". ") == "":
        raise EvalError(f"{what} {raw!r} has the segment {seg!r}, made only of periods and spaces")
    if not clean:
        if ":" in name:
            raise EvalError(f"{what} {raw!r} names an NTFS alternate data stream or holds ':' in {seg!r}")
        bad = _FORBIDDEN.search(name)
        if bad:
            raise EvalError(f"{what} {raw!r} holds {bad.group()!r}, which Windows does not allow in a name")
    if reserved and fold(name.split(".", 1)[0].rstrip(" ")) in _RESERVED:
        raise EvalError(f"{what} {raw!r} names the Windows device {name!r}")
    if "~" in name and _SHORT_NAME.match(name):
        raise EvalError(f"{what} {raw!r} has {name!r}, which may be an 8.3 short name: an alias of a long name that only the file system knows")
    return name
