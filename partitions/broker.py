"""What a node offers the HTTP layer: the ``Broker`` protocol (pure interface, no I/O here).

``api/`` depends only on this protocol; ``partitions.node.Node`` implements it over Raft groups and the
segmented log, and tests may implement it in memory. Methods raise the typed errors of
``raftlog``/``partitions`` (mapped to HTTP once, in ``api/errors.py``). When a partition is led by another
node, the call raises ``raftlog.consensus.errors.NotLeader`` with the leader's node id as ``leader_hint``
(or ``NoLeader``) and the API forwards the request to that node (``http_address``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from partitions.controller import TopicMetadata
from partitions.groups.coordinator import GroupCoordinator
from partitions.reconfigure import MemberView, MoveProgress
from partitions.replica_failures import ReplicaFailure
from raftlog.storage.batch import ProducerRecord, Record


@dataclass(frozen=True, slots=True)
class ProduceResult:
    partition: int
    base_offset: int
    end_offset: int  # offset after the last record: the records got base_offset .. end_offset - 1
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int  # "beginning_offset"
    high_watermark: int  # "end_offset": the next offset to be committed


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


class Broker(Protocol):
    node_id: str
    groups: GroupCoordinator  # consumer groups coordinated by this node (NotLeader for the others)

    # -- metadata ----------------------------------------------------------------------------------
    def topics(self) -> list[str]: ...

    def topic(self, name: str) -> TopicMetadata:
        """Raises UnknownTopic."""
        ...

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> TopicMetadata:
        """Raises TopicExists, InvalidName, InvalidTopic, InvalidConfig, PlacementImpossible, NotLeader
        (controller)."""
        ...

    async def delete_topic(self, name: str) -> None: ...

    # -- data --------------------------------------------------------------------------------------
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

    async def produce_batch(self, topic: str, partition: int, batch: bytes, timeout_ms: int) -> ProduceResult:
        """Append a record batch the producer encoded (base offset 0, term 0); checked before it is
        replicated. ``InvalidRecord`` names what is malformed."""
        ...

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> list[Record]:
        """Committed records from ``offset`` (at least one if any, within ``max_bytes``); waits up to
        ``timeout_ms`` for new ones when none are available. Raises OffsetOutOfRange, NotLeader..."""
        ...

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> bytes:
        """The committed batches holding ``offset`` onwards as stored (the first may start before it),
        waiting like ``fetch``; empty when none came."""
        ...

    def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    async def commit_offset(
        self, group: str, topic: str, partition: int, offset: int, reset: bool, timeout_ms: int
    ) -> int:
        """Store a consumer group's next offset to read; returns the stored value (never lower unless
        ``reset``)."""
        ...

    def committed_offset(self, group: str, topic: str, partition: int) -> int | None: ...

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> bytes:
        """Raw committed batches of this node's replica (any role) from ``offset``, concatenated, for a
        peer replica catching up. Raises OffsetOutOfRange, NotLeader (no replica here)."""
        ...

    def leadership(self) -> tuple[int, dict[str, int]]:
        """This node's leadership claims (Raft group -> term) and their version, as gossiped."""
        ...

    def replica_failures(self) -> tuple[int, list[ReplicaFailure]]:
        """This node's replicas that cannot open or replay and their digest, as gossiped."""
        ...

    def failed_replicas(self) -> list[ReplicaFailure]:
        """Every replica in the cluster known to be unable to open or replay: this node's and those its
        live peers gossip. Such a replica is never named a partition's leader."""
        ...

    # -- admin -------------------------------------------------------------------------------------
    def partition_state(self, topic: str, partition: int) -> PartitionState: ...

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> None: ...

    def nodes(self) -> list[NodeInfo]: ...

    def controller(self) -> str | None: ...

    def http_address(self, node_id: str) -> str | None:
        """Base URL of a node's HTTP API, for forwarding."""
        ...

    def leader_hint(self, topic: str, partition: int) -> str | None:
        """Best known leader of a partition this node may not host (for routing)."""
        ...

    def known_leader(self, topic: str, partition: int) -> str | None:
        """The leader of a partition as far as this node knows it (its own replica's Raft status, else
        gossiped leadership claims), never a guess; None when no leader is known (leaderless)."""
        ...

    def metrics(self) -> dict[str, float]:
        """Flat name -> value, exported by /metrics in Prometheus text format."""
        ...

    # -- operations (run on the controller leader; NotLeader elsewhere, so the API forwards) ---------
    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        """Merge ``configs`` into a topic's; replicas apply them live. Raises InvalidConfig, UnknownTopic."""
        ...

    def move_progress(self, topic: str, partition: int) -> MoveProgress | None: ...

    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        """Start moving a partition to ``replicas``. Raises UnknownNode, InvalidReassignment,
        ReassignmentInProgress; nothing changes when it raises."""
        ...

    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        """Turn a move back to its original replica set. Raises NoReassignment."""
        ...

    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        """``flag``: "decommissioning" or "maintenance". Raises UnknownNode."""
        ...

    def decommission_status(self, node_id: str) -> dict[str, Any]: ...

    # -- internal: the controller leader driving a move on the partition leader -------------------------
    def internal_credential_ok(self, presented: str) -> bool: ...

    def member_view(self, topic: str, partition: int) -> MemberView:
        """This node's Raft view of a partition it leads (NotLeader / NoLeader otherwise)."""
        ...

    async def controller_snapshot(self, known_index: int | None) -> tuple[str, str, int, bytes | None]:
        """(controller leader id, its URL, applied index, controller snapshot) for nodes outside the
        controller group; no snapshot when the applied index is still ``known_index``. NotLeader on a
        node without a controller replica."""
        ...

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        """On the partition leader: "add" or "remove" a voter, or "transfer" leadership to it."""
        ...
