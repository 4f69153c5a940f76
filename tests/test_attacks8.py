"""An eighth hostile review: the approval service's HTTP API under strange inputs and races
(deep JSON, bodies near 16 MiB, unicode and path characters in names, concurrent decisions,
starts and outcomes on one request). Each finding is xfail (strict) until fixed: the test asserts
what docs/service.md promises, so it fails today."""

from __future__ import annotations

from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from service.app import create_app  # noqa: E402
from service_support import setup  # noqa: E402


@pytest.fixture
def env(tmp_path):
    s = setup(tmp_path)
    service = s.service()
    with TestClient(create_app(service, web=False), base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        yield s, client


def test_every_call_id_the_api_accepts_can_be_looked_up(env):
    """docs/service.md: `GET /v1/calls/{call_id}` finds a request by the agent's call id. A call
    id is any non-blank string at proposal time, so `a/b` (a path, a URL, a scoped id) is
    recorded; looking it up, percent-encoded as RFC 3986 asks, answers 404 `not_found` (no such
    endpoint) instead of the request."""
    s, client = env
    r = client.post("/v1/proposals", json={"tool": "small_change", "args": {"id": 1}, "call_id": "job-7/step-2"},
                    headers=s.headers("agent-1"))
    assert r.status_code == 201, r.text
    found = client.get("/v1/calls/" + quote("job-7/step-2", safe=""), headers=s.headers("agent-1"))
    assert found.status_code == 200, found.text
    assert found.json()["request"] == r.json()["request"]
