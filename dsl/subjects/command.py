"""One simple command of a shell string, as `shell(x)` gives it, and the words it is made of."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command of a shell string.

    - `program`: the basename of the command's first word (`rm` for `/bin/rm`); `path`: that word.
    - `argv`: every word, the program first; `args`: the words that are not flags; `flags`: the
      flag names, each short flag and long flag once, with known aliases added (see
      FLAG_ALIASES), sorted.
    - `redirects`: the targets of file redirections (`> out`, `>> log`, `< in`).
    - `wrappers`: the wrappers that ran it (`sudo`, `timeout`, `env`, ...), outermost first.
    - `assignments`: leading `NAME=value` words.
    - `nested`: it runs inside another command: `$(...)`, backticks, `bash -c`, `eval`, `xargs`, a
      heredoc fed to a shell.
    - `dynamic`: some word holds an expansion (`$HOME`, `$(...)`, `*`), so its value at run time is
      not known; its text is kept as written.
    - `text`: the command's source text.
    - `code`: the inline code it runs, as written: a shell's `-c` script and the heredoc or
      here-string it reads as its script, an interpreter's `-c`/`-e` code (`python -c`, `perl -e`,
      `node -e`, ...) or the heredoc it reads; empty for other commands.
    """

    program: str
    path: str
    argv: tuple[str, ...]
    args: tuple[str, ...]
    flags: tuple[str, ...]
    redirects: tuple[str, ...] = ()
    wrappers: tuple[str, ...] = ()
    assignments: tuple[str, ...] = ()
    nested: bool = False
    dynamic: bool = False
    text: str = ""
    code: tuple[str, ...] = ()

    KIND = "command"
    FIELDS = {
        "program": "string", "path": "string", "argv": "list[string]", "args": "list[string]",
        "flags": "list[string]", "redirects": "list[string]", "wrappers": "list[string]",
        "assignments": "list[string]", "nested": "bool", "dynamic": "bool", "text": "string",
        "code": "list[string]",
    }

    def __str__(self) -> str:
        return " ".join(self.argv)


@dataclass
class _Word:
    value: str
    dynamic: bool


def _as_dict(cmd: Command) -> dict:
    return {name: getattr(cmd, name) for name in Command.__dataclass_fields__}
