"""The queue workload's four operations through an unmodified Kafka client (confluent-kafka/librdkafka).

One ``KafkaOperations`` per worker process: its own producer (idempotent for half the Kafka workers,
``workload.idempotent_worker``, else plain with ``retries=0``, so one attempt of the harness is one produce
request) and its own consumer in group ``g<process>`` (manual assignment, no subscription, no auto commit).
Records are the HTTP workload's records byte for byte (``workload.record_of``: the key, or none, and value as
JSON text, headers ``v`` and ``n``, the CreateTime), so a poll through either door reads a send through the
other, and the checker is unchanged; a consumed record of a LogAppendTime topic must carry the leader's stamp,
as over HTTP.

Completions, as the HTTP workload classifies them:

- send: ``ok`` on a delivery report without an error (its offset); ``fail`` only for the answers raftlog's
  Kafka listener gives before a produce is proposed (not the leader, no leader, unknown partition, a refused
  record) and for the client's own refusals before sending; ``info`` for everything else (timeouts, lost
  connections, no report within the wait). An idempotent producer retries inside librdkafka, which must
  never append twice; the harness retries a value only after ``fail``, with a new produce call. A fatal
  producer error is ``info`` too, and the worker goes on with a new producer (a new producer id).
- poll: assign the partition at the offset and consume until records arrive, the partition's end is
  reported (``enable.partition.eof``) or the wait runs out: ``ok`` with what arrived (possibly nothing);
  a final poll is ``ok`` only with records or at the end, else ``info``, so that only a true end counts as
  the empty final poll the checker needs.
- commit: ``ok`` when the coordinator acknowledged it; any error ``info`` (a commit that failed on the
  way back may have been stored). committed: ``ok`` with the group's offset (null when none).

Every librdkafka call blocks, so each worker's calls run on a thread of its own; the history is written
on the event loop, like the HTTP workload's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from jepsen.recorder import Recorder
from jepsen.workload import (
    POLL_TIMEOUT_S,
    QUEUE,
    SEND_TIMEOUT_S,
    Outcome,
    RecordModel,
    read_back,
    split_key,
    wall_clock_ms,
)

T = TypeVar("T")

POLL_MESSAGES_MAX = 500
# Refusals raftlog's Kafka listener gives before proposing (kafka_api/errors.py) and the client's own
# refusals before a request leaves: the record was definitely not appended.
NOT_DONE = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.INVALID_MSG,  # CORRUPT_MESSAGE
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
})  # fmt: skip
TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def client_logger(path: str) -> logging.Logger:
    """librdkafka's log lines (connection refusals and timeouts under faults) go to ``path``, not to the
    harness's terminal."""
    logger = logging.getLogger(f"jepsen.kafka.{path}")
    if not logger.handlers:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(logging.INFO)
    return logger


def close_client_logger(logger: logging.Logger) -> None:
    """Close the log file of ``client_logger`` (the run is over)."""
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def record_args(value: int, base_ms: int, model: RecordModel = QUEUE) -> dict[str, Any]:
    """``Producer.produce`` arguments for the record ``model.record_of`` describes (the queue's:
    ``workload.record_of``): the same bytes the HTTP API's JSON flavour stores for it."""
    sent = model.record_of(value, base_ms)
    return {
        "key": None if sent["key"] is None else json.dumps(sent["key"]).encode(),
        "value": None if sent["value"] is None else json.dumps(sent["value"]).encode(),
        "headers": [
            (h["key"], None if h["value"] is None else str(h["value"]).encode()) for h in sent["headers"]
        ],
        "timestamp": sent["timestamp"],
    }


def _text(raw: bytes | None) -> Any:
    """A key or value as the HTTP API's JSON flavour renders it: its JSON, else its text."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def _header_text(value: bytes | str | None) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def row_of(message: Message) -> dict[str, Any]:
    """A consumed message as the row the HTTP workload reads back (``workload.read_back``)."""
    kind, timestamp = message.timestamp()
    headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
    return {
        "offset": message.offset(),
        "key": _text(message.key()),
        "value": _text(message.value()),
        "headers": [{"key": k, "value": _header_text(v)} for k, v in headers],
        "timestamp": timestamp,
        "timestamp_type": TIMESTAMP_TYPES.get(kind, str(kind)),
    }


def client_config(
    bootstrap_servers: str, logger: logging.Logger, *, socket_timeout_ms: int = 5000
) -> dict[str, Any]:
    """What every Kafka client the harness makes is configured with: the nodes, a socket timeout, metadata
    refreshed every 2 s and a reconnect backoff of at most 1 s (``recovery.CLIENT_NEXT_S`` counts on it: a
    client tries a healed node again within it), librdkafka's log lines to ``logger``."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "socket.timeout.ms": socket_timeout_ms,
        "topic.metadata.refresh.interval.ms": 2000,
        "reconnect.backoff.max.ms": 1000,
        "logger": logger,
    }


def error_fields(error: KafkaError) -> dict[str, Any]:
    """A librdkafka error as an event's fields: its name and (the first 200 characters of) its text."""
    return {"error_code": error.name(), "error": str(error.str())[:200]}


def error_of(exc: KafkaException) -> KafkaError:
    """The ``KafkaError`` a ``KafkaException`` carries (one of its own when it carries none)."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else KafkaError(KafkaError._FAIL, str(exc))


def committed_offset(
    consumer: Consumer, partition: TopicPartition, timeout_s: float
) -> tuple[str, dict[str, Any]]:
    """The consumer's group's committed offset of ``partition`` as a completion: ``ok`` with the offset
    (None when the group has none), ``info`` with the error when it could not be had."""
    try:
        (row,) = consumer.committed([partition], timeout=timeout_s)
    except KafkaException as exc:
        return "info", error_fields(error_of(exc))
    if row.error is not None:
        return "info", error_fields(row.error)
    return "ok", {"offset": None if row.offset == OFFSET_INVALID else row.offset}


class KafkaOperations:
    """One worker's producer and consumer; the same four operations (and ``end_offset``) as
    ``workload.Operations``."""

    client = "kafka"
    retry_after_info = False  # a new produce call is a new record to Kafka, even for an idempotent one

    def __init__(
        self,
        bootstrap_servers: str,
        recorder: Recorder,
        base_ms: int,
        *,
        process: int,
        idempotent: bool,
        logger: logging.Logger,
        log_append_time_topics: frozenset[str] = frozenset(),
        model: RecordModel = QUEUE,
    ) -> None:
        self.recorder = recorder
        self.base_ms = base_ms
        self.log_append_time_topics = log_append_time_topics  # as workload.Operations
        self.model = model
        common = client_config(bootstrap_servers, logger, socket_timeout_ms=int(SEND_TIMEOUT_S * 1000))
        producing = {"enable.idempotence": True} if idempotent else {"acks": "all", "retries": 0}
        self.producer_config = {
            **common, **producing,
            "linger.ms": 0,
            "message.timeout.ms": int(SEND_TIMEOUT_S * 1000),
            "request.timeout.ms": int(SEND_TIMEOUT_S * 1000) - 500,
        }  # fmt: skip
        self.producer = Producer(self.producer_config)
        self.consumer = Consumer({
            **common,
            "group.id": f"g{process}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 200,
        })  # fmt: skip
        self.thread = ThreadPoolExecutor(1, thread_name_prefix=f"kafka-g{process}")

    async def _blocking(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.thread, call)

    async def close(self) -> None:
        def close_all() -> None:
            self.producer.flush(0)
            self.consumer.close()

        await self._blocking(close_all)
        self.thread.shutdown(wait=True)

    async def send(self, process: int, key: str, value: int, producer: tuple[int, int] | None) -> Outcome:
        """``producer`` is the HTTP workload's explicit pair; here librdkafka keeps id and sequences."""
        topic, partition = split_key(key)
        described = self.model.describe(value)
        self.recorder.invoke(process, "send", key=key, value=value, **described, client=self.client)
        kind, fields = await self._blocking(lambda: self._produce(topic, partition, value))
        fields = {"value": value, **fields}
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    def _produce(self, topic: str, partition: int, value: int) -> tuple[str, dict[str, Any]]:
        reports: list[tuple[KafkaError | None, Message]] = []
        try:
            self.producer.produce(
                topic,
                partition=partition,
                on_delivery=lambda error, message: reports.append((error, message)),
                **record_args(value, self.base_ms, self.model),
            )
        except (BufferError, KafkaException) as exc:  # refused before anything was sent
            self._renew_if_fatal(exc)
            return "fail", {"error": f"produce: {exc}"[:200]}
        deadline = time.monotonic() + SEND_TIMEOUT_S + 2.0
        try:
            while not reports and time.monotonic() < deadline:
                self.producer.poll(0.05)
        except KafkaException as exc:  # poll raises for a fatal error only
            self._renew_if_fatal(exc)
            return "info", {**error_fields(exc.args[0]), "fatal": True}
        if not reports:
            return "info", {"error": "no delivery report"}
        error, message = reports[0]
        if error is None:
            return "ok", {"offset": message.offset()}
        return ("fail" if error.code() in NOT_DONE else "info"), error_fields(error)

    def _renew_if_fatal(self, exc: BaseException) -> None:
        """A producer with a fatal error does nothing more: the next send gets a new one (a new id)."""
        if isinstance(exc, KafkaException) and exc.args[0].fatal():
            self.producer = Producer(self.producer_config)

    async def poll(self, process: int, key: str, offset: int, *, final: bool = False) -> Outcome:
        topic, partition = split_key(key)
        flags = {"final": True} if final else {}
        self.recorder.invoke(process, "poll", key=key, offset=offset, client=self.client, **flags)
        records, at_end, errors = await self._blocking(lambda: self._consume(topic, partition, offset))
        fields: dict[str, Any] = {"offset": offset, **flags, "records": records}
        if errors:
            fields["errors"] = errors[:5]
        kind = "ok" if records or at_end or not final else "info"
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    def _consume(self, topic: str, partition: int, offset: int) -> tuple[list[list[Any]], bool, list[str]]:
        self.consumer.assign([TopicPartition(topic, partition, offset)])
        records: list[list[Any]] = []
        errors: list[str] = []
        at_end = False
        stamped = topic in self.log_append_time_topics
        deadline = time.monotonic() + POLL_TIMEOUT_S / 2
        while not (records or at_end) and time.monotonic() < deadline:
            for message in self.consumer.consume(POLL_MESSAGES_MAX, 0.1):
                if message.topic() != topic or message.partition() != partition:
                    continue  # an earlier assignment's leftovers
                error = message.error()
                if error is None:
                    read = read_back(
                        row_of(message), self.base_ms, log_append_time=stamped, read_ms=wall_clock_ms(),
                        model=self.model,
                    )  # fmt: skip
                    records.append([message.offset(), read])
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end = True
                else:
                    errors.append(error.name())
        return records, at_end, errors

    async def commit(self, process: int, key: str, group: str, offset: int) -> Outcome:
        topic, partition = split_key(key)
        self.recorder.invoke(process, "commit", key=key, group=group, offset=offset, client=self.client)
        kind, fields = await self._blocking(lambda: self._commit(topic, partition, offset))
        fields = {"group": group, "offset": offset, **fields}
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    def _commit(self, topic: str, partition: int, offset: int) -> tuple[str, dict[str, Any]]:
        try:
            answer = self.consumer.commit(
                offsets=[TopicPartition(topic, partition, offset)], asynchronous=False
            )
        except KafkaException as exc:
            return "info", error_fields(exc.args[0])
        failed = [tp.error for tp in answer or [] if tp.error is not None]
        if failed:
            return "info", error_fields(failed[0])
        return "ok", {"committed": offset}

    async def committed(self, process: int, key: str, group: str) -> Outcome:
        topic, partition = split_key(key)
        self.recorder.invoke(process, "committed", key=key, group=group, client=self.client)
        kind, fields = await self._blocking(
            lambda: committed_offset(self.consumer, TopicPartition(topic, partition), POLL_TIMEOUT_S)
        )
        fields = {"group": group, **fields}
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    async def end_offset(self, key: str) -> int | None:
        """The partition's high watermark (ListOffsets latest), or None when it cannot be had now."""
        topic, partition = split_key(key)

        def ask() -> int | None:
            try:
                _low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=POLL_TIMEOUT_S
                )
            except KafkaException:
                return None
            return int(high)

        return await self._blocking(ask)
