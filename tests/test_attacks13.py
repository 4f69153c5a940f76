"""A thirteenth hostile review: issue 13's columnar projection (ledger.analytics.projection,
query, schema) against what it promises: derived from the log and never saying more than the log
(`ledger verify` is the authority), a redacted value never visible once the redaction is in the
log, no traceback, no file access. Races and kills use real processes; a pause inside the child
(its progress callback, a wrapped connection) only fixes the order of events that a busy machine
can produce by itself."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from ledger.analytics import projection as proj
from ledger.analytics.query import run
from ledger.digest import redaction_marker
from ledger.proof.verify import verify
from ledger.store.log import list_segments
from tests.ledger_factory import Forge, read_lines
from tests.test_views import build_gate_ledger

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SECRET = "/etc/motd"  # args.path of the first request of build_gate_ledger (seq 2, in the first segment, executed)


@pytest.fixture(scope="module")
def gate(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("attacks13") / "gate"
    build_gate_ledger(path, segment_bytes=4096)
    return path


FIRST = 2  # the seq of the fixture's first proposal


def copy_ledger(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for segment in list_segments(source):
        shutil.copyfile(segment, target / segment.name)
    return target


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)


def redact_cli(path: Path, seq: int, field: str) -> None:
    done = cli("ledger", "redact", str(path), str(seq), "--path", field, "--reason", "test", "--by", "dpo")
    assert done.returncode == 0, done.stderr


def wait_for(flag: Path, child: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not flag.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child never got there"
        time.sleep(0.02)


def args_of(path: Path, seq: int) -> str:
    return run(path, f"SELECT args::VARCHAR FROM events WHERE position = {seq}").rows[0][0]


# --- a redaction during a refresh ---------------------------------------------------------------

PAUSED_REFRESH = r"""
import sys, time
from pathlib import Path
from ledger.analytics import projection as proj
root, ready, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
def progress(done, total):
    if not ready.exists():  # the first segment has been read: wait until told to go on
        ready.touch()
        while not go.exists():
            time.sleep(0.01)
print(proj.refresh(root, progress=progress).events)
"""


def test_a_redaction_while_a_refresh_reads_is_seen_by_the_next_query(gate, tmp_path):
    """HIGH (privacy). A refresh read segment 1 (the value still there), then `ledger redact`
    rewrote segment 1 (another file), then the refresh stat'ed the segments to record what it had
    read: it recorded the *new* file. The next queries found segment 1 unchanged and showed the
    redacted value forever (until a rebuild)."""
    path = copy_ledger(gate, tmp_path / "ledger")
    assert SECRET in args_of(path, FIRST)
    proj.remove(path)
    ready, go = tmp_path / "ready", tmp_path / "go"
    child = subprocess.Popen([sys.executable, "-c", PAUSED_REFRESH, str(path), str(ready), str(go)], cwd=ROOT, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready, child)
        redact_cli(path, FIRST, "args.path")  # a real process, while the refresh holds what it read
        go.touch()
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    finally:
        if child.poll() is None:
            child.kill()
    assert verify(path).ok
    assert SECRET not in args_of(path, FIRST)
    assert "$redacted" in args_of(path, FIRST)


# --- a refresh killed with its chunk file on disk -------------------------------------------------

KILLED_IN_FLUSH = r"""
import sys, time
from pathlib import Path
from ledger.analytics import projection as proj
root, ready = Path(sys.argv[1]), Path(sys.argv[2])
class Held:
    def __init__(self, con): self._con = con
    def __getattr__(self, name): return getattr(self._con, name)
    def execute(self, sql, *args):
        if sql.startswith("INSERT INTO event_rows"):  # the chunk file is written: be killed here
            ready.touch()
            time.sleep(600)
        return self._con.execute(sql, *args)
init = proj._Projector.__init__
proj._Projector.__init__ = lambda self, con, *a, **k: init(self, Held(con), *a, **k)
proj.refresh(root)
"""


def kill_when_ready(script: str, path: Path, ready: Path) -> None:
    """Run `script` on the ledger at `path` in a child process and SIGKILL it once it has created
    `ready` (the step the test kills it in)."""
    child = subprocess.Popen([sys.executable, "-c", script, str(path), str(ready)], cwd=ROOT, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(ready, child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()


def test_a_refresh_killed_mid_flush_leaves_no_copy_of_a_value_redacted_later(gate, tmp_path):
    """HIGH (privacy). A refresh SIGKILLed while a chunk (`.chunk-PID-event_rows.jsonl`: up to
    20,000 ledger lines, data included) was on disk left it there for good: nothing removed it.
    A later redaction then left the value in that file inside DIR/projection/, which docs and
    users treat as derived data of the redacted log. The next query must also be right."""
    path = copy_ledger(gate, tmp_path / "ledger")
    kill_when_ready(KILLED_IN_FLUSH, path, tmp_path / "ready")
    redact_cli(path, FIRST, "args.path")
    answer = run(path, "SELECT count(*) FROM events")
    assert answer.coverage.complete and answer.rows[0][0] == len(b"".join(s.read_bytes() for s in list_segments(path)).splitlines())
    assert "$redacted" in args_of(path, FIRST)
    for file in (path / proj.DIRECTORY).iterdir():
        if file.name.startswith(".chunk-"):
            assert SECRET.encode() not in file.read_bytes(), f"{file.name} still holds the redacted value"


# --- the fallback directory (a ledger directory that cannot be written) --------------------------


def test_a_changed_segment_of_a_read_only_ledger_is_resynced_in_the_cache(gate, tmp_path, monkeypatch):
    """MEDIUM. The projection of a read-only ledger lives in the cache, but a resync wrote its
    chunk file into DIR/projection/ (which does not exist there): FileNotFoundError out of every
    query after any segment was replaced (an auditor's copy brought up to date, a redaction)."""
    path = copy_ledger(gate, tmp_path / "ledger")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == path and mode == os.W_OK
                        else real_access(p, mode, **kw))
    before = run(path, "SELECT count(*) FROM events").rows
    first = list_segments(path)[0]
    shutil.copyfile(first, tmp_path / "copy")
    os.replace(tmp_path / "copy", first)  # the same bytes in another file
    answer = run(path, "SELECT count(*) FROM events")
    assert answer.rows == before and answer.coverage.complete
    assert not (path / proj.DIRECTORY).exists()


# --- a sealed segment that changed ----------------------------------------------------------------


def test_a_line_added_to_a_sealed_segment_is_not_covered(gate, tmp_path):
    """HIGH. A sealed segment that changed is read again (resync), but only as far as the lines
    projected from it: a line added after them (here the next segment's first line, so seq
    repeats) was never read, and the views said `coverage.complete` on a ledger verify rejects."""
    path = copy_ledger(gate, tmp_path / "ledger")
    assert run(path, "SELECT 1").coverage.complete
    first, second = list_segments(path)[:2]
    with open(first, "ab") as handle:
        handle.write(second.read_bytes().split(b"\n", 1)[0] + b"\n")
    assert not verify(path).ok
    assert not run(path, "SELECT 1").coverage.complete


def test_a_sealed_segment_changed_in_place_with_its_mtime_restored_is_read_again(gate, tmp_path):
    """HIGH. A sealed segment counts as unchanged when its inode, size and mtime are: a body
    changed in place (same size) and `os.utime` putting the mtime back left the projection (and
    STATE's fast path) saying `coverage.complete` with the old rows, on a ledger verify rejects.
    The ctime cannot be set back."""
    path = copy_ledger(gate, tmp_path / "ledger")
    assert run(path, "SELECT 1").coverage.complete
    first = list_segments(path)[0]
    before = first.stat()
    raw = first.read_bytes()
    changed = raw.replace(b'"tool":"read_file"', b'"tool":"read_fila"', 1)
    assert changed != raw and len(changed) == len(raw)
    with open(first, "r+b") as handle:  # in place: the same inode
        handle.write(changed)
    os.utime(first, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert first.stat().st_mtime_ns == before.st_mtime_ns and first.stat().st_ino == before.st_ino
    assert not verify(path).ok
    answer = run(path, "SELECT count(*) FROM events")
    assert not answer.coverage.complete
    assert answer.coverage.problem_seq is not None


# --- the head segment -------------------------------------------------------------------------------


def _same_length_ledger(path: Path) -> int:
    """A ledger of one segment whose request 2 (denied: final) has an args.iban exactly as long as
    a redaction marker, so that redacting it moves no byte of the segment."""
    width = len(msgspec.json.encode(redaction_marker("0" * 64))) - 2
    with Forge(path) as forge:
        request, _ = forge.propose("wire", {"iban": "X" * width}, effect="deny")
        forge.propose("wire", {"iban": "Y" * width}, effect="deny")
    return request


def test_a_redaction_of_the_head_segment_that_keeps_its_inode_is_seen(tmp_path):
    """HIGH (privacy). The head segment counts as unchanged while its inode is the same (it
    grows). A redaction writes a new file and renames it over the segment; two of them between
    two queries give the segment back its first inode on ext4 (a freed inode is reused: A, B, A),
    and a marker as long as the value moves no line. Here the second file's bytes are put into
    the first inode, which is what ext4 does. The value stayed visible."""
    path = tmp_path / "ledger"
    target = _same_length_ledger(path)
    assert "XXXX" in args_of(path, target)
    segment = list_segments(path)[0]
    keep = tmp_path / "first-inode"
    os.link(segment, keep)  # the first inode, kept to be reused below
    redact_cli(path, target, "args.iban")
    redacted = segment.read_bytes()
    with open(keep, "r+b") as handle:
        handle.write(redacted)
        handle.truncate()
    os.replace(keep, segment)
    assert verify(path).ok
    assert "XXXX" not in args_of(path, target)
    assert "$redacted" in args_of(path, target)


def test_an_earlier_line_of_the_head_segment_changed_in_place_is_not_covered(tmp_path):
    """MEDIUM (design). An event of the head segment before its last projected line, changed in
    place (same inode, same size), is never read again: the views keep the old rows and say
    `coverage.complete` on a ledger verify rejects. Sealed segments are checked by their stat."""
    path = tmp_path / "ledger"
    _same_length_ledger(path)
    assert run(path, "SELECT 1").coverage.complete
    segment = list_segments(path)[0]
    raw = segment.read_bytes()
    with open(segment, "r+b") as handle:
        handle.write(raw.replace(b'"tool":"wire"', b'"tool":"wirf"', 1))
    assert not verify(path).ok
    assert not run(path, "SELECT 1").coverage.complete


# --- the database file itself -----------------------------------------------------------------------


def test_a_redacted_value_is_not_left_in_the_projection_file(tmp_path):
    """HIGH (privacy). After a redaction the views showed the marker, but projection.duckdb still
    held the value: DuckDB's UPDATE leaves the old column data in free blocks of the file, which
    any copy of the projection (it is documented for BI tools and notebooks) carries on."""
    path = tmp_path / "ledger"
    secret = "card-" + os.urandom(20).hex()
    with Forge(path) as forge:
        target, _ = forge.propose("wire", {"iban": secret, "n": 1}, effect="deny")
        for n in range(200):
            forge.propose("wire", {"iban": "other", "n": n}, effect="deny")
    assert secret in args_of(path, target)
    redact_cli(path, target, "args.iban")
    assert "$redacted" in args_of(path, target)
    for file in (path / proj.DIRECTORY).iterdir():
        if file.is_file():
            assert secret.encode() not in file.read_bytes(), f"{file.name} still holds the redacted value"
    assert proj.check(path) == []


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["query", "SELECT count(*) FROM events"], ["report", "--json"], ["stats"]])
def test_no_place_for_the_projection_is_a_clear_error(tmp_path, command):
    """LOW. When neither DIR/projection nor the cache can hold the projection (a service
    account whose HOME cannot be written, a read-only ledger), `ledger query` and `ledger report`
    printed a ProjectionError traceback. Here DIR/projection is a file and the cache a file."""
    path = tmp_path / "ledger"
    _same_length_ledger(path)
    (path / proj.DIRECTORY).write_bytes(b"")
    (tmp_path / "cache").write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "cli.main", "ledger", command[0], str(path), *command[1:]], cwd=ROOT,
                          env={**ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 0 if command[0] == "stats" else done.returncode in (1, 2)


KILLED_BEFORE_COMPACT = r"""
import sys, time
from pathlib import Path
from ledger.analytics import projection as proj
root, ready = Path(sys.argv[1]), Path(sys.argv[2])
def stuck(pdir):
    ready.touch()
    time.sleep(600)
proj._compact = stuck
proj.refresh(root)
"""


def test_a_refresh_killed_after_a_redaction_was_applied_still_leaves_no_copy_of_the_value(tmp_path):
    """HIGH (privacy), the fix above under a kill: the resync's commit puts the old value in the
    database's free blocks; a SIGKILL before the file is copied afresh must not let the next
    queries (STATE's fast path included) keep that file."""
    path = tmp_path / "ledger"
    secret = "card-" + os.urandom(20).hex()
    with Forge(path) as forge:
        target, _ = forge.propose("wire", {"iban": secret, "n": 1}, effect="deny")
        for n in range(200):
            forge.propose("wire", {"iban": "other", "n": n}, effect="deny")
    assert secret in args_of(path, target)
    redact_cli(path, target, "args.iban")
    kill_when_ready(KILLED_BEFORE_COMPACT, path, tmp_path / "ready")
    assert "$redacted" in args_of(path, target)
    for file in (path / proj.DIRECTORY).iterdir():
        if file.is_file():
            assert secret.encode() not in file.read_bytes(), f"{file.name} still holds the redacted value"


@pytest.mark.parametrize("name", ["md:x", "a?b"])
def test_a_ledger_path_duckdb_would_read_as_a_url_or_options_is_queried_like_any_other(tmp_path, name):
    """MEDIUM. The projection's database was opened by the path as given: a relative `md:x`
    (a directory named so) made DuckDB try to install the MotherDuck extension from the network
    and fail; a `?` in the path is read as the start of options (DuckDB put the WAL in
    `g.wal?x/...`), and the failed COMMIT was then hidden behind "cannot rollback - no transaction
    is active". Now the path is absolute and a `?` sends the projection to the cache."""
    _same_length_ledger(tmp_path / name)
    done = subprocess.run([sys.executable, "-m", "cli.main", "ledger", "query", name, "SELECT count(*) AS n FROM events",
                           "--format", "json"], cwd=tmp_path, env={**ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert msgspec.json.decode(done.stdout) == [{"n": 3}]


# --- work and memory per refresh ----------------------------------------------------------------------


def test_a_refresh_of_one_new_line_does_not_load_every_open_request(tmp_path, monkeypatch):
    """MEDIUM (scale). A request allowed but never reported executed (a hook without its
    PostToolUse, a call the agent dropped) stays open forever, and `_Projector.load` decodes
    every open request at every refresh: measured with 30,000 of them, a refresh adding one line
    took 0.9-1.1 s and the process 488 MB (`ledger query` on a live ledger pays it each time).
    Counted here as states decoded, not timed."""
    path = tmp_path / "ledger"
    with Forge(path) as forge:
        for n in range(1500):
            forge.propose("read", {"n": n}, effect="allow")
    proj.refresh(path)
    with Forge(path) as forge:
        forge.propose("read", {"n": -1}, effect="allow")
    decoded = []
    real = proj._STATE_DECODER

    class Counting:
        def decode(self, data):
            decoded.append(1)
            return real.decode(data)

    monkeypatch.setattr(proj, "_STATE_DECODER", Counting())
    assert proj.refresh(path).added == 1
    assert len(decoded) < 100


# --- what `complete` covers ---------------------------------------------------------------------------


def test_arguments_changed_beside_their_digest_do_not_count_as_complete(gate, tmp_path):
    """MEDIUM (design). An event's arguments changed in the data beside its body (the body keeps
    the digest of the real ones): verify fails (the arguments no longer have the digest the chain
    holds), but the projection shows the forged arguments in `events.args` with
    `coverage.complete` true, and `ledger query` warns of nothing: an auditor reading `args` reads
    what no one proposed."""
    path = copy_ledger(gate, tmp_path / "ledger")
    first = list_segments(path)[0]
    first.write_bytes(first.read_bytes().replace(b'"/etc/motd"', b'"/etc/mota"', 1))
    report = verify(path)
    assert not report.ok and report.problem.seq == FIRST and report.problem.kind == "data"
    answer = run(path, f"SELECT args::VARCHAR FROM events WHERE position = {FIRST}")
    assert answer.rows == []  # the projection stops before the line, as at any other problem
    assert not answer.coverage.complete
    assert answer.coverage.problem_seq == FIRST and answer.coverage.problem == report.problem.message
    assert run(path, "SELECT seq, kind, detail FROM chain_breaks").rows == [(FIRST, "data", report.problem.message)]


def test_arguments_changed_beside_their_digest_after_they_were_projected_do_not_count_as_complete(gate, tmp_path):
    """The same forgery once the projection holds the line: the segment is read again (its stat
    changed), its data is checked again, fails, and the projection is rebuilt up to the line."""
    path = copy_ledger(gate, tmp_path / "ledger")
    assert run(path, "SELECT 1").coverage.complete
    first = list_segments(path)[0]
    first.write_bytes(first.read_bytes().replace(b'"/etc/motd"', b'"/etc/mota"', 1))
    report = verify(path)
    answer = run(path, f"SELECT args::VARCHAR FROM events WHERE position = {FIRST}")
    assert answer.rows == [] and not answer.coverage.complete
    assert answer.coverage.problem_seq == report.problem.seq == FIRST
    assert proj.check(path) == []
