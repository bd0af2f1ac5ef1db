"""The records section read and written in C (raftlog/storage/_records.c) against aiokafka's compiled
codec, the one it replaced, and against damage: whatever bytes it is given, it answers the records or a
ValueError naming what is wrong, never a crash, never bytes from outside its record."""

from __future__ import annotations

import struct

import crc32c
import pytest
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.readers import read_record as kio_read_record

from raftlog.storage import ProducerRecord
from raftlog.storage import _records as reader  # type: ignore[attr-defined]
from raftlog.storage.batch import (
    HEADER_SIZE,
    BatchFormatError,
    Compression,
    InvalidRecord,
    Record,
    TimestampType,
    decode_header,
    encode_batch,
    with_log_append_time,
)
from raftlog.storage.batch_reads import decode_batch, record_rows

header_values = st.none() | st.binary(max_size=8)
headers = st.lists(st.tuples(st.text(max_size=6), header_values), max_size=3).map(tuple)
records = st.lists(
    st.builds(
        ProducerRecord,
        value=st.none() | st.binary(max_size=300),
        key=st.none() | st.binary(max_size=12),
        headers=headers,
        timestamp_ms=st.none() | st.integers(min_value=0, max_value=2**45),
    ),
    min_size=1,
    max_size=12,
)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = 1_700_000_000_000


def aiokafka_encoded(batch_records: list[ProducerRecord]) -> bytes:
    builder = AiokafkaBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    for index, r in enumerate(batch_records):
        builder.append(
            index, NOW if r.timestamp_ms is None else r.timestamp_ms, r.key, r.value, list(r.headers)
        )
    return bytes(builder.build())


def aiokafka_records(batch: bytes) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in AiokafkaBatch(batch)]


@SETTINGS
@given(records, st.sampled_from(list(Compression)))
def test_what_the_c_codec_writes_aiokafka_reads_and_the_other_way_round(batch_records, codec):
    ours = encode_batch(0, batch_records, 0, NOW, compression=codec)
    expected = [
        (i, NOW if r.timestamp_ms is None else r.timestamp_ms, r.key, r.value, r.headers)
        for i, r in enumerate(batch_records)
    ]
    assert aiokafka_records(ours) == expected
    assert [tuple(r)[:5] for r in decode_batch(ours).records] == expected
    header, rows = record_rows(ours)
    assert [(header.base_offset + i, *row) for i, row in enumerate(rows)] == expected

    theirs = aiokafka_encoded(batch_records)
    assert [tuple(r)[:5] for r in decode_batch(theirs).records] == expected
    if codec is Compression.NONE:  # the same bytes, record for record
        assert theirs[HEADER_SIZE:] == ours[HEADER_SIZE:]


def test_log_append_time_gives_every_record_the_batch_stamp():
    batch = with_log_append_time(
        encode_batch(7, [ProducerRecord(b"a", timestamp_ms=5), ProducerRecord(b"b", timestamp_ms=9)], 1, NOW),
        NOW + 123,
    )
    records_read = decode_batch(batch).records
    assert [(r.offset, r.timestamp_ms, r.timestamp_type) for r in records_read] == [
        (7, NOW + 123, TimestampType.LOG_APPEND_TIME),
        (8, NOW + 123, TimestampType.LOG_APPEND_TIME),
    ]
    assert all(type(r) is Record for r in records_read)
    assert [row[0] for row in record_rows(batch)[1]] == [NOW + 123, NOW + 123]


def test_timestamps_may_go_down_within_a_batch():
    batch = encode_batch(
        0, [ProducerRecord(b"a", timestamp_ms=1_000), ProducerRecord(b"b", timestamp_ms=10)], 0, NOW
    )
    header = decode_header(batch)
    assert (header.first_timestamp_ms, header.max_timestamp_ms) == (1_000, 1_000)
    assert [r.timestamp_ms for r in decode_batch(batch).records] == [1_000, 10]


def test_keys_and_values_may_be_any_bytes_like_object():
    batch = encode_batch(0, [ProducerRecord(memoryview(b"v"), bytearray(b"k"))], 0, NOW)
    [record] = decode_batch(batch).records
    assert (record.key, record.value) == (b"k", b"v")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (ProducerRecord("text"), "record 0: value must be bytes or None"),  # type: ignore[arg-type]
        (ProducerRecord(b"v", key=5), "record 0: key must be bytes or None"),  # type: ignore[arg-type]
        (ProducerRecord(b"v", headers=(("k", "text"),)), "headers must be (str, bytes or None) pairs"),  # type: ignore[arg-type]
        (ProducerRecord(b"v", headers=((1, b"x"),)), "headers must be (str, bytes or None) pairs"),  # type: ignore[arg-type]
        (ProducerRecord(b"v", headers=("kx",)), "headers must be (str, bytes or None) pairs"),  # type: ignore[arg-type]
        (ProducerRecord(b"v", timestamp_ms=-1), "record 0: timestamp_ms -1 must be ms since the epoch"),
        (ProducerRecord(b"v", timestamp_ms=True), "record 0: timestamp_ms True must be ms since the epoch"),  # type: ignore[arg-type]
        (ProducerRecord(b"v", timestamp_ms=2**64), "record 0: timestamp_ms"),
    ],
)
def test_a_record_that_cannot_be_encoded_is_refused_by_name(record, message):
    with pytest.raises(InvalidRecord) as refused:
        encode_batch(0, [ProducerRecord(b"fine"), record][1:], 0, NOW)
    assert message in str(refused.value)


def test_a_record_without_a_timestamp_needs_a_clock_after_the_epoch():
    with pytest.raises(InvalidRecord, match="before the epoch"):
        encode_batch(0, [ProducerRecord(b"v")], 0, -5)


def section(*records: bytes) -> bytes:
    return b"".join(records)


def zigzag(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record(index: int, key: bytes | None = None, value: bytes | None = b"v", *, body_extra: bytes = b"",
           length_delta: int = 0, header_part: bytes = b"\x00") -> bytes:  # fmt: skip
    def field(data: bytes | None) -> bytes:
        return zigzag(-1) if data is None else zigzag(len(data)) + data

    body = b"\x00" + zigzag(0) + zigzag(index) + field(key) + field(value) + header_part + body_extra
    return zigzag(len(body) + length_delta) + body


@pytest.mark.parametrize(
    ("data", "count", "message"),
    [
        (section(record(0), record(1)), 2, None),
        (section(record(0), record(2)), 2, "record 1 has offset delta 2, after 0 in a span of 2"),
        (section(record(1), record(1)), 2, "record 1 has offset delta 1, after 1 in a span of 2"),
        (section(record(0)), 2, "record 1: a varint runs past the end of its record"),
        (section(record(0), b"\x00"), 1, "1 bytes after the last record"),
        (section(record(0, length_delta=5)), 1, "record 0: length"),
        (section(record(0, length_delta=-1)), 1, "record 0: a varint runs past the end of its record"),
        (section(record(0, body_extra=b"zz")), 1, "record 0: 2 bytes of its length are not part of it"),
        (section(zigzag(30) + b"\x00" + b"\xff" * 29), 1, "varint is longer than its type allows"),
        (section(record(0, value=None)[:1] + b"\x00\x00\x00" + zigzag(50) + b"short\x00"), 1, "record 0"),
        (section(record(0, header_part=zigzag(-2))), 1, "record 0: header count -2"),
        (section(record(0, header_part=zigzag(1) + zigzag(2) + b"\xff\xfe" + zigzag(-1))), 1,
         "record 0: a header key is not UTF-8"),
        (section(record(0, header_part=zigzag(1) + zigzag(-1) + zigzag(-1))), 1,
         "record 0: a header key length is negative"),
        (section(record(0, header_part=zigzag(100))), 1, "record 0: 100 headers run past the end"),
        (zigzag(4) + b"\x00" + zigzag(0) + zigzag(0) + zigzag(-3), 1, "record 0: key length -3"),
        (b"\x02" * 3, 5, "5 records cannot fit 3 bytes"),
    ],
)  # fmt: skip
def test_a_damaged_section_is_refused_by_name(data, count, message):
    if message is None:
        assert len(reader.rows(data, count, count, NOW, None)) == count
        assert reader.check(data, count, count, NOW) == (NOW, NOW)
        return
    for call in (
        lambda: reader.rows(data, count, count, NOW, None),
        lambda: reader.records(data, count, count, 0, NOW, None, Record, TimestampType.CREATE_TIME),
        lambda: reader.check(data, count, count, NOW),
    ):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            call()


def test_records_must_be_made_as_a_tuple_type():
    with pytest.raises(TypeError, match="subclass of tuple"):
        reader.records(record(0), 1, 1, 0, NOW, None, dict, TimestampType.CREATE_TIME)


@pytest.mark.parametrize(
    ("deltas", "span", "message"),
    [
        ([0, 3, 7], 8, None),  # compaction kept three records of eight, each at its own offset
        ([2], 3, None),
        ([0, 3, 8], 8, "record 2 has offset delta 8, after 3 in a span of 8"),
        ([0, 3, 3], 8, "record 2 has offset delta 3, after 3 in a span of 8"),
        ([4, 2], 8, "record 1 has offset delta 2, after 4 in a span of 8"),
        ([0, 1, 2], 2, "3 records cannot fit a span of 2 offsets"),
    ],
)  # fmt: skip
def test_a_compacted_batch_keeps_rising_offset_deltas_within_its_span(deltas, span, message):
    data = section(*(record(delta) for delta in deltas))
    if message is None:
        records = reader.records(data, len(deltas), span, 100, NOW, None, Record, TimestampType.CREATE_TIME)
        assert [r.offset for r in records] == [100 + delta for delta in deltas]
        assert reader.check(data, len(deltas), span, NOW) == (NOW, NOW)
        return
    with pytest.raises(ValueError, match=message):
        reader.records(data, len(deltas), span, 100, NOW, None, Record, TimestampType.CREATE_TIME)
    with pytest.raises(ValueError, match=message):
        reader.check(data, len(deltas), span, NOW)


def kio_rows(section_bytes: bytes, timestamp_deltas: list[int]) -> list[tuple[object, ...]]:
    """kio's reading of a records section (Kafka's layout: the attributes are one byte): (attributes,
    key, value, headers) per record; ValueError if the section is not exactly as many records as
    ``timestamp_deltas``. kio makes a datetime of each record's timestamp and refuses one before 1970 or
    after 9999, which damage to a delta easily gives: each record is read against a base that puts the
    delta our reader read at a plain date (timestamps are not compared, only what follows them)."""
    position, rows = 0, []
    for delta in timestamp_deltas:
        read, size = kio_read_record(section_bytes, NOW - delta, 0, position)
        position += size
        headers = tuple((h.key.decode(), h.value) for h in read.headers)
        rows.append((read.attributes, read.key, read.value, headers))
    if position != len(section_bytes):
        raise ValueError("bytes left over")
    return rows


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.data())
def test_any_damage_is_refused_or_reads_as_another_reader_reads_it(batch_records, data):
    """Flip, cut or insert bytes anywhere in a batch's records (with a CRC that holds again): the reader
    either refuses with a ValueError or reads exactly what aiokafka's reader reads. aiokafka reads a
    record's attributes as a varint where Kafka has one byte, so when the damage set an attributes byte's
    high bit it refuses or misreads what Kafka reads (its continuation bit shifts every later field): then
    kio's reader (Kafka's layout) must read what the reader read, and an attributes byte must be one
    that aiokafka takes for a varint's first byte."""
    batch = bytearray(encode_batch(0, batch_records, 0, NOW))
    first_timestamp = decode_header(batch).first_timestamp_ms
    body = batch[HEADER_SIZE:]
    change = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    at = data.draw(st.integers(0, max(0, len(body) - 1)))
    if change == "flip":
        body[at] ^= data.draw(st.integers(1, 255))
    elif change == "cut":
        del body[at : at + data.draw(st.integers(1, 8))]
    else:
        body[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    count = len(batch_records)
    try:
        ours = reader.rows(bytes(body), count, count, first_timestamp, None)
    except ValueError:
        return
    assert reader.check(bytes(body), count, count, first_timestamp) == (
        min(r[0] for r in ours),
        max(r[0] for r in ours),
    )
    damaged = bytearray(batch[:HEADER_SIZE]) + body
    struct.pack_into(">i", damaged, 8, len(damaged) - 12)
    struct.pack_into(">I", damaged, 17, crc32c.crc32c(bytes(damaged[21:])))
    try:
        theirs = [(r[1], r[2], r[3], r[4]) for r in aiokafka_records(bytes(damaged))]
    except (CorruptRecordException, UnicodeDecodeError):
        theirs = None  # refused, or a header key it misaligned onto was not UTF-8
    if theirs == [tuple(row) for row in ours]:
        return
    kio = kio_rows(bytes(body), [row[0] - first_timestamp for row in ours])
    assert [row[1:] for row in kio] == [row[1:] for row in ours]
    assert any(row[0] < 0 for row in kio), "aiokafka read otherwise a section whose attributes are plain"


def test_a_corrupt_batch_is_a_batch_format_error_not_a_crash():
    batch = bytearray(encode_batch(0, [ProducerRecord(b"v" * 10, b"k")], 0, NOW))
    batch[HEADER_SIZE + 6] = 0x7F  # the key's length: past the record
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(BatchFormatError, match="records do not decode"):
        decode_batch(bytes(batch))
    with pytest.raises(BatchFormatError, match="records do not decode"):
        record_rows(bytes(batch))
