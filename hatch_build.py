"""Build ledger/_native.c (the compiled verifier) when the wheel or the editable install is built.

Why a hook and not setuptools: the project builds with hatchling, which has no extension support,
and the module is one C file linked against OpenSSL's libcrypto, so one compiler call does it.

The module is optional: ledger.store.native falls back to the Python verifier without it. So a missing
compiler, missing OpenSSL headers or any compile error only prints one warning line to stderr and
the install goes on (a wheel then stays pure-python); COUNTERSIGN_NO_NATIVE=1 skips the build.
The module's SOURCE_SHA256 is the sha256 of the exact bytes compiled, so ledger.store.native can refuse
a build of another source than the ledger/_native.c beside it.

- editable install: the module is written next to the source (ledger/_native<EXT_SUFFIX>, git
  ignores it), where the path-based editable install imports it;
- wheel: it is compiled in a temporary directory and shipped as ledger/_native<EXT_SUFFIX>,
  and the wheel is tagged for this interpreter and platform.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "ledger/_native.c"


class NativeBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        name = "_native" + sysconfig.get_config_var("EXT_SUFFIX")
        in_tree = root / "ledger" / name
        if version == "editable":
            in_tree.unlink(missing_ok=True)  # never leave an older build behind a failed one
        if os.environ.get("COUNTERSIGN_NO_NATIVE") == "1":
            _warn("COUNTERSIGN_NO_NATIVE=1")
            return
        self._tmp = tempfile.mkdtemp(prefix="countersign-native-")
        target = Path(self._tmp) / name
        why = _compile(root / SOURCE, target, Path(self._tmp))
        if why:
            _warn(why)
        elif version == "editable":
            shutil.move(target, in_tree)
        else:
            build_data["force_include"][str(target)] = f"ledger/{name}"
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)


def _compile(source: Path, target: Path, workdir: Path) -> str | None:
    """Compile `source` into `target`; None on success, else why not (one line)."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "")
    if not cc or shutil.which(cc[0]) is None:
        return f"no C compiler ({cc[0] if cc else 'none configured'})"
    try:
        data = source.read_bytes()
    except OSError as exc:
        return f"cannot read {SOURCE}: {exc.strerror}"
    # Compile a copy of the bytes that were hashed: the file may change while this runs.
    copy = workdir / "_native.c"
    copy.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    paths = sysconfig.get_paths()
    includes = {paths["include"], paths["platinclude"], str(source.parent)}
    command = [
        *cc, "-O2", "-fPIC", "-shared", *shlex.split(os.environ.get("CPPFLAGS", "")),
        *shlex.split(os.environ.get("CFLAGS", "")), *(f"-I{d}" for d in sorted(includes)),
        f'-DCOUNTERSIGN_SOURCE_SHA256="{digest}"', str(copy), "-o", str(target),
        *shlex.split(os.environ.get("LDFLAGS", "")), "-lcrypto",
    ]
    if sys.platform == "darwin":
        command[len(cc):len(cc)] = ["-undefined", "dynamic_lookup"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cc[0]}: {exc}"
    if result.returncode != 0:
        lines = result.stderr.splitlines()
        first = next((line for line in lines if "error" in line), lines[0] if lines else "")
        first = first.replace(str(copy), SOURCE).strip()
        return f"{cc[0]} failed: {first or 'exit status ' + str(result.returncode)}"
    return None


def _warn(why: str) -> None:
    print(f"countersign: the compiled verifier was not built ({why}); ledger verify uses the Python verifier",
          file=sys.stderr)
