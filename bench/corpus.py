"""The shared corpus of real agent tool calls, read in place (never copied into the repository).

The corpus lives beside the project (`../shared/corpus`) or wherever `COUNTERSIGN_CORPUS` points.
`load_calls()` returns the calls of the three tool-call files in the common shape
`{"tool": ..., "args": {...}, "context": {...}, "source": ...}`; `context` carries the call's `cwd`
when the corpus has one (the coding-agent hook payloads do).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("COUNTERSIGN_CORPUS", ROOT.parent / "shared" / "corpus"))

FILES = {
    "tau": "tau_bench_actions.jsonl",
    "coding": "coding_agent_tool_calls.jsonl",
    "toolemu": "toolemu_agent_tool_calls.jsonl",
}


class CorpusMissing(Exception):
    """The corpus folder or one of its files is not there."""


def corpus_dir() -> Path:
    missing = [name for name in FILES.values() if not (CORPUS / name).is_file()]
    if missing:
        raise CorpusMissing(
            f"the shared corpus is not at {CORPUS} (missing {', '.join(missing)}); "
            "set COUNTERSIGN_CORPUS to its folder to run the benchmarks"
        )
    return CORPUS


def load_calls() -> dict[str, list[dict]]:
    """Every call of each tool-call file, keyed by corpus ("tau", "coding", "toolemu"). Calls whose
    arguments are not a JSON object are left out (the policy refuses them before any rule)."""
    folder = corpus_dir()
    out: dict[str, list[dict]] = {}
    for key, name in FILES.items():
        calls = []
        with open(folder / name, encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                if not isinstance(row.get("args"), dict) or not isinstance(row.get("tool"), str):
                    continue
                context = {"cwd": row["cwd"]} if isinstance(row.get("cwd"), str) else {}
                calls.append({"tool": row["tool"], "args": row["args"], "context": context, "source": key})
        out[key] = calls
    return out
