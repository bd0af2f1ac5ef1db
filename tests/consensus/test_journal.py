"""FileJournal: crash/reopen, torn tails, corruption, term/vote durability, compaction without rewrite, and
a seeded random model test against a plain list. A "crash" is opening a second journal on the same
directory without closing the first (nothing buffered in the first one reaches the disk)."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import crc32c
import msgpack
import pytest

from raftlog.consensus import journal as journal_module
from raftlog.consensus.errors import CorruptJournal
from raftlog.consensus.journal import FileJournal, encode_record


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


def test_torn_tail_is_truncated_to_last_complete_entry(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10)
    journal.sync()
    segment = journal.segment_paths()[-1]
    good_size = os.path.getsize(segment)
    record = encode_record(11, 1, b"torn")
    with open(segment, "ab") as file:
        file.write(record[: len(record) - 3])  # a write cut short by the crash

    reopened = FileJournal(str(tmp_path))
    assert [entry[1] for entry in entries_of(reopened)] == list(range(1, 11))
    assert os.path.getsize(segment) == good_size
    fill(reopened, 11, 1)
    reopened.sync()
    assert FileJournal(str(tmp_path)).last_index == 11


def test_crc_mismatch_in_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 10)
    journal.sync()
    segment = journal.segment_paths()[-1]
    with open(segment, "r+b") as file:
        file.seek(-1, os.SEEK_END)
        last = file.read(1)
        file.seek(-1, os.SEEK_END)
        file.write(bytes([last[0] ^ 0xFF]))
    assert FileJournal(str(tmp_path)).last_index == 9


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
    journal = FileJournal(str(tmp_path))
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(source: str, destination: str) -> None:
        calls.append("rename")
        real_replace(source, destination)

    monkeypatch.setattr(journal_module.os, "fsync", fsync)
    monkeypatch.setattr(journal_module.os, "replace", replace)
    journal.setCurrentTerm(7, "127.0.0.1:9002")
    assert calls == ["fsync", "rename", "fsync"]  # file, rename, directory
    monkeypatch.undo()

    crashed_and_reopened = FileJournal(str(tmp_path))
    assert crashed_and_reopened.getCurrentTerm() == 7
    assert crashed_and_reopened.getVotedForNodeId() == "127.0.0.1:9002"
    journal.setCurrentTerm(8, None)
    assert FileJournal(str(tmp_path)).getVotedForNodeId() is None


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


def test_clear_starts_a_fresh_log_that_survives_a_crash(tmp_path: Path) -> None:
    journal = FileJournal(str(tmp_path))
    fill(journal, 1, 50)
    journal.sync()
    journal.clear()
    journal.add(b"prev", 1000, 4)
    journal.add(b"last", 1001, 4)
    journal.sync()
    assert entries_of(FileJournal(str(tmp_path))) == [(b"prev", 1000, 4), (b"last", 1001, 4)]


def test_random_operations_match_a_list_model(tmp_path: Path) -> None:
    """Seeded: add / sync / truncate suffix / compact prefix / crash-and-reopen, against a list."""
    rng = random.Random(20261121)
    directory = str(tmp_path / "j")
    journal = FileJournal(directory, segment_bytes_max=4096)
    model: list[tuple[bytes, int, int]] = []
    durable: list[tuple[bytes, int, int]] = []
    term = 1
    for step in range(3000):
        action = rng.random()
        if action < 0.6:
            index = model[-1][1] + 1 if model else 1
            command = rng.randbytes(rng.randint(0, 60))
            journal.add(command, index, term)
            model.append((command, index, term))
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
        elif action < 0.93:
            reopened = FileJournal(directory, segment_bytes_max=4096)  # crash: unsynced work is lost
            got = entries_of(reopened)
            # The reopened journal may still hold compacted entries of a partly compacted segment.
            assert got[len(got) - len(durable) :] == durable, f"step {step}"
            if got:
                assert [e[1] for e in got] == list(range(got[0][1], got[0][1] + len(got))), f"step {step}"
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
