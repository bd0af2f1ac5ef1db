"""Batch and streaming sinks: Kafka record batches, exactly once through idempotent produce.

Each Spark task is one producer: ``producer_id`` is a 63-bit hash of who the task is. It sends each
partition's rows as Kafka RecordBatch v2 batches encoded here (compressed with the ``compression``
option), each carrying the producer id and, as Kafka's idempotent producer does, the partition's base
sequence: how many records this producer sent to that partition before. The server remembers the last
5 sequences per producer per partition and answers a repeated batch with its original offsets,
appending nothing.

- batch write: producer = (job uuid made once on the driver, Spark partition id). A retried task is the
  same producer and resends the same batches: each is deduplicated.
- streaming write: producer = (query id, micro-batch id, Spark partition id), the same across restarts
  from the same checkpoint. A task retry or a micro-batch replayed after a restart resends the same
  batches. (A new producer per micro-batch keeps sequences small; the server keeps the 10,000 most
  recently used producers per partition, and a replay follows its first attempt at once.)

A batch older than the 5 remembered ones is refused with error 40913 ("sequence too old"): a producer
sends its batches in order and only moves on once one is acknowledged, so such a batch was applied and
is skipped. Requirement (as for any idempotent sink): a retried task must see the same rows in the same
order, which holds for deterministic inputs (the raftlog source, files, ``range``), not after a
non-deterministic shuffle.
"""

from __future__ import annotations

import hashlib
import json
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

from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog.storage.partitioner import partition_for_key
from raftlog_client.blocking import BlockingClient
from raftlog_client.errors import RequestFailed
from raftlog_contract import RECORD_TOO_LARGE, SEQUENCE_TOO_OLD
from raftlog_spark.avro_records import ValueEncoder
from raftlog_spark.avro_types import avro_schema
from raftlog_spark.connect import connect
from raftlog_spark.errors import BadRecord, BadRow, RaftlogSparkError, SchemaError
from raftlog_spark.options import WriteOptions, parse_write_options

SEQUENCE_MAX = 2**31 - 1  # Kafka's base sequence is an int32: records per producer and partition
PRODUCER_ID_MASK = 2**63 - 1


def producer_id(*identity: object) -> int:
    """A stable non-negative 63-bit id for the producer named by ``identity`` (never Python's ``hash``,
    which differs per process)."""
    text = "\x1f".join(str(part) for part in identity).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") & PRODUCER_ID_MASK


# -- the input schema ----------------------------------------------------------------------------------

_TEXT_OR_BYTES = (StringType, BinaryType)


def check_schema(schema: StructType, options: WriteOptions) -> None:
    """The sink's columns, as Kafka's: value (required; null writes a tombstone), key, topic, partition,
    headers; and timestamp (timestamp, or long ms since the epoch; null: the task's clock)."""
    fields: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SchemaError(f"the DataFrame needs a 'value' column (string or binary); it has {sorted(fields)}")
    for name in ("value", "key") if options.value.format == "binary" else ("key",):
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


def _bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


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


def _headers(headers: list[dict[str, Any] | None], topic: str) -> tuple[list[tuple[str, bytes | None]], int]:
    """A row's headers as a record carries them, and roughly the bytes they add to its batch."""
    out: list[tuple[str, bytes | None]] = []
    size = 0
    for header in headers:
        if header is None or header["key"] is None:
            raise BadRow(f"a row has a null header or header key (topic {topic!r})")
        value = None if header["value"] is None else _bytes(header["value"])
        out.append((header["key"], value))
        size += 8 + len(header["key"]) + (0 if value is None else len(value))
    return out, size


@dataclass
class _Pending:
    """The records waiting for one partition, and the sequence its next batch starts at."""

    records: list[ProducerRecord] = field(default_factory=list)
    bytes: int = 0
    sequence: int = 0  # records of this producer sent to the partition so far: Kafka's base sequence


@dataclass
class _Topic:
    partitions: int
    sticky: int  # where keyless rows without a partition go until that partition's batch is sent


@dataclass(frozen=True)
class WriteResult(WriterCommitMessage):
    records: int
    requests: int


class TaskWriter:
    """Buffers rows per partition and sends each partition's rows as idempotent Kafka record batches, in
    row order. A row's partition: its ``partition`` column, else Kafka's murmur2 of its key, else the
    topic's sticky partition (as Kafka's producer: it moves on each time that partition's batch is sent;
    it starts at the producer id modulo the partitions, so tasks spread). The same rows in the same order
    give the same batches with the same sequences: a retried task's batches are recognised."""

    def __init__(self, options: WriteOptions, producer: int, values: TypedValue | None = None) -> None:
        self.options = options
        self.producer = producer
        self.encoder = None if values is None else values.encoder()
        self.topics: dict[str, _Topic] = {}
        self.pending: dict[tuple[str, int], _Pending] = {}
        self.records = 0
        self.requests = 0

    def write(self, batches: Iterator[pa.RecordBatch]) -> WriteResult:
        with connect(self.options, first=self.producer) as client:
            for batch in batches:
                self._add(client, batch)
            for topic, partition in sorted(self.pending):
                self._flush(client, topic, partition)
        return WriteResult(self.records, self.requests)

    def _topic(self, client: BlockingClient, topic: str) -> _Topic:
        known = self.topics.get(topic)
        if known is None:
            try:
                count = client.partition_count(topic)
            except RequestFailed as exc:
                if exc.status == 404:
                    raise BadRow(f"topic {topic!r}: {exc.message}") from exc
                raise
            known = self.topics[topic] = _Topic(count, self.producer % count)
        return known

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
            topic = topics[i]
            if not topic:
                raise BadRow("a row has a null or empty 'topic' and the option 'topic' is not set")
            layout = self._topic(client, topic)
            if values[i] is None:
                value = None  # a tombstone
            elif self.encoder is not None:
                try:
                    value = self.encoder.encode(values[i])
                except BadRecord as exc:
                    raise BadRecord(f"a row of topic {topic!r}: {exc}") from exc
            else:
                value = _bytes(values[i])
            key = None if keys[i] is None else _bytes(keys[i])
            size = 24 + (0 if value is None else len(value)) + (0 if key is None else len(key))
            chosen = None if partitions is None else partitions[i]
            if chosen is not None:
                if not 0 <= chosen < layout.partitions:
                    raise BadRow(
                        f"a row has partition {chosen}: topic {topic!r} has partitions 0 to "
                        f"{layout.partitions - 1}"
                    )
                partition = chosen
            elif key is not None:
                partition = partition_for_key(key, layout.partitions)
            else:
                partition = layout.sticky
            row_headers: list[tuple[str, bytes | None]] = []
            if headers is not None and headers[i]:
                row_headers, header_bytes = _headers(headers[i], topic)
                size += header_bytes
            timestamp = None if timestamps is None else timestamps[i]
            if timestamp is not None and timestamp < 0:
                raise BadRow(f"a row has timestamp {timestamp} ms, before 1970 (topic {topic!r})")
            pending = self.pending.setdefault((topic, partition), _Pending())
            pending.records.append(ProducerRecord(value, key, tuple(row_headers), timestamp))
            pending.bytes += size
            if (
                len(pending.records) >= self.options.batch_records
                or pending.bytes >= self.options.batch_bytes
            ):
                self._flush(client, topic, partition)

    def _flush(self, client: BlockingClient, topic: str, partition: int) -> None:
        pending = self.pending[(topic, partition)]
        if not pending.records:
            return
        self._send(client, topic, partition, pending.records, pending.sequence)
        self.records += len(pending.records)
        pending.sequence += len(pending.records)
        pending.records = []
        pending.bytes = 0
        layout = self.topics[topic]
        if partition == layout.sticky:
            layout.sticky = (layout.sticky + 1) % layout.partitions

    def _send(
        self, client: BlockingClient, topic: str, partition: int, records: list[ProducerRecord], sequence: int
    ) -> None:
        """One batch (two halves, each its own batch, if the topic's max.message.bytes refuses it)."""
        if sequence + len(records) > SEQUENCE_MAX:
            raise RaftlogSparkError(
                f"a task wrote more than {SEQUENCE_MAX} records to {topic}/{partition}: split the input"
            )
        batch = encode_batch(
            0,
            records,
            0,
            int(time.time() * 1000),  # the CreateTime of rows without a timestamp: this task's clock
            self.producer,
            sequence,
            compression=self.options.compression,
        )
        self.requests += 1
        try:
            _, count = client.produce_batch(topic, partition, batch, idempotent=True)
        except RequestFailed as exc:
            if exc.error_code == SEQUENCE_TOO_OLD:
                return  # applied by an earlier attempt of this task (see the module's docstring)
            if exc.error_code == RECORD_TOO_LARGE and len(records) > 1:
                half = len(records) // 2
                self._send(client, topic, partition, records[:half], sequence)
                self._send(client, topic, partition, records[half:], sequence + half)
                return
            if exc.status in (400, 404, 413):
                raise BadRow(
                    f"{topic}/{partition}: a batch was refused with {exc.error_code}: {exc.message}"
                ) from exc
            raise
        if count != len(records):
            raise RaftlogSparkError(f"{topic}/{partition}: {len(records)} records were written as {count}")


# -- Spark's writer classes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TypedValue:
    """``valueFormat`` 'avro': the value column's Avro schema, registered under the value subject where
    Spark plans the write (the registry answers the id it has when the schema is there already, and
    refuses one its compatibility level does not allow); tasks encode with it."""

    schema_id: int
    schema: Any
    kind: DataType

    def encoder(self) -> ValueEncoder:
        return ValueEncoder(self.schema_id, self.schema, self.kind)


def register_value(options: WriteOptions, schema: StructType) -> TypedValue | None:
    if options.value.format != "avro" or options.value.subject is None:
        return None
    kind = next(f.dataType for f in schema.fields if f.name == "value")
    avro = avro_schema(kind)
    with connect(options) as client:
        schema_id = client.register_schema(options.value.subject, json.dumps(avro))
    return TypedValue(schema_id, avro, kind)


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_write_options(options)
        check_schema(schema, self.options)
        self.values = register_value(self.options, schema)
        self.job = uuid.uuid4().hex  # made once, where Spark plans the write; pickled to every task

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        context = TaskContext.get()
        if context is None:
            raise RaftlogSparkError("write() must run in a Spark task")
        producer = producer_id("batch", self.job, context.partitionId())
        return TaskWriter(self.options, producer, self.values).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every record is already committed by the cluster when its task ends: nothing to finish."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records of the tasks that succeeded stay (as with Kafka's sink); a rerun deduplicates nothing
        across jobs, because a new job is a new producer."""


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_write_options(options)
        check_schema(schema, self.options)
        self.values = register_value(self.options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        context = TaskContext.get()
        if context is None:
            raise RaftlogSparkError("write() must run in a Spark task")
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            raise RaftlogSparkError("the streaming sink runs without a query id or batch id from Spark")
        producer = producer_id("stream", query, int(batch), context.partitionId())
        return TaskWriter(self.options, producer, self.values).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are committed by the cluster as each task writes them: nothing to finish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Spark replays the micro-batch; its requests are deduplicated."""
