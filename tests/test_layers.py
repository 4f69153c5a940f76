"""The ledger's folders are its layers (ledger/__init__.py and each sub-package's docstring):
storage at the bottom, then the workflow's state machine and proof, then the Gate, then
analytics. No module imports one of a layer above it, and no import circle exists, counting the
imports made inside functions too (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ledger"

# Each module's layer; a module may import modules of its own layer or below.
LAYERS = {
    "ledger.events": 0, "ledger.digest": 0, "ledger.clock": 0, "ledger.fieldpath": 0,
    "ledger.store": 1, "ledger.workflow.machine": 2, "ledger.proof": 3,
    "ledger.workflow.snapshot": 3, "ledger.workflow.errors": 3,
    "ledger.workflow.catchup": 4, "ledger.workflow.reading": 4, "ledger.workflow.gate": 4,
    "ledger.workflow.async_gate": 4,
    "ledger.workflow.simulate": 5, "ledger.analytics": 5,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def _imports() -> dict[str, set[str]]:
    """Every ledger module → the ledger modules it imports anywhere (top level or in a function);
    `from P import m` where m is a submodule counts as importing P.m."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("ledger"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ledger"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_module_imports_a_layer_above_its_own():
    wrong = []
    for module, imported in _imports().items():
        if module == "ledger" or _layer(module) is None:
            continue
        for other in imported:
            if _layer(other) is not None and _layer(other) > _layer(module) and not other.startswith(module + "."):
                wrong.append(f"{module} (layer {_layer(module)}) imports {other} (layer {_layer(other)})")
    assert wrong == []


def test_the_ledger_has_no_import_circle():
    graph = _imports()
    # a package's __init__ importing its own modules is not a circle with them
    edges = {m: {o for o in targets if not o.startswith(m + ".")} for m, targets in graph.items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, stack + [nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(edges):
        if state.get(start) is None and visit(start, [start]):
            break
    assert cycle == [], " -> ".join(cycle)


def _top_imports(package: str) -> dict[str, set[str]]:
    """Every module of a top-level package → the top-level packages it imports anywhere."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
        out[_module_name(path)] = found
    return out


def test_dependencies_point_one_way_cli_service_ledger_dsl():
    """README, "What is here": cli → service → ledger → dsl. The service never imports the CLI;
    the ledger and the language never import the service or the CLI."""
    above = {"dsl": {"ledger", "service", "cli"}, "ledger": {"service", "cli"}, "service": {"cli"}}
    wrong = [f"{module} imports {found & forbidden}"
             for package, forbidden in above.items()
             for module, found in _top_imports(package).items() if found & forbidden]
    assert wrong == []
