"""Hypothesis strategies for whole policies, written as token lists so that the layout (spaces,
line breaks, redundant parentheses, comments between any two tokens) can be randomized apart from
the meaning. Used by tests/test_fmt.py (fmt keeps meaning and comments, and is idempotent) and
tests/test_explain.py (the traced predicates return what the compiled ones return).

Conditions only use forms the checker accepts for fields of unknown type, so most generated
policies load and can decide calls; `calls()` draws calls that make those conditions hold, fail
and error (missing fields, wrong types, shell the parser refuses).
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

TOOLS = ["read_file", "Bash", "deploy", "mcp__fs__read", "tool.v2", "my tool", "deny", "when_x", "a-b"]
SELECTORS = TOOLS + ["mcp__fs__*", "tool?v2", "*"]
GROUPS = ["admins", "sec"]
KEYS = ["a", "b", "flag", "items", "cmd", "p", "u", "in", "reason", "x y", "n", "o"]


def q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def selector_tokens(name: str) -> list[str]:
    bare = name.replace("_", "a").replace("*", "a").replace("?", "a").replace(".", "a").replace("-", "a")
    if bare.isalnum() and bare.isascii() and name not in ("deny", "allow", "ask", "when", "reason", "id"):
        return [name]
    return [q(name)]


# --- conditions as (kind, tokens) -------------------------------------------------------------
# kind: "atom" (a comparison or call: may stand anywhere but under a comparison), "path" (a bare
# field), "not", "and", "or", "quant" (must be parenthesized as an operand of and/or/not).

STRINGS = st.sampled_from(["", "x", "rm", "/home/u", "a b", "é", "\"q\"", "tab\there", "#not a comment", "ls*", "a@X.org", "{\"a\": 1}", "1"])
NUMBERS = st.sampled_from(["0", "1", "-3", "2.5", "1e3", "10"])


@st.composite
def field_path(draw, root: str = "args") -> list[str]:
    key = draw(st.sampled_from(["a", "b", "n", "in", "reason", "x y", "items"]))
    tokens = [root] + ([".", key] if key != "x y" else ["[", q(key), "]"])
    if draw(st.integers(0, 5)) == 0:
        tokens += ["[", draw(st.sampled_from(["0", "-1"])), "]"]
    return tokens


@st.composite
def literal(draw) -> list[str]:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return [q(draw(STRINGS))]
    if kind == 1:
        return [draw(NUMBERS)]
    if kind == 2:
        return [draw(st.sampled_from(["true", "false", "null"]))]
    items = draw(st.lists(st.one_of(STRINGS.map(q), NUMBERS), max_size=4))
    tokens = ["["]
    for i, item in enumerate(items):
        tokens += ([","] if i else []) + [item]
    if items and draw(st.booleans()):
        tokens.append(",")
    return tokens + ["]"]


# --- arithmetic, joined lists, projections and aggregates (dsl.expressions) ---

NUMBER_FIELDS = [["args", ".", "n"], ["args", ".", "a"], ["args", ".", "items", "[", "0", "]"], ["args", ".", "o", "[", "0", "]", ".", "price"]]
LIST_SOURCES = [["args", ".", "items"], ["args", ".", "b"], ["args", ".", "o", "[", "*", "]", ".", "price"],
                ["args", ".", "o", "[", "*", "]", ".", "tags", "[", "*", "]"], ["args", ".", "o", "[", "*", "]"],
                ["[", "1", ",", "2.5", "]"], ["args", ".", "items", "+", "args", ".", "b"]]


@st.composite
def arith_tokens(draw, depth: int = 0) -> list[str]:
    """A random arithmetic expression: numbers, number fields, sums and counts, with + - * /,
    unary minus and parentheses (some redundant)."""
    if depth >= 3 or draw(st.integers(0, 2)) == 0:
        roll = draw(st.integers(0, 3))
        if roll == 0:
            return [draw(st.sampled_from(["0", "1", "2.5", "0.1", "0.2", "3", "1e3", "1000.10"]))]
        if roll == 1:
            return list(draw(st.sampled_from(NUMBER_FIELDS)))
        if roll == 2:
            return [draw(st.sampled_from(["sum", "count", "min", "max"])), "("] + list(draw(st.sampled_from(LIST_SOURCES[:3]))) + [")"]
        return ["-"] + draw(arith_tokens(depth + 1))
    left, right = draw(arith_tokens(depth + 1)), draw(arith_tokens(depth + 1))
    op = draw(st.sampled_from(["+", "-", "*", "/"]))
    if draw(st.booleans()):
        right = ["("] + right + [")"]
    if draw(st.integers(0, 3)) == 0:
        left = ["("] + left + [")"]
    return left + [op] + right


FUNCTION_ATOMS = [
    ["matches", "(", "args", ".", "a", ",", '"^[a-z]+$"', ")"],
    ["matches", "(", "args", ".", "a", ",", '"(?i)R"', ")"],
    ['"a"', "in", "keys", "(", "args", ".", "b", ")"],
    ["values", "(", "args", ".", "b", ")", "contains", "1"],
    ["email", "(", "args", ".", "a", ")", ".", "domain", "==", '"x.org"'],
    ["email", "(", "args", ".", "a", ")", ".", "local", "startswith", '"a"'],
    ["url", "(", "args", ".", "u", ",", '"https"', ")", ".", "host", "==", '"docs.python.org"'],
    ["json", "(", "args", ".", "a", ")", "==", "1"],
    ["count", "(", "keys", "(", "json", "(", "args", ".", "a", ")", ")", ")", ">", "0"],
]


@st.composite
def extended_comparison(draw) -> tuple[str, list[str]]:
    form = draw(st.integers(0, 5))
    if form == 5:  # the functions over values
        return "atom", list(draw(st.sampled_from(FUNCTION_ATOMS)))
    if form == 0:
        return "atom", draw(arith_tokens()) + [draw(st.sampled_from(["==", "<", ">=", "!="]))] + draw(arith_tokens())
    if form == 1:  # a join of lists
        return "atom", ["count", "("] + list(draw(st.sampled_from(LIST_SOURCES))) + ["+", "args", ".", "b", ")", ">", "1"]
    if form == 2:  # a projection compared
        source = list(draw(st.sampled_from(LIST_SOURCES)))
        return "atom", source + [draw(st.sampled_from(["==", "contains", "!="]))] + draw(literal())
    if form == 3:  # a quantifier over a join or a projection
        kind = draw(st.sampled_from(["any", "all"]))
        body = draw(st.sampled_from(ITEM_ATOMS))
        return "quant", [kind, "x", "in"] + list(draw(st.sampled_from(LIST_SOURCES))) + [":"] + list(body)
    return "atom", [draw(st.sampled_from(["min", "max"])), "("] + list(draw(st.sampled_from(LIST_SOURCES))) + [")", draw(st.sampled_from(["==", ">"])), draw(NUMBERS)]


@st.composite
def comparison(draw) -> tuple[str, list[str]]:
    form = draw(st.integers(0, 13))
    if form >= 12:
        return draw(extended_comparison())
    left = draw(field_path())
    if form == 0:
        return "atom", left + [draw(st.sampled_from(["==", "!="]))] + draw(literal())
    if form == 1:
        return "atom", left + [draw(st.sampled_from(["<", "<=", ">", ">="]))] + [draw(NUMBERS)]
    if form == 2:
        op = draw(st.sampled_from([["in"], ["not", "in"]]))
        right = draw(literal())
        return "atom", left + op + (right if right[0] == "[" or right[0].startswith('"') else ["[", right[0], "]"])
    if form == 3:
        return "atom", left + [draw(st.sampled_from(["startswith", "endswith", "contains"]))] + [q(draw(STRINGS))]
    if form == 4:
        return "atom", left + ["glob", q(draw(st.sampled_from(["*", "a*", "?", "[ab]*", "**/x"])))]
    if form == 5:
        return "atom", ["len", "("] + left + [")", draw(st.sampled_from([">", "==", "<="])), draw(st.sampled_from(["0", "2"]))]
    if form == 6:
        return "atom", ["exists", "("] + left + [")"]
    if form == 7:
        return "path", ["args", ".", "flag"]
    if form == 8:
        op = draw(st.sampled_from(["under", "glob", "=="]))
        right = [q(draw(st.sampled_from(["/home/u", "/home/u/proj", "/**/.env", "*.py", "/"])))]
        if op == "under" and draw(st.booleans()):
            right = ["context", ".", "cwd"]
        return "atom", ["path", "(", "args", ".", "p", ")"] + ([".", draw(st.sampled_from(["name", "ext"]))] if op == "==" and draw(st.booleans()) else []) + [op] + right
    if form == 9:
        return "atom", ["url", "(", "args", ".", "u", ")", ".", "host", draw(st.sampled_from(["==", "glob", "endswith"])), q(draw(st.sampled_from(["docs.python.org", "*.example.com", ".org"])))]
    if form == 10:
        return "atom", ["lower", "("] + left + [")", "==", q(draw(STRINGS))]
    return "atom", ["tool", "==", q(draw(st.sampled_from(TOOLS)))]


COMMAND_ATOMS = [
    ["c", ".", "program", "==", '"rm"'],
    ["c", ".", "flags", "contains", '"force"'],
    ["c", ".", "argv", "startswith", "[", '"git"', ",", '"push"', "]"],
    ["c", ".", "argv", "==", "[", '"ls"', "]"],
    ["len", "(", "c", ".", "args", ")", ">", "0"],
    ["c", ".", "dynamic"],
    ["c", ".", "wrappers", "contains", '"sudo"'],
]
ITEM_ATOMS = [["x", "==", "1"], ["x", ">", "2"], ["x", "in", "[", "1", ",", "2", "]"], ["x", "startswith", '"a"']]


def _wrap(part: tuple[str, list[str]], ctx: str, extra: bool) -> list[str]:
    kind, tokens = part
    needs = (
        (kind == "or" and ctx in ("and", "not", "or"))
        or (kind == "and" and ctx == "not")
        or (kind == "quant" and ctx in ("and", "or", "not"))
        or (kind == "and" and ctx == "and")
    )
    return ["("] + tokens + [")"] if needs or extra else tokens


@st.composite
def condition(draw, depth: int = 0, atoms=None) -> tuple[str, list[str]]:
    if atoms is not None:
        leaf = st.sampled_from(atoms).map(lambda t: ("path" if len(t) == 3 else "atom", list(t)))
    else:
        leaf = comparison()
    if depth >= 3 or draw(st.integers(0, 2)) == 0:
        return draw(leaf)
    form = draw(st.integers(0, 4 if atoms is None else 3))
    if form == 0:
        inner = draw(condition(depth + 1, atoms))
        return "not", ["not"] + _wrap(inner, "not", draw(st.booleans()) and inner[0] != "quant")
    if form in (1, 2):
        word = "and" if form == 1 else "or"
        parts = draw(st.lists(condition(depth + 1, atoms), min_size=2, max_size=4))
        tokens: list[str] = []
        for i, part in enumerate(parts):
            tokens += ([word] if i else []) + _wrap(part, word, draw(st.integers(0, 4)) == 0)
        return word, tokens
    if form == 3:
        inner = draw(condition(depth + 1, atoms))
        return inner[0], ["("] + inner[1] + [")"]
    kind = draw(st.sampled_from(["any", "all"]))
    if draw(st.booleans()):
        body = draw(condition(depth + 1, COMMAND_ATOMS))
        return "quant", [kind, "c", "in", "shell", "(", "args", ".", "cmd", ")", ":"] + body[1]
    body = draw(condition(depth + 1, ITEM_ATOMS))
    return "quant", [kind, "x", "in", "args", ".", "items", ":"] + body[1]


# --- statements -------------------------------------------------------------------------------


@st.composite
def rule(draw, n: int) -> list[str]:
    effect = draw(st.sampled_from(["allow", "deny", "ask"]))
    selectors = draw(st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=4, unique=True))
    tokens = [effect]
    for i, sel in enumerate(selectors):
        tokens += ([","] if i else []) + selector_tokens(sel)
    if draw(st.integers(0, 4)) > 0:
        tokens += ["when"] + draw(condition())[1]
    clauses = []
    if effect == "deny" or draw(st.booleans()):
        clauses.append(["reason", q(draw(st.sampled_from(["Not here.", "Use the \"safe\" tool", "a # b", "é ✓"])))])
    if effect == "ask":
        if draw(st.booleans()):
            clauses.append(["approvers", "1", "from", draw(st.sampled_from(GROUPS))])
        elif draw(st.booleans()):
            clauses.append(["approvers", "1", "from", "[", '"ann"', ",", '"bob"', "]"])
        if draw(st.booleans()):
            clauses.append(["decisions", "approve", ",", "reject"])
        if draw(st.booleans()):
            clauses.append(["timeout", draw(st.sampled_from(["30m", "1h30m", "2d"]))] + (["else", "reject", '"Expired."'] if draw(st.booleans()) else []))
    if draw(st.integers(0, 3)) == 0:
        clauses.append(["id", q(f"r{n}")])
    order = draw(st.permutations(range(len(clauses))))
    for i in order:
        tokens += clauses[i]
    return tokens


@st.composite
def policy_tokens(draw) -> list[list[str]]:
    """The statements of a policy, each a token list."""
    statements: list[list[str]] = []
    if draw(st.booleans()):
        statements.append(["policy", q("gen")])
    if draw(st.booleans()):
        statements.append(["home", q("/home/u")])
    statements.append(["group", "admins", "=", "[", '"ann"', ",", '"bob"', "]"])
    statements.append(["group", "sec", "=", "[", '"bob"', ",", '"cat"', ",", '"dan"', "]"])
    if draw(st.booleans()):
        effect = draw(st.sampled_from(["ask", "deny", "allow"]))
        tokens = ["default", effect]
        if effect == "deny" or draw(st.booleans()):
            tokens += draw(st.sampled_from([[q("Nothing else runs.")], ["reason", q("Nothing else runs.")]]))
        if effect == "ask" and draw(st.booleans()):
            tokens += ["approvers", "1", "from", "admins", "timeout", "2h"]
        statements.append(tokens)
    for n in range(draw(st.integers(1, 6))):
        statements.append(draw(rule(n)))
    order = draw(st.permutations(range(len(statements))))
    return [statements[i] for i in order]


SEPARATORS = [" ", " ", " ", "\n", "  ", "\n\t", "\n\n", " \r\n"]


@st.composite
def layout(draw, statements: list[list[str]]) -> tuple[str, list[str]]:
    """Policy text for `statements` with random spacing and comments between tokens (and
    between statements, and at the start and end). Returns the text and its comments."""
    comments: list[str] = []

    def separator(between_statements: bool) -> str:
        roll = draw(st.integers(0, 9))
        if roll == 0:
            text = f"# c{len(comments)}" + draw(st.sampled_from(["", " ", "  trailing", " # more", " é"]))
            comments.append(text.rstrip())
            return draw(st.sampled_from([" ", "\n", "\n  ", "\t"])) + text + "\n"
        if between_statements:
            return draw(st.sampled_from(["\n", "\n\n", " ", "\n\n\n"]))
        return draw(st.sampled_from(SEPARATORS))

    parts = [separator(True) if draw(st.booleans()) else ""]
    for s in statements:
        for i, token in enumerate(s):
            if i:
                parts.append(separator(False))
            parts.append(token)
        parts.append(separator(True))
    return "".join(parts), comments


@st.composite
def policy_texts(draw) -> tuple[str, list[str]]:
    return draw(layout(draw(policy_tokens())))


COMMANDS = [
    "ls -la", "rm -rf /", "sudo rm -fr /tmp/x", "git push --force origin main", "git push", "echo 'unterminated",
    "cd src && ls", "cat <<'EOF' | sh\nrm -rf /\nEOF", "x=$(whoami); echo $x", "timeout 5 rm -r -f build",
]
URLS = ["https://docs.python.org/3/", "https://a.example.com/x", "http://EXAMPLE.com.", "not a url", "https://user@evil.org/"]
PATHS = ["/home/u/proj/.env", ".env", "~/x", "src/../../etc/passwd", "/home/u/projX/a.py", "", "/"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([2.5, 1000.0]), STRINGS)


@st.composite
def calls(draw, tools=TOOLS) -> tuple[str, dict, dict]:
    args: dict = {}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=8, unique=True)):
        if key == "items":
            value = draw(st.lists(SCALARS, max_size=4))
        elif key == "cmd":
            value = draw(st.sampled_from(COMMANDS) | SCALARS)
        elif key == "p":
            value = draw(st.sampled_from(PATHS) | SCALARS)
        elif key == "u":
            value = draw(st.sampled_from(URLS) | SCALARS)
        elif key == "flag":
            value = draw(st.booleans() | SCALARS)
        elif key == "o":
            item = st.fixed_dictionaries({"price": st.sampled_from([0.1, 0.2, 250.1, 3, -1, "x"]),
                                          "tags": st.lists(st.sampled_from(["a", 1]), max_size=2)})
            value = draw(st.lists(item | SCALARS, max_size=3) | SCALARS)
        else:
            value = draw(SCALARS | st.lists(SCALARS, max_size=3))
        args[key] = value
    context = draw(st.sampled_from([{}, {"cwd": "/home/u/proj"}, {"cwd": "/home/u/proj", "home": "/home/u"}]))
    return draw(st.sampled_from(tools)), args, context
