"""What the programs that run other programs do with their words: shells, wrappers (`sudo`,
`env`, `timeout`, ...), `xargs`, `find -exec`, `watch`, `flock`; and how flags are named."""

from __future__ import annotations

import re
import shlex

from dsl.subjects.command import _Word
from dsl.subjects.options import paths, short_letters, split_words
from dsl.values import EvalError

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "rbash"})
# Reserved words: never the name of a command bash runs. The parser takes one for a command name
# only where it misread the text (`time { ...; }`, `coproc NAME { ...; }`), so it is an error.
_RESERVED = frozenset({"{", "}", "if", "then", "elif", "else", "fi", "for", "while", "until", "do", "done", "case",
                       "esac", "select", "function", "[[", "]]", "!", "(", ")", "in"})

# Equivalent spellings of common flags, so that `-r` and `--recursive` give the same set. A short
# flag maps to its long name; both are added.
FLAG_ALIASES: dict[str, dict[str, str]] = {
    "rm": {"r": "recursive", "R": "recursive", "f": "force", "i": "interactive", "v": "verbose", "d": "dir"},
    "cp": {"r": "recursive", "R": "recursive", "f": "force", "a": "archive", "v": "verbose", "n": "no-clobber"},
    "mv": {"f": "force", "i": "interactive", "v": "verbose", "n": "no-clobber"},
    "chmod": {"R": "recursive", "v": "verbose", "f": "silent"},
    "chown": {"R": "recursive", "v": "verbose", "f": "silent"},
    "chgrp": {"R": "recursive", "v": "verbose"},
    "ln": {"s": "symbolic", "f": "force"},
    "mkdir": {"p": "parents"},
    "git": {"f": "force", "n": "dry-run"},
    "curl": {"o": "output", "O": "remote-name", "L": "location", "k": "insecure", "X": "request", "d": "data", "s": "silent"},
    "wget": {"O": "output-document", "q": "quiet"},
    "sed": {"i": "in-place"},
    "tar": {"x": "extract", "c": "create", "f": "file", "z": "gzip", "v": "verbose"},
    "find": {},
    "kill": {},
    # long options that write or run, so that a GNU abbreviation (`sort --comp=sh`) resolves to them
    "sort": {"o": "output", "T": "temporary-directory", "m": "merge", "u": "unique", "r": "reverse",
             "compress-program": "compress-program", "files0-from": "files0-from", "random-source": "random-source"},
    "tree": {"o": "output"},
    "du": {"files0-from": "files0-from"},
    "wc": {"files0-from": "files0-from"},
    "diff": {"from-file": "from-file", "to-file": "to-file", "output": "output"},
    "grep": {"f": "file", "r": "recursive", "R": "dereference-recursive"},
}

# Wrappers run the command that follows them. Each entry: the options that take a value (the next
# word, or attached: `-uroot`, `--user=root`), the options that take none, and how many leading
# operands to skip before the wrapped command (timeout's duration). From each program's manual
# (GNU coreutils, sudo, OpenBSD doas, util-linux, macOS caffeinate). An option not listed makes
# the command unreadable (fail closed): it might take a value and so hide which program runs.
WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str], int]] = {
    "sudo": (
        frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group", "--host",
                   "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user", "--command-timeout", "--chroot"}),
        frozenset({"-A", "-B", "-b", "-E", "-H", "-i", "-K", "-k", "-N", "-n", "-P", "-S", "-s", "--askpass", "--bell",
                   "--background", "--preserve-env", "--set-home", "--login", "--remove-timestamp", "--reset-timestamp",
                   "--no-update", "--non-interactive", "--preserve-groups", "--stdin", "--shell"}),
        0,
    ),
    "doas": (frozenset({"-u", "-C"}), frozenset({"-n", "-s", "-L"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), frozenset({"-v", "--verbose", "--preserve-status", "--foreground"}), 1),
    "nice": (frozenset({"-n", "--adjustment"}), frozenset(), 0),
    "ionice": (frozenset({"-c", "-n", "--class", "--classdata"}), frozenset({"-t", "--ignore"}), 0),
    "nohup": (frozenset(), frozenset(), 0),
    "env": (
        frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-P"}),
        frozenset({"-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "--block-signal", "--default-signal",
                   "--ignore-signal", "--list-signal-handling"}),
        0,
    ),
    "command": (frozenset(), frozenset({"-p"}), 0),
    "builtin": (frozenset(), frozenset(), 0),
    "exec": (frozenset({"-a"}), frozenset({"-c", "-l"}), 0),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), frozenset({"-p", "-v", "-a", "-q", "--portability", "--verbose", "--append", "--quiet"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), frozenset(), 0),
    "caffeinate": (frozenset({"-t", "-w"}), frozenset({"-d", "-i", "-m", "-s", "-u"}), 0),
    "coproc": (frozenset(), frozenset(), 0),
    "setsid": (frozenset(), frozenset({"-c", "-f", "-w", "--ctty", "--fork", "--wait"}), 0),
    "chroot": (frozenset({"--userspec", "--groups"}), frozenset({"--skip-chdir"}), 1),
    "taskset": (frozenset(), frozenset({"-a", "--all-tasks", "-c", "--cpu-list"}), 1),  # -c: the mask is a list
    "busybox": (frozenset(), frozenset(), 0),
}
# sudo options after which no command follows (list, validate, version, edit files, help).
_SUDO_NO_COMMAND = frozenset({"-l", "--list", "-v", "--validate", "-V", "--version", "-e", "--edit", "--help"})
# GNU findutils xargs: options with a required value, and options without one (`-i`, `-l`, `-e`,
# `--replace`, `--max-lines`, `--eof` take an optional value only when attached).
_XARGS_VALUE_OPTIONS = frozenset({"-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a", "--max-args", "--max-procs", "--delimiter",
                                  "--arg-file", "--max-chars", "--process-slot-var"})
_XARGS_FLAGS = frozenset({"-0", "-r", "-t", "-p", "-x", "-o", "-i", "-l", "-e", "--null", "--no-run-if-empty", "--verbose",
                          "--interactive", "--exit", "--open-tty", "--show-limits", "--replace", "--max-lines", "--eof"})
_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _shell_operands(rest: list[_Word]) -> list[str]:
    """The words of a shell's command line that are neither options nor their values: a script
    file and its arguments (`bash deploy.sh x`). `-s` means the script still comes from stdin."""
    if any(w.value == "-s" or (w.value.startswith("-") and not w.value.startswith("--") and "s" in w.value[1:]) for w in rest):
        return []
    out, i = [], 0
    while i < len(rest):
        word = rest[i].value
        if word == "--":
            return [w.value for w in rest[i + 1 :]]
        if word.split("=", 1)[0] in _SHELL_VALUE_OPTIONS:
            i += 1 if "=" in word else 2
            continue
        if word.startswith("-") or word.startswith("+"):
            i += 1
            continue
        return [w.value for w in rest[i:]]
    return out


def _flock_command(rest: list[_Word]) -> list[_Word]:
    """The command of `flock [options] FILE|FD CMD ...` (util-linux)."""
    i = 0
    while i < len(rest) and rest[i].value.startswith("-") and rest[i].value != "--":
        name = rest[i].value.split("=", 1)[0]
        takes = name in ("-w", "--timeout", "--wait", "-E", "--conflict-exit-code") and "=" not in rest[i].value
        i += 2 if takes else 1
    if i < len(rest) and rest[i].value == "--":
        i += 1
    return rest[i + 1 :]  # after the lock file (or descriptor)


def _fish_init(rest: list[_Word]) -> _Word | None:
    """fish -C CMD / --init-command CMD: a command fish runs before anything else."""
    for i, word in enumerate(rest):
        if word.value in ("-C", "--init-command") and i + 1 < len(rest):
            return rest[i + 1]
        if word.value.startswith("--init-command="):
            return _Word(word.value.split("=", 1)[1], word.dynamic)
    return None


def _dash_c_script(rest: list[_Word]) -> _Word | None:
    """The command string of `su -c CMD`, `script -c CMD`, `flock FILE -c CMD` (also `--command`)."""
    for i, word in enumerate(rest):
        cluster = word.value.startswith("-") and not word.value.startswith("--") and word.value.endswith("c")
        if (word.value == "--command" or cluster) and i + 1 < len(rest):  # -c, or a cluster ending in it (-qc)
            return rest[i + 1]
        if word.value.startswith("--command="):
            return _Word(word.value.split("=", 1)[1], word.dynamic)
    return None


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _unwrap(program: str, rest: list[_Word]) -> tuple[list[_Word], tuple[str, ...]] | None:
    """The command a wrapper runs and the `NAME=value` words it set, or None when it runs none
    (`sudo -l`, `command -v x`, `env` alone). Raises EvalError for an option the wrapper's table
    does not know, or an `env -S` string that cannot be split."""
    value_options, flag_options, operands = WRAPPERS[program]
    assignments: list[str] = []
    words = list(rest)
    i = 0
    while i < len(words):
        word = words[i].value
        if word == "--":
            i += 1
            break
        if program in ("env", "sudo", "doas") and _ASSIGNMENT.match(word):
            assignments.append(word)
            i += 1
            continue
        if not word.startswith("-") or len(word) == 1:
            break
        if program == "command" and word in ("-v", "-V"):
            return None  # `command -v x` only looks x up
        if program == "sudo" and word.split("=", 1)[0] in _SUDO_NO_COMMAND:
            return None  # `sudo -l`, `sudo -e FILE`: no command runs; the call is sudo's own
        if program == "nice" and word[1:].isdigit():  # the old `nice -10 CMD`
            i += 1
            continue
        if word.startswith("--"):
            name, attached = word.split("=", 1)[0], "=" in word
            if name in value_options:
                value = word.split("=", 1)[1] if attached else (words[i + 1].value if i + 1 < len(words) else "")
                i += 1 if attached else 2
            elif name in flag_options:
                value, i = None, i + 1
            else:
                raise EvalError(f"{program} {name}: an option countersign does not know, so it cannot tell which command runs")
            if program == "env" and name == "--split-string":
                words[i:i] = _split_string(value or "")
            continue
        j, value = 1, None
        while j < len(word):  # a cluster of short options: -nE, -uroot, -u root
            option = "-" + word[j]
            if option in value_options:
                attached = word[j + 1 :]
                value = attached if attached else (words[i + 1].value if i + 1 < len(words) else "")
                i += 0 if attached else 1
                if program == "env" and option == "-S":
                    words[i + 1 : i + 1] = _split_string(value)
                break
            if option not in flag_options:
                raise EvalError(f"{program} {option}: an option countersign does not know, so it cannot tell which command runs")
            j += 1
        i += 1
    i += operands
    inner = words[i:]
    return (inner, tuple(assignments)) if inner else None


def _split_string(text: str) -> list[_Word]:
    """`env -S STRING`: the words env splits STRING into (its quoting is close to the shell's)."""
    try:
        parts = shlex.split(text.replace("\\_", " "))  # env's own escape: \_ is a space
    except ValueError:
        raise EvalError("env -S holds a string that cannot be split into words") from None
    return [_Word(part, "$" in part) for part in parts]


def _shell_script(rest: list[_Word]) -> _Word | None:
    """The script of `sh -c SCRIPT` (options may come first, as in `bash -lc` or `bash --rcfile F
    -c`, and `--` may stand before the script)."""
    i, script_follows = 0, False
    while i < len(rest):
        word = rest[i].value
        if word == "--":
            i += 1
            break
        if word.split("=", 1)[0] in _SHELL_VALUE_OPTIONS:
            i += 1 if "=" in word else 2
            continue
        if word.startswith(("-", "+")) and not word.startswith("--") and "c" in word[1:]:
            script_follows = True
            i += 1 + sum(word[1:].count(o) for o in "oO")  # `bash -co posix SCRIPT`: o's value comes first
            continue
        if word.startswith(("-", "+")) and not word.startswith("--") and any(o in word[1:] for o in "oO"):
            i += 1 + sum(word[1:].count(o) for o in "oO")
            continue
        if word.startswith("-") or word.startswith("+"):
            i += 1
            continue
        break
    return rest[i] if script_follows and i < len(rest) else None


def _reads_script_from_stdin(rest: list[_Word]) -> bool:
    """Whether a shell given these words reads its script from standard input: no `-c`."""
    return not any(w.value.startswith("-") and not w.value.startswith("--") and "c" in w.value[1:] for w in rest)


def _find_exec_commands(rest: list[_Word]) -> list[list[_Word]]:
    """The commands `find ... -exec CMD ... ;` (also -execdir, -ok, -okdir, ending in `;` or `+`) runs."""
    out: list[list[_Word]] = []
    i = 0
    while i < len(rest):
        if rest[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(rest) and rest[j].value not in (";", "+"):
                j += 1
            out.append(list(rest[i + 1 : j]))  # `{}` stays: each file found (as the program, `-exec {} ...`)
            i = j
        i += 1
    return out


def _watch_command(rest: list[_Word]) -> list[_Word]:
    """The words of the command `watch [-n SECS] [-d] CMD ...` runs: it joins them with spaces and
    runs the result through `sh -c` (unless -x)."""
    i = 0
    while i < len(rest) and rest[i].value.startswith("-"):
        i += 2 if rest[i].value in ("-n", "--interval", "-q", "--equexit") else 1
    return rest[i:]


def _xargs_command(rest: list[_Word]) -> list[_Word]:
    """The command xargs runs (echo when none is given)."""
    i = 0
    while i < len(rest):
        word = rest[i].value
        if word == "--":
            i += 1
            break
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            if name in _XARGS_VALUE_OPTIONS:
                i += 1 if "=" in word else 2
            elif not word.startswith("--") and word[:2] in _XARGS_VALUE_OPTIONS:
                i += 1  # the value attached: -n1, -I{}, -P4
            elif name in _XARGS_FLAGS or (not word.startswith("--") and word[:2] in ("-i", "-l", "-e")):
                i += 1  # -i, -l and -e take a value only attached (-i{}, -l2)
            elif not word.startswith("--") and all("-" + ch in _XARGS_FLAGS for ch in word[1:]):
                i += 1  # a cluster such as -0r
            else:
                raise EvalError(f"xargs {name}: an option countersign does not know, so it cannot tell which command runs")
            continue
        break
    return rest[i:] or [_Word("echo", False)]


# Programs whose long options take one dash (`find -name x`, `java -jar x`).
SINGLE_DASH_LONG = frozenset({"find", "java", "javac", "go", "gcc", "g++", "clang", "cc", "ld", "xcodebuild", "dig"})


def split_flags(program: str, words: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Flag names and positional words (see split_command_words, which also gives the values)."""
    flags, args, _, _ = split_command_words(program, words)
    return flags, args


def split_command_words(program: str, words: list[str]) -> tuple[tuple[str, ...], ...]:
    """Flag names, positional words, the values options took, and the words that may name a file
    (`dsl.subjects.options` separates them, from each program's table of options that take a
    value). Each flag adds its long name and every short spelling of that long name, so `-r`,
    `-R` and `--recursive` give the same names for rm."""
    aliases = FLAG_ALIASES.get(program, {})
    spellings: dict[str, set[str]] = {}
    for short, long in aliases.items():
        spellings.setdefault(long, {long}).add(short)

    def names(flag: str) -> set[str]:
        long = aliases.get(flag, flag)
        return spellings.get(long, {flag})

    flags: set[str] = set()
    options, args, values = split_words(program, words)
    for word in options:
        if word.startswith("--") or (program in SINGLE_DASH_LONG and len(word) > 2):
            name = word.lstrip("-").split("=", 1)[0]
            if word.startswith("--") and name not in spellings:
                # getopt_long takes any unambiguous prefix of a long option: rm --recu is --recursive
                known = [long for long in spellings if long.startswith(name)] if name else []
                name = known[0] if len(known) == 1 else name
            flags |= names(name)
        else:
            for ch in short_letters(program, word):
                flags |= names(ch)
    return tuple(sorted(flags)), tuple(args), tuple(v for _, v in values), paths(program, args, values)
