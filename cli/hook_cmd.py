"""`countersign hook claude-code`: Claude Code's hooks decided by countersign (adapters.claude_code).

The hook runs once per tool call, so `countersign hook claude-code ...` is dispatched by
cli/entry.py before typer and the other commands are imported; this typer command is the same
thing reached through the full CLI (`countersign hook claude-code --help`, `python -m cli.main`).
Its options are the adapter's own (argparse, adapters.claude_code.parser), passed through as given.
"""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Hooks for agent hosts: countersign decides their tool calls.")


@app.command("claude-code", context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                              "help_option_names": []})
def claude_code(ctx: typer.Context) -> None:
    """Claude Code's PreToolUse, PostToolUse, PostToolUseFailure and PermissionDenied hooks:
    one hook input (JSON) on stdin, Claude Code's hook output on stdout. `settings` prints the
    settings.json snippet that installs it; `--help` lists the options."""
    from adapters.claude_code import main

    raise typer.Exit(main(list(ctx.args)))
