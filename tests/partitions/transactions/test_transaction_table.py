"""The transactional ids' replicated table without I/O (``partitions.transactions.state``): its codec, a
transaction's life, epoch bumps and fencing, timeouts, its bounds (each abused), expiry, and the table in
the partition's state machine and snapshot."""

from __future__ import annotations

import pathlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions import commands
from partitions.errors import InvalidCommand, InvalidTxnState, ProducerFenced
from partitions.groups.assignors import TopicPartition
from partitions.replicas.state_machine import PartitionStateMachine
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    TransactionLimitReached,
)
from partitions.transactions.state import (
    EPOCH_BUMP_MAX,
    EPOCH_MAX,
    NO_PRODUCER,
    NO_TIME,
    AddGroup,
    AddOffsetPartitions,
    AddPartitions,
    Complete,
    EndTransaction,
    Expire,
    InitProducer,
    Limits,
    TimeOut,
    Transaction,
    TransactionTable,
    TxnChanged,
    TxnCommand,
    TxnsExpired,
    TxnState,
    decode,
    encode,
)
from raftlog.storage.log import Log

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
TID = "payments-1"


def _apply(table: TransactionTable, command: TxnCommand) -> object:
    return table.apply(encode(command))


def _init(table: TransactionTable, tid: str = TID, fresh: int = 1000, now: int = 10, **kw: int) -> object:
    expected = kw.get("expected_id", NO_PRODUCER), kw.get("expected_epoch", -1)
    limits = Limits(transactional_ids=kw["ids_max"]) if "ids_max" in kw else Limits()
    return _apply(table, InitProducer(tid, 60_000, fresh, *expected, now, 3, limits))


def _row(table: TransactionTable, tid: str = TID) -> Transaction:
    return table.transactions[tid]


def _begun(table: TransactionTable, *tps: TopicPartition, now: int = 20) -> Transaction:
    row = _row(table)
    assert isinstance(
        _apply(table, AddPartitions(TID, row.producer_id, row.producer_epoch, tps or (T0,), now, 3)),
        TxnChanged,
    )
    return _row(table)


def test_every_command_survives_its_codec_and_malformed_ones_are_refused() -> None:
    every: list[TxnCommand] = [
        InitProducer(TID, 60_000, 7, NO_PRODUCER, -1, 10, 2),
        InitProducer(TID, 1, 7, 5, 3, 10, 2, Limits(1, 2, 3, 4)),
        AddPartitions(TID, 7, 0, (T0, T1), 11, 2),
        AddGroup(TID, 7, 0, "billing", 12, 2),
        AddOffsetPartitions(TID, 7, 0, "billing", (T1,), 13, 2),
        EndTransaction(TID, 7, 0, True, 14, 2),
        TimeOut(TID, 7, 0, 15, 3),
        Complete(TID, 7, 1, 16, 3),
        Expire((TID, "other"), 17, 100),
    ]
    for command in every:
        assert decode(encode(command)) == command
    for junk in (
        b"\xc1",
        msgpack.packb([99, TID]),
        msgpack.packb([5, TID, 7, 0, "yes", 14, 2]),  # commit must be a bool
        msgpack.packb([2, TID, 7, 0, [["t", -1]], 11, 2, [1, 2, 3, 4]]),  # no partition -1
        msgpack.packb([1, TID, 0, 7, -1, -1, 10, 2, [1, 2, 3, 4]]),  # a timeout of 0
        msgpack.packb([3, TID, 7, 2**15, "g", 12, 2, [1, 2, 3, 4]]),  # an epoch past int16
    ):
        with pytest.raises(InvalidCommand):
            decode(junk)
        assert isinstance(TransactionTable().apply(junk), InvalidCommand)  # returned, never raised


def test_a_transaction_lives_from_empty_through_ongoing_and_prepare_to_complete() -> None:
    table = TransactionTable()
    created = _init(table, fresh=1000, now=10)
    assert isinstance(created, TxnChanged)
    row = _row(table)
    assert (row.producer_id, row.producer_epoch, row.state, row.started_ms) == (
        1000,
        0,
        TxnState.EMPTY,
        NO_TIME,
    )
    row = _begun(table, T0, now=20)
    assert (row.state, row.started_ms, dict(row.partitions)) == (TxnState.ONGOING, 20, {T0: True})
    again = _apply(table, AddPartitions(TID, 1000, 0, (T0,), 25, 3))
    assert isinstance(again, TxnChanged) and not again.changed  # already in: nothing to replicate anew
    _apply(table, AddGroup(TID, 1000, 0, "billing", 30, 3))
    _apply(table, AddOffsetPartitions(TID, 1000, 0, "billing", (T0, T1), 31, 3))
    row = _row(table)
    # a partition written stays written; one only holding offsets gets no control batch
    assert dict(row.partitions) == {T0: True, T1: False} and row.groups == ("billing",)
    assert row.written(T0) and not row.written(T1) and table.open_partitions == 2
    _apply(table, EndTransaction(TID, 1000, 0, True, 40, 4))
    row = _row(table)
    assert (row.state, row.coordinator_epoch, row.started_ms) == (TxnState.PREPARE_COMMIT, 4, 20)
    assert not row.written(T0)  # decided: no write joins it any more
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, True, 41, 4)), ConcurrentTransactions)
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, False, 41, 4)), InvalidTxnState)
    assert isinstance(_apply(table, AddPartitions(TID, 1000, 0, (T1,), 42, 4)), ConcurrentTransactions)
    _apply(table, Complete(TID, 1000, 0, 50, 4))
    row = _row(table)
    assert (row.state, dict(row.partitions), row.groups) == (TxnState.COMPLETE_COMMIT, {}, ())
    assert table.open_partitions == 0
    retried = _apply(table, EndTransaction(TID, 1000, 0, True, 51, 4))  # the answer was lost: answered again
    assert isinstance(retried, TxnChanged) and not retried.changed
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, False, 52, 4)), InvalidTxnState)
    row = _begun(table, T1, now=60)  # the next transaction of the same producer and epoch
    assert (row.state, row.started_ms, dict(row.partitions)) == (TxnState.ONGOING, 60, {T1: True})


def test_offsets_join_a_transaction_only_for_a_group_it_added() -> None:
    table = TransactionTable()
    _init(table)
    refused = _apply(table, AddOffsetPartitions(TID, 1000, 0, "billing", (T0,), 20, 3))
    assert isinstance(refused, InvalidTxnState) and "AddOffsetsToTxn" in str(refused)
    _apply(table, AddGroup(TID, 1000, 0, "billing", 21, 3))
    assert _row(table).state is TxnState.ONGOING and _row(table).started_ms == 21
    assert isinstance(
        _apply(table, AddOffsetPartitions(TID, 1000, 0, "other", (T0,), 22, 3)), InvalidTxnState
    )


def test_an_empty_transaction_cannot_end() -> None:
    table = TransactionTable()
    _init(table)
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, True, 20, 3)), InvalidTxnState)
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, False, 20, 3)), InvalidTxnState)


def test_each_init_bumps_the_epoch_and_fences_the_older_producer_everywhere_it_asks() -> None:
    table = TransactionTable()
    _init(table, fresh=1000)
    _init(table, fresh=2000)  # the same id started again: the same producer id, the next epoch
    row = _row(table)
    assert (row.producer_id, row.producer_epoch) == (1000, 1)
    old = 0
    fenced = [
        _apply(table, AddPartitions(TID, 1000, old, (T0,), 20, 3)),
        _apply(table, AddGroup(TID, 1000, old, "g", 20, 3)),
        _apply(table, EndTransaction(TID, 1000, old, True, 20, 3)),
    ]
    assert all(isinstance(f, ProducerFenced) and f.current_epoch == 1 for f in fenced)
    assert isinstance(_apply(table, AddPartitions(TID, 999, 1, (T0,), 20, 3)), InvalidProducerIdMapping)
    assert isinstance(_apply(table, AddPartitions("never", 1000, 1, (T0,), 20, 3)), InvalidProducerIdMapping)
    assert _row(table).state is TxnState.EMPTY  # nothing refused changed anything


def test_a_new_producer_aborts_the_open_transaction_with_the_epoch_bumped_before_it_gets_one() -> None:
    table = TransactionTable()
    _init(table, fresh=1000)
    _begun(table, T0, T1)
    fencing = _init(table, fresh=2000, now=30)
    row = _row(table)
    assert isinstance(fencing, TxnChanged)
    # the zombie's epoch is spent: its abort markers carry epoch 1, which fences it in every partition
    assert (row.state, row.producer_epoch, dict(row.partitions)) == (
        TxnState.PREPARE_ABORT,
        1,
        {T0: True, T1: True},
    )
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, True, 31, 3)), ProducerFenced)
    assert isinstance(_init(table, fresh=2000, now=32), ConcurrentTransactions)  # asked again: completing
    _apply(table, Complete(TID, 1000, 1, 40, 3))
    assert _row(table).state is TxnState.COMPLETE_ABORT
    _init(table, fresh=2000, now=41)
    row = _row(table)
    assert (row.producer_id, row.producer_epoch, row.state) == (1000, 2, TxnState.EMPTY)


def test_spent_epochs_get_a_new_producer_id() -> None:
    table = TransactionTable()
    _init(table, fresh=1000)
    rows = table.to_rows()
    rows[0][2] = EPOCH_BUMP_MAX - 1
    table = TransactionTable.from_rows(rows)
    _init(table, fresh=2000)
    assert (_row(table).producer_id, _row(table).producer_epoch) == (1000, EPOCH_BUMP_MAX)
    _init(table, fresh=2000)
    row = _row(table)
    assert (row.producer_id, row.producer_epoch) == (2000, 0)
    assert (row.last_producer_id, row.last_producer_epoch) == (1000, EPOCH_BUMP_MAX)
    # an open transaction at the last epoch left to bump is still fenced by its abort
    _begun(table)
    rows = table.to_rows()
    rows[0][2] = EPOCH_BUMP_MAX
    table = TransactionTable.from_rows(rows)
    _init(table, fresh=3000)
    assert (_row(table).producer_epoch, _row(table).state) == (EPOCH_MAX, TxnState.PREPARE_ABORT)


def test_an_init_naming_the_producer_it_had_bumps_it_or_answers_a_lost_retry_again_else_is_fenced() -> None:
    table = TransactionTable()
    _init(table, fresh=1000)
    _init(table, expected_id=1000, expected_epoch=0)
    assert _row(table).producer_epoch == 1
    retried = _init(table, expected_id=1000, expected_epoch=0)  # the answer to the bump was lost
    assert isinstance(retried, TxnChanged) and not retried.changed and _row(table).producer_epoch == 1
    stale = _init(table, expected_id=1000, expected_epoch=5)
    assert isinstance(stale, ProducerFenced)
    assert isinstance(_init(table, expected_id=4242, expected_epoch=1), ProducerFenced)
    assert _row(table).producer_epoch == 1


def test_a_timeout_aborts_only_the_open_transaction_of_that_producer_and_fences_it() -> None:
    table = TransactionTable()
    _init(table)
    idle = _apply(table, TimeOut(TID, 1000, 0, 100, 5))
    assert isinstance(idle, TxnChanged) and not idle.changed and _row(table).state is TxnState.EMPTY
    _begun(table)
    timed_out = _apply(table, TimeOut(TID, 1000, 0, 100, 5))
    row = _row(table)
    assert isinstance(timed_out, TxnChanged) and timed_out.changed
    assert (row.state, row.producer_epoch, row.coordinator_epoch) == (TxnState.PREPARE_ABORT, 1, 5)
    assert isinstance(_apply(table, EndTransaction(TID, 1000, 0, True, 101, 5)), ProducerFenced)
    assert isinstance(_apply(table, TimeOut(TID, 1000, 0, 102, 5)), ProducerFenced)  # proposed twice
    stale = _apply(table, Complete(TID, 1000, 0, 103, 5))  # not the epoch prepared: nothing
    assert isinstance(stale, TxnChanged) and not stale.changed and _row(table).state is TxnState.PREPARE_ABORT


def test_the_ids_of_a_coordinator_partition_are_bounded() -> None:
    table = TransactionTable()
    for number in range(3):
        assert isinstance(_init(table, f"id-{number}", ids_max=3), TxnChanged)
    refused = _init(table, "one-too-many", ids_max=3)
    assert isinstance(refused, TransactionLimitReached) and "3 transactional ids" in str(refused)
    assert "one-too-many" not in table.transactions
    assert isinstance(_init(table, "id-0", ids_max=3), TxnChanged)  # an id it holds may start again


def test_a_transaction_s_partitions_and_groups_are_bounded() -> None:
    table = TransactionTable()
    _init(table)
    limits = Limits(partitions=3, groups=2)
    many = tuple(TopicPartition("t", p) for p in range(4))
    refused = _apply(table, AddPartitions(TID, 1000, 0, many, 20, 3, limits))
    assert isinstance(refused, TransactionLimitReached) and "3 partitions per transaction" in str(refused)
    assert _row(table).state is TxnState.EMPTY and table.open_partitions == 0
    _apply(table, AddPartitions(TID, 1000, 0, many[:2], 20, 3, limits))
    _apply(table, AddGroup(TID, 1000, 0, "g1", 21, 3, limits))
    _apply(table, AddGroup(TID, 1000, 0, "g2", 21, 3, limits))
    assert isinstance(_apply(table, AddGroup(TID, 1000, 0, "g3", 21, 3, limits)), TransactionLimitReached)
    _apply(table, AddOffsetPartitions(TID, 1000, 0, "g1", many[2:3], 22, 3, limits))
    over = _apply(table, AddOffsetPartitions(TID, 1000, 0, "g1", many[3:], 22, 3, limits))
    assert isinstance(over, TransactionLimitReached)
    assert len(_row(table).partitions) == 3 and _row(table).groups == ("g1", "g2")


def test_the_partitions_of_all_open_transactions_of_a_coordinator_partition_are_bounded() -> None:
    table = TransactionTable()
    limits = Limits(open_partitions=5)
    for tid in ("a", "b"):
        _init(table, tid)
    ids = {tid: _row(table, tid).producer_id for tid in ("a", "b")}
    tps = tuple(TopicPartition("t", p) for p in range(4))
    _apply(table, AddPartitions("a", ids["a"], 0, tps, 20, 3, limits))
    refused = _apply(table, AddPartitions("b", ids["b"], 0, tps[:2], 20, 3, limits))
    assert isinstance(refused, TransactionLimitReached) and "open transactions" in str(refused)
    _apply(table, AddPartitions("b", ids["b"], 0, tps[:1], 20, 3, limits))
    assert table.open_partitions == 5
    _apply(table, EndTransaction("a", ids["a"], 0, False, 30, 3))
    _apply(table, Complete("a", ids["a"], 0, 31, 3))  # a's partitions are released
    assert table.open_partitions == 1
    assert isinstance(_apply(table, AddPartitions("b", ids["b"], 0, tps, 32, 3, limits)), TxnChanged)


def test_ids_unused_for_the_expiration_are_forgotten_and_no_others() -> None:
    table = TransactionTable()
    _init(table, "old", now=10)
    _init(table, "busy", now=10)
    _apply(table, AddPartitions("busy", _row(table, "busy").producer_id, 0, (T0,), 10, 3))
    _init(table, "recent", now=900)
    expired = _apply(table, Expire(("old", "busy", "recent", "unknown"), 1010, 1000))
    assert expired == TxnsExpired(("old",))
    assert set(table.transactions) == {"busy", "recent"}


def _machine(tmp_path: pathlib.Path, name: str) -> PartitionStateMachine:
    return PartitionStateMachine(Log.open(str(tmp_path / name)))


def test_the_state_machine_applies_the_table_and_keeps_it_in_its_snapshot(tmp_path: pathlib.Path) -> None:
    machine = _machine(tmp_path, "a")
    try:
        entries = [
            InitProducer(TID, 60_000, 1000, NO_PRODUCER, -1, 10, 2),
            AddPartitions(TID, 1000, 0, (T0,), 11, 2),
            AddGroup(TID, 1000, 0, "billing", 12, 2),
            AddOffsetPartitions(TID, 1000, 0, "billing", (T1,), 13, 2),
        ]
        for index, entry in enumerate(entries, start=1):
            result = machine.apply(index, 2, commands.encode(commands.TxnCommand(encode(entry))))
            assert isinstance(result, TxnChanged)
        snapshot = machine.snapshot()
        assert snapshot is not None
    finally:
        machine.log.close()
    restored = _machine(tmp_path, "b")
    try:
        restored.restore(snapshot)
        row = restored.transactions.transactions[TID]
        assert row == machine.transactions.transactions[TID]
        assert dict(row.partitions) == {T0: True, T1: False} and restored.transactions.open_partitions == 2
        older = msgpack.unpackb(snapshot)
        del older["transactions"]  # a snapshot from before transactions
        restored.restore(msgpack.packb(older))
        assert dict(restored.transactions.transactions) == {}
    finally:
        restored.log.close()


_commands = st.one_of(
    st.builds(lambda t, f, n: InitProducer(t, 1000, f, NO_PRODUCER, -1, n, 1), st.sampled_from("ab"),
              st.integers(1, 3), st.integers(0, 100)),
    st.builds(lambda t, p, e, tps, n: AddPartitions(t, p, e, tps, n, 1, Limits(5, 3, 2, 4)),
              st.sampled_from("ab"), st.integers(1, 3), st.integers(0, 3),
              st.lists(st.builds(TopicPartition, st.just("t"), st.integers(0, 4)), max_size=3).map(tuple),
              st.integers(0, 100)),
    st.builds(lambda t, p, e, c, n, b: EndTransaction(t, p, e, c, n, 1, b), st.sampled_from("ab"),
              st.integers(1, 3), st.integers(0, 3), st.booleans(), st.integers(0, 100), st.booleans()),
    st.builds(lambda t, p, e, n: TimeOut(t, p, e, n, 2), st.sampled_from("ab"), st.integers(1, 3),
              st.integers(0, 3), st.integers(0, 100)),
    st.builds(lambda t, p, e, n: Complete(t, p, e, n, 2), st.sampled_from("ab"), st.integers(1, 3),
              st.integers(0, 3), st.integers(0, 100)),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(_commands, max_size=40))
def test_replicas_applying_the_same_commands_hold_the_same_table_within_its_bounds(
    sequence: list[TxnCommand],
) -> None:
    one, two = TransactionTable(), TransactionTable()
    for command in sequence:
        first, second = one.apply(encode(command)), two.apply(encode(command))
        assert (type(first), str(first)) == (type(second), str(second))  # errors compare by identity
        assert one.to_rows() == two.to_rows()
        assert one.open_partitions == sum(len(t.partitions) for t in one.transactions.values()) <= 4
        for row in one.transactions.values():
            assert len(row.partitions) <= 3 and 0 <= row.producer_epoch <= EPOCH_MAX
            if row.state is TxnState.ONGOING or row.state.preparing:
                # only a version 2 abort may have added nothing (Kafka's empty abort)
                empty_abort = row.state is TxnState.PREPARE_ABORT and row.bumped
                assert row.started_ms != NO_TIME and (row.partitions or row.groups or empty_abort)
            else:
                assert not row.partitions and not row.groups
        assert TransactionTable.from_rows(one.to_rows()).to_rows() == one.to_rows()


# An InitProducer of the release before producer ids had owners (tx-1, 60 s, fresh id 1234, nothing
# expected, at 1_700_000_000_000, coordinator epoch 3, the default limits), as its code encoded it
INIT_BEFORE_OWNERS = bytes.fromhex(
    "9901a474782d31cdea60cd04d2ffffcf0000018bcfe568000394cd2710cd03e864ce000186a0"
)


def test_an_init_producer_of_the_release_before_owners_decodes_as_no_new_owner() -> None:
    command = decode(INIT_BEFORE_OWNERS)
    assert command == InitProducer("tx-1", 60_000, 1234, NO_PRODUCER, -1, 1_700_000_000_000, 3)
    assert isinstance(command, InitProducer) and command.new_owner is False
    assert decode(encode(command)) == command
    with pytest.raises(InvalidCommand):  # fields missing beyond those added later: not a command
        decode(msgpack.packb(msgpack.unpackb(INIT_BEFORE_OWNERS)[:-1]))


def test_an_init_producer_of_no_new_owner_is_written_as_the_release_before_wrote_it() -> None:
    """Under raftlog.version 1 no producer id has an owner, so new_owner is False: the command is written
    in 0.1.0's layout, which a node of 0.1.0 decodes (it refuses a longer row); a new owner's is longer."""
    command = InitProducer("tx-1", 60_000, 1234, NO_PRODUCER, -1, 1_700_000_000_000, 3)
    assert encode(command) == INIT_BEFORE_OWNERS
    taken = InitProducer("tx-1", 60_000, 1234, NO_PRODUCER, -1, 1_700_000_000_000, 3, new_owner=True)
    assert len(msgpack.unpackb(encode(taken))) == len(msgpack.unpackb(INIT_BEFORE_OWNERS)) + 1
    assert decode(encode(taken)) == taken


def test_a_new_owner_gets_the_fresh_producer_id_at_epoch_0_and_fences_the_last() -> None:
    table = TransactionTable()
    _init(table, fresh=1000)
    _init(table, fresh=2000)  # the same owner: the same id, the next epoch
    assert (table.transactions[TID].producer_id, table.transactions[TID].producer_epoch) == (1000, 1)
    taken = _apply(table, InitProducer(TID, 60_000, 3000, NO_PRODUCER, -1, 30, 3, Limits(), True))
    assert isinstance(taken, TxnChanged) and taken.transaction is not None
    assert (taken.transaction.producer_id, taken.transaction.producer_epoch) == (3000, 0)
    fenced = _apply(table, AddPartitions(TID, 1000, 1, (T0,), 40, 3))
    assert isinstance(fenced, InvalidProducerIdMapping)
