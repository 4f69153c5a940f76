"""Crash and concurrency harness for the ledger writer (tests/test_ledger_crash.py and
tests/test_ledger_concurrency.py run it).

It runs as its own process (`python tests/ledger_crash_harness.py MODE ...`), started fresh and
single-threaded, so that it can fork writer children cheaply and safely (a pytest process may
hold threads, e.g. DuckDB's, that a fork would copy in an unknown state). It prints one JSON
summary on stdout and exits 0; a failed check raises AssertionError (exit 1, traceback on stderr).

Modes:
- `loop DIR --kills N --failures M --seed S`: the crash loop. A forked child appends in a loop
  (single events and batches, some with idempotency keys, small segments so that it rotates
  often) and reports every acknowledged (seq, hash, key) to the parent through a pipe, after the
  append returned and before it goes on. The parent SIGKILLs it at a random moment, or the child
  kills itself at an injected point (part way through a write, before or after a sync or a rename,
  before the truncation of a quarantine), or a write fails part way with ENOSPC, or a sync fails
  with EIO. After each one: every acknowledged event is present at its seq with its hash, a torn
  tail is quarantined (the fragment's bytes in quarantine/, a `recovered` event recording them),
  and verify passes.
- `gate DIR --kills N --seed S`: log before act. A child runs a Gate: proposes calls that need two
  approvals, approves them, executes them with a tool whose effect is an fsync'd line in a file;
  it is killed at random moments. After each kill: every effect has its `execution_started`, and
  the approvals meeting the quorum, recorded before it; no call ran twice; verify passes.
- `writer DIR --id I --count N --threads T`: one of several concurrent writer processes; prints
  the (seq, hash, tool) of everything it appended, in the order each thread appended it.

SIGKILL keeps the page cache, so these runs test process crashes, not power loss: what a write
put in the page cache survives, whether or not it was synced.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import random
import select
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec  # noqa: E402

from ledger import events as ev  # noqa: E402
from ledger.store import log as logmod  # noqa: E402
from ledger.digest import value_digest  # noqa: E402
from ledger.store.log import Ledger, LedgerBroken, LedgerReader, list_segments, parse_line, segment_name  # noqa: E402
from ledger.proof.verify import verify  # noqa: E402

SEGMENT_BYTES = 6000  # a few dozen events a segment: rotation every few commits
EMPTY = value_digest({})
PER_LEDGER = 12  # iterations per ledger directory, so that verify stays fast
GATE_PER_LEDGER = 50



def _line_of(record) -> bytes:
    """The stored line of a record, without its line feed."""
    from ledger.store import lines as _lines

    return _lines.compose(record.body, record.data)[1].rstrip(b"\n")

def proposal(tag: str, n: int, key: str | None = None) -> tuple[ev.Proposed, dict]:
    """A lawful event (an allowed proposal) whose content depends only on (tag, n)."""
    args = {"n": n, "pad": "x" * (n % 97)}
    event = ev.Proposed(
        run=tag, proposer="op", call_id=None, tool=f"{tag}-{n}", args_digest=value_digest(args),
        context_digest=EMPTY, policy="p", policy_digest="0" * 64, effect="allow", rules=(), reasons=(),
        **({"key": key} if key else {}),
    )
    return event, {"args": args, "context": {}}


# --- the crash loop: child ------------------------------------------------------------------------

INJECTED = ("write-partial", "before-sync", "after-sync", "before-rename", "after-rename")
RECOVERY_INJECTED = ("before-truncate", "after-truncate")  # need a torn tail at the child's start


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # not reached


def _install(scenario: str, rng: random.Random, ack_fd: int, counters: dict) -> None:
    """Patch the writer's system calls in this (child) process for the scenario."""
    real_write, real_sync, real_rename, real_truncate = os.write, logmod._sync, os.rename, os.ftruncate
    nth = rng.randint(1, 3) if scenario.endswith("rename") else 1 if scenario.endswith("truncate") else rng.randint(1, 12)
    state = {"n": 0}

    def hit(kind: str) -> bool:
        if scenario != kind:
            return False
        state["n"] += 1
        return state["n"] == nth

    def write(fd, data):
        if fd == ack_fd or "events-" not in os.readlink(f"/proc/self/fd/{fd}"):
            return real_write(fd, data)  # only the writes of segments, new segments and quarantined fragments fail
        if hit("write-partial") and len(data) > 1:
            real_write(fd, bytes(data[: rng.randint(1, len(data) - 1)]))
            _die()
        if scenario == "enospc" and hit("enospc"):
            real_write(fd, bytes(data[: rng.randint(0, len(data) - 1)]))
            if rng.random() < 0.5:
                counters["truncate_fails"] = True
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def sync(fd):
        counters["syncs"] = counters.get("syncs", 0) + 1
        if hit("before-sync"):
            _die()
        if scenario == "eio" and hit("eio"):
            if rng.random() < 0.5:
                counters["truncate_fails"] = True
            raise OSError(errno.EIO, "Input/output error")
        real_sync(fd)
        if hit("after-sync"):
            _die()

    def rename(src, dst, *a, **k):
        if hit("before-rename"):
            _die()
        real_rename(src, dst, *a, **k)
        if hit("after-rename"):
            _die()

    def truncate(fd, length):
        if hit("before-truncate"):
            _die()
        if counters.get("truncate_fails"):
            raise OSError(errno.EIO, "Input/output error")
        real_truncate(fd, length)
        if hit("after-truncate"):  # quarantined and cut off, its `recovered` event not yet written
            _die()

    os.write, logmod._sync, os.rename, os.ftruncate = write, sync, rename, truncate


def _send(fd: int, text: str) -> None:
    data = text.encode()
    assert len(data) <= select.PIPE_BUF, "an acknowledgement must be one atomic pipe write"
    os.write(fd, data)


def _crash_child(path: str, ack_fd: int, tag: str, seed: int, scenario: str, retry: tuple | None) -> None:
    rng = random.Random(seed)
    counters: dict = {}
    _install(scenario, rng, ack_fd, counters)
    try:
        led = Ledger(path, segment_bytes=SEGMENT_BYTES)
    except LedgerBroken:  # the genesis (or a `recovered` event) could not be written
        _send(ack_fd, "BROKEN\n")
        return
    if retry is not None:  # an acknowledged keyed event from an earlier life, appended again
        rtag, rn, rkey, rseq, rhash = retry
        record = led.append(*proposal(rtag, rn, rkey))
        if (record.seq, record.hash) != (rseq, rhash):
            _send(ack_fd, f"ERR retry of {rkey} gave seq {record.seq}, not {rseq}\n")
    n = 0
    while True:
        size = rng.choice((1, 1, 1, 2, 3, 8, 16))
        items, keys = [], []
        for _ in range(size):
            n += 1
            key = f"{tag}/{n}" if n % 3 == 0 else None
            items.append(proposal(tag, n, key))
            keys.append((n, key))
        try:
            records = led.append_batch(items) if size > 1 else [led.append(*items[0])]
        except LedgerBroken:
            syncs = counters.get("syncs", 0)
            try:
                led.append(*proposal(tag, 10**6))
                _send(ack_fd, "ERR an append succeeded after the writer stopped\n")
            except LedgerBroken:
                pass
            if counters.get("syncs", 0) != syncs:
                _send(ack_fd, "ERR a sync was retried after a failure\n")
            _send(ack_fd, "BROKEN\n")
            return
        _send(ack_fd, "".join(f"A {r.seq} {r.hash} {tag} {k[0]} {k[1] or '-'}\n" for r, k in zip(records, keys)))
        if rng.random() < 0.1 and n >= 3:  # retry an acknowledged keyed event within this life
            m = n - n % 3
            again = led.append(*proposal(tag, m, f"{tag}/{m}"))
            _send(ack_fd, f"R {again.seq} {again.hash} {tag} {m} {tag}/{m}\n")


def _fork(target, *args) -> tuple[int, int]:
    """Fork a child running target(*args, write_fd...); returns (pid, read end of its pipe)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into the parent's code
        code = 0
        try:
            os.close(r)
            target(*args[:1], w, *args[1:])
        except BaseException:
            try:
                _send(w, ("ERR " + traceback.format_exc().replace("\n", " | "))[: select.PIPE_BUF - 1] + "\n")
            except BaseException:
                pass
            code = 1
        os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, r: int, kill_after: float | None, limit: float = 20.0,
             after: tuple[str, int] | None = None) -> tuple[list[str], int]:
    """Read the child's pipe until it exits; SIGKILL it `kill_after` seconds after it started, or
    (with `after` = (prefix, n)) after the n-th line starting with prefix arrived; at `limit`
    seconds in any case. Returns (complete lines, wait status)."""
    buf = bytearray()
    start = time.monotonic()
    deadline = start + limit if after is not None or kill_after is None else start + kill_after
    killed = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 and not killed:
            os.kill(pid, signal.SIGKILL)
            killed = True
        ready, _, _ = select.select([r], [], [], max(left, 0) if not killed else None)
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
            if after is not None and bytes(buf).count(b"\n" + after[0].encode()) + bytes(buf).startswith(after[0].encode()) >= after[1]:
                deadline, after = min(deadline, time.monotonic() + (kill_after or 0.0)), None
    os.close(r)
    _, status = os.waitpid(pid, 0)
    text = bytes(buf).decode()
    return text.split("\n")[:-1], status


# --- the crash loop: parent -----------------------------------------------------------------------


class LedgerState:
    """What the parent knows about one ledger directory: every acknowledged event."""

    def __init__(self, path: Path):
        self.path = path
        self.acked: dict[int, str] = {}
        self.keys: dict[str, int] = {}
        self.last_keyed: tuple | None = None
        self.torn_left = False  # a torn tail was left for the next child to recover
        self.pending_sha: str | None = None  # and the SHA-256 of its bytes


def check_after(state: LedgerState, stats: dict, recover: bool) -> bool:
    """The checks after a crash or failure (module docstring). `recover`: restart a writer here
    (which quarantines a torn tail); otherwise the next child does it. Returns whether a torn
    tail was left for the next child."""
    path = state.path
    if not list_segments(path):  # killed before its genesis was made durable: nothing acknowledged
        assert not state.acked
        stats["before_genesis"] = stats.get("before_genesis", 0) + 1
        assert not path.exists() or all(p.name.endswith(logmod.TEMP_SUFFIX) or p.name in ("LOCK", "WRITERS")
                                        for p in path.iterdir())
        return False
    reader = LedgerReader(path)
    stored = {r.seq: r for r in reader.records()}
    for seq, digest in state.acked.items():
        assert seq in stored, f"acknowledged seq {seq} is missing"
        assert stored[seq].hash == digest, f"acknowledged seq {seq} has another hash"
    for key, seq in state.keys.items():
        assert getattr(stored[seq].event, "key", None) == key, f"key {key} is not at seq {seq}"
    torn = reader.torn
    if torn is not None:
        stats["torn_tails"] += 1
    temps = [p.name for p in path.iterdir() if p.name.endswith(logmod.TEMP_SUFFIX)]
    stats["temp_files_seen"] += len(temps)
    assert all(not logmod.SEGMENT_NAME.fullmatch(t) for t in temps)
    if recover or torn is None:
        with Ledger(path, segment_bytes=SEGMENT_BYTES) as led:
            note, completed = led.recovery, led.completed_tail
        if torn is not None and completed:
            # The kill cut only the final line feed: the whole event stands, and the writer
            # restored the line feed instead of quarantining it.
            assert any(_line_of(r) == torn.fragment for r in LedgerReader(path).records()), "a completed tail is not in the ledger"
            stats["completed_by_restart"] = stats.get("completed_by_restart", 0) + 1
        elif torn is not None:
            assert note is not None, "a torn tail was not quarantined"
            assert (note.segment, note.offset) == (torn.segment, torn.offset)
            assert (path / note.quarantine).read_bytes() == torn.fragment
            stats["quarantined_by_restart"] += 1
        elif note is not None:  # a fragment an earlier writer cut off without recording it
            stats["unrecorded_quarantine_recorded"] += 1
        if note is not None:
            last = list(LedgerReader(path).records())[-1]
            assert isinstance(last.event, ev.Recovered), "the recovery was not recorded"
            assert last.event.fragment_sha256 == note.fragment_sha256
            assert last.event.quarantine == note.quarantine
    completed_by_child = state.pending_sha is not None and any(
        hashlib.sha256(_line_of(r)).hexdigest() == state.pending_sha for r in LedgerReader(path).records()
    )
    if completed_by_child:  # the tail left for a child lacked only its line feed: the child completed it
        stats["completed_by_child"] = stats.get("completed_by_child", 0) + 1
        state.pending_sha = None
    if state.pending_sha is not None and (torn is None or hashlib.sha256(torn.fragment).hexdigest() != state.pending_sha):
        # A torn tail left for a child is gone: it must have been quarantined and recorded.
        recorded = {r.event.fragment_sha256: r.event.quarantine for r in LedgerReader(path).records()
                    if isinstance(r.event, ev.Recovered)}
        assert state.pending_sha in recorded, "a torn tail the next writer removed was not recorded"
        fragment = (path / recorded[state.pending_sha]).read_bytes()
        assert hashlib.sha256(fragment).hexdigest() == state.pending_sha
        stats["quarantined_by_child"] += 1
        state.pending_sha = None
    report = verify(path)
    assert report.ok, f"verify failed after a crash: {report.problem}"
    assert report.count >= max(state.acked, default=1)
    assert recover or torn is None or report.warnings, "verify did not warn about a torn tail"
    segments = list_segments(path)
    stats["max_segments"] = max(stats["max_segments"], len(segments))
    assert all(s.stat().st_size > 0 for s in segments), "an empty segment is visible"
    if torn is not None and not recover:
        state.pending_sha = hashlib.sha256(torn.fragment).hexdigest()
        return True
    return False


def run_loop(root: Path, kills: int, failures: int, seed: int) -> dict:
    rng = random.Random(seed)
    stats = {
        "iterations": 0, "kills": 0, "timer_kills": 0, "injected_kills": 0, "failures": 0,
        "broken_reported": 0, "torn_tails": 0, "quarantined_by_restart": 0, "quarantined_by_child": 0, "unrecorded_quarantine_recorded": 0,
        "acked_events": 0, "retries_checked": 0, "temp_files_seen": 0, "max_segments": 0, "ledgers": 0,
        "scenarios": {},
    }
    state: LedgerState | None = None
    failures_left = failures
    started = time.monotonic()
    while stats["kills"] < kills or failures_left > 0:
        i = stats["iterations"]
        if i % PER_LEDGER == 0:
            state = LedgerState(root / f"ledger-{stats['ledgers']:04d}")
            stats["ledgers"] += 1
        if failures_left > 0 and (stats["kills"] >= kills or rng.random() < failures / (kills + failures)):
            scenario = rng.choice(("enospc", "eio"))
            failures_left -= 1
        elif state.torn_left and rng.random() < 0.7:
            scenario = rng.choice(RECOVERY_INJECTED)  # the child's own recovery is killed part way
        else:
            scenario = rng.choice(("timer",) * 4 + INJECTED + ("write-partial",))
        stats["scenarios"][scenario] = stats["scenarios"].get(scenario, 0) + 1
        tag = f"i{i}"
        pid, r = _fork(_crash_child, str(state.path), tag, rng.randrange(2**32), scenario, state.last_keyed)
        if scenario == "timer":
            kill_after = rng.uniform(0.0, 0.03)
        elif scenario in ("enospc", "eio"):
            kill_after = 10.0  # the child stops by itself at the failure
        else:
            kill_after = 0.2  # if the injected point is not reached by then
        lines, status = _collect(pid, r, kill_after)
        errors = [line for line in lines if line.startswith("ERR")]
        assert not errors, errors
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            stats["kills"] += 1
            if scenario == "timer":
                stats["timer_kills"] += 1
            else:
                stats["injected_kills"] += 1
        else:
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child ended with status {status}"
            assert scenario in ("enospc", "eio") and "BROKEN" in lines, (scenario, lines[-3:])
            stats["failures"] += 1
            stats["broken_reported"] += 1
        for line in lines:
            kind, seq, digest, ctag, n, key = line.split(" ") if line[0] in "AR" else (line,) + (None,) * 5
            if kind == "A":
                state.acked[int(seq)] = digest
                stats["acked_events"] += 1
                if key != "-":
                    state.keys[key] = int(seq)
                    state.last_keyed = (ctag, int(n), key, int(seq), digest)
            elif kind == "R":
                assert state.keys.get(key) in (None, int(seq)), f"a retried key {key} got a new seq"
                stats["retries_checked"] += 1
        if state.last_keyed is not None:
            stats["retries_checked"] += 1  # the next child appends it again and checks its seq
        recover = rng.random() < 0.7
        state.torn_left = check_after(state, stats, recover)
        stats["iterations"] += 1
    stats["seconds"] = round(time.monotonic() - started, 2)
    return stats


# --- log before act: a Gate killed between approval and execution -----------------------------------

GATE_POLICY = """
policy "crash"
group ops = ["op-1", "op-2", "op-3"]
ask pay
  reason "Two people approve payments."
  approvers 2 from ops
  timeout 24h
"""


def _gate_child(path: str, fd: int, effects: str, seed: int, policy) -> None:
    from ledger.workflow.gate import ExecutionUnknown, Gate
    from ledger.workflow.machine import DuplicateApproval

    rng = random.Random(seed)
    gate = Gate(policy, path)

    def pay(args):  # the act: one fsync'd line per run
        with open(effects, "a") as f:
            f.write(f"{args['n']}\n")
            f.flush()
            os.fsync(f.fileno())
        return {"paid": args["n"]}

    # Finish what an earlier life left: approve the pending, execute the approved.
    for state in list(gate.workflow.requests.values()):
        if state.status == "pending":
            for who in ("op-1", "op-2"):
                if gate.get(state.request).status == "pending":
                    try:
                        gate.approve(state.request, approver=who, digest=state.digest)
                    except DuplicateApproval:
                        pass
        if gate.get(state.request).status == "approved":
            gate.execute(state.request, pay)
        elif gate.get(state.request).status == "executing":
            try:
                gate.execute(state.request, pay)
                _send(fd, "ERR an execution with an unknown outcome ran again\n")
            except ExecutionUnknown:
                pass
    while True:
        n = rng.randrange(10**9)
        p = gate.propose("pay", {"n": n}, proposer="agent")
        gate.approve(p.request, approver="op-1", digest=p.args_digest)
        gate.approve(p.request, approver="op-2", digest=p.args_digest)
        _send(fd, f"APPROVED {p.request} {n}\n")
        gate.execute(p.request, pay)
        _send(fd, f"EXECUTED {p.request} {n}\n")


def check_gate(path: Path, effects: Path) -> dict:
    if not path.exists() or not list_segments(path):  # killed before the genesis was durable
        assert not effects.exists()
        return {"effects": 0, "started": 0, "approved": 0}
    report = verify(path)
    assert report.ok, f"verify failed: {report.problem}"
    records = list(LedgerReader(path).records())
    args_of: dict[int, int] = {}
    approvals: dict[int, set] = {}
    started: dict[int, int] = {}
    for record in records:
        event = record.event
        if isinstance(event, ev.Proposed):
            args_of[record.seq] = msgspec.json.decode(record.data)["args"]["n"]
        elif isinstance(event, ev.Approved):
            approvals.setdefault(event.request, set()).add(event.approver)
        elif isinstance(event, ev.ExecutionStarted):
            assert len(approvals.get(event.request, ())) >= 2, "execution_started before its approvals"
            started[event.request] = record.seq
    done = effects.read_text().split("\n")[:-1] if effects.exists() else []
    ran = [int(x) for x in done]
    assert len(ran) == len(set(ran)), "a call ran twice"
    started_args = {args_of[r] for r in started}
    for n in ran:
        assert n in started_args, f"call {n} ran without its execution_started (and approvals) recorded"
    return {"effects": len(ran), "started": len(started), "approved": sum(len(a) >= 2 for a in approvals.values())}


def run_gate(root: Path, kills: int, seed: int) -> dict:
    rng = random.Random(seed)
    stats = {"kills": 0, "approved_unexecuted_at_kill": 0, "seconds": 0.0, "effects": 0, "started": 0, "approved": 0}
    started = time.monotonic()
    from dsl import Policy

    policy = Policy.from_text(GATE_POLICY, "crash.policy")  # parsed once; each child inherits it
    for i in range(kills):
        if i % GATE_PER_LEDGER == 0:  # a fresh ledger now and then: the Gate replays (verifies) it all on every start
            path, effects = root / f"gate-ledger-{i // GATE_PER_LEDGER:04d}", root / f"effects-{i // GATE_PER_LEDGER:04d}.txt"
        pid, r = _fork(_gate_child, str(path), str(effects), rng.randrange(2**32), policy)
        if rng.random() < 0.25:  # anywhere: opening, replaying, finishing an earlier life's calls
            lines, status = _collect(pid, r, rng.uniform(0.0, 0.05))
        else:  # just after an approval was acknowledged: before, during or after the execution
            lines, status = _collect(pid, r, rng.uniform(0.0, 0.015), after=("APPROVED", rng.randint(1, 3)))
        assert not [x for x in lines if x.startswith("ERR")], lines
        assert os.WIFSIGNALED(status), f"the gate child ended by itself: {status} {lines[-3:]}"
        stats["kills"] += 1
        approved = {x.split()[1] for x in lines if x.startswith("APPROVED")}
        executed = {x.split()[1] for x in lines if x.startswith("EXECUTED")}
        stats["approved_unexecuted_at_kill"] += len(approved - executed)
        last = check_gate(path, effects)
        if (i + 1) % GATE_PER_LEDGER == 0 or i + 1 == kills:
            for name in ("effects", "started", "approved"):
                stats[name] += last[name]
    stats["seconds"] = round(time.monotonic() - started, 2)
    return stats


# --- concurrent writers -----------------------------------------------------------------------------


class Tail:
    """Follows a growing ledger without a lock: `poll()` returns the complete lines that appeared
    since the last poll, in order, each once, and checks that each one extends the chain (seq,
    prev, hash); an AssertionError says a line was seen out of order, twice, or torn apart.

    A segment is left for the next one only once the next one exists *before* the read that
    reaches its end: writers create segment N+1 after their last write to N, so N is complete."""

    def __init__(self, path: Path):
        self.path, self.number, self.offset = path, 1, 0
        self.seq, self.prev = 0, ev.GENESIS_PREV
        self.polls_with_news = 0

    def poll(self) -> list:
        out = []
        while True:
            segment = self.path / segment_name(self.number)
            if not segment.exists():
                break
            finished = (self.path / segment_name(self.number + 1)).exists()
            with segment.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
            end = data.rfind(b"\n") + 1
            pos = 0
            while pos < end:
                nl = data.index(b"\n", pos)
                record = parse_line(logmod.RawLine(segment.name, 0, self.offset + pos, data[pos:nl]), self.seq + 1)
                assert record.seq == self.seq + 1, f"seq {record.seq} seen after {self.seq}"
                assert record.event.prev == self.prev, f"seq {record.seq} does not follow the previous line"
                assert hashlib.sha256(record.body).hexdigest() == record.hash, f"seq {record.seq}: hash mismatch"
                self.seq, self.prev = record.seq, record.hash
                out.append(record)
                pos = nl + 1
            self.offset += end
            if not finished:
                break
            assert end == len(data), f"{segment.name} was finished with a torn line"
            self.number, self.offset = self.number + 1, 0
        if out:
            self.polls_with_news += 1
        return out


def run_writer(path: Path, wid: int, count: int, threads: int, go: Path | None) -> None:
    while go is not None and not go.exists():
        time.sleep(0.002)
    out: dict[int, list] = {t: [] for t in range(threads)}
    with Ledger(path, segment_bytes=SEGMENT_BYTES) as led:
        shared = led.append(*proposal("shared", 0, "shared/0"))  # every writer appends this same event
        out["shared"] = [shared.seq, shared.hash]
        def work(t: int) -> None:
            rng = random.Random(wid * 1000 + t)
            n = 0
            while n < count:
                size = min(rng.choice((1, 1, 1, 2, 5)), count - n)
                items = []
                for _ in range(size):
                    items.append(proposal(f"w{wid}t{t}", n, f"w{wid}t{t}/{n}" if n % 4 == 0 else None))
                    n += 1
                records = led.append_batch(items)
                out[t].extend((r.seq, r.hash, r.event.tool) for r in records)
                if rng.random() < 0.05:  # a retried keyed append returns the original
                    m = n - 1 - (n - 1) % 4
                    again = led.append(*proposal(f"w{wid}t{t}", m, f"w{wid}t{t}/{m}"))
                    assert again.event.tool == f"w{wid}t{t}-{m}"
                    out[t].append(("retry", again.seq, again.hash))

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        commits = led.commits
    json.dump({"appended": out, "commits": commits}, sys.stdout)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("loop", "gate", "writer"))
    parser.add_argument("dir")
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--id", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--go")
    a = parser.parse_args(argv)
    root = Path(a.dir)
    if a.mode == "loop":
        print(json.dumps(run_loop(root, a.kills, a.failures, a.seed)))
    elif a.mode == "gate":
        print(json.dumps(run_gate(root, a.kills, a.seed)))
    else:
        run_writer(root, a.id, a.count, a.threads, Path(a.go) if a.go else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
