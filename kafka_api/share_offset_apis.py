"""Share groups' offset admin APIs (KIP-932), translated: DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), what ``kafka-share-groups --describe
--offsets``, ``--reset-offsets`` and ``--delete-offsets`` send to the group's coordinator; the rules are
``partitions.groups.share.offsets``' (the group empty for a change, its state in each partition on the
partition's leader). Here topic ids are added and typed refusals become error codes. Who may, as Kafka's:
DESCRIBE on the group and on each topic to describe, READ on the group and each topic to alter, DELETE on
the group and READ on each topic to delete.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import coordinating
from kafka_api.door import Door
from kafka_api.errors import Caught, code_of
from kafka_api.share_state import known_topics, share_offsets
from kafka_api.topics import topic_ids
from partitions.groups.assignors import TopicPartition
from partitions.groups.share.partition import ShareOffset
from partitions.security.acls import AclOperation, ResourceType
from raftlog.errors import RaftlogError

READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
NO_OFFSET, NO_EPOCH = -1, -1


def _code(error: BaseException | None) -> tuple[ErrorCode, str | None]:
    return (ErrorCode.none, None) if error is None else (code_of(error), str(error))


async def describe_share_group_offsets(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    group_cls = wire.sibling(cls, "DescribeShareGroupOffsetsResponseGroup")
    topic_cls = wire.sibling(cls, "DescribeShareGroupOffsetsResponseTopic")
    partition_cls = wire.sibling(cls, "DescribeShareGroupOffsetsResponsePartition")
    lagged = {"lag": NO_OFFSET} if request.api_version >= 1 else {}
    groups = []
    for asked in request.body.groups:
        name = asked.group_id
        tps = (
            None
            if asked.topics is None
            else [TopicPartition(t.topic_name, p) for t in asked.topics for p in t.partitions]
        )
        with Caught() as caught:  # every error is the group's answer
            if not door.allows(DESCRIBE, GROUP, name):
                raise door.refusal(DESCRIBE, GROUP, name)
            coordinating(door, name)
            found = await share_offsets(door).describe(name, tps)
        if caught.failed:
            groups.append(
                wire.build(
                    group_cls, group_id=name, topics=(), error_code=caught.code, error_message=caught.message
                )
            )
            continue
        by_topic: dict[str, list[Any]] = {}
        for tp, value in sorted(found.items()):
            fields: dict[str, Any] = {"start_offset": NO_OFFSET, "leader_epoch": NO_EPOCH, **lagged}
            code, message = ErrorCode.none, None
            if not door.allows(DESCRIBE, TOPIC, tp.topic):
                code, message = ErrorCode.topic_authorization_failed, None
            elif isinstance(value, RaftlogError):
                code, message = _code(value)
            elif isinstance(value, ShareOffset):
                fields["start_offset"] = value.start_offset
                if lagged:
                    fields["lag"] = value.lag
            by_topic.setdefault(tp.topic, []).append(
                wire.build(
                    partition_cls,
                    partition_index=tp.partition,
                    error_code=code,
                    error_message=message,
                    **fields,
                )
            )
        ids = topic_ids(door, by_topic)
        topics = tuple(
            wire.build(topic_cls, topic_name=t, topic_id=ids.get(t), partitions=tuple(parts))
            for t, parts in by_topic.items()
        )
        groups.append(
            wire.build(group_cls, group_id=name, topics=topics, error_code=ErrorCode.none, error_message=None)
        )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, groups=tuple(groups))


async def alter_share_group_offsets(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "AlterShareGroupOffsetsResponseTopic")
    partition_cls = wire.sibling(cls, "AlterShareGroupOffsetsResponsePartition")
    asked = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in body.topics]
    answers: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    with Caught() as caught:  # the whole request's answer
        if not door.allows(READ, GROUP, body.group_id):
            raise door.refusal(READ, GROUP, body.group_id)
        coordinating(door, body.group_id)
        offsets: dict[TopicPartition, int] = {}
        known = known_topics(door)
        for topic, partitions in asked:
            for partition, offset in partitions:
                tp = TopicPartition(topic, partition)
                if not door.allows(READ, TOPIC, topic):
                    answers[tp] = ErrorCode.topic_authorization_failed, None
                elif not 0 <= partition < known.get(topic, 0):
                    answers[tp] = ErrorCode.unknown_topic_or_partition, None
                else:
                    offsets[tp] = offset
        done = await share_offsets(door).alter(body.group_id, offsets)
        for tp, error in done.items():
            answers[tp] = _code(error if isinstance(error, BaseException) else None)
    top = caught.code, caught.message
    ids = topic_ids(door, [t for t, _ in asked])
    responses = tuple(
        wire.build(
            topic_cls,
            topic_name=topic,
            topic_id=ids.get(topic),
            partitions=tuple(
                wire.build(
                    partition_cls,
                    partition_index=p,
                    error_code=answers.get(TopicPartition(topic, p), top)[0],
                    error_message=answers.get(TopicPartition(topic, p), top)[1],
                )
                for p, _ in partitions
            ),
        )
        for topic, partitions in asked
    )
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=top[0], error_message=top[1], responses=responses
    )


async def delete_share_group_offsets(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "DeleteShareGroupOffsetsResponseTopic")
    names = [t.topic_name for t in body.topics]
    answers: dict[str, tuple[ErrorCode, str | None]] = {}
    with Caught() as caught:  # the whole request's answer
        if not door.allows(DELETE, GROUP, body.group_id):
            raise door.refusal(DELETE, GROUP, body.group_id)
        coordinating(door, body.group_id)
        allowed = [t for t in names if door.allows(READ, TOPIC, t)]
        answers = {t: (ErrorCode.topic_authorization_failed, None) for t in names if t not in allowed}
        deleted = await share_offsets(door).delete(body.group_id, allowed)
        answers.update({t: _code(error) for t, error in deleted.items()})
    top = caught.code, caught.message
    ids = topic_ids(door, names)
    responses = tuple(
        wire.build(
            topic_cls,
            topic_name=t,
            topic_id=ids.get(t),
            error_code=answers.get(t, top)[0],
            error_message=answers.get(t, top)[1],
        )
        for t in names
    )
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=top[0], error_message=top[1], responses=responses
    )
