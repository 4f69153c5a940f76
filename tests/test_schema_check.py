"""Checking a policy against the tools' argument schemas (dsl.schema, the schema-aware checker,
`countersign policy check --tools`), and misspelled keywords.

The schemas here are small hand-written fixtures in the shapes the real files use. The tests at
the end read the shared corpus (../shared/corpus, or COUNTERSIGN_CORPUS) in place and are skipped
when it is absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy, PolicyError
from dsl.checker import check
from dsl.parser import parse
from dsl.schema import ToolSchemaError, ToolSchemas, load_tools

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("COUNTERSIGN_CORPUS", ROOT.parent / "shared" / "corpus"))
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the shared corpus is not at {CORPUS}")
runner = CliRunner()

# tau-bench style: a list of {name, parameters: JSON Schema}
TOOLS = [
    {
        "name": "cancel_pending_order",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]},
            },
            "required": ["order_id", "reason"],
        },
    },
    {"name": "get_order_details", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
    {
        "name": "refund",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["urgent", "vip"]}},
                "note": {"type": ["string", "null"]},
                "address": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                },
                "flights": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"flight_number": {"type": "string"}, "date": {"type": "string"}}},
                },
                "meta": {"type": "object"},
                "extra": {"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": True},
            },
        },
    },
    {"name": "think", "parameters": {"type": "object", "properties": {"thought": {"type": "string"}}}},
    {"name": "calculate", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}},
    {"name": "list_all", "parameters": {"type": "object", "properties": {}, "required": []}},
]


@pytest.fixture(scope="module")
def tools() -> ToolSchemas:
    return ToolSchemas.from_json(TOOLS, "tools.json")


def diagnostics(text: str, tools: ToolSchemas | None) -> list:
    return check(parse(text, "t.policy"), tools)


def errors(text: str, tools: ToolSchemas | None) -> list:
    return [d for d in diagnostics(text, tools) if d.severity == "error"]


def one_error(text: str, tools: ToolSchemas):
    found = errors(text, tools)
    assert len(found) == 1, [d.message for d in found]
    return found[0]


def clean(text: str, tools: ToolSchemas) -> None:
    found = errors(text, tools)
    assert not found, [(d.message, d.help) for d in found]


def at(d, text: str) -> str:
    """The source text under a diagnostic's span (one line)."""
    line = text.split("\n")[d.span.line - 1]
    return line[d.span.column - 1 : d.span.end_column]


# --- unknown tools ----------------------------------------------------------------------------


def test_an_unknown_tool_name_is_an_error_with_a_suggestion(tools):
    text = 'allow get_ordr_details\n'
    d = one_error(text, tools)
    assert d.message == "unknown tool 'get_ordr_details'" and d.help == "did you mean 'get_order_details'?"
    assert (d.span.line, d.span.column) == (1, 7) and at(d, text) == "get_ordr_details"


def test_a_glob_that_matches_no_tool_is_an_error_and_one_that_matches_is_fine(tools):
    d = one_error("allow modify_*\n", tools)
    assert d.message == "no tool matches 'modify_*'"
    clean("allow get_*, *_order, cancel_pending_orde?\n", tools)
    clean('allow "think"\n', tools)


def test_without_schemas_the_same_policy_loads_silently(tools):
    text = 'deny refund when args.amont > 100 reason "no"\nallow get_ordr_details\n'
    assert errors(text, None) == []
    Policy.from_text(text)  # loads: a typo would be a silent false
    assert {d.message for d in errors(text, tools)} == {"args.amont is not an argument of refund", "unknown tool 'get_ordr_details'"}


# --- unknown argument paths -------------------------------------------------------------------


def test_an_unknown_argument_is_an_error_at_the_path(tools):
    text = 'deny refund when args.amont > 100 reason "no"\n'
    d = one_error(text, tools)
    assert d.message == "args.amont is not an argument of refund"
    assert d.help == "did you mean 'amount'?"
    assert (d.span.line, d.span.column) == (1, 18) and at(d, text) == "args.amont"


def test_the_hint_lists_the_arguments_when_nothing_is_close(tools):
    d = one_error('allow get_order_details when args.pth == "x"\n', tools)
    assert d.message == "args.pth is not an argument of get_order_details" and d.help == "its arguments are order_id"
    d = one_error('allow list_all when args.x == 1\n', tools)
    assert d.help == "it takes no arguments"


def test_nested_objects_and_list_items_are_checked(tools):
    assert one_error('allow refund when args.address.cty == "x"\n', tools).message == "args.address.cty is not in the schema of refund"
    d = one_error('allow refund when args.flights[0].dat == "x"\n', tools)
    assert d.message == "args.flights[0].dat is not in the schema of refund" and d.help == "did you mean 'date'?"
    d = one_error('allow refund when any f in args.flights: f.fligt_number == "x"\n', tools)
    assert d.message == "f.fligt_number is not in the schema of refund" and d.help == "did you mean 'flight_number'?"
    clean('allow refund when args.address.city == "x" and args.flights[-1].date == "x"'
          ' and all f in args.flights: f.flight_number startswith "HAT"\n', tools)


def test_a_list_read_by_name_or_an_object_read_by_index_is_an_error(tools):
    d = one_error('allow refund when args.flights.date == "x"\n', tools)
    assert d.message == "a list of objects has items, not fields"
    assert d.help.startswith("args.flights is a list of objects in the schema of refund")
    assert one_error("allow refund when args.address[0] == 1\n", tools).message == "args.address is an object: it has fields, not items"
    assert one_error("allow refund when args.amount.x == 1\n", tools).message == "a number has no fields or items"


def test_open_objects_accept_any_field(tools):
    # no properties listed, additionalProperties: true
    clean('allow refund when args.meta.anything.below == 1 and args.extra.other == "x" and args.extra.a > 1\n', tools)
    assert one_error('allow refund when args.extra.a == "x"\n', tools).message == "'==' compares a number with a string"


def test_open_schemas_follow_json_schema_defaults():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    closed_off = {**schema, "additionalProperties": False}
    loose = ToolSchemas.from_json([{"name": "t", "parameters": schema}, {"name": "u", "parameters": closed_off}], closed=False)
    clean("allow t when args.b == 1\n", loose)  # an unlisted property is allowed by JSON Schema
    assert one_error("allow u when args.b == 1\n", loose).message == "args.b is not an argument of u"
    strict = ToolSchemas.from_json([{"name": "t", "parameters": schema}])
    assert one_error("allow t when args.b == 1\n", strict).message == "args.b is not an argument of t"


def test_a_rule_over_several_tools_needs_the_argument_in_each_or_an_exists_guard(tools):
    text = "allow think, calculate when len(args.thought) > 3\n"
    d = one_error(text, tools)
    assert d.message == "args.thought is not an argument of calculate"
    assert "write exists(args.thought) and ... to test it only where it is" in d.help
    clean("allow think, calculate when exists(args.thought) and len(args.thought) > 3\n", tools)
    clean("deny think, calculate when not exists(args.thought) or len(args.thought) < 3 reason \"r\"\n", tools)
    clean("allow think, calculate when (exists(args.thought) and args.thought != \"\") and len(args.thought) > 3\n", tools)
    # a guard on the parent object does not guard a field the schema does not list
    d = one_error("allow refund when exists(args.address) and args.address.cty == \"x\"\n", tools)
    assert d.message == "args.address.cty is not in the schema of refund"
    # a glob covers every tool it matches
    assert one_error("deny * when args.order_id == \"x\" reason \"r\"\n", tools).message.startswith(
        "args.order_id is not an argument of refund, think, calculate and list_all"
    )


def test_exists_of_a_path_no_covered_tool_has_is_an_error(tools):
    d = one_error("allow think when exists(args.thoght)\n", tools)
    assert d.message == "exists(args.thoght) is always false: no tool this rule covers has args.thoght"
    assert d.help == "did you mean 'thought' (the schema of think)?"
    clean("allow think, calculate when exists(args.thought)\n", tools)  # one of them has it


# --- wrong types ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "condition, message",
    [
        ('args.amount == "x"', "'==' compares a number with a string"),
        ("args.amount != true", "'!=' compares a number with a bool"),
        ('args.amount > "5"', "'>' compares a number with a string"),
        ("args.flag < 1", "'<' orders numbers or strings, not a bool"),
        ("len(args.flag) > 1", "len() takes a string, list or object, not a bool"),
        ("len(args.amount) > 1", "len() takes a string, list or object, not a number"),
        ("args.note", "a condition must be true or false, but this is a string"),
        ("args.tags contains 1", "'contains' looks for a number in a list of strings"),
        ("args.amount startswith \"1\"", "'startswith' works on strings or lists, not a number"),
        ("args.amount in [\"a\", \"b\"]", "'in' looks for a number in a list of string values"),
        ("lower(args.amount) == \"x\"", "lower() takes a string, not a number"),
        ("args.flag glob \"*\"", "'glob' matches strings or paths, not a bool"),
    ],
)
def test_a_comparison_of_the_wrong_type_is_an_error(tools, condition, message):
    text = f"deny refund when {condition} reason \"r\"\n"
    d = one_error(text, tools)
    assert d.message == message
    assert "in the schema of refund" in d.help
    assert errors(text, None) == []  # without the schema the checker cannot know


def test_the_help_says_what_type_the_schema_gives(tools):
    d = one_error('deny refund when args.amount == "x" reason "r"\n', tools)
    assert d.help == "args.amount is a number in the schema of refund"


def test_well_typed_conditions_are_clean(tools):
    clean(
        'deny refund when args.amount > 100 or args.flag or len(args.tags) > 2 or args.tags contains "vip"'
        ' or args.note == null or args.note startswith "x" or args.address.zip in ["1", "2"]'
        ' or path(args.note) under "/tmp" reason "r"\n',
        tools,
    )


# --- enums ------------------------------------------------------------------------------------


def test_a_value_outside_the_enum_is_an_error(tools):
    text = 'deny cancel_pending_order when args.reason == "too expensive" reason "r"\n'
    d = one_error(text, tools)
    assert d.message == '"too expensive" is not a value args.reason can have'
    assert at(d, text) == '"too expensive"'
    assert d.help == 'args.reason is one of "no longer needed", "ordered by mistake", according to the schema of cancel_pending_order'
    assert one_error('allow cancel_pending_order when "too expensive" != args.reason\n', tools)


def test_each_list_item_outside_the_enum_is_an_error(tools):
    text = 'deny cancel_pending_order when args.reason not in ["no longer needed", "changed my mind"] reason "r"\n'
    d = one_error(text, tools)
    assert at(d, text) == '"changed my mind"'
    clean('deny cancel_pending_order when args.reason not in ["no longer needed", "ordered by mistake"] reason "r"\n', tools)
    assert one_error('allow refund when args.tags contains "vipp"\n', tools).message == '"vipp" is not a value an item of args.tags can have'
    assert one_error('allow refund when "vipp" in args.tags\n', tools)
    clean('allow refund when args.tags contains "vip" and args.note == null\n', tools)


# --- schema files -----------------------------------------------------------------------------


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


@pytest.mark.parametrize(
    "data",
    [
        [{"name": "read_file", "parameters": SCHEMA}],
        [{"name": "read_file", "input_schema": SCHEMA}],  # Anthropic
        [{"name": "read_file", "inputSchema": SCHEMA}],
        {"tools": [{"name": "read_file", "inputSchema": SCHEMA}]},  # MCP tools/list result
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "read_file", "inputSchema": SCHEMA}], "nextCursor": None}},
        [{"type": "function", "function": {"name": "read_file", "parameters": SCHEMA}}],  # OpenAI
    ],
)
def test_every_accepted_file_form(tmp_path, data):
    tools = load_tools(write(tmp_path, data))
    assert tools.names() == ["read_file"]
    clean('allow read_file when args.path startswith "/tmp"\n', tools)
    assert one_error("allow read_file when args.pth == 1\n", tools).message == "args.pth is not an argument of read_file"


def test_toolemu_toolkits_are_named_as_agents_call_them(tmp_path):
    toolkits = [
        {
            "toolkit": "Terminal",
            "name_for_model": "Terminal",
            "tools": [
                {"name": "Execute", "parameters": [{"name": "command", "type": "string", "required": True}]},
            ],
        },
        {
            "toolkit": "BankManager",
            "name_for_model": "BankManager",
            "tools": [
                {"name": "TransferFunds", "parameters": [
                    {"name": "amount", "type": "number", "required": True},
                    {"name": "to_account_number", "type": "string", "required": True},
                ]},
            ],
        },
    ]
    tools = load_tools(write(tmp_path, toolkits))
    assert tools.names() == ["TerminalExecute", "BankManagerTransferFunds"]
    clean('deny TerminalExecute when args.command contains "rm -rf" reason "r"\n', tools)
    assert one_error('deny BankManagerTransferFunds when args.amount > "5" reason "r"\n', tools)
    assert one_error("allow BankManagerTransferFunds when args.amout > 5\n", tools).help == "did you mean 'amount'?"
    # the one-entry-per-tool form with a toolkit key (as in the shared corpus)
    flat = [
        {"toolkit": "Terminal", "name": "TerminalExecute", "parameters": SCHEMA},
        {"toolkit": "Gmail", "name": "SendEmail", "parameters": SCHEMA},
    ]
    assert load_tools(write(tmp_path, flat)).names() == ["TerminalExecute", "GmailSendEmail"]


def test_a_tool_listed_twice_counts_once_and_different_schemas_are_joined():
    same = ToolSchemas.from_json([{"name": "t", "parameters": SCHEMA}, {"name": "t", "parameters": SCHEMA}])
    assert same.names() == ["t"]
    other = {"type": "object", "properties": {"path": {"type": "number"}, "mode": {"type": "string"}}}
    joined = ToolSchemas.from_json([{"name": "t", "parameters": SCHEMA}, {"name": "t", "parameters": other}])
    clean('allow t when args.mode == "r" and args.path == 1 and args.path == "x"\n', joined)  # path: string or number → any
    assert one_error("allow t when args.nope == 1\n", joined)


def test_refs_null_unions_and_anyof():
    schema = {
        "type": "object",
        "$defs": {"Mode": {"type": "string", "enum": ["r", "w"]}},
        "properties": {
            "mode": {"$ref": "#/$defs/Mode"},
            "limit": {"type": ["integer", "null"]},
            "target": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
            "missing_ref": {"$ref": "#/$defs/Nope"},
        },
        "additionalProperties": False,
    }
    tools = ToolSchemas.from_json([{"name": "t", "inputSchema": schema}])
    assert one_error('allow t when args.mode == "x"\n', tools).message == '"x" is not a value args.mode can have'
    assert one_error('allow t when args.limit == "x"\n', tools).message == "'==' compares a number with a string"
    assert one_error("allow t when args.target > 1\n", tools).message == "'>' compares a string with a number"
    clean('allow t when args.either == 1 or args.either == "x" or args.missing_ref == 1 or args.limit == null\n', tools)


def test_a_malformed_tools_file_is_refused(tmp_path):
    for data, fragment in [
        ({"something": 1}, "expected a list of tools"),
        ([{"parameters": SCHEMA}], "entry 0: a tool needs a name"),
        ([{"name": "t", "parameters": "object"}], "entry 0: the argument schema is a JSON object"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}, "the JSON-RPC response is an error"),
        ([1], "entry 0: a tool is a JSON object"),
    ]:
        with pytest.raises(ToolSchemaError, match=fragment):
            load_tools(write(tmp_path, data))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ToolSchemaError, match="not JSON"):
        load_tools(bad)


# --- the Python API ---------------------------------------------------------------------------


def test_policy_load_with_tools(tmp_path):
    tools_file = write(tmp_path, TOOLS)
    good = tmp_path / "good.policy"
    good.write_text('deny refund when args.amount > 100 reason "Too much."\n')
    assert Policy.load(good, tools=tools_file).rules[0].effect == "deny"
    assert Policy.load(good, tools=load_tools(tools_file)).evaluate("refund", {"amount": 500}).effect == "deny"
    bad = tmp_path / "bad.policy"
    bad.write_text('deny refund when args.amont > 100 reason "Too much."\n')
    Policy.load(bad)  # without schemas it loads
    with pytest.raises(PolicyError) as caught:
        Policy.load(bad, tools=tools_file)
    assert f"{bad}:1:18: error: args.amont is not an argument of refund" in caught.value.render()
    with pytest.raises(PolicyError):
        Policy.from_text(bad.read_text(), tools=TOOLS)


# --- the command line -------------------------------------------------------------------------


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_cli_reports_schema_errors_at_file_line_col_and_exits_2(tmp_path):
    tools_file = write(tmp_path, TOOLS)
    policy = tmp_path / "p.policy"
    policy.write_text('policy "p"\ndeny cancel_pending_order\n  when args.reason == "too expensive"\n  reason "r"\n')
    result = run("policy", "check", policy, "--tools", tools_file)
    assert result.exit_code == 2
    assert f'{policy}:3:23: error: "too expensive" is not a value args.reason can have' in result.stderr
    assert '    3 |   when args.reason == "too expensive"' in result.stderr
    assert "^^^^^^^^^^^^^^^" in result.stderr
    assert "the policy was not loaded" in result.stderr
    assert run("policy", "check", policy).exit_code == 0  # the same file without --tools


def test_cli_lists_the_tools_no_rule_mentions_with_the_default_they_get(tmp_path):
    tools_file = write(tmp_path, TOOLS)
    policy = tmp_path / "p.policy"
    policy.write_text('default deny "Only listed tools."\nallow get_*, think\ndeny refund when args.amount > 5 reason "r"\n')
    result = run("policy", "check", policy, "--tools", tools_file)
    assert result.exit_code == 0, result.stderr
    assert f"{policy}: note: 3 tools of {tools_file} are not mentioned by any rule and get the default (deny):" in result.stderr
    assert "cancel_pending_order, calculate, list_all" in result.stderr
    assert "checked against 6 tools" in result.stdout
    policy.write_text("allow *\n")
    result = run("policy", "check", policy, "--tools", tools_file)
    assert result.exit_code == 0 and "note" not in result.stderr


def test_cli_refuses_an_unreadable_or_malformed_tools_file(tmp_path):
    policy = tmp_path / "p.policy"
    policy.write_text("allow x\n")
    result = run("policy", "check", policy, "--tools", tmp_path / "nope.json")
    assert result.exit_code == 2 and result.stderr.startswith("error: cannot read")
    result = run("policy", "check", policy, "--tools", write(tmp_path, {"x": 1}))
    assert result.exit_code == 2 and "expected a list of tools" in result.stderr


def test_cli_open_schemas(tmp_path):
    tools_file = write(tmp_path, [{"name": "t", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}])
    policy = tmp_path / "p.policy"
    policy.write_text("allow t when args.b == 1\n")
    assert run("policy", "check", policy, "--tools", tools_file).exit_code == 2
    assert run("policy", "check", policy, "--tools", tools_file, "--open-schemas").exit_code == 0


# --- misspelled keywords (load-time errors, with or without schemas) --------------------------


@pytest.mark.parametrize(
    "text, word, suggestion",
    [
        ("ask t approver 2\n", "approver", "did you mean 'approvers'?"),
        ("ask t decision approve, reject\n", "decision", "did you mean 'decisions'?"),
        ("ask t timout 4h\n", "timout", "did you mean 'timeout'?"),
        ("ask t approvers 1 form g\n", "form", "did you mean 'from'?"),
        ("ask t timeout 4h els reject\n", "els", "did you mean 'else'?"),
        # a keyword glued to more letters used to be read as the keyword and the rest
        ("allowed t\n", "allowed", "did you mean 'allow'?"),
        ("asks t\n", "asks", "did you mean 'ask'?"),
        ('ask t reasons "x"\n', "reasons", "did you mean 'reason'?"),
        ('ask t idd "x"\n', "idd", "did you mean 'id'?"),
        ("ask t timeouts 4h\n", "timeouts", "did you mean 'timeout'?"),
        ("ask t approvers 1 fromm g\n", "fromm", "did you mean 'from'?"),
        ("ask t when args.x andd args.y\n", "andd", "did you mean 'and'?"),
        ("allowBash\n", "allowBash", "'allow' is a keyword only as a whole word: write 'allow Bash' if that is meant"),
    ],
)
def test_a_misspelled_keyword_is_an_error_at_the_word(text, word, suggestion):
    with pytest.raises(PolicyError) as caught:
        Policy.from_text(text, "t.policy")
    (d,) = caught.value.diagnostics
    assert d.message == f"unknown keyword '{word}'" and d.help == suggestion
    assert text[d.span.column - 1 : d.span.end_column] == word


def test_allowed_alone_no_longer_reads_as_allow_ed():
    # before: `allowed` parsed as `allow ed`, a rule allowing a tool named "ed"
    with pytest.raises(PolicyError, match="unknown keyword 'allowed'"):
        Policy.from_text("allowed\ndeny rm reason \"no\"\n")
    # keywords still work as field names and next to punctuation
    Policy.from_text('allow t when args.reason == "x" and args.allowed and not(args.in) or args.x in["a"]\n')


@pytest.mark.parametrize(
    "text, message",
    [
        ("ask t decisions aprove, reject\n", "unknown decision 'aprove'"),
        ("ask t timeout 4h else rejct\n", "unknown timeout outcome 'rejct'"),
        ("ask t approvers 1 from admin\ngroup admins = [\"a\"]\n", "unknown group 'admin'"),
    ],
)
def test_misspelled_requirement_names_are_errors(text, message):
    with pytest.raises(PolicyError, match=message):
        Policy.from_text(text)


# --- the shared corpus ------------------------------------------------------------------------


@needs_corpus
@pytest.mark.parametrize("name", ["retail", "airline"])
def test_the_tau_bench_samples_check_clean_against_the_corpus_schemas(name):
    result = run("policy", "check", ROOT / "samples" / f"{name}.policy", "--tools", CORPUS / "tau_bench_tools.json")
    assert result.exit_code == 0, result.stderr
    assert "error" not in result.stderr and "warning" not in result.stderr
    assert ": ok:" in result.stdout


@needs_corpus
def test_the_corpus_schemas_catch_a_typo_in_a_sample():
    tools = load_tools(CORPUS / "tau_bench_tools.json")
    text = (ROOT / "samples" / "retail.policy").read_text(encoding="utf-8")
    broken = text.replace("len(args.summary) >= 20", "len(args.sumary) >= 20").replace('"ordered by mistake"]', '"ordered by misstake"]')
    found = [d.message for d in errors(broken, tools)]
    assert found == ["args.sumary is not an argument of transfer_to_human_agents", '"ordered by misstake" is not a value args.reason can have']


@needs_corpus
def test_toolemu_schemas_use_the_names_agents_call():
    tools = load_tools(CORPUS / "toolemu_tools.json")
    assert len(tools) == 330
    calls = [json.loads(line) for line in (CORPUS / "toolemu_agent_tool_calls.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    known = [c for c in calls if c["tool"] in tools]
    assert len(known) >= 0.99 * len(calls)  # the rest are garbled agent output ("TerminalExecute\nCommand: ...")
    # and the arguments they pass are (nearly all) the ones the schemas list
    fitting = [c for c in known if isinstance(c["args"], dict) and all(k in tools.args_of(c["tool"]).fields for k in c["args"])]
    assert len(fitting) >= 0.98 * len(known)
    text = (
        'deny TerminalExecute when any c in shell(args.command): c.program == "rm" reason "r"\n'
        "ask BankManagerTransferFunds when args.amount > 100\n"
        "allow Gmail* when exists(args.to) and args.to endswith \"@example.com\"\n"
    )
    clean(text, tools)
    assert one_error("ask BankManagerTransferFunds when args.amout > 100\n", tools).help == "did you mean 'amount'?"


def test_a_test_of_the_tool_name_limits_where_the_schema_applies(tools):
    clean('deny think, calculate when tool == "think" and len(args.thought) > 5 reason "r"\n', tools)
    clean('deny think, calculate when tool in ["think"] and len(args.thought) > 5 reason "r"\n', tools)
    clean('deny think, calculate when tool != "think" or len(args.thought) > 5 reason "r"\n', tools)
    clean('deny think, calculate when (tool == "think" and args.thought == "x") or (tool == "calculate" and args.expression == "y") reason "r"\n', tools)
    d = one_error('deny think, calculate when tool == "think" or len(args.thought) > 5 reason "r"\n', tools)
    assert d.message == "args.thought is not an argument of calculate"


def test_several_tools_files_combine(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([{"name": "read_file", "parameters": SCHEMA}]))
    (tmp_path / "b.json").write_text(json.dumps({"tools": [{"name": "mcp__gh__get_issue", "inputSchema": {"type": "object", "properties": {"number": {"type": "integer"}}}}]}))
    policy = tmp_path / "p.policy"
    policy.write_text('allow read_file when args.path startswith "/tmp"\nallow mcp__gh__* when args.number > 0\n')
    result = run("policy", "check", policy, "--tools", tmp_path / "a.json", "--tools", tmp_path / "b.json")
    assert result.exit_code == 0, result.stderr
    assert "checked against 2 tools of" in result.stdout
    assert run("policy", "check", policy, "--tools", tmp_path / "a.json").exit_code == 2  # mcp__gh__* matches nothing


def test_a_schema_that_is_not_an_object_accepts_any_argument():
    tools = ToolSchemas.from_json([{"name": "t", "parameters": {"type": "string"}}, {"name": "u", "parameters": True}])
    clean("allow t, u when args.anything == 1\n", tools)
