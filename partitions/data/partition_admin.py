"""A partition's state and leadership, on this node's replica of it: what an operator sees
(``partition_state``), leadership transfers, and the Raft membership changes the controller leader's
``Operator`` drives on the partition's leader during a replica move. Event loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from partitions import replication_throttles
from partitions.controller import reconfigure
from partitions.controller.reconfigure import MoveProgress
from partitions.controller.state import TopicMetadata
from partitions.data.plane import DataPlane
from partitions.errors import InvalidReassignment, NodeKeptOut, UnknownPartition
from partitions.metadata.service import PartitionState, ReplicaState
from partitions.replicas.manager import ReplicaManager
from partitions.replicas.raft_host import RaftHost
from partitions.replicas.routing import Routing
from raftlog.consensus.errors import NoLeader, NotLeader, OutcomeUnknown
from raftlog.consensus.interface import Role

IN_SYNC_LAG_MAX = 1_000  # Raft entries a follower may trail and still count as in sync


@dataclass(eq=False)
class PartitionAdmin:
    node_id: str
    _replicas: ReplicaManager
    _data: DataPlane
    _routing: Routing
    _raft: RaftHost
    _topic: Callable[[str], TopicMetadata]
    _move_progress: Callable[[str, int], MoveProgress | None]
    _configs: Callable[[], replication_throttles.Configs]  # the controller metadata's resource configs

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """The leader's view (match offsets, lag, in sync) when this node leads; otherwise what this node's
        replica knows: the leader it follows (the caller then asks that leader) or none, ``in_sync``
        unknown. This node's replica cannot open or replay: NotLeader naming a known leader, else a state
        with no leader and no offsets. Any replica that cannot open or replay is "failed" with its error."""
        metadata = self._topic(topic)
        if not isinstance(partition, int) or not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        replica = self._replicas.get(metadata.group_id(partition))
        if replica is None or replica.group.stopped_error is not None:
            if replica is None and self._routing.failure(self.node_id, metadata, partition) is None:
                replica = self._data.replica(topic, partition)  # no replica here: NotLeader names whom to ask
            else:
                return self._failed_here_state(metadata, partition)
        status = replica.group.status()
        leader = status.leader
        if leader is not None and self._routing.failure(leader, metadata, partition) is not None:
            leader = None  # a replica that cannot open or replay leads nothing
        leading = leader == self.node_id and status.role is Role.LEADER
        last_index = status.last_index
        states = []
        listed = list(replica.topic.replicas[partition])
        listed += sorted(n for n in status.match_index if n not in listed)  # members joining in a move
        for node in listed:
            failure = self._routing.failure(node, metadata, partition)
            match = status.match_index.get(node) if leading else None
            lag = None if match is None else max(0, last_index - match)
            if failure is not None:
                states.append(ReplicaState(node, "failed", match, lag, False, failure.error))
            elif node == leader:
                states.append(ReplicaState(node, "leader", last_index, 0, True))
            elif leading and node in status.learners:
                # joining in a move: it receives the log but counts in no quorum, so it is in no ISR
                states.append(ReplicaState(node, "learner", match, lag, False))
            elif leading:
                in_sync = lag is not None and lag <= IN_SYNC_LAG_MAX and self._raft.is_connected(node)
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
            self._move_progress(topic, partition),
            replica.log.size_bytes if leading else None,
        )

    def _failed_here_state(self, metadata: TopicMetadata, partition: int) -> PartitionState:
        """This node's replica cannot open or replay: the leader's view if one is known (NotLeader names
        it), else no leader, and nothing this replica cannot tell (term, offsets, who is in sync)."""
        leader = self._routing.known_leader(metadata.name, partition)
        if leader is not None:
            raise NotLeader(metadata.group_id(partition), leader)
        states = []
        for node in metadata.replicas[partition]:
            failure = self._routing.failure(node, metadata, partition)
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
            self._move_progress(metadata.name, partition),
        )

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> str | None:
        """Move leadership to ``target`` (None: the most caught-up replica); the leader this node saw take
        over (never a guess). ``NodeKeptOut`` for a target whose code is below the cluster's levels,
        ``InvalidReassignment`` for one lacking a door the other nodes serve (``Routing.may_lead``)."""
        replica = self._data.leader_replica(topic, partition)
        kept_out = None if target is None else self._routing.kept_out(target)
        if target is not None and kept_out is not None:
            raise NodeKeptOut(target, kept_out)
        unfit = None if target is None else self._routing.may_lead(target)
        if unfit is not None:
            raise InvalidReassignment(unfit)
        if target != self.node_id:
            try:
                await replica.group.transfer_leadership(target, timeout_ms)
            except OutcomeUnknown as exc:  # named as the caller named it, not by its Raft group's id
                where = f"partition {topic}/{partition}"
                raise OutcomeUnknown(exc.group_id, exc.reason, about=where) from exc
        return self._routing.known_leader(topic, partition)

    # -- a replica move's membership changes, on the partition's leader ------------------------------

    def local_member_view(self, topic: str, partition: int) -> reconfigure.MemberView | None:
        """This node's view of a partition's Raft group if it leads it and may act (else None)."""
        metadata = self._routing.partition_topic(topic, partition)
        if metadata is None:
            return None
        replica = self._replicas.get(metadata.group_id(partition))
        if replica is None:
            return None
        status = replica.group.status()
        if status.role is not Role.LEADER or not status.leader_ready:
            return None
        return reconfigure.MemberView(
            self.node_id,
            status.voters,
            status.commit_index,
            dict(status.match_index),
            status.learners,
        )

    def member_view(self, topic: str, partition: int) -> reconfigure.MemberView:
        """NotLeader / NoLeader unless this node leads the partition and may act."""
        replica = self._data.leader_replica(topic, partition)
        view = self.local_member_view(topic, partition)
        if view is None:
            raise NoLeader(replica.group.group_id)
        return view

    async def replica_log(self, topic: str, partition: int) -> reconfigure.ReplicaLog:
        """This node's replica's own account of its partition log, read on the driver thread between two
        applies (a snapshot's restore included), so the applied index (the group's: membership changes
        count, which the state machine never sees), the log's end and the high watermark belong together;
        NotLeader when this node holds no replica of it."""
        replica = self._data.replica(topic, partition)
        group, machine = replica.group, replica.machine

        def read() -> reconfigure.ReplicaLog:
            applied = group.status().last_applied
            return reconfigure.ReplicaLog(applied, machine.log.end_offset, machine.high_watermark)

        return await self._raft.run(read)

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        """On the partition leader: one Raft membership change ("learner": join as a learner, "promote": a
        learner becomes a voter, "add": join as a voter at once, "remove": a voter or learner leaves) or a
        leadership "transfer". A change already made (a member already there, a voter already promoted,
        one already gone) is done already: the operator may repeat a step. A member joining under a
        replication throttle (``replication_throttles.joining_throttled``) joins after a compaction."""
        replica = self._data.leader_replica(topic, partition)
        status = replica.group.status()
        members = status.voters | status.learners
        joining = change in ("learner", "add") and node_id not in members
        if joining and replication_throttles.joining_throttled(
            self._configs(), topic, partition, node_id, members
        ):
            # the records the journal holds would reach it unthrottled: it installs a snapshot and
            # recovers them from its peers' logs under the throttles instead
            await replica.group.compact_now(timeout_ms)
        if change == "learner":
            if node_id not in members:
                await replica.group.add_learner(node_id, timeout_ms)
        elif change == "promote":
            if node_id not in status.voters:
                await replica.group.promote_learner(node_id, timeout_ms)
        elif change == "add":
            if node_id not in members:
                await replica.group.add_replica(node_id, timeout_ms)
        elif change == "remove":
            if node_id in members:
                await replica.group.remove_replica(node_id, timeout_ms)
        elif change == "transfer":
            if node_id != self.node_id:
                await replica.group.transfer_leadership(node_id, timeout_ms)
        else:
            raise InvalidReassignment(f"unknown membership change {change!r}")
