"""Text for `countersign policy explain` and `countersign policy test` (the commands only render
what dsl.explain and dsl.cases compute)."""

from __future__ import annotations

import json
from typing import Any

ITEMS_SHOWN = 30  # items of a quantifier listed before "... N more"
TEXT_LIMIT = 110  # characters of a sub-condition's text shown on its line


def explanation_lines(e: Any) -> list[str]:
    """An `Explanation` (dsl.explain) for a terminal."""
    out = [
        f"policy {e.policy!r} ({e.source}, sha256 {e.policy_digest[:16]}…)",
        f"call   {e.tool} {_json(e.args)}" + (f"  context {_json(e.context)}" if e.context else ""),
        "",
        f"effect: {e.effect}" + (" (the policy's default)" if e.by_default else ""),
    ]
    for reason in e.reasons:
        out.append(f"  reason: {reason}")
    if e.deciding:
        lines = {r.rule: r.line for r in e.rules}
        out.append("  decided by: " + ", ".join(f"{rule} (line {lines[rule]})" for rule in e.deciding))
    if e.requirements is not None:
        r = e.requirements
        out.append(
            f"  needs: {r.describe()}; decisions {', '.join(r.decisions)}; "
            + (f"expires after {r.timeout_seconds}s as a rejection" if not r.stages
               else f"escalates after {r.timeout_seconds}s" + r.describe_escalation())
            + (f"; {r.rememberable.describe()}" if r.rememberable is not None else "")
        )
    p = e.precedence
    out.append(f"precedence: {p.rule}")
    if p.counted:
        out.append("  counted: " + "; ".join(f"{effect} {', '.join(ids)}" for effect, ids in p.counted.items()))
    out.append("")
    m = e.rules_not_covering
    others = f" ({m} other {'rule does' if m == 1 else 'rules do'} not cover it)" if m else ""
    if not e.rules:
        out.append(f"no rule covers {e.tool}{others}")
        return out
    n = len(e.rules)
    out.append(f"rules considered: {n} {'rule covers' if n == 1 else 'rules cover'} {e.tool}, in file order{others}")
    for r in e.rules:
        out.append("")
        mark = "*" if r.deciding else " "
        where = f"{r.file}:{r.line}" if getattr(r, "file", None) else f"line {r.line}"
        out.append(f"{mark} {where} [{r.rule}] {r.effect} {', '.join(r.selectors)}  (selector {r.covered_by})")
        out.append(f"    {r.result.upper()}: {r.why}")
        if r.error is not None and r.steps is None:
            out.append(f"    error: {r.error}")
        if r.steps is not None:
            out.extend(_step_lines(r.steps, 4))
    return out


def _step_lines(step: Any, indent: int) -> list[str]:
    pad = " " * indent
    if step.kind in ("path", "call", "literal", "list") or (step.kind == "let" and step.result == "value"):
        return _operand_lines(step, indent)
    text = step.text if len(step.text) <= TEXT_LIMIT else step.text[: TEXT_LIMIT - 1] + "…"
    head = f"{pad}{step.result:<5}  {text}"
    if step.match is not None:
        head += f"   [{step.match}]"
    if step.role == "decided":
        head += "   <- decided"
    elif step.role == "after":
        head += "   (not needed: already settled)"
    out = [head]
    if step.error is not None and not any(c.error == step.error for c in step.children):
        out.append(f"{pad}       error: {step.error}")
    if step.role == "after":
        return out
    if step.how is not None and ((step.kind == "compare" and _worth_saying(step)) or step.kind == "let"):
        out.append(f"{pad}       {step.how}")
    children = list(step.children)
    if step.kind in ("any", "all") and children:
        out.extend(_operand_lines(children[0], indent + 7))
        items = children[1:]
        if not items and step.error is None:
            out.append(f"{pad}       (the list is empty: '{step.kind}' is {'false' if step.kind == 'any' else 'true'})")
        shown = items[:ITEMS_SHOWN]
        for item in shown:
            out.extend(_step_lines(item, indent + 2))
        if len(items) > len(shown):
            out.append(f"{pad}  … {len(items) - len(shown)} more items")
        return out
    for child in children:
        out.extend(_step_lines(child, indent + 2) if child.kind not in ("path", "call", "literal", "list") else _operand_lines(child, indent + 7))
    return out


def _worth_saying(step: Any) -> bool:
    """How a comparison matched, in words, where it is not obvious: exact or prefix on lists,
    path globs, under, affixes of a path."""
    if step.match in ("prefix", "suffix", "glob", "path-glob", "under"):
        return True
    return step.match == "exact" and any(c.value is not None and isinstance(c.value, list) for c in step.children)


def _operand_lines(step: Any, indent: int) -> list[str]:
    """A field, a function's result or a literal: `text = value`, then what a call read."""
    if step.kind in ("literal", "list"):
        return []
    pad = " " * indent
    if step.error is not None:
        out = [f"{pad}{step.text}: error: {step.error}"]
    else:
        line = f"{pad}{step.text} = {step.shown}"
        if step.subject is not None:
            line += f"   (from {step.subject})"
        if step.seqs:  # a history read: the ledger events it used
            shown = ", ".join(str(q) for q in step.seqs[:10]) + (f", … ({len(step.seqs)} in all)" if len(step.seqs) > 10 else "")
            line += f"   (events {shown})"
        out = [line]
    for child in step.children:
        out.extend(_operand_lines(child, indent + 2))
    return out


def report_lines(report: Any) -> tuple[list[str], list[str]]:
    """A `Report` (dsl.cases): the failures (for stderr) and the summary with coverage (stdout)."""
    failures: list[str] = []
    for r in report.failed:
        c = r.case
        call = f"{c.tool} {_json(c.args)}" + (f" context {_json(c.context)}" if c.context else "")
        failures.append(f"{report.cases_file}:{c.line}: FAIL: {_clip(call)}")
        for problem in r.problems:
            failures.append(f"  {problem}")
        for loc in r.locations:
            where = f"{report.policy_file}:{loc.line}" if loc.line is not None else report.policy_file
            failures.append(f"  {where}: {loc.note}")
        for reason in r.reasons:
            failures.append(f"  reason: {_clip(reason)}")
    total, failed = len(report.results), len(report.failed)
    summary = [f"{report.cases_file}: {total} case{'s' if total != 1 else ''} against {report.policy_file} (policy {report.policy!r}): {total - failed} passed, {failed} failed"]
    if report.unexercised:
        summary.append(f"rules no case exercised ({len(report.unexercised)}):")
        for rule in report.unexercised:
            summary.append(f"  {report.policy_file}:{rule.line}: {rule.effect} [{rule.rule}] {', '.join(rule.selectors)}")
    else:
        summary.append("every rule was exercised by some case")
    if report.default_cases == 0:
        summary.append("no case was decided by the policy's default")
    return failures, summary


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
