"""Redaction: a value leaves the ledger's files, the chain stays intact, and verify still proves
every digest; what a redaction announces, and where a marker counts, cannot be forged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.proof.checkpoint import MalformedError, VerificationError, generate_key, make_checkpoint, make_proof, verify_proof
from ledger.proof.checkpoint import verify_against_checkpoint
from ledger.clock import ManualClock
from ledger.digest import canonical_json, redacted_digest, redaction_marker, value_digest
from ledger.fieldpath import CANONICAL_PATTERN, FieldPathError, format_field_path, parse_field_path, replace, resolve
from ledger.store.lines import compose, split
from ledger.store.log import Ledger, LedgerLocked, LedgerReader
from ledger.proof.redact import RedactionError, redact
from ledger.proof.verify import verify
from ledger.analytics.views import connect
from support import START, gate
from tests.ledger_factory import Forge, all_lines, body_of, rewrite

CARD = "4111111111111111"


def build(path: Path) -> dict[str, int]:
    """A ledger with a final request holding personal data, an edited one, and one pending."""
    clock = ManualClock(START)
    g = gate(path, clock)
    ids = {}
    p = g.propose(
        "small_change",
        {"id": 3, "card": {"number": CARD, "holder": "Zoë Example"}, "items": [{"cc": "x1"}, {"cc": "x2"}]},
        proposer="agent",
        context={"cwd": "/home/zoe", "ip": "203.0.113.9"},
    )
    ids["final"] = p.request
    clock.advance(30)
    g.approve(p.request, approver="alice", digest=p.args_digest)
    g.execute(p.request, lambda args: None)
    p = g.propose("big_change", {"amount": 500, "email": "zoe@example.com"}, proposer="agent")
    ids["edited"] = p.request
    clock.advance(30)
    g.edit(p.request, editor="sup-1", args={"amount": 400, "email": "zoe@example.com"}, reason="less")
    ids["edit"] = g.ledger.head[0]
    g.reject(p.request, approver="sup-2", reason="No.")
    ids["pending"] = g.propose("small_change", {"id": 4, "secret": "s3cret"}, proposer="agent").request
    g.close()
    return ids


@pytest.fixture
def ledger(tmp_path) -> tuple[Path, dict[str, int]]:
    path = tmp_path / "ledger"
    return path, build(path)


def data_of(path: Path, seq: int) -> dict:
    for record in LedgerReader(path).records():
        if record.seq == seq:
            return msgspec.json.decode(record.data)
    raise AssertionError(f"no seq {seq}")


def files_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())


def test_a_redacted_value_leaves_every_file_and_the_ledger_still_verifies(ledger):
    path, ids = ledger
    before = verify(path)
    done = redact(path, ids["final"], "args.card.number", reason="GDPR art. 17 request #481", by="dpo@example.com")
    assert done.rewritten and done.value_digest == value_digest(CARD)
    assert CARD.encode() not in files_bytes(path)  # no temporary file or old segment keeps it
    assert data_of(path, ids["final"])["args"]["card"] == {"number": redaction_marker(value_digest(CARD)), "holder": "Zoë Example"}
    report = verify(path)
    assert report.ok, report.problem
    assert report.count == before.count + 1  # the announcement
    assert report.redactions == [
        f"seq {done.seq}: the value at args.card.number of seq {ids['final']} was redacted by dpo@example.com "
        "(GDPR art. 17 request #481)"
    ]
    (last,) = [r.event for r in LedgerReader(path).records() if r.seq == done.seq]
    assert isinstance(last, ev.Redacted)
    assert (last.target, last.path, last.value_digest, last.by) == (ids["final"], "args.card.number", value_digest(CARD), "dpo@example.com")


def test_every_kind_of_path_and_the_edit_data(ledger):
    path, ids = ledger
    redact(path, ids["final"], "context.ip", reason="r", by="dpo")
    redact(path, ids["final"], "args.items[1].cc", reason="r", by="dpo")
    redact(path, ids["edit"], "args.email", reason="r", by="dpo")
    redact(path, ids["edited"], "args.email", reason="r", by="dpo")
    assert b"203.0.113.9" not in files_bytes(path) and b"zoe@example.com" not in files_bytes(path)
    assert data_of(path, ids["final"])["args"]["items"][0] == {"cc": "x1"}
    report = verify(path)
    assert report.ok, report.problem
    assert len(report.redactions) == 4


def test_a_second_run_changes_nothing(ledger):
    path, ids = ledger
    first = redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    snapshot = files_bytes(path)
    again = redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    assert not again.rewritten and again.seq == first.seq
    assert files_bytes(path) == snapshot


def test_a_crash_between_the_announcement_and_the_rewrite_is_finished_by_running_again(ledger):
    path, ids = ledger
    # Step 1 alone, as a crash right after it leaves the ledger: the value is still in place.
    with Ledger(path) as led:
        announced = led.append(
            ev.Redacted(target=ids["final"], path="args.card.number", value_digest=value_digest(CARD), reason="r", by="dpo")
        ).seq
    assert CARD.encode() in files_bytes(path)
    assert verify(path).ok
    done = redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    assert done.rewritten and done.seq == announced
    assert CARD.encode() not in files_bytes(path)
    report = verify(path)
    assert report.ok and report.count == announced


def test_a_containing_field_can_be_redacted_after_an_inner_one(ledger):
    path, ids = ledger
    redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    outer = redact(path, ids["final"], "args.card", reason="r", by="dpo")
    original = {"number": CARD, "holder": "Zoë Example"}
    assert outer.value_digest == value_digest(original)  # the inner marker counts as the card number
    assert verify(path).ok
    with pytest.raises(RedactionError, match="inside args.card"):
        redact(path, ids["final"], "args.card.holder", reason="r", by="dpo")


@pytest.mark.parametrize(
    "target,field,message",
    [
        ("pending", "args.secret", "pending and may still run"),
        ("final", "args.nope", "has no field args.nope"),
        ("final", "args.items[2]", "has no field"),
        ("final", "args.card.number.deeper", "has no field"),
        ("final", "cwd", "starts with args or context"),
        ("final", "args", "not the whole object"),
        ("final", "args.items[01]", "not a field path"),
        ("edit", "context.cwd", "has no field"),
    ],
)
def test_refusals_append_nothing(ledger, target, field, message):
    path, ids = ledger
    snapshot = files_bytes(path)
    with pytest.raises(RedactionError, match=message):
        redact(path, ids[target], field, reason="r", by="dpo")
    assert files_bytes(path) == snapshot


def test_events_without_data_missing_seqs_and_empty_reasons_are_refused(ledger):
    path, ids = ledger
    snapshot = files_bytes(path)
    with pytest.raises(RedactionError, match="stores no data"):
        redact(path, 1, "args.x", reason="r", by="dpo")
    with pytest.raises(RedactionError, match="no event at seq 999"):
        redact(path, 999, "args.x", reason="r", by="dpo")
    with pytest.raises(RedactionError, match="needs a reason"):
        redact(path, ids["final"], "args.card", reason=" ", by="dpo")
    with pytest.raises(RedactionError, match="identity"):
        redact(path, ids["final"], "args.card", reason="r", by="")
    assert files_bytes(path) == snapshot


def test_an_open_gate_keeps_the_ledger_from_redaction_and_reopens_after_it(ledger):
    path, ids = ledger
    g = gate(path, ManualClock(START))
    try:
        with pytest.raises(LedgerLocked):
            redact(path, ids["final"], "args.card", reason="r", by="dpo")
    finally:
        g.close()
    redact(path, ids["final"], "args.card", reason="r", by="dpo", clock=ManualClock(START))  # ts: the last event's
    g = gate(path, ManualClock(START))  # the Gate's replay accepts the marker
    try:
        assert g.get(ids["pending"]).status == "pending"
        g.approve(ids["pending"], approver="alice", digest=g.get(ids["pending"]).digest)
    finally:
        g.close()
    assert verify(path).ok


def test_a_ledger_that_does_not_verify_is_not_redacted(ledger):
    path, ids = ledger
    _set_data(path, ids["edit"], lambda d: {"args": {**d["args"], "amount": 1}})  # DATA changed behind the chain's back
    snapshot = files_bytes(path)
    with pytest.raises(RedactionError, match="does not verify at seq"):
        redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    assert files_bytes(path) == snapshot


# --- what verify catches --------------------------------------------------------------------------


def _line_of(path: Path, seq: int) -> tuple[list[bytes], int]:
    lines = all_lines(path)
    for i, line in enumerate(lines):
        if body_of(line)["seq"] == seq:
            return lines, i
    raise AssertionError(seq)


def _set_data(path: Path, seq: int, change) -> None:
    lines, i = _line_of(path, seq)
    body, _, data = split(lines[i])
    lines[i] = compose(body, canonical_json(change(json.loads(data))))[1]
    rewrite(path, lines)


def test_a_change_beside_a_marker_is_caught(ledger):
    path, ids = ledger
    redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    _set_data(path, ids["final"], lambda d: replace(d, ("args", "card", "holder"), "Someone Else"))
    report = verify(path)
    assert (report.problem.seq, report.problem.kind) == (ids["final"], "data")
    assert "do not match their digest" in report.problem.message


def test_a_marker_where_nothing_was_announced_is_an_ordinary_object(ledger):
    """Replacing a value by its own marker without an announcement breaks the digest."""
    path, ids = ledger
    _set_data(path, ids["final"], lambda d: replace(d, ("args", "id"), redaction_marker(value_digest(3))))
    report = verify(path)
    assert (report.problem.seq, report.problem.kind) == (ids["final"], "data")


def test_a_marker_with_another_digest_is_caught(ledger):
    path, ids = ledger
    redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    _set_data(path, ids["final"], lambda d: replace(d, ("args", "card", "number"), redaction_marker(value_digest("4000000000000002"))))
    report = verify(path)
    assert (report.problem.seq, report.problem.kind) == (ids["final"], "data")


def test_removing_the_announcement_exposes_the_marker(ledger):
    path, ids = ledger
    done = redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    lines, i = _line_of(path, done.seq)
    rewrite(path, lines[:i])
    report = verify(path)
    assert (report.problem.seq, report.problem.kind) == (ids["final"], "data")


def test_an_announcement_of_a_value_not_there_fails_at_the_announcement(tmp_path):
    with Forge(tmp_path / "l") as f:
        r, _ = f.propose(effect="deny", args={"amount": 10})
        seq = f.redacted(r, "args.amount", value=11)  # the value stored is 10
    report = verify(tmp_path / "l")
    assert (report.problem.seq, report.problem.kind) == (seq, "data")
    assert report.problem.message == f"the value at args.amount of seq {r} is neither the value announced nor its marker"
    with Forge(tmp_path / "m") as f:
        r, _ = f.propose(effect="deny", args={"amount": 10})
        missing = f.redacted(r, "args.other", value=1)
    report = verify(tmp_path / "m")
    assert (report.problem.seq, report.problem.message) == (missing, f"the redaction names args.other of seq {r}, which does not exist")


def test_a_path_not_in_its_canonical_spelling_is_not_an_event(tmp_path):
    with Forge(tmp_path / "l") as f:
        r, _ = f.propose(effect="deny")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            msgspec.json.encode({"kind": "redacted", "seq": 3, "ts": "2026-01-01T00:00:00.000000Z", "prev": "0" * 64,
                                 "target": r, "path": 'args["amount"]', "value_digest": "0" * 64, "reason": "r", "by": "b"}),
            type=ev.AnyEvent,
        )


# --- proofs, checkpoints, views -------------------------------------------------------------------


def test_a_proof_of_a_redacted_event_verifies_offline_and_its_redactions_cannot_be_altered(ledger):
    path, ids = ledger
    key = generate_key("example.org/signer")
    cp, note = make_checkpoint(path, key)  # signed before the redaction
    redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    proof = make_proof(path, ids["final"], cp)
    assert [(r.path, r.value_digest) for r in proof.redactions] == [("args.card.number", value_digest(CARD))]
    assert CARD not in proof.line
    proven = verify_proof(proof.encode(), note, key.public)
    assert proven.record.seq == ids["final"]
    bare = json.loads(proof.encode())
    del bare["redactions"]
    with pytest.raises(VerificationError):
        verify_proof(json.dumps(bare).encode(), note, key.public)
    bare["redactions"] = [{"path": "args.card.number", "value_digest": value_digest("4000000000000002")}]
    with pytest.raises(VerificationError):
        verify_proof(json.dumps(bare).encode(), note, key.public)
    bare["redactions"] = [{"path": 'args["card"]', "value_digest": value_digest(CARD)}]
    with pytest.raises(MalformedError):
        verify_proof(json.dumps(bare).encode(), note, key.public)
    plain = make_proof(path, ids["pending"], cp)
    assert "redactions" not in json.loads(plain.encode())  # unchanged format when nothing was redacted


def test_verify_against_a_checkpoint_after_a_redaction(ledger):
    path, ids = ledger
    key = generate_key("example.org/signer")
    cp, _ = make_checkpoint(path, key)
    redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    for incremental in (False, True):
        report, _check = verify_against_checkpoint(path, cp, incremental=incremental)
        assert report.ok, (incremental, report.problem)
        assert len(report.redactions) == 1


def test_the_views_show_the_marker_and_agree_with_verify(ledger):
    path, ids = ledger
    done = redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    con = connect(path)
    try:
        (args,) = con.execute("SELECT args FROM events WHERE seq = ?", [ids["final"]]).fetchone()
        assert json.loads(args)["card"]["number"] == {"$redacted": value_digest(CARD)}
        assert con.execute("SELECT count(*) FROM violations").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM chain_breaks").fetchone() == (0,)
        assert con.execute("SELECT target, path FROM events WHERE kind = 'redacted'").fetchall() == [(ids["final"], "args.card.number")]
        assert con.execute("SELECT status FROM requests WHERE request = ?", [ids["final"]]).fetchone() == ("executed",)
    finally:
        con.close()
    assert done.seq == verify(path).count


# --- field paths and the digest rule ---------------------------------------------------------------

keys = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True), st.text(max_size=6))
steps = st.one_of(keys, st.integers(min_value=0, max_value=10**6))


@given(st.sampled_from(["args", "context"]), st.lists(steps, min_size=1, max_size=5))
def test_a_path_round_trips_through_its_canonical_spelling(root, parts):
    parts = (root, *parts)
    text = format_field_path(parts)
    assert parse_field_path(text) == parts
    assert msgspec.json.decode(
        msgspec.json.encode(text), type=ev.FieldPath
    ) == text  # the event's own pattern admits it


@given(st.text(alphabet=st.sampled_from(list('args.context[]"\\0123x_- \n\u00e9\u0001')), max_size=24))
def test_the_pattern_admits_exactly_the_canonical_spellings(text):
    try:
        canonical = format_field_path(parse_field_path(text)) == text
    except FieldPathError:
        canonical = False
    import re

    assert (re.search(CANONICAL_PATTERN, text) is not None) == canonical


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


def _paths(value, here=()):
    yield here
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, here + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, here + (i,))


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=3), json_values, min_size=1, max_size=4), st.data())
def test_markers_at_announced_paths_keep_the_digest_and_elsewhere_change_it(args, data):
    """Replace any set of nested values by their markers, innermost first as `redact` does: the
    redaction-aware digest is the original digest. The same markers unannounced change it."""
    original = value_digest(args)
    candidates = [("args", *p) for p in _paths(args) if p]
    chosen = data.draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True))
    chosen.sort(key=len, reverse=True)
    redactions: dict[tuple, str] = {}
    document = {"args": args}
    for parts in chosen:
        if any(parts[:n] in redactions for n in range(2, len(parts))):
            continue
        value = resolve(document, parts)
        digest = redacted_digest(value, redactions, parts)
        assert digest == value_digest(resolve({"args": args}, parts))  # the digest of what was there
        redactions[parts] = digest
        document = replace(document, parts, redaction_marker(digest))
    assert redacted_digest(document["args"], redactions, ("args",)) == original
    outermost = [p for p in redactions if not any(p[:n] in redactions for n in range(2, len(p)))]
    marker_changed = any(resolve(document, p) != resolve({"args": args}, p) for p in outermost)
    if marker_changed:
        assert value_digest(document["args"]) != original


def test_a_run_from_the_command_line(ledger, tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    path, ids = ledger
    runner = CliRunner()
    args = ["ledger", "redact", str(path), str(ids["final"]), "--path", "args.card.number", "--reason", "ticket 7", "--by", "dpo"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"redacted args.card.number of seq {ids['final']}" in result.output
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "already redacted" in result.output
    result = runner.invoke(app, ["ledger", "verify", str(path)])
    assert result.exit_code == 0 and "1 value redacted" in result.output and "ticket 7" in result.output
    bad = runner.invoke(app, ["ledger", "redact", str(path), str(ids["pending"]), "--path", "args.secret", "--reason", "r", "--by", "dpo"])
    assert bad.exit_code != 0 and "may still run" in bad.output and "Traceback" not in bad.output


def test_verify_proof_names_the_redacted_fields(ledger, tmp_path):
    from typer.testing import CliRunner

    from cli.main import app
    from ledger.proof.checkpoint import write_keypair

    path, ids = ledger
    key = generate_key("example.org/signer")
    private, public = write_keypair(tmp_path / "k", key)
    _, note = make_checkpoint(path, key)
    (tmp_path / "cp").write_bytes(note)
    redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    runner = CliRunner()
    proof = tmp_path / "proof"
    made = runner.invoke(app, ["ledger", "prove", str(path), str(ids["final"]), "--checkpoint", str(tmp_path / "cp"), "--out", str(proof)])
    assert made.exit_code == 0, made.output
    result = runner.invoke(app, ["verify-proof", str(proof), "--checkpoint", str(tmp_path / "cp"), "--pubkey", str(public)])
    assert result.exit_code == 0, result.output
    assert "redacted (each a marker carrying the removed value's digest): args.card.number" in result.output
    assert CARD not in proof.read_text()


# --- crashes ------------------------------------------------------------------------------------

_CRASHER = r"""
import os, sys
sys.path[:0] = [{root!r}, {tests!r}]
import ledger.proof.redact as r
point = {point!r}
real_write, real_replace, real_rewrite = os.write, os.replace, r._rewrite_line

def write(fd, data):  # half of the temporary segment, then death
    real_write(fd, bytes(data[: len(data) // 2]))
    os._exit(9)

def replace_after(a, b):
    real_replace(a, b)
    os._exit(9)

def rewrite(*args):  # the faults apply from the rewrite on, after the announcement is durable
    if point == "after-announcement":
        os._exit(9)
    if point == "mid-temporary-write":
        os.write = write
    if point == "before-rename":
        os.replace = lambda *a: os._exit(9)
    if point == "after-rename":
        os.replace = replace_after
    real_rewrite(*args)

r._rewrite_line = rewrite
r.redact({path!r}, {target}, "args.card.number", reason="r", by="dpo")
"""


@pytest.mark.parametrize("point", ["after-announcement", "mid-temporary-write", "before-rename", "after-rename"])
def test_a_redaction_killed_at_any_step_leaves_a_ledger_that_verifies_and_finishes_on_rerun(ledger, point):
    import subprocess
    import sys

    path, ids = ledger
    root = Path(__file__).resolve().parents[1]
    script = _CRASHER.format(root=str(root), tests=str(root / "tests"), point=point, path=str(path), target=ids["final"])
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    report = verify(path)
    assert report.ok, report.problem
    announced = len(report.redactions) == 1
    assert announced  # every step after the first happens after the announcement is durable
    value_gone = CARD.encode() not in b"".join(p.read_bytes() for p in path.glob("events-*.jsonl"))
    assert value_gone == (point == "after-rename")
    done = redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    assert done.rewritten == (point != "after-rename")
    assert CARD.encode() not in files_bytes(path)  # a stale temporary file is overwritten, then renamed away
    final = verify(path)
    assert final.ok and final.count == report.count and len(final.redactions) == 1


# --- hostile input: control characters, read-only directories, no ledger ----------------------------


def _cli(*args):
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


SPOOFS = [("by", "dpo\nbase: intact: 999 events"), ("reason", "x\rFAKE"), ("reason", "a\x1b[2Kb"), ("by", "d\x85p"), ("by", "d\x00")]


@pytest.mark.parametrize("name, text", SPOOFS)
def test_a_reason_or_identity_with_a_control_character_is_refused_by_the_api(ledger, name, text):
    path, ids = ledger
    snapshot = files_bytes(path)
    given = {"reason": "r", "by": "dpo", name: text}
    with pytest.raises(RedactionError, match=f"{name} holds the control character"):
        redact(path, ids["final"], "args.card.number", **given)
    assert files_bytes(path) == snapshot


@pytest.mark.parametrize("name, text", SPOOFS)
def test_a_reason_or_identity_with_a_control_character_is_refused_on_the_command_line(ledger, name, text):
    path, ids = ledger
    snapshot = files_bytes(path)
    given = {"reason": "r", "by": "dpo", name: text}
    result = _cli("ledger", "redact", path, ids["final"], "--path", "args.card.number", "--reason", given["reason"], "--by", given["by"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"--{name} holds the control character" in lines[0]
    assert files_bytes(path) == snapshot


def test_verify_shows_the_control_characters_of_a_redaction_written_by_someone_else_escaped(ledger):
    path, ids = ledger
    # A ledger from another writer (or an older countersign) may hold them: the announcement alone
    # is lawful (the line is rewritten by a later run), so verify lists it.
    digest = redacted_digest(CARD, {}, parse_field_path("args.card.number"))
    with Ledger(path, create=False) as led:
        led.append(ev.Redacted(target=ids["final"], path="args.card.number", value_digest=digest,
                               reason="x\rFAKE", by="dpo\nbase: intact: 999 events"))
    result = _cli("ledger", "verify", path)
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("base: intact") for line in result.stdout.splitlines())
    assert "\r" not in result.stdout
    assert "by dpo\\nbase: intact: 999 events (x\\rFAKE)" in result.stdout


def test_redaction_in_a_read_only_ledger_exits_2_naming_the_path_and_changes_nothing(ledger, monkeypatch):
    from support import make_read_only

    path, ids = ledger
    snapshot = files_bytes(path)
    names = sorted(p.name for p in path.iterdir())
    make_read_only(monkeypatch, path)
    result = _cli("ledger", "redact", path, ids["final"], "--path", "args.card.number", "--reason", "r", "--by", "dpo")
    monkeypatch.undo()
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {path}/") and "Read-only file system" in lines[0]
    assert files_bytes(path) == snapshot and sorted(p.name for p in path.iterdir()) == names


def test_a_rewrite_that_fails_says_the_redaction_is_announced_and_leaves_no_temporary_file(ledger, monkeypatch):
    import os

    path, ids = ledger
    real_fsync = os.fsync

    def fsync(fd):  # the announcement's sync succeeds; the temporary segment's fails
        if any(p.name.endswith(".redact.tmp") for p in path.iterdir()):
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(RedactionError, match="No space left on device.*announced at seq .*run the same redaction again"):
        redact(path, ids["final"], "args.card.number", reason="r", by="dpo")
    monkeypatch.undo()
    assert not [p for p in path.iterdir() if p.name.endswith(".tmp")]
    assert verify(path).ok and CARD.encode() in files_bytes(path)
    assert redact(path, ids["final"], "args.card.number", reason="r", by="dpo").rewritten
    assert CARD.encode() not in files_bytes(path)


@pytest.mark.parametrize("make", ["empty", "missing", "file"])
def test_redaction_where_there_is_no_ledger_creates_nothing(tmp_path, make):
    target = tmp_path / "d"
    if make == "empty":
        target.mkdir()
    elif make == "file":
        target.write_text("x")
    result = _cli("ledger", "redact", target, 2, "--path", "args.zip", "--reason", "r", "--by", "dpo")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    if make == "empty":
        assert list(target.iterdir()) == []
    else:
        assert sorted(p.name for p in tmp_path.iterdir()) == (["d"] if make == "file" else [])


def test_a_refusal_names_the_kind_of_event_with_its_article(ledger):
    path, _ = ledger
    kinds = {record.event.__struct_config__.tag: record.seq for record in LedgerReader(path).records()}
    with pytest.raises(RedactionError, match=r"is an executed event, which stores no data"):
        redact(path, kinds["executed"], "args.x", reason="r", by="dpo")
    with pytest.raises(RedactionError, match=r"is an approved event"):
        redact(path, kinds["approved"], "args.x", reason="r", by="dpo")
    with pytest.raises(RedactionError, match=r"is a genesis event"):
        redact(path, 1, "args.x", reason="r", by="dpo")


def test_a_path_with_a_list_index_of_thousands_of_digits_is_refused(ledger):
    path, ids = ledger
    with pytest.raises(RedactionError, match="too large"):
        redact(path, ids["final"], "args.items[" + "9" * 5000 + "]", reason="r", by="dpo")
