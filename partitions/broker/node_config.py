"""A node's configuration: what ``raftlog serve``'s options (``raftlog_node.settings``) and the tests give
``partitions.broker.node.Node``, each field with its default. Apart from the node, so that what builds a
configuration does not build the node."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from membership import GossipConfig
from partitions import features
from partitions.controller.defaults import REPLICAS_MAX_DEFAULT
from partitions.groups.coordinator import GROUP_PARTITIONS_DEFAULT
from partitions.groups.defaults import (
    CONSUMER_SESSION_TIMEOUT_MS_DEFAULT,
    INITIAL_DELAY_MS_DEFAULT,
    MIGRATION_POLICY_DEFAULT,
    REGEX_RESOLVE_BUDGET_MS_DEFAULT,
    SHARE_GROUPS_MAX_DEFAULT,
    SHARE_LOCK_MS_DEFAULT,
)
from partitions.peers.client import CALL_TIMEOUT_S_DEFAULT
from partitions.replicas.defaults import CONTROLLED_SHUTDOWN_MS_DEFAULT
from partitions.replicas.recovery import RATE_BYTES_PER_S_DEFAULT
from partitions.transactions.coordinator import TIMEOUT_MS_MAX_DEFAULT, TRANSACTION_PARTITIONS_DEFAULT
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.defaults import JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT, JOURNAL_SYNC_THREADS_DEFAULT
from raftlog.errors import check
from raftlog.storage import cleaner
from raftlog.storage.defaults import INFLATED_BYTES_MAX_DEFAULT, RETENTION_CHECK_MS_DEFAULT

CONTROLLER_VOTERS_MAX = 5


@dataclass(frozen=True, slots=True)
class PeerConfig:
    node_id: str
    http: str  # base URL, e.g. http://127.0.0.1:8081
    raft: str  # host:port of its Raft listener


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: str
    data_dir: str
    raft_address: str
    peers: tuple[PeerConfig, ...]  # every node of the cluster, this one included
    cluster_secret: bytes
    core: CoreConfig = field(default_factory=CoreConfig.for_node)
    gossip_address: str = "127.0.0.1:0"  # UDP+TCP endpoint of SWIM gossip
    seeds: tuple[str, ...] = ()  # gossip addresses to join through
    gossip: GossipConfig = field(default_factory=GossipConfig)
    group_partitions: int = GROUP_PARTITIONS_DEFAULT  # of the internal __consumer_groups topic
    transaction_partitions: int = TRANSACTION_PARTITIONS_DEFAULT  # of the internal __transactions topic
    # the longest transaction.timeout.ms a transactional producer may ask for (Kafka's
    # transaction.max.timeout.ms)
    transaction_timeout_ms_max: int = TIMEOUT_MS_MAX_DEFAULT
    retention_check_interval_ms: int = RETENTION_CHECK_MS_DEFAULT  # how often retention deletes old segments
    # Threads running large Raft journal syncs (write + fdatasync) off the driver thread (0: none), for
    # syncs of at least journal_sync_thread_min_bytes
    journal_sync_threads: int = JOURNAL_SYNC_THREADS_DEFAULT
    journal_sync_thread_min_bytes: int = JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT * 1024
    # Joining a running cluster: not one of the controller group's first voters whatever the peer list
    # says (it may be added later: POST /v1/controller/voters); until then the controller's metadata is
    # followed from the controller leader (``metadata_follower``); peers are learned by gossip.
    join: bool = False
    replicas_max: int = REPLICAS_MAX_DEFAULT  # partition replicas a node may hold (see placement)
    recovery_bytes_per_s: int = RATE_BYTES_PER_S_DEFAULT  # what all recoveries of replicas copy together
    # a stop first hands over this node's leaderships for at most this long (0: none, as a crash)
    controlled_shutdown_ms: int = CONTROLLED_SHUTDOWN_MS_DEFAULT
    # compaction of the node's compacted logs (raftlog.storage.cleaner): its pace and how often it looks
    cleaner_bytes_per_s: int = cleaner.RATE_BYTES_PER_S_DEFAULT
    cleaner_interval_ms: int = cleaner.INTERVAL_MS_DEFAULT
    # the most a producer's compressed batch's records may inflate to, or its topic's max.message.bytes
    # when larger: past it the batch is refused (a decompression bomb), inflating stopped there
    inflated_batch_bytes_max: int = INFLATED_BYTES_MAX_DEFAULT
    # groups (raftlog serve --group-*): the consumer protocol's session timeout and the budget of one
    # regex's resolution, a share group's record locks and how many share groups a coordinator partition
    # holds, a classic group's first rebalance's delay (Kafka's group.initial.rebalance.delay.ms)
    consumer_session_timeout_ms: int = CONSUMER_SESSION_TIMEOUT_MS_DEFAULT
    consumer_regex_budget_ms: int = REGEX_RESOLVE_BUDGET_MS_DEFAULT
    consumer_migration_policy: str = MIGRATION_POLICY_DEFAULT  # Kafka's group.consumer.migration.policy
    share_lock_ms: int = SHARE_LOCK_MS_DEFAULT
    share_groups_max: int = SHARE_GROUPS_MAX_DEFAULT
    classic_initial_delay_ms: int = INITIAL_DELAY_MS_DEFAULT
    kafka_address: str | None = None  # HOST:PORT of this node's Kafka listener as clients reach it
    # ACLs decide what the data plane checks of a producer (its transactional id), as both doors check
    # the rest (``raftlog serve --enforce-acls``); super users (user names) pass every check
    enforce_acls: bool = False
    super_users: frozenset[str] = frozenset()
    peer_timeout_s: float = CALL_TIMEOUT_S_DEFAULT  # a call to another node, plus what it may wait for
    peer_ssl: ssl.SSLContext | None = (
        None  # HTTPS to the other nodes (their URLs say https): raftlog_node/tls.py
    )
    # the feature levels a new cluster this node forms starts at, recorded at its first start on an unused
    # data directory without ``join`` unless ``raftlog format --release-version`` recorded others
    # (``local_levels``)
    formation_levels: Mapping[str, int] = field(default_factory=lambda: dict(features.SUPPORTED))

    def __post_init__(self) -> None:
        ids = [p.node_id for p in self.peers]
        check(len(set(ids)) == len(ids), f"peer ids repeat: {ids}")
        check(self.node_id in ids, f"node {self.node_id} is not among the peers {ids}")

    @property
    def controller_voters(self) -> list[str]:
        return sorted(p.node_id for p in self.peers)[:CONTROLLER_VOTERS_MAX]

    def peer(self, node_id: str) -> PeerConfig:
        return next(p for p in self.peers if p.node_id == node_id)
