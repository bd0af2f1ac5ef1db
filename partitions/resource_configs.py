"""Configs of resources other than a topic's log, as Kafka stores them in its metadata and the controller
replicates them here (``controller.resource_configs``): client metrics subscriptions (KIP-714), group
configs (KIP-848, KIP-932), a broker's dynamic replication throttles, the cluster's defaults of topics'
log configs (``CLUSTER_LOG_DEFAULTS``), and a topic's throttled-replica lists. Pure: which keys each kind
has, their types and defaults, Kafka's validation with Kafka's words and error codes, and how
DescribeConfigs describes them.

A *resource* is (kind, name): ``client-metrics`` and a subscription's name; ``group`` and a group id;
``broker`` and a broker id (``""``: the cluster-wide default, Kafka's ``<default>``); ``topic`` and a
topic's name (only the throttled-replica lists live here: the rest of a topic's configs are its log's,
``raftlog.storage.config``). Values are stored as the strings Kafka's clients send.

Errors as Kafka's: ``InvalidConfigRequest`` (INVALID_REQUEST: an unknown client metrics key, an interval
out of bounds, an empty name) and ``InvalidResourceConfig`` (INVALID_CONFIG: a value of the wrong type,
a bound of a group config, a malformed match pattern or replica list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from partitions.errors import InvalidConfigRequest, InvalidResourceConfig
from partitions.names import broker_id
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidConfig

CLIENT_METRICS, GROUP, BROKER, TOPIC = "client-metrics", "group", "broker", "topic"
KINDS = (CLIENT_METRICS, GROUP, BROKER, TOPIC)
INT_MIN, INT_MAX, LONG_MAX = -(2**31), 2**31 - 1, 2**63 - 1

# -- client metrics subscriptions (Kafka's ClientMetricsConfigs) ------------------------------------------
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
INTERVAL_MS_DEFAULT, INTERVAL_MS_MIN, INTERVAL_MS_MAX = 300_000, 100, 3_600_000
MATCH_PARAMS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)

# -- group configs (Kafka's GroupConfig, with its broker's default bounds) ---------------------------------
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
STREAMS_ASSIGNOR_NAME = "streams.assignor.name"
STREAMS_STANDBY_REPLICAS = "streams.num.standby.replicas"
STREAMS_INITIAL_DELAY_MS = "streams.initial.rebalance.delay.ms"
RESETS = ("latest", "earliest")
BY_DURATION = "by_duration"  # KIP-1106: ``by_duration:<ISO-8601 duration>``

# -- replication throttles (Kafka's QuotaConfig) -----------------------------------------------------------
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_REPLICAS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

# -- the log cleaner (Kafka's LogCleaner, reconfigurable while a broker runs) -------------------------------
CLEANER_THREADS = "log.cleaner.threads"
CLEANER_THREADS_DEFAULT = 1  # Kafka's
# raftlog's bound on one node's compaction threads: they share one interpreter, one token bucket (the
# node's --cleaner-rate-mib) and one key map bound, so past a few they clean no faster, only hold more
CLEANER_THREADS_MAX = 16

RESOURCES_MAX = 10_000  # resources with configs in the cluster (each a row of every snapshot)
VALUE_CHARS_MAX = 32_768  # one config's value


@dataclass(frozen=True, slots=True)
class Key:
    """One config of a kind: Kafka's type and its default as Kafka prints it."""

    kind: str  # BOOLEAN, STRING, INT, LONG, LIST
    default: str
    bounds: tuple[int, int | None] | None = None  # a group config's: its broker's min and max (None: no max)
    least: int | None = None  # a group config's: the least its type's validator takes (Kafka's ConfigDef)
    synonym: str | None = None  # a group config's broker config, the default's synonym (None: its own name)
    default_synonym: bool = False  # a broker config of Kafka's KafkaConfig: its default listed as a synonym


# Kafka 4.4's GroupConfig: every config a group may set (its internal ones left out, as Kafka describes
# them), with its type, its broker's default and bounds (GroupCoordinatorConfig, ShareGroupConfig) and the
# broker config its default comes from. Integers: (default, the least their validator takes, the broker's
# min and max); each one's broker config is group.<its name>
_GROUP_INTS: Mapping[str, tuple[int, int, int, int | None]] = {
    "consumer.assignment.interval.ms": (1000, 0, 0, 15_000),
    CONSUMER_HEARTBEAT_INTERVAL_MS: (5000, 1, 5_000, 15_000),
    CONSUMER_SESSION_TIMEOUT_MS: (45000, 1, 45_000, 60_000),
    "share.assignment.interval.ms": (1000, 0, 0, 15_000),
    "share.delivery.count.limit": (5, 2, 2, 10),
    "share.heartbeat.interval.ms": (5000, 1, 5_000, 15_000),
    "share.partition.max.record.locks": (2000, 100, 100, 4_000),
    SHARE_RECORD_LOCK_DURATION_MS: (30000, 1000, 15_000, 60_000),
    "share.session.timeout.ms": (45000, 1, 45_000, 60_000),
    "streams.assignment.interval.ms": (1000, 0, 0, 15_000),
    "streams.heartbeat.interval.ms": (5000, 1, 5_000, 15_000),
    STREAMS_INITIAL_DELAY_MS: (3000, 0, 0, None),
    STREAMS_STANDBY_REPLICAS: (0, 0, 0, 2),
    "streams.session.timeout.ms": (45000, 1, 45_000, 60_000),
}
GROUP_KEYS: Mapping[str, Key] = {
    **{
        name: Key("INT", str(default), (low, high), least, f"group.{name}")
        for name, (default, least, low, high) in _GROUP_INTS.items()
    },
    "errors.deadletterqueue.copy.record.enable": Key("BOOLEAN", "false"),
    "errors.deadletterqueue.topic.name": Key("STRING", ""),
    SHARE_AUTO_OFFSET_RESET: Key("STRING", "latest"),
    "share.isolation.level": Key("STRING", "read_uncommitted"),
    "share.renew.acknowledge.enable": Key("BOOLEAN", "true"),
    STREAMS_ASSIGNOR_NAME: Key("STRING", "sticky", synonym="group.streams.assignors"),
    "streams.rack.aware.assignment.tags": Key("LIST", "", synonym="group.streams.rack.aware.assignment.tags"),
}
STREAMS_ASSIGNORS = ("sticky",)  # Kafka's registered task assignors (group.streams.assignors)

# The cluster's defaults of topics' log configs (Kafka's dynamic broker configs set with ``kafka-configs
# --entity-type brokers --entity-default``): broker config -> the topic config it is the default of. Only
# the cluster's default takes them: every replica of a partition keeps the same records, so a log config
# cannot differ between brokers as Kafka's per-broker ones may.
CLUSTER_LOG_DEFAULTS: Mapping[str, str] = {
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
}
_LOG_DEFAULTS = LogConfig().to_properties()

KEYS: Mapping[str, Mapping[str, Key]] = {
    CLIENT_METRICS: {
        INTERVAL_MS: Key("INT", str(INTERVAL_MS_DEFAULT)),
        MATCH: Key("LIST", ""),
        METRICS: Key("LIST", ""),
    },
    GROUP: GROUP_KEYS,
    BROKER: {
        FOLLOWER_RATE: Key("LONG", str(LONG_MAX)),
        LEADER_RATE: Key("LONG", str(LONG_MAX)),
        ALTER_LOG_DIRS_RATE: Key("LONG", str(LONG_MAX)),
        CLEANER_THREADS: Key("INT", str(CLEANER_THREADS_DEFAULT), default_synonym=True),
        **{
            broker: Key("INT" if topic == "max.message.bytes" else "LONG", str(_LOG_DEFAULTS[topic]))
            for broker, topic in CLUSTER_LOG_DEFAULTS.items()
        },
    },
    TOPIC: {FOLLOWER_REPLICAS: Key("LIST", ""), LEADER_REPLICAS: Key("LIST", "")},
}


def items(value: str) -> list[str]:
    """A LIST value's items as Kafka's ConfigDef parses them: split at commas, trimmed, none if blank."""
    return [] if not value.strip() else [item.strip() for item in value.split(",")]


def _int(name: str, value: str, kind: str) -> int:
    limit_low, limit_high = (INT_MIN, INT_MAX) if kind == "INT" else (-LONG_MAX - 1, LONG_MAX)
    try:
        parsed = int(value.strip())
    except ValueError:
        parsed = None
    if parsed is None or not limit_low <= parsed <= limit_high:
        raise InvalidResourceConfig(
            f"Invalid value {value} for configuration {name}: Not a number of type {kind}"
        )
    return parsed


def validate(
    kind: str,
    name: str,
    after: Mapping[str, str],
    before: Mapping[str, str],
    default: Mapping[str, str] | None = None,
) -> None:
    """Refuse the configs ``after`` of a resource as Kafka's controller refuses them (``before``: what it
    held, which Kafka consults for client metrics match patterns and a broker for its cleaner's threads;
    ``default``: a broker's, the cluster's default broker configs)."""
    if kind not in KEYS:
        raise InvalidConfigRequest(f"unknown resource kind {kind!r}")
    for key, value in after.items():
        if not isinstance(value, str) or len(value) > VALUE_CHARS_MAX:
            raise InvalidResourceConfig(f"{key}: a value of at most {VALUE_CHARS_MAX} characters")
    if kind == CLIENT_METRICS:
        _validate_client_metrics(name, after, before)
    elif kind == GROUP:
        _validate_group(name, after)
    elif kind == BROKER:
        for key, value in after.items():
            if key not in KEYS[BROKER]:
                raise InvalidResourceConfig(
                    f"{key}: not a dynamic broker config of raftlog, whose brokers change only their "
                    f"replication throttles, {CLEANER_THREADS} and the cluster's defaults of topics' "
                    f"{', '.join(CLUSTER_LOG_DEFAULTS)} at run time (docs/kafka-compatibility.md)"
                )
            if key in CLUSTER_LOG_DEFAULTS:
                _check_log_default(name, key, value)
                continue
            if key == CLEANER_THREADS:
                if value != before.get(key):
                    _check_cleaner_threads(value, _setting(before, default or {}, key))
                continue
            if _int(key, value, "LONG") < 0:
                raise InvalidResourceConfig(
                    f"Invalid value {value} for configuration {key}: Value must be at least 0"
                )
        if CLEANER_THREADS in before and CLEANER_THREADS not in after:  # back to the default: still checked
            fallback = (default or {}).get(CLEANER_THREADS, str(CLEANER_THREADS_DEFAULT))
            _check_cleaner_threads(fallback, before[CLEANER_THREADS])
    else:
        for key, value in after.items():
            if key not in KEYS[TOPIC]:
                raise InvalidResourceConfig(f"{key} is not a topic's throttled-replica list")
            _check_replica_list(key, value)


def _check_log_default(name: str, key: str, value: str) -> None:
    if name:
        raise InvalidResourceConfig(
            f"{key} is the cluster's, not broker {name}'s: a partition's replicas keep the same records, so "
            "its log configs cannot differ between brokers (set it with --entity-default)"
        )
    _int(key, value, KEYS[BROKER][key].kind)
    try:
        LogConfig.from_properties({CLUSTER_LOG_DEFAULTS[key]: value})
    except InvalidConfig as error:
        raise InvalidResourceConfig(f"Invalid value {value} for configuration {key}: {error}") from None


def _check_cleaner_threads(value: str, current: str | None) -> None:
    """Kafka's ConfigDef (an INT, at least 0: INVALID_CONFIG), then its LogCleaner's
    ``validateReconfiguration`` against the threads the broker has (``current``: set on it, else on the
    cluster's default; None: Kafka's 1; INVALID_REQUEST, as Kafka's broker answers), then raftlog's bound."""
    threads = _int(CLEANER_THREADS, value, "INT")
    if threads < 0:
        raise InvalidResourceConfig(
            f"Invalid value {value} for configuration {CLEANER_THREADS}: Value must be at least 0"
        )
    now = cleaner_threads_of(current)
    for refused, reason in (
        (threads < 1, "Log cleaner threads should be at least 1"),
        (
            threads < now // 2,
            f"Log cleaner threads cannot be reduced to less than half the current value {now}",
        ),
        (
            threads > now * 2,
            f"Log cleaner threads cannot be increased to more than double the current value {now}",
        ),
    ):
        if refused:  # as Kafka's broker wraps its LogCleaner's refusal (INVALID_REQUEST), word for word
            raise InvalidConfigRequest(
                f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} for configuration "
                "Invalid dynamic configuration"
            )
    if threads > CLEANER_THREADS_MAX:
        raise InvalidResourceConfig(
            f"Invalid value {value} for configuration {CLEANER_THREADS}: raftlog runs at most "
            f"{CLEANER_THREADS_MAX} cleaner threads a node (docs/kafka-compatibility.md)"
        )


def _setting(own: Mapping[str, str], default: Mapping[str, str], key: str) -> str | None:
    return own[key] if key in own else default.get(key)


def broker_setting(configs: Mapping[tuple[str, str], Mapping[str, str]], key: str, broker: int) -> str | None:
    """A broker's dynamic config ``key``: set on it, else on the cluster's default (broker ``""``, Kafka's
    ``<default>``); None: set on neither."""
    return _setting(configs.get((BROKER, str(broker)), {}), configs.get((BROKER, ""), {}), key)


def cleaner_threads(configs: Mapping[tuple[str, str], Mapping[str, str]], node_id: str) -> int:
    """How many threads compact the logs of node ``node_id`` (broker ``broker_id(node_id)``): its
    ``log.cleaner.threads``, else the cluster's default, else Kafka's 1."""
    return cleaner_threads_of(broker_setting(configs, CLEANER_THREADS, broker_id(node_id)))


def cleaner_threads_of(value: str | None) -> int:
    """The threads a stored ``log.cleaner.threads`` gives (None: Kafka's default), within raftlog's bound."""
    if value is None:
        return CLEANER_THREADS_DEFAULT
    try:
        threads = int(value.strip())
    except ValueError:  # refused when set: never stored
        return CLEANER_THREADS_DEFAULT
    return min(max(threads, 1), CLEANER_THREADS_MAX)


def topic_log_defaults(cluster_default: Mapping[str, str]) -> dict[str, str]:
    """The defaults of topics' log configs the cluster's broker default sets (topic config -> value): a
    topic takes each where it sets none of its own."""
    return {
        topic: cluster_default[broker]
        for broker, topic in CLUSTER_LOG_DEFAULTS.items()
        if broker in cluster_default
    }


def _validate_client_metrics(name: str, after: Mapping[str, str], before: Mapping[str, str]) -> None:
    if not name:
        raise InvalidConfigRequest("Subscription name can't be empty")
    for key in after:
        if key not in KEYS[CLIENT_METRICS]:
            raise InvalidConfigRequest(f"Unknown client metrics configuration: {key}")
    for key in (METRICS, MATCH):
        if key in after:
            values = items(after[key])
            if len(set(values)) != len(values):
                raise InvalidResourceConfig(f"Configuration '{key}' values must not be duplicated.")
    if INTERVAL_MS in after:
        interval = _int(INTERVAL_MS, after[INTERVAL_MS], "INT")
        if not INTERVAL_MS_MIN <= interval <= INTERVAL_MS_MAX:
            raise InvalidConfigRequest(
                f"Invalid value {interval} for {INTERVAL_MS}, "
                "interval must be between 100 and 3600000 (1 hour)"
            )
    if MATCH in after and after.get(MATCH) != before.get(MATCH):
        for pattern in items(after[MATCH]):
            param, value = match_pattern(pattern)
            try:
                re.compile(value)
            except re.error as exc:
                raise InvalidResourceConfig(
                    f"Client match pattern `{param}={value}` is not a valid regular expression: {exc}."
                ) from None


def match_pattern(pattern: str) -> tuple[str, str]:
    """A client match pattern's parameter and regular expression (split at its first ``=``)."""
    param, equals, value = pattern.partition("=")
    if not equals or param.strip() not in MATCH_PARAMS:
        raise InvalidResourceConfig(f"Illegal client matching pattern: {pattern}")
    return param.strip(), value.strip()


def _validate_group(name: str, after: Mapping[str, str]) -> None:
    """As Kafka 4.4's GroupConfig: names first, then each value's type and its validator's least (Kafka's
    ConfigException), then the broker's bounds (InvalidConfigurationException), in Kafka's words."""
    if not name:
        raise InvalidConfigRequest("Group name must not be empty")
    keys = KEYS[GROUP]
    for key in after:
        if key not in keys:
            raise InvalidResourceConfig(f"Unknown group config name: {key}")
    for key, value in after.items():
        spec = keys[key]
        if spec.kind == "INT":
            number = _int(key, value, "INT")
            if spec.least is not None and number < spec.least:
                raise InvalidResourceConfig(
                    f"Invalid value {value} for configuration {key}: Value must be at least {spec.least}"
                )
        elif spec.kind == "BOOLEAN" and value.strip().lower() not in ("true", "false"):
            raise InvalidResourceConfig(
                f"Invalid value {value} for configuration {key}: Expected value to be either true or false"
            )
        elif spec.kind == "LIST" and value.strip() and any(not item for item in items(value)):
            raise InvalidResourceConfig(f"Configuration '{key}' values must not be empty.")
    reset = after.get(SHARE_AUTO_OFFSET_RESET)
    if reset is not None:
        try:
            share_reset(reset)
        except ValueError:
            raise InvalidResourceConfig(
                f"Invalid value {reset} for configuration {SHARE_AUTO_OFFSET_RESET}: "
                f"Invalid value `{reset}` for configuration {SHARE_AUTO_OFFSET_RESET}. The value must be "
                "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
            ) from None
    level = after.get("share.isolation.level")
    if level is not None and level not in ("read_committed", "read_uncommitted"):
        raise InvalidResourceConfig(
            f"Invalid value {level} for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted"
        )
    for key, value in after.items():
        bounds = keys[key].bounds
        if bounds is None:
            continue
        number, (low, high) = int(value.strip()), bounds
        if key == STREAMS_STANDBY_REPLICAS and high is not None and number > high:
            raise InvalidResourceConfig(f"{key} must be less than or equal to {high}")
        if number < low or (high is not None and number > high):
            raise InvalidResourceConfig(f"{key} must be in the range {low} to {high} inclusive.")
    assignor = after.get(STREAMS_ASSIGNOR_NAME)
    if assignor is not None and assignor not in STREAMS_ASSIGNORS:
        raise InvalidResourceConfig(
            f"{STREAMS_ASSIGNOR_NAME} '{assignor}' is not a registered task assignor. Registered assignors "
            f"are: [{', '.join(STREAMS_ASSIGNORS)}]."
        )


# Java's Duration.parse: [-+]P[nD][T[nH][nM][n[.n]S]], case-insensitive, each number signed
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def share_reset(value: str) -> tuple[str, int]:
    """A ``share.auto.offset.reset`` as Kafka's ShareGroupAutoOffsetResetStrategy reads it: ``latest`` or
    ``earliest`` (duration 0), or ``by_duration`` and its ISO-8601 duration in ms (a share group new to a
    partition starts at the first record at or after now minus it). ValueError with Kafka's reason when
    it is none of them."""
    word = value.strip()
    if word.lower() in RESETS:
        return word.lower(), 0
    if word == BY_DURATION:
        raise ValueError("<:duration> part is missing in by_duration auto offset reset strategy.")
    if not word.startswith(BY_DURATION + ":"):
        raise ValueError(f"Unknown auto offset reset strategy: {value}")
    nanos = _iso_duration_nanos(word[len(BY_DURATION) + 1 :])
    if nanos is None:
        raise ValueError("Unable to parse duration string in by_duration offset reset strategy.")
    if nanos < 0:
        raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
    return BY_DURATION, nanos // 1_000_000


def _iso_duration_nanos(text: str) -> int | None:
    """An ISO-8601 duration's nanoseconds as Java's ``Duration.parse`` reads it; None when it does not
    (no section, a ``T`` without a time section, a number past a long's seconds)."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None or (match.group(3) or "").upper() == "T":
        return None
    negate, days, _, hours, minutes, seconds, fraction = match.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        return None
    total = 0
    for number, scale in ((days, 86_400), (hours, 3_600), (minutes, 60), (seconds, 1)):
        part = 0 if number is None else int(number) * scale
        total += part
        if not -LONG_MAX - 1 <= part <= LONG_MAX or not -LONG_MAX - 1 <= total <= LONG_MAX:
            return None
    nanos = int((fraction or "").ljust(9, "0")) * (-1 if (seconds or "").startswith("-") else 1)
    total_nanos = total * 1_000_000_000 + nanos
    return -total_nanos if negate == "-" else total_nanos


def _check_replica_list(key: str, value: str) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs."""
    listed = items(value)
    if listed == ["*"] or all(re.fullmatch(r"\d+:\d+", entry) for entry in listed):
        return
    raise InvalidResourceConfig(
        f"Invalid value {value} for configuration {key}: {key} must be the literal '*' or a list of "
        "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


# -- how a resource's configs are described -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Described:
    """One config as DescribeConfigs describes it: ``source`` is Kafka's ConfigSource name."""

    name: str
    value: str
    kind: str
    source: str
    synonyms: tuple[tuple[str, str, str], ...]  # (name, value, source)

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


SET_SOURCE = {
    CLIENT_METRICS: "CLIENT_METRICS_CONFIG",
    GROUP: "GROUP_CONFIG",
    TOPIC: "DYNAMIC_TOPIC_CONFIG",
}


def describe(
    kind: str,
    stored: Mapping[str, str],
    keys: tuple[str, ...] | None = None,
    default: Mapping[str, str] | None = None,
) -> list[Described]:
    """Every config of a resource of ``kind`` with ``stored`` set on it, in name order (``keys``: only
    those). A broker's: set on it (DYNAMIC_BROKER_CONFIG), else on the cluster's default
    (``default``: DYNAMIC_DEFAULT_BROKER_CONFIG), else Kafka's default."""
    entries = []
    for name, key in sorted(KEYS[kind].items()):
        if keys is not None and name not in keys:
            continue
        synonyms: list[tuple[str, str, str]] = []
        if kind == BROKER:
            if name in stored:
                synonyms.append((name, stored[name], "DYNAMIC_BROKER_CONFIG"))
            if default is not None and name in default:
                synonyms.append((name, default[name], "DYNAMIC_DEFAULT_BROKER_CONFIG"))
            value, source = (synonyms[0][1], synonyms[0][2]) if synonyms else (key.default, "DEFAULT_CONFIG")
            if key.default_synonym:
                synonyms.append((name, key.default, "DEFAULT_CONFIG"))
        elif kind == GROUP:  # Kafka 4.4: the value set on the group, then the broker's default
            if name in stored:
                synonyms.append((name, stored[name], SET_SOURCE[kind]))
            synonyms.append((key.synonym or name, key.default, "DEFAULT_CONFIG"))
            value, source = synonyms[0][1], ("DEFAULT_CONFIG" if name not in stored else SET_SOURCE[kind])
        else:  # the one synonym Kafka lists: the config itself, where its value comes from
            value, source = (
                (stored[name], SET_SOURCE[kind]) if name in stored else (key.default, "DEFAULT_CONFIG")
            )
            synonyms.append((name, value, source))
        entries.append(Described(name, _canonical(key.kind, value), key.kind, source, tuple(synonyms)))
    return entries


def _canonical(kind: str, value: str) -> str:
    """A value as Kafka prints it back: a list's items joined by commas, a number trimmed."""
    if kind == "LIST":
        return ",".join(items(value))
    return value.strip() if kind in ("INT", "LONG") else value


def value_of(kind: str, stored: Mapping[str, str], name: str) -> str:
    """A config's effective value (the stored one, else Kafka's default)."""
    return _canonical(KEYS[kind][name].kind, stored.get(name, KEYS[kind][name].default))


def group_settings(stored: Mapping[str, str]) -> tuple[str, int]:
    """A share group's ``share.auto.offset.reset`` and ``share.record.lock.duration.ms``."""
    return (
        value_of(GROUP, stored, SHARE_AUTO_OFFSET_RESET).lower(),
        int(value_of(GROUP, stored, SHARE_RECORD_LOCK_DURATION_MS)),
    )


def consumer_timeouts(stored: Mapping[str, str], session_ms: int, heartbeat_ms: int) -> tuple[int, int]:
    """A consumer group's session timeout and heartbeat interval (Kafka's GroupMetadataManager
    ``consumerGroupSessionTimeoutMs``/``consumerGroupHeartbeatIntervalMs``): its
    ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` when set, else the node's
    (``session_ms``, ``heartbeat_ms``: Kafka's ``group.consumer.*`` broker configs)."""
    return (
        int(value_of(GROUP, stored, CONSUMER_SESSION_TIMEOUT_MS))
        if CONSUMER_SESSION_TIMEOUT_MS in stored
        else session_ms,
        int(value_of(GROUP, stored, CONSUMER_HEARTBEAT_INTERVAL_MS))
        if CONSUMER_HEARTBEAT_INTERVAL_MS in stored
        else heartbeat_ms,
    )


def streams_settings(stored: Mapping[str, str]) -> tuple[int, int, int]:
    """A streams group's session timeout, heartbeat interval (ms) and standby replicas (Kafka's
    ``streamsGroupSessionTimeoutMs``, ``streamsGroupHeartbeatIntervalMs``, ``streams.num.standby.replicas``
    of ``streamsGroupAssignmentConfigs``): the group's configs, else their defaults (Kafka's
    ``group.streams.*`` broker configs' defaults)."""
    return (
        int(value_of(GROUP, stored, "streams.session.timeout.ms")),
        int(value_of(GROUP, stored, "streams.heartbeat.interval.ms")),
        int(value_of(GROUP, stored, STREAMS_STANDBY_REPLICAS)),
    )


def streams_initial_delay_ms(stored: Mapping[str, str]) -> int:
    """How long a streams group that a member joined empty waits before its first assignment, so that the
    application's other instances join first (Kafka's ``streamsGroupInitialRebalanceDelayMs``: the group's
    config, else ``group.streams.initial.rebalance.delay.ms``, 3 s)."""
    return int(value_of(GROUP, stored, STREAMS_INITIAL_DELAY_MS))


def lookup(resources: Mapping[tuple[str, str], Mapping[str, str]]) -> Callable[[str, str], Mapping[str, str]]:
    """``(kind, name) -> configs`` (empty when none are set)."""
    return lambda kind, name: resources.get((kind, name), {})
