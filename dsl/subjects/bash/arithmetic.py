"""Arithmetic (bash(1), ARITHMETIC EVALUATION): `$(( ))`, `(( ))`, the three clauses of a C-style
`for`, and the offset and length of `${x:OFFSET:LENGTH}`.

A mixin of _Parser. What it builds is flat: the arithmetic's atoms (numbers, names, subscripts,
expansions, substitutions, quoted strings) and operators, in order, as children of the
arithmetic node, where tree-sitter-bash builds a tree of binary, unary, ternary and postfix
expressions whose shape follows its own precedence table. dsl.subjects.shell reads arithmetic as
text (is it only numbers and operators?) and for the substitutions and expansions inside it,
which both trees hold alike; the differential tests compare that (tests/test_bash_parser.py).
Anything else inside the parentheses (a character bash's arithmetic has no use for) is refused.
"""

from __future__ import annotations

import re

from dsl.subjects.bash.lexer import NAME_START
from dsl.subjects.bash.node import Node
from dsl.subjects.bash.words import leaf, node

# operators of bash's arithmetic, longest first
_OPERATORS = re.compile(r"\*\*=|<<=|>>=|&&|\|\||==|!=|<=|>=|\+=|-=|\*=|/=|%=|&=|\^=|\|=|<<|>>|\+\+|--|\*\*|[-+*/%<>=!~&|^?:,]")
_ATOM = re.compile(r"[0-9][0-9A-Za-z_#@]*+|[A-Za-z_][A-Za-z0-9_]*+")
_BLANKS = re.compile(r"[ \t\n]*+")


class Arithmetic:
    def arithmetic_expansion(self) -> Node:
        """`$((` ... `))` at the position."""
        kids = [leaf("$((", self.i, self.i + 3)]
        self.i += 3
        return self.arithmetic_body("arithmetic_expansion", kids)

    def arithmetic_command(self) -> Node:
        """`((` ... `))` as a statement: tree-sitter-bash's compound_statement starting `((`."""
        kids = [leaf("((", self.i, self.i + 2)]
        self.i += 2
        return self.arithmetic_body("compound_statement", kids)

    def arithmetic_body(self, kind: str, kids: list) -> Node:
        self.enter()
        self.arithmetic_atoms(kids, stops="")
        if not self.s.startswith("))", self.i):
            self.fail("arithmetic this parser does not read (no `))` where expected)")
        if len(kids) == 1:
            self.fail("empty arithmetic")
        kids.append(leaf("))", self.i, self.i + 2))
        self.i += 2
        self.depth -= 1
        return node(kind, kids)

    def arithmetic_atoms(self, kids: list, stops: str) -> None:
        """Atoms and operators up to `))` (or a `)` closing no parenthesis) or, at the top level,
        a character of `stops` (`;` in a C-style for, `:` and `}` in a substring expansion)."""
        s, n = self.s, self.n
        open_parens = 0
        while True:
            self.i = _BLANKS.match(s, self.i).end()
            i = self.i
            if i >= n:
                self.fail("an unterminated arithmetic expression")
            c = s[i]
            if c == ")":
                if open_parens == 0:
                    return
                open_parens -= 1
                self.depth -= 1
                kids.append(leaf(")", i, i + 1))
                self.i = i + 1
                continue
            if open_parens == 0 and c in stops:
                return
            self.count_word()  # each atom and operator (see Words.count_word)
            if c == "(":
                open_parens += 1
                self.enter()
                kids.append(leaf("(", i, i + 1))
                self.i = i + 1
                continue
            m = _ATOM.match(s, i)
            if m is not None:
                end = m.end()
                if c in NAME_START:
                    if s.startswith("[", end):
                        kids.append(self.subscript(end))
                        continue
                    kids.append(Node("variable_name", i, end))
                else:
                    kids.append(Node("number", i, end))
                self.i = end
                continue
            if c == "$":
                if s.startswith("'", i + 1) or s.startswith('"', i + 1) or s.startswith("[", i + 1):
                    self.fail("a `$` this parser does not read in arithmetic")
                if s.startswith("((", i + 1):  # tree-sitter-bash reads it as `$(` and a subshell
                    self.fail("arithmetic expansion inside arithmetic")
                kids.append(self.dollar("arithmetic"))
            elif c == '"':
                kids.append(self.string())
            elif c == "'":
                kids.append(self.raw_string())
            elif c == "`":
                if self.backticks:
                    self.fail("backquotes inside arithmetic inside backquotes")
                kids.append(self.backtick())
            else:
                m = _OPERATORS.match(s, i)
                if m is None:
                    self.fail("a character this parser does not read in arithmetic")
                kids.append(leaf(m.group(), i, m.end()))
                self.i = m.end()
