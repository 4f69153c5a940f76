"""Where credentials live: `PathValue.secret`, one list for every rule about reading files.

Each entry is a run of path segments (lower case; `*` and `?` within one segment, as in a path
pattern). A DIRECTORY entry makes the directory and everything below it secret wherever the run
of segments occurs in the path; a FILE entry matches the path's last segments. Paths are compared
in lower case, so `~/.SSH/ID_RSA` (a case-insensitive file system) is caught too. The cost is
linear in the number of segments (each entry is tried at each position; segments are short).

The sources, per entry: the documentation of the tool that writes the file.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

DIRECTORIES: tuple[tuple[str, ...], ...] = (
    (".ssh",),                      # OpenSSH: private keys, ssh(1) FILES
    (".gnupg",),                    # GnuPG private keys
    (".aws",),                      # AWS CLI: credentials, config (Configuration and credential file settings)
    (".azure",),                    # Azure CLI access tokens
    (".config", "gcloud"),          # Google Cloud SDK credentials
    (".config", "gh"),              # GitHub CLI: hosts.yml holds the OAuth token
    (".config", "op"),              # 1Password CLI
    (".kube",),                     # kubectl: kubeconfig with tokens and client keys
    (".docker",),                   # docker login: config.json "auths"
    (".password-store",),           # pass(1)
    (".terraform.d",),              # Terraform: credentials.tfrc.json
    (".local", "share", "keyrings"),  # GNOME keyring
    ("library", "keychains"),       # macOS keychains
)

FILES: tuple[tuple[str, ...], ...] = (
    (".env",), (".env.*",), (".envrc",),  # dotenv and direnv files of a project
    ("*.pem",), ("*.key",), ("*.p12",), ("*.pfx",), ("*.jks",), ("*.keystore",),  # keys and key stores
    ("id_rsa*",), ("id_dsa*",), ("id_ecdsa*",), ("id_ed25519*",),  # ssh-keygen's default names, anywhere
    (".netrc",), ("_netrc",),       # curl, ftp, git over https: machine/login/password
    (".git-credentials",),          # git-credential-store(1)
    (".config", "git", "credentials"),  # git-credential-store(1), its XDG location
    ("credentials",), ("credentials.*",), (".credentials.json",),  # cargo, gem, gcloud; Claude Code's token
    (".npmrc",),                    # npm: _authToken (npmrc(5))
    (".pypirc",),                   # twine/setuptools: PyPI passwords and tokens
    (".pgpass",), (".my.cnf",),     # PostgreSQL, MySQL passwords
    (".vault-token",),              # HashiCorp Vault CLI
    (".boto",), (".s3cfg",),        # boto, s3cmd
    (".config", "hub"),             # hub: GitHub token
    (".htpasswd",),
    ("proc", "*", "environ"), ("proc", "*", "task", "*", "environ"),  # a process's environment (proc(5))
    ("etc", "shadow"), ("etc", "gshadow"), ("etc", "master.passwd"),  # password hashes
)


def _matches(parts: tuple[str, ...], at: int, entry: tuple[str, ...]) -> bool:
    return all(fnmatchcase(parts[at + k], pattern) for k, pattern in enumerate(entry))


def _index() -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], dict[str, list], dict[str, list]]:
    """The entries arranged for one pass over a path: one-segment file names as exact names,
    prefixes (`id_rsa*`) and suffixes (`*.pem`); longer file entries by their (exact) last
    segment; directory entries by their (exact) first segment."""
    exact, prefixes, suffixes = set(), [], []
    by_last: dict[str, list] = {}
    by_first: dict[str, list] = {}
    for entry in FILES:
        last = entry[-1]
        if len(entry) == 1 and "*" not in last and "?" not in last:
            exact.add(last)
        elif len(entry) == 1 and last.endswith("*") and "*" not in last[:-1] and "?" not in last:
            prefixes.append(last[:-1])
        elif len(entry) == 1 and last.startswith("*") and "*" not in last[1:] and "?" not in last:
            suffixes.append(last[1:])
        elif "*" not in last and "?" not in last:
            by_last.setdefault(last, []).append(entry)
        else:  # pragma: no cover - the table holds no other shape; keep it so
            raise ValueError(f"secrets: an entry this index cannot hold: {entry}")
    for entry in DIRECTORIES:
        if any("*" in p or "?" in p for p in entry):  # pragma: no cover
            raise ValueError(f"secrets: a directory entry must be exact: {entry}")
        by_first.setdefault(entry[0], []).append(entry)
    return frozenset(exact), tuple(prefixes), tuple(suffixes), by_last, by_first


_EXACT, _PREFIXES, _SUFFIXES, _BY_LAST, _BY_FIRST = _index()


_FIRST_SEGMENTS = frozenset(_BY_FIRST)


def is_secret(parts: tuple[str, ...]) -> bool:
    """Whether a path with these segments (as `PathValue.parts`) holds or is inside a secret.
    One pass over the segments: each is looked up, not matched against every entry (the segments
    are lowered together, and a set test rules out every directory entry at once)."""
    if not parts:
        return False
    lowered = "/".join(parts).lower().split("/")
    if len(lowered) != len(parts):  # pragma: no cover - a segment holds no "/"; lower each if one ever does
        lowered = [p.lower() for p in parts]
    return _lowered_is_secret(lowered)


def is_secret_text(text: str) -> bool:
    """`is_secret` of a normalized absolute POSIX path's text ("/" is the root): the plans of
    dsl.compiler hold the text, not a PathValue."""
    return text != "/" and _lowered_is_secret(text[1:].lower().split("/"))


def _lowered_is_secret(lowered: list[str]) -> bool:
    n = len(lowered)
    name = lowered[-1]
    if name in _EXACT or name.startswith(_PREFIXES) or name.endswith(_SUFFIXES):
        return True
    if name in _BY_LAST:
        for entry in _BY_LAST[name]:
            if len(entry) <= n and _matches(lowered, n - len(entry), entry):
                return True
    if _FIRST_SEGMENTS.isdisjoint(lowered):
        return False
    for at, part in enumerate(lowered):
        for entry in _BY_FIRST.get(part, ()):
            if at + len(entry) <= n and tuple(lowered[at : at + len(entry)]) == entry:
                return True
    return False
