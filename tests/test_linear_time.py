"""Every matcher of dsl/ runs in time linear in its input, at the documented maximum sizes.

`make test` runs this file in a process of its own, after the rest of the suite: in the same
process as the 4,000 tests before it, linear matchers measured ratios of 21-32 (the same ones
measure 10-17 alone), a cost of what the process had been through, not of the matchers.

Each test times one matcher on an adversarial text of N characters and on one of N/10 built the
same way (best of a few runs each) and asserts the ratio stays at most 20: a linear matcher gives
about 10, a quadratic one 100. No timing is compared with the clock. The texts are the known bad
inputs (issue 9) and, through hypothesis, repetitions of short units of the characters each
matcher treats specially.
"""

from __future__ import annotations

import gc
from pathlib import Path
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsl import Policy, globs, values
from dsl.compiler import clear_caches
from dsl.subjects import MAX_PATH_TEXT, MAX_SHELL_TEXT, MAX_URL_TEXT, make_path, parse_shell_uncached, parse_url, path_glob
from dsl.subjects.bash import MAX_COMMANDS
from dsl.subjects.quoting import (
    _ansi_c, brace_expand, has_arithmetic_subscript, has_brace_group, remove_quoted_parts, splice_continuations,
    subscript_substitution,
)
from dsl.subjects.secrets import _MAX_GLOB_PATTERN, _glob_may_be_secret
from dsl.values import EvalError

MAX_RATIO = 20
MAX_STRING = 100_000  # characters of a string matched by glob, contains, startswith (what is tested here)
# Each example times a matcher some forty times at the maximum sizes: the known bad inputs are
# @example cases, and four drawn units (derandomized, so every run tries the same) keep the
# suite within its time budget.
SLOW = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _best(fn, arg, repeats: int) -> float:
    """The best of `repeats` timings of fn(arg), each with the caches emptied and the cyclic
    garbage collector paused (a full collection walks every object the process holds, a cost of
    the process, not of the matcher)."""
    best = float("inf")
    for _ in range(repeats):
        clear_caches()
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            try:
                fn(arg)
            except EvalError:
                pass  # refusing the input is a decision too; its cost counts the same
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def ratio(fn, make, n: int, repeats: int = 3) -> float:
    """time(fn(make(n))) / time(fn(make(n // 10))), best of `repeats`; measured again, up to three
    times in all, when over the limit (a scheduler's hiccup or another process on the same cores
    is not the matcher's: a linear matcher measures about 10, a quadratic one about 100)."""
    big, small = make(n), make(n // 10)
    _best(fn, small, 1)  # warm: imports, compiled patterns
    for _ in range(3):
        r = _best(fn, big, repeats) / max(_best(fn, small, repeats * 3), 1e-7)
        if r <= MAX_RATIO:
            return r
    return r


def repeat(unit: str, n: int, prefix: str = "", suffix: str = "") -> str:
    body = n - len(prefix) - len(suffix)
    return prefix + (unit * (body // len(unit) + 1))[: max(body, 0)] + suffix


# --- shell text ---------------------------------------------------------------------------------

SHELL_UNITS = st.text(alphabet="a[]$(`'\"{},.\\<\n ;|&#-=x", min_size=1, max_size=6)


@SLOW
@given(SHELL_UNITS)
@example("a[$(")  # issue 9: `echo 'a[$(a[$(...'`, cubic in the subscript regex (77 s at 8 KB)
@example("{,,,")
@example('"\\"')
@example("<<\"'")
@example("$'\\x")
def test_parsing_a_shell_text_takes_time_linear_in_its_length(unit):
    for prefix, suffix in (("echo '", "'"), ("echo ", "")):
        make = lambda n: repeat(unit, n, prefix, suffix)  # noqa: E731
        assert ratio(parse_shell_uncached, make, MAX_SHELL_TEXT) <= MAX_RATIO


# Texts on which tree-sitter-bash's error recovery read the text again at every position (found
# by bench/worst.py's random search): seconds at 20 KB, about a minute at 100 KB, before shell()
# had a parser of its own. Refused, in time linear in the length.
QUADRATIC_FOR_TREE_SITTER = [("echo ", ", .b$"), ("echo ", "{&"), ("cat ", "$<"), ("echo ", "\\x$"), ("echo ", "$;[")]


@pytest.mark.parametrize("prefix, unit", QUADRATIC_FOR_TREE_SITTER)
def test_texts_the_parser_cannot_recover_from_are_refused_in_linear_time(prefix, unit):
    make = lambda n: repeat(unit, n, prefix)  # noqa: E731
    with pytest.raises(EvalError, match="not valid shell syntax|too many to read"):  # `echo $;[$;[…` is bash
        parse_shell_uncached(make(MAX_SHELL_TEXT))
    assert ratio(parse_shell_uncached, make, MAX_SHELL_TEXT) <= MAX_RATIO


def test_long_valid_texts_within_the_limits_are_read():
    heredoc = "cat > f.py <<'EOF'\n" + "x = {'a': [1, 2, \"$b\"]}  # (c) \\\n" * 2500 + "EOF\n"
    for text in ("a;" * MAX_COMMANDS, "echo hi | grep -v x && ls; " * (MAX_COMMANDS // 3), heredoc):
        assert parse_shell_uncached(text)


def test_the_subscript_scanner_is_linear_on_the_known_cubic_input():
    assert ratio(subscript_substitution, lambda n: repeat("a[$(", n), MAX_SHELL_TEXT) <= MAX_RATIO
    assert ratio(subscript_substitution, lambda n: repeat("a[", n, "", "$(]"), MAX_SHELL_TEXT) <= MAX_RATIO


@SLOW
@given(st.text(alphabet="{},.ab'\"\\$", min_size=1, max_size=5))
@example("{,")
@example("{a,b}")
@example('"\\')
def test_the_word_scanners_are_linear(unit):
    make = lambda n: repeat(unit, n)  # noqa: E731
    for fn in (has_brace_group, remove_quoted_parts, _ansi_c, splice_continuations):
        assert ratio(fn, make, MAX_SHELL_TEXT) <= MAX_RATIO, fn.__name__
    assert ratio(brace_expand, make, MAX_SHELL_TEXT) <= MAX_RATIO


def test_heredoc_delimiters_are_read_in_linear_time():
    for unit in ('<<"\\\\\n', "<<'\\\n", '<<a"$(<<\\\n'):
        assert ratio(splice_continuations, lambda n: repeat(unit, n), MAX_SHELL_TEXT) <= MAX_RATIO, unit


# --- globs --------------------------------------------------------------------------------------

PATTERNS = ["/**/.git/**/config", "/**/a*b*c*d/**/x*y*z", "/**/a/**/b/**/c/**/d", "/**/*a*a*a*b", "/a/**/?*?*?/**"]
SEGMENTS = ["/.git", "/abcd", "/a", "/aaaa", "/a/b/c", "/?", "/" + "a" * 50]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("unit", SEGMENTS)
def test_a_path_glob_takes_time_linear_in_the_path(pattern, unit):
    # issue 9: `/**/.git/**/config` against a 100 KB path took 12.3 s
    segments = make_path(pattern, None, None).parts
    regex = globs.path_regex(segments)
    assert ratio(regex.match, lambda n: repeat(unit, n), MAX_PATH_TEXT) <= MAX_RATIO
    relative = pattern.replace("/**", "**", 1)  # anchored at the cwd at run time: subjects.path_glob
    assert ratio(lambda p: path_glob(p, relative, "/w", None), lambda n: make_path(repeat(unit, n), None, None), MAX_PATH_TEXT) <= MAX_RATIO


@SLOW
@given(st.text(alphabet="ab*?", min_size=1, max_size=8), st.text(alphabet="ab", min_size=1, max_size=4))
@example("*a*b*c*d*e", "a")
@example("a*a*a*a*b", "a")
def test_selectors_and_string_globs_take_time_linear_in_the_text(pattern, unit):
    make = lambda n: repeat(unit, n)  # noqa: E731
    assert ratio(globs.selector_regex(pattern).match, make, MAX_STRING) <= MAX_RATIO
    assert ratio(values.glob_regex(pattern).match, make, MAX_STRING) <= MAX_RATIO
    segment = globs.path_regex((pattern.replace("?", "a"),))  # one long segment
    assert ratio(segment.match, lambda n: "/" + make(n), MAX_STRING) <= MAX_RATIO


@given(st.lists(st.sampled_from(["**", "*", "a", "a*", "*b", "a?b", "?", "ab", "a*b*a", "[a]", "*a*"]), max_size=5),
       st.lists(st.text(alphabet="ab[]", min_size=1, max_size=3), max_size=6))
@settings(max_examples=500, deadline=None)
def test_the_linear_path_regex_decides_as_the_backtracking_one_did(segments, parts):
    import re

    old = ""
    for seg in segments:  # the translation of dsl/subjects/paths.py before issue 9
        old += r"(?:/[^/]+)*" if seg == "**" else "/" + "".join(
            "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch) for ch in seg)
    text = "".join("/" + p for p in parts)
    assert (re.match(old + r"\Z", text, re.DOTALL) is not None) == (globs.path_regex(tuple(segments)).match(text) is not None)


@given(st.text(alphabet="ab*?[", max_size=6), st.text(alphabet="ab[\n", max_size=7))
@settings(max_examples=500, deadline=None)
def test_the_linear_selector_regex_decides_as_the_backtracking_one_did(pattern, text):
    import re

    old = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + r"\Z"
    assert (re.match(old, text, re.DOTALL) is not None) == (globs.selector_regex(pattern).match(text) is not None)


# --- the scanners decide as the regexes they replace --------------------------------------------

@given(st.text(alphabet="ab_9[]$(`", max_size=12))
@settings(max_examples=500, deadline=None)
def test_the_subscript_scanner_finds_what_the_regex_found(text):
    import re

    found = [m.group(1) for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*\[(.*(?:\$\(|`).*)\]", text, re.DOTALL)]
    got = subscript_substitution(text)
    assert found == ([got] if got is not None else [])


@given(st.text(alphabet="ab_9[]$(", max_size=12))
@settings(max_examples=500, deadline=None)
def test_the_arithmetic_subscript_scanner_finds_what_the_regex_found(text):
    import re

    assert has_arithmetic_subscript(text) == (re.search(r"[A-Za-z_][A-Za-z0-9_]*\[(?![0-9]*\])", text) is not None)


@given(st.text(alphabet="{},.a", max_size=12))
@settings(max_examples=500, deadline=None)
def test_the_brace_group_scanner_finds_what_the_regex_found(text):
    import re

    assert has_brace_group(text) == (re.search(r"\{[^{}]*(?:,|\.\.)[^{}]*\}", text) is not None)


@given(st.text(alphabet="$'\"\\a", max_size=12))
@settings(max_examples=500, deadline=None)
def test_removing_quoted_parts_gives_what_the_regex_gave(text):
    import re

    assert remove_quoted_parts(text) == re.sub(r"\$?'[^']*'|\"(?:[^\"\\]|\\.)*\"|\\.", "", text, flags=re.DOTALL)


def _heredoc_end_by_lines(text, begin, delimiter, quoted, strip, stop):
    """dsl.subjects.quoting.heredoc_end as it read a body before, one line at a time in Python
    (30 ms for a 100 KB body): the reference its search must agree with."""
    nl, bs, tab = ("\n", "\\", "\t") if isinstance(text, str) else (b"\n", b"\\", b"\t")
    n, i = len(text), begin
    while i < n:
        if stop is not None and i > stop:
            raise EvalError("a heredoc ends elsewhere for bash than for the parser")
        start, logical = i, []
        while True:
            end = text.find(nl, i)
            line = text[i:] if end < 0 else text[i:end]
            i = n if end < 0 else end + 1
            if not quoted and (len(line) - len(line.rstrip(bs))) % 2 == 1:
                if strip:
                    raise EvalError("a line continuation in a `<<-` heredoc cannot be read as bash would")
                logical.append(line[:-1])
                if end >= 0:
                    continue
            else:
                logical.append(line)
            break
        if (text[:0].join(logical).lstrip(tab) if strip else text[:0].join(logical)) == delimiter:
            return start, i
    return None


@given(st.lists(st.sampled_from(["E", "EOF", "\n", "\t", "x", " ", "\\", "EOF\n", "\n\tEOF", "\nEOF", "E.F"]), max_size=8),
       st.integers(0, 40), st.one_of(st.none(), st.integers(0, 40)), st.booleans(), st.booleans(), st.booleans())
@settings(max_examples=2000, deadline=None)
def test_the_heredoc_end_search_finds_what_the_line_by_line_reading_found(pieces, begin, stop, quoted, strip, as_bytes):
    from dsl.subjects.quoting import heredoc_end

    text = "".join(pieces)
    text, delimiter = (text.encode(), b"EOF") if as_bytes else (text, "EOF")
    begin = min(begin, len(text))

    def outcome(f):
        try:
            return f(text, begin, delimiter, quoted, strip, stop)
        except EvalError as exc:
            return exc.message

    assert outcome(heredoc_end) == outcome(_heredoc_end_by_lines)


@given(st.lists(st.sampled_from(["\\\n", "\\", "\n", "'", '"', "$", "$(", "$'", "(", ")", "`", "#", " ", "a", "<", "<<",
                                 "<<<", "<<-", "EOF", "\t", ";", "|", "x#", "\\'", '\\"']), max_size=14))
@settings(max_examples=3000, deadline=None)
def test_joining_continuations_run_by_run_gives_what_one_character_at_a_time_gave(pieces):
    text = "".join(pieces)

    def outcome(runs: bool):
        try:
            return splice_continuations(text, _runs=runs)
        except EvalError as exc:
            return exc.message

    assert outcome(True) == outcome(False)


@pytest.mark.parametrize("unit", ["a", "'a'", '"a"', "<", "$(a)", "\\\n", "#a\n", "$'a'", "\\a"])
def test_joining_continuations_takes_time_linear_in_the_text(unit):
    make = lambda n: repeat(unit, n, "echo \\\n")  # noqa: E731
    assert ratio(splice_continuations, make, MAX_SHELL_TEXT) <= MAX_RATIO


def test_a_heredoc_s_end_is_found_in_time_linear_in_its_body():
    for unit in ("a$(b)\n", "x\n", "EOF x\n"):
        make = lambda n, u=unit: repeat(u, n, "cat <<EOF\n", "\nEOF\n")  # noqa: E731
        assert ratio(parse_shell_uncached, make, MAX_SHELL_TEXT) <= MAX_RATIO


# --- glob patterns read for secrets (Grep's and Glob's patterns) --------------------------------

@SLOW
@given(st.text(alphabet="{},*?[]!a./\\se", min_size=1, max_size=6))
@example("{")  # nested braces `{{{…a…}}}`: quadratic before (197 s at 100 KB)
@example("{a}")  # a run of one-alternative groups: quadratic before
@example("a/")  # many segments, each tried against every secret directory
@example("[.]")
@example("*\\")  # escaped stars were kept one by one: 1,024 of them against every name, 190 ms
def test_a_glob_pattern_is_read_for_secrets_in_time_linear_in_its_length(unit):
    def make(n):
        if unit == "{":
            return "{" * (n // 2) + "a" + "}" * (n // 2 - 1)
        return repeat(unit, n)
    assert ratio(_glob_may_be_secret, make, _MAX_GLOB_PATTERN) <= MAX_RATIO


# --- urls, paths, strings: through Policy.evaluate ----------------------------------------------

POLICY = Policy.from_text('''
default allow
deny Url when url(args.u).host endswith ".evil.example" reason "u"
deny Path when path(args.p) under "/etc" reason "p"
deny Str when args.s contains "needle" or args.s startswith "x" or args.s glob "*a*b*c*" reason "s"
''')


@pytest.mark.parametrize("tool,key,unit,limit", [
    ("Url", "u", "a.", MAX_URL_TEXT), ("Url", "u", "%41", MAX_URL_TEXT), ("Url", "u", "ｘ。", MAX_URL_TEXT),
    ("Path", "p", "/..", MAX_PATH_TEXT), ("Path", "p", "//./a", MAX_PATH_TEXT),
    ("Str", "s", "needl", MAX_STRING), ("Str", "s", "ab", MAX_STRING),
])
def test_a_decision_takes_time_linear_in_its_argument(tool, key, unit, limit):
    prefix = "http://" if tool == "Url" else "/"
    assert ratio(lambda v: POLICY.evaluate(tool, {key: v}, {"cwd": "/w"}), lambda n: repeat(unit, n, prefix), limit) <= MAX_RATIO


WINDOWS_POLICY = Policy.from_text('''
default allow
deny Read when path(args.p) glob "/**/.git/**/config" reason "g"
deny Read when path(args.p) glob "C:/**/a/**/b/**/c/**/d" reason "a"
deny Read when path(args.p) under "C:\\\\Windows" reason "w"
deny Read when path(args.p).secret or path(args.p).parts contains ".ssh" reason "s"
''')
WINDOWS_UNITS = st.text(alphabet="\\/.aC:ß?*~ Σ1", min_size=1, max_size=5)


@SLOW
@given(WINDOWS_UNITS)
@example("\\a\\b\\c")  # bench/worst.py's hand-written inputs, and what its random search found slowest
@example("\\..")
@example("/Σß")
@example("\\ß")
@example(".\\a.")
@example("a./ß")
@example("~1\\")
@example("CON\\")
def test_a_windows_path_is_decided_in_time_linear_in_its_length(unit):
    """A Windows path (drive, UNC or relative to a Windows cwd) at the documented maximum:
    read, normalized and checked segment by segment where it must be, and matched by every
    operator a rule applies to it (globs anchored at any root or a drive, `under`, its fields)."""
    context = {"cwd": "C:\\w", "home": "C:\\Users\\u"}
    for prefix in ("C:\\", "\\\\server\\share\\", ""):
        make = lambda n: repeat(unit, n, prefix)  # noqa: E731
        assert ratio(lambda v: WINDOWS_POLICY.evaluate("Read", {"p": v}, context), make, MAX_PATH_TEXT) <= MAX_RATIO


def test_longer_paths_and_urls_than_the_limits_are_errors():
    with pytest.raises(EvalError):
        make_path("/" + "a" * MAX_PATH_TEXT, None, None)
    with pytest.raises(EvalError):
        parse_url("http://" + "a" * MAX_URL_TEXT)
    assert POLICY.evaluate("Path", {"p": "/" + "a" * MAX_PATH_TEXT}).effect == "deny"  # the error counts


# --- caches bounded in bytes --------------------------------------------------------------------

def _rss() -> int:
    """This process's resident memory in bytes (Linux's /proc/self/statm)."""
    import os

    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux's /proc to read the resident memory")
def test_distinct_long_commands_leave_the_shell_caches_under_their_budgets():
    # issue 9: each distinct 99 KB command kept about 10 MB, 670 MB after 60 calls. Now each is
    # as large as shell()'s limits allow a command to be read (120 simple commands and a word of
    # the rest of the 99 KB: about 0.4 MB kept); a hundred of them would keep about 40 MB in
    # each of the two caches unbounded; bounded, 56 MB at most together.
    # (The resident memory, not tracemalloc: tracing every allocation made this take minutes.)
    from dsl import cache, compiler
    from dsl.subjects import shell

    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" reason "r"\n')
    clear_caches()
    gc.collect()
    before = _rss()
    for i in range(100):
        commands = "".join(f"ls -l a{i} b{k}; " for k in range(120))
        command = commands + "echo '" + "x" * (99_000 - len(commands) - 7) + "'"
        assert policy.evaluate("Bash", {"command": command}).effect == "allow"
        shell.parse_shell(command)  # the other cache (parse_shell's own)
    gc.collect()
    held = _rss() - before
    assert compiler._SHELL_CACHE.bytes <= cache.BUDGETS["compiler.shell"]
    assert shell._CACHE.bytes <= cache.BUDGETS["subjects.shell"]
    assert len(compiler._SHELL_CACHE) < 100  # some were evicted
    assert held <= 160 * cache.MB, f"{held / cache.MB:.0f} MB held"


def test_the_cache_evicts_the_least_recently_used_entry_first():
    from dsl.cache import BoundedCache

    c = BoundedCache(1000)
    c.put("a", "x", 300)
    c.put("b", "y", 300)
    c.get("a")
    c.put("c", "z", 300)  # 1,200 bytes with the entries' overhead: b goes
    assert "a" in c and "c" in c and "b" not in c and c.bytes <= 1000


def test_an_entry_larger_than_the_budget_is_not_kept():
    from dsl.cache import BoundedCache

    c = BoundedCache(1000)
    c.put("a", "x" * 2000)
    assert c.get("a") is None and c.bytes == 0


@pytest.mark.parametrize("unit, tail", [("nice ", "ls"), ("xargs ", "ls"), ("env ", ""), ("timeout 1 ", "ls")])
def test_a_chain_of_wrappers_takes_time_linear_in_its_length(unit, tail):
    # hostile review of issue 9: each level read the words after it again (82 KB of `nice `: 24 s)
    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" reason "no"')
    make = lambda n: repeat(unit, n - len(tail)) + tail  # noqa: E731
    assert ratio(lambda text: policy.evaluate("Bash", {"command": text}), make, MAX_SHELL_TEXT) <= MAX_RATIO


def test_a_chain_of_cd_before_many_words_takes_time_linear_in_its_length():
    # each word was resolved against a cwd as long as the chain: (cd count) x (words)
    policy = Policy.from_text('default ask\nallow Bash when all c in shell(args.command): all p in c.paths: path(p, c.cwd) under context.cwd')
    make = lambda n: "cd a && " * (n // 100) + "ls " + "x " * (n // 3)  # noqa: E731
    assert ratio(lambda text: policy.evaluate("Bash", {"command": text}, {"cwd": "/home/u/proj"}), make, MAX_SHELL_TEXT) <= MAX_RATIO
# --- programs that run programs -----------------------------------------------------------------

@pytest.mark.parametrize("unit", ["sudo env ", "xargs ", "find . -exec "])
def test_a_chain_of_programs_running_programs_is_read_in_linear_time(unit):
    # issue 9: each level read the rest of the line again (quadratic) until Python's recursion
    # limit: `find . -exec find . -exec ...` took 42 s at 100 KB, `xargs xargs ...` 7 s
    assert ratio(parse_shell_uncached, lambda n: repeat(unit, n, "", " rm"), MAX_SHELL_TEXT) <= MAX_RATIO


@pytest.mark.parametrize("prefix, unit", [
    ("ssh -", "a"), ("sudo -", "E"), ("python3 -", "B"), ("env -", "i"), ("perl -", "n"),  # letters that do nothing
    ("sudo -", "l"), ("python3 -", "i"), ("bash -", "s"), ("sudo -", "Ek"), ("sudo -", "lE"), ("ls -", "a"),
])
def test_a_long_cluster_of_short_options_is_read_in_linear_time(prefix, unit):
    # hostile review 3: getopt._short copied the rest of the cluster at each letter (`ssh -aaa...`
    # of 99,000 characters: 200 ms)
    assert ratio(parse_shell_uncached, lambda n: repeat(unit, n, prefix), MAX_SHELL_TEXT) <= MAX_RATIO


@pytest.mark.parametrize("prefix, unit", [
    ("read ", "a"), ("unset ", "a"), ("export a=", "a"), ("declare ", "a"), ("local ", "a"), ("test ", "a"),
    ("read ", "a1_"), ("unset ", "a[0]"), ("read ", "a["), ("read ", "9["),
])
def test_a_long_name_after_an_assigning_builtin_is_read_in_linear_time(prefix, unit):
    # hostile review 3: a regex searched for `NAME[` from each character of a long name (`read
    # aaa...` of 99,000 characters: 9.6 s)
    assert ratio(parse_shell_uncached, lambda n: repeat(unit, n, prefix), MAX_SHELL_TEXT) <= MAX_RATIO


@SLOW
@given(st.text(alphabet="a_9[]$(", min_size=1, max_size=5))
@example("a")
@example("a[")
def test_the_arithmetic_subscript_scanner_is_linear(unit):
    assert ratio(has_arithmetic_subscript, lambda n: repeat(unit, n), MAX_SHELL_TEXT) <= MAX_RATIO


@pytest.mark.parametrize("prefix, unit", [
    ("env ", "A=1 "), ("env ", "1=2 "), ("sudo ", "A=1 "), ("sudo ", "A=1 -E "), ("sudo ", "a.b=1 "), ("env ", '"$X=1" '),
    ("env ", "- "),
])
def test_assignments_before_a_wrapper_s_command_are_read_in_linear_time(prefix, unit):
    # every word may be an assignment (env, sudo); one known only at run time forks a reading
    assert ratio(parse_shell_uncached, lambda n: repeat(unit, n, prefix, " rm"), MAX_SHELL_TEXT) <= MAX_RATIO


def test_a_chain_past_the_limit_is_refused_and_a_short_one_read():
    from dsl.subjects.shell import MAX_RUNNERS

    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" reason "r"\n')
    assert policy.evaluate("Bash", {"command": "sudo env nice xargs rm x"}).effect == "deny"
    long = "sudo " * MAX_RUNNERS + "ls"
    decision = policy.evaluate("Bash", {"command": long})
    assert decision.effect == "deny" and "programs that run others" in decision.outcomes[0].error  # fails closed
    with pytest.raises(EvalError):
        parse_shell_uncached(long)
    assert parse_shell_uncached("sudo " * (MAX_RUNNERS - 1) + "ls")[0].program == "ls"


@pytest.mark.parametrize("unit, per_unit", [("nice ", 1), ("sudo env ", 2), ("xargs ", 1), ("find . -exec ", 1),
                                            ("timeout 1 ", 1)])
def test_one_budget_bounds_every_chain_of_programs_with_one_message(unit, per_unit):
    # hostile review: two overlapping limits (16 programs deep, 32 read in all) gave two errors
    # and refused a chain of 17 that the other limit allowed; one count of the programs read for
    # a simple command (nested, or under each reading of an unknown option) now bounds both
    from dsl.subjects import shell

    assert not hasattr(shell, "MAX_WRAPPER_CHAIN")
    fits = (shell.MAX_RUNNERS - 1) // per_unit
    commands = parse_shell_uncached(unit * fits + "ls")
    assert any(c.program == "ls" for c in commands)
    with pytest.raises(EvalError, match=f"more than {shell.MAX_RUNNERS} programs that run others"):
        parse_shell_uncached(unit * (shell.MAX_RUNNERS + 1) + "ls")


def test_a_text_nested_past_the_recursion_limit_is_an_error_kept_once():
    # `$($(...))` 30,000 deep: a RecursionError before, not kept by the cache, so every rule
    # reading shell() parsed the text again
    text = "echo " + "$(" * 30_000 + "a" + ")" * 30_000
    with pytest.raises(EvalError, match="nests too deeply"):
        parse_shell_uncached(text)
    policy = Policy.from_text('default allow\ndeny Bash when any c in shell(args.command): c.program == "rm" reason "r"\n'
                              'deny Bash when any c in shell(args.command): c.program == "mv" reason "m"\n')
    decision = policy.evaluate("Bash", {"command": text})
    assert decision.effect == "deny" and all("nests too deeply" in o.error for o in decision.outcomes if o.effect == "deny")


# tree-sitter-bash's GLR parse is quadratic on these (issue 9: where the grammar declares a conflict
# it keeps two versions and compares whole subtrees): 42 s at 16 KB for the first. The parser of
# our own (dsl.subjects.bash) reads each in time linear in the length, its limits on commands and
# words lifted so that the whole text is read, not refused early (shell() keeps them).
QUADRATIC_FOR_TREE_SITTER_GLR = [("echo ", "`<]"), ("echo ", ")$(=}<"), ("echo ", "{|a"), ("echo ", "a|")]


@pytest.mark.parametrize("prefix, unit", QUADRATIC_FOR_TREE_SITTER_GLR)
def test_our_bash_parser_is_linear_where_tree_sitter_is_quadratic(prefix, unit):
    from dsl.subjects import bash

    def parse(text: str):
        try:
            bash.parse(text.encode(), max_commands=10**9, max_words=10**9)
        except bash.BashSyntaxError:
            pass

    make = lambda n: repeat(unit, n, prefix)  # noqa: E731
    assert ratio(parse, make, MAX_SHELL_TEXT) <= MAX_RATIO


@SLOW
@given(SHELL_UNITS)
@example("`<]")
@example(")$(=}<")
@example("{|a")
@example("a|")
def test_our_bash_parser_is_linear_in_the_length(unit):
    from dsl.subjects import bash

    def parse(text: str):
        try:
            bash.parse(text.encode(), max_commands=10**9, max_words=10**9)
        except bash.BashSyntaxError:
            pass

    for prefix, suffix in (("echo '", "'"), ("echo ", "")):
        assert ratio(parse, lambda n: repeat(unit, n, prefix, suffix), MAX_SHELL_TEXT) <= MAX_RATIO


# A fourth hostile review (tests/test_attacks4.py, section 6): texts a loop read a character at a
# time, or through a re.sub template per escape, or shlex a token at a time (env -S).
RUNS = [
    ("echo `echo ", "\\\\", "`"),  # escaped backslashes inside backquotes
    ("echo ${x:-", "a", "}"), ("echo ${x#", "*", "}"), ("echo ${x//", "a", "/b}"), ("echo ${x/a/", "a", "}"),
    ("echo ${x:-", "\\a", "}"), ("echo ${x:-", "<", "}"), ("a[", "1", "]=1"), ("echo ${a[", "1", "]}"),
    ("1", "1", "=1"),
    ("env -S '", "a", "'"), ("env -S '", "a\\_", "'"), ("env -S '", "'a' ", "'"), ("env -S '", "\\'a\\' ", "'"),
    ("env -S \"", "a\\t", "\""),
]


@pytest.mark.parametrize("prefix,unit,suffix", RUNS)
def test_runs_of_plain_text_are_read_in_time_linear_in_their_length(prefix, unit, suffix):
    make = lambda n: repeat(unit, n, prefix, suffix)  # noqa: E731
    assert ratio(parse_shell_uncached, make, MAX_SHELL_TEXT) <= MAX_RATIO


# --- matches(): RE2 --------------------------------------------------------------------------------

REGEX_POLICY = Policy.from_text('''
default allow
deny Re when matches(args.s, "(a+)+$") or matches(args.s, "^(a|aa)*b") or matches(args.s, "(x+x+)+y") reason "r"
deny Json when json(args.s).a == 1 reason "j"
''')


@pytest.mark.parametrize("tool,unit,suffix", [
    ("Re", "a", "!"),  # exponential for a backtracking engine: Python's re takes hours at 30 characters
    ("Re", "x", ""),
    ("Json", "[", ""),  # json() of a text nested too deeply: an error, found in linear time
    ("Json", '{"a":1,', ""),
])
def test_matches_and_json_take_time_linear_in_the_text(tool, unit, suffix):
    assert ratio(lambda v: REGEX_POLICY.evaluate(tool, {"s": v}), lambda n: repeat(unit, n, suffix=suffix), MAX_STRING) <= MAX_RATIO


@pytest.mark.parametrize("condition", [
    'any c in run: from_tool(c.args.to, "*web*") and not from_user(c.args.to)',   # a lookup per call
    'count(run[*].tool) > 0 and total(calls("pay"), "args.n") >= 0',             # aggregates over the run
    'any r in args.to: any o in sources(r): o.kind == "args"',                   # a lookup per item of the call
    'any c in run: from_tool(c.args.kind, "nope*") or from_tool(c.args.kind, "x")',  # one value in every call
])
def test_a_history_condition_the_checker_accepts_takes_time_linear_in_the_run(condition):
    """The checker refuses a read of the run inside a scan of it (dsl.history_check); what it
    accepts is linear in the run: 10 times the calls, about 10 times the time."""
    from dsl.history import History

    policy = Policy.from_text(f'policy "t"\ndeny t when {condition}\n  reason "r"\n')

    def make(n):
        calls = [{"tool": "read_web" if i % 2 else "pay", "args": {"to": f"u{i}@x.com", "n": i, "kind": "mail"},
                  "result": {"text": f"write to u{i}@x.com", "kind": "mail"}} for i in range(n)]
        return History.from_calls(calls)

    def decide(history):
        policy.evaluate("t", {"to": ["u3@x.com"]}, {"user_prompt": "hi"}, history=history)

    assert ratio(decide, make, 4000) <= MAX_RATIO


def test_a_chain_of_lets_is_refused_in_time_linear_in_its_length(monkeypatch):
    """`let l1 = l0 and ...`, `let l2 = l1 and ...`: each let's body nests one level deeper and
    grows by a few nodes, so the chain is refused (too deep, then too big); 3,000 of them took
    about 33 s (each enclosing `and` asked every nested one for its exists() guards again, and
    every misspelt-name suggestion compared thousands of lets)."""
    def make(n):
        lines = ['policy "t"', "let l0 = args.x > 0"]
        lines += [f"let l{i} = l{i - 1} and args.x > {i}" for i in range(1, n)]
        return "\n".join([*lines, f'deny t when l{n - 1} reason "r"', ""])

    def load(text):
        try:
            Policy.from_text(text)
        except Exception:  # refused: the cost of refusing is what is measured
            pass

    monkeypatch.setenv("COUNTERSIGN_NO_PARSER_CACHE", "1")  # every load parses and checks
    assert ratio(load, make, 3000, repeats=1) <= MAX_RATIO
