"""Table-driven policy tests: `countersign policy test FILE [CASES]`.

A cases file sits next to its policy (`samples/retail.policy` → `samples/retail.cases`) and holds
one case a line::

    # tool  arguments (a JSON object)            [context {...}]  =>  effect  [deciding rule ids]
    get_order_details {"order_id": "#W0000001"}                    => allow
    cancel_pending_order {"order_id": "#W1", "reason": "no longer needed"} => ask desk-confirms-change
    Bash {"command": "rm -rf /"} context {"cwd": "/home/u/proj"}   => deny no-recursive-delete
    unknown_tool {}                                                => ask default

* `TOOL` is the tool's name, bare (anything up to a space or `{`) or as a JSON string
  (`"my tool"`).
* The arguments are a JSON object; leave them out for `{}`.
* `context {...}` (optional) is the call's context, a JSON object. A line `context {...}` on its
  own (without `=>`) sets the context of the cases that follow it; a case's own context is
  merged over that one (its keys win; give `"cwd": null` to drop a key's effect).
* After `=>`: the expected effect (`allow`, `deny` or `ask`), then optionally the rules that must
  decide it: their ids (an `id "..."` clause, or the generated id, `deny-1a2b3c4d`: see
  `dsl.rule_ids`), bare or as JSON
  strings, exactly the deciding set in any order; or the word `default` for "no rule counted,
  the policy's default decided".
* `#` starts a comment on a line of its own, or after the expected effect and rules. (Inside the
  JSON, `#` is just a character.)
* A case may continue on the following lines when they are indented (long arguments).
* A line `history [...]` on its own gives the run's earlier calls for the cases that follow it (a
  JSON list of calls: `tool`, `args`, and optionally `status`, `effect`, `result`, `decided_by`,
  `rules`, `seq`; see `dsl.history.History.from_calls`); `history []` gives none again.

`parse_cases` raises `CasesError` (`file:line: message`) for a malformed line; `run_cases` raises
it too for a case that names a rule the policy does not have. `run_cases` returns a `Report`:
each case's result, with the policy lines of the rules that decided and of the expected rules
that did not, and the rules no case exercised (no case made them count).
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import msgspec

from dsl import ast
from dsl.decision import EFFECTS
from dsl.jsoninput import STRICT, escape_hint
from dsl.parser import parse
from dsl.policy import Policy


class CasesError(Exception):
    """A cases file that cannot be run: a malformed case, or a rule id the policy lacks."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(f"{source}:{line}: error: {message}")
        self.source = source
        self.line = line
        self.message = message


class Case(msgspec.Struct, frozen=True, omit_defaults=True):
    """One call and what the policy must decide for it.

    `rules`: the ids that must be exactly the deciding rules (None: not checked); `by_default`:
    the default must decide. `context` is the merged context the call is evaluated with.
    """

    line: int
    tool: str
    args: dict
    effect: str
    context: dict | None = None
    rules: tuple[str, ...] | None = None
    by_default: bool = False
    history: list | None = None  # the run's earlier calls (a `history [...]` line; dsl.history.History.from_calls)


class Location(msgspec.Struct, frozen=True, omit_defaults=True):
    """A place in the policy a result points at: a rule (or the default, rule None) and why."""

    line: int | None
    note: str
    rule: str | None = None


class CaseResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """A case and what the policy decided: `effect`, `deciding` rules, `by_default`; `problems`
    says what differs from the expectation (empty when the case passed); `locations` points at
    the policy's lines involved; `reasons` are the decision's reasons."""

    case: Case
    passed: bool
    effect: str
    by_default: bool
    deciding: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    locations: tuple[Location, ...] = ()
    reasons: tuple[str, ...] = ()


class RuleRef(msgspec.Struct, frozen=True):
    """A rule of the policy: its id, line, effect and selectors."""

    rule: str
    line: int
    effect: str
    selectors: tuple[str, ...]


class Report(msgspec.Struct, frozen=True, omit_defaults=True):
    """Every case's result; `unexercised`: the rules no case made count; `default_cases`: how
    many cases the default decided."""

    cases_file: str
    policy_file: str
    policy: str
    results: tuple[CaseResult, ...]
    unexercised: tuple[RuleRef, ...]
    default_cases: int

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]


def default_cases_path(policy_path: str | Path) -> Path:
    """`x/name.policy` → `x/name.cases` (any other name gets `.cases` added)."""
    path = Path(policy_path)
    return path.with_suffix(".cases") if path.suffix == ".policy" else path.with_name(path.name + ".cases")


# --- parsing ----------------------------------------------------------------------------------

_WS = " \t\r\f"



def parse_cases(text: str, source: str = "<cases>") -> list[Case]:
    """Every case of a cases file, in order. Raises `CasesError` at the first malformed line."""
    text = text.removeprefix("\ufeff")
    cases: list[Case] = []
    context: dict = {}
    history: list | None = None
    for start, logical, offsets in _logical_lines(text, source):
        reader = _Reader(logical, offsets, source, start)
        if re.match(r"context\s*\{", logical) and "=>" not in _outside_json(logical):
            reader.pos = len("context")
            reader.skip()
            context = reader.json_object("the context")
            reader.end_of_line()
            continue
        if re.match(r"history\s*\[", logical) and "=>" not in _outside_json(logical):
            # `history [{"tool": ..., "args": {...}, "result": ...}, ...]`: the run's earlier calls
            # for the cases that follow (`history []`: none)
            reader.pos = len("history")
            reader.skip()
            at = reader.pos
            value = reader.json_value("the history")
            from dsl.history import History

            try:
                History.from_calls(value if isinstance(value, list) else None)
            except (ValueError, TypeError) as exc:
                raise reader.error(f"the history must be a JSON list of calls: {exc}", at) from None
            history = value or None
            reader.end_of_line()
            continue
        case = reader.case(context)
        cases.append(msgspec.structs.replace(case, history=history) if history is not None else case)
    return cases


def _logical_lines(text: str, source: str):
    """(first line number, text, line number of each character) for each case: a line that
    starts in column 1, with the indented lines that follow it. Comment and blank lines are
    skipped."""
    current: list[str] | None = None
    numbers: list[int] = []
    start = 0
    for number, raw in enumerate(text.split("\n"), 1):
        stripped = raw.strip(_WS)
        if not stripped or stripped.startswith("#"):
            if not stripped and current is not None:
                yield start, "".join(current), numbers
                current = None
            continue
        if raw[0] in _WS:
            if current is None:
                raise CasesError(source, number, "an indented line continues a case, but no case comes before it")
            current.append("\n" + raw)
            numbers.extend([number] * (len(raw) + 1))
            continue
        if current is not None:
            yield start, "".join(current), numbers
        current, numbers, start = [raw], [number] * len(raw), number
    if current is not None:
        yield start, "".join(current), numbers


def _outside_json(text: str) -> str:
    """The text with JSON strings blanked out (so `=>` inside an argument is not the arrow)."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: " " * len(m.group(0)), text)


class _Reader:
    def __init__(self, text: str, offsets: list[int], source: str, start: int):
        self.text, self.offsets, self.source, self.start = text, offsets, source, start
        self.pos = 0

    def line(self, pos: int | None = None) -> int:
        pos = self.pos if pos is None else pos
        if not self.offsets:
            return self.start
        return self.offsets[min(pos, len(self.offsets) - 1)]

    def error(self, message: str, pos: int | None = None) -> CasesError:
        return CasesError(self.source, self.line(pos), message)

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS + "\n":
            self.pos += 1

    def peek_word(self) -> str:
        m = re.match(r"[^\s{\"]+", self.text[self.pos :])
        return m.group(0) if m else ""

    def json_value(self, what: str) -> Any:
        try:
            # the strict JSON of `policy eval --args` (dsl.jsoninput): no repeated key, NaN or Infinity
            value, end = STRICT.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.error(f"{what}: not valid JSON ({exc.msg}){escape_hint(exc)}", exc.pos) from None
        except ValueError as exc:
            raise self.error(f"{what}: {exc}", self.pos) from None
        except RecursionError:
            raise self.error(f"{what}: nested too deeply", self.pos) from None
        self.pos = end
        return value

    def json_object(self, what: str) -> dict:
        at = self.pos
        value = self.json_value(what)
        if not isinstance(value, dict):
            raise self.error(f"{what} must be a JSON object", at)
        return value

    def case(self, context: dict) -> Case:
        first = self.start
        if self.text.startswith('"'):
            tool = self.json_value("the tool name")
            if not isinstance(tool, str):  # pragma: no cover - a JSON text starting with " is a string
                raise self.error("the tool name must be a string")
        else:
            tool = self.peek_word()
            if tool.startswith("=>"):
                tool = ""
            self.pos += len(tool)
        if not tool:
            raise self.error("a case starts with the tool's name")
        self.skip()
        args: dict = {}
        if self.text.startswith("{", self.pos):
            args = self.json_object("the arguments")
            self.skip()
        own_context = None
        if self.peek_word() == "context" or self.text.startswith("context{", self.pos):
            self.pos += len("context")
            self.skip()
            if not self.text.startswith("{", self.pos):
                raise self.error("'context' is followed by a JSON object")
            own_context = self.json_object("the context")
            self.skip()
        if not self.text.startswith("=>", self.pos):
            found = self.text[self.pos :].split("\n")[0].strip()[:30]
            raise self.error(
                "expected '=>' and the expected effect" + (f", found {found!r}" if found else "")
                + " (a case is: TOOL {args} [context {...}] => EFFECT [RULE ...])"
            )
        self.pos += 2
        words = self.expectation()
        if not words:
            raise self.error("expected an effect after '=>' (allow, deny or ask)")
        (effect, _), rest = words[0], words[1:]
        if effect not in EFFECTS:
            close = difflib.get_close_matches(effect, EFFECTS, n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else " (allow, deny or ask)"
            raise self.error(f"unknown effect '{effect}'{hint}")
        by_default = ("default", False) in rest
        ids = tuple(word for word, quoted in rest if not (word == "default" and not quoted))
        if by_default and ids:
            raise self.error("'default' means no rule decided; it cannot be listed with rule ids")
        merged = {**context, **own_context} if own_context is not None else (dict(context) if context else None)
        return Case(
            line=first,
            tool=tool,
            args=args,
            effect=effect,
            context=merged,
            rules=ids if ids else None,
            by_default=by_default,
        )

    def expectation(self) -> list[tuple[Any, bool]]:
        """The words after `=>` up to a `#` comment: (word, was it quoted)."""
        words: list[tuple[Any, bool]] = []
        while True:
            self.skip()
            if self.pos >= len(self.text) or self.text[self.pos] == "#":
                return words
            if self.text[self.pos] == '"':
                at = self.pos
                value = self.json_value("a rule id")
                if not isinstance(value, str):  # pragma: no cover
                    raise self.error("a rule id is a string", at)
                words.append((value, True))
            else:
                m = re.match(r"[^\s#]+", self.text[self.pos :])
                words.append((m.group(0), False))
                self.pos += len(m.group(0))

    def end_of_line(self) -> None:
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] != "#":
            raise self.error(f"unexpected {self.text[self.pos:].split()[0][:30]!r} after the context")


# --- running ----------------------------------------------------------------------------------


def run_cases(policy: Policy, cases: list[Case], cases_file: str = "<cases>") -> Report:
    """Decide every case with `policy` and compare. Raises `CasesError` for a case that names a
    rule id the policy does not have (it could never pass)."""
    by_id = {r.rule_id: r for r in policy.rules}
    for case in cases:
        for rule_id in case.rules or ():
            if rule_id not in by_id:
                close = difflib.get_close_matches(rule_id, list(by_id), n=1, cutoff=0.6)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                old = re.fullmatch(r"L([0-9]+)(?:\.[0-9]+)?", rule_id)
                at_line = [r.rule_id for r in policy.rules if old and r.line == int(old.group(1))]
                if at_line:  # an id of the old form, named after the rule's line
                    hint = (f"; a rule without an id is no longer named after its line but after its text: "
                            f"the rule{'s' if len(at_line) > 1 else ''} at line {old.group(1)} "
                            f"{'are' if len(at_line) > 1 else 'is'} {', '.join(repr(i) for i in at_line)}")
                raise CasesError(cases_file, case.line, f"the policy has no rule '{rule_id}'{hint}")
    default_line = _default_line(policy)
    exercised: set[str] = set()
    results = []
    default_cases = 0
    histories: dict[int, Any] = {}  # one History per `history` line (the cases after it share its list)
    for case in cases:
        history = None
        if case.history is not None:
            from dsl.history import History

            history = histories.get(id(case.history))
            if history is None:
                history = histories[id(case.history)] = History.from_calls(case.history)
        decision = policy.evaluate(case.tool, case.args, case.context, history=history)
        exercised.update(o.rule for o in decision.outcomes if o.counted)
        default_cases += decision.by_default
        problems = []
        if decision.effect != case.effect:
            problems.append(f"expected {case.effect}, got {decision.effect}")
        if case.by_default and not decision.by_default:
            problems.append("expected the default to decide, but rules decided: " + ", ".join(decision.deciding))
        if case.rules is not None and set(case.rules) != set(decision.deciding):
            got = ", ".join(decision.deciding) if decision.deciding else "the default"
            problems.append(f"expected the deciding rules {', '.join(case.rules)}, got {got}")
        locations = []
        if problems:
            if decision.by_default:
                note = f"the default ({policy.default.effect}) decided"
                locations.append(Location(default_line, note if default_line else note + " (no default statement: ask)"))
            for rule_id in decision.deciding:
                rule = by_id[rule_id]
                locations.append(Location(rule.line, f"{rule.effect} rule {rule_id} decided", rule_id))
            for rule_id in case.rules or ():
                if rule_id not in decision.deciding:
                    rule = by_id[rule_id]
                    outcome = next((o for o in decision.outcomes if o.rule == rule_id), None)
                    if outcome is None:
                        why = "its condition was false" if rule in policy.rules_for(case.tool) else f"its selectors do not cover {case.tool}"
                    elif outcome.error is not None and not outcome.counted:
                        why = f"its condition could not be evaluated ({outcome.error})"
                    else:
                        why = f"it counted, but {decision.effect} beats {rule.effect}"
                    locations.append(Location(rule.line, f"expected rule {rule_id} ({rule.effect}) did not decide: {why}", rule_id))
        results.append(
            CaseResult(
                case=case,
                passed=not problems,
                effect=decision.effect,
                by_default=decision.by_default,
                deciding=decision.deciding,
                problems=tuple(problems),
                locations=tuple(locations),
                reasons=decision.reasons,
            )
        )
    unexercised = tuple(RuleRef(r.rule_id, r.line, r.effect, r.selectors) for r in policy.rules if r.rule_id not in exercised)
    return Report(
        cases_file=cases_file,
        policy_file=policy.source_name,
        policy=policy.name,
        results=tuple(results),
        unexercised=unexercised,
        default_cases=default_cases,
    )


def _default_line(policy: Policy) -> int | None:
    defaults = parse(policy.source_text, policy.source_name).of_type(ast.DefaultDecl)
    return defaults[0].span.line if defaults else None
