"""``GroupLog`` over a node's Raft groups: the partitions of ``__consumer_groups`` are ordinary replicated
partitions whose state machine also applies group commands (``PartitionStateMachine.groups``)."""

from __future__ import annotations

from partitions import commands
from partitions.errors import InvalidCommand, UnknownTopic
from partitions.groups.errors import (
    ConsumerInstanceExists,
    GroupFull,
    GroupNotEmpty,
    ShareGroupLimitReached,
    UnknownConsumerInstance,
)
from partitions.groups.group_commands import GroupCommand, encode
from partitions.groups.state import GroupChanged, GroupResult, GroupTable
from partitions.internal_topic import InternalTopicLog
from partitions.names import GROUPS_TOPIC
from partitions.replicas.state_machine import Refused
from raftlog.errors import check


class ReplicatedGroupLog(InternalTopicLog[GroupTable]):
    TOPIC = GROUPS_TOPIC
    TABLE = "groups"

    async def propose(self, partition: int, command: GroupCommand) -> GroupResult:
        result = await self._propose_entry(partition, commands.encode(commands.GroupCommand(encode(command))))
        if isinstance(result, Refused):
            raise result.error
        check(
            isinstance(
                result,
                GroupChanged
                | UnknownConsumerInstance
                | ConsumerInstanceExists
                | GroupFull
                | GroupNotEmpty  # a group of one protocol written over by another's (refused)
                | ShareGroupLimitReached
                | InvalidCommand,
            ),
            f"group command on {GROUPS_TOPIC}/{partition} returned {result!r}",
        )
        return result  # type: ignore[return-value]

    def partition_count(self, topic: str) -> int:
        try:
            return self._topic(topic).partitions
        except UnknownTopic:
            return 0
