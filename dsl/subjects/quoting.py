"""Bash's quoting and word-level expansions, read without running anything: ANSI-C strings,
backslash escapes, brace expansion and line continuations (bash manual, "Quoting",
"Brace Expansion", "Escape Character")."""

from __future__ import annotations

import re

from dsl.values import EvalError


def _unescape_unquoted(text: str) -> str:
    # each `\X` is X. str.replace works left to right as the pairs are read: each `\\` is set
    # aside as a NUL first, so every backslash left but a last one quotes the character after it
    # (in C, without the list of 100,000 pieces re.split made: 2 ms for 50,000 pairs). A text
    # holding a NUL is split by the regex instead.
    text = text.replace("\\\n", "")
    if "\0" in text:
        return "".join(_ESCAPED.split(text))
    text = text.replace("\\\\", "\0")
    last = "\\" if text.endswith("\\") else ""
    return text.replace("\\", "").replace("\0", "\\") + last


_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


_ANSI_C = re.compile(r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|c(.)|(.))", re.DOTALL)
# the same escapes as one group (re.split keeps them between the text around them)
_ANSI_C_TOKEN = re.compile(r"(\\(?:[abeEfnrtv\\'\"?]|[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|c.|.))", re.DOTALL)
_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                  "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(text: str) -> str:
    """The value of bash's `$'...'` (the text between the quotes), with bash's escapes: \\n and the
    like, \\nnn (1-3 octal digits), \\xHH (1-2 hex), \\uHHHH (1-4), \\UHHHHHHHH (1-8), \\cX; any
    other backslash stays as written (bash manual, "ANSI-C Quoting"). Bash keeps the string as a C
    string, so it ends at the first NUL, however written (`\\0`, `\\x00`, `\\u0000`, `\\c@`):
    `$'-exec\\0'` is `-exec`, and so is its value here."""

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

    if "\\" not in text:
        return text.split("\x00", 1)[0]
    # the text between escapes as it is, each escape's value computed once per text (a long
    # `$'\x41\x41...'` repeats a few): one pass, one dictionary lookup an escape
    parts = _ANSI_C_TOKEN.split(text)
    memo: dict[str, str] = {}
    for k in range(1, len(parts), 2):
        escape = parts[k]
        value = memo.get(escape)
        if value is None:
            value = memo[escape] = one(_ANSI_C.match(escape))
        parts[k] = value
    return "".join(parts).split("\x00", 1)[0]


def _unescape_double(text: str) -> str:
    # inside "...", a backslash quotes $ ` " \\ (kept) and a newline (both removed)
    return "".join(filter(None, _ESCAPED_IN_DOUBLE_QUOTES.split(text)))


_ESCAPED_IN_DOUBLE_QUOTES = re.compile(r'\\([$`"\\])|\\\n')


# Hand-written scanners, each one pass over the text (the regexes they replace backtracked: the
# subscript one `[A-Za-z_][A-Za-z0-9_]*\[(.*(?:\$\(|`).*)\]` took cubic time on `a[$(a[$(...`).

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME = _NAME_START | frozenset("0123456789")


def subscript_substitution(text: str) -> str | None:
    """The text inside an array subscript that holds a command substitution: from the first
    `NAME[` (NAME a shell name, bash manual "Definitions") to the last `]` of `text`, when that
    text holds `$(` or a backtick; else None. One pass: O(n)."""
    close = text.rfind("]")
    i = text.find("[")
    while 0 <= i < close:
        j, named = i, False
        while j > 0 and text[j - 1] in _NAME:  # each name character is read for one `[` only
            j -= 1
            named = named or text[j] in _NAME_START
        if named:
            inner = text[i + 1 : close]
            return inner if "$(" in inner or "`" in inner else None  # a later `[` sees less
        i = text.find("[", i + 1)
    return None


def has_arithmetic_subscript(text: str) -> bool:
    """Whether `text` holds `NAME[` (NAME a shell name, bash manual "Definitions", anywhere in the
    text) whose index is not a plain number `[0-9]*]`: arithmetic bash evaluates when a builtin
    takes the text as a name (`read 'a[i]'`, `unset 'a[$(cmd)]'`). One pass: O(n), each name
    character read back for one `[` only and each digit after a `[` read once (a regex searched
    for the same scans the whole name again from each of its characters: O(n^2))."""
    i = text.find("[")
    while i >= 0:
        j, named = i, False
        while j > 0 and text[j - 1] in _NAME:
            j -= 1
            named = named or text[j] in _NAME_START
        if named:
            k = i + 1
            while k < len(text) and "0" <= text[k] <= "9":
                k += 1
            if k == len(text) or text[k] != "]":
                return True
        i = text.find("[", i + 1)
    return False


def has_brace_group(text: str) -> bool:
    """Whether `text` has a `{...}` with no brace inside and a `,` or `..` in it (a brace
    expansion bash may perform). One pass over the braces: O(n)."""
    if "{" not in text:
        return False
    open_at = -1
    for m in _BRACE_CHAR.finditer(text):
        if m.group() == "{":
            open_at = m.start()
        elif open_at >= 0:
            if text.find(",", open_at, m.start()) >= 0 or text.find("..", open_at, m.start()) >= 0:
                return True
            open_at = -1
    return False


_BRACE_CHAR = re.compile(r"[{}]")


class _DoubleQuotes:
    """Finds the `"` closing a double-quoted string that opens just before `start`, reading `\\X`
    as one unit. A search that fails marks every position it passed as failing, so that later
    searches stop there: over all searches of one text, O(n)."""

    def __init__(self, text: str):
        self.text = text
        self.failed: bytearray | None = None

    def close(self, start: int) -> int:
        text, n, failed = self.text, len(self.text), self.failed
        j, passed = start, []
        while j < n:
            if failed is not None and failed[j]:
                break
            ch = text[j]
            if ch == '"':
                return j
            passed.append(j)
            j += 2 if ch == "\\" else 1
        if self.failed is None:
            self.failed = bytearray(n + 1)
        for k in passed:
            self.failed[k] = 1
        return -1


def remove_quoted_parts(text: str) -> str:
    """`text` without its quoted parts: `'...'`, `$'...'`, `"..."` (a backslash escaping one
    character inside) and a backslash with the character it quotes. A quote that does not close
    stays as written. One pass: O(n)."""
    out: list[str] = []
    i, n = 0, len(text)
    single_closes = True  # false once a `'` has no `'` after it (none later has one either)
    doubles = _DoubleQuotes(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            i += 2
            continue
        quote = i + 1 if ch == "$" and text.startswith("'", i + 1) else i if ch == "'" else -1
        if quote >= 0 and single_closes:
            end = text.find("'", quote + 1)
            if end >= 0:
                i = end + 1
                continue
            single_closes = False
        elif ch == '"':
            end = doubles.close(i + 1)
            if end >= 0:
                i = end + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


MAX_BRACE_TEXT = 200_000  # characters brace_expand may read and write for one word, all levels together
_GROUP_CHAR = re.compile(r"[{},]")
# [0-9], not \\d: bash reads only ASCII digits in a sequence ({١..٣} stays a word)
_SEQUENCE = re.compile(r"(-?[0-9]{1,19})\.\.(-?[0-9]{1,19})(?:\.\.(-?[0-9]{1,19}))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?[0-9]{1,19}))?")


def brace_expand(text: str, limit: int = 256, _budget: list[int] | None = None) -> list[str]:
    """Bash's brace expansion of one unquoted word: `r{m,}` is `rm r`, `f{1..3}` is `f1 f2 f3`
    (also letters and a step: `{a..e..2}`), nested groups too (bash manual, "Brace Expansion").
    A group with neither a comma nor a sequence stays as written. Raises EvalError past `limit`
    words, and once the words it builds (every level together) pass MAX_BRACE_TEXT characters:
    the time is then O(MAX_BRACE_TEXT), whatever the word. A sequence whose numbers do not fit in
    64 bits stays as written, as in bash."""
    budget = [MAX_BRACE_TEXT] if _budget is None else _budget
    budget[0] -= len(text)
    if budget[0] < 0:
        raise EvalError(f"brace expansion makes more than {MAX_BRACE_TEXT:,} characters (at a {len(text):,}-character word)")
    depth, start = 0, -1
    for brace in _BRACE_CHAR.finditer(text):
        ch, i = brace.group(), brace.start()
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif depth:
            depth -= 1
            if depth:
                continue
            inner, parts, level, last = text[start + 1 : i], [], 0, 0
            for c in _GROUP_CHAR.finditer(inner):
                mark = c.group()
                if mark == ",":
                    if level == 0:
                        parts.append(inner[last : c.start()])
                        last = c.end()
                else:
                    level += 1 if mark == "{" else -1
            parts.append(inner[last:])
            if len(parts) == 1:
                m = _SEQUENCE.fullmatch(inner)
                if m is None:
                    continue  # `{x}`, `{}`: not an expansion
                if any(g is not None and len(g) > 19 for g in (m.group(1), m.group(2), m.group(3), m.group(6))):
                    # beyond bash's intmax_t (and int()'s 4300-digit limit): no reading is sure
                    raise EvalError(f"the brace expansion {text[:80]!r} holds a number too large to read")
                if m.group(1) is not None:
                    a, b, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
                    if max(abs(a), abs(b), step) >= 1 << 63:
                        continue  # bash leaves a sequence it cannot read as 64-bit integers as written
                    if abs(b - a) // step >= limit:
                        raise EvalError(f"the brace expansion {text[:80]!r} makes more than {limit} words")
                    parts = [str(v) for v in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]
                else:
                    a, b, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
                    parts = [chr(v) for v in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]
            out: list[str] = []
            head, tail = text[:start], text[i + 1 :]
            for part in parts:
                out.extend(brace_expand(head + part + tail, limit, budget))
                if len(out) > limit:
                    raise EvalError(f"the brace expansion {text[:80]!r} makes more than {limit} words")
            return out
    return [text]


MAX_HEREDOC_DELIMITER = 1024  # characters of the word after `<<`; a longer one is an error
# characters of a heredoc's word that need no care (the `else` of _HeredocDelimiters.word)
_DELIMITER_PLAIN = re.compile(r"[^\s;&|<>()\\'\"]+")


class _HeredocDelimiters:
    """Reads the word after a `<<` (bash manual, "Here Documents"): blanks, then characters
    other than blanks and `;&|<>()`, a backslash with the character it quotes, `'...'` and
    `"..."`; it ends before a quote that does not close. Searches for closing quotes remember
    where they failed, so all the heredocs of one text are read in O(n)."""

    def __init__(self, text: str):
        self.text = text
        self.doubles = _DoubleQuotes(text)
        self.no_single_from = len(text) + 1  # no `'` at or after this position

    def word(self, start: int) -> tuple[int, int] | None:
        """(start, end) of the delimiter word after position `start`, or None when there is none."""
        text, n = self.text, len(self.text)
        i = start
        while i < n and text[i] in " \t":
            i += 1
        begin = i
        while i < n:
            ch = text[i]
            if ch == "\\":
                if i + 1 >= n:
                    break
                i += 2
            elif ch == "'":
                end = text.find("'", i + 1) if i + 1 < self.no_single_from else -1
                if end < 0:
                    self.no_single_from = min(self.no_single_from, i + 1)
                    break
                i = end + 1
            elif ch == '"':
                end = self.doubles.close(i + 1)
                if end < 0:
                    break
                i = end + 1
            elif ch.isspace() or ch in ";&|<>()":  # str.isspace is what the regex \s reads
                break
            else:
                i = _DELIMITER_PLAIN.match(text, i).end()
        return (begin, i) if i > begin else None


def heredoc_delimiter(word: str) -> tuple[str, bool]:
    """The delimiter bash reads from the word after `<<` and whether it is quoted (bash manual,
    "Here Documents": quote removal is performed on the word, and the heredoc is quoted when any
    part of it is): `E'O'F`, `E"OF"`, `E""OF`, `E\\OF` are all `EOF`, quoted; bash 5.2 also
    decodes `$'...'` (`E$'\\x41'F` is `EAF`) and `$"..."` there. Raises EvalError for a quote that
    does not close. One pass: O(n)."""
    out: list[str] = []
    quoted, i, n = False, 0, len(word)
    while i < n:
        ch = word[i]
        if ch == "\\":
            quoted = True
            out.append(word[i + 1 : i + 2])
            i += 2
        elif ch == "'" or (ch == "$" and word.startswith("'", i + 1)):
            quoted, ansi = True, ch == "$"
            j = i + 2 if ansi else i + 1
            k = j
            while k < n and word[k] != "'":
                k += 2 if (ansi and word[k] == "\\") else 1
            if k >= n:
                raise EvalError("a heredoc's delimiter has a quote that does not close")
            out.append(_ansi_c(word[j:k]) if ansi else word[j:k])
            i = k + 1
        elif ch == '"' or (ch == "$" and word.startswith('"', i + 1)):
            quoted = True
            j = i + 2 if ch == "$" else i + 1
            k = j
            while k < n and word[k] != '"':
                k += 2 if word[k] == "\\" else 1
            if k >= n:
                raise EvalError("a heredoc's delimiter has a quote that does not close")
            out.append(_unescape_double(word[j:k]))
            i = k + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), quoted


def heredoc_end(text, begin: int, delimiter, quoted: bool, strip: bool, stop: int | None = None):
    """Where bash ends a heredoc whose body starts at `begin` of `text` (a str, or bytes with a
    bytes delimiter): (start, end) of the line that terminates it, `end` after its newline, or None
    when none does (the body runs to the end of the text). As bash reads it: a line equal to the
    delimiter, after the leading tabs are removed for `<<-`; in an unquoted heredoc, a backslash
    before a newline joins two lines first (`E\\` then `OF` ends `<<EOF`). Raises EvalError for a
    line continuation in an unquoted `<<-` heredoc, whose reading by bash is not followed here,
    and when no line has ended it at `stop` (a caller that expects the end there). O(body)."""
    nl, bs, tab = ("\n", "\\", "\t") if isinstance(text, str) else (b"\n", b"\\", b"\t")
    n, i = len(text), begin
    if quoted or (bs + nl not in text[begin:] and not text.endswith(bs)):
        # no line is continued: the lines bash reads are the text's, found by one search
        return _heredoc_end_line(text, begin, delimiter, strip, stop)
    while i < n:
        if stop is not None and i > stop:
            raise EvalError("a heredoc ends elsewhere for bash than for the parser")
        start, logical = i, []
        while True:
            end = text.find(nl, i)
            line = text[i:] if end < 0 else text[i:end]
            i = n if end < 0 else end + 1
            if not quoted and (len(line) - len(line.rstrip(bs))) % 2 == 1:
                if strip:
                    raise EvalError("a line continuation in a `<<-` heredoc cannot be read as bash would")
                logical.append(line[:-1])
                if end >= 0:
                    continue
            else:
                logical.append(line)
            break
        whole = text[:0].join(logical)
        if (whole.lstrip(tab) if strip else whole) == delimiter:
            return start, i
    return None


def _heredoc_end_line(text, begin: int, delimiter, strip: bool, stop: int | None):
    """heredoc_end where no line is continued: the first line from `begin` equal to the
    delimiter (after its leading tabs for `<<-`), by one regular-expression search."""
    nl, tab = ("\n", "\t") if isinstance(text, str) else (b"\n", b"\t")
    n = len(text)
    if stop is not None and stop < begin < n:
        raise EvalError("a heredoc ends elsewhere for bash than for the parser")
    eol = text.find(nl, begin)
    first = text[begin:] if eol < 0 else text[begin:eol]
    if begin < n and (first.lstrip(tab) if strip else first) == delimiter:  # `begin` starts a line
        return begin, (n if eol < 0 else eol + 1)
    escaped = re.escape(delimiter)
    tabs = ("\t*" if isinstance(text, str) else b"\t*") if strip else text[:0]
    caret, dollar = ("^", "$") if isinstance(text, str) else (b"^", b"$")
    m = None if eol < 0 else re.compile(caret + tabs + escaped + dollar, re.M).search(text, eol + 1)
    if m is None:
        if stop is not None and begin < n:
            # the line-by-line reading raised on reaching a line that starts after `stop`
            newline = text.find("\n" if isinstance(text, str) else b"\n", max(stop, begin))
            if begin > stop or (newline >= 0 and newline + 1 < n):
                raise EvalError("a heredoc ends elsewhere for bash than for the parser")
        return None
    start = m.start()
    if stop is not None and start > stop:
        raise EvalError("a heredoc ends elsewhere for bash than for the parser")
    return start, (m.end() + 1 if m.end() < n else n)


# For each state of splice_continuations, the text it copies to the output and nothing else,
# read at once: a backslash with the character it quotes (not a newline), what no branch of its
# loop reads (in N and B `(` and `)`, a `$` before neither `(` nor `'`, a `<` that starts no
# heredoc, a `#` that starts no comment, a newline when no heredoc waits), and in N, B and P
# whole quoted strings and comments that hold nothing it reads (it enters their state and leaves
# it where it was). What the loop does is unchanged; a text of words and quotes is one step.
_SPLICE_QUOTES = (r"|'[^']*'|\$'(?:[^\\']|\\[\s\S])*'|\"(?:[^\\$\"`]|\\[^\n]|\$(?!\())*\""
                  r"|(?:(?<=[ \t\n;&|(<>])|(?<![\s\S]))#[^\n]*(?=\n)")  # (a comment the text ends in stays open)
_SPLICE_P = r"[^\\$'\"`()#<\n]|\\[^\n]|\$(?![('])|<(?!<)|<(?=<<)|(?<=[^ \t\n;&|(<>])#" + _SPLICE_QUOTES
_SPLICE_NB = _SPLICE_P + r"|[()]"
_SPLICE_PLAIN = {  # (a newline too when no heredoc waits, for N, B and P: the second of each)
    "N": (re.compile(rf"(?:{_SPLICE_NB})++"), re.compile(rf"(?:{_SPLICE_NB}|\n)++")),
    "B": (re.compile(rf"(?:{_SPLICE_NB})++"), re.compile(rf"(?:{_SPLICE_NB}|\n)++")),
    "P": (re.compile(rf"(?:{_SPLICE_P})++"), re.compile(rf"(?:{_SPLICE_P}|\n)++")),
    "D": (re.compile(r"(?:[^\\$\"`]|\\[^\n]|\$(?!\())++"),) * 2,
    "S": (re.compile(r"[^']++"),) * 2,
    "A": (re.compile(r"(?:[^\\']|\\[\s\S])++"),) * 2,
    "C": (re.compile(r"[^\n]++"),) * 2,
}
# The characters splice_continuations reads one at a time (continuations, substitutions,
# parentheses, heredocs, quotes that hold them): past this many the text is an error. A text
# within shell()'s limits of simple commands and words holds a few thousand at most; a text of
# 100,000 such characters took 40 ms.
MAX_SPLICE_STEPS = 8192


def splice_continuations(text: str, _runs: bool = True) -> str:
    """`text` with bash's line continuations removed: a backslash before a newline disappears with
    it, outside single quotes, `$'...'`, comments and heredoc bodies (bash manual, "Escape
    Character"). The parser reads `r\\<newline>m` as two words where bash runs `rm`, so this
    runs before it. Raises EvalError when the quoting does not close and a continuation sits
    between two non-blank characters: how bash would join the words is then not known here, and
    past MAX_SPLICE_STEPS characters read one at a time. (`_runs=False`: every character one at a
    time, as before the runs were read at once; the tests compare the two.)"""
    if "\\\n" not in text:
        return text
    out: list[str] = []
    stack = ["N"]  # N plain, P inside $( ), B backticks, D "...", S '...', A $'...', C a comment
    unsure = False  # a `<<` whose delimiter never came
    pending: list[tuple[str, bool]] = []  # heredocs opened on this line: (delimiter, strip tabs)
    i, n = 0, len(text)
    delimiters = None  # made at the first `<<`
    steps = 0  # characters read one at a time (MAX_SPLICE_STEPS)
    while i < n:
        top = stack[-1]
        # a run of characters that only go to the output as they are, in one step
        run = _SPLICE_PLAIN[top][not pending].match(text, i) if _runs else None
        if run is not None:
            out.append(run.group())
            i = run.end()
            continue
        steps += 1
        if steps > MAX_SPLICE_STEPS:
            raise EvalError(f"the command has more than {MAX_SPLICE_STEPS:,} line continuations, substitutions, parentheses "
                            "and quotes around them: too many to read")
        ch = text[i]
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
                if delimiters is None:
                    delimiters = _HeredocDelimiters(text)
                found_word = delimiters.word(start)
                if found_word:
                    if found_word[1] - found_word[0] > MAX_HEREDOC_DELIMITER:
                        raise EvalError(f"a heredoc's delimiter is longer than {MAX_HEREDOC_DELIMITER:,} characters")
                    word = text[found_word[0] : found_word[1]]
                    if "\\\n" in word:
                        raise EvalError("a line continuation inside a heredoc's delimiter cannot be read as bash would")
                    pending.append((*heredoc_delimiter(word), strip))
                    out.append(text[i : found_word[1]])
                    i = found_word[1]
                    continue
            elif ch == "\n" and pending:
                out.append(ch)
                i += 1
                for delimiter, quoted, strip in pending:  # the bodies follow, one after the other, verbatim
                    found = heredoc_end(text, i, delimiter, quoted, strip)
                    out.append(text[i:] if found is None else text[i : found[1]])
                    i = n if found is None else found[1]
                    unsure |= found is None  # `$((1<<2))` is no heredoc: what followed was not read
                pending = []
                continue
        out.append(ch)
        i += 1
    spliced = "".join(out)
    if (stack != ["N"] or unsure) and re.search(r"[^\s]\\\n[^\s]", spliced):
        raise EvalError("a line continuation joins words inside quoting that does not close; it cannot be read as bash would")
    return spliced
