"""Load time: parse + check + compile of a policy's text (`Policy.from_text`), and the parse of
the same rules as a Cedar policy set (`cedarpy.PolicySet.from_str`).

Warm loads run in this process after one untimed load (the grammar is built once per process and
reused); the median of several runs is reported (wall clock, and CPU time of the process, which
other work on the machine inflates less), with the parse and check steps timed inside those
loads (compile and the rest is the difference). The first load in a fresh process, which also
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

ROOT = Path(__file__).resolve().parents[1]


def _median_ms(fn, repeats: int) -> tuple[float, list[float]]:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(runs), 2), [round(r, 2) for r in runs]


def warm(text: str, repeats: int) -> dict:
    """Median of `repeats` loads, with the time spent in parse and in check measured inside those
    same loads (the two functions are wrapped with timers while they run)."""
    import dsl.checker as checker_module
    import dsl.parser as parser_module

    Policy.from_text(text, "bench.policy")  # untimed: builds the parser if this process has not
    spent: dict[str, float] = {}
    # dsl.policy imports both where it loads a policy (from the modules, at each load): wrapped there
    real = {"parse": parser_module.parse, "check": checker_module.check}

    def timed(name):
        fn = real[name]

        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = (time.perf_counter() - t0) * 1000

        return run

    runs, parse_runs, check_runs, cpu_runs = [], [], [], []
    parser_module.parse, checker_module.check = timed("parse"), timed("check")
    try:
        for _ in range(repeats):
            spent.clear()
            c0, t0 = time.process_time(), time.perf_counter()
            Policy.from_text(text, "bench.policy")
            runs.append((time.perf_counter() - t0) * 1000)
            cpu_runs.append((time.process_time() - c0) * 1000)
            parse_runs.append(spent["parse"])
            check_runs.append(spent["check"])
    finally:
        parser_module.parse, checker_module.check = real["parse"], real["check"]
    total = statistics.median(runs)
    parse_ms, check_ms = statistics.median(parse_runs), statistics.median(check_runs)
    return {
        "median_ms": round(total, 2),
        "runs_ms": [round(r, 2) for r in runs],
        "cpu_median_ms": round(statistics.median(cpu_runs), 2),
        "parse_ms": round(parse_ms, 2),
        "check_ms": round(check_ms, 2),
        "compile_and_rest_ms": round(statistics.median(r - p - c for r, p, c in zip(runs, parse_runs, check_runs)), 2),
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
