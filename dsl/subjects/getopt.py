"""One reader for every table of dsl.subjects.wrappers: a command line read as the program reads it.

The reading follows glibc's getopt(3) and getopt_long(3) (the GNU C Library manual, 2.36, "Parsing
program options using getopt"): short options cluster (`-xv`), a value is attached (`-uroot`) or the
next word, `::` takes only an attached value, `--` ends the options, a long option may be
abbreviated to any unambiguous prefix, `--name=value` attaches its value; options end at the first
operand when the optstring starts with `+` (what most wrappers use), else they may follow operands.
A table's flags cover the programs that differ (bash's one-dash long options, nice's `-10`, ...).

An option the table does not list could take a value or not, and so hide which program runs: the
reader follows both readings (no value; the rest of the word or the next word as its value) and
returns every distinct outcome, each naming the unknown options. Both are bounded: more than
MAX_UNKNOWN unknown options in one reading, or more than MAX_READINGS distinct readings, is an error
(fails closed), so the work stays linear in the command line's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from dsl.subjects.command import _Word
from dsl.subjects.optspec import (
    APPLET, ARGV, ARGV_MODE, CODE, ENV_ASSIGNMENTS, EXIT, EXIT_BARE, FILL, HIDDEN, INTERPRETER, MODULE, NEXT, NONE, OPTIONAL, REQUIRED, THREE,
    TWO, LOGIN_SHELL, SCRIPT, SCRIPT_OPERAND, SCRIPTS, SESSION, SH_WORDS, SHELL, SHELL_MODE, SPLIT, STDIN,
    SUDO_ASSIGNMENTS, Opt, Spec,
)
from dsl.values import EvalError

MAX_READINGS = 16  # distinct readings of one command line; more is an error (fails closed)
MAX_UNKNOWN = 4  # options one reading does not know; more is an error (each forks the reading: bounded work)
_NUMERIC = re.compile(r"-[-+]?[0-9]+")  # nice's old `-10`, `--10`, `-+10`
# Characters that may start an expansion in a word's text (parameter, command, arithmetic and
# process substitution, globs, braces): a dynamic word's `=` after one of them may not be there
# at run time (`${X:=rm}`), nor the word one word (`$X=1`)
_EXPANDS = frozenset("$`*?[]{}()<>!\\")
_UNKNOWN = Opt()
# _State.stage: reading options; past env's options (assignments follow); at the command
_OPTIONS, _ASSIGNMENTS, _COMMAND = "options", "assignments", "command"


@dataclass
class Reading:
    """What one reading of a command line runs.

    - `command`: the words of the command the program runs (ARGV and APPLET programs), or None.
    - `assignments`: the `NAME=VALUE` words it sets for that command (env, sudo; Spec.assignments).
    - `scripts`: shell scripts it runs (`su -c`, `bash -c`, watch's joined words).
    - `code`: code in another language it runs (`python -c`, `perl -e`).
    - `stdin`: it reads a script (or code) from standard input.
    - `script_file`: the script file a shell or an interpreter runs (its first operand).
    - `unknown`: the options this reading did not understand (a non-empty list: the command is dynamic).
    - `fills`: the strings an option says the program replaces in the command's words (`xargs -I R`).
    """

    command: list[_Word] | None = None
    assignments: list[str] = field(default_factory=list)
    scripts: list[_Word] = field(default_factory=list)
    code: list[_Word] = field(default_factory=list)
    stdin: bool = False
    script_file: _Word | None = None
    unknown: list[str] = field(default_factory=list)
    fills: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        words = lambda ws: tuple((w.value, w.dynamic) for w in ws)  # noqa: E731
        return (None if self.command is None else words(self.command), tuple(self.assignments), words(self.scripts),
                words(self.code), self.stdin, None if self.script_file is None else self.script_file.value,
                tuple(self.fills))


@dataclass
class _State:
    words: list[_Word]
    i: int = 0          # the word being read
    j: int = 0          # the position inside a cluster of short options (0: at the word's start)
    operands: list[_Word] = field(default_factory=list)  # operands met among the options (permute)
    scripts: list[_Word] = field(default_factory=list)
    code: list[_Word] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    exits: bool = False
    script_operand: bool = False
    stdin: bool = False
    module: bool = False
    argv_mode: bool = False
    shell_mode: bool = False
    shell: _Word | None = None  # the program su -s names as the shell
    fills: list[str] = field(default_factory=list)  # xargs -I R: R
    reopened: int = 0  # operands read past among the options (Spec.reopen)
    # where the reading is: OPTIONS; ASSIGNMENTS once env's options ended at a lone `-` (GNU env:
    # -i, and options end); COMMAND once a word that may be an assignment or the command was
    # taken for the command (the other reading takes it for an assignment)
    stage: str = _OPTIONS
    assignments: list[_Word] = field(default_factory=list)  # `NAME=VALUE` words (Spec.assignments)

    def key(self) -> tuple:
        """Where the reading is and what it has found (not which options it did not know)."""
        values = lambda ws: tuple(w.value for w in ws)  # noqa: E731
        return (self.i, self.j, len(self.words), values(self.operands), values(self.scripts), values(self.code),
                self.exits, self.script_operand, self.stdin, self.module, self.argv_mode, self.shell_mode,
                None if self.shell is None else self.shell.value, tuple(self.fills), self.stage,
                values(self.assignments))

    def copy(self) -> _State:
        return replace(self, words=list(self.words), operands=list(self.operands), scripts=list(self.scripts),
                       code=list(self.code), unknown=list(self.unknown), fills=list(self.fills),
                       assignments=list(self.assignments))


def read(spec: Spec, words: list[_Word]) -> list[Reading]:
    """Every distinct reading of `words` (a program's arguments, its name not included) by `spec`:
    one when every option is understood. Raises EvalError for an `env -S` string that cannot be
    split, or for more than MAX_READINGS readings."""
    # setarch's ARCH, before the options, only when the first word is no option (util-linux 2.38
    # setarch.c: `if (1 < argc && *argv[1] != '-')`): `setarch -R i386 CMD` runs the program i386
    leading = 0
    while leading < min(spec.leading, len(words)) and not words[leading].value.startswith("-"):
        leading += 1
    start = _State(words=list(words), i=leading)
    # Readings by key, computed only once a second reading exists: a key holds every word of the
    # command run, and a wrapper's one reading needs none (`sudo env sudo env ...` read each
    # level's words again for nothing).
    first: Reading | None = None
    results: dict[tuple, Reading] = {}
    pending = [start]
    seen: set[tuple] = set()
    steps = 0
    while pending:
        state = pending.pop()
        key = state.key()
        if key in seen:  # another path to the same place: its outcome is the same
            continue
        seen.add(key)
        steps += 1
        if steps > 8 * MAX_READINGS:
            raise EvalError("the command has too many options countersign does not know to tell what it runs")
        reading = _finish(spec, _env_operands(spec, _options(spec, state, pending), pending))
        if first is None:
            first = reading
            continue
        if not results:
            results[first.key()] = first
        results.setdefault(reading.key(), reading)
        if len(results) > MAX_READINGS:
            raise EvalError("the command has too many options countersign does not know to tell what it runs")
    readings = list(results.values()) if results else [first]
    return _subcommands(spec, readings) if spec.subcommands else readings


def _subcommands(spec: Spec, readings: list[Reading]) -> list[Reading]:
    """Each reading of a program with subcommands (`docker exec`, `uv run`) read on by the table
    of the subcommand its first operand names: a subcommand not in the table runs nothing read
    here (`docker ps`), one known only at run time is an unknown of the reading."""
    out: dict[tuple, Reading] = {}
    for reading in readings:
        command = reading.command or []
        sub = spec.subcommands.get(command[0].value) if command and not command[0].dynamic else None
        if sub is None:
            unknown = reading.unknown + (["(a subcommand known only at run time)"] if command and command[0].dynamic else [])
            inner = [Reading(scripts=reading.scripts, code=reading.code, unknown=unknown, fills=reading.fills)]
        else:
            inner = read(sub, command[1:])
            for r in inner:
                r.scripts, r.code = reading.scripts + r.scripts, reading.code + r.code
                r.unknown, r.fills = reading.unknown + r.unknown, reading.fills + r.fills
        for r in inner:
            out.setdefault((r.key(), tuple(r.unknown)), r)
    if len(out) > MAX_READINGS:
        raise EvalError("the command has too many options countersign does not know to tell what it runs")
    return list(out.values())


def _resolve(spec: Spec, name: str) -> Opt | None:
    """The long option `name` names: itself, or (getopt_long) the one option it is a prefix of."""
    opt = spec.long.get(name)
    if opt is not None or not spec.abbreviations or not name:
        return opt
    found = {spec.long[n] for n in spec.long if n.startswith(name)}
    return found.pop() if len(found) == 1 else None  # several options: ambiguous, an error to getopt_long


def _options(spec: Spec, st: _State, pending: list[_State]) -> _State:
    """Read options from st.i on; a fork for each unknown option goes on `pending`. Returns the
    state where the options end (st.i at the first word that is not an option's)."""
    if st.stage != _OPTIONS:
        return st
    words = st.words
    while st.i < len(words):
        word = words[st.i]
        w = word.value
        if st.j == 0:
            if w == "--":
                st.i += 1
                return st
            if spec.numeric and _NUMERIC.fullmatch(w):
                st.i += 1
                continue
            if w == "-":
                if spec.lone_dash is None:
                    if not spec.permute:
                        return st
                    st.operands.append(word)
                    st.i += 1
                    continue
                _apply(st, spec.lone_dash, None)
                st.i += 1
                if spec.assignments == ENV_ASSIGNMENTS and st.i < len(words) and words[st.i].value.startswith("-"):
                    # GNU env ends its options at `-` (BSD env reads on): a reading where they end
                    fork = st.copy()
                    fork.stage = _ASSIGNMENTS
                    pending.append(fork)
                if spec.lone_dash.ends:
                    return st
                continue
            if not (w.startswith("-") or (spec.plus and w.startswith("+"))) or len(w) == 1:
                if spec.assignments == SUDO_ASSIGNMENTS and _sudo_assignment(st, word, pending):
                    continue
                if not spec.permute and st.reopened >= spec.reopen:
                    return st
                st.reopened += 1
                st.operands.append(word)
                st.i += 1
                continue
            body = w[2:] if w.startswith("--") else w[1:]
            if w.startswith("--") or (spec.single_dash_long and _resolve(spec, body.split("=", 1)[0]) is not None):
                if _long(spec, st, word, body, pending):
                    return st
                continue
            st.j = 1
        if _short(spec, st, word, pending):
            return st
    return st


def _note_unknown(st: _State, name: str) -> None:
    st.unknown.append(name)
    if len(st.unknown) > MAX_UNKNOWN:
        raise EvalError("the command has too many options countersign does not know to tell what it runs")


def _unsure(st: _State, word: _Word, pending: list[_State]) -> None:
    """`word` may be an assignment or the command: a reading (on `pending`) takes it for the
    command, this one for an assignment; both are unsure."""
    _note_unknown(st, f"{word.value} (an assignment or the command)")
    fork = st.copy()
    fork.stage = _COMMAND
    pending.append(fork)


def _literal_name(word: _Word) -> bool:
    """Whether the text before the first `=` of `word` (which has one) is there at run time as it
    reads here: a word known now, or one whose expansions all follow that `=` (`A=$X`)."""
    if word.translated:  # `$"A=1"`: the locale's catalog may translate all of it
        return False
    return not word.dynamic or not _EXPANDS.intersection(word.value.partition("=")[0])


def _sudo_assignment(st: _State, word: _Word, pending: list[_State]) -> bool:
    """Whether the operand `word`, met among sudo's options, is a `NAME=VALUE` assignment: then
    it is taken (st.i moves past it) and sudo reads options on. sudo 1.9.13 parse_args.c
    (`is_envar`): a word holding a `=` that starts with neither `/` nor `=`, unless the word before
    it is `--` (`got_end_of_args`); sudo-rs 0.2 (src/sudo/cli/mod.rs, `try_to_env_var`): a word
    whose text before its first `=` is letters, digits and `_` only (or nothing). Where the two
    differ (`a.b=1`, `=x`), or the word is known only at run time, both readings."""
    w = word.value
    name, eq, _ = w.partition("=")
    if not eq:
        return False
    if _literal_name(word) and name.isascii():
        c_sudo = w[0] not in "/=" and not (st.i > 0 and st.words[st.i - 1].value == "--")
        sudo_rs = all(ch.isalnum() or ch == "_" for ch in name)
        if c_sudo == sudo_rs:
            if not c_sudo:
                return False
        else:
            _unsure(st, word, pending)
    else:
        _unsure(st, word, pending)
    st.assignments.append(word)
    st.i += 1
    return True


def _env_operands(spec: Spec, st: _State, pending: list[_State]) -> _State:
    """env's assignments, from st.i where its options ended (a no-op for other programs). GNU
    coreutils 9.1 env.c takes a first operand `-` for -i, then every operand that holds a `=`
    (`strchr`: whatever stands before it, `1=2`, `a.b=c`, `=x`, `-x=1`) as an assignment, and the
    first without one as the command; FreeBSD's env.c and BusyBox 1.36's read their assignments
    so too. A word known only at run time whose `=` may come from an expansion (`"$X=1"`,
    `${X:=rm}`: either way) is read both ways."""
    if spec.assignments != ENV_ASSIGNMENTS or st.stage == _COMMAND:
        return st
    words = st.words
    if st.stage == _OPTIONS and st.i < len(words) and words[st.i].value == "-":
        st.i += 1
    while st.i < len(words) and "=" in words[st.i].value:
        if not _literal_name(words[st.i]):
            _unsure(st, words[st.i], pending)
        st.assignments.append(words[st.i])
        st.i += 1
    st.stage = _COMMAND
    return st


def _long(spec: Spec, st: _State, word: _Word, body: str, pending: list[_State]) -> bool:
    """One long option at st.i. Returns whether options end after it."""
    name, eq, attached = body.partition("=")
    opt = _resolve(spec, name)
    if opt is None:
        if spec.any_long:
            st.i += 1
            return False
        _note_unknown(st, "--" + name if word.value.startswith("--") else "-" + name)
        if not eq and st.i + 1 < len(st.words):
            fork = st.copy()
            fork.i += 2  # it took the next word as its value
            pending.append(fork)
        st.i += 1
        return False
    if opt.value == NONE:
        if eq:  # getopt_long: "option doesn't allow an argument"; the program stops: read on, flagged
            _note_unknown(st, "--" + name)
        value, st.i = None, st.i + 1
    elif eq:
        value, st.i = _Word(attached, word.dynamic), st.i + 1
    elif opt.value == OPTIONAL:
        value, st.i = None, st.i + 1
    elif opt.value in (TWO, THREE):  # `--bind SRC DEST`: the first is kept as the value, all are skipped
        value = st.words[st.i + 1] if st.i + 1 < len(st.words) else None
        st.i += 3 if opt.value == TWO else 4
    else:
        value = st.words[st.i + 1] if st.i + 1 < len(st.words) else None
        st.i += 2
    _apply(st, opt, value, st.i, "--" + name)
    return opt.ends


def _short(spec: Spec, st: _State, word: _Word, pending: list[_State]) -> bool:
    """The cluster of short options at st.words[st.i], from position st.j. Returns whether options
    end after it. Linear in the cluster's length: the rest of the word after a letter is copied
    only where it becomes a value (which ends the cluster)."""
    w = word.value
    after = 1  # words this cluster takes: itself and the values of NEXT options (`-co posix`)
    ends = False
    plain = spec.plain_run
    while st.j < len(w):
        if plain is not None:  # letters that do nothing (`ssh -aaaa`): skipped at C speed
            run = plain.match(w, st.j)
            if run is not None:
                st.j = run.end()
                if st.j == len(w):
                    break
        ch = w[st.j]
        rest = st.j + 1 < len(w)  # letters follow this one in the word
        opt = spec.short.get(ch)
        if opt is not None and not spec.clusters and opt.value == NONE and rest:
            opt = None  # `lua -iv`: not an option of a program that does not cluster
        if opt is None:
            _note_unknown(st, w[0] + ch)
            fork = st.copy()  # reading two: it takes a value (the rest of the word, or the next word)
            fork.i, fork.j = st.i + (after if rest else after + 1), 0
            if fork.i <= len(st.words):
                pending.append(fork)
            if not spec.clusters or not rest:  # reading one: no value
                break
            st.j += 1
            continue
        if opt.value == OPTIONAL and opt.attached:
            taken = re.compile(opt.attached).match(w, st.j + 1).group(0)  # may match "": always a match
            _apply(st, opt, _Word(taken, word.dynamic) if taken else None, st.i + after)
            ends = ends or opt.ends
            st.j += 1 + len(taken)
            if ends:
                break
            continue
        if opt.value in (TWO, THREE):  # `hyperfine -P VAR MIN MAX`: the first kept as the value
            count = 2 if opt.value == TWO else 3
            if rest:  # `-PVAR MIN MAX`: the rest of the word is the first
                value, count = _Word(w[st.j + 1 :], word.dynamic), count - 1
            else:
                value = st.words[st.i + after] if st.i + after < len(st.words) else None
            after += count
            _apply(st, opt, value, st.i + after)
            ends = ends or opt.ends
            break
        if opt.value in (REQUIRED, OPTIONAL):
            if rest:
                value = _Word(w[st.j + 1 :], word.dynamic)
            elif opt.value == REQUIRED and st.i + after < len(st.words):
                value = st.words[st.i + after]
                after += 1
            elif opt.does == EXIT_BARE and st.i + after < len(st.words) and not st.words[st.i + after].value.startswith("-"):
                # sudo 1.9 parse_args.c: a bare -h followed by a word that is no option takes it
                # as the host and goes on (`sudo -h host rm -rf /` runs rm; CVE-2025-32462)
                value = st.words[st.i + after]
                after += 1
            else:
                value = None
            _apply(st, opt, value, st.i + after)
            ends = ends or opt.ends
            break
        if opt.value == NEXT:
            value = st.words[st.i + after] if st.i + after < len(st.words) else None
            after += 1
            _apply(st, opt, value, st.i + after)
        else:
            _apply(st, opt, None)
        ends = ends or opt.ends
        if ends:
            break
        st.j += 1
    st.i, st.j = st.i + after, 0
    return ends


def _apply(st: _State, opt: Opt, value: _Word | None, at: int = 0, name: str = "") -> None:
    """What one option does to the reading; `at`: the index of the word after the option and its value."""
    does = opt.does
    if opt.hides and value is not None and (value.dynamic or re.match(opt.hides, value.value, re.IGNORECASE)):
        _note_unknown(st, f"{name or 'an option'} {value.value}")  # `ssh -o ProxyCommand=CMD`: runs CMD
    if does == HIDDEN:
        # words of the command line come from a descriptor or a file (`bwrap --args 3`): the
        # command it runs is not all here, so the reading is as unsure as an unknown option's
        _note_unknown(st, name or "(words read from elsewhere)")
    elif does == FILL:
        # `xargs -I R` (a value), `xargs -i` (none: `{}`), a dynamic R: any word may be replaced
        st.fills.append("" if value is not None and value.dynamic else (value.value if value is not None and value.value else "{}"))
    elif does == EXIT or (does == EXIT_BARE and (value is None or not value.value)):
        st.exits = True
    elif does == SCRIPT and value is not None:
        st.scripts.append(value)
    elif does == SCRIPT_OPERAND:
        st.script_operand = True
    elif does == STDIN:
        st.stdin = True
    elif does == CODE and value is not None:
        st.code.append(value)
    elif does == MODULE:
        st.module = True
    elif does == ARGV_MODE:
        st.argv_mode = True
    elif does == LOGIN_SHELL:
        st.shell = value
    elif does == SHELL_MODE:
        st.shell_mode = True
    elif does == SPLIT and value is not None:
        # `env -S STRING`: its words stand after the option, and are read as env's own words
        st.words[at:at] = _split_string(value)


def _split_string(value: _Word) -> list[_Word]:
    """`env -S STRING`: the words GNU env splits STRING into (split_env_string)."""
    return [_Word(part, value.dynamic or dynamic) for part, dynamic in split_env_string(value.value)]


# GNU coreutils 9.1 env(1), "-S/--split-string" (env.c, build_argv): how env splits its string.
# Outside quotes, blanks (space, \t \n \v \f \r) separate words, and `#` where a word would start
# begins a comment to the end of the string; '...' takes everything literally but \\ and \';
# "..." takes everything but \-escapes and ${VAR}; `\_` separates words outside double quotes and
# is a space inside them; `\c` ends the string (an error inside double quotes); \f \n \r \t \v are
# those characters, \" \# \$ \' \\ themselves, and any other escape is an error; `${NAME}` is the
# variable's value from env's own environment (nothing at all, not even an empty word, when it is
# unset), and any other `$` is an error. Each match below consumes a run at once, so the split is
# linear in the string.
_ENV_OUTSIDE = re.compile(r"""(?P<plain>[^'"\\ \t\n\v\f\r#$]+)|(?P<blank>[ \t\n\v\f\r]+)|(?P<quote>['"])"""
                          r"""|(?P<escape>\\.?)|(?P<hash>\#)|(?P<var>\$(?:\{[A-Za-z_][A-Za-z0-9_]*\})?)""", re.DOTALL)
_ENV_SINGLE = re.compile(r"(?P<plain>[^'\\]+|\\(?![\\'])|\\\\|\\')|(?P<quote>')", re.DOTALL)
_ENV_DOUBLE = re.compile(r"""(?P<plain>[^"\\$]+)|(?P<quote>")|(?P<escape>\\.?)|(?P<var>\$(?:\{[A-Za-z_][A-Za-z0-9_]*\})?)""",
                         re.DOTALL)
_ENV_SIMPLE = re.compile(r"""(?:[^'"\\$#]++|\\[_c])*+""")
_ENV_SEPARATORS = re.compile(r"[ \t\n\v\f\r]+")
# Parts (a run of plain characters or of blanks, a quote, an escape, a ${VAR}) read one at a time
# in a string that has quotes, `$` or `#`: beyond it the string is an error, which keeps its
# reading within a few milliseconds.
MAX_ENV_SPLIT_PARTS = 8192
MAX_WORDS = 1024  # as dsl.subjects.bash.parser.MAX_WORDS: the words of one text
_ENV_ESCAPES = {'"': '"', "#": "#", "$": "$", "'": "'", "\\": "\\", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                "v": "\v"}


def split_env_string(string: str) -> list[tuple[str, bool]]:
    """The words GNU env 9.1 splits `string` (the value of -S) into, each with whether it holds a
    `${VAR}` (its value known only at run time). Raises EvalError where env itself stops with an
    error (an unknown escape, `$` without `{NAME}`, an unterminated quote, `\\c` in double quotes)
    and where a word is nothing but `${VAR}`s (whether env makes a word of it at all is known only
    at run time)."""
    if _ENV_SIMPLE.fullmatch(string):  # no quotes, $ or #, and \_ or \c its only escapes: split at once
        string = string.split("\\c", 1)[0].replace("\\_", " ")  # every backslash left is a `\_`
        # at most MAX_WORDS + 2 pieces: a last one left whole holds one more word than allowed
        words = [(word, False) for word in _ENV_SEPARATORS.split(string, MAX_WORDS + 1) if word]
        return _within_words(words)
    words: list[tuple[str, bool]] = []
    parts: list[str] = []
    budget = MAX_ENV_SPLIT_PARTS
    started = dynamic = literal = False  # a word is open; it holds a ${VAR}; it holds something else
    sep = True  # env.c's `ss.sep`: the next character starts a word
    state = _ENV_OUTSIDE
    at, end = 0, len(string)

    def close() -> None:
        if started:
            if dynamic and not literal:
                raise EvalError("env -S holds a word that is only a ${VAR}: whether it is a word is known only at run time")
            words.append(("".join(parts), dynamic))
            _within_words(words)

    while at < end:
        budget -= 1
        if budget < 0:
            raise EvalError(f"env -S holds a string of more than {MAX_ENV_SPLIT_PARTS} quoted or escaped parts: "
                            "too many to read")
        m = state.match(string, at)
        kind = m.lastgroup
        text = m.group()
        at = m.end()
        if kind == "blank":
            sep = True
            continue
        if kind == "hash" and sep:
            break  # a comment: the rest of the string is ignored
        if kind == "escape":
            letter = text[1:]
            if letter == "c":
                if state is _ENV_DOUBLE:
                    raise EvalError("env -S holds \\c inside double quotes, which env refuses")
                break
            if letter == "_":
                if state is _ENV_OUTSIDE:
                    sep = True
                    continue
                text = " "
            elif letter in _ENV_ESCAPES:
                text = _ENV_ESCAPES[letter]
            else:
                raise EvalError(f"env -S holds the escape {text!r}, which env refuses")
        elif kind == "plain" and state is _ENV_SINGLE and text[0] == "\\" and len(text) == 2:
            text = text[1]  # \\ and \' inside single quotes
        if kind == "var" and len(text) == 1:
            raise EvalError("env -S holds a `$` other than ${NAME}, which env refuses")
        if sep:  # env.c check_start_new_arg: a quote, or any character, starts a word after a separator
            close()
            parts, started, dynamic, literal, sep = [], True, False, False, False
        if kind == "quote":
            literal = True  # `''` is a word, even empty
            state = _ENV_OUTSIDE if state is not _ENV_OUTSIDE else (_ENV_SINGLE if text == "'" else _ENV_DOUBLE)
            continue
        if kind == "var":
            dynamic = True
            continue
        literal = True
        parts.append(text)
    else:
        if state is not _ENV_OUTSIDE:
            raise EvalError("env -S holds a quote it does not close, which env refuses")
    close()
    return words


def _within_words(words: list) -> list:
    if len(words) > MAX_WORDS:
        raise EvalError(f"env -S splits its string into more than {MAX_WORDS:,} words: too many to read")
    return words


def _known_shells() -> frozenset[str]:
    from dsl.subjects.wrappers import SHELL_SPECS  # the tables import this module

    return frozenset(SHELL_SPECS)


def _finish(spec: Spec, st: _State) -> Reading:
    """What the program runs once its options are read: the operands say the rest."""
    operands = st.operands + st.words[st.i :]
    for k, word in enumerate(operands):  # GNU parallel's `:::`: the arguments follow, not the command
        if word.value in spec.separators:
            operands = operands[:k]
            break
    reading = Reading(scripts=st.scripts, code=st.code, unknown=st.unknown, fills=st.fills)
    runs = ARGV if st.argv_mode else spec.runs
    skip = 0 if st.argv_mode else spec.skip
    if runs == ARGV:
        rest = operands[skip:] if len(operands) > skip else []
        if spec.dash_c_after_skip and rest and rest[0].value in ("-c", "--command"):
            reading.scripts = [*reading.scripts, *rest[1:2]]
            rest = []
        reading.assignments.extend(w.value for w in st.assignments)
        if not rest and spec.default and len(operands) >= skip:
            rest = [_Word(word, False) for word in spec.default]
        if st.exits:
            return reading
        if st.script_operand and rest:  # `entr -s 'CMD'`: the first operand is run by the shell
            reading.scripts = [*reading.scripts, rest[0]]
            return reading
        if rest:
            reading.command = rest
        elif (spec.bare_shell or st.shell_mode) and not reading.scripts:
            reading.stdin = True
        return reading
    if runs == APPLET:
        if operands and not st.exits:
            reading.command = operands
        return reading
    if runs == SH_WORDS:
        rest = operands[skip:]
        if spec.dash_c_after_skip and rest and rest[0].value in ("-c", "--command"):
            rest = rest[1:]
        if st.exits:
            return reading
        if rest:
            joined = _Word(" ".join(w.value for w in rest), any(w.dynamic for w in rest))
            reading.scripts = [*reading.scripts, joined]
        elif spec.bare_shell:
            reading.stdin = True
        return reading
    if runs == SCRIPTS:
        if not st.exits:
            reading.scripts = [*reading.scripts, *operands[skip:]]
        return reading
    if runs == SESSION:
        if st.exits:
            return reading
        if st.shell is not None and (st.shell.dynamic or st.shell.value.rsplit("/", 1)[-1] not in _known_shells()):
            # util-linux su(1) -s: the program runs as the shell, given `-c SCRIPT` and the extra
            # operands (`su -s /bin/rm root -- -rf /` runs rm -rf /): it is the command
            dash_c = [w for script in reading.scripts for w in (_Word("-c", False), script)]
            reading.command, reading.scripts = [st.shell, *dash_c, *operands[skip:]], []
            return reading
        if reading.scripts:
            return reading
        extra = operands[skip:]
        if spec.shell_args and extra:
            # `su USER ARGS`: ARGS go to the user's shell, as to `sh ARGS`
            from dsl.subjects.wrappers import SHELL_SPECS

            for inner in read(SHELL_SPECS["sh"], extra):
                reading.scripts = [*reading.scripts, *inner.scripts]
                reading.stdin = reading.stdin or inner.stdin
                reading.script_file = reading.script_file or inner.script_file
                reading.unknown = [*reading.unknown, *inner.unknown]
        else:
            reading.stdin = True
        return reading
    # a shell or an interpreter
    if st.exits:
        return reading
    if runs == SHELL:
        if st.script_operand:
            if operands:
                reading.scripts = [*reading.scripts, operands[0]]
        elif reading.scripts:
            pass
        elif st.stdin or not operands:
            reading.stdin = True
        else:
            reading.script_file = operands[0]
        return reading
    assert runs == INTERPRETER
    if st.stdin:
        reading.stdin = True
    elif st.code or st.module:
        pass
    elif operands:
        reading.script_file = operands[0]
    else:
        reading.stdin = True
    return reading
