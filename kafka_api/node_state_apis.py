"""What a node holds and who holds the cluster's metadata, over Kafka: DescribeLogDirs
(``kafka-log-dirs --describe``, and ``kafka-reassign-partitions --generate``'s look at the brokers),
AlterReplicaLogDirs (``kafka-reassign-partitions`` with ``log_dirs``) and DescribeQuorum
(``kafka-metadata-quorum describe``).

DescribeLogDirs answers for the node asked (Kafka's admin client asks every broker): its one log
directory (``DATA_DIR/logs``), the volume's total and usable bytes (v4, KIP-827), and each replica it
holds with its size on disk and its lag (``partitions.replicas.log_dirs``); no replica is ever a "future"
one (raftlog moves no replica between directories of a node).

AlterReplicaLogDirs answers as a Kafka broker with that one log directory answers it
(``partitions.replicas.log_dirs.move_within``, each partition on its own): a replica asked into the
directory it is in is moved already (NONE), another path LOG_DIR_NOT_FOUND, a partition this node holds no
replica of REPLICA_NOT_AVAILABLE, one the node does not know UNKNOWN_TOPIC_OR_PARTITION; without ALTER on
the cluster, CLUSTER_AUTHORIZATION_FAILED for every partition. A partition named twice takes the last
path named for it, as Kafka's request reads it.

DescribeQuorum describes raftlog's controller group as Kafka's ``__cluster_metadata`` partition 0: its
leader, term (the leader epoch), commit index (the high watermark), voters and the learners joining it
(observers), each with the index of the controller log it has (the leader's match index; the leader's
own: the commit index), when the leader last heard from it and when it last held the leader's whole log
(``ControllerMembers.heard_at_ms``, ``caught_up_at_ms``; -1, as Kafka answers for a replica it has no
time for, when the leader has none), and its directory id (``directory_id``). Any node answers, asking
the controller's leader, as a Kafka broker forwards it to the active controller.

RemoveRaftVoter (``kafka-metadata-quorum remove-controller``) removes a controller voter named by its
broker id and directory id, as ``raftlog controller remove`` does (``AdminService.remove_controller_voter``:
a leader asked to leave hands over first), with the answers of Kafka 4.4's ``KafkaRaftClient`` and
``RemoveVoterHandler``: a cluster id not the cluster's ``INCONSISTENT_CLUSTER_ID``; no voter id or
directory id ``INVALID_REQUEST``; a voter that is not one (wrong directory id, a learner) or the last one
``VOTER_NOT_FOUND``; while another change is under way ``REQUEST_TIMED_OUT``.

AddRaftVoter (``kafka-metadata-quorum --command-config DATA_DIR/kafka/controller.properties add-controller``,
the files each node writes for it: ``controller_files.py``) adds the node named by its broker id and
directory id as ``raftlog controller add`` does (a learner, then a voter once caught up) and answers once it
is a voter, within the request's timeout (at most ``ADD_VOTER_WAIT_S_MAX``); one that did not catch up by
then is taken out again, REQUEST_TIMED_OUT, as Kafka 4.4's ``AddVoterHandler`` aborts it. Its other answers
are Kafka's: a voter's id DUPLICATE_VOTER, a change under way REQUEST_TIMED_OUT, no directory id
INVALID_REQUEST, another cluster's id INCONSISTENT_CLUSTER_ID.

ACLs as Kafka's: DESCRIBE on the cluster for DescribeQuorum, ALTER for AddRaftVoter and RemoveRaftVoter
(CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.controller_files import directory_id, kafka_uuid
from kafka_api.door import Door
from kafka_api.errors import Caught, Refused, code_of
from partitions.controller.members import ControllerMembers
from partitions.errors import UnknownTopic
from partitions.metadata.service import AdminService
from partitions.names import broker_id
from partitions.replicas.log_dirs import DirMove, move_within
from partitions.security.acls import AclOperation, ResourceType

METADATA_TOPIC = "__cluster_metadata"  # the name Kafka's tools ask DescribeQuorum about
ADD_VOTER_WAIT_S_MAX = 120.0  # the longest an AddRaftVoter waits for its learner to become a voter
ADD_VOTER_POLL_S = 0.2  # how often it looks
UNKNOWN_TIME = -1
CLUSTER = ResourceType.CLUSTER


# -- DescribeLogDirs --------------------------------------------------------------------------------


async def describe_log_dirs(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "DescribeLogDirsResult")
    topic_cls = wire.sibling(cls, "DescribeLogDirsTopic")
    partition_cls = wire.sibling(cls, "DescribeLogDirsPartition")
    if not door.allows(AclOperation.DESCRIBE, CLUSTER):
        refused = door.refusal(AclOperation.DESCRIBE, CLUSTER)
        return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code_of(refused), results=())
    asked: dict[str, set[int]] | None = None
    if request.body.topics is not None:
        asked = {}
        for topic in request.body.topics:
            asked.setdefault(topic.topic, set()).update(topic.partitions)
    held = door.node.metadata.log_dir()
    by_topic: dict[str, list[Any]] = {}
    for replica in held.replicas:
        if asked is not None and replica.partition not in asked.get(replica.topic, ()):
            continue
        by_topic.setdefault(replica.topic, []).append(
            wire.build(
                partition_cls,
                partition_index=replica.partition,
                partition_size=replica.size_bytes,
                offset_lag=replica.lag,
                is_future_key=False,
            )
        )
    topics = tuple(
        wire.build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
    )
    result = wire.build(
        result_cls,
        error_code=ErrorCode.none,
        log_dir=held.path,
        topics=topics,
        total_bytes=held.total_bytes,
        usable_bytes=held.usable_bytes,
    )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, results=(result,))


# -- AlterReplicaLogDirs ---------------------------------------------------------------------------

MOVE_CODES = {
    DirMove.IN_PLACE: ErrorCode.none,
    DirMove.NO_SUCH_DIR: ErrorCode.log_dir_not_found,
    DirMove.NOT_HERE: ErrorCode.replica_not_available,
    DirMove.NO_SUCH_PARTITION: ErrorCode.unknown_topic_or_partition,
}


async def alter_replica_log_dirs(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "AlterReplicaLogDirTopicResult")
    partition_cls = wire.sibling(cls, "AlterReplicaLogDirPartitionResult")
    asked: dict[tuple[str, int], str] = {}  # a partition named twice: the last path, as Kafka reads it
    for log_dir in request.body.dirs:
        for topic in log_dir.topics:
            asked.update(((topic.name, int(p)), log_dir.path) for p in topic.partitions)
    allowed = door.allows(AclOperation.ALTER, CLUSTER)
    refused = None if allowed else code_of(door.refusal(AclOperation.ALTER, CLUSTER))
    held = door.node.metadata.log_dir() if allowed else None
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), path in asked.items():
        code = refused
        if held is not None:
            code = MOVE_CODES[move_within(held, topic, partition, path, _exists(door, topic, partition))]
        by_topic.setdefault(topic, []).append(
            wire.build(partition_cls, partition_index=partition, error_code=code)
        )
    results = tuple(
        wire.build(topic_cls, topic_name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
    )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results=results)


def _exists(door: Door, topic: str, partition: int) -> bool:
    """The partition as this node's metadata has it (Kafka's broker asks its metadata cache)."""
    try:
        return 0 <= partition < door.node.metadata.topic(topic).partitions
    except UnknownTopic:
        return False


# -- DescribeQuorum ---------------------------------------------------------------------------------


async def describe_quorum(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    if not door.allows(AclOperation.DESCRIBE, CLUSTER):
        refused = door.refusal(AclOperation.DESCRIBE, CLUSTER)
        return wire.build(cls, error_code=code_of(refused), error_message=str(refused), topics=(), nodes=())
    asked = [(t.topic_name, [p.partition_index for p in t.partitions]) for t in request.body.topics]
    if asked != [(METADATA_TOPIC, [0])]:  # as Kafka's controller answers any other question
        return wire.build(
            cls,
            error_code=ErrorCode.invalid_request,
            error_message=f"only {METADATA_TOPIC} partition 0 has a quorum to describe",
            topics=(),
            nodes=(),
        )
    with Caught() as caught:  # no controller leader reached: the request's answer
        members: ControllerMembers = await door.node.cluster.admin.call(AdminService.controller_members)
    if caught.failed:
        return wire.build(cls, error_code=caught.code, error_message=caught.message, topics=(), nodes=())
    return quorum_answer(cls, members, door)


def quorum_answer(cls: Any, members: ControllerMembers, door: Door) -> Any:
    topic_cls = wire.sibling(cls, "TopicData")
    partition_cls = wire.sibling(cls, "PartitionData")
    replica_cls = wire.sibling(cls, "ReplicaState")
    node_cls = wire.sibling(cls, "Node", missing_ok=True)  # v2 on
    listener_cls = wire.sibling(cls, "Listener", missing_ok=True)

    heard_at_ms, caught_up_at_ms = dict(members.heard_at_ms), dict(members.caught_up_at_ms)

    def replica(node: str) -> Any:
        end = members.commit_index if node == members.leader else members.match_index.get(node, -1)
        return wire.build(
            replica_cls,
            replica_id=broker_id(node),
            replica_directory_id=directory_id(door.cluster_id, node),
            log_end_offset=end,
            last_fetch_timestamp=heard_at_ms.get(node, UNKNOWN_TIME),
            last_caught_up_timestamp=caught_up_at_ms.get(node, UNKNOWN_TIME),
        )

    partition = wire.build(
        partition_cls,
        partition_index=0,
        error_code=ErrorCode.none,
        error_message=None,
        leader_id=broker_id(members.leader),
        leader_epoch=members.term,
        high_watermark=members.commit_index,
        current_voters=tuple(replica(n) for n in members.voters),
        observers=tuple(replica(n) for n in members.learners),
    )
    nodes: list[Any] = []
    if node_cls is not None:
        for node in (*members.voters, *members.learners):
            address = door.broker_address(node)
            listeners = (
                ()
                if address is None
                else (wire.build(listener_cls, name="PLAINTEXT", host=address[0], port=address[1]),)
            )
            nodes.append(wire.build(node_cls, node_id=broker_id(node), listeners=listeners))
    return wire.build(
        cls,
        error_code=ErrorCode.none,
        error_message=None,
        topics=(wire.build(topic_cls, topic_name=METADATA_TOPIC, partitions=(partition,)),),
        nodes=tuple(nodes),
    )


# -- RemoveRaftVoter --------------------------------------------------------------------------------


def _voter_answer(request: wire.Request, code: ErrorCode, message: str | None = None) -> Any:
    """An AddRaftVoter or RemoveRaftVoter answer."""
    cls = wire.response_class(request.api_key, request.api_version)
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message)


async def _voter_change(door: Door, request: wire.Request, verb: str) -> ControllerMembers:
    """What AddRaftVoter and RemoveRaftVoter check first, as Kafka 4.4's ``KafkaRaftClient`` and its
    Add/RemoveVoterHandler do: ALTER on the cluster, the cluster id, a voter id and directory id, the
    controller's members as its leader has them, and no other voter change under way. The members, else
    the refusal raised."""
    body = request.body
    if not door.allows(AclOperation.ALTER, CLUSTER):
        raise door.refusal(AclOperation.ALTER, CLUSTER)
    if body.cluster_id is not None and body.cluster_id != door.cluster_id:
        raise Refused(
            ErrorCode.inconsistent_cluster_id,
            f'The given id "{body.cluster_id}" doesn\'t match the cluster id "{door.cluster_id}"',
        )
    wanted = body.voter_directory_id
    if body.voter_id < 0 or wanted is None or wanted.int == 0:
        raise Refused(ErrorCode.invalid_request, f"{verb} voter request didn't include a valid voter")
    members: ControllerMembers = await door.node.cluster.admin.call(AdminService.controller_members)
    if members.learners or members.pending is not None:  # Kafka's handlers ask this first
        busy = f"{members.learners[0]} is joining" if members.learners else members.pending
        raise Refused(
            ErrorCode.request_timed_out,
            f"Request timed out waiting for leader to handle previous voter change request ({busy})",
        )
    return members


async def remove_raft_voter(door: Door, request: wire.Request) -> Any:
    body = request.body
    with Caught() as caught:  # every refusal and error is the request's answer
        members = await _voter_change(door, request, "Remove")
        wanted = body.voter_directory_id
        keys = {directory_id(door.cluster_id, node): node for node in members.voters}
        node = keys.get(wanted)
        if node is None or broker_id(node) != body.voter_id or len(members.voters) < 2:
            key = _replica_key(body.voter_id, wanted)
            voters = ", ".join(
                _replica_key(broker_id(voter), directory)
                for directory, voter in sorted(keys.items(), key=str)
            )
            raise Refused(
                ErrorCode.voter_not_found, f"Cannot remove voter {key} from the set of voters [{voters}]"
            )
        await door.node.cluster.admin.call(AdminService.remove_controller_voter, node)
    return _voter_answer(request, caught.code, caught.message)


# -- AddRaftVoter -----------------------------------------------------------------------------------


async def add_raft_voter(door: Door, request: wire.Request) -> Any:
    body = request.body
    with Caught() as caught:  # every refusal and error is the request's answer
        members = await _voter_change(door, request, "Add")
        wanted = body.voter_directory_id
        key = _replica_key(body.voter_id, wanted)
        if body.voter_id in {broker_id(voter) for voter in members.voters}:
            voters = ", ".join(
                _replica_key(broker_id(v), directory_id(door.cluster_id, v)) for v in members.voters
            )
            raise Refused(
                ErrorCode.duplicate_voter,
                f"The voter id for {key} is already part of the set of voters [{voters}].",
            )
        nodes = [
            n.node_id
            for n in door.node.metadata.nodes()
            if n.state != "left" and broker_id(n.node_id) == body.voter_id
            and directory_id(door.cluster_id, n.node_id) == wanted
        ]  # fmt: skip
        if not nodes:  # Kafka's leader finds no such replica among the observers fetching from it
            raise Refused(
                ErrorCode.request_timed_out,
                f"Aborted add voter operation for {key}: no node of the cluster has that id and directory id "
                "(DATA_DIR/kafka/controller.properties and meta.properties name a node as Kafka does)",
            )
        (node,) = nodes
        await door.node.cluster.admin.call(AdminService.add_controller_voter, node)
    if caught.failed:
        return _voter_answer(request, caught.code, caught.message)
    deadline = time.monotonic() + min(max(body.timeout.total_seconds(), 0.0), ADD_VOTER_WAIT_S_MAX)
    while time.monotonic() < deadline:  # a learner first: a voter once it holds the leader's log
        await asyncio.sleep(ADD_VOTER_POLL_S)
        with Caught() as caught:
            members = await door.node.cluster.admin.call(AdminService.controller_members)
        if not caught.failed and node in members.voters:
            return _voter_answer(request, ErrorCode.none)
    with Caught():  # as Kafka's leader aborts an add whose voter did not catch up: the learner removed
        await door.node.cluster.admin.call(AdminService.remove_controller_voter, node)
    return _voter_answer(
        request,
        ErrorCode.request_timed_out,
        f"Aborted add voter operation for {key} since it is lagging behind",
    )


def _replica_key(voter_id: int, directory: uuid.UUID) -> str:
    """Kafka's ``ReplicaKey.toString``."""
    return f"ReplicaKey(id={voter_id}, directoryId={kafka_uuid(directory)})"


# -- UnregisterBroker -------------------------------------------------------------------------------


async def unregister_broker(door: Door, request: wire.Request) -> Any:
    """``kafka-cluster unregister --id N``: a broker id no node has (or one that left) is Kafka's
    BROKER_ID_NOT_REGISTERED; a node of the cluster is refused INVALID_REQUEST, saying how a node leaves
    raftlog: decommissioned (its replicas moved off), then stopped (``raftlog node decommission``). Kafka
    drops the registration of a broker that is gone for good; raftlog's nodes are the gossip membership,
    which forgets a node that left by itself."""
    cls = wire.response_class(request.api_key, request.api_version)
    wanted = request.body.broker_id
    code, message = ErrorCode.none, None
    if not door.allows(AclOperation.ALTER, CLUSTER):
        refused = door.refusal(AclOperation.ALTER, CLUSTER)
        code, message = code_of(refused), str(refused)
    else:
        nodes = [
            n for n in door.node.metadata.nodes() if n.state != "left" and broker_id(n.node_id) == wanted
        ]
        if not nodes:
            code, message = (
                ErrorCode.broker_id_not_registered,
                f"Broker ID {wanted} is not currently registered",
            )
        else:
            node = nodes[0].node_id
            code = ErrorCode.invalid_request
            message = (
                f"{node} is a node of the cluster: it leaves by decommission (raftlog node decommission "
                f"{node}, its replicas move off), then stops"
            )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message)
