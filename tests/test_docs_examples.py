"""The shell example of docs/policy-language.md, saved as one policy: its three rules (a deny of
`rm -rf /`, an ask on `git push`, an allow of read-only commands) hold against the spellings that
slip past a raw match (issue 9, section 4), even under `default allow`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsl import Policy

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "policy-language.md").read_text(encoding="utf-8")
PROJECT = {"cwd": "/home/u/proj", "home": "/home/u"}


def shell_example() -> str:
    """The code block that follows "The three rules of this shell example"."""
    after = DOC.split("The three rules of this shell example", 1)[1]
    return re.search(r"```\n(.*?)```", after, re.DOTALL).group(1)


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.from_text('policy "docs-shell"\ndefault allow\n' + shell_example(), name="docs-shell.policy")


def test_the_example_holds_three_rules():
    assert [line.split()[0] for line in shell_example().splitlines() if line and not line.startswith(" ")] == [
        "deny", "ask", "allow"]


@pytest.mark.parametrize("command", ["rm -rf /", "rm -rf /*", "rm -fr //", "rm --recursive --force /", "sudo rm -rf /",
                                     "cd / && rm -rf *", "rm -rf /**", "cd / && rm -rf ."])
def test_recursive_forced_deletion_of_the_root_is_denied(policy, command):
    assert policy.evaluate("Bash", {"command": command}, PROJECT).effect == "deny"


def test_recursive_forced_deletion_of_the_root_is_denied_under_a_windows_cwd(policy):
    # a new user's trial: `/` under a Windows cwd is C:\, which the literal "/" never equals
    windows = {"cwd": "C:\\Users\\me\\proj", "home": "C:\\Users\\me"}
    for command in ("rm -rf /", "rm -rf C:\\\\", "cd / && rm -rf ."):
        assert policy.evaluate("Bash", {"command": command}, windows).effect == "deny", command
    assert policy.evaluate("Bash", {"command": "rm -rf build"}, windows).effect == "allow"


@pytest.mark.parametrize("command", ["git push", "git -C . push", "git -c core.sshCommand='sh -c id' push",
                                     "git --git-dir=.git push origin main", "git --work-tree . push", "cd src && git push",
                                     # pushes under other names, and git commands that run one (a fourth review)
                                     "git send-pack origin main", "git subtree push --prefix=lib origin main",
                                     "git http-push https://x/repo.git main", "git submodule foreach 'git push'",
                                     "git rebase -x 'git push -f' HEAD~3", "git rebase --exec='rm -rf /' HEAD~1",
                                     "git bisect run ./push.sh", "git ls-remote --upload-pack='touch x' .",
                                     "git fetch --upload-pack=x origin", "git difftool", "git mergetool",
                                     "git filter-branch --tree-filter 'git push' HEAD", "git -c alias.p='!git push' p",
                                     "git p", "git config alias.p '!git push'"])
def test_a_push_however_spelled_asks(policy, command):
    assert policy.evaluate("Bash", {"command": command}, PROJECT).effect == "ask"


@pytest.mark.parametrize("command", ["cat ../../../etc/shadow", "cd src && cat ../../secret.txt", "cat ~/.git-credentials",
                                     "cat .env", "git -c core.fsmonitor=evil status", "cd evil && git status",
                                     "rg --hostname-bin=make TODO", "sort -o out.txt in.txt", "cat x > y",
                                     "cd src; cat ../../x", "GIT_DIR=evil git status"])
def test_the_allow_rule_does_not_allow_what_it_refuses(policy, command):
    decision = policy.evaluate("Bash", {"command": command}, PROJECT)
    # the default (allow) may let it run, or an error in the rule makes it deny; the rule never does
    assert decision.by_default or decision.effect != "allow", command


@pytest.mark.parametrize("command", ["ls -la src", "cat src/app.py", "cd src && cat app.py", "git status", "rg TODO",
                                     "grep -rn 'a\\|b' src", "ls src 2>/dev/null"])
def test_read_only_commands_inside_the_project_are_allowed_by_the_rule(policy, command):
    decision = policy.evaluate("Bash", {"command": command}, PROJECT)
    assert decision.effect == "allow" and not decision.by_default, command
