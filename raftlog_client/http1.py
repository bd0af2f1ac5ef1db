"""A lean HTTP/1.1 client for the benchmarks' produce requests: keep-alive connections, one request
at a time on each, bodies with a Content-Length, nothing else.

Why not aiohttp's client, which the rest of the benchmark uses: the load generator shares the machine's
two cores with the three servers it measures, and aiohttp spends ~300 µs of CPU on a small request here
(URL and header objects, payload objects, a timeout context, the request and response objects). Those
cycles are taken from the servers and delay the load generator's own event loop, and both showed up as
the servers' latency. This client writes one prebuilt request head and parses the answer's status line
and headers itself.

What it does not do, and says so with ``ProtocolError``: chunked or other transfer encodings, answers
without a Content-Length, informational (1xx) answers, heads over ``MAX_HEAD_BYTES``."""

from __future__ import annotations

import asyncio
import functools
import socket
import urllib.parse

from raftlog_client.session import Answer

MAX_HEAD_BYTES = 64 * 1024


class ProtocolError(Exception):
    """The server answered something this client does not read (see the module's docstring)."""


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status and headers of an answer's head (without its final blank line)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise ProtocolError(f"not a header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


class _Connection(asyncio.Protocol):
    """One keep-alive connection; ``exchange`` sends a request and resolves with its answer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Answer] | None = None
        self._head: tuple[int, dict[str, str]] | None = None
        self._length = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionResetError("the server closed the connection") if exc is None else exc)

    def exchange(self, head: bytes, body: bytes) -> asyncio.Future[Answer]:
        if self.transport is None or self.closed:
            raise ConnectionResetError("the connection closed before the request was sent")
        if self._waiter is not None:
            raise RuntimeError("a second request on a connection that is still waiting for an answer")
        self._waiter = asyncio.get_running_loop().create_future()
        if len(body) <= 16 * 1024:
            self.transport.write(head + body)  # one send for a small request
        else:
            self.transport.writelines((head, body))
        return self._waiter

    def time_out(self, timeout_s: float) -> None:
        self.abort(TimeoutError(f"no answer within {timeout_s:g} s"))

    def abort(self, error: BaseException) -> None:
        """Give up on this connection (a timed-out request leaves it in an unknown state)."""
        self.closed = True
        self._fail(error)
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        try:
            self._parse()
        except ProtocolError as exc:
            self.abort(exc)

    def _parse(self) -> None:
        buffer = self._buffer
        if self._head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise ProtocolError(f"an answer's head is over {MAX_HEAD_BYTES} bytes")
                return
            status, headers = parse_head(bytes(buffer[:end]))
            del buffer[: end + 4]
            if status < 200:
                raise ProtocolError(f"informational answer {status}")
            if "transfer-encoding" in headers:
                raise ProtocolError(f"transfer-encoding {headers['transfer-encoding']!r}")
            length = headers.get("content-length")
            if length is None or not length.isdigit():
                raise ProtocolError(f"an answer without a valid Content-Length ({length!r})")
            self._head, self._length = (status, headers), int(length)
        if len(buffer) < self._length:
            return
        status, headers = self._head
        body = bytes(buffer[: self._length])
        del buffer[: self._length]
        self._head = None
        if buffer:
            raise ProtocolError("bytes after an answer no request asked for")
        if headers.get("connection", "").lower() == "close":
            self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            raise ProtocolError("an answer no request asked for")
        if not waiter.done():
            waiter.set_result(Answer(status, headers, body))

    def _fail(self, error: BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)


class Http1Client:
    """Keep-alive connections to any number of servers (``http://host:port`` base URLs), opened as needed:
    one per request in flight to a server, kept for the next request when its answer is complete."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()

    async def request(
        self, method: str, base_url: str, path: str, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> Answer:
        """One request; raises TimeoutError after ``timeout_s``, OSError when the connection fails and
        ProtocolError for an answer this client does not read."""
        host, port = _host_port(base_url)
        head = _head_prefix(method, host, port, path, tuple(headers.items())) + b"%d\r\n\r\n" % len(body)
        loop = asyncio.get_running_loop()
        connection = await self._connection(host, port)
        timer = loop.call_later(timeout_s, connection.time_out, timeout_s)
        try:
            answer = await connection.exchange(head, body)
        except BaseException:
            connection.abort(ConnectionAbortedError("request abandoned"))  # cancelled or failed: not reused
            self._open.discard(connection)
            raise
        finally:
            timer.cancel()
        if connection.closed:
            self._open.discard(connection)
        else:
            self._idle.setdefault((host, port), []).append(connection)
        return answer

    async def _connection(self, host: str, port: int) -> _Connection:
        idle = self._idle.get((host, port))
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
            self._open.discard(connection)
        _, connection = await asyncio.get_running_loop().create_connection(_Connection, host, port)
        self._open.add(connection)
        return connection

    def close(self) -> None:
        for connection in self._open:
            connection.abort(ConnectionAbortedError("client closed"))
        self._open.clear()
        self._idle.clear()


@functools.lru_cache(maxsize=1024)
def _head_prefix(method: str, host: str, port: int, path: str, headers: tuple[tuple[str, str], ...]) -> bytes:
    """A request's head up to its Content-Length value: the same for every request to one place."""
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}:{port}",
        *(f"{name}: {value}" for name, value in headers),
    ]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


@functools.lru_cache(maxsize=256)
def _host_port(base_url: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme != "http" or parts.hostname is None or parts.path not in ("", "/"):
        raise ValueError(f"{base_url!r}: expected http://host:port")
    return parts.hostname, parts.port or 80
