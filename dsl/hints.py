"""The rewrite the checker offers for a comparison that can never be true because its literal is
spelled as the normalized value never is (`dsl.checker`'s "this comparison is never true").

`rewrite(...)` gives the whole comparison as it should be written, so that the rule matches what
its author meant, computed with the normalizers the rules run with (`split_flags` for flags,
`parse_shell` for a command line written as a program, `parse_url` for a host, `make_path` for a
path): `c.flags contains "-rf"` becomes `c.flags contains "r" and c.flags contains "f"` (the
short flags of a cluster are split), never `c.flags contains "rf"`, which would never match
either. `tests/test_hints.py` applies every rewrite and evaluates the call the author meant.
"""

from __future__ import annotations

from typing import Callable

from dsl import ast
from dsl.fmt import _Printer
from dsl.subjects import SINGLE_DASH_LONG, make_path, parse_shell, parse_url, split_flags
from dsl.values import EvalError


def flag_names(word: str, programs: frozenset[str] | None) -> list[str] | None:
    """The names a flag word is kept under in a command's `flags` (one for `--force` or `-r`,
    one per letter for a cluster `-rf`), for the programs the rule is about (None: any program
    without a flag table). None when the programs read the word differently."""
    readings = []
    for program in sorted(programs) if programs else [""]:
        flags, _ = split_flags(program, [word])
        chosen: list[str] = []
        covered: set[str] = set()
        # one name per spelling class: `-r` of rm gives r, R and recursive, which always come together
        for name in sorted(flags, key=lambda n: (len(n) == 1, word.find(n) if len(n) == 1 else 0, n)):
            if name in covered:
                continue
            single = ["-" + name] if len(name) == 1 else [("-" if program in SINGLE_DASH_LONG else "--") + name]
            covered |= set(split_flags(program, single)[0]) | {name}
            chosen.append(name)
        readings.append(chosen)
    if any(r != readings[0] for r in readings) or not readings[0]:
        return None
    return readings[0]


def _lit(value: str, span) -> ast.Literal:
    return ast.Literal(value, span)


def _field(base: ast.Expr, key: str) -> ast.Expr:
    if isinstance(base, ast.Path):
        return ast.Path(base.root, base.keys + (key,), base.span)
    assert isinstance(base, ast.Call)
    return ast.Call(base.name, base.args, base.span, base.name_span, base.keys + (key,))


def _base(subject: ast.Expr) -> ast.Expr | None:
    """`c` for `c.args`, `shell(x)[0]` for `shell(x)[0].args`."""
    if isinstance(subject, ast.Path) and subject.keys:
        return ast.Path(subject.root, subject.keys[:-1], subject.span)
    if isinstance(subject, ast.Call) and subject.keys:
        return ast.Call(subject.name, subject.args, subject.span, subject.name_span, subject.keys[:-1])
    return None


def _all(parts: list[ast.Expr], span) -> ast.Expr:
    return parts[0] if len(parts) == 1 else ast.And(tuple(parts), span)


def _contains_each(subject: ast.Expr, names: list[str], span) -> ast.Expr:
    return _all([ast.Compare("contains", subject, _lit(n, span), span) for n in names], span)


def _normal_host(text: str) -> str | None:
    try:
        return parse_url(text if "://" in text else f"http://{text.rstrip('.')}/").host
    except EvalError:
        return None


def _meaning(form: str, subject: ast.Expr, text: str, programs: frozenset[str] | None, span) -> tuple[str, object] | None:
    """What the literal `text` meant for a value of `form`: ("value", the literal to write
    instead) or ("test", a condition that holds for the values the author meant)."""
    if form in ("lower", "scheme") and text != text.lower():
        text = text.lower()
        if form == "lower":
            return "value", text
    if form == "host":
        if any(ch in text for ch in "*?["):  # a glob of hosts: only its case can be fixed here
            return ("value", text.lower()) if text != text.lower() else None
        host = _normal_host(text)
        return ("value", host) if host else None
    if form == "scheme":
        return "value", text.split(":", 1)[0].strip("/")
    if form == "ext":
        return "value", "." + text
    if form in ("program", "wrappers") and " " not in text.strip():
        return "value", text.rstrip("/").rsplit("/", 1)[-1]
    if form == "program":
        base = _base(subject)
        try:
            (command,) = parse_shell(text)
        except (EvalError, ValueError):
            return None
        if base is None or not command.program:
            return None
        parts: list[ast.Expr] = [ast.Compare("==", _field(base, "program"), _lit(command.program, span), span)]
        parts += [ast.Compare("contains", _field(base, "flags"), _lit(n, span), span) for n in command_flags(command, text)]
        parts += [ast.Compare("contains", _field(base, "args"), _lit(a, span), span) for a in command.args]
        return "test", _all(parts, span)
    if form == "args":
        base, names = _base(subject), flag_names(text, programs)
        if base is None or names is None:
            return None
        return "test", _contains_each(_field(base, "flags"), names, span)
    if form == "flags":
        names = flag_names(text, programs)
        return ("test", _contains_each(subject, names, span)) if names else None
    if form == "parts":
        names = [p for p in text.split("/") if p]
        return ("test", _contains_each(subject, names, span)) if names else None
    if form == "path":
        if any(ch in text for ch in "*?["):
            return None
        if text.startswith("/"):
            try:
                return "value", make_path(text, None, None).text
            except EvalError:
                return None
        return "test", ast.Compare("glob", subject, _lit(text, span), span)  # anchored at the cwd or home, as a path is
    return None


def command_flags(command, text: str) -> list[str]:
    """One name per flag word of a command line, as `flag_names` gives them for its program."""
    out: list[str] = []
    for word in text.split()[1:]:
        if word.startswith("-") and word not in ("-", "--"):
            for name in flag_names(word, frozenset({command.program})) or []:
                if name not in out:
                    out.append(name)
    return out


def rewrite(cmp: ast.Compare, form: str, subject: ast.Expr, bad: Callable[[str], bool], programs: frozenset[str] | None) -> str | None:
    """The comparison `cmp` (whose `subject` side is a normalized value of `form`) written so
    every literal `bad` refuses means what its author meant, as one line of policy text; None
    when there is no such rewrite."""
    span = cmp.span
    other = cmp.right if cmp.left is subject else cmp.left
    literals = list(other.items) if isinstance(other, ast.ListLiteral) else [other]
    negate = cmp.op in ("!=", "not_in")
    kept: list[ast.Expr] = []
    tests: list[ast.Expr] = []
    for lit in literals:
        if not (isinstance(lit, ast.Literal) and isinstance(lit.value, str) and bad(lit.value)):
            kept.append(lit)
            continue
        meant = _meaning(form, subject, lit.value, programs, span)
        if meant is None:
            return None
        kind, value = meant
        if kind == "value":
            kept.append(_lit(value, lit.span))  # type: ignore[arg-type]
        else:
            tests.append(value)  # type: ignore[arg-type]
    if isinstance(other, ast.ListLiteral):
        new_other: ast.Expr | None = ast.ListLiteral(tuple(kept), other.span) if kept else None
    else:
        new_other = kept[0] if kept else None
    op = {"!=": "==", "not_in": "in"}.get(cmp.op, cmp.op) if tests else cmp.op
    parts: list[ast.Expr] = []
    if new_other is not None:
        left, right = (subject, new_other) if cmp.left is subject else (new_other, subject)
        parts.append(ast.Compare(op, left, right, span))
    parts += tests
    expr: ast.Expr = parts[0] if len(parts) == 1 else ast.Or(tuple(parts), span)
    if tests and negate:
        expr = ast.Not(expr, span)
    return _Printer([]).flat(expr, "top")
