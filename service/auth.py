"""Who is calling: the roster principal of an API token.

An agent or a script sends `Authorization: Bearer <token>`; the roster (ledger.proof.roster)
stores only each token's SHA-256, compared in constant time. The identity recorded in the ledger
(proposer, approver, editor) is the principal's name, never a field of the request (issue 11,
section 2). Web sessions (service.web) log in with the same token and keep the principal's name
in a signed cookie.
"""

from __future__ import annotations

import hashlib

from ledger.proof.roster import Principal, Roster
from service.errors import FORBIDDEN, UNAUTHENTICATED, ApiError

MAX_TOKEN_CHARS = 512  # a roster token is 47 characters; anything far longer is not one
KNOWN_TOKENS = 1024
"""Tokens already authenticated, remembered per roster (by their SHA-256: about 200 bytes an
entry, so at most about 200 KB): an agent sends its token with every call, and the roster's
check compares it with every stored hash."""


class _Known:
    """SHA-256 of a token → its principal, for tokens the roster accepted, for one Roster object
    (a reload makes a new one, and the memory starts again). Only accepted tokens are kept, so a
    miss — an unknown token among them — still goes through the roster's constant-time check of
    every hash; a hit is found by the token's digest, which tells a caller timing it nothing
    about the stored hashes. Used from the server's event loop thread (dict operations are
    atomic under the GIL in any case)."""

    def __init__(self) -> None:
        self.roster: Roster | None = None
        self.principals: dict[bytes, Principal] = {}

    def authenticate(self, roster: Roster, token: str) -> Principal | None:
        if roster is not self.roster:
            self.roster, self.principals = roster, {}
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        found = self.principals.get(digest)
        if found is None:
            found = roster.authenticate(token)
            if found is not None:
                if len(self.principals) >= KNOWN_TOKENS:
                    self.principals.clear()
                self.principals[digest] = found
        return found


_known = _Known()


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header (RFC 6750, section 2.1), or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_CHARS:
        return None
    return token


def authenticate(roster: Roster, header: str | None) -> Principal:
    """The principal of the request's bearer token. Raises ApiError 401 `unauthenticated`, and
    403 `forbidden` for the service's own principal (kind `service`: it does nothing over HTTP,
    docs/service.md; load_roster refuses a token for it, and this holds even so)."""
    token = bearer_token(header)
    principal = _known.authenticate(roster, token) if token is not None else None
    if principal is None:
        raise ApiError(401, UNAUTHENTICATED, "send `Authorization: Bearer TOKEN` with a token the roster lists "
                       "(`countersign roster token NAME` makes one)")
    if principal.kind == "service":
        raise ApiError(403, FORBIDDEN, f"{principal.name} is the service's own principal (kind service): it signs the "
                       "decisions the service records and does nothing over HTTP; give it no token")
    return principal


def require(principal: Principal, *kinds: str) -> Principal:
    """`principal`, when its kind is one of `kinds`. Raises ApiError 403 `forbidden`."""
    if principal.kind not in kinds:
        raise ApiError(403, FORBIDDEN, f"{principal.name} is a {principal.kind}; this needs a{'n' if kinds[0][0] in 'aeiou' else ''} "
                       + " or ".join(kinds))
    return principal
