"""The installed package finds its grammar: build the wheel, install it into a fresh virtual
environment, and check a sample policy from another directory."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_an_installed_wheel_checks_a_policy_from_another_directory(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True,
    )
    wheel = next(dist.glob("countersign-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "dsl/grammars/policy.lark" in names
    assert not any(n.startswith(("tests/", "samples/")) for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True)
    # Lend the new environment this one's dependencies (lark, msgspec, typer, ...) without network.
    # A path listed in a .pth file is added as-is; the .pth files inside it (this environment's
    # editable install of the checkout) are not processed, so `dsl` can only come from the wheel.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    lent = [p for p in site.getsitepackages() if Path(p).is_dir()] or [sysconfig.get_paths()["purelib"]]
    (Path(purelib) / "lent-dependencies.pth").write_text("\n".join(lent) + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(ROOT / "samples" / "retail.policy", elsewhere / "retail.policy")
    where = subprocess.run(
        [str(python), "-c", "import dsl.grammar; print(dsl.grammar.grammar_path())"],
        cwd=elsewhere, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert where.startswith(purelib), f"the grammar came from {where}, not the installed wheel"
    result = subprocess.run(
        [str(venv / "bin" / "countersign"), "policy", "check", "retail.policy"], cwd=elsewhere, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "retail.policy: ok" in result.stdout
