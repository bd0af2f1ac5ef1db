"""Our batches against an independent implementation of Kafka's RecordBatch v2: kafka-python's record
classes (pure Python, written apart from the compiled codec raftlog uses). Bytes they write we read, and
bytes we write they read, field by field, for random batches with every codec, null keys and values,
headers with null values, both timestamp types and producer fields."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as TheirBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as TheirBuilder

from raftlog.storage import ProducerRecord
from raftlog.storage.batch import (
    Compression,
    TimestampType,
    check_producer_batch,
    decode_batch,
    encode_batch,
    with_log_append_time,
)

header_values = st.none() | st.binary(max_size=8)
records = st.lists(
    st.builds(
        ProducerRecord,
        value=st.none() | st.binary(max_size=200),
        key=st.none() | st.binary(max_size=12),
        headers=st.lists(st.tuples(st.text(max_size=6), header_values), max_size=3).map(tuple),
        timestamp_ms=st.integers(min_value=0, max_value=2**42),
    ),
    min_size=1,
    max_size=8,
)
producers = st.none() | st.tuples(
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**15 - 1),
    st.integers(min_value=0, max_value=2**31 - 1_000),
)
codecs = st.sampled_from(list(Compression))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def theirs(batch: bytes) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    read = TheirBatch(batch)
    assert read.validate_crc(), "kafka-python finds the CRC wrong"
    fields = {
        "base_offset": read.base_offset,
        "compression": read.compression_type,
        "timestamp_type": read.timestamp_type,
        "producer": (read.producer_id, read.producer_epoch, read.base_sequence),
        "max_timestamp": read.max_timestamp,
    }
    rows = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in read]
    return fields, rows


@SETTINGS
@given(
    records=records,
    producer=producers,
    codec=codecs,
    base_offset=st.integers(0, 2**40),
    log_append=st.booleans(),
)
def test_what_we_write_they_read(records, producer, codec, base_offset, log_append):
    producer_id, epoch, sequence = producer if producer is not None else (None, None, None)
    batch = encode_batch(
        base_offset, records, 3, 0, producer_id, sequence, producer_epoch=epoch, compression=codec
    )
    if log_append:
        batch = with_log_append_time(batch, 77_000)
    fields, rows = theirs(batch)
    assert fields["base_offset"] == base_offset
    assert fields["compression"] == codec
    assert fields["timestamp_type"] == (1 if log_append else 0)
    assert fields["producer"] == ((-1, -1, -1) if producer is None else (producer_id, epoch, sequence))
    expected = [
        (base_offset + i, 77_000 if log_append else r.timestamp_ms, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]
    assert rows == expected


@SETTINGS
@given(records=records, producer=producers, codec=codecs)
def test_what_they_write_we_read(records, producer, codec):
    producer_id, epoch, sequence = producer if producer is not None else (-1, -1, -1)
    builder = TheirBuilder(2, codec, 0, producer_id, epoch, sequence, 2**31 - 1)
    for i, r in enumerate(records):
        builder.append(i, r.timestamp_ms, r.key, r.value, list(r.headers))
    batch = bytes(builder.build())
    header = check_producer_batch(batch, 2**62)  # as a producer's batch reaches the leader
    ours = decode_batch(batch)
    # kafka-python writes a batch that compression would not shrink uncompressed
    assert header.compression is Compression(TheirBatch(batch).compression_type)
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.sequence) == (
        (None, None, None) if producer is None else (producer_id, epoch, sequence)
    )
    assert header.max_timestamp_ms == max(r.timestamp_ms for r in records)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in ours.records] == [
        (i, r.timestamp_ms, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]
