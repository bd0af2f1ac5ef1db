"""The record-batch format (Kafka's RecordBatch v2): round trips with every codec, rebase and the
log-append-time stamp, and that damage and bad input are always refused."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftlog.storage import ProducerRecord
from raftlog.storage.batch import (
    HEADER_SIZE,
    MAX_OFFSET,
    BatchFormatError,
    Compression,
    TimestampType,
    claimed_record_count,
    crc_ok,
    crc_ok_at,
    decode_header,
    encode_batch,
    frame_at,
    rebase,
    recompress,
    verify,
    with_log_append_time,
    with_producer_id,
)
from raftlog.storage.batch_reads import decode_batch
from raftlog.storage.errors import InvalidRecord

from .helpers import as_stored, record_lists

offsets = st.integers(min_value=0, max_value=2**40)
terms = st.integers(min_value=0, max_value=2**31 - 1)
clock_ms = st.integers(min_value=0, max_value=2**42)
producers = st.none() | st.tuples(
    st.integers(min_value=0, max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**31 - 1),
    st.integers(min_value=0, max_value=2**15 - 1),
)
codecs = st.sampled_from(list(Compression))


@settings(max_examples=200)
@given(
    records=record_lists, base_offset=offsets, term=terms, now_ms=clock_ms, producer=producers, codec=codecs
)
def test_encode_decode_round_trip(records, base_offset, term, now_ms, producer, codec):
    producer_id, sequence, epoch = producer if producer is not None else (None, None, None)
    encoded = encode_batch(
        base_offset, records, term, now_ms, producer_id, sequence, producer_epoch=epoch, compression=codec
    )

    batch = decode_batch(encoded)

    expected = tuple(as_stored(r, base_offset + i, now_ms) for i, r in enumerate(records))
    assert batch.records == expected
    header = batch.header
    assert (header.base_offset, header.end_offset) == (base_offset, base_offset + len(records))
    assert header.term == term
    assert (header.producer_id, header.sequence, header.producer_epoch) == (producer_id, sequence, epoch)
    assert header.size_bytes == len(encoded)
    assert header.compression is codec and header.timestamp_type is TimestampType.CREATE_TIME
    assert header.first_timestamp_ms == expected[0].timestamp_ms
    assert header.max_timestamp_ms == max(r.timestamp_ms for r in expected)
    assert claimed_record_count(encoded) == header.record_count == len(records)  # the header's own count


def test_the_claimed_record_count_is_the_headers_word_and_checks_nothing():
    encoded = encode_batch(0, [ProducerRecord(b"x")] * 3, 0, 0)
    assert claimed_record_count(encoded[:HEADER_SIZE]) == 3  # the header alone says it
    assert claimed_record_count(encoded[: HEADER_SIZE - 1]) == 0  # too short to hold a header
    lying = bytearray(encoded)
    lying[57:61] = (2**31 - 1).to_bytes(4, "big")
    assert claimed_record_count(bytes(lying)) == 2**31 - 1  # what it claims; the check refuses it
    with pytest.raises(BatchFormatError):
        verify(bytes(lying))


def test_round_trip_keeps_edge_values_apart():
    """None key vs empty key, a tombstone (None value) vs an empty value, header values None vs empty,
    headers with empty names, timestamps going backwards."""
    records = [
        ProducerRecord(value=b"", key=None, timestamp_ms=1000),
        ProducerRecord(value=None, key=b"", timestamp_ms=5),
        ProducerRecord(
            value=b"v", key=b"k", headers=(("", b""), ("h", None), ("h", b"\x00\xff")), timestamp_ms=999
        ),
    ]
    batch = decode_batch(encode_batch(7, records, 3, now_ms=0))
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in batch.records] == [
        (7, None, b"", (), 1000),
        (8, b"", None, (), 5),
        (9, b"k", b"v", (("", b""), ("h", None), ("h", b"\x00\xff")), 999),
    ]


@given(records=record_lists, base_offset=offsets, term=terms, new_offset=offsets, new_term=terms)
def test_rebase_stamps_offset_and_term_outside_the_crc(records, base_offset, term, new_offset, new_term):
    original = encode_batch(base_offset, records, term, now_ms=1000)
    rebased = rebase(original, new_offset, new_term)
    header = verify(rebased)  # the CRC the producer computed still holds
    assert (header.base_offset, header.term, header.crc) == (
        new_offset,
        new_term,
        decode_header(original).crc,
    )
    assert rebased[16:] == original[16:], "nothing but the offset and the leader epoch changed"
    assert [(r.key, r.value) for r in decode_batch(rebased).records] == [(r.key, r.value) for r in records]


def test_rebase_refuses_bytes_too_short_for_a_header():
    with pytest.raises(BatchFormatError):
        rebase(b"\x00" * (HEADER_SIZE - 1), 0, 0)


def test_log_append_time_gives_every_record_the_append_time_and_a_new_crc():
    batch = encode_batch(
        0, [ProducerRecord(b"a", timestamp_ms=10), ProducerRecord(b"b", timestamp_ms=20)], 0, 0
    )
    stamped = with_log_append_time(batch, 99_000)
    decoded = decode_batch(stamped)  # CRC-checked
    assert decoded.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in decoded.records] == [99_000, 99_000]


def test_another_producer_id_keeps_everything_else_and_gets_a_new_crc():
    records = [ProducerRecord(b"a", b"k", (("h", b"v"),), 10), ProducerRecord(b"b", timestamp_ms=20)]
    batch = encode_batch(0, records, 0, 0, 424_242, 7, producer_epoch=3)
    owned = with_producer_id(batch, 2**62 + 5)
    decoded = decode_batch(owned)  # CRC-checked
    before = decode_batch(batch)
    assert decoded.header.producer_id == 2**62 + 5
    assert (decoded.header.producer_epoch, decoded.header.sequence) == (3, 7)
    assert decoded.records == before.records
    with pytest.raises(InvalidRecord):
        with_producer_id(batch, -1)


@pytest.mark.parametrize("codec", list(Compression))
def test_recompress_keeps_records_and_producer_fields(codec):
    records = [ProducerRecord(b"x" * 300, b"k", (("h", None),), 1234), ProducerRecord(None, None, (), 1235)]
    original = encode_batch(0, records, 0, 0, 42, 7, producer_epoch=3, compression=Compression.GZIP)
    again = recompress(original, verify(original), codec)
    header = verify(again)
    assert header.compression is codec
    assert (header.producer_id, header.producer_epoch, header.sequence) == (42, 3, 7)
    assert decode_batch(again).records == decode_batch(original).records


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists, producer=producers, codec=codecs, data=st.data())
def test_any_single_flipped_bit_after_the_leader_epoch_is_detected(records, producer, codec, data):
    producer_id, sequence, epoch = producer if producer is not None else (None, None, None)
    encoded = bytearray(
        encode_batch(0, records, 1, 2000, producer_id, sequence, producer_epoch=epoch, compression=codec)
    )
    position = data.draw(st.integers(min_value=8, max_value=len(encoded) - 1), label="byte")
    if 12 <= position < 16:
        position = 16  # the leader epoch lies outside the CRC by design: stamped in place
    encoded[position] ^= 1 << data.draw(st.integers(min_value=0, max_value=7), label="bit")
    with pytest.raises(BatchFormatError):
        verify(bytes(encoded))


@given(records=record_lists, data=st.data())
def test_a_cut_or_extended_batch_is_detected(records, data):
    encoded = encode_batch(0, records, 1, 2000)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    with pytest.raises(BatchFormatError):
        verify(encoded[:cut])
    with pytest.raises(BatchFormatError):
        verify(encoded + b"\x00")


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    changed = bytearray(batch)
    struct.pack_into(">h", changed, 21, attributes)
    struct.pack_into(">I", changed, 17, crc32c.crc32c(bytes(changed[21:])))
    return bytes(changed)


def test_an_unknown_magic_or_codec_is_refused_by_name():
    batch = bytearray(encode_batch(0, [ProducerRecord(b"v")], 0, 0))
    batch[16] = 1
    with pytest.raises(BatchFormatError, match="magic 1"):
        decode_header(bytes(batch))
    with pytest.raises(BatchFormatError, match="unknown compression codec 5"):
        decode_header(_with_attributes(encode_batch(0, [ProducerRecord(b"v")], 0, 0), 5))


def test_a_fetchs_walk_reads_the_same_frame_and_refuses_the_same_headers_as_decode_header():
    first = encode_batch(7, [ProducerRecord(b"a"), ProducerRecord(b"b")], 0, 0)
    second = encode_batch(9, [ProducerRecord(b"c" * 300)], 0, 0)
    run = b"\x00" * 5 + first + second  # batches at positions 5 and 5 + len(first) of one read
    for position, batch in ((5, first), (5 + len(first), second)):
        header = decode_header(run, position)
        size, base_offset, end_offset, crc = frame_at(run, position)
        assert (size, base_offset, end_offset, crc) == (
            header.size_bytes, header.base_offset, header.end_offset, header.crc,
        )  # fmt: skip
        assert crc_ok_at(run, position, size, crc) is crc_ok(batch, header) is True
    damaged = bytearray(run)
    damaged[5 + HEADER_SIZE] ^= 1  # a record's byte: the framing holds, the CRC does not
    size, _, _, crc = frame_at(bytes(damaged), 5)
    assert not crc_ok_at(bytes(damaged), 5, size, crc)
    bad_magic = bytearray(first)
    bad_magic[16] = 1
    bad_codec = _with_attributes(first, 5)
    for bad, message in ((bytes(bad_magic), "magic 1"), (bad_codec, "unknown compression codec 5")):
        with pytest.raises(BatchFormatError, match=message):
            frame_at(bad)
    with pytest.raises(BatchFormatError, match=f"need {HEADER_SIZE} header bytes, have 60"):
        frame_at(first[:60])


def test_a_compressed_body_that_does_not_decompress_is_refused():
    batch = bytearray(encode_batch(0, [ProducerRecord(b"v" * 500)], 0, 0, compression=Compression.ZSTD))
    batch[HEADER_SIZE + 4 : HEADER_SIZE + 12] = b"\xde\xad\xbe\xef" * 2  # inside the zstd frame
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))  # a CRC that holds
    with pytest.raises(BatchFormatError, match="do not decode"):
        decode_batch(bytes(batch))


def test_empty_batch_is_invalid():
    with pytest.raises(InvalidRecord):
        encode_batch(0, [], 0, 0)


@pytest.mark.parametrize(
    "record",
    [
        ProducerRecord(value="text"),  # type: ignore[arg-type]
        ProducerRecord(value=b"v", key="text"),  # type: ignore[arg-type]
        ProducerRecord(value=b"v", headers=(("h", "text"),)),  # type: ignore[arg-type]
        ProducerRecord(value=b"v", headers=((b"h", b"v"),)),  # type: ignore[arg-type]
        ProducerRecord(value=b"v", timestamp_ms=2**63),
        "not a record",  # type: ignore[arg-type]
    ],
)
def test_malformed_record_is_invalid(record):
    with pytest.raises(InvalidRecord):
        encode_batch(0, [record], 0, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_offset": -1}, "base_offset"),
        ({"base_offset": MAX_OFFSET}, "base_offset"),
        ({"producer_id": 1}, "together"),
        ({"producer_id": -5, "sequence": 0}, "out of range"),
        ({"producer_id": 1, "sequence": 2**31}, "out of range"),
        ({"now_ms": 2**63}, "now_ms"),
    ],
)
def test_malformed_batch_arguments_are_invalid(kwargs, message):
    arguments = {"base_offset": 0, "records": [ProducerRecord(b"v")], "term": 0, "now_ms": 0, **kwargs}
    with pytest.raises(InvalidRecord, match=message):
        encode_batch(**arguments)


@pytest.mark.parametrize("term", [-1, 2**31, True])
def test_a_term_that_does_not_fit_a_leader_epoch_is_refused(term):
    batch = encode_batch(0, [ProducerRecord(b"v")], 0, 0)
    with pytest.raises(InvalidRecord):
        rebase(batch, 0, term)
