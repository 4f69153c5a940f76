"""Crash tests: writer processes SIGKILLed at random points, disk full, failed fsync, and a Gate
killed between approval and execution (log before act).

The loops run in tests/ledger_crash_harness.py, a fresh single-threaded process that forks the
writers (see its docstring for every check made after each crash). `make test` runs 200 kills of
the writer and 60 of the Gate; COUNTERSIGN_LONG_TESTS=1 runs 5,000 and 1,000. Each run draws a
random seed and names it when it fails; COUNTERSIGN_CRASH_SEED=N replays one.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

HARNESS = Path(__file__).with_name("ledger_crash_harness.py")
LONG = os.environ.get("COUNTERSIGN_LONG_TESTS", "") not in ("", "0")
SEED = int(os.environ.get("COUNTERSIGN_CRASH_SEED") or random.randrange(2**31))


def harness(*args: object, timeout: float) -> dict:
    result = subprocess.run(
        [sys.executable, str(HARNESS), *map(str, args), "--seed", str(SEED)],
        capture_output=True, text=True, timeout=timeout,
    )
    assert result.returncode == 0, f"seed {SEED} (COUNTERSIGN_CRASH_SEED={SEED} replays it):\n{result.stderr[-6000:]}"
    return json.loads(result.stdout)


def test_a_writer_killed_at_random_points_loses_nothing_it_acknowledged(tmp_path):
    kills, failures = (5000, 250) if LONG else (200, 20)
    stats = harness("loop", tmp_path, "--kills", kills, "--failures", failures, timeout=3600 if LONG else 300)
    print(json.dumps(stats))
    context = f"seed {SEED}: {stats}"
    assert stats["kills"] >= kills, context
    # Disk full part way through a write, and a failed fsync: the writer raised, stopped, never
    # retried (the child checks), and the next writer found every acknowledged event.
    assert stats["failures"] == stats["broken_reported"] == failures, context
    assert stats["scenarios"].get("enospc", 0) >= 1 and stats["scenarios"].get("eio", 0) >= 1, context
    # Killed part way through a write: torn tails, quarantined and recorded by the next writer.
    assert stats["torn_tails"] >= 3 and stats["quarantined_by_restart"] >= 1, context
    assert stats["injected_kills"] >= kills // 4 and stats["timer_kills"] >= kills // 5, context
    assert stats["max_segments"] >= 5, context  # segments rotated (and kills landed around renames)
    assert stats["temp_files_seen"] >= 1, context  # a segment killed before its rename was never read
    assert stats["acked_events"] > kills and stats["retries_checked"] > 0, context


def test_a_gate_killed_between_approval_and_execution_never_acts_unrecorded(tmp_path):
    kills = 1000 if LONG else 60
    stats = harness("gate", tmp_path, "--kills", kills, timeout=1800 if LONG else 180)
    print(json.dumps(stats))
    context = f"seed {SEED}: {stats}"
    assert stats["kills"] == kills, context
    # The harness checked, after every kill, that every effect has its approvals and its
    # execution_started recorded before it, that nothing ran twice and that verify passes.
    assert stats["effects"] > kills // 4 and stats["started"] >= stats["effects"], context
