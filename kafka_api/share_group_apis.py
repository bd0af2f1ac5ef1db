"""Share groups (KIP-932), translated: ShareGroupHeartbeat (76) and ShareGroupDescribe (77) to the
group's coordinator (``partitions.groups.share.coordinator``), ShareFetch (78) and ShareAcknowledge (79)
to the leaders of the partitions (``partitions.data.share_records``, whose commands the partition's Raft
group replicates). Here topic ids become names and back, and typed refusals become error codes.

Share sessions (a member's partitions on this node, its session epoch: 0 opens one, -1 closes it, each
other request gives the next) are the connection-independent soft state of this listener: a node that
restarts, or that a member reaches for the first time, answers SHARE_SESSION_NOT_FOUND and the member
opens a new one. A session opens only for a member the group's coordinator holds live (joined with a
ShareGroupHeartbeat, heard from within its session timeout), else UNKNOWN_MEMBER_ID, within the bounds of
``share_sessions``. Closing a session releases what the member still holds here. READ on the group for
the heartbeat, the fetch and the acknowledgement (and READ on each topic read or acknowledged),
DESCRIBE on the group for a describe, as Kafka's.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import throttling, wire
from kafka_api.coordinators import coordinating, heartbeat_answer
from kafka_api.door import Door
from kafka_api.errors import Caught, group_coordinator_code
from kafka_api.group_describe import DescribeShape, described_groups
from kafka_api.pacing import Pacer
from kafka_api.share_sessions import CLOSE_EPOCH, OPEN_EPOCH
from kafka_api.topics import names_by_id, topic_ids
from partitions.consumers.protocol import GroupService
from partitions.data.share_records import ShareFetched
from partitions.errors import UnknownPartition, UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.groups.errors import InvalidGroupRequest
from partitions.groups.share.coordinator import ShareGroup
from partitions.groups.share.group import ShareHeartbeat
from partitions.groups.share.partition import REJECT, RENEW
from partitions.names import broker_id
from partitions.security.acls import AclOperation, ResourceType
from partitions.security.answer_holds import AnswerHold

READ = AclOperation.READ
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
MAX_RECORDS_DEFAULT = 500
WAIT_MAX_MS = 30_000
NO_LEADER = -1
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareFetch v2's share_acquire_mode (KIP-1206)


# -- ShareGroupHeartbeat, ShareGroupDescribe -------------------------------------------------------------


def _topic_partitions(door: Door, tps: Iterable[TopicPartition], cls: type, names: bool) -> tuple[Any, ...]:
    partitions: dict[str, list[int]] = {}
    for tp in sorted(tps):
        partitions.setdefault(tp.topic, []).append(tp.partition)
    ids = topic_ids(door, partitions)
    extra: dict[str, Any] = {}
    return tuple(
        wire.build(cls, topic_id=ids[t], partitions=tuple(ps), **({"topic_name": t} if names else extra))
        for t, ps in partitions.items()
        if t in ids
    )


async def share_group_heartbeat(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    share = door.coordinator.share

    if not door.allows(READ, GROUP, body.group_id):
        return heartbeat_answer(
            cls, ErrorCode.group_authorization_failed, str(door.refusal(READ, GROUP, body.group_id))
        )
    hb = ShareHeartbeat(
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        subscribed=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        rack_id=body.rack_id,
        client_id=request.client_id or "",
        client_host=door.session.member_host,
    )
    with Caught(group_coordinator_code) as caught:  # every error is the heartbeat's answer
        coordinating(door, body.group_id)
        await door.coordinator.ensure_topic()
        answer = await share.heartbeat(body.group_id, hb)
    if caught.failed:  # a failed write of the group's record: a coordinator's code
        return heartbeat_answer(cls, caught.code, caught.message or "")
    assignment = None
    if answer.assignment is not None:
        entry_cls = wire.sibling(cls, "TopicPartitions")
        assignment = wire.build(
            wire.sibling(cls, "Assignment"),
            topic_partitions=_topic_partitions(door, answer.assignment, entry_cls, names=False),
        )
    return heartbeat_answer(
        cls, member_id=answer.member_id, member_epoch=answer.member_epoch,
        interval_ms=share.heartbeat_interval_ms, assignment=assignment,
    )  # fmt: skip


async def share_group_describe(door: Door, request: wire.Request) -> Any:
    shape = DescribeShape(request)  # ConsumerGroupDescribe's shape
    member_cls, assignment_cls, entry_cls = shape.member, shape.assignment, shape.entry
    described = shape.described

    async def describe(name: str) -> ShareGroup:
        return door.coordinator.share.describe(name)

    def found(name: str, group: ShareGroup) -> Any:
        members = tuple(
            wire.build(
                member_cls, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=m.subscribed,
                assignment=wire.build(
                    assignment_cls, topic_partitions=_topic_partitions(door, m.assigned, entry_cls, True)
                ),
            )
            for m in group.members.values()
        )  # fmt: skip
        return described(
            name,
            ErrorCode.none,
            None,
            group_state=group.state,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name="simple",
            members=members,
        )

    groups = await described_groups(
        door,
        request.body.group_ids,
        described,
        describe,
        found,
        not_found=lambda name: _not_a_share_group(door, name),
    )
    return wire.build(shape.response, throttle_time=wire.NO_THROTTLE, groups=groups)


def _not_a_share_group(door: Door, name: str) -> str:
    """Kafka 4.4's words for a group ShareGroupDescribe finds no share group of: a group of another
    protocol (as the group table or the classic coordinator hold it), or none."""
    recorded = door.coordinator.recorded(name)
    other = (recorded is not None and recorded.group is not None) or door.coordinator.classic.live(
        name
    ) is not None
    return f"Group {name} is not a share group." if other else f"Group {name} not found."


# -- ShareFetch, ShareAcknowledge ------------------------------------------------------------------------


@dataclass
class _Part:
    tp: TopicPartition
    topic_id: uuid.UUID
    acks: tuple[tuple[int, int, tuple[int, ...]], ...] = ()
    ack_error: Caught | None = None  # its acknowledgement's error
    acked: bool = False
    fetched: ShareFetched | None = None
    error: Caught | None = None  # its acquire's


def _acks(batches: Iterable[Any]) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    return tuple(
        (int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types)) for b in batches
    )


def _renewing(request: wire.Request) -> bool:
    """Whether the request says it carries RENEW acknowledgements (``is_renew_ack``, version 2)."""
    return request.api_version >= 2 and bool(getattr(request.body, "is_renew_ack", False))


def _check_types(part: _Part, request: wire.Request) -> None:
    """INVALID_REQUEST for the partition's acknowledgement when a type is not one the request's version
    knows (RENEW from version 2) or is RENEW in a request not flagged ``is_renew_ack``, as Kafka's
    ``KafkaApis.validateAcknowledgementBatches``."""
    last_type = RENEW if request.api_version >= 2 else REJECT
    kinds = {kind for _, _, types in part.acks for kind in types}
    if any(not 0 <= kind <= last_type for kind in kinds) or (RENEW in kinds and not _renewing(request)):
        part.ack_error = Caught.of(InvalidGroupRequest(f"invalid acknowledge types {sorted(kinds)}"))


async def _named(
    door: Door, request: wire.Request, names: Mapping[uuid.UUID, str], pacer: Pacer
) -> AsyncIterator[_Part]:
    """The partitions a ShareFetch or ShareAcknowledge names, in its order, each with its
    acknowledgements: one of a topic unknown here or past the topic's partitions refused (``error`` and
    ``ack_error``), the others' acknowledgement types checked (``_check_types``)."""
    for topic in request.body.topics:
        name = names.get(topic.topic_id)
        count = _partition_count(door, name)
        for p in topic.partitions:
            await pacer.step()
            tp = TopicPartition(name or f"<unknown {topic.topic_id}>", int(p.partition_index))
            part = _Part(tp, topic.topic_id, _acks(p.acknowledgement_batches))
            if name is None:
                part.error = part.ack_error = Caught.of(_unknown_topic(topic.topic_id))
            elif not 0 <= tp.partition < count:
                part.error = part.ack_error = Caught.of(UnknownPartition(tp.topic, tp.partition))
            else:
                _check_types(part, request)
            yield part


def _error_fields(error: Caught | None) -> dict[str, Any]:
    """A partition's ``error_code`` and ``error_message`` in a ShareFetch or ShareAcknowledge answer."""
    if error is None:
        return {"error_code": ErrorCode.none, "error_message": None}
    return {"error_code": error.code, "error_message": error.message}


async def _by_topic(
    parts: Iterable[_Part], answer: Callable[[_Part], Any], topic_cls: type, pacer: Pacer
) -> tuple[Any, ...]:
    """The partitions' answers (``answer``) under their topics, each topic once, in the order first named:
    a ShareFetch's or ShareAcknowledge's."""
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for part in parts:
        await pacer.step()
        by_topic.setdefault(part.topic_id, []).append(answer(part))
    return tuple(wire.build(topic_cls, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items())


async def _acknowledge(door: Door, group: str, member: str, parts: Iterable[_Part]) -> None:
    shares = door.node.local.shares

    async def one(part: _Part) -> None:
        with Caught() as caught:  # every error is the partition's answer
            if not door.allows(READ, TOPIC, part.tp.topic):
                raise door.refusal(READ, TOPIC, part.tp.topic)
            await shares.acknowledge(group, member, part.tp.topic, part.tp.partition, part.acks)
        if caught.failed:
            part.ack_error = caught

    await asyncio.gather(*(one(p) for p in parts if p.acks))


def _leader(part: _Part, cls: type) -> Any:
    """The leader's epoch when it served the partition; none named otherwise (the member refreshes its
    metadata after an error, as after NOT_LEADER_OR_FOLLOWER)."""
    epoch = NO_LEADER if part.fetched is None else part.fetched.leader_epoch
    return wire.build(cls, leader_id=NO_LEADER, leader_epoch=epoch)


async def share_fetch(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    group, member = body.group_id or "", body.member_id or ""
    shares = door.node.local.shares
    _, lock_ms = shares.reset_and_lock_ms(group)

    def failed(code: ErrorCode, message: str) -> Any:
        return wire.build(
            cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message,
            acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms), responses=(),
            node_endpoints=(),
        )  # fmt: skip

    if not door.allows(READ, GROUP, group):
        return failed(ErrorCode.group_authorization_failed, str(door.refusal(READ, GROUP, group)))
    names = names_by_id(door)
    with Caught() as caught:  # the request's answer
        if not group or not member:
            raise InvalidGroupRequest("a share fetch names its group and member")
        _check_renew_fetch(request)
        epoch = int(body.share_session_epoch)
        has_acks = any(p.acknowledgement_batches for t in body.topics for p in t.partitions)
        if epoch == OPEN_EPOCH and has_acks:
            raise InvalidGroupRequest("a share fetch opening a session acknowledges nothing")
        if epoch == OPEN_EPOCH:  # only for a live member of the group, as its coordinator says
            await door.node.cluster.groups.call(GroupService.share_member, group, member)
        session = door.share_sessions.step(group, member, epoch, door.session, door.session.user)
    if caught.failed:
        return failed(caught.code, caught.message or "")
    parts: dict[TopicPartition, _Part] = {}
    pacer = Pacer()
    async for part in _named(door, request, names, pacer):
        parts[part.tp] = part
        if part.error is None:  # one refused is answered, never kept in the session
            session.partitions[part.tp] = None
    for topic in body.forgotten_topics_data:
        name = names.get(topic.topic_id)
        for index in topic.partitions:
            await pacer.step()
            tp = TopicPartition(name or "", int(index))
            if session.partitions.pop(tp, "absent") is None:
                await _release(door, group, member, [tp])
    await _acknowledge(door, group, member, [p for p in parts.values() if p.ack_error is None])
    if epoch == CLOSE_EPOCH:
        await _release(door, group, member, session.partitions)
    elif not _renewing(request):  # a renewing fetch only acknowledges: it acquires nothing (KIP-1222)
        for tp in session.partitions:
            if tp not in parts:
                parts[tp] = _Part(tp, topic_ids(door, [tp.topic]).get(tp.topic, uuid.UUID(int=0)))
        fetching = [p for p in parts.values() if p.error is None and p.tp in session.partitions]
        max_records = int(body.max_records) if int(body.max_records) > 0 else MAX_RECORDS_DEFAULT
        wait_ms = max(0, min(wire.millis(body.max_wait), WAIT_MAX_MS))
        quotas = door.node.metadata.client_quotas()  # metered as a Fetch (``throttling``)
        max_bytes = throttling.fetch_max_bytes(
            quotas, door.session.user, request.client_id or "", max(int(body.max_bytes), 1)
        )
        hold = door.answers.hold(door.session.principal)  # the answer's bytes in the listener's budget
        if hold is not None:  # an acquire holds at most its user's share of the budget (one batch at least)
            max_bytes = min(max_bytes, hold.budget.per_holder_max)
        limit = int(getattr(body, "share_acquire_mode", BATCH_OPTIMIZED)) == RECORD_LIMIT
        await _fetch_all(door, group, member, fetching, max_records, max_bytes, 0, hold, limit)
        if wait_ms and not any(p.fetched is not None and p.fetched.acquired for p in fetching):
            await _fetch_all(door, group, member, fetching, max_records, max_bytes, wait_ms, hold, limit)
    topic_cls = wire.sibling(cls, "ShareFetchableTopicResponse")
    partition_cls = wire.sibling(cls, "PartitionData")
    acquired_cls = wire.sibling(cls, "AcquiredRecords")
    leader_cls = wire.sibling(cls, "LeaderIdAndEpoch")

    def answer(part: _Part) -> Any:
        fetched = part.fetched
        return wire.build(
            partition_cls,
            partition_index=part.tp.partition,
            **_error_fields(part.error),
            acknowledge_error_code=0 if part.ack_error is None else part.ack_error.code.value,
            acknowledge_error_message=None if part.ack_error is None else part.ack_error.message,
            current_leader=_leader(part, leader_cls),
            records=b"" if fetched is None else fetched.data,
            acquired_records=()
            if fetched is None
            else tuple(
                wire.build(acquired_cls, first_offset=f, last_offset=la, delivery_count=d)
                for f, la, d in fetched.acquired
            ),
        )

    topics = await _by_topic(parts.values(), answer, topic_cls, pacer)
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms), responses=topics,
        node_endpoints=_endpoints(door, cls),
    )  # fmt: skip


def _check_renew_fetch(request: wire.Request) -> None:
    """InvalidGroupRequest for a ShareFetch v2 whose acquire mode is unknown, or that renews
    (``is_renew_ack``) yet asks to fetch: Kafka's ``handleShareFetchRequest`` wants max_bytes, min_bytes,
    max_records and max_wait at 0 then."""
    body = request.body
    mode = int(getattr(body, "share_acquire_mode", BATCH_OPTIMIZED))
    if mode not in (BATCH_OPTIMIZED, RECORD_LIMIT):
        raise InvalidGroupRequest(f"unknown share acquire mode {mode}")
    if not _renewing(request):
        return
    asked = (
        ("maxBytes", int(body.max_bytes)), ("minBytes", int(body.min_bytes)),
        ("maxRecords", int(body.max_records)), ("maxWaitMs", wire.millis(body.max_wait)),
    )  # fmt: skip
    wrong = "".join(f"{name} must be set to 0, " for name, value in asked if value != 0)
    if wrong:
        raise InvalidGroupRequest(f"{wrong}if isRenewAck is true.")


def _endpoints(door: Door, cls: type) -> tuple[Any, ...]:
    endpoint_cls = wire.sibling(cls, "NodeEndpoint")
    found = []
    for node in door.node.metadata.nodes():
        address = door.broker_address(node.node_id)
        if address is not None and node.state not in ("dead", "left"):
            host, port = address
            found.append(
                wire.build(endpoint_cls, node_id=broker_id(node.node_id), host=host, port=port, rack=None)
            )
    return tuple(found)


def _unknown_topic(topic_id: uuid.UUID) -> Exception:
    return UnknownTopic(str(topic_id))


def _partition_count(door: Door, name: str | None) -> int:
    """The topic's partitions as this node knows them (0: none known)."""
    if name is None:
        return 0
    try:
        return len(door.node.metadata.topic(name).replicas)
    except UnknownTopic:
        return 0


async def _release(door: Door, group: str, member: str, tps: Iterable[TopicPartition]) -> None:
    shares = door.node.local.shares

    async def one(tp: TopicPartition) -> None:
        with Caught():  # not led here (any more): its locks expire; a bug is logged
            await shares.release_member(group, member, tp.topic, tp.partition)

    await asyncio.gather(*(one(tp) for tp in list(tps)))


async def _fetch_all(
    door: Door,
    group: str,
    member: str,
    parts: list[_Part],
    max_records: int,
    max_bytes: int,
    wait_ms: int,
    hold: AnswerHold | None = None,
    record_limit: bool = False,
) -> None:
    """One acquire per partition (the records left to ask for shared out in order); with ``wait_ms``,
    the partitions wait for a record together and the first that gets one ends the wait of the others
    (a wait that acquired nothing acquires nothing: only reads are cancelled). Each acquire takes
    ``max_bytes`` from the listener's budget first (``hold``, waiting for room: nothing is acquired
    meanwhile) and keeps what it read until the answer is written out (``kafka_api.answers``)."""
    shares = door.node.local.shares

    async def one(part: _Part, records: int, wait: int) -> None:
        with Caught() as caught:  # every error is the partition's answer
            if not door.allows(READ, TOPIC, part.tp.topic):
                raise door.refusal(READ, TOPIC, part.tp.topic)
            if hold is not None and not await hold.take(max_bytes):
                return  # its connection closed: the answer will not be sent, nothing is acquired for it
            before, part.fetched = part.fetched, None  # a partition acquired again holds its new read only
            try:
                part.fetched = await shares.acquire(
                    group, member, part.tp.topic, part.tp.partition, records, max_bytes, wait,
                    record_limit=record_limit,
                )  # fmt: skip
            finally:
                if hold is not None:
                    read = 0 if part.fetched is None else len(part.fetched.data)
                    gone = 0 if before is None else len(before.data)
                    await hold.settle(hold.held - max_bytes - gone + read)
            part.error = None
        if caught.failed:
            part.fetched, part.error = None, caught

    if wait_ms:
        readers = [
            asyncio.ensure_future(shares.wait_available(group, p.tp.topic, p.tp.partition, wait_ms))
            for p in parts
        ]
        try:
            if readers:
                await asyncio.wait(readers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    left = max_records
    for part in parts:
        if left <= 0:
            break
        await one(part, left, 0)
        if part.fetched is not None:
            left -= sum(la - f + 1 for f, la, _ in part.fetched.acquired)


async def share_acknowledge(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    group, member = body.group_id or "", body.member_id or ""
    lock = datetime.timedelta(milliseconds=door.node.local.shares.reset_and_lock_ms(group)[1])  # v2

    def failed(code: ErrorCode, message: str) -> Any:
        return wire.build(
            cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message,
            acquisition_lock_timeout=lock, responses=(), node_endpoints=(),
        )  # fmt: skip

    if not door.allows(READ, GROUP, group):
        return failed(ErrorCode.group_authorization_failed, str(door.refusal(READ, GROUP, group)))
    names = names_by_id(door)
    with Caught() as caught:  # the request's answer
        epoch = int(body.share_session_epoch)
        if epoch == OPEN_EPOCH:
            raise InvalidGroupRequest("a share acknowledgement cannot open a share session")
        session = door.share_sessions.step(group, member, epoch, door.session, door.session.user)
    if caught.failed:
        return failed(caught.code, caught.message or "")
    pacer = Pacer()
    parts = [part async for part in _named(door, request, names, pacer)]
    await _acknowledge(door, group, member, [p for p in parts if p.ack_error is None])
    if epoch == CLOSE_EPOCH:
        await _release(door, group, member, session.partitions)
    topic_cls = wire.sibling(cls, "ShareAcknowledgeTopicResponse")
    partition_cls = wire.sibling(cls, "PartitionData")
    leader_cls = wire.sibling(cls, "LeaderIdAndEpoch")

    def answer(part: _Part) -> Any:
        return wire.build(
            partition_cls,
            partition_index=part.tp.partition,
            **_error_fields(part.ack_error),
            current_leader=wire.build(leader_cls, leader_id=NO_LEADER, leader_epoch=NO_LEADER),
        )

    topics = await _by_topic(parts, answer, topic_cls, pacer)
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        acquisition_lock_timeout=lock, responses=topics, node_endpoints=_endpoints(door, cls),
    )  # fmt: skip
