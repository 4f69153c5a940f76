"""What a hostile review of the shared Gate (issue 10) found, one test each (each failed before its
fix: Gates share a writer through transact(since=); a Gate replays without the lock only up to the
head its writer saw whole; a lock-free reader reads a segment no further than its size when it came
to it; an ask cut from its interrupt is cancelled by the next step; an edit needs the policy that
decided the call).

1. Two Gates sharing one Ledger writer in a process never fold each other's steps (a transaction
   hands `build` only what *other writers* appended), so an allowed call runs twice and the
   ledger's history becomes unlawful.
2. A Gate opening (its replay reads the files without the commit lock) while one writer dies
   mid-write and another moves the torn tail aside and appends reads a line spliced from the torn
   bytes and the new ones, and raises LedgerCorrupt on a ledger that verifies. LedgerReader (so
   any lock-free reader) does the same.
3. A propose is one write of two lines (proposed, interrupted). A crash that cuts the write after
   the first line leaves an ask whose interrupt was never recorded: "interrupting" for ever, with
   no deadline, in nobody's queue, never expired; the agent's retry (same call id) gets that
   request back and `wait` blocks until its own timeout (for ever without one). A real SIGKILL
   does it when the interrupt's line spans a page boundary of the file (the kernel stops a
   write between pages for a fatal signal); the test cuts the file as such a kill leaves it.
4. An edit re-enters the policy of the Gate that edits, whatever it is (a reviewer's Gate, or
   `countersign review edit --policy FILE`, with an older or laxer file): arguments the policy
   that decided the call denies (the sample's "Changes above 1000 are not made by agents") are
   approved and run by the agent's Gate, and the ledger verifies.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest

from dsl import Policy
from ledger import Gate, GateError, Ledger, LedgerCorrupt, LedgerReader, Violation, verify
from support import POLICY_TEXT, policy


def last_segment(path: Path) -> Path:
    return sorted(path.glob("events-*.jsonl"))[-1]  # docs/ledger-format.md section 1: the segments


def tear(path: Path, fragment: bytes = b'{"body":{"kind":"proposed","seq":99') -> None:
    """What a writer killed in the middle of writing a line leaves: bytes after the last line feed."""
    with open(last_segment(path), "ab") as handle:
        handle.write(fragment)


def test_two_gates_sharing_one_writer_run_an_allowed_call_once(tmp_path):
    elsewhere = Gate(policy(), tmp_path / "l")  # another process's Gate, with a writer of its own
    p = elsewhere.propose("read_thing", {"id": 1}, proposer="agent")
    shared = Ledger(tmp_path / "l")  # one writer for this process's Gates (what group commit will want)
    one, two = Gate(policy(), shared), Gate(policy(), shared)
    runs = []
    assert one.execute(p.request, lambda args: runs.append("one")).outcome == "ok"
    again = two.execute(p.request, lambda args: runs.append("two"))
    assert again.replayed and runs == ["one"]
    assert verify(tmp_path / "l").ok  # today: "request 2 is already executed" at the second start


class TornWhileReplaying(Ledger):
    """A writer whose `records()` (what Gate.__init__ replays) meets two other writers: after this
    writer opened (its own opening would have moved a torn tail aside), one dies in the middle of
    a line; when the reader has read to the end of the files, another opens (moving the torn
    bytes aside, recording `recovered`) and proposes."""

    def records(self, from_seq: int = 1, *, kind=None, until=None):
        if kind is not None:  # the pass that looks for redactions: nothing to tear yet
            yield from super().records(from_seq, kind=kind, until=until)
            return
        tear(self.path)
        last = sum(1 for _ in LedgerReader(self.path).records())
        for record in super().records(from_seq, until=until):
            yield record
            if record.seq == last:  # the reader's last read reached the torn bytes
                with Gate(policy(), self.path) as other:
                    other.propose("read_thing", {"from": "another hook"}, proposer="agent-2")


def test_a_gate_opening_while_a_torn_tail_is_repaired_does_not_call_a_lawful_ledger_corrupt(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:
        for i in range(5):
            g.propose("read_thing", {"i": i}, proposer="agent")
    with Gate(policy(), TornWhileReplaying(tmp_path / "l")) as opened:  # today: LedgerCorrupt, "not a valid event"
        assert [s.request for s in opened.pending()] == []
    assert verify(tmp_path / "l").ok


def test_a_reader_that_read_a_torn_tail_reads_on_after_it_is_repaired(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:
        for i in range(5):
            g.propose("read_thing", {"i": i}, proposer="agent")
    tear(tmp_path / "l")
    records = LedgerReader(tmp_path / "l").records()
    assert [r.seq for r in islice(records, 6)] == list(range(1, 7))  # read to the end, the torn bytes held
    with Gate(policy(), tmp_path / "l") as other:  # moves the torn tail aside, records it, proposes
        other.propose("read_thing", {"from": "another hook"}, proposer="agent-2")
    assert [r.seq for r in records] in ([], [7, 8])  # a prefix, or the new lines: never a spliced one


def test_a_propose_cut_after_its_first_line_leaves_no_ask_that_never_expires(tmp_path):
    with Gate(policy(), tmp_path / "l") as g:
        g.propose("small_change", {"id": 1}, proposer="agent", call_id="toolu_1")  # proposed + interrupted, one write
    segment = last_segment(tmp_path / "l")
    data = segment.read_bytes()
    interrupted_starts = data.rindex(b"\n", 0, len(data) - 1) + 1
    with open(segment, "r+b") as handle:  # the write stopped 40 bytes into the interrupt's line
        handle.truncate(interrupted_starts + 40)
    with Gate(policy(), tmp_path / "l") as g:  # the agent, restarted, retries the call
        again = g.propose("small_change", {"id": 1}, proposer="agent", call_id="toolu_1")
        state = g.get(again.request)
        # Either the whole propose is gone (a new request), or the request can be decided or expire.
        assert not again.duplicate or state.status != "interrupting", (state.status, state.deadline)


def test_an_edit_under_another_policy_does_not_run_what_the_calls_policy_denies(tmp_path):
    agent = Gate(policy(), tmp_path / "l")  # denies big_change above 1000
    older = Policy.from_text(POLICY_TEXT.replace("args.amount > 1000", "args.amount > 1000000"), "older.policy")
    reviewer = Gate(older, tmp_path / "l")  # as `countersign review edit --policy older.policy`
    p = agent.propose("big_change", {"amount": 500}, proposer="agent")
    assert agent.policy.evaluate("big_change", {"amount": 50_000}, {}).effect == "deny"
    runs = []
    try:
        reviewer.edit(p.request, editor="sup-1", args={"amount": 50_000}, digest=p.args_digest)
        reviewer.approve(p.request, approver="sup-2", digest=reviewer.get(p.request).digest)
        agent.execute(p.request, runs.append)
    except (Violation, GateError) as exc:
        assert "edit it with that policy" in str(exc)  # refused at the edit, saying why
    assert runs == []


def test_only_the_proposer_or_someone_who_may_decide_cancels_a_call(tmp_path):
    from ledger.workflow.gate import NotAllowedToCancel

    with Gate(policy(), tmp_path / "l") as g:
        p = g.propose("big_change", {"amount": 5}, proposer="agent")  # approvers: 2 from sups
        with pytest.raises(NotAllowedToCancel):
            g.cancel(p.request, by="mallory")  # refused as an approver, so no rejection by another name
        assert g.get(p.request).status == "pending"
        g.cancel(p.request, by="sup-1", reason="not needed")
        q = g.propose("read_thing", {}, proposer="agent")
        with pytest.raises(NotAllowedToCancel):
            g.cancel(q.request, by="bob")  # an allowed call: only its proposer withdraws it
        assert g.cancel(q.request, by="agent").status == "cancelled"
