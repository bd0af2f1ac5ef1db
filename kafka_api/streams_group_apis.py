"""StreamsGroupHeartbeat (API 88) and StreamsGroupDescribe (API 89): the streams group protocol (KIP-1071,
Kafka Streams' ``group.protocol=streams``), translated. The coordinator is below the doors
(``partitions.groups.streams``, the node's ``GroupCoordinator.streams``); here the request becomes a
``StreamsHeartbeat``, the connection's client id and address are added, typed refusals become error codes,
and, as Kafka's ``KafkaApis.handleStreamsGroupHeartbeat`` does, the topics a joining member's topology
names are checked first (Kafka's internal topics refused, names that are no topic names refused, each
one DESCRIBE) and the internal topics the coordinator found missing are created afterwards (CREATE on the
cluster or on each topic; those the principal may not create are named in the MISSING_INTERNAL_TOPICS
status). READ on the group for a heartbeat, DESCRIBE for a describe, as Kafka's."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import coordinating
from kafka_api.door import Door
from kafka_api.errors import Caught, group_code, heartbeat_code
from kafka_api.group_describe import described_groups
from partitions.errors import InvalidName
from partitions.groups.streams.coordinator import ACCEPTABLE_RECOVERY_LAG, TASK_OFFSET_INTERVAL_MS
from partitions.groups.streams.group import StreamsGroup, StreamsHeartbeat, StreamsMember
from partitions.groups.streams.reconcile import EMPTY, Tasks, task_rows, tasks_of
from partitions.groups.streams.topology import (
    MISSING_INTERNAL_TOPICS,
    CopartitionGroup,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)
from partitions.names import check_topic_name, is_internal
from partitions.security.acls import AclOperation, ResourceType

# Kafka's own internal topics (``Topic.isInternal``), which raftlog names as its clients know them
KAFKA_INTERNAL = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
READ, DESCRIBE, CREATE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.CREATE
GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER


def _topic_info(info: Any) -> TopicInfo:
    return TopicInfo(
        str(info.name), int(info.partitions), int(info.replication_factor),
        tuple((str(kv.key), str(kv.value)) for kv in info.topic_configs),
    )  # fmt: skip


def topology_of(body: Any) -> StreamsTopology | None:
    """The request's topology as the coordinator's value (None: not sent)."""
    if body.topology is None:
        return None
    return StreamsTopology(
        int(body.topology.epoch),
        tuple(
            Subtopology(
                str(s.subtopology_id),
                tuple(str(t) for t in s.source_topics),
                tuple(str(t) for t in s.repartition_sink_topics),
                tuple(_topic_info(t) for t in s.state_changelog_topics),
                tuple(_topic_info(t) for t in s.repartition_source_topics),
                tuple(
                    CopartitionGroup(
                        tuple(int(i) for i in c.source_topics),
                        tuple(int(i) for i in c.repartition_source_topics),
                    )
                    for c in s.copartition_groups
                ),
            )
            for s in body.topology.subtopologies
        ),
    )


def _owned(body: Any) -> Tasks | None:
    if body.active_tasks is None and body.standby_tasks is None and body.warmup_tasks is None:
        return None
    rows = [
        [[t.subtopology_id, list(t.partitions)] for t in tasks or ()]
        for tasks in (body.active_tasks, body.standby_tasks, body.warmup_tasks)
    ]
    return Tasks(tasks_of(rows[0]), tasks_of(rows[1]), tasks_of(rows[2]))


def _named_topics(body: Any) -> list[str]:
    """Every topic a joining member's topology names (Kafka's ``requiredTopics``), each once, in order."""
    names: dict[str, None] = {}
    for s in body.topology.subtopologies:
        for name in (
            *s.source_topics, *s.repartition_sink_topics, *(t.name for t in s.repartition_source_topics),
            *(t.name for t in s.state_changelog_topics),
        ):  # fmt: skip
            names[str(name)] = None
    return list(names)


def _topology_refusal(door: Door, body: Any) -> tuple[ErrorCode, str | None] | None:
    """Kafka's checks of a joining member's topology before its coordinator sees it."""
    named = _named_topics(body)
    internal = [t for t in named if is_internal(t) or t in KAFKA_INTERNAL]
    if internal:
        return (
            ErrorCode.streams_invalid_topology,
            f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams topology is prohibited.",
        )
    invalid = []
    for name in named:
        try:
            check_topic_name(name)
        except InvalidName:
            invalid.append(name)
    if invalid:
        return (
            ErrorCode.streams_invalid_topology,
            f"Topic names {','.join(invalid)} are not valid topic names.",
        )
    if any(not door.allows(DESCRIBE, TOPIC, t) for t in named):
        return ErrorCode.topic_authorization_failed, None
    return None


def _task_ids(cls: type, tasks: Iterable[tuple[str, int]]) -> tuple[Any, ...]:
    return tuple(wire.build(cls, subtopology_id=s, partitions=tuple(ps)) for s, ps in task_rows(tasks))


async def streams_group_heartbeat(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)

    def refused(code: ErrorCode, message: str | None) -> Any:
        return wire.build(
            cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message, member_id="",
            member_epoch=0, heartbeat_interval=datetime.timedelta(0),
            task_offset_interval=datetime.timedelta(0), acceptable_recovery_lag=-1, status=None,
            active_tasks=None, standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
            partitions_by_user_endpoint=None,
        )  # fmt: skip

    if not door.allows(READ, GROUP, body.group_id):
        return refused(ErrorCode.group_authorization_failed, str(door.refusal(READ, GROUP, body.group_id)))
    if body.topology is not None:
        refusal = _topology_refusal(door, body)
        if refusal is not None:
            return refused(*refusal)
    endpoint, timeout, tags = body.user_endpoint, body.rebalance_timeout, body.client_tags
    hb = StreamsHeartbeat(
        group=body.group_id,
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        endpoint_epoch=int(body.endpoint_information_epoch),
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=-1 if timeout is None else int(timeout.total_seconds() * 1000),
        topology=topology_of(body),
        owned=_owned(body),
        process_id=body.process_id,
        user_endpoint=None if endpoint is None else (str(endpoint.host), int(endpoint.port)),
        client_tags=None if tags is None else tuple((kv.key, kv.value) for kv in tags),
        shutdown_application=bool(body.shutdown_application),
        client_id=request.client_id or "",
        client_host=door.session.member_host,
        regexes=body.topology is not None and any(s.source_topic_regex for s in body.topology.subtopologies),
    )
    with Caught(heartbeat_code) as caught:  # every error is the heartbeat's answer
        coordinating(door, body.group_id)
        await door.coordinator.ensure_topic()
        answer = await door.coordinator.streams.heartbeat(hb)
        _, interval_ms, _ = door.coordinator.streams.settings(body.group_id)
    if caught.failed:
        return refused(caught.code, caught.message)
    status = [(code, detail) for code, detail in answer.status]
    if answer.to_create:
        unauthorized = _create_internal(door, answer.to_create)
        if unauthorized:
            status = [
                (c, f"{d}; Unauthorized to CREATE on topics {','.join(unauthorized)}.")
                if c == MISSING_INTERNAL_TOPICS
                else (c, d)
                for c, d in status
            ]
    status_cls = wire.sibling(cls, "Status")
    task_cls = wire.sibling(cls, "TaskIds")
    tasks = answer.tasks
    group = answer.group
    endpoints = None
    if group.endpoint_epoch != hb.endpoint_epoch:
        endpoints = _endpoints(cls, group)
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        member_id=answer.member_id, member_epoch=answer.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=interval_ms),
        task_offset_interval=datetime.timedelta(milliseconds=TASK_OFFSET_INTERVAL_MS),
        acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
        status=tuple(wire.build(status_cls, status_code=c, status_detail=d) for c, d in status),
        active_tasks=None if tasks is None else _task_ids(task_cls, tasks.active),
        standby_tasks=None if tasks is None else _task_ids(task_cls, tasks.standby),
        warmup_tasks=None if tasks is None else _task_ids(task_cls, tasks.warmup),
        endpoint_information_epoch=group.endpoint_epoch, partitions_by_user_endpoint=endpoints,
    )  # fmt: skip


def _endpoints(cls: type, group: StreamsGroup) -> tuple[Any, ...]:
    """Kafka's PartitionsByUserEndpoint: per member with a user endpoint, the topic partitions of its
    active tasks and of its standby and warm-up tasks (``StreamsGroup.source_partitions``)."""
    endpoint_cls = wire.sibling(cls, "Endpoint")
    entry_cls = wire.sibling(cls, "EndpointToPartitions")
    tp_cls = wire.sibling(cls, "TopicPartition")

    def partitions(tasks: Iterable[tuple[str, int]]) -> tuple[Any, ...]:
        by: dict[str, list[int]] = {}
        for topic, partition in group.source_partitions(tasks):
            by.setdefault(topic, []).append(partition)
        return tuple(wire.build(tp_cls, topic=t, partitions=tuple(ps)) for t, ps in sorted(by.items()))

    return tuple(
        wire.build(
            entry_cls,
            user_endpoint=wire.build(endpoint_cls, host=m.user_endpoint[0], port=m.user_endpoint[1]),
            active_partitions=partitions(m.assigned.active),
            standby_partitions=partitions(m.assigned.standby | m.assigned.warmup),
        )
        for m in group.members.values()
        if m.user_endpoint is not None
    )


def _create_internal(door: Door, topics: Iterable[TopicInfo]) -> list[str]:
    """Start creating the internal topics the coordinator found missing that the principal may create
    (CREATE on the cluster, else on each topic), as Kafka's broker does after its coordinator answers; the
    names it may not create are returned."""
    wanted = list(topics)
    if door.allows(CREATE, CLUSTER):
        allowed = wanted
    else:
        allowed = [t for t in wanted if door.allows(CREATE, TOPIC, t.name)]
    names = {t.name for t in allowed}
    door.auto_topics.create_internal(door.node, door.topic_defaults, allowed)
    return [t.name for t in wanted if t.name not in names]


async def streams_group_describe(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    group_cls = wire.sibling(cls, "DescribedGroup")

    def described(name: str, code: ErrorCode, message: str | None, **found: Any) -> Any:
        values = {
            "error_code": code, "error_message": message, "group_id": name, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "topology": None, "members": (),
            "topology_description": None, "topology_description_status": 0, "assignor_name": None,
        }  # fmt: skip
        values.update(found)
        return wire.build(group_cls, **values)

    async def describe(name: str) -> StreamsGroup:
        return door.coordinator.streams.describe(name)

    def found(name: str, state: StreamsGroup) -> Any:
        status = 1 if getattr(body, "include_topology_description", False) else 0  # NOT_STORED: none kept
        return described(
            name,
            ErrorCode.none,
            None,
            group_state=state.state,
            group_epoch=state.group_epoch,
            assignment_epoch=state.assignment_epoch,
            topology=_described_topology(cls, state),
            members=tuple(_described_member(cls, state, m) for m in state.members.values()),
            topology_description_status=status,
            assignor_name="sticky",
        )

    groups = await described_groups(
        door,
        body.group_ids,
        described,
        describe,
        found,
        group_code,
        not_found=lambda name: f"Group {name} not found.",
    )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, groups=groups)


def _described_topology(cls: type, state: StreamsGroup) -> Any:
    topology = state.topology
    if topology is None:
        return None
    kv_cls, info_cls = wire.sibling(cls, "KeyValue"), wire.sibling(cls, "TopicInfo")
    sub_cls, topology_cls = wire.sibling(cls, "Subtopology"), wire.sibling(cls, "Topology")

    def infos(topics: Iterable[TopicInfo]) -> tuple[Any, ...]:
        return tuple(
            wire.build(
                info_cls,
                name=t.name,
                partitions=t.partitions,
                replication_factor=t.replication_factor,
                topic_configs=tuple(wire.build(kv_cls, key=k, value=v) for k, v in t.configs),
            )
            for t in topics
        )

    return wire.build(
        topology_cls,
        epoch=topology.epoch,
        subtopologies=tuple(
            wire.build(
                sub_cls,
                subtopology_id=s.subtopology_id,
                source_topics=s.source_topics,
                repartition_sink_topics=s.repartition_sink_topics,
                state_changelog_topics=infos(s.state_changelog_topics),
                repartition_source_topics=infos(s.repartition_source_topics),
            )
            for s in topology.subtopologies
        ),
    )


def _described_member(cls: type, state: StreamsGroup, m: StreamsMember) -> Any:
    member_cls, assignment_cls = wire.sibling(cls, "Member"), wire.sibling(cls, "Assignment")
    task_cls, kv_cls, endpoint_cls = (
        wire.sibling(cls, "TaskIds"),
        wire.sibling(cls, "KeyValue"),
        wire.sibling(cls, "Endpoint"),
    )

    def assignment(tasks: Tasks) -> Any:
        return wire.build(
            assignment_cls, active_tasks=_task_ids(task_cls, tasks.active),
            standby_tasks=_task_ids(task_cls, tasks.standby), warmup_tasks=_task_ids(task_cls, tasks.warmup),
        )  # fmt: skip

    endpoint = (
        None
        if m.user_endpoint is None
        else wire.build(endpoint_cls, host=m.user_endpoint[0], port=m.user_endpoint[1])
    )
    return wire.build(
        member_cls, member_id=m.member_id, member_epoch=m.epoch, instance_id=m.instance_id, rack_id=m.rack_id,
        client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
        process_id=m.process_id, user_endpoint=endpoint,
        client_tags=tuple(wire.build(kv_cls, key=k, value=v) for k, v in m.client_tags), task_offsets=(),
        task_end_offsets=(), assignment=assignment(m.assigned),
        target_assignment=assignment(state.target.get(m.member_id, EMPTY)), is_classic=False,
    )  # fmt: skip
