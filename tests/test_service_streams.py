"""The service's waiting and streaming over a real uvicorn server on 127.0.0.1: a long-poll wait
returns when another client decides, a deadline ends a wait with the safe default (reject), and a
run's server-sent events arrive in order, resume after Last-Event-ID, and show an agent only its
own requests."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

import uvicorn  # noqa: E402

from service.app import create_app  # noqa: E402
from service_support import setup  # noqa: E402

POLICY = """
policy "streams"
default deny "No rule covers this tool."
allow read_thing
ask small_change reason "A person checks small changes." timeout 1h
ask quick_change reason "Decide quickly." timeout 1s
"""


@pytest.fixture
def served(tmp_path):
    s = setup(tmp_path, POLICY)
    service = s.service()
    server = uvicorn.Server(uvicorn.Config(create_app(service, web=False), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
        yield s, client
    server.should_exit = True
    thread.join(timeout=20)


def propose(client, s, tool, args, who="agent-1", run="run-1"):
    r = client.post("/v1/proposals", json={"tool": tool, "args": args, "run": run}, headers=s.headers(who))
    assert r.status_code == 201, r.text
    return r.json()


def test_a_wait_returns_when_a_reviewer_decides(served):
    s, client = served
    p = propose(client, s, "small_change", {"id": 1})
    got = {}

    def waiter():
        started = time.monotonic()
        got["state"] = client.get(f"/v1/requests/{p['request']}/wait?timeout=15", headers=s.headers("agent-1")).json()
        got["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.3)
    r = client.post(f"/v1/requests/{p['request']}/decision",
                    json={"decision": "approve", "digest": p["args_digest"]}, headers=s.headers("sup-1"))
    assert r.status_code == 200
    thread.join(timeout=15)
    assert got["state"]["status"] == "approved" and not got["state"]["waiting"]
    assert got["seconds"] < 10  # woken by the decision, not by the timeout


def test_a_deadline_ends_the_wait_with_a_rejection(served):
    s, client = served
    p = propose(client, s, "quick_change", {"id": 2})
    state = client.get(f"/v1/requests/{p['request']}/wait?timeout=15", headers=s.headers("agent-1")).json()
    assert (state["status"], state["waiting"]) == ("expired", False)
    assert state["decision"] == "expire"


def read_events(client, s, who, run, count, headers=None):
    out = []
    with client.stream("GET", f"/v1/runs/{run}/events", headers={**s.headers(who), **(headers or {})}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        event = {}
        for line in r.iter_lines():
            if line.startswith(":"):
                continue
            if not line:
                if event:
                    out.append(event)
                    event = {}
                if len(out) >= count:
                    break
                continue
            name, _, value = line.partition(": ")
            event[name] = value
    return out


def test_a_runs_events_stream_in_order_and_resume_after_last_event_id(served):
    s, client = served
    first = propose(client, s, "read_thing", {"id": 1}, run="r-7")
    second = propose(client, s, "small_change", {"id": 2}, run="r-7")
    propose(client, s, "read_thing", {"id": 3}, run="other")
    events = read_events(client, s, "agent-1", "r-7", 3, headers={"Last-Event-ID": "0"})
    assert [e["event"] for e in events] == ["proposed", "proposed", "interrupted"]
    assert [int(e["id"]) for e in events] == sorted(int(e["id"]) for e in events)
    assert int(events[0]["id"]) == first["request"] and int(events[1]["id"]) == second["request"]

    got = {}

    def listen():
        got["events"] = read_events(client, s, "agent-1", "r-7", 1, headers={"Last-Event-ID": events[-1]["id"]})

    thread = threading.Thread(target=listen)
    thread.start()
    time.sleep(0.3)
    client.post(f"/v1/requests/{second['request']}/decision",
                json={"decision": "reject", "digest": second["args_digest"], "reason": "Not today."}, headers=s.headers("sup-1"))
    thread.join(timeout=15)
    assert [e["event"] for e in got["events"]] == ["rejected"]


def test_an_agent_streams_only_its_own_requests(served):
    s, client = served
    propose(client, s, "read_thing", {"id": 1}, who="agent-2", run="shared")
    mine = propose(client, s, "read_thing", {"id": 2}, who="agent-1", run="shared")
    events = read_events(client, s, "agent-1", "shared", 1, headers={"Last-Event-ID": "0"})
    assert [int(e["id"]) for e in events] == [mine["request"]]


def test_a_stream_whose_queue_fills_ends_and_its_client_resumes_after_last_event_id(served, monkeypatch):
    """One queued event at most: the proposal of an ask and its interrupt arrive together, so
    the queue fills and the stream ends; reading again from Last-Event-ID misses nothing."""
    from service import core

    monkeypatch.setattr(core, "STREAM_QUEUE_ITEMS", 1)
    s, client = served
    got = {}

    def listen():
        with client.stream("GET", "/v1/runs/r-9/events", headers=s.headers("agent-1")) as r:
            got["lines"] = [line for line in r.iter_lines() if line and not line.startswith(":")]

    thread = threading.Thread(target=listen)
    thread.start()
    time.sleep(0.3)
    propose(client, s, "small_change", {"id": 1}, run="r-9")
    thread.join(timeout=15)
    assert not thread.is_alive() and got["lines"] == []  # ended by the server, nothing half sent
    events = read_events(client, s, "agent-1", "r-9", 2, headers={"Last-Event-ID": "0"})
    assert [e["event"] for e in events] == ["proposed", "interrupted"]


def test_a_principal_holds_a_bounded_number_of_streams(served, monkeypatch):
    from service import core

    monkeypatch.setattr(core, "MAX_STREAMS_PER_PRINCIPAL", 1)
    s, client = served
    with client.stream("GET", "/v1/runs/r-1/events", headers=s.headers("agent-1")) as first:
        assert first.status_code == 200
        r = client.get("/v1/runs/r-2/events", headers=s.headers("agent-1"))
        assert (r.status_code, r.json()["error"]["code"]) == (429, "too_many_streams")
        with client.stream("GET", "/v1/runs/r-1/events", headers=s.headers("agent-2")) as other:
            assert other.status_code == 200  # another principal's streams are counted apart
    for _ in range(100):  # the server notices the closed stream
        with client.stream("GET", "/v1/runs/r-1/events", headers=s.headers("agent-1")) as again:
            if again.status_code == 200:
                break
        time.sleep(0.05)
    assert again.status_code == 200
