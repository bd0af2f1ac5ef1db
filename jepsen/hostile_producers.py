"""The hostile clients' attacks on producers (``jepsen.hostile`` runs them beside its others, at each node):

- ``producer-id``: every ``PRODUCER_ID_INTERVAL_S``, reads batches of a workload partition over HTTP (as
  any reader may; from the partition's start, then from the newest batch read), takes an honest Kafka
  producer's producer id, epoch and next sequence from a batch header (an id InitProducerId gave: bit 62
  set), and sends a record of its own with them through
  the Kafka door, logged in over SASL/PLAIN as a user of its own (made with the admin token): a producer
  id belongs to the principal it was given to (the workload's are unauthenticated), so the node must
  refuse it, CLUSTER_AUTHORIZATION_FAILED. One accepted is a finding (``injections_accepted``), and its
  record would be a value no honest client sent, in the log the checker reads.
- ``http-hanging-transaction``: every ``HANGING_INTERVAL_S``, a transactional batch (the transactional
  bit, a producer id no coordinator gave) through the HTTP door's batch media type, which once froze every
  read_committed reader of the partition for good: it must be refused (a 403). One accepted is a finding
  (``hanging_accepted``). Then a read_committed reader of the partition must still move: a read_committed
  fetch that finds nothing below the high watermark for ``FROZEN_AFTER_S`` is a finding
  (``read_committed_frozen``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import crc32c
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from jepsen.control import NodeSpec
from raftlog_contract import RECORD_BATCH, USERS_PATH, offsets_path, partition_path, records_path

PRODUCER_ID_INTERVAL_S = 2.0  # per node
HANGING_INTERVAL_S = 4.0  # per node
FROZEN_AFTER_S = 20.0  # a read_committed reader that finds nothing below the high watermark this long
GIVEN_BIT = 1 << 62  # set in every producer id InitProducerId gives (docs/security.md)
UNKNOWN_PRODUCER = 424_242  # a producer id no coordinator gave
TRANSACTIONAL_BIT = 0x10  # of a batch's attributes
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
CLUSTER_AUTHORIZATION_FAILED = 31
NOT_LEADER = 6
READ_BYTES_MAX = 256 * 1024
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # Kafka's RecordBatch v2 header (61 bytes)
FINDINGS = ("injections_accepted", "hanging_accepted", "read_committed_frozen")


# -- what is sent (pure) --------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def one_record_batch(
    value: bytes, now_ms: int, producer_id: int, epoch: int, sequence: int, transactional: bool
) -> bytes:
    """A RecordBatch v2 of one record (no key, no headers), CreateTime ``now_ms``, of the producer given,
    its CRC right."""
    body = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    record = _varint(len(body)) + body
    attributes = TRANSACTIONAL_BIT if transactional else 0
    header = BATCH_HEADER.pack(
        0, 49 + len(record), 0, 2, 0, attributes, 0, now_ms, now_ms, producer_id, epoch, sequence, 1
    )
    batch = bytearray(header + record)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def given_producers(data: bytes) -> list[tuple[int, int, int]]:
    """(producer id, epoch, next sequence) of each data batch in ``data`` (stored batches, as fetched) of
    a producer id InitProducerId gave, newest last."""
    found, position = [], 0
    while position + BATCH_HEADER.size <= len(data):
        fields = BATCH_HEADER.unpack_from(data, position)
        length, attributes, producer_id, epoch, sequence, count = (fields[1], fields[5], *fields[9:13])
        if producer_id >= GIVEN_BIT and not attributes & 0x20 and sequence >= 0:  # 0x20: a control batch
            found.append((producer_id, epoch, sequence + count))
        position += 12 + length
    return found


def batches_end(data: bytes) -> int | None:
    """The offset after the last batch in ``data`` (None: no whole batch)."""
    end, position = None, 0
    while position + BATCH_HEADER.size <= len(data):
        fields = BATCH_HEADER.unpack_from(data, position)
        end = fields[0] + fields[6] + 1  # base offset + last offset delta + 1
        position += 12 + fields[1]
    return end


async def _answer(reader: asyncio.StreamReader, api_key: int, version: int) -> Any:
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30.0))[0]
    frame = await asyncio.wait_for(reader.readexactly(size), 30.0)
    cls: Any = load_response_schema(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, used)
    return body


# -- the attacks (I/O) ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Wire:
    """How the hostile process writes Kafka frames and opens HTTP sessions (``jepsen.hostile``'s own)."""

    kafka_frame: Callable[[int, int, Any, int], bytes]  # api key, version, body, correlation id
    produce_frame: Callable[[str, int, bytes, int], bytes]  # topic, partition, batch, correlation id
    produce_error: Callable[[bytes], int]  # a Produce answer's partition error
    session: Callable[[str], aiohttp.ClientSession]  # connecting from that local address


class Attackers(Protocol):
    """What the attacks use of ``jepsen.hostile.Hostile``: its tally, sources, pace and stop."""

    rng: random.Random
    topics: dict[str, int]
    token: str | None

    def count(self, attack: str, what: str, n: int = 1) -> None: ...

    def _source(self) -> str: ...

    def _connection(
        self, host: str, port: int
    ) -> contextlib.AbstractAsyncContextManager[tuple[asyncio.StreamReader, asyncio.StreamWriter]]: ...

    async def _paced(self, attack: str, one: Callable[[], Awaitable[None]], per_s: float) -> None: ...


class ProducerAttacks:
    """The two attacks above, at every target, for ``hostile``."""

    def __init__(self, hostile: Attackers, wire: Wire) -> None:
        self.hostile = hostile
        self.wire = wire
        self.user = f"hostile-{hostile.rng.getrandbits(32):08x}"
        self.password = f"pw-{hostile.rng.getrandbits(64):016x}"
        self._user_made = False
        self._user_lock = asyncio.Lock()
        self._behind_since: dict[tuple[str, int], tuple[int, float]] = {}  # (topic, partition) -> (next, s)
        self._committed_next: dict[tuple[str, int], int] = {}
        self._read_from: dict[tuple[str, int], int] = {}  # where the producer-id attack reads next

    def jobs(self, target: NodeSpec) -> list[Any]:
        if not self.hostile.topics:
            return []
        return [self._producer_id(target), self._hanging(target)]

    def _session(self) -> aiohttp.ClientSession:
        """A session connecting from one of the attackers' own addresses."""
        return self.wire.session(self.hostile._source())

    def _frame(self, api_key: int, version: int, fields: dict[str, Any], correlation_id: int) -> bytes:
        cls: Any = load_request_schema(api_key, version)
        return self.wire.kafka_frame(api_key, version, cls(**fields), correlation_id)

    def _headers(self) -> dict[str, str]:
        token = self.hostile.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _get(self, session: aiohttp.ClientSession, url: str, accept: str) -> tuple[int, bytes, Any]:
        async with session.get(url, headers={**self._headers(), "Accept": accept},
                               timeout=aiohttp.ClientTimeout(total=20)) as answer:  # fmt: skip
            return answer.status, await answer.read(), answer.headers

    async def _make_user(self, target: NodeSpec) -> None:
        """The attacker's own user (a principal other than the workload's unauthenticated clients)."""
        if self._user_made:
            return
        url = f"http://{target.host}:{target.http_port}{USERS_PATH}"
        async with self._session() as session, session.post(
            url, json={"name": self.user, "password": self.password}, headers=self._headers(),
            timeout=aiohttp.ClientTimeout(total=20),
        ) as answer:  # fmt: skip
            await answer.read()
            self.hostile.count("producer-id", f"user:{answer.status}")
            self._user_made = answer.status < 300

    def _counting(self, attack: str, one: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """``one``, an HTTP client's error counted (``Hostile._paced`` counts the socket's)."""

        async def counted() -> None:
            try:
                await one()
            except aiohttp.ClientError as exc:
                self.hostile.count(attack, f"error:{type(exc).__name__}")

        return counted

    def _pick(self) -> tuple[str, int]:
        rng, topics = self.hostile.rng, self.hostile.topics
        topic = rng.choice(sorted(topics))
        return topic, rng.randrange(topics[topic])

    async def _producer_id(self, target: NodeSpec) -> None:
        attack = "producer-id"

        async def one() -> None:
            async with self._user_lock:
                await self._make_user(target)
            if not self._user_made:
                return
            topic, partition = self._pick()
            base = f"http://{target.host}:{target.http_port}"
            start = self._read_from.get((topic, partition), 0)  # the run's topics are new: 0 is there
            async with self._session() as session:
                url = f"{base}{records_path(topic, partition)}?offset={start}&max_bytes={READ_BYTES_MAX}"
                status, data, _ = await self._get(session, url, RECORD_BATCH)
            end = batches_end(data) if status == 200 else None
            if end is not None:  # the next read starts at the newest batch read
                self._read_from[(topic, partition)] = max(start, end - 1)
            producers = given_producers(data) if status == 200 else []
            if not producers:
                self.hostile.count(attack, "no_given_producer_seen")
                return
            self.hostile.count(attack, "given_producer_seen")
            producer_id, epoch, sequence = producers[-1]
            batch = one_record_batch(b'"hostile-injection"', int(time.time() * 1000), producer_id, epoch,
                                     sequence, transactional=False)  # fmt: skip
            error = await self._produce_as_user(target, topic, partition, batch)
            if error == 0:
                self.hostile.count(attack, "injections_accepted")
            else:
                self.hostile.count(attack, f"refused:{error}")

        await self.hostile._paced(attack, self._counting(attack, one), 1.0 / PRODUCER_ID_INTERVAL_S)

    async def _produce_as_user(self, target: NodeSpec, topic: str, partition: int, batch: bytes) -> int:
        """One Produce of ``batch`` through the target's Kafka door, logged in as the attacker's user: the
        partition's error code (-1: the login failed)."""
        async with self.hostile._connection(target.host, target.kafka_port) as (reader, writer):
            writer.write(self._frame(17, SASL_HANDSHAKE_VERSION, {"mechanism": "PLAIN"}, 1))
            handshake = await _answer(reader, 17, SASL_HANDSHAKE_VERSION)
            token = f"\0{self.user}\0{self.password}".encode()
            writer.write(self._frame(36, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token}, 2))
            login = await _answer(reader, 36, SASL_AUTHENTICATE_VERSION)
            if handshake.error_code.value or login.error_code.value:
                self.hostile.count("producer-id", "login_refused")
                return -1
            writer.write(self.wire.produce_frame(topic, partition, batch, 3))
            await asyncio.wait_for(writer.drain(), 30.0)
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30.0))[0]
            return self.wire.produce_error(await asyncio.wait_for(reader.readexactly(size), 30.0))

    async def _hanging(self, target: NodeSpec) -> None:
        attack = "http-hanging-transaction"

        async def one() -> None:
            topic, partition = self._pick()
            base = f"http://{target.host}:{target.http_port}"
            batch = one_record_batch(b'"hostile-hanging"', int(time.time() * 1000), UNKNOWN_PRODUCER, 0, 0,
                                     transactional=True)  # fmt: skip
            headers = {**self._headers(), "Content-Type": RECORD_BATCH}
            async with self._session() as session:
                async with session.post(base + partition_path(topic, partition), data=batch, headers=headers,
                                        timeout=aiohttp.ClientTimeout(total=30)) as answer:  # fmt: skip
                    await answer.read()
                    self.hostile.count(
                        attack, "hanging_accepted" if answer.status < 300 else f"refused:{answer.status}"
                    )
                await self._read_committed_moves(session, base, topic, partition)

        await self.hostile._paced(attack, self._counting(attack, one), 1.0 / HANGING_INTERVAL_S)

    async def _read_committed_moves(
        self, session: aiohttp.ClientSession, base: str, topic: str, partition: int
    ) -> None:
        """One read_committed fetch of the partition from where the last one left off: records below the
        high watermark must come within ``FROZEN_AFTER_S``."""
        attack, key = "http-hanging-transaction", (topic, partition)
        offset = self._committed_next.get(key)
        if offset is None:  # from the partition's end when first read
            status, body, _ = await self._get(
                session, base + offsets_path(topic, partition), "application/json"
            )
            if status != 200:
                self.hostile.count(attack, f"offsets:{status}")
                return
            offset = self._committed_next[key] = int(json.loads(body)["end_offset"])
        query = f"offset={offset}&isolation=read_committed&max_bytes={READ_BYTES_MAX}"
        status, data, headers = await self._get(
            session, f"{base}{records_path(topic, partition)}?{query}", RECORD_BATCH
        )
        if status != 200:
            self.hostile.count(attack, f"read:{status}")
            return
        high_watermark = int(headers.get("X-Raftlog-High-Watermark", "0"))
        end = batches_end(data)
        if end is not None:
            self._committed_next[key] = max(offset, end)
            self._behind_since.pop(key, None)
            self.hostile.count(attack, "read_committed_moved")
        elif high_watermark > offset:
            since = self._behind_since.setdefault(key, (offset, time.monotonic()))
            if since[0] == offset and time.monotonic() - since[1] > FROZEN_AFTER_S:
                self.hostile.count(attack, "read_committed_frozen")
        else:
            self._behind_since.pop(key, None)
