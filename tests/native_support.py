"""Whether this machine can build ledger/_native.c, found out independently of hatch_build.py
(which would hide its own bugs behind a skip): a C compiler, Python's headers, OpenSSL's
<openssl/sha.h> and libcrypto, tried with a small program that calls SHA256()."""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")

PROBE = b"""#include <Python.h>
#include <openssl/sha.h>
int countersign_probe(void) { unsigned char d[SHA256_DIGEST_LENGTH]; SHA256((const unsigned char *)"", 0, d); return d[0]; }
"""


@functools.cache
def why_not_buildable() -> str | None:
    """None when the extension can be built here, else the reason it cannot (for a skip)."""
    if os.environ.get("COUNTERSIGN_NO_NATIVE") == "1":
        return "COUNTERSIGN_NO_NATIVE=1 switches the compiled verifier off"
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "")
    if not cc or shutil.which(cc[0]) is None:
        return f"no C compiler ({cc[0] if cc else 'sysconfig names none'})"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "probe.c").write_bytes(PROBE)
        result = subprocess.run(
            [*cc, "-fPIC", "-shared", f"-I{sysconfig.get_paths()['include']}", "probe.c", "-o", "probe.so", "-lcrypto"],
            cwd=tmp, capture_output=True, text=True,
        )
    if result.returncode != 0:
        first = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr.strip())
        return f"{cc[0]} cannot build against OpenSSL's libcrypto here: {first}"
    return None


def source_sha256(data: bytes | None = None) -> str:
    return hashlib.sha256((ROOT / "ledger" / "_native.c").read_bytes() if data is None else data).hexdigest()
