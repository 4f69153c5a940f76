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
from ledger.checkpoint import CHECKPOINTS_DIR
from ledger.lines import compose, split
from ledger.log import Ledger, LedgerError, list_segments
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
    lines[4] = lines[4].replace(b'"agent"', b'"agenT"')
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
    body, _, data = split(lines[1])
    event = ev.decode_event(body)
    lines[1] = compose(ev.encode_event(msgspec.structs.replace(event, run="rewritten")), data)[1]
    rewrite(ledger, rechain(lines, 1))
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
    g.propose("read_thing", {"id": 2}, proposer="agent")
    g.close()
    result = verify_cp(ledger, cp, keys, "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["ok"] and data["checkpoint"]["size"] == data["tree_size"] - 1
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
    body, _, data = split(lines[1])
    lines[1] = compose(ev.encode_event(msgspec.structs.replace(ev.decode_event(body), run="x")), data)[1]
    rewrite(ledger, rechain(lines, 1))
    result = run("ledger", "prove", ledger, 3, "--checkpoint", cp)
    assert result.exit_code == 1 and "do not match" in one_line_error(result)


def test_the_help_lists_the_new_commands():
    assert all(c in run("ledger", "--help").stdout for c in ("keygen", "checkpoint", "prove"))
    assert "verify-proof" in run("--help").stdout
