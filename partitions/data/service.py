"""The data plane's protocol: records in and out of partitions, and its result types (pure).

``DataService`` is what a front door asks for records (produce, fetch, offsets, consumer offsets). Every
method is async and has two implementations behind this protocol: the node's own
(``partitions.data.plane``), which serves what this node leads and raises ``NotLeader(leader_hint)`` /
``NoLeader`` for what another node must serve, and the cluster-wide one (``partitions.peers.cluster``),
which runs the local one or, on ``NotLeader``, the same call on the node the hint names. A method declared
``@peer`` (``partitions.peer_ops``) is an operation another node can be asked for: that
one declaration gives its endpoint on every node and the stub that calls it (``partitions.peers.client``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from partitions.errors import FencedLeaderEpoch, UnknownLeaderEpoch
from partitions.features import OFFSET_LEADER_EPOCH, OFFSET_METADATA, PRODUCE_PRODUCER, Format
from partitions.groups.share.partition import ShareOffset
from partitions.peer_ops import peer
from partitions.transactions.service import Marker

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

HIGH_WATERMARK = -1  # delete_records: below the high watermark, as Kafka's DeleteRecords offset -1 asks
# A leader epoch (the Raft term of the entry that committed a batch, Kafka's partition leader epoch), or a
# leader's current one (its term), unknown or not given: Kafka's -1
NO_LEADER_EPOCH = -1
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class Served(Generic[T]):
    """A cluster-wide call's result and the node that served it (a partition call: the partition's
    leader)."""

    value: T
    node: str


@dataclass(frozen=True, slots=True)
class Producer:
    """Who produces a batch, as the door it came through knows them: what the data plane checks the batch
    against (a peer value: fields are only ever added, with defaults)."""

    principal: str | None = None  # "User:NAME" as authenticated; None: anonymous
    host: str = ""  # the client's address, as ACLs match it ("": unknown)
    transactional_id: str | None = None  # the Kafka Produce request's (the HTTP door has none)


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """A consumer group's committed offset of a partition and the leader epoch committed with it (Kafka's
    ``committed_leader_epoch``, KIP-320; -1 when the commit named none) and its metadata."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""  # the client's string committed with it (Kafka's ``committed_metadata``)


@dataclass(frozen=True, slots=True)
class ProduceResult:
    partition: int
    base_offset: int
    end_offset: int  # offset after the last record: the records got base_offset .. end_offset - 1
    duplicate: bool = False
    log_append_time_ms: int | None = None  # a LogAppendTime topic's stamp (a duplicate's: its first)
    log_start_offset: int = -1  # the partition's log start offset when answered (Kafka's answer has it)


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer a partition's replica remembers (Kafka's DescribeProducers): its epoch, last sequence,
    the coordinator epoch of the last marker it had here, and its open transaction, if any."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1  # of its newest batch here (-1: none since its epoch began)
    coordinator_epoch: int = -1  # of the last transaction marker applied for it here (-1: none)
    transaction_start_offset: int = -1  # the first offset of its open transaction here (-1: none open)
    transaction_start_ms: int = -1  # that offset's batch's timestamp: when the transaction began here
    # its newest batch's max timestamp here (Kafka's LastTimestamp; -1: none remembered, as after a marker
    # that began a new epoch, where Kafka shows the marker's time)
    last_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class FetchedBatches:
    """Committed batches holding ``offset`` onwards, as stored (CRC-checked, not decoded): the first may
    start before the offset asked for, as in Kafka; the reader skips those records."""

    data: bytes
    high_watermark: int  # the partition's end when read: the next offset to be committed
    log_start_offset: int
    leader_epoch: int = NO_LEADER_EPOCH  # the term of the leader that read them (a peer's copy: none)
    last_stable_offset: int = NO_OFFSET  # below it every transaction has ended (-1: not read)
    # read_committed: the aborted transactions among ``data``, (producer id, first offset) each
    aborted: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int  # "beginning_offset"
    high_watermark: int  # "end_offset": the next offset to be committed
    leader_epoch: int = NO_LEADER_EPOCH  # the leader's current epoch (its Raft term)
    log_start_epoch: int = NO_LEADER_EPOCH  # the epoch of the batch holding the log start offset
    last_stable_offset: int = NO_OFFSET  # below it every transaction has ended (-1: not read)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """The first record at or after a timestamp: its offset and its own timestamp (Kafka's ListOffsets)."""

    offset: int
    timestamp_ms: int
    leader_epoch: int = NO_LEADER_EPOCH  # the epoch of its batch


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Where a leader epoch ends in a partition's log (Kafka's OffsetForLeaderEpoch): the largest epoch at
    most the one asked for that the log knows, and the offset the next epoch starts at (the high watermark
    for the leader's current epoch); both -1 for an epoch above every known one, or -1."""

    leader_epoch: int
    end_offset: int


def check_leader_epoch(group_id: str, epoch: int, current_epoch: int) -> None:
    """Kafka's check of the ``current_leader_epoch`` a client sends (-1: none): FencedLeaderEpoch when it
    is older than the replica's, UnknownLeaderEpoch when newer."""
    if epoch < 0 or epoch == current_epoch:
        return
    if epoch < current_epoch:
        raise FencedLeaderEpoch(group_id, epoch, current_epoch)
    raise UnknownLeaderEpoch(group_id, epoch, current_epoch)


def _leader_write(summary: str, since: dict[str, Format] | None = None) -> Callable[[F], F]:
    """A write to a partition, run on its leader, that may wait up to ``timeout_ms`` for its commit."""
    return peer(summary, write=True, wait_arg="timeout_ms", topic_arg="topic", since=since)


class DataService(Protocol):
    @_leader_write("Append a record batch on the partition's leader", since={"producer": PRODUCE_PRODUCER})
    async def produce_batch(
        self, topic: str, partition: int, batch: bytes, timeout_ms: int, producer: Producer | None = None
    ) -> ProduceResult:
        """Append a record batch the producer encoded (base offset 0, term 0): the one write of records,
        whichever door they came through, checked before it is replicated (``InvalidRecord`` names what is
        malformed; ``RecordTooLarge``, ``InflatedTooLarge``); an idempotent one may also be refused
        ``SequenceTooOld``, ``ProducerFenced`` (an older epoch) or ``OutOfOrderSequence``. A transactional
        one needs ``producer``'s transactional id, which ``producer`` may WRITE
        (``TransactionalIdAuthorizationFailed``), and its transaction open in the partition or the
        partition in the producer's ongoing transaction as its coordinator says (``InvalidTxnState``;
        ``TransactionUnverified`` when the coordinator could not be asked). ``producer`` None: an
        anonymous producer without a transactional id (an older node's call)."""
        ...

    @peer(
        "Committed batches from an offset (long poll) on the leader", wait_arg="timeout_ms", topic_arg="topic"
    )
    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        """The committed batches holding ``offset`` onwards (at least one if any, within ``max_bytes``),
        waiting up to ``timeout_ms`` for one when none is there. Raises OffsetOutOfRange, NotLeader..."""
        ...

    @peer(
        "Committed batches below the last stable offset, and the aborted transactions among them (long poll)",
        wait_arg="timeout_ms",
        topic_arg="topic",
    )
    async def fetch_stable(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        """Kafka's read_committed fetch: as ``fetch_batches``, but only below the last stable offset (no
        batch of a transaction still open), with ``aborted`` naming the aborted transactions whose
        records lie among the batches returned (the reader drops their records)."""
        ...

    @peer("A partition's log start offset and high watermark, from its leader", topic_arg="topic")
    async def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    @peer("The first offset at or after a timestamp, from the leader", topic_arg="topic")
    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        """The first committed record whose timestamp is >= ``timestamp_ms``; None when none is."""
        ...

    @_leader_write(
        "Store a consumer group's offset on the partition's leader",
        since={"leader_epoch": OFFSET_LEADER_EPOCH, "metadata": OFFSET_METADATA},
    )
    async def commit_offset(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        reset: bool,
        timeout_ms: int,
        leader_epoch: int = NO_LEADER_EPOCH,
        metadata: str = "",
    ) -> int:
        """Store a consumer group's next offset to read, with the leader epoch of the record before it
        when the client named one and the client's metadata string; returns the stored offset (never
        lower unless ``reset``; the same offset takes the new metadata)."""
        ...

    @_leader_write("Delete a partition's records below an offset on its leader")
    async def delete_records(self, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
        """Move the partition's log start offset up to ``offset`` on every replica (Kafka's DeleteRecords;
        ``HIGH_WATERMARK``: every record committed so far); returns the log start offset then (Kafka's
        low watermark). An offset at or below the start changes nothing; one past the high watermark
        raises OffsetOutOfRange."""
        ...

    @peer("Where a leader epoch ends in a partition's log, from its leader", topic_arg="topic")
    async def epoch_end_offset(
        self, topic: str, partition: int, leader_epoch: int, current_leader_epoch: int
    ) -> EpochEndOffset:
        """Kafka's OffsetForLeaderEpoch: ``current_leader_epoch`` (-1: not checked) is checked against
        this node's replica first (FencedLeaderEpoch, UnknownLeaderEpoch), then its leadership
        (NotLeader, NoLeader)."""
        ...

    @peer("The producers a partition's replica remembers, and their open transactions", topic_arg="topic")
    async def producers(self, topic: str, partition: int) -> tuple[ProducerState, ...]:
        """Kafka's DescribeProducers from this node's replica in any role (``NotLeader`` naming the leader
        when it has none): every producer its partition remembers, with its open transaction's first
        offset and start time (an operator aborts a hanging one: WriteTxnMarkers)."""
        ...

    @peer("A consumer group's committed offset, from the partition's leader", topic_arg="topic")
    async def committed_offset(self, group: str, topic: str, partition: int) -> int | None: ...

    @peer("A consumer group's committed offset unless a transaction holds one pending", topic_arg="topic")
    async def stable_committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        """``group_offset(require_stable=True)``'s offset: what a node of release 0.1.0 asks (served for it;
        this release asks it of a leader while ``features.GROUP_OFFSET`` is not finalized)."""
        ...

    @peer("Whether a producer has a transaction open in the partition, on its leader", topic_arg="topic")
    async def open_transaction(self, topic: str, partition: int, producer_id: int) -> bool:
        """Release 0.1.0's Kafka door asks it before a transactional batch (served for its nodes; this
        release's checks are ``produce_batch``'s)."""
        ...

    @peer("A consumer group's committed offset and its leader epoch, from the partition's leader",
          topic_arg="topic")  # fmt: skip
    async def group_offset(
        self, group: str, topic: str, partition: int, require_stable: bool
    ) -> GroupOffset | None:
        """The committed offset with its leader epoch (None: none committed); with ``require_stable``,
        ``UnstableOffsetCommit`` while an open transaction has committed an offset of the group in the
        partition (Kafka's OffsetFetch with require_stable, KIP-447)."""
        ...

    @_leader_write(
        "Store a consumer group's offset inside a transaction, on the partition's leader",
        since={"leader_epoch": OFFSET_LEADER_EPOCH, "metadata": OFFSET_METADATA},
    )
    async def commit_txn_offset(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        producer_id: int,
        producer_epoch: int,
        transaction: int,
        timeout_ms: int,
        leader_epoch: int = NO_LEADER_EPOCH,
        metadata: str = "",
    ) -> None:
        """Store a group's offset (and the leader epoch and metadata named with it) as pending for the
        producer's open transaction (``transaction``: its ordinal, from
        ``TransactionService.add_offset_partitions``): visible once its marker commits it, dropped if it
        aborts (``write_txn_marker``). Raises ProducerFenced for an epoch older than the partition knows
        for the producer, InvalidTxnState when that transaction's marker came already (a request that
        outlived its transaction must not hold an offset for the next one)."""
        ...

    @_leader_write("End a producer's transaction in a partition, on its leader")
    async def write_txn_marker(self, topic: str, partition: int, marker: Marker, timeout_ms: int) -> int:
        """End the producer's transaction in the partition (docs/decisions/0019-transactions.md): with
        ``marker.write_control``, a COMMIT or ABORT control batch; its pending transactional offsets made
        visible (commit) or dropped. Returns the control batch's offset (-1: none written). Raises
        ProducerFenced for an epoch older than the partition knows for the producer; a newer one fences the
        older."""
        ...

    @_leader_write("Delete a consumer group's offset on the partition's leader")
    async def delete_offset(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        """Delete a group's committed offset of the partition (its group was deleted); whether it had
        one."""
        ...

    @peer("A share group's start offset in the partition, on its leader", topic_arg="topic")
    async def share_offset(self, group: str, topic: str, partition: int) -> ShareOffset | None:
        """The share group's start offset and lag in the partition (None: the group has no state there,
        Kafka's uninitialized share partition)."""
        ...

    @_leader_write("Move a share group's start offset in the partition, on its leader")
    async def alter_share_offset(
        self, group: str, topic: str, partition: int, offset: int, timeout_ms: int
    ) -> None:
        """Kafka's AlterShareGroupOffsets for one partition: the group's records start at ``offset``,
        nothing in flight (the group's coordinator checked that it has no member)."""
        ...

    @_leader_write("Forget a share group's state in the partition, on its leader")
    async def delete_share_state(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        """Kafka's DeleteShareGroupOffsets for one partition; whether the group had state there."""
        ...


class LocalDataService(DataService, Protocol):
    """This node's own ``DataService``, as its Kafka door calls it: a Kafka client produces to the
    partition's leader itself, so what only the Kafka door asks never travels between nodes."""

    async def produce_batch(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        timeout_ms: int,
        producer: Producer | None = None,
        *,
        contiguous: bool = False,
        join_transaction: bool = False,
    ) -> ProduceResult:
        """``DataService.produce_batch``; ``contiguous``: the batch follows Kafka's sequence rule (it
        starts at its producer's last sequence + 1, ``partitions.replicas.dedup``), not the HTTP API's;
        ``join_transaction``: a transactional batch adds its partition to its producer's transaction (a
        Kafka Produce v12's, transaction version 2: ``TransactionalWrites.verify``)."""
        ...

    async def max_timestamp_offset(self, topic: str, partition: int) -> TimestampOffset | None:
        """The first committed record holding the largest timestamp of the partition's log, on its leader
        (Kafka's ListOffsets -3, KIP-734); None when the log has no record."""
        ...

    async def wait_any(
        self,
        reads: Sequence[tuple[str, int, int]],
        timeout_ms: int,
        stable: bool = False,
        step: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """A long poll's wait without its read, over many partitions at once: until one of ``reads``
        (topic, partition, offset) has a committed record at its offset (below the last stable offset with
        ``stable``), or one would not be read as it was, or ``timeout_ms``. The Kafka door waits with it
        and then reads once."""
        ...
