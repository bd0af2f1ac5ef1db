"""Deleted records through the partition's state machine: a committed ``DeleteRecords`` moves the log start
offset on every replica alike, replays without harm, rides in the snapshot, and a replica that installs
that snapshot behind its peers recovers to a log equal to theirs from the start on, the start's batch
copied whole even when the start lies inside it."""

from __future__ import annotations

import pathlib

import pytest

from partitions import commands
from partitions.errors import InvalidCommand
from partitions.replicas.recovery import Copied, PeerBatches, Restarted, take_answer
from partitions.replicas.state_machine import PartitionStateMachine, Produced, RecordsDeleted, Refused
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch
from raftlog.storage.errors import OffsetOutOfRange

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def produce(values: list[bytes]) -> bytes:
    return commands.encode(commands.Produce(encode_batch(0, [ProducerRecord(v) for v in values], 0, 1_000)))


def delete(offset: int) -> bytes:
    return commands.encode(commands.DeleteRecords(offset))


def open_machine(path: pathlib.Path) -> PartitionStateMachine:
    return PartitionStateMachine(Log.open(str(path), CONFIG))


def journal(count: int) -> list[bytes]:
    """Produces of three records (offsets 3i .. 3i+2), a delete inside a batch after every tenth."""
    out: list[bytes] = []
    for i in range(count):
        out.append(produce([b"v%d-%d" % (i, n) for n in range(3)]))
        if i % 10 == 9:
            out.append(delete(3 * i + 1))  # inside the batch just produced
    return out


def offsets_and_values(machine: PartitionStateMachine) -> list[tuple[int, bytes | None]]:
    log = machine.log
    return [(r.offset, r.value) for r in log.read(log.log_start_offset, 1 << 30, machine.high_watermark)]


def test_a_delete_moves_the_start_and_past_the_high_watermark_is_refused(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    for index, command in enumerate(journal(5), start=1):
        machine.apply(index, 1, command)
    assert machine.apply(10, 1, delete(7)) == RecordsDeleted(7)
    assert (machine.deleted_below, machine.log.log_start_offset) == (7, 7)
    assert [o for o, _ in offsets_and_values(machine)] == list(range(7, 15))
    refused = machine.apply(11, 1, delete(16))
    assert isinstance(refused, Refused) and isinstance(refused.error, OffsetOutOfRange)
    assert machine.apply(12, 1, delete(3)) == RecordsDeleted(7), "never back"
    assert machine.apply(13, 1, produce([b"next"])) == Produced(15, 16), "offsets go on"


def test_replay_after_a_restart_reaches_the_same_log(tmp_path: pathlib.Path) -> None:
    entries = journal(40)
    machine = open_machine(tmp_path)
    snapshot = b""
    for index, command in enumerate(entries, start=1):
        machine.apply(index, 1, command)
        if index == 15:
            snapshot = machine.snapshot() or b""
    expected = offsets_and_values(machine)
    assert machine.log.log_start_offset == machine.deleted_below == 3 * 39 + 1
    machine.log.close()
    for restored in (snapshot, None):  # from the snapshot, and the whole journal again
        again = open_machine(tmp_path)
        if restored is not None:
            again.restore(restored)
        for index, command in enumerate(entries, start=1):
            if index > (15 if restored is not None else 0):
                again.apply(index, 1, command)
        assert offsets_and_values(again) == expected
        again.log.close()


def test_a_replica_behind_recovers_to_its_peers_log_from_a_start_inside_a_batch(
    tmp_path: pathlib.Path,
) -> None:
    leader = open_machine(tmp_path / "leader")
    for index, command in enumerate(journal(60), start=1):
        leader.apply(index, 1, command)
    start = leader.log.log_start_offset
    assert start % 3 == 1, "the start lies inside a batch"
    follower = open_machine(tmp_path / "follower")
    follower.restore(leader.snapshot() or b"")
    assert follower.deleted_below == start
    assert follower.behind and follower.log.end_offset == 0

    def answer(offset: int) -> PeerBatches:
        log = leader.log
        if offset < log.log_start_offset:
            return PeerBatches(log_start_offset=log.log_start_offset)
        return PeerBatches(b"".join(b.data for b in log.read_batches(offset, 1 << 30, leader.high_watermark)))

    assert take_answer(follower, 0, answer(0)) == Restarted(start)
    copied = take_answer(follower, start, answer(start))
    assert isinstance(copied, Copied) and copied.batches > 0
    assert follower.recovered()
    assert follower.log.log_start_offset == start
    assert offsets_and_values(follower) == offsets_and_values(leader)
    leader_batches = leader.log.read_batches(start, 1 << 30)
    assert [b.data for b in follower.log.read_batches(start, 1 << 30)] == [b.data for b in leader_batches]


def test_the_command_round_trips_and_a_negative_offset_is_malformed() -> None:
    assert commands.decode(delete(12)) == commands.DeleteRecords(12)
    with pytest.raises(InvalidCommand):
        commands.decode(commands.encode(commands.DeleteRecords(-1)))
