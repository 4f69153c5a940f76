"""The `countersign` console script: `countersign hook claude-code ...` goes straight to the
adapter (adapters.claude_code.main), which Claude Code starts once per tool call, without
importing typer and every command (about 60 ms of a hook's cold start); anything else goes to the
full CLI (cli.main)."""

import sys

FAST = ("hook", "claude-code")


def main() -> None:
    if tuple(sys.argv[1:3]) == FAST:
        from adapters.claude_code import main as hook

        sys.exit(hook(sys.argv[3:]))
    from cli.main import main as full

    full()


if __name__ == "__main__":
    main()
