"""The group table's values: a group as the table holds it (``Group``), an HTTP consumer instance
(``ConsumerInstance``, its ``ReadConfig`` and ``InstanceConfig``), a classic group's member as its
coordinator writes it (``ClassicMember``; the coordinator's live one is
``classic.members.ClassicGroupMember``), and the bounds on what the table holds. Immutable, compared whole."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from partitions.groups.assignors import ASSIGNORS, TopicPartition
from partitions.groups.consumer.group import ConsumerGroup
from partitions.groups.errors import InvalidConsumerConfig
from partitions.groups.share.group import ShareMember
from partitions.groups.streams.group import StreamsGroup

SCHEMA_FORMATS = ("avro", "jsonschema", "protobuf")  # records framed under a registered schema, as JSON
FORMATS = ("json", "binary", *SCHEMA_FORMATS)
OFFSET_RESETS = ("earliest", "latest")
SESSION_TIMEOUT_MS_MIN = 1_000
SESSION_TIMEOUT_MS_MAX = 300_000
SESSION_TIMEOUT_MS_DEFAULT = 30_000
FETCH_MIN_BYTES_MAX = 10_000_000  # Confluent's bound of fetch.min.bytes
REQUEST_TIMEOUT_MS_MAX = 60_000  # the longest a records read waits
AUTO_COMMIT_INTERVAL_MS_MAX = 3_600_000
EMPTY_GROUP_RETENTION_MS = 7 * 24 * 3600 * 1000  # Kafka's offsets.retention.minutes: 7 days
# an empty group that never committed an offset is forgotten once it stayed empty this long: Kafka's
# cleanup, every offsets.retention.check.interval.ms (10 min), deletes an empty group without offsets
# (GroupCoordinatorShard.cleanupGroupMetadata), so a console consumer's group does not stay a week
EMPTY_UNCOMMITTED_RETENTION_MS = 10 * 60 * 1000
GROUP_MEMBERS_MAX = 1_000  # Kafka's group.max.size: a Join past it is refused when applied
# What a classic group's metadata may make the table hold: at most ``GROUP_MEMBERS_MAX`` members, each
# member's subscription and assignment at most 1 MiB, all of them together at most 8 MiB. Kafka bounds a
# member's only by the request carrying it (socket.request.max.bytes) and the group's whole record by the
# offsets topic's max.message.bytes (1 MiB by default); a SyncGroup past these bounds is answered
# UNKNOWN_SERVER_ERROR, as Kafka answers a group record too large.
CLASSIC_MEMBER_BYTES_MAX = 1024 * 1024
CLASSIC_GROUP_BYTES_MAX = 8 * 1024 * 1024
SHARE_PROTOCOL_TYPE = "share"  # a share group's ``protocol_type`` in the table
STREAMS_PROTOCOL_TYPE = "streams"  # a streams group's (KIP-1071)
CLASSIC_METADATA_VERSION = 0  # of the command's and the snapshot row's layout; a reader takes extra fields


@dataclass(frozen=True, slots=True)
class ReadConfig:
    """How a member's records reads behave (Confluent's instance configs and Kafka's auto commit)."""

    fetch_min_bytes: int = 1  # a read answers once this much came; -1: at max_bytes or the timeout only
    request_timeout_ms: int = 1_000  # how long a read without ``timeout`` waits (consumer.request.timeout.ms)
    auto_commit: bool = False  # commit the positions of what earlier reads returned, at a later read
    auto_commit_interval_ms: int = 5_000  # at most this often; 0: at every read
    read_committed: bool = False  # isolation.level read_committed: below the LSO, aborted records left out

    def __post_init__(self) -> None:
        bounds = (
            ("fetch.min.bytes", self.fetch_min_bytes, -1, FETCH_MIN_BYTES_MAX),
            ("consumer.request.timeout.ms", self.request_timeout_ms, 0, REQUEST_TIMEOUT_MS_MAX),
            ("auto.commit.interval.ms", self.auto_commit_interval_ms, 0, AUTO_COMMIT_INTERVAL_MS_MAX),
        )
        for name, value, low, high in bounds:
            if type(value) is not int or not low <= value <= high:
                raise InvalidConsumerConfig(f"{name} {value!r}: use an integer from {low} to {high}")
        if type(self.auto_commit) is not bool:
            raise InvalidConsumerConfig(f"auto.commit.enable {self.auto_commit!r}: use true or false")
        if type(self.read_committed) is not bool:
            raise InvalidConsumerConfig(f"read_committed {self.read_committed!r}: use true or false")

    def to_row(self) -> list[Any]:
        row = [self.fetch_min_bytes, self.request_timeout_ms, self.auto_commit, self.auto_commit_interval_ms]
        return [*row, True] if self.read_committed else row  # a row as before transactions when it can be

    @classmethod
    def from_row(cls, row: list[Any]) -> ReadConfig:
        min_bytes, timeout_ms, auto_commit, interval_ms, *rest = row
        committed = bool(rest[0]) if rest else False  # absent: a row from before isolation levels
        return cls(int(min_bytes), int(timeout_ms), bool(auto_commit), int(interval_ms), committed)


DEFAULT_READS = ReadConfig()


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """What a consumer instance is created with (Confluent's instance configs, and the group's assignor
    should its creation make the group); its member checks the rest (``ConsumerInstance``)."""

    format: str = "json"  # one of FORMATS: how its records are rendered
    offset_reset: str = "latest"  # "earliest" | "latest": where to start a partition with no committed offset
    session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT
    assignor: str = "range"
    reads: ReadConfig = DEFAULT_READS

    def __post_init__(self) -> None:
        if self.assignor not in ASSIGNORS:
            raise InvalidConsumerConfig(f"assignor {self.assignor!r}: use one of {sorted(ASSIGNORS)}")


DEFAULT_INSTANCE = InstanceConfig()


@dataclass(frozen=True, slots=True)
class ConsumerInstance:
    instance_id: str
    format: str  # one of FORMATS: how its records are rendered
    offset_reset: str  # "earliest" | "latest": where to start a partition with no committed offset
    session_timeout_ms: int
    joined_ms: int
    topics: tuple[str, ...] = ()
    reads: ReadConfig = DEFAULT_READS
    client_host: str = ""  # the address its creating request came from

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidConsumerConfig(f"format {self.format!r}: use one of {list(FORMATS)}")
        if self.offset_reset not in OFFSET_RESETS:
            raise InvalidConsumerConfig(f"auto.offset.reset {self.offset_reset!r}: use {list(OFFSET_RESETS)}")
        if not SESSION_TIMEOUT_MS_MIN <= self.session_timeout_ms <= SESSION_TIMEOUT_MS_MAX:
            raise InvalidConsumerConfig(
                f"session.timeout.ms {self.session_timeout_ms}: use {SESSION_TIMEOUT_MS_MIN} to "
                f"{SESSION_TIMEOUT_MS_MAX}"
            )

    @classmethod
    def created(
        cls, instance_id: str, config: InstanceConfig, joined_ms: int, client_host: str
    ) -> ConsumerInstance:
        """A consumer instance as it joins, with no topics yet."""
        c = config
        return cls(
            instance_id, c.format, c.offset_reset, c.session_timeout_ms, joined_ms, (), c.reads, client_host
        )


@dataclass(frozen=True, slots=True)
class ClassicMember:
    """A classic group's member as its coordinator writes it (Kafka's ``GroupMetadataValue``'s member)."""

    member_id: str
    instance_id: str | None  # a static member's group.instance.id (KIP-345)
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # its metadata of the group's protocol
    assignment: bytes

    def to_row(self) -> list[Any]:
        return [
            self.member_id, self.instance_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
            self.session_timeout_ms, self.subscription, self.assignment,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> ClassicMember:
        member_id, instance_id, client_id, host, rebalance_ms, session_ms, subscription, assignment = row[:8]
        return cls(
            str(member_id), None if instance_id is None else str(instance_id), str(client_id), str(host),
            int(rebalance_ms), int(session_ms), bytes(subscription), bytes(assignment),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    assignor: str
    generation: int
    members: Mapping[str, ConsumerInstance]
    assignment: Mapping[str, tuple[TopicPartition, ...]]
    partition_counts: Mapping[str, int]  # of the subscribed topics, as of the last rebalance
    changed_ms: int
    # None: members join over HTTP (held above); a string: a group of Kafka clients (its members live in
    # the coordinator's memory), the protocol type they use ("consumer", "connect"...), "" for a group
    # that only committed offsets
    protocol_type: str | None = None
    committed_topics: tuple[str, ...] = ()  # every topic it committed an offset of (sorted)
    # a group of Kafka clients as its coordinator last wrote it (``ClassicGroupMetadata``): the leader
    # and the members of ``generation`` with their assignments; none when it is empty or was written by
    # ``KafkaGeneration``
    classic_leader: str | None = None
    classic_members: tuple[ClassicMember, ...] = ()
    # a consumer protocol group (KIP-848) as its coordinator last wrote it (``ConsumerGroupRecord``)
    consumer: ConsumerGroup | None = None
    # the classic members were written while their coordinator collected joins again (members had left
    # or their sessions expired): a coordinator taking over goes on with that rebalance
    classic_rebalancing: bool = False
    # a share group's members (KIP-932) as its coordinator last wrote them (``ShareGroupRecord``)
    share_members: tuple[ShareMember, ...] = ()
    # a streams group (KIP-1071) as its coordinator last wrote it (``StreamsGroupRecord``)
    streams: StreamsGroup | None = None

    def owner(self, tp: TopicPartition) -> str | None:
        for member, tps in self.assignment.items():
            if tp in tps:
                return member
        return None

    def topics(self) -> list[str]:
        return sorted({t for m in self.members.values() for t in m.topics})

    def offset_topics(self) -> list[str]:
        """The topics whose partitions may hold the group's committed offsets: those it read (subscribed
        to as of its last rebalance) or committed an offset of. Every commit, at either door, records its
        topics before it stores an offset (``GroupCoordinator.record_commit``)."""
        return sorted(set(self.partition_counts) | set(self.committed_topics))


@dataclass(frozen=True, slots=True)
class Recorded:
    """A group as the table of its coordinator partition, led here in ``term``, holds it (None: no
    record of it)."""

    term: int
    group: Group | None
