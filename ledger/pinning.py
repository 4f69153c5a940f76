"""Policies pinned in the ledger: the text that decided, kept beside the `policy` event.

A `policy` event (ledger.events.PolicyLoaded) with `files` *pins* its policy: its body lists the
policy's source files (dsl.sources: path and SHA-256 of the bytes, root first), and the line's
data holds their text and the roster groups the policy names:

    {"files":[{"path":"refunds.policy","text":"policy \\"refunds\\"\\n..."}],"groups":{"finance":["fin-1","fin-2"]}}

(canonical JSON, keys sorted; `groups` is `{}` for a policy that names no roster group). The
text is the file's bytes read as UTF-8, byte-order mark included, so the bytes come back exactly.
The chain covers the body, the body covers the files' digests and `digest`, and `digest` is
`dsl.policy.policy_digest(dsl.sources.combined_digest(files), groups)`: so neither the text nor
the groups can be swapped without `ledger verify` noticing (`data_problem`), exactly as the
arguments beside a proposal are held by its `args_digest` (docs/ledger-format.md, sections 5
and 11.5). The data is outside the hashed bytes, like arguments, but a pinned policy is not
redactable: it is what the decisions are checked against.

`pin(policy)` makes the event's `files` and data; `load(event, data)` reads the policy back
(ledger audit, policy whatif).
"""

from __future__ import annotations

import hashlib
from pathlib import PurePath
from typing import Any

import msgspec

from dsl.sources import PolicyFile, combined_digest
from ledger import events as ev
from ledger.digest import canonical_spelling


class PinError(Exception):
    """A pinned policy that cannot be read back: its data is not the pinned form, does not match
    the event, or its text does not load as a policy in this version of countersign."""


def pin(policy: Any) -> tuple[tuple[ev.PinnedFile, ...], bytes] | None:
    """(the `files` member, the data bytes) that pin `policy` (a dsl.Policy) in a `policy`
    event; None when it cannot be pinned (an object without source files, a file that is not
    UTF-8, or files whose combined digest is not the policy's: nothing false is ever pinned)."""
    sources = getattr(policy, "sources", None)
    groups = getattr(policy, "external_groups", None) or {}
    if not sources:
        return None
    files, texts = [], []
    for source in sources:
        if not isinstance(source, PolicyFile) or not isinstance(source.path, str):
            return None
        try:
            text = source.data.decode("utf-8")
        except (UnicodeDecodeError, AttributeError):
            return None
        # a path from a file name of undecodable bytes is kept escaped (`\udcff`), as `source` is
        path = source.path.encode("utf-8", "backslashreplace").decode("utf-8")
        files.append(ev.PinnedFile(path=path, sha256=hashlib.sha256(source.data).hexdigest()))
        texts.append({"path": path, "text": text})
    shown = {name: sorted(set(members)) for name, members in groups.items()}
    if _digest_of(files, shown) != getattr(policy, "digest", None):
        return None
    return tuple(files), canonical_spelling({"files": texts, "groups": shown})


def _digest_of(files, groups: dict[str, list[str]]) -> str:
    from dsl.policy import policy_digest  # the compiler's imports only where a policy is pinned

    return policy_digest(combined_digest([(f.path, f.sha256) for f in files]), {g: tuple(m) for g, m in groups.items()})


def _decode(event: ev.PolicyLoaded, data: bytes) -> tuple[list[bytes], dict[str, list[str]]]:
    """The files' bytes (in the event's order) and the groups of a pinned policy's data, checked
    against the event (module docstring). Raises PinError saying what is wrong."""
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise PinError(f"the data beside the body is not JSON: {exc}") from None
    if not isinstance(value, dict) or set(value) != {"files", "groups"}:
        raise PinError("the data of a policy event that pins its policy must hold exactly ['files', 'groups']")
    files, groups = value["files"], value["groups"]
    if not isinstance(files, list) or len(files) != len(event.files):
        raise PinError(f"the data must hold the text of the {len(event.files)} file(s) the event lists")
    texts: list[bytes] = []
    for listed, stored in zip(event.files, files):
        if not (isinstance(stored, dict) and set(stored) == {"path", "text"} and isinstance(stored["text"], str)):
            raise PinError("each file of the data is {\"path\": str, \"text\": str}")
        if stored["path"] != listed.path:
            raise PinError(f"the data holds the file {stored['path']!r} where the event lists {listed.path!r}")
        try:
            raw = stored["text"].encode("utf-8")
        except UnicodeEncodeError:
            raise PinError(f"the text of {listed.path!r} is not Unicode text") from None
        if hashlib.sha256(raw).hexdigest() != listed.sha256:
            raise PinError(f"the stored text of {listed.path!r} does not match its digest in the chain")
        texts.append(raw)
    if not (isinstance(groups, dict) and all(isinstance(m, list) and all(isinstance(i, str) for i in m)
                                             and m == sorted(set(m)) for m in groups.values())):
        raise PinError("the groups of the data are {NAME: [identity, ...]}, each list sorted without repeats")
    if _digest_of(event.files, groups) != event.digest:
        raise PinError("the stored policy (its files and roster groups) does not match its digest in the chain")
    if canonical_spelling(value) != data:
        raise PinError("the stored data is not in its canonical spelling: it was changed after it was written")
    return texts, groups


def data_problem(event: ev.PolicyLoaded, data: bytes) -> str | None:
    """What is wrong with the data beside a `policy` event (for ledger verify), or None: null
    for an event without `files`; for one with, the pinned form, matching the event's files and
    digest, in its canonical spelling."""
    if event.files is msgspec.UNSET:
        return None if data == b"null" else "a policy event without files carries no data (its data must be null)"
    try:
        _decode(event, data)
    except PinError as exc:
        return str(exc)
    except RecursionError:
        return "the data beside the body nests too deeply to read"
    return None


def load(event: ev.PolicyLoaded, data: bytes):
    """The dsl.Policy a pinning `policy` event keeps, loaded from its data. Raises PinError when
    the event pins nothing, its data does not match it, or the text does not load (a policy this
    version of countersign refuses, or one of several files, which needs a loader of includes)."""
    if event.files is msgspec.UNSET:
        raise PinError("the policy event does not keep the policy's text (written before policies were pinned)")
    texts, groups = _decode(event, data)
    from dsl import Policy, PolicyError

    try:
        if len(texts) == 1:
            path = event.files[0].path
            text = texts[0].decode("utf-8").removeprefix("\ufeff")
            policy = Policy.from_text(text, name=path, default_name=PurePath(path).stem, source_bytes=texts[0],
                                      groups=groups or None)
        else:
            # A policy of several files (include) is read by the loader that resolves includes
            # from the files given, not from the file system (v2 includes: Policy.from_sources).
            from_sources = getattr(Policy, "from_sources", None)
            if from_sources is None:
                raise PinError("the pinned policy has several files (includes), which this version cannot load")
            policy = from_sources([PolicyFile(f.path, t) for f, t in zip(event.files, texts)], groups=groups or None)
    except PolicyError as exc:
        raise PinError(f"the pinned policy does not load: {str(exc).splitlines()[0] if str(exc) else 'errors'}") from None
    if policy.digest != event.digest:
        raise PinError("the pinned policy loads with another digest than the one recorded")
    return policy
