"""Ctrl-C during a long command, and a trace simulated into a ledger that already holds it
(issue 13, section 2): a real `countersign` process sent SIGINT stops cleanly (no traceback, exit
130), says what it wrote and how to resume; `simulate` does not append a trace twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.proof.verify import verify
from ledger.store.log import LedgerReader

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "samples" / "retail.policy"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COUNTERSIGN_NO_NATIVE": os.environ.get("COUNTERSIGN_NO_NATIVE", "")}
CALLS = 3000


def write_trace(path: Path, n: int = CALLS) -> Path:
    """`n` calls in runs of ten: allowed reads, and cancellations every reviewer approves."""
    tools = ["get_order_details", "cancel_pending_order", "get_user_details"]
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"run": f"run-{i // 10}", "tool": tools[i % 3],
                                     "args": {"order_id": f"#W{i}", "reason": "ordered by mistake", "user_id": f"u{i}"}}) + "\n")
    return path


def countersign(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env=ENV, timeout=600, **kwargs)


def proposals(ledger: Path) -> list[tuple]:
    return [(r.event.tool, r.event.args_digest, r.event.run) for r in LedgerReader(ledger).records()
            if type(r.event).__name__ == "Proposed"]


def interrupt(args: list, ledger: Path, *, signals: int = 1, after_bytes: int = 40_000) -> subprocess.CompletedProcess:
    """Start `countersign ARGS`, wait until the ledger holds `after_bytes`, send SIGINT `signals`
    times, and return what it printed and its exit code."""
    process = subprocess.Popen([sys.executable, "-m", "cli.main", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    deadline = time.monotonic() + 120
    while sum(p.stat().st_size for p in ledger.glob("events-*.jsonl")) < after_bytes if ledger.exists() else True:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the simulation wrote nothing for two minutes"
        time.sleep(0.05)
    for _ in range(signals):
        process.send_signal(signal.SIGINT)
        time.sleep(0.01)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_ctrl_c_stops_simulate_after_a_whole_call_and_resume_finishes_the_trace(tmp_path):
    calls = write_trace(tmp_path / "calls.jsonl")
    ledger = tmp_path / "ledger"
    args = ["simulate", "--policy", POLICY, "--calls", calls, "--ledger", ledger]
    stopped = interrupt(args, ledger)
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr + stopped.stdout
    assert "stopping after the call in progress" in stopped.stderr
    report = verify(ledger)
    assert report.ok and not report.warnings  # stopped between calls: no torn line, nothing half done
    held = proposals(ledger)
    assert 0 < len(held) < CALLS
    message = stopped.stderr.splitlines()[-1]
    assert message.startswith(f"interrupted: {len(held):,} of the trace's {CALLS:,} calls simulated")
    assert f"through line {len(held)} of the calls file" in message
    assert f"holds {report.count:,} events, the last seq {report.count} (head {report.head})" in message
    assert f"--resume to simulate the remaining {CALLS - len(held):,}" in message
    assert set(report.statuses) == {"executed"}  # every call stopped whole: proposed, approved, run

    again = countersign(*args)  # the same command again: refused, nothing written
    assert again.returncode == 1 and f"holds the first {len(held):,} of this trace's {CALLS:,} calls" in again.stderr
    assert "--resume" in again.stderr and "--again" in again.stderr and "Traceback" not in again.stderr
    assert verify(ledger).count == report.count

    resumed = countersign(*args, "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["skipped"], summary["calls"], summary["stopped"]) == (len(held), CALLS - len(held), False)
    whole = tmp_path / "whole"  # the same trace uninterrupted: the same calls, in the same order
    assert countersign(*["simulate", "--policy", POLICY, "--calls", calls, "--ledger", whole]).returncode == 0
    assert proposals(ledger) == proposals(whole)
    final = verify(ledger)
    assert final.ok and final.count == verify(whole).count and final.statuses == {"executed": CALLS}


def test_a_trace_the_ledger_holds_is_not_appended_twice_unless_asked(tmp_path):
    calls = write_trace(tmp_path / "calls.jsonl", 40)
    ledger = tmp_path / "ledger"
    args = ["simulate", "--policy", POLICY, "--calls", calls, "--ledger", ledger]
    assert countersign(*args).returncode == 0
    before = verify(ledger).count
    twice = countersign(*args)
    assert twice.returncode == 1 and "already holds this trace: its 40 calls are requests 3 to" in twice.stderr
    assert "--again" in twice.stderr and verify(ledger).count == before
    nothing = countersign(*args, "--resume")
    assert nothing.returncode == 0 and "nothing to simulate" in nothing.stderr and verify(ledger).count == before
    assert countersign(*args, "--resume", "--again").returncode == 2
    forced = countersign(*args, "--again", "--json")
    assert forced.returncode == 0 and json.loads(forced.stdout)["calls"] == 40
    assert len(proposals(ledger)) == 80 and verify(ledger).ok
    # A longer trace whose first 40 calls are the ledger's last: the rest of an interrupted run.
    longer = write_trace(tmp_path / "longer.jsonl", 41)
    refused = countersign("simulate", "--policy", POLICY, "--calls", longer, "--ledger", ledger)
    assert refused.returncode == 1 and "holds the first 40 of this trace's 41 calls" in refused.stderr
    resumed = countersign("simulate", "--policy", POLICY, "--calls", longer, "--ledger", ledger, "--resume", "--json")
    assert json.loads(resumed.stdout)["calls"] == 1
    # Another trace is no repeat.
    other = tmp_path / "other.jsonl"
    other.write_text(calls.read_text().replace('"#W', '"#X'))
    assert countersign("simulate", "--policy", POLICY, "--calls", other, "--ledger", ledger).returncode == 0


def test_a_trace_with_call_ids_is_recognised_by_them(tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text("".join(json.dumps({"tool": "get_order_details", "args": {"order_id": f"#W{i % 3}"}, "call_id": f"c{i}"})
                             + "\n" for i in range(6)))
    ledger = tmp_path / "ledger"
    assert countersign("simulate", "--policy", POLICY, "--calls", calls, "--ledger", ledger).returncode == 0
    again = countersign("simulate", "--policy", POLICY, "--calls", calls, "--ledger", ledger)
    assert again.returncode == 1 and "already holds this trace" in again.stderr


def test_a_second_ctrl_c_stops_at_once_and_the_ledger_still_verifies(tmp_path):
    calls = write_trace(tmp_path / "calls.jsonl")
    ledger = tmp_path / "ledger"
    args = ["simulate", "--policy", POLICY, "--calls", calls, "--ledger", ledger]
    stopped = interrupt(args, ledger, signals=2)
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr + stopped.stdout, stopped.stderr
    assert "interrupted" in stopped.stderr and "--resume" in stopped.stderr
    assert verify(ledger).ok
    resumed = countersign(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert len(proposals(ledger)) == CALLS and verify(ledger).ok


def test_ctrl_c_while_review_wait_blocks_exits_130_without_a_traceback(tmp_path):
    from datetime import datetime, timezone

    from ledger.clock import ManualClock
    from tests.support import gate

    g = gate(tmp_path / "l", ManualClock(datetime.now(timezone.utc)))
    request = g.propose("small_change", {"id": 1}, proposer="agent-1").request
    g.close()
    process = subprocess.Popen([sys.executable, "-m", "cli.main", "review", "wait", str(request), "-l", str(tmp_path / "l"),
                                "--timeout", "60s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    _until_it_holds(process, tmp_path / "l")  # imported and reading the ledger: then it waits
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in out + err, err
    assert "interrupted (Ctrl-C)" in err


def _until_it_holds(process, directory, limit: float = 60.0) -> None:
    """Wait until `process` has a file under `directory` open (it has imported and opened the
    ledger), at most `limit` seconds: a fixed sleep lost the race on a loaded machine."""
    import os

    deadline = time.monotonic() + limit
    prefix = str(directory)
    while time.monotonic() < deadline and process.poll() is None:
        try:
            targets = [os.readlink(f"/proc/{process.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{process.pid}/fd")]
        except OSError:
            targets = []
        if any(t.startswith(prefix) for t in targets):
            time.sleep(0.3)
            return
        time.sleep(0.05)
