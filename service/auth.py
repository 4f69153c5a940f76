"""Who is calling: the roster principal of an API token.

An agent or a script sends `Authorization: Bearer <token>`; the roster (ledger.proof.roster)
stores only each token's SHA-256, compared in constant time. The identity recorded in the ledger
(proposer, approver, editor) is the principal's name, never a field of the request (issue 11,
section 2). Web sessions (service.web) log in with the same token and keep the principal's name
in a signed cookie.
"""

from __future__ import annotations

from ledger.proof.roster import Principal, Roster
from service.errors import FORBIDDEN, UNAUTHENTICATED, ApiError

MAX_TOKEN_CHARS = 512  # a roster token is 47 characters; anything far longer is not one


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
    """The principal of the request's bearer token. Raises ApiError 401 `unauthenticated`."""
    token = bearer_token(header)
    principal = roster.authenticate(token) if token is not None else None
    if principal is None:
        raise ApiError(401, UNAUTHENTICATED, "send `Authorization: Bearer TOKEN` with a token the roster lists "
                       "(`countersign roster token NAME` makes one)")
    return principal


def require(principal: Principal, *kinds: str) -> Principal:
    """`principal`, when its kind is one of `kinds`. Raises ApiError 403 `forbidden`."""
    if principal.kind not in kinds:
        raise ApiError(403, FORBIDDEN, f"{principal.name} is a {principal.kind}; this needs a{'n' if kinds[0][0] in 'aeiou' else ''} "
                       + " or ".join(kinds))
    return principal
