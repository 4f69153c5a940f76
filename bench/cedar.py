"""The generated policies in Cedar, and the same calls as Cedar requests (through `cedarpy`).

Translation (one Cedar policy per rule and selector, annotated `@id("<rule id>:<effect>")`):

* request: principal `Agent::"bench"`, action `Action::"call"`, resource `Tool::"<tool name>"`;
  context `{"tool": <name>, "args": <the arguments>, "d": <derived values>}`.
* `allow` → `permit`, `deny` → `forbid`; an exact selector is `resource == Tool::"name"`, a glob
  is `context.tool like "prefix*"`.
* `ask` has no Cedar equivalent (Cedar answers Allow or Deny). Here an ask rule is a `forbid` with
  an `:ask` id: it stops an allow, as ask beats allow in countersign. Which forbids matched is read
  from the answer's diagnostics (the determining policies), so the three-way effect is recovered:
  a determining deny → deny; only asks → ask; Deny with no determining policy → the default
  (ask). So one policy set serves both the allow/deny comparison and the three-way one.
* Conditions: `==`, `in [...]` (`[...].contains(x)`), `startswith` (`like "p*"`), `>`, `exists`
  (`has`), `and`/`or`/`not` map directly. Cedar has no string length, no shell parser and no path
  normalization, so `len(...)`, `shell(...)` and `path(...)` are computed by the caller (this
  module, with countersign's own `dsl.subjects`) into `context.d`, as a Cedar deployment would
  have to; that work is done before the timed Cedar call.
* Errors: countersign counts a deny or ask whose condition could not be evaluated (fail closed);
  Cedar skips a policy whose evaluation errors. The translation guards every field it reads with
  `has`, with the polarity countersign's three-valued logic gives a missing field: under a
  `forbid` a missing field makes its comparison true, under a `permit` false, flipped under
  `not`. A wrong *type* (a number where a string was expected) cannot be guarded in Cedar without
  a schema: there the engines may disagree, and the benchmark reports each disagreement.
* Values: JSON null has no Cedar form; it becomes a sentinel string. Floats become integers when
  integral, else strings; integers outside 64 bits become strings.
"""

from __future__ import annotations

from bench.generate import (
    PATH_GLOBS,
    And,
    Eq,
    Exists,
    In,
    LenGt,
    Not,
    NumGt,
    Or,
    PathGlob,
    PathUnder,
    Rule,
    ShellAll,
    ShellAny,
    ShellHead,
    ShellProgFlag,
    StartsWith,
    walk,
)
from dsl import subjects
from dsl.values import EvalError

NULL = "\x00null"
SEP = "\x1f"  # joins the first two words of a command in `heads`


def cedar_str(text: str, pattern: bool = False) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "*" and pattern:
            out.append("\\*")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def cedar_lit(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return cedar_str(value)


def _arg(name: str) -> str:
    return f"context.args[{cedar_str(name)}]"


def _derived(key: str) -> str:
    return f"context.d[{cedar_str(key)}]"


def _atom(node) -> tuple[str, str | None]:
    """(Cedar expression, guard that must hold for it to be evaluable) for one atom."""
    if isinstance(node, Exists):
        return f"context.args has {cedar_str(node.field)}", None
    if isinstance(node, (Eq, In, StartsWith, NumGt)):
        guard = f"context.args has {cedar_str(node.field)}"
        x = _arg(node.field)
        if isinstance(node, Eq):
            return f"{x} == {cedar_lit(node.value)}", guard
        if isinstance(node, In):
            return f"[{', '.join(cedar_lit(v) for v in node.values)}].contains({x})", guard
        if isinstance(node, StartsWith):
            return f"{x} like {cedar_str(node.prefix, pattern=True)[:-1]}*\"", guard
        return f"{x} > {node.limit}", guard
    if isinstance(node, LenGt):
        key = f"len.{node.field}"
        return f"{_derived(key)} > {node.limit}", f"context.d has {cedar_str(key)}"
    if isinstance(node, (ShellAny, ShellAll, ShellProgFlag, ShellHead)):
        key = f"sh.{node.field}"
        sh = _derived(key)
        guard = f"context.d has {cedar_str(key)}"
        if isinstance(node, ShellAny):
            return f"{sh}.programs.containsAny([{', '.join(map(cedar_str, node.programs))}])", guard
        if isinstance(node, ShellAll):
            return f"[{', '.join(map(cedar_str, node.programs))}].containsAll({sh}.programs)", guard
        if isinstance(node, ShellProgFlag):
            return f"{sh}.pf.contains({cedar_str(node.program + ':' + node.flag)})", guard
        return f"{sh}.heads.contains({cedar_str(SEP.join(node.words))})", guard
    if isinstance(node, (PathUnder, PathGlob)):
        key = f"path.{node.field}"
        p = _derived(key)
        guard = f"context.d has {cedar_str(key)}"
        if isinstance(node, PathUnder):
            return f"({p} == {cedar_str(node.base)} || {p} like {cedar_str(node.base, pattern=True)[:-1]}/*\")", guard
        likes = " || ".join(f"{p} like {cedar_str(pat)}" for pat in PATH_GLOBS[node.pattern])
        return f"({likes})", guard
    raise TypeError(node)


def condition(node, unknown: bool) -> str:
    """Cedar for a condition; `unknown` is what a comparison over a missing value stands for."""
    if isinstance(node, Not):
        return f"!({condition(node.operand, not unknown)})"
    if isinstance(node, And):
        return "(" + " && ".join(condition(o, unknown) for o in node.operands) + ")"
    if isinstance(node, Or):
        return "(" + " || ".join(condition(o, unknown) for o in node.operands) + ")"
    expr, guard = _atom(node)
    if guard is None:
        return expr
    return f"({guard} && {expr})" if not unknown else f"(!({guard}) || {expr})"


def translate(rules: list[Rule]) -> str:
    """The Cedar policy set for generated rules (see the module docstring)."""
    out = []
    for rule in rules:
        kind = "permit" if rule.effect == "allow" else "forbid"
        cond = condition(rule.condition, unknown=kind == "forbid") if rule.condition is not None else None
        for selector in rule.selectors:
            annotation = f"@id({cedar_str(rule.rule_id + ':' + rule.effect)})"
            if "*" in selector:
                scope = "principal, action, resource"
                parts = [f"context.tool like {cedar_str(selector)}"]  # tool names hold no literal *: every * is a wildcard
            else:
                scope = f"principal, action, resource == Tool::{cedar_str(selector)}"
                parts = []
            if cond is not None:
                parts.append(cond)
            when = f" when {{ {' && '.join(parts)} }}" if parts else ""
            out.append(f"{annotation}\n{kind}({scope}){when};")
    return "\n".join(out) + "\n"


# --- requests -------------------------------------------------------------------------------------


def cedar_value(value):
    if value is None:
        return NULL
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else repr(value)
    if isinstance(value, (list, tuple)):
        return [cedar_value(v) for v in value]
    if isinstance(value, dict):
        # keys Cedar's JSON reads as escapes (__entity, __extn, __expr) are renamed
        return {(k if not k.startswith("__") else "_" + k): cedar_value(v) for k, v in value.items()}
    return str(value)


def derived(rules: list[Rule], tool: str, args: dict, context: dict) -> dict:
    """What the Cedar conditions read from `context.d`, computed as countersign computes it; a
    value countersign could not compute (its condition would error) is left out."""
    wanted = {}
    for rule in rules:
        if rule.condition is None:
            continue
        for node in walk(rule.condition):
            if isinstance(node, LenGt):
                wanted[f"len.{node.field}"] = node
            elif isinstance(node, (ShellAny, ShellAll, ShellProgFlag, ShellHead)):
                wanted[f"sh.{node.field}"] = node
            elif isinstance(node, (PathUnder, PathGlob)):
                wanted[f"path.{node.field}"] = node
    cwd = context.get("cwd") if isinstance(context.get("cwd"), str) else None
    home = context.get("home") if isinstance(context.get("home"), str) else None
    out = {}
    for key, node in wanted.items():
        if node.field not in args:
            continue
        value = args[node.field]
        if key.startswith("len."):
            if isinstance(value, (str, list, dict)):
                out[key] = len(value)
        elif key.startswith("sh."):
            try:
                commands = subjects.parse_shell(value)
            except EvalError:
                continue
            out[key] = {
                "programs": sorted({c.program for c in commands}),
                "pf": sorted({f"{c.program}:{flag}" for c in commands for flag in c.flags}),
                "heads": sorted({SEP.join(c.argv[:2]) for c in commands if len(c.argv) >= 2}),
            }
        else:
            try:
                out[key] = subjects.make_path(value, cwd, home).text
            except EvalError:
                continue
    return out


def request(tool: str, args: dict, context: dict, candidate_rules: list[Rule]) -> dict:
    return {
        "principal": {"type": "Agent", "id": "bench"},
        "action": {"type": "Action", "id": "call"},
        "resource": {"type": "Tool", "id": tool},
        "context": {"tool": tool, "args": cedar_value(args), "d": derived(candidate_rules, tool, args, context)},
    }


def effect_of(response: dict) -> str:
    """countersign's three-way effect from a Cedar answer (see the module docstring)."""
    decision = response["decision"]
    if decision == "Allow":
        return "allow"
    if decision != "Deny":
        return "error"
    ids = response.get("diagnostics", {}).get("id_annotations_by_reason", {}).values()
    effects = {i.rsplit(":", 1)[1] for i in ids}
    if "deny" in effects:
        return "deny"
    return "ask"  # an ask forbid matched, or nothing did and the default (ask) applies
