"""Reading format v1 (``legacy_batch``) against batches an older raftlog really wrote: the committed
fixture's logs hold exactly the records its node answered over HTTP, and the tests' v1 writer
(``legacy_v1``) writes those very bytes, so tests that build v1 logs with it build what a node left."""

from __future__ import annotations

import pytest

from raftlog.storage import Record, legacy_batch
from raftlog.storage.batch_reads import decode_batch

from .legacy_fixture import FIXTURE, LOGS, expected_rows, rows_of
from .legacy_v1 import encode_v1


def _segments(topic: str, partition: int) -> list[bytes]:
    directory = FIXTURE / "n1" / "logs" / LOGS[(topic, partition)]
    return [path.read_bytes() for path in sorted(directory.glob("*.log"))]


def _records(batch: legacy_batch.LegacyBatch) -> list[Record]:
    return [
        Record(batch.base_offset + i, r.timestamp_ms or 0, r.key, r.value, r.headers)
        for i, r in enumerate(batch.records)
    ]


@pytest.mark.parametrize(("topic", "partition"), sorted(LOGS))
def test_the_fixture_logs_hold_what_the_old_node_answered(topic: str, partition: int) -> None:
    records = []
    for data in _segments(topic, partition):
        batches = list(legacy_batch.batches(data))
        assert batches and batches[-1][0] + batches[-1][1].size_bytes == len(data)  # whole batches only
        for _, batch in batches:
            records.extend(_records(batch))
    assert rows_of(records) == expected_rows(topic, partition)


def test_the_v1_writer_of_the_tests_writes_the_old_node_s_bytes() -> None:
    checked = 0
    for topic, partition in sorted(LOGS):
        for data in _segments(topic, partition):
            for position, batch in legacy_batch.batches(data):
                again = encode_v1(
                    batch.base_offset, batch.records, batch.term, batch.producer_id, batch.sequence
                )
                assert again == data[position : position + batch.size_bytes]
                checked += 1
    assert checked > 50


def test_convert_keeps_offsets_term_producer_and_records() -> None:
    idempotent = [
        (data, position, batch)
        for data in _segments("orders", 0)
        for position, batch in legacy_batch.batches(data)
        if batch.producer_id is not None
    ]
    assert len(idempotent) == 3  # two requests and one more after the snapshot; the retry appended nothing
    for data, position, legacy in idempotent:
        converted = decode_batch(legacy_batch.convert(data[position : position + legacy.size_bytes]))
        header = converted.header
        assert (header.base_offset, header.term) == (legacy.base_offset, legacy.term)
        assert (header.producer_id, header.producer_epoch, header.sequence) == (
            legacy.producer_id,
            0,
            legacy.sequence,
        )
        assert rows_of(converted.records) == rows_of(_records(legacy))
