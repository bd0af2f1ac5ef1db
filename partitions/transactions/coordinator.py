"""The transaction coordinator: Kafka's transaction protocol on the leader of each ``__transactions``
partition (docs/decisions/0019-transactions.md).

A transactional id is coordinated by one partition of the internal topic ``__transactions`` (murmur2 of the
id modulo its partition count, as a consumer group by ``__consumer_groups``); that partition's Raft leader
serves every request of the id, and everything else raises ``NotLeader`` naming the leader it knows. Every
transition is replicated (``state.TransactionTable``) before it is answered, so a new leader holds every
transaction as it stood.

Ending a transaction: ``EndTxn`` replicates the decision (``PrepareCommit`` or ``PrepareAbort``) and is
answered then, as Kafka answers it; a driver writes the marker to every partition of the transaction,
each through its own leader (``MarkerWriter``: ``DataService.write_txn_marker``), all at once, each tried
again after a pause that doubles up to ``MARKER_RETRY_MAX_S`` until its leader answers, then replicates
``Complete`` (whichever node leads the coordinator partition completes it). The answer must not wait for
the markers: a client that loses its coordinator's connection before the answer cannot learn the outcome
(franz-go's GroupTransactSession then takes the transaction for aborted and processes its input again,
while the coordinator's successor commits it), so the time between the decision and its answer is kept
to Kafka's. Meanwhile the producer's next transaction meets CONCURRENT_TRANSACTIONS (clients back off and
retry), a read_committed reader finds the records once each partition took its marker, and the group's
offsets read with ``require_stable`` answer UNSTABLE_OFFSET_COMMIT until then.

The markers carry the coordinator's epoch: the Raft term of the leader writing them (after a failover the
new leader's, higher than any its predecessor wrote), so a partition can refuse a deposed coordinator's.

In the background (``run``), the leader of each coordinator partition:
- drives every ``PrepareCommit``/``PrepareAbort`` transaction without a driver in its term to its end (a new
  leader finds those its predecessor left);
- aborts every ``Ongoing`` transaction past its timeout (``transaction.timeout.ms``, at most the node's
  ``--transaction-max-timeout-ms``), measured from its replicated start, so the timer goes on across a
  failover; the abort bumps the producer's epoch, fencing it;
- forgets ids unused for ``state.EXPIRATION_MS``.

No sockets here: the replicated log is a ``TransactionLog`` (the node's Raft groups, or an in-memory table
in tests), the markers go through a ``MarkerWriter``, time and randomness are injected.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from partitions.errors import CoordinatorFenced, ProducerFenced, UnknownPartition, UnknownTopic
from partitions.features import TRANSACTIONS_V2, Features
from partitions.groups.assignors import TopicPartition
from partitions.internal_topic import TableLog
from partitions.names import check_group_name, check_topic_name, check_transactional_id
from partitions.security.producer_ids import ProducerIds, owner_number
from partitions.transactions.defaults import TRANSACTION_TIMEOUT_MS_MAX_DEFAULT
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidTransactionTimeout,
    TransactionLimitReached,
    UnknownTransactionalId,
)
from partitions.transactions.service import (
    Marker,
    ProducerIdAndEpoch,
    TransactionDescription,
    TransactionSummary,
)
from partitions.transactions.state import (
    EPOCH_BUMP_MAX,
    EXPIRATION_MS,
    LIMITS,
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
    TxnResult,
    TxnsExpired,
    TxnState,
)
from raftlog.errors import RaftlogError, check
from raftlog.storage.log import wall_clock_ms
from raftlog.storage.partitioner import partition_for_key

log = logging.getLogger("raftlog.transactions")

TRANSACTION_PARTITIONS_DEFAULT = 4  # of the internal __transactions topic
TIMEOUT_MS_MAX_DEFAULT = TRANSACTION_TIMEOUT_MS_MAX_DEFAULT
SWEEP_INTERVAL_S = 1.0  # how often the leader looks for transactions to time out or complete
MARKER_RETRY_MIN_S = 0.05
MARKER_RETRY_MAX_S = 2.0
EXPIRE_BATCH = 1_000  # ids forgotten by one command


class TransactionLog(TableLog[TransactionTable, TxnCommand, TxnResult], Protocol):
    """The replicated home of ``TransactionTable``s: one per partition of ``__transactions``."""


class MarkerWriter(Protocol):
    """Ends the producer's transaction in one partition, through that partition's leader
    (``DataService.write_txn_marker``); raises what the partition's leader answered."""

    async def __call__(self, tp: TopicPartition, marker: Marker) -> None: ...


@dataclass(frozen=True, slots=True)
class _DriveKey:
    partition: int
    term: int
    producer_id: int
    producer_epoch: int
    state: TxnState
    transaction: int  # the transaction's ordinal (``Transaction.started_ms``), which its markers carry


class TransactionCoordinator:
    """Implements ``TransactionService`` for the coordinator partitions this node leads. Event-loop only.
    ``wall`` stamps replicated commands and times transactions out; ``rng`` draws new producer ids."""

    def __init__(
        self,
        node_id: str,
        transaction_log: TransactionLog,
        write_marker: MarkerWriter,
        producer_ids: ProducerIds | None = None,
        *,
        timeout_ms_max: int = TIMEOUT_MS_MAX_DEFAULT,
        wall: Callable[[], int] = wall_clock_ms,
        rng: random.Random | None = None,
        limits: Limits = LIMITS,
        marker_retry_s: tuple[float, float] = (MARKER_RETRY_MIN_S, MARKER_RETRY_MAX_S),
        features: Features | None = None,
    ) -> None:
        check(timeout_ms_max >= 1, f"a transaction timeout bound of {timeout_ms_max} ms")
        self._node_id = node_id
        self._log = transaction_log
        self._write_marker = write_marker
        self._timeout_ms_max = timeout_ms_max
        self._wall = wall
        self._rng = rng or random.Random()
        # in-memory numbers when none are given: a coordinator alone in its process (tests)
        self._producer_ids = producer_ids or ProducerIds.in_memory(self._rng)
        self._limits = limits
        # the gate of transaction version 2's formats (None: a coordinator alone in its process, tests)
        self._features = features
        self._marker_retry_s = marker_retry_s  # the first pause before a marker is tried again, the longest
        self._drivers: dict[str, tuple[_DriveKey, asyncio.Task[None]]] = {}
        self.counters = {"transaction_markers_written": 0, "transaction_marker_retries": 0,
                         "transactions_timed_out": 0, "transaction_epoch_bumps": 0}  # fmt: skip

    # -- routing ---------------------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        await self._log.ensure_topic()

    def coordinator_partition(self, transactional_id: str) -> int:
        return partition_for_key(transactional_id.encode("utf-8", "surrogatepass"), self._log.partitions())

    def _read(self, transactional_id: str) -> tuple[int, TransactionTable, int]:
        """The id's partition, its table and the leader's term (NotLeader/NoLeader/UnknownTopic)."""
        check_transactional_id(transactional_id)
        partition = self.coordinator_partition(transactional_id)
        table, term = self._log.table(partition)
        return partition, table, term

    async def _propose(self, partition: int, command: TxnCommand) -> TxnChanged | TxnsExpired:
        result = await self._log.propose(partition, command)
        if isinstance(result, Exception):
            raise result
        return result

    async def _change(self, partition: int, command: TxnCommand) -> Transaction:
        result = await self._propose(partition, command)
        check(
            isinstance(result, TxnChanged) and result.transaction is not None,
            f"transaction command {type(command).__name__} answered {result!r}",
        )
        assert isinstance(result, TxnChanged) and result.transaction is not None  # narrowed: checked above
        return result.transaction

    # -- the protocol ----------------------------------------------------------------------------------

    async def init_idempotent_producer(self, principal: str | None) -> ProducerIdAndEpoch:
        return ProducerIdAndEpoch(await self._producer_ids.give(principal), 0)

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        principal: str | None = None,
    ) -> ProducerIdAndEpoch:
        if not 1 <= timeout_ms <= self._timeout_ms_max:
            raise InvalidTransactionTimeout(timeout_ms, self._timeout_ms_max)
        partition, table, term = self._read(transactional_id)
        expected = (producer_id, producer_epoch) if producer_id >= 0 else (NO_PRODUCER, -1)
        fresh = await self._producer_ids.give(principal)
        row = table.transactions.get(transactional_id)
        # another principal (allowed to WRITE the id) takes it over: its producer gets an id of its own,
        # the id's older producers are fenced as by a new epoch
        new_owner = row is not None and owner_number(row.producer_id) != owner_number(fresh)
        command = InitProducer(
            transactional_id, timeout_ms, fresh, *expected, self._wall(), term, self._limits, new_owner
        )
        row = await self._change(partition, command)
        if row.state is TxnState.PREPARE_ABORT:  # its open transaction is aborted first, the epoch bumped
            log.info("transactional id %r: a new producer aborts the open transaction", transactional_id)
            self._drive(partition, term, row)
            raise ConcurrentTransactions(transactional_id, row.state.value)
        return ProducerIdAndEpoch(row.producer_id, row.producer_epoch)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        principal: str | None = None,
    ) -> None:
        self._producer_ids.check(producer_id, principal, transactional=True)
        self._bounded(partitions)
        partition, table, term = self._read(transactional_id)
        row = table.transactions.get(transactional_id)
        if (
            row is not None
            and (row.producer_id, row.producer_epoch) == (producer_id, producer_epoch)
            and all(row.written(tp) for tp in partitions)
        ):
            return  # all in already (a retry, or a producer naming a partition again): nothing to replicate
        command = AddPartitions(
            transactional_id, producer_id, producer_epoch, tuple(partitions), self._wall(), term, self._limits
        )
        await self._change(partition, command)

    def _bounded(self, partitions: list[TopicPartition]) -> None:
        """Refused before anything is replicated: more partitions than a transaction may hold (apply
        counts them again with those it holds), or a name no topic can have."""
        if len(partitions) > self._limits.partitions:
            raise TransactionLimitReached("partitions per transaction", self._limits.partitions)
        for tp in partitions:
            check_topic_name(tp.topic)

    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        principal: str | None = None,
    ) -> None:
        self._producer_ids.check(producer_id, principal, transactional=True)
        check_group_name(group)
        partition, _, term = self._read(transactional_id)
        command = AddGroup(
            transactional_id, producer_id, producer_epoch, group, self._wall(), term, self._limits
        )
        await self._change(partition, command)

    async def add_offset_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        partitions: list[TopicPartition],
        principal: str | None = None,
    ) -> int:
        self._producer_ids.check(producer_id, principal, transactional=True)
        check_group_name(group)
        self._bounded(partitions)
        partition, _, term = self._read(transactional_id)
        command = AddOffsetPartitions(
            transactional_id, producer_id, producer_epoch, group, tuple(partitions), self._wall(), term,
            self._limits,
        )  # fmt: skip
        return (await self._change(partition, command)).started_ms

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        principal: str | None = None,
        bump: bool = False,
    ) -> ProducerIdAndEpoch:
        self._producer_ids.check(producer_id, principal, transactional=True)
        partition, table, term = self._read(transactional_id)
        # transaction version 2 only once every node reads its formats (a cluster mid-upgrade ends as v1)
        bump = bump and (self._features is None or self._features.allows(TRANSACTIONS_V2))
        row = table.transactions.get(transactional_id)
        spent = bump and row is not None and row.producer_epoch >= EPOCH_BUMP_MAX
        next_id = await self._producer_ids.give(principal) if spent else NO_PRODUCER
        command = EndTransaction(
            transactional_id, producer_id, producer_epoch, commit, self._wall(), term, bump, next_id
        )
        result = await self._propose(partition, command)
        check(
            isinstance(result, TxnChanged) and result.transaction is not None, f"EndTxn answered {result!r}"
        )
        assert isinstance(result, TxnChanged) and result.transaction is not None  # narrowed: checked above
        ended = result.transaction
        if result.changed:
            self._drive(partition, term, ended)  # answered now: the decision is replicated
            self.counters["transaction_epoch_bumps"] += 1 if ended.bumped else 0
        # what the producer goes on with: with version 2 the bumped epoch, or the next id once spent
        if ended.next_producer_id != NO_PRODUCER:
            return ProducerIdAndEpoch(ended.next_producer_id, 0)
        return ProducerIdAndEpoch(ended.producer_id, ended.producer_epoch)

    async def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> bool:
        _, table, _ = self._read(transactional_id)
        row = table.transactions.get(transactional_id)
        return (
            row is not None
            and (row.producer_id, row.producer_epoch) == (producer_id, producer_epoch)
            and row.written(TopicPartition(topic, partition))
        )

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        partition, table, _ = self._read(transactional_id)
        row = table.transactions.get(transactional_id)
        if row is None:
            raise UnknownTransactionalId(transactional_id)
        return TransactionDescription(
            _summary(row, partition),
            tuple(sorted(tp for tp, written in row.partitions.items() if written)),
            tuple(sorted(tp for tp, written in row.partitions.items() if not written)),
            row.groups,
            row.updated_ms,
            row.coordinator_epoch,
            self._node_id,
        )

    async def list_transactions(self, coordinator_partition: int) -> list[TransactionSummary]:
        table, _ = self._log.table(coordinator_partition)
        rows = list(table.transactions.values())  # copied at once: the driver thread applies meanwhile
        return sorted((_summary(r, coordinator_partition) for r in rows), key=lambda s: s.transactional_id)

    async def coordinator_partitions(self) -> int:
        try:
            return self._log.partitions()
        except UnknownTopic:
            return 0

    # -- ending transactions ---------------------------------------------------------------------------

    def _drive(self, partition: int, term: int, row: Transaction) -> asyncio.Task[None]:
        """The task driving ``row``'s prepared transaction to its end in this leader's ``term`` (the one
        running already, if any)."""
        key = _DriveKey(partition, term, row.producer_id, row.producer_epoch, row.state, row.started_ms)
        running = self._drivers.get(row.transactional_id)
        if running is not None and running[0] == key and not running[1].done():
            return running[1]
        task = asyncio.get_running_loop().create_task(self._complete(key, row))
        self._drivers[row.transactional_id] = (key, task)
        task.add_done_callback(lambda done: self._forget_driver(row.transactional_id, done))
        return task

    def _forget_driver(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        running = self._drivers.get(transactional_id)
        if running is not None and running[1] is task:
            del self._drivers[transactional_id]
        if not task.cancelled() and task.exception() is not None:  # a bug: the next sweep drives it again
            log.error("transactional id %r: completion failed", transactional_id, exc_info=task.exception())

    def _still_driving(self, key: _DriveKey, transactional_id: str) -> bool:
        """Whether this node still leads the partition in the driver's term, the transaction prepared as
        it was: else another leader (or nobody, yet) drives it now."""
        try:
            table, term = self._log.table(key.partition)
        except RaftlogError:
            return False
        row = table.transactions.get(transactional_id)
        return (
            term == key.term
            and row is not None
            and (row.producer_id, row.producer_epoch, row.state)
            == (key.producer_id, key.producer_epoch, key.state)
        )

    async def _complete(self, key: _DriveKey, row: Transaction) -> None:
        tid = row.transactional_id
        commit = row.state is TxnState.PREPARE_COMMIT
        pending = dict(row.partitions)
        pause_s, pause_s_max = self._marker_retry_s
        try:
            while pending:
                if not self._still_driving(key, tid):
                    return
                tps = list(pending)
                done = await asyncio.gather(*(self._marker(key, tid, tp, commit, pending[tp]) for tp in tps))
                for tp, written in zip(tps, done, strict=True):
                    if written:
                        del pending[tp]
                if pending:
                    self.counters["transaction_marker_retries"] += len(pending)
                    await asyncio.sleep(pause_s)
                    pause_s = min(pause_s * 2, pause_s_max)
            if not self._still_driving(key, tid):
                return
            await self._propose(
                key.partition, Complete(tid, key.producer_id, key.producer_epoch, self._wall(), key.term)
            )
        except RaftlogError as exc:  # leadership lost, no quorum: the leader's next sweep drives it again
            log.info("transactional id %r: completion stopped: %s", tid, exc)

    async def _marker(
        self, key: _DriveKey, tid: str, tp: TopicPartition, commit: bool, write_control: bool
    ) -> bool:
        """Whether the partition is done with the transaction (its marker written, or nothing left to end
        there); False: try again."""
        marker = Marker(key.producer_id, key.producer_epoch, commit, key.term, write_control, key.transaction)
        try:
            await self._write_marker(tp, marker)
        except (UnknownTopic, UnknownPartition) as gone:  # deleted meanwhile: nothing to end there
            log.warning("transactional id %r: no marker for %s/%d: %s", tid, tp.topic, tp.partition, gone)
            return True
        except (ProducerFenced, CoordinatorFenced) as fenced:  # a later epoch or coordinator ended it there
            log.warning(
                "transactional id %r: marker for %s/%d refused: %s", tid, tp.topic, tp.partition, fenced
            )
            return True
        except RaftlogError as exc:  # no leader, unreachable, outcome unknown (a marker is idempotent)
            log.info(
                "transactional id %r: marker for %s/%d: %s; trying again", tid, tp.topic, tp.partition, exc
            )
            return False
        self.counters["transaction_markers_written"] += 1
        return True

    # -- the sweep -------------------------------------------------------------------------------------

    async def sweep(self) -> None:
        """On every coordinator partition led here: drive prepared transactions that have no driver in
        this term, abort those past their timeout, forget ids unused for the expiration."""
        now = self._wall()
        for partition in self._log.led_partitions():
            try:
                table, term = self._log.table(partition)
            except RaftlogError:
                continue
            expired: list[str] = []
            for row in list(table.transactions.values()):  # copied at once: the driver thread applies
                if row.state.preparing:
                    self._drive(partition, term, row)
                elif row.state is TxnState.ONGOING and now - row.started_ms > row.timeout_ms:
                    await self._time_out(partition, term, row, now)
                elif row.state.idle and now - row.updated_ms >= EXPIRATION_MS and len(expired) < EXPIRE_BATCH:
                    expired.append(row.transactional_id)
            if expired:
                result = await self._propose(partition, Expire(tuple(expired), now, EXPIRATION_MS))
                if isinstance(result, TxnsExpired) and result.transactional_ids:
                    log.info("forgot %d transactional id(s) unused for 7 days", len(result.transactional_ids))

    async def _time_out(self, partition: int, term: int, row: Transaction, now: int) -> None:
        version_2 = self._features is None or self._features.allows(TRANSACTIONS_V2)
        result = await self._log.propose(
            partition,
            TimeOut(row.transactional_id, row.producer_id, row.producer_epoch, now, term, version_2),
        )
        if isinstance(result, TxnChanged) and result.changed and result.transaction is not None:
            log.info(
                "transactional id %r: transaction open %d ms, past its timeout of %d ms: aborted, producer "
                "epoch %d fenced",
                row.transactional_id, now - row.started_ms, row.timeout_ms, row.producer_epoch,
            )  # fmt: skip
            self.counters["transactions_timed_out"] += 1
            self._drive(partition, term, result.transaction)

    async def run(self, interval_s: float = SWEEP_INTERVAL_S) -> None:
        """The sweep loop of a node (cancelled when the node closes)."""
        while True:
            try:
                await self.sweep()
            except RaftlogError as exc:  # lost leadership mid-way, no quorum: the next sweep goes on
                log.info("transaction sweep: %s", exc)
            await asyncio.sleep(interval_s)

    async def close(self) -> None:
        """Stop every driver (the next leader of their partitions goes on)."""
        tasks = [task for _, task in self._drivers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def metrics(self) -> dict[str, float]:
        """Transactional ids by state in the coordinator partitions led here, and the counters."""
        values: dict[str, float] = {f'transactions{{state="{s.value}"}}': 0 for s in TxnState}
        for partition in self._log.led_partitions():
            try:
                table, _ = self._log.table(partition)
            except RaftlogError:
                continue
            for row in list(table.transactions.values()):
                values[f'transactions{{state="{row.state.value}"}}'] += 1
        values.update(self.counters)
        return values


def _summary(row: Transaction, coordinator_partition: int) -> TransactionSummary:
    return TransactionSummary(
        row.transactional_id, row.producer_id, row.producer_epoch, row.state.value,
        NO_TIME if row.state is TxnState.EMPTY else row.started_ms, row.timeout_ms, coordinator_partition,
    )  # fmt: skip
