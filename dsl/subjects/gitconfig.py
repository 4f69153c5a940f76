"""git runs programs its configuration names, and a command line or the environment can set that
configuration: `git -c alias.x='!rm -rf /' x`, `git -c core.pager='rm -rf ~' log`,
`git --config-env=core.pager=VAR log`, `GIT_CONFIG_PARAMETERS="'core.pager=...'" git log`,
`GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=... git log`, `GIT_PAGER=... git log`. The tables here say which
settings and variables may run code (git-config(1), git(1) ENVIRONMENT VARIABLES, git 2.39), and
`reading` what shell() makes of one git command line:

- a `git` whose command line sets a key that is not known to be harmless (SAFE_SECTIONS, SAFE_KEYS),
  takes a key from the environment (`--config-env`), runs its programs from elsewhere
  (`--exec-path=DIR`), or whose subcommand is no git command (an alias, or `git-NAME` on PATH),
  or that is given one of ENVIRONMENT, is `dynamic`: never a known read-only command;
- the value of a key git runs with the shell (SHELL_KEYS: `alias.NAME=!CMD`, `core.pager`,
  `core.sshCommand`, ...) is read as a script, nested and dynamic, so a deny on its program still
  fires.

Fails closed: a key is harmless only when listed.
"""

from __future__ import annotations

import re

from dsl.subjects.options import _git_globals  # git's own options, as git.c reads them

# git 2.39 `git --list-cmds=main` on Debian 12, with the commands other packagings add (git-gui,
# gitk, git-svn, git-email, git-cvs, git-p4) and those of git 2.40-2.47 (replay, backfill): a
# subcommand git runs itself. Any other is an alias or a `git-NAME` program found on PATH.
GIT_COMMANDS = frozenset("""
add add--interactive am annotate apply archive bisect bisect--helper blame branch bugreport bundle cat-file
check-attr check-ignore check-mailmap check-ref-format checkout checkout--worker checkout-index cherry
cherry-pick clean clone column commit commit-graph commit-tree config count-objects credential
credential-cache credential-cache--daemon credential-store daemon describe diagnose diff diff-files
diff-index diff-tree difftool difftool--helper env--helper fast-export fast-import fetch fetch-pack
filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch fsck fsck-objects fsmonitor--daemon gc
get-tar-commit-id grep hash-object help hook http-backend http-fetch http-push imap-send index-pack init
init-db instaweb interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge
merge-base merge-file merge-index merge-octopus merge-one-file merge-ours merge-recursive
merge-recursive-ours merge-recursive-theirs merge-resolve merge-subtree merge-tree mergetool mktag mktree
multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs patch-id pickaxe prune prune-packed
pull push quiltimport range-diff read-tree rebase receive-pack reflog remote remote-ext remote-fd remote-ftp
remote-ftps remote-http remote-https repack replace request-pull rerere reset restore rev-list rev-parse
revert rm send-pack sh-i18n--envsubst shell shortlog show show-branch show-index show-ref sparse-checkout
stage stash status stripspace submodule submodule--helper subtree switch symbolic-ref tag unpack-file
unpack-objects update-index update-ref update-server-info upload-archive upload-archive--writer upload-pack
var verify-commit verify-pack verify-tag version web--browse whatchanged worktree write-tree
citool gui gitk send-email svn p4 cvsimport cvsexportcommit cvsserver archimport replay backfill
""".split())

# git-config(1): settings that change only what git prints or records, and run nothing. A section
# listed here is harmless with any key and subsection (color.diff.meta, advice.detachedHead).
SAFE_SECTIONS = frozenset({"color", "advice", "column", "i18n", "status"})
SAFE_KEYS = frozenset({
    ("user", "name"), ("user", "email"), ("author", "name"), ("author", "email"), ("committer", "name"),
    ("committer", "email"), ("init", "defaultbranch"), ("core", "quotepath"), ("core", "autocrlf"),
    ("core", "safecrlf"), ("core", "filemode"), ("core", "ignorecase"), ("core", "abbrev"),
    ("core", "commentchar"), ("diff", "noprefix"), ("diff", "mnemonicprefix"), ("diff", "renames"),
    ("diff", "algorithm"), ("diff", "colormoved"), ("diff", "context"), ("diff", "relative"),
    ("diff", "statgraphwidth"), ("diff", "interhunkcontext"), ("log", "date"), ("log", "decorate"),
    ("log", "abbrevcommit"), ("log", "follow"), ("log", "mailmap"), ("format", "pretty"), ("merge", "conflictstyle"),
    ("pull", "rebase"), ("pull", "ff"), ("push", "default"), ("fetch", "prune"), ("commit", "verbose"),
    ("blame", "date"), ("grep", "linenumber"), ("grep", "patterntype"), ("protocol", "version"), ("gc", "auto"),
    ("maintenance", "auto"),
})

# git-config(1): keys whose value git runs (most through the shell, `sh -c`), by (section, name);
# "*" stands for any subsection (diff.DRIVER.command, pager.CMD). Their values are read as scripts.
SHELL_KEYS = frozenset({
    ("alias", "*"), ("pager", "*"), ("core", "pager"), ("core", "editor"), ("core", "sshcommand"),
    ("core", "askpass"), ("core", "fsmonitor"), ("core", "gitproxy"), ("core", "alternaterefscommand"),
    ("sequence", "editor"), ("diff", "external"), ("diff", "command"), ("diff", "textconv"), ("filter", "clean"),
    ("filter", "smudge"), ("filter", "process"), ("merge", "driver"), ("gpg", "program"), ("credential", "helper"),
    ("interactive", "difffilter"), ("uploadpack", "packobjectshook"), ("remote", "uploadpack"),
    ("remote", "receivepack"), ("sendemail", "sendmailcmd"), ("sendemail", "tocmd"), ("sendemail", "cccmd"),
    ("mergetool", "cmd"), ("difftool", "cmd"), ("man", "cmd"), ("browser", "cmd"), ("instaweb", "httpd"),
    ("submodule", "update"), ("trailer", "command"), ("trailer", "cmd"), ("web", "browser"),
})
_BOOLEAN = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", ""})

# git(1) ENVIRONMENT VARIABLES (and less(1)'s, git's default pager): each changes which programs git
# runs or which configuration and repository it reads. GIT_CONFIG_* covers GIT_CONFIG_PARAMETERS,
# GIT_CONFIG_COUNT, GIT_CONFIG_KEY_N, GIT_CONFIG_VALUE_N, GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM.
ENVIRONMENT = frozenset({
    "GIT_PAGER", "PAGER", "GIT_EDITOR", "EDITOR", "VISUAL", "GIT_SEQUENCE_EDITOR", "GIT_SSH", "GIT_SSH_COMMAND",
    "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXTERNAL_DIFF", "GIT_EXEC_PATH", "GIT_PROXY_COMMAND", "GIT_DIR",
    "GIT_WORK_TREE", "GIT_TEMPLATE_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "LESSOPEN", "LESSCLOSE", "LESS",
    "LESSKEY", "LESSKEYIN", "GIT_ATTR_SOURCE",
    # which transports git may use (git(1) GIT_ALLOW_PROTOCOL, GIT_PROTOCOL_FROM_USER): `ext` runs a
    # command (git-remote-ext(1)); and where git finds its global configuration (git-config(1), FILES)
    "GIT_ALLOW_PROTOCOL", "GIT_PROTOCOL_FROM_USER", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_NOSYSTEM",
})
_ENV_PREFIX = "GIT_CONFIG"


def sets_git_environment(name: str) -> bool:
    """Whether setting the variable `name` changes what a later git runs or reads."""
    return name in ENVIRONMENT or name.startswith(_ENV_PREFIX)


def _key(key: str) -> tuple[str, str | None, str]:
    """git-config(1) "Syntax": section and name are case-insensitive, a subsection is not."""
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    return section.lower(), (sub or None), name.lower()


def _harmless(key: str) -> bool:
    section, sub, name = _key(key)
    return section in SAFE_SECTIONS or (sub is None and (section, name) in SAFE_KEYS)


def _runs(key: str) -> bool:
    section, sub, name = _key(key)
    if section in ("alias", "pager"):
        return True
    return (section, name) in SHELL_KEYS


# git-remote-helpers(7): a URL `TRANSPORT::ADDRESS` runs the program git-remote-TRANSPORT, and
# git-remote-ext(1)'s `ext::CMD ARGS` runs CMD. Any such URL but these makes git dynamic.
_TRANSPORT_URL = re.compile(r"([A-Za-z0-9][A-Za-z0-9+.-]*)::")
_BUILTIN_TRANSPORTS = frozenset({"http", "https", "ftp", "ftps", "file", "ssh", "git", "fd"})
# git-remote-ext(1): words are separated by unescaped spaces; `% ` is a space and `%%` a percent;
# %s %S %G %V are replaced by git (a service name, a header), so such a word is known only at run time.
_EXT_ESCAPE = re.compile(r"%(.)|%$", re.DOTALL)


def ext_commands(words: list[str]) -> list[list[tuple[str, bool]]]:
    """The commands the `ext::` URLs among `words` run (git-remote-ext(1)): each a list of words
    with whether each is known only at run time."""
    commands = []
    for word in words:
        m = _TRANSPORT_URL.match(word)
        if m is None or m.group(1).lower() != "ext":
            continue
        command = []
        for part in re.split(r"(?<!%) +", word[m.end():]):  # `% ` escapes a space; linear: one split
            if not part:
                continue
            dynamic = False

            def unescape(e: re.Match) -> str:
                nonlocal dynamic
                if e.group(1) in (" ", "%"):
                    return e.group(1)
                dynamic = True
                return e.group()
            command.append((_EXT_ESCAPE.sub(unescape, part), dynamic))
        if command:
            commands.append(command)
    return commands


_SUBCOMMAND_OPTIONS = re.compile(r"--exec-path=.*")


def reading(words: list[str], assignments: tuple[str, ...]) -> tuple[bool, list[str]]:
    """What shell() makes of `git WORDS` run with `assignments`: whether it is dynamic, and the
    scripts its command line's settings run (each to read nested and dynamic)."""
    options, values, at = _git_globals(words)
    dynamic = any(sets_git_environment(a.split("=", 1)[0]) for a in assignments)
    scripts: list[str] = []
    for option, value in values:
        if option == "--config-env":  # `--config-env=KEY=ENVVAR`: the value is the environment's
            dynamic = dynamic or not _harmless(value.split("=", 1)[0])
            continue
        if option != "-c":
            continue
        key, eq, setting = value.partition("=")
        if _harmless(key):
            continue
        dynamic = True
        section, _, _ = _key(key)
        if _runs(key) and setting.lower() not in _BOOLEAN:
            if section in ("alias", "credential", "submodule"):
                if not setting.startswith("!"):  # an alias of git words, a helper named git-credential-X
                    continue
                setting = setting[1:]
            scripts.append(setting)
    if any(_SUBCOMMAND_OPTIONS.fullmatch(o) for o in options):
        dynamic = True  # `--exec-path=DIR`: git's own programs are taken from DIR
    if any((m := _TRANSPORT_URL.match(w)) and m.group(1).lower() not in _BUILTIN_TRANSPORTS for w in words[at:]):
        dynamic = True  # `ext::CMD` runs CMD, `NAME::URL` runs git-remote-NAME (git-remote-helpers(7))
    if at < len(words) and words[at] not in GIT_COMMANDS:
        dynamic = True  # an alias (of the config files or -c) or a git-NAME program on PATH
    return dynamic, scripts
