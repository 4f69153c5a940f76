"""Field paths into the data stored beside an event: `args.card_number`, `args.items[0].cc`,
`context.cwd`, `args["content-type"]`. A path is written as text in `redacted` events and used as a
tuple of keys (str) and list indexes (int) in code (docs/ledger-format.md, "Redaction")."""

from __future__ import annotations

import json
import re
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(0|[1-9][0-9]*)\]|\[("(?:[^"\\]|\\.)*")\]')


_ESCAPE = r'\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f])'  # json.dumps's escapes (ensure_ascii=False)
_CHAR = r'(?:[^"\\\x00-\x1f]|' + _ESCAPE + ")"
_NOT_NAME_START = r'(?:[^A-Za-z_"\\\x00-\x1f]|' + _ESCAPE + ")"
_NOT_NAME_CHAR = r'(?:[^A-Za-z0-9_"\\\x00-\x1f]|' + _ESCAPE + ")"
# A quoted key is used only for a key that is not an identifier: empty, not starting like one,
# or an identifier's start followed by a character no identifier has.
_QUOTED = r'\["(?:|' + _NOT_NAME_START + _CHAR + "*|[A-Za-z_][A-Za-z0-9_]*" + _NOT_NAME_CHAR + _CHAR + r'*)"\]'
CANONICAL_PATTERN = r"^(?:args|context)(?:\.[A-Za-z_][A-Za-z0-9_]*|\[(?:0|[1-9][0-9]*)\]|" + _QUOTED + r")+\Z"
"""A regular expression (Python `re`, one RE2 can also run) matched by exactly the field paths in
their canonical spelling: the texts `t` with `format_field_path(parse_field_path(t)) == t`."""


class FieldPathError(ValueError):
    """The text is not a field path."""


def parse_field_path(text: str) -> tuple[str | int, ...]:
    """The keys of a field path: `args.items[0].cc` → ("args", "items", 0, "cc"). The root is
    `args` or `context`, followed by at least one step: `.name` (an identifier), `[n]` (a list
    index, 0 or more, no leading zeros) or `["any key"]` (a JSON string). Raises FieldPathError."""
    if not isinstance(text, str):
        raise FieldPathError("a field path is text")
    root = re.match(r"(args|context)(?![A-Za-z0-9_])", text)
    if not root:
        raise FieldPathError(f"a field path starts with args or context, not {text!r}")
    parts: list[str | int] = [root.group(1)]
    pos = root.end()
    while pos < len(text):
        m = _STEP.match(text, pos)
        if not m:
            raise FieldPathError(f'{text!r} is not a field path (args.a.b, args.items[0], args["a b"])')
        name, index, quoted = m.groups()
        if name is not None:
            parts.append(name)
        elif index is not None:
            try:
                parts.append(int(index))
            except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
                raise FieldPathError(f"a list index of {len(index)} digits is too large for a field path") from None
        else:
            try:
                key = json.loads(quoted)
            except json.JSONDecodeError:
                raise FieldPathError(f"{quoted} is not a JSON string") from None
            parts.append(key)
        pos = m.end()
    if len(parts) < 2:
        raise FieldPathError("name a field inside args or context, not the whole object")
    return tuple(parts)


def format_field_path(parts: tuple[str | int, ...]) -> str:
    """The one canonical spelling of a field path, as `redacted` events record it: `.name` where
    the key is an identifier, `["key"]` (JSON, non-ASCII kept) otherwise, `[n]` for indexes."""
    out = str(parts[0])
    for part in parts[1:]:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.fullmatch(part):
            out += f".{part}"
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return out


def resolve(data: Any, parts: tuple[str | int, ...]) -> Any:
    """The value at `parts` inside `data` (decoded JSON). Raises KeyError when there is none: a
    key of a non-object, an index of a non-list, a missing key, an index out of range."""
    node = data
    for part in parts:
        if isinstance(part, int):
            if type(node) is not list or not 0 <= part < len(node):
                raise KeyError(part)
        elif type(node) is not dict or part not in node:
            raise KeyError(part)
        node = node[part]
    return node


def replace(data: Any, parts: tuple[str | int, ...], value: Any) -> Any:
    """A copy of `data` with the value at `parts` (which must exist) replaced by `value`; the
    order of object members is kept."""
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(data, list):
        copy = list(data)
        copy[head] = replace(copy[head], rest, value)
        return copy
    return {k: (replace(v, rest, value) if k == head else v) for k, v in data.items()}
