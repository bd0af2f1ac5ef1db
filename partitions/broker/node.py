"""A node: builds its parts, starts them in order and stops them in reverse. It does nothing else.

The parts, each owning one thing (see ARCHITECTURE.md for the threads):
- ``RaftHost``: the consensus driver thread and the mux hub every Raft group of the node talks over;
- ``MetadataFrontend``: the controller's metadata (a controller replica, or a follower of the controller
  leader on a node that joined) and the proposals that change it;
- ``ReplicaManager``: the only owner of the map of this node's partition replicas (reconciled to the
  controller's assignment after every controller apply);
- ``Routing``: addresses, liveness, leaders and failed replicas as this node knows them;
- ``Presence``: this node in gossip (its claims, disk use and failures out; others' in);
- ``DataPlane``, ``PartitionAdmin``, ``LocalAdmin``, ``ConsumerService``, ``PeerServer``: the local
  services (each room's protocol: ``partitions.data.service``, ``partitions.metadata.service``, ...);
- ``PeerClient`` and ``Cluster``: the same services run wherever they must, for the front doors;
- ``Operator``: the controller leader's background work (replica moves, decommissions, leader balance);
- ``LogManager`` and the ``Remover`` behind the node's ``Trash``: storage's background threads.

A front door is given the node as a ``partitions.peers.cluster.FrontDoor``: ``metadata``, ``cluster``,
``local`` and ``peer_credential_ok``. The data directory is this node's alone (``raftlog.storage.dirlock``)
from construction to ``close``. A data directory whose partition logs an older raftlog wrote in its own
batch format is refused then too, before anything in it is opened (``LegacyLogFormat``, naming ``raftlog
log migrate``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from partitions import features, resource_configs
from partitions.broker.level_guard import LevelGuard
from partitions.broker.local import LocalAdmin, PeerServer
from partitions.broker.node_config import NodeConfig
from partitions.consumers.reader import PartitionData
from partitions.consumers.service import ConsumerService
from partitions.consumers.store import ReplicatedGroupLog
from partitions.controller.members import ControllerMembers
from partitions.controller.placement import internal_replication_factor
from partitions.controller.state import TopicMetadata
from partitions.data.partition_admin import PartitionAdmin
from partitions.data.plane import DataPlane
from partitions.data.schema_checks import SchemaChecks
from partitions.data.service import DataService
from partitions.data.share_records import ShareRecords, ShareSettings
from partitions.data.transactional import TransactionalWrites
from partitions.features import PRODUCER_OWNERS, Features
from partitions.groups.assignors import TopicPartition
from partitions.groups.coordinator import GroupCoordinator
from partitions.internal_topic import InternalTopicLog
from partitions.metadata import local_levels
from partitions.metadata.controller_voters import ControllerVoters
from partitions.metadata.frontend import MetadataFrontend
from partitions.metadata.security_records import SecurityRecords
from partitions.metadata.service import AdminService, ControllerSnapshot, MoveState, NodeInfo
from partitions.metadata.topic_changes import TopicChanges
from partitions.operations.operator import Operator
from partitions.peers.batches import peer_fetch_batches
from partitions.peers.client import (
    PeerClient,
    credential_matches,
    internal_credential,
    remote_admin,
    remote_peer,
)
from partitions.peers.cluster import Cluster
from partitions.peers.presence import Presence
from partitions.registry.coordinator import SchemaRegistry
from partitions.registry.schema_cache import SchemaCache
from partitions.registry.service import RegistryService, SchemaView
from partitions.registry.store import ReplicatedSchemaLog
from partitions.registry.types import TYPES
from partitions.replicas import log_dirs
from partitions.replicas.cluster_view import ClusterView
from partitions.replicas.failures import ReplicaFailure
from partitions.replicas.handover import HandOver, hand_over
from partitions.replicas.log_dirs import LogDir, ReplicaDir
from partitions.replicas.manager import ReplicaManager
from partitions.replicas.raft_host import RAFT_DIR, RaftHost
from partitions.replicas.routing import Routing
from partitions.security.acls import AclBinding, Authorizers
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.producer_ids import ProducerIds
from partitions.security.quotas import ClientQuotas
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential
from partitions.transactions.coordinator import (
    TransactionCoordinator,
)
from partitions.transactions.errors import UnknownTransactionalId
from partitions.transactions.service import Marker, TransactionService
from partitions.transactions.state import TxnState
from partitions.transactions.store import ReplicatedTransactionLog
from raftlog import gc_pauses, loop_lag
from raftlog.consensus import journal_files
from raftlog.consensus.driver import ROUND_SECONDS
from raftlog.consensus.group import election_counts, leader_changes
from raftlog.consensus.interface import Role
from raftlog.histogram import HistogramSnapshot
from raftlog.storage import removal
from raftlog.storage.dirlock import DirectoryLock
from raftlog.storage.errors import LegacyLogFormat
from raftlog.storage.log import wall_clock_ms
from raftlog.storage.log_format import needs_migration
from raftlog.storage.manager import LogManager
from raftlog.storage.space import DiskSpace

log = logging.getLogger("raftlog.node")
MARKER_TIMEOUT_MS = 10_000  # how long a transaction marker's proposal may wait on its partition's leader
LOGS_DIR = "logs"  # under the data directory: one directory per partition log (its Raft group id)
DAMAGED_DIR = "damaged"  # under the data directory: damaged segments set aside, kept for an operator

Store = TypeVar("Store", bound=InternalTopicLog[Any])


@dataclass(slots=True)
class NodeServices:
    """Implements ``services.LocalServices``."""

    data: DataPlane
    admin: LocalAdmin
    groups: ConsumerService
    peer: PeerServer
    transactions: TransactionCoordinator
    shares: ShareRecords
    registry: SchemaRegistry


class Node:
    """Implements ``services.FrontDoor``. Create, ``await start()``, serve, ``await close()``."""

    def __init__(self, config: NodeConfig, clock: Callable[[], int] = wall_clock_ms) -> None:
        # The data directory is this node's alone before anything in it is read or written: a second
        # process on it is refused here (DirectoryLocked names the holder) and touches nothing.
        self._data_lock = DirectoryLock.acquire(config.data_dir, f"node {config.node_id}")
        try:
            refuse_legacy_logs(config.data_dir)
            self._build(config, clock)
        except BaseException:
            self._data_lock.close()
            raise

    def _build(self, config: NodeConfig, clock: Callable[[], int]) -> None:
        """The rooms, bottom up: storage and consensus, the controller's metadata, the replicas and where
        things are, then the services."""
        self.config = config
        self.node_id = config.node_id
        self._credential = internal_credential(config.cluster_secret)
        # started on a data directory no node used, not joining a running cluster: a member of a new
        # cluster, which forms at the levels it was given (proposed only while the controller's log holds
        # no command: ``MetadataFrontend.form_if_new``)
        forms = not config.join and not os.path.exists(os.path.join(config.data_dir, RAFT_DIR))
        if forms and local_levels.formation(config.data_dir) is None:  # else ``raftlog format`` wrote it
            local_levels.record_formation(config.data_dir, config.formation_levels)
        # the cluster's levels as this node enforces them against other nodes' code (level_guard)
        self.level_guard = LevelGuard(config.node_id, config.data_dir, self._applied_levels)
        self._build_storage(config, clock)
        self._build_metadata(config)
        self._build_replicas(config)
        self._build_services(config, clock)
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    def _build_storage(self, config: NodeConfig, clock: Callable[[], int]) -> None:
        # Removes dropped replicas, released Raft journal segments and deleted log segments, one after
        # another, at a pace (raftlog.storage.removal)
        self.remover = removal.Remover(name=f"raftlog-remover-{config.node_id}")
        self.trash = removal.Trash(os.path.join(config.data_dir, "trash"), self.remover)
        # what every log and journal learns of room on the data disk (raftlog.storage.space)
        self.space = DiskSpace()
        self._logs = LogManager(
            os.path.join(config.data_dir, LOGS_DIR),
            clock=clock,
            retention_check_interval_ms=config.retention_check_interval_ms,
            discard=self.trash.discard_if_present,
            space=self.space,
            damaged_root=os.path.join(config.data_dir, DAMAGED_DIR),
            cleaner_rate_bytes_per_s=config.cleaner_bytes_per_s,
            cleaner_interval_ms=config.cleaner_interval_ms,
            # Kafka's log.cleaner.threads, as the controller keeps it for this broker (or the cluster's
            # default), asked at each look of the cleaner: a change applies while the node runs
            cleaner_threads=self._cleaner_threads,
            # once raftlog.version 2 is finalized, a log is fenced against release 0.1.0 (log_format.fence)
            fence_level=self.level_guard.log_fence_level,
        )
        self.raft = RaftHost(
            config.node_id,
            config.data_dir,
            config.raft_address,
            config.cluster_secret,
            {p.node_id: p.raft for p in config.peers if p.node_id != config.node_id},
            config.core,
            config.journal_sync_threads,
            config.journal_sync_thread_min_bytes,
            self.trash.discard_if_present,
            self.space,
            # announces this code's levels in every Raft handshake; keeps out a peer whose code is below
            # the cluster's finalized levels
            self.level_guard.gate,
        )
        self.level_guard.attach(self.raft.hub.recheck, self._logs)

    def _build_metadata(self, config: NodeConfig) -> None:
        self.frontend = MetadataFrontend(
            config.node_id,
            config.controller_voters,
            config.join,
            self.raft,
            local_levels.formation(config.data_dir),
            self.level_guard.finalized,
        )
        self.topic_changes = TopicChanges(self.frontend, config.replicas_max)
        self.features = Features(
            self.level_guard.levels,
            lambda: self.frontend.metadata().applied_index,
        )  # the gate before a new format, on the levels applied or kept from before a restart
        self.security = SecurityRecords(self.frontend)
        self.client_quotas = ClientQuotas(lambda: self.frontend.metadata().quotas)  # both doors' meters
        self.voters = ControllerVoters(self.frontend, self.features)

    def _build_replicas(self, config: NodeConfig) -> None:
        me = config.peer(config.node_id)
        self.peers = PeerClient(
            self._credential,
            self._address,
            config.peer_timeout_s,
            config.peer_ssl,
            self.features.allows,
            kept_out=self.level_guard.kept_out,
            node_kept_out=self._node_kept_out,
        )
        self.replicas = ReplicaManager(
            config.node_id,
            self.raft,
            self._logs,
            self.trash,
            self.frontend.metadata,
            functools.partial(peer_fetch_batches, self.peers),
            config.recovery_bytes_per_s,
        )
        self._view = ClusterView(config.node_id)
        self.routing = Routing(
            config.node_id,
            {p.node_id: p.http for p in config.peers},
            self._view,
            self.replicas,
            self.frontend.metadata,
            kafka=config.kafka_address,
            kept_out=self.level_guard.kept_out,
            refused=self.level_guard.refused_at_handshake,
        )
        self.presence = Presence(
            config.node_id,
            me.http,
            me.raft,
            config.data_dir,
            config.gossip_address,
            config.cluster_secret,
            config.gossip,
            config.seeds,
            self._view,
            self.routing,
            self.replicas,
            self.raft,
            self.peers,
            self.frontend.metadata,
            kafka=config.kafka_address,
        )

    def _build_services(self, config: NodeConfig, clock: Callable[[], int]) -> None:
        """The local services, then the cluster-wide ones over them. Five local services call cluster-wide
        ones (the group and transaction stores create their internal topics through the controller
        leader; a member's reads go to each partition's leader; the transaction coordinator writes its
        markers through each partition's leader; the data plane asks a transaction's coordinator whether a
        transactional batch's partition is in it; the producer ids ask the controller leader for a
        principal's number): they are handed ``self.cluster``'s, built right after
        them, as a call made later, the one cycle of the node's construction."""
        authorizers = Authorizers(f"User:{name}" for name in config.super_users)
        self.producer_ids = ProducerIds(
            self.security.producer_owners,
            self._register_producer_owner,
            bound=lambda: self.features.allows(PRODUCER_OWNERS),
        )
        self.data = DataPlane(
            config.node_id,
            self.replicas,
            self.routing,
            self.frontend.topic,
            clock,
            TransactionalWrites(
                authorizers if config.enforce_acls else None,
                self.security.acls,
                self._verify_partition,
                self._add_partition,
            ),
            self.producer_ids,
            self.raft.run,
            inflated_bytes_max=config.inflated_batch_bytes_max,
            features=self.features,
            schemas=SchemaChecks(SchemaCache(self._schema_of), self._schema_usage),
        )
        self.partition_admin = PartitionAdmin(
            config.node_id,
            self.replicas,
            self.data,
            self.routing,
            self.raft,
            self.frontend.topic,
            self.topic_changes.move_progress,
            lambda: self.frontend.metadata().resource_configs,
        )
        self.groups = GroupCoordinator(
            self._internal_topic_log(ReplicatedGroupLog, config.group_partitions),
            topics=lambda: self.frontend.metadata().topics,  # replaced whole when topics change
            features=self.features,
            consumer_session_timeout_ms=config.consumer_session_timeout_ms,
            consumer_regex_budget_ms=config.consumer_regex_budget_ms,
            consumer_migration_policy=config.consumer_migration_policy,
            share_groups_max=config.share_groups_max,
            classic_initial_delay_ms=config.classic_initial_delay_ms,
        )
        self.groups.consumer.group_configs = self._group_configs
        self.groups.streams.group_configs = self._group_configs
        self.transactions = TransactionCoordinator(
            config.node_id,
            self._internal_topic_log(ReplicatedTransactionLog, config.transaction_partitions),
            self._write_txn_marker,
            producer_ids=self.producer_ids,
            timeout_ms_max=config.transaction_timeout_ms_max,
            features=self.features,
        )
        self.local = NodeServices(
            self.data,
            LocalAdmin(self.frontend, self.topic_changes, self.security, self.voters, self.partition_admin),
            ConsumerService(config.node_id, self.groups, self._cluster_data, features=self.features),
            PeerServer(self.data, self.presence, self.frontend, self.partition_admin),
            self.transactions,
            ShareRecords(
                self.data,
                clock,
                self.features,
                settings=ShareSettings(lock_ms=config.share_lock_ms),
                group_configs=self._group_configs,
            ),
            SchemaRegistry(
                self._internal_topic_log(ReplicatedSchemaLog, 1),
                TYPES,
                lambda: self.frontend.metadata().features,
            ),
        )
        self.metadata = NodeView(self)
        self.cluster = Cluster(self.local, self.metadata, self.peers)
        self.operator = Operator(self.frontend, self.voters, self.routing, self.cluster.peer)

    async def _schema_of(self, schema_id: int) -> SchemaView:
        return await self.cluster.registry.call(RegistryService.schema, schema_id, "", "", True)

    async def _schema_usage(self, schema_id: int) -> list[tuple[str, int]]:
        return await self.cluster.registry.call(RegistryService.schema_usage, schema_id, False)

    def _cleaner_threads(self) -> int:
        return resource_configs.cleaner_threads(self.frontend.metadata().resource_configs, self.node_id)

    def _group_configs(self, group: str) -> Mapping[str, str]:
        """A group's configs as the controller replicated them (``partitions.resource_configs``)."""
        return self.frontend.metadata().resource_configs.get(("group", group), {})

    async def _create_topic_anywhere(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> TopicMetadata:
        return await self.cluster.admin.call(
            AdminService.create_topic, name, partitions, replication_factor, configs
        )

    def _internal_topic_log(self, store: type[Store], partitions: int) -> Store:
        """The store over an internal topic's partitions led here; the topic created through the controller
        leader, with the replication factor of ``internal_replication_factor`` (3 where the cluster has 3
        nodes, counting those down after a crash)."""
        return store(
            topic=self.frontend.topic,
            create_topic=self._create_topic_anywhere,
            ready_leader=self.data.ready_leader,
            reading_leader=self.data.reading_leader,
            leader=self.data.leader_replica,
            replication_factor=self._internal_replication_factor,
            partitions=partitions,
        )

    def _internal_replication_factor(self) -> int:
        return internal_replication_factor(self.routing.placeable(), self.routing.standby())

    def _cluster_data(self) -> PartitionData:
        return self.cluster.data

    async def _verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> int | None:
        """The ordinal of the producer's ongoing transaction (its start, as the coordinator stamped it)
        when the id's coordinator has the partition in it at that epoch; None when it has not. Asked as
        the transaction's description, which every release's coordinator serves."""
        try:
            described = await self.cluster.transactions.call(
                TransactionService.describe_transaction, transactional_id
            )
        except UnknownTransactionalId:
            return None
        summary = described.summary
        if (
            (summary.producer_id, summary.producer_epoch) != (producer_id, epoch)
            or summary.state != TxnState.ONGOING.value
            or TopicPartition(topic, partition) not in described.partitions
        ):
            return None
        return summary.started_ms

    async def _add_partition(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        topic: str,
        partition: int,
        principal: str | None,
    ) -> None:
        """The partition added to the producer's transaction by the id's coordinator (transaction version
        2: a Produce v12's batch adds its partition itself)."""
        await self.cluster.transactions.call(
            TransactionService.add_partitions,
            transactional_id,
            producer_id,
            epoch,
            [TopicPartition(topic, partition)],
            principal,
        )

    async def _register_producer_owner(self, principal: str) -> int:
        """A principal's number in the producer ids it is given, from the controller leader."""
        return await self.cluster.admin.call(AdminService.register_producer_owner, principal)

    async def _write_txn_marker(self, tp: TopicPartition, marker: Marker) -> None:
        """A transaction's marker, through the partition's leader wherever it is."""
        await self.cluster.data.call(
            DataService.write_txn_marker, tp.topic, tp.partition, marker, MARKER_TIMEOUT_MS
        )

    def _address(self, node_id: str) -> str | None:
        return self.routing.http_address(node_id)

    def peer_credential_ok(self, presented: str) -> bool:
        return credential_matches(self._credential, presented)

    def _applied_levels(self) -> Mapping[str, int]:
        return self.frontend.metadata().features

    def _node_kept_out(self, node_id: str) -> str | None:
        return self.routing.kept_out(node_id)

    def check_peer_levels(self, caller: str, announced: Mapping[str, int] | None) -> None:
        self.level_guard.check_peer(caller, announced)

    def supported_levels(self) -> Mapping[str, int]:
        return features.SUPPORTED

    @property
    def gossip_address(self) -> str:
        return self.presence.gossip_address

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.trash.empty)  # a crash may have left some
        self._logs.start()
        # a fencing a crash cut short, or logs of before the floor existed
        await asyncio.to_thread(self.level_guard.fence_logs)
        self.raft.start()
        await self.frontend.start(
            self.routing,
            self.replicas.schedule_reconcile,
            self._controller_snapshot,
            self._controller_members,
            self._leave_controller,
        )
        await self.presence.start()
        loop = asyncio.get_running_loop()
        self._background.add(loop.create_task(self.groups.run()))
        self._background.add(loop.create_task(self.transactions.run()))
        self.operator.start()

    async def _controller_snapshot(self, node_id: str, known_index: int | None) -> ControllerSnapshot:
        return await remote_peer(self.peers, node_id).controller_snapshot(known_index)

    async def _controller_members(self, node_id: str) -> ControllerMembers:
        return await remote_admin(self.peers, node_id).controller_members()

    async def _leave_controller(self, node_id: str, why: str) -> None:
        await remote_peer(self.peers, node_id).leave_controller(why)

    async def hand_over(self) -> HandOver:
        """A stop's first step, Kafka's controlled shutdown (``partitions.replicas.handover``): gossip LEFT,
        so the other nodes route nothing more here and hand this one no leadership, then the leadership of
        every group this node leads to another voter that may lead (alive, connected, not in maintenance,
        with every door), within ``controlled_shutdown_ms``. Only then do the HTTP door and ``close``
        follow; the Kafka listener drained before it (``KafkaServer.drain``, ``raftlog_node.serve``)."""
        timeout_s = self.config.controlled_shutdown_ms / 1000
        if self._closed:
            return HandOver(0, 0)
        if timeout_s > 0:
            await self.presence.leave()
        maintenance = set(self.frontend.metadata().node_flags["maintenance"])
        routing = self.routing

        def may_lead(node_id: str) -> bool:
            return (
                node_id not in maintenance
                and routing.serving(node_id)
                and routing.may_lead(node_id) is None
                and self.raft.is_connected(node_id)
            )

        controller = self.frontend.replica_group()
        groups = [replica.group for _, replica in self.replicas.items()]
        return await hand_over(
            [*groups, *([] if controller is None else [controller])], may_lead, timeout_s, self.node_id
        )

    async def close(self) -> None:
        """Stop every part, in reverse order of their start; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        await self.operator.close()
        await asyncio.to_thread(self.remover.close)  # between two steps; the next start finishes
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.transactions.close()
        await self.presence.close()
        await self.peers.close()
        await self.replicas.close()
        await self.frontend.close()
        await self.raft.barrier()
        self.raft.stop()
        self.data.close()
        self._logs.close()
        self._data_lock.close()


def refuse_legacy_logs(data_dir: str) -> None:
    """Raise ``LegacyLogFormat`` naming ``raftlog log migrate DATA_DIR`` when a partition log of the data
    directory holds batches of the format an older raftlog wrote (or a migration of it was interrupted).
    Whole, at start: one replica after another failing to open, each retried with backoff, would leave a
    node that answers while serving none of its partitions, and the operator a log line per partition.
    A stat per log (its format marker); the logs without one are listed."""
    root = os.path.join(data_dir, LOGS_DIR)
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return
    legacy = [
        path
        for path in (os.path.join(root, name) for name in names)
        if os.path.isdir(path) and needs_migration(path)
    ]
    if legacy:
        raise LegacyLogFormat(legacy[0], data_dir, len(legacy))


class NodeView:
    """Implements ``services.MetadataView`` from the node's parts."""

    def __init__(self, node: Node) -> None:
        self.node_id = node.node_id
        self._node = node

    def topics(self) -> list[str]:
        return self._node.frontend.topics()

    def topics_by_name(self) -> Mapping[str, TopicMetadata]:
        return self._node.frontend.topics_by_name()

    def topic(self, name: str) -> TopicMetadata:
        return self._node.frontend.topic(name)

    def controller(self) -> str | None:
        return self._node.frontend.controller()

    def caught_up(self) -> bool:
        return self._node.frontend.caught_up()

    def known_leader(self, topic: str, partition: int) -> str | None:
        return self._node.routing.known_leader(topic, partition)

    def known_leader_epoch(self, topic: str, partition: int) -> tuple[str | None, int]:
        return self._node.routing.known_leader_epoch(topic, partition)

    def leader_hint(self, topic: str, partition: int) -> str | None:
        return self._node.routing.leader_hint(topic, partition)

    def http_address(self, node_id: str) -> str | None:
        return self._node.routing.http_address(node_id)

    def kafka_address(self, node_id: str) -> str | None:
        return self._node.routing.kafka_address(node_id)

    def nodes(self) -> list[NodeInfo]:
        return self._node.presence.nodes()

    def moves(self) -> list[MoveState]:
        return self._node.topic_changes.moves()

    def failed_replicas(self) -> list[ReplicaFailure]:
        return self._node.routing.failed_replicas()

    def log_dir(self) -> LogDir:
        path = os.path.join(self._node.config.data_dir, LOGS_DIR)
        try:
            usage = shutil.disk_usage(path)
            volume: tuple[int, int] | None = (usage.total, usage.free)
        except OSError:
            volume = None
        replicas = []
        for replica in self._node.replicas:
            status = replica.group.status()
            lag = log_dirs.replica_lag(status.commit_index, status.last_applied)
            replicas.append(ReplicaDir(replica.topic.name, replica.partition, replica.log.size_bytes, lag))
        return log_dirs.log_dir(os.path.abspath(path), volume, replicas)

    def features(self) -> Features:
        return self._node.features

    def users(self) -> Mapping[str, tuple[ScramCredential, ...]]:
        return self._node.security.users()

    def acls(self) -> tuple[AclBinding, ...]:
        return self._node.security.acls()

    def tokens(self) -> Mapping[str, ApiToken]:
        return self._node.security.tokens()

    def delegation_tokens(self) -> Mapping[str, DelegationToken]:
        return self._node.security.delegation_tokens()

    def client_quotas(self) -> ClientQuotas:
        return self._node.client_quotas

    def resource_configs(self) -> Mapping[tuple[str, str], Mapping[str, str]]:
        return self._node.frontend.metadata().resource_configs

    def histograms(self) -> dict[str, HistogramSnapshot]:
        return {
            "produce_commit_seconds": self._node.data.commit_seconds.snapshot(),
            "journal_sync_seconds": journal_files.SYNC_SECONDS.snapshot(),
            "gc_pause_seconds": gc_pauses.PAUSE_SECONDS.snapshot(),
            "event_loop_lag_seconds": loop_lag.LAG_SECONDS.snapshot(),
            "event_loop_held_cpu_seconds": loop_lag.HELD_CPU_SECONDS.snapshot(),
            "raft_driver_round_seconds": ROUND_SECONDS.snapshot(),
            "cleaner_pass_seconds": self._node._logs.cleaner.stats.pass_seconds.snapshot(),
        }

    def metrics(self) -> dict[str, float]:
        node = self._node
        replicas = list(node.replicas)
        values = dict(node.data.counters)
        values["partition_replicas"] = len(replicas)
        values["partition_replicas_failed"] = len(node.replicas.local_failures())  # cannot open or replay
        values["partition_logs_salvaged"] = node._logs.salvaged  # a damaged segment set aside at open
        values["partition_replicas_max"] = node.config.replicas_max
        term = node.frontend.term()
        if term is not None:  # an election of the controller raises it (Kafka's controller epoch)
            values["controller_term"] = term
        led = [r for r in replicas if r.group.role_and_leader()[0] is Role.LEADER]
        values["partitions_led"] = len(led)
        for replica in led:  # bounded: the partitions of the cluster; topic names need no escaping
            labels = f'{{topic="{replica.topic.name}",partition="{replica.partition}"}}'
            values[f"partition_high_watermark{labels}"] = replica.log.end_offset  # applied = committed
            values[f"partition_log_start_offset{labels}"] = replica.log.log_start_offset
            values[f"partition_log_bytes{labels}"] = replica.log.size_bytes
        values["log_bytes"] = sum(r.log.size_bytes for r in replicas)
        cleaner = node._logs.cleaner.stats
        values["cleaner_dirty_bytes"] = cleaner.dirty_bytes
        values["cleaner_passes"] = cleaner.passes
        values["cleaner_threads"] = cleaner.threads
        values["cleaner_passes_stopped"] = cleaner.passes_stopped
        values["cleaner_failures"] = cleaner.failures
        values["cleaner_bytes_read"] = cleaner.bytes_read
        values["cleaner_bytes_reclaimed"] = cleaner.bytes_reclaimed
        values["cleaner_records_removed"] = cleaner.records_removed
        values["admin_move_steps"] = node.operator.steps_taken
        values["admin_leadership_transfers"] = node.operator.leadership_transfers
        values["partitions_moving"] = len(node.frontend.metadata().reassignments)
        for kind, count in node.client_quotas.throttled.items():  # Kafka door throttled, HTTP door refused
            values[f'client_quota_throttled_requests{{quota="{kind}"}}'] = count
        values["client_quota_meters"] = node.client_quotas.meters()
        values["removal_pending_paths"] = node.remover.pending()
        values["removal_pending_bytes"] = node.remover.backlog_bytes()
        values["disk_writes_refused"] = node.space.refusals
        for name, value in node.raft.stats().items():
            values[f"raft_transport_{name}"] = value
        for name, value in election_counts().items():
            values[f"raft_{name}"] = value
        for cause, value in leader_changes().items():  # bounded: LEADER_CHANGE_CAUSES
            values[f'leader_changes{{cause="{cause}"}}'] = value
        members = node.presence.nodes()
        for state in ("alive", "suspect", "dead", "left"):
            values[f'gossip_members{{state="{state}"}}'] = sum(1 for m in members if m.state == state)
        for member in members:  # as each node last gossiped it; node ids are plain names
            if member.disk_free_bytes is not None:
                values[f'node_disk_free_bytes{{node="{member.node_id}"}}'] = member.disk_free_bytes
            if member.disk_used_bytes is not None:
                values[f'node_disk_used_bytes{{node="{member.node_id}"}}'] = member.disk_used_bytes
            values[f'node_disk_full{{node="{member.node_id}"}}'] = int(member.disk_full)
        values.update(node.replicas.recoveries.metrics())
        values.update(node.replicas.serving.metrics())
        values.update(node.groups.metrics())
        values.update(node.transactions.metrics())
        return values
