"""Writeback is started every few MiB of a segment's unflushed appends (so a roll's fsync stays short),
over contiguous ranges, and the hint itself leaves the data as written."""

from __future__ import annotations

import itertools
import os
import pathlib

import pytest

import raftlog.storage.segment as segment_module
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch
from raftlog.storage.writeback import AVAILABLE, start_writeback

from .helpers import FakeClock


def test_appends_start_writeback_of_every_few_mib_in_order(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranges: list[tuple[int, int]] = []
    monkeypatch.setattr(
        segment_module, "start_writeback", lambda fd, offset, n: bool(ranges.append((offset, n)))
    )
    clock = FakeClock()
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1), clock)
    # as a replica applies committed Raft entries: no fsync per append (ADR 0006)
    batch = encode_batch(0, [ProducerRecord(b"v" * 1000) for _ in range(1000)], 1, clock())
    try:
        for _ in range(40):  # ~40 MB in 1 MB batches
            log.append_prepared(batch, 1, durable_elsewhere=True, checked_records=True)
        assert len(ranges) >= 8, ranges
        assert ranges[0][0] == 0
        for (offset, length), (next_offset, _) in itertools.pairwise(ranges):
            assert length >= segment_module.WRITEBACK_BYTES
            assert next_offset == offset + length, ranges  # contiguous: nothing skipped, nothing twice
        written = ranges[-1][0] + ranges[-1][1]
        log.flush()  # an fsync covers everything: the next range starts where the file ends
        for _ in range(5):
            log.append_prepared(batch, 1, durable_elsewhere=True, checked_records=True)
        assert ranges[-1][0] >= written
    finally:
        log.close()


@pytest.mark.skipif(not AVAILABLE, reason="sync_file_range is Linux-only")
def test_the_hint_succeeds_and_leaves_the_bytes_as_written(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "data"
    payload = os.urandom(3 * 1024 * 1024)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, payload)
        assert start_writeback(fd, 0, len(payload))
        assert not start_writeback(fd, 0, 0)  # nothing to ask for
    finally:
        os.close(fd)
    assert path.read_bytes() == payload
