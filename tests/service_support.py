"""Builders for the approval service's tests: a policy, a roster with tokens and keys, the
service's key, and a Service with its Starlette application (service.app)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.proof.keys import generate_key, write_keypair
from ledger.proof.roster import token_hash
from support import POLICY_TEXT

AGENTS = ("agent-1", "agent-2")
REVIEWERS = ("sup-1", "sup-2", "sup-3", "alice")
ADMIN = "root-admin"
SERVICE = "countersign"


@dataclass
class Setup:
    """The files of one service: `tokens` name → API token."""

    policy: Path
    roster: Path
    key: Path
    ledger: Path
    tokens: dict[str, str]

    def headers(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    def service(self, **kwargs):
        from service.core import Service

        return Service(policy=self.policy, ledger=self.ledger, roster=self.roster, key=self.key, **kwargs)


def setup(tmp: Path, policy_text: str = POLICY_TEXT, agents: tuple[str, ...] = AGENTS) -> Setup:
    """Write a policy, a service key and a roster (`agents`, the reviewers, an admin, the service)."""
    tmp.mkdir(parents=True, exist_ok=True)
    policy = tmp / "test.policy"
    policy.write_text(policy_text)
    key = generate_key("countersign-service")
    key_path, _ = write_keypair(tmp / "service", key)
    tokens = {name: f"cst_test-token-of-{name}" for name in (*agents, *REVIEWERS, ADMIN)}
    entries = []
    for name in agents:
        entries.append((name, "agent", []))
    for name in REVIEWERS:
        entries.append((name, "reviewer", ["supervisors"] if name.startswith("sup") else ["owners"]))
    entries.append((ADMIN, "admin", []))
    lines = []
    for name, kind, groups in entries:
        lines += ["[[principal]]", f'name = "{name}"', f'kind = "{kind}"', f"groups = {groups!r}".replace("'", '"'),
                  f'token_sha256 = ["{token_hash(tokens[name])}"]', ""]
    lines += ["[[principal]]", f'name = "{SERVICE}"', 'kind = "service"', f'keys = ["{key.public.text()}"]', ""]
    roster = tmp / "roster.toml"
    roster.write_text("\n".join(lines))
    return Setup(policy, roster, key_path, tmp / "ledger", tokens)
