"""Normalized subjects: turn a raw argument into what it means, so rules match meaning.

Most bypasses of tool-call gates come from matching raw strings: a deny on `rm -rf /` misses
`rm -fr /`, a rule on a relative path misses the absolute path the tool receives, a deny on `cat`
misses `cd x && cat y`. Three functions of the policy language normalize instead:

* `path(x)` → `PathValue`: absolute, `.` and `..` resolved lexically (no file system access), `~`
  expanded against the caller's home, relative paths resolved against `context.cwd`.
* `shell(x)` → a list of `Command`: every simple command in a shell string, after unwrapping
  `sudo`, `timeout`, `env`, ..., including the commands nested in `$(...)`, backticks,
  `bash -c '...'`, `eval`, `xargs` and a heredoc piped into a shell, with flags normalized so that
  `-rf`, `-r -f`, `-fr` and `--recursive --force` give one set.
* `url(x)` → `UrlValue`: scheme, host (lowercased, IDNA, trailing dot removed, userinfo
  separated), port, path.

All three are pure (the same input always gives the same value) and fail closed: input they
cannot understand raises `EvalError`, which makes the condition error, and an error never allows.

The shell parser is tree-sitter-bash (MIT, maintained by the tree-sitter project, the grammar GitHub
uses for highlighting and navigation). It was chosen over bashlex (GPL-3.0, a port of bash 4's
parser, little maintained) and over shlex (a tokenizer, not a parser: it knows nothing of `&&`,
`$(...)` or heredocs). tree-sitter is error-tolerant by design; any ERROR or MISSING node in the
tree is treated as "cannot parse" here.
"""

from __future__ import annotations

import re
import shlex
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable

from dsl.values import EvalError

# --- paths ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathValue:
    """An absolute, lexically normalized POSIX path (`text` starts with "/", has no "." or ".."
    segments, no repeated or trailing "/" except the root itself)."""

    text: str

    KIND = "path"
    FIELDS = {"text": "string", "name": "string", "ext": "string", "parent": "path", "parts": "list[string]"}

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.text.split("/") if p)

    @property
    def name(self) -> str:
        parts = self.parts
        return parts[-1] if parts else ""

    @property
    def ext(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot > 0 else ""

    @property
    def parent(self) -> "PathValue":
        parts = self.parts
        return PathValue("/" + "/".join(parts[:-1])) if len(parts) > 1 else PathValue("/")

    def __str__(self) -> str:
        return self.text


_WINDOWS = re.compile(r"^[A-Za-z]:|\\")


def _lexical(parts: Iterable[str]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return out


def _absolute(raw: str, cwd: str | None, home: str | None, what: str) -> list[str]:
    """The normalized segments of `raw` made absolute. Raises EvalError."""
    if not isinstance(raw, str):
        raise EvalError(f"{what} must be a string")
    if raw == "":
        raise EvalError(f"{what} is empty")
    if "\x00" in raw:
        raise EvalError(f"{what} contains a NUL byte")
    if "$" in raw or "`" in raw:
        raise EvalError(f"{what} {raw!r} holds a shell expansion that is not expanded here")
    if _WINDOWS.search(raw):
        raise EvalError(f"{what} {raw!r} is not a POSIX path")
    if raw == "~" or raw.startswith("~/"):
        if not home:
            raise EvalError(f"{what} {raw!r} starts with ~ but no home is known (context.home or the policy's home)")
        base = _absolute(home, None, None, "the home directory")
        return _lexical(base + raw[2:].split("/"))
    if raw.startswith("~"):
        raise EvalError(f"{what} {raw!r} names another user's home, which is not known here")
    if raw.startswith("/"):
        return _lexical(raw.split("/"))
    if not cwd:
        raise EvalError(f"{what} {raw!r} is relative and the call has no context.cwd")
    base = _absolute(cwd, None, home, "context.cwd")
    return _lexical(base + raw.split("/"))


def make_path(raw: object, cwd: str | None, home: str | None) -> PathValue:
    """`path(x)`: see the module docstring. Raises EvalError for what is not a usable path."""
    if isinstance(raw, PathValue):
        return raw
    return PathValue("/" + "/".join(_absolute(raw, cwd, home, "the path")))


def under(path: PathValue, base: PathValue) -> bool:
    """True when `path` is `base` or inside it, segment by segment (not a string prefix)."""
    parts, prefix = path.parts, base.parts
    return parts[: len(prefix)] == prefix


@lru_cache(maxsize=4096)
def _path_glob_regex(segments: tuple[str, ...]) -> re.Pattern[str]:
    """A regex over a path's text ("" for the root) that matches the pattern's segments."""
    out = ""
    for seg in segments:
        if seg == "**":
            out += r"(?:/[^/]+)*"
            continue
        piece = ""
        for ch in seg:
            piece += "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch)
        out += "/" + piece
    return re.compile(out + r"\Z", re.DOTALL)


def path_glob(path: PathValue, pattern: str, cwd: str | None, home: str | None) -> bool:
    """Match a path against a path pattern: `*` within one segment, `?` one character, `**` any
    number of whole segments (including none). A relative pattern is anchored at `cwd`, one
    starting with `~` at the home, like a path. Raises EvalError when the pattern cannot be
    anchored."""
    if pattern.startswith("**"):
        if not cwd:
            raise EvalError(f"the pattern {pattern!r} is relative and the call has no context.cwd")
        segments = tuple(_absolute(cwd, None, home, "context.cwd")) + tuple(p for p in pattern.split("/") if p not in ("", "."))
    else:
        # Wildcards are kept as segments; only "." and ".." are resolved.
        segments = tuple(_absolute(pattern, cwd, home, "the pattern"))
    # The root is the path with no segments; match it as the empty string against the segments.
    return _path_glob_regex(segments).match(path.text if path.text != "/" else "") is not None


# --- shell ------------------------------------------------------------------------------------

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "rbash"})
# Reserved words: never the name of a command bash runs. The parser takes one for a command name
# only where it misread the text (`time { ...; }`, `coproc NAME { ...; }`), so it is an error.
_RESERVED = frozenset({"{", "}", "if", "then", "elif", "else", "fi", "for", "while", "until", "do", "done", "case",
                       "esac", "select", "function", "[[", "]]", "!", "(", ")", "in"})
MAX_SHELL_TEXT = 100_000  # characters; a longer string is an error (its parse would cost too much)

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

    KIND = "command"
    FIELDS = {
        "program": "string", "path": "string", "argv": "list[string]", "args": "list[string]",
        "flags": "list[string]", "redirects": "list[string]", "wrappers": "list[string]",
        "assignments": "list[string]", "nested": "bool", "dynamic": "bool", "text": "string",
    }

    def __str__(self) -> str:
        return " ".join(self.argv)


@dataclass
class _Word:
    value: str
    dynamic: bool


_local = threading.local()


def _parser():
    """This thread's tree-sitter parser: a Parser is not meant to be shared between threads, and
    a policy may be evaluated from several at once."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        parser = _local.parser = Parser(Language(tree_sitter_bash.language()))
    return parser


def _unescape_unquoted(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text.replace("\\\n", ""), flags=re.DOTALL)


_ANSI_C = re.compile(r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|c(.)|(.))", re.DOTALL)
_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                  "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(text: str) -> str:
    """The value of bash's `$'...'` (the text between the quotes), with bash's escapes: \\n and the
    like, \\nnn (1-3 octal digits), \\xHH (1-2 hex), \\uHHHH (1-4), \\UHHHHHHHH (1-8), \\cX; any
    other backslash stays as written (bash manual, "ANSI-C Quoting")."""

    def one(m: re.Match) -> str:
        simple, octal, hex2, hex4, hex8, control, other = m.groups()
        if simple is not None:
            return _ANSI_C_SIMPLE[simple]
        if control is not None:
            return chr(ord(control.upper()) ^ 0x40) if control != "?" else "\x7f"
        if other is not None:
            return "\\" + other
        code = int(octal, 8) if octal else int(hex2 or hex4 or hex8, 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"

    return _ANSI_C.sub(one, text)


def _unescape_double(text: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


_SUBSCRIPT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[(.*(?:\$\(|`).*)\]", re.DOTALL)  # name[...$(...)...]
_QUOTED_PARTS = re.compile(r"\$?'[^']*'|\"(?:[^\"\\]|\\.)*\"|\\.", re.DOTALL)
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def brace_expand(text: str, limit: int = 256) -> list[str]:
    """Bash's brace expansion of one unquoted word: `r{m,}` is `rm r`, `f{1..3}` is `f1 f2 f3`
    (also letters and a step: `{a..e..2}`), nested groups too. A group with neither a comma nor a
    sequence stays as written. Raises EvalError past `limit` words."""
    depth, start = 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth:
                continue
            inner, parts, level, last = text[start + 1 : i], [], 0, 0
            for j, c in enumerate(inner):
                level += (c == "{") - (c == "}")
                if c == "," and level == 0:
                    parts.append(inner[last:j])
                    last = j + 1
            parts.append(inner[last:])
            if len(parts) == 1:
                m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?", inner)
                if m is None:
                    continue  # `{x}`, `{}`: not an expansion
                if m.group(1) is not None:
                    a, b, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
                    if abs(b - a) // step >= limit:
                        raise EvalError(f"the brace expansion {text!r} makes more than {limit} words")
                    parts = [str(v) for v in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]
                else:
                    a, b, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
                    parts = [chr(v) for v in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]
            out: list[str] = []
            for part in parts:
                out.extend(brace_expand(text[:start] + part + text[i + 1 :], limit))
                if len(out) > limit:
                    raise EvalError(f"the brace expansion {text!r} makes more than {limit} words")
            return out
    return [text]


class _Walker:
    """Collects the simple commands of one parse tree."""

    def __init__(self, source: bytes, depth: int):
        self.source = source
        self.depth = depth
        self.commands: list[Command] = []
        self.stdin_shells: list[Command] = []  # shells reading their script from standard input
        self.fed: set[int] = set()  # ids of those whose input (a heredoc, a here-string) was read here

    def text(self, node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    # words

    def word(self, node) -> _Word:
        kind = node.type
        if kind == "word":
            raw = self.text(node)
            unescaped = re.sub(r"\\.", "", raw, flags=re.DOTALL)  # a glob character a backslash quotes is no glob
            return _Word(_unescape_unquoted(raw), any(ch in unescaped for ch in "*?["))
        if kind == "number":
            return _Word(self.text(node), False)
        if kind == "raw_string":
            self.quoted_substitutions(node)
            return _Word(self.text(node)[1:-1], False)
        if kind == "ansi_c_string":
            return _Word(_ansi_c(self.text(node)[2:-1]), False)
        if kind == "string":
            value, dynamic = "", False
            for child in node.children:
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
            parts = [self.word(child) for child in node.children]
            return _Word("".join(p.value for p in parts), any(p.dynamic for p in parts))
        # expansions, substitutions, brace expressions, arithmetic: unknown until run time
        self.nested_in(node)
        return _Word(self.text(node), True)

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
        for m in _SUBSCRIPT.finditer(inner):
            self.script(m.group(1), nested=True)

    def braced(self, node) -> list[_Word]:
        """The words of one argument after brace expansion (an unquoted `word` or concatenation of
        them holding `{a,b}` or `{1..3}`); quoted or expanded text is not brace-expanded here."""
        word = self.word(node)
        raw = self.text(node)
        if word.dynamic or not _BRACES.search(raw):
            return [word]
        if any(ch in raw for ch in "'\"\\$`"):
            # quoting mixed with braces (`r{m,}''`): which braces are live is not worked out here
            unquoted = _QUOTED_PARTS.sub("", raw)
            return [_Word(word.value, True)] if ("{" in unquoted and "}" in unquoted) else [word]
        return [_Word(value, False) for value in brace_expand(word.value)]

    def nested_in(self, node) -> None:
        """Collect the commands inside substitutions found under `node`."""
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

    # commands

    def walk(self, node, nested: bool, redirects: tuple[str, ...] = ()) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, nested, redirects)
            return
        if kind == "redirected_statement":
            targets = []
            # `cat <<EOF > out` nests the file redirection inside the heredoc's node
            nested_redirects = [g for c in node.children if c.type == "heredoc_redirect" for g in c.children if g.type == "file_redirect"]
            for child in [*node.children, *nested_redirects]:
                if child.type == "file_redirect":
                    destination = child.child_by_field_name("destination")
                    if destination is None:
                        continue
                    duplicates = child.children[0].type in (">&", "<&") or (
                        len(child.children) > 1 and child.children[1].type in (">&", "<&")
                    )
                    target = self.word(destination)
                    # `2>&1` and `>&-` copy or close a descriptor; `>& FILE` writes FILE (and stderr)
                    if not duplicates or target.dynamic or not (target.value.isdigit() or target.value == "-"):
                        targets.append(target.value)
            body = node.child_by_field_name("body")
            before = len(self.commands)
            if body is not None:
                self.walk(body, nested, redirects + tuple(targets))
                if targets and len(self.commands) == before:  # `[[ -f x ]] > f` still writes f
                    self.commands.append(Command(program="", path="", argv=(), args=(), flags=(), redirects=redirects + tuple(targets),
                                                 nested=nested, text=self.text(node)))
            # `sh <<EOF`: a shell with no -c reads its script from the heredoc
            first = self.commands[before] if len(self.commands) > before else None
            reads_script = first is not None and first.program in SHELLS and _reads_script_from_stdin(
                [_Word(a, False) for a in first.argv[1:]]
            )
            for child in node.children:
                if body is not None and child.id == body.id:
                    continue
                if child.type == "heredoc_redirect":
                    self.heredoc(child, nested, reads_script)
                    if reads_script:
                        self.fed.add(id(first))
                elif child.type not in ("file_redirect",):
                    self.walk(child, nested)
            return
        if kind == "declaration_command":
            words = [self.text(c) for c in node.children]
            start = len(self.commands)
            self.nested_in(node)
            self.commands.insert(
                start,
                Command(program=words[0], path=words[0], argv=tuple(words), args=tuple(words[1:]), flags=(),
                        nested=nested, dynamic=any("$" in w or "`" in w for w in words), text=self.text(node))
            )
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
                        dynamic="$" in text or "`" in text, text=text),
            )
            return
        if kind in ("test_command", "raw_string"):
            self.nested_in(node)
            return
        if kind == "heredoc_redirect":
            self.heredoc(node, nested, False)
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
                                             nested=nested, dynamic=True, text=self.text(node)))
        for child in node.children:
            self.walk(child, nested, redirects)  # a group's redirections apply to every command in it

    def heredoc(self, node, nested: bool, feeds_shell: bool) -> None:
        """A heredoc, possibly piped into more commands (`cat <<'EOF' | sh`). When a shell reads
        it (`feeds_shell`: the command it belongs to is one), its body is a script: parse it. Else
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
                self.walk(child, nested)
                for c in self.commands[before:]:
                    if c.program in SHELLS:
                        feeds_shell = True
                        self.fed.add(id(c))
        if start_node is not None and end_node is not None:
            line_end = self.source.find(b"\n", start_node.end_byte)
            raw = self.source[line_end + 1 : end_node.start_byte] if 0 <= line_end < end_node.start_byte else b""
            body_text = raw.decode("utf-8", "replace")
        else:
            body_text = self.text(body_node) if body_node is not None else None
        if body_text is None:
            return
        if feeds_shell:
            self.script(body_text, nested=True)  # its substitutions are in the script too: read once
        elif not quoted and ("$" in body_text or "`" in body_text):
            self.expanded_text(body_text)

    def expanded_text(self, body: str) -> None:
        """The commands that expanding an unquoted heredoc's body runs. The parser misses a `$(...)`
        at the start of an indented line, so the body is read again as the double-quoted string
        it expands like: a backslash quotes only $ ` \\ and newline in both; a `"` is quoted."""
        out, i = [], 0
        while i < len(body):
            ch = body[i]
            if ch == "\\" and i + 1 < len(body) and body[i + 1] in "$`\\\n":
                out.append(body[i : i + 2])
                i += 2
                continue
            out.append({"\\": "\\\\", '"': '\\"'}.get(ch, ch))
            i += 1
        if self.depth >= 8:
            raise EvalError("the command nests shells more than 8 deep")
        self.commands.extend(_parse(': "' + "".join(out) + '"', self.depth + 1, True)[1:])  # all but `:`

    def runs_strings(self, program: str, rest: list[_Word]) -> None:
        """Builtins that run a string or a file this text may not show: `trap 'CMD' SIG`,
        `mapfile -C 'CMD'`, `alias NAME='CMD'` (the alias may run later), `source`/`.` of standard
        input or a process substitution, and `hash -p PATH NAME` (NAME then runs PATH)."""
        values = [w for w in rest if not w.value.startswith("-")]
        if program == "trap" and values:
            strings = [values[0]]
        elif program in ("mapfile", "readarray"):
            strings = [rest[i + 1] for i, w in enumerate(rest[:-1]) if w.value == "-C"]
        elif program == "alias":
            strings = [_Word(w.value.split("=", 1)[1], w.dynamic) for w in values if "=" in w.value]
        elif program in ("source", "."):
            if values and (values[0].dynamic or values[0].value.startswith(("/dev/stdin", "/dev/fd/", "/proc/self/fd/"))):
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

    def script(self, text: str, nested: bool) -> None:
        if self.depth >= 8:
            raise EvalError("the command nests shells more than 8 deep")
        self.commands.extend(_parse(text, self.depth + 1, nested))

    def command(self, node, nested: bool, redirects: tuple[str, ...]) -> None:
        start = len(self.commands)  # commands nested in the words land here; they follow the outer one
        assignments: list[str] = []
        words: list[_Word] = []
        herestrings: list[_Word] = []
        for child in node.children:
            if child.type == "variable_assignment":
                self.nested_in(child)
                assignments.append(self.text(child))
            elif child.type == "command_name":
                words.extend(self.braced(child.children[0]) if child.children else [_Word(self.text(child), True)])
            elif child.type == "file_redirect":
                destination = child.child_by_field_name("destination")
                if destination is not None:
                    redirects = redirects + (self.word(destination).value,)
            elif child.type == "herestring_redirect":
                # `<<< WORD`: WORD is expanded (its substitutions run) and fed to the command
                fed = [self.word(c) for c in child.children if c.is_named]
                herestrings.append(_Word(" ".join(w.value for w in fed), any(w.dynamic for w in fed)))
            elif child.is_named:
                words.extend(self.braced(child))
        inner = self.commands[start:]
        del self.commands[start:]
        if words:
            before = len(self.commands)
            self.emit(words, tuple(assignments), redirects, nested, self.text(node), ())
            first = self.commands[before] if len(self.commands) > before else None
            if herestrings and first is not None and first.program in SHELLS and _reads_script_from_stdin(
                [_Word(a, False) for a in first.argv[1:]]
            ):
                for fed in herestrings:  # `bash <<< 'rm -rf /'`: the shell reads its script from it
                    if fed.dynamic:
                        raise EvalError(f"{first.program} reads a script that is only known at run time")
                    self.script(fed.value, nested=True)
                self.fed.add(id(first))
        self.commands.extend(inner)

    def emit(self, words: list[_Word], assignments, redirects, nested, text, wrappers) -> None:
        program_word = words[0]
        program = program_word.value.rsplit("/", 1)[-1]
        rest = words[1:]
        if program in WRAPPERS and not program_word.dynamic:
            unwrapped = _unwrap(program, rest)
            if unwrapped is not None:
                inner, more_assignments = unwrapped
                self.emit(inner, assignments + more_assignments, redirects, nested, text, wrappers + (program,))
                return
        if program in _RESERVED and not program_word.dynamic:
            raise EvalError(f"the keyword '{program}' stands where a command should (after time or coproc?): "
                            "the commands it runs cannot be read reliably")
        argv = tuple(w.value for w in words)
        dynamic = any(w.dynamic for w in words)
        flags, args = split_flags(program, [w.value for w in rest])
        command = Command(program=program, path=program_word.value, argv=argv, args=args, flags=flags, redirects=redirects,
                          wrappers=wrappers, assignments=assignments, nested=nested, dynamic=dynamic, text=text)
        self.commands.append(command)
        # Commands that run other commands.
        if program in SHELLS:
            script = _shell_script(rest) if program != "fish" else (_dash_c_script(rest) or _fish_init(rest))
            if script is not None:
                if script.dynamic:
                    raise EvalError(f"{program} -c runs a script that is only known at run time")
                self.script(script.value, nested=True)
            elif _reads_script_from_stdin(rest) and not _shell_operands(rest):
                self.stdin_shells.append(command)  # an error unless a heredoc or here-string here feeds it
        elif program == "flock" and _dash_c_script(rest) is None:
            inner = _flock_command(rest)  # `flock FILE CMD ...` runs CMD holding the lock
            if inner:
                self.emit(inner, (), (), True, text, wrappers + ("flock",))
        elif program in ("su", "script", "flock") and (inner_script := _dash_c_script(rest)) is not None:
            if inner_script.dynamic:
                raise EvalError(f"{program} -c runs a command that is only known at run time")
            self.script(inner_script.value, nested=True)
        elif program in ("trap", "mapfile", "readarray", "alias", "source", ".", "hash"):
            self.runs_strings(program, rest)
        elif program == "eval" and rest:
            words = rest[1:] if rest[0].value == "--" else rest
            if any(w.dynamic for w in words):
                raise EvalError("eval runs a string that is only known at run time")
            self.script(" ".join(w.value for w in words), nested=True)
        elif program == "find":
            for inner in _find_exec_commands(rest):
                if inner:
                    if inner[0].value == "{}":  # `-exec {} ...`: the program is each file found
                        inner = [_Word("{}", True)] + inner[1:]
                    self.emit(inner, (), (), True, text, ())
        elif program == "watch":
            inner = _watch_command(rest)
            if inner:
                if any(w.dynamic for w in inner):
                    raise EvalError("watch runs a command that is only known at run time")
                self.script(" ".join(w.value for w in inner), nested=True)  # watch runs it through sh -c
        elif program == "xargs":
            before = len(self.commands)
            self.emit(_xargs_command(rest), (), (), True, text, ())
            first = self.commands[before]
            self.commands[before] = Command(**{**_as_dict(first), "dynamic": True})  # its arguments come from stdin


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


def _as_dict(cmd: Command) -> dict:
    return {name: getattr(cmd, name) for name in Command.__dataclass_fields__}


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
    """Flag names and positional words. Each flag adds its long name and every short spelling of
    that long name, so `-r`, `-R` and `--recursive` give the same names for rm."""
    aliases = FLAG_ALIASES.get(program, {})
    spellings: dict[str, set[str]] = {}
    for short, long in aliases.items():
        spellings.setdefault(long, {long}).add(short)

    def names(flag: str) -> set[str]:
        long = aliases.get(flag, flag)
        return spellings.get(long, {flag})

    flags: set[str] = set()
    args: list[str] = []
    positional = False
    for word in words:
        if positional or word == "-" or not word.startswith("-"):
            args.append(word)
            continue
        if word == "--":
            if program != "find":  # find's `--` ends its options; the expression (-delete) follows
                positional = True
            continue
        if word.startswith("--") or (program in SINGLE_DASH_LONG and len(word) > 2):
            name = word.lstrip("-").split("=", 1)[0]
            if word.startswith("--") and name not in spellings:
                # getopt_long takes any unambiguous prefix of a long option: rm --recu is --recursive
                known = [long for long in spellings if long.startswith(name)] if name else []
                name = known[0] if len(known) == 1 else name
            flags |= names(name)
        else:
            for ch in word[1:]:
                flags |= names(ch)
    return tuple(sorted(flags)), tuple(args)


def _has_error(node) -> bool:
    return node.has_error


def _first_error(node):
    if node.type == "ERROR" or node.is_missing:
        return node
    for child in node.children:
        if child.has_error or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None


# Every byte of a non-ASCII character, for the copy tree-sitter parses (see _parse).
_ASCII_MASK = bytes(range(128)) + b"x" * 128


_HEREDOC_DELIMITER = re.compile(r"""[ \t]*((?:[^\s;&|<>()'"\\]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+)""", re.DOTALL)


_QUOTE_REMOVAL = re.compile(r"\\(.)|'([^']*)'|\"((?:[^\"\\]|\\.)*)\"", re.DOTALL)  # quote removal of a delimiter


def splice_continuations(text: str) -> str:
    """`text` with bash's line continuations removed: a backslash before a newline disappears with
    it, outside single quotes, `$'...'`, comments and heredoc bodies (bash manual, "Escape
    Character"). The parser reads `r\\<newline>m` as two words where bash runs `rm`, so this
    runs before it. Raises EvalError when the quoting does not close and a continuation sits
    between two non-blank characters: how bash would join the words is then not known here."""
    if "\\\n" not in text:
        return text
    out: list[str] = []
    stack = ["N"]  # N plain, P inside $( ), B backticks, D "...", S '...', A $'...', C a comment
    unsure = False  # a `<<` whose delimiter never came
    pending: list[tuple[str, bool]] = []  # heredocs opened on this line: (delimiter, strip tabs)
    i, n = 0, len(text)
    while i < n:
        ch, top = text[i], stack[-1]
        nxt = text[i + 1] if i + 1 < n else ""
        if top in "NPBD" and ch == "\\":
            if nxt == "\n":
                if out and out[-1].endswith("<") and text.startswith("<", i + 2):
                    raise EvalError("a line continuation inside `<<` cannot be read as bash would")
                i += 2  # the continuation: both characters go
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        if top in "NPBD" and ch == "$" and nxt == "(":  # a command substitution, in or out of "..."
            stack.append("P")
            out.append("$(")
            i += 2
            continue
        if top == "S":
            stack.pop() if ch == "'" else None
        elif top == "A":
            if ch == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            stack.pop() if ch == "'" else None
        elif top == "C":
            if ch == "\n":
                stack.pop()
                continue  # the newline is handled in the context below the comment
        elif top == "D":
            if ch == '"':
                stack.pop()
            elif ch == "`":
                stack.append("B")
        else:  # N, P, B
            if ch == "'":
                stack.append("S")
            elif ch == "$" and nxt == "'":
                stack.append("A")
                out.append("$'")
                i += 2
                continue
            elif ch == '"':
                stack.append("D")
            elif ch == "`":
                stack.pop() if top == "B" else stack.append("B")
            elif ch == "(" and top == "P":
                stack.append("P")
            elif ch == ")" and top == "P":
                stack.pop()
            elif ch == "#" and (i == 0 or text[i - 1] in " \t\n;&|(<>"):  # `$(x)#y` is one word
                stack.append("C")
            elif ch == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
                strip = text.startswith("<<-", i)
                start = i + (3 if strip else 2)
                m = _HEREDOC_DELIMITER.match(text, start)
                if m:
                    word = m.group(1)
                    if "\\\n" in word:
                        raise EvalError("a line continuation inside a heredoc's delimiter cannot be read as bash would")
                    delimiter = _QUOTE_REMOVAL.sub(lambda g: g.group(1) or g.group(2) or g.group(3) or "", word)
                    pending.append((delimiter, strip))
                    out.append(text[i : m.end()])
                    i = m.end()
                    continue
            elif ch == "\n" and pending:
                out.append(ch)
                i += 1
                for delimiter, strip in pending:  # the bodies follow, one after the other, verbatim
                    found = False
                    while i < n:
                        end = text.find("\n", i)
                        line = text[i:] if end < 0 else text[i : end + 1]
                        out.append(line)
                        i += len(line)
                        if (line.rstrip("\n").lstrip("\t") if strip else line.rstrip("\n")) == delimiter:
                            found = True
                            break
                    unsure |= not found  # `$((1<<2))` is no heredoc: what followed was not read
                pending = []
                continue
        out.append(ch)
        i += 1
    spliced = "".join(out)
    if (stack != ["N"] or unsure) and re.search(r"[^\s]\\\n[^\s]", spliced):
        raise EvalError("a line continuation joins words inside quoting that does not close; it cannot be read as bash would")
    return spliced


def _parse(text: str, depth: int, nested: bool) -> list[Command]:
    if len(text) > MAX_SHELL_TEXT:
        raise EvalError(f"the command is longer than {MAX_SHELL_TEXT:,} characters")
    text = splice_continuations(text)
    source = text.encode("utf-8", "surrogatepass")
    # tree-sitter-bash's scanner can read out of bounds on some characters outside the Basic
    # Multilingual Plane (`{` followed by U+108712 crashes the process). Bash's syntax is all
    # ASCII and any byte >= 0x80 is an ordinary word character to it, so the parser is given a copy
    # with each such byte replaced by "x": the same tree at the same byte offsets, while every word
    # is still read from the original bytes.
    tree = _parser().parse(source.translate(_ASCII_MASK))
    if _has_error(tree.root_node):
        bad = _first_error(tree.root_node)
        where = f" at byte {bad.start_byte}" if bad is not None else ""
        raise EvalError(f"the command is not valid shell syntax{where}")
    walker = _Walker(source, depth)
    walker.walk(tree.root_node, nested)
    for shell in walker.stdin_shells:
        if id(shell) not in walker.fed:
            raise EvalError(f"{shell.program} reads its script from standard input (a pipe or a file), which this "
                            "command does not show")
    return walker.commands


@lru_cache(maxsize=8192)
def _parse_cached(text: str) -> tuple[Command, ...]:
    return tuple(_parse(text, 0, False))


def clear_shell_cache() -> None:
    """Forget the parsed shell texts kept by `parse_shell` (at most 8,192 of them)."""
    _parse_cached.cache_clear()


def parse_shell(text: object) -> list[Command]:
    """`shell(x)`: the simple commands of a shell string, in source order (outer before the
    commands nested in it). Raises EvalError for what is not a string or not valid shell."""
    if not isinstance(text, str):
        raise EvalError("shell() takes a string")
    if "\x00" in text:
        raise EvalError("the command contains a NUL byte")
    return list(_parse_cached(text))


# --- urls -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UrlValue:
    """A parsed absolute URL. `host` is lowercased, IDNA-encoded (UTS #46), without a trailing
    dot; `port` is the explicit port or None; `userinfo` is what came before an `@` (never part
    of the host)."""

    scheme: str
    host: str
    port: int | None
    path: str
    query: str
    fragment: str
    userinfo: str | None
    text: str

    KIND = "url"
    FIELDS = {
        "scheme": "string", "host": "string", "port": "any", "path": "string", "query": "string",
        "fragment": "string", "userinfo": "any", "text": "string",
    }

    def __str__(self) -> str:
        return self.text


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def parse_url(text: object) -> UrlValue:
    """`url(x)`. Raises EvalError for what is not an absolute URL with a host, and for spellings
    that URL parsers disagree on (backslashes, whitespace, control characters)."""
    if not isinstance(text, str):
        raise EvalError("url() takes a string")
    if any(ch in text for ch in "\\ \t\r\n") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise EvalError(f"the URL {text!r} holds characters URL parsers read differently")
    m = _SCHEME.match(text)
    if not m:
        raise EvalError(f"{text!r} is not an absolute URL (no scheme)")
    scheme = m.group(1).lower()
    rest = text[m.end() :]
    if not rest.startswith("//"):
        raise EvalError(f"{text!r} has no host")
    rest = rest[2:]
    end = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0] or [len(rest)])
    authority, tail = rest[:end], rest[end:]
    userinfo = None
    if "@" in authority:
        userinfo, authority = authority.rsplit("@", 1)
    port = None
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise EvalError(f"{text!r} has an unclosed IPv6 address")
        host, after = _ipv6(authority[1:close], text), authority[close + 1 :]
        if after:
            if not after.startswith(":"):
                raise EvalError(f"{text!r} has a malformed host")
            port = _port(after[1:], text)
    else:
        host, sep, port_text = authority.partition(":")
        if sep:
            port = _port(port_text, text)
        host = _host(host, text)
    if not host:
        raise EvalError(f"{text!r} has no host")
    path, _, fragment = tail.partition("#")
    path, _, query = path.partition("?")
    return UrlValue(scheme, host, port, path or "/", query, fragment, userinfo, text)


def _port(text: str, url: str) -> int | None:
    if text == "":
        return None
    if not text.isdigit() or int(text) > 65535:
        raise EvalError(f"{url!r} has an invalid port")
    return int(text)


def _host(host: str, url: str) -> str:
    """A host as fetchers resolve it: UTS #46 mapping first (full-width letters and the dots 。．｡
    become ASCII), then the trailing dot removed and the case folded, then an IPv4 address in any
    spelling the WHATWG URL standard accepts (`2852039166`, `0xa9fea9fe`, `169.254.43518`,
    `127.1`) written as four decimal numbers, else the IDNA (punycode) form."""
    import idna

    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False) if not host.isascii() else host
    except (idna.IDNAError, UnicodeError) as exc:
        raise EvalError(f"{url!r} has a host that is not a valid domain name: {exc}") from None
    mapped = mapped.rstrip(".").lower()
    if not mapped:
        return ""
    last = mapped.rsplit(".", 1)[-1]
    if re.fullmatch(r"[0-9]+|0x[0-9a-f]*", last):  # the WHATWG "ends in a number" test
        return _ipv4(mapped, url)
    try:
        return idna.encode(mapped, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise EvalError(f"{url!r} has a host that is not a valid domain name: {exc}") from None


def _ipv4(host: str, url: str) -> str:
    """The WHATWG URL standard's IPv4 parser: one to four parts, each decimal, octal (a leading 0)
    or hexadecimal (0x); the last part fills the bytes the others leave. Raises EvalError where
    that parser fails (the URL is then invalid for a browser, and unreadable here)."""
    numbers = []
    for part in host.split("."):
        try:
            if part[:2] == "0x":
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part[0] == "0":
                numbers.append(int(part[1:], 8))
            else:
                numbers.append(int(part, 10))
        except ValueError:
            raise EvalError(f"{url!r} has a host that is neither a domain name nor an IPv4 address") from None
    if len(numbers) > 4 or any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise EvalError(f"{url!r} has an IPv4 address out of range")
    value = numbers[-1]
    for k, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - k)
    return ".".join(str(value >> shift & 255) for shift in (24, 16, 8, 0))


def _ipv6(text: str, url: str) -> str:
    """An IPv6 literal in its compressed form; one that maps an IPv4 address (`::ffff:a9fe:a9fe`)
    as that address (`169.254.169.254`), which is where a dual-stack client connects."""
    import ipaddress

    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise EvalError(f"{url!r} has a malformed IPv6 address") from None
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else address.compressed
