"""Applying a committed entry appends to the partition log without an fsync of its own: the entry is
durable in the Raft journal, ``snapshot()`` flushes the log before compaction may drop journal entries,
and a replay after a crash appends whatever tail the log lost. These tests lose that tail on purpose."""

from __future__ import annotations

import os
import pathlib

from partitions import commands
from partitions.replicas.state_machine import PartitionStateMachine
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch

CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=128)  # one segment: no roll fsyncs


def produce(values: list[bytes]) -> bytes:
    return commands.encode(commands.Produce(encode_batch(0, [ProducerRecord(v) for v in values], 0, 1_000)))


def values_in(machine: PartitionStateMachine) -> list[bytes]:
    return [r.value for r in machine.log.read(0, 1 << 30, machine.high_watermark)]


def file_sizes(directory: pathlib.Path) -> dict[str, int]:
    return {name: os.path.getsize(directory / name) for name in os.listdir(directory)}


def test_apply_defers_the_fsync_and_snapshot_makes_the_log_durable(tmp_path: pathlib.Path) -> None:
    machine = PartitionStateMachine(Log.open(str(tmp_path), CONFIG))
    for index in range(1, 6):
        machine.apply(index, 1, produce([b"v%d" % index]))
    assert machine.high_watermark == 5
    assert machine.log.durable_end_offset < 5, "apply must not fsync: the journal holds the entry"
    machine.snapshot()
    assert machine.log.durable_end_offset == 5, "a snapshot covers only data on disk"
    machine.log.close()


def test_a_lost_unflushed_tail_comes_back_from_the_journal_replay(tmp_path: pathlib.Path) -> None:
    entries = [(i + 1, 1, produce([b"r%d" % i] * (1 + i % 3))) for i in range(20)]
    machine = PartitionStateMachine(Log.open(str(tmp_path), CONFIG))
    snapshot_at = 8
    snapshot = b""
    durable: dict[str, int] = {}
    for index, term, command in entries:
        machine.apply(index, term, command)
        if index == snapshot_at:
            snapshot = machine.snapshot()
            durable = file_sizes(tmp_path)  # everything is fsynced at this point
    expected = values_in(machine)
    assert machine.log.durable_end_offset < machine.high_watermark

    # power loss: every file goes back to its size at the last fsync (the log is never closed)
    for name in file_sizes(tmp_path):
        os.truncate(tmp_path / name, durable.get(name, 0))

    again = PartitionStateMachine(Log.open(str(tmp_path), CONFIG))
    assert again.log.end_offset < len(expected), "the unflushed tail really was lost"
    again.restore(snapshot)
    for index, term, command in entries[snapshot_at:]:
        again.apply(index, term, command)
    assert values_in(again) == expected
    again.log.close()
