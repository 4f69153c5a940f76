"""Nothing escapes a decision (issue 9, section 3): whatever a subject or an operator raises becomes
an error of that condition, which deny and ask count and allow does not, in every evaluator (the
specialized predicates and the generated plans `Policy.evaluate` runs, the generic reference
predicates, the traced ones `explain` uses), and through the Gate, `policy eval` and `simulate`.

The property tests drive `Policy.evaluate` with arbitrary JSON (every Unicode category in every
string, surrogates included, huge and negative integers, NaN and infinities, nesting up to the
documented 100 levels) against every sample policy and every policy of the language reference.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy, ast, subjects, values
from dsl.compiler import Env, compile_condition_generic, compile_condition_traced
from dsl.decision import Decision
from dsl.explain import explain
from dsl.parser import parse
from dsl.values import EvalError
from ledger.clock import ManualClock
from ledger.workflow.gate import Gate
from support import START

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "samples").glob("*.policy"))
BAD_PORT = "https://evil.com:²/"
PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def doc_policies() -> list[str]:
    """The policy text of every untagged code block of docs/policy-language.md (a block starting
    with '# alternatives' paragraph by paragraph), as tests/test_dsl_semantics.py reads them."""
    doc = (ROOT / "docs" / "policy-language.md").read_text(encoding="utf-8")
    blocks, current, tag = [], None, None
    for line in doc.splitlines():
        if line.startswith("```"):
            if current is None:
                current, tag = [], line[3:].strip()
            else:
                if not tag:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    out = []
    for block in blocks:
        if block.startswith("# alternatives"):
            out += [piece for piece in block.split("\n", 1)[1].split("\n\n") if piece.strip()]
        else:
            out.append(block)
    return out


# --- the port that escaped ---------------------------------------------------------------------

URL_POLICY = """
policy "fetch"
default allow
deny WebFetch when url(args.url).port != null and url(args.url).port != 443
  reason "Only the default HTTPS port." id "port"
"""


@pytest.mark.parametrize("digit", ["²", "٣", "１", "߁"])
def test_a_port_of_non_ascii_digits_is_an_invalid_port(digit):
    with pytest.raises(EvalError, match="invalid port"):
        subjects.parse_url(f"https://evil.com:{digit}/")


def test_a_port_of_more_digits_than_a_port_has_is_invalid():
    with pytest.raises(EvalError, match="invalid port"):
        subjects.parse_url("https://evil.com:" + "0" * 5000 + "80/")


def test_a_non_ascii_port_denies_through_evaluate():
    decision = Policy.from_text(URL_POLICY, "fetch.policy").evaluate("WebFetch", {"url": BAD_PORT})
    assert decision.effect == "deny"
    assert "invalid port" in decision.outcomes[0].error


def test_a_non_ascii_port_denies_through_the_gate(tmp_path):
    gate = Gate(Policy.from_text(URL_POLICY, "fetch.policy"), tmp_path / "ledger", clock=ManualClock(START))
    try:
        proposal = gate.propose("WebFetch", {"url": BAD_PORT}, proposer="agent")
    finally:
        gate.close()
    assert proposal.decision.effect == "deny"


def test_a_non_ascii_port_denies_through_policy_eval(tmp_path):
    path = tmp_path / "fetch.policy"
    path.write_text(URL_POLICY, encoding="utf-8")
    result = CliRunner().invoke(app, ["policy", "eval", str(path), "--tool", "WebFetch", "--args", json.dumps({"url": BAD_PORT}), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.exit_code == 0
    assert json.loads(result.stdout)["effect"] == "deny"


def test_a_non_ascii_port_denies_through_simulate(tmp_path):
    path = tmp_path / "fetch.policy"
    path.write_text(URL_POLICY, encoding="utf-8")
    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"tool": "WebFetch", "args": {"url": BAD_PORT}}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", "--policy", str(path), "--calls", str(calls), "--ledger", str(tmp_path / "ledger"), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.exit_code == 0
    assert "deny" in result.stdout


# --- the class: any exception inside a condition is an error of that condition -----------------

class Defect(ValueError):
    """What a subject with a bug raises (never an EvalError)."""


def _broken(*args, **kwargs):
    raise Defect("a subject's defect")


BROKEN_SUBJECTS = {  # what to break → a condition that reaches it and a call
    "parse_url": ('url(args.u).host == "x"', {"u": "https://x/"}),
    "make_path": ('path(args.p).name == "x"', {"p": "rel/x"}),
    "parse_shell": ('any c in shell(args.c): c.program == "rm"', {"c": "rm -rf /"}),
    "path_glob": ('path(args.p) glob "x/*"', {"p": "/a/x/y"}),
}


@pytest.fixture(params=sorted(BROKEN_SUBJECTS))
def broken(request, monkeypatch):
    from dsl import compiler

    compiler.clear_caches()
    monkeypatch.setattr(subjects, request.param, _broken)
    if request.param == "parse_shell":  # the compiler's own cache reads through the uncached one
        monkeypatch.setattr(subjects, "parse_shell_uncached", _broken)
    yield BROKEN_SUBJECTS[request.param]
    compiler.clear_caches()


CONTEXT = {"cwd": "/home/u/proj", "home": "/home/u"}


def test_a_defect_in_a_subject_makes_a_deny_rule_deny(broken):
    condition, args = broken
    policy = Policy.from_text(f'default allow\ndeny t when {condition} reason "no" id "r"', "d.policy")
    decision = policy.evaluate("t", args, CONTEXT)
    assert decision.effect == "deny"
    assert decision.outcomes[0].error.startswith("the condition could not be evaluated (Defect: a subject's defect")


def test_a_defect_in_a_subject_makes_an_ask_rule_ask(broken):
    condition, args = broken
    policy = Policy.from_text(f'default allow\nask t when {condition} id "r"', "a.policy")
    assert policy.evaluate("t", args, CONTEXT).effect == "ask"


def test_a_defect_in_a_subject_never_allows(broken):
    condition, args = broken
    policy = Policy.from_text(f'default deny "no"\nallow t when {condition} id "r"', "a.policy")
    decision = policy.evaluate("t", args, CONTEXT)
    assert decision.effect == "deny"
    assert decision.outcomes[0].counted is False and decision.outcomes[0].error is not None


def test_a_defect_settles_the_whole_condition_even_beside_a_true_operand(broken):
    condition, args = broken
    policy = Policy.from_text(f'default deny "no"\nallow t when ({condition}) or true id "r"', "a.policy")
    assert policy.evaluate("t", args, CONTEXT).effect == "deny"


def test_a_defect_in_a_subject_is_an_eval_error_of_the_generic_predicate(broken):
    condition, args = broken
    (rule,) = parse(f"allow t when {condition}").of_type(ast.Rule)
    with pytest.raises(EvalError, match="could not be evaluated"):
        compile_condition_generic(rule.condition)(Env("t", args, CONTEXT))


def test_a_defect_in_a_subject_is_an_eval_error_of_the_traced_predicate(broken):
    condition, args = broken
    (rule,) = parse(f"allow t when {condition}").of_type(ast.Rule)
    with pytest.raises(EvalError, match="could not be evaluated"):
        compile_condition_traced(rule.condition)(Env("t", args, CONTEXT, trace=[]))


def test_explain_tells_the_same_error_as_evaluate_for_a_defect(broken):
    condition, args = broken
    policy = Policy.from_text(f'default allow\ndeny t when {condition} reason "no" id "r"', "d.policy")
    shown = explain(policy, "t", args, CONTEXT)
    assert shown.effect == "deny"
    assert shown.rules[0].error == policy.evaluate("t", args, CONTEXT).outcomes[0].error


def test_a_defect_in_an_operator_is_an_error_of_its_condition(monkeypatch):
    monkeypatch.setattr(values, "contains", _broken)  # reached for a value that is not a string
    policy = Policy.from_text('default allow\ndeny t when args.a contains "x" reason "no" id "r"', "d.policy")
    assert policy.evaluate("t", {"a": 5}).effect == "deny"


def test_a_defect_in_a_shared_plan_value_falls_back_to_the_predicates(monkeypatch):
    """The generated plan reads `path()` and `shell()` values once for all rules; when that
    reading raises, every rule is decided by its predicate, which records the error."""
    from dsl import compiler

    policy = Policy.from_text('default allow\ndeny t when path(args.p) glob "/**/.env" reason "no" id "r"', "d.policy")
    assert policy.evaluate("t", {"p": "/a/.env"}).effect == "deny"
    policy = Policy.from_text('default allow\ndeny t when path(args.p) glob "/**/.env" reason "no" id "r"', "d2.policy")
    monkeypatch.setattr(compiler, "_path_value", _broken)  # the plan is written at the first call
    monkeypatch.setattr(compiler, "_plain_path", _broken)  # and the predicate reads it too
    decision = policy.evaluate("t", {"p": "/a/b"})
    assert decision.effect == "deny"
    assert "Defect" in decision.outcomes[0].error


def test_the_failure_message_keeps_a_lone_surrogate_encodable():
    message = values.failure_message(ValueError("bad \ud800 text"))
    message.encode("utf-8")
    assert "\\ud800" in message


# --- digits beyond ASCII elsewhere in the subjects ---------------------------------------------

def test_a_brace_sequence_of_non_ascii_digits_is_not_expanded():
    assert subjects.brace_expand("{١..٣}") == ["{١..٣}"]


def test_a_brace_sequence_with_a_number_past_intmax_stays_a_word():
    # bash reads a sequence's ends as intmax_t; one that does not fit is no sequence (and the
    # 4,300-digit limit of int() is never reached: the pattern takes at most 19 digits)
    word = "{1.." + "9" * 5000 + "}"
    assert subjects.brace_expand(word) == [word]


def test_a_redirection_to_a_non_ascii_digit_is_a_file():
    (command,) = subjects.parse_shell("echo hi >&²")
    assert command.redirects == ("²",)


# --- properties: every sample and documented policy, arbitrary calls --------------------------

TEXT = st.text(st.characters(), max_size=24)  # every category, surrogates included
HUGE = st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1, 2**64, -1, 0])
SCALAR = (
    st.none() | st.booleans() | st.integers() | HUGE | st.floats(allow_nan=True, allow_infinity=True) | TEXT
)


def deep(depth: int):
    """A value nested `depth` levels (lists and objects alternating), up to the documented 100."""
    return st.integers(1, depth).flatmap(
        lambda n: SCALAR.map(lambda leaf: _nest(leaf, n))
    )


def _nest(leaf, n):
    for i in range(n):
        leaf = [leaf] if i % 2 else {"a": leaf}
    return leaf


JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
KEYS = ["file_path", "notebook_path", "path", "glob", "command", "url", "query", "pattern", "order_id", "user_id",
        "reason", "item_ids", "payment_method_id", "amount", "reservation_id", "flights", "passengers", "cabin"]
SHELLISH = st.builds(lambda a, b, sep: f"{a}{sep}{b}", TEXT, TEXT, st.sampled_from([" ", " && ", " | ", "; ", " $(", " >", " -rf "]))
PATHISH = st.builds(lambda a, b: f"{a}/{b}", st.sampled_from(["", "/", "~", ".", "..", "C:", "\\\\srv", "/home/u/proj"]), TEXT)
DIGITS = st.text(st.characters(categories=["Nd", "No"]) | st.sampled_from("0123456789²³¹"), min_size=1, max_size=4)
URLISH = st.builds(lambda a, b: f"https://{a}:{b}/", TEXT | st.just("evil.com"), TEXT | DIGITS)
VALUE = JSON | SHELLISH | PATHISH | URLISH | deep(100)
SHAPED = {"url": URLISH | VALUE, "command": SHELLISH | VALUE, "file_path": PATHISH | VALUE, "path": PATHISH | VALUE,
          "notebook_path": PATHISH | VALUE}
# some of the keys the policies read, with values shaped for each; then any others
ARGS = st.builds(
    lambda known, other: {**other, **known},
    st.lists(st.sampled_from(KEYS), max_size=4, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: SHAPED.get(k, VALUE) for k in keys})
    ),
    st.dictionaries(TEXT, VALUE, max_size=2),
)
CONTEXTS = st.none() | st.dictionaries(st.sampled_from(["cwd", "home", "user", "run_id"]) | TEXT, VALUE | PATHISH, max_size=3)


def _tools(policy: Policy) -> list[str]:
    out = {"unknown_tool"}
    for rule in policy.rules:
        for selector in rule.selectors:
            out.add(selector.replace("*", "x").replace("?", "y"))
    return sorted(out)


POLICIES = [Policy.load(p) for p in SAMPLES] + [Policy.from_text(t, f"doc-{i}.policy") for i, t in enumerate(doc_policies())]
TOOLS = sorted({t for p in POLICIES for t in _tools(p)})


def check_fails_closed(policy: Policy, decision: Decision) -> None:
    assert isinstance(decision, Decision)
    for outcome in decision.outcomes:
        if outcome.error is not None:
            assert outcome.counted == (outcome.effect != "allow"), outcome
    if any(o.counted and o.effect in ("deny", "ask") for o in decision.outcomes):
        assert decision.effect != "allow"  # a deny or ask that matched, or errored, blocks


@PROPERTY
@given(st.sampled_from(range(len(POLICIES))), st.sampled_from(TOOLS) | TEXT, ARGS, CONTEXTS)
def test_every_sample_and_documented_policy_decides_any_json_call(index, tool, args, context):
    policy = POLICIES[index]
    check_fails_closed(policy, policy.evaluate(tool, args, context))


@pytest.mark.parametrize("index", range(len(POLICIES)), ids=lambda i: POLICIES[i].source_name.rsplit("/", 1)[-1])
@PROPERTY
@given(args=ARGS, context=CONTEXTS)
def test_every_covered_tool_decides_any_json_call(index, args, context):
    policy = POLICIES[index]
    for tool in _tools(policy):
        check_fails_closed(policy, policy.evaluate(tool, args, context))


def test_the_properties_cover_the_samples_and_the_documented_policies():
    assert len(SAMPLES) >= 3 and len(POLICIES) >= len(SAMPLES) + 5


URL_READERS = [p for p in POLICIES if "url(" in p.source_text]


@PROPERTY
@given(st.sampled_from(range(len(URL_READERS))), st.sampled_from(["https", "http", "ftp", "HTTPS"]), TEXT | st.just("evil.com"), DIGITS | TEXT, TEXT)
def test_any_url_text_decides_where_a_policy_reads_url(index, scheme, host, port, rest):
    policy = URL_READERS[index]
    for tool in _tools(policy):
        for key in ("url", "u", "link"):
            check_fails_closed(policy, policy.evaluate(tool, {key: f"{scheme}://{host}:{port}/{rest}"}))
