"""The web inbox in a real browser: Playwright (sync API) driving Debian's Chromium at
/usr/bin/chromium against the service served by a real uvicorn on 127.0.0.1 (issue 11,
section 3). Flows: log in; a request proposed through the API appears in the queue without a
reload; approving it returns the agent's /v1 wait; edit (with the page's JSON check) and reject
with a reason; a stale-digest refusal after another reviewer edited; a CSRF refusal; the queue
used with the keyboard alone. Skipped (with the reason) when Chromium or Playwright is absent.

Screenshots: the last test takes the queue's and the dashboard's under the test's temporary
directory (a test run never changes the repository). The committed ones (docs/images/*.png,
shown in the README) come from docs/images/make_screenshots.py, on a ledger with days of history.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
uvicorn = pytest.importorskip("uvicorn")

from service_support import setup

from service.app import create_app

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """The service under uvicorn in a thread; `api(method, path, who, body)` calls /v1."""

    def __init__(self, tmp: Path):
        self.setup = setup(tmp)
        self.service = self.setup.service()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(self.service), host="127.0.0.1", port=self.port, log_level="warning",
                                access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)
        self.thread.start()
        end = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > end or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)

    def api(self, method: str, path: str, who: str, body: dict | None = None, timeout: float = 30) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={**self.setup.headers(who), "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())

    def propose(self, tool="small_change", args=None, run="run-1") -> dict:
        return self.api("POST", "/v1/proposals", "agent-1", {"tool": tool, "args": args or {"id": 3}, "run": run})

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        # present but failing to start is a failure, not a skip: the browser tests must not vanish quietly
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path)
    yield s
    s.stop()


def log_in(browser, served: Served, who: str = "sup-1"):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(served.url + "/inbox")
    assert "/inbox/login" in page.url
    page.fill("#token", served.setup.tokens[who])
    page.keyboard.press("Enter")
    page.wait_for_url(served.url + "/inbox")
    assert page.locator("header .who").inner_text().startswith(who)
    return page


def test_a_new_request_appears_without_reload_and_approving_it_returns_the_agents_wait(browser, served):
    page = log_in(browser, served)
    assert "Nothing is waiting for you" in page.content()
    page.evaluate("window.__not_reloaded = true")
    p = served.propose(args={"id": 42, "note": "<script>alert(1)</script>"})
    row = page.locator(f'tr.row[data-request="{p["request"]}"]')
    row.wait_for(timeout=8_000)  # the 2 s poll brought it in
    assert page.evaluate("window.__not_reloaded") is True
    assert "<script>alert(1)</script>" in row.inner_text()  # shown as text, never run

    waited: dict = {}
    agent = threading.Thread(target=lambda: waited.update(
        served.api("GET", f"/v1/requests/{p['request']}/wait?timeout=30", "agent-1", timeout=40)))
    agent.start()
    row.click()
    page.wait_for_url(f"**/inbox/requests/{p['request']}")
    assert page.locator("code.digest").inner_text() == p["args_digest"]
    page.click("#approve")
    page.wait_for_url(f"**/inbox/requests/{p['request']}?done=approve")
    agent.join(timeout=40)
    assert (waited.get("waiting"), waited.get("status"), waited.get("decided_by")) == (False, "approved", "sup-1")


def test_edit_with_the_json_check_then_reject_with_a_reason(browser, served):
    big = served.propose("big_change", {"amount": 10})
    small = served.propose("small_change", {"id": 7})
    page = log_in(browser, served)
    page.goto(f"{served.url}/inbox/requests/{big['request']}")
    page.fill("#edit-args", '{"amount": ')
    page.click("#edit")
    error = page.locator("form.edit .json-error")
    assert error.is_visible() and "Not JSON" in error.inner_text()
    assert page.url.endswith(f"/inbox/requests/{big['request']}")  # nothing sent
    page.fill("#edit-args", '{"amount": 7}')
    page.click("#edit")
    page.wait_for_url("**?done=edit")
    assert "Changes against the original" in page.content()
    assert served.api("GET", f"/v1/requests/{big['request']}", "sup-2")["edits"] == 1

    page.goto(f"{served.url}/inbox/requests/{small['request']}")
    page.click("#reject")  # the reason is required: the browser does not send the form
    assert page.url.endswith(f"/inbox/requests/{small['request']}")
    page.fill("#reject-reason", "Use the archive tool.")
    page.click("#reject")
    page.wait_for_url("**?done=reject")
    got = served.api("GET", f"/v1/requests/{small['request']}", "agent-1")
    assert (got["status"], got["reason"], got["decided_by"]) == ("rejected", "Use the archive tool.", "sup-1")


def test_a_stale_digest_is_refused_after_another_reviewer_edited(browser, served):
    p = served.propose("big_change", {"amount": 10})
    page = log_in(browser, served, "sup-1")
    page.goto(f"{served.url}/inbox/requests/{p['request']}")
    edited = served.api("POST", f"/v1/requests/{p['request']}/decision", "sup-2",
                        {"decision": "edit", "digest": p["args_digest"], "args": {"amount": 3}})
    assert edited["status"] == "pending"
    page.click("#approve")
    assert "Someone changed this request meanwhile" in page.locator("h1").inner_text()
    page.click(f'a[href="/inbox/requests/{p["request"]}"] >> text=as it is now')
    assert '"amount"' in page.locator("#args").inner_text() and "3" in page.locator("#args").inner_text()
    assert served.api("GET", f"/v1/requests/{p['request']}", "sup-3")["status"] == "pending"  # nothing recorded


def test_a_form_with_a_wrong_csrf_token_is_refused(browser, served):
    p = served.propose()
    page = log_in(browser, served)
    page.goto(f"{served.url}/inbox/requests/{p['request']}")
    page.evaluate("document.querySelector('form.approve input[name=csrf]').value = 'forged'")
    page.click("#approve")
    assert "security token does not match" in page.locator("h1").inner_text()
    assert served.api("GET", f"/v1/requests/{p['request']}", "sup-2")["status"] == "pending"


def test_the_queue_with_the_keyboard_alone(browser, served):
    ids = [served.propose(args={"id": n})["request"] for n in range(3)]
    page = log_in(browser, served)
    first = page.locator(f'tr.row[data-request="{ids[0]}"]')
    first.wait_for()
    assert page.evaluate("document.activeElement.dataset.request") == str(ids[0])  # focus starts on the oldest
    page.keyboard.press("j")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.request") == str(ids[2])
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.dataset.request") == str(ids[1])
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")  # the focus is visible
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/inbox/requests/{ids[1]}")


def test_screenshots_of_the_queue_and_the_dashboard(browser, served, tmp_path):
    out = tmp_path
    for n, (tool, args, run) in enumerate([("small_change", {"id": 1, "note": "rename the invoice"}, "run-7"),
                                           ("big_change", {"amount": 250, "account": "ACME-42"}, "run-7"),
                                           ("big_change", {"amount": 900, "account": "ACME-7"}, "run-8"),
                                           ("small_change", {"id": 2}, "run-8"), ("wire", {"amount": 50}, "run-9")]):
        served.propose(tool, args, run)
    for n in range(3):  # some history for the charts
        p = served.propose("small_change", {"id": 100 + n}, run="run-6")
        served.api("POST", f"/v1/requests/{p['request']}/decision", ["sup-1", "sup-2", "alice"][n],
                   {"decision": "approve", "digest": p["args_digest"]})
    p = served.propose("small_change", {"id": 200}, run="run-6")
    served.api("POST", f"/v1/requests/{p['request']}/decision", "sup-3",
               {"decision": "reject", "digest": p["args_digest"], "reason": "Not during the freeze."})
    page = log_in(browser, served)
    page.locator("tr.row").first.wait_for()
    page.screenshot(path=str(out / "inbox-queue.png"), full_page=True)
    page.goto(served.url + "/inbox/dashboard")
    assert page.locator("svg.chart").count() >= 4
    page.screenshot(path=str(out / "inbox-dashboard.png"), full_page=True)
    assert (out / "inbox-queue.png").stat().st_size > 1000
