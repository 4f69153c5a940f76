"""`shell(x)`: the simple commands of a shell string, read from the parse tree of
dsl.subjects.bash (tree-sitter-bash's tree, built by a linear-time parser of our own; see
dsl.subjects for what is unwrapped)."""

from __future__ import annotations

import bisect
import dataclasses
import posixpath
import re
from dataclasses import dataclass

from dsl.subjects import bash as _bash
from dsl.subjects import cwd as _cwd
from dsl.subjects import gitconfig as _git
from dsl.cache import BUDGETS, BoundedCache
from dsl.subjects.command import Command, _Word, _as_dict
from dsl.subjects.getopt import read
from dsl.subjects.optspec import INTERPRETER
from dsl.subjects.programs import _RESERVED, _find_exec_commands, split_command_words
from dsl.subjects import shellenv as _shellenv
from dsl.subjects.wrappers import CALLBACK_BUILTINS, SHELL_SPECS, TABLE, WRAPPERS
from dsl.subjects.quoting import (
    MAX_BRACE_TEXT, _ansi_c, _unescape_double, _unescape_unquoted, brace_expand, has_arithmetic_subscript, has_brace_group, heredoc_delimiter, heredoc_end,
    remove_quoted_parts, splice_continuations, subscript_substitution,
)
from dsl.values import EvalError, unparseable_command

MAX_SHELL_TEXT = 100_000  # characters; a longer string is an error (its parse would cost too much)
# The one budget of programs read for one simple command: every program it runs through (`sudo
# env nice xargs find -exec ... rm`), nested or under another reading of an option a table does not
# know, counts once; past it the text is an error (fails closed). Each program reads the rest of
# the command line again, so without a bound `nice nice ... ls` and `find . -exec find . -exec ...`
# took seconds (quadratic, then Python's recursion limit); the count bounds the depth too. A
# chain of N programs costs about N * N readings of its words (each wrapper reads what it runs
# again): 16 commands of 16 took 9.6 ms, of 12 about 6. The corpus's commands run through at
# most 3 (`sudo -u u env A=1 timeout 5 nice -n 5 ionice -c3 nohup cmd` is 7).
MAX_RUNNERS = 12
# The programs read for a whole text (each simple command's, each program a wrapper runs, each
# reading of an unknown option; nested scripts included): each costs 10-15 µs however short its
# words, so 128 commands of 16 programs took 25 ms. The corpus's texts read at most 19.
MAX_PROGRAMS = 256
# The limits of one text, nested scripts included (`sh -c '...'`, `eval`, an alias, a heredoc
# fed to a shell, the words brace expansion makes): past them the text is an error (fails closed).
# Reading a simple command costs 20-60 µs in Python and a word 3-8 µs (wrappers and options read,
# paths made), so these keep the slowest decision under 10 ms (bench/worst.py); the real commands
# of the corpus stay far below (at most 15 simple commands, 53 words and 9 levels of nesting in
# one text). See docs/policy-language.md, "Limits of shell()".
MAX_COMMANDS = _bash.MAX_COMMANDS
MAX_WORDS = _bash.MAX_WORDS


@dataclass(frozen=True)
class _Fill:
    """What a runner fills in at run time in the words of the command it runs: the strings it
    replaces (`pattern`: xargs -I R, find's `{}`, GNU parallel's `{}`, `{.}`, ...) and whether it
    appends arguments (`tail`: xargs, `find -exec ... +`, parallel with no replacement string). A
    script or code holding them is only known at run time (`xargs -I{} sh -c {}`)."""

    runner: str
    pattern: re.Pattern | None
    tail: bool

    def holds(self, word: _Word) -> bool:
        return word is _TAIL or (self.pattern is not None and self.pattern.search(word.value) is not None)

    @staticmethod
    def of(runner: str, spec, reading, script: _Word | None = None) -> _Fill:
        """The fill of xargs (its -I/-i strings, else appended arguments) or of GNU parallel (its
        replacement strings in `script`, its command line, else appended arguments)."""
        literal = [re.escape(f) for f in reading.fills]  # "" (a dynamic -I value) matches every word
        patterns = literal + ([spec.fill] if spec.fill else [])
        pattern = re.compile("|".join(patterns)) if patterns else None
        if script is not None:
            return _Fill(runner, pattern, tail=pattern is None or pattern.search(script.value) is None)
        if spec.fill:  # `parallel -q CMD`: appended unless a word holds a replacement string
            return _Fill(runner, pattern, tail=not any(pattern.search(w.value) for w in reading.command or ()))
        return _Fill(runner, pattern, tail=not reading.fills)


# The words a runner appends (`xargs sh -c`): read as one word whose value is not known here.
_TAIL = _Word("", True)
# GNU findutils 4.9 find(1), -exec: `{}` is replaced by the file name wherever it occurs in the
# command's words (`-exec ... +`: the one before `+`, by many names)
_FIND_FILL = _Fill("find", re.compile(re.escape("{}")), tail=False)
# git-config(1): git runs a pager, an editor, an ssh command, a diff driver ... with arguments of its
# own after the value (the file, the host and command); `!` aliases with the alias's arguments
_GIT_FILL = _Fill("git", None, tail=True)


def _syntax_tree(source: bytes, shared: _Shared):
    """The parse tree of `source` (dsl.subjects.bash), within what is left of the text's budgets
    of simple commands and words (`shared`, which it spends). Raises EvalError for a text the
    parser does not read: not valid shell, or valid but read differently by bash and
    tree-sitter-bash, or past a limit."""
    return _within_limits(_bash.parse, source, shared)


def _expanded_tree(source: bytes, shared: _Shared):
    """The tree of `source` read as an unquoted heredoc's body (dsl.subjects.bash.parse_expanded),
    as _syntax_tree reads a script."""
    return _within_limits(_bash.parse_expanded, source, shared)


def _within_limits(parse, source: bytes, shared: _Shared):
    try:
        tree = parse(source, shared.commands, shared.words)
    except _bash.BashSyntaxError as exc:
        if exc.limit == "commands":
            raise EvalError(f"the command has more than {MAX_COMMANDS:,} simple commands (its nested scripts and heredocs "
                            "included): too many to read") from None
        if exc.limit == "nesting":
            raise EvalError(f"the command nests too deeply to read (more than {_bash.MAX_NESTING} levels of statements, "
                            "substitutions and expansions)") from None
        if exc.limit == "words":
            raise EvalError(f"the command has more than {MAX_WORDS:,} words (its nested scripts and heredocs and the "
                            "words brace expansion makes included): too many to read") from None
        raise EvalError(f"the command is not valid shell syntax at {_line_col(source, exc.offset)}: {exc.message}") from None
    shared.commands -= tree.commands
    shared.words -= tree.words
    return tree


def _destinations(redirect) -> list:
    """The destination nodes of a file redirect: the first is its target, the rest are words of
    the command that tree-sitter-bash attached to the redirect."""
    return redirect.children_by_field_name("destination")


MAX_CWD_CHAIN = 1024  # characters of the chain of cd targets of one text; a longer one is unknown

_CASE_TERMINATORS = frozenset({";;", ";&", ";;&"})  # bash(1), "case": what ends a case item

_WORDLIKE = frozenset({"expansion", "simple_expansion", "arithmetic_expansion", "string", "concatenation"})


class _Shared:
    """What the walkers of one text and of the scripts nested in it share, in reading order.

    - `brace`: the characters brace expansion may still make (MAX_BRACE_TEXT for the whole
      text: a per-word cap let 2,400 words of `{a,b}`x8 make 614,400 words).
    - `assigned`: some statement read so far may have set a shell variable, by an assignment, a
      builtin (`read`, `printf -v`, `declare`, `let`, `mapfile`, `unset`, `set`, ...), arithmetic
      (`(( HOME=0 ))`, `[[ HOME=0 -eq 0 ]]`, `${x:=v}`) or a string evaluated as code (`${!x}`,
      `${x@P}`, a subscript): every command read after it is dynamic, since HOME, PATH, IFS,
      GIT_DIR, LD_PRELOAD, BASH_ENV and the like change what it does. `ever`: anywhere in the text.
    - `defers`: the text defines a function or sets a trap, whose commands run later than they are
      read: when the text also assigns, every command is dynamic.
    - `posix`: the text names POSIXLY_CORRECT, under which GNU getopt stops at the first operand.
    - `commands`, `words`: the simple commands and words the parser may still read (MAX_COMMANDS,
      MAX_WORDS for the whole text, nested scripts included); `programs`: the programs the
      walkers may still read (MAX_PROGRAMS)."""

    __slots__ = ("brace", "assigned", "ever", "defers", "posix", "commands", "words", "programs")

    def __init__(self, text: str = ""):
        self.brace = [MAX_BRACE_TEXT]
        self.commands, self.words = MAX_COMMANDS, MAX_WORDS  # what the parser may still read
        self.programs = MAX_PROGRAMS  # the programs the walkers may still read
        self.assigned = self.ever = self.defers = False
        self.posix = "POSIXLY_CORRECT" in text

    def assign(self) -> None:
        self.assigned = self.ever = True


# Builtins that set shell variables or options, or run code that may (bash(1), SHELL BUILTIN COMMANDS).
_ASSIGNING = frozenset({"let", "read", "mapfile", "readarray", "getopts", "unset", "export", "declare", "typeset",
                        "local", "readonly", "set", "shopt", "source", ".", "eval", "alias", "unalias", "enable",
                        "coproc"})
# Programs that add arguments read from standard input (or `:::` lists) to the command they run.
_STDIN_ARGUMENTS = frozenset({"parallel"})
# Special builtins, whose leading assignments stay in the shell (POSIX mode; `HOME=0 :`).
_SPECIAL = frozenset({":", ".", "source", "eval", "exec", "export", "readonly", "return", "set", "shift", "times",
                      "trap", "unset", "break", "continue", "exit"})
# Arithmetic that evaluates nothing: numbers and operators, no name (whose value bash would evaluate
# as an expression, `a[$(cmd)]` included), no expansion, no assignment.
_ARITH_LITERAL = re.compile(r"[\s0-9+\-*/%<>!~&|^()?:,]*")
# an assignment operator of arithmetic (not `==`, `!=`, `<=`, `>=`)
_ARITH_ASSIGN = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--")
_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_NUMBER = re.compile(r"[+-]?[0-9]+")


class _Walker:
    """Collects the simple commands of one parse tree."""

    def __init__(self, source: bytes, depth: int, cwd: str | None = ".", names: tuple[bool, bool] = (False, False),
                 shared: _Shared | None = None, fill: _Fill | None = None):
        self.source = source
        # most texts are ASCII: their words are sliced from a str, not decoded from the bytes
        self.ascii = source.decode("ascii") if source.isascii() else None
        self.depth = depth
        self.shared = shared if shared is not None else _Shared(source.decode("utf-8", "replace"))
        self.evaluated = False  # nested_in met arithmetic or an expansion that evaluates a string as code
        self.fill = fill  # what a runner fills in in each command of this script (GNU parallel's)
        # where the shell is after the statement walked last, if it succeeded and if it failed
        # (dsl.subjects.cwd); whether this text or an enclosing one names HOME, CDPATH
        self.cwd: str | None = cwd
        self.fail: str | None = cwd
        self.names = (names[0] or b"HOME" in source, names[1] or b"CDPATH" in source)
        self.commands: list[Command] = []
        self.stdin_shells: list[Command] = []  # shells and interpreters reading their script from standard input
        self.stdin_readers: dict[int, str] = {}  # their ids -> "sh" (a shell's script) or "code" (another language)
        self.stdin_via: dict[int, tuple[str, ...]] = {}  # ids of listed runners among them -> their wrappers (`ssh h`)
        self.fed: set[int] = set()  # ids of those whose input (a heredoc, a here-string) was read here
        self.history_readers: set[int] = set()  # ids of those that may expand history (bash -i: `!!`)
        # a command node's id -> the words tree-sitter-bash put after its redirection
        # (`cat 2>/dev/null /etc/shadow` gives the redirect three destinations): bash reads
        # them as the command's own words, and so does command()
        self.trailing: dict[int, list] = {}
        self.programs = 0  # programs read for the simple command walked last (MAX_RUNNERS)
        self.keyword_assignments: set[int] = _NONE  # see command(): ids of words after time/coproc that assign
        self.root = None  # the parse tree's root, and the ends of its heredocs (check_heredoc_end)
        self.heredoc_ends: list[int] | None = None

    def text(self, node) -> str:
        if self.ascii is not None:
            return self.ascii[node.start_byte : node.end_byte]
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    # words

    def word(self, node) -> _Word:
        kind = node.type
        if kind == "word":
            raw = self.text(node)
            if self.names[0] and (raw == "~" or raw.startswith("~/")):
                # bash(1), Tilde Expansion: `~` is the value of HOME, which this text sets
                # (`HOME=/; rm -rf ~`): not context.home, so a word whose value is unknown here
                return _Word("$HOME" + raw[1:], True)
            if "\\" not in raw:  # most words: nothing to unescape (two regex passes saved a word)
                return _Word(raw, "*" in raw or "?" in raw or "[" in raw)
            unescaped = re.sub(r"\\.", "", raw, flags=re.DOTALL)  # a glob character a backslash quotes is no glob
            return _Word(_unescape_unquoted(raw), any(ch in unescaped for ch in "*?["))
        if kind == "number":
            return _Word(self.text(node), False)
        if kind == "raw_string":
            self.quoted_substitutions(node)
            return _Word(self.text(node)[1:-1], False)
        if kind == "ansi_c_string":
            return _Word(_ansi_c(self.text(node)[2:-1]), False)
        if kind == "translated_string":
            return _translated([self.word(child) for child in node.children if child.is_named])
        if kind == "string":
            value, dynamic = "", False
            end = node.start_byte + 1
            for child in node.children:
                if child.start_byte > end:
                    # text the parser read as blanks between the pieces (a newline, a CR): bash keeps it
                    value += _unescape_double(self.source[end : child.start_byte].decode("utf-8", "replace"))
                end = max(end, child.end_byte)
                if child.type == '"':
                    continue
                if child.type == "string_content":
                    value += _unescape_double(self.text(child))
                else:
                    self.nested_in(child)
                    value += self.text(child)
                    dynamic = True
            return _Word(value, dynamic)
        if kind == "concatenation":
            parts = self.words_of(node.children)
            return _Word("".join(p.value for p in parts), any(p.dynamic for p in parts),
                         translated=any(p.translated for p in parts)
                         and not any(p.dynamic and not p.translated for p in parts))
        # expansions, substitutions, brace expressions, arithmetic: unknown until run time
        self.nested_in(node)
        return _Word(self.text(node), True)

    def words_of(self, nodes) -> list[_Word]:
        """The words of a run of sibling nodes, where tree-sitter-bash leaves the `$` of a
        translated string `$"..."` as a node of its own before the string (as an argument, and
        inside a concatenation: `r$"m"`)."""
        out: list[_Word] = []
        dollar = None
        for child in nodes:
            if child.type == "$" and not child.is_named:
                dollar = child
                continue
            if dollar is not None and _translates(dollar, child):
                out.append(self.translated_word(child))
            elif dollar is not None:
                out.append(_Word("$", True))  # a lone `$` the parser split off: read as unknown
                out.append(self.word(child))
            else:
                out.append(self.word(child))
            dollar = None
        if dollar is not None:
            out.append(_Word("$", True))
        return out

    def redirect_target(self, redirect) -> _Word | None:
        """The word a file redirection names (None for `>&-`, `<&-`). bash 5.2 (redir.c,
        r_duplicating_output_word) makes `>& WORD` and `1>& WORD` whose WORD expands to neither
        digits nor `-` into `&> WORD` and expands WORD a second time: what quotes hid the first
        time runs then (`>& '$(cmd)'` runs cmd). That second reading is read here as a script's
        word; a WORD known only at run time is an error (what it expands to may run anything).
        (`2>& WORD`, `<& WORD` with such a WORD are an ambiguous redirect: nothing runs.)"""
        destination = redirect.child_by_field_name("destination")
        if destination is None:
            return None
        target = self.word(destination)
        kids = redirect.children
        descriptor = self.text(kids[0]) if kids[0].type == "file_descriptor" else ""
        op = kids[1].type if descriptor else kids[0].type
        if op != ">&" or descriptor not in ("", "1") or (not target.dynamic and _descriptor_value(target.value)):
            return target
        if target.dynamic:
            raise EvalError("`>&` is given a word known only at run time, which bash expands a second time when it "
                            "is not a descriptor: what it runs cannot be read")
        if any(mark in target.value for mark in ("$", "`", "<(", ">(")):
            if self.depth >= 8:
                raise EvalError("the command nests shells more than 8 deep")
            self.commands.extend(_parse(": " + target.value, self.depth + 1, True, cwd=self.cwd, names=self.names,
                                        shared=self.shared, fill=self.fill)[1:])  # all but `:`
        return target

    def translated_word(self, node) -> _Word:
        """The word `$` + `node` (see _translates): `$"x"`, or `$"x"#y` whose string starts a
        concatenation (`$"x"#y` is the one word `x#y` to bash, translated)."""
        if node.type == "string":
            return _translated([self.word(node)])
        parts = [_translated([self.word(node.children[0])]), *self.words_of(node.children[1:])]
        return _Word("".join(p.value for p in parts), True,
                     translated=not any(p.dynamic and not p.translated for p in parts))

    def quoted_substitutions(self, node) -> None:
        """Single quotes that do not quote: inside `$(( ))`, `(( ))`, `${...}` and an array
        subscript, bash expands `'$(cmd)'` and runs cmd; so do builtins that take a variable name
        with a subscript (`printf -v 'a[$(cmd)]'`, `read`, `test -v`, `[[ ... -eq ]]`, `unset`)."""
        inner = self.text(node)[1:-1]
        if "$(" not in inner and "`" not in inner:
            return
        parent = node.parent
        if parent is not None and parent.type in ("arithmetic_expansion", "compound_statement", "expansion", "subscript"):
            self.script(inner, nested=True)
            return
        subscript = subscript_substitution(inner)
        if subscript is not None:
            self.script(subscript, nested=True)

    def braced(self, node) -> list[_Word]:
        """The words of one argument after brace expansion (an unquoted `word` or concatenation of
        them holding `{a,b}` or `{1..3}`); quoted or expanded text is not brace-expanded here."""
        word = self.word(node)
        raw = self.text(node)
        if word.dynamic or not has_brace_group(raw):
            return [word]
        if any(ch in raw for ch in "'\"\\$`"):
            # quoting mixed with braces (`r{m,}''`): which braces are live is not worked out here
            unquoted = remove_quoted_parts(raw)
            return [_Word(word.value, True)] if ("{" in unquoted and "}" in unquoted) else [word]
        values = brace_expand(word.value, _budget=self.shared.brace)
        self.shared.words -= len(values) - 1  # the words it makes count towards the text's MAX_WORDS
        if self.shared.words < 0:
            raise EvalError(f"brace expansion makes the command more than {MAX_WORDS:,} words (its nested scripts and "
                            "heredocs included): too many to read")
        return [_Word(value, False) for value in values]

    def nested_in(self, node) -> None:
        """Collect the commands inside substitutions found under `node`; note (`evaluated`, and
        `shared.assign`) arithmetic and expansions that evaluate a string as code or may assign."""
        kind = node.type
        if kind == "arithmetic_expansion":
            raw = self.text(node)
            inner = raw[3:-2] if raw.startswith("$((") else raw[2:-1]
            if not _ARITH_LITERAL.fullmatch(inner):
                self.evaluates()
        elif kind == "expansion":
            raw = self.text(node)
            if raw.startswith("${!") or raw.endswith("@P}") or any(c.type in (":=", "=") for c in node.children):
                self.evaluates()  # indirection, prompt expansion, `${x:=v}` / `${x=v}`
        elif kind == "subscript":
            index = node.child_by_field_name("index")
            if index is None or not _NUMBER.fullmatch(self.text(index)) and self.text(index) not in ("@", "*"):
                self.evaluates()  # an index is arithmetic: `${a[i]}` evaluates the value of i
        elif kind == "test_operator" and self.text(node) in _ARITH_TESTS and node.parent is not None:
            # `[[ A -eq B ]]`: A and B are arithmetic (`[[ HOME=0 -eq 0 ]]` sets HOME)
            if any(c.is_named and c.type != "test_operator" and not _NUMBER.fullmatch(self.text(c)) for c in node.parent.children):
                self.evaluates()
        if node.type in ("command_substitution", "process_substitution"):
            self.walk(node, nested=True)
            return
        if node.type == "raw_string":
            self.quoted_substitutions(node)
            return
        if node.type == "word" and node.parent is not None and node.parent.type == "expansion":
            # `${x:-`cmd`}`: the parser leaves the word after `:-` (or `:=`, `:+`, `:?`) unread,
            # but bash expands it, running any substitution in it: read it as a script.
            raw = self.text(node)
            if "`" in raw or "$(" in raw:
                self.script(raw, nested=True)
            return
        for child in node.children:
            self.nested_in(child)

    def evaluates(self) -> None:
        """The construct being read evaluates a string as code, or arithmetic, which may set variables."""
        self.evaluated = True
        self.shared.assign()

    def evaluating(self, node, nested: bool, assigns: bool = False, evaluates: bool = False) -> None:
        """`node`, which no simple command holds (`[[ ]]`, `(( ))`, a `for` or `case` word): its
        substitutions are read, and when it evaluates code it is listed as a dynamic command with
        no program (and as an assignment when it visibly assigns), so that an `all` rule must
        account for it."""
        before, self.evaluated = self.evaluated, False
        start = len(self.commands)
        self.nested_in(node)
        if self.evaluated or assigns or evaluates:
            text = self.text(node)
            self.shared.assign()
            self.commands.insert(start, Command(program="", path="", argv=(), args=(), flags=(),
                                                assignments=(text,) if assigns else (), nested=nested, dynamic=True,
                                                text=text, cwd=self.here()))
        self.evaluated = before

    # commands

    def here(self) -> str:
        return "" if self.cwd is None else self.cwd

    def walk(self, node, nested: bool, redirects: tuple[str, ...] = ()) -> None:
        """Walk `node`, following the directory each statement leaves the shell in."""
        kind = node.type
        start = self.cwd
        if kind == "command_substitution" and self.source.startswith(b"`", node.start_byte) and b"\\" in self.source[node.start_byte : node.end_byte]:
            # bash(1), Command Substitution: inside backticks a backslash before $, ` or \\ (and " in
            # double quotes) is removed before the text is read as a script: in `echo \\`cmd\\``
            # the inner pair is a substitution that runs cmd, where the parser reads text
            quotes = _in_double_quotes(node)
            self.script(_backtick_unescaped(self.text(node)[1:-1], quotes), nested=True)
            self.cwd = self.fail = start
            return
        if kind in ("subshell", "command_substitution", "process_substitution"):
            self.walk_statement(node, nested, redirects)
            self.cwd = self.fail = start  # a subshell's cd stays in it
            return
        if kind == "pipeline":
            moved = False
            for child in node.children:
                self.cwd = self.fail = start
                self.walk(child, nested, redirects)
                moved = moved or self.cwd != start or self.fail != start
            self.cwd = self.fail = None if moved else start  # zsh runs the last part in the shell
            return
        if kind == "list" and len(node.children) == 3:
            left, op, right = node.children
            self.walk(left, nested, redirects)
            ok, fail = self.cwd, self.fail
            if op.type == "&&":
                self.cwd = self.fail = ok
                self.walk(right, nested, redirects)
                self.fail = _cwd.merge(fail, self.fail)
            else:  # `||`
                self.cwd = self.fail = fail
                self.walk(right, nested, redirects)
                self.cwd = _cwd.merge(ok, self.cwd)
            return
        if kind == "negated_command":
            for child in node.children:
                if child.is_named:
                    self.walk(child, nested, redirects)
            self.cwd, self.fail = self.fail, self.cwd
            return
        if kind == "function_definition":
            self.shared.defers = True  # its commands run when it is called, maybe after an assignment
            self.cwd = self.fail = None  # the body runs wherever it is called from
            self.walk_statement(node, nested, redirects)
            self.cwd = self.fail = None  # and a call after this may run its cd
            return
        if kind in ("for_statement", "c_style_for_statement", "while_statement"):
            commands, shells = len(self.commands), len(self.stdin_shells)
            assigned = self.shared.assigned
            self.walk_statement(node, nested, redirects)
            moved = self.cwd != start or self.fail != start
            if moved or self.shared.assigned != assigned:
                # its body moves the directory or sets a variable: a second round starts elsewhere,
                # or runs its first commands after that assignment
                for dropped in self.stdin_shells[shells:]:
                    self.stdin_readers.pop(id(dropped), None)
                del self.commands[commands:], self.stdin_shells[shells:]
                self.cwd = self.fail = None if moved else start
                self.walk_statement(node, nested, redirects)
            self.cwd = self.fail = _cwd.merge(self.cwd, self.fail)
            return
        self.walk_statement(node, nested, redirects)

    def walk_statement(self, node, nested: bool, redirects: tuple[str, ...] = ()) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, nested, redirects)
            return
        if kind == "redirected_statement":
            targets = []
            # `cat <<EOF > out` nests the file redirection inside the heredoc's node
            nested_redirects = [g for c in node.children if c.type == "heredoc_redirect" for g in c.children if g.type == "file_redirect"]
            body = node.child_by_field_name("body")
            starts = {c.start_byte for c in [*node.children, *nested_redirects] if c.type in _REDIRECTS}
            if body is not None and body.type == "command":
                starts.update(c.start_byte for c in body.children if c.type in _REDIRECTS)
            extra = [w for c in [*node.children, *nested_redirects] if c.type == "file_redirect" for w in _destinations(c)[1:]
                     if not _varname_descriptor(w, starts, self.source)]
            if extra:
                if body is None or body.type != "command":
                    raise EvalError(f"the command is not valid shell syntax at {_line_col(self.source, extra[0].start_byte)}: "
                                    "a word after a redirection belongs to no simple command")
                self.trailing[id(body)] = extra
            mark = len(self.commands)
            for child in [*node.children, *nested_redirects]:
                if child.type == "file_redirect":
                    target = self.redirect_target(child)
                    if target is None:
                        continue
                    duplicates = child.children[0].type in (">&", "<&") or (
                        len(child.children) > 1 and child.children[1].type in (">&", "<&")
                    )
                    # `2>&1` and `>&-` copy or close a descriptor; `>& FILE` writes FILE (and stderr)
                    if not duplicates or target.dynamic or not _descriptor_value(target.value):
                        targets.append(target.value)
            expanded_again = self.commands[mark:]  # run by a `>& WORD` (redirect_target): listed after the body's
            del self.commands[mark:]
            before = len(self.commands)
            if body is not None:
                self.walk(body, nested, redirects + tuple(targets))
                if targets and len(self.commands) == before:  # `[[ -f x ]] > f` still writes f
                    self.commands.append(Command(program="", path="", argv=(), args=(), flags=(), redirects=redirects + tuple(targets),
                                                 nested=nested, text=self.text(node), cwd=self.here()))
            elif targets:  # `> f` alone opens (truncates) f and runs nothing: listed, so an `all` rule accounts for it
                self.commands.append(Command(program="", path="", argv=(), args=(), flags=(), redirects=redirects + tuple(targets),
                                             nested=nested, text=self.text(node), cwd=self.here()))
            first = self.commands[before] if len(self.commands) > before else None
            self.commands.extend(expanded_again)
            # `sh <<EOF`: a shell with no -c reads its script from the heredoc
            reader = first if first is not None and id(first) in self.stdin_readers else None
            for child in node.children:
                if child is body:
                    continue
                if child.type == "heredoc_redirect":
                    self.heredoc(child, nested, [reader] if reader is not None else [])
                elif child.type not in ("file_redirect",):
                    self.walk(child, nested)
            return
        if kind in ("declaration_command", "unset_command"):
            words = [self.text(c) for c in node.children]
            start = len(self.commands)
            self.nested_in(node)
            self.commands.insert(
                start,
                Command(program=words[0], path=words[0], argv=tuple(words), args=tuple(words[1:]), flags=(),
                        nested=nested, dynamic=self.shared.assigned or any("$" in w or "`" in w or has_arithmetic_subscript(w) for w in words),
                        text=self.text(node), cwd=self.here())
            )
            self.shared.assign()  # `export HOME=0`, `declare -n`, `local`: later commands see it
            return
        if kind == "variable_assignment":
            # A statement that only assigns (`PATH=/tmp/evil; ls`) changes what later commands do;
            # it is listed as a command with no program, so that an `all` rule must account for it.
            start = len(self.commands)
            self.nested_in(node)
            text = self.text(node)
            self.commands.insert(
                start,
                Command(program="", path="", argv=(), args=(), flags=(), assignments=(text,), nested=nested,
                        dynamic=self.shared.assigned or "$" in text or "`" in text, text=text, cwd=self.here()),
            )
            self.shared.assign()
            return
        if kind == "test_command":
            raw = self.text(node)
            self.evaluating(node, nested, assigns=bool(_ARITH_ASSIGN.search(raw)) and any(op in raw for op in _ARITH_TESTS))
            return
        if kind == "compound_statement" and self.source.startswith(b"((", node.start_byte):
            # `(( HOME=0 ))`, `(( x ))`: arithmetic, which evaluates names' values and may assign
            raw = self.text(node)
            self.evaluating(node, nested, assigns=bool(_ARITH_ASSIGN.search(raw[2:-2])),
                            evaluates=not _ARITH_LITERAL.fullmatch(raw[2:-2]))
            return
        if kind == "raw_string":
            self.nested_in(node)
            return
        if kind == "heredoc_redirect":
            self.heredoc(node, nested, [])
            return
        if kind == "for_statement":
            # `for HOME in DIR; do git status; done`: the loop variable is set (and exported if it
            # was) for the body, like an assignment statement
            variable = node.child_by_field_name("variable")
            # an upper-case name is an environment variable's (HOME, PATH, GIT_DIR): exported if it
            # was, so the body's programs see it; `for f in *.md` changes nothing they read
            if variable is not None and self.text(variable).isupper():
                name = self.text(variable)
                self.commands.append(Command(program="", path="", argv=(), args=(), flags=(), assignments=(f"{name}=",),
                                             nested=nested, dynamic=True, text=self.text(node), cwd=self.here()))
        if kind in ("for_statement", "c_style_for_statement"):
            for child in node.children:
                if child.type != "do_group" and child.is_named:
                    self.evaluating(child, nested) if child.type != "variable_name" else None
            self.shared.assign()  # the loop's variable is set before its body runs
            for child in node.children:
                if child.type == "do_group":
                    self.walk(child, nested, redirects)
                    self.cwd = self.fail = _cwd.merge(self.cwd, self.fail)
            return
        for child in node.children:
            if child.type in _CASE_TERMINATORS and kind != "case_item":
                # tree-sitter-bash takes `ls ;; cat x` as two commands; bash refuses the line
                raise EvalError(f"the command is not valid shell syntax at {_line_col(self.source, child.start_byte)}: "
                                f"{child.type} ends only a case item")
            if child.type in _WORDLIKE:  # `case ${!x} in`: a word outside a simple command
                self.evaluating(child, nested)
            else:
                self.walk(child, nested, redirects)  # a group's redirections apply to every command in it
            self.cwd = self.fail = _cwd.merge(self.cwd, self.fail)  # the next one runs after either

    def heredoc(self, node, nested: bool, readers: list[Command]) -> None:
        """A heredoc, possibly piped into more commands (`cat <<'EOF' | sh`). When a shell reads
        it (`readers`: the command it belongs to reads its script from standard input, or one in
        the pipeline after it does), its body is a script: parse it. Else
        the body of an unquoted heredoc is expanded: the commands of its `$(...)` and backticks run.
        The body is taken from the text between the end of the line and the delimiter, not from
        the parser's body node, which loses a first line that starts with a backslash."""
        quoted, start_node, end_node, body_node = False, None, None, None
        for child in node.children:
            if child.type == "heredoc_start":
                start_node = child
                quoted = any(ch in self.text(child) for ch in "'\"\\")  # <<'EOF', <<"EOF", <<\EOF
            elif child.type == "heredoc_end":
                end_node = child
            elif child.type == "heredoc_body":
                body_node = child
            elif child.type in ("pipeline", "command", "list", "redirected_statement"):
                before = len(self.commands)
                line_end = self.source.find(b"\n", start_node.end_byte) if start_node is not None else -1
                if 0 <= line_end < child.end_byte:
                    self.first_line(self.source[child.start_byte : line_end], nested)
                else:
                    self.walk(child, nested)
                readers = readers + [c for c in self.commands[before:] if id(c) in self.stdin_readers]
        if start_node is not None:
            self.check_heredoc_end(node, start_node, end_node)
        if start_node is not None and end_node is not None:
            line_end = self.source.find(b"\n", start_node.end_byte)
            raw = self.source[line_end + 1 : end_node.start_byte] if 0 <= line_end < end_node.start_byte else b""
            body_text = raw.decode("utf-8", "replace")
        else:
            body_text = self.text(body_node) if body_node is not None else None
        if body_text is None:
            return
        expands = False
        if not quoted and ("$" in body_text or "`" in body_text):
            # the shell that holds an unquoted heredoc expands it before any reader sees it: its
            # substitutions run here, whatever quotes or comments hold them in the reader's language
            expands = self.expanded_text(body_text)
        if readers:
            # what a reader gets: the body expanded; known as far as it holds no expansion (its
            # backslashes before \ $ ` and newline removed), else read with its expansions as written
            # and every command it runs dynamic (their output is code to the reader)
            script = body_text if quoted else _HEREDOC_UNESCAPE.sub(lambda m: m.group(1) or "", body_text)
            for reader in readers:
                self.feed(reader, body_text, expands, script=script)

    def check_heredoc_end(self, node, start_node, end_node) -> None:
        """Raises EvalError unless the parser ends the heredoc on the line where bash does
        (quoting.heredoc_end): tree-sitter-bash compares the lines with the delimiter as spelled
        (`<<E'O'F` waits for a line `E'O'F`, bash for `EOF`) and does not join continued lines,
        and then the commands after bash's end are read as text. Its body starts on the line after
        the `<<`, or after the end of the heredoc before it on that line."""
        delimiter, quoted = heredoc_delimiter(self.text(start_node))
        line_end = self.source.find(b"\n", start_node.end_byte)
        if line_end < 0:
            if end_node is not None:
                raise EvalError("a heredoc ends elsewhere for bash than for the parser")
            return
        begin = line_end + 1
        if self.heredoc_ends is None:
            ends: list[int] = []
            stack = [self.root] if self.root is not None else []
            while stack:
                top = stack.pop()
                if top.type == "heredoc_end":
                    ends.append(top.end_byte)
                stack.extend(top.children)
            self.heredoc_ends = sorted(ends)
        limit = end_node.start_byte if end_node is not None else len(self.source)
        k = bisect.bisect_left(self.heredoc_ends, limit) - 1
        if k >= 0 and self.heredoc_ends[k] > begin:  # an earlier heredoc of the same line
            after = self.source.find(b"\n", self.heredoc_ends[k])
            begin = len(self.source) if after < 0 else after + 1
        strip = any(c.type == "<<-" for c in node.children)
        stop = None if end_node is None else self.source.rfind(b"\n", 0, end_node.start_byte) + 1
        found = heredoc_end(self.source, begin, delimiter.encode("utf-8", "surrogatepass"), quoted, strip, stop)
        if end_node is None:
            if found is not None:
                raise EvalError("a heredoc ends elsewhere for bash than for the parser")
            return
        line = self.source.find(b"\n", end_node.end_byte)
        if found is None or found[0] != stop or found[1] != (len(self.source) if line < 0 else line + 1) or (
            self.source[stop : end_node.start_byte].strip(b"\t") or end_node.end_byte != (len(self.source) if line < 0 else line)
        ):
            raise EvalError("a heredoc ends elsewhere for bash than for the parser")

    def first_line(self, text: bytes, nested: bool) -> None:
        """The commands after `<<EOF` on its line (`| sh`), when the parser read the heredoc's first
        line into them (it does when that line starts with a backslash): parsed again alone."""
        text = text.lstrip().lstrip(b"|&;").lstrip()
        tree = _syntax_tree(text.translate(_ASCII_MASK), self.shared)
        sub = _Walker(text, self.depth, self.cwd, self.names, self.shared, self.fill)
        sub.root = tree.root_node
        sub.walk(tree.root_node, nested)
        self.commands.extend(sub.commands)
        self.stdin_shells.extend(sub.stdin_shells)
        self.stdin_readers.update(sub.stdin_readers)
        self.fed |= sub.fed

    def expanded_text(self, body: str) -> bool:
        """The commands that expanding an unquoted heredoc's body runs (bash(1), Here Documents:
        the body undergoes parameter expansion, command substitution and arithmetic expansion, as
        in double quotes but for `"`, which is text; its continued lines are joined first): read by
        dsl.subjects.bash.parse_expanded, each substitution a command line with its own quoting.
        Returns whether the body expands anything (what it becomes is then known at run time only)."""
        if self.depth >= 8:
            raise EvalError("the command nests shells more than 8 deep")
        text = _HEREDOC_CONTINUATION.sub(lambda m: m.group(1) or "", body)
        if len(text) > MAX_SHELL_TEXT:
            raise EvalError(f"the command is longer than {MAX_SHELL_TEXT:,} characters")
        source = text.encode("utf-8", "surrogatepass")
        tree = _expanded_tree(source.translate(_ASCII_MASK), self.shared)
        walker = _Walker(source, self.depth + 1, self.cwd, self.names, self.shared, self.fill)
        walker.root = tree.root_node
        for piece in tree.root_node.children:
            walker.nested_in(piece)
        for shell in walker.stdin_shells:
            if id(shell) not in walker.fed:
                raise EvalError(f"{shell.program} reads its script from standard input (a pipe or a file), which this "
                                "command does not show")
        if walker.evaluated:
            self.evaluated = True
        self.commands.extend(walker.commands)
        return bool(tree.root_node.children)

    def runs_strings(self, program: str, rest: list[_Word]) -> None:
        """Builtins that run a string or a file this text may not show: `trap 'CMD' SIG`,
        `mapfile -C 'CMD'` (and readarray, compgen -C, complete -C), `alias NAME='CMD'` (the alias may run later), `source`/`.` of standard
        input or a process substitution, and `hash -p PATH NAME` (NAME then runs PATH)."""
        values = [w for w in rest if not w.value.startswith("-")]
        if program == "trap" and values:
            self.shared.defers = True  # it runs later, maybe after an assignment
            strings = [values[0]]
        elif program in CALLBACK_BUILTINS:
            # `mapfile -tC'CMD' -c1 arr`: options read as bash reads them, under every reading of
            # an unknown one; the callback runs with words appended, so what it runs is dynamic
            for reading in read(CALLBACK_BUILTINS[program], rest):
                for string in reading.scripts:
                    if string.dynamic:
                        raise EvalError(f"{program} runs a string that is only known at run time")
                    self.script(string.value, nested=True, dynamic=True)
                for words in reading.code:  # `compgen -W '$(CMD)'`: its words are expanded as a command's
                    if words.dynamic:
                        raise EvalError(f"{program} expands a word list that is only known at run time")
                    self.script(": " + words.value, nested=True, dynamic=True)
            return
        elif program == "alias":
            strings = [_Word(w.value.split("=", 1)[1], w.dynamic) for w in values if "=" in w.value]
        elif program in ("source", "."):
            if values and (values[0].dynamic or _stream(values[0]) is not None):
                raise EvalError(f"{program} runs a script that is only known at run time")
            return
        else:  # hash
            if any(w.value.startswith("-") and "p" in w.value[1:] for w in rest):
                raise EvalError("hash -p makes a name run another program")
            return
        for string in strings:
            if string.dynamic:
                raise EvalError(f"{program} runs a string that is only known at run time")
            self.script(string.value, nested=True)

    def script(self, text: str, nested: bool, dynamic: bool = False, fill: _Fill | None = None,
               via: tuple[str, ...] = ()) -> None:
        """The commands of a script run by this command line; `dynamic`: under one reading only;
        `fill`: a runner fills in words of its commands (GNU parallel's command line); `via`: the
        listed runners it runs through (`ssh HOST 'CMD'`), put before each command's wrappers, its
        directory unknown unless they all keep it."""
        if self.depth >= 8:
            raise EvalError("the command nests shells more than 8 deep")
        cwd = self.cwd if _cwd.SAME_DIR.issuperset(via) else None
        commands = _parse(text, self.depth + 1, nested, cwd=cwd, names=self.names, shared=self.shared, fill=fill)
        if via:
            commands = [Command(**{**_as_dict(c), "wrappers": via + c.wrappers}) for c in commands]
        if dynamic:
            commands = [c if c.dynamic else Command(**{**_as_dict(c), "dynamic": True}) for c in commands]
        self.commands.extend(commands)

    def command(self, node, nested: bool, redirects: tuple[str, ...]) -> None:
        start = len(self.commands)  # commands nested in the words land here; they follow the outer one
        assignments: list[str] = []
        words: list[_Word] = []
        herestrings: list[_Word] = []
        dollar = None  # a `$` tree-sitter-bash split off a translated string `$"..."` before it
        descriptors = _descriptor_words(node, self.source)
        starts = _redirect_starts(node)
        # `time` at the start of a pipeline and `coproc` are reserved words that take a whole simple
        # command, assignments included (bash(1), SHELL GRAMMAR): `time A=1 rm` runs rm; the ids of
        # its words written as an assignment (NAME= unquoted) are noted for _emit
        name = node.child_by_field_name("name")
        keyword = name is not None and self.text(name) in ("time", "coproc") and (
            self.text(name) == "coproc" or node.parent is None or node.parent.type != "pipeline"
            or node.parent.children[0] is node)
        assigning: set[int] = set()

        def argument(child) -> list[_Word]:
            made = self.braced(child)
            if keyword and _ASSIGNMENT_WORD.match(self.text(child)):
                assigning.update(id(w) for w in made)
            return made

        for child in node.children:
            if id(child) in descriptors:
                continue
            if child.type == "$" and not child.is_named:
                dollar = child
                continue
            translated = dollar is not None and _translates(dollar, child)
            if dollar is not None and not translated:
                words.append(_Word("$", False))  # `echo $ x`: a `$` before a blank is itself
            dollar = None
            if translated:
                words.append(self.translated_word(child))
            elif child.type == "variable_assignment":
                self.nested_in(child)
                assignments.append(self.text(child))
            elif child.type == "command_name":
                words.extend(self.braced(child.children[0]) if child.children else [_Word(self.text(child), True)])
            elif child.type == "file_redirect":
                target = self.redirect_target(child)
                if target is not None:
                    redirects = redirects + (target.value,)
                for extra in _destinations(child)[1:]:  # `rm 2>/dev/null -rf /`: the words go on
                    if not _varname_descriptor(extra, starts, self.source):
                        words.extend(argument(extra))
            elif child.type == "herestring_redirect":
                # `<<< WORD`: WORD is expanded (its substitutions run) and fed to the command
                fed = [self.word(c) for c in child.children if c.is_named]
                herestrings.append(_Word(" ".join(w.value for w in fed), any(w.dynamic for w in fed)))
            elif child.is_named:
                words.extend(argument(child))
        if dollar is not None:
            words.append(_Word("$", False))
        trailing = self.trailing.pop(id(node), ())
        for extra in trailing:
            words.extend(argument(extra))
        inner = self.commands[start:]
        del self.commands[start:]
        if words:
            before = len(self.commands)
            self.programs = 0
            self.keyword_assignments = assigning
            self.emit(words, tuple(assignments), redirects, nested, self.text(node), (), fill=self.fill)
            self.keyword_assignments = _NONE
            first = self.commands[before] if len(self.commands) > before else None
            self.moves(first)
            if herestrings and first is not None and id(first) in self.stdin_readers:
                for fed in herestrings:  # `bash <<< 'rm -rf /'`: the shell reads its script from it
                    self.feed(first, fed.value, fed.dynamic)
        self.commands.extend(inner)

    def moves(self, first: Command | None) -> None:
        """The directory after a simple command: `cd` moves it when it succeeds (see dsl.subjects.cwd)."""
        if first is None:
            return
        if first.program == "cd" and _cwd.BUILTIN_CD.issuperset(first.wrappers):
            here = self.cwd
            target = _cwd.cd_destination(first.argv, first.dynamic, *self.names)
            moved = None if target is None else _cwd.join(here, target)
            if moved is not None and len(moved) > MAX_CWD_CHAIN:
                moved = None  # each word would be resolved against it: unknown keeps that linear
            self.cwd, self.fail = moved, here
        elif first.program in _cwd.UNKNOWN_AFTER and not first.wrappers:
            self.cwd = self.fail = None

    def cwd_for(self, wrappers: tuple[str, ...]) -> str:
        """The directory a command run by `wrappers` starts in: unknown after one that may move it
        (`env -C DIR`, `sudo -i`)."""
        return self.here() if _cwd.SAME_DIR.issuperset(wrappers) else ""

    def emit(self, words: list[_Word], assignments, redirects, nested, text, wrappers, dynamic: bool = False,
             fill: _Fill | None = None) -> None:
        """The command `words` and what it runs. `dynamic`: it is only one reading of an outer
        command line whose options were not all understood, so it is marked dynamic. `fill`: a
        runner (xargs, find -exec, parallel) replaces or appends words of it at run time. Raises
        EvalError past MAX_RUNNERS programs read for one simple command, or MAX_PROGRAMS for the
        whole text."""
        self.programs += 1
        if self.programs > MAX_RUNNERS:
            raise EvalError(f"the command runs through more than {MAX_RUNNERS} programs that run others "
                            "(sudo, env, xargs, find -exec, ..., each reading of an unknown option counted)")
        self.shared.programs -= 1
        if self.shared.programs < 0:
            raise EvalError(f"the command runs more than {MAX_PROGRAMS} programs in all (its nested scripts included, "
                            "each program a wrapper runs and each reading of an unknown option counted): too many to read")
        # after an assignment, under POSIXLY_CORRECT, or given arguments from standard input
        # (GNU parallel, like xargs whose table says so): what it runs is not known from the text
        dynamic = dynamic or self.shared.assigned or self.shared.posix or (
            not words[0].dynamic and words[0].value.rsplit("/", 1)[-1] in _STDIN_ARGUMENTS)
        self._emit(words, assignments, redirects, nested, text, wrappers, dynamic, fill)

    def _emit(self, words: list[_Word], assignments, redirects, nested, text, wrappers, dynamic: bool,
              fill: _Fill | None) -> None:
        if self.keyword_assignments and wrappers and all(w in ("time", "coproc") for w in wrappers):
            # what the reserved word `time` / `coproc` runs starts with its assignments (see command())
            k = 0
            while k < len(words) and id(words[k]) in self.keyword_assignments:
                k += 1
            if k:
                assignments = assignments + tuple(w.value for w in words[:k])
                words = words[k:]
            if not words:  # `time A=1`: an assignment statement, timed
                self.commands.append(Command(program="", path="", argv=(), args=(), flags=(), assignments=assignments,
                                             redirects=redirects, wrappers=wrappers, nested=nested, dynamic=True,
                                             text=text, cwd=self.here()))
                self.shared.assign()
                return
        program_word = words[0]
        program = program_word.value.rsplit("/", 1)[-1]
        rest = words[1:]
        if program_word.translated:  # `$"sudo" rm`: read as sudo, and everything it runs dynamic
            dynamic = True
        spec = TABLE.get(program) if not program_word.dynamic or program_word.translated else None
        if spec is not None:
            self.emit_read(program, spec, words, assignments, redirects, nested, text, wrappers, dynamic, fill)
            return
        if program in _RESERVED and not program_word.dynamic:
            raise EvalError(f"the keyword '{program}' stands where a command should (after time or coproc?): "
                            "the commands it runs cannot be read reliably")
        assigns = program_word.dynamic or program in _ASSIGNING or (program in ("printf", "wait") and any(
            w.value.startswith("-v" if program == "printf" else "-p") for w in rest)) or (bool(assignments) and program in _SPECIAL)
        if _shellenv.hands_code(assignments, False):  # `BASH_ENV=F make`: a shell it starts runs F
            dynamic = True
        if assigns or program in ("test", "["):
            # `let x`, `read 'a[i]'`, `test -v 'a[i]'`: names with a subscript, and let's expressions,
            # are arithmetic bash evaluates
            dynamic = dynamic or program == "let" or any(has_arithmetic_subscript(w.value) for w in rest)
        self.commands.append(_command(words, assignments, redirects, nested, text, wrappers, dynamic,
                                      cwd=self.cwd_for(wrappers)))
        if assigns:
            self.shared.assign()  # after it: `read HOME; git status`
        if program == "git" and not program_word.dynamic:
            # settings of its command line or environment that run programs (dsl.subjects.gitconfig)
            unknown, scripts = _git.reading([w.value for w in rest], assignments)
            if unknown and not self.commands[-1].dynamic:
                self.commands[-1] = Command(**{**_as_dict(self.commands[-1]), "dynamic": True})
            for script in scripts:  # git appends arguments (a file, a host): read as a runner's
                self.script(script, nested=True, dynamic=True, fill=_GIT_FILL)
            for ext in _git.ext_commands([w.value for w in rest]):  # `git clone 'ext::CMD ARGS'` runs CMD
                self.emit([_Word(v, d) for v, d in ext], (), (), True, text, (), True)
        if program in ("fc", "r") and not self.commands[-1].dynamic:
            # bash(1) `fc`: -s (or -e -) runs a history entry again, and otherwise the editor named by
            # -e, FCEDIT or EDITOR edits entries that then run: history this text may have filled
            # (`history -s CMD`, also under bash -c), so what it runs is only known at run time; `r`
            # is `fc -e -` in zsh(1) and ksh(1)
            self.commands[-1] = Command(**{**_as_dict(self.commands[-1]), "dynamic": True})
        # Commands that run other commands.
        if program in ("trap", "mapfile", "readarray", "compgen", "complete", "alias", "source", ".", "hash"):
            self.runs_strings(program, rest)
        elif program == "eval" and rest:
            words = rest[1:] if rest[0].value == "--" else rest
            if any(w.dynamic for w in words):
                raise EvalError("eval runs a string that is only known at run time")
            self.script(" ".join(w.value for w in words), nested=True, dynamic=dynamic)
        elif program == "find":
            before = len(self.commands)
            for inner in _find_exec_commands(rest):
                if inner:
                    if inner[0].value == "{}":  # `-exec {} ...`: the program is each file found
                        inner = [_Word("{}", True)] + inner[1:]
                    self.emit(inner, (), (), True, text, (), dynamic, _FIND_FILL)
            if any(w.value in ("-execdir", "-okdir") for w in rest):  # they run in each file's directory
                self.commands[before:] = [Command(**{**_as_dict(c), "cwd": ""}) for c in self.commands[before:]]

    def emit_read(self, program, spec, words, assignments, redirects, nested, text, wrappers, dynamic,
                  fill: _Fill | None = None) -> None:
        """A program whose command line a table of dsl.subjects.wrappers reads: a wrapper is
        replaced by the command it runs; a shell, an interpreter or a runner is listed with the
        scripts it runs nested after it. When some option is not understood, the program is listed
        as dynamic and every reading of what it runs follows it, nested and dynamic too. Under a
        `fill`, a script or code that holds what the runner fills in (`xargs sh -c`, `find -exec sh
        -c {}`) is an error: it is only known at run time."""
        # the words a runner appends are read as one unknown word, so that `xargs sh -c` reads
        # its script from them (an error), and `xargs sudo` runs them
        tail = [_TAIL] if fill is not None and fill.tail else []
        readings = read(spec, words[1:] + tail)
        if self.shared.posix and spec.permute:
            # POSIXLY_CORRECT: GNU getopt stops at the first operand (`runuser -u root rm -rf /` runs
            # `rm -rf /`): both readings
            readings = readings + read(dataclasses.replace(spec, permute=False), words[1:] + tail)
        # a variable a shell reads as code, given by the environment or set on this command line
        # (`PS4='$(CMD)' bash -x`, `systemd-run -E BASH_ENV=F`): what it runs is not in the text
        ran = {id(w) for r in readings for w in (*(r.command or ()), *r.scripts, *r.code, r.script_file)}
        options = [w.value for w in words[1:] if id(w) not in ran]
        if _shellenv.hands_code(assignments, True) or _shellenv.sets_in_words(options):
            dynamic = True
        # an interactive shell (or -H) expands `!!` and `^a^b` to commands of its history
        history = program in SHELL_SPECS and _shellenv.may_expand_history(options)
        if history and any(_shellenv.expands_history(w.value) for r in readings for w in r.scripts):
            dynamic = True
        for reading in readings:
            if reading.command is not None and len(reading.command) > 1 and reading.command[-1] is _TAIL:
                reading.command = reading.command[:-1]  # the runner still appends them to it
            for script in (*reading.scripts, *reading.code):
                if fill is not None and fill.holds(script):
                    what = "code" if spec.runs == INTERPRETER else "a script"
                    raise EvalError(f"{program} runs {what} that {fill.runner} fills in at run time")
        ambiguous = len(readings) > 1 or bool(readings[0].unknown) or spec.opaque
        wrapper = program in WRAPPERS
        # a listed runner (ssh, docker exec, gdb --args) stays a command of its own; what it runs
        # follows it with the runner among its wrappers. A script runs through the wrappers of the
        # shell that reads it (`sudo bash -c CMD`, `env -C DIR sh -c CMD`): in a directory known
        # only if they all keep it.
        via = wrappers + (program,) if spec.listed else wrappers
        first = readings[0]
        if wrapper and not ambiguous and first.command is not None and not first.scripts and not first.stdin:
            self.emit(first.command, assignments + tuple(first.assignments), redirects, nested, text,
                      wrappers + (program,), dynamic or spec.dynamic_inner, fill)
            return
        code = tuple(dict.fromkeys(w.value for r in readings for w in (*r.scripts, *r.code)))
        filled_file = fill is not None and any(r.script_file is not None and fill.holds(r.script_file) for r in readings)
        own = _command(words, assignments, redirects, nested, text, wrappers, dynamic or ambiguous or filled_file, code,
                       cwd=self.cwd_for(wrappers))
        self.commands.append(own)
        kind = "code" if spec.runs == INTERPRETER else "sh"
        inner_dynamic = dynamic or ambiguous
        for reading in readings:
            if reading.command is not None and not spec.opaque:  # tmux's words are a subcommand, not a command
                if wrapper:
                    self.emit(reading.command, assignments + tuple(reading.assignments), redirects, True, text,
                              wrappers + (program,), inner_dynamic or spec.dynamic_inner, fill)
                elif spec.listed:
                    self.emit(reading.command, (), (), True, text, via, inner_dynamic, fill)
                elif spec.dynamic_inner:  # xargs: the command it runs, nested, with what it fills in
                    self.emit(reading.command, (), (), True, text, (), True, _Fill.of(program, spec, reading))
                else:  # busybox's applet: the command it runs, nested
                    self.emit(reading.command, (), (), True, text, (), inner_dynamic, fill)
            for script in reading.scripts:
                if script.dynamic:
                    raise EvalError(f"{program} runs a script that is only known at run time")
                if spec.fill:  # GNU parallel: its command line is a script, filled in for each argument
                    self.script(script.value, nested=True, dynamic=True, fill=_Fill.of(program, spec, reading, script))
                else:  # hyperfine's parameters (-P, -L) are filled in: its commands are dynamic
                    self.script(script.value, nested=True, dynamic=inner_dynamic or spec.dynamic_inner or bool(
                        via and reading.fills), via=via)
            stream = _stream(reading.script_file) if reading.script_file is not None else None
            if stream == "elsewhere":
                raise EvalError(f"{program} reads its script from {reading.script_file.value}, which this command "
                                "does not show")
            if reading.stdin or stream == "stdin":
                self.stdin_readers[id(own)] = kind  # an error unless a heredoc or here-string here feeds it
                if history:
                    self.history_readers.add(id(own))
                if via:
                    self.stdin_via[id(own)] = via
                self.stdin_shells.append(own)

    def feed(self, reader: Command, body: str, dynamic: bool, script: str | None = None) -> None:
        """A heredoc or here-string `body` is the script `reader` reads from standard input: a shell's
        is read as a script; either way it is kept in the reader's `code`. `dynamic`: it is only
        known at run time (an error for a shell's), unless `script` is given: the text the shell
        reads as far as it is known (an unquoted heredoc's body, its expansions as written), read
        with every command dynamic."""
        self.fed.add(id(reader))
        history = id(reader) in self.history_readers and _shellenv.expands_history(body)
        if self.stdin_readers.get(id(reader)) == "sh":
            if dynamic and script is None:
                raise EvalError(f"{reader.program} reads a script that is only known at run time")
            # a dynamic shell (an unknown option, PS4 in its environment) runs its script dynamic too
            self.script(body if script is None else script, nested=True, dynamic=dynamic or reader.dynamic or history,
                        via=self.stdin_via.get(id(reader), ()))
        for k in range(len(self.commands) - 1, -1, -1):
            if self.commands[k] is reader:
                self.commands[k] = Command(**{**_as_dict(reader), "code": reader.code + (body,),
                                              "dynamic": reader.dynamic or dynamic or history})
                break


# bash(1), Here Documents: in an unquoted heredoc's body a backslash quotes \ $ ` and newline (a
# backslash and newline are removed: a continued line); before any other character it is itself.
# _HEREDOC_CONTINUATION joins continued lines, _HEREDOC_UNESCAPE removes every quoting backslash
# (each pair read at once, so `\\<newline>` is a backslash and a newline).
def _backtick_unescaped(text: str, quotes: bool) -> str:
    """The script bash reads from backquotes holding `text` (bash(1), Command Substitution: a
    backslash before $, ` or \\, and " within double quotes, is removed; pairs read left to right).
    str.replace replaces left to right too: each `\\\\` pair is first set aside as a NUL (no text
    holds one: parse_shell refuses it), so a backslash left over is the last of its run and quotes
    the character after it. Linear, in C (a re.sub template per pair took 58 ms for 50,000)."""
    text = text.replace("\\\\", "\0").replace("\\`", "`").replace("\\$", "$")
    if quotes:
        text = text.replace('\\"', '"')
    return text.replace("\0", "\\")


_HEREDOC_CONTINUATION = re.compile(r"(\\[^\n])|\\\n")
_HEREDOC_UNESCAPE = re.compile(r"\\([$`\\])|\\\n")


def _in_double_quotes(node) -> bool:
    """Whether `node` is inside a "..." of the script it belongs to."""
    parent = node.parent
    while parent is not None and parent.type not in ("command_substitution", "process_substitution", "subshell"):
        if parent.type == "string":
            return True
        parent = parent.parent
    return False


def _line_col(source: bytes, at: int) -> str:
    """Where byte `at` of a text is, as a person counts: `line L, column C` (from 1, C in
    characters). Only for an error's message."""
    start = source.rfind(b"\n", 0, at) + 1
    line = source.count(b"\n", 0, at) + 1
    column = len(source[start:at].decode("utf-8", "replace")) + 1
    return f"line {line}, column {column}"


_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
# a word written as an assignment (bash(1), PARAMETERS: NAME=, NAME+=, NAME[INDEX]=, the name unquoted)
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+(?:\[[^\]]*+\])?+\+?=")
_NONE: frozenset = frozenset()
_VARNAME_FD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")  # bash(1), REDIRECTION: `{varname}<file`


def _descriptor_words(command, source: bytes) -> set[int]:
    """The ids of the words of a command node that are a redirection's descriptor, which
    tree-sitter-bash misreads as words: `0` right before `<` or `>` (`sh 0</dev/stdin` is sh reading
    standard input, not the script file `0`; `0<x cat` runs cat) and a `{varname}` right before one
    (bash allocates a descriptor and names it so). Only a word that touches the redirection is one."""
    starts = _redirect_starts(command)
    if not starts:
        return starts
    out = set()
    for child in command.children:
        word = child.children[0] if child.type == "command_name" and child.children else child
        if word.end_byte not in starts:
            continue
        text = source[word.start_byte : word.end_byte].decode("utf-8", "replace")
        if (word.type == "number" and text.isdigit()) or _varname_descriptor(word, starts, source):
            out.add(id(child))
    return out


def _redirect_starts(command) -> set[int]:
    """Where the redirections of a command node (and of the redirected statement around it) start."""
    starts = {c.start_byte for c in command.children if c.type in _REDIRECTS}
    parent = command.parent
    if parent is not None and parent.type == "redirected_statement":
        starts.update(c.start_byte for c in parent.children if c.type in _REDIRECTS)
        starts.update(g.start_byte for c in parent.children if c.type == "heredoc_redirect"
                      for g in c.children if g.type == "file_redirect")
    return starts


def _varname_descriptor(word, starts: set[int], source: bytes) -> bool:
    """Whether `word` is `{NAME}` right before a redirection (bash(1), REDIRECTION: `{varname}>file`
    allocates a descriptor, wherever it stands among the words: after a word, or after another
    redirection, where tree-sitter-bash makes it one more destination of that redirection)."""
    return word.type == "concatenation" and word.end_byte in starts and _VARNAME_FD.fullmatch(
        source[word.start_byte : word.end_byte].decode("utf-8", "replace")) is not None


def _descriptor_value(value: str) -> bool:
    """Whether the word of `>&` / `<&` names a descriptor to copy (digits) or close (`-`)."""
    return (value.isascii() and value.isdigit()) or value == "-"


def _translates(dollar, node) -> bool:
    """Whether `node` right after a `$` the parser split off (tree-sitter-bash's bare `$`) makes a
    translated string with it: a string touching it, or a concatenation that starts with one
    (`$"x"#y`, `$"x"'y'`: one word to bash)."""
    if node.start_byte != dollar.end_byte:
        return False
    return node.type == "string" or (node.type == "concatenation" and bool(node.children)
                                     and node.children[0].type == "string")


def _translated(inner: list[_Word]) -> _Word:
    """bash(1), "Locale-Specific Translation": `$"rm"` is "rm" translated by the message catalog
    of TEXTDOMAIN for the current locale, none of which this text shows. Read as its contents but
    dynamic (never known), and `translated` so that a wrapper named so is still unwrapped."""
    return _Word("".join(w.value for w in inner), True, translated=not any(w.dynamic for w in inner))


def _command(words, assignments, redirects, nested, text, wrappers, dynamic, code=(), cwd=".") -> Command:
    program_word = words[0]
    program = program_word.value.rsplit("/", 1)[-1]
    flags, args, values, paths = split_command_words(program, [w.value for w in words[1:]])
    return Command(program=program, path=program_word.value, argv=tuple(w.value for w in words), args=args,
                   flags=flags, redirects=redirects, wrappers=wrappers, assignments=assignments, nested=nested,
                   dynamic=dynamic or any(w.dynamic for w in words), text=text, code=code, values=values,
                   paths=paths, cwd=cwd)


# Files that are standard input (a shell or `source` given one reads what a heredoc or a pipe feeds).
_STDIN_PATH = re.compile(r"/dev/stdin|/dev/fd/0|/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/fd/0")


def _stream(word: _Word) -> str | None:
    """Whether a script file is standard input ("stdin"), another stream this text does not show
    ("elsewhere": a process substitution `<(curl ...)`, another descriptor, `/dev/tcp/...`, a device),
    or a file (None). A relative path is read as if it might climb to the root (`../../dev/stdin`)."""
    value = word.value
    if word.dynamic:
        return "elsewhere" if value.startswith(("<(", ">(")) else None
    normal = posixpath.normpath(value) if value else value
    if normal.startswith("//"):  # normpath keeps a leading "//" (POSIX leaves it to the system); Linux reads "/"
        normal = "/" + normal.lstrip("/")
    if not normal.startswith("/"):
        parts = normal.split("/")
        while parts and parts[0] == "..":
            parts = parts[1:]
        if len(parts) == len(normal.split("/")):
            return None  # relative, not climbing: under the working directory
        normal = "/" + "/".join(parts)
    if _STDIN_PATH.fullmatch(normal):
        return "stdin"
    if normal == "/dev/null":
        return None
    return "elsewhere" if normal.startswith(("/dev/", "/proc/")) else None


# Every byte of a non-ASCII character, for the copy the parser reads (see _parse).
_ASCII_MASK = bytes(range(128)) + b"x" * 128


def _parse(text: str, depth: int, nested: bool, check_stdin: bool = True, cwd: str | None = ".",
           names: tuple[bool, bool] = (False, False), shared: _Shared | None = None,
           fill: _Fill | None = None) -> list[Command]:
    if len(text) > MAX_SHELL_TEXT:
        raise EvalError(f"the command is longer than {MAX_SHELL_TEXT:,} characters")
    text = splice_continuations(text)
    source = text.encode("utf-8", "surrogatepass")
    top = shared is None
    if top:
        shared = _Shared(text)
    elif "POSIXLY_CORRECT" in text:
        shared.posix = True
    # Bash's syntax is all ASCII and any byte >= 0x80 is an ordinary word character to it, so the
    # parser is given a copy with each such byte replaced by "x" (the same tree at the same byte
    # offsets, as tree-sitter-bash, which crashed on some characters outside the Basic
    # Multilingual Plane, was), while every word is still read from the original bytes.
    tree = _syntax_tree(source.translate(_ASCII_MASK), shared)
    walker = _Walker(source, depth, cwd, names, shared, fill)
    walker.root = tree.root_node
    walker.walk(tree.root_node, nested)
    for shell in walker.stdin_shells if check_stdin else ():
        if id(shell) not in walker.fed:
            raise EvalError(f"{shell.program} reads its script from standard input (a pipe or a file), which this "
                            "command does not show")
    commands = walker.commands
    if top and shared.ever and shared.defers:
        # a function or a trap runs its commands when called, maybe after an assignment read later
        commands = [c if c.dynamic else Command(**{**_as_dict(c), "dynamic": True}) for c in commands]
    return _aliased(commands) if depth == 0 else commands


def _aliased(commands: list[Command]) -> list[Command]:
    """Every command of the text whose name, or a wrapper's, an `alias` of the same text defines
    is dynamic, and so is every git after a variable that changes what git runs is set
    (dsl.subjects.gitconfig.ENVIRONMENT: `export GIT_PAGER=...; git log`). An alias: `alias ls='rm -rf'` then `ls /` runs `rm -rf /` where aliases are expanded (an
    interactive shell, `shopt -s expand_aliases`, zsh), and an alias ending in a blank expands the
    next word too (`alias sudo='sudo '`). The alias's own text is read as a script where it is
    defined. Setting BASH_ALIASES (bash's table of them) is an error: its names are not read here."""
    names = set()
    git_environment = False
    for c in commands:
        git_environment = git_environment or any(_git.sets_git_environment(a.split("=", 1)[0]) for a in c.assignments) or (
            c.program in _DECLARES and any(_git.sets_git_environment(_unquoted(w).lstrip("-").split("=", 1)[0])
                                           for w in c.argv[1:]))
        if c.program == "alias":
            names.update(arg.split("=", 1)[0] for arg in c.args if "=" in arg)
        if any(a.startswith("BASH_ALIASES") for a in c.assignments) or (
                c.program in _DECLARES and any("BASH_ALIASES" in w for w in c.argv[1:])):
            raise EvalError("the command sets BASH_ALIASES, which makes names run other commands")
    if git_environment:  # `export GIT_CONFIG_COUNT=1 ...; git log`: what git runs is set before it
        names.add("git")
    if not names:
        return commands
    return [Command(**{**_as_dict(c), "dynamic": True})
            if not c.dynamic and (c.program in names or c.path in names or names.intersection(c.wrappers)) else c
            for c in commands]


def _unquoted(word: str) -> str:
    return word.replace("'", "").replace('"', "").replace("\\", "")


# bash 5.2 builtins that set variables by name (bash(1), SHELL BUILTIN COMMANDS)
_DECLARES = frozenset({"declare", "typeset", "export", "local", "readonly", "read", "printf", "mapfile", "readarray", "unset"})


_CACHE = BoundedCache(BUDGETS["subjects.shell"], "subjects.shell")  # text → tuple of Commands


def _parse_cached(text: str) -> tuple[Command, ...]:
    hit = _CACHE.get(text)
    if hit is None:
        hit = parse_shell_uncached(text)
        _CACHE.put(text, hit)
    return hit


def clear_shell_cache() -> None:
    """Forget the parsed shell texts kept by `parse_shell` (at most BUDGETS["subjects.shell"] bytes of them, see dsl.cache)."""
    _CACHE.clear()


def parse_shell_uncached(text: object) -> tuple[Command, ...]:
    """`parse_shell` without its cache (for a caller that keeps its own: dsl.compiler)."""
    if not isinstance(text, str):
        raise EvalError("shell() takes a string")
    if "\x00" in text:
        raise unparseable_command("the command contains a NUL byte")
    try:
        return tuple(_parse(text, 0, False))
    except EvalError as exc:  # the text's own problem, the same for every rule that reads it
        raise unparseable_command(exc.message) from None
    except RecursionError:
        # `$($($(...)))` nested thousands deep: an EvalError like the others, so that the callers
        # keep it (dsl.compiler's cache) instead of parsing the text again for every rule
        raise unparseable_command("the command nests too deeply to read") from None


def parse_shell_pattern(text: str) -> list[Command]:
    """The commands of a pattern's words (`python` of `Bash(python:*)`), where a shell or an
    interpreter given no script is a prefix of a command line, not one reading standard input.
    Not cached: for importing settings, not for decisions. Raises EvalError as parse_shell does."""
    if "\x00" in text:
        raise EvalError("the command contains a NUL byte")
    return _parse(text, 0, False, check_stdin=False)


def parse_shell(text: object) -> list[Command]:
    """`shell(x)`: the simple commands of a shell string, in source order (outer before the
    commands nested in it). Raises EvalError for what is not a string, and for a text it cannot
    read (not valid shell, a script known only at run time, ...) an EvalError whose message is
    `dsl.values.UNPARSEABLE_COMMAND` followed by why."""
    if not isinstance(text, str):
        raise EvalError("shell() takes a string")
    return list(_parse_cached(text))
