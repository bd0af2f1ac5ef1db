"""A batch a producer encoded itself is checked as strictly as records the leader encodes: every batch
``encode_batch`` makes for a producer passes, and each way of being malformed is refused by name."""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import msgpack
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from raftlog.storage import ProducerRecord
from raftlog.storage.batch import (
    BatchFormatError,
    check_producer_batch,
    decode_batch,
    encode_batch,
    record_rows,
    split_batches,
    verify,
)
from raftlog.storage.errors import InvalidRecord

from .helpers import record_lists

LATEST = 2**62
producers = st.none() | st.tuples(
    st.integers(min_value=0, max_value=2**63 - 1), st.integers(min_value=0, max_value=2**31)
)


def raw_batch(
    rows: Any,
    *,
    base: int = 0,
    term: int = 0,
    count: int | None = None,
    first: int = 1000,
    max_ts: int | None = None,
) -> bytes:
    """A batch with a correct length and CRC around whatever rows and header fields are given."""
    body = msgpack.packb(rows, use_bin_type=True)
    fields = struct.pack(
        ">BBQIqqQqq", 1, 0, base, len(rows) if count is None else count, first,
        first if max_ts is None else max_ts, term, -1, -1,
    )  # fmt: skip
    length = 4 + len(fields) + len(body)  # the CRC field, the covered header, the body
    return struct.pack(">II", length, crc32c.crc32c(fields + body)) + fields + body


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists, now_ms=st.integers(min_value=0, max_value=2**42), producer=producers)
def test_every_batch_a_producer_encodes_passes(records, now_ms, producer):
    assume(all(r.timestamp_ms is None or r.timestamp_ms >= 0 for r in records))
    producer_id, sequence = producer if producer is not None else (None, None)
    encoded = encode_batch(0, records, 0, now_ms, producer_id, sequence)
    assert check_producer_batch(encoded, LATEST) == verify(encoded)


def test_a_well_formed_raw_batch_passes():
    rows = [[0, None, b"a", []], [5, b"k", b"", [["h", b"\x00"], ["h", b"2"]]], [-3, None, b"c", []]]
    header = check_producer_batch(raw_batch(rows, first=100, max_ts=105), LATEST)
    assert (header.record_count, header.first_timestamp_ms, header.max_timestamp_ms) == (3, 100, 105)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (raw_batch([[0, None, "text", []]]), "record 0: value must be bytes"),
        (raw_batch([[0, None, b"v", []], [0, 7, b"v", []]]), "record 1: key must be bytes or nil"),
        (raw_batch([[0, None, b"v", [["h"]]]]), "record 0: headers must be an array of [str, bin] pairs"),
        (raw_batch([[0, None, b"v", [[b"h", b"v"]]]]), "headers must be an array of [str, bin] pairs"),
        (raw_batch([[0, None, b"v", {"h": b"v"}]]), "headers must be an array of [str, bin] pairs"),
        (raw_batch([[0, None, b"v"]]), "record 0: must be [timestamp_delta, key, value, headers]"),
        (raw_batch([b"v"]), "record 0: must be [timestamp_delta, key, value, headers]"),
        (raw_batch([[0.5, None, b"v", []]]), "record 0: timestamp_delta must be an integer"),
        (raw_batch([[2, None, b"v", []]], max_ts=1002), "record 0: timestamp_delta must be 0"),
        (raw_batch([[0, None, b"v", []], [9, None, b"v", []]]), "must be >= 0"),  # max_timestamp too small
        (raw_batch([[0, None, b"v", []]], first=-1), "must be >= 0"),
        (raw_batch([[0, None, b"v", []], [-2000, None, b"v", []]]), "must be >= 0"),
        (raw_batch([[0, None, b"v", []]], first=LATEST + 1), f"<= {LATEST}"),
        (raw_batch([[0, None, b"v", []]], base=5), "base_offset 0 and term 0"),
        (raw_batch([[0, None, b"v", []]], term=2), "base_offset 0 and term 0"),
        (raw_batch([[0, None, b"v", []]], count=2), "body holds 1 records, header says 2"),
        (raw_batch([[0, None, b"v", []]])[:-1], "record batch: batch is"),
        (b"not a batch", "record batch: need 62 header bytes"),
    ],
)
def test_a_malformed_batch_is_refused_by_name(batch, message):
    with pytest.raises(InvalidRecord) as refused:
        check_producer_batch(batch, LATEST)
    assert message in str(refused.value)


def test_a_damaged_batch_is_refused():
    encoded = bytearray(encode_batch(0, [ProducerRecord(b"value")], 0, 1000))
    encoded[-1] ^= 0x01
    with pytest.raises(InvalidRecord, match="crc32c mismatch"):
        check_producer_batch(bytes(encoded), LATEST)


def test_rows_of_a_stored_batch_are_its_records_in_order():
    records = [ProducerRecord(b"a", key=b"k", headers=(("h", b"1"),), timestamp_ms=7), ProducerRecord(b"b")]
    stored = encode_batch(40, records, 3, 9)
    header, rows = record_rows(stored)
    assert header == verify(stored)
    first = header.first_timestamp_ms
    from_rows = [(header.base_offset + i, first + row[0], row[1], row[2]) for i, row in enumerate(rows)]
    assert from_rows == [(r.offset, r.timestamp_ms, r.key, r.value) for r in decode_batch(stored).records]
    with pytest.raises(BatchFormatError):
        record_rows(stored[:-1] + bytes([stored[-1] ^ 1]))
    assert [verify(b) for b in split_batches(stored + stored)] == [header, header]
    with pytest.raises(BatchFormatError):
        list(split_batches(stored + stored[:70]))
