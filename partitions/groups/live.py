"""Groups whose members live outside the replicated table: Kafka clients' classic groups, which their
coordinator holds in memory (``partitions.groups.classic.coordinator``), as Kafka does between its writes of
group metadata. The node's ``GroupCoordinator`` sees them as ``LiveGroup``s (``ClassicGroups.live``) and
lists, describes, deletes and fences one set of groups, whichever protocol their members use.
"""

from __future__ import annotations

from dataclasses import dataclass

from partitions.groups.assignors import TopicPartition


@dataclass(frozen=True, slots=True)
class LiveMember:
    member_id: str
    client_id: str
    client_host: str
    assigned: tuple[TopicPartition, ...]  # decoded from its assignment (protocol type "consumer" only)
    instance_id: str | None = None  # a static member's group.instance.id (KIP-345)


@dataclass(frozen=True, slots=True)
class LiveGroup:
    name: str
    state: str  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable
    protocol_type: str
    protocol: str
    generation: int
    members: tuple[LiveMember, ...]
