"""What `countersign mcp-proxy` adds to an allowed tool call (issue 12, the MCP gateway).

One MCP server (the `mcp` SDK's MCPServer over stdio, an `echo` tool) is reached two ways at
once from one client process: directly, and through `python -m cli.main mcp-proxy` with a policy
that allows `echo` and denies `refuse`, on a fresh ledger in a temporary directory (on the disk
the ledger would live on: every step's fdatasync is in the numbers). The calls alternate
between the two sessions, so both see the same load; each call is timed alone with
`time.perf_counter_ns` from `call_tool` to its result. Reported, in ms: p50, p90, p99 and mean
of the direct calls, of the allowed calls through the proxy (propose, start, forward, finish:
three durable writes), and of denied calls (propose only: one write, nothing forwarded); the
added latency is the proxy's p50 less the direct p50.

    python -m bench --only mcp            # about 20 seconds, results in bench/results/
    python -m bench.mcp_proxy --calls 200 --no-write
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool()
    def refuse(text: str) -> str:
        """Never reached: the policy denies it."""
        return text

    if __name__ == "__main__":
        server.run()
''')

POLICY = textwrap.dedent('''
    policy "mcp-bench"
    default deny "No rule covers this tool."
    allow mcp__bench__echo
    deny mcp__bench__refuse reason "Benchmarking the refusal."
''')


def _summary(samples_ns: list[int]) -> dict:
    ms = sorted(s / 1e6 for s in samples_ns)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"calls": len(ms), "p50_ms": round(statistics.median(ms), 3), "p90_ms": round(q[89], 3),
            "p99_ms": round(q[98], 3), "mean_ms": round(statistics.fmean(ms), 3)}


def run(calls: int = 200, warmup: int = 20) -> dict:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with tempfile.TemporaryDirectory(prefix="mcp-bench-", dir=ROOT / "build" if (ROOT / "build").is_dir() else None) as tmp:
        folder = Path(tmp)
        (folder / "server.py").write_text(SERVER)
        (folder / "bench.policy").write_text(POLICY)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        direct = StdioServerParameters(command=sys.executable, args=[str(folder / "server.py")], env=env)
        proxied = StdioServerParameters(
            command=sys.executable, cwd=str(ROOT), env=env,
            args=["-m", "cli.main", "mcp-proxy", "--policy", str(folder / "bench.policy"), "--ledger",
                  str(folder / "ledger"), "--server-name", "bench", "--", sys.executable, str(folder / "server.py")])
        times: dict[str, list[int]] = {"direct": [], "proxy_allowed": [], "proxy_denied": []}

        async def main() -> None:
            async with stdio_client(direct) as (r1, w1), stdio_client(proxied) as (r2, w2):
                async with ClientSession(r1, w1) as plain, ClientSession(r2, w2) as gated:
                    await plain.initialize()
                    await gated.initialize()
                    await plain.list_tools()
                    await gated.list_tools()
                    for i in range(warmup + calls):
                        for key, session, tool in (("direct", plain, "echo"), ("proxy_allowed", gated, "echo"),
                                                   ("proxy_denied", gated, "refuse")):
                            start = time.perf_counter_ns()
                            result = await session.call_tool(tool, {"text": f"call {i}"})
                            elapsed = time.perf_counter_ns() - start
                            if result.is_error != (key == "proxy_denied"):
                                raise RuntimeError(f"{key}: unexpected result {result}")
                            if i >= warmup:
                                times[key].append(elapsed)

        anyio.run(main)
        from ledger import verify

        report = verify(folder / "ledger")
        if not report.ok:
            raise RuntimeError(f"the bench's ledger does not verify: {report}")
    out = {key: _summary(samples) for key, samples in times.items()}
    out["added_p50_ms"] = round(out["proxy_allowed"]["p50_ms"] - out["direct"]["p50_ms"], 3)
    return out


def table(out: dict) -> str:
    rows = ["| per call, ms | p50 | p90 | p99 | mean |", "|---|---:|---:|---:|---:|"]
    names = {"direct": "client → server, direct", "proxy_allowed": "through mcp-proxy, allowed (forwarded)",
             "proxy_denied": "through mcp-proxy, denied (not forwarded)"}
    for key, name in names.items():
        s = out[key]
        rows.append(f"| {name} | {s['p50_ms']:.2f} | {s['p90_ms']:.2f} | {s['p99_ms']:.2f} | {s['mean_ms']:.2f} |")
    rows.append(f"\nadded by the proxy to an allowed call, p50: {out['added_p50_ms']:.2f} ms")
    return "\n".join(rows)


def main(label: str = "run", write: bool = True, calls: int = 200) -> int:
    from bench.timing import environment, loadavg

    out = environment()
    out["loadavg_before"] = loadavg()
    out["mcp_proxy"] = run(calls)
    out["loadavg_after"] = loadavg()
    print(table(out["mcp_proxy"]))
    if write:
        from bench.__main__ import write as write_results

        write_results(out, f"{label}-mcp")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m bench.mcp_proxy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--label", default="run")
    ap.add_argument("--no-write", action="store_true")
    opts = ap.parse_args()
    sys.exit(main(opts.label, not opts.no_write, opts.calls))
