"""The ``hostile-clients`` fault: a process of attackers beside the honest workload, against every door.

    python -m jepsen.hostile --target n1,HOST,HTTP,KAFKA,RAFT [--target ...] --source ADDR [--source ...]
                             --topic t0:3 [--topic ...] --seconds S --seed N --out TALLY.json

The nemesis starts it for a fault window and stops it with SIGTERM; it also stops by itself after
``--seconds``. It is a process of its own so that its sockets and CPU are not the honest clients' event
loop, and it connects from addresses of its own (``--source``: other loopback addresses, or extra
addresses on the run's bridge), as an outsider would. The admin token, when the attacks need one (the
HTTP batch bomb is sent by a caller allowed to write, as in the attack it reproduces), comes in
``$RAFTLOG_HOSTILE_TOKEN``, never in argv. What it does at each node, all at once, each bounded:

- ``idle``: holds ``IDLE_SOCKETS`` silent connections open to the Kafka door (more than its node-wide
  cap) and to the HTTP door, opening another when the node cuts one (at most ``IDLE_OPENS_PER_S`` a
  second per node and door): the node must cut them (idle and login deadlines) or refuse them (caps)
  without keeping honest clients out.
- ``dribble``: sends a valid request (Kafka ApiVersions; HTTP GET of the liveness page) one byte every
  ``DRIBBLE_INTERVAL_S``: the node must cut it by its read deadline rather than answer it.
- ``oversize``: announces a Kafka frame of 100 MiB and sends ``OVERSIZE_SENT_BYTES`` of it, then waits:
  the node must not hold the frame's bytes for long.
- ``bomb``: every ``BOMB_INTERVAL_S``, one produce of a batch of ~1 MiB that inflates to
  ``BOMB_INFLATED_BYTES`` (gzip members, zstd frames, alternately), over the Kafka door and the HTTP
  door's batch media type, to a workload partition: it must be refused. One accepted is a finding
  (``bombs_accepted``), and its "records" would be in the log the checker reads.
- ``raft-flood``: ``RAFT_FLOOD_CONNECTIONS`` connections to the Raft port that never prove who they are,
  each reconnecting as soon as it is cut (at most ``REOPENS_PER_S`` a second per connection): the nodes'
  own links must still get in (a restarted node must rejoin).
- ``bad-credentials``: ``BAD_CREDENTIALS_PER_S`` requests a second with wrong, malformed and
  non-UTF-8 bearer tokens: each must be a 401 (a 5xx is a finding).
- ``producer-id`` and ``http-hanging-transaction`` (``jepsen.hostile_producers``): an honest Kafka
  producer's id used by another principal, and a transactional batch over HTTP: both must be refused, and
  read_committed readers must go on.
- ``login-idle``: a user of its own (``SASL_USER``, made with the admin token) holds ``LOGIN_IDLE_SOCKETS``
  logged-in Kafka connections per node, more than the door's per-user cap, each sending a request every
  ``LOGIN_KEEPALIVE_S`` (the review's lock kept one every 600 s): the node must refuse the logins past the
  cap and cut the kept-alive ones once idle at the cap, and the honest clients stay served.
- ``login-pin``: ``PIN_CONNECTIONS`` logged-in connections per node, as a user of its own (``PIN_USER``)
  from an address of its own (the last ``--source``): the idle logins hold ``SASL_USER``'s cap of
  connections, and a node refuses logins from an address that failed too many, which left the pin no
  login on a node now and then. Each sends a Produce frame of ``PIN_FRAME_BYTES`` at
  ``PIN_BYTES_PER_S``: more frames than one user's share of the request budget holds, so the node must
  not hold them all at once (its listeners' request budgets and its peak memory are watched, as for
  every attack: ``jepsen.hostile_budgets``). The tally counts, per node, the frames announced
  (``frames_announced:<node>``) and the bytes sent as they go (``bytes_sent:<node>``), so a window whose
  pin never got in says so.

The tally (JSON, to ``--out``) counts what each attack met: connections opened, cut by the node, refused,
answers, and the findings above. Everything is bounded in connections, rate and time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from jepsen import hostile_producers
from jepsen.control import NodeSpec
from jepsen.hostile_frames import (
    BAD_CREDENTIALS,
    SASL_PASSWORD,
    SASL_USER,
    api_versions_frame,
    bomb_batch,
    gzip_bomb,
    kafka_frame,
    pin_header,
    produce_error,
    produce_frame,
    sasl_error,
    sasl_frames,
    zstd_bomb,
)
from raftlog_contract import (
    ADMIN_TOPICS_PATH,
    CONNECTIONS_FULL_ANSWER,
    LIVE_PATH,
    RECORD_BATCH,
    USERS_PATH,
    partition_path,
)

TOKEN_ENV = "RAFTLOG_HOSTILE_TOKEN"
IDLE_SOCKETS = {"kafka": 1100, "http": 300}  # per node: past the Kafka door's node-wide cap (1000)
IDLE_OPENS_PER_S = 200.0  # per node and door: how fast idle connections are opened (and reopened)
REOPENS_PER_S = 4.0  # per attacking connection
DRIBBLE_CONNECTIONS = 2  # per node and door
DRIBBLE_INTERVAL_S = 1.0
OVERSIZE_ANNOUNCED_BYTES = 100 * 1024 * 1024
OVERSIZE_SENT_BYTES = 1024 * 1024
OVERSIZE_CONNECTIONS = 2  # per node
BOMB_INTERVAL_S = 4.0  # per node
BOMB_INFLATED_BYTES = 1024 * 1024 * 1024
RAFT_FLOOD_CONNECTIONS = 48  # per node
BAD_CREDENTIALS_PER_S = 10.0  # per node
LOOPBACK_SOURCES = ("127.0.9.1", "127.0.9.2", "127.0.9.3", "127.0.9.4")  # not the honest clients' 127.0.0.1
STOP_TIMEOUT_S = 30.0
# A window's attackers attack at least ATTACK_MIN_S before they are stopped, the stop waiting for them at most
# BEGIN_WAIT_MAX_S: on a loaded machine a process started ahead may still be importing when its window ends.
ATTACK_MIN_S = 8.0
BEGIN_WAIT_MAX_S = 60.0
# With a login (the logged-in attacks), a window also lasts until the pin announced PINNED_FRAMES frames to
# every node and each node took a second of its pace from them, then PIN_HELD_S more (what
# ``hostile_budgets.pin_missed`` asks), at most PIN_WAIT_MAX_S from its start: making its user is a
# replicated write, and reading a frame's first bytes takes its turn, which a loaded machine may take
# seconds to give; a window that ended first proved nothing of the budgets
PINNED_FRAMES = 2
PIN_HELD_S = 1.5
PIN_WAIT_MAX_S = 120.0
HOLD_MAX_S = 120.0  # the longest one attacking connection waits for the node to act
PIN_USER, PIN_PASSWORD = "hostile-pinner", "hostile-pinner's password"  # the pin's, under the cap alone
LOGIN_USER_CAP = 40  # the fault runs nodes with --kafka-connections-per-user-max at this (default 500) ...
LOGIN_IDLE_SOCKETS = 60  # per node: ... so that tens of logged-in connections pass it, not hundreds
LOGIN_KEEPALIVE_S = 90.0  # past the door's at-cap idle timeout (60 s)
PIN_CONNECTIONS = 6  # per node
PIN_FRAME_BYTES = 100 * 1024 * 1024 - 64  # within the door's frame bound (100 MiB)
PIN_BYTES_PER_S = 4 * 1024 * 1024  # per connection


# -- the attacks (I/O) ------------------------------------------------------------------------------


class Pace:
    """At most ``per_s`` passes a second through :meth:`wait`, shared by the tasks that hold it."""

    def __init__(self, per_s: float) -> None:
        self.interval_s = 1.0 / per_s
        self.next_s = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        self.next_s = max(self.next_s, now) + self.interval_s
        await asyncio.sleep(self.next_s - self.interval_s - now)


class Hostile:
    """Every attack on every target until ``stop`` is set; ``tally`` counts outcomes per attack."""

    def __init__(self, targets: Sequence[NodeSpec], sources: Sequence[str], topics: dict[str, int],
                 rng: random.Random, token: str | None) -> None:  # fmt: skip
        self.targets = list(targets)
        self.sources = list(sources) or [""]
        self.topics = topics
        self.rng = rng
        self.token = token
        self.tally: dict[str, Counter[str]] = {}
        self.stop = asyncio.Event()
        self.on_stop: Callable[[], None] | None = None  # called once attacking stops, before the cleanup
        self.on_begin: Callable[[], None] | None = None  # called once every attack is under way
        # called once the logged-in pin has announced PINNED_FRAMES frames to every node, and each read a
        # second of its pace
        self.on_pinned: Callable[[], None] | None = None
        self._pinned: Counter[str] = Counter()  # node -> frames the pin announced to it
        self._pin_sent: Counter[str] = Counter()  # node -> bytes of the pin's frames it read
        self.stopped_at_s: float | None = None
        self._source_turn = 0
        self._bombs: dict[str, bytes] = {}
        self._user_made = asyncio.Event()  # SASL_USER and PIN_USER exist: the logged-in attacks may begin
        self._making_user: asyncio.Task[None] | None = None

    def count(self, attack: str, what: str, n: int = 1) -> None:
        self.tally.setdefault(attack, Counter())[what] += n

    def _count_ended(self, tasks: Sequence[asyncio.Future[None]]) -> None:
        """An attack ends only when stopped: one that ended before, on an exception its pacing does not
        count, is counted (``attacker``, ``ended:<exception>``) and its traceback printed, so a window
        without that attack's figures says why instead of passing for one it never reached."""
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                exc = task.exception()
                self.count("attacker", f"ended:{type(exc).__name__}")
                traceback.print_exception(exc, file=sys.stderr)

    def _source(self, pin: bool = False) -> str:
        """The next address to connect from; the last one is the pin's alone (``pin``): a node refuses
        logins from an address that failed too many (the bad credentials', the idle logins' past their
        cap), which left the pin no login on a node now and then."""
        if pin:
            return self.sources[-1]
        others = self.sources[:-1] or self.sources
        self._source_turn += 1
        return others[self._source_turn % len(others)]

    async def _open(
        self, host: str, port: int, pin: bool = False
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        source = self._source(pin)
        local = (source, 0) if source else None
        return await asyncio.wait_for(asyncio.open_connection(host, port, local_addr=local), 5.0)

    @contextlib.asynccontextmanager
    async def _connection(
        self, host: str, port: int, pin: bool = False
    ) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """``_open``, and the connection closed on leaving."""
        reader, writer = await self._open(host, port, pin)
        try:
            yield reader, writer
        finally:
            writer.close()

    async def run(self) -> None:
        jobs: list[Awaitable[None]] = []
        wire = hostile_producers.Wire(kafka_frame, produce_frame, produce_error, _session)
        producer_attacks = hostile_producers.ProducerAttacks(self, wire)
        for target in self.targets:
            for door, port in (("kafka", target.kafka_port), ("http", target.http_port)):
                pace = Pace(IDLE_OPENS_PER_S)
                jobs += [self._idle(door, target.host, port, pace) for _ in range(IDLE_SOCKETS[door])]
                payload = api_versions_frame() if door == "kafka" else _http_get(target.host)
                jobs += [self._dribble(door, target.host, port, payload) for _ in range(DRIBBLE_CONNECTIONS)]
            jobs += [self._oversize(target) for _ in range(OVERSIZE_CONNECTIONS)]
            jobs += [self._raft_flood(target) for _ in range(RAFT_FLOOD_CONNECTIONS)]
            jobs.append(self._bomb(target))
            jobs.append(self._bad_credentials(target))
            jobs += producer_attacks.jobs(target)  # producer ids used by another, transactions over HTTP
            if self.token:  # the attacks of a logged-in user: its user is made with the admin token
                pace = Pace(IDLE_OPENS_PER_S)
                jobs += [self._login_idle(target, pace) for _ in range(LOGIN_IDLE_SOCKETS)]
                jobs += [self._login_pin(target) for _ in range(PIN_CONNECTIONS)]
        self.make_user()  # the logged-in attacks wait for it; the others start at once
        tasks = [asyncio.ensure_future(job) for job in jobs]
        await asyncio.sleep(0)  # each attack's first step
        if self.on_begin is not None:
            self.on_begin()
        try:
            await self.stop.wait()
        finally:
            self.stopped_at_s = time.monotonic()
            self._count_ended(tasks)
            if self.on_stop is not None:
                self.on_stop()  # the tally first: closing thousands of connections may take a while
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _paced(self, attack: str, one: Callable[[], Awaitable[None]], per_s: float) -> None:
        """``one`` again and again, at most ``per_s`` times a second, until stopped; an OSError is counted."""
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                await one()
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                self.count(attack, f"error:{type(exc).__name__}")
            await asyncio.sleep(
                max(0.0, 1.0 / per_s - (time.monotonic() - began)) + self.rng.random() / per_s
            )

    async def _wait_cut(self, attack: str, reader: asyncio.StreamReader, opened: float) -> None:
        """Wait (at most HOLD_MAX_S) for the node to close the connection; count how long it took."""
        try:
            while await asyncio.wait_for(reader.read(65536), HOLD_MAX_S):
                pass
            self.count(attack, "cut")
            self.count(attack, "cut_after_s_total", int(time.monotonic() - opened))
        except TimeoutError:
            self.count(attack, f"still_open_after_{int(HOLD_MAX_S)}s")
        except ConnectionError:
            self.count(attack, "reset")

    async def _idle(self, door: str, host: str, port: int, pace: Pace) -> None:
        attack = f"idle-{door}"
        while not self.stop.is_set():
            await pace.wait()
            try:
                reader, writer = await self._open(host, port)
            except (OSError, TimeoutError) as exc:
                self.count(attack, f"error:{type(exc).__name__}")
                continue
            self.count(attack, "opened")
            try:
                await self._wait_cut(attack, reader, time.monotonic())
            finally:
                writer.close()

    async def _dribble(self, door: str, host: str, port: int, payload: bytes) -> None:
        attack = f"dribble-{door}"

        async def one() -> None:
            async with self._connection(host, port) as (reader, writer):
                opened = time.monotonic()
                self.count(attack, "opened")
                for i in range(len(payload)):
                    writer.write(payload[i : i + 1])
                    await writer.drain()
                    if reader.at_eof():
                        break
                    with contextlib.suppress(TimeoutError):
                        if await asyncio.wait_for(reader.read(65536), DRIBBLE_INTERVAL_S) == b"":
                            break
                else:
                    self.count(attack, "whole_request_sent")  # the node waited for every byte
                await self._wait_cut(attack, reader, opened)

        await self._paced(attack, one, 1.0)

    async def _oversize(self, target: NodeSpec) -> None:
        attack = "oversize-kafka"
        chunk = bytes(64 * 1024)

        async def one() -> None:
            async with self._connection(target.host, target.kafka_port) as (reader, writer):
                opened = time.monotonic()
                self.count(attack, "opened")
                writer.write(struct.pack(">i", OVERSIZE_ANNOUNCED_BYTES))
                sent = 0
                while sent < OVERSIZE_SENT_BYTES and not reader.at_eof():
                    writer.write(chunk)
                    await asyncio.wait_for(writer.drain(), 10.0)
                    sent += len(chunk)
                self.count(attack, "bytes_sent", sent)
                await self._wait_cut(attack, reader, opened)

        await self._paced(attack, one, 1.0)

    async def _raft_flood(self, target: NodeSpec) -> None:
        attack = "raft-flood"

        async def one() -> None:
            async with self._connection(target.host, target.raft_port) as (reader, _):
                self.count(attack, "opened")
                await self._wait_cut(attack, reader, time.monotonic())

        await self._paced(attack, one, REOPENS_PER_S)

    async def _bomb(self, target: NodeSpec) -> None:
        turn = 0
        if not self._bombs:  # made once, by the first bomber, on the loop: about 15 ms of CPU
            self._bombs = {"gzip": gzip_bomb(BOMB_INFLATED_BYTES), "zstd": zstd_bomb(BOMB_INFLATED_BYTES)}

        async def one() -> None:
            nonlocal turn
            turn += 1
            codec = "gzip" if turn % 2 else "zstd"
            topic = self.rng.choice(sorted(self.topics))
            partition = self.rng.randrange(self.topics[topic])
            batch = bomb_batch(self._bombs[codec], codec, int(time.time() * 1000))
            if turn % 4 < 2:
                await self._bomb_kafka(target, topic, partition, batch)
            else:
                await self._bomb_http(target, topic, partition, batch)

        await self._paced("bomb", one, 1.0 / BOMB_INTERVAL_S)

    async def _bomb_kafka(self, target: NodeSpec, topic: str, partition: int, batch: bytes) -> None:
        attack = "bomb-kafka"
        async with self._connection(target.host, target.kafka_port) as (reader, writer):
            self.count(attack, "sent")
            writer.write(produce_frame(topic, partition, batch, 7))
            await asyncio.wait_for(writer.drain(), 30.0)
            try:
                size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 60.0))[0]
                error = produce_error(await asyncio.wait_for(reader.readexactly(size), 30.0))
            except (asyncio.IncompleteReadError, ConnectionError):
                self.count(attack, "connection_closed")
                return
            self.count(attack, "bombs_accepted" if error == 0 else f"refused:{error}")

    async def _bomb_http(self, target: NodeSpec, topic: str, partition: int, batch: bytes) -> None:
        attack = "bomb-http"
        headers = {"Content-Type": RECORD_BATCH}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = f"http://{target.host}:{target.http_port}{partition_path(topic, partition)}"
        self.count(attack, "sent")
        async with _session(self._source()) as session:
            try:
                async with session.post(url, data=batch, headers=headers,
                                        timeout=aiohttp.ClientTimeout(total=60)) as answer:  # fmt: skip
                    await answer.read()
                    self.count(
                        attack, "bombs_accepted" if answer.status < 300 else f"refused:{answer.status}"
                    )
            except aiohttp.ClientError as exc:
                self.count(attack, f"error:{type(exc).__name__}")

    def make_user(self) -> None:
        """Begin making ``SASL_USER`` and ``PIN_USER`` (with the admin token), unless begun already: a
        process started ahead of its window begins before it, so that the logged-in attacks need not
        wait."""
        if self.token and self._making_user is None:
            self._making_user = asyncio.ensure_future(self._make_user())

    async def _make_user(self) -> None:
        """``SASL_USER`` then ``PIN_USER``, each through a node that answers (a replicated change: every
        node knows it), tried until one does."""
        for user, password in ((SASL_USER, SASL_PASSWORD), (PIN_USER, PIN_PASSWORD)):
            while not await self._made(user, password):
                if self.stop.is_set():
                    return
                await asyncio.sleep(1.0)
        self._user_made.set()

    async def _made(self, user: str, password: str) -> bool:
        """Whether a node made ``user`` (each tried once; a refusal is counted)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        body = {"name": user, "password": password}
        timeout = aiohttp.ClientTimeout(total=10)
        for target in self.targets:
            url = f"http://{target.host}:{target.http_port}{USERS_PATH}"
            async with _session(self._source()) as session:
                try:
                    async with session.post(url, json=body, headers=headers, timeout=timeout) as answer:
                        if answer.status < 300:
                            return True
                        self.count("login-idle", f"user_not_made:{answer.status}")
                except (aiohttp.ClientError, TimeoutError) as exc:
                    self.count("login-idle", f"user_not_made:{type(exc).__name__}")
        return False

    async def _log_in(
        self, attack: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pin: bool = False
    ) -> bool:
        """SASL/PLAIN as ``SASL_USER`` (``pin``: ``PIN_USER``); whether the node took it (a refusal is
        counted)."""
        frames = sasl_frames(PIN_USER, PIN_PASSWORD) if pin else sasl_frames()
        for (api_key, version), frame in zip(((17, 1), (36, 2)), frames, strict=True):
            writer.write(frame)
            await asyncio.wait_for(writer.drain(), 10.0)
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30.0))[0]
            error = sasl_error(api_key, version, await asyncio.wait_for(reader.readexactly(size), 30.0))
            if error:
                self.count(attack, f"login_refused:{error}")
                return False
        self.count(attack, "logged_in")
        return True

    async def _login_idle(self, target: NodeSpec, pace: Pace) -> None:
        attack = "login-idle"
        keepalive = api_versions_frame()
        await self._user_made.wait()
        while not self.stop.is_set():
            await pace.wait()
            try:
                async with self._connection(target.host, target.kafka_port) as (reader, writer):
                    opened = time.monotonic()
                    self.count(attack, "opened")
                    if not await self._log_in(attack, reader, writer):
                        await self._wait_cut(attack, reader, opened)
                        continue
                    while True:  # a request now and then: never idle for the door's 600 s
                        try:
                            if await asyncio.wait_for(reader.read(65536), LOGIN_KEEPALIVE_S) == b"":
                                break
                        except TimeoutError:
                            writer.write(keepalive)
                            await writer.drain()
                        if time.monotonic() - opened > HOLD_MAX_S + LOGIN_KEEPALIVE_S:
                            # below its cap a user may keep what it uses (the cap and the super
                            # users' reserve keep the others' room): counted, not a finding
                            self.count(attack, f"kept_over_{int(HOLD_MAX_S + LOGIN_KEEPALIVE_S)}s")
                            await self.stop.wait()
                    self.count(attack, "cut")
                    self.count(attack, "cut_after_s_total", int(time.monotonic() - opened))
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                self.count(attack, f"error:{type(exc).__name__}")

    async def _login_pin(self, target: NodeSpec) -> None:
        attack = "login-pin"
        chunk = bytes(PIN_BYTES_PER_S // 10)
        await self._user_made.wait()

        async def one() -> None:
            async with self._connection(target.host, target.kafka_port, pin=True) as (reader, writer):
                self.count(attack, "opened")
                if not await self._log_in(attack, reader, writer, pin=True):
                    return
                writer.write(struct.pack(">i", PIN_FRAME_BYTES) + pin_header())
                self.count(attack, f"frames_announced:{target.node_id}")
                self._pin_landed(target.node_id, frames=1)
                sent = len(pin_header())
                while sent < PIN_FRAME_BYTES and not reader.at_eof() and not self.stop.is_set():
                    began = time.monotonic()
                    part = chunk[: PIN_FRAME_BYTES - sent]
                    writer.write(part)
                    try:  # the node stops reading while the request waits for room: so does this
                        await asyncio.wait_for(writer.drain(), HOLD_MAX_S)
                    except TimeoutError:
                        self.count(attack, f"not_read_for_{int(HOLD_MAX_S)}s")
                        return
                    sent += len(part)
                    # counted as it goes (the tally is written when the attackers stop, mid-frame)
                    self.count(attack, f"bytes_sent:{target.node_id}", len(part))
                    self._pin_landed(target.node_id, sent=len(part))
                    await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - began)))
                if sent >= PIN_FRAME_BYTES:
                    self.count(attack, "whole_frame_sent")
                    await self._wait_cut(attack, reader, time.monotonic())  # it does not decode: closed

        await self._paced(attack, one, 1.0)

    def _pin_landed(self, node: str, frames: int = 0, sent: int = 0) -> None:
        """``frames`` more announced to ``node`` and ``sent`` more bytes of them read by it: once every node
        has ``PINNED_FRAMES`` and a second of the pace (what ``hostile_budgets.pin_missed`` asks), then
        ``on_pinned``. Counted as the node reads, not as the pin writes: on a loaded machine a node may
        take seconds to read the first bytes of a frame it announced."""
        before = self._pin_held()
        self._pinned[node] += frames
        self._pin_sent[node] += sent
        if self._pin_held() and not before and self.on_pinned is not None:
            self.on_pinned()

    def _pin_held(self) -> bool:
        return all(
            self._pinned[t.node_id] >= PINNED_FRAMES and self._pin_sent[t.node_id] >= PIN_BYTES_PER_S
            for t in self.targets
        )

    async def _bad_credentials(self, target: NodeSpec) -> None:
        """Raw requests (an HTTP client library would re-encode a header that is not UTF-8)."""
        attack = "bad-credentials"

        async def one() -> None:
            async with self._connection(target.host, target.http_port) as (reader, writer):
                writer.write(
                    b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nAuthorization: %s\r\n\r\n"
                    % (ADMIN_TOPICS_PATH.encode(), target.host.encode(), self.rng.choice(BAD_CREDENTIALS))
                )
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
                parts = head.split(b"\r\n", 1)[0].split()
                status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
                self.count(attack, credentials_answer(status, head))

        await self._paced(attack, one, BAD_CREDENTIALS_PER_S)


def credentials_answer(status: int, head: bytes) -> str:
    """A bad-credentials request's answer in the tally: a 5xx is a finding, but for the connection bound's
    answer (the idle attack holds more connections than an address may: the door holding)."""
    if head == CONNECTIONS_FULL_ANSWER:
        return "refused:connections"
    return f"server_error:{status}" if status >= 500 else f"answered:{status}"


def _http_get(host: str) -> bytes:
    return f"GET {LIVE_PATH} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: hostile\r\n\r\n".encode()


def _session(source: str) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(local_addr=(source, 0) if source else None, force_close=True)
    return aiohttp.ClientSession(connector=connector)


def findings(tally: dict[str, dict[str, int]]) -> list[str]:
    """What in a tally shows a door that did not hold: bombs accepted, a 5xx for bad credentials, a
    dribbled request served whole, an attacking connection the node never cut."""
    found = []
    for attack, counts in sorted(tally.items()):
        for what, n in sorted(counts.items()):
            if n and (what in ("bombs_accepted", "whole_request_sent")
                      or what.startswith("server_error")
                      or what in hostile_producers.FINDINGS
                      or what.startswith("still_open")):  # fmt: skip
                found.append(f"{attack}: {what} {n}")
    return found


# -- the process, and its handle for the nemesis ----------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jepsen.hostile", description=__doc__.split("\n")[0])
    parser.add_argument("--target", action="append", required=True, type=NodeSpec.parse)
    parser.add_argument("--source", action="append", default=[], help="a local address to connect from")
    parser.add_argument("--topic", action="append", default=[], help="TOPIC:PARTITIONS to bomb")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="where the tally is written (JSON)")
    parser.add_argument("--go", help="attack only once this file exists (the process started ahead)")
    args = parser.parse_args(argv)
    topics = {name: int(count) for name, _, count in (t.partition(":") for t in args.topic)}
    hostile = Hostile(args.target, args.source, topics, random.Random(args.seed), os.environ.get(TOKEN_ENV))
    began = time.monotonic()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, hostile.stop.set)
        hostile.make_user()
        while args.go and not os.path.exists(args.go) and not hostile.stop.is_set():
            await asyncio.sleep(0.05)  # started ahead of its window: imports take seconds when loaded
        nonlocal began
        began = time.monotonic()
        loop.call_later(args.seconds, hostile.stop.set)
        await hostile.run()

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # thousands of idle sockets

    def write_tally() -> None:
        tally = {attack: dict(counts) for attack, counts in sorted(hostile.tally.items())}
        out = {"seconds": round(time.monotonic() - began, 1), "tally": tally, "findings": findings(tally)}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, sort_keys=True)
        # then out at once: the kernel closes thousands of sockets faster than cancelling their tasks
        # (a run of every fault saw that take over 30 s with nodes paused and links throttled)
        sys.stdout.flush()
        os._exit(0)

    def mark(suffix: str) -> Callable[[], None]:
        def touch() -> None:
            with open(args.out + suffix, "w", encoding="utf-8"):
                pass

        return touch

    hostile.on_stop = write_tally
    hostile.on_begin = mark(".began")
    hostile.on_pinned = mark(".pinned")
    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def peak_rss_bytes(pid: int) -> int | None:
    """The highest resident memory a process has had (VmHWM), None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


@dataclass
class Attackers:
    """The running process of :func:`main`, started and stopped by the nemesis, and the peak memory of
    each node's process when it started (``node_pids``: a node restarted meanwhile is not compared)."""

    process: subprocess.Popen[bytes]
    out: str
    node_pids: dict[str, int]
    peaks_before: dict[str, int]
    logged_in: bool = False  # with the logged-in attacks (a token): the window waits for the pin to land

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    def start(
        cls,
        targets: Sequence[NodeSpec],
        sources: Sequence[str],
        topics: dict[str, int],
        seed: int,
        token: str | None,
        directory: str,
        node_pids: dict[str, int],
        seconds: float = 3600.0,
        ahead: bool = False,
    ) -> Attackers:
        """The attackers' process, attacking at once, or with ``ahead`` once told to (``go``): its start
        (imports included) takes seconds on a loaded machine, longer than a short window."""
        out = os.path.join(directory, f"hostile-{int(time.time() * 1000)}.json")
        argv = [sys.executable, "-m", "jepsen.hostile", "--seconds", str(seconds), "--seed", str(seed),
                "--out", out, *(("--go", out + ".go") if ahead else ())]  # fmt: skip
        for target in targets:
            argv += ["--target", target.argument()]
        for source in sources:
            argv += ["--source", source]
        for topic, count in sorted(topics.items()):
            argv += ["--topic", f"{topic}:{count}"]
        env = dict(os.environ)
        if token:
            env[TOKEN_ENV] = token
        log = open(out.removesuffix(".json") + ".log", "ab")  # noqa: SIM115 (the child's, closed below)
        try:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        finally:
            log.close()
        peaks = {node: peak for node, pid in node_pids.items() if (peak := peak_rss_bytes(pid)) is not None}
        return cls(process, out, dict(node_pids), peaks, bool(token))

    def go(self, node_pids: dict[str, int]) -> None:
        """Let a process started ahead (``ahead=True``) attack now; each node's peak memory is read now."""
        self.node_pids = dict(node_pids)
        self.peaks_before = {
            node: peak for node, pid in node_pids.items() if (peak := peak_rss_bytes(pid)) is not None
        }
        with open(self.out + ".go", "w", encoding="utf-8"):
            pass

    def stop(self, growth_max: Mapping[str, int]) -> dict[str, Any]:
        """SIGTERM, wait for the tally (SIGKILL after ``STOP_TIMEOUT_S``); the tally, or why there is none,
        with how much each node's peak memory rose meanwhile (over its ``growth_max``, what its listeners'
        budgets let it hold: ``hostile_budgets.peak_growth_max``, a finding)."""
        report = self._tally()
        growth = {}
        for node, before in sorted(self.peaks_before.items()):
            after = peak_rss_bytes(self.node_pids[node])
            if after is not None:
                growth[node] = after - before
        report["node_peak_rss_growth_mib"] = {node: round(g / 2**20, 1) for node, g in growth.items()}
        report.setdefault("findings", []).extend(
            f"{node}'s peak memory rose by {g / 2**20:.0f} MiB (more than {growth_max[node] >> 20} MiB)"
            for node, g in growth.items()
            if g > growth_max[node]
        )
        return report

    def _let_attack(self) -> None:
        """Wait until the process has attacked for ``ATTACK_MIN_S`` (it marks its start), at most
        ``BEGIN_WAIT_MAX_S``: a window shorter than a loaded machine's start-up is not a window at all;
        with a login, also until the pin has held ``PIN_HELD_S`` on every node (it marks that), at most
        ``PIN_WAIT_MAX_S`` (a pin that never landed is then the window's finding: ``pin_missed``)."""
        self._wait_marked(".began", ATTACK_MIN_S, BEGIN_WAIT_MAX_S)
        if self.logged_in:
            self._wait_marked(".pinned", PIN_HELD_S, PIN_WAIT_MAX_S)

    def _wait_marked(self, suffix: str, held_s: float, wait_max_s: float) -> None:
        """Wait until the process's ``suffix`` mark is ``held_s`` old, at most ``wait_max_s``."""
        deadline = time.monotonic() + wait_max_s
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                age_s = time.time() - os.path.getmtime(self.out + suffix)
            except OSError:
                time.sleep(0.1)  # not marked yet
                continue
            if age_s >= held_s:
                return
            time.sleep(min(held_s - age_s, 0.5))

    def _tally(self) -> dict[str, Any]:
        self._let_attack()
        if self.process.poll() is None:
            self.process.terminate()
        killed = False
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # closing its connections took too long: the tally is written
            self.process.kill()
            self.process.wait()
            killed = True
        try:
            with open(self.out, encoding="utf-8") as f:
                report: dict[str, Any] = json.load(f)
        except (OSError, ValueError) as exc:
            if self.process.returncode == -signal.SIGTERM:  # its handler not yet installed: still starting
                return {"tally": {}, "findings": [], "not_started": "stopped before its attacks began"}
            return {
                "findings": [f"the hostile clients left no tally ({exc}; exit {self.process.returncode})"]
            }
        if killed:
            report["killed"] = f"still closing its connections {STOP_TIMEOUT_S:.0f} s after SIGTERM"
        return report
