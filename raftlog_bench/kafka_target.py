"""raftlog through Kafka's wire protocol, driven by confluent-kafka (librdkafka) as a Kafka user runs it:
the benchmark's ``Target`` for ``raftlog bench perf --client kafka``. Groups: one new consumer group of
N members subscribed to the topic, each member a consumer on a thread of its own.

Produce: one idempotent producer (acks=all, ``linger.ms`` 5, batches up to 1 MiB, the gapless guarantee)
shared by every worker; a worker's "batch" is ``batch_records`` records handed to it for one partition in
one ``produce_batch`` call (confluent-kafka's bulk produce), done when librdkafka reported its last record
delivered: reports come in order per partition, and with the gapless guarantee a record that fails for
good fails every later one, so one report per batch answers for it (librdkafka batches the records as it
sees fit, as in any Kafka application).
Single records: a second idempotent producer with ``linger.ms`` 0, one record per send. Consume: a
consumer assigned to the partition from offset 0, fetching up to ``--fetch-mib`` per request as the HTTP
reader does, with ``fetch.queue.backoff.ms`` 10: librdkafka stops fetching a partition once its local
queue holds ``queued.min.messages`` (100,000) and by default waits a whole second before fetching again,
which bounded a 100 B read at ~360k records/s with the servers 95% idle (the setting librdkafka's
documentation names for that). librdkafka's delivery reports come on a poll thread
of this process and are handed to the event loop. Topics are created and deleted through the HTTP
admin API (``RaftlogTarget``), which also waits for their leaders to settle, or, against Apache Kafka
(``raftlog bench perf --compare kafka``), through Kafka's AdminClient (``kafka_peer.KafkaAdmin``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from raftlog_bench.targets import COMPRESSIONS, Layout, SendFailed, check_choice, sample_values

POLL_S = 0.05  # a poll returns as soon as a delivery report is there; this bounds a stop's wait
CONSUME_BATCH = 10_000
FETCH_QUEUE_BACKOFF_MS = 10  # librdkafka's default, 1000, idles a consumer whose queue filled (module doc)


def producer_settings(bootstrap_servers: str, linger_ms: int, compression: str = "none") -> dict[str, Any]:
    """The benchmark's confluent-kafka producer, the same against raftlog and Apache Kafka: idempotent,
    acks=all, batches up to 1 MiB, a local queue of up to 1 GiB."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": linger_ms,
        "batch.size": 1 << 20,
        "compression.type": compression,
        "queue.buffering.max.kbytes": 1 << 20,
    }


def read_settings(bootstrap_servers: str, fetch_bytes: int) -> dict[str, Any]:
    """The benchmark's confluent-kafka consumer: fetches of up to ``fetch_bytes`` (at least 1 MiB), and
    ``fetch.queue.backoff.ms`` FETCH_QUEUE_BACKOFF_MS (module doc); nothing committed."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "enable.auto.commit": False,
        "fetch.max.bytes": max(fetch_bytes, 1 << 20),
        "max.partition.fetch.bytes": max(fetch_bytes, 1 << 20),
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    }


class TopicAdmin(Protocol):
    """Where the topics of a phase are made and removed: raftlog's HTTP admin API (``RaftlogTarget``) or
    Apache Kafka's AdminClient (``kafka_peer.KafkaAdmin``)."""

    fetch_bytes: int  # a consumer's fetch size

    async def connect(self) -> None: ...

    async def create(self, layout: Layout) -> None: ...

    async def delete(self) -> None: ...

    async def close(self) -> None: ...


class KafkaTarget:
    def __init__(
        self, admin: TopicAdmin, bootstrap_servers: str, compression: str = "none", system: str = "raftlog"
    ) -> None:
        """``system``: the report's name for the servers behind ``bootstrap_servers`` (raftlog's Kafka
        listeners, or Apache Kafka)."""
        self.system = system
        check_choice("compression", compression, COMPRESSIONS)
        self.admin = admin
        self.bootstrap_servers = bootstrap_servers
        self.compression = compression
        self.layout: Layout | None = None
        self._values: list[bytes] = []
        self._batch: Producer | None = None
        self._single: Producer | None = None
        self._stop = threading.Event()
        self._pollers: list[threading.Thread] = []

    def _producer(self, linger_ms: int) -> Producer:
        return Producer({
            **producer_settings(self.bootstrap_servers, linger_ms, self.compression),
            # a record that fails for good fails every later one of its partition (a fatal error), so the
            # report of a batch's last record answers for the batch
            "enable.gapless.guarantee": True,
        })  # fmt: skip

    async def connect(self) -> None:
        await self.admin.connect()
        self._batch, self._single = self._producer(5), self._producer(0)
        # a thread per producer: one polling the other (idle) producer would hold reports back
        self._pollers = [
            threading.Thread(target=self._poll, args=(producer,), name=f"kafka-delivery-{i}", daemon=True)
            for i, producer in enumerate((self._batch, self._single))
        ]
        for poller in self._pollers:
            poller.start()

    def _poll(self, producer: Producer) -> None:
        while not self._stop.is_set():
            producer.poll(POLL_S)

    async def create(self, layout: Layout) -> None:
        self.layout = layout
        if self.compression == "none":
            self._values = [os.urandom(layout.record_bytes)] * layout.batch_records
        else:
            self._values = sample_values(layout.record_bytes, layout.batch_records)
        await self.admin.create(layout)

    async def _send(
        self, producer: Producer | None, partition: int, values: list[bytes], key: bytes | None = None
    ) -> int:
        if producer is None or self.layout is None:
            raise RuntimeError("send before connect() and create()")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def settle(error: KafkaError | None) -> None:
            if done.done():
                return
            if error is not None:
                done.set_exception(SendFailed(f"kafka {error.name()}"))
            else:
                done.set_result(len(values))

        def delivered(error: KafkaError | None, _message: Any) -> None:  # on the poll thread
            loop.call_soon_threadsafe(settle, error)

        # One delivery report per batch, its last record's, as a batching producer tracks what it sent
        # (RabbitMQ streams' client confirms batches too): librdkafka reports a partition's records in
        # order, and with the gapless guarantee a record that fails for good fails every later one, so
        # the last record's report answers for the batch. A Python call per record cost the load
        # generator a fifth of its core at 1 KiB.
        topic = self.layout.name
        waiting: list[dict[str, Any]] = [{"value": value} for value in values]
        if key is not None:
            for message in waiting:
                message["key"] = key
        while waiting:
            waiting[-1]["callback"] = delivered  # whatever is sent last reports for the batch
            try:
                queued = producer.produce_batch(topic, waiting, partition=partition)
            except BufferError:  # librdkafka's queue is full before the first: let deliveries drain it
                queued = 0
            if queued < len(waiting):  # the ones not queued carry "_error"; send them again shortly
                if queued:
                    waiting = [{"value": m["value"]} for m in waiting if "_error" in m]
                await asyncio.sleep(0.001)
            else:
                waiting = []
        return await done

    async def send_batch(self, worker: int, partition: int) -> int:
        return await self._send(self._batch, partition, self._values)

    async def send_one(self, worker: int, partition: int, key: bytes | None = None) -> None:
        await self._send(self._single, partition, self._values[:1], key)

    def follow(self, partition: int, received: Callable[[bytes, float], None]) -> Callable[[], None]:
        """A consumer of ``partition`` from offset 0 (a new topic's start) on a thread of its own, with
        librdkafka's defaults for its long poll (``fetch.wait.max.ms`` 500, ``fetch.min.bytes`` 1): each
        record's key and ``time.perf_counter()`` as its poll returned it go to ``received``, on that
        thread. Returns what stops it (and waits for its thread)."""
        if self.layout is None:
            raise RuntimeError("follow before create()")
        topic, stop = self.layout.name, threading.Event()
        settings = {**read_settings(self.bootstrap_servers, self.admin.fetch_bytes), "group.id": "bench-e2e"}
        consumer = Consumer(settings)
        consumer.assign([TopicPartition(topic, partition, 0)])

        def read() -> None:
            try:
                while not stop.is_set():
                    message = consumer.poll(POLL_S)
                    if message is not None and message.error() is None:
                        received(message.key() or b"", time.perf_counter())
            finally:
                consumer.close()

        reader = threading.Thread(target=read, name="bench-e2e-consumer", daemon=True)
        reader.start()

        def stopped() -> None:
            stop.set()
            reader.join(10)

        return stopped

    async def consume(self, partition: int, records: int, deadline: float) -> tuple[int, int]:
        if self.layout is None:
            raise RuntimeError("consume before create()")
        topic = self.layout.name

        def read() -> tuple[int, int]:
            settings = read_settings(self.bootstrap_servers, self.admin.fetch_bytes)
            consumer = Consumer({**settings, "group.id": f"bench-{os.getpid()}"})
            consumer.assign([TopicPartition(topic, partition, 0)])
            count = nbytes = 0
            try:
                while count < records and time.perf_counter() < deadline:
                    for message in consumer.consume(CONSUME_BATCH, 0.2):
                        if message.error() is None:
                            count += 1
                            nbytes += len(message.value() or b"")
            finally:
                consumer.close()
            return count, nbytes

        return await asyncio.to_thread(read)

    async def consume_group(
        self, members: int, records: int, deadline: float, progress: Callable[[int], None] | None = None
    ) -> tuple[int, int]:
        """``members`` consumers of one new group subscribed to the topic, each on a thread of its own,
        read until together they have ``records`` (joins and rebalances count: a group's start is part
        of what its user waits for); ``progress`` hears the distinct records read so far. Counted once
        each: a partition that moves between members while they join is read again from its start by
        its new owner (nothing is committed), and those second reads cost time but add no records."""
        if self.layout is None:
            raise RuntimeError("consume before create()")
        topic, group = self.layout.name, f"bench-group-{os.getpid()}-{members}-{time.monotonic_ns()}"
        lock = threading.Lock()
        ends: dict[int, int] = {}  # partition -> one past the highest offset any member read
        totals = [0, 0]  # distinct records (the sum of ends), bytes read

        def member() -> None:
            consumer = Consumer({
                **read_settings(self.bootstrap_servers, self.admin.fetch_bytes), "group.id": group,
                "auto.offset.reset": "earliest",
            })  # fmt: skip
            consumer.subscribe([topic])
            try:
                while time.perf_counter() < deadline:
                    with lock:
                        if totals[0] >= records:
                            return
                    nbytes = 0
                    reached: dict[int, int] = {}
                    for message in consumer.consume(CONSUME_BATCH, 0.2):
                        partition, offset = message.partition(), message.offset()
                        if message.error() is None and partition is not None and offset is not None:
                            nbytes += len(message.value() or b"")
                            reached[partition] = offset + 1
                    with lock:
                        for partition, end in reached.items():
                            ends[partition] = max(ends.get(partition, 0), end)
                        totals[0] = sum(ends.values())
                        totals[1] += nbytes
                    if progress is not None:
                        progress(totals[0])
            finally:
                consumer.close()

        def read() -> tuple[int, int]:
            threads = [threading.Thread(target=member, daemon=True) for _ in range(members)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return totals[0], totals[1]

        return await asyncio.to_thread(read)

    async def delete(self) -> None:
        await self.admin.delete()

    async def close(self) -> None:
        for producer in (self._batch, self._single):
            if producer is not None:
                await asyncio.to_thread(producer.flush, 10)
        self._stop.set()
        for poller in self._pollers:
            await asyncio.to_thread(poller.join, 5)
        await self.admin.close()
