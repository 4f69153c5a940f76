"""`email(x)`: an e-mail address as mail systems route it, with its local part and its domain.

What is read is the address alone, `local@domain` (RFC 5321 section 4.1.2, a `Mailbox`), and only
in the forms that every reader of it agrees on:

* the local part is a dot-atom (RFC 5322 section 3.2.3): letters, digits and
  ``!#$%&'*+-/=?^_`{|}~``, in dot-separated runs, no leading, trailing or doubled dot, at most 64
  octets (RFC 5321 section 4.5.3.1.1); other Unicode letters are allowed as RFC 6531 allows them
  (SMTPUTF8: letters, marks and digits, never an invisible format character), normalized to NFC. It keeps its case: RFC 5321 leaves it to the receiving host;
* the domain is a host name: UTS #46 mapping (full-width letters and the dots 。．｡ become
  ASCII), lower case, no trailing dot, then IDNA (punycode), as `url()` reads a host
  (dsl.subjects.urls). An address literal (`[192.0.2.1]`) and a last label of digits only are not
  host names;
* the whole address is at most 254 characters (RFC 3696 erratum 1690).

Anything else is an evaluation error, which never allows: a display name (`Bob <bob@x.org>`),
a quoted local part (`"a b"@x.org`), a comment, a second `@`, whitespace or a control character.
Those are exactly the spellings on which mail parsers have disagreed (CVE-2023-27043 in Python's
own `email.utils.parseaddr`), so a policy never decides on a reading the mailer may not share.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from dsl.values import EvalError, _a, kind

MAX_ADDRESS = 254  # characters
MAX_LOCAL = 64  # octets of UTF-8

_ATOM = re.compile(r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u0080-\U0010ffff]+")
_WORD_CATEGORIES = ("L", "M", "N")  # the non-ASCII characters of a local part: letters, marks, digits
_REFUSED = re.compile(r"[\x00-\x20\x7f<>()\[\]\\,;:\"]")


@dataclass(frozen=True, slots=True)
class EmailValue:
    """A normalized address: `local` as written (NFC), `domain` lower case and IDNA, `text`
    their join `local@domain`."""

    local: str
    domain: str
    text: str

    KIND = "email"
    FIELDS = {"local": "string", "domain": "string", "text": "string"}

    def __str__(self) -> str:
        return self.text


def parse_email(value: object) -> EmailValue:
    """`email(x)`. Raises EvalError for what is not a plain address (see the module docstring)."""
    if kind(value) != "string":
        raise EvalError(f"email() takes a string, not {_a(kind(value))}")
    text = str(value)
    if len(text) > MAX_ADDRESS:
        raise EvalError(f"the address is longer than {MAX_ADDRESS} characters")
    if "<" in text:
        raise EvalError(f"{text!r} is not a plain e-mail address: give the address alone, without a display name")
    bad = _REFUSED.search(text)
    if bad is not None:
        shown = {" ": "a space", "<": "'<' (a display name?)", "\"": "a quote (a quoted local part?)"}.get(bad.group(), repr(bad.group()))
        raise EvalError(f"{text!r} is not a plain e-mail address: it holds {shown}")
    if text.count("@") != 1:
        raise EvalError(f"{text!r} is not an e-mail address: it needs exactly one '@'")
    local, domain = text.split("@")
    try:
        local = unicodedata.normalize("NFC", local)
        size = len(local.encode("utf-8"))
    except UnicodeError:
        raise EvalError(f"{text!r} is not Unicode text") from None
    if (not local or size > MAX_LOCAL or not all(_ATOM.fullmatch(part) for part in local.split("."))
            or any(not ch.isascii() and unicodedata.category(ch)[0] not in _WORD_CATEGORIES for ch in local)):
        raise EvalError(f"{text!r} has no valid local part (a dot-atom of at most {MAX_LOCAL} octets)")
    return EmailValue(local, (host := _domain(domain, text)), f"{local}@{host}")


def _domain(domain: str, text: str) -> str:
    import idna

    try:
        mapped = idna.uts46_remap(domain, std3_rules=False, transitional=False) if not domain.isascii() else domain
        mapped = mapped.lower()
        mapped = mapped[:-1] if mapped.endswith(".") else mapped
        if not mapped or mapped.rsplit(".", 1)[-1].isdigit():
            raise EvalError(f"{text!r} has no domain name after '@'")
        return idna.encode(mapped, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise EvalError(f"{text!r} has a domain that is not a valid host name: {exc}") from None
