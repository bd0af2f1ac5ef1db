"""Batch and streaming sinks: exactly once through idempotent produce.

Each Spark task is one producer: ``producer_id`` is a 63-bit hash of who the task is, and each produce
request it sends to a topic carries the next ``sequence``. The server remembers the last 5 sequences per
producer per partition and answers a repeated pair with the original offsets, appending nothing.

- batch write: producer = (job uuid made once on the driver, Spark partition id); sequence = 0, 1, 2 ...
  per topic. A retried task is the same producer and resends the same requests: each is deduplicated.
- streaming write: producer = (query id, Spark partition id), stable across restarts from the same
  checkpoint; sequence = batch id * 2**24 + request number. A task retry or a micro-batch replayed after
  a restart resends the same pairs.

A request older than the 5 remembered ones is refused with error 40913 ("sequence too old"): a producer
sends its sequences in order and only moves on once one is acknowledged, so such a sequence was applied
and is skipped. Requirement (as for any idempotent sink): a retried task must see the same rows in the
same order, which holds for deterministic inputs (the raftlog source, files, ``range``), not after a
non-deterministic shuffle.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from raftlog_client.blocking import BlockingClient, RecordResults
from raftlog_client.contract import SEQUENCE_TOO_OLD, retriable
from raftlog_client.errors import RequestFailed, Unavailable
from raftlog_spark.errors import BadRow, RaftlogSparkError, SchemaError
from raftlog_spark.options import WriteOptions, parse_write_options

BATCH_SEQUENCE_BITS = 24  # requests per task and topic within one micro-batch: up to 16.7 million
PRODUCER_ID_MASK = 2**63 - 1


def producer_id(*identity: object) -> int:
    """A stable non-negative 63-bit id for the producer named by ``identity`` (never Python's ``hash``,
    which differs per process)."""
    text = "\x1f".join(str(part) for part in identity).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") & PRODUCER_ID_MASK


def stream_sequence(batch_id: int, request: int) -> int:
    if not 0 <= request < 2**BATCH_SEQUENCE_BITS:
        raise RaftlogSparkError(f"a task sent {request} requests to one topic in one micro-batch: too many")
    return (batch_id << BATCH_SEQUENCE_BITS) + request


# -- the input schema ----------------------------------------------------------------------------------

_TEXT_OR_BYTES = (StringType, BinaryType)


def check_schema(schema: StructType, options: WriteOptions) -> None:
    """The sink's columns, as Kafka's: value (required; null writes a tombstone), key, topic, partition,
    headers; and timestamp (timestamp, or long ms since the epoch; null: the server's clock)."""
    fields: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SchemaError(f"the DataFrame needs a 'value' column (string or binary); it has {sorted(fields)}")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], _TEXT_OR_BYTES):
            raise SchemaError(f"column '{name}' must be string or binary, not {fields[name].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SchemaError(f"column 'topic' must be a string, not {fields['topic'].simpleString()}")
    if "topic" not in fields and options.topic is None:
        raise SchemaError("no topic: set the option 'topic' or give the DataFrame a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType | LongType | ShortType):
        raise SchemaError(f"column 'partition' must be an integer, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        kind = fields["headers"]
        element = kind.elementType if isinstance(kind, ArrayType) else None
        parts = {f.name: f.dataType for f in element.fields} if isinstance(element, StructType) else {}
        if (
            sorted(parts) != ["key", "value"]
            or not isinstance(parts["key"], StringType)
            or not isinstance(parts["value"], _TEXT_OR_BYTES)
        ):
            raise SchemaError(
                "column 'headers' must be array<struct<key: string, value: binary or string>>, "
                f"not {kind.simpleString()}"
            )
    if "timestamp" in fields and not isinstance(fields["timestamp"], TimestampType | LongType):
        raise SchemaError(
            "column 'timestamp' must be a timestamp or a long (ms since the epoch), "
            f"not {fields['timestamp'].simpleString()}"
        )


# -- one task ------------------------------------------------------------------------------------------


def _b64(value: bytes | str) -> str:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return base64.b64encode(data).decode("ascii")


_PER_MS = {"us": 1000, "ns": 1_000_000}


def _millis(column: pa.Array) -> list[int | None]:
    """A timestamp column (any unit; Spark sends microseconds) or a long column of ms as ms."""
    if not pa.types.is_timestamp(column.type):
        millis: list[int | None] = column.to_pylist()
        return millis
    raw: list[int | None] = column.cast(pa.int64()).to_pylist()
    unit = column.type.unit
    if unit == "s":
        return [None if r is None else r * 1000 for r in raw]
    per_ms = _PER_MS.get(unit, 1)
    return raw if per_ms == 1 else [None if r is None else r // per_ms for r in raw]


def _headers(headers: list[dict[str, Any] | None], topic: str) -> tuple[list[dict[str, Any]], int]:
    """A row's headers as a produce request carries them, and roughly the bytes they add to it."""
    out = []
    size = 0
    for header in headers:
        if header is None or header["key"] is None:
            raise BadRow(f"a row has a null header or header key (topic {topic!r})")
        value = None if header["value"] is None else _b64(header["value"])
        out.append({"key": header["key"], "value": value})
        size += 24 + len(header["key"]) + (0 if value is None else len(value))
    return out, size


@dataclass
class _Pending:
    records: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0
    sent: int = 0  # requests sent to this topic so far


@dataclass(frozen=True)
class WriteResult(WriterCommitMessage):
    records: int
    requests: int


class TaskWriter:
    """Buffers rows per topic and sends them as idempotent produce requests, in row order."""

    def __init__(self, options: WriteOptions, producer: int, sequence_of: Any) -> None:
        self.options = options
        self.producer = producer
        self.sequence_of = sequence_of  # (requests sent to the topic so far) -> sequence
        self.pending: dict[str, _Pending] = {}
        self.records = 0
        self.requests = 0

    def write(self, batches: Iterator[pa.RecordBatch]) -> WriteResult:
        with BlockingClient(
            self.options.servers, self.options.request_timeout_ms, first=self.producer
        ) as client:
            for batch in batches:
                self._add(client, batch)
            for topic in sorted(self.pending):
                self._flush(client, topic)
        return WriteResult(self.records, self.requests)

    def _add(self, client: BlockingClient, batch: pa.RecordBatch) -> None:
        wanted = ("value", "key", "topic", "partition", "headers")  # other columns are ignored, as by Kafka's
        column = {name: batch.column(name).to_pylist() for name in wanted if name in batch.schema.names}
        values = column["value"]
        keys = column.get("key") or [None] * batch.num_rows
        topics = [self.options.topic] * batch.num_rows if self.options.topic else column["topic"]
        partitions = column.get("partition")
        headers = column.get("headers")
        timestamps = _millis(batch.column("timestamp")) if "timestamp" in batch.schema.names else None
        for i in range(batch.num_rows):
            value, topic = values[i], topics[i]
            if not topic:
                raise BadRow("a row has a null or empty 'topic' and the option 'topic' is not set")
            text = None if value is None else _b64(value)  # None: a tombstone
            record: dict[str, Any] = {"value": text}
            size = 32 if text is None else 32 + len(text)  # roughly what it adds to the request
            if keys[i] is not None:
                record["key"] = key = _b64(keys[i])
                size += len(key)
            if partitions is not None and partitions[i] is not None:
                if partitions[i] < 0:
                    raise BadRow(f"a row has partition {partitions[i]} (topic {topic!r})")
                record["partition"] = partitions[i]
            if headers is not None and headers[i]:
                record["headers"], header_bytes = _headers(headers[i], topic)
                size += header_bytes
            timestamp = None if timestamps is None else timestamps[i]
            if timestamp is not None:  # else the node's clock
                if timestamp < 0:
                    raise BadRow(f"a row has timestamp {timestamp} ms, before 1970 (topic {topic!r})")
                record["timestamp"] = timestamp
            pending = self.pending.setdefault(topic, _Pending())
            pending.records.append(record)
            pending.bytes += size
            if (
                len(pending.records) >= self.options.batch_records
                or pending.bytes >= self.options.batch_bytes
            ):
                self._flush(client, topic)

    def _flush(self, client: BlockingClient, topic: str) -> None:
        pending = self.pending[topic]
        if not pending.records:
            return
        sequence = self.sequence_of(pending.sent)
        self._send(client, topic, pending.records, sequence)
        self.records += len(pending.records)
        self.requests += 1
        pending.sent += 1
        pending.records = []
        pending.bytes = 0

    def _send(self, client: BlockingClient, topic: str, records: list[dict[str, Any]], sequence: int) -> None:
        deadline = time.monotonic() + self.options.request_timeout_ms / 1000
        while True:
            try:
                produced = client.produce(topic, records, self.producer, sequence)
            except RequestFailed as exc:
                if exc.error_code == SEQUENCE_TOO_OLD:
                    return  # applied by an earlier attempt of this task (see the module's docstring)
                if exc.status == 404:
                    raise BadRow(f"topic {topic!r}: {exc.message}") from exc
                raise
            retry = _check(topic, produced)
            if not retry:
                return
            if time.monotonic() > deadline:
                raise Unavailable(f"produce to {topic!r}: records still failing after the deadline: {retry}")
            time.sleep(0.2)


def _check(topic: str, produced: RecordResults) -> str | None:
    """None when every record is written (or was, by an earlier attempt); the retriable error otherwise."""
    retry = None
    for code, message in zip(produced.error_codes, produced.errors, strict=True):
        if code is None or code == SEQUENCE_TOO_OLD:
            continue
        if retriable(code):
            retry = f"{code}: {message}"
            continue
        raise BadRow(f"topic {topic!r}: a record was refused with error {code}: {message}")
    return retry


# -- Spark's writer classes ----------------------------------------------------------------------------


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_write_options(options)
        check_schema(schema, self.options)
        self.job = uuid.uuid4().hex  # made once, where Spark plans the write; pickled to every task

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        context = TaskContext.get()
        if context is None:
            raise RaftlogSparkError("write() must run in a Spark task")
        producer = producer_id("batch", self.job, context.partitionId())
        return TaskWriter(self.options, producer, lambda sent: sent).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every record is already committed by the cluster when its task ends: nothing to finish."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records of the tasks that succeeded stay (as with Kafka's sink); a rerun deduplicates nothing
        across jobs, because a new job is a new producer."""


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_write_options(options)
        check_schema(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        context = TaskContext.get()
        if context is None:
            raise RaftlogSparkError("write() must run in a Spark task")
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            raise RaftlogSparkError("the streaming sink runs without a query id or batch id from Spark")
        batch_id = int(batch)
        producer = producer_id("stream", query, context.partitionId())
        return TaskWriter(self.options, producer, lambda sent: stream_sequence(batch_id, sent)).write(
            iterator
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are committed by the cluster as each task writes them: nothing to finish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Spark replays the micro-batch; its requests are deduplicated."""
