"""The HTTP listener's bounds on connections and time (``HttpLimits``), so that slow or silent clients
cannot hold a node's connections (slowloris): a request's head (request line and headers) must arrive
within ``header_timeout_s`` of its first byte (or of the connection, for its first request), its body
within ``body_timeout_s`` of the handler starting to read it, its bytes coming at
``body_rate_min_bytes_per_s`` once ``body_grace_s`` passed since its room was taken (``api.bodies``), a
kept-alive connection
waits at most ``idle_timeout_s`` for its next request, and at most ``connections_max`` connections
(``connections_per_address_max`` from one client address) are open at once.

aiohttp bounds none of the first two and keeps an idle connection an hour; it reads a head without
telling anyone it started. So ``listen`` wraps each connection's aiohttp protocol (``runner.server()``,
aiohttp's own, with the runner's settings) in ``_Guarded``, which sees every byte come in and is told by
the app's outermost middleware (``request_started``/``request_finished``) when a request's head was
parsed and when its answer went out. A cut connection is answered ``408 Request Timeout`` when no request
is being served on it, and closed; one over a connection bound is answered ``503`` and closed at once.
The decisions (``Connections``, ``Timer`` kinds) are plain code; only ``_Guarded`` and ``listen`` touch
sockets and the loop.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Hashable
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from api.http_settings import (
    BODY_GRACE_S_DEFAULT as BODY_GRACE_S_DEFAULT,
)
from api.http_settings import (
    BODY_RATE_MIN_BYTES_PER_S_DEFAULT as BODY_RATE_MIN_BYTES_PER_S_DEFAULT,
)
from api.http_settings import (
    BODY_TIMEOUT_S_DEFAULT as BODY_TIMEOUT_S_DEFAULT,
)
from api.http_settings import (
    CONNECTIONS_MAX_DEFAULT as CONNECTIONS_MAX_DEFAULT,
)
from api.http_settings import (
    CONNECTIONS_PER_ADDRESS_MAX_DEFAULT as CONNECTIONS_PER_ADDRESS_MAX_DEFAULT,
)
from api.http_settings import (
    HEADER_TIMEOUT_S_DEFAULT as HEADER_TIMEOUT_S_DEFAULT,
)
from api.http_settings import (
    IDLE_TIMEOUT_S_DEFAULT as IDLE_TIMEOUT_S_DEFAULT,
)
from api.http_settings import (
    REQUEST_BYTES_MAX_DEFAULT as REQUEST_BYTES_MAX_DEFAULT,
)
from api.http_settings import (
    REQUEST_BYTES_PER_USER_MAX_DEFAULT as REQUEST_BYTES_PER_USER_MAX_DEFAULT,
)
from api.http_settings import (
    REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT as REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT,
)
from api.http_settings import (
    HttpLimits as HttpLimits,
)
from raftlog.errors import check
from raftlog_contract import CONNECTIONS_FULL_ANSWER

log = logging.getLogger(__name__)

LOG_INTERVAL_S = 60.0  # at most one line per kind of cut per interval, with how many it stands for

SERVER_HEADER = "raftlog"  # every answer's Server header: no software or version named to a prober
ConnectionThrottle = Callable[[str, int], int]


def connection_rate_answer(throttle_ms: int) -> bytes:
    """The answer of a connection past its address's connection creation rate (KIP-612): 429, as a client
    quota's, and when to come back."""
    body = (
        b'{"error_code": 42902, "message": "too many new connections from this address: past its '
        b'connection_creation_rate quota"}'
    )
    return (
        b"HTTP/1.1 429 Too Many Requests\r\nServer: raftlog\r\nConnection: close\r\n"
        + f"Retry-After: {max(1, -(-throttle_ms // 1000))}\r\n".encode()
        + b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\nServer: raftlog\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
)


class Connections:
    """The open connections, counted in all and per client address (pure: no sockets). The per-address
    table holds only addresses with a connection open, so it is bounded by ``connections_max``."""

    def __init__(self, limits: HttpLimits) -> None:
        self._limits = limits
        self.open = 0
        self._per_address: dict[str, int] = {}

    def admit(self, address: str) -> str | None:
        """Count a new connection from ``address``; or why it is refused (and then nothing is counted)."""
        if self.open >= self._limits.connections_max:
            return (
                f"{self.open} HTTP connections open (--http-connections-max {self._limits.connections_max})"
            )
        held = self._per_address.get(address, 0)
        if held >= self._limits.connections_per_address_max:
            return (
                f"{held} HTTP connections open from {address} "
                f"(--http-connections-per-address-max {self._limits.connections_per_address_max})"
            )
        self.open += 1
        self._per_address[address] = held + 1
        return None

    def release(self, address: str) -> None:
        held = self._per_address.get(address, 0)
        check(held > 0 and self.open > 0, f"HTTP release of {address}: {held} counted, {self.open} open")
        self.open -= 1
        if held == 1:
            del self._per_address[address]
        else:
            self._per_address[address] = held - 1


class QuietLog:
    """At most one line per kind per interval, saying how many events it stands for (a kind is any
    hashable: a cut's name, a login outcome, an answer's error code)."""

    def __init__(self, interval_s: float = LOG_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._seen: dict[Hashable, tuple[float, int]] = {}  # kind -> (last line at, events since)

    def record(self, kind: Hashable, now_s: float) -> int | None:
        """How many events to report now (this one included), or None to stay quiet."""
        last, since = self._seen.get(kind, (-self._interval_s, 0))
        if now_s - last < self._interval_s:
            self._seen[kind] = (last, since + 1)
            return None
        self._seen[kind] = (now_s, 0)
        return since + 1


class Guard:
    """One listener's limits, open connections and cut counts (``/metrics`` reads ``cut``)."""

    def __init__(self, limits: HttpLimits, connection_throttle: ConnectionThrottle | None = None) -> None:
        self.limits = limits
        self.connections = Connections(limits)
        # (address, wall clock ms) -> how long a new connection must wait, past its address's connection
        # creation rate (``partitions.security.quotas.ClientQuotas.connection``); 0: serve it
        self.connection_throttle = connection_throttle
        self.quiet = QuietLog()
        # why connections were cut or refused -> how many: header_timeout, idle_timeout, connections_max
        self.cut: dict[str, int] = {}
        self._by_transport: dict[asyncio.BaseTransport, _Guarded] = {}

    def note(self, kind: str, message: str) -> None:
        self.cut[kind] = self.cut.get(kind, 0) + 1
        count = self.quiet.record(kind, time.monotonic())
        if count is not None:
            log.warning("%s (%d such since the last line)", message, count)

    def request_started(self, transport: asyncio.BaseTransport | None) -> None:
        guarded = self._by_transport.get(transport) if transport is not None else None
        if guarded is not None:
            guarded.request_started()

    def request_finished(self, transport: asyncio.BaseTransport | None) -> None:
        guarded = self._by_transport.get(transport) if transport is not None else None
        if guarded is not None:
            guarded.request_finished()


GUARD = web.AppKey("raftlog_http_guard", Guard)


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol of one connection, with the connection bounds and the head and idle timers."""

    def __init__(self, inner: asyncio.Protocol, guard: Guard) -> None:
        self._inner = inner
        self._guard = guard
        self._transport: asyncio.Transport | None = None
        self._address: str | None = None  # counted in guard.connections while set
        self._timer: asyncio.TimerHandle | None = None
        self._serving = 0  # requests whose head was parsed and whose answer has not gone out
        self._idle = False  # between requests: the next byte starts a head

    # -- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base)  # a stream server's (uvloop's are not subclasses)
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
        throttle = self._guard.connection_throttle
        throttle_ms = throttle(address, int(time.time() * 1000)) if throttle is not None else 0
        if throttle_ms:  # answered at once (Kafka holds the socket that long): told when to come back
            self._guard.note("connection_rate", f"HTTP connection from {address} refused: past its "
                             "connection_creation_rate quota")  # fmt: skip
            transport.write(connection_rate_answer(throttle_ms))
            transport.close()
            return
        refused = self._guard.connections.admit(address)
        if refused is not None:
            self._guard.note("connections_max", f"HTTP connection from {address} refused: {refused}")
            transport.write(CONNECTIONS_FULL_ANSWER)
            transport.close()
            return
        self._address = address
        self._transport = transport
        self._guard._by_transport[transport] = self
        self._arm(self._guard.limits.header_timeout_s, "header_timeout")
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._address is None:
            return
        if self._idle:  # the first byte of the next request's head
            self._idle = False
            self._arm(self._guard.limits.header_timeout_s, "header_timeout")
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._address is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is None:
            return
        self._cancel()
        if self._transport is not None:
            self._guard._by_transport.pop(self._transport, None)
        self._guard.connections.release(self._address)
        self._address = None
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # -- what the app's middleware tells ------------------------------------------------------------

    def request_started(self) -> None:
        self._serving += 1
        self._idle = False
        self._cancel()

    def request_finished(self) -> None:
        self._serving -= 1
        if self._serving == 0:
            self._idle = True
            self._arm(self._guard.limits.idle_timeout_s, "idle_timeout")

    # -- timers -------------------------------------------------------------------------------------

    def _arm(self, after_s: float, kind: str) -> None:
        self._cancel()
        self._timer = asyncio.get_running_loop().call_later(after_s, self._expire, kind, after_s)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self, kind: str, after_s: float) -> None:
        self._timer = None
        transport = self._transport
        if self._serving or transport is None or transport.is_closing():
            return
        if transport.get_write_buffer_size():  # an answer still going out to a slow reader: not idle yet
            self._arm(after_s, kind)
            return
        if kind == "header_timeout":
            self._guard.note(
                kind, f"HTTP connection from {self._address} cut: no whole request head within {after_s:g} s "
                "(--http-header-timeout-ms)",
            )  # fmt: skip
            transport.write(_TIMEOUT_ANSWER)
        else:
            self._guard.cut[kind] = self._guard.cut.get(kind, 0) + 1  # an idle client's usual end: no line
        transport.close()


async def listen(
    runner: web.AppRunner, host: str, port: int, ssl_context: ssl.SSLContext | None, guard: Guard
) -> asyncio.Server:
    """Serve ``runner``'s app on ``host:port`` under ``guard``'s bounds (``runner.setup()`` done)."""
    server = runner.server
    if server is None:
        raise RuntimeError("listen before runner.setup()")
    loop = asyncio.get_running_loop()
    extra: dict[str, Any] = {}
    if ssl_context is not None:
        extra["ssl_handshake_timeout"] = guard.limits.header_timeout_s
    return await loop.create_server(
        lambda: _Guarded(_Unnamed(server, loop=loop, **server._kwargs), guard),  # as server() makes its own
        host,
        port,
        ssl=ssl_context,
        reuse_address=True,
        **extra,
    )


class _Unnamed(RequestHandler):
    """aiohttp's protocol of one connection, whose own answers (a 400 to a request it cannot parse, a 500)
    say ``Server: raftlog`` as the app's do, not aiohttp's name and version: they are made by its
    ``handle_error``, which no hook of the app's reaches."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        response = super().handle_error(request, status, exc, message)
        response.headers["Server"] = SERVER_HEADER
        return response
