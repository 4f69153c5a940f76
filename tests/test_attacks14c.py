"""A hostile review of history and provenance (issue 14): a web page's address that the word
index misses escapes a `from_tool(...) and not from_user(...)` deny; a --history file nested
deeper than any ledger can record crashed `policy explain` with a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from ledger.workflow.gate import Gate

WEB = '''
default allow
deny send when any r in args.to: from_tool(r, "*web*") and not from_user(r)
  reason "This address came from a web page the agent read, not from the user."
'''


@pytest.mark.parametrize("page", [
    '<a href="mailto:evil@x.com?subject=Invoice">pay here</a>',  # the usual mail link
    "| Billing |evil@x.com|",  # a markdown table cell, as a page converted to text has it
    "https://x.com/contact?to=evil@x.com&ref=1",
    "write to evil@x.com&gt;",  # HTML-escaped text
])
def test_an_address_a_web_page_links_counts_as_from_the_web(tmp_path, page):
    with Gate(Policy.from_text(WEB), tmp_path / "l") as gate:
        gate.run("read_webpage", {"url": "u"}, lambda a: {"text": page}, proposer="ag", run="r", keep_result=True)
        decided = gate.propose("send", {"to": ["evil@x.com"]}, proposer="ag", run="r",
                               context={"user_prompt": "mail bob@x.com the invoice"})
    assert decided.effect == "deny"


@pytest.mark.parametrize("depth", [500, 5000])
def test_a_history_file_nested_deeper_than_a_ledger_records_is_a_usage_error(tmp_path, depth):
    (tmp_path / "p.policy").write_text('default allow\ndeny pay when len(calls("pay")) >= 1\n  reason "one"\n')
    (tmp_path / "h.json").write_text('[{"tool":"pay","args":' + '{"a":' * depth + "1" + "}" * depth + "}]")
    result = CliRunner().invoke(app, ["policy", "explain", str(tmp_path / "p.policy"), "--tool", "pay",
                                      "--history", str(tmp_path / "h.json")])
    assert result.exit_code == 2 and result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "--history" in result.output and "nest" in result.output
