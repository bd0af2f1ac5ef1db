"""A committed offset keeps the leader epoch its commit named (Kafka's ``committed_leader_epoch``, KIP-320):
stored with the offset, replaced with it, carried through a transaction, kept in the snapshot; a snapshot
of the release before reads back with no epoch known."""

from __future__ import annotations

import pathlib

import msgpack

from partitions import commands
from partitions.commands import NO_LEADER_EPOCH, CommitOffset, DeleteOffset, TxnMarker, TxnOffset
from partitions.replicas.state_machine import PartitionStateMachine
from raftlog.storage import Log, LogConfig

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=128)


def open_machine(path: pathlib.Path) -> PartitionStateMachine:
    return PartitionStateMachine(Log.open(str(path), CONFIG))


def apply_all(machine: PartitionStateMachine, *entries: commands.Command) -> None:
    for entry in entries:
        machine.apply(machine.applied_index + 1, 1, commands.encode(entry))


def committed(machine: PartitionStateMachine, group: str) -> tuple[int | None, int]:
    return machine.consumer_offsets.get(group), machine.committed_epoch(group)


def end(producer_id: int, commit: bool, transaction: int) -> TxnMarker:
    return TxnMarker(producer_id, 0, commit, 5, 2_000, False, transaction)


def test_the_epoch_is_stored_and_replaced_with_its_offset(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 3))
    assert committed(machine, "g") == (10, 3)
    apply_all(machine, CommitOffset("g", 4, False, 9))  # an instance commit never goes back: nor its epoch
    assert committed(machine, "g") == (10, 3)
    apply_all(machine, CommitOffset("g", 12, True))  # a commit naming no epoch: Kafka's -1
    assert committed(machine, "g") == (12, NO_LEADER_EPOCH)
    apply_all(machine, CommitOffset("g", 12, False, 4))  # the same offset, its epoch named now
    assert committed(machine, "g") == (12, 4)
    apply_all(machine, CommitOffset("h", 1, True, 7), DeleteOffset("g"))
    assert committed(machine, "g") == (None, NO_LEADER_EPOCH) and committed(machine, "h") == (1, 7)


def test_a_transactions_offsets_carry_their_epochs_to_the_commit_only(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 2), TxnOffset("g", 20, 7, 0, 1, 6))
    assert committed(machine, "g") == (10, 2)  # pending: not visible yet
    apply_all(machine, end(7, commit=False, transaction=1))
    assert committed(machine, "g") == (10, 2) and not machine.txn_offset_epochs
    apply_all(machine, TxnOffset("g", 30, 7, 0, 2, 8), TxnOffset("h", 5, 7, 0, 2), end(7, True, 2))
    assert committed(machine, "g") == (30, 8) and committed(machine, "h") == (5, NO_LEADER_EPOCH)
    assert not machine.txn_offset_epochs


def test_epochs_survive_a_snapshot_committed_and_pending(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 3), TxnOffset("h", 4, 7, 0, 1, 5))
    again = PartitionStateMachine(machine.log)
    again.restore(machine.snapshot() or b"")
    assert committed(again, "g") == (10, 3)
    apply_all(again, end(7, commit=True, transaction=1))
    assert committed(again, "h") == (4, 5)


def test_a_snapshot_of_the_previous_release_restores_with_no_epoch_known(tmp_path: pathlib.Path) -> None:
    """The release before kept no epochs: its snapshot has none of their keys (the others unchanged)."""
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 3), TxnOffset("h", 4, 7, 0, 1, 5))
    state = msgpack.unpackb(machine.snapshot() or b"", raw=False)
    del state["consumer_offset_epochs"], state["txn_offset_epochs"]
    previous = msgpack.packb(state, use_bin_type=True)
    again = PartitionStateMachine(machine.log)
    again.restore(previous)
    assert committed(again, "g") == (10, NO_LEADER_EPOCH)
    apply_all(again, end(7, commit=True, transaction=1))
    assert committed(again, "h") == (4, NO_LEADER_EPOCH)


def test_a_snapshot_keeps_the_previous_releases_keys_as_they_were(tmp_path: pathlib.Path) -> None:
    """A replica of the previous release installing this snapshot reads what it knows as before."""
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 3), TxnOffset("h", 4, 7, 0, 1, 5))
    state = msgpack.unpackb(machine.snapshot() or b"", raw=False)
    assert state["v"] == 1 and state["consumer_offsets"] == {"g": 10}
    assert state["txn_offsets"] == [[7, "h", 4]]
