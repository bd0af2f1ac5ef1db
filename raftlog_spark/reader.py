"""Batch and streaming readers.

Where each method runs: ``partitions``, ``initialOffset``, ``latestOffset`` and ``commit`` in a Python
worker the driver's JVM starts for planning (a long-lived one per streaming query); ``read`` in a Python
worker of an executor, on a reader unpickled there. So a reader keeps only its parsed options; an HTTP
client is made inside each method and closed before it returns, and an ``OffsetRange`` carries
everything ``read`` needs to know about its range.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from raftlog_client.blocking import BlockingClient
from raftlog_client.errors import OffsetOutOfRange
from raftlog_spark.arrow import record_batch, typed
from raftlog_spark.avro_records import Registered, ValueDecoder, by_id, column_type
from raftlog_spark.connect import connect
from raftlog_spark.errors import BadRecord, DataLoss, RaftlogSparkError
from raftlog_spark.offsets import (
    EARLIEST,
    LATEST,
    Bounds,
    OffsetRange,
    Offsets,
    Timestamps,
    TopicPartition,
    at_timestamps,
    from_json,
    ranges,
    rate_limit,
    resolve,
    split,
    timestamps_for,
    to_json,
)
from raftlog_spark.options import ReadOptions, parse_read_options

EMPTY_PAGE_WAIT_MS = 200  # a new leader may briefly report a lower end offset than its predecessor


def partition_bounds(options: ReadOptions) -> dict[TopicPartition, Bounds]:
    """Log start and end offsets of every subscribed or assigned partition."""
    out: dict[TopicPartition, Bounds] = {}
    with connect(options) as client:
        for topic, assigned in sorted(options.topics.items()):
            count = client.partition_count(topic)
            wanted = range(count) if assigned is None else assigned
            for partition in wanted:
                if partition >= count:
                    raise RaftlogSparkError(
                        f"assign: {topic}-{partition} does not exist ({count} partitions)"
                    )
                start, end = client.offsets(topic, partition)
                out[(topic, partition)] = Bounds(start, end)
    return out


def offset_for_timestamp(client: BlockingClient, topic: str, partition: int, timestamp_ms: int) -> int | None:
    """The offset of the first record whose timestamp is at or after ``timestamp_ms`` (Kafka's
    ``offsetsForTimes``), None when no record is that late: ``GET .../offsets?timestamp=MS``."""
    found = client.offset_for_timestamp(topic, partition, timestamp_ms)
    return None if found is None else found[0]


def by_timestamp(options: ReadOptions, bounds: Mapping[TopicPartition, Bounds], *, starting: bool) -> Offsets:
    """The starting (or ending) offsets the timestamp options give, for the partitions they cover: none
    when no such option is set. Starting: a partition with no record that late fails the query or starts
    at its end (``startingOffsetsByTimestampStrategy``); ending: it ends at its end, as in Spark."""
    spec = options.starting_timestamps if starting else options.ending_timestamps
    if spec is None:
        return {}
    if starting:
        option, none_late_enough = options.starting_timestamps_option, options.starting_none_late_enough
    else:
        option, none_late_enough = options.ending_timestamps_option, "latest"
    timestamps: Timestamps = timestamps_for(spec, bounds.keys(), option)
    with connect(options) as client:
        found = {tp: offset_for_timestamp(client, *tp, ms) for tp, ms in sorted(timestamps.items())}
    return at_timestamps(timestamps, found, bounds, option, none_late_enough)


class TypedValues:
    """The value column of ``valueFormat`` 'avro': each record's value decoded with the schema its id
    names, resolved to the query's ``reader`` schema (the subject's latest when the query was planned)."""

    def __init__(self, client: BlockingClient, reader: Registered, subject: str) -> None:
        self.decoder = ValueDecoder(reader, lambda schema_id: by_id(client, schema_id))
        self.arrow_schema = typed(column_type(reader, subject))[1]
        self.arrow_type = self.arrow_schema.field("value").type

    def column(self, part: OffsetRange, values: list[bytes | None], offsets: list[int]) -> pa.Array:
        decode = self.decoder.decode
        rows = []
        for i, value in enumerate(values):
            try:
                rows.append(decode(value))
            except BadRecord as exc:
                raise BadRecord(f"{part.topic}-{part.partition} offset {offsets[i]}: {exc}") from exc
        return pa.array(rows, self.arrow_type)


def read_range(
    options: ReadOptions, part: OffsetRange, value_schema: Registered | None = None
) -> Iterator[pa.RecordBatch]:
    """Every record of ``part`` once, in offset order, as Arrow batches. Offsets retention deleted raise
    ``DataLoss``, or are skipped with ``failOnDataLoss=false``. Offsets planned but not (yet) there, as
    right after a leader change, are waited for up to ``requestTimeoutMs``, then treated the same way.
    ``value_schema``: with ``valueFormat`` 'avro', the reader schema the values are typed by."""
    where = f"{part.topic}-{part.partition}"
    offset = part.start
    stalled_since: float | None = None
    with connect(options, first=part.partition) as client:
        values = None
        if value_schema is not None:
            values = TypedValues(client, value_schema, options.value.subject or "")
        while offset < part.end:
            try:
                page = client.fetch_page(
                    part.topic,
                    part.partition,
                    offset,
                    options.fetch_max_bytes,
                    0 if stalled_since is None else EMPTY_PAGE_WAIT_MS,
                    options.fetch_format == "columnar",
                )
            except OffsetOutOfRange as exc:
                if offset < exc.log_start_offset:
                    lost = min(exc.log_start_offset, part.end) - offset
                    if options.fail_on_data_loss:
                        raise DataLoss(
                            f"{where}: offsets [{offset}, {offset + lost}) were deleted by retention (log "
                            f"starts at {exc.log_start_offset}); set failOnDataLoss=false to skip them"
                        ) from exc
                    offset += lost
                    continue
                page = None  # beyond the end: a new leader may not have caught up yet; wait as below
            if page is None or not page.offsets:
                now = time.monotonic()
                stalled_since = now if stalled_since is None else stalled_since
                if now - stalled_since > options.request_timeout_ms / 1000:
                    if not options.fail_on_data_loss:
                        return
                    raise DataLoss(
                        f"{where}: no record at offset {offset} although the range ends at {part.end} "
                        "(topic recreated?); set failOnDataLoss=false to skip them"
                    )
                if page is None:
                    time.sleep(EMPTY_PAGE_WAIT_MS / 1000)
                continue
            stalled_since = None
            if page.offsets[0] < offset:
                raise RaftlogSparkError(f"{where}: asked for offset {offset}, got {page.offsets[0]} first")
            # a compacted topic's offsets have gaps (the records compaction removed): the page's first
            # record may lie past the offset asked, and the range ends with its last record below the end
            count = bisect.bisect_left(page.offsets, part.end)
            if count and values is not None:
                column = values.column(part, page.values[:count], page.offsets)
                yield record_batch(part.topic, part.partition, page, count, column, values.arrow_schema)
            elif count:
                yield record_batch(part.topic, part.partition, page, count)
            offset = page.offsets[count - 1] + 1 if count == len(page.offsets) else part.end


class BatchReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], value_schema: Registered | None = None) -> None:
        self.options = parse_read_options(options, streaming=False)
        self.value_schema = value_schema  # valueFormat 'avro': the reader schema (source.value_schema)

    def partitions(self) -> list[InputPartition]:
        bounds = partition_bounds(self.options)
        start = resolve(self.options.starting, bounds, EARLIEST)
        start |= by_timestamp(self.options, bounds, starting=True)
        end = resolve(self.options.ending, bounds, LATEST)
        end |= by_timestamp(self.options, bounds, starting=False)
        if not self.options.fail_on_data_loss:
            start = {tp: max(offset, bounds[tp].log_start_offset) for tp, offset in start.items()}
        parts: list[InputPartition] = list(split(ranges(start, end), self.options.min_partitions))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            raise TypeError(f"expected an OffsetRange, got {partition!r}")
        return read_range(self.options, partition, self.value_schema)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Kafka's JSON ``{"topic": {"partition": next offset to read}}``."""

    def __init__(self, options: Mapping[str, str], value_schema: Registered | None = None) -> None:
        self.options = parse_read_options(options, streaming=True)
        self.value_schema = value_schema  # fixed when the query starts; later versions resolve to it
        self._available_now: Offsets | None = None  # the end fixed by Trigger.AvailableNow
        self._last_trigger_s: float | None = None  # when the last micro-batch was let go (monotonic)

    def _latest(self) -> Offsets:
        bounds = partition_bounds(self.options)
        return {tp: bound.end_offset for tp, bound in bounds.items()}

    def initialOffset(self) -> dict[str, dict[str, int]]:
        bounds = partition_bounds(self.options)
        start = resolve(self.options.starting, bounds, LATEST)
        start |= by_timestamp(self.options, bounds, starting=True)
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest()

    def reportLatestOffset(self) -> dict[str, dict[str, int]]:
        return to_json(self._latest())

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = from_json(start or {})
        latest = self._available_now if self._available_now is not None else self._latest()
        lost = sorted(set(begin) - set(latest))
        if lost and self.options.fail_on_data_loss:
            raise DataLoss(f"partitions {lost} are gone (topic deleted?); set failOnDataLoss=false to go on")
        behind = sorted(tp for tp, offset in latest.items() if offset < begin.get(tp, 0))
        if behind and self.options.fail_on_data_loss:
            where = ", ".join(f"{t}-{p} ends at {latest[(t, p)]} < {begin[(t, p)]}" for t, p in behind)
            raise DataLoss(f"{where} (topic recreated?); set failOnDataLoss=false to read on from the end")
        # failOnDataLoss=false: a partition that went backwards continues from its new end
        end = dict(latest)
        if self._delayed(begin, end):
            return to_json(begin)  # no new offsets: Spark runs no micro-batch this time
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return to_json(end)

    def _delayed(self, begin: Offsets, end: Offsets) -> bool:
        """``minOffsetsPerTrigger``: fewer records waiting delay the micro-batch, until ``maxTriggerDelay``
        passed since the last one (the first is never delayed, nor a Trigger.AvailableNow run), as in
        Spark's Kafka source."""
        wanted = self.options.min_offsets_per_trigger
        now = time.monotonic()
        if wanted is not None and self._available_now is None and self._last_trigger_s is not None:
            waiting = sum(max(0, offset - begin.get(tp, 0)) for tp, offset in end.items())
            delay_over = now - self._last_trigger_s >= self.options.max_trigger_delay_ms / 1000
            if waiting < wanted and not delay_over:
                return True
        if end != begin:
            self._last_trigger_s = now
        return False

    def partitions(
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> list[InputPartition]:
        parts: list[InputPartition] = list(
            split(ranges(from_json(start or {}), from_json(end)), self.options.min_partitions)
        )
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            raise TypeError(f"expected an OffsetRange, got {partition!r}")
        return read_range(self.options, partition, self.value_schema)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Progress lives in Spark's checkpoint (as with Kafka); nothing to tell the cluster."""
