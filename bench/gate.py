"""The shared Gate's benchmarks (issue 10): opening, catching up, syncs, a propose's own cost, the
review queue, and how fast a waiting agent hears a decision.

1. Open: a Gate opened on ledgers of 1,000 to 1,000,000 events (bench.ledger_gen's agent workload,
   its segments hard-linked into a work directory): the first open (no snapshot: a full replay
   that writes one) once, then opens from the snapshot (median of 5). Target: 1 M events ≤ 100 ms.
2. Catch-up: a Gate open at N events while another writer appends K proposals; the time of its
   next `refresh()`, per new event, at N = 10,000 and N = 1,000,000 (flat: proportional to the new
   events only).
3. Syncs: fdatasync calls (ledger.store.log._sync counted) for an allowed call proposed then
   executed, the same through `Gate.run`, and expiring 1,000 due requests. Targets: ≤ 2 for an
   allowed call that runs, ≤ 1 per batch of expiries.
4. Propose: a Gate's own cost per propose with the disk sync taken out (`_sync` a no-op), p50 and
   p99 over 3,000 calls of the hook mix (bench.hooks.MIX on samples/coding-agent.policy, each with a
   call id), and the same with the sync. Target: ≤ 50 µs p50 without the sync.
5. Review queue: `countersign review list` (a new process, as a person runs it: the oldest 50 of
   the queue, and with `--all` every one) on a ledger with 10,000 pending requests, and the same
   in-process (open, pending, arguments of all). Target ≤ 300 ms.
6. Wait: from another process's `review approve` returning to the waiting agent's `wait` returning
   (file-change notification), median of 10.

    python -m bench --only gate        # about 5 minutes with the 1,000,000-event ledger generated once
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import ledger_gen
from bench.timing import environment, loadavg, percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
OPEN_SIZES = (1_000, 10_000, 100_000, 1_000_000)

TARGETS = {
    "open_1m_ms": {"what": "Gate open from its snapshot at 1,000,000 events, median ms", "max": 100},
    "syncs_allowed_run": {"what": "fdatasyncs for an allowed call that runs (Gate.run)", "max": 2},
    "syncs_expiry_batch": {"what": "fdatasyncs for expiring 1,000 due requests", "max": 1},
    "propose_us": {"what": "Gate.propose p50 without the disk sync, less the policy's own decision (p50), µs", "max": 50},
    "review_list_ms": {"what": "countersign review list, 10,000 pending, wall ms (new process)", "max": 300},
}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _linked_copy(source: Path, target: Path) -> Path:
    """The ledger's segments hard-linked into `target` (a Gate writes its snapshot beside them),
    but the last one copied: appending to a hard link would append to the cached ledger itself."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    segments = sorted(source.glob("events-*.jsonl"))
    for segment in segments[:-1]:
        os.link(segment, target / segment.name)
    shutil.copyfile(segments[-1], target / segments[-1].name)
    return target


def _policy():
    from bench.hooks import POLICY
    from dsl import Policy

    return Policy.load(str(POLICY))


def bench_open(work: Path, sizes) -> dict:
    from ledger.workflow.gate import Gate

    out = {}
    for n in sizes:
        source, _info = ledger_gen.cached(n, log=_log)
        path = _linked_copy(source, work / f"open-{n}")
        started = time.perf_counter()
        Gate(None, path).close()
        first = time.perf_counter() - started
        times = []
        for _ in range(5):
            started = time.perf_counter()
            g = Gate(None, path)
            times.append(time.perf_counter() - started)
            g.close()
        size = sum(f.stat().st_size for f in (path / "cache").iterdir())
        out[n] = {"first_open_s": round(first, 2), "open_ms_median": round(statistics.median(times) * 1000, 1),
                  "open_ms_max": round(max(times) * 1000, 1), "snapshot_mb": round(size / 1e6, 1)}
        _log(f"bench gate: open at {n:,} events: first {first:.1f} s, then {out[n]['open_ms_median']} ms")
        shutil.rmtree(path)
    return out


def bench_catch_up(work: Path, sizes=(10_000, 1_000_000), batches=(100, 1_000, 10_000)) -> dict:
    from ledger.store.log import Ledger
    from ledger.workflow.gate import Gate

    out = {}
    for n in sizes:
        source, _info = ledger_gen.cached(n, log=_log)
        path = _linked_copy(source, work / f"catch-{n}")
        Gate(None, path).close()  # the snapshot
        out[n] = {}
        for k in batches:
            g = Gate(None, path)
            with Ledger(path) as other:
                proposals = [_proposal(i) for i in range(k)]
                for start in range(0, k, 5_000):
                    other.append_batch(proposals[start:start + 5_000])
            started = time.perf_counter()
            g.refresh()
            took = time.perf_counter() - started
            g.close()
            out[n][k] = {"ms": round(took * 1000, 1), "us_per_event": round(took / k * 1e6, 1)}
            _log(f"bench gate: catch-up at {n:,} events, {k:,} new: {out[n][k]['us_per_event']} µs an event")
        shutil.rmtree(path)
    return out


def _proposal(i: int):
    """A lawful allowed proposal (its digests those of its data), as another writer appends it."""
    from ledger import events as ev
    from ledger.digest import value_digest

    data = {"args": {"i": i}, "context": {}}
    return ev.Proposed(ts="", run=None, proposer="agent", call_id=None, tool="read_thing",
                       args_digest=value_digest(data["args"]), context_digest=value_digest({}), policy="p",
                       policy_digest="c" * 64, effect="allow", rules=(), reasons=()), data


class _CountedSync:
    def __init__(self):
        from ledger.store import log

        self.log, self.real, self.count = log, log._sync, 0

    def __enter__(self):
        def sync(fd):
            self.count += 1
            self.real(fd)

        self.log._sync = sync
        return self

    def __exit__(self, *exc):
        self.log._sync = self.real


def bench_syncs(work: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from support import policy

    from ledger.clock import ManualClock
    from ledger.workflow.gate import Gate
    from support import START

    clock = ManualClock(START)
    out = {}
    with Gate(policy(), work / "syncs", clock=clock) as g:
        with _CountedSync() as counted:
            p = g.propose("read_thing", {"id": 1}, proposer="agent")
            g.execute(p.request, lambda args: "ok")
        out["propose_then_execute"] = counted.count
        with _CountedSync() as counted:
            g.run("read_thing", {"id": 2}, lambda args: "ok", proposer="agent")
        out["run_allowed"] = counted.count
        for i in range(1_000):
            g.propose("small_change", {"i": i}, proposer="agent")
        clock.advance(2 * 3600)
        with _CountedSync() as counted:
            expired = g.expire()
        out["expire_1000"] = counted.count
        out["expired"] = len(expired)
    _log(f"bench gate: syncs {out}")
    return out


def bench_propose(work: Path, calls: int = 3_000) -> dict:
    from bench.hooks import CONTEXT, MIX
    from ledger.store import log
    from ledger.workflow.gate import Gate

    policy = _policy()
    weighted = [(tool, args) for weight, tool, args in MIX for _ in range(weight)]
    out = {}
    for label, synced in (("no_sync", False), ("with_sync", True)):
        path = work / f"propose-{label}"
        real = log._sync
        if not synced:
            log._sync = lambda fd: None
        try:
            with Gate(policy, path) as g:
                for i in range(200):  # warm: the policy's caches, the writer
                    tool, args = weighted[i % len(weighted)]
                    g.propose(tool, args, proposer="agent", context=CONTEXT, call_id=f"w{i}")
                times = []
                n = calls if not synced else calls // 10
                for i in range(n):
                    tool, args = weighted[i % len(weighted)]
                    started = time.perf_counter_ns()
                    g.propose(tool, args, proposer="agent", context=CONTEXT, call_id=f"c{i}")
                    times.append(time.perf_counter_ns() - started)
        finally:
            log._sync = real
        times.sort()
        out[label] = {"n": len(times), "p50_us": round(percentile(times, 50) / 1000, 1), "p99_us": round(percentile(times, 99) / 1000, 1)}
    decide = []
    for i in range(calls):
        tool, args = weighted[i % len(weighted)]
        started = time.perf_counter_ns()
        policy.evaluate(tool, args, CONTEXT)
        decide.append(time.perf_counter_ns() - started)
    decide.sort()
    out["evaluate_p50_us"] = round(percentile(decide, 50) / 1000, 1)
    out["gate_only_p50_us"] = round(out["no_sync"]["p50_us"] - out["evaluate_p50_us"], 1)
    _log(f"bench gate: propose: {out}")
    return out


def _pending_ledger(path: Path, n: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support import policy

    from ledger.store import log
    from ledger.workflow.gate import Gate

    real, log._sync = log._sync, (lambda fd: None)  # building only
    try:
        with Gate(policy(), path) as g:
            for i in range(n):
                g.propose("small_change", {"customer": f"C-{i}", "note": "refund the order"}, proposer="agent", call_id=f"c{i}")
    finally:
        log._sync = real


def bench_review_list(work: Path, n: int = 10_000) -> dict:
    from ledger.workflow.gate import Gate

    path = work / "queue"
    _pending_ledger(path, n)
    cli = [sys.executable, "-m", "cli.main", "review", "list", "--ledger", str(path)]
    walls, everything = [], []
    for _ in range(5):
        for command, times in ((cli, walls), (cli + ["--all"], everything)):
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, cwd=ROOT)
            times.append(time.perf_counter() - started)
            assert done.returncode == 0, done.stderr
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import cli.main"], cwd=ROOT, check=True)
    start_only = time.perf_counter() - started
    inproc = []
    for _ in range(5):
        started = time.perf_counter()
        with Gate(None, path) as g:
            rows = g.pending()
            g.arguments_of(rows, checked=False)
        inproc.append(time.perf_counter() - started)
    out = {"pending": n, "cli_ms_median": round(statistics.median(walls) * 1000), "cli_all_ms_median": round(statistics.median(everything) * 1000),
           "cli_start_ms": round(start_only * 1000), "in_process_ms_median": round(statistics.median(inproc) * 1000)}
    _log(f"bench gate: review list: {out}")
    return out


WAITER = """
import json, sys, time
sys.path.insert(0, "tests")
from support import policy
from ledger.workflow.gate import Gate
g = Gate(policy(), sys.argv[1])
p = g.propose("small_change", {"n": int(sys.argv[2])}, proposer="agent")
print(json.dumps({"request": p.request, "digest": p.args_digest}), flush=True)
state = g.wait(p.request, timeout=60)
print(json.dumps({"status": state.status, "at": time.time()}), flush=True)
g.close()
"""


def bench_wait(work: Path, rounds: int = 10) -> dict:
    from ledger.workflow.gate import Gate

    path = work / "wait"
    lags = []
    for i in range(rounds):
        agent = subprocess.Popen([sys.executable, "-c", WAITER, str(path), str(i)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        asked = json.loads(agent.stdout.readline())
        time.sleep(0.3)  # the agent is asleep in wait()
        with Gate(None, path) as reviewer:
            reviewer.approve(asked["request"], approver="bob", digest=asked["digest"])
            approved = time.time()
        heard = json.loads(agent.stdout.readline())
        agent.wait()
        lags.append(heard["at"] - approved)
    out = {"rounds": rounds, "lag_ms_median": round(statistics.median(lags) * 1000, 1), "lag_ms_max": round(max(lags) * 1000, 1)}
    _log(f"bench gate: wait: {out}")
    return out


def verdicts(out: dict) -> dict:
    res = {}
    if "open" in out and 1_000_000 in out["open"]:
        v = out["open"][1_000_000]["open_ms_median"]
        res["open_1m_ms"] = {"value": v, "max": 100, "pass": v <= 100}
    if "syncs" in out:
        s = out["syncs"]
        res["syncs_allowed_run"] = {"value": s["run_allowed"], "max": 2, "pass": s["run_allowed"] <= 2}
        res["syncs_expiry_batch"] = {"value": s["expire_1000"], "max": 1, "pass": s["expire_1000"] <= 1}
    if "propose" in out:
        v = out["propose"]["gate_only_p50_us"]
        res["propose_us"] = {"value": v, "total_p50_us": out["propose"]["no_sync"]["p50_us"], "max": 50, "pass": v <= 50}
    if "review_list" in out:
        v = out["review_list"]["cli_ms_median"]
        res["review_list_ms"] = {"value": v, "max": 300, "pass": v <= 300}
    return res


def main(label: str = "run", write: bool = True, sizes=OPEN_SIZES) -> int:
    out = environment()
    out["loadavg_before"] = loadavg()
    work = Path(tempfile.mkdtemp(prefix="countersign-bench-gate-", dir=ledger_gen.workdir()))
    try:
        out["open"] = bench_open(work, sizes)
        out["catch_up"] = bench_catch_up(work, sizes=tuple(s for s in (10_000, 1_000_000) if s in sizes or s == 10_000))
        out["syncs"] = bench_syncs(work)
        out["propose"] = bench_propose(work)
        out["review_list"] = bench_review_list(work)
        out["wait"] = bench_wait(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["loadavg_after"] = loadavg()
    out["targets"] = TARGETS
    out["verdicts"] = verdicts(out)
    print(render(out))
    if write:
        RESULTS.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = RESULTS / f"{stamp}-{label}-gate.json"
        target.write_text(json.dumps(out, indent=2, default=str) + "\n")
        print(f"bench gate: results in {target.relative_to(ROOT)}")
    return 0


def render(out: dict) -> str:
    lines = ["| events | first open (full replay) | open from snapshot, median / max | snapshot |", "|---:|---:|---|---:|"]
    for n, o in out["open"].items():
        lines.append(f"| {int(n):,} | {o['first_open_s']} s | {o['open_ms_median']} / {o['open_ms_max']} ms | {o['snapshot_mb']} MB |")
    lines += ["", "| ledger | new events | catch-up | per event |", "|---:|---:|---:|---:|"]
    for n, by_k in out["catch_up"].items():
        for k, c in by_k.items():
            lines.append(f"| {int(n):,} | {int(k):,} | {c['ms']} ms | {c['us_per_event']} µs |")
    s, p, r, w = out["syncs"], out["propose"], out["review_list"], out["wait"]
    lines += ["", f"syncs: propose + execute {s['propose_then_execute']}, run {s['run_allowed']}, expiring {s['expired']:,} {s['expire_1000']}",
              f"propose (hook mix, call ids): p50 {p['no_sync']['p50_us']} µs / p99 {p['no_sync']['p99_us']} µs without the sync "
              f"(the policy's decision {p['evaluate_p50_us']} µs of it, the Gate's own {p['gate_only_p50_us']} µs); "
              f"{p['with_sync']['p50_us']} / {p['with_sync']['p99_us']} µs with it",
              f"review list, {r['pending']:,} pending: {r['cli_ms_median']} ms, --all {r['cli_all_ms_median']} ms (a new process; "
              f"its start alone {r['cli_start_ms']} ms), {r['in_process_ms_median']} ms in process (all)",
              f"wait hears a decision made in another process after {w['lag_ms_median']} ms (median; max {w['lag_ms_max']} ms)",
              "", "targets: " + ", ".join(f"{k} {'PASS' if v['pass'] else 'FAIL'} ({v['value']})" for k, v in out["verdicts"].items())]
    return "\n".join(lines)
