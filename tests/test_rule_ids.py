"""A rule without an `id` clause is named after what it says, not where it stands, so
`policy fmt --write` renames nothing (issue 9, section 6): cases files and the rule ids a ledger
recorded keep their meaning."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy, PolicyError
from dsl.fmt import format_policy
from policy_gen import policy_texts

runner = CliRunner()

CRAMPED = """policy "shop"
allow get_order   allow list_orders
deny refund when args.amount <= 0 reason "A refund amount must be positive."
ask refund when args.amount > 100 and args.currency == "EUR" or args.amount > 120 reason "Big refunds need finance." approvers 1
allow refund when args.amount <= 100
"""


def ids(text: str) -> list[str]:
    return [rule.rule_id for rule in Policy.from_text(text).rules]


def test_fmt_moves_rules_but_keeps_every_id():
    formatted = format_policy(CRAMPED)
    assert [r.line for r in Policy.from_text(formatted).rules] != [r.line for r in Policy.from_text(CRAMPED).rules]
    assert ids(formatted) == ids(CRAMPED)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(policy_texts())
def test_every_generated_policy_keeps_its_rule_ids_through_fmt(generated):
    text, _ = generated
    try:
        before = ids(text)
    except PolicyError:
        return
    assert ids(format_policy(text)) == before


def test_a_cases_file_naming_a_generated_id_still_passes_after_fmt_write(tmp_path):
    policy = tmp_path / "shop.policy"
    policy.write_text(CRAMPED)
    deny, allow = Policy.load(policy).rules[2].rule_id, Policy.load(policy).rules[4].rule_id
    (tmp_path / "shop.cases").write_text(f'refund {{"amount": -5}} => deny {deny}\nrefund {{"amount": 50}} => allow {allow}\n')
    assert runner.invoke(app, ["policy", "test", str(policy)]).exit_code == 0
    assert runner.invoke(app, ["policy", "fmt", str(policy), "--write"]).exit_code == 0
    assert policy.read_text() != CRAMPED
    result = runner.invoke(app, ["policy", "test", str(policy)])
    assert result.exit_code == 0, result.stdout + result.stderr


def test_the_id_is_the_effect_and_a_digest_of_the_rule_text():
    assert re.fullmatch(r"deny-[0-9a-f]{8}", ids('deny t when args.x == 1 reason "r"')[0])


def test_rules_added_above_or_a_new_reason_leave_an_id_unchanged():
    (rule,) = ids('ask refund when args.amount > 100 reason "Finance decides."')
    moved = ids('# a comment\nallow get_order\n\nask refund when args.amount > 100\n  reason "Reworded."\n  approvers 2')
    assert moved[1] == rule


def test_another_condition_or_effect_is_another_id():
    base = ids("allow t when args.x == 1")[0]
    assert ids("allow t when args.x == 2")[0] != base
    assert ids("ask t when args.x == 1")[0] != base
    assert ids("allow t, u when args.x == 1")[0] != base


def test_rules_of_the_same_text_are_numbered_in_file_order():
    first, second, third = ids('deny t reason "a"\ndeny t reason "b"\ndeny t reason "c"')
    assert (second, third) == (f"{first}.2", f"{first}.3")


def test_a_cases_file_naming_an_old_line_id_is_told_the_new_one(tmp_path):
    policy = tmp_path / "shop.policy"
    policy.write_text(CRAMPED)
    (tmp_path / "shop.cases").write_text('refund {"amount": -5} => deny L3\n')
    result = runner.invoke(app, ["policy", "test", str(policy)])
    assert result.exit_code == 2
    new = Policy.load(policy).rules[2].rule_id
    assert f"the rule at line 3 is '{new}'" in result.stderr
