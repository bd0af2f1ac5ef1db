"""A replica whose installed snapshot is ahead of its log is *behind*: it applies every later entry
exactly as the replicas that hold the records do (same high watermark, dedup answers, consumer offsets),
writes nothing above its log's end, refuses to snapshot, and once recovery has copied the gap from a peer
appends as usual. A restart in the middle of a recovery replays consistently."""

from __future__ import annotations

import pathlib

import pytest

from partitions import commands
from partitions.replicas.state_machine import PartitionStateMachine
from raftlog.errors import InvariantViolation
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch, verify

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128)
Entry = tuple[int, int, bytes]  # (Raft index, term, command)


def produce(values: list[bytes], producer_id: int | None = None, sequence: int | None = None) -> bytes:
    batch = encode_batch(0, [ProducerRecord(v) for v in values], 0, 1_000, producer_id, sequence)
    return commands.encode(commands.Produce(batch))


def entries(first_index: int, count: int) -> list[Entry]:
    """Produces of 1-3 records, every third one a retry of the previous sequence (a duplicate), and a
    consumer offset commit every fifth."""
    out: list[Entry] = []
    sequence = 0
    for index in range(first_index, first_index + count):
        term = 1 + index // 10
        if index % 5 == 0:
            out.append((index, term, commands.encode(commands.CommitOffset("g", index))))
        elif index % 3 == 0:
            out.append((index, term, produce([b"retry"], producer_id=7, sequence=sequence - 1)))
        else:
            out.append((index, term, produce([b"r%d" % index] * (1 + index % 3), 7, sequence)))
            sequence += 1
    return out


def open_machine(path: pathlib.Path, fired: list[int] | None = None) -> PartitionStateMachine:
    on_behind = None if fired is None else (lambda: fired.append(1))
    return PartitionStateMachine(Log.open(str(path), CONFIG), on_behind=on_behind)


def state(machine: PartitionStateMachine) -> tuple[object, ...]:
    return (
        machine.applied_index,
        machine.high_watermark,
        machine.producers.to_rows(),
        dict(machine.consumer_offsets),
    )


def log_bytes(machine: PartitionStateMachine) -> list[bytes]:
    log = machine.log
    return [b.data for b in log.read_batches(log.log_start_offset, 1 << 30)] if log.end_offset else []


def recover(
    follower: PartitionStateMachine, leader: PartitionStateMachine, batches_max: int = 1 << 30
) -> int:
    """What recovery does: copy the leader's batches from the follower's log end, as stored."""
    copied = 0
    for batch in leader.log.read_batches(follower.log.end_offset, 1 << 30):
        if copied == batches_max or follower.append_recovered(batch.data, verify(batch.data)) is None:
            break
        copied += 1
    return copied


def test_a_behind_replica_applies_like_one_with_the_log_and_writes_nothing_above_its_end(
    tmp_path: pathlib.Path,
) -> None:
    leader = open_machine(tmp_path / "leader")
    journal = entries(1, 60)
    for index, term, command in journal[:30]:
        leader.apply(index, term, command)
    installed = leader.snapshot()
    assert installed is not None
    fired: list[int] = []
    follower = open_machine(tmp_path / "follower", fired)
    follower.restore(installed)
    assert fired == [1], "restore left the log behind: the owner starts a recovery"
    assert follower.behind and follower.log.end_offset == 0 < follower.high_watermark
    assert follower.snapshot() is None, "a snapshot now would claim records the log lacks"

    for index, term, command in journal[30:45]:
        assert follower.apply(index, term, command) == leader.apply(index, term, command)
        assert state(follower) == state(leader)
    assert follower.log.end_offset == 0 and follower.log.size_bytes == 0, "nothing written above the end"

    # recovery copies part of the gap; applies go on meanwhile and still write nothing
    assert recover(follower, leader, batches_max=5) == 5
    middle = follower.log.end_offset
    assert 0 < middle < follower.high_watermark
    for index, term, command in journal[45:50]:
        assert follower.apply(index, term, command) == leader.apply(index, term, command)
    assert follower.log.end_offset == middle
    # a batch that does not start at the log's end, or ends past the high watermark, is not taken
    stray = leader.log.read_batches(0, 1)[0]
    assert follower.append_recovered(stray.data, verify(stray.data)) is None
    assert not follower.recovered()

    recover(follower, leader)
    assert follower.log.end_offset == follower.high_watermark == leader.high_watermark
    assert follower.recovered() and not follower.behind
    for index, term, command in journal[50:]:  # appended as usual from now on
        assert follower.apply(index, term, command) == leader.apply(index, term, command)
    assert state(follower) == state(leader)
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.snapshot() is not None


def test_recovery_never_writes_at_or_past_the_high_watermark(tmp_path: pathlib.Path) -> None:
    leader = open_machine(tmp_path / "leader")
    journal = entries(1, 20)
    for index, term, command in journal[:10]:
        leader.apply(index, term, command)
    follower = open_machine(tmp_path / "follower")
    follower.restore(leader.snapshot() or b"")
    for index, term, command in journal[10:]:
        leader.apply(index, term, command)  # the leader is ahead: the follower has not applied these
    recover(follower, leader)
    assert follower.log.end_offset == follower.high_watermark < leader.high_watermark
    assert not follower.restart_log_at(follower.high_watermark + 1), "never restarted past it either"
    assert follower.log.end_offset == follower.high_watermark
    for index, term, command in journal[10:]:
        follower.apply(index, term, command)
    assert follower.recovered() and log_bytes(follower) == log_bytes(leader)


def test_a_restart_in_the_middle_of_a_recovery_replays_consistently(tmp_path: pathlib.Path) -> None:
    leader = open_machine(tmp_path / "leader")
    journal = entries(1, 60)
    for index, term, command in journal[:25]:
        leader.apply(index, term, command)
    installed = leader.snapshot() or b""
    follower = open_machine(tmp_path / "follower")
    follower.restore(installed)
    for index, term, command in journal[25:40]:
        follower.apply(index, term, command)
        leader.apply(index, term, command)
    recover(follower, leader, batches_max=12)  # into the part the journal entries cover, not through it
    assert follower.log.end_offset < follower.high_watermark
    follower.log.close()

    # restart: no snapshot was taken while behind, so the installed one is restored and the journal after
    # it replays: entries below the log's end are compared with the copied batches, the others skipped
    fired: list[int] = []
    again = open_machine(tmp_path / "follower", fired)
    again.restore(installed)
    assert fired == [1]
    for index, term, command in journal[25:40]:
        again.apply(index, term, command)
    assert state(again) == state(leader)
    recover(again, leader)
    assert again.recovered()
    for index, term, command in journal[40:]:
        assert again.apply(index, term, command) == leader.apply(index, term, command)
    assert state(again) == state(leader) and log_bytes(again) == log_bytes(leader)


def test_a_log_that_lost_records_without_a_restore_still_stops_loudly(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    machine.apply(1, 1, produce([b"a"]))
    machine.apply(2, 1, produce([b"b"]))
    machine.log.truncate(1)  # the log lost an applied record, and no snapshot explains it
    with pytest.raises(InvariantViolation, match="no snapshot left it behind"):
        machine.apply(3, 1, produce([b"c"]))


def test_restore_of_a_snapshot_the_log_covers_is_not_behind(tmp_path: pathlib.Path) -> None:
    fired: list[int] = []
    machine = open_machine(tmp_path, fired)
    machine.apply(1, 1, produce([b"a", b"b"]))
    snapshot = machine.snapshot() or b""
    machine.log.close()
    again = open_machine(tmp_path, fired)
    again.restore(snapshot)
    assert fired == [] and not again.behind and again.snapshot() is not None
