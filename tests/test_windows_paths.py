"""Windows paths in `path()` (dsl.subjects.winpaths): normalization as Win32 does it, comparison
case-insensitive in every operator, the known bypasses refused, and the specialized predicates,
the generic ones, the generated plans and explain all deciding alike."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from dsl import Policy, ast
from dsl.claude_import import hook_context
from dsl.compiler import Env, compile_condition_generic
from dsl.errors import PolicyError
from dsl.explain import explain, to_json
from dsl.parser import parse
from dsl.subjects import PathValue, WinPathValue, WinStr, make_path, path_glob, under
from dsl.subjects.winpaths import fold, is_normal
from dsl.values import EvalError

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("COUNTERSIGN_CORPUS", ROOT.parent / "shared" / "corpus"))
CWD = "C:\\Users\\me\\proj"


def text(raw, cwd=CWD, home="C:\\Users\\me") -> str:
    return str(make_path(raw, cwd, home))


# --- normalization ------------------------------------------------------------------------

NORMAL = [
    ("C:\\Users\\me\\proj\\app.py", "C:\\Users\\me\\proj\\app.py"),
    ("c:/Users/me/proj/app.py", "C:\\Users\\me\\proj\\app.py"),  # forward slashes, the drive upper-cased
    ("C:\\Users/me\\\\proj//app.py", "C:\\Users\\me\\proj\\app.py"),  # mixed and repeated separators
    ("C:\\Users\\me\\proj\\.\\src\\..\\app.py", "C:\\Users\\me\\proj\\app.py"),
    ("C:\\..\\..\\Windows", "C:\\Windows"),  # `..` never climbs above the drive
    ("C:\\", "C:\\"),
    ("C:/", "C:\\"),
    ("C:\\Users\\me\\.env.", "C:\\Users\\me\\.env"),  # the last segment loses trailing periods
    ("C:\\Users\\me\\.env . .", "C:\\Users\\me\\.env"),  # and spaces
    ("C:\\Users\\me.\\x", "C:\\Users\\me\\x"),  # any other segment one trailing period
    ("C:\\Users\\me\\.env.\\", "C:\\Users\\me\\.env"),
    ("\\\\server\\share\\dir\\f.txt", "\\\\server\\share\\dir\\f.txt"),
    ("//server/share/dir/f.txt", "\\\\server\\share\\dir\\f.txt"),
    ("\\\\server\\share\\..\\..\\x", "\\\\server\\share\\x"),  # nor above the share
    ("\\\\?\\C:\\Users\\me\\x", "C:\\Users\\me\\x"),
    ("\\\\?\\UNC\\server\\share\\x", "\\\\server\\share\\x"),
    ("\\\\.\\C:\\Users\\me\\..\\x", "C:\\Users\\x"),
    ("//./c:/Users/me/x.", "C:\\Users\\me\\x"),  # not exactly \\?\ or \\.\: normalized
    ("src\\app.py", "C:\\Users\\me\\proj\\src\\app.py"),  # relative, against the Windows cwd
    ("src/app.py", "C:\\Users\\me\\proj\\src\\app.py"),
    ("..\\other\\x", "C:\\Users\\me\\other\\x"),
    ("C:src\\x", "C:\\Users\\me\\proj\\src\\x"),  # drive-relative, on the cwd's drive
    ("\\Windows\\x", "C:\\Windows\\x"),  # rooted without a drive: the cwd's drive
    ("/Windows/x", "C:\\Windows\\x"),  # `/` under a Windows cwd is the same
    ("~\\.ssh\\id_rsa", "C:\\Users\\me\\.ssh\\id_rsa"),
    ("~/.ssh/id_rsa", "C:\\Users\\me\\.ssh\\id_rsa"),
    ("~", "C:\\Users\\me"),
    ("C:\\Users\\me\\...x", "C:\\Users\\me\\...x"),
]


@pytest.mark.parametrize("raw, expected", NORMAL)
def test_a_windows_path_normalizes_as_win32_does(raw, expected):
    value = make_path(raw, CWD, "C:\\Users\\me")
    assert type(value) is WinPathValue
    assert str(value) == expected


def test_a_rooted_path_under_a_unc_cwd_takes_the_share():
    assert text("\\x", cwd="\\\\srv\\share\\proj") == "\\\\srv\\share\\x"


def test_the_fields_of_a_windows_path():
    p = make_path("c:/Users/Me/Proj/App.Test.PY", None, None)
    assert (p.drive, p.parts, p.name, p.ext, p.style) == ("C:", ("Users", "Me", "Proj", "App.Test.PY"), "App.Test.PY", ".PY", "windows")
    assert str(p.parent) == "C:\\Users\\Me\\Proj"
    assert str(make_path("C:\\", None, None).parent) == "C:\\"
    unc = make_path("\\\\Srv\\Share\\d\\f", None, None)
    assert (unc.drive, unc.parts, str(unc.parent.parent)) == ("\\\\Srv\\Share", ("d", "f"), "\\\\Srv\\Share\\")


def test_a_posix_path_has_an_empty_drive_and_the_posix_style():
    p = make_path("/etc/passwd", None, None)
    assert type(p) is PathValue and (p.drive, p.style) == ("", "posix")


def test_without_a_windows_cwd_a_slash_path_stays_posix():
    assert type(make_path("/etc/x", None, None)) is PathValue
    assert type(make_path("/etc/x", "/home/u", None)) is PathValue


REFUSED = [
    ("C:\\p\\.env:secret", "alternate data stream"),
    ("C:\\p\\.env::$DATA", "shell expansion"),  # `$`, and a stream: refused either way
    ("C:\\p\\f.txt:s:$DATA", "shell expansion"),
    ("C:\\p\\f.txt:stream", "alternate data stream"),
    ("C:\\p\\NUL", "device"),
    ("C:\\p\\con.txt", "device"),
    ("C:\\p\\COM1", "device"),
    ("C:\\p\\lpt\u00b9", "device"),
    ("C:\\PROGRA~1\\x", "8.3 short name"),
    ("C:\\p\\GIT~1\\config", "8.3 short name"),
    ("C:\\p\\a*b", "does not allow"),
    ("C:\\p\\a?b", "does not allow"),
    ("C:\\p\\a|b", "does not allow"),
    ("C:\\p\\a<b", "does not allow"),
    ("C:\\p\\a\x01b", "does not allow"),
    ("C:\\p\\.ssh..\\id_rsa", "leaves open"),  # two trailing periods on a directory: not defined
    ("C:\\p\\.ssh \\id_rsa", "leaves open"),
    ("C:\\p\\.env \\", "leaves open"),
    ("C:\\p\\...", "only of periods"),
    ("C:\\p\\. .", "only of periods"),
    ("\\\\?\\C:\\p\\.env.", "not in normal form"),  # \\?\ is not normalized: `.env.` is another file
    ("\\\\?\\C:\\p\\..\\x", "not in normal form"),
    ("\\\\?\\C:\\p/x", "holding '/'"),
    ("\\\\.\\C:\\..\\pipe\\x", "device namespace"),
    ("\\\\.\\pipe\\x", "names a device"),
    ("\\\\.\\PhysicalDrive0", "names a device"),
    ("\\\\?\\Volume{b75e2c83-0000-0000-0000-602f00000000}\\x", "names a device"),
    ("\\\\?\\GLOBALROOT\\Device\\x", "names a device"),
    ("\\??\\C:\\x", "NT object path"),
    ("\\\\server", "without a server and a share"),
    ("\\\\\\server\\share", "without a server and a share"),  # a third leading separator: no server
    ("C:\\p\\%USERPROFILE%\\x", "%VARIABLE%"),
    ("C:\\p\\$env:HOME", "shell expansion"),
    ("D:x", "drive D:"),  # drive-relative on another drive: its cwd is not known
    ("C:\\p\\\x00", "NUL"),
]


@pytest.mark.parametrize("raw, message", REFUSED)
def test_what_windows_reads_otherwise_or_not_at_all_is_an_error(raw, message):
    with pytest.raises(EvalError, match=re.escape(message)):
        make_path(raw, CWD, None)


@pytest.mark.parametrize("raw, cwd, message", [
    ("\\x", None, "no context.cwd"),
    ("\\x", "/home/u", "not a Windows path"),
    ("C:x", "/home/u", "not a Windows path"),
    ("C:x", None, "no context.cwd"),
    ("~\\x", "/home/u", "no home"),
])
def test_a_windows_path_that_needs_a_windows_context_is_an_error_without_one(raw, cwd, message):
    with pytest.raises(EvalError, match=message):
        make_path(raw, cwd, None)


def test_a_tilde_path_needs_a_windows_home():
    with pytest.raises(EvalError, match="not a Windows path"):
        make_path("~\\x", CWD, "/home/u")


# --- comparison ---------------------------------------------------------------------------


def test_a_winstr_compares_case_insensitively_and_reads_slash_as_backslash():
    s = WinStr("C:\\Users\\Me")
    assert s == "c:/users/me" and "c:/users/me" == s and hash(s) == hash(WinStr("C:/USERS/ME"))
    assert s != "C:\\Users\\You"
    assert s.startswith("c:/USERS") and s.endswith("\\me") and "users" in s


def test_the_fold_maps_each_character_to_one_uppercase_character():
    assert fold("straße") == "STRAßE"  # no two-character mapping: NTFS keeps ß apart from SS
    assert fold("é/üı") == "É\\ÜI"


def test_under_compares_whole_segments_case_insensitively():
    base = make_path("C:\\Users\\Me\\Proj", None, None)
    assert under(make_path("c:/users/me/proj/src/x", None, None), base)
    assert under(make_path("C:\\USERS\\ME\\PROJ", None, None), base)
    assert not under(make_path("C:\\Users\\Me\\ProjX\\x", None, None), base)
    assert not under(make_path("D:\\Users\\Me\\Proj\\x", None, None), base)


def test_a_posix_path_is_never_under_or_equal_to_a_windows_path():
    win, posix = make_path("C:\\x", None, None), make_path("/x", None, None)
    assert not under(win, posix) and not under(posix, win)
    assert not under(make_path("C:\\x", None, None), make_path("/", None, None))
    assert win != posix


def decide(condition: str, args: dict, context: dict | None = None) -> str:
    """The effect of `deny t when CONDITION` (default allow), checking on the way that the
    specialized predicate, the generic one, the generated plan and explain agree."""
    text = f'policy "w"\ndefault allow\ndeny t when {condition} reason "no" id "r"\nallow t when {condition} id "a"'
    policy = Policy.from_text(text, "w.policy")
    context = {"cwd": CWD, "home": "C:\\Users\\me"} if context is None else context
    (node, _) = parse(policy.source_text).of_type(ast.Rule)
    generic = compile_condition_generic(node.condition)
    env = Env("t", args, context, home=policy.home)
    assert _outcome(policy.rules[0].test, env) == _outcome(generic, env) == _outcome(policy.rules[0].test, env._replace(memo={}))
    decision = policy.evaluate("t", args, context)
    explain(policy, "t", args, context)  # raises when the traced predicates tell another story
    if decision.effect == "deny":
        return "error" if any(o.error for o in decision.outcomes) else "deny"
    return decision.effect


def _outcome(fn, env):
    try:
        return ("value", fn(env))
    except EvalError as exc:
        return ("error", exc.message)


@pytest.mark.parametrize("condition, path", [
    ('path(args.p) == "C:\\\\Users\\\\me\\\\proj\\\\.env"', "c:/users/ME/proj/.ENV"),
    ('path(args.p) == "c:/users/me/proj/.env"', "C:\\Users\\me\\proj\\.env"),
    ('path(args.p) in ["C:\\\\x", "c:/users/me/proj/.env"]', ".ENV"),
    ('path(args.p) under "C:\\\\Users\\\\Me"', "c:\\users\\me\\x"),
    ('path(args.p) under "/Users/me"', "C:\\USERS\\ME\\x"),  # `/Users/me` on the cwd's drive
    ('path(args.p) under context.cwd', "SRC\\x.py"),
    ('path(args.p) under "/"', "C:\\Windows"),
    ('path(args.p) glob "/**/.env"', "C:\\p\\.ENV"),
    ('path(args.p) glob "**/.env"', "sub\\.Env"),
    ('path(args.p) glob "C:/Users/*/proj/*.ENV"', "c:\\users\\me\\proj\\x.env"),
    ('path(args.p) glob "/**/.ssh/**"', "\\\\srv\\share\\home\\.SSH\\id"),
    ('path(args.p) glob "~/.ssh/*"', "C:\\Users\\ME\\.SSH\\ID_RSA"),
    ('path(args.p) startswith "c:/users/me"', "C:\\Users\\Me\\x"),
    ('path(args.p) endswith ".ENV"', "C:\\Users\\Me\\x\\.env"),
    ('path(args.p).text contains "\\\\.ssh\\\\"', "C:\\Users\\Me\\.SSH\\x"),
    ('path(args.p).parts contains ".ssh"', "C:\\Users\\Me\\.SSH\\x"),
    ('path(args.p).name == ".env"', "C:\\p\\.ENV"),
    ('path(args.p).name in [".bashrc", ".env"]', "C:\\p\\.Env"),
    ('path(args.p).name glob ".env*"', "C:\\p\\.ENV.local"),
    ('path(args.p).ext in [".pem", ".key"]', "C:\\p\\id.PEM"),
    ('path(args.p).ext == ".pem"', "C:\\p\\id.PEM"),
    ('path(args.p).drive == "c:"', "C:\\p"),
    ('path(args.p).style == "windows"', "C:\\p"),
    ('any part in path(args.p).parts: part == ".git"', "C:\\p\\.GIT\\config"),
])
def test_every_operator_compares_windows_paths_case_insensitively(condition, path):
    assert decide(condition, {"p": path}) == "deny"


@pytest.mark.parametrize("condition, path", [
    ('path(args.p) under "C:\\\\Users\\\\Me"', "C:\\Users\\MeToo\\x"),
    ('path(args.p) under context.cwd', "..\\x"),
    ('path(args.p) under context.cwd', "D:\\Users\\me\\proj\\x"),
    ('path(args.p) glob "C:/**/.env"', "D:\\p\\.env"),
    ('path(args.p) glob "/**/.env"', "C:\\p\\.envx"),
    ('path(args.p) == "/Users/me/proj/.env"', "C:\\Users\\me\\proj\\.env"),  # a string is not re-read
    ('path(args.p).name == ".env"', "C:\\p\\.env2"),
])
def test_a_windows_path_that_differs_does_not_match(condition, path):
    assert decide(condition, {"p": path}) == "allow"


SECRETS = ('path(args.p) glob "/**/.env" or path(args.p).name == ".env" '
           'or path(args.p).parts contains ".ssh" or path(args.p).ext in [".pem"]')


@pytest.mark.parametrize("path", [
    "C:\\p\\.env", "C:\\p\\.ENV", "C:\\p\\.env.", "C:\\p\\.env ", "C:\\p\\.env. . ", "c:/p/.env", "C:/p\\sub/..\\.env",
    "\\\\?\\C:\\p\\.env", "\\\\.\\C:\\p\\.env", "\\\\.\\UNC\\srv\\sh\\.env", "C:\\..\\..\\p\\.env", "\\p\\.env", ".env",
    "C:\\Users\\me\\.SSH.\\id_rsa", "C:\\p\\KEY.Pem.",
])
def test_a_rule_on_a_secret_is_not_bypassed_by_windows_spellings(path):
    assert decide(SECRETS, {"p": path}) == "deny"


@pytest.mark.parametrize("path", [
    "C:\\p\\.env:x", "C:\\p\\.env::$DATA", "\\\\?\\C:\\p\\.env.", "\\\\?\\C:\\p\\.env ", "C:\\p\\DOTENV~1",
    "C:\\Users\\me\\SSH~1\\id_rsa", "C:\\Users\\me\\.ssh..\\id_rsa", "\\\\.\\C:\\..\\p\\.env",
])
def test_a_spelling_windows_reads_otherwise_fails_closed(path):
    assert decide(SECRETS, {"p": path}) == "error"


def test_an_allow_under_the_cwd_holds_for_a_windows_project():
    policy = Policy.from_text('default ask\nallow Edit when path(args.file_path) under context.cwd', "e.policy")
    ctx = {"cwd": "C:\\Users\\me\\Proj"}
    assert policy.evaluate("Edit", {"file_path": "c:/users/me/proj/src/a.ts"}, ctx).effect == "allow"
    assert policy.evaluate("Edit", {"file_path": "C:\\Users\\me\\Proj2\\a.ts"}, ctx).effect == "ask"
    assert policy.evaluate("Edit", {"file_path": "C:\\Users\\me\\Proj\\a.ts:evil"}, ctx).effect == "ask"
    assert policy.evaluate("Edit", {"file_path": "/Users/me/Proj/a.ts"}, ctx).effect == "allow"  # C:\Users\...
    assert policy.evaluate("Edit", {"file_path": "/Users/me/Proj/a.ts"}, {"cwd": "/Users/me/Proj"}).effect == "allow"


def test_a_plan_reads_a_slash_path_under_a_windows_cwd_as_windows():
    # `under "/etc"` and `glob "/**/x"` are written inline in the generated plan for POSIX paths
    policy = Policy.from_text('default allow\ndeny t when path(args.p) under "/etc" reason "no"\n'
                              'deny t when path(args.p) glob "/**/.env" reason "no"', "p.policy")
    assert policy.evaluate("t", {"p": "/ETC/passwd"}, {"cwd": "C:\\x"}).effect == "deny"
    assert policy.evaluate("t", {"p": "/x/.ENV"}, {"cwd": "C:\\x"}).effect == "deny"
    assert policy.evaluate("t", {"p": "/ETC/passwd"}, {"cwd": "/x"}).effect == "allow"


def test_a_windows_path_explains_as_a_path_with_its_style():
    assert to_json(make_path("c:/x", None, None)) == {"kind": "path", "style": "windows", "text": "C:\\x"}
    policy = Policy.from_text('default allow\ndeny t when path(args.p).name == ".env" reason "no"', "x.policy")
    out = explain(policy, "t", {"p": "C:\\p\\.ENV."}, {})
    assert out.effect == "deny"


# --- the checker ----------------------------------------------------------------------------


def test_the_checker_knows_the_drive_and_style_fields():
    Policy.from_text('allow t when path(args.p).drive == "C:" and path(args.p).style == "windows"')
    with pytest.raises(PolicyError, match="no field"):
        Policy.from_text('allow t when path(args.p).volume == "C:"')


def test_a_normalized_windows_literal_is_not_warned_and_an_unnormalized_one_is():
    ok = Policy.from_text('deny t when path(args.p) == "C:\\\\Users\\\\me\\\\.env" reason "r"')
    assert not [d for d in ok.warnings if "never true" in d.message]
    bad = Policy.from_text('deny t when path(args.p) == "C:\\\\Users\\\\..\\\\.env." reason "r"')
    assert [d for d in bad.warnings if "never true" in d.message and "Windows" in d.message]


def test_is_normal_accepts_case_and_slash_variants_only():
    assert is_normal("c:/Users/me") and is_normal("C:\\") and is_normal("\\\\srv\\share\\x")
    assert not is_normal("C:\\x\\") and not is_normal("C:\\x\\..\\y") and not is_normal("C:x")


# --- properties -------------------------------------------------------------------------------

_SEGMENT = st.one_of(
    st.sampled_from([".", "..", "", "a", "B", ".env", ".ENV.", "x ", "ß", "İ", "Proj", "dir.", "n.tar.gz"]),
    st.text(st.characters(blacklist_characters='\\/:*?"<>|$`%~', blacklist_categories=("Cs", "Cc")), min_size=1, max_size=5),
)
_ROOTS = st.sampled_from(["C:\\", "c:/", "D:\\", "\\\\srv\\share\\", "//SRV/Share/", "\\\\?\\C:\\", "\\\\.\\C:\\", "\\", "", "~\\"])


@st.composite
def windows_paths(draw) -> str:
    return draw(_ROOTS) + draw(st.sampled_from(["\\", "/"])).join(draw(st.lists(_SEGMENT, max_size=6)))


def _made(raw: str):
    try:
        return make_path(raw, CWD, "C:\\Users\\me")
    except EvalError:
        return None


@settings(max_examples=400, deadline=None)
@given(windows_paths())
def test_normalization_is_idempotent(raw):
    value = _made(raw)
    if value is None:
        return
    again = make_path(str(value), None, None)
    assert str(again) == str(value) and again.key == value.key
    assert is_normal(str(value))


def _reference_under(p: str, b: str) -> bool:
    """`under` from the texts alone: the folded text equals the base's, or extends it by `\\`."""
    fp, fb = fold(p), fold(b)
    return fp == fb or fp.startswith(fb if fb.endswith("\\") else fb + "\\")


@settings(max_examples=400, deadline=None)
@given(windows_paths(), windows_paths())
def test_under_agrees_with_a_reference_on_the_texts(a, b):
    p, q = _made(a), _made(b)
    if p is None or q is None:
        return
    assert under(p, q) == _reference_under(str(p), str(q))


@settings(max_examples=200, deadline=None)
@given(windows_paths())
def test_a_path_globs_its_own_text_in_another_case_and_every_root_double_star(raw):
    value = _made(raw)
    if value is None:
        return
    assert path_glob(value, "/**", None, None)
    pattern = str(value).lower()
    if fold(pattern) == fold(str(value)):
        assert path_glob(value, pattern, None, None)


# --- the corpus -----------------------------------------------------------------------------

WINDOWS = re.compile(r"^[A-Za-z]:|\\")


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the shared corpus is not at {CORPUS}")
def test_the_corpus_windows_payloads_are_decided_without_a_path_error():
    policy = Policy.load(ROOT / "samples" / "coding-agent.policy")
    seen, errors, effects = 0, [], {}
    with open(CORPUS / "claude_code_pretooluse_payloads.jsonl", encoding="utf-8") as handle:
        for line in handle:
            payload = json.loads(line)["payload"]
            args, cwd = payload.get("tool_input"), payload.get("cwd")
            if not isinstance(args, dict) or not isinstance(cwd, str) or not WINDOWS.search(cwd):
                continue
            seen += 1
            decision = policy.evaluate(payload.get("tool_name") or "", args, hook_context(payload))
            effects[decision.effect] = effects.get(decision.effect, 0) + 1
            # the refusals this kind replaced: a Windows cwd or path read as a bad POSIX one. (A word
            # of a command that is no Windows path, such as a URL curl fetches, is still refused
            # when a rule asks for it as a path: that fails closed, as it should.)
            errors += [o.error for o in decision.outcomes if o.error and ("POSIX" in o.error or "context.cwd" in o.error)]
    assert seen > 1000
    assert errors == []
    assert effects.get("allow", 0) > seen // 2  # reads and edits inside the project are allowed


@settings(max_examples=300, deadline=None)
@given(windows_paths())
def test_the_fast_reading_of_a_normal_path_agrees_with_the_segment_by_segment_one(raw):
    from dsl.subjects import winpaths

    try:
        drive, parts = winpaths._parse(raw, CWD, "C:\\Users\\me", "the path", pattern=False)
    except EvalError:
        with pytest.raises(EvalError):
            winpaths.make_windows_path(raw, CWD, "C:\\Users\\me")
        return
    value = winpaths.make_windows_path(raw, CWD, "C:\\Users\\me")
    assert (str(value.drive), tuple(map(str, value.parts))) == (drive, tuple(parts))
    assert value.key == (fold(drive), *map(fold, parts))
    assert make_path(raw, CWD, "C:\\Users\\me") is not None  # and again, from the cache


def test_a_windows_path_value_is_immutable():
    value = make_path("C:\\x", None, None)
    with pytest.raises(AttributeError):
        value.text = "D:\\y"


@pytest.mark.parametrize("unit", ["a", "a.", "a ", "\\..", "\\a", "%a", "a~1", "/a.", "\\con", "a:", "\\\\?\\"])
def test_reading_a_windows_path_is_linear_in_its_length(unit):
    """Time at 100 KB over time at 10 KB stays under 20 (a ratio within one run, not a clock)."""
    import time

    def cost(n: int) -> float:
        raw = "C:\\" + unit * (n // len(unit))
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            try:
                make_path(raw, CWD, None)
            except EvalError:
                pass
            best = min(best, time.perf_counter() - start)
        return best

    assert cost(100_000) / max(cost(10_000), 1e-7) <= 20


# --- the whole-text readings agree with the segment-by-segment ones -------------------------------
#
# For a long path the reading looks for what a name may not hold, a reserved device name, a
# short name, and what needs trimming or resolving in the whole text at once (a few scans in C),
# and reads segment by segment only what they find. The references below read every segment.

def _segments_one_by_one(pieces, base, raw, what, clamp):
    """winpaths._segments as it was: each piece through `_name` with every check."""
    from dsl.subjects import winpaths

    out = list(base)
    ends_open = not raw.endswith(("\\", "/"))
    for i, piece in enumerate(pieces):
        if piece in ("", "."):
            continue
        if piece == "..":
            if out:
                out.pop()
            elif not clamp:
                raise EvalError(f"{what} {raw!r} climbs above its volume into the device namespace")
            continue
        out.append(winpaths._name(piece, i == len(pieces) - 1 and ends_open, raw, what))
    return out


_PIECE = st.one_of(
    st.sampled_from(["", ".", "..", "...", "a", "a.", "a..", "a. ", "a .", " ", ". .", "x ", "ß", "Σß", "CON", "con.txt", "COM1",
                     "CONIN$", "CONIN$.", "nul .x", "LPT¹", "AB~1", "AB~1.", "PROGRA~1.TXT", "~1", "a~b", "a:b", "a*b", "a?", "é.",
                     "\U0001F600", "\U00010428", "ﬀ", "İ"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\\/"), min_size=1, max_size=4),
)


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except EvalError as exc:
        return ("error", exc.message)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PIECE, max_size=8), st.booleans(), st.booleans())
def test_reading_the_segments_at_once_agrees_with_reading_them_one_by_one(pieces, trailing, clamp):
    from dsl.subjects import winpaths

    raw = "C:\\" + "\\".join(pieces) + ("\\" if trailing else "")
    got = _outcome(winpaths._segments, list(pieces), ["Users"], raw, "the path", False, clamp)
    assert got == _outcome(_segments_one_by_one, list(pieces), ["Users"], raw, "the path", clamp), raw


@settings(max_examples=1500, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
def test_folding_by_upper_agrees_with_the_table_of_simple_mappings(text):
    from dsl.subjects import winpaths

    assert winpaths.fold(text) == winpaths._fold_by_table(text)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PIECE, min_size=1, max_size=6), st.sampled_from(["C:\\", "c:/", "C:\\\\", "C:/\\"]), st.sampled_from(["", "\\", "/", "\\/"]),
       st.sampled_from(["\\", "/", "\\\\", "/\\/", "//"]))
def test_a_drive_path_read_at_once_is_the_one_read_segment_by_segment(pieces, root, end, sep):
    """The fast reading of `C:\\a\\b` (no cwd, no `..`: nothing but checks, separators in a row
    read as one) gives what `_parse` gives segment by segment, its refusal included."""
    from dsl.subjects import winpaths

    raw = root + sep.join(pieces) + end
    if "$" in raw or "`" in raw or "%" in raw:
        return
    fast = _outcome(lambda: (lambda v: (str(v.drive), list(v._names), v.key))(winpaths.make_windows_path(raw, None, None)))

    def one_by_one():
        drive, parts = winpaths._parse(raw, None, None, "the path", pattern=False, plain_tried=True)  # _segments
        keys = winpaths.fold("\\".join(parts)).split("\\") if parts else []
        return drive, parts, (winpaths.fold(drive), *keys)

    slow = _outcome(lambda: (lambda d, p, k: (d, p, k))(*one_by_one()))
    assert fast == slow, raw
