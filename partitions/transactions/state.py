"""The replicated state of transactions: one row per transactional id (docs/decisions/0019-transactions.md).

One ``TransactionTable`` lives in each partition of the internal ``__transactions`` topic, inside that
partition's ``PartitionStateMachine``; a transactional id belongs to the partition its name hashes to (its
coordinator). Commands are proposed by the coordinator partition's leader and applied on every replica, so
a new leader holds every transaction as it stood, mid-transaction included.

``apply`` is deterministic: the time (``now_ms``), a fresh producer id (drawn by the leader), the
coordinator's epoch (the Raft term of the leader proposing) and the bounds all come in the command, and
refusals are returned, not raised. A transaction's life, as Kafka's coordinator keeps it:

    Empty --AddPartitions/AddGroup--> Ongoing --End--> PrepareCommit | PrepareAbort --Complete-->
    CompleteCommit | CompleteAbort --AddPartitions/AddGroup--> Ongoing ...

- ``InitProducer`` gives the id a producer id and bumps its epoch (a new producer id once the epoch would
  pass ``EPOCH_BUMP_MAX``), which fences every older producer of the id; with a transaction ``Ongoing`` it
  bumps the epoch and turns it to ``PrepareAbort`` instead (the coordinator writes the abort markers, and
  the producer, answered CONCURRENT_TRANSACTIONS, asks again).
- ``TimeOut`` aborts an ``Ongoing`` transaction past its timeout the same way, fencing its producer.
- ``EndTransaction`` at transaction version 2 (``bump``) with no transaction open (``Empty``,
  ``Complete*``) aborts one that added nothing, as Kafka 4 does: ``PrepareAbort``, the epoch bumped, no
  marker to write; a commit there is INVALID_TXN_STATE.
- ``Complete`` follows the markers: the partitions and groups are forgotten.
- ``Expire`` forgets ids unused (``Empty`` or ``Complete*``) for ``EXPIRATION_MS`` (Kafka's
  transactional.id.expiration.ms).

Bounded: ``TRANSACTIONAL_IDS_MAX`` ids per table, ``TRANSACTION_PARTITIONS_MAX`` partitions and
``TRANSACTION_GROUPS_MAX`` groups per transaction, ``OPEN_PARTITIONS_MAX`` partitions across the table's
transactions; each bound rides in the command that could pass it (``Limits``, stamped by the leader), so
every replica applies the same one.

Rows are immutable values and ``transactions`` is replaced whole on change, so the event loop reads the
table while the consensus thread applies (a read sees a row before or after a command, never half of it).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

import msgpack

from partitions.errors import InvalidCommand, InvalidTxnState, ProducerFenced
from partitions.groups.assignors import TopicPartition
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    TransactionLimitReached,
)
from raftlog.errors import check

EPOCH_MAX = 32767  # Kafka's producer epochs are int16
EPOCH_BUMP_MAX = (
    EPOCH_MAX - 1
)  # an InitProducerId at this epoch gets a new producer id (one bump left: a fence)
NO_PRODUCER = -1
NO_TIME = -1
TRANSACTIONAL_IDS_MAX = 10_000  # per coordinator partition
TRANSACTION_PARTITIONS_MAX = 1_000  # data and offset partitions of one transaction
TRANSACTION_GROUPS_MAX = 100  # consumer groups one transaction commits offsets of
OPEN_PARTITIONS_MAX = 100_000  # partitions across the transactions of one coordinator partition
EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's transactional.id.expiration.ms: an unused id is forgotten


class TxnState(enum.Enum):
    """Kafka's names, as DescribeTransactions and ListTransactions answer them."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        """Decided, its markers being written: the coordinator drives it to ``Complete*``."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def idle(self) -> bool:
        """No transaction open: a new one may begin, a new producer take the id."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds a command is applied with (the leader's, so every replica uses the same)."""

    transactional_ids: int = TRANSACTIONAL_IDS_MAX
    partitions: int = TRANSACTION_PARTITIONS_MAX
    groups: int = TRANSACTION_GROUPS_MAX
    open_partitions: int = OPEN_PARTITIONS_MAX

    def to_row(self) -> list[int]:
        return [self.transactional_ids, self.partitions, self.groups, self.open_partitions]

    @classmethod
    def from_row(cls, row: object) -> Limits:
        if not (isinstance(row, list) and len(row) == 4 and all(type(v) is int and v >= 0 for v in row)):
            raise InvalidCommand(f"malformed transaction limits {str(row)[:80]!r}")
        return cls(*row)


LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Transaction:
    """A transactional id and its producer's transaction, as replicated."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    timeout_ms: int
    # when the transaction began (its first partition or group), or the last one did (NO_TIME: none yet);
    # also the transaction's ordinal, rising per id, which its markers and transactional offsets carry
    started_ms: int
    updated_ms: int  # the last change
    coordinator_epoch: int  # the Raft term of the coordinator partition's leader that made the last change
    # the transaction's partitions: True where the producer writes (a marker's control batch ends its
    # records there), False where it only commits offsets (the marker makes them visible, no batch)
    partitions: Mapping[TopicPartition, bool] = field(default_factory=lambda: MappingProxyType({}))
    groups: tuple[str, ...] = ()  # consumer groups whose offsets it commits (AddOffsetsToTxn), sorted
    # the producer id and epoch before the last InitProducerId: a retry of it whose answer was lost
    # gets the same id and epoch again (KIP-360)
    last_producer_id: int = NO_PRODUCER
    last_producer_epoch: int = -1
    # transaction version 2 (KIP-890): the last end bumped the epoch (the id and epoch it was asked with are
    # ``last_producer_*``, so a retry of it is answered again), and the producer id the producer goes on
    # with once the markers are written, when the bump spent the epochs (NO_PRODUCER: the same)
    bumped: bool = False
    next_producer_id: int = NO_PRODUCER

    def written(self, tp: TopicPartition) -> bool:
        """Whether the producer may write to ``tp`` in this transaction (``verify_partition``)."""
        return self.state is TxnState.ONGOING and self.partitions.get(tp, False)


# -- commands ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducer:
    transactional_id: str
    timeout_ms: int
    fresh_producer_id: int  # drawn by the leader: used when the id is new or its epochs are spent
    # what the producer says it holds (InitProducerId v3+, KIP-360); NO_PRODUCER: nothing
    expected_producer_id: int
    expected_producer_epoch: int
    now_ms: int
    coordinator_epoch: int
    limits: Limits = LIMITS
    # the caller is not the principal the id's producer id was given to: the fresh one replaces it, at
    # epoch 0 (``security.producer_ids``); absent (False) in a command of a release before ids had owners
    new_owner: bool = False


@dataclass(frozen=True, slots=True)
class ProducerCommand:
    """A command about the transaction of one producer of a transactional id: the id, and the producer id
    and epoch it is for, which ``apply`` checks against the id's producer now."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class AddPartitions(ProducerCommand):
    """Data partitions the producer writes to (AddPartitionsToTxn): its transaction begins if none is open."""

    partitions: tuple[TopicPartition, ...]
    now_ms: int
    coordinator_epoch: int
    limits: Limits = LIMITS


@dataclass(frozen=True, slots=True)
class AddGroup(ProducerCommand):
    """A consumer group whose offsets the transaction commits (AddOffsetsToTxn): it begins if none is open."""

    group: str
    now_ms: int
    coordinator_epoch: int
    limits: Limits = LIMITS


@dataclass(frozen=True, slots=True)
class AddOffsetPartitions(ProducerCommand):
    """The partitions a TxnOffsetCommit commits the group's offsets in: the marker must reach them. Only
    for a group the open transaction added."""

    group: str
    partitions: tuple[TopicPartition, ...]
    now_ms: int
    coordinator_epoch: int
    limits: Limits = LIMITS


@dataclass(frozen=True, slots=True)
class EndTransaction(ProducerCommand):
    commit: bool
    now_ms: int
    coordinator_epoch: int
    # transaction version 2 (EndTxn v5, written once ``features.TRANSACTIONS_V2`` is finalized): the end
    # bumps the producer's epoch, and its markers carry the bumped one; ``next_producer_id``, drawn by the
    # leader when the epoch to bump is at ``EPOCH_BUMP_MAX``: the producer goes on with it at epoch 0
    bump: bool = False
    next_producer_id: int = NO_PRODUCER


@dataclass(frozen=True, slots=True)
class TimeOut(ProducerCommand):
    """The leader saw the producer's open transaction pass its timeout: abort it, fencing the producer."""

    now_ms: int
    coordinator_epoch: int
    # transaction version 2 finalized (``features.TRANSACTIONS_V2``): the abort is a version 2 end, as
    # Kafka's coordinator aborts with the cluster's version, so the producer's late EndTxn v5 of it is
    # answered as an end of the other outcome (INVALID_TXN_STATE), not a stranger's (PRODUCER_FENCED)
    bump: bool = False


@dataclass(frozen=True, slots=True)
class Complete(ProducerCommand):
    """Every marker of the prepared transaction of this producer is written."""

    now_ms: int
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class Expire:
    """Forget these ids if they are still unused for ``expiration_ms`` at ``now_ms``."""

    transactional_ids: tuple[str, ...]
    now_ms: int
    expiration_ms: int


TxnCommand = (
    InitProducer
    | AddPartitions
    | AddGroup
    | AddOffsetPartitions
    | EndTransaction
    | TimeOut
    | Complete
    | Expire
)


def _int(value: object, low: int = 0, high: int = 2**63 - 1) -> int:
    if type(value) is not int or not low <= value <= high:
        raise InvalidCommand(f"expected an integer in [{low}, {high}], got {str(value)[:40]!r}")
    return value


def _producer_id(value: object) -> int:
    return _int(value, NO_PRODUCER)


def _epoch(value: object) -> int:
    return _int(value, -1, EPOCH_MAX)


def _timeout_ms(value: object) -> int:
    return _int(value, 1, 2**31 - 1)


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise InvalidCommand(f"expected true or false, got {str(value)[:40]!r}")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidCommand(f"expected text, got {str(value)[:40]!r}")
    return value


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidCommand(f"expected texts, got {str(value)[:40]!r}")
    return tuple(_text(v) for v in value)


def _tp_rows(partitions: tuple[TopicPartition, ...]) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in partitions]


def _tps(value: object) -> tuple[TopicPartition, ...]:
    if not isinstance(value, list):
        raise InvalidCommand(f"expected partitions, got {str(value)[:40]!r}")
    found = []
    for row in value:
        if not (isinstance(row, list) and len(row) == 2):
            raise InvalidCommand(f"malformed partition {str(row)[:40]!r}")
        found.append(TopicPartition(_text(row[0]), _int(row[1], 0, 2**31 - 1)))
    return tuple(found)


def _as_is(value: Any) -> Any:
    return value


# A command crosses as msgpack ``[kind, *its fields in their declared order]`` (a ``ProducerCommand``'s
# three first): each field's name says how it is written (left as it is, unless named) and how it is read
# back and checked.
_KINDS: dict[type[Any], int] = {
    InitProducer: 1, AddPartitions: 2, AddGroup: 3, AddOffsetPartitions: 4, EndTransaction: 5, TimeOut: 6,
    Complete: 7, Expire: 8,
}  # fmt: skip
_READ: dict[str, Callable[[object], Any]] = {
    "transactional_id": _text, "transactional_ids": _texts, "group": _text, "partitions": _tps,
    "producer_id": _int, "fresh_producer_id": _int, "expected_producer_id": _producer_id,
    "producer_epoch": _epoch, "expected_producer_epoch": _epoch, "timeout_ms": _timeout_ms, "commit": _bool,
    "now_ms": _int, "coordinator_epoch": _int, "expiration_ms": _int, "limits": Limits.from_row,
    "new_owner": _bool, "bump": _bool, "next_producer_id": _producer_id,
}  # fmt: skip
_WRITE: dict[str, Callable[[Any], Any]] = {
    "partitions": _tp_rows, "transactional_ids": list, "limits": Limits.to_row,
}  # fmt: skip
_LAYOUTS = {kind: (made, tuple(f.name for f in fields(made))) for made, kind in _KINDS.items()}
_UNREAD = [name for _, names in _LAYOUTS.values() for name in names if name not in _READ]
check(not _UNREAD, f"transaction command fields with no reader: {_UNREAD}")
# fields added after a kind's first release, last in its layout: an older node's command lacks them, and
# reads as their default; a command whose added fields are at their defaults is written without them, in
# the layout of the release before, which refuses a longer row (InitProducer's new_owner is True only for
# producer ids bound to an owner, given from raftlog.version 2: ``features.PRODUCER_OWNERS``)
_ADDED: dict[type[Any], tuple[str, ...]] = {
    InitProducer: ("new_owner",),
    EndTransaction: ("bump", "next_producer_id"),
    TimeOut: ("bump",),
}
_DEFAULTS = {made: {f.name: f.default for f in fields(made)} for made in _KINDS}


def encode(command: TxnCommand) -> bytes:
    kind = _KINDS[type(command)]
    names = list(_LAYOUTS[kind][1])
    defaults = _DEFAULTS[type(command)]
    for added in reversed(_ADDED.get(type(command), ())):
        if names[-1] != added or getattr(command, added) != defaults[added]:
            break
        names.pop()
    row = [kind, *(_WRITE.get(name, _as_is)(getattr(command, name)) for name in names)]
    packed: bytes = msgpack.packb(row, use_bin_type=True)
    return packed


def decode(data: bytes) -> TxnCommand:
    try:
        row = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidCommand(f"transaction command is not msgpack: {exc}") from None
    if not isinstance(row, list) or not row:
        raise InvalidCommand(f"malformed transaction command {str(row)[:80]!r}")
    kind, rest = row[0], row[1:]
    layout = _LAYOUTS.get(kind) if type(kind) is int else None
    missing = len(layout[1]) - len(rest) if layout is not None else 0
    if layout is None or not 0 <= missing <= len(_ADDED.get(layout[0], ())):
        raise InvalidCommand(f"unknown transaction command {str(row)[:80]!r}")
    made, names = layout
    names = names[: len(rest)]
    command: TxnCommand = made(*(_READ[name](value) for name, value in zip(names, rest, strict=True)))
    return command


# -- apply ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TxnChanged:
    """The transactional id's row after the command (None: forgotten). ``changed``: False when the command
    found it already as asked (a retry) and changed nothing."""

    transactional_id: str
    transaction: Transaction | None
    changed: bool = True


@dataclass(frozen=True, slots=True)
class TxnsExpired:
    transactional_ids: tuple[str, ...]  # those forgotten


TxnResult = (
    TxnChanged
    | TxnsExpired
    | ProducerFenced
    | InvalidProducerIdMapping
    | ConcurrentTransactions
    | InvalidTxnState
    | TransactionLimitReached
    | InvalidCommand
)


def _bumped(row: Transaction, fresh_producer_id: int, new_owner: bool) -> tuple[int, int]:
    """The producer id and epoch after an InitProducerId: the next epoch, or a new id at epoch 0 once the
    epochs are spent or another principal takes the id over."""
    if row.producer_epoch >= EPOCH_BUMP_MAX or new_owner:
        return fresh_producer_id, 0
    return row.producer_id, row.producer_epoch + 1


@dataclass
class TransactionTable:
    """Every transactional id coordinated by one partition of ``__transactions`` (deterministic apply).
    ``transactions`` is replaced whole by each change (on the driver thread), never changed in place: the
    coordinator reads it on the event loop."""

    transactions: Mapping[str, Transaction] = field(default_factory=lambda: MappingProxyType({}))
    open_partitions: int = 0  # partitions across every row's transaction (bounded: Limits.open_partitions)

    def apply(self, data: bytes) -> TxnResult:
        try:
            command = decode(data)
        except InvalidCommand as exc:
            return exc
        if isinstance(command, Expire):
            return self._expire(command)
        row = self.transactions.get(command.transactional_id)
        if isinstance(command, InitProducer):
            return self._init(command, row)
        if row is None:
            return InvalidProducerIdMapping(command.transactional_id, command.producer_id)
        if isinstance(command, Complete):
            return self._complete(command, row)
        if isinstance(command, EndTransaction) and _retried_end(command, row):
            return self._retried_end(command, row)
        if command.producer_id != row.producer_id:
            return InvalidProducerIdMapping(command.transactional_id, command.producer_id)
        if command.producer_epoch != row.producer_epoch:
            return ProducerFenced(command.producer_id, command.producer_epoch, row.producer_epoch)
        if isinstance(command, EndTransaction):
            return self._end(command, row)
        if isinstance(command, TimeOut):
            if row.state is not TxnState.ONGOING:
                return TxnChanged(row.transactional_id, row, changed=False)
            return self._store(_fence_abort(row, command.now_ms, command.coordinator_epoch, command.bump))
        return self._add(command, row)

    def _init(self, command: InitProducer, row: Transaction | None) -> TxnResult:
        now, term = command.now_ms, command.coordinator_epoch
        if row is None:
            if len(self.transactions) >= command.limits.transactional_ids:
                return TransactionLimitReached(
                    "transactional ids per coordinator partition", command.limits.transactional_ids
                )
            return self._store(
                Transaction(
                    command.transactional_id,
                    command.fresh_producer_id,
                    0,
                    TxnState.EMPTY,
                    command.timeout_ms,
                    NO_TIME,
                    now,
                    term,
                )
            )
        expected = command.expected_producer_id, command.expected_producer_epoch
        if expected[0] != NO_PRODUCER and expected[0] not in (row.producer_id, row.last_producer_id):
            return ProducerFenced(expected[0], expected[1], row.producer_epoch)
        if row.state.preparing:
            return ConcurrentTransactions(row.transactional_id, row.state.value)
        if row.state is TxnState.ONGOING:  # a new producer of the id: the open transaction is aborted first
            return self._store(_fence_abort(row, now, term))
        if expected[0] != NO_PRODUCER:
            if expected == (row.last_producer_id, row.last_producer_epoch):
                return TxnChanged(row.transactional_id, row, changed=False)  # a retry; answered again
            if expected != (row.producer_id, row.producer_epoch):
                return ProducerFenced(expected[0], expected[1], row.producer_epoch)
        producer_id, epoch = _bumped(row, command.fresh_producer_id, command.new_owner)
        return self._store(
            replace(
                row,
                producer_id=producer_id,
                producer_epoch=epoch,
                state=TxnState.EMPTY,
                timeout_ms=command.timeout_ms,
                started_ms=row.started_ms,  # kept: the next transaction's ordinal outdoes it
                updated_ms=now,
                coordinator_epoch=term,
                partitions=MappingProxyType({}),
                groups=(),
                last_producer_id=row.producer_id,
                last_producer_epoch=row.producer_epoch,
            )
        )

    def _add(self, command: AddPartitions | AddGroup | AddOffsetPartitions, row: Transaction) -> TxnResult:
        if row.state.preparing:
            return ConcurrentTransactions(row.transactional_id, row.state.value)
        if not isinstance(command, AddGroup) and not command.partitions:
            return TxnChanged(row.transactional_id, row, changed=False)  # nothing added: nothing begins
        limits = command.limits
        partitions = dict(row.partitions) if row.state is TxnState.ONGOING else {}
        groups = set(row.groups) if row.state is TxnState.ONGOING else set()
        if isinstance(command, AddOffsetPartitions):
            if row.state is not TxnState.ONGOING or command.group not in groups:
                return InvalidTxnState(
                    f"transactional id {row.transactional_id!r}: offsets of group {command.group!r} are "
                    "committed in a transaction only after AddOffsetsToTxn named the group"
                )
            for tp in command.partitions:
                partitions.setdefault(tp, False)  # a partition written stays written: its batch ends it
        elif isinstance(command, AddPartitions):
            for tp in command.partitions:
                partitions[tp] = True
        else:
            groups.add(command.group)
            if len(groups) > limits.groups:
                return TransactionLimitReached("consumer groups per transaction", limits.groups)
        if len(partitions) > limits.partitions:
            return TransactionLimitReached("partitions per transaction", limits.partitions)
        held = len(row.partitions) if row.state is TxnState.ONGOING else 0
        if self.open_partitions - held + len(partitions) > limits.open_partitions:
            return TransactionLimitReached("partitions in the open transactions of a coordinator partition",
                                           limits.open_partitions)  # fmt: skip
        if row.state is TxnState.ONGOING and partitions == row.partitions and groups == set(row.groups):
            return TxnChanged(row.transactional_id, row, changed=False)
        # the transaction's start is also its ordinal (markers and transactional offsets carry it): above
        # the id's last one, whatever a new leader's clock says
        started = row.started_ms if row.state is TxnState.ONGOING else max(command.now_ms, row.started_ms + 1)
        return self._store(
            replace(
                row,
                state=TxnState.ONGOING,
                started_ms=started,
                updated_ms=command.now_ms,
                coordinator_epoch=command.coordinator_epoch,
                partitions=MappingProxyType(partitions),
                groups=tuple(sorted(groups)),
            )
        )

    def _end(self, command: EndTransaction, row: Transaction) -> TxnResult:
        """An EndTxn at the producer's id and epoch (a retry of a version 2 end is ``_retried_end``'s)."""
        asked = "commit" if command.commit else "abort"
        if row.state is TxnState.ONGOING:
            return self._prepare(command, row)
        if command.bump:  # transaction version 2, as Kafka 4's coordinator answers EndTxn v5
            if row.state.preparing:  # the last end's markers are being written: asked again once they
                # are, as Kafka 4 answers a transition still pending before it looks at the epoch
                # (KAFKA-18464; franz-go aborts an empty transaction right after a commit's answer)
                return ConcurrentTransactions(row.transactional_id, row.state.value)
            if not command.commit:  # Empty or Complete*: aborting is always allowed (an empty abort)
                return self._prepare(command, row, added_nothing=True)
            return InvalidTxnState(
                f"transactional id {row.transactional_id!r}: cannot commit a transaction in state "
                f"{row.state.value}: nothing was added to it"
            )
        done = TxnState.COMPLETE_COMMIT if command.commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if command.commit else TxnState.PREPARE_ABORT
        if row.bumped and row.state is not TxnState.EMPTY:  # as Kafka: with transaction version 2 the epoch
            # an end answered is the next transaction's; an end asked with it before that began is fenced
            return ProducerFenced(command.producer_id, command.producer_epoch, row.producer_epoch)
        if row.state is done:
            return TxnChanged(row.transactional_id, row, changed=False)  # a retry of the end: answered again
        if row.state is preparing:
            return ConcurrentTransactions(row.transactional_id, row.state.value)  # asked again: completing
        return InvalidTxnState(
            f"transactional id {row.transactional_id!r}: cannot {asked} a transaction in state "
            f"{row.state.value}"
        )

    def _prepare(self, command: EndTransaction, row: Transaction, added_nothing: bool = False) -> TxnChanged:
        """The decision: ``PrepareCommit`` or ``PrepareAbort``, the markers to follow. ``added_nothing``: a
        version 2 abort in ``Empty`` or ``Complete*`` (Kafka's ``prepareAbortOrCommit`` with
        noPartitionAdded): no partition to mark, and its start, the transaction's ordinal, is now."""
        bumped: dict[str, Any] = {"bumped": False, "next_producer_id": NO_PRODUCER}
        if command.bump:  # transaction version 2: the markers carry the next epoch, which fences every
            # batch of this one (a zombie's, late); past the epochs, the producer goes on with the next
            # producer id (the markers still carry the old id, at the last epoch)
            spent = row.producer_epoch >= EPOCH_BUMP_MAX and command.next_producer_id != NO_PRODUCER
            bumped = {
                "producer_epoch": min(row.producer_epoch + 1, EPOCH_MAX), "bumped": True,
                "next_producer_id": command.next_producer_id if spent else NO_PRODUCER,
                "last_producer_id": row.producer_id, "last_producer_epoch": row.producer_epoch,
            }  # fmt: skip
        if added_nothing:  # above the id's last ordinal, whatever a new leader's clock says (as ``_add``)
            bumped.update(partitions=MappingProxyType({}), groups=(),
                          started_ms=max(command.now_ms, row.started_ms + 1))  # fmt: skip
        return self._store(
            replace(
                row,
                state=TxnState.PREPARE_COMMIT if command.commit else TxnState.PREPARE_ABORT,
                updated_ms=command.now_ms,
                coordinator_epoch=command.coordinator_epoch,
                **bumped,
            )
        )

    def _retried_end(self, command: EndTransaction, row: Transaction) -> TxnResult:
        """An EndTxn v5 asked again with the epoch it bumped: answered as the end it repeats (Kafka's
        retryOnEpochBump), or refused when it asks the other outcome."""
        done = TxnState.COMPLETE_COMMIT if command.commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if command.commit else TxnState.PREPARE_ABORT
        if row.state is done:
            return TxnChanged(row.transactional_id, row, changed=False)
        if row.state is preparing:
            return ConcurrentTransactions(row.transactional_id, row.state.value)
        return InvalidTxnState(
            f"transactional id {row.transactional_id!r}: cannot {'commit' if command.commit else 'abort'} "
            f"a transaction in state {row.state.value}"
        )

    def _complete(self, command: Complete, row: Transaction) -> TxnResult:
        """The markers of the prepared transaction are written: it ends (nothing, when it is not the one
        prepared any more: a completion proposed twice, or by a leader since deposed)."""
        same = (row.producer_id, row.producer_epoch) == (command.producer_id, command.producer_epoch)
        if not same or not row.state.preparing:
            return TxnChanged(row.transactional_id, row, changed=False)
        done = TxnState.COMPLETE_COMMIT if row.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        renewed = row.next_producer_id != NO_PRODUCER  # the bump spent the epochs: the next id, at 0
        return self._store(
            replace(
                row,
                producer_id=row.next_producer_id if renewed else row.producer_id,
                producer_epoch=0 if renewed else row.producer_epoch,
                next_producer_id=NO_PRODUCER,
                state=done,
                updated_ms=command.now_ms,
                coordinator_epoch=command.coordinator_epoch,
                partitions=MappingProxyType({}),
                groups=(),
            )
        )

    def _expire(self, command: Expire) -> TxnsExpired:
        gone = tuple(
            sorted(
                tid
                for tid in set(command.transactional_ids)
                if (row := self.transactions.get(tid)) is not None
                and row.state.idle
                and command.now_ms - row.updated_ms >= command.expiration_ms
            )
        )
        if gone:
            kept = {tid: row for tid, row in self.transactions.items() if tid not in gone}
            self.transactions = MappingProxyType(kept)
        return TxnsExpired(gone)

    def _store(self, row: Transaction) -> TxnChanged:
        old = self.transactions.get(row.transactional_id)
        self.open_partitions += len(row.partitions) - (len(old.partitions) if old is not None else 0)
        self.transactions = MappingProxyType({**self.transactions, row.transactional_id: row})
        return TxnChanged(row.transactional_id, row)

    # -- snapshots -------------------------------------------------------------------------------------

    def to_rows(self) -> list[list[Any]]:
        return [
            [
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                t.state.value,
                t.timeout_ms,
                t.started_ms,
                t.updated_ms,
                t.coordinator_epoch,
                [[tp.topic, tp.partition, w] for tp, w in t.partitions.items()],
                list(t.groups),
                t.last_producer_id,
                t.last_producer_epoch,
                # transaction version 2's, only where it was used (``features.TRANSACTIONS_V2``): a row
                # without them is the previous release's
                *([t.bumped, t.next_producer_id] if t.bumped or t.next_producer_id != NO_PRODUCER else []),
            ]
            for t in self.transactions.values()
        ]

    @classmethod
    def from_rows(cls, rows: list[list[Any]]) -> TransactionTable:
        found = {}
        for row in rows:
            tid, pid, epoch, state, timeout_ms, started, updated, term, tps, groups, last_pid, last_epoch = (
                row[:12]
            )
            bumped, next_pid = row[12:] if len(row) == 14 else (False, NO_PRODUCER)
            partitions = {TopicPartition(str(t), int(p)): bool(w) for t, p, w in tps}
            found[str(tid)] = Transaction(
                str(tid),
                int(pid),
                int(epoch),
                TxnState(state),
                int(timeout_ms),
                int(started),
                int(updated),
                int(term),
                MappingProxyType(partitions),
                tuple(str(g) for g in groups),
                int(last_pid),
                int(last_epoch),
                bool(bumped),
                int(next_pid),
            )
        return cls(MappingProxyType(found), sum(len(t.partitions) for t in found.values()))


def _retried_end(command: EndTransaction, row: Transaction) -> bool:
    """Whether an EndTxn v5 is one the row's last end answered (Kafka's retryOnEpochBump and
    retryOnOverflow): asked with the id and epoch it bumped, the transaction since decided or ended."""
    return (
        command.bump
        and row.bumped
        and (command.producer_id, command.producer_epoch) == (row.last_producer_id, row.last_producer_epoch)
        and (row.state.preparing or row.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT))
    )


def _fence_abort(
    row: Transaction, now_ms: int, coordinator_epoch: int, version_2: bool = False
) -> Transaction:
    """The open transaction aborted with the producer's epoch bumped: its producer is fenced everywhere the
    abort marker lands and at the coordinator (an epoch at ``EPOCH_MAX`` is aborted as it is: no producer
    holds a later one)."""
    epoch = row.producer_epoch + 1 if row.producer_epoch < EPOCH_MAX else row.producer_epoch
    return replace(
        row,
        producer_epoch=epoch,
        state=TxnState.PREPARE_ABORT,
        updated_ms=now_ms,
        coordinator_epoch=coordinator_epoch,
        last_producer_id=row.producer_id if version_2 else NO_PRODUCER,
        last_producer_epoch=row.producer_epoch if version_2 else -1,
        bumped=version_2,
        next_producer_id=NO_PRODUCER,
    )
