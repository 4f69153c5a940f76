"""Decision latency: countersign's `Policy.evaluate` and Cedar (through cedarpy) on the same calls.

Every call is timed on its own with `time.perf_counter_ns` around one call (the timer pair costs
about 50-100 ns, reported as `timer_overhead_ns` and not subtracted). A first, untimed pass warms
every cache (countersign's per-tool candidate tuples and its parsed-shell cache) and checks that
the two engines agree on every call; then the calls are timed in several rounds, each in a new
shuffled order, and once more with the parsed-shell caches emptied before each call (the cost of
a command text seen for the first time). Decisions are deterministic, so agreement checked once per call holds for every
timed repetition of it.

Calls fall in categories (by the generated policy, not by countersign's internals):
`name_indexed` (some rule names the tool exactly), split into `plain` (no candidate rule uses
shell() or path()) and `subjects` (some does); `glob_only`; `unlisted` (no rule: the default).
"""

from __future__ import annotations

import collections
import gc
import random
import time

from bench import cedar as cedar_tr
from bench.generate import GeneratedPolicy
from bench.timing import summary_ns
from dsl import Policy
from dsl.compiler import clear_caches
from dsl.values import selector_regex


def _candidates_by_tool(g: GeneratedPolicy, tools: set[str]) -> dict[str, tuple[str, list]]:
    exact = collections.defaultdict(list)
    globs = []
    for r in g.rules:
        for s in r.selectors:
            if "*" in s:
                globs.append((selector_regex(s), r))
            else:
                exact[s].append(r)
    out = {}
    for tool in tools:
        cands = list(exact.get(tool, ()))
        for rx, r in globs:
            if rx.match(tool) and r not in cands:
                cands.append(r)
        cands.sort(key=lambda r: int(r.rule_id[1:]))
        if not cands:
            out[tool] = ("unlisted", cands)
        elif tool in g.exact_tools:
            out[tool] = (("subjects" if any(r.uses_subjects for r in cands) else "plain"), cands)
        else:
            out[tool] = ("glob_only", cands)
    return out


def _summaries(samples: dict[str, list[int]]) -> dict:
    out = {"all": summary_ns([x for v in samples.values() for x in v])}
    out["name_indexed"] = summary_ns(samples.get("plain", []) + samples.get("subjects", []))
    for cat in ("plain", "subjects", "glob_only", "unlisted"):
        out[cat] = summary_ns(samples.get(cat, []))
    return out


def run(
    g: GeneratedPolicy,
    policy: Policy,
    calls: list[dict],
    *,
    rounds: int,
    cedar_budget_s: float,
    with_cedar: bool,
    seed: int = 3,
) -> dict:
    table = _candidates_by_tool(g, {c["tool"] for c in calls})
    cats = [table[c["tool"]][0] for c in calls]
    triples = [(c["tool"], c["args"], c["context"]) for c in calls]
    evaluate = policy.evaluate

    # pass 1: the first sight of each call (from empty shell caches, which
    # an earlier size would otherwise have filled); it warms the caches and records the decisions
    clear_caches()
    effects = []
    first = collections.defaultdict(list)  # the first sight of each call, caches cold
    pc = time.perf_counter_ns
    for (tool, args, ctx), cat in zip(triples, cats):
        t0 = pc()
        d = evaluate(tool, args, ctx)
        t1 = pc()
        first[cat].append(t1 - t0)
        effects.append(d.effect)
    result: dict = {
        "calls": len(calls),
        "categories": dict(collections.Counter(cats)),
        "effects": dict(collections.Counter(effects)),
        "candidates_per_call": round(sum(len(policy.rules_for(t)) for t, _, _ in triples) / len(triples), 2),
        "first_sight": _summaries(first),
    }

    # timed rounds
    rng = random.Random(seed)
    order = list(range(len(triples)))
    samples: dict[str, list[int]] = collections.defaultdict(list)
    gc.collect()
    for _ in range(rounds):
        rng.shuffle(order)
        for i in order:
            tool, args, ctx = triples[i]
            t0 = pc()
            evaluate(tool, args, ctx)
            t1 = pc()
            samples[cats[i]].append(t1 - t0)
    result["rounds"] = rounds
    result["decision"] = _summaries(samples)

    # one more round with the parsed-shell caches emptied before each call (untimed): what a call
    # costs when its command text has not been seen before
    cold: dict[str, list[int]] = collections.defaultdict(list)
    rng.shuffle(order)
    for i in order:
        tool, args, ctx = triples[i]
        clear_caches()
        t0 = pc()
        evaluate(tool, args, ctx)
        t1 = pc()
        cold[cats[i]].append(t1 - t0)
    result["decision_shell_cache_cold"] = _summaries(cold)

    if with_cedar:
        result["cedar"] = _cedar(g, table, calls, triples, cats, effects, cedar_budget_s, rng)
    return result


def _cedar(g, table, calls, triples, cats, effects, budget_s, rng) -> dict:
    """Cedar on the same calls, twice: with the whole policy set (Cedar evaluates every policy for
    every request; it has no index by resource), and with a policy set per tool holding only the
    policies of the rules that cover it (what a caller-side index, like countersign's RuleIndex,
    would hand Cedar). Agreement with countersign is checked for every call in both."""
    import cedarpy

    text = cedar_tr.translate(g.rules)
    whole = cedarpy.PolicySet.from_str(text)
    entities = cedarpy.Entities.from_json_str("[]")
    # requests built (derived values computed) before timing
    requests = [cedar_tr.request(t, a, c, table[t][1]) for t, a, c in triples]
    sliced = {tool: cedarpy.PolicySet.from_str(cedar_tr.translate(table[tool][1])) for tool in {t for t, _, _ in triples}}
    out = {"policies": text.count("@id(")}
    for name, policy_for in (("whole", lambda i: whole), ("per_tool", lambda i: sliced[triples[i][0]])):
        out[name] = {
            "agreement": _agreement(cedarpy, requests, policy_for, entities, triples, effects),
            **_timed(cedarpy, requests, policy_for, entities, cats, budget_s, rng),
        }
    return out


def _agreement(cedarpy, requests, policy_for, entities, triples, effects) -> dict:
    agree_ad = agree_3 = errors = 0
    examples = []
    by_kind = collections.Counter()
    for i, req in enumerate(requests):
        resp = cedarpy.is_authorized(req, policy_for(i), entities)._authz_resp
        ce = cedar_tr.effect_of(resp)
        errors += ce == "error"
        ours = effects[i]
        same_ad = (ours == "allow") == (ce == "allow")
        agree_ad += same_ad
        agree_3 += ours == ce
        if ours != ce:
            by_kind[f"{ours}->{ce}"] += 1
            if len(examples) < 20:
                examples.append({
                    "tool": triples[i][0],
                    "args": _short(triples[i][1]),
                    "countersign": ours,
                    "cedar": ce,
                    "allow_deny_differs": not same_ad,
                    "cedar_errors": resp.get("diagnostics", {}).get("errors", [])[:3],
                })
    n = len(requests)
    return {
        "calls": n,
        "allow_deny_agree": agree_ad,
        "allow_deny_disagree": n - agree_ad,
        "three_way_agree": agree_3,
        "three_way_disagree": n - agree_3,
        "cedar_request_errors": errors,
        "disagreements_by_kind": dict(by_kind),
        "examples": examples,
    }


def _timed(cedarpy, requests, policy_for, entities, cats, budget_s, rng) -> dict:
    """Whole shuffled rounds while the budget lasts (at least one)."""
    pc = time.perf_counter_ns
    is_authorized = cedarpy.is_authorized
    samples: dict[str, list[int]] = collections.defaultdict(list)
    engine_us: list[int] = []
    order = list(range(len(requests)))
    started = time.perf_counter()
    rounds = 0
    gc.collect()
    while rounds == 0 or time.perf_counter() - started < budget_s:
        rng.shuffle(order)
        for i in order:
            req, policies = requests[i], policy_for(i)
            t0 = pc()
            r = is_authorized(req, policies, entities)
            t1 = pc()
            samples[cats[i]].append(t1 - t0)
            engine_us.append(r._authz_resp.get("metrics", {}).get("authz_duration_micros", -1))
        rounds += 1
    engine_us.sort()
    return {
        "rounds": rounds,
        "decision": _summaries(samples),
        # Cedar's own measure of the authorization inside Rust (whole microseconds), without the
        # Python binding's JSON encoding of the request and decoding of the answer.
        "engine_authz_us": {"p50": engine_us[len(engine_us) // 2], "p99": engine_us[min(len(engine_us) - 1, len(engine_us) * 99 // 100)]},
    }


def _short(args: dict) -> str:
    text = repr(args)
    return text if len(text) <= 200 else text[:200] + "..."
