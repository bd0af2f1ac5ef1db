"""``GroupLog`` over a node's Raft groups: the partitions of ``__consumer_groups`` are ordinary replicated
partitions whose state machine also applies group commands (``PartitionStateMachine.groups``)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from partitions import commands
from partitions.controller.state import TopicMetadata
from partitions.errors import InvalidCommand, TopicExists, UnknownTopic
from partitions.groups.errors import ConsumerInstanceExists, GroupFull, UnknownConsumerInstance
from partitions.groups.state import GroupChanged, GroupCommand, GroupResult, GroupTable, encode
from partitions.names import GROUPS_TOPIC
from partitions.replicas.state_machine import Refused
from raftlog.consensus.errors import ConsensusError
from raftlog.consensus.group import ReplicaGroup
from raftlog.errors import check

PROPOSE_TIMEOUT_MS = 10_000


class _Replica(Protocol):
    """The parts of ``partitions.replicas.manager.Replica`` used here."""

    @property
    def group(self) -> ReplicaGroup: ...

    @property
    def machine(self) -> Any: ...


class ReplicatedGroupLog:
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
        check(partitions >= 1, f"{GROUPS_TOPIC} needs >= 1 partition, got {partitions}")
        self._topic = topic
        self._create_topic = create_topic
        self._ready_leader = ready_leader
        self._leader = leader
        self._replication_factor = replication_factor
        self._partitions = partitions

    def partitions(self) -> int:
        return self._topic(GROUPS_TOPIC).partitions

    async def ensure_topic(self) -> None:
        try:
            self._topic(GROUPS_TOPIC)
            return
        except UnknownTopic:
            pass
        with contextlib.suppress(TopicExists):  # created meanwhile, through another node
            await self._create_topic(GROUPS_TOPIC, self._partitions, self._replication_factor(), {})

    def table(self, partition: int) -> tuple[GroupTable, int]:
        replica = self._ready_leader(GROUPS_TOPIC, partition)
        table: GroupTable = replica.machine.groups
        return table, replica.group.status().term

    def led_partitions(self) -> list[int]:
        try:
            count = self.partitions()
        except UnknownTopic:
            return []
        led = []
        for partition in range(count):
            try:
                self._ready_leader(GROUPS_TOPIC, partition)
            except ConsensusError:
                continue
            led.append(partition)
        return led

    async def propose(self, partition: int, command: GroupCommand) -> GroupResult:
        replica = self._leader(GROUPS_TOPIC, partition)
        entry = commands.encode(commands.GroupCommand(encode(command)))
        result = await replica.group.propose(entry, PROPOSE_TIMEOUT_MS)
        if isinstance(result, Refused):
            raise result.error
        check(
            isinstance(
                result,
                GroupChanged | UnknownConsumerInstance | ConsumerInstanceExists | GroupFull | InvalidCommand,
            ),
            f"group command on {GROUPS_TOPIC}/{partition} returned {result!r}",
        )
        return result  # type: ignore[return-value]

    def partition_count(self, topic: str) -> int:
        try:
            return self._topic(topic).partitions
        except UnknownTopic:
            return 0
