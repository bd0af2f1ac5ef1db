"""This node's partition replicas: the only owner of the replica map (Redpanda's ``partition_manager``
with the reconciling half of its ``controller_backend``).

After every controller apply (and at start) the event loop reconciles the map to the controller's
assignment: it opens the replicas this node should hold (a ``PartitionStateMachine`` over the partition's
``Log``, in a Raft group opened on the node's ``RaftHost``), drops those it no longer holds (closed a slice
at a time, their directories renamed into the trash and removed at a pace), reconfigures those whose
topic changed, and removes directories of topics deleted while the node was away. A replica that cannot
open, or whose core stops while applying, is closed and retried with a doubling backoff
(``FailedReplicas``) while the others go on.

Everyone else reads the map (``get``, ``items``) and never changes it. Event loop only, but for what a
state machine notifies through ``raftlog.consensus.bridge.LoopNotifier``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field
from typing import Any

from partitions import replication_throttles
from partitions.controller.state import ControllerMetadata, TopicMetadata
from partitions.replicas import failures as replica_failures
from partitions.replicas.failures import FailedReplicas, ReplicaFailure
from partitions.replicas.raft_host import RaftHost
from partitions.replicas.recovery import FetchBatches, Recoveries
from partitions.replicas.recovery_serving import RecoveryServing
from partitions.replicas.state_machine import PartitionStateMachine
from partitions.replicas.submit_order import SubmitOrder
from raftlog.consensus.bridge import LoopNotifier
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.interface import StateMachine
from raftlog.errors import RaftlogError, check
from raftlog.storage.config import LogConfig
from raftlog.storage.log import Log
from raftlog.storage.manager import LogManager
from raftlog.storage.removal import Trash

log = logging.getLogger("raftlog.node")
_GROUP_DIR = re.compile(r"^.+-\d+\.(?P<topic_id>\d+)$")  # TopicMetadata.group_id: name-partition.topic_id

# A new partition's preferred replica (and a new cluster's first controller voter) stands for election
# this soon after it opens (the others wait a random 1.5-3 s), retrying while no peer has answered: the
# peers open their replicas when they apply the topic's creation, which the controller's leader announces
# at once (milliseconds after it commits; at the next heartbeat if that announcement is lost).
FIRST_CAMPAIGN_DELAY_MS = 200
FIRST_CAMPAIGN_ATTEMPTS = 3
# replicas opened at once when many open (a new topic's, a restart's): their cores are built on the driver
# thread in one of its rounds, not one round each (a round grows with the groups already open: one open a
# round made a 2,000-partition topic's last replicas open at a third of its first ones' pace)
OPEN_SLICE = 32
OPEN_THREADS = 2
DROP_SLICE = 256  # replicas closed per round trip to the driver thread when many go at once
DROP_YIELD_EVERY = 16  # replicas whose files are closed and renamed aside between two event-loop turns


class Notifying:
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
class Replica:
    topic: TopicMetadata
    partition: int
    log: Log
    machine: PartitionStateMachine
    group: ReplicaGroup
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    waiters: int = 0  # long polls between reading the high watermark and waking; on the event loop only
    submit_order: SubmitOrder = field(default_factory=SubmitOrder)  # produces propose in call order
    # called at each wake: a long poll over many partitions waits on them all at once (DataPlane.wait_any)
    watchers: set[Callable[[], None]] = field(default_factory=set)

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()
        for watcher in tuple(self.watchers):
            watcher()


@dataclass(eq=False)
class ReplicaManager:
    """Create with the node; ``schedule_reconcile()`` whenever the metadata may have changed; ``await
    close()`` before the node's Raft host stops. ``recovery_bytes_per_s`` bounds its recoveries; the
    replication throttles of the controller's metadata bound those of listed replicas and what this node
    serves to its peers' (``partitions.replication_throttles``)."""

    node_id: str
    _raft: RaftHost
    _logs: LogManager
    _trash: Trash
    _metadata: Callable[[], ControllerMetadata]
    _peer_batches: Callable[[str, int], FetchBatches]  # (topic, partition) -> its batches from peer replicas
    recovery_bytes_per_s: InitVar[int]
    # replicas whose log an installed snapshot left behind copy what they lack from their peers
    recoveries: Recoveries = field(init=False)
    serving: RecoveryServing = field(init=False)  # what this node's replicas serve to peers' recoveries
    _replicas: dict[str, Replica] = field(default_factory=dict, init=False)
    failed: FailedReplicas = field(init=False)  # replicas that cannot open or replay, retried with backoff
    # bumped whenever a replica is opened or dropped (leadership claims look again)
    changes: int = field(default=0, init=False)
    # reconciliation and the closing of a stopped replica: one at a time
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _again: bool = field(default=False, init=False)
    _closing: bool = field(default=False, init=False)
    # the cluster's defaults of topics' log configs the open replicas were configured with
    _log_defaults: dict[str, str] = field(default_factory=dict, init=False)
    # directories of deleted topics may be left from before this start
    _sweep_due: bool = field(default=True, init=False)
    _background: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    # where a replica's files are opened: its log and its Raft journal, fsyncs among them, off the event
    # loop and several at once (the disk takes concurrent syncs at a fraction of the cost of serial ones)
    _opener: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(OPEN_THREADS, thread_name_prefix="replica-open"),
        init=False,
    )

    def __post_init__(self, recovery_bytes_per_s: int) -> None:
        self.recoveries = Recoveries(self._raft.run, recovery_bytes_per_s)
        self.serving = RecoveryServing(
            lambda topic, partition: replication_throttles.leader_rate(
                self._metadata().resource_configs, topic, partition, self.node_id
            )
        )
        self.failed = FailedReplicas(self.node_id)

    # -- the map, for everyone else ------------------------------------------------------------------

    def get(self, group_id: str) -> Replica | None:
        return self._replicas.get(group_id)

    def items(self) -> list[tuple[str, Replica]]:
        """A copy: the map changes between event-loop turns."""
        return list(self._replicas.items())

    def __iter__(self) -> Iterator[Replica]:
        return iter(list(self._replicas.values()))

    def __len__(self) -> int:
        return len(self._replicas)

    def local_failures(self) -> list[ReplicaFailure]:
        """This node's failed replicas, counting those whose core stopped and which are not closed yet."""
        failures = self.failed.failures()
        for group_id, replica in list(self._replicas.items()):
            if replica.group.stopped_error is not None and self.failed.get(group_id) is None:
                failures.append(self.stopped_failure(replica))
        return failures

    def failure_here(self, metadata: TopicMetadata, partition: int) -> ReplicaFailure | None:
        """The failure of this node's replica of the partition, if it cannot open or replay."""
        group_id = metadata.group_id(partition)
        failure = self.failed.get(group_id)
        replica = self._replicas.get(group_id)
        if failure is None and replica is not None and replica.group.stopped_error is not None:
            return self.stopped_failure(replica)  # stopped a moment ago, not closed yet
        return failure

    def stopped_failure(self, replica: Replica) -> ReplicaFailure:
        error = replica.group.stopped_error
        check(error is not None, f"replica {replica.group.group_id} has not stopped")
        assert error is not None  # narrowed for the type checker; checked above
        return ReplicaFailure(
            self.node_id, replica.topic.name, replica.partition, replica_failures.describe_error(error), 1
        )

    def settle_failures(self) -> None:
        """Forget failures of retried replicas that have run long enough."""
        if len(self.failed):
            running = {g for g, r in self._replicas.items() if r.group.stopped_error is None}
            self.failed.settle(running, time.monotonic())

    # -- lifecycle -----------------------------------------------------------------------------------

    async def close(self) -> None:
        self._closing = True
        tasks = [t for t in [self._task, *self._background] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.recoveries.close()
        self._opener.shutdown(wait=False)  # cancelled opens' files are the log manager's to close
        for replica in list(self._replicas.values()):
            replica.group.close()
            replica.wake()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- reconciliation: make local replicas match the controller's assignment ----------------------

    def schedule_reconcile(self) -> None:
        if self._closing:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._reconcile())
        else:
            self._again = True

    async def _reconcile(self) -> None:
        async with self._lock:
            while True:
                self._again = False
                try:
                    await self._reconcile_once()
                except Exception:  # a failure here must not stop later reconciliations; it is logged loudly
                    log.exception("node %s: reconciling partition replicas failed; retrying", self.node_id)
                    await asyncio.sleep(1)
                    self._again = True
                if not self._again or self._closing:
                    break
        retry_at = self.failed.next_retry_s()
        if retry_at is not None and not self._closing:
            self._spawn(self._retry_reconcile(max(0.0, retry_at - time.monotonic())))

    async def _retry_reconcile(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self.schedule_reconcile()

    async def _reconcile_once(self) -> None:
        metadata = self._metadata()  # one immutable view: apply publishes a new one on the driver thread
        desired: dict[str, tuple[TopicMetadata, int]] = {}
        for topic in metadata.topics.values():
            for partition, replicas in enumerate(topic.replicas):
                if self.node_id in replicas:
                    desired[topic.group_id(partition)] = (topic, partition)
        for (name, partition), move in metadata.reassignments.items():
            moving = metadata.topics.get(name)
            if move.adding == self.node_id and moving is not None:  # joining a moving partition
                desired[moving.group_id(partition)] = (moving, partition)
        await self._drop([g for g in self._replicas if g not in desired])
        self.failed.keep_only(desired)
        defaults = metadata.topic_log_defaults()  # the cluster's defaults of topics' log configs
        defaults_changed, self._log_defaults = defaults != self._log_defaults, defaults
        now = time.monotonic()
        opening: list[tuple[str, TopicMetadata, int]] = []
        for group_id, (topic, partition) in desired.items():
            existing = self._replicas.get(group_id)
            if existing is None:
                if self.failed.may_open(group_id, now):
                    opening.append((group_id, topic, partition))
            elif existing.topic is not topic or defaults_changed:
                # its own configs or replica set changed, or the cluster's defaults of its configs
                wanted = topic.log_config(defaults)
                if wanted != existing.log.config:
                    self._logs.reconfigure(group_id, wanted)
                existing.topic = topic
        for start in range(0, len(opening), OPEN_SLICE):
            if self._closing:
                return
            opened = await asyncio.gather(
                *(self._open_or_fail(g, t, p, defaults) for g, t, p in opening[start : start + OPEN_SLICE]),
                return_exceptions=True,
            )  # every open of the slice has ended (none left running to race a retry) before one is raised
            for outcome in opened:
                if isinstance(outcome, BaseException):
                    raise outcome
        await self._sweep_deleted_topics(metadata)

    async def _open_or_fail(
        self, group_id: str, topic: TopicMetadata, partition: int, defaults: dict[str, str]
    ) -> None:
        """Open one replica; one that cannot open is recorded failed (retried with backoff), not raised."""
        try:
            await self._open(group_id, topic, partition, topic.log_config(defaults))
        except (RaftlogError, OSError) as error:
            self._logs.close_log(group_id)
            self._failed(group_id, topic.name, partition, error)
            return
        self.failed.opened(group_id, time.monotonic())

    async def _open(self, group_id: str, topic: TopicMetadata, partition: int, config: LogConfig) -> None:
        # with peers, a damaged sealed segment is set aside and its records copied again from them
        peers = len(topic.replicas[partition]) > 1 or self.node_id not in topic.replicas[partition]
        loop = asyncio.get_running_loop()
        partition_log = await loop.run_in_executor(
            self._opener, functools.partial(self._logs.open_log, group_id, config, salvage=peers)
        )
        # a restore that leaves the log behind (driver thread) starts its recovery on the event loop
        behind = LoopNotifier(loop, lambda: self._recover(group_id))
        machine = PartitionStateMachine(partition_log, on_behind=behind.notify)
        holder: list[Replica] = []
        notifier = LoopNotifier(loop, lambda: holder[0].wake() if holder else None)
        voters = list(topic.replicas[partition])
        # joining a moving partition: a learner until the leader, once it caught up, promotes it
        learners = [] if self.node_id in voters else [self.node_id]
        wanted = lambda: bool(holder) and holder[0].waiters > 0  # noqa: E731 (read on the driver thread)
        group = await self._raft.open(
            group_id,
            voters,
            Notifying(machine, notifier.notify, wanted),
            learners=learners,
            opener=self._opener,
        )
        replica = Replica(topic, partition, partition_log, machine, group)
        holder.append(replica)
        self._replicas[group_id] = replica
        self.changes += 1
        if machine.behind:  # restored before it was registered here: the notification found nothing
            self._recover(group_id)
        group.on_stop(LoopNotifier(loop, lambda: self._stopped(group_id, group)).notify)
        if topic.replicas[partition][0] == self.node_id:
            # Placement made this node the partition's preferred leader: a new group elects it at once
            # (no-op for a group that has held an election), so the leader balancer need not move it.
            group.campaign_if_new(FIRST_CAMPAIGN_DELAY_MS, FIRST_CAMPAIGN_ATTEMPTS)
        log.info("node %s: replica of %s/%d opened (group %s)", self.node_id, topic.name, partition, group_id)

    def _recover(self, group_id: str) -> None:
        """Event loop: start copying what the replica's log lacks from its peers (no-op if running)."""
        replica = self._replicas.get(group_id)
        if replica is None or self._closing or not replica.machine.behind:
            return
        partition = replica.partition

        def peers() -> list[str]:  # its leader first: it holds every committed record
            leader = replica.group.role_and_leader()[1]
            others = [n for n in replica.topic.replicas[partition] if n != self.node_id]
            return sorted(others, key=lambda n: n != leader)

        def throttle() -> int | None:  # Kafka's follower quota, as the configs are now
            return replication_throttles.follower_rate(
                self._metadata().resource_configs, replica.topic.name, partition, self.node_id
            )

        fetch = self._peer_batches(replica.topic.name, partition)
        self.recoveries.start(group_id, replica.machine, peers, fetch, throttle)

    async def _drop(self, group_ids: list[str]) -> None:
        """Close and delete the replicas this node no longer holds: all of a deleted topic's at once.
        Their groups close a slice at a time, with one round trip to the driver thread per slice (the
        driver runs queued calls before it reads its sockets: ten thousand at once held every group's
        traffic, the controller's included), their logs close without a last fsync (their data goes),
        and their directories are renamed aside, the event loop serving between slices."""
        for start in range(0, len(group_ids), DROP_SLICE):
            dropped = [(g, self._replicas.pop(g)) for g in group_ids[start : start + DROP_SLICE]]
            self.changes += 1
            for group_id, replica in dropped:
                self.recoveries.stop(group_id)
                replica.group.close()
                replica.wake()
            await self._raft.barrier()
            for position, (group_id, replica) in enumerate(dropped):
                if position % DROP_YIELD_EVERY == DROP_YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # requests waiting on the event loop go first
                self._logs.close_log(group_id, seal=False)
                # Renamed aside at once (this node may open a replica of the same group again right away:
                # a move back), then removed by the remover's thread, paced (unlinking gigabytes at once
                # would stall the event loop, and every fsync on the disk behind its discards) and not
                # awaited: reconciliation, which may open a new topic's replicas next, does not wait.
                for path in (os.path.join(self._logs.root, group_id), self._raft.group_dir(group_id)):
                    if os.path.isdir(path):
                        self._trash.discard(path)
                log.debug(
                    "node %s: replica of %s/%d deleted", self.node_id, replica.topic.name, replica.partition
                )
            log.info("node %s: %d replica(s) deleted (%s ...)", self.node_id, len(dropped), dropped[0][0])

    # -- failures ------------------------------------------------------------------------------------

    def _failed(self, group_id: str, topic: str, partition: int, error: BaseException) -> None:
        """One replica could not be opened (e.g. a corrupt segment) or its core stopped (e.g. a replayed
        entry differs from the batch on disk): log it, report it, retry it later with backoff, and go on
        with the others."""
        delay_s = self.failed.record(group_id, topic, partition, error, time.monotonic())
        failure = self.failed.get(group_id)
        log.error(
            "node %s: replica %s cannot open or replay (attempt %d, next in %.0f s); the others go on: %s",
            self.node_id, group_id, failure.attempts if failure else 0, delay_s, error,
        )  # fmt: skip

    def _stopped(self, group_id: str, group: ReplicaGroup) -> None:
        """Event loop: a replica's core stopped (an apply raised); it is closed and retried like a replica
        that cannot open."""
        if not self._closing:
            self._spawn(self._close_stopped(group_id, group))

    async def _close_stopped(self, group_id: str, group: ReplicaGroup) -> None:
        async with self._lock:  # reconciliation opens and drops replicas: not at the same time
            replica = self._replicas.get(group_id)
            error = group.stopped_error
            if replica is None or replica.group is not group or error is None or self._closing:
                return  # dropped meanwhile, or this stop was already handled
            del self._replicas[group_id]
            self.recoveries.stop(group_id)
            group.close()
            replica.wake()
            await self._raft.barrier()
            self._logs.close_log(group_id)
            self._failed(group_id, replica.topic.name, replica.partition, error)
        self.schedule_reconcile()  # which sets the retry timer

    # -- leftovers -----------------------------------------------------------------------------------

    async def _sweep_deleted_topics(self, metadata: ControllerMetadata) -> None:
        """Remove what is left on disk of topics deleted while this node was down (it never opens those
        replicas again, so nothing else would). A directory goes only when the metadata proves its topic
        deleted: topic ids are the Raft index that created the topic, so an id at or below the applied
        index that no live topic has is gone for good. (A replica moved off this node while it was down
        is not covered: its topic lives on, and only fresh metadata could tell.) Leftovers only come from
        before this process started, so sweeps stop once one found none the metadata could not judge."""
        if not self._sweep_due:
            return
        live = {topic.topic_id for topic in metadata.topics.values()}
        stray = []
        undecided = False  # a directory of a topic id the metadata has not reached yet
        for root in (self._logs.root, self._raft.root):
            try:
                names = os.listdir(root)
            except FileNotFoundError:
                continue
            for name in names:
                match = _GROUP_DIR.match(name)
                if match is None or name in self._replicas:
                    continue
                topic_id = int(match["topic_id"])
                if topic_id > metadata.applied_index:
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
            self._trash.discard(path)
