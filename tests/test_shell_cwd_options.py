"""shell()'s reading of where each command runs (Command.cwd), of option values (Command.values,
Command.paths), of read-only programs (Command.read_only), path(x, base) and PathValue.secret."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl import Policy, PolicyError
from dsl.subjects import make_path, parse_shell
from dsl.subjects.options import NOT_FILES, READ_ONLY, RUNS_OR_WRITES, VALUE_OPTIONS

PROJECT = {"cwd": "/home/u/proj", "home": "/home/u"}


def cwd_of(text: str, program: str) -> str:
    return next(c.cwd for c in parse_shell(text) if c.program == program)


# --- Command.cwd -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "cwd"), [
    ("cat app.py", "."),
    ("cd src && cat app.py", "src"),
    ("cd src && cd ../lib && cat app.py", "src/../lib"),
    ("cd /tmp && cd x && cat app.py", "/tmp/x"),
    ("cd ~/x && cat app.py", "~/x"),
    ("cd && cat app.py", "~"),
    ("cd -L src && cat app.py", "src"),
    ("cd -- src && cat app.py", "src"),
    ("builtin cd src && cat app.py", "src"),
    ("time cd src && cat app.py", "src"),
    ("{ cd src && cat app.py; }", "src"),
])
def test_a_cd_that_succeeded_moves_the_commands_after_it(text, cwd):
    assert cwd_of(text, "cat") == cwd


@pytest.mark.parametrize("text", [
    "cd src; cat app.py",                    # cd may have failed
    "cd src\ncat app.py",
    "cd src & cat app.py",
    "cd $D && cat app.py",
    "cd \"$D\" && cat app.py",
    "cd - && cat app.py",
    "cd -P src && cat app.py",               # symbolic links resolved: not lexical
    "cd a b && cat app.py",                  # zsh's substitution form
    "pushd src && cat app.py",
    "popd && cat app.py",
    "eval 'cd /' && cat app.py",
    "source env.sh && cat app.py",
    "trap 'cd /' DEBUG; cat app.py",
    "f() { cd /; }; f; cat app.py",
    "f() { cat app.py; }",                   # a function's body runs wherever it is called
    "for d in a b; do cat app.py; cd src; done",  # the second round starts in src
    "while true; do cd src; cat app.py; done",
    "cd src | true; cat app.py",             # zsh runs a pipeline's last part in the shell
    "env -C /etc cat app.py",                # a wrapper that changes directory
    "sudo -i cat app.py",
    "HOME=/etc; cd && cat app.py",           # the text names HOME
    "export CDPATH=/etc; cd ssh && cat app.py",  # the text names CDPATH
])
def test_the_directory_is_unknown_where_the_text_does_not_tell(text):
    assert cwd_of(text, "cat") == ""


@pytest.mark.parametrize(("text", "cwd"), [
    ("(cd /etc) && cat app.py", "."),        # a subshell's cd stays in it
    ("echo $(cd /etc) && cat app.py", "."),
    ("cd nowhere || cat app.py", "."),       # runs only where cd failed: it did not move
    ("! cd src || cat app.py", "src"),       # ! inverts: runs where cd succeeded
    ("sudo cd /etc && cat app.py", "."),     # sudo runs an external cd, which moves nothing here
    ("cd src && bash -c 'cat app.py'", "src"),
    ("bash -c 'cd /etc && cat app.py'", "/etc"),
    ("cd ./src && cat app.py", "./src"),     # ./ is never searched in CDPATH, named or not
])
def test_subshells_shells_and_failures_follow_bash(text, cwd):
    assert cwd_of(text, "cat") == cwd


def test_find_execdir_runs_its_command_elsewhere():
    assert cwd_of("find . -name x -execdir cat {} \\;", "cat") == ""
    assert cwd_of("find . -name x -exec cat {} \\;", "cat") == "."


@given(st.lists(st.sampled_from(["src", "lib", "..", "a.b", "x-y"]), min_size=1, max_size=6))
def test_a_chain_of_cd_and_joins_its_targets(targets):
    text = " && ".join(f"cd {t}" for t in targets) + " && cat f"
    assert cwd_of(text, "cat") == "/".join(targets)
    resolved = make_path("/".join(targets), PROJECT["cwd"], None)
    assert resolved == make_path("/home/u/proj/" + "/".join(targets), None, None)


# --- path(x, base) -----------------------------------------------------------------------------

def test_path_with_a_base_resolves_against_the_commands_directory():
    policy = Policy.from_text('allow Bash when all c in shell(args.command): all a in c.args: path(a, c.cwd) under "/home/u/proj/src"')
    assert policy.evaluate("Bash", {"command": "cd src && cat app.py"}, PROJECT).effect == "allow"
    assert policy.evaluate("Bash", {"command": "cd src && cat ../app.py"}, PROJECT).effect == "ask"


def test_path_against_an_unknown_directory_is_an_error():
    policy = Policy.from_text('deny Bash when any c in shell(args.command): any a in c.args: path(a, c.cwd) under "/etc" reason "no"')
    decision = policy.evaluate("Bash", {"command": "cd - && cat /etc/passwd"}, PROJECT)
    assert decision.effect == "deny" and "not known" in " ".join(decision.reasons)


def test_path_takes_one_or_two_arguments():
    with pytest.raises(PolicyError, match=r"path\(\) takes 1 argument, not 3"):
        Policy.from_text('allow t when path(args.a, args.b, args.c) under "/"')
    with pytest.raises(PolicyError, match="second argument is a directory"):
        Policy.from_text('allow t when path(args.a, 3) under "/"')


# --- option values, paths ----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "args", "values"), [
    ("git -C . push", ("push",), (".",)),
    ("git -c core.sshCommand=sh push origin", ("push", "origin"), ("core.sshCommand=sh",)),
    ("git --git-dir=.git --work-tree . push", ("push",), (".git", ".")),
    ("git --exec-path status", ("status",), ()),  # alone, --exec-path prints the path: no value
    ("grep -rn -e TODO -A3 src", ("src",), ("TODO", "3")),
    ("rg -g '*.py' --pre=./x TODO", ("TODO",), ("*.py", "./x")),
    ("sort -k2 -o out in", ("in",), ("2", "out")),
    ("find . -name '*.py' -newer ref", (".",), ("*.py", "ref")),
    ("rm -rf build", ("build",), ()),  # a program without a table: as before
])
def test_option_values_are_not_arguments(text, args, values):
    command = parse_shell(text)[0]
    assert (command.args, command.values) == (args, values)


@pytest.mark.parametrize(("text", "paths"), [
    ("grep -n 'a\\|b' src/app.py", ("src/app.py",)),        # the pattern is not a file
    ("grep -e pat -f /etc/patterns src", ("src", "/etc/patterns")),  # -e gave the pattern; -f names a file
    ("rg TODO", ()),
    ("git blame --contents=/home/u/.env README.md", ("README.md", "/home/u/.env")),
    ("diff --from-file=/a b", ("b", "/a")),
    ("head -n 5 f", ("f",)),
])
def test_paths_are_the_words_that_may_name_a_file(text, paths):
    assert parse_shell(text)[0].paths == paths


# --- read_only -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "rg --hostname-bin=make TODO", "rg --pre ./x TODO", "rg -z TODO", "rg --search-zip TODO",
    "find . -delete", "find . -exec rm {} +", "find . -fprint out", "sort -o out in", "sort --comp=sh in",
    "sort --out=x in", "sort -T /tmp in", "tree -o out", "file -C -m magic", "date -s now", "date --set=now",
    "git diff --output=x", "git log --ext-diff", "git -C . status", "git -c a.b=c log", "git --git-dir=x status",
    "git --work-tree=. status", "git --exec-path=/tmp status", "git --bare log", "git push", "git commit -m x",
    "uniq in out", "python -c 1", "less f",
])
def test_what_runs_or_writes_is_not_read_only(text):
    assert not parse_shell(text)[0].read_only


@pytest.mark.parametrize("text", [
    "rg TODO", "rg -n --pretty TODO src", "grep -rn TODO .", "find . -name '*.py' -o -name '*.md'", "sort -k2 in",
    "git status", "git log -c --oneline", "git diff -C HEAD", "cat a", "uniq in", "head -n 5 f", "ls -la",
])
def test_read_only_commands_are_read_only(text):
    assert parse_shell(text)[0].read_only


def _documentation(program: str) -> str:
    out = "" if program.startswith("git-") else subprocess.run([program, "--help"], capture_output=True, text=True).stdout
    if shutil.which("man"):
        out += subprocess.run(["man", program], capture_output=True, text=True, env={"MANWIDTH": "200", "PATH": "/usr/bin:/bin"}).stdout
    return out.replace("\u2010", "-").replace("\u2212", "-")


@pytest.mark.parametrize("program", sorted(set(VALUE_OPTIONS) | set(RUNS_OR_WRITES)))
def test_the_tables_name_options_the_installed_program_documents(program):
    if not shutil.which(program):
        pytest.skip(f"{program} is not installed here")
    text = _documentation(program)
    if program == "git":  # git's own options in git(1); --output and --ext-diff in git-diff(1)
        text += _documentation("git-diff") if shutil.which("man") else ""
    named = set(VALUE_OPTIONS.get(program, ())) | set(NOT_FILES.get(program, ()))
    named |= {("--" if len(f) > 1 and program != "find" else "-") + f for f in RUNS_OR_WRITES.get(program, ())}
    if program == "git":
        named = {o for o in named if o.startswith("--") or o in ("-C", "-c")}
    # diff documents its format options by template: --GTYPE-group-format, --LTYPE-line-format
    missing = [o for o in named if o not in text and not (program == "diff" and o.endswith(("-group-format", "-line-format")))]
    assert not missing, f"{program}: not in its --help or manual: {missing}"


def test_every_read_only_program_is_a_plain_name():
    assert all(p and "/" not in p for p in READ_ONLY)


# --- secrets -------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    "~/.ssh/id_rsa", "~/.SSH/config", "~/.aws/credentials", "~/.config/gh/hosts.yml", "~/.git-credentials",
    "~/.npmrc", "proj/.pypirc", "/proc/self/environ", "/proc/1/task/2/environ", ".env", ".env.local", "key.pem",
    "~/.netrc", "~/.docker/config.json", "~/.kube/config", "/etc/shadow", "~/Library/Keychains/login.keychain-db",
])
def test_credentials_are_secret(raw):
    assert make_path(raw, "/home/u/proj", "/home/u").secret


@pytest.mark.parametrize("raw", ["src/app.py", "/home/u/dev/app.py", ".envoy/x.py", "docs/ssh.md", "/proc/cpuinfo",
                                 "config/settings.py", "keys.py", "/etc/hosts"])
def test_ordinary_files_are_not_secret(raw):
    assert not make_path(raw, "/home/u/proj", "/home/u").secret


def test_a_base_that_cannot_be_made_a_path_is_an_error_even_for_an_absolute_path():
    policy = Policy.from_text('deny Bash when any c in shell(args.command): any a in c.args: path(a, c.cwd) under "/etc" reason "no"')
    assert policy.evaluate("Bash", {"command": "cat /tmp/x"}, {}).effect == "deny"  # no context.cwd: "." is unknown
    assert policy.evaluate("Bash", {"command": "cat /tmp/x"}, PROJECT).by_default  # a cwd: the rule is false


@pytest.mark.parametrize(("command", "directory"), [("rm -rf /", "."), ("cd src && rm -rf /", "src")])
def test_without_a_cwd_the_error_names_the_directory_the_command_runs_in(command, directory):
    # a new user's trial without --context: the '.' is the command's own directory, not a word they wrote
    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" and '
                              '(any a in c.args: path(a, c.cwd) == "/") reason "Deleting / is never run."')
    for context in ({}, {"home": "/home/u"}, {"cwd": 1}):
        decision = policy.evaluate("Bash", {"command": command}, context)
        assert decision.effect == "deny", context
        assert decision.outcomes[0].error == (
            f"the directory the command runs in ({directory!r}) is relative and the call has no context.cwd: "
            "pass the agent's working directory as context.cwd"), context


def test_without_a_cwd_a_relative_path_the_call_gave_keeps_its_own_message():
    policy = Policy.from_text('default allow\ndeny Read when path(args.file_path) under "/etc" reason "no"')
    decision = policy.evaluate("Read", {"file_path": "rel/x"}, {})
    assert decision.effect == "deny"
    assert decision.outcomes[0].error == "the path 'rel/x' is relative and the call has no context.cwd"
    # and a base the command's directory is not, which fails for another reason, keeps that reason
    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): any a in c.args: '
                              'path(a, "~x") == "/" reason "no"')
    error = policy.evaluate("Bash", {"command": "rm -rf /"}, {}).outcomes[0].error
    assert "another user's home" in error and "the command runs in" not in error


def test_the_secret_list_is_linear_in_the_path():
    import time

    def cost(n: int) -> float:
        path = make_path("/" + "/".join(["a" * 50, ".ss", "id_rs"] * n), None, None)
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            path.secret
            best = min(best, time.perf_counter() - start)
        return best

    assert cost(1600) / cost(160) <= 20  # 1600 × 61 characters: under the 100,000 a path may have


@pytest.mark.parametrize("command", [
    "HOME=/; rm -rf ~", "export HOME=/; rm -rf ~", "read HOME <<< /; rm -rf ~", "for HOME in /; do rm -rf ~; done",
    'env HOME=/ bash -c "rm -rf ~"',
])
def test_a_tilde_in_a_text_that_sets_home_is_not_context_home(command):
    # hostile review of issue 9: `~` was resolved at context.home although the text sets HOME
    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" '
                              'and any a in c.args: path(a, c.cwd) == "/" reason "no"')
    assert policy.evaluate("Bash", {"command": command}, {"cwd": "/home/u/proj", "home": "/home/u"}).effect == "deny"
    assert policy.evaluate("Bash", {"command": "rm -rf ~/x"}, {"cwd": "/home/u/proj", "home": "/home/u"}).effect == "allow"


def test_an_empty_word_is_an_argument_but_names_no_file():
    (cmd,) = parse_shell('cat "" x')
    assert cmd.args == ("", "x") and cmd.paths == ("x",)
    (echo,) = parse_shell('echo "" > out')
    assert echo.paths == () and echo.redirects == ("out",)
