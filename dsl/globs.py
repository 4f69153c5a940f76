"""Wildcard patterns compiled to regular expressions that match in time linear in the text.

A wildcard pattern `P0*P1*...*Pk` is a list of pieces separated by stars; each piece is a run of
fixed-width atoms (a literal character, `?`, or for `glob` a `[...]` class), so a piece always
matches exactly `len(Pi)` characters. The classic greedy wildcard algorithm decides such a pattern
in one left-to-right pass: `P0` must match at the start, `Pk` at the end, and each middle piece
is matched at its *leftmost* position after the previous one. Taking the leftmost occurrence is
never wrong: any match that places `Pi` further right leaves no more room to the pieces after it
(Knuth, "The Art of Computer Programming" vol. 3, on pattern matching with gaps; it is also the
two-pointer algorithm of `fnmatch`-style matchers and of Python's own `fnmatch.translate` since
3.9, bpo-40480).

Here each middle piece is written `(?>STAR*?Pi)`: the lazy star tries the positions left to
right and the atomic group (Python 3.11 regular expressions) commits to the first that matches,
so the engine never returns to move it. Each attempt reads at most `len(Pi)` characters, hence a
match costs O(n * m) steps for a text of n characters and a pattern of m, with m fixed by the
policy: linear in the input. The last piece is `STAR*Pk` before the end anchor: the greedy star
gives back at most n characters, each tried against `Pk` once (O(n * m) again).

Path patterns apply the same algorithm twice: within a segment for `*` and `?` (which never
cross a `/`), and at the level of segments for `**` (any number of whole segments): the pattern's
segments are split at each `**` into groups of a fixed number of segments, the first group is
anchored at the start, the last at the end, and each middle group is taken at its leftmost place
(`(?>(?:/[^/]++)*?G)`). Every segment is itself an atomic group ending at a `/` or the end, so a
segment once read is never read again by the same attempt. Cost: O(n * m) for a path of n
characters and a pattern of m.

`tests/test_linear_time.py` checks the bound (time at n over time at n/10) on adversarial texts,
and that these regexes decide as the plain backtracking translations they replace.
"""

from __future__ import annotations

import re

_SEGMENT_STAR, _SEGMENT_ONE = "[^/]*", "[^/]"


def _piece(text: str, one: str) -> str:
    """A fixed-width piece: `?` is `one`, every other character itself."""
    return "".join(one if ch == "?" else re.escape(ch) for ch in text)


def _wildcard(pieces: list[str], star: str) -> str:
    """`P0*P1*...*Pk` (pieces already written as regexes) without the end anchor the caller adds."""
    if len(pieces) == 1:
        return pieces[0]
    middle = "".join(f"(?>{star}?{p})" for p in pieces[1:-1] if p)
    return pieces[0] + middle + star + pieces[-1]


def selector_source(pattern: str) -> str:
    """The regex (for `re.match`) of a tool selector: `*` any run of characters, `?` one, every
    other character itself (brackets too). O(n * m) per match, see the module docstring."""
    return "(?s:" + _wildcard([_piece(p, ".") for p in pattern.split("*")], ".*") + r")\Z"


def segment_source(pattern: str) -> str:
    """The regex of one path segment's pattern (`*` and `?` within the segment), read to the
    segment's end (a `/` or the end of the text) inside an atomic group."""
    body = _wildcard([_piece(p, _SEGMENT_ONE) for p in pattern.split("*")], _SEGMENT_STAR)
    return f"(?>{body}(?![^/]))"


def path_source(segments: tuple[str, ...]) -> str:
    """The regex (for `re.match`) over a normalized path's text ("" for the root, else "/a/b")
    of a path pattern's segments: `**` any number of whole segments (none included), `*` and `?`
    within a segment. O(n * m) per match, see the module docstring."""
    groups: list[list[str]] = [[]]
    for seg in segments:
        if seg == "**":
            groups.append([])
        else:
            groups[-1].append("/" + segment_source(seg))
    if len(groups) == 1:
        return "".join(groups[0]) + r"\Z"
    first, middle, last = groups[0], groups[1:-1], groups[-1]
    out = "".join(first)
    for group in middle:
        if group:  # `**/**` is one `**`
            out += "(?>(?:/[^/]++)*?" + "".join(group) + ")"
    if last:
        return out + "(?:/[^/]++)*?" + "".join(last) + r"\Z"
    return out + r"(?:/[^/]++)*+\Z"


def selector_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(selector_source(pattern))


def path_regex(segments: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(path_source(segments), re.DOTALL)
