"""A small HTTP/1.1 client over `socket`, for ServiceBackend's JSON exchanges with the service.

Why not http.client: importing it (with email and ssl) costs about 16 ms, and the Claude Code
hook starts a process per tool call whose whole budget through the service is about 10 ms beyond
the interpreter's start. This module imports `socket` alone; `ssl` only for an https:// URL.

What it speaks (RFC 9112, "HTTP/1.1"): one request at a time on a connection, with a body sent
with Content-Length; a response's body delimited by Transfer-Encoding: chunked (section 7.1,
trailers read and dropped), by Content-Length (section 6.3), or by the connection's close. 1xx
interim responses are skipped (section 15.2). The connection is kept for the next request
unless the response is HTTP/1.0 without keep-alive, says `Connection: close`, or ends at the
close; a kept connection the server has closed fails the next request with an OSError, as
http.client's does (the caller decides whether to retry). HTTPS verifies the certificate and
the host name as http.client does (ssl.create_default_context).

Limits as http.client's: a status or header line of at most 65,536 bytes, at most 100 header
fields. Raises OSError (ConnectionError, TimeoutError, ProtocolError) on any failure.
"""

from __future__ import annotations

import socket
import time

MAX_LINE = 65536
MAX_HEADERS = 100
MAX_BODY = 64 << 20  # bytes of a response body: the service never sends more than a ledger line's worth
PIECE = 65536


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.x as this client reads it."""


class Response:
    """A whole response: `status` (int), `reason`, `headers` (lower-case name → value; repeated
    fields joined with ", "), `body` (bytes)."""

    __slots__ = ("status", "reason", "headers", "body")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body


class Connection:
    """One connection to `host`:`port` (`tls` for https), opened on the first request.
    `timeout`: seconds for connecting, and for the whole of each response once the request is
    sent (None: none): a server that keeps talking (interim answers, a body a byte at a time)
    is cut off too, with TimeoutError."""

    def __init__(self, host: str, port: int | None, *, tls: bool = False, timeout: float | None = None):
        self.host, self.tls, self.timeout = host, tls, timeout
        self.port = port or (443 if tls else 80)
        self.sock: socket.socket | None = None
        self._file = None
        self._deadline: float | None = None

    def _open(self) -> None:
        # getaddrinfo encodes a str host with the "idna" codec (one more import); an ASCII name
        # or address is the same bytes either way
        host = self.host.encode("ascii") if self.host.isascii() else self.host
        sock = socket.create_connection((host, self.port), self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls:
                import ssl

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock, self._file = sock, sock.makefile("rb")

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout
        if self.sock is not None:
            self.sock.settimeout(timeout)

    def close(self) -> None:
        file, sock, self._file, self.sock = self._file, self.sock, None, None
        if file is not None:
            file.close()
        if sock is not None:
            sock.close()

    def request(self, method: str, target: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Response:
        """Send one request and read its whole response. `target` is the path and query, already
        percent-encoded. Raises OSError; the connection is closed after any failure."""
        if self.sock is None:
            self._open()
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            self.sock.sendall(self._head(method, target, body, headers or {}) + (body or b""))
            response, keep = self._read_response(method)
        except BaseException:
            self.close()
            raise
        if not keep:
            self.close()
        return response

    def _head(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address (RFC 9112 3.2)
        if self.port != (443 if self.tls else 80):
            host = f"{host}:{self.port}"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        for line in lines:  # no field may smuggle in another line (http.client refuses them too)
            if "\r" in line or "\n" in line or "\0" in line:
                raise ValueError(f"a request line or header field holds CR, LF or NUL: {line[:60]!r}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _tick(self) -> None:
        """Before each read from the socket: raise TimeoutError once the response's time is up,
        and let the read wait no longer than what is left."""
        if self._deadline is None:
            return
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the server's answer took longer than {self.timeout:g} s")
        self.sock.settimeout(left)

    def _line(self) -> bytes:
        """One line, read a socket read at a time (so the deadline holds within it)."""
        line = b""
        while True:
            self._tick()
            ahead = self._file.peek(1)[:PIECE]
            if not ahead:
                return line  # the connection closed
            end = ahead.find(b"\n")
            line += self._file.read(len(ahead) if end < 0 else end + 1)
            if len(line) > MAX_LINE:
                raise ProtocolError("a status or header line longer than 65,536 bytes")
            if end >= 0:
                return line

    def _read_response(self, method: str) -> tuple[Response, bool]:
        while True:
            line = self._line()
            if not line:
                raise ConnectionError("the server closed the connection without a response")
            parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (parts[1].isdigit() and len(parts[1]) == 3):
                raise ProtocolError(f"not an HTTP/1.x status line: {line[:80]!r}")
            version, status, reason = parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""
            headers = self._headers()
            if not 100 <= status < 200:
                break
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        if method == "HEAD" or status in (204, 304):
            return Response(status, reason, headers, b""), keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return Response(status, reason, headers, self._chunked()), keep
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise ProtocolError(f"a Content-Length that is not a number: {length[:40]!r}")
            return Response(status, reason, headers, self._exactly(int(length))), keep
        return Response(status, reason, headers, self._read_until(None)), False  # delimited by the close

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line()
            if line in (b"\r\n", b"\n", b""):
                return headers
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ProtocolError(f"a header line without a colon: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        raise ProtocolError(f"more than {MAX_HEADERS} header fields")

    def _read_until(self, n: int | None) -> bytes:
        """`n` bytes (None: up to the close), a socket read at a time, at most MAX_BODY."""
        parts, got = [], 0
        while n is None or got < n:
            self._tick()
            piece = self._file.read1(PIECE if n is None else min(PIECE, n - got))
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
            if got > MAX_BODY:
                raise ProtocolError(f"a response body longer than {MAX_BODY:,} bytes")
        return b"".join(parts)

    def _exactly(self, n: int) -> bytes:
        if n > MAX_BODY:
            raise ProtocolError(f"a response body longer than {MAX_BODY:,} bytes")
        data = self._read_until(n)
        if len(data) < n:
            raise ConnectionError(f"the server closed the connection after {len(data)} of {n} bytes")
        return data

    def _chunked(self) -> bytes:
        chunks = []
        while True:
            size_line = self._line()
            size = size_line.split(b";", 1)[0].strip()
            try:
                n = int(size, 16)
            except ValueError:
                raise ProtocolError(f"a chunk size that is not hexadecimal: {size_line[:40]!r}") from None
            if n < 0:
                raise ProtocolError("a negative chunk size")
            if n == 0:
                self._headers()  # the trailer section, up to its empty line
                return b"".join(chunks)
            chunks.append(self._exactly(n))
            if self._line() not in (b"\r\n", b"\n"):
                raise ProtocolError("a chunk not followed by CRLF")
