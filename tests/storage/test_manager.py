"""LogManager: the background group-commit flusher and retention, driven by a fake clock."""

from __future__ import annotations

import os
import time

import pytest

from raftlog.storage import LogConfig, ProducerRecord
from raftlog.storage.errors import InvalidConfig, StorageUnavailable
from raftlog.storage.manager import LogManager


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


GROUP = LogConfig(flush_mode="group", flush_interval_ms=50, flush_bytes=1 << 30)


def test_group_commit_flushes_only_when_due(tmp_path: str) -> None:
    clock = FakeClock()
    manager = LogManager(str(tmp_path), clock=clock)
    log = manager.open_log("orders-0", GROUP)
    log.append([ProducerRecord(b"a")])
    assert log.durable_end_offset == 0, "group mode must not fsync inline below flush.bytes"
    clock.now_ms += 10
    assert manager.run_once(clock.now_ms) == (0, 0)
    assert log.durable_end_offset == 0
    clock.now_ms += 50
    assert manager.run_once(clock.now_ms) == (1, 0)
    assert log.durable_end_offset == 1
    manager.close()


def test_always_mode_is_durable_on_return_and_never_needs_the_flusher(tmp_path: str) -> None:
    manager = LogManager(str(tmp_path), clock=FakeClock())
    log = manager.open_log("orders-0", LogConfig())
    log.append([ProducerRecord(b"a"), ProducerRecord(b"b")])
    assert log.durable_end_offset == log.end_offset == 2
    assert manager.run_once(2_000_000) == (0, 0)
    manager.close()


def test_retention_runs_at_its_interval_and_keeps_the_active_segment(tmp_path: str) -> None:
    clock = FakeClock()
    config = LogConfig(segment_bytes=1024, retention_ms=60_000, retention_bytes=-1)
    manager = LogManager(str(tmp_path), clock=clock, retention_check_interval_ms=5_000)
    log = manager.open_log("orders-0", config)
    for i in range(40):
        log.append([ProducerRecord(b"x" * 100, timestamp_ms=clock.now_ms + i)])
    segments_before = log.segment_count
    assert segments_before > 2
    clock.now_ms += 120_000  # everything is now older than retention.ms
    assert manager.run_once(clock.now_ms - 120_000 + 1_000) == (0, 0), "retention interval not reached yet"
    _, deleted = manager.run_once(clock.now_ms)
    assert deleted == segments_before - 1
    assert log.segment_count == 1 and log.end_offset == 40
    assert log.log_start_offset == log.end_offset - (log.end_offset - log.log_start_offset)
    manager.close()


def test_background_thread_flushes_without_being_asked(tmp_path: str) -> None:
    manager = LogManager(str(tmp_path))
    log = manager.open_log("orders-0", GROUP)
    manager.start()
    try:
        log.append([ProducerRecord(b"a")])
        deadline = time.monotonic() + 10
        while log.durable_end_offset < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.durable_end_offset == 1
    finally:
        manager.close()


def test_a_failing_log_does_not_stop_the_others(tmp_path: str, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    manager = LogManager(str(tmp_path), clock=clock)
    broken = manager.open_log("broken-0", GROUP)
    healthy = manager.open_log("healthy-0", GROUP)
    broken.append([ProducerRecord(b"a")])
    healthy.append([ProducerRecord(b"b")])
    active = broken._segments[-1]
    os.close(active._fd)  # the disk goes away under one log: its fsync fails
    active._fd = os.open(os.devnull, os.O_RDONLY)
    clock.now_ms += 1_000
    flushed, _ = manager.run_once(clock.now_ms)
    assert flushed == 1
    assert healthy.durable_end_offset == 1
    assert broken.durable_end_offset == 0, "a failed fsync must never count as durable"
    assert "broken-0" in caplog.text
    with pytest.raises(StorageUnavailable):
        broken.append([ProducerRecord(b"c")])
    manager.close()


def test_reopening_by_name_returns_the_same_log_and_names_are_validated(tmp_path: str) -> None:
    manager = LogManager(str(tmp_path))
    assert manager.open_log("t-0", LogConfig()) is manager.open_log("t-0", LogConfig())
    for bad in ("../escape", "a/b", "", "..", "t-0\n"):
        with pytest.raises(InvalidConfig):
            manager.open_log(bad, LogConfig())
    manager.delete_log("t-0")
    assert not os.path.exists(os.path.join(str(tmp_path), "t-0"))
    manager.close()
