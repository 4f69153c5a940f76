"""The run's history as conditions read it: `run`, `calls()`, `total()`, `sources()`,
`from_user()`, `from_tool()` (docs/policy-language.md, "History and provenance").

A `History` holds the earlier calls of one run, oldest first, each a call record (a dict, so that
field reads, quantifiers and `len()` treat it as any JSON object)::

    {"seq": 12, "tool": "read_webpage", "args": {...}, "effect": "allow", "status": "executed",
     "decided_by": [], "rules": ["allow-1a2b3c4d"], "result": {...} | None}

and the indexes that keep lookups independent of the run's length: the calls per tool name, the
number of calls per (field, value) for `tool`, `effect` and `status`, and the words of every
argument and kept result (provenance). The Gate builds one per run as it folds the ledger
(ledger.workflow.history); `History.from_calls` builds one from plain records (tests, `policy
test` cases, hosts without a ledger). A condition only reads it.

What "appears" means (`words`, `normalize`): a value, normalized, equals a whole string or number
of the source, normalized, or one of its words. No regular expression is used: splitting is
`str.translate` and `str.split`, so building the index is linear in the recorded text and a
lookup is a hash lookup.

Bounds: at most RUN_MAX_CALLS calls and RUN_MAX_BYTES bytes of recorded arguments and results
(their JSON text) per run. Past either, the history is `broken`: its indexes are dropped and
every history read raises EvalError (a condition that errors never allows), the same way on
every replay, since it depends on the ledger prefix alone.
"""

from __future__ import annotations

import bisect
from decimal import Decimal
from typing import Any, Iterable, Mapping

from dsl import values
from dsl.cache import BoundedCache, char_bytes
from dsl.values import EvalError

RUN_MAX_CALLS = 10_000
"""The most calls of one run a history keeps (past it, history reads are errors)."""
RUN_MAX_BYTES = 4 * 1024 * 1024
"""The most bytes of arguments and results (JSON text, as recorded) of one run a history keeps."""
WORD_MAX = 1024
_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_DOMAIN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
"""A value or word longer than this (characters) only matches a whole string, never a word."""

STATUSES = ("denied", "pending", "allowed", "running", "executed", "failed", "rejected", "responded",
            "expired", "cancelled")
COUNTED_FIELDS = ("tool", "effect", "status")
"""The call fields whose values the history counts (`any c in run: c.tool == "x"` is a count)."""

ORIGIN_KINDS = ("user", "args", "result")

# Word separators: white space (str.split) and these characters, mapped to a space.
_SEPARATORS = str.maketrans({c: " " for c in "<>()[]{}\"'`,;"})
_TRIMMED = ".:!?"
_IBAN_MIN, _IBAN_MAX = 15, 34  # ISO 13616: the shortest (Norway) and longest IBAN


def _is_ascii_alnum(text: str) -> bool:
    return text.isascii() and text.isalnum()


def _iban_head(word: str) -> bool:
    """Two letters, two digits, then letters and digits: how an IBAN starts (ISO 13616)."""
    return len(word) >= 4 and _is_ascii_alnum(word) and word[:2].isalpha() and word[2:4].isdigit()


def normalize(value: Any) -> str | None:
    """The key a value is looked up under, or None for a value that is neither a string nor a
    number (booleans and null appear nowhere). Strings: spaces at the ends removed; an e-mail
    address (one `@`, no space) in lower case; a URL (`scheme://...`) with its scheme and host in
    lower case and a final `/` dropped; an IBAN-shaped text without its spaces, in upper case.
    Numbers: their JSON text, an integral float as an integer (`500.0` is `500`)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if text.isidentifier() and not (len(text) >= _IBAN_MIN and text[2:4].isdigit()):
        return text  # a plain word (most words): nothing to normalize
    if " " not in text and "\t" not in text and "\n" not in text:
        if text.count("@") == 1 and not text.startswith("@") and not text.endswith("@"):
            return text.lower()
        scheme, sep, rest = text.partition("://")
        if sep and scheme.isascii() and scheme.isalpha():
            host, slash, path = rest.partition("/")
            text = f"{scheme.lower()}://{host.lower()}{slash}{path}"
            return text[:-1] if text.endswith("/") else text
        if _IBAN_MIN <= len(text) <= _IBAN_MAX and _iban_head(text):
            return text.upper()
        return text
    groups = text.split(" ")
    if all(0 < len(g) <= 4 for g in groups[1:]) and len(groups[0]) == 4:
        squeezed = "".join(groups)
        if _IBAN_MIN <= len(squeezed) <= _IBAN_MAX and _iban_head(squeezed):
            return squeezed.upper()
    return text


def _addresses_in(word: str) -> list[str]:
    """The e-mail addresses inside a word: around each `@`, the characters addresses use (letters,
    digits and . _ % + - before it; letters, digits, . and - after it, a final dot dropped).
    Linear: no `@` is in either set, so each scan stops at the next `@` at the latest."""
    out, at = [], word.find("@")
    while at > 0:
        start, end = at, at + 1
        while start > 0 and word[start - 1] in _LOCAL_CHARS:
            start -= 1
        while end < len(word) and word[end] in _DOMAIN_CHARS:
            end += 1
        address = word[start:end].rstrip(".")
        if start < at and len(address) > at - start + 1:
            out.append(address)
        at = word.find("@", at + 1)
    return out


def words(text: str) -> set[str]:
    """The normalized words of a text (see the module docstring): split at white space and
    `< > ( ) [ ] { } " ' ` , ;`, `. : ! ?` trimmed from a word's end, words longer than WORD_MAX
    left out; the groups of an IBAN written with spaces (`DE89 3704 0044 ...`) also joined into
    one word. Linear in the text's length."""
    out: set[str] = set()
    parts = text.translate(_SEPARATORS).split()
    n = len(parts)
    for i, part in enumerate(parts):
        word = part.rstrip(_TRIMMED)
        if not word or len(word) > WORD_MAX:
            continue
        key = normalize(word)
        if key is not None:
            out.add(key)
        if "@" in word:
            # every address inside a longer word: after a scheme or a name (`mailto:evil@x.example`,
            # `href=mailto:...`, `to=bob@x.example`), before a query or an entity
            # (`...?subject=Hi`, `...&ref=1`, `...&gt;`), between bars: the address's own
            # characters on each side of each `@` (a word is at most WORD_MAX characters)
            for address in _addresses_in(word):
                if address != word:
                    out.add(address.lower())
        if _iban_head(word) and len(word) <= 4 and i + 1 < n:
            # an IBAN in groups of four: join the groups that follow (at most 34 characters).
            # Every join of IBAN length is a word, not only the longest: the prose after an IBAN
            # may be short words too (`... 0130 00 or mail`), which the longest join swallows.
            joined, j = word, i + 1
            while j < n and len(joined) < _IBAN_MAX:
                group = parts[j].rstrip(_TRIMMED)
                if not (group and len(group) <= 4 and _is_ascii_alnum(group)) or len(joined) + len(group) > _IBAN_MAX:
                    break
                joined += group
                j += 1
                if len(joined) >= _IBAN_MIN:
                    out.add(joined.upper())
                if parts[j - 1] != group:  # a trimmed end closes the IBAN
                    break
    return out


def _leaves(value: Any, field: str) -> Iterable[tuple[str, Any]]:
    """(field path, value) of every string and number inside a JSON value, object keys included
    (`{"credit_card_1": {...}}` names credit_card_1); iterative, so a deep value cannot exhaust
    the stack."""
    stack = [(field, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                here = f"{where}.{k}" if isinstance(k, str) and k.isidentifier() else f"{where}[{k!r}]"
                stack.append((here, item))
                if isinstance(k, str):
                    yield here, k
        elif isinstance(v, (list, tuple)):
            for i in range(len(v) - 1, -1, -1):
                stack.append((f"{where}[{i}]", v[i]))
        elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
            yield where, v


def _keys_of(value: Any) -> set[str]:
    """The normalized keys a leaf is found under: the whole value, and each of its words."""
    keys: set[str] = set()
    whole = normalize(value)
    if whole is not None:
        keys.add(whole)
    if isinstance(value, str):
        keys |= words(value)
    return keys


def _json_size(value: Any) -> int:
    """The bytes a value takes in the ledger, about (its JSON text, UTF-8)."""
    try:
        import msgspec

        return len(msgspec.json.encode(value))
    except Exception:  # not JSON (a host's own objects): count its text
        return len(repr(value).encode("utf-8", "replace"))


_CALL_KEYS = ("tool", "args", "seq", "effect", "status", "decided_by", "rules", "result")  # of a call in History.from_calls

class History:
    """The earlier calls of one run and their indexes (module docstring). Built by `add_call`
    and the `set_*` methods, in ledger order; read by the conditions through `calls_list`,
    `tool_calls`, `count`, `sources`. `limit`: a view of the calls before that seq only (an
    edit's re-decision, see `before`)."""

    __slots__ = ("calls", "_seqs", "_by_tool", "_counts", "_words", "_results", "bytes", "broken", "limit", "_tool_cache",
                 "_glob_cache")

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self._seqs: list[int] = []
        self._by_tool: dict[str, list[dict]] = {}
        self._counts: dict[tuple[str, Any], int] = {}
        self._words: dict[str, list[tuple[str, str, int, str]]] = {}
        # key → {tool: the lowest seq of a kept result of that tool where the key appears}: what
        # from_tool() reads, so that a lookup costs the tools holding the value, not its
        # occurrences (a value in every result, looked up in a scan over the run, was quadratic)
        self._results: dict[str, dict[str, int]] = {}
        self.bytes = 0
        self.broken: str | None = None
        self.limit: int | None = None
        self._tool_cache: dict[str, list[dict]] = {}
        # (key, glob) → the lowest seq of a kept result of a tool the glob covers, or None: at
        # most GLOB_CACHE_MAX entries, emptied when a result is recorded
        self._glob_cache: dict[tuple[str, str], int | None] = {}

    # --- building -----------------------------------------------------------------------------

    @classmethod
    def from_calls(cls, calls: Iterable[Mapping[str, Any]]) -> "History":
        """A history from plain call records, oldest first: each a mapping with `tool` and
        optionally `args` ({}), `seq` (its position from 1), `effect` ("allow"), `status`
        ("executed" when a `result` is given, else from the effect), `decided_by` ([]), `rules`
        ([]) and `result` (None). Raises ValueError for a record of another shape, or one nested
        too deeply to index (a ledger's values nest at most 100 levels: ledger.digest.MAX_NESTING)."""
        try:
            return cls._from_calls(calls)
        except RecursionError:
            raise ValueError("the history's values nest too deeply to index (a ledger records at most 100 levels)") from None

    @classmethod
    def _from_calls(cls, calls: Iterable[Mapping[str, Any]]) -> "History":
        history = cls()
        if isinstance(calls, (Mapping, str, bytes)):  # an object would be read key by key
            raise ValueError("a history is a list of calls (a JSON array), not " + ("an object" if isinstance(calls, Mapping) else "a text"))
        for n, call in enumerate(calls, 1):
            if not isinstance(call, Mapping) or not isinstance(call.get("tool"), str):
                raise ValueError(f"call {n} of the history must be an object with a string tool")
            unknown = sorted(str(k) for k in call if k not in _CALL_KEYS)
            if unknown:  # a misspelt key (`stauts`, `amount` beside `args`) must not pass unseen
                raise ValueError(f"call {n} of the history has unknown keys {', '.join(unknown)}; its keys are "
                                 + ", ".join(_CALL_KEYS))
            args = call.get("args", {})
            if not isinstance(args, dict):
                raise ValueError(f"call {n} of the history: args must be an object")
            effect = call.get("effect", "allow")
            if effect not in ("allow", "deny", "ask"):
                raise ValueError(f"call {n} of the history: effect must be allow, deny or ask")
            seq = call.get("seq", n)
            if type(seq) is not int or (history._seqs and seq <= history._seqs[-1]):
                raise ValueError(f"call {n} of the history: seq must be a number larger than the one before")
            record = history.add_call(seq, call["tool"], args, effect, tuple(call.get("rules", ())))
            result = call.get("result")
            default = "executed" if result is not None else {"allow": "executed", "deny": "denied", "ask": "pending"}[effect]
            status = call.get("status", default)
            if status not in STATUSES:
                raise ValueError(f"call {n} of the history: status must be one of {', '.join(STATUSES)}")
            history.set_status(record, status)
            for who in call.get("decided_by", ()):
                history.add_decider(record, str(who))
            if result is not None:
                history.set_result(record, result)
        return history

    def add_call(self, seq: int, tool: str, args: dict, effect: str, rules: tuple[str, ...] = ()) -> dict | None:
        """Record a proposal (its status follows from `effect` until set). Returns its record,
        or None when the history is broken."""
        if self.broken is not None:
            return None
        if len(self.calls) >= RUN_MAX_CALLS:
            self.fail(f"the run has more than {RUN_MAX_CALLS:,} calls, more than its history keeps")
            return None
        status = {"allow": "allowed", "deny": "denied", "ask": "pending"}.get(effect, "pending")
        record = {"seq": seq, "tool": tool, "args": args, "effect": effect, "status": status,
                  "decided_by": [], "rules": list(rules), "result": None}
        self.calls.append(record)
        self._seqs.append(seq)
        self._by_tool.setdefault(tool, []).append(record)
        self._tool_cache.clear()
        for field in COUNTED_FIELDS:
            self._bump((field, record[field]), 1)
        self._index(args, "args", tool, seq)
        return record

    def set_status(self, record: dict | None, status: str) -> None:
        if record is None or self.broken is not None or record["status"] == status:
            return
        self._bump(("status", record["status"]), -1)
        record["status"] = status
        self._bump(("status", status), 1)

    def add_decider(self, record: dict | None, who: str) -> None:
        if record is not None and self.broken is None and who not in record["decided_by"]:
            record["decided_by"].append(who)

    def set_args(self, record: dict | None, args: dict) -> None:
        """An edit: the call's arguments are now `args` (the old ones stay sources: they appeared)."""
        if record is None or self.broken is not None:
            return
        record["args"] = args
        self._index(args, "args", record["tool"], record["seq"])

    def set_result(self, record: dict | None, result: Any) -> None:
        if record is None or self.broken is not None:
            return
        record["result"] = result
        self._glob_cache.clear()
        self._index(result, "result", record["tool"], record["seq"])

    def fail(self, reason: str) -> None:
        """Past a bound: drop the indexes; every read raises EvalError(reason) from now on."""
        self.broken = reason
        self.bytes = 0  # nothing is kept any more
        self.calls, self._seqs, self._by_tool, self._counts, self._words, self._results = [], [], {}, {}, {}, {}
        self._tool_cache, self._glob_cache = {}, {}

    def _bump(self, key: tuple[str, Any], by: int) -> None:
        n = self._counts.get(key, 0) + by
        if n:
            self._counts[key] = n
        else:
            self._counts.pop(key, None)

    def _index(self, value: Any, kind: str, tool: str, seq: int) -> None:
        self.bytes += _json_size(value)
        if self.bytes > RUN_MAX_BYTES:
            self.fail(f"the run's recorded arguments and results exceed {RUN_MAX_BYTES // (1024 * 1024)} MiB, more than its history keeps")
            return
        index, results = self._words, self._results if kind == "result" else None
        for field, leaf in _leaves(value, kind):
            origin = (kind, tool, seq, field)
            for key in _keys_of(leaf):
                index.setdefault(key, []).append(origin)
                if results is not None:
                    tools = results.setdefault(key, {})
                    if tools.get(tool, seq) >= seq:
                        tools[tool] = seq

    # --- reading (the conditions) ---------------------------------------------------------------

    def before(self, seq: int) -> "History":
        """A view of the calls proposed before `seq` (an edit of request `seq` is decided again
        with the run as it is now, but without the request itself and the calls after it)."""
        if not self._seqs or self._seqs[-1] < seq:
            return self
        view = History.__new__(History)
        for name in History.__slots__:
            setattr(view, name, getattr(self, name))
        view.limit = seq
        view._tool_cache, view._glob_cache = {}, {}
        return view

    def check(self) -> None:
        if self.broken is not None:
            raise EvalError(self.broken)

    def calls_list(self) -> list[dict]:
        """`run`: the earlier calls, oldest first."""
        self.check()
        if self.limit is None:
            return self.calls
        return self.calls[: bisect.bisect_left(self._seqs, self.limit)]

    def tool_calls(self, pattern: str) -> list[dict]:
        """`calls(PATTERN)`: the earlier calls of the tools the name or glob `pattern` covers."""
        self.check()
        found = self._tool_cache.get(pattern)
        if found is None:
            if "*" in pattern or "?" in pattern:
                regex = values.selector_regex(pattern)
                tools = [t for t in self._by_tool if regex.match(t)]
                if len(tools) == 1:
                    found = self._by_tool[tools[0]]
                else:
                    found = sorted((c for t in tools for c in self._by_tool[t]), key=_seq_of)
            else:
                found = self._by_tool.get(pattern, [])
            if len(self._tool_cache) < 64:
                self._tool_cache[pattern] = found
        if self.limit is not None:
            found = [c for c in found if c["seq"] < self.limit]
        return found

    def count(self, field: str, value: Any) -> int:
        """How many earlier calls have `field` (one of COUNTED_FIELDS) equal to `value`."""
        self.check()
        if self.limit is not None:
            return sum(1 for c in self.calls_list() if c[field] == value and type(c[field]) is type(value))
        return self._counts.get((field, value), 0) if type(value) is str else 0

    def origins(self, value: Any) -> list[tuple[str, str, int, str]]:
        """(kind, tool, seq, field) of every argument and kept result of an earlier call where
        `value` appears, in ledger order."""
        self.check()
        key = _lookup_key(value)
        found = self._words.get(key, ()) if key is not None else ()
        if self.limit is not None:
            found = [o for o in found if o[2] < self.limit]
        return list(found)


    def in_result_of(self, value: Any, pattern: str) -> bool:
        """`from_tool(value, pattern)`: whether `value` appears in the kept result of an earlier
        call of a tool the name or selector glob `pattern` covers. A name costs one lookup; a
        glob, the tools whose results hold the value, once per (value, glob) until a result is
        recorded (`_glob_cache`), so a scan over the run stays linear in it."""
        self.check()
        key = _lookup_key(value)
        tools = self._results.get(key) if key is not None else None
        if not tools:
            return False
        if "*" in pattern or "?" in pattern:
            cached = (key, pattern)
            if cached in self._glob_cache:
                first = self._glob_cache[cached]
            else:
                regex = values.selector_regex(pattern)
                first = min((s for t, s in tools.items() if regex.match(t)), default=None)
                if len(self._glob_cache) < GLOB_CACHE_MAX:
                    self._glob_cache[cached] = first
        else:
            first = tools.get(pattern)
        return first is not None and (self.limit is None or first < self.limit)


    def first_results(self, value: Any, pattern: str, at_most: int = 10) -> tuple[int, ...]:
        """For explanations of `from_tool(value, pattern)`: the seq of the first earlier call of
        each tool `pattern` covers whose kept result holds `value`, in ledger order, at most
        `at_most` of them. Costs the tools whose results hold the value (not every occurrence:
        an explanation of a scan over the run stays linear in it)."""
        self.check()
        key = _lookup_key(value)
        tools = self._results.get(key) if key is not None else None
        if not tools:
            return ()
        regex = values.selector_regex(pattern)
        seqs = sorted(s for t, s in tools.items() if regex.match(t) and (self.limit is None or s < self.limit))
        return tuple(seqs[:at_most])


GLOB_CACHE_MAX = 4096
"""The most (value, glob) answers of from_tool() a history keeps (each a tuple of two strings the
history holds already and an int: under 1 MB)."""


def _seq_of(call: dict) -> int:
    return call["seq"]


EMPTY = History()
"""The history of a call without one (no ledger, no run): no calls."""


def _lookup_key(value: Any) -> str | None:
    """The key `value` is looked up under; raises EvalError for a value that cannot appear."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise EvalError(f"only a string or a number has an origin, not {values._a(values.kind(value))}")
    key = normalize(value)
    if key is not None and isinstance(value, str) and len(key) > WORD_MAX:
        return key  # a long value: only a whole string can be it (words are never this long)
    return key


# The words of user prompts: the same prompt comes with every call of a run.
_PROMPT_WORDS = BoundedCache(4 * 1024 * 1024, "history.prompt_words")


def _prompt_keys(context: Mapping[str, Any]) -> frozenset[str] | None:
    """The keys of `context.user_prompt` (a string or a list of strings), or None when absent.
    Raises EvalError for another type."""
    prompt = context.get("user_prompt") if isinstance(context, dict) else None
    if prompt is None:
        return None
    texts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise EvalError("context.user_prompt must be a string or a list of strings")
    keys: set[str] = set()
    for text in texts:
        found = _PROMPT_WORDS.get(text)
        if found is None:
            found = frozenset(_keys_of(text))
            _PROMPT_WORDS.put(text, found, 2 * char_bytes(text) + 200)
        keys |= found
    return frozenset(keys)


# --- the functions conditions call ------------------------------------------------------------


def of(env_history: History | None) -> History:
    return EMPTY if env_history is None else env_history


def sources(history: History | None, context: Mapping[str, Any], value: Any) -> list[dict]:
    """`sources(x)`: the origins of `value`: `{"kind": "user", "tool": None, "seq": None, "field":
    "context.user_prompt"}` when it appears in the user's request, then one per argument or kept
    result of an earlier call where it appears, in ledger order."""
    key = _lookup_key(value)
    out = []
    prompt = _prompt_keys(context)
    if prompt is not None and key in prompt:
        out.append({"kind": "user", "tool": None, "seq": None, "field": "context.user_prompt"})
    for kind, tool, seq, field in of(history).origins(value):
        out.append({"kind": kind, "tool": tool, "seq": seq, "field": field})
    return out


def from_user(context: Mapping[str, Any], value: Any) -> bool:
    """`from_user(x)`: `value` appears in `context.user_prompt`. Raises EvalError when the
    context has no user_prompt (no evidence either way: never allows)."""
    key = _lookup_key(value)
    prompt = _prompt_keys(context)
    if prompt is None:
        raise EvalError("the call's context has no user_prompt, so from_user() cannot be decided")
    return key in prompt


def from_tool(history: History | None, value: Any, pattern: str) -> bool:
    """`from_tool(x, PATTERN)`: `value` appears in the kept result of an earlier call of a tool
    that `pattern` (a name or a selector glob) covers."""
    return of(history).in_result_of(value, pattern)


def total(items: Any, field: str) -> Decimal:
    """`total(LIST, "a.b")`: the sum of the number at the dotted path `field` of every object
    of `items`, in exact decimals as `sum()` adds (dsl.numbers: 0.7 + 0.1 is 0.8, where binary
    floats give 0.7999999999999999, under a cap of 0.8). Raises EvalError for a list that is not
    one, a missing field, a non-number, NaN or an infinity, or a total out of range."""
    from dsl import numbers

    if values.kind(items) != "list":
        raise EvalError(f"total() sums over a list, not {values._a(values.kind(items))}")
    keys = field.split(".")
    out = Decimal(0)
    for i, item in enumerate(items):
        v = item
        for key in keys:
            if not isinstance(v, dict) or key not in v:
                raise EvalError(f"item {i} has no field {field}")
            v = v[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise EvalError(f"{field} of item {i} is {values._a(values.kind(v))}, not a number")
        out = numbers.arithmetic("+", out, v)
    return out


def seqs_of(value: Any) -> tuple[int, ...]:
    """The seqs a history value names: of call records (`run`, `calls()`) and of origins
    (`sources()`), for explanations."""
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(v["seq"] for v in value if isinstance(v, dict) and type(v.get("seq")) is int)
