"""`let` and `include` (dsl/lets.py, dsl/includes.py): what the compliance cases cannot say as data.

The central property: a policy with lets decides every call exactly as the same policy with each
use replaced by its body by hand (hypothesis draws both from one token list), so the three
evaluators of dsl.compiler, which only ever see the expanded nodes, need nothing new. Also: fmt
round trips lets, explain shows each use, the digest of a file without includes is unchanged,
`Policy.sources` loads again to the same policy, and diagnostics in included files carry their
file.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Policy, PolicyError, ast
from dsl.analysis import analyze, shape
from dsl.errors import span_file
from dsl.explain import explain
from dsl.fmt import format_policy
from dsl.includes import files_digest
from dsl.lets import reread
from dsl.parser import parse
from policy_gen import calls, comparison, condition, layout, q

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- a policy with lets, and the same policy expanded by hand --------------------------------------


@st.composite
def let_policies(draw) -> tuple[list[list[str]], list[list[str]]]:
    """(statements with lets, the same statements with every use written out), as token lists.

    `p0` is a parameterless let (a condition); `p1(v)` one whose body reads fields of `v`, used
    with `args` or `context` as the argument; `p2(w)` uses `p1` (a let in a let)."""
    body0 = draw(condition())[1]
    kind, body1 = draw(comparison())
    body1 = ["v" if t == "args" else t for t in body1]
    body2 = ["p1", "(", "w", ")", draw(st.sampled_from(["and", "or"])), "(", *draw(condition())[1], ")"]
    lets = [["let", "p0", "="] + body0, ["let", "p1", "(", "v", ")", "="] + body1, ["let", "p2", "(", "w", ")", "="] + body2]

    def inline(tokens: list[str]) -> list[str]:
        out, i = [], 0
        while i < len(tokens):
            t = tokens[i]
            if t == "p0":
                out += ["("] + body0 + [")"]
                i += 1
            elif t in ("p1", "p2") and tokens[i + 1] == "(":
                arg = tokens[i + 2]
                body = body1 if t == "p1" else inline(body2)
                out += ["("] + [arg if b == ("v" if t == "p1" else "w") else b for b in body] + [")"]
                i += 4
            else:
                out.append(t)
                i += 1
        return out

    rules, written = [], []
    for n in range(draw(st.integers(1, 4))):
        effect = draw(st.sampled_from(["allow", "deny", "ask"]))
        use = draw(st.sampled_from([["p0"], ["p1", "(", "args", ")"], ["p1", "(", "context", ")"], ["p2", "(", "args", ")"],
                                    ["not", "p0"]]))
        extra = draw(condition())[1]
        cond = use + [draw(st.sampled_from(["and", "or"])), "("] + extra + [")"] if draw(st.booleans()) else use
        head = [effect, draw(st.sampled_from(["read_file", "Bash", "deploy"])), "when"]
        tail = ["reason", q("r")] if effect == "deny" else []
        rules.append(head + cond + tail + ["id", q(f"r{n}")])
        written.append(head + inline(cond) + tail + ["id", q(f"r{n}")])
    return lets + rules, written


def _text(statements: list[list[str]]) -> str:
    return "\n".join(" ".join(s) for s in statements) + "\n"


@SETTINGS
@given(let_policies(), st.lists(calls(), min_size=1, max_size=6))
def test_a_policy_with_lets_decides_every_call_as_the_same_policy_written_out(drawn, drawn_calls):
    with_lets, written_out = drawn
    try:
        expected = Policy.from_text(_text(written_out), "out.policy")
    except PolicyError:
        with pytest.raises(PolicyError):  # what the checker refuses written out, it refuses as a let
            Policy.from_text(_text(with_lets), "lets.policy")
        return
    try:
        policy = Policy.from_text(_text(with_lets), "lets.policy")
    except PolicyError as exc:
        # a let's body is checked on its own as well, so a type error in it stands even where no
        # rule uses it (the written-out policy then holds no copy of it): only the lets' lines
        errors = [d for d in exc.diagnostics if d.severity == "error"]
        assert errors and all(d.span is not None and d.span.line <= 3 for d in errors), exc
        return
    for tool, args, context in drawn_calls:
        a, b = policy.evaluate(tool, args, context), expected.evaluate(tool, args, context)
        assert (a.effect, a.by_default, a.deciding, a.requirements) == (b.effect, b.by_default, b.deciding, b.requirements)
        assert [(o.rule, o.counted, o.error) for o in a.outcomes] == [(o.rule, o.counted, o.error) for o in b.outcomes]
        # explain traces the same expanded nodes, and says so rule by rule (it raises otherwise)
        assert explain(policy, tool, args, context).effect == a.effect


@SETTINGS
@given(let_policies().flatmap(lambda d: layout(d[0])))
def test_fmt_round_trips_lets_keeping_comments_and_the_tree(generated):
    text, comments = generated
    once = format_policy(text)
    assert format_policy(once) == once
    assert Counter(line.split("# c", 1)[1] for line in once.split("\n") if "# c" in line) == Counter(c.split("# c", 1)[1] for c in comments) or not comments
    before, after = parse(text), parse(once)
    assert [type(s) for s in before.statements] == [type(s) for s in after.statements]
    assert lets_of(before) == lets_of(after)
    assert shape_rules(before) == shape_rules(after)


def lets_of(tree):
    return [(s.name, s.params and tuple(p for p, _ in s.params), shape(s.body)) for s in tree.of_type(ast.LetDecl)]


def shape_rules(tree):
    return [(r.effect, tuple(s.pattern for s in r.selectors), shape(r.condition)) for r in tree.of_type(ast.Rule)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["let", "f", "g", "(", ")", "=", ",", "a", "x", "args", ".", "b", "==", "1", "allow", "t",
                                 "when", "not", "and", "include", '"x.policy"', "any", "in", ":", "len"]), max_size=30).map(" ".join))
def test_token_soup_with_lets_loads_or_raises_policy_error(text):
    try:
        Policy.from_text(text, "soup.policy")
    except PolicyError as exc:
        assert exc.diagnostics and all(d.span is None or d.span.line >= 1 for d in exc.diagnostics)


# --- examples ------------------------------------------------------------------------------------

MAIL = """let internal(addr) = addr endswith "@example.com"
let big = args.amount > 500
default allow
deny send_email when not (all r in args.to: internal(r))
  reason "external"
ask pay when big
"""


def test_explain_shows_the_use_and_the_definition():
    policy = Policy.from_text(MAIL, "mail.policy")
    e = explain(policy, "send_email", {"to": ["a@example.com", "x@evil.com"]})
    rule = e.rules[0]
    assert rule.condition == "not (all r in args.to: internal(r))"
    item = rule.steps.children[0].children[2]
    use = item.children[0]
    assert (use.kind, use.text, use.line, use.column, use.result) == ("let", "internal(r)", 4, 45, "false")
    assert use.how == "let internal(addr), defined at line 1"
    body = use.children[0]
    assert (body.text, body.line, body.kind) == ('r endswith "@example.com"', 1, "compare")


def test_the_recorded_condition_is_the_rule_as_written():
    policy = Policy.from_text(MAIL, "mail.policy")
    decision = policy.evaluate("pay", {"amount": 900})
    assert decision.effect == "ask" and [o.condition for o in decision.outcomes] == ["big"]


def test_a_policy_without_includes_keeps_the_digest_of_its_bytes(tmp_path):
    path = tmp_path / "mail.policy"
    path.write_bytes(MAIL.encode())
    policy = Policy.load(path)
    assert policy.digest == hashlib.sha256(MAIL.encode()).hexdigest()
    assert policy.sources == (("mail.policy", MAIL.encode()),)


def test_the_digest_covers_every_file_read_and_sources_load_again(tmp_path):
    (tmp_path / "lib").mkdir()
    main = b'include "lib/a.policy"\nallow t when yes\n'
    lib = b'let yes = args.x == 1\n'
    (tmp_path / "main.policy").write_bytes(main)
    (tmp_path / "lib" / "a.policy").write_bytes(lib)
    policy = Policy.load(tmp_path / "main.policy")
    assert policy.sources == (("main.policy", main), ("lib/a.policy", lib))
    listed = json.dumps({"files": [["main.policy", hashlib.sha256(main).hexdigest()], ["lib/a.policy", hashlib.sha256(lib).hexdigest()]],
                         "format": "countersign-policy-files/1"}, separators=(",", ":"))
    assert policy.digest == hashlib.sha256(listed.encode()).hexdigest() == files_digest(policy.sources)
    again = Policy.from_sources(policy.sources)
    assert again.digest == policy.digest and again.evaluate("t", {"x": 1}).effect == "allow"
    # an edit of the included file changes the digest
    (tmp_path / "lib" / "a.policy").write_bytes(b'let yes = args.x == 2\n')
    assert Policy.load(tmp_path / "main.policy").digest != policy.digest
    # a source missing from the list is an error at its include, never a read of the disk
    with pytest.raises(PolicyError, match="cannot read 'lib/a.policy'"):
        Policy.from_sources(policy.sources[:1])


def test_an_include_needs_a_file_to_be_relative_to():
    with pytest.raises(PolicyError, match="an include needs the file the policy is loaded from"):
        Policy.from_text('include "a.policy"\n', "x.policy")


def test_errors_in_included_files_render_with_their_name_and_line(tmp_path):
    (tmp_path / "main.policy").write_text('allow t\ninclude "sub/b.policy"\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.policy").write_text('# b\ndeny u when args.x == 1\n')
    with pytest.raises(PolicyError) as info:
        Policy.load(tmp_path / "main.policy")
    (d,) = info.value.errors
    assert span_file(d.span).endswith("sub/b.policy") and (d.span.line, d.span.column) == (2, 1)
    rendered = info.value.render()
    assert "sub/b.policy:2:1: error: a deny rule needs a reason" in rendered and "deny u when args.x == 1" in rendered


def test_included_rules_keep_their_file_in_explain_and_analysis(tmp_path):
    (tmp_path / "main.policy").write_text('include "b.policy"\ndeny pay when big reason "r"\n')
    (tmp_path / "b.policy").write_text('let big = args.amount > 500\nallow pay when args.amount > 500\n')
    policy = Policy.load(tmp_path / "main.policy")
    e = explain(policy, "pay", {"amount": 900})
    assert [(r.file and r.file.endswith("b.policy"), r.line) for r in e.rules] == [(True, 2), (None, 2)]
    findings = analyze(reread(policy)[0])
    never = [f for f in findings if f.code == "never-fires"]
    assert never and span_file(never[0].span).endswith("b.policy")


def test_expansion_is_bounded_and_the_error_points_at_the_use():
    lets = ["let a0(x) = x == 1"] + [f"let a{i}(x) = " + " or ".join([f"a{i - 1}(x)"] * 4) for i in range(1, 8)]
    with pytest.raises(PolicyError, match="more than 5000 nodes") as info:
        Policy.from_text("\n".join(lets) + "\nallow t when a7(args.x)\n", "big.policy")
    assert info.value.errors[0].span.line <= 8


def test_fmt_lays_out_a_long_let_body_below_its_head():
    text = "let long(a) = " + " or ".join(f'a.host == "{c * 30}.example.com"' for c in "abc") + "\n"
    out = format_policy(text)
    assert out.splitlines()[0] == "let long(a) ="
    assert out.splitlines()[1].startswith('  a.host == "aaa') and out.splitlines()[2].startswith("    or ")
    assert format_policy('let  f( a ,b )=a==b\ninclude   "x.policy"\n') == 'let f(a, b) = a == b\ninclude "x.policy"\n'


def test_a_misspelt_let_is_suggested_where_it_is_used():
    """`web_onyl(r)` and `recipents` were told the built-in functions and roots only (new-user
    finding): the lets are names too."""
    text = ('let web_only(r) = r == "x"\nlet recipients = args.to\n'
            'ask send when web_onyl(args.a)\nask send when any r in recipents: r == "y"\n')
    with pytest.raises(PolicyError) as info:
        Policy.from_text(text, "typo.policy")
    helps = [d.help for d in info.value.diagnostics if d.severity == "error"]
    assert "did you mean 'web_only'?" in helps and "did you mean 'recipients'?" in helps


def test_a_regular_expressions_backslash_gets_a_hint():
    with pytest.raises(PolicyError) as info:
        Policy.from_text('allow pay when matches(args.iban, "^DE\\d+$")\n', "re.policy")
    assert 'is written "\\\\d"' in str(info.value)


def test_a_let_named_like_a_function_is_one_error_not_two():
    """`let sum = 3` is refused; `sum([1])` below it was then read as a use of that let and drew a
    second, wrong error ('sum' is a value, not a function)."""
    with pytest.raises(PolicyError) as info:
        Policy.from_text('let sum = 3\nallow pay when sum([1]) > 0\n', "s.policy")
    errors = [d.message for d in info.value.diagnostics if d.severity == "error"]
    assert errors == ["a let cannot be named 'sum': it is a function"]
