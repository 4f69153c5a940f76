"""`countersign serve` as a real process on 127.0.0.1 (issue 11, section 1): it refuses files it
cannot use (exit 2, saying which), answers an agent over HTTP, reloads its policy on SIGHUP (and
records it in the ledger), and on SIGTERM lets the requests in flight finish, exits 0 and leaves a
ledger that `ledger verify --roster` accepts."""

from __future__ import annotations

import signal
import threading
import time

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from ledger import LedgerReader  # noqa: E402
from ledger import events as ev  # noqa: E402
from service_process import Server, countersign, free_port  # noqa: E402
from service_support import setup  # noqa: E402
from support import POLICY_TEXT  # noqa: E402


def proposal(server: Server, s, tool: str, args: dict, who: str = "agent-1", client=httpx, **extra) -> httpx.Response:
    return client.post(server.url + "/v1/proposals", json={"tool": tool, "args": args, **extra},
                       headers=s.headers(who), timeout=10)


def events(ledger) -> list:
    return list(LedgerReader(ledger).records())


def test_serve_refuses_a_bad_policy_and_a_roster_without_the_service_key(tmp_path):
    s = setup(tmp_path)
    s.policy.write_text('policy "broken"\nallow read_thing when\n')
    r = countersign("serve", "--policy", str(s.policy), "--ledger", str(s.ledger), "--roster", str(s.roster),
                    "--key", str(s.key), "--port", str(free_port()), timeout=30)
    assert r.returncode == 2, r.stderr
    assert str(s.policy.name) in r.stderr and "Traceback" not in r.stderr

    s = setup(tmp_path / "b")
    text = s.roster.read_text()
    s.roster.write_text(text[: text.index('[[principal]]\nname = "countersign"')])
    r = countersign("serve", "--policy", str(s.policy), "--ledger", str(s.ledger), "--roster", str(s.roster),
                    "--key", str(s.key), "--port", str(free_port()), timeout=30)
    assert r.returncode == 2, r.stderr
    assert 'kind "service"' in r.stderr and "Traceback" not in r.stderr


def test_a_proposal_over_http_then_sighup_reloads_the_changed_policy(tmp_path):
    s = setup(tmp_path)
    with Server(s) as server:
        r = proposal(server, s, "read_thing", {"id": 1}, run="r-1")
        assert r.status_code == 201, r.text
        assert (r.json()["effect"], r.json()["status"]) == ("allow", "allowed")
        asked = proposal(server, s, "small_change", {"id": 2}).json()
        assert asked["status"] == "pending" and asked["waits_for"]["needs"]

        # The new policy allows small changes; the roster gains a reviewer (so its digest changes).
        s.policy.write_text(POLICY_TEXT.replace('policy "test"', 'policy "test-2"')
                            .replace('ask small_change\n  reason "A person checks small changes."\n  timeout 1h',
                                     'allow small_change\n  reason "Small changes are fine now."'))
        first_roster = tmp_path / "roster-1.toml"
        first_roster.write_text(s.roster.read_text())
        s.roster.write_text(s.roster.read_text() + '\n[[principal]]\nname = "bob"\nkind = "reviewer"\ngroups = []\n')
        rosters_before = sum(isinstance(r.event, ev.RosterRecorded) for r in events(s.ledger))
        server.signal(signal.SIGHUP)
        end = time.monotonic() + 10
        while True:
            p = proposal(server, s, "small_change", {"id": 3, "try": time.monotonic()}).json()
            if p["effect"] == "allow" or time.monotonic() > end:
                break
            time.sleep(0.05)
        assert (p["effect"], p["status"]) == ("allow", "allowed"), server.log()
        # The request proposed before the reload still waits under the old policy's rule.
        waiting = httpx.get(f"{server.url}/v1/requests/{asked['request']}", headers=s.headers("agent-1")).json()
        assert waiting["status"] == "pending"
        assert server.stop() == 0, server.log()

    records = events(s.ledger)
    assert sum(isinstance(r.event, ev.RosterRecorded) for r in records) == rosters_before + 1
    if hasattr(ev, "PolicyLoaded"):
        loaded = [r.event for r in records if isinstance(r.event, ev.PolicyLoaded)]
        assert len(loaded) >= 2 and loaded[-1] != loaded[0]
    reloaded_proposals = [r.event for r in records if isinstance(r.event, ev.Proposed) and r.event.policy == "test-2"]
    assert reloaded_proposals and all(e.effect == "allow" for e in reloaded_proposals)
    r = countersign("ledger", "verify", str(s.ledger), "--roster", str(first_roster), "--roster", str(s.roster))
    assert r.returncode == 0, r.stdout + r.stderr


def test_sigterm_lets_the_requests_in_flight_finish_and_exits_0(tmp_path):
    s = setup(tmp_path)
    acked: list[tuple[int, str, float]] = []  # (request, args_digest, when the answer came)
    failures: list[str] = []
    stop = threading.Event()
    signalled = [0.0]

    def agent(n: int) -> None:
        with httpx.Client(timeout=10) as client:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = proposal(server, s, "read_thing" if i % 4 else "small_change", {"n": n, "i": i},
                                 who=f"agent-{1 + n % 2}", client=client, call_id=f"c-{n}-{i}")
                except httpx.TransportError:  # refused once the server stopped listening
                    if signalled[0]:
                        return
                    failures.append(f"agent {n}: a transport error before SIGTERM")
                    return
                if r.status_code == 201:
                    acked.append((r.json()["request"], r.json()["args_digest"], time.monotonic()))
                elif r.status_code != 503:  # 503 shutting_down: refused, clearly, while stopping
                    failures.append(f"agent {n}: {r.status_code} {r.text}")

    with Server(s) as server:
        threads = [threading.Thread(target=agent, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        while len(acked) < 60:
            time.sleep(0.01)
        signalled[0] = time.monotonic()
        server.signal(signal.SIGTERM)
        code = server.proc.wait(timeout=30)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert code == 0, server.log()
        assert "Traceback" not in server.log()
    assert not failures, failures
    assert any(when > signalled[0] for _, _, when in acked), "no request was in flight when SIGTERM came"

    proposed = {r.seq: r.event for r in events(s.ledger) if isinstance(r.event, ev.Proposed)}
    for request, digest, _ in acked:
        assert proposed[request].args_digest == digest
    r = countersign("ledger", "verify", str(s.ledger), "--roster", str(s.roster))
    assert r.returncode == 0, r.stdout + r.stderr


def test_clients_that_hang_up_mid_answer_do_not_stop_the_service(tmp_path):
    """A client that closes its connection before reading the answer makes the server's write
    fail (EPIPE). `countersign` lets SIGPIPE end its other commands quietly (`... | head`); the
    server must instead outlive it (a new user's finding: 200 such clients killed it)."""
    import socket
    from urllib.parse import urlsplit

    s = setup(tmp_path)
    with Server(s) as server:
        where = urlsplit(server.url)
        for _ in range(200):
            with socket.create_connection((where.hostname, where.port)) as conn:
                conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        time.sleep(0.5)
        assert server.proc.poll() is None, "the service died"
        assert httpx.get(server.url + "/v1/health", timeout=10).json() == {"status": "ok"}
