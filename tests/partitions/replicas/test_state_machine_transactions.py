"""A partition's side of transactions (docs/decisions/0019-transactions.md): markers written as control
batches, fencing by epoch, transactional offsets pending until the marker, and all of it the same after a
snapshot and a replay."""

from __future__ import annotations

import pathlib
import struct

import crc32c

from partitions import commands
from partitions.errors import CoordinatorFenced, InvalidTxnState, ProducerFenced
from partitions.replicas import state_machine
from partitions.replicas.state_machine import (
    MarkerWritten,
    PartitionStateMachine,
    Produced,
    Refused,
    TxnOffsetPending,
)
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch
from raftlog.storage.log import last_stable_offset

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=128)


def open_machine(path: pathlib.Path) -> PartitionStateMachine:
    return PartitionStateMachine(Log.open(str(path), CONFIG))


def txn_produce(
    producer_id: int,
    sequence: int,
    epoch: int = 0,
    values: tuple[bytes, ...] = (b"v",),
    transaction: int = commands.NO_TRANSACTION,
) -> bytes:
    """A transactional batch's produce; with ``transaction``, Kafka's (kind 10) bound to that ordinal."""
    records = [ProducerRecord(v, timestamp_ms=1_000) for v in values]
    batch = bytearray(encode_batch(0, records, 0, 1_000, producer_id, sequence, producer_epoch=epoch))
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    contiguous = transaction != commands.NO_TRANSACTION
    return commands.encode(commands.Produce(bytes(batch), contiguous, transaction))


def end(
    producer_id: int,
    commit: bool,
    epoch: int = 0,
    write_control: bool = True,
    coordinator_epoch: int = 5,
    transaction: int = 1,
) -> bytes:
    marker = commands.TxnMarker(
        producer_id, epoch, commit, coordinator_epoch, 2_000, write_control, transaction
    )
    return commands.encode(marker)


def txn_offset(group: str, offset: int, producer_id: int, epoch: int = 0, transaction: int = 1) -> bytes:
    return commands.encode(commands.TxnOffset(group, offset, producer_id, epoch, transaction))


def test_a_marker_ends_the_transaction_with_a_control_batch(tmp_path: pathlib.Path) -> None:
    machine = open_machine(tmp_path)
    assert machine.apply(1, 1, txn_produce(7, 0, values=(b"a", b"b"))) == Produced(0, 2)
    assert last_stable_offset(machine.log) == 0
    assert machine.apply(2, 1, end(7, commit=False)) == MarkerWritten(2)
    assert machine.high_watermark == 3 and last_stable_offset(machine.log) == 3
    (batch,) = [b for b in machine.log.read_batches(2, 1 << 20)]
    assert batch.header.is_control and batch.header.producer_id == 7
    assert [(r.producer_id, r.first_offset) for r in machine.log.transactions.rows] == [(7, 0)]
    # an offset-only partition: no control batch, nothing appended
    assert machine.apply(3, 1, end(8, commit=True, write_control=False)) == MarkerWritten(-1)
    assert machine.high_watermark == 3


def test_a_marker_of_a_newer_epoch_fences_the_older_producer(tmp_path: pathlib.Path) -> None:
    """The coordinator aborts a producer's transaction with its epoch bumped (a new producer took the
    transactional id, or the transaction timed out): the zombie's later writes are refused."""
    machine = open_machine(tmp_path)
    machine.apply(1, 1, txn_produce(7, 0, epoch=0))
    assert machine.apply(2, 1, end(7, commit=False, epoch=1)) == MarkerWritten(1)
    late = machine.apply(3, 1, txn_produce(7, 1, epoch=0))
    assert isinstance(late, Refused) and isinstance(late.error, ProducerFenced)
    stale = machine.apply(4, 1, end(7, commit=True, epoch=0))
    assert isinstance(stale, Refused) and isinstance(stale.error, ProducerFenced)
    offset = machine.apply(5, 1, txn_offset("g", 3, 7, epoch=0))
    assert isinstance(offset, Refused) and isinstance(offset.error, ProducerFenced)
    # the new epoch writes from sequence 0
    assert machine.apply(6, 1, txn_produce(7, 0, epoch=1)) == Produced(2, 3)
    assert machine.high_watermark == 3


def test_a_deposed_coordinators_marker_is_refused(tmp_path: pathlib.Path) -> None:
    """The successor ended the transaction and the producer began its next one at the same epoch: the old
    coordinator's marker, still in flight, must not end the new transaction early."""
    machine = open_machine(tmp_path)
    machine.apply(1, 1, txn_produce(7, 0))
    assert machine.apply(2, 1, end(7, commit=True, coordinator_epoch=6)) == MarkerWritten(1)
    machine.apply(3, 1, txn_produce(7, 1))  # the next transaction, open from offset 2
    late = machine.apply(4, 1, end(7, commit=False, coordinator_epoch=5))
    assert isinstance(late, Refused) and isinstance(late.error, CoordinatorFenced)
    assert last_stable_offset(machine.log) == 2  # still open
    snapshot = machine.snapshot() or b""
    again = PartitionStateMachine(machine.log)
    again.restore(snapshot)
    late = again.apply(5, 1, end(7, commit=False, coordinator_epoch=5))
    assert isinstance(late, Refused) and isinstance(late.error, CoordinatorFenced)
    assert again.apply(6, 1, end(7, commit=True, coordinator_epoch=6)) == MarkerWritten(3)


def test_transactional_offsets_are_visible_if_and_only_if_the_transaction_commits(
    tmp_path: pathlib.Path,
) -> None:
    machine = open_machine(tmp_path)
    machine.apply(1, 1, commands.encode(commands.CommitOffset("g", 10)))
    assert machine.apply(2, 1, txn_offset("g", 20, producer_id=7)) == TxnOffsetPending("g", 20)
    assert machine.consumer_offsets["g"] == 10 and machine.pending_offset("g")
    machine.apply(3, 1, end(7, commit=False, write_control=False))
    assert machine.consumer_offsets["g"] == 10 and not machine.pending_offset("g")
    machine.apply(4, 1, txn_offset("g", 5, producer_id=7, transaction=2))
    machine.apply(5, 1, end(7, commit=True, write_control=False, transaction=2))
    assert machine.consumer_offsets["g"] == 5  # a transaction's commit may move an offset back, as Kafka's
    assert not machine.pending_offset("g")


def test_an_offset_that_outlived_its_transaction_is_refused(tmp_path: pathlib.Path) -> None:
    """A TxnOffsetCommit timed out at the client, which aborted; its offset reached the partition after
    the abort marker. Held pending, the producer's next transaction would have committed it."""
    machine = open_machine(tmp_path)
    machine.apply(1, 1, commands.encode(commands.CommitOffset("g", 235)))
    machine.apply(2, 1, end(7, commit=False, write_control=False, transaction=10))
    late = machine.apply(3, 1, txn_offset("g", 245, producer_id=7, transaction=10))
    assert isinstance(late, Refused) and isinstance(late.error, InvalidTxnState)
    assert not machine.pending_offset("g")
    assert machine.apply(4, 1, txn_offset("g", 240, producer_id=7, transaction=11)) == TxnOffsetPending(
        "g", 240
    )
    machine.apply(5, 1, end(7, commit=True, write_control=False, transaction=11))
    assert machine.consumer_offsets["g"] == 240
    again = PartitionStateMachine(machine.log)  # the ordinal survives a snapshot
    again.restore(machine.snapshot() or b"")
    late = again.apply(6, 1, txn_offset("g", 245, producer_id=7, transaction=11))
    assert isinstance(late, Refused) and isinstance(late.error, InvalidTxnState)


def test_a_batch_that_outlived_its_transaction_is_refused(tmp_path: pathlib.Path) -> None:
    """A transactional batch checked while transaction 10 was open, applied after its abort marker: at
    the same epoch (transaction version 1) it would open a transaction that transaction 11's commit marker
    ends, and read_committed readers would read the aborted record."""
    machine = open_machine(tmp_path)
    assert machine.apply(1, 1, txn_produce(7, 0, transaction=10)) == Produced(0, 1)
    assert machine.apply(2, 1, end(7, commit=False, transaction=10)) == MarkerWritten(1)
    late = machine.apply(3, 1, txn_produce(7, 1, values=(b"late",), transaction=10))
    assert isinstance(late, Refused) and isinstance(late.error, InvalidTxnState)
    assert machine.high_watermark == 2 and last_stable_offset(machine.log) == 2  # nothing opened
    # a retry of the batch applied before the marker is answered its offsets, as any duplicate
    assert machine.apply(4, 1, txn_produce(7, 0, transaction=10)) == Produced(0, 1, duplicate=True)
    # the next transaction, from the sequence after the last written: the refused batch took none
    assert machine.apply(5, 1, txn_produce(7, 1, values=(b"next",), transaction=11)) == Produced(2, 3)
    assert machine.apply(6, 1, end(7, commit=True, transaction=11)) == MarkerWritten(3)
    again = PartitionStateMachine(machine.log)  # the ordinal survives a snapshot
    again.restore(machine.snapshot() or b"")
    late = again.apply(7, 1, txn_produce(7, 2, transaction=11))
    assert isinstance(late, Refused) and isinstance(late.error, InvalidTxnState)
    # a batch of no bound (a previous form's, replayed) is applied as before
    assert again.apply(8, 1, txn_produce(7, 2)) == Produced(4, 5)


def test_pending_offsets_are_bounded(tmp_path: pathlib.Path, monkeypatch: object) -> None:
    monkeypatch.setattr(state_machine, "TXN_PRODUCERS_MAX", 2)  # type: ignore[attr-defined]
    monkeypatch.setattr(state_machine, "TXN_GROUPS_MAX", 2)  # type: ignore[attr-defined]
    machine = open_machine(tmp_path)
    assert isinstance(machine.apply(1, 1, txn_offset("a", 1, 1)), TxnOffsetPending)
    assert isinstance(machine.apply(2, 1, txn_offset("b", 1, 1)), TxnOffsetPending)
    refused = machine.apply(3, 1, txn_offset("c", 1, 1))
    assert isinstance(refused, Refused) and isinstance(refused.error, InvalidTxnState)
    assert isinstance(machine.apply(4, 1, txn_offset("a", 1, 2)), TxnOffsetPending)
    refused = machine.apply(5, 1, txn_offset("a", 1, 3))
    assert isinstance(refused, Refused) and isinstance(refused.error, InvalidTxnState)


def test_snapshot_and_replay_give_the_same_partition(tmp_path: pathlib.Path) -> None:
    entries = [
        txn_produce(1, 0),
        txn_produce(2, 0, values=(b"x", b"y")),
        txn_offset("g", 4, 1),
        end(1, commit=False),
        txn_produce(2, 1),
        txn_offset("h", 9, 2),
        end(2, commit=True),
        txn_produce(3, 0),
        txn_offset("g", 6, 3),
    ]
    machine = open_machine(tmp_path)
    snapshot = b""
    for index, command in enumerate(entries, 1):
        machine.apply(index, 1, command)
        if index == 4:
            snapshot = machine.snapshot() or b""
    size = machine.log.size_bytes
    expected = (
        machine.high_watermark,
        dict(machine.consumer_offsets),
        {p: dict(g) for p, g in machine.txn_offsets.items()},
        last_stable_offset(machine.log),
        machine.log.transactions.rows,
    )
    assert expected[1] == {"h": 9} and expected[2] == {3: {"g": 6}}
    machine.log.close()

    again = open_machine(tmp_path)
    again.restore(snapshot)
    for index, command in enumerate(entries[4:], 5):
        again.apply(index, 1, command)
    assert again.log.size_bytes == size, "a replayed marker must not be written twice"
    assert (
        again.high_watermark,
        dict(again.consumer_offsets),
        {p: dict(g) for p, g in again.txn_offsets.items()},
        last_stable_offset(again.log),
        again.log.transactions.rows,
    ) == expected
    # the pending offset of the open transaction is still pending, and its marker still ends it
    assert again.pending_offset("g")
    again.apply(20, 1, end(3, commit=True))
    assert again.consumer_offsets["g"] == 6 and last_stable_offset(again.log) == again.high_watermark


def test_the_new_commands_round_trip() -> None:
    for command in (
        commands.TxnMarker(2**62, 32767, True, 0, -5, False, 2**40),
        commands.TxnOffset("g", 0, 0, 0, -1),
    ):
        assert commands.decode(commands.encode(command)) == command
