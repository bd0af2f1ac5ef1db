"""A fetch answer's batches read back: a concatenation of stored batches (``batch``'s format) split,
verified and decoded for readers, whole records or rows made in C, without a control batch or the
records of aborted transactions a read_committed reader leaves out, as Kafka's consumer leaves them.
``batch`` writes and checks one batch; this reads many."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from raftlog.storage import _records  # type: ignore[attr-defined]
from raftlog.storage.batch import (
    _CONTROL,
    _TRANSACTIONAL,
    INFLATED_BYTES_CEILING,
    BatchFormatError,
    BatchHeader,
    Record,
    RecordBatch,
    TimestampType,
    _collector_paused,
    _fixed_timestamp,
    _section,
    decode_header,
    decode_records,
    verify,
)


def record_rows(batch: bytes | memoryview) -> tuple[BatchHeader, list[Any]]:
    """Verify a batch (framing, CRC) and return its header and its records as rows ``(timestamp_ms, key,
    value, headers)``, ``headers`` a tuple of (key, value) pairs; in a producer's batch record i has
    offset ``header.base_offset + i`` (a batch compaction rewrote needs ``decode_records``). For bulk
    readers that want columns: a plain tuple per record, made in C
    (a LogAppendTime batch's records all carry its ``max_timestamp_ms``)."""
    header = verify(batch)
    return header, _rows(batch, header)


def _rows(batch: bytes | memoryview, header: BatchHeader) -> list[Any]:
    """A verified batch's records as rows ``(timestamp_ms, key, value, headers)``, made in C."""
    section = _section(batch, header, INFLATED_BYTES_CEILING)
    try:
        with _collector_paused():
            rows: list[Any] = _records.rows(
                section, header.record_count, header.span, header.first_timestamp_ms, _fixed_timestamp(header)
            )
            return rows
    except ValueError as exc:
        raise BatchFormatError(f"records do not decode ({header.compression.name.lower()}): {exc}") from exc


def split_batches(data: bytes | memoryview) -> Iterator[bytes]:
    """The batches of a concatenation of whole batches (a fetch answer). Raises BatchFormatError on a torn
    one; checks framing only (``decode_batch`` checks each CRC)."""
    position = 0
    while position < len(data):
        header = decode_header(data, position)
        end = position + header.size_bytes
        if end > len(data):
            raise BatchFormatError(f"batch at byte {position} runs past the end of the data")
        yield bytes(data[position:end])
        position = end


def batches_end(data: bytes | memoryview) -> int | None:
    """The end offset of the last of a concatenation of whole batches (None: no batch); framing only."""
    end = None
    position = 0
    while position < len(data):
        header = decode_header(data, position)
        end, position = header.end_offset, position + header.size_bytes
    return end


def decode_batch(batch: bytes | memoryview) -> RecordBatch:
    """Verify and fully decode one batch."""
    header = verify(batch)
    return RecordBatch(header, decode_records(batch, header))


def records_from(data: bytes, offset: int, aborted: Sequence[tuple[int, int]] | None = None) -> list[Record]:
    """The producers' records of a concatenation of stored batches (a fetch answer) from ``offset`` on:
    the first batch may begin before it, and control batches (transaction markers) hold none. With
    ``aborted`` (a read_committed fetch's aborted transactions, (producer id, first offset) each) the
    records of those transactions are left out, as Kafka's consumer leaves them out: a producer's batches
    from the transaction's first offset up to its ABORT marker. Framing and every CRC are checked
    (BatchFormatError)."""
    records: list[Record] = []
    for batch_records in records_by_batch(data, offset, aborted):
        records.extend(batch_records)
    return records


def records_by_batch(
    data: bytes | memoryview, offset: int, aborted: Sequence[tuple[int, int]] | None = None
) -> Iterator[list[Record]]:
    """``records_from``'s records a batch at a time (none for a batch that holds none), so that a large
    answer is decoded and rendered in parts, never all its records at once."""
    for batch, header in _readable_batches(data, aborted):
        decoded = decode_records(batch, header)
        if decoded and decoded[0].offset >= offset:
            yield list(decoded)
        else:
            yield [r for r in decoded if r.offset >= offset]


class BatchRows(NamedTuple):
    """A batch's records from an offset on as plain rows ``(timestamp_ms, key, value, headers)`` (made in
    C, no ``Record`` each), with their offsets and the batch's timestamp type."""

    offsets: Sequence[int]
    timestamp_type: TimestampType
    rows: list[Any]


def rows_by_batch(
    data: bytes | memoryview, offset: int, aborted: Sequence[tuple[int, int]] | None = None
) -> Iterator[BatchRows]:
    """``records_by_batch``'s records as ``BatchRows``, for readers that write each record's fields (the
    HTTP door's JSON answers): the same batches, the same records, read by the C reader's rows."""
    for batch, header in _readable_batches(data, aborted):
        kind = header.timestamp_type
        if header.record_count != header.span:  # compaction left gaps: each record's own offset
            decoded = [r for r in decode_records(batch, header) if r.offset >= offset]
            rows = [(r.timestamp_ms, r.key, r.value, r.headers) for r in decoded]
            yield BatchRows([r.offset for r in decoded], kind, rows)
            continue
        rows = _rows(batch, header)
        skip = max(0, offset - header.base_offset)
        yield BatchRows(
            range(header.base_offset + skip, header.end_offset), kind, rows[skip:] if skip else rows
        )


def _readable_batches(
    data: bytes | memoryview, aborted: Sequence[tuple[int, int]] | None
) -> Iterator[tuple[bytes, BatchHeader]]:
    """The batches of a fetch answer that hold producers' records for this reader, each verified
    (framing, CRC): no control batch (transaction markers), and none of the ``aborted`` transactions
    (a read_committed read's (producer id, first offset) each): a producer's batches from the
    transaction's first offset up to its ABORT marker, as Kafka's consumer leaves them out."""
    pending = sorted(aborted or (), key=lambda row: row[1])
    aborting: set[int] = set()
    for batch in split_batches(data):
        header = verify(batch)
        while pending and pending[0][1] <= header.end_offset - 1:
            aborting.add(pending.pop(0)[0])
        if header.attributes & _CONTROL:
            if header.producer_id in aborting and _is_abort_marker(batch):
                aborting.discard(header.producer_id)
            continue
        if header.attributes & _TRANSACTIONAL and header.producer_id in aborting:
            continue
        yield batch, header


def _is_abort_marker(batch: bytes | memoryview) -> bool:
    """A control batch's one record's key is (version, type): type 0 is ABORT."""
    records = decode_records(batch, verify(batch))
    key = records[0].key if records else None
    return key is not None and len(key) >= 4 and key[2:4] == b"\x00\x00"
