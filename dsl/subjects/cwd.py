"""Where each command of a shell string runs, as far as the text shows: `Command.cwd`.

A shell string is parsed once and cached, whatever the call's context, so the directory is kept
relative to the context: the chain of `cd` targets joined (`"."`, `"src"`, `"src/../lib"`,
`"/tmp/x"`, `"~/x"`), which `path(a, c.cwd)` resolves against context.cwd and the home. `None`
here (`""` in a Command) means the text does not tell.

The walker follows bash's rules (bash(1), SHELL BUILTIN COMMANDS: cd; Lists; Pipelines;
COMMAND EXECUTION ENVIRONMENT):

* `cd DIR` moves the directory of what runs after it, when it succeeds. A failed `cd` moves
  nothing, so the walker keeps two directories for each statement: where the shell is when it
  succeeded and when it failed. `a && b` runs b after a succeeded, `a || b` after it failed, and
  after `a ; b`, a newline or `a & b` the next statement runs in either, which is known only when
  both are the same: `cd src && cat app.py` reads src/app.py, `cd src; cat app.py` is unknown
  (cd may have failed).
* Subshells, command and process substitutions keep their `cd` to themselves. Each part of a
  pipeline runs in a subshell in bash, but zsh runs the last one in the shell itself: a pipeline
  that moves the directory leaves it unknown.
* Unknown: `cd` to a word holding an expansion, `cd -` (OLDPWD), `cd -P` (symbolic links
  resolved), `cd` with two operands (zsh's substitution form), pushd, popd, anything after a
  function definition (a later call may run its `cd`), after eval, source, trap, alias or
  mapfile (which run strings in this shell), the body of a loop whose body moves it (the second
  time round it starts elsewhere), and a command run by a wrapper that may change directory
  (`env -C`, `sudo -D`, `sudo -i`, `su -`): only the wrappers in SAME_DIR leave it.
* `cd` with no operand and `cd ~/x` go to $HOME, which is context.home, unless the text names
  HOME; `cd DIR` with DIR not starting with `/`, `./`, `../` or `~` searches CDPATH, which is
  taken as unset unless the text names CDPATH. (A CDPATH or HOME set in the agent's environment
  outside the text is not visible here.) Directories are joined lexically, as `cd -L` (bash's
  default) and path() do: a symbolic link is not followed.
"""

from __future__ import annotations

# Wrappers that run their command in the directory they were started in (they change its
# priority, time limit, buffering or session, not its directory).
SAME_DIR = frozenset({"timeout", "nice", "ionice", "nohup", "command", "builtin", "time", "stdbuf", "caffeinate", "coproc",
                      "setsid", "taskset", "exec", "flock", "entr", "screen", "hyperfine", "catchsegv",
                      "dbus-launch"})
# Wrappers under which `cd` is still the shell's builtin, acting on the shell itself.
BUILTIN_CD = frozenset({"builtin", "command", "time"})
# Builtins that run strings in this shell, or move its directory by a stack: the directory after
# them is not known.
UNKNOWN_AFTER = frozenset({"pushd", "popd", "eval", "source", ".", "trap", "alias", "mapfile", "readarray"})


def merge(a: str | None, b: str | None) -> str | None:
    """The directory when either of two may hold: known only when they are the same."""
    return a if a == b else None


def join(cwd: str | None, target: str) -> str | None:
    """The chain for `cd target` from `cwd` (None: unknown; an absolute target is known from any)."""
    if cwd is None:
        return target if target.startswith("/") else None
    if target.startswith(("/", "~")):
        return target
    return target if cwd == "." else f"{cwd}/{target}"


def cd_destination(argv: tuple[str, ...], dynamic: bool, home_named: bool, cdpath_named: bool) -> str | None:
    """Where `cd ARGS` (argv, "cd" first) goes, relative to where it runs, or None when the text
    does not tell (see the module docstring)."""
    if dynamic:
        return None
    words = list(argv[1:])
    while words and words[0].startswith("-") and words[0] != "-":
        word = words.pop(0)
        if word == "--":
            break
        if any(ch not in "Le@" for ch in word[1:]):  # -P resolves links; anything else is not bash's
            return None
    if not words:
        return None if home_named else "~"
    if len(words) > 1:
        return None
    target = words[0]
    if target in ("", "-") or (target.startswith("~") and not (target == "~" or target.startswith("~/"))):
        return None  # OLDPWD, or another user's home
    if target.startswith("~") and home_named:
        return None
    searched = not (target.startswith(("/", "./", "../", "~")) or target in (".", ".."))
    if searched and cdpath_named:
        return None
    return target
