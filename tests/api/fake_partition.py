"""A partition of the HTTP tests' cluster (``fake_node``) as a real replica without Raft: its state is a real
``PartitionStateMachine`` over a real segmented ``Log`` in a temporary folder, and each node's view of it
is a ``Replica`` whose group applies a proposal at once. So every node of the fake cluster runs the real
``DataPlane`` over it: the produce rules, the idempotence window, offsets, transactions' markers and
offsets, deletes and reads are the product's own, and only replication and elections are left out (the
fake cluster says who leads).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from partitions.controller.state import TopicMetadata
from partitions.replicas.dedup import ProducerTable
from partitions.replicas.manager import Replica
from partitions.replicas.recovery_serving import RecoveryServing
from partitions.replicas.state_machine import ApplyResult, PartitionStateMachine
from raftlog.consensus.interface import READ_NOT_LEADER, GroupStatus, Role
from raftlog.storage.batch import Record
from raftlog.storage.config import LogConfig
from raftlog.storage.log import Log

READ_ALL_BYTES = 1 << 40  # a test's whole partition, read back at once


@dataclass(eq=False)
class FakePartition:
    """One partition: who leads it and its replicas (as the fake cluster decides), its real state. Its log
    is opened when first used: most partitions of a test's large topic are never written."""

    leader: str | None
    replicas: tuple[str, ...]
    storage: Storage
    directory: str
    topic: TopicMetadata  # the metadata its log's configs come from
    term: int = 1
    applied: int = 0  # the index of the last entry applied
    views: dict[str, Replica] = field(default_factory=dict)  # node -> its replica of this partition
    _machine: PartitionStateMachine | None = None

    @property
    def machine(self) -> PartitionStateMachine:
        if self._machine is None:
            self._machine = PartitionStateMachine(self.storage.open(self.directory, self.topic.log_config()))
        return self._machine

    def configure(self, topic: TopicMetadata) -> None:
        """The topic's metadata changed (its configs, its partitions): an open log takes its configs."""
        if topic is not self.topic:
            self.topic = topic
            if self._machine is not None:
                self._machine.log.reconfigure(topic.log_config())

    def close(self) -> None:
        """Its log closed and its folder removed (its topic was deleted)."""
        if self._machine is not None:
            self.storage.discard(self._machine.log, self.directory)
            self._machine = None

    @property
    def log(self) -> Log:
        return self.machine.log

    @property
    def log_start_offset(self) -> int:
        return 0 if self._machine is None else self._machine.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return 0 if self._machine is None else self._machine.high_watermark

    @property
    def producers(self) -> ProducerTable:
        return self.machine.producers

    @property
    def consumer_offsets(self) -> dict[str, int]:
        return dict(self.machine.consumer_offsets)

    @property
    def size_bytes(self) -> int:
        return 0 if self._machine is None else self._machine.log.size_bytes()

    @property
    def records(self) -> list[Record]:
        """Every record the log holds, as a reader gets them (no transaction markers)."""
        if self._machine is None:
            return []
        return self.machine.log.read(self.log_start_offset, READ_ALL_BYTES, self.end_offset)

    def apply(self, command: bytes | tuple[bytes, ...]) -> ApplyResult:
        """A proposal committed at once, in this partition's current term, and every waiting read woken."""
        self.applied += 1
        entry = command if isinstance(command, bytes) else b"".join(command)
        result = self.machine.apply(self.applied, self.term, entry)
        self.notify()
        return result

    def notify(self) -> None:
        for replica in self.views.values():
            replica.wake()


class InstantGroup:
    """A replica's Raft group as its node sees it, without Raft: what the data plane asks of a
    ``ReplicaGroup`` (who leads, the term, readiness, proposals)."""

    def __init__(self, group_id: str, node_id: str, state: FakePartition) -> None:
        self.group_id = group_id
        self.node_id = node_id
        self._state = state

    async def propose(self, command: bytes | tuple[bytes, ...], timeout_ms: int) -> object:
        return self._state.apply(command)

    def role_and_leader(self) -> tuple[Role, str | None]:
        leader = self._state.leader
        return (Role.LEADER if leader == self.node_id else Role.FOLLOWER), leader

    def leader_term(self) -> int | None:
        return self._state.term if self._state.leader == self.node_id else None

    def leader_ready(self) -> bool:
        return self._state.leader == self.node_id

    def leader_and_term(self) -> tuple[str | None, int]:
        return self._state.leader, self._state.term

    def read_refusal(self) -> str | None:
        """No Raft here: the leader's reads always stand."""
        return None if self._state.leader == self.node_id else READ_NOT_LEADER

    def status(self) -> GroupStatus:
        role, leader = self.role_and_leader()
        applied = self._state.applied
        return GroupStatus(
            self.group_id, self.node_id, role, self._state.term, leader, applied, applied, applied, applied,
            leader_ready=role is Role.LEADER, voters=frozenset(self._state.replicas),
        )  # fmt: skip


class FakeReplicas:
    """What the data plane asks of a node's ``ReplicaManager``: its replica of a partition (None when the
    node holds none) and the replication throttle it serves peers under (none set here)."""

    def __init__(
        self, node_id: str, topics: Callable[[], Mapping[str, TopicMetadata]], partitions: PartitionsOf
    ) -> None:
        self.node_id = node_id
        self._topics = topics
        self._partitions = partitions
        self.serving = RecoveryServing(lambda topic, partition: None)

    def get(self, group_id: str) -> Replica | None:
        head, _, topic_id = group_id.rpartition(".")  # TopicMetadata.group_id: "{name}-{partition}.{id}"
        name, _, partition = head.rpartition("-")
        meta = self._topics().get(name)
        if meta is None or str(meta.topic_id) != topic_id or not partition.isdigit():
            return None
        if meta.group_id(int(partition)) != group_id or int(partition) >= meta.partitions:
            return None
        return self._view(meta, int(partition))

    def _view(self, meta: TopicMetadata, partition: int) -> Replica | None:
        state = self._partitions.get((meta.name, partition))
        if state is None or self.node_id not in state.replicas:
            return None
        view = state.views.get(self.node_id)
        state.configure(meta)
        if view is None or view.topic is not meta:  # a first view, or its topic's metadata changed
            group = InstantGroup(meta.group_id(partition), self.node_id, state)
            view = Replica(meta, partition, state.log, state.machine, group)  # type: ignore[arg-type]
            state.views[self.node_id] = view
        return view


PartitionsOf = dict[tuple[str, int], FakePartition]


class Storage:
    """The folder the fake cluster's logs live in, and the logs open in it: closed and removed by
    ``close()``, or when the cluster is collected."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="raftlog-fake-")
        self._logs: list[Log] = []
        self._count = 0
        self._finalizer = weakref.finalize(self, _remove, self._logs, self.root)

    def new_partition(
        self, leader: str | None, replicas: tuple[str, ...], meta: TopicMetadata
    ) -> FakePartition:
        self._count += 1
        directory = os.path.join(self.root, str(self._count))
        return FakePartition(leader, replicas, self, directory, meta)

    def open(self, directory: str, config: LogConfig) -> Log:
        log = Log.open(directory, config)
        self._logs.append(log)
        return log

    def discard(self, log: Log, directory: str) -> None:
        self._logs.remove(log)
        log.close(seal=False)
        shutil.rmtree(directory, ignore_errors=True)

    def close(self) -> None:
        self._finalizer()


def _remove(logs: list[Log], root: str) -> None:
    for log in logs:
        log.close(seal=False)
    logs.clear()
    shutil.rmtree(root, ignore_errors=True)


async def run_now(work: Callable[[], object]) -> object:
    """The data plane's ``run_on_driver``: there is no driver thread here, the loop applies."""
    return work()
