"""Strict JSON input from users (arguments and contexts on the command line, calls files, policy
cases files, proofs): no duplicate keys, no NaN or Infinity, no number too large for a
double (Python's json module would read 1e400 as infinity).

A duplicate key is refused rather than resolved: if the policy saw one value and the tool the
other, an approval would not bind to what runs. Python's json module is used because it can see
duplicates (msgspec keeps the last value silently).
"""

from __future__ import annotations

import json
from typing import Any


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r} (which value counts would be ambiguous)")
        seen.add(key)
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a number (an IEEE 754 double)")
    return value


def strict_decoder(parse_int: Any = None) -> json.JSONDecoder:
    """A json.JSONDecoder with these rules (its `raw_decode` reads a value inside longer text);
    `parse_int` as json's, to bound integers. Raises ValueError for what the rules refuse."""
    return json.JSONDecoder(
        object_pairs_hook=_no_duplicates, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=parse_int
    )


STRICT = strict_decoder()


def json_kind(value: Any) -> str:
    """'an object', 'a list', 'a string', 'a boolean', 'null' or 'a number'."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def escape_hint(exc: json.JSONDecodeError) -> str:
    """What to do about a JSON error, when there is more to say than its message: a backslash
    that starts no escape is most often a Windows path's (RFC 8259, section 7)."""
    if exc.msg.startswith("Invalid \\escape"):
        return "; in a JSON string a backslash starts an escape: write a Windows path's as \\\\ (\"C:\\\\Users\\\\me\")"
    return ""


def parse_json(text: str, what: str) -> Any:
    """Parse strict JSON. Raises ValueError naming `what` and the column of the problem."""
    try:
        return STRICT.decode(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}{escape_hint(exc)}") from None
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None


def parse_json_object(text: str, what: str) -> dict:
    """Parse strict JSON that must be an object. Raises ValueError."""
    value = parse_json(text, what)
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, not {json_kind(value)}")
    return value
