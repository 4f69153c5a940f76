"""Every hint `policy check` gives for a comparison that can never be true, applied (issue 9,
section 6): the comparison is replaced by the hint's `write ...` text, the policy loads without
the warning, and the call its author meant now matches (where the original never did).

The hints are the normalized forms `dsl.checker._never` knows: lower(), a URL's host and scheme,
path(), a path's ext and parts, a command's program, wrappers, args and flags."""

from __future__ import annotations

import re

import pytest

from dsl import Policy, PolicyError

CONTEXT = {"cwd": "/home/u/proj", "home": "/home/u"}
ANY = "any c in shell(args.c): "

# (what stands before the comparison, the comparison, the arguments of a call it was meant to match)
CASES = [
    (ANY, 'c.flags contains "-rf"', {"c": "mytool -rf x"}),
    (ANY, 'c.flags contains "-rf"', {"c": "mytool -r -f x"}),
    (ANY + 'c.program == "rm" and ', 'c.flags contains "-rf"', {"c": "rm -rf /tmp/x"}),
    (ANY + 'c.program == "rm" and ', 'c.flags contains "-rf"', {"c": "rm --recursive --force /tmp/x"}),
    (ANY + 'c.program == "rm" and ', 'c.flags contains "-rf"', {"c": "sudo /bin/rm -fr /tmp/x"}),
    (ANY + 'c.program == "find" and ', 'c.flags contains "-delete"', {"c": "find . -name x -delete"}),
    (ANY, 'c.flags contains "-r"', {"c": "rm -r x"}),
    (ANY, '"--force" in c.flags', {"c": "git push --force"}),
    (ANY, 'c.flags contains "--color=always"', {"c": "ls --color=always"}),
    (ANY + 'c.program == "rm" and ', 'c.flags contains "--recu"', {"c": "rm --recursive x"}),
    (ANY, 'c.args contains "-rf"', {"c": "rm -rf x"}),
    (ANY, 'c.program == "/bin/rm"', {"c": "/bin/rm x"}),
    (ANY, 'c.program == "/bin/rm"', {"c": "rm x"}),
    ("", 'shell(args.c)[0].program == "/bin/rm"', {"c": "/bin/rm x"}),
    (ANY, 'c.program == "git push"', {"c": "git push origin main"}),
    (ANY, 'c.program == "git push"', {"c": "git -C . push"}),
    (ANY, 'c.program in ["rm -rf", "shred"]', {"c": "rm -rf x"}),
    (ANY, 'c.wrappers contains "/usr/bin/sudo"', {"c": "sudo ls"}),
    ("", 'path(args.p) == "~/.bashrc"', {"p": "/home/u/.bashrc"}),
    ("", 'path(args.p) == "~/.bashrc"', {"p": "~/.bashrc"}),
    ("", 'path(args.p) == ".env"', {"p": ".env"}),
    ("", 'path(args.p) in ["/etc/", "/a/./b", ".env"]', {"p": "/a/b"}),
    ("", 'path(args.p) in ["/etc/", "/a/./b", ".env"]', {"p": "/home/u/proj/.env"}),
    ("", 'path(args.p).ext == "env"', {"p": "/x/a.env"}),
    ("", 'path(args.p).parts contains ".ssh/id_rsa"', {"p": "/home/u/.ssh/id_rsa"}),
    ("", 'lower(args.q) contains "DROP TABLE"', {"q": "please drop table users"}),
    ("", '"DROP" in lower(args.q)', {"q": "Drop it"}),
    ("", 'url(args.u).host == "Evil.com"', {"u": "https://evil.com/x"}),
    ("", 'url(args.u).host glob "*.EVIL.com"', {"u": "https://a.evil.com/x"}),
    ("", 'url(args.u).host in ["evil.com."]', {"u": "https://evil.com./x"}),
    ("", 'url(args.u).host == "bücher.de"', {"u": "https://bücher.de/"}),
    ("", 'url(args.u).host == "https://evil.com"', {"u": "https://evil.com/login"}),
    ("", 'url(args.u).scheme == "http:"', {"u": "http://a.example/"}),
    ("", 'url(args.u).scheme == "HTTP"', {"u": "http://a.example/"}),
]

# (prefix, comparison, a call the author meant NOT to match): a negated comparison, applied
NEGATED = [
    (ANY, '"-rf" not in c.flags', {"c": "rm -rf x"}, {"c": "rm -r x"}),
    ("", 'path(args.p) != "/etc/"', {"p": "/etc"}, {"p": "/tmp"}),
    (ANY, 'c.program not in ["git push"]', {"c": "git push"}, {"c": "git pull"}),
]


def load(condition: str) -> Policy:
    return Policy.from_text(f'deny t when {condition} reason "r"\n', "hint.policy")


def hint(condition: str) -> str:
    """The replacement the warning's help gives for the comparison."""
    helps = {w.help for w in load(condition).warnings if "this comparison is" in w.message}
    assert len(helps) == 1, helps
    (text,) = helps
    m = re.fullmatch(r"write `(.+)`", text or "")
    assert m, text
    return m.group(1)


def applied(prefix: str, comparison: str) -> Policy:
    fixed = load(prefix + hint(prefix + comparison))
    assert not [w for w in fixed.warnings if "this comparison is" in w.message], fixed.warnings
    return fixed


def matched(policy: Policy, args: dict) -> bool:
    decision = policy.evaluate("t", args, CONTEXT)
    (outcome,) = decision.outcomes or (None,)
    return outcome is not None and outcome.counted and outcome.error is None


@pytest.mark.parametrize("prefix, comparison, args", CASES)
def test_the_hint_matches_the_call_its_author_meant(prefix, comparison, args):
    assert not matched(load(prefix + comparison), args)  # the comparison as written never fires
    assert matched(applied(prefix, comparison), args)


@pytest.mark.parametrize("prefix, comparison, excluded, kept", NEGATED)
def test_the_hint_of_a_negated_comparison_excludes_what_its_author_meant(prefix, comparison, excluded, kept):
    fixed = applied(prefix, comparison)
    assert not matched(fixed, excluded)
    assert matched(fixed, kept)


def test_a_cluster_of_short_flags_is_not_hinted_as_one_flag():
    assert hint(ANY + 'c.flags contains "-rf"') == 'c.flags contains "r" and c.flags contains "f"'


def test_the_hint_for_flags_follows_the_program_when_the_rule_names_it():
    assert hint(ANY + 'c.program == "find" and c.flags contains "-name"') == 'c.flags contains "name"'


def test_every_normalized_form_has_a_hint_case():
    from dsl.checker import _COMMAND_FORMS

    forms = {"lower", "host", "scheme", "path", "ext", "parts", *_COMMAND_FORMS}
    written = " ".join(comparison for _, comparison, _ in CASES)
    named = {"lower": "lower(", "host": ".host", "scheme": ".scheme", "path": "path(args.p) ==", "ext": ".ext",
             "parts": ".parts", "program": ".program", "flags": ".flags", "wrappers": ".wrappers", "args": ".args"}
    assert forms == set(named)
    assert all(named[f] in written for f in forms)


# --- the checker's other hints, applied -----------------------------------------------------------


def _help(text: str, tools=None) -> list[str]:
    from dsl import PolicyError

    try:
        return [d.help or "" for d in Policy.from_text(text, "h.policy", tools=tools).warnings]
    except PolicyError as exc:
        return [d.help or "" for d in exc.diagnostics]


def test_the_hint_for_an_all_deny_on_commands_catches_the_command_slipped_past():
    text = 'deny Bash when all c in shell(args.command): c.program == "rm" reason "no rm"\n'
    assert any("`any c in shell(...)`" in h for h in _help(text))
    fixed = Policy.from_text(text.replace("all c in", "any c in"))
    assert fixed.evaluate("Bash", {"command": "ls; rm x"}).effect == "deny"


def test_the_did_you_mean_hints_name_what_loads_and_matches():
    text = 'deny refund when lowr(arg.reason) == "fraud" reason "no"\n'
    assert "did you mean 'lower'?" in _help(text)
    assert "did you mean 'args'?" in _help(text.replace("lowr", "lower"))
    fixed = Policy.from_text(text.replace("arg.", "args.").replace("lowr", "lower"))
    assert fixed.evaluate("refund", {"reason": "Fraud"}).effect == "deny"


def test_the_hint_for_a_field_of_a_list_quantifies_over_every_item():
    text = 'deny Bash when shell(args.c).program == "rm" reason "no"\n'
    (hint,) = [h for h in _help(text) if "quantifier" in h]
    assert "`any x in ...: x.program ...`" in hint
    fixed = Policy.from_text(text.replace('shell(args.c).program == "rm"', 'any x in shell(args.c): x.program == "rm"'))
    assert fixed.evaluate("Bash", {"c": "ls; rm x"}).effect == "deny"  # an index ([0]) would miss it


def test_the_timeout_hint_loads_and_rejects_on_silence():
    text = 'ask refund timeout 1h else approve\n'
    assert any("write 'else reject'" in h for h in _help(text))
    fixed = Policy.from_text(text.replace("else approve", "else reject"))
    assert fixed.evaluate("refund", {}).requirements.on_timeout == "reject"


def test_the_exists_hint_tests_a_field_only_where_a_tool_has_it():
    from dsl.schema import ToolSchemas

    tools = ToolSchemas.from_json([
        {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        {"name": "b", "parameters": {"type": "object", "properties": {"y": {"type": "integer"}}}},
    ])
    text = 'deny a, b when args.x == 1 reason "no"\n'
    assert any("write exists(args.x) and ..." in h for h in _help(text, tools))
    fixed = Policy.from_text(text.replace("args.x == 1", "exists(args.x) and args.x == 1"), tools=tools)
    assert fixed.evaluate("a", {"x": 1}).effect == "deny"
    assert fixed.evaluate("b", {"y": 1}).effect == "ask"


@pytest.mark.parametrize("literal, call_path", [
    (r"C:\Users\me\.ssh", "C:\\Users\\me\\.ssh\\id_rsa"), (r"\\srv\share\keys", "\\\\srv\\share\\keys\\a"),
])
def test_a_windows_path_with_single_backslashes_gets_a_help_whose_two_spellings_work(literal, call_path):
    text = f'default allow\ndeny Read when path(args.file_path) under "{literal}" reason "no"'
    with pytest.raises(PolicyError) as raised:
        Policy.from_text(text, "w.policy")
    help_text = str(raised.value)
    assert "each backslash doubled" in help_text
    spellings = re.findall(r'doubled, ("[^"]*"), or with forward slashes, ("[^"]*")', help_text)
    assert spellings, help_text
    for spelling in spellings[0]:  # the hint applied: the rule loads and denies the path it meant
        fixed = Policy.from_text(text.replace(f'"{literal}"', spelling), "w.policy")
        assert fixed.evaluate("Read", {"file_path": call_path}, {"cwd": "C:\\Users\\me"}).effect == "deny", spelling
        assert fixed.evaluate("Read", {"file_path": "C:\\Users\\me\\a.txt"}, {"cwd": "C:\\Users\\me"}).effect == "allow"
