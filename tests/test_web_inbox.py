"""The reviewers' web inbox (service.web) through Starlette's test client: log-in with a
reviewer's token only, CSRF tokens on every POST, the reviewer taken from the session (never a
form field), a stale digest refused with a page linking to the current version, hostile
arguments escaped, the security headers, and the pages' content."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
pytest.importorskip("jinja2")

from service_support import setup
from starlette.testclient import TestClient

from ledger.proof.roster import load_roster
from ledger.proof.verify import verify
from service.app import create_app
from service.web.sessions import Sessions


@pytest.fixture
def env(tmp_path):
    s = setup(tmp_path)
    service = s.service()
    with TestClient(create_app(service), base_url="http://127.0.0.1") as client:
        yield s, client


def propose(client, s, tool="small_change", args=None, who="agent-1", **extra):
    body = {"tool": tool, "args": args if args is not None else {"id": 3}, **extra}
    r = client.post("/v1/proposals", json=body, headers=s.headers(who))
    assert r.status_code == 201, r.text
    return r.json()


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def login(client, s, who="sup-1", cookies=None):
    page = client.get("/inbox/login")
    assert page.status_code == 200
    r = client.post("/inbox/login", data={"token": s.tokens[who], "csrf": csrf_of(page.text)}, follow_redirects=False)
    return r


def logged_in(client, s, who="sup-1"):
    r = login(client, s, who)
    assert r.status_code == 303 and r.headers["location"] == "/inbox", r.text
    return client


def test_a_reviewer_logs_in_with_a_session_cookie_and_logs_out(env):
    s, client = env
    assert client.get("/inbox", follow_redirects=False).headers["location"].startswith("/inbox/login")
    r = login(client, s)
    cookie = r.headers["set-cookie"]
    assert "countersign_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Secure" not in cookie.split("countersign_session=")[1].split(",")[0]  # plain http here
    assert s.tokens["sup-1"] not in cookie  # the cookie holds a random id, never the token
    queue = client.get("/inbox")
    assert queue.status_code == 200 and "sup-1 (reviewer)" in queue.text
    out = client.post("/inbox/logout", data={"csrf": csrf_of(queue.text)}, follow_redirects=False)
    assert out.status_code == 303
    assert client.get("/inbox", follow_redirects=False).status_code == 303


def test_the_session_cookie_is_secure_over_https(tmp_path):
    s = setup(tmp_path)
    with TestClient(create_app(s.service()), base_url="https://inbox.example") as client:
        r = login(client, s)
        assert r.status_code == 303
        assert "Secure" in r.headers["set-cookie"]


@pytest.mark.parametrize("who, says", [("agent-1", "belongs to an agent"), ("root-admin", None)])
def test_only_reviewers_and_admins_log_in(env, who, says):
    s, client = env
    r = login(client, s, who)
    if says is None:
        assert r.status_code == 303
    else:
        assert r.status_code == 403 and says in r.text
        assert "countersign_session" not in r.headers.get("set-cookie", "")
    wrong = client.post("/inbox/login", data={"token": "cst_nobody", "csrf": "x"})
    assert wrong.status_code == 403


def test_a_post_without_the_sessions_csrf_token_is_refused(env):
    s, client = env
    logged_in(client, s)
    p = propose(client, s)
    for data in ({}, {"csrf": "not-the-token"}):
        r = client.post(f"/inbox/requests/{p['request']}/decide",
                        data={**data, "decision": "approve", "digest": p["args_digest"]})
        assert r.status_code == 403 and "security token does not match" in r.text
    assert client.get(f"/v1/requests/{p['request']}", headers=s.headers("sup-2")).json()["status"] == "pending"
    # the log-in form's own token (double submit) is checked too
    r = client.post("/inbox/login", data={"token": s.tokens["sup-1"], "csrf": "forged"})
    assert r.status_code == 403


def test_a_forged_approver_field_is_ignored_and_the_sessions_reviewer_decides(env):
    s, client = env
    logged_in(client, s, "sup-1")
    p = propose(client, s)
    page = client.get(f"/inbox/requests/{p['request']}")
    r = client.post(f"/inbox/requests/{p['request']}/decide", follow_redirects=False,
                    data={"csrf": csrf_of(page.text), "decision": "approve", "digest": p["args_digest"],
                          "approver": "sup-2", "by": "sup-3"})
    assert r.status_code == 303, r.text
    got = client.get(f"/v1/requests/{p['request']}", headers=s.headers("agent-1")).json()
    assert (got["status"], got["decided_by"]) == ("approved", "sup-1")
    history = got["history"]
    assert history[-1]["signed"] == "service"
    assert verify(s.ledger, rosters=[load_roster(s.roster)]).ok


def test_a_stale_digest_gets_a_page_linking_to_the_current_version(env):
    s, client = env
    p = propose(client, s, "big_change", {"amount": 10})
    logged_in(client, s, "sup-1")
    page = client.get(f"/inbox/requests/{p['request']}")
    # another reviewer edits meanwhile, through the API
    edited = client.post(f"/v1/requests/{p['request']}/decision", headers=s.headers("sup-2"),
                         json={"decision": "edit", "digest": p["args_digest"], "args": {"amount": 5}})
    assert edited.status_code == 200, edited.text
    r = client.post(f"/inbox/requests/{p['request']}/decide",
                    data={"csrf": csrf_of(page.text), "decision": "approve", "digest": p["args_digest"]})
    assert r.status_code == 409
    assert "Someone changed this request meanwhile" in r.text and "Nothing was recorded" in r.text
    assert f'href="/inbox/requests/{p["request"]}"' in r.text
    current = client.get(f"/inbox/requests/{p['request']}").text
    assert "Changes against the original" in current and '<span class="del">-  &#34;amount&#34;: 10' in current


def test_a_hostile_argument_is_escaped_everywhere(env):
    s, client = env
    hostile = "<script>alert(1)</script>"
    p = propose(client, s, args={"id": 1, hostile: hostile, "long": "<img src=x onerror=alert(2)>" * 20}, run="<b>run</b>")
    logged_in(client, s)
    for url in ("/inbox", "/inbox/queue/rows", f"/inbox/requests/{p['request']}", "/inbox/runs/%3Cb%3Erun%3C%2Fb%3E",
                "/inbox/history"):
        html = client.get(url).text
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>run</b>" not in html, url
    page = client.get(f"/inbox/requests/{p['request']}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<details" in page and "open to read all" in page  # the long string folded, not cut


def test_every_inbox_response_has_the_security_headers(env):
    s, client = env
    logged_in(client, s)
    for url in ("/inbox", "/inbox/login", "/inbox/static/inbox.js", "/inbox/dashboard"):
        r = client.get(url)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp, url
        assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "no-referrer"
    assert "<script>" not in client.get("/inbox").text  # no inline script anywhere


def test_the_queue_lists_what_the_reviewer_may_decide_and_says_what_is_hidden(env):
    s, client = env
    small = propose(client, s, "small_change", {"id": 1}, run="r-1")
    big = propose(client, s, "big_change", {"amount": 10}, run="r-2")
    logged_in(client, s, "alice")
    html = client.get("/inbox").text
    assert f'data-request="{small["request"]}"' in html and f'data-request="{big["request"]}"' not in html
    assert "1 pending request you may not decide" in html
    client.post("/inbox/logout", data={"csrf": csrf_of(html)})
    logged_in(client, s, "sup-1")
    rows = client.get("/inbox/queue/rows").text
    assert rows.index(f'data-request="{small["request"]}"') < rows.index(f'data-request="{big["request"]}"')  # oldest first
    assert "1 approved" not in rows and "0 approved, 2 more" in rows
    only = client.get("/inbox/queue/rows?tool=big_change").text
    assert f'data-request="{small["request"]}"' not in only and f'data-request="{big["request"]}"' in only
    assert f'data-request="{big["request"]}"' not in client.get("/inbox/queue/rows?run=r-1").text
    assert f'data-request="{small["request"]}"' not in client.get("/inbox/queue/rows?group=sups").text


def test_edit_reject_and_respond_through_the_forms(env):
    s, client = env
    p = propose(client, s, "big_change", {"amount": 10}, run="r-9")
    logged_in(client, s, "sup-1")
    page = client.get(f"/inbox/requests/{p['request']}").text
    assert all(f'value="{d}"' in page for d in ("approve", "edit", "reject", "respond"))
    assert f'name="digest" value="{p["args_digest"]}"' in page
    bad = client.post(f"/inbox/requests/{p['request']}/decide",
                      data={"csrf": csrf_of(page), "decision": "edit", "digest": p["args_digest"], "args": "[1, 2"})
    assert bad.status_code == 422 and "not JSON" in bad.text
    bad = client.post(f"/inbox/requests/{p['request']}/decide",
                      data={"csrf": csrf_of(page), "decision": "edit", "digest": p["args_digest"], "args": "[1]"})
    assert bad.status_code == 422 and "not an object" in bad.text
    r = client.post(f"/inbox/requests/{p['request']}/decide", follow_redirects=False,
                    data={"csrf": csrf_of(page), "decision": "edit", "digest": p["args_digest"], "args": '{"amount": 7}'})
    assert r.status_code == 303, r.text
    page = client.get(f"/inbox/requests/{p['request']}").text
    digest = re.search(r'name="digest" value="([0-9a-f]{64})"', page)
    assert digest is None or digest.group(1) != p["args_digest"]
    no_reason = client.post(f"/inbox/requests/{p['request']}/decide",
                            data={"csrf": csrf_of(page), "decision": "reject", "digest": "x", "reason": "  "})
    assert no_reason.status_code == 422 and "needs a reason" in no_reason.text
    # sup-1 edited, so sup-2 rejects
    client.post("/inbox/logout", data={"csrf": csrf_of(page)})
    logged_in(client, s, "sup-2")
    page = client.get(f"/inbox/requests/{p['request']}").text
    digest = re.search(r'name="digest" value="([0-9a-f]{64})"', page).group(1)
    r = client.post(f"/inbox/requests/{p['request']}/decide", follow_redirects=False,
                    data={"csrf": csrf_of(page), "decision": "reject", "digest": digest, "reason": "Use the archive tool."})
    assert r.status_code == 303
    got = client.get(f"/v1/requests/{p['request']}", headers=s.headers("agent-1")).json()
    assert (got["status"], got["reason"], got["decided_by"]) == ("rejected", "Use the archive tool.", "sup-2")
    history = client.get("/inbox/history?q=archive").text
    assert "Use the archive tool." in history
    assert "Use the archive tool." in client.get("/inbox/runs/r-9").text
    assert "No requests match" in client.get("/inbox/history?tool=nothing").text


def test_the_dashboard_draws_svg_charts_and_takes_a_threshold(env):
    s, client = env
    p = propose(client, s)
    client.post(f"/v1/requests/{p['request']}/decision", headers=s.headers("sup-1"),
                json={"decision": "approve", "digest": p["args_digest"]})
    logged_in(client, s)
    html = client.get("/inbox/dashboard").text
    assert html.count("<svg") >= 5 and "1 of 1 approvals were given within 10 s" in html
    html = client.get("/inbox/dashboard?rubber_stamp=0.000001").text
    assert "0 of 1 approvals" in html
    assert client.get("/inbox/dashboard?rubber_stamp=nope").status_code == 422


def test_an_unknown_request_and_a_session_of_a_removed_reviewer(env):
    s, client = env
    logged_in(client, s)
    r = client.get("/inbox/requests/999")
    assert r.status_code == 404 and "<html" in r.text
    assert client.get("/inbox/requests/abc").status_code == 404
    s.roster.write_text(s.roster.read_text().replace('name = "sup-1"', 'name = "sup-1-gone"'))
    assert client.post("/v1/admin/reload", headers=s.headers("root-admin")).status_code == 200
    assert client.get("/inbox", follow_redirects=False).status_code == 303  # logged out by the reload


def test_sessions_are_bounded_and_expire_when_idle():
    now = [0.0]
    store = Sessions(max_sessions=2, idle_seconds=10, clock=lambda: now[0])
    a, b = store.create("a"), store.create("b")
    assert store.get(a.id) is a  # a used last: b goes first
    c = store.create("c")
    assert len(store) == 2 and store.get(b.id) is None and store.get(c.id) is c
    now[0] = 11
    assert store.get(a.id) is None
    assert not c.csrf_ok("nope") and c.csrf_ok(c.csrf) and not c.csrf_ok(None)
    assert store.get(None) is None and store.get("x" * 500) is None
