"""Kafka's transaction version 2 (KIP-890's second part) without I/O: the replicated table's epoch bump at
every end, the retry of an end answered again, the producer id renewed once the epochs are spent, the
formats of the release before kept while it is not used, and the coordinator's markers carrying the
bumped epoch, gated on ``transaction.version`` 2 being finalized."""

from __future__ import annotations

import random

import msgpack
import pytest

from partitions.errors import InvalidTxnState, ProducerFenced
from partitions.features import RAFTLOG_VERSION, TRANSACTION_VERSION, Features
from partitions.groups.assignors import TopicPartition
from partitions.transactions.coordinator import TransactionCoordinator
from partitions.transactions.errors import ConcurrentTransactions
from partitions.transactions.state import (
    EPOCH_BUMP_MAX,
    EPOCH_MAX,
    NO_PRODUCER,
    AddPartitions,
    Complete,
    EndTransaction,
    InitProducer,
    TimeOut,
    Transaction,
    TransactionTable,
    TxnChanged,
    TxnCommand,
    TxnState,
    decode,
    encode,
)
from tests.partitions.transactions.test_transaction_coordinator import Clock, Markers, MemoryLog
from tests.waiting import wait_until

T0 = TopicPartition("orders", 0)
TID = "payments-1"


def _apply(table: TransactionTable, command: TxnCommand) -> object:
    return table.apply(encode(command))


def _row(table: TransactionTable) -> Transaction:
    return table.transactions[TID]


def _ongoing(table: TransactionTable, epoch_from: int = 0) -> Transaction:
    if TID not in table.transactions:
        assert isinstance(_apply(table, InitProducer(TID, 60_000, 7, NO_PRODUCER, -1, 10, 3)), TxnChanged)
    row = _row(table)
    added = _apply(table, AddPartitions(TID, row.producer_id, row.producer_epoch, (T0,), 20, 3))
    assert isinstance(added, TxnChanged), added
    return _row(table)


def _end(table: TransactionTable, pid: int, epoch: int, commit: bool = True, **kw: int) -> object:
    return _apply(table, EndTransaction(TID, pid, epoch, commit, 30, 3, True, kw.get("next_id", NO_PRODUCER)))


def test_every_end_bumps_the_epoch_and_fences_the_transaction_it_ended() -> None:
    table = TransactionTable()
    begun = _ongoing(table)
    pid, epoch = begun.producer_id, begun.producer_epoch
    decided = _end(table, pid, epoch)
    assert isinstance(decided, TxnChanged) and decided.transaction is not None
    prepared = decided.transaction
    assert (prepared.state, prepared.producer_epoch) == (TxnState.PREPARE_COMMIT, epoch + 1)
    assert (prepared.last_producer_id, prepared.last_producer_epoch, prepared.bumped) == (pid, epoch, True)
    _apply(table, Complete(TID, pid, epoch + 1, 40, 3))  # the markers, at the bumped epoch, are written
    assert (_row(table).state, _row(table).producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch + 1)
    # a zombie of the ended transaction, at its epoch, is fenced; the producer goes on at the next one
    late = _apply(table, AddPartitions(TID, pid, epoch, (T0,), 50, 3))
    assert isinstance(late, ProducerFenced)
    assert _ongoing(table).producer_epoch == epoch + 1
    again = _end(table, pid, epoch + 1, commit=False)
    assert isinstance(again, TxnChanged) and again.transaction is not None
    assert again.transaction.producer_epoch == epoch + 2


def test_an_end_asked_again_with_the_epoch_it_bumped_is_answered_as_it_was() -> None:
    table = TransactionTable()
    begun = _ongoing(table)
    pid, epoch = begun.producer_id, begun.producer_epoch
    _end(table, pid, epoch)
    assert isinstance(_end(table, pid, epoch), ConcurrentTransactions)  # its markers are being written
    assert isinstance(_end(table, pid, epoch, commit=False), InvalidTxnState)  # the other outcome
    _apply(table, Complete(TID, pid, epoch + 1, 40, 3))
    retried = _end(table, pid, epoch)
    assert isinstance(retried, TxnChanged) and not retried.changed  # answered again, nothing changed
    assert _row(table).producer_epoch == epoch + 1
    # a commit at the epoch it answered, before a transaction began at it, commits nothing (as Kafka 4.1's)
    assert isinstance(_end(table, pid, epoch + 1), InvalidTxnState)


def test_spent_epochs_go_on_with_the_next_producer_id_once_the_markers_are_written() -> None:
    table = TransactionTable()
    _ongoing(table)
    row = _row(table)
    spent = Transaction(**{**{f: getattr(row, f) for f in row.__slots__}, "producer_epoch": EPOCH_BUMP_MAX})
    table.transactions = {TID: spent}  # type: ignore[assignment]  # a producer 32,766 transactions on
    decided = _end(table, row.producer_id, EPOCH_BUMP_MAX, next_id=2024)
    assert isinstance(decided, TxnChanged) and decided.transaction is not None
    # the markers carry the old id at the last epoch; the producer goes on with the new id at 0
    assert (decided.transaction.producer_id, decided.transaction.producer_epoch) == (
        row.producer_id,
        EPOCH_MAX,
    )
    assert decided.transaction.next_producer_id == 2024
    _apply(table, Complete(TID, row.producer_id, EPOCH_MAX, 40, 3))
    done = _row(table)
    assert (done.producer_id, done.producer_epoch, done.next_producer_id) == (2024, 0, NO_PRODUCER)
    retried = _end(table, row.producer_id, EPOCH_BUMP_MAX)  # its answer lost: asked with the old id
    assert isinstance(retried, TxnChanged) and not retried.changed


def test_a_timeout_under_version_2_answers_the_late_commit_as_an_end_of_the_other_outcome() -> None:
    """As Kafka 4 (which aborts with the cluster's transaction version): the producer whose transaction
    the coordinator aborted is told INVALID_TXN_STATE for its late commit (EndTxn v5), and fenced for any
    version 1 request; before version 2 is finalized, fenced."""
    for bump, late in ((True, InvalidTxnState), (False, ProducerFenced)):
        table = TransactionTable()
        begun = _ongoing(table)
        pid, epoch = begun.producer_id, begun.producer_epoch
        _apply(table, TimeOut(TID, pid, epoch, 90_000, 3, bump))
        assert _row(table).producer_epoch == epoch + 1  # fenced either way
        _apply(table, Complete(TID, pid, epoch + 1, 90_001, 3))
        assert isinstance(_end(table, pid, epoch), late)
        v1 = _apply(table, EndTransaction(TID, pid, epoch, True, 90_002, 3))
        assert isinstance(v1, ProducerFenced)
    assert msgpack.unpackb(encode(TimeOut(TID, 7, 0, 15, 3))) == [6, TID, 7, 0, 15, 3]  # the release before's


def test_an_end_without_the_bump_is_the_release_before_s_command_and_row() -> None:
    v1 = EndTransaction(TID, 7, 0, True, 14, 2)
    assert msgpack.unpackb(encode(v1)) == [5, TID, 7, 0, True, 14, 2]  # as the release before wrote it
    assert decode(msgpack.packb([5, TID, 7, 0, True, 14, 2])) == v1
    v2 = EndTransaction(TID, 7, 0, True, 14, 2, True)
    assert decode(encode(v2)) == v2
    renewed = EndTransaction(TID, 7, EPOCH_BUMP_MAX, True, 14, 2, True, 99)
    assert decode(encode(renewed)) == renewed
    table = TransactionTable()
    begun = _ongoing(table)
    _apply(table, EndTransaction(TID, begun.producer_id, begun.producer_epoch, True, 30, 3))
    assert _row(table).producer_epoch == begun.producer_epoch  # version 1: the epoch kept
    assert [len(r) for r in table.to_rows()] == [12]  # the snapshot row the release before reads
    _apply(table, Complete(TID, begun.producer_id, begun.producer_epoch, 40, 3))
    _ongoing(table)
    _end(table, begun.producer_id, begun.producer_epoch)
    rows = table.to_rows()
    assert [len(r) for r in rows] == [14]
    assert TransactionTable.from_rows(rows).transactions == table.transactions


async def test_the_coordinator_bumps_only_once_version_2_is_finalized_and_its_markers_carry_the_bump() -> (
    None
):
    finalized = {RAFTLOG_VERSION: 2, TRANSACTION_VERSION: 1}
    log, markers, clock = MemoryLog(), Markers(), Clock()
    c = TransactionCoordinator(
        "n1", log.over("n1"), markers, wall=clock, rng=random.Random(7), marker_retry_s=(0.001, 0.004),
        features=Features(lambda: finalized),
    )  # fmt: skip
    await c.ensure_topic()
    given = await c.init_producer_id(TID, 10_000, -1, -1)
    pid, epoch = given.producer_id, given.producer_epoch

    async def transaction(at: int, bump: bool) -> tuple[int, int]:
        await c.add_partitions(TID, pid, at, [T0])
        answered = await c.end_transaction(TID, pid, at, True, bump=bump)
        table = log.tables[c.coordinator_partition(TID)]
        await wait_until(
            lambda: not table.transactions[TID].state.preparing,
            "the transaction's markers written and its end complete",
            10,
            every_s=0.001,
        )
        return answered.producer_id, answered.producer_epoch

    assert await transaction(epoch, bump=True) == (pid, epoch)  # a cluster mid-upgrade: version 1
    assert markers.written[-1][2] == epoch
    finalized[TRANSACTION_VERSION] = 2
    assert await transaction(epoch, bump=True) == (pid, epoch + 1)
    assert markers.written[-1][1:3] == (pid, epoch + 1)  # the marker fences the ended epoch's batches
    assert await transaction(epoch + 1, bump=False) == (pid, epoch + 1)  # EndTxn v4: version 1


def _ended(table: TransactionTable, commit: bool) -> Transaction:
    """The id's transaction ended at version 2 (Complete*, its epoch bumped by the end)."""
    begun = _ongoing(table)
    _end(table, begun.producer_id, begun.producer_epoch, commit)
    _apply(table, Complete(TID, begun.producer_id, begun.producer_epoch + 1, 40, 3))
    return _row(table)


def _empty_abort(table: TransactionTable, row: Transaction, now: int = 300) -> Transaction:
    """Kafka's empty abort (``prepareAbortOrCommit`` with noPartitionAdded): the epoch bumped, nothing to
    mark, the transaction's start (its ordinal) now."""
    pid, epoch = row.producer_id, row.producer_epoch
    aborted = _apply(table, EndTransaction(TID, pid, epoch, False, now, 3, True))
    assert isinstance(aborted, TxnChanged) and aborted.changed and aborted.transaction is not None, aborted
    prepared = aborted.transaction
    assert (prepared.state, prepared.producer_id, prepared.producer_epoch) == (
        TxnState.PREPARE_ABORT, pid, epoch + 1
    )  # fmt: skip
    assert (prepared.last_producer_id, prepared.last_producer_epoch, prepared.bumped) == (pid, epoch, True)
    assert not prepared.partitions and not prepared.groups
    assert prepared.started_ms == max(now, row.started_ms + 1)
    return prepared


def test_an_abort_of_a_transaction_that_added_nothing_bumps_the_epoch_at_version_2() -> None:
    """As Kafka 4's coordinator for EndTxn v5: an abort in Empty, CompleteCommit or CompleteAbort at the
    producer's epoch is an empty abort (franz-go sends one after a transaction none of whose produces
    succeeded); the commit of nothing is INVALID_TXN_STATE."""
    table = TransactionTable()
    assert isinstance(_apply(table, InitProducer(TID, 60_000, 7, NO_PRODUCER, -1, 10, 3)), TxnChanged)
    empty = _row(table)
    assert isinstance(_end(table, empty.producer_id, empty.producer_epoch, commit=True), InvalidTxnState)
    prepared = _empty_abort(table, empty)
    pid, epoch = prepared.producer_id, prepared.producer_epoch
    assert isinstance(_end(table, pid, epoch - 1, commit=False), ConcurrentTransactions)  # asked again
    assert isinstance(_end(table, pid, epoch - 1, commit=True), InvalidTxnState)
    # at the bumped epoch while the markers are written: asked again once they are (Kafka's KAFKA-18464),
    # never fenced (franz-go gives its producer up on PRODUCER_FENCED)
    assert isinstance(_end(table, pid, epoch, commit=False), ConcurrentTransactions)
    assert isinstance(_end(table, pid, epoch, commit=True), ConcurrentTransactions)
    assert isinstance(_apply(table, Complete(TID, pid, epoch, 301, 3)), TxnChanged)
    assert (_row(table).state, _row(table).producer_epoch) == (TxnState.COMPLETE_ABORT, epoch)
    assert TransactionTable.from_rows(table.to_rows()).transactions == table.transactions  # a snapshot's
    retried = _end(table, pid, epoch - 1, commit=False)  # its answer lost: answered again, nothing changed
    assert isinstance(retried, TxnChanged) and not retried.changed
    # the producer goes on at the bumped epoch: its next transaction, and its fence of the old one
    assert isinstance(_apply(table, AddPartitions(TID, pid, epoch - 1, (T0,), 302, 3)), ProducerFenced)
    assert _ongoing(table).producer_epoch == epoch


def test_after_an_end_at_version_2_an_abort_is_an_empty_abort_and_a_commit_invalid() -> None:
    for commit in (True, False):
        table = TransactionTable()
        done = _ended(table, commit)
        pid, epoch = done.producer_id, done.producer_epoch
        # the end's own retry keeps its answers: the same outcome NONE, the other INVALID_TXN_STATE
        same = _end(table, pid, epoch - 1, commit)
        assert isinstance(same, TxnChanged) and not same.changed
        assert isinstance(_end(table, pid, epoch - 1, not commit), InvalidTxnState)
        # at the epoch the end answered: a commit of nothing is INVALID_TXN_STATE, an abort bumps again
        assert isinstance(_end(table, pid, epoch, commit=True), InvalidTxnState)
        prepared = _empty_abort(table, done)
        _apply(table, Complete(TID, pid, prepared.producer_epoch, 301, 3))
        assert (_row(table).state, _row(table).producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
        _empty_abort(table, _row(table), now=5)  # and again; its ordinal outdoes the last, clock or not


def test_an_empty_abort_past_the_epochs_goes_on_with_the_next_producer_id() -> None:
    table = TransactionTable()
    assert isinstance(_apply(table, InitProducer(TID, 60_000, 7, NO_PRODUCER, -1, 10, 3)), TxnChanged)
    row = _row(table)
    spent = Transaction(**{**{f: getattr(row, f) for f in row.__slots__}, "producer_epoch": EPOCH_BUMP_MAX})
    table.transactions = {TID: spent}  # type: ignore[assignment]  # a producer 32,766 epochs on
    decided = _apply(table, EndTransaction(TID, row.producer_id, EPOCH_BUMP_MAX, False, 30, 3, True, 2024))
    assert isinstance(decided, TxnChanged) and decided.transaction is not None, decided
    assert (decided.transaction.producer_epoch, decided.transaction.next_producer_id) == (EPOCH_MAX, 2024)
    _apply(table, Complete(TID, row.producer_id, EPOCH_MAX, 40, 3))
    done = _row(table)
    assert (done.state, done.producer_id, done.producer_epoch) == (TxnState.COMPLETE_ABORT, 2024, 0)
    retried = _apply(table, EndTransaction(TID, row.producer_id, EPOCH_BUMP_MAX, False, 50, 3, True))
    assert isinstance(retried, TxnChanged) and not retried.changed  # the overflow's retry


def test_at_version_1_an_abort_of_nothing_stays_invalid() -> None:
    """EndTxn v0-4 (librdkafka, and every client while transaction.version is 1): as before, and as
    Kafka's version 1 path answers it."""
    table = TransactionTable()
    assert isinstance(_apply(table, InitProducer(TID, 60_000, 7, NO_PRODUCER, -1, 10, 3)), TxnChanged)
    row = _row(table)
    v1 = _apply(table, EndTransaction(TID, row.producer_id, row.producer_epoch, False, 30, 3))
    assert isinstance(v1, InvalidTxnState)
    assert _row(table) == row


async def test_the_coordinator_answers_an_empty_abort_with_the_bumped_epoch_and_completes_it() -> None:
    log, markers, clock = MemoryLog(), Markers(), Clock()
    c = TransactionCoordinator(
        "n1", log.over("n1"), markers, wall=clock, rng=random.Random(7), marker_retry_s=(0.001, 0.004)
    )
    await c.ensure_topic()
    given = await c.init_producer_id(TID, 10_000, -1, -1)
    answered = await c.end_transaction(TID, given.producer_id, given.producer_epoch, False, bump=True)
    assert (answered.producer_id, answered.producer_epoch) == (given.producer_id, given.producer_epoch + 1)
    table = log.tables[c.coordinator_partition(TID)]
    await wait_until(
        lambda: table.transactions[TID].state is TxnState.COMPLETE_ABORT,
        "the abort with no partition complete",
        10,
        every_s=0.001,
    )
    assert markers.written == []  # no partition: no marker
    assert c.counters["transaction_epoch_bumps"] == 1
    with pytest.raises(InvalidTxnState):
        await c.end_transaction(TID, given.producer_id, answered.producer_epoch, True, bump=True)
