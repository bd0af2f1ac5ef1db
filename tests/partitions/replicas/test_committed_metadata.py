"""A committed offset keeps the metadata string its commit carried (Kafka's ``committed_metadata``; Kafka
Streams keeps a partition's stream time there): stored with the offset, replaced by a commit of the same
offset, carried through a transaction to its commit and dropped with its abort, forgotten with the
offset, kept in the snapshot (absent while none is, so such a snapshot keeps the release before's
bytes). The bound is Kafka's, counted as Kafka counts: UTF-16 units."""

from __future__ import annotations

import pathlib

import msgpack
import pytest

from partitions import commands
from partitions.commands import (
    NO_LEADER_EPOCH,
    OFFSET_METADATA_MAX,
    CommitOffset,
    DeleteOffset,
    TxnOffset,
    check_offset_metadata,
)
from partitions.errors import OffsetMetadataTooLarge
from partitions.replicas.state_machine import PartitionStateMachine
from tests.partitions.replicas.test_committed_leader_epochs import apply_all, end, open_machine


def committed(machine: PartitionStateMachine, group: str) -> tuple[int | None, int, str]:
    return (
        machine.consumer_offsets.get(group),
        machine.committed_epoch(group),
        machine.committed_metadata(group),
    )


@pytest.mark.parametrize(
    "command",
    [CommitOffset("g", 7, True, NO_LEADER_EPOCH, "t=1"), CommitOffset("g", 7, False, 3, "é🙂"),
     TxnOffset("g", 9, 7, 3, 11, NO_LEADER_EPOCH, "x" * OFFSET_METADATA_MAX)],
    ids=repr,
)  # fmt: skip
def test_an_offset_command_with_metadata_round_trips_in_its_third_form(
    command: CommitOffset | TxnOffset,
) -> None:
    data = commands.encode(command)
    assert len(msgpack.unpackb(data)) == (7 if isinstance(command, CommitOffset) else 9)
    assert commands.decode(data) == command


def test_an_offset_command_without_metadata_keeps_its_earlier_forms_bytes() -> None:
    assert len(msgpack.unpackb(commands.encode(CommitOffset("g", 7, True, 3)))) == 6
    assert len(msgpack.unpackb(commands.encode(TxnOffset("g", 9, 7, 3, 11)))) == 7
    with pytest.raises(commands.InvalidCommand):
        commands.decode(msgpack.packb([1, 2, "g", 7, False, -1, 5], use_bin_type=True))


def test_metadata_is_stored_replaced_by_the_same_offset_and_forgotten_with_it(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 3, "time 1"))
    assert committed(machine, "g") == (10, 3, "time 1")
    apply_all(machine, CommitOffset("g", 10, False, NO_LEADER_EPOCH, "time 2"))  # its epoch kept
    assert committed(machine, "g") == (10, 3, "time 2")
    apply_all(machine, CommitOffset("g", 4, False, 9, "behind"))  # an instance commit never goes back
    assert committed(machine, "g") == (10, 3, "time 2")
    apply_all(machine, CommitOffset("g", 12, True))  # a commit with no metadata: Kafka's ""
    assert committed(machine, "g") == (12, NO_LEADER_EPOCH, "")
    apply_all(
        machine, CommitOffset("g", 13, True, 1, "m"), CommitOffset("h", 1, True, 7, "n"), DeleteOffset("g")
    )
    assert committed(machine, "g") == (None, NO_LEADER_EPOCH, "") and committed(machine, "h") == (1, 7, "n")


def test_a_transactions_metadata_reaches_its_commit_and_goes_with_its_abort(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 2, "before"), TxnOffset("g", 20, 7, 0, 1, 6, "aborted"))
    assert committed(machine, "g") == (10, 2, "before")  # pending: not visible yet
    apply_all(machine, end(7, commit=False, transaction=1))
    assert committed(machine, "g") == (10, 2, "before") and not machine.txn_offset_metadata
    apply_all(machine, TxnOffset("g", 30, 7, 0, 2, 8, "kept"), TxnOffset("h", 5, 7, 0, 2), end(7, True, 2))
    assert committed(machine, "g") == (30, 8, "kept") and committed(machine, "h") == (5, NO_LEADER_EPOCH, "")
    assert not machine.txn_offset_metadata


def test_metadata_survives_a_snapshot_and_a_snapshot_without_any_has_none_of_its_keys(
    tmp_path: pathlib.Path,
) -> None:
    machine = open_machine(tmp_path)
    apply_all(machine, CommitOffset("g", 10, True, 3))
    assert not {"consumer_offset_metadata", "txn_offset_metadata"} & set(
        msgpack.unpackb(machine.snapshot() or b"")
    )
    apply_all(machine, CommitOffset("g", 11, True, 3, "time"), TxnOffset("h", 4, 7, 0, 1, 5, "pending"))
    again = PartitionStateMachine(machine.log)
    again.restore(machine.snapshot() or b"")
    assert committed(again, "g") == (11, 3, "time")
    apply_all(again, end(7, commit=True, transaction=1))
    assert committed(again, "h") == (4, 5, "pending")


def test_the_bound_is_kafkas_counted_in_utf16_units() -> None:
    check_offset_metadata("m" * OFFSET_METADATA_MAX)
    check_offset_metadata("é" * OFFSET_METADATA_MAX)  # one unit each
    with pytest.raises(OffsetMetadataTooLarge, match="4097 characters"):
        check_offset_metadata("m" * (OFFSET_METADATA_MAX + 1))
    check_offset_metadata("🙂" * (OFFSET_METADATA_MAX // 2))  # each two units, as Java counts
    with pytest.raises(OffsetMetadataTooLarge, match="4097 characters"):  # 2,049 code points
        check_offset_metadata("🙂" * (OFFSET_METADATA_MAX // 2) + "m")


class _Level1:
    """Finalized levels of a cluster not yet at ``raftlog.version`` 2 (mid-upgrade)."""

    def allows(self, fmt: object) -> bool:
        return False


def test_until_the_cluster_is_at_the_level_a_commit_carries_no_metadata_and_is_not_refused() -> None:
    """A node of the release before cannot read the third form: until ``raftlog.version`` 2 is
    finalized the commit goes in its earlier form (its metadata read back as ""), as Kafka Streams
    commits on through a rolling upgrade."""
    from partitions.consumers.offsets import GroupOffsets

    before = GroupOffsets(data=None, features=_Level1())  # type: ignore[arg-type]
    assert before._details(3, "time") == {}
    assert GroupOffsets(data=None)._details(3, "time") == {"leader_epoch": 3, "metadata": "time"}  # type: ignore[arg-type]
    assert GroupOffsets(data=None)._details(NO_LEADER_EPOCH, "") == {}  # type: ignore[arg-type]
