"""A redirection in the middle of a command keeps the words after it (hostile review of issue 9).

tree-sitter-bash reads `cat 2>/dev/null /etc/shadow` as one redirect with the destinations
`/dev/null` and `/etc/shadow`; bash redirects to the first and runs `cat /etc/shadow`
(bash(1), REDIRECTION: "may precede or appear anywhere within a simple command"). shell() read
only the first destination and dropped the rest, so `argv` was `["cat"]`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dsl import Policy
from dsl.subjects import parse_shell_uncached

SAMPLE = Policy.load(Path(__file__).resolve().parents[1] / "samples" / "coding-agent.policy")
CONTEXT = {"cwd": "/home/u/proj", "home": "/home/u"}
DOCS_DENY = Policy.from_text(
    'default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" and c.flags contains "recursive" '
    'and c.flags contains "force" and any a in c.args: path(a, c.cwd) == "/" reason "no"', "docs.policy")


@pytest.mark.parametrize("command, argv, redirects", [
    ("cat 2>/dev/null /etc/shadow x", ("cat", "/etc/shadow", "x"), ("/dev/null",)),
    ("cat 2>&1 /etc/shadow", ("cat", "/etc/shadow"), ()),
    ("cat >&2 /etc/shadow", ("cat", "/etc/shadow"), ()),
    ("rm -rf 2>/dev/null /", ("rm", "-rf", "/"), ("/dev/null",)),
    ("ls > out x", ("ls", "x"), ("out",)),
    ("cat <<EOF 2>/dev/null a\nhi\nEOF", ("cat", "a"), ("/dev/null",)),
    ("cat x 2>/dev/null", ("cat", "x"), ("/dev/null",)),
])
def test_the_words_after_a_redirection_are_the_commands(command, argv, redirects):
    (first, *_) = parse_shell_uncached(command)
    assert (first.argv, first.redirects) == (argv, redirects)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed here")
def test_bash_runs_the_words_after_a_redirection():
    out = subprocess.run(["bash", "-c", "echo 2>/dev/null a b; exec 2>/dev/null echo c"], capture_output=True, text=True)
    assert out.stdout.split() == ["a", "b", "c"]


@pytest.mark.parametrize("command", [
    "rm 2>/dev/null -rf /", "rm -rf 2>/dev/null /", "exec 2>/dev/null rm -rf /", "sudo 2>/dev/null rm -rf /",
    "env 2>&1 rm -rf /", "eval 2>/dev/null 'rm -rf /'",
])
def test_the_docs_deny_rule_sees_the_command_behind_a_redirection(command):
    assert DOCS_DENY.evaluate("Bash", {"command": command}, CONTEXT).effect == "deny"


@pytest.mark.parametrize("command", [
    "find 2>/dev/null . -exec rm -rf / ;", "cat 2>/dev/null /etc/shadow", "cat 2>/dev/null ~/.ssh/id_rsa",
    "cat </dev/null ../../../etc/passwd", "sort 2>/dev/null --compress-program=sh x", "rg 2>/dev/null --pre=sh x",
    "cat 2>&1 /etc/shadow", "find >&2 / -delete",
])
def test_the_sample_runs_nothing_freely_behind_a_redirection(command):
    assert SAMPLE.evaluate("Bash", {"command": command}, CONTEXT).effect != "allow"


def test_a_word_after_the_redirection_of_a_compound_command_is_a_syntax_error():
    assert DOCS_DENY.evaluate("Bash", {"command": "(ls) 2>/dev/null rm -rf /"}, CONTEXT).effect == "deny"
    assert SAMPLE.evaluate("Bash", {"command": "cat x 2>/dev/null"}, CONTEXT).effect == "allow"
