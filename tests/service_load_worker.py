"""One agent or reviewer process of tests/test_service_kill.py, talking to `countersign serve` over
HTTP (one keep-alive connection), retrying through the server's death and restart.

    python service_load_worker.py agent URL NAME TOKEN JOURNAL STOPFILE SEED
    python service_load_worker.py reviewer URL NAME TOKEN JOURNAL STOPFILE SEED

An agent proposes (each call with its own call id, so that a retry after a lost answer returns
the first decision instead of proposing again: mostly allowed calls, some asks, a few denied),
and waits for each ask's decision; a reviewer approves or rejects what the queue shows. Each
journals, one JSON line per acknowledged step, before going on:

    {"kind": "proposed", "call_id", "request", "args_digest", "status", "duplicate"}
    {"kind": "resolved", "request", "status"}          an ask's wait returned decided
    {"kind": "decided", "request", "decision", "status"}

Once STOPFILE exists an agent proposes no more but still waits for its outstanding ask, then
prints "done" and exits 0; a reviewer stops. A server that stays away for RETRY_SECONDS is a
failure (exit 1).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

import httpx

RETRY_SECONDS = 60.0
TOOLS = (("read_thing", 0.75), ("small_change", 0.2), ("drop_thing", 0.05))


class Client:
    def __init__(self, url: str, token: str, journal: str):
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        self.journal = open(journal, "a", buffering=1)

    def note(self, **line) -> None:
        self.journal.write(json.dumps(line) + "\n")

    def call(self, method: str, path: str, ok=(200, 201), **kwargs) -> httpx.Response:
        """The answer to one request, sent again while the server is away (a transport error, or
        503 while it shuts down). Another status than `ok` is returned to the caller."""
        give_up = time.monotonic() + RETRY_SECONDS
        while True:
            try:
                r = self.http.request(method, path, **kwargs)
                if r.status_code != 503:
                    return r
            except httpx.TransportError:
                pass
            if time.monotonic() > give_up:
                sys.exit(f"the server stayed away for {RETRY_SECONDS} s ({method} {path})")
            time.sleep(0.05)


def agent(c: Client, name: str, stop: str, rng: random.Random) -> None:
    i = 0
    while not os.path.exists(stop):
        i += 1
        tool = rng.choices([t for t, _ in TOOLS], [w for _, w in TOOLS])[0]
        call_id = f"{name}-{i}"
        r = c.call("POST", "/v1/proposals", json={"tool": tool, "args": {"agent": name, "i": i}, "run": name,
                                                  "call_id": call_id})
        if r.status_code not in (200, 201):
            sys.exit(f"propose {call_id}: {r.status_code} {r.text}")
        p = r.json()
        c.note(kind="proposed", call_id=call_id, request=p["request"], args_digest=p["args_digest"], status=p["status"],
               duplicate=p["duplicate"])
        status = p["status"]
        while status in ("pending", "interrupting"):
            r = c.call("GET", f"/v1/requests/{p['request']}/wait", params={"timeout": 2})
            if r.status_code != 200:
                sys.exit(f"wait {p['request']}: {r.status_code} {r.text}")
            status = r.json()["status"]
        if p["status"] != status:
            c.note(kind="resolved", request=p["request"], status=status)


def reviewer(c: Client, name: str, stop: str, rng: random.Random) -> None:
    while not os.path.exists(stop):
        r = c.call("GET", "/v1/queue", params={"limit": 10})
        rows = r.json()["requests"] if r.status_code == 200 else []
        for row in rows:
            body = {"decision": "approve", "digest": row["args_digest"]}
            if rng.random() < 0.25:
                body = {"decision": "reject", "digest": row["args_digest"], "reason": "Not now."}
            try:  # not retried: an answer lost with the server is simply not acknowledged
                d = c.http.post(f"/v1/requests/{row['request']}/decision", json=body)
            except httpx.TransportError:
                break
            if d.status_code == 200:
                c.note(kind="decided", request=row["request"], decision=body["decision"], status=d.json()["status"])
        if not rows:
            time.sleep(0.02)


def main(argv: list[str]) -> int:
    role, url, name, token, journal, stop, seed = argv
    c = Client(url, token, journal)
    (agent if role == "agent" else reviewer)(c, name, stop, random.Random(int(seed)))
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
