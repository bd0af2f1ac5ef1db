"""Partition assignors: which member of a group reads which partition (pure functions).

Both give every partition of every subscribed topic to exactly one member subscribed to that topic, and
are deterministic (members and partitions are taken in sorted order), so every replica of the group's
coordinator computes the same assignment from the same committed membership.

- ``range``: per topic, each subscribed member gets a contiguous range; the first ``partitions %
  members`` members get one extra (Kafka's RangeAssignor). Balanced per topic.
- ``round_robin``: all partitions in (topic, partition) order dealt to members in turn, skipping members
  not subscribed to the partition's topic (Kafka's RoundRobinAssignor). With identical subscriptions the
  counts differ by at most one across the whole group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


Assignment = dict[str, tuple[TopicPartition, ...]]
Assignor = Callable[[Mapping[str, Sequence[str]], Mapping[str, int]], Assignment]


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
) -> Assignment:
    """``subscriptions``: member -> topics; ``partition_counts``: topic -> partitions (absent or 0: the
    topic does not exist yet and contributes nothing)."""
    out: dict[str, list[TopicPartition]] = {member: [] for member in sorted(subscriptions)}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    for topic in topics:
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        count = partition_counts.get(topic, 0)
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            length = share + (1 if i < extra else 0)
            out[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
            start += length
    return {member: tuple(tps) for member, tps in out.items()}


def round_robin_assign(
    subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
) -> Assignment:
    members = sorted(subscriptions)
    out: dict[str, list[TopicPartition]] = {member: [] for member in members}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    turn = 0
    for topic in topics:
        for partition in range(partition_counts.get(topic, 0)):
            for _ in range(len(members)):  # bounded: at least one member subscribes to this topic
                member = members[turn % len(members)]
                turn += 1
                if topic in subscriptions[member]:
                    out[member].append(TopicPartition(topic, partition))
                    break
    return {member: tuple(tps) for member, tps in out.items()}


ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "round_robin": round_robin_assign}
