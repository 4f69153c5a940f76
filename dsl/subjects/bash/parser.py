"""A hand-written recursive-descent parser of the bash that shell() reads, in time linear in the text.

It builds the tree tree-sitter-bash 0.25.1 builds (the same node types, fields and byte spans, see
dsl.subjects.bash.node) for the constructs it knows, and raises BashSyntaxError for everything else:
a text it does not know how to read the way both bash and tree-sitter-bash read it is refused, never
read differently (dsl.subjects.shell turns the refusal into an EvalError: it fails closed).

The rules followed are bash(1) (SHELL GRAMMAR, QUOTING, PARAMETERS, EXPANSION, REDIRECTION) and POSIX
Shell Command Language (XCU 2.3 Token Recognition, 2.7 Redirection, 2.9 Shell Commands, 2.10 Shell
Grammar), restricted to the readings tree-sitter-bash shares:

- statements: simple commands, pipelines (`|`, `|&`), lists (`&&`, `||`), terminators (`;`, `&`,
  newline), `!`, `( )`, `{ }`, `if`, `while`/`until`, `for NAME [in WORDS]`, function definitions,
  `[ ]` and `[[ ]]` holding one unary or binary test, `export`/`declare`/`local`/... and `unset`;
- words: unquoted words (backslash escapes), numbers, `{ } [ ]` as words of their own, "...",
  '...', $'...', $"...", $NAME and $SPECIAL, ${NAME}, $(...), `...`, <(...), >(...), {N..M};
- redirections: [N]< > >> &> &>> <& >& >| >&- <&-, here-strings `<<<`, here-documents `<<` / `<<-`
  (one per line, delimiter a plain, quoted or backslashed name).

Refused (BashSyntaxError): `case`, C-style `for`, `select`, arithmetic `$(( ))` / `(( ))`, arrays and
subscripts, `${...}` other than `${NAME}`, `=~` / `==` arguments, comments other than between
statements, and every text tree-sitter-bash would read with an error. Past MAX_NESTING levels of
nesting, MAX_COMMANDS simple commands or MAX_WORDS words the text is refused too: the work of
reading the commands afterwards grows with them (see docs/policy-language.md, "Limits").

Linear time: every function consumes the text left to right and never goes back except to look a
bounded number of characters ahead; the only scan that may look further (the end line of a
heredoc) moves the position past what it scanned. No regular expression used can backtrack.
"""

from __future__ import annotations

from dsl.subjects.bash.node import Node

MAX_NESTING = 48  # levels of nested statements and substitutions
MAX_COMMANDS = 256  # simple commands (and declaration/unset commands) of one text
MAX_WORDS = 4096  # words (command names, arguments, assignment values, destinations) of one text


class BashSyntaxError(ValueError):
    """The text is not read by this parser: `offset` is the byte where it stopped."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


_BLANK = frozenset(" \t\r\v\f")  # tree-sitter-bash's blanks (bash's are only space and tab: shell._check_blanks)
_SPACE = _BLANK | {"\n"}
# tree-sitter-bash's SPECIAL_CHARACTERS: what ends an unquoted word
_WORD_STOP = frozenset("'\"<>{}[]()`$|&;") | _SPACE
_SPECIAL_WORD = frozenset("{}[]")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHAR = _NAME_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_SPECIAL_PARAMETERS = frozenset("*@?!#-$")
_DECLARATIONS = frozenset({"declare", "typeset", "export", "readonly", "local"})
_UNSETS = frozenset({"unset", "unsetenv"})
# reserved words (bash(1), RESERVED WORDS) this parser does not read, or that cannot start a command
_REFUSED_WORDS = frozenset({"case", "select", "coproc", "esac", "then", "elif", "else", "fi", "do", "done", "in",
                            "}", "]]", "time"})
_REDIRECT_OPERATORS = ("&>>", ">&-", "<&-", "&>", ">>", "<&", ">&", ">|", "<", ">")  # longest first
# tree-sitter-bash's number token: -?(0x)?[0-9]+(#[0-9A-Za-z@_]+)?


def _is_number(text: str) -> bool:
    i = 1 if text.startswith("-") else 0
    if text.startswith("0x", i):
        i += 2
    j = i
    while j < len(text) and text[j] in _DIGITS:
        j += 1
    if j == i:
        return False
    if j == len(text):
        return True
    if text[j] != "#" or j + 1 == len(text):
        return False
    return all(c in _NAME_CHAR or c == "@" for c in text[j + 1 :])


def _leaf(kind: str, start: int, end: int, named: bool = False) -> Node:
    return Node(kind, start, end, named)


def _node(kind: str, children: list, fields: list | None = None, named: bool = True) -> Node:
    return Node(kind, children[0].start_byte, children[-1].end_byte, named, children, fields)


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.n = len(text)
        self.i = 0
        self.depth = 0
        self.commands = 0
        self.words = 0
        self.backticks = False  # inside `...`
        self.heredoc_line = False  # reading the rest of a heredoc's first line
        self.newline_end = -1  # the end of the newline that ended the last statement read, if one did

    # errors, limits

    def fail(self, why: str, at: int | None = None):
        raise BashSyntaxError(why, self.i if at is None else at)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(f"the text nests more than {MAX_NESTING} levels deep")

    def count_word(self) -> None:
        self.words += 1
        if self.words > MAX_WORDS:
            self.fail(f"the text has more than {MAX_WORDS:,} words")

    # characters

    def at(self, token: str) -> bool:
        return self.s.startswith(token, self.i)

    def char(self, offset: int = 0) -> str:
        k = self.i + offset
        return self.s[k] if k < self.n else "\0"  # NUL never reaches the parser (shell() refuses it)

    def blanks(self, newlines: bool = False) -> None:
        """Skip what tree-sitter-bash skips between tokens: blanks, a backslash before a blank
        (bash reads it as a quoted blank: shell._check_blanks refuses it), newlines if asked."""
        s, i, n = self.s, self.i, self.n
        while i < n:
            c = s[i]
            if c in _BLANK or (newlines and c == "\n"):
                i += 1
            elif c == "\\" and i + 1 < n and s[i + 1] in " \t\v\f\n":
                i += 2
            elif c == "\\" and s.startswith("\r\n", i + 1):
                i += 3
            else:
                break
        self.i = i

    def word_end(self, start: int, hash_first: bool = False) -> int:
        """The end of tree-sitter-bash's `word` token starting at `start` (start itself when none):
        characters but its special ones, a backslash with the character it quotes, `\\ ` inside."""
        s, n, j = self.s, self.n, start
        while j < n:
            c = s[j]
            if c == "\\":
                if j + 1 >= n:
                    self.fail("a backslash ends the text", j)
                nxt = s[j + 1]
                if nxt == " ":
                    if j == start:
                        break
                    j += 2
                elif nxt in _SPACE:
                    self.fail("a backslash before a blank inside a word", j)
                else:
                    j += 2
            elif c in _WORD_STOP or (c == "#" and j == start and not hash_first):
                break
            else:
                j += 1
        return j

    def keyword(self) -> str:
        """The unquoted word at the position if it could be a reserved word, else ""."""
        end = self.word_end(self.i)
        if end == self.i:
            # `{`, `}`, `[`, `[[`, `]]`: special characters of their own
            for token in ("[[", "]]", "{", "}", "[", "]"):
                if self.at(token):
                    end = self.i + len(token)
                    break
            else:
                return ""
        nxt = self.s[end] if end < self.n else ""
        if nxt and nxt not in _SPACE and nxt not in ";&|()<>`":
            return ""
        return self.s[self.i : end]

    def expect(self, token: str, named: bool = False) -> Node:
        if not self.at(token):
            self.fail(f"expected {token!r}")
        start = self.i
        self.i += len(token)
        return _leaf(token, start, self.i, named)

    def expect_word(self, word: str) -> Node:
        self.blanks(newlines=True)
        if self.keyword() != word:
            self.fail(f"expected {word!r}")
        return self.expect(word)

    # statements

    def program(self) -> Node:
        kids: list = []
        fields: list = []
        self.statements(kids, fields, stops=(), terminated=False)
        if self.i < self.n:
            self.fail("unexpected text")
        if not kids:
            return Node("program", self.i if self.n else 0, self.i if self.n else 0)
        return Node("program", kids[0].start_byte, self.n, True, kids, fields)

    def at_stop(self, stops) -> bool:
        if not stops:
            return False
        c = self.char()
        if c in (")", "`"):
            return c in stops
        word = self.keyword()
        return bool(word) and word in stops

    def statements(self, kids: list, fields: list, stops, terminated: bool, field: str | None = None) -> int:
        """Statements up to a stop token or the end, appended to kids (each statement and visible
        terminator under `field`). `terminated`: each needs a terminator (tree-sitter-bash's
        `_terminated_statement`). Returns how many statements were read."""
        self.enter()
        count = 0
        while True:
            self.blanks(newlines=True)
            if self.i >= self.n:
                break
            if self.char() == "#":
                kids.append(self.comment())
                fields.append(None)
                continue
            if self.at_stop(stops):
                break
            kids.append(self.and_or())
            fields.append(field)
            count += 1
            self.newline_end = -1
            self.blanks()
            c = self.char()
            if c == ";":
                if self.at(";;") or self.at(";&"):
                    self.fail("`;;` ends only a case item")
                kids.append(self.expect(";"))
                fields.append(field)
            elif c == "&":
                kids.append(self.expect("&"))
                fields.append(field)
            elif c == "\n":
                self.i += 1
                self.newline_end = self.i
                continue
            elif c == "#":
                kids.append(self.comment())
                fields.append(None)
                if self.i < self.n:
                    self.i += 1  # the newline after it
            elif c == "\0":
                if terminated:
                    self.fail("a statement has no terminator")
                break
            else:
                if terminated or not self.at_stop(stops):
                    self.fail("unexpected text after a statement")
                break
        self.depth -= 1
        return count

    def comment(self) -> Node:
        start = self.i
        end = self.s.find("\n", start)
        self.i = self.n if end < 0 else end
        return _leaf("comment", start, self.i, True)

    def and_or(self) -> Node:
        """Pipelines joined by `&&` / `||`, as tree-sitter-bash's precedences build them: a
        redirection after a list or a pipeline applies to all of it (`a && b > f` is
        redirected_statement(list)), and a pipe after that starts a pipeline of it."""
        node = self.pipeline(self.unit())
        while True:
            self.blanks()
            if self.at("&&") or self.at("||"):
                op = self.expect(self.s[self.i : self.i + 2])
                self.blanks(newlines=True)
                node = _node("list", [node, op, self.pipeline(self.unit())])
            elif self.redirect_ahead():
                node = self.redirected(node)
            elif self.char() == "|":
                node = self.pipeline(node)
            else:
                return node

    def pipeline(self, first: Node) -> Node:
        parts = [first]
        while True:
            self.blanks()
            if self.char() == "|" and not self.at("||"):
                parts.append(self.expect("|&" if self.at("|&") else "|"))
                self.blanks(newlines=True)
                parts.append(self.unit())
            else:
                break
        return parts[0] if len(parts) == 1 else _node("pipeline", parts)

    def redirect_ahead(self) -> bool:
        """A redirection starts here (not a process substitution)."""
        c = self.char()
        if c in "<>":
            return self.char(1) != "("
        if c == "&":
            return self.char(1) == ">"
        if c in _DIGITS:
            j = self.i
            while j < self.n and self.s[j] in _DIGITS:
                j += 1
            return j < self.n and self.s[j] in "<>"
        return False

    def redirected(self, body: Node | None) -> Node:
        kids, fields = ([body], ["body"]) if body is not None else ([], [])
        while True:
            self.blanks()
            if not self.redirect_ahead():
                break
            if self.at("<<<"):
                kids.append(self.herestring())
            elif self.at("<<"):
                kids.append(self.heredoc())
            else:
                kids.append(self.file_redirect(many=True))
            fields.append("redirect")
        return _node("redirected_statement", kids, fields)

    def unit(self) -> Node:
        """One element of a pipeline: a command, a compound command, `!` and what it negates."""
        self.enter()
        self.blanks()
        word = self.keyword()
        c = self.char()
        if word == "!":
            bang = self.expect("!")
            self.blanks()
            inner = self.unit()
            if inner.type not in ("command", "variable_assignment", "test_command", "subshell"):
                self.fail("`!` before a statement tree-sitter-bash does not negate")
            node = _node("negated_command", [bang, inner])
        elif c == "(":
            if self.at("(("):
                self.fail("arithmetic `(( ))` is not read")
            node = self.subshell()
        elif word == "{":
            node = self.compound()
        elif word in ("[", "[["):
            node = self.test_command(word)
        elif word == "if":
            node = self.if_statement()
        elif word in ("while", "until"):
            node = self.while_statement(word)
        elif word == "for":
            node = self.for_statement()
        elif word == "function":
            node = self.function_definition()
        elif word in _REFUSED_WORDS or c in ("\0", ")", ";", "&", "|", "\n") or (c == "`" and self.backticks):
            self.fail("a command is missing or starts with a word this parser does not read")
        else:
            node = self.function_or_command()
        self.depth -= 1
        return node

    def subshell(self) -> Node:
        kids = [self.expect("(")]
        fields: list = [None]
        if not self.statements(kids, fields, stops=(")",), terminated=False):
            self.fail("an empty subshell")
        kids.append(self.expect(")"))
        fields.append(None)
        return _node("subshell", kids, fields)

    def compound(self) -> Node:
        kids = [self.expect("{")]
        fields: list = [None]
        self.statements(kids, fields, stops=("}",), terminated=True)
        kids.append(self.expect_word("}"))
        fields.append(None)
        return _node("compound_statement", kids, fields)

    def do_group(self) -> Node:
        kids = [self.expect_word("do")]
        fields: list = [None]
        self.statements(kids, fields, stops=("done",), terminated=True)
        kids.append(self.expect_word("done"))
        fields.append(None)
        return _node("do_group", kids, fields)

    def if_statement(self) -> Node:
        kids = [self.expect("if")]
        fields: list = [None]
        if not self.statements(kids, fields, stops=("then",), terminated=True, field="condition"):
            self.fail("an if without a condition")
        kids.append(self.expect_word("then"))
        fields.append(None)
        self.statements(kids, fields, stops=("elif", "else", "fi"), terminated=True)
        while True:
            self.blanks(newlines=True)
            word = self.keyword()
            if word == "elif":
                clause = [self.expect("elif")]
                cf: list = [None]
                if not self.statements(clause, cf, stops=("then",), terminated=True):
                    self.fail("an elif without a condition")
                clause.append(self.expect_word("then"))
                cf.append(None)
                self.statements(clause, cf, stops=("elif", "else", "fi"), terminated=True)
                kids.append(self.clause("elif_clause", clause, cf))
                fields.append(None)
            elif word == "else":
                clause = [self.expect("else")]
                cf = [None]
                self.statements(clause, cf, stops=("fi",), terminated=True)
                kids.append(self.clause("else_clause", clause, cf))
                fields.append(None)
                kids.append(self.expect_word("fi"))
                fields.append(None)
                break
            else:
                kids.append(self.expect_word("fi"))
                fields.append(None)
                break
        return _node("if_statement", kids, fields)

    def clause(self, kind: str, kids: list, fields: list) -> Node:
        """An elif or else clause: tree-sitter-bash's span takes in the newline that ends its
        last statement."""
        node = _node(kind, kids, fields)
        if self.newline_end > node.end_byte:
            node.end_byte = self.newline_end
        return node

    def while_statement(self, word: str) -> Node:
        kids = [self.expect(word)]
        fields: list = [None]
        if not self.statements(kids, fields, stops=("do",), terminated=True, field="condition"):
            self.fail("a loop without a condition")
        kids.append(self.do_group())
        fields.append("body")
        return _node("while_statement", kids, fields)

    def for_statement(self) -> Node:
        kids = [self.expect("for")]
        fields: list = [None]
        self.blanks()
        start = self.i
        while self.char() in _NAME_CHAR:
            self.i += 1
        if self.i == start or (self.char() not in _SPACE and self.char() != ";"):
            self.fail("a for loop this parser does not read (C-style, or no plain variable name)")
        kids.append(_leaf("variable_name", start, self.i, True))
        fields.append("variable")
        self.blanks()
        if self.keyword() == "in":
            kids.append(self.expect("in"))
            fields.append(None)
            while True:
                self.blanks()
                c = self.char()
                if c in ("\0", ";", "\n", "&", "#", "|", ")", "<", ">"):
                    break
                kids.append(self.literal(context="value")[0])
                fields.append("value")
            if fields[-1] != "value":
                self.fail("a for loop with `in` and no words")
        self.blanks()
        if self.char() == ";" and not self.at(";;"):
            kids.append(self.expect(";"))
            fields.append(None)
        elif self.char() == "\n":
            self.i += 1
        else:
            self.fail("a for loop's words have no terminator")
        self.blanks(newlines=True)
        kids.append(self.do_group())
        fields.append("body")
        return _node("for_statement", kids, fields)

    def function_definition(self) -> Node:
        kids = [self.expect("function")]
        fields: list = [None]
        self.blanks()
        end = self.word_end(self.i)
        if end == self.i:
            self.fail("a function without a name")
        kids.append(self.plain_word(end))
        fields.append("name")
        self.blanks()
        if self.char() == "(":
            kids.append(self.expect("("))
            self.blanks()
            kids.append(self.expect(")"))
            fields += [None, None]
        return self.function_body(kids, fields)

    def function_body(self, kids: list, fields: list) -> Node:
        self.blanks(newlines=True)
        if self.char() == "(" and not self.at("(("):
            body = self.subshell()
        elif self.keyword() == "{":
            body = self.compound()
        else:
            self.fail("a function body this parser does not read")
        kids.append(body)
        fields.append("body")
        self.blanks()
        if self.redirect_ahead():
            self.fail("a redirection of a function definition")
        return _node("function_definition", kids, fields)

    def function_or_command(self) -> Node:
        end = self.word_end(self.i)
        if end > self.i:
            k = end
            while k < self.n and self.s[k] in " \t":
                k += 1
            if self.s.startswith("(", k):
                name = self.plain_word(end)
                self.i = k
                kids = [name, self.expect("(")]
                self.blanks()
                kids.append(self.expect(")"))
                return self.function_body(kids, ["name", None, None])
        return self.command()

    # commands

    def assignment_ahead(self) -> int:
        """The end of `NAME=` or `NAME+=` at the position (bash(1), PARAMETERS), else -1."""
        s, i, n = self.s, self.i, self.n
        if i >= n or s[i] not in _NAME_START:
            if i < n and s[i] in _DIGITS:
                j = i
                while j < n and s[j] in _NAME_CHAR:
                    j += 1
                if s.startswith("=", j) or s.startswith("+=", j) or s.startswith("[", j):
                    self.fail("an assignment to a name that starts with a digit")
            return -1
        j = i
        while j < n and s[j] in _NAME_CHAR:
            j += 1
        if s.startswith("[", j):
            if self.word_end(i) == j:  # `a[1]=x`, `a[i]`: subscripts are not read
                k = s.find("]", j)
                if k > 0 and s.startswith("=", k + 1) or s.startswith("+=", k + 1):
                    self.fail("an assignment to an array element")
            return -1
        if s.startswith("=", j) or s.startswith("+=", j):
            return j
        return -1

    def assignment(self, name_end: int) -> Node:
        start = self.i
        name = _leaf("variable_name", start, name_end, True)
        self.i = name_end
        op = self.expect("+=" if self.at("+=") else "=")
        kids, fields = [name, op], ["name", None]
        c = self.char()
        if c == "(":
            self.fail("an array assignment")
        if c == "#":
            self.fail("an assignment of a value that starts with #")
        if c in ";&|)<>":
            self.fail("an empty assignment before an operator")
        if c != "\0" and c not in _SPACE:
            if c == "`" and self.backticks:
                pass
            else:
                kids.append(self.literal(context="value")[0])
                fields.append("value")
        return _node("variable_assignment", kids, fields)

    def command(self) -> Node:
        kids: list = []
        fields: list = []
        while True:
            self.blanks()
            end = self.assignment_ahead()
            if end >= 0:
                kids.append(self.assignment(end))
                fields.append(None)
            elif self.redirect_ahead() and not self.at("<<"):
                if self.char() in _DIGITS and self.s[self.i : self.i + 8].lstrip("0123456789").startswith("<"):
                    self.fail("a numbered input redirection before a command")
                kids.append(self.file_redirect(many=False))
                fields.append("redirect")
            else:
                break
        self.blanks()
        c = self.char()
        if c in ("\0", "\n", ";", "&", "|", ")", "#", "<") or (c == "`" and self.backticks) or self.at(">("):
            if kids and all(f is None for f in fields) and c != "<" and not self.at(">("):
                return kids[0] if len(kids) == 1 else _node("variable_assignments", kids)
            if kids and all(f == "redirect" for f in fields) and c != "<":
                return _node("redirected_statement", kids, fields)
            self.fail("a command without a name")
        word = self.keyword()
        if word in _DECLARATIONS or word in _UNSETS:
            if kids:
                self.fail("assignments or redirections before a declaration")
            return self.declaration(word)
        if word in _REFUSED_WORDS or word in ("{", "[", "[[", "!", "if", "while", "until", "for", "function"):
            self.fail(f"the word {word!r} where a command name should be")
        if "=" in self.s[self.i : self.word_end(self.i)]:
            self.fail("a command name holding `=` that is not an assignment")  # tree-sitter-bash: `--x=1 a`
        self.count_command()
        name = self.literal(context="name")
        kids.append(_node("command_name", name))
        fields.append("name")
        while True:
            self.blanks()
            c = self.char()
            if c in ("\0", "\n", ";", "&", "|", ")", "#") or (c == "`" and self.backticks):
                if c == "&" and self.at("&>"):
                    break
                break
            if self.at("<<<"):
                kids.append(self.herestring())
                fields.append("redirect")
                continue
            if self.redirect_ahead():
                if self.char() in _DIGITS and self.s[self.i : self.i + 8].lstrip("0123456789").startswith("<"):
                    self.fail("a numbered input redirection")
                break
            if self.at("==") or self.at("=~"):
                self.fail("`==` or `=~` as an argument")
            if c == "(":
                self.fail("a parenthesis inside a command")
            before = kids[-1].end_byte
            arg = self.literal(context="argument")
            if arg[0].start_byte == before:
                self.fail("a word that touches the one before it")
            for a in arg:
                kids.append(a)
                fields.append("argument")
        return _node("command", kids, fields)

    def count_command(self) -> None:
        self.commands += 1
        if self.commands > MAX_COMMANDS:
            self.fail(f"the text has more than {MAX_COMMANDS} commands")

    def declaration(self, word: str) -> Node:
        self.count_command()
        kind = "unset_command" if word in _UNSETS else "declaration_command"
        kids = [self.expect(word)]
        while True:
            self.blanks()
            c = self.char()
            if c in ("\0", "\n", ";", "&", "|", ")", "#") or (c == "`" and self.backticks) or self.redirect_ahead():
                break
            end = self.assignment_ahead()
            if end >= 0:
                if kind == "unset_command":
                    self.fail("an assignment after unset")
                kids.append(self.assignment(end))
                continue
            if c in _NAME_CHAR:
                end = self.word_end(self.i)
                text = self.s[self.i : end]
                if all(ch in _NAME_CHAR for ch in text) and end < self.n and (self.s[end] not in _SPACE and self.s[end] not in ";&|)"):
                    self.fail("a name followed by other text in a declaration")
                if all(ch in _NAME_CHAR for ch in text):
                    if all(ch in _DIGITS for ch in text):
                        self.fail("a number in a declaration")
                    self.count_word()
                    kids.append(_leaf("variable_name", self.i, end, True))
                    self.i = end
                    continue
            for a in self.literal(context="argument"):
                kids.append(a)
        return _node(kind, kids)

    # redirections

    def file_redirect(self, many: bool) -> Node:
        kids, fields = [], []
        if self.char() in _DIGITS:
            start = self.i
            while self.char() in _DIGITS:
                self.i += 1
            kids.append(_leaf("file_descriptor", start, self.i, True))
            fields.append("descriptor")
        for op in _REDIRECT_OPERATORS:
            if self.at(op):
                break
        else:
            self.fail("a redirection operator this parser does not read")
        if self.at("<>") or self.at("<<"):
            self.fail("a redirection operator this parser does not read")
        kids.append(self.expect(op))
        fields.append(None)
        if op in (">&-", "<&-"):
            self.blanks()
            c = self.char()
            if c != "\0" and c not in _SPACE and c not in ";&|)#<>":
                self.fail("a word after a closed descriptor")
            return _node("file_redirect", kids, fields)
        while True:
            self.blanks()
            c = self.char()
            if c == "\0" or c in _SPACE or c in ";&|)#<>" or (c == "`" and self.backticks):
                if c in "<>" and self.char(1) == "(":
                    pass
                else:
                    break
            if c in _DIGITS and self.redirect_ahead():
                break
            if self.at("==") or self.at("=~"):
                self.fail("`==` or `=~` after a redirection")
            if c == "(":
                self.fail("a parenthesis after a redirection")
            before = kids[-1].end_byte
            dest = self.literal(context="destination")
            if fields[-1] == "destination" and dest[0].start_byte == before:
                self.fail("a word that touches the one before it")
            kids.append(dest[0])
            fields.append("destination")
            if not many:
                break
        if fields[-1] != "destination":
            self.fail("a redirection without a destination")
        return _node("file_redirect", kids, fields)

    def herestring(self) -> Node:
        kids = [self.expect("<<<")]
        self.blanks()
        c = self.char()
        if c == "\0" or c in _SPACE or c in ";&|)#<>(":
            self.fail("a here-string without a word")
        kids.append(self.literal(context="destination")[0])
        return _node("herestring_redirect", kids, [None, None])

    def heredoc(self) -> Node:
        """`<<WORD` / `<<-WORD`, the rest of its line, the newline, the body and the end line
        (bash(1), Here Documents). The body is read here, at once: one heredoc per line."""
        if self.heredoc_line:
            self.fail("a second heredoc on one line")
        strip = self.at("<<-")
        kids = [self.expect("<<-" if strip else "<<")]
        fields: list = [None]
        self.blanks()
        start = self.i
        c = self.char()
        if c in ("'", '"'):
            close = self.s.find(c, start + 1)
            if close < 0:
                self.fail("an unterminated heredoc delimiter")
            delimiter = self.s[start + 1 : close]
            end, quoted = close + 1, True
        else:
            quoted = c == "\\"
            j = start + 1 if quoted else start
            end = j
            while end < self.n and (self.s[end] in _NAME_CHAR or self.s[end] in "-.@%+:,/!^~"):
                end += 1
            delimiter = self.s[j:end]
        if not delimiter or any(ch not in _NAME_CHAR and ch not in "-.@%+:,/!^~ " for ch in delimiter) or (
                end < self.n and (self.s[end] not in _SPACE and self.s[end] not in ";&|)<>")):
            self.fail("a heredoc delimiter this parser does not read")
        kids.append(_leaf("heredoc_start", start, end, True))
        fields.append(None)
        self.i = end
        line_end = self.s.find("\n", end)
        if line_end < 0:
            self.fail("a heredoc with no body")
        self.heredoc_line = True
        self.blanks()
        if self.char() == "|" and not self.at("||"):
            pipe = [self.expect("|&" if self.at("|&") else "|")]
            self.blanks()
            pipe.append(self.and_or())
            kids.append(_node("pipeline", pipe))
            fields.append(None)
        else:
            while self.redirect_ahead() and not self.at("<<"):
                if self.char() in _DIGITS and self.s[self.i : self.i + 8].lstrip("0123456789").startswith("<"):
                    self.fail("a numbered input redirection")
                kids.append(self.file_redirect(many=True))
                fields.append("redirect")
                self.blanks()
            if self.at("&&") or self.at("||"):
                kids.append(self.expect(self.s[self.i : self.i + 2]))
                fields.append("operator")
                self.blanks()
                kids.append(self.and_or())
                fields.append("right")
        self.blanks()
        self.heredoc_line = False
        if self.i != line_end:
            self.fail("text after a heredoc's start this parser does not read")
        # the body: the lines up to one that is the delimiter (after its tabs, for <<-)
        body_start = line_end + 1
        k = body_start
        end_line = -1
        while k <= self.n:
            eol = self.s.find("\n", k)
            stop = self.n if eol < 0 else eol
            line = self.s[k:stop]
            bare = line.lstrip("\t") if strip else line
            if bare == delimiter:
                end_line = k
                break
            if bare.rstrip(" \t\r\v\f") == delimiter:  # tree-sitter-bash may end it there, bash does not
                self.fail("a heredoc line that is its delimiter and blanks", k)
            if eol < 0:
                break
            k = eol + 1
        if end_line < 0:
            self.fail("a heredoc that does not end")
        tabs = 0
        if strip:
            while self.s.startswith("\t", end_line + tabs):
                tabs += 1
        # tree-sitter-bash's body starts after the empty lines at its top (and, for <<-, tabs)
        body_from = body_start
        while body_from < end_line and self.s[body_from] in " \t\n":
            body_from += 1
        if self.s.startswith("\\", body_from):
            self.fail("an unquoted heredoc whose body starts with a backslash", body_from)
        body_to = end_line + tabs
        kids.append(self.heredoc_body(body_from, body_to, end_line, quoted, strip))
        fields.append(None)
        kids.append(_leaf("heredoc_end", body_to, body_to + len(delimiter), True))
        fields.append(None)
        self.i = body_to + len(delimiter)
        return _node("heredoc_redirect", kids, fields)

    def heredoc_body(self, start: int, end: int, end_line: int, quoted: bool, strip: bool = False) -> Node:
        if quoted or "$" not in self.s[start:end]:
            return Node("heredoc_body", start, end)
        if strip:
            self.fail("expansions in a <<- heredoc", start)
        parts: list = []
        k = start
        last = None
        while k < end_line:
            c = self.s[k]
            if c == "\\":
                k += 2
                continue
            if c != "$":
                k += 1
                continue
            nxt = self.s[k + 1] if k + 1 < self.n else ""
            if nxt in _NAME_CHAR or nxt == "{" or (nxt == "(" and not self.s.startswith("((", k + 1)):
                self.i = k
                piece = self.dollar(context="heredoc")
                if piece.end_byte > end_line:
                    self.fail("a substitution that crosses a heredoc's end", k)
                if last is not None:  # the text between, after a newline that follows the one before
                    if piece.start_byte == last:
                        self.fail("two expansions that touch in a heredoc", k)
                    parts.append(_leaf("heredoc_content", self.after_newline(last, piece.start_byte),
                                       piece.start_byte, True))
                parts.append(piece)
                last = piece.end_byte
                k = piece.end_byte
            elif nxt in _SPECIAL_PARAMETERS or nxt in "[(\n\r" or nxt == "":
                self.fail("a heredoc expansion this parser does not read", k)
            else:
                k += 1
        if last is None:
            return Node("heredoc_body", start, end)
        parts.append(_leaf("heredoc_content", self.after_newline(last, end), end, True))
        return Node("heredoc_body", start, end, True, parts)

    def after_newline(self, start: int, limit: int) -> int:
        return start + 1 if start < limit and self.s[start] == "\n" else start

    # tests

    def test_command(self, word: str) -> Node:
        close = "]]" if word == "[[" else "]"
        kids = [self.expect(word)]
        self.blanks()
        first = self.test_operand()
        self.blanks()
        if first.type == "test_operator":
            operand = self.test_operand()
            if operand.type == "test_operator":
                self.fail("a test this parser does not read")
            expression = _node("unary_expression", [first, operand], ["operator", None])
        else:
            operator = self.test_operand()
            if operator.type != "test_operator" and not (operator.type == "word" and self.s[operator.start_byte:operator.end_byte] == "=" and word == "["):
                self.fail("a test this parser does not read")
            if operator.type == "word":
                operator = _leaf("=", operator.start_byte, operator.end_byte)
            self.blanks()
            right = self.test_operand()
            if right.type == "test_operator":
                self.fail("a test this parser does not read")
            expression = _node("binary_expression", [first, operator, right], ["left", "operator", "right"])
        kids.append(expression)
        self.blanks()
        if self.keyword() != close:
            self.fail(f"a test this parser does not read (no {close!r} where expected)")
        kids.append(self.expect(close))
        return _node("test_command", kids)

    def test_operand(self) -> Node:
        c = self.char()
        if c == "\0" or c in _SPACE or c in ";&|()<>!":
            self.fail("a test this parser does not read")
        if c == "-" and self.char(1).isalpha():
            end = self.word_end(self.i)
            text = self.s[self.i : end]
            if text[1:].isalpha() and text.isascii():
                start, self.i = self.i, end
                return _leaf("test_operator", start, end, True)
            self.fail("a test this parser does not read")
        if self.keyword() in ("]", "]]", "=", "==", "!=", "=~"):
            word = self.keyword()
            if word == "=":
                start = self.i
                self.i += 1
                return _leaf("word", start, self.i, True)
            self.fail("a test this parser does not read")
        node = self.literal(context="test")[0]
        if node.type == "concatenation" and any(ch.type == "word" and self.s[ch.start_byte] in _SPECIAL_WORD for ch in node.children):
            self.fail("a test this parser does not read")
        return node

    # words

    def plain_word(self, end: int) -> Node:
        start, self.i = self.i, end
        return _leaf("word", start, end, True)

    def literal(self, context: str) -> list:
        """The nodes of one shell word at the position: one node (a primary or a concatenation),
        or for a translated string `$"..."` standing alone as an argument tree-sitter-bash's two
        (`$`, then the string)."""
        self.enter()
        self.count_word()
        parts: list = []
        s = self.s
        while self.i < self.n:
            c = s[self.i]
            if c in _SPACE or c in ";&|)":
                break
            if c in "<>":
                if self.char(1) != "(" or context not in ("argument", "name") or parts:
                    break
                parts.append(self.substitution(c + "(", "process_substitution"))
                continue
            if c == "(":
                self.fail("a parenthesis inside a word")
            if c == "#" and not parts:
                break
            if c == '"':
                parts.append(self.string())
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    self.fail("an unterminated single quote")
                parts.append(_leaf("raw_string", self.i, end + 1, True))
                self.i = end + 1
            elif c == "$":
                if self.char(1) == '"':
                    parts.extend(self.translated(context, parts))
                    continue
                parts.append(self.dollar(context="word"))
            elif c == "`":
                if self.backticks:
                    break
                parts.append(self.backtick())
            elif c in _SPECIAL_WORD:
                if c == "{" and self.char(1) in _DIGITS:
                    node = self.brace_expression()
                    if node is not None:
                        parts.append(node)
                        continue
                parts.append(_leaf("word", self.i, self.i + 1, True))
                self.i += 1
            else:
                end = self.word_end(self.i, hash_first=bool(parts))
                if end == self.i:
                    self.fail("a character this parser does not read in a word")
                text = s[self.i : end]
                parts.append(_leaf("number" if _is_number(text) else "word", self.i, end, True))
                self.i = end
        self.depth -= 1
        if not parts:
            self.fail("a word is missing")
        if all(p.type == "word" and s[p.start_byte] in _SPECIAL_WORD and p.end_byte == p.start_byte + 1 for p in parts):
            # tree-sitter-bash joins `{ }` across the blank into one word: refused
            k = self.i
            while k < self.n and s[k] in " \t":
                k += 1
            if k < self.n and s[k] in _SPECIAL_WORD:
                self.fail("brackets or braces standing alone as words")
        if any(p.type == "$" for p in parts[:-1]):
            if not (len(parts) >= 2 and parts[-2].type == "$" and parts[-1].type == "string"):
                self.fail("a `$` inside a word")
        if len(parts) > 1 and any(p.type == "command_substitution" and s[p.start_byte] == "`" for p in parts):
            self.fail("backquotes inside a word")
        if parts[0].type == "translated_string" and len(parts) > 1:
            self.fail("a translated string inside a word")
        if len(parts) == 2 and parts[0].type == "$" and parts[1].type == "string":
            if context == "argument":
                return parts
            self.fail("a translated string where this parser does not read one")
        if len(parts) == 1:
            if parts[0].type == "$" and context != "argument":
                self.fail("a lone `$` where this parser does not read one")
            return parts
        return [_node("concatenation", parts)]

    def translated(self, context: str, parts: list) -> list:
        """`$"..."` (bash(1), QUOTING: locale-specific translation), as tree-sitter-bash builds it:
        a translated_string as a command's name, else a `$` node and the string."""
        dollar = _leaf("$", self.i, self.i + 1)
        self.i += 1
        string = self.string()
        if context == "name" and not parts:
            return [_node("translated_string", [dollar, string])]
        return [dollar, string]

    def brace_expression(self):
        """`{N..M}` (bash(1), Brace Expansion: a sequence), or None when the braces are not one."""
        s, i = self.s, self.i
        j = i + 1
        while j < self.n and s[j] in _DIGITS:
            j += 1
        if not s.startswith("..", j):
            return None
        k = j + 2
        while k < self.n and s[k] in _DIGITS:
            k += 1
        if k == j + 2 or not s.startswith("}", k):
            self.fail("a brace expression this parser does not read")
        self.i = k + 1
        return _node("brace_expression", [_leaf("{", i, i + 1), _leaf("number", i + 1, j, True), _leaf("..", j, j + 2),
                                          _leaf("number", j + 2, k, True), _leaf("}", k, k + 1)])

    def string(self) -> Node:
        """A double-quoted string (bash(1), QUOTING) with its pieces as tree-sitter-bash 0.25 gives
        them: the content is cut at each newline, which no piece holds (shell._Walker.word puts it
        back), and content that is only blanks belongs to no piece: the token after it starts
        where the blanks do."""
        self.enter()
        s = self.s
        kids = [self.expect('"')]
        blank_from = -1  # where blanks that no content node holds began
        while True:
            if self.i >= self.n:
                self.fail("an unterminated double quote")
            c = s[self.i]
            start = self.i
            if c == '"':
                piece = self.expect('"')
            elif c == "$":
                nxt = self.char(1)
                if nxt in _NAME_CHAR or nxt in _SPECIAL_PARAMETERS or nxt in "{(":
                    piece = self.dollar(context="string")
                elif nxt in _SPACE or nxt == "\0":
                    self.fail("a `$` before a blank in a string")
                else:
                    piece = self.expect("$")
            elif c == "`":
                if self.backticks:
                    self.fail("a backquote inside a string inside backquotes")
                piece = self.backtick()
            else:
                j = self.i
                while j < self.n and s[j] not in '"`$\n\r':
                    if s[j] == "\\":
                        if j + 1 < self.n and s[j + 1] in "\n\r":
                            self.fail("a backslash before a newline in a string")
                        j += 2
                    else:
                        j += 1
                if j > self.n:
                    self.fail("an unterminated double quote")
                if j < self.n and s[j] == "\r":
                    self.fail("a carriage return in a string")
                if s[start:j].strip(" \t\v\f"):
                    kids.append(_leaf("string_content", start, j, True))
                    blank_from = -1
                elif j > start and blank_from < 0:
                    blank_from = start
                if j < self.n and s[j] == "\n":
                    j += 1
                    blank_from = -1 if blank_from < 0 else blank_from
                    if blank_from >= 0:  # blanks then a newline: both skipped
                        blank_from = -1
                self.i = j
                continue
            if blank_from >= 0:
                piece.start_byte = blank_from
                if piece.children:
                    piece.children[0].start_byte = blank_from
                blank_from = -1
            kids.append(piece)
            if piece.type == '"' and piece.end_byte == self.i:
                break
        self.depth -= 1
        return _node("string", kids)

    def dollar(self, context: str) -> Node:
        """What starts with `$`: a parameter, `${NAME}`, `$(...)`, `$'...'`, or a lone `$`."""
        s, i = self.s, self.i
        nxt = self.char(1)
        if nxt == "(":
            if self.at("$(("):
                self.fail("arithmetic `$(( ))` is not read")
            return self.substitution("$(", "command_substitution")
        if nxt == "{":
            j = i + 2
            while j < self.n and s[j] in _NAME_CHAR:
                j += 1
            if j == i + 2 or not s.startswith("}", j):
                self.fail("a `${...}` expansion other than `${NAME}`")
            self.i = j + 1
            return _node("expansion", [_leaf("${", i, i + 2), _leaf("variable_name", i + 2, j, True), _leaf("}", j, j + 1)])
        if nxt == "'" and context == "word":
            j = s.find("'", i + 2)
            if j < 0:
                self.fail("an unterminated $'...'")
            if "\\" in s[i + 2 : j] and (s[j - 1] == "\\" or "\\\\" in s[i + 2 : j]):
                self.fail("a $'...' whose backslashes this parser does not read")
            self.i = j + 1
            return _leaf("ansi_c_string", i, j + 1, True)
        if nxt in _NAME_CHAR:
            j = i + 1
            while j < self.n and s[j] in _NAME_CHAR:
                j += 1
            self.i = j
            kind = "special_variable_name" if j == i + 2 and nxt == "_" else "variable_name"
            return _node("simple_expansion", [_leaf("$", i, i + 1), _leaf(kind, i + 1, j, True)])
        if nxt in _SPECIAL_PARAMETERS:
            if context == "heredoc":
                self.fail("a heredoc expansion this parser does not read")
            self.i = i + 2
            return _node("simple_expansion", [_leaf("$", i, i + 1), _leaf("special_variable_name", i + 1, i + 2, True)])
        if context == "word" and (nxt == "\0" or nxt in _SPACE or nxt in ";&|)"):
            self.i = i + 1
            return _leaf("$", i, i + 1)
        self.fail("a `$` this parser does not read")

    def substitution(self, opener: str, kind: str) -> Node:
        """`$(...)`, `<(...)`, `>(...)`: statements up to the closing parenthesis."""
        kids = [self.expect(opener)]
        fields: list = [None]
        saved, self.backticks = self.backticks, False
        line, self.heredoc_line = self.heredoc_line, False
        if not self.statements(kids, fields, stops=(")",), terminated=False):
            self.fail("an empty substitution")
        self.backticks, self.heredoc_line = saved, line
        kids.append(self.expect(")"))
        fields.append(None)
        return _node(kind, kids, fields)

    def backtick(self) -> Node:
        if self.backticks:
            self.fail("backquotes inside backquotes")
        kids = [self.expect("`")]
        fields: list = [None]
        self.backticks = True
        if not self.statements(kids, fields, stops=("`",), terminated=False):
            self.fail("empty backquotes")
        self.backticks = False
        kids.append(self.expect("`"))
        fields.append(None)
        if self.char() == "`":  # tree-sitter-bash reads a "``" token there
            self.fail("two backquoted substitutions that touch")
        return _node("command_substitution", kids, fields)


def _link(root: Node, source: bytes) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        node._source = source
        for child in node.children:
            child.parent = node
            stack.append(child)


class Tree:
    """What `parse` returns: `root_node`, as a py-tree-sitter Tree has."""

    __slots__ = ("root_node",)

    def __init__(self, root: Node):
        self.root_node = root


def parse(source: bytes) -> Tree:
    """The tree of `source` (UTF-8 bytes). Raises BashSyntaxError for what it does not read.
    Every byte >= 0x80 is an ordinary word character (bash's syntax is all ASCII)."""
    parser = _Parser(source.decode("latin-1"))
    root = parser.program()
    _link(root, source)
    return Tree(root)
