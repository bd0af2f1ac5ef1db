"""Compaction under Raft: each replica cleans its own copy, and neither a replay of the journal after a
restart nor a replica recovering from a compacted peer trips over batches compaction rewrote. Replicas
fed the same entries and cleaned alike hold the same records; one that recovers from a compacted peer
ends with the peer's records, whichever offset its own log reached before."""

from __future__ import annotations

import pathlib

import pytest

from partitions import commands
from partitions.replicas.recovery import Copied, PeerBatches, take_answer
from partitions.replicas.state_machine import PartitionStateMachine
from raftlog.errors import InvariantViolation
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch
from raftlog.storage.cleaner import clean_log

CONFIG = LogConfig(
    segment_bytes=1024, index_interval_bytes=128, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01
)
NOW_MS = 2_000_000_000_000


def produce(index: int) -> bytes:
    records = [ProducerRecord(b"v%d-%d" % (index, n), b"k%d" % ((index + n) % 7)) for n in range(3)]
    return commands.encode(commands.Produce(encode_batch(0, records, 0, 1_000)))


def open_machine(path: pathlib.Path) -> PartitionStateMachine:
    return PartitionStateMachine(Log.open(str(path), CONFIG))


def records(machine: PartitionStateMachine) -> list[tuple[int, bytes | None, bytes | None]]:
    log = machine.log
    return [
        (r.offset, r.key, r.value) for r in log.read(log.log_start_offset, 1 << 30, machine.high_watermark)
    ]


def fed(path: pathlib.Path, entries: list[bytes]) -> PartitionStateMachine:
    machine = open_machine(path)
    for index, command in enumerate(entries, start=1):
        machine.apply(index, 1, command)
    machine.log.roll()
    return machine


def test_replicas_fed_the_same_entries_hold_the_same_records_once_each_cleaned(
    tmp_path: pathlib.Path,
) -> None:
    entries = [produce(i) for i in range(80)]
    replicas = [fed(tmp_path / name, entries) for name in ("a", "b", "c")]
    before = records(replicas[0])
    for machine in replicas:
        report = clean_log(machine.log, NOW_MS)
        assert report is not None and report.records_removed > 0
    after = [records(machine) for machine in replicas]
    assert after[0] == after[1] == after[2]
    assert len(after[0]) < len(before) and {key for _, key, _ in after[0]} == {key for _, key, _ in before}


def test_a_replay_after_a_restart_passes_over_batches_compaction_rewrote(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [produce(i) for i in range(60)]
    machine = fed(tmp_path, entries)
    assert clean_log(machine.log, NOW_MS) is not None
    expected = records(machine)
    machine.log.close()
    again = open_machine(tmp_path)  # no snapshot: the whole journal replays over the compacted log
    for index, command in enumerate(entries, start=1):
        again.apply(index, 1, command)
    assert records(again) == expected
    assert again.high_watermark == 180
    again.log.close()
    # the guard is what lets it through: without it, the replay compares a rewritten batch and stops
    reopened = open_machine(tmp_path)
    monkeypatch.setattr(reopened.log, "compacted_below", 0)
    with pytest.raises(InvariantViolation, match="differs from the batch on disk"):
        for index, command in enumerate(entries, start=1):
            reopened.apply(index, 1, command)


@pytest.mark.parametrize("follower_entries", [0, 10, 25, 41])
def test_a_replica_behind_recovers_from_a_compacted_peer_wherever_its_log_ends(
    tmp_path: pathlib.Path, follower_entries: int
) -> None:
    entries = [produce(i) for i in range(60)]
    leader = fed(tmp_path / "leader", entries)
    assert clean_log(leader.log, NOW_MS) is not None
    follower = open_machine(tmp_path / "follower")
    for index, command in enumerate(entries[:follower_entries], start=1):
        follower.apply(index, 1, command)
    follower.restore(leader.snapshot() or b"")
    assert follower.behind

    def answer(offset: int) -> PeerBatches:
        log = leader.log
        return PeerBatches(b"".join(b.data for b in log.read_batches(offset, 700, leader.high_watermark)))

    for _ in range(100):
        if not follower.behind:
            break
        outcome = take_answer(follower, follower.log.end_offset, answer(follower.log.end_offset))
        assert isinstance(outcome, Copied) and outcome.batches > 0, outcome
    assert follower.recovered()
    assert follower.log.compacted_below > 0  # a replay there passes over what came compacted
    copied = [r for r in records(leader) if r[0] >= follower.log.compacted_below]
    assert [r for r in records(follower) if r[0] >= follower.log.compacted_below] == copied
    follower.log.roll()
    clean_log(follower.log, NOW_MS)  # its own records below what it copied: cleaned by its own pass
    assert records(follower) == records(leader)
    follower.log.close()
    again = open_machine(tmp_path / "follower")
    for index, command in enumerate(entries, start=1):
        again.apply(index, 1, command)
    assert records(again) == records(leader)
    again.log.close()
