"""Words: what dsl.subjects.bash.parser reads where bash expects a word (bash(1), QUOTING,
PARAMETERS, EXPANSION; POSIX XCU 2.3, 2.6): unquoted text, '...', "...", $'...', $"...", $NAME,
${...} with its operators, $(...), `...`, $((...)), <(...), >(...), {N..M}, and the special
characters `{ } [ ]` that tree-sitter-bash makes words of their own.

A mixin of _Parser (its state: `s`, `n`, `i`, `backticks`, the limits). Each method reads one
construct starting at `self.i`, leaves `self.i` after it and returns its node, or raises
BashSyntaxError through `self.fail`.

The nodes are tree-sitter-bash 0.25.1's, with one deliberate difference: inside `${...}` bash's
own reading is built where tree-sitter-bash's lexer differs from it. tree-sitter-bash reads the
pattern of `${x%PATTERN}`, `${x,,PATTERN}` and the like as one `regex` token, substitutions and
all (`${x%$(rm -rf /)}` held no command for it while bash runs `rm`); here the pattern's
substitutions, expansions and quotes are nodes like anywhere else. The differential tests
compare what dsl.subjects.shell reads from both trees there (tests/test_bash_parser.py).
"""

from __future__ import annotations

import re

from dsl.subjects.bash.lexer import (
    DIGITS, NAME, NAME_CHAR, NAME_START, NUMBER, PLAIN, SPACE, SPECIAL_PARAMETERS, SPECIAL_WORD, STRING_TEXT, WORD, WORD_END,
    WORD_HASH,
)
from dsl.subjects.bash.node import Node

_NUMBER_START = frozenset("-0123456789")
_EXPANSION_VALUE_OPERATORS = (":-", ":=", ":+", ":?", "-", "=", "+", "?")
_EXPANSION_PATTERN_OPERATORS = ("##", "#", "%%", "%", ",,", ",", "^^", "^")
_EXPANSION_REPLACE_OPERATORS = ("//", "/#", "/%", "/")
_TRANSFORMS = frozenset("UuLQEPAKak")  # bash(1), Parameter transformation: ${x@OP}
_BACKTICK_PAIR = re.compile(r"[ \t\n\r\v\f]*+`")
# the text of an old-style substitution and the backquote that ends it: bash ends it at the first
# backquote no backslash quotes, whatever quotes, comments or `$(` come before (bash 5.2 parse.y,
# parse_matched_pair with open == close == '`': nothing nests in it)
_BACKTICK_TEXT = re.compile(r"(?:[^`\\]|\\.)*+`", re.S)
# an unquoted heredoc body's text up to a `$` or a backquote: a backslash quotes the character
# after it (bash(1), Here Documents: it quotes \\ $ ` and newline; before another character both
# are text, so reading the pair at once is the same)
_HEREDOC_TEXT = re.compile(r"(?:[^`$\\]|\\[\s\S])*+")
# a double-quoted string of text alone on one line (no expansion, substitution or escaped newline)
SIMPLE_STRING = re.compile(r'"(?:[^"`$\\\n\r]|\\[^\n\r])++"')


# Runs of plain text read at once, by one regex match. In the word of `${x:-WORD}` (by the
# characters that end it, and whether `<(` starts a process substitution there): anything but a
# quote, `$`, a backquote, a brace, a newline, CR, VT or FF, a backslash before one of these
# two or at the end, and the stop characters (a `<(`: not under procsub).
_EXPANSION_TEXT = {
    (stop, procsub): re.compile(r"(?:[^%s\"'$`\\{\n\r\v\f<>]|%s|\\[^\n\r])*+"
                                % (re.escape(stop), r"[<>](?!\()" if procsub else "[<>]"), re.DOTALL)
    for stop in ("}", "/}") for procsub in (False, True)
}
# In a subscript: anything but `]`, a quote, `$`, a backquote, a blank, a newline, an operator
# character, a bracket, a brace or a backslash.
_SUBSCRIPT_TEXT = re.compile(r"[^\]\"'$` \t\r\v\f\n\[;&|<>(){}\\]*+")


def leaf(kind: str, start: int, end: int, named: bool = False) -> Node:
    return Node(kind, start, end, named)


def node(kind: str, children: list, fields: list | None = None) -> Node:
    """A named node over `children` (its span is theirs), each child's parent set."""
    made = Node(kind, children[0].start_byte, children[-1].end_byte, True, children, fields)
    for child in children:
        child.parent = made
    return made


class Words:
    """Word-level reading (see the module docstring)."""

    # plain words

    def word_end(self, start: int, hash_first: bool = False) -> int:
        """The end of tree-sitter-bash's `word` token at `start` (start itself when none). A
        backslash that ends the text, or quotes a blank other than a space, is refused: bash and
        tree-sitter-bash read those differently."""
        s = self.s
        m = (WORD_HASH if hash_first else WORD).match(s, start)
        end = start if m is None else m.end()
        if end < self.n and s[end] == "\\":
            if end + 1 >= self.n:
                self.fail("a backslash ends the text", end)
            if s[end + 1] != " " or end != start:
                self.fail("a backslash before a blank inside a word", end)
        return end

    def count_word(self) -> None:
        """One more word, or part of a word (each part of a concatenation or of a double-quoted
        string, each atom of arithmetic, each comment): the work of reading a text grows with
        them, so they count towards the parser's `max_words` alike."""
        self.words += 1
        if self.words > self.max_words:
            self.too_many("words")

    def literal(self, context: str) -> Node:
        """One shell word at the position (a primary node, or a concatenation of them).
        `context`: "name" (a command's name), "argument", "value" (an assignment's), "destination"
        (a redirection's), "test" (inside [ ] or [[ ]]), "array" (an element), "case" (a case's
        word): where tree-sitter-bash builds a different tree for the same text."""
        self.words += 1
        if self.words > self.max_words:
            self.too_many("words")
        s, i, n = self.s, self.i, self.n
        m = PLAIN.match(s, i)
        if m is not None:  # most words: plain text up to a blank or an operator
            end = m.end()
            if end < n and s[end] == "\\":
                end = WORD.match(s, i).end()
            if end >= n or s[end] in WORD_END:
                self.i = end
                if s[i] in _NUMBER_START and NUMBER.fullmatch(s, i, end):
                    return Node("number", i, end)
                return Node("word", i, end)
        return self.compound_literal(context)

    def compound_literal(self, context: str) -> Node:
        s, n = self.s, self.n
        i = self.i
        if i < n and s[i] == '"':
            # a string standing alone (the common case): no concatenation to check
            m = SIMPLE_STRING.match(s, i)
            if m is not None:
                end = m.end()
                if (end >= n or s[end] in WORD_END) and s[i + 1 : end - 1].strip(" \t\v\f"):
                    self.i = end
                    return node("string", [Node('"', i, i + 1, False), Node("string_content", i + 1, end - 1),
                                           Node('"', end - 1, end, False)])
        parts: list = []
        while self.i < n:
            i = self.i
            c = s[i]
            if c in SPACE or c in ";&|)":
                break
            if c in "<>":
                if not s.startswith("(", i + 1) or context not in ("argument", "name") or parts:
                    break
                parts.append(self.substitution(c + "(", "process_substitution"))
                continue
            if c == "(":
                self.fail("a parenthesis inside a word")
            if c == "#" and not parts:
                break
            if parts:
                self.count_word()
            if c == '"':
                parts.append(self.string())
            elif c == "'":
                parts.append(self.raw_string())
            elif c == "$":
                if s.startswith('"', i + 1):
                    if not parts and context in ("name", "value", "destination"):
                        dollar = leaf("$", i, i + 1)
                        self.i = i + 1
                        parts.append(node("translated_string", [dollar, self.string()]))
                    elif parts:
                        parts.append(leaf("$", i, i + 1))
                        self.i = i + 1
                        parts.append(self.string())
                    else:
                        self.fail("a translated string where this parser does not read one")
                    continue
                parts.append(self.dollar("word"))
            elif c == "`":
                if self.backticks:
                    break
                parts.append(self.backtick())
            elif c in SPECIAL_WORD:
                if c == "{" and i + 1 < n and s[i + 1] in DIGITS:
                    brace = self.brace_expression()
                    if brace is not None:
                        parts.append(brace)
                        continue
                parts.append(Node("word", i, i + 1))
                self.i = i + 1
            else:
                if c == "\\" and parts and i + 1 < n and s[i + 1] not in "'\"\\":
                    # tree-sitter-bash starts a new word there (`'r'\\m`), bash does not
                    self.fail("a backslash right after a quoted part of a word")
                end = self.word_end(i, hash_first=bool(parts))
                if end == i:
                    self.fail("a character this parser does not read in a word")
                kind = "number" if c in _NUMBER_START and NUMBER.fullmatch(s, i, end) else "word"
                parts.append(Node(kind, i, end))
                self.i = end
        if not parts:
            self.fail("a word is missing")
        first = parts[0]
        if all(p.type == "word" and p.end_byte == p.start_byte + 1 and s[p.start_byte] in SPECIAL_WORD for p in parts):
            # tree-sitter-bash joins `{ }` across the blank into one word: refused
            k = self.i
            while k < n and s[k] in " \t":
                k += 1
            if k < n and s[k] in SPECIAL_WORD:
                self.fail("brackets or braces standing alone as words")
        if len(parts) == 1:
            if first.type == "$" and context != "argument":
                self.fail("a lone `$` where this parser does not read one")
            return first
        for k, part in enumerate(parts):
            kind = part.type
            if kind == "$" and k + 1 < len(parts) and parts[k + 1].type != "string":
                self.fail("a `$` inside a word")
            if kind == "command_substitution" and s[part.start_byte] == "`":
                # tree-sitter-bash starts a new word at a backquote after a string ("a"`b`)
                self.fail("backquotes inside a word")
        return node("concatenation", parts)

    def raw_string(self) -> Node:
        i = self.i
        end = self.s.find("'", i + 1)
        if end < 0:
            self.fail("an unterminated single quote")
        self.i = end + 1
        return Node("raw_string", i, end + 1)

    def brace_expression(self):
        """`{N..M}` (bash(1), Brace Expansion: a sequence), or None when the braces are not one."""
        s, i = self.s, self.i
        j = i + 1
        while j < self.n and s[j] in DIGITS:
            j += 1
        if not s.startswith("..", j):
            return None
        k = j + 2
        while k < self.n and s[k] in DIGITS:
            k += 1
        if k == j + 2 or not s.startswith("}", k):
            self.fail("a brace expression this parser does not read")
        self.i = k + 1
        return node("brace_expression", [leaf("{", i, i + 1), Node("number", i + 1, j), leaf("..", j, j + 2),
                                         Node("number", j + 2, k), leaf("}", k, k + 1)])

    # double quotes

    def string(self) -> Node:
        """A double-quoted string (bash(1), QUOTING) with its pieces as tree-sitter-bash 0.25 gives
        them: the content is cut at each newline and carriage return, which no piece holds
        (shell._Walker.word puts them back), and content that is only blanks belongs to no piece:
        the token after it starts where the blanks do."""
        self.enter()
        self.quoted += 1
        s, n = self.s, self.n
        start = self.i
        kids = [leaf('"', start, start + 1)]
        self.i = start + 1
        blank_from = -1  # where blanks that no content node holds began
        while True:
            i = self.i
            if i >= n:
                self.fail("an unterminated double quote", start)
            c = s[i]
            if c == '"':
                piece = leaf('"', i, i + 1)
                self.i = i + 1
            elif c == "$":
                self.count_word()
                nxt = s[i + 1] if i + 1 < n else ""
                if nxt in NAME_CHAR or nxt in SPECIAL_PARAMETERS or nxt in ("{", "("):
                    piece = self.dollar("string")
                elif nxt == "" or nxt in SPACE:
                    self.fail("a `$` before a blank in a string")
                else:
                    piece = leaf("$", i, i + 1)
                    self.i = i + 1
            elif c == "`":
                self.count_word()
                if self.backticks:
                    self.fail("a backquote inside a string inside backquotes")
                piece = self.backtick()
            else:
                self.count_word()
                j = STRING_TEXT.match(s, i).end()
                if j < n and s[j] == "\\":
                    self.fail("a backslash before a newline in a string", j)
                if s[i:j].strip(" \t\v\f"):
                    kids.append(Node("string_content", i, j))
                    blank_from = -1
                elif j > i and blank_from < 0:
                    blank_from = i
                if j < n and s[j] in "\n\r":
                    j += 1
                    blank_from = -1  # blanks then a newline: both skipped
                self.i = j
                continue
            if blank_from >= 0:
                piece.start_byte = blank_from
                if piece.children:
                    piece.children[0].start_byte = blank_from
                blank_from = -1
            kids.append(piece)
            if c == '"':
                break
        self.depth -= 1
        self.quoted -= 1
        return node("string", kids)

    def expanded_body(self) -> Node:
        """The whole text as the body of an unquoted heredoc, which bash expands like a
        double-quoted string where `"` and `'` are text (bash(1), Here Documents: parameter
        expansion, command substitution and arithmetic; a backslash quotes only \\ $ ` and
        newline): a `heredoc_body` node over the expansions and substitutions in it, in order
        (its text is not kept). Inside `$(...)` or backquotes the text is a command line again,
        with its own quotes (`$("rm" -rf /)` runs rm)."""
        s, n = self.s, self.n
        kids: list = []
        self.quoted += 1
        while True:
            i = _HEREDOC_TEXT.match(s, self.i).end()
            if i >= n:
                break
            self.i = i
            c = s[i]
            if c == "`":
                self.count_word()
                kids.append(self.backtick())
            elif c == "$" and i + 1 < n and (s[i + 1] in NAME_CHAR or s[i + 1] in SPECIAL_PARAMETERS or s[i + 1] in "{("):
                self.count_word()
                kids.append(self.dollar("string"))
            else:  # a `$` bash leaves as it is (`$"`, `$'`, `$.`), a backslash that ends the text
                self.i = i + 1
        self.quoted -= 1
        self.i = n
        made = Node("heredoc_body", 0, n, True, kids, None)
        for kid in kids:
            kid.parent = made
        return made

    # $

    def dollar(self, context: str) -> Node:
        """What starts with `$`: a parameter, `${...}`, `$(...)`, `$((...))`, `$'...'`, or a lone
        `$`. `context`: "word", "string", "arithmetic"."""
        s, i = self.s, self.i
        nxt = s[i + 1] if i + 1 < self.n else ""
        if nxt == "(":
            if s.startswith("((", i + 1):
                return self.arithmetic_expansion()
            return self.substitution("$(", "command_substitution")
        if nxt == "{":
            return self.expansion(context)
        if nxt == "'" and context == "word":
            j = s.find("'", i + 2)
            if j < 0:
                self.fail("an unterminated $'...'")
            if "\\" in s[i + 2 : j] and (s[j - 1] == "\\" or "\\\\" in s[i + 2 : j]):
                self.fail("a $'...' whose backslashes this parser does not read")
            self.i = j + 1
            return Node("ansi_c_string", i, j + 1)
        if nxt != "" and nxt in NAME_CHAR:
            j = i + 2
            while j < self.n and s[j] in NAME_CHAR:
                j += 1
            self.i = j
            kind = "special_variable_name" if j == i + 2 and nxt == "_" else "variable_name"
            return node("simple_expansion", [leaf("$", i, i + 1), Node(kind, i + 1, j)])
        if nxt != "" and nxt in SPECIAL_PARAMETERS:
            self.i = i + 2
            return node("simple_expansion", [leaf("$", i, i + 1), Node("special_variable_name", i + 1, i + 2)])
        if context == "word" and (nxt == "" or nxt in SPACE or nxt in ";&|)"):
            self.i = i + 1
            return leaf("$", i, i + 1)
        self.fail("a `$` this parser does not read")

    def expansion(self, context: str) -> Node:
        """`${...}` (bash(1), Parameter Expansion): `${` [`#` or `!`] a parameter (a name, digits,
        a special parameter, `NAME[INDEX]`), then nothing, or an operator and its word, pattern,
        replacement, offset or transformation, then `}`: the first `}` not quoted, escaped or
        inside a nested expansion or substitution."""
        self.enter()
        s, n = self.s, self.n
        start = self.i
        kids = [leaf("${", start, start + 2)]
        fields: list = [None]
        i = start + 2
        c = s[i] if i < n else ""
        if c in ("#", "!"):
            after = s[i + 1] if i + 1 < n else ""
            if after == "}":  # `${#}`, `${!}`: tree-sitter-bash's operator alone
                kids += [leaf(c, i, i + 1), leaf("}", i + 1, i + 2)]
                fields += ["operator", None]
                self.i = i + 2
                self.depth -= 1
                return node("expansion", kids, fields)
            if after == "" or after in "#}:" or (after in SPECIAL_PARAMETERS and c == "!") or after in SPACE:
                self.fail("a `${#...}` or `${!...}` this parser does not read", i)
            kids.append(leaf(c, i, i + 1))
            fields.append("operator")
            i += 1
            c = s[i]
        prefix = kids[-1].type if len(kids) == 2 else ""
        self.i = i
        if c != "" and c in NAME_START:
            end = NAME.match(s, i).end()
            if s.startswith("[", end):
                kids.append(self.subscript(end))
            else:
                kids.append(Node("variable_name", i, end))
                self.i = end
        elif c != "" and c in DIGITS:
            end = i
            while end < n and s[end] in DIGITS:
                end += 1
            kids.append(Node("variable_name", i, end))
            self.i = end
        elif c != "" and c in "@*#?-$!0_":
            kids.append(Node("special_variable_name", i, i + 1))
            self.i = i + 1
        else:
            self.fail("a `${...}` without a parameter this parser reads", i)
        fields.append(None)
        i = self.i
        c = s[i] if i < n else ""
        if c == "}":
            pass
        elif prefix == "!" and c in ("*", "@") and s.startswith("}", i + 1):  # `${!x*}`: names
            kids.append(leaf(c, i, i + 1))
            fields.append("operator")
            self.i = i + 1
        elif prefix:
            self.fail("an operator after `${#...}` or `${!...}`", i)
        elif c == "@" and i + 1 < n and s[i + 1] in _TRANSFORMS and s.startswith("}", i + 2):
            kids += [leaf("@", i, i + 1), leaf(s[i + 1], i + 1, i + 2)]
            fields += ["operator", "operator"]
            self.i = i + 2
        elif c == ":" and not (i + 1 < n and s[i + 1] in "-=+?"):
            self.expansion_offset(kids, fields)
        else:
            for op in _EXPANSION_VALUE_OPERATORS:
                if s.startswith(op, i):
                    kids.append(leaf(op, i, i + len(op)))
                    fields.append("operator")
                    self.i = i + len(op)
                    self.expansion_word(kids, fields, context, "word", stop="}")
                    break
            else:
                for op in _EXPANSION_PATTERN_OPERATORS:
                    if s.startswith(op, i):
                        kids.append(leaf(op, i, i + len(op)))
                        fields.append("operator")
                        self.i = i + len(op)
                        self.expansion_word(kids, fields, context, "regex", stop="}")
                        break
                else:
                    for op in _EXPANSION_REPLACE_OPERATORS:
                        if s.startswith(op, i):
                            break
                    else:
                        self.fail("a `${...}` operator this parser does not read", i)
                    kids.append(leaf(op, i, i + len(op)))
                    fields.append("operator")
                    self.i = i + len(op)
                    self.expansion_word(kids, fields, context, "regex", stop="/}", empty=True)
                    if s.startswith("/", self.i):
                        kids.append(leaf("/", self.i, self.i + 1))
                        fields.append("operator")
                        self.i += 1
                        self.expansion_word(kids, fields, context, "word", stop="}")
        if not s.startswith("}", self.i):
            self.fail("a `${...}` this parser does not read to its end")
        kids.append(leaf("}", self.i, self.i + 1))
        fields.append(None)
        self.i += 1
        self.depth -= 1
        return node("expansion", kids, fields)

    def expansion_offset(self, kids: list, fields: list) -> None:
        """`${x:OFFSET}` / `${x:OFFSET:LENGTH}`: arithmetic (bash(1), Substring Expansion)."""
        for _ in range(2):
            kids.append(leaf(":", self.i, self.i + 1))
            fields.append("operator")
            self.i += 1
            before = len(kids)
            self.arithmetic_atoms(kids, stops=":}")
            fields += [None] * (len(kids) - before)
            if not self.s.startswith(":", self.i):
                return

    def expansion_word(self, kids: list, fields: list, context: str, text_kind: str, stop: str,
                       empty: bool = False) -> None:
        """The word after an operator of `${...}`, up to a character of `stop` that nothing
        quotes: one node, or a concatenation of its pieces (text, quotes, expansions,
        substitutions). `text_kind`: what a piece of plain text is ("word", or "regex" for a
        pattern, as tree-sitter-bash names it). `empty`: an empty word is a node of its own."""
        s, n = self.s, self.n
        parts: list = []
        start = self.i
        # bash 5.2 runs a process substitution in the word of an unquoted `${x:-WORD}` (and the
        # other value operators) and in a replacement `${x/P/WORD}`, not in a pattern
        procsub = text_kind == "word" and not self.quoted
        while True:
            i = self.i
            if i >= n:
                self.fail("an unterminated `${...}`", start)
            c = s[i]
            if c in stop:
                break
            self.count_word()
            if c == '"':
                parts.append(self.string())
            elif c == "'":
                if context == "string":
                    # inside double quotes bash reads a `'` in `${x:-'...'}` as itself or as a
                    # quote depending on the operator and its version: refused
                    self.fail("a single quote inside `${...}` inside double quotes")
                parts.append(self.raw_string())
            elif c == "$":
                if s.startswith('"', i + 1) or s.startswith("'", i + 1):
                    self.fail("a quoted string with `$` inside `${...}`")
                parts.append(self.dollar("word"))
            elif c == "`":
                if self.backticks:
                    self.fail("backquotes inside `${...}` inside backquotes")
                parts.append(self.backtick())
            elif procsub and c in "<>" and s.startswith("(", i + 1):
                parts.append(self.substitution(c + "(", "process_substitution"))
            else:
                run = _EXPANSION_TEXT[stop, procsub]
                j = i
                while True:  # runs of plain text (and escaped pairs) read at once
                    j = run.match(s, j).end()
                    if j >= n or s[j] in stop or s[j] in "\"'$`":
                        break
                    if s[j] in "<>":  # `<(` under procsub: a process substitution starts
                        if j > i:
                            break
                        j += 1
                    elif s[j] == "\\":  # before a newline or CR, or at the end
                        if j + 1 >= n:
                            self.fail("an unterminated `${...}`", start)
                        self.fail("a backslash before a newline inside `${...}`", j + 1)
                    else:
                        self.fail("a brace, a newline, a CR, VT or FF inside `${...}`'s word", j)
                parts.append(Node(text_kind, i, j))
                self.i = j
        if not parts:
            if empty:
                kids.append(Node(text_kind, start, start))
                fields.append(None)
            return
        kids.append(parts[0] if len(parts) == 1 else node("concatenation", parts))
        fields.append(None)

    def subscript(self, name_end: int) -> Node:
        """`NAME[INDEX]` at the position, `[` at name_end: the index up to the matching `]`
        (bash(1), Arrays), one node (a word, a number, an expansion, ...) or a concatenation."""
        self.enter()
        s, n = self.s, self.n
        name = Node("variable_name", self.i, name_end)
        kids = [name, leaf("[", name_end, name_end + 1)]
        fields = ["name", None]
        self.i = name_end + 1
        parts: list = []
        while True:
            i = self.i
            if i >= n:
                self.fail("an unterminated subscript", name_end)
            c = s[i]
            if c == "]":
                break
            self.count_word()
            if c == '"':
                parts.append(self.string())
            elif c == "'":
                parts.append(self.raw_string())
            elif c == "$":
                parts.append(self.dollar("arithmetic"))
            elif c == "`":
                if self.backticks:
                    self.fail("backquotes inside a subscript inside backquotes")
                parts.append(self.backtick())
            else:
                j = _SUBSCRIPT_TEXT.match(s, i).end()
                if j < n and s[j] not in "]\"'$`":  # a blank or an operator character
                    self.fail("a subscript this parser does not read", j)
                kind = "number" if NUMBER.fullmatch(s, i, j) else "word"
                parts.append(Node(kind, i, j))
                self.i = j
        if not parts:
            self.fail("an empty subscript", name_end)
        kids.append(parts[0] if len(parts) == 1 else node("concatenation", parts))
        fields.append("index")
        kids.append(leaf("]", self.i, self.i + 1))
        fields.append(None)
        self.i += 1
        self.depth -= 1
        return node("subscript", kids, fields)

    # substitutions

    def substitution(self, opener: str, kind: str) -> Node:
        """`$(...)`, `<(...)`, `>(...)`: statements up to the closing parenthesis."""
        start = self.i
        kids = [leaf(opener, start, start + len(opener))]
        fields: list = [None]
        self.i = start + len(opener)
        saved, self.backticks = self.backticks, False
        line, self.heredoc_line = self.heredoc_line, False
        quoted, self.quoted = self.quoted, 0  # a new command line: its `${x:-<(...)}` runs
        if not self.statements(kids, fields, stops=(")",), terminated=False):
            self.fail("an empty substitution")
        self.backticks, self.heredoc_line, self.quoted = saved, line, quoted
        if not self.s.startswith(")", self.i):
            self.fail("expected ')'")
        kids.append(leaf(")", self.i, self.i + 1))
        fields.append(None)
        self.i += 1
        return node(kind, kids, fields)

    def backtick(self) -> Node:
        """`` `...` ``: statements up to the closing backquote, which must be the first backquote no
        backslash quotes (bash reads no quote, comment or substitution inside: `` `: #` `` ends at
        its second backquote, `` `echo '`' `` at its second). A text whose statements run past it
        (a `#`, a quote or a `$(...)` holding a backquote) is refused, and so is a backquote inside
        a substitution inside backquotes (its opening backquote ends the outer one)."""
        if self.backticks:
            self.fail("backquotes inside backquotes")
        if self.backtick_open:
            self.fail("backquotes inside a substitution inside backquotes")
        start = self.i
        m = _BACKTICK_TEXT.match(self.s, start + 1)
        if m is None:
            self.fail("an unterminated backquote", start)
        close = m.end() - 1
        kids = [leaf("`", start, start + 1)]
        fields: list = [None]
        self.i = start + 1
        self.backticks = True
        self.backtick_open = True
        quoted, self.quoted = self.quoted, 0  # a new command line: its `${x:-<(...)}` runs
        if not self.statements(kids, fields, stops=("`",), terminated=False):
            self.fail("empty backquotes")
        self.backticks = self.backtick_open = False
        self.quoted = quoted
        if self.i != close:
            # bash's substitution ends at `close`: a comment, a quote or a substitution read here
            # ran past it (or ended before it)
            self.fail("a backquote inside a comment, a quote or a substitution inside backquotes (bash ends "
                      "the substitution there)", close)
        if not self.s.startswith("`", self.i):
            self.fail("expected '`'")
        kids.append(leaf("`", self.i, self.i + 1))
        fields.append(None)
        self.i += 1
        if _BACKTICK_PAIR.match(self.s, self.i):
            # tree-sitter-bash reads "`", blanks and "`" as one token and both substitutions as
            # one (`a` `b` runs a``b to it, a and b to bash): refused
            self.fail("a backquoted substitution right after another")
        return node("command_substitution", kids, fields)
