"""The per-program tables of dsl/subjects/options.py: git's read-only subcommands read with their
manuals' options (values attached or separate; an unknown option is not read-only), the options
of the read-only programs that run a program or write, and the secrets a search can reach."""

from __future__ import annotations

import shutil
from pathlib import Path
import subprocess

import pytest

from dsl.subjects import parse_shell
from dsl.subjects.options import GIT_READ_ONLY, GIT_SUBCOMMAND_OPTIONS, _kinds


# --- git's read-only subcommands -----------------------------------------------------------------

@pytest.mark.parametrize(("text", "path"), [
    ("git blame -S/home/u/.ssh/id_rsa README.md", "/home/u/.ssh/id_rsa"),   # attached: not a cluster of flags
    ("git blame -S ../../.aws/credentials README.md", "../../.aws/credentials"),
    ("git blame -wS/etc/shadow README.md", "/etc/shadow"),                  # after a flag of the cluster
    ("git blame --contents /home/u/.env README.md", "/home/u/.env"),        # a separate long value
    ("git blame --cont=/home/u/.env README.md", "/home/u/.env"),            # an abbreviation
    ("git blame --ignore-revs-file ~/.netrc README.md", "~/.netrc"),
    ("git diff -O/home/u/.ssh/id_rsa", "/home/u/.ssh/id_rsa"),              # the orderfile
    ("git log -O ~/.ssh/id_rsa", "~/.ssh/id_rsa"),
    ("git ls-files -X/home/u/.ssh/id_rsa", "/home/u/.ssh/id_rsa"),
    ("git ls-files --exclude-from ~/.ssh/id_rsa", "~/.ssh/id_rsa"),
    ("git rev-parse --resolve-git-dir /home/u/.ssh", "/home/u/.ssh"),
])
def test_a_git_subcommand_option_value_is_a_path(text, path):
    command = parse_shell(text)[0]
    assert path in command.values and path in command.paths


@pytest.mark.parametrize(("text", "args", "flags", "values"), [
    ("git log --oneline -n 5 -- src", ("log", "src"), ("dry-run", "n", "oneline"), ("5",)),
    ("git log -5 --format=%H", ("log",), ("5", "format"), ("%H",)),
    ("git blame -L 1,5 README.md", ("blame", "README.md"), ("L",), ("1,5",)),
    ("git status -uno", ("status",), ("u",), ("no",)),
    ("git diff -M50 HEAD", ("diff", "HEAD"), ("M",), ("50",)),
    ("git diff --stat HEAD~1", ("diff", "HEAD~1"), ("stat",), ()),
])
def test_git_subcommands_read_their_values(text, args, flags, values):
    command = parse_shell(text)[0]
    assert (command.args, command.flags, command.values) == (args, flags, values)
    assert command.read_only


@pytest.mark.parametrize("text", [
    "git log --frobnicate", "git status -Z", "git blame -Q README.md", "git log --no-frobnicate",
    "git log --stat=3=4 --oneline=x",          # a flag given a value
    "git log --grep --output=x",                # a value git may read as the option that writes
    "git diff -- --output=x",
    "git diff --out=x", "git log --ext",        # abbreviations of what writes or runs
])
def test_an_option_a_read_only_git_subcommand_does_not_list_is_not_read_only(text):
    assert not parse_shell(text)[0].read_only


@pytest.mark.parametrize("text", [
    "git submodule foreach 'rm -rf /'", "git rebase -x 'sh x'", "git rebase --exec=x HEAD~3",
    "git ls-remote --upload-pack='touch x' .", "git fetch --upload-pack=x origin", "git send-pack origin main",
    "git subtree push --prefix=x origin main", "git bisect run ./x", "git difftool", "git mergetool",
    "git filter-branch --tree-filter x", "git -c alias.s='!sh' s", "git -c core.pager=sh log", "git archive --remote=x",
    "git config core.pager sh", "git grep -O x", "git grep --open-files-in-pager=sh x", "git p",
])
def test_git_subcommands_that_run_or_publish_are_not_read_only(text):
    assert not parse_shell(text)[0].read_only


def test_every_read_only_git_subcommand_has_a_table():
    assert set(GIT_READ_ONLY) <= set(GIT_SUBCOMMAND_OPTIONS)


@pytest.mark.skipif(not shutil.which("man") or not shutil.which("git"), reason="git's manuals are not installed")
@pytest.mark.parametrize("sub", sorted(GIT_SUBCOMMAND_OPTIONS))
def test_the_git_tables_name_options_the_manual_documents(sub):
    """Every option a table lists is in the subcommand's manual (or git-log's for the diff and
    revision options show shares), so the tables come from the manuals, not from guesses."""
    def manual(name):
        run = subprocess.run(["man", name], capture_output=True, text=True, env={"MANWIDTH": "200", "PATH": "/usr/bin:/bin"})
        return run.stdout.replace("\u2010", "-").replace("\u2212", "-")
    text = manual(f"git-{sub}") + (manual("git-log") + manual("git-diff") if sub == "show" else "")
    # and what `git SUB -h` lists, where parse-options reads the options (blame's --minimal)
    run = subprocess.run(["git", sub, "-h"], capture_output=True, text=True)
    text += run.stdout + run.stderr
    if "OPTIONS" not in text:
        pytest.skip(f"git-{sub}(1) is not installed")
    short, long = GIT_SUBCOMMAND_OPTIONS[sub]
    # spelled in the manual as --[no-]NAME, or only as a negation / a synonym in another entry's text
    missing = [n for n in _kinds(long) if f"--{n}" not in text and f"--[no-]{n}" not in text and f"--[no-]{n.removeprefix('no-')}" not in text]
    missing += [f"-{c}" for c in _kinds(short) if f"-{c}" not in text]
    assert not missing, f"git-{sub}: not in its manual: {missing}"


# --- the other read-only programs: the options that run a program or write (each manual) ----------

@pytest.mark.parametrize("text", [
    "file -z archive.lz", "file --uncompress archive.lz", "file --uncomp archive.lz", "file -bz archive.lz",
    "file -Z archive.lz", "file --uncompress-noreport archive.lz",
    "tree -R -H . -L 2", "tree -HR .", "tree -o out .",
])
def test_read_only_programs_options_that_run_or_write(text):
    assert not parse_shell(text)[0].read_only


@pytest.mark.parametrize("text", ["file -b x", "file --mime-type x", "tree -L 2 .", "tree -H . -L 2"])
def test_read_only_programs_without_those_options(text):
    assert parse_shell(text)[0].read_only


# --- publishing under any name -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "git push", "git -C . push", "git send-pack origin main", "git http-push u main", "git subtree push --prefix=x o m",
    "git send-email x.patch", "git svn dcommit", "git daemon --export-all", "git submodule foreach 'git push'",
    "git rebase -x 'git push' HEAD~2", "git rebase --exec=x HEAD~2", "git bisect run ./x", "git difftool",
    "git mergetool", "git filter-branch --tree-filter x", "git ls-remote --upload-pack=x .", "git ls-remote -u x .",
    "git fetch --upload-pack=x origin", "git fetch --upload=x origin", "git pull --upload-pack=x",
    "git clone --template=t u", "git clone -c a=b u", "git archive --remote=x HEAD", "git -c alias.p=push p",
    "git --config-env=a=B log", "git --exec-path=/tmp log", "git config alias.p '!git push'", "git p", "git lfs push",
    "git hook run pre-push", "git for-each-repo --config=x -- push",
])
def test_what_pushes_or_may_push_publishes(text):
    command = parse_shell(text)[0]
    assert command.publishes and not command.read_only


@pytest.mark.parametrize("text", ["git status", "git log -n 3", "git commit -m x", "git rebase main", "git fetch origin",
                                  "git add .", "git -C sub status", "ls push", "echo git push"])
def test_what_does_not_push_does_not_publish(text):
    assert not parse_shell(text)[0].publishes


# --- what a search reaches -----------------------------------------------------------------------

from dsl.subjects import make_path  # noqa: E402
from dsl.subjects.secrets import _MAX_GLOB_PATTERN, _braces  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402


@pytest.mark.parametrize("raw", ["/", "/home", "/home/u", "~", "/root", "/proc", "/proc/self", "/proc/1/task", "/etc",
                                 "/run", "/run/secrets", "/var", "/var/run", "/var/run/secrets/kubernetes.io",
                                 "~/.config", "~/.local/share", "~/.ssh", "/Users/me", "C:\\", "C:\\Users\\me"])
def test_a_directory_above_a_secret_holds_secrets(raw):
    assert make_path(raw, "/home/u/proj", "/home/u").holds_secrets


@pytest.mark.parametrize("raw", ["/home/u/proj", "src", "/tmp", "/usr/lib", "/etc/ssh", "C:\\Users\\me\\proj"])
def test_an_ordinary_directory_holds_no_secret(raw):
    assert not make_path(raw, "/home/u/proj", "/home/u").holds_secrets


@pytest.mark.parametrize("glob", ["*.[p]em", "*.[!x]em", "{.ssh,x}/*", "{a,{b,.aws}}/x", ".s[s]h/*", ".ss?/*", "**/id_*",
                                  "**/.env*", ".e*", "*.PEM", "**/[.]env", "/home/u/.ssh/*", "x/.config/g?/*",
                                  "{" + ",".join(f"a{i}" for i in range(300)) + "}"])
def test_a_glob_that_may_match_a_secret(glob):
    assert make_path(glob, "/", None).glob_secret


@pytest.mark.parametrize("glob", ["*.py", "**/*.py", "src/**/*.{ts,tsx}", "*", "**", "*.md", "docs/[a-z]*.txt", "config"])
def test_a_glob_that_matches_no_secret(glob):
    assert not make_path(glob, "/", None).glob_secret


# a hostile review of the glob reading: each pattern matches a secret as rg reads it
RG_READS_A_SECRET = [
    "**/{.ssh/*,a/../../}", "**/{.e[n]v,a/../../}", "{.aws/credentials,a/../../}",  # `..` inside braces
    "**/.ssh[!x]*", "**/.ssh[.-0]*", "**/.ssh[/]id_rsa", "**/etc[.-0]shadow",  # a class matching `/`
    "**/.[!A-Z]sh/*", "**/id_[!A-Z]sa", ".s[!]x]h/id", "**/.ss[^]x]/*",  # negated classes: case-sensitive in rg
    "/home/u/*/gh/hosts.yml", "/var/*/secrets/**", "/home/*/*/gcloud/*", "/home/u/*/*/keyrings/*",  # an entry's later segment
    "/**/environ", "/etc/*", "/proc/self/*", "/proc/*/task/*/*",  # `**` and a last `*` below an entry's start
    "*.py .npmrc", "*.py,.npmrc", "x .aws/*", "**/.npmrc ",  # the Grep tool splits on blanks and commas; rg trims
    ".en\\v", "id_rs\\a", ".ss\\h/config",  # rg reads `\` as an escape
    "{.ssh,[}]}/*", "{x,[}]/.ssh}/*", "**/{credentials,[}]}",  # a brace inside a class is literal to rg
    ".en[v].local", "server.pe[m]", "key.pe?", "credential?.json", "id_rs[a].bak",  # an entry's `*` is any run
    "server.pe*", "*x.pem", "*rsa*", "x.p*", "terraform.tfst*",  # a fixed run that runs into an entry's name
]


@pytest.mark.parametrize("glob", RG_READS_A_SECRET)
def test_a_glob_rg_reads_as_a_secret_is_a_secret_however_written(glob):
    if "\\" in glob:  # a backslash is no POSIX path's: these come from a Windows agent
        assert make_path(glob, "C:\\Users\\u\\proj", "C:\\Users\\u").glob_secret
        return
    assert make_path(glob, "/", None).glob_secret
    assert make_path(glob.replace("/home/u", "~"), "/home/u/proj", "/home/u").glob_secret


@pytest.mark.parametrize("glob", ["/**", "/*/*", "/*/1/*", "/h*/*/*", "../**", "../*/*", "~/**", "~/*/*"])
def test_a_glob_that_climbs_to_a_directory_holding_secrets_is_a_secret(glob):
    # a third hostile review: wildcards only, from the root, the home or above the project
    assert make_path(glob, "/", "/home/u").glob_secret


@pytest.mark.parametrize("glob", ["**/share/*.py", "src/**", "tests/**/test_*.py", "**/*.{js,jsx,ts,tsx}", "docs/*.md",
                                  "test_[0-9].py", "a?c.txt", "Makefile", "src*", "test_*", "*_test.go", "*.yaml",
                                  "Dockerfile*", "a.*"])
def test_common_search_globs_stay_ordinary(glob):
    assert not make_path(glob, "/home/u/proj", "/home/u").glob_secret


def test_the_sample_asks_before_a_search_whose_glob_reaches_a_secret_through_dotdot_in_braces():
    from dsl import Policy
    sample = Policy.load(Path(__file__).resolve().parent.parent / "samples" / "coding-agent.policy")
    posix, windows = {"cwd": "/home/u/proj", "home": "/home/u"}, {"cwd": "C:\\Users\\u\\proj", "home": "C:\\Users\\u"}
    assert sample.evaluate("Grep", {"pattern": "KEY", "glob": "**/{.e[n]v,a/../../}"}, posix).effect != "allow"
    assert sample.evaluate("Glob", {"pattern": "**/{.ssh/*,a/../../}"}, posix).effect != "allow"
    assert sample.evaluate("Grep", {"pattern": "KEY", "glob": ".en\\v"}, windows).effect != "allow"


def test_a_glob_longer_than_the_limit_or_nested_too_deep_counts_as_a_secret():
    assert make_path("/" + "a" * _MAX_GLOB_PATTERN + ".py", "/", None).glob_secret
    assert not make_path("/" + "a" * (_MAX_GLOB_PATTERN - 10) + ".py", "/", None).glob_secret
    assert make_path("{" * 40 + "a" + "}" * 40, "/", None).glob_secret  # deeper than any search needs
    assert not make_path("{" * 10 + "a" + "}" * 10, "/", None).glob_secret
    assert make_path("{a,b}" * 9, "/", None).glob_secret  # 512 alternatives


def _expand_innermost(pattern: str) -> set[str]:
    """Brace expansion the plain way: expand the innermost group (the first `}` that has a `{`
    before it, and the last such `{`) until none is left."""
    done, todo = set(), [pattern]
    while todo:
        text = todo.pop()
        close = next((i for i, ch in enumerate(text) if ch == "}" and "{" in text[:i]), -1)
        if close < 0:
            done.add(text)
            continue
        start = text.rindex("{", 0, close)
        for alternative in text[start + 1 : close].split(","):
            todo.append(text[:start] + alternative + text[close + 1 :])
    return done


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="{},ab", max_size=12))
def test_brace_alternatives_are_those_of_expanding_the_innermost_group_first(pattern):
    assert set(_braces(pattern)) == _expand_innermost(pattern)


@pytest.mark.parametrize("raw", ["/run/secrets/db_password", "/var/run/secrets/kubernetes.io/serviceaccount/token",
                                 "infra/terraform.tfstate"])
def test_container_and_terraform_secrets_are_secret(raw):
    assert make_path(raw, "/home/u/proj", "/home/u").secret
