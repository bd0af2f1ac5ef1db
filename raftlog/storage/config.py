"""Per-log configuration, with Kafka's property names, validated when built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal

from raftlog.storage.batch import HEADER_SIZE
from raftlog.storage.errors import InvalidConfig

KiB = 1024
MiB = 1024 * KiB
DAY_MS = 24 * 3600 * 1000

FlushMode = Literal["always", "group"]
TimestampTypeName = Literal["CreateTime", "LogAppendTime"]
CompressionName = Literal["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
CleanupPolicy = Literal["delete", "compact", "compact,delete"]
LONG_MAX = 2**63 - 1  # Kafka's Long.MAX_VALUE: max.compaction.lag.ms unset

# Kafka-style property name -> LogConfig field
PROPERTY_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "max.message.bytes": "max_message_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.policy": "flush_mode",
    "flush.ms": "flush_interval_ms",
    "flush.bytes": "flush_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "message.timestamp.type": "timestamp_type",
    "compression.type": "compression_type",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    # Confluent Server's broker-side schema validation (partitions.data.schema_checks), by its names
    "confluent.key.schema.validation": "key_schema_validation",
    "confluent.value.schema.validation": "value_schema_validation",
    "confluent.key.subject.name.strategy": "key_subject_name_strategy",
    "confluent.value.subject.name.strategy": "value_subject_name_strategy",
}
# the properties added since release 0.1.0, whose nodes refuse them (``partitions.features``)
SCHEMA_VALIDATION_PROPERTIES = (
    "confluent.key.schema.validation",
    "confluent.value.schema.validation",
    "confluent.key.subject.name.strategy",
    "confluent.value.subject.name.strategy",
)
# the subject name strategies built: Confluent's TopicNameStrategy ({topic}-key, {topic}-value) alone
_STRATEGIES = ("io.confluent.kafka.serializers.subject.TopicNameStrategy",)
# properties whose values are names, and the names each takes (the rest are integers)
CHOICES: dict[str, tuple[str, ...]] = {
    "flush_mode": ("always", "group"),
    "timestamp_type": ("CreateTime", "LogAppendTime"),
    "compression_type": ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    "cleanup_policy": ("delete", "compact", "compact,delete"),
    "key_subject_name_strategy": _STRATEGIES,
    "value_subject_name_strategy": _STRATEGIES,
}
# properties whose values are booleans (Kafka's BOOLEAN: true or false, as text in any case too)
BOOLEANS = ("key_schema_validation", "value_schema_validation")
# properties whose values are fractions (the rest are integers)
FRACTIONS = ("min_cleanable_dirty_ratio",)

SEGMENT_BYTES_MAX = 2**31 - 1  # positions in the offset index are u32; keep well inside


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How one log stores, flushes and retains its data.

    flush_mode "always": every append is fsynced before it returns (the default).
    flush_mode "group": appends return once written to the page cache; a background flusher fsyncs
    every ``flush_interval_ms``, and an append fsyncs inline once ``flush_bytes`` are unflushed.
    retention_ms / retention_bytes of -1 mean unlimited.
    timestamp_type (Kafka's ``message.timestamp.type``): "CreateTime" keeps the producer's timestamps,
    "LogAppendTime" has the leader stamp its clock on every batch it appends.
    compression_type (Kafka's ``compression.type``): "producer" stores a batch compressed as it came;
    "uncompressed" or a codec has the leader store it so (recompressing when it came otherwise).
    cleanup_policy (Kafka's ``cleanup.policy``): "delete" drops whole segments past retention; "compact"
    keeps the latest record of each key instead (``raftlog.storage.compaction``, with Kafka's
    ``delete.retention.ms``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms`` and
    ``min.cleanable.dirty.ratio``); "compact,delete" does both. Given as "delete,compact" it reads the same.
    """

    segment_bytes: int = 128 * MiB
    segment_ms: int = 7 * DAY_MS
    max_message_bytes: int = 1 * MiB
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    flush_mode: FlushMode = "always"
    flush_interval_ms: int = 10
    flush_bytes: int = 1 * MiB
    index_interval_bytes: int = 4 * KiB
    timestamp_type: TimestampTypeName = "CreateTime"
    compression_type: CompressionName = "producer"
    cleanup_policy: CleanupPolicy = "delete"
    delete_retention_ms: int = 1 * DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    key_schema_validation: bool = False
    value_schema_validation: bool = False
    key_subject_name_strategy: str = _STRATEGIES[0]
    value_subject_name_strategy: str = _STRATEGIES[0]

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in BOOLEANS:
                if not isinstance(value, bool):
                    raise InvalidConfig(_property(f.name), value, "must be true or false")
            elif f.name in FRACTIONS:
                if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
                    raise InvalidConfig(_property(f.name), value, "must be a number between 0 and 1")
            elif f.name in CHOICES:
                if value not in CHOICES[f.name]:
                    names = " or ".join(repr(c) for c in CHOICES[f.name])
                    raise InvalidConfig(_property(f.name), value, f"must be {names}")
            elif not isinstance(value, int) or isinstance(value, bool):
                raise InvalidConfig(_property(f.name), value, "must be an integer")
        _range("segment.bytes", self.segment_bytes, 1 * KiB, SEGMENT_BYTES_MAX)
        _range("segment.ms", self.segment_ms, 1, 2**62)
        _range("max.message.bytes", self.max_message_bytes, HEADER_SIZE + 16, SEGMENT_BYTES_MAX)
        if self.retention_ms != -1:
            _range("retention.ms", self.retention_ms, 1, 2**62)
        if self.retention_bytes != -1:
            _range("retention.bytes", self.retention_bytes, 1, 2**62)
        _range("flush.ms", self.flush_interval_ms, 1, 3600 * 1000)
        _range("flush.bytes", self.flush_bytes, 1, 2**40)
        _range("index.interval.bytes", self.index_interval_bytes, 1, 64 * MiB)
        _range("delete.retention.ms", self.delete_retention_ms, 0, LONG_MAX)
        _range("min.compaction.lag.ms", self.min_compaction_lag_ms, 0, LONG_MAX)
        _range("max.compaction.lag.ms", self.max_compaction_lag_ms, 1, LONG_MAX)

    @property
    def compacted(self) -> bool:
        """Whether the cleaner compacts this log (``cleanup.policy`` names ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def retained(self) -> bool:
        """Whether retention deletes old segments (``cleanup.policy`` names ``delete``)."""
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(cls, properties: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-style names (``{"segment.bytes": 1048576, ...}``), over ``base`` or defaults.

        Integer values may come as decimal strings (command lines, HTTP query strings).
        """
        source = cls() if base is None else base  # once: made per field, it cost 0.4 ms a call
        values = {f.name: getattr(source, f.name) for f in fields(cls)}
        for key, raw in properties.items():
            name = PROPERTY_FIELDS.get(key)
            if name is None:
                raise InvalidConfig(
                    key, raw, f"unknown property; known: {', '.join(sorted(PROPERTY_FIELDS))}"
                )
            if name == "cleanup_policy" and isinstance(raw, str):
                values[name] = _policy(raw)
            elif name in BOOLEANS and isinstance(raw, str):
                values[name] = {"true": True, "false": False}.get(raw.strip().lower(), raw)
            elif name in CHOICES:
                values[name] = raw
            elif name in FRACTIONS and isinstance(raw, str):
                try:
                    values[name] = float(raw.strip())
                except ValueError:
                    raise InvalidConfig(key, raw, "must be a number between 0 and 1") from None
            elif isinstance(raw, str):
                try:
                    values[name] = int(raw.strip())
                except ValueError:
                    raise InvalidConfig(key, raw, "must be an integer") from None
            else:
                values[name] = raw
        return cls(**values)

    def to_properties(self) -> dict[str, object]:
        """The Kafka-style view, as published by the API."""
        return {key: getattr(self, name) for key, name in PROPERTY_FIELDS.items()}


def _property(field_name: str) -> str:
    for key, name in PROPERTY_FIELDS.items():
        if name == field_name:
            return key
    return field_name


def _policy(raw: str) -> str:
    """``cleanup.policy`` as Kafka takes it (a list: "compact,delete" and "delete,compact" alike), in one
    spelling; anything else is left for the check of choices to refuse by name."""
    names = sorted({part.strip() for part in raw.split(",")})
    return ",".join(names) if names and set(names) <= {"compact", "delete"} else raw


def _range(key: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidConfig(key, value, f"must be between {low} and {high}")
