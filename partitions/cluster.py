"""The cluster-wide services a front door uses: each call runs where it must, through the peer client.

A call runs first on this node's local service. When that refuses with ``NotLeader(leader_hint)`` (the
partition, the controller or the group's coordinator is elsewhere) the same call runs on the node the hint
names, and again on the next hint if that node has moved on, at most ``MAX_HOPS`` times: the node a client
reached drives its call to the end, no node passes it further on. ``UnknownTopic`` from this node is not
final while another node leads the controller: a topic created a moment ago may not have reached this
node yet, so the controller leader is asked (``NoController`` when none is known).

A consumer instance's records are read here, by the node the member called: the group's coordinator
grants the read and takes the positions back, the batches come straight from each partition's leader
(``groups.reader``), never through the coordinator.

A produce whose records came as JSON is encoded once, here (``RemoteData.produce``), and travels to the
leader as the batch; what the leader stores is what was encoded here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from partitions.controller import TopicMetadata
from partitions.errors import HopLimitExceeded, NoController, UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.groups.reader import read_assigned
from partitions.groups.state import ReadConfig
from partitions.peer_client import PeerClient, remote_admin, remote_data, remote_groups, remote_peer
from partitions.reconfigure import MemberView, MoveProgress
from partitions.services import (
    AclBinding,
    AclFilter,
    AdminService,
    ApiToken,
    Assignment,
    CommittedOffset,
    ConsumerCreated,
    ConsumerRecords,
    ControllerMembers,
    DataService,
    FetchedBatches,
    GroupDeleted,
    GroupDescription,
    GroupService,
    GroupSummary,
    LocalServices,
    MetadataView,
    MoveState,
    PartitionOffsets,
    PartitionState,
    PeerService,
    ProduceResult,
    Served,
    TimestampOffset,
)
from partitions.users import ScramCredential
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.errors import RaftlogError
from raftlog.storage.batch import ProducerRecord
from raftlog.storage.errors import DiskFull

MAX_HOPS = 3  # calls to other nodes, following leader hints, before the answer is "retry later"
LEADER_WAIT_S = 3.0  # the longest election timeout: how long a call that finds no leader waits for one
LEADER_POLL_S = 0.05
T = TypeVar("T")
log = logging.getLogger(__name__)
S = TypeVar("S")


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
            except (NoLeader, DiskFull):
                if time.monotonic() + LEADER_POLL_S > deadline:
                    raise
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
        hops = 0
        while True:
            try:
                served = local if target is None else remote(target)
                return Served(await call(served), self.node_id if target is None else target)
            except NotLeader as refusal:
                hint = refusal.leader_hint
                if hint is None or hint == self.node_id or hint == target:
                    raise NoLeader(refusal.group_id) from None
                next_target = hint
            except UnknownTopic as unknown:
                if target is not None or topic is None:
                    raise
                controller = self._metadata.controller()
                if controller is None:
                    raise NoController(unknown.topic) from None
                if controller == self.node_id:
                    raise
                next_target = controller
            hops += 1
            if hops > MAX_HOPS:
                raise HopLimitExceeded(hops - 1)
            target = next_target


class ClusterData:
    def __init__(
        self, router: Router, local: DataService, client: PeerClient, clock: Callable[[], int]
    ) -> None:
        self._router = router
        self._local = local
        self._remote = lambda node: remote_data(client, node, clock)

    async def _run(self, topic: str, call: Callable[[DataService], Awaitable[T]]) -> Served[T]:
        return await self._router.run(self._local, self._remote, call, topic)

    async def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[ProducerRecord],
        producer_id: int | None,
        sequence: int | None,
        timeout_ms: int,
    ) -> Served[ProduceResult]:
        return await self._run(
            topic, lambda s: s.produce(topic, partition, records, producer_id, sequence, timeout_ms)
        )

    async def produce_batch(
        self, topic: str, partition: int, batch: bytes, timeout_ms: int
    ) -> Served[ProduceResult]:
        return await self._run(topic, lambda s: s.produce_batch(topic, partition, batch, timeout_ms))

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> Served[FetchedBatches]:
        return await self._run(
            topic, lambda s: s.fetch_batches(topic, partition, offset, max_bytes, timeout_ms)
        )

    async def offsets(self, topic: str, partition: int) -> Served[PartitionOffsets]:
        return await self._run(topic, lambda s: s.offsets(topic, partition))

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> Served[TimestampOffset | None]:
        return await self._run(topic, lambda s: s.offset_for_timestamp(topic, partition, timestamp_ms))

    async def commit_offset(
        self, group: str, topic: str, partition: int, offset: int, reset: bool, timeout_ms: int
    ) -> Served[int]:
        return await self._run(
            topic, lambda s: s.commit_offset(group, topic, partition, offset, reset, timeout_ms)
        )

    async def committed_offset(self, group: str, topic: str, partition: int) -> Served[int | None]:
        return await self._run(topic, lambda s: s.committed_offset(group, topic, partition))

    async def delete_offset(self, group: str, topic: str, partition: int, timeout_ms: int) -> Served[bool]:
        return await self._run(topic, lambda s: s.delete_offset(group, topic, partition, timeout_ms))


class ClusterAdmin:
    def __init__(self, router: Router, local: AdminService, client: PeerClient) -> None:
        self._router = router
        self._local = local
        self._remote = lambda node: remote_admin(client, node)

    async def _run(self, call: Callable[[AdminService], Awaitable[T]], topic: str | None = None) -> T:
        return (await self._router.run(self._local, self._remote, call, topic)).value

    async def topic(self, name: str) -> TopicMetadata:
        return await self._run(lambda s: s.topic(name), name)

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> TopicMetadata:
        return await self._run(lambda s: s.create_topic(name, partitions, replication_factor, configs))

    async def delete_topic(self, name: str) -> None:
        await self._run(lambda s: s.delete_topic(name), name)

    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        return await self._run(lambda s: s.alter_configs(name, configs), name)

    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        return await self._run(lambda s: s.move_replicas(topic, partition, replicas), topic)

    async def move_state(self, topic: str, partition: int) -> MoveState:
        return await self._run(lambda s: s.move_state(topic, partition), topic)

    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        return await self._run(lambda s: s.cancel_move(topic, partition), topic)

    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        await self._run(lambda s: s.set_node_flag(node_id, flag, on))

    async def decommission_status(self, node_id: str) -> dict[str, Any]:
        return await self._run(lambda s: s.decommission_status(node_id))

    async def controller_members(self) -> ControllerMembers:
        return await self._run(lambda s: s.controller_members())

    async def add_controller_voter(self, node_id: str) -> ControllerMembers:
        return await self._run(lambda s: s.add_controller_voter(node_id))

    async def remove_controller_voter(self, node_id: str) -> ControllerMembers:
        """On the controller leader; when that is the node to go, on the leader it hands over to."""
        return await self._run(lambda s: s.remove_controller_voter(node_id))

    async def set_user(self, name: str, credentials: list[ScramCredential]) -> list[str]:
        return await self._run(lambda s: s.set_user(name, credentials))

    async def delete_user(self, name: str) -> None:
        await self._run(lambda s: s.delete_user(name))

    async def alter_user(
        self, name: str, upsertions: list[ScramCredential], deletions: list[str]
    ) -> list[str]:
        return await self._run(lambda s: s.alter_user(name, upsertions, deletions))

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclBinding]:
        return await self._run(lambda s: s.create_acls(bindings))

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        return await self._run(lambda s: s.delete_acls(filters))

    async def create_token(self, token: ApiToken) -> ApiToken:
        return await self._run(lambda s: s.create_token(token))

    async def delete_token(self, user: str, token_id: str) -> ApiToken:
        return await self._run(lambda s: s.delete_token(user, token_id))

    async def partition_state(self, topic: str, partition: int) -> Served[PartitionState]:
        return await self._router.run(
            self._local,
            self._remote,
            lambda s: s.partition_state(topic, partition),
            topic,
            wait_for_leader=False,
        )

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> Served[str | None]:
        """On the partition's leader; the leader it saw take over (the node served: the old leader)."""
        return await self._router.run(
            self._local,
            self._remote,
            lambda s: s.transfer_leadership(topic, partition, target, timeout_ms),
            topic,
        )


class ClusterGroups:
    def __init__(self, router: Router, local: GroupService, client: PeerClient, data: ClusterData) -> None:
        self._router = router
        self._local = local
        self._remote = lambda node: remote_groups(client, node)
        self._data = data

    async def _run(self, call: Callable[[GroupService], Awaitable[T]], wait_for_leader: bool = True) -> T:
        return (
            await self._router.run(self._local, self._remote, call, wait_for_leader=wait_for_leader)
        ).value

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
    ) -> ConsumerCreated:
        return await self._run(
            lambda s: s.create_instance(
                group, name, format, offset_reset, session_timeout_ms, assignor, reads, client_host
            )
        )

    async def delete_instance(self, group: str, instance: str) -> None:
        await self._run(lambda s: s.delete_instance(group, instance))

    async def subscribe(self, group: str, instance: str, topics: list[str]) -> None:
        await self._run(lambda s: s.subscribe(group, instance, topics))

    async def subscription(self, group: str, instance: str) -> list[str]:
        return await self._run(lambda s: s.subscription(group, instance))

    async def assignment(self, group: str, instance: str) -> Assignment:
        return await self._run(lambda s: s.assignment(group, instance))

    async def seek(self, group: str, instance: str, offsets: dict[TopicPartition, int]) -> None:
        await self._run(lambda s: s.seek(group, instance, offsets))

    async def seek_to(self, group: str, instance: str, partitions: list[TopicPartition], end: bool) -> None:
        await self._run(lambda s: s.seek_to(group, instance, partitions, end))

    async def seek_to_times(self, group: str, instance: str, times: dict[TopicPartition, int]) -> None:
        await self._run(lambda s: s.seek_to_times(group, instance, times))

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
            authorize(await self.subscription(group, instance))
        plan = await self._run(lambda s: s.begin_read(group, instance, timeout_ms, generation, format))
        if authorize is not None:
            try:
                authorize(sorted({tp.topic for tp in plan.assigned}))
            except RaftlogError:
                await self._end_refused(group, instance, plan.read_id)
                raise
        # a partition that fails is kept in got.failures; a read cut short otherwise (a cancelled request)
        # never reaches end_read, and its lease ends at the plan's deadline
        got = await read_assigned(self._data, group, plan, max_bytes)
        ended = await self._run(
            lambda s: s.end_read(group, instance, plan.read_id, got.positions, got.end_offsets)
        )
        kept = set(ended.kept)
        parts = tuple(part for part in got.parts if part.tp in kept)
        if not parts and got.failures:
            raise got.failures[0]
        return ConsumerRecords(plan.format, ended.generation, parts)

    async def _end_refused(self, group: str, instance: str, read_id: int) -> None:
        try:
            await self._run(lambda s: s.end_read(group, instance, read_id, {}, {}))
        except RaftlogError as exc:  # the read's lease ends at its deadline instead
            log.info("a refused read of %s/%s did not end at once: %s", group, instance, exc)

    async def commit(
        self,
        group: str,
        instance: str,
        offsets: dict[TopicPartition, int] | None,
        generation: int | None,
    ) -> None:
        await self._run(lambda s: s.commit(group, instance, offsets, generation))

    async def committed(
        self, group: str, instance: str, partitions: list[TopicPartition] | None
    ) -> list[CommittedOffset]:
        return await self._run(lambda s: s.committed(group, instance, partitions))

    async def describe(self, group: str) -> GroupDescription:
        return await self._run(lambda s: s.describe(group))

    async def list_groups(self, coordinator_partition: int) -> list[GroupSummary]:
        return await self._run(lambda s: s.list_groups(coordinator_partition), wait_for_leader=False)

    async def delete_group(self, group: str) -> GroupDeleted:
        return await self._run(lambda s: s.delete_group(group))

    async def note_commit(self, group: str, topics: list[str], reset: bool, force: bool) -> None:
        await self._run(lambda s: s.note_commit(group, topics, reset, force))

    async def coordinator_partitions(self) -> int:
        return await self._run(lambda s: s.coordinator_partitions())


class ClusterPeer:
    """The partition-leader calls of ``PeerService`` (a replica move's), run on the leader wherever it is,
    and the controller leader's call to a node joining the controller group."""

    def __init__(self, router: Router, local: PeerService, client: PeerClient) -> None:
        self._router = router
        self._local = local
        self._client = client
        self._remote = lambda node: remote_peer(client, node)

    async def join_controller(self, node_id: str, voters: list[str]) -> None:
        """On ``node_id`` itself (never forwarded)."""
        if node_id == self._router.node_id:
            await self._local.join_controller(voters)
        else:
            await remote_peer(self._client, node_id).join_controller(voters)

    async def member_view(self, topic: str, partition: int) -> MemberView:
        served = await self._router.run(
            self._local, self._remote, lambda s: s.member_view(topic, partition), wait_for_leader=False
        )
        return served.value

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        await self._router.run(
            self._local,
            self._remote,
            lambda s: s.change_membership(topic, partition, change, node_id, timeout_ms),
        )


class Cluster:
    """What a front door calls: ``data``, ``admin`` and ``groups``, each run where it must (``peer``: the
    partition-leader calls of replica moves)."""

    def __init__(
        self,
        local: LocalServices,
        metadata: MetadataView,
        client: PeerClient,
        clock: Callable[[], int],
        leader_wait_s: float = LEADER_WAIT_S,
    ) -> None:
        router = Router(metadata.node_id, metadata, leader_wait_s)
        self.data = ClusterData(router, local.data, client, clock)
        self.admin = ClusterAdmin(router, local.admin, client)
        self.groups = ClusterGroups(router, local.groups, client, self.data)
        self.peer = ClusterPeer(router, local.peer, client)


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
