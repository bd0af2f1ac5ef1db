"""The options of the ``raftlog`` format, parsed once into typed values (pure, no I/O).

Spark hands options over as a case-insensitive mapping of strings; every error names the option. Names
follow Spark's Kafka source and sink, with ``servers`` (comma-separated HTTP base URLs, tried in turn)
in place of ``kafka.bootstrap.servers``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from raftlog.storage.batch import Compression
from raftlog_spark.errors import OptionError
from raftlog_spark.offsets import (
    EARLIEST,
    LATEST,
    NoneLateEnough,
    Offsets,
    Timestamps,
    parse_spec,
    parse_timestamp,
    parse_timestamps,
)

FetchFormat = Literal["columnar", "json"]
MAX_TRIGGER_DELAY_MS_DEFAULT = 15 * 60 * 1000  # Spark's Kafka source: "15m"
_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

ACCESS_OPTIONS = ("ca", "user", "password", "userToken")  # how the servers are reached: see parse_access
VALUE_OPTIONS = ("valueFormat", "valueSubject")  # typed values under the registry's schemas: parse_value
ValueFormat = Literal["binary", "avro"]
# Confluent's other schema formats, refused by name rather than read as bytes
VALUE_FORMATS_NOT_BUILT = ("json", "jsonschema", "protobuf")
# Every option the format reads; any other is refused by name (Spark's Kafka options this format does
# not have would otherwise be ignored, and a query read other data than asked for, without an error).
READ_OPTIONS = frozenset(
    name.lower()
    for name in (
        "servers", "subscribe", "assign", "subscribePattern", "startingOffsets", "endingOffsets",
        "startingTimestamp", "startingOffsetsByTimestamp", "endingTimestamp", "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
        "maxTriggerDelay", "minPartitions", "failOnDataLoss", "fetchMaxBytes", "fetchFormat",
        "requestTimeoutMs", "includeHeaders", *VALUE_OPTIONS, *ACCESS_OPTIONS,
    )
)  # fmt: skip
WRITE_OPTIONS = frozenset(
    name.lower()
    for name in (
        "servers", "topic", "batchRecords", "batchBytes", "compression", "requestTimeoutMs", "includeHeaders",
        *VALUE_OPTIONS, *ACCESS_OPTIONS,
    )
)  # fmt: skip
SPARK_OPTIONS = frozenset({"path", "checkpointlocation"})  # Spark's own, handed to every source too
# Options of Spark's Kafka source this format has no use for, by their names (Spark lowercases names)
KAFKA_ONLY = {
    name.lower(): (name, why)
    for name, why in (
        ("groupIdPrefix", "reads use no consumer group: progress is in Spark's checkpoint"),
        ("kafkaConsumer.pollTimeoutMs", "use requestTimeoutMs"),
        ("fetchOffset.numRetries", "the client retries on its own within requestTimeoutMs"),
        ("fetchOffset.retryIntervalMs", "the client retries on its own within requestTimeoutMs"),
        ("maxRecordsPerPartition", "not supported; minPartitions splits large ranges"),
        ("kafka.compression.type", "use the option 'compression'"),
    )
}
FETCH_MAX_BYTES_DEFAULT = 1024 * 1024  # larger pages cost the server more per record (GC of big pages)
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
BATCH_RECORDS_DEFAULT = 10_000
BATCH_RECORDS_MAX = 10_000
BATCH_BYTES_DEFAULT = 960 * 1024  # under a topic's default max.message.bytes (1 MiB) with room to spare
CODECS = {codec.name.lower(): codec for codec in Compression}  # Kafka's compression.type names


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Spark passes a CaseInsensitiveDict; a plain dict (unit tests, direct use) is matched ignoring case."""
    if name in options:
        return options[name]
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _int(
    options: Mapping[str, str], name: str, default: int | None, minimum: int, maximum: int
) -> int | None:
    raw = _get(options, name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(name, f"{raw!r} is not an integer") from None
    if not minimum <= value <= maximum:
        raise OptionError(name, f"{value} is outside [{minimum}, {maximum}]")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise OptionError(name, f"{raw!r} is neither 'true' nor 'false'")
    return text == "true"


def check_known(options: Mapping[str, str], known: frozenset[str], what: str) -> None:
    """Refuse an option this format does not read, naming it (first in name order)."""
    for name in sorted(options, key=str.lower):
        lowered = name.lower()
        if lowered in known or lowered in SPARK_OPTIONS:
            continue
        if lowered in KAFKA_ONLY:
            raise OptionError(*KAFKA_ONLY[lowered])
        if lowered.startswith("kafka."):
            raise OptionError(name, "Kafka client settings do not apply: the format talks HTTP to 'servers'")
        raise OptionError(
            name, f"not an option of the raftlog format for {what} (see raftlog_spark/README.md)"
        )
    headers = _get(options, "includeHeaders")
    if headers is not None and headers.strip().lower() != "true":
        raise OptionError("includeHeaders", "records always carry their headers: only 'true'")


def parse_duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """Spark's time strings: a number and a unit (ms, s, m or min, h, d), or a number of ms."""
    raw = _get(options, name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip().lower()
    digits = len(text) - len(text.lstrip("0123456789"))
    number, unit = text[:digits], text[digits:].strip() or "ms"
    if not number or unit not in _DURATION_UNITS_MS:
        raise OptionError(name, f"{raw!r} is not a duration such as 15m, 30s or 500ms")
    return int(number) * _DURATION_UNITS_MS[unit]


def parse_servers(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(options, "servers")
    if raw is None or not raw.strip():
        raise OptionError("servers", "required: comma-separated HTTP base URLs, e.g. http://127.0.0.1:8081")
    servers = []
    for part in raw.split(","):
        url = part.strip().rstrip("/")
        if not url:
            continue
        split = urlsplit(url)
        if split.scheme not in ("http", "https") or not split.hostname or split.path or split.query:
            raise OptionError("servers", f"{part.strip()!r} is not an http(s)://HOST:PORT base URL")
        try:
            split.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise OptionError("servers", f"{part.strip()!r} has a bad port") from None
        servers.append(url)
    if not servers:
        raise OptionError("servers", "no URL given")
    return tuple(servers)


Subscription = dict[str, tuple[int, ...] | None]  # topic -> assigned partitions (None: all of them)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    subscribe = _get(options, "subscribe")
    assign = _get(options, "assign")
    if _get(options, "subscribePattern") is not None:
        raise OptionError("subscribePattern", "not supported; list the topics in 'subscribe'")
    if (subscribe is None) == (assign is None):
        raise OptionError("subscribe", "give exactly one of 'subscribe' (topics) or 'assign' (JSON)")
    if subscribe is not None:
        topics = [t.strip() for t in subscribe.split(",") if t.strip()]
        if not topics:
            raise OptionError("subscribe", "no topic given")
        return dict.fromkeys(topics)
    try:
        value = json.loads(assign or "")
    except ValueError:
        raise OptionError("assign", f'{assign!r} is not JSON like {{"topic": [0, 1]}}') from None
    if not isinstance(value, dict) or not value:
        raise OptionError("assign", f'expected a JSON object like {{"topic": [0, 1]}}, got {assign!r}')
    out: Subscription = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, list) or not all(type(p) is int and p >= 0 for p in partitions):
            raise OptionError("assign", f"topic {topic!r}: expected a list of partition numbers")
        out[topic] = tuple(sorted(set(partitions)))
    return out


def _offsets_option(options: Mapping[str, str], name: str, default: int) -> int | Offsets:
    raw = _get(options, name)
    return default if raw is None else parse_spec(raw, name)


def _timestamps_option(
    options: Mapping[str, str], one: str, per_partition: str
) -> tuple[int | Timestamps | None, str]:
    """Spark's precedence: ``startingTimestamp`` (every partition) over ``startingOffsetsByTimestamp``
    (JSON); the option's name comes along for messages."""
    raw = _get(options, one)
    if raw is not None:
        return parse_timestamp(raw, one), one
    raw = _get(options, per_partition)
    return (None if raw is None else parse_timestamps(raw, per_partition)), per_partition


def _check_topics(spec: int | Offsets, topics: Subscription, name: str) -> None:
    if isinstance(spec, int):
        return
    for topic, partition in spec:
        assigned = topics.get(topic, ())
        if topic not in topics or (assigned is not None and partition not in assigned):
            raise OptionError(name, f"{topic}-{partition} is not subscribed or assigned")


@dataclass(frozen=True, slots=True)
class Access:
    """How the servers are reached: ``ca``, a PEM file of the CA certificates https servers are checked
    against (else the system's roots), and who calls, for a cluster serving with ``--require-auth``: a
    user's name and password (HTTP Basic) or one of its API tokens. The secrets stay out of ``repr``: a
    plan or a log line that shows the options shows no password."""

    ca: str | None = None
    user: tuple[str, str] | None = field(default=None, repr=False)
    user_token: str | None = field(default=None, repr=False)


def parse_access(options: Mapping[str, str], servers: tuple[str, ...]) -> Access:
    ca, user, password, token = (_get(options, name) for name in ACCESS_OPTIONS)
    if ca is not None and not ca.strip():
        raise OptionError("ca", "empty: the path of a PEM file of CA certificates")
    if ca is not None and not any(s.startswith("https://") for s in servers):
        raise OptionError("ca", "only for https:// servers")
    if (user is None) != (password is None):
        raise OptionError("password" if user is None else "user", "'user' and 'password' go together")
    if user is not None and not user.strip():
        raise OptionError("user", "empty")
    if token is not None and user is not None:
        raise OptionError("userToken", "call as 'user' with 'password' or with 'userToken', not both")
    if token is not None and not token.strip():
        raise OptionError("userToken", "empty")
    return Access(
        ca=None if ca is None else ca.strip(),
        user=None if user is None or password is None else (user.strip(), password),
        user_token=None if token is None else token.strip(),
    )


@dataclass(frozen=True, slots=True)
class ValueSpec:
    """What the value column is: ``binary`` (the record's bytes, the default) or ``avro``: typed by the
    registry's Avro schema of ``subject`` (``valueSubject``, else Confluent's TopicNameStrategy:
    ``{topic}-value``), values in Confluent's wire format."""

    format: ValueFormat
    subject: str | None  # avro only


def parse_value(options: Mapping[str, str], topics: list[str], topics_option: str) -> ValueSpec:
    """``valueFormat`` and ``valueSubject``; the default subject needs exactly one topic."""
    raw = (_get(options, "valueFormat") or "binary").strip().lower()
    subject = _get(options, "valueSubject")
    if raw in VALUE_FORMATS_NOT_BUILT:
        raise OptionError(
            "valueFormat",
            f"{raw!r}: {'Protobuf' if raw == 'protobuf' else 'JSON Schema'} values are not built; 'avro' "
            "or 'binary' (decode the bytes yourself)",
        )
    if raw not in ("binary", "avro"):
        raise OptionError("valueFormat", f"{raw!r} is neither 'binary' nor 'avro'")
    if raw == "binary":
        if subject is not None:
            raise OptionError("valueSubject", "only with valueFormat 'avro'")
        return ValueSpec("binary", None)
    if subject is not None:
        if not subject.strip():
            raise OptionError("valueSubject", "empty")
        return ValueSpec("avro", subject.strip())
    if len(topics) != 1:
        raise OptionError(
            "valueFormat",
            f"'avro' types the value by the subject '{{topic}}-value' of one topic; {topics_option} names "
            f"{len(topics)}: give one, or the subject in 'valueSubject'",
        )
    return ValueSpec("avro", f"{topics[0]}-value")


@dataclass(frozen=True, slots=True)
class Reach:
    """How the servers are reached, alone (what ``connect`` needs of any options)."""

    servers: tuple[str, ...]
    access: Access
    request_timeout_ms: int


def parse_reach(options: Mapping[str, str]) -> Reach:
    servers = parse_servers(options)
    timeout_ms = _int(options, "requestTimeoutMs", REQUEST_TIMEOUT_MS_DEFAULT, 100, 3_600_000)
    return Reach(servers, parse_access(options, servers), timeout_ms or REQUEST_TIMEOUT_MS_DEFAULT)


def read_value(options: Mapping[str, str]) -> ValueSpec:
    """The value spec of a read (batch or streaming: a source's ``schema()`` does not know which)."""
    check_known(options, READ_OPTIONS, "reading")
    topics = sorted(parse_subscription(options))
    return parse_value(options, topics, "subscribe" if _get(options, "subscribe") is not None else "assign")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    servers: tuple[str, ...]
    access: Access
    topics: Subscription
    starting: int | Offsets  # EARLIEST, LATEST or explicit offsets
    ending: int | Offsets  # batch only
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None  # streaming: fewer waiting records delay the micro-batch ...
    max_trigger_delay_ms: int  # ... at most this long after the last one
    min_partitions: int | None
    fail_on_data_loss: bool
    fetch_max_bytes: int
    fetch_format: FetchFormat
    request_timeout_ms: int
    # From record timestamps (ms), over ``starting``/``ending`` for the partitions they cover: one time
    # for every partition (``startingTimestamp``) or per partition (``startingOffsetsByTimestamp``); the
    # option's name is kept for messages.
    starting_timestamps: int | Timestamps | None
    starting_timestamps_option: str
    ending_timestamps: int | Timestamps | None  # batch only; a partition with no record that late: its end
    ending_timestamps_option: str
    starting_none_late_enough: NoneLateEnough  # startingOffsetsByTimestampStrategy
    value: ValueSpec = field(default_factory=lambda: ValueSpec("binary", None))


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    check_known(options, READ_OPTIONS, "reading")
    topics = parse_subscription(options)
    starting = _offsets_option(options, "startingOffsets", LATEST if streaming else EARLIEST)
    ending = _offsets_option(options, "endingOffsets", LATEST)
    if streaming and _get(options, "endingOffsets") is not None:
        raise OptionError("endingOffsets", "only for batch reads (spark.read), not streaming")
    starting_timestamps, starting_timestamps_option = _timestamps_option(
        options, "startingTimestamp", "startingOffsetsByTimestamp"
    )
    ending_timestamps, ending_timestamps_option = _timestamps_option(
        options, "endingTimestamp", "endingOffsetsByTimestamp"
    )
    if streaming and ending_timestamps is not None:
        raise OptionError(ending_timestamps_option, "only for batch reads (spark.read), not streaming")
    if (
        isinstance(starting_timestamps, int)
        and isinstance(ending_timestamps, int)
        and ending_timestamps < starting_timestamps
    ):
        raise OptionError(
            "endingTimestamp", f"{ending_timestamps} is before startingTimestamp {starting_timestamps}"
        )
    none_late_enough = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if none_late_enough not in ("error", "latest"):
        raise OptionError(
            "startingOffsetsByTimestampStrategy", f"{none_late_enough!r} is neither 'error' nor 'latest'"
        )
    if not streaming and starting == LATEST and not isinstance(starting_timestamps, int):
        raise OptionError("startingOffsets", "'latest' reads nothing in a batch query; use earliest or JSON")
    if ending == EARLIEST:
        raise OptionError("endingOffsets", "'earliest' reads nothing; use latest or JSON")
    if isinstance(ending, dict) and any(o == EARLIEST for o in ending.values()):
        raise OptionError("endingOffsets", "-2 (earliest) is not allowed as an ending offset")
    _check_topics(starting, topics, "startingOffsets")
    _check_topics(ending, topics, "endingOffsets")
    if starting_timestamps is not None:
        _check_topics(starting_timestamps, topics, starting_timestamps_option)
    if ending_timestamps is not None:
        _check_topics(ending_timestamps, topics, ending_timestamps_option)
    max_per_trigger = _int(options, "maxOffsetsPerTrigger", None, 1, 2**62)
    min_per_trigger = _int(options, "minOffsetsPerTrigger", None, 1, 2**62)
    max_trigger_delay_ms = parse_duration_ms(options, "maxTriggerDelay", MAX_TRIGGER_DELAY_MS_DEFAULT)
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if _get(options, name) is not None and not streaming:
            raise OptionError(name, "only for streaming reads (spark.readStream)")
    if min_per_trigger is not None and max_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise OptionError(
            "minOffsetsPerTrigger", f"{min_per_trigger} is above maxOffsetsPerTrigger {max_per_trigger}"
        )
    fetch_format = (_get(options, "fetchFormat") or "columnar").strip().lower()
    if fetch_format not in ("columnar", "json"):
        raise OptionError("fetchFormat", f"{fetch_format!r} is neither 'columnar' nor 'json'")
    servers = parse_servers(options)
    return ReadOptions(
        servers=servers,
        access=parse_access(options, servers),
        topics=topics,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_trigger_delay_ms,
        min_partitions=_int(options, "minPartitions", None, 1, 1_000_000),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        fetch_max_bytes=_int(options, "fetchMaxBytes", FETCH_MAX_BYTES_DEFAULT, 1, 64 * 1024 * 1024)
        or FETCH_MAX_BYTES_DEFAULT,
        fetch_format="json" if fetch_format == "json" else "columnar",
        request_timeout_ms=_int(options, "requestTimeoutMs", REQUEST_TIMEOUT_MS_DEFAULT, 100, 3_600_000)
        or REQUEST_TIMEOUT_MS_DEFAULT,
        starting_timestamps=starting_timestamps,
        starting_timestamps_option=starting_timestamps_option,
        ending_timestamps=ending_timestamps,
        ending_timestamps_option=ending_timestamps_option,
        starting_none_late_enough="latest" if none_late_enough == "latest" else "error",
        value=read_value(options),
    )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    servers: tuple[str, ...]
    access: Access
    topic: str | None  # overrides the topic column, as in Kafka's sink
    batch_records: int
    batch_bytes: int
    compression: Compression
    request_timeout_ms: int
    value: ValueSpec = field(default_factory=lambda: ValueSpec("binary", None))


def _codec(options: Mapping[str, str]) -> Compression:
    name = (_get(options, "compression") or "none").strip().lower()
    if name not in CODECS:
        raise OptionError("compression", f"{name!r}: use one of {', '.join(CODECS)}")
    return CODECS[name]


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    check_known(options, WRITE_OPTIONS, "writing")
    topic = _get(options, "topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "empty")
    servers = parse_servers(options)
    return WriteOptions(
        servers=servers,
        access=parse_access(options, servers),
        topic=None if topic is None else topic.strip(),
        batch_records=_int(options, "batchRecords", BATCH_RECORDS_DEFAULT, 1, BATCH_RECORDS_MAX)
        or BATCH_RECORDS_DEFAULT,
        batch_bytes=_int(options, "batchBytes", BATCH_BYTES_DEFAULT, 1024, 12 * 1024 * 1024)
        or BATCH_BYTES_DEFAULT,
        compression=_codec(options),
        request_timeout_ms=_int(options, "requestTimeoutMs", REQUEST_TIMEOUT_MS_DEFAULT, 100, 3_600_000)
        or REQUEST_TIMEOUT_MS_DEFAULT,
        value=parse_value(options, [] if topic is None else [topic.strip()], "the option 'topic'"),
    )
