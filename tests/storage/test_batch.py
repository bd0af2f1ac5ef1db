"""The record-batch format: round trips, rebase, and that damage and bad input are always refused."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftlog.storage import ProducerRecord
from raftlog.storage.batch import (
    HEADER_SIZE,
    MAX_OFFSET,
    BatchFormatError,
    decode_batch,
    encode_batch,
    rebase,
    verify,
)
from raftlog.storage.errors import InvalidRecord

from .helpers import as_stored, record_lists

offsets = st.integers(min_value=0, max_value=2**40)
terms = st.integers(min_value=0, max_value=2**63)
clock_ms = st.integers(min_value=-(2**40), max_value=2**42)
producers = st.none() | st.tuples(
    st.integers(min_value=0, max_value=2**63 - 1), st.integers(min_value=-1, max_value=2**31)
)


@settings(max_examples=300)
@given(records=record_lists, base_offset=offsets, term=terms, now_ms=clock_ms, producer=producers)
def test_encode_decode_round_trip(records, base_offset, term, now_ms, producer):
    producer_id, sequence = producer if producer is not None else (None, None)
    encoded = encode_batch(base_offset, records, term, now_ms, producer_id, sequence)

    batch = decode_batch(encoded)

    expected = tuple(as_stored(r, base_offset + i, now_ms) for i, r in enumerate(records))
    assert batch.records == expected
    header = batch.header
    assert (header.base_offset, header.end_offset) == (base_offset, base_offset + len(records))
    assert header.term == term
    assert (header.producer_id, header.sequence) == (producer_id, sequence)
    assert header.size_bytes == len(encoded)
    assert header.first_timestamp_ms == expected[0].timestamp_ms
    assert header.max_timestamp_ms == max(r.timestamp_ms for r in expected)


def test_round_trip_keeps_edge_values_apart():
    """None key vs empty key, empty value, headers with empty names, timestamps going backwards."""
    records = [
        ProducerRecord(value=b"", key=None, timestamp_ms=1000),
        ProducerRecord(value=b"", key=b"", timestamp_ms=-5),
        ProducerRecord(value=b"v", key=b"k", headers=(("", b""), ("h", b"\x00\xff")), timestamp_ms=999),
    ]
    batch = decode_batch(encode_batch(7, records, 3, now_ms=0))
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in batch.records] == [
        (7, None, b"", (), 1000),
        (8, b"", b"", (), -5),
        (9, b"k", b"v", (("", b""), ("h", b"\x00\xff")), 999),
    ]
    assert batch.header.first_timestamp_ms == 1000
    assert batch.header.max_timestamp_ms == 1000


@given(records=record_lists, base_offset=offsets, term=terms, new_offset=offsets, new_term=terms)
def test_rebase_changes_offset_and_term_and_keeps_records(records, base_offset, term, new_offset, new_term):
    original = encode_batch(base_offset, records, term, now_ms=123)

    stamped = rebase(original, new_offset, new_term)

    header = verify(stamped)  # the CRC was recomputed over the new header
    assert (header.base_offset, header.term) == (new_offset, new_term)
    before, after = decode_batch(original), decode_batch(stamped)
    assert [(r.offset - base_offset, r.key, r.value, r.headers, r.timestamp_ms) for r in before.records] == [
        (r.offset - new_offset, r.key, r.value, r.headers, r.timestamp_ms) for r in after.records
    ]
    assert stamped[HEADER_SIZE:] == original[HEADER_SIZE:]
    if (new_offset, new_term) != (base_offset, term):
        assert header.crc != before.header.crc


def test_rebase_refuses_bytes_too_short_for_a_header():
    with pytest.raises(BatchFormatError):
        rebase(b"\x00" * (HEADER_SIZE - 1), 0, 0)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists, producer=producers, data=st.data())
def test_any_single_flipped_bit_is_detected(records, producer, data):
    producer_id, sequence = producer if producer is not None else (None, None)
    encoded = encode_batch(5, records, 2, 77, producer_id, sequence)
    bit = data.draw(st.integers(min_value=0, max_value=len(encoded) * 8 - 1), label="bit")
    damaged = bytearray(encoded)
    damaged[bit // 8] ^= 1 << (bit % 8)

    with pytest.raises(BatchFormatError):
        verify(bytes(damaged))
    with pytest.raises(BatchFormatError):
        decode_batch(bytes(damaged))


@given(records=record_lists, data=st.data())
def test_a_cut_or_extended_batch_is_detected(records, data):
    encoded = encode_batch(0, records, 1, 0)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1), label="cut")
    with pytest.raises(BatchFormatError):
        verify(encoded[:cut])
    extra = data.draw(st.binary(min_size=1, max_size=20), label="extra")
    with pytest.raises(BatchFormatError):
        verify(encoded + extra)


def test_empty_batch_is_invalid():
    with pytest.raises(InvalidRecord, match="at least one record"):
        encode_batch(0, [], 0, 0)


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(b"raw bytes", id="not-a-ProducerRecord"),
        pytest.param(ProducerRecord(value="text"), id="str-value"),
        pytest.param(ProducerRecord(value=None), id="none-value"),
        pytest.param(ProducerRecord(value=b"v", key="text"), id="str-key"),
        pytest.param(ProducerRecord(value=b"v", key=5), id="int-key"),
        pytest.param(ProducerRecord(value=b"v", headers=(("k", "text"),)), id="str-header-value"),
        pytest.param(ProducerRecord(value=b"v", headers=((1, b"x"),)), id="int-header-name"),
        pytest.param(ProducerRecord(value=b"v", headers=(("k", b"x", b"y"),)), id="header-triple"),
        pytest.param(ProducerRecord(value=b"v", headers=(7,)), id="header-not-a-pair"),
        pytest.param(ProducerRecord(value=b"v", timestamp_ms="1"), id="str-timestamp"),
        pytest.param(ProducerRecord(value=b"v", timestamp_ms=1.5), id="float-timestamp"),
        pytest.param(ProducerRecord(value=b"v", timestamp_ms=2**63), id="timestamp-beyond-int64"),
    ],
)
def test_malformed_record_is_invalid(record):
    with pytest.raises(InvalidRecord, match="record 1"):
        encode_batch(0, [ProducerRecord(value=b"fine"), record], 0, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"base_offset": -1}, "base_offset", id="negative-offset"),
        pytest.param({"base_offset": MAX_OFFSET}, "base_offset", id="offset-overflow"),
        pytest.param({"term": -1}, "term", id="negative-term"),
        pytest.param({"term": 2**64}, "term", id="term-beyond-u64"),
        pytest.param({"term": "1"}, "term", id="str-term"),
        pytest.param({"producer_id": 1}, "together", id="producer-without-sequence"),
        pytest.param({"sequence": 1}, "together", id="sequence-without-producer"),
        pytest.param({"producer_id": 2**63, "sequence": 0}, "producer_id", id="producer-beyond-int64"),
        pytest.param({"producer_id": 1, "sequence": "0"}, "producer_id", id="str-sequence"),
    ],
)
def test_malformed_batch_arguments_are_invalid(kwargs, message):
    arguments = {"base_offset": 0, "term": 0, "now_ms": 0, **kwargs}
    with pytest.raises(InvalidRecord, match=message):
        encode_batch(records=[ProducerRecord(value=b"v")], **arguments)


@pytest.mark.parametrize("term", [-1, 2**64])
def test_rebase_refuses_a_term_that_does_not_fit(term):
    with pytest.raises(InvalidRecord, match="term"):
        rebase(encode_batch(0, [ProducerRecord(value=b"v")], 0, 0), 0, term)
