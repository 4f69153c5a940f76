"""Several processes (each with several threads) appending to one ledger while a reader tails it.

The writers are tests/ledger_crash_harness.py in `writer` mode: each appends single events and
batches from two threads, with small segments so that they rotate while the others write, retries
some keyed events, and appends one event every writer shares (same key, same content). The reader
here follows the files without a lock (ledger_crash_harness.Tail) while they write.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from ledger.store.log import Ledger, LedgerReader, list_segments
from ledger.proof.verify import verify
from ledger_crash_harness import Tail

HARNESS = Path(__file__).with_name("ledger_crash_harness.py")
WRITERS, THREADS, PER_THREAD = 4, 2, 120


def test_four_writer_processes_and_a_tailing_reader(tmp_path):
    path, go = tmp_path / "ledger", tmp_path / "go"
    Ledger(path).close()  # the genesis
    procs = [
        subprocess.Popen(
            [sys.executable, str(HARNESS), "writer", str(path), "--id", str(w), "--count", str(PER_THREAD),
             "--threads", str(THREADS), "--go", str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for w in range(WRITERS)
    ]
    tail = Tail(path)
    seen = tail.poll()
    go.touch()
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "the writers did not finish"
        seen += tail.poll()
        time.sleep(0.003)
    outputs = []
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err
        outputs.append(json.loads(out))
    seen += tail.poll()

    # No gaps, no duplicates, nothing out of order (Tail checked every link as it read).
    expected = 1 + 1 + WRITERS * THREADS * PER_THREAD  # genesis, the shared event, every thread's events
    assert [r.seq for r in seen] == list(range(1, expected + 1))
    tools = Counter(r.event.tool for r in seen[1:])
    assert max(tools.values()) == 1, "an event was appended twice"
    assert tail.polls_with_news >= 3, "the reader did not see the ledger grow"

    by_seq = {r.seq: r for r in seen}
    shared = {tuple(o["appended"]["shared"]) for o in outputs}
    assert len(shared) == 1, "writers sharing a key got different events"
    [(shared_seq, shared_hash)] = shared
    assert by_seq[shared_seq].hash == shared_hash and by_seq[shared_seq].event.key == "shared/0"

    for w, o in enumerate(outputs):
        for t in range(THREADS):
            appended = o["appended"][str(t)]
            firsts = [(seq, h, tool) for seq, h, tool in (a for a in appended if a[0] != "retry")]
            assert [tool for _, _, tool in firsts] == [f"w{w}t{t}-{n}" for n in range(PER_THREAD)]
            assert [seq for seq, _, _ in firsts] == sorted(seq for seq, _, _ in firsts), "a thread's events out of its order"
            for seq, h, tool in firsts:  # every acknowledged event is where its writer was told
                assert (by_seq[seq].hash, by_seq[seq].event.tool) == (h, tool)
            for _, seq, h in (a for a in appended if a[0] == "retry"):
                assert by_seq[seq].hash == h and by_seq[seq].event.key is not None
    # The writers really ran at the same time: their events interleave, and threads shared commits.
    writer_of = [r.event.tool.split("t")[0] for r in seen[2:]]
    switches = sum(1 for a, b in zip(writer_of, writer_of[1:]) if a != b)
    assert switches >= 2 * WRITERS
    assert len(list_segments(path)) > 10
    report = verify(path)
    assert report.ok and report.count == expected and not report.warnings
    assert [r.hash for r in LedgerReader(path).records()] == [r.hash for r in seen]
