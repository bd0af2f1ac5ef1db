"""The transaction coordinator without I/O: over an in-memory replicated table, a hand-driven wall clock and
a marker writer that records (and, when asked, fails or holds) each marker: a transaction's end written to
every partition, retries, fencing, timeouts, a failover mid-transaction, KIP-890's verification."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from partitions.errors import (
    InvalidName,
    InvalidTxnState,
    ProducerFenced,
    TransactionalProducerIdNotOwned,
    UnknownTopic,
)
from partitions.groups.assignors import TopicPartition
from partitions.security.producer_ids import owner_number
from partitions.transactions.coordinator import TransactionCoordinator
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    TransactionLimitReached,
    UnknownTransactionalId,
)
from partitions.transactions.service import Marker
from partitions.transactions.state import (
    EXPIRATION_MS,
    Limits,
    Transaction,
    TransactionTable,
    TxnCommand,
    TxnResult,
    TxnState,
    encode,
)
from raftlog.consensus.errors import NoLeader, NotLeader
from tests.waiting import wait_until

T0, T1, T2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("audit", 0)
TID = "payments-1"


class MemoryLog:
    """The coordinator partitions, replicated in memory: every coordinator built over one sees the same
    tables (a failover is another coordinator over the same log in a later term)."""

    def __init__(self, partitions: int = 2) -> None:
        self.tables = [TransactionTable() for _ in range(partitions)]
        self.term = 1
        self.leader = "n1"
        self.created = False
        self.proposals = 0  # commands replicated, refused ones too

    def over(self, node: str) -> NodeLog:
        return NodeLog(self, node)


@dataclass
class NodeLog:
    """The replicated log as one node sees it: it reads and proposes only while it leads."""

    log: MemoryLog
    node: str

    def partitions(self) -> int:
        if not self.log.created:
            raise UnknownTopic("__transactions")
        return len(self.log.tables)

    async def ensure_topic(self) -> None:
        self.log.created = True

    def table(self, partition: int) -> tuple[TransactionTable, int]:
        if self.log.leader != self.node:
            raise NotLeader(f"__transactions-{partition}", self.log.leader)
        return self.log.tables[partition], self.log.term

    def led_partitions(self) -> list[int]:
        return list(range(len(self.log.tables))) if self.log.leader == self.node and self.log.created else []

    async def propose(self, partition: int, command: TxnCommand) -> TxnResult:
        self.table(partition)
        self.log.proposals += 1
        return self.log.tables[partition].apply(encode(command))


@dataclass
class Markers:
    """Records every marker written; ``failing[tp]`` errors are raised first, one per try; a marker for a
    partition and coordinator epoch in ``held`` waits for its event."""

    written: list[tuple[TopicPartition, int, int, bool, int, bool]] = field(default_factory=list)
    failing: dict[TopicPartition, list[Exception]] = field(default_factory=dict)
    held: dict[tuple[TopicPartition, int], asyncio.Event] = field(default_factory=dict)
    tries: int = 0
    transactions: list[int] = field(default_factory=list)  # the ordinal each written marker carried

    async def __call__(self, tp: TopicPartition, marker: Marker) -> None:
        self.tries += 1
        if (tp, marker.coordinator_epoch) in self.held:
            await self.held[tp, marker.coordinator_epoch].wait()
        errors = self.failing.get(tp)
        if errors:
            raise errors.pop(0)
        m = marker
        self.written.append(
            (tp, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, m.write_control)
        )
        self.transactions.append(m.transaction)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def log() -> MemoryLog:
    return MemoryLog()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def markers() -> Markers:
    return Markers()


def coordinator(
    log: MemoryLog, markers: Markers, clock: Clock, node: str = "n1", **kw: float
) -> TransactionCoordinator:
    return TransactionCoordinator(
        node,
        log.over(node),
        markers,
        timeout_ms_max=int(kw.get("timeout_ms_max", 60_000)),
        wall=clock,
        rng=random.Random(7),
        marker_retry_s=(0.001, 0.004),
    )


def row(log: MemoryLog, coordinator: TransactionCoordinator, tid: str = TID) -> Transaction:
    return log.tables[coordinator.coordinator_partition(tid)].transactions[tid]


async def ended(log: MemoryLog, c: TransactionCoordinator, pid: int, epoch: int, commit: bool) -> None:
    """EndTxn, then the wait for its markers and ``Complete`` (the answer comes once it is decided)."""
    await c.end_transaction(TID, pid, epoch, commit)
    await wait_until(
        lambda: not row(log, c).state.preparing,
        "the transaction's markers written and its end complete",
        10,
        every_s=0.001,
    )


async def started(
    c: TransactionCoordinator, *tps: TopicPartition, timeout_ms: int = 10_000
) -> tuple[int, int]:
    await c.ensure_topic()
    given = await c.init_producer_id(TID, timeout_ms, -1, -1)
    await c.add_partitions(TID, given.producer_id, given.producer_epoch, list(tps or (T0,)))
    return given.producer_id, given.producer_epoch


async def test_each_transaction_s_ordinal_outdoes_the_last_whatever_the_clock_says(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    """The ordinal a transaction's offsets and markers carry (its start) rises per id even when a new
    leader's clock is behind: a partition refuses offsets of a transaction whose marker it took."""
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0)
    await c.add_offsets(TID, pid, epoch, "billing")
    first = await c.add_offset_partitions(TID, pid, epoch, "billing", [T1])
    await ended(log, c, pid, epoch, False)
    assert set(markers.transactions) == {first}
    clock.ms -= 60_000  # the next leader's clock is a minute behind
    await c.add_partitions(TID, pid, epoch, [T0])
    await c.add_offsets(TID, pid, epoch, "billing")
    second = await c.add_offset_partitions(TID, pid, epoch, "billing", [T1])
    assert second > first
    await ended(log, c, pid, epoch, True)
    assert set(markers.transactions) == {first, second}


async def test_init_gives_a_producer_id_and_every_later_init_the_next_epoch(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    with pytest.raises(UnknownTopic):  # before the topic exists (FindCoordinator creates it)
        await c.init_producer_id(TID, 1_000, -1, -1)
    await c.ensure_topic()
    first = await c.init_producer_id(TID, 1_000, -1, -1)
    second = await c.init_producer_id(TID, 1_000, -1, -1)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    other = await c.init_producer_id("other", 1_000, -1, -1)
    assert other.producer_id != first.producer_id
    with pytest.raises(InvalidTransactionTimeout):
        await c.init_producer_id(TID, 60_001, -1, -1)  # above the node's --transaction-max-timeout-ms
    with pytest.raises(InvalidTransactionTimeout):
        await c.init_producer_id(TID, 0, -1, -1)
    with pytest.raises(InvalidName):
        await c.init_producer_id("", 1_000, -1, -1)
    with pytest.raises(InvalidName):
        await c.init_producer_id("x" * 513, 1_000, -1, -1)


async def test_a_commit_writes_each_partition_s_marker_and_a_retry_of_its_end_answers_the_same(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0, T1)
    await c.add_offsets(TID, pid, epoch, "billing")
    await c.add_offset_partitions(TID, pid, epoch, "billing", [T1, T2])
    log.term = 4  # the coordinator partition's leader was elected again (still this node)
    await ended(log, c, pid, epoch, True)
    assert row(log, c).state is TxnState.COMPLETE_COMMIT
    # one marker a partition, at the producer's epoch and the coordinator's term; a control batch where
    # the producer wrote, none where it only committed offsets
    assert sorted(markers.written) == sorted(
        [(T0, pid, epoch, True, 4, True), (T1, pid, epoch, True, 4, True), (T2, pid, epoch, True, 4, False)]
    )
    await c.end_transaction(TID, pid, epoch, True)  # a retry whose answer was lost: the same answer
    assert len(markers.written) == 3
    with pytest.raises(InvalidTxnState):
        await c.end_transaction(TID, pid, epoch, False)


async def test_a_marker_is_tried_again_until_its_partition_takes_it_and_a_deleted_one_is_passed_over(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0, T1)
    markers.failing[T0] = [NoLeader("orders-0"), NotLeader("orders-0", None), NoLeader("orders-0")]
    markers.failing[T1] = [UnknownTopic("orders")]  # the topic was deleted meanwhile
    await ended(log, c, pid, epoch, False)
    assert row(log, c).state is TxnState.COMPLETE_ABORT
    assert [m[0] for m in markers.written] == [T0] and markers.tries == 5
    assert c.counters["transaction_marker_retries"] == 3


async def test_an_end_is_answered_once_decided_not_after_its_markers_and_the_completion_goes_on(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    """As Kafka: EndTxn is answered once the decision is replicated. A coordinator killed while it holds
    the answer leaves a client that cannot learn the outcome (franz-go then processes the transaction's
    input again while the successor commits it): the answer does not wait for a marker."""
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0, T1)
    markers.held[T1, 1] = asyncio.Event()  # a partition whose leader is gone: its marker waits
    await asyncio.wait_for(c.end_transaction(TID, pid, epoch, True), 1.0)  # answered: decided
    assert row(log, c).state is TxnState.PREPARE_COMMIT
    with pytest.raises(ConcurrentTransactions):  # a retry of the end, or the producer's next transaction
        await c.end_transaction(TID, pid, epoch, True)
    with pytest.raises(ConcurrentTransactions):
        await c.add_partitions(TID, pid, epoch, [T2])
    markers.held[T1, 1].set()
    await wait_until(
        lambda: row(log, c).state is TxnState.COMPLETE_COMMIT,
        "the commit complete once the held marker landed",
        10,
        every_s=0.001,
    )
    await c.end_transaction(TID, pid, epoch, True)  # a retry once complete: the same answer
    await c.add_partitions(TID, pid, epoch, [T2])
    assert row(log, c).state is TxnState.ONGOING


async def test_a_new_producer_of_the_id_aborts_the_open_transaction_and_fences_the_old_one(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0, T1)
    with pytest.raises(ConcurrentTransactions):
        await c.init_producer_id(TID, 10_000, -1, -1)
    await wait_until(
        lambda: row(log, c).state is TxnState.COMPLETE_ABORT,
        "the open transaction aborted by the new producer of its id",
        10,
        every_s=0.001,
    )
    # the abort markers carry the bumped epoch: each partition fences the old producer too
    assert sorted(markers.written) == [
        (T0, pid, epoch + 1, False, 1, True),
        (T1, pid, epoch + 1, False, 1, True),
    ]
    for refused in (
        c.add_partitions(TID, pid, epoch, [T2]),
        c.add_offsets(TID, pid, epoch, "g"),
        c.end_transaction(TID, pid, epoch, True),
    ):
        with pytest.raises(ProducerFenced):
            await refused
    again = await c.init_producer_id(TID, 10_000, -1, -1)
    assert (again.producer_id, again.producer_epoch) == (pid, epoch + 2)


async def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0, timeout_ms=5_000)
    clock.ms += 5_000
    await c.sweep()  # at the timeout, not past it: still open
    assert row(log, c).state is TxnState.ONGOING and markers.written == []
    clock.ms += 1
    await c.sweep()
    await wait_until(
        lambda: row(log, c).state is TxnState.COMPLETE_ABORT,
        "the timed-out transaction aborted",
        10,
        every_s=0.001,
    )
    assert markers.written == [(T0, pid, epoch + 1, False, 1, True)]
    assert c.counters["transactions_timed_out"] == 1
    with pytest.raises(ProducerFenced):
        await c.end_transaction(TID, pid, epoch, True)


async def test_after_a_failover_the_new_leader_completes_a_decided_transaction_and_times_out_open_ones(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    first = coordinator(log, markers, clock, "n1")
    pid, epoch = await started(first, T0, T1, timeout_ms=5_000)
    other = await first.init_producer_id("other", 5_000, -1, -1)
    await first.add_partitions("other", other.producer_id, other.producer_epoch, [T2])
    markers.held[T1, 1] = asyncio.Event()
    await first.end_transaction(TID, pid, epoch, True)  # answered once decided
    await wait_until(
        lambda: markers.tries == 2, "both markers sent by the first coordinator's driver", 10, every_s=0.001
    )
    assert row(log, first).state is TxnState.PREPARE_COMMIT  # one not written yet
    # n1 loses the coordinator partitions to n2 in term 2; n1's driver is still waiting on its marker
    log.leader, log.term = "n2", 2
    second = coordinator(log, markers, clock, "n2")
    with pytest.raises(NotLeader):
        await first.describe_transaction(TID)
    await second.sweep()
    await wait_until(
        lambda: row(log, second).state is TxnState.COMPLETE_COMMIT,
        "the commit completed by the new leader's sweep",
        10,
        every_s=0.001,
    )
    assert (T1, pid, epoch, True, 2, True) in markers.written  # the new leader's epoch
    assert row(log, second, "other").state is TxnState.ONGOING  # within its timeout: it goes on
    markers.held[T1, 1].set()  # the deposed driver's marker lands late; it completes nothing itself
    await wait_until(
        lambda: (T1, pid, epoch, True, 1, True) in markers.written,
        "the deposed driver's late marker written",
        10,
        every_s=0.001,
    )
    await first.close()  # its driver, if still running, stops
    assert row(log, second).state is TxnState.COMPLETE_COMMIT
    clock.ms += 5_001  # the open transaction's timeout runs from its replicated start, across the failover
    await second.sweep()
    await wait_until(
        lambda: row(log, second, "other").state is TxnState.COMPLETE_ABORT,
        "the other transaction aborted at its timeout across the failover",
        10,
        every_s=0.001,
    )
    await second.close()


async def test_verify_partition_accepts_only_a_partition_of_the_ongoing_transaction_at_that_epoch(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    pid, epoch = await started(c, T0)
    await c.add_offsets(TID, pid, epoch, "billing")
    await c.add_offset_partitions(TID, pid, epoch, "billing", [T1])
    assert await c.verify_partition(TID, pid, epoch, "orders", 0)
    assert not await c.verify_partition(TID, pid, epoch, "orders", 1)  # offsets only: no batch of it
    assert not await c.verify_partition(TID, pid, epoch + 1, "orders", 0)
    assert not await c.verify_partition(TID, pid + 1, epoch, "orders", 0)
    assert not await c.verify_partition("nobody", pid, epoch, "orders", 0)
    await ended(log, c, pid, epoch, True)
    assert not await c.verify_partition(TID, pid, epoch, "orders", 0)  # ended: a late write opens nothing


async def test_describe_and_list_show_each_transaction(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    assert await c.coordinator_partitions() == 0
    pid, epoch = await started(c, T1, T0)
    await c.add_offsets(TID, pid, epoch, "billing")
    await c.add_offset_partitions(TID, pid, epoch, "billing", [T2])
    described = await c.describe_transaction(TID)
    assert (described.summary.state, described.summary.producer_id, described.summary.started_ms) == (
        "Ongoing",
        pid,
        clock.ms,
    )
    assert (described.partitions, described.offset_partitions, described.groups) == (
        (T0, T1),
        (T2,),
        ("billing",),
    )
    assert described.coordinator == "n1" and described.coordinator_epoch == 1
    with pytest.raises(UnknownTransactionalId):
        await c.describe_transaction("nobody")
    partition = c.coordinator_partition(TID)
    assert [s.transactional_id for s in await c.list_transactions(partition)] == [TID]
    assert await c.coordinator_partitions() == 2


async def test_ids_unused_for_seven_days_are_forgotten(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    c = coordinator(log, markers, clock)
    await started(c, T0)
    await c.init_producer_id("idle", 1_000, -1, -1)
    clock.ms += EXPIRATION_MS
    await c.sweep()  # the open one times out, the idle one is forgotten
    await wait_until(
        lambda: row(log, c).state is TxnState.COMPLETE_ABORT,
        "the timed-out transaction aborted",
        10,
        every_s=0.001,
    )
    with pytest.raises(UnknownTransactionalId):
        await c.describe_transaction("idle")
    clock.ms += EXPIRATION_MS
    await c.sweep()
    with pytest.raises(UnknownTransactionalId):
        await c.describe_transaction(TID)


async def test_the_coordinator_s_bounds_refuse_what_passes_them_and_change_nothing(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    """Abuse: a client making ids, partitions and groups without end is refused at each bound."""
    c = TransactionCoordinator(
        "n1", log.over("n1"), markers, wall=clock, rng=random.Random(3),
        limits=Limits(transactional_ids=4, partitions=3, groups=2, open_partitions=5),
    )  # fmt: skip
    await c.ensure_topic()
    made = 0
    with pytest.raises(TransactionLimitReached, match="transactional ids per coordinator partition"):
        for number in range(100):  # 2 coordinator partitions of 4 ids each: at most 8 made
            await c.init_producer_id(f"id-{number}", 1_000, -1, -1)
            made += 1
    assert made <= 8 and sum(len(t.transactions) for t in log.tables) == made
    tid = "id-0"
    given = await c.init_producer_id(tid, 1_000, -1, -1)  # an id it holds starts again
    many = [TopicPartition("t", p) for p in range(4)]
    with pytest.raises(TransactionLimitReached, match="3 partitions per transaction"):
        await c.add_partitions(tid, given.producer_id, given.producer_epoch, many)
    await c.add_offsets(tid, given.producer_id, given.producer_epoch, "g1")
    await c.add_offsets(tid, given.producer_id, given.producer_epoch, "g2")
    with pytest.raises(TransactionLimitReached, match="2 consumer groups per transaction"):
        await c.add_offsets(tid, given.producer_id, given.producer_epoch, "g3")
    with pytest.raises(TransactionLimitReached, match="3 partitions per transaction"):
        await c.add_offset_partitions(tid, given.producer_id, given.producer_epoch, "g1", many)
    assert (await c.describe_transaction(tid)).groups == ("g1", "g2")
    assert (await c.describe_transaction(tid)).partitions == ()
    proposed = log.proposals
    flood = [TopicPartition("t", p) for p in range(100_000)]  # what one request could name
    for asking in (
        c.add_partitions(tid, given.producer_id, given.producer_epoch, flood),
        c.add_offset_partitions(tid, given.producer_id, given.producer_epoch, "g1", flood),
    ):
        with pytest.raises(TransactionLimitReached):
            await asking
    assert log.proposals == proposed  # refused before anything was replicated


async def test_a_transactional_id_s_producer_id_is_its_callers_and_changes_hands_with_a_new_epoch(
    log: MemoryLog, markers: Markers, clock: Clock
) -> None:
    """InitProducerId gives the caller's producer id (``security.producer_ids``): the same principal keeps
    its id and gets the next epoch; another principal allowed to WRITE the id gets an id of its own, and
    the first one's is refused from then on."""
    c = coordinator(log, markers, clock)
    await c.ensure_topic()
    bob = await c.init_producer_id(TID, 10_000, -1, -1, "User:bob")
    again = await c.init_producer_id(TID, 10_000, -1, -1, "User:bob")
    assert (again.producer_id, again.producer_epoch) == (bob.producer_id, bob.producer_epoch + 1)
    carol = await c.init_producer_id(TID, 10_000, -1, -1, "User:carol")
    assert carol.producer_id != bob.producer_id and carol.producer_epoch == 0
    assert owner_number(carol.producer_id) != owner_number(bob.producer_id)
    with pytest.raises(InvalidProducerIdMapping):  # bob's, by bob: no longer the id's
        await c.add_partitions(TID, bob.producer_id, again.producer_epoch, [T0], "User:bob")
    for call in (  # carol's, by another principal: refused before anything is replicated
        c.add_partitions(TID, carol.producer_id, 0, [T0], "User:bob"),
        c.add_offsets(TID, carol.producer_id, 0, "billing", "User:bob"),
        c.add_offset_partitions(TID, carol.producer_id, 0, "billing", [T1], "User:bob"),
        c.end_transaction(TID, carol.producer_id, 0, False, None),
    ):
        with pytest.raises(TransactionalProducerIdNotOwned):
            await call
    await c.add_partitions(TID, carol.producer_id, carol.producer_epoch, [T0], "User:carol")
    assert row(log, c).state is TxnState.ONGOING and row(log, c).producer_id == carol.producer_id
    idempotent = await c.init_idempotent_producer("User:bob")
    assert idempotent.producer_epoch == 0 and owner_number(idempotent.producer_id) == owner_number(
        bob.producer_id
    )
