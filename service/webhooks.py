"""The webhooks file of `countersign serve --webhooks FILE` (TOML, docs/notifications.md).

    [delivery]                      # optional; the values shown are the defaults
    attempts = 12                   # tries per notification, the first included
    backoff_seconds = 1.0           # the wait before the 2nd try; doubled each time, with jitter
    backoff_cap_seconds = 300.0     # the longest wait between two tries
    queue_limit = 10000             # notifications waiting at most (the oldest are dropped)
    queue_bytes = 16777216          # their bodies' bytes at most (likewise)

    [[webhook]]
    url = "https://hooks.example.com/countersign"   # or url_env = "NAME": the URL in an environment variable
    format = "generic"              # or "slack"
    events = ["interrupt", "decision", "expiry"]    # default: all three
    groups = ["sups"]               # optional: only requests a quorum of these policy groups decides
    secret_env = "COUNTERSIGN_HOOK_SECRET"          # the NAME of the variable holding the HMAC secret
    timeout_seconds = 10.0

Secrets never sit in the file: `secret_env` names an environment variable, and a Slack incoming
webhook's URL (itself a credential) may be given the same way with `url_env`. A `generic` hook
must be signed (`secret_env`); a `slack` one may omit it (Slack does not check a signature: the
URL is the credential).

Errors: WebhooksError, whose message starts with `FILE:LINE:` where the line is known (tomllib's
syntax errors, and the `[[webhook]]` header of the entry at fault).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

EVENTS = ("interrupt", "decision", "expiry")
FORMATS = ("slack", "generic")
_HOOK_KEYS = {"url", "url_env", "format", "events", "groups", "secret_env", "timeout_seconds"}
_DELIVERY_KEYS = {"attempts", "backoff_seconds", "backoff_cap_seconds", "queue_limit", "queue_bytes"}
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class WebhooksError(Exception):
    """The webhooks file cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Webhook:
    """One receiver. `secret` is the HMAC key read from the environment (None: unsigned, slack
    only); `host` is what the deliveries file records of the URL (its path may be a secret)."""

    url: str = field(repr=False)
    format: str
    events: frozenset[str]
    groups: frozenset[str] | None
    secret: bytes | None = field(repr=False)
    timeout_seconds: float
    line: int = 0

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc.rpartition("@")[2]


@dataclass(frozen=True)
class DeliverySettings:
    """Retries and the queue's bounds (module docstring)."""

    attempts: int = 12
    backoff_seconds: float = 1.0
    backoff_cap_seconds: float = 300.0
    queue_limit: int = 10_000
    queue_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class WebhooksConfig:
    hooks: tuple[Webhook, ...]
    delivery: DeliverySettings = DeliverySettings()
    source: str = ""


def _header_lines(text: str) -> list[int]:
    """The 1-based line of every `[[webhook]]` header, in order (for messages about an entry)."""
    return [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"^\s*\[\[\s*webhook\s*\]\]", line)]


def _number(where: str, name: str, value: object, *, integer: bool = False, low: float = 0.0) -> float | int:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= low:
        raise WebhooksError(f"{where}: {name} must be a {'whole ' if integer else ''}number above {low:g}, not {value!r}")
    return value


def _env(where: str, name: str, value: object, environ: dict) -> str:
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise WebhooksError(f"{where}: {name} is the NAME of an environment variable (like MY_SECRET), not {value!r}")
    got = environ.get(value)
    if not got:
        raise WebhooksError(f"{where}: {name}: the environment variable {value} is not set (or empty)")
    return got


def _hook(where: str, entry: dict, line: int, environ: dict) -> Webhook:
    unknown = sorted(set(entry) - _HOOK_KEYS)
    if unknown:
        raise WebhooksError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                            f"(a webhook has {', '.join(sorted(_HOOK_KEYS))})")
    if ("url" in entry) == ("url_env" in entry):
        raise WebhooksError(f"{where}: give exactly one of url and url_env")
    url = entry["url"] if "url" in entry else _env(where, "url_env", entry["url_env"], environ)
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = url if "url" in entry else f"${entry['url_env']}"
        raise WebhooksError(f"{where}: url must be an http:// or https:// URL with a host, not {shown!r}")
    fmt = entry.get("format", "generic")
    if fmt not in FORMATS:
        raise WebhooksError(f"{where}: format must be \"slack\" or \"generic\", not {fmt!r}")
    events = entry.get("events", list(EVENTS))
    if not isinstance(events, list) or not events or any(e not in EVENTS for e in events):
        raise WebhooksError(f"{where}: events must be a non-empty list of {', '.join(map(repr, EVENTS))}, not {events!r}")
    groups = entry.get("groups")
    if groups is not None and (not isinstance(groups, list) or not groups or not all(isinstance(g, str) and g for g in groups)):
        raise WebhooksError(f"{where}: groups must be a non-empty list of policy group names, not {groups!r}")
    secret = None
    if "secret_env" in entry:
        secret = _env(where, "secret_env", entry["secret_env"], environ).encode()
    elif fmt == "generic":
        raise WebhooksError(f"{where}: a generic webhook is signed: set secret_env to the NAME of the environment "
                            "variable holding its secret (the secret itself never goes in this file)")
    timeout = float(_number(where, "timeout_seconds", entry.get("timeout_seconds", 10.0)))
    return Webhook(url=url, format=fmt, events=frozenset(events), groups=frozenset(groups) if groups else None,
                   secret=secret, timeout_seconds=timeout, line=line)


def parse_webhooks(text: str, source: str = "<webhooks>", environ: dict | None = None) -> WebhooksConfig:
    """The configuration in `text` (module docstring); `environ` defaults to os.environ.
    Raises WebhooksError."""
    environ = os.environ if environ is None else environ
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        where = f"{source}:{found.group(1)}" if found else source
        message = _TOML_LINE.sub("", str(exc)).strip()
        raise WebhooksError(f"{where}: not valid TOML: {message}{f' (column {found.group(2)})' if found else ''}") from None
    unknown = sorted(set(data) - {"webhook", "delivery"})
    if unknown:
        raise WebhooksError(f"{source}: unknown table or key {', '.join(unknown)} (the file has [[webhook]] entries "
                            "and an optional [delivery] table)")
    entries = data.get("webhook", [])
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise WebhooksError(f"{source}: no webhook: add at least one [[webhook]] entry with a url")
    lines = _header_lines(text)
    hooks = []
    for i, entry in enumerate(entries):
        line = lines[i] if i < len(lines) else 0
        where = f"{source}:{line}: webhook {i + 1}" if line else f"{source}: webhook {i + 1}"
        hooks.append(_hook(where, entry, line, environ))
    raw = data.get("delivery", {})
    if not isinstance(raw, dict):
        raise WebhooksError(f"{source}: delivery must be a table ([delivery])")
    bad = sorted(set(raw) - _DELIVERY_KEYS)
    if bad:
        raise WebhooksError(f"{source}: [delivery]: unknown key {', '.join(bad)} (it has {', '.join(sorted(_DELIVERY_KEYS))})")
    where = f"{source}: [delivery]"
    settings = DeliverySettings(
        attempts=int(_number(where, "attempts", raw.get("attempts", 12), integer=True)),
        backoff_seconds=float(_number(where, "backoff_seconds", raw.get("backoff_seconds", 1.0))),
        backoff_cap_seconds=float(_number(where, "backoff_cap_seconds", raw.get("backoff_cap_seconds", 300.0))),
        queue_limit=int(_number(where, "queue_limit", raw.get("queue_limit", 10_000), integer=True)),
        queue_bytes=int(_number(where, "queue_bytes", raw.get("queue_bytes", 16 * 1024 * 1024), integer=True)),
    )
    return WebhooksConfig(tuple(hooks), settings, source)


def load_webhooks(path: str | Path, environ: dict | None = None) -> WebhooksConfig:
    """Read and check the webhooks file. Raises WebhooksError (an unreadable file too)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise WebhooksError(f"{path}: cannot read the webhooks file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WebhooksError(f"{path}: the webhooks file is not UTF-8: {exc}") from None
    return parse_webhooks(text, str(path), environ)
