"""Webhook notifications of the approval service (service.notify), against a receiver on
127.0.0.1: an ask, a decision and an expiry each notify once; no argument ever leaves the
service; the HMAC verifies; failures are retried with backoff and every attempt recorded; a
restart sends what was left; the `groups` filter; a malformed webhooks file is refused."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from cli.main import app as cli_app  # noqa: E402
from service.app import create_app  # noqa: E402
from service.core import ServiceError  # noqa: E402
from service.notify import Notifier  # noqa: E402
from service.notify_bodies import verify  # noqa: E402
from service.webhooks import WebhooksError, parse_webhooks  # noqa: E402
from service_support import setup  # noqa: E402
from support import POLICY_TEXT  # noqa: E402

SENTINEL = "SENTINEL-personal-data-7f3a"
SECRET = "webhook-secret-for-tests"
PUBLIC = "https://approvals.example.test"
POLICY = POLICY_TEXT + '\nask quick_change reason "Answer within a second." timeout 1s id "quick"\n'


class Receiver:
    """An HTTP server on 127.0.0.1 recording every POST: (headers, body bytes). `plan`: the
    statuses to answer with, in order (200 once it runs out)."""

    def __init__(self, plan=()):
        self.received: list[tuple[dict, bytes]] = []
        self.plan = list(plan)
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = outer.plan.pop(0) if outer.plan else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self) -> list[dict]:
        with self.lock:
            return [json.loads(b) for _, b in self.received]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if len(self.received) >= count:
                    break
            time.sleep(0.02)
        return self.bodies()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("CS_TEST_HOOK_SECRET", SECRET)


def hooks_file(tmp_path, url, *, fmt="generic", extra="", delivery="backoff_seconds = 0.01\nbackoff_cap_seconds = 0.05"):
    path = tmp_path / "webhooks.toml"
    path.write_text(f'[delivery]\n{delivery}\n\n[[webhook]]\nurl = "{url}"\nformat = "{fmt}"\n'
                    f'secret_env = "CS_TEST_HOOK_SECRET"\ntimeout_seconds = 2\n{extra}\n')
    return path


def serve(tmp_path, url, **kwargs):
    s = setup(tmp_path, POLICY)
    hooks = hooks_file(tmp_path, url, **kwargs)
    return s, s.service(public_url=PUBLIC, webhooks=hooks)


def propose(client, s, tool, args, who="agent-1"):
    r = client.post("/v1/proposals", json={"tool": tool, "args": args}, headers=s.headers(who))
    assert r.status_code == 201, r.text
    return r.json()


def decide(client, s, p, who="sup-1", decision="approve", **extra):
    r = client.post(f"/v1/requests/{p['request']}/decision",
                    json={"decision": decision, "digest": p["args_digest"], **extra}, headers=s.headers(who))
    assert r.status_code == 200, r.text
    return r.json()


def test_an_ask_a_decision_and_an_expiry_each_notify_once_without_the_arguments(tmp_path, receiver):
    s, service = serve(tmp_path, receiver.url)
    with TestClient(create_app(service, web=False)) as client:
        propose(client, s, "read_thing", {"id": SENTINEL})  # allowed: nobody is notified
        asked = propose(client, s, "small_change", {"id": 3, "note": SENTINEL})
        receiver.wait_for(1)
        decide(client, s, asked, comment=f"fine {SENTINEL}")
        quick = propose(client, s, "quick_change", {"who": SENTINEL})
        got = receiver.wait_for(4)
    assert [(b["event"], b["request"], b["status"]) for b in got] == [
        ("interrupt", asked["request"], "pending"), ("decision", asked["request"], "approved"),
        ("interrupt", quick["request"], "pending"), ("expiry", quick["request"], "expired")]
    interrupt, decision, _, expiry = got
    assert interrupt["tool"] == "small_change" and interrupt["reasons"] == ["A person checks small changes."]
    assert interrupt["link"] == f"{PUBLIC}/inbox/requests/{asked['request']}" and interrupt["deadline"]
    assert (decision["decided_by"], decision["decision"]) == ("sup-1", "approve")
    assert expiry["tool"] == "quick_change" and expiry["decided_by"] is None
    assert set(interrupt) >= {"event", "request", "tool", "run", "status", "reasons", "decided_by", "deadline", "link",
                              "ledger_seq", "ts"}
    assert [b["ledger_seq"] for b in got] == sorted(b["ledger_seq"] for b in got)
    for headers, body in receiver.received:
        assert SENTINEL.encode() not in body
        assert verify(SECRET.encode(), body, headers["x-countersign-signature"], int(time.time()))
        assert not verify(b"another secret", body, headers["x-countersign-signature"], int(time.time()))
        assert headers["x-countersign-delivery"].startswith(f"{json.loads(body)['ledger_seq']}-")
    assert len({h["x-countersign-delivery"] for h, _ in receiver.received}) == 4
    rows = [json.loads(line) for line in (s.ledger / "cache" / "deliveries.jsonl").read_text().splitlines()]
    assert [(r["outcome"], r["status"], r["attempt"], r["host"]) for r in rows] == [
        ("delivered", 200, 1, receiver.url.split("/")[2])] * 4


def test_the_signature_is_hmac_sha256_of_the_timestamp_and_the_body(tmp_path, receiver):
    s, service = serve(tmp_path, receiver.url)
    with TestClient(create_app(service, web=False)) as client:
        propose(client, s, "small_change", {"id": 1})
        receiver.wait_for(1)
    headers, body = receiver.received[0]
    t, v1 = (part.split("=", 1)[1] for part in headers["x-countersign-signature"].split(","))
    assert abs(int(t) - time.time()) < 60
    assert v1 == hmac.new(SECRET.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert headers["content-type"] == "application/json"


def test_a_slack_body_has_text_and_blocks_and_escapes_what_the_agent_chose(tmp_path, receiver):
    s, service = serve(tmp_path, receiver.url, fmt="slack")
    with TestClient(create_app(service, web=False)) as client:
        p = propose(client, s, "mail<!channel>", {"to": SENTINEL})  # no rule: the default asks
        got = receiver.wait_for(1)
    assert len(got) == 1 and SENTINEL not in json.dumps(got[0])
    body = got[0]
    assert body["text"] == f"Request {p['request']} waits for a decision"
    section = body["blocks"][0]["text"]["text"]
    assert "mail&lt;!channel&gt;" in section and "<!channel>" not in section
    assert f"<{PUBLIC}/inbox/requests/{p['request']}|" in section and "No rule covers this tool." in section


def test_a_receiver_that_fails_twice_gets_three_attempts_all_recorded(tmp_path):
    receiver = Receiver(plan=[503, 500])
    try:
        s, service = serve(tmp_path, receiver.url)
        with TestClient(create_app(service, web=False)) as client:
            propose(client, s, "small_change", {"id": 1})
            receiver.wait_for(3)
            time.sleep(0.1)
            listed = client.get("/v1/admin/deliveries", headers=s.headers("root-admin")).json()
            refused = client.get("/v1/admin/deliveries", headers=s.headers("sup-1"))
    finally:
        receiver.close()
    assert len(receiver.received) == 3
    assert len({h["x-countersign-delivery"] for h, _ in receiver.received}) == 1  # one delivery, three attempts
    rows = [json.loads(line) for line in (s.ledger / "cache" / "deliveries.jsonl").read_text().splitlines()]
    assert [(r["attempt"], r["status"], r["outcome"]) for r in rows] == [(1, 503, "retry"), (2, 500, "retry"),
                                                                         (3, 200, "delivered")]
    assert all(r["retry_in"] > 0 for r in rows[:2])
    assert [r["attempt"] for r in listed["deliveries"]] == [3, 2, 1] and listed["enabled"] and listed["queued"] == 0
    assert listed["webhooks"] == [{"host": receiver.url.split("/")[2], "format": "generic",
                                   "events": ["decision", "expiry", "interrupt"], "groups": None, "signed": True}]
    assert refused.status_code == 403


def test_a_refusal_is_not_retried_and_a_dead_receiver_is_given_up_on(tmp_path):
    receiver = Receiver(plan=[404])
    try:
        s, service = serve(tmp_path, receiver.url)
        with TestClient(create_app(service, web=False)) as client:
            propose(client, s, "small_change", {"id": 1})
            receiver.wait_for(1)
            time.sleep(0.2)
    finally:
        receiver.close()
    assert len(receiver.received) == 1
    rows = [json.loads(line) for line in (s.ledger / "cache" / "deliveries.jsonl").read_text().splitlines()]
    assert [(r["status"], r["outcome"]) for r in rows] == [(404, "refused")]

    s2, service = serve(tmp_path / "two", "http://127.0.0.1:9/closed", delivery="attempts = 2\nbackoff_seconds = 0.01")
    with TestClient(create_app(service, web=False)) as client:
        propose(client, s2, "small_change", {"id": 1})
        path = s2.ledger / "cache" / "deliveries.jsonl"
        end = time.monotonic() + 10
        while time.monotonic() < end and (not path.exists() or "failed" not in path.read_text()):
            time.sleep(0.02)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["attempt"], r["status"], r["outcome"]) for r in rows] == [(1, None, "retry"), (2, None, "failed")]
    assert rows[0]["error"]


def test_a_restart_sends_what_was_left_and_repeats_nothing_delivered(tmp_path):
    receiver = Receiver(plan=[503])
    try:
        slow = "backoff_seconds = 30\nbackoff_cap_seconds = 30"
        s, service = serve(tmp_path, receiver.url, delivery=slow)
        with TestClient(create_app(service, web=False)) as client:
            first = propose(client, s, "small_change", {"id": 1})
            receiver.wait_for(1)  # refused with 503: the retry is due in 15 to 30 s, after the shutdown
        assert len(receiver.received) == 1
        service = s.service(public_url=PUBLIC, webhooks=hooks_file(tmp_path, receiver.url))
        with TestClient(create_app(service, web=False)) as client:
            got = receiver.wait_for(2)
            second = propose(client, s, "small_change", {"id": 2})
            got = receiver.wait_for(3)
        assert [b["request"] for b in got] == [first["request"], first["request"], second["request"]]
        assert receiver.received[0][0]["x-countersign-delivery"] == receiver.received[1][0]["x-countersign-delivery"]
        service = s.service(public_url=PUBLIC, webhooks=hooks_file(tmp_path, receiver.url))
        with TestClient(create_app(service, web=False)) as client:
            time.sleep(0.3)
        assert len(receiver.received) == 3  # nothing delivered is sent again
    finally:
        receiver.close()


def test_a_groups_filter_notifies_only_requests_of_those_groups(tmp_path, receiver):
    s, service = serve(tmp_path, receiver.url, extra='groups = ["sups"]\nevents = ["interrupt"]')
    with TestClient(create_app(service, web=False)) as client:
        propose(client, s, "small_change", {"id": 1})  # anyone may decide: no group
        big = propose(client, s, "big_change", {"amount": 10})  # two from sups
        decide(client, s, big)  # a decision: not among this hook's events
        got = receiver.wait_for(1)
        time.sleep(0.3)
    assert [(b["event"], b["request"]) for b in receiver.bodies()] == [("interrupt", big["request"])]
    assert got[0]["tool"] == "big_change"


def test_an_approval_short_of_the_quorum_says_more_are_needed(tmp_path, receiver):
    s, service = serve(tmp_path, receiver.url, extra='events = ["decision"]')
    with TestClient(create_app(service, web=False)) as client:
        big = propose(client, s, "big_change", {"amount": 10})
        decide(client, s, big, "sup-1")
        decide(client, s, big, "sup-2")
        got = receiver.wait_for(2)
    assert [(b["decided_by"], b["status"]) for b in got] == [("sup-1", "pending"), ("sup-2", "approved")]


def test_a_full_queue_drops_the_oldest_and_records_it(tmp_path):
    import support

    gate = support.gate(tmp_path / "ledger")
    for n in range(3):
        gate.propose("small_change", {"id": n}, proposer="agent", run="r")
    config = parse_webhooks('[delivery]\nqueue_limit = 2\n[[webhook]]\nurl = "http://127.0.0.1:9/x"\n'
                            'secret_env = "S"\n', environ={"S": "x"})
    notifier = Notifier(config, lookup=gate.get, ledger_id=gate.ledger.ledger_id, directory=tmp_path / "cache")
    records = gate.ledger.records_at(range(1, gate.seen + 1))
    notifier([records[s] for s in sorted(records)])
    summary = notifier.summary()
    assert (summary["queued"], summary["dropped"]) == (2, 1)
    assert [(r["outcome"], r["event"]) for r in summary["deliveries"]] == [("dropped", "interrupt")]
    interrupts = [s for s in sorted(records) if type(records[s].event).__name__ == "Interrupted"]
    assert summary["deliveries"][0]["seq"] == interrupts[0]
    assert summary["cursor"] == interrupts[1] - 1  # the two still queued are not settled
    gate.close()


@pytest.mark.parametrize("text, where, words", [
    ('[[webhook]]\nurl = "http://x/"\nformat = slack\n', ":3:", "not valid TOML"),
    ('[[webhook]]\nurl = "http://x/"\nsecret_env = "S"\n\n[[webhook]]\nurl = "http://y/"\nformat = "teams"\n', ":5:",
     'format must be "slack" or "generic"'),
    ('[[webhook]]\nurl = "ftp://x/"\nsecret_env = "S"\n', ":1:", "http:// or https://"),
    ('[[webhook]]\nurl = "http://x/"\nsecret = "in the file"\n', ":1:", "unknown key secret"),
    ('[[webhook]]\nurl = "http://x/"\n', ":1:", "a generic webhook is signed"),
    ('[[webhook]]\nurl = "http://x/"\nsecret_env = "NOT_SET_ANYWHERE"\n', ":1:", "NOT_SET_ANYWHERE is not set"),
    ('[[webhook]]\nurl = "http://x/"\nsecret_env = "S"\nevents = ["approve"]\n', ":1:", "events must be"),
    ('[delivery]\nattempts = 0\n[[webhook]]\nurl = "http://x/"\nsecret_env = "S"\n', "", "attempts must be"),
    ('title = "x"\n', "", "unknown table or key title"),
    ('# nothing yet\n', "", "no webhook"),
])
def test_a_malformed_webhooks_file_is_refused_with_where_and_why(text, where, words):
    with pytest.raises(WebhooksError) as caught:
        parse_webhooks(text, "hooks.toml", environ={"S": "secret"})
    message = str(caught.value)
    assert message.startswith("hooks.toml" + where) and words in message, message


def test_serve_with_a_malformed_webhooks_file_exits_2_and_says_where(tmp_path):
    s = setup(tmp_path, POLICY)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[webhook]]\nurl = "http://x/"\nformat = "teams"\nsecret_env = "CS_TEST_HOOK_SECRET"\n')
    with pytest.raises(ServiceError, match="bad.toml:1: webhook 1: format must be"):
        s.service(webhooks=bad)
    assert not s.ledger.exists()  # refused before the ledger is touched
    result = CliRunner().invoke(cli_app, ["serve", "--policy", str(s.policy), "--ledger", str(s.ledger), "--roster",
                                          str(s.roster), "--key", str(s.key), "--webhooks", str(bad)])
    assert result.exit_code == 2 and "bad.toml:1:" in result.output and "Traceback" not in result.output


def test_the_documented_verification_snippet_accepts_a_signature_and_refuses_a_forgery():
    from pathlib import Path

    from service.notify_bodies import sign

    doc = (Path(__file__).resolve().parents[1] / "docs" / "notifications.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(snippet.strip().splitlines()) <= 10
    scope: dict = {}
    exec(snippet, scope)
    body = b'{"event":"interrupt","request":2}'
    header = sign(SECRET.encode(), body, int(time.time()))
    assert scope["verified"](SECRET.encode(), body, header)
    assert not scope["verified"](SECRET.encode(), body.replace(b"2", b"3"), header)
    assert not scope["verified"](SECRET.encode(), body, sign(SECRET.encode(), body, int(time.time()) - 3600))
