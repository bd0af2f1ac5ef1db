"""A share group's member (KIP-932) as its coordinator holds it and the group table records it.

The table records every member of a share group, with the epoch it was last given, its subscription and
the door its requests come through, each time the group's epoch changes
(``group_commands.ShareGroupRecord``), as Kafka writes ``ShareGroupMemberMetadata`` and the member's
current assignment to ``__consumer_offsets``: a coordinator taking over goes on with the same members.
What a member is assigned is not recorded: every partition of each topic it subscribes to, as the
group's recorded partition counts give them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from partitions.groups.assignors import TopicPartition

SHARE_MEMBERS_MAX = 200  # Kafka's group.share.max.size: a member more is GROUP_MAX_SIZE_REACHED
SHARE_MEMBER_VERSION = 0  # of a member's row in a record and in a snapshot; a reader takes extra fields


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]
    assigned: frozenset[TopicPartition] = frozenset()
    door: str = "kafka"  # the door its requests come through: "kafka" or "http"

    def to_row(self) -> list[Any]:
        return [
            SHARE_MEMBER_VERSION, self.member_id, self.epoch, self.rack_id, self.client_id,
            self.client_host, list(self.subscribed), self.door,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> ShareMember:
        """Version 0's fields; a later version's extra ones are not ours. Its assignment is derived."""
        _version, member_id, epoch, rack_id, client_id, client_host, subscribed, door = row[:8]
        rack = None if rack_id is None else str(rack_id)
        topics = tuple(str(t) for t in subscribed)
        return cls(str(member_id), int(epoch), rack, str(client_id), str(client_host), topics, door=str(door))


def assignment(subscribed: tuple[str, ...], counts: dict[str, int]) -> frozenset[TopicPartition]:
    """Every partition of each subscribed topic (Kafka's ``SimpleAssignor`` when members outnumber
    partitions): share groups lock records, not partitions."""
    return frozenset(TopicPartition(t, p) for t in subscribed for p in range(counts.get(t, 0)))
