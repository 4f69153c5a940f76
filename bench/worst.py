"""Worst cases (issue 9, section 2, "Every decision ends fast"): one full decision on an
adversarial argument at the largest size each matcher accepts.

For each matcher of dsl/ (the shell parser and its scanners, brace expansion, heredocs, ANSI-C
quoting, the wrapper and getopt tables, path() and path globs, Windows paths, the secrets list and glob patterns read for it,
string globs and tool selectors, contains/startswith, url()), a small policy that uses it decides
`Policy.evaluate(tool, args, context)` on the texts below. shell() refuses a text past its limits
of simple commands, words and programs read (dsl.subjects.shell.MAX_COMMANDS, MAX_WORDS,
MAX_RUNNERS) as soon as its parser meets them, so its slowest decisions are on the largest texts
within them: the first row ("shell() at its limits") times those, each read to its end.

* hand-written inputs: the known bad ones (tests/test_linear_time.py and issue 9) and the longest
  runs of what each matcher treats specially, at MAX_SHELL_TEXT, MAX_PATH_TEXT, MAX_URL_TEXT or
  MAX_STRING characters;
* a seeded random search: short units of the matcher's special characters, each repeated to a
  tenth of the size and timed once; the slowest few are timed again at the full size.

Every timed call starts with the caches emptied (`dsl.compiler.clear_caches`): the first sight
of the argument, what an agent's new command costs. Each input is timed `RUNS` times (once when
one call passes a second); best and max are reported in milliseconds, against the target of
10 ms a decision. An input the matcher refuses (the decision errs and so does not allow) is timed
the same: refusing is a decision too.

    python -m bench --only worst          # this section alone (about 3 minutes), results in bench/results/
"""

from __future__ import annotations

import gc
import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable

from dsl import Policy
from dsl.compiler import clear_caches
from dsl.subjects import MAX_PATH_TEXT, MAX_SHELL_TEXT, MAX_URL_TEXT
from dsl.subjects.secrets import _MAX_GLOB_PATTERN as MAX_GLOB_PATTERN
from dsl.subjects.shell import MAX_COMMANDS, MAX_PROGRAMS, MAX_RUNNERS, MAX_WORDS

TARGET_MS = 10.0
MAX_STRING = 100_000  # characters of a string matched by glob, contains, startswith (as tests/test_linear_time.py)
RUNS = 3
SEARCH_SECONDS = 60.0  # the whole random search, every matcher together
SEARCH_UNITS = 300  # units drawn per matcher at most (fewer when its share of the time runs out)
CONFIRM = 2  # the slowest units of the screening timed again at the full size
SUPERLINEAR_MS = 150.0  # a tenth of the size slower than this: grown step by step (time_sized)
GROWTH_LIMIT_MS = 4000.0


def repeat(unit: str, n: int, prefix: str = "", suffix: str = "") -> str:
    """`prefix + unit * k + suffix`, cut to exactly n characters (as tests/test_linear_time.py)."""
    body = n - len(prefix) - len(suffix)
    return prefix + (unit * (body // len(unit) + 1))[: max(body, 0)] + suffix


SHELL_POLICY = '''default allow
deny Bash when any c in shell(args.command): c.program == "rm" or c.paths contains "/etc/shadow" reason "no"
'''


@dataclass
class Matcher:
    """One matcher: its policy, the call's tool, argument and context, the hand-written inputs
    (label → the text of n characters), and the random search's alphabet, prefix and suffix."""

    name: str
    policy: str
    tool: str
    key: str
    size: int
    inputs: dict[str, Callable[[int], str]]
    alphabet: str
    prefix: str = ""
    suffix: str = ""
    context: dict = field(default_factory=lambda: {"cwd": "/w", "home": "/home/u"})
    tool_is_input: bool = False  # the input is the tool's name (selectors), not an argument


def _balanced(open_: str, middle: str, close: str, n: int, prefix: str = "") -> str:
    """`prefix + open_ * k + middle + close * k`, k as large as n characters allow."""
    k = (n - len(prefix) - len(middle)) // (len(open_) + len(close))
    return prefix + open_ * k + middle + close * k


def _eval_chain(n: int) -> str:
    # eval's words joined are parsed again, each level a full-size text (8 levels, the limit)
    head = "eval " * 7 + "'"
    return head + repeat("a;", n - len(head) - 1) + "'"


def _at_limits(unit: str, count: int, prefix: str = "", suffix: str = "") -> Callable[[int], str]:
    """A text of `count` units, whatever the size asked: the texts of the limits' row are as long
    as the limits of simple commands and words (MAX_COMMANDS, MAX_WORDS) let them be, not longer."""
    return lambda n: prefix + unit * count + suffix


C, W = MAX_COMMANDS, MAX_WORDS
_RUNNERS = "sudo env " * (MAX_RUNNERS // 2 - 1) + "sudo rm"  # MAX_RUNNERS programs for one simple command
_RUNNER_WORDS = len(_RUNNERS.split())

MATCHERS = [
    # The largest texts within shell()'s limits (dsl.subjects.shell: MAX_COMMANDS simple commands,
    # MAX_WORDS words and word parts, MAX_RUNNERS programs read a simple command and MAX_PROGRAMS
    # the whole text), where a longer text is refused at once: each of them is read to its end.
    Matcher("shell() at its limits", SHELL_POLICY, "Bash", "command", MAX_SHELL_TEXT, {
        f"a;a;… ({C} simple commands)": _at_limits("a;", C),
        f"ls -l a b; … ({C} commands, {4 * C} words)": _at_limits("ls -l a b; ", C),
        f"git status && … ({C} commands)": _at_limits("git status && ", C - 1, "", "ls"),
        f"cd ../x && cat y; … ({C} commands)": _at_limits("cd ../x && cat y; ", C // 2),
        f"echo a a … ({W} words)": _at_limits(" a", W - 1, "echo"),
        f"cat ../a/b … ({W} paths)": _at_limits(" ../a/b", W - 1, "cat"),
        f"cat -x ../a/b … ({W} words)": _at_limits(" -x ../a/b", (W - 1) // 2, "cat"),
        # `{a,b}`: a word of three parts ({, a,b and }) that makes two words: 4 of the 1,024
        f"echo {{a,b}} … ({W} words and parts, expanded)": _at_limits(" {a,b}", (W - 1) // 4, "echo"),
        f"sudo env … sudo rm a; … ({MAX_RUNNERS} programs each, {MAX_PROGRAMS} in all)":
            _at_limits(_RUNNERS + " a; ", MAX_PROGRAMS // MAX_RUNNERS),
        f"sudo rm a; … ({MAX_PROGRAMS // 2} commands of 2 programs, {MAX_PROGRAMS} in all)":
            _at_limits("sudo rm a; ", C),
        f"sudo env … sudo rm a a … ({MAX_RUNNERS} programs, {W} words)": _at_limits(" a", W - _RUNNER_WORDS, _RUNNERS),
        f"sudo -E -E … rm ({W} words)": _at_limits(" -E", W - 2, "sudo", " rm"),
        f"find . -exec a x … \\; … ({MAX_RUNNERS - 1} -exec, {W} words)":
            _at_limits(" -exec a" + " x" * ((W - 2) // (MAX_RUNNERS - 1) - 3) + " \\;", MAX_RUNNERS - 1, "find ."),
        f"echo $(a) $(a) … ({C} substitutions)": _at_limits(" $(a)", C - 1, "echo"),
        f"bash -c 'a;a;…' ({C} commands nested)": _at_limits("a;", C - 2, "bash -c '", "'"),
        f"bash <<EOF a;a;… EOF ({C} commands on stdin)": _at_limits("a;", C - 2, "bash <<EOF\n", "\nEOF\n"),
        f"cat <<EOF a$(b) … EOF ({C} substitutions)": _at_limits("a$(b)\n", C - 2, "cat <<EOF\n", "EOF\n"),
        f"echo $((1+x)) … ({W} words and atoms)": _at_limits(" $((1+x))", (W - 1) // 4, "echo"),
        f"echo ${{x:-y}} … ({W} words and parts)": _at_limits(" ${x:-y}", (W - 1) // 2, "echo"),
        f"case x in a) b;; … esac ({C} commands)": _at_limits("a) b;; ", C - 1, "case x in ", "esac"),
        f"[[ -f a ]] && … ({C} tests)": _at_limits("[[ -f a ]] && ", C - 1, "", "ls"),
    }, alphabet="a $(){},;|&-x\"'=", prefix="echo "),
    Matcher("shell() parse", SHELL_POLICY, "Bash", "command", MAX_SHELL_TEXT, {
        "echo 'a[$(a[$(…'": lambda n: repeat("a[$(", n, "echo '", "'"),
        "echo a[$(a[$(…": lambda n: repeat("a[$(", n, "echo "),
        "echo ((((…": lambda n: repeat("(", n, "echo "),
        "echo $($($(…": lambda n: repeat("$(", n, "echo "),
        "a;a;a;… (simple commands)": lambda n: repeat("a;", n),
        "a|a|a|…": lambda n: repeat("a|", n, "", "a"),
        "ls -l a b; … (9,000 commands)": lambda n: repeat("ls -l a b; ", n),
        'echo "\\"\\"…': lambda n: repeat('"\\"', n, "echo "),
        "bash -c 'a;a;…'": lambda n: repeat("a;", n, "bash -c '", "'"),
        "eval ×7 'a;a;…' (nested parses)": _eval_chain,
        "a=$(a=$(…": lambda n: repeat("a=$(", n),
        "echo `a `a `…": lambda n: repeat("`a ", n, "echo "),
        # tree-sitter-bash's GLR parse kept two versions where its grammar declares a conflict
        # (a redirect beside a command substitution, `=`) and picked one by comparing their whole
        # subtrees: quadratic on a run of such conflicts in one statement (before shell() had a
        # parser of its own, dsl.subjects.bash)
        "echo `<]`<]… (conflicting versions compared whole)": lambda n: repeat("`<]", n, "echo "),
        "echo `a '#…` (one backquote's text, scanned for its end)": lambda n: repeat("'#", n, "echo `a ", "`"),
        "echo x >& '$(a)' >& '$(a)' … (words expanded twice)": lambda n: repeat(" >& '$(a)'", n, "echo x"),
        "time A=1 A=1 … a": lambda n: repeat("A=1 ", n, "time ", "a"),
        "echo )$(=}<)$(=}<…": lambda n: repeat(")$(=}<", n, "echo "),
        "echo {|a{|a… (a long pipeline)": lambda n: repeat("{|a", n, "echo "),
        "echo $($(…a)…) (balanced)": lambda n: _balanced("$(", "a", ")", n, "echo "),
        "( ( ( … a ) ) ) (subshells)": lambda n: _balanced("( ", "a", " )", n),
        "if a; then if a; then … fi; fi": lambda n: _balanced("if a; then ", "a", "; fi", n),
        # the fourth review's: runs read a character at a time, a template per escape, shlex
        "echo `echo \\\\…` (escaped backslashes in backquotes)": lambda n: repeat("\\\\", n, "echo `echo ", "`"),
        "echo ${x:-aaa…}": lambda n: repeat("a", n, "echo ${x:-", "}"),
        "echo ${x#***…}": lambda n: repeat("*", n, "echo ${x#", "}"),
        "echo ${x//aaa…/b}": lambda n: repeat("a", n, "echo ${x//", "/b}"),
        "a[111…]=1": lambda n: repeat("1", n, "a[", "]=1"),
        "env -S 'aaa…'": lambda n: repeat("a", n, "env -S '", "'"),
        "env -S '\\'a\\' …' (quotes and escapes)": lambda n: repeat("\\'a\\' ", n, "env -S '", "'"),
    }, alphabet="a[]$(`'\"{},.\\<\n ;|&#-=x", prefix="echo "),
    Matcher("brace expansion", SHELL_POLICY, "Bash", "command", MAX_SHELL_TEXT, {
        "echo {,,,…": lambda n: repeat("{,,,", n, "echo "),
        "echo {a,b}{a,b}…": lambda n: repeat("{a,b}", n, "echo "),
        "echo {a,{a,{a,…": lambda n: repeat("{a,", n, "echo "),
        "echo {1..9}{1..9}…": lambda n: repeat("{1..9}", n, "echo "),
        "echo '{a,b}'\"{\"…  (braces and quotes)": lambda n: repeat("'{a,b}'\"{\"", n, "echo "),
        "echo {a,b} {a,b} … (words)": lambda n: repeat("{a,b} ", n, "echo "),
    }, alphabet="{},.ab'\"\\$1 ", prefix="echo "),
    Matcher("heredocs", SHELL_POLICY, "Bash", "command", MAX_SHELL_TEXT, {
        "<<\"'<<\"'…": lambda n: repeat("<<\"'", n, "cat "),
        "cat <<A\\nx\\nA\\n …": lambda n: repeat("cat <<A\nx\nA\n", n),
        "cat <<EOF, 100 KB body": lambda n: repeat("a$(b)\n", n, "cat <<EOF\n", "\nEOF\n"),
        "bash <<EOF a;a;… EOF (a script on stdin)": lambda n: repeat("a;", n, "bash <<EOF\n", "\nEOF\n"),
        # an unquoted body fed to a reader is read twice: expanded, then as the reader's script
        "bash <<EOF '$(a)'$(a)… EOF (expanded, then read)": lambda n: repeat("'$(a)'$(a)", n, "bash <<EOF\n", "\nEOF\n"),
        "python3 <<EOF '$(a)\\$x… EOF": lambda n: repeat("'$(a)\\$x", n, "python3 <<EOF\n", "\nEOF\n"),
        '<<"\\\\\\n …': lambda n: repeat('<<"\\\\\n', n),
        "<<a\"$(<<\\\\\\n …": lambda n: repeat('<<a"$(<<\\\n', n),
    }, alphabet="<\"'\\\nEOFa$( -", prefix="cat "),
    Matcher("ANSI-C $'…'", SHELL_POLICY, "Bash", "command", MAX_SHELL_TEXT, {
        "echo $'\\x$'\\x…": lambda n: repeat("$'\\x", n, "echo "),
        "echo $'\\x41\\x41…'": lambda n: repeat("\\x41", n, "echo $'", "'"),
        "echo $'\\u72\\u72…'": lambda n: repeat("\\u72", n, "echo $'", "'"),
        "echo $'\\'$'\\'…": lambda n: repeat("$'\\'", n, "echo "),
        "$'\\x72'$'\\x6d' … (program spelled)": lambda n: repeat("$'\\x72'", n),
    }, alphabet="$'\\xuU0a7\" ", prefix="echo "),
    Matcher("wrappers and getopt", SHELL_POLICY, "Bash", "command", MAX_SHELL_TEXT, {
        "sudo A=1 A=1 … rm": lambda n: repeat("A=1 ", n, "sudo ", " rm"),
        "sudo -E -E … rm": lambda n: repeat("-E ", n, "sudo ", " rm"),
        "sudo -Z -Z … rm (unknown options)": lambda n: repeat("-Z ", n, "sudo ", " rm"),
        "sudo -Z1 -Y -X -W a a … (4 unknown, then operands)": lambda n: repeat(" a", n, "sudo -Z -Y -X -W rm"),
        "env -u a -u a … rm": lambda n: repeat("-u a ", n, "env ", " rm"),
        "timeout --zz --zz … (unknown long options)": lambda n: repeat("--zz ", n, "timeout ", " 1 rm"),
        "nice -n 1 … rm": lambda n: repeat("-n 1 ", n, "nice ", " rm"),
        "sudo env timeout nice … (wrappers)": lambda n: repeat("sudo env ", n, "", " rm"),
        "xargs -0 -0 … rm": lambda n: repeat("-0 ", n, "xargs ", " rm"),
        "git -c a=b -c a=b … push": lambda n: repeat("-c a=b ", n, "git ", " push"),
        "find . -exec a \\; … ": lambda n: repeat(" -exec a \\;", n, "find ."),
        "xargs xargs xargs … rm": lambda n: repeat("xargs ", n, "", " rm"),
        "find . -exec find . -exec … rm": lambda n: repeat("find . -exec ", n, "", " rm"),
    }, alphabet="-Z=Aa1 u-sudoenv", prefix="sudo ", suffix=" rm"),
    Matcher("path() and globs", '''default allow
deny Read when path(args.p) glob "/**/.git/**/config" reason "g"
deny Read when path(args.p) glob "/**/a/**/b/**/c/**/d" reason "a"
deny Read when path(args.p) glob "/**/*a*a*a*b" reason "b"
deny Read when path(args.p) under "/etc" reason "e"
''', "Read", "p", MAX_PATH_TEXT, {
        "/.git/.git/… (/**/.git/**/config)": lambda n: repeat("/.git", n),
        "/a/b/c/a/b/c/…": lambda n: repeat("/a/b/c", n),
        "/aaaa/aaaa/…": lambda n: repeat("/aaaa", n),
        "/aaaa…aaaa (one segment)": lambda n: repeat("a", n, "/"),
        "/../../…": lambda n: repeat("/..", n),
        "//./a//./a…": lambda n: repeat("//./a", n),
        "a/a/a/… (relative)": lambda n: repeat("a/", n - len("/w/"))[:-1] + "x",
    }, alphabet="/.a*?bcgit~", prefix="/"),
    Matcher("Windows paths", '''default allow
deny Read when path(args.p) glob "/**/.git/**/config" reason "g"
deny Read when path(args.p) glob "C:/**/a/**/b/**/c/**/d" reason "a"
deny Read when path(args.p) under "C:\\\\Windows" reason "w"
''', "Read", "p", MAX_PATH_TEXT, {
        "C:\\.git\\.git\\…": lambda n: repeat("\\.git", n, "C:"),
        "C:\\a\\b\\c\\…": lambda n: repeat("\\a\\b\\c", n, "C:"),
        "C:\\..\\..\\…": lambda n: repeat("\\..", n, "C:"),
        "\\\\server\\share\\a\\…": lambda n: repeat("\\a", n, "\\\\server\\share"),
        "a\\a\\… (relative, Windows cwd)": lambda n: repeat("a\\", n - 6)[:-1] + "x",
        "C:/a/b/…ΣΣ (case folding)": lambda n: repeat("/Σß", n, "C:"),
    }, alphabet="\\/.aC:ß?*", prefix="C:\\", context={"cwd": "C:\\w", "home": "C:\\Users\\u"}),
    Matcher("secrets list", '''default allow
deny Read when path(args.p).secret reason "s"
''', "Read", "p", MAX_PATH_TEXT, {
        "/.config/.config/…": lambda n: repeat("/.config", n),
        "/.local/share/.local/share/…": lambda n: repeat("/.local/share", n),
        "/proc/1/proc/1/…": lambda n: repeat("/proc/1", n),
        "/a/a/…/id_rsa": lambda n: repeat("/a", n, "", "/id_rsax"),
        "/library/library/…": lambda n: repeat("/library", n),
    }, alphabet="/.configlrsh_", prefix="/"),
    Matcher("glob patterns read for secrets", '''default allow
deny Glob when path(args.p, "/").glob_secret reason "s"
''', "Glob", "p", MAX_GLOB_PATTERN, {
        "{{{…a…}}} (nested braces)": lambda n: "{" * (n // 2) + "a" + "}" * (n // 2 - 1),
        "{a}{a}… (one-alternative groups)": lambda n: repeat("{a}", n, "/"),
        "{a,b}… then a long name": lambda n: repeat("x", n, "/" + "{a,b}" * 8),
        "/a/b/c/… (segments)": lambda n: repeat("/a/b/c", n),
        "/?a/?b/… (segments with metacharacters)": lambda n: repeat("/?a/?b/*c", n),
        "/[.]s[s]h… (classes)": lambda n: repeat("/[.]s[s]h", n),
    }, alphabet="{},*?[]!a./\\se", prefix="/"),
    Matcher("string glob", '''default allow
deny Str when args.s glob "*a*b*c*d*e" reason "s"
deny Str when args.s glob "a*a*a*a*b" reason "t"
deny Str when args.s glob "*[ab]?*[!c]*x" reason "u"
''', "Str", "s", MAX_STRING, {
        "aaaa…": lambda n: repeat("a", n),
        "abcdabcd…": lambda n: repeat("abcd", n),
        "abab…": lambda n: repeat("ab", n),
    }, alphabet="abcdex[]!?*\n"),
    Matcher("tool selector", '''default allow
deny mcp__*a*b*c*d*e reason "s"
deny *a*a*a*a*b reason "t"
''', "", "s", MAX_STRING, {
        "mcp__aaaa…": lambda n: repeat("a", n, "mcp__"),
        "mcp__abcdabcd…": lambda n: repeat("abcd", n, "mcp__"),
    }, alphabet="abcde_m", prefix="mcp__", tool_is_input=True),
    Matcher("contains / startswith", '''default allow
deny Str when args.s contains "needle" or args.s startswith "x" or args.s endswith "needle" reason "s"
deny Str when lower(args.s) contains "needlf" reason "t"
''', "Str", "s", MAX_STRING, {
        "needlneedl…": lambda n: repeat("needl", n),
        "nnnn…": lambda n: repeat("n", n),
        "NEEDLNEEDL… (lower)": lambda n: repeat("NEEDL", n),
    }, alphabet="nedlNEx"),
    Matcher("url()", '''default allow
deny Url when url(args.u).host endswith ".evil.example" reason "u"
deny Url when url(args.u).path startswith "/admin" reason "a"
''', "Url", "u", MAX_URL_TEXT, {
        "http://a.a.a.…": lambda n: repeat("a.", n, "http://"),
        "http://%41%41…": lambda n: repeat("%41", n, "http://"),
        "http://ｘ。ｘ。… (IDNA)": lambda n: repeat("ｘ。", n, "http://"),
        "http://@@@…": lambda n: repeat("@", n, "http://"),
        "http://a:a:a:…": lambda n: repeat("a:", n, "http://"),
        "http://[::[::…": lambda n: repeat("[::", n, "http://"),
        "http://a/../../…": lambda n: repeat("/..", n, "http://a"),
        "http://xn--a.xn--a.…": lambda n: repeat("xn--a.", n, "http://"),
    }, alphabet="a.%4@:[]/?#ｘ。-x", prefix="http://"),
]


def _call(m: Matcher, text: str) -> tuple[str, dict, dict]:
    if m.tool_is_input:
        return text, {}, m.context
    return m.tool, {m.key: text}, m.context


def _once(policy: Policy, call: tuple[str, dict, dict]) -> tuple[float, object]:
    """One decision with the caches emptied: (milliseconds, the Decision)."""
    clear_caches()
    gc.collect()
    start = time.perf_counter()
    decision = policy.evaluate(*call)
    return (time.perf_counter() - start) * 1000, decision


def time_input(policy: Policy, call: tuple[str, dict, dict], runs: int = RUNS) -> dict:
    """Best and max of `runs` decisions, in ms (fewer once they took a second together: the
    section must stay within minutes)."""
    times = []
    decision = None
    for _ in range(runs):
        ms, decision = _once(policy, call)
        times.append(ms)
        if sum(times) > 1000:
            break
    errors = [o.error for o in decision.outcomes if o.error is not None]
    return {
        "best_ms": round(min(times), 3),
        "max_ms": round(max(times), 3),
        "runs": len(times),
        "effect": decision.effect,
        "error": errors[0][:160] if errors else None,
    }


def time_sized(policy: Policy, m: Matcher, make: Callable[[int], str]) -> dict:
    """`time_input` of `make(m.size)`, reached from a twentieth of the size: when a tenth took
    over SUPERLINEAR_MS, the size grows (1/10, 1/5, 2/5, 4/5, all) only while the growth seen so
    far (`exponent`: time ~ size ** exponent, 1 linear, 2 quadratic) keeps the next decision under
    GROWTH_LIMIT_MS (tree-sitter-bash's error recovery, before shell() had a parser of its own,
    took minutes at the full size on some texts). `chars` is the size timed last, `full_size` whether it is the matcher's largest."""
    sizes = [m.size // 20, m.size // 10, m.size // 5, 2 * m.size // 5, 4 * m.size // 5, m.size]
    prev = time_input(policy, _call(m, make(sizes[0])), runs=1)["best_ms"]
    r = time_input(policy, _call(m, make(sizes[1])), runs=1)
    exponent = math.log(max(r["best_ms"], 1e-3) / max(prev, 1e-3), 2)
    at = 1
    if r["best_ms"] <= SUPERLINEAR_MS:
        at = len(sizes) - 1
    else:
        while at + 1 < len(sizes) and r["best_ms"] * (sizes[at + 1] / sizes[at]) ** max(exponent, 1) <= GROWTH_LIMIT_MS:
            at += 1
            t = time_input(policy, _call(m, make(sizes[at])), runs=1)
            exponent = math.log(max(t["best_ms"], 1e-3) / max(r["best_ms"], 1e-3), sizes[at] / sizes[at - 1])
            r = t
    if at == len(sizes) - 1 and r["runs"] == 1 and r["best_ms"] <= SUPERLINEAR_MS:
        r = time_input(policy, _call(m, make(sizes[at])))
    text = make(sizes[at])
    return {"chars": len(text), "full_size": sizes[at] == m.size, "exponent": round(exponent, 2), **r}


def _draw(rng: random.Random, alphabet: str) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))


def search(m: Matcher, policy: Policy, seconds: float, seed: int) -> dict:
    """Draw units until SEARCH_UNITS or `seconds`; each repeated to a tenth of the size and timed
    once; the CONFIRM slowest timed at the full size. The slowest of those, with its unit."""
    rng = random.Random(seed)
    began = time.perf_counter()
    deadline = began + seconds * 0.5  # the rest for the confirmation at full size
    screened: dict[str, float] = {}
    while len(screened) < SEARCH_UNITS and time.perf_counter() < deadline:
        unit = _draw(rng, m.alphabet)
        if unit in screened:
            continue
        ms, _ = _once(policy, _call(m, repeat(unit, m.size // 10, m.prefix, m.suffix)))
        screened[unit] = ms
    best = None
    for unit in sorted(screened, key=screened.get, reverse=True)[:CONFIRM]:
        r = time_sized(policy, m, lambda n, u=unit: repeat(u, n, m.prefix, m.suffix))
        if best is None or (not r["full_size"], r["best_ms"]) > (not best["full_size"], best["best_ms"]):
            best = {"unit": unit, "prefix": m.prefix, "suffix": m.suffix, **r}
    return {"units_tried": len(screened), "seed": seed, "seconds": round(time.perf_counter() - began, 1), "slowest": best}


def run(seed: int = 9, search_seconds: float = SEARCH_SECONDS) -> dict:
    """Every matcher of MATCHERS: each hand-written input and the random search's slowest."""
    out = {"target_ms": TARGET_MS, "runs": RUNS, "matchers": {}}
    share = search_seconds / len(MATCHERS)
    for i, m in enumerate(MATCHERS):
        policy = Policy.from_text(m.policy, f"worst-{i}.policy")
        policy.evaluate(*_call(m, repeat("a", 10, m.prefix, m.suffix)))  # the tool's plan, compiled once
        inputs = {}
        for label, make in m.inputs.items():
            assert len(make(m.size)) <= m.size, label
            inputs[label] = time_sized(policy, m, make)
        found = search(m, policy, share, seed + i)
        # an input not timed at the full size (superlinear) is worse than any that was
        worst_label = max(inputs, key=lambda k: (not inputs[k]["full_size"], inputs[k]["best_ms"]))
        slowest = max([inputs[worst_label]["best_ms"], found["slowest"]["best_ms"] if found["slowest"] else 0])
        out["matchers"][m.name] = {
            "policy": m.policy,
            "max_chars": m.size,
            "inputs": inputs,
            "worst_hand_written": worst_label,
            "search": found,
            "slowest_best_ms": slowest,
            "pass": slowest <= TARGET_MS,
        }
    return out


def _show(unit: str, prefix: str, suffix: str) -> str:
    text = repr(prefix + unit + unit)[1:-1] + "…" + repr(suffix)[1:-1]
    return text.replace("|", "\\|").replace("`", "'")


def table(results: dict) -> str:
    """A Markdown table: per matcher, the slowest hand-written input and the random search's
    slowest, size, best / max ms, and pass/fail against the target."""
    lines = [
        f"| matcher | slowest hand-written input (chars) | best / max ms | random search: slowest unit (units tried) | best / max ms | ≤ {results['target_ms']:.0f} ms |",
        "|---|---|---:|---|---:|---|",
    ]
    for name, e in results["matchers"].items():
        label = e["worst_hand_written"]
        h = e["inputs"][label]
        s = e["search"]["slowest"]
        refused = " (refused)" if h["error"] else ""
        partial = lambda r: "" if r["full_size"] else f", only {r['chars']:,} chars, time ~ size^{r['exponent']:.1f}"  # noqa: E731
        shown = "-" if s is None else (f"`{_show(s['unit'], s['prefix'], s['suffix'])}`{' (refused)' if s['error'] else ''}"
                                       f" ({e['search']['units_tried']}{partial(s)})")
        grown = "" if h["full_size"] else f": time ~ size^{h['exponent']:.1f}"
        stimes = "-" if s is None else f"{s['best_ms']:.1f} / {s['max_ms']:.1f}"
        lines.append(
            f"| {name} | {label.replace('|', chr(92) + '|')}{refused} ({h['chars']:,}{grown}) | {h['best_ms']:.1f} / {h['max_ms']:.1f} "
            f"| {shown} | {stimes} | {'PASS' if e['pass'] else 'FAIL'} |"
        )
    return "\n".join(lines)
