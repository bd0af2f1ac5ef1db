"""The cluster-wide services a front door uses: each call runs where it must, through the peer client.

A call runs first on this node's local service. When that refuses with ``NotLeader(leader_hint)`` (the
partition, the controller or the group's coordinator is elsewhere) the same call runs on the node the hint
names, and again on the next hint if that node has moved on, at most ``MAX_HOPS`` times: the node a client
reached drives its call to the end, no node passes it further on. ``UnknownTopic`` from this node is not
final while another node leads the controller: a topic created a moment ago may not have reached this
node yet, so the controller leader is asked (``NoController`` when none is known). A node a hint named that
cannot be reached (killed a moment ago: nothing was done there) is a leader not known yet: the call is
tried again while it may wait for one, and the controller's calls end ``NoControllerLeader`` (Kafka's
NOT_CONTROLLER, which admin clients retry) rather than the peer's failure.

A consumer instance's records are read here, by the node the member called: the group's coordinator
grants the read and takes the positions back, the batches come straight from each partition's leader
(``groups.reader``), never through the coordinator.

A service is one ``Routed`` object: ``cluster.data.run(DataService.offsets, topic, partition)`` runs the
protocol method where it must, as its declaration says (``peer_ops``), typed as the protocol declares
it; nothing is written here per operation.

A produce whose records came as JSON was encoded into a batch at the door it came through, and travels
to the leader as that batch (``DataService.produce_batch``, the one write of records).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from partitions.consumers.offsets import GroupOffsets
from partitions.consumers.protocol import ConsumerRecords, GroupService
from partitions.consumers.reader import read_assigned
from partitions.controller.reconfigure import ReplicaLog
from partitions.controller.state import CONTROLLER_GROUP
from partitions.data.service import DataService, Served
from partitions.data.share_records import ShareFetched, ShareService
from partitions.errors import (
    HopLimitExceeded,
    NoController,
    NoControllerLeader,
    PeerUnreachable,
    UnknownTopic,
)
from partitions.groups.assignors import TopicPartition
from partitions.metadata.service import AdminService, MetadataView
from partitions.peer_ops import routing_of
from partitions.peers.client import (
    PeerClient,
    remote_admin,
    remote_data,
    remote_groups,
    remote_peer,
    remote_registry,
    remote_shares,
    remote_transactions,
)
from partitions.peers.service import LocalServices, PeerService
from partitions.registry.service import RegistryService
from partitions.transactions.service import TransactionService
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.errors import RaftlogError
from raftlog.storage.errors import DiskFull

MAX_HOPS = 3  # calls to other nodes, following leader hints, before the answer is "retry later"
LEADER_WAIT_S = 3.0  # the longest election timeout: how long a call that finds no leader waits for one
LEADER_POLL_S = 0.05
T = TypeVar("T")
log = logging.getLogger(__name__)
S = TypeVar("S")
P = ParamSpec("P")


class _LeaderUnreachable(Exception):
    """The node a leader hint of ``group_id`` named could not be reached (``unreached``): nothing was done
    there, and its successor may be elected meanwhile."""

    def __init__(self, group_id: str, unreached: PeerUnreachable) -> None:
        super().__init__(group_id, unreached)
        self.group_id = group_id
        self.unreached = unreached


def _as_controllers(error: Exception) -> Exception:
    """A NoLeader of the controller's group says so by its type (Kafka's NOT_CONTROLLER); any other error
    as it is."""
    if isinstance(error, NoLeader) and error.group_id == CONTROLLER_GROUP:
        return error if isinstance(error, NoControllerLeader) else NoControllerLeader(error.group_id)
    return error


class Router:
    """Runs a call on this node or on the nodes leader hints name (see the module's docstring)."""

    def __init__(self, node_id: str, metadata: MetadataView, leader_wait_s: float = LEADER_WAIT_S) -> None:
        self.node_id = node_id
        self._metadata = metadata
        self._leader_wait_s = leader_wait_s

    async def run(
        self,
        local: S,
        remote: Callable[[str], S],
        call: Callable[[S], Awaitable[T]],
        topic: str | None = None,
        *,
        wait_for_leader: bool = True,
    ) -> Served[T]:
        """``call`` on ``local`` first; on a refusal naming another node, on ``remote(node)``. ``topic``:
        the topic the call is about, so that a topic this node does not know yet is asked of the
        controller leader. While nobody is known to lead, or the leader refuses writes for want of room
        (it hands its leadership over meanwhile), the call is tried again for ``leader_wait_s`` (not when
        ``wait_for_leader`` is false: a view of the cluster answers what it sees now)."""
        deadline = time.monotonic() + (self._leader_wait_s if wait_for_leader else 0.0)
        while True:
            try:
                return await self._follow(local, remote, call, topic)
            except (NoLeader, DiskFull) as exc:
                if time.monotonic() + LEADER_POLL_S > deadline:
                    said = _as_controllers(exc)
                    if said is exc:
                        raise
                    raise said from None
            except _LeaderUnreachable as gone:
                if time.monotonic() + LEADER_POLL_S > deadline:
                    if gone.group_id == CONTROLLER_GROUP:
                        raise NoControllerLeader(CONTROLLER_GROUP) from gone.unreached
                    raise gone.unreached from None
            await asyncio.sleep(LEADER_POLL_S)

    async def _follow(
        self,
        local: S,
        remote: Callable[[str], S],
        call: Callable[[S], Awaitable[T]],
        topic: str | None,
    ) -> Served[T]:
        """One try: here, then where the hints point, at most ``MAX_HOPS`` times."""
        target: str | None = None  # None: this node
        hinted_by = CONTROLLER_GROUP  # the group whose leader ``target`` is said to be
        hops = 0
        while True:
            try:
                served = local if target is None else remote(target)
                return Served(await call(served), self.node_id if target is None else target)
            except NotLeader as refusal:
                hint = refusal.leader_hint
                if hint is None or hint == self.node_id or hint == target:
                    raise NoLeader(refusal.group_id) from None
                next_target, next_group = hint, refusal.group_id
            except UnknownTopic as unknown:
                if target is not None or topic is None:
                    raise
                controller = self._metadata.controller()
                if controller is None:
                    raise NoController(unknown.topic) from None
                if controller == self.node_id:
                    raise
                next_target, next_group = controller, CONTROLLER_GROUP
            except PeerUnreachable as unreached:
                if target is None or unreached.node_id != target:  # a service's own call failed: its answer
                    raise
                raise _LeaderUnreachable(hinted_by, unreached) from None
            hops += 1
            if hops > MAX_HOPS:
                raise HopLimitExceeded(hops - 1)
            target, hinted_by = next_target, next_group


class Routed(Generic[S]):
    """One of the node's services, run where each call must run: ``run(Service.method, *arguments)``
    calls ``method`` (declared ``@peer`` on the service's protocol, which says how it is
    routed: ``peer_ops.Routing``) on this node's service, or on the node a ``NotLeader`` hint names. The
    answer comes with the node that served it (``Served``); ``call`` gives the value alone. No method is
    written here per operation: the protocol's declaration is all."""

    def __init__(self, router: Router, local: S, remote: Callable[[str], S]) -> None:
        self._router = router
        self._local = local
        self._remote = remote

    async def run(
        self, method: Callable[Concatenate[S, P], Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Served[T]:
        routing = routing_of(method)
        topic = None
        if routing.topic_arg is not None:
            topic = _signature(method).bind(None, *args, **kwargs).arguments[routing.topic_arg]
        name = method.__name__

        def call(service: S) -> Awaitable[T]:
            bound: Callable[P, Awaitable[T]] = getattr(service, name)
            return bound(*args, **kwargs)

        return await self._router.run(
            self._local, self._remote, call, topic, wait_for_leader=routing.waits_for_leader
        )

    async def call(
        self, method: Callable[Concatenate[S, P], Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        return (await self.run(method, *args, **kwargs)).value


@functools.cache
def _signature(method: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(method)


class ClusterGroups(Routed[GroupService]):
    """Consumer groups, each call on the group's coordinator; ``records`` is read here, between the
    coordinator's grant and its taking the positions back."""

    def __init__(
        self, router: Router, local: GroupService, client: PeerClient, data: Routed[DataService]
    ) -> None:
        super().__init__(router, local, lambda node: remote_groups(client, node))
        self._data = data

    async def records(
        self,
        group: str,
        instance: str,
        timeout_ms: int | None,
        max_bytes: int,
        generation: int | None,
        format: str | None,
        authorize: Callable[[Sequence[str]], None] | None = None,
    ) -> ConsumerRecords:
        """Granted by the coordinator, read here from the partitions' leaders, the positions taken back by
        the coordinator: only records of partitions still the member's are returned. ``authorize`` (a
        front door's ACLs) is given topics and raises to refuse: the member's subscription before
        anything is asked of the coordinator (its auto commit, its heartbeat), then the topics granted,
        whose read ends at once, no position moved."""
        if authorize is not None:
            authorize(await self.call(GroupService.subscription, group, instance))
        plan = await self.call(GroupService.begin_read, group, instance, timeout_ms, generation, format)
        if authorize is not None:
            try:
                authorize(sorted({tp.topic for tp in plan.assigned}))
            except RaftlogError:
                await self._end_refused(group, instance, plan.read_id)
                raise
        # a partition that fails is kept in got.failures; a read cut short otherwise (a cancelled request)
        # never reaches end_read, and its lease ends at the plan's deadline
        got = await read_assigned(self._data, group, plan, max_bytes)
        ended = await self.call(
            GroupService.end_read, group, instance, plan.read_id, got.positions, got.end_offsets
        )
        kept = set(ended.kept)
        parts = tuple(part for part in got.parts if part.tp in kept)
        if not parts and got.failures:
            raise got.failures[0]
        return ConsumerRecords(plan.format, ended.generation, parts)

    async def _end_refused(self, group: str, instance: str, read_id: int) -> None:
        try:
            await self.call(GroupService.end_read, group, instance, read_id, {}, {})
        except RaftlogError as exc:  # the read's lease ends at its deadline instead
            log.info("a refused read of %s/%s did not end at once: %s", group, instance, exc)


SHARE_WAIT_PARTITIONS_MAX = 256  # partitions an acquire waits on at once (the others are read after it)


@dataclass(frozen=True, slots=True)
class ShareAcquired:
    """What one partition's leader acquired for a share group member (``fetched``), or why not."""

    tp: TopicPartition
    fetched: ShareFetched | None
    error: RaftlogError | None = None


class ClusterShares(Routed[ShareService]):
    """Share groups' records (KIP-932), each call on the partition's leader (``ShareRecords`` there);
    ``acquire`` spreads a member's acquisition over its partitions."""

    def __init__(self, router: Router, local: ShareService, client: PeerClient) -> None:
        super().__init__(router, local, lambda node: remote_shares(client, node))
        self._rotation = 0

    async def acquire(
        self,
        group: str,
        member: str,
        partitions: Sequence[TopicPartition],
        max_records: int,
        max_bytes: int,
        wait_ms: int,
        reset: str | None = None,
    ) -> list[ShareAcquired]:
        """One acquire per partition, one after another from a partition that turns with each call (so
        a small ``max_records`` starves none), the records and bytes left shared out in order; with none
        acquired, waits up to ``wait_ms`` for a record to be available in any of them (a wait acquires
        nothing: only reads are cancelled) and acquires once more. A partition that fails is answered
        with its error; when every one failed, the first error is raised."""
        if not partitions:
            if wait_ms:
                await asyncio.sleep(wait_ms / 1000)  # nothing assigned yet: a long poll all the same
            return []
        start = self._rotation % len(partitions)
        self._rotation += 1
        order = list(partitions[start:]) + list(partitions[:start])
        got = await self._acquire_each(group, member, order, max_records, max_bytes, reset)
        if wait_ms and not any(a.fetched is not None and a.fetched.acquired for a in got):
            await self._wait_any(group, order[:SHARE_WAIT_PARTITIONS_MAX], wait_ms)
            got = await self._acquire_each(group, member, order, max_records, max_bytes, reset)
        errors = [a.error for a in got if a.error is not None]
        if errors and len(errors) == len(got):
            raise errors[0]
        return got

    async def _acquire_each(
        self,
        group: str,
        member: str,
        order: list[TopicPartition],
        max_records: int,
        max_bytes: int,
        reset: str | None,
    ) -> list[ShareAcquired]:
        got: list[ShareAcquired] = []
        records_left, bytes_left = max_records, max_bytes
        for tp in order:
            if records_left <= 0 or bytes_left <= 0:
                break
            try:
                fetched = await self.call(
                    ShareService.acquire, group, member, tp.topic, tp.partition, records_left, bytes_left,
                    0, reset,
                )  # fmt: skip
            except RaftlogError as exc:
                got.append(ShareAcquired(tp, None, exc))
                continue
            got.append(ShareAcquired(tp, fetched))
            records_left -= sum(last - first + 1 for first, last, _ in fetched.acquired)
            bytes_left -= len(fetched.data)
        return got

    async def _wait_any(self, group: str, tps: list[TopicPartition], wait_ms: int) -> None:
        waits = [
            asyncio.ensure_future(
                self.call(ShareService.wait_available, group, tp.topic, tp.partition, wait_ms)
            )
            for tp in tps
        ]
        try:
            pending = set(waits)
            while pending:  # the first wait that sees a record ends the others; a failed one ends alone
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(not t.cancelled() and t.exception() is None and t.result() for t in done):
                    break
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)


class ClusterPeer(Routed[PeerService]):
    """The partition-leader calls of ``PeerService`` (a replica move's), run on the leader wherever it is,
    and the controller leader's calls to a named node: one joining the controller group, one joining a
    partition in a move (its account of its log)."""

    def __init__(self, router: Router, local: PeerService, client: PeerClient) -> None:
        super().__init__(router, local, lambda node: remote_peer(client, node))
        self._client = client
        self._node_id = router.node_id
        self._here = local

    async def join_controller(self, node_id: str, voters: list[str]) -> None:
        """On ``node_id`` itself (never forwarded)."""
        if node_id == self._node_id:
            await self._here.join_controller(voters)
        else:
            await remote_peer(self._client, node_id).join_controller(voters)

    async def replica_log(self, node_id: str, topic: str, partition: int) -> ReplicaLog:
        """On ``node_id`` itself (never forwarded): its replica's own account of its partition log."""
        if node_id == self._node_id:
            return await self._here.replica_log(topic, partition)
        return await remote_peer(self._client, node_id).replica_log(topic, partition)


class Cluster:
    """What a front door calls: ``data``, ``admin``, ``groups``, ``transactions`` and ``shares`` (share
    groups' records), each run where it must
    (``peer``: the partition-leader calls of replica moves); ``offsets``: the groups' committed offsets,
    through ``data``, waiting for a partition's leader as every door must (``consumers.offsets``)."""

    def __init__(
        self,
        local: LocalServices,
        metadata: MetadataView,
        client: PeerClient,
        leader_wait_s: float = LEADER_WAIT_S,
    ) -> None:
        router = Router(metadata.node_id, metadata, leader_wait_s)
        self.data: Routed[DataService] = Routed(router, local.data, lambda node: remote_data(client, node))
        self.admin: Routed[AdminService] = Routed(
            router, local.admin, lambda node: remote_admin(client, node)
        )
        self.groups = ClusterGroups(router, local.groups, client, self.data)
        self.offsets = GroupOffsets(self.data, features=metadata.features())
        self.peer = ClusterPeer(router, local.peer, client)
        self.transactions: Routed[TransactionService] = Routed(
            router, local.transactions, lambda node: remote_transactions(client, node)
        )
        self.shares = ClusterShares(router, local.shares, client)
        self.registry: Routed[RegistryService] = Routed(
            router, local.registry, lambda node: remote_registry(client, node)
        )


class FrontDoor(Protocol):
    """All a front door (the HTTP API, any protocol served at the edge) is given of its node: what the
    node knows now, the cluster-wide services, and for the server side of peer calls the node's own
    services and the check of a peer's credential."""

    @property
    def node_id(self) -> str: ...

    @property
    def metadata(self) -> MetadataView: ...

    @property
    def cluster(self) -> Cluster: ...

    @property
    def local(self) -> LocalServices: ...

    def peer_credential_ok(self, presented: str) -> bool: ...

    def check_peer_levels(self, caller: str, announced: Mapping[str, int] | None) -> None:
        """``NodeKeptOut`` when a peer's code that supports ``announced`` (None: it announced none) cannot
        read the cluster's finalized formats (``features.kept_out``)."""
        ...

    def supported_levels(self) -> Mapping[str, int]:
        """The feature levels this node's code supports, announced with every peer answer."""
        ...
