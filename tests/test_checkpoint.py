"""ledger.proof.checkpoint: keys, signed checkpoints, verification against a checkpoint (full and
incremental), inclusion proof files, and the writer's refusal to extend a rolled-back ledger."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger import events as ev
from ledger.proof import merkle
from ledger.proof.checkpoint import (
    CHECKPOINTS_DIR,
    Checkpoint,
    CheckpointConflict,
    MalformedError,
    PublicKey,
    VerificationError,
    generate_key,
    ledger_tail,
    load_public_key,
    load_signing_key,
    make_checkpoint,
    make_proof,
    parse_checkpoint,
    parse_proof,
    refuse_if_behind_checkpoint,
    save_checkpoint,
    sign_checkpoint,
    verify_against_checkpoint,
    verify_checkpoint,
    verify_proof,
    write_keypair,
)
from ledger.digest import value_digest
from ledger.store.lines import compose, split
from ledger.store.log import Ledger, list_segments
from ledger.proof.verify import verify
from ledger_factory import Forge, rechain
from support import build_mixed_ledger, gate

CLOCK = lambda: datetime(2026, 3, 2, 8, 30, 0, 123456, tzinfo=timezone.utc)  # noqa: E731


# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def key():
    return generate_key("countersign.example/test-signer")


@pytest.fixture(scope="module")
def other_key():
    return generate_key("countersign.example/test-signer")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A mixed ledger (every kind of step), built once; tests copy it."""
    path = tmp_path_factory.mktemp("built") / "l"
    g, _ = build_mixed_ledger(path)
    g.close()
    return path


@pytest.fixture
def ledger(built, tmp_path):
    path = tmp_path / "l"
    shutil.copytree(built, path)
    return path


def lines_of(path: Path) -> list[bytes]:
    return [line for seg in list_segments(path) for line in seg.read_bytes().splitlines(keepends=True)]


def rewrite(path: Path, lines: list[bytes]) -> None:
    for seg in list_segments(path):
        seg.unlink()
    (path / "events-00000001.jsonl").write_bytes(b"".join(lines))


def grow(path: Path, n: int = 2, base: int = 100) -> None:
    """Append n lawful allowed-and-executed calls through the Gate (three events each)."""
    g = gate(path)
    for i in range(n):
        p = g.propose("read_thing", {"id": base + i}, proposer="agent", run="grow")
        g.execute(p.request, lambda args: {"ok": True})
    g.close()


def checkpoint(path: Path, key) -> tuple[Checkpoint, bytes]:
    cp, note = make_checkpoint(path, key, clock=CLOCK)
    save_checkpoint(path, cp, note)
    return cp, note


def check(path: Path, cp: Checkpoint, **kw):
    report, result = verify_against_checkpoint(path, cp, **kw)
    return report, result


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162's MTH, written out recursively here, independently of ledger.proof.merkle."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def rewrite_with_recomputed_hashes(path: Path, index: int, change) -> None:
    """A careful forger: change the body of line `index` (0-based), then recompute every hash and
    prev after it, re-encoding bodies with ledger.events.encode_event and ledger.store.lines.compose."""
    lines = lines_of(path)
    body, _, data = split(lines[index])
    event = change(ev.decode_event(body))
    lines[index] = compose(ev.encode_event(event), data)[1]
    rewrite(path, rechain(lines, index))


# --- keys -----------------------------------------------------------------------------------------


def test_keygen_writes_an_owner_only_pem_private_key_and_a_signed_note_verifier_key(tmp_path, key):
    key_path, pub_path = write_keypair(tmp_path / "k", key)
    assert key_path == tmp_path / "k.key" and pub_path == tmp_path / "k.pub"
    assert os.stat(key_path).st_mode & 0o777 == 0o600
    text = key_path.read_bytes()
    assert text.startswith(b"Key-Name: countersign.example/test-signer\n-----BEGIN PRIVATE KEY-----\n")
    loaded = load_signing_key(key_path)
    assert loaded.name == key.name and loaded.public == key.public
    pub = load_public_key(pub_path)
    assert pub == key.public
    name, kid, data = pub_path.read_text().rstrip("\n").split("+", 2)
    raw = base64.b64decode(data)
    assert name == key.name and raw[0] == 1 and raw[1:] == key.public.key
    assert kid == hashlib.sha256(name.encode() + b"\n\x01" + raw[1:]).digest()[:4].hex()


def test_keygen_refuses_to_overwrite_an_existing_key(tmp_path, key):
    write_keypair(tmp_path / "k", key)
    with pytest.raises(MalformedError, match="already exists"):
        write_keypair(tmp_path / "k", generate_key())
    assert load_signing_key(tmp_path / "k.key").public == key.public


def test_a_private_key_that_others_can_read_is_refused(tmp_path, key):
    key_path, _ = write_keypair(tmp_path / "k", key)
    os.chmod(key_path, 0o644)
    with pytest.raises(MalformedError, match="chmod 600"):
        load_signing_key(key_path)


def test_a_plain_pem_ed25519_key_gets_the_default_key_name(tmp_path):
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path = tmp_path / "plain.key"
    path.write_bytes(pem)
    os.chmod(path, 0o600)
    assert load_signing_key(path).name == "countersign.example/signer"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.replace("+", "-", 1),  # no separator
        lambda t: t.split("+")[0] + "+00000000+" + t.split("+", 2)[2],  # wrong key id
        lambda t: "x y" + t[t.index("+") :],  # a space in the name
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # another key: the id no longer matches
        lambda t: t[:-4] + "AAA=",  # 32 bytes instead of 33
        lambda t: t.split("+", 2)[0] + "+" + t.split("+", 2)[1] + "+" + base64.b64encode(b"\x02" + bytes(32)).decode(),
    ],
)
def test_a_malformed_or_inconsistent_public_key_is_rejected(key, mutate):
    with pytest.raises(MalformedError):
        PublicKey.parse(mutate(key.public.text()))


# --- the checkpoint note ---------------------------------------------------------------------------


def test_a_checkpoint_is_a_c2sp_checkpoint_in_a_signed_note(ledger, key):
    cp, note = make_checkpoint(ledger, key, clock=CLOCK)
    text = note.decode()
    body, sigs = text.split("\n\n")
    leaves = [bytes.fromhex(split(line)[1]) for line in lines_of(ledger)]
    genesis = ev.decode_event(split(lines_of(ledger)[0])[0])
    assert body.split("\n") == [
        f"countersign.example/ledger/{genesis.ledger_id}",
        str(len(leaves)),
        base64.b64encode(mth(leaves)).decode(),
        f"head {leaves[-1].hex()}",
        "time 2026-03-02T08:30:00.123456Z",
    ]
    assert sigs.endswith("\n") and sigs.count("\n") == 1
    dash, name, sig = sigs.rstrip("\n").split(" ")
    assert dash == "\u2014" and name == key.name
    raw = base64.b64decode(sig)
    assert raw[:4] == key.public.id and len(raw) == 68
    # The signature is plain Ed25519 over the note text, final newline included.
    Ed25519PublicKey.from_public_bytes(key.public.key).verify(raw[4:], (body + "\n").encode())


def test_a_checkpoint_verifies_with_its_public_key(ledger, key):
    cp, note = make_checkpoint(ledger, key, clock=CLOCK)
    assert verify_checkpoint(note, key.public) == cp


def test_a_checkpoint_signed_by_another_key_of_the_same_name_is_rejected(ledger, key, other_key):
    _, note = make_checkpoint(ledger, other_key, clock=CLOCK)
    with pytest.raises(VerificationError, match="not signed by"):
        verify_checkpoint(note, key.public)


def test_a_signature_line_that_claims_the_key_but_does_not_verify_is_rejected(ledger, key, other_key):
    cp, note = make_checkpoint(ledger, key, clock=CLOCK)
    forged = other_key.sign(cp.body())
    bad = note + f"\u2014 {key.name} {base64.b64encode(key.public.id + forged).decode()}\n".encode()
    with pytest.raises(VerificationError, match="does not verify"):
        verify_checkpoint(bad, key.public)


def test_signatures_by_unknown_keys_are_ignored(ledger, key):
    cp, note = make_checkpoint(ledger, key, clock=CLOCK)
    witness = generate_key("witness.example/w1")
    extra = f"\u2014 {witness.name} {base64.b64encode(witness.public.id + witness.sign(cp.body())).decode()}\n"
    assert verify_checkpoint(note + extra.encode(), key.public) == cp


@pytest.mark.parametrize("line", [0, 1, 2, 3, 4])
def test_editing_any_field_of_a_checkpoint_breaks_its_signature(ledger, key, line):
    cp, note = make_checkpoint(ledger, key, clock=CLOCK)
    body, sigs = note.decode().split("\n\n")
    fields = body.split("\n")
    edits = {
        0: "countersign.example/ledger/someone-else",
        1: str(cp.size - 1),
        2: base64.b64encode(bytes(32)).decode(),
        3: "head " + "0" * 64,
        4: "time 2026-03-02T08:30:00.123457Z",
    }
    fields[line] = edits[line]
    edited = ("\n".join(fields) + "\n\n" + sigs).encode()
    parse_checkpoint(edited)  # still well formed
    with pytest.raises(VerificationError, match="does not verify"):
        verify_checkpoint(edited, key.public)


def test_a_flipped_bit_in_the_signature_is_rejected(ledger, key):
    _, note = make_checkpoint(ledger, key, clock=CLOCK)
    body, sigs = note.decode().split("\n\n")
    dash, name, sig = sigs.rstrip("\n").split(" ")
    raw = bytearray(base64.b64decode(sig))
    raw[10] ^= 1
    edited = f"{body}\n\n{dash} {name} {base64.b64encode(bytes(raw)).decode()}\n".encode()
    with pytest.raises(VerificationError):
        verify_checkpoint(edited, key.public)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda n: n.replace(b"\n\n", b"\n"), "no blank line|lines"),
        (lambda n: n[:-1], "does not end with a newline"),
        (lambda n: n.replace(b"\n", b"\r\n"), "control character"),
        (lambda n: n.replace(b"\xe2\x80\x94 ", b"-- "), "em dash"),
        (lambda n: n.split(b"\n\n")[0] + b"\n\n", "no signature"),
        (lambda n: n.replace(b"\ntime ", b"\nextra line\ntime "), "exactly 5"),
        (lambda n: n.replace(b"\nhead ", b"\nHEAD "), "head"),
        (lambda n: n.replace(b"\ntime 2026-03-02T08:30:00.123456Z", b"\ntime 2026-03-02 08:30:00Z"), "time"),
        (lambda n: n.replace(b"\ntime 2026-03-02T08:30:00.123456Z", b"\ntime 2026-02-30T08:30:00.123456Z"), "time"),
        (lambda n: n.replace(b"countersign.example/ledger/", b"example.com/log/"), "origin"),
        (lambda n: n.replace(b"=\nhead", b"\nhead"), "base64"),
        (lambda n: b"\xff" + n, "UTF-8"),
    ],
)
def test_a_malformed_checkpoint_is_rejected_as_malformed(ledger, key, mutate, match):
    _, note = make_checkpoint(ledger, key, clock=CLOCK)
    bad = mutate(note)
    if bad == note:
        return
    with pytest.raises(MalformedError, match=match):
        verify_checkpoint(bad, key.public)


def test_a_tree_size_with_a_leading_zero_is_malformed(ledger, key):
    cp, _ = make_checkpoint(ledger, key, clock=CLOCK)
    body = cp.body().replace(f"\n{cp.size}\n".encode(), f"\n0{cp.size}\n".encode())
    note = body + b"\n" + f"\u2014 {key.name} {base64.b64encode(key.public.id + key.sign(body)).decode()}\n".encode()
    with pytest.raises(MalformedError, match="leading zeros"):
        verify_checkpoint(note, key.public)


# --- verifying a ledger against a checkpoint ------------------------------------------------------


def test_an_intact_ledger_verifies_against_its_checkpoint_before_and_after_it_grows(ledger, key):
    cp, note = checkpoint(ledger, key)
    report, result = check(ledger, cp)
    assert report.ok and result.size == cp.size and result.proof == []
    grow(ledger, 3)
    report, result = check(ledger, cp)
    assert report.ok, report.problem
    assert result.size == cp.size + 9 and result.proof
    leaves = [bytes.fromhex(split(line)[1]) for line in lines_of(ledger)]
    assert result.root == mth(leaves)
    merkle.verify_consistency(cp.size, result.size, cp.root, result.root, result.proof)


def test_a_full_rewrite_with_recomputed_hashes_passes_plain_verify_but_not_the_checkpoint(ledger, key):
    cp, _ = checkpoint(ledger, key)
    grow(ledger, 1)
    index = next(i for i, line in enumerate(lines_of(ledger)) if b'"kind":"approved"' in line)
    rewrite_with_recomputed_hashes(ledger, index, lambda e: msgspec.structs.replace(e, comment="forged"))
    assert verify(ledger).ok  # the chain alone cannot tell
    report, _ = check(ledger, cp)
    assert not report.ok and report.problem.kind == "checkpoint"
    assert "does not extend the checkpoint" in report.problem.message
    report, _ = check(ledger, cp, incremental=True)
    assert not report.ok and report.problem.kind == "checkpoint"


def test_a_rewrite_of_only_events_after_the_checkpoint_is_not_a_checkpoint_failure(ledger, key):
    cp, _ = checkpoint(ledger, key)
    grow(ledger, 1)
    rewrite_with_recomputed_hashes(ledger, cp.size, lambda e: msgspec.structs.replace(e, run="other"))
    report, _ = check(ledger, cp)
    assert report.ok  # only a later checkpoint covers these events


def test_truncation_below_the_checkpoint_is_detected(ledger, key):
    cp, _ = checkpoint(ledger, key)
    rewrite(ledger, lines_of(ledger)[:-2])
    assert verify(ledger).ok
    report, _ = check(ledger, cp)
    assert not report.ok and report.problem.kind == "checkpoint"
    assert f"has {cp.size - 2} events but the checkpoint covers {cp.size}" in report.problem.message


def test_rollback_to_an_older_copy_is_detected_even_once_it_grows_past_the_checkpoint(ledger, key, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(ledger, old)
    grow(ledger, 2)
    cp, _ = checkpoint(ledger, key)
    shutil.rmtree(ledger)
    shutil.copytree(old, ledger)  # the older copy: shorter
    report, _ = check(ledger, cp)
    assert not report.ok and "truncated or rolled back" in report.problem.message
    grow(ledger, 3, base=500)  # the older copy, extended differently: a fork
    assert verify(ledger).ok
    report, _ = check(ledger, cp)
    assert not report.ok and report.problem.kind == "checkpoint"


def test_a_checkpoint_of_another_ledger_is_rejected(ledger, key, tmp_path):
    other = tmp_path / "other"
    g, _ = build_mixed_ledger(other)
    g.close()
    cp, _ = make_checkpoint(other, key, clock=CLOCK)
    report, _ = check(ledger, cp)
    assert not report.ok and report.problem.kind == "checkpoint"


def test_a_checkpoint_whose_head_is_not_the_event_at_its_size_is_rejected(ledger, key):
    cp, _ = make_checkpoint(ledger, key, clock=CLOCK)
    wrong = Checkpoint(cp.ledger_id, cp.size, cp.root, "0" * 64, cp.time)
    report, _ = check(ledger, wrong)
    assert not report.ok and "head" in report.problem.message


def test_plain_verify_problems_come_first(ledger, key):
    cp, _ = checkpoint(ledger, key)
    lines = lines_of(ledger)
    assert b'"run":"r1"' in lines[1]
    lines[1] = lines[1].replace(b'"run":"r1"', b'"run":"r9"')
    rewrite(ledger, lines)
    for incremental in (False, True):
        report, _ = check(ledger, cp, incremental=incremental)
        assert not report.ok and report.problem.seq == 2 and report.problem.kind == "chain"


# --- incremental verification -----------------------------------------------------------------------


def test_incremental_and_full_verification_agree_on_an_intact_ledger(ledger, key):
    cp, _ = checkpoint(ledger, key)
    grow(ledger, 2)
    full, a = check(ledger, cp)
    inc, b = check(ledger, cp, incremental=True)
    assert full.ok and inc.ok
    assert (full.count, full.head, full.statuses) == (inc.count, inc.head, inc.statuses)
    assert (a.size, a.root, a.proof) == (b.size, b.root, b.proof)
    assert any(w.startswith("incremental:") for w in inc.warnings)


def test_incremental_verification_checks_everything_after_the_checkpoint(ledger, key):
    cp, _ = checkpoint(ledger, key)
    grow(ledger, 1)
    lines = lines_of(ledger)
    proposal = cp.size  # the first event after the checkpoint is a proposal with data
    assert b'"kind":"proposed"' in lines[proposal]
    lines[proposal] = lines[proposal].replace(b'"id":100', b'"id":101')
    rewrite(ledger, lines)
    report, _ = check(ledger, cp, incremental=True)
    assert not report.ok and report.problem.kind == "data" and report.problem.seq == cp.size + 1


def test_incremental_verification_does_not_check_data_before_the_checkpoint(ledger, key):
    """Documented: DATA is outside the hashed bytes; only a full verify checks it before the
    checkpoint."""
    cp, _ = checkpoint(ledger, key)
    lines = lines_of(ledger)
    index = next(i for i, line in enumerate(lines) if b'"id":1}' in line)
    lines[index] = lines[index].replace(b'"id":1}', b'"id":7}')
    rewrite(ledger, lines)
    assert check(ledger, cp, incremental=True)[0].ok
    report, _ = check(ledger, cp)
    assert not report.ok and report.problem.kind == "data"


def test_incremental_verification_rehashes_the_bodies_it_replays(ledger, key):
    """An edited body before the checkpoint, keeping its stored hash, could make a later unlawful
    event look lawful in the replay; the prefix's bodies are hashed, so it is caught."""
    cp, _ = checkpoint(ledger, key)
    lines = lines_of(ledger)
    index = next(i for i, line in enumerate(lines) if b'"kind":"rejected"' in line)
    lines[index] = lines[index].replace(b'"approver":"bob"', b'"approver":"bab"')
    rewrite(ledger, lines)
    report, _ = check(ledger, cp, incremental=True)
    assert not report.ok and report.problem.kind == "chain" and report.problem.seq == index + 1


def test_incremental_verification_replays_the_workflow_state_of_the_prefix(tmp_path, key):
    path = tmp_path / "l"
    with Forge(path) as f:
        r, digest = f.ask()
        f.reject(r, "sup-1")
    cp, _ = checkpoint(path, key)
    with Forge(path) as f:
        bad = f.approve(r, "sup-2", digest)  # the request was final before the checkpoint
    report, _ = check(path, cp, incremental=True)
    assert not report.ok and report.problem.kind == "workflow" and report.problem.seq == bad
    assert report.problem.code == "request-final"


# --- the writer's guard ------------------------------------------------------------------------------


def test_the_writer_refuses_to_extend_a_ledger_shorter_than_its_checkpoint(ledger, key):
    checkpoint(ledger, key)
    rewrite(ledger, lines_of(ledger)[:-1])
    before = lines_of(ledger)
    with pytest.raises(CheckpointConflict, match="truncated or rolled back"):
        Ledger(ledger)
    assert lines_of(ledger) == before  # nothing appended


def test_the_writer_refuses_to_recreate_a_deleted_ledger_that_has_a_checkpoint(ledger, key):
    checkpoint(ledger, key)
    for seg in list_segments(ledger):
        seg.unlink()
    with pytest.raises(CheckpointConflict, match="has 0 events"):
        Ledger(ledger)
    assert list_segments(ledger) == []


def test_the_writer_refuses_a_ledger_of_the_checkpoint_size_that_ends_in_another_head(ledger, key):
    checkpoint(ledger, key)
    rewrite_with_recomputed_hashes(ledger, 1, lambda e: msgspec.structs.replace(e, run="forged"))
    with pytest.raises(CheckpointConflict, match="rewritten"):
        Ledger(ledger)


def test_the_writer_refuses_a_checkpoint_of_another_ledger(ledger, key, tmp_path):
    other = tmp_path / "other"
    with Forge(other) as f:
        f.ask()
    cp, note = make_checkpoint(other, key, clock=CLOCK)
    cp2 = Checkpoint(cp.ledger_id, 2, cp.root, cp.head, cp.time)
    save_checkpoint(ledger, cp2, sign_checkpoint(cp2, key))
    with pytest.raises(CheckpointConflict, match="is for ledger"):
        Ledger(ledger)


def test_the_writer_refuses_while_a_checkpoint_file_is_malformed(ledger, key):
    checkpoint(ledger, key)
    (ledger / CHECKPOINTS_DIR / "junk.checkpoint").write_text("not a checkpoint\n")
    with pytest.raises(CheckpointConflict, match="junk.checkpoint"):
        Ledger(ledger)


def test_the_writer_appends_to_a_ledger_that_extends_its_checkpoint(ledger, key):
    cp, _ = checkpoint(ledger, key)
    grow(ledger, 1)  # at the checkpoint's size, same head
    grow(ledger, 1)  # past it
    assert ledger_tail(ledger)[0] == cp.size + 6
    assert check(ledger, cp)[0].ok


def test_a_torn_last_line_does_not_count_toward_the_checkpoint_size(ledger, key):
    cp, _ = checkpoint(ledger, key)
    lines = lines_of(ledger)
    rewrite(ledger, lines[:-1] + [lines[-1][:-5]])  # the last event is now a torn tail
    assert ledger_tail(ledger)[0] == cp.size - 1
    with pytest.raises(CheckpointConflict):
        refuse_if_behind_checkpoint(ledger)


def test_ledger_tail_reads_size_head_and_id_from_the_ends(ledger):
    lines = lines_of(ledger)
    size, head, ledger_id = ledger_tail(ledger)
    assert size == len(lines) and head == split(lines[-1])[1]
    assert ledger_id == ev.decode_event(split(lines[0])[0]).ledger_id


# --- making checkpoints --------------------------------------------------------------------------


def test_checkpoint_refuses_to_sign_a_ledger_that_does_not_verify(ledger, key):
    lines = lines_of(ledger)
    lines[5] = lines[5].replace(b'"agent"', b'"agenT"')
    rewrite(ledger, lines)
    with pytest.raises(VerificationError, match="does not verify"):
        make_checkpoint(ledger, key)


def test_checkpoint_refuses_to_sign_a_ledger_that_contradicts_an_earlier_checkpoint(ledger, key):
    checkpoint(ledger, key)
    rewrite_with_recomputed_hashes(ledger, 1, lambda e: msgspec.structs.replace(e, run="forged"))
    assert verify(ledger).ok
    with pytest.raises(VerificationError, match="does not extend"):
        make_checkpoint(ledger, key)


def test_checkpoints_are_saved_atomically_under_distinct_names(ledger, key):
    cp, note = make_checkpoint(ledger, key, clock=CLOCK)
    a = save_checkpoint(ledger, cp, note)
    b = save_checkpoint(ledger, cp, note)
    assert a != b and a.read_bytes() == b.read_bytes() == note
    assert sorted(p.name for p in (ledger / CHECKPOINTS_DIR).iterdir()) == sorted([a.name, b.name])
    assert a.name.startswith(f"{cp.size:012d}-20260302T083000123456Z")


# --- inclusion proofs -------------------------------------------------------------------------------


def test_an_inclusion_proof_of_every_event_verifies_with_only_the_proof_checkpoint_and_key(ledger, key, tmp_path):
    cp, note = checkpoint(ledger, key)
    proofs = [make_proof(ledger, seq, cp).encode() for seq in range(1, cp.size + 1)]
    shutil.rmtree(ledger)  # offline: no ledger at all
    for seq, data in enumerate(proofs, start=1):
        proven = verify_proof(data, note, key.public)
        assert proven.record.seq == seq and proven.proof.tree_size == cp.size


def test_a_proof_file_has_the_documented_members_and_paths(ledger, key):
    cp, _ = checkpoint(ledger, key)
    seq = 4
    data = json.loads(make_proof(ledger, seq, cp).encode())
    assert list(data) == ["format", "ledger_id", "seq", "tree_size", "line", "inclusion", "head_inclusion"]
    leaves = [merkle.leaf_hash(bytes.fromhex(split(line)[1])) for line in lines_of(ledger)]
    assert data["format"] == "countersign-proof/1" and data["seq"] == seq and data["tree_size"] == cp.size
    assert data["line"].encode() + b"\n" == lines_of(ledger)[seq - 1]
    assert data["inclusion"] == [h.hex() for h in merkle.inclusion_proof(leaves, seq - 1)]
    assert data["head_inclusion"] == [h.hex() for h in merkle.inclusion_proof(leaves, cp.size - 1)]


def test_a_proof_without_a_checkpoint_is_for_the_ledgers_current_tree(ledger, key):
    grow(ledger, 1)
    proof = make_proof(ledger, 3)
    assert proof.tree_size == len(lines_of(ledger))
    cp, note = make_checkpoint(ledger, key)
    verify_proof(proof.encode(), note, key.public)


def test_a_valid_proof_for_a_different_tree_size_is_rejected(ledger, key):
    cp, note = checkpoint(ledger, key)
    grow(ledger, 1)
    later = make_proof(ledger, 3)  # for the grown tree
    with pytest.raises(VerificationError, match="tree of"):
        verify_proof(later.encode(), note, key.public)
    # ... even with its tree size edited to the checkpoint's
    edited = msgspec.structs.replace(later, tree_size=cp.size)
    with pytest.raises(VerificationError):
        verify_proof(edited.encode(), note, key.public)


def _edit(proof, **changes):
    return msgspec.structs.replace(proof, **changes).encode()


def _flip(hexes, i):
    out = list(hexes)
    out[i] = ("0" if out[i][0] != "0" else "1") + out[i][1:]
    return out


@pytest.mark.parametrize(
    "name",
    [
        "seq - 1", "seq + 1", "seq past the size", "tree size - 1", "tree size + 1", "extra hash", "missing hash",
        "modified hash", "preceding hash", "head path missing", "head path modified", "head path extra",
        "other ledger id", "line from another seq", "edited line, rehashed", "edited data", "swapped paths",
    ],
)
def test_a_proof_with_any_member_changed_is_rejected(ledger, key, name):
    cp, note = checkpoint(ledger, key)
    seq = 6
    proof = make_proof(ledger, seq, cp)
    other = make_proof(ledger, 7, cp)
    line = proof.line.encode()
    assert b'"note":"' in line  # seq 6 proposes small_change with a note
    body, _, data = split(line)
    forged_body = ev.encode_event(msgspec.structs.replace(ev.decode_event(body), ts="2026-03-01T12:00:00.000001Z"))
    edits = {
        "seq - 1": dict(seq=seq - 1),
        "seq + 1": dict(seq=seq + 1),
        "seq past the size": dict(seq=cp.size + 1),
        "tree size - 1": dict(tree_size=cp.size - 1),
        "tree size + 1": dict(tree_size=cp.size + 1),
        "extra hash": dict(inclusion=proof.inclusion + [proof.inclusion[0]]),
        "missing hash": dict(inclusion=proof.inclusion[:-1]),
        "modified hash": dict(inclusion=_flip(proof.inclusion, 0)),
        "preceding hash": dict(inclusion=["0" * 64] + proof.inclusion),
        "head path missing": dict(head_inclusion=proof.head_inclusion[1:]),
        "head path modified": dict(head_inclusion=_flip(proof.head_inclusion, len(proof.head_inclusion) - 1)),
        "head path extra": dict(head_inclusion=proof.head_inclusion + ["0" * 64]),
        "other ledger id": dict(ledger_id="0" * 32),
        "line from another seq": dict(line=other.line),
        "edited line, rehashed": dict(line=compose(forged_body, data)[1][:-1].decode()),
        "edited data": dict(line=line.replace(b'"note":"', b'"note":"x').decode()),
        "swapped paths": dict(inclusion=proof.head_inclusion, head_inclusion=proof.inclusion),
    }
    bad = _edit(proof, **edits[name])
    assert bad != proof.encode()
    with pytest.raises(VerificationError):
        verify_proof(bad, note, key.public)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: {**d, "extra": 1},
        lambda d: {k: v for k, v in d.items() if k != "head_inclusion"},
        lambda d: {**d, "format": "countersign-proof/2"},
        lambda d: {**d, "seq": 0},
        lambda d: {**d, "seq": "6"},
        lambda d: {**d, "inclusion": [h.upper() for h in d["inclusion"]]},
        lambda d: {**d, "inclusion": d["inclusion"] + [""]},
        lambda d: {**d, "redactions": []},  # absent when nothing was redacted (docs/ledger-format.md 10.5)
    ],
)
def test_a_proof_that_is_not_in_its_format_is_malformed(ledger, key, mutate):
    cp, note = checkpoint(ledger, key)
    data = json.loads(make_proof(ledger, 6, cp).encode())
    with pytest.raises(MalformedError):
        verify_proof(json.dumps(mutate(data)).encode(), note, key.public)


def test_a_proof_that_repeats_a_member_is_malformed(ledger, key):
    cp, note = checkpoint(ledger, key)
    text = make_proof(ledger, 6, cp).encode().decode()
    twice = text.replace('"seq": 6,', '"seq": 6, "seq": 6,')
    assert twice != text
    with pytest.raises(MalformedError, match="duplicate key .seq."):
        parse_proof(twice.encode())


def test_a_proof_against_a_checkpoint_signed_by_another_key_is_rejected(ledger, key, other_key):
    cp, _ = checkpoint(ledger, key)
    _, forged_note = make_checkpoint(ledger, other_key, clock=CLOCK)
    with pytest.raises(VerificationError, match="not signed by"):
        verify_proof(make_proof(ledger, 2, cp).encode(), forged_note, key.public)


def test_proving_against_a_checkpoint_the_ledger_does_not_match_is_refused(ledger, key):
    cp, _ = checkpoint(ledger, key)
    rewrite_with_recomputed_hashes(ledger, 1, lambda e: msgspec.structs.replace(e, run="forged"))
    with pytest.raises(VerificationError, match="do not match the checkpoint"):
        make_proof(ledger, 2, cp)


@pytest.mark.parametrize("seq", [0, -1, 10**6])
def test_proving_a_seq_outside_the_tree_is_bad_input(ledger, key, seq):
    cp, _ = checkpoint(ledger, key)
    with pytest.raises(MalformedError, match="is not in a tree"):
        make_proof(ledger, seq, cp)


def test_a_proof_of_the_genesis_checks_its_ledger_id(ledger, key):
    cp, note = checkpoint(ledger, key)
    proof = make_proof(ledger, 1, cp)
    assert verify_proof(proof.encode(), note, key.public).record.event.ledger_id == cp.ledger_id


# --- the documented example (docs/ledger-format.md, 9.7) ----------------------------------------


def test_the_documented_example_checkpoint_verifies_and_its_values_are_recomputed():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ledger-format.md").read_text()
    example = doc[doc.index("### 9.7 Example") :]
    blocks, current = [], []
    for line in example.split("\n"):
        if line.startswith("    ") or (line == "" and current):
            current.append(line[4:])
        elif current:
            blocks.append("\n".join(current).strip("\n"))
            current = []
    vkey, hashes, leaves, note = blocks[0], blocks[1].split(), blocks[2].split(), blocks[3] + "\n"
    key = PublicKey.parse(vkey)
    private = Ed25519PrivateKey.from_private_bytes(bytes(32))
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert key.name == "countersign.example/signer" and key.key == raw
    assert hashes == [hashlib.sha256(f"event {i}".encode()).hexdigest() for i in (1, 2, 3)]
    assert leaves == [merkle.leaf_hash(bytes.fromhex(h)).hex() for h in hashes]
    cp = verify_checkpoint(note.encode(), key)
    assert cp.root == mth([bytes.fromhex(h) for h in hashes]) and cp.head == hashes[-1] and cp.size == 3
    assert cp.root.hex() in example and merkle.node_hash(*map(bytes.fromhex, leaves[:2])).hex() in example
    from ledger.proof.checkpoint import SigningKey

    assert sign_checkpoint(cp, SigningKey(key.name, private)) == note.encode()


# --- property: checkpoints at random sizes ---------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), before=st.integers(0, 20), after=st.integers(0, 20))
def test_any_rewrite_up_to_the_checkpoint_fails_and_every_proof_verifies_at_random_sizes(tmp_path_factory, key, data, before, after):
    path = tmp_path_factory.mktemp("prop") / "l"
    with Forge(path) as f:
        for i in range(before):
            f.propose(args={"n": i}, effect="deny")
    cp, note = make_checkpoint(path, key, clock=CLOCK)
    with Forge(path) as f:
        for i in range(after):
            f.propose(args={"n": 100 + i}, effect="deny")
    assert check(path, cp)[0].ok and check(path, cp, incremental=True)[0].ok
    seq = data.draw(st.integers(1, cp.size))
    verify_proof(make_proof(path, seq, cp).encode(), note, key.public)
    index = data.draw(st.integers(0, cp.size + after - 1))  # the line rewritten (0-based)
    def rewritten(e):  # another content with the same time, so the history stays in time order
        if hasattr(e, "proposer"):
            return msgspec.structs.replace(e, proposer="someone-else")
        return msgspec.structs.replace(e, ledger_id="f" * 32)

    rewrite_with_recomputed_hashes(path, index, rewritten)
    assert verify(path).ok
    for incremental in (False, True):
        report, _ = check(path, cp, incremental=incremental)
        assert report.ok == (index >= cp.size), (index, cp.size, report.problem)
