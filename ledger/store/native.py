"""The compiled module (ledger/_native.c): the writer's sealer and the verifier's fast path.

This module only says whether the build is usable and hands out its functions; the fast verifier
that drives it lives in the proof layer (ledger/proof/fast.py).

The fast verifier, `ledger.proof.fast.verify_fast(path)`, checks a whole ledger with the C module and returns the same Report as
`ledger.proof.verify.verify` would, or None when it declines. It declines whenever the ledger is not
plainly intact and lawful, or holds anything it leaves to the reference verifier: a problem of
any kind (the reference then finds it and words it), a torn tail, a `recovered`, `redacted` or
`roster` event (it reads `policy` events; the data of one that pins its policy is checked by the driver, ledger/proof/fast.py, with the reference's own check), a decision with a `signature`, a float or an escaped object key in the arguments, nesting deeper than 64 levels, an
integer of more than 18 digits in a body or 300 in the arguments, more than 64 quorums or 1,024
named approvers in one requirements object, an expected head that is not 64 lowercase hex digits,
a line longer than ledger.store.lines.MAX_LINE_BYTES (declined as soon as that many bytes hold no line
feed: its buffer never grows past the limit, and the reference verifier reads such a line in
bounded chunks).
So it never accepts what the reference would reject: what it accepts it checks
completely (docs/ledger-format.md, section 6, with the workflow rules), and everything else is
the reference's to judge. tests/test_verify_native.py holds the two to that, on lawful and on
tampered ledgers.

The module is optional: it is built by hatch_build.py when a C compiler and OpenSSL's headers
are there, and a build of another source than the ledger/_native.c beside it is not used.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

try:
    from ledger import _native
except ImportError:  # not built: no compiler, COUNTERSIGN_NO_NATIVE, or a wheel without it
    _native = None


def _current() -> bool:
    """Whether the built module is the build of the source beside it (a checkout), or the source
    is absent (an installed wheel)."""
    if _native is None:
        return False
    source = Path(__file__).with_name("_native.c")
    try:
        return hashlib.sha256(source.read_bytes()).hexdigest() == _native.SOURCE_SHA256
    except FileNotFoundError:
        return True


_USABLE = _current() and os.environ.get("COUNTERSIGN_VERIFY") != "python"


def sealer():
    """`seal(body: bytes, data: bytes) -> (hash, line) | None` of the compiled module, or None
    when it is not usable. For a body in the module's grammar (the stricter one: then
    ledger.events.decode_event accepts it too) it returns the body's SHA-256 (hex) and the whole
    line with its line feed; None only says the caller must check the body with decode_event and
    compose the line itself. The writer uses it to skip that decode, about half its time per
    event."""
    return _native.seal if _USABLE else None


def available() -> bool:
    """Whether the compiled verifier is built, current and not switched off
    (COUNTERSIGN_VERIFY=python)."""
    return _USABLE


def module():
    """The compiled module when it is usable (`available()`), else None."""
    return _native if _USABLE else None
