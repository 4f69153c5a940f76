"""Small timing helpers: percentiles, the timer's own cost, and what machine this ran on."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def percentile(sorted_values: list[int] | list[float], q: float) -> float:
    """The q-th percentile (0..100) by the nearest-rank method; the list must be sorted."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n * q / 100), at least 1
    return sorted_values[int(rank) - 1]


def summary_ns(samples: list[int]) -> dict:
    """p50, p90, p99, mean and count of per-call times in nanoseconds."""
    if not samples:
        return {"n": 0}
    s = sorted(samples)
    return {
        "n": len(s),
        "p50_ns": percentile(s, 50),
        "p90_ns": percentile(s, 90),
        "p99_ns": percentile(s, 99),
        "mean_ns": round(statistics.fmean(s), 1),
    }


def timer_overhead_ns(n: int = 200_000) -> float:
    """The median cost of one `t0 = perf_counter_ns(); t1 = perf_counter_ns()` pair: what each
    per-call sample carries on top of the call itself (not subtracted from the numbers)."""
    pc = time.perf_counter_ns
    out = []
    for _ in range(n):
        t0 = pc()
        t1 = pc()
        out.append(t1 - t0)
    out.sort()
    return percentile(out, 50)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other work on the machine skews every number."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment() -> dict:
    status = _git("status", "--porcelain", "--", "dsl", "grammars", "bench")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": _cpu_model(),
            "cpus": os.cpu_count(),
            "memory_gb": _memory_gb(),
            "platform": platform.platform(),
            "arch": platform.machine(),
            "loadavg_at_start": loadavg(),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "versions": {
            "countersign_commit": _git("rev-parse", "--short", "HEAD"),
            "dsl_or_bench_modified": bool(status) if status is not None else None,
            "lark": _version("lark"),
            "cedarpy": _version("cedarpy"),
            "tree-sitter": _version("tree-sitter"),
            "tree-sitter-bash": _version("tree-sitter-bash"),
        },
    }
