"""Which partition a record goes to and where a request is served (pure decisions, no I/O).

Partition choice: an explicit ``partition`` wins; a keyed record goes to Kafka's murmur2 of its key bytes;
keyless records of one request all go to one partition (sticky per request, so a request that carries no
keys becomes a single batch). With ``producer_id``/``sequence`` that partition is derived from the pair,
so a retried request lands exactly where the original did and is deduplicated; without them it rotates
round-robin across requests.

Forwarding: a request that this node cannot serve is sent to the leader's HTTP address, carrying the
``X-Raftlog-Hops`` count; a request already forwarded ``MAX_HOPS`` times is refused instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api.errors import BadRequest, HopLimitExceeded
from api.schemas import ParsedRecord
from partitions.partitioner import partition_for_key
from raftlog.consensus.errors import NoLeader
from raftlog.errors import RaftlogError, check

HOPS_HEADER = "X-Raftlog-Hops"
# Node-to-node endpoints live under this prefix; the app answers them only with the cluster credential.
INTERNAL_PREFIX = "/replication/"
MAX_HOPS = 3


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


def parse_hops(raw: str | None) -> int:
    if raw is None:
        return 0
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 3:
        raise BadRequest(f"header {HOPS_HEADER}: {raw!r} is not a small non-negative integer")
    return int(text)


@dataclass(frozen=True, slots=True)
class ForwardTo:
    node: str
    url: str  # the leader's base URL
    hops: int  # the value of X-Raftlog-Hops on the forwarded request


def forward_target(
    self_id: str, leader_hint: str | None, address: str | None, hops: int, group_id: str
) -> ForwardTo | RaftlogError:
    """Where to send a request this node cannot serve, or the error to answer with instead."""
    if leader_hint is None or leader_hint == self_id or not address:
        return NoLeader(group_id)
    if hops >= MAX_HOPS:
        return HopLimitExceeded(hops)
    return ForwardTo(leader_hint, address.rstrip("/"), hops + 1)
