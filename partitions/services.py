"""What a node offers its front doors and its peers: a few narrow protocols and their result types (pure).

A front door (the HTTP API, and any other protocol served at the edge) asks a node only through these:

- ``MetadataView``: what this node knows right now (topics, leaders, nodes, failed replicas, metrics),
  answered locally, never waiting;
- ``DataService``: records in and out of partitions (produce, fetch, offsets, consumer offsets);
- ``AdminService``: the controller's metadata operations and a partition's state and leadership;
- ``GroupService``: consumer groups, served by each group's coordinator (a member's records are read by
  the node it called, from each partition's leader, between ``begin_read`` and ``end_read``);
- ``PeerService``: what only other nodes ask (catch-up batches, leadership claims, failed replicas,
  controller metadata, a partition leader's membership changes).

Every service method is async. Each has two implementations behind the same protocol: the node's local
one, which serves what this node can and raises ``NotLeader(leader_hint)`` / ``NoLeader`` for what another
node must serve, and the cluster-wide one (``partitions.cluster``), which runs the local one or, on
``NotLeader``, the same call on the node the hint names, through the peer client. Front doors use the
cluster-wide ones; the server side of peer calls uses the local ones. Methods raise the typed errors of
``raftlog``/``partitions``, mapped to a protocol's answers once, at the edge.

A method declared ``@peer`` (``partitions.peer_ops``) is a peer operation: that one declaration gives
its endpoint on every node and the stub that calls it on another (``partitions.peer_client``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

# What a front door names besides the protocols, each defined where it belongs and exported here (with
# ``partitions.errors`` and ``partitions.names`` these are all it may import of partitions/): the types
# of the answers below, the limits of what the services accept, and the pure rules a front door applies
# itself (a topic's configs after a change; a user's SCRAM credentials, made where the password enters;
# the ACLs' model and who they allow what; a user's API token, made where the request enters, and the
# check of one a request presents).
from partitions.acls import CLUSTER_NAME as CLUSTER_NAME
from partitions.acls import AclBinding as AclBinding
from partitions.acls import AclFilter as AclFilter
from partitions.acls import AclOperation as AclOperation
from partitions.acls import Authorizer as Authorizer
from partitions.acls import Authorizers as Authorizers
from partitions.acls import InvalidAcl as InvalidAcl
from partitions.acls import PatternType as PatternType
from partitions.acls import Permission as Permission
from partitions.acls import ResourceType as ResourceType
from partitions.acls import client_host as client_host
from partitions.acls import select as select
from partitions.controller import TopicMetadata as TopicMetadata
from partitions.controller import merge_configs as merge_configs
from partitions.controller_members import ControllerMembers as ControllerMembers
from partitions.groups.assignors import ASSIGNORS as ASSIGNORS
from partitions.groups.assignors import TopicPartition as TopicPartition
from partitions.groups.coordinator import SUBSCRIBED_TOPICS_MAX as SUBSCRIBED_TOPICS_MAX
from partitions.groups.state import AUTO_COMMIT_INTERVAL_MS_MAX as AUTO_COMMIT_INTERVAL_MS_MAX
from partitions.groups.state import DEFAULT_READS as DEFAULT_READS
from partitions.groups.state import FETCH_MIN_BYTES_MAX as FETCH_MIN_BYTES_MAX
from partitions.groups.state import REQUEST_TIMEOUT_MS_MAX as REQUEST_TIMEOUT_MS_MAX
from partitions.groups.state import SESSION_TIMEOUT_MS_DEFAULT as SESSION_TIMEOUT_MS_DEFAULT
from partitions.groups.state import SESSION_TIMEOUT_MS_MAX as SESSION_TIMEOUT_MS_MAX
from partitions.groups.state import SESSION_TIMEOUT_MS_MIN as SESSION_TIMEOUT_MS_MIN
from partitions.groups.state import ReadConfig as ReadConfig
from partitions.login_failures import LoginFailures as LoginFailures
from partitions.login_failures import LoginLimits as LoginLimits
from partitions.peer_ops import peer, routed
from partitions.reconfigure import MemberView
from partitions.reconfigure import MoveProgress as MoveProgress
from partitions.replica_failures import ReplicaFailure as ReplicaFailure
from partitions.tokens import TOKEN_DESCRIPTION_BYTES_MAX as TOKEN_DESCRIPTION_BYTES_MAX
from partitions.tokens import TOKEN_LIFETIME_MS_MAX as TOKEN_LIFETIME_MS_MAX
from partitions.tokens import ApiToken as ApiToken
from partitions.tokens import check_token as check_token
from partitions.tokens import check_token_description as check_token_description
from partitions.tokens import check_token_id as check_token_id
from partitions.tokens import is_token as is_token
from partitions.tokens import is_users_token as is_users_token
from partitions.tokens import issue_token as issue_token
from partitions.tokens import token_expiry as token_expiry
from partitions.users import ITERATIONS_DEFAULT as ITERATIONS_DEFAULT
from partitions.users import MECHANISMS as MECHANISMS
from partitions.users import ScramCredential as ScramCredential
from partitions.users import Verifier as Verifier
from partitions.users import check_password as check_password
from partitions.users import credential_from_salted_password as credential_from_salted_password
from partitions.users import make_credential as make_credential
from raftlog.histogram import HistogramSnapshot
from raftlog.storage.batch import ProducerRecord

T = TypeVar("T")

# -- results -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Served(Generic[T]):
    """A cluster-wide call's result and the node that served it (a partition call: the partition's
    leader)."""

    value: T
    node: str


@dataclass(frozen=True, slots=True)
class ProduceResult:
    partition: int
    base_offset: int
    end_offset: int  # offset after the last record: the records got base_offset .. end_offset - 1
    duplicate: bool = False
    log_append_time_ms: int | None = None  # a LogAppendTime topic's stamp (a duplicate's: its first)
    log_start_offset: int = -1  # the partition's log start offset when answered (Kafka's answer has it)


@dataclass(frozen=True, slots=True)
class FetchedBatches:
    """Committed batches holding ``offset`` onwards, as stored (CRC-checked, not decoded): the first may
    start before the offset asked for, as in Kafka; the reader skips those records."""

    data: bytes
    high_watermark: int  # the partition's end when read: the next offset to be committed
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int  # "beginning_offset"
    high_watermark: int  # "end_offset": the next offset to be committed


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """The first record at or after a timestamp: its offset and its own timestamp (Kafka's ListOffsets)."""

    offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ReplicaState:
    node: str
    role: str  # "leader" | "follower" | "unknown" | "failed" (cannot open or replay: see ``error``)
    match_offset: int | None = None  # leader's view, in Raft indexes
    lag: int | None = None
    in_sync: bool | None = None  # None: unknown (only the leader knows; asked where no leader is known)
    error: str | None = None  # why a failed replica cannot open or replay


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: str | None
    term: int | None  # None (and the offsets too): asked of a failed replica while no leader is known
    high_watermark: int | None
    log_start_offset: int | None
    replicas: list[ReplicaState] = field(default_factory=list)
    move: MoveProgress | None = None  # a replica move in progress


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: str
    http: str  # base URL, e.g. http://127.0.0.1:8081
    state: str  # "alive" | "suspect" | "dead" | "left"
    incarnation: int = 0
    leader_of: int = 0
    maintenance: bool = False  # drained of leadership until cleared
    decommissioning: bool = False  # its replicas are moving elsewhere
    disk_used_bytes: int | None = None  # under its data dir, as it last gossiped
    disk_free_bytes: int | None = None
    disk_full: bool = False  # its writes are refused for want of room (raftlog.storage.space)


@dataclass(frozen=True, slots=True)
class MoveState:
    """A partition's replicas as the controller counts them, and its move in progress (None: none)."""

    topic: str
    partition: int
    replicas: list[str]
    move: MoveProgress | None


@dataclass(frozen=True, slots=True)
class ControllerSnapshot:
    """The controller's applied metadata, for a node outside the controller group."""

    leader: str
    leader_http: str
    applied_index: int
    snapshot: bytes | None  # None: still at the applied index the caller knows


@dataclass(frozen=True, slots=True)
class Claims:
    """A node's leadership claims (Raft group -> term) and their version, as it gossips them."""

    node: str
    version: int
    claims: dict[str, int]


@dataclass(frozen=True, slots=True)
class Failures:
    """A node's replicas that cannot open or replay, with the digest its gossip carries."""

    node: str
    digest: int
    failures: tuple[ReplicaFailure, ...]


@dataclass(frozen=True, slots=True)
class ConsumerCreated:
    instance_id: str
    coordinator: str  # the node serving the group: where the instance's requests go best


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """A member's read as its coordinator grants it (``GroupService.begin_read``): the node the member
    called reads the partitions from their leaders, then reports with ``end_read``."""

    read_id: int
    format: str  # "json" | "binary": the member's
    generation: int
    assigned: tuple[TopicPartition, ...]
    positions: dict[TopicPartition, int]  # assigned partitions with a position (the others: committed)
    offset_reset: str  # "earliest" | "latest": where a partition without a committed offset starts
    fetch_min_bytes: int  # -1: as many as the read may return
    wait_ms: int  # how long the read may still wait for records


@dataclass(frozen=True, slots=True)
class ReadEnd:
    """What ``end_read`` kept: the partitions whose positions moved (still the member's, so their records
    may be handed out) and the group's generation now."""

    kept: tuple[TopicPartition, ...]
    generation: int


@dataclass(frozen=True, slots=True)
class FetchedPart:
    """Batches of one assigned partition, from ``offset`` (records before it are skipped by the reader)."""

    tp: TopicPartition
    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ConsumerRecords:
    """What a member's fetch got: batches per partition, in partition order, and how to render them."""

    format: str  # "json" | "binary": the member's
    generation: int
    parts: tuple[FetchedPart, ...]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    tp: TopicPartition
    offset: int


@dataclass(frozen=True, slots=True)
class MemberPartition:
    tp: TopicPartition
    position: int | None
    committed_offset: int | None
    end_offset: int
    lag: int | None  # end offset - committed offset; None while nothing is committed


@dataclass(frozen=True, slots=True)
class MemberDescription:
    instance_id: str  # a Kafka client's member id
    topics: tuple[str, ...]
    partitions: tuple[MemberPartition, ...]
    client_id: str = ""  # a Kafka client's client.id (an HTTP member: its instance id)
    client_host: str = ""  # the address the member's client came from


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    generation: int
    assignor: str  # of a Kafka group: the protocol its members chose (range, cooperative-sticky...)
    members: int
    coordinator_partition: int
    state: str = "Empty"  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable
    protocol_type: str = "consumer"  # Kafka's: consumer (HTTP groups too), connect..., "" offsets only
    door: str | None = None  # how its members join: "http", "kafka"; None while it has none


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    group: str
    offsets_deleted: int  # partitions whose committed offset of the group was deleted


@dataclass(frozen=True, slots=True)
class GroupDescription:
    summary: GroupSummary
    members: tuple[MemberDescription, ...]
    lag: int
    unassigned: tuple[MemberPartition, ...] = ()  # partitions of its topics no member holds (an empty group)


RESULT_TYPES: tuple[type, ...] = (
    ProduceResult,
    FetchedBatches,
    PartitionOffsets,
    TimestampOffset,
    ReplicaState,
    PartitionState,
    NodeInfo,
    MoveState,
    ControllerSnapshot,
    Claims,
    Failures,
    ConsumerCreated,
    ReadConfig,
    Assignment,
    ReadPlan,
    ReadEnd,
    CommittedOffset,
    MemberPartition,
    MemberDescription,
    GroupSummary,
    GroupDescription,
    GroupDeleted,
    TopicPartition,
    TopicMetadata,
    MoveProgress,
    MemberView,
    ControllerMembers,
    ReplicaFailure,
    ScramCredential,
    AclBinding,
    AclFilter,
    ApiToken,
)


# -- protocols -----------------------------------------------------------------------------------------


class MetadataView(Protocol):
    """What this node knows right now; never waits, never asks another node."""

    @property
    def node_id(self) -> str: ...

    def topics(self) -> list[str]: ...

    def topic(self, name: str) -> TopicMetadata:
        """Raises UnknownTopic (this node may not have learned a new topic yet: ``AdminService.topic``
        asks the controller)."""
        ...

    def controller(self) -> str | None:
        """The controller leader, None while unknown (or not yet able to answer for topics)."""
        ...

    def known_leader(self, topic: str, partition: int) -> str | None:
        """The leader as far as this node knows it (its replica's Raft status, else gossiped claims),
        never a guess; None when no leader is known. A replica that cannot open or replay leads nothing."""
        ...

    def leader_hint(self, topic: str, partition: int) -> str | None:
        """Best guess of a partition's leader, for routing."""
        ...

    def http_address(self, node_id: str) -> str | None:
        """Base URL of a node's HTTP API."""
        ...

    def kafka_address(self, node_id: str) -> str | None:
        """HOST:PORT of a node's Kafka listener as clients reach it; None: it has none (or not heard)."""
        ...

    def nodes(self) -> list[NodeInfo]: ...

    def moves(self) -> list[MoveState]:
        """The partitions moving, as this node's metadata says."""
        ...

    def failed_replicas(self) -> list[ReplicaFailure]:
        """Every replica known to be unable to open or replay: this node's and those its live peers
        gossip."""
        ...

    def users(self) -> Mapping[str, tuple[ScramCredential, ...]]:
        """The users and their SCRAM credentials as this node's controller metadata has them."""
        ...

    def acls(self) -> tuple[AclBinding, ...]:
        """The ACLs as this node's controller metadata has them: sorted, the same tuple until they
        change."""
        ...

    def tokens(self) -> Mapping[str, ApiToken]:
        """The users' API tokens by id as this node's controller metadata has them (hashes, never a
        secret)."""
        ...

    def metrics(self) -> dict[str, float]:
        """Flat name -> value, exported by /metrics in Prometheus text format."""
        ...

    def histograms(self) -> dict[str, HistogramSnapshot]:
        """Latency histograms by name (seconds), exported by /metrics."""
        ...


class DataService(Protocol):
    @routed(topic_arg="topic")
    async def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[ProducerRecord],
        producer_id: int | None,
        sequence: int | None,
        timeout_ms: int,
    ) -> ProduceResult:
        """Append records as one batch, committed by a majority (acks=all). Raises UnknownTopic,
        UnknownPartition, RecordTooLarge, SequenceTooOld, NotLeader/NoLeader, OutcomeUnknown."""
        ...

    @peer(
        "Append a record batch on the partition's leader",
        write=True,
        wait_arg="timeout_ms",
        topic_arg="topic",
    )
    async def produce_batch(self, topic: str, partition: int, batch: bytes, timeout_ms: int) -> ProduceResult:
        """Append a record batch the producer encoded (base offset 0, term 0), checked before it is
        replicated (``InvalidRecord`` names what is malformed); an idempotent one may also be refused
        ``SequenceTooOld``, ``ProducerFenced`` (an older epoch) or ``OutOfOrderSequence``."""
        ...

    @peer(
        "Committed batches from an offset (long poll) on the leader", wait_arg="timeout_ms", topic_arg="topic"
    )
    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        """The committed batches holding ``offset`` onwards (at least one if any, within ``max_bytes``),
        waiting up to ``timeout_ms`` for one when none is there. Raises OffsetOutOfRange, NotLeader..."""
        ...

    @peer("A partition's log start offset and high watermark, from its leader", topic_arg="topic")
    async def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    @peer("The first offset at or after a timestamp, from the leader", topic_arg="topic")
    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        """The first committed record whose timestamp is >= ``timestamp_ms``; None when none is."""
        ...

    @peer(
        "Store a consumer group's offset on the partition's leader",
        write=True,
        wait_arg="timeout_ms",
        topic_arg="topic",
    )
    async def commit_offset(
        self, group: str, topic: str, partition: int, offset: int, reset: bool, timeout_ms: int
    ) -> int:
        """Store a consumer group's next offset to read; returns the stored value (never lower unless
        ``reset``)."""
        ...

    @peer("A consumer group's committed offset, from the partition's leader", topic_arg="topic")
    async def committed_offset(self, group: str, topic: str, partition: int) -> int | None: ...

    @peer(
        "Delete a consumer group's offset on the partition's leader",
        write=True,
        wait_arg="timeout_ms",
        topic_arg="topic",
    )
    async def delete_offset(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        """Delete a group's committed offset of the partition (its group was deleted); whether it had
        one."""
        ...


class AdminService(Protocol):
    """Controller operations run on the controller leader, partition operations on the partition's
    leader; the local implementation raises NotLeader elsewhere."""

    @peer("A topic's metadata, from the controller leader", topic_arg="name")
    async def topic(self, name: str) -> TopicMetadata:
        """A topic's metadata as the controller leader has it (this node's, when it knows the topic)."""
        ...

    @peer("Create a topic on the controller leader", write=True)
    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> TopicMetadata:
        """Raises TopicExists, InvalidName, InvalidTopic, InvalidConfig, PlacementImpossible,
        CapacityExceeded."""
        ...

    @peer("Delete a topic on the controller leader", write=True, topic_arg="name")
    async def delete_topic(self, name: str) -> None: ...

    @peer("Change a topic's configs on the controller leader", write=True, topic_arg="name")
    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        """Merge ``configs`` into a topic's (a None value removes a property: back to its default);
        replicas apply them live. Raises InvalidConfig, UnknownTopic."""
        ...

    @peer("Start a replica move on the controller leader", write=True, topic_arg="topic")
    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        """Start moving a partition to ``replicas`` (checked on the controller leader: a list of node
        ids). Raises UnknownNode, InvalidReassignment, ReassignmentInProgress, CapacityExceeded; nothing
        changes when it raises."""
        ...

    @peer("A partition's replicas and move in progress, from the controller leader", topic_arg="topic")
    async def move_state(self, topic: str, partition: int) -> MoveState:
        """The replicas and the move in progress, as the controller leader (which applied every step)
        sees them."""
        ...

    @peer("Cancel a replica move on the controller leader", write=True, topic_arg="topic")
    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        """Turn a move back to its original replica set. Raises NoReassignment."""
        ...

    @peer("Mark a node decommissioning or in maintenance", write=True)
    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        """``flag``: "decommissioning" or "maintenance". Raises UnknownNode, DecommissionImpossible."""
        ...

    @peer("A decommission's progress, from the controller leader")
    async def decommission_status(self, node_id: str) -> dict[str, Any]: ...

    @peer("The controller group's members, from its leader")
    async def controller_members(self) -> ControllerMembers:
        """The controller group (leader, voters, learners joining and their progress), from its leader."""
        ...

    @peer("Add a node to the controller group, on its leader", write=True)
    async def add_controller_voter(self, node_id: str) -> ControllerMembers:
        """Start adding a node to the controller group: a learner now, a voter once caught up. Raises
        UnknownNode, ControllerChangeRefused."""
        ...

    @peer("Remove a node from the controller group, on its leader", write=True)
    async def remove_controller_voter(self, node_id: str) -> ControllerMembers:
        """Remove a node from the controller group (a learner: cancel its add); a leader hands over
        first. Raises UnknownNode, ControllerChangeRefused."""
        ...

    @peer("Create a user or set its credentials on the controller leader", write=True)
    async def set_user(self, name: str, credentials: list[ScramCredential]) -> list[str]:
        """Create a user or replace its credentials (made where the password entered: it never travels
        on); its mechanisms. Raises InvalidName, InvalidCommand."""
        ...

    @peer("Delete a user on the controller leader", write=True)
    async def delete_user(self, name: str) -> None:
        """Raises UnknownUser."""
        ...

    @peer("Change some of a user's credentials on the controller leader", write=True)
    async def alter_user(
        self, name: str, upsertions: list[ScramCredential], deletions: list[str]
    ) -> list[str]:
        """Remove the credentials of the mechanisms in ``deletions`` and add or replace ``upsertions``, in
        one change (a user left with none is deleted); its mechanisms now. Raises UnknownCredential (a
        deletion of a credential the user does not have), InvalidName, InvalidCommand."""
        ...

    @peer("Add ACLs on the controller leader", write=True)
    async def create_acls(self, bindings: list[AclBinding]) -> list[AclBinding]:
        """Add ACLs in one controller change; those that were not there before (an ACL that exists is no
        error). Raises InvalidAcl (too many: in the change, or in the cluster), nothing added."""
        ...

    @peer("Remove the ACLs filters match on the controller leader", write=True)
    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove every ACL a filter matches, in one controller change; what each filter removed, in
        order. Raises InvalidAcl (no filter, or too many)."""
        ...

    @peer("Add a user's API token on the controller leader", write=True)
    async def create_token(self, token: ApiToken) -> ApiToken:
        """Add a user's API token as made where the request entered (``issue_token``: its secret never
        travels on). Raises UnknownUser, TooManyTokens (per user, or in the cluster), nothing added."""
        ...

    @peer("Revoke a user's API token on the controller leader", write=True)
    async def delete_token(self, user: str, token_id: str) -> ApiToken:
        """Revoke a user's token; the token revoked. Raises UnknownToken."""
        ...

    @peer("A partition's state as its leader sees it", topic_arg="topic", waits_for_leader=False)
    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        """The leader's view (match offsets, lag, in sync); NotLeader names the leader elsewhere."""
        ...

    @peer(
        "Move a partition's leadership, on its leader", write=True, wait_arg="timeout_ms", topic_arg="topic"
    )
    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> str | None:
        """Move leadership to ``target`` (or the most caught-up replica); the leader seen to take over."""
        ...


class GroupService(Protocol):
    """Consumer groups (Confluent REST v2 instances); every call is served by the group's coordinator."""

    @peer("Create a consumer instance on the group's coordinator", write=True)
    async def create_instance(
        self,
        group: str,
        name: str | None,
        format: str,
        offset_reset: str,
        session_timeout_ms: int,
        assignor: str,
        reads: ReadConfig,
        client_host: str = "",
    ) -> ConsumerCreated: ...

    @peer("Remove a consumer instance on the group's coordinator", write=True)
    async def delete_instance(self, group: str, instance: str) -> None: ...

    @peer("Subscribe a consumer instance (rebalances)", write=True)
    async def subscribe(self, group: str, instance: str, topics: list[str]) -> None: ...

    @peer("A consumer instance's topics")
    async def subscription(self, group: str, instance: str) -> list[str]: ...

    @peer("A consumer instance's partitions and the group's generation")
    async def assignment(self, group: str, instance: str) -> Assignment:
        """A heartbeat: the partitions assigned now, rebalancing first if a subscribed topic changed."""
        ...

    @peer("Set a consumer instance's positions")
    async def seek(self, group: str, instance: str, offsets: dict[TopicPartition, int]) -> None: ...

    @peer("Set a consumer instance's positions to its partitions' ends")
    async def seek_to(self, group: str, instance: str, partitions: list[TopicPartition], end: bool) -> None:
        """Positions at the partitions' beginnings (``end`` False) or ends."""
        ...

    @peer("Set a consumer instance's positions by record timestamps")
    async def seek_to_times(self, group: str, instance: str, times: dict[TopicPartition, int]) -> None:
        """Positions at the first record of each partition whose timestamp is at or after the time given
        (ms since the epoch), or at its end when none is that late (Kafka's ``offsetsForTimes``)."""
        ...

    @peer(
        "Grant a consumer instance's read (waits for an assignment)",
        wait_arg="timeout_ms",
        wait_unset_ms=REQUEST_TIMEOUT_MS_MAX,
    )
    async def begin_read(
        self,
        group: str,
        instance: str,
        timeout_ms: int | None,
        generation: int | None,
        format: str | None,
    ) -> ReadPlan:
        """A heartbeat, then what the member may read and for how long (``timeout_ms``, None: the
        member's ``consumer.request.timeout.ms``); with nothing assigned yet, waits within that time for
        a rebalance to assign something. The member stays alive until ``end_read`` or the plan's
        deadline. Raises StaleGeneration when ``generation`` is old, ConsumerFormatMismatch when
        ``format`` is not the member's, before anything is read."""
        ...

    @peer("A consumer instance's read ended: move its positions")
    async def end_read(
        self,
        group: str,
        instance: str,
        read_id: int,
        positions: dict[TopicPartition, int],
        end_offsets: dict[TopicPartition, int],
    ) -> ReadEnd:
        """The read ended: ``positions`` move (only for partitions still the member's: the others'
        records must not be handed out), ``end_offsets`` (high watermarks seen) feed lag."""
        ...

    @peer("Commit a consumer instance's offsets (fenced)", write=True)
    async def commit(
        self,
        group: str,
        instance: str,
        offsets: dict[TopicPartition, int] | None,
        generation: int | None,
    ) -> None:
        """Fenced by the coordinator (assigned partitions, current generation), then committed on each
        partition's leader; ``offsets`` None commits the positions."""
        ...

    @peer("A consumer instance's committed offsets")
    async def committed(
        self, group: str, instance: str, partitions: list[TopicPartition] | None
    ) -> list[CommittedOffset]:
        """Committed offsets of ``partitions`` (None: the member's assigned partitions)."""
        ...

    @peer("A consumer group's members, offsets and lag")
    async def describe(self, group: str) -> GroupDescription:
        """Members of either door, their partitions, committed offsets and lag (UnknownGroup: none)."""
        ...

    @peer("Delete an empty consumer group and its offsets", write=True)
    async def delete_group(self, group: str) -> GroupDeleted:
        """Delete an empty group and its committed offsets (Kafka's DeleteGroups); GroupNotEmpty while a
        member of either door is live, UnknownGroup when there is none."""
        ...

    @peer("Record a group-level commit's topics (a reset waits for no member)", write=True)
    async def note_commit(self, group: str, topics: list[str], reset: bool, force: bool) -> None:
        """A commit of the group's offsets of ``topics`` outside any member (a door's group-level commit,
        an operator's reset) is about to be made: recorded; a ``reset`` is refused while a member is live
        (GroupNotEmpty: its next commit would undo the reset), unless ``force``."""
        ...

    @peer("The groups of one coordinator partition")  # while it elects, waited for: a listing is whole
    async def list_groups(self, coordinator_partition: int) -> list[GroupSummary]:
        """The groups of one partition of the coordinators' topic, from its leader."""
        ...

    @peer("How many coordinator partitions there are")
    async def coordinator_partitions(self) -> int:
        """How many coordinator partitions there are (0 before the first group)."""
        ...


class PeerService(Protocol):
    """What only other nodes ask of this one (never forwarded: the caller asks the node it means)."""

    @peer("Committed raw batches of this node's replica, for catch-up")
    async def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedBatches:
        """Committed batches of this node's replica (any role), for a peer replica catching up."""
        ...

    @peer("This node's leadership claims (Raft group -> term)")
    async def leadership(self) -> Claims: ...

    @peer("This node's replicas that cannot open or replay")
    async def replica_failures(self) -> Failures: ...

    @peer("The controller's applied metadata")
    async def controller_snapshot(self, known_index: int | None) -> ControllerSnapshot:
        """No snapshot when the applied index is still ``known_index``; NotLeader on a node without a
        controller replica."""
        ...

    @peer("The partition leader's Raft voters and progress", waits_for_leader=False)
    async def member_view(self, topic: str, partition: int) -> MemberView:
        """This node's Raft view of a partition it leads (NotLeader / NoLeader otherwise)."""
        ...

    @peer(
        "Add a learner, promote it, remove a member, or transfer leadership",
        write=True,
        wait_arg="timeout_ms",
    )
    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        """On the partition leader: "learner" (join as a learner), "promote" (a learner becomes a voter),
        "add" (join as a voter at once) or "remove" a member, or "transfer" leadership to it."""
        ...

    @peer("Open this node's replica of the controller group (a learner)", write=True)
    async def join_controller(self, voters: list[str]) -> None:
        """Open this node's replica of the controller group, which made it a learner (voters: the
        group's); nothing if it has one."""
        ...

    @peer("Close this node's replica of the controller group, which removed it", write=True)
    async def leave_controller(self, why: str) -> None:
        """The controller leader removed this node from the controller group: close and delete its
        replica and follow the controller's metadata; nothing if it has none."""
        ...


class LocalServices(Protocol):
    """The node's own services: what the server side of peer calls runs."""

    @property
    def data(self) -> DataService: ...

    @property
    def admin(self) -> AdminService: ...

    @property
    def groups(self) -> GroupService: ...

    @property
    def peer(self) -> PeerService: ...
