"""Compliance cases for the policy language, kept as data in tests/compliance/*.json.

The idea comes from the JMESPath compliance suite: the cases say what the language means,
independently of the Python that implements it, so that they could be run against another
implementation unchanged.

File format
-----------
Each file is a JSON list of *groups*. A group is an object with:

    "comment"   optional  what the group is about
    "policy"    optional  the policy text: a string, or a list of strings joined with "\\n"
                          (so that line numbers in diagnostics are easy to read off)
    "tool"      optional  the default tool name for the group's cases
    "context"   optional  the default context for the group's cases
    "files"     optional  other files beside the policy, for its `include`s: an object of path
                          (relative to the policy's folder) → text (a string or a list of lines);
                          with it the policy is saved as case.policy and loaded from its file
    "cases"     required  a list of cases

A case is one of three kinds, chosen by which of "effect", "error" and "warning" it has (exactly
one). Any case may carry "comment" and its own "policy", which replaces the group's.

An *evaluation* case loads the policy (it must load without errors) and evaluates one call:

    "tool"          the tool name (or the group's)
    "args"          the arguments, a JSON object (required)
    "context"       the context, a JSON object (or the group's; absent means none)
    "history"       the run's earlier calls (or the group's; absent means none): a list of calls
                    as `dsl.history.History.from_calls` takes them (tool, args, status, result, ...)
    "effect"        required: "allow", "deny" or "ask"
    "deciding"      optional: the exact list of rule ids that produced the effect, in file order
                    (rules without an `id` clause are named L<line>)
    "by_default"    optional: true when the policy's default decided
    "errored"       optional: the exact list of rule ids whose condition could not be evaluated
    "error_message" optional: a substring of one of the recorded evaluation errors
    "reason"        optional: a substring of one of the Decision's reasons
    "no_reasons"    optional: true when the Decision carries no reason at all
    "requirements"  optional: an object; each key present must equal that field of the Decision's
                    requirements as JSON (`quorums` is a list of {"count", "approvers", "group"};
                    `remember` is {"scope", "seconds"?}, or null when nothing may be remembered);
                    null means the Decision has none
    "met_by"        optional: a list of approver sets (lists of identities) each of which meets
                    every quorum of the Decision's requirements
    "not_met_by"    optional: a list of approver sets none of which does

An *error* case asserts that the policy does not load:

    "error"   a substring of the message of one error diagnostic
    "line", "column"  optional: where that diagnostic starts (1-based)
    "file"    optional: the included file the diagnostic is in (a path as in "files")
    "help"    optional: a substring of that diagnostic's help text

and that its rendering reads `<name>:<line>:<col>: error: <message>`.

A *warning* case asserts that the policy loads and warns: "warning" (message substring), with
optional "line", "column" and "help" as for errors.

Unknown keys are an error in the test itself, so a misspelt key can never make a case pass
silently.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from dsl import Policy, PolicyError
from dsl.errors import span_file
from dsl.history import History

HERE = Path(__file__).parent / "compliance"
SOURCE_NAME = "case.policy"

GROUP_KEYS = {"comment", "policy", "tool", "context", "cases", "files", "history"}
EVAL_KEYS = {
    "comment", "policy", "tool", "args", "context", "effect", "deciding", "by_default", "errored",
    "error_message", "reason", "no_reasons", "requirements", "met_by", "not_met_by", "files", "history",
}
DIAG_KEYS = {"comment", "policy", "line", "column", "help", "files", "file"}
REQUIREMENT_FIELDS = {"quorums", "decisions", "timeout_seconds", "on_timeout", "timeout_message", "remember", "escalation"}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48]


def _load_cases():
    files = sorted(HERE.glob("*.json"))
    assert files, f"no compliance files in {HERE}"
    params = []
    for path in files:
        groups = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(groups, list), f"{path.name}: the top level is a list of groups"
        for gi, group in enumerate(groups):
            for ci, case in enumerate(group["cases"]):
                label = f"{path.stem}:{gi}.{ci}"
                if case.get("comment"):
                    label += ":" + _slug(case["comment"])
                params.append(pytest.param(path.name, gi, ci, group, case, id=label))
    return params


CASES = _load_cases()


def _text(policy) -> str:
    return "\n".join(policy) if isinstance(policy, list) else policy


def _validate(where: str, group: dict, case: dict) -> str:
    unknown = set(group) - GROUP_KEYS
    assert not unknown, f"{where}: unknown group keys {sorted(unknown)}"
    kinds = [k for k in ("effect", "error", "warning") if k in case]
    assert len(kinds) == 1, f"{where}: a case has exactly one of effect, error, warning (has {kinds})"
    kind = kinds[0]
    allowed = EVAL_KEYS if kind == "effect" else DIAG_KEYS | {kind}
    unknown = set(case) - allowed
    assert not unknown, f"{where}: unknown keys {sorted(unknown)} for a {kind} case"
    assert "policy" in case or "policy" in group, f"{where}: no policy"
    if kind == "effect":
        assert case["effect"] in ("allow", "deny", "ask"), f"{where}: bad effect {case['effect']!r}"
        assert "args" in case, f"{where}: an evaluation case needs args"
        assert "tool" in case or "tool" in group, f"{where}: no tool"
        if isinstance(case.get("requirements"), dict):
            unknown = set(case["requirements"]) - REQUIREMENT_FIELDS
            assert not unknown, f"{where}: unknown requirement fields {sorted(unknown)}"
    return kind


def _match_diagnostic(diagnostics, case: dict, message: str) -> bool:
    for d in diagnostics:
        if message not in d.message:
            continue
        if "line" in case and (d.span is None or d.span.line != case["line"]):
            continue
        if "column" in case and (d.span is None or d.span.column != case["column"]):
            continue
        if "help" in case and (d.help is None or case["help"] not in d.help):
            continue
        if "file" in case and not (span_file(d.span) or "").replace("\\", "/").endswith("/" + case["file"]):
            continue
        return True
    return False


def _describe(diagnostics) -> str:
    return "\n".join(
        f"  {d.severity} {d.span.line if d.span else '-'}:{d.span.column if d.span else '-'} {d.message} | {d.help}"
        for d in diagnostics
    )


@pytest.mark.parametrize(("filename", "group_index", "case_index", "group", "case"), CASES)
def test_compliance(filename, group_index, case_index, group, case, tmp_path):
    where = f"{filename} group {group_index} case {case_index}"
    kind = _validate(where, group, case)
    text = _text(case.get("policy", group.get("policy")))
    files = case.get("files", group.get("files"))

    def load():
        if files is None:
            return Policy.from_text(text, SOURCE_NAME)
        for path, content in files.items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(_text(content), encoding="utf-8")
        (tmp_path / SOURCE_NAME).write_text(text, encoding="utf-8")
        return Policy.load(tmp_path / SOURCE_NAME)

    if kind == "error":
        with pytest.raises(PolicyError) as info:
            load()
        errors = info.value.errors
        assert _match_diagnostic(errors, case, case["error"]), (
            f"{where}: no error matching {case!r}; got\n{_describe(info.value.diagnostics)}"
        )
        rendered = info.value.render()
        if "line" in case and "column" in case:
            assert f"{case.get('file', SOURCE_NAME)}:{case['line']}:{case['column']}: error: " in rendered
        return

    try:
        policy = load()
    except PolicyError as exc:  # pragma: no cover - a failing case explains itself
        pytest.fail(f"{where}: the policy does not load:\n{exc.render()}")

    if kind == "warning":
        assert _match_diagnostic(policy.warnings, case, case["warning"]), (
            f"{where}: no warning matching {case!r}; got\n{_describe(policy.warnings)}"
        )
        return

    tool = case.get("tool", group.get("tool"))
    context = case.get("context", group.get("context"))
    calls = case.get("history", group.get("history"))
    history = History.from_calls(calls) if calls is not None else None
    decision = policy.evaluate(tool, case["args"], context, history=history)
    shown = "\n".join(decision.explain())

    assert decision.effect == case["effect"], f"{where}: expected {case['effect']}, got:\n{shown}"
    if "deciding" in case:
        assert list(decision.deciding) == case["deciding"], f"{where}: deciding rules differ:\n{shown}"
    if "by_default" in case:
        assert decision.by_default is case["by_default"], f"{where}: by_default differs:\n{shown}"
    if "errored" in case:
        errored = [o.rule for o in decision.outcomes if o.error is not None]
        assert errored == case["errored"], f"{where}: rules that errored differ ({errored}):\n{shown}"
    if "error_message" in case:
        messages = [o.error for o in decision.outcomes if o.error is not None]
        assert any(case["error_message"] in m for m in messages), f"{where}: no error like {case['error_message']!r} in {messages}"
    if "reason" in case:
        assert any(case["reason"] in r for r in decision.reasons), f"{where}: no reason like {case['reason']!r} in {decision.reasons}"
    if case.get("no_reasons"):
        assert decision.reasons == (), f"{where}: expected no reasons, got {decision.reasons}"
    if "requirements" in case:
        expected = case["requirements"]
        if expected is None:
            assert decision.requirements is None, f"{where}: expected no requirements, got {decision.requirements}"
        else:
            assert decision.requirements is not None, f"{where}: the Decision has no requirements:\n{shown}"
            for field, value in expected.items():
                got = getattr(decision.requirements, field)
                actual = None if got is msgspec.UNSET else msgspec.json.decode(msgspec.json.encode(got))
                assert actual == value, f"{where}: requirements.{field} is {actual!r}, expected {value!r}"
    for approvers in case.get("met_by", []):
        assert decision.requirements.met_by(approvers), f"{where}: {approvers} should meet {decision.requirements.describe()}"
    for approvers in case.get("not_met_by", []):
        assert not decision.requirements.met_by(approvers), f"{where}: {approvers} should not meet {decision.requirements.describe()}"


def test_compliance_suite_is_large_enough():
    """The suite promises broad coverage; a file that failed to list its cases would shrink it."""
    assert len(CASES) >= 150, len(CASES)
