"""Share groups' offset admin (KIP-932), as Kafka's group coordinator answers DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups of a share group (what
``kafka-share-groups --describe --offsets / --reset-offsets / --delete-offsets / --delete`` sends).

The group is the share coordinator's (``share.coordinator``): it must exist (``UnknownGroup``: Kafka's
GROUP_ID_NOT_FOUND) except for an alteration, which makes it (empty) as Kafka 4.4's does, and an
alteration or a deletion needs it empty (``GroupNotEmpty``: NON_EMPTY_GROUP), as Kafka refuses to move
what members are consuming. Its state in each partition is that partition's
(``share.partition``, replicated by the partition's Raft group), read and changed on the partition's
leader (``DataService.share_offset``, ``alter_share_offset``, ``delete_share_state``). A group's
partitions are the ones holding its state: a describe of every partition, or a deletion of the group,
asks each partition of each topic.

Pure of I/O itself: the partitions' leaders are reached through ``PartitionShares``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

from partitions.errors import UnknownPartition, UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.groups.errors import GroupNotEmpty
from partitions.groups.share.coordinator import ShareGroupCoordinator
from partitions.groups.share.partition import ShareOffset
from partitions.names import is_internal
from raftlog.errors import RaftlogError

WRITE_TIMEOUT_MS = 10_000


class PartitionShares(Protocol):
    """A share group's state in a partition, on the partition's leader wherever it is."""

    async def share_offset(self, group: str, topic: str, partition: int) -> ShareOffset | None: ...

    async def alter_share_offset(
        self, group: str, topic: str, partition: int, offset: int, timeout_ms: int
    ) -> None: ...

    async def delete_share_state(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool: ...


# per partition (or topic): what it answered, or the error it raised
Outcome = ShareOffset | None | RaftlogError


class ShareOffsets:
    """Event loop only. ``topics``: every topic's partition count, as this node knows them."""

    def __init__(
        self,
        share: ShareGroupCoordinator,
        partitions: PartitionShares,
        topics: Callable[[], Mapping[str, int]],
    ) -> None:
        self._share = share
        self._partitions = partitions
        self._topics = topics

    def _existing(self, group: str, empty: bool) -> None:
        """``UnknownGroup``, ``NotCoordinator``, ``NotConsumerGroup`` (another protocol's group), and with
        ``empty`` ``GroupNotEmpty`` while it has members."""
        described = self._share.describe(group)
        if empty and described.members:
            raise GroupNotEmpty(group, len(described.members), "the share group protocol")

    def _every_partition(self, topics: list[str] | None = None) -> list[TopicPartition]:
        known = self._topics()
        names = sorted(t for t in known if not is_internal(t)) if topics is None else topics
        return [TopicPartition(t, p) for t in names for p in range(known.get(t, 0))]

    async def _each(
        self, tps: list[TopicPartition], call: Callable[[TopicPartition], object]
    ) -> list[object]:
        async def one(tp: TopicPartition) -> object:
            try:
                return await call(tp)  # type: ignore[misc]
            except RaftlogError as exc:  # this partition's answer
                return exc

        return list(await asyncio.gather(*(one(tp) for tp in tps)))

    async def describe(
        self, group: str, asked: list[TopicPartition] | None
    ) -> dict[TopicPartition, ShareOffset | RaftlogError | None]:
        """The group's start offset and lag in each partition asked (None: every partition holding its
        state, those alone); None where it has no state, an error where the partition could not say."""
        self._existing(group, empty=False)
        tps = self._every_partition() if asked is None else asked
        found = await self._each(tps, lambda tp: self._partitions.share_offset(group, tp.topic, tp.partition))
        answers: dict[TopicPartition, ShareOffset | RaftlogError | None] = {}
        for tp, value in zip(tps, found, strict=True):
            if asked is None and not isinstance(value, ShareOffset):
                continue  # a partition without the group's state, or gone meanwhile: not the group's
            answers[tp] = value  # type: ignore[assignment]
        return answers

    async def alter(self, group: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, object]:
        """Each partition's start moved to its offset (None) or the error it raised; the group empty, made
        when there is none."""
        await self._share.ensure(group)
        self._existing(group, empty=True)
        tps = list(offsets)
        done = await self._each(
            tps,
            lambda tp: self._partitions.alter_share_offset(
                group, tp.topic, tp.partition, offsets[tp], WRITE_TIMEOUT_MS
            ),
        )
        return dict(zip(tps, done, strict=True))

    async def delete(self, group: str, topics: list[str]) -> dict[str, RaftlogError | None]:
        """The group's state in every partition of each topic forgotten (None) or the topic's error; the
        group empty."""
        self._existing(group, empty=True)
        known = self._topics()
        answers: dict[str, RaftlogError | None] = {}
        for topic in topics:
            if topic not in known:
                answers[topic] = UnknownTopic(topic)
                continue
            tps = self._every_partition([topic])
            errors = [e for e in await self._forget(group, tps) if isinstance(e, RaftlogError)]
            answers[topic] = errors[0] if errors else None
        return answers

    async def forget_group(self, group: str) -> None:
        """Before a share group is deleted (DeleteGroups): its state in every partition forgotten; the
        first error raised (the group stays, and deleting it again finishes the work)."""
        self._existing(group, empty=True)
        for error in await self._forget(group, self._every_partition()):
            if isinstance(error, RaftlogError) and not isinstance(error, (UnknownTopic, UnknownPartition)):
                raise error

    async def _forget(self, group: str, tps: list[TopicPartition]) -> list[object]:
        return await self._each(
            tps,
            lambda tp: self._partitions.delete_share_state(group, tp.topic, tp.partition, WRITE_TIMEOUT_MS),
        )
