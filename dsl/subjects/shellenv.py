"""Variables a shell reads from its environment as code, or as the name of a file of code: a
command given one of them by the text (a prefix assignment `PS4='$(CMD)' bash -x`, `env VAR=...`,
`sudo VAR=...`, a wrapper's option such as `systemd-run -E VAR=...`) runs code shell() does not
see, so it is `dynamic`. An `export` or plain assignment earlier in the text already makes every
later command dynamic (dsl.subjects.shell, `_Shared.assign`).

SHELL_CODE holds the names only shells use, so any command given one is dynamic (it may start a
shell: `make`, `xargs`, git hooks); SHELL_FILES holds names other programs use too (HOME, ENV),
which make dynamic only a program that runs others (one a table of dsl.subjects.wrappers reads:
a shell, a wrapper, an interpreter, a runner). Fails closed: a name is listed when the manual
says the shell expands it or reads a file it names, interactive or not.
"""

from __future__ import annotations

import re

SHELL_CODE = frozenset({
    # bash 5.2 bash(1), "Shell Variables": prompts are expanded (command substitution included;
    # PS4 before each command traced by -x or SHELLOPTS=xtrace, PS0/PS1/PS2 in an interactive
    # shell, PS3 by `select`), PROMPT_COMMAND runs before each prompt, BASH_ENV names a file a
    # non-interactive bash sources, SHELLOPTS and BASHOPTS turn options on (xtrace, posix, ...),
    # the MAILPATH message is expanded, INPUTRC names readline's key bindings (macros typed in),
    # TEXTDOMAIN/TEXTDOMAINDIR choose the catalog translating $"..." (whose translation is expanded),
    # BASH_LOADABLES_PATH where `enable -f` finds a builtin, BASH_XTRACEFD where the trace goes,
    # EXECIGNORE which files are not run, BASH_COMPAT and POSIXLY_CORRECT how bash parses.
    "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "MAILPATH",
    "INPUTRC", "TEXTDOMAIN", "TEXTDOMAINDIR", "BASH_LOADABLES_PATH", "BASH_XTRACEFD", "EXECIGNORE",
    "BASH_COMPAT", "POSIXLY_CORRECT", "GLOBIGNORE", "BASH_ALIASES", "BASH_CMDS",
    # zsh 5.9 zshparam(1) and zsh(1) STARTUP/SHUTDOWN FILES: ZDOTDIR holds .zshenv, read by every
    # zsh; prompts under PROMPT_SUBST; FPATH the functions autoloaded; STTY runs stty; MODULE_PATH
    # the modules zmodload loads.
    "ZDOTDIR", "PROMPT", "PROMPT2", "PROMPT3", "PROMPT4", "RPROMPT", "RPROMPT2", "RPS1", "RPS2", "SPROMPT",
    "FPATH", "STTY", "MODULE_PATH",
})
# bash(1), "FUNCTIONS" / `export -f`: `BASH_FUNC_NAME%%=() { ...; }` defines the function NAME
# (older patched bashes: `BASH_FUNC_NAME()`); any name of the family is taken as code.
_SHELL_CODE_PREFIXES = ("BASH_FUNC_",)

SHELL_FILES = frozenset({
    # dash 0.5.12 dash(1) and POSIX sh, bash in posix mode (sh), ksh, mksh, zsh in sh emulation:
    # ENV names a file an interactive shell sources (its name is expanded first); HOME holds the
    # startup files of login and interactive shells (.profile, .bashrc, .zshrc, ...);
    # XDG_CONFIG_HOME fish's config.fish, read by every fish.
    "ENV", "HOME", "XDG_CONFIG_HOME",
})

# a variable set in a word of a wrapper's command line: `VAR=` or `-EVAR=` at its start, `--setenv=VAR=`
# or `a VAR=` after a `=` or a blank (each led by a character class: a fast scan)
_ASSIGNED_AT_START = re.compile(r"(?:-[A-Za-z])?([A-Za-z_][A-Za-z0-9_]*+)(?:%%|\(\))?=")
_ASSIGNED_AFTER = re.compile(r"[=\s]([A-Za-z_][A-Za-z0-9_]*+)(?=(?:%%|\(\))?=)")


def _runs_code(name: str, runner: bool) -> bool:
    return name in SHELL_CODE or name.startswith(_SHELL_CODE_PREFIXES) or (runner and name in SHELL_FILES)


def hands_code(assignments, runner: bool) -> bool:
    """Whether the environment `assignments` (NAME=VALUE strings) give a shell code to run:
    `runner` is whether the command is one that runs others (then SHELL_FILES count too)."""
    return any(_runs_code(_name(a), runner) for a in assignments)


def _name(assignment: str) -> str:
    """The variable `NAME=VALUE` sets: `NAME+=`, `NAME[I]=` (PROMPT_COMMAND is an array in bash 5.1
    and later), `BASH_FUNC_NAME%%=` all set NAME."""
    name = assignment.split("=", 1)[0].split("[", 1)[0]
    return name.removesuffix("+").removesuffix("%%").removesuffix("()")


def sets_in_words(words: list[str]) -> bool:
    """Whether some word of a runner's command line sets one of these variables (`systemd-run -E
    PS4=...`, `docker run -e BASH_ENV=...`, `sudo --preserve-env`'s NAME=VALUE): one regex search
    per word, linear."""
    for word in words:
        if "=" not in word:
            continue
        if any(prefix in word for prefix in _SHELL_CODE_PREFIXES):  # `BASH_FUNC_my-fn%%=`: any name
            return True
        m = _ASSIGNED_AT_START.match(word)
        if m is not None and _runs_code(m.group(1), True):
            return True
        if any(_runs_code(m.group(1), True) for m in _ASSIGNED_AFTER.finditer(word)):
            return True
    return False


# bash(1) HISTORY EXPANSION (and zsh(1)'s): an interactive shell (-i), or one given -H / -o histexpand
# with -o history, expands `!!`, `!N`, `!STRING` and a line's leading `^OLD^NEW` to commands of its
# history, which `history -s CMD` fills: what a script it reads with a `!` or a `^` runs is known
# only at run time.
_HISTORY_OPTION = re.compile(r"-[A-Za-z]*[iH][A-Za-z]*|history|histexpand|--interactive")


def may_expand_history(option_words: list[str]) -> bool:
    """Whether a shell run with `option_words` (its command line but the script) may expand
    history in what it reads."""
    return any(_HISTORY_OPTION.fullmatch(w) for w in option_words)


def expands_history(script: str) -> bool:
    """Whether `script` holds what history expansion acts on (a `!` or a `^`)."""
    return "!" in script or "^" in script
