"""A policy's `approvers N from GROUP` may name a group of the roster (issue 11, section 2): resolved
at load time into the principals' names, refused when the policy defines the same name, and covered
by the policy's digest (docs/policy-language.md, "Roster groups"; dsl.policy.policy_digest)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy, PolicyError
from ledger.clock import ManualClock
from ledger.proof.roster import parse_roster
from ledger.workflow.errors import PolicyMismatch
from ledger.workflow.gate import Gate
from support import START

ROSTER = """
[[principal]]
name = "bob"
kind = "reviewer"
groups = ["finance", "ops"]

[[principal]]
name = "ann"
kind = "reviewer"
groups = ["finance"]

[[principal]]
name = "agent"
kind = "agent"
"""

POLICY = """policy "payments"
default deny "Only payments."
ask pay when args.amount > 100
  reason "A large payment."
  approvers 2 from finance
  id "large"
allow pay
"""

runner = CliRunner()


def roster_groups(text: str = ROSTER) -> dict[str, tuple[str, ...]]:
    return parse_roster(text, "roster.toml").groups()


def load(text: str = POLICY, groups=None) -> Policy:
    return Policy.from_text(text, "pay.policy", groups=groups)


def errors(text: str, groups=None) -> list:
    with pytest.raises(PolicyError) as caught:
        load(text, groups)
    return list(caught.value.errors)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- the roster's groups --------------------------------------------------------------------


def test_roster_groups_are_its_principals_names_sorted_by_group():
    assert roster_groups() == {"finance": ("ann", "bob"), "ops": ("bob",)}
    assert parse_roster(ROSTER).group("finance") == roster_groups()["finance"]
    assert parse_roster('[[principal]]\nname = "x"\nkind = "agent"\n').groups() == {}


# --- resolving --------------------------------------------------------------------------------


def test_a_policy_naming_a_roster_group_asks_its_members():
    policy = load(groups=roster_groups())
    decision = policy.evaluate("pay", {"amount": 500})
    assert decision.effect == "ask"
    (quorum,) = decision.requirements.quorums
    assert (quorum.count, quorum.approvers, quorum.group) == (2, ("ann", "bob"), "finance")
    assert policy.evaluate("pay", {"amount": 5}).effect == "allow"
    assert policy.external_groups == {"finance": ("ann", "bob")}
    assert policy.groups["finance"] == ("ann", "bob")


def test_the_default_may_name_a_roster_group_and_unused_roster_groups_are_not_kept():
    policy = load('default ask "A person decides." approvers 1 from ops\n', roster_groups())
    (quorum,) = policy.evaluate("anything", {}).requirements.quorums
    assert quorum.approvers == ("bob",)
    assert policy.external_groups == {"ops": ("bob",)}


def test_groups_of_the_policy_still_resolve_beside_roster_groups():
    text = POLICY + 'group desk = ["d1", "d2"]\nask refund approvers 1 from desk\n'
    policy = load(text, roster_groups())
    assert policy.evaluate("refund", {}).requirements.quorums[0].approvers == ("d1", "d2")
    assert policy.external_groups == {"finance": ("ann", "bob")}  # desk is the policy's own


# --- the digest -----------------------------------------------------------------------------


def test_without_roster_groups_the_digest_is_the_sha256_of_the_source():
    text = 'default deny "no"\ngroup desk = ["d1"]\nask refund approvers 1 from desk\n'
    assert load(text).digest == sha256(text)
    policy = load(text, roster_groups())  # a roster given, but no group of it named
    assert policy.digest == policy.source_digest == sha256(text)


def test_with_roster_groups_the_digest_follows_the_documented_encoding():
    policy = load(groups=roster_groups())
    canonical = ('{"format":"countersign-policy-groups/1","groups":{"finance":["ann","bob"]},'
                 f'"source":"{sha256(POLICY)}"}}')
    assert policy.source_digest == sha256(POLICY)
    assert policy.digest == hashlib.sha256(canonical.encode("ascii")).hexdigest()
    assert policy.evaluate("pay", {"amount": 500}).policy_digest == policy.digest


def test_the_digest_changes_with_the_named_groups_members():
    before = load(groups=roster_groups()).digest
    carol = ROSTER + '\n[[principal]]\nname = "carol"\nkind = "reviewer"\ngroups = ["finance"]\n'
    assert load(groups=roster_groups(carol)).digest != before
    without_ann = ROSTER.replace('groups = ["finance"]', "groups = []")
    with pytest.raises(PolicyError, match="the quorum needs 2 approvers but only 1 may approve"):
        load(groups=roster_groups(without_ann))


def test_the_digest_ignores_groups_the_policy_does_not_name():
    before = load(groups=roster_groups()).digest
    more = dict(roster_groups(), ops=("bob", "dan"), audit=("eve",))
    assert load(groups=more).digest == before
    assert load(groups={"finance": ("bob", "ann", "bob")}).digest == before  # order and repeats aside


@settings(max_examples=60, deadline=None)
@given(members=st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=6, unique=True), data=st.data())
def test_the_digest_depends_on_the_set_of_members_only(members, data):
    shuffled = data.draw(st.permutations(members))
    repeated = shuffled + data.draw(st.lists(st.sampled_from(members), max_size=3))
    first = load(groups={"finance": tuple(members)})
    second = load(groups={"finance": tuple(repeated)})
    assert first.digest == second.digest
    assert first.external_groups["finance"] == tuple(sorted(members))
    assert load(groups={"finance": tuple(members[1:]) + ("someone else",)}).digest != first.digest


def test_a_request_decided_under_one_membership_is_not_edited_under_another(tmp_path):
    clock = ManualClock(START)
    with Gate(load(groups=roster_groups()), tmp_path / "ledger", clock=clock) as gate:
        request = gate.propose("pay", {"amount": 500}, proposer="agent").request
    carol = dict(roster_groups(), finance=("ann", "bob", "carol"))
    with Gate(load(groups=carol), tmp_path / "ledger", clock=clock) as gate:
        with pytest.raises(PolicyMismatch):
            gate.edit(request, editor="ann", args={"amount": 400})
    with Gate(load(groups=roster_groups()), tmp_path / "ledger", clock=clock) as gate:
        state = gate.edit(request, editor="ann", args={"amount": 400})
        assert state.request == request


# --- errors -----------------------------------------------------------------------------------


def test_a_group_the_policy_and_the_roster_define_with_other_members_is_an_error():
    text = POLICY + 'group finance = ["ann", "cat"]\n'
    (error,) = errors(text, roster_groups())
    assert error.message == "group 'finance' is defined in the policy (line 8) with other members than the roster's"
    assert (error.span.line, error.span.column) == (8, 7)
    with pytest.raises(PolicyError) as caught:
        load(text, roster_groups())
    assert ("pay.policy:8:7: error: group 'finance' is defined in the policy (line 8) with other members than the roster's"
            in caught.value.render())


def test_a_group_the_policy_and_the_roster_define_with_the_same_members_is_one_group():
    text = POLICY + 'group finance = ["bob", "ann"]\n'
    assert load(text, roster_groups()).digest == load(text).digest  # the policy's own group: the file decides


def test_an_unknown_group_without_a_roster_says_to_pass_one():
    (error,) = errors(POLICY)
    assert error.message == "unknown group 'finance'"
    assert error.help == "pass --roster FILE if it is a roster group"
    (error,) = errors(POLICY.replace("from finance", "from desc") + 'group desk = ["a", "b"]\n')
    assert error.help == "did you mean 'desk'? or pass --roster FILE if it is a roster group"


def test_an_unknown_group_with_a_roster_suggests_from_both():
    (error,) = errors(POLICY.replace("from finance", "from financ"), roster_groups())
    assert (error.message, error.help) == ("unknown group 'financ'", "did you mean 'finance'?")
    text = POLICY.replace("from finance", "from desc") + 'group desk = ["a", "b"]\n'
    (error,) = errors(text, roster_groups())
    assert error.help == "did you mean 'desk'?"
    (error,) = errors(POLICY.replace("from finance", "from zzz"), roster_groups())
    assert error.help is None


def test_a_quorum_larger_than_the_roster_group_is_an_error():
    (error,) = errors(POLICY.replace("approvers 2", "approvers 3"), roster_groups())
    assert error.message == "the quorum needs 3 approvers but only 2 may approve"


def test_an_empty_external_group_that_a_rule_names_is_an_error():
    (error,) = errors(POLICY, {"finance": ()})
    assert error.message == "roster group 'finance' has no members"


@pytest.mark.parametrize("groups", [["finance"], {"finance": "ann"}, {"finance": ("ann", 1)}, {1: ("ann",)}])
def test_groups_of_the_wrong_shape_are_refused(groups):
    with pytest.raises(TypeError):
        load(groups=groups)


# --- the command line -------------------------------------------------------------------------


@pytest.fixture()
def files(tmp_path) -> tuple[Path, Path]:
    policy, roster = tmp_path / "pay.policy", tmp_path / "roster.toml"
    policy.write_text(POLICY, encoding="utf-8")
    roster.write_text(ROSTER, encoding="utf-8")
    return policy, roster


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_policy_check_without_the_roster_fails_and_says_to_pass_it(files):
    policy, _ = files
    result = run("policy", "check", policy)
    assert result.exit_code == 2
    assert f"{policy}:5:20: error: unknown group 'finance'" in result.stderr
    assert "help: pass --roster FILE if it is a roster group" in result.stderr


def test_policy_check_with_the_roster_lists_the_groups_and_the_digest(files):
    policy, roster = files
    result = run("policy", "check", policy, "--roster", roster)
    assert result.exit_code == 0, result.stderr
    digest = Policy.load(policy, groups=parse_roster(ROSTER).groups()).digest
    assert f"sha256 {digest}, roster group finance (2) of {roster}" in result.stdout


def test_policy_check_with_a_conflicting_or_unreadable_roster_exits_2(files, tmp_path):
    policy, roster = files
    policy.write_text(POLICY + 'group finance = ["ann"]\n', encoding="utf-8")
    result = run("policy", "check", policy, "--roster", roster)
    assert result.exit_code == 2
    assert "error: group 'finance' is defined in the policy (line 8) with other members than the roster's" in result.stderr
    result = run("policy", "check", policy, "--roster", tmp_path / "missing.toml")
    assert result.exit_code == 2
    assert "missing.toml: cannot read the roster" in result.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[[principal]]\nname = "x"\nkind = "boss"\n', encoding="utf-8")
    result = run("policy", "eval", policy, "--tool", "pay", "--roster", bad)
    assert result.exit_code == 2
    assert f"{bad}:1: principal 'x': `kind` must be one of" in result.stderr


def test_policy_eval_and_explain_ask_the_roster_group(files):
    policy, roster = files
    result = run("policy", "eval", policy, "--tool", "pay", "--args", '{"amount": 500}', "--roster", roster, "--json")
    assert result.exit_code == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["requirements"]["quorums"] == [{"count": 2, "approvers": ["ann", "bob"], "group": "finance"}]
    assert run("policy", "eval", policy, "--tool", "pay", "--args", '{"amount": 500}').exit_code == 2
    result = run("policy", "explain", policy, "--tool", "pay", "--args", '{"amount": 500}', "--roster", roster)
    assert result.exit_code == 0, result.stderr
    assert "finance" in result.stdout


def test_policy_test_runs_cases_with_the_roster(files, tmp_path):
    policy, roster = files
    cases = tmp_path / "pay.cases"
    cases.write_text('pay {"amount": 500} => ask large\npay {"amount": 5} => allow\n', encoding="utf-8")
    result = run("policy", "test", policy, cases, "--roster", roster)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert run("policy", "test", policy, cases).exit_code == 2


def test_simulate_takes_the_roster(files, tmp_path):
    policy, roster = files
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"tool": "pay", "args": {"amount": 500}}\n{"tool": "pay", "args": {"amount": 5}}\n', encoding="utf-8")
    ledger = tmp_path / "ledger"
    result = run("simulate", "--policy", policy, "--calls", calls, "--ledger", ledger, "--roster", roster, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["calls"] == 2
    result = run("simulate", "--policy", policy, "--calls", calls, "--ledger", tmp_path / "other")
    assert result.exit_code == 2
    assert "pass --roster FILE if it is a roster group" in result.stderr
