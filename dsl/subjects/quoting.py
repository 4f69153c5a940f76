"""Bash's quoting and word-level expansions, read without running anything: ANSI-C strings,
backslash escapes, brace expansion and line continuations (bash manual, "Quoting",
"Brace Expansion", "Escape Character")."""

from __future__ import annotations

import re

from dsl.values import EvalError


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
    sequence stays as written. Raises EvalError past `limit` words, and for a sequence number of
    more than 19 digits (past bash's intmax_t)."""
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
                # [0-9], not \d: bash reads only ASCII digits in a sequence ({١..٣} stays a word)
                m = re.fullmatch(r"(-?[0-9]+)\.\.(-?[0-9]+)(?:\.\.(-?[0-9]+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?[0-9]+))?", inner)
                if m is None:
                    continue  # `{x}`, `{}`: not an expansion
                if any(g is not None and len(g) > 19 for g in (m.group(1), m.group(2), m.group(3), m.group(6))):
                    # beyond bash's intmax_t (and int()'s 4300-digit limit): no reading is sure
                    raise EvalError(f"the brace expansion {text[:80]!r} holds a number too large to read")
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
