"""The checkpoint commands: keygen, checkpoint, verify --checkpoint, prove, verify-proof.

Exit codes: 0 the check holds, 1 a check failed, 2 bad input; errors are one line, no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from cli.main import app
from ledger import events as ev
from ledger.proof.checkpoint import CHECKPOINTS_DIR
from ledger.store.lines import compose, split
from ledger.store.log import Ledger, LedgerError, list_segments
from ledger_factory import rechain

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in (result.stdout + result.stderr), result.stdout + result.stderr
    return result


def one_line_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "ledger"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", path)
    assert result.exit_code == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    prefix = tmp_path_factory.mktemp("keys") / "signer"
    result = run("ledger", "keygen", "--out", prefix)
    assert result.exit_code == 0, result.stderr
    return prefix


@pytest.fixture
def ledger(demo, tmp_path) -> Path:
    path = tmp_path / "ledger"
    shutil.copytree(demo, path)
    return path


def first_proposal(lines: list[bytes]) -> int:
    """The index of the demo's first proposal (after the policy event that keeps its text)."""
    return next(i for i, line in enumerate(lines) if line.startswith(b'{"body":{"kind":"proposed",'))


def make_checkpoint(ledger: Path, keys: Path) -> Path:
    result = run("ledger", "checkpoint", ledger, "--key", f"{keys}.key")
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("wrote ")
    return Path(first[len("wrote "):])


def lines_of(path: Path) -> list[bytes]:
    return [line for seg in list_segments(path) for line in seg.read_bytes().splitlines(keepends=True)]


def rewrite(path: Path, lines: list[bytes]) -> None:
    for seg in list_segments(path):
        seg.unlink()
    (path / "events-00000001.jsonl").write_bytes(b"".join(lines))


def verify_cp(ledger, cp, keys, *extra):
    return run("ledger", "verify", ledger, "--checkpoint", cp, "--pubkey", f"{keys}.pub", *extra)


# --- keygen ---------------------------------------------------------------------------------------


def test_keygen_writes_a_private_key_only_its_owner_can_read_and_prints_the_public_key(tmp_path):
    result = run("ledger", "keygen", "--out", tmp_path / "k", "--name", "example.com/auditor")
    assert result.exit_code == 0
    assert os.stat(tmp_path / "k.key").st_mode & 0o777 == 0o600
    pub = (tmp_path / "k.pub").read_text()
    assert pub.startswith("example.com/auditor+") and pub.endswith("\n")
    assert pub.strip() in result.stdout


def test_keygen_refuses_to_overwrite_a_key_with_exit_2(tmp_path):
    assert run("ledger", "keygen", "--out", tmp_path / "k").exit_code == 0
    result = run("ledger", "keygen", "--out", tmp_path / "k")
    assert result.exit_code == 2 and "already exists" in one_line_error(result)


def test_keygen_rejects_a_key_name_with_a_space_with_exit_2(tmp_path):
    result = run("ledger", "keygen", "--out", tmp_path / "k", "--name", "my key")
    assert result.exit_code == 2 and "key name" in one_line_error(result)


# --- checkpoint -----------------------------------------------------------------------------------


def test_checkpoint_writes_into_the_ledgers_checkpoints_and_prints_path_and_note(ledger, keys):
    result = run("ledger", "checkpoint", ledger, "--key", f"{keys}.key")
    assert result.exit_code == 0, result.stderr
    first, *note = result.stdout.splitlines(keepends=True)
    path = Path(first[len("wrote "):].strip())
    assert path.parent == ledger / CHECKPOINTS_DIR and path.name.endswith(".checkpoint")
    assert "".join(note).encode() == path.read_bytes()
    assert note[0].startswith("countersign.example/ledger/") and note[1] == f"{len(lines_of(ledger))}\n"


def test_checkpoint_out_writes_only_the_given_file(ledger, keys, tmp_path):
    out = tmp_path / "cp.txt"
    result = run("ledger", "checkpoint", ledger, "--key", f"{keys}.key", "--out", out)
    assert result.exit_code == 0 and out.exists()
    assert not (ledger / CHECKPOINTS_DIR).exists()


def test_checkpoint_refuses_a_ledger_that_does_not_verify_with_exit_1(ledger, keys):
    lines = lines_of(ledger)
    at = first_proposal(lines) + 3
    lines[at] = lines[at].replace(b'"agent"', b'"agenT"')
    rewrite(ledger, lines)
    result = run("ledger", "checkpoint", ledger, "--key", f"{keys}.key")
    assert result.exit_code == 1 and "refusing to sign" in one_line_error(result)


def test_checkpoint_with_a_missing_key_exits_2(ledger, tmp_path):
    result = run("ledger", "checkpoint", ledger, "--key", tmp_path / "nope.key")
    assert result.exit_code == 2 and "cannot read" in one_line_error(result)


def test_checkpoint_of_a_missing_ledger_exits_2(keys, tmp_path):
    result = run("ledger", "checkpoint", tmp_path / "nothing", "--key", f"{keys}.key")
    assert result.exit_code == 2
    one_line_error(result)


# --- verify --checkpoint --------------------------------------------------------------------------


def test_verify_with_a_checkpoint_passes_on_the_intact_ledger(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    result = verify_cp(ledger, cp, keys)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert ": intact:" in result.stdout and "checkpoint: verified and extends the checkpoint" in result.stdout


def test_a_full_rewrite_with_recomputed_hashes_passes_plain_verify_and_fails_verify_with_the_checkpoint(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    lines = lines_of(ledger)
    at = first_proposal(lines)
    body, _, data = split(lines[at])
    event = ev.decode_event(body)
    lines[at] = compose(ev.encode_event(msgspec.structs.replace(event, run="rewritten")), data)[1]
    rewrite(ledger, rechain(lines, at))
    assert run("ledger", "verify", ledger).exit_code == 0
    result = verify_cp(ledger, cp, keys)
    assert result.exit_code == 1
    assert "FAILED" in result.stdout and "checkpoint" in result.stdout and "does not extend" in result.stdout
    result = verify_cp(ledger, cp, keys, "--from-checkpoint")
    assert result.exit_code == 1


def test_verify_with_the_checkpoint_fails_after_truncation(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    rewrite(ledger, lines_of(ledger)[:-1])
    assert run("ledger", "verify", ledger).exit_code == 0
    result = verify_cp(ledger, cp, keys)
    assert result.exit_code == 1 and "truncated or rolled back" in result.stdout


def test_verify_with_the_checkpoint_fails_after_rollback_to_an_older_copy(ledger, keys, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(ledger, old)
    from support import gate

    g = gate(ledger)
    g.propose("read_thing", {"id": 1}, proposer="agent")
    g.close()
    cp = shutil.copy(make_checkpoint(ledger, keys), tmp_path / "held-elsewhere.checkpoint")
    shutil.rmtree(ledger)
    shutil.copytree(old, ledger)
    assert run("ledger", "verify", ledger).exit_code == 0
    result = verify_cp(ledger, cp, keys)
    assert result.exit_code == 1 and "rolled back" in result.stdout


def test_the_writer_refuses_to_extend_a_ledger_shorter_than_its_checkpoint(ledger, keys):
    make_checkpoint(ledger, keys)
    rewrite(ledger, lines_of(ledger)[:-2])
    with pytest.raises(LedgerError, match="refusing to append"):
        Ledger(ledger)


def test_verify_with_a_checkpoint_signed_by_another_key_exits_1(ledger, keys, tmp_path):
    cp = make_checkpoint(ledger, keys)
    assert run("ledger", "keygen", "--out", tmp_path / "other").exit_code == 0
    result = run("ledger", "verify", ledger, "--checkpoint", cp, "--pubkey", tmp_path / "other.pub")
    assert result.exit_code == 1 and "not signed by" in one_line_error(result)


def test_verify_with_an_edited_checkpoint_exits_1(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    text = cp.read_text().splitlines(keepends=True)
    text[1] = f"{int(text[1]) - 1}\n"
    cp.write_text("".join(text))
    result = verify_cp(ledger, cp, keys)
    assert result.exit_code == 1 and "does not verify" in one_line_error(result)


def test_verify_with_a_malformed_checkpoint_exits_2(ledger, keys, tmp_path):
    bad = tmp_path / "bad.checkpoint"
    bad.write_text("hello\n")
    result = verify_cp(ledger, bad, keys)
    assert result.exit_code == 2 and str(bad) in one_line_error(result)


def test_verify_with_a_checkpoint_but_no_public_key_exits_2(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    result = run("ledger", "verify", ledger, "--checkpoint", cp)
    assert result.exit_code == 2 and "--pubkey" in one_line_error(result)


def test_verify_from_the_checkpoint_checks_incrementally(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    result = verify_cp(ledger, cp, keys, "--from-checkpoint")
    assert result.exit_code == 0, result.stdout
    assert "incrementally" in result.stdout and "warning: incremental:" in result.stderr


def test_verify_with_a_checkpoint_as_json_includes_the_checkpoint_and_the_consistency_proof(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    from support import gate

    g = gate(ledger)
    size = g.ledger.head[0]
    g.propose("read_thing", {"id": 2}, proposer="agent")  # after expiring what was due, if anything
    size_now = g.ledger.head[0]
    g.close()
    result = verify_cp(ledger, cp, keys, "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["ok"] and data["checkpoint"]["size"] == size and data["tree_size"] == size_now > size
    assert data["consistency_proof"] and all(len(h) == 64 for h in data["consistency_proof"])


# --- prove and verify-proof -----------------------------------------------------------------------


def test_prove_and_verify_proof_work_offline(ledger, keys, tmp_path):
    cp = make_checkpoint(ledger, keys)
    proof = tmp_path / "5.proof"
    result = run("ledger", "prove", ledger, 5, "--checkpoint", cp, "--out", proof)
    assert result.exit_code == 0, result.stderr
    saved_cp = tmp_path / "saved.checkpoint"
    shutil.copy(cp, saved_cp)
    shutil.rmtree(ledger)  # nothing but the proof, the checkpoint and the key
    result = run("verify-proof", proof, "--checkpoint", saved_cp, "--pubkey", f"{keys}.pub")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "verified: seq 5" in result.stdout
    result = run("verify-proof", proof, "--checkpoint", saved_cp, "--pubkey", f"{keys}.pub", "--json")
    data = json.loads(result.stdout)
    assert data["ok"] and data["seq"] == 5 and data["event"]["seq"] == 5


def test_prove_prints_the_proof_on_standard_output(ledger, keys):
    result = run("ledger", "prove", ledger, 2)
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["seq"] == 2 and data["tree_size"] == len(lines_of(ledger))
    assert "note:" in result.stderr


@pytest.mark.parametrize("seq", ["0", "100000", "-3", "five"])
def test_prove_a_seq_outside_the_ledger_exits_2(ledger, seq):
    result = run("ledger", "prove", ledger, seq)
    assert result.exit_code == 2


def test_verify_proof_rejects_a_tampered_proof_with_exit_1(ledger, keys, tmp_path):
    cp = make_checkpoint(ledger, keys)
    proof = tmp_path / "p"
    assert run("ledger", "prove", ledger, 5, "--checkpoint", cp, "--out", proof).exit_code == 0
    data = json.loads(proof.read_text())
    data["inclusion"] = data["inclusion"][:-1]
    proof.write_text(json.dumps(data))
    result = run("verify-proof", proof, "--checkpoint", cp, "--pubkey", f"{keys}.pub")
    assert result.exit_code == 1 and "does not verify" in one_line_error(result)


def test_verify_proof_rejects_a_proof_for_another_tree_size_with_exit_1(ledger, keys, tmp_path):
    cp = make_checkpoint(ledger, keys)
    from support import gate

    g = gate(ledger)
    g.propose("read_thing", {"id": 3}, proposer="agent")
    g.close()
    proof = tmp_path / "p"
    assert run("ledger", "prove", ledger, 5, "--out", proof).exit_code == 0  # for the grown tree
    result = run("verify-proof", proof, "--checkpoint", cp, "--pubkey", f"{keys}.pub")
    assert result.exit_code == 1 and "tree of" in one_line_error(result)


def test_verify_proof_rejects_a_malformed_proof_with_exit_2(ledger, keys, tmp_path):
    cp = make_checkpoint(ledger, keys)
    proof = tmp_path / "p"
    proof.write_text("{not json")
    result = run("verify-proof", proof, "--checkpoint", cp, "--pubkey", f"{keys}.pub")
    assert result.exit_code == 2 and "not JSON" in one_line_error(result)


def test_prove_against_a_checkpoint_the_ledger_no_longer_matches_exits_1(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    lines = lines_of(ledger)
    at = first_proposal(lines)
    body, _, data = split(lines[at])
    lines[at] = compose(ev.encode_event(msgspec.structs.replace(ev.decode_event(body), run="x")), data)[1]
    rewrite(ledger, rechain(lines, at))
    result = run("ledger", "prove", ledger, 3, "--checkpoint", cp)
    assert result.exit_code == 1 and "do not match" in one_line_error(result)


def test_the_help_lists_the_new_commands():
    assert all(c in run("ledger", "--help").stdout for c in ("keygen", "checkpoint", "prove"))
    assert "verify-proof" in run("--help").stdout


# --- malformed input of any shape, read-only directories, empty names --------------------------------


def _proof_and_checkpoint(ledger: Path, keys: Path, tmp_path: Path) -> tuple[dict, Path]:
    cp = make_checkpoint(ledger, keys)
    proof = tmp_path / "good.proof"
    assert run("ledger", "prove", ledger, 5, "--checkpoint", cp, "--out", proof).exit_code == 0
    return json.loads(proof.read_text()), cp


def _malformed(good: dict) -> dict[str, str]:
    line = good["line"]
    return {
        "nested 100,000 arrays deep": "[" * 100_000 + "]" * 100_000,
        "nested 100,000 objects deep": '{"a":' * 100_000 + "1" + "}" * 100_000,
        "a seq of 5,000 digits": json.dumps(good).replace(f'"seq": {good["seq"]}', '"seq": ' + "9" * 5000),
        "a tree size of 5,000 digits": json.dumps(good).replace('"tree_size": ', '"tree_size": ' + "7" * 5000 + ", \"x\": "),
        "NaN": json.dumps(good).replace(f'"seq": {good["seq"]}', '"seq": NaN'),
        "a lone surrogate": json.dumps(good).replace('"ledger_id": "', '"ledger_id": "\\ud800'),
        "a redaction index of 5,000 digits": json.dumps(
            {**good, "redactions": [{"path": "args[" + "9" * 5000 + "]", "value_digest": "0" * 64}]}
        ),
        "an array": "[]",
        "empty": "",
        "a line nested 100,000 deep": json.dumps({**good, "line": line[:-1] + ',"x":' + "[" * 100_000 + "]" * 100_000 + "}"}),
    }


@pytest.mark.parametrize(
    "shape",
    ["nested 100,000 arrays deep", "nested 100,000 objects deep", "a seq of 5,000 digits", "a tree size of 5,000 digits",
     "NaN", "a lone surrogate", "a redaction index of 5,000 digits", "an array", "empty"],
)
def test_verify_proof_calls_a_malformed_proof_of_any_shape_malformed_with_exit_2(ledger, keys, tmp_path, shape):
    good, cp = _proof_and_checkpoint(ledger, keys, tmp_path)
    proof = tmp_path / "bad.proof"
    proof.write_text(_malformed(good)[shape])
    result = run("verify-proof", proof, "--checkpoint", cp, "--pubkey", f"{keys}.pub")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    message = one_line_error(result)
    assert str(proof) in message and ("malformed" in message or "not" in message) and len(message) < 400


def test_a_proof_whose_line_nests_deeply_is_refused_without_a_traceback(ledger, keys, tmp_path):
    good, cp = _proof_and_checkpoint(ledger, keys, tmp_path)
    proof = tmp_path / "bad.proof"
    proof.write_text(_malformed(good)["a line nested 100,000 deep"])
    result = run("verify-proof", proof, "--checkpoint", cp, "--pubkey", f"{keys}.pub")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (1, 2)
    one_line_error(result)


def test_checkpoint_into_a_read_only_ledger_exits_2_naming_the_path(ledger, keys, monkeypatch):
    from support import make_read_only

    make_read_only(monkeypatch, ledger)
    result = run("ledger", "checkpoint", ledger, "--key", f"{keys}.key")
    assert result.exit_code == 2, result.output
    message = one_line_error(result)
    assert f"cannot write {ledger / CHECKPOINTS_DIR}" in message and "Read-only file system" in message
    monkeypatch.undo()
    assert not (ledger / CHECKPOINTS_DIR).exists()


def test_checkpoint_that_cannot_be_written_leaves_no_temporary_file(ledger, keys, monkeypatch):
    (ledger / CHECKPOINTS_DIR).mkdir()
    real_fsync = os.fsync

    def failing_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    result = run("ledger", "checkpoint", ledger, "--key", f"{keys}.key")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert result.exit_code == 2 and "No space left on device" in one_line_error(result)
    assert list((ledger / CHECKPOINTS_DIR).iterdir()) == []


@pytest.mark.parametrize("out", ["", "keys/", "."])
def test_keygen_refuses_a_name_that_is_no_file_with_exit_2(tmp_path, monkeypatch, out):
    (tmp_path / "keys").mkdir()
    monkeypatch.chdir(tmp_path)
    result = run("ledger", "keygen", "--out", out)
    assert result.exit_code == 2 and "names no file" in one_line_error(result)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["keys"]


def test_prove_on_a_missing_directory_says_so_with_exit_2(tmp_path):
    result = run("ledger", "prove", tmp_path / "nothing", 1)
    assert result.exit_code == 2
    message = one_line_error(result)
    assert "no such ledger directory" in message and "no events" not in message


# --- verify warns of a stored checkpoint the ledger no longer reaches --------------------------------


def test_plain_verify_warns_when_the_ledger_is_shorter_than_its_stored_checkpoint(ledger, keys):
    cp = make_checkpoint(ledger, keys)
    assert run("ledger", "verify", ledger).stderr == ""  # in step with its checkpoint: no warning
    rewrite(ledger, lines_of(ledger)[:-3])  # cut back to an earlier state
    result = run("ledger", "verify", ledger)
    assert result.exit_code == 0 and "intact" in result.stdout  # the chain itself is whole
    assert f"checkpoint {CHECKPOINTS_DIR}/{cp.name} covers" in result.stderr and "truncated or rolled back" in result.stderr
    assert "--checkpoint" in result.stderr and "--pubkey" in result.stderr
    report = json.loads(run("ledger", "verify", ledger, "--json").stdout)
    assert any("truncated or rolled back" in w for w in report["warnings"])


def test_plain_verify_warns_when_the_last_event_is_not_the_stored_checkpoints_head(ledger, keys):
    make_checkpoint(ledger, keys)
    lines = lines_of(ledger)
    body, _, data = split(lines[-1])
    event = ev.decode_event(body)
    later = msgspec.structs.replace(event, ts="2099" + event.ts[4:])  # the same size, another last event
    lines[-1] = compose(ev.encode_event(later), data)[1]
    rewrite(ledger, rechain(lines, len(lines) - 1))
    result = run("ledger", "verify", ledger)
    assert result.exit_code == 0 and "intact" in result.stdout, result.stdout
    assert "is not the head of the checkpoint" in result.stderr and "the ledger was rewritten" in result.stderr


# --- text from a ledger or a proof is shown with its controls escaped -----------------------------------


def test_verify_proof_shows_a_redacted_path_with_its_control_characters_escaped(tmp_path):
    from ledger.proof.checkpoint import generate_key, make_checkpoint as sign, write_keypair
    from ledger.proof.redact import redact
    from support import START, gate

    path = tmp_path / "ledger"
    g = gate(path)
    p = g.propose("small_change", {"a\x85b\u202ec": "secret"}, proposer="agent")
    g.approve(p.request, approver="alice", digest=p.args_digest)
    g.execute(p.request, lambda args: None)
    g.close()
    redact(path, p.request, 'args["a\x85b\u202ec"]', reason="r", by="dpo")
    key = generate_key()
    _, pub = write_keypair(tmp_path / "k", key)
    (tmp_path / "cp").write_bytes(sign(path, key)[1])
    assert run("ledger", "prove", path, p.request, "--checkpoint", tmp_path / "cp", "--out", tmp_path / "p").exit_code == 0
    result = run("verify-proof", tmp_path / "p", "--checkpoint", tmp_path / "cp", "--pubkey", pub)
    assert result.exit_code == 0, result.output
    assert 'args["a\\x85b\\u202ec"]' in result.stdout and "\x85" not in result.stdout and "\u202e" not in result.stdout
    shown = run("ledger", "verify", path)
    assert 'args["a\\x85b\\u202ec"]' in shown.stdout and "\x85" not in shown.stdout


@pytest.mark.parametrize("incremental", [False, True])
def test_a_checkpoint_of_another_ledger_is_named_as_such_at_seq_1(ledger, keys, tmp_path, incremental):
    """Not "FAILED at seq 8 ... rewritten", and no line vouching for events the checkpoint does not
    cover: the checkpoint belongs to another ledger, by its id."""
    other = tmp_path / "other"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", other)
    assert result.exit_code == 0, result.stderr
    cp = make_checkpoint(other, keys)
    result = verify_cp(ledger, cp, keys, *(["--from-checkpoint"] if incremental else []))
    assert result.exit_code == 1
    assert "FAILED at seq 1: checkpoint: the checkpoint is for ledger" in result.stdout, result.stdout
    assert "events before it verified" not in result.stdout and "does not vouch for this ledger" in result.stdout


def test_an_incremental_verify_of_a_rewritten_prefix_does_not_vouch_for_the_events_before_the_checkpoints_size(ledger, keys):
    from tests.ledger_factory import rechain

    cp = make_checkpoint(ledger, keys)
    lines = lines_of(ledger)
    i = next(n for n, line in enumerate(lines) if b'"proposer":"' in line)  # a proposal early in the ledger
    lines[i] = lines[i].replace(b'"proposer":"', b'"proposer":"x', 1)
    rewrite(ledger, rechain(lines, i))  # a lawful history with every hash recomputed
    result = verify_cp(ledger, cp, keys, "--from-checkpoint")
    assert result.exit_code == 1
    assert "some event up to seq" in result.stdout and "events before it verified" not in result.stdout, result.stdout
