"""shell() against bash 5.2 itself, on generated texts built from the constructs where the third
hostile review (tests/test_shell_attacks3.py) found bash running a program shell() did not list:
`#` and quotes inside backquotes, `$"..."` followed by more of its word, `>& WORD` (expanded twice
by bash), `>& -WORD`, `{NAME}>` after another redirection, `<(...)` inside `${x:-WORD}`, `time` and
`coproc` before assignments, and unquoted heredocs (quotes, comments and inner heredocs in their
bodies, fed to a reader or not).

Each text is run by `bash -c` with an empty environment and PATH leading nowhere, in a temporary
directory: no program can run, and bash reports each one it tries (`NAME: command not found`).
Every such NAME must be a program (or a wrapper) shell() lists, unless shell() refuses the text
(it fails closed) or lists a command whose program is only known at run time. Skipped without bash.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl.subjects import parse_shell_uncached
from dsl.values import EvalError

_BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(_BASH is None, reason="bash is not installed")
_NOT_FOUND = re.compile(r"^.*?: line \d+: (.*): command not found$", re.M)


def bash_tries(text: str) -> set[str]:
    """The programs bash tries to run for `text` (none can be found)."""
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(["/usr/bin/env", "-i", "PATH=/nonexistent", _BASH, "-c", text], capture_output=True,
                             timeout=10, cwd=tmp)
    return set(_NOT_FOUND.findall(run.stderr.decode("utf-8", "surrogateescape")))


def assert_listed(text: str) -> None:
    try:
        commands = parse_shell_uncached(text)
    except EvalError:
        return  # refused: fails closed
    if any(c.program == "" and c.dynamic and not c.assignments or "$" in c.path or "`" in c.path for c in commands):
        return  # a program known only at run time
    listed = {c.path for c in commands} | {w for c in commands for w in c.wrappers}
    tried = bash_tries(text)
    assert tried <= listed, (text, tried - listed, [(c.program, c.argv) for c in commands])


# programs a..c run nothing (PATH leads nowhere); x y are plain words
_RUN = st.sampled_from(["a", "b", "c -rf /", "a x", "(b)", "{ c; }"])
_QUOTED_RUN = st.sampled_from(["$(a)", "`b`", "<(c)", "${x:-$(a)}", "$(b x)", '"$(c)"'])
_BACKQUOTED = st.builds(lambda inner, tail, run: f"echo `{inner}` `{run}\n`{tail}",
                        st.sampled_from([": #", ": '#'", "a #", ": # '", "echo '", 'echo "x', ": $(: #)"]),
                        st.sampled_from(["", " x", ";"]), st.sampled_from(["a", "b x", "(c)"]))
_TRANSLATED = st.builds(lambda wrapper, value, rest: f'{wrapper} $"{value}"{rest} a x',
                        st.sampled_from(["sudo -u", "env -u", "nice -n", "echo", "timeout"]),
                        st.sampled_from(["x", "1", "b"]), st.sampled_from(["#y", "'y'", "#", "y", ""]))
_DUP = st.builds(lambda lead, op, quote, run: f"{lead} {op}{quote[0]}{quote[1]}{run}{quote[0]}",
                 st.sampled_from(["echo x", "{ echo x; }", "exec", ":"]),
                 st.sampled_from([">& ", ">&", "1>& ", "2>& ", "<& ", "&> "]),
                 st.sampled_from([("'", ""), ('"', "\\"), ('"', "")]), _QUOTED_RUN)
_CLOSE = st.builds(lambda op, word: f"a x {op}{word}", st.sampled_from([">& ", "2>& ", "<& ", "0<& ", ">&\t"]),
                   st.sampled_from(["-b", "--c", "-", "-x y", "- b"]))
_VARNAME = st.builds(lambda wrapper, redirect, run: f"{wrapper} {redirect} {{fd}}>/dev/null {run}",
                     st.sampled_from(["sudo", "env", "nice", "a", ""]), st.sampled_from([">/dev/null", "2>x", "<x", ">x"]),
                     st.sampled_from(["b -rf /", "c"]))
_EXPANSION = st.builds(lambda lead, op, run: f"{lead}${{x{op}{run}}}",
                       st.sampled_from(["echo ", "a=", "echo > ", "cat <<< ", "x=1; echo "]),
                       st.sampled_from([":-", "-", ":=", ":+", "+", "/1/"]),
                       st.sampled_from(["<(a)", ">(b)", "x<(c)y", "${y:-<(a)}", "'<(a)'", '"<(b)"']))
_TIME = st.builds(lambda pre, kw, opts, assigns, run: f"{pre}{kw} {opts if kw == 'time' else ''}{assigns} {run}",
                  st.sampled_from(["", "! ", "x; ", "echo | "]), st.sampled_from(["time", "coproc"]),
                  st.sampled_from(["", "-p ", "-p -- ", ">x "]),  # (coproc takes no option: bash runs `-p`)
                  st.sampled_from(["A=1", "A=1 B=2", '"A"=1', "A+=x", "a[1]=x", "A='x y'"]), st.sampled_from(["a", "b x"]))
_HEREDOC = st.builds(lambda reader, delimiter, pipe, line: f"{reader}<<{delimiter}{pipe}\n{line}\nEOF",
                     st.sampled_from(["cat ", "python3 ", "bash ", "sh ", "cat > f ", ""]), st.sampled_from(["EOF", "'EOF'"]),
                     st.sampled_from(["", " | bash", " | python3"]),
                     st.sampled_from(["'$(a)'", "# $(b)", '$("c" x)', "$(a \"x\")", "x = '`b`'", "\\$(c)", "$(a)",
                                      "${x:-$(b)}", "cat <<'X'\n$(c)\nX", "echo \"$(a)\""]))
_TEXT = st.one_of(_BACKQUOTED, _TRANSLATED, _DUP, _CLOSE, _VARNAME, _EXPANSION, _TIME, _HEREDOC)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(_TEXT)
def test_every_program_bash_tries_is_listed(text):
    assert_listed(text)


@pytest.mark.parametrize("text", [
    "echo `: #` `a\n`", 'sudo -u $"x"#y a x', "echo x >& '$(a)'", "a x >& -b", "sudo >/dev/null {fd}>/dev/null a",
    "echo ${x:-<(a)}", "time A=1 a", "coproc A=1 b", "python3 <<EOF\nx = '$(a)'\nEOF", "cat <<EOF\n$(\"b\" x)\nEOF",
    "bash <<EOF\n# $(c)\nEOF",
])
def test_the_review_s_examples_are_listed(text):
    assert bash_tries(text), text  # bash tries a program here
    assert_listed(text)
