"""hatch_build.py builds the compiled verifier (ledger/_native.c) when it can, and nothing breaks
when it cannot: the editable install imports the build of the source beside it, and a build
without a compiler (or switched off) gives a pure-python wheel and one warning line."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from native_support import ROOT, source_sha256, why_not_buildable


def test_the_editable_install_imports_the_build_of_the_source_beside_it():
    reason = why_not_buildable()
    if reason:
        pytest.skip(f"the compiled verifier cannot be built here: {reason}")
    try:
        native = importlib.import_module("ledger._native")
    except ImportError as exc:
        pytest.fail(f"the editable install built no ledger._native ({exc}); `pip install -v -e .` shows hatch_build.py's warning")
    assert Path(native.__file__).parent == ROOT / "ledger", f"ledger._native came from {native.__file__}"
    assert native.SOURCE_SHA256 == source_sha256(), (
        "ledger._native is a build of another ledger/_native.c: reinstall (make test does when the source changes)"
    )


@pytest.mark.parametrize("env", [{"COUNTERSIGN_NO_NATIVE": "1"}, {"CC": "false"}], ids=["switched-off", "compile-fails"])
def test_without_the_compiled_verifier_the_wheel_is_pure_python_and_one_line_says_why(tmp_path, env):
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from hatchling.build import build_wheel; print(build_wheel(sys.argv[1]))", str(tmp_path)],
        cwd=ROOT, env={**os.environ, "COUNTERSIGN_NO_NATIVE": "", **env}, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("countersign:")]
    assert len(warnings) == 1 and "the compiled verifier was not built (" in warnings[0], result.stderr
    assert "the Python verifier" in warnings[0]
    wheel = tmp_path / result.stdout.strip().splitlines()[-1]
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if n.startswith("ledger/_native") and not n.endswith(".c")]
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
        assert "Root-Is-Purelib: true" in archive.read(metadata).decode()
