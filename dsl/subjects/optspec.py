"""The shape of a program's option table (see dsl.subjects.wrappers for the tables themselves).

An `Opt` says what one option does: whether it takes a value, how (attached, the next word, either),
and what that value or the option means for what runs. A `Spec` says how a program reads its
command line: its options, whether options stop at the first operand (getopt's `+`), how many
operands stand before the command, and what the operands after them are (a command, a script, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How an option takes its value (getopt(3) and getopt_long(3) of glibc, unless a table says otherwise).
NONE = "none"          # no value: `-i`, `--ignore-environment`
REQUIRED = "required"  # attached (`-uroot`, `--user=root`) or else the next word (`-u root`)
OPTIONAL = "optional"  # attached only (`-t5`, `--timing=FILE`; getopt's `::`)
NEXT = "next"          # always the next word, the rest of a cluster still options (`bash -co posix`)
TWO = "two"            # always the next two words (bwrap's `--bind SRC DEST`)
THREE = "three"        # always the next three words (hyperfine's `--parameter-scan VAR MIN MAX`)

# What an option (or its value) means for what runs.
EXIT = "exit"          # the program runs no command: --help, --version, `sudo -l`, `command -v`
EXIT_BARE = "exit-bare"  # EXIT when given no value (`sudo -h` is help, `sudo -hHOST` names a host)
SCRIPT = "script"      # the value is a shell script it runs: `su -c CMD`, `script -c CMD`
SCRIPT_OPERAND = "script-operand"  # the first operand is the script: `bash -c`
STDIN = "stdin"        # it reads its script from standard input: `bash -s`, `python -i`
CODE = "code"          # the value is code of the program's own language: `python -c`, `perl -e`
MODULE = "module"      # the value names what runs (not a file, not stdin): `python -m MOD`
SPLIT = "split"        # the value is split into words that take its place: `env -S 'rm -rf /'`
ARGV_MODE = "argv"     # the operands become a command: `runuser -u USER CMD`, `watch -x CMD`
LOGIN_SHELL = "login-shell"  # its value is the program run as the shell: `su -s PROG USER -- ARGS` runs PROG ARGS
SHELL_MODE = "shell"   # with no command it runs an interactive shell: `sudo -s`, `sudo -i`
END = "end"            # options end here; the following words are operands (`python -c`, `bash -`)
HIDDEN = "hidden"      # it reads more of its command line from elsewhere (`bwrap --args FD`): not known here
FILL = "fill"          # the value is a string replaced at run time in the command's words (`xargs -I {}`)

# What a program runs after its options (Spec.runs).
ARGV = "argv"          # the operands after `skip` are a command and its arguments (env, sudo, timeout)
SHELL = "shell"        # a shell: a -c script, a script file (the first operand), or standard input
INTERPRETER = "interpreter"  # like SHELL, but the code is another language: kept in Command.code
SESSION = "session"    # a shell it starts: -c scripts, else su's extra operands given to `sh`, else stdin
SH_WORDS = "sh-words"  # the operands after `skip` joined with spaces and run by `sh -c` (watch, sg)
SCRIPTS = "scripts"    # each operand after `skip` is a script of its own, run by `sh -c` (hyperfine)
APPLET = "applet"      # the first operand names the program (busybox)

# Which words before the command are NAME=VALUE assignments for it (Spec.assignments).
ENV_ASSIGNMENTS = "env"    # env(1): after its options, a first operand `-` (-i), then every operand with a `=`
SUDO_ASSIGNMENTS = "sudo"  # sudo(8): `NAME=VALUE` words among its options, until `--`


@dataclass(frozen=True, slots=True)
class Opt:
    value: str = NONE
    does: str = ""
    ends: bool = False  # options end after this one (`python -c CODE ARGS...`)
    # for an attached-only value: a regex of what the value may be (perl's `-l[octal]`); the
    # value is its longest match at the start of the rest, and the cluster goes on after it
    # (`perl -lne CODE` is -l, -n, -e CODE). "" takes the whole rest of the word.
    attached: str = ""
    # a regex (matched at the start, ignoring case) of values that make what the program runs
    # unknown here: ssh's `-o ProxyCommand=CMD` runs CMD through the user's shell
    hides: str = ""


@dataclass(frozen=True, slots=True)
class Spec:
    """How one program reads its command line.

    - `manual`: the manual (name and version) the table follows.
    - `short`: option letter -> Opt; `long`: long name (no dashes) -> Opt.
    - `runs`: what the operands are (ARGV, SHELL, ...); `skip`: operands before the command
      (timeout's duration, chroot's directory); `leading`: operands that may stand before the
      options, each only when it does not start with `-` (setarch's optional arch: `setarch -R CMD`).
    - `permute`: options may follow operands (GNU getopt without `+`: su, script); else options end
      at the first operand. `assignments`: which words before the command are `NAME=VALUE`
      assignments (ENV_ASSIGNMENTS, SUDO_ASSIGNMENTS; "": none, the first operand is the command).
    - `abbreviations`: a unique prefix of a long option is that option (getopt_long); `single_dash_long`:
      a long option may be written with one dash (bash's `-rcfile`, getopt_long_only).
    - `lone_dash`: what a lone `-` does (None: it is an operand).
    - `numeric`: `-N` is a value, not options (`nice -10`). `clusters`: short options may be joined
      (`-xv`); `plus`: `+x` is an option too (shells' `+o`).
    - `any_long`: a long option the table does not list takes no value (zsh's `--OPTNAME`, firejail's
      `--opt=value`), so it cannot hide which program runs.
    - `bare_shell`: with no command it runs an interactive shell, which reads standard input (su, chroot).
    - `default`: the command when none is given (xargs: echo); `dynamic_inner`: the command's
      arguments come from elsewhere (xargs: standard input).
    - `dash_c_after_skip`: `-c`/`--command` right after the skipped operands is a script (flock FILE -c).
    - `shell_args`: the operands after `skip` are arguments of the shell it starts (`su USER -c CMD`).
    - `separators`: operands that end the command (GNU parallel's `:::`): what follows is data.
    - `fill`: a regex of the strings it replaces at run time in the command's words (`{}`, `{.}`
      for GNU parallel) beside those an option names (FILL); with none of them in the command it
      appends its arguments (xargs, parallel).
    - `subcommands`: the first operand after the program's own options names a subcommand, read
      with that Spec (`docker exec`, `uv run`); another subcommand runs nothing read here.
    - `reopen`: options are read again after this many operands (ssh: `ssh HOST -p 22 CMD`).
    - `listed`: the program is listed as a command of its own, and what it runs follows it, nested,
      with the program among its `wrappers` (ssh, docker, gdb: a rule on the runner still sees it).
    - `remote`: what it runs runs on another machine or in a container (ssh, docker exec): its
      directory is not known here.
    - `opaque`: it runs commands in ways not read here (tmux's subcommands, key bindings and
      formats): it is listed as dynamic.
    """

    manual: str
    short: dict[str, Opt] = field(default_factory=dict)
    long: dict[str, Opt] = field(default_factory=dict)
    runs: str = ARGV
    skip: int = 0
    leading: int = 0
    permute: bool = False
    assignments: str = ""
    abbreviations: bool = True
    single_dash_long: bool = False
    lone_dash: Opt | None = None
    numeric: bool = False
    clusters: bool = True
    plus: bool = False
    any_long: bool = False
    bare_shell: bool = False
    default: tuple[str, ...] = ()
    dynamic_inner: bool = False
    dash_c_after_skip: bool = False
    shell_args: bool = False
    separators: tuple[str, ...] = ()
    fill: str = ""
    subcommands: dict[str, "Spec"] = field(default_factory=dict)
    reopen: int = 0
    listed: bool = False
    remote: bool = False
    opaque: bool = False
    # computed: a regex of a run of short options that take no value, do nothing and end nothing
    # (`-aaaa`), which dsl.subjects.getopt skips in one step; None when there is none or the
    # program does not cluster its options
    plain_run: re.Pattern[str] | None = field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        letters = "".join(sorted(ch for ch, opt in self.short.items()
                                 if opt.value == NONE and not opt.does and not opt.ends and not opt.hides))
        if letters and self.clusters:
            object.__setattr__(self, "plain_run", re.compile("[" + re.escape(letters) + "]+"))


def spec(manual: str, short: str = "", long: str = "", does: dict[str, str] | None = None,
         ends: str = "", attached: dict[str, str] | None = None, hides: dict[str, str] | None = None,
         **kw) -> Spec:
    """A Spec from getopt-like strings, so a table reads like the program's own source.

    - `short`: a getopt(3) optstring without its leading `+`: `x` no value, `x:` a value, `x::` an
      attached value only; `x;` the next word always (a shell's `-o`).
    - `long`: space-separated `name` (no value), `name:`, `name::`, `name;` as for short options,
      `name;;` (the next two words always: bwrap's `--bind SRC DEST`), `name;;;` (three),
      or `name=x` (the same option as the short `-x`).
    - `does`: option (a letter or a long name) -> what it does (EXIT, SCRIPT, ...). A long alias of a
      short option (`name=x`) does what the short one does.
    - `ends`: the options (letters or long names, space-separated) after which options end.
    - `attached`: short option letter -> the regex its attached-only value must match (Opt.attached).
    - `hides`: option (a letter or a long name) -> the regex of its values that hide what runs (Opt.hides).
    """
    does = does or {}
    ending = set(ends.split())
    kinds = {"": NONE, ":": REQUIRED, "::": OPTIONAL, ";": NEXT, ";;": TWO, ";;;": THREE}
    hides = hides or {}
    shorts: dict[str, Opt] = {}
    i = 0
    while i < len(short):
        ch, i = short[i], i + 1
        suffix = ""
        while i < len(short) and short[i] in ":;":
            suffix, i = suffix + short[i], i + 1
        shorts[ch] = Opt(kinds[suffix], does.get(ch, ""), ch in ending, (attached or {}).get(ch, ""), hides.get(ch, ""))
    longs: dict[str, Opt] = {}
    for item in long.split():
        if "=" in item:
            name, alias = item.split("=", 1)
            base = shorts[alias]
            longs[name] = Opt(base.value, does.get(name, base.does), base.ends or name in ending, "",
                              hides.get(name, base.hides))
            continue
        name = item.rstrip(":;")
        longs[name] = Opt(kinds[item[len(name):]], does.get(name, ""), name in ending, "", hides.get(name, ""))
    return Spec(manual, shorts, longs, **kw)
