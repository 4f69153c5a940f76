"""Where the policy grammar lives, from a checkout and from an installed wheel.

The grammar's home is `grammars/policy.lark` at the repository's top level. The wheel ships a copy
as `dsl/grammars/policy.lark` (see `[tool.hatch.build.targets.wheel.force-include]` in
pyproject.toml), so an installed package looks beside itself first and a checkout falls back to
the repository folder.
"""

from __future__ import annotations

from pathlib import Path

GRAMMAR_FILE = "policy.lark"


def grammar_path() -> Path:
    """The path of `policy.lark`. Raises FileNotFoundError naming both places it looked."""
    here = Path(__file__).resolve().parent
    candidates = (here / "grammars" / GRAMMAR_FILE, here.parent / "grammars" / GRAMMAR_FILE)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"the policy grammar is missing; looked in {looked}")


def grammar_text() -> str:
    return grammar_path().read_text(encoding="utf-8")
