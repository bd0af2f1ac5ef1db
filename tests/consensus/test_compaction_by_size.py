"""Compaction also runs while the journal holds more than ``compaction_min_bytes``, however few its
entries: a few large entries must not keep gigabytes in memory and on disk, all replayed after a restart."""

from __future__ import annotations

from pathlib import Path

from sim_cluster import F, G, L, PatchedSimReplica, Script

from raftlog.consensus.file_journal import FileJournal


def _run(tmp_path: Path, min_bytes: int) -> FileJournal:
    names = (L, F, G)
    journals = {
        name: FileJournal(str(tmp_path / f"j{i}"), segment_bytes_max=4096) for i, name in enumerate(names)
    }
    options = {
        name: {
            "snapshot_path": str(tmp_path / f"snapshot{i}"),
            "compaction_min_entries": 10_000,  # never reached here
            "compaction_min_bytes": min_bytes,
        }
        for i, name in enumerate(names)
    }
    script = Script(PatchedSimReplica, dict(journals), options)
    script.elect(L, [F, G])
    script.catch_up(L, [F, G])
    leader = script.nodes[L]
    for sequence in range(1, 61):
        leader.propose(sequence, None)
    script.tick(L)
    script.settle([L, F, G])
    script.catch_up(L, [F, G])
    script.tick(L)
    return journals[L]


def test_a_journal_grown_past_min_bytes_is_compacted(tmp_path: Path) -> None:
    journal = _run(tmp_path, min_bytes=1024)
    assert journal.first_index > 10, f"journal still starts at {journal.first_index}"
    assert journal.size_bytes <= 2 * 4096, "old segments were deleted"


def test_below_min_bytes_nothing_is_compacted(tmp_path: Path) -> None:
    journal = _run(tmp_path, min_bytes=1 << 30)
    assert journal.first_index <= 1
