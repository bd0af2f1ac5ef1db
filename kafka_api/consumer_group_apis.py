"""ConsumerGroupHeartbeat (API 68) and ConsumerGroupDescribe (API 69): the consumer group protocol
(KIP-848), translated. The coordinator is below the doors (``partitions.groups.consumer.coordinator``,
the node's ``GroupCoordinator.consumer``); here topic ids become names and back (a topic's Kafka id,
``topics.kafka_topic_id``), the connection's client id and address are added, and typed refusals
become error codes (``errors.py``). READ on the group for a heartbeat, DESCRIBE for a describe, as
Kafka's; which topics the connection's principal may DESCRIBE is the coordinator's rule (its ``Viewer``:
the regex's topics, the subscribed names, what a description shows)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import coordinating, heartbeat_answer
from kafka_api.door import Door
from kafka_api.errors import Caught, group_code, heartbeat_code
from kafka_api.group_describe import DescribeShape, described_groups
from kafka_api.topics import names_by_id, topic_ids
from partitions.groups.assignors import TopicPartition
from partitions.groups.consumer.group import ConsumerGroup, Heartbeat
from partitions.groups.consumer.topic_regex import EVERYONE, Viewer
from partitions.security.acls import AclOperation, ResourceType

READ, GROUP = AclOperation.READ, ResourceType.GROUP
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # ConsumerGroupDescribe v1's member type


def _by_topic(door: Door, tps: Iterable[TopicPartition], cls: type) -> tuple[Any, ...]:
    """Partitions as the protocol's (topic id, partitions) entries, topics that are gone left out."""
    partitions: dict[str, list[int]] = {}
    for tp in sorted(tps):
        partitions.setdefault(tp.topic, []).append(tp.partition)
    ids = topic_ids(door, partitions)
    return tuple(
        wire.build(cls, topic_id=ids[t], topic_name=t, partitions=tuple(ps))  # the name: describe's only
        for t, ps in partitions.items()
        if t in ids
    )


def _assignment(door: Door, tps: Iterable[TopicPartition], cls: type, entry_cls: type) -> Any:
    return wire.build(cls, topic_partitions=_by_topic(door, tps, entry_cls))


def viewer(door: Door) -> Viewer:
    """The connection's principal as the group coordinator filters topics by it: DESCRIBE on a topic by
    the ACLs the node holds now (every topic when they are not enforced)."""
    if not door.security.enforce_acls:
        return EVERYONE
    acls = door.node.metadata.acls()
    authorizer = door.security.authorizers.of(acls)  # immutable: asked from the resolver's thread too
    principal, host = door.session.principal, door.session.host

    def describable(topic: str) -> bool:
        return principal is not None and authorizer.allows(
            principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, topic
        )

    return Viewer(principal, host, describable, acls)


async def consumer_group_heartbeat(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    _, interval = door.coordinator.consumer.timeouts(body.group_id)

    if not door.allows(READ, GROUP, body.group_id):
        return heartbeat_answer(
            cls, ErrorCode.group_authorization_failed, str(door.refusal(READ, GROUP, body.group_id))
        )
    owned = None
    if body.topic_partitions is not None:
        names = names_by_id(door) if body.topic_partitions else {}
        owned = frozenset(
            TopicPartition(names[entry.topic_id], int(p))
            for entry in body.topic_partitions
            if entry.topic_id in names
            for p in entry.partitions
        )
    timeout = body.rebalance_timeout
    hb = Heartbeat(
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=-1 if timeout is None else int(timeout.total_seconds() * 1000),
        subscribed=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        server_assignor=body.server_assignor,
        owned=owned,
        client_id=request.client_id or "",
        client_host=door.session.member_host,
        subscribed_regex=getattr(body, "subscribed_topic_regex", None),
    )
    with Caught(heartbeat_code) as caught:  # every error is the heartbeat's answer
        coordinating(door, body.group_id)
        await door.coordinator.ensure_topic()
        answer = await door.coordinator.consumer.heartbeat(body.group_id, hb, viewer(door))
    if caught.failed:
        return heartbeat_answer(cls, caught.code, caught.message or "")
    assignment = None
    if answer.assignment is not None:
        assignment_cls = wire.sibling(cls, "Assignment")
        entry_cls = wire.sibling(cls, "TopicPartitions")
        assignment = wire.build(
            assignment_cls, topic_partitions=_by_topic(door, answer.assignment, entry_cls)
        )
    return heartbeat_answer(
        cls, member_id=answer.member_id, member_epoch=answer.member_epoch, interval_ms=interval,
        assignment=assignment,
    )  # fmt: skip


async def consumer_group_describe(door: Door, request: wire.Request) -> Any:
    shape = DescribeShape(request)
    member_cls, assignment_cls, entry_cls = shape.member, shape.assignment, shape.entry

    def found(name: str, state: ConsumerGroup) -> Any:
        target = state.target
        members = tuple(
            wire.build(
                member_cls, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=m.subscribed, subscribed_topic_regex=m.regex,
                member_type=CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER,
                assignment=_assignment(door, m.assigned, assignment_cls, entry_cls),
                target_assignment=_assignment(door, target.get(m.member_id, ()), assignment_cls, entry_cls),
            )
            for m in state.members.values()
        )  # fmt: skip
        return shape.described(
            name, ErrorCode.none, None, group_state=state.state, group_epoch=state.group_epoch,
            assignment_epoch=state.assignment_epoch, assignor_name=state.assignor, members=members,
        )  # fmt: skip

    groups = await described_groups(
        door,
        request.body.group_ids,
        shape.described,
        lambda name: door.coordinator.consumer.describe_for(name, viewer(door)),
        found,
        group_code,
    )
    return wire.build(shape.response, throttle_time=wire.NO_THROTTLE, groups=groups)
