"""Where a partition's replicas live and which of them leads, over Kafka: AlterPartitionReassignments and
ListPartitionReassignments (``kafka-reassign-partitions``) on raftlog's own replica moves
(``partitions.controller.reconfigure``: a new replica joins as a Raft learner, is promoted once caught up,
a leaving one is removed, one membership change at a time), and ElectLeaders (``kafka-leader-election``)
as ``partitions.controller.elections`` decides it.

Kafka's broker ids are raftlog's node ids' numbers (``n1`` is 1, ``names.broker_id``). A reassignment
starts a move through the controller leader (``AdminService.move_replicas``) and is answered once the
controller committed it; the operator then drives it. A change of replication factor is a move to a
larger or smaller set (never below a majority of the current one). Null replicas cancel a move: it walks
back to its original replicas. What Kafka does and raftlog does not: a new target for a partition already
moving is refused ``REASSIGNMENT_IN_PROGRESS`` (cancel it, or wait), where Kafka replaces the move; a
target equal to the current replicas is done at once, as in Kafka. ListPartitionReassignments lists each
move with the union of its original and target replicas, the target's first, as Kafka lists ``replicas``
during a reassignment; a cancelled move walking back lists its original set as the target.

ACLs as Kafka's: ALTER on the cluster for the alter and the elections, DESCRIBE on the cluster for the
list (CLUSTER_AUTHORIZATION_FAILED, nothing done)."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door, clamp_timeout, placed_nodes
from kafka_api.errors import Caught, Refused, code_of
from partitions.controller.elections import ElectionType, Outcome, decide, unfit_to_lead
from partitions.errors import UnknownTopic
from partitions.metadata.service import AdminService, MoveState
from partitions.names import broker_id
from partitions.security.acls import AclOperation, ResourceType

CLUSTER = ResourceType.CLUSTER


# -- AlterPartitionReassignments --------------------------------------------------------------------


async def alter_partition_reassignments(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "ReassignableTopicResponse")
    partition_cls = wire.sibling(cls, "ReassignablePartitionResponse")
    allow_factor_change = getattr(body, "allow_replication_factor_change", True)  # v1 on
    if not door.allows(AclOperation.ALTER, CLUSTER):
        refused = door.refusal(AclOperation.ALTER, CLUSTER)
        return wire.build(
            cls,
            throttle_time=wire.NO_THROTTLE,
            allow_replication_factor_change=allow_factor_change,
            error_code=code_of(refused),
            error_message=str(refused),
            responses=(),
        )
    nodes = door.nodes_by_broker()
    admin = door.node.cluster.admin

    async def reassign(topic: str, partition: int, replicas: tuple[int, ...] | None) -> Any:
        with Caught() as caught:  # every error is this partition's answer
            if replicas is None:
                await admin.call(AdminService.cancel_move, topic, partition)
            else:
                await _start_move(door, topic, partition, replicas, nodes, allow_factor_change)
        return wire.build(
            partition_cls, partition_index=partition, error_code=caught.code, error_message=caught.message
        )

    responses = []
    for topic in body.topics:
        parts = await asyncio.gather(
            *(reassign(topic.name, p.partition_index, p.replicas) for p in topic.partitions)
        )
        responses.append(wire.build(topic_cls, name=topic.name, partitions=tuple(parts)))
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        allow_replication_factor_change=allow_factor_change,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )


async def _start_move(
    door: Door,
    topic: str,
    partition: int,
    replicas: tuple[int, ...],
    nodes: dict[int, str],
    allow_factor_change: bool,
) -> None:
    if not replicas:
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    target = placed_nodes(replicas, nodes)
    admin = door.node.cluster.admin
    state: MoveState = await admin.call(AdminService.move_state, topic, partition)
    wanted = state.move.target if state.move is not None else state.replicas
    if not allow_factor_change and len(target) != len(wanted):
        raise Refused(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {len(wanted)} to {len(target)}",
        )
    if target == list(wanted) and (state.move is None or not state.move.cancelled):
        return  # the replicas it has, or the move under way already: done, as Kafka answers it
    await admin.call(AdminService.move_replicas, topic, partition, target)


# -- ListPartitionReassignments ---------------------------------------------------------------------


async def list_partition_reassignments(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "OngoingTopicReassignment")
    partition_cls = wire.sibling(cls, "OngoingPartitionReassignment")
    if not door.allows(AclOperation.DESCRIBE, CLUSTER):
        refused = door.refusal(AclOperation.DESCRIBE, CLUSTER)
        return wire.build(
            cls,
            throttle_time=wire.NO_THROTTLE,
            error_code=code_of(refused),
            error_message=str(refused),
            topics=(),
        )
    asked: dict[str, set[int]] | None = None
    if request.body.topics is not None:
        asked = {}
        for topic in request.body.topics:
            asked.setdefault(topic.name, set()).update(topic.partition_indexes)
    by_topic: dict[str, list[Any]] = {}
    for state in sorted(door.node.metadata.moves(), key=lambda s: (s.topic, s.partition)):
        move = state.move
        if move is None or (asked is not None and state.partition not in asked.get(state.topic, ())):
            continue
        target = list(move.target)
        removing = [n for n in move.original if n not in target] + [
            n for n in state.replicas if n not in target and n not in move.original
        ]  # a cancelled move takes out again the nodes that joined
        adding = [n for n in target if n not in move.original]
        by_topic.setdefault(state.topic, []).append(
            wire.build(
                partition_cls,
                partition_index=state.partition,
                replicas=tuple(broker_id(n) for n in target + removing),
                adding_replicas=tuple(broker_id(n) for n in adding),
                removing_replicas=tuple(broker_id(n) for n in removing),
            )
        )
    topics = tuple(
        wire.build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
    )
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, error_message=None, topics=topics
    )


# -- ElectLeaders -----------------------------------------------------------------------------------


async def elect_leaders(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "ReplicaElectionResult")
    partition_cls = wire.sibling(cls, "PartitionResult")
    election = ElectionType(getattr(body, "election_type", 0))  # v1 on; v0: preferred
    timeout_ms = clamp_timeout(body.timeout.total_seconds() * 1000)
    metadata = door.node.metadata
    nodes = metadata.nodes()
    alive = {n.node_id for n in nodes if n.state == "alive"}
    unfit = {n.node_id: why for n in nodes if (why := unfit_to_lead(n.node_id, n.doors_missing)) is not None}
    authorized = door.allows(AclOperation.ALTER, CLUSTER)
    everything = body.topic_partitions is None
    if everything:
        asked = [(name, list(range(_partitions(door, name)))) for name in sorted(metadata.topics())]
    else:
        asked = [(t.topic, list(t.partitions)) for t in body.topic_partitions]

    async def elect(topic: str, partition: int) -> tuple[ErrorCode, str | None]:
        if not authorized:
            refused = door.refusal(AclOperation.ALTER, CLUSTER)
            return code_of(refused), str(refused)
        try:
            replicas = metadata.topic(topic).replicas[partition] if partition >= 0 else None
        except (UnknownTopic, IndexError):
            replicas = None
        if replicas is None:
            return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
        known = metadata.known_leader(topic, partition)
        decision = decide(election, replicas, known, alive, unfit)
        if known is None or decision.outcome is Outcome.TRANSFER:
            # this node's view of the leader may be a moment behind (a transfer just done, learned from
            # the leader's gossip), or have none yet: its leader's own answer decides, as Kafka's
            # controller decides on its own current view, so a partition already led by its target is
            # ELECTION_NOT_NEEDED, and one with a leader is never refused as having none
            with Caught() as caught:
                state = await door.node.cluster.admin.call(AdminService.partition_state, topic, partition)
            if not caught.failed and state.leader is not None:
                decision = decide(election, replicas, state.leader, alive, unfit)
        if decision.outcome is Outcome.NOT_NEEDED:
            return ErrorCode.election_not_needed, None
        if decision.outcome is Outcome.PREFERRED_NOT_AVAILABLE:
            return ErrorCode.preferred_leader_not_available, decision.reason
        if decision.outcome is Outcome.NO_ELIGIBLE_LEADER:
            return ErrorCode.eligible_leaders_not_available, decision.reason
        with Caught() as caught:  # the transfer failed: the partition's answer
            await door.node.cluster.admin.call(
                AdminService.transfer_leadership, topic, partition, decision.target, timeout_ms
            )
        return caught.code, caught.message

    results = []
    for topic, partitions in asked:
        answers = await asyncio.gather(*(elect(topic, p) for p in partitions))
        parts = tuple(
            wire.build(partition_cls, partition_id=p, error_code=code, error_message=message)
            for p, (code, message) in zip(partitions, answers, strict=True)
            # electing every partition, Kafka leaves out those that have their leader already
            if not (everything and code is ErrorCode.election_not_needed)
        )
        results.append(wire.build(topic_cls, topic=topic, partition_result=parts))
    top = ErrorCode.none if authorized else ErrorCode.cluster_authorization_failed
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=top, replica_election_results=tuple(results)
    )


def _partitions(door: Door, topic: str) -> int:
    try:
        return door.node.metadata.topic(topic).partitions
    except UnknownTopic:
        return 0
