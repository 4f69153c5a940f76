"""How flags are named (FLAG_ALIASES, split_flags), the reserved words, and `find -exec`. The
programs that run other programs (wrappers, shells, interpreters, xargs, watch) and their options
are tables in dsl.subjects.wrappers, read by dsl.subjects.getopt."""

from __future__ import annotations

from dsl.subjects.command import _Word
from dsl.subjects.options import paths, short_letters, split_words
from dsl.subjects.wrappers import SHELLS, WRAPPERS

__all__ = ["SHELLS", "WRAPPERS", "FLAG_ALIASES", "SINGLE_DASH_LONG", "split_flags", "split_command_words"]

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
            for ch in dict.fromkeys(short_letters(program, word)):  # each letter once (a set is made)
                flags |= names(ch)
    return tuple(sorted(flags)), tuple(args), tuple(v for _, v in values), paths(program, args, values, options)
