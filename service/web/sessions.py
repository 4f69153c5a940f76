"""Server-side sessions of the web inbox: a random id in a cookie, the principal's name, the
SHA-256 of the token it logged in with, and a CSRF token in memory.

    store = Sessions()
    session = store.create("sup-1", token_hash(token))   # after the login form checked a reviewer's token
                                                         # (token_hash: ledger.proof.roster)
    store.get(session.id)                    # None when unknown or idle too long
    store.drop(session.id)                   # log out

The cookie (`countersign_session`) holds only the id: 32 random bytes (secrets.token_urlsafe),
HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it, RFC 6265bis
section 5.4.7), Path=/inbox, and Secure when the request came over https or the service's
--public-url is https (service.web.pages). The CSRF token is a
second random value of the session, put in every form and compared in constant time on every
POST (OWASP's "synchronizer token pattern"). The store is bounded (MAX_SESSIONS; the least
recently used session goes first) and a session idle for IDLE_SECONDS is dropped; a restart
of the service logs everyone out, which is what a reviewer expects of a gate that restarted.
The token's hash lets the inbox end a session whose token the roster no longer lists (rotated or
revoked, then reloaded): service.web.pages checks it on every request.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "countersign_session"
MAX_SESSIONS = 10_000
IDLE_SECONDS = 8 * 3600.0


@dataclass
class Session:
    """One logged-in reviewer: `principal` is a roster name; `token_sha256` the roster's hash of
    the token they logged in with (64 hex digits); `csrf` goes in every form."""

    id: str
    principal: str
    csrf: str
    last_seen: float
    token_sha256: str = ""

    def csrf_ok(self, token: str | None) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token.encode(), self.csrf.encode())


class Sessions:
    """The sessions of one service (thread-safe). `clock`: monotonic seconds (tests pass their own)."""

    def __init__(self, *, max_sessions: int = MAX_SESSIONS, idle_seconds: float = IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.max_sessions, self.idle_seconds, self.clock = max_sessions, idle_seconds, clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_id)

    def create(self, principal: str, token_sha256: str = "") -> Session:
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), now, token_sha256)
        with self._lock:
            self._by_id[session.id] = session
            while len(self._by_id) > self.max_sessions:
                self._by_id.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id or len(session_id) > 100:
            return None
        now = self.clock()
        with self._lock:
            session = self._by_id.get(session_id)
            if session is None:
                return None
            if now - session.last_seen > self.idle_seconds:
                del self._by_id[session_id]
                return None
            session.last_seen = now
            self._by_id.move_to_end(session_id)
            return session

    def drop(self, session_id: str | None) -> None:
        with self._lock:
            self._by_id.pop(session_id or "", None)
