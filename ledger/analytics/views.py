"""SQL over a ledger: DuckDB views that read the JSON Lines segments in place.

    con = connect("ledger-dir")
    con.sql("SELECT tool, status, count(*) FROM requests GROUP BY ALL").show()
    columns, rows = query("ledger-dir", "SELECT * FROM chain_breaks")

Nothing is converted or copied into tables: every view is a (temporary) SQL view over
`read_blob('<dir>/events-*.jsonl')`, so each query reads the files as they are at that moment,
including segments started after `connect`. Every column has an explicit type: the event bodies
are parsed with a structure derived from the event Structs in ledger.events, never with DuckDB's
type sampling, so a member that first appears after millions of lines is still a column.

How a line is read, byte-exactly (docs/ledger-format.md; ledger.store.lines):
the segment is read as a BLOB and cast to VARCHAR, which writes every byte that is not printable
ASCII, and every backslash, as the four characters `\\xHH`. In that text a newline byte can only
appear as `\\x0A`, so splitting on it yields the lines, and casting a piece back to BLOB restores
its bytes exactly. BODY is cut out as ledger.store.lines.split does (after `{"body":`, up to the first
`,"hash":"`), hashed with SHA-256 as stored, decoded as UTF-8 and checked against the event
Structs (kinds, required members, member types, no unknown members), the same checks
`msgspec` makes when ledger.events.decode_event reads the line.

Views (every column, with its type and unit, in `COLUMNS`):

- `ledger_lines`: one row per complete line: where it is and its layout pieces.
- `torn_tail`: the bytes after the last newline of the last segment (a crash mid-write), if any.
- `events`: one row per line, every body member of every kind as a typed column.
- `requests`: one row per request (a `proposed` event): its state folded from its events.
- `pending`, `decision_times`, `rates_by_tool`, `rates_by_rule`, `rates_by_approver`.
- `chain_breaks`: one row per problem with the chain or the line format (what `verify` calls
  kind "chain" or "format").
- `violations`: the workflow rules of ledger.workflow.machine written in SQL, one row per offending event.

`requests` and `violations` fold each request's events in SQL (window functions) the way
ledger.workflow.Workflow applies them. On a lawful ledger `requests` equals the replayed
RequestStates; on an unlawful one the first `violations` row (by seq) is the Violation verify
reports, and later rows judge each event against the history as recorded before it, unlawful
events included (the Python fold stops at the first). Likewise the first `chain_breaks` row by
(seq, check_order) is verify's chain or format problem; links are checked line to line, so a
removed line gives rows where it was, not at every later line.

Times are TIMESTAMPTZ (UTC; a connection made here has TimeZone set to UTC), durations are
seconds (DOUBLE), shares are fractions in [0, 1].

A line longer than ledger.store.lines.MAX_LINE_BYTES (docs/ledger-format.md, section 2), torn or
not, is not read: DuckDB's read_blob holds a whole segment, and one such line would make every
query hold it and copies of it (about six times a 200 MB torn tail, measured). `connect` first
scans the segments in bounded chunks (ledger.store.scan.long_lines) and refuses such a ledger with
LinesTooLong, naming the segment, the line and its byte offset; `countersign ledger verify`
reads it line by line and reports it.

Requires DuckDB >= 1.3 (`try()`). duckdb is imported only inside the functions of this module.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi

from ledger import events as ev
from ledger.store.lines import DATA_MARK, HASH_MARK, MAX_LINE_BYTES, PREFIX, SUFFIX
from ledger.store.scan import long_lines
from ledger.store.log import SEGMENT_GLOB, LedgerUnreadable, list_segments
from ledger.workflow.machine import FINAL

VIEWS = (
    "ledger_lines",
    "torn_tail",
    "events",
    "requests",
    "pending",
    "decision_times",
    "rates_by_tool",
    "rates_by_rule",
    "rates_by_approver",
    "chain_breaks",
    "violations",
)

_T = "TIMESTAMPTZ (UTC)"
_RATES = {
    "requests": "BIGINT: requests (proposed calls)",
    "allowed": "BIGINT: requests the policy allowed",
    "denied": "BIGINT: requests the policy denied",
    "asks": "BIGINT: requests the policy sent to a person",
    "approve": "BIGINT: asks whose decision is approve",
    "reject": "BIGINT: asks whose decision is reject",
    "edit": "BIGINT: asks whose arguments were edited (any decision)",
    "respond": "BIGINT: asks a reviewer answered in place of the tool",
    "expire": "BIGINT: asks that expired",
    "cancel": "BIGINT: asks withdrawn (also after an approval)",
    "pending": "BIGINT: asks waiting for a decision now",
    "approve_share": "DOUBLE: approve / asks (NULL without asks)",
    "reject_share": "DOUBLE: reject / asks",
    "edit_share": "DOUBLE: edit / asks",
    "respond_share": "DOUBLE: respond / asks",
    "expire_share": "DOUBLE: expire / asks",
    "cancel_share": "DOUBLE: cancel / asks",
}

COLUMNS: dict[str, dict[str, str]] = {
    "ledger_lines": {
        "position": "BIGINT: 1-based over the whole ledger in segment order; the seq the line should have",
        "segment_file": "VARCHAR: the segment's file name (events-NNNNNNNN.jsonl)",
        "line": "BIGINT: 1-based line number within the segment",
        "file_offset": "BIGINT: bytes from the start of the segment to the line",
        "unterminated": "BOOLEAN: the last line of a segment before the last, without a line feed",
        "raw": "BLOB: the line's bytes, without the line feed",
        "body": "VARCHAR: BODY (the hashed bytes) as text; NULL when the layout is broken or it is not UTF-8",
        "hash": "VARCHAR: the stored hash (64 hex digits); NULL when the layout is broken",
        "body_sha256": "VARCHAR: SHA-256 (hex) of the BODY bytes as stored",
        "data": "VARCHAR: DATA, the unchained bytes beside the body, as text",
        "layout_error": "VARCHAR: why the line is not {\"body\":…,\"hash\":\"…\",\"data\":…}, or NULL",
    },
    "torn_tail": {
        "segment_file": "VARCHAR: the last segment",
        "file_offset": "BIGINT: bytes before the fragment",
        "fragment_bytes": "BIGINT: the fragment's length in bytes",
        "fragment_sha256": "VARCHAR: SHA-256 (hex) of the fragment",
    },
    "events": {},  # filled below from ledger.events
    "requests": {
        "request": "BIGINT: the seq of the proposed event",
        "tool": "VARCHAR", "run": "VARCHAR", "proposer": "VARCHAR", "call_id": "VARCHAR",
        "policy": "VARCHAR: the policy's name", "policy_digest": "VARCHAR: SHA-256 (hex) of the policy source (and of the roster groups it names, if any)",
        "effect": "VARCHAR: allow, deny or ask",
        "rule": "VARCHAR: the first deciding rule id", "rules": "VARCHAR[]: the deciding rule ids",
        "reasons": "VARCHAR[]: what the agent or reviewer reads",
        "proposed_at": _T, "proposed_at_text": "VARCHAR: proposed_at as the ledger spells it",
        "status": "VARCHAR: allowed, denied, interrupting, pending, approved, executing, executed, rejected, "
        "responded, expired or cancelled (ledger.workflow.RequestState.status)",
        "decision": "VARCHAR: approve, reject, respond, expire, cancel, deny or NULL (the last one, as RequestState)",
        "decided_at": _T + ": when `decision` was taken (the proposal's time for deny)",
        "decided_by": "VARCHAR: who took it (NULL for deny and expire)",
        "reason": "VARCHAR: the rejection reason, response, expiry message or cancel reason",
        "approvers": "VARCHAR[]: everyone who approved or edited, in order (repeats kept)",
        "approved_by": "VARCHAR[]: the approvals of the current arguments (RequestState.approvals), in order",
        "approvals": "BIGINT: len(approved_by)",
        "quorum": "BIGINT: the most approvals any one quorum needs (every quorum must be met)",
        "quorums": "STRUCT(count, approvers, group)[]: the quorums in force, all of which must be met",
        "requirements": "STRUCT(quorums, decisions, timeout_seconds, on_timeout, timeout_message, remember, escalation): "
        "those in force (the interrupt's, the last edit's or the last escalation's)",
        "deadline": _T + ": the stage in force's (the interrupt's, or the last escalation's)",
        "deadline_text": "VARCHAR: deadline as the ledger spells it",
        "interrupted_at": _T,
        "edited": "BOOLEAN: edits > 0", "edits": "BIGINT: edited events",
        "digest": "VARCHAR: the current arguments' digest", "original_digest": "VARCHAR: the proposed arguments' digest",
        "execution_started_at": _T, "executor": "VARCHAR",
        "executed_at": _T, "outcome": "VARCHAR: ok or error", "result_digest": "VARCHAR", "error": "VARCHAR",
        "events": "BIGINT: events about the request, its proposal included",
        "last_event_at": _T,
    },
    "pending": {
        "request": "BIGINT", "tool": "VARCHAR", "run": "VARCHAR", "proposer": "VARCHAR",
        "rule": "VARCHAR: the first deciding rule", "proposed_at": _T, "interrupted_at": _T, "deadline": _T,
        "quorum": "BIGINT: the most approvals any one quorum needs",
        "quorums": "STRUCT(count, approvers, group)[]: all must be met",
        "approvals": "BIGINT: approvals of the current arguments",
        "approvals_needed": "BIGINT: approvals still missing, summed over the quorums (an approver who "
        "counts for several quorums may cover more than one)",
        "approved_by": "VARCHAR[]",
        "eligible": "VARCHAR[]: who may decide, sorted (NULL: anyone but the proposer)",
        "decisions": "VARCHAR[]: the decisions allowed", "edits": "BIGINT",
        "digest": "VARCHAR: the digest an approval must name",
    },
    "decision_times": {
        "request": "BIGINT", "tool": "VARCHAR", "rule": "VARCHAR", "decision": "VARCHAR", "decided_by": "VARCHAR",
        "proposed_at": _T, "decided_at": _T,
        "seconds": "DOUBLE: seconds from the proposal to the decision",
    },
    "rates_by_tool": {"tool": "VARCHAR", **_RATES},
    "rates_by_rule": {"policy": "VARCHAR: the policy's name", "rule": "VARCHAR: a deciding rule id", **_RATES},
    "rates_by_approver": {
        "approver": "VARCHAR: a reviewer identity (approver or editor)",
        "requests": "BIGINT: requests the reviewer acted on",
        "actions": "BIGINT: approvals + rejections + edits + responses",
        "approve": "BIGINT: approved events", "reject": "BIGINT: rejected events",
        "edit": "BIGINT: edited events", "respond": "BIGINT: responded events",
        "approve_share": "DOUBLE: approve / actions", "reject_share": "DOUBLE: reject / actions",
        "edit_share": "DOUBLE: edit / actions", "respond_share": "DOUBLE: respond / actions",
    },
    "chain_breaks": {
        "seq": "BIGINT: the line's position, the seq it should have (verify's Problem.seq)",
        "problem": "VARCHAR: one of CHAIN_PROBLEMS",
        "kind": "VARCHAR: format or chain, as verify's Problem.kind",
        "detail": "VARCHAR: what is wrong",
        "segment_file": "VARCHAR", "line": "BIGINT: 1-based within the segment",
        "check_order": "INTEGER: the order verify checks in; the first row by (seq, check_order) is verify's problem",
    },
    "violations": {
        "seq": "BIGINT: the offending event's seq",
        "request": "BIGINT: the request it names (NULL for a genesis)",
        "code": "VARCHAR: the ledger.workflow.Violation subclass's code",
        "detail": "VARCHAR: the message verify gives",
        "kind": "VARCHAR: the event's kind",
        "segment_file": "VARCHAR", "line": "BIGINT: 1-based within the segment",
        "position": "BIGINT: the line's position",
    },
}
"""view → column → "SQL TYPE: meaning and unit". The first row of `violations` by seq, and of
`chain_breaks` by (seq, check_order), is the problem verify reports; later rows judge each event
against the history as recorded before it, unlawful steps included."""

# chain_breaks.problem, in the order verify checks a line (one line may have several).
CHAIN_PROBLEMS = (
    "segment-missing",  # format: the segment numbers have a gap before this line
    "unterminated",  # format: a segment before the last ends without a line feed
    "unparseable",  # format: not the line layout, not UTF-8, not JSON, not a valid event
    "seq-gap",  # chain: seq is not the previous line's seq + 1 (the first is 1)
    "prev-mismatch",  # chain: prev is not the previous line's stored hash
    "hash-mismatch",  # chain: the stored hash is not SHA-256 of the body bytes
    "not-canonical",  # format: the body is not msgspec's own encoding of the event
    "bad-ts",  # format: ts or deadline is not a real UTC time in the ledger's spelling
    "ts-backwards",  # chain: ts is earlier than the previous line's ts
    "genesis-misplaced",  # format: the first event, and only it, is the genesis
    "no-events",  # format: the ledger has no lines at all
)

# A ledger timestamp that is a real time: ledger.clock.parse_ts (fromisoformat) refuses hour 24 and
# year 0, which DuckDB's cast would accept, and the cast refuses day 30 of February.
TS_REGEX = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
SEGMENT_REGEX = r"events-\p{Nd}{8}\.jsonl"  # ledger.store.log.SEGMENT_NAME (Python's \d is any Unicode digit)

# The escapes msgspec writes in a JSON string: \" \\ \b \t \n \f \r and \u00XX (lowercase) for
# the other control characters; every other character is written as itself (UTF-8).
_CANONICAL_ESCAPE = r'\\(?:["\\bfnrt]|u00(?:0[0-7bef]|1[0-9a-f]))'
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
# Outside strings a canonical body has no spacing and only plain integers.
_NOT_CANONICAL_OUTSIDE_STRINGS = r"[ \t\n\r]|-0|[^0-9]0[0-9]|[.+]|[0-9][eE]"


def _ts_sql(expr: str) -> str:
    """SQL: the TIMESTAMPTZ a ledger timestamp text stands for, NULL when it is not one."""
    return (
        f"CASE WHEN regexp_full_match({expr}, {_lit(TS_REGEX)}) AND NOT starts_with({expr}, '0000') "
        f"THEN TRY_CAST({expr} AS TIMESTAMPTZ) END"
    )


# --- the event schema, derived from ledger.events -------------------------------------------------


def _lit(text: str) -> str:
    """A SQL string literal (DuckDB does not process backslashes in '...')."""
    return "'" + text.replace("'", "''") + "'"


def _list_lit(items) -> str:
    return "[" + ", ".join(_lit(i) for i in items) + "]::VARCHAR[]"


def _jpath(*names: str) -> str:
    return "$" + "".join('."' + n + '"' for n in names)


_EVENT_TYPES: list[mi.StructType] = list(mi.type_info(ev.AnyEvent).types)
_JSON_INTS = ("BIGINT", "UBIGINT")


def _re2(pattern: str) -> str:
    r"""A msgspec `pattern` (Python `re`, matched with re.search) as an RE2 pattern with the same
    meaning: `\d` is any Unicode decimal digit in Python, and a final `$` also matches just before
    a final newline. Raises NotImplementedError for constructs not translated here."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt == "d":
                out.append(r"\p{Nd}")
            elif nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", pattern[i + 2 : i + 4]):
                out.append(pattern[i : i + 4])  # \xHH: the same in RE2
                i += 2
            elif nxt == "Z" and i + 2 == len(pattern):
                out.append("$")  # the very end: RE2's $ (without the m flag) matches only there
            elif nxt and nxt in ".^$*+?()[]{}|\\-/":
                out.append(c + nxt)
            else:
                raise NotImplementedError(f"pattern {pattern!r}: no RE2 translation for \\{nxt}")
            i += 2
            continue
        if c == "$":
            if i != len(pattern) - 1:
                raise NotImplementedError(f"pattern {pattern!r}: '$' before the end")
            out.append(r"\n?$")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _sql_type(t: mi.Type) -> Any:
    """The from_json structure (a JSON-able value) of a member type."""
    if isinstance(t, mi.StrType):
        return "VARCHAR"
    if isinstance(t, mi.IntType):
        return "BIGINT"
    if isinstance(t, mi.BoolType):
        return "BOOLEAN"
    if isinstance(t, mi.LiteralType):
        kinds = {type(v) for v in t.values}
        if kinds == {str}:
            return "VARCHAR"
        if kinds == {int}:
            return "BIGINT"
        raise NotImplementedError(f"no single SQL type for {t}")
    if isinstance(t, mi.UnionType):
        parts = [p for p in t.types if not isinstance(p, mi.NoneType)]
        shapes = {json.dumps(_sql_type(p)) for p in parts}
        if len(shapes) != 1:
            raise NotImplementedError(f"no single SQL type for {t}")
        return _sql_type(parts[0])
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        return [_sql_type(t.item_type)]
    if isinstance(t, mi.StructType):
        return {f.encode_name: _sql_type(f.type) for f in t.fields}
    raise NotImplementedError(f"no SQL type for {t}")


class _Paths:
    """Registers the JSON paths (into `body`) whose json_type() the validation needs, so that one
    call `json_type(body, [...])` parses each body once for all of them."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def t(self, path: str) -> str:
        if path not in self.paths:
            self.paths.append(path)
        return f"_t[{self.paths.index(path) + 1}]"


class _At:
    """A JSON value in SQL: `path` inside the JSON expression `base` (`body`, or the variable of
    a lambda over array elements)."""

    def __init__(self, base: str, path: str, paths: _Paths | None = None):
        self.base, self.path, self.paths = base, path, paths

    def child(self, name: str) -> "_At":
        return _At(self.base, self.path + '."' + name + '"', self.paths)

    @property
    def jt(self) -> str:
        if self.paths is not None and self.base == "body":
            return self.paths.t(self.path)
        return f"json_type({self.base}, {_lit(self.path)})"

    @property
    def text(self) -> str:
        return f"json_extract_string({self.base}, {_lit(self.path)})"


def _all(checks: list[str]) -> str:
    return "(" + " AND ".join(checks) + ")"


def _value_ok(t: mi.Type, at: _At, depth: int = 0) -> str:
    """SQL boolean: the JSON value at `at` (known to be present) is one msgspec decodes as `t`,
    with the same constraints (Meta pattern, lengths, bounds; Literal values)."""
    if isinstance(t, mi.StrType):
        checks = [f"{at.jt} = 'VARCHAR'"]
        if t.pattern is not None:
            checks.append(f"regexp_matches({at.text}, {_lit(_re2(t.pattern))})")
        if t.min_length is not None:
            checks.append(f"length({at.text}) >= {t.min_length}")
        if t.max_length is not None:
            checks.append(f"length({at.text}) <= {t.max_length}")
        return _all(checks)
    if isinstance(t, mi.IntType):
        checks = [f"{at.jt} IN ({', '.join(map(_lit, _JSON_INTS))})"]
        number = f"TRY_CAST({at.text} AS HUGEINT)"
        for bound, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(t, bound) is not None:
                checks.append(f"{number} {op} {int(getattr(t, bound))}")
        if t.multiple_of is not None:
            checks.append(f"{number} % {int(t.multiple_of)} = 0")
        return _all(checks)
    if isinstance(t, mi.BoolType):
        return f"({at.jt} = 'BOOLEAN')"
    if isinstance(t, mi.NoneType):
        return f"({at.jt} = 'NULL')"
    if isinstance(t, mi.LiteralType):
        strs = [v for v in t.values if isinstance(v, str)]
        ints = [v for v in t.values if isinstance(v, int) and not isinstance(v, bool)]
        if len(strs) + len(ints) != len(t.values):
            raise NotImplementedError(f"no validation for {t}")
        parts = []
        if strs:
            parts.append(f"({at.jt} = 'VARCHAR' AND {at.text} IN ({', '.join(map(_lit, strs))}))")
        if ints:
            parts.append(f"({at.jt} IN ({', '.join(map(_lit, _JSON_INTS))}) AND TRY_CAST({at.text} AS HUGEINT) IN ({', '.join(map(str, ints))}))")
        return "(" + " OR ".join(parts) + ")"
    if isinstance(t, mi.UnionType):
        return "(" + " OR ".join(_value_ok(p, at, depth) for p in t.types) + ")"
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        var = f"x{depth}"
        item_ok = _value_ok(t.item_type, _At(var, "$"), depth + 1)
        elements = f"json_extract({at.base}, {_lit(at.path + '[*]')})"
        checks = [f"{at.jt} = 'ARRAY'", f"coalesce(list_bool_and(list_transform({elements}, lambda {var}: {item_ok})), true)"]
        length = f"json_array_length({at.base}, {_lit(at.path)})"
        if t.min_length is not None:
            checks.append(f"{length} >= {t.min_length}")
        if t.max_length is not None:
            checks.append(f"{length} <= {t.max_length}")
        return _all(checks)
    if isinstance(t, mi.StructType):
        if t.tag_field is not None or t.array_like:
            raise NotImplementedError(f"no validation for {t.cls.__name__}")
        keys = f"json_keys({at.base}, {_lit(at.path)})"
        names = [f.encode_name for f in t.fields]
        checks = [f"{at.jt} = 'OBJECT'", f"list_has_all({_list_lit(names)}, {keys})", f"len({keys}) = len(list_distinct({keys}))"]
        for f in t.fields:
            member = at.child(f.encode_name)
            missing = "false" if f.required else "true"
            checks.append(f"(CASE WHEN {member.jt} IS NULL THEN {missing} ELSE {_value_ok(f.type, member, depth)} END)")
        return _all(checks)
    raise NotImplementedError(f"no validation for {t}")


def _invalid_reason_sql(paths: _Paths) -> str:
    """SQL CASE giving why a body (UTF-8 text holding a JSON object) is not a valid event, or
    NULL: as msgspec decodes ledger.events.AnyEvent, the kind must be known, no member unknown or
    missing, and every member of its type and constraints. A member whose type is the same in every
    kind that has it is checked once, whatever the kind; the others in their kind's branch."""
    types_by_name: dict[str, list[mi.Type]] = {}
    for st in _EVENT_TYPES:
        for f in st.fields:
            if f.type not in types_by_name.setdefault(f.encode_name, []):
                types_by_name[f.encode_name].append(f.type)
    shared = {name: ts[0] for name, ts in types_by_name.items() if len(ts) == 1}

    def wrong_type(name: str, t: mi.Type) -> str:
        at = _At("body", _jpath(name), paths)
        return f"WHEN {at.jt} IS NOT NULL AND NOT coalesce({_value_ok(t, at)}, false) THEN {_lit(f'`{name}` has the wrong type or value')}"

    kind_t = paths.t(_jpath("kind"))
    branches = []
    for st in _EVENT_TYPES:
        allowed = ["kind"] + [f.encode_name for f in st.fields]
        article = "an" if st.tag[0] in "aeiou" else "a"
        whens = [f"WHEN NOT list_has_all({_list_lit(allowed)}, _keys) THEN 'unknown member in {article} {st.tag} event'"]
        whens += [
            f"WHEN {paths.t(_jpath(f.encode_name))} IS NULL THEN {_lit(f'missing required member `{f.encode_name}`')}"
            for f in st.fields
            if f.required
        ]
        whens += [wrong_type(f.encode_name, f.type) for f in st.fields if f.encode_name not in shared]
        branches.append(f"WHEN {_lit(st.tag)} THEN CASE {' '.join(whens)} END")
    types = [wrong_type(name, t) for name, t in shared.items()]
    kind = "json_extract_string(body, '$.\"kind\"')"
    return (
        "CASE "
        f"WHEN {kind_t} IS NULL THEN 'the body is not a valid event: missing required member `kind`' "
        f"WHEN {kind_t} <> 'VARCHAR' THEN 'the body is not a valid event: `kind` is not a string' "
        f"WHEN {kind} NOT IN ({', '.join(_lit(st.tag) for st in _EVENT_TYPES)}) "
        "THEN 'the body is not a valid event: unknown kind' "
        "ELSE 'the body is not a valid event: ' || coalesce("
        f"CASE {kind} {' '.join(branches)} END, "
        f"CASE {' '.join(types)} END) END"
    )


def _layout_ok(t: mi.Type, at: _At, depth: int = 0) -> str | None:
    """SQL boolean: the objects inside the (valid) value at `at` have exactly msgspec's member
    order, every member present once; None when `t` holds no object."""
    if isinstance(t, mi.StructType):
        keys = f"json_keys({at.base}, {_lit(at.path)})"
        names = [f.encode_name for f in t.fields]
        # members msgspec leaves out when unset (or, under omit_defaults, when at their default)
        optional = [f.encode_name for f in t.fields if _omittable(f) or (_omits_defaults(t) and not f.required)]
        expected = _list_lit(names)
        if optional:
            expected = f"list_filter({expected}, lambda k: NOT list_contains({_list_lit(optional)}, k) OR list_contains({keys}, k))"
        checks = [f"{keys} = {expected}"]
        for f in t.fields:
            child = at.child(f.encode_name)
            inner = _layout_ok(f.type, child, depth)
            if inner is not None:
                checks.append(inner if f.encode_name not in optional
                              else f"(json_type({child.base}, {_lit(child.path)}) IS NULL OR {inner})")
        return _all(checks)
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        var = f"x{depth}"
        inner = _layout_ok(t.item_type, _At(var, "$"), depth + 1)
        if inner is None:
            return None
        elements = f"json_extract({at.base}, {_lit(at.path + '[*]')})"
        return f"coalesce(list_bool_and(list_transform({elements}, lambda {var}: {inner})), true)"
    if isinstance(t, mi.UnionType):
        if any(_layout_ok(p, at, depth) is not None for p in t.types):
            raise NotImplementedError(f"no layout check for {t}")
        return None
    return None


def _omits_defaults(t: mi.StructType) -> bool:
    return bool(getattr(t.cls.__struct_config__, "omit_defaults", False))


def _omittable(f: mi.Field) -> bool:
    """A member msgspec leaves out of the encoding when it is unset (default UNSET)."""
    return not f.required and f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT


def _canonical_sql() -> str:
    """SQL boolean for a valid event: the body is byte for byte what ledger.events.encode_event
    writes for it (`kind` first, then every member in declaration order, no spacing, plain
    integers, msgspec's string escapes), the check verify makes with encode_event(event) == body."""
    branches = []
    for st in _EVENT_TYPES:
        names = ["kind"] + [f.encode_name for f in st.fields]
        omittable = [f.encode_name for f in st.fields if _omittable(f)]
        expected = _list_lit(names)
        if omittable:  # present only when set (an idempotency `key`), then in its declared place
            expected = f"list_filter({expected}, lambda k: NOT list_contains({_list_lit(omittable)}, k) OR list_contains(_keys, k))"
        checks = [f"_keys = {expected}"]
        for f in st.fields:
            inner = _layout_ok(f.type, _At("body", _jpath(f.encode_name)))
            if inner is not None:
                checks.append(inner if not _omittable(f) else f"(NOT list_contains(_keys, {_lit(f.encode_name)}) OR {inner})")
        branches.append(f"WHEN {_lit(st.tag)} THEN {_all(checks)}")
    layout = f"CASE json_extract_string(body, '$.\"kind\"') {' '.join(branches)} ELSE false END"
    spelling = (
        f"NOT regexp_matches(regexp_replace(body, {_lit(_JSON_STRING)}, '\"\"', 'g'), {_lit(_NOT_CANONICAL_OUTSIDE_STRINGS)}) "
        f"AND NOT contains(regexp_replace(body, {_lit(_CANONICAL_ESCAPE)}, '', 'g'), '\\')"
    )
    return f"({layout} AND {spelling})"


def _columns() -> tuple[dict[str, mi.Type], list[str]]:
    """Every body member of every kind (first declaration order), and the from_json structure."""
    members: dict[str, mi.Type] = {}
    shapes: dict[str, str] = {}
    for st in _EVENT_TYPES:
        for f in st.fields:
            shape = json.dumps(_sql_type(f.type))
            if f.encode_name in shapes and shapes[f.encode_name] != shape:
                raise NotImplementedError(f"member {f.encode_name} has two SQL types")
            shapes[f.encode_name] = shape
            members.setdefault(f.encode_name, f.type)
    return members, list(members)


_MEMBERS, _MEMBER_ORDER = _columns()
_STRUCTURE = json.dumps({"kind": "VARCHAR", **{name: _sql_type(t) for name, t in _MEMBERS.items()}}, separators=(",", ":"))


def _default_sql(value: Any, shape: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _lit(value)
    if isinstance(value, tuple) and shape == ["VARCHAR"]:
        return _list_lit(value)
    if isinstance(value, (tuple, msgspec.Struct)):  # e.g. the default quorums: typed by from_json
        return f"from_json({_lit(json.dumps(msgspec.to_builtins(value)))}, {_lit(json.dumps(shape))})"
    raise NotImplementedError(f"no SQL literal for the default {value!r}")


def _member_sql(name: str) -> str:
    """The typed column for a body member, with nested struct defaults applied (a missing
    `quorum` is 1, as msgspec decodes it)."""
    t = _MEMBERS[name]
    if isinstance(t, mi.StructType):
        parts = []
        for f in t.fields:
            ref = f"j.{name}.{f.encode_name}"
            if f.required or f.default is None or _omittable(f):  # absent (unset) stays NULL
                parts.append(f"{f.encode_name} := {ref}")
            else:
                parts.append(f"{f.encode_name} := coalesce({ref}, {_default_sql(f.default, _sql_type(f.type))})")
        return f"CASE WHEN j.{name} IS NULL THEN NULL ELSE struct_pack({', '.join(parts)}) END"
    return f"j.{name}"


def _body_columns() -> list[str]:
    out = []
    for m in _MEMBER_ORDER:
        if m in ("seq", "ts", "prev", "request"):
            continue
        out.append(m)
        if m == "deadline":
            out.append("deadline_text")
    return out


def _kinds_with(member: str) -> str:
    return ", ".join(st.tag for st in _EVENT_TYPES if any(f.encode_name == member for f in st.fields))


COLUMNS["events"] = {
    "position": "BIGINT: the line's position (the seq it should have)",
    "seq": "BIGINT: the seq in the body",
    "ts": _T + ": the body's ts (NULL when it is not a real ledger time)",
    "ts_text": "VARCHAR: ts as stored",
    "kind": "VARCHAR: the event kind",
    "request": "BIGINT: the request the event is about (a proposed event's own seq)",
    **{
        m: f"{json.dumps(_sql_type(_MEMBERS[m]))}: the body member of {_kinds_with(m)} events"
        for m in _MEMBER_ORDER
        if m not in ("seq", "ts", "prev", "request", "deadline")
    },
    "key": "VARCHAR: the event's idempotency key, NULL when it has none (any kind)",
    "deadline": _T + ": an interrupt's or an escalation's deadline",
    "deadline_text": "VARCHAR: deadline as stored",
    "prev": "VARCHAR: the previous event's hash, from the body",
    "hash": "VARCHAR: the stored hash",
    "body_sha256": "VARCHAR: SHA-256 (hex) of the body bytes as stored",
    "hash_ok": "BOOLEAN: hash = body_sha256",
    "valid": "BOOLEAN: the body decodes as an event (ledger.events.decode_event would accept it)",
    "invalid_reason": "VARCHAR: why not, or NULL",
    "canonical": "BOOLEAN: the body is exactly encode_event(decoded body); NULL when not valid",
    "data": "JSON: DATA ({args, context} for proposed, {args} for edited, {result} for an executed event that keeps "
            "its result; SQL NULL when the line's data is null)",
    "args": "JSON: the call's arguments", "context": "JSON: the call's context",
    "body": "VARCHAR: the body text", "segment_file": "VARCHAR", "line": "BIGINT: 1-based within the segment",
    "file_offset": "BIGINT: bytes before the line in its segment",
}


EVENT_COLUMNS = (
    ["position", "seq", "ts", "ts_text", "kind", "request"]
    + _body_columns()
    + ["prev", "hash", "body_sha256", "hash_ok", "valid", "invalid_reason", "canonical", "data", "args", "context", "body",
       "segment_file", "line", "file_offset"]
)
"""The columns of the `events` view, in order."""


# --- the SQL ----------------------------------------------------------------------------------------


def _source(path: Path) -> str:
    """read_blob's argument: a glob over the directory (so later segments are seen), or the
    segment list when the directory's own name contains glob characters."""
    text = str(path)
    if any(c in text for c in "*?[]{}"):
        return "[" + ", ".join(_lit(str(p)) for p in list_segments(path)) + "]"
    return _lit(str(path / SEGMENT_GLOB))


def _escaped(con, raw: bytes) -> str:
    """How DuckDB's BLOB → VARCHAR cast writes these bytes (ASCII markers; `\\n`)."""
    return con.execute("SELECT CAST(CAST(? AS BLOB) AS VARCHAR)", [raw.decode("ascii")]).fetchone()[0]


def _view_sql(con, path: Path) -> list[str]:
    nl = _escaped(con, b"\n")
    p, h, d, s = (_escaped(con, m) for m in (PREFIX, HASH_MARK, DATA_MARK, SUFFIX))
    paths = _Paths()
    reason = _invalid_reason_sql(paths)
    types_call = "json_type(body, [" + ", ".join(map(_lit, paths.paths)) + "])"
    final = ", ".join(map(_lit, FINAL))
    sql: list[str] = []

    sql.append(f"""
CREATE OR REPLACE TEMP VIEW _ledger_pieces AS
WITH segs AS (
    SELECT parse_filename(filename) AS segment_file, CAST(content AS VARCHAR) AS esc
    FROM read_blob({_source(path)})
    WHERE regexp_full_match(parse_filename(filename), {_lit(SEGMENT_REGEX)})
),
split AS (
    SELECT segment_file, string_split(esc, {_lit(nl)}) AS parts,
           row_number() OVER (ORDER BY segment_file) AS ordinal,
           segment_file = max(segment_file) OVER () AS last_segment
    FROM segs
),
pieces AS (
    SELECT segment_file, ordinal, last_segment, len(parts) AS n,
           unnest(parts) AS esc_line, generate_subscripts(parts, 1) AS line
    FROM split
),
raw AS (
    SELECT *, CAST(esc_line AS BLOB) AS raw FROM pieces
)
SELECT segment_file, ordinal, line, esc_line, raw,
       coalesce(sum(octet_length(raw) + 1) OVER (
           PARTITION BY segment_file ORDER BY line ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::BIGINT AS file_offset,
       CASE WHEN line < n THEN 'line' WHEN esc_line = '' THEN 'end' WHEN last_segment THEN 'torn' ELSE 'unterminated' END AS piece
FROM raw
""")

    sql.append("""
CREATE OR REPLACE TEMP VIEW _segments AS
WITH s AS (
    SELECT segment_file, ordinal,
           'events-' || lpad(CAST(ordinal AS VARCHAR), 8, '0') || '.jsonl' AS expected_name,
           count(*) FILTER (WHERE piece IN ('line', 'unterminated')) AS lines
    FROM _ledger_pieces GROUP BY segment_file, ordinal
)
SELECT *, coalesce(sum(lines) OVER (ORDER BY ordinal ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) + 1 AS first_position
FROM s
""")

    sql.append("""
CREATE OR REPLACE TEMP VIEW torn_tail AS
SELECT segment_file, file_offset, octet_length(raw)::BIGINT AS fragment_bytes, sha256(raw) AS fragment_sha256
FROM _ledger_pieces WHERE piece = 'torn'
""")

    sql.append(_lines_sql(p, h, d, s))

    member_cols = []
    for m in _MEMBER_ORDER:
        if m in ("seq", "ts", "prev", "request"):
            continue
        if m == "deadline":
            member_cols.append(
                f"{_ts_sql('j.deadline')} AS deadline"
            )
            member_cols.append("j.deadline AS deadline_text")
        else:
            member_cols.append(f"{_member_sql(m)} AS \"{m}\"")
    members_sql = ",\n       ".join(member_cols)

    sql.append(f"""
CREATE OR REPLACE TEMP VIEW events AS
WITH a AS (
    SELECT *,
           CASE WHEN layout_error IS NULL AND body IS NOT NULL AND json_valid(body) THEN body END AS jbody
    FROM ledger_lines
),
b AS (
    SELECT *,
           CASE
               WHEN layout_error IS NOT NULL THEN layout_error
               WHEN body IS NULL THEN 'the body is not valid UTF-8'
               WHEN jbody IS NULL THEN 'the body is not JSON'
               -- DuckDB's parser accepts trailing commas, msgspec does not: look for one outside strings.
               WHEN regexp_matches(body, ',[ \\t\\n\\r]*[\\]}}]')
                    AND regexp_matches(regexp_replace(body, '"(?:[^"\\\\]|\\\\.)*"', '""', 'g'), ',[ \\t\\n\\r]*[\\]}}]')
                   THEN 'the body is not JSON'
               WHEN json_type(jbody) <> 'OBJECT' THEN 'the body is not a JSON object'
           END AS early_reason
    FROM a
),
c AS (
    SELECT *,
           CASE WHEN early_reason IS NULL THEN {types_call} END AS _t,
           CASE WHEN early_reason IS NULL THEN json_keys(body) END AS _keys
    FROM b
),
d AS (
    SELECT *,
           coalesce(early_reason,
                    CASE WHEN len(_keys) <> len(list_distinct(_keys))
                         THEN 'the body has a member twice (readers would disagree on its value)' END,
                    {reason}) AS invalid_reason
    FROM c
),
e AS (
    SELECT *,
           CASE WHEN invalid_reason IS NULL THEN from_json(body, {_lit(_STRUCTURE)}) END AS j,
           CASE WHEN invalid_reason IS NULL THEN {_canonical_sql()} END AS canonical
    FROM d
)
SELECT position,
       CASE WHEN j IS NULL THEN NULL ELSE coalesce(j.seq, 0) END AS seq,
       {_ts_sql('j.ts')} AS ts,
       CASE WHEN j IS NULL THEN NULL ELSE coalesce(j.ts, '') END AS ts_text,
       j.kind AS kind,
       CASE WHEN j.kind = 'proposed' THEN coalesce(j.seq, 0) ELSE j.request END AS request,
       {members_sql},
       CASE WHEN j IS NULL THEN NULL ELSE coalesce(j.prev, '') END AS prev,
       hash,
       body_sha256,
       hash IS NOT NULL AND body_sha256 = hash AS hash_ok,
       invalid_reason IS NULL AS valid,
       invalid_reason,
       canonical,
       CASE WHEN data IS NOT NULL AND json_valid(data) AND json_type(data) <> 'NULL' THEN data::JSON END AS data,
       CASE WHEN data IS NOT NULL AND json_valid(data) THEN json_extract(data, '$.args') END AS args,
       CASE WHEN data IS NOT NULL AND json_valid(data) THEN json_extract(data, '$.context') END AS context,
       body,
       segment_file,
       line,
       file_offset
FROM e
""")

    sql.append(_chain_sql())
    sql.append(_timeline_sql(final))
    sql.append(_violations_sql(final))
    sql.extend(_request_sql())
    return sql


def _lines_sql(p: str, h: str, d: str, s: str) -> str:
    lp, lh, ld, ls = len(p), len(h), len(d), len(s)
    return (
        """
CREATE OR REPLACE TEMP VIEW ledger_lines AS
WITH l AS (
    SELECT segment_file, line, file_offset, esc_line, raw, piece = 'unterminated' AS unterminated,
           row_number() OVER (ORDER BY segment_file, line) AS position,
           starts_with(esc_line, @P) AS has_prefix,
           instr(substr(esc_line, @LP1), @H) AS cut
    FROM _ledger_pieces WHERE piece IN ('line', 'unterminated')
),
m AS (
    SELECT *,
           CASE WHEN has_prefix AND cut > 0 THEN substr(esc_line, @LP1, cut - 1) END AS body_esc,
           CASE WHEN has_prefix AND cut > 0 THEN substr(esc_line, @LP + cut + @LH) END AS tail
    FROM l
),
n AS (
    SELECT *, left(tail, 64) AS hash_esc, substr(tail, 65) AS after FROM m
),
o AS (
    SELECT *,
           CASE
               WHEN NOT has_prefix THEN 'the line does not start with {"body":'
               WHEN cut = 0 THEN 'the line has no ,"hash":" after the body'
               WHEN NOT regexp_full_match(hash_esc, '[0-9a-f]{64}') THEN 'the hash is not 64 lowercase hex digits'
               WHEN NOT starts_with(after, @D) THEN 'the hash is not followed by ,"data":'
               WHEN NOT ends_with(after, @S) THEN 'the line does not end with }'
           END AS layout_error
    FROM n
)
SELECT position, segment_file, line, file_offset, unterminated, raw,
       CASE WHEN body_esc IS NOT NULL THEN try(decode(CAST(body_esc AS BLOB))) END AS body,
       CASE WHEN layout_error IS NULL THEN hash_esc END AS hash,
       CASE WHEN body_esc IS NOT NULL THEN sha256(CAST(body_esc AS BLOB)) END AS body_sha256,
       CASE WHEN layout_error IS NULL
            THEN try(decode(CAST(substr(after, @LD1, len(after) - @LDS) AS BLOB))) END AS data,
       layout_error
FROM o
""".replace("@LP1", str(lp + 1))
        .replace("@LP", str(lp))
        .replace("@LH", str(lh))
        .replace("@LD1", str(ld + 1))
        .replace("@LDS", str(ld + ls))
        .replace("@P", _lit(p))
        .replace("@H", _lit(h))
        .replace("@D", _lit(d))
        .replace("@S", _lit(s))
    )


def _chain_sql() -> str:
    """`chain_breaks`: every check of verify's kinds "format" and "chain", for every line at once.
    A link is checked against the line before it (not against the line's position), so a removed
    or inserted line gives rows where it happened, not at every line after it."""
    order = {name: i for i, name in enumerate(CHAIN_PROBLEMS)}
    return f"""
CREATE OR REPLACE TEMP VIEW chain_breaks AS
WITH l AS (
    SELECT position, seq, prev, hash, body_sha256, ts_text, ts, deadline_text, deadline, kind, valid, invalid_reason,
           canonical, segment_file, line,
           lag(seq) OVER (ORDER BY position) AS pred_seq,
           lag(hash) OVER (ORDER BY position) AS pred_hash,
           lag(ts_text) OVER (ORDER BY position) AS pred_ts_text
    FROM events
),
u AS (
    SELECT position, segment_file, line FROM ledger_lines WHERE unterminated
),
p AS (
    SELECT first_position AS seq, {order["segment-missing"]} AS ord, 'segment-missing' AS problem, 'format' AS kind,
           format('segment {{}} is missing (the next one is {{}})', expected_name, segment_file) AS detail,
           NULL::VARCHAR AS segment_file, NULL::BIGINT AS line
    FROM _segments WHERE segment_file <> expected_name
    QUALIFY ordinal = min(ordinal) OVER ()
    UNION ALL
    SELECT position, {order["unterminated"]}, 'unterminated', 'format',
           format('{{}} ends without a line feed but is not the last segment', segment_file), segment_file, line
    FROM u
    UNION ALL
    SELECT position, {order["unparseable"]}, 'unparseable', 'format', invalid_reason, segment_file, line
    FROM l WHERE NOT valid
    UNION ALL
    SELECT position, {order["seq-gap"]}, 'seq-gap', 'chain',
           format('seq is {{}}, expected {{}} (a gap, a duplicate or a reordering)', seq, coalesce(pred_seq + 1, position)),
           segment_file, line
    FROM l WHERE valid AND seq <> coalesce(pred_seq + 1, position)
    UNION ALL
    SELECT position, {order["prev-mismatch"]}, 'prev-mismatch', 'chain',
           'prev is not the previous event''s hash (an event was removed, inserted or changed before it)', segment_file, line
    FROM l WHERE valid AND ((position = 1 AND prev <> {_lit(ev.GENESIS_PREV)}) OR (pred_hash IS NOT NULL AND prev <> pred_hash))
    UNION ALL
    SELECT position, {order["hash-mismatch"]}, 'hash-mismatch', 'chain',
           'the hash does not match the body: the event was changed after it was written', segment_file, line
    FROM l WHERE hash IS NOT NULL AND body_sha256 <> hash
    UNION ALL
    SELECT position, {order["not-canonical"]}, 'not-canonical', 'format',
           'the body is not in its one canonical layout (member order, spacing or a repeated member)', segment_file, line
    FROM l WHERE valid AND NOT canonical
    UNION ALL
    SELECT position, {order["bad-ts"]}, 'bad-ts', 'format',
           CASE WHEN ts IS NULL THEN format('ts {{}} is not a UTC time YYYY-MM-DDTHH:MM:SS.ffffffZ', ts_text)
                ELSE format('deadline {{}} is not a UTC time YYYY-MM-DDTHH:MM:SS.ffffffZ', deadline_text) END,
           segment_file, line
    FROM l WHERE valid AND (ts IS NULL OR (deadline_text IS NOT NULL AND deadline IS NULL))
    UNION ALL
    SELECT position, {order["ts-backwards"]}, 'ts-backwards', 'chain',
           format('ts {{}} is earlier than the previous event''s ({{}}): time went backwards', ts_text, pred_ts_text),
           segment_file, line
    FROM l WHERE valid AND ts IS NOT NULL AND pred_ts_text IS NOT NULL AND ts_text < pred_ts_text
    UNION ALL
    SELECT position, {order["genesis-misplaced"]}, 'genesis-misplaced', 'format',
           'the first event, and only the first, is the genesis', segment_file, line
    FROM l WHERE valid AND ((seq = 1) <> (kind = 'genesis'))
    UNION ALL
    SELECT 1, {order["no-events"]}, 'no-events', 'format', 'the ledger has no events', NULL, NULL
    WHERE NOT EXISTS (SELECT 1 FROM ledger_lines)
)
SELECT seq::BIGINT AS seq, problem, kind, detail, segment_file, line::BIGINT AS line, ord AS check_order FROM p
"""


# The columns of `events` that `_timeline` carries (the others stay behind, for smaller plans).
_TIMELINE_COLUMNS = ", ".join(
    '"' + c + '"'
    for c in (
        "position", "seq", "ts", "ts_text", "kind", "request", "run", "proposer", "call_id", "tool", "args_digest",
        "policy", "policy_digest", "effect", "rules", "reasons", "requirements", "deadline", "deadline_text",
        "approver", "comment", "editor", "replaces", "reason", "message", "outcome", "by", "executor",
        "result_digest", "error", "segment_file", "line", "remembered", "decision", "stage",
    )
)


def _timeline_sql(final: str) -> str:
    """`_timeline`: every valid event about a request (its `proposed` event included), with the
    request's state before and after it, folded as ledger.workflow.machine applies events ("as recorded":
    every earlier event of the request counts, lawful or not)."""
    return f"""
CREATE OR REPLACE TEMP VIEW _timeline AS
WITH valid_events AS MATERIALIZED (
    SELECT {_TIMELINE_COLUMNS}
    FROM events WHERE valid
),
ev AS (
    SELECT * FROM valid_events
),
props AS (
    SELECT position AS p_position, seq AS p_seq, proposer AS p_proposer
    FROM valid_events WHERE kind = 'proposed'
    QUALIFY row_number() OVER (PARTITION BY seq ORDER BY position DESC) = 1
),
-- the standing decisions (docs/ledger-format.md, section 12): a proposal that names one is decided
-- by it ("as recorded": whether it covers the proposal is verify's rule, not checked here)
standing AS (
    SELECT position AS s_position, seq AS s_seq, decision AS s_decision, approver AS s_approver, reason AS s_reason
    FROM valid_events WHERE kind = 'remembered'
    QUALIFY row_number() OVER (PARTITION BY seq ORDER BY position DESC) = 1
),
t0 AS (
    SELECT ev.*, props.p_position IS NOT NULL AS known, props.p_proposer AS request_proposer,
           standing.s_decision, standing.s_reason,
           CASE kind WHEN 'approved' THEN approver WHEN 'edited' THEN editor WHEN 'rejected' THEN approver
                     WHEN 'responded' THEN approver WHEN 'cancelled' THEN "by" WHEN 'remembered' THEN approver
                     WHEN 'proposed' THEN standing.s_approver END AS actor,
           CASE kind WHEN 'approved' THEN 'approve' WHEN 'edited' THEN 'edit' WHEN 'rejected' THEN 'reject'
                     WHEN 'responded' THEN 'respond' END AS decision_word,
           CASE WHEN kind IN ('proposed', 'edited') THEN args_digest END AS digest_set,
           CASE WHEN kind IN ('interrupted', 'edited', 'escalated') THEN requirements
                WHEN kind = 'proposed' AND standing.s_decision IS NOT NULL THEN remembered.requirements END AS reqs_set,
           CASE WHEN kind IN ('interrupted', 'escalated') THEN deadline_text END AS deadline_set,
           coalesce(sum(CASE WHEN kind IN ('genesis', 'proposed') THEN 1 ELSE 0 END) OVER (
               ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) > 0 AS opened_before
    FROM ev LEFT JOIN props ON props.p_seq = ev.request AND props.p_position <= ev.position
            LEFT JOIN standing ON ev.kind = 'proposed' AND standing.s_seq = ev.remembered.by
                                 AND standing.s_position < ev.position
),
t1 AS (
    SELECT *,
           -- approvals count per epoch: an edit, or an escalation (the new stage counts afresh), starts one
           sum(CASE WHEN kind IN ('edited', 'escalated') THEN 1 ELSE 0 END) OVER w_upto AS epoch,
           1 + coalesce(sum(CASE WHEN kind = 'escalated' THEN 1 ELSE 0 END) OVER w_before, 0) AS stage_before,
           last_value(digest_set IGNORE NULLS) OVER w_before AS digest_before,
           last_value(reqs_set IGNORE NULLS) OVER w_before AS reqs_before,
           last_value(reqs_set IGNORE NULLS) OVER w_upto AS reqs_now,
           last_value(deadline_set IGNORE NULLS) OVER w_before AS deadline_before
    FROM t0
    WINDOW w_before AS (PARTITION BY request, known ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           w_upto AS (PARTITION BY request, known ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
t2 AS (
    SELECT *,
           known AND (kind = 'approved'
                      OR (kind = 'edited' AND list_bool_or(list_transform(reqs_now.quorums, lambda q: q.approvers IS NULL OR list_contains(q.approvers, editor)))))
               AS approving
    FROM t1
),
t3 AS (
    SELECT *,
           CASE WHEN approving THEN row_number() OVER (PARTITION BY request, known, epoch, approving, actor ORDER BY position) END
               AS approval_rank
    FROM t2
),
t4 AS (
    SELECT *,
           sum(CASE WHEN approval_rank = 1 THEN 1 ELSE 0 END) OVER w_epoch AS approvals_after,
           list_filter(list(CASE WHEN approval_rank = 1 THEN actor END) OVER w_epoch, lambda a: a IS NOT NULL)
               AS approvers_after
    FROM t3
    WINDOW w_epoch AS (PARTITION BY request, known, epoch ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
t5 AS (
    SELECT *,
           -- every quorum counts the distinct approvers of the current arguments that it admits
           kind IN ('approved', 'edited') AND list_bool_and(list_transform(reqs_now.quorums, lambda q:
               len(list_filter(approvers_after, lambda a: q.approvers IS NULL OR list_contains(q.approvers, a))) >= q.count
           )) AS reaches_quorum
    FROM t4
),
t6 AS (
    SELECT *,
           CASE WHEN NOT known THEN NULL
                WHEN kind = 'proposed' AND s_decision IS NOT NULL THEN CASE s_decision WHEN 'approve' THEN 'allowed' ELSE 'rejected' END
                WHEN kind = 'proposed' THEN CASE effect WHEN 'allow' THEN 'allowed' WHEN 'ask' THEN 'interrupting' ELSE 'denied' END
                WHEN kind IN ('interrupted', 'escalated') THEN 'pending'
                WHEN kind IN ('approved', 'edited') THEN CASE WHEN reaches_quorum THEN 'approved' END
                WHEN kind = 'rejected' THEN 'rejected'
                WHEN kind = 'responded' THEN 'responded'
                WHEN kind = 'expired' THEN 'expired'
                WHEN kind = 'cancelled' THEN 'cancelled'
                WHEN kind = 'execution_started' THEN 'executing'
                WHEN kind = 'executed' THEN 'executed'
           END AS status_set
    FROM t5
),
t7 AS (
    SELECT *,
           last_value(status_set IGNORE NULLS) OVER w_before AS status_before,
           last_value(status_set IGNORE NULLS) OVER w_upto AS status_after,
           CASE WHEN kind = 'proposed' AND status_set = 'denied' THEN 'deny'
                WHEN kind = 'proposed' AND s_decision IS NOT NULL THEN s_decision
                WHEN reaches_quorum THEN 'approve'
                WHEN kind = 'rejected' THEN 'reject'
                WHEN kind = 'responded' THEN 'respond'
                WHEN kind = 'expired' THEN 'expire'
                WHEN kind = 'cancelled' THEN 'cancel'
           END AS decision_set
    FROM t6
    WINDOW w_before AS (PARTITION BY request, known ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           w_upto AS (PARTITION BY request, known ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
t8 AS (
    SELECT *,
           -- what is wrong with an escalation's record of the next stage, in the order the workflow checks
           CASE WHEN kind <> 'escalated' OR len(coalesce(reqs_before.escalation, [])) = 0 THEN NULL
                WHEN stage <> stage_before + 1 THEN 'stage'
                WHEN NOT coalesce(requirements.quorums = reqs_before.escalation[1].quorums
                         AND requirements.decisions = reqs_before.decisions
                         AND requirements.timeout_seconds = reqs_before.escalation[1].timeout_seconds
                         AND requirements.on_timeout = reqs_before.on_timeout
                         AND requirements.timeout_message IS NOT DISTINCT FROM reqs_before.escalation[1].timeout_message
                         AND requirements.remember IS NOT DISTINCT FROM reqs_before.remember
                         AND coalesce(requirements.escalation, []) = reqs_before.escalation[2:], false) THEN 'requirements'
                WHEN deadline_text IS DISTINCT FROM escalation_deadline THEN 'deadline'
           END AS escalation_fault
    FROM (
        SELECT *,
               -- ts + the next stage's timeout, spelled like ts (the latest ts past year 9999: machine.deadline_after)
               CASE WHEN kind <> 'escalated' OR len(coalesce(reqs_before.escalation, [])) = 0 THEN NULL
                    WHEN escalation_end >= TIMESTAMP '10000-01-01' THEN '9999-12-31T23:59:59.999999Z'
                    ELSE strftime(escalation_end, '%Y-%m-%dT%H:%M:%S.%fZ') END AS escalation_deadline
        FROM (SELECT *,
                     CASE WHEN kind = 'escalated' AND len(coalesce(reqs_before.escalation, [])) > 0
                          THEN CAST(left(ts_text, 26) AS TIMESTAMP) + to_seconds(reqs_before.escalation[1].timeout_seconds)
                     END AS escalation_end
              FROM t7)
    )
)
SELECT *,
       CASE
           WHEN kind = 'genesis' THEN CASE WHEN opened_before THEN 'misplaced-genesis' END
           WHEN kind IN ('proposed', 'recovered', 'redacted', 'roster', 'policy', 'forgotten') THEN NULL  -- redactions: see `violations`
           WHEN NOT known THEN 'unknown-request'
           WHEN status_before IN ({final}) THEN 'request-final'
           WHEN kind = 'interrupted' THEN CASE WHEN status_before <> 'interrupting' THEN 'not-interruptible' END
           WHEN kind IN ('approved', 'edited', 'rejected', 'responded') THEN CASE
               WHEN status_before <> 'pending' THEN 'not-pending'
               WHEN NOT list_contains(reqs_before.decisions, decision_word) THEN 'decision-not-allowed'
               WHEN actor = request_proposer THEN 'self-approval'
               WHEN NOT list_bool_or(list_transform(reqs_before.quorums, lambda q: q.approvers IS NULL OR list_contains(q.approvers, actor))) THEN 'not-an-approver'
               WHEN deadline_before IS NOT NULL AND ts_text >= deadline_before THEN 'deadline-passed'
               WHEN kind = 'approved' AND args_digest <> digest_before THEN 'stale-digest'
               WHEN kind = 'approved' AND approval_rank > 1 THEN 'duplicate-approval'
               WHEN kind = 'edited' AND replaces <> digest_before THEN 'stale-digest'
               WHEN kind = 'edited' AND effect = 'deny' THEN 'edit-denied'
           END
           WHEN kind = 'expired' THEN CASE
               WHEN status_before <> 'pending' THEN 'not-pending'
               WHEN ts_text < coalesce(deadline_before, '') THEN 'not-expired'
               WHEN len(coalesce(reqs_before.escalation, [])) > 0 THEN 'escalates'
           END
           -- an escalation records exactly the next stage (ledger.workflow.machine, _check_escalated)
           WHEN kind = 'escalated' THEN CASE
               WHEN status_before <> 'pending' THEN 'not-pending'
               WHEN ts_text < coalesce(deadline_before, '') THEN 'not-expired'
               WHEN len(coalesce(reqs_before.escalation, [])) = 0 THEN 'no-escalation'
               WHEN escalation_fault IS NOT NULL THEN 'escalation-mismatch'
           END
           WHEN kind = 'cancelled' THEN CASE WHEN status_before = 'executing' THEN 'already-executed' END
           WHEN kind = 'execution_started' THEN CASE
               WHEN status_before = 'executing' THEN 'already-executed'
               WHEN status_before NOT IN ('allowed', 'approved') THEN 'not-approved'
               WHEN args_digest <> digest_before THEN 'digest-mismatch'
           END
           WHEN kind = 'executed' THEN CASE
               WHEN status_before <> 'executing' THEN 'not-started'
               WHEN args_digest <> digest_before THEN 'digest-mismatch'
           END
       END AS violation
FROM t8
"""


def _violations_sql(final: str) -> str:
    return """
CREATE OR REPLACE TEMP VIEW violations AS
WITH t AS (
    SELECT seq, request, violation AS code, kind, segment_file, line, position,
           CASE violation
               WHEN 'unknown-request' THEN format('request {} was never proposed', request)
               WHEN 'request-final' THEN format('request {} is already {}', request, status_before)
               WHEN 'not-interruptible' THEN format('request {} is {}; only a new ask is interrupted', request, status_before)
               WHEN 'not-pending' THEN CASE WHEN kind = 'expired'
                   THEN format('request {} is {}; only a pending request expires', request, status_before)
                   WHEN kind = 'escalated'
                   THEN format('request {} is {}; only a pending request escalates', request, status_before)
                   ELSE format('request {} is {}, not pending a decision', request, status_before) END
               WHEN 'decision-not-allowed' THEN format('''{}'' is not among the allowed decisions ({})',
                                                       decision_word, array_to_string(reqs_before.decisions, ', '))
               WHEN 'self-approval' THEN format('{} proposed request {} and cannot decide it', actor, request)
               WHEN 'not-an-approver' THEN format('{} is not among the approvers of request {}', actor, request)
               WHEN 'deadline-passed' THEN format('request {} expired at {}', request, deadline_before)
               WHEN 'stale-digest' THEN CASE WHEN kind = 'approved'
                   THEN format('the approval is for arguments {}…, the request''s are {}…', left(args_digest, 12), left(digest_before, 12))
                   ELSE format('the edit replaces {}…, the request''s arguments are {}…', left(replaces, 12), left(digest_before, 12)) END
               WHEN 'duplicate-approval' THEN format('{} already approved these arguments', actor)
               WHEN 'edit-denied' THEN 'the policy denies the edited call'
               WHEN 'not-expired' THEN CASE WHEN kind = 'escalated'
                   THEN format('request {} escalates at {}, not before', request, deadline_before)
                   ELSE format('request {} expires at {}, not before', request, deadline_before) END
               WHEN 'escalates' THEN format('request {} escalates to stage {} at its deadline; it does not expire',
                                            request, stage_before + 1)
               WHEN 'no-escalation' THEN format('request {} is at its last stage ({}): it expires, it does not escalate',
                                                request, stage_before)
               WHEN 'escalation-mismatch' THEN CASE escalation_fault
                   WHEN 'stage' THEN format('request {} is at stage {}; it escalates to stage {}, not {}',
                                            request, stage_before, stage_before + 1, stage)
                   WHEN 'requirements' THEN format('the requirements of stage {} are not the next stage of request {}''s',
                                                   stage, request)
                   ELSE format('stage {} of request {} lasts until {}, not {}', stage, request, escalation_deadline, deadline_text) END
               WHEN 'already-executed' THEN CASE WHEN kind = 'cancelled'
                   THEN format('request {} is already running', request)
                   ELSE format('request {} was already started', request) END
               WHEN 'not-approved' THEN format('request {} is {}; it may not run', request, status_before)
               WHEN 'digest-mismatch' THEN CASE WHEN kind = 'execution_started'
                   THEN format('execution uses arguments {}…, the approved ones are {}…', left(args_digest, 12), left(digest_before, 12))
                   ELSE 'the outcome names other arguments than the execution started with' END
               WHEN 'not-started' THEN format('request {} has no execution_started before its outcome', request)
               WHEN 'misplaced-genesis' THEN 'a genesis event may only open the ledger'
           END AS detail
    FROM _timeline WHERE violation IS NOT NULL
),
-- The redaction rules of ledger.workflow.machine (Workflow._check_redaction), in its order.
rd AS (
    SELECT r.seq, r.position, r.kind, r.segment_file, r.line, r.target, r.path,
           EXISTS (SELECT 1 FROM events p WHERE p.valid AND p.kind = 'proposed' AND p.seq = r.target
                                              AND p.position < r.position) AS is_proposal,
           (SELECT arg_max(e.request, e.position) FROM events e WHERE e.valid AND e.kind = 'edited' AND e.seq = r.target
                                                                  AND e.position < r.position) AS edit_request,
           row_number() OVER (PARTITION BY r.target, r.path ORDER BY r.position) > 1 AS repeated,
           (SELECT arg_min(o.path, o.position) FROM events o
            WHERE o.valid AND o.kind = 'redacted' AND o.target = r.target AND o.position < r.position
              AND length(r.path) > length(o.path) AND starts_with(r.path, o.path)
              AND substr(r.path, length(o.path) + 1, 1) IN ('.', '[')) AS outer_path
    FROM events r WHERE r.valid AND r.kind = 'redacted'
),
rd1 AS (
    SELECT *, CASE WHEN is_proposal THEN target ELSE edit_request END AS target_request FROM rd
),
rd2 AS (
    SELECT *,
           (SELECT arg_max(tl.status_after, tl.position) FROM _timeline tl
            WHERE tl.known AND tl.request = rd1.target_request AND tl.position < rd1.position) AS status_before
    FROM rd1
),
r AS (
    SELECT seq, target_request AS request, kind, segment_file, line, position,
           CASE WHEN target_request IS NULL THEN 'redaction-target'
                WHEN starts_with(path, 'context') AND NOT is_proposal THEN 'redaction-target'
                WHEN status_before NOT IN (@FINAL) THEN 'redaction-too-early'
                WHEN repeated OR outer_path IS NOT NULL THEN 'already-redacted'
           END AS code,
           CASE WHEN target_request IS NULL THEN format('seq {} is not an earlier proposal or edit; only those store data', target)
                WHEN starts_with(path, 'context') AND NOT is_proposal THEN format('seq {} is an edit, which stores no context', target)
                WHEN status_before NOT IN (@FINAL)
                    THEN format('request {} is {} and may still run; it is redacted once final', target_request, status_before)
                WHEN repeated THEN format('{} of seq {} is already redacted', path, target)
                WHEN outer_path IS NOT NULL
                    THEN format('{} of seq {} is inside {}, which is already redacted', path, target, outer_path)
           END AS detail
    FROM rd2
)
SELECT seq, request, code, detail, kind, segment_file, line, position FROM t
UNION ALL
SELECT seq, request, code, detail, kind, segment_file, line, position FROM r WHERE code IS NOT NULL
""".replace("@FINAL", final)


def _request_sql() -> list[str]:
    requests = """
CREATE OR REPLACE TEMP VIEW requests AS
WITH tl AS MATERIALIZED (
    SELECT * FROM _timeline WHERE known
),
t AS (
    SELECT *,
           max(epoch) OVER (PARTITION BY request) AS last_epoch,
           position = max(CASE WHEN decision_set IS NOT NULL THEN position END) OVER (PARTITION BY request) AS last_decision,
           position = max(CASE WHEN kind IN ('rejected', 'responded', 'expired', 'cancelled')
                                    OR (kind = 'proposed' AND s_decision = 'reject') THEN position END)
               OVER (PARTITION BY request) AS last_final,
           position = max(CASE WHEN reqs_set IS NOT NULL THEN position END) OVER (PARTITION BY request) AS last_reqs,
           position = max(CASE WHEN kind = 'interrupted' THEN position END) OVER (PARTITION BY request) AS last_interrupt,
           position = max(CASE WHEN kind IN ('interrupted', 'escalated') THEN position END) OVER (PARTITION BY request) AS last_deadline,
           position = max(CASE WHEN kind = 'execution_started' THEN position END) OVER (PARTITION BY request) AS last_start,
           position = max(CASE WHEN kind = 'executed' THEN position END) OVER (PARTITION BY request) AS last_executed,
           position = max(CASE WHEN status_set IS NOT NULL THEN position END) OVER (PARTITION BY request) AS last_status,
           position = max(CASE WHEN digest_set IS NOT NULL THEN position END) OVER (PARTITION BY request) AS last_digest
    FROM _timeline WHERE known
),
agg AS (
    SELECT request,
           any_value(status_set) FILTER (WHERE last_status) AS status,
           any_value(decision_set) FILTER (WHERE last_decision) AS decision,
           any_value(ts) FILTER (WHERE last_decision) AS decided_at,
           any_value(CASE WHEN kind = 'expired' THEN NULL ELSE actor END) FILTER (WHERE last_decision) AS decided_by,
           any_value(CASE kind WHEN 'rejected' THEN reason WHEN 'responded' THEN message
                               WHEN 'expired' THEN message WHEN 'cancelled' THEN reason
                               WHEN 'proposed' THEN s_reason END) FILTER (WHERE last_final) AS reason,
           coalesce(list(actor ORDER BY position) FILTER (WHERE kind IN ('approved', 'edited')), []::VARCHAR[]) AS approvers,
           coalesce(list(actor ORDER BY position) FILTER (WHERE approval_rank = 1 AND epoch = last_epoch), []::VARCHAR[]) AS approved_by,
           count(*) FILTER (WHERE kind = 'edited') AS edits,
           any_value(reqs_set) FILTER (WHERE last_reqs) AS requirements,
           any_value(deadline) FILTER (WHERE last_deadline) AS deadline,
           any_value(deadline_text) FILTER (WHERE last_deadline) AS deadline_text,
           any_value(ts) FILTER (WHERE last_interrupt) AS interrupted_at,
           any_value(digest_set) FILTER (WHERE last_digest) AS digest,
           any_value(ts) FILTER (WHERE last_start) AS execution_started_at,
           any_value(executor) FILTER (WHERE last_start) AS executor,
           any_value(ts) FILTER (WHERE last_executed) AS executed_at,
           any_value(outcome) FILTER (WHERE last_executed) AS outcome,
           any_value(result_digest) FILTER (WHERE last_executed) AS result_digest,
           any_value(error) FILTER (WHERE last_executed) AS error,
           count(*) AS events,
           max(ts) AS last_event_at
    FROM t GROUP BY request
)
SELECT p.request,
       p.tool,
       p.run,
       p.proposer,
       p.call_id,
       p.policy,
       p.policy_digest,
       p.effect,
       p.rules[1].id AS rule,
       [r.id FOR r IN p.rules] AS rules,
       p.reasons,
       p.ts AS proposed_at,
       p.ts_text AS proposed_at_text,
       agg.status,
       agg.decision,
       agg.decided_at,
       agg.decided_by,
       agg.reason,
       agg.approvers,
       agg.approved_by,
       len(agg.approved_by)::BIGINT AS approvals,
       list_max(list_transform(agg.requirements.quorums, lambda q: q.count)) AS quorum,
       agg.requirements.quorums AS quorums,
       agg.requirements,
       agg.deadline,
       agg.deadline_text,
       agg.interrupted_at,
       agg.edits > 0 AS edited,
       agg.edits,
       agg.digest,
       p.args_digest AS original_digest,
       agg.execution_started_at,
       agg.executor,
       agg.executed_at,
       agg.outcome,
       agg.result_digest,
       agg.error,
       agg.events,
       agg.last_event_at
FROM agg JOIN tl p ON p.request = agg.request AND p.kind = 'proposed'
"""
    # list comprehension syntax needs DuckDB >= 1.2; list_transform keeps 1.x happy too.
    requests = requests.replace("[r.id FOR r IN p.rules]", "list_transform(p.rules, lambda r: r.id)")
    pending = """
CREATE OR REPLACE TEMP VIEW pending AS
SELECT request, tool, run, proposer, rule, proposed_at, interrupted_at, deadline,
       quorum, quorums, approvals,
       list_sum(list_transform(quorums, lambda q: greatest(
           q.count - len(list_filter(approved_by, lambda a: q.approvers IS NULL OR list_contains(q.approvers, a))), 0
       )))::BIGINT AS approvals_needed,
       approved_by,
       CASE WHEN list_bool_or(list_transform(quorums, lambda q: q.approvers IS NULL)) THEN NULL
            ELSE list_sort(list_distinct(flatten(list_transform(quorums, lambda q: q.approvers)))) END AS eligible,
       requirements.decisions AS decisions, edits, digest
FROM requests WHERE status = 'pending'
"""
    decision_times = """
CREATE OR REPLACE TEMP VIEW decision_times AS
SELECT request, tool, rule, decision, decided_by, proposed_at, decided_at,
       (epoch_us(decided_at) - epoch_us(proposed_at)) / 1e6 AS seconds
FROM requests WHERE effect = 'ask' AND decision IS NOT NULL
"""
    rate_cols = """
       count(*) AS requests,
       count(*) FILTER (WHERE effect = 'allow') AS allowed,
       count(*) FILTER (WHERE effect = 'deny') AS denied,
       count(*) FILTER (WHERE effect = 'ask') AS asks,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'approve') AS approve,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'reject') AS reject,
       count(*) FILTER (WHERE effect = 'ask' AND edited) AS edit,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'respond') AS respond,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'expire') AS expire,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'cancel') AS cancel,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'approve') / nullif(count(*) FILTER (WHERE effect = 'ask'), 0) AS approve_share,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'reject') / nullif(count(*) FILTER (WHERE effect = 'ask'), 0) AS reject_share,
       count(*) FILTER (WHERE effect = 'ask' AND edited) / nullif(count(*) FILTER (WHERE effect = 'ask'), 0) AS edit_share,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'respond') / nullif(count(*) FILTER (WHERE effect = 'ask'), 0) AS respond_share,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'expire') / nullif(count(*) FILTER (WHERE effect = 'ask'), 0) AS expire_share,
       count(*) FILTER (WHERE effect = 'ask' AND decision = 'cancel') / nullif(count(*) FILTER (WHERE effect = 'ask'), 0) AS cancel_share"""
    by_tool = f"""
CREATE OR REPLACE TEMP VIEW rates_by_tool AS
SELECT tool,{rate_cols}
FROM requests GROUP BY tool
"""
    by_rule = f"""
CREATE OR REPLACE TEMP VIEW rates_by_rule AS
SELECT policy, rule,{rate_cols}
FROM (SELECT * EXCLUDE (rule), unnest(rules) AS rule FROM requests) GROUP BY policy, rule
"""
    by_approver = """
CREATE OR REPLACE TEMP VIEW rates_by_approver AS
SELECT actor AS approver,
       count(DISTINCT request) AS requests,
       count(*) AS actions,
       count(*) FILTER (WHERE kind = 'approved') AS approve,
       count(*) FILTER (WHERE kind = 'rejected') AS reject,
       count(*) FILTER (WHERE kind = 'edited') AS edit,
       count(*) FILTER (WHERE kind = 'responded') AS respond,
       count(*) FILTER (WHERE kind = 'approved') / count(*) AS approve_share,
       count(*) FILTER (WHERE kind = 'rejected') / count(*) AS reject_share,
       count(*) FILTER (WHERE kind = 'edited') / count(*) AS edit_share,
       count(*) FILTER (WHERE kind = 'responded') / count(*) AS respond_share
FROM _timeline WHERE known AND decision_word IS NOT NULL GROUP BY actor
"""
    return [requests, pending, decision_times, by_tool, by_rule, by_approver]


# --- entry points -----------------------------------------------------------------------------------


def connect(path: str | Path, *, con=None):
    """Register the views over the ledger directory at `path` and return the connection.

    `con` is an existing duckdb connection to add them to (as TEMP views, which replace views of
    the same names); by default a new in-memory connection with TimeZone set to UTC. Raises
    LedgerUnreadable when `path` is not a ledger directory with at least one segment, and its
    subclass LinesTooLong when a segment holds a line over ledger.store.lines.MAX_LINE_BYTES (checked
    now, in bounded memory; a view reads the files at each query, so a line written later is
    not checked).
    """
    import duckdb

    path = Path(path)
    if not path.is_dir():
        raise LedgerUnreadable(f"{path}: no such ledger directory")
    if not list_segments(path):
        raise LedgerUnreadable(f"{path}: no ledger segments ({SEGMENT_GLOB}) in this directory")
    refuse_long_lines(path)
    if con is None:
        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
    for statement in _view_sql(con, path.resolve()):
        con.execute(statement)
    return con


class LinesTooLong(LedgerUnreadable):
    """A segment holds a line longer than ledger.store.lines.MAX_LINE_BYTES: the views do not read the
    ledger (DuckDB would hold the line whole, and copies of it). `segment`, `line` (1-based)
    and `offset` (bytes) say where; `size` is its length, line feed not counted."""

    def __init__(self, segment: str, line: int, offset: int, size: int, terminated: bool):
        what = "line" if terminated else "torn last line"
        super().__init__(
            f"{segment}: {what} {line} (at byte {offset}) is {size:,} bytes long, over the limit of {MAX_LINE_BYTES:,} "
            "bytes (docs/ledger-format.md, section 2); the views do not read this ledger (countersign ledger verify "
            "reports the line)"
        )
        self.segment, self.line, self.offset, self.size = segment, line, offset, size


def refuse_long_lines(path: Path) -> None:
    """Raise LinesTooLong for the first line over the limit in the segments of `path`; a scan in
    bounded chunks (ledger.store.scan.long_lines), linear in the ledger's size."""
    for segment in list_segments(path):
        with segment.open("rb") as handle:
            found = long_lines(handle)
        if found is not None:
            raise LinesTooLong(segment.name, found.number, found.offset, found.size, found.terminated)


class QueryRefused(ValueError):
    """The SQL is not one read-only SELECT statement."""


def check_select(con, sql: str) -> None:
    """Raise QueryRefused unless `sql` is exactly one SELECT (WITH, DESCRIBE, SHOW, SUMMARIZE)."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"the SQL does not parse: {exc}") from None
    if len(statements) != 1:
        raise QueryRefused(f"give exactly one SQL statement, not {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise QueryRefused(f"only a SELECT statement may run, not {statements[0].type.name}")


def query(path: str | Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one read-only SQL statement over the views of the ledger at `path`:
    `(column names, rows)`.

    The statement must be a single SELECT (WITH, DESCRIBE, SHOW and SUMMARIZE are SELECTs too):
    COPY, ATTACH, INSTALL, SET and the like are refused with QueryRefused, because an audit
    query must never write, least of all into the ledger. The connection may then read files only
    inside the ledger's directory, and its configuration is locked. Raises QueryRefused,
    ledger.store.log.LedgerUnreadable, and duckdb errors for SQL that does not run.
    """
    con = connect(path)
    try:
        check_select(con, sql)
        directory = str(Path(path).resolve())
        con.execute(f"SET allowed_directories = [{_lit(directory + '/')}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        return columns, cursor.fetchall()
    finally:
        con.close()
