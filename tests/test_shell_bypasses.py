"""shell() on the classes of bypass a hostile review left open: each class is tried through many
of its members (hypothesis where there are many), at the level of shell() and of a policy.

- translated strings `$"..."` and ANSI-C strings `$'...'` are read as bash reads them;
- a descriptor tree-sitter-bash misreads as a word (`sh 0</dev/stdin`) is a redirection;
- a shell or an interpreter whose script a runner fills in at run time (`xargs sh -c`,
  `find -exec sh -c {}`, `parallel sh -c :::`) is an error;
- a program name holding an unquoted glob is dynamic.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl import Policy
from dsl.subjects import parse_shell
from dsl.values import EvalError
from support import DOCS_DENY

# An allow of known commands only, as the sample's read-only rule is written.
ALLOW_KNOWN = Policy.from_text("""
default deny "no"
allow Bash when all c in shell(args.command): c.program in ["ls", "echo", "cat", "find", "xargs"] and not c.dynamic
""", "allow.policy")


def decide(policy: Policy, command: str):
    return policy.evaluate("Bash", {"command": command}, {"cwd": "/home/u/proj"})


def bash_value(word: str) -> str:
    """What bash makes of one word (run here), as printf's %s sees it."""
    run = subprocess.run(["bash", "-c", f"printf '%s' {word}"], capture_output=True, timeout=10)
    return run.stdout.decode("utf-8", "surrogateescape")


# --- $"..." and $'...' ---------------------------------------------------------------------------

TRANSLATED = ['$"rm" -rf /', 'r$"m" -rf /', '$"r"m -rf /', '$"r""m" -rf /', '$"sudo" rm -rf /',
              'sudo $"rm" -rf /', 'env $"rm" -rf /', '$"env" $"rm" -rf /', 'bash -c \'$"rm" -rf /\'',
              '$"timeout" 5 rm -rf /', 'x=1 $"rm" -rf /']


@pytest.mark.parametrize("command", TRANSLATED)
def test_a_translated_string_is_read_as_its_contents_and_dynamic(command):
    # bash(1), "Locale-Specific Translation": the catalog of the locale may change the string
    rm = [c for c in parse_shell(command) if c.program == "rm"]
    assert rm and rm[0].dynamic, command
    assert decide(DOCS_DENY, command).effect == "deny", command
    assert decide(ALLOW_KNOWN, command).effect == "deny", command


@pytest.mark.parametrize("command", ['echo $"hi"', 'cat $"f"', 'echo a$"b"c'])
def test_a_translated_argument_makes_the_command_dynamic(command):
    assert all(c.dynamic for c in parse_shell(command))
    assert decide(ALLOW_KNOWN, command).effect == "deny"


def test_a_lone_dollar_is_itself():
    assert parse_shell("echo $ x $")[0].argv == ("echo", "$", "x", "$")


_NULS = ["\\0", "\\x0", "\\x00", "\\00", "\\000", "\\c@", "\\u0000", "\\U00000000", "\\u0", "\\x0\\x72"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_NULS), st.text(alphabet="yz/ -_", max_size=4), st.sampled_from(["", "m", "'m'", '"m"']))
def test_an_ansi_c_string_ends_at_its_first_nul(nul, after, rest):
    # bash keeps $'...' as a C string: `$'rm\0x'` is rm, `$'r\0x'm` is rm
    word = f"$'r{nul}{after}'" + rest
    expected = "r" + rest.strip("'\"")
    if shutil.which("bash"):
        assert bash_value(word) == expected, word
    command = parse_shell(word + " -rf /")[0]
    assert command.program == expected, word


@pytest.mark.parametrize("word", ["$'\\x72\\x6d'", "$'\\162\\155'", "$'\\u0072m'", "$'\\U00000072m'", "$'r'$'m'",
                                  "$'rm\\0anything'", "$'\\x72m\\x00-x'"])
def test_every_ansi_c_spelling_of_rm_is_rm(word):
    if shutil.which("bash"):
        assert bash_value(word) == "rm"
    assert decide(DOCS_DENY, f"{word} -rf /").effect == "deny"


# --- a descriptor is not a word --------------------------------------------------------------------

STDIN_SHELLS = ["sh 0</dev/stdin", "bash 0<&0", "bash < /dev/fd/0", "sh 0< /dev/stdin", "dash 0<&0 -e",
                "bash {fd}</dev/null", "0</dev/stdin sh", "zsh 0</proc/self/fd/0", "sudo bash 0<&0"]


@pytest.mark.parametrize("command", STDIN_SHELLS)
def test_a_shell_reading_standard_input_through_a_descriptor_is_an_error(command):
    # tree-sitter-bash reads `0<` as the word `0` and a redirection: sh ran the "script file" 0
    with pytest.raises(EvalError, match="standard input"):
        parse_shell(command)
    assert decide(DOCS_DENY, command).effect == "deny"


@pytest.mark.parametrize("command, argv", [
    ("cat 0<x", ("cat",)), ("cat 0<x y", ("cat", "y")), ("0<x rm -rf /", ("rm", "-rf", "/")),
    ("rm 0<x -rf /", ("rm", "-rf", "/")), ("echo 10 0>x", ("echo", "10")), ("cat 0 <x", ("cat", "0")),
    ("echo 0", ("echo", "0")),
])
def test_descriptor_zero_is_the_redirections_not_the_commands(command, argv):
    assert parse_shell(command)[0].argv == argv


# --- scripts a runner fills in --------------------------------------------------------------------

_RUNNERS = ["xargs", "xargs -0", "xargs -n1", "xargs -I{}", "xargs -I %", "xargs -i", "xargs --replace=R",
            "find . -exec", "find . -execdir", "find / -ok", "parallel", "parallel -j4", "parallel -I ,,",
            "parallel -q", "parallel --quote -k"]
_SHELLS = ["sh -c", "bash -c", "bash -ec", "dash -c", "zsh -c", "sudo sh -c", "env sh -c", "nice bash -c",
           "python3 -c", "perl -e", "node -e", "su -c", "sudo -u root bash -c"]


def _filled(runner: str, shell: str, where: str) -> str:
    placeholder = {"xargs -I{}": "{}", "xargs -I %": "%", "xargs -i": "{}", "xargs --replace=R": "R",
                   "parallel -I ,,": ",,"}.get(runner, "{}")
    if runner.startswith("find"):
        end = " +" if where == "plus" else " \\;"
        script = {"alone": "{}", "inside": "'rm {}'", "quoted": '"{}"', "plus": "{}"}[where]
        return f"{runner} {shell} {script}{end}"
    appended = runner.startswith("xargs") and "I" not in runner and "-i" not in runner and "replace" not in runner
    if where == "inside" and runner.startswith("parallel") and "q" not in runner:
        where = "alone"  # parallel joins its words: `sh -c 'rm {}'` is `sh -c rm {}`, whose script is rm
    if where == "plus" and runner.startswith("xargs") and not appended:
        where = "alone"  # xargs -I appends nothing: `sh -c` alone has no script (sh refuses it)
    script = {"alone": placeholder, "inside": f"'rm {placeholder}'", "quoted": f'"{placeholder}"',
              "plus": ""}[where]
    if where == "plus" or appended:
        script = ""  # no replacement string: the arguments are appended, the first is the script
    tail = " ::: 'rm -rf /'" if runner.startswith("parallel") else ""
    return f"{runner} {shell} {script}{tail}".replace("  ", " ")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_RUNNERS), st.sampled_from(_SHELLS), st.sampled_from(["alone", "inside", "quoted", "plus"]))
def test_a_script_a_runner_fills_in_is_an_error(runner, shell, where):
    command = _filled(runner, shell, where)
    with pytest.raises(EvalError, match="fills in at run time"):
        parse_shell(command)
    assert decide(DOCS_DENY, command).effect == "deny", command


@pytest.mark.parametrize("command", [
    "find . -exec sh -c 'echo \"$1\"' _ {} \\;", "find . -exec sh -c 'for f; do echo \"$f\"; done' _ {} +",
    "xargs sh -c 'echo \"$@\"' _", "xargs -I{} sh -c 'echo \"$1\"' _ {}", "find . -name x -exec rm {} \\;",
    "xargs -0 rm -f", "parallel gzip {} ::: a b", "parallel echo ::: a b",
])
def test_a_script_that_takes_the_filled_words_as_arguments_is_read(command):
    # the safe idiom: the words come in as $1, $@, never into the script's text
    commands = parse_shell(command)
    assert len(commands) >= 2, command


def test_parallel_reads_its_command_line_as_a_script_and_finds_rm():
    assert decide(DOCS_DENY, "parallel rm -rf ::: /").effect == "allow"  # rm's operand comes at run time
    commands = parse_shell("parallel 'rm -rf {}' ::: /")
    assert [c.program for c in commands] == ["parallel", "rm"] and commands[1].dynamic
    assert decide(ALLOW_KNOWN, "parallel ls ::: a").effect == "deny"


def test_parallel_joins_its_words_unless_told_to_quote_them():
    # GNU parallel runs `sh -c 'rm {}'` as the line `sh -c rm {}`; with -q the words stay words
    assert [c.code for c in parse_shell("parallel sh -c 'rm {}' ::: x") if c.program == "sh"] == [("rm",)]
    with pytest.raises(EvalError, match="fills in at run time"):
        parse_shell("parallel -q sh -c 'rm -rf {}' ::: /")
    assert [c.program for c in parse_shell("parallel -q rm -rf {} ::: /")] == ["parallel", "rm"]


def test_parallel_runs_its_words_through_a_shell_here():
    if shutil.which("parallel") is None:
        pytest.skip("GNU parallel is not installed here")
    run = subprocess.run(["bash", "-c", "parallel --will-cite 'printf {}; printf Y' ::: X"], capture_output=True,
                         text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert run.stdout == "XY"
    assert [c.program for c in parse_shell("parallel 'printf {}; printf Y' ::: X")] == ["parallel", "printf", "printf"]


# --- glob characters in a program name ---------------------------------------------------------

@st.composite
def globbed_rm(draw):
    name = list(draw(st.sampled_from(["rm", "/bin/rm", "/usr/bin/rm", "./rm"])))
    at = draw(st.integers(0, len(name) - 1))
    glob = draw(st.sampled_from(["?", "*", "[r]", "[!x]", "[[:alpha:]]", "[a-z]"]))
    if draw(st.booleans()):
        name[at] = glob
    else:
        name.insert(at, glob)
    prefix = draw(st.sampled_from(["", "sudo ", "env ", "timeout 5 ", "nice ", "command ", "exec ", "xargs ", "time "]))
    return prefix + "".join(name) + " -rf /"


@settings(max_examples=300, deadline=None)
@given(globbed_rm())
def test_a_program_name_with_an_unquoted_glob_is_dynamic(command):
    try:
        commands = parse_shell(command)
    except EvalError:  # `[r]m` where a command starts is a test bracket to the parser: refused
        assert decide(ALLOW_KNOWN, command).effect == "deny", command
        return
    last = commands[-1]
    assert last.dynamic, command
    assert decide(ALLOW_KNOWN, command).effect == "deny", command


@pytest.mark.parametrize("command", ["'/bin/r?' x", "/bin/r\\? x", "\"r*\" x", "$'r['m x"])
def test_a_quoted_glob_character_is_literal(command):
    # bash runs a program of that very name (none): nothing unknown
    assert not parse_shell(command)[0].dynamic


# --- builtins whose option is a command: mapfile -C, readarray -C, compgen -C, complete -C -------

@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["mapfile", "readarray", "compgen", "complete"]),
       st.lists(st.sampled_from(["-t", "-c1", "-c 1", "-n 5", "-d ''", "-u 3", "-s 2", "-O 1"]), max_size=3),
       st.sampled_from(["-C'{s}'", "-C '{s}'", "-tC'{s}'", "-tC '{s}'", "-C'{s}' -c1", "-c1 -C'{s}'"]),
       st.booleans())
def test_a_builtins_callback_is_read_as_a_script(builtin, options, form, dashes):
    if builtin in ("compgen", "complete"):
        options = []  # their other letters differ from mapfile's
        form = form.replace("-tC", "-C")
    command = " ".join([builtin, *options, form.format(s="rm -rf /"), *(["--"] if dashes else []), "arr"])
    rm = [c for c in parse_shell(command) if c.program == "rm"]
    assert rm and rm[0].nested and rm[0].dynamic, command  # the callback is given more words
    assert decide(DOCS_DENY, command).effect == "deny", command


def test_a_callback_known_only_at_run_time_is_an_error():
    with pytest.raises(EvalError, match="only known at run time"):
        parse_shell('mapfile -tC"$cb" arr')


# --- aliases: a name an alias of the same text defines is dynamic -------------------------------

@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["ls", "cat", "echo", "git", "sudo", "ll", "grep"]),
       st.sampled_from(["\n", "; ", " && ", " || true; ", "\nif true; then ", "; (", "; { "]),
       st.sampled_from(["", " /", " -la src"]), st.booleans())
def test_a_command_named_by_an_earlier_alias_is_dynamic(name, between, args, quoted):
    value = "'rm -rf'" if quoted else '"rm -rf"'
    tail = {"\nif true; then ": "; fi", "; (": ")", "; { ": "; }"}.get(between, "")
    command = f"alias {name}={value}{between}{name}{args}{tail}"
    aliased = [c for c in parse_shell(command) if c.program == name or name in c.wrappers]
    assert aliased and all(c.dynamic for c in aliased), command
    assert decide(ALLOW_KNOWN, command).effect == "deny", command


@pytest.mark.parametrize("command", ["alias sudo='sudo '; sudo ls", "eval \"alias ls='rm -rf'\"; ls /",
                                     "alias ls='rm -rf' ll='ls'; ll /"])
def test_aliases_defined_any_way_in_the_text_count(command):
    assert all(c.dynamic for c in parse_shell(command) if c.program in ("ls", "ll") and not c.nested)


@pytest.mark.parametrize("command", ["BASH_ALIASES[ls]='rm -rf /'; ls", "declare -A BASH_ALIASES=([ls]=rm); ls",
                                     "BASH_ALIASES=([ls]=rm); ls", "read 'BASH_ALIASES[ls]' <<< rm; ls"])
def test_setting_bash_aliases_is_an_error(command):
    with pytest.raises(EvalError, match="BASH_ALIASES"):
        parse_shell(command)


def test_a_command_no_alias_names_is_untouched():
    # The command is before the alias: every command after an `alias` is dynamic anyway (wt-parse:
    # alias is one of the builtins after which later commands are dynamic, test_shell_bash_readings),
    # so `alias ll='ls -l'; ls src` no longer shows that only the names an alias defines are touched.
    commands = parse_shell("ls src; alias ll='ls -l'")
    assert [c.dynamic for c in commands if c.program == "ls"] == [False, True]  # `ls -l`: the alias's text, after it
    assert [c.dynamic for c in parse_shell("alias ll='ls -l'; ls src") if c.program == "ls"] == [True, True]


# --- git told to run code by its command line or its environment -------------------------------

from dsl.subjects import gitconfig  # noqa: E402

_RUNNING_KEYS = ["alias.x", "core.pager", "core.editor", "core.sshCommand", "CORE.PAGER", "pager.log",
                 "diff.x.textconv", "diff.external", "filter.lfs.smudge", "merge.x.driver", "gpg.program",
                 "sequence.editor", "core.fsmonitor", "interactive.diffFilter", "credential.helper",
                 "core.hooksPath", "include.path", "includeIf.gitdir:/.path", "safe.directory", "protocol.ext.allow"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_RUNNING_KEYS), st.sampled_from(["log", "status", "diff", "x", "show HEAD"]),
       st.sampled_from(["-c {k}={v}", "-c {k}={v} -C .", "--no-pager -c {k}={v}", "-c color.ui=auto -c {k}={v}"]),
       st.sampled_from(["", "sudo ", "env ", "timeout 5 "]))
def test_git_given_a_setting_that_may_run_code_is_dynamic(key, subcommand, form, prefix):
    value = "!rm -rf /" if key.startswith(("alias", "credential")) else "rm -rf /"
    command = f"{prefix}git " + form.format(k=key, v=shlex_quote(value)) + f" {subcommand}"
    git = [c for c in parse_shell(command) if c.program == "git"]
    assert git and all(c.dynamic for c in git), command
    assert decide(ALLOW_KNOWN_GIT, command).effect == "deny", command
    if gitconfig._runs(key):  # git runs the value with the shell: read as a command
        assert decide(DOCS_DENY, command).effect == "deny", command


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


ALLOW_KNOWN_GIT = Policy.from_text("""
default deny "no"
allow Bash when all c in shell(args.command): c.program == "git" and not c.dynamic
""", "git.policy")


@pytest.mark.parametrize("command", [
    "git --config-env=core.pager=P log", "git --config-env core.pager=P log",
    "GIT_CONFIG_PARAMETERS=\"'core.pager=sh'\" git log", "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager git log",
    "env GIT_CONFIG_COUNT=1 git log", "sudo GIT_PAGER=sh git log", "GIT_SSH_COMMAND=sh git fetch",
    "export GIT_CONFIG_COUNT=1; git log", "declare -x GIT_PAGER=sh; git log", "GIT_PAGER=sh; git log",
    "export 'GIT_CONFIG_PARAMETERS=x'; git status", "LESSOPEN='|sh %s' git log", "git --exec-path=/tmp status",
    "git st", "git x -la", "git lfs pull",
])
def test_git_whose_configuration_comes_from_elsewhere_is_dynamic(command):
    assert all(c.dynamic for c in parse_shell(command) if c.program == "git"), command
    assert decide(ALLOW_KNOWN_GIT, command).effect == "deny", command


@pytest.mark.parametrize("command", ["git status", "git -c color.ui=always log", "git -c user.name=x log",
                                     "git -c advice.detachedHead=false status", "git -C src diff --stat"])
def test_git_with_harmless_settings_is_known(command):
    assert not any(c.dynamic for c in parse_shell(command))


def test_every_git_command_here_is_known_and_an_alias_runs_what_shell_reads():
    if shutil.which("git") is None:
        pytest.skip("git is not installed here")
    listed = subprocess.run(["git", "--list-cmds=main"], capture_output=True, text=True, timeout=10).stdout.split()
    assert set(listed) <= gitconfig.GIT_COMMANDS, set(listed) - gitconfig.GIT_COMMANDS
    command = "git -c alias.x='!printf X' x"
    run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert run.stdout == "X"
    assert [c.program for c in parse_shell(command)] == ["git", "printf"]
