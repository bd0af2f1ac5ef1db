"""An asyncio Python client of the raftlog HTTP API.

    async with RaftlogClient(["http://127.0.0.1:8081", "http://127.0.0.1:8082"]) as client:
        await client.create_topic("orders", partitions=3)
        produced = await client.produce("orders", [Message(b"hello", key=b"user-1")])
        records = await client.fetch("orders", produced[0].partition, offset=0)

Routing: any node answers any request (the server forwards to the leader), so the client simply sticks to
one server and moves to the next on a connection error.

Retries follow the rule of every client in this package (``retry.py``: bounded, exponential backoff with
jitter, ``Retry-After`` honoured up to ``backoff_max_s``): connection errors and 503 always; 504
("outcome unknown") only for requests that are safe to repeat: reads, offset commits, and produce,
which is idempotent: the client draws one ``producer_id`` when it is
created and gives every produce call the next ``sequence``; a retry reuses the same pair, so the server
answers it with the original offsets instead of appending twice. Produce calls of one client are therefore
serialized (a partition must see a producer's sequences in order); use several clients for parallelism.

Records are sent and fetched in the binary flavour, so bytes round-trip exactly. ``produce_batch`` sends
one partition's records as a record batch encoded here, the format the log stores (no JSON, no base64).

A member of a consumer group (the group's coordinator assigns it partitions and fences its commits):

    async with RaftlogClient(servers) as client:
        consumer = GroupConsumer(client, "billing", offset_reset="earliest")
        await consumer.start(["orders"])
        for record in await consumer.poll(timeout_ms=1000):
            handle(record)
        await consumer.commit()  # what poll handed out; refused for partitions this member lost
        await consumer.close()
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import TracebackType
from typing import Any, NamedTuple

import pybase64

from raftlog.storage.batch import Compression, ProducerRecord, TimestampType, encode_batch
from raftlog.storage.batch_reads import records_from
from raftlog_client.cluster_admin import ClusterAdmin
from raftlog_client.credentials import trusting, user_authorization
from raftlog_client.errors import ClientError, RequestFailed, decode_error
from raftlog_client.retry import Attempts, RetryRule
from raftlog_client.session import NoAnswer, NotSent, NotTrusted, Session
from raftlog_contract import (
    ADMIN_PREFIX,
    ADMIN_TOPICS_PATH,
    BINARY_V2,
    CONSUMER_GROUPS_PATH,
    INSTANCE_EXISTS,
    KAFKA_V2,
    LEADER_HEADER,
    OPEN_TRANSACTIONS_PATH,
    PARTITION_NOT_ASSIGNED,
    PLAIN_JSON,
    RECORD_BATCH,
    STALE_GENERATION,
    TOPICS_PATH,
    TRANSACTIONS_PATH,
    UNKNOWN_INSTANCE,
    admin_topic_path,
    consumer_group_path,
    delete_records_path,
    group_offsets_path,
    group_path,
    instance_path,
    offsets_path,
    partition_path,
    partitions_path,
    records_path,
    retriable,
    topic_partitions_path,
    topic_path,
    transaction_path,
)

PRODUCER_ID_BITS = 62
TIMESTAMP_TYPES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class Message:
    """A record to produce. ``str`` keys, values and header values are sent as UTF-8; a ``None`` value is a
    tombstone. ``timestamp_ms`` (CreateTime) defaults to the clock where the record enters."""

    value: bytes | str | None
    key: bytes | str | None = None
    headers: Sequence[tuple[str, bytes | str | None]] = ()
    partition: int | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Produced:
    partition: int
    offset: int


class ProduceFailed(ClientError):
    """Some records were not written; ``results[i]`` is a ``Produced`` or the ``RequestFailed`` of
    record ``i``."""

    def __init__(self, results: list[Produced | RequestFailed]) -> None:
        failed = [r for r in results if isinstance(r, RequestFailed)]
        super().__init__(f"{len(failed)} of {len(results)} records failed; first: {failed[0]}")
        self.results = results


class FetchedRecord(NamedTuple):
    """A record read. A NamedTuple: a read builds one per record, and it is the cheapest immutable record
    Python has (a frozen dataclass costs 5x as much to build)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: str = "CreateTime"  # or "LogAppendTime": the leader's clock (the topic's config)


def _bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _b64(data: bytes | str) -> str:
    return pybase64.b64encode_as_string(_bytes(data))


def _optional_bytes(data: bytes | str | None) -> bytes | None:
    return None if data is None else _bytes(data)


def _optional_b64(data: bytes | str | None) -> str | None:
    return None if data is None else _b64(data)


def _from_b64(data: str | None) -> bytes | None:
    return None if data is None else pybase64.b64decode(data, validate=True)


def _headers(message: Message) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((k, _optional_bytes(v)) for k, v in message.headers)


def _producer_record(message: Message) -> ProducerRecord:
    return ProducerRecord(
        _optional_bytes(message.value), _optional_bytes(message.key), _headers(message), message.timestamp_ms
    )


def _record_body(message: Message) -> dict[str, Any]:
    body: dict[str, Any] = {"value": _optional_b64(message.value)}
    if message.key is not None:
        body["key"] = _b64(message.key)
    if message.partition is not None:
        body["partition"] = message.partition
    if message.headers:
        body["headers"] = [{"key": k, "value": _optional_b64(v)} for k, v in message.headers]
    if message.timestamp_ms is not None:
        body["timestamp"] = message.timestamp_ms
    return body


def _fetched(row: Mapping[str, Any]) -> FetchedRecord:
    headers = row.get("headers")
    return FetchedRecord(
        row["topic"],
        row["partition"],
        row["offset"],
        row["timestamp"],
        _from_b64(row.get("key")),
        _from_b64(row["value"]),
        tuple((h["key"], _from_b64(h["value"])) for h in headers) if headers else (),
        row.get("timestamp_type", "CreateTime"),
    )


class RaftlogClient:
    """``retries`` bounds the retries of one call and ``retry_for_s`` the time they may take (either may be
    None, not both); ``unreachable_rounds``, how many times every server may refuse a connection in a row
    (None: no bound of its own); ``session_limit`` bounds the connections open at once (0: no limit);
    ``ca``, a PEM file of the CA certificates https servers are checked against (default: the system's
    trusted roots). A cluster serving with ``--require-auth`` asks the calls outside the admin API for a
    user: ``user`` (name and password, HTTP Basic) or ``user_token`` (one of a user's API tokens,
    ``rlt_...``, sent as a bearer token), not both; ``admin_token`` is sent on the admin API's calls."""

    def __init__(
        self,
        servers: Sequence[str],
        *,
        admin_token: str | None = None,
        user: tuple[str, str] | None = None,
        user_token: str | None = None,
        timeout_s: float = 30.0,
        retries: int | None = 8,
        retry_for_s: float | None = None,
        backoff_s: float = 0.05,
        backoff_max_s: float = 2.0,
        producer_id: int | None = None,
        rng: random.Random | None = None,
        session_limit: int = 100,
        unreachable_rounds: int | None = None,
        ca: str | None = None,
    ) -> None:
        if not servers:
            raise ValueError("servers: give at least one base URL, e.g. http://127.0.0.1:8081")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.retry = RetryRule(retries, retry_for_s, backoff_s, backoff_max_s, unreachable_rounds)
        self.servers = [s.rstrip("/") for s in servers]
        self.admin_token = admin_token
        # how calls outside the admin API say who calls (serve --require-auth): a password or a token
        self._as_user = user_authorization(user, user_token)
        self.timeout_s = timeout_s
        self._rng = rng or random.Random()
        self.producer_id = producer_id if producer_id is not None else self._rng.getrandbits(PRODUCER_ID_BITS)
        self._sequence = 0
        self._produce_lock = asyncio.Lock()
        self._current = 0
        self.session = Session(session_limit, trusting(ca))
        self.last_leader: str | None = None  # X-Raftlog-Leader of the last answer
        self.cluster = ClusterAdmin(self._request)  # the admin API: users, ACLs, nodes, moves, ...

    async def __aenter__(self) -> RaftlogClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.session.close()

    def _attempts(self, repeatable: bool) -> Attempts:
        return Attempts(self.retry, servers=len(self.servers), repeatable=repeatable, rng=self._rng)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = PLAIN_JSON,
        params: Mapping[str, str | int] | None = None,
        accept: str | None = None,
        repeatable: bool = False,
        timeout_s: float | None = None,
        raw: bool = False,
    ) -> tuple[int, Any]:
        """One call with retries (``retry.py``); a ``bytes`` body is sent as it is, anything else as JSON;
        with ``raw`` a successful answer is returned as bytes, not parsed. ``repeatable``: the request may
        be repeated after an unknown outcome (504, or a connection lost after sending)."""
        headers = {}
        if body is not None:
            headers["Content-Type"] = content_type
        if accept is not None:
            headers["Accept"] = accept
        if self.admin_token is not None and path.startswith(ADMIN_PREFIX):
            headers["Authorization"] = f"Bearer {self.admin_token}"
        elif self._as_user is not None:
            headers["Authorization"] = self._as_user  # a cluster that requires a user (serve --require-auth)
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        attempts = self._attempts(repeatable)
        while True:
            server = self.servers[self._current % len(self.servers)]
            try:
                answer = await self.session.exchange(
                    method, server + path, body=data, params=params, headers=headers,
                    timeout_s=timeout_s or self.timeout_s,
                )  # fmt: skip
            except (NotSent, NoAnswer) as exc:
                self._current += 1
                wait = attempts.after_unreachable(
                    sent=isinstance(exc, NoAnswer), untrusted=isinstance(exc, NotTrusted)
                )
                if wait is None:
                    raise attempts.unavailable(f"{method} {path}", str(exc)) from None
            else:
                self.last_leader = answer.header(LEADER_HEADER)
                if answer.status < 400:
                    if raw:
                        return answer.status, answer.body
                    return answer.status, json.loads(answer.body) if answer.body.strip() else None
                failed = decode_error(answer.status, answer.body, f"{method} {path}")
                wait = attempts.after_error_answer(answer.status, answer.header("Retry-After"))
                if wait is None:
                    raise failed
            await asyncio.sleep(wait)

    # -- client API ------------------------------------------------------------------------------------

    async def topics(self) -> list[str]:
        _, body = await self._request("GET", TOPICS_PATH, repeatable=True)
        return list(body)

    async def topic(self, name: str) -> dict[str, Any]:
        _, body = await self._request("GET", topic_path(name), repeatable=True)
        return dict(body)

    async def partitions(self, topic: str) -> list[dict[str, Any]]:
        _, body = await self._request("GET", partitions_path(topic), repeatable=True)
        return list(body)

    async def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(beginning_offset, end_offset)``; end is the next offset to be written."""
        path = offsets_path(topic, partition)
        _, body = await self._request("GET", path, repeatable=True)
        return int(body["beginning_offset"]), int(body["end_offset"])

    async def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Delete the partition's records below ``offset`` (-1: every committed one), as Kafka's
        DeleteRecords; returns its log start offset then."""
        path = delete_records_path(topic, partition)
        _, body = await self._request("POST", path, body={"offset": offset}, repeatable=True)
        return int(body["beginning_offset"])

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> tuple[int, int] | None:
        """``(offset, record_timestamp)`` of the first record whose timestamp is at or after
        ``timestamp_ms``; None when no record is that late (Kafka's ``offsetsForTimes``)."""
        path = offsets_path(topic, partition)
        _, body = await self._request("GET", path, params={"timestamp": timestamp_ms}, repeatable=True)
        if body["offset"] is None:
            return None
        return int(body["offset"]), int(body["record_timestamp"])

    async def produce(
        self, topic: str, messages: Sequence[Message], *, partition: int | None = None
    ) -> list[Produced]:
        """Produce idempotently; one ``Produced`` per message, in order. Raises ``ProduceFailed`` if some
        records still failed after the retries, ``RequestFailed`` if the whole request did."""
        if not messages:
            return []
        path = topic_path(topic) if partition is None else partition_path(topic, partition)
        async with self._produce_lock:
            sequence = self._sequence
            self._sequence += 1
            body = {
                "records": [_record_body(m) for m in messages],
                "producer_id": self.producer_id,
                "sequence": sequence,
            }
            attempts = self._attempts(repeatable=True)
            while True:
                _, answer = await self._request(
                    "POST", path, body=body, content_type=BINARY_V2, repeatable=True
                )
                results: list[Produced | RequestFailed] = []
                for row in answer["offsets"]:
                    if row.get("error_code") is None:
                        results.append(Produced(int(row["partition"]), int(row["offset"])))
                    else:
                        results.append(RequestFailed(200, row["error_code"], str(row.get("error")), row))
                if not any(isinstance(r, RequestFailed) and retriable(r.error_code) for r in results):
                    break
                wait = attempts.after_retriable_records()
                if wait is None:
                    break
                await asyncio.sleep(wait)
        if any(isinstance(r, RequestFailed) for r in results):
            raise ProduceFailed(results)
        return [r for r in results if isinstance(r, Produced)]

    async def produce_batch(
        self,
        topic: str,
        partition: int,
        messages: Sequence[Message],
        *,
        compression: Compression = Compression.NONE,
    ) -> list[Produced]:
        """Produce to one partition as one Kafka RecordBatch v2 encoded here
        (``application/vnd.raftlog.batch.v2``), compressed with ``compression``: the cheapest way in for
        bulk producers, no JSON or base64 on either side. Idempotent like :meth:`produce` (the producer id
        and sequence ride in the batch header); records without a timestamp get this machine's clock.
        Raises ``RequestFailed`` if the batch was refused."""
        if not messages:
            return []
        records = [_producer_record(m) for m in messages]
        async with self._produce_lock:
            sequence = self._sequence
            self._sequence += 1
            batch = encode_batch(
                0, records, 0, int(time.time() * 1000), self.producer_id, sequence, compression=compression
            )
            _, answer = await self._request(
                "POST",
                partition_path(topic, partition),
                body=batch,
                content_type=RECORD_BATCH,
                repeatable=True,
            )
        base, count = int(answer["base_offset"]), int(answer["count"])
        if count != len(records):
            raise RequestFailed(200, None, f"{len(records)} records produced as {count}", answer)
        return [Produced(int(answer["partition"]), base + i) for i in range(count)]

    async def _read(
        self,
        topic: str,
        partition: int,
        offset: int,
        timeout_ms: int,
        max_bytes: int | None,
        accept: str,
        read_committed: bool = False,
    ) -> Any:
        """One fetch request: the parsed JSON answer, or the bytes for the record-batch type."""
        params: dict[str, str | int] = {"offset": offset}
        if read_committed:
            params["isolation"] = "read_committed"
        return await self._long_poll(
            "GET", records_path(topic, partition), params, timeout_ms, max_bytes, accept=accept,
            raw=accept == RECORD_BATCH,
        )  # fmt: skip

    async def _long_poll(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int],
        timeout_ms: int,
        max_bytes: int | None,
        *,
        accept: str | None = None,
        raw: bool = False,
    ) -> Any:
        """A read the server holds up to ``timeout_ms`` until it has records (a fetch, a group member's
        poll, a share member's acquire), answering at most ``max_bytes`` if given: repeatable, and given
        that wait beyond the client's own timeout. The answer, as ``_request`` returns it."""
        query = {**params, "timeout": timeout_ms}
        if max_bytes is not None:
            query["max_bytes"] = max_bytes
        _, answer = await self._request(
            method, path, params=query, accept=accept, repeatable=True,
            timeout_s=self.timeout_s + timeout_ms / 1000, raw=raw,
        )  # fmt: skip
        return answer

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        timeout_ms: int = 0,
        max_bytes: int | None = None,
        read_committed: bool = False,
    ) -> list[FetchedRecord]:
        """Committed records from ``offset``; ``read_committed``: only below the partition's last stable
        offset, records of aborted transactions left out (Kafka's isolation.level)."""
        body = await self._read(topic, partition, offset, timeout_ms, max_bytes, BINARY_V2, read_committed)
        return [_fetched(row) for row in body]

    async def fetch_batches(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        timeout_ms: int = 0,
        max_bytes: int | None = None,
    ) -> list[FetchedRecord]:
        """Like :meth:`fetch`, but the server sends the stored batches as they are and they are decoded
        (and CRC-checked) here: the cheapest way out for bulk readers. Records before ``offset`` in the
        first batch are skipped, and so are transaction markers (control batches)."""
        data = await self._read(topic, partition, offset, timeout_ms, max_bytes, RECORD_BATCH)
        return [
            FetchedRecord(
                topic,
                partition,
                r.offset,
                r.timestamp_ms,
                r.key,
                r.value,
                r.headers,
                TIMESTAMP_TYPES[r.timestamp_type],
            )
            for r in records_from(data, offset)
        ]

    async def consume(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_records: int | None = None,
        follow: bool = False,
        poll_timeout_ms: int = 1000,
    ) -> AsyncIterator[FetchedRecord]:
        """Records from ``offset`` on. Without ``follow`` it stops at the end of the partition; with it, it
        long-polls for new records until ``max_records`` were yielded (or forever, if None)."""
        yielded = 0
        while max_records is None or yielded < max_records:
            records = await self.fetch(topic, partition, offset, timeout_ms=poll_timeout_ms if follow else 0)
            if not records and not follow:
                return
            for record in records:
                yield record
                yielded += 1
                offset = record.offset + 1
                if max_records is not None and yielded >= max_records:
                    return

    async def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int]], *, reset: bool = False, force: bool = False
    ) -> None:
        """Commit ``(topic, partition, next offset to read)`` for a consumer group. A ``reset`` (offsets may
        move back) is refused (409/40916) while the group has live members, unless ``force``."""
        body = {
            "offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets],
            "reset": reset,
        }
        params = {"force": "true"} if force else None
        await self._request("POST", group_offsets_path(group), body=body, params=params, repeatable=True)

    async def committed_offsets(
        self, group: str, topic: str, partition: int | None = None
    ) -> dict[tuple[str, int], int]:
        params: dict[str, str | int] = {"topic": topic}
        if partition is not None:
            params["partition"] = partition
        _, body = await self._request("GET", group_offsets_path(group), params=params, repeatable=True)
        return {(row["topic"], int(row["partition"])): int(row["offset"]) for row in body["offsets"]}

    # -- admin API -------------------------------------------------------------------------------------
    async def consumer_groups(self) -> list[dict[str, Any]]:
        """Every group, whichever door its members use, and empty ones that committed offsets: name,
        state, protocol type, door, generation, assignor, members, coordinator partition."""
        _, body = await self._request("GET", CONSUMER_GROUPS_PATH, repeatable=True)
        return list(body["groups"])

    async def consumer_group(self, group: str) -> dict[str, Any]:
        """The admin view of a consumer group: generation, members, their partitions and lag. Unlike an
        instance call it is no member's heartbeat."""
        _, body = await self._request("GET", consumer_group_path(group), repeatable=True)
        return dict(body)

    async def delete_consumer_group(self, group: str) -> dict[str, Any]:
        """Delete an empty group and its committed offsets (409/40916 while it has live members)."""
        _, body = await self._request("DELETE", consumer_group_path(group))
        return dict(body)

    async def transactions(self, state: str | None = None) -> list[dict[str, Any]]:
        """Kafka transactional producers' ids: producer id and epoch, their transaction's state, when it
        began (-1: none open), its timeout, the coordinator partition; only those in ``state``."""
        params = {} if state is None else {"state": state}
        _, body = await self._request("GET", TRANSACTIONS_PATH, params=params, repeatable=True)
        return list(body["transactions"])

    async def open_transactions(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per partition (of ``topic``, else of every topic the caller may READ), the producers with a
        transaction open there: producer id and epoch, coordinator epoch, the transaction's first offset,
        when it began and its age (``error``: a partition that could not be asked)."""
        params = {} if topic is None else {"topic": topic}
        _, body = await self._request("GET", OPEN_TRANSACTIONS_PATH, params=params, repeatable=True)
        return list(body["partitions"])

    async def transaction(self, transactional_id: str) -> dict[str, Any]:
        """One transactional id as its coordinator holds it: the summary's fields, the transaction's
        partitions (written, and holding offsets only), groups, last change and coordinator (404/40409:
        no producer holds the id)."""
        _, body = await self._request("GET", transaction_path(transactional_id), repeatable=True)
        return dict(body)

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "partitions": partitions, "configs": dict(configs or {})}
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        _, answer = await self._request("POST", ADMIN_TOPICS_PATH, body=body)
        return dict(answer)

    async def add_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> dict[str, Any]:
        """Grow a topic to ``partitions`` (more than it has); the topic as ``create_topic`` answers it.
        Records keep their partitions; keys hash over the new count from then on."""
        body = {"partitions": partitions, "validate_only": validate_only}
        _, answer = await self._request("POST", topic_partitions_path(name), body=body)
        return dict(answer)

    async def delete_topic(self, name: str) -> None:
        await self._request("DELETE", admin_topic_path(name))

    async def _leave(self, member_path: str, unknown_error_code: int) -> None:
        """DELETE a group member (``member_path``); answered ``unknown_error_code``, it was gone already
        (an earlier attempt whose answer was lost, or the group's timeout, removed it)."""
        try:
            await self._request("DELETE", member_path, repeatable=True)
        except RequestFailed as exc:
            if exc.error_code != unknown_error_code:
                raise


@dataclass(eq=False)
class GroupConsumer:
    """One consumer instance in a group, over any node of the cluster.

    ``poll`` is also the heartbeat: call it more often than ``session_timeout_ms``. It names the group
    generation the member last saw; after a rebalance the coordinator refuses it once (40905) and the poll
    returns nothing while the member learns its new assignment. When the coordinator
    evicted the instance (a missed session), ``poll`` joins again under a new name and subscribes again
    (``rejoined`` counts it); its records then come from the committed offsets. ``commit`` commits the
    next offset of every record ``poll`` handed out since the last commit; the coordinator refuses
    (``RequestFailed`` with error_code 40905/40906, see ``contract.FENCED_CODES``) partitions this member
    no longer owns, and then the uncommitted records of those partitions go to their new owner again:
    delivery is at least once."""

    client: RaftlogClient
    group: str
    _: KW_ONLY
    offset_reset: str = "earliest"
    session_timeout_ms: int | None = None
    assignor: str | None = None
    name_prefix: str = "consumer"
    instance_id: str | None = field(default=None, init=False)
    # of the group, as last seen; a poll from an older one is refused
    generation: int | None = field(default=None, init=False)
    topics: list[str] = field(default_factory=list, init=False)
    rejoined: int = field(default=0, init=False)
    # (topic, partition) -> the next offset handed out and not committed yet
    _pending: dict[tuple[str, int], int] = field(default_factory=dict, init=False)

    @property
    def _base(self) -> str:
        if self.instance_id is None:
            raise ClientError("the consumer is not started")
        return instance_path(self.group, self.instance_id)

    async def start(self, topics: Sequence[str]) -> None:
        self.topics = list(topics)
        name = f"{self.name_prefix}-{self.client._rng.getrandbits(48):012x}"  # a retry finds its own instance
        body: dict[str, Any] = {"name": name, "format": "binary", "auto.offset.reset": self.offset_reset}
        if self.session_timeout_ms is not None:
            body["session.timeout.ms"] = self.session_timeout_ms
        if self.assignor is not None:
            body["partition.assignment.strategy"] = self.assignor
        try:
            _, answer = await self.client._request(
                "POST",
                group_path(self.group),
                body=body,
                content_type=KAFKA_V2,
                repeatable=True,
            )
            self.instance_id = str(answer["instance_id"])
        except RequestFailed as exc:
            if exc.error_code != INSTANCE_EXISTS:
                raise
            self.instance_id = name  # an earlier attempt whose answer was lost created it
        self._pending.clear()
        await self.client._request(
            "POST", f"{self._base}/subscription", body={"topics": self.topics}, content_type=KAFKA_V2,
            repeatable=True,
        )  # fmt: skip
        await self.assignment()

    async def poll(self, *, timeout_ms: int = 1000, max_bytes: int | None = None) -> list[FetchedRecord]:
        params: dict[str, str | int] = {}
        if self.generation is not None:
            params["generation"] = self.generation
        try:
            rows = await self.client._long_poll(
                "GET", f"{self._base}/records", params, timeout_ms, max_bytes, accept=BINARY_V2
            )
        except RequestFailed as exc:
            if exc.error_code not in (STALE_GENERATION, UNKNOWN_INSTANCE):
                raise
            if exc.error_code == STALE_GENERATION:  # the group rebalanced: learn the new assignment
                try:
                    await self.assignment()
                    return []
                except RequestFailed as gone:  # its session ran out meanwhile: join again, as below
                    if gone.error_code != UNKNOWN_INSTANCE:
                        raise
            self.rejoined += 1
            await self.start(self.topics)
            return []
        records = [_fetched(row) for row in rows]
        for record in records:
            self._pending[(record.topic, record.partition)] = record.offset + 1
        return records

    async def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit ``offsets`` ((topic, partition) -> next offset to read), by default what ``poll`` handed
        out. Raises ``RequestFailed`` (error_code in ``contract.FENCED_CODES``) when a partition is no longer
        this member's; the offsets of the partitions still owned are committed anyway."""
        wanted = dict(self._pending if offsets is None else offsets)
        if not wanted:
            return
        generation, assigned = await self.assignment()
        owned = set(assigned)
        mine = {tp: o for tp, o in wanted.items() if tp in owned}
        if mine:
            body = {
                "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in mine.items()],
                "generation": generation,
            }
            await self.client._request(
                "POST", f"{self._base}/offsets", body=body, content_type=KAFKA_V2, repeatable=True
            )
        for tp in wanted:
            if offsets is None or self._pending.get(tp) == wanted[tp]:
                self._pending.pop(tp, None)
        lost = sorted(set(wanted) - owned)
        if lost:
            raise RequestFailed(
                409, PARTITION_NOT_ASSIGNED, f"partitions no longer assigned to this member: {lost}", None
            )

    async def assignment(self) -> tuple[int, list[tuple[str, int]]]:
        """(generation, assigned (topic, partition) pairs)."""
        _, body = await self.client._request("GET", f"{self._base}/assignments", repeatable=True)
        self.generation = int(body["generation"])
        return self.generation, [(p["topic"], int(p["partition"])) for p in body["partitions"]]

    async def close(self) -> None:
        """Leave the group (its partitions go to the other members at once)."""
        if self.instance_id is None:
            return
        await self.client._leave(self._base, UNKNOWN_INSTANCE)
        self.instance_id = None
