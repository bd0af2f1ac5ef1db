"""What every Kafka API handler is given: the node's front door and this listener's settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kafka_api.groups import ClassicGroups
from partitions.cluster import FrontDoor

TIMEOUT_MAX_MS = 60_000  # the longest a produce or admin request may ask to wait


@dataclass(frozen=True, slots=True)
class Door:
    node: FrontDoor
    cluster_id: str  # the same on every node of a cluster
    ensure_group_topic: Callable[[], Awaitable[None]]  # creates __consumer_groups as the node's groups do
    groups: ClassicGroups = field(default_factory=ClassicGroups)  # the groups this node coordinates

    def broker_address(self, node_id: str) -> tuple[str, int] | None:
        """(host, port) of a node's Kafka listener as clients reach it; None: it has none known."""
        address = self.node.metadata.kafka_address(node_id)
        if address is None:
            return None
        host, _, port = address.rpartition(":")
        return host.strip("[]"), int(port)


def clamp_timeout(timeout_ms: float) -> int:
    return max(0, min(int(timeout_ms), TIMEOUT_MAX_MS))
