"""Every real call of the shared corpus is decided by `Policy.evaluate` (the generated plans, the
specialized predicates and every cache behind them) exactly as by the reference evaluator (the
generic predicates of `dsl.compiler.compile_condition_generic`, no plan, no cache), with every
sample policy: the same effect, the same outcomes (rule, error, reason), the same Decision.

The optimizations that make a decision take a few microseconds (issue 9, section 5) must never
change one: this is their net on the calls they were tuned for. Each call is decided three times
by `evaluate`: with the caches emptied before it (what a first sight computes), after the
whole file has been decided once (what the caches hold for later calls), and once more in
another order (a cache filled by other calls).

Skipped when ../shared/corpus (beside the project root) is absent, or COUNTERSIGN_CORPUS points
nowhere. The corpus is read in place, never copied into the repository.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from dsl import Policy, ast
from dsl.compiler import Env, clear_caches, compile_condition_generic
from dsl.decision import RuleOutcome, decide
from dsl.parser import parse
from dsl.values import EvalError, TOO_DEEP, failure_message

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
CORPUS = Path(os.environ.get("COUNTERSIGN_CORPUS", ROOT.parent / "shared" / "corpus"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the shared corpus is not at {CORPUS}"),
]

# the files of calls in the common shape ({"tool", "args", "cwd"?}), each decided by every policy
CALL_FILES = ["coding_agent_tool_calls.jsonl", "toolemu_agent_tool_calls.jsonl", "tau_bench_actions.jsonl"]
POLICIES = sorted(p.name for p in SAMPLES.glob("*.policy"))


def corpus_calls() -> list[tuple[str, dict, dict]]:
    """(tool, args, context) of every call whose arguments are an object, the recorded cwd and
    permission mode in the context (as bench/real_policies.py reads them), plus the Claude Code
    hook payloads as a hook passes them (tool_name, tool_input, cwd)."""
    calls = []
    for name in CALL_FILES:
        path = CORPUS / name
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                if isinstance(row.get("args"), dict) and isinstance(row.get("tool"), str):
                    context = {"cwd": row["cwd"]} if isinstance(row.get("cwd"), str) else {}
                    calls.append((row["tool"], row["args"], context))
    payloads = CORPUS / "claude_code_pretooluse_payloads.jsonl"
    if payloads.exists():
        with open(payloads, encoding="utf-8") as handle:
            for line in handle:
                payload = json.loads(line).get("payload") or {}
                tool, args = payload.get("tool_name"), payload.get("tool_input")
                if isinstance(tool, str) and isinstance(args, dict):
                    cwd = payload.get("cwd")
                    calls.append((tool, args, {"cwd": cwd} if isinstance(cwd, str) else {}))
    return calls


def reference_decider(policy: Policy):
    """A function deciding a call as `Policy.evaluate` does, with the generic predicates."""
    nodes = parse(policy.source_text, policy.source_name).of_type(ast.Rule)
    generic = [compile_condition_generic(n.condition) if n.condition is not None else None for n in nodes]

    def decide_call(tool: str, args: dict, context: dict):
        outcomes = []
        for rule in policy.rules_for(tool):
            error, holds = None, True
            test = generic[rule.order]
            if test is not None:
                try:
                    holds = test(Env(tool, args, context, home=policy.home))
                except EvalError as exc:
                    holds, error = False, exc.message
                except RecursionError:
                    holds, error = False, TOO_DEEP
                except Exception as exc:  # pragma: no cover - guarded() turns these into EvalErrors
                    holds, error = False, failure_message(exc)
            if holds is True or error is not None:
                outcomes.append(RuleOutcome(rule=rule.rule_id, line=rule.line, effect=rule.effect, counted=holds or rule.effect != "allow",
                                            error=error, reason=rule.reason, condition=rule.condition_text))
        return decide(outcomes, policy._requirements, policy.default, policy.name, policy.digest)

    return decide_call


def shown(decision) -> tuple:
    return decision.effect, [(o.rule, o.error, o.reason, o.counted) for o in decision.outcomes]


@pytest.fixture(scope="module")
def calls():
    found = corpus_calls()
    assert len(found) > 10_000
    return found


@pytest.mark.parametrize("name", POLICIES)
def test_every_corpus_call_is_decided_as_the_reference_evaluator_decides_it(name, calls):
    policy = Policy.load(SAMPLES / name)
    reference = reference_decider(policy)
    expected = []
    for tool, args, context in calls:
        clear_caches()  # nothing the optimized path kept reaches the reference
        expected.append(reference(tool, args, context))
    mismatches = []

    def check(i, decision, when):
        if decision != expected[i] and len(mismatches) < 20:
            tool, args, context = calls[i]
            mismatches.append((when, tool, json.dumps(args)[:200], context, shown(decision), shown(expected[i])))

    for i, (tool, args, context) in enumerate(calls):  # a first sight: nothing kept from earlier calls
        clear_caches()
        check(i, policy.evaluate(tool, args, context), "cold")
    for i, (tool, args, context) in enumerate(calls):  # the caches as the whole file filled them
        check(i, policy.evaluate(tool, args, context), "warm")
    order = list(range(len(calls)))
    random.Random(7).shuffle(order)
    for i in order:
        tool, args, context = calls[i]
        check(i, policy.evaluate(tool, args, context), "shuffled")
    assert mismatches == []
