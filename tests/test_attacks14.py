"""A fourteenth hostile review: issue 14's policy language v2 (arithmetic on exact decimals, the
functions over values, `url(x, scheme)`, `let`, `include`, history and provenance) against the
rules of the domain: an error never allows, a decision is pure, and nothing raises out of a
command for a user's mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from dsl.explain import explain

runner = CliRunner()


def effect(text: str, args: dict, tool: str = "t", **kw) -> str:
    return Policy.from_text(text).evaluate(tool, args, **kw).effect


# --- url(x, scheme): a scheme without '//' is not a host -----------------------------------------

@pytest.mark.parametrize("text", [
    "http:/evil.example/x",      # WHATWG: http://evil.example/x; read here as the host "http"
    "HTTPS:/evil.example",
    "https:443/x",               # WHATWG: the host 443 (0.0.1.187); read here as the host "https"
    "javascript:/x",             # the docs: a scheme without // is an error
    "file:/etc/passwd",
    "evil.example:/x",           # a scheme "evil.example" with a path, or a host with an empty port?
    "http:",
])
def test_url_with_a_scheme_refuses_a_scheme_without_slashes(text):
    """A deny list on the host must not miss `http:/evil.example`, which browsers and fetch
    libraries (the WHATWG URL standard) read as http://evil.example/."""
    policy = 'default allow\ndeny fetch when url(args.u, "https").host == "evil.example"\n  reason "blocked"\n'
    assert effect(policy, {"u": text}, "fetch") == "deny"
    only = 'default deny "no"\nallow fetch when url(args.u, "https").scheme == "https"\n'
    assert effect(only, {"u": text}, "fetch") == "deny"


@pytest.mark.parametrize("text, host, port", [("localhost:8080/x", "localhost", 8080), ("example.com:443", "example.com", 443)])
def test_url_with_a_scheme_still_reads_a_host_and_port(text, host, port):
    policy = f'default deny "no"\nallow fetch when url(args.u, "https").host == "{host}" and url(args.u, "https").port == {port}\n'
    assert effect(policy, {"u": text}, "fetch") == "allow"


# --- explain --json of a number with a large exponent --------------------------------------------

def test_explain_json_of_a_result_with_a_large_exponent_does_not_raise(tmp_path):
    """A product of 1e4000 is an exact Decimal; written as a Python int it has 4,001 digits, which
    json.dumps refuses (int max str digits): a traceback out of `policy explain --json`."""
    factors = " * ".join(["1e300"] * 15)
    path = tmp_path / "big.policy"
    path.write_text(f'default deny "no"\nallow t when args.a * {factors} > 5\n')
    result = runner.invoke(app, ["policy", "explain", str(path), "--json", "--tool", "t", "--args", '{"a": 1e308}'])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["effect"] == "allow"


# --- total() adds in exact decimals, as sum() does -------------------------------------------------

def test_total_adds_exact_decimals_like_sum():
    """total() added binary floats: refunds of 0.7 and 0.1 made 0.7999999999999999, so a cap of
    `>= 0.8` did not ask, while `sum(calls(...)[*].args.amount)` (exact) did."""
    from dsl.history import History

    history = History.from_calls([{"tool": "refund", "args": {"amount": 0.7}}, {"tool": "refund", "args": {"amount": 0.1}}])
    capped = 'default allow\nask refund when total(calls("refund"), "args.amount") >= 0.8\n  reason "cap"\n'
    assert Policy.from_text(capped).evaluate("refund", {"amount": 1}, history=history).effect == "ask"
    summed = 'default allow\nask refund when sum(calls("refund")[*].args.amount) >= 0.8\n  reason "cap"\n'
    assert Policy.from_text(summed).evaluate("refund", {"amount": 1}, history=history).effect == "ask"


def test_total_of_a_non_finite_amount_is_an_error():
    from dsl.history import History

    history = History.from_calls([{"tool": "refund", "args": {"amount": float("-inf")}}])
    policy = 'default deny "no"\nallow refund when total(calls("refund"), "args.amount") + args.amount <= 100\n'
    assert Policy.from_text(policy).evaluate("refund", {"amount": 1}, history=history).effect == "deny"


# --- provenance: an address a web page links with mailto: ------------------------------------------

@pytest.mark.parametrize("page", [
    '<a href="mailto:evil@attacker.example">write to us</a>',
    '<a href=mailto:evil@attacker.example>us</a>',
    "Contact:evil@attacker.example",
    "https://x.example/contact?to=evil@attacker.example",
])
def test_from_tool_sees_an_address_a_web_page_links(page):
    """The documented rule `deny send_email when any r in args.to: from_tool(r, "*web*") and not
    from_user(r)` missed the most common way a page gives an address: the word was
    `href=mailto:evil@attacker.example`, and a value is looked up as a whole word."""
    from dsl.history import History

    history = History.from_calls([{"tool": "read_webpage", "args": {"url": "https://x.example"}, "result": {"html": page}}])
    policy = ('default allow\ndeny send_email when any r in args.to: from_tool(r, "*web*") and not from_user(r)\n'
              '  reason "This address came from a web page."\n')
    decision = Policy.from_text(policy).evaluate("send_email", {"to": ["evil@attacker.example"]},
                                                 {"user_prompt": "Summarize the page and mail me at bob@corp.example"}, history=history)
    assert decision.effect == "deny"


# --- + - * round past 34 digits instead of failing -----------------------------------------------

def test_a_sum_beyond_34_digits_does_not_round_into_an_allow():
    policy = 'default deny "no"\nallow pay when args.amount + args.fee <= args.limit\n'
    assert effect(policy, {"amount": 1e34, "fee": 0.3, "limit": 1e34}, "pay") == "deny"


# --- provenance: a spaced IBAN followed by short words (found by a new user) ----------------------

@pytest.mark.parametrize("page", [
    "IBAN DE89 3704 0044 0532 0130 00 or mail",
    "IBAN DE89 3704 0044 0532 0130 00 and thanks",
    "pay to DE89 3704 0044 0532 0130 00 by Friday",
    "DE89 3704 0044 0532 0130 00.",
])
def test_from_tool_sees_a_spaced_iban_before_short_words(page):
    """The groups of a spaced IBAN were joined as far as they went, so the short words after it
    (`or`, `now`, `by`) became part of the joined word, and the IBAN itself was never a word: a
    history deny on it allowed."""
    from dsl.history import History

    history = History.from_calls([{"tool": "read_webpage", "args": {"url": "https://x.example"}, "result": page}])
    policy = 'default allow\ndeny pay when from_tool(args.iban, "read_webpage")\n  reason "An account only a web page named."\n'
    decision = Policy.from_text(policy).evaluate("pay", {"iban": "DE89370400440532013000"}, history=history)
    assert decision.effect == "deny"


# --- a history given by hand: a misspelt key or an object is an error (found by a new user) -------

@pytest.mark.parametrize("calls,words", [
    ({"tool": "refund"}, "a list of calls"),
    ([{"tool": "refund", "amount": 200}], "unknown keys amount"),
    ([{"tool": "refund", "args": {}, "stauts": "executed"}], "unknown keys stauts"),
])
def test_a_history_with_a_misspelt_key_is_refused(calls, words):
    """`{"tool": "refund", "amount": 200}` (args forgotten) was a refund of nothing, and an object
    was walked key by key: a policy test or an explanation then ran on another history than the
    author wrote."""
    from dsl.history import History

    with pytest.raises(ValueError, match=words):
        History.from_calls(calls)
