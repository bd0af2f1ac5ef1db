"""A partition log on a full disk (raftlog.storage.space, docs/decisions/0014): an append refused for want
of room leaves nothing behind and fails nothing, reads go on, retention goes on (and frees room), and the
same append goes through once there is room. On a real small ext4 where one can be mounted, else with the
refusal injected where each write happens."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from small_disk import small_disk

from jepsen import disks
from raftlog.storage import Log
from raftlog.storage.errors import DiskFull, StorageUnavailable
from raftlog.storage.index import _EntryFile
from raftlog.storage.inspect import verify_directory
from raftlog.storage.space import HOLD_S, DiskSpace

from .helpers import START_MS, FakeClock, file_contents, make_records, read_all, small_config, snapshot


def test_a_full_disk_refuses_appends_keeps_reads_and_retention_and_takes_them_again(tmp_path: Path) -> None:
    with small_disk(tmp_path, 16) as mount:
        directory = os.path.join(mount, "t-0.1")
        config = small_config(segment_bytes=256 << 10, index_interval_bytes=4096, retention_bytes=1 << 20)
        log = Log.open(directory, config, clock=FakeClock())
        batch = make_records(50, "r", size=1000)  # ~50 KB a batch: a few rolls before the disk is full
        for _ in range(40):
            log.append(batch)
        kept = snapshot(log)
        disks.fill(mount)
        with pytest.raises(DiskFull):
            for _ in range(100):  # one batch may still fit in a segment's last, half-used block
                log.append(batch)
                kept = snapshot(log)
        assert snapshot(log) == kept  # reads go on, and the refused batch left nothing
        assert verify_directory(directory).ok
        assert log.space.full() is not None and log.space.refusals >= 1

        assert log.apply_retention(0) > 0  # retention is not refused: it frees room
        assert log.log_start_offset > kept.log_start_offset
        end = log.end_offset
        assert log.append(batch).base_offset == end  # the room retention freed takes the same batch

        disks.fill(mount)
        with pytest.raises(DiskFull):
            for _ in range(100):
                log.append(batch)
        end = log.end_offset
        disks.empty(mount)
        for _ in range(5):
            log.append(batch)
        assert log.end_offset == end + 5 * 50
        records = read_all(log)
        log.close()
        report = verify_directory(directory)
        assert report.ok, report.problems
        with Log.open(directory, config, clock=FakeClock()) as reopened:
            assert read_all(reopened) == records


def test_no_room_for_an_index_entry_cuts_the_batch_back_too(tmp_path: Path, monkeypatch) -> None:
    log = Log.open(
        str(tmp_path), small_config(segment_bytes=1 << 20, index_interval_bytes=64), clock=FakeClock()
    )
    for i in range(5):
        log.append(make_records(3, f"b{i}", size=40))  # every batch past 64 bytes is indexed
    before, files = snapshot(log), file_contents(str(tmp_path))
    real_append = _EntryFile.append
    calls = []

    def time_index_full(self: _EntryFile, first: int, second: int) -> None:
        calls.append(self.path)
        if self.path.endswith(".timeindex"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, first, second)

    monkeypatch.setattr(_EntryFile, "append", time_index_full)
    with pytest.raises(DiskFull):
        log.append(make_records(3, "lost", size=40, timestamp_ms=START_MS + 10**9))  # a new max timestamp
    monkeypatch.undo()
    assert [os.path.splitext(p)[1] for p in calls] == [".index", ".timeindex"]
    assert file_contents(str(tmp_path)) == files  # data and offset index cut back as well
    assert snapshot(log) == before
    assert log.append(make_records(3, "again", size=40)).base_offset == before.end_offset
    log.close()
    assert verify_directory(str(tmp_path)).ok


def test_no_room_for_a_new_segment_keeps_the_active_one(tmp_path: Path, monkeypatch) -> None:
    log = Log.open(str(tmp_path), small_config(segment_bytes=1024), clock=FakeClock())
    log.append(make_records(3, "a", size=300))
    before, segments = snapshot(log), log.segment_count
    real_open = os.open

    def no_new_files(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if flags & os.O_CREAT and not os.path.exists(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", no_new_files)
    with pytest.raises(DiskFull):
        log.append(make_records(3, "b", size=300))  # past segment.bytes: it must roll first
    monkeypatch.undo()
    assert log.segment_count == segments and snapshot(log) == before
    assert not [name for name in os.listdir(tmp_path) if name.startswith(f"{before.end_offset:020d}")]
    assert log.append(make_records(3, "b", size=300)).base_offset == before.end_offset
    assert log.segment_count == segments + 1
    log.close()
    assert verify_directory(str(tmp_path)).ok


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO])
def test_a_failed_fsync_fails_the_log_whatever_its_errno(tmp_path: Path, monkeypatch, error: int) -> None:
    """ENOSPC at fsync time (delayed allocation) is not retried: the kernel may have dropped the pages."""
    log = Log.open(str(tmp_path), small_config(flush_mode="always"), clock=FakeClock())
    log.append(make_records(2, "kept"))

    def failing_fdatasync(fd: int) -> None:
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    with pytest.raises(StorageUnavailable) as raised:
        log.append(make_records(2, "unsure"))
    monkeypatch.undo()
    assert not isinstance(raised.value, DiskFull)
    with pytest.raises(StorageUnavailable, match="failed earlier"):
        log.append(make_records(1, "refused"))


def test_the_space_of_a_disk_is_full_until_a_write_gets_through_and_a_moment_passes(tmp_path: Path) -> None:
    space = DiskSpace()
    assert space.full() is None
    refusal = DiskFull(str(tmp_path), "writing: no space")
    space.refused(refusal)
    assert space.full() is refusal
    space.wrote()
    assert space.full() is refusal  # a write got through, but the last refusal is too recent
    later = time.monotonic() + HOLD_S
    assert space.full(now=later) is None
    space.refused(refusal)
    assert space.full(now=later + HOLD_S) is refusal  # nothing got through since the last refusal
    assert space.probe(str(tmp_path)) and not os.listdir(tmp_path)  # room: noted, the scratch file gone
    assert space.full(now=later + HOLD_S) is None
    assert space.refusals == 2


def test_probing_a_full_disk_finds_no_room(tmp_path: Path) -> None:
    with small_disk(tmp_path, 16) as mount:
        space = DiskSpace()
        space.refused(DiskFull(mount, "no space"))
        later = time.monotonic() + HOLD_S
        disks.fill(mount)
        assert not space.probe(mount) and space.full(now=later) is not None
        disks.empty(mount)
        assert space.probe(mount) and space.full(now=later) is None
