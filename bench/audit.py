"""`ledger audit` and `policy whatif` on a large ledger (issue 14: both on 1 M events in ≤ 60 s).

The ledger is bench/ledger_gen.py's workload (`cached(n, audited=True)`): its seq 2 pins
bench/audit.policy, and every proposal and edit records what that policy decides (its rules
decide by the context's `lane`), so the audit decides every call again and finds all of them
conforming, which the run checks. `whatif` replays it under a stricter variant (bench/whatif.policy:
Bash commands that push are denied, refunds over 500 asked of two supervisors, mail asked). Each
is timed once, end to end, in this process, with the page cache warm (the files are read once
before), as `countersign ledger audit DIR --json` and `countersign policy whatif ... --json` run
them, minus printing.

    python -m bench --only audit            # 1,000,000 events (the ledger is generated once, cached)
    python -m bench --only audit --quick    # 100,000 events
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import ledger_gen
from bench.timing import environment

TARGET_SECONDS = 60.0
WHATIF_POLICY = Path(__file__).with_name("whatif.policy")


def _warm(path: Path) -> None:
    for segment in sorted(path.glob("events-*.jsonl")):
        with open(segment, "rb") as handle:
            while handle.read(16 << 20):
                pass


def run(events: int, log=print) -> dict:
    from dsl import Policy
    from ledger.audit import audit
    from ledger.whatif import whatif

    path, info = ledger_gen.cached(events, audited=True, log=log)
    _warm(path)
    started = time.perf_counter()
    report = audit(path)
    audit_seconds = time.perf_counter() - started
    if report.calls == 0 or report.conforming != report.calls:
        raise SystemExit(f"bench audit: expected every call to conform, got {report.conforming:,} of {report.calls:,} "
                         f"({report.differing:,} differ, {report.unchecked:,} not checkable)")
    policy = Policy.load(WHATIF_POLICY)
    started = time.perf_counter()
    replayed = whatif(path, policy)
    whatif_seconds = time.perf_counter() - started
    return {
        "events": info["events"],
        "bytes": info["bytes"],
        "audit": {"seconds": round(audit_seconds, 2), "calls": report.calls, "conforming": report.conforming,
                  "events_per_second": round(info["events"] / audit_seconds)},
        "whatif": {"seconds": round(whatif_seconds, 2), "proposals": replayed.proposals, "changed": replayed.changed,
                   "stopped": replayed.stopped, "transitions": replayed.transitions,
                   "events_per_second": round(info["events"] / whatif_seconds)},
    }


def main(quick: bool, events: int | None, label: str, write: bool) -> int:
    n = events or (100_000 if quick else 1_000_000)
    result = run(n)
    scale = 1_000_000 / result["events"]
    verdicts = {}
    for name in ("audit", "whatif"):
        seconds = result[name]["seconds"]
        projected = seconds * scale
        verdicts[name] = {"what": f"{name} of 1,000,000 events in at most {TARGET_SECONDS:.0f} s",
                          "seconds": seconds, "events": result["events"],
                          "projected_1m_seconds": round(projected, 1),
                          "ok": projected <= TARGET_SECONDS,
                          "measured_at_1m": result["events"] >= 1_000_000}
    out = {"benchmark": "audit", "environment": environment(), "quick": quick, **result, "results": verdicts}
    print(f"audit:  {result['events']:,} events, {result['audit']['calls']:,} calls decided again, all conforming: "
          f"{result['audit']['seconds']:.1f} s ({result['audit']['events_per_second']:,} events/s)")
    print(f"whatif: {result['whatif']['proposals']:,} proposals replayed, {result['whatif']['changed']:,} change: "
          f"{result['whatif']['seconds']:.1f} s ({result['whatif']['events_per_second']:,} events/s)")
    for name, v in verdicts.items():
        scope = "" if v["measured_at_1m"] else f" (projected linearly from {v['events']:,} events)"
        print(f"  {name}: {v['projected_1m_seconds']:.1f} s at 1 M events{scope}: {'ok' if v['ok'] else 'OVER'} "
              f"(target {TARGET_SECONDS:.0f} s)")
    if write:
        from bench.__main__ import write as write_results

        write_results(out, f"{label}-audit")
    return 0 if all(v["ok"] for v in verdicts.values()) else 1
