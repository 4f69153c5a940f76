"""The shell parser on the corpus's real commands: our parser (dsl.subjects.bash) against
tree-sitter-bash, whose tree it builds, and all of shell() (parse and reading of the commands).

Every distinct Bash command of the corpus (`coding_agent_tool_calls.jsonl` and
`claude_code_pretooluse_payloads.jsonl`, 1,479) is parsed by both parsers in turn, `ROUNDS` times,
each call timed alone with `time.perf_counter_ns`; a command's time is its best round (the machine's
noise only adds). Reported: p50, p90, p99 and mean over the commands, in µs, and the same for
`shell()` without its cache (`parse_shell_uncached`: what an agent's new command costs a decision
before any rule reads it). tree-sitter-bash is a test dependency (`pip install -e '.[test]'`); the
section runs without it, and says so.

    python -m bench --only parser         # about half a minute, results in bench/results/
"""

from __future__ import annotations

import json
import statistics
import time

from bench import corpus

ROUNDS = 15
_MASK = bytes(range(128)) + b"x" * 128  # as dsl.subjects.shell: every non-ASCII byte an ordinary "x"


def commands() -> list[str]:
    """The distinct Bash commands of the corpus's coding-agent calls and Claude Code hook payloads."""
    folder = corpus.corpus_dir()
    out = set()
    with open(folder / "coding_agent_tool_calls.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            command = (row.get("args") or {}).get("command") if isinstance(row.get("args"), dict) else None
            if row.get("tool") == "Bash" and isinstance(command, str):
                out.add(command)
    hooks = folder / "claude_code_pretooluse_payloads.jsonl"
    if hooks.is_file():
        with open(hooks, encoding="utf-8") as handle:
            for line in handle:
                payload = json.loads(line).get("payload") or {}
                command = (payload.get("tool_input") or {}).get("command")
                if payload.get("tool_name") == "Bash" and isinstance(command, str):
                    out.add(command)
    return sorted(out)


def _summary(us: list[float]) -> dict:
    xs = sorted(us)
    at = lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)  # noqa: E731
    return {"p50_us": at(0.5), "p90_us": at(0.9), "p99_us": at(0.99), "mean_us": round(statistics.mean(xs), 1),
            "max_us": round(xs[-1], 1)}


def run(rounds: int = ROUNDS) -> dict:
    from dsl.subjects.bash import BashSyntaxError, parse
    from dsl.subjects.quoting import splice_continuations
    from dsl.subjects.shell import parse_shell_uncached
    from dsl.values import EvalError

    try:
        import tree_sitter
        import tree_sitter_bash

        oracle = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
        oracle_version = getattr(tree_sitter_bash, "__version__", None)
    except ImportError:
        oracle, oracle_version = None, None
    texts = commands()
    sources = [splice_continuations(t).encode("utf-8", "surrogatepass").translate(_MASK) for t in texts]
    clock = time.perf_counter_ns
    ours, theirs, shell_us = [], [], []
    refused = 0
    for text, source in zip(texts, sources):
        best_ours = best_theirs = best_shell = float("inf")
        for _ in range(rounds):
            start = clock()
            try:
                parse(source)
            except BashSyntaxError:
                pass
            best_ours = min(best_ours, clock() - start)
            if oracle is not None:
                start = clock()
                oracle.parse(source)
                best_theirs = min(best_theirs, clock() - start)
            start = clock()
            try:
                parse_shell_uncached(text)
            except EvalError:
                pass
            best_shell = min(best_shell, clock() - start)
        try:
            parse(source)
        except BashSyntaxError:
            refused += 1
        ours.append(best_ours / 1000)
        shell_us.append(best_shell / 1000)
        if oracle is not None:
            theirs.append(best_theirs / 1000)
    out = {"commands": len(texts), "rounds": rounds, "refused_by_ours": refused,
           "ours_parse": _summary(ours), "shell_uncached": _summary(shell_us)}
    if oracle is not None:
        out["tree_sitter_parse"] = _summary(theirs)
        out["tree_sitter_bash_version"] = oracle_version
        out["ratio_per_command"] = _summary([a / b for a, b in zip(ours, theirs)])
    return out


def table(results: dict) -> str:
    rows = [("our parser (dsl.subjects.bash)", results["ours_parse"])]
    if "tree_sitter_parse" in results:
        rows.append((f"tree-sitter-bash {results.get('tree_sitter_bash_version') or ''}".strip(), results["tree_sitter_parse"]))
    rows.append(("shell(), no cache (parse and read)", results["shell_uncached"]))
    lines = [f"{results['commands']:,} distinct corpus commands, best of {results['rounds']} rounds each, µs "
             f"({results['refused_by_ours']} refused by our parser)", "",
             "| | p50 | p90 | p99 | mean | max |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in rows:
        lines.append(f"| {name} | {r['p50_us']} | {r['p90_us']} | {r['p99_us']} | {r['mean_us']} | {r['max_us']} |")
    if "ratio_per_command" in results:
        r = results["ratio_per_command"]
        lines.append(f"| ours / tree-sitter, per command | {r['p50_us']} | {r['p90_us']} | {r['p99_us']} | {r['mean_us']} | {r['max_us']} |")
    return "\n".join(lines)
