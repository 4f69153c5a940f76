"""The hook-shaped benchmark (issue 10 section 5): a Claude Code hook opens a Gate per tool call.

Eight processes share one ledger; each repeatedly opens a Gate on it (`Gate(policy, path)`),
proposes one call and closes, as a PreToolUse hook does, while the ledger grows to 100,000 events.
The calls are a hook's mix on samples/coding-agent.policy: mostly allowed reads and searches, some
allowed shell commands and edits in the project, some asks (a push, a write outside the project,
a test run, an unknown MCP tool) and a few denials. Each process loads the policy once, then says
it is ready; all eight start together, so the latencies include waiting for the commit lock and
for the CPU (8 processes on however many cores the machine has).

At each size (1,000, 10,000, 100,000 events by default) the ledger is first grown to that size
with lawful events appended in batches through `Ledger.append_batch` (bench.ledger_gen's agent
workload, its request numbers moved to where they land), then the processes run. Reported per
size: per-call latency (open + propose + close) p50 / p99 / max in ms, the open and the propose
apart, how many calls failed (any exception; must be 0), and the same call made alone (one warm
process, no one else on the ledger) for comparison. Opening a Gate today replays and
verifies the whole ledger, so the latency grows with the ledger; snapshots (issue 10 section 1)
are meant to make it flat.

    python -m bench --only hooks                    # results in bench/results/<stamp>-<label>-hooks.json
    python -m bench --only hooks --hooks-sizes 1000,10000 --hooks-calls 20,10

The cold command (`cold`, part "cold"): what Claude Code actually starts per tool call, the
`countersign hook claude-code` process (python -m cli.entry: the console script's fast path),
timed from spawn to exit with one PreToolUse payload on stdin (an allowed Read), one process at a
time, on the same ledger at each size (the Gate opens from its snapshot, written by a Gate opened
and closed once before), and through `countersign serve` (COUNTERSIGN_URL). Reported: p50 / p99 /
max ms, and a bare `python -c pass` for the interpreter's own start.

    python -m bench --only hooks --hooks-parts cold   # the cold command only
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from bench import ledger_gen
from bench.timing import environment, loadavg, percentile

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "samples" / "coding-agent.policy"
PROCESSES = 8
SIZES = (1_000, 10_000, 100_000)
CALLS = (25, 10, 3)  # calls per process at each size: the big ledger's calls take seconds each
GROW_BATCH = 5_000
CONTEXT = {"cwd": "/work/repo"}

MIX = (  # (weight, tool, arguments); the effect is the sample policy's
    (30, "Read", {"file_path": "/work/repo/src/app.py"}),
    (12, "Grep", {"pattern": "TODO", "path": "/work/repo"}),
    (8, "Glob", {"pattern": "**/*.py"}),
    (8, "Bash", {"command": "git status", "description": "Show the working tree status"}),
    (6, "Bash", {"command": "ls -la src", "description": "List the sources"}),
    (10, "Edit", {"file_path": "/work/repo/src/app.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}),
    (4, "WebFetch", {"url": "https://docs.python.org/3/library/os.html", "prompt": "summarize"}),
    (6, "Bash", {"command": "pytest -q tests/", "description": "Run the tests"}),  # ask
    (5, "Bash", {"command": "git push origin main", "description": "Push"}),  # ask
    (4, "Write", {"file_path": "/etc/hosts", "content": "127.0.0.1 example\n"}),  # ask
    (3, "mcp__github__create_issue", {"title": "Flaky test", "body": "see CI"}),  # ask: no rule covers it
    (4, "Bash", {"command": "rm -rf /", "description": "Clean up"}),  # deny
)


# --- one hook process -----------------------------------------------------------------------------


def worker(path: str, calls: int, seed: int, number: int) -> None:
    """Load the policy, print `ready`, wait for a line on stdin, then make `calls` hook calls and
    print one JSON object: per call [open, propose, close] in ns (None for a failed call), and the
    failures as "Type: message"."""
    from dsl import Policy
    from ledger import Gate

    rng = random.Random(seed)
    began = time.perf_counter_ns()
    policy = Policy.load(str(POLICY))
    load_ns = time.perf_counter_ns() - began
    weights = [w for w, _, _ in MIX]
    print("ready", flush=True)
    sys.stdin.readline()
    samples, failures, effects = [], [], {}
    clock = time.perf_counter_ns
    for i in range(calls):
        _, tool, args = rng.choices(MIX, weights)[0]
        call_id = f"toolu_{number}_{seed}_{i}"
        t0 = clock()
        try:
            gate = Gate(policy, path)
            t1 = clock()
            try:
                proposal = gate.propose(tool, args, proposer="claude-code", run=f"session-{number}", context=CONTEXT,
                                        call_id=call_id)
                t2 = clock()
            finally:
                gate.close()
            t3 = clock()
        except Exception as exc:  # a hook that fails is what this benchmark counts
            failures.append(f"{type(exc).__name__}: {exc}"[:300])
            samples.append(None)
            continue
        samples.append([t1 - t0, t2 - t1, t3 - t2])
        effects[proposal.effect] = effects.get(proposal.effect, 0) + 1
    print(json.dumps({"samples": samples, "failures": failures, "effects": effects, "policy_load_ns": load_ns}), flush=True)


# --- the coordinator --------------------------------------------------------------------------


def event_count(path: Path) -> int:
    from ledger import LedgerReader

    return sum(1 for _ in LedgerReader(path).records())


def grow(path: Path, target: int, seed: int) -> int:
    """Append lawful events (bench.ledger_gen's workload) until the ledger holds `target` events;
    returns the count. The generated requests name the seqs their proposals get here."""
    from ledger import Ledger

    have = event_count(path)
    if have >= target:
        return have
    replace = msgspec.structs.replace
    items = ledger_gen.events(target - have + 1, seed=seed)  # events for seqs 2..: shifted to have+1..
    shift = have - 1
    with Ledger(path) as ledger:
        assert ledger.head[0] == have
        for start in range(0, len(items), GROW_BATCH):
            batch = []
            for event, data in items[start:start + GROW_BATCH]:
                if hasattr(event, "request"):
                    event = replace(event, request=event.request + shift)
                batch.append((event, data))
            ledger.append_batch(batch)
        return ledger.head[0]


def phase(path: Path, calls: int, seed: int, processes: int) -> dict:
    """`processes` hook processes, `calls` calls each, started together."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "bench.hooks", "worker", str(path), str(calls), str(seed * 100 + i), str(i)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
             for i in range(processes)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready", "a hook process did not start"
    began = time.perf_counter()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=3600)
        results.append(json.loads(out))
    wall = time.perf_counter() - began
    total, opened, proposed, failures, effects = [], [], [], [], {}
    for r in results:
        failures += r["failures"]
        for effect, n in r["effects"].items():
            effects[effect] = effects.get(effect, 0) + n
        for s in r["samples"]:
            if s is not None:
                total.append(sum(s))
                opened.append(s[0])
                proposed.append(s[1])
    for values in (total, opened, proposed):
        values.sort()

    def ms(values: list[int], q: float) -> float | None:
        return round(percentile(values, q) / 1e6, 2) if values else None

    return {
        "calls": processes * calls,
        "failed": len(failures),
        "failures": failures[:10],
        "effects": effects,
        "latency_ms": {"p50": ms(total, 50), "p99": ms(total, 99), "max": ms(total, 100)},
        "open_ms": {"p50": ms(opened, 50), "p99": ms(opened, 99)},
        "propose_ms": {"p50": ms(proposed, 50), "p99": ms(proposed, 99)},
        "policy_load_ms": round(sorted(r["policy_load_ns"] for r in results)[len(results) // 2] / 1e6, 1),
        "wall_seconds": round(wall, 2),
        "calls_per_second": round(processes * calls / wall, 2),
    }


def solo(path: Path, repeats: int = 3) -> dict:
    """The same call made alone, `repeats` times in this (warm) process: what a hook costs without
    seven others competing for the lock and the CPU. Median ms of open, propose, close."""
    from dsl import Policy
    from ledger import Gate

    policy = Policy.load(str(POLICY))
    opened, proposed, closed = [], [], []
    for i in range(repeats):
        t0 = time.perf_counter_ns()
        gate = Gate(policy, path)
        t1 = time.perf_counter_ns()
        gate.propose("Read", {"file_path": f"/work/repo/src/solo_{i}.py"}, proposer="claude-code", context=CONTEXT)
        t2 = time.perf_counter_ns()
        gate.close()
        t3 = time.perf_counter_ns()
        opened.append(t1 - t0), proposed.append(t2 - t1), closed.append(t3 - t2)
    median = lambda values: round(sorted(values)[len(values) // 2] / 1e6, 2)  # noqa: E731
    return {"open_ms": median(opened), "propose_ms": median(proposed), "close_ms": median(closed), "repeats": repeats}


def run(sizes=SIZES, calls=CALLS, processes: int = PROCESSES, log=print) -> dict:
    """Grow one ledger through `sizes`, running the hook processes at each. Returns the results."""
    from ledger import Gate, verify

    work = ledger_gen.workdir() / f"hooks-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    path = work / "ledger"
    out = {"processes": processes, "policy": str(POLICY.relative_to(ROOT)), "sizes": {}}
    try:
        Gate(None, path).close()
        for i, (size, n) in enumerate(zip(sizes, calls)):
            started = time.perf_counter()
            events = grow(path, size, seed=i + 1)
            grown = time.perf_counter() - started
            log(f"bench: hooks: {events:,} events (grown in {grown:.1f} s); {processes} processes x {n} calls")
            entry = {"events_before": events, "grow_seconds": round(grown, 1), "loadavg_before": loadavg(),
                     "alone": solo(path)}
            entry.update(phase(path, n, seed=i + 1, processes=processes))
            entry["events_after"] = event_count(path)
            out["sizes"][str(size)] = entry
            log(f"bench: hooks: p50 {entry['latency_ms']['p50']} ms, p99 {entry['latency_ms']['p99']} ms, "
                f"{entry['failed']} failed")
        report = verify(path)
        out["verified"] = report.ok
        out["failed"] = sum(e["failed"] for e in out["sizes"].values())
        out["pass"] = out["failed"] == 0 and report.ok
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def table(out: dict) -> str:
    lines = [
        f"{out['processes']} hook processes, each: open a Gate, propose one call, close ({out['policy']}); "
        f"ledger verified afterwards: {out.get('verified')}",
        "",
        "| events | calls | failed | per call p50 / p99 / max ms | open p50 / p99 ms | propose p50 / p99 ms | calls/s | alone: open / propose ms |",
        "|---:|---:|---:|---|---|---|---:|---|",
    ]
    for size, e in out["sizes"].items():
        lat, op, pr = e["latency_ms"], e["open_ms"], e["propose_ms"]
        lines.append(f"| {e['events_before']:,} | {e['calls']} | {e['failed']} | {lat['p50']} / {lat['p99']} / {lat['max']} "
                     f"| {op['p50']} / {op['p99']} | {pr['p50']} / {pr['p99']} | {e['calls_per_second']} "
                     f"| {e['alone']['open_ms']} / {e['alone']['propose_ms']} |")
    return "\n".join(lines)


# --- the cold hook command ------------------------------------------------------------------------

COLD_CALLS = 15


def _spawn_ms(argv: list[str], stdin: str, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    return (time.perf_counter() - began) * 1000, done


def _summary(values: list[float]) -> dict:
    values = sorted(values)
    return {"p50": round(percentile(values, 50), 1), "p99": round(percentile(values, 99), 1),
            "max": round(values[-1], 1), "calls": len(values)}


def cold_calls(env: dict, calls: int, tag: str) -> tuple[dict, list[str]]:
    """`calls` cold `countersign hook claude-code` processes, one at a time; (latency, failures)."""
    argv = [sys.executable, "-m", "cli.entry", "hook", "claude-code"]
    times, failures = [], []
    for i in range(calls):
        payload = {"session_id": f"bench-{tag}", "cwd": "/work/repo", "hook_event_name": "PreToolUse",
                   "permission_mode": "default", "tool_name": "Read",
                   "tool_input": {"file_path": f"/work/repo/src/cold_{i}.py"}, "tool_use_id": f"toolu_cold_{tag}_{i}"}
        ms, done = _spawn_ms(argv, json.dumps(payload), env)
        try:
            decision = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"]
        except (ValueError, KeyError, TypeError):
            decision = None
        if done.returncode != 0 or decision != "allow":
            failures.append(f"exit {done.returncode}: {done.stdout[-200:]} {done.stderr[-300:]}")
            continue
        times.append(ms)
    return (_summary(times) if times else {}), failures


def cold(sizes=SIZES, calls: int = COLD_CALLS, log=print) -> dict:
    """The cold hook command on a local ledger at each size, then through `countersign serve`."""
    from ledger import Gate, verify

    base = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("COUNTERSIGN_URL", "COUNTERSIGN_TOKEN"):
        base.pop(name, None)
    bare = sorted(_spawn_ms([sys.executable, "-c", "pass"], "", base)[0] for _ in range(calls))
    out: dict = {"calls_per_size": calls, "python_pass_ms": _summary(bare), "local": {}, "service": None}
    work = ledger_gen.workdir() / f"hooks-cold-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    path = work / "ledger"
    failures: list[str] = []
    try:
        Gate(None, path).close()
        for i, size in enumerate(sizes):
            events = grow(path, size, seed=i + 1)
            Gate(None, path).close()  # the snapshot the hook opens from
            env = {**base, "COUNTERSIGN_POLICY": str(POLICY), "COUNTERSIGN_LEDGER": str(path)}
            latency, failed = cold_calls(env, calls, f"local{size}")
            failures += failed
            out["local"][str(size)] = {"events": events, "latency_ms": latency, "failed": len(failed)}
            log(f"bench: hooks: cold command, local ledger at {events:,} events: {latency}")
        out["verified"] = verify(path).ok
        out["service"] = _cold_service(work, calls, base, log)
        failures += out["service"].pop("failures", [])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["failed"] = len(failures)
    out["failures"] = failures[:5]
    out["pass"] = not failures and out.get("verified", False)
    return out


def _cold_service(work: Path, calls: int, base: dict, log) -> dict:
    """`countersign serve` on a fresh ledger with the coding-agent policy; the cold hook through it."""
    import signal

    from bench.service_load import _free_port, _write_files

    svc = work / "service"
    svc.mkdir(parents=True)
    tokens, files = _write_files(svc, 1)
    (svc / "bench.policy").write_text(POLICY.read_text())
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", *files, "--port", str(port),
                               "--log-level", "warning"], cwd=ROOT, env=base, stderr=subprocess.DEVNULL)
    try:
        import http.client

        for _ in range(400):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/v1/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        env = {**base, "COUNTERSIGN_URL": url, "COUNTERSIGN_TOKEN": tokens["agent-0"]}
        latency, failed = cold_calls(env, calls, "service")
        log(f"bench: hooks: cold command through the service: {latency}")
        return {"latency_ms": latency, "failed": len(failed), "failures": failed}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def cold_table(out: dict) -> str:
    lines = ["Cold `countersign hook claude-code` process per call (spawn to exit, one PreToolUse, allowed Read); "
             f"`python -c pass` p50 {out['python_pass_ms']['p50']} ms", "",
             "| where | events | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|"]
    for size, e in out["local"].items():
        lat = e["latency_ms"] or {}
        lines.append(f"| local ledger | {e['events']:,} | {lat.get('p50')} | {lat.get('p99')} | {lat.get('max')} |")
    service = (out.get("service") or {}).get("latency_ms") or {}
    lines.append(f"| through the service | - | {service.get('p50')} | {service.get('p99')} | {service.get('max')} |")
    return "\n".join(lines)


def main(sizes: list[int] | None, calls: list[int] | None, label: str, write: bool,
         parts: tuple[str, ...] = ("processes", "cold")) -> int:
    from bench.timing import timer_overhead_ns

    sizes = sizes or list(SIZES)
    calls = calls or list(CALLS)[: len(sizes)] + [CALLS[-1]] * (len(sizes) - len(CALLS))
    result = environment()
    result["settings"] = {"sizes": sizes, "calls_per_process": calls, "processes": PROCESSES,
                          "workdir": str(ledger_gen.workdir())}
    result["timer_overhead_ns"] = timer_overhead_ns()
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    ok = True
    if "processes" in parts:
        result["hooks"] = run(sizes, calls, log=log)
        print(table(result["hooks"]))
        ok = ok and result["hooks"]["pass"]
    if "cold" in parts:
        result["cold_command"] = cold(sizes, log=log)
        print(cold_table(result["cold_command"]))
        ok = ok and result["cold_command"]["pass"]
    result["loadavg_after"] = loadavg()
    if write:
        from bench.__main__ import write as write_results

        write_results(result, f"{label}-hooks")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit(main(None, None, "run", "--no-write" not in sys.argv))
