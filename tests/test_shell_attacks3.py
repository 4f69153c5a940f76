"""A third hostile review of shell(), after its own linear-time parser (dsl/subjects/bash): texts
bash 5.2 runs a program in that shell() does not list, so the docs' deny (`default allow`) lets
`rm -rf /` through. Each was found by a differential fuzz against bash 5.2.15 run in a jail
(every program bash ran logged its argv); each test is xfail until the walker is fixed.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dsl.subjects import parse_shell
from dsl.values import EvalError
from support import DOCS_DENY


def decide(command: str):
    return DOCS_DENY.evaluate("Bash", {"command": command}, {"cwd": "/home/u/proj"})


def lists_rm_or_refuses(command: str) -> bool:
    """shell() lists the `rm` bash runs (with -rf /), or refuses the text (fails closed)."""
    try:
        commands = parse_shell(command)
    except EvalError:
        return True
    return any(c.program == "rm" and c.args == ("/",) for c in commands)


def bash_runs_substitution(command: str) -> bool:
    """Whether bash runs the `$(...)`/`<(...)` in `command` when `rm -rf /` is replaced by a
    harmless `echo RAN >&2`: run here, it shows the reading is bash's."""
    harmless = command.replace("rm -rf /", "echo RAN >&2")
    run = subprocess.run(["bash", "-c", harmless], capture_output=True, timeout=10, cwd="/tmp")
    return b"RAN" in run.stderr


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


# --- 1. `>& WORD`: bash expands WORD a second time -------------------------------------------------
# bash 5.2 (redir.c): `>&WORD` / `1>&WORD` whose expansion is not a number or `-` is made into
# `&>WORD`, and WORD is expanded again then: what quotes hid the first time runs. shell() reads
# WORD once, as a file name.

DUP_WORD = [
    "echo hi >& '$(rm -rf /)'",
    "echo hi >&'$(rm -rf /)'",
    "echo hi 1>& '$(rm -rf /)'",
    'echo hi >& "\\$(rm -rf /)"',
    "echo hi >& '`rm -rf /`'",
    "echo hi >& $'$(rm -rf /)'",
    "{ echo hi; } >& '$(rm -rf /)'",
    "exec >& '$(rm -rf /)'",
    "echo hi >& '${x:-$(rm -rf /)}'",
    "echo hi >& '<(rm -rf /)'",
]


@needs_bash
@pytest.mark.parametrize("command", DUP_WORD[:3])
def test_bash_expands_a_dup_word_twice(command):
    assert bash_runs_substitution(command), command


@pytest.mark.xfail(strict=True, reason="`>& WORD` with a non-numeric WORD is expanded twice by bash; shell() reads WORD once")
@pytest.mark.parametrize("command", DUP_WORD)
def test_a_quoted_substitution_after_dup_is_run(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


# --- 2. process substitution in the word of ${x:-WORD} --------------------------------------------
# bash(1), Parameter Expansion: WORD of ${x-WORD} ${x=WORD} ${x+WORD} ${x?WORD} (and the `:`
# forms) undergoes tilde expansion, parameter expansion, command substitution, arithmetic
# expansion -- and bash 5.2 does process substitution there too when the ${...} is unquoted.
# shell() finds $(...) there but not <(...) / >(...).

PROCSUB_IN_EXPANSION = [
    "ls ${x:-<(rm -rf /)}",
    "ls ${x->(rm -rf /)}",
    "ls ${x:=<(rm -rf /)}",
    "ls ${x:?<(rm -rf /)}",
    "x=1; ls ${x:+<(rm -rf /)}",
    "ls ${x:-a<(rm -rf /)b}",
    "ls ${x:-${y:-<(rm -rf /)}}",
    "a=${x:-<(rm -rf /)}; ls",
    "cat <<< ${x:-<(rm -rf /)}",
    "ls > ${x:-<(rm -rf /)}",
    "[[ -n ${x:-<(rm -rf /)} ]]",
]


@needs_bash
@pytest.mark.parametrize("command", PROCSUB_IN_EXPANSION[:3])
def test_bash_runs_a_process_substitution_in_an_expansion_word(command):
    assert bash_runs_substitution(command), command


@pytest.mark.xfail(strict=True, reason="<(...) inside an unquoted ${x:-WORD} is run by bash; shell() does not list it")
@pytest.mark.parametrize("command", PROCSUB_IN_EXPANSION)
def test_a_process_substitution_in_an_expansion_word_is_listed(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


@pytest.mark.parametrize("command", ['ls "${x:-<(rm -rf /)}"', "ls ${x:-'<(rm -rf /)'}", 'ls ${x:-"<(rm -rf /)"}'])
def test_a_quoted_process_substitution_is_text(command):
    # bash: <( is not special inside quotes; nothing runs (held today, kept)
    assert not any(c.program == "rm" for c in parse_shell(command))


# --- 3. `time` / `coproc` before an assignment ---------------------------------------------------
# bash(1), SHELL GRAMMAR: `time [-p] PIPELINE` and `coproc COMMAND` take a whole simple command,
# assignments included: `time A=1 rm -rf /` runs rm with A=1 in its environment. shell() reads
# the assignment as the program (`A=1`).

TIME_ASSIGN = [
    "time A=1 rm -rf /",
    "time -p A=1 rm -rf /",
    "time -p -- A=1 rm -rf /",
    "time A=1 B=2 rm -rf /",
    "time >x A=1 rm -rf /",
    "coproc A=1 rm -rf /",
    "ls; time A=1 rm -rf /",
    "bash -c 'time A=1 rm -rf /'",
]


@pytest.mark.xfail(strict=True, reason="the word after `time`/`coproc` is read as the program even when it is an assignment")
@pytest.mark.parametrize("command", TIME_ASSIGN)
def test_time_and_coproc_before_an_assignment_run_the_command(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


@pytest.mark.parametrize("command", ["! A=1 rm -rf /", "time ! A=1 rm -rf /", "coproc A=(1) rm -rf /", "time rm -rf /"])
def test_time_forms_that_hold(command):
    assert lists_rm_or_refuses(command)
    assert decide(command).effect == "deny"


# --- 4. an unquoted heredoc a program reads is expanded first ---------------------------------------
# bash(1), Here Documents: when the delimiter is unquoted, the body undergoes parameter expansion,
# command substitution and arithmetic expansion in the shell that holds the heredoc, before the
# reader sees it. shell() gives the body to a reading shell as a script as written (so `'$(...)'`,
# a comment, or a quoted inner heredoc hide the substitution) and does not expand it at all for
# an interpreter (python3, node, ...).

HEREDOC_READ = [
    "python3 <<EOF\nprint(1)\n$(rm -rf /)\nEOF",
    "python3 - <<EOF\nx = '$(rm -rf /)'\nEOF",
    "node <<EOF\n`rm -rf /`\nEOF",
    "cat <<EOF | python3\n$(rm -rf /)\nEOF",
    "bash <<EOF\necho '$(rm -rf /)'\nEOF",
    "sh <<-EOF\n\techo '$(rm -rf /)'\n\tEOF",
    "bash <<EOF\n# $(rm -rf /)\nEOF",
    "bash <<EOF\ncat <<'X'\n$(rm -rf /)\nX\nEOF",
    "cat <<EOF | bash\n# $(rm -rf /)\nEOF",
]


@needs_bash
@pytest.mark.parametrize("command", [HEREDOC_READ[4], HEREDOC_READ[6]])
def test_bash_expands_a_heredoc_before_its_reader(command):
    assert bash_runs_substitution(command), command


@pytest.mark.xfail(strict=True, reason="an unquoted heredoc fed to a shell or interpreter is not expanded by shell() first")
@pytest.mark.parametrize("command", HEREDOC_READ)
def test_an_unquoted_heredoc_fed_to_a_reader_is_expanded_first(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command
