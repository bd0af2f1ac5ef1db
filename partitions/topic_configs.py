"""What a topic's configs are, described as Kafka 4.1 describes them (DescribeConfigs): every config
Kafka's ``LogConfig`` knows, each with its type, its source (set on the topic, or the default), whether
raftlog lets it change, and its synonyms (the broker-wide name Kafka falls back to).

raftlog honours the configs of ``raftlog.storage.config`` (``PROPERTY_FIELDS``: Kafka's names plus its
own ``flush.policy`` and ``flush.bytes``); they are described as set on the topic or as raftlog's default.
The rest are described read-only with the value raftlog behaves as (``READ_ONLY``): Raft decides what
they would tune (``min.insync.replicas`` is the majority of the replicas, no leader is ever elected
unclean), or raftlog has no such part (tiered storage, preallocation, per-codec levels). A change to
one of them is refused (``InvalidConfig``: INVALID_CONFIG on the Kafka door)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from partitions.resource_configs import CLUSTER_LOG_DEFAULTS
from raftlog.storage.config import PROPERTY_FIELDS, LogConfig
from raftlog.storage.errors import InvalidConfig

LONG_MAX = 2**63 - 1
Source = Literal[
    "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"
]
Kind = Literal["BOOLEAN", "STRING", "INT", "LONG", "DOUBLE", "LIST"]

# Kafka 4.1's topic configs: name -> (type, the broker config it falls back to, or None)
KAFKA_TOPIC_CONFIGS: dict[str, tuple[Kind, str | None]] = {
    "cleanup.policy": ("LIST", "log.cleanup.policy"),
    "compression.gzip.level": ("INT", "compression.gzip.level"),
    "compression.lz4.level": ("INT", "compression.lz4.level"),
    "compression.type": ("STRING", "compression.type"),
    "compression.zstd.level": ("INT", "compression.zstd.level"),
    "delete.retention.ms": ("LONG", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("LONG", "log.segment.delete.delay.ms"),
    "flush.messages": ("LONG", "log.flush.interval.messages"),
    "flush.ms": ("LONG", "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ("LIST", None),
    "index.interval.bytes": ("INT", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ("LIST", None),
    "local.retention.bytes": ("LONG", "log.local.retention.bytes"),
    "local.retention.ms": ("LONG", "log.local.retention.ms"),
    "max.compaction.lag.ms": ("LONG", "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("INT", "message.max.bytes"),
    "message.timestamp.after.max.ms": ("LONG", "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": ("LONG", "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": ("STRING", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("DOUBLE", "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("LONG", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("INT", "min.insync.replicas"),
    "preallocate": ("BOOLEAN", "log.preallocate"),
    "remote.log.copy.disable": ("BOOLEAN", None),
    "remote.log.delete.on.disable": ("BOOLEAN", None),
    "remote.storage.enable": ("BOOLEAN", None),
    "retention.bytes": ("LONG", "log.retention.bytes"),
    "retention.ms": ("LONG", "log.retention.ms"),
    "segment.bytes": ("INT", "log.segment.bytes"),
    "segment.index.bytes": ("INT", "log.index.size.max.bytes"),
    "segment.jitter.ms": ("LONG", "log.roll.jitter.ms"),
    "segment.ms": ("LONG", "log.roll.ms"),
    "unclean.leader.election.enable": ("BOOLEAN", "unclean.leader.election.enable"),
}
# Kafka 4's floor for a segment.bytes an operator sets, and its internal config below it (``settable``)
SEGMENT_BYTES_MIN = 1024 * 1024
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
# raftlog's own, beside Kafka's
RAFTLOG_TOPIC_CONFIGS: dict[str, tuple[Kind, str | None]] = {
    "flush.policy": ("STRING", None),
    "flush.bytes": ("LONG", None),
    # Confluent Server's, by its names: records checked against their registered schema
    "confluent.key.schema.validation": ("BOOLEAN", None),
    "confluent.value.schema.validation": ("BOOLEAN", None),
    "confluent.key.subject.name.strategy": ("STRING", None),
    "confluent.value.subject.name.strategy": ("STRING", None),
}

# the configs raftlog does not let change: the value it behaves as (min.insync.replicas: see below)
READ_ONLY: dict[str, object] = {
    "compression.gzip.level": -1,  # raftlog recompresses at each codec's own default level
    "compression.lz4.level": 9,
    "compression.zstd.level": 3,
    "file.delete.delay.ms": 60000,
    "flush.messages": LONG_MAX,  # raftlog flushes by flush.policy, flush.ms and flush.bytes
    "local.retention.bytes": -2,  # no tiered storage: all data is local
    "local.retention.ms": -2,
    "message.timestamp.after.max.ms": LONG_MAX,
    "message.timestamp.before.max.ms": LONG_MAX,
    "preallocate": False,
    "remote.log.copy.disable": False,
    "remote.log.delete.on.disable": False,
    "remote.storage.enable": False,
    "segment.index.bytes": 10485760,
    "segment.jitter.ms": 0,
    "unclean.leader.election.enable": False,  # Raft never elects a leader without a majority's log
}
MIN_INSYNC_REPLICAS = "min.insync.replicas"
# kept beside the topic's log configs by the controller (``partitions.resource_configs``: kind "topic")
THROTTLED_REPLICAS = ("follower.replication.throttled.replicas", "leader.replication.throttled.replicas")


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str
    source: Source


@dataclass(frozen=True)
class ConfigEntry:
    """One config as DescribeConfigs describes it."""

    name: str
    value: str
    kind: Kind
    source: Source
    read_only: bool
    synonyms: tuple[Synonym, ...]

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


def min_insync_replicas(replication_factor: int) -> int:
    """Kafka's ``min.insync.replicas`` under Raft: a write is acknowledged once a majority of the
    partition's replicas has it, so that majority is the topic's minimum."""
    return max(replication_factor, 1) // 2 + 1


def render(value: object) -> str:
    """A value as Kafka prints it (booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe_topic(
    set_on_topic: Mapping[str, object],
    replication_factor: int,
    keys: tuple[str, ...] | None = None,
    throttles: Mapping[str, str] | None = None,
    cluster_defaults: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """Every config of a topic with those configs set on it (``keys``: only those), in name order;
    ``throttles``: its throttled-replica lists; ``cluster_defaults``: the cluster's defaults of topics'
    log configs, by topic config (``partitions.resource_configs.topic_log_defaults``), described as Kafka
    describes a dynamic broker default."""
    throttles = throttles or {}
    cluster_defaults = cluster_defaults or {}
    base = LogConfig.from_properties(cluster_defaults) if cluster_defaults else None
    effective = LogConfig.from_properties(set_on_topic, base).to_properties()
    set_on_topic = {**set_on_topic, **throttles}
    defaults = LogConfig().to_properties()
    entries = []
    for name, (kind, broker_name) in sorted({**KAFKA_TOPIC_CONFIGS, **RAFTLOG_TOPIC_CONFIGS}.items()):
        if keys is not None and name not in keys:
            continue
        if name in PROPERTY_FIELDS:
            value, default, read_only = effective[name], defaults[name], False
        elif name in THROTTLED_REPLICAS:
            value, default, read_only = throttles.get(name, ""), "", False
        elif name == MIN_INSYNC_REPLICAS:
            value = default = min_insync_replicas(replication_factor)
            read_only = True
        else:
            value = default = READ_ONLY[name]
            read_only = True
        source: Source = (
            "DYNAMIC_TOPIC_CONFIG"
            if name in set_on_topic
            else "DYNAMIC_DEFAULT_BROKER_CONFIG"
            if name in cluster_defaults
            else "DEFAULT_CONFIG"
        )
        synonyms = []
        if name in set_on_topic:
            synonyms.append(Synonym(name, render(value), "DYNAMIC_TOPIC_CONFIG"))
        if broker_name is not None and name in cluster_defaults:
            cluster_value = render(
                LogConfig.from_properties({name: cluster_defaults[name]}).to_properties()[name]
            )
            synonyms.append(Synonym(broker_name, cluster_value, "DYNAMIC_DEFAULT_BROKER_CONFIG"))
        if broker_name is not None:
            synonyms.append(Synonym(broker_name, render(default), "DEFAULT_CONFIG"))
        entries.append(ConfigEntry(name, render(value), kind, source, read_only, tuple(synonyms)))
    return entries


def settable(changes: Mapping[str, object]) -> dict[str, object]:
    """The configs a creation or an alteration sets, as the topic stores them, against the floor Kafka 4
    puts on what an operator may set (KIP-1030): ``segment.bytes`` below 1 MiB is refused (InvalidConfig:
    INVALID_CONFIG on the Kafka door), as a default producer's batches (up to ~1 MB) would not fit a
    segment. A topic created with a smaller one before keeps it. Kafka's ``internal.segment.bytes``, for
    tests whose logs must roll within a few records, sets one down to the log's own floor (1 KiB): it is
    stored as ``segment.bytes`` (which every release reads), winning over a ``segment.bytes`` beside it."""
    stored = {name: value for name, value in changes.items() if name != INTERNAL_SEGMENT_BYTES}
    raw = stored.get("segment.bytes")
    size = None if raw is None else LogConfig.from_properties({"segment.bytes": raw}).segment_bytes
    if size is not None and size < SEGMENT_BYTES_MIN:
        why = f"must be at least {SEGMENT_BYTES_MIN} (Kafka's minimum): a smaller one refuses default batches"
        raise InvalidConfig("segment.bytes", raw, why)
    if INTERNAL_SEGMENT_BYTES in changes:
        stored["segment.bytes"] = changes[INTERNAL_SEGMENT_BYTES]
    return stored


def stored_name(name: str) -> str:
    """The config a name ``settable`` takes is stored as (``internal.segment.bytes``: ``segment.bytes``)."""
    return "segment.bytes" if name == INTERNAL_SEGMENT_BYTES else name


def creation_configs(configs: Mapping[str, object], replication_factor: int) -> dict[str, object]:
    """The configs a topic is created with, of those asked: a read-only config that Kafka's tools and
    frameworks send at creation (``min.insync.replicas=2`` above all) is accepted and left out when raftlog
    already behaves so (``min.insync.replicas`` up to the Raft majority, which every acknowledged write
    reaches; the others at the value raftlog behaves as), and refused naming it when it asks for more."""
    kept: dict[str, object] = {}
    for name, value in configs.items():
        if name == MIN_INSYNC_REPLICAS:
            majority = min_insync_replicas(replication_factor)
            try:
                wanted = int(str(value))
            except ValueError:
                raise InvalidConfig(name, value, "an integer") from None
            if not 1 <= wanted <= majority:
                raise InvalidConfig(
                    name, value, f"at most {majority}: raftlog acknowledges a write once a majority of the "
                    f"{replication_factor} replicas has it (docs/kafka-compatibility.md)",
                )  # fmt: skip
        elif name in READ_ONLY:
            if render(value) != render(READ_ONLY[name]):
                raise InvalidConfig(
                    name, value, f"read-only under raftlog, which behaves as {render(READ_ONLY[name])} "
                    "(docs/kafka-compatibility.md)",
                )  # fmt: skip
        else:
            kept[name] = value
    return kept


def check_changeable(names: Iterable[str]) -> None:
    """Refuse a change to a config raftlog describes read-only, naming why."""
    for name in names:
        if name in READ_ONLY or name == MIN_INSYNC_REPLICAS:
            raise InvalidConfig(name, None, "read-only under raftlog (docs/kafka-compatibility.md)")


def alterable(changes: Mapping[str, object]) -> dict[str, object]:
    """The configs an alteration sets, as the topic stores them: a config raftlog describes read-only is
    refused by name (``check_changeable``: a creation instead accepts one raftlog already behaves as,
    ``creation_configs``), then ``settable``'s. The one rule of an alteration, whichever door asked: the
    controller's ``TopicChanges.alter_configs`` applies it, and a door that checks early calls it too."""
    check_changeable(changes)
    return settable(changes)


def describe_broker(keys: tuple[str, ...] | None = None) -> list[ConfigEntry]:
    """A broker's configs: the broker-wide defaults its topics fall back to, read-only (a node takes
    them at start, none changes at run time), in name order."""
    defaults = {**LogConfig().to_properties(), **READ_ONLY}
    entries = []
    for name, (kind, broker_name) in sorted(KAFKA_TOPIC_CONFIGS.items(), key=lambda item: str(item[1][1])):
        if broker_name is None or (keys is not None and broker_name not in keys):
            continue
        if broker_name in CLUSTER_LOG_DEFAULTS:  # dynamic: described with the cluster's defaults
            continue
        value = render(defaults.get(name, 1))  # min.insync.replicas: 1 for a topic of one replica
        entries.append(ConfigEntry(broker_name, value, kind, "DEFAULT_CONFIG", True, ()))
    return entries
