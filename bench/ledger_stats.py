"""`stats` on a large ledger through the columnar projection (ledger.analytics.projection).

- `build`: the projection made from the log alone (`refresh(rebuild=True)`): every line read,
  checked and folded; events per second.
- `noop refresh`: a refresh with nothing new (what every `stats` call pays first: the stored
  head checked against the log, the segments listed).
- `incremental`: 10,000 events appended by a real writer, then one refresh.
- `stats cold`: a new process: import ledger.analytics.stats (and duckdb), refresh, query; the time of
  the whole and of the call alone.
- `stats warm`: further calls in one process (each opens the database, refreshes, queries).
- `views`: the same Stats through the views (every line parsed at every call) on a small
  ledger, where they are checked equal to the projection's.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import ledger_gen
from bench.timing import ROOT


def _copy_for_appending(source: Path, target: Path) -> None:
    """A ledger beside `source` sharing its segments (hard links) but the last (copied), so that
    appending to it leaves the cached ledger as it is; the projection copied too, when there is one."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    from ledger.store.log import list_segments

    segments = list_segments(source)
    for segment in segments[:-1]:
        os.link(segment, target / segment.name)
    shutil.copyfile(segments[-1], target / segments[-1].name)
    if (source / "projection").is_dir():
        shutil.copytree(source / "projection", target / "projection")


def _append_lawful(path: Path, n: int) -> None:
    """Append `n` events (allowed calls, started and executed) with a real writer."""
    from ledger import events as ev
    from ledger.store.log import Ledger

    from ledger.digest import encode_arguments

    empty, empty_json = encode_arguments({})
    data = b'{"args":' + empty_json + b',"context":' + empty_json + b"}"
    with Ledger(path) as ledger:
        seq = ledger.head[0]
        items = []
        while len(items) + 3 <= n:
            request = seq + len(items) + 1
            items.append((ev.Proposed(run="r", proposer="agent", call_id=None, tool="Read", args_digest=empty,
                                      context_digest=empty, policy="bench", policy_digest=ledger_gen.POLICY_DIGEST,
                                      effect="allow", rules=(ev.RuleRef(id="allow-read", line=4),), reasons=()), data))
            items.append((ev.ExecutionStarted(request=request, args_digest=empty, executor=None), None))
            items.append((ev.Executed(request=request, args_digest=empty, outcome="ok", result_digest=None, error=None), None))
        for i in range(0, len(items), 1000):
            ledger.append_batch(items[i : i + 1000])


_COLD = """
import json, sys, time
t0 = time.perf_counter()
from ledger.analytics.stats import stats
t1 = time.perf_counter()
s = stats(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "events": s.events}))
"""


def run(path: Path, events: int, warm_calls: int = 10, log=print) -> dict:
    from ledger.analytics import projection as proj
    from ledger.analytics.stats import projection_stats, views_stats

    out: dict = {"events": events}
    log(f"bench: stats on {events:,} events: building the projection from the log")
    started = time.perf_counter()
    built = proj.refresh(path, rebuild=True)
    out["build_seconds"] = round(time.perf_counter() - started, 2)
    out["build_events_per_s"] = round(built.events / out["build_seconds"])
    assert built.complete and built.events == events, built
    db = proj.directory(path) / proj.DATABASE
    out["projection_mb"] = round(sum(p.stat().st_size for p in proj.directory(path).iterdir()) / 1e6, 1)
    noop = [proj.refresh(path).seconds for _ in range(5)]
    out["noop_refresh_ms"] = round(statistics.median(noop) * 1000, 1)

    log(f"bench: stats on {events:,} events: cold (new process) and warm")
    proc = subprocess.run([sys.executable, "-c", _COLD, str(path)], cwd=ROOT, capture_output=True, text=True, check=True)
    cold = json.loads(proc.stdout.strip().splitlines()[-1])
    out["cold_import_ms"] = round(cold["import_s"] * 1000)
    out["cold_call_ms"] = round(cold["call_s"] * 1000)
    out["cold_total_ms"] = out["cold_import_ms"] + out["cold_call_ms"]
    warm = []
    for _ in range(warm_calls):
        t = time.perf_counter()
        s = projection_stats(path)
        warm.append(time.perf_counter() - t)
        assert s is not None and s.events == events
    out["warm_ms"] = {"median": round(statistics.median(warm) * 1000, 1), "min": round(min(warm) * 1000, 1),
                      "max": round(max(warm) * 1000, 1), "calls": warm_calls}
    out["requests"] = s.requests

    log(f"bench: stats on {events:,} events: incremental refresh after 10,000 appends")
    copy = ledger_gen.workdir() / "stats-append"
    _copy_for_appending(path, copy)
    _append_lawful(copy, 10_000)
    t = time.perf_counter()
    inc = proj.refresh(copy)
    out["incremental"] = {"added": inc.added, "seconds": round(time.perf_counter() - t, 3), "rebuilt": inc.rebuilt,
                          "complete": inc.complete}
    t = time.perf_counter()
    projection_stats(copy)
    out["incremental"]["stats_after_ms"] = round((time.perf_counter() - t) * 1000, 1)
    shutil.rmtree(copy, ignore_errors=True)

    small_n = 50_000
    log(f"bench: stats: views against the projection on {small_n:,} events")
    small, _ = ledger_gen.cached(small_n, log=log)
    t = time.perf_counter()
    via_views = views_stats(small)
    views_s = time.perf_counter() - t
    proj.refresh(small, rebuild=True)
    t = time.perf_counter()
    via_projection = projection_stats(small)
    out["small"] = {"events": small_n, "views_seconds": round(views_s, 2),
                    "projection_warm_ms": round((time.perf_counter() - t) * 1000, 1),
                    "identical_stats": via_views == via_projection}
    del db
    return out
