"""Identity: the roster (ledger.proof.roster), signed decisions (ledger.proof.decisions), and
`ledger verify --roster` (docs/ledger-format.md section 11), including the hostile review's
hand-appended approval."""

from __future__ import annotations

import hashlib
import os
import pwd

import msgspec
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from cli.main import app
from independent_verifier import verify_dir
from ledger import events as ev
from ledger.proof import decisions
from ledger.proof.decisions import Signing
from ledger.proof.keys import generate_key
from ledger.proof.roster import Principal, Roster, RosterError, load_roster, parse_roster, token_hash
from ledger.proof.verify import verify
from ledger.workflow.machine import FormatVersion
from ledger.workflow.gate import Gate
from support import gate as make_gate, policy

ME = pwd.getpwuid(os.geteuid()).pw_name


def roster_text(*entries: tuple[str, str, list[str]]) -> str:
    return "".join(f'[[principal]]\nname = "{n}"\nkind = "{k}"\nkeys = {keys!r}\n\n'.replace("'", '"')
                   for n, k, keys in entries)


# --- the roster ---------------------------------------------------------------------------------


def test_a_roster_lists_principals_by_name_key_group_and_token():
    key = generate_key("alice")
    token = "cst_example"
    roster = parse_roster(f'''
[[principal]]
name = "alice"
kind = "reviewer"
groups = ["sups", "finance"]
token_sha256 = ["{token_hash(token)}"]
keys = ["{key.public.text()}"]

[[principal]]
name = "agent-7"
kind = "agent"
groups = ["sups"]
''', "r.toml")
    assert roster.principal("alice").groups == ("finance", "sups")
    assert roster.key("alice", key.public.id.hex())[0].name == "alice"
    assert roster.key("alice", "00000000") is None
    assert roster.group("sups") == ("agent-7", "alice")
    assert roster.authenticate(token).name == "alice"
    assert roster.authenticate("cst_other") is None
    assert token_hash(token) == hashlib.sha256(token.encode()).hexdigest()


def test_the_digest_depends_on_the_content_not_on_order_or_comments():
    a = 'format = "countersign-roster/1"\n[[principal]]\nname = "a"\nkind = "agent"\ngroups = ["x", "y"]\n[[principal]]\nname = "b"\nkind = "admin"\n'
    b = '# comment\n[[principal]]\nkind = "admin"\nname = "b"\n[[principal]]\nname = "a"\ngroups = ["y", "x"]\nkind = "agent"\n'
    c = a.replace('"admin"', '"reviewer"')
    assert parse_roster(a).digest == parse_roster(b).digest != parse_roster(c).digest


@pytest.mark.parametrize("text, expected", [
    ('[[principal]\nname = "a"', "r.toml:1:"),  # TOML syntax: file:line:column from tomllib
    ('[[principal]]\nname = "a"\nkind = "agent"\n\n[[principal]]\nname = "a"\nkind = "reviewer"\n',
     "r.toml:5: principal 'a' is listed twice"),
    ('[[principal]]\nname = "a"\nkind = "boss"\n', "r.toml:1: principal 'a': `kind` must be one of"),
    ('[[principal]]\nname = "a"\nkind = "agent"\nkeys = ["a+00000000+AAAA"]\n', "principal 'a': the public key"),
    ('[[principal]]\nname = "a"\nkind = "agent"\ntoken_sha256 = ["cst_secret-token"]\n',
     "token_sha256 'cst_secr…' is not 64 lowercase hex digits"),
    ('[[principal]]\nname = "a"\nkind = "agent"\ntoken_sha256 = ["' + "A" * 64 + '"]\n', "not 64 lowercase hex"),
    ('[[principal]]\nname = "a"\nkind = "agent"\ntoken = "x"\n', "unknown entries token"),
    ('[[principal]]\nkind = "agent"\n', "principal number 1 needs a `name`"),
    ('users = 1\n', "unknown top-level entries users"),
])
def test_a_wrong_roster_is_refused_saying_where(text, expected):
    with pytest.raises(RosterError) as caught:
        parse_roster(text, "r.toml")
    assert expected in str(caught.value)


def test_one_key_or_token_cannot_belong_to_two_principals(tmp_path):
    key = generate_key("k").public.text()
    with pytest.raises(RosterError, match="is also 'a''s"):
        parse_roster(roster_text(("a", "reviewer", [key]), ("b", "reviewer", [key])), "r.toml")
    path = tmp_path / "r.toml"
    path.write_bytes(b"\xff")
    with pytest.raises(RosterError, match="not UTF-8"):
        load_roster(path)


# --- the signed statement -------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(approver=_text, comment=st.none() | st.text(max_size=40), request=st.integers(1, 10**12),
       seq=st.integers(2, 10**12), key=st.none() | _text, basis=st.integers(1, 10**6))
def test_the_statement_covers_the_body_as_stored(approver, comment, request, seq, key, basis):
    """CONTENT is the same whether read from the event as signed (no seq, ts, prev) or from its
    stored BODY; the stored signature verifies; any change of a member does not."""
    signing_key = generate_key("reviewer-key")
    event = ev.Approved(ts="2026-03-01T12:00:00.000000Z", request=request, approver=approver, args_digest="a" * 64,
                        comment=comment, key=key if key is not None else msgspec.UNSET)
    signed = decisions.sign(event, signing_key, signer="reviewer", ledger_id="L", basis=basis, args="a" * 64, prev="b" * 64)
    stored = msgspec.structs.replace(signed, seq=seq, prev="b" * 64)
    body = ev.encode_event(stored)
    assert decisions.content(body) == decisions.content(ev.encode_event(event))
    assert ev.decode_event(body) == stored  # the signature member round-trips through the body
    roster = Roster([Principal(approver, "reviewer", keys=(signing_key.public,))])
    args = dict(ledger_id="L", basis=basis, args="a" * 64, proposer="agent", status="pending", roster=roster)
    assert decisions.problem(stored, body, **args) is None
    assert decisions.problem(stored, body, **{**args, "basis": basis + 1}) is not None  # another round of arguments
    assert decisions.problem(stored, body, **{**args, "ledger_id": "M"}) is not None
    moved = msgspec.structs.replace(stored, prev="c" * 64)  # the same decision after another history
    assert decisions.problem(moved, ev.encode_event(moved), **args) is not None
    changed = msgspec.structs.replace(stored, comment=(comment or "") + "!")
    assert decisions.problem(changed, ev.encode_event(changed), **args) is not None


# --- Gate, verify, the independent verifier -------------------------------------------------------


def _pending(tmp_path, roster=None, real_clock=False):
    g = Gate(policy(), tmp_path / "l") if real_clock else make_gate(tmp_path / "l")
    if roster is not None:
        g.record_roster(roster, "ops")
    p = g.propose("small_change", {"id": 7}, proposer="agent-7")
    return g, p


def test_signed_decisions_verify_against_the_roster_and_the_independent_verifier(tmp_path):
    keys = {name: generate_key(name) for name in ("sup-1", "sup-2")}
    path = tmp_path / "r.toml"
    path.write_text(roster_text(*((n, "reviewer", [k.public.text()]) for n, k in keys.items())))
    roster = load_roster(path)
    g, p = _pending(tmp_path, roster)
    g.approve(p.request, approver="sup-1", digest=p.args_digest, signing=Signing(keys["sup-1"]))
    q = g.propose("small_change", {"id": 8}, proposer="agent-7")
    g.reject(q.request, approver="sup-2", reason="no", signing=Signing(keys["sup-2"]))
    g.close()
    assert verify(tmp_path / "l", rosters=[roster]).ok and verify(tmp_path / "l").ok
    assert verify_dir(tmp_path / "l", [path])[0]
    other = tmp_path / "other.toml"
    other.write_text(roster_text(("sup-1", "reviewer", [generate_key("sup-1").public.text()])))
    report = verify(tmp_path / "l", rosters=[load_roster(other)])
    assert report.problem.kind == "signature" and "not among the rosters given" in report.problem.message


def test_a_decision_signed_with_another_principals_key_is_a_problem_at_its_seq(tmp_path):
    keys = {name: generate_key(name) for name in ("sup-1", "sup-2")}
    roster = Roster([Principal(n, "reviewer", keys=(k.public,)) for n, k in keys.items()])
    g, p = _pending(tmp_path)
    state = g.approve(p.request, approver="sup-1", digest=p.args_digest, signing=Signing(keys["sup-2"]))
    g.close()
    report = verify(tmp_path / "l", rosters=[roster])
    assert report.problem.seq == state.seqs[-1] and "signed with sup-2's key" in report.problem.message
    assert not verify_dir(tmp_path / "l", [_write(tmp_path, roster_text(*((n, "reviewer", [k.public.text()]) for n, k in keys.items())))])[0]


def _write(tmp_path, text):
    path = tmp_path / "roster.toml"
    path.write_text(text)
    return path


def test_the_hostile_review_a_hand_appended_approval_fails_verify_with_a_roster(tmp_path):
    """A lawful-looking `approved` line appended by hand (correct seq, prev and hash; no
    signature, or a forged one) passes plain verify, and fails `verify --roster` at its seq."""
    key = generate_key("sup-1")
    rpath = _write(tmp_path, roster_text(("sup-1", "reviewer", [key.public.text()])))
    g, p = _pending(tmp_path, load_roster(rpath))
    g.close()
    segment = tmp_path / "l" / "events-00000001.jsonl"
    original = segment.read_bytes()
    last = msgspec.json.decode(original.splitlines()[-1])
    prev_seq, prev_hash, prev_ts = last["body"]["seq"], last["hash"], last["body"]["ts"]
    forged_sig = ev.Signature(signer="reviewer", key="sup-1", key_id=key.public.id.hex(), time=prev_ts, sig="A" * 86 + "==")
    for signature in (msgspec.UNSET, forged_sig):
        event = ev.Approved(seq=prev_seq + 1, ts=prev_ts, prev=prev_hash, request=p.request, approver="sup-1",
                            args_digest=p.args_digest, comment=None, signature=signature)
        body = ev.encode_event(event)
        line = b'{"body":' + body + b',"hash":"' + hashlib.sha256(body).hexdigest().encode() + b'","data":null}\n'
        segment.write_bytes(original + line)
        assert verify(tmp_path / "l").ok and verify_dir(tmp_path / "l")[0]
        report = verify(tmp_path / "l", rosters=[load_roster(rpath)])
        assert report.problem is not None and report.problem.seq == prev_seq + 1 and report.problem.kind == "signature"
        assert ("not signed" if signature is msgspec.UNSET else "does not verify") in report.problem.message
        assert verify_dir(tmp_path / "l", [rpath])[3] == prev_seq + 1


def test_a_version_1_ledger_takes_no_signature(tmp_path, monkeypatch):
    import ledger.store.log as log

    monkeypatch.setattr(log, "FORMAT", ev.FORMAT_V1)
    g, p = _pending(tmp_path)
    monkeypatch.undo()
    with pytest.raises(FormatVersion):
        g.approve(p.request, approver="sup-1", digest=p.args_digest, signing=Signing(generate_key("sup-1")))
    g.approve(p.request, approver="sup-1", digest=p.args_digest)  # unsigned, as version 1 ever was
    g.close()
    assert verify(tmp_path / "l").ok and verify_dir(tmp_path / "l")[0]


# --- the command line -----------------------------------------------------------------------------


def test_keygen_roster_review_approve_with_a_key_then_verify_with_the_roster(tmp_path):
    runner = CliRunner()
    g, p = _pending(tmp_path, real_clock=True)  # the command line decides on the real clock
    g.close()
    ledger = str(tmp_path / "l")
    assert runner.invoke(app, ["ledger", "keygen", "--out", str(tmp_path / "me"), "--name", ME]).exit_code == 0
    made = runner.invoke(app, ["roster", "token", ME])
    assert made.exit_code == 0
    token_line = [line.strip() for line in made.output.splitlines() if line.strip().startswith("token_sha256")][0]
    rpath = tmp_path / "roster.toml"
    rpath.write_text(f'[[principal]]\nname = "{ME}"\nkind = "reviewer"\n{token_line}\n'
                     f'keys = ["{(tmp_path / "me.pub").read_text().strip()}"]\n')
    checked = runner.invoke(app, ["roster", "check", str(rpath)])
    assert checked.exit_code == 0 and load_roster(rpath).digest in checked.output
    approved = runner.invoke(app, ["review", "approve", str(p.request), "--digest", p.args_digest, "--ledger", ledger,
                                   "--key", str(tmp_path / "me.key"), "--roster", str(rpath)])
    assert approved.exit_code == 0, approved.output
    ok = runner.invoke(app, ["ledger", "verify", ledger, "--roster", str(rpath)])
    assert ok.exit_code == 0 and "signed" in ok.output, ok.output
    assert verify_dir(ledger, [rpath])[0]
    # tamper: the comment of the signed approval changed, every hash after it recomputed
    segment = tmp_path / "l" / "events-00000001.jsonl"
    lines = segment.read_bytes().splitlines()
    seq, prev = None, None
    out = []
    for raw in lines:
        line = msgspec.json.decode(raw)
        body = line["body"]
        if body["kind"] == "approved":
            body["comment"], seq = "changed", body["seq"]
        if prev is not None:
            body["prev"] = prev
        encoded = ev.encode_event(ev.decode_event(msgspec.json.encode(body)))
        prev = hashlib.sha256(encoded).hexdigest()
        data = msgspec.json.encode(line["data"])
        out.append(b'{"body":' + encoded + b',"hash":"' + prev.encode() + b'","data":' + data + b"}")
    segment.write_bytes(b"\n".join(out) + b"\n")
    assert runner.invoke(app, ["ledger", "verify", ledger]).exit_code == 0
    failed = runner.invoke(app, ["ledger", "verify", ledger, "--roster", str(rpath)])
    assert failed.exit_code == 1 and f"FAILED at seq {seq}: signature" in failed.output, failed.output


def test_the_documented_example_of_a_signed_approval():
    """docs/ledger-format.md 11.4: the statement and the signature, byte for byte."""
    from pathlib import Path

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.proof.keys import SigningKey

    doc = (Path(__file__).resolve().parent.parent / "docs" / "ledger-format.md").read_text()
    key = SigningKey("sup-1", Ed25519PrivateKey.from_private_bytes(bytes(32)))
    assert key.public.text() in doc
    event = ev.Approved(ts="2026-01-01T00:00:00.000000Z", request=2, approver="sup-1", args_digest="adfe8981009c9a1337abc841aa8b8bafd716d945cf8925ed4989c7b9068b57ae", comment=None)
    signed = decisions.sign(event, key, signer="reviewer", ledger_id="0123456789abcdef0123456789abcdef", basis=2, args=event.args_digest,
                            prev="c" * 64)
    body = ev.encode_event(msgspec.structs.replace(signed, seq=4, prev="c" * 64))
    shown = body.decode().replace('"prev":"' + "c" * 64 + '"', '"prev":"…"')
    assert "    " + shown + "\n" in doc
    assert "    " + decisions.content(body).decode() + "\n" in doc
    assert hashlib.sha256(decisions.content(body)).hexdigest() in doc


# --- adopting signing, and the command line's refusals -------------------------------------------


def test_a_gate_knows_the_roster_in_force_from_its_snapshot_and_records_it_once(tmp_path):
    roster = Roster([Principal("sup-1", "reviewer", keys=(generate_key("sup-1").public,))])
    other = Roster([Principal("sup-2", "reviewer", keys=(generate_key("sup-2").public,))])
    g, _p = _pending(tmp_path, roster)
    g.close()
    for _ in range(2):  # opened from the snapshot: the roster is known without reading the ledger again
        with make_gate(tmp_path / "l") as again:
            assert again.workflow.roster == roster.digest
            again.record_roster(roster, "ops")
    with make_gate(tmp_path / "l") as again:
        again.record_roster(other, "ops")
        assert again.workflow.roster == other.digest
    assert _kinds(tmp_path / "l").count("roster") == 2


def _kinds(ledger) -> list[str]:
    return [msgspec.json.decode(line)["body"]["kind"] for seg in sorted(ledger.glob("events-*.jsonl"))
            for line in seg.read_bytes().splitlines()]


def test_verify_checks_decisions_from_the_seq_signing_began(tmp_path):
    key = generate_key("sup-1")
    roster = Roster([Principal("sup-1", "reviewer", keys=(key.public,))])
    g, p = _pending(tmp_path)
    g.approve(p.request, approver="sup-1", digest=p.args_digest)  # before signing began
    g.record_roster(roster, "ops")
    began = g.ledger.head[0] + 1
    q = g.propose("small_change", {"id": 8}, proposer="agent-7")
    g.approve(q.request, approver="sup-1", digest=q.args_digest, signing=Signing(key))
    g.close()
    assert verify(tmp_path / "l", rosters=[roster]).problem.seq < began  # everything, by default
    report = verify(tmp_path / "l", rosters=[roster], signed_from=began)
    assert report.ok and report.unchecked_decisions == 1
    runner = CliRunner()
    r = _write(tmp_path, roster_text(("sup-1", "reviewer", [key.public.text()])))
    out = runner.invoke(app, ["ledger", "verify", str(tmp_path / "l"), "--roster", str(r), "--signed-from", str(began)])
    assert out.exit_code == 0 and "1 decision before seq" in out.output and "NOT checked" in out.output, out.output
    assert runner.invoke(app, ["ledger", "verify", str(tmp_path / "l"), "--signed-from", "3"]).exit_code == 2


def test_review_refuses_a_key_the_roster_gives_to_someone_else_and_warns_when_unsigned(tmp_path):
    runner = CliRunner()
    g, p = _pending(tmp_path, real_clock=True)
    g.close()
    ledger = str(tmp_path / "l")
    assert runner.invoke(app, ["ledger", "keygen", "--out", str(tmp_path / "alice"), "--name", "alice"]).exit_code == 0
    assert runner.invoke(app, ["ledger", "keygen", "--out", str(tmp_path / "me"), "--name", ME]).exit_code == 0
    r = _write(tmp_path, roster_text(("alice", "reviewer", [(tmp_path / "alice.pub").read_text().strip()]),
                                     (ME, "reviewer", [(tmp_path / "me.pub").read_text().strip()])))
    base = ["review", "approve", str(p.request), "--digest", p.args_digest, "--ledger", ledger, "--roster", str(r)]
    refused = runner.invoke(app, base + ["--key", str(tmp_path / "alice.key")])
    assert refused.exit_code == 2 and "gives this key to alice" in refused.output, refused.output
    assert "approved" not in _kinds(tmp_path / "l") and "roster" not in _kinds(tmp_path / "l")  # nothing written
    stranger = generate_key("stranger")
    from ledger.proof.keys import write_keypair
    write_keypair(tmp_path / "stranger", stranger)
    unknown = runner.invoke(app, base + ["--key", str(tmp_path / "stranger.key")])
    assert unknown.exit_code == 2 and "to no one" in unknown.output, unknown.output
    q = Gate(policy(), ledger)
    second = q.propose("small_change", {"id": 9}, proposer="agent-7")
    q.close()
    unsigned = runner.invoke(app, ["review", "approve", str(second.request), "--digest", second.args_digest, "--ledger", ledger])
    assert unsigned.exit_code == 0 and "not signed" not in unsigned.output  # no roster recorded yet: no warning
    assert runner.invoke(app, base + ["--key", str(tmp_path / "me.key")]).exit_code == 0
    q = Gate(policy(), ledger)
    third = q.propose("small_change", {"id": 10}, proposer="agent-7")
    q.close()
    warned = runner.invoke(app, ["review", "approve", str(third.request), "--digest", third.args_digest, "--ledger", ledger])
    assert warned.exit_code == 0 and "this decision is not signed" in warned.output, warned.output


def test_roster_events_follow_the_order_the_rosters_are_given_in_and_one_used_again_is_given_again(tmp_path):
    keys = {name: generate_key(name) for name in ("sup-1", "sup-2")}
    paths = [_write_named(tmp_path, "r1.toml", roster_text(("sup-1", "reviewer", [keys["sup-1"].public.text()]))),
             _write_named(tmp_path, "r2.toml", roster_text(("sup-2", "reviewer", [keys["sup-2"].public.text()])))]
    r1, r2 = (load_roster(p) for p in paths)
    g = make_gate(tmp_path / "l")
    for roster, who in ((r1, "sup-1"), (r2, "sup-2"), (r1, "sup-1")):  # r1, then r2, then back to r1 on purpose
        g.record_roster(roster, "ops")
        p = g.propose("small_change", {"who": who}, proposer="agent-7")
        g.approve(p.request, approver=who, digest=p.args_digest, signing=Signing(keys[who]))
    g.close()
    assert verify(tmp_path / "l", rosters=[r1, r2, r1]).ok
    assert verify_dir(tmp_path / "l", [paths[0], paths[1], paths[0]])[0]
    back = verify(tmp_path / "l", rosters=[r1, r2])  # the return to r1 is not in the order given
    assert back.problem.kind == "signature" and "comes before the roster in force" in back.problem.message
    assert not verify_dir(tmp_path / "l", paths)[0]
    assert verify(tmp_path / "l", rosters=[r2, r1]).problem is not None  # r2's decision before r2 was recorded


def _write_named(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path
