"""A streams group's topology (KIP-1071) and its topics, pure: the topology a member sends when it joins
(``StreamsTopology``, stored as a row of the group table), Kafka's check of it (``validate``,
``GroupCoordinatorService.throwIfInvalidTopology``), and Kafka's ``InternalTopicManager.configureTopics``
(``configure``): given the topics' partition counts now, how many tasks each subtopology has, or why the
topology is not ready (a heartbeat status, with Kafka's words) and which internal topics to create.

``configure`` follows Kafka's steps in order: every source topic must exist (MISSING_SOURCE_TOPICS); the
repartition topics' partition counts are inferred (``RepartitionTopics``: a repartition topic has the
partitions of the subtopology writing it, the most of that subtopology's inputs); each copartition
group's topics are made to agree (``CopartitionedTopicsEnforcer``); a changelog topic has one partition
per task of its subtopology (``ChangelogTopics``); an internal topic that exists with another count is
INCORRECTLY_PARTITIONED_TOPICS, missing ones MISSING_INTERNAL_TOPICS. Where Kafka answers
STREAMS_INVALID_TOPOLOGY (no sink feeds a repartition topic, a loop, a subtopology without input) it
raises ``InvalidTopology``. Where Kafka iterates a hash map, subtopologies go by id and topics by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from partitions.groups.errors import InvalidTopology
from raftlog.errors import InvariantViolation, check

Task = tuple[str, int]  # (subtopology id, partition)

# Kafka's StreamsGroupHeartbeatResponse.Status codes
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS = 0, 1, 2, 3
SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED, MISSING_CLIENT_TAGS = 4, 5, 6

TOPOLOGY_ROW_VERSION = 0  # of ``StreamsTopology.to_row``; a reader takes extra trailing fields


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: not fixed (always 0 for changelogs)
    replication_factor: int = 0  # 0: the cluster's default
    configs: tuple[tuple[str, str], ...] = ()

    def to_row(self) -> list[Any]:
        return [self.name, self.partitions, self.replication_factor, [[k, v] for k, v in self.configs]]

    @classmethod
    def from_row(cls, row: list[Any]) -> TopicInfo:
        name, partitions, replication_factor, configs = row[:4]
        return cls(
            str(name), int(partitions), int(replication_factor), tuple((str(k), str(v)) for k, v in configs)
        )


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = ()  # indexes into Subtopology.source_topics
    repartition_source_topics: tuple[int, ...] = ()  # indexes into Subtopology.repartition_source_topics


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    def inputs(self) -> list[str]:
        """The topics its tasks read: its source topics, then its repartition source topics."""
        return [*self.source_topics, *(t.name for t in self.repartition_source_topics)]

    def copartitioned(self) -> list[set[str]]:
        """Its copartition groups as sets of names (Kafka's copartitionGroupsFromPersistedSubtopology)."""
        return [
            {self.source_topics[i] for i in group.source_topics}
            | {self.repartition_source_topics[i].name for i in group.repartition_source_topics}
            for group in self.copartition_groups
        ]

    def to_row(self) -> list[Any]:
        return [
            self.subtopology_id, list(self.source_topics), list(self.repartition_sink_topics),
            [t.to_row() for t in self.state_changelog_topics],
            [t.to_row() for t in self.repartition_source_topics],
            [[list(g.source_topics), list(g.repartition_source_topics)] for g in self.copartition_groups],
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> Subtopology:
        subtopology_id, sources, sinks, changelogs, repartition_sources, groups = row[:6]
        return cls(
            str(subtopology_id), tuple(str(t) for t in sources), tuple(str(t) for t in sinks),
            tuple(TopicInfo.from_row(t) for t in changelogs),
            tuple(TopicInfo.from_row(t) for t in repartition_sources),
            tuple(CopartitionGroup(tuple(int(i) for i in g[0]), tuple(int(i) for i in g[1])) for g in groups),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class StreamsTopology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def subtopology(self, subtopology_id: str) -> Subtopology | None:
        return next((s for s in self.subtopologies if s.subtopology_id == subtopology_id), None)

    def required_topics(self) -> set[str]:
        """Kafka's requiredTopics: every source, repartition source and changelog topic."""
        return {
            t for s in self.subtopologies for t in [*s.inputs(), *(c.name for c in s.state_changelog_topics)]
        }

    def to_row(self) -> list[Any]:
        return [TOPOLOGY_ROW_VERSION, self.epoch, [s.to_row() for s in self.subtopologies]]

    @classmethod
    def from_row(cls, row: list[Any]) -> StreamsTopology:
        _version, epoch, subtopologies = row[:3]
        return cls(int(epoch), tuple(Subtopology.from_row(s) for s in subtopologies))


def validate(topology: StreamsTopology) -> None:
    """Kafka's ``GroupCoordinatorService.throwIfInvalidTopology``: a changelog topic's partition count is
    the coordinator's to decide. Beyond Kafka (which fails these with an internal error): a subtopology id
    given twice, a copartition group's index outside its subtopology's topics."""
    for subtopology in topology.subtopologies:
        for topic in subtopology.state_changelog_topics:
            if topic.partitions != 0:
                raise InvalidTopology(
                    f"Changelog topic {topic.name} must have an undefined partition count, "
                    f"but it is set to {topic.partitions}."
                )
    seen: set[str] = set()
    for subtopology in topology.subtopologies:
        if subtopology.subtopology_id in seen:
            raise InvalidTopology(f"Subtopology {subtopology.subtopology_id} is defined more than once.")
        seen.add(subtopology.subtopology_id)
        for group in subtopology.copartition_groups:
            for kind, indexes, topics in (
                ("source", group.source_topics, len(subtopology.source_topics)),
                (
                    "repartition source",
                    group.repartition_source_topics,
                    len(subtopology.repartition_source_topics),
                ),
            ):
                for index in indexes:
                    if not 0 <= index < topics:
                        raise InvalidTopology(
                            f"Copartition group of subtopology {subtopology.subtopology_id} refers to {kind} "
                            f"topic {index}, but the subtopology has {topics} {kind} topics."
                        )


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    tasks: Mapping[str, int]  # subtopology id -> number of tasks; EMPTY when not ready
    status: tuple[int, str] | None  # (status code, Kafka's detail text) when not ready, else None
    to_create: tuple[TopicInfo, ...]  # internal topics missing, partitions resolved, with their configs
    stateful: frozenset[str]  # subtopologies that have changelog topics
    # the partition counts of the topics tasks read (source and repartition source topics), when ready
    partition_counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        check(
            self.status is None or not self.tasks,
            f"a configured topology with tasks {dict(self.tasks)} is not ready: {self.status}",
        )

    @property
    def ready(self) -> bool:
        return self.status is None

    def source_partitions(self, topology: StreamsTopology, task: Task) -> list[tuple[str, int]]:
        """The topic partitions a task reads (Kafka's EndpointToPartitionsManager): its partition of each
        input topic of its subtopology that has it. Empty while not ready or for an unknown subtopology."""
        subtopology_id, partition = task
        subtopology = topology.subtopology(subtopology_id)
        if subtopology is None or not self.ready:
            return []
        topics = sorted(set(subtopology.inputs()))
        return [(t, partition) for t in topics if partition < self.partition_counts.get(t, 0)]


class _NotReady(Exception):
    """Kafka's TopicConfigurationException: the topology is valid, the topics are not (yet)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def _summarize(topics: Iterable[str]) -> str:
    """Kafka's InternalTopicManager.summarizeTopics (over the names in order)."""
    names = sorted(topics)
    if not names:
        return "<none>"
    more = f" and {len(names) - 3} additional topics" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def _java_map(counts: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{t}={n}" for t, n in sorted(counts.items())) + "}"


def configure(topology: StreamsTopology, partition_count: Callable[[str], int | None]) -> ConfiguredTopology:
    """Kafka's ``InternalTopicManager.configureTopics``: ``partition_count(topic)`` is the topic's
    partitions now, None when it does not exist. Raises ``InvalidTopology`` where Kafka does; a topology
    not ``validate``d first may fail an invariant check."""
    subtopologies = sorted(topology.subtopologies, key=lambda s: s.subtopology_id)
    stateful = frozenset(s.subtopology_id for s in subtopologies if s.state_changelog_topics)
    decided: dict[str, int] = {}  # Kafka's decidedPartitionCountsForInternalTopics

    def count(topic: str) -> int:
        """Kafka's getPartitionCount: the topic's partitions if it exists, else the decided ones."""
        known = partition_count(topic)
        if known is None:
            known = decided.get(topic)
        if known is None:
            raise InvariantViolation(f"Number of partitions is not set for topic: {topic}")
        return known

    try:
        missing = {t for s in subtopologies for t in s.source_topics if partition_count(t) is None}
        if missing:
            raise _NotReady(MISSING_SOURCE_TOPICS, f"Source topics {_summarize(missing)} are missing.")
        decided.update(_repartition_counts(subtopologies, partition_count))
        fixed = {t.name for s in subtopologies for t in s.repartition_source_topics if t.partitions}
        flexible = {t.name for s in subtopologies for t in s.repartition_source_topics if not t.partitions}
        for subtopology in subtopologies:
            for group in subtopology.copartitioned():
                decided.update(_copartition(group, fixed, flexible, count))
        changelogs: dict[str, int] = {}
        for subtopology in subtopologies:  # Kafka's ChangelogTopics
            if not subtopology.inputs():
                raise InvalidTopology(f"No source topics found for subtopology {subtopology.subtopology_id}")
            tasks = max(count(t) for t in subtopology.inputs())
            changelogs.update((t.name, tasks) for t in subtopology.state_changelog_topics)
        decided.update(changelogs)
        expected: dict[str, TopicInfo] = {}
        for subtopology in subtopologies:
            for info in [*subtopology.repartition_source_topics, *subtopology.state_changelog_topics]:
                partitions = info.partitions or decided.get(info.name, 0)
                check(partitions > 0, f"Number of partitions must be set for topic {info.name}")
                configs = tuple(sorted(dict(info.configs).items()))
                expected[info.name] = TopicInfo(info.name, partitions, info.replication_factor, configs)
        for topic in sorted(topology.required_topics()):
            actual = partition_count(topic)
            wanted = expected.pop(topic, None) if actual is not None else None
            if wanted is not None and actual != wanted.partitions:
                raise _NotReady(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {topic} has different number of partitions: "
                    f"expected {wanted.partitions}, found {actual}",
                )
        if expected:
            detail = f"Internal topics are missing: {_summarize(expected)}"
            to_create = tuple(expected[name] for name in sorted(expected))
            return ConfiguredTopology(
                MappingProxyType({}), (MISSING_INTERNAL_TOPICS, detail), to_create, stateful
            )
    except _NotReady as not_ready:
        return ConfiguredTopology(MappingProxyType({}), (not_ready.status, not_ready.detail), (), stateful)
    inputs = {t for s in subtopologies for t in s.inputs()}
    return ConfiguredTopology(
        MappingProxyType({s.subtopology_id: max(count(t) for t in s.inputs()) for s in subtopologies}),
        None,
        (),
        stateful,
        MappingProxyType({t: count(t) for t in sorted(inputs)}),
    )


def _repartition_counts(
    subtopologies: list[Subtopology], partition_count: Callable[[str], int | None]
) -> dict[str, int]:
    """Kafka's RepartitionTopics.setup: a repartition topic without a fixed count has the partitions of
    the subtopology writing it (the most of its inputs known), decided pass by pass until all are."""
    counts = {
        t.name: t.partitions for s in subtopologies for t in s.repartition_source_topics if t.partitions
    }
    sinks = sum(len(s.repartition_sink_topics) for s in subtopologies)
    for _ in range(sinks + 1):  # each pass decides at least one sink topic, or raises
        needed = progress = False
        for subtopology in subtopologies:
            for sink in subtopology.repartition_sink_topics:
                if sink in counts:
                    continue
                known = [counts[t.name] for t in subtopology.repartition_source_topics if t.name in counts]
                known += [n for t in subtopology.source_topics if (n := partition_count(t)) is not None]
                if known:
                    counts[sink], progress = max(known), True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise InvalidTopology(
                "Failed to compute number of partitions for all repartition topics. "
                "There may be loops in the topology that cannot be resolved."
            )
    else:
        raise InvariantViolation(f"repartition topics still undecided after {sinks + 1} passes: {counts}")
    if any(t.name not in counts for s in subtopologies for t in s.repartition_source_topics):
        raise InvalidTopology(
            "Failed to compute number of partitions for all repartition topics, "
            "because a repartition source topic is never used as a sink topic."
        )
    return counts


def _copartition(
    topics: set[str], fixed: set[str], flexible: set[str], count: Callable[[str], int]
) -> dict[str, int]:
    """Kafka's CopartitionedTopicsEnforcer.enforce: a copartition group's source topics must have one
    count, and its repartition topics take it (the fixed ones must already have it). A group of only
    repartition topics takes the topology's fixed repartition topics' count (which must all be one, as
    Kafka checks every fixed repartition topic of the topology), else the most of its own."""
    if not topics:
        return {}
    repartition = {t: count(t) for t in sorted(topics) if t in fixed or t in flexible}
    others = {t: count(t) for t in sorted(topics) if t not in repartition}
    if set(repartition) == topics:
        if fixed:
            partitions = count(min(fixed))
            if any(count(t) != partitions for t in sorted(fixed)):
                raise _NotReady(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: [{_java_map(repartition)}]",
                )
        else:
            partitions = max(repartition.values())
            if partitions == 0:
                raise InvalidTopology(
                    "All topics in the copartition group had undefined partition number: "
                    f"[{', '.join(sorted(repartition))}]"
                )
    else:
        partitions = next(iter(others.values()))
        if any(n != partitions for n in others.values()):
            raise _NotReady(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Following topics do not have the same number of partitions: [{_java_map(others)}]",
            )
    for topic, current in repartition.items():
        if topic in fixed and current != partitions:
            raise _NotReady(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{current}] of repartition topic [{topic}] doesn't match number of "
                f"partitions [{partitions}] of the source topic.",
            )
    return dict.fromkeys(repartition, partitions)
