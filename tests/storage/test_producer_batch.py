"""A batch a producer encoded (any Kafka producer's RecordBatch v2, or ``encode_batch``'s) is checked as
strictly as records the leader encodes: every batch ``encode_batch`` makes passes, and each way of being
malformed is refused by name, before anything is replicated."""

from __future__ import annotations

import struct

import crc32c
import pytest
from bombs import MiB, bomb_batch, inflated_section
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from raftlog.storage import ProducerRecord
from raftlog.storage.batch import (
    HEADER_SIZE,
    INFLATED_BYTES_MAX_DEFAULT,
    BatchFormatError,
    Compression,
    check_producer_batch,
    encode_batch,
    verify,
    with_log_append_time,
)
from raftlog.storage.batch_reads import decode_batch, record_rows, split_batches
from raftlog.storage.errors import InflatedTooLarge, InvalidRecord, RecordTooLarge

from .helpers import record_lists

LATEST = 2**62
producers = st.none() | st.tuples(
    st.integers(min_value=0, max_value=2**63 - 1), st.integers(min_value=0, max_value=2**31 - 1)
)


def zigzag(value: int) -> bytes:
    """A Kafka signed varint (zig-zag, 7 bits a byte)."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(offset_delta: int, value: bytes | None, key: bytes | None = None, ts_delta: int = 0) -> bytes:
    body = b"\x00" + zigzag(ts_delta) + zigzag(offset_delta)
    body += zigzag(-1) if key is None else zigzag(len(key)) + key
    body += zigzag(-1) if value is None else zigzag(len(value)) + value
    body += zigzag(0)  # no headers
    return zigzag(len(body)) + body


def raw_batch(
    records: list[bytes],
    *,
    count: int | None = None,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    first: int = 1000,
    max_ts: int | None = None,
    producer: tuple[int, int, int] = (-1, -1, -1),
    magic: int = 2,
    crc: int | None = None,
) -> bytes:
    """A RecordBatch v2 with a correct length and CRC around whatever records and header fields are given."""
    count = len(records) if count is None else count
    after_crc = struct.pack(
        ">hiqqqhii", attributes, count - 1 if last_offset_delta is None else last_offset_delta, first,
        first if max_ts is None else max_ts, *producer, count,
    ) + b"".join(records)  # fmt: skip
    checksum = crc32c.crc32c(after_crc) if crc is None else crc
    rest = struct.pack(">ibI", -1, magic, checksum) + after_crc  # leader epoch, magic, crc
    return struct.pack(">qi", 0, len(rest)) + rest


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=record_lists,
    now_ms=st.integers(min_value=0, max_value=2**42),
    producer=producers,
    codec=st.sampled_from(list(Compression)),
)
def test_every_batch_a_producer_encodes_passes(records, now_ms, producer, codec):
    assume(all(r.timestamp_ms is None or r.timestamp_ms >= 0 for r in records))
    producer_id, sequence = producer if producer is not None else (None, None)
    encoded = encode_batch(0, records, 0, now_ms, producer_id, sequence, compression=codec)
    assert check_producer_batch(encoded, LATEST) == verify(encoded)


def test_a_well_formed_raw_batch_passes():
    batch = raw_batch([record(0, b"a"), record(1, None, b"k", 5), record(2, b"c", None, -3)], max_ts=1005)
    header = check_producer_batch(batch, LATEST)
    assert (header.record_count, header.first_timestamp_ms, header.max_timestamp_ms) == (3, 1000, 1005)
    assert [r.value for r in decode_batch(batch).records] == [b"a", None, b"c"]


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (raw_batch([record(0, b"v")], magic=1), "magic 1"),
        (raw_batch([record(0, b"v")], attributes=6), "unknown compression codec 6"),
        (raw_batch([record(0, b"v")], attributes=0x10), "a transactional batch needs a producer id"),
        (raw_batch([record(0, b"v")], attributes=0x20), "a control batch is written by the transaction"),
        (raw_batch([record(0, b"v")], attributes=0x30), "a control batch is written by the transaction"),
        (raw_batch([record(0, b"v")], crc=7), "crc32c mismatch"),
        (
            raw_batch([record(0, b"v")], count=2, last_offset_delta=0),
            "records_count 2 with last_offset_delta 0",
        ),
        (raw_batch([record(0, b"v")], count=2), "do not decode"),  # the header says 2, one is there
        (raw_batch([record(0, b"v")], last_offset_delta=3), "records_count 1 with last_offset_delta 3"),
        (raw_batch([record(0, b"v"), record(5, b"w")]), "record 1 has offset delta 5"),
        (raw_batch([record(0, b"v")[:-3]]), "do not decode"),  # a record cut short
        (raw_batch([record(0, b"v", ts_delta=9)]), "must be >= 0"),  # max_timestamp below a record's
        (raw_batch([record(0, b"v")], first=-5), "must be >= 0"),
        (raw_batch([record(0, b"v")], first=LATEST + 1), f"<= {LATEST}"),
        (raw_batch([record(0, b"v")], producer=(7, -1, 0)), "none may be negative"),
        (raw_batch([record(0, b"v")], producer=(7, 0, -1)), "none may be negative"),
        (raw_batch([record(0, b"v")], producer=(-2, 0, 0)), "none may be negative"),
        (raw_batch([record(0, b"v")], attributes=1), "do not decode (gzip)"),  # says gzip, holds plain
        (raw_batch([record(0, b"v")])[:-1], "record batch: batch is"),
        (b"not a batch", "record batch: need 61 header bytes"),
    ],
)
def test_a_malformed_batch_is_refused_by_name(batch, message):
    with pytest.raises(InvalidRecord) as refused:
        check_producer_batch(batch, LATEST)
    assert message in str(refused.value)


@pytest.mark.parametrize("epoch_and_sequence", [(-1, 0), (-1, 4), (3, -1), (0, 0)])
def test_without_a_producer_id_the_epoch_and_sequence_are_not_looked_at(epoch_and_sequence):
    """As Kafka: a plain producer (aiokafka's default writes base_sequence 0) is accepted, and the batch is
    read as having no producer (no dedup)."""
    header = check_producer_batch(raw_batch([record(0, b"v")], producer=(-1, *epoch_and_sequence)), LATEST)
    assert (header.producer_id, header.producer_epoch, header.sequence) == (None, None, None)


def test_a_damaged_batch_is_refused():
    encoded = bytearray(encode_batch(0, [ProducerRecord(b"value")], 0, 1000))
    encoded[-1] ^= 0x01
    with pytest.raises(InvalidRecord, match="crc32c mismatch"):
        check_producer_batch(bytes(encoded), LATEST)


def test_a_log_append_time_batch_is_refused_the_leader_stamps_it():
    batch = with_log_append_time(encode_batch(0, [ProducerRecord(b"v", timestamp_ms=7)], 0, 0), 5)
    with pytest.raises(InvalidRecord, match="LogAppendTime is stamped by the leader"):
        check_producer_batch(batch, LATEST)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_a_batch_whose_records_inflate_past_the_bound_is_refused_as_too_large(codec):
    """A decompression bomb (one record of 64 MiB of zeros, a few KiB to 3 MiB compressed) is refused
    at the bound it is checked with, and at the default bound; exactly at the bound it passes."""
    bomb = bomb_batch(codec, 64 * MiB, 1000)
    section_bytes = len(inflated_section(64 * MiB))
    assert check_producer_batch(bomb, LATEST, section_bytes).record_count == 1
    for bound in (section_bytes - 1, 16 * MiB):
        with pytest.raises(InflatedTooLarge) as refused:
            check_producer_batch(bomb, LATEST, bound)
        assert (refused.value.limit_bytes, refused.value.compressed_bytes) == (bound, len(bomb) - HEADER_SIZE)
        assert isinstance(refused.value, RecordTooLarge), "both doors answer it as record too large"
        assert f"inflate past {bound} bytes" in str(refused.value)
    huge = bomb_batch(codec, 128 * MiB if codec is Compression.SNAPPY else 1024 * MiB, 1000)
    with pytest.raises(InflatedTooLarge, match=f"inflate past {INFLATED_BYTES_MAX_DEFAULT} bytes"):
        check_producer_batch(huge, LATEST)


def test_rows_of_a_stored_batch_are_its_records_in_order():
    records = [ProducerRecord(b"a", key=b"k", headers=(("h", b"1"),), timestamp_ms=7), ProducerRecord(None)]
    stored = encode_batch(40, records, 3, 9)
    header, rows = record_rows(stored)
    assert header == verify(stored)
    from_rows = [
        (header.base_offset + i, ts, key, value, tuple(headers))
        for i, (ts, key, value, headers) in enumerate(rows)
    ]
    assert from_rows == [
        (r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in decode_batch(stored).records
    ]
    with pytest.raises(BatchFormatError):
        record_rows(stored[:-1] + bytes([stored[-1] ^ 1]))
    assert [verify(b) for b in split_batches(stored + stored)] == [header, header]
    with pytest.raises(BatchFormatError):
        list(split_batches(stored + stored[:70]))
