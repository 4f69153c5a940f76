"""Tests for tests/independent_verifier.py, a verifier written only from docs/ledger-format.md.

Real ledgers come from the project's command line (`countersign simulate`), and redacted ones
(section 10) from the project's own writer (tests/ledger_factory.Forge, ledger.proof.redact.redact); the
project's own verifier is consulted only through `countersign ledger verify --json`. The tests
near the end pin points the document once left open and now settles; both verifiers must agree on
them.
"""

import hashlib
import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from independent_verifier import N, D, digest, loads, verify_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / ".venv" / "bin" / "countersign"
SAMPLES = REPO / "samples"
SEG = "events-00000001.jsonl"


def H(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


# ---- the project's command line -----------------------------------------------------------------

def cli_verify(path, *extra):
    """(ok, count, head, first bad seq, exit code, report) from `countersign ledger verify --json`."""
    r = subprocess.run([str(CLI), "ledger", "verify", str(path), "--json", *extra],
                       capture_output=True, text=True, timeout=60)
    rep = json.loads(r.stdout)
    bad = rep["problem"]["seq"] if rep["problem"] else None
    return rep["ok"], rep["count"], rep["head"], bad, r.returncode, rep


def mine(path):
    ok, count, head, bad, _ = verify_dir(path)
    return ok, count, head, bad


def simulate_cmd(policy, calls, ledger, reviewer=None, *extra):
    cmd = [str(CLI), "simulate", "--policy", str(SAMPLES / policy), "--calls", str(calls),
           "--ledger", str(ledger), "--json", *extra]
    return cmd + (["--reviewer", str(reviewer)] if reviewer else [])


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


AIRLINE_CALLS = [
    {"tool": "get_user_details", "args": {"user_id": "mia_li_3668"}},
    {"tool": "book_reservation", "args": {
        "user_id": "mia_li_3668", "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li"}],
        "payment_methods": [{"payment_id": "credit_card_4421486", "amount": 126.5}],
        "total_baggages": 3, "nonfree_baggages": 0}},
    {"tool": "book_reservation", "args": {"flights": [], "passengers": [], "total_baggages": 1,
                                          "nonfree_baggages": 2}},
    {"tool": "update_reservation_baggages", "args": {"reservation_id": "NO6JO3",
                                                     "payment_id": "gift_card_7219486"}},
    {"tool": "cancel_reservation", "args": {"reservation_id": "ZFA04Y"}},
    {"tool": "send_certificate", "args": {"user_id": "raj", "amount": 50}},
    {"tool": "send_certificate", "args": {"user_id": "raj", "amount": 250.75}},
    {"tool": "send_certificate", "args": {"user_id": "raj", "amount": 600}},
    {"tool": "transfer_to_human_agents", "args": {"summary": "help"}},
    {"tool": "transfer_to_human_agents", "args": {"summary": "Compensation for a cancelled flight, résumé 🙂"}},
    {"tool": "calculate", "args": {"expression": "(126.5 + 0.1) * 2", "precision": 1e-7,
                                   "limits": [-0.0, 1.0, 1e3, -2.25e-10, 12345678901234567890123]}},
    {"tool": "unlisted_tool", "args": {"n": {"z": [True, False, None], "a": {"｡": 1, "😀": 2, "é": 3}}}},
    {"tool": "update_reservation_flights", "args": {"reservation_id": "XEHM4B", "flights": [{"x": 1}]}},
]
AIRLINE_REVIEWER = {
    "reviewers": ["desk-1", "desk-2", "sup-1"],
    "default": {"decision": "approve", "after": "2m"},
    "rules": [
        {"tool": "cancel_reservation", "decision": "reject", "after": "5m", "reason": "Confirm first."},
        {"tool": "update_reservation_baggages", "decision": "edit", "after": "3m",
         "set": {"payment_id": "credit_card_4421486"}, "reason": "Charge the card."},
        {"tool": "update_reservation_flights", "decision": "timeout"},
    ],
}
CWD = {"cwd": "/home/u/proj"}
CODING_CALLS = [
    {"tool": "Read", "args": {"file_path": "/home/u/proj/README.md"}, "context": CWD},
    {"tool": "Edit", "args": {"file_path": "/home/u/proj/m.py", "old_string": "1", "new_string": "2"},
     "context": CWD},
    {"tool": "Write", "args": {"file_path": "/etc/hosts", "content": "127.0.0.1 x"}, "context": CWD},
    {"tool": "Read", "args": {"file_path": "/home/u/proj/.env"}, "context": CWD},
    {"tool": "Bash", "args": {"command": "rm -rf / --no-preserve-root"}, "context": CWD},
    {"tool": "Bash", "args": {"command": "git push origin main"}, "context": CWD},
    {"tool": "Bash", "args": {"command": "sudo apt-get install jq"}, "context": CWD},
    {"tool": "Deploy", "args": {"env": "prod", "ratio": 0.25}, "context": {**CWD, "user": "zoë"}},
    {"tool": "mcp__db__execute_sql", "args": {"query": "SELECT 1"}, "context": CWD},
    {"tool": "submit", "args": {}, "context": CWD, "proposer": "alice"},
]
CODING_REVIEWER = {
    "reviewers": ["alice", "bob", "carol"],
    "default": {"decision": "approve", "after": "4m"},
    "rules": [
        {"tool": "Write", "decision": "edit", "after": "2m",
         "set": {"file_path": "/home/u/proj/hosts"}, "reason": "Inside the project."},
        {"tool": "Read", "decision": "reject", "after": "1m", "reason": "No secrets."},
        {"tool": "Deploy", "decision": "respond", "after": "1m", "message": "Deploys go through CI."},
        {"tool": "Bash", "args": {"command": "sudo apt-get install jq"}, "decision": "timeout"},
        {"tool": "mcp__db__execute_sql", "decision": "leave"},
    ],
}


@pytest.fixture(scope="session")
def ledgers(tmp_path_factory):
    """Three ledgers written by `countersign simulate` (run concurrently): name -> (dir, summary)."""
    if not CLI.exists():
        subprocess.run([str(REPO / ".venv/bin/pip"), "install", "-q", "-e", ".[test]"], cwd=REPO,
                       check=True)
    t = tmp_path_factory.mktemp("simulated")
    jobs = {
        "retail": simulate_cmd("retail.policy", SAMPLES / "demo-calls.jsonl", t / "retail",
                               SAMPLES / "demo-reviewer.json"),
        "airline": simulate_cmd("airline.policy", jsonl(t / "air.jsonl", AIRLINE_CALLS), t / "airline",
                                jsonl(t / "air-rev.json", [AIRLINE_REVIEWER])),
        "coding": simulate_cmd("coding-agent.policy", jsonl(t / "code.jsonl", CODING_CALLS),
                               t / "coding", jsonl(t / "code-rev.json", [CODING_REVIEWER])),
    }
    with ThreadPoolExecutor(3) as pool:
        runs = dict(zip(jobs, pool.map(lambda c: subprocess.run(c, capture_output=True, text=True,
                                                                check=True), jobs.values())))
    return {name: (t / name, json.loads(runs[name].stdout)) for name in jobs}


def copy_ledger(src, dst):
    dst.mkdir()
    for p in src.glob("events-*.jsonl"):
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def lines_of(ledger):
    return (ledger / SEG).read_bytes().split(b"\n")[:-1]


def write_lines(ledger, lines, end=b"\n"):
    (ledger / SEG).write_bytes(b"\n".join(lines) + end)


# ---- section 4: argument digests ----------------------------------------------------------------

def test_digest_of_empty_object_matches_document():
    assert digest({}) == "65c74c15a686187bb6bbf9958f494fc6b80068034a659a9ad44991b08c58f2d2"


def test_digest_of_user_id_object_matches_document():
    assert digest({"user_id": "u1"}) == \
        "adfe8981009c9a1337abc841aa8b8bafd716d945cf8925ed4989c7b9068b57ae"


def test_digest_of_scalars_is_hash_of_tag():
    assert (D(None), D(True), D(False)) == (H(b"n"), H(b"b1"), H(b"b0"))
    assert D("zoë") == H(b"s" + "zoë".encode("utf-8")) and D("") == H(b"s")


def test_integral_numbers_digest_as_exact_integers():
    spellings = ["1", "1.0", "1e0", "10E-1", "1.000", "0.1e1"]
    assert {digest(loads(s.encode())) for s in spellings} == {H(b"d1").hex()}
    assert D(1) == D(1.0) == D(loads(b"1e0"))
    assert D(loads(b"-0.0")) == D(0) == H(b"d0")
    assert D(loads(b"1e3")) == H(b"d1000")
    assert D(loads(b"12345678901234567890123")) == H(b"d12345678901234567890123")


def test_a_number_with_an_exponent_is_read_as_the_nearest_double():
    exact = int(1.5e300)  # the exact value of the double nearest to 1.5e300, 301 digits
    assert len(str(exact)) == 301 and str(exact) != "15" + "0" * 299
    assert D(loads(b"1.5e300")) == H(b"d" + str(exact).encode())
    assert D(loads(b"0.99999999999999999999")) == H(b"d1")
    with pytest.raises(ValueError):
        loads(b"1e400")


@pytest.mark.parametrize("text,canonical", [
    ("0.1", "0.1"), ("123.456", "123.456"), ("-2.5", "-2.5"), ("0.0001", "0.0001"),
    ("1e-5", "1e-05"), ("0.00001", "1e-05"), ("1.5e-7", "1.5e-07"), ("-2.25e-10", "-2.25e-10"),
    ("0.30000000000000004", "0.30000000000000004"), ("5e-324", "5e-324"),
])
def test_non_integral_number_text_is_shortest_round_trip(text, canonical):
    assert N(loads(text.encode())) == canonical
    assert D(loads(text.encode())) == H(b"d" + canonical.encode())


def test_array_digest_concatenates_item_digests_in_order():
    assert D([]) == H(b"l")
    assert D([1, "a"]) == H(b"l" + H(b"d1") + H(b"sa"))
    assert D([1, "a"]) != D(["a", 1])


def test_object_digest_is_independent_of_member_order():
    items = [(f"k{i}", i) for i in range(20)]
    a = dict(items)
    random.Random(7).shuffle(items)
    assert D(a) == D(dict(items))
    assert D(loads(b'{"b":1,"a":[true]}')) == D(loads(b'{ "a" : [ true ] , "b" : 1.0 }'))


def test_object_members_sorted_by_utf8_bytes_not_utf16():
    # U+FF61 is EF BD A1 in UTF-8 and sorts before U+1F600 (F0 ...); in UTF-16 it sorts after.
    v = {"\U0001F600": 2, "\uff61": 1}
    expected = H(b"o" + H("s\uff61".encode()) + H(b"d1") + H("s\U0001F600".encode()) + H(b"d2"))
    assert D(v) == expected


def test_nested_value_digest_by_hand():
    inner = H(b"o" + H(b"sb") + H(b"n"))
    expected = H(b"o" + H(b"sa") + H(b"l" + H(b"d1") + inner + H(b"l")) + H(b"sc") + H(b"o"))
    assert D(loads(b'{"c":{},"a":[1.0,{"b":null},[]]}')) == expected


def test_escaped_and_raw_strings_digest_alike():
    assert D(loads(b'"\\u00e9\\n"')) == D(loads('"é\\n"'.encode())) == H("sé\n".encode())


# ---- real ledgers from `countersign simulate` --------------------------------------------------------

@pytest.mark.parametrize("name", ["retail", "airline", "coding"])
def test_simulated_ledger_is_intact_and_matches_simulate_summary(ledgers, name):
    path, summary = ledgers[name]
    ok, count, head, bad, message = verify_dir(path)
    assert (ok, count, head, bad) == (True, summary["events"], summary["head"], None), message


@pytest.mark.parametrize("name", ["retail", "airline", "coding"])
def test_simulated_ledger_count_and_head_agree_with_cli(ledgers, name):
    ok, count, head, bad, code, _ = cli_verify(ledgers[name][0])
    assert (ok, bad, code) == (True, None, 0)
    assert mine(ledgers[name][0]) == (True, count, head, None)


def test_recovered_event_after_torn_tail_verifies_with_both(ledgers, tmp_path):
    led = copy_ledger(ledgers["coding"][0], tmp_path / "l")
    with open(led / SEG, "ab") as f:
        f.write(b'{"body":{"kind":"prop')
    calls = jsonl(tmp_path / "more.jsonl", CODING_CALLS[:2])  # the ledger holds these two calls: --again
    subprocess.run(simulate_cmd("coding-agent.policy", calls, led, None, "--start",
                                "2026-02-01T00:00:00Z", "--again"), check=True, capture_output=True)
    assert b'"kind":"recovered"' in (led / SEG).read_bytes()
    ok, count, head, bad, code, _ = cli_verify(led)
    assert (ok, code) == (True, 0) and mine(led) == (True, count, head, None)


def test_ledger_split_across_segments_verifies_like_one_segment(ledgers, tmp_path):
    src = ledgers["retail"][0]
    lines = lines_of(src)
    led = tmp_path / "split"
    led.mkdir()
    for n, (a, b) in enumerate([(0, 10), (10, 10), (10, 50), (50, len(lines))], 1):
        (led / f"events-{n:08d}.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[a:b]))
    ok, count, head, bad, code, _ = cli_verify(led)
    assert mine(led) == mine(src) == (True, count, head, None) and code == 0


# ---- tampered copies: both reject and name the same first bad seq ----------------------------------

def flip(line: bytes, at: int) -> bytes:
    c = line[at:at + 1]
    return line[:at] + (b"b" if c == b"a" else b"a") + line[at + 1:]


def flip_in(i, marker, offset):
    """An edit that flips the byte `offset` bytes after `marker` in line i (0-based)."""
    return lambda ls: ls.__setitem__(i, flip(ls[i], ls[i].index(marker) + offset))


def first_with(lines, marker, start):
    """The index of the first line from `start` on that holds `marker` (which lines are
    proposals moves as the sample policies and the Gate's pinning change)."""
    return next(i for i in range(start, len(lines)) if marker in lines[i])


def flip_in_first(marker, start, offset):
    """flip_in on the first line from `start` on that holds `marker`."""
    return lambda ls: flip_in(first_with(ls, marker, start), marker, offset)(ls)


TAMPERS = {
    # name: (edit the list of lines, first bad seq)
    "body_byte": (flip_in_first(b'"tool":"', 10, 9), lambda ls: first_with(ls, b'"tool":"', 10) + 1),
    "hash_byte": (flip_in(20, b'"hash":"', 12), 21),
    "data_byte": (flip_in(4, b'"data":', 20), 5),
    "deleted_line": (lambda ls: ls.__delitem__(30), 31),
    "swapped_lines": (lambda ls: ls.__setitem__(slice(40, 42), [ls[41], ls[40]]), 41),
    "duplicated_line": (lambda ls: ls.insert(12, ls[11]), 13),
}


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_tampered_copy_rejected_by_both_at_same_seq(ledgers, tmp_path, tamper):
    edit, seq = TAMPERS[tamper]
    led = copy_ledger(ledgers["retail"][0], tmp_path / "l")
    lines = lines_of(led)
    seq = seq(lines) if callable(seq) else seq
    edit(lines)
    write_lines(led, lines)
    ok, count, head, bad, code, _ = cli_verify(led)
    assert (ok, bad, code) == (False, seq, 1)
    assert mine(led) == (False, seq - 1, head, seq) and count == seq - 1


def test_last_line_truncated_midway_is_a_torn_tail_for_both(ledgers, tmp_path):
    src = ledgers["retail"][0]
    led = copy_ledger(src, tmp_path / "l")
    data = (led / SEG).read_bytes()
    (led / SEG).write_bytes(data[:-40])
    ok, count, head, bad, code, rep = cli_verify(led)
    n = ledgers["retail"][1]["events"]
    expected_head = json.loads(lines_of(src)[-2])["hash"]
    assert (ok, count, head, code) == (True, n - 1, expected_head, 0) and rep["warnings"]
    ok2, count2, head2, bad2, msg = verify_dir(led)
    assert (ok2, count2, head2, bad2) == (True, n - 1, expected_head, None) and "torn" in msg
    # Only a head saved earlier reveals the loss.
    assert cli_verify(led, "--expect-head", ledgers["retail"][1]["head"])[4] == 1


def test_torn_tail_without_final_line_feed_is_ignored_by_both(ledgers, tmp_path):
    led = copy_ledger(ledgers["airline"][0], tmp_path / "l")
    with open(led / SEG, "ab") as f:
        f.write(b'{"body":{"kind":"approved","seq":')
    ok, count, head, bad, code, rep = cli_verify(led)
    assert (ok, code) == (True, 0) and rep["warnings"]
    assert mine(led) == (True, count, head, None) == (True, *mine(ledgers["airline"][0])[1:3], None)


def test_ledger_of_only_a_torn_tail_has_no_genesis_for_both(tmp_path):
    (tmp_path / SEG).write_bytes(b'{"body":{"kind":"genesis"')
    assert mine(tmp_path) == (False, 0, "0" * 64, 1) and cli_verify(tmp_path)[3] == 1


def test_directory_without_segments_is_unreadable_for_both(tmp_path):
    assert verify_dir(tmp_path)[:4] == (False, 0, "0" * 64, None)
    assert cli_verify(tmp_path)[4] == 2


# ---- workflow rules: lawful chains that record unlawful histories --------------------------------

def quorums(count, approvers=("a", "b", "c"), *more):
    """Requirements' quorums: one of `count` from `approvers`, then (count, approvers) pairs."""
    pairs = [(count, approvers), *more]
    return [{"count": n, "approvers": list(a) if a is not None else None, "group": None} for n, a in pairs]


REQ = {"quorums": quorums(1), "decisions": ["approve", "edit", "reject", "respond"], "timeout_seconds": 3600,
       "on_timeout": "reject", "timeout_message": None}
R2 = {**REQ, "quorums": quorums(2)}
DEADLINE = "2026-01-01T01:00:00.000000Z"
DEFAULTS = {
    "genesis": dict(format="countersign-ledger/1", ledger_id="t"),
    "proposed": dict(run="r", proposer="agent", call_id=None, tool="t", args_digest=None,
                     context_digest=digest({}), policy="p", policy_digest="0" * 64, effect="ask",
                     rules=[{"id": "L1", "line": 1}], reasons=[]),
    "interrupted": dict(request=2, requirements=REQ, deadline=DEADLINE),
    "approved": dict(request=2, approver="a", args_digest=None, comment=None),
    "edited": dict(request=2, editor="a", args_digest=None, replaces=None, policy_digest="0" * 64,
                   effect="ask", rules=[], requirements=REQ, reason=None),
    "rejected": dict(request=2, approver="a", reason="no"),
    "responded": dict(request=2, approver="a", message="m"),
    "expired": dict(request=2, outcome="reject", message=None),
    "cancelled": dict(request=2, by="agent", reason=None),
    "execution_started": dict(request=2, args_digest=None, executor=None),
    "executed": dict(request=2, args_digest=None, outcome="ok", result_digest=None, error=None),
    "recovered": dict(segment=SEG, offset=1, fragment_bytes=1, fragment_sha256="0" * 64,
                      quarantine="quarantine/x"),
}


def E(kind, **members):
    return kind, members


def build(path, events):
    """Write a correctly chained ledger: genesis + events. Event i (1-based) has ts minute i
    unless `minute` is given; a None args_digest becomes the request's current digest; an
    `edited` carries data {"args": new_args} (default {"x": 2})."""
    path.mkdir(exist_ok=True)
    prev, out, current = "0" * 64, [], {}
    for i, (kind, given) in enumerate([E("genesis")] + list(events), 1):
        m = {**DEFAULTS[kind], **given}
        minute, data = m.pop("minute", i), None
        if kind == "proposed":
            data = {"args": {"x": 1}, "context": {}}
            current[i] = m["args_digest"] = m["args_digest"] or digest({"x": 1})
        elif kind == "edited":
            data = {"args": m.pop("new_args", {"x": 2})}
            m["replaces"] = m["replaces"] or current[m["request"]]
            current[m["request"]] = m["args_digest"] = m["args_digest"] or digest(data["args"])
        elif "args_digest" in m and m["args_digest"] is None:
            m["args_digest"] = current[m["request"]]
        body = {"kind": kind, "seq": i, "ts": f"2026-01-01T{minute // 60:02d}:{minute % 60:02d}:00.000000Z",
                "prev": prev, **m}
        b = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        prev = hashlib.sha256(b.encode()).hexdigest()
        d = json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        out.append(f'{{"body":{b},"hash":"{prev}","data":{d}}}\n')
    (path / SEG).write_text("".join(out))
    return path


P, I, A = E("proposed"), E("interrupted"), E("approved")
ALLOW = E("proposed", effect="allow")
WORKFLOW = {
    # name: (events after genesis, first bad seq or None when lawful)
    "lawful_ask_approve_execute": ([P, I, A, E("execution_started"), E("executed")], None),
    "lawful_quorum_of_two": ([P, E("interrupted", requirements=R2), A, E("approved", approver="b"),
                              E("execution_started")], None),
    "lawful_edit_counts_as_approval": ([P, I, E("edited"), E("execution_started")], None),
    "lawful_expiry_at_deadline": ([P, I, E("expired", minute=60)], None),
    "lawful_cancel_before_interrupt": ([P, E("cancelled")], None),
    "lawful_recovered_between_events": ([ALLOW, E("recovered"), E("execution_started")], None),
    "request_names_a_later_seq": ([P, E("interrupted", request=4)], 3),
    "request_names_a_non_proposal": ([P, E("interrupted", request=1)], 3),
    "event_after_rejection": ([P, I, E("rejected"), E("approved", approver="b")], 5),
    "event_after_denial": ([E("proposed", effect="deny"), E("cancelled")], 3),
    "event_after_execution": ([ALLOW, E("execution_started"), E("executed"), E("cancelled")], 5),
    "interrupt_of_allowed_proposal": ([ALLOW, I], 3),
    "second_interrupt": ([P, I, I], 4),
    "decision_before_interrupt": ([P, A], 3),
    "decision_by_proposer_when_anyone_may": (
        [P, E("interrupted", requirements={**REQ, "quorums": quorums(1, None)}), E("approved", approver="agent")], 4),
    "decision_by_non_approver": ([P, I, E("approved", approver="z")], 4),
    "decision_kind_not_allowed": (
        [P, E("interrupted", requirements={**REQ, "decisions": ["approve"]}), E("responded")], 4),
    "decision_at_deadline": ([P, I, E("approved", minute=60)], 4),
    "approval_of_other_digest": ([P, I, E("approved", args_digest="f" * 64)], 4),
    "same_approver_twice": ([P, E("interrupted", requirements=R2), A, A], 5),
    "decision_after_approval": ([P, I, A, E("rejected", approver="b")], 5),
    "edit_replacing_other_digest": ([P, I, E("edited", replaces="e" * 64)], 4),
    "edit_to_deny": ([P, I, E("edited", effect="deny")], 4),
    "approval_of_digest_replaced_by_edit": (
        [P, E("interrupted", requirements=R2), E("approved", approver="b"), E("edited", requirements=R2),
         E("approved", approver="b", args_digest=digest({"x": 1}))], 6),
    "approvals_before_edit_stop_counting": (
        [P, E("interrupted", requirements=R2), E("approved", approver="b"), E("edited", requirements=R2),
         E("execution_started")], 6),
    "editor_approving_own_edit_again": (
        [P, E("interrupted", requirements=R2), E("edited", requirements=R2), A], 5),
    "edit_not_admitting_editor_is_no_approval": (
        [P, I, E("edited", requirements={**REQ, "quorums": quorums(1, ["b"])}), E("execution_started")], 5),
    "two_quorums_both_met": (
        [P, E("interrupted", requirements={**REQ, "quorums": quorums(2, ["a", "b"], (1, ["c"]))}),
         E("approved", approver="a"), E("approved", approver="b"), E("approved", approver="c"),
         E("execution_started")], None),
    "two_quorums_one_met": (
        [P, E("interrupted", requirements={**REQ, "quorums": quorums(2, ["a", "b"], (1, ["c"]))}),
         E("approved", approver="a"), E("approved", approver="b"), E("execution_started")], 6),
    "one_approval_counts_for_both_quorums": (
        [P, E("interrupted", requirements={**REQ, "quorums": quorums(1, ["a", "b"], (1, ["b", "c"]))}),
         E("approved", approver="b"), E("execution_started")], None),
    "decider_no_quorum_admits": (
        [P, E("interrupted", requirements={**REQ, "quorums": quorums(1, ["a"], (1, ["b"]))}),
         E("rejected", approver="c")], 4),
    "edit_requirements_govern_next_decision": (
        [P, E("interrupted", requirements=R2), E("edited", requirements={**R2, "decisions": ["edit"]}),
         E("approved", approver="b")], 5),
    "expiry_before_deadline": ([P, I, E("expired", minute=59)], 4),
    "expiry_of_approved_request": ([P, I, A, E("expired", minute=61)], 5),
    "execution_before_quorum": ([P, E("interrupted", requirements=R2), A, E("execution_started")], 5),
    "execution_of_other_digest": ([ALLOW, E("execution_started", args_digest="f" * 64)], 3),
    "execution_started_twice": ([ALLOW, E("execution_started"), E("execution_started")], 4),
    "executed_without_start": ([ALLOW, E("executed")], 3),
    "executed_with_other_digest": ([ALLOW, E("execution_started"), E("executed", args_digest="f" * 64)], 4),
    "second_genesis": ([E("genesis")], 2),
}


@pytest.fixture(scope="session")
def workflow_reports(tmp_path_factory):
    """Build every WORKFLOW ledger and ask the CLI about all of them concurrently."""
    root = tmp_path_factory.mktemp("workflow")
    paths = {name: build(root / name, events) for name, (events, _) in WORKFLOW.items()}
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(paths, pool.map(cli_verify, paths.values()))), paths


@pytest.mark.parametrize("case", list(WORKFLOW))
def test_workflow_history_judged_alike_by_both(workflow_reports, case):
    reports, paths = workflow_reports
    seq = WORKFLOW[case][1]
    ok, count, head, bad, message = verify_dir(paths[case])
    assert (ok, bad) == (seq is None, seq), message
    c_ok, c_count, c_head, c_bad, _, rep = reports[case]
    assert (c_ok, c_count, c_head, c_bad) == (ok, count, head, bad), rep


# ---- section 2, 3, 5 checks on crafted lines (this verifier only) -----------------------------------

def rewrite(path, i, edit):
    """Apply `edit` to the text of line i (1-based) and re-chain every later line."""
    lines = lines_of(path)
    prev = "0" * 64
    for k, line in enumerate(lines, 1):
        s = line.decode()
        end = s.index(',"hash":"')
        body, data = s[8:end], s[end + 9 + 64 + 9:-1]
        body = body.replace(body[body.index('"prev":"'):][:73], f'"prev":"{prev}"')
        if k == i:
            body, data = edit(body, data)
        prev = hashlib.sha256(body.encode()).hexdigest()
        lines[k - 1] = f'{{"body":{body},"hash":"{prev}","data":{data}}}'.encode()
    write_lines(path, lines)
    return path


@pytest.mark.parametrize("edit", [
    lambda b, d: (b.replace('"tool":', '"tool":"x","tool":'), d),           # duplicate member
    lambda b, d: (b.replace('"reasons":[]', '"reasons":[],"extra":1'), d),  # unknown member
    lambda b, d: (b.replace('"seq":2,', '"seq":2.0,'), d),                  # seq not an integer
    lambda b, d: (b.replace('"effect":"ask"', '"effect":"maybe"'), d),      # effect not listed
    lambda b, d: (b.replace('"ts":"2026-01-01T00:02:00.000000Z"', '"ts":"2026-01-01T00:02:00Z"'), d),
    lambda b, d: (b.replace(',"tool"', ', "tool"'), d),                     # whitespace in BODY
    lambda b, d: (b, d.replace('"x":1', '"x":2')),                          # data vs args_digest
    lambda b, d: (b, d.replace('"context":{}', '"context":{"a":1}')),       # data vs context_digest
    lambda b, d: (b, "null"),                                               # proposal without data
    lambda b, d: (b, d.replace('"x":1', '"x":NaN')),                        # not JSON
], ids=["duplicate_member", "unknown_member", "float_seq", "unlisted_effect", "short_ts",
        "whitespace_in_body", "args_digest_mismatch", "context_digest_mismatch", "missing_data",
        "nan_in_data"])
def test_malformed_proposal_rejected_at_its_seq(tmp_path, edit):
    led = rewrite(build(tmp_path / "l", [P, I]), 2, edit)
    assert mine(led)[3] == 2


def test_member_order_is_checked_by_both(tmp_path):
    led = rewrite(build(tmp_path / "l", [P]), 2,
                  lambda b, d: (b.replace('"run":"r",', "").replace('"reasons":[]', '"reasons":[],"run":"r"'), d))
    assert mine(led)[3] == cli_verify(led)[3] == 2


def test_data_spelling_is_not_checked_only_values(tmp_path):
    led = rewrite(build(tmp_path / "l", [P]), 2, lambda b, d: (b, '{"context":{},"args":{"x":1.0}}'))
    assert mine(led)[0] is True


def test_segment_numbers_must_run_from_one_without_gaps(ledgers, tmp_path):
    lines = lines_of(ledgers["retail"][0])
    tmp_path.joinpath("events-00000001.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:10]))
    tmp_path.joinpath("events-00000003.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[10:]))
    assert mine(tmp_path)[3] == 11


# ---- points the document once left open, now settled in it: both verifiers agree -----------------

def test_an_exponent_spelled_number_in_a_real_ledger_verifies_with_both(tmp_path):
    calls = jsonl(tmp_path / "c.jsonl", [{"tool": "calculate", "args": {"x": 1.5e300}}])
    subprocess.run(simulate_cmd("airline.policy", calls, tmp_path / "l"), check=True,
                   capture_output=True)
    assert mine(tmp_path / "l")[0] is True and cli_verify(tmp_path / "l")[0] is True


def test_cli_rejects_whitespace_in_body(tmp_path):
    led = rewrite(build(tmp_path / "l", [P]), 2, lambda b, d: (b.replace(',"tool"', ', "tool"'), d))
    assert cli_verify(led)[3] == mine(led)[3] == 2


def test_cli_rejects_duplicate_member(tmp_path):
    led = rewrite(build(tmp_path / "l", [P]), 2, lambda b, d: (b.replace('"tool":', '"tool":"x","tool":'), d))
    assert cli_verify(led)[3] == mine(led)[3] == 2


def test_cli_rejects_unlisted_effect_at_its_seq(tmp_path):
    led = rewrite(build(tmp_path / "l", [ALLOW, E("execution_started")]), 2,
                  lambda b, d: (b.replace('"effect":"allow"', '"effect":"maybe"'), d))
    assert cli_verify(led)[3] == mine(led)[3] == 2


def test_cli_rejects_other_format(tmp_path):
    led = rewrite(build(tmp_path / "l", [P]), 1, lambda b, d: (b.replace("ledger/1", "ledger/3"), d))
    assert cli_verify(led)[3] == mine(led)[3] == 1


def test_cli_rejects_deadline_not_in_ts_format(tmp_path):
    led = rewrite(build(tmp_path / "l", [P, I]), 3,
                  lambda b, d: (b.replace(DEADLINE, "2026-01-01T01:00:00Z"), d))
    assert cli_verify(led)[3] == mine(led)[3] == 3


def test_only_the_project_verifier_requires_canonical_data_spelling(tmp_path):
    # Section 5: a verifier compares digests of values and MAY skip the spelling check, which
    # countersign's own verifier makes.
    led = rewrite(build(tmp_path / "l", [P]), 2, lambda b, d: (b, '{"context":{},"args":{"x":1}}'))
    assert mine(led)[0] is True
    assert cli_verify(led)[3] == 2


def test_cli_rejects_non_last_segment_without_line_feed(ledgers, tmp_path):
    lines = lines_of(ledgers["retail"][0])
    tmp_path.joinpath("events-00000001.jsonl").write_bytes(b"\n".join(lines[:10]))
    tmp_path.joinpath("events-00000002.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[10:]))
    assert mine(tmp_path)[3] == 10 and cli_verify(tmp_path)[3] == 10


def test_cli_ignores_files_not_named_like_segments(ledgers, tmp_path):
    led = copy_ledger(ledgers["retail"][0], tmp_path / "l")
    (led / "events-000000002.jsonl").write_bytes(b"junk\n")
    assert cli_verify(led)[0] is True and mine(led)[0] is True


def test_cli_rejects_gap_in_segment_numbers(ledgers, tmp_path):
    lines = lines_of(ledgers["retail"][0])
    tmp_path.joinpath("events-00000001.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:10]))
    tmp_path.joinpath("events-00000003.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[10:]))
    assert cli_verify(tmp_path)[3] == 11


def test_both_reject_a_cancel_after_execution_started(tmp_path):
    led = build(tmp_path / "l", [ALLOW, E("execution_started"), E("cancelled")])
    assert mine(led)[3] == cli_verify(led)[3] == 4


def test_both_accept_a_new_approval_of_arguments_edited_back(tmp_path):
    R3 = {**REQ, "quorums": quorums(3)}
    led = build(tmp_path / "l", [P, E("interrupted", requirements=R3), E("approved", approver="b"),
                                 E("edited", requirements=R3),
                                 E("edited", editor="c", new_args={"x": 1}, requirements=R3),
                                 E("approved", approver="b")])
    assert mine(led)[0] is True and cli_verify(led)[0] is True


# ---- section 10: redaction. Ledgers are built with the project's own writer (ledger_factory.Forge,
# which appends any history) and ledger.proof.redact.redact; only the verdicts are compared. ----------------

CARD = {"number": "4111111111111111", "exp": "12/30"}
ARGS = {"card": CARD, "amount": 5, "items": [{"cc": "1"}, {"cc": "2"}], "content-type": "pan"}
CTX = {"cwd": "/home/u"}


class Settled:
    """A ledger with a final (rejected) request whose data holds a card: genesis (1), proposed (2),
    interrupted (3), rejected (4), then whatever a case appends. `redact` runs the project's
    redaction on the Forge's clock (so timestamps never go backwards); `forge()` reopens the writer."""

    def __init__(self, path, args=ARGS, context=CTX, final=True):
        from ledger_factory import Forge
        self.path = path
        with Forge(path) as f:
            self.clock = f.clock
            self.request, self.digest = f.propose(args=args, context=context)
            self.interrupt = f.interrupt(self.request, approvers=["sup-1"])
            if final:
                f.reject(self.request, "sup-1")

    def forge(self):
        from ledger_factory import Forge
        f = Forge(self.path)
        f.clock = f.ledger.clock = self.clock  # one clock for every writer of this ledger
        return f

    def redact(self, field, target=None):
        from ledger.proof.redact import redact
        self.clock.advance(1)
        return redact(self.path, target or self.request, field, reason="GDPR art. 17", by="dpo",
                      clock=self.clock).seq

    def announce(self, field, value=None, target=None, digest_=None):
        """Append only a `redacted` event (the value stays in place); return its seq."""
        with self.forge() as f:
            return f.redacted(target or self.request, field, value, digest=digest_)

    def edit_data(self, seq, edit):
        """Apply `edit` to the decoded DATA of line `seq` and store it in canonical spelling (DATA
        is not hashed: the chain is untouched)."""
        lines = lines_of(self.path)
        line = lines[seq - 1]
        at = line.index(b'","data":') + 9
        data = json.loads(line[at:-1])
        edit(data)
        lines[seq - 1] = line[:at] + json.dumps(data, separators=(",", ":"), sort_keys=True,
                                                ensure_ascii=False).encode() + b"}"
        write_lines(self.path, lines)


def marker(value):
    return {"$redacted": digest(value)}


def _lawful(s):
    s.redact("args.card")
    s.redact("context.cwd")
    return None


def _nested(s):
    s.redact("args.card.number")
    s.redact("args.card")  # its value_digest counts the inner marker as the number it replaced
    return None


def _list_item_and_quoted_key(s):
    s.redact("args.items[1].cc")
    s.redact('args["content-type"]')
    return None


def _edited_and_proposed(path):
    s = Settled(path, final=False)
    with s.forge() as f:
        edit, _ = f.edit(s.request, "sup-1", {**ARGS, "amount": 6}, s.digest)
        f.cancel(s.request)
    s.redact("args.card", target=edit)
    s.redact("args.card")
    return s, None


def _marker_at_unannounced_path(s):
    s.redact("args.card")
    s.edit_data(2, lambda d: d["args"].__setitem__("amount", marker(5)))  # right digest, no announcement
    return 2


def _marker_digest_differs(s):
    s.redact("args.card")
    s.edit_data(2, lambda d: d["args"].__setitem__("card", marker("something else")))
    return 2


def _announcement_digest_differs(s):
    s.announce("args.card", digest_=digest("something else"))  # the marker carries the true one
    s.edit_data(2, lambda d: d["args"].__setitem__("card", marker(CARD)))
    return 2


def _value_changed_next_to_marker(s):
    s.redact("args.card")
    s.edit_data(2, lambda d: d["args"].__setitem__("amount", 6))
    return 2


def _non_data_target(s):
    return s.announce("args.card", CARD, target=s.interrupt)


def _non_final_request(path):
    s = Settled(path, final=False)
    return s, s.announce("args.card", CARD)


def _twice(s):
    s.redact("args.card")
    return s.announce("args.card", CARD)


def _announcement_only(s):
    s.announce("args.card", CARD)
    return None


def _announcement_only_wrong_value(s):
    return s.announce("args.card", {"number": "4111111111111112", "exp": "12/30"})


def _announcement_of_missing_field(s):
    return s.announce("args.items[2].cc", "3")


def _context_of_an_edit(path):
    s = Settled(path, final=False)
    with s.forge() as f:
        edit, _ = f.edit(s.request, "sup-1", ARGS, s.digest)
        f.cancel(s.request)
    return s, s.announce("context.cwd", CTX["cwd"], target=edit)


def _second_announcement_wrong(s):
    s.announce("args.amount", 5)
    return s.announce("context.cwd", "/elsewhere")  # each event checks what it announces


def _inner_field_announced_after_outer(s):
    # Section 6: a path inside a path redacted before is unlawful (already-redacted)
    s.redact("args.card")
    return s.announce("args.card.number", "not the number")


def _false_inner_healed_by_later_outer(s):
    # The same rule looks at R(T), later announcements included: the false announcement at seq 5
    # passes because seq 6 announces args.card (a prefix of this ledger fails at 5).
    s.announce("args.card.number", "not the number")
    s.announce("args.card", CARD)
    return None


def _later_announcement_line_broken(s):
    s.redact("args.card")
    lines = lines_of(s.path)
    lines[4] = flip(lines[4], lines[4].index(b'"hash":"') + 12)  # its hash no longer matches
    write_lines(s.path, lines)
    return 5  # the marker of seq 2 still counts: R(T) is read before the chain is checked


def _marker_shaped_value_and_false_announcement(path):
    # The stored value looks like a marker; an announcement of that path with the digest the
    # value carries makes it count as that digest (10.3), so the untouched line 2 fails check 7.
    s = Settled(path, args={"m": {"$redacted": digest("x")}, "n": 1})
    s.announce("args.m", "x")
    return s, 2


def _non_canonical_path(s):
    seq = s.announce("args.card", CARD)
    rewrite(s.path, seq, lambda b, d: (b.replace('"path":"args.card"', '"path":"args[\\"card\\"]"'), d))
    return seq


REDACTION = {
    # name: (edit a Settled ledger, or build from a path -> (ledger, first bad seq or None))
    "lawful_redaction": _lawful,
    "nested_redaction": _nested,
    "list_item_and_quoted_key": _list_item_and_quoted_key,
    "edited_and_proposed_targets": _edited_and_proposed,
    "marker_at_unannounced_path": _marker_at_unannounced_path,
    "marker_digest_differs_from_announcement": _marker_digest_differs,
    "announcement_digest_differs_from_marker": _announcement_digest_differs,
    "value_changed_next_to_marker": _value_changed_next_to_marker,
    "announcement_for_non_data_event": _non_data_target,
    "announcement_for_non_final_request": _non_final_request,
    "announcement_twice": _twice,
    "announcement_only_value_in_place": _announcement_only,
    "announcement_only_of_another_value": _announcement_only_wrong_value,
    "announcement_of_missing_field": _announcement_of_missing_field,
    "context_path_of_an_edit": _context_of_an_edit,
    "second_announcement_wrong": _second_announcement_wrong,
    "inner_field_announced_after_outer": _inner_field_announced_after_outer,
    "false_inner_announcement_healed_by_later_outer": _false_inner_healed_by_later_outer,
    "later_announcement_line_broken": _later_announcement_line_broken,
    "non_canonical_path": _non_canonical_path,
    "marker_shaped_value_and_false_announcement": _marker_shaped_value_and_false_announcement,
}
BUILDS_ITSELF = {_edited_and_proposed, _non_final_request, _context_of_an_edit,
                 _marker_shaped_value_and_false_announcement}


def judged_alike(led, expected):
    """Both verifiers: ok exactly when `expected` is None, else the first bad seq `expected`; the
    same count and head."""
    ok, count, head, bad, message = verify_dir(led)
    assert (ok, bad) == (expected is None, expected), message
    c_ok, c_count, c_head, c_bad, _, rep = cli_verify(led)
    assert (c_ok, c_count, c_head, c_bad) == (ok, count, head, bad), rep
    return message


@pytest.mark.parametrize("case", list(REDACTION))
def test_redacted_ledger_judged_alike_by_both(tmp_path, case):
    make = REDACTION[case]
    if make in BUILDS_ITSELF:
        s, expected = make(tmp_path / "l")
    else:
        s = Settled(tmp_path / "l")
        expected = make(s)
    judged_alike(s.path, expected)


def test_redaction_removes_the_value_and_keeps_every_hash(tmp_path):
    s = Settled(tmp_path / "l")
    before = lines_of(s.path)
    s.redact("args.card.number")
    after = lines_of(s.path)
    assert b"4111111111111111" not in b"".join(after) and digest(CARD["number"]).encode() in after[1]
    assert [x[:x.index(b'","data":')] for x in after[:-1]] == [x[:x.index(b'","data":')] for x in before]
    assert mine(s.path)[:2] == (True, len(before) + 1)
    judged_alike(s.path, None)


@pytest.mark.parametrize("key,spelling,canonical", [
    ("a\nb", r'args[\"a\\nb\"]', True),           # the short escape is the canonical one
    ("a\nb", r'args[\"a\\u000ab\"]', False),
    ("a\x1fb", r'args[\"a\\u001fb\"]', True),
    ("a\x1fb", r'args[\"a\\u001Fb\"]', False),      # lowercase hexadecimal digits
    ("a/b", r'args[\"a\\/b\"]', False),
    ("A", r'args[\"\\u0041\"]', False),
    ("a\x7fb", 'args[\\"a\x7fb\\"]', True),         # DEL is not below U+0020: written as itself
    ("a\x7fb", r'args[\"a\\u007fb\"]', False),
    ("", r'args[\"\"]', True),
    ("$redacted", r'args[\"$redacted\"]', True),
    ("0", r'args[\"0\"]', True),
    ("0", "args.0", False),
    ("é", "args.é", False),                          # a name is ASCII only
    ("é", 'args[\\"é\\"]', True),
    ('a"b', r'args[\"a\\\"b\"]', True),
    ("a\\b", r'args[\"a\\\\b\"]', True),
    ("\U0001F600", r'args[\"\\ud83d\\ude00\"]', False),
    ("\U0001F600", 'args[\\"\U0001F600\\"]', True),
    ("_1", "args._1", True),
    ("_1", r'args[\"_1\"]', False),
    ("x", "args", False),                             # at least one step
    ("x", "args.", False),
    ("x", "args.x[00]", False),
], ids=["short_escape", "u000a", "u001f", "u001F", "escaped_slash", "u0041", "raw_del", "u007f",
        "empty_key", "dollar_key", "digit_key_quoted", "digit_key_dotted", "non_ascii_dotted",
        "non_ascii_quoted", "quote", "backslash", "escaped_surrogate_pair", "raw_emoji",
        "name_dotted", "name_quoted", "root_only", "empty_step", "leading_zero_index"])
def test_field_path_spellings_judged_alike_by_both(tmp_path, key, spelling, canonical):
    # `spelling` is the path as it stands inside BODY's JSON string; the value stays in place.
    s = Settled(tmp_path / "l", args={key: "secret", "x": [1]})
    seq = s.announce("args.x", [1])
    rewrite(s.path, seq, lambda b, d: (b.replace('"path":"args.x"', f'"path":"{spelling}"')
                                       .replace(digest([1]), digest("secret")), d))
    judged_alike(s.path, None if canonical else seq)


def test_leftover_redaction_temporary_file_is_not_a_segment_for_both(tmp_path):
    s = Settled(tmp_path / "l")
    s.redact("args.card")
    (s.path / f".{SEG}.redact.tmp").write_bytes(b"junk\n")
    judged_alike(s.path, None)


def test_announcement_in_a_last_line_lacking_only_its_line_feed_counts_for_both(tmp_path):
    s = Settled(tmp_path / "l")
    s.redact("args.card")
    (s.path / SEG).write_bytes((s.path / SEG).read_bytes()[:-1])
    assert "counts" in judged_alike(s.path, None)


def test_announcement_in_a_torn_tail_that_is_no_json_does_not_count_for_both(tmp_path):
    s = Settled(tmp_path / "l")
    s.redact("args.card")
    (s.path / SEG).write_bytes((s.path / SEG).read_bytes()[:-3])
    judged_alike(s.path, 2)  # the marker of seq 2 is announced by no event of the ledger


def torn_announcement_that_does_not_chain(path):
    """A redacted ledger whose announcement is only in a torn tail: a whole, hashed line whose
    prev is wrong, so it is not a line of the ledger (section 6) and does not count."""
    s = Settled(path)
    s.redact("args.card")
    lines = lines_of(s.path)
    body = lines[-1][8:lines[-1].index(b',"hash":"')]
    body = body.replace(body[body.index(b'"prev":"'):][:73], b'"prev":"' + b"0" * 64 + b'"')
    lines[-1] = b'{"body":' + body + b',"hash":"' + hashlib.sha256(body).hexdigest().encode() + \
        b'","data":null}'
    write_lines(s.path, lines, end=b"")
    return s.path


def test_announcement_in_a_torn_tail_that_does_not_chain_does_not_count(tmp_path):
    led = torn_announcement_that_does_not_chain(tmp_path / "l")
    ok, count, head, bad, message = verify_dir(led)
    assert (ok, count, bad) == (False, 1, 2), message


def test_announcement_in_a_torn_tail_that_does_not_chain_judged_alike(tmp_path):
    judged_alike(torn_announcement_that_does_not_chain(tmp_path / "l"), 2)
