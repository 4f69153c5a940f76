"""`python -m bench` (or `make bench`): load time and decision latency of generated policies of
100, 1,000 and 10,000 rules on real corpus calls, with Cedar (cedarpy) side by side; and the
ledger's append, verify and stats benchmarks (bench/ledger_run.py; `--only ledger` alone); and the
sample policies on the real calls they were written for (bench/real_policies.py; `--only real`); and
one decision on adversarial arguments at each matcher's largest size (bench/worst.py; `--only worst`,
not part of the full run); and eight hook processes each opening a Gate per call on a ledger growing
to 100,000 events (bench/hooks.py; `--only hooks`); and the shared Gate's opening, catch-up, syncs,
propose cost, review queue and wait (bench/gate.py; `--only gate`); and the shell parser on the
corpus's commands against tree-sitter-bash (bench/parser.py; `--only parser`); and the approval
service under 32 agent and 4 reviewer processes over HTTP (bench/service_load.py; `--only service`);
and the latency `countersign mcp-proxy` adds to an allowed MCP tool call (bench/mcp_proxy.py;
`--only mcp`, not part of the full run); and three questions about a ledger's history and `ledger
stats`, countersign side by side with DuckDB on the raw JSONL and on a native table, warm, cold and
after 10,000 new events (bench/analytics.py; `--only analytics`); and `ledger audit` and `policy
whatif` on 1,000,000 events (bench/audit.py; `--only audit`).

    python -m bench                       # the full run (about 5 minutes), results in bench/results/
    python -m bench --quick               # 100 and 1,000 rules, fewer rounds (about a minute)
    python -m bench --sizes 1000 --no-cedar --label try
    python -m bench --only real           # the sample policies on the real corpus calls, per tool
    python -m bench --only history        # the history-reading samples with 1,000 earlier calls in the run
    python -m bench --only worst          # worst cases: each matcher at its largest input (about 3 minutes)
    python -m bench --only hooks          # 8 processes, a Gate opened per call, ledger growing to 100,000 events
    python -m bench --only gate           # open at 1 M events, catch-up, syncs, propose, review list, wait
    python -m bench --only parser         # the shell parser on the corpus's commands, ours and tree-sitter-bash
    python -m bench --only service        # countersign serve: 32 (then 8) agent processes + 4 reviewers, 60 s each
    python -m bench --only mcp            # an MCP tool call direct and through countersign mcp-proxy, 200 each
    python -m bench --only analytics      # ledger query and stats at 1,000,000 events against DuckDB (--events N)
    python -m bench --only audit          # ledger audit and policy whatif on 1,000,000 events (--events N)

Skips with a message (exit 0) when the shared corpus is absent; runs without the Cedar side (and
says so) when cedarpy is not installed (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

from bench import corpus, decisions, generate, load
from bench.timing import environment, loadavg, timer_overhead_ns

RESULTS = Path(__file__).resolve().parent / "results"

TARGETS = {
    "decision_p50_1000": {
        "what": "decision p50 for name-indexed tools at 1,000 rules",
        "limit_ns": 3000,
    },
    "flat_100_to_10000": {
        "what": "decision p50 for name-indexed tools nearly flat from 100 to 10,000 rules "
        "(read here as: p50 at 10,000 rules at most 1.5 times p50 at 100 rules)",
        "max_ratio": 1.5,
    },
    "load_1000": {
        "what": "load (parse + check + compile, warm process, median) of 1,000 rules "
        "(issue 14, section 4; 150 ms in issue 3)",
        "limit_ms": 100,
    },
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000", help="rule counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=20, help="timed passes over the call mix (countersign)")
    ap.add_argument("--cedar-budget", type=float, default=10.0, help="seconds of timed Cedar calls per size (at least one pass)")
    ap.add_argument("--load-repeats", type=int, default=7, help="timed loads per size (3 at 10,000 rules and more)")
    ap.add_argument("--no-cedar", action="store_true", help="leave out the Cedar side")
    ap.add_argument("--no-cold", action="store_true", help="leave out the fresh-process load")
    ap.add_argument("--quick", action="store_true", help="100 and 1,000 rules, 5 rounds, 2 s of Cedar")
    ap.add_argument("--label", default="run", help="name of the results file: bench/results/<date>-<label>.json")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--only", choices=("all", "policy", "ledger", "real", "worst", "hooks", "gate", "parser", "service", "mcp",
                                            "analytics", "audit", "history"), default="all",
                    help="the policy language's benchmarks, the ledger's (issue 4: append, verify, stats), "
                    "the sample policies on the real corpus calls (issue 9), the worst cases of every matcher "
                    "(issue 9; not part of all), the hook-shaped Gate benchmark and the shared Gate's "
                    "(issue 10), the shell parser on the corpus's commands against tree-sitter-bash "
                    "(not part of all), the ledger's analytics against DuckDB (issue 13), or all")
    ap.add_argument("--search-seconds", type=float, default=None,
                    help="--only worst: seconds of random search, all matchers together (default 60)")
    ap.add_argument("--ledger", action="store_const", const="ledger", dest="only", help="same as --only ledger")
    ap.add_argument("--ledger-events", type=int, default=None,
                    help="events in the large ledger (default 10,000,000; 1,000,000 with --quick)")
    ap.add_argument("--ledger-parts", default="append,verify,stats", help="which ledger benchmarks, comma-separated")
    ap.add_argument("--hooks-sizes", default=None, help="--only hooks: ledger sizes, comma-separated (default 1000,10000,100000)")
    ap.add_argument("--hooks-parts", default="processes,cold",
                    help="--only hooks: which parts, comma-separated: processes (8 Gate-per-call processes), "
                    "cold (the cold `countersign hook claude-code` command, local and through the service)")
    ap.add_argument("--hooks-calls", default=None, help="--only hooks: calls per process at each size (default 25,10,3)")
    ap.add_argument("--service-seconds", type=float, default=None,
                    help="--only service: seconds of load per run (default 60, or $COUNTERSIGN_BENCH_SERVICE_SECONDS)")
    ap.add_argument("--service-clients", default="32,8", help="--only service: agent processes per run, comma-separated")
    ap.add_argument("--events", type=int, default=None,
                    help="--only analytics and audit: events in the ledger (default 1,000,000; 100,000 with --quick)")
    ap.add_argument("--analytics-parts", default="baselines,warm,cold,refresh",
                    help="--only analytics: which parts, comma-separated: baselines (DuckDB on the raw JSONL and "
                    "on a native table), warm (in process), cold (the CLI, new processes), refresh (after 10,000 "
                    "new events)")
    ap.add_argument("--analytics-repeats", type=int, default=None,
                    help="--only analytics: timed warm calls after the first (default 5)")
    opts = ap.parse_args(argv)
    if opts.only == "mcp":  # not part of all: `countersign mcp-proxy`'s added latency (bench/mcp_proxy.py)
        from bench import mcp_proxy

        return mcp_proxy.main(opts.label, not opts.no_write)
    if opts.only in ("all", "service"):
        from bench import service_load

        status = service_load.main(opts.label, not opts.no_write, opts.service_seconds,
                                   [int(x) for x in opts.service_clients.split(",") if x.strip()])
        if opts.only == "service" or status:
            return status
    if opts.only in ("all", "gate"):
        from bench import gate

        status = gate.main(opts.label, not opts.no_write)
        if opts.only == "gate" or status:
            return status
    if opts.only in ("all", "hooks"):
        from bench import hooks

        ints = lambda text: [int(x) for x in text.split(",") if x.strip()] if text else None  # noqa: E731
        status = hooks.main(ints(opts.hooks_sizes), ints(opts.hooks_calls), opts.label, not opts.no_write,
                            tuple(p.strip() for p in opts.hooks_parts.split(",") if p.strip()))
        if opts.only == "hooks" or status:
            return status
    if opts.only in ("all", "analytics"):
        from bench import analytics

        status = analytics.main(opts.label, not opts.no_write, opts.events or (100_000 if opts.quick else None),
                                tuple(p.strip() for p in opts.analytics_parts.split(",") if p.strip()),
                                opts.analytics_repeats)
        if opts.only == "analytics" or status:
            return status
    if opts.only in ("all", "audit"):
        from bench import audit

        status = audit.main(opts.quick, opts.events, opts.label, not opts.no_write)
        if opts.only == "audit" or status:
            return status
    if opts.only in ("all", "ledger"):
        from bench import ledger_run

        parts = {p.strip() for p in opts.ledger_parts.split(",") if p.strip()}
        status = ledger_run.main(opts.quick, opts.ledger_events, opts.label, not opts.no_write, parts)
        if opts.only == "ledger" or status:
            return status
    if opts.quick:
        opts.sizes, opts.rounds, opts.cedar_budget = "100,1000", 5, 2.0
    if opts.only == "real":
        return real_only(opts)
    if opts.only in ("all", "history"):
        status = history_only(opts)
        if opts.only == "history" or status:
            return status
    if opts.only == "worst":
        return worst_only(opts)
    if opts.only == "parser":
        return parser_only(opts)
    sizes = [int(s) for s in opts.sizes.split(",") if s.strip()]

    try:
        calls_by_source = corpus.load_calls()
    except corpus.CorpusMissing as exc:
        print(f"bench: skipped: {exc}")
        return 0
    with_cedar = not opts.no_cedar
    if with_cedar:
        try:
            import cedarpy  # noqa: F401
        except ImportError:
            print("bench: cedarpy is not installed (pip install -e '.[bench]'); running without the Cedar side")
            with_cedar = False

    profiles, mix = generate.build_profiles(calls_by_source)
    out = environment()
    out["settings"] = {
        "sizes": sizes,
        "rounds": opts.rounds,
        "cedar_budget_s": opts.cedar_budget if with_cedar else None,
        "load_repeats": opts.load_repeats,
        "mix_tools": mix,
        "corpus": str(corpus.CORPUS),
    }
    out["timer_overhead_ns"] = timer_overhead_ns()
    out["targets"] = TARGETS
    out["sizes"] = {}
    for size in sizes:
        g = generate.generate(size, profiles, mix)
        calls = generate.call_mix(calls_by_source, profiles, mix, g)
        print(f"bench: {size} rules: loading", file=sys.stderr, flush=True)
        from dsl import Policy

        repeats = opts.load_repeats if size < 10_000 else min(opts.load_repeats, 3)
        entry = {
            "rules": len(g.rules),
            "tools": len(g.tools),
            "glob_rules": sum(r.globs for r in g.rules),
            "subject_rules": sum(r.uses_subjects for r in g.rules),
            "conditionless_rules": sum(r.condition is None for r in g.rules),
            "policy_bytes": len(g.text.encode()),
            "loadavg_before": loadavg(),
            "load": load.warm(g.text, repeats),
        }
        if not opts.no_cold:
            entry["load_fresh_process"] = load.cold(g.text)
        policy = Policy.from_text(g.text, f"generated-{size}.policy")
        print(f"bench: {size} rules: deciding {len(calls)} calls x {opts.rounds} rounds", file=sys.stderr, flush=True)
        entry.update(
            decisions.run(g, policy, calls, rounds=opts.rounds, cedar_budget_s=opts.cedar_budget, with_cedar=with_cedar)
        )
        if with_cedar:
            from bench.cedar import translate

            entry["cedar"]["load"] = load.cedar(translate(g.rules), repeats)
        entry["loadavg_after"] = loadavg()
        out["sizes"][str(size)] = entry
        print(f"bench: {size} rules: done", file=sys.stderr, flush=True)

    out["results"] = verdicts(out["sizes"])
    from bench import real_policies

    print("bench: the sample policies on the real calls", file=sys.stderr, flush=True)
    out["real_policies"] = real_policies.run(opts.rounds)
    print(table(out))
    print("\nThe sample policies on the real calls:\n" + real_policies.table(out["real_policies"]))
    if not opts.no_write:
        write(out, opts.label)
    return 0


def write(out: dict, label: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{stamp}-{label}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print(f"\nbench: results written to {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")


def _corpus_present() -> bool:
    """Whether the shared corpus is there; says the benchmark is skipped when it is not."""
    try:
        corpus.corpus_dir()
    except corpus.CorpusMissing as exc:
        print(f"bench: skipped: {exc}")
        return False
    return True


def history_only(opts) -> int:
    """`--only history`: the sample policies that read the run's history, deciding with 1,000
    earlier calls in the run (bench/history.py)."""
    from bench import history

    if not _corpus_present():
        return 0
    out = environment()
    out["timer_overhead_ns"] = timer_overhead_ns()
    out["history"] = history.run(opts.rounds)
    print(history.table(out["history"]))
    if not opts.no_write:
        write(out, f"{opts.label}-history")
    return 0


def real_only(opts) -> int:
    """`--only real`: the sample policies on the real corpus calls, per tool (p50, p99)."""
    from bench import real_policies

    if not _corpus_present():
        return 0
    out = environment()
    out["settings"] = {"rounds": opts.rounds, "corpus": str(corpus.CORPUS)}
    out["timer_overhead_ns"] = timer_overhead_ns()
    out["real_policies"] = real_policies.run(opts.rounds)
    print(real_policies.table(out["real_policies"]))
    if not opts.no_write:
        write(out, f"{opts.label}-real")
    return 0


def worst_only(opts) -> int:
    """`--only worst`: one decision per adversarial argument, each matcher at its largest size
    (needs no corpus)."""
    from bench import worst

    out = environment()
    seconds = worst.SEARCH_SECONDS if opts.search_seconds is None else opts.search_seconds
    out["settings"] = {"runs": worst.RUNS, "search_seconds": seconds, "search_units": worst.SEARCH_UNITS,
                       "target_ms": worst.TARGET_MS}
    out["timer_overhead_ns"] = timer_overhead_ns()
    out["worst"] = worst.run(search_seconds=seconds)
    out["loadavg_after"] = loadavg()
    print(worst.table(out["worst"]))
    if not opts.no_write:
        write(out, f"{opts.label}-worst")
    return 0


def parser_only(opts) -> int:
    """`--only parser`: the shell parser on the corpus's distinct commands, ours and tree-sitter-bash."""
    from bench import parser

    if not _corpus_present():
        return 0
    out = environment()
    out["settings"] = {"rounds": parser.ROUNDS, "corpus": str(corpus.CORPUS)}
    out["timer_overhead_ns"] = timer_overhead_ns()
    out["parser"] = parser.run()
    out["loadavg_after"] = loadavg()
    print(parser.table(out["parser"]))
    if not opts.no_write:
        write(out, f"{opts.label}-parser")
    return 0


def verdicts(sizes: dict) -> dict:
    res = {}
    s1000 = sizes.get("1000")
    if s1000:
        p50 = s1000["decision"]["name_indexed"]["p50_ns"]
        res["decision_p50_1000"] = {"value_ns": p50, "limit_ns": 3000, "pass": p50 <= 3000}
        ms = s1000["load"]["median_ms"]
        limit = TARGETS["load_1000"]["limit_ms"]
        res["load_1000"] = {"value_ms": ms, "limit_ms": limit, "pass": ms <= limit}
    if "100" in sizes and "10000" in sizes:
        a = sizes["100"]["decision"]["name_indexed"]["p50_ns"]
        b = sizes["10000"]["decision"]["name_indexed"]["p50_ns"]
        res["flat_100_to_10000"] = {"p50_100_ns": a, "p50_10000_ns": b, "ratio": round(b / a, 3), "max_ratio": 1.5, "pass": b / a <= 1.5}
    return res


def _us(ns) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"


def table(out: dict) -> str:
    """A Markdown summary of a run (what the README's Benchmarks section shows)."""
    lines = [
        f"{out['machine']['cpu']}, {out['machine']['cpus']} CPUs, Python {out['python']['version']}, "
        f"{out['date'][:10]}, commit {out['versions']['countersign_commit']}"
        + (" (modified)" if out["versions"]["dsl_or_bench_modified"] else "")
        + f", load average at start {out['machine']['loadavg_at_start']}",
        "",
        "| rules | load ms (CPU ms; parse/check/compile ms) | fresh process ms | decision p50 / p99 µs: name-indexed | plain | shell/path | shell/path, command not seen before | all calls | Cedar load ms | Cedar p50 / p99 µs, whole set (engine p50) | Cedar per-tool set | agree allow/deny (3-way) |",
        "|---:|---|---:|---|---|---|---|---|---:|---|---|---|",
    ]
    for size, e in out["sizes"].items():
        d = e["decision"]
        cold = e["decision_shell_cache_cold"]
        ld = e["load"]
        fresh = e.get("load_fresh_process", {}).get("first_load_ms")
        c = e.get("cedar")
        cedar_cols = ["-", "-", "-", "-"]
        if c:
            w, t = c["whole"], c["per_tool"]
            agree = [f"{x['agreement']['allow_deny_agree']}/{x['agreement']['calls']} ({x['agreement']['three_way_agree']})" for x in (w, t)]
            cedar_cols = [
                f"{c['load']['median_ms']:.0f}",
                f"{_us(w['decision']['all']['p50_ns'])} / {_us(w['decision']['all']['p99_ns'])} ({w['engine_authz_us']['p50']})",
                f"{_us(t['decision']['all']['p50_ns'])} / {_us(t['decision']['all']['p99_ns'])} ({t['engine_authz_us']['p50']})",
                " and ".join(agree) if agree[0] != agree[1] else agree[0],
            ]
        lines.append(
            f"| {int(size):,} | {ld['median_ms']:.0f} ({ld.get('cpu_median_ms', float('nan')):.0f}; {ld['parse_ms']:.0f}/{ld['check_ms']:.0f}/{ld['compile_and_rest_ms']:.0f}) "
            f"| {fresh if fresh is not None else '-'} "
            f"| {_us(d['name_indexed']['p50_ns'])} / {_us(d['name_indexed']['p99_ns'])} "
            f"| {_us(d['plain']['p50_ns'])} / {_us(d['plain']['p99_ns'])} "
            f"| {_us(d['subjects']['p50_ns'])} / {_us(d['subjects']['p99_ns'])} "
            f"| {_us(cold['subjects']['p50_ns'])} / {_us(cold['subjects']['p99_ns'])} "
            f"| {_us(d['all']['p50_ns'])} / {_us(d['all']['p99_ns'])} | " + " | ".join(cedar_cols) + " |"
        )
    lines.append("")
    for key, v in out["results"].items():
        mark = "PASS" if v["pass"] else "FAIL"
        detail = {k: val for k, val in v.items() if k != "pass"}
        lines.append(f"- {key}: {mark} {detail}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
