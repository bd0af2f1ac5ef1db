"""What only other nodes ask of a node, and the node's own services as the server side of peer calls run
them (pure).

A method declared ``@peer`` (``partitions.peer_ops``) is a peer operation: that one declaration gives its
endpoint on every node and the stub that calls it on another (``partitions.peers.client``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from partitions.consumers.protocol import (
    Assignment,
    CommittedOffset,
    ConsumerCreated,
    GroupDeleted,
    GroupDescription,
    GroupService,
    GroupSummary,
    MemberDescription,
    MemberPartition,
    ReadEnd,
    ReadPlan,
    ShareMembership,
)
from partitions.controller.delegation_tokens import (
    CreateDelegationToken,
    ExpireDelegationToken,
    RenewDelegationToken,
)
from partitions.controller.members import ControllerMembers
from partitions.controller.quotas import QuotaChange
from partitions.controller.reconfigure import MemberView, MoveProgress, ReplicaLog
from partitions.controller.state import TopicMetadata
from partitions.data.service import (
    EpochEndOffset,
    FetchedBatches,
    GroupOffset,
    LocalDataService,
    PartitionOffsets,
    Producer,
    ProduceResult,
    ProducerState,
    TimestampOffset,
)
from partitions.data.share_records import ShareFetched, ShareRecords
from partitions.groups.assignors import TopicPartition
from partitions.groups.group_model import InstanceConfig, ReadConfig
from partitions.groups.share.partition import ShareOffset
from partitions.metadata.service import (
    AdminService,
    ControllerSnapshot,
    MoveState,
    NodeInfo,
    PartitionState,
    ReplicaState,
)
from partitions.peer_ops import peer
from partitions.registry.schema_types import Reference
from partitions.registry.service import (
    Compatibility,
    ConfigView,
    Listing,
    RegistryService,
    SchemaInput,
    SchemaView,
)
from partitions.replicas.failures import ReplicaFailure
from partitions.security.acls import AclBinding, AclFilter
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential
from partitions.transactions.service import (
    Marker,
    ProducerIdAndEpoch,
    TransactionDescription,
    TransactionService,
    TransactionSummary,
)


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


RESULT_TYPES: tuple[type, ...] = (
    Reference,
    SchemaInput,
    SchemaView,
    ConfigView,
    Compatibility,
    Listing,
    QuotaChange,
    ProduceResult,
    Producer,
    ProducerState,
    FetchedBatches,
    PartitionOffsets,
    TimestampOffset,
    EpochEndOffset,
    ReplicaState,
    PartitionState,
    NodeInfo,
    MoveState,
    ControllerSnapshot,
    Claims,
    Failures,
    ConsumerCreated,
    ReadConfig,
    InstanceConfig,
    Assignment,
    ReadPlan,
    ReadEnd,
    CommittedOffset,
    GroupOffset,
    MemberPartition,
    MemberDescription,
    GroupSummary,
    GroupDescription,
    GroupDeleted,
    ShareMembership,
    ShareFetched,
    TopicPartition,
    TopicMetadata,
    MoveProgress,
    MemberView,
    ReplicaLog,
    ControllerMembers,
    ReplicaFailure,
    ScramCredential,
    AclBinding,
    AclFilter,
    ApiToken,
    DelegationToken,
    CreateDelegationToken,
    RenewDelegationToken,
    ExpireDelegationToken,
    ProducerIdAndEpoch,
    Marker,
    ShareOffset,
    TransactionSummary,
    TransactionDescription,
)


class PeerService(Protocol):
    """What only other nodes ask of this one (never forwarded: the caller asks the node it means)."""

    @peer("Committed raw batches of this node's replica, for catch-up")
    async def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedBatches:
        """Committed batches of this node's replica (any role), for a peer replica catching up: fewer, or
        none for now, under this node's leader replication throttle (``replicas.recovery_serving``)."""
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

    @peer("This node's account of its replica's partition log: applied index, end offset, high watermark")
    async def replica_log(self, topic: str, partition: int) -> ReplicaLog:
        """Read between two applies on this node's replica (any role; asked of a node joining in a move,
        whose log is complete once it holds every record of the entries it applied); NotLeader when this
        node holds no replica of it. (Release 0.1.0 serves no such call: a move onto it waits.)"""
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
    def data(self) -> LocalDataService: ...

    @property
    def admin(self) -> AdminService: ...

    @property
    def groups(self) -> GroupService: ...

    @property
    def peer(self) -> PeerService: ...

    @property
    def transactions(self) -> TransactionService: ...

    @property
    def shares(self) -> ShareRecords:
        """Share groups' records of the partitions this node leads (KIP-932)."""
        ...

    @property
    def registry(self) -> RegistryService:
        """The schema registry, served where ``__schemas`` is led."""
        ...
