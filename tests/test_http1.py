"""adapters.http1: the small HTTP/1.1 client ServiceBackend speaks, against a scripted server
(each test says what bytes the server answers) and against `countersign serve` through
tests/test_adapter_backend.py. What is checked: the request it sends, each way a response body
is delimited (Content-Length, chunked with extensions and trailers, the connection's close),
1xx interim responses, keep-alive and Connection: close, and refusals (header injection,
malformed answers, an over-long line)."""

from __future__ import annotations

import socket
import threading

import pytest

from adapters.http1 import Connection, ProtocolError


class Scripted:
    """A one-thread TCP server: for each accepted connection, for each scripted answer, read one
    request (head and Content-Length body) and send the answer's bytes; `close_after` closes the
    connection after that many answers. `requests`: the raw requests received, `connections`."""

    def __init__(self, answers: list[bytes], close_after: int | None = None):
        self.answers, self.close_after = list(answers), close_after
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                file = conn.makefile("rb")
                served = 0
                while self.answers and (self.close_after is None or served < self.close_after):
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = file.readline()
                        if not line:
                            break
                        head += line
                    if not head:
                        break
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    self.requests.append(head + file.read(length))
                    conn.sendall(self.answers.pop(0))
                    served += 1

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def scripted():
    servers = []

    def make(answers, close_after=None):
        servers.append(Scripted(answers, close_after))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_a_post_sends_host_length_and_headers_and_reads_a_content_length_body(scripted):
    s = scripted([b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"])
    c = Connection("127.0.0.1", s.port, timeout=5)
    r = c.request("POST", "/v1/proposals", b'{"tool":"Read"}', {"Authorization": "Bearer t"})
    assert (r.status, r.reason, r.body, r.headers["content-type"]) == (201, "Created", b'{"ok":true}', "application/json")
    head, body = s.requests[0].split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/proposals HTTP/1.1"
    assert f"Host: 127.0.0.1:{s.port}".encode() in lines
    assert b"Content-Length: 15" in lines and b"Authorization: Bearer t" in lines
    assert body == b'{"tool":"Read"}'
    c.close()


def test_chunked_bodies_with_extensions_and_trailers_and_a_kept_connection(scripted):
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4;name=value\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Trailer: yes\r\n\r\n")
    s = scripted([chunked, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"])
    c = Connection("127.0.0.1", s.port, timeout=5)
    assert c.request("GET", "/one").body == b'{"a":1}'
    assert c.request("GET", "/two").body == b"{}"
    assert s.connections == 1  # kept alive between the two
    c.close()


def test_interim_responses_are_skipped_and_no_body_statuses_read_none(scripted):
    s = scripted([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
                  b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"])
    c = Connection("127.0.0.1", s.port, timeout=5)
    r = c.request("POST", "/x", b"")
    assert (r.status, r.body) == (204, b"")
    assert c.request("GET", "/y").body == b"x"
    c.close()


def test_connection_close_and_a_body_ended_by_the_close_open_a_new_connection(scripted):
    s = scripted([b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na",
                  b"HTTP/1.0 200 OK\r\n\r\nuntil the end"], close_after=1)
    c = Connection("127.0.0.1", s.port, timeout=5)
    assert c.request("GET", "/a").body == b"a" and c.sock is None
    assert c.request("GET", "/b").body == b"until the end" and c.sock is None
    assert s.connections == 2


def test_a_kept_connection_the_server_closed_fails_with_an_oserror(scripted):
    s = scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"never sent"], close_after=1)
    c = Connection("127.0.0.1", s.port, timeout=5)
    assert c.request("GET", "/a").status == 200
    with pytest.raises(OSError):
        c.request("POST", "/b", b"{}")
    assert c.sock is None


@pytest.mark.parametrize("answer", [
    b"SMTP ready\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
])
def test_malformed_answers_are_protocol_errors(scripted, answer):
    s = scripted([answer], close_after=1)
    c = Connection("127.0.0.1", s.port, timeout=5)
    with pytest.raises(ProtocolError):
        c.request("GET", "/")
    assert c.sock is None


def test_a_truncated_body_is_an_error(scripted):
    s = scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], close_after=1)
    with pytest.raises(ConnectionError):
        Connection("127.0.0.1", s.port, timeout=5).request("GET", "/")


@pytest.mark.parametrize("target, headers", [("/a\r\nX-Evil: 1", {}), ("/a", {"Authorization": "Bearer t\r\nX-Evil: 1"})])
def test_a_header_or_target_with_a_line_break_is_refused_before_sending(scripted, target, headers):
    s = scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
    with pytest.raises(ValueError):
        Connection("127.0.0.1", s.port, timeout=5).request("GET", target, None, headers)
    assert s.requests == []


def test_nothing_listening_is_an_oserror():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError):
        Connection("127.0.0.1", port, timeout=2).request("GET", "/")
