"""The approval service under load (issue 11, section 5): agent client processes proposing over
HTTP to one `countersign serve`, and reviewer processes deciding the asks.

Each agent process keeps one keep-alive connection and proposes back to back (no think time),
a mix of 90 % allowed calls, 8 % asks and 2 % denied calls, each with its own call id; it does not
block on its asks (a waiting agent would only lower the offered load). Each reviewer process
lists its queue (`GET /v1/queue?limit=50`) and approves (or, one in five, rejects) every request
in it. Every step is durable before it is answered (the service's one Gate lets steps that arrive
together share one commit and one fsync).

Measured over the same window in every client (they start together at a wall-clock instant):
proposals/s, the proposal latency as a client sees it (p50/p90/p99, ms), decisions/s and their
latency, the server's CPU (its /proc utime + stime over the window: cores busy) and the clients'.
The clients share the machine's cores with the server, so the run is repeated with fewer
agent processes (`--service-clients`, default 32 and 8): with 32 the clients' own CPU is part of
what limits the server.

    python -m bench --only service                             # 60 s for each client count
    python -m bench --only service --service-seconds 10        # a shorter try
    python -m bench --only service --service-clients 32,16,8,4

Target (issue 11): ≥ 2,000 proposals/s on 2 cores with group commit, p99 ≤ 20 ms.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
REVIEWERS = 4
MIX = (("read_thing", 0.90), ("small_change", 0.08), ("drop_thing", 0.02))

POLICY = """
policy "bench-service"
default ask "No rule covers this tool."

allow read_thing
deny drop_thing reason "Never drop things; archive them instead."
ask small_change
  reason "A person checks small changes."
  timeout 1h
"""

TARGETS = {
    "proposals_per_s": {"what": "proposals/s with 32 agent processes and 4 reviewers (2 cores)", "min": 2000},
    "p99_ms": {"what": "proposal latency p99 as the client sees it, ms", "max": 20},
}


# --- the clients (run as `python -m bench.service_load agent|reviewer ...`) -------------------------


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def client(role: str, url: str, token: str, start_at: float, seconds: float, seed: int, out: str) -> None:
    """Wait for `start_at` (time.time()), work for `seconds`, then write {"latencies_ns", "count",
    "errors", "cpu_s"} as JSON to `out`."""
    import httpx

    rng = random.Random(seed)
    tools, weights = [t for t, _ in MIX], [w for _, w in MIX]
    latencies: list[int] = []
    errors: dict[str, int] = {}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        http.get("/v1/health")  # the connection is open before the window starts
        time.sleep(max(0.0, start_at - time.time()))
        cpu0 = _cpu_seconds()
        end = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < end:
            if role == "agent":
                i += 1
                tool = rng.choices(tools, weights)[0]
                began = time.perf_counter_ns()
                r = http.post("/v1/proposals", json={"tool": tool, "args": {"path": f"/srv/data/{seed}/{i}.txt", "n": i},
                                                     "run": f"run-{seed}", "call_id": f"{seed}-{i}"})
                took = time.perf_counter_ns() - began
                if r.status_code == 201:
                    latencies.append(took)
                else:
                    errors[str(r.status_code)] = errors.get(str(r.status_code), 0) + 1
            else:
                rows = http.get("/v1/queue", params={"limit": 50}).json()["requests"]
                for row in rows:
                    body = {"decision": "approve", "digest": row["args_digest"]}
                    if rng.random() < 0.2:
                        body = {"decision": "reject", "digest": row["args_digest"], "reason": "Not this one."}
                    began = time.perf_counter_ns()
                    r = http.post(f"/v1/requests/{row['request']}/decision", json=body)
                    took = time.perf_counter_ns() - began
                    if r.status_code == 200:
                        latencies.append(took)
                    elif r.status_code == 409:  # another reviewer decided it first (they share one queue)
                        errors["lost_race"] = errors.get("lost_race", 0) + 1
                    else:
                        errors[str(r.status_code)] = errors.get(str(r.status_code), 0) + 1
                    if time.perf_counter() >= end:
                        break
                if not rows:
                    time.sleep(0.01)
        cpu = _cpu_seconds() - cpu0
    Path(out).write_text(json.dumps({"latencies_ns": latencies, "count": len(latencies), "errors": errors, "cpu_s": cpu}))


# --- the coordinator -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_cpu(pid: int) -> float:
    """utime + stime of a process, seconds (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write_files(work: Path, agents: int) -> tuple[dict[str, str], list[str]]:
    """The policy, the service key and a roster with `agents` agents and REVIEWERS reviewers;
    the tokens by name, and the `serve` arguments."""
    from ledger.proof.keys import generate_key, write_keypair
    from ledger.proof.roster import token_hash

    (work / "bench.policy").write_text(POLICY)
    key = generate_key("countersign-service")
    key_path, _ = write_keypair(work / "service", key)
    tokens = {f"agent-{n}": f"cst_bench-agent-{n}" for n in range(agents)}
    tokens.update({f"reviewer-{n}": f"cst_bench-reviewer-{n}" for n in range(REVIEWERS)})
    lines = []
    for name, token in tokens.items():
        lines += ["[[principal]]", f'name = "{name}"', f'kind = "{name.split("-")[0]}"', "groups = []",
                  f'token_sha256 = ["{token_hash(token)}"]', ""]
    lines += ["[[principal]]", 'name = "countersign"', 'kind = "service"', f'keys = ["{key.public.text()}"]', ""]
    (work / "roster.toml").write_text("\n".join(lines))
    return tokens, ["--policy", str(work / "bench.policy"), "--ledger", str(work / "ledger"), "--roster",
                    str(work / "roster.toml"), "--key", str(key_path)]


def run_once(agents: int, seconds: float, log=print) -> dict:
    """One run: a fresh ledger, a server, `agents` agent processes and REVIEWERS reviewers."""
    import httpx

    from bench.timing import percentile

    work = Path(tempfile.mkdtemp(prefix="countersign-bench-service-"))
    server = None
    try:
        tokens, files = _write_files(work, agents)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        extra: list[str] = []
        server_err = open(work / "server.txt", "wb")
        server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", *files, "--port", str(port),
                                   "--log-level", "warning", *extra], cwd=ROOT, env=ENV, stderr=server_err)
        for _ in range(400):
            try:
                if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            raise RuntimeError("countersign serve did not start: " + (work / "server.txt").read_text()[-2000:])
        start_at = time.time() + 2.0 + 0.05 * agents  # every client is connected by then
        clients = []
        for n in range(agents + REVIEWERS):
            role, name = ("agent", f"agent-{n}") if n < agents else ("reviewer", f"reviewer-{n - agents}")
            out = work / f"{name}.json"
            clients.append((role, out, subprocess.Popen(
                [sys.executable, "-m", "bench.service_load", role, url, tokens[name], repr(start_at), repr(seconds),
                 str(n), str(out)], cwd=ROOT, env=ENV)))
        time.sleep(max(0.0, start_at - time.time()))
        cpu0, wall0 = _proc_cpu(server.pid), time.perf_counter()
        time.sleep(seconds)
        cpu1, wall1 = _proc_cpu(server.pid), time.perf_counter()
        for _, _, proc in clients:
            proc.wait(timeout=120)
        results = {"agent": [], "reviewer": []}
        for role, out, proc in clients:
            if proc.returncode != 0:
                raise RuntimeError(f"a {role} client failed (exit {proc.returncode})")
            results[role].append(json.loads(out.read_text()))
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        events = sum(1 for _ in (work / "ledger").glob("events-*.jsonl") for _ in open(_))
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)

    def summary(rows: list[dict]) -> dict:
        lat = sorted(x for r in rows for x in r["latencies_ns"])
        errors: dict[str, int] = {}
        for r in rows:
            for k, v in r["errors"].items():
                errors[k] = errors.get(k, 0) + v
        ms = lambda ns: round(ns / 1e6, 2)  # noqa: E731
        return {"count": len(lat), "per_s": round(len(lat) / seconds, 1), "p50_ms": ms(percentile(lat, 50)) if lat else None,
                "p90_ms": ms(percentile(lat, 90)) if lat else None, "p99_ms": ms(percentile(lat, 99)) if lat else None,
                "max_ms": ms(lat[-1]) if lat else None, "errors": errors,
                "client_cpu_cores": round(sum(r["cpu_s"] for r in rows) / seconds, 2)}

    out = {"agents": agents, "reviewers": REVIEWERS, "seconds": seconds,
           "proposals": summary(results["agent"]), "decisions": summary(results["reviewer"]),
           "server_cpu_cores": round((cpu1 - cpu0) / (wall1 - wall0), 2), "ledger_events": events}
    p, d = out["proposals"], out["decisions"]
    log(f"  {agents} agents: {p['per_s']:,} proposals/s, p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms; "
        f"{d['per_s']:,} decisions/s (p50 {d['p50_ms']} ms); server {out['server_cpu_cores']} cores, "
        f"clients {p['client_cpu_cores'] + d['client_cpu_cores']:.2f} cores; errors {p['errors'] or d['errors'] or 'none'}")
    return out


def _call(rng: random.Random, seed: int, i: int) -> tuple[str, dict]:
    """One call of the mix, as the HTTP agents make them."""
    tool = rng.choices([t for t, _ in MIX], [w for _, w in MIX])[0]
    return tool, {"path": f"/srv/data/{seed}/{i}.txt", "n": i}


def in_process(threads: int = 32, seconds: float = 10.0) -> dict:
    """The service without HTTP: `threads` threads calling Service.propose back to back (the
    same mix of calls) on a fresh ledger, with the real fdatasync. What the Gate and the ledger
    can do under the HTTP layer: proposals/s, and how many steps share a commit (one write, one
    sync) thanks to the Gate giving up its lock while a commit is in flight."""
    import threading

    sys.path.insert(0, str(ROOT / "tests"))
    from ledger.proof.roster import load_roster
    from service_support import setup

    work = Path(tempfile.mkdtemp(prefix="cs-bench-inproc-"))
    try:
        s = setup(work, POLICY)
        service = s.service()
        agent = load_roster(s.roster).principal("agent-1")
        with service.gate() as gate:
            commits_before = gate.ledger.commits
        counts: list[int] = []
        stop = time.monotonic() + seconds

        def agent_loop(k: int) -> None:
            rng, n = random.Random(k), 0
            while time.monotonic() < stop:
                tool, args = _call(rng, k, n)
                service.propose(agent, tool, args, call_id=f"t{k}-{n}")
                n += 1
            counts.append(n)

        started = time.monotonic()
        pool = [threading.Thread(target=agent_loop, args=(k,)) for k in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        elapsed = time.monotonic() - started
        with service.gate() as gate:
            commits = gate.ledger.commits - commits_before
        service.close()
        total = sum(counts)
        return {"threads": threads, "seconds": round(elapsed, 2), "proposals": total,
                "per_s": round(total / elapsed, 1), "commits": commits, "steps_per_commit": round(total / max(commits, 1), 1)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(label: str = "run", write: bool = True, seconds: float | None = None, client_counts=(32, 8)) -> int:
    from bench.timing import environment, loadavg

    seconds = seconds or float(os.environ.get("COUNTERSIGN_BENCH_SERVICE_SECONDS") or 60)
    out = environment()
    out["loadavg_before"] = loadavg()
    out["mix"] = dict(MIX)
    print(f"bench service: {seconds:g} s per run, {REVIEWERS} reviewers, mix {dict(MIX)}", file=sys.stderr)
    out["in_process"] = in_process(32, min(seconds, 10.0))
    print(f"  in process (no HTTP), 32 threads: {out['in_process']['per_s']:,} proposals/s, "
          f"{out['in_process']['steps_per_commit']} steps per commit", file=sys.stderr, flush=True)
    out["runs"] = [run_once(n, seconds, log=lambda m: print(m, file=sys.stderr, flush=True)) for n in client_counts]
    out["loadavg_after"] = loadavg()
    out["targets"] = TARGETS
    full = next((r for r in out["runs"] if r["agents"] == 32), None)
    if full is not None:
        out["verdicts"] = {
            "proposals_per_s": {"value": full["proposals"]["per_s"], "pass": full["proposals"]["per_s"] >= 2000},
            "p99_ms": {"value": full["proposals"]["p99_ms"], "pass": (full["proposals"]["p99_ms"] or 1e9) <= 20},
        }
    print(render(out))
    if write:
        RESULTS.mkdir(exist_ok=True)
        target = RESULTS / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}-service.json"
        target.write_text(json.dumps(out, indent=2, default=str) + "\n")
        print(f"bench service: results in {target.relative_to(ROOT)}")
    return 0


def render(out: dict) -> str:
    lines = ["| agents | proposals/s | p50 | p99 | decisions/s | server CPU | clients' CPU |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in out["runs"]:
        p, d = r["proposals"], r["decisions"]
        lines.append(f"| {r['agents']} | {p['per_s']:,} | {p['p50_ms']} ms | {p['p99_ms']} ms | {d['per_s']:,} | "
                     f"{r['server_cpu_cores']} cores | {p['client_cpu_cores'] + d['client_cpu_cores']:.2f} cores |")
    if "in_process" in out:
        ip = out["in_process"]
        lines += ["", f"in process (no HTTP), {ip['threads']} threads: {ip['per_s']:,} proposals/s, "
                      f"{ip['steps_per_commit']} steps per commit"]
    if "verdicts" in out:
        lines += ["", "targets (32 agents): " + ", ".join(f"{k} {'PASS' if v['pass'] else 'FAIL'} ({v['value']})"
                                                           for k, v in out["verdicts"].items())]
    return "\n".join(lines)


if __name__ == "__main__":
    role, url, token, start_at, seconds, seed, out = sys.argv[1:]
    client(role, url, token, float(start_at), float(seconds), int(seed), out)
