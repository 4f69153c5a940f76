"""A fast generator of large, lawful ledgers for the ledger benchmarks, cached between runs.

The workload is an agent gate's: requests start and finish interleaved (eight in flight at a
time), each following one script:

    allow:        proposed(allow) → execution_started → executed               50 %
    ask:          proposed(ask) → interrupted → approved → started → executed   22 %
    ask, two:     ... → approved → approved (quorum of 2) → started → executed  6 %
    edit:         ... → interrupted → edited (the editor approves) → started → executed  4 %
    reject:       proposed(ask) → interrupted → rejected                         6 %
    respond:      proposed(ask) → interrupted → responded                        2 %
    deny:         proposed(deny)                                                 10 %

over eight tools with 32 argument sets each (real-looking arguments, their digests computed
once). Time moves 50 ms per event. Every line is composed from pre-encoded pieces of the
body (`ledger.events.encode_event` of a template with placeholders for seq, ts, prev, request
and deadline), so the bytes are exactly what `Ledger.append` writes, without building an event
per line; segments rotate at 64 MiB like the writer's. The result verifies (`ledger verify`),
which the verify benchmark checks on every run.

`events(n)` yields the same workload as (Event, data bytes) for `Ledger.append_batch` and the
other appenders. `cached(n)` returns a ledger of `n` events under the benchmark's work directory
(`COUNTERSIGN_BENCH_DIR`, default ~/.cache/countersign-bench), generating it once (and again when
its segments no longer have the size they were written with). A benchmark that appends must do
so to a copy whose last segment is copied, not hard-linked.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import msgspec

from dsl.requirements import Requirements
from ledger import events as ev
from ledger.digest import encode_arguments
from ledger.store.lines import DATA_MARK, HASH_MARK, PREFIX, SUFFIX
from ledger.store.log import DEFAULT_SEGMENT_BYTES, segment_name

VERSION = 1  # bump when the workload changes: cached ledgers of another version are regenerated
START = datetime(2026, 6, 1, 8, 0, tzinfo=timezone.utc)
STEP_US = 50_000
IN_FLIGHT = 8

TOOLS = {
    "get_order_details": lambda r, i: {"order_id": f"#W{r.randrange(10**6, 10**7)}"},
    "refund": lambda r, i: {"order_id": f"#W{r.randrange(10**6, 10**7)}", "amount": round(r.uniform(1, 900), 2),
                            "reason": r.choice(["damaged", "late", "wrong size", "changed mind"])},
    "Bash": lambda r, i: {"command": r.choice(["git status", "pytest -q tests/", "ls -la src", "npm run build",
                                               "grep -rn TODO .", "git push origin main"]),
                          "description": "run a command", "timeout": 120000},
    "Read": lambda r, i: {"file_path": f"/work/repo/src/module_{i}.py"},
    "Edit": lambda r, i: {"file_path": f"/work/repo/src/module_{i}.py", "old_string": "x = 1\n",
                          "new_string": "x = 2  # café ✓\n", "replace_all": False},
    "update_address": lambda r, i: {"user_id": f"user_{i}", "address1": f"{i} Main St", "city": "Austin",
                                    "country": "USA", "zip": f"7{i:04d}"},
    "send_email": lambda r, i: {"to": f"customer{i}@example.com", "subject": "Your order",
                                "body": "Hello,\nyour order shipped.\n"},
    "WebFetch": lambda r, i: {"url": f"https://docs.example.com/page/{i}", "prompt": "summarize"},
}
VARIANTS = 32
SCRIPTS = [("allow", 50), ("ask", 22), ("ask2", 6), ("edit", 4), ("reject", 6), ("respond", 2), ("deny", 10)]
APPROVERS = ("sup-1", "sup-2", "sup-3")
POLICY_DIGEST = hashlib.sha256(b"bench policy").hexdigest()

# Placeholders, replaced in the encoded template by the line's values.
_SEQ, _REQ = 8_888_888_881, 8_888_888_882
_TS, _PREV, _DEADLINE = "@TS@", "@PREV@", "@DEADLINE@"
_SLOTS = ((str(_SEQ).encode(), "seq"), (str(_REQ).encode(), "request"), (b'"@TS@"', "ts"),
          (b'"@PREV@"', "prev"), (b'"@DEADLINE@"', "deadline"))


class Template(msgspec.Struct):
    """One event of a script: the prototype (seq, ts, prev, request placeholders), its body split
    at the placeholders, and the data bytes of its line."""

    event: ev.Event
    pieces: list  # bytes and slot names, alternating as they come
    data: bytes


def _split(body: bytes) -> list:
    out: list = [body]
    for marker, name in _SLOTS:
        nxt: list = []
        for piece in out:
            if isinstance(piece, bytes) and marker in piece:
                parts = piece.split(marker)
                for j, part in enumerate(parts):
                    if j:
                        nxt.append(name)
                    nxt.append(part)
            else:
                nxt.append(piece)
        out = nxt
    return [p for p in out if p != b""]


def _template(event: ev.Event, data: bytes | None) -> Template:
    proto = msgspec.structs.replace(event, seq=_SEQ, ts=_TS, prev=_PREV)
    if hasattr(proto, "request"):
        proto = msgspec.structs.replace(proto, request=_REQ)
    if hasattr(proto, "deadline"):
        proto = msgspec.structs.replace(proto, deadline=_DEADLINE)
    return Template(event=event, pieces=_split(ev.encode_event(proto)), data=data if data is not None else b"null")


AUDIT_POLICY = Path(__file__).with_name("audit.policy")
"""The policy the proposals of an `audited` ledger follow: its rules decide by the context's
`lane` (the script's effect) at the lines and ids the templates record, so that `ledger audit`
finds every call conforming, after evaluating a few other rules per call."""


def _scripts(rng: random.Random, pinned: tuple[str, str] | None = None) -> dict[str, list[list[Template]]]:
    """For each script, VARIANTS lists of templates (one per event of the script). `pinned`: the
    (name, digest) of the policy the proposals record, whose rules decide by the context's `lane`
    (AUDIT_POLICY); None: a digest of no policy, and no lane."""
    single = Requirements.single(1, APPROVERS, "sups", decisions=("approve", "edit", "reject", "respond"),
                                 timeout_seconds=4 * 3600)
    double = Requirements.single(2, APPROVERS, "sups", timeout_seconds=4 * 3600)
    out: dict[str, list[list[Template]]] = {name: [] for name, _ in SCRIPTS}
    tools = list(TOOLS)
    for v in range(VARIANTS):
        for name, _ in SCRIPTS:
            tool = tools[(v + len(out[name])) % len(tools)]
            args = TOOLS[tool](rng, v)
            digest, args_json = encode_arguments(args)
            effect = {"allow": "allow", "deny": "deny"}.get(name, "ask")
            context = {"cwd": "/work/repo", "session": f"s-{v}"}
            if pinned is not None:
                context["lane"] = effect
            policy_name, policy_digest = pinned or ("bench", POLICY_DIGEST)
            context_digest, context_json = encode_arguments(context)
            data = b'{"args":' + args_json + b',"context":' + context_json + b"}"
            rule = {"allow": ("allow-read", 4), "deny": ("deny-push", 9)}.get(name, ("ask-change", 14))
            proposed = ev.Proposed(run=f"run-{v}", proposer=f"agent-{v % 4}", call_id=None, tool=tool,
                                   args_digest=digest, context_digest=context_digest, policy=policy_name,
                                   policy_digest=policy_digest, effect=effect,
                                   rules=(ev.RuleRef(id=rule[0], line=rule[1]),),
                                   reasons=("A person checks changes.",) if effect == "ask" else
                                   ("Pushing is not allowed here.",) if effect == "deny" and pinned is not None else ())
            steps = [_template(proposed, data)]
            # an audited ledger's asks record what AUDIT_POLICY's one ask rule requires (`ledger audit`
            # compares an interrupt's requirements with the policy's); the plain ledger keeps both kinds
            reqs = double if name == "ask2" and pinned is None else single
            current = digest
            if effect == "ask":
                steps.append(_template(ev.Interrupted(request=1, requirements=reqs, deadline=_DEADLINE), None))
            if name in ("ask", "ask2"):
                steps.append(_template(ev.Approved(request=1, approver="sup-1", args_digest=digest, comment=None), None))
            if name == "ask2":
                steps.append(_template(ev.Approved(request=1, approver="sup-2", args_digest=digest, comment="ok"), None))
            if name == "edit":
                new_args = dict(args, note=f"edited {v}")
                current, new_json = encode_arguments(new_args)
                steps.append(_template(ev.Edited(request=1, editor="sup-2", args_digest=current, replaces=digest,
                                                 policy_digest=policy_digest, effect="ask",
                                                 rules=(ev.RuleRef(id="ask-change", line=14),), requirements=reqs,
                                                 reason="narrower"), b'{"args":' + new_json + b"}"))
                # The editor counts as one approver; the quorum of one is met by the edit itself.
            if name == "reject":
                steps.append(_template(ev.Rejected(request=1, approver="sup-3", reason="Ask the customer first."), None))
            if name == "respond":
                steps.append(_template(ev.Responded(request=1, approver="sup-1", message="Done by hand."), None))
            if name in ("allow", "ask", "ask2", "edit"):
                steps.append(_template(ev.ExecutionStarted(request=1, args_digest=current, executor="worker-1"), None))
                steps.append(_template(ev.Executed(request=1, args_digest=current, outcome="ok",
                                                   result_digest=digest, error=None), None))
            out[name].append(steps)
    return out


def _ts(us: int) -> str:
    m = START + timedelta(microseconds=us)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{m.microsecond:06d}Z"


def plan(n: int, seed: int = 1, pinned: tuple[str, str] | None = None, first: int = 2) -> Iterator[tuple[Template, int]]:
    """(template, request seq) for events `first` .. n (the genesis is seq 1): the scripts
    interleaved. The last requests are left unfinished (pending or running), as in a live ledger.
    `pinned`: as for _scripts."""
    rng = random.Random(seed)
    scripts = _scripts(rng, pinned)
    names = [name for name, w in SCRIPTS for _ in range(w)]
    flight: list[list] = []  # [templates, next index, request seq]
    seq = first - 1
    while seq < n:
        if len(flight) < IN_FLIGHT:
            steps = scripts[rng.choice(names)][rng.randrange(VARIANTS)]
            flight.append([steps, 0, 0])
        i = rng.randrange(len(flight))
        item = flight[i]
        steps, k, request = item
        seq += 1
        if k == 0:
            request = item[2] = seq  # a request is the seq of its proposal
        yield steps[k], request
        k += 1
        if k == len(steps):
            flight[i] = flight[-1]
            flight.pop()
        else:
            item[1] = k


def events(n: int, seed: int = 1, deadline: str | None = None) -> list[tuple[ev.Event, bytes | None]]:
    """The workload of `plan` as (event, data) for an appender: seq, ts and prev left for the
    writer, `request` the seq the proposal will get in a ledger that starts with its genesis."""
    deadline = deadline or "2099-12-31T00:00:00.000000Z"  # an appender stamps ts from the real clock
    out = []
    replace = msgspec.structs.replace
    for template, request in plan(n, seed):
        event = template.event
        if isinstance(event, ev.Interrupted):
            event = replace(event, request=request, deadline=deadline)
        elif hasattr(event, "request"):
            event = replace(event, request=request)
        out.append((event, None if template.data == b"null" else template.data))
    return out


def write_ledger(path: Path, n: int, seed: int = 1, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 audited: bool = False) -> dict:
    """Write a ledger of `n` events at `path` (a new directory) from `plan`; returns its size.
    `audited`: seq 2 pins AUDIT_POLICY (ledger.pinning), and every proposal follows it."""
    path.mkdir(parents=True)
    sha256 = hashlib.sha256
    genesis = ev.Genesis(seq=1, ts=_ts(0), prev=ev.GENESIS_PREV, format=ev.FORMAT, ledger_id=f"bench-{n}-{seed}")
    body = ev.encode_event(genesis)
    prev = sha256(body).hexdigest()
    number, size, total = 1, 0, 0
    handle = open(path / segment_name(number), "wb")
    first = PREFIX + body + HASH_MARK + prev.encode() + DATA_MARK + b"null" + SUFFIX + b"\n"
    buffer = [first]
    buffered = size = len(first)
    seq, deadline_us = 1, 4 * 3600 * 10**6
    tail = SUFFIX + b"\n"
    pinned = None
    if audited:
        from dsl import Policy
        from ledger import pinning

        policy = Policy.load(AUDIT_POLICY)
        files, data = pinning.pin(policy)
        seq = 2
        event = ev.PolicyLoaded(seq=2, ts=_ts(2 * STEP_US), prev=prev, name=policy.name, digest=policy.digest,
                                by="bench", source=AUDIT_POLICY.name, files=files)
        body = ev.encode_event(event)
        prev = sha256(body).hexdigest()
        line = PREFIX + body + HASH_MARK + prev.encode() + DATA_MARK + data + SUFFIX + b"\n"
        buffer.append(line)
        buffered = size = size + len(line)
        pinned = (policy.name, policy.digest)
    for template, request in plan(n, seed, pinned, seq + 1):
        seq += 1
        us = seq * STEP_US
        values = {"seq": str(seq).encode(), "ts": b'"' + _ts(us).encode() + b'"', "prev": b'"' + prev.encode() + b'"',
                  "request": str(request).encode()}
        if "deadline" in template.pieces:
            values["deadline"] = b'"' + _ts(us + deadline_us).encode() + b'"'
        body = b"".join([p if isinstance(p, bytes) else values[p] for p in template.pieces])
        prev = sha256(body).hexdigest()
        line = b"".join((PREFIX, body, HASH_MARK, prev.encode(), DATA_MARK, template.data, tail))
        if size + len(line) > segment_bytes:
            handle.write(b"".join(buffer))
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            total += size
            number, size, buffer, buffered = number + 1, 0, [], 0
            handle = open(path / segment_name(number), "wb")
        buffer.append(line)
        size += len(line)
        buffered += len(line)
        if buffered > 8 << 20:
            handle.write(b"".join(buffer))
            buffer, buffered = [], 0
    handle.write(b"".join(buffer))
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
    total += size
    return {"events": seq, "bytes": total, "segments": number, "head": prev}


def workdir() -> Path:
    base = Path(os.environ.get("COUNTERSIGN_BENCH_DIR", Path.home() / ".cache" / "countersign-bench"))
    base.mkdir(parents=True, exist_ok=True)
    return base


def _intact(path: Path, info: dict) -> bool:
    """Whether the segments at `path` still have the number and total size `write_ledger` gave
    (a cheap check: a benchmark that appended to a hard link of the last segment changed both)."""
    segments = sorted(path.glob("events-*.jsonl"))
    return len(segments) == info.get("segments") and sum(s.stat().st_size for s in segments) == info.get("bytes")


AUDITED_VERSION = 3  # of an audited ledger's content (2: every ask records the policy's requirements; 3: every deny its reason)


def cached(n: int, seed: int = 1, log=print, audited: bool = False) -> tuple[Path, dict]:
    """A ledger of `n` events in the work directory, generated on first use (a file DONE marks a
    complete one). Returns its path and what `write_ledger` returned (with the seconds it took
    when generated now)."""
    path = workdir() / f"ledger-{n}-s{seed}-v{VERSION}{f'-audited{AUDITED_VERSION}' if audited else ''}"
    done = path / "DONE.json"
    if done.is_file():
        info = msgspec.json.decode(done.read_bytes())
        if _intact(path, info):
            return path, info
        log(f"bench: the cached ledger {path} is not the one generated (its segments changed: appended to "
            "through a hard link?); generating it again")
    shutil.rmtree(path, ignore_errors=True)
    log(f"bench: generating a ledger of {n:,} events in {path} (once; reused later)")
    started = time.perf_counter()
    info = write_ledger(path, n, seed, audited=audited)
    info["generated_seconds"] = round(time.perf_counter() - started, 1)
    done.write_bytes(msgspec.json.encode(info))
    return path, info
