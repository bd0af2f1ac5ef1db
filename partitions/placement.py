"""Where a new topic's replicas go (pure). Spreads replicas and leaders evenly over the live nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from partitions.errors import PartitionError


class PlacementImpossible(PartitionError):
    """Not enough live nodes for the requested replication factor."""

    def __init__(self, replication_factor: int, nodes: int) -> None:
        super().__init__(
            f"replication factor {replication_factor} needs {replication_factor} live nodes, have {nodes}"
        )
        self.replication_factor = replication_factor
        self.nodes = nodes


def place(
    nodes: Sequence[str],
    partitions: int,
    replication_factor: int,
    existing: Mapping[str, Sequence[Sequence[str]]] | None = None,
) -> list[list[str]]:
    """Replica lists, first replica = preferred leader, one list per partition.

    Greedy over the load already placed (``existing``: topic -> replica lists): each partition takes the
    ``replication_factor`` nodes holding the fewest replicas (so replica counts stay within one of each
    other), preferring among equals the nodes leading the fewest partitions; its preferred leader is the
    chosen node leading the fewest. Ties break by node order rotated per partition. Deterministic.
    """
    live = sorted(set(nodes))
    if partitions < 1:
        raise PartitionError(f"partitions {partitions} must be >= 1")
    if not 1 <= replication_factor <= len(live):
        raise PlacementImpossible(replication_factor, len(live))
    replicas: Counter[str] = Counter({n: 0 for n in live})
    leaders: Counter[str] = Counter({n: 0 for n in live})
    for assignment in (existing or {}).values():
        for replica_set in assignment:
            for node in replica_set:
                if node in replicas:
                    replicas[node] += 1
            if replica_set and replica_set[0] in leaders:
                leaders[replica_set[0]] += 1
    result = []
    for partition in range(partitions):
        rotation = {node: (i - partition) % len(live) for i, node in enumerate(live)}
        chosen = sorted(live, key=lambda n: (replicas[n], leaders[n], rotation[n]))[:replication_factor]
        leader = min(chosen, key=lambda n: (leaders[n], replicas[n], rotation[n]))
        ordered = [leader] + [n for n in chosen if n != leader]
        for node in ordered:
            replicas[node] += 1
        leaders[leader] += 1
        result.append(ordered)
    return result
