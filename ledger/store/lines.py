"""One ledger line: the chained body bytes, their hash, and the unchained data beside them.

    {"body":<BODY>,"hash":"<64 lowercase hex>","data":<DATA>}\\n

`BODY` is the event as msgspec encoded it; the hash is SHA-256 over exactly those bytes. `DATA`
is `null` or a canonical JSON object holding the call's `args` and `context`, whose digests are
inside BODY. The body starts at byte 8 and ends just before the first occurrence of the bytes
`,"hash":"`: no member of an event is named `hash`, and a quote inside a JSON string is always
escaped, so that sequence cannot occur inside BODY. docs/ledger-format.md is the full definition.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = b'{"body":'
HASH_MARK = b',"hash":"'
DATA_MARK = b'","data":'
SUFFIX = b"}"
_HEX64 = re.compile(rb"[0-9a-f]{64}")

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest a line may be, in bytes, its line feed not counted (docs/ledger-format.md,
section 2): 16 MiB. Events carry the tool's arguments (a Write's whole file content), so the
limit is generous; it exists so that every reader can refuse a longer line, torn or forged,
after reading at most this much of it, instead of holding it whole."""

OVERHEAD = len(PREFIX) + len(HASH_MARK) + 64 + len(DATA_MARK) + len(SUFFIX)
"""The bytes of a line beside BODY and DATA (91): the line is exactly this plus both."""


def too_long(size: int) -> str:
    """The words every reader uses for a line of `size` bytes over MAX_LINE_BYTES."""
    return f"the line is {size:,} bytes long, over the limit of {MAX_LINE_BYTES:,} bytes (docs/ledger-format.md, section 2)"


class LineError(ValueError):
    """A line does not have the ledger's layout."""


def compose(body: bytes, data: bytes | None) -> tuple[str, bytes]:
    """`(hash, line)` for body bytes and optional data bytes; the line ends with a newline."""
    digest = hashlib.sha256(body).hexdigest()
    line = b"".join((PREFIX, body, HASH_MARK, digest.encode("ascii"), DATA_MARK, data if data is not None else b"null", SUFFIX, b"\n"))
    return digest, line


def split(line: bytes) -> tuple[bytes, str, bytes]:
    """`(body, hash, data)` of one line (with or without its newline). Raises LineError.

    Only the layout is checked here; whether the body is a valid event, the hash matches and the
    data is valid JSON are the reader's and the verifier's business.
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    if not line.startswith(PREFIX):
        raise LineError('the line does not start with {"body":')
    cut = line.find(HASH_MARK, len(PREFIX))
    if cut < 0:
        raise LineError('the line has no ,"hash":" after the body')
    body = line[len(PREFIX) : cut]
    start = cut + len(HASH_MARK)
    digest = line[start : start + 64]
    if not _HEX64.fullmatch(digest):
        raise LineError("the hash is not 64 lowercase hex digits")
    rest = line[start + 64 :]
    if not rest.startswith(DATA_MARK):
        raise LineError('the hash is not followed by ,"data":')
    if not rest.endswith(SUFFIX):
        raise LineError("the line does not end with }")
    return body, digest.decode("ascii"), rest[len(DATA_MARK) : -len(SUFFIX)]
