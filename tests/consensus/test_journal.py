"""FileJournal: crash/reopen, torn tails, corruption, term/vote durability, compaction without rewrite, and
a seeded random model test against a plain list. A "crash" is opening a second journal on the same
directory without closing the first (nothing buffered in the first one reaches the disk)."""

from __future__ import annotations

import errno
import itertools
import math
import os
import random
import struct
import threading
import time
from pathlib import Path

import crc32c
import msgpack
import pytest

from raftlog.consensus import file_journal, journal_files
from raftlog.consensus.errors import CorruptJournal
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.journal_files import encode_record, read_term_and_vote
from raftlog.errors import InvariantViolation

SEGMENT_NAME = "segment-0000000001.log"


def entries_of(journal: FileJournal) -> list[tuple[bytes, int, int]]:
    return list(journal[0 : len(journal)])


def fill(journal: FileJournal, first: int, count: int, term: int = 1, size: int = 10) -> None:
    for index in range(first, first + count):
        journal.add(index.to_bytes(4, "big") * (size // 4 + 1), index, term)


def test_reopen_returns_synced_entries_and_drops_unsynced(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 100)
    assert journal.durable_index == 0
    journal.sync()
    assert journal.durable_index == 100
    fill(journal, 101, 5)  # added, never synced: lost in the crash
    expected = entries_of(journal)[:100]

    reopened = FileJournal(str(tmp_path))
    assert entries_of(reopened) == expected
    assert reopened.durable_index == 100
    fill(reopened, 101, 3, term=2)
    reopened.close()
    assert [entry[1] for entry in entries_of(FileJournal(str(tmp_path)))] == list(range(1, 104))


@pytest.mark.parametrize("direct_io", [True, False])
def test_torn_tail_is_truncated_to_last_complete_entry(tmp_path: Path, direct_io: bool) -> None:
    journal = FileJournal(str(tmp_path), direct_io=direct_io)
    fill(journal, 1, 10)
    journal.sync()
    segment = journal.segment_paths()[-1]
    records_end = journal.size_bytes  # direct I/O pads the file with zeros to a whole block after this
    record = encode_record(11, 1, b"torn")
    with open(segment, "r+b") as file:
        file.seek(records_end)
        file.write(record[: len(record) - 3])  # a write cut short by the crash

    reopened = FileJournal(str(tmp_path), direct_io=direct_io)
    assert [entry[1] for entry in entries_of(reopened)] == list(range(1, 11))
    assert os.path.getsize(segment) == records_end
    fill(reopened, 11, 1)
    reopened.sync()
    assert FileJournal(str(tmp_path)).last_index == 11


@pytest.mark.parametrize("direct_io", [True, False])
def test_crc_mismatch_in_last_record_is_a_torn_tail(tmp_path: Path, direct_io: bool) -> None:
    journal = FileJournal(str(tmp_path), direct_io=direct_io)
    fill(journal, 1, 10)
    journal.sync()
    segment = journal.segment_paths()[-1]
    with open(segment, "r+b") as file:
        file.seek(journal.size_bytes - 1)
        last = file.read(1)
        file.seek(journal.size_bytes - 1)
        file.write(bytes([last[0] ^ 0xFF]))
    assert FileJournal(str(tmp_path), direct_io=direct_io).last_index == 9


def test_direct_io_writes_whole_blocks_and_reopens_after_the_padding(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10)
    assert journal._segments[-1].writer is not None, "this file system has no direct I/O"
    journal.sync()
    segment = journal.segment_paths()[-1]
    with open(segment, "rb") as file:
        data = file.read()
    assert len(data) % journal_files.DIRECT_BLOCK == 0
    assert data[journal.size_bytes :] == bytes(len(data) - journal.size_bytes)
    expected = entries_of(journal)
    for reopen in range(3):  # each reopen continues inside the padded block, then past it
        journal = FileJournal(str(tmp_path))
        assert entries_of(journal) == expected
        fill(journal, 11 + reopen * 40, 40, size=60)
        expected = entries_of(journal)
        journal.sync()
        journal.close()
    assert entries_of(FileJournal(str(tmp_path), direct_io=False)) == expected


def test_a_released_direct_writer_goes_on_without_reading_its_last_block_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group quiet for a while releases its files (``release_handles``, ``RaftCore._release_idle_handles``);
    its next append continues from the last block as the closed writer left it, not from a read of that
    block, which a direct write left out of the page cache (a disk round trip on every such append). A
    truncation still reads the block the file now ends in."""
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 3, size=100)
    assert journal._segments[-1].writer is not None, "this file system has no direct I/O"
    journal.sync()
    seek = journal_files._DirectWriter.seek
    reads: list[int] = []

    def counted(writer: journal_files._DirectWriter, path: str, size: int) -> None:
        reads.append(size)
        seek(writer, path, size)

    monkeypatch.setattr(journal_files._DirectWriter, "seek", counted)
    for index in range(4, 60):  # past a block boundary (4 KiB) with records of ~110 bytes
        journal.release_handles()
        fill(journal, index, 1, size=100)
        journal.sync()
    assert reads == [], "a reopened writer read its last block back"
    journal.release_handles()
    journal.deleteEntriesFrom(len(journal) - 3)  # cut while released: the kept block is no longer the end
    fill(journal, len(journal) + 1, 2, size=100)
    journal.sync()
    assert len(reads) == 1
    journal.release_handles()
    fill(journal, len(journal) + 1, 2, size=100)
    journal.sync()
    expected = entries_of(journal)
    assert [entry[1] for entry in expected] == list(range(1, 61))
    journal.close()
    assert entries_of(FileJournal(str(tmp_path))) == expected
    assert entries_of(FileJournal(str(tmp_path), direct_io=False)) == expected


def test_without_direct_io_on_the_file_system_the_journal_writes_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: str, size: int, tail: bytes | None) -> None:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(journal_files, "_DirectWriter", refuse)
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10)
    assert journal._segments[-1].writer is None
    journal.sync()
    assert os.path.getsize(journal.segment_paths()[-1]) == journal.size_bytes  # no padding
    assert [entry[1] for entry in entries_of(FileJournal(str(tmp_path)))] == list(range(1, 11))


def _synced_states(directory: Path) -> list[tuple[bytes, list[tuple[bytes, int, int]]]]:
    """Three syncs of a direct-I/O journal: after each, the file's bytes and the entries synced so far."""
    journal = FileJournal(str(directory))
    states = []
    for first, count in ((1, 30), (31, 1), (32, 70)):
        fill(journal, first, count, size=50)
        journal.sync()
        with open(journal.segment_paths()[-1], "rb") as file:
            states.append((file.read(), entries_of(journal)))
    journal.close()
    return states


def test_a_direct_write_torn_at_any_sector_keeps_what_earlier_syncs_made_durable(tmp_path: Path) -> None:
    """A crash during a direct write leaves any mix of its 512-byte sectors written and not: the block
    it rewrites holds the same bytes either way, so every entry an earlier sync made durable survives,
    and what is recovered is a prefix of the entries written."""
    rng = random.Random(7)
    states = _synced_states(tmp_path / "source")
    for (before, durable), (after, written) in itertools.pairwise(states):
        sectors = range(0, len(after), 512)
        for trial in range(40):
            torn = bytearray(before + bytes(max(0, len(after) - len(before))))
            for start in sectors:
                if rng.random() < 0.5:
                    torn[start : start + 512] = after[start : start + 512]
            directory = tmp_path / f"torn-{len(durable)}-{trial}"
            directory.mkdir()
            (directory / SEGMENT_NAME).write_bytes(bytes(torn))
            reopened = FileJournal(str(directory))
            recovered = entries_of(reopened)
            reopened.close()
            assert recovered[: len(durable)] == durable
            assert recovered == written[: len(recovered)]


def test_a_direct_io_journal_cut_at_any_byte_recovers_a_prefix(tmp_path: Path) -> None:
    states = _synced_states(tmp_path / "source")
    data, written = states[-1]
    # a stride prime to a record's length: every byte position of a record (its framing, its CRC, its
    # command) is cut in some record, at a fifth of the cost of every seventh byte
    stride = 37
    assert math.gcd(stride, len(encode_record(50, 1, (50).to_bytes(4, "big") * 13))) == 1
    for cut in range(journal_files.SEGMENT_HEADER.size, len(data) + 1, stride):
        directory = tmp_path / f"cut-{cut}"
        directory.mkdir()
        (directory / SEGMENT_NAME).write_bytes(data[:cut])
        reopened = FileJournal(str(directory))
        recovered = entries_of(reopened)
        assert recovered == written[: len(recovered)]
        fill(reopened, len(recovered) + 1, 1)  # and it goes on from there
        reopened.close()
        again = FileJournal(str(directory))
        assert again.last_index == len(recovered) + 1
        again.close()


def test_corruption_before_the_last_segment_is_an_error(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path), segment_bytes_max=4096)
    fill(journal, 1, 400, size=40)
    journal.sync()
    paths = journal.segment_paths()
    assert len(paths) >= 3
    with open(paths[0], "r+b") as file:
        file.seek(100)
        byte = file.read(1)
        file.seek(100)
        file.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CorruptJournal) as raised:
        FileJournal(str(tmp_path), segment_bytes_max=4096)
    assert raised.value.path == paths[0]


def test_term_and_vote_are_durable_before_set_current_term_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal(str(tmp_path))  # the state file is made here, with its directory synced
    calls: list[str] = []
    real_pwrite, real_fdatasync = os.pwrite, os.fdatasync

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        calls.append(f"pwrite@{offset}")
        return real_pwrite(fd, data, offset)

    def fdatasync(fd: int) -> None:
        calls.append("fdatasync")
        real_fdatasync(fd)

    monkeypatch.setattr(file_journal.os, "pwrite", pwrite)
    monkeypatch.setattr(file_journal.os, "fdatasync", fdatasync)
    journal.setCurrentTerm(7, "127.0.0.1:9002")
    journal.setCurrentTerm(7, "127.0.0.1:9002")  # unchanged: nothing written
    journal.setCurrentTerm(8, None)
    slot = journal_files.STATE_SLOT_BYTES
    # one overwrite of the older slot and one fdatasync per change, the slots taking turns
    assert calls == ["pwrite@0", "fdatasync", f"pwrite@{slot}", "fdatasync"]
    monkeypatch.undo()
    crashed_and_reopened = FileJournal(str(tmp_path))
    assert (crashed_and_reopened.getCurrentTerm(), crashed_and_reopened.getVotedForNodeId()) == (8, None)


def test_a_torn_state_write_leaves_the_state_before_it(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    journal.setCurrentTerm(3, "n2")
    journal.setCurrentTerm(4, "n3")  # the newer slot: torn by a crash during its write
    path = tmp_path / "state"
    data = bytearray(path.read_bytes())
    newest = journal._state_sequence % 2 * journal_files.STATE_SLOT_BYTES
    data[newest + 30 : newest + 40] = b"\xff" * 10
    path.write_bytes(bytes(data))
    reopened = FileJournal(str(tmp_path))
    assert (reopened.getCurrentTerm(), reopened.getVotedForNodeId()) == (3, "n2")
    reopened.setCurrentTerm(5, None)  # overwrites the torn slot
    assert read_term_and_vote(str(tmp_path)) == (5, None)


def test_a_state_file_of_the_first_format_is_read_and_converted(tmp_path: Path) -> None:
    body = msgpack.packb({"term": 9, "voted_for": "n1"}, use_bin_type=True)
    header = struct.pack("<8sII", journal_files.STATE_MAGIC, crc32c.crc32c(body), len(body))
    (tmp_path / "state").write_bytes(header + body)
    journal = FileJournal(str(tmp_path))
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId()) == (9, "n1")
    assert (tmp_path / "state").stat().st_size == 2 * journal_files.STATE_SLOT_BYTES
    journal.setCurrentTerm(10, None)
    assert read_term_and_vote(str(tmp_path)) == (10, None)


def test_truncating_a_conflicting_suffix_across_segments(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path), segment_bytes_max=4096)
    fill(journal, 1, 300, size=40)
    journal.sync()
    assert len(journal.segment_paths()) >= 3
    journal.deleteEntriesFrom(49)  # keep indexes 1..49
    assert journal.durable_index == 49
    fill(journal, 50, 5, term=3)
    journal.sync()
    reopened = FileJournal(str(tmp_path), segment_bytes_max=4096)
    assert [(entry[1], entry[2]) for entry in entries_of(reopened)] == [(i, 1) for i in range(1, 50)] + [
        (i, 3) for i in range(50, 55)
    ]


def test_compaction_deletes_old_segments_without_rewriting_the_rest(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path), segment_bytes_max=4096)
    fill(journal, 1, 300, size=40)
    journal.sync()
    paths = journal.segment_paths()
    inode_of_last = os.stat(paths[-1]).st_ino
    size_of_last = os.path.getsize(paths[-1])
    journal.deleteEntriesTo(249)  # first kept index: 250
    assert journal.first_index == 250
    remaining = journal.segment_paths()
    assert len(remaining) < len(paths)
    assert all(not os.path.exists(path) for path in paths if path not in remaining)
    assert os.stat(paths[-1]).st_ino == inode_of_last and os.path.getsize(paths[-1]) == size_of_last
    reopened = FileJournal(str(tmp_path), segment_bytes_max=4096)
    assert reopened.first_index <= 250 and reopened.last_index == 300


def test_segments_no_longer_needed_go_to_discard_not_unlinked_here(tmp_path: Path) -> None:
    """A node renames them aside and removes them on another thread; the journal only hands them over
    (closed) and fsyncs its directory: reopened, it does not miss them."""
    aside = tmp_path / "aside"
    aside.mkdir()
    handed: list[str] = []

    def discard(path: str) -> None:
        handed.append(path)
        os.rename(path, aside / os.path.basename(path))

    directory = tmp_path / "journal"
    journal = FileJournal(str(directory), segment_bytes_max=4096, discard=discard)
    fill(journal, 1, 300, size=40)
    journal.sync()
    paths = journal.segment_paths()
    journal.deleteEntriesTo(249)  # compaction: whole old segments go
    remaining = journal.segment_paths()
    assert handed == [path for path in paths if path not in remaining] and handed
    assert sorted(os.listdir(aside)) == sorted(os.path.basename(path) for path in handed)
    journal.deleteEntriesFrom(len(journal) - 5)  # a conflicting suffix: none of its segments stay either
    journal.sync()
    assert set(handed) | set(journal.segment_paths()) >= set(paths)
    cleared_before = len(handed)
    journal.clear()  # a snapshot installed: every old segment goes
    assert len(handed) > cleared_before and all(not os.path.exists(path) for path in handed)
    journal.add(b"after", 1000, 5)
    journal.sync()
    reopened = FileJournal(str(directory), segment_bytes_max=4096)
    assert [(entry[1], entry[2]) for entry in entries_of(reopened)] == [(1000, 5)]


def test_clear_starts_a_fresh_log_that_survives_a_crash(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 50)
    journal.sync()
    journal.clear()
    journal.add(b"prev", 1000, 4)
    journal.add(b"last", 1001, 4)
    journal.sync()
    assert entries_of(FileJournal(str(tmp_path))) == [(b"prev", 1000, 4), (b"last", 1001, 4)]


@pytest.mark.parametrize(("direct_io", "on_thread"), [(True, False), (False, False), (True, True)])
def test_random_operations_match_a_list_model(tmp_path: Path, direct_io: bool, on_thread: bool) -> None:
    """Seeded: add / sync / truncate suffix / compact prefix / crash-and-reopen, against a list.
    ``on_thread``: a sync is a job (begin_sync) run by another thread while the steps after it go on;
    a crash first lets a running job end (what it writes may be durable, as with any sync)."""
    rng = random.Random(20261121)
    directory = str(tmp_path / "j")
    journal = FileJournal(directory, segment_bytes_max=4096, direct_io=direct_io)
    model: list[tuple[bytes, int, int]] = []
    durable: list[tuple[bytes, int, int]] = []
    running: threading.Thread | None = None
    term = 1
    for step in range(3000):
        action = rng.random()
        if action < 0.6:
            index = model[-1][1] + 1 if model else 1
            command = rng.randbytes(rng.randint(0, 60))
            journal.add(command, index, term)
            model.append((command, index, term))
        elif action < 0.75 and on_thread:
            job = journal.begin_sync()
            durable = list(model)
            if job is not None:
                job.hand_off(lambda: None)
                running = threading.Thread(target=job.run)
                running.start()
            assert journal.sync_in_flight == (job is not None)
        elif action < 0.75:
            journal.sync()
            durable = list(model)
        elif action < 0.83 and len(model) > 2:
            position = rng.randint(1, len(model) - 1)
            cut_index = model[position][1]
            journal.deleteEntriesFrom(position)
            del model[position:]
            durable = [entry for entry in durable if entry[1] < cut_index]
            term += 1
        elif action < 0.88 and len(model) > 4:
            position = rng.randint(1, len(model) - 2)
            journal.sync()
            journal.deleteEntriesTo(position)
            del model[:position]
            durable = list(model)
        elif action < 0.9 and durable:
            journal.release_through(rng.choice(durable)[1])  # commands leave memory, read back below
            journal.release_handles()  # files too (refused while a sync is pending or running)
        elif action < 0.93:
            if running is not None:
                running.join()
            reopened = FileJournal(directory, segment_bytes_max=4096, direct_io=direct_io)  # crash
            got = entries_of(reopened)
            # The reopened journal may still hold compacted entries of a partly compacted segment.
            assert got[len(got) - len(durable) :] == durable, f"step {step}"
            if got:
                assert [e[1] for e in got] == list(range(got[0][1], got[0][1] + len(got))), f"step {step}"
            journal.close(flush=False)  # after the reopen, writing nothing: only its descriptors go
            journal = reopened
            model = got
            durable = list(got)
        assert entries_of(journal) == model, f"step {step}"


@pytest.mark.parametrize("size", [0, 255, 256, 65_535, 65_536, 1 << 20])
@pytest.mark.parametrize(("index", "term"), [(0, 0), (127, 128), (2**40, 2**33)])
def test_a_record_is_crc_framed_msgpack_of_index_term_command(size: int, index: int, term: int) -> None:
    command = bytes(range(256)) * (size // 256) + bytes(size % 256)
    body = msgpack.packb([index, term, command], use_bin_type=True)
    assert encode_record(index, term, command) == struct.pack("<II", len(body), crc32c.crc32c(body)) + body


def test_released_commands_leave_memory_and_read_back_from_their_records(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path), segment_bytes_max=4096)
    fill(journal, 1, 300, size=40)  # several segments
    journal.sync()
    fill(journal, 301, 5, size=40)  # added, not durable yet
    expected = entries_of(journal)
    journal.release_through(1000)  # only what is durable may go
    in_memory = [entry[0] for entry in journal._entries]
    assert all(command is file_journal._RELEASED for command in in_memory[:300])
    assert in_memory[300:] == [entry[0] for entry in expected[300:]]
    assert entries_of(journal) == expected  # slices read back
    assert [journal[position] for position in (0, 150, 299, -1)] == [expected[p] for p in (0, 150, 299, -1)]
    assert journal.index_term(150) == (151, 1) and journal.last_term == 1

    journal.sync()
    journal.deleteEntriesTo(100)  # compaction shifts positions; what is left still reads back
    assert entries_of(journal) == expected[100:]
    journal.deleteEntriesFrom(200)  # a conflicting suffix above the released part
    fill(journal, 301, 3, term=2, size=40)
    journal.sync()
    journal.release_through(303)
    assert entries_of(journal) == expected[100:300] + entries_of(journal)[200:]
    assert [entry[1:] for entry in entries_of(journal)[200:]] == [(301, 2), (302, 2), (303, 2)]
    journal.close()


def test_a_released_record_damaged_on_disk_is_reported_when_read_back(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10, size=40)
    journal.sync()
    journal.release_through(10)
    with open(journal.segment_paths()[-1], "r+b") as file:
        file.seek(journal_files.SEGMENT_HEADER.size + 20)  # inside the first record's body
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CorruptJournal, match="released record of index 1"):
        journal[0]
    assert journal[1][1] == 2
    journal.close()


def test_a_sync_job_on_another_thread_makes_its_entries_durable_when_taken_back(tmp_path: Path) -> None:
    """begin_sync hands the entries added so far to a job; entries added while it runs go to the next
    one; durable_index moves only when finish_sync takes the finished job back."""
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10)
    job = journal.begin_sync()
    assert job is not None and journal.sync_in_flight and not journal.sync_pending
    fill(journal, 11, 5)  # while the job has not run: next sync
    assert journal.pending_bytes > 0
    assert journal.finish_sync() is False and journal.durable_index == 0
    job.hand_off(lambda: None)
    worker = threading.Thread(target=job.run)
    worker.start()
    worker.join()
    assert journal.durable_index == 0, "durable before the job was taken back"
    assert [entry[1] for entry in entries_of(FileJournal(str(tmp_path)))] == list(range(1, 11))
    assert journal.finish_sync() is True
    assert journal.durable_index == 10 and not journal.sync_in_flight
    journal.sync()
    assert journal.durable_index == 15
    assert [entry[1] for entry in entries_of(FileJournal(str(tmp_path)))] == list(range(1, 16))


def test_a_truncation_waits_for_the_running_sync_job(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10)
    job = journal.begin_sync()
    assert job is not None
    started = threading.Event()
    order: list[str] = []

    def run_late() -> None:
        started.set()
        time.sleep(0.2)
        order.append("job")
        job.run()

    job.hand_off(lambda: None)
    worker = threading.Thread(target=run_late)
    worker.start()
    started.wait()
    journal.deleteEntriesFrom(5)  # indexes 6.. go; must not cut the file under the running write
    order.append("truncated")
    worker.join()
    assert order == ["job", "truncated"]
    assert journal.durable_index == 5 and not journal.sync_in_flight
    fill(journal, 6, 3, term=2)
    journal.sync()
    reopened = entries_of(FileJournal(str(tmp_path)))
    assert [(entry[1], entry[2]) for entry in reopened] == [(i, 1) for i in range(1, 6)] + [
        (i, 2) for i in range(6, 9)
    ]


def test_a_failed_sync_job_raises_when_taken_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 3)
    job = journal.begin_sync()
    assert job is not None

    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(journal_files.os, "fdatasync", fail)
    job.hand_off(lambda: None)
    worker = threading.Thread(target=job.run)
    worker.start()
    worker.join()
    with pytest.raises(OSError, match="injected"):
        journal.finish_sync()
    assert journal.durable_index == 0


def test_waiting_for_a_sync_job_nobody_runs_is_an_invariant_violation(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 2)
    assert journal.begin_sync() is not None
    with pytest.raises(InvariantViolation, match="neither run nor handed off"):
        journal.deleteEntriesFrom(1)


def _open_descriptors_under(directory: Path) -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        count += target.startswith(str(directory))
    return count


@pytest.mark.parametrize("direct_io", [True, False])
def test_released_handles_reopen_on_use_and_lose_nothing(tmp_path: Path, direct_io: bool) -> None:
    journal = FileJournal(str(tmp_path), segment_bytes_max=4096, direct_io=direct_io)
    fill(journal, 1, 300, size=40)  # several segments
    journal.sync()
    journal.release_through(300)  # commands read back from disk from now on
    assert len(journal.segment_paths()) > 2
    assert _open_descriptors_under(tmp_path) > 0
    journal.release_handles()
    assert _open_descriptors_under(tmp_path) == 0, "an idle journal keeps files open"
    assert journal[0][1] == 1 and journal[150][1] == 151  # read back through reopened descriptors
    journal.release_handles()
    fill(journal, 301, 20, size=40)  # appends continue where the released writer left off
    journal.release_handles()  # refused while a sync is pending: the next sync needs the files
    journal.sync()
    journal.deleteEntriesFrom(len(journal) - 5)  # a truncation after a release
    journal.sync()
    journal.release_handles()
    expected = entries_of(journal)
    journal.close()
    reopened = FileJournal(str(tmp_path), segment_bytes_max=4096, direct_io=direct_io)
    assert entries_of(reopened) == expected
    assert expected[-1][1] == 315
