"""Where a new topic's replicas go (pure). Spreads replicas and leaders evenly over the live nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from partitions.controller.commands import check_replica_set
from partitions.errors import (
    CapacityExceeded,
    InvalidReassignment,
    PartitionError,
    PlacementImpossible,
    TooFewLiveNodes,
)

"""Partition replicas one node holds at most by default (``raftlog serve --replicas-max``). What a replica
costs, measured with ``raftlog bench scale`` (docs/performance.md, "Partitions per cluster"): about 28 KiB
of memory, no open file and no CPU while its group is idle, and the time to open it (~110-140 per second
per node: 10,000 reopen in about 33 s after a restart); 10,000 per node on a 3-node cluster hold with a
tenth of one core in total. Beyond the limit a topic or a move is refused up front, changing nothing."""

INTERNAL_REPLICATION_FACTOR = 3
"""What Kafka's ``offsets.topic.replication.factor`` and ``transaction.state.log.replication.factor``
default to: the replication factor of an internal topic wherever the cluster has that many nodes."""


def internal_replication_factor(placeable: Sequence[str], standby: Sequence[str]) -> int:
    """The replication factor an internal topic (``__consumer_groups``, which holds the consumer, classic
    and share groups, and ``__transactions``) is created with now, given the nodes a replica may go to
    (``placeable``: alive) and those down after a crash (``standby``: not a node that left), as
    ``Routing.placeable`` and ``Routing.standby`` list them.

    Kafka creates ``__consumer_offsets`` and ``__transaction_state`` with ``offsets.topic.replication.factor``
    and ``transaction.state.log.replication.factor`` (3) or not at all: while fewer brokers are registered,
    FindCoordinator answers COORDINATOR_NOT_AVAILABLE and clients retry; a broker killed moments ago is
    still registered (fenced) and takes a replica.

    Ours: ``min(3, placeable + standby)``, so a small cluster (1 or 2 nodes) still has its groups, and a
    node down after a crash counts as Kafka's registered broker does: ``place`` gives it a replica only
    when the placeable nodes are too few, never as leader, and it catches up when it is back. That holds
    as long as a majority of the replicas are on placeable nodes, so every partition elects a leader at
    once; otherwise ``TooFewLiveNodes``, retriable (the Kafka door's COORDINATOR_NOT_AVAILABLE), rather
    than a smaller factor: an internal topic keeps the factor it is created with (only a reassignment
    changes it), and a factor of 1 on the one node this node sees alive (a node cut off from the others
    sees them all down) would hold every group's state on one disk for the topic's life."""
    live = len(set(placeable))
    down = len(set(standby) - set(placeable))
    factor = min(INTERNAL_REPLICATION_FACTOR, live + down)
    if live < factor // 2 + 1:
        raise TooFewLiveNodes(factor, live, down)
    return factor


@dataclass(frozen=True, slots=True)
class Load:
    """The replicas and the preferred leaderships (first replicas) each node holds across some topics:
    what ``place`` and ``check_assignment`` count of the load already placed."""

    replicas: Mapping[str, int]
    leaders: Mapping[str, int]

    @classmethod
    def of(cls, assignments: Iterable[Sequence[Sequence[str]]]) -> Load:
        """The load of ``assignments`` (replica lists of topics)."""
        replicas: Counter[str] = Counter()
        leaders: Counter[str] = Counter()
        for assignment in assignments:
            _count(assignment, replicas, leaders, 1)
        return cls(MappingProxyType(dict(replicas)), MappingProxyType(dict(leaders)))


class _Placed(Protocol):
    @property
    def replicas(self) -> Sequence[Sequence[str]]: ...


@dataclass(slots=True, eq=False)
class TopicsLoad:
    """The ``Load`` of a mapping of topics (name -> topic, as the controller's metadata holds them), kept
    for the mapping it was counted from: another mapping is counted from its difference with that one (the
    controller publishes a new mapping for every topic change and keeps the unchanged topics' objects), so
    creating the 2,000th topic does not count the replicas of the 1,999 before it again."""

    _topics: Mapping[str, _Placed] | None = None
    _replicas: Counter[str] = field(default_factory=Counter)
    _leaders: Counter[str] = field(default_factory=Counter)
    _load: Load = field(default_factory=lambda: Load.of(()))

    def of(self, topics: Mapping[str, _Placed]) -> Load:
        if topics is self._topics:
            return self._load
        before = self._topics if self._topics is not None else {}
        for name, topic in before.items():
            if topics.get(name) is not topic:  # gone, or changed: its new form is counted below
                _count(topic.replicas, self._replicas, self._leaders, -1)
        for name, topic in topics.items():
            if before.get(name) is not topic:
                _count(topic.replicas, self._replicas, self._leaders, 1)
        self._topics = topics
        self._load = Load(
            MappingProxyType({n: c for n, c in self._replicas.items() if c}),
            MappingProxyType({n: c for n, c in self._leaders.items() if c}),
        )
        return self._load


def _count(
    assignment: Sequence[Sequence[str]], replicas: Counter[str], leaders: Counter[str], sign: int
) -> None:
    for replica_set in assignment:
        for node in replica_set:
            replicas[node] += sign
        if replica_set:
            leaders[replica_set[0]] += sign


def _load_of(existing: Mapping[str, Sequence[Sequence[str]]] | Load | None) -> Load:
    return existing if isinstance(existing, Load) else Load.of((existing or {}).values())


def replica_counts(nodes: Sequence[str], assignments: Iterable[Sequence[Sequence[str]]]) -> Counter[str]:
    """Replicas each of ``nodes`` holds in ``assignments`` (replica lists of topics)."""
    held: Counter[str] = Counter({n: 0 for n in nodes})
    for assignment in assignments:
        for replica_set in assignment:
            for node in replica_set:
                held[node] += 1
    return held


def check_capacity(what: str, held: Mapping[str, int], added: Mapping[str, int], replicas_max: int) -> None:
    """Raise ``CapacityExceeded`` if adding ``added`` replicas to the ``held`` ones passes
    ``replicas_max`` on any node."""
    over = {n: held.get(n, 0) + count for n, count in added.items() if held.get(n, 0) + count > replicas_max}
    if over:
        room = {n: max(0, replicas_max - held.get(n, 0)) for n in sorted(set(held) | set(added))}
        raise CapacityExceeded(what, over, room, replicas_max)


def check_assignment(
    assignment: Sequence[Sequence[str]],
    nodes: Sequence[str],
    existing: Mapping[str, Sequence[Sequence[str]]] | Load | None = None,
    replicas_max: int | None = None,
    standby: Sequence[str] = (),
) -> list[list[str]]:
    """A new topic's replicas placed by hand (Kafka's CreateTopics ``assignments``, ``kafka-topics
    --replica-assignment``), checked as ``place`` would have chosen them: ``InvalidReassignment`` for no
    partition, an empty replica set, one repeating a node, partitions of different replication factors, or
    a node that is neither live (``nodes``) nor a standby (``standby``: down, not gone, as Kafka takes a
    fenced broker that is still registered); with ``replicas_max``, ``CapacityExceeded`` as ``place``. The
    first node of each set is its preferred leader."""
    if not assignment:
        raise InvalidReassignment("a topic placed by hand needs at least one partition")
    known = set(nodes) | set(standby)
    factor = len(assignment[0])
    for partition, replica_set in enumerate(assignment):
        try:  # the rule of every replica set (a move's too), named with its partition
            check_replica_set(list(replica_set))
        except InvalidReassignment as refused:
            raise InvalidReassignment(f"partition {partition}: {refused}") from None
        if len(replica_set) != factor:
            raise InvalidReassignment(
                f"partition {partition} has {len(replica_set)} replicas and partition 0 {factor}: every "
                "partition needs the same replication factor"
            )
        unknown = [n for n in replica_set if n not in known]
        if unknown:
            raise InvalidReassignment(
                f"partition {partition}: node {unknown[0]} is not a node that may take replicas"
            )
    result = [list(replica_set) for replica_set in assignment]
    if replicas_max is not None:
        everyone = sorted(known)
        load = _load_of(existing)
        held = Counter({n: load.replicas.get(n, 0) for n in everyone})
        what = f"{len(result):,} partition(s) placed by hand"
        check_capacity(what, held, replica_counts(everyone, [result]), replicas_max)
    return result


def place(
    nodes: Sequence[str],
    partitions: int,
    replication_factor: int,
    existing: Mapping[str, Sequence[Sequence[str]]] | Load | None = None,
    replicas_max: int | None = None,
    standby: Sequence[str] = (),
) -> list[list[str]]:
    """Replica lists, first replica = preferred leader, one list per partition.

    Greedy over the load already placed (``existing``: topic -> replica lists, or their ``Load``): each
    partition takes the ``replication_factor`` nodes holding the fewest replicas (so replica counts stay
    within one of each other), preferring among equals the nodes leading the fewest partitions; its
    preferred leader is the chosen node leading the fewest. Ties break by node order rotated per
    partition. Deterministic.

    ``standby``: nodes that exist but are not live now (gossip suspects them or declared them dead: a
    crash, not a goodbye). As Kafka places on a fenced broker that is still registered, they take a
    replica only when the live ``nodes`` are fewer than the factor, and never lead: the partition's Raft
    group has its majority on the live nodes and the standby replica catches up when its node returns.
    With ``replicas_max``, ``CapacityExceeded`` when a node would then hold more replicas than that (the
    least loaded nodes are chosen first, so it fits whenever room is spread enough to fit).
    """
    live = sorted(set(nodes))
    spare = sorted(set(standby) - set(live))
    if partitions < 1:
        raise PartitionError(f"partitions {partitions} must be >= 1")
    if not live or not 1 <= replication_factor <= len(live) + len(spare):
        raise PlacementImpossible(replication_factor, len(live) + len(spare))
    spare = spare if replication_factor > len(live) else []
    everyone = live + spare
    load = _load_of(existing)
    replicas: Counter[str] = Counter({n: load.replicas.get(n, 0) for n in everyone})
    leaders: Counter[str] = Counter({n: load.leaders.get(n, 0) for n in everyone})
    held = Counter(replicas)
    result = []
    for partition in range(partitions):
        rotation = {node: (i - partition) % len(everyone) for i, node in enumerate(everyone)}
        chosen = sorted(live, key=lambda n: (replicas[n], leaders[n], rotation[n]))[:replication_factor]
        chosen += sorted(spare, key=lambda n: (replicas[n], rotation[n]))[: replication_factor - len(chosen)]
        leader = min([n for n in chosen if n in live], key=lambda n: (leaders[n], replicas[n], rotation[n]))
        ordered = [leader] + [n for n in chosen if n != leader]
        for node in ordered:
            replicas[node] += 1
        leaders[leader] += 1
        result.append(ordered)
    if replicas_max is not None:
        what = f"{partitions:,} partition(s) x replication factor {replication_factor}"
        check_capacity(what, held, replica_counts(everyone, [result]), replicas_max)
    return result
