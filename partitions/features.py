"""Feature levels (as Kafka's ``metadata.version`` and ``kafka-features``): the gate before a new format.

A cluster upgrades one node at a time, so for a while nodes of two releases share it: a node must not write
a replicated command, snapshot or peer value the previous release cannot read until every node runs code
that reads it. Each such format is named here (``Format``) with the level of its feature that allows it;
code that writes one asks ``Features.allows(FORMAT)`` first and writes the previous release's format
otherwise. The cluster's *finalized* levels live in the controller's replicated metadata
(``SetFeatureLevel``; a cluster whose metadata never named a feature is at ``BASE_LEVEL``, the formats of
release 0.1.0). Each node gossips the highest level its code supports (``SUPPORTED``); an operator raises a
level (``raftlog cluster features upgrade``, ``kafka-features upgrade``) once every node supports it, and a
finalized level is never lowered (the formats it allowed may be on disk). A node whose code supports less
than the cluster's finalized level refuses to start (``unsupported``).

Pure: no I/O. ``docs/upgrades.md`` lists the formats, gated and not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from partitions.errors import FeatureUpdateRefused

RAFTLOG_VERSION = "raftlog.version"
TRANSACTION_VERSION = "transaction.version"  # Kafka's name: Kafka's clients read it (KIP-890)
BASE_LEVEL = 1  # a feature the metadata never named: release 0.1.0's formats
SUPPORTED: Mapping[str, int] = {RAFTLOG_VERSION: 2, TRANSACTION_VERSION: 2}
"""The highest level of each feature this code reads and writes (what it gossips)."""
RELEASE_LEVELS: Mapping[str, Mapping[str, int]] = {
    "0.1.0": {RAFTLOG_VERSION: 1, TRANSACTION_VERSION: 1},
    "0.2.0": SUPPORTED,
}
"""The levels a new cluster formed at a release starts at (``raftlog format --release-version``, as
``kafka-storage format --release-version``): a cluster formed at an earlier release's levels can still go
back to that release until the operator raises them."""
LEVELS: Mapping[str, Mapping[int, str]] = {
    RAFTLOG_VERSION: {
        1: "release 0.1.0's formats",
        2: "release 0.2.0's formats: a classic group's metadata replicated, Kafka producers' contiguous "
        "batches, committed leader epochs, consumer group protocol groups, producer ids bound to their "
        "owner, share groups (KIP-932), streams groups (KIP-1071), client quotas (KIP-546), client metrics "
        "subscriptions, group "
        "configs and replication throttles, the schema registry, Kafka's delegation tokens",
    },
    TRANSACTION_VERSION: {
        1: "transactions as Kafka's transaction version 1: a transaction's partitions added by "
        "AddPartitionsToTxn, the producer's epoch kept across its transactions",
        2: "Kafka's transaction version 2 (KIP-890's second part): the producer's epoch bumped at every "
        "EndTxn (v5), its markers carrying the bumped epoch; partitions added by Produce v12 and groups by "
        "TxnOffsetCommit v5",
    },
}


@dataclass(frozen=True, slots=True)
class Format:
    """A format the previous release cannot read, allowed from ``level`` of ``feature``."""

    name: str
    feature: str
    level: int


CLASSIC_GROUP_METADATA = Format("group table kind 9: a classic group's metadata", RAFTLOG_VERSION, 2)
PRODUCE_CONTIGUOUS = Format(
    "partition command Produce kind 10: a batch held to sequence + 1", RAFTLOG_VERSION, 2
)
CONSUMER_GROUP = Format("group table kind 10: a consumer group protocol group (KIP-848)", RAFTLOG_VERSION, 2)
OFFSET_LEADER_EPOCH = Format("CommitOffset / TxnOffset with a committed leader epoch", RAFTLOG_VERSION, 2)
OFFSET_METADATA = Format("CommitOffset / TxnOffset with the client's metadata string", RAFTLOG_VERSION, 2)
PRODUCER_OWNERS = Format(
    "controller command RegisterProducerOwner kind 16: producer ids bound to their principal",
    RAFTLOG_VERSION,
    2,
)
EXPIRE_UNCOMMITTED = Format(
    "group table Expire's fifth field: an empty group that never committed an offset forgotten early",
    RAFTLOG_VERSION,
    2,
)
SHARE_GROUPS = Format(
    "partition command ShareCommand kind 11: a share group's records (KIP-932)", RAFTLOG_VERSION, 2
)
STREAMS_GROUPS = Format(
    "group table kind 12: a streams group (KIP-1071), and the snapshot row's thirteenth field",
    RAFTLOG_VERSION,
    2,
)
SCHEMA_REGISTRY = Format(
    "partition command SchemaCommand kind 12: the schema registry's table (__schemas)", RAFTLOG_VERSION, 2
)
REGISTRY_ACLS = Format(
    "controller commands CreateAcls / DeleteAcls naming the schema registry's resource types (subject 100, "
    "registry 101), and such ACLs in the controller snapshot",
    RAFTLOG_VERSION,
    2,
)
USER_ACLS = Format(
    "controller commands CreateAcls / DeleteAcls naming the User (7) or DelegationToken (6) resource type or "
    "the operations CreateTokens (13) and DescribeTokens (14) of KIP-373, and such ACLs in the controller "
    "snapshot",
    RAFTLOG_VERSION,
    2,
)
SCHEMA_CONSUMERS = Format(
    "group table Join of an HTTP consumer instance of format avro, jsonschema or protobuf", RAFTLOG_VERSION, 2
)
SCHEMA_VALIDATION = Format(
    "topic configs confluent.key/value.schema.validation and .subject.name.strategy: records checked against "
    "their registered schema (a node of 0.1.0 refuses a topic config it does not know)",
    RAFTLOG_VERSION,
    2,
)
CLIENT_QUOTAS = Format(
    "controller command AlterClientQuotas kind 18: client quotas (KIP-546)", RAFTLOG_VERSION, 2
)
RESOURCE_CONFIGS = Format(
    "controller command AlterResourceConfigs kind 19: client metrics subscriptions, group configs, "
    "replication throttles, the log cleaner's threads, the cluster's defaults of topics' log configs",
    RAFTLOG_VERSION,
    2,
)
DELEGATION_TOKENS = Format(
    "controller command DelegationToken kind 21: Kafka's delegation tokens (create, renew, expire), and "
    "the snapshot key delegation_tokens",
    RAFTLOG_VERSION,
    2,
)

CONTROLLER_MEMBER_TIMES = Format(
    "the fields heard_at_ms and caught_up_at_ms of the peer answer ControllerMembers (controller_members, "
    "add_controller_voter, remove_controller_voter): a node of 0.1.0 fails to decode a field it lacks",
    RAFTLOG_VERSION,
    2,
)

TRANSACTIONS_V2 = Format(
    "transaction command EndTransaction with an epoch bump, and the rows it leaves (transaction version 2)",
    TRANSACTION_VERSION,
    2,
)

# arguments of peer operations a node of 0.1.0 refuses (an unknown argument, or value type), left out of a
# call until level 2 (``peer_ops.peer(since=...)``): the rules they serve are level 2's
PRODUCE_PRODUCER = Format(
    "peer operation produce_batch's producer argument: who produced a batch, checked on the leader",
    RAFTLOG_VERSION,
    2,
)
GROUP_OFFSET = Format(
    "peer operation group_offset: a committed offset with its leader epoch (0.1.0 serves committed_offset "
    "and stable_committed_offset)",
    RAFTLOG_VERSION,
    2,
)
TOPIC_ASSIGNMENT = Format(
    "the assignment argument of the peer operation create_topic: a topic's replicas placed by hand "
    "(kafka-topics --replica-assignment)",
    RAFTLOG_VERSION,
    2,
)
TOPIC_DELETE_BY_ID = Format(
    "controller command DeleteTopic naming the topic's creation index (DeleteTopics v6 by id: another topic "
    "of the same name is refused, never deleted), and the topic_id argument of the peer operation "
    "delete_topic",
    RAFTLOG_VERSION,
    2,
)
TOPIC_CHANGE_TIMEOUT = Format(
    "the timeout_ms argument of the peer operations create_topic, add_partitions and delete_topic: how long "
    "the request lets the controller's write take",
    RAFTLOG_VERSION,
    2,
)
TRANSACTION_PRINCIPAL = Format(
    "the principal argument of the transaction coordinator's peer operations: its producer ids' owner",
    RAFTLOG_VERSION,
    2,
)


@dataclass(frozen=True, slots=True)
class KafkaFeature:
    """One of Apache Kafka's own features as raftlog's levels give it: what Kafka's tools and clients read
    (``kafka-features describe``) and name (``kafka-features upgrade``). It is no level of its own: it
    follows ``raftlog.version``, whose level ``by_level`` maps to this feature's, and only changes with it."""

    name: str
    by_level: Mapping[int, int]  # raftlog.version level -> this feature's level
    beyond: str = ""  # what Kafka's levels past the top give, which raftlog does not serve

    def level(self, finalized: Mapping[str, int]) -> int:
        return self.by_level[finalized_level(finalized, RAFTLOG_VERSION)]

    def supported(self) -> tuple[int, int]:
        """The least and the highest level this code gives the feature (a new cluster's and the top)."""
        return min(self.by_level.values()), self.by_level[SUPPORTED[RAFTLOG_VERSION]]


METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
KAFKA_FEATURES: Mapping[str, KafkaFeature] = {
    feature.name: feature
    for feature in (
        # Kafka's MetadataVersion feature levels: 27 is 4.1-IV1 (Kafka 4.1, release 0.1.0's reference), 33
        # 4.4-IV2 (Kafka 4.4.0's default): the Kafka release whose protocol the cluster's formats serve
        KafkaFeature(METADATA_VERSION, {1: 27, 2: 33}),
        # 1: the consumer group protocol (KIP-848), exactly where the cluster allows ``CONSUMER_GROUP``
        # (tests/partitions/test_features.py)
        KafkaFeature(GROUP_VERSION, {1: 0, 2: 1}),
        # 1: share groups (KIP-932), exactly where the cluster allows ``SHARE_GROUPS``
        KafkaFeature(
            SHARE_VERSION,
            {1: 0, 2: 1},
            "share.version 2 (Kafka 4.4's dead-letter topics of share groups) is not served",
        ),
        # 1: streams groups (KIP-1071), exactly where the cluster allows ``STREAMS_GROUPS``
        KafkaFeature(STREAMS_VERSION, {1: 0, 2: 1}),
    )
}
"""Kafka's features a raftlog cluster has, each a view of ``raftlog.version``."""
KAFKA_NOT_SERVED: Mapping[str, str] = {
    "kraft.version": "raftlog's controller is a Raft group of its own, not KRaft: its voters change with "
    "raftlog controller add and remove (RemoveRaftVoter on the Kafka door)",
    "eligible.leader.replicas.version": "eligible leader replicas (KIP-966) are not served: a partition's "
    "leader is elected by Raft among a majority of its replicas",
}
"""Kafka's features raftlog has no level of, each with the reason an update naming one is refused."""


def kafka_levels(finalized: Mapping[str, int]) -> dict[str, int]:
    """Kafka's features at the cluster's ``finalized`` levels, those at level 0 left out (as Kafka leaves a
    feature at 0 out of the finalized ones)."""
    levels = {name: feature.level(finalized) for name, feature in KAFKA_FEATURES.items()}
    return {name: level for name, level in levels.items() if level > 0}


def check_kafka_update(feature: str, level: int, finalized: Mapping[str, int]) -> None:
    """An update of one of Kafka's features (``KAFKA_FEATURES``, ``KAFKA_NOT_SERVED``) to ``level``: allowed
    when the cluster is there already (a no-op, as Kafka answers one), else FeatureUpdateRefused naming
    the ``raftlog.version`` level that brings it, or why raftlog has no such level."""
    if feature in KAFKA_NOT_SERVED:
        raise FeatureUpdateRefused(feature, level, KAFKA_NOT_SERVED[feature])
    kafka = KAFKA_FEATURES[feature]
    current = kafka.level(finalized)
    if level == current:
        return
    if level < current:
        raise _downgrade(feature, level, current)
    brings = [raftlog for raftlog, mapped in sorted(kafka.by_level.items()) if mapped == level]
    if not brings:
        shown = ", ".join(str(mapped) for mapped in sorted(set(kafka.by_level.values())))
        beyond = f"; {kafka.beyond}" if kafka.beyond and level > kafka.supported()[1] else ""
        raise FeatureUpdateRefused(feature, level, f"raftlog gives {feature} the levels {shown}{beyond}")
    raise FeatureUpdateRefused(
        feature,
        level,
        f"{feature} follows raftlog.version: level {level} comes with raftlog.version {brings[0]}, which "
        f"kafka-features upgrade --feature raftlog.version={brings[0]} raises",
    )


def plan_updates(
    updates: Sequence[tuple[str, int]], finalized: Mapping[str, int]
) -> tuple[list[tuple[str, int]], dict[str, FeatureUpdateRefused]]:
    """A request's updates (Kafka's UpdateFeatures), each checked: those to apply, raftlog's own features in
    the request's order (each applied through ``check_upgrade`` on the controller), and the refusal of
    each refused one; when any is refused, none is applied. Kafka's features are no-ops or refused
    (``check_kafka_update``); a feature named twice refuses the request."""
    refused: dict[str, FeatureUpdateRefused] = {}
    if len({name for name, _ in updates}) != len(updates):
        return [], {"": FeatureUpdateRefused("", 0, "a feature named more than once in the request")}
    apply = []
    for name, level in updates:
        try:
            if name in KAFKA_FEATURES or name in KAFKA_NOT_SERVED:
                check_kafka_update(name, level, finalized)
                continue
            if level < 1:
                raise FeatureUpdateRefused(name, level, "a feature cannot be deleted (level 0)")
            check_known(name, level)
            if level < finalized_level(finalized, name):
                check_upgrade(name, level, finalized, {})  # raises: a downgrade
            apply.append((name, level))
        except FeatureUpdateRefused as refusal:
            refused[name] = refusal
    return apply, refused


def release_levels(release: str) -> dict[str, int]:
    """The levels of every feature this code knows that a cluster formed at ``release`` starts at;
    FeatureUpdateRefused for a release this code cannot form."""
    levels = RELEASE_LEVELS.get(release)
    if levels is None:
        known = ", ".join(RELEASE_LEVELS)
        raise FeatureUpdateRefused(
            RAFTLOG_VERSION, BASE_LEVEL, f"unknown release {release!r} (known: {known})"
        )
    return {feature: levels.get(feature, BASE_LEVEL) for feature in SUPPORTED}


def finalized_level(finalized: Mapping[str, int], feature: str) -> int:
    return finalized.get(feature, BASE_LEVEL)


def check_known(feature: str, level: int) -> None:
    """Raises FeatureUpdateRefused for a feature this code does not know or a level outside 1..max."""
    if feature not in SUPPORTED:
        raise FeatureUpdateRefused(feature, level, f"unknown feature (known: {', '.join(sorted(SUPPORTED))})")
    if not isinstance(level, int) or isinstance(level, bool) or not BASE_LEVEL <= level <= SUPPORTED[feature]:
        raise FeatureUpdateRefused(
            feature, level, f"this node's code supports levels {BASE_LEVEL}..{SUPPORTED[feature]}"
        )


def _downgrade(feature: str, level: int, current: int) -> FeatureUpdateRefused:
    return FeatureUpdateRefused(
        feature,
        level,
        f"finalized at {current}: a downgrade is refused (the formats of {current} may be on disk)",
    )


def check_upgrade(
    feature: str,
    level: int,
    finalized: Mapping[str, int],
    nodes: Mapping[str, Mapping[str, int] | None],
) -> bool:
    """Whether raising ``feature`` to ``level`` changes anything (False: already there); raises
    FeatureUpdateRefused, naming them, when a node of ``nodes`` (node -> its supported levels as gossiped;
    None: not heard, a node that is down) does not support it, and for a downgrade."""
    check_known(feature, level)
    current = finalized_level(finalized, feature)
    if level < current:
        raise _downgrade(feature, level, current)
    if level == current:
        return False
    behind = []
    for node, supported in sorted(nodes.items()):
        if supported is None:
            behind.append(f"{node} (not heard from: down?)")
        elif supported.get(feature, BASE_LEVEL) < level:
            behind.append(f"{node} (supports {supported.get(feature, BASE_LEVEL)})")
    if behind:
        raise FeatureUpdateRefused(feature, level, f"not every node supports it: {', '.join(behind)}")
    return True


def unsupported(finalized: Mapping[str, int]) -> str | None:
    """Why this node's code cannot join a cluster at ``finalized`` levels, or None when it can."""
    for feature, level in sorted(finalized.items()):
        if level > SUPPORTED.get(feature, 0):
            return (
                f"the cluster's feature {feature} is finalized at level {level}; this node's code supports "
                f"at most {SUPPORTED.get(feature, 0)}: run a release that supports it"
            )
    return None


def kept_out(finalized: Mapping[str, int], announced: Mapping[str, int] | None) -> str | None:
    """Why a node whose code announces ``announced`` (its supported levels; None: it announces none, as a
    node of release 0.1.0, counted as supporting level 1 of every feature) may take no part in a cluster
    at ``finalized`` levels (None: it may): it could not read what the cluster writes, so it neither
    receives nor serves entries, peer calls or routing (Kafka: a broker below the finalized
    ``metadata.version`` never serves)."""
    for feature, level in sorted(finalized.items()):
        supports = BASE_LEVEL if announced is None else announced.get(feature, BASE_LEVEL)
        if level > supports:
            code = (
                "announces no feature levels (release 0.1.0)"
                if announced is None
                else f"supports {feature} {supports}"
            )
            return f"its code {code}; the cluster's {feature} is finalized at {level}"
    return None


class Features:
    """The gate: ``allows(FORMAT)`` on the finalized levels as this node last applied them."""

    def __init__(
        self, finalized: Callable[[], Mapping[str, int]], epoch: Callable[[], int] = lambda: -1
    ) -> None:
        """``epoch``: of the finalized levels as read (Kafka's finalized_features_epoch: the controller
        metadata's applied index, as KRaft gives its metadata offset; -1: unknown)."""
        self._finalized = finalized
        self.epoch = epoch

    def allows(self, fmt: Format) -> bool:
        return finalized_level(self._finalized(), fmt.feature) >= fmt.level

    def supported(self) -> dict[str, int]:
        """The highest level of each feature this node's code supports."""
        return dict(SUPPORTED)

    def levels(self) -> dict[str, int]:
        finalized = self._finalized()
        return {feature: finalized_level(finalized, feature) for feature in SUPPORTED}

    def advertised(self) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
        """What a Kafka client is told (ApiVersions v3+, KIP-584, ``kafka-features describe``): each
        feature's supported range and the finalized levels, raftlog's own and Kafka's as they follow
        ``raftlog.version`` (``KAFKA_FEATURES``)."""
        supported = {feature: (BASE_LEVEL, top) for feature, top in SUPPORTED.items()}
        supported |= {name: kafka.supported() for name, kafka in KAFKA_FEATURES.items()}
        return supported, self.levels() | kafka_levels(self._finalized())
