"""Digests of tool-call arguments, and their canonical JSON form.

An approval binds to `args_digest(arguments)`. The digest is *structural* (in the spirit of Ben
Laurie's objecthash and Amazon Ion's hash): every value is hashed from the digests of its parts,
not from one serialization. That buys two things:

* it depends only on the JSON value, never on key order, whitespace or escaping; and
* a value inside the arguments can later be replaced by its own digest (redaction of personal
  data) and the arguments' digest, which the hash chain covers, can still be recomputed.

The definition, byte-exact, is in docs/ledger-format.md ("Argument digests"); in short, with
H = SHA-256 and `||` concatenation:

    D(null)   = H("n")                 D(true) = H("b1")      D(false) = H("b0")
    D(number) = H("d" || canonical decimal text)
    D(string) = H("s" || UTF-8 bytes)
    D(list)   = H("l" || D(item1) || D(item2) || ...)
    D(object) = H("o" || D(key1) || D(value1) || ...)   keys in ascending order of their UTF-8 bytes

Arguments are stored beside the chained bytes as canonical JSON (`canonical_json`): keys sorted,
no whitespace, UTF-8, produced by msgspec.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import msgspec

_NULL = hashlib.sha256(b"n").digest()
_TRUE = hashlib.sha256(b"b1").digest()
_FALSE = hashlib.sha256(b"b0").digest()

_encoder = msgspec.json.Encoder(order="sorted")


MAX_NESTING = 100
"""How deeply the arguments or context of a call may nest: an object or list inside another is one
level more (`{"a": [1]}` is two levels). A writer refuses deeper values, so every reader of a
lawful ledger (verify, the views, the projection) reads its values without running out of stack."""


MAX_NUMBER_TEXT = 4300
"""The longest integer text, sign included, that every reader reads: Python writes no more than
4,300 digits, and msgspec reads no more than 4,300 characters (so not a negative 4,300-digit one)."""


class ArgumentsError(ValueError):
    """The arguments are not a JSON value (NaN, infinity, a non-string key, an unknown type, an
    integer too long to write, or nesting deeper than MAX_NESTING)."""


def number_text(value: int | float) -> str:
    """The canonical decimal text of a JSON number.

    Integers, and floats with an integral value, are written as exact integers (`1.0` → `1`,
    `1e3` → `1000`, `-0.0` → `0`). Other floats are written as Python's `repr`: the shortest digits
    that round-trip, in exponent form (`1.5e-07`) below 1e-4. Raises ArgumentsError for NaN and
    infinities, which JSON cannot carry.
    """
    if isinstance(value, bool):
        raise ArgumentsError("a boolean is not a number")
    if isinstance(value, int):
        try:
            text = str(value)
        except ValueError:  # Python refuses to write an integer of more than 4,300 digits
            raise ArgumentsError("an integer of more than 4,300 digits cannot be written") from None
        if len(text) > MAX_NUMBER_TEXT:  # a negative one of 4,300 digits: msgspec cannot read it back
            raise ArgumentsError(f"an integer written in more than {MAX_NUMBER_TEXT:,} characters cannot be read back")
        return text
    if not math.isfinite(value):
        raise ArgumentsError(f"{value!r} is not a JSON number")
    if value.is_integer():
        return str(int(value))
    return repr(value)


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ArgumentsError("a string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text") from None


def _digest(value: Any) -> bytes:
    if value is None:
        return _NULL
    t = type(value)
    if t is bool:
        return _TRUE if value else _FALSE
    if t is str:
        return hashlib.sha256(b"s" + _utf8(value)).digest()
    if t is int or t is float:
        return hashlib.sha256(b"d" + number_text(value).encode("ascii")).digest()
    if t is list or t is tuple:
        h = hashlib.sha256(b"l")
        for item in value:
            h.update(_digest(item))
        return h.digest()
    if t is dict:
        h = hashlib.sha256(b"o")
        items = []
        for key, item in value.items():
            if type(key) is not str:
                raise ArgumentsError(f"object keys must be strings, not {type(key).__name__}")
            items.append((_utf8(key), key, item))
        items.sort(key=lambda entry: entry[0])
        for encoded, key, item in items:
            h.update(hashlib.sha256(b"s" + encoded).digest())
            h.update(_digest(item))
        return h.digest()
    # Subclasses (an IntEnum, an OrderedDict) are hashed as the JSON value they stand for.
    for base in (bool, str, int, float, list, tuple, dict):
        if isinstance(value, base):
            return _digest(base(value))
    raise ArgumentsError(f"{type(value).__name__} is not a JSON value")


def value_digest(value: Any) -> str:
    """The structural digest of any JSON value, as 64 lowercase hex digits."""
    try:
        return _digest(value).hex()
    except RecursionError:
        raise ArgumentsError("the value is nested too deeply") from None


def args_digest(args: dict) -> str:
    """The digest an approval binds to: `value_digest` of the arguments object (hex)."""
    if not isinstance(args, dict):
        raise ArgumentsError(f"the arguments must be a JSON object, not {type(args).__name__}")
    return value_digest(args)


def check_nesting(value: Any, limit: int = MAX_NESTING) -> None:
    """Raise ArgumentsError when objects and lists nest more than `limit` levels deep in `value`.
    Iterative, so that it answers for any depth without recursing."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, (list, tuple)) else None
        if children is None:
            continue
        if depth > limit:
            raise ArgumentsError(f"the value nests more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))


def canonical_json(value: Any) -> bytes:
    """Compact JSON with object keys sorted, as stored in the ledger. Raises ArgumentsError for
    values JSON cannot carry."""
    return encode_arguments(value)[1]


def canonical_spelling(value: Any) -> bytes:
    """The canonical JSON bytes of an already-validated value (no checks; see canonical_json)."""
    return _encoder.encode(value)


def encode_arguments(args: Any) -> tuple[str, bytes]:
    """`(value_digest(args), canonical_json(args))` in one pass of validation.

    The digest is computed first because it rejects what msgspec would otherwise encode lossily
    (NaN becomes null). Raises ArgumentsError.
    """
    check_nesting(args)
    digest = value_digest(args)
    try:
        return digest, _encoder.encode(args)
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        raise ArgumentsError(str(exc)) from None


# --- redaction --------------------------------------------------------------------------------

REDACTED = "$redacted"  # the member of the marker object that stands for a redacted value


def redaction_marker(digest: str) -> dict:
    """The object that replaces a redacted value: `{"$redacted": "<hex digest of the value>"}`."""
    return {REDACTED: digest}


def is_marker(value: Any, digest: str) -> bool:
    return type(value) is dict and len(value) == 1 and value.get(REDACTED) == digest


def redacted_digest(value: Any, redactions: dict[tuple, str], path: tuple = ()) -> str:
    """`value_digest`, except that at each `path` listed in `redactions` (tuples of keys and list
    indexes, below `path`), a marker `{"$redacted": d}` with `d` the listed digest counts as the
    value it replaced, whose digest was `d`. Anywhere else a marker is an ordinary object. This is
    what lets a value be removed while the digest of the whole, which the hash chain covers, can
    still be recomputed (docs/ledger-format.md, "Redaction")."""

    def walk(node: Any, here: tuple) -> bytes:
        listed = redactions.get(here)
        if listed is not None and is_marker(node, listed):
            return bytes.fromhex(listed)
        if type(node) is dict:
            h = hashlib.sha256(b"o")
            items = sorted(((_utf8(k), k) for k in node), key=lambda entry: entry[0])
            for encoded, key in items:
                h.update(hashlib.sha256(b"s" + encoded).digest())
                h.update(walk(node[key], here + (key,)))
            return h.digest()
        if type(node) is list:
            h = hashlib.sha256(b"l")
            for i, item in enumerate(node):
                h.update(walk(item, here + (i,)))
            return h.digest()
        return _digest(node)

    return walk(value, path).hex()
