"""Policies pinned in the ledger (ledger.pinning, docs/ledger-format.md section 11.5), `ledger
audit` (ledger.audit) and `policy whatif` (ledger.whatif): the text that decided is kept and
checked by every verifier; a forged decision is found; a Gate-written ledger, the demo and a
ledger of the corpus's calls conform; whatif reports what another policy changes."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from cli.main import app
from dsl import Policy
from independent_verifier import verify_dir
from ledger import events as ev, pinning
from ledger.audit import audit
from ledger.clock import ManualClock
from ledger.digest import canonical_spelling, encode_arguments
from ledger.proof.fast import verify_fast
from ledger.proof.redact import redact
from ledger.proof.verify import verify
from ledger.store import native
from ledger.store.lines import compose, split
from ledger.store.log import Ledger, LedgerReader
from ledger.whatif import whatif
from ledger.workflow.deciding import rule_refs
from ledger.workflow.gate import Gate
from support import POLICY_TEXT, START, policy

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def gate_ledger(path: Path, **kwargs) -> ManualClock:
    """Proposals of every effect, an approval, an edit that re-entered the policy, an execution."""
    clock = ManualClock(START)
    with Gate(policy(), path, clock=clock, **{"pin_policy": True, **kwargs}) as g:
        g.propose("read_thing", {"i": 1}, proposer="agent")
        g.propose("drop_thing", {"i": 2}, proposer="agent")
        p = g.propose("big_change", {"amount": 10}, proposer="agent", context={"cwd": "/w"})
        g.edit(p.request, editor="sup-1", args={"amount": 20})
        g.approve(p.request, approver="sup-2", digest=g.get(p.request).digest)
        g.execute(p.request, lambda args: "done")
        g.propose("wire", {"amount": 500}, proposer="agent")
    return clock


def lines_of(path: Path) -> list[bytes]:
    return [line for seg in sorted(path.glob("events-*.jsonl")) for line in seg.read_bytes().splitlines()]


def rewrite(path: Path, lines: list[bytes]) -> None:
    for seg in sorted(path.glob("events-*.jsonl"))[1:]:
        seg.unlink()
    (path / "events-00000001.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


def pinned_line(path: Path) -> tuple[int, bytes]:
    for index, line in enumerate(lines_of(path)):
        if line.startswith(b'{"body":{"kind":"policy",'):
            return index, line
    raise AssertionError("no policy event")


def both_verifiers_fail_at(path: Path, seq: int, kind: str = "data") -> None:
    report = verify(path, engine="python")
    assert not report.ok and report.problem.seq == seq and report.problem.kind == kind, report.problem
    assert verify_fast(path) is None  # the compiled verifier declines, the reference words it
    assert verify(path).problem == report.problem
    assert verify_dir(path)[3] == seq


# --- the text kept, and checked ----------------------------------------------------------------------


def test_a_gate_pins_its_policy_once_before_its_first_proposal(tmp_path):
    path = tmp_path / "l"
    gate_ledger(path)
    records = list(LedgerReader(path).records())
    pins = [r for r in records if isinstance(r.event, ev.PolicyLoaded)]
    assert len(pins) == 1 and pins[0].seq == 2  # before the first proposal, in its write
    event = pins[0].event
    assert event.digest == policy().digest and event.files == (ev.PinnedFile("test.policy", policy().source_digest),)
    assert msgspec.json.decode(pins[0].data) == {"files": [{"path": "test.policy", "text": POLICY_TEXT}], "groups": {}}
    assert pinning.load(event, pins[0].data).digest == policy().digest
    # reopened from the snapshot, or by a full replay: the text is known to be kept, nothing is added
    for kwargs in ({}, {"full_verify": True}, {"snapshot": False}):
        with Gate(policy(), path, clock=ManualClock(START), pin_policy=True, **kwargs) as g:
            g.propose("read_thing", {"i": 9}, proposer="agent")
    assert sum(isinstance(r.event, ev.PolicyLoaded) for r in LedgerReader(path).records()) == 1
    assert verify(path).ok and verify(path, engine="python").ok and verify_dir(path)[0]
    if native.available():
        assert verify_fast(path) is not None  # the compiled verifier reads pinned policies


def test_record_policy_keeps_the_text_and_roster_groups_count_in_the_digest(tmp_path):
    text = 'policy "r"\nask pay approvers 1 from finance\ndefault deny \"No.\"\n'
    loaded = Policy.from_text(text, "/etc/r.policy", groups={"finance": ["fin-2", "fin-1"], "other": ["x"]})
    with Gate(None, tmp_path / "l", clock=ManualClock(START)) as g:
        g.record_policy(loaded, "ops")
        g.record_policy(loaded, "ops")  # kept already: nothing
    [record] = [r for r in LedgerReader(tmp_path / "l").records() if isinstance(r.event, ev.PolicyLoaded)]
    assert msgspec.json.decode(record.data)["groups"] == {"finance": ["fin-1", "fin-2"]}  # only the group it names
    assert pinning.load(record.event, record.data).digest == loaded.digest != loaded.source_digest
    assert verify(tmp_path / "l").ok and verify_dir(tmp_path / "l")[0]


@pytest.mark.parametrize("change", ["text edited", "text of another policy", "groups added", "data removed",
                                    "path renamed", "not canonical"])
def test_a_tampered_or_swapped_policy_text_is_caught_by_every_verifier(tmp_path, change):
    path = tmp_path / "l"
    gate_ledger(path)
    lines = lines_of(path)
    index, line = pinned_line(path)
    body, digest, data = split(line)
    value = msgspec.json.decode(data)
    if change == "text edited":
        value["files"][0]["text"] = value["files"][0]["text"].replace("allow read_thing", "allow drop_thing")
    elif change == "text of another policy":
        value["files"][0]["text"] = (SAMPLES / "retail.policy").read_text()
    elif change == "groups added":
        value["groups"] = {"sups": ["mallory"]}
    elif change == "data removed":
        value = None
    elif change == "path renamed":
        value["files"][0]["path"] = "other.policy"
    new = data.replace(b'"groups":{}', b'"groups": {}') if change == "not canonical" else canonical_spelling(value)
    lines[index] = b'{"body":' + body + b',"hash":"' + digest.encode() + b'","data":' + new + b"}"
    rewrite(path, lines)
    both_verifiers_fail_at(path, index + 1)
    assert run("ledger", "verify", path).exit_code == 1


def test_a_policy_event_that_names_another_digest_than_its_files_give_is_caught(tmp_path):
    """Who rewrites the body too (and chains every hash again) must make the digest the text's:
    a proposal's `policy_digest` then names a policy whose text is not kept (audit says so)."""
    path = tmp_path / "l"
    gate_ledger(path)
    lines = lines_of(path)
    index, _ = pinned_line(path)
    prev, out = ev.GENESIS_PREV, []
    for i, line in enumerate(lines):
        body, _, data = split(line)
        event = ev.decode_event(body)
        if i == index:
            event = msgspec.structs.replace(event, digest="f" * 64)
        prev, new = compose(ev.encode_event(msgspec.structs.replace(event, prev=prev)), data)
        out.append(new.rstrip(b"\n"))
    rewrite(path, out)
    both_verifiers_fail_at(path, index + 1)


# --- audit -------------------------------------------------------------------------------------------


def test_audit_passes_on_a_gate_written_ledger_with_an_edit(tmp_path):
    gate_ledger(tmp_path / "l")
    report = audit(tmp_path / "l")
    assert (report.calls, report.conforming, report.differing, report.unchecked) == (5, 5, 0, 0)
    assert report.conforms
    result = run("ledger", "audit", tmp_path / "l")
    assert result.exit_code == 0, result.output
    assert "every call conforms to its policy" in result.output


def test_audit_finds_a_proposal_whose_effect_was_forged(tmp_path):
    """A writer of its own appends, through the store, a proposal the policy allows, recorded as
    a deny (and one with the right effect but another rule): the chain is intact, the history
    lawful, and the audit finds both."""
    path = tmp_path / "l"
    loaded = policy()
    files, data = pinning.pin(loaded)
    with Ledger(path, clock=ManualClock(START)) as ledger:
        ledger.append(ev.PolicyLoaded(name=loaded.name, digest=loaded.digest, by="ops", source=None, files=files), data)

        def proposal(tool, args, effect, rules):
            digest, args_json = encode_arguments(args)
            context_digest, context_json = encode_arguments({})
            return ev.Proposed(run=None, proposer="agent", call_id=None, tool=tool, args_digest=digest,
                               context_digest=context_digest, policy=loaded.name, policy_digest=loaded.digest,
                               effect=effect, rules=rules, reasons=()), \
                b'{"args":' + args_json + b',"context":' + context_json + b"}"

        honest = loaded.evaluate("read_thing", {"i": 1})
        ledger.append(*proposal("read_thing", {"i": 1}, "allow", rule_refs(honest)))
        forged = ledger.append(*proposal("read_thing", {"i": 2}, "deny", rule_refs(honest)))
        other_rule = ledger.append(*proposal("read_thing", {"i": 3}, "allow", (ev.RuleRef("deny-1", 21),)))
    assert verify(path).ok  # intact and lawful: only the audit tells
    report = audit(path)
    assert (report.calls, report.conforming, report.differing) == (3, 1, 2)
    found = {f.seq: f for f in report.differences}
    assert found[forged.seq].recorded_effect == "deny" and found[forged.seq].decided_effect == "allow"
    assert found[other_rule.seq].decided_rules[0].id == honest.deciding[0]
    result = run("ledger", "audit", path)
    assert result.exit_code == 1 and str(forged.seq) in result.output
    as_json = json.loads(run("ledger", "audit", path, "--json").output)
    assert as_json["differing"] == 2 and as_json["exit_code"] == 1 and not as_json["conforms"]
    rows = [json.loads(line) for line in run("ledger", "audit", path, "--format", "jsonl").output.splitlines()]
    assert {row["seq"] for row in rows} == {forged.seq, other_rule.seq}


def test_calls_whose_policy_text_is_not_kept_or_whose_arguments_were_redacted_are_not_checkable(tmp_path):
    old = tmp_path / "old"
    gate_ledger(old, pin_policy=False)  # as a ledger written before policies were pinned
    report = audit(old)
    assert report.conforming == 0 and report.unchecked == report.calls == 5
    assert report.unchecked_by_reason == {"policy text unavailable": 5}
    assert run("ledger", "audit", old).exit_code == 1
    assert run("ledger", "audit", old, "--allow-unchecked").exit_code == 0
    # the text kept later (a record_policy after the fact) covers the calls before it: by digest
    with Gate(None, old, clock=ManualClock(START)) as g:
        g.record_policy(policy(), "ops")
    assert audit(old).conforms

    path = tmp_path / "l"
    clock = gate_ledger(path)
    denied = next(r.seq for r in LedgerReader(path).records() if isinstance(r.event, ev.Proposed) and r.event.tool == "drop_thing")
    redact(path, denied, "args.i", reason="erasure request", by="dpo", clock=clock)
    report = audit(path)
    assert report.unchecked == 1 and report.not_checkable[0].seq == denied
    assert report.unchecked_by_reason == {"arguments or context redacted": 1} and report.conforming == 4


def test_audit_of_the_demo_ledger_conforms(tmp_path):
    ledger = tmp_path / "demo"
    result = run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
                 "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", ledger)
    assert result.exit_code == 0, result.output
    report = audit(ledger)
    assert report.calls > 20 and report.conforms
    result = run("ledger", "audit", ledger)
    assert result.exit_code == 0, result.output


# --- whatif ------------------------------------------------------------------------------------------


STRICTER = (SAMPLES / "retail.policy").read_text().replace(
    "allow think, calculate",
    'allow think, calculate\nask get_user_details reason "A supervisor looks first." approvers 1 from supervisors '
    'id "sup-reads"\ndeny get_order_details reason "Orders are read by the desk." id "no-order-reads"')


def test_whatif_on_the_demo_reports_transitions_load_and_the_calls_a_deny_would_stop(tmp_path):
    ledger = tmp_path / "demo"
    run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
        "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", ledger)
    stricter = tmp_path / "stricter.policy"
    stricter.write_text(STRICTER)
    new = Policy.load(stricter)
    report = whatif(ledger, new)
    calls = [r.event for r in LedgerReader(ledger).records() if isinstance(r.event, ev.Proposed)]
    reads = sum(c.tool == "get_user_details" for c in calls)
    orders = sum(c.tool == "get_order_details" for c in calls)
    assert reads and orders
    assert report.transitions == {k: v for k, v in {"allow→ask": reads, "allow→deny": orders}.items()}
    assert {(c.from_effect, c.to_effect, c.rules) for c in report.changes} == {
        ("allow", "ask", "sup-reads"), ("allow", "deny", "no-order-reads")}
    assert report.stopped == orders and all(c.executed and c.tool == "get_order_details" for c in report.stopped_calls)
    # `executed` says the call ran whatever it becomes: the reads that now ask ran too (it said
    # false for every change but a deny)
    assert all(c.executed for c in report.changed_calls if c.to_effect == "ask")
    load = {g.group: g for g in report.load}
    assert load["supervisors"].asks_after == load["supervisors"].asks_before + reads
    # the same policy changes nothing
    same = whatif(ledger, Policy.load(SAMPLES / "retail.policy"))
    assert same.changed == 0 and same.replayed == same.proposals
    result = run("policy", "whatif", stricter, "--ledger", ledger, "--json")
    assert result.exit_code == 0 and json.loads(result.output)["stopped"] == orders
    rows = run("policy", "whatif", stricter, "--ledger", ledger, "--format", "csv").output.splitlines()
    assert rows[0] == "seq,ts,tool,from,to,rules,reason,executed" and len(rows) == 1 + reads + orders


def test_the_tables_fit_80_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    ledger = tmp_path / "demo"
    run("simulate", "--policy", SAMPLES / "retail.policy", "--calls", SAMPLES / "demo-calls.jsonl",
        "--reviewer", SAMPLES / "demo-reviewer.json", "--ledger", ledger)
    stricter = tmp_path / "stricter.policy"
    stricter.write_text(STRICTER)
    for args in (("ledger", "audit", ledger), ("policy", "whatif", stricter, "--ledger", ledger)):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert "┃" in result.output
        too_wide = [line for line in result.output.splitlines() if len(line) > 80 and not line.startswith(str(tmp_path)[:10])]
        assert not [line for line in too_wide if "│" in line or "┃" in line], too_wide


# --- the corpus ----------------------------------------------------------------------------------------


def test_a_ledger_of_the_corpus_tau_bench_calls_conforms_and_replays(tmp_path):
    calls_file = CORPUS / "tau_bench_actions.jsonl"
    if not calls_file.is_file():
        pytest.skip("the shared corpus is absent")
    retail = Policy.load(SAMPLES / "retail.policy")
    calls = [json.loads(line) for line in calls_file.read_text().splitlines() if line.strip()]
    path = tmp_path / "l"
    with Gate(retail, path, clock=ManualClock(START), pin_policy=True) as g:
        for n, call in enumerate(calls[:600]):
            g.propose(call["tool"], call["args"], proposer="agent", run=str(call.get("task")))
    report = audit(path)
    assert report.calls == 600 and report.conforms
    airline = whatif(path, Policy.load(SAMPLES / "airline.policy"))
    assert airline.replayed == 600 and airline.changed > 0


def test_the_documented_pinned_policy_line_is_what_a_writer_composes():
    text = (Path(__file__).resolve().parent.parent / "docs" / "ledger-format.md").read_text()
    line = next(l.strip() for l in text.splitlines() if '"files":[{"path":"refunds.policy"' in l).encode()
    body, digest, data = split(line)
    event = ev.decode_event(body)
    assert pinning.data_problem(event, data) is None
    assert compose(ev.encode_event(event), data)[1].rstrip(b"\n") == line
    assert pinning.load(event, data).name == "refunds"


def test_an_unpinned_ledger_says_how_to_pin(tmp_path):
    """A new user's Gate(policy, dir) ledger audited as '214 not checkable: policy text
    unavailable' with no word of why: the CLI now names pin_policy."""
    with Gate(Policy.from_text('policy "t"\ndefault allow\n'), tmp_path / "l") as gate:
        gate.propose("x", {}, proposer="a", run="r")
    result = run("ledger", "audit", tmp_path / "l")
    assert result.exit_code == 1 and "pin_policy=True" in result.output
