"""dsl.lalr: our loop over Lark's tables reads what Lark reads.

`dsl.parser.parse` parses with `dsl.lalr.TableParser` and falls back to Lark's own parser on
anything the table parser does not return a tree for. So the property that matters: wherever the
table parser returns a tree (and comments), Lark returns the same tree (spans included) and the
same comments (text, line and column); and `parse` as a whole says exactly what Lark says, tree or
error. Checked on generated policies (random layout and comments, tests/policy_gen.py), on valid
policies mutated character by character and on token soup (tests/test_dsl_parser.py), on keywords
glued to words and keywords inside strings and comments, and on every policy of the repository.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsl import PolicyError
from dsl import parser as policy_parser
from dsl.lalr import TableParser, Unhandled
from tests.policy_gen import policy_texts
from tests.test_dsl_parser import MUTATIONS, VALID_POLICIES, VOCABULARY, mutate

ROOT = Path(__file__).resolve().parent.parent
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def table() -> TableParser:
    parser = policy_parser._table_parser()
    assert parser is not None, "the table parser must be available with the Lark this project installs"
    return parser


def lark_reading(text: str):
    """Lark's own parse: ("tree", tree, comments) or ("error", the diagnostics as text)."""
    comments: list = []
    sink = policy_parser._COMMENTS.set(comments)
    try:
        return "tree", policy_parser._parse_with_lark(text, "t.policy"), [_where(c) for c in comments]
    except PolicyError as exc:
        return "error", exc.render()
    finally:
        policy_parser._COMMENTS.reset(sink)


def public_reading(text: str):
    """`parse_with_comments`, as every caller sees it, in the shape of `lark_reading`."""
    try:
        tree, comments = policy_parser.parse_with_comments(text, "t.policy")
    except PolicyError as exc:
        return "error", exc.render()
    return "tree", tree, [_where(c) for c in comments]


def _where(tok) -> tuple:
    return (tok.type, str(tok), tok.start_pos, tok.line, tok.column, tok.end_pos, tok.end_line, tok.end_column)


def assert_reads_as_lark(text: str) -> None:
    expected = lark_reading(text)
    try:
        tree, comments = table().parse(text)
    except Unhandled:
        assert expected[0] == "error", f"the table parser refused a text Lark reads: {text!r}"
    except PolicyError:
        raise
    except Exception:  # noqa: BLE001 - a callback's error (a bad escape): Lark must fail as well
        assert expected[0] == "error", f"the table parser raised on a text Lark reads: {text!r}"
    else:
        assert expected[0] == "tree", f"the table parser read a text Lark refuses: {text!r}"
        assert tree == expected[1]
        assert [_where(c) for c in comments] == expected[2]
    assert public_reading(text) == expected


# --- examples ------------------------------------------------------------------------------------


GLUED_AND_QUOTED = [
    "allowed read",                                    # a statement keyword glued to a word
    "allow read reasons \"x\"",                        # a clause keyword glued
    "deny x when args.a == 1 reason \"r\"idx \"y\"",   # `id` glued after a string
    "allow read_file when args.reason == \"when\"",    # keywords as field names and inside strings
    "allow when_x, deny_y when args.timeout > 3",     # tool names starting with keywords
    "allow t when args.x in [\"allow\", \"deny\"] # allow deny when\n",
    "ask t timeout 4h else reject \"late\" remember 8h",
    "ask t timeout 4helse reject",                     # a duration glued to a keyword
    "allow t when args.x == 1and args.y == 2",         # a number glued to a keyword
    "allow t when args.a.b[0][\"c d\"][*].e == -1.5e3 and not (args.f or any x in args.g: x > 2)",
    "allow t when len(args.items[*].price) >= 2 * (3 + 4) / -1",
    "  \n\t# only a comment\r\n",
    "",
    "allow t when args.s == \"C:\\Users\"",           # a bad escape: the callback raises
    "allow t when args.x == 1 @",
    "policy \"p\"\n\n\n# c\nallow a # trailing\n# last",
]


@pytest.mark.parametrize("text", GLUED_AND_QUOTED)
def test_examples_read_as_lark_reads_them(text):
    assert_reads_as_lark(text)


def repository_policies() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("samples/*.policy"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("bench/*.policy"))]
    for path in sorted((ROOT / "tests" / "compliance").glob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            for case in group.get("cases", []):
                for key in ("policy", "policy_text"):
                    value = case.get(key)
                    if isinstance(value, list):
                        value = "\n".join(value)
                    if isinstance(value, str):
                        texts.append(value)
    return texts


def test_every_policy_of_the_repository_reads_as_lark_reads_it():
    texts = repository_policies()
    assert len(texts) > 100
    for text in texts:
        assert_reads_as_lark(text)


def test_a_large_generated_policy_reads_as_lark_reads_it():
    from bench import generate

    profiles, mix = generate.build_profiles({"coding": [
        {"tool": "Bash", "args": {"command": "ls -la"}}, {"tool": "Read", "args": {"file_path": "/a/b"}},
        {"tool": "mcp__x__send", "args": {"to": "a@b.c", "amount": 3, "tags": ["x"]}}]})
    assert_reads_as_lark(generate.generate(300, profiles, mix).text)


# --- properties ----------------------------------------------------------------------------------


@PROPERTY
@given(policy_texts())
def test_generated_policies_read_as_lark_reads_them(drawn):
    text, _ = drawn
    assert_reads_as_lark(text)


@PROPERTY
@given(st.sampled_from(VALID_POLICIES), MUTATIONS)
@example(VALID_POLICIES[1], [("insert", 0.5, 0.0, "ed")])
def test_mutated_policies_read_as_lark_reads_them(original, ops):
    assert_reads_as_lark(mutate(original, ops))


@PROPERTY
@given(st.lists(st.sampled_from(VOCABULARY + ["\n", "#", "_", "x"]), max_size=30).map(lambda w: "".join(
    piece + (" " if i % 3 else "") for i, piece in enumerate(w))))
def test_token_soup_with_glued_words_reads_as_lark_reads_it(text):
    assert_reads_as_lark(text)


def test_white_space_starts_no_other_terminal():
    """The table parser skips white space before a state's alternatives (`space` of
    TableParser); that reads as Lark only if no other terminal matches text starting with it."""
    lark = policy_parser._lark()
    samples = ["x", "a1", "1", "\"s\"", "#c", "*", "4h", "-1", "==", "allow", "", " x", "\n"]
    for terminal in lark.terminals:
        if terminal.name == "WS":
            continue
        pattern = re.compile(terminal.pattern.to_regexp())
        for space in " \t\r\n\f":
            for sample in samples:
                assert pattern.match(space + sample) is None, (terminal.name, space + sample)
