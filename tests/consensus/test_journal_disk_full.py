"""FileJournal on a full disk (docs/decisions/0014): a sync refused for want of room, at the write or at
the fdatasync, makes nothing durable and leaves no torn record (a crash right after recovers exactly what
was durable), keeps the records in memory and writes them again from that copy once there is room; a
term and vote that cannot be persisted change nothing; an I/O error still raises. A "crash" is opening a
second journal on the same directory without closing the first."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path

import pytest
from disk_refusal import Refusal, after_space_retry_time
from small_disk import small_disk

from jepsen import disks
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.journal_files import read_term_and_vote
from raftlog.storage.errors import DiskFull


def entries_of(journal: FileJournal) -> list[tuple[bytes, int, int]]:
    return list(journal[0 : len(journal)])


def fill(journal: FileJournal, first: int, count: int, term: int = 1, size: int = 1000) -> None:
    for index in range(first, first + count):
        journal.add(index.to_bytes(4, "big") * (size // 4), index, term)


def crashed_copy(directory: Path, into: Path) -> FileJournal:
    """What a crash now would leave: the files as they are, opened by a new journal."""
    shutil.copytree(directory, into)
    return FileJournal(str(into))


@pytest.mark.parametrize("direct_io", [True, False])
@pytest.mark.parametrize("at", ["write", "sync"])
def test_a_refused_sync_keeps_its_records_and_writes_them_again_from_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_io: bool, at: str
) -> None:
    directory = tmp_path / "journal"
    journal = FileJournal(str(directory), direct_io=direct_io)
    fill(journal, 1, 5)
    journal.sync()
    durable = entries_of(journal)
    fill(journal, 6, 10)  # 10 KB: the write may go half through before the refusal
    refusal = Refusal(monkeypatch, str(directory), (at,))

    journal.sync()  # no exception: nothing durable, the records wait
    assert refusal.refused and journal.durable_index == 5
    assert journal.disk_full is not None and journal.space_retry_at is not None
    assert journal.sync_in_flight and journal.sync_pending
    assert entries_of(crashed_copy(directory, tmp_path / "crash1")) == durable  # no torn record left

    fill(journal, 16, 2)  # added while the refused ones wait: they go after them
    refused = len(refusal.refused)
    journal.sync()  # before the retry time: nothing is tried
    assert len(refusal.refused) == refused and journal.durable_index == 5

    refusal.written.clear()
    refusal.refusing = False
    after_space_retry_time(journal)
    journal.sync()
    assert journal.durable_index == 17 and journal.space_retry_at is None and not journal.sync_in_flight
    rewritten = b"".join(data for _, data in refusal.written)
    assert (6).to_bytes(4, "big") * 250 in rewritten  # written again from the journal's own copy
    expected = entries_of(journal)
    assert [index for _, index, _ in expected] == list(range(1, 18))
    assert entries_of(crashed_copy(directory, tmp_path / "crash2")) == expected
    journal.close()
    assert entries_of(FileJournal(str(directory))) == expected


@pytest.mark.parametrize("direct_io", [True, False])
def test_records_half_written_then_dropped_never_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_io: bool
) -> None:
    """The refused write went half through, then a new leader's log dropped those records: what reaches
    the disk later must not leave them behind it, valid, for recovery to take back."""
    directory = tmp_path / "journal"
    journal = FileJournal(str(directory), direct_io=direct_io)
    fill(journal, 1, 5)
    journal.sync()
    fill(journal, 6, 10)
    refusal = Refusal(monkeypatch, str(directory), ("write",))
    journal.sync()
    assert refusal.refused[0] == "half"  # 4 KiB of records 6.. reached the file before the refusal
    journal.deleteEntriesFrom(7)  # index 8 on: a new leader's log differs there
    refusal.refusing = False
    after_space_retry_time(journal)
    journal.sync()
    assert journal.durable_index == 7
    assert [index for _, index, _ in entries_of(crashed_copy(directory, tmp_path / "crash"))] == list(
        range(1, 8)
    )
    fill(journal, 8, 2, term=2)
    journal.sync()
    expected = entries_of(journal)
    assert [(index, term) for _, index, term in expected] == [(i, 1) for i in range(1, 8)] + [(8, 2), (9, 2)]
    journal.close()
    assert entries_of(FileJournal(str(directory))) == expected


def test_a_refused_sync_on_a_sync_thread_is_taken_back_without_raising(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 3)
    refusal = Refusal(monkeypatch, str(tmp_path), ("sync",))
    job = journal.begin_sync()
    assert job is not None
    job.hand_off(lambda: None)
    worker = threading.Thread(target=job.run)
    worker.start()
    worker.join()
    assert journal.finish_sync() and journal.durable_index == 0 and journal.sync_in_flight
    refusal.refusing = False
    after_space_retry_time(journal)
    job = journal.begin_sync()
    assert job is not None
    job.run()
    assert journal.finish_sync() and journal.durable_index == 3


def test_no_room_for_a_new_segment_keeps_appending_to_the_last(tmp_path: Path, monkeypatch) -> None:
    journal = FileJournal(str(tmp_path), segment_bytes_max=4096)
    fill(journal, 1, 3)
    journal.sync()
    refusal = Refusal(monkeypatch, str(tmp_path), ("write", "sync"))
    fill(journal, 4, 10)  # past 4 KiB: every add would roll, but the refused records hold it back
    assert sorted(os.listdir(tmp_path)) == ["segment-0000000001.log", "state"]
    refusal.refusing = False
    after_space_retry_time(journal)
    journal.sync()
    fill(journal, 14, 10)  # rolls again now that its records are synced
    journal.sync()
    assert len([name for name in os.listdir(tmp_path) if name.startswith("segment-")]) > 1
    expected = entries_of(journal)
    journal.close()
    assert entries_of(FileJournal(str(tmp_path))) == expected


def test_a_term_and_vote_that_cannot_be_persisted_change_nothing(tmp_path: Path, monkeypatch) -> None:
    journal = FileJournal(str(tmp_path))
    journal.setCurrentTerm(3, "a")
    refusal = Refusal(monkeypatch, str(tmp_path), ("write",))
    with pytest.raises(DiskFull):
        journal.setCurrentTerm(4, "b")
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId()) == (3, "a")
    assert read_term_and_vote(str(tmp_path)) == (3, "a")
    refusal.refusing = False
    journal.setCurrentTerm(4, "b")
    assert read_term_and_vote(str(tmp_path)) == (4, "b")


def test_an_io_error_still_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 2)

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="Input/output"):
        journal.sync()
    assert journal.durable_index == 0 and journal.disk_full is None


def test_a_journal_on_a_small_disk_that_fills_and_empties(tmp_path: Path) -> None:
    """Direct I/O on a real ext4 filled with a ballast file: the refusals come from the kernel."""
    with small_disk(tmp_path, 16) as mount:
        directory = Path(mount) / "journal"
        journal = FileJournal(str(directory), segment_bytes_max=1 << 20)
        fill(journal, 1, 50, size=4000)
        journal.sync()
        disks.fill(mount)
        fill(journal, 51, 600, size=4000)  # 2.4 MB: rolls it cannot make, a sync it cannot make
        journal.sync()
        assert journal.durable_index == 50 and journal.disk_full is not None
        assert [index for _, index, _ in entries_of(crashed_copy(directory, tmp_path / "crash"))] == list(
            range(1, 51)
        )
        disks.empty(mount)
        after_space_retry_time(journal)
        journal.sync()
        assert journal.durable_index == 650 and journal.space_retry_at is None
        expected = entries_of(journal)
        journal.close()
        assert entries_of(FileJournal(str(directory))) == expected
