"""``TransactionLog`` over a node's Raft groups: the partitions of ``__transactions`` are ordinary replicated
partitions whose state machine also applies transaction commands (``PartitionStateMachine.transactions``).
The internal topic is created on first use, as ``__consumer_groups`` is."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from partitions import commands
from partitions.controller.state import TopicMetadata
from partitions.errors import InvalidCommand, InvalidTxnState, ProducerFenced, TopicExists, UnknownTopic
from partitions.names import TRANSACTIONS_TOPIC
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    TransactionLimitReached,
)
from partitions.transactions.state import (
    TransactionTable,
    TxnChanged,
    TxnCommand,
    TxnResult,
    TxnsExpired,
    encode,
)
from raftlog.consensus.errors import ConsensusError
from raftlog.consensus.group import ReplicaGroup
from raftlog.errors import check

PROPOSE_TIMEOUT_MS = 10_000
_RESULTS = (
    TxnChanged,
    TxnsExpired,
    ProducerFenced,
    InvalidProducerIdMapping,
    ConcurrentTransactions,
    InvalidTxnState,
    TransactionLimitReached,
    InvalidCommand,
)


class _Replica(Protocol):
    """The parts of ``partitions.replicas.manager.Replica`` used here."""

    @property
    def group(self) -> ReplicaGroup: ...

    @property
    def machine(self) -> Any: ...


class ReplicatedTransactionLog:
    """``ready_leader(topic, partition)``: the local leader replica once it may serve reads (raises
    NotLeader/NoLeader/UnknownTopic); ``leader`` the same without the read-readiness wait."""

    def __init__(
        self,
        *,
        topic: Callable[[str], TopicMetadata],
        create_topic: Callable[[str, int, int, dict[str, Any]], Awaitable[TopicMetadata]],
        ready_leader: Callable[[str, int], _Replica],
        leader: Callable[[str, int], _Replica],
        replication_factor: Callable[[], int],
        partitions: int,
    ) -> None:
        check(partitions >= 1, f"{TRANSACTIONS_TOPIC} needs >= 1 partition, got {partitions}")
        self._topic = topic
        self._create_topic = create_topic
        self._ready_leader = ready_leader
        self._leader = leader
        self._replication_factor = replication_factor
        self._partitions = partitions

    def partitions(self) -> int:
        return self._topic(TRANSACTIONS_TOPIC).partitions

    async def ensure_topic(self) -> None:
        try:
            self._topic(TRANSACTIONS_TOPIC)
            return
        except UnknownTopic:
            pass
        with contextlib.suppress(TopicExists):  # created meanwhile, through another node
            await self._create_topic(TRANSACTIONS_TOPIC, self._partitions, self._replication_factor(), {})

    def table(self, partition: int) -> tuple[TransactionTable, int]:
        replica = self._ready_leader(TRANSACTIONS_TOPIC, partition)
        table: TransactionTable = replica.machine.transactions
        return table, replica.group.status().term

    def led_partitions(self) -> list[int]:
        try:
            count = self.partitions()
        except UnknownTopic:
            return []
        led = []
        for partition in range(count):
            try:
                self._ready_leader(TRANSACTIONS_TOPIC, partition)
            except ConsensusError:
                continue
            led.append(partition)
        return led

    async def propose(self, partition: int, command: TxnCommand) -> TxnResult:
        replica = self._leader(TRANSACTIONS_TOPIC, partition)
        entry = commands.encode(commands.TxnCommand(encode(command)))
        result = await replica.group.propose(entry, PROPOSE_TIMEOUT_MS)
        # a Refused entry would be one this node encoded wrongly: a bug, not an answer
        check(
            isinstance(result, _RESULTS),
            f"transaction command on {TRANSACTIONS_TOPIC}/{partition}: {result!r}",
        )
        return result  # type: ignore[return-value]  # checked above
