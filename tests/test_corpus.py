"""The main job on real tool calls: every call of the shared corpus through our sample policies,
each ledger verified, and the DuckDB views agreeing with the replayed workflow on every count.

Skipped when ../shared/corpus (beside the project root) is absent, or COUNTERSIGN_CORPUS points
nowhere. The corpus is read in place, never copied into the repository.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest

from dsl import Policy
from ledger.store.log import LedgerReader
from ledger.workflow.simulate import read_calls, simulate
from ledger.proof.verify import verify
from ledger.workflow.machine import Workflow

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("COUNTERSIGN_CORPUS", ROOT.parent / "shared" / "corpus"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the shared corpus is not at {CORPUS}"),
]


def split_tau_bench(tmp_path: Path) -> dict[str, Path]:
    files = {"retail": [], "airline": []}
    with open(CORPUS / "tau_bench_actions.jsonl", encoding="utf-8") as handle:
        for line in handle:
            domain = json.loads(line)["source"].split("/")[1]
            files[domain].append(line)
    out = {}
    for domain, lines in files.items():
        out[domain] = tmp_path / f"{domain}.jsonl"
        out[domain].write_text("".join(lines), encoding="utf-8")
    return out


def replay(path: Path) -> Workflow:
    workflow = Workflow()
    for record in LedgerReader(path).records():
        workflow.step(record.seq, record.event)
    return workflow


def assert_views_agree_with_replay(path: Path, workflow: Workflow, events: int) -> None:
    from ledger.analytics.views import query

    def rows(sql):
        return query(path, sql)[1]

    assert rows("select count(*) from events") == [(events,)]
    states = list(workflow.requests.values())
    assert rows("select count(*) from requests") == [(len(states),)]
    by_status = collections.Counter(s.status for s in states)
    assert dict(rows("select status, count(*) from requests group by status")) == dict(by_status)
    by_effect = collections.Counter(s.effect for s in states)
    assert dict(rows("select effect, count(*) from requests group by effect")) == dict(by_effect)
    by_tool = collections.Counter(s.tool for s in states)
    assert dict(rows("select tool, count(*) from requests group by tool")) == dict(by_tool)
    by_run = collections.Counter(s.run for s in states)
    assert dict(rows("select run, count(*) from requests group by run")) == dict(by_run)
    edited = sum(1 for s in states if s.edits)
    assert rows("select count(*) from requests where edited") == [(edited,)]
    pending = sum(1 for s in states if s.status == "pending")
    assert rows("select count(*) from pending") == [(pending,)]
    assert rows("select count(*) from chain_breaks") == [(0,)]
    assert rows("select count(*) from violations") == [(0,)]


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_every_tau_bench_call_through_its_domain_policy(tmp_path, domain):
    calls_file = split_tau_bench(tmp_path)[domain]
    calls = read_calls(calls_file)
    policy = Policy.load(ROOT / "samples" / f"{domain}.policy")
    ledger = tmp_path / "ledger"
    summary = simulate(policy, calls, ledger)
    assert summary.calls == len(calls) > 100
    assert summary.refused == []
    report = verify(ledger)
    assert report.ok, report.problem
    assert report.count == summary.events
    workflow = replay(ledger)
    assert len(workflow.requests) == len(calls)
    # The expected actions of tau-bench are what a correct agent does: none is denied, and every
    # write (cancel, modify, return, exchange, book, update, send) waits for a person.
    assert summary.effects.get("deny", 0) == 0
    writes = {t["name"] for t in json.loads((CORPUS / "tau_bench_tools.json").read_text()) if t["kind"] == "write"}
    for state in workflow.requests.values():
        if state.tool in writes:
            assert state.effect == "ask", state.tool
    assert_views_agree_with_replay(ledger, workflow, report.count)


def test_every_coding_agent_call_through_the_coding_policy(tmp_path):
    calls = read_calls(CORPUS / "coding_agent_tool_calls.jsonl")
    policy = Policy.load(ROOT / "samples" / "coding-agent.policy")
    ledger = tmp_path / "ledger"
    summary = simulate(policy, calls, ledger)
    assert summary.calls == len(calls) > 4000
    report = verify(ledger)
    assert report.ok, report.problem
    workflow = replay(ledger)
    assert_views_agree_with_replay(ledger, workflow, report.count)
    # Spot checks of the policy on real calls: reads of ordinary POSIX paths run, pushes and
    # force-pushes never run unasked, recursive deletes of / are denied.
    states = list(workflow.requests.values())
    for call, state in zip(calls, states):
        assert state.tool == call.tool
        path = call.args.get("file_path", "")
        if call.tool == "Read" and path.startswith("/") and not any(s in path for s in ("/.env", "/.ssh/", "/.aws/", ".pem", ".key", ".netrc")):
            assert state.effect == "allow", (path, state.rules)
        command = call.args.get("command", "") if call.tool in ("Bash", "bash") else ""
        if "git push" in command:
            assert state.effect in ("ask", "deny"), command
    pushes = [s for s in states if "push" in s.rules]
    assert pushes and all(s.effect == "ask" for s in pushes)
