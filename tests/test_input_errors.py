"""A call whose input cannot be read (a command that is not valid shell) is decided as before
(deny, or ask, never allow) but told why once, instead of with every unrelated reason of the
rules that met the same error (issue 9, section 6)."""

from __future__ import annotations

import pytest

from dsl import Policy
from dsl.values import UNPARSEABLE_COMMAND

SHELL_DENIES = (
    'default allow',
    'deny Bash when any c in shell(args.command): c.program == "rm" and c.flags contains "r" reason "No recursive removal." id "rm"',
    'deny Bash when any c in shell(args.command): c.program == "git" and c.args contains "push" reason "No pushing." id "push"',
    'deny Bash when any c in shell(args.command): c.program == "curl" reason "No network." id "curl"',
)


def load(*lines: str) -> Policy:
    return Policy.from_text("\n".join(lines), "test.policy")


def assert_one_parse_reason(reasons: tuple[str, ...]) -> None:
    (reason,) = reasons
    assert reason.startswith("This command cannot be parsed: the command is not valid shell syntax at line 1, column ")


def test_unparseable_command_is_denied_with_one_reason_naming_the_parser_error():
    decision = load(*SHELL_DENIES).evaluate("Bash", {"command": "echo 'unterminated"})
    assert decision.effect == "deny"
    assert_one_parse_reason(decision.reasons)


def test_unparseable_command_still_records_every_rule_that_counted():
    decision = load(*SHELL_DENIES).evaluate("Bash", {"command": "a && && b"})
    assert decision.deciding == ("rm", "push", "curl")
    assert [o.rule for o in decision.outcomes if o.counted and o.error] == ["rm", "push", "curl"]
    assert all(o.error.startswith(UNPARSEABLE_COMMAND) for o in decision.outcomes)
    assert sum("could not be evaluated" in line for line in decision.explain()) == 3


def test_unparseable_command_with_one_rule_drops_its_unrelated_reason():
    decision = load(*SHELL_DENIES[:2]).evaluate("Bash", {"command": "echo 'x"})
    assert decision.effect == "deny"
    assert_one_parse_reason(decision.reasons)


def test_unparseable_command_keeps_the_reason_of_a_rule_that_held():
    policy = load(*SHELL_DENIES, 'deny Bash when args.timeout > 600 reason "At most ten minutes." id "slow"')
    decision = policy.evaluate("Bash", {"command": "echo 'x", "timeout": 900})
    assert decision.reasons[0] == "At most ten minutes."
    assert_one_parse_reason(decision.reasons[1:])


def test_unparseable_command_on_ask_rules_still_asks_with_one_reason():
    policy = load(
        'default deny "no"',
        'ask Bash when any c in shell(args.command): c.program == "git" reason "git needs a look."',
        'ask Bash when any c in shell(args.command): c.program == "npm" reason "npm needs a look."',
    )
    decision = policy.evaluate("Bash", {"command": "git commit -m 'x"})
    assert decision.effect == "ask"
    assert_one_parse_reason(decision.reasons)


def test_unparseable_command_under_a_default_allow_is_denied_saying_so_once():
    policy = load(
        'default allow',
        'allow Bash when all c in shell(args.command): c.program == "ls"',
        'allow Bash when all c in shell(args.command): c.program == "cat"',
    )
    decision = policy.evaluate("Bash", {"command": "ls 'x"})
    assert decision.effect == "deny" and decision.by_default
    assert_one_parse_reason(decision.reasons[:1])
    assert len(decision.reasons) == 2 and "default is allow" in decision.reasons[1]


def test_a_script_known_only_at_run_time_is_an_input_error_too():
    decision = load(*SHELL_DENIES).evaluate("Bash", {"command": 'bash -c "$SCRIPT"'})
    assert decision.effect == "deny"
    assert decision.reasons == ("This command cannot be parsed: bash runs a script that is only known at run time.",)


def test_other_errors_keep_each_rule_reason_beside_its_error():
    policy = load(
        'deny refund when args.amount > 100 reason "Over 100 needs a manager." id "big"',
        'deny refund when args.amount < 0 reason "No negative refunds." id "neg"',
    )
    decision = policy.evaluate("refund", {"amount": "5"})
    assert decision.effect == "deny"
    assert [r.split(" (")[0] for r in decision.reasons] == ["Over 100 needs a manager.", "No negative refunds."]
    assert all("could not be evaluated" in r for r in decision.reasons)


def test_a_case_terminator_outside_a_case_is_a_syntax_error_as_bash_says():
    # tree-sitter-bash reads `ls ;; cat x` as two commands; bash runs neither (a syntax error)
    policy = load(*SHELL_DENIES)
    for command in ("ls ;; cat x", "ls;;", "(ls ;; rm -r x)"):
        decision = policy.evaluate("Bash", {"command": command})
        assert decision.effect == "deny", command
        assert_one_parse_reason(decision.reasons)
        assert "ends only a case item" in decision.reasons[0]
    assert policy.evaluate("Bash", {"command": 'echo ";;"; case x in a) ls;; esac'}).effect == "allow"


def test_a_windows_path_with_single_backslashes_in_json_input_says_how_to_write_it(tmp_path):
    from dsl.cases import CasesError, parse_cases
    from dsl.jsoninput import parse_json

    with pytest.raises(ValueError, match=r"write a Windows path's as \\\\"):
        parse_json('{"file_path": "C:\\Users\\x"}', "--args")
    with pytest.raises(CasesError, match=r"write a Windows path's as \\\\"):
        parse_cases('Read {"file_path": "C:\\Users\\x"} => ask\n', "w.cases")
