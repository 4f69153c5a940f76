r"""An independent verifier for countersign-ledger/1 and /2, written only from docs/ledger-format.md.

Standard library only, and `cryptography`'s Ed25519 for signatures (a primitive not to write
again); it imports nothing from the project. Entry point:

    verify_dir(path, rosters=()) -> (ok, count, head, first_bad_seq, message)

With `rosters` (paths of roster files, section 11.2), every decision's signature is checked
against the roster in force (section 11.3).

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
- `key` (an idempotency key, 1 to 256 characters) is absent or follows `prev`; never null;
- a line longer than 16,777,216 bytes (line feed not counted) fails check 1 (section 2). This
  verifier reads segments whole, as a test tool: it checks the limit, not its own memory.

Redaction (section 10), and the choices made where the document leaves one:
- a `redacted` event's `path` must be canonical (10.1). Checked by parsing the general grammar
  (any JSON string in `["…"]`) and re-rendering: `.name` for a `name` key, otherwise `["…"]`
  with `\"`, `\\`, the short escapes `\b \t \n \f \r` and `\u00xx` (lowercase) for the
  other characters below U+0020. The document lists both `\n` and `\u00xx` without saying which
  of `\n` and `\u000a` is the one spelling; the short form is taken (as JSON encoders do). A path
  holding a lone surrogate is not canonical (strings are Unicode scalar values, section 4);
- R(T) (10.3) is read from every line of every segment file (also one after a gap in the
  numbers, and the unterminated end of a segment other than the last) whose BODY passes check 1
  as a `redacted` event, whether or not the line passes its other checks: such a line fails at
  its own seq anyway, so the choice only moves which seq is reported first. The unterminated end
  of the last segment counts only when it continues the chain (section 6's exception, checks 1-4);
- the announcement check of a `redacted` event checks the pair that event announces (section 6:
  "what it announces holds"), not every pair of R(T) (10.3: "for each (P, d) announced for T");
- "P lies inside Q" is step-wise: Q's steps are a proper prefix of P's;
- a marker is an object whose only member (once) is `$redacted`, equal to the announced digest.
"""

import hashlib
import json
import math
import re
from datetime import datetime
from pathlib import Path

ZERO = "0" * 64
FORMAT = "countersign-ledger/1"
FORMAT_2 = "countersign-ledger/2"
SIGNABLE = ("approved", "edited", "rejected", "responded", "cancelled", "remembered")
DECIDER = {"approved": "approver", "edited": "editor", "rejected": "approver", "responded": "approver",
           "cancelled": "by", "remembered": "approver"}
SEGMENT = re.compile(r"events-(\d{8})\.jsonl")
HEX64 = re.compile(rb"[0-9a-f]{64}")
TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
HEAD, MID = b'{"body":', b',"hash":"'
TAIL = b'","data":'
REDACTED_LINE = b'{"body":{"kind":"redacted",'  # section 10.3: how a pre-scan finds announcements
MAX_LINE = 16_777_216  # section 2: a line's longest, its line feed not counted


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


# ---- section 10.1: field paths --------------------------------------------------------------------

PATH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")          # ASCII letters, digits and _ only
PATH_INDEX = re.compile(r"0|[1-9][0-9]*")                   # no leading zeros
JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')  # RFC 8259
SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                 "\r": "\\r"}


def parse_path(text):
    """The steps of a field path in any spelling the grammar allows, or None: a tuple whose first
    item is the root ("args" or "context") and the rest ("k", key) or ("i", index)."""
    if not isinstance(text, str):
        return None
    root = next((r for r in ("args", "context") if text.startswith(r)), None)
    if root is None:
        return None
    steps, i = [root], len(root)
    while i < len(text):
        if text[i] == ".":
            m = PATH_NAME.match(text, i + 1)
            if not m:
                return None
            steps.append(("k", m.group()))
            i = m.end()
        elif text[i] == "[":
            m = PATH_INDEX.match(text, i + 1)
            if m and text.startswith("]", m.end()):
                steps.append(("i", int(m.group())))
            else:
                m = JSON_STRING.match(text, i + 1)
                if not (m and text.startswith("]", m.end())):
                    return None
                steps.append(("k", json.loads(m.group())))
            i = m.end() + 1
        else:
            return None
    return tuple(steps) if len(steps) > 1 else None  # path = root 1*step


def _quote(s):
    """A JSON string escaped as BODY strings are (section 3)."""
    return '"' + "".join(SHORT_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if c < " " else c) for c in s) + '"'


def render_step(step):
    kind, v = step
    if kind == "i":
        return f"[{v}]"
    return "." + v if PATH_NAME.fullmatch(v) else "[" + _quote(v) + "]"


def canonical_path(text):
    """True when `text` is a field path in its one canonical spelling (section 10.1)."""
    steps = parse_path(text)
    if steps is None or steps[0] + "".join(map(render_step, steps[1:])) != text:
        return False
    try:
        text.encode("utf-8")  # no lone surrogate
    except UnicodeEncodeError:
        return False
    return True


# ---- section 10.3: digests with markers -----------------------------------------------------------

class Marks:
    """R(T) for one target T: announced path -> value digest, the first announcement winning."""

    def __init__(self):
        self.digest, self.steps, self.above = {}, {}, set()

    def add(self, path, d):
        if path in self.digest:
            return
        steps = parse_path(path)
        self.digest[path], self.steps[path] = d, steps
        self.above.update(steps[:k] for k in range(1, len(steps)))  # where a walk must descend

    def inside_another(self, path):
        """Does `path` lie inside another announced path (`args.card.number` in `args.card`)?"""
        steps = parse_path(path)
        return any(len(s) < len(steps) and steps[:len(s)] == s for s in self.steps.values())


NO_MARKS = Marks()


def _is_marker(v, d):
    return isinstance(v, _Obj) and v.names == ["$redacted"] and v["$redacted"] == d


def marked_digest(v, steps, text, marks) -> bytes:
    """D(v) of the value at path `steps` (spelled `text`), a marker at an announced path with
    the announced digest counting as that digest (section 10.3)."""
    d = marks.digest.get(text)
    if d is not None and _is_marker(v, d):
        return bytes.fromhex(d)
    if steps not in marks.above:
        return D(v)  # no announced path below: section 4 as is
    if isinstance(v, list):
        return _H(b"l" + b"".join(marked_digest(x, steps + (("i", i),), f"{text}[{i}]", marks)
                                  for i, x in enumerate(v)))
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-8"))
        return _H(b"o" + b"".join(
            D(k) + marked_digest(v[k], steps + (("k", k),), text + render_step(("k", k)), marks)
            for k in keys))
    return D(v)


def value_at(data, steps):
    """The value at a path in DATA, or raise KeyError when some step does not exist."""
    v = data[steps[0]]
    for kind, step in steps[1:]:
        if kind == "k" and isinstance(v, dict) and step in v:
            v = v[step]
        elif kind == "i" and isinstance(v, list) and step < len(v):
            v = v[step]
        else:
            raise KeyError(step)
    return v


def check_announcement(e, data, marks):
    """Section 10.3, at the `redacted` event `e`: DATA of its target holds, at the announced path,
    the marker with the announced digest or a value with that digest (computed with markers)."""
    path, d = e["path"], e["value_digest"]
    if marks.inside_another(path):
        return  # that field is gone with the one around it
    steps = parse_path(path)
    try:
        v = value_at(data, steps)
    except KeyError:
        raise Bad(f"redaction: no value at {path} in the data of seq {e['target']}")
    if not (_is_marker(v, d) or marked_digest(v, steps, path, marks).hex() == d):
        raise Bad(f"redaction: the value at {path} of seq {e['target']} is neither the marker "
                  f"with {d} nor a value with that digest")


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


PINNED_FILES = lambda v: isinstance(v, list) and len(v) >= 1 and all(map(_obj({"path": _str, "sha256": _hex}), v))
RULES = lambda v: isinstance(v, list) and all(map(_obj({"id": _str, "line": _nat}), v))
DECISIONS = ("approve", "edit", "reject", "respond")
QUORUM = _obj({"count": _pos, "approvers": lambda v: v is None or _strs(v), "group": _opt})
_REQUIREMENTS = {
    "quorums": lambda v: isinstance(v, list) and len(v) >= 1 and all(map(QUORUM, v)),
    "decisions": lambda v: _strs(v) and set(v) <= set(DECISIONS), "timeout_seconds": _pos,
    "on_timeout": _one_of("reject"), "timeout_message": _opt}
# section 3 and 12: {"scope": "run" | "session"} or {"scope": "until", "seconds": int >= 1}
REMEMBER = lambda v: _obj({"scope": _one_of("run", "session")})(v) or _obj({"scope": _one_of("until"), "seconds": _pos})(v)
REQUIREMENTS = lambda v: _obj(_REQUIREMENTS)(v) or _obj({**_REQUIREMENTS, "remember": REMEMBER})(v)  # `remember` optional, last
_COVERED = {"by": _pos, "requirements": REQUIREMENTS}
COVERED = lambda v: _obj(_COVERED)(v) or _obj({**_COVERED, "session": _str})(v)  # section 12: `session` optional
EFFECT = _one_of("allow", "deny", "ask")
_SIGNATURE_1 = {
    "signer": _one_of("reviewer", "service"), "key": lambda v: isinstance(v, str) and 1 <= len(v) <= 256,
    "key_id": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{8}", v) is not None, "time": _ts,
    "sig": lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9+/]{86}==", v) is not None}
_SIGNATURE_2 = {**_SIGNATURE_1, "statement": lambda v: v == 2 and type(v) is int}
SIGNATURE = lambda v: _obj(_SIGNATURE_1)(v) or _obj(_SIGNATURE_2)(v)  # section 11.1: statement 2, or absent (1)
COMMON = {"kind": _str, "seq": _int, "ts": _ts, "prev": _str}
KEY = {"key": lambda v: isinstance(v, str) and 1 <= len(v) <= 256}  # optional, right after prev
KINDS = {
    "genesis": {"format": _one_of(FORMAT, FORMAT_2), "ledger_id": _str},
    "roster": {"digest": _hex, "by": _str},
    "policy": {"name": _str, "digest": _hex, "by": lambda v: isinstance(v, str) and len(v) >= 1, "source": _opt},
    "proposed": {"run": _opt, "proposer": _str, "call_id": _opt, "tool": _str,
                 "args_digest": _hex, "context_digest": _hex, "policy": _str,
                 "policy_digest": _hex, "effect": EFFECT, "rules": RULES, "reasons": _strs},
    "interrupted": {"request": _pos, "requirements": REQUIREMENTS, "deadline": _ts},
    "approved": {"request": _pos, "approver": _str, "args_digest": _hex, "comment": _opt},
    "edited": {"request": _pos, "editor": _str, "args_digest": _hex, "replaces": _hex,
               "policy_digest": _hex, "effect": EFFECT, "rules": RULES,
               "requirements": REQUIREMENTS, "reason": _opt},
    "rejected": {"request": _pos, "approver": _str, "reason": _str},
    "remembered": {"request": _pos, "approver": _str, "decision": _one_of("approve", "reject"), "tool": _str,
                   "policy_digest": _hex, "scope": REMEMBER, "within": _str, "args_digest": _opt_hex, "reason": _opt},
    "responded": {"request": _pos, "approver": _str, "message": _str},
    "forgotten": {"standing": _pos, "by": lambda v: isinstance(v, str) and len(v) >= 1, "reason": _opt},
    "expired": {"request": _pos, "outcome": _one_of("reject"), "message": _opt},
    "cancelled": {"request": _pos, "by": _str, "reason": _opt},
    "execution_started": {"request": _pos, "args_digest": _hex, "executor": _opt},
    "executed": {"request": _pos, "args_digest": _hex, "outcome": _one_of("ok", "error"),
                 "result_digest": _opt_hex, "error": _opt},
    "recovered": {"segment": _str, "offset": _nat, "fragment_bytes": _pos,
                  "fragment_sha256": _hex, "quarantine": _str},
    "redacted": {"target": _pos, "path": canonical_path, "value_digest": _hex, "reason": _str,
                 "by": _str},
}


# ---- sections 2, 3, 5 and 6.1-6.7: one line ----------------------------------------------------

def parse_line(line: bytes):
    """Section 2's layout and check 1 of one line (without its line feed); return (body, raw
    body bytes, hash, data). Raises Bad."""
    if len(line) > MAX_LINE:  # section 2, check 1
        raise Bad(f"line of {len(line)} bytes is longer than {MAX_LINE}")
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
    if body["kind"] in SIGNABLE and body.names[-1:] == ["signature"]:  # section 11.1: optional, last
        spec["signature"] = SIGNATURE
    if body["kind"] == "proposed" and body.names[-1:] == ["remembered"]:  # section 12: optional, last
        spec["remembered"] = COVERED
    if body["kind"] == "policy" and body.names[-1:] == ["files"]:  # section 11.5: optional, last
        spec["files"] = PINNED_FILES
    if not _members(body, spec):
        raise Bad(f"members of {body['kind']} are {body.names}, expected {list(spec)}")
    for k, t in spec.items():
        if not t(body[k]):
            raise Bad(f"bad {k}: {body[k]!r}")
    return body, raw, h, data


def check_line(line: bytes, i: int, prev_hash: str, marks=NO_MARKS):
    """Check one line (without its line feed), with `marks` its R(T); return (body, hash, data).
    Raises Bad."""
    body, raw, h, data = parse_line(line)
    if body["seq"] != i:
        raise Bad(f"seq is {body['seq']}, expected {i}")
    if body["prev"] != prev_hash:
        raise Bad("prev is not the hash of the previous line")
    if h.decode() != hashlib.sha256(raw).hexdigest():
        raise Bad("hash does not match the body")
    if (i == 1) != (body["kind"] == "genesis"):
        raise Bad("seq 1 must be genesis, and only seq 1")
    check_data(body, data, marks)
    return body, h.decode(), data


def check_data(body, data, marks=NO_MARKS):
    kind = body["kind"]
    want = {"proposed": ["args", "context"], "edited": ["args"]}.get(kind)
    if kind == "executed" and data is not None:  # a kept result (section 5)
        if body["result_digest"] is None or not (isinstance(data, _Obj) and data.names == ["result"]):
            raise Bad("data of executed must be null, or {\"result\": R} beside a result_digest")
        try:
            if digest(data["result"]) != body["result_digest"]:
                raise Bad("result_digest does not match data.result")
        except (UnicodeEncodeError, ValueError) as e:
            raise Bad(f"data cannot be digested: {e}")
        return
    if kind == "policy" and "files" in body.names:  # a pinned policy's text (section 11.5)
        check_pinned(body, data)
        return
    if want is None:
        if data is not None:
            raise Bad(f"data of {kind} must be null")
        return
    if not (isinstance(data, _Obj) and sorted(data.names) == sorted(want)):  # any order: section 5
        raise Bad(f"data of {kind} must be an object with members {want}")
    if not all(isinstance(data[k], dict) for k in want):
        raise Bad("args and context must be JSON objects")
    try:
        if marked_digest(data["args"], ("args",), "args", marks).hex() != body["args_digest"]:
            raise Bad("args_digest does not match data.args")
        if kind == "proposed" and marked_digest(data["context"], ("context",), "context",
                                                marks).hex() != body["context_digest"]:
            raise Bad("context_digest does not match data.context")
    except (UnicodeEncodeError, ValueError) as e:  # lone surrogate escape; huge number
        raise Bad(f"data cannot be digested: {e}")


def check_pinned(body, data):
    """Section 11.5: DATA {"files": [{"path", "text"}...], "groups": {NAME: [ID...]}}; each text's
    SHA-256 (its UTF-8 bytes) the listed one, the paths the listed ones in order; `digest` the
    files' combined digest, with the groups as docs/policy-language.md's "Roster groups" says."""
    files = body["files"]
    if not (isinstance(data, _Obj) and sorted(data.names) == ["files", "groups"]):
        raise Bad("data of a policy event with files must be an object with members ['files', 'groups']")
    texts, groups = data["files"], data["groups"]
    if not (isinstance(texts, list) and len(texts) == len(files)):
        raise Bad("data.files must list one text per file of the body")
    for listed, stored in zip(files, texts):
        if not (isinstance(stored, _Obj) and sorted(stored.names) == ["path", "text"] and _str(stored["text"])):
            raise Bad("each of data.files is {\"path\": str, \"text\": str}")
        if stored["path"] != listed["path"]:
            raise Bad("data.files names another path than the body")
        try:
            raw = stored["text"].encode("utf-8")
        except UnicodeEncodeError:
            raise Bad("a pinned text holds a lone surrogate")
        if hashlib.sha256(raw).hexdigest() != listed["sha256"]:
            raise Bad("a pinned text does not match its sha256")
    if not (isinstance(groups, _Obj) and all(_strs(m) and m == sorted(set(m)) for m in groups.values())):
        raise Bad("data.groups must map names to sorted lists of identities without repeats")
    if len(files) == 1:
        source = files[0]["sha256"]
    else:
        source = hashlib.sha256(json.dumps({"files": [[f["path"], f["sha256"]] for f in files],
                                            "format": "countersign-policy-files/1"},
                                           sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()).hexdigest()
    if groups:
        source = hashlib.sha256(json.dumps({"format": "countersign-policy-groups/1", "groups": dict(groups),
                                            "source": source},
                                           sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()).hexdigest()
    if source != body["digest"]:
        raise Bad("the pinned files and groups do not give the policy event's digest")


# ---- section 6, "Workflow rules" ---------------------------------------------------------------

class Workflow:
    DECISION = {"approved": ("approve", "approver"), "edited": ("edit", "editor"),
                "rejected": ("reject", "approver"), "responded": ("respond", "approver")}

    def __init__(self):
        self.req = {}
        self.with_data = {}  # seq of a proposed or edited event -> (kind, request)
        self.redacted = {}  # target -> [paths of the redacted events so far, in order]
        self.standing = {}  # seq of a remembered event -> its body and whether it stands (section 12)
        self.policy = None  # the digest the last policy event names (section 12: ends other digests' decisions)

    def apply(self, e):
        kind, seq = e["kind"], e["seq"]
        if kind == "proposed":
            allowed, final = e["effect"] == "allow", e["effect"] == "deny"
            if "remembered" in e:
                c = e["remembered"]
                if e["effect"] != "ask" or self.covering(e) != c["by"]:
                    raise Bad(f"not-covered: the standing decision at seq {c['by']} does not cover this proposal")
                allowed = self.standing[c["by"]]["e"]["decision"] == "approve"
                final = not allowed
            self.req[seq] = dict(
                proposer=e["proposer"], effect="allow" if allowed else e["effect"], digest=e["args_digest"],
                final=final, interrupted=False, requirements=None,
                deadline=None, votes=set(), approved=False, started=None, basis=seq,
                tool=e["tool"], run=e["run"], policy_digest=e["policy_digest"], remembering=None,
                rules=frozenset(rule["id"] for rule in e["rules"]))
            self.with_data[seq] = ("proposed", seq)
            return
        if kind == "redacted":
            target, path = e["target"], e["path"]
            if target not in self.with_data:
                raise Bad(f"redaction-target: {target} is not an earlier proposed or edited event")
            of, request = self.with_data[target]
            if parse_path(path)[0] == "context" and of != "proposed":
                raise Bad(f"redaction-target: {path} of an {of} event, which has no context")
            if not self.req[request]["final"]:
                raise Bad(f"redaction-too-early: request {request} is not final")
            earlier = self.redacted.setdefault(target, [])
            if path in earlier:
                raise Bad(f"already-redacted: {path} of seq {target}")
            for q in earlier:  # section 6: P lies inside Q (longer, starts with Q, then . or [)
                if len(path) > len(q) and path.startswith(q) and path[len(q)] in ".[":
                    raise Bad(f"already-redacted: {path} of seq {target} lies inside {q}")
            earlier.append(path)
            return
        if kind == "forgotten":  # section 12: a standing decision in force, no longer
            st = self.standing.get(e["standing"])
            if st is None or st.get("forgotten") or (
                    st["e"]["scope"]["scope"] == "until" and not e["ts"] < st["e"]["within"]):
                raise Bad(f"not-standing: seq {e['standing']} is no standing decision in force")
            st["forgotten"] = True
            return
        if kind == "policy":  # section 12: another policy in force ends the others' standing decisions for good
            self.policy = e["digest"]
            for st in self.standing.values():
                if st["e"]["policy_digest"] != e["digest"]:
                    st["forgotten"] = True
            return
        if "request" not in e:
            return  # genesis, recovered, roster, policy
        r = self.req.get(e["request"])
        if r is None:
            raise Bad(f"request {e['request']} names no earlier proposed event")
        if r["final"]:
            raise Bad(f"request {e['request']} is already final")
        pending = r["interrupted"] and not r["approved"]
        if r["remembering"] is not None:  # section 12: it stands once its own decision follows
            st = self.standing[r["remembering"]]
            if (kind, e.get(DECIDER.get(kind, ""))) == ({"approve": "approved", "reject": "rejected"}[st["e"]["decision"]],
                                                        st["e"]["approver"]):
                st["stands"] = True
            r["remembering"] = None
        if kind == "remembered":
            self.remembered(r, e, pending)
            return
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
                r.update(digest=e["args_digest"], requirements=e["requirements"], votes=set(), basis=seq)
                self.with_data[seq] = ("edited", e["request"])
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

    def remembered(self, r, e, pending):
        """Section 12: a standing decision of a pending request."""
        q, who = r["requirements"], e["approver"]
        if not pending or e["decision"] not in q["decisions"] or not self.admits(r, q, who) or not e["ts"] < r["deadline"]:
            raise Bad("standing-decision: its reviewer may not decide the request so now")
        if "remember" not in q or not _admits(q["remember"], e["scope"]):
            raise Bad("standing-decision: the requirements do not admit its scope")
        if (e["tool"], e["policy_digest"]) != (r["tool"], r["policy_digest"]):
            raise Bad("standing-decision: another tool or policy digest than the request's")
        if self.policy is not None and e["policy_digest"] != self.policy:
            raise Bad("standing-decision: the request's policy is not the one the last policy event names")
        if e["args_digest"] is not None and e["args_digest"] != r["digest"]:
            raise Bad("standing-decision: arguments other than the request's current ones")
        scope = e["scope"]["scope"]
        if scope == "run" and (r["run"] is None or e["within"] != r["run"]):
            raise Bad("standing-decision: within is not the request's run")
        if scope == "until" and e["within"] != _plus(e["ts"], e["scope"]["seconds"]):
            raise Bad("standing-decision: within is not ts plus the seconds")
        if e["decision"] == "approve" and (who in r["votes"] or not all(
                q2["count"] == 1 and (q2["approvers"] is None or who in q2["approvers"]) for q2 in q["quorums"])):
            raise Bad("standing-decision: one approval by its reviewer does not meet the requirements")
        if (e["decision"] == "reject") != (e["reason"] is not None):
            raise Bad("standing-decision: a reason exactly for a rejection")
        self.standing[e["seq"]] = {"e": e, "stands": False, "proposer": r["proposer"], "rules": r["rules"]}
        r["remembering"] = e["seq"]

    def covering(self, p):
        """Section 12: the seq of the standing decision that covers proposal `p`, or None."""
        c = p["remembered"]
        q = c["requirements"]
        if "remember" not in q:
            return None
        best = None
        for seq, st in self.standing.items():
            s = st["e"]
            scope = s["scope"]["scope"]
            if not st["stands"] or st.get("forgotten") or (s["tool"], s["policy_digest"]) != (p["tool"], p["policy_digest"]):
                continue
            if st["proposer"] != p["proposer"] or st["rules"] != frozenset(rule["id"] for rule in p["rules"]):
                continue
            if not _admits(q["remember"], s["scope"]) or s["args_digest"] not in (None, p["args_digest"]):
                continue
            where = {"run": p["run"], "session": c.get("session")}.get(scope)
            if (scope == "until" and not p["ts"] < s["within"]) or (scope != "until" and s["within"] != where):
                continue
            who = s["approver"]
            if who == p["proposer"]:
                continue
            admitted = [quorum["approvers"] is None or who in quorum["approvers"] for quorum in q["quorums"]]
            if s["decision"] == "approve" and not ("approve" in q["decisions"] and all(
                    ok and quorum["count"] == 1 for ok, quorum in zip(admitted, q["quorums"]))):
                continue
            if s["decision"] == "reject" and not any(admitted):
                continue
            rank = (s["decision"] == "reject", seq)
            best = rank if best is None or rank > best else best
        return None if best is None else best[1]

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


def _admits(a, b):
    """Section 12: Remember `a` admits `b`."""
    if a["scope"] == "until" or b["scope"] == "until":
        return a["scope"] == b["scope"] == "until" and b["seconds"] <= a["seconds"]
    return ("run", "session").index(b["scope"]) <= ("run", "session").index(a["scope"])


def _plus(ts, seconds):
    from datetime import timedelta, timezone
    t = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc) + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---- section 11: rosters and signed decisions ---------------------------------------------------

def read_roster(path):
    """Section 11.2: (digest, {(key name, key id): (principal, kind, 32-byte key)}, {name: kind})."""
    import base64
    import tomllib

    doc = tomllib.loads(Path(path).read_text("utf-8"))
    principals, keys = [], {}
    for p in doc.get("principal", []):
        texts = sorted(p.get("keys", []))
        for text in texts:
            name, kid, data = text.split("+", 2)  # the name has no "+"; base64 may
            raw = base64.b64decode(data, validate=True)
            if len(raw) != 33 or raw[0] != 1 or _H(name.encode() + b"\n" + raw)[:4].hex() != kid:
                raise Bad(f"roster {path}: bad key {text}")
            keys[(name, kid)] = (p["name"], p["kind"], raw[1:])
        principals.append({"name": p["name"], "kind": p["kind"], "groups": sorted(p.get("groups", [])),
                           "token_sha256": sorted(p.get("token_sha256", [])), "keys": texts})
    principals.sort(key=lambda x: x["name"])
    digest = D({"format": "countersign-roster/1", "principals": principals}).hex()
    return digest, keys, {x["name"]: x["kind"] for x in principals}


BODY_START = re.compile(rb'\{"kind":"([a-z_]+)","seq":[0-9]+,"ts":"[^"]*","prev":"[0-9a-f]*"')


def check_signature(body, raw, ledger_id, before, roster):
    """Section 11.3 for the decision `body` (stored as `raw`), its request's (basis, digest,
    proposer, interrupting) `before` it, against `roster` (read_roster's). Raises Bad."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    import base64

    kind, basis, current, proposer, interrupting = body["kind"], *before
    who = body[DECIDER[kind]]
    sig = body.get("signature")
    if sig is None:
        if kind == "cancelled" and who == "countersign" and interrupting:
            return
        raise Bad(f"signature: the {kind} by {who} is not signed")
    _digest, keys, kinds = roster
    holder = keys.get((sig["key"], sig["key_id"]))
    if holder is None:
        raise Bad(f"signature: key {sig['key']}+{sig['key_id']} is not in the roster")
    if sig["time"] > body["ts"]:
        raise Bad("signature: signed after the event's time")
    start = BODY_START.match(raw)
    end = raw.rfind(b',"signature":{')
    content = b'{"kind":"' + start.group(1) + b'"' + raw[start.end():end] + b"}"
    version = sig.get("statement", 1)
    prev_line = f"prev {body['prev']}\n" if version == 2 else ""
    statement = (f"countersign-decision/{version}\nledger {ledger_id}\nrequest {body['request']}\nbasis {basis}\n"
                 f"args {current}\n{prev_line}kind {kind}\nsigner {sig['signer']}\ntime {sig['time']}\n"
                 f"content {hashlib.sha256(content).hexdigest()}\n").encode()
    try:
        Ed25519PublicKey.from_public_bytes(holder[2]).verify(base64.b64decode(sig["sig"]), statement)
    except InvalidSignature:
        raise Bad("signature: does not verify")
    allowed = ("reviewer", "agent") if kind == "cancelled" and who == proposer else ("reviewer",)
    if sig["signer"] == "reviewer":
        if holder[0] != who or holder[1] not in allowed:
            raise Bad(f"signature: by {holder[0]} ({holder[1]}), the decision is {who}'s")
    elif holder[1] != "service" or kinds.get(who) not in allowed:
        raise Bad(f"signature: the service attests {who}, who is not a reviewer of the roster")


# ---- sections 1 and 6: the directory ---------------------------------------------------------------

def continues_chain(line: bytes, i: int, prev_hash: str):
    """Section 6's exception: the unterminated end of the last segment is line `i` when it passes
    check 1 and checks 2-4 (seq, prev, hash). Returns its parse, or None."""
    try:
        body, raw, h, data = parse_line(line)
    except Bad:
        return None
    if body["seq"] != i or body["prev"] != prev_hash or h.decode() != hashlib.sha256(raw).hexdigest():
        return None
    return body, raw, h, data


def announcements(contents):
    """Section 10.3's pre-scan: [(target, path, value_digest)] in ledger order, from the lines of
    the segments `contents` (bytes, in order) whose BODY is a `redacted` event; the end of the
    last segment after its last line feed only when it continues the chain."""
    found, complete, last_hash = [], 0, ZERO
    for n, data in enumerate(contents, 1):
        pieces = data.split(b"\n")
        tail = pieces.pop()
        candidates = list(pieces)
        for line in pieces:  # the hash stored on the last complete line, for the tail's prev
            complete += 1
            last_hash = line[line.find(MID) + 9:line.find(MID) + 73].decode("ascii", "replace") if MID in line else ""
        if tail and (n < len(contents) or continues_chain(tail, complete + 1, last_hash)):
            candidates.append(tail)
        for line in candidates:
            if not line.startswith(REDACTED_LINE):
                continue
            try:
                body = parse_line(line)[0]
            except Bad:
                continue
            found.append((body["target"], body["path"], body["value_digest"]))
    return found


def verify_dir(path, rosters=()):
    root = Path(path)
    if not root.is_dir():
        return False, 0, ZERO, None, f"unreadable: {root} is not a directory"
    segs = sorted(p for p in root.iterdir() if SEGMENT.fullmatch(p.name) and p.is_file())
    if not segs:
        return False, 0, ZERO, None, "unreadable: no segments"
    contents = [seg.read_bytes() for seg in segs]
    found = announcements(contents)
    keep = {target for target, *_ in found}  # the DATA that announcement checks read
    return _verify(segs, contents, found, keep, [read_roster(r) for r in rosters])


def _verify(segs, contents, found, keep, rosters=()):
    """One pass over the ledger with R(T) made of `found`, keeping the DATA of the seqs in `keep`."""
    marks = {}
    for target, p, d in found:
        marks.setdefault(target, Marks()).add(p, d)
    kept = {}
    count, head, flow, warn, last_ts = 0, ZERO, Workflow(), "", ""

    # the rosters in the order the ledger used them; a roster event moves forward in it, never back
    signed = {"format": None, "ledger_id": None, "roster": rosters[0] if rosters else None, "at": 0,
              "reached": 0}

    def step(body, data, line=b""):
        kind = body["kind"]
        if kind == "genesis":
            signed.update(format=body["format"], ledger_id=body["ledger_id"])
        if signed["format"] == FORMAT and (kind in ("roster", "policy", "remembered", "forgotten") or "signature" in body
                                           or "remembered" in body):
            raise Bad(f"a {kind} event with what only {FORMAT_2} allows")
        before = None
        if rosters and kind in SIGNABLE and body["request"] in flow.req:
            r = flow.req[body["request"]]
            before = (r["basis"], r["digest"], r["proposer"], r["effect"] == "ask" and not r["interrupted"])
        flow.apply(body)
        if kind == "roster" and rosters:
            at = signed["at"]
            if at is None or rosters[at][0] != body["digest"]:
                at = next((i for i in range(signed["reached"] + 1, len(rosters)) if rosters[i][0] == body["digest"]), None)
                if at is None and any(x[0] == body["digest"] for x in rosters):
                    raise Bad("signature: a roster event goes back to an earlier roster of the order given")
                signed["at"], signed["roster"] = at, ("missing" if at is None else rosters[at])
                if at is not None:
                    signed["reached"] = at
        if before is not None:
            if signed["roster"] == "missing":
                raise Bad("signature: the roster in force was not given")
            raw = line[len(HEAD):line.find(MID, len(HEAD))]
            check_signature(body, raw, signed["ledger_id"], before, signed["roster"])
        if body["seq"] in keep:
            kept[body["seq"]] = data
        if body["kind"] == "redacted":  # section 10.3: after the workflow rules
            check_announcement(body, kept[body["target"]], marks.get(body["target"], NO_MARKS))

    for n, seg in enumerate(segs, 1):
        if seg.name != f"events-{n:08d}.jsonl":
            return False, count, head, count + 1, f"segment {seg.name} out of sequence"
        data = contents[n - 1]
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the segment ends in a line feed
        for line in lines:
            try:
                body, h, d = check_line(line, count + 1, head, marks.get(count + 1, NO_MARKS))
                if body["ts"] < last_ts:  # section 6, step 5: time never goes backwards
                    raise Bad("ts is earlier than the previous line's")
                step(body, d, line)
            except Bad as e:
                return False, count, head, count + 1, f"seq {count + 1}: {e}"
            count, head, last_ts = count + 1, h, body["ts"]
        if tail and n < len(segs):
            return False, count, head, count + 1, f"{seg.name} does not end in a line feed"
        if tail and continues_chain(tail, count + 1, head) is None:
            warn = f"; torn tail of {len(tail)} bytes at offset {len(data) - len(tail)} ignored"
        elif tail:  # section 6: a line continuing the chain counts, and every check applies
            try:
                body, h, d = check_line(tail, count + 1, head, marks.get(count + 1, NO_MARKS))
                if body["ts"] < last_ts:
                    raise Bad("ts is earlier than the previous line's")
                step(body, d, tail)
            except Bad as e:
                return False, count, head, count + 1, f"seq {count + 1}: {e}"
            count, head = count + 1, h
            warn = "; the last line lacks its line feed and counts"
    if count == 0:
        return False, 0, ZERO, 1, "the ledger has no events (no genesis)"
    return True, count, head, None, "intact" + warn
