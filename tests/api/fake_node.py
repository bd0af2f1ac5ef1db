"""Nodes in the test's process with honest semantics, for testing the HTTP layer (test code only).

A ``FakeCluster`` holds the shared truth (the controller's metadata, each partition's records, leader,
producer table and consumer offsets); each ``FakeNode`` is one node's ``FrontDoor`` over it. Its local
services (``FakeData`` for data and peer calls, ``FakeAdmin``, ``FakeMetadata``) refuse, like the real node's,
what only a partition's leader (or the controller) may do, raising ``NotLeader(leader_hint)`` / ``NoLeader``;
its cluster-wide services are the real ``partitions.peers.cluster.Cluster`` over the real peer client, so a
call another node must serve crosses HTTP to that node's internal endpoints as between real nodes.

Data: each node runs the real ``DataPlane`` (``partitions.data.plane``) over the cluster's partitions,
each a real ``PartitionStateMachine`` over a real segmented ``Log`` in a temporary folder, whose Raft group
applies a proposal at once (``fake_partition``): the produce rules, idempotence, offsets, deletes,
transaction markers and reads are the product's own, and only replication and elections are left out
(the cluster says who leads; ``transfer`` moves a leader and bumps the term). ``FakeData`` adds the fault
hooks the tests set before the plane is called: errors injected per method, a node's wrong belief of who
leads, a delay before a produce, answers lost after it appended. ``test_fake_answers_as_a_leader`` sends
the same batches to a real node and compares the answers.

The controller's metadata (topics, their configs and moves, node flags, features, users, ACLs, tokens,
quotas, resource configs, producer ids' owners) is the real ``ControllerStateMachine``'s, one for the
cluster, applying each proposal at once (``FakeCluster.propose``); ``FakeAdmin`` runs the real
``TopicChanges`` and ``SecurityRecords`` over it (``FakeFrontend``), so placement, every check before a
proposal and the apply are the product's, and the partitions follow the metadata. Left out: the controller
group's replication, elections and membership (the cluster says who leads it; its voters are a list).

Consumer groups run the real ``ConsumerService`` and ``GroupCoordinator`` over ``FakeGroupLog``: the group
tables of the ``__consumer_groups`` partitions live in the cluster and commands apply at once on the
partition's leader (no replication to fake). Transactions run the real ``TransactionCoordinator`` over
``FakeTransactionLog`` the same way; its markers are recorded in the cluster (``FakeCluster.markers``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from fake_partition import FakePartition, FakeReplicas, Storage, run_now

from partitions.consumers.service import ConsumerService
from partitions.controller import decommission
from partitions.controller import members as controller_members
from partitions.controller.commands import ControllerCommand, CreateTopic, DeleteTopic, FormCluster
from partitions.controller.commands import encode as encode_controller
from partitions.controller.defaults import REPLICAS_MAX_DEFAULT
from partitions.controller.members import ControllerMembers
from partitions.controller.producer_owners import RegisterProducerOwner
from partitions.controller.reconfigure import MemberView, ReplicaLog
from partitions.controller.state import (
    ControllerMetadata,
    ControllerStateMachine,
    Reassignment,
    TopicMetadata,
)
from partitions.data.plane import DataPlane
from partitions.data.service import (
    FetchedBatches,
    Producer,
    ProduceResult,
)
from partitions.data.share_records import ShareRecords
from partitions.data.transactional import TransactionalWrites
from partitions.errors import (
    ControllerChangeRefused,
    InvalidReassignment,
    InvalidTxnState,
    NodeKeptOut,
    UnknownNode,
    UnknownPartition,
    UnknownTopic,
)
from partitions.features import SUPPORTED, Features, kept_out
from partitions.groups.assignors import TopicPartition
from partitions.groups.coordinator import GroupCoordinator
from partitions.groups.group_commands import GroupCommand
from partitions.groups.group_commands import encode as encode_group
from partitions.groups.state import GroupResult, GroupTable
from partitions.metadata.security_records import SecurityRecords
from partitions.metadata.service import (
    ControllerSnapshot,
    MoveState,
    NodeInfo,
    PartitionState,
    ReplicaState,
)
from partitions.metadata.topic_changes import TopicChanges
from partitions.names import GROUPS_TOPIC, SCHEMAS_TOPIC, TRANSACTIONS_TOPIC
from partitions.peers.client import PeerClient
from partitions.peers.cluster import Cluster
from partitions.peers.service import Claims, Failures
from partitions.registry.coordinator import SchemaRegistry
from partitions.registry.table import Done, Refusal, RegistryCommand, SchemaTable
from partitions.registry.types import TYPES
from partitions.replicas.failures import ReplicaFailure, digest
from partitions.replicas.log_dirs import LogDir, ReplicaDir, log_dir
from partitions.security.acls import AclBinding
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.producer_ids import ProducerIds
from partitions.security.quotas import ClientQuotas
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential
from partitions.transactions.coordinator import TransactionCoordinator
from partitions.transactions.service import Marker
from partitions.transactions.state import TransactionTable, TxnCommand, TxnResult
from partitions.transactions.state import encode as encode_txn
from raftlog.consensus.errors import NoLeader, NotLeader, ProposalRejected
from raftlog.histogram import HistogramSnapshot


async def _no_coordinator(tid: str, producer_id: int, epoch: int, topic: str, partition: int) -> int | None:
    return None  # the fake coordinates no transaction


async def _no_transaction(
    tid: str, producer_id: int, epoch: int, topic: str, partition: int, principal: str | None
) -> None:
    raise InvalidTxnState("the fake coordinates no transaction")


class FakeCluster:
    def __init__(self, node_ids: Sequence[str] = ("n1",)) -> None:
        self.node_ids = list(node_ids)
        self.addresses: dict[str, str] = {}
        self.states: dict[str, str] = dict.fromkeys(self.node_ids, "alive")
        self.kept_out: dict[str, str] = {}  # node -> why it takes no part (its code below the levels)
        self.controller: str | None = self.node_ids[0]
        # the controller's replicated state, applied by the real state machine (``propose``)
        self.controller_machine = ControllerStateMachine()
        self.storage = Storage()  # the partitions' logs, in a temporary folder
        self.partitions: dict[tuple[str, int], FakePartition] = {}
        self.group_partitions = 2  # of __consumer_groups, created on first use
        self.replicas_max = REPLICAS_MAX_DEFAULT  # partition replicas a node may hold (serve --replicas-max)
        self.group_tables: dict[tuple[int, int], GroupTable] = {}  # (topic_id, partition) -> table
        self.transaction_partitions = 2  # of __transactions, created on first use
        self.transaction_tables: dict[tuple[int, int], TransactionTable] = {}  # (topic_id, partition)
        self.schema_table = SchemaTable()  # the registry's, in ``__schemas``
        # every transaction marker written: (topic, partition, producer id, epoch, commit, coordinator epoch)
        self.markers: list[tuple[str, int, int, int, bool, int]] = []
        self.failures: list[ReplicaFailure] = []  # replicas that cannot open or replay, on any node
        self.controller_voters: list[str] = self.node_ids[:5]
        self.controller_learners: list[str] = []  # joining; nothing promotes them here
        # the leader's account of its members' times (wall-clock ms), as a test sets it
        self.controller_times: dict[str, tuple[int, int | None]] = {}  # node: (heard at, caught up at)
        self.joined_controller: list[tuple[str, list[str]]] = []  # (node, voters) of join_controller calls
        self.left_controller: list[str] = []  # nodes of leave_controller calls
        self.catching_up: set[str] = set()  # nodes whose metadata has not caught up since they started
        self.propose(FormCluster(dict(SUPPORTED)))  # a cluster of this release, finalized

    def propose(self, command: ControllerCommand) -> object:
        """``command`` applied by the controller's real state machine at the next index (one machine: the
        controller group's replication and elections are left out) and its result, a refusal raised as
        ``MetadataFrontend.propose`` raises it; the partitions then follow the metadata."""
        machine = self.controller_machine
        result = machine.apply(machine.applied_index + 1, 1, encode_controller(command))
        self._reconcile()
        if isinstance(result, Exception):
            raise result
        return result

    def _reconcile(self) -> None:
        """Each partition of the metadata has its state, as each node's ``ReplicaManager`` reconciles its
        replicas: a new one led by its first replica (moves are recorded, nothing drives them here), one
        whose topic went closed (a read waiting on it wakes to find no topic)."""
        topics = self.topics
        for (name, p), state in list(self.partitions.items()):
            meta = topics.get(name)
            if meta is None or meta.topic_id != state.topic.topic_id or p >= meta.partitions:
                del self.partitions[(name, p)]
                state.notify()
                state.close()
        for meta in topics.values():
            for p, replica_set in enumerate(meta.replicas):
                if (meta.name, p) not in self.partitions:
                    self.partitions[(meta.name, p)] = self.storage.new_partition(
                        replica_set[0], replica_set, meta
                    )

    @property
    def metadata(self) -> ControllerMetadata:
        return self.controller_machine.metadata

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return self.metadata.topics

    @property
    def moves(self) -> Mapping[tuple[str, int], Reassignment]:
        return self.metadata.reassignments

    @property
    def flags(self) -> Mapping[str, frozenset[str]]:
        return self.metadata.node_flags

    @property
    def users(self) -> Mapping[str, tuple[ScramCredential, ...]]:
        return self.metadata.users

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self.metadata.acls

    @property
    def tokens(self) -> Mapping[str, ApiToken]:
        return self.metadata.tokens

    def failed(self, node: str, topic: str, partition: int) -> ReplicaFailure | None:
        """A replica reported failed by a node that is up (a down node reports nothing)."""
        if self.states.get(node) not in ("alive", "suspect"):
            return None
        return next(
            (f for f in self.failures if (f.node, f.topic, f.partition) == (node, topic, partition)), None
        )

    def add_topic(
        self,
        name: str,
        partitions: int = 1,
        replicas: Sequence[Sequence[str]] | None = None,
        configs: dict[str, Any] | None = None,
    ) -> TopicMetadata:
        """A test's topic, created as the controller applies it but placed by hand (``replicas``, else
        each partition on the first node) whatever the nodes' liveness."""
        placed = (
            [list(r) for r in replicas]
            if replicas is not None
            else [[self.node_ids[0]] for _ in range(partitions)]
        )
        created = self.propose(CreateTopic(name, placed, dict(configs or {})))
        assert isinstance(created, TopicMetadata)
        return created

    def drop_topic(self, name: str) -> None:
        self.propose(DeleteTopic(name))

    def close(self) -> None:
        """Close the partitions' logs and remove their folder (also done when the cluster is collected)."""
        self.storage.close()


class FakeGroupLog:
    """``GroupLog`` over a ``FakeCluster``: partition p of ``__consumer_groups`` is led by node p mod n."""

    def __init__(self, data: FakeData) -> None:
        self.data = data

    def partitions(self) -> int:
        return self.data.topic(GROUPS_TOPIC).partitions

    async def ensure_topic(self) -> None:
        cluster = self.data.cluster
        if GROUPS_TOPIC in cluster.topics:
            return
        self.data._controller_here()
        nodes = cluster.node_ids
        replicas = [
            [nodes[(p + i) % len(nodes)] for i in range(len(nodes))] for p in range(cluster.group_partitions)
        ]
        cluster.add_topic(GROUPS_TOPIC, replicas=replicas)

    def leader_term(self, partition: int) -> int:
        return self.data._led_here(GROUPS_TOPIC, partition).term

    async def readable(self, partition: int) -> None:
        self.table(partition)  # a fake leader reads at once

    def table(self, partition: int) -> tuple[GroupTable, int]:
        state = self.data._led_here(GROUPS_TOPIC, partition)
        topic_id = self.data.cluster.topics[GROUPS_TOPIC].topic_id
        return self.data.cluster.group_tables.setdefault((topic_id, partition), GroupTable()), state.term

    def led_partitions(self) -> list[int]:
        meta = self.data.cluster.topics.get(GROUPS_TOPIC)
        if meta is None:
            return []
        return [
            p
            for p in range(meta.partitions)
            if self.data.cluster.partitions[(GROUPS_TOPIC, p)].leader == self.data.node_id
        ]

    async def propose(self, partition: int, command: GroupCommand) -> GroupResult:
        table, _ = self.table(partition)
        return table.apply(encode_group(command))

    def partition_count(self, topic: str) -> int:
        meta = self.data.cluster.topics.get(topic)
        return 0 if meta is None else meta.partitions


class FakeTransactionLog:
    """``TransactionLog`` over a ``FakeCluster``: partition p of ``__transactions`` is led by node p mod n."""

    def __init__(self, data: FakeData) -> None:
        self.data = data

    def partitions(self) -> int:
        return self.data.topic(TRANSACTIONS_TOPIC).partitions

    async def ensure_topic(self) -> None:
        cluster = self.data.cluster
        if TRANSACTIONS_TOPIC in cluster.topics:
            return
        self.data._controller_here()
        nodes = cluster.node_ids
        replicas = [
            [nodes[(p + i) % len(nodes)] for i in range(len(nodes))]
            for p in range(cluster.transaction_partitions)
        ]
        cluster.add_topic(TRANSACTIONS_TOPIC, replicas=replicas)

    async def readable(self, partition: int) -> None:
        self.table(partition)  # a fake leader reads at once

    def table(self, partition: int) -> tuple[TransactionTable, int]:
        state = self.data._led_here(TRANSACTIONS_TOPIC, partition)
        topic_id = self.data.cluster.topics[TRANSACTIONS_TOPIC].topic_id
        return self.data.cluster.transaction_tables.setdefault(
            (topic_id, partition), TransactionTable()
        ), state.term

    def led_partitions(self) -> list[int]:
        meta = self.data.cluster.topics.get(TRANSACTIONS_TOPIC)
        if meta is None:
            return []
        return [
            p
            for p in range(meta.partitions)
            if self.data.cluster.partitions[(TRANSACTIONS_TOPIC, p)].leader == self.data.node_id
        ]

    async def propose(self, partition: int, command: TxnCommand) -> TxnResult:
        table, _ = self.table(partition)
        return table.apply(encode_txn(command))


class FakeSchemaLog:
    """``SchemaLog`` over a ``FakeCluster``: ``__schemas`` has one partition, led by the first node."""

    def __init__(self, data: FakeData) -> None:
        self.data = data

    async def ensure_topic(self) -> None:
        cluster = self.data.cluster
        if SCHEMAS_TOPIC not in cluster.topics:
            self.data._controller_here()
            cluster.add_topic(SCHEMAS_TOPIC, replicas=[list(cluster.node_ids)])

    def table(self, partition: int) -> tuple[SchemaTable, int]:
        if SCHEMAS_TOPIC not in self.data.cluster.topics:
            raise UnknownTopic(SCHEMAS_TOPIC)
        state = self.data._led_here(SCHEMAS_TOPIC, partition)
        return self.data.cluster.schema_table, state.term

    async def propose(self, command: RegistryCommand) -> Done | Refusal:
        table, _ = self.table(0)
        self.data.cluster.schema_table, result = table.apply(command)
        return result


def served_by_plane(name: str, counted: str | None = None) -> Callable[..., Awaitable[Any]]:
    """A ``DataService`` method of ``FakeData``: the fault hooks (the call counted, and refused by an
    injected error, under ``counted``, by default its name; this node's belief of who leads the
    partition), then the real data plane's method. Its signature is the plane's (``functools.wraps``)."""
    real = getattr(DataPlane, name)
    signature = inspect.signature(real)

    @functools.wraps(real)
    async def served(self: FakeData, *args: Any, **kwargs: Any) -> Any:
        called = signature.bind(self, *args, **kwargs).arguments
        self._enter(counted or name)
        self._led_here(called["topic"], called["partition"])
        return await getattr(self.plane, name)(*args, **kwargs)

    return served


class FakeData:
    """One node's ``DataService`` and ``PeerService`` over the cluster, and the state helpers the other
    fakes share (the calls counter, injected errors, this node's leadership beliefs)."""

    def __init__(self, cluster: FakeCluster, node_id: str) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.groups = GroupCoordinator(FakeGroupLog(self))
        self.transactions = TransactionCoordinator(node_id, FakeTransactionLog(self), self._write_marker)
        self.calls: Counter[str] = Counter()
        self.leader_overrides: dict[tuple[str, int], str | None] = {}  # this node's (maybe wrong) belief
        self.inject: dict[str, list[BaseException]] = {}  # method name -> errors to raise, in order
        self.produce_delay_s = 0.0
        self.lose_produce_answers: list[BaseException] = []  # raised after the append: outcome unknown
        self.plane = DataPlane(
            node_id,
            FakeReplicas(node_id, lambda: cluster.topics, cluster.partitions),  # type: ignore[arg-type]
            FakeRouting(self),  # type: ignore[arg-type]
            self.topic,
            lambda: int(time.time() * 1000),
            TransactionalWrites(None, tuple, _no_coordinator, _no_transaction),
            ProducerIds(lambda: cluster.metadata.producer_owners, self._register_owner),
            run_now,
        )

    async def _register_owner(self, principal: str) -> int:
        """The controller's number for ``principal`` (the real node asks the controller leader for it)."""
        number = self.cluster.propose(RegisterProducerOwner(principal))
        assert isinstance(number, int)
        return number

    # -- helpers ---------------------------------------------------------------------------------------

    async def _write_marker(self, tp: TopicPartition, marker: Marker) -> None:
        self._partition(tp.topic, tp.partition)
        self.cluster.markers.append(
            (tp.topic, tp.partition, marker.producer_id, marker.producer_epoch, marker.commit,
             marker.coordinator_epoch)
        )  # fmt: skip

    def _enter(self, method: str) -> None:
        self.calls[method] += 1
        pending = self.inject.get(method)
        if pending:
            raise pending.pop(0)

    def topic(self, name: str) -> TopicMetadata:
        meta = self.cluster.topics.get(name)
        if meta is None:
            raise UnknownTopic(name)
        return meta

    def _partition(self, topic: str, partition: int) -> FakePartition:
        meta = self.topic(topic)
        if not 0 <= partition < meta.partitions:
            raise UnknownPartition(topic, partition)
        return self.cluster.partitions[(topic, partition)]

    def _led_here(self, topic: str, partition: int) -> FakePartition:
        state = self._partition(topic, partition)
        group = self.cluster.topics[topic].group_id(partition)
        believed = self.leader_overrides.get((topic, partition), state.leader)
        if (topic, partition) in self.leader_overrides or believed != self.node_id:
            if believed is None:
                raise NoLeader(group)
            if believed != self.node_id:
                raise NotLeader(group, believed)
        if state.leader != self.node_id:
            raise NotLeader(group, state.leader)
        return state

    def _controller_here(self) -> None:
        if self.cluster.controller is None:
            raise NoLeader("controller")
        if self.cluster.controller != self.node_id:
            raise NotLeader("controller", self.cluster.controller)

    def known_leader(self, topic: str, partition: int) -> str | None:
        """Never a replica that cannot open or replay."""
        state = self.cluster.partitions.get((topic, partition))
        if state is None or state.leader is None or self.cluster.failed(state.leader, topic, partition):
            return None
        return state.leader

    # -- data: the real data plane over the partitions' real state, after the fault hooks ----------------

    async def produce_batch(
        self, topic: str, partition: int, batch: bytes, timeout_ms: int, producer: Producer | None = None
    ) -> ProduceResult:
        self._enter("produce_batch")
        self._led_here(topic, partition)
        if self.produce_delay_s:
            await asyncio.sleep(self.produce_delay_s)
        result = await self.plane.produce_batch(topic, partition, batch, timeout_ms, producer)
        if self.lose_produce_answers:
            raise self.lose_produce_answers.pop(0)
        return result

    # the rest of DataService: the real data plane's, after the same hooks (counted under these names)
    fetch_batches = served_by_plane("fetch_batches", "fetch")
    fetch_stable = served_by_plane("fetch_stable", "fetch")
    offsets = served_by_plane("offsets")
    offset_for_timestamp = served_by_plane("offset_for_timestamp")
    epoch_end_offset = served_by_plane("epoch_end_offset")
    commit_offset = served_by_plane("commit_offset")
    producers = served_by_plane("producers")
    committed_offset = served_by_plane("committed_offset")
    stable_committed_offset = served_by_plane("stable_committed_offset", "group_offset")
    open_transaction = served_by_plane("open_transaction")
    group_offset = served_by_plane("group_offset")
    commit_txn_offset = served_by_plane("commit_txn_offset")
    write_txn_marker = served_by_plane("write_txn_marker")
    delete_offset = served_by_plane("delete_offset")
    share_offset = served_by_plane("share_offset")
    alter_share_offset = served_by_plane("alter_share_offset")
    delete_share_state = served_by_plane("delete_share_state")
    delete_records = served_by_plane("delete_records")

    # -- peer ------------------------------------------------------------------------------------------

    async def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedBatches:
        """From any replica of the partition, as the data plane serves a peer."""
        self._enter("read_batches")
        return await self.plane.read_batches(topic, partition, offset, max_bytes)

    async def leadership(self) -> Claims:
        """The partitions this node leads (Raft group -> term); the version is the sum of their terms."""
        claims = {
            meta.group_id(p): self.cluster.partitions[(name, p)].term
            for name, meta in self.cluster.topics.items()
            for p in range(meta.partitions)
            if self.cluster.partitions[(name, p)].leader == self.node_id
        }
        return Claims(self.node_id, sum(claims.values()), claims)

    async def replica_failures(self) -> Failures:
        own = [f for f in self.cluster.failures if f.node == self.node_id]
        return Failures(self.node_id, digest(own), tuple(own))

    async def controller_snapshot(self, known_index: int | None) -> ControllerSnapshot:
        self._controller_here()
        index = self.cluster.controller_machine.applied_index
        snapshot = None if known_index == index else self.cluster.controller_machine.snapshot()
        return ControllerSnapshot(self.node_id, self.cluster.addresses.get(self.node_id, ""), index, snapshot)

    async def member_view(self, topic: str, partition: int) -> MemberView:
        state = self._led_here(topic, partition)
        others = {n: state.end_offset for n in state.replicas if n != self.node_id}
        return MemberView(self.node_id, frozenset(state.replicas), state.end_offset, others)

    async def replica_log(self, topic: str, partition: int) -> ReplicaLog:
        """The replicas share one log here: a replica's is complete."""
        state = self._partition(topic, partition)
        if self.node_id not in state.replicas:
            raise NotLeader(self.cluster.topics[topic].group_id(partition), state.leader)
        return ReplicaLog(state.end_offset, state.end_offset, state.end_offset)

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        self._enter("change_membership")
        state = self._led_here(topic, partition)
        if change == "transfer":
            transfer(self, topic, partition, node_id)
        elif change == "add" and node_id not in state.replicas:
            state.replicas = (*state.replicas, node_id)
        elif change == "remove" and node_id in state.replicas:
            state.replicas = tuple(n for n in state.replicas if n != node_id)
        elif change not in ("add", "remove"):
            raise InvalidReassignment(f"unknown membership change {change!r}")

    async def join_controller(self, voters: list[str]) -> None:
        self.cluster.joined_controller.append((self.node_id, list(voters)))

    async def leave_controller(self, why: str) -> None:
        self.cluster.left_controller.append(self.node_id)


class FakeRouting:
    """What the data plane asks of a node's ``Routing``: the leader the cluster knows."""

    def __init__(self, data: FakeData) -> None:
        self.data = data

    def leader_hint(self, topic: str, partition: int) -> str | None:
        return self.data.known_leader(topic, partition)

    def claimed_leader(self, metadata: TopicMetadata, partition: int) -> str | None:
        leader = self.data.known_leader(metadata.name, partition)
        return None if leader == self.data.node_id else leader


def transfer(data: FakeData, topic: str, partition: int, target: str | None) -> str:
    """Leadership of a partition ``data``'s node leads moves to ``target`` (None: another replica)."""
    state = data._led_here(topic, partition)
    group = data.cluster.topics[topic].group_id(partition)
    others = [n for n in state.replicas if n != data.node_id]
    if target is None:
        if not others:
            raise ProposalRejected(group, "no other replica to lead")
        target = others[0]
    if target not in state.replicas:
        raise ProposalRejected(group, f"{target} is not a replica")
    state.leader = target
    state.term += 1
    state.notify()
    return target


class FakeFrontend:
    """What the real ``TopicChanges`` and ``SecurityRecords`` ask of a node's ``MetadataFrontend``, over
    the cluster's controller: its applied metadata, proposals on the controller leader only, and (as the
    frontend's ``Members``, and its controller group's status) the nodes as the cluster has them."""

    def __init__(self, data: FakeData) -> None:
        self.data = data
        self.cluster = data.cluster
        self.node_id = data.node_id

    def metadata(self) -> ControllerMetadata:
        return self.cluster.metadata

    def topic(self, name: str) -> TopicMetadata:
        return self.data.topic(name)

    def known_node(self, node_id: str) -> None:
        if node_id not in self.cluster.node_ids:
            raise UnknownNode(node_id)

    def leader_group(self) -> FakeFrontend:
        self.data._controller_here()
        return self

    def status(self) -> SimpleNamespace:
        return SimpleNamespace(voters=tuple(self.cluster.controller_voters))

    async def propose(self, command: ControllerCommand, timeout_ms: int = 0) -> object:
        self.data._controller_here()
        return self.cluster.propose(command)

    def members(self) -> FakeFrontend:
        return self

    def known_nodes(self) -> set[str]:
        return set(self.cluster.node_ids)

    def alive_nodes(self) -> list[str]:
        cluster = self.cluster
        return [n for n in cluster.node_ids if cluster.states[n] == "alive" and n not in cluster.kept_out]

    def placeable(self) -> list[str]:
        return self.alive_nodes()

    def standby(self) -> list[str]:
        return [n for n in self.cluster.node_ids if self.cluster.states[n] in ("suspect", "dead")]

    def supported_features(self, node_id: str) -> Mapping[str, int] | None:
        return SUPPORTED if self.cluster.states[node_id] == "alive" else None  # every node of this release

    def has_leader(self, metadata: TopicMetadata, partition: int) -> bool:
        state = self.cluster.partitions.get((metadata.name, partition))
        return state is not None and state.leader is not None

    def http_address(self, node_id: str) -> str | None:
        return self.cluster.addresses.get(node_id)


def on_controller(room: type[TopicChanges | SecurityRecords], name: str) -> Callable[..., Awaitable[Any]]:
    """An ``AdminService`` method of ``FakeAdmin``: the fault hooks (the call counted, and refused by an
    injected error, under its name), then, on the controller only (as ``LocalAdmin``), the real method of
    ``room`` (``TopicChanges`` or ``SecurityRecords``) over this node's seat at the fake controller. Its
    signature is the real method's (``functools.wraps``); it is async whether that one is or not."""
    real = getattr(room, name)

    @functools.wraps(real)
    async def served(self: FakeAdmin, *args: Any, **kwargs: Any) -> Any:
        self.data._enter(name)
        self.data._controller_here()
        changes = self._security() if room is SecurityRecords else self._topics()
        answer = getattr(changes, name)(*args, **kwargs)
        return await answer if inspect.isawaitable(answer) else answer

    return served


class FakeAdmin:
    """One node's ``AdminService``: controller operations on the cluster's controller node only."""

    def __init__(self, data: FakeData) -> None:
        self.data = data
        self.cluster = data.cluster

    async def resource_configs(self, kind: str) -> dict[str, dict[str, str]]:
        self.data._controller_here()
        resources = self.cluster.metadata.resource_configs
        return {name: dict(values) for (of, name), values in resources.items() if of == kind}

    async def topic(self, name: str, fresh: bool = False) -> TopicMetadata:
        return self.data.topic(name)

    def _security(self) -> SecurityRecords:
        """The real users, ACLs, tokens and quotas changes over this node's seat at the controller."""
        return SecurityRecords(FakeFrontend(self.data))  # type: ignore[arg-type]

    def _topics(self) -> TopicChanges:
        """The real topic changes (placement, checks, proposals) over this node's seat at the controller."""
        return TopicChanges(FakeFrontend(self.data), self.cluster.replicas_max)  # type: ignore[arg-type]

    async def update_feature(self, feature: str, level: int) -> dict[str, int]:
        self.data._enter("update_feature")
        self._topics().check_feature(feature, level)  # as LocalAdmin: here first, then on the controller
        self.data._controller_here()
        return await self._topics().update_feature(feature, level)

    # the rest of the controller's changes and reads: the real ones, after the same hooks
    create_topic = on_controller(TopicChanges, "create_topic")
    add_partitions = on_controller(TopicChanges, "add_partitions")
    delete_topic = on_controller(TopicChanges, "delete_topic")
    alter_configs = on_controller(TopicChanges, "alter_configs")
    alter_resource_configs = on_controller(TopicChanges, "alter_resource_configs")
    move_replicas = on_controller(TopicChanges, "move_replicas")
    move_state = on_controller(TopicChanges, "move_state")
    cancel_move = on_controller(TopicChanges, "cancel_move")
    set_node_flag = on_controller(TopicChanges, "set_node_flag")
    decommission_status = on_controller(TopicChanges, "decommission_status")
    set_user = on_controller(SecurityRecords, "set_user")
    delete_user = on_controller(SecurityRecords, "delete_user")
    alter_user = on_controller(SecurityRecords, "alter_user")
    create_acls = on_controller(SecurityRecords, "create_acls")
    delete_acls = on_controller(SecurityRecords, "delete_acls")
    create_token = on_controller(SecurityRecords, "create_token")
    delete_token = on_controller(SecurityRecords, "delete_token")
    change_delegation_token = on_controller(SecurityRecords, "change_delegation_token")
    alter_client_quotas = on_controller(SecurityRecords, "alter_client_quotas")
    register_producer_owner = on_controller(SecurityRecords, "register_producer_owner")

    # The controller group's members are its Raft group's configuration, not the state machine's: the real
    # ControllerVoters changes them on a ReplicaGroup (add_learner, remove_replica, a leadership transfer),
    # which the fake controller has none of. Its voters stay a list here; who may join or leave is the
    # real rule (controller_members).

    async def controller_members(self) -> ControllerMembers:
        self.data._controller_here()
        cluster = self.cluster
        assert cluster.controller is not None
        index = cluster.controller_machine.applied_index
        members = cluster.controller_voters + cluster.controller_learners
        others = [n for n in members if n != cluster.controller]
        times = cluster.controller_times
        return ControllerMembers(
            cluster.controller,
            1,
            tuple(sorted(cluster.controller_voters)),
            tuple(cluster.controller_learners),
            index,
            {n: index for n in others},
            heard_at_ms=tuple(sorted((n, heard) for n, (heard, _) in times.items())),
            caught_up_at_ms=tuple(sorted((n, at) for n, (_, at) in times.items() if at is not None)),
        )

    async def add_controller_voter(self, node_id: str) -> ControllerMembers:
        self.data._enter("add_controller_voter")
        members = await self.controller_members()
        if node_id not in self.cluster.node_ids:
            raise UnknownNode(node_id)
        leaving = self.cluster.flags["decommissioning"]
        alive = FakeFrontend(self.data).alive_nodes()
        refusal = controller_members.add_refusal(members, node_id, alive, leaving)
        if refusal is not None:
            raise ControllerChangeRefused(node_id, refusal)
        self.cluster.controller_learners.append(node_id)
        return await self.controller_members()

    async def remove_controller_voter(self, node_id: str) -> ControllerMembers:
        self.data._enter("remove_controller_voter")
        members = await self.controller_members()
        if node_id not in self.cluster.node_ids:
            raise UnknownNode(node_id)
        alive = FakeFrontend(self.data).alive_nodes()
        refusal = controller_members.remove_refusal(members, node_id, alive)
        if refusal is not None:
            raise ControllerChangeRefused(node_id, refusal)
        for nodes in (self.cluster.controller_voters, self.cluster.controller_learners):
            if node_id in nodes:
                nodes.remove(node_id)
        if self.cluster.controller == node_id:
            self.cluster.controller = self.cluster.controller_voters[0]
        return await self.controller_members()

    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        self.data._enter("partition_state")
        state = self.data._led_here(topic, partition)
        replicas = []
        for node in state.replicas:
            failure = self.cluster.failed(node, topic, partition)
            if failure is not None:
                replicas.append(ReplicaState(node, "failed", None, None, False, failure.error))
                continue
            replicas.append(
                ReplicaState(
                    node,
                    "leader" if node == state.leader else "follower",
                    match_offset=state.end_offset,
                    lag=0,
                    in_sync=self.cluster.states.get(node) == "alive",
                )
            )
        return PartitionState(
            topic, partition, state.leader, state.term, state.end_offset, state.log_start_offset, replicas
        )

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> str | None:
        self.data._enter("transfer_leadership")
        return transfer(self.data, topic, partition, target)


class FakeMetadata:
    """One node's ``MetadataView``."""

    def __init__(self, data: FakeData) -> None:
        self.data = data
        self.cluster = data.cluster
        self.node_id = data.node_id
        self._client_quotas = ClientQuotas(lambda: self.cluster.metadata.quotas)

    def topics(self) -> list[str]:
        return sorted(self.cluster.topics)

    def topics_by_name(self) -> Mapping[str, TopicMetadata]:
        return self.cluster.topics

    def topic(self, name: str) -> TopicMetadata:
        return self.data.topic(name)

    def caught_up(self) -> bool:
        return self.node_id not in self.cluster.catching_up

    def controller(self) -> str | None:
        return self.cluster.controller

    def known_leader(self, topic: str, partition: int) -> str | None:
        return self.data.known_leader(topic, partition)

    def known_leader_epoch(self, topic: str, partition: int) -> tuple[str | None, int]:
        leader = self.data.known_leader(topic, partition)
        state = self.cluster.partitions.get((topic, partition))
        return leader, -1 if leader is None or state is None else state.term

    def leader_hint(self, topic: str, partition: int) -> str | None:
        if (topic, partition) in self.data.leader_overrides:
            return self.data.leader_overrides[(topic, partition)]
        return self.known_leader(topic, partition)

    def http_address(self, node_id: str) -> str | None:
        return self.cluster.addresses.get(node_id)

    def kafka_address(self, node_id: str) -> str | None:
        return None  # fake nodes have no Kafka listener

    def nodes(self) -> list[NodeInfo]:
        led = Counter(p.leader for p in self.cluster.partitions.values())
        flags = self.cluster.flags
        return [
            NodeInfo(
                n,
                self.cluster.addresses.get(n, ""),
                self.cluster.states[n],
                1,
                led[n],
                n in flags["maintenance"],
                n in flags["decommissioning"],
                decommission.finished(
                    n, flags["decommissioning"], {m.name: m.replicas for m in self.cluster.topics.values()}
                ),
                1000,
                10**9,
                kept_out=self.cluster.kept_out.get(n),
            )
            for n in self.cluster.node_ids
        ]

    def moves(self) -> list[MoveState]:
        return TopicChanges(FakeFrontend(self.data), REPLICAS_MAX_DEFAULT).moves()  # type: ignore[arg-type]

    def failed_replicas(self) -> list[ReplicaFailure]:
        return [f for f in self.cluster.failures if self.cluster.failed(f.node, f.topic, f.partition)]

    def users(self) -> Mapping[str, tuple[ScramCredential, ...]]:
        return self.cluster.users

    def acls(self) -> tuple[AclBinding, ...]:
        return self.cluster.acls

    def tokens(self) -> Mapping[str, ApiToken]:
        return self.cluster.tokens

    def delegation_tokens(self) -> Mapping[str, DelegationToken]:
        return self.cluster.metadata.delegation_tokens

    def client_quotas(self) -> ClientQuotas:
        return self._client_quotas  # the cluster's quotas, metered here

    def resource_configs(self) -> Mapping[tuple[str, str], Mapping[str, str]]:
        return self.cluster.metadata.resource_configs

    def log_dir(self) -> LogDir:
        held = [(t, p) for (t, p), part in self.cluster.partitions.items() if self.node_id in part.replicas]
        replicas = (ReplicaDir(t, p, self.cluster.partitions[(t, p)].size_bytes, 0) for t, p in held)
        return log_dir(f"/fake/{self.node_id}", None, replicas)

    def features(self) -> Features:
        return Features(lambda: self.cluster.metadata.features)

    def histograms(self) -> dict[str, HistogramSnapshot]:
        return {}

    def metrics(self) -> dict[str, float]:
        led = [(key, p) for key, p in self.cluster.partitions.items() if p.leader == self.node_id]
        return (
            self.data.groups.metrics()
            | self.data.transactions.metrics()
            | {"partitions_led": float(len(led)), "partition_replicas": float(len(self.cluster.partitions))}
            | {
                f'partition_high_watermark{{topic="{topic}",partition="{partition}"}}': float(p.end_offset)
                for (topic, partition), p in led
            }
        )


@dataclass
class FakeLocal:
    data: FakeData
    admin: FakeAdmin
    groups: ConsumerService
    peer: FakeData
    transactions: TransactionCoordinator
    registry: SchemaRegistry
    shares: ShareRecords | None = None  # share groups are the Kafka door's alone: no HTTP test reaches them


class FakeNode:
    """Implements ``partitions.peers.cluster.FrontDoor`` over the fakes, with the real cluster-wide
    services."""

    def __init__(
        self,
        cluster: FakeCluster,
        node_id: str,
        peer_timeout_s: float = 15.0,
        data: type[FakeData] = FakeData,
    ) -> None:
        self.node_id = node_id
        self.data = data(cluster, node_id)
        self.metadata = FakeMetadata(self.data)
        self.local = FakeLocal(
            self.data,
            FakeAdmin(self.data),
            ConsumerService(node_id, self.data.groups, lambda: self.cluster.data),
            self.data,
            self.data.transactions,
            SchemaRegistry(FakeSchemaLog(self.data), TYPES, lambda: self.metadata.features().levels()),
        )
        self.peers = PeerClient(
            INTERNAL_CREDENTIAL,
            cluster.addresses.get,
            peer_timeout_s,
            kept_out=lambda announced: kept_out(self.metadata.features().levels(), announced),
        )
        # No wait for a leader: these tests see the edge's answer to each refusal they inject (the wait
        # itself: tests/partitions/peers/test_router.py)
        self.cluster = Cluster(self.local, self.metadata, self.peers, leader_wait_s=0.0)

    def peer_credential_ok(self, presented: str) -> bool:
        return presented == INTERNAL_CREDENTIAL

    def check_peer_levels(self, caller: str, announced: Mapping[str, int] | None) -> None:
        reason = kept_out(self.metadata.features().levels(), announced)
        if reason is not None:
            raise NodeKeptOut(caller, reason)

    def supported_levels(self) -> Mapping[str, int]:
        return SUPPORTED

    async def close(self) -> None:
        await self.peers.close()
        self.data.plane.close()


INTERNAL_CREDENTIAL = "fake-internal-credential"
