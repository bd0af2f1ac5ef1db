"""An internal topic whose partitions hold a replicated table (``__consumer_groups``'s groups,
``__transactions``' transactional ids): created on first use, each partition's table served by its Raft
leader. ``TableLog`` is what a coordinator needs of such a topic; the stores over it
(``partitions.consumers.store``, ``partitions.transactions.store``) name which table the state machine
holds and add how a command is proposed."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from partitions.errors import TopicExists, UnknownTopic
from raftlog.consensus.errors import ConsensusError
from raftlog.consensus.group import ReplicaGroup
from raftlog.errors import check

PROPOSE_TIMEOUT_MS = 10_000

Table = TypeVar("Table", covariant=True)
Command = TypeVar("Command", contravariant=True)
Result = TypeVar("Result", covariant=True)


class TableLog(Protocol[Table, Command, Result]):
    """The replicated home of a coordinator's tables, one per partition of an internal topic
    (``groups.coordinator.GroupLog``, ``transactions.coordinator.TransactionLog``): the node's Raft groups,
    or an in-memory table in tests."""

    def partitions(self) -> int:
        """Partition count of the internal topic. Raises UnknownTopic before its first use."""
        ...

    async def ensure_topic(self) -> None:
        """Create the internal topic if it does not exist (NotLeader: ask the controller)."""
        ...

    def table(self, partition: int) -> tuple[Table, int]:
        """The applied table of a partition this node leads and may read, with the leader's term.
        Raises NotLeader(hint) / NoLeader: the request goes to the leader."""
        ...

    def led_partitions(self) -> list[int]:
        """The coordinator partitions this node leads and may read right now."""
        ...

    async def readable(self, partition: int) -> None:
        """Once this node may read the table of a partition it leads, waiting a moment for that (its
        term's first entry applied, its leadership confirmed after its Raft thread stood still), as a
        leader's reads of a data partition wait. NotLeader / NoLeader when it does not lead it, or still
        may not read it after the wait."""
        ...

    async def propose(self, partition: int, command: Command) -> Result:
        """Replicate ``command`` through the partition's Raft group; the applied result."""
        ...


class TopicShape(Protocol):
    """The part of a topic's metadata used here (``partitions.controller.state.TopicMetadata``)."""

    @property
    def partitions(self) -> int: ...


class TopicReplica(Protocol):
    """The parts of ``partitions.replicas.manager.Replica`` used here."""

    @property
    def group(self) -> ReplicaGroup: ...

    @property
    def machine(self) -> Any: ...


class InternalTopicLog(Generic[Table]):
    """``ready_leader(topic, partition)``: the local leader replica if it may serve reads now (raises
    NotLeader/NoLeader/UnknownTopic); ``reading_leader`` the same, once it may, waiting a moment for that
    (``DataPlane.reading_leader``); ``leader`` the leader replica whether or not it may read."""

    TOPIC: ClassVar[str]
    TABLE: ClassVar[str]  # the attribute of the partition's state machine holding its table

    def __init__(
        self,
        *,
        topic: Callable[[str], TopicShape],
        create_topic: Callable[[str, int, int, dict[str, Any]], Awaitable[TopicShape]],
        ready_leader: Callable[[str, int], TopicReplica],
        reading_leader: Callable[[str, int], Awaitable[TopicReplica]],
        leader: Callable[[str, int], TopicReplica],
        replication_factor: Callable[[], int],
        partitions: int,
    ) -> None:
        check(partitions >= 1, f"{self.TOPIC} needs >= 1 partition, got {partitions}")
        self._topic = topic
        self._create_topic = create_topic
        self._ready_leader = ready_leader
        self._reading_leader = reading_leader
        self._leader = leader
        self._replication_factor = replication_factor
        self._partitions = partitions

    def partitions(self) -> int:
        return self._topic(self.TOPIC).partitions

    async def ensure_topic(self) -> None:
        try:
            self._topic(self.TOPIC)
            return
        except UnknownTopic:
            pass
        with contextlib.suppress(TopicExists):  # created meanwhile, through another node
            await self._create_topic(self.TOPIC, self._partitions, self._replication_factor(), {})

    def led_partitions(self) -> list[int]:
        try:
            count = self.partitions()
        except UnknownTopic:
            return []
        led = []
        for partition in range(count):
            try:
                self._ready_leader(self.TOPIC, partition)
            except ConsensusError:
                continue
            led.append(partition)
        return led

    def leader_term(self, partition: int) -> int:
        """The term this node leads the partition in, whether or not it may serve reads this moment
        (NotLeader, NoLeader or UnknownTopic when it does not lead it): a leader whose read lease lapsed
        or whose Raft thread stood still is still the one that wrote everything of its term."""
        return self._leader(self.TOPIC, partition).group.leader_and_term()[1]

    async def readable(self, partition: int) -> None:
        await self._reading_leader(self.TOPIC, partition)

    def table(self, partition: int) -> tuple[Table, int]:
        """The partition's table on its leader here, once it may serve reads, and the term."""
        replica = self._ready_leader(self.TOPIC, partition)
        table: Table = getattr(replica.machine, self.TABLE)
        return table, replica.group.leader_and_term()[1]

    async def _propose_entry(self, partition: int, entry: bytes) -> object:
        return await self._leader(self.TOPIC, partition).group.propose(entry, PROPOSE_TIMEOUT_MS)
