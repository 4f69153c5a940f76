"""What a loaded policy decides, one behaviour per test.

The compliance cases (tests/compliance/*.json) cover the language case by case; these tests pin
the behaviours that matter most for safety (an error never allows, silence never approves), the
Python API around evaluation, and the regressions fixed in dsl/.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict, defaultdict

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Decision, Policy, PolicyError, PolicyInputError, Requirements
from dsl.compiler import Env
from dsl.requirements import DECISIONS, Quorum, strictest
from dsl.values import EvalError

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def load(*lines: str) -> Policy:
    return Policy.from_text("\n".join(lines), "test.policy")


def errored(decision: Decision) -> list[str]:
    return [o.rule for o in decision.outcomes if o.error is not None]


# --- an error never allows ---------------------------------------------------------------------


def test_error_in_allow_condition_never_allows():
    policy = load('default deny "no"', 'allow refund when args.amount < 100 id "small"')
    decision = policy.evaluate("refund", {"amount": "5"})
    assert decision.effect == "deny"
    assert decision.by_default
    (outcome,) = decision.outcomes
    assert outcome.rule == "small" and not outcome.counted
    assert "cannot order a string and a number" in outcome.error


def test_error_in_allow_condition_falls_back_to_the_default_ask():
    policy = load('allow refund when args.amount < 100')
    decision = policy.evaluate("refund", {})
    assert decision.effect == "ask" and decision.by_default
    assert errored(decision) == [policy.rules[0].rule_id]


def test_error_in_deny_condition_denies_and_says_why():
    policy = load('deny refund when args.amount > 100 reason "Ask a manager." id "big"', "allow refund")
    decision = policy.evaluate("refund", {"amount": [100]})
    assert decision.effect == "deny"
    assert decision.deciding == ("big",)
    (reason,) = decision.reasons
    assert reason.startswith("Ask a manager.")
    assert "could not be evaluated" in reason and "cannot order a list and a number" in reason


def test_error_in_ask_condition_asks():
    policy = load('ask refund when args.amount > 100 id "big"', "allow refund")
    decision = policy.evaluate("refund", {})
    assert decision.effect == "ask"
    assert decision.deciding == ("big",)
    assert decision.requirements == Requirements()


def test_error_is_recorded_even_when_another_rule_decides():
    policy = load('allow t when args.n > 1 id "a"', 'deny t when args.m == 1 reason "m" id "d"')
    decision = policy.evaluate("t", {"m": 1})
    assert decision.effect == "deny"
    assert errored(decision) == ["a"]
    assert [o.rule for o in decision.outcomes] == ["a", "d"]


def test_rules_whose_condition_is_false_leave_no_outcome():
    decision = load('allow t when args.n == 1 id "one"', 'allow t when args.n == 2 id "two"').evaluate("t", {"n": 2})
    assert [o.rule for o in decision.outcomes] == ["two"]


# --- Kleene logic -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("args.missing == 1 and false", "false"),
        ("false and args.missing == 1", "false"),
        ("args.missing == 1 or true", "true"),
        ("true or args.missing == 1", "true"),
        ("args.missing == 1 and true", "error"),
        ("args.missing == 1 or false", "error"),
        ("not args.missing == 1", "error"),
        ("not (args.missing == 1 and false)", "true"),
        ("not (args.missing == 1 or true)", "false"),
    ],
)
def test_and_or_not_are_three_valued(condition, expected):
    decision = load('default deny "no"', f'allow t when {condition} id "r"').evaluate("t", {})
    verdict = "true" if decision.effect == "allow" else ("error" if errored(decision) else "false")
    assert verdict == expected


# --- precedence and defaults -------------------------------------------------------------------


def test_deny_beats_ask_beats_allow():
    rules = ['allow t id "allow"', 'ask t when args.level >= 1 id "ask"', 'deny t when args.level >= 2 reason "no" id "deny"']
    policy = load(*rules)
    assert [policy.evaluate("t", {"level": n}).effect for n in (0, 1, 2)] == ["allow", "ask", "deny"]
    assert load(*reversed(rules)).evaluate("t", {"level": 2}).deciding == ("deny",)


def test_every_matching_rule_counts():
    policy = load('allow t id "a"', 'allow t, u id "b"', 'allow * id "c"')
    assert policy.evaluate("t", {}).deciding == ("a", "b", "c")
    assert policy.evaluate("u", {}).deciding == ("b", "c")


def test_without_a_default_an_uncovered_call_asks():
    decision = load("allow read").evaluate("write", {})
    assert decision.effect == "ask"
    assert decision.by_default
    assert decision.deciding == ()
    assert decision.requirements == Requirements(
        quorums=(Quorum(count=1, approvers=None, group=None),),
        decisions=("approve", "edit", "reject"),
        timeout_seconds=86400,
        on_timeout="reject",
    )


def test_a_default_deny_needs_a_reason_the_agent_can_read():
    with pytest.raises(PolicyError, match="a default deny needs a reason"):
        load("default deny")
    assert load('default deny "Use read_file."').evaluate("x", {}).reasons == ("Use read_file.",)


# --- requirements ------------------------------------------------------------------------------


def test_several_asks_combine_to_the_strictest_requirements():
    policy = load(
        'group a = ["ann", "bob", "cat"]',
        'group b = ["bob", "cat", "dan"]',
        'ask t approvers 1 from a timeout 8h else reject "late" id "one"',
        'ask t approvers 2 from b decisions approve, reject timeout 2h id "two"',
    )
    req = policy.evaluate("t", {}).requirements
    assert req.quorums == (Quorum(1, ("ann", "bob", "cat"), "a"), Quorum(2, ("bob", "cat", "dan"), "b"))
    assert req.decisions == ("approve", "reject")
    assert (req.timeout_seconds, req.timeout_message, req.on_timeout) == (7200, None, "reject")


def test_asks_naming_different_groups_need_a_quorum_from_each():
    policy = load('ask t approvers 2 from ["ann", "bob"] id "x"', 'ask t approvers 1 from ["cat", "dan"] id "y"')
    decision = policy.evaluate("t", {})
    assert decision.effect == "ask" and decision.deciding == ("x", "y")
    req = decision.requirements
    assert not req.met_by({"ann", "bob"}) and not req.met_by({"ann", "cat"})
    assert req.met_by({"ann", "bob", "cat"})
    assert req.allows("dan") and not req.allows("eve")


def test_one_approval_counts_for_every_quorum_that_admits_the_approver():
    policy = load('ask t approvers 1 from ["ann", "bob"]', 'ask t approvers 1 from ["bob", "cat"]')
    req = policy.evaluate("t", {}).requirements
    assert req.met_by({"bob"}) and not req.met_by({"ann"})


def test_a_quorum_another_one_implies_is_dropped():
    policy = load('ask t approvers 1', 'ask t approvers 2 from ["ann", "bob", "cat"]')
    assert policy.evaluate("t", {}).requirements.quorums == (Quorum(2, ("ann", "bob", "cat")),)


def test_a_timeout_never_approves():
    for outcome in ("approve", "allow", "edit", "respond"):
        with pytest.raises(PolicyError, match=f"a timeout cannot {outcome}"):
            load(f"ask t timeout 1h else {outcome}")
    assert load("ask t timeout 1h").evaluate("t", {}).requirements.on_timeout == "reject"


QUORUMS = st.builds(
    Quorum,
    count=st.integers(1, 4),
    approvers=st.none() | st.sets(st.sampled_from("abcdef"), min_size=1).map(lambda s: tuple(sorted(s))),
    group=st.none() | st.sampled_from(["g1", "g2"]),
)
JSONISH_REQUIREMENTS = st.builds(
    Requirements,
    quorums=st.lists(QUORUMS, min_size=1, max_size=3).map(tuple),
    decisions=st.sets(st.sampled_from(["approve", "edit", "respond"])).map(lambda s: tuple(d for d in DECISIONS if d in s or d == "reject")),
    timeout_seconds=st.integers(1, 10),
    timeout_message=st.none() | st.sampled_from(["m1", "m2"]),
)


@FAST
@given(st.lists(JSONISH_REQUIREMENTS, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_strictest_requirements_meet_every_input_and_ignore_order(reqs, rnd):
    combined = strictest(reqs)
    for r in reqs:
        assert set(combined.decisions) <= set(r.decisions)
        assert combined.timeout_seconds <= r.timeout_seconds
    assert combined.timeout_seconds == min(r.timeout_seconds for r in reqs)
    assert "reject" in combined.decisions
    assert combined.on_timeout == "reject"
    # The combination is met by exactly the approvals that meet every input, and admits no
    # decider that no input admits (a quorum another implies is dropped, so it may admit fewer).
    people = "abcdefg"
    for mask in range(2 ** len(people)):
        approvals = {p for i, p in enumerate(people) if mask >> i & 1}
        assert combined.met_by(approvals) == all(r.met_by(approvals) for r in reqs)
    for who in people:
        assert not combined.allows(who) or any(r.allows(who) for r in reqs)
    shuffled = list(reqs)
    rnd.shuffle(shuffled)
    again = strictest(shuffled)
    # Only the message on a timeout tie, the order of the quorums and which of two equivalent
    # quorums keeps its group name may depend on rule order.
    assert msgspec.structs.replace(again, timeout_message=None, quorums=()) == msgspec.structs.replace(combined, timeout_message=None, quorums=())
    assert {(q.count, q.approvers) for q in again.quorums} == {(q.count, q.approvers) for q in combined.quorums}


# --- strict typing -----------------------------------------------------------------------------


def verdict(condition: str, args: dict, context: dict | None = None) -> str:
    decision = load('default deny "no"', f'allow t when {condition} id "r"').evaluate("t", args, context)
    return "true" if decision.effect == "allow" else ("error" if errored(decision) else "false")


def test_bool_is_not_a_number():
    assert verdict("args.a == 1", {"a": True}) == "error"
    assert verdict("args.a < 2", {"a": True}) == "error"
    assert verdict("args.a in [0, 1]", {"a": False}) == "error"
    assert verdict("args.a == true", {"a": 1}) == "error"


def test_strings_and_numbers_are_never_coerced():
    assert verdict("args.a == 1", {"a": "1"}) == "error"
    assert verdict('args.a == "1"', {"a": 1}) == "error"
    assert verdict("args.a > 1", {"a": "2"}) == "error"
    assert verdict('args.a startswith "1"', {"a": 12}) == "error"


def test_null_equals_only_null():
    assert verdict("args.a == null", {"a": None}) == "true"
    for value in (0, "", False, [], {}):
        assert verdict("args.a == null", {"a": value}) == "false"
        assert verdict("args.a != null", {"a": value}) == "true"


def test_a_missing_field_is_an_error_not_null():
    assert verdict("args.a == null", {}) == "error"
    assert verdict("args.a != null", {}) == "error"


def test_exists_never_errors():
    assert verdict("exists(args.a.b[3])", {"a": "string"}) == "false"
    assert verdict("exists(args.a.b[3])", {"a": {"b": [0, 1, 2, None]}}) == "true"
    assert verdict("not exists(context.user)", {}) == "true"


def test_membership_in_a_mixed_list_is_as_strict_as_equality():
    """`x in [a, b]` reads as `x == a or x == b`. With x a string, `x == 1` is an error, so Kleene
    `or` gives false-or-error = error, and `allow ... when args.x not in ["rm", 1]` must not allow
    x = "ls"; an equal item still makes it true."""
    assert verdict('args.x in ["ls", 1]', {"x": "ls"}) == "true"
    assert verdict('args.x not in ["rm", 1]', {"x": "ls"}) == "error"
    assert verdict('args.x not in ["rm", null]', {"x": 5}) == "error"


# --- the Python API ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "context", "message"),
    [
        (3, {}, None, "the tool name must be a string, not int"),
        ("t", [], None, "the arguments must be a JSON object, not a list"),
        ("t", None, None, "the arguments must be a JSON object, not null"),
        ("t", {}, "cwd", "the context must be a JSON object, not a string"),
    ],
)
def test_calls_that_are_not_json_objects_are_refused_before_any_rule(tool, args, context, message):
    with pytest.raises(PolicyInputError, match=message):
        load("allow t").evaluate(tool, args, context)


def test_evaluation_does_not_modify_the_arguments():
    policy = load('allow t when exists(args.a.b) and args.c[0] == 1 and len(args.d) > 0')
    args = {"a": {}, "c": [1], "d": "x"}
    before = copy.deepcopy(args)
    policy.evaluate("t", args)
    assert args == before
    missing = defaultdict(dict, c=[1], d="x")  # a defaultdict must not grow args.a on lookup
    assert policy.evaluate("t", missing).effect == "ask"
    assert "a" not in missing


def test_arguments_may_be_dict_and_list_subclasses():
    policy = load('default deny "no"', 'allow t when args.a.b == 1 and args.items[0] == "x"')
    args = OrderedDict(a=OrderedDict(b=1), items=("x",))
    assert policy.evaluate("t", args).effect == "allow"


def test_nan_cannot_be_ordered_so_it_never_slips_past_a_deny():
    policy = load('deny refund when args.amount > 100 reason "Over the limit."', "allow refund")
    decision = policy.evaluate("refund", {"amount": float("nan")})
    assert decision.effect == "deny"
    assert "NaN" in decision.outcomes[0].error


def test_deeply_nested_arguments_fail_closed():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    allow = load('default deny "no"', "allow t when args.a == args.b")
    decision = allow.evaluate("t", {"a": deep, "b": deep})
    assert decision.effect == "deny"
    assert "nested too deeply" in decision.outcomes[0].error
    deny = load('deny t when args.a == args.b reason "r"', "allow t")
    assert deny.evaluate("t", {"a": deep, "b": deep}).effect == "deny"


def test_generated_rule_ids_never_take_a_declared_id():
    generated = load("ask a").rules[0].rule_id  # the id of a rule whose text is `ask a`
    policy = load(f'ask a id "{generated}.2" approvers 1 from ["p"]', 'ask a  ask a approvers 1 from ["q"]')
    assert [r.rule_id for r in policy.rules] == [f"{generated}.2", generated, f"{generated}.3"]
    requirements = policy.evaluate("a", {}).requirements  # each rule kept its own quorum
    assert requirements.quorums == (Quorum(1, ("p",)), Quorum(1, ("q",)))


def test_the_condition_text_is_recorded_as_written():
    policy = load("allow t when", "  args.a == 1", "  and args.b == 2  # both")
    (outcome,) = policy.evaluate("t", {"a": 1, "b": 2}).outcomes
    assert outcome.condition == "args.a == 1 and args.b == 2"
    assert outcome.line == 1


def test_policy_name_and_digest_identify_the_source(tmp_path):
    text = 'policy "retail"\nallow read\n'
    assert Policy.from_text(text).name == "retail"
    assert Policy.from_text(text).digest == hashlib.sha256(text.encode()).hexdigest()
    path = tmp_path / "coding.policy"
    path.write_bytes(b"allow read\r\n")
    loaded = Policy.load(path)
    assert loaded.name == "coding"
    assert loaded.digest == hashlib.sha256(b"allow read\r\n").hexdigest()
    decision = loaded.evaluate("read", {})
    assert (decision.policy, decision.policy_digest) == ("coding", loaded.digest)


def test_a_file_that_is_not_utf8_is_refused_with_its_line(tmp_path):
    path = tmp_path / "bad.policy"
    path.write_bytes(b"allow read\n# caf\xe9\n")
    with pytest.raises(PolicyError) as info:
        Policy.load(path)
    assert info.value.errors[0].span.line == 2
    assert f"{path}:2:1: error: the file is not valid UTF-8" in info.value.render()


def test_warnings_do_not_stop_a_policy_from_loading():
    policy = load("default allow", "allow t, t")
    assert [w.message for w in policy.warnings] == [
        "default allow lets every tool that no rule mentions run without a person",
        "tool 't' is listed twice",
    ]


def test_every_check_error_is_reported_at_once_in_source_order():
    with pytest.raises(PolicyError) as info:
        load("deny a", "allow b when arg.x == 1", "ask c approvers 0", "default allow")
    errors = info.value.errors
    assert [(e.span.line, e.message) for e in errors] == [
        (1, "a deny rule needs a reason"),
        (2, "unknown name 'arg'"),
        (3, "a quorum needs at least one approver"),
    ]
    assert info.value.diagnostics[-1].severity == "warning"


def test_explain_names_the_deciding_rules_and_the_precedence():
    policy = load('allow t id "a"', 'deny t when args.x > 1 reason "too big" id "d"')
    lines = policy.evaluate("t", {"x": "2"}).explain()
    assert lines[0] == "effect: deny"
    assert "  reason: too big (the condition of rule d could not be evaluated: '>' cannot order a string and a number)" in lines
    assert any(line.startswith(" * line 2 [d] deny: condition could not be evaluated") for line in lines)
    assert any(line.startswith("   line 1 [a] allow: no condition") for line in lines)
    assert lines[-1] == "  precedence: deny beats ask beats allow"


def test_a_decision_round_trips_through_json():
    policy = load('group g = ["ann"]', 'ask t when args.x > 1 approvers 1 from g timeout 1h id "a"')
    decision = policy.evaluate("t", {"x": "2"})
    assert msgspec.json.decode(msgspec.json.encode(decision), type=Decision) == decision


def test_the_rule_cache_never_changes_an_answer():
    policy = load('default deny "no"', 'allow mcp__github__* id "gh"', 'deny mcp__github__delete_* reason "no" id "del"')
    first = policy.evaluate("mcp__github__delete_repo", {})
    for i in range(5000):  # more tool names than the cache holds
        policy.evaluate(f"mcp__github__tool_{i}", {})
    assert policy.evaluate("mcp__github__delete_repo", {}) == first
    assert first.deciding == ("del",)


def test_the_examples_in_the_language_reference_load():
    """Every untagged code block in docs/policy-language.md is policy text and must load; a block
    that starts with '# alternatives' must load paragraph by paragraph (one alternative each)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "policy-language.md").read_text(encoding="utf-8")
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
    assert len(blocks) >= 5
    for block in blocks:
        if block.startswith("# alternatives"):
            pieces = [piece for piece in block.split("\n", 1)[1].split("\n\n") if piece.strip()]
        else:
            pieces = [block]
        for piece in pieces:
            Policy.from_text(piece, "doc-example.policy")


# --- properties: an error never allows, and evaluation is deterministic -----------------------

CATALOGUE = [
    "args.a == 1", 'args.a != "x"', "args.a < 5", 'args.a >= "m"', "args.a in [1, 2]", 'args.a not in ["x", "y"]',
    'args.a in "hello"', 'args.a startswith "h"', 'args.a endswith "o"', 'args.a contains "x"', 'args.a glob "*.env"',
    "len(args.a) > 1", 'lower(args.a) == "abc"', "exists(args.b)", "args.flag", "args.a.b[0] == null",
    "args.items[-1] == true", "args.a == args.b", 'context.user == "ann"', 'tool == "t"', "args.a == null",
    "true", "false",
]
CONDITIONS = st.recursive(
    st.sampled_from(CATALOGUE),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: f"({p[0]}) and ({p[1]})"),
        st.tuples(inner, inner).map(lambda p: f"({p[0]}) or ({p[1]})"),
        inner.map(lambda c: f"not ({c})"),
    ),
    max_leaves=5,
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "user", "x"]), inner, max_size=3),
    max_leaves=10,
)
ARGS = st.dictionaries(st.sampled_from(["a", "b", "flag", "items"]), JSON, max_size=4)
CONTEXT = st.none() | st.dictionaries(st.sampled_from(["user", "cwd"]), JSON, max_size=2)


def raises_eval_error(policy: Policy, tool: str, args: dict, context: dict | None) -> bool:
    """Run the rule's compiled predicate directly, outside evaluate() and decide()."""
    (rule,) = policy.rules
    try:
        rule.test(Env(tool, args, context or {}))
    except EvalError:
        return True
    return False


@FAST
@given(CONDITIONS, ARGS, CONTEXT)
def test_an_allow_rule_whose_condition_errors_never_allows(condition, args, context):
    policy = load('default deny "no"', f'allow t when {condition} id "r"')
    decision = policy.evaluate("t", args, context)
    if raises_eval_error(policy, "t", args, context):
        assert decision.effect != "allow"
        assert errored(decision) == ["r"]
        assert not decision.outcomes[0].counted
    else:
        assert errored(decision) == []
        assert decision.effect == ("allow" if decision.outcomes else "deny")


@FAST
@given(CONDITIONS, ARGS, CONTEXT)
def test_deny_and_ask_rules_whose_condition_errors_count_as_matched(condition, args, context):
    deny = load("default allow", f'deny t when {condition} reason "r" id "r"')
    ask = load("default allow", f'ask t when {condition} id "r"')
    if raises_eval_error(deny, "t", args, context):
        assert deny.evaluate("t", args, context).effect == "deny"
        assert ask.evaluate("t", args, context).effect == "ask"


@FAST
@given(CONDITIONS, ARGS, CONTEXT)
def test_evaluation_is_deterministic(condition, args, context):
    text = f'ask t when {condition} id "a"\ndeny t when not ({condition}) reason "r" id "d"\nallow t id "base"'
    policy = Policy.from_text(text, "det.policy")
    first = policy.evaluate("t", args, context)
    again = policy.evaluate("t", args, context)
    fresh = Policy.from_text(text, "det.policy").evaluate("t", copy.deepcopy(args), copy.deepcopy(context))
    assert first == again == fresh
    assert msgspec.json.encode(first) == msgspec.json.encode(fresh)
