"""Where credentials live: `PathValue.secret`, one list for every rule about reading files.

Each entry is a run of path segments (lower case; `*` and `?` within one segment, as in a path
pattern). A DIRECTORY entry makes the directory and everything below it secret wherever the run
of segments occurs in the path; a FILE entry matches the path's last segments. Paths are compared
in lower case, so `~/.SSH/ID_RSA` (a case-insensitive file system) is caught too. The cost is
linear in the number of segments (each entry is tried at each position; segments are short).

The sources, per entry: the documentation of the tool that writes the file.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from itertools import islice

from dsl.cache import BUDGETS, BoundedCache, char_bytes

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
    ("run", "secrets"),             # Docker and Compose secrets (/run/secrets/NAME); Kubernetes'
                                    # service-account token (/var/run/secrets/kubernetes.io/serviceaccount)
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
    ("terraform.tfstate",), ("terraform.tfstate.backup",),  # Terraform state: resources' secrets in clear
)

# Directories that hold secrets below them, though they are not secret themselves: a recursive
# search rooted at one of them (or above one: `/`, `/var`) reaches the secrets. Absolute runs of
# segments from the root (`*` is one segment): the homes (~/.ssh, ~/.aws, ...), the processes'
# environments (/proc/*/environ, proc(5)), the system's password hashes (/etc/shadow), Docker's
# and Kubernetes' secrets (/run/secrets, /var/run/secrets).
CONTAINERS: tuple[tuple[str, ...], ...] = (
    ("home", "*"), ("root",), ("users", "*"), ("var", "root"), ("proc",), ("etc",), ("run", "secrets"),
    ("var", "run", "secrets"),
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
_FIRST_MARKERS = tuple(f"/{first}/" for first in sorted(_FIRST_SEGMENTS))


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
    dsl.compiler hold the text, not a PathValue. The text is split into segments only when its
    name or one of its segments begins an entry: the common path is decided by its name and a
    few substring searches (a path under a long cwd costs little more than a short one)."""
    if text == "/":
        return False
    lowered = text.lower()
    name = lowered[lowered.rfind("/") + 1 :]
    if name in _EXACT or name.startswith(_PREFIXES) or name.endswith(_SUFFIXES):
        return True
    if name not in _BY_LAST:
        ended = lowered + "/"
        for marker in _FIRST_MARKERS:  # "/.ssh/": some segment begins a directory entry
            if marker in ended:
                break
        else:
            return False
    return _lowered_is_secret(lowered[1:].split("/"))


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
    if not _DIR_SINGLE.isdisjoint(lowered):
        return True
    # an entry of two or more segments: found by its first two (one dict lookup a segment, where
    # a directory repeated 10,000 times cost a slice of each of its entries at each)
    by_pair = _DIR_BY_PAIR.get
    for at, pair in enumerate(zip(lowered, islice(lowered, 1, None))):
        for entry in by_pair(pair, ()):
            if at + len(entry) <= n and tuple(lowered[at : at + len(entry)]) == entry:
                return True
    return False


# the directory entries of one segment, and the others by their first two segments
_DIR_SINGLE = frozenset(entry[0] for entries in _BY_FIRST.values() for entry in entries if len(entry) == 1)
_DIR_BY_PAIR: dict[tuple[str, str], list[tuple[str, ...]]] = {}
for _entries in _BY_FIRST.values():
    for _entry in _entries:
        if len(_entry) > 1:
            _DIR_BY_PAIR.setdefault((_entry[0], _entry[1]), []).append(_entry)


# ("glob", pattern) → glob_may_be_secret's answer, ("holds", parts) → holds_secrets': a search's
# root and pattern repeat across calls (`*.py`, the project), and an answer costs a match of every
# segment against every entry of the table (up to about 1 ms for a pattern)
_SECRET_CACHE = BoundedCache(BUDGETS["glob_secret"], "glob_secret")
_CACHED_PATTERN = 1024  # characters


def clear_secret_cache() -> None:
    """Forget the kept answers of holds_secrets and glob_may_be_secret (benchmarks, tests)."""
    _SECRET_CACHE.clear()


def holds_secrets(parts: tuple[str, ...]) -> bool:
    """Whether a path with these segments is a secret or holds one below it: it is secret, or it
    is one of CONTAINERS or above one (`/`, `/home`, `/home/u`, `/proc/self`, `/var/run`), or its
    last segments begin an entry of more than one segment (`~/.config` holds `.config/gh`,
    `~/.local` holds `.local/share/keyrings`). A search rooted there reaches the secrets. Kept
    in _SECRET_CACHE for paths of at most _CACHED_PATTERN characters (a search root repeats)."""
    size = sum(map(len, parts)) + len(parts)
    if size > _CACHED_PATTERN:
        return _holds_secrets(parts)
    key = ("holds", parts)
    hit = _SECRET_CACHE.get(key)
    if hit is None:
        hit = _holds_secrets(parts)
        _SECRET_CACHE.put(key, hit, 2 * char_bytes("/".join(parts)) + 64 * len(parts) + 200)
    return hit


def _holds_secrets(parts: tuple[str, ...]) -> bool:
    if is_secret(parts):
        return True
    lowered = [p.lower() for p in parts]
    for entry in CONTAINERS:
        if len(lowered) <= len(entry) and all(fnmatchcase(lowered[k], entry[k]) for k in range(len(lowered))):
            return True  # the container or above it (inside a home, the project is not known to hold one)
    for entry in DIRECTORIES + FILES:
        for size in range(1, len(entry)):  # the path ends with the first `size` segments of the entry
            if size <= len(lowered) and _matches(lowered, len(lowered) - size, entry[:size]):
                return True
    return False


# --- glob patterns that may match a secret ------------------------------------------------------

_MAX_ALTERNATIVES = 256
_MAX_GLOB_PATTERN = _CACHED_PATTERN  # characters; a longer pattern counts as a secret (no search needs one)
_MAX_EXPANDED = 8 * _MAX_GLOB_PATTERN  # characters of all the alternatives together; more counts as a secret
_MAX_BRACE_DEPTH = 32  # braces inside braces; deeper counts as a secret


def _brace_tree(pattern: str) -> list | None:
    """A pattern as a sequence of items, each a literal string or a brace group (a list of
    alternatives, each a sequence): `a{b,c{d,e}}` is ["a", [["b"], ["c", [["d"], ["e"]]]]].
    Braces pair as a stack pairs them; a `{` with no `}` after it and a `}` with no `{` before
    it are literal, and so is a comma outside every pair. Two passes over the text (linear);
    None when braces nest deeper than _MAX_BRACE_DEPTH."""
    opens: list[int] = []
    closes_of: dict[int, int] = {}
    for i, ch in enumerate(pattern):
        if ch == "{":
            opens.append(i)
        elif ch == "}" and opens:
            closes_of[opens.pop()] = i
    closing = set(closes_of.values())
    root: list = []
    seq, groups, start = root, [], 0
    for i, ch in enumerate(pattern):
        if (ch == "{" and i in closes_of) or (ch == "," and groups) or (ch == "}" and i in closing):
            if start < i:
                seq.append(pattern[start:i])
            start = i + 1
            if ch == "{":
                group: list = [[]]
                seq.append(group)
                groups.append((group, seq))
                if len(groups) > _MAX_BRACE_DEPTH:
                    return None
                seq = group[0]
            elif ch == ",":
                groups[-1][0].append([])
                seq = groups[-1][0][-1]
            else:
                seq = groups.pop()[1]
    if start < len(pattern):
        seq.append(pattern[start:])
    return root


def _measure(seq: list) -> tuple[int, int]:
    """(alternatives, characters of them all) of a sequence of _brace_tree, each saturated just
    above its limit (_MAX_ALTERNATIVES, _MAX_EXPANDED) so that no product grows unbounded."""
    count, chars = 1, 0
    for item in seq:
        if type(item) is str:
            c, n = 1, len(item)
        else:
            c = n = 0
            for alternative in item:
                ac, an = _measure(alternative)
                c, n = c + ac, n + an
        count, chars = count * c, chars * c + n * count
        if count > _MAX_ALTERNATIVES or chars > _MAX_EXPANDED:
            return _MAX_ALTERNATIVES + 1, _MAX_EXPANDED + 1
    return count, chars


def _expand(seq: list) -> list[str]:
    out = [""]
    for item in seq:
        if type(item) is str:
            out = [o + item for o in out]
        else:
            ends = [text for alternative in item for text in _expand(alternative)]
            out = [o + e for o in out for e in ends]
    return out


def _braces(pattern: str) -> list[str] | None:
    """The alternatives of a pattern's braces (`{a,b}x` is `ax`, `bx`; nested too; `{a}` is `a`,
    as rg's globs read it), or None when there are more than _MAX_ALTERNATIVES, when they hold more
    than _MAX_EXPANDED characters together, or when braces nest deeper than _MAX_BRACE_DEPTH (the
    caller then fails closed). Time linear in the pattern and the alternatives' characters."""
    tree = _brace_tree(pattern)
    if tree is None:
        return None
    count, chars = _measure(tree)
    if count > _MAX_ALTERNATIVES or chars > _MAX_EXPANDED:
        return None
    return _expand(tree)


_ANY = ("any",)


def _tokens(segment: str) -> list:
    """A glob segment as tokens: "*" (any run), _ANY (one character), a frozenset of characters
    (a class, lowered), ("not", frozenset) (a negated class), or a character (lowered)."""
    out: list = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            if not out or out[-1] != "*":
                out.append("*")
        elif ch == "?":
            out.append(_ANY)
        elif ch == "[" and "]" in segment[i + 2 :]:
            end = segment.index("]", i + 2)
            body = segment[i + 1 : end]
            negated = body[:1] in ("!", "^")
            body = body[1:] if negated else body
            chars: set[str] = set()
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    low, high = ord(body[k]), ord(body[k + 2])
                    if high - low > 512:
                        chars = None  # a wide range: any character
                        break
                    chars |= {chr(c) for c in range(low, high + 1)}
                    k += 3
                else:
                    chars.add(body[k])
                    k += 1
            if chars is None:
                out.append(_ANY)
            else:
                chars = {c.lower() for c in chars}
                out.append(("not", frozenset(chars)) if negated else frozenset(chars))
            i = end
        elif ch == "\\" and i + 1 < len(segment):
            i += 1
            # an escaped `*` is the string "*", the token of a star: read as one (a wider reading,
            # never a narrower), and collapsed like one, which keeps `_segments_meet` within the
            # length of the table's names (`*\*\*\…` was 1,024 stars: 190 ms)
            if segment[i] != "*" or not out or out[-1] != "*":
                out.append(segment[i].lower())
        else:
            out.append(ch.lower())
        i += 1
    return out


def _meets(a, b) -> bool:
    """Whether two one-character tokens can match the same character."""
    if a is _ANY or b is _ANY:
        return not (type(a) is frozenset and not a) and not (type(b) is frozenset and not b)
    if type(a) is str and type(b) is str:
        return a == b
    if type(a) is str:
        a, b = b, a
    if type(b) is str:  # a is a class
        return (b in a) if type(a) is frozenset else (b not in a[1])
    if type(a) is frozenset and type(b) is frozenset:
        return bool(a & b)
    if type(a) is frozenset:
        return bool(a - b[1])
    if type(b) is frozenset:
        return bool(b - a[1])
    return True  # two negated classes: the characters are many


def _segments_meet(glob: list, secret: list) -> bool:
    """Whether a glob segment's tokens and a secret entry's segment (its `*` matching only the empty
    string: the names as the table writes them, `id_rsa`, `.pem`) have a common match."""
    secret = [t for t in secret if t != "*"]
    seen, todo = set(), [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(glob) and j == len(secret):
            return True
        if i < len(glob) and glob[i] == "*":
            todo.append((i + 1, j))
            if j < len(secret):
                todo.append((i, j + 1))
        elif i < len(glob) and j < len(secret) and _meets(glob[i], secret[j]):
            todo.append((i + 1, j + 1))
    return False


def _secret_tokens() -> tuple[list, list, list]:
    """The table's segments as _tokens, each entry's own `*` dropped (read as empty): the first
    and last segment of every directory entry, the last segment of every file entry, and the
    first segment of every file entry of more than one segment."""
    def tokens(seg):
        return ["*"] if seg == "*" else _tokens(seg.replace("*", ""))
    directories = {seg for entry in DIRECTORIES for seg in (entry[0], entry[-1])}
    return ([tokens(seg) for seg in sorted(directories)], [tokens(e[-1]) for e in FILES],
            [tokens(e[0]) for e in FILES if len(e) > 1])


# A pattern's segment that may be the first or the last segment of a directory entry names a
# secret directory (`/home/u/*/gh/*` reaches `.config/gh` through its `*`; a middle segment,
# `share` of `.local/share/keyrings`, is too common a name and reaches nothing without the
# last); a last segment that may be a file entry's last names a secret file, wherever it stands
# (`**` is any number of segments: `/**/environ`); a last `*` below a segment that may begin a
# file entry of more segments reaches it (`/etc/*`, `/proc/self/*`). Coarser than the table,
# never finer.
_DIR_NAMES, _FILE_NAMES, _FILE_FIRSTS = _secret_tokens()
# the file entries' last segments with their own `*` kept, as (fixed tokens, where the `*` is):
# a pattern segment without `*` is a set of names of one length, compared with the entry as the
# table means it (`server.pe[m]` is a `*.pem`, `.en[v].local` a `.env.*`)
_FILE_SHAPES = tuple(
    (_tokens(e[-1].strip("*")), "end" if e[-1].endswith("*") else "start" if e[-1].startswith("*") else "")
    for e in FILES)


def _runs(glob: list) -> list[list]:
    """The runs of one-character tokens between a segment's `*`s (empty runs kept)."""
    runs: list[list] = [[]]
    for token in glob:
        if token == "*":
            runs.append([])
        else:
            runs[-1].append(token)
    return runs


def _overlaps(run: list, fixed: list, at_end: bool) -> bool:
    """Whether at least two characters of `run` can be the first characters of `fixed` with the
    run's end among them (at_end False: `server.pe` runs into `.pem`), or the last characters of
    `fixed` with the run's start among them (at_end True: `rsa.pub` out of `id_rsa`)."""
    for size in range(2, min(len(run), len(fixed)) + 1):
        if at_end:
            pairs = zip(run[:size], fixed[len(fixed) - size :])
        else:
            pairs = zip(run[len(run) - size :], fixed[:size])
        if all(_meets(a, b) for a, b in pairs):
            return True
    return False


def _starred_may_name_file(glob: list) -> bool:
    """Whether a pattern segment with a `*` may be a secret file's name whose entry has a `*`
    (`*.pem`, `id_rsa*`): its run of fixed characters next to the name's fixed part meets it over
    at least two characters (`server.pe*`, `*x.pem`, `*rsa*`, `id_*`), so that `*.py` is not a
    `id_rsa*` nor `src*` a `*.pem` (each would take the whole fixed part from the other's `*`)."""
    runs = _runs(glob)
    for fixed, star in _FILE_SHAPES:
        if star == "start":  # `*S`: the name ends with S
            last = runs[-1]
            if last:  # the pattern ends with fixed characters: they end the name too
                n = min(len(last), len(fixed))
                if n >= 2 and all(_meets(a, b) for a, b in zip(last[len(last) - n :], fixed[len(fixed) - n :])):
                    return True
            elif len(runs) > 1 and _overlaps(runs[-2], fixed, at_end=False):
                return True
        elif star == "end":  # `P*`: the name starts with P
            first = runs[0]
            if first:
                n = min(len(first), len(fixed))
                if n >= 2 and all(_meets(a, b) for a, b in zip(first[:n], fixed[:n])):
                    return True
            elif len(runs) > 1 and _overlaps(runs[1], fixed, at_end=True):
                return True
    return False


def _fixed_may_name_file(glob: list) -> bool:
    """Whether a pattern segment without `*` (each token one character) may be a secret file's
    name, an entry's `*` matching any run."""
    for fixed, star in _FILE_SHAPES:
        n = len(fixed)
        if star == "" and len(glob) != n or len(glob) < n:
            continue
        part = glob[len(glob) - n :] if star == "start" else glob[:n]
        if all(_meets(a, b) for a, b in zip(part, fixed)):
            return True
    return False


_DIR_SEGMENTS = frozenset(seg for entry in DIRECTORIES for seg in (entry[0], entry[-1]))
_METACHARACTERS = frozenset("*?[\\")
_PIECES = re.compile(r"[\s,]+")


def _may_meet(glob: list, name: list) -> bool:
    """`_segments_meet`, ruled out first by length: a glob segment's tokens other than `*` each
    match one character, so without a `*` it matches names of exactly that length, with one
    names at least that long."""
    if name == ["*"]:
        return True
    fixed = len(glob) - glob.count("*")
    if fixed > len(name) or (fixed < len(name) and "*" not in glob):
        return False
    return _segments_meet(glob, name)


def _may_name_directory(segment: str) -> bool:
    """Whether one segment of a pattern may be a segment of a secret directory (`.ssh`, `.s[s]h`, `gh`)."""
    if _METACHARACTERS.isdisjoint(segment):
        return segment.lower() in _DIR_SEGMENTS
    tokens = _tokens(segment)
    return tokens != ["*"] and any(_may_meet(tokens, name) for name in _DIR_NAMES)


def _class_may_cross(text: str) -> bool:
    """Whether a `[...]` class of the text may match `/`, is negated or holds a brace or a comma:
    rg's globs make a class a regex class, which matches `/` (`.ssh[!x]id_rsa`, `.ssh[.-0]*`), a
    negated class is compared case-sensitively there (`[!A-Z]` matches `s`), and a brace or comma
    inside a class is literal to rg while _braces would pair it (`{.ssh,[}]}/*`), so such a
    pattern is not read segment by segment. One pass: each class is jumped over once read."""
    i = text.find("[")
    while i >= 0:
        end = text.find("]", i + 2)
        if end < 0:
            return False
        body = text[i + 1 : end]
        if body[:1] in ("!", "^") or "/" in body or "\\" in body or "{" in body or "}" in body or "," in body:
            return True
        for k in range(len(body) - 2):
            if body[k + 1] == "-" and body[k] <= "/" <= body[k + 2]:
                return True
        i = text.find("[", end + 1)
    return False


def glob_climbs_to_secrets(pattern: str) -> bool:
    """Whether a pattern as written (not resolved) searches from a directory that holds secrets:
    absolute or from `~`, its segments before the first with a metacharacter are a directory
    that holds_secrets (`/**`, `/*/*`, `~/**`, `/home/*/*`), or it has a `..` segment (`../**`,
    `../*/*`: above the project, the home's neighbours). `/home/u/proj/src/**` does
    not; a relative pattern from the cwd is left to the search's root."""
    segments = [seg for seg in pattern.replace("\\", "/").split("/") if seg and seg != "."]
    fixed: list[str] = []
    for segment in segments:
        if not _METACHARACTERS.isdisjoint(segment) or "{" in segment:
            break
        fixed.append(segment.lower())
    if ".." in segments:
        return True
    if len(fixed) == len(segments):  # no metacharacter: a path, which `.secret` and `.holds_secrets` read
        return False
    if pattern.startswith("~"):
        fixed = ["home", "*", *fixed[1:]] if fixed and fixed[0] == "~" else fixed
    elif not pattern.startswith(("/", "\\")):
        return False
    return holds_secrets(tuple(fixed))


def glob_may_be_secret(pattern: str) -> bool:
    """`_glob_may_be_secret`, kept for patterns of at most _CACHED_PATTERN characters."""
    if type(pattern) is not str or len(pattern) > _CACHED_PATTERN:
        return _glob_may_be_secret(pattern)
    key = ("glob", pattern)
    hit = _SECRET_CACHE.get(key)
    if hit is None:
        hit = _glob_may_be_secret(pattern)
        _SECRET_CACHE.put(key, hit, 2 * char_bytes(pattern) + 200)
    return hit


def _glob_may_be_secret(pattern: str) -> bool:
    """Whether a glob pattern (rg's and Claude Code's Grep/Glob: `*`, `**`, `?`, `[...]` classes,
    `{a,b}` braces; compared in lower case) may match a secret of this table, read as rg reads
    it and as the Grep tool splits it; docs/policy-language.md, `.glob_secret`, gives the rules
    (a segment that may name a secret directory, a last segment that may name a secret file, a
    class that may match `/`, ...). Coarser than the table, never finer. A pattern longer than
    _MAX_GLOB_PATTERN, or whose braces _braces refuses: True (fail closed). Time linear in the
    pattern: each distinct segment is tried once, and only against names whose length it can
    match."""
    if len(pattern) > _MAX_GLOB_PATTERN:
        return True
    # rg reads `\` as an escape, a Windows agent may mean a separator: either reading may match
    readings = (pattern, pattern.replace("\\", "/")) if "\\" in pattern else (pattern,)
    return any(_reading_may_be_secret(reading) for reading in readings)


def _reading_may_be_secret(pattern: str) -> bool:
    if _class_may_cross(pattern):  # before the braces: `{.ssh,[}]}` pairs its braces around the class in rg
        return True
    alternatives = _braces(pattern)
    if alternatives is None:
        return True
    seen: set[str] = set()  # segments already found to name nothing (alternatives share them)
    for alternative in alternatives:
        if _class_may_cross(alternative):
            return True
        # the Grep tool splits its glob on blanks and commas, and rg trims a glob's trailing blanks
        pieces = [alternative, *(p for p in _PIECES.split(alternative) if p and p != alternative)]
        for piece in pieces:
            segments = [seg for seg in piece.replace("\\\\", "/").split("/") if seg and seg != "."]
            if segments and _segments_may_be_secret(segments, seen):
                return True
    return False


def _segments_may_be_secret(segments: list[str], seen: set[str]) -> bool:
    for segment in segments:
        if segment not in seen:
            if _may_name_directory(segment):
                return True
            seen.add(segment)
    last = segments[-1]
    tokens = _tokens(last)
    key = "\0last" + last
    if key not in seen:
        if "*" not in tokens:
            if _fixed_may_name_file(tokens):  # covers every entry, with or without its own `*`
                return True
        elif tokens != ["*"] and (_starred_may_name_file(tokens) or any(_may_meet(tokens, name) for name in _FILE_NAMES)):
            return True
        seen.add(key)
    if tokens == ["*"] and len(segments) > 1:  # `/etc/*`: any file below a segment that begins an entry
        for segment in segments[:-1]:
            key = "\0first" + segment
            if key not in seen:
                tokens = _tokens(segment)
                if tokens != ["*"] and any(_may_meet(tokens, name) for name in _FILE_FIRSTS):
                    return True
                seen.add(key)
    return False
