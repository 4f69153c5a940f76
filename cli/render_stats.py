"""Render a ledger.stats.Stats for a terminal: scalars as lines, mappings as small tables."""

from typing import Any

import typer

from cli.output import table


def _label(name: str) -> str:
    return name.replace("_", " ")


def render(stats: Any) -> None:
    import msgspec

    data = msgspec.to_builtins(stats)
    tables = []
    for key, value in data.items():
        if isinstance(value, dict) and value and all(not isinstance(v, (dict, list)) for v in value.values()):
            tables.append((key, value))
        elif isinstance(value, (dict, list)):
            tables.append((key, value))
        else:
            if isinstance(value, float):
                value = f"{value:.1f}" if not key.endswith("rate") else f"{value:.1%}"
            typer.echo(f"{_label(key)}: {'-' if value is None else value}")
    for key, value in tables:
        if isinstance(value, dict):
            if value and all(isinstance(v, dict) for v in value.values()):
                columns = sorted({c for v in value.values() for c in v})
                table([key.split("_")[-1], *columns], [[k, *(v.get(c) for c in columns)] for k, v in value.items()], title=_label(key))
            elif value:
                table([_label(key), "count"], sorted(value.items(), key=lambda kv: -kv[1] if isinstance(kv[1], (int, float)) else 0), title=None)
        elif value and isinstance(value[0], dict):
            columns = list(value[0])
            table(columns, [[row.get(c) for c in columns] for row in value], title=_label(key))
