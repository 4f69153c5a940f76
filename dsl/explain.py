"""Why a policy decides a call the way it does: every rule considered, every sub-condition's value.

    from dsl import Policy
    from dsl.explain import explain
    report = explain(Policy.load("samples/coding-agent.policy"), "Bash", {"command": "sudo rm -rf /"},
                     {"cwd": "/home/u/proj"})
    report.effect                     # "deny"
    report.rules[1].steps             # a Step tree: each node's text, true/false/error, value

`explain()` returns an `Explanation` (msgspec Structs, so `msgspec.json.encode` gives the JSON that
`countersign policy explain --json` prints):

* the effect, reasons, deciding rules and requirements, taken from the very `Decision` that
  `Policy.evaluate` returns for the call (the explanation is built beside it, never instead of it);
* every rule whose selectors cover the tool (matched or not), in file order, with the selector
  that covers the tool, what its condition came to and whether the rule counted;
* for each condition, a tree of `Step`s: each sub-condition and operand with its source text,
  its result (true, false, error with the message, or the value of an operand), the normalized
  subject it saw (`shell(args.command)` → the commands, `path(args.file_path)` → the absolute
  path, `url(args.url)` → the URL and its host), how each comparison matched (exact or prefix,
  membership or substring, ...), for `and`/`or` the operand and for `any`/`all` the item that
  decided;
* the precedence that decided: deny beats ask beats allow, or the default when no rule counted.

The steps come from the traced compile mode (`dsl.compiler.compile_condition_traced`), which
returns what the compiled predicates return; `explain()` also checks, rule by rule, that the traced
outcome is the one recorded in the Decision, and raises if they ever differ.
"""

from __future__ import annotations

import json
import weakref
from decimal import Decimal
from typing import Any, Mapping

import msgspec

from dsl import ast, history_explain, lets, numbers, subjects, values
from dsl.compiler import Env, TracedItem, TraceStep, compile_condition_traced
from dsl.decision import PRECEDENCE, Decision
from dsl.errors import source_lines, span_file
from dsl.fmt import _Printer
from dsl.parser import parse
from dsl.policy import Policy
from dsl.requirements import Requirements
from dsl.subjects.emails import EmailValue
from dsl.values import EvalError

NESTED_TOO_DEEPLY = "the arguments are nested too deeply to evaluate"


class Step(msgspec.Struct, frozen=True, omit_defaults=True):
    """One evaluated node of a condition.

    - `text`: the node as written in the policy (for a quantifier's item: `c = <the item>`).
    - `line`, `column`: where it starts in the policy file.
    - `kind`: and, or, not, compare, any, all, item, path, call, literal, list.
    - `result`: true, false, error, or value (an operand that is not a condition: a field, a
      function's result, a literal).
    - `value`: what it evaluated to, as JSON; normalized subjects are objects with a `kind`
      (path, command, url) and their fields.
    - `shown`: the value for a person: `"rm"`, `/home/u/proj/.env`, `[rm -rf /]`,
      `https://docs.python.org/3/ (host docs.python.org)`.
    - `subject`: for a function call with fields (`path(args.p).name`), the normalized subject
      before the fields were read, shown.
    - `error`: why it could not be evaluated.
    - `op`, `match`, `how`: for a comparison, the operator, how it matched (exact, prefix,
      suffix, membership, substring, glob, path-glob, under, order) and that in a sentence.
    - `role`: `decided` for the operand of an and/or (the item of an any/all) that settled it, or
      whose error is the one reported; `after` for operands evaluated after that, for the
      explanation only (they could not change the result).
    - `index`: a quantifier item's position in its list.
    - `children`: the operands' steps, in evaluation order.
    - `file`: the included file the node is written in (`include`); absent for the policy's own.

    A use of a `let` is a step of kind `let`: its text is the use as written (`internal(r)`), its
    line and column the use's, `how` names the let and where it is defined, and its one child is
    the let's body with the arguments in place (the body's steps at the definition's lines).
    - `seqs`: for a read of the run's history (`run`, `calls()`, `sources()`, `from_tool()`), the
      seqs of the ledger events it used: the calls it went over, the proposals whose arguments or
      results the value appeared in (dsl.history_explain).
    """

    text: str
    line: int
    column: int
    kind: str
    result: str
    value: Any = None
    shown: str | None = None
    subject: str | None = None
    error: str | None = None
    op: str | None = None
    match: str | None = None
    how: str | None = None
    role: str | None = None
    index: int | None = None
    children: tuple["Step", ...] = ()
    file: str | None = None
    seqs: tuple[int, ...] = ()


class RuleTrace(msgspec.Struct, frozen=True, omit_defaults=True):
    """One rule whose selectors cover the tool.

    - `covered_by`: the selector that covers the tool (the first, in the order written).
    - `result`: true, false or error for a condition; `always` for a rule without one.
    - `counted`: the rule takes part in the decision (true, or an error on a deny or ask).
    - `deciding`: it is one of the rules that produced the effect.
    - `why`: what the result meant for this rule, in a sentence.
    - `steps`: the condition's Step tree (None without a condition, or when the arguments were
      nested too deeply to trace).
    - `file`: the included file the rule is written in (`line` is then that file's); absent for
      the policy's own rules.
    """

    rule: str
    line: int
    effect: str
    selectors: tuple[str, ...]
    covered_by: str
    result: str
    counted: bool
    deciding: bool
    why: str
    condition: str | None = None
    error: str | None = None
    reason: str | None = None
    steps: Step | None = None
    file: str | None = None


class Precedence(msgspec.Struct, frozen=True, omit_defaults=True):
    """How the counted rules became one effect.

    - `counted`: the ids of the rules that counted, by effect (deny, ask, allow).
    - `winner`: the strongest effect among them; None when no rule counted.
    - `by_default`: the policy's default decided.
    - `rule`: the precedence that decided, in a sentence.
    """

    counted: dict[str, tuple[str, ...]]
    by_default: bool
    rule: str
    winner: str | None = None


class Explanation(msgspec.Struct, frozen=True, omit_defaults=True):
    """Everything `countersign policy explain` shows for one call; see the module docstring.

    `rules_not_covering` counts the rules whose selectors do not cover the tool (never evaluated
    for it). `decision` is the Decision `Policy.evaluate` returned for the same call.
    """

    policy: str
    policy_digest: str
    source: str
    tool: str
    args: dict
    context: dict
    effect: str
    by_default: bool
    rules: tuple[RuleTrace, ...]
    rules_not_covering: int
    precedence: Precedence
    decision: Decision
    reasons: tuple[str, ...] = ()
    deciding: tuple[str, ...] = ()
    requirements: Requirements | None = None


def explain(policy: Policy, tool: str, args: Mapping[str, Any], context: Mapping[str, Any] | None = None, *,
            history: Any = None) -> Explanation:
    """Explain the decision `policy.evaluate(tool, args, context, history=history)`. Raises
    `PolicyInputError` as evaluate does for a call of the wrong shape."""
    decision = policy.evaluate(tool, args, context, history=history)  # validates the call, and is the answer
    context = dict(context or {})
    nodes, printer, traced, written = _traced_rules(policy)
    env = Env(tool, args, context, home=policy.home, history=history)
    outcomes = {o.rule: o for o in decision.outcomes}
    traces = []
    candidates = policy.rules_for(tool)
    for rule in candidates:
        node = nodes[rule.order]
        steps = None
        error = None
        if node.condition is None:
            holds, result = True, "always"
        else:
            recorded: list = []
            try:
                holds = traced[rule.order](env._replace(trace=recorded))
                result = "true" if holds else "false"
            except EvalError as exc:
                holds, error, result = False, exc.message, "error"
            except RecursionError:
                holds, error, result, recorded = False, NESTED_TOO_DEEPLY, "error", []
            except Exception as exc:  # a defect in a subject or an operator, as evaluate records it
                holds, error, result = False, values.failure_message(exc), "error"
            if recorded:
                steps = _step(recorded[-1], printer, env)
        counted = bool(holds) or (error is not None and rule.effect != "allow")
        outcome = outcomes.get(rule.rule_id)
        expected = (outcome.counted, outcome.error) if outcome is not None else (False, None)
        if (counted, error) != expected:  # the traced mode must never tell another story
            raise RuntimeError(
                f"explain disagrees with evaluate on rule {rule.rule_id}: traced {(counted, error)}, evaluated {expected}"
            )
        deciding = rule.rule_id in decision.deciding
        traces.append(
            RuleTrace(
                rule=rule.rule_id,
                line=rule.line,
                effect=rule.effect,
                selectors=rule.selectors,
                covered_by=_covering_selector(rule.selectors, tool),
                result=result,
                counted=counted,
                deciding=deciding,
                why=_why(rule.effect, result, counted, deciding, decision),
                condition=printer.flat(written[rule.order].condition) if node.condition is not None else None,
                error=error,
                reason=rule.reason,
                steps=steps,
                file=span_file(node.span),
            )
        )
    return Explanation(
        policy=policy.name,
        policy_digest=policy.digest,
        source=policy.source_name,
        tool=tool,
        args=dict(args),
        context=context,
        effect=decision.effect,
        by_default=decision.by_default,
        rules=tuple(traces),
        rules_not_covering=len(policy.rules) - len(candidates),
        precedence=_precedence(decision, policy),
        decision=decision,
        reasons=decision.reasons,
        deciding=decision.deciding,
        requirements=decision.requirements,
    )


_TRACED: "weakref.WeakKeyDictionary[Policy, tuple]" = weakref.WeakKeyDictionary()


def _traced_rules(policy: Policy) -> tuple[list[ast.Rule], _Printer, dict[int, Any], list[ast.Rule]]:
    """The policy's rule nodes (lets expanded, includes read: dsl.lets.reread), a printer for its
    source, a traced predicate per rule with a condition (by rule order), and the rules as
    written, built once per Policy (the same text the Policy compiled)."""
    cached = _TRACED.get(policy)
    if cached is None:
        tree, expansion, assembly = lets.reread(policy)
        nodes = tree.of_type(ast.Rule)
        written = list(expansion.written) if expansion is not None else nodes
        printer = lets.printer(policy, expansion, assembly)
        traced = {i: compile_condition_traced(n.condition) for i, n in enumerate(nodes) if n.condition is not None}
        cached = (nodes, printer, traced, written)
        _TRACED[policy] = cached
    return cached


# --- rules and precedence ---------------------------------------------------------------------


def _covering_selector(selectors: tuple[str, ...], tool: str) -> str:
    for selector in selectors:
        if selector == tool or (("*" in selector or "?" in selector) and values.selector_regex(selector).match(tool)):
            return selector
    return selectors[0]  # pragma: no cover - the index only returns rules that cover the tool


def _why(effect: str, result: str, counted: bool, deciding: bool, decision: Decision) -> str:
    if result == "false":
        return "the condition is false: the rule does not count"
    if result == "error" and not counted:
        return "the condition could not be evaluated: an allow never counts on an error"
    if result == "error":
        head = f"the condition could not be evaluated: it counts as matched for {effect} (fail closed)"
    elif result == "always":
        head = "no condition: the rule counts for every call of the tool"
    else:
        head = "the condition holds: the rule counts"
    if deciding:
        return head + "; it decides"
    if decision.effect != effect and decision.deciding:
        return head + f"; {decision.effect} beats {effect}"
    return head  # pragma: no cover - a counted rule either decides or loses to a stronger effect


def _precedence(decision: Decision, policy: Policy) -> Precedence:
    counted: dict[str, tuple[str, ...]] = {}
    for effect in PRECEDENCE:
        ids = tuple(o.rule for o in decision.outcomes if o.counted and o.effect == effect)
        if ids:
            counted[effect] = ids
    if decision.by_default:
        errored = [o.rule for o in decision.outcomes if o.error is not None]
        if policy.default.effect == "allow" and errored and decision.effect == "deny":
            rule = (
                f"no rule counted and the default is allow, but {', '.join(errored)} could not be evaluated: "
                "an error never allows, so the call is denied"
            )
        else:
            rule = f"no rule counted: the policy's default ({policy.default.effect}) applies"
        return Precedence(counted=counted, by_default=True, rule=rule)
    winner = next(e for e in PRECEDENCE if e in counted)
    beaten = [e for e in PRECEDENCE if e in counted and e != winner]
    if beaten:
        rule = f"deny beats ask beats allow: {winner} wins over {' and '.join(beaten)}"
    else:
        n = len(counted[winner])
        rule = f"deny beats ask beats allow: only {winner} rules counted ({n})"
    if decision.effect != winner:  # an ask no one could approve (only hand-built requirements)
        rule += f"; the result is {decision.effect}: {decision.reasons[-1]}"
    return Precedence(counted=counted, by_default=False, rule=rule, winner=winner)


# --- steps ------------------------------------------------------------------------------------

_KINDS = {
    ast.And: "and", ast.Or: "or", ast.Not: "not", ast.Compare: "compare", ast.Path: "path",
    ast.Call: "call", ast.Literal: "literal", ast.ListLiteral: "list",
    ast.Arith: "arith", ast.Neg: "arith", ast.Projection: "projection",
}


def _step(ts: TraceStep, printer: _Printer, env: Env) -> Step:
    node = ts.node
    children = [_step(c, printer, env) for c in ts.children]
    result = "error" if ts.error is not None else "true" if ts.value is True else "false" if ts.value is False else "value"
    fields: dict[str, Any] = {}
    if node is None:  # an operand after the deciding one that overflowed the stack
        return Step(text="(not evaluated)", line=0, column=0, kind="error", result="error", error=ts.error)
    if isinstance(node, TracedItem):
        q = node.quantifier
        text, kind = f"{q.var} = {show(node.item)}", "item"
        line, column = q.span.line, q.span.column
        fields["index"] = node.index
    else:
        use = printer.use_of(node) if hasattr(printer, "use_of") else None
        text = printer.expanded(node) if use is not None else printer.flat(node)
        kind = _KINDS.get(type(node), "quantifier")
        line, column = node.span.line, node.span.column
        if isinstance(node, ast.Quantifier):
            kind = node.kind
            children = children[:1] + _mark_items(children[1:], node.kind == "any", result)
        elif isinstance(node, (ast.And, ast.Or)):
            children = _mark(children, isinstance(node, ast.Or), result)
        elif isinstance(node, ast.Compare):
            fields["op"] = node.op.replace("_", " ")
            if ts.error is None or len(ts.children) == 2:
                left = ts.children[0].value if ts.children else None
                right = ts.children[1].value if len(ts.children) > 1 else None
                fields["match"], fields["how"] = _match(node.op, left, right, env)
    if result == "value" or (ts.error is None and kind in ("path", "call")):
        fields["value"] = to_json(ts.value)
        fields["shown"] = show(ts.value)
    if ts.subject is not None:
        fields["subject"] = show(ts.subject)
    file = span_file(node.quantifier.span if isinstance(node, TracedItem) else node.span)
    if file is not None:
        fields["file"] = file
    if isinstance(node, (ast.Path, ast.Call)) and ts.error is None:
        seqs = history_explain.seqs_used(node, ts.value, ts.children, env)
        if seqs:
            fields["seqs"] = seqs
    step = Step(text=text, line=line, column=column, kind=kind, result=result, error=ts.error, children=tuple(children), **fields)
    use = printer.use_of(node) if hasattr(printer, "use_of") and not isinstance(node, TracedItem) else None
    return _let_step(step, use, printer) if use is not None else step


def _let_step(step: Step, use: "lets.LetUse", printer: _Printer) -> Step:
    """The step of a let's use (see Step), around the step of its expanded body."""
    head, where = lets.use_text(use)
    fields: dict[str, Any] = {}
    file = span_file(use.use)
    if file is not None:
        fields["file"] = file
    return Step(text=printer.flat(use.written), line=use.use.line, column=use.use.column, kind="let", result=step.result,
                value=step.value, shown=step.shown, error=step.error, how=f"let {head}, defined at {where}", children=(step,), **fields)


def _mark(children: list[Step], deciding: bool, result: str) -> list[Step]:
    """Mark, among an and/or's operands, the one that settled it (or whose error is reported)
    and the ones evaluated after it for the explanation only."""
    settled = None
    for i, child in enumerate(children):
        if child.result != "error" and _truthy(child) is deciding:
            settled = i
            break
    if settled is None and result == "error":
        settled = next((i for i, c in enumerate(children) if c.result == "error"), None)
        return [msgspec.structs.replace(c, role="decided") if i == settled else c for i, c in enumerate(children)]
    if settled is None:
        return children
    return [
        msgspec.structs.replace(c, role="decided" if i == settled else "after") if i >= settled else c
        for i, c in enumerate(children)
    ]


def _mark_items(items: list[Step], deciding: bool, result: str) -> list[Step]:
    """As `_mark`, for a quantifier's items: an item decides when its body `is` true (any) or
    false (all), as the compiled quantifier tests it."""
    settled = next((i for i, s in enumerate(items) if s.result == ("true" if deciding else "false")), None)
    if settled is None and result == "error":
        settled = next((i for i, s in enumerate(items) if s.result == "error"), None)
        return [msgspec.structs.replace(s, role="decided") if i == settled else s for i, s in enumerate(items)]
    if settled is None:
        return items
    return [msgspec.structs.replace(s, role="decided" if i == settled else "after") if i >= settled else s for i, s in enumerate(items)]


def _truthy(step: Step) -> bool:
    if step.result in ("true", "false"):
        return step.result == "true"
    return bool(step.value)  # an operand that is not a boolean counts by Python truthiness, as compiled


_HOW = {
    "exact": "exact: the whole value must be equal",
    "exact-list": "exact: the whole list must be equal, item by item (use startswith for a prefix)",
    "prefix": "prefix: the string starts with the other",
    "prefix-path": "prefix of the path's text, character by character (use under for whole segments)",
    "prefix-list": "prefix: the first items of the list must equal the other list, item by item",
    "suffix": "suffix: the string ends with the other",
    "suffix-list": "suffix: the last items of the list must equal the other list, item by item",
    "membership": "membership: equal to some item of the list",
    "substring": "substring: found anywhere in the string",
    "glob": "glob: * matches any run of characters (/ included), ? one character",
    "path-glob": "path glob: * within one segment, ** across any number of segments",
    "under": "under: the path is the base or inside it, by whole segments (not a string prefix)",
    "order": "order: numbers by value, strings by code point",
}


def _match(op: str, left: Any, right: Any, env: Env) -> tuple[str, str]:
    kl, kr = values.kind(left), values.kind(right)
    if op in ("==", "!="):
        key = "exact-list" if kl == kr == "list" else "exact"
    elif op in ("startswith", "endswith"):
        stem = "prefix" if op == "startswith" else "suffix"
        key = f"{stem}-list" if kl == "list" else ("prefix-path" if kl == "path" and stem == "prefix" else stem)
    elif op in ("in", "not_in"):
        key = "substring" if kr == "string" else "membership"
    elif op == "contains":
        key = "substring" if kl == "string" else "membership"
    elif op == "glob":
        key = "path-glob" if kl == "path" else "glob"
    elif op == "under":
        how = _HOW["under"]
        try:
            cwd, home = env.cwd(), env.home_dir()
            how += f": {subjects.make_path(left, cwd, home)} under {subjects.make_path(right, cwd, home)}"
        except Exception:  # only the explanation's wording: the decision is made
            pass
        return "under", how
    else:
        key = "order"
    return ("path-glob" if key == "path-glob" else key.split("-")[0]), _HOW[key]


# --- values -----------------------------------------------------------------------------------

SHOWN_LIMIT = 240


def to_json(value: Any) -> Any:
    """A value as JSON: normalized subjects become objects with a `kind` and their fields."""
    if isinstance(value, subjects.PathValue):
        return {"kind": "path", "text": value.text}
    if isinstance(value, subjects.WinPathValue):
        return {"kind": "path", "style": "windows", "text": str(value)}
    if isinstance(value, (subjects.Command, subjects.UrlValue, EmailValue)):
        out = {"kind": value.KIND}
        for name in value.FIELDS:
            out[name] = to_json(getattr(value, name))
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if type(value) is Decimal:  # a result of arithmetic (dsl.numbers)
        return numbers.to_json(value)
    return value


def show(value: Any) -> str:
    """A value for a person, on one line: a path as its text, a command as its words (with the
    wrappers that ran it), a URL with its host, anything else as JSON."""
    text = _show(value)
    return text if len(text) <= SHOWN_LIMIT else text[: SHOWN_LIMIT - 1] + "…"


def _show(value: Any) -> str:
    if isinstance(value, (subjects.PathValue, subjects.WinPathValue)):
        return str(value)
    if isinstance(value, subjects.Command):
        notes = [f"via {' '.join(value.wrappers)}"] if value.wrappers else []
        if value.nested:
            notes.append("nested")
        if value.dynamic:
            notes.append("dynamic")
        return " ".join(value.argv) + (f" ({', '.join(notes)})" if notes else "")
    if isinstance(value, subjects.UrlValue):
        return f"{value.text} (host {value.host})"
    if isinstance(value, EmailValue):
        return value.text
    if isinstance(value, (list, tuple)) and any(isinstance(v, (subjects.Command, subjects.PathValue, subjects.WinPathValue, subjects.UrlValue)) for v in value):
        return "[" + ", ".join(_show(v) for v in value) + "]"  # a list; `|` would read as a pipe
    if type(value) is Decimal:
        return str(value)  # as computed: 2.50 stays 2.50
    try:
        return json.dumps(to_json(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
