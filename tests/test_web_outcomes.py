"""The inbox says when a call ran and failed (a new user's finding: the history, the run page and
the request's title said only "executed" for an outcome "error")."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

from starlette.testclient import TestClient  # noqa: E402

from service.app import create_app  # noqa: E402
from service_support import setup  # noqa: E402
from test_web_inbox import logged_in  # noqa: E402


def test_a_failed_execution_shows_as_failed_with_its_error(tmp_path):
    s = setup(tmp_path)
    with TestClient(create_app(s.service()), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/proposals", json={"tool": "read_thing", "args": {"id": 1}, "run": "r-9"},
                        headers=s.headers("agent-1"))
        request = r.json()["request"]
        client.post(f"/v1/requests/{request}/start", headers=s.headers("agent-1"))
        client.post(f"/v1/requests/{request}/outcome", json={"outcome": "error", "error": "SMTP timeout <x>"},
                    headers=s.headers("agent-1"))
        logged_in(client, s)
        page = client.get(f"/inbox/requests/{request}").text
        assert 'class="status failed"' in page and "The call ran and failed: SMTP timeout &lt;x&gt;" in page
        for listing in (client.get("/inbox/history").text, client.get("/inbox/runs/r-9").text):
            assert 'class="status failed"' in listing
