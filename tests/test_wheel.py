"""The installed package finds its grammar: build the wheel, install it into a fresh virtual
environment, and check a sample policy from another directory. Where the compiled verifier can be
built, the wheel ships it (tagged for this platform) and the fresh environment imports it."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from native_support import EXT_SUFFIX, source_sha256, why_not_buildable

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _without_pythonpath():
    """The commands below run the installed wheel: a PYTHONPATH naming a checkout (as tests in a
    git worktree are run, its subprocesses needing that checkout) would come before it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONPATH", raising=False)
        yield


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel, built without network, and the python of a fresh venv it is installed in."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True,
    )
    wheel = next(dist.glob("countersign-*.whl"))

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
    return wheel, venv, purelib, elsewhere


@pytest.mark.slow
def test_an_installed_wheel_checks_a_policy_from_another_directory(installed):
    wheel, venv, purelib, elsewhere = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert "dsl/grammars/policy.lark" in names
    assert not any(n.startswith(("tests/", "samples/")) for n in names)

    python = venv / "bin" / "python"
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


@pytest.mark.slow
def test_the_wheel_ships_the_compiled_verifier_where_it_can_be_built(installed):
    reason = why_not_buildable()
    if reason:
        pytest.skip(f"the compiled verifier cannot be built here: {reason}")
    wheel, venv, purelib, elsewhere = installed
    archive = zipfile.ZipFile(wheel)
    assert f"ledger/_native{EXT_SUFFIX}" in archive.namelist(), f"{wheel.name} has no compiled verifier"
    assert not wheel.name.endswith("-py3-none-any.whl"), f"{wheel.name} ships a compiled module under a pure-python tag"
    metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
    assert "Root-Is-Purelib: false" in archive.read(metadata).decode()

    shipped = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ledger._native as n; print(n.__file__); print(n.SOURCE_SHA256)"],
        cwd=elsewhere, capture_output=True, text=True,
    )
    assert shipped.returncode == 0, shipped.stderr
    where, digest = shipped.stdout.split()
    assert Path(where).is_relative_to(venv), f"ledger._native came from {where}, not the installed wheel"
    # The build of the source the wheel ships beside it (or, without it, the checkout's).
    source = archive.read("ledger/_native.c") if "ledger/_native.c" in archive.namelist() else None
    assert digest == source_sha256(source)


@pytest.mark.slow
def test_an_installed_wheel_writes_the_report_page(installed, tmp_path):
    """`ledger report` finds its template inside the installed package (core dependencies only)."""
    wheel, venv, purelib, elsewhere = installed
    assert "ledger/analytics/templates/report.html" in zipfile.ZipFile(wheel).namelist()
    countersign = str(venv / "bin" / "countersign")
    ledger = tmp_path / "ledger"
    simulated = subprocess.run(
        [countersign, "simulate", "--policy", str(ROOT / "samples/retail.policy"), "--calls",
         str(ROOT / "samples/demo-calls.jsonl"), "--reviewer", str(ROOT / "samples/demo-reviewer.json"),
         "--ledger", str(ledger)], cwd=elsewhere, capture_output=True, text=True)
    assert simulated.returncode == 0, simulated.stderr
    page = tmp_path / "report.html"
    result = subprocess.run([countersign, "ledger", "report", str(ledger), "--out", str(page)], cwd=elsewhere,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert page.read_text().count("<svg") == 9
