"""A fifth hostile review: signed decisions and the roster (docs/ledger-format.md section 11).
Each finding is xfail (strict) until fixed: the test asserts the behaviour the docs promise."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil

import msgspec
import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl.requirements import Requirements
from ledger import events as ev
from ledger.proof.decisions import Signing
from ledger.proof.keys import generate_key
from ledger.proof.roster import Principal, Roster
from ledger.proof.verify import verify
from ledger.workflow.gate import Gate
from support import gate as make_gate, policy

ME = pwd.getpwuid(os.geteuid()).pw_name


def test_a_revoked_key_cannot_come_back_through_a_roster_event_naming_an_unknown_roster(tmp_path):
    """r1 lists mallory's key, r2 (the roster now in force) removed it. Whoever can write the
    files appends `roster` events naming some other digest and then r1 again, and an approval
    signed with mallory's revoked key. Section 11.3: a roster event naming a roster given only
    before the one in force is a problem; Signatures._recorded restarts the search at index 0
    after a digest it does not know, so the return to r1 is accepted."""
    keys = {n: generate_key(n) for n in ("sup-1", "mallory")}
    r1 = Roster([Principal(n, "reviewer", keys=(k.public,)) for n, k in keys.items()], "r1")
    r2 = Roster([Principal("sup-1", "reviewer", keys=(keys["sup-1"].public,))], "r2")
    g = make_gate(tmp_path / "l")
    g.record_roster(r1, "ops")
    p = g.propose("small_change", {"id": 1}, proposer="agent-7")
    g.approve(p.request, approver="sup-1", digest=p.args_digest, signing=Signing(keys["sup-1"]))
    g.record_roster(r2, "ops")
    q = g.propose("small_change", {"id": 2}, proposer="agent-7")
    assert verify(tmp_path / "l", rosters=[r1, r2]).ok
    g.record_roster(Roster([Principal("x", "admin")], "unknown"), "mallory")  # a digest no auditor gives
    g.record_roster(r1, "mallory")  # back to the roster that still lists mallory's key
    g.approve(q.request, approver="mallory", digest=q.args_digest, signing=Signing(keys["mallory"]))
    g.close()
    report = verify(tmp_path / "l", rosters=[r1, r2])
    assert not report.ok and report.problem.kind == "signature"


def _rechain(directory, modify) -> None:
    """Rewrite every line of a one-segment ledger through `modify(event)`, fixing prev and hash:
    what anyone who can write the files can do (signatures leave seq, ts and prev out)."""
    (segment,) = sorted(directory.glob("events-*.jsonl"))
    out, prev = [], ev.GENESIS_PREV
    for raw in segment.read_bytes().splitlines():
        body = raw[len(b'{"body":'):raw.index(b',"hash":"')]
        event = msgspec.structs.replace(modify(msgspec.json.decode(body, type=ev.AnyEvent)), prev=prev)
        new = ev.encode_event(event)
        prev = hashlib.sha256(new).hexdigest()
        out.append(b'{"body":' + new + b',"hash":"' + prev.encode() + b'","data":' + raw[raw.index(b',"data":') + 8:-1] + b"}\n")
    segment.write_bytes(b"".join(out))
    shutil.rmtree(directory / "cache", ignore_errors=True)


def test_one_signed_approval_cannot_be_moved_to_another_tool_with_lower_requirements(tmp_path):
    """big_change needs 2 of sups; sup-1 approves {"amount": 10} (signed), the request still
    waits for a second. Rewriting the proposal's tool to drop_thing (a tool the policy denies) and
    the interrupt's requirements to one approver of any name, re-chained, leaves sup-1's
    signature valid (same ledger id, request, basis seq, args digest, content): the ledger
    verifies with the roster and the request reads as approved."""
    keys = {n: generate_key(n) for n in ("sup-1", "sup-2")}
    roster = Roster([Principal(n, "reviewer", keys=(k.public,)) for n, k in keys.items()], "r")
    g = make_gate(tmp_path / "l")
    g.record_roster(roster, "ops")
    p = g.propose("big_change", {"amount": 10}, proposer="agent-7")
    assert g.approve(p.request, approver="sup-1", digest=p.args_digest, signing=Signing(keys["sup-1"])).status == "pending"
    g.close()

    def forge(event):
        if isinstance(event, ev.Proposed):
            return msgspec.structs.replace(event, tool="drop_thing")
        if isinstance(event, ev.Interrupted):
            return msgspec.structs.replace(event, requirements=Requirements())
        return event

    _rechain(tmp_path / "l", forge)
    with make_gate(tmp_path / "l") as again:
        assert again.workflow.get(p.request).status == "approved"  # the forgery's effect
    assert not verify(tmp_path / "l", rosters=[roster]).ok


def test_review_with_a_roster_and_no_key_refuses_or_warns(tmp_path):
    """`review approve --roster R` with no --key: it records R (the ledger now signs its
    decisions) and then writes an unsigned approval, which `ledger verify --roster R` reports,
    without the warning the README promises for an unsigned decision on a ledger with a roster."""
    key = generate_key(ME)
    rpath = tmp_path / "r.toml"
    rpath.write_text(f'[[principal]]\nname = "{ME}"\nkind = "reviewer"\nkeys = ["{key.public.text()}"]\n')
    with Gate(policy(), tmp_path / "l") as g:  # the real clock, as the command's Gate has
        p = g.propose("small_change", {"id": 1}, proposer="agent-7")
    result = CliRunner().invoke(app, ["review", "approve", str(p.request), "--digest", p.args_digest,
                                      "--ledger", str(tmp_path / "l"), "--roster", str(rpath)])
    approved = [line for line in (tmp_path / "l" / "events-00000001.jsonl").read_bytes().splitlines()
                if b'"kind":"approved"' in line]
    assert "not signed" in result.output or not approved, result.output
