"""Normalized subjects: turn a raw argument into what it means, so rules match meaning.

Most bypasses of tool-call gates come from matching raw strings: a deny on `rm -rf /` misses
`rm -fr /`, a rule on a relative path misses the absolute path the tool receives, a deny on `cat`
misses `cd x && cat y`. Three functions of the policy language normalize instead:

* `path(x)` → `PathValue`: absolute, `.` and `..` resolved lexically (no file system access), `~`
  expanded against the caller's home, relative paths resolved against `context.cwd`; a Windows
  path (`C:\\...`, `\\\\server\\share`, or any path under a Windows cwd) → `WinPathValue`
  (dsl.subjects.winpaths), compared case-insensitively.
  expanded against the caller's home, relative paths resolved against `context.cwd` (or, as
  `path(x, base)`, against a directory); `.secret` from the one list in dsl.subjects.secrets.
* `shell(x)` → a list of `Command`: every simple command in a shell string, after unwrapping
  `sudo`, `timeout`, `env`, ..., including the commands nested in `$(...)`, backticks,
  `bash -c '...'`, `eval`, `xargs` and a heredoc piped into a shell, with flags normalized so that
  `-rf`, `-r -f`, `-fr` and `--recursive --force` give one set. Each command also carries the
  directory it runs in as far as the text shows (`cwd`, see dsl.subjects.cwd), the values its
  options took and the words that may name files (`values`, `paths`, from dsl.subjects.options),
  and whether it only reads (`read_only`).
* `url(x)` → `UrlValue`: scheme, host (lowercased, IDNA, trailing dot removed, userinfo
  separated), port, path.

All three are pure (the same input always gives the same value) and fail closed: input they
cannot understand raises `EvalError`, which makes the condition error, and an error never allows.

The shell parser is our own (dsl.subjects.bash): a recursive-descent parser, linear in the text,
that builds tree-sitter-bash's tree (the grammar GitHub uses) for the bash it reads and refuses
the rest. tree-sitter-bash itself was the parser until its parse proved quadratic on some texts;
it is now the oracle of the parser's differential tests. bashlex (GPL-3.0, a port of bash 4's
parser, little maintained) and shlex (a tokenizer, not a parser: it knows nothing of `&&`,
`$(...)` or heredocs) were not usable (docs/policy-language.md, "Why a parser of our own").
"""

from __future__ import annotations

from importlib import import_module

from dsl.subjects.command import Command
from dsl.subjects.paths import MAX_PATH_TEXT, PathValue, make_path, path_glob, under
from dsl.subjects.urls import MAX_URL_TEXT, UrlValue, parse_url
from dsl.subjects.winpaths import WinPathValue, WinStr

# The shell's modules (the parser, the programs' tables: about 20 ms to import) are imported on
# first use (PEP 562): a process that decides a call without shell() (a hook deciding a Read)
# does not pay for them.
_WHERE = {
    "FLAG_ALIASES": "dsl.subjects.programs", "SHELLS": "dsl.subjects.programs",
    "SINGLE_DASH_LONG": "dsl.subjects.programs", "WRAPPERS": "dsl.subjects.programs",
    "split_flags": "dsl.subjects.programs",
    "brace_expand": "dsl.subjects.quoting", "splice_continuations": "dsl.subjects.quoting",
    "MAX_SHELL_TEXT": "dsl.subjects.shell", "clear_shell_cache": "dsl.subjects.shell",
    "parse_shell": "dsl.subjects.shell", "parse_shell_uncached": "dsl.subjects.shell",
}

__all__ = [
    "Command", "PathValue", "make_path", "path_glob", "under", "FLAG_ALIASES", "SHELLS", "SINGLE_DASH_LONG",
    "WRAPPERS", "split_flags", "brace_expand", "splice_continuations", "MAX_SHELL_TEXT", "clear_shell_cache",
    "parse_shell", "parse_shell_uncached", "UrlValue", "parse_url", "MAX_PATH_TEXT", "MAX_URL_TEXT", "WinPathValue", "WinStr",
]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dsl.subjects' has no attribute {name!r}")
