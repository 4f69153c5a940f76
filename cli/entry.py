"""The `countersign` console script: `countersign hook claude-code ...` goes straight to the
adapter (adapters.claude_code.main), which Claude Code starts once per tool call, without
importing typer and every command (about 60 ms of a hook's cold start); anything else goes to the
full CLI (cli.main).

The hook's process then ends with os._exit once its answer is flushed: everything it wrote is
durable by then (the Gate closed, or the service answered), and the interpreter's own teardown
(freeing every module and object of a loaded policy, about 15 ms) would only delay Claude Code."""

import os
import sys

FAST = ("hook", "claude-code")


def main() -> None:
    if tuple(sys.argv[1:3]) == FAST:
        from adapters.claude_code import main as hook

        code = hook(sys.argv[3:])
        try:
            sys.stdout.flush()
        except Exception:  # as the interpreter itself exits when it cannot flush stdout
            code = 120
        try:
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)
    from cli.main import main as full

    full()


if __name__ == "__main__":
    main()
