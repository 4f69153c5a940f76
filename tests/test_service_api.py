"""The approval service's JSON API (service.api), through Starlette's test client: identities
come from tokens, never from bodies; every refusal is a JSON error with a stable code; decisions
are signed by the service and `ledger verify --roster` accepts them."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from ledger.proof.roster import load_roster  # noqa: E402
from ledger.proof.verify import verify  # noqa: E402
from service.app import create_app  # noqa: E402
from service_support import setup  # noqa: E402


@pytest.fixture
def env(tmp_path):
    s = setup(tmp_path)
    service = s.service()
    with TestClient(create_app(service, web=False)) as client:
        yield s, client


def propose(client, s, tool="small_change", args=None, who="agent-1", **extra):
    body = {"tool": tool, "args": args if args is not None else {"id": 3}, **extra}
    return client.post("/v1/proposals", json=body, headers=s.headers(who))


def test_an_allowed_call_is_proposed_started_and_its_outcome_recorded(env):
    s, client = env
    r = propose(client, s, "read_thing", {"id": 1}, run="run-1")
    assert r.status_code == 201, r.text
    p = r.json()
    assert (p["effect"], p["status"], p["waits_for"]) == ("allow", "allowed", None)
    started = client.post(f"/v1/requests/{p['request']}/start", headers=s.headers("agent-1")).json()
    assert started["started"] and started["args"] == {"id": 1} and started["args_digest"] == p["args_digest"]
    done = client.post(f"/v1/requests/{p['request']}/outcome", json={"outcome": "ok", "result": {"n": 1}},
                       headers=s.headers("agent-1"))
    assert done.status_code == 200 and done.json()["outcome"] == "ok"
    again = client.post(f"/v1/requests/{p['request']}/start", headers=s.headers("agent-1")).json()
    assert again == {"request": p["request"], "started": False, "execution": {**done.json(), "replayed": True}}


@pytest.mark.parametrize("body", [
    b'{"outcome":"ok","result":{"text":"cut here: \\ud83d"}}',
    b'{"outcome":"error","error":"cut here: \\ud83d"}',
])
def test_an_outcome_holding_a_lone_surrogate_is_recorded_not_refused(env, body):
    """JSON.stringify writes a string cut in the middle of a surrogate pair as "\\ud83d": the
    call ran, so its outcome is recorded (the result without a digest, the error escaped), as
    Gate.finish records it, and never refused (which left the request "executing" for ever)."""
    s, client = env
    p = propose(client, s, "read_thing", {"id": 1}).json()
    client.post(f"/v1/requests/{p['request']}/start", headers=s.headers("agent-1"))
    done = client.post(f"/v1/requests/{p['request']}/outcome", content=body,
                       headers={**s.headers("agent-1"), "Content-Type": "application/json"})
    assert done.status_code == 200, done.text
    view = done.json()
    assert view["result_digest"] is None and view["error"] in (None, "cut here: \\ud83d")
    assert client.get(f"/v1/requests/{p['request']}", headers=s.headers("agent-1")).json()["status"] == "executed"
    wrong = client.post(f"/v1/requests/{p['request']}/outcome", content=b'{"outcome":"fine","x":"\\ud83d"}',
                        headers={**s.headers("agent-1"), "Content-Type": "application/json"})
    assert wrong.status_code == 422, wrong.text


def test_an_ask_waits_and_the_authenticated_reviewer_approves_it(env):
    s, client = env
    p = propose(client, s).json()
    assert p["status"] == "pending" and p["waits_for"]["needs"]
    waiting = client.get(f"/v1/requests/{p['request']}/wait?timeout=0", headers=s.headers("agent-1")).json()
    assert waiting["waiting"] and waiting["status"] == "pending"
    queue = client.get("/v1/queue", headers=s.headers("sup-1")).json()
    assert [q["request"] for q in queue["requests"]] == [p["request"]]
    assert queue["requests"][0]["args"] == {"id": 3}
    r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "approve", "digest": p["args_digest"]},
                    headers=s.headers("sup-1"))
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["decided_by"]) == ("approved", "sup-1")
    done = client.get(f"/v1/requests/{p['request']}/wait?timeout=5", headers=s.headers("agent-1")).json()
    assert (done["waiting"], done["status"]) == (False, "approved")
    report = verify(s.ledger, rosters=[load_roster(s.roster)])
    assert report.ok, report


def test_a_forged_identity_in_the_body_is_refused(env):
    s, client = env
    p = propose(client, s).json()
    r = client.post(f"/v1/requests/{p['request']}/decision",
                    json={"decision": "approve", "digest": p["args_digest"], "approver": "sup-2"}, headers=s.headers("sup-1"))
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_body"
    assert "approver" in r.json()["error"]["message"]
    r = propose(client, s, proposer="agent-2")
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_body"


def test_the_proposer_never_approves_and_agents_never_decide(env):
    s, client = env
    p = propose(client, s).json()
    r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "approve", "digest": p["args_digest"]},
                    headers=s.headers("agent-1"))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize("headers, status, code", [
    ({}, 401, "unauthenticated"),
    ({"Authorization": "Bearer cst_nobody"}, 401, "unauthenticated"),
    ({"Authorization": "Basic abc"}, 401, "unauthenticated"),
])
def test_no_token_or_an_unknown_one_is_refused(env, headers, status, code):
    s, client = env
    r = client.post("/v1/proposals", json={"tool": "read_thing", "args": {}}, headers=headers)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    assert r.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("body, status, code", [
    (b"{not json", 400, "malformed_json"),
    (b'{"tool": "read_thing"}', 422, "invalid_body"),
    (b'{"tool": "read_thing", "args": []}', 422, "invalid_body"),
    (b'{"tool": "", "args": {}}', 422, "invalid_call"),
    (b'{"tool": "read_thing", "args": {"x": NaN}}', 400, "malformed_json"),
])
def test_a_malformed_proposal_gets_a_stable_error(env, body, status, code):
    s, client = env
    r = client.post("/v1/proposals", content=body, headers={**s.headers("agent-1"), "Content-Type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    assert "Traceback" not in r.text


def test_a_stale_digest_is_refused_after_an_edit(env):
    s, client = env
    p = propose(client, s, "big_change", {"amount": 10}).json()
    edited = client.post(f"/v1/requests/{p['request']}/decision",
                         json={"decision": "edit", "digest": p["args_digest"], "args": {"amount": 5}}, headers=s.headers("sup-1"))
    assert edited.status_code == 200, edited.text
    r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "approve", "digest": p["args_digest"]},
                    headers=s.headers("sup-2"))
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["request"]) == (409, "stale_digest", p["request"])


def test_a_reviewer_outside_the_group_does_not_see_the_request_and_is_told_so(env):
    s, client = env
    propose(client, s, "big_change", {"amount": 10})
    q = client.get("/v1/queue", headers=s.headers("alice")).json()
    assert q["requests"] == [] and q["hidden"] == 1 and "may not decide" in q["note"]
    q = client.get("/v1/queue?all=1", headers=s.headers("alice")).json()
    assert [r["may_decide"] for r in q["requests"]] == [False]


def test_a_reject_reason_reaches_the_agent(env):
    s, client = env
    p = propose(client, s).json()
    r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "reject", "digest": p["args_digest"]},
                    headers=s.headers("sup-1"))
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_call")
    client.post(f"/v1/requests/{p['request']}/decision",
                json={"decision": "reject", "digest": p["args_digest"], "reason": "Use the archive tool."}, headers=s.headers("sup-1"))
    got = client.get(f"/v1/requests/{p['request']}", headers=s.headers("agent-1")).json()
    assert (got["status"], got["reason"], got["decided_by"]) == ("rejected", "Use the archive tool.", "sup-1")


def test_an_agent_reads_only_its_own_requests(env):
    s, client = env
    p = propose(client, s, call_id="c-1").json()
    r = client.get(f"/v1/requests/{p['request']}", headers=s.headers("agent-2"))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    assert client.get("/v1/calls/c-1", headers=s.headers("agent-1")).json()["request"] == p["request"]
    assert client.get("/v1/calls/c-1", headers=s.headers("agent-2")).status_code == 404  # as unknown: no oracle of call ids
    assert client.get("/v1/calls/nope", headers=s.headers("agent-1")).json()["error"]["code"] == "unknown_call_id"


def test_a_repeated_call_id_returns_the_first_decision(env):
    s, client = env
    first = propose(client, s, call_id="same")
    second = propose(client, s, call_id="same")
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["duplicate"] and second.json()["request"] == first.json()["request"]
    conflict = propose(client, s, args={"id": 99}, call_id="same")
    assert (conflict.status_code, conflict.json()["error"]["code"]) == (409, "call_id_conflict")


def test_unknown_endpoints_and_requests_get_json_errors(env):
    s, client = env
    assert client.get("/v1/nothing").json()["error"]["code"] == "not_found"
    assert client.get("/v1/requests/999", headers=s.headers("sup-1")).json()["error"]["code"] == "unknown_request"
    assert client.get("/v1/requests/abc", headers=s.headers("sup-1")).json()["error"]["code"] == "unknown_request"
    assert client.delete("/v1/proposals").json()["error"]["code"] == "method_not_allowed"
    r = client.get("/v1/requests/1/wait?timeout=600", headers=s.headers("sup-1"))
    assert r.json()["error"]["code"] == "invalid_parameter"


def test_history_lists_decided_requests_newest_first_and_searches(env):
    s, client = env
    for n in range(3):
        p = propose(client, s, args={"id": n}, run=f"run-{n}").json()
        client.post(f"/v1/requests/{p['request']}/decision",
                    json={"decision": "reject", "digest": p["args_digest"], "reason": f"not now {n}"}, headers=s.headers("sup-1"))
    rows = client.get("/v1/history", headers=s.headers("sup-2")).json()["requests"]
    assert [r["reason"] for r in rows] == ["not now 2", "not now 1", "not now 0"]
    rows = client.get("/v1/history?q=NOW%201", headers=s.headers("sup-2")).json()["requests"]
    assert [r["run"] for r in rows] == ["run-1"]
    rows = client.get("/v1/history?run=run-0&limit=1", headers=s.headers("agent-2")).json()["requests"]
    assert rows == []  # another agent's


def test_the_openapi_document_describes_every_route(env):
    s, client = env
    doc = client.get("/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    from service.api import routes

    for route in routes:
        path = re.sub(r":\w+}", "}", route.path)  # `{call_id:path}` is `{call_id}` in OpenAPI
        assert path in doc["paths"], path
        for method in route.methods - {"HEAD"}:
            assert method.lower() in doc["paths"][path], (path, method)


def test_an_admin_reloads_the_policy_and_the_ledger_records_it(env):
    s, client = env
    assert client.post("/v1/admin/reload", headers=s.headers("sup-1")).status_code == 403
    s.policy.write_text(s.policy.read_text().replace("allow read_thing", "deny read_thing reason \"Closed for audit.\""))
    done = client.post("/v1/admin/reload", headers=s.headers("root-admin")).json()
    assert done["changed"]
    p = propose(client, s, "read_thing", {"id": 1}).json()
    assert (p["effect"], p["reasons"]) == ("deny", ["Closed for audit."])
    s.policy.write_text("policy broken")
    r = client.post("/v1/admin/reload", headers=s.headers("root-admin"))
    assert (r.status_code, r.json()["error"]["code"]) == (422, "reload_failed")
    assert "test.policy:" in r.json()["error"]["message"]
    assert propose(client, s, "read_thing", {"id": 2}).json()["effect"] == "deny"  # the last good policy stays


def test_decisions_signed_in_one_group_commit_all_verify(tmp_path):
    """Steps of different threads on the service's Gate share commits; each signature binds the
    hash its decision follows (statement version 2), which the writer knows only under the commit
    lock. Many reviewers deciding at once must still give a ledger whose every signature verifies."""
    import threading

    from service_support import setup as make

    s = make(tmp_path)
    service = s.service()
    roster = load_roster(s.roster)
    agent = roster.principal("agent-1")
    proposals = [service.propose(agent, "small_change", {"id": n}) for n in range(48)]
    errors = []

    def decide(chunk, who):
        reviewer = roster.principal(who)
        for p in chunk:
            try:
                if p.request % 2:
                    service.decide(reviewer, p.request, "approve", digest=p.args_digest)
                else:
                    service.decide(reviewer, p.request, "reject", digest=p.args_digest, reason="No.")
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

    threads = [threading.Thread(target=decide, args=(proposals[i::4], f"sup-{i % 3 + 1}")) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    service.close()
    assert errors == []
    report = verify(s.ledger, rosters=[roster])
    assert report.ok, report


def test_an_approval_not_made_through_the_service_never_makes_a_call_run(env, tmp_path):
    """Whoever can write the ledger's files (here: a Gate of their own, with no key) can append a
    lawful-looking approval. The service treats it as tampering: its Gate stops (every answer is
    503 `ledger_corrupt`, naming the seq), nothing runs, nothing reports the call approved, and
    `ledger verify --roster` reports the same seq."""
    from ledger.workflow.gate import Gate
    from support import policy

    s, client = env
    p = propose(client, s).json()
    with Gate(policy(), s.ledger) as intruder:
        intruder.approve(p["request"], approver="sup-1", digest=p["args_digest"])  # unsigned
    for r in (client.get(f"/v1/requests/{p['request']}", headers=s.headers("agent-1")),
              client.post(f"/v1/requests/{p['request']}/start", headers=s.headers("agent-1"))):
        assert (r.status_code, r.json()["error"]["code"]) == (503, "ledger_corrupt"), r.text
        assert "not signed" in r.json()["error"]["message"]
    report = verify(s.ledger, rosters=[load_roster(s.roster)])
    assert not report.ok and report.problem.kind == "signature"


def test_a_gate_that_requires_signatures_runs_no_call_a_hand_appended_approval_approved(tmp_path):
    """The check at the start of an execution (Gate.require_signatures) holds on its own too: a
    Gate that folded the approval before it was given the roster (its snapshot, a restart)
    still refuses to run the call (UnsignedDecision, nothing appended)."""
    from ledger.proof.roster import Principal, Roster
    from ledger.workflow.errors import UnsignedDecision
    from ledger.workflow.gate import Gate
    from support import policy

    g = Gate(policy(), tmp_path / "l")
    p = g.propose("small_change", {"id": 1}, proposer="agent-1")
    g.approve(p.request, approver="sup-1", digest=p.args_digest)  # unsigned
    g.require_signatures(Roster([Principal("sup-1", "reviewer")]))
    head = g.ledger.head
    with pytest.raises(UnsignedDecision, match="not signed"):
        g.start(p.request)
    assert g.ledger.head == head
    g.close()


def test_a_signed_edit_then_a_signed_approval_lets_the_call_run(env):
    s, client = env
    p = propose(client, s, "big_change", {"amount": 10}).json()
    client.post(f"/v1/requests/{p['request']}/decision",
                json={"decision": "edit", "digest": p["args_digest"], "args": {"amount": 7}}, headers=s.headers("sup-1"))
    current = client.get(f"/v1/requests/{p['request']}", headers=s.headers("sup-2")).json()
    r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "approve", "digest": current["args_digest"]},
                    headers=s.headers("sup-2"))
    assert r.json()["status"] == "approved", r.text
    started = client.post(f"/v1/requests/{p['request']}/start", headers=s.headers("agent-1")).json()
    assert started["started"] and started["args"] == {"amount": 7}


def test_a_policy_may_ask_a_roster_group(tmp_path):
    """`approvers 1 from owners` names no group of the policy: the service resolves it from the
    roster (alice is the `owners` group of service_support's roster)."""
    from service_support import setup as make

    s = make(tmp_path, 'policy "p"\ndefault deny "no"\nask pay approvers 1 from owners\n')
    with TestClient(create_app(s.service(), web=False)) as client:
        p = propose(client, s, "pay", {"n": 1}).json()
        assert p["waits_for"]["needs"] == "1 from owners (alice)"
        r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "approve", "digest": p["args_digest"]},
                        headers=s.headers("sup-1"))
        assert r.json()["error"]["code"] == "not_an_approver"
        r = client.post(f"/v1/requests/{p['request']}/decision", json={"decision": "approve", "digest": p["args_digest"]},
                        headers=s.headers("alice"))
        assert r.json()["status"] == "approved"


def test_a_remembered_token_is_forgotten_when_the_roster_changes(tmp_path):
    from ledger.proof.roster import token_hash
    from service import auth
    from service.errors import ApiError

    s = setup(tmp_path)
    roster = load_roster(s.roster)
    header = f"Bearer {s.tokens['agent-1']}"
    assert auth.authenticate(roster, header).name == "agent-1"
    assert auth.authenticate(roster, header).name == "agent-1"  # the second time from memory
    with pytest.raises(ApiError):
        auth.authenticate(roster, "Bearer cst_test-token-of-nobody")
    s.roster.write_text(s.roster.read_text().replace(token_hash(s.tokens["agent-1"]), token_hash("cst_a-new-one")))
    with pytest.raises(ApiError) as refused:
        auth.authenticate(load_roster(s.roster), header)
    assert refused.value.status == 401
