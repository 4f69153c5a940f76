"""Standing decisions (issue 12, section 2): a reviewer's `remember` on an approval or a
rejection, the `remembered` event, proposals it decides, and their verification
(docs/policy-language.md "Remembered decisions", docs/ledger-format.md section 12)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import Policy
from ledger import events as ev
from ledger.clock import ManualClock
from ledger.proof import fast as fast_path
from ledger.proof.verify import verify
from ledger.store.lines import compose, split
from ledger.store.log import list_segments
from ledger.workflow.gate import Gate, InvalidCall
from ledger.workflow.machine import StandingDecision

from support import START

sys.path.insert(0, str(Path(__file__).parent))
import independent_verifier  # noqa: E402

POLICY = """
policy "sticky"
group sups = ["sup-1", "sup-2"]
ask deploy remember session id "deploy"
ask deploy when args.env == "prod" remember run id "prod"
ask wire remember 8h id "wire"
ask pair approvers 2 from sups remember session id "pair"
ask plain id "plain"
deny deploy when args.env == "moon" reason "Not to the moon." id "moon"
allow read
"""


def policy() -> Policy:
    return Policy.from_text(POLICY, "sticky.policy")


@pytest.fixture
def setup(tmp_path):
    clock = ManualClock(START)
    gate = Gate(policy(), tmp_path / "ledger", clock=clock)
    yield gate, clock, tmp_path / "ledger"
    gate.close()


def ask(gate, tool="deploy", args=None, run="r1", session="s1", proposer="agent"):
    return gate.propose(tool, args if args is not None else {"env": "dev"}, proposer=proposer, run=run,
                        context={"session_id": session} if session else None)


def all_verifiers_accept(path: Path) -> None:
    assert verify(path, engine="python").ok
    assert verify(path).ok
    ok, _count, _head, bad, message = independent_verifier.verify_dir(path)
    assert ok, (bad, message)


# --- coverage -------------------------------------------------------------------------------------


def test_a_session_approval_covers_the_session_and_nothing_else(setup):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    covered = ask(gate, args={"env": "dev", "n": 2}, run="r2")
    assert (covered.effect, covered.status, covered.standing) == ("ask", "allowed", p.request + 2)
    assert gate.execute(covered.request, lambda args: "ran").outcome == "ok"
    assert ask(gate, session="s2").status == "pending"  # another session
    assert ask(gate, session=None).status == "pending"  # no session
    assert ask(gate, tool="wire", args={}).status == "pending"  # another tool
    assert ask(gate, args={"env": "moon"}).status == "denied"  # a deny is never overridden
    assert ask(gate, tool="read", args={}).status == "allowed"
    assert ask(gate, proposer="ann").status == "pending"  # the reviewer's own call: four eyes
    # prod also matches a rule that only lets the run be remembered: a session scope is wider
    assert ask(gate, args={"env": "prod"}).status == "pending"
    all_verifiers_accept(path)


def test_a_run_approval_covers_only_its_run(setup):
    gate, clock, path = setup
    p = ask(gate, args={"env": "prod"})
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="run")
    assert ask(gate, args={"env": "prod"}, session="other").status == "allowed"
    assert ask(gate, args={"env": "prod"}, run="r2").status == "pending"
    # a dev deploy is asked by the deploy rule alone: not the rules the reviewer's approval answered
    assert ask(gate, args={"env": "dev"}).status == "pending"
    all_verifiers_accept(path)


def test_a_rejection_for_a_time_rejects_until_then_with_its_reason(setup):
    gate, clock, path = setup
    p = ask(gate, tool="wire", args={"amount": 1})
    gate.reject(p.request, approver="bob", reason="No wires today.", remember="30m")
    clock.advance(60)
    q = ask(gate, tool="wire", args={"amount": 2}, run="r9", session=None)
    assert (q.status, q.reasons) == ("rejected", ("No wires today.",))
    assert gate.get(q.request).reason == "No wires today."
    clock.advance(29 * 60)
    assert ask(gate, tool="wire", args={"amount": 3}).status == "pending"  # 30 minutes passed
    all_verifiers_accept(path)


def test_a_rejection_wins_over_an_approval(setup):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session", pattern="exact")
    q = ask(gate)  # covered: allowed
    assert q.status == "allowed"
    r = ask(gate, args={"env": "y"})
    gate.reject(r.request, approver="bob", reason="Stop deploying.", remember="run")
    assert ask(gate).status == "rejected"
    assert ask(gate, run="r2").status == "allowed"  # the rejection was for run r1 only
    all_verifiers_accept(path)


def test_an_exact_pattern_covers_only_the_same_arguments(setup):
    gate, clock, path = setup
    p = ask(gate, args={"env": "dev", "v": 1})
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session", pattern="exact")
    assert ask(gate, args={"env": "dev", "v": 1}).status == "allowed"
    assert ask(gate, args={"env": "dev", "v": 2}).status == "pending"
    all_verifiers_accept(path)


def test_another_policy_digest_is_not_covered(setup, tmp_path):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    gate.close()
    other = Policy.from_text(POLICY + "\n# edited\n", "sticky.policy")
    with Gate(other, path, clock=clock) as g2:
        assert ask(g2).status == "pending"
    all_verifiers_accept(path)


# --- refusals -------------------------------------------------------------------------------------


def _count(path: Path) -> int:
    return sum(len(s.read_bytes().splitlines()) for s in list_segments(path))


@pytest.mark.parametrize("tool,args,remember,error", [
    ("plain", {}, "run", StandingDecision),  # no remember clause
    ("deploy", {"env": "prod"}, "session", StandingDecision),  # wider than `remember run`
    ("wire", {}, "9h", StandingDecision),  # longer than 8h
    ("wire", {}, "run", StandingDecision),  # a duration rule admits only durations
    ("deploy", {"env": "dev"}, "forever", InvalidCall),
    ("deploy", {"env": "dev"}, "0s", InvalidCall),
])
def test_a_scope_the_rule_does_not_admit_appends_nothing(setup, tool, args, remember, error):
    gate, clock, path = setup
    p = ask(gate, tool=tool, args=args)
    before = _count(path)
    with pytest.raises(error):
        gate.approve(p.request, approver="ann", digest=p.args_digest, remember=remember)
    assert _count(path) == before
    assert gate.get(p.request).status == "pending"


def test_an_approval_stands_only_where_one_approval_is_enough(setup):
    gate, clock, path = setup
    p = ask(gate, tool="pair", args={})
    with pytest.raises(StandingDecision):
        gate.approve(p.request, approver="sup-1", digest=p.args_digest, remember="session")
    # a rejection by one of them may stand
    gate.reject(p.request, approver="sup-1", reason="No pairs.", remember="session")
    assert ask(gate, tool="pair", args={"x": 1}).status == "rejected"


def test_a_session_needs_a_session_and_a_run_a_run(setup):
    gate, clock, path = setup
    p = ask(gate, session=None, run=None)
    with pytest.raises(InvalidCall):
        gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    with pytest.raises(InvalidCall):
        gate.approve(p.request, approver="ann", digest=p.args_digest, remember="run")
    with pytest.raises(InvalidCall):
        gate.decide(p.request, "respond", by="ann", message="x", remember="run")


# --- tampering --------------------------------------------------------------------------------


def _lines(path: Path) -> list[bytes]:
    return [line + b"\n" for s in list_segments(path) for line in s.read_bytes().splitlines()]


def _rechain(lines: list[bytes], start: int) -> list[bytes]:
    out = list(lines[:start])
    prev = split(out[-1].rstrip(b"\n"))[1] if out else ev.GENESIS_PREV
    for index in range(start, len(lines)):
        body, _, data = split(lines[index].rstrip(b"\n"))
        event = msgspec.structs.replace(ev.decode_event(body), seq=index + 1, prev=prev)
        prev, line = compose(ev.encode_event(event), data)
        out.append(line)  # compose's line ends with its line feed
    return out


def _write(path: Path, lines: list[bytes]) -> None:
    segments = list_segments(path)
    for seg in segments[1:]:
        seg.unlink()
    segments[0].write_bytes(b"".join(lines))


def _forge(path: Path, seq: int, change) -> None:
    """Replace the event at `seq` by `change(event)` and rehash the chain after it (a careful
    forger: only the workflow rules can tell)."""
    lines = _lines(path)
    body, _, data = split(lines[seq - 1].rstrip(b"\n"))
    event = change(ev.decode_event(body))
    lines[seq - 1] = compose(ev.encode_event(event), data)[1]
    _write(path, _rechain(lines, seq - 1))


def _assert_caught(path: Path, seq: int, code: str | None = None) -> None:
    for engine in ("python", "auto"):
        report = verify(path, engine=engine)
        assert not report.ok and report.problem.seq == seq, (engine, report.problem)
        if code:
            assert report.problem.code == code, report.problem
    assert fast_path.verify_fast(path) is None  # the compiled verifier declines; never accepts
    ok, _count, _head, bad, message = independent_verifier.verify_dir(path)
    assert not ok and bad == seq, message


def _covered_ledger(setup):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    q = ask(gate, args={"env": "dev", "n": 2})
    assert q.status == "allowed"
    plain = ask(gate, args={"env": "dev", "n": 3}, session="s2")
    assert plain.status == "pending"
    gate.close()
    return path, p, q, plain


def test_a_proposal_claiming_a_standing_decision_it_does_not_have_is_caught(setup):
    path, p, q, plain = _covered_ledger(setup)
    all_verifiers_accept(path)
    covered = ev.decode_event(split(_lines(path)[q.request - 1].rstrip(b"\n"))[0]).remembered
    # the other session's proposal claims the approval (and drops its interrupt)
    lines = _lines(path)
    del lines[plain.request]  # its interrupted event
    body, _, data = split(lines[plain.request - 1].rstrip(b"\n"))
    forged = msgspec.structs.replace(ev.decode_event(body), remembered=ev.Covered(
        by=covered.by, requirements=covered.requirements, session="s2"))
    lines[plain.request - 1] = compose(ev.encode_event(forged), data)[1]
    _write(path, _rechain(lines, plain.request - 1))
    _assert_caught(path, plain.request, "not-covered")


def test_a_proposal_naming_a_seq_that_is_no_standing_decision_is_caught(setup):
    path, p, q, plain = _covered_ledger(setup)
    _forge(path, q.request, lambda e: msgspec.structs.replace(
        e, remembered=msgspec.structs.replace(e.remembered, by=p.request)))
    _assert_caught(path, q.request, "not-covered")


def test_a_standing_decision_wider_than_the_rule_is_caught(setup):
    gate, clock, path = setup
    p = ask(gate, args={"env": "prod"})
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="run")
    gate.close()
    seq = p.request + 2  # proposed, interrupted, remembered
    _forge(path, seq, lambda e: msgspec.structs.replace(e, scope=ev.Remember("session"), within="s1"))
    _assert_caught(path, seq, "standing-decision")


def test_a_standing_decision_in_a_version_1_ledger_is_caught(tmp_path):
    clock = ManualClock(START)
    # without the policy event that keeps its text, which a version 1 ledger refuses first
    gate = Gate(policy(), tmp_path / "ledger", clock=clock, pin_policy=False)
    path, p, q, plain = _covered_ledger((gate, clock, tmp_path / "ledger"))
    _forge(path, 1, lambda e: msgspec.structs.replace(e, format=ev.FORMAT_V1))
    report = verify(path, engine="python")
    assert not report.ok and report.problem.seq == p.request + 2


def test_every_field_of_the_new_events_is_covered_by_the_chain(setup, tmp_path):
    """The tamper matrix for the two new shapes: flip one byte in any member of the remembered
    event or of the covered proposal, and verify names that seq."""
    path, p, q, plain = _covered_ledger(setup)
    lines = _lines(path)
    for seq in (p.request + 2, q.request):
        body, _, _ = split(lines[seq - 1].rstrip(b"\n"))
        for member in msgspec.json.decode(body):
            copy = tmp_path / f"t-{seq}-{member}"
            shutil.copytree(path, copy)
            changed = list(lines)
            line = changed[seq - 1]
            at = line.index(b'"' + member.encode() + b'":') + len(member) + 4
            changed[seq - 1] = line[:at] + bytes([line[at] ^ 1]) + line[at + 1:]
            _write(copy, changed)
            report = verify(copy, engine="python")
            assert not report.ok and report.problem.seq == seq, (member, report.problem)
            ok, _c, _h, bad, _m = independent_verifier.verify_dir(copy)
            assert not ok and bad == seq, member


# --- the Gate and verify agree; replay --------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("propose"), st.sampled_from(["deploy", "wire", "plain"]), st.sampled_from(["dev", "prod"]),
              st.sampled_from(["r1", "r2"]), st.sampled_from(["s1", "s2", None]), st.sampled_from(["agent", "ann"])),
    st.tuples(st.just("decide"), st.sampled_from(["approve", "reject"]), st.sampled_from(["ann", "bob"]),
              st.sampled_from([None, "run", "session", "1h", "8h", "9h"]), st.sampled_from([None, "exact"]),
              st.integers(0, 20)),
    st.tuples(st.just("wait"), st.sampled_from([60, 1800, 3 * 3600])),
    st.tuples(st.just("forget"), st.integers(0, 20)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=25))
def test_the_gate_and_every_verifier_agree_and_replay_gives_the_same_decisions(tmp_path_factory, steps):
    path = tmp_path_factory.mktemp("sticky") / "ledger"
    clock = ManualClock(START)
    statuses = {}
    cancelled = set()  # the calls a forgotten standing decision had allowed, cancelled with it
    with Gate(policy(), path, clock=clock) as gate:
        requests = []
        for step in steps:
            if step[0] == "propose":
                _, tool, env, run, session, who = step
                p = ask(gate, tool=tool, args={"env": env}, run=run, session=session, proposer=who)
                requests.append(p.request)
                statuses[p.request] = p.status
                if p.standing is not None:  # what decided it is a standing decision that covers it
                    sd = gate.workflow.standing[p.standing]
                    assert sd.tool == tool and sd.approver != who and sd.proposer == who
                    assert set(sd.rules) == set(p.rules)
            elif step[0] == "decide" and requests:
                _, decision, who, remember, pattern, pick = step
                request = requests[pick % len(requests)]
                state = gate.get(request)
                try:
                    gate.decide(request, decision, by=who, digest=state.digest, reason="no", remember=remember,
                                pattern=pattern if remember else None)
                except (StandingDecision, InvalidCall, Exception) as exc:  # refused: nothing appended
                    assert not isinstance(exc, AssertionError)
            elif step[0] == "wait":
                clock.advance(step[1])
            elif step[0] == "forget" and gate.workflow.standing:
                seqs = sorted(gate.workflow.standing)
                try:
                    cancelled.update(gate.forget(seqs[step[1] % len(seqs)], by="ann"))
                except StandingDecision.__mro__[1]:  # a Violation (an expired one): nothing appended
                    pass
        final = {r: gate.get(r).status for r in requests}
    all_verifiers_accept(path)
    # replay: a fresh Gate folding the whole ledger sees the same statuses
    with Gate(policy(), path, clock=clock, full_verify=True, snapshot=False) as again:
        assert {r: again.get(r).status for r in final} == final
        # and the same standing decision decides a proposal's twin; a call it allowed ends
        # cancelled only when the decision was forgotten before the call started (Gate.forget)
        for request, status in statuses.items():
            if status in ("allowed", "rejected") and again.get(request).standing is not None:
                expected = {"allowed", "rejected", "executed", "executing"} | ({"cancelled"} if request in cancelled else set())
                assert again.get(request).status in expected


# --- the service ----------------------------------------------------------------------------------


def test_the_service_takes_remember_signs_it_and_the_web_form_offers_only_what_the_rule_allows(tmp_path):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from ledger.proof.roster import load_roster
    from service.app import create_app
    from service_support import setup as service_setup

    s = service_setup(tmp_path, policy_text='ask small_change remember session\nask plain_change\n')
    with TestClient(create_app(s.service(), web=False)) as client:
        def propose(tool, n, session="s1"):
            body = {"tool": tool, "args": {"n": n}, "run": "r1", "context": {"session_id": session}}
            r = client.post("/v1/proposals", json=body, headers=s.headers("agent-1"))
            assert r.status_code == 201, r.text
            return r.json()

        p = propose("small_change", 1)
        r = client.post(f"/v1/requests/{p['request']}/decision", headers=s.headers("sup-1"),
                        json={"decision": "approve", "digest": p["args_digest"], "remember": "session"})
        assert r.status_code == 200, r.text
        covered = propose("small_change", 2)
        assert covered["status"] == "allowed"
        other = propose("small_change", 3, session="s2")
        assert other["status"] == "pending"
        q = propose("plain_change", 1)
        r = client.post(f"/v1/requests/{q['request']}/decision", headers=s.headers("sup-1"),
                        json={"decision": "approve", "digest": q["args_digest"], "remember": "run"})
        assert r.status_code >= 400 and client.get(f"/v1/requests/{q['request']}", headers=s.headers("sup-1")).json()["status"] == "pending"
        # revoking it, as a reviewer (an agent may not): the session's calls are asked about again
        assert client.post("/v1/standing/1/forget", json={}, headers=s.headers("agent-1")).status_code == 403
        found = [i for i in range(1, 50) if client.post(f"/v1/standing/{i}/forget", json={"reason": "done"},
                                                          headers=s.headers("sup-1")).status_code == 200]
        assert len(found) == 1  # the one standing decision; every other seq is refused (not-standing)
        assert client.post(f"/v1/standing/{found[0]}/forget", json={}, headers=s.headers("sup-1")).status_code == 409
        assert propose("small_change", 4)["status"] == "pending"
        # the call it allowed, not started, is cancelled by the forget (signed by the service)
        state = client.get(f"/v1/requests/{covered['request']}", headers=s.headers("sup-1")).json()
        assert state["status"] == "cancelled", state
    report = verify(s.ledger, rosters=[load_roster(s.roster)])
    assert report.ok, report  # the remembered event and the cancels are signed by the service like the decision
    from ledger.workflow import describe
    with Gate(None, s.ledger) as gate:
        assert describe.in_full(gate, other["request"])["remember"] == ["run", "session"]
        assert describe.in_full(gate, q["request"])["remember"] == []


# --- analytics ---------------------------------------------------------------------------------


def test_the_projection_keeps_standing_decisions_between_refreshes_and_agrees_with_the_views(setup):
    pytest.importorskip("duckdb")
    from ledger.analytics import projection as proj
    from ledger.analytics.stats import projection_stats, views_stats

    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    r = ask(gate, tool="wire", args={})
    gate.reject(r.request, approver="bob", reason="No.", remember="1h")
    assert proj.refresh(path).complete  # the standing decisions are folded here, stored in the projection
    covered = ask(gate, args={"env": "dev", "n": 2})
    rejected = ask(gate, tool="wire", args={"n": 2})
    assert (covered.status, rejected.status) == ("allowed", "rejected")
    result = proj.refresh(path)  # folds the covered proposals with the stored standing decisions
    assert result.complete and not result.rebuilt, result
    assert proj.check(path) == []
    assert projection_stats(path) == views_stats(path)


def test_the_cli_remembers_a_decision(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cli.main import app

    path = tmp_path / "ledger"  # the CLI decides at the wall clock's time, so the calls are proposed at it too
    with Gate(policy(), path) as gate:
        p = ask(gate)
        q = ask(gate, tool="plain", args={})
    monkeypatch.setenv("COUNTERSIGN_REVIEWER", "ann")
    runner = CliRunner()
    refused = runner.invoke(app, ["review", "approve", str(q.request), "--digest", q.args_digest, "--remember", "run",
                                  "--ledger", str(path)])
    assert refused.exit_code == 1 and "standing-decision" in refused.output, refused.output
    done = runner.invoke(app, ["review", "approve", str(p.request), "--digest", p.args_digest, "--remember", "session",
                               "--exact", "--ledger", str(path)])
    assert done.exit_code == 0, done.output
    with Gate(policy(), path) as again:
        assert ask(again).status == "allowed"
        assert ask(again, args={"env": "dev", "n": 1}).status == "pending"  # --exact


def test_a_forgotten_standing_decision_covers_nothing_more(setup):
    from ledger.workflow.machine import NotStanding

    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    standing = ask(gate, args={"env": "x"}).standing
    assert standing is not None
    gate.forget(standing, by="ann", reason="changed my mind")
    assert ask(gate, args={"env": "y"}).status == "pending"
    before = _count(path)
    for seq in (standing, p.request, 999):  # forgotten already; not a standing decision; never made
        with pytest.raises(NotStanding):
            gate.forget(seq, by="ann")
    w = ask(gate, tool="wire", args={})
    gate.reject(w.request, approver="bob", reason="No.", remember="1h")
    clock.advance(3600)
    with pytest.raises(NotStanding):  # expired
        gate.forget(w.request + 2, by="bob")
    assert _count(path) == before + 4  # the wire call and its decision; no forget was recorded
    gate.close()
    all_verifiers_accept(path)
    # a forged proposal still claiming the forgotten decision is caught
    lines = _lines(path)
    seq = next(i for i, line in enumerate(lines, 1) if b'"env":"y"' in line)
    del lines[seq]  # its interrupted event
    body, _, data = split(lines[seq - 1].rstrip(b"\n"))
    event = ev.decode_event(body)
    forged = msgspec.structs.replace(event, remembered=ev.Covered(by=standing, requirements=policy().evaluate(
        "deploy", {"env": "y"}, {"session_id": "s1"}).requirements, session="s1"))
    lines[seq - 1] = compose(ev.encode_event(forged), data)[1]
    _write(path, _rechain(lines, seq - 1))
    _assert_caught(path, seq, "not-covered")


def test_a_covered_proposal_records_its_contexts_session(setup):
    """verify checks the recorded session against the stored context (a lying writer could
    otherwise claim another session's standing decision)."""
    path, p, q, plain = _covered_ledger(setup)
    lines = _lines(path)
    body, _, data = split(lines[q.request - 1].rstrip(b"\n"))
    other = data.replace(b'"session_id":"s1"', b'"session_id":"s9"')
    event = ev.decode_event(body)
    # a consistent forgery of the context (digest recomputed) that keeps the recorded session
    from ledger.digest import value_digest
    forged = msgspec.structs.replace(event, context_digest=value_digest(msgspec.json.decode(other)["context"]))
    lines[q.request - 1] = compose(ev.encode_event(forged), other)[1]
    _write(path, _rechain(lines, q.request - 1))
    report = verify(path, engine="python")
    assert not report.ok and report.problem.seq == q.request and report.problem.kind == "data", report.problem
    assert "session" in report.problem.message
    assert verify(path).problem == report.problem  # the compiled verifier declines


def test_a_gate_opened_from_its_snapshot_keeps_the_standing_decisions(setup):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    w = ask(gate, tool="wire", args={})
    gate.reject(w.request, approver="bob", reason="No.", remember="2h")
    gate.close()  # saves the snapshot
    with Gate(policy(), path, clock=clock) as again:
        assert again._base > 0  # opened from the snapshot, not by a replay
        assert sorted(again.workflow.standing) == [p.request + 2, w.request + 2]
        assert ask(again).status == "allowed"
        assert ask(again, tool="wire", args={"n": 1}).status == "rejected"
    assert fast_path.verify_fast(path) is None  # the compiled verifier leaves such a ledger to Python
    all_verifiers_accept(path)


# --- attacks10: who, which rules, which policy, forgetting ------------------------------------------


def test_a_standing_decision_covers_only_its_proposers_calls_asked_by_the_same_rules(setup):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    assert gate.workflow.standing[p.request + 2].proposer == "agent"
    assert ask(gate, args={"env": "dev", "n": 1}).status == "allowed"
    assert ask(gate, args={"env": "dev", "n": 2}, proposer="agent-2").status == "pending"  # another agent
    q = ask(gate, args={"env": "prod"}, proposer="agent-2")  # the deploy and prod rules
    gate.approve(q.request, approver="bob", digest=q.args_digest, remember="run")
    assert ask(gate, args={"env": "prod", "n": 1}, proposer="agent-2").status == "allowed"
    assert ask(gate, args={"env": "dev"}, proposer="agent-2").status == "pending"  # the deploy rule alone
    all_verifiers_accept(path)


@pytest.mark.parametrize("change", ["proposer", "rules"])
def test_a_proposal_claiming_another_proposers_or_rules_standing_decision_is_caught(setup, change):
    path, p, q, plain = _covered_ledger(setup)

    def forge(e):
        if change == "proposer":
            return msgspec.structs.replace(e, proposer="agent-2")
        return msgspec.structs.replace(e, rules=e.rules + (ev.RuleRef(id="prod", line=5),))

    _forge(path, q.request, forge)
    _assert_caught(path, q.request, "not-covered")


def test_a_policy_change_ends_standing_decisions_and_a_replaced_policys_call_is_not_remembered(setup):
    gate, clock, path = setup
    x = gate.policy
    y = Policy.from_text(POLICY.replace('ask plain id "plain"', 'ask plain id "plain2"'), "sticky.policy")
    gate.record_policy(x, "operator")
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    old = ask(gate, args={"env": "old"})
    assert old.status == "allowed"
    late = ask(gate, args={"env": "late"}, proposer="agent-2")
    assert late.status == "pending"
    gate.record_policy(y, "operator")
    assert gate.workflow.standing == {}
    before = _count(path)
    with pytest.raises(StandingDecision, match="no longer in force"):  # decided by x; y is in force
        gate.approve(late.request, approver="ann", digest=late.args_digest, remember="session")
    assert _count(path) == before
    gate.record_policy(x, "operator")  # the old text again: what it remembered stays forgotten
    assert ask(gate, args={"env": "dev", "n": 3}).status == "pending"
    assert gate.execute(old.request, lambda args: "ran").outcome == "ok"  # allowed before the change: it may run
    gate.close()
    all_verifiers_accept(path)
    # a careful forger claiming the ended decision after the revert is caught
    lines = _lines(path)
    seq = len(lines) - 3  # the last proposal (proposed, interrupted, then the execution's two events)
    body, _, data = split(lines[seq - 1].rstrip(b"\n"))
    event = ev.decode_event(body)
    assert isinstance(event, ev.Proposed) and event.effect == "ask"
    covered = ev.Covered(by=p.request + 2, requirements=policy().evaluate("deploy", {"env": "dev"}, {}).requirements,
                         session="s1")
    lines[seq - 1] = compose(ev.encode_event(msgspec.structs.replace(event, remembered=covered)), data)[1]
    del lines[seq]  # its interrupted event
    _write(path, _rechain(lines, seq - 1))
    _assert_caught(path, seq, "not-covered")


def test_forgetting_cancels_the_calls_it_allowed_that_have_not_started(setup):
    gate, clock, path = setup
    p = ask(gate)
    gate.approve(p.request, approver="ann", digest=p.args_digest, remember="session")
    ran = ask(gate, args={"env": "dev", "n": 1})
    waiting = ask(gate, args={"env": "dev", "n": 2})
    running = ask(gate, args={"env": "dev", "n": 3})
    assert gate.execute(ran.request, lambda args: "ran").outcome == "ok"
    gate.start(running.request)
    gate.close()  # the next Gate opens from the snapshot: it keeps what the decision allowed
    with Gate(policy(), path, clock=clock) as again:
        assert again._base > 0
        assert again.forget(ran.standing, by="bob", reason="abused") == [waiting.request]
        state = again.get(waiting.request)
        assert (state.status, state.decided_by) == ("cancelled", "bob")
        assert f"seq {ran.standing}" in state.reason and "abused" in state.reason
        assert again.get(running.request).status == "executing"
        assert again.get(ran.request).status == "executed"
        with pytest.raises(Exception):
            again.execute(waiting.request, lambda args: "ran")
    all_verifiers_accept(path)


def test_a_call_a_removed_reviewers_standing_approval_allowed_does_not_start(tmp_path):
    pytest.importorskip("starlette")
    from ledger.workflow.gate import UnsignedDecision
    from service_support import setup as service_setup

    s = service_setup(tmp_path, policy_text='ask notify remember run\n')
    svc = s.service()
    try:
        agent, sup1 = svc.roster.principal("agent-1"), svc.roster.principal("sup-1")
        n = svc.propose(agent, "notify", {"to": "ann"}, run="r-1")
        svc.decide(sup1, n.request, "approve", digest=n.args_digest, remember="run")
        covered = svc.propose(agent, "notify", {"to": "bob"}, run="r-1")
        assert covered.status == "allowed"
        blocks = s.roster.read_text().split("[[principal]]")
        s.roster.write_text("[[principal]]".join(b for b in blocks if 'name = "sup-1"' not in b))
        assert svc.reload("root-admin")["changed"]
        with pytest.raises(UnsignedDecision, match="not in the roster"):
            svc.start(svc.roster.principal("agent-1"), covered.request)
    finally:
        svc.close()
