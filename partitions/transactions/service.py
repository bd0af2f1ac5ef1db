"""The transaction coordinator's protocol, as the doors and the partitions' leaders ask it, and its result
types (pure).

``TransactionService``: Kafka's transactions, every call served by the transactional id's coordinator (the
leader of its ``__transactions`` partition); a node that is not raises ``NotLeader`` naming the one it
knows, and the call is run there (``partitions.peers.cluster``). ``verify_partition`` is KIP-890's defence,
asked by a partition's leader before it takes a producer's first transactional batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from partitions.features import TRANSACTION_PRINCIPAL, TRANSACTIONS_V2
from partitions.groups.assignors import TopicPartition
from partitions.peer_ops import peer
from partitions.regex import RegexRefused, compile_re2
from partitions.transactions.errors import InvalidTransactionalIdPattern

# a transactional id's states, in Kafka's words (its TransactionState names, which listings filter by)
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class Marker:
    """What ends a producer's transaction in one partition (``DataService.write_txn_marker``)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int  # the Raft term of the coordinator partition's leader driving the transaction
    write_control: bool  # the producer wrote to the partition: a control batch ends its records there
    transaction: int  # the transaction's ordinal (``Transaction.started_ms``)


@dataclass(frozen=True, slots=True)
class TransactionSummary:
    """A transactional id as listings show it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str  # Kafka's: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort
    started_ms: int  # when its open transaction began; -1: none open
    timeout_ms: int
    coordinator_partition: int


@dataclass(frozen=True, slots=True)
class TransactionFilter:
    """Which transactional ids a listing keeps, as Kafka's ListTransactions filters them (both doors list
    through it): any of ``states`` (none: every state), any of ``producer_ids`` (none: every producer), a
    transaction open for longer than ``open_longer_than_ms`` (negative: any, and ids with none open too),
    an id ``id_pattern`` matches whole (KIP-1152; RE2, Kafka's ``Pattern.matcher(id).matches()``; None:
    every id). Made by ``of``, which compiles the pattern."""

    states: frozenset[str] = frozenset()
    producer_ids: frozenset[int] = frozenset()
    open_longer_than_ms: int = -1
    id_pattern: Any = None  # an RE2 program

    @classmethod
    def of(
        cls,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        open_longer_than_ms: int = -1,
        id_pattern: str | None = None,
    ) -> TransactionFilter:
        """``InvalidTransactionalIdPattern`` when RE2 refuses ``id_pattern`` (empty or None: no pattern,
        as Kafka reads it)."""
        program = None
        if id_pattern:
            try:
                program = compile_re2(id_pattern)
            except RegexRefused as refused:
                raise InvalidTransactionalIdPattern(id_pattern, refused.reason) from None
        return cls(frozenset(states), frozenset(producer_ids), open_longer_than_ms, program)

    @property
    def unknown_states(self) -> tuple[str, ...]:
        """The states asked for that are none of ``STATES`` (they match nothing), sorted."""
        return tuple(sorted(s for s in self.states if s not in STATES))

    def keeps(self, summary: TransactionSummary, now_ms: int) -> bool:
        started, longer_than = summary.started_ms, self.open_longer_than_ms
        return (
            (not self.states or summary.state in self.states)
            and (not self.producer_ids or summary.producer_id in self.producer_ids)
            and (longer_than < 0 or (started >= 0 and now_ms - started > longer_than))
            and (self.id_pattern is None or self.id_pattern.fullmatch(summary.transactional_id) is not None)
        )


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id and its transaction, as its coordinator holds them."""

    summary: TransactionSummary
    partitions: tuple[TopicPartition, ...]  # written in the transaction: a control batch ends its records
    offset_partitions: tuple[TopicPartition, ...]  # holding only offsets it commits
    groups: tuple[str, ...]  # whose offsets it commits
    updated_ms: int  # its last change
    coordinator_epoch: int  # the Raft term of the coordinator partition's leader that made it
    coordinator: str  # the node that answered: the coordinator


_PRINCIPAL = {"principal": TRANSACTION_PRINCIPAL}  # what 0.1.0's coordinator does not take


class TransactionService(Protocol):
    """Kafka's transactions (KIP-98, KIP-447, KIP-890); every call is served by the transactional id's
    coordinator."""

    @peer("Create the transactions' internal topic if there is none yet", write=True)
    async def ensure_topic(self) -> None:
        """Create ``__transactions`` (its partition count: the node's) unless it exists."""
        ...

    @peer("Give an idempotent producer a producer id of its own", write=True)
    async def init_idempotent_producer(self, principal: str | None) -> ProducerIdAndEpoch:
        """Kafka's InitProducerId without a transactional id: a new producer id, at epoch 0, that only
        ``principal`` (None: an unauthenticated client) may write with (``security.producer_ids``)."""
        ...

    @peer("Give a transactional id its producer id and a new epoch", write=True, since=_PRINCIPAL)
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        principal: str | None = None,
    ) -> ProducerIdAndEpoch:
        """Kafka's InitProducerId: the id's producer id at its next epoch (a new id once the epochs are
        spent, or when ``principal``, the caller, is not the one it was given to: only its owner may write
        with it, ``security.producer_ids``), fencing every older producer of the id. ``producer_id`` and
        ``producer_epoch`` are what the producer holds (-1: nothing; KIP-360). An open transaction is aborted
        first, with the epoch bumped, and ``ConcurrentTransactions`` answered: the producer asks again once
        it is aborted.
        ``InvalidTransactionTimeout`` for a timeout over the node's bound."""
        ...

    @peer("Add partitions the producer writes to its transaction", write=True, since=_PRINCIPAL)
    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        principal: str | None = None,
    ) -> None:
        """Kafka's AddPartitionsToTxn: a transaction begins when none is open. ``ProducerFenced`` for an
        older epoch, ``ConcurrentTransactions`` while the previous transaction completes. Here and in the
        calls below, ``principal`` is the caller (None: an unauthenticated client), refused
        ``TransactionalProducerIdNotOwned`` unless ``producer_id`` is its own (``security.producer_ids``)."""
        ...

    @peer("Add a consumer group whose offsets the transaction commits", write=True, since=_PRINCIPAL)
    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        principal: str | None = None,
    ) -> None:
        """Kafka's AddOffsetsToTxn: the group's offset partitions join the transaction when a
        TxnOffsetCommit names them (``add_offset_partitions``)."""
        ...

    @peer("Add the partitions a transactional offset commit writes", write=True, since=_PRINCIPAL)
    async def add_offset_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        partitions: list[TopicPartition],
        principal: str | None = None,
    ) -> int:
        """Asked by the group's coordinator for a TxnOffsetCommit before it stores the offsets: the
        transaction's end reaches those partitions. ``InvalidTxnState`` unless the open transaction added
        the group (``add_offsets``). Returns the transaction's ordinal, which the stored offsets carry
        (``DataService.commit_txn_offset``)."""
        ...

    @peer(
        "Commit or abort the producer's transaction",
        write=True,
        since={**_PRINCIPAL, "bump": TRANSACTIONS_V2},
    )
    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        principal: str | None = None,
        bump: bool = False,
    ) -> ProducerIdAndEpoch:
        """Kafka's EndTxn: the decision is replicated and answered, then the coordinator writes the markers
        to every partition of the transaction (as Kafka: a commit answered later would leave a client whose
        coordinator died meanwhile unable to learn that its transaction commits). ``bump`` (EndTxn v5,
        Kafka's transaction version 2, once ``features.TRANSACTIONS_V2`` is finalized): the producer's
        epoch is bumped, the markers carry the bumped one, and an end asked again with the epoch it bumped
        is answered again (a new producer id at epoch 0 once the epochs are spent); an abort with no
        transaction open aborts one that added nothing, bumping the epoch (Kafka's empty abort). Returns
        the producer id and epoch the producer goes on with."""
        ...

    @peer("Whether a partition is in the producer's ongoing transaction")
    async def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> bool:
        """KIP-890: True when the transactional id's producer at that epoch has an ongoing transaction
        that the partition was added to for writing."""
        ...

    @peer("A transactional id's transaction")
    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """``UnknownTransactionalId`` when no producer holds the id."""
        ...

    @peer(
        "The transactional ids of one coordinator partition"
    )  # while it elects, waited for: a listing is whole
    async def list_transactions(self, coordinator_partition: int) -> list[TransactionSummary]:
        """Every transactional id one partition of ``__transactions`` coordinates, from its leader."""
        ...

    @peer("How many transaction coordinator partitions there are")
    async def coordinator_partitions(self) -> int:
        """The partitions of ``__transactions`` (0 before the first transactional producer)."""
        ...
