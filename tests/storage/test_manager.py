"""LogManager: the background group-commit flusher and retention, driven by a fake clock."""

from __future__ import annotations

import os
import threading
import time

import pytest

from raftlog.storage import LogConfig, ProducerRecord
from raftlog.storage.errors import InvalidConfig, StorageUnavailable
from raftlog.storage.manager import LogManager

from .helpers import open_descriptors_under


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


def test_idle_logs_close_their_files_and_the_busiest_stay_open(tmp_path: str) -> None:
    manager = LogManager(str(tmp_path), clock=FakeClock(), handles_idle_s=10.0, open_logs_max=2)
    logs = [manager.open_log(f"t-{i}", LogConfig()) for i in range(5)]
    for i, log in enumerate(logs):
        log.append([ProducerRecord(b"x")])
        log.used_at = 100.0 + i  # used in this order: t-4 last
    assert all(open_descriptors_under(os.path.join(tmp_path, f"t-{i}")) == 3 for i in range(5))
    assert manager.sweep_handles(105.0) == 3, "beyond open_logs_max, the least recently used close"
    assert [open_descriptors_under(os.path.join(tmp_path, f"t-{i}")) for i in range(5)] == [0, 0, 0, 3, 3]
    assert manager.sweep_handles(113.5) == 1, "t-3 was unused for 10 s"
    assert [log.handles_open for log in logs] == [False, False, False, False, True]
    assert [r.value for r in logs[0].read(0, 1 << 20)] == [b"x"]  # reopened on use
    logs[0].append([ProducerRecord(b"y")])
    assert logs[0].handles_open and logs[0].end_offset == 2
    manager.close()


def test_a_log_in_use_is_left_for_the_next_sweep(tmp_path: str) -> None:
    manager = LogManager(str(tmp_path), clock=FakeClock(), handles_idle_s=1.0)
    log = manager.open_log("t-0", LogConfig())
    log.used_at = 0.0
    held, done = threading.Event(), threading.Event()

    def in_use() -> None:  # another thread in the middle of an append or a read
        with log._lock:
            held.set()
            done.wait(5)

    user = threading.Thread(target=in_use)
    user.start()
    assert held.wait(5)
    try:
        assert manager.sweep_handles(100.0) == 0
    finally:
        done.set()
        user.join()
    assert log.handles_open
    assert manager.sweep_handles(100.0) == 1
    manager.close()


def test_closing_the_manager_closes_every_log_durably_and_several_at_once(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log's close is fsyncs, so the manager closes logs on several threads (a node's restart waited
    for thousands of them one after another). Two closes must be under way together for either to
    finish: closed one after another, the barrier's wait would time out and fail the close it holds."""
    from raftlog.storage import log as log_module

    manager = LogManager(str(tmp_path), clock=FakeClock())
    logs = {f"orders-{i}": manager.open_log(f"orders-{i}", GROUP) for i in range(12)}
    for name, log in logs.items():
        log.append([ProducerRecord(name.encode())])
    together = threading.Barrier(2, timeout=30)
    arrived: list[str] = []
    arriving = threading.Lock()
    close = log_module.Log.close

    def close_with_company(self: log_module.Log, seal: bool = True) -> None:
        with arriving:
            arrived.append(threading.current_thread().name)
            first_two = len(arrived) <= 2
        if first_two:  # the first two closes meet; the rest go on alone
            together.wait()
        close(self, seal)

    monkeypatch.setattr(log_module.Log, "close", close_with_company)
    manager.close()
    assert len(arrived) == len(logs) and all(name.startswith("log-close") for name in arrived), arrived
    monkeypatch.undo()

    again = LogManager(str(tmp_path), clock=FakeClock())
    for name in logs:  # every record was made durable by the close, whichever thread closed its log
        reopened = again.open_log(name, GROUP)
        assert reopened.end_offset == reopened.durable_end_offset == 1, name
    again.close()


def test_a_new_log_is_marked_at_the_fence_level_once_and_an_older_one_is_fenced(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log the manager creates while the node's level is 2 gets its format marker at level 2, written
    (and synced) once; a log of level 1 found on disk is fenced to 2 when opened."""
    from raftlog.storage import log_format

    written: list[tuple[str, int]] = []
    write_marker = log_format.write_marker

    def recorded(directory: str, level: int = 1) -> None:
        written.append((os.path.basename(directory), level))
        write_marker(directory, level)

    monkeypatch.setattr(log_format, "write_marker", recorded)
    older = LogManager(str(tmp_path))
    older.open_log("old-0", LogConfig())
    older.close()
    manager = LogManager(str(tmp_path), fence_level=lambda: 2)
    try:
        manager.open_log("new-0", LogConfig())
        manager.open_log("old-0", LogConfig())
    finally:
        manager.close()
    assert written == [("old-0", 1), ("new-0", 2), ("old-0", 2)]
    for name in ("new-0", "old-0"):
        assert log_format.marker_level(log_format.read_marker(os.path.join(str(tmp_path), name)) or "") == 2


def test_logs_open_side_by_side_and_a_name_being_opened_is_opened_once(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two names open at the same time (both inside ``Log.open`` at once: their files and syncs outside
    the manager's lock); a second caller of a name being opened waits and gets the same log, and after a
    failed open the waiting caller opens it itself."""
    from raftlog.storage import manager as manager_module

    real_open = manager_module.Log.open
    both_inside = threading.Barrier(2, timeout=10)
    release = {name: threading.Event() for name in ("same-0", "fails-0")}
    entered = {name: threading.Event() for name in release}
    calls: list[str] = []

    def opening(directory: str, *args: object) -> object:
        name = os.path.basename(directory)
        calls.append(name)
        if name in ("a-0", "b-0"):
            both_inside.wait()  # a BrokenBarrierError unless the other name is being opened meanwhile
        if name in release:
            entered[name].set()
            assert release[name].wait(10)
            if name == "fails-0" and calls.count(name) == 1:
                raise OSError("the first open of fails-0 fails")
        return real_open(directory, *args)

    monkeypatch.setattr(manager_module.Log, "open", opening)
    manager = LogManager(str(tmp_path))
    try:
        got: dict[str, list[object]] = {}

        def open_in_thread(name: str) -> threading.Thread:
            def run() -> None:
                try:
                    got.setdefault(name, []).append(manager.open_log(name, LogConfig()))
                except OSError as error:
                    got.setdefault(name, []).append(error)

            thread = threading.Thread(target=run)
            thread.start()
            return thread

        threads = [open_in_thread("a-0"), open_in_thread("b-0")]
        for name in release:
            threads.append(open_in_thread(name))
            assert entered[name].wait(10), f"the first caller of {name} inside Log.open"
            threads.append(open_in_thread(name))  # waits for the first
        for event in release.values():
            event.set()
        for thread in threads:
            thread.join(20)
        assert not any(t.is_alive() for t in threads)
        assert [type(log).__name__ for name in ("a-0", "b-0") for log in got[name]] == ["Log", "Log"]
        first, second = got["same-0"]
        assert first is second and calls.count("same-0") == 1
        assert sorted(type(outcome).__name__ for outcome in got["fails-0"]) == ["Log", "OSError"]
        assert calls.count("fails-0") == 2 and manager.get("fails-0") is not None
    finally:
        manager.close()
