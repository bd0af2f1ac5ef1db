"""Which partition a record goes to (pure decisions, no I/O).

An explicit ``partition`` wins; a keyed record goes to Kafka's murmur2 of its key bytes; keyless records
of one request all go to one partition (sticky per request, so a request that carries no keys becomes a
single batch). With ``producer_id``/``sequence`` that partition is derived from the pair, so a retried
request lands exactly where the original did and is deduplicated; without them it rotates round-robin
across requests. Where a partition's request then runs is the cluster-wide service's business
(``partitions.peers.cluster``).
"""

from __future__ import annotations

from collections.abc import Sequence

from api.schemas import ParsedRecord
from raftlog.errors import check
from raftlog.storage.partitioner import partition_for_key


class RoundRobin:
    """The keyless partition of requests without a producer id: 0, 1, 2, ... modulo the partition count."""

    def __init__(self, start: int = 0) -> None:
        self._next = start

    def take(self, partitions: int) -> int:
        check(partitions >= 1, f"partitions {partitions} must be >= 1")
        chosen = self._next % partitions
        self._next = (self._next + 1) % (2**31)
        return chosen


def keyless_partition(
    partitions: int, producer_id: int | None, sequence: int | None, round_robin: RoundRobin
) -> int:
    if producer_id is not None and sequence is not None:
        return (producer_id + sequence) % partitions
    return round_robin.take(partitions)


def assign_partitions(records: Sequence[ParsedRecord], partitions: int, keyless: int) -> list[int]:
    """The partition of each record, in request order. Explicit partitions are range-checked by the
    caller (an unknown partition is a 404, not a 400)."""
    check(0 <= keyless < partitions, f"keyless partition {keyless} outside [0, {partitions})")
    out = []
    for record in records:
        if record.partition is not None:
            out.append(record.partition)
        elif record.key is not None:
            out.append(partition_for_key(record.key, partitions))
        else:
            out.append(keyless)
    return out


def group_by_partition(assignment: Sequence[int]) -> dict[int, list[int]]:
    """Record indexes per partition, each list in request order; partitions in first-seen order."""
    groups: dict[int, list[int]] = {}
    for index, partition in enumerate(assignment):
        groups.setdefault(partition, []).append(index)
    return groups
