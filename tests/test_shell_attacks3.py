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


@pytest.mark.parametrize("command", HEREDOC_READ)
def test_an_unquoted_heredoc_fed_to_a_reader_is_expanded_first(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


# --- 5. quotes and backslashes inside $(...) in an unquoted heredoc body ------------------------------
# bash(1), Here Documents: the body is expanded like a double-quoted string, but inside `$(...)`
# (and `${x:-$(...)}`) the text is a new command line with its own quoting: `$("rm" -rf /)` runs
# rm. shell() reads the body as one double-quoted string after escaping every `"` and `\` in it
# (dsl.subjects.shell._Walker.expanded_text), those inside the substitution too, so the program
# is read as `"rm"` or `r\m` and its arguments keep their quotes.

HEREDOC_SUBSTITUTION_QUOTES = [
    'cat <<EOF\n$("rm" -rf /)\nEOF',
    'cat <<EOF\n$(rm -rf "/")\nEOF',
    'cat <<EOF\n$(rm "-rf" /)\nEOF',
    "cat <<EOF\n$(r\\m -rf /)\nEOF",
    "cat <<EOF\n${x:-$(r\\m -rf /)}\nEOF",
    'cat > notes.txt <<EOF\nsee $(echo x; "rm" -rf /)\nEOF',
]


@needs_bash
def test_bash_reads_quotes_inside_a_heredoc_substitution():
    run = subprocess.run(["bash", "-c", 'cat <<EOF\n$("echo" "a b" \\x)\nEOF'], capture_output=True, timeout=10)
    assert run.stdout == b"a b x\n"


@pytest.mark.parametrize("command", HEREDOC_SUBSTITUTION_QUOTES)
def test_quotes_inside_a_heredoc_substitution_are_read_as_bash_reads_them(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


# --- 6. `N>& -WORD` / `N<& -WORD`: a lone `-` closes, the rest is the next word ----------------------
# bash 5.2 parse.y (read_token: "Hack <&- (close stdin) case"): a `-` right after a `<&` or `>&`
# token, blanks between, is read as a token of its own, and what follows it starts a new word:
# `rm / 2>& --rf` closes stderr and runs `rm / -rf`. shell() refuses `2>&-rf` (no blank: "a word
# after a closed descriptor") but reads `2>& --rf` as a redirection to the file `--rf`.

CLOSE_THEN_WORD = [
    "rm / 2>& --rf",
    "rm / >& --rf",
    "rm / 1>& --rf",
    "rm / <& --rf",
    "rm / 0<& --rf",
    "rm -f / 2>&\t--r",
]


@needs_bash
def test_bash_reads_a_word_after_a_spaced_close():
    run = subprocess.run(["bash", "-c", "printf '<%s>' a 2>& -b"], capture_output=True, timeout=10)
    assert run.stdout == b"<a><b>"


@pytest.mark.parametrize("command", CLOSE_THEN_WORD)
def test_a_word_after_a_spaced_close_is_an_argument(command):
    try:
        commands = parse_shell(command)
    except EvalError:
        return  # refused: fails closed
    rm = [c for c in commands if c.program == "rm"]
    assert rm and "recursive" in rm[0].flags, (command, rm)
    assert decide(command).effect == "deny", command


# --- 7. time: a long cluster of short options is read in quadratic time -------------------------------
# dsl.subjects.getopt._short slices the rest of the word (`rest = w[st.j + 1:]`) at every letter of
# a cluster, so `ssh -aaaa...` of 99,000 characters (1 command, 2 words: within every limit of
# docs/policy-language.md, "Limits of shell()") costs about 200 ms to decide, 20 times the 10 ms
# target; `bash -`, `sudo -E...`, `env -i...`, `python3 -E...`, `perl -n...`, `timeout -v...` too.


@pytest.mark.parametrize("prefix, letter", [("ssh -", "a"), ("sudo -", "E"), ("python3 -", "B")])
def test_a_long_short_option_cluster_is_read_in_linear_time(prefix, letter):
    # sizes 20 times apart (test_linear_time's ratio is of 10): a linear reading measures about
    # 17-20 (`ls -aaa...` 17), this one 53-64; the bound is twice the linear ratio
    from test_linear_time import _best, repeat

    from dsl.subjects import MAX_SHELL_TEXT, parse_shell_uncached

    n = MAX_SHELL_TEXT - 1_000
    _best(parse_shell_uncached, repeat(letter, n // 20, prefix), 1)  # warm
    for _ in range(3):
        r = _best(parse_shell_uncached, repeat(letter, n, prefix), 3) / _best(parse_shell_uncached, repeat(letter, n // 20, prefix), 9)
        if r <= 40:
            break
    assert r <= 40


# --- 8. time: a long name after read/eval/export/... is searched for a subscript in quadratic time -----
# dsl.subjects.shell._SUBSCRIPTED (`[A-Za-z_][A-Za-z0-9_]*\[(?!...)`) is searched in every argument
# of a builtin that assigns (read, eval, export, declare, local, unset, set, source, mapfile,
# getopts, printf -v, wait -p, test) and of declaration commands: on a word of N name characters
# and no `[`, each start position scans to the word's end, N*N/2 steps. `read aaaa...` of 99,000
# characters (one command, two words) takes 9.6 s to decide under the docs' deny; 20,000 take 0.4 s.


@pytest.mark.parametrize("prefix", ["read ", "eval ", "export a=", "unset ", "test "])
def test_a_long_name_after_an_assigning_builtin_is_read_in_linear_time(prefix):
    from test_linear_time import _best, repeat

    from dsl.subjects import parse_shell_uncached

    n = 20_000  # 99,000 would take seconds a run; the ratio shows the growth (linear ~10, this ~100)
    _best(parse_shell_uncached, repeat("a", n // 10, prefix), 1)  # warm
    for _ in range(3):
        r = _best(parse_shell_uncached, repeat("a", n, prefix), 2) / _best(parse_shell_uncached, repeat("a", n // 10, prefix), 5)
        if r <= 20:
            break
    assert r <= 20


# --- 9. a `#` inside backquotes hides the next backquoted substitution -----------------------------
# bash(1), Command Substitution: in the old-style form the text up to the first backquote no
# backslash quotes is the command: `echo \`: #\` \`rm -rf /<newline>\`` runs `:` and then `rm -rf /`.
# shell() reads the `#` as a comment running to the end of the line, over the closing backquote
# and the next opening one: one substitution `: # ...` and no rm.

BACKQUOTE_COMMENT = [
    "echo `: #` `rm -rf /\n`",
    "ls `a #``rm -rf /\n`",
    "echo `: #`x`rm -rf /\n`",
    'echo "`: #``rm -rf /\n`"',
    "echo `: #` `(rm -rf /)\n`",
]


@needs_bash
def test_bash_ends_a_backquote_at_the_first_backquote():
    assert bash_runs_substitution(BACKQUOTE_COMMENT[0])


@pytest.mark.parametrize("command", BACKQUOTE_COMMENT)
def test_a_comment_inside_backquotes_ends_at_the_backquote(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


# --- 10. `$"..."#...` is read as two words --------------------------------------------------------
# bash: `$"x"#y` is one word, `x#y` (a `#` inside a word starts no comment). shell() reads a `$`
# word and then `x#y` (and not as dynamic, though `$"..."` is): one word more, so the value of an
# option moves onto the next word and a wrapper's program is misread (`sudo -u $"x"#y rm -rf /`:
# the program is read as `x#y`).

TRANSLATED_HASH = [
    'sudo -u $"x"#y rm -rf /',
    'env -u $"X"#y rm -rf /',
    'sudo -g $"a"#b rm -rf /',
    'ionice -c $"3"#x rm -rf /',
]


@needs_bash
def test_bash_reads_a_translated_string_and_a_hash_as_one_word():
    run = subprocess.run(["bash", "-c", 'printf "<%s>" $"x"#y z'], capture_output=True, timeout=10)
    assert run.stdout == b"<x#y><z>"


def test_a_translated_string_and_a_hash_are_one_word():
    command = parse_shell('echo $"x"#y z')[0]
    assert command.argv == ("echo", "x#y", "z") and command.dynamic


@pytest.mark.parametrize("command", TRANSLATED_HASH)
def test_a_wrapper_option_value_written_as_a_translated_string_keeps_its_place(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


# --- 11. `{NAME}>FILE` after another redirection is read as a word ------------------------------------
# bash(1), REDIRECTION: `{varname}>file` allocates a descriptor wherever it stands among the words.
# shell() reads it as one when it follows a word, but after another redirection it reads `{fd}` as
# a word: `sudo >/dev/null {fd}>/dev/null rm -rf /` is read as sudo running the program `{fd}`.

VARNAME_AFTER_REDIRECT = [
    "sudo >/dev/null {fd}>/dev/null rm -rf /",
    "env 2>x {fd}>x rm -rf /",
    "nice >x {a}>x rm -rf /",
    "sudo -u x >y {fd}>x rm -rf /",
]


@needs_bash
def test_bash_reads_a_varname_redirection_after_a_redirection():
    run = subprocess.run(["bash", "-c", 'printf "<%s>" a >/dev/stdout {fd}>/dev/null b'], capture_output=True, timeout=10)
    assert run.stdout == b"<a><b>"


@pytest.mark.parametrize("command", VARNAME_AFTER_REDIRECT)
def test_a_varname_redirection_after_a_redirection_is_no_word(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command


# --- 12. GNU env: every word with `=` after its options is an assignment; a lone `-` is -i ---------
# GNU coreutils 9.1 env.c: after the options, a `-` operand means -i, and then every operand that
# holds a `=` (strchr, whatever precedes it) is put in the environment; the command is the first
# operand without one. shell() takes only NAME=VALUE words (a shell variable's name) as env's
# assignments: `env 1=2 rm -rf /`, `env a.b=c rm -rf /`, `env A=1 --x=y rm -rf /` and
# `env -- - rm -rf /` are read as running the programs `1=2`, `a.b=c`, `--x=y` and `-`.

ENV_OPERANDS = [
    "env -- - rm -rf /",
    "env 1=2 rm -rf /",
    "env a.b=c rm -rf /",
    "env A=1 --x=y rm -rf /",
    "env =x rm -rf /",
    "env 'A B=1' rm -rf /",
    "env -i -- a-b=1 rm -rf /",
    "env -- -x=1 rm -rf /",
    "sudo env x.y=1 rm -rf /",
]


@pytest.mark.skipif(shutil.which("env") is None or shutil.which("bash") is None, reason="env or bash missing")
@pytest.mark.parametrize("command", ENV_OPERANDS[:4])
def test_gnu_env_runs_the_first_word_without_an_equals_sign(command):
    run = subprocess.run(["bash", "-c", command.replace("rm -rf /", "echo RAN")], capture_output=True, timeout=10)
    assert run.stdout == b"RAN\n", run


@pytest.mark.parametrize("command", ENV_OPERANDS)
def test_env_operands_with_an_equals_sign_are_assignments(command):
    assert lists_rm_or_refuses(command), command
    assert decide(command).effect == "deny", command
