"""The README's short tour, run word for word: every command block of "A short tour" in a scratch
directory, with this environment's `countersign` and `python` first on PATH and the demo ledger
that `make demo` writes beside it. A block must exit 0 (`bash -e -o pipefail`), except the one the
README says fails with exit code 2 (the misspelt keyword). The Python block's printed lines are
compared with the results its comments promise.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def tour_blocks() -> list[str]:
    """The indented (4-space) code blocks between "## A short tour" and the next section."""
    section = README.split("## A short tour", 1)[1].split("\n## ", 1)[0]
    blocks, current = [], []
    for line in section.split("\n"):
        if line.startswith("    ") or (current and not line.strip()):
            current.append(line)
            continue
        if current:
            blocks.append(textwrap.dedent("\n".join(current)).strip("\n") + "\n")
            current = []
    if current:
        blocks.append(textwrap.dedent("\n".join(current)).strip("\n") + "\n")
    return blocks


def test_the_tour_runs_as_written(tmp_path):
    blocks = tour_blocks()
    assert blocks[0].startswith(". .venv/bin/activate"), "the tour starts by activating the environment"
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    env.pop("COUNTERSIGN_CORPUS", None)
    # what `make demo` leaves in build/, one level above the tour directory
    subprocess.run(
        [str(bin_dir / "countersign"), "simulate", "--policy", str(ROOT / "samples/retail.policy"),
         "--calls", str(ROOT / "samples/demo-calls.jsonl"), "--reviewer", str(ROOT / "samples/demo-reviewer.json"),
         "--ledger", str(tmp_path / "build/demo-ledger")],
        env=env, check=True, capture_output=True,
    )
    (tmp_path / "samples").symlink_to(ROOT / "samples")  # the tour runs in the checkout: ../samples is there
    tour = tmp_path / "tour"
    tour.mkdir()
    ran = 0
    port = str(_free_port())  # step 11 serves on 8470 in the README; a test must not collide with anything
    try:
        ran = _run_blocks(blocks, tour, env, port)
    finally:
        pid = tour / "serve.pid"
        if pid.exists():  # a step that failed half way leaves the service running
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid.read_text()), signal.SIGKILL)
    assert ran == len(blocks) - 1 >= 9  # steps 1 to 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_blocks(blocks: list[str], tour: Path, env: dict, port: str) -> int:
    ran = 0
    for block in blocks[1:]:
        block = block.replace("8470", port)
        failing = "typo.policy" in block
        options = [] if failing else ["-e", "-o", "pipefail"]
        result = subprocess.run(["bash", *options, "-c", block], cwd=tour, env=env, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in result.stderr, (block, result.stderr)
        if failing:
            assert result.returncode == 2, (block, result.stdout, result.stderr)
            assert "typo.policy:2:3: error: unknown keyword 'aprovers'" in result.stdout + result.stderr
        else:
            assert result.returncode == 0, (block, result.stdout, result.stderr)
        if block.startswith("python - <<'EOF'"):
            promised = [re.split(r"\s+#\s+", line, maxsplit=1)[1] for line in block.splitlines() if line.startswith("print(") and "  # " in line]
            printed = result.stdout.strip().splitlines()
            assert len(printed) == len(promised), (printed, promised)
            for shown, comment in zip(printed, promised):
                assert shown == comment.split(":")[0] if comment.startswith("True") else shown == comment, (shown, comment)
        ran += 1
    return ran
