"""`url(x)`: absolute URLs as fetchers read them (see dsl.subjects)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsl.cache import BUDGETS, BoundedCache, char_bytes
from dsl.values import EvalError


@dataclass(frozen=True, slots=True)
class UrlValue:
    """A parsed absolute URL. `host` is lowercased, IDNA-encoded (UTS #46), without a trailing
    dot; `port` is the explicit port or None; `userinfo` is what came before an `@` (never part
    of the host)."""

    scheme: str
    host: str
    port: int | None
    path: str
    query: str
    fragment: str
    userinfo: str | None
    text: str

    KIND = "url"
    FIELDS = {
        "scheme": "string", "host": "string", "port": "any", "path": "string", "query": "string",
        "fragment": "string", "userinfo": "any", "text": "string",
    }

    def __str__(self) -> str:
        return self.text


MAX_URL_TEXT = 100_000  # characters; longer is an error (RFC 9110 recommends supporting 8,000)
# a backslash, a space, or a control character (C0 and DEL; tab, CR and LF among them)
_READ_DIFFERENTLY = re.compile(r"[\x00-\x20\x7f\\]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def parse_url(text: object) -> UrlValue:
    """`url(x)`. Raises EvalError for what is not an absolute URL with a host, and for spellings
    that URL parsers disagree on (backslashes, whitespace, control characters), and for a text
    longer than MAX_URL_TEXT characters."""
    if not isinstance(text, str):
        raise EvalError("url() takes a string")
    if len(text) > MAX_URL_TEXT:
        raise EvalError(f"the URL is longer than {MAX_URL_TEXT:,} characters")
    if _READ_DIFFERENTLY.search(text):
        raise EvalError(f"the URL {text!r} holds characters URL parsers read differently")
    m = _SCHEME.match(text)
    if not m:
        raise EvalError(f"{text!r} is not an absolute URL (no scheme)")
    scheme = m.group(1).lower()
    rest = text[m.end() :]
    if not rest.startswith("//"):
        raise EvalError(f"{text!r} has no host")
    rest = rest[2:]
    end = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0] or [len(rest)])
    authority, tail = rest[:end], rest[end:]
    userinfo = None
    if "@" in authority:
        userinfo, authority = authority.rsplit("@", 1)
    port = None
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise EvalError(f"{text!r} has an unclosed IPv6 address")
        host, after = _ipv6(authority[1:close], text), authority[close + 1 :]
        if after:
            if not after.startswith(":"):
                raise EvalError(f"{text!r} has a malformed host")
            port = _port(after[1:], text)
    else:
        host, sep, port_text = authority.partition(":")
        if sep:
            port = _port(port_text, text)
        host = _host(host, text)
    if not host:
        raise EvalError(f"{text!r} has no host")
    path, _, fragment = tail.partition("#")
    path, _, query = path.partition("?")
    return UrlValue(scheme, host, port, path or "/", query, fragment, userinfo, text)


def _port(text: str, url: str) -> int | None:
    """The port: ASCII digits only (RFC 3986 section 3.2.3, `port = *DIGIT`, where DIGIT is
    0-9). str.isdigit alone also accepts "²" or "٣", which int() then refuses or reads."""
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 5 or int(text) > 65535:
        raise EvalError(f"{url!r} has an invalid port")
    return int(text)


# host as written → host as fetchers resolve it (`_resolved_host`): a session fetches from a few
# hosts, and the UTS #46 / IDNA encoding costs tens of microseconds. Hosts of at most
# _CACHED_HOST characters; a refusal is not kept (its message quotes the whole URL).
_HOSTS = BoundedCache(BUDGETS["url_hosts"], "url_hosts")
_CACHED_HOST = 256


def clear_host_cache() -> None:
    """Forget the kept hosts (benchmarks time the first sight of a URL)."""
    _HOSTS.clear()


def _host(host: str, url: str) -> str:
    """`_resolved_host`, kept for hosts seen before."""
    hit = _HOSTS.get(host)
    if hit is not None:
        return hit
    resolved = _resolved_host(host, url)
    if len(host) <= _CACHED_HOST:
        _HOSTS.put(host, resolved, 2 * char_bytes(host) + char_bytes(resolved) + 200)
    return resolved


def _resolved_host(host: str, url: str) -> str:
    """A host as fetchers resolve it: UTS #46 mapping first (full-width letters and the dots 。．｡
    become ASCII), then the trailing dot removed and the case folded, then an IPv4 address in any
    spelling the WHATWG URL standard accepts (`2852039166`, `0xa9fea9fe`, `169.254.43518`,
    `127.1`) written as four decimal numbers, else the IDNA (punycode) form."""
    import idna

    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False) if not host.isascii() else host
    except (idna.IDNAError, UnicodeError) as exc:
        raise EvalError(f"{url!r} has a host that is not a valid domain name: {exc}") from None
    mapped = mapped.rstrip(".").lower()
    if not mapped:
        return ""
    last = mapped.rsplit(".", 1)[-1]
    if re.fullmatch(r"[0-9]+|0x[0-9a-f]*", last):  # the WHATWG "ends in a number" test
        return _ipv4(mapped, url)
    try:
        return idna.encode(mapped, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise EvalError(f"{url!r} has a host that is not a valid domain name: {exc}") from None


def _ipv4(host: str, url: str) -> str:
    """The WHATWG URL standard's IPv4 parser: one to four parts, each decimal, octal (a leading 0)
    or hexadecimal (0x); the last part fills the bytes the others leave. Raises EvalError where
    that parser fails (the URL is then invalid for a browser, and unreadable here)."""
    numbers = []
    for part in host.split("."):
        try:
            if part[:2] == "0x":
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part[0] == "0":
                numbers.append(int(part[1:], 8))
            else:
                numbers.append(int(part, 10))
        except ValueError:
            raise EvalError(f"{url!r} has a host that is neither a domain name nor an IPv4 address") from None
    if len(numbers) > 4 or any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise EvalError(f"{url!r} has an IPv4 address out of range")
    value = numbers[-1]
    for k, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - k)
    return ".".join(str(value >> shift & 255) for shift in (24, 16, 8, 0))


def _ipv6(text: str, url: str) -> str:
    """An IPv6 literal in its compressed form; one that maps an IPv4 address (`::ffff:a9fe:a9fe`)
    as that address (`169.254.169.254`), which is where a dual-stack client connects."""
    import ipaddress

    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise EvalError(f"{url!r} has a malformed IPv6 address") from None
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else address.compressed
