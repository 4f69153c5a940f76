"""A hand-written recursive-descent parser of the bash that shell() reads, in time linear in the text.

It builds the tree tree-sitter-bash 0.25.1 builds (the same node types, fields and byte spans, see
dsl.subjects.bash.node) and raises BashSyntaxError for what it does not read: a text it cannot read
the way both bash and tree-sitter-bash read it is refused, never read differently
(dsl.subjects.shell turns the refusal into an EvalError: it fails closed). Four parts of the tree
are built on purpose unlike tree-sitter-bash's, where dsl.subjects.shell reads only their text and
the substitutions inside them: arithmetic (flat, see .arithmetic), the expressions inside `[ ]` and
`[[ ]]` (tree-sitter-bash's precedences only for unary and binary tests, `!`, `&&`, `||` and
parentheses, the rest refused), the words inside `${...}` (read as bash reads them, see .words)
and a heredoc's body (one node: dsl.subjects.shell reads it from the text, an unquoted one
through `parse_expanded`, which reads the expansions and substitutions of the body as bash
expands it).

The rules followed are bash(1) (SHELL GRAMMAR, QUOTING, PARAMETERS, EXPANSION, REDIRECTION,
ARITHMETIC EVALUATION, CONDITIONAL EXPRESSIONS) and POSIX Shell Command Language (XCU 2.3 Token
Recognition, 2.7 Redirection, 2.9 Shell Commands, 2.10 Shell Grammar), restricted to the readings
tree-sitter-bash shares:

- statements: simple commands, pipelines (`|`, `|&`), lists (`&&`, `||`), terminators (`;`, `&`,
  newline), `!`, `( )`, `{ }`, `(( ))`, `if`, `while`/`until`, `for`/`select NAME [in WORDS]`,
  C-style `for (( ; ; ))`, `case`, function definitions, `[ ]` and `[[ ]]`,
  `export`/`declare`/`local`/... and `unset`; `time` and `coproc` are read as the commands
  tree-sitter-bash reads them as (dsl.subjects.shell unwraps them as wrappers);
- words: see .words; assignments `NAME=`, `NAME+=`, `NAME[INDEX]=`, arrays `NAME=(...)`;
- redirections: [N]< > >> &> &>> <& >& >| >&- <&-, here-strings `<<<`, here-documents `<<` / `<<-`
  (one per line, delimiter a plain name, wholly quoted, or with backslashes);
- blanks: space and tab only, bash's (tree-sitter-bash's CR, VT, FF and backslash-blank are
  refused where they would separate words).

Refused (BashSyntaxError): `$[ ]`; extended globs in case patterns; `-a` / `-o` joining tests;
`=~` with a pattern that holds an expansion, a quote or a backslash; and every text
tree-sitter-bash reads with an error or otherwise than bash (see the comments at each refusal).
Past MAX_NESTING levels of nesting, or more simple commands or words than the caller allows
(MAX_COMMANDS, MAX_WORDS by default), the text is refused too: the work of reading the commands
afterwards grows with them (see docs/policy-language.md, "Limits of shell()").

Linear time: every function consumes the text left to right and never goes back except to look a
bounded number of characters ahead (a keyword, an assignment's name); the only scan that may look
further (the end line of a heredoc) moves the position past what it scanned. The patterns of
.lexer cannot backtrack.
"""

from __future__ import annotations

import re

from dsl.subjects.bash.arithmetic import Arithmetic
from dsl.subjects.bash.lexer import (
    ASSIGNMENT, BLANK_NEWLINE_START, BLANK_START, BLANKS, BLANKS_NEWLINES, DECLARATIONS, DIGITS, HEREDOC_WORD, NUMBER, PLAIN,
    NAME_CHAR, REDIRECT_OPERATORS, RESERVED, SPACE, SPECIAL_WORD, UNSETS, WORD, WORD_END,
)
from dsl.subjects.bash.node import Node
from dsl.subjects.bash.words import SIMPLE_STRING, Words, leaf, node
from dsl.subjects.quoting import MAX_HEREDOC_DELIMITER

MAX_NESTING = 48  # levels of nested statements, substitutions, expansions and parentheses
MAX_COMMANDS = 128  # simple commands (and declaration/unset commands) of one text
MAX_WORDS = 1024  # words (command names, arguments, assignment values, destinations) of one text


class BashSyntaxError(ValueError):
    """The text is not read by this parser: `offset` is the character where it stopped; `limit`
    is "commands" or "words" when it has more of them than the parser was allowed to read,
    "nesting" when it nests more than MAX_NESTING levels."""

    def __init__(self, message: str, offset: int, limit: str | None = None):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.limit = limit


_CASE_ENDS = (";;&", ";;", ";&")
_NOT_PLAIN_NAME = RESERVED | DECLARATIONS | UNSETS  # words unit() does not read as a plain command's name
_COMMAND_WORD_END = frozenset(" \t\n;&|)\0")  # what may follow a command's name read at once (unit)
_NUMBER_START = frozenset("-0123456789")
_ARGUMENT_SPECIAL = frozenset("<>&0123456789=($")  # what arguments() reads with more care
# a `$` no backslash quotes in an unquoted heredoc body before what tree-sitter-bash errs on
_HEREDOC_BAD_DOLLAR = re.compile(r"(?<!\\)\$(?:[*@?!#\-$\[\n\r]|\(\(|\Z)")
_AFTER_UNIT = frozenset("&|<>0123456789")  # what may go on after a pipeline's element (and_or)
# a redirection starts here (its descriptor, an operator; not a process substitution `<(`)
_REDIRECT_AHEAD = re.compile(r"[0-9]*+(?:[<>](?!\()|&>)")
# runs read at once (one regex match, not a character at a time): the subscript of `NAME[...]` up to
# what ends it, and name characters
_SUBSCRIPT_AHEAD = re.compile(r"[^\]\n;&|<>() \t]*+")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_]*+")
_FUNCTION_PARENS = re.compile(r"[ \t]*+\(")  # `NAME (`: a function definition
# a file redirection's descriptor and operator (longest first)
_FILE_REDIRECT = re.compile("([0-9]*+)(" + "|".join(re.escape(op) for op in REDIRECT_OPERATORS) + ")")
_STATEMENT_END = frozenset(";&|)\n")  # what ends a statement's words (with the end of the text)
_TEST_BINARY = frozenset({"=", "==", "!=", "<", ">", "=~"})


class _Parser(Words, Arithmetic):
    def __init__(self, text: str, max_commands: int, max_words: int):
        self.s = text
        self.n = len(text)
        self.i = 0
        self.depth = 0
        self.commands = 0
        self.words = 0
        self.max_commands = max_commands
        self.max_words = max_words
        self.backticks = False  # inside `...`
        self.backtick_open = False  # inside `...`, maybe within a `$(...)` inside it
        self.quoted = 0  # inside "..." (or an unquoted heredoc's body) of the current command line
        self.heredoc_line = False  # reading the rest of a heredoc's first line
        self.newline_end = -1  # the end of the newline that ended the last statement read, if one did

    # errors, limits, blanks

    def fail(self, why: str, at: int | None = None):
        at = self.i if at is None else at
        c = self.s[at] if at < self.n else ""
        if c in ("\r", "\v", "\f") or (c == "\\" and self.s[at + 1 : at + 2] in (" ", "\t", "\r", "\v", "\f")):
            # tree-sitter-bash skipped these as blanks; bash reads a word character (a CR, VT
            # or FF, or a quoted blank): read as neither, the text is refused
            name = {"\r": "carriage return", "\v": "vertical tab", "\f": "form feed"}.get(c, "backslash before a blank")
            hint = " (a Windows line ending: send the command with LF line endings)" if c == "\r" else ""
            why = f"a {name} where no word is, which bash reads as part of a word{hint}"
        raise BashSyntaxError(why, at)

    def too_many(self, limit: str):
        if limit == "nesting":
            raise BashSyntaxError(f"the text nests too deeply (more than {MAX_NESTING} levels)", self.i, limit)
        allowed = self.max_commands if limit == "commands" else self.max_words
        raise BashSyntaxError(f"the text has more than {allowed:,} {limit}", self.i, limit)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.too_many("nesting")

    def blanks(self) -> None:
        """Skip bash's blanks (bash(1), DEFINITIONS: space and tab) between tokens on a line."""
        i = self.i
        if i < self.n and self.s[i] in BLANK_START:
            self.i = BLANKS.match(self.s, i).end()

    def blanks_newlines(self) -> None:
        i = self.i
        if i < self.n and self.s[i] in BLANK_NEWLINE_START:
            self.i = BLANKS_NEWLINES.match(self.s, i).end()

    def char(self, offset: int = 0) -> str:
        k = self.i + offset
        return self.s[k] if k < self.n else "\0"  # NUL never reaches the parser (shell() refuses it)

    def at(self, token: str) -> bool:
        return self.s.startswith(token, self.i)

    def keyword(self) -> str:
        """The unquoted word at the position if it could be a reserved word, else ""."""
        s, i = self.s, self.i
        m = WORD.match(s, i)
        if m is not None:
            end = m.end()
        else:
            for token in ("[[", "]]", "{", "}", "[", "]"):  # special characters of their own
                if s.startswith(token, i):
                    end = i + len(token)
                    break
            else:
                return ""
        if end < self.n and s[end] not in SPACE and s[end] not in ";&|()<>`":
            return ""
        return s[i:end]

    def expect(self, token: str) -> Node:
        if not self.s.startswith(token, self.i):
            self.fail(f"expected {token!r}")
        start = self.i
        self.i += len(token)
        return Node(token, start, self.i, False)

    def expect_word(self, word: str) -> Node:
        self.blanks_newlines()
        if self.keyword() != word:
            self.fail(f"expected {word!r}")
        return self.expect(word)

    def count_command(self) -> None:
        self.commands += 1
        if self.commands > self.max_commands:
            self.too_many("commands")

    # statements

    def program(self) -> Node:
        kids: list = []
        fields: list = []
        self.statements(kids, fields, (), False)
        if self.i < self.n:
            self.fail("unexpected text")
        if not kids:
            return Node("program", self.i if self.n else 0, self.i if self.n else 0, True, [], None)
        root = Node("program", kids[0].start_byte, self.n, True, kids, fields)
        for kid in kids:
            kid.parent = root
        return root

    def at_stop(self, stops) -> bool:
        if not stops:
            return False
        c = self.char()
        if c in (")", "`"):
            return c in stops
        if c == ";":
            return ";;" in stops and any(self.at(end) for end in _CASE_ENDS)
        word = self.keyword()
        return bool(word) and word in stops

    def statements(self, kids: list, fields: list, stops, terminated: bool, field: str | None = None) -> int:
        """Statements up to a stop token or the end, appended to kids (each statement and visible
        terminator under `field`). `terminated`: each needs a terminator (tree-sitter-bash's
        `_terminated_statement`). `stops` holding ";;": a case item's, which ends at `;;`, `;&`,
        `;;&` or `esac`. Returns how many statements were read."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.too_many("nesting")
        count = 0
        s, n = self.s, self.n
        while True:
            i = self.i
            if i < n and s[i] in BLANK_NEWLINE_START:
                self.i = i = BLANKS_NEWLINES.match(s, i).end()
            if i >= n:
                break
            c = s[i]
            if c == "#":
                kids.append(self.comment())
                fields.append(None)
                continue
            if stops and self.at_stop(stops):
                break
            kids.append(self.and_or())
            fields.append(field)
            count += 1
            self.newline_end = -1
            i = self.i
            if i < n and s[i] in BLANK_START:
                self.i = i = BLANKS.match(s, i).end()
            if i >= n:
                if terminated:
                    self.fail("a statement has no terminator")
                break
            c = s[i]
            if c == "\n":
                self.i = i + 1
                self.newline_end = i + 1
                last = kids[-1]
                if last.type == "pipeline" and len(last.children) >= 5:
                    self.blanks_newlines()
                    if self.i < n and self.redirect_ahead():
                        # tree-sitter-bash applies it to the pipeline's tail, bash to nothing
                        self.fail("a redirection on the line after a pipeline")
            elif c == ";":
                if s.startswith(";;", i) or s.startswith(";&", i):
                    if ";;" in stops:
                        break
                    self.fail("`;;` ends only a case item")
                kids.append(Node(";", i, i + 1, False))
                fields.append(field)
                self.i = i + 1
            elif c == "&":
                kids.append(Node("&", i, i + 1, False))
                fields.append(field)
                self.i = i + 1
            elif c == "#":
                kids.append(self.comment())
                fields.append(None)
                if self.i < n:
                    self.i += 1  # the newline after it
            else:
                if terminated or not self.at_stop(stops):
                    self.fail("unexpected text after a statement")
                break
        self.depth -= 1
        return count

    def comment(self) -> Node:
        self.count_word()
        start = self.i
        end = self.s.find("\n", start)
        self.i = self.n if end < 0 else end
        return Node("comment", start, self.i)

    def and_or(self) -> Node:
        """Pipelines joined by `&&` / `||`, as tree-sitter-bash's precedences build them: a
        redirection after a list or a pipeline applies to all of it (`a && b > f` is
        redirected_statement(list)), and a pipe after that starts a pipeline of it."""
        result = self.unit()
        s, n = self.s, self.n
        while True:
            i = self.i
            if i < n and s[i] in BLANK_START:
                self.i = i = BLANKS.match(s, i).end()
            if i >= n:
                return result
            c = s[i]
            if c not in _AFTER_UNIT:
                return result
            if (c == "&" or c == "|") and s.startswith(c, i + 1):
                op = Node(c + c, i, i + 2, False)
                self.i = i + 2
                self.blanks_newlines()
                right = self.unit()
                k = self.i
                while k < n and s[k] in " \t":
                    k += 1
                if k < n and s[k] == "|" and not s.startswith("||", k):
                    right = self.pipeline(right)
                if result.type == "pipeline" and len(result.children) >= 5:
                    # tree-sitter-bash's GLR parse: `a | b | c && d` is a pipeline of `a` and of
                    # the list `b | c && d` (the same commands; dsl.subjects.shell reads the
                    # directory after it as unknown, as for any pipeline)
                    tail = node("pipeline", result.children[2:])
                    result = node("pipeline", [*result.children[:2], node("list", [tail, op, right])])
                else:
                    result = node("list", [result, op, right])
            elif c in "<>&0123456789" and _REDIRECT_AHEAD.match(s, i):
                result = self.redirected(result)
            elif c == "|":
                result = self.pipeline(result)
            else:
                return result

    def pipeline(self, first: Node) -> Node:
        parts = [first]
        s = self.s
        while True:
            self.blanks()
            i = self.i
            if i < self.n and s[i] == "|" and not s.startswith("||", i):
                amp = s.startswith("|&", i)
                parts.append(leaf("|&" if amp else "|", i, i + 2 if amp else i + 1))
                self.i = i + (2 if amp else 1)
                self.blanks_newlines()
                parts.append(self.unit())
            else:
                break
        return parts[0] if len(parts) == 1 else node("pipeline", parts)

    def redirect_ahead(self) -> bool:
        """A redirection starts here (not a process substitution)."""
        return _REDIRECT_AHEAD.match(self.s, self.i) is not None

    def redirected(self, body: Node | None) -> Node:
        kids, fields = ([body], ["body"]) if body is not None else ([], [])
        s, n = self.s, self.n
        while True:
            i = self.i
            if i < n and s[i] in BLANK_START:
                self.i = i = BLANKS.match(s, i).end()
            if i >= n or not _REDIRECT_AHEAD.match(s, i):
                break
            if s[i] == "0":
                self.fail("descriptor 0 where it is not a word of a command")
            if s.startswith("<<<", i):
                # tree-sitter-bash takes a here-string after an if or a while alone (no field)
                if body is None or body.type not in ("if_statement", "while_statement") or len(kids) > 1:
                    self.fail("a here-string after a statement other than a command")
                kids.append(self.herestring())
                fields.append(None)
                break
            elif s.startswith("<<", i):
                kids.append(self.heredoc())
            else:
                kids.append(self.file_redirect(many=True))
            fields.append("redirect")
        return node("redirected_statement", kids, fields)

    def unit(self) -> Node:
        """One element of a pipeline: a command, a compound command, `!` and what it negates."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.too_many("nesting")
        s, n = self.s, self.n
        i = self.i
        if i < n and s[i] in BLANK_START:
            self.i = i = BLANKS.match(s, i).end()
        c = s[i] if i < n else "\0"
        m = PLAIN.match(s, i)
        if m is not None:
            end = m.end()
            if end < n and s[end] == "\\":
                end = WORD.match(s, i).end()
            after = s[end] if end < n else "\0"
            if after in _COMMAND_WORD_END:
                word = s[i:end]
                if word in _NOT_PLAIN_NAME or "=" in word or "#" in word:
                    result = self.keyword_unit(word, c)
                elif _FUNCTION_PARENS.match(s, end):
                    result = self.function_or_command()
                else:
                    # most commands: a plain name, then words (see command() for the rest)
                    self.commands += 1
                    if self.commands > self.max_commands:
                        self.too_many("commands")
                    self.words += 1
                    if self.words > self.max_words:
                        self.too_many("words")
                    name = Node("number" if c in _NUMBER_START and NUMBER.fullmatch(s, i, end) else "word", i, end)
                    named = Node("command_name", i, end, True, [name], None)
                    name.parent = named
                    self.i = end
                    kids = [named]
                    fields = ["name"]
                    self.arguments(kids, fields)
                    result = Node("command", i, kids[-1].end_byte, True, kids, fields)
                    for kid in kids:
                        kid.parent = result
                self.depth -= 1
                return result
        result = self.keyword_unit(self.keyword() if c not in ("$", '"', "'", "-", "/", ".") else "", c)
        self.depth -= 1
        return result

    def keyword_unit(self, word: str, c: str) -> Node:
        if word == "!":
            bang = self.expect("!")
            self.blanks()
            inner = self.unit()
            if inner.type not in ("command", "variable_assignment", "test_command", "subshell"):
                self.fail("`!` before a statement tree-sitter-bash does not negate")
            return node("negated_command", [bang, inner])
        if c == "(":
            if self.at("(("):
                return self.arithmetic_command()
            return self.subshell()
        if word in RESERVED:
            if word == "{":
                return self.compound()
            if word in ("[", "[["):
                return self.test_command(word)
            if word == "if":
                return self.if_statement()
            if word in ("while", "until"):
                return self.while_statement(word)
            if word in ("for", "select"):
                return self.for_statement(word)
            if word == "case":
                return self.case_statement()
            if word == "function":
                return self.function_definition()
            self.fail(f"the word {word!r} where a command should start")
        if c in ("\0", ")", ";", "&", "|", "\n") or (c == "`" and self.backticks):
            self.fail("a command is missing")
        return self.function_or_command()

    def subshell(self) -> Node:
        kids = [self.expect("(")]
        fields: list = [None]
        if not self.statements(kids, fields, stops=(")",), terminated=False):
            self.fail("an empty subshell")
        kids.append(self.expect(")"))
        fields.append(None)
        return node("subshell", kids, fields)

    def compound(self) -> Node:
        kids = [self.expect("{")]
        fields: list = [None]
        self.statements(kids, fields, stops=("}",), terminated=True)
        kids.append(self.expect_word("}"))
        fields.append(None)
        return node("compound_statement", kids, fields)

    def do_group(self) -> Node:
        kids = [self.expect_word("do")]
        fields: list = [None]
        self.statements(kids, fields, stops=("done",), terminated=True)
        kids.append(self.expect_word("done"))
        fields.append(None)
        return node("do_group", kids, fields)

    def if_statement(self) -> Node:
        kids = [self.expect("if")]
        fields: list = [None]
        if not self.statements(kids, fields, stops=("then",), terminated=True, field="condition"):
            self.fail("an if without a condition")
        kids.append(self.expect_word("then"))
        fields.append(None)
        self.statements(kids, fields, stops=("elif", "else", "fi"), terminated=True)
        while True:
            self.blanks_newlines()
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
        return node("if_statement", kids, fields)

    def clause(self, kind: str, kids: list, fields: list) -> Node:
        """An elif or else clause: tree-sitter-bash's span takes in the newline that ends its
        last statement."""
        made = node(kind, kids, fields)
        if self.newline_end > made.end_byte:
            made.end_byte = self.newline_end
        return made

    def while_statement(self, word: str) -> Node:
        kids = [self.expect(word)]
        fields: list = [None]
        if not self.statements(kids, fields, stops=("do",), terminated=True, field="condition"):
            self.fail("a loop without a condition")
        kids.append(self.do_group())
        fields.append("body")
        return node("while_statement", kids, fields)

    def for_statement(self, word: str) -> Node:
        kids = [self.expect(word)]
        fields: list = [None]
        self.blanks()
        if word == "for" and self.at("(("):
            return self.c_style_for(kids, fields)
        start = self.i
        while self.char() in NAME_CHAR:
            self.i += 1
        if self.i == start or (self.char() not in SPACE and self.char() != ";"):
            self.fail("a for loop without a plain variable name")
        kids.append(Node("variable_name", start, self.i))
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
                kids.append(self.literal("value"))
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
        self.blanks_newlines()
        kids.append(self.do_group())
        fields.append("body")
        return node("for_statement", kids, fields)

    def c_style_for(self, kids: list, fields: list) -> Node:
        """`for (( INIT; TEST; UPDATE ))` then `do ... done` or `{ ... }` (bash(1), for)."""
        kids.append(self.expect("(("))
        fields.append(None)
        self.enter()
        for clause in ("initializer", "condition", "update"):
            before = len(kids)
            self.arithmetic_atoms(kids, stops=";" if clause != "update" else "")
            fields += [clause] * (len(kids) - before)
            if clause != "update":
                if not self.at(";"):
                    self.fail("a C-style for this parser does not read")
                kids.append(self.expect(";"))
                fields.append(None)
        if not self.at("))"):
            self.fail("a C-style for this parser does not read")
        self.depth -= 1
        kids.append(self.expect("))"))
        fields.append(None)
        self.blanks()
        if self.char() == ";" and not self.at(";;"):
            kids.append(self.expect(";"))
            fields.append(None)
        self.blanks_newlines()
        if self.keyword() == "{":
            kids.append(self.compound())
        else:
            kids.append(self.do_group())
        fields.append("body")
        return node("c_style_for_statement", kids, fields)

    def case_statement(self) -> Node:
        """`case WORD in [(] PATTERN [| PATTERN]... ) STATEMENTS ;; ... esac` (bash(1), case)."""
        kids = [self.expect("case")]
        fields: list = [None]
        self.blanks()
        if self.char() in ("\0", "\n", ";", "&", "|", ")", "#"):
            self.fail("a case without a word")
        kids.append(self.literal("case"))
        fields.append("value")
        self.blanks_newlines()
        if self.char() == ";":
            self.fail("a case with `;` before `in`")
        kids.append(self.expect_word("in"))
        fields.append(None)
        while True:
            self.blanks_newlines()
            c = self.char()
            if c == "#":
                kids.append(self.comment())
                fields.append(None)
                continue
            if self.keyword() == "esac":
                break
            if c == "\0":
                self.fail("a case without esac")
            item = self.case_item()
            kids.append(item)
            fields.append(None)
            if item.fields[-1] is None and item.children[-1].type != ";;":
                # no terminator: this must be the last item
                self.blanks_newlines()
                if self.keyword() != "esac":
                    self.fail("a case item without `;;` before another")
                break
        items = [k for k in kids if k.type == "case_item"]
        if items:  # the last item's terminator has no field in tree-sitter-bash's tree
            last = items[-1]
            if last.fields[-1] == "fallthrough":
                self.fail("`;&` or `;;&` after the last case item")
            if last.fields[-1] == "termination":
                last.fields[-1] = None
        kids.append(self.expect("esac"))
        fields.append(None)
        return node("case_statement", kids, fields)

    def case_item(self) -> Node:
        kids: list = []
        fields: list = []
        if self.char() == "(":
            kids.append(self.expect("("))
            fields.append(None)
            self.blanks()
        while True:
            kids.append(self.case_pattern())
            fields.append("value")
            self.blanks()
            if self.char() == "|":
                kids.append(self.expect("|"))
                fields.append(None)
                self.blanks()
                continue
            break
        kids.append(self.expect(")"))
        fields.append(None)
        self.newline_end = -1
        self.statements(kids, fields, stops=(";;", "esac"), terminated=False)
        self.blanks()
        for end in _CASE_ENDS:
            if self.at(end):
                kids.append(self.expect(end))
                fields.append("termination" if end == ";;" else "fallthrough")
                return node("case_item", kids, fields)
        return self.clause("case_item", kids, fields)  # its span takes in the newline after it

    def case_pattern(self) -> Node:
        """A pattern of a case item: plain pattern text is one word (tree-sitter-bash makes some
        of them `extglob_pattern`, which dsl.subjects.shell reads alike); an extended glob
        (`@(a|b)`) is refused."""
        s, i, n = self.s, self.i, self.n
        j = i
        while j < n and s[j] not in "'\"$`()|;&<> \t\n\r\v\f\\{":
            j += 1
        if j > i and j < n and s[j] in ")| \t":
            self.count_word()
            self.i = j
            if s[i] == "#":
                self.fail("a case pattern that starts with #")
            return Node("word", i, j)
        if j < n and s[j] == "(":
            self.fail("an extended glob in a case pattern")
        return self.literal("case")

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
        self.blanks_newlines()
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
        return node("function_definition", kids, fields)

    def function_or_command(self) -> Node:
        end = self.word_end(self.i)
        if end > self.i and "=" not in self.s[self.i : end]:
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

    def plain_word(self, end: int) -> Node:
        start, self.i = self.i, end
        return Node("word", start, end)

    # commands

    def assignment_ahead(self) -> int:
        """The end of `NAME=` or `NAME+=` (or of `NAME[INDEX]` before `=` / `+=`) at the position
        (bash(1), PARAMETERS), else -1."""
        s, i = self.s, self.i
        m = ASSIGNMENT.match(s, i)
        if m is None:
            if i < self.n and s[i] in DIGITS:
                j = _NAME_CHARS.match(s, i).end()
                if s.startswith("=", j) or s.startswith("+=", j) or s.startswith("[", j):
                    self.fail("an assignment to a name that starts with a digit")
            return -1
        end = m.end()
        if s[end - 1] != "[":
            return end - (2 if s[end - 2] == "+" else 1)
        # `NAME[...]`: an assignment only when `=` or `+=` follows the matching `]`
        k = _SUBSCRIPT_AHEAD.match(s, end).end()
        if s.startswith("]=", k) or s.startswith("]+=", k):
            return end - 1
        return -1

    def assignment(self, name_end: int) -> Node:
        self.count_word()  # `NAME=` (its value, when there is one, counts as a word too)
        start = self.i
        if self.s.startswith("[", name_end):
            name = self.subscript(name_end)
        else:
            name = Node("variable_name", start, name_end)
            self.i = name_end
        op = self.expect("+=" if self.at("+=") else "=")
        kids, fields = [name, op], ["name", None]
        c = self.char()
        if c == "(":
            kids.append(self.array())
            fields.append("value")
        elif c == "#":  # `a=#b`: a word (a `#` starts a comment only where a word starts)
            end = self.word_end(self.i, hash_first=True)
            if end < self.n and self.s[end] not in WORD_END:
                self.fail("an assignment of a value that starts with # and goes on")
            self.count_word()
            kids.append(Node("word", self.i, end))
            fields.append("value")
            self.i = end
        elif c in ";&|)<>" and c != "\0":
            self.fail("an empty assignment before an operator")
        elif c != "\0" and c not in SPACE and not (c == "`" and self.backticks):
            kids.append(self.literal("value"))
            fields.append("value")
        return node("variable_assignment", kids, fields)

    def array(self) -> Node:
        """`(WORD...)` of an array assignment (bash(1), Arrays)."""
        self.enter()
        kids = [self.expect("(")]
        while True:
            self.blanks_newlines()
            c = self.char()
            if c == ")":
                break
            if c in ("\0", ";", "&", "|", "(", "#", "<", ">"):
                self.fail("an array this parser does not read")
            kids.append(self.literal("array"))
        kids.append(self.expect(")"))
        self.depth -= 1
        return node("array", kids)

    def command(self) -> Node:
        kids: list = []
        fields: list = []
        s = self.s
        while True:
            self.blanks()
            end = self.assignment_ahead()
            if end >= 0:
                kids.append(self.assignment(end))
                fields.append(None)
            elif self.redirect_ahead() and not self.at("<<"):
                if self.char() == "0":
                    if kids or not (self.at("0<") or self.at("0>")) or self.at("0<<"):
                        self.fail("a descriptor that starts with 0")
                    break  # `0<x rm`: tree-sitter-bash reads `0` as the command's name
                kids.append(self.file_redirect(many=False))
                fields.append("redirect")
            else:
                break
        self.blanks()
        c = self.char()
        if c in ("\0", "\n", ";", "&", "|", ")", "#", "<") or (c == "`" and self.backticks) or self.at(">("):
            # a statement of assignments or of redirections alone: dsl.subjects.shell lists it as
            # a command with no program, so it counts as a simple command
            if kids and all(f is None for f in fields) and c != "<" and not self.at(">("):
                self.count_command()
                return kids[0] if len(kids) == 1 else node("variable_assignments", kids)
            if kids and all(f == "redirect" for f in fields) and c != "<":
                self.count_command()
                return node("redirected_statement", kids, fields)
            self.fail("a command without a name")
        word = self.keyword()
        if word in DECLARATIONS or word in UNSETS:
            if kids:
                self.fail("assignments or redirections before a declaration")
            return self.declaration(word)
        if word in RESERVED:
            self.fail(f"the word {word!r} where a command name should be")
        end = self.word_end(self.i)
        if "=" in s[self.i : end]:
            self.fail("a command name holding `=` that is not an assignment")  # tree-sitter-bash: `--x=1 a`
        k = self.i
        while k < end and s[k] in NAME_CHAR:
            k += 1
        if k > self.i and s.startswith("#", k):
            self.fail("a command name of letters and digits then `#`")  # tree-sitter-bash: a name, a comment
        self.count_command()
        name = self.literal("name")
        named = Node("command_name", name.start_byte, name.end_byte, True, [name], None)
        name.parent = named
        kids.append(named)
        fields.append("name")
        self.arguments(kids, fields)
        return node("command", kids, fields)

    def arguments(self, kids: list, fields: list) -> None:
        """A command's words after its name, and its here-strings, up to what ends it (an
        operator, a redirection other than `<<<`, a newline, a comment)."""
        s, n = self.s, self.n
        backticks = self.backticks
        plain_match = PLAIN.match
        while True:
            i = self.i
            if i < n and s[i] in BLANK_START:
                self.i = i = BLANKS.match(s, i).end()
            if i >= n:
                return
            c = s[i]
            if c in _STATEMENT_END or c == "#" or (c == "`" and backticks):
                return
            if c not in _ARGUMENT_SPECIAL and i != kids[-1].end_byte:
                # most words: plain text up to a blank or an operator (literal()'s first case)
                m = plain_match(s, i)
                if m is not None:
                    end = m.end()
                    if end < n and s[end] == "\\":
                        end = WORD.match(s, i).end()
                    if end >= n or s[end] in WORD_END:
                        self.words += 1
                        if self.words > self.max_words:
                            self.too_many("words")
                        kind = "number" if c in _NUMBER_START and NUMBER.fullmatch(s, i, end) else "word"
                        kids.append(Node(kind, i, end))
                        fields.append("argument")
                        self.i = end
                        continue
                elif c == '"':  # a string of text alone (compound_literal()'s first case)
                    m = SIMPLE_STRING.match(s, i)
                    if m is not None:
                        end = m.end()
                        if (end >= n or s[end] in WORD_END) and s[i + 1 : end - 1].strip(" \t\v\f"):
                            self.words += 1
                            if self.words > self.max_words:
                                self.too_many("words")
                            kids.append(node("string", [Node('"', i, i + 1, False), Node("string_content", i + 1, end - 1),
                                                        Node('"', end - 1, end, False)]))
                            fields.append("argument")
                            self.i = end
                            continue
            if c in "<>&0123456789":
                if s.startswith("<<<", i):
                    kids.append(self.herestring())
                    fields.append("redirect")
                    continue
                if _REDIRECT_AHEAD.match(s, i):
                    if c == "0":
                        # `cat 0<x`: tree-sitter-bash reads `0` as a number word, then the
                        # redirection (dsl.subjects.shell knows the word is a descriptor)
                        if s[i + 1] not in "<>" or (s.startswith("0<<", i) and not s.startswith("0<<<", i)):
                            self.fail("a descriptor that starts with 0")
                        kids.append(Node("number", i, i + 1))
                        fields.append("argument")
                        self.i = i + 1
                        self.count_word()
                        if s.startswith("<<<", i + 1):
                            continue
                    return
            if c == "=" and (s.startswith("==", i) or s.startswith("=~", i)):
                self.fail("`==` or `=~` as an argument")
            if c == "(":
                self.fail("a parenthesis inside a command")
            if c == "$" and s.startswith('"', i + 1):
                # `echo $"x"`: tree-sitter-bash's bare `$`, then the string as a word of its own
                kids.append(leaf("$", i, i + 1))
                fields.append("argument")
                self.i = i + 1
                self.count_word()
                kids.append(self.literal("argument"))
                fields.append("argument")
                continue
            before = kids[-1].end_byte
            arg = self.literal("argument")
            if arg.start_byte == before:
                self.fail("a word that touches the one before it")
            kids.append(arg)
            fields.append("argument")

    def declaration(self, word: str) -> Node:
        self.count_command()
        kind = "unset_command" if word in UNSETS else "declaration_command"
        kids = [self.expect(word)]
        s = self.s
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
            if c in NAME_CHAR:
                end = self.word_end(self.i)
                text = s[self.i : end]
                if all(ch in NAME_CHAR for ch in text):
                    if end < self.n and s[end] not in SPACE and s[end] not in ";&|)":
                        if kind != "unset_command" or not s.startswith("[", end) or text[0] in DIGITS:
                            self.fail("a name followed by other text in a declaration")
                        # `unset a[1]`: tree-sitter-bash's name, then the subscript as a word
                        self.count_word()
                        kids.append(Node("variable_name", self.i, end))
                        self.i = end
                        kids.append(self.literal("argument"))
                        continue
                    if text.isdigit():
                        self.fail("a number in a declaration")
                    self.count_word()
                    kids.append(Node("variable_name", self.i, end))
                    self.i = end
                    continue
            kids.append(self.literal("argument"))
        return node(kind, kids)

    # redirections

    def file_redirect(self, many: bool) -> Node:
        s, n = self.s, self.n
        i = self.i
        m = _FILE_REDIRECT.match(s, i)
        if m is None:
            self.fail("a redirection operator this parser does not read")
        op_start, end = m.start(2), m.end()
        if s.startswith("<>", op_start) or s.startswith("<<", op_start):
            self.fail("a redirection operator this parser does not read", op_start)
        op = m.group(2)
        if op_start > i:
            if s[i] == "0":
                self.fail("a descriptor that starts with 0")
            kids = [Node("file_descriptor", i, op_start), Node(op, op_start, end, False)]
            fields = ["descriptor", None]
        else:
            kids = [Node(op, i, end, False)]
            fields = [None]
        self.i = end
        if op in (">&", "<&"):
            # bash 5.2 parse.y (read_token, "Hack <&- (close stdin) case"): a `-` right after `<&`
            # or `>&`, blanks between, is a token of its own (close) and what follows it starts a
            # new word: `rm / 2>& --rf` runs `rm / -rf`. tree-sitter-bash reads a file `--rf`.
            k = BLANKS.match(s, end).end()
            if s.startswith("-", k) and k + 1 < n and s[k + 1] not in WORD_END:
                self.fail("a word after a closed descriptor", k + 1)
        if op == ">&-" or op == "<&-":
            if many:  # after a command tree-sitter-bash would take the next word as its destination
                self.blanks()
                c = self.char()
                if c != "\0" and c not in SPACE and c not in ";&|)#<>":
                    self.fail("a word after a closed descriptor")
            return node("file_redirect", kids, fields)
        backticks = self.backticks
        while True:
            i = self.i
            if i < n and s[i] in BLANK_START:
                self.i = i = BLANKS.match(s, i).end()
            if i >= n:
                break
            c = s[i]
            if c in SPACE or c in ";&|)#" or (c == "`" and backticks):
                break
            if c in "<>" and not s.startswith("(", i + 1):
                break
            if c in DIGITS and _REDIRECT_AHEAD.match(s, i):
                break
            if c == "=" and (s.startswith("==", i) or s.startswith("=~", i)):
                self.fail("`==` or `=~` after a redirection")
            if c == "(":
                self.fail("a parenthesis after a redirection")
            if c == "$" and s.startswith('"', i + 1) and fields[-1] == "destination":
                self.fail("a translated string after a redirection's destination")
            if fields[-1] == "destination" and i == kids[-1].end_byte:
                self.fail("a word that touches the one before it")
            kids.append(self.literal("destination"))
            fields.append("destination")
            if not many:
                break
        if fields[-1] != "destination":
            self.fail("a redirection without a destination")
        return node("file_redirect", kids, fields)

    def herestring(self) -> Node:
        kids = [self.expect("<<<")]
        self.blanks()
        c = self.char()
        if c == "\0" or c in SPACE or c in ";&|)#<>(":
            self.fail("a here-string without a word")
        if c == "$" and self.char(1) == '"':
            self.fail("a translated string as a here-string")
        kids.append(self.literal("destination"))
        return node("herestring_redirect", kids, [None, None])

    def heredoc(self) -> Node:
        """`<<WORD` / `<<-WORD`, the rest of its line, the newline, the body and the end line
        (bash(1), Here Documents). The body is read here, at once: one heredoc per line."""
        if self.heredoc_line:
            self.fail("a second heredoc on one line")
        s = self.s
        strip = self.at("<<-")
        kids = [self.expect("<<-" if strip else "<<")]
        fields: list = [None]
        self.blanks()
        start = self.i
        delimiter, end, _ = self.heredoc_delimiter(start)
        kids.append(Node("heredoc_start", start, end))
        fields.append(None)
        self.i = end
        line_end = s.find("\n", end)
        if line_end < 0:
            self.fail("a heredoc with no body")
        self.heredoc_line = True
        self.blanks()
        if self.char() == "|" and not self.at("||"):
            pipe = [self.expect("|&" if self.at("|&") else "|")]
            self.blanks()
            pipe.append(self.and_or())
            kids.append(node("pipeline", pipe))
            fields.append(None)
        else:
            while self.redirect_ahead() and not self.at("<<"):
                if self.char() == "0":
                    self.fail("descriptor 0 after a heredoc")
                kids.append(self.file_redirect(many=True))
                fields.append("redirect")
                self.blanks()
            if self.at("&&") or self.at("||"):
                kids.append(self.expect(s[self.i : self.i + 2]))
                fields.append("operator")
                self.blanks()
                kids.append(self.and_or())
                fields.append("right")
        self.blanks()
        self.heredoc_line = False
        if self.i != line_end:
            self.fail("text after a heredoc's start this parser does not read")
        # the body: the lines up to one that is the delimiter (after its tabs, for <<-); the first
        # line that is the delimiter with blanks around it is that one, or refused: tree-sitter-bash
        # may end the body there, bash does not
        body_start = line_end + 1
        m = re.compile(r"^[ \t\r\v\f]*" + re.escape(delimiter) + r"[ \t\r\v\f]*$", re.M).search(s, body_start)
        if m is None:
            self.fail("a heredoc that does not end")
        end_line = m.start()
        if (m.group().lstrip("\t") if strip else m.group()) != delimiter:
            self.fail("a heredoc line that is its delimiter and blanks", end_line)
        tabs = 0
        if strip:
            while s.startswith("\t", end_line + tabs):
                tabs += 1
        body_to = end_line + tabs
        # tree-sitter-bash's body starts after the empty lines at its top (and, for <<-, tabs)
        body_from = body_start
        while body_from < body_to and s[body_from] in " \t\n":
            body_from += 1
        if s.startswith("\\", body_from):
            self.fail("an unquoted heredoc whose body starts with a backslash", body_from)
        # The body is one node: dsl.subjects.shell reads it from the text, as a script where a
        # shell reads it and else as the double-quoted string an unquoted body expands like (its
        # commands count towards the limits there). tree-sitter-bash's body holds the expansions
        # and substitutions of an unquoted body besides; the differential tests compare spans.
        if s[start] not in "'\"\\":
            self.heredoc_dollars(body_from, end_line)
        kids.append(Node("heredoc_body", body_from, body_to))
        fields.append(None)
        kids.append(Node("heredoc_end", body_to, body_to + len(delimiter)))
        fields.append(None)
        self.i = body_to + len(delimiter)
        return node("heredoc_redirect", kids, fields)

    def heredoc_delimiter(self, start: int) -> tuple[str, int, bool]:
        """The delimiter of `<<WORD` at `start`: (the line that ends the body, the end of WORD,
        whether it is quoted). WORD is a name wholly quoted ('EOF', "EOF": a backslash in double
        quotes quotes $ ` " \\), or unquoted with backslashes that quote one character each (\\EOF,
        E\\OF), as bash removes its quotes (bash(1), Here Documents) and tree-sitter-bash does too.
        WORD quoted in part (`E'O'F`) is refused: tree-sitter-bash ends the body at a line
        `E'O'F`, bash at `EOF`."""
        s, n = self.s, self.n
        c = self.char()
        if c in ("'", '"'):
            j = start + 1
            out = []
            while True:
                if j >= n or s[j] == "\n":
                    self.fail("an unterminated heredoc delimiter")
                ch = s[j]
                if ch == c:
                    break
                if c == '"' and ch == "\\" and j + 1 < n and s[j + 1] in '$`"\\':
                    out.append(s[j + 1])
                    j += 2
                    continue
                out.append(ch)
                j += 1
            delimiter, end, quoted = "".join(out), j + 1, True
        else:
            end = HEREDOC_WORD.match(s, start).end()
            word = s[start:end]
            quoted = "\\" in word
            delimiter = re.sub(r"\\(.)", r"\1", word) if quoted else word
        if end - start > MAX_HEREDOC_DELIMITER:  # (its body is searched for a line of it)
            self.fail(f"a heredoc delimiter longer than {MAX_HEREDOC_DELIMITER:,} characters")
        if not delimiter or any(ch not in NAME_CHAR and ch not in "-.@%+:,/!^~ $" for ch in delimiter) or (
                end < n and (s[end] not in SPACE and s[end] not in ";&|)<>")):
            self.fail("a heredoc delimiter this parser does not read")
        return delimiter, end, quoted

    def heredoc_dollars(self, start: int, end: int) -> None:
        """Refuses an unquoted heredoc body where tree-sitter-bash reads a `$` with an error: before
        a newline or the end, a special parameter, `[` or `((` (dsl.subjects.shell reads the body
        as bash expands it; where the two parsers disagree, the text is refused)."""
        m = _HEREDOC_BAD_DOLLAR.search(self.s, start, end)
        if m is not None:
            self.fail("a `$` in a heredoc that tree-sitter-bash reads with an error", m.start())

    # tests

    def test_command(self, word: str) -> Node:
        """`[ EXPRESSION ]` / `[[ EXPRESSION ]]` (bash(1), CONDITIONAL EXPRESSIONS) as
        tree-sitter-bash builds them: a word, `OP WORD`, `WORD OP WORD`, `! EXPRESSION`, and in
        `[[ ]]` parentheses and `&&` / `||` (`||` binding looser)."""
        close = "]]" if word == "[[" else "]"
        kids = [self.expect(word)]
        self.enter()
        self.blanks()
        kids.append(self.test_or(close))
        self.blanks()
        if self.keyword() != close:
            self.fail(f"a test this parser does not read (no {close!r} where expected)")
        kids.append(self.expect(close))
        self.depth -= 1
        return node("test_command", kids)

    def test_or(self, close: str) -> Node:
        left = self.test_and(close)
        while close == "]]":
            self.blanks()
            if not self.at("||"):
                break
            op = self.expect("||")
            self.blanks()
            left = node("binary_expression", [left, op, self.test_and(close)], ["left", "operator", "right"])
        return left

    def test_and(self, close: str) -> Node:
        left = self.test_unary(close)
        while close == "]]":
            self.blanks()
            if not self.at("&&"):
                break
            op = self.expect("&&")
            self.blanks()
            left = node("binary_expression", [left, op, self.test_unary(close)], ["left", "operator", "right"])
        return left

    def test_unary(self, close: str) -> Node:
        self.enter()
        c = self.char()
        if c == "!" and self.keyword() == "!":
            bang = self.expect("!")
            self.blanks()
            inner = self.test_unary(close)
            if inner.type == "binary_expression":
                self.fail("`!` before a binary test (tree-sitter-bash's precedence differs)")
            result = node("unary_expression", [bang, inner], ["operator", None])
        elif c == "(" and close == "]]":
            kids = [self.expect("(")]
            self.blanks()
            kids.append(self.test_or(close))
            self.blanks()
            kids.append(self.expect(")"))
            result = node("parenthesized_expression", kids)
        else:
            first = self.test_operand(close)
            self.blanks()
            if first.type == "test_operator":
                operand = self.test_operand(close)
                if operand.type == "test_operator":
                    self.fail("a test this parser does not read")
                result = node("unary_expression", [first, operand], ["operator", None])
            elif self.test_ends(close):
                result = first
            else:
                result = node("binary_expression", self.test_binary(first, close), ["left", "operator", "right"])
        self.depth -= 1
        return result

    def test_ends(self, close: str) -> bool:
        if self.keyword() == close:
            return True
        return close == "]]" and (self.at("&&") or self.at("||") or self.char() == ")")

    def test_binary(self, first: Node, close: str) -> list:
        s, i = self.s, self.i
        word = self.keyword()
        if word in _TEST_BINARY and (word not in ("<", ">") or close == "]]"):
            op = leaf(word, i, i + len(word))
            self.i = i + len(word)
        elif word.startswith("-") and word[1:].isalpha() and word.isascii() and word not in ("-a", "-o"):
            op = Node("test_operator", i, i + len(word))
            self.i = i + len(word)
        elif s.startswith("<", i) or s.startswith(">", i):
            self.fail("a redirection inside a test")
        else:
            self.fail("a test this parser does not read")
        self.blanks()
        if word == "=~":
            right = self.test_regex(close)
        elif word in ("==", "!=") and close == "]]":
            right = self.test_pattern(close)
        elif word in ("==", "!="):
            right = self.test_pattern(close)
        elif word == "=" and close == "]]":
            right = self.test_pattern(close, kind="word")
        else:
            right = self.test_operand(close)
            if right.type == "test_operator":
                self.fail("a test this parser does not read")
        return [first, op, right]

    def test_pattern(self, close: str, kind: str = "extglob_pattern") -> Node:
        """The right of `==` / `!=`: plain pattern text is one node (tree-sitter-bash's
        extglob_pattern, or a word where it says so), quoted text or an expansion a word."""
        s, i, n = self.s, self.i, self.n
        j = i
        while j < n and s[j] not in "'\"$`()|;&<> \t\n\r\v\f\\":
            j += 1
        if j > i and (j >= n or s[j] in " \t"):
            text = s[i:j]
            if text in ("]", "]]"):
                self.fail("a test without its right side")
            self.count_word()
            self.i = j
            if kind == "word" and any(ch in text for ch in "*?[]{}"):
                kind = "regex"  # tree-sitter-bash's names for these follow its scanner's heuristics
            return Node(kind, i, j)
        return self.test_operand(close)

    def test_regex(self, close: str) -> Node:
        """The right of `=~`: a quoted string, or regex text to the next blank with nothing
        bash would expand in it (tree-sitter-bash's `regex` token does not read expansions)."""
        c = self.char()
        if c in ('"', "'"):
            return self.test_operand(close)
        s, i, n = self.s, self.i, self.n
        j = i
        while j < n and s[j] not in " \t\n\r\v\f":
            if s[j] in "$`'\"\\":
                self.fail("a `=~` pattern holding an expansion, a quote or a backslash", j)
            j += 1
        if j == i:
            self.fail("a `=~` without a pattern")
        self.count_word()
        self.i = j
        return Node("regex", i, j)

    def test_operand(self, close: str) -> Node:
        c = self.char()
        if c == "\0" or c in SPACE or c in ";&|()<>":
            self.fail("a test this parser does not read")
        if c == "!" and self.keyword() == "!":
            self.fail("a test this parser does not read")
        if c == "-" and self.char(1).isalpha():
            end = self.word_end(self.i)
            text = self.s[self.i : end]
            if text[1:].isalpha() and text.isascii():
                start, self.i = self.i, end
                return Node("test_operator", start, end)
            self.fail("a test this parser does not read")
        word = self.keyword()
        if word in ("]", "]]", "=", "==", "!=", "=~"):
            self.fail("a test this parser does not read")
        if c == "$" and self.char(1) == '"':
            self.fail("a translated string in a test")
        result = self.literal("test")
        if result.type == "concatenation" and any(
                ch.type == "word" and self.s[ch.start_byte] in SPECIAL_WORD for ch in result.children):
            self.fail("a test this parser does not read")
        return result


def parse_expanded(source: bytes, max_commands: int = MAX_COMMANDS, max_words: int = MAX_WORDS) -> Tree:
    """The expansions and substitutions of `source` (UTF-8 bytes) read as the body of an unquoted
    heredoc, which bash expands (see _Parser.expanded_body): a tree whose root is a `heredoc_body`
    node over them. Raises BashSyntaxError as `parse` does (a substitution it does not read, past
    the limits)."""
    parser = _Parser(source.decode("latin-1"), max_commands, max_words)
    root = parser.expanded_body()
    return Tree(root, parser.commands, parser.words)


class Tree:
    """What `parse` returns: `root_node`, as a py-tree-sitter Tree has, and the simple commands
    and words the parser read (`commands`, `words`: what counts towards the limits)."""

    __slots__ = ("root_node", "commands", "words")

    def __init__(self, root: Node, commands: int = 0, words: int = 0):
        self.root_node = root
        self.commands = commands
        self.words = words


def parse(source: bytes, max_commands: int = MAX_COMMANDS, max_words: int = MAX_WORDS) -> Tree:
    """The tree of `source` (UTF-8 bytes). Raises BashSyntaxError for what it does not read, and
    past `max_commands` simple commands or `max_words` words. Every byte >= 0x80 is an ordinary
    word character (bash's syntax is all ASCII)."""
    parser = _Parser(source.decode("latin-1"), max_commands, max_words)
    root = parser.program()
    return Tree(root, parser.commands, parser.words)
