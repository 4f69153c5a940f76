"""An independent verifier for countersign-ledger/1, written only from docs/ledger-format.md.

Standard library only; it imports nothing from the project. Entry point:

    verify_dir(path) -> (ok, count, head, first_bad_seq, message)

`count` and `head` describe the intact prefix (all lines when `ok`); `first_bad_seq` is the
expected seq of the first failing line, or None when the ledger is intact or is unreadable as a
whole (no directory, no segments).  A torn tail is reported in `message` but does not fail.

Points where the document once left a choice (now settled in it):
- numbers: integers are read exactly, other numbers as the nearest double (1.5e300 is a double);
- member order, single occurrence and listed values are checked; deadline is a ts;
- DATA is checked by the digests of its values only; its spelling is left to the project's own
  verifier, as section 5 permits;
- segments must be numbered 00000001.. without gaps; an empty ledger fails at seq 1;
- an approver approves the current arguments at most once; an edit starts the count afresh;
- `cancelled` needs a request that is not final and has not started executing;
- `key` (an idempotency key, 1 to 256 characters) is absent or follows `prev`; never null.
"""

import hashlib
import json
import math
import re
from datetime import datetime
from pathlib import Path

ZERO = "0" * 64
FORMAT = "countersign-ledger/1"
SEGMENT = re.compile(r"events-(\d{8})\.jsonl")
HEX64 = re.compile(rb"[0-9a-f]{64}")
TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
HEAD, MID = b'{"body":', b',"hash":"'
TAIL = b'","data":'


class Bad(Exception):
    pass


# ---- section 4: argument digests ---------------------------------------------------------------

def _H(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def N(v) -> str:
    """Canonical text of a JSON number: an int (read exactly) or a float (the nearest double)."""
    if isinstance(v, int):
        return str(v)
    if v.is_integer():
        return str(int(v))  # exact integer value of the double: 1.0 -> 1, -0.0 -> 0, 1e3 -> 1000
    return repr(v)  # shortest round-trip text


def D(v) -> bytes:
    if v is None:
        return _H(b"n")
    if v is True or v is False:
        return _H(b"b1" if v else b"b0")
    if isinstance(v, (int, float)):
        return _H(b"d" + N(v).encode("ascii"))
    if isinstance(v, str):
        return _H(b"s" + v.encode("utf-8"))
    if isinstance(v, list):
        return _H(b"l" + b"".join(D(x) for x in v))
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-8"))
        return _H(b"o" + b"".join(D(k) + D(v[k]) for k in keys))
    raise TypeError(f"not a JSON value: {v!r}")


def digest(v) -> str:
    return D(v).hex()


# ---- JSON parsing: exact numbers, no NaN/Infinity, duplicate keys kept visible --------------------

def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _double(text):
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} has no finite nearest double")
    return value


def loads(b: bytes):
    """Parse JSON: integers exactly, other numbers as the nearest double, objects as _Obj."""
    return json.loads(b.decode("utf-8"), parse_float=_double, parse_constant=_no_constant,
                      object_pairs_hook=_Obj)


class _Obj(dict):
    """A dict that remembers its member list, so order and duplicates can be checked."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.names = [k for k, _ in pairs]


# ---- section 3: event schema ----------------------------------------------------------------------

def _str(v): return isinstance(v, str)
def _opt(v): return v is None or isinstance(v, str)
def _int(v): return isinstance(v, int) and not isinstance(v, bool)
def _strs(v): return isinstance(v, list) and all(map(_str, v))
def _one_of(*xs): return lambda v: isinstance(v, str) and v in xs
def _pos(v): return _int(v) and v >= 1
def _nat(v): return _int(v) and v >= 0
def _hex(v): return isinstance(v, str) and HEX64.fullmatch(v.encode()) is not None
def _opt_hex(v): return v is None or _hex(v)


def _ts(v):
    if not (isinstance(v, str) and TS.fullmatch(v)):
        return False
    try:
        datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%fZ")  # a real date and time
    except ValueError:
        return False
    return True


def _members(v, spec):
    """Exactly the listed members, in the listed order, each once (section 6, step 1)."""
    return isinstance(v, _Obj) and v.names == list(spec)


def _obj(spec):
    def check(v):
        return _members(v, spec) and all(t(v[k]) for k, t in spec.items())
    return check


RULES = lambda v: isinstance(v, list) and all(map(_obj({"id": _str, "line": _nat}), v))
DECISIONS = ("approve", "edit", "reject", "respond")
QUORUM = _obj({"count": _pos, "approvers": lambda v: v is None or _strs(v), "group": _opt})
REQUIREMENTS = _obj({
    "quorums": lambda v: isinstance(v, list) and len(v) >= 1 and all(map(QUORUM, v)),
    "decisions": lambda v: _strs(v) and set(v) <= set(DECISIONS), "timeout_seconds": _pos,
    "on_timeout": _one_of("reject"), "timeout_message": _opt})
EFFECT = _one_of("allow", "deny", "ask")
COMMON = {"kind": _str, "seq": _int, "ts": _ts, "prev": _str}
KEY = {"key": lambda v: isinstance(v, str) and 1 <= len(v) <= 256}  # optional, right after prev
KINDS = {
    "genesis": {"format": _one_of(FORMAT), "ledger_id": _str},
    "proposed": {"run": _opt, "proposer": _str, "call_id": _opt, "tool": _str,
                 "args_digest": _hex, "context_digest": _hex, "policy": _str,
                 "policy_digest": _hex, "effect": EFFECT, "rules": RULES, "reasons": _strs},
    "interrupted": {"request": _pos, "requirements": REQUIREMENTS, "deadline": _ts},
    "approved": {"request": _pos, "approver": _str, "args_digest": _hex, "comment": _opt},
    "edited": {"request": _pos, "editor": _str, "args_digest": _hex, "replaces": _hex,
               "policy_digest": _hex, "effect": EFFECT, "rules": RULES,
               "requirements": REQUIREMENTS, "reason": _opt},
    "rejected": {"request": _pos, "approver": _str, "reason": _str},
    "responded": {"request": _pos, "approver": _str, "message": _str},
    "expired": {"request": _pos, "outcome": _one_of("reject"), "message": _opt},
    "cancelled": {"request": _pos, "by": _str, "reason": _opt},
    "execution_started": {"request": _pos, "args_digest": _hex, "executor": _opt},
    "executed": {"request": _pos, "args_digest": _hex, "outcome": _one_of("ok", "error"),
                 "result_digest": _opt_hex, "error": _opt},
    "recovered": {"segment": _str, "offset": _nat, "fragment_bytes": _pos,
                  "fragment_sha256": _hex, "quarantine": _str},
}


# ---- sections 2, 3, 5 and 6.1-6.7: one line ----------------------------------------------------

def check_line(line: bytes, i: int, prev_hash: str):
    """Check one line (without its line feed); return (body, hash). Raises Bad."""
    if not line.startswith(HEAD) or not line.endswith(b"}"):
        raise Bad("line is not {\"body\":...}")
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        raise Bad("line is not UTF-8")
    if re.search(rb"[ \t\r\n]", STRING.sub(b"", line)):
        raise Bad("whitespace outside a JSON string")
    end = line.find(MID, len(HEAD))
    if end < 0:
        raise Bad('no ,"hash":" after the body')
    raw, h = line[len(HEAD):end], line[end + 9:end + 73]
    if not HEX64.fullmatch(h) or line[end + 73:end + 82] != TAIL:
        raise Bad("malformed hash")
    try:
        body, data = loads(raw), loads(line[end + 82:-1])
    except (ValueError, RecursionError) as e:
        raise Bad(f"not JSON: {e}")
    if not isinstance(body, _Obj) or body.get("kind") not in KINDS:
        raise Bad("body is not an event of a known kind")
    spec = {**COMMON, **(KEY if "key" in body.names else {}), **KINDS[body["kind"]]}
    if not _members(body, spec):
        raise Bad(f"members of {body['kind']} are {body.names}, expected {list(spec)}")
    for k, t in spec.items():
        if not t(body[k]):
            raise Bad(f"bad {k}: {body[k]!r}")
    if body["seq"] != i:
        raise Bad(f"seq is {body['seq']}, expected {i}")
    if body["prev"] != prev_hash:
        raise Bad("prev is not the hash of the previous line")
    if h.decode() != hashlib.sha256(raw).hexdigest():
        raise Bad("hash does not match the body")
    if (i == 1) != (body["kind"] == "genesis"):
        raise Bad("seq 1 must be genesis, and only seq 1")
    check_data(body, data)
    return body, h.decode()


def check_data(body, data):
    kind = body["kind"]
    want = {"proposed": ["args", "context"], "edited": ["args"]}.get(kind)
    if want is None:
        if data is not None:
            raise Bad(f"data of {kind} must be null")
        return
    if not (isinstance(data, _Obj) and sorted(data.names) == sorted(want)):  # any order: section 5
        raise Bad(f"data of {kind} must be an object with members {want}")
    if not all(isinstance(data[k], dict) for k in want):
        raise Bad("args and context must be JSON objects")
    try:
        if digest(data["args"]) != body["args_digest"]:
            raise Bad("args_digest does not match data.args")
        if kind == "proposed" and digest(data["context"]) != body["context_digest"]:
            raise Bad("context_digest does not match data.context")
    except (UnicodeEncodeError, ValueError) as e:  # lone surrogate escape; huge number
        raise Bad(f"data cannot be digested: {e}")


# ---- section 6, "Workflow rules" ---------------------------------------------------------------

class Workflow:
    DECISION = {"approved": ("approve", "approver"), "edited": ("edit", "editor"),
                "rejected": ("reject", "approver"), "responded": ("respond", "approver")}

    def __init__(self):
        self.req = {}

    def apply(self, e):
        kind, seq = e["kind"], e["seq"]
        if kind == "proposed":
            self.req[seq] = dict(
                proposer=e["proposer"], effect=e["effect"], digest=e["args_digest"],
                final=e["effect"] == "deny", interrupted=False, requirements=None,
                deadline=None, votes=set(), approved=False, started=None)
            return
        if "request" not in e:
            return  # genesis, recovered
        r = self.req.get(e["request"])
        if r is None:
            raise Bad(f"request {e['request']} names no earlier proposed event")
        if r["final"]:
            raise Bad(f"request {e['request']} is already final")
        pending = r["interrupted"] and not r["approved"]
        if kind == "interrupted":
            if r["effect"] != "ask" or r["interrupted"]:
                raise Bad("only an ask proposal is interrupted, and only once")
            r.update(interrupted=True, requirements=e["requirements"], deadline=e["deadline"])
        elif kind in self.DECISION:
            decision, who = self.DECISION[kind]
            who, q = e[who], r["requirements"]
            if not pending:
                raise Bad(f"{kind} needs a pending request")
            if decision not in q["decisions"]:
                raise Bad(f"{decision} is not an allowed decision")
            if not self.admits(r, q, who):
                raise Bad(f"{who} may not decide this request")
            if not e["ts"] < r["deadline"]:
                raise Bad("decision after the deadline")
            if kind == "approved":
                if e["args_digest"] != r["digest"]:
                    raise Bad("approval of a digest that is not the current one")
                self.vote(r, who, r["digest"])
            elif kind == "edited":
                if e["replaces"] != r["digest"] or e["effect"] == "deny":
                    raise Bad("edit must replace the current digest with a non-deny effect")
                r.update(digest=e["args_digest"], requirements=e["requirements"], votes=set())
                if self.admits(r, e["requirements"], who):
                    self.vote(r, who, r["digest"])
            else:
                r["final"] = True
        elif kind == "expired":
            if not pending or not e["ts"] >= r["deadline"]:
                raise Bad("expired needs a pending request past its deadline")
            r["final"] = True
        elif kind == "cancelled":
            if r["started"] is not None:
                raise Bad("cancelled after execution started")
            r["final"] = True
        elif kind == "execution_started":
            if not (r["effect"] == "allow" or r["approved"]):
                raise Bad("execution of a request neither allowed nor approved")
            if e["args_digest"] != r["digest"] or r["started"] is not None:
                raise Bad("execution must use the current digest, once")
            r["started"] = e["args_digest"]
        elif kind == "executed":
            if r["started"] is None or e["args_digest"] != r["started"]:
                raise Bad("executed without a matching execution_started")
            r["final"] = True

    @staticmethod
    def admits(r, q, who):
        return who != r["proposer"] and any(
            quorum["approvers"] is None or who in quorum["approvers"] for quorum in q["quorums"])

    @staticmethod
    def vote(r, who, d):
        if who in r["votes"]:  # votes hold approvals of the current arguments only
            raise Bad(f"{who} already approved these arguments")
        r["votes"].add(who)
        if all(len([v for v in r["votes"] if q["approvers"] is None or v in q["approvers"]]) >= q["count"]
               for q in r["requirements"]["quorums"]):
            r["approved"] = True


# ---- sections 1 and 6: the directory ---------------------------------------------------------------

def verify_dir(path):
    root = Path(path)
    if not root.is_dir():
        return False, 0, ZERO, None, f"unreadable: {root} is not a directory"
    segs = sorted(p for p in root.iterdir() if SEGMENT.fullmatch(p.name) and p.is_file())
    if not segs:
        return False, 0, ZERO, None, "unreadable: no segments"
    count, head, flow, warn, last_ts = 0, ZERO, Workflow(), "", ""
    for n, seg in enumerate(segs, 1):
        if seg.name != f"events-{n:08d}.jsonl":
            return False, count, head, count + 1, f"segment {seg.name} out of sequence"
        data = seg.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the segment ends in a line feed
        for line in lines:
            try:
                body, h = check_line(line, count + 1, head)
                if body["ts"] < last_ts:  # section 6, step 5: time never goes backwards
                    raise Bad("ts is earlier than the previous line's")
                flow.apply(body)
            except Bad as e:
                return False, count, head, count + 1, f"seq {count + 1}: {e}"
            count, head, last_ts = count + 1, h, body["ts"]
        if tail and n < len(segs):
            return False, count, head, count + 1, f"{seg.name} does not end in a line feed"
        if tail:
            try:  # section 6: a whole line that passes every check as the next line counts
                body, h = check_line(tail, count + 1, head)
                if body["ts"] < last_ts:
                    raise Bad("ts is earlier than the previous line's")
            except Bad:
                warn = f"; torn tail of {len(tail)} bytes at offset {len(data) - len(tail)} ignored"
            else:
                try:
                    flow.apply(body)
                except Bad as e:
                    return False, count, head, count + 1, f"seq {count + 1}: {e}"
                count, head = count + 1, h
                warn = "; the last line lacks its line feed and counts"
    if count == 0:
        return False, 0, ZERO, 1, "the ledger has no events (no genesis)"
    return True, count, head, None, "intact" + warn
