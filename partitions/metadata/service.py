"""The metadata's protocols: what a node knows right now, and the controller's operations (pure).

- ``MetadataView``: topics, leaders, nodes, failed replicas, metrics, answered locally, never waiting;
- ``AdminService``: the controller's metadata operations and a partition's state and leadership, served by
  the controller's leader (or the partition's) and forwarded there by the cluster-wide implementation
  (``partitions.peers.cluster``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from partitions.controller.delegation_tokens import DelegationTokenCommand
from partitions.controller.members import ControllerMembers
from partitions.controller.quotas import QuotaChange
from partitions.controller.reconfigure import MoveProgress
from partitions.controller.state import TopicMetadata
from partitions.features import TOPIC_ASSIGNMENT, TOPIC_CHANGE_TIMEOUT, TOPIC_DELETE_BY_ID, Features
from partitions.peer_ops import peer
from partitions.replicas.failures import ReplicaFailure
from partitions.replicas.log_dirs import LogDir
from partitions.security.acls import AclBinding, AclFilter
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.quotas import ClientQuotas
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential
from raftlog.histogram import HistogramSnapshot


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
    log_bytes: int | None = None  # the leader's log on disk (None: not asked of the leader)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: str
    http: str  # base URL, e.g. http://127.0.0.1:8081
    state: str  # "alive" | "suspect" | "dead" | "left"
    incarnation: int = 0
    leader_of: int = 0
    maintenance: bool = False  # drained of leadership until cleared
    decommissioning: bool = False  # its replicas are moving elsewhere
    # its decommission is finished: it holds no replica any more (``decommission.finished``) and may stop
    decommissioned: bool = False
    disk_used_bytes: int | None = None  # under its data dir, as it last gossiped
    disk_free_bytes: int | None = None
    disk_full: bool = False  # its writes are refused for want of room (raftlog.storage.space)
    version: str | None = None  # its raftlog version as it gossiped it (None: release 0.1.0, or unheard)
    features: dict[str, int] | None = None  # feature -> highest level its code supports (None: as version)
    # why it takes no part in the cluster (``features.kept_out``: its code is below the finalized levels, as
    # it gossiped them or as it announced them at its last Raft handshake here); None: it does
    kept_out: str | None = None
    # doors the other nodes serve that it lacks (``("kafka",)``: no Kafka listener): it leads nothing
    doors_missing: tuple[str, ...] = ()


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


class MetadataView(Protocol):
    """What this node knows right now; never waits, never asks another node."""

    @property
    def node_id(self) -> str: ...

    def topics(self) -> list[str]: ...

    def topics_by_name(self) -> Mapping[str, TopicMetadata]:
        """Every topic by name as this node's controller metadata has them: one immutable mapping, the
        same object until a topic is created, deleted or changed (what depends on the topics alone may
        be kept as long as it is)."""
        ...

    def topic(self, name: str) -> TopicMetadata:
        """Raises UnknownTopic (this node may not have learned a new topic yet: ``AdminService.topic``
        asks the controller)."""
        ...

    def controller(self) -> str | None:
        """The controller leader, None while unknown (or not yet able to answer for topics)."""
        ...

    def caught_up(self) -> bool:
        """Whether this node's metadata caught up with the controller's since the node started (Kafka's
        broker fence: until then clients are not served, ``partitions.metadata.catch_up``)."""
        ...

    def known_leader(self, topic: str, partition: int) -> str | None:
        """The leader as far as this node knows it (its replica's Raft status, else gossiped claims),
        never a guess; None when no leader is known. A replica that cannot open or replay leads nothing."""
        ...

    def known_leader_epoch(self, topic: str, partition: int) -> tuple[str | None, int]:
        """:meth:`known_leader` and its term, the partition's leader epoch as Kafka's Metadata answers it
        (-1 when no leader is known)."""
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

    def log_dir(self) -> LogDir:
        """This node's log directory: the volume's total and usable bytes, each replica it holds with its
        size and lag (``partitions.replicas.log_dirs``)."""
        ...

    def failed_replicas(self) -> list[ReplicaFailure]:
        """Every replica known to be unable to open or replay: this node's and those its live peers
        gossip."""
        ...

    def features(self) -> Features:
        """The gate before a format the previous release cannot read, on the finalized feature levels as
        this node's controller metadata has them."""
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

    def delegation_tokens(self) -> Mapping[str, DelegationToken]:
        """Kafka's delegation tokens by id as this node's controller metadata has them (never an HMAC)."""
        ...

    def client_quotas(self) -> ClientQuotas:
        """The client quotas as this node's controller metadata has them, with this node's meters of
        them (``security.quotas``: one rule for both doors)."""
        ...

    def resource_configs(self) -> Mapping[tuple[str, str], Mapping[str, str]]:
        """The configs of client metrics subscriptions, groups, brokers and topics' throttled replicas by
        (kind, name) as this node's controller metadata has them (``partitions.resource_configs``)."""
        ...

    def metrics(self) -> dict[str, float]:
        """Flat name -> value, exported by /metrics in Prometheus text format."""
        ...

    def histograms(self) -> dict[str, HistogramSnapshot]:
        """Latency histograms by name (seconds), exported by /metrics."""
        ...


TOPIC_CHANGE_WAIT_MAX_MS = 120_000  # the longest a request's own timeout_ms holds a topic change
# A topic change's timeout_ms (``topic_changes.ChangeTime``) extends the peer call's own timeout; without
# one the change may take its write's 10 s and its leaders' 10 s. The argument is sent once no node of
# 0.1.0 is left (it refuses the argument; it serves the change with its default).
_TOPIC_CHANGE: dict[str, Any] = {
    "wait_arg": "timeout_ms",
    "wait_unset_ms": 10_000,
    "wait_max_ms": TOPIC_CHANGE_WAIT_MAX_MS,
    "since": {"timeout_ms": TOPIC_CHANGE_TIMEOUT},
}


class AdminService(Protocol):
    """Controller operations run on the controller leader, partition operations on the partition's
    leader; the local implementation raises NotLeader elsewhere."""

    @peer("A topic's metadata, from the controller leader", topic_arg="name")
    async def topic(self, name: str, fresh: bool = False) -> TopicMetadata:
        """A topic's metadata: this node's when it knows the topic, else the controller leader's. With
        ``fresh``, the controller leader's always: a change the controller answered is in it (a client's
        read of configs it just changed, which another node may not have applied yet)."""
        ...

    @peer(
        "Create a topic on the controller leader",
        write=True,
        **{**_TOPIC_CHANGE, "since": {**_TOPIC_CHANGE["since"], "assignment": TOPIC_ASSIGNMENT}},
    )
    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, Any],
        timeout_ms: int | None = None,
        assignment: list[list[str]] | None = None,
    ) -> TopicMetadata:
        """``timeout_ms``: how long the request lets the change take (Kafka's CreateTopics
        ``timeout_ms``, ``topic_changes.ChangeTime``; None: the default). ``assignment``: its replicas
        placed by hand (node ids per partition; sent only once ``features.TOPIC_ASSIGNMENT`` is finalized:
        a caller checks first, as a node of 0.1.0 would place the topic itself). Raises TopicExists,
        InvalidName, InvalidTopic, InvalidConfig, InvalidReassignment, PlacementImpossible,
        CapacityExceeded; OutcomeUnknown past its time (the topic may still be created)."""
        ...

    @peer(
        "Add partitions to a topic on the controller leader",
        write=True,
        topic_arg="name",
        **{**_TOPIC_CHANGE, "since": {**_TOPIC_CHANGE["since"], "assignment": TOPIC_ASSIGNMENT}},
    )
    async def add_partitions(
        self,
        name: str,
        count: int,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        assignment: list[list[str]] | None = None,
    ) -> TopicMetadata:
        """Grow a topic to ``count`` partitions, placed as a new topic's are, or by hand (``assignment``:
        the new partitions' node ids, as ``create_topic``'s; sent only once ``features.TOPIC_ASSIGNMENT``
        is finalized) (``validate_only``: check and place, change nothing; ``timeout_ms`` as
        ``create_topic``'s). Raises UnknownTopic, InvalidTopic, InvalidReassignment, PlacementImpossible,
        CapacityExceeded."""
        ...

    @peer(
        "Delete a topic on the controller leader",
        write=True,
        topic_arg="name",
        **{**_TOPIC_CHANGE, "since": {**_TOPIC_CHANGE["since"], "topic_id": TOPIC_DELETE_BY_ID}},
    )
    async def delete_topic(
        self, name: str, timeout_ms: int | None = None, topic_id: int | None = None
    ) -> None:
        """``timeout_ms`` as ``create_topic``'s. ``topic_id``: the topic's creation index when the caller
        named it by its id (Kafka's DeleteTopics v6): TopicIdGone, nothing deleted, when the name's topic
        is another incarnation (sent only once ``features.TOPIC_DELETE_BY_ID`` is finalized)."""
        ...

    @peer("Change a topic's configs on the controller leader", write=True, topic_arg="name")
    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        """Merge ``configs`` into a topic's (a None value removes a property: back to its default);
        replicas apply them live. Raises InvalidConfig, UnknownTopic."""
        ...

    @peer("The configs of every resource of a kind, from the controller leader")
    async def resource_configs(self, kind: str) -> dict[str, dict[str, str]]:
        """Each resource of ``kind`` with configs set (``partitions.resource_configs``) by name, as the
        controller leader applied them: a change it answered is in it."""
        ...

    @peer(
        "Set or remove configs of a resource other than a topic's log, on the controller leader", write=True
    )
    async def alter_resource_configs(
        self, kind: str, name: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        """Set (None: remove) configs of one resource (``partitions.resource_configs``: a client metrics
        subscription, a group, a broker's throttles, a topic's throttled replicas) in one controller
        change (``validate_only``: check, change nothing). Raises InvalidConfigRequest,
        InvalidResourceConfig (nothing changed), UnknownTopic, FeatureNotFinalized."""
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

    @peer("Finalize a feature level on the controller leader", write=True)
    async def update_feature(self, feature: str, level: int) -> dict[str, int]:
        """Raise the cluster's finalized level of ``feature`` (``partitions.features``); the
        finalized levels after it. Raises FeatureUpdateRefused (a node that does not support the level, a
        downgrade, an unknown feature)."""
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

    @peer("Make, renew or expire a delegation token on the controller leader", write=True)
    async def change_delegation_token(self, command: DelegationTokenCommand) -> DelegationToken:
        """Apply a delegation token command as made where the request entered (its id, times and caller;
        never its HMAC); the token as it now is (as it was, when removed). Raises UnknownUser,
        UnknownToken, DelegationTokenOwnerMismatch, DelegationTokenExpired, TooManyTokens,
        FeatureNotFinalized; nothing changed."""
        ...

    @peer("Set or remove client quotas on the controller leader", write=True)
    async def alter_client_quotas(self, changes: list[QuotaChange], validate_only: bool) -> None:
        """Set and remove quotas of entities (``controller.quotas``) in one controller change
        (``validate_only``: check, change nothing). Raises InvalidQuota (nothing changed),
        FeatureNotFinalized."""
        ...

    @peer("Give a principal its number in the producer ids it is given, on the controller leader", write=True)
    async def register_producer_owner(self, principal: str) -> int:
        """The principal's number (``security.producer_ids``), given the first time it is asked for.
        Raises TooManyProducerOwners."""
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
