"""`countersign roster add`: a principal with a fresh token (printed once, its hash stored) or
keys; the roster is checked before it is written, and a refusal leaves the file as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ledger.proof.keys import generate_key, write_keypair
from ledger.proof.roster import Principal, add_principal, load_roster, parse_roster, entry_text, token_hash

CLI = [sys.executable, "-m", "cli.main"]
ROOT = Path(__file__).resolve().parent.parent


def run(*args, cwd):
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_add_prints_the_token_once_and_stores_only_its_hash(tmp_path):
    done = run("roster", "add", "team.toml", "agent-7", "--kind", "agent", "--group", "ops", "--token", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("cst_") and "\n" not in token
    text = (tmp_path / "team.toml").read_text()
    assert token not in text and token_hash(token) in text
    roster = load_roster(tmp_path / "team.toml")
    assert roster.authenticate(token).name == "agent-7" and roster.group("ops") == ("agent-7",)


def test_add_lists_a_key_and_refuses_a_duplicate_leaving_the_file_as_it_was(tmp_path):
    write_keypair(tmp_path / "svc", generate_key("svc"))
    assert run("roster", "add", "team.toml", "countersign", "--kind", "service", "--key", "svc.pub", cwd=tmp_path).returncode == 0
    before = (tmp_path / "team.toml").read_bytes()
    again = run("roster", "add", "team.toml", "countersign", "--kind", "reviewer", "--token", cwd=tmp_path)
    assert again.returncode == 2 and "listed twice" in again.stderr and again.stdout == ""
    assert (tmp_path / "team.toml").read_bytes() == before
    bad = run("roster", "add", "team.toml", "x", "--kind", "robot", cwd=tmp_path)
    assert bad.returncode == 2 and "--kind must be one of" in bad.stderr


names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20).filter(lambda s: s.strip())


@settings(max_examples=200, deadline=None)
@given(name=names, groups=st.lists(names, max_size=3, unique=True))
def test_any_name_and_groups_round_trip_through_the_toml_entry(name, groups):
    principal = Principal(name, "reviewer", tuple(sorted(groups)), (token_hash("t"),), ())
    roster = parse_roster(entry_text(principal))
    assert roster.principal(name) == principal


def test_add_principal_refuses_a_roster_that_does_not_read(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text("[[principal]\n")
    with pytest.raises(Exception):
        add_principal(path, Principal("a", "agent"))
    assert path.read_text() == "[[principal]\n"
