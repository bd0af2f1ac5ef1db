"""The share group offset rules (``partitions.groups.share.offsets``) as the Kafka door reaches them: the
group's coordinator here, each partition's share state on its leader through the cluster. Used by the
share offset admin APIs and by DeleteGroups of a share group."""

from __future__ import annotations

from kafka_api.door import Door
from partitions.data.service import DataService
from partitions.groups.share.offsets import ShareOffsets
from partitions.groups.share.partition import ShareOffset


class _Leaders:
    """``share_offsets.PartitionShares`` on each partition's leader, through the cluster."""

    def __init__(self, door: Door) -> None:
        self._data = door.node.cluster.data

    async def share_offset(self, group: str, topic: str, partition: int) -> ShareOffset | None:
        return await self._data.call(DataService.share_offset, group, topic, partition)

    async def alter_share_offset(
        self, group: str, topic: str, partition: int, offset: int, timeout_ms: int
    ) -> None:
        await self._data.call(DataService.alter_share_offset, group, topic, partition, offset, timeout_ms)

    async def delete_share_state(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        return await self._data.call(DataService.delete_share_state, group, topic, partition, timeout_ms)


def known_topics(door: Door) -> dict[str, int]:
    """Every topic's partition count, as this node knows them."""
    return {name: topic.partitions for name, topic in door.node.metadata.topics_by_name().items()}


def share_offsets(door: Door) -> ShareOffsets:
    return ShareOffsets(door.coordinator.share, _Leaders(door), lambda: known_topics(door))
