"""Diagnostics for policy files, and the errors that carry them.

A diagnostic points at a span of the source (1-based line and column, as editors count) and
renders the way compilers do, so a terminal or an editor can jump to it::

    retail.policy:12:20: error: unknown name 'arg' (did you mean 'args'?)
       12 | deny refund when arg.amount > 100
          |                  ^^^

Errors stop a policy from loading; warnings do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

Severity = Literal["error", "warning"]

WINDOW = 120  # characters of a long source line shown around a diagnostic's column


def source_lines(text: str) -> list[str]:
    """The lines of a policy as the parser counts them: split at "\\n" only (a trailing "\\r" is
    dropped). `str.splitlines()` also splits at \\v, \\f, \\x1c-\\x1e, \\x85, U+2028 and U+2029,
    which would put a diagnostic's caret under the wrong line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a policy file: 1-based line and column of its first and last character."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def point(cls, line: int, column: int) -> "Span":
        return cls(line, column, line, column)


@dataclass(frozen=True, slots=True)
class FileSpan(Span):
    """A span in a file another one includes (`include "x.policy"`, dsl.includes): `file` is that
    file's name as diagnostics show it. Spans of the loaded file itself are plain `Span`s; a
    FileSpan never equals a Span."""

    file: str = ""


def span_file(span: Span | None) -> str | None:
    """The included file a span is in, or None for the loaded file itself."""
    return span.file if type(span) is FileSpan else None


def span_where(span: Span) -> str:
    """Where `span` is, for a message: `line N`, or `FILE:N:C` in an included file."""
    file = span_file(span)
    return f"{file}:{span.line}:{span.column}" if file else f"line {span.line}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding about a policy: what is wrong, where, and (optionally) how to fix it."""

    severity: Severity
    message: str
    span: Span | None
    help: str | None = None

    def render(self, source_name: str, source_text: str) -> str:
        """`name:line:col: severity: message`, then the offending line with carets under the span."""
        if self.span is None:
            head = f"{source_name}: {self.severity}: {self.message}"
            return head + (f"\n  help: {self.help}" if self.help else "")
        line, col = self.span.line, self.span.column
        out = [f"{source_name}:{line}:{col}: {self.severity}: {self.message}"]
        lines = source_lines(source_text)
        if 1 <= line <= len(lines):
            text = lines[line - 1].expandtabs(1)
            gutter = f"{line:>5} | "
            if self.span.end_line == line and self.span.end_column >= col:
                width = self.span.end_column - col + 1
            else:
                width = max(1, len(text) - col + 1)
            offset = col - 1  # where the caret starts in the shown text
            if len(text) > WINDOW:  # a very long line: show a window around the column
                start = max(0, min(col - 1 - WINDOW // 3, len(text) - WINDOW))
                prefix = "…" if start else ""
                suffix = "…" if start + WINDOW < len(text) else ""
                text = prefix + text[start : start + WINDOW] + suffix
                offset = col - 1 - start + len(prefix)
                width = max(1, min(width, WINDOW - (col - 1 - start)))
            out.append(gutter + text)
            out.append(" " * (len(gutter) - 2) + "| " + " " * offset + "^" * width)
        if self.help:
            out.append(f"  help: {self.help}")
        return "\n".join(out)


@dataclass(slots=True)
class PolicyError(Exception):
    """A policy could not be loaded: a syntax error or one or more check errors.

    `diagnostics` holds every finding (errors first, in source order); `render()` formats them all
    against the source text for a terminal.
    """

    source_name: str
    source_text: str
    diagnostics: Sequence[Diagnostic] = field(default_factory=tuple)
    # The texts of the files it includes, by the names their spans carry (`FileSpan.file`), so a
    # diagnostic in one renders with that file's name and line.
    included: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        Exception.__init__(self, self.render())

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def render(self) -> str:
        return "\n".join(d.render(*self.source_of(d)) for d in self.diagnostics)

    def source_of(self, diagnostic: Diagnostic) -> tuple[str, str]:
        """(name, text) of the file `diagnostic` points into."""
        file = span_file(diagnostic.span)
        if file is not None and file in self.included:
            return file, self.included[file]
        return self.source_name, self.source_text

    def __str__(self) -> str:  # dataclass would otherwise print the fields
        return self.render()


class PolicyInputError(ValueError):
    """A call handed to a policy is not well formed (the tool is not a string, the arguments or the
    context are not a JSON object). Raised before any rule is evaluated."""
