"""LogConfig: valid defaults, every property range-checked with an error naming its key."""

from __future__ import annotations

import dataclasses

import pytest

from raftlog.storage import LogConfig
from raftlog.storage.config import PROPERTY_FIELDS, SCHEMA_VALIDATION_PROPERTIES
from raftlog.storage.errors import InvalidConfig

KIB, MIB = 1024, 1024 * 1024

# property -> (smallest allowed, largest allowed, whether -1 means "unlimited")
INTEGER_RANGES = {
    "segment.bytes": (1 * KIB, 2**31 - 1, False),
    "segment.ms": (1, 2**62, False),
    "max.message.bytes": (61 + 16, 2**31 - 1, False),
    "retention.ms": (1, 2**62, True),
    "retention.bytes": (1, 2**62, True),
    "flush.ms": (1, 3600 * 1000, False),
    "flush.bytes": (1, 2**40, False),
    "index.interval.bytes": (1, 64 * MIB, False),
    "delete.retention.ms": (0, 2**63 - 1, False),
    "min.compaction.lag.ms": (0, 2**63 - 1, False),
    "max.compaction.lag.ms": (1, 2**63 - 1, False),
}


def test_every_property_is_covered_here():
    assert set(PROPERTY_FIELDS) == {
        *INTEGER_RANGES,
        "flush.policy",
        "message.timestamp.type",
        "compression.type",
        "cleanup.policy",
        "min.cleanable.dirty.ratio",
        *SCHEMA_VALIDATION_PROPERTIES,
    }
    assert set(PROPERTY_FIELDS.values()) == {f.name for f in dataclasses.fields(LogConfig)}


def test_defaults_are_valid_and_durable():
    config = LogConfig()
    assert config.flush_mode == "always"  # acknowledged means fsynced unless asked otherwise
    assert config.retention_bytes == -1
    assert config.max_message_bytes <= config.segment_bytes
    assert LogConfig.from_properties({}) == config
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize("key", sorted(INTEGER_RANGES))
def test_integer_property_bounds_are_inclusive(key):
    low, high, _ = INTEGER_RANGES[key]
    field = PROPERTY_FIELDS[key]
    assert getattr(LogConfig.from_properties({key: low}), field) == low
    assert getattr(LogConfig.from_properties({key: high}), field) == high


@pytest.mark.parametrize("key", sorted(INTEGER_RANGES))
def test_integer_property_out_of_range_is_refused_naming_the_key(key):
    low, high, unlimited = INTEGER_RANGES[key]
    bad_values = [low - 1, high + 1, -(2**70), 2**70]
    if not unlimited:
        bad_values.append(-1)
    for value in bad_values:
        if value == -1 and unlimited:
            continue
        with pytest.raises(InvalidConfig) as raised:
            LogConfig.from_properties({key: value})
        assert raised.value.key == key
        assert raised.value.value == value
        assert key in str(raised.value)


@pytest.mark.parametrize("key", [k for k, (_, _, unlimited) in INTEGER_RANGES.items() if unlimited])
def test_minus_one_means_unlimited_for_retention(key):
    assert getattr(LogConfig.from_properties({key: -1}), PROPERTY_FIELDS[key]) == -1
    with pytest.raises(InvalidConfig, match=key):
        LogConfig.from_properties({key: -2})


@pytest.mark.parametrize("key", sorted(INTEGER_RANGES))
@pytest.mark.parametrize("value", [1.5, True, None, b"10", [10]], ids=repr)
def test_integer_property_of_wrong_type_is_refused_naming_the_key(key, value):
    with pytest.raises(InvalidConfig) as raised:
        LogConfig.from_properties({key: value})
    assert raised.value.key == key
    assert key in str(raised.value)
    # the dataclass constructor reports the Kafka-style name too, not the Python field name
    with pytest.raises(InvalidConfig) as raised:
        LogConfig(**{PROPERTY_FIELDS[key]: value})
    assert raised.value.key == key


@pytest.mark.parametrize("value", ["sometimes", "ALWAYS", "", None, 1])
def test_flush_policy_must_be_always_or_group(value):
    with pytest.raises(InvalidConfig) as raised:
        LogConfig.from_properties({"flush.policy": value})
    assert raised.value.key == "flush.policy"
    assert "flush.policy" in str(raised.value)


def test_properties_from_strings():
    config = LogConfig.from_properties(
        {
            "segment.bytes": "2048",
            "retention.ms": "-1",
            "retention.bytes": " 4096 ",
            "flush.policy": "group",
            "flush.ms": "25",
            "index.interval.bytes": "128",
        }
    )
    assert (config.segment_bytes, config.retention_ms, config.retention_bytes) == (2048, -1, 4096)
    assert (config.flush_mode, config.flush_interval_ms, config.index_interval_bytes) == ("group", 25, 128)


@pytest.mark.parametrize("text", ["", "abc", "1.5", "0x10", "12 kb"])
def test_non_integer_string_is_refused_naming_the_key(text):
    with pytest.raises(InvalidConfig) as raised:
        LogConfig.from_properties({"segment.bytes": text})
    assert raised.value.key == "segment.bytes"
    assert raised.value.value == text


def test_string_values_are_range_checked_too():
    with pytest.raises(InvalidConfig, match=r"segment\.bytes"):
        LogConfig.from_properties({"segment.bytes": "10"})


@pytest.mark.parametrize("key", ["segment_bytes", "segment.byte", "retention", "log.segment.bytes", ""])
def test_unknown_property_is_refused(key):
    with pytest.raises(InvalidConfig, match="unknown property") as raised:
        LogConfig.from_properties({key: 1})
    assert raised.value.key == key


def test_from_properties_overrides_only_the_given_keys_of_base():
    base = LogConfig(segment_bytes=4096, flush_mode="group", retention_bytes=10_000)
    config = LogConfig.from_properties({"retention.ms": 5}, base=base)
    assert config == dataclasses.replace(base, retention_ms=5)


@pytest.mark.parametrize(
    ("given", "policy", "compacted", "retained"),
    [
        ("delete", "delete", False, True),
        ("compact", "compact", True, False),
        ("compact,delete", "compact,delete", True, True),
        ("delete, compact", "compact,delete", True, True),  # Kafka takes a list, in either order
    ],
)
def test_cleanup_policy_reads_as_kafka_lists_it(given, policy, compacted, retained):
    config = LogConfig.from_properties({"cleanup.policy": given})
    assert (config.cleanup_policy, config.compacted, config.retained) == (policy, compacted, retained)
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize("given", ["", "compact,zap", "Compact", "retain", 1])
def test_an_unknown_cleanup_policy_is_refused_naming_the_choices(given):
    with pytest.raises(InvalidConfig, match=r"cleanup\.policy.*'compact,delete'"):
        LogConfig.from_properties({"cleanup.policy": given})


@pytest.mark.parametrize(("given", "ratio"), [("0.1", 0.1), (0, 0), (1, 1), ("1.0", 1.0), (0.75, 0.75)])
def test_the_dirty_ratio_is_a_fraction(given, ratio):
    assert LogConfig.from_properties({"min.cleanable.dirty.ratio": given}).min_cleanable_dirty_ratio == ratio


@pytest.mark.parametrize("given", ["1.5", -0.1, "half", True, None])
def test_a_dirty_ratio_outside_zero_to_one_is_refused(given):
    with pytest.raises(InvalidConfig, match=r"min\.cleanable\.dirty\.ratio"):
        LogConfig.from_properties({"min.cleanable.dirty.ratio": given})


@pytest.mark.parametrize("given", [True, "true", "TRUE", " false "])
def test_schema_validation_takes_booleans_as_kafka_writes_them(given):
    config = LogConfig.from_properties({"confluent.value.schema.validation": given})
    assert config.value_schema_validation is (str(given).strip().lower() == "true")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("confluent.key.schema.validation", "yes"),
        ("confluent.value.schema.validation", 1),
        (
            "confluent.value.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        ),
    ],
)
def test_a_schema_validation_config_it_cannot_honour_is_refused_by_name(key, value):
    with pytest.raises(InvalidConfig, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})
