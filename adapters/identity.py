"""Who decided, for adapters whose reviewer answers inside the host program (a LangChain resume,
an OpenAI Agents approval, a Claude Agent SDK permission callback): the identity comes from
authentication, never from the tool's arguments or a form field (DEVELOPERS.md, "Rules of the
domain").

    who = RosterReviewers(load_roster("team.toml")).who(token)   # a roster token → its name

With the approval service the service authenticates the reviewer's token itself
(adapters.backend.ServiceBackend.decide): this is for a local ledger. A host with its own log-in
passes any callable `token → name` that raises BackendError("unauthenticated") when it does not
know the token.
"""

from __future__ import annotations

from adapters.backend import BackendError

DECIDERS = ("reviewer", "admin")  # roster kinds that may decide (docs/service.md, "Principals")


class RosterReviewers:
    """Resolve a roster token (`countersign roster add NAME --kind reviewer`) to the reviewer's
    name. Raises BackendError `unauthenticated` for an unknown token, `forbidden` for an agent's
    or the service's token (an agent never approves)."""

    def __init__(self, roster):
        self.roster = roster

    def who(self, token: str | None) -> str:
        principal = self.roster.authenticate(token) if isinstance(token, str) and token else None
        if principal is None:
            raise BackendError("unauthenticated", "the decision carries no token the roster lists")
        if principal.kind not in DECIDERS:
            raise BackendError("forbidden", f"{principal.name} is a principal of kind {principal.kind}: only a "
                               "reviewer or an admin decides")
        return principal.name

    __call__ = who
