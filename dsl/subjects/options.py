"""Programs' options as data: which options take a value, and which make a "read-only" program
run another program or write a file.

Two tables, each from the program's own manual (the version named beside each entry):

* `VALUE_OPTIONS`: the options whose value is the next word (`-e PATTERN`) or the rest of the
  word (`-ePATTERN`, `--regexp=PATTERN`). `split_words` keeps those values out of a command's
  `args` and lists them in its `values`, so `git -C . push` has the args `["push"]` and a rule on
  `c.args startswith ["push"]` sees it. A program not in the table has only `--name=value` values
  recognized; the word after `-x` stays an argument, as before.
* `RUNS_OR_WRITES`: for each program `Command.read_only` admits, the options that make it run
  another program (`rg --pre`, `rg --hostname-bin`, `sort --compress-program`, `find -exec`) or
  write a file (`sort -o`, `find -delete`, `tree -o`, `file -C`, `git diff --output`).

git reads its options in two places: its own (global) options before the subcommand, which
git.c compares exactly (no abbreviations, no clusters), then the subcommand's, which
parse-options (and revision.c) reads. `GIT_GLOBAL_VALUE_OPTIONS` is the first;
`GIT_SUBCOMMAND_OPTIONS` the second, for the read-only subcommands (`git log -n 5` has the args
`log`, `git blame -S/x f` the value `/x`); another subcommand's options are not tabled, so their
separate values stay among `args` (`git push -o x origin` has args `push`, `x`, `origin`).

`read_only(command)` is `Command.read_only`: the program is in `READ_ONLY`, none of its flags
runs or writes (a long flag that is a prefix of such an option counts as it: GNU getopt_long
takes any unambiguous abbreviation, `sort --comp=sh`), and git's subcommand is one of
`GIT_READ_ONLY`, given only options its table lists, with none of `GIT_REPOSITORY_OPTIONS`. It says nothing about WHICH files the
command reads: a policy checks `args` and `values` for that (see samples/coding-agent.policy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from dsl.subjects.command import Command


def _options(text: str) -> frozenset[str]:
    return frozenset(text.split())


# git(1) OPTIONS (git 2.39 to 2.47): the global options that take a value. `--exec-path` and
# `--list-cmds` take one only attached (`--exec-path=DIR`); alone, `--exec-path` prints it.
GIT_GLOBAL_VALUE_OPTIONS = _options("-C -c --git-dir --work-tree --namespace --config-env --super-prefix --attr-source")
GIT_GLOBAL_ATTACHED_ONLY = _options("--exec-path --list-cmds")
# Global options that make git read another repository, another configuration or run programs
# from another directory: with any of them the repository git reads is not the one its cwd finds.
GIT_REPOSITORY_OPTIONS = frozenset({
    "C", "c", "git-dir", "work-tree", "namespace", "config-env", "exec-path", "super-prefix", "attr-source", "bare",
})

VALUE_OPTIONS: dict[str, frozenset[str]] = {
    # ripgrep 14.1, rg --help
    "rg": _options(
        "-A -B -C -E -M -T -d -e -f -g -j -m -r -t --after-context --before-context --context --color --colors "
        "--context-separator --dfa-size-limit --encoding --engine --field-context-separator --field-match-separator "
        "--file --glob --iglob --ignore-file --hostname-bin --hyperlink-format --max-columns --max-count --max-depth "
        "--max-filesize --path-separator --pre --pre-glob --regex-size-limit --regexp --replace --sort --sortr "
        "--threads --type --type-not --type-add --type-clear --generate"
    ),
    # GNU grep 3.11 manual, 2.1 Command-line Options
    "grep": _options(
        "-A -B -C -D -d -e -f -m --after-context --before-context --context --devices --directories --regexp --file "
        "--max-count --label --exclude --exclude-from --exclude-dir --include --binary-files --group-separator"
    ),
    # GNU coreutils 9.4 manual: sort, head, tail, cut, wc, du, ls, stat, df, date
    "sort": _options("-k -t -o -S -T --key --field-separator --output --buffer-size --temporary-directory "
                     "--compress-program --files0-from --random-source --parallel --batch-size --sort"),
    "head": _options("-n -c --lines --bytes"),
    "tail": _options("-n -c -s --lines --bytes --sleep-interval --pid --max-unchanged-stats"),
    "cut": _options("-b -c -f -d --bytes --characters --fields --delimiter --output-delimiter"),
    "wc": _options("--files0-from"),
    "du": _options("-B -d -t -X --block-size --max-depth --threshold --exclude --exclude-from --files0-from --time-style"),
    "ls": _options("-I -T -w --ignore --hide --tabsize --width --format --sort --time --time-style --quoting-style --block-size"),
    "stat": _options("-c --format --printf"),
    "df": _options("-B -t -x --block-size --type --exclude-type"),
    "date": _options("-d -f -r -s --date --file --reference --set"),
    # GNU diffutils 3.10 manual, diff Options
    "diff": _options("-C -D -F -I -L -S -U -W -X -x --from-file --to-file --ignore-matching-lines --exclude "
                     "--exclude-from --starting-file --show-function-line --label --line-format --old-line-format "
                     "--new-line-format --unchanged-line-format --old-group-format --new-group-format "
                     "--changed-group-format --unchanged-group-format --horizon-lines --tabsize --width --ifdef --palette"),
    # tree 2.1 tree(1)
    "tree": _options("-L -P -I -o -H -T --charset --filelimit --timefmt --sort --infile"),
    # file 5.45 file(1)
    "file": _options("-F -P -e -f -m --separator --parameter --exclude --exclude-quiet --files-from --magic-file"),
    # GNU findutils 4.9 find(1): the primaries that take a value (-fprintf takes two; -newerXY any XY)
    "find": _options(
        "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -type -xtype -user -group "
        "-uid -gid -perm -size -mtime -mmin -atime -amin -ctime -cmin -newer -anewer -cnewer -maxdepth -mindepth "
        "-inum -links -samefile -used -fstype -regextype -printf -fprint -fprint0 -fprintf -fls -context -files0-from"
    ),
}
_TWO_VALUES = {("find", "-fprintf")}
# Programs that read a cluster of short options letter by letter, each letter that takes a value
# taking the next word (tree.c's own loop: `tree -HR . -L 2` is -H ., -R, -L 2), not the rest of
# the word as getopt does.
_CLUSTER_NEXT_WORDS = frozenset({"tree"})

# Of those, the options whose value never names a file: a pattern, a number, a format, a name.
# Every other option's value may be a file the program reads or writes, and is among `paths`.
NOT_FILES: dict[str, frozenset[str]] = {
    "rg": _options(
        "-A -B -C -E -M -T -d -e -g -j -m -r -t --after-context --before-context --context --color --colors "
        "--context-separator --dfa-size-limit --encoding --engine --field-context-separator --field-match-separator "
        "--glob --iglob --hyperlink-format --max-columns --max-count --max-depth --max-filesize --path-separator "
        "--regex-size-limit --regexp --replace --sort --sortr --threads --type --type-not --type-add --type-clear"
    ),
    "grep": _options("-A -B -C -D -d -e -m --after-context --before-context --context --devices --directories --regexp "
                     "--max-count --label --exclude --exclude-dir --include --binary-files --group-separator"),
    "sort": _options("-k -t -S --key --field-separator --buffer-size --parallel --batch-size --sort"),
    "head": _options("-n -c --lines --bytes"),
    "tail": _options("-n -c -s --lines --bytes --sleep-interval --pid --max-unchanged-stats"),
    "cut": _options("-b -c -f -d --bytes --characters --fields --delimiter --output-delimiter"),
    "du": _options("-B -d -t --block-size --max-depth --threshold --exclude --time-style"),
    "ls": _options("-I -T -w --ignore --hide --tabsize --width --format --sort --time --time-style --quoting-style --block-size"),
    "stat": _options("-c --format --printf"),
    "df": _options("-B -t -x --block-size --type --exclude-type"),
    "date": _options("-d --date"),
    "diff": _options("-C -D -F -I -L -U -W -x --ignore-matching-lines --exclude --show-function-line --label --line-format "
                     "--old-line-format --new-line-format --unchanged-line-format --old-group-format --new-group-format "
                     "--changed-group-format --unchanged-group-format --horizon-lines --tabsize --width --ifdef --palette"),
    "tree": _options("-L -P -I -H -T --charset --filelimit --timefmt --sort"),
    "file": _options("-F -P -e --separator --parameter --exclude --exclude-quiet"),
    "find": _options(
        "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -type -xtype -user -group "
        "-uid -gid -perm -size -mtime -mmin -atime -amin -ctime -cmin -maxdepth -mindepth -inum -links -used -fstype "
        "-regextype -printf -context"
    ),
}
# Programs whose first operand is a pattern, unless an option gave one (grep(1), rg(1)).
_PATTERN_FIRST = {"grep": _options("-e -f --regexp --file"), "rg": _options("-e -f --regexp --file")}

# The options that make a read-only program run another program or write a file, by flag name
# (as `Command.flags` holds them: no dashes).
RUNS_OR_WRITES: dict[str, frozenset[str]] = {
    # --pre COMMAND runs COMMAND on every file; --hostname-bin runs a program for hyperlinks;
    # -z / --search-zip runs gzip, xz, bzip2, ... found on PATH (rg --help)
    "rg": frozenset({"pre", "pre-glob", "hostname-bin", "z", "search-zip"}),
    # -exec, -execdir, -ok, -okdir run a command; -delete removes; -fprint* and -fls write a file
    "find": frozenset({"exec", "execdir", "ok", "okdir", "delete", "fprint", "fprint0", "fprintf", "fls"}),
    # --compress-program runs PROG; -o writes FILE; -T writes temporary files in DIR
    "sort": frozenset({"compress-program", "o", "output", "T", "temporary-directory"}),
    # tree(1) 2.1: -o FILE sends the output to FILE; -R (with -H) runs tree again in every directory
    # with `-o 00Tree.html` added, writing that file in each
    "tree": frozenset({"o", "R"}),
    # file(1) 5.45: -C writes a compiled magic file (magic.mgc); -z / --uncompress and -Z /
    # --uncompress-noreport look inside compressed files, running the decompressor (gzip, lzip,
    # xz, ...) found on PATH where file was built without its library, as rg -z does
    "file": frozenset({"C", "compile", "z", "uncompress", "Z", "uncompress-noreport"}),
    "date": frozenset({"s", "set"}),  # sets the system clock
    # git diff/log/show --output=FILE writes FILE; --ext-diff runs GIT_EXTERNAL_DIFF or diff.external
    "git": frozenset({"output", "ext-diff"}),
    # GNU grep, diff, head, tail, cut, wc, du, ls, stat, df, cat and the rest run nothing and write
    # nothing through an option (their manuals list none); `uniq IN OUT` writes OUT (see read_only).
}

# The options of git's read-only subcommands, from their manuals (git 2.39, git-log(1),
# git-diff(1), git-show(1), git-blame(1), git-status(1), git-ls-files(1), git-rev-parse(1); the
# kinds from each command's `-h` where parse-options reads it). Written as getopt strings:
# `x` takes no value, `x:` a value attached or the next word (`-S FILE`, `-SFILE`, `--contents F`,
# `--contents=F`), `x::` a value only attached (`-M50`, `--abbrev=8`); where the manual leaves open
# whether a value may be the next word, it is read as attached only, so the next word is still
# checked (as an option that must be known, or as a path). parse-options takes a unique prefix of
# a long option (`--cont F`) and `--no-NAME` of one; an option not listed makes the command not
# read-only (it may take a value that hides a file, or run something: fail closed).
_DIFF_SHORT = "p u s U:: z B:: M:: C:: D R a b w W l: S: G: O: I: X::"
_DIFF_LONG = (
    "patch no-patch unified:: output: output-indicator-new: output-indicator-old: output-indicator-context: raw "
    "patch-with-raw indent-heuristic no-indent-heuristic minimal patience histogram anchored: diff-algorithm: "
    "stat:: stat-width: stat-name-width: stat-graph-width: stat-count: compact-summary numstat shortstat "
    "dirstat:: cumulative dirstat-by-file:: summary patch-with-stat name-only name-status submodule:: color:: "
    "no-color color-moved:: no-color-moved color-moved-ws: no-color-moved-ws word-diff:: word-diff-regex: "
    "color-words:: no-renames rename-empty no-rename-empty check ws-error-highlight: full-index binary abbrev:: "
    "break-rewrites:: find-renames:: find-copies:: find-copies-harder irreversible-delete diff-filter: "
    "find-object: pickaxe-all pickaxe-regex skip-to: rotate-to: relative:: no-relative text ignore-cr-at-eol "
    "ignore-space-at-eol ignore-space-change ignore-all-space ignore-blank-lines ignore-matching-lines: "
    "inter-hunk-context: function-context exit-code quiet ext-diff no-ext-diff textconv no-textconv "
    "ignore-submodules:: src-prefix: dst-prefix: no-prefix line-prefix: ita-invisible-in-index "
    "ita-visible-in-index"
)
# git-log(1) and git-show(1): the commit limiting, history simplification, ordering, formatting and
# diff-merges options (revision.c reads `--NAME VALUE` for the ones marked `:`).
_REV_SHORT = "n: i E F P g m c t"
_REV_LONG = (
    "max-count: skip: since: after: since-as-filter: until: before: author: committer: grep-reflog: grep: "
    "all-match invert-grep regexp-ignore-case basic-regexp extended-regexp fixed-strings perl-regexp remove-empty "
    "merges no-merges min-parents:: max-parents:: no-min-parents no-max-parents first-parent "
    "exclude-first-parent-only not all branches:: tags:: remotes:: glob:: exclude: exclude-hidden:: reflog "
    "alternate-refs single-worktree ignore-missing bisect stdin cherry-mark cherry-pick left-only right-only cherry "
    "walk-reflogs merge boundary simplify-by-decoration show-pulls full-history dense sparse simplify-merges "
    "ancestry-path:: date-order author-date-order topo-order reverse no-walk:: do-walk pretty:: format:: "
    "abbrev-commit no-abbrev-commit oneline encoding:: expand-tabs:: no-expand-tabs notes:: no-notes show-notes:: "
    "standard-notes no-standard-notes show-signature relative-date date: parents children left-right graph "
    "show-linear-break:: diff-merges: no-diff-merges remerge-diff cc combined-all-paths log-size "
    "follow no-decorate decorate:: decorate-refs: decorate-refs-exclude: clear-decorations source mailmap "
    "no-mailmap use-mailmap no-use-mailmap full-diff"
)
GIT_SUBCOMMAND_OPTIONS: dict[str, tuple[str, str]] = {
    # (short, long)
    "diff": (_DIFF_SHORT + " 0 1 2 3", _DIFF_LONG + " cached staged merge-base no-index base ours theirs"),
    "log": (_DIFF_SHORT + " " + _REV_SHORT + " L: q", _DIFF_LONG + " " + _REV_LONG),
    "show": (_DIFF_SHORT + " " + _REV_SHORT + " q", _DIFF_LONG + " " + _REV_LONG),
    "blame": (
        "b L: l t S: p c f n s e w M:: C:: h",
        "root show-stats reverse first-parent porcelain line-porcelain incremental encoding:: contents: date: "
        "progress ignore-rev: ignore-revs-file: color-lines color-by-age score-debug show-name "
        "show-number show-email abbrev:: minimal",
    ),
    "status": (
        "s b v z u:: M::",
        "short branch show-stash porcelain:: long verbose untracked-files:: ignore-submodules:: ignored:: null "
        "column:: no-column ahead-behind no-ahead-behind renames no-renames find-renames::",
    ),
    "ls-files": (
        "c d m o i s u k t v f z x: X:",
        "cached deleted modified others ignored stage unmerged killed directory no-empty-directory empty-directory "
        "eol resolve-undo exclude: exclude-from: exclude-per-directory: exclude-standard full-name "
        "recurse-submodules error-unmatch with-tree: abbrev:: debug deduplicate sparse format:",
    ),
    "rev-parse": (
        "q",
        "parseopt sq-quote keep-dashdash stop-at-non-option stuck-long revs-only no-revs flags no-flags default: "
        "prefix: verify quiet sq short:: not abbrev-ref:: symbolic symbolic-full-name all branches:: tags:: "
        "remotes:: glob:: exclude:: exclude-hidden:: disambiguate:: local-env-vars path-format:: git-dir "
        "absolute-git-dir git-common-dir git-path: is-inside-git-dir is-inside-work-tree is-bare-repository "
        "is-shallow-repository resolve-git-dir: show-cdup show-prefix show-toplevel show-superproject-working-tree "
        "shared-index-path show-object-format:: since:: after:: until:: before:: end-of-options",
    ),
}
# `git log -5` and `git show -3`: -<number> is --max-count (git-log(1))
_GIT_NUMERIC = frozenset({"log", "show"})


def _kinds(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split():
        name = item.rstrip(":")
        out[name] = item[len(name):]
    return out


_GIT_TABLES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    sub: (_kinds(short), _kinds(long)) for sub, (short, long) in GIT_SUBCOMMAND_OPTIONS.items()
}


READ_ONLY = frozenset({
    "ls", "pwd", "cd", "cat", "head", "tail", "wc", "grep", "rg", "which", "echo", "date", "whoami", "file",
    "stat", "du", "df", "sort", "cut", "diff", "tree", "basename", "dirname", "true", "uniq", "find", "git",
})
# git subcommands that only read the repository (git-status refreshes the index, which is git's own).
GIT_READ_ONLY = frozenset({"status", "diff", "log", "show", "rev-parse", "ls-files", "blame"})


def _takes_value(program: str, word: str) -> tuple[bool, str | None]:
    """Whether `word` (an option) takes a value in `program`, and the value when it is attached."""
    table = VALUE_OPTIONS.get(program)
    if word.startswith("--") or (program == "find" and len(word) > 2):
        name, eq, attached = word.partition("=")
        if eq:
            return True, attached
        return bool(table) and name in table, None
    if table:
        for i in range(1, len(word)):  # a cluster: the first value option takes the rest or the next word
            if "-" + word[i] in table:
                rest = word[i + 1 :]
                return True, rest if rest else None
    return False, None


def _git_globals(words: list[str]) -> tuple[list[str], list[tuple[str, str]], int]:
    """git's own options (the words), their values as (option, value), and the index of the
    subcommand."""
    options: list[str] = []
    values: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, attached = word.partition("=")
        if not word.startswith("-") or word in ("-", "--"):
            break
        options.append(word)
        if name in GIT_GLOBAL_VALUE_OPTIONS or name in GIT_GLOBAL_ATTACHED_ONLY:
            if eq:
                values.append((name, attached))
            elif name in GIT_GLOBAL_VALUE_OPTIONS and i + 1 < len(words):
                values.append((name, words[i + 1]))
                i += 1
        i += 1
    return options, values, i


def _git_long(sub: str, name: str) -> tuple[str, str] | None:
    """The long option `name` (no dashes, no value) of git's `sub` as (full name, kind), or None
    when it is not one: exact, `no-NAME` of one (no value), or a unique prefix of one."""
    longs = _GIT_TABLES[sub][1]
    if name in longs:
        return name, longs[name]
    if name.startswith("no-") and name[3:] in longs:
        return name, ""
    if not name:
        return None
    known = [full for full in longs if full.startswith(name)]
    return (known[0], longs[known[0]]) if len(known) == 1 else None


def _git_subcommand(sub: str, words: list[str]):
    """The words after git's read-only subcommand `sub` as (options, operands, values, unknown),
    read with its table: each option's value attached or the next word as the table says, the
    option words as their names (`-S/x` is `-S`, `--cont F` is `--contents`), and the option words
    the table does not know."""
    shorts, _ = _GIT_TABLES[sub]
    options: list[str] = []
    operands: list[str] = []
    values: list[tuple[str, str]] = []
    unknown: list[str] = []
    i, positional = 0, False
    while i < len(words):
        word = words[i]
        i += 1
        if positional or word == "-" or not word.startswith("-"):
            operands.append(word)
            continue
        if word == "--":
            positional = True
            continue
        if word.startswith("--"):
            name, eq, attached = word[2:].partition("=")
            found = _git_long(sub, name)
            if found is None or (eq and not found[1]):
                unknown.append(word)
                options.append(word)
                continue
            full, kind = found
            options.append("--" + full)
            if eq:
                values.append(("--" + full, attached))
            elif kind == ":" and i < len(words):
                values.append(("--" + full, words[i]))
                i += 1
            continue
        if sub in _GIT_NUMERIC and word[1:].isascii() and word[1:].isdigit():
            options.append(word)
            continue
        for k in range(1, len(word)):  # a cluster: the first letter that takes a value takes the rest
            kind = shorts.get(word[k])
            if kind is None:
                unknown.append(word)
                options.append(word)
                break
            if not kind:
                continue
            options.append(word[: k + 1])
            rest = word[k + 1 :]
            if rest:
                values.append(("-" + word[k], rest))
            elif kind == ":" and i < len(words):
                values.append(("-" + word[k], words[i]))
                i += 1
            break
        else:
            options.append(word)
    return options, operands, values, unknown


def _git_split(words: list[str]):
    """git's words (after `git`) as (options, operands, values, unknown): its own options, then the
    subcommand's, read with the subcommand's table when it has one (`unknown` is then the options
    that table does not know), else only `--name=value` values (`unknown` is None)."""
    options, values, i = _git_globals(words)
    if i < len(words) and words[i] in _GIT_TABLES:
        sub_options, operands, sub_values, unknown = _git_subcommand(words[i], words[i + 1 :])
        return options + sub_options, [words[i]] + operands, values + sub_values, unknown
    return options, values, i, None


def short_letters(program: str, word: str) -> str:
    """The option letters of a cluster of short options (`-rnA3` is r, n, A: what follows a
    letter that takes a value is that value)."""
    if program in _CLUSTER_NEXT_WORDS:
        return word[1:]
    letters = _value_letters(program)
    # the first letter that takes a value ends the cluster: one search a letter of the table
    # (in C), not a step a character of the word (a 100,000-character cluster took 16 ms)
    ends = [k for k in (word.find(letter, 1) for letter in letters) if k > 0]
    return word[1 : min(ends) + 1] if ends else word[1:]


_VALUE_LETTERS: dict[str, frozenset[str]] = {}


def _value_letters(program: str) -> frozenset[str]:
    """The letters of `program`'s short options that take a value (`-X` in VALUE_OPTIONS)."""
    letters = _VALUE_LETTERS.get(program)
    if letters is None:
        table = VALUE_OPTIONS.get(program, ())
        letters = frozenset(o[1] for o in table if len(o) == 2 and o[0] == "-")
        if program in VALUE_OPTIONS:
            _VALUE_LETTERS[program] = letters  # one per program of the table: bounded
    return letters


def split_words(program: str, words: list[str]) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """`words` (after the program) as (options, operands, values): the option words in order,
    the operands (with `--` ending the options, except for find), and the values the options
    took (attached or the next word), each as (option, value) with the option's name as written
    (`-e`, `--regexp`). Options are returned whole, for `split_flags` to name."""
    options: list[str] = []
    operands: list[str] = []
    values: list[tuple[str, str]] = []
    i, positional = 0, False
    if program == "git":
        split = _git_split(words)
        if split[3] is not None:  # a read-only subcommand, read with its table
            return split[0], split[1], split[2]
        options, values, i, _ = split
        program = "git subcommand"  # another subcommand's options: only `--name=value` values
    while i < len(words):
        word = words[i]
        i += 1
        if positional or word == "-" or not word.startswith("-"):
            operands.append(word)
            continue
        if word == "--":
            if program != "find":  # find's `--` ends its options; the expression (-delete) follows
                positional = True
            continue
        options.append(word)
        if program in _CLUSTER_NEXT_WORDS and not word.startswith("--"):
            for letter in word[1:]:
                if "-" + letter in VALUE_OPTIONS[program] and i < len(words):
                    values.append(("-" + letter, words[i]))
                    i += 1
            continue
        takes, attached = _takes_value(program, word)
        if not takes:
            continue
        name = _option_name(program, word)
        if attached is not None:
            values.append((name, attached))
            continue
        count = 2 if (program, word) in _TWO_VALUES else 1
        values.extend((name, value) for value in words[i : i + count])
        i += count
    return options, operands, values


def _option_name(program: str, word: str) -> str:
    """The option a value belongs to: `--regexp=x` is --regexp, `-rnA3` is -A."""
    if word.startswith("--") or (program == "find" and len(word) > 2):
        return word.partition("=")[0]
    letters = short_letters(program, word)
    return "-" + letters[-1] if letters else word


def paths(program: str, operands: list[str], values: list[tuple[str, str]], options: list[str] = ()) -> tuple[str, ...]:
    """The words of a command that may name a file (`Command.paths`): its operands but a
    pattern (grep's and rg's first operand when no -e or -f gave one, and rg's --files takes no
    pattern) and git's subcommand, and the values of options other than those NOT_FILES lists (a
    pattern, a number, a format). A long option that may be getopt_long's abbreviation of
    --regexp or --file (`grep --reg=P FILE`) counts as one: FILE stays a path. An empty word
    names no file (open(2) of "" fails with ENOENT), so it is not among them: `echo ""` has no
    path for a rule's path() to refuse."""
    out = list(operands)
    if program in _PATTERN_FIRST and out and not _pattern_given(program, values, options):
        out = out[1:]
    elif program == "git" and out:
        out = out[1:]
    plain = NOT_FILES.get(program, frozenset())
    return tuple(word for word in out + [value for name, value in values if name not in plain] if word)


def _pattern_given(program: str, values: list[tuple[str, str]], options: list[str]) -> bool:
    given = _PATTERN_FIRST[program]
    longs = [name for name in given if name.startswith("--")]
    for name, _ in values:
        if name in given or (name.startswith("--") and len(name) > 2 and any(full.startswith(name) for full in longs)):
            return True
    return program == "rg" and any(word.partition("=")[0] in _NO_PATTERN_RG for word in options)


# ripgrep(1): --files lists the files it would search, and --type-list the types: no pattern
_NO_PATTERN_RG = frozenset({"--files", "--type-list"})


def git_global_options(words: list[str] | tuple[str, ...]) -> list[str]:
    """The names (no dashes, no value) of git's own options among `words`, before the subcommand:
    `git -C x -c a=b status` gives `C`, `c`. git.c reads them exactly: `-C`, not a cluster."""
    options, _, _ = _git_globals(list(words))
    return [word.lstrip("-").partition("=")[0] for word in options]


def _runs_or_writes(flag: str, dangerous: frozenset[str]) -> bool:
    # a long flag that is a prefix of a dangerous long option may be getopt_long's abbreviation of it
    return flag in dangerous or (len(flag) > 1 and any(len(d) > 1 and d.startswith(flag) for d in dangerous))


def read_only(command: "Command") -> bool:
    """`Command.read_only`: see the module docstring."""
    program = command.program
    if program not in READ_ONLY:
        return False
    dangerous = RUNS_OR_WRITES.get(program, frozenset())
    if any(_runs_or_writes(flag, dangerous) for flag in command.flags):
        return False
    if program == "git":
        if not command.args or command.args[0] not in GIT_READ_ONLY:
            return False
        words = list(command.argv[1:])
        unknown = _git_split(words)[3]
        if unknown is None or unknown:  # an option its manual does not list may take a value or run something
            return False
        # a word read as a value or an operand that is spelled as an option that runs or writes
        # (git may read it as the option where this table reads it as a value)
        if any(_runs_or_writes(word.lstrip("-").partition("=")[0], dangerous) for word in words if word.startswith("--")):
            return False
        return not any(name in GIT_REPOSITORY_OPTIONS for name in git_global_options(words))
    if program == "uniq":
        return len(command.args) <= 1  # `uniq IN OUT` writes OUT
    return True


# --- publishing: `Command.publishes` -------------------------------------------------------------

# git's commands (`git --list-cmds=main,nohelpers`, git 2.39, and the ones packaged apart:
# git-send-email, git-svn, git-p4, git-cvs*, git-gui). Any other subcommand is an alias of the
# repository's or the user's config, or a `git-NAME` program on PATH: what it runs is not in the text.
GIT_COMMANDS = _options(
    "add write-tree am annotate apply archive bisect worktree blame branch bugreport bundle cat-file check-attr "
    "check-ignore check-mailmap check-ref-format checkout whatchanged checkout-index cherry cherry-pick clean clone "
    "column commit commit-graph commit-tree config count-objects credential credential-cache version "
    "credential-store daemon describe diagnose diff diff-files diff-index diff-tree difftool verify-tag verify-pack "
    "fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch "
    "fsck fsck-objects verify-commit gc get-tar-commit-id grep hash-object help hook http-backend http-fetch "
    "http-push imap-send index-pack init init-db instaweb interpret-trailers log ls-files ls-remote ls-tree mailinfo "
    "mailsplit maintenance merge merge-base merge-file merge-index merge-octopus merge-one-file merge-ours "
    "merge-recursive merge-recursive-ours merge-recursive-theirs merge-resolve merge-subtree merge-tree mergetool "
    "mktag mktree multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs patch-id pickaxe prune "
    "prune-packed pull push quiltimport range-diff read-tree rebase receive-pack reflog remote remote-ext remote-fd "
    "remote-ftp remote-ftps remote-http remote-https repack replace request-pull rerere reset restore rev-list "
    "rev-parse revert rm send-pack var shell shortlog show show-branch show-index show-ref sparse-checkout stage "
    "stash status stripspace submodule upload-pack subtree switch symbolic-ref tag unpack-file unpack-objects "
    "update-index update-ref update-server-info upload-archive "
    "send-email svn p4 cvsexportcommit cvsimport cvsserver archimport gui citool"
)
# Subcommands that send commits or a repository to another repository, a server or a person
# (git-push(1) under other names: git-send-pack(1), git-http-push(1), git-subtree(1) push,
# git-svn(1) dcommit, git-p4(1) submit, git-send-email(1), git-imap-send(1), git-cvsexportcommit(1)),
# or serve it (git-daemon(1), git-instaweb(1), git-http-backend(1), the -pack and -archive servers
# and git-cvsserver(1)), or move data through a transport helper (git-remote-ext(1) runs a command).
GIT_PUBLISHING = _options(
    "push send-pack http-push subtree svn p4 send-email imap-send cvsexportcommit daemon instaweb http-backend "
    "upload-pack receive-pack upload-archive cvsserver remote-ext remote-fd remote-ftp remote-ftps remote-http "
    "remote-https shell"
)
# Subcommands that run a command the text gives or the config names, which may push: git-submodule(1)
# foreach (and update's `!command`), git-bisect(1) run, git-difftool(1), git-mergetool(1),
# git-filter-branch(1), git-for-each-repo(1) (runs a git command in other repositories), git-hook(1)
# run, git-config(1) (it sets what later commands run: an alias, core.pager, core.sshCommand).
GIT_RUNS_COMMANDS = _options("submodule bisect difftool mergetool filter-branch for-each-repo hook config")
# Subcommands whose options make them run a command (by flag name): git-rebase(1) -x/--exec,
# git-fetch(1), git-pull(1), git-ls-remote(1), git-fetch-pack(1) --upload-pack (ls-remote -u),
# git-clone(1) -u/--upload-pack, --template (its hooks run on checkout), -c/--config,
# git-archive(1) --exec, --remote.
GIT_OPTIONS_THAT_RUN: dict[str, frozenset[str]] = {
    "rebase": frozenset({"x", "exec"}),
    "fetch": frozenset({"upload-pack"}),
    "pull": frozenset({"upload-pack"}),
    "ls-remote": frozenset({"u", "upload-pack"}),
    "fetch-pack": frozenset({"upload-pack", "exec"}),
    "clone": frozenset({"u", "upload-pack", "template", "c", "config"}),
    "archive": frozenset({"exec", "remote"}),
}
# git's own options that set its configuration or where its programs are (an alias, core.sshCommand)
_GIT_CONFIG_OPTIONS = frozenset({"c", "config-env", "exec-path"})


def publishes(command: "Command") -> bool:
    """`Command.publishes`: git would send commits or a repository elsewhere (git push, or the same
    under another name: GIT_PUBLISHING), or it may, because it runs a command the text gives or its
    config names (GIT_RUNS_COMMANDS, GIT_OPTIONS_THAT_RUN), its own options set its configuration
    (`git -c alias.p='!git push' p`), or the subcommand is not one of git's (an alias or a
    `git-NAME` on PATH)."""
    if command.program != "git" or not command.args:
        return False
    words = list(command.argv[1:])
    if any(name in _GIT_CONFIG_OPTIONS for name in git_global_options(words)):
        return True
    sub = command.args[0]
    if sub not in GIT_COMMANDS or sub in GIT_PUBLISHING or sub in GIT_RUNS_COMMANDS:
        return True
    running = GIT_OPTIONS_THAT_RUN.get(sub)
    return bool(running) and any(_runs_or_writes(flag, running) for flag in command.flags)

