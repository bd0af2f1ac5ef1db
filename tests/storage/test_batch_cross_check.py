"""Our batches against independent implementations of Kafka's RecordBatch v2.

kafka-python's record classes (pure Python, written apart from the compiled codec raftlog uses), both
directions, for random batches with every codec, null keys and values, headers with null values, both
timestamp types and producer fields: bytes we write they read, and bytes they write we read, header field
by header field and record by record. Their builder sends a batch uncompressed when compressing would not
shrink it, so the batches it writes here hold compressible values, and a batch that comes out
uncompressed when a codec was asked fails the test. It cannot write LogAppendTime (the broker stamps it),
so the test stamps their batch as a broker would: attributes bit 3, max timestamp, CRC-32C computed again.

kio's record reader (a second implementation, without codecs) reads our uncompressed batches as a second
opinion on the header and the records.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as TheirBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as TheirBuilder
from kio.records.readers import read_batch as kio_read_batch

from raftlog.storage import ProducerRecord, Record
from raftlog.storage.batch import (
    Compression,
    TimestampType,
    check_producer_batch,
    encode_batch,
    with_log_append_time,
)
from raftlog.storage.batch_reads import decode_batch

header_values = st.none() | st.binary(max_size=8)
headers = st.lists(st.tuples(st.text(max_size=6), header_values), max_size=3).map(tuple)
timestamps = st.integers(min_value=0, max_value=2**42)
records = st.lists(
    st.builds(
        ProducerRecord,
        value=st.none() | st.binary(max_size=200),
        key=st.none() | st.binary(max_size=12),
        headers=headers,
        timestamp_ms=timestamps,
    ),
    min_size=1,
    max_size=8,
)
# values every codec shrinks (a short pattern repeated), so that a compressed batch stays compressed
compressible = st.binary(min_size=1, max_size=4).map(lambda pattern: pattern * 64)
compressible_records = st.tuples(
    st.builds(ProducerRecord, value=compressible, key=st.none() | st.binary(max_size=12), headers=headers,
              timestamp_ms=timestamps),
    st.lists(
        st.builds(ProducerRecord, value=st.none() | compressible | st.binary(max_size=20),
                  key=st.none() | st.binary(max_size=12), headers=headers, timestamp_ms=timestamps),
        max_size=7,
    ),
).map(lambda parts: [parts[0], *parts[1]])  # fmt: skip
producers = st.none() | st.tuples(
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**15 - 1),
    st.integers(min_value=0, max_value=2**31 - 1_000),
)
codecs = st.sampled_from(list(Compression))
base_offsets = st.integers(0, 2**40)
terms = st.integers(0, 2**31 - 1)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NO_PRODUCER = (-1, -1, -1)


def theirs(batch: bytes) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """kafka-python's reading of a batch: its header fields and its records."""
    read = TheirBatch(batch)
    assert read.validate_crc(), "kafka-python finds the CRC wrong"
    fields = {
        "base_offset": read.base_offset,
        "size": read.size_in_bytes,
        "leader_epoch": read.leader_epoch,
        "magic": read.magic,
        "compression": read.compression_type,
        "timestamp_type": read.timestamp_type,
        "transactional": read.is_transactional,
        "control": read.is_control_batch,
        "last_offset_delta": read.last_offset_delta,
        "records_count": read.records_count,
        "first_timestamp": read.first_timestamp,
        "max_timestamp": read.max_timestamp,
        "producer": (read.producer_id, read.producer_epoch, read.base_sequence),
    }
    rows = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers)) for r in read]
    return fields, rows


@SETTINGS
@given(
    records=records,
    producer=producers,
    codec=codecs,
    base_offset=base_offsets,
    term=terms,
    log_append=st.booleans(),
)
def test_what_we_write_they_read(records, producer, codec, base_offset, term, log_append):
    producer_id, epoch, sequence = producer if producer is not None else (None, None, None)
    batch = encode_batch(
        base_offset, records, term, 0, producer_id, sequence, producer_epoch=epoch, compression=codec
    )
    stamp = 77_000
    if log_append:
        batch = with_log_append_time(batch, stamp)
    fields, rows = theirs(batch)
    create_times = [r.timestamp_ms for r in records]
    assert fields == {
        "base_offset": base_offset,
        "size": len(batch),
        "leader_epoch": term,
        "magic": 2,
        "compression": codec,  # we compress whenever asked, even when it does not shrink the batch
        "timestamp_type": 1 if log_append else 0,
        "transactional": False,
        "control": False,
        "last_offset_delta": len(records) - 1,
        "records_count": len(records),
        "first_timestamp": create_times[0],  # the base timestamp: the first record's CreateTime, kept
        "max_timestamp": stamp if log_append else max(create_times),
        "producer": NO_PRODUCER if producer is None else (producer_id, epoch, sequence),
    }
    assert rows == [
        (base_offset + i, stamp if log_append else r.timestamp_ms, 1 if log_append else 0, r.key, r.value,
         r.headers)
        for i, r in enumerate(records)
    ]  # fmt: skip


def rows_of(decoded: tuple[Record, ...]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp_ms, r.timestamp_type, r.key, r.value, r.headers) for r in decoded]


def their_batch(records: list[ProducerRecord], producer: tuple[int, int, int] | None, codec: Compression,
                base_offset: int, term: int) -> bytes:  # fmt: skip
    """The batch kafka-python's builder writes, with the base offset and leader epoch a broker stamps
    (outside the CRC)."""
    producer_id, epoch, sequence = NO_PRODUCER if producer is None else producer
    builder = TheirBuilder(2, codec, 0, producer_id, epoch, sequence, 2**31 - 1)
    for i, r in enumerate(records):
        builder.append(i, r.timestamp_ms, r.key, r.value, list(r.headers))
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, term)
    return bytes(batch)


def stamped_as_a_broker_does(batch: bytes, append_ms: int) -> bytes:
    """``batch`` with timestamp type LogAppendTime and ``append_ms`` as its max timestamp, CRC-32C
    computed again: written here from Kafka's format description, not with raftlog's code."""
    stamped = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", stamped, 21)
    struct.pack_into(">h", stamped, 21, attributes | 0x08)
    struct.pack_into(">q", stamped, 35, append_ms)
    struct.pack_into(">I", stamped, 17, crc32c.crc32c(bytes(stamped[21:])))
    return bytes(stamped)


@SETTINGS
@given(records=compressible_records, producer=producers, codec=codecs, base_offset=base_offsets, term=terms)
def test_what_they_write_we_read(records, producer, codec, base_offset, term):
    batch = their_batch(records, producer, codec, base_offset, term)
    header = check_producer_batch(batch, 2**62)  # as a producer's batch reaches the leader
    assert header.compression is codec, "their batch was written uncompressed: the codec went untested"
    ours = decode_batch(batch)
    assert ours.header == header
    assert (header.base_offset, header.term, header.size_bytes) == (base_offset, term, len(batch))
    assert (header.record_count, header.end_offset) == (len(records), base_offset + len(records))
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.sequence) == (
        (None, None, None) if producer is None else producer
    )
    assert header.first_timestamp_ms == records[0].timestamp_ms
    assert header.max_timestamp_ms == max(r.timestamp_ms for r in records)
    assert rows_of(ours.records) == [
        (base_offset + i, r.timestamp_ms, TimestampType.CREATE_TIME, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


@SETTINGS
@given(
    records=compressible_records,
    producer=producers,
    codec=codecs,
    base_offset=base_offsets,
    term=terms,
    append_ms=timestamps,
)
def test_their_batch_stamped_log_append_time_we_read_with_the_stamp(
    records, producer, codec, base_offset, term, append_ms
):
    batch = stamped_as_a_broker_does(their_batch(records, producer, codec, base_offset, term), append_ms)
    assert TheirBatch(batch).validate_crc()
    ours = decode_batch(batch)
    header = ours.header
    assert header.compression is codec
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (header.first_timestamp_ms, header.max_timestamp_ms) == (records[0].timestamp_ms, append_ms)
    assert (header.producer_id, header.producer_epoch, header.sequence) == (
        (None, None, None) if producer is None else producer
    )
    # every record reads as appended at the stamp, whatever CreateTime the producer gave it
    assert rows_of(ours.records) == [
        (base_offset + i, append_ms, TimestampType.LOG_APPEND_TIME, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


# kio resolves a record's timestamp to whole seconds, so its batches here carry whole seconds
whole_second_records = st.lists(
    st.builds(
        ProducerRecord,
        value=st.none() | st.binary(max_size=200),
        key=st.none() | st.binary(max_size=12),
        headers=headers,
        timestamp_ms=st.integers(min_value=0, max_value=2**33).map(lambda seconds: seconds * 1000),
    ),
    min_size=1,
    max_size=8,
)


@SETTINGS
@given(records=whole_second_records, producer=producers, base_offset=base_offsets, term=terms)
def test_what_we_write_kio_reads(records, producer, base_offset, term):
    producer_id, epoch, sequence = producer if producer is not None else (None, None, None)
    batch = encode_batch(base_offset, records, term, 0, producer_id, sequence, producer_epoch=epoch)
    read, size = kio_read_batch(batch, 0)  # checks the CRC and that the lengths add up
    assert size == len(batch)
    create_times = [r.timestamp_ms for r in records]
    assert (
        read.base_offset, read.batch_length, read.partition_leader_epoch, read.attributes,
        read.last_offset_delta, read.base_timestamp, read.max_timestamp,
        (read.producer_id, read.producer_epoch, read.base_sequence),
    ) == (
        base_offset, len(batch) - 12, term, 0, len(records) - 1, create_times[0], max(create_times),
        NO_PRODUCER if producer is None else producer,
    )  # fmt: skip
    epoch_start = datetime.datetime.fromtimestamp(0, datetime.UTC)
    assert [
        (r.offset, int((r.timestamp - epoch_start).total_seconds()) * 1000, r.key, r.value,
         tuple((h.key.decode(), h.value) for h in r.headers))
        for r in read.records
    ] == [
        (base_offset + i, r.timestamp_ms, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]  # fmt: skip
