"""The ledger half of `python -m bench` (issue 4, section 5), measured in one run:

1. appends: batched and single, against a bare loop and the eventsourcing library (bench.ledger_append);
2. verify: rate against hashing the same bytes, and peak memory (bench.ledger_verify);
3. stats through the projection, cold and warm (bench.ledger_stats);

on a ledger of 10,000,000 events (1,000,000 with --quick) made by bench.ledger_gen and cached in
the work directory (COUNTERSIGN_BENCH_DIR, default ~/.cache/countersign-bench). Results go to
bench/results/<date>-<label>-ledger.json and a Markdown table is printed.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

from bench import ledger_append, ledger_gen, ledger_stats, ledger_verify
from bench.timing import environment, loadavg

RESULTS = Path(__file__).resolve().parent / "results"

TARGETS = {
    "append_batched_vs_bare": {"what": "batched append rate / bare encode+hash+write loop (same events, one fsync per batch)", "min": 0.60},
    "append_vs_eventsourcing": {"what": "batched append rate / eventsourcing on SQLite (WAL, synchronous=FULL), same batches", "min": 5.0},
    "verify_vs_hash": {"what": "verify rate / SHA-256 of the same bodies and nothing else (2 processes: verify uses both cores)", "min": 0.50},
    "verify_rate": {"what": "verify events/s (both cores may be used)", "min": 1_000_000},
    "verify_peak_memory": {"what": "verify's peak RSS on the large ledger, MB", "max": 100},
    "stats_warm": {"what": "stats on the large ledger, warm, ms (through the projection)", "max": 300},
}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def verdicts(out: dict) -> dict:
    a, v, s = out.get("append"), out.get("verify"), out.get("stats")
    res = {}
    if a:
        res["append_batched_vs_bare"] = {"value": a["batched_vs_bare"], "min": 0.60, "pass": a["batched_vs_bare"] >= 0.60}
        if "batched_vs_eventsourcing" in a:
            res["append_vs_eventsourcing"] = {
                "value": a["batched_vs_eventsourcing"], "single": a["single_vs_eventsourcing"], "min": 5.0,
                "pass": a["batched_vs_eventsourcing"] >= 5.0,
            }
    if v:
        # verify uses both cores, so its limit is hashing the bodies on both (one core: reported too)
        res["verify_vs_hash"] = {"value": v["verify_vs_hash_bodies_2"], "vs_one_core": v["verify_vs_hash_bodies"],
                                 "vs_hash_files": v["verify_vs_hash_files"], "engine": v["engine"], "min": 0.5,
                                 "pass": v["verify_vs_hash_bodies_2"] >= 0.5 and v["verify_ok"]}
        res["verify_rate"] = {"value": v["rate_events_per_s"]["verify"], "min": 1_000_000,
                              "pass": v["rate_events_per_s"]["verify"] >= 1_000_000}
        res["verify_peak_memory"] = {"value_mb": v["peak_rss_mb"]["verify"], "max_mb": 100,
                                     "pass": v["peak_rss_mb"]["verify"] <= 100}
    if s:
        res["stats_warm"] = {"value_ms": s["warm_ms"]["median"], "max_ms": 300, "pass": s["warm_ms"]["median"] <= 300}
    return res


def table(out: dict) -> str:
    a, v, s = out.get("append"), out.get("verify"), out.get("stats")
    lines = [f"ledger benchmarks, {out['machine']['cpu']}, {out['machine']['cpus']} CPUs, {out['date'][:10]}, "
             f"commit {out['versions']['countersign_commit']}, load average at start {out['machine']['loadavg_at_start']}", "",
             "| what | measured | limit, same run | ratio | target |", "|---|---:|---:|---:|---|"]
    t = out["results"]

    def mark(key):
        return "" if key not in t else (" **met**" if t[key]["pass"] else " **not met**")

    if a:
        r = a["rate_events_per_s"]
        lines.append(f"| batched append, {a['batch']:,} a batch, events/s | {r['ledger_batched']:,} | {r['bare_loop']:,} (bare loop) "
                     f"| {a['batched_vs_bare']:.0%} | ≥ 60 %{mark('append_batched_vs_bare')} |")
        lines.append(f"| durable single appends/s | {r['ledger_single']:,} | {r['bare_single']:,} (write + fdatasync) "
                     f"| {a['single_vs_bare_single']:.0%} | |")
        if "es_batched" in r:
            lines.append(f"| eventsourcing {a['eventsourcing']['version']} on SQLite, batched, events/s | {r['es_batched']:,} | "
                         f"| ours {a['batched_vs_eventsourcing']}× | ≥ 5×{mark('append_vs_eventsourcing')} |")
            lines.append(f"| eventsourcing, single durable appends/s | {r['es_single']:,} | | ours {a['single_vs_eventsourcing']}× | |")
    if v:
        r = v["rate_events_per_s"]
        lines.append(f"| verify, {v['events']:,} events, events/s ({v['engine']} verifier) | {r['verify']:,} | {r['hash_bodies_2']:,} "
                     f"(SHA-256 of the bodies, 2 processes) | {v['verify_vs_hash_bodies_2']:.1%} | ≥ 50 %{mark('verify_vs_hash')}; "
                     f"≥ 1,000,000/s{mark('verify_rate')} |")
        lines.append(f"| | | {r['hash_bodies']:,} (the same, one process) | {v['verify_vs_hash_bodies']:.1%} | |")
        lines.append(f"| | | {r['hash_files']:,} (SHA-256 of the files, {v['hash_files_mb_per_s']:,} MB/s) | {v['verify_vs_hash_files']:.1%} | |")
        if "verify_python" in r:
            lines.append(f"| verify, the reference (Python) verifier alone, events/s | {r['verify_python']:,} | {r['hash_bodies']:,} (one process) "
                         f"| {v['reference_vs_hash_bodies']:.1%} | |")
        lines.append(f"| verify peak memory (RSS), MB | {v['peak_rss_mb']['verify']:,} | {v['peak_rss_mb']['baseline']} (an idle child) "
                     f"| | ≤ 100{mark('verify_peak_memory')} |")
    if s:
        lines.append(f"| stats, {s['events']:,} events, warm, ms (median of {s['warm_ms']['calls']}) | {s['warm_ms']['median']} | | | "
                     f"≤ 300{mark('stats_warm')} |")
        lines.append(f"| stats, cold: new process, ms (import / call) | {s['cold_total_ms']:,} ({s['cold_import_ms']} / {s['cold_call_ms']}) | | | |")
        lines.append(f"| projection: build from the log, s (events/s) | {s['build_seconds']} ({s['build_events_per_s']:,}) | | | |")
        lines.append(f"| projection: refresh with nothing new, ms / after 10,000 appends, s | {s['noop_refresh_ms']} / "
                     f"{s['incremental']['seconds']} | | | |")
        sm = s["small"]
        lines.append(f"| stats through the views, {sm['events']:,} events, s | {sm['views_seconds']} | | | identical: {sm['identical_stats']} |")
    return "\n".join(lines)


def main(quick: bool, events: int | None, label: str, write: bool, parts: set[str] | None = None) -> int:
    n = events or (1_000_000 if quick else 10_000_000)
    parts = parts or {"append", "verify", "stats"}
    out = environment()
    out["settings"] = {"events": n, "quick": quick, "workdir": str(ledger_gen.workdir()), "parts": sorted(parts)}
    out["targets"] = TARGETS
    work = ledger_gen.workdir()
    if "append" in parts:
        batched, single = (50_000, 500) if quick else (200_000, 2_000)
        out["append"] = ledger_append.run(work, batched, single, rounds=3, log=_log)
        out["loadavg_after_append"] = loadavg()
    if parts & {"verify", "stats"}:
        path, info = ledger_gen.cached(n, log=_log)
        out["ledger"] = {"path": str(path), **info}
        if "verify" in parts:
            out["verify"] = ledger_verify.run(path, info["events"], log=_log)
            out["loadavg_after_verify"] = loadavg()
        if "stats" in parts:
            out["stats"] = ledger_stats.run(path, info["events"], log=_log)
            out["loadavg_after_stats"] = loadavg()
    out["results"] = verdicts(out)
    print(table(out))
    if write:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = RESULTS / f"{stamp}-{label}-ledger.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        print(f"\nbench: results written to {path}")
    return 0
