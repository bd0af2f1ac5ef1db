"""The Kafka listener: one asyncio server, a connection at a time read frame by frame.

A connection's requests are handled concurrently and answered in the order they came (Kafka clients
pipeline and match answers by order). Handlers start in arrival order, which keeps a producer's
pipelined batches in order (``kafka_api.produce``). Bounded (``kafka_api.limits``): connections per node,
per client address and, on a listener that requires authentication, not yet authenticated; logged-in
connections per user, with a reserve for super users and an at-cap idle timeout, and the bytes of requests
being received or queued, in all and per user, with reserves for super users and for frames before login
(``partitions.security.holds``: reading stops while a request waits for room, waiting requests take turns
per holder, and a holder below its fair share that waits has the newest arriving frame of the one holding
most above its share cut); requests read
and not yet answered per connection (reading stops at the bound); frame size (512 KiB before
authenticating, on a listener that requires it, checked on the size prefix before the body is read); and
time: the TLS handshake, the login, a frame once its first byte came (its bytes must keep coming at a
minimum rate), the wait for the next request, and
the wait of an answer for a client to read it. Refusals and cuts are counted (``Stats``) and logged at
most once a minute per kind. A frame over ``OFF_LOOP_FRAME_BYTES`` is decoded, and its answer encoded (so
is every Metadata answer), on a worker thread: a request naming a million partitions would otherwise hold
the event loop for seconds in kio alone.

Answers are bounded too, as Kafka's broker bounds them by muting a connection until its answer is sent: a
connection's large answers (Fetch, ShareFetch) are served one at a time, nothing more of it read while one
waits for its turn, their bytes taken from the same budget as requests until written out
(``kafka_api.answers``); every answer goes into the transport a slice at a time, and nothing more is read
from a connection while its transport holds more than ``WRITE_BUFFER_HIGH_BYTES`` the client has not read.

A connection authenticated with a credential that is then revoked (its user deleted, its token revoked
or expired, its password changed) is cut at its next request or within a second, whichever comes first.

Each connection has its own ``Door`` (``Door.for_connection``): its ``Session`` says who it authenticated
as (``kafka_api.security``). The SASL requests of a connection are handled one at a time, before its next
request is read, so that what follows an authentication is judged by its outcome.

What closes a connection, as Kafka does, touching nothing else: a frame shorter than a request header or
over the size bound (the one before authenticating included), an API or version not served (except
ApiVersions, answered at v0 with UNSUPPORTED_VERSION and the versions served, KIP-511), a request that
does not decode, a request other than ApiVersions, SaslHandshake and SaslAuthenticate before
authenticating when the listener requires it, a request on a connection whose credential is gone, a
deadline passed, and a client that does not read its answers; once its answer is sent (and read: the
connection stays 100 ms, as Kafka's), a failed authentication and the other refusals of
``kafka_api.sasl_apis``. A handler that fails unexpectedly (a bug) is logged and closes its connection;
other connections go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl as ssl_module
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import encoding, throttling, wire
from kafka_api.answers import LARGE_ANSWER_KEYS
from kafka_api.apis import API_VERSIONS_KEY, APIS, Api, versions_response
from kafka_api.connections import (
    WRITE_BUFFER_HIGH_BYTES,
    Answer,
    Close,
    Connection,
    Held,
    Stats,
    Throttled,
    ended_as,
    read_frame,
    settle,
    write_out,
)
from kafka_api.door import Door
from kafka_api.limits import Clock, Limits, admission, overdue
from kafka_api.security import SASL_APIS
from partitions.security.acls import client_host
from partitions.security.holds import RequestBytes, holder_kinds, idle_at_cap, login_admission
from raftlog.histogram import Histogram, HistogramSnapshot

__all__ = ["KafkaServer", "Limits", "Stats"]

log = logging.getLogger(__name__)
TICK_S = 0.1
CREDENTIAL_CHECK_S = 1.0  # how often open connections' credentials are re-checked (besides each request)
LOG_INTERVAL_S = 60.0  # at most one line per kind of refusal or cut in it
DEFAULT_LIMITS = Limits()


# A request frame larger than this is decoded, and its answer encoded, on a worker thread: kio spends a
# few microseconds of Python per entry, so a request naming a million partitions (16 MiB) held the event
# loop for 2.7 s. A Metadata answer is always encoded there: its size follows the cluster's, not the
# request's. Smaller frames stay on the loop, where the thread hop (~90 us) would cost more than the work.
OFF_LOOP_FRAME_BYTES = 256 * 1024
METADATA_KEY = 3
PRODUCE_KEY = 0
FAILED_AUTHENTICATION_LINGER_S = 0.1  # Kafka's connections.failed.authentication.delay.ms


class KafkaServer:
    def __init__(self, door: Door, limits: Limits = DEFAULT_LIMITS) -> None:
        self.door = door
        self.limits = limits
        self.stats = Stats()
        # each request's handling, by API name (Produce, Fetch, ...): from its frame parsed to its
        # handler's answer (the wait in a produce for its commit included; encoding and sending not)
        self.request_seconds: dict[str, Histogram] = {}
        self._server: asyncio.Server | None = None
        self._open: dict[asyncio.StreamWriter, Connection] = {}
        # open connections by client address, oldest first
        self._per_address: dict[str, dict[Connection, None]] = {}
        # not yet authenticated (on a listener that requires it), by client address, oldest first
        self._unauthenticated: dict[str, dict[Connection, None]] = {}
        # logged-in connections by user, oldest first (``partitions.security.holds``)
        self._per_user: dict[str, dict[Connection, None]] = {}
        self._pressed_until_s: dict[str, float] = {}  # users at their cap lately (``idle_at_cap``)
        # bytes of requests being received or queued, per user (an anonymous connection: per address)
        self.request_bytes = RequestBytes(
            limits.request_bytes_max, limits.request_bytes_per_user_max,
            limits.request_bytes_super_user_reserve,
            limits.request_bytes_before_login_reserve if door.security.require_auth else 0,  # no login
            holder_kinds(door.security.super_users, door.security.require_auth),
        )  # fmt: skip
        self._handlers: set[asyncio.Task[Any]] = set()  # kept to the end even if their connection closed
        self._ticker: asyncio.Future[None] | None = None
        self._connected = asyncio.Event()  # set while a connection is open: the tick has work only then
        self._all_closed = asyncio.Event()  # set when the last open connection closed
        self._throttled = Throttled(LOG_INTERVAL_S)
        self._login_required = door.security.require_auth
        door.share_sessions.per_connection_max = limits.share_sessions_per_connection_max
        door.share_sessions.per_user_max = limits.share_sessions_per_user_max

    async def start(self, host: str, port: int, ssl: ssl_module.SSLContext | None = None) -> None:
        """Listen on ``host:port``, with TLS when ``ssl`` is given (the node's listener context)."""
        if ssl is None:
            self._server = await asyncio.start_server(self._connection, host, port)
        else:  # a client that never finishes its handshake is cut at the handshake timeout
            handshake_s = self.limits.tls_handshake_timeout_s
            self._server = await asyncio.start_server(
                self._connection, host, port, ssl=ssl, ssl_handshake_timeout=handshake_s
            )
        self._ticker = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        """The connections' deadlines and the re-check of their credentials run on the clock, not only on
        requests (the classic groups' sessions and rebalances are the node's: ``GroupCoordinator.run``).
        With no connection open there is nothing to check, and the tick waits for one instead of waking
        ten times a second (every wakeup is CPU an idle node spends)."""
        credentials_checked_s = time.monotonic()
        while True:
            await self._connected.wait()
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            try:
                for connection in list(self._open.values()):
                    late = overdue(connection.clock, now, self.limits, self._login_required)
                    if late is not None:
                        self._cut(connection, *late)
                self._cut_idle_at_cap(now)
                if now - credentials_checked_s >= CREDENTIAL_CHECK_S:
                    credentials_checked_s = now
                    self._check_credentials()
            except Exception:  # a bug: the next checks go on
                log.exception("Kafka: checking the connections' deadlines and credentials failed")

    def _cut_idle_at_cap(self, now_s: float) -> None:
        limits = self.limits
        for connection in idle_at_cap(
            self._per_user, self.door.security.super_users, limits.connections_per_user_max,
            limits.idle_at_cap_timeout_s, Connection.idle_since_s, now_s, self._pressed_until_s,
        ):  # fmt: skip
            user = connection.door.session.user
            why = (f"user {user!r} holds its {limits.connections_per_user_max} connections and this one "
                   f"was idle over {limits.idle_at_cap_timeout_s:g} s")  # fmt: skip
            self._cut(connection, "idle_at_cap", why)

    def _check_credentials(self) -> None:
        authenticated = [c for c in self._open.values() if c.door.session.user is not None and c.cut is None]
        if not authenticated:  # the metadata is not asked for when no connection needs it
            return
        metadata = self.door.node.metadata
        users, tokens, delegation_tokens = metadata.users(), metadata.tokens(), metadata.delegation_tokens()
        for connection in authenticated:
            session = connection.door.session
            gone = self.door.security.credential_gone(session, users, tokens, delegation_tokens)
            if gone is not None:
                self._cut(connection, "credential_gone", gone)

    def _cut(self, connection: Connection, kind: str, why: str) -> None:
        """Close a connection the listener gives up on: its reading stops, what it holds is dropped."""
        if connection.cut is not None:
            return
        connection.cut = kind, why
        if connection.receiver is not None:
            connection.receiver.cancel()
        else:
            connection.writer.transport.abort()

    @property
    def listening(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def drain(self, timeout_s: float) -> int:
        """A stop's first step, before the node leaves the cluster (``kafka_api.draining``: why): no new
        connection, nothing more read from the open ones, a Produce whose handling begins from now on
        appends nothing, and each connection closed once the Produces it read are answered, with what it
        read before them (waited for at most ``timeout_s``; then the others are closed as ``close`` does).
        How many Produces read were still unanswered when the wait ended."""
        self.door.draining.stopping = True
        if self._server is not None:
            self._server.close()
        for connection in list(self._open.values()):
            if connection.receiver is not None:
                connection.receiver.cancel()  # ``_connection`` answers what it read, then closes it
        try:
            async with asyncio.timeout(timeout_s):
                while self._open:
                    await self._all_closed.wait()
        except TimeoutError:
            pass
        unanswered = sum(connection.produces for connection in self._open.values())
        await self.close()
        return unanswered

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
        self.door.auto_topics.cancel()

    def _connection_throttle_ms(self, address: str) -> int:
        """How long a new connection from ``address`` is held before it is closed unserved, past the
        address's ``connection_creation_rate`` quota (0: it is served; KIP-612, Kafka's acceptor)."""
        throttle_ms = self.door.node.metadata.client_quotas().connection(address, int(time.time() * 1000))
        if throttle_ms:
            self.stats.count("connection_rate")
            message = "Kafka: closing a connection from %s after %d ms: past its connection_creation_rate"
            self._throttled.log(logging.WARNING, "connection_rate", message, address, throttle_ms)
        return throttle_ms

    def _admit(self, writer: asyncio.StreamWriter, address: str) -> Connection | None:
        """The new connection's entry, or None: refused (logged, counted)."""
        unauthenticated = {a: len(held) for a, held in self._unauthenticated.items()}
        at_bound = len(self._open) >= self.limits.connections_max
        refusal = admission(
            self.limits,
            self._login_required,
            len(self._open),
            len(self._per_address.get(address, ())),
            unauthenticated,
            address,
            {a: len(held) for a, held in self._per_address.items()} if at_bound else None,
        )
        if refusal is not None:
            if refusal.evict is None:
                self.stats.count(refusal.kind)
                self._throttled.log(logging.WARNING, refusal.kind, "Kafka: refusing a connection from %s: %s",
                                    address, refusal.why)  # fmt: skip
                return None
            why = f"{refusal.why}: the oldest of {refusal.evict}'s, for a newcomer"
            if refusal.kind == "connections" and not self._login_required:  # the node-wide bound
                self._cut(next(iter(self._per_address[refusal.evict])), "evicted_at_bound", why)
            else:
                self._cut(next(iter(self._unauthenticated[refusal.evict])), "evicted", why)
        now = time.monotonic()
        door = self.door.for_connection(address, self.request_bytes)
        connection = Connection(door, address, Clock(now), writer, active_s=now)
        connection.answers_read.set()
        self._open[writer] = connection
        self._connected.set()
        self._all_closed.clear()
        self._per_address.setdefault(address, {})[connection] = None
        if self._login_required:
            self._unauthenticated.setdefault(address, {})[connection] = None
        return connection

    def _authenticated(self, connection: Connection) -> None:
        connection.clock.authenticated = True
        self._forget_unauthenticated(connection)
        user = connection.door.session.user
        if user is not None:
            self._per_user.setdefault(user, {})[connection] = None

    def _login_refusal(self, connection: Connection) -> tuple[str, str] | None:
        """(kind, why) a connection that just logged in must close, or None: it may stay (perhaps by
        cutting the least recently active connection, busy or not, of the user most above its fair
        share)."""
        user, limits = connection.door.session.user, self.limits
        if user is None:
            return None
        held = {name: [c for c in of_user if c.cut is None] for name, of_user in self._per_user.items()}
        verdict = login_admission(
            user, self.door.security.super_users, {name: c for name, c in held.items() if c},
            limits.connections_max, limits.connections_per_user_max, limits.super_user_reserve,
            Connection.last_active_s,
        )  # fmt: skip
        if verdict is None:
            return None
        if isinstance(verdict.evict, Connection):
            self._cut(verdict.evict, "for_login", f"{verdict.why}, for a login of {user!r}")
            return None
        return verdict.kind, verdict.why

    def _forget_unauthenticated(self, connection: Connection) -> None:
        held = self._unauthenticated.get(connection.address)
        if held is not None:
            held.pop(connection, None)
            if not held:
                del self._unauthenticated[connection.address]

    def _forget(self, connection: Connection) -> None:
        self._open.pop(connection.writer, None)
        if not self._open:
            self._connected.clear()
            self._all_closed.set()
        connection.door.share_sessions.disconnected(connection.door.session)  # as Kafka's, they end with it
        self._forget_unauthenticated(connection)
        held = self._per_address.get(connection.address)
        if held is not None:
            held.pop(connection, None)
            if not held:
                del self._per_address[connection.address]
        user = connection.door.session.user
        if user is not None and (of_user := self._per_user.get(user)) is not None:
            of_user.pop(connection, None)
            if not of_user:
                del self._per_user[user]

    def _log_close(self, peer: object, kind: str, why: str) -> None:
        level = logging.INFO if kind == "protocol" else logging.WARNING
        self._throttled.log(level, kind, "Kafka: closing connection from %s: %s", peer, why)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = client_host(peer[0] if isinstance(peer, tuple) and peer else None)
        throttle_ms = self._connection_throttle_ms(address)
        if throttle_ms:  # past its address's connection creation rate: held that long, then closed unread
            await asyncio.sleep(throttle_ms / 1000)
            writer.transport.abort()
            return
        connection = None if self.door.draining.stopping else self._admit(writer, address)
        if connection is None:  # refused (logged, counted), or accepted just as the listener began draining
            writer.transport.abort()
            return
        sock = writer.get_extra_info("socket")
        if self.limits.send_buffer_bytes is not None and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.send_buffer_bytes)
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
        answers: asyncio.Queue[Answer | None] = asyncio.Queue()
        slots = asyncio.Semaphore(self.limits.in_flight_max)
        sender = asyncio.ensure_future(self._send(writer, answers, slots, connection))
        receiver = asyncio.ensure_future(self._receive(connection, reader, answers, slots))
        connection.receiver = receiver
        over_limit = False  # closed for a limit: dropped at once (a graceful TLS close would read on)
        try:
            await asyncio.wait((sender, receiver), return_when=asyncio.FIRST_COMPLETED)
            if receiver.done() and not receiver.cancelled() and receiver.exception() is not None:
                log.error("Kafka: reading from %s failed (a bug)", peer, exc_info=receiver.exception())
            elif receiver.done() and not receiver.cancelled():
                close = receiver.result()
                if close.why:
                    if close.kind != "protocol":
                        self.stats.count(close.kind)
                        over_limit = True
                    self._log_close(peer, close.kind, close.why)
                if close.answer_first:  # the client is done sending, or failed to authenticate
                    answers.put_nowait(None)
                    await sender
                    await asyncio.sleep(close.linger_s)
            elif receiver.cancelled() and connection.cut is None and self.door.draining.stopping:
                # the listener drains (``drain``): its Produces read are answered first (with what came
                # before them), not what waits after them (a JoinGroup may wait for a whole rebalance)
                answered = asyncio.ensure_future(connection.produces_answered.wait())
                try:
                    await asyncio.wait((sender, answered), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    answered.cancel()
        except ConnectionError:
            pass
        finally:
            for task in (sender, receiver):
                task.cancel()
            if connection.cut is not None:
                kind, why = connection.cut
                self.stats.count(kind)
                self._log_close(peer, kind, why)
                writer.transport.abort()  # nothing more is owed to it; what it holds is dropped now
            elif over_limit or ended_as(sender) == "stalled":
                writer.transport.abort()  # its unread answers would keep a graceful close waiting
            else:
                writer.close()
            connection.door.answers.close()  # what its large answers hold back, and none of them waits on
            self._forget(connection)

    async def _receive(
        self,
        connection: Connection,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[Answer | None],
        slots: asyncio.Semaphore,
    ) -> Close:
        """Read and dispatch requests until the client closes, sends what is not a request or may not be
        served, or fails to authenticate."""
        try:
            while True:
                await slots.acquire()
                close = await self._read_one(connection, reader, answers)
                if close is not None:
                    return close
        except (ConnectionError, asyncio.IncompleteReadError):
            return Close("", answer_first=True)

    async def _read_one(
        self,
        connection: Connection,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[Answer | None],
    ) -> Close | None:
        """Read and dispatch one request. None: go on."""
        clock = connection.clock
        muted_s = connection.muted_until_s - time.monotonic()
        if muted_s > 0:  # throttled (a client quota): nothing read from it until then, as Kafka mutes it
            await asyncio.sleep(muted_s)
        await connection.answers_read.wait()  # no more requests while the client does not read its answers
        clock.idle_since_s = time.monotonic()
        head = await reader.read(wire.SIZE.size)
        clock.idle_since_s = None
        if not head:
            return Close("", answer_first=True)
        clock.frame_since_s, clock.frame_bytes = time.monotonic(), 0
        connection.active_s, connection.reading = clock.frame_since_s, True
        try:
            return await self._read_rest(connection, reader, answers, head)
        finally:
            connection.reading = False

    async def _read_rest(
        self,
        connection: Connection,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[Answer | None],
        head: bytes,
    ) -> Close | None:
        """The rest of a request whose first bytes (``head``) came: its size, its room, its body."""
        door, clock, limits = connection.door, connection.clock, self.limits
        if len(head) < wire.SIZE.size:
            head += await reader.readexactly(wire.SIZE.size - len(head))
        (size,) = wire.SIZE.unpack(head)
        if self._login_required and door.session.user is None and size > limits.frame_bytes_before_auth_max:
            bound = limits.frame_bytes_before_auth_max
            why = f"a frame of {size} bytes before authenticating (at most {bound} until then)"
            return Close(why, answer_first=False, kind="frame_before_auth")
        if size < wire.HEAD.size or size > limits.frame_bytes_max:
            bounds = f"a request is {wire.HEAD.size} to {limits.frame_bytes_max}"
            return Close(f"a frame of {size} bytes ({bounds})", answer_first=False)
        # the request's bytes are taken from the listener's budget before its body is read, and given back
        # once it is answered: while it waits for room nothing more is read from the socket (backpressure)
        held = Held(self.request_bytes, door.session.principal or f"address:{connection.address}", size)
        clock.frame_since_s = None  # the node's wait, not the client's: no frame deadline runs meanwhile
        await self.request_bytes.take(held.holder, size)
        # while its bytes come, the frame may be cut for a holder below its share that waits for room
        arrival = self.request_bytes.arriving(
            held.holder, size, lambda why: self._cut(connection, "over_share", why)
        )
        try:
            clock.frame_since_s, clock.frame_bytes = time.monotonic(), size
            frame = await read_frame(reader, size, clock)
            clock.frame_since_s, clock.frame_received = None, None
            self.request_bytes.arrived(arrival)
            return await self._dispatch(connection, frame, answers, held)
        finally:
            self.request_bytes.arrived(arrival)
            if not held.handed:
                held.give_back()

    async def _dispatch(
        self,
        connection: Connection,
        frame: bytes | memoryview,
        answers: asyncio.Queue[Answer | None],
        held: Held,
    ) -> Close | None:
        """Serve one whole request frame whose bytes are ``held`` of the budget: its handler gives them
        back when it ends (``held.handed``). None: go on reading."""
        door, size = connection.door, held.size
        key, version, correlation_id = wire.peek(frame)
        api = APIS.get(key)
        if api is None or not api.supports(version):
            if key == API_VERSIONS_KEY:
                answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                answered.set_result(versions_response(0, ErrorCode.unsupported_version))
                answers.put_nowait(Answer(correlation_id, answered))
                return None
            return Close(f"API {key} version {version} is not served (see ApiVersions)", answer_first=False)
        if not door.security.admits(door.session, key):
            return Close(f"{api.name} before authenticating (the listener requires SASL)", answer_first=False)
        if door.session.user is not None:
            metadata = door.node.metadata
            gone = door.security.credential_gone(
                door.session, metadata.users(), metadata.tokens(), metadata.delegation_tokens()
            )
            if gone is not None:
                return Close(gone, answer_first=False, kind="credential_gone")
        large = size > OFF_LOOP_FRAME_BYTES
        try:
            request = await asyncio.to_thread(wire.parse, frame) if large else wire.parse(frame)
        except wire.MalformedRequest as exc:
            return Close(str(exc), answer_first=False)
        written = None
        if key in LARGE_ANSWER_KEYS:  # one at a time, as Kafka serves a connection's requests
            held.give_back()  # its answer's bytes are taken from the same budget (kafka_api.answers)
            turn, written = connection.door.answers.turn()
            await turn  # nothing more is read until the connection's previous large answer is written out
        task = asyncio.ensure_future(self._served(connection, api, request, size))
        self._handlers.add(task)
        connection.in_flight += 1
        held.handed = True

        def ended(task: asyncio.Task[Any]) -> None:
            self._handlers.discard(task)
            held.give_back()
            connection.in_flight -= 1
            connection.active_s = time.monotonic()

        task.add_done_callback(ended)
        task.add_done_callback(self._timer(api.name))
        if key not in SASL_APIS:
            produce = key == PRODUCE_KEY
            if produce:
                connection.read_a_produce()
            answers.put_nowait(Answer(correlation_id, task, large or key == METADATA_KEY, written, produce))
            return None
        # one at a time: the next request is judged by its outcome; a login past a user bound is answered
        # as a failed authentication, saying which bound
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        answers.put_nowait(Answer(correlation_id, answer))
        try:
            await asyncio.wait((task,))
            return self._after_sasl(connection, task, answer)
        finally:
            settle(answer, task)

    async def _served(self, connection: Connection, api: Api, request: wire.Request, size: int) -> Any:
        """The handler's answer, counted against the client's quotas (``throttling``): past them, its
        ``throttle_time_ms`` set and the connection muted that long (an old version's answer held back)."""
        door = connection.door
        started = time.perf_counter()
        response = await api.handler(door, request)
        quotas = door.node.metadata.client_quotas()
        if not quotas.active():
            return response
        work_s = throttling.work_s(time.perf_counter() - started)
        now_ms = int(time.monotonic() * 1000)
        client_id = request.client_id or ""
        response, throttle_ms = throttling.throttle(
            quotas, api.key, door.session.user, client_id, size, response, work_s, now_ms
        )
        if throttle_ms > 0:
            connection.muted_until_s = max(connection.muted_until_s, time.monotonic() + throttle_ms / 1000)
            if not throttling.client_waits(api.key, request.api_version):
                await asyncio.sleep(throttle_ms / 1000)
        return response

    def _after_sasl(
        self, connection: Connection, task: asyncio.Task[Any], answer: asyncio.Future[Any]
    ) -> Close | None:
        """What a SASL request's outcome does to its connection; a login refused for a user bound is
        answered here (SASL_AUTHENTICATION_FAILED, saying why), any other answer is the handler's."""
        session = connection.door.session
        if task.cancelled() or task.exception() is not None:
            return None  # the sender meets the failure and closes the connection
        if session.closing is not None:
            return Close(session.closing, True, FAILED_AUTHENTICATION_LINGER_S)
        if session.user is None or connection.clock.authenticated:
            return None
        refusal = self._login_refusal(connection)
        if refusal is None:
            self._authenticated(connection)
            return None
        kind, why = refusal
        refused = ErrorCode.sasl_authentication_failed
        answer.set_result(dataclasses.replace(task.result(), error_code=refused, error_message=why))
        return Close(
            f"{session.principal} logged in, refused: {why}", True, FAILED_AUTHENTICATION_LINGER_S, kind
        )

    def _timer(self, name: str) -> Any:
        """A done callback that observes, into ``request_seconds[name]``, the time since it was made."""
        histogram = self.request_seconds.get(name)
        if histogram is None:
            histogram = self.request_seconds[name] = Histogram()
        started = time.perf_counter()
        return lambda _: histogram.observe(time.perf_counter() - started)

    def request_latencies(self) -> dict[str, HistogramSnapshot]:
        """``request_seconds`` as read now, by API name (for /metrics)."""
        return {name: histogram.snapshot() for name, histogram in sorted(self.request_seconds.items())}

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        answers: asyncio.Queue[Answer | None],
        slots: asyncio.Semaphore,
        connection: Connection,
    ) -> str:
        """Write answers in request order until told to stop ("done"); "stalled": the client did not read
        an answer within the send timeout; "failed": a handler raised (a bug, logged). A large answer's
        bytes are given back once it is written out, and the connection's next one may be served."""
        while True:
            item = await answers.get()
            if item is None:
                return "done"
            try:
                response = await asyncio.shield(item.future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if item.future.cancelled() and task is not None and not task.cancelling():
                    return "done"  # the request's handler was cancelled (the node stops): nothing to answer
                raise
            except Exception:
                log.exception("Kafka: a request handler failed; closing its connection")
                return "failed"
            finally:
                slots.release()
            if response is None:  # acks=0
                if item.written is not None:
                    connection.door.answers.written_out(item.written)
                if item.produce:
                    connection.answered_a_produce()
                continue
            try:
                if item.off_loop:
                    frame = await asyncio.to_thread(encoding.encode, item.correlation_id, response)
                else:
                    frame = encoding.encode(item.correlation_id, response)
            except Exception:
                log.exception("Kafka: an answer does not encode (a bug); closing its connection")
                return "failed"
            try:
                async with asyncio.timeout(self.limits.send_timeout_s):
                    await write_out(writer, frame, connection.answers_read)
            except TimeoutError:
                log.info("Kafka: closing a connection whose client does not read its answers")
                return "stalled"
            except ConnectionError:
                return "done"
            except RuntimeError:
                if writer.transport.is_closing():
                    return "done"  # the client went: the event loop refuses writes to a closed transport
                raise
            written, produce = item.written, item.produce
            del item, frame, response  # not held while the next answer is awaited
            if written is not None:
                connection.door.answers.written_out(written)
            if produce:
                connection.answered_a_produce()
