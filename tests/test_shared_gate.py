"""Many Gates on one ledger: each step catches up with what the others appended, in one process or
many, and the review CLI answers an agent that waits (the many-process run with SIGKILLs is
tests/test_gate_processes.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ledger import events as ev
from ledger import verify
from ledger.clock import ManualClock
from ledger.workflow.gate import Gate, InvalidCall, NoPolicy
from ledger.store.log import Ledger, LedgerCorrupt
from ledger.workflow import machine as wf
from store_contract import proposal
from support import START, gate, policy

ROOT = Path(__file__).resolve().parent.parent
PYTHON_PATH = os.pathsep.join([str(ROOT), str(ROOT / "tests")])


def test_a_second_gate_sees_and_decides_what_the_first_proposed(tmp_path):
    clock = ManualClock(START)
    agent, reviewer = gate(tmp_path / "l", clock), Gate(None, tmp_path / "l", clock=clock)
    p = agent.propose("big_change", {"amount": 5}, proposer="agent")
    assert [s.request for s in reviewer.pending()] == [p.request]
    reviewer.approve(p.request, approver="sup-1", digest=p.args_digest)
    agent.approve(p.request, approver="sup-2", digest=p.args_digest)  # folds sup-1's approval first
    assert agent.get(p.request).status == "approved"
    runs = []
    assert agent.execute(p.request, lambda a: runs.append(a) or "ok").outcome == "ok"
    assert reviewer.execute(p.request, lambda a: runs.append(a)).replayed  # recorded by the other Gate
    assert runs == [{"amount": 5}]
    agent.close(), reviewer.close()
    assert verify(tmp_path / "l").ok


def test_the_reviewer_who_loses_a_race_is_told_who_decided_and_when(tmp_path):
    clock = ManualClock(START)
    agent, one, two = gate(tmp_path / "l", clock), Gate(None, tmp_path / "l", clock=clock), Gate(None, tmp_path / "l", clock=clock)
    p = agent.propose("small_change", {"id": 1}, proposer="agent")
    one.get(p.request), two.get(p.request)  # both have looked
    one.reject(p.request, approver="alice", reason="not today")
    with pytest.raises(wf.RequestFinal, match=r"already rejected \(rejected by alice at 2026-03-01T12:00:00"):
        two.approve(p.request, approver="bob", digest=p.args_digest)
    for g in (agent, one, two):
        g.close()


def test_a_decision_names_the_digest_it_saw(tmp_path):
    clock = ManualClock(START)
    agent, reviewer = gate(tmp_path / "l", clock), Gate(None, tmp_path / "l", clock=clock)
    p = agent.propose("big_change", {"amount": 5}, proposer="agent")
    agent.edit(p.request, editor="sup-1", args={"amount": 4})
    with pytest.raises(wf.StaleDigest):
        reviewer.reject(p.request, approver="sup-2", reason="no", digest=p.args_digest)
    with pytest.raises(wf.StaleDigest):
        reviewer.approve(p.request, approver="sup-2", digest=p.args_digest)
    assert reviewer.get(p.request).status == "pending"
    agent.close(), reviewer.close()


def test_a_reviewers_gate_has_no_policy_to_propose_or_edit_with(tmp_path):
    gate(tmp_path / "l").close()
    with Gate(None, tmp_path / "l") as reviewer:
        with pytest.raises(NoPolicy):
            reviewer.propose("read_thing", {}, proposer="agent")
        with pytest.raises(NoPolicy):
            reviewer.edit(1, editor="sup-1", args={})


def test_whoever_touches_the_ledger_after_a_deadline_expires_the_request(tmp_path):
    clock = ManualClock(START)
    agent = gate(tmp_path / "l", clock)
    first = agent.propose("small_change", {"id": 1}, proposer="agent")
    second = agent.propose("small_change", {"id": 2}, proposer="agent")
    clock.advance(3600)
    with Gate(None, tmp_path / "l", clock=clock) as reviewer:
        commits = reviewer.ledger.commits
        assert reviewer.pending() == []  # silence rejects, though no one ran a scheduler
        assert reviewer.ledger.commits == commits + 1  # both expiries in one write
    assert {agent.get(r).status for r in (first.request, second.request)} == {"expired"}
    agent.close()


def test_an_unlawful_event_another_writer_appended_stops_the_gate(tmp_path):
    clock = ManualClock(START)
    agent = gate(tmp_path / "l", clock)
    p = agent.propose("small_change", {"id": 1}, proposer="agent")
    with Ledger(tmp_path / "l") as plain:  # a writer that checks no workflow rule
        plain.append(ev.Approved(ts="2026-03-01T12:00:01.000000Z", request=p.request, approver="agent", args_digest=p.args_digest, comment=None))
    with pytest.raises(LedgerCorrupt, match="unlawful history"):
        agent.approve(p.request, approver="bob", digest=p.args_digest)
    with pytest.raises(LedgerCorrupt):  # it stays stopped: it never extends that history
        agent.propose("read_thing", {}, proposer="agent")
    agent.close()


def test_a_call_id_proposed_by_another_gate_is_a_repeat(tmp_path):
    clock = ManualClock(START)
    one, two = gate(tmp_path / "l", clock), gate(tmp_path / "l", clock)
    first = one.propose("read_thing", {"id": 1}, proposer="agent", call_id="toolu_1")
    again = two.propose("read_thing", {"id": 1}, proposer="agent", call_id="toolu_1")
    assert again.duplicate and again.request == first.request
    assert two.find(call_id="toolu_1").request == first.request and two.find(call_id="nope") is None
    one.close(), two.close()


def test_decide_is_one_entry_point_and_a_request_says_which_decisions_it_allows(tmp_path):
    with gate(tmp_path / "l") as g:
        p = g.propose("big_change", {"amount": 5}, proposer="agent")
        assert g.allowed_decisions(p.request) == ("approve", "edit", "reject", "respond")
        g.decide(p.request, "approve", by="sup-1", digest=p.args_digest)
        g.decide(p.request, "edit", by="sup-2", args={"amount": 3})
        assert g.get(p.request).status == "pending"
        state = g.decide(p.request, "reject", by="sup-3", reason="too small to bother")
        assert state.status == "rejected" and g.allowed_decisions(p.request) == ()
        q = g.propose("small_change", {}, proposer="agent")
        assert g.allowed_decisions(q.request) == ("approve", "edit", "reject")
        with pytest.raises(wf.DecisionNotAllowed):
            g.decide(q.request, "respond", by="bob", message="done by hand")
        with pytest.raises(InvalidCall, match="unknown decision"):
            g.decide(q.request, "ignore", by="bob")


def test_wait_returns_when_another_gate_decides(tmp_path):
    import threading

    clock = ManualClock(START)
    agent = gate(tmp_path / "l", clock)
    p = agent.propose("small_change", {"id": 1}, proposer="agent")
    assert agent.wait(p.request, timeout=0.05).status == "pending"

    def decide():
        time.sleep(0.2)
        with Gate(None, tmp_path / "l", clock=clock) as reviewer:
            reviewer.approve(p.request, approver="bob", digest=p.args_digest)

    threading.Thread(target=decide).start()
    state = agent.wait(p.request, timeout=20)
    assert (state.status, state.decided_by) == ("approved", "bob")
    agent.close()


# --- processes ----------------------------------------------------------------------------------


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": PYTHON_PATH, **(env or {})}, timeout=60)


AGENT = textwrap.dedent(
    """
    import json, sys, time
    from ledger.workflow.gate import Gate
    from support import policy
    gate = Gate(policy(), sys.argv[1])
    p = gate.propose("small_change", {"id": 7}, proposer="agent-7")
    print(json.dumps({"request": p.request, "digest": p.args_digest}), flush=True)
    began = time.monotonic()
    state = gate.wait(p.request, timeout=60)
    waited = time.monotonic() - began
    runs = []
    if state.status == "approved":
        gate.execute(p.request, lambda args: runs.append(args))
    print(json.dumps({"status": state.status, "by": state.decided_by, "runs": len(runs), "waited": waited}), flush=True)
    gate.close()
    """
)


def test_an_agent_waits_while_a_person_approves_from_another_process(tmp_path):
    ledger = str(tmp_path / "l")
    agent = subprocess.Popen([sys.executable, "-c", AGENT, ledger], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": PYTHON_PATH})
    try:
        proposed = json.loads(agent.stdout.readline())
        listed = _cli("review", "list", "--ledger", ledger, "--json")
        assert listed.returncode == 0, listed.stderr
        [item] = json.loads(listed.stdout)
        assert (item["request"], item["tool"], item["args"], item["decisions"]) == (
            proposed["request"], "small_change", {"id": 7}, ["approve", "edit", "reject"])
        shown = _cli("review", "show", str(proposed["request"]), "--ledger", ledger)
        assert proposed["digest"] in shown.stdout and '"id": 7' in shown.stdout
        refused = _cli("review", "approve", str(proposed["request"]), "--digest", "0" * 64, "--ledger", ledger)
        assert refused.returncode == 1 and "stale-digest" in refused.stderr
        decided_at = time.monotonic()
        approved = _cli("review", "approve", str(proposed["request"]), "--digest", proposed["digest"], "--ledger", ledger)
        assert approved.returncode == 0, approved.stderr
        done = json.loads(agent.stdout.readline())
        assert time.monotonic() - decided_at < 5  # a generous bound: the poll is at most 0.25 s apart
        import pwd

        assert done == {**done, "status": "approved", "by": pwd.getpwuid(os.geteuid()).pw_name, "runs": 1}
    finally:
        agent.kill()
        agent.wait()
    assert verify(ledger).ok
    again = _cli("review", "approve", str(proposed["request"]), "--digest", proposed["digest"], "--ledger", ledger)
    assert again.returncode == 1 and "approved by" in again.stderr


def test_the_review_cli_takes_the_reviewer_from_the_os_account_only(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:  # the real clock, as the CLI's
        p = g.propose("small_change", {}, proposer="agent")
    forged = _cli("review", "approve", str(p.request), "--digest", p.args_digest, "--as", "sup-1", "--ledger", str(tmp_path / "l"))
    assert forged.returncode == 2 and "--as is refused" in forged.stderr
    assert _cli("review", "list", "--ledger", str(tmp_path / "missing")).returncode == 2
    assert not (tmp_path / "missing").exists()  # a mistyped path creates no ledger
    waited = _cli("review", "wait", str(p.request), "--timeout", "0.1s", "--ledger", str(tmp_path / "l"), "--json")
    assert waited.returncode == 3 and json.loads(waited.stdout)["status"] == "pending"
    refused = _cli("review", "reject", str(p.request), "--reason", "use the staging copy", "--ledger", str(tmp_path / "l"))
    assert refused.returncode == 2 and "--digest" in refused.stderr  # every decision names what it saw
    rejected = _cli("review", "reject", str(p.request), "--reason", "use the staging copy", "--digest", p.args_digest,
                    "--ledger", str(tmp_path / "l"))
    assert rejected.returncode == 0, rejected.stderr
    waited = _cli("review", "wait", str(p.request), "--ledger", str(tmp_path / "l"))
    assert waited.returncode == 1 and "rejected" in waited.stdout and "use the staging copy" in waited.stdout


# --- waiting -------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["notify", "poll", "no-library"])
def test_waiting_for_growth_wakes_on_another_writers_append_and_times_out_otherwise(tmp_path, monkeypatch, how):
    import threading

    if how == "poll":
        monkeypatch.setenv("COUNTERSIGN_WAIT", "poll")
    elif how == "no-library":
        monkeypatch.setitem(sys.modules, "watchfiles", None)  # import fails: the polling fallback
    gate(tmp_path / "l").close()
    with Ledger(tmp_path / "l") as reader, Ledger(tmp_path / "l") as writer:
        assert reader.wait_for_growth(0.05) is False
        threading.Timer(0.1, lambda: writer.append_batch([])).start()  # an empty batch writes nothing
        assert reader.wait_for_growth(0.3) is False
        threading.Timer(0.1, lambda: writer.append_batch([proposal(1)])).start()
        assert reader.wait_for_growth(30) is True


def test_wait_expires_the_request_at_its_deadline_when_no_one_else_touches_the_ledger(tmp_path):
    import threading

    clock = ManualClock(START)
    agent = gate(tmp_path / "l", clock)
    p = agent.propose("small_change", {"id": 1}, proposer="agent")
    threading.Timer(0.2, lambda: clock.advance(2 * 3600)).start()  # silence, past the 1 h timeout
    state = agent.wait(p.request, timeout=30)
    assert state.status == "expired" and "No one decided in time" in state.reason
    agent.close()
    assert verify(tmp_path / "l").ok


def test_gates_of_one_process_share_their_commits(tmp_path):
    import threading

    gates = [gate(tmp_path / "l") for _ in range(8)]
    assert len({id(g.ledger) for g in gates}) == 1  # one writer for the process
    before = gates[0].ledger.commits
    barrier = threading.Barrier(len(gates))

    def work(g, k):
        barrier.wait()
        for i in range(25):
            p = g.propose("small_change", {"k": k, "i": i}, proposer="agent", call_id=f"{k}-{i}")
            g.approve(p.request, approver="bob", digest=p.args_digest)

    threads = [threading.Thread(target=work, args=(g, k)) for k, g in enumerate(gates)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    steps = 8 * 25 * 2
    assert gates[0].ledger.commits - before < steps  # some steps shared a write and a sync
    for g in gates:
        g.refresh()
    views = [{r: s.status for r, s in g.workflow.requests.items()} for g in gates]
    assert all(v == views[0] for v in views) and set(views[0].values()) == {"approved"}
    for g in gates:
        g.close()
    report = verify(tmp_path / "l")
    assert report.ok and report.statuses == {"approved": 200}


def test_review_show_tells_a_reviewer_what_changed_what_decided_it_and_what_came_before(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:  # the real clock, as the CLI's
        g.propose("read_thing", {"x": 1}, proposer="agent", run="r1")
        p = g.propose("big_change", {"amount": 500, "note": "pay\x1b[31m"}, proposer="agent", run="r1")
        g.edit(p.request, editor="sup-1", args={"amount": 400, "note": "pay"})
    shown = _cli("review", "show", str(p.request), "--ledger", str(tmp_path / "l"))
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert 'rule: big (policy "test", line 14)' in out and "the edit at seq" in out
    assert '-  "amount": 500,' in out and '+  "amount": 400,' in out  # the edit against the proposal
    assert "\x1b" not in out and "\\u001b" in out  # an agent's control characters are shown, not obeyed
    assert "earlier in run r1" in out and "read_thing  allowed" in out
    assert [line.split()[0] for line in out.split("history:")[1].splitlines() if line.strip()] == [str(p.request), str(p.request + 1), str(p.request + 2)]
    data = json.loads(_cli("review", "show", str(p.request), "--ledger", str(tmp_path / "l"), "--json").stdout)
    assert data["original_args"]["amount"] == 500 and data["args"]["amount"] == 400
    assert [h["kind"] for h in data["history"]] == ["proposed", "interrupted", "edited"]


def test_review_list_fits_an_80_column_terminal(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:
        for i in range(3):
            g.propose("small_change", {"customer": "C-" + "9" * 60, "i": i}, proposer="agent")
    listed = _cli("review", "list", "--ledger", str(tmp_path / "l"))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 5 and all(len(line) <= 80 for line in lines), lines


def test_files_take_the_ledger_directorys_group_bits_whatever_the_umask(tmp_path):
    ledger = tmp_path / "l"
    ledger.mkdir()
    os.chmod(ledger, 0o2770)  # a directory a reviewers' group shares
    old = os.umask(0o022)  # an account that did not set umask 002
    try:
        with Gate(policy(), ledger) as g:
            g.propose("small_change", {}, proposer="agent")
    finally:
        os.umask(old)
    made = [ledger / "LOCK", ledger / "WRITERS", *ledger.glob("events-*.jsonl"), *(ledger / "cache").iterdir()]
    assert {oct(p.stat().st_mode & 0o777) for p in made} == {"0o660"}, [(p.name, oct(p.stat().st_mode)) for p in made]
    assert (ledger / "cache").stat().st_mode & 0o7777 == 0o2770


def test_review_commands_say_what_is_wrong_without_a_traceback(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:
        p = g.propose("small_change", {}, proposer="agent")
    empty = tmp_path / "empty"
    empty.mkdir()
    listed = _cli("review", "list", "--ledger", str(empty))
    assert listed.returncode == 2 and "no ledger segments" in listed.stderr and "Traceback" not in listed.stderr
    assert list(empty.iterdir()) == []  # no lock files left in a directory that is not a ledger
    short = _cli("review", "approve", str(p.request), "--digest", p.args_digest[:12], "--ledger", str(tmp_path / "l"))
    assert short.returncode == 2 and "not a digest" in short.stderr
    unknown = _cli("review", "approve", "999", "--digest", p.args_digest, "--ledger", str(tmp_path / "l"), "--json")
    assert unknown.returncode == 2 and json.loads(unknown.stdout)["error"] == "unknown-request"
    shown = _cli("review", "show", "999", "--ledger", str(tmp_path / "l"), "--json")
    assert shown.returncode == 2 and json.loads(shown.stdout)["error"] == "unknown-request"
    both = _cli("review", "edit", str(p.request), "-p", "x.policy", "--args", "{}", "--set", "a=1", "--digest", p.args_digest,
                "--ledger", str(tmp_path / "l"))
    assert both.returncode == 2 and "not both" in both.stderr
    assert _cli("review", "list", "-q", "--ledger", str(tmp_path / "l")).stdout.split() == [str(p.request)]
    assert _cli("review", "show", str(p.request), "--digest-only", "--ledger", str(tmp_path / "l")).stdout.strip() == p.args_digest
