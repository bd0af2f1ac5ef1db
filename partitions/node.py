"""A node: the controller group, this node's partition replicas, and the ``Broker`` the HTTP API uses.

Ownership and threads:
- the asyncio event loop runs every method here; it owns ``_replicas`` and reconciliation;
- one consensus ``Driver`` thread ticks every Raft group of the node, runs their ``apply`` and does the
  ``MuxHub``'s socket I/O (all groups' Raft traffic over one authenticated connection per peer), with
  ``journal_sync_threads`` threads writing and fdatasyncing large journal appends beside it;
- a replica left behind its log by an installed snapshot recovers the missing batches from its peers in
  an asyncio task (``recovery.Recoveries``, rate-limited per node), appending them in a worker thread;
- one ``LogManager`` background thread group-flushes logs, applies retention and closes idle files;
- one ``removal.Remover`` thread deletes dropped replicas' files at a pace;
- the data directory is this node's alone (``raftlog.storage.dirlock``) from construction to ``close``.
State machines notify the loop through ``raftlog.consensus.bridge.LoopNotifier`` (controller changes ->
reconcile replicas; partition commits -> wake long-polling fetches).

The controller voters are the first nodes of the static ``peers`` list; a node started with ``join``
follows the controller metadata over HTTP instead (``metadata_follower``). Every node gossip reports alive
is a placement target; replica moves, decommissions and the leader balancer run in ``operations.Operator``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp

from membership import Gossip, GossipConfig, Member, MemberState
from partitions import commands, decommission, reconfigure, replica_failures
from partitions.broker import NodeInfo, PartitionOffsets, PartitionState, ProduceResult, ReplicaState
from partitions.cluster_view import ClusterView, encode_meta
from partitions.controller import (
    CONTROLLER_GROUP,
    PARTITIONS_MAX,
    AlterConfigs,
    CancelMove,
    ControllerCommand,
    ControllerStateMachine,
    CreateTopic,
    DeleteTopic,
    MoveReplicas,
    Reassignment,
    SetNodeFlag,
    TopicMetadata,
    validate_topic,
)
from partitions.controller import encode as encode_controller
from partitions.errors import (
    DecommissionImpossible,
    InvalidReassignment,
    InvalidTopic,
    ReassignmentInProgress,
    ReplicaRecovering,
    UnknownNode,
    UnknownPartition,
    UnknownTopic,
)
from partitions.groups.coordinator import GROUP_PARTITIONS_DEFAULT, GroupCoordinator
from partitions.groups.replicated import ReplicatedGroupLog
from partitions.metadata_follower import MetadataFollower
from partitions.operations import Operator, internal_credential
from partitions.peer_batches import http_fetch_batches
from partitions.placement import REPLICAS_MAX_DEFAULT, check_capacity, place, replica_counts
from partitions.reconfigure import MoveProgress
from partitions.recovery import RATE_BYTES_PER_S_DEFAULT, Recoveries
from partitions.replica_failures import NO_FAILURES_DIGEST, FailedReplicas, ReplicaFailure
from partitions.state_machine import OffsetCommitted, PartitionStateMachine, Produced, Refused
from raftlog.consensus.bridge import LoopNotifier
from raftlog.consensus.cluster import open_mux_group
from raftlog.consensus.core import CoreConfig
from raftlog.consensus.driver import SYNC_THREAD_MIN_BYTES_DEFAULT, Driver
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.consensus.group import ReplicaGroup, election_counts, role_changes
from raftlog.consensus.interface import Role, StateMachine
from raftlog.consensus.transport import MuxHub
from raftlog.errors import InvariantViolation, RaftlogError, check
from raftlog.storage import removal
from raftlog.storage.batch import ProducerRecord, Record, check_producer_batch, encode_batch
from raftlog.storage.config import LogConfig
from raftlog.storage.dirlock import DirectoryLock
from raftlog.storage.errors import OffsetOutOfRange, RecordTooLarge
from raftlog.storage.log import Log, wall_clock_ms
from raftlog.storage.manager import LogManager

log = logging.getLogger("raftlog.node")
_GROUP_DIR = re.compile(r"^.+-\d+\.(?P<topic_id>\d+)$")  # TopicMetadata.group_id: name-partition.topic_id

CONTROLLER_VOTERS_MAX = 5
ADMIN_TIMEOUT_MS = 10_000
IN_SYNC_LAG_MAX = 1_000  # Raft entries a follower may trail and still count as in sync
CLAIMS_PUBLISH_INTERVAL_S = 0.2  # how often leadership changes are looked for and gossiped
CLAIMS_FETCH_TIMEOUT_S = 5.0
FAILURES_FETCH_ATTEMPTS = 5  # a peer's failure list that did not fit its gossip, fetched over HTTP
FAILURES_FETCH_RETRY_S = 1.0
LEADER_READY_WAIT_S = 2.0
# A new partition's preferred replica (and a new cluster's first controller voter) stands for election
# this soon after it opens (the others wait a random 1.5-3 s), retrying while no peer has answered: the
# peers open their replicas when they apply the topic's creation, which the controller's leader announces
# at once (milliseconds after it commits; at the next heartbeat if that announcement is lost).
FIRST_CAMPAIGN_DELAY_MS = 200
FIRST_CAMPAIGN_ATTEMPTS = 3
REJOIN_INTERVAL_S = 1.0  # how often a node that gossip has found alone retries its seeds
DISK_USAGE_INTERVAL_S = 15.0  # how often this node measures its data dir (a walk of every replica's files)
DISK_USAGE_WALK_SHARE = 0.02  # ... or less often, so that the walk takes at most this share of the time
DISK_USAGE_STEP_BYTES = 1 << 20  # a change smaller than this is not worth a gossip update
TIMESTAMP_AHEAD_MAX_MS = 3_600_000  # how far a producer's record timestamps may run ahead of the clock
DROP_SLICE = 256  # replicas closed per round trip to the driver thread when many go at once
DROP_YIELD_EVERY = 16  # replicas whose files are closed and renamed aside between two event-loop turns


JOURNAL_SYNC_THREADS_DEFAULT = 2
JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT = SYNC_THREAD_MIN_BYTES_DEFAULT // 1024


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
    retention_check_interval_ms: int = 60_000  # how often retention deletes old segments
    # Threads running large Raft journal syncs (write + fdatasync) off the driver thread (0: none), for
    # syncs of at least journal_sync_thread_min_bytes
    journal_sync_threads: int = JOURNAL_SYNC_THREADS_DEFAULT
    journal_sync_thread_min_bytes: int = JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT * 1024
    # Joining a running cluster: not a controller voter whatever the peer list says; the controller's
    # metadata is followed over HTTP (``metadata_follower``) and peers are learned by gossip.
    join: bool = False
    replicas_max: int = REPLICAS_MAX_DEFAULT  # partition replicas a node may hold (see placement)
    recovery_bytes_per_s: int = RATE_BYTES_PER_S_DEFAULT  # what all recoveries of replicas copy together

    def __post_init__(self) -> None:
        ids = [p.node_id for p in self.peers]
        check(len(set(ids)) == len(ids), f"peer ids repeat: {ids}")
        check(self.node_id in ids, f"node {self.node_id} is not among the peers {ids}")

    @property
    def controller_voters(self) -> list[str]:
        return sorted(p.node_id for p in self.peers)[:CONTROLLER_VOTERS_MAX]


class _Notifying:
    """Wraps a state machine so the event loop hears about every apply while a reader waits for one.

    ``wanted()`` is read after the apply: a reader counts itself in before it reads the high watermark,
    so either it sees the new records or this apply sees it waiting. Without readers no notification is
    sent: each would wake the event loop thread from the driver thread, on every replica."""

    def __init__(
        self, inner: StateMachine, notify: Callable[[], None], wanted: Callable[[], bool] | None = None
    ) -> None:
        self.inner = inner
        self._notify = notify
        self._wanted = wanted  # None: after every apply

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        result = self.inner.apply(index, term, command)
        if self._wanted is None or self._wanted():
            self._notify()
        return result

    def snapshot(self) -> bytes | None:
        return self.inner.snapshot()

    def restore(self, snapshot: bytes) -> None:
        self.inner.restore(snapshot)
        self._notify()


@dataclass(slots=True)
class _Replica:
    topic: TopicMetadata
    partition: int
    log: Log
    machine: PartitionStateMachine
    group: ReplicaGroup
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    waiters: int = 0  # long polls between reading the high watermark and waking; on the event loop only

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class Node:
    """Implements ``partitions.broker.Broker``. Create, ``await start()``, serve, ``await close()``."""

    def __init__(self, config: NodeConfig, clock: Callable[[], int] = wall_clock_ms) -> None:
        # The data directory is this node's alone before anything in it is read or written: a second
        # process on it is refused here (DirectoryLocked names the holder) and touches nothing.
        self._data_lock = DirectoryLock.acquire(config.data_dir, f"node {config.node_id}")
        try:
            self._init(config, clock)
        except BaseException:
            self._data_lock.close()
            raise

    def _init(self, config: NodeConfig, clock: Callable[[], int]) -> None:
        self.config = config
        self.node_id = config.node_id
        self._clock = clock
        self._peers = {p.node_id: p for p in config.peers}
        self._replicas: dict[str, _Replica] = {}
        self._reconcile_lock = asyncio.Lock()
        self._reconcile_again = False
        self._closing = False
        self._counters: dict[str, float] = {"produce_requests": 0, "produced_records": 0, "fetch_requests": 0}
        self._logs = LogManager(
            os.path.join(config.data_dir, "logs"),
            clock=clock,
            retention_check_interval_ms=config.retention_check_interval_ms,
            discard=self._discard_file,
        )
        self._driver = Driver(
            name=f"raft-{config.node_id}",
            timer_grid_ms=config.core.timer_grid_ms,
            sync_threads=config.journal_sync_threads,
            sync_thread_min_bytes=config.journal_sync_thread_min_bytes,
        )
        self._hub = MuxHub(
            config.node_id,
            config.raft_address,
            config.cluster_secret,
            peers={p.node_id: p.raft for p in config.peers if p.node_id != config.node_id},
        )
        self._controller_machine = ControllerStateMachine()
        self._controller: ReplicaGroup | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self._view = ClusterView(config.node_id)
        self._self_peer = self._peers[config.node_id]
        self._claims: dict[str, int] = {}
        self._claims_version = 0
        self._disk: tuple[int, int] | None = None  # (bytes used under data_dir, bytes free on its disk)
        # replicas that cannot open or replay, retried with backoff; gossiped while there are any
        self._failed = FailedReplicas(config.node_id)
        self._failures: list[ReplicaFailure] = []  # as last published, with their digest
        self._failures_digest = NO_FAILURES_DIGEST
        self._failures_fetching: set[str] = set()  # peers whose failure list is being fetched
        self._gossip = Gossip(
            config.node_id, config.gossip_address, config.cluster_secret, self._meta(), config.gossip
        )
        self._background: set[asyncio.Task[None]] = set()
        # Removes dropped replicas and released Raft journal segments one after another, at a pace
        self._remover = removal.Remover(name=f"raftlog-remover-{config.node_id}")
        self._sweep_due = True  # directories of deleted topics may be left from before this start
        self._replica_changes = 0  # bumped whenever a replica is opened or dropped (claims look again)
        self._http: aiohttp.ClientSession | None = None
        # what this node presents to its peers' internal endpoints (and checks on its own)
        self._credential = internal_credential(config.cluster_secret)
        self.groups = GroupCoordinator(
            ReplicatedGroupLog(
                topic=self.topic,
                create_topic=self.create_topic,
                ready_leader=self._ready_leader_now,
                leader=self._leader_replica,
                replication_factor=lambda: min(3, len(self._placeable())),
                partitions=config.group_partitions,
            )
        )
        self._operator = Operator(self)
        self._follower: MetadataFollower | None = None  # set when this node holds no controller replica
        self._recoveries = Recoveries(self._on_driver, config.recovery_bytes_per_s)

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(_remove_trees, [self._trash_dir()])  # a crash may have left some
        self._logs.start()
        # tick a group as soon as the hub queues a message for it; sleep in the poller otherwise
        # and run the hub's socket I/O on the driver thread too: no thread hand-off per message
        self._driver.watch_inbound(self._hub.take_ready_groups, wake_fd=self._hub.inbound_fd())
        self._driver.drive_hub(self._hub)
        self._driver.start()
        notifier = LoopNotifier(loop, self._schedule_reconcile)
        if self.node_id in self.config.controller_voters and not self.config.join:
            self._controller = await self._open_group(
                CONTROLLER_GROUP,
                self.config.controller_voters,
                _Notifying(self._controller_machine, notifier.notify),
                announce_commits=True,  # every node reconciles its replicas on applying metadata
            )
            if self.node_id == self.config.controller_voters[0]:
                # a new cluster: its first controller voter stands at once (no-op after a first election)
                self._controller.campaign_if_new(FIRST_CAMPAIGN_DELAY_MS, FIRST_CAMPAIGN_ATTEMPTS)
        else:
            self._follower = MetadataFollower(
                self.node_id,
                self._controller_machine,
                self._credential,
                self._metadata_sources,
                self._schedule_reconcile,
            )
            self._follower.start()
        await self._gossip.start()
        self._gossip.subscribe(self._on_member)
        for member in self._gossip.members():
            self._on_member(member)
        if self.config.seeds:
            answered = await self._gossip.join(list(self.config.seeds))
            log.info(
                "node %s: gossip join through %d seed(s): %d answered",
                self.node_id,
                len(self.config.seeds),
                answered,
            )
        self._spawn(self._publish_claims())
        self._spawn(self.groups.run())
        self._operator.start()
        if self.config.seeds:
            self._spawn(self._rejoin_while_alone())
        log.info(
            "node %s started (raft %s, gossip %s, peers %s)",
            self.node_id,
            self.config.raft_address,
            self._gossip.address,
            sorted(self._peers),
        )

    async def close(self) -> None:
        self._closing = True
        await self._operator.close()
        if self._follower is not None:
            await self._follower.close()
        await asyncio.to_thread(self._remover.close)  # between two steps; the next start finishes
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._recoveries.close()
        try:
            await self._gossip.leave()
        finally:
            await self._gossip.stop()
        if self._http is not None:
            await self._http.close()
        if self._reconcile_task is not None:
            self._reconcile_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconcile_task
        for replica in list(self._replicas.values()):
            replica.group.close()
        if self._controller is not None:
            self._controller.close()
        await self._driver_barrier()
        self._driver.stop()
        self._hub.close()
        self._logs.close()
        self._data_lock.close()

    async def _driver_barrier(self) -> None:
        """Wait until the driver thread has run everything queued before this call."""
        await asyncio.wrap_future(self._driver.submit(lambda: None))

    async def _on_driver(self, function: Callable[[], bool]) -> bool:
        """Run ``function`` on the driver thread, between two applies."""
        return await asyncio.wrap_future(self._driver.submit(function))

    def _http_session(self) -> aiohttp.ClientSession:
        """The node's one HTTP session (to its peers), opened at first use on the event loop."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CLAIMS_FETCH_TIMEOUT_S))
        return self._http

    def _group_dir(self, group_id: str) -> str:
        return os.path.join(self.config.data_dir, "raft", group_id)

    def _trash_dir(self) -> str:
        """Directories of dropped replicas on their way out; emptied again at every start."""
        return os.path.join(self.config.data_dir, "trash")

    async def _open_group(
        self, group_id: str, voters: Sequence[str], machine: StateMachine, announce_commits: bool = False
    ) -> ReplicaGroup:
        directory = self._group_dir(group_id)
        os.makedirs(directory, exist_ok=True)
        core = replace(
            self.config.core,
            snapshot_path=os.path.join(directory, "snapshot"),
            announce_commits=announce_commits,
        )
        return await open_mux_group(
            group_id,
            self.node_id,
            voters,
            machine,
            self._driver,
            self._hub,
            core,
            os.path.join(directory, "journal"),
            self._discard_file,
        )

    def _discard_file(self, path: str) -> None:
        """A file the storage no longer needs: a Raft journal segment a snapshot covers (driver thread), or
        a partition-log segment's file that retention or truncation deleted, once no reader holds it
        (under the log's lock, which the driver thread needs to apply entries). It leaves at once by a
        rename and the remover deletes it at its pace: unlinked here, a 64 MiB journal segment took
        15-44 ms of the thread every group of this node waits for, and retention of three 128 MiB log
        segments held the log's lock 104-143 ms, while every fsync on the disk waited behind the freed
        blocks' discards. A file whose whole directory went first (a replica dropped while a reader held
        one of its deleted segments) goes with that directory."""
        try:
            self._remove_later(path)
        except FileNotFoundError:
            log.debug("node %s: %s went with its directory", self.node_id, path)

    def _remove_later(self, path: str) -> None:
        """Any thread: rename ``path`` into trash/ now (one atomic rename; nothing reads it there) and
        have the remover delete it at its pace; a start empties trash/ of what a close or crash left."""
        self._remover.submit(_move_to_trash(path, self._trash_dir()))

    # -- gossip: addresses, liveness and leadership claims of the other nodes -------------------------

    @property
    def gossip_address(self) -> str:
        return self._gossip.address

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _meta(self) -> bytes:
        return encode_meta(
            self._self_peer.http,
            self._self_peer.raft,
            self._claims_version,
            self._claims,
            self.config.gossip.meta_bytes_max,
            self._disk,
            self._failures,
        )

    def _local_claims(self) -> dict[str, int]:
        claims = {}
        for group_id, replica in self._replicas.items():
            term = replica.group.leader_term()
            if term is not None:
                claims[group_id] = term
        return claims

    async def _publish_claims(self) -> None:
        """Re-publish this node's leadership claims in its gossip metadata whenever they change."""
        measure_at = 0.0  # a walk over thousands of replicas' files takes seconds: spaced by its duration
        seen: tuple[int, int] | None = None  # (role changes of this process's groups, replica map changes)
        while not self._closing:
            changed = False
            if time.monotonic() >= measure_at:
                started = time.monotonic()
                disk = await asyncio.to_thread(disk_usage, self.config.data_dir)
                took = time.monotonic() - started
                measure_at = started + max(DISK_USAGE_INTERVAL_S, took / DISK_USAGE_WALK_SHARE)
                if self._disk is None or any(
                    abs(now - before) >= DISK_USAGE_STEP_BYTES
                    for now, before in zip(disk, self._disk, strict=True)
                ):
                    self._disk = disk
                    changed = True
            marker = (role_changes(), self._replica_changes)  # read before the claims it vouches for
            if marker != seen:  # else no group changed role and no replica came or went: nothing to walk
                seen = marker
                claims = self._local_claims()
                if claims != self._claims:
                    self._claims = claims
                    self._claims_version += 1
                    changed = True
            changed = self._update_failures() or changed
            if changed:
                self._gossip.set_meta(self._meta())
            await asyncio.sleep(CLAIMS_PUBLISH_INTERVAL_S)

    async def _rejoin_while_alone(self) -> None:
        """Retry the seeds while gossip knows nobody else (a node started before every seed)."""
        while not self._closing and all(m.node_id == self.node_id for m in self._gossip.members()):
            await asyncio.sleep(REJOIN_INTERVAL_S)
            await self._gossip.join(list(self.config.seeds))

    def leadership(self) -> tuple[int, dict[str, int]]:
        """This node's published claims table and its version (served at /replication/leadership)."""
        return self._claims_version, dict(self._claims)

    def _update_failures(self) -> bool:
        """Settle retried replicas that have run long enough; True when the failure list to gossip changed
        (nothing to do per replica while none failed)."""
        if len(self._failed):
            running = {g for g, r in self._replicas.items() if r.group.stopped_error is None}
            self._failed.settle(running, time.monotonic())
        failures = self._failed.failures()
        if failures == self._failures:
            return False
        self._failures = failures
        self._failures_digest = replica_failures.digest(failures)
        return True

    def replica_failures(self) -> tuple[int, list[ReplicaFailure]]:
        """This node's published failed replicas and their digest (served at /replication/failures)."""
        return self._failures_digest, list(self._failures)

    def failed_replicas(self) -> list[ReplicaFailure]:
        """Every replica known to be unable to open or replay: this node's, and those its alive and suspect
        peers gossip."""
        failures = self._local_failures() + [f for f in self._view.failures() if f.node != self.node_id]
        return sorted(failures, key=lambda f: (f.topic, f.partition, f.node))

    def _local_failures(self) -> list[ReplicaFailure]:
        """This node's failed replicas, counting those whose core stopped and which are not closed yet."""
        failures = self._failed.failures()
        for group_id, replica in list(self._replicas.items()):
            if replica.group.stopped_error is not None and self._failed.get(group_id) is None:
                failures.append(self._stopped_failure(replica))
        return failures

    def _stopped_failure(self, replica: _Replica) -> ReplicaFailure:
        error = replica.group.stopped_error
        check(error is not None, f"replica {replica.group.group_id} has not stopped")
        assert error is not None  # narrowed for the type checker; checked above
        return ReplicaFailure(
            self.node_id, replica.topic.name, replica.partition, replica_failures.describe_error(error), 1
        )

    def _failure(self, node_id: str, metadata: TopicMetadata, partition: int) -> ReplicaFailure | None:
        """The failure of ``node_id``'s replica of the partition, if it cannot open or replay."""
        if node_id != self.node_id:
            return self._view.failure(node_id, metadata.name, partition)
        group_id = metadata.group_id(partition)
        failure = self._failed.get(group_id)
        replica = self._replicas.get(group_id)
        if failure is None and replica is not None and replica.group.stopped_error is not None:
            return self._stopped_failure(replica)  # stopped a moment ago, not closed yet
        return failure

    def _on_member(self, member: Member) -> None:
        """A gossip change (on the event loop): update the view, learn Raft addresses, fetch claims."""
        if member.state is MemberState.LEFT or member.state is MemberState.DEAD:
            self._view.update(member.node_id, member.state.value, member.incarnation, b"")
        meta = self._view.update(member.node_id, member.state.value, member.incarnation, member.meta)
        if member.node_id == self.node_id or meta is None:
            return
        if member.node_id not in self._peers:
            self._peers[member.node_id] = PeerConfig(member.node_id, meta.http, meta.raft)
        if self._hub.peers().get(member.node_id) != meta.raft and not self._closing:
            self._hub.set_peer(member.node_id, meta.raft)
        if self._view.needs_claims(member.node_id) and not self._closing:
            self._spawn(self._fetch_claims(member.node_id, meta.http))
        if (
            self._view.needs_failures(member.node_id)
            and member.node_id not in self._failures_fetching
            and not self._closing
        ):
            self._failures_fetching.add(member.node_id)
            self._spawn(self._fetch_failures(member.node_id, meta.http))

    async def _fetch_claims(self, node_id: str, http: str) -> None:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CLAIMS_FETCH_TIMEOUT_S))
        try:
            headers = {"Authorization": f"Bearer {self._credential}"}
            async with self._http.get(http + "/replication/leadership", headers=headers) as answer:
                body = await answer.json()
            self._view.set_claims(
                node_id, int(body["version"]), {str(g): int(t) for g, t in body["claims"].items()}
            )
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
            log.warning("node %s: fetching leadership claims of %s failed: %s", self.node_id, node_id, exc)

    async def _fetch_failures(self, node_id: str, http: str) -> None:
        """A peer's failed replicas, when its gossip carried only their digest (the list did not fit);
        retried a few times while still wanted, since the next gossip event may be long in coming."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CLAIMS_FETCH_TIMEOUT_S))
        headers = {"Authorization": f"Bearer {self._credential}"}
        try:
            for attempt in range(1, FAILURES_FETCH_ATTEMPTS + 1):
                if not self._view.needs_failures(node_id) or self._closing:
                    return
                try:
                    async with self._http.get(http + "/replication/failures", headers=headers) as answer:
                        answer.raise_for_status()
                        body = await answer.json()
                    failures = [
                        ReplicaFailure(
                            node_id, str(f["topic"]), int(f["partition"]), str(f["error"]), int(f["attempts"])
                        )
                        for f in body["failures"]
                    ]
                    self._view.set_failures(node_id, failures)
                    return
                except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                    log.warning(
                        "node %s: fetching the failed replicas of %s failed (attempt %d of %d): %s",
                        self.node_id, node_id, attempt, FAILURES_FETCH_ATTEMPTS, exc,
                    )  # fmt: skip
                await asyncio.sleep(FAILURES_FETCH_RETRY_S)
        finally:
            self._failures_fetching.discard(node_id)

    # -- reconciliation: make local replicas match the controller's assignment ----------------------

    def _schedule_reconcile(self) -> None:
        if self._closing:
            return
        if self._reconcile_task is None or self._reconcile_task.done():
            self._reconcile_task = asyncio.get_running_loop().create_task(self._reconcile())
        else:
            self._reconcile_again = True

    async def _reconcile(self) -> None:
        async with self._reconcile_lock:
            while True:
                self._reconcile_again = False
                try:
                    await self._reconcile_once()
                except Exception:  # a failure here must not stop later reconciliations; it is logged loudly
                    log.exception("node %s: reconciling partition replicas failed; retrying", self.node_id)
                    await asyncio.sleep(1)
                    self._reconcile_again = True
                if not self._reconcile_again or self._closing:
                    break
        retry_at = self._failed.next_retry_s()
        if retry_at is not None and not self._closing:
            self._spawn(self._retry_reconcile(max(0.0, retry_at - time.monotonic())))

    async def _retry_reconcile(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._schedule_reconcile()

    def _replica_failed(self, group_id: str, topic: str, partition: int, error: BaseException) -> None:
        """One replica could not be opened (e.g. a corrupt segment) or its core stopped (e.g. a replayed
        entry differs from the batch on disk): log it, report it, retry it later with backoff, and go on
        with the others."""
        delay_s = self._failed.record(group_id, topic, partition, error, time.monotonic())
        failure = self._failed.get(group_id)
        log.error(
            "node %s: replica %s cannot open or replay (attempt %d, next in %.0f s); the others go on: %s",
            self.node_id, group_id, failure.attempts if failure else 0, delay_s, error,
        )  # fmt: skip

    def _replica_stopped(self, group_id: str, group: ReplicaGroup) -> None:
        """Event loop: a replica's core stopped (an apply raised); it is closed and retried like a replica
        that cannot open."""
        if not self._closing:
            self._spawn(self._close_stopped(group_id, group))

    async def _close_stopped(self, group_id: str, group: ReplicaGroup) -> None:
        async with self._reconcile_lock:  # reconciliation opens and drops replicas: not at the same time
            replica = self._replicas.get(group_id)
            error = group.stopped_error
            if replica is None or replica.group is not group or error is None or self._closing:
                return  # dropped meanwhile, or this stop was already handled
            del self._replicas[group_id]
            self._recoveries.stop(group_id)
            group.close()
            replica.wake()
            await self._driver_barrier()
            self._logs.close_log(group_id)
            self._replica_failed(group_id, replica.topic.name, replica.partition, error)
        self._schedule_reconcile()  # which sets the retry timer

    async def _reconcile_once(self) -> None:
        topics = dict(self._controller_machine.topics)  # copied under the GIL: apply mutates it on the driver
        desired: dict[str, tuple[TopicMetadata, int]] = {}
        for metadata in topics.values():
            for partition, replicas in enumerate(metadata.replicas):
                if self.node_id in replicas:
                    desired[metadata.group_id(partition)] = (metadata, partition)
        for (name, partition), move in dict(self._controller_machine.reassignments).items():
            moving = topics.get(name)
            if move.adding == self.node_id and moving is not None:  # joining a moving partition
                desired[moving.group_id(partition)] = (moving, partition)
        await self._drop_replicas([g for g in self._replicas if g not in desired])
        self._failed.keep_only(desired)
        now = time.monotonic()
        for group_id, (metadata, partition) in desired.items():
            existing = self._replicas.get(group_id)
            if existing is None:
                if not self._failed.may_open(group_id, now):
                    continue
                try:
                    await self._open_replica(group_id, metadata, partition)
                except (RaftlogError, OSError) as error:
                    self._logs.close_log(group_id)
                    self._replica_failed(group_id, metadata.name, partition, error)
                    continue
                self._failed.opened(group_id, time.monotonic())
            elif existing.topic is not metadata:
                if existing.topic.configs != metadata.configs:
                    self._logs.reconfigure(group_id, metadata.log_config())
                existing.topic = metadata  # configs or replica sets changed
        await self._sweep_deleted_topics()

    async def _sweep_deleted_topics(self) -> None:
        """Remove what is left on disk of topics deleted while this node was down (it never opens those
        replicas again, so nothing else would). A directory goes only when the metadata proves its topic
        deleted: topic ids are the Raft index that created the topic, so an id at or below the applied
        index that no live topic has is gone for good. (A replica moved off this node while it was down
        is not covered: its topic lives on, and only fresh metadata could tell.) Leftovers only come from
        before this process started, so sweeps stop once one found none the metadata could not judge."""
        if not self._sweep_due:
            return
        applied = self._controller_machine.applied_index  # read first: topics applied up to it are below
        live = {metadata.topic_id for metadata in list(self._controller_machine.topics.values())}
        stray = []
        undecided = False  # a directory of a topic id the metadata has not reached yet
        for root in (self._logs.root, os.path.join(self.config.data_dir, "raft")):
            try:
                names = os.listdir(root)
            except FileNotFoundError:
                continue
            for name in names:
                match = _GROUP_DIR.match(name)
                if match is None or name in self._replicas:
                    continue
                topic_id = int(match["topic_id"])
                if topic_id > applied:
                    undecided = True
                elif topic_id not in live:
                    stray.append(os.path.join(root, name))
        self._sweep_due = undecided
        if not stray:
            return
        log.warning(
            "node %s: removing %d directories of topics deleted while it was away: %s",
            self.node_id, len(stray), ", ".join(sorted(stray)),
        )  # fmt: skip
        for path in stray:
            self._remove_later(path)

    async def _open_replica(self, group_id: str, metadata: TopicMetadata, partition: int) -> None:
        partition_log = self._logs.open_log(group_id, metadata.log_config())
        loop = asyncio.get_running_loop()
        # a restore that leaves the log behind (driver thread) starts its recovery on the event loop
        behind = LoopNotifier(loop, lambda: self._recover(group_id))
        machine = PartitionStateMachine(partition_log, on_behind=behind.notify)
        holder: list[_Replica] = []
        notifier = LoopNotifier(loop, lambda: holder[0].wake() if holder else None)
        voters = list(metadata.replicas[partition])
        if self.node_id not in voters:
            voters.append(self.node_id)  # joining a moving partition: the leader adds it next
        wanted = lambda: bool(holder) and holder[0].waiters > 0  # noqa: E731 (read on the driver thread)
        group = await self._open_group(group_id, voters, _Notifying(machine, notifier.notify, wanted))
        replica = _Replica(metadata, partition, partition_log, machine, group)
        holder.append(replica)
        self._replicas[group_id] = replica
        self._replica_changes += 1
        if machine.behind:  # restored before it was registered here: the notification found nothing
            self._recover(group_id)
        group.on_stop(LoopNotifier(loop, lambda: self._replica_stopped(group_id, group)).notify)
        if metadata.replicas[partition][0] == self.node_id:
            # Placement made this node the partition's preferred leader: a new group elects it at once
            # (no-op for a group that has held an election), so the leader balancer need not move it.
            group.campaign_if_new(FIRST_CAMPAIGN_DELAY_MS, FIRST_CAMPAIGN_ATTEMPTS)
        log.info(
            "node %s: replica of %s/%d opened (group %s)", self.node_id, metadata.name, partition, group_id
        )

    def _recover(self, group_id: str) -> None:
        """Event loop: start copying what the replica's log lacks from its peers (no-op if running)."""
        replica = self._replicas.get(group_id)
        if replica is None or self._closing or not replica.machine.behind:
            return
        topic, partition = replica.topic.name, replica.partition

        def peers() -> list[str]:  # its leader first: it holds every committed record
            leader = replica.group.status().leader
            others = [n for n in replica.topic.replicas[partition] if n != self.node_id]
            return sorted(others, key=lambda n: n != leader)

        fetch = http_fetch_batches(self._http_session, self.http_address, self._credential, topic, partition)
        self._recoveries.start(group_id, replica.machine, peers, fetch)

    async def _drop_replicas(self, group_ids: list[str]) -> None:
        """Close and delete the replicas this node no longer holds: all of a deleted topic's at once.
        Their groups close a slice at a time, with one round trip to the driver thread per slice (the
        driver runs queued calls before it reads its sockets: ten thousand at once held every group's
        traffic, the controller's included), their logs close without a last fsync (their data goes),
        and their directories are renamed aside, the event loop serving between slices."""
        for start in range(0, len(group_ids), DROP_SLICE):
            dropped = [(g, self._replicas.pop(g)) for g in group_ids[start : start + DROP_SLICE]]
            self._replica_changes += 1
            for group_id, replica in dropped:
                self._recoveries.stop(group_id)
                replica.group.close()
                replica.wake()
            await self._driver_barrier()
            for position, (group_id, replica) in enumerate(dropped):
                if position % DROP_YIELD_EVERY == DROP_YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # requests waiting on the event loop go first
                self._logs.close_log(group_id, seal=False)
                # Renamed aside at once (this node may open a replica of the same group again right away:
                # a move back), then removed by the remover's thread, paced (unlinking gigabytes at once
                # would stall the event loop, and every fsync on the disk behind its discards) and not
                # awaited: reconciliation, which may open a new topic's replicas next, does not wait.
                for path in (os.path.join(self._logs.root, group_id), self._group_dir(group_id)):
                    if os.path.isdir(path):
                        self._remove_later(path)
                log.debug(
                    "node %s: replica of %s/%d deleted", self.node_id, replica.topic.name, replica.partition
                )
            log.info("node %s: %d replica(s) deleted (%s ...)", self.node_id, len(dropped), dropped[0][0])

    # -- metadata ------------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        return sorted(self._controller_machine.topics)

    def topic(self, name: str) -> TopicMetadata:
        metadata = self._controller_machine.topics.get(name)
        if metadata is None:
            raise UnknownTopic(name)
        return metadata

    def _controller_group(self) -> ReplicaGroup:
        """This node's controller replica; a node outside the controller group names the leader instead
        (NotLeader: the API forwards the request there)."""
        if self._controller is None:
            leader = self.controller()
            raise NoLeader(CONTROLLER_GROUP) if leader is None else NotLeader(CONTROLLER_GROUP, leader)
        return self._controller

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> TopicMetadata:
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise InvalidTopic(f"partitions {partitions!r} must be an integer >= 1")
        if not isinstance(replication_factor, int) or isinstance(replication_factor, bool):
            raise InvalidTopic(f"replication_factor {replication_factor!r} must be an integer")
        if partitions > PARTITIONS_MAX:
            raise InvalidTopic(f"partitions {partitions} must be between 1 and {PARTITIONS_MAX}")
        existing = {t.name: [list(r) for r in t.replicas] for t in self._controller_machine.topics.values()}
        assignment = place(
            self._placeable(), partitions, replication_factor, existing, self.config.replicas_max
        )
        validate_topic(name, assignment, configs)
        result = await self._controller_group().propose(
            encode_controller(CreateTopic(name, assignment, dict(configs))), ADMIN_TIMEOUT_MS
        )
        if not isinstance(result, TopicMetadata):
            check(isinstance(result, Exception), f"controller returned {result!r}")
            raise result  # type: ignore[misc]
        await self._wait_for_replicas(result)
        return result

    def _placeable(self) -> list[str]:
        """Nodes a new replica may go to: every known node except those gossip reports suspect, dead or
        left (a configured peer gossip has not heard from yet, right after start, still counts)."""
        return sorted(n for n in self._peers if n == self.node_id or self._view.state(n) in (None, "alive"))

    async def _wait_for_replicas(self, metadata: TopicMetadata, timeout_s: float = 10.0) -> None:
        """Return once every partition of a new topic has a leader, as seen from here (a local replica's
        Raft status, or gossiped claims for partitions hosted elsewhere), so a produce right after the
        create succeeds; bounded, like Redpanda's create-topic wait. A timeout is not an error: the topic
        exists and leaders follow."""
        deadline = time.monotonic() + timeout_s

        def has_leader(partition: int) -> bool:
            group_id = metadata.group_id(partition)
            replica = self._replicas.get(group_id)
            if replica is not None:
                return replica.group.role_and_leader()[1] is not None
            if self.node_id in metadata.replicas[partition]:
                return False  # not opened here yet
            return self._view.leader_for(group_id) is not None

        waiting = list(range(metadata.partitions))
        while time.monotonic() < deadline:
            waiting = [p for p in waiting if not has_leader(p)]  # each led partition is looked at once
            if not waiting:
                return
            await asyncio.sleep(0.02)
        log.warning(
            "node %s: topic %s created; some partitions still have no leader", self.node_id, metadata.name
        )

    async def delete_topic(self, name: str) -> None:
        self.topic(name)
        result = await self._controller_group().propose(
            encode_controller(DeleteTopic(name)), ADMIN_TIMEOUT_MS
        )
        if isinstance(result, Exception):
            raise result

    # -- data ----------------------------------------------------------------------------------------

    def _replica(self, topic: str, partition: int) -> _Replica:
        metadata = self.topic(topic)
        if not isinstance(partition, int) or not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        group_id = metadata.group_id(partition)
        replica = self._replicas.get(group_id)
        if replica is None:
            raise NotLeader(group_id, self.leader_hint(topic, partition))
        return replica

    def _leader_replica(self, topic: str, partition: int) -> _Replica:
        replica = self._replica(topic, partition)
        role, leader = replica.group.role_and_leader()
        if role is not Role.LEADER:
            if leader is None:
                raise NoLeader(replica.group.group_id)
            raise NotLeader(replica.group.group_id, leader)
        return replica

    async def _reading_leader(self, topic: str, partition: int) -> _Replica:
        """The local leader replica once it may serve reads: it has applied its own term's no-op, so
        everything committed before its election is in its log (Raft's rule for leader reads)."""
        deadline = time.monotonic() + LEADER_READY_WAIT_S
        while True:
            replica = self._leader_replica(topic, partition)
            if replica.group.status().leader_ready:
                return replica
            if time.monotonic() >= deadline:
                raise NoLeader(replica.group.group_id)
            await asyncio.sleep(0.01)

    async def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[ProducerRecord],
        producer_id: int | None,
        sequence: int | None,
        timeout_ms: int,
    ) -> ProduceResult:
        replica = self._leader_replica(topic, partition)
        batch = encode_batch(0, records, 0, self._clock(), producer_id, sequence)
        return await self._propose_batch(replica, partition, batch, len(records), timeout_ms)

    async def produce_batch(self, topic: str, partition: int, batch: bytes, timeout_ms: int) -> ProduceResult:
        """Append a record batch the producer encoded (``raftlog.storage.batch.encode_batch`` with base
        offset 0 and term 0; its producer id and sequence ride in its header). It is checked as strictly as
        the records ``produce`` encodes, then replicated as it came: the leader builds nothing per record."""
        replica = self._leader_replica(topic, partition)
        header = check_producer_batch(batch, self._clock() + TIMESTAMP_AHEAD_MAX_MS)
        return await self._propose_batch(replica, partition, batch, header.record_count, timeout_ms)

    async def _propose_batch(
        self, replica: _Replica, partition: int, batch: bytes, count: int, timeout_ms: int
    ) -> ProduceResult:
        self._counters["produce_requests"] += 1
        limit = replica.log.config.max_message_bytes
        if len(batch) > limit:
            raise RecordTooLarge(len(batch), limit)
        result = await replica.group.propose(commands.encode_parts(commands.Produce(batch)), timeout_ms)
        if isinstance(result, Refused):
            raise result.error
        if not isinstance(result, Produced):  # not check(): its message would be formatted every time
            raise InvariantViolation(f"produce to {replica.group.group_id} returned {result!r}")
        self._counters["produced_records"] += 0 if result.duplicate else count
        return ProduceResult(partition, result.base_offset, result.end_offset, result.duplicate)

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> list[Record]:
        self._counters["fetch_requests"] += 1
        found = await self._committed_from(topic, partition, offset, timeout_ms)
        if found is None:
            return []
        replica, readable_end = found
        return replica.log.read(offset, max_bytes, max_offset=readable_end)

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> bytes:
        """Like :meth:`fetch`, but the committed batches as they are stored (CRC-checked, not decoded):
        the first may start before ``offset``, as in Kafka, and the reader skips what it did not ask for."""
        self._counters["fetch_requests"] += 1
        found = await self._committed_from(topic, partition, offset, timeout_ms)
        if found is None:
            return b""
        replica, readable_end = found
        batches = replica.log.read_batches(offset, max_bytes, max_offset=readable_end)
        return b"".join(batch.data for batch in batches)

    async def _committed_from(
        self, topic: str, partition: int, offset: int, timeout_ms: int
    ) -> tuple[_Replica, int] | None:
        """The leader replica and where a read from ``offset`` must stop (its high watermark, or its log's
        end while it recovers) once a committed record at ``offset`` exists, waiting up to ``timeout_ms``;
        None when none came. OffsetOutOfRange outside [log start, high watermark], ReplicaRecovering
        in [log end, high watermark) while the leader's log lacks those records."""
        replica = await self._reading_leader(topic, partition)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            replica.waiters += 1  # before the high watermark is read: see _Notifying
            try:
                changed = replica.changed
                high_watermark = replica.machine.high_watermark
                start = replica.log.log_start_offset
                if not start <= offset <= high_watermark:
                    raise OffsetOutOfRange(offset, start, high_watermark)
                if offset < high_watermark:
                    return replica, _readable_end(replica, offset, high_watermark)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), remaining)
            finally:
                replica.waiters -= 1
            replica = await self._reading_leader(topic, partition)

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> bytes:
        replica = self._replica(topic, partition)
        high_watermark = replica.machine.high_watermark
        start = replica.log.log_start_offset
        if not start <= offset <= high_watermark:
            raise OffsetOutOfRange(offset, start, high_watermark)
        if offset == high_watermark:
            return b""
        readable_end = _readable_end(replica, offset, high_watermark)  # a recovering replica: what it has
        return b"".join(b.data for b in replica.log.read_batches(offset, max_bytes, max_offset=readable_end))

    def _ready_leader_now(self, topic: str, partition: int) -> _Replica:
        """For synchronous reads: the leader replica if it may serve reads, else NoLeader (retriable)."""
        replica = self._leader_replica(topic, partition)
        if not replica.group.status().leader_ready:
            raise NoLeader(replica.group.group_id)
        return replica

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        replica = self._ready_leader_now(topic, partition)
        return PartitionOffsets(replica.log.log_start_offset, replica.machine.high_watermark)

    async def commit_offset(
        self, group: str, topic: str, partition: int, offset: int, reset: bool, timeout_ms: int
    ) -> int:
        replica = self._leader_replica(topic, partition)
        result = await replica.group.propose(
            commands.encode(commands.CommitOffset(group, offset, reset)), timeout_ms
        )
        if isinstance(result, Refused):
            raise result.error
        check(isinstance(result, OffsetCommitted), f"commit returned {result!r}")
        assert isinstance(result, OffsetCommitted)  # narrowed for the type checker; checked above
        return result.offset

    def committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        return self._ready_leader_now(topic, partition).machine.consumer_offsets.get(group)

    # -- admin ---------------------------------------------------------------------------------------

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """The leader's view (match offsets, lag, in sync) when this node leads; otherwise what this node's
        replica knows: the leader it follows (the API then asks that leader) or none, ``in_sync`` unknown.
        This node's replica cannot open or replay: NotLeader naming a known leader, else a state with no
        leader and no offsets. Any replica that cannot open or replay is "failed" with its error."""
        metadata = self.topic(topic)
        if not isinstance(partition, int) or not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        replica = self._replicas.get(metadata.group_id(partition))
        if replica is None or replica.group.stopped_error is not None:
            if replica is None and self._failure(self.node_id, metadata, partition) is None:
                replica = self._replica(topic, partition)  # no replica here: NotLeader names whom to ask
            else:
                return self._failed_here_state(metadata, partition)
        status = replica.group.status()
        leader = status.leader
        if leader is not None and self._failure(leader, metadata, partition) is not None:
            leader = None  # a replica that cannot open or replay leads nothing
        leading = leader == self.node_id and status.role is Role.LEADER
        last_index = status.last_index
        states = []
        listed = list(replica.topic.replicas[partition])
        listed += sorted(n for n in status.match_index if n not in listed)  # voters joining in a move
        for node in listed:
            failure = self._failure(node, metadata, partition)
            match = status.match_index.get(node) if leading else None
            lag = None if match is None else max(0, last_index - match)
            if failure is not None:
                states.append(ReplicaState(node, "failed", match, lag, False, failure.error))
            elif node == leader:
                states.append(ReplicaState(node, "leader", last_index, 0, True))
            elif leading:
                in_sync = lag is not None and lag <= IN_SYNC_LAG_MAX and self._hub.is_connected(node)
                states.append(ReplicaState(node, "follower", match, lag, in_sync))
            else:
                states.append(ReplicaState(node, "follower" if leader else "unknown"))  # in sync: unknown
        return PartitionState(
            topic,
            partition,
            leader,
            status.term,
            replica.machine.high_watermark,
            replica.log.log_start_offset,
            states,
            self.move_progress(topic, partition),
        )

    def _failed_here_state(self, metadata: TopicMetadata, partition: int) -> PartitionState:
        """This node's replica cannot open or replay: the leader's view if one is known (NotLeader names
        it), else no leader, and nothing this replica cannot tell (term, offsets, who is in sync)."""
        leader = self.known_leader(metadata.name, partition)
        if leader is not None:
            raise NotLeader(metadata.group_id(partition), leader)
        states = []
        for node in metadata.replicas[partition]:
            failure = self._failure(node, metadata, partition)
            if failure is not None:
                states.append(ReplicaState(node, "failed", in_sync=False, error=failure.error))
            else:
                states.append(ReplicaState(node, "unknown"))
        return PartitionState(
            metadata.name,
            partition,
            None,
            None,
            None,
            None,
            states,
            self.move_progress(metadata.name, partition),
        )

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> None:
        replica = self._leader_replica(topic, partition)
        if target == self.node_id:
            return  # already there
        await replica.group.transfer_leadership(target, timeout_ms)

    def nodes(self) -> list[NodeInfo]:
        led = self._view.leader_counts()
        led[self.node_id] = len(self._claims)
        known = set(self._peers) | set(self._view.node_ids())
        flags = self._controller_machine.node_flags
        return [
            NodeInfo(
                node_id,
                self.http_address(node_id) or "",
                self._liveness(node_id),
                self._gossip.incarnation if node_id == self.node_id else self._view.incarnation(node_id),
                led.get(node_id, 0),
                node_id in flags["maintenance"],
                node_id in flags["decommissioning"],
                *self._disk_of(node_id),
            )
            for node_id in sorted(known)
        ]

    def _disk_of(self, node_id: str) -> tuple[int | None, int | None]:
        if node_id == self.node_id:
            disk = self._disk
        else:
            meta = self._view.meta(node_id)
            disk = None if meta is None else meta.disk
        return (None, None) if disk is None else disk

    def _liveness(self, node_id: str) -> str:
        """Gossip's verdict; a configured peer gossip has not heard of yet counts as dead."""
        if node_id == self.node_id:
            return "alive"
        return self._view.state(node_id) or "dead"

    def controller(self) -> str | None:
        """The controller leader; None while unknown, and while this node leads the controller group but
        has not yet applied the metadata committed before its election (it cannot answer for topics)."""
        if self._controller is None:
            follower = self._follower
            return None if follower is None or not follower.synced else follower.leader
        status = self._controller.status()
        if status.role is Role.LEADER and not status.leader_ready:
            return None
        return status.leader

    def http_address(self, node_id: str) -> str | None:
        peer = self._peers.get(node_id)
        return None if peer is None else peer.http

    def known_leader(self, topic: str, partition: int) -> str | None:
        metadata = self.topic(topic)
        if not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        group_id = metadata.group_id(partition)
        replica = self._replicas.get(group_id)
        if replica is not None and replica.group.stopped_error is None:
            # A local replica's Raft view is authoritative, except that an isolated follower keeps naming
            # its old leader (pysyncobj holds no election while connected to no peer): a leader gossip
            # reports dead or left is not a known leader.
            leader = replica.group.role_and_leader()[1]
            if leader is not None and leader != self.node_id and self._view.state(leader) in ("dead", "left"):
                return None
        else:
            leader = self._view.leader_for(group_id)
            if leader == self.node_id:
                leader = None  # our own gossip may lag our Raft state
        if leader is not None and self._failure(leader, metadata, partition) is not None:
            return None  # a replica that cannot open or replay leads nothing, whatever a view still says
        return leader

    def leader_hint(self, topic: str, partition: int) -> str | None:
        try:
            metadata = self.topic(topic)
        except UnknownTopic:
            return None
        if not 0 <= partition < metadata.partitions:
            return None
        group_id = metadata.group_id(partition)

        def failed(node_id: str) -> bool:
            return self._failure(node_id, metadata, partition) is not None

        replica = self._replicas.get(group_id)
        if replica is not None and replica.group.stopped_error is None:
            leader = replica.group.role_and_leader()[1]
            if (
                leader is not None
                and (leader == self.node_id or self._view.state(leader) not in ("dead", "left"))
                and not failed(leader)
            ):
                return leader
        claimed = self._view.leader_for(group_id)
        if claimed is not None and claimed != self.node_id and not failed(claimed):
            return claimed
        alive = [
            n
            for n in metadata.replicas[partition]
            if n != self.node_id and self._liveness(n) == "alive" and not failed(n)
        ]
        return alive[0] if alive else None

    def metrics(self) -> dict[str, float]:
        values = dict(self._counters)
        values["partition_replicas"] = len(self._replicas)
        values["partition_replicas_failed"] = len(self._local_failures())  # cannot open or replay
        values["partition_replicas_max"] = self.config.replicas_max
        if self._controller is not None:  # an election of the controller raises it (Kafka's controller epoch)
            values["controller_term"] = self._controller.status().term
        values["partitions_led"] = sum(
            1 for r in self._replicas.values() if r.group.status().role is Role.LEADER
        )
        values["log_bytes"] = sum(r.log.size_bytes for r in self._replicas.values())
        values["admin_move_steps"] = self._operator.steps_taken
        values["admin_leadership_transfers"] = self._operator.leadership_transfers
        values["partitions_moving"] = len(self._controller_machine.reassignments)
        values["removal_pending_paths"] = self._remover.pending()
        values["removal_pending_bytes"] = self._remover.backlog_bytes()
        for name, value in self._hub.stats().items():
            values[f"raft_transport_{name}"] = value
        for name, value in election_counts().items():
            values[f"raft_{name}"] = value
        values.update(self._recoveries.metrics())
        values.update(self.groups.metrics())
        return values

    # -- operations: configs, replica moves, decommission, maintenance (driven by ``Operator``) --------

    def controller_state(self) -> ControllerStateMachine:
        """The applied controller metadata. Apply runs on the driver thread and replaces entries of its
        dicts: copy one (``dict(...)``, ``list(....values())``, atomic under the GIL) before iterating."""
        return self._controller_machine

    def leads_controller(self) -> bool:
        return self.controller() == self.node_id

    async def propose_controller(self, command: ControllerCommand) -> object:
        """Propose to the controller group (NotLeader when another node leads it); a refusal is raised."""
        result = await self._controller_group().propose(encode_controller(command), ADMIN_TIMEOUT_MS)
        if isinstance(result, Exception):
            raise result
        return result

    def alive_nodes(self) -> list[str]:
        known = set(self._peers) | set(self._view.node_ids())
        return sorted(n for n in known if self._liveness(n) == "alive")

    def _known_node(self, node_id: str) -> None:
        if node_id not in self._peers and node_id not in self._view.node_ids():
            raise UnknownNode(node_id)

    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        """Change a topic's configs; every replica applies them live (``Log.reconfigure``)."""
        metadata = self.topic(name)
        LogConfig.from_properties({**metadata.configs, **configs})  # InvalidConfig before proposing
        result = await self.propose_controller(AlterConfigs(name, dict(configs)))
        check(isinstance(result, TopicMetadata), f"alter configs returned {result!r}")
        assert isinstance(result, TopicMetadata)  # narrowed for the type checker; checked above
        return result

    def move_progress(self, topic: str, partition: int) -> MoveProgress | None:
        metadata = self.topic(topic)
        move = self._controller_machine.reassignments.get((topic, partition))
        return None if move is None else MoveProgress.of(move, metadata.replicas[partition])

    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        """Start moving a partition to ``replicas`` (validated against gossip liveness: nothing changes
        when it is refused). The controller leader's ``Operator`` then drives it."""
        metadata = self.topic(topic)
        if not isinstance(partition, int) or not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        self._controller_group()
        if not self.leads_controller():
            raise NotLeader(CONTROLLER_GROUP, self._controller_group().status().leader)
        moving = self._controller_machine.reassignments.get((topic, partition))
        if moving is not None:
            raise ReassignmentInProgress(topic, partition, moving.target)
        flags = self._controller_machine.node_flags
        target = reconfigure.validate_move(
            metadata.replicas[partition],
            replicas,
            set(self._peers) | set(self._view.node_ids()),
            self.alive_nodes(),
            flags["decommissioning"],
        )
        added = {node: 1 for node in target if node not in metadata.replicas[partition]}
        topics = list(self._controller_machine.topics.values())
        held = replica_counts(list(added), [other.replicas for other in topics])
        check_capacity(f"moving {topic}/{partition} to {target}", held, added, self.config.replicas_max)
        result = await self.propose_controller(MoveReplicas(topic, partition, target))
        check(isinstance(result, Reassignment), f"move returned {result!r}")
        assert isinstance(result, Reassignment)  # narrowed for the type checker; checked above
        return MoveProgress.of(result, metadata.replicas[partition])

    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        self.topic(topic)
        result = await self.propose_controller(CancelMove(topic, partition))
        check(isinstance(result, Reassignment), f"cancel returned {result!r}")
        assert isinstance(result, Reassignment)  # narrowed for the type checker; checked above
        return MoveProgress.of(result, self.topic(topic).replicas[partition])

    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        """Mark a node decommissioning / in maintenance, or clear it. Recommissioning also turns around the
        moves still taking replicas off the node. A decommission that could never finish (a replica with no
        node to go to) is refused: DecommissionImpossible, nothing changes."""
        self._known_node(node_id)
        if flag == "decommissioning" and on and node_id not in self._controller_machine.node_flags[flag]:
            if not self.leads_controller():  # judged on the metadata every committed move is applied to
                raise NotLeader(CONTROLLER_GROUP, self._controller_group().status().leader)
            self._refuse_impossible_decommission(node_id)
        await self.propose_controller(SetNodeFlag(node_id, flag, on))
        if flag == "decommissioning" and not on:
            await self._operator.cancel_moves_off(node_id)

    def _decommission_blockers(self, node_id: str) -> list[decommission.Blocked]:
        machine = self._controller_machine
        return decommission.blockers(
            node_id,
            {m.name: m.replicas for m in list(machine.topics.values())},
            dict(machine.reassignments),
            self.alive_nodes(),
            {*machine.node_flags["decommissioning"], node_id},
        )

    def _refuse_impossible_decommission(self, node_id: str) -> None:
        stuck = [b for b in self._decommission_blockers(node_id) if b.kind == "no_target"]
        if stuck:
            leaving = {*self._controller_machine.node_flags["decommissioning"], node_id}
            message = decommission.refusal(node_id, stuck, self.alive_nodes(), leaving)
            raise DecommissionImpossible(
                node_id, message, tuple((b.topic, b.partition, b.reason) for b in stuck)
            )

    def decommission_status(self, node_id: str) -> dict[str, Any]:
        self._known_node(node_id)
        machine = self._controller_machine
        holding = [
            {"topic": m.name, "partition": p}
            for m in sorted(list(machine.topics.values()), key=lambda m: m.name)
            for p, replicas in enumerate(m.replicas)
            if node_id in replicas
        ]
        moving = [
            {"topic": t, "partition": p, "target": list(move.target)}
            for (t, p), move in sorted(dict(machine.reassignments).items())
            if node_id in move.original and node_id not in move.target
        ]
        decommissioning = node_id in machine.node_flags["decommissioning"]
        return {
            "node_id": node_id,
            "decommissioning": decommissioning,
            "replicas_remaining": len(holding),
            "partitions": holding,
            "moving": moving,
            "done": decommissioning and not holding,
            # partitions that cannot move off the node now, and why
            "blocked": [
                {"topic": b.topic, "partition": b.partition, "reason": b.reason}
                for b in (self._decommission_blockers(node_id) if decommissioning else [])
            ],
            # the controller group's voters are fixed: a decommissioned voter still counts in its quorum
            "controller_voter": node_id in self.config.controller_voters and not self.config.join,
        }

    def internal_credential_ok(self, presented: str) -> bool:
        return self._operator.credential_ok(presented)

    def local_member_view(self, topic: str, partition: int) -> reconfigure.MemberView | None:
        """This node's view of a partition's Raft group if it leads it and may act (else None)."""
        metadata = self._controller_machine.topics.get(topic)
        if metadata is None or not 0 <= partition < metadata.partitions:
            return None
        replica = self._replicas.get(metadata.group_id(partition))
        if replica is None:
            return None
        status = replica.group.status()
        if status.role is not Role.LEADER or not status.leader_ready:
            return None
        return reconfigure.MemberView(
            self.node_id,
            frozenset([self.node_id, *status.match_index]),
            status.commit_index,
            dict(status.match_index),
        )

    def member_view(self, topic: str, partition: int) -> reconfigure.MemberView:
        """For the internal membership endpoint: NotLeader / NoLeader unless this node leads it."""
        replica = self._leader_replica(topic, partition)
        view = self.local_member_view(topic, partition)
        if view is None:
            raise NoLeader(replica.group.group_id)
        return view

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        """On the partition leader: one Raft membership change ("add", "remove") or a leadership
        "transfer". Adding a voter already present, or removing one already gone, is done already."""
        replica = self._leader_replica(topic, partition)
        voters = {self.node_id, *replica.group.status().match_index}
        if change == "add":
            if node_id not in voters:
                await replica.group.add_replica(node_id, timeout_ms)
        elif change == "remove":
            if node_id in voters:
                await replica.group.remove_replica(node_id, timeout_ms)
        elif change == "transfer":
            if node_id != self.node_id:
                await replica.group.transfer_leadership(node_id, timeout_ms)
        else:
            raise InvalidReassignment(f"unknown membership change {change!r}")

    # -- controller metadata for nodes outside the controller group ----------------------------------

    def _metadata_sources(self) -> list[str]:
        return [self._peers[n].http for n in self.alive_nodes() if n != self.node_id and n in self._peers]

    async def controller_snapshot(self, known_index: int | None) -> tuple[str, str, int, bytes | None]:
        """(leader id, leader URL, applied index, snapshot) of this node's controller replica, taken on
        the driver thread between applies; NotLeader elsewhere (the API forwards)."""
        group = self._controller_group()
        leader = self.controller()
        if leader is None:
            raise NoLeader(CONTROLLER_GROUP)
        machine = self._controller_machine
        if known_index is not None and machine.applied_index == known_index:
            return leader, self.http_address(leader) or "", known_index, None

        def take() -> tuple[int, bytes]:
            return machine.applied_index, machine.snapshot()

        applied_index, snapshot = await asyncio.wrap_future(self._driver.submit(take))
        check(group is self._controller, "controller replica changed while snapshotting")
        return leader, self.http_address(leader) or "", applied_index, snapshot


def _readable_end(replica: _Replica, offset: int, high_watermark: int) -> int:
    """Where a read of committed records from ``offset`` (below ``high_watermark``) stops: the high
    watermark, or the log's end while the replica recovers what lies between (ReplicaRecovering when
    ``offset`` is there). Read after the high watermark: an apply appends before it raises it."""
    log_end = replica.log.end_offset
    if offset >= log_end:
        raise ReplicaRecovering(replica.group.group_id, log_end, high_watermark)
    return min(log_end, high_watermark)


def disk_usage(data_dir: str) -> tuple[int, int]:
    """(bytes of every file under ``data_dir``, bytes free on its file system)."""
    return removal.tree_bytes(data_dir), shutil.disk_usage(data_dir).free


def _move_to_trash(path: str, trash_dir: str) -> str:
    """Rename ``path`` into ``trash_dir`` under a fresh name (same file system: one atomic rename)."""
    os.makedirs(trash_dir, exist_ok=True)
    target = os.path.join(trash_dir, f"{os.path.basename(path)}.{uuid.uuid4().hex}")
    os.rename(path, target)
    return target


def _remove_trees(paths: Sequence[str]) -> None:
    """Remove directory trees at once (a worker thread, at start: before the node serves, so no pace);
    what cannot be removed stays for the next start."""
    for path in paths:
        try:
            removal.remove_tree(path, None)
        except OSError as exc:
            log.error("could not remove %s (retried at the next start): %s", path, exc)
