"""The Kafka listener: one asyncio server, a connection at a time read frame by frame.

A connection's requests are handled concurrently and answered in the order they came (Kafka clients
pipeline and match answers by order). Handlers start in arrival order, which keeps a producer's
pipelined batches in order (``kafka_api.produce``). Bounded: connections per node, requests read and not
yet answered per connection (reading stops at the bound), frame size, and the time an answer may wait
for a client to read it.

Each connection has its own ``Door`` (``Door.for_connection``): its ``Session`` says who it authenticated
as (``kafka_api.security``). The SASL requests of a connection are handled one at a time, before its next
request is read, so that what follows an authentication is judged by its outcome.

What closes a connection, as Kafka does, touching nothing else: a frame shorter than a request header or
over the size bound, an API or version not served (except ApiVersions, answered at v0 with
UNSUPPORTED_VERSION and the versions served, KIP-511), a request that does not decode, a request other
than ApiVersions, SaslHandshake and SaslAuthenticate before authenticating when the listener requires
it, and a client that does not read its answers; once its answer is sent (and read: the connection
stays 100 ms, as Kafka's), a failed authentication and the other refusals of ``kafka_api.sasl_apis``. A
handler that fails unexpectedly (a bug) is logged and closes its connection; other connections go on.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl as ssl_module
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.apis import API_VERSIONS_KEY, APIS, versions_response
from kafka_api.door import Door
from kafka_api.security import SASL_APIS

log = logging.getLogger(__name__)
TICK_S = 0.1


@dataclass(frozen=True, slots=True)
class Limits:
    frame_bytes_max: int = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
    connections_max: int = 1000
    in_flight_max: int = 64  # per connection: requests read and not yet answered
    send_timeout_s: float = 30.0  # how long an answer may wait for the client to read it
    # SO_SNDBUF of each connection (Kafka's socket.send.buffer.bytes); None: the OS's
    send_buffer_bytes: int | None = None


@dataclass(slots=True)
class Stats:
    refused_connections: int = 0  # over ``connections_max``


FAILED_AUTHENTICATION_LINGER_S = 0.1  # Kafka's connections.failed.authentication.delay.ms


@dataclass(frozen=True, slots=True)
class _Close:
    """Why a connection's reading ended ("": the client closed its side), whether what it asked before
    is answered first, and how long the connection then stays open: a client that failed to authenticate
    reads its answer before the connection closes (some, kafka-python among them, take a close that
    arrives with the answer for a lost connection), and a client guessing passwords waits a little."""

    why: str
    answer_first: bool
    linger_s: float = 0.0


class KafkaServer:
    def __init__(self, door: Door, limits: Limits = Limits()) -> None:
        self.door = door
        self.limits = limits
        self.stats = Stats()
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()  # kept to the end even if their connection closed
        self._ticker: asyncio.Future[None] | None = None

    async def start(self, host: str, port: int, ssl: ssl_module.SSLContext | None = None) -> None:
        """Listen on ``host:port``, with TLS when ``ssl`` is given (the node's listener context)."""
        self._server = await asyncio.start_server(self._connection, host, port, ssl=ssl)
        self._ticker = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        """Group sessions and rebalance deadlines run on the clock, not only on requests."""
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.door.groups.tick(int(time.monotonic() * 1000))
            except Exception:
                log.exception("Kafka: group tick failed")

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._server is not None:
            self._server.close()
        for writer in list(self._open):
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()
        for task in list(self._handlers):
            task.cancel()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= self.limits.connections_max:
            self.stats.refused_connections += 1
            log.warning("Kafka: refusing a connection: %d are open already", len(self._open))
            writer.transport.abort()
            return
        self._open.add(writer)
        sock = writer.get_extra_info("socket")
        if self.limits.send_buffer_bytes is not None and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.send_buffer_bytes)
        answers: asyncio.Queue[tuple[int, asyncio.Future[Any]] | None] = asyncio.Queue()
        slots = asyncio.Semaphore(self.limits.in_flight_max)
        peer = writer.get_extra_info("peername")
        door = self.door.for_connection(peer[0] if isinstance(peer, tuple) and peer else None)
        sender = asyncio.ensure_future(self._send(writer, answers, slots))
        receiver = asyncio.ensure_future(self._receive(door, reader, answers, slots))
        try:
            await asyncio.wait((sender, receiver), return_when=asyncio.FIRST_COMPLETED)
            if receiver.done() and not receiver.cancelled() and receiver.exception() is not None:
                log.error("Kafka: reading from %s failed (a bug)", peer, exc_info=receiver.exception())
            elif receiver.done() and not receiver.cancelled():
                close = receiver.result()
                if close.why:
                    log.info("Kafka: closing connection from %s: %s", peer, close.why)
                if close.answer_first:  # the client is done sending, or failed to authenticate
                    answers.put_nowait(None)
                    await sender
                    await asyncio.sleep(close.linger_s)
        except ConnectionError:
            pass
        finally:
            for task in (sender, receiver):
                task.cancel()
            if sender.done() and not sender.cancelled() and sender.result() == "stalled":
                writer.transport.abort()  # its unread answers would keep a graceful close waiting
            else:
                writer.close()
            self._open.discard(writer)

    async def _receive(
        self,
        door: Door,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[tuple[int, asyncio.Future[Any]] | None],
        slots: asyncio.Semaphore,
    ) -> _Close:
        """Read and dispatch requests until the client closes, sends what is not a request or may not be
        served, or fails to authenticate."""
        try:
            while True:
                await slots.acquire()
                close = await self._read_one(door, reader, answers)
                if close is not None:
                    return close
        except (ConnectionError, asyncio.IncompleteReadError):
            return _Close("", answer_first=True)

    async def _read_one(
        self,
        door: Door,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[tuple[int, asyncio.Future[Any]] | None],
    ) -> _Close | None:
        """Read and dispatch one request. None: go on."""
        head = await reader.read(wire.SIZE.size)
        if not head:
            return _Close("", answer_first=True)
        if len(head) < wire.SIZE.size:
            head += await reader.readexactly(wire.SIZE.size - len(head))
        (size,) = wire.SIZE.unpack(head)
        if size < wire.HEAD.size or size > self.limits.frame_bytes_max:
            limits = f"a request is {wire.HEAD.size} to {self.limits.frame_bytes_max}"
            return _Close(f"a frame of {size} bytes ({limits})", answer_first=False)
        frame = await reader.readexactly(size)
        key, version, correlation_id = wire.peek(frame)
        api = APIS.get(key)
        if api is None or not api.supports(version):
            if key == API_VERSIONS_KEY:
                answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                answered.set_result(versions_response(0, ErrorCode.unsupported_version))
                answers.put_nowait((correlation_id, answered))
                return None
            return _Close(f"API {key} version {version} is not served (see ApiVersions)", answer_first=False)
        if not door.security.admits(door.session, key):
            return _Close(
                f"{api.name} before authenticating (the listener requires SASL)", answer_first=False
            )
        try:
            request = wire.parse(frame)
        except wire.MalformedRequest as exc:
            return _Close(str(exc), answer_first=False)
        task = asyncio.ensure_future(api.handler(door, request))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        answers.put_nowait((correlation_id, task))
        if key in SASL_APIS:  # one at a time: the next request is judged by its outcome
            await asyncio.wait((task,))
            if door.session.closing is not None:
                return _Close(door.session.closing, True, FAILED_AUTHENTICATION_LINGER_S)
        return None

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        answers: asyncio.Queue[tuple[int, asyncio.Future[Any]] | None],
        slots: asyncio.Semaphore,
    ) -> str:
        """Write answers in request order until told to stop ("done"); "stalled": the client did not read
        an answer within the send timeout; "failed": a handler raised (a bug, logged)."""
        while True:
            item = await answers.get()
            if item is None:
                return "done"
            correlation_id, answer = item
            try:
                response = await asyncio.shield(answer)
            except Exception:
                log.exception("Kafka: a request handler failed; closing its connection")
                return "failed"
            finally:
                slots.release()
            if response is None:  # acks=0
                continue
            try:
                frame = wire.encode(correlation_id, response)
            except Exception:
                log.exception("Kafka: an answer does not encode (a bug); closing its connection")
                return "failed"
            writer.write(frame)
            try:
                await asyncio.wait_for(writer.drain(), self.limits.send_timeout_s)
            except TimeoutError:
                log.info("Kafka: closing a connection whose client does not read its answers")
                return "stalled"
            except ConnectionError:
                return "done"
