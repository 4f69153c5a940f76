"""One simple command of a shell string, as `shell(x)` gives it, and the words it is made of."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from dsl.subjects.options import publishes as _publishes
from dsl.subjects.options import read_only as _read_only


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
    - `values`: the values its options took (`-C DIR`, `--from-file=F`), which are not `args`
      (dsl.subjects.options has the table of options that take a value, per program).
    - `paths`: the words that may name a file: the operands (but grep's and rg's pattern and
      git's subcommand) and the values of options that may take a file (all but those known to
      take a pattern, a number or a format). A rule on which files a command reads checks these.
    - `cwd`: the directory it runs in, as far as the text shows, relative to the call's
      context.cwd: `"."` unless an earlier `cd DIR` of the same text moved it (`cd src && ls`:
      `"src"`; `cd /tmp && cd x && ls`: `"/tmp/x"`), `""` when that is not known (after `cd $X`,
      `cd -`, pushd or popd, a function, or a `cd` that may have failed: see dsl.subjects.cwd).
      `path(a, c.cwd)` resolves a word as the command sees it.
    - `read_only` (computed): the program only reads, whatever options it was given
      (dsl.subjects.options.read_only: a table of read-only programs and of the options that
      make them run a program or write a file, from each manual).
    - `publishes` (computed): git pushes, under any name (`push`, `send-pack`, `subtree push`,
      `send-email`, ...), or may: it runs a command the text gives or its config names
      (`submodule foreach`, `rebase -x`, `bisect run`, `difftool`, `--upload-pack`, `config`),
      `-c` sets its config, or the subcommand is an alias (dsl.subjects.options.publishes).
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
    values: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    cwd: str = "."

    KIND = "command"
    FIELDS = {
        "program": "string", "path": "string", "argv": "list[string]", "args": "list[string]",
        "flags": "list[string]", "redirects": "list[string]", "wrappers": "list[string]",
        "assignments": "list[string]", "nested": "bool", "dynamic": "bool", "text": "string",
        "code": "list[string]",
        "values": "list[string]", "paths": "list[string]", "cwd": "string", "read_only": "bool",
        "publishes": "bool",
    }

    # computed once (the parsed Commands are cached and read by many rules), not an argument
    read_only: bool = field(init=False, compare=False, repr=False)
    publishes: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "read_only", _read_only(self))
        object.__setattr__(self, "publishes", _publishes(self))

    def __str__(self) -> str:
        return " ".join(self.argv)


@dataclass
class _Word:
    """One word of a command line: its value once quotes are removed, and whether that value is
    only known at run time. `translated`: it holds bash's `$"..."`, whose value is its contents
    unless the locale's catalog translates it (unknown here): the word is dynamic, but its
    contents are the best reading of what it names (`$"sudo" rm` is still read as sudo running rm)."""

    value: str
    dynamic: bool
    translated: bool = False


def _as_dict(cmd: Command) -> dict:
    """The arguments that make `cmd` again (the computed fields are not among them)."""
    return {name: getattr(cmd, name) for name in _INIT_FIELDS}


_INIT_FIELDS = tuple(f.name for f in fields(Command) if f.init)
