"""`countersign serve` as a real process, for the tests that signal or kill it
(tests/test_service_process.py, tests/test_service_kill.py).

    with Server(setup) as server:        # starts on 127.0.0.1:<a free port>, waits for /v1/health
        httpx.post(server.url + "/v1/proposals", ...)
        server.signal(signal.SIGHUP)
    # leaving the block SIGTERMs it (and SIGKILLs it after 20 s)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
"""The worktree first: the venv's editable install may point at another checkout."""


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's choice; the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command(setup, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "serve", "--policy", str(setup.policy), "--ledger", str(setup.ledger),
            "--roster", str(setup.roster), "--key", str(setup.key), "--port", str(port), "--log-level", "warning",
            *extra]


def countersign(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the CLI (this worktree's) to completion, output captured as text."""
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


class Server:
    """One `countersign serve` process on 127.0.0.1; `start()` again after a kill reuses the port
    and the ledger. Its stderr goes to `<ledger>.stderr-N.txt` (read by `log()`)."""

    def __init__(self, setup, port: int | None = None, *extra: str):
        self.setup, self.port, self.extra = setup, port or free_port(), extra
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 20.0) -> "Server":
        self.starts += 1
        self.err_path = Path(f"{self.setup.ledger}.stderr-{self.starts}.txt")
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(serve_command(self.setup, self.port, *self.extra), cwd=ROOT, env=ENV,
                                         stdout=subprocess.DEVNULL, stderr=err)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"countersign serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"countersign serve did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.err_path.read_text(errors="replace")[-4000:]

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, and the exit status (SIGKILL after `timeout` seconds)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"countersign serve did not stop within {timeout} s of SIGTERM:\n{self.log()}")

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
