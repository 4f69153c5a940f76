"""Issue 11 section 5: `countersign serve` killed with SIGKILL in the middle of a load, and restarted
on the same ledger.

Agent processes propose over HTTP (allowed calls, asks, denials; each with a call id) and wait
for their asks; a reviewer process approves and rejects what its queue shows. Each journals what
the server acknowledged (tests/service_load_worker.py). The test SIGKILLs the server mid-load and
starts it again on the same port and ledger; the clients retry through the gap (a proposal sent
again with its call id returns the first decision when the first one was recorded). At the end
the clients stop proposing, the test's own reviewer rejects whatever still waits, and then:

- every client's outstanding wait resolved, and every client exited 0;
- every acknowledged proposal is in the ledger at its request's seq, with its digest and call id,
  and no call id was proposed twice (retries were idempotent);
- every acknowledged decision is in the ledger, by that reviewer, and every resolved wait saw
  the status the ledger ends with;
- `countersign ledger verify LEDGER --roster ROSTER` passes.

`make test` runs 4 agents and 1 reviewer for about 5 s with one kill; COUNTERSIGN_LONG_TESTS=1
runs 8 agents and 2 reviewers for 20 s with three kills.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from ledger import Gate, LedgerReader  # noqa: E402
from ledger import events as ev  # noqa: E402
from service_process import ENV, ROOT, Server, countersign  # noqa: E402
from service_support import setup  # noqa: E402

WORKER = Path(__file__).with_name("service_load_worker.py")
LONG = os.environ.get("COUNTERSIGN_LONG_TESTS", "") not in ("", "0")
SHORT = dict(agents=4, reviewers=1, seconds=5.0, kills=1)
LONG_RUN = dict(agents=8, reviewers=2, seconds=20.0, kills=3)
DECISIONS = {"approve": ev.Approved, "reject": ev.Rejected}


def journal(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.parametrize("shape", [LONG_RUN if LONG else SHORT])
def test_a_sigkilled_service_loses_no_acknowledged_step_and_every_wait_resolves(tmp_path, shape):
    agents = tuple(f"agent-{n}" for n in range(1, shape["agents"] + 1))
    reviewers = ("sup-1", "sup-2", "sup-3")[: shape["reviewers"]]
    s = setup(tmp_path, agents=agents)
    stop = tmp_path / "stop"
    out = tmp_path / "journals"
    out.mkdir()
    server = Server(s).start()
    procs: dict[str, subprocess.Popen] = {}
    try:
        for seed, (role, name) in enumerate([*(("agent", a) for a in agents), *(("reviewer", r) for r in reviewers)]):
            procs[name] = subprocess.Popen(
                [sys.executable, str(WORKER), role, server.url, name, s.tokens[name], str(out / f"{name}.jsonl"),
                 str(stop), str(seed)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        began = time.monotonic()
        for k in range(shape["kills"]):
            time.sleep(max(0.0, began + shape["seconds"] * (k + 1) / (shape["kills"] + 1) - time.monotonic()))
            before = sum(len(journal(p)) for p in out.glob("*.jsonl"))
            server.kill()
            server.start()
            assert before > 20, "the clients had acknowledged almost nothing before the kill"
        time.sleep(max(0.0, began + shape["seconds"] - time.monotonic()))
        stop.touch()
        for name in reviewers:
            procs[name].wait(timeout=60)

        # Whatever still waits is rejected here, until every agent has heard its decision.
        with httpx.Client(base_url=server.url, headers=s.headers("alice"), timeout=10) as me:
            give_up = time.monotonic() + 60
            while any(procs[a].poll() is None for a in agents):
                assert time.monotonic() < give_up, "an agent's wait never resolved"
                for row in me.get("/v1/queue", params={"all": "1"}).json()["requests"]:
                    me.post(f"/v1/requests/{row['request']}/decision",
                            json={"decision": "reject", "digest": row["args_digest"], "reason": "The test ends."})
                time.sleep(0.05)
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=30)
            assert (proc.returncode, stdout.strip()) == (0, "done"), f"{name}: {stderr[-3000:]}"
        assert server.stop() == 0, server.log()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
        server.__exit__()

    records = list(LedgerReader(s.ledger).records())
    proposed = {r.seq: r.event for r in records if isinstance(r.event, ev.Proposed)}
    decisions = {(r.event.request, type(r.event), r.event.approver) for r in records
                 if isinstance(r.event, (ev.Approved, ev.Rejected))}
    call_ids = [e.call_id for e in proposed.values()]
    assert len(call_ids) == len(set(call_ids)), "a call id was proposed twice: a retry was not idempotent"

    acked = resolved = decided = 0
    with Gate(None, s.ledger) as gate:
        for name in (*agents, *reviewers):
            for line in journal(out / f"{name}.jsonl"):
                if line["kind"] == "proposed":
                    acked += 1
                    e = proposed.get(line["request"])
                    assert e is not None, f"{name}: acknowledged request {line['request']} is not in the ledger"
                    assert (e.call_id, e.args_digest, e.proposer) == (line["call_id"], line["args_digest"], name)
                elif line["kind"] == "resolved":
                    resolved += 1
                    assert gate.get(line["request"]).status == line["status"]
                else:
                    decided += 1
                    assert (line["request"], DECISIONS[line["decision"]], name) in decisions, line
        pending = gate.pending()
    assert not pending, f"{len(pending)} requests still wait"
    assert acked > 50 and resolved > 5 and decided > 5, (acked, resolved, decided)

    r = countersign("ledger", "verify", str(s.ledger), "--roster", str(s.roster))
    assert r.returncode == 0, r.stdout + r.stderr
