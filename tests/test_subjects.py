"""Normalized subjects: path(), shell() and url() mean what a person reading the call means, and
anything they cannot understand is an error (which fails closed), never a crash."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsl.subjects import Command, PathValue, make_path, parse_shell, parse_url, path_glob, under
from dsl.values import EvalError

FAST = settings(max_examples=300, deadline=None)


def programs(text: str) -> list[str]:
    return [c.program for c in parse_shell(text)]


def only(text: str) -> Command:
    (command,) = parse_shell(text)
    return command


# --- shell ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["rm -rf /", "rm -fr /", "rm -r -f /", "rm -f -r /", "rm --recursive --force /", "rm -R --force /", "rm --force -r /"],
)
def test_every_spelling_of_recursive_force_gives_one_flag_set(text):
    assert set(only(text).flags) == {"r", "R", "recursive", "f", "force"}
    assert only(text).args == ("/",)


@pytest.mark.parametrize(
    "text, wrappers",
    [
        ("timeout 5 rm -rf /", ("timeout",)),
        ("sudo rm -rf /", ("sudo",)),
        ("sudo -u root -- rm -rf /", ("sudo",)),
        ("nice -n 10 nohup rm -rf /", ("nice", "nohup")),
        ("env -i PATH=/bin rm -rf /", ("env",)),
        ("command rm -rf /", ("command",)),
        ("timeout -s KILL 5 sudo env A=1 rm -rf /", ("timeout", "sudo", "env")),
    ],
)
def test_wrappers_are_unwrapped_to_the_command_they_run(text, wrappers):
    command = only(text)
    assert (command.program, command.args, command.wrappers) == ("rm", ("/",), wrappers)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("cd /tmp && rm -rf /", ["cd", "rm"]),
        ("echo x; rm -rf /", ["echo", "rm"]),
        ("false || rm -rf /", ["false", "rm"]),
        ("ls | grep x | wc -l", ["ls", "grep", "wc"]),
        ("ls\nrm -rf /", ["ls", "rm"]),
        ("if true; then rm -rf /; fi", ["true", "rm"]),
        ("for f in *; do rm $f; done", ["rm"]),
        ("(cd x && make)", ["cd", "make"]),
    ],
)
def test_lists_pipelines_and_compound_statements_are_split_into_commands(text, expected):
    assert programs(text) == expected


@pytest.mark.parametrize(
    "text, nested",
    [
        ('echo "$(rm -rf /)"', "rm"),
        ("echo `rm -rf /`", "rm"),
        ("bash -c 'rm -rf /'", "rm"),
        ("sh -c \"cd /; rm -rf /\"", "rm"),
        ("bash -lc 'rm -rf /'", "rm"),
        ("eval 'rm -rf /'", "rm"),
        ("find . | xargs rm -rf", "rm"),
        ("cat <<'EOF' | sh\nrm -rf /\nEOF\n", "rm"),
        ('export T="$(cat ~/.config/app/token)"', "cat"),
        ("diff <(ls a) <(ls b)", "ls"),
    ],
)
def test_commands_nested_in_substitutions_shells_eval_xargs_and_heredocs_are_found(text, nested):
    found = [c for c in parse_shell(text) if c.program == nested]
    assert found and all(c.nested for c in found)


def test_a_heredoc_piped_into_a_shell_yields_the_shell_command():
    assert "sh" in programs("cat <<'EOF' | sh\necho hi\nEOF\n")


def test_exact_and_prefix_matching_are_distinct():
    assert only("find").argv == ("find",)
    assert only("find . -name x").argv[:1] == ("find",) and only("find . -name x").argv != ("find",)


def test_quotes_and_escapes_are_removed_from_words():
    assert only("r\\m '-rf' \"/\"").argv == ("rm", "-rf", "/")
    assert only("echo $'a\\tb'").args == ("a\tb",)


def test_expansions_are_kept_as_written_and_marked_dynamic():
    command = only("rm -rf $HOME/*")
    assert command.dynamic and command.args == ("$HOME/*",)
    assert not only("rm -rf build").dynamic


def test_redirect_targets_are_recorded():
    assert only("echo x > /etc/passwd 2>&1").redirects == ("/etc/passwd",)
    assert only("sort < in.txt >> out.txt").redirects == ("in.txt", "out.txt")


@pytest.mark.parametrize("text", ["ls 'unterminated", "echo $((", "a && && b", "if then fi", "echo )"])
def test_text_that_is_not_valid_shell_is_an_error(text):
    with pytest.raises(EvalError, match="not valid shell syntax"):
        parse_shell(text)


def test_a_script_known_only_at_run_time_is_an_error():
    with pytest.raises(EvalError):
        parse_shell('bash -c "$SCRIPT"')
    with pytest.raises(EvalError):
        parse_shell("eval $CMD")


@FAST
@given(st.text(max_size=80))
@example("0<0")  # no program: only a redirection (bash opens file "0" for reading and runs nothing)
def test_any_text_is_commands_or_an_error(text):
    try:
        commands = parse_shell(text)
    except EvalError:
        return
    for c in commands:
        assert isinstance(c, Command) and c.program == c.path.rsplit("/", 1)[-1]
        if c.program == "" and not c.argv:  # a statement that only assigns, or only redirects (`> f` truncates f)
            assert c.assignments or c.redirects
            continue
        assert c.argv[0] == c.path and set(c.args) <= set(c.argv[1:])


@FAST
@given(st.lists(st.sampled_from(["rm", "-r", "-f", "-rf", "--force", "x", "'a b'", ";", "&&", "|", "sudo", "$(ls)", "bash -c 'ls'"]), max_size=10))
def test_shell_token_soup_never_crashes(tokens):
    try:
        parse_shell(" ".join(tokens))
    except EvalError:
        pass


# --- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, cwd, home, expected",
    [
        ("/a/b/../c/./d", None, None, "/a/c/d"),
        ("//a///b/", None, None, "/a/b"),
        ("/..", None, None, "/"),
        (".env", "/home/u/proj", None, "/home/u/proj/.env"),
        ("../x", "/home/u/proj", None, "/home/u/x"),
        ("~/.ssh/id_rsa", None, "/home/u", "/home/u/.ssh/id_rsa"),
        ("~", None, "/home/u", "/home/u"),
    ],
)
def test_paths_are_made_absolute_and_resolved_lexically(raw, cwd, home, expected):
    assert make_path(raw, cwd, home).text == expected


@pytest.mark.parametrize(
    "raw, cwd, home, message",
    [
        ("rel/x", None, None, "no context.cwd"),
        ("~/x", None, None, "no home is known"),
        ("~bob/x", None, "/home/u", "another user's home"),
        ("$HOME/x", "/", None, "shell expansion"),
        ("src\\x", "/", None, "not a POSIX path"),  # a backslash under a POSIX cwd (C:\\x is Windows)
        ("", "/", None, "empty"),
        (3, "/", None, "must be a string"),
    ],
)
def test_a_path_that_cannot_be_resolved_is_an_error(raw, cwd, home, message):
    with pytest.raises(EvalError, match=message):
        make_path(raw, cwd, home)


def test_containment_is_by_segment_not_by_string_prefix():
    proj = make_path("/home/u/proj", None, None)
    assert under(make_path("/home/u/proj/a/b", None, None), proj)
    assert under(proj, proj)
    assert not under(make_path("/home/u/projX", None, None), proj)
    assert not under(make_path("/home/u/proj/../other", None, None), proj)


@pytest.mark.parametrize(
    "path, pattern, matches",
    [
        ("/dev/sda", "/dev/**", True),
        ("/dev/disk/by-id/x", "/dev/**", True),
        ("/home/u/dev/app.py", "/dev/**", False),
        ("/etc/passwd", "/etc/*", True),
        ("/etc/ssh/sshd_config", "/etc/*", False),
        ("/home/u/proj/.env", ".env", True),
        ("/home/u/proj/sub/.env", ".env", False),
        ("/home/u/proj/sub/.env", "**/.env", True),
        ("/home/u/.ssh/id_rsa", "~/.ssh/*", True),
        ("/home/u/proj/a.pyc", "*.pyc", True),
    ],
)
def test_path_globs_match_segments(path, pattern, matches):
    assert path_glob(PathValue(path), pattern, "/home/u/proj", "/home/u") is matches


@FAST
@given(st.lists(st.sampled_from(["a", "b", ".", "..", "", "c.txt"]), max_size=8))
def test_normalized_paths_are_absolute_without_dot_segments(parts):
    p = make_path("/".join(parts) or ".", "/base/dir", None)
    assert p.text.startswith("/")
    assert not set(p.parts) & {".", ".."}
    assert make_path(p.text, None, None) == p  # normalizing twice changes nothing


# --- urls -------------------------------------------------------------------------------------


def test_a_url_host_is_lowercased_idna_encoded_and_loses_its_trailing_dot():
    u = parse_url("HTTPS://User:pw@Bücher.Example.COM.:8443/a?q=1#f")
    assert (u.scheme, u.host, u.port, u.path, u.query, u.fragment, u.userinfo) == (
        "https", "xn--bcher-kva.example.com", 8443, "/a", "q=1", "f", "User:pw")


def test_userinfo_is_never_mistaken_for_the_host():
    assert parse_url("https://example.com@evil.com/").host == "evil.com"


@pytest.mark.parametrize("text", ["example.com", "mailto:x@y", "https://", "https://a.com:99999/", "https://evil.com\\@good.com", "https://a b.com", "https://[::1/"])
def test_what_is_not_a_clear_absolute_url_is_an_error(text):
    with pytest.raises(EvalError):
        parse_url(text)


@FAST
@given(st.text(max_size=60))
def test_any_text_is_a_url_or_an_error(text):
    try:
        u = parse_url(text)
    except EvalError:
        return
    assert u.host and u.host == u.host.lower() and not u.host.endswith(".")


def test_shell_parsing_from_many_threads_gives_the_same_commands():
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"cd /tmp/{i} && rm -rf build{i} | tee log{i}; echo $(date) {i}" for i in range(200)]
    expected = [[c.argv for c in parse_shell(t)] for t in texts]
    parse_shell.__globals__["clear_shell_cache"]()
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda t: [c.argv for c in parse_shell(t)], texts))
    assert got == expected


def test_a_statement_that_only_assigns_is_listed_so_an_all_rule_sees_it():
    commands = parse_shell("PATH=/tmp/evil; ls")
    assert [(c.program, c.assignments) for c in commands] == [("", ("PATH=/tmp/evil",)), ("ls", ())]


def test_a_redirection_written_after_a_heredoc_belongs_to_the_command():
    assert only("cat <<EOF > out.txt\nhello\nEOF\n").redirects == ("out.txt",)


@pytest.mark.parametrize("text, inner", [("find . -exec rm -rf {} \\;", "rm"), ("find . -execdir sh -c 'x' +", "sh"), ("watch -n 5 rm -rf /tmp/x", "rm")])
def test_find_exec_and_watch_run_nested_commands(text, inner):
    assert any(c.program == inner and c.nested for c in parse_shell(text))


def test_the_root_matches_a_pattern_of_any_depth():
    assert path_glob(PathValue("/"), "/**", None, None)
    assert not path_glob(PathValue("/a"), "/", None, None)


def test_characters_that_crash_tree_sitter_bash_are_parsed_safely():
    """tree-sitter-bash's scanner reads out of bounds on some characters outside the BMP ('{'
    followed by U+108712 crashed the whole process). Run in a child process so that a crash fails
    this test instead of the test run."""
    import subprocess
    import sys

    code = (
        "from dsl.subjects import parse_shell\n"
        "from dsl.values import EvalError\n"
        "for cp in list(range(0x50000, 0x50400)) + list(range(0x108700, 0x108800)) + list(range(0xE0000, 0xE0100)):\n"
        "    for text in ('{' + chr(cp), '~:{' + chr(cp) + 'x', 'echo ' + chr(cp)):\n"
        "        try:\n"
        "            parse_shell(text)\n"
        "        except EvalError:\n"
        "            pass\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-500:]
    assert [c.argv for c in parse_shell("echo 'héllo' 日本語 {\U00108712")] == [("echo", "héllo", "日本語", "{\U00108712")]


# --- from a hostile review: what bash does that a parser alone misses ---------------------------


@pytest.mark.parametrize(
    "text, joined",
    [
        ("r\\\nm -rf /", "rm -rf /"),
        ("docker run \\\n  -v x img", "docker run   -v x img"),
        ('echo "a\\\nb"', 'echo "ab"'),
        ("echo 'a\\\nb'", "echo 'a\\\nb'"),  # single quotes keep it
        ("echo $'a\\\nb'", "echo $'a\\\nb'"),
        ("ls # a\\\nrm x", "ls # a\\\nrm x"),  # a comment ends at the newline
        ("cat <<'E'\nx\\\ny\nE\nr\\\nm", "cat <<'E'\nx\\\ny\nE\nrm"),  # a heredoc body is kept
        ("echo $(a\\\nb)", "echo $(ab)"),
        ("plain text", "plain text"),
    ],
)
def test_line_continuations_are_joined_where_bash_joins_them(text, joined):
    from dsl.subjects import splice_continuations

    assert splice_continuations(text) == joined


def test_a_continuation_inside_quoting_that_does_not_close_fails_closed():
    from dsl.subjects import splice_continuations

    with pytest.raises(EvalError):
        splice_continuations("echo 'open\\\nrm")


@pytest.mark.parametrize(
    "url, host",
    [
        ("http://2852039166/", "169.254.169.254"),
        ("http://0xa9fea9fe/", "169.254.169.254"),
        ("http://0251.0376.0251.0376/", "169.254.169.254"),
        ("http://169.254.43518/", "169.254.169.254"),
        ("http://127.1/", "127.0.0.1"),
        ("http://[::ffff:a9fe:a9fe]/", "169.254.169.254"),
        ("http://[2001:DB8:0::1]/", "2001:db8::1"),
        ("https://evil.com\u3002/", "evil.com"),
        ("https://EVIL.com./", "evil.com"),
        ("https://b\u00fccher.de/", "xn--bcher-kva.de"),
    ],
)
def test_url_hosts_are_read_as_fetchers_resolve_them(url, host):
    assert parse_url(url).host == host


@pytest.mark.parametrize("url", ["http://256.1.1.1/", "http://1.2.3.4.5/", "http://09/", "http://a.b.1/", "http://[::g]/"])
def test_hosts_no_fetcher_reads_are_errors(url):
    with pytest.raises(EvalError):
        parse_url(url)


@pytest.mark.parametrize(
    "text, value",
    [("\\u72m", "rm"), ("\\x72\\x6d", "rm"), ("\\162m", "rm"), ("a\\tb", "a\tb"), ("\\cA", "\x01"), ("\\q", "\\q"), ("\\U1F600", "\U0001F600")],
)
def test_ansi_c_strings_decode_as_bash_does(text, value):
    from dsl.subjects.quoting import _ansi_c

    assert _ansi_c(text) == value


@pytest.mark.parametrize(
    "word, words",
    [
        ("r{m,}", ["rm", "r"]),
        ("f{1..3}", ["f1", "f2", "f3"]),
        ("{3..1}", ["3", "2", "1"]),
        ("{a..e..2}", ["a", "c", "e"]),
        ("x{a,b{c,d}}y", ["xay", "xbcy", "xbdy"]),
        ("{x}", ["{x}"]),
        ("a{}b", ["a{}b"]),
        ("src/{a,b}/{c,d}", ["src/a/c", "src/a/d", "src/b/c", "src/b/d"]),
    ],
)
def test_brace_expansion_gives_the_words_bash_gives(word, words):
    from dsl.subjects import brace_expand

    assert brace_expand(word) == words


def test_a_brace_expansion_past_its_limit_is_an_error():
    from dsl.subjects import brace_expand

    with pytest.raises(EvalError):
        brace_expand("{1..100000}")
    with pytest.raises(EvalError):
        brace_expand("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")


def test_a_refused_path_is_refused_again_with_the_same_message_from_the_cache():
    from dsl.subjects import paths

    paths.clear_path_cache()
    messages = []
    for _ in range(2):
        with pytest.raises(EvalError) as caught:
            make_path("~/.bashrc", "/home/u/proj", None)
        messages.append(caught.value.message)
    assert messages[0] == messages[1] and "no home is known" in messages[0]
    assert paths._PATH_CACHE.bytes > 0  # kept, and counted against the cache's budget
    assert make_path("~/.bashrc", "/home/u/proj", "/home/u").text == "/home/u/.bashrc"  # another key


def test_the_secrets_tables_answers_are_the_same_when_kept():
    from dsl.subjects import secrets

    patterns = ["*.py", "**/*.ts", "*.[p]em", "{.ssh,x}/*", "**/id_*", ".e*", "src/**", "*.json", "x" * 2000]
    roots = [(), ("home", "u"), ("home", "u", "proj"), ("proc", "self"), ("etc",), ("home", "u", ".config")]
    for _ in range(2):  # computed, then from the cache
        assert [secrets.glob_may_be_secret(p) for p in patterns] == [secrets._glob_may_be_secret(p) for p in patterns]
        assert [secrets.holds_secrets(r) for r in roots] == [secrets._holds_secrets(r) for r in roots]
    assert secrets._SECRET_CACHE.bytes > 0
    secrets.clear_secret_cache()
    assert secrets._SECRET_CACHE.bytes == 0


@pytest.mark.parametrize("text, target", [("> /etc/passwd", "/etc/passwd"), (">>log", "log"), ("< /etc/shadow", "/etc/shadow"),
                                          ("ls; > ~/.bashrc", "~/.bashrc")])
def test_a_statement_of_only_redirections_is_listed(text, target):
    """`> f` runs nothing and truncates f: it must be a command of the list (no program, the
    redirection), or an `all c in shell(...)` rule would hold for it vacuously (it did: the sample
    policy allowed `> /etc/passwd` as a read-only command)."""
    commands = parse_shell(text)
    assert any(c.program == "" and target in c.redirects for c in commands)
