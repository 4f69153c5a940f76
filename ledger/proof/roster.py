"""The roster: who may act on a ledger, and how each one proves it.

A roster is a TOML file (read with `tomllib`) listing principals:

    [[principal]]
    name = "alice"                     # the identity the ledger records (approver, editor, proposer)
    kind = "reviewer"                  # agent | reviewer | admin | service
    groups = ["finance"]               # optional: roster groups (what a policy `group` will name)
    token_sha256 = ["<64 hex>"]        # optional: SHA-256 of each API token, never the token itself
                                       # (none for kind service)
    keys = ["alice+1a2b3c4d+AX…="]     # optional: Ed25519 verifier keys (docs/ledger-format.md 9.2)

`service` is the approval service's own principal: its key attests decisions made in a session it
authenticated (docs/ledger-format.md section 11). It does nothing over HTTP, so a roster that gives
it a `token_sha256` is refused (fail closed: a token for it could only leak). The roster's *digest* is the structural digest
(ledger.digest.value_digest, docs/ledger-format.md section 4) of its canonical content:

    {"format": "countersign-roster/1",
     "principals": [{"name", "kind", "groups", "token_sha256", "keys"}, ...]}

principals ordered by name (code points), each list sorted, keys in their verifier-key text. So
the order of the file, its comments and its spelling do not change the digest; any principal,
group, token or key does.

Errors: `RosterError`, whose message starts with `FILE:LINE:COLUMN:` for a TOML syntax error (as
tomllib reports it), `FILE:LINE:` (the line of the principal's `[[principal]]` header) and the
principal's name for a wrong entry, or `FILE:` alone.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ledger.digest import value_digest
from ledger.proof.keys import MalformedError, PublicKey

ROSTER_FORMAT = "countersign-roster/1"
KINDS = ("agent", "reviewer", "admin", "service")
MAX_ROSTER_BYTES = 4 << 20
TOKEN_PREFIX = "cst_"  # countersign token: so that a leaked one is recognisable in a log or a scan
_MEMBERS = {"name", "kind", "groups", "token_sha256", "keys"}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*principal[ \t]*\]\]")
_TOML_POSITION = re.compile(r"^(.*) \(at line (\d+), column (\d+)\)$", re.S)


class RosterError(ValueError):
    """A roster file that cannot be read or is not a roster; the message says where."""


@dataclass(frozen=True)
class Principal:
    """One entry of a roster. Lists are sorted and hold no duplicate."""

    name: str
    kind: str
    groups: tuple[str, ...] = ()
    token_sha256: tuple[str, ...] = ()
    keys: tuple[PublicKey, ...] = ()

    def canonical(self) -> dict:
        return {"name": self.name, "kind": self.kind, "groups": list(self.groups),
                "token_sha256": list(self.token_sha256), "keys": [k.text() for k in self.keys]}


def token_hash(token: str) -> str:
    """What a roster stores for an API token: SHA-256 of its UTF-8 bytes, 64 lowercase hex digits."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh API token: `cst_` and 43 URL-safe base64 characters (32 random bytes)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class Roster:
    """The principals of a roster file, by name, by key (name and key id) and by group."""

    def __init__(self, principals: list[Principal], source: str = "<roster>"):
        self.source = source
        self.principals: dict[str, Principal] = {p.name: p for p in principals}
        self._keys: dict[tuple[str, str], tuple[Principal, PublicKey]] = {
            (k.name, k.id.hex()): (p, k) for p in principals for k in p.keys}
        ordered = sorted(self.principals.values(), key=lambda p: p.name)
        self.digest = value_digest({"format": ROSTER_FORMAT, "principals": [p.canonical() for p in ordered]})

    def principal(self, name: str) -> Principal | None:
        return self.principals.get(name)

    def key(self, name: str, key_id: str) -> tuple[Principal, PublicKey] | None:
        """The principal holding the key named `name` with the 8-hex `key_id`, and the key."""
        return self._keys.get((name, key_id))

    def group(self, name: str) -> tuple[str, ...]:
        """The names of the principals in a roster group, sorted (empty when there is none)."""
        return tuple(sorted(p.name for p in self.principals.values() if name in p.groups))

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Every roster group → the names of its principals, sorted by code point; groups in
        name order, none empty. What `Policy.load(path, groups=...)` takes to resolve a policy's
        `approvers N from GROUP` naming a group the policy does not define."""
        members: dict[str, list[str]] = {}
        for principal in self.principals.values():
            for group in principal.groups:
                members.setdefault(group, []).append(principal.name)
        return {name: tuple(sorted(members[name])) for name in sorted(members)}

    def authenticate(self, token: str) -> Principal | None:
        """The principal one of whose token hashes is the token's, compared in constant time
        (every stored hash is compared, found or not), or None."""
        wanted = token_hash(token).encode("ascii")
        found = None
        for principal in self.principals.values():
            for stored in principal.token_sha256:
                if hmac.compare_digest(wanted, stored.encode("ascii")):
                    found = principal
        return found


def load_roster(path: str | Path) -> Roster:
    """Read and check a roster file. Raises RosterError."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_ROSTER_BYTES + 1)
    except OSError as exc:
        raise RosterError(f"{source}: cannot read the roster: {exc.strerror or exc}") from None
    if len(data) > MAX_ROSTER_BYTES:
        raise RosterError(f"{source}: the roster is larger than {MAX_ROSTER_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RosterError(f"{source}: the roster is not UTF-8 (byte {exc.start})") from None
    return parse_roster(text, source)


def parse_roster(text: str, source: str = "<roster>") -> Roster:
    """A roster from its TOML text; `source` names it in errors. Raises RosterError."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_POSITION.match(str(exc))
        if found:
            raise RosterError(f"{source}:{found.group(2)}:{found.group(3)}: {found.group(1)}") from None
        raise RosterError(f"{source}: {exc}") from None
    extra = sorted(set(document) - {"principal", "format"})
    if extra:
        raise RosterError(f"{source}: unknown top-level entries {', '.join(extra)} (a roster holds [[principal]] tables)")
    if document.get("format", ROSTER_FORMAT) != ROSTER_FORMAT:
        raise RosterError(f"{source}: format {document['format']!r} is not {ROSTER_FORMAT!r}")
    entries = document.get("principal", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RosterError(f"{source}: `principal` must be an array of tables ([[principal]])")
    headers = [n for n, line in enumerate(text.splitlines(), 1) if _HEADER.match(line)]
    lines = headers if len(headers) == len(entries) else None  # inline arrays: no line to give
    principals: list[Principal] = []
    seen_keys: dict[tuple[str, str], str] = {}
    seen_tokens: dict[str, str] = {}
    for index, entry in enumerate(entries):
        where = f"{source}:{lines[index]}" if lines else source
        principal = _principal(entry, where, index)
        if any(p.name == principal.name for p in principals):
            raise RosterError(f"{where}: principal {principal.name!r} is listed twice")
        for key in principal.keys:
            other = seen_keys.setdefault((key.name, key.id.hex()), principal.name)
            if other != principal.name:
                raise RosterError(f"{where}: principal {principal.name!r}: the key {key.name}+{key.id.hex()} is also {other!r}'s")
        for digest in principal.token_sha256:
            other = seen_tokens.setdefault(digest, principal.name)
            if other != principal.name:
                raise RosterError(f"{where}: principal {principal.name!r}: a token hash is also {other!r}'s")
        principals.append(principal)
    return Roster(principals, source)


def _principal(entry: dict, where: str, index: int) -> Principal:
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip() or any(ord(c) < 0x20 or c == "\x7f" for c in name):
        raise RosterError(f"{where}: principal number {index + 1} needs a `name`: non-empty text on one line")
    said = f"{where}: principal {name!r}"
    unknown = sorted(set(entry) - _MEMBERS)
    if unknown:
        raise RosterError(f"{said}: unknown entries {', '.join(unknown)} (allowed: {', '.join(sorted(_MEMBERS))})")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise RosterError(f"{said}: `kind` must be one of {', '.join(KINDS)}, not {kind!r}")

    def texts(member: str) -> list[str]:
        value = entry.get(member, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RosterError(f"{said}: `{member}` must be a list of strings")
        if len(set(value)) != len(value):
            raise RosterError(f"{said}: `{member}` lists the same value twice")
        return value

    groups = texts("groups")
    if any(not g.strip() for g in groups):
        raise RosterError(f"{said}: a group name is empty")
    tokens = texts("token_sha256")
    for digest in tokens:
        if not _HEX64.fullmatch(digest):
            shown = digest if len(digest) <= 12 else digest[:8] + "…"
            raise RosterError(f"{said}: token_sha256 {shown!r} is not 64 lowercase hex digits (SHA-256 of the token; "
                              "`countersign roster token NAME` makes one; never put a token itself in a roster)")
    if tokens and kind == "service":  # the service's principal does nothing over HTTP: a token would only leak
        raise RosterError(f"{said}: a principal of kind \"service\" takes no token_sha256 (the service's own "
                          "principal signs with its key and does nothing over HTTP); remove the line")
    keys = []
    for text in texts("keys"):
        try:
            keys.append(PublicKey.parse(text))
        except MalformedError as exc:
            raise RosterError(f"{said}: {exc}: {text[:40]!r}") from None
    return Principal(name, kind, tuple(sorted(groups)), tuple(sorted(tokens)), tuple(sorted(keys, key=PublicKey.text)))


def _toml_text(value: str) -> str:
    """A TOML basic string holding `value` (TOML 1.0, section "String": escapes)."""
    out = []
    for c in value:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or c == "\x7f":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def entry_text(principal: Principal) -> str:
    """A `[[principal]]` table for `principal`, as TOML text (ending in a blank line)."""
    def texts(values) -> str:
        return "[" + ", ".join(_toml_text(v) for v in values) + "]"

    lines = ["[[principal]]", f"name = {_toml_text(principal.name)}", f"kind = {_toml_text(principal.kind)}"]
    if principal.groups:
        lines.append(f"groups = {texts(principal.groups)}")
    if principal.token_sha256:
        lines.append(f"token_sha256 = {texts(principal.token_sha256)}")
    if principal.keys:
        lines.append(f"keys = {texts(k.text() for k in principal.keys)}")
    return "\n".join(lines) + "\n\n"


def add_principal(path: str | Path, principal: Principal) -> Roster:
    """Append `principal` to the roster file at `path` (created when missing), after checking
    that the result is a valid roster (a name, key or token listed twice is refused). Returns
    the new roster. Raises RosterError; the file is unchanged then."""
    path = Path(path)
    old = ""
    if path.exists():
        load_roster(path)  # a roster that does not read is not extended
        old = path.read_text(encoding="utf-8")
        if old and not old.endswith("\n"):
            old += "\n"
        if old and not old.endswith("\n\n"):
            old += "\n"
    text = old + entry_text(principal)
    roster = parse_roster(text, str(path))
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
    return roster
