"""Committed consumer offsets are kept per group, not per commit: a partition's offsets are a table in its
state machine (one entry per group, the latest commit), carried by its snapshot, so however long groups
commit, what a replica keeps of them (and what a replica catching up installs) stays the size of the
table, as Kafka's compacted offsets topic keeps one record per group and partition."""

from __future__ import annotations

import pathlib

from partitions import commands
from partitions.replicas.state_machine import PartitionStateMachine
from raftlog.storage import Log, LogConfig


def commit(group: str, offset: int) -> bytes:
    return commands.encode(commands.CommitOffset(group, offset))


def test_the_offsets_a_replica_keeps_do_not_grow_with_the_commits(tmp_path: pathlib.Path) -> None:
    machine = PartitionStateMachine(Log.open(str(tmp_path), LogConfig()))
    groups = [f"group-{g}" for g in range(5)]
    index = 0
    sizes = []
    for round_ in range(2000):
        for group in groups:
            index += 1
            machine.apply(index, 1, commit(group, 0))
        if round_ in (10, 1999):
            sizes.append(len(machine.snapshot() or b""))
    assert dict(machine.consumer_offsets) == {group: 0 for group in groups}
    assert sizes[1] - sizes[0] <= 8, sizes  # 10,000 commits later: the same table (the applied index grew)
    restored = PartitionStateMachine(Log.open(str(tmp_path / "other"), LogConfig()))
    restored.restore(machine.snapshot() or b"")
    assert restored.consumer_offsets == machine.consumer_offsets
