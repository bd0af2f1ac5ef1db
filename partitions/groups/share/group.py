"""A share group's member (KIP-932) as its coordinator holds it and the group table records it, and its
heartbeat (``ShareHeartbeat``) as either door hands it to the coordinator.

The table records every member of a share group, with the epoch it was last given, its subscription and
the door its requests come through, each time the group's epoch changes
(``group_commands.ShareGroupRecord``), as Kafka writes ``ShareGroupMemberMetadata`` and the member's
current assignment to ``__consumer_offsets``: a coordinator taking over goes on with the same members.
What a member is assigned is not recorded: ``assign`` shares each subscribed topic's partitions among
the members subscribing to it (Kafka's ``SimpleAssignor``), keeping what each held before while the
coordinator holds the group; a coordinator taking over assigns the recorded members afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
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


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat, or an HTTP member's request (its every request is a heartbeat).
    ``member_epoch`` None: in the epoch the member was last given (an HTTP member's); ``subscribed``
    None: unchanged since the member's last heartbeat."""

    member_id: str
    member_epoch: int | None
    subscribed: tuple[str, ...] | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    door: str = "kafka"  # the door the member's requests come through: "kafka" or "http"


def assign(
    subscriptions: Mapping[str, tuple[str, ...]],
    counts: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartition]] | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """Each member's partitions (``subscriptions``: member id -> its topics; ``counts``: each topic's
    partitions), as Kafka's share group ``SimpleAssignor`` shares them: each topic's partitions among the
    members subscribing to it, every partition to ``sharing`` = ceil(members / partitions) of them (one,
    unless members outnumber partitions: share groups lock records, not partitions, so a partition may be
    read by several), every member within one partition of the others (so each gets at least one), and
    what a member held in ``previous`` kept where that allows, so a member coming or going moves only what
    it must. Deterministic (ties go to the member with fewer partitions of the topics before, then by id):
    a coordinator taking over assigns the same from the same members and nothing ``previous``. Pure."""
    previous = previous or {}
    given: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        partitions = [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]
        if partitions:
            _share_topic(members, partitions, previous, given)
    return {member: frozenset(tps) for member, tps in given.items()}


def _share_topic(
    members: list[str],
    partitions: list[TopicPartition],
    previous: Mapping[str, frozenset[TopicPartition]],
    given: dict[str, set[TopicPartition]],
) -> None:
    """One topic's partitions shared among ``members`` (sorted), added to ``given``."""
    sharing = -(-len(members) // len(partitions))
    base, extra = divmod(sharing * len(partitions), len(members))
    topic_partitions = set(partitions)
    held = {m: sorted(tp for tp in previous.get(m, ()) if tp in topic_partitions) for m in members}
    load = {m: len(given[m]) for m in members}  # partitions of the topics shared before this one
    # a quota each: the extra partitions go to those that held the most here, then the least loaded
    order = sorted(members, key=lambda m: (-len(held[m]), load[m], m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    holders: dict[TopicPartition, set[str]] = {tp: set() for tp in partitions}
    mine: dict[str, int] = dict.fromkeys(members, 0)
    for m in order:  # what each held, kept within its quota and each partition's sharing
        for tp in held[m]:
            if mine[m] < quota[m] and len(holders[tp]) < sharing:
                holders[tp].add(m)
                mine[m] += 1
    for tp in partitions:  # the rest, each to whoever has the most quota left
        while len(holders[tp]) < sharing:
            free = [m for m in members if m not in holders[tp]]
            m = min(free, key=lambda m: (mine[m] - quota[m], load[m] + mine[m], m))
            holders[tp].add(m)
            mine[m] += 1
    # where the fill had to give a partition to a member past its quota (the members with quota left held
    # it already), that member hands one of its partitions to one under its quota, which holds more
    # partitions than it does and so one it does not hold: until every member is at its quota
    while True:
        over = next((m for m in members if mine[m] > quota[m]), None)
        under = next((m for m in members if mine[m] < quota[m]), None)
        if over is None or under is None:
            break
        tp = next(tp for tp in partitions if over in holders[tp] and under not in holders[tp])
        holders[tp].remove(over)
        holders[tp].add(under)
        mine[over] -= 1
        mine[under] += 1
    for tp, ms in holders.items():
        for m in ms:
            given[m].add(tp)
