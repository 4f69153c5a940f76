"""The source files of a policy, and the digest they combine into.

A policy is read from one file, or, with `include "file.policy"` (docs/policy-language.md, "let
and include"; dsl.includes), from several. Either way its text is a sequence of `PolicyFile`s, the
file loaded first (the *root*) first, then each included file in the order the policy's loader
first reaches it, each once (`Policy.sources`). This module is the one definition of the digest
they combine into: the loader (dsl.policy, dsl.includes.files_digest) and the ledger that pins a
policy (ledger.pinning) both call it. `sources_digest` is what `Policy.source_digest` holds, and what
`dsl.policy.policy_digest` combines with the roster groups the policy names into `Policy.digest`,
the `policy_digest` every decision records:

- one file: `hex(SHA-256(its bytes))`, the digest every policy had before includes, so that a
  ledger written before them keeps its meaning;
- several: `hex(SHA-256(T))` with `T` the ASCII bytes of the JSON text

      {"files":[["PATH","<hex SHA-256 of its bytes>"],...],"format":"countersign-policy-files/1"}

  written as `json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=True)` writes
  it (RFC 8259; a character outside ASCII as a `\\uXXXX` escape), the files in the order above.
  The paths count: the same bytes included from elsewhere are another policy.

`path` is the file's name as the policy names it: the root's file name without its directory
(`refunds.policy`; `<policy>` for a policy given as text), an included file's path as its
`include` gives it, relative to the file that includes it. The ledger keeps exactly these files
beside the `policy` event that pins a policy (docs/ledger-format.md, section 11.5), so that the
text that decided every call can be read back, and checked against the digest, from the ledger.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePath
from typing import NamedTuple, Sequence

SOURCES_FORMAT = "countersign-policy-files/1"


class PolicyFile(NamedTuple):
    """One source file of a policy: its path as the policy names it, and its exact bytes."""

    path: str
    data: bytes


def file_digest(data: bytes) -> str:
    """hex SHA-256 of a file's bytes (64 lowercase digits)."""
    return hashlib.sha256(data).hexdigest()


def combined_digest(files: Sequence[tuple[str, str]]) -> str:
    """The digest of a policy's files given as (path, hex SHA-256 of its bytes), root first (see
    the module docstring). Raises ValueError for no files."""
    if not files:
        raise ValueError("a policy has at least one source file")
    if len(files) == 1:
        return files[0][1]
    text = json.dumps({"files": [[path, digest] for path, digest in files], "format": SOURCES_FORMAT},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def sources_digest(files: Sequence[PolicyFile]) -> str:
    """`combined_digest` of the files' bytes."""
    return combined_digest([(f.path, file_digest(f.data)) for f in files])


def root_path(source_name: str) -> str:
    """The path a root file is named by: the name it was loaded from, without its directory
    (`/etc/countersign/refunds.policy` → `refunds.policy`; `<policy>` stays `<policy>`)."""
    return PurePath(source_name).name or source_name
