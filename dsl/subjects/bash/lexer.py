"""The tokens of bash text as tree-sitter-bash 0.25.1 cuts them, as compiled patterns and sets of
characters (dsl.subjects.bash.parser matches them at its position).

Every pattern is a run of one class of characters, or a sequence of runs whose classes are
disjoint, with possessive repeats (`*+`, `++`, Python 3.11): a match never backtracks, so each
takes time linear in what it consumes. The parser never matches the same text twice but for a
bounded look-ahead (a keyword, an assignment's name), so the whole parse is linear.

Sources: bash(1) DEFINITIONS (metacharacters, blanks), QUOTING, PARAMETERS; POSIX XCU 2.3 Token
Recognition; tree-sitter-bash's grammar.js (its `word` token: any character but its
SPECIAL_CHARACTERS, `\\` quoting any non-blank, `\\ ` inside a word; `#` starting a comment).
"""

from __future__ import annotations

import re

# tree-sitter-bash's blanks, which end a word (bash's are only space and tab: a CR, VT or FF is
# refused where it would end one), then with newlines
BLANK = frozenset(" \t\r\v\f")
SPACE = BLANK | {"\n"}
SPECIAL_WORD = frozenset("{}[]")  # each a word of its own (tree-sitter-bash's _special_character)
NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
NAME_CHAR = NAME_START | frozenset("0123456789")
DIGITS = frozenset("0123456789")
SPECIAL_PARAMETERS = frozenset("*@?!#-$")  # bash(1), Special Parameters (and `0`, `_`)
# what may follow a word that ends there (a blank, an operator, the end): see parser._Parser.arguments
WORD_END = frozenset(" \t\r\v\f\n;&|)<>")

# Blanks between tokens: bash's, space and tab (bash(1), DEFINITIONS). tree-sitter-bash also
# skips CR, VT, FF and a backslash before a blank, which bash reads as (quoted) word characters;
# this parser reads them nowhere but inside quotes, comments and heredoc bodies (it refuses them
# elsewhere, with a message naming them: parser._Parser.fail).
BLANKS = re.compile(r"[ \t]*+")
BLANKS_NEWLINES = re.compile(r"[ \t\n]*+")
BLANK_START = frozenset(" \t")  # a character BLANKS may consume first
BLANK_NEWLINE_START = frozenset(" \t\n")

_SPECIAL = r"'\"<>{}\[\]()`$|&;\\ \t\n\r\v\f"
# tree-sitter-bash's `word` token: not starting with `#` or `\ `; a backslash quotes any character
# but a blank (a backslash before a space continues a word, before another blank it is refused)
WORD = re.compile(rf"(?:[^{_SPECIAL}#]|\\[^ \t\n\r\v\f])(?:[^{_SPECIAL}]|\\[^ \t\n\r\v\f]|\\ )*+")
# the most words: WORD without a backslash (a simpler pattern, about twice as fast to match); where
# it stops at a backslash, WORD is matched instead
PLAIN = re.compile(rf"[^{_SPECIAL}#][^{_SPECIAL}]*+")
# the same where a `#` may start it (inside a concatenation: `$x#y`)
WORD_HASH = re.compile(rf"(?:[^{_SPECIAL}]|\\[^ \t\n\r\v\f])(?:[^{_SPECIAL}]|\\[^ \t\n\r\v\f]|\\ )*+")
# tree-sitter-bash's number token: -?(0x)?[0-9]+(#[0-9A-Za-z@_]+)?
NUMBER = re.compile(r"-?(?:0x)?[0-9]++(?:#[0-9A-Za-z@_]++)?+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+")
# `NAME=` / `NAME+=` (bash(1), PARAMETERS); `NAME[` starts a subscript
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+(?:\+?=|\[)")
# a double-quoted string's literal text: up to what ends it or starts an expansion, a newline or
# a CR (tree-sitter-bash cuts its string_content there), a backslash quoting any one character
STRING_TEXT = re.compile(r"(?:[^\"`$\\\n\r]|\\[^\n\r])*+")
# a heredoc delimiter's unquoted characters (what this parser reads of one)
HEREDOC_WORD = re.compile(r"(?:[A-Za-z0-9_\-.@%+:,/!^~]|\\[^ \t\n\r\v\f])*+")

# reserved words (bash(1), RESERVED WORDS) that cannot start a simple command here
RESERVED = frozenset({"if", "then", "elif", "else", "fi", "do", "done", "case", "esac", "while", "until", "for",
                      "select", "function", "in", "{", "}", "[", "[[", "]]", "!"})
DECLARATIONS = frozenset({"declare", "typeset", "export", "readonly", "local"})
UNSETS = frozenset({"unset", "unsetenv"})
# redirection operators, longest first (bash(1), REDIRECTION)
REDIRECT_OPERATORS = ("&>>", ">&-", "<&-", "&>", ">>", "<&", ">&", ">|", "<", ">")
