"""`python -m bench --only history`: decisions of the sample policies that read the run's history
(samples/retail.policy, samples/airline.policy, samples/assistant.policy) with 1,000 earlier calls
in the run (issue 14: p50 at most 20 µs), and the cost of folding one event into the index.

The run is built from the real tau-bench actions of the policy's domain (and ToolEmu's calls for
the assistant), cycled to 1,000 calls, every lookup given a kept result naming a payment method
or an account (so provenance has words to index), through `ledger.workflow.history.HistoryIndex`
fed ledger-shaped records, as a Gate feeds it. Then every real call of the domain is decided with
that history, untimed once (warm), then timed one by one in `ROUNDS` shuffled passes.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import msgspec

from bench import corpus
from bench.timing import summary_ns
from dsl import Policy
from ledger import events as ev
from ledger.workflow.history import HistoryIndex

ROOT = Path(__file__).resolve().parents[1]
EARLIER = 1_000
ROUNDS = 20
TARGET_P50_NS = 20_000
_ZERO = "0" * 64


class _Record(msgspec.Struct):
    seq: int
    event: object
    data: bytes


def _calls(name: str) -> list[dict]:
    path = corpus.CORPUS / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _result_for(call: dict, n: int) -> dict | None:
    """A kept result for a lookup: what provenance reads (a payment method, an account)."""
    tool = call["tool"]
    if tool.startswith(("get_", "find_", "BankManagerGet", "BankManagerSearch", "WebBrowser", "GmailRead")):
        return {"payment_methods": {f"credit_card_{n:07d}": {"id": f"credit_card_{n:07d}"}},
                "text": f"Contact someone_{n}@example.com or pay account {n:03d}-1234-5678 today."}
    return None


def _index(calls: list[dict], run: str) -> HistoryIndex:
    """A HistoryIndex holding `EARLIER` calls of `run`, folded from ledger-shaped records."""
    index = HistoryIndex()
    seq = 0
    for n in range(EARLIER):
        call = calls[n % len(calls)]
        seq += 1
        proposed = ev.Proposed(seq=seq, run=run, proposer="agent", call_id=None, tool=call["tool"], args_digest=_ZERO,
                               context_digest=_ZERO, policy="p", policy_digest=_ZERO, effect="allow", rules=(), reasons=())
        index.fold(_Record(seq, proposed, msgspec.json.encode({"args": call["args"], "context": {}})))
        result = _result_for(call, n)
        seq += 1
        index.fold(_Record(seq, ev.ExecutionStarted(seq=seq, request=seq - 1, args_digest=_ZERO, executor=None), b"null"))
        seq += 1
        data = msgspec.json.encode({"result": result}) if result is not None else b"null"
        index.fold(_Record(seq, ev.Executed(seq=seq, request=seq - 2, args_digest=_ZERO, outcome="ok", result_digest=None,
                                            error=None), data))
    return index


def _fold_cost(calls: list[dict]) -> dict:
    """ns per event folded into the index (proposals, starts and results of `EARLIER` calls)."""
    t0 = time.perf_counter_ns()
    index = _index(calls, "fold")
    elapsed = time.perf_counter_ns() - t0
    return {"events": index.last_seq, "ns_per_event": round(elapsed / index.last_seq, 1)}


def run(rounds: int = ROUNDS) -> dict:
    tau = _calls("tau_bench_actions.jsonl")
    toolemu = _calls("toolemu_agent_tool_calls.jsonl")
    domains = {
        "retail": ([c for c in tau if "/retail/" in c["source"]], {}),
        "airline": ([c for c in tau if "/airline/" in c["source"]], {}),
        "assistant": ([c for c in toolemu if isinstance(c["args"], dict)], None),
    }
    out = {"earlier_calls": EARLIER, "rounds": rounds, "target_p50_ns": TARGET_P50_NS, "policies": {}}
    for name, (calls, context) in domains.items():
        policy = Policy.load(ROOT / "samples" / f"{name}.policy")
        assert policy.reads_history
        history = _index(calls, "r").run("r")
        cases = [(c["tool"], c["args"], context if context is not None else {"user_prompt": c.get("user_instruction", "")})
                 for c in calls if isinstance(c["args"], dict)]
        effects: dict[str, int] = {}
        for tool, args, ctx in cases:  # warm, and what they decide
            effect = policy.evaluate(tool, args, ctx, history=history).effect
            effects[effect] = effects.get(effect, 0) + 1
        samples = []
        pc = time.perf_counter_ns
        evaluate = policy.evaluate
        order = list(cases)
        for r in range(rounds):
            random.Random(r).shuffle(order)
            for tool, args, ctx in order:
                t0 = pc()
                evaluate(tool, args, ctx, history=history)
                samples.append(pc() - t0)
        summary = summary_ns(samples)
        summary["calls"] = len(cases)
        summary["effects"] = effects
        summary["fold"] = _fold_cost(calls)
        summary["meets_target"] = summary["p50_ns"] <= TARGET_P50_NS
        out["policies"][name] = summary
    return out


def table(result: dict) -> str:
    lines = [f"decisions with {result['earlier_calls']:,} earlier calls in the run (target p50 <= {result['target_p50_ns'] / 1000:g} µs)",
             f"{'policy':<10} {'calls':>6} {'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8} {'fold ns/event':>14}"]
    for name, s in result["policies"].items():
        lines.append(f"{name:<10} {s['calls']:>6} {s['p50_ns'] / 1000:>8.2f} {s['p90_ns'] / 1000:>8.2f} {s['p99_ns'] / 1000:>8.2f} "
                     f"{s['fold']['ns_per_event']:>14.0f}")
    return "\n".join(lines)
