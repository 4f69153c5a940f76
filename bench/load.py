"""Load time: parse + check + compile of a policy's text (`Policy.from_text`), and the parse of
the same rules as a Cedar policy set (`cedarpy.PolicySet.from_str`).

Warm loads run in this process after one untimed load (the grammar is built once per process and
reused); the median of several runs is reported, with the parse and check steps timed on their
own (compile and the rest is the difference). The first load in a fresh process, which also
builds the parser, is measured separately in a subprocess (`python -m bench.coldload`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsl import Policy
from dsl.checker import check
from dsl.parser import parse

ROOT = Path(__file__).resolve().parents[1]


def _median_ms(fn, repeats: int) -> tuple[float, list[float]]:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(runs), 2), [round(r, 2) for r in runs]


def warm(text: str, repeats: int) -> dict:
    Policy.from_text(text, "bench.policy")  # untimed: builds the parser if this process has not
    total, runs = _median_ms(lambda: Policy.from_text(text, "bench.policy"), repeats)
    parse_ms, _ = _median_ms(lambda: parse(text, "bench.policy"), repeats)
    tree = parse(text, "bench.policy")
    check_ms, _ = _median_ms(lambda: check(tree), repeats)
    return {
        "median_ms": total,
        "runs_ms": runs,
        "parse_ms": parse_ms,
        "check_ms": check_ms,
        "compile_and_rest_ms": round(max(0.0, total - parse_ms - check_ms), 2),
    }


def cold(text: str) -> dict:
    """A fresh interpreter: import dsl, then the first and second load of `text`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.policy"
        path.write_text(text, encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run(
            [sys.executable, "-m", "bench.coldload", str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:]}
    return json.loads(out.stdout)


def cedar(text: str, repeats: int) -> dict:
    import cedarpy

    cedarpy.PolicySet.from_str(text)
    total, runs = _median_ms(lambda: cedarpy.PolicySet.from_str(text), repeats)
    return {"median_ms": total, "runs_ms": runs}
