"""Verify: its rate against hashing the same bytes, and its peak memory, on a large ledger.

Each measurement runs in a child process of its own (`python -m bench.ledger_verify ...`), so
that its peak resident memory (VmHWM from /proc/self/status) is its own, and the page cache is
warm for all of them alike (the files are read once before).

- `verify`: `ledger.proof.verify.verify(DIR)`, everything it checks (layout, canonical body, chain,
  hashes, timestamps, data digests, the workflow fold); its events per second and peak RSS. It
  answers with the compiled verifier (ledger/_native.c, two threads) when that is built and
  accepts the ledger; `engine` records which one answered.
- `verify_python`: the same with `engine="python"`, the reference verifier alone.
- `hash bodies`: the limit for one core: read the segments and SHA-256 each line's body (the
  bytes verify hashes), nothing else.
- `hash files`: SHA-256 of the whole segment files in 16 MiB reads (the raw hash throughput).
- `hash bodies, 2 processes`: the bodies limit with the segments split over two processes.
- `baseline`: a child that imports the ledger package and does nothing: the RSS every child has.
"""

from __future__ import annotations

import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.timing import ROOT


def _rss_mb() -> float:
    """This process's peak resident memory in MB: VmHWM (Linux), which starts afresh at exec;
    ru_maxrss instead keeps the high-water mark of the parent the child was forked from."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # kB on Linux


def _segments(path: Path) -> list[Path]:
    from ledger.store.log import list_segments

    return list_segments(path)


def hash_bodies(segments: list[Path]) -> int:
    sha256 = hashlib.sha256
    count = 0
    for segment in segments:
        with open(segment, "rb") as handle:
            data = handle.read()
        for line in data.split(b"\n"):
            if line:
                sha256(line[8 : line.find(b',"hash":"', 8)]).digest()
                count += 1
    return count


def hash_files(segments: list[Path]) -> int:
    total = 0
    for segment in segments:
        digest = hashlib.sha256()
        with open(segment, "rb") as handle:
            while chunk := handle.read(16 << 20):
                digest.update(chunk)
                total += len(chunk)
    return total


def _child(mode: str, path: Path) -> dict:
    started = time.perf_counter()
    out: dict = {"mode": mode}
    if mode in ("verify", "verify_python"):
        from ledger.proof import fast
        from ledger.proof.verify import verify

        report = verify(path, engine="auto" if mode == "verify" else "python")
        out.update(ok=report.ok, events=report.count, problem=str(report.problem) if report.problem else None)
        out["seconds"] = time.perf_counter() - started
        out["peak_rss_mb"] = _rss_mb()
        # Which verifier answered (asked again, after the measurement).
        out["engine"] = "python" if mode == "verify_python" or fast.verify_fast(path) is None else "native"
        return out
    elif mode == "hash_bodies":
        out["events"] = hash_bodies(_segments(path))
    elif mode == "hash_files":
        out["bytes"] = hash_files(_segments(path))
    elif mode == "hash_bodies_2":
        from concurrent.futures import ProcessPoolExecutor

        segments = _segments(path)
        halves = [segments[0::2], segments[1::2]]
        with ProcessPoolExecutor(2) as pool:
            out["events"] = sum(pool.map(hash_bodies, halves))
    elif mode == "baseline":
        import ledger.proof.verify  # noqa: F401
    out["seconds"] = time.perf_counter() - started
    out["peak_rss_mb"] = _rss_mb()
    return out


def measure(mode: str, path: Path) -> dict:
    """Run one measurement in a fresh child process."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.ledger_verify", mode, str(path)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench.ledger_verify {mode} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(path: Path, events: int, log=print) -> dict:
    log(f"bench: verify on {events:,} events: warming the page cache, hashing")
    hash_files(_segments(path))  # the files in the page cache for every contender
    size = sum(p.stat().st_size for p in _segments(path))
    results = {m: measure(m, path) for m in ("baseline", "hash_files", "hash_bodies", "hash_bodies_2")}
    log(f"bench: verify on {events:,} events: verify")
    results["verify"] = measure("verify", path)
    log(f"bench: verify on {events:,} events: the reference verifier (about {events / 50_000 / 60:.0f} min at 50k events/s)")
    results["verify_python"] = measure("verify_python", path)
    rate = {m: round(events / r["seconds"]) for m, r in results.items() if m != "baseline"}
    v = results["verify"]
    return {
        "events": events,
        "bytes": size,
        "verify_ok": v["ok"],
        "verify_problem": v["problem"],
        "rate_events_per_s": rate,
        "hash_files_mb_per_s": round(size / results["hash_files"]["seconds"] / 1e6),
        "seconds": {m: round(r["seconds"], 2) for m, r in results.items()},
        "peak_rss_mb": {m: r["peak_rss_mb"] for m, r in results.items()},
        "engine": v["engine"],
        "reference_ok": results["verify_python"]["ok"],
        "verify_vs_hash_bodies": round(rate["verify"] / rate["hash_bodies"], 3),
        "verify_vs_hash_bodies_2": round(rate["verify"] / rate["hash_bodies_2"], 3),
        "reference_vs_hash_bodies": round(rate["verify_python"] / rate["hash_bodies"], 3),
        "verify_vs_hash_files": round(rate["verify"] / rate["hash_files"], 3),
        "verify_peak_mb_above_baseline": round(v["peak_rss_mb"] - results["baseline"]["peak_rss_mb"], 1),
    }


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], Path(sys.argv[2]))))
