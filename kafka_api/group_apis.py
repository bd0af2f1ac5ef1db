"""The group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (``partitions.groups.classic.coordinator``
holds the members), OffsetCommit, OffsetFetch and OffsetDelete (the committed offsets on each partition's
leader: the same ones the HTTP API shows, one group, one truth; reached through ``Cluster.offsets``, which
waits while a partition's leader moves and then answers COORDINATOR_LOAD_IN_PROGRESS, the code every group
client retries), TxnOffsetCommit (offsets committed in a transaction), ListGroups, DescribeGroups and
DeleteGroups. FindCoordinator is ``find_coordinator``'s.

A group's coordinator is the leader of its ``__consumer_groups`` partition (``murmur2(group) %
partitions``, as for the HTTP API's consumer groups); a node asked about a group it does not coordinate
answers NOT_COORDINATOR and the client looks it up again. One set of groups for both doors: ListGroups,
DescribeGroups and DeleteGroups see the groups of HTTP consumer instances too (shown as protocol type
``consumer``, their assignments in the consumer protocol's bytes, so Kafka's tools read them), and the
empty groups the group table keeps (those that committed offsets, across restarts); a group held by
members of another protocol refuses a joining member (``partitions.groups.group_types``:
INCONSISTENT_GROUP_PROTOCOL here, 409 there).

With ``serve --enforce-acls`` each API checks what Kafka's does, before anything else:
DescribeGroups and OffsetFetch DESCRIBE on the group; JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit and TxnOffsetCommit READ on it, DeleteGroups and OffsetDelete DELETE
(GROUP_AUTHORIZATION_FAILED); OffsetCommit, TxnOffsetCommit and OffsetDelete READ and OffsetFetch DESCRIBE
on each topic (TOPIC_AUTHORIZATION_FAILED per partition; a fetch of every topic leaves out those it may not
describe); TxnOffsetCommit WRITE on the transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
ListGroups lists every group to who may DESCRIBE the cluster, else the groups the connection may DESCRIBE.

TxnOffsetCommit (KIP-447): fenced as Kafka's coordinator fences it (a member id, a generation and a group
instance id each checked when given; a producer outside the group's management commits), then the
transaction's coordinator is told the partitions (``TransactionService.add_offset_partitions``: its end
must reach them), then each offset is stored pending on its partition's leader
(``DataService.commit_txn_offset``), visible once the transaction commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import group_coordinator_of
from kafka_api.door import Door
from kafka_api.errors import Caught, code_of, group_coordinator_code, transaction_coordinator_code
from kafka_api.share_state import share_offsets
from kafka_api.topics import names_by_id, topic_ids
from partitions.consumers.protocol import GroupDescription, GroupSummary
from partitions.data.service import NO_LEADER_EPOCH, GroupOffset
from partitions.errors import InvalidName
from partitions.groups.assignors import TopicPartition
from partitions.groups.classic.members import GroupRefusal, MemberIdRequired
from partitions.groups.classic_calls import ClassicJoin
from partitions.groups.consumer_protocol import encode_assignment, encode_subscription
from partitions.groups.errors import (
    ConsumerProtocolVersion,
    NotConsumerGroup,
    StaleMemberEpoch,
    UnknownGroup,
    UnknownMember,
)
from partitions.names import check_group_name, check_transactional_id
from partitions.security.acls import AclOperation, ResourceType
from partitions.transactions.service import TransactionService
from raftlog.errors import RaftlogError

CONSUMER_COMMIT_REFUSALS = (UnknownMember, StaleMemberEpoch, ConsumerProtocolVersion)
NO_OFFSET = -1
NONE_COMMITTED = GroupOffset(NO_OFFSET)  # OffsetFetch's answer for a partition without an offset
# a group's offsets out of reach for the request's time (``OffsetsUnavailable``): retried by every client
LOAD_IN_PROGRESS = ErrorCode.coordinator_load_in_progress
TRANSACTION_V2_OFFSETS = 5  # TxnOffsetCommit of Kafka's transaction version 2: the group added implicitly
TOPIC_IDS_VERSION = 10  # OffsetCommit and OffsetFetch name topics by id from v10 (KIP-848)
TXN_TOPIC_IDS_VERSION = 6  # TxnOffsetCommit names topics by id from v6 (KIP-1319)
SKIP_ASSIGNMENT_VERSION = 9  # JoinGroup tells a static leader to skip the assignment from v9 (KIP-814)
# a topic of a request as the answer names it: its name (None: an id no topic has), its id (v10+), its parts
Asked = tuple[str | None, uuid.UUID | None, Sequence[Any]]


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC


def _authorized(door: Door, operation: AclOperation, group: str) -> None:
    """GroupRefusal(GROUP_AUTHORIZATION_FAILED) unless the connection may."""
    if not door.allows(operation, GROUP, group):
        raise GroupRefusal(ErrorCode.group_authorization_failed, str(door.refusal(operation, GROUP, group)))


def _coordinating(door: Door, group: str) -> None:
    try:
        check_group_name(group)  # the names the HTTP door takes: one set of groups
    except InvalidName as exc:
        raise GroupRefusal(ErrorCode.invalid_group_id, str(exc)) from None
    if group_coordinator_of(door, group) != door.node.node_id:  # the client finds it and asks there; the
        # group's state here, if any, is the coordinator's to let go (by the term it leads the partition in)
        raise GroupRefusal(ErrorCode.not_coordinator, f"this node does not coordinate group {group!r}")


# codes a partition's offset store may raise that Kafka never answers a commit (a group client ends the
# commit on them, franz-go's TxnOffsetCommit aborts its transaction): Kafka's coordinator turns a timed-out
# or leaderless append to its offsets partition into a code every group client retries
_NOT_A_COMMIT_CODE = frozenset(
    {ErrorCode.request_timed_out, ErrorCode.leader_not_available, ErrorCode.not_leader_or_follower}
)


def _stored_code(error: BaseException) -> ErrorCode:
    """The code of a partition whose offset was not stored: COORDINATOR_LOAD_IN_PROGRESS (the client asks
    again, and a commit asked again stores the same offset) where the store failed on time or leadership."""
    code = code_of(error)
    return LOAD_IN_PROGRESS if code in _NOT_A_COMMIT_CODE else code


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------


async def join_group(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    member_cls = wire.sibling(cls, "JoinGroupResponseMember")

    def answer(code: ErrorCode, member_id: str = "", **values: Any) -> Any:
        fields = {
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": None if request.api_version >= 7 else "",  # nullable from v7 on
            "leader": "",
            "members": (),
        }
        fields.update(values)
        return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code, member_id=member_id, **fields)

    try:
        _authorized(door, READ, body.group_id)
        _coordinating(door, body.group_id)
        joining = ClassicJoin(
            body.member_id,
            body.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in body.protocols),
            wire.millis(body.session_timeout),
            wire.millis(getattr(body, "rebalance_timeout", body.session_timeout)),
            client_id=request.client_id or "",
            client_host=door.session.member_host,
            instance_id=getattr(body, "group_instance_id", None),
            require_known_id=request.api_version >= 4,
        )
        joined = await door.coordinator.classic_calls.join(body.group_id, joining, _now_ms)
    except MemberIdRequired as required:
        return answer(ErrorCode(required.code), required.member_id)
    except GroupRefusal as refusal:
        return answer(ErrorCode(refusal.code), body.member_id)
    except RaftlogError as exc:  # the group's record not written (its partition's leader moved...)
        return answer(group_coordinator_code(exc), body.member_id)
    group = door.groups.groups.get(body.group_id)
    instances = {m.member_id: m.instance_id for m in group.members.values()} if group else {}
    members = tuple(
        wire.build(
            member_cls, member_id=member_id, group_instance_id=instances.get(member_id), metadata=metadata
        )
        for member_id, metadata in joined.members
    )
    leader = joined.leader
    if joined.skip_assignment and request.api_version < SKIP_ASSIGNMENT_VERSION:
        # a client that cannot be told to skip the assignment follows the leader it replaced, as Kafka
        # answers it (GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin)
        leader, members = joined.replaced_leader, ()
    return answer(
        ErrorCode.none,
        joined.member_id,
        generation_id=joined.generation,
        protocol_type=joined.protocol_type,
        protocol_name=joined.protocol,
        leader=leader,
        members=members,
        skip_assignment=joined.skip_assignment,
    )


async def sync_group(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    group = door.groups.groups.get(body.group_id)
    protocol_type = group.protocol_type if group else None
    protocol_name = group.protocol if group else None
    try:
        _authorized(door, READ, body.group_id)
        _coordinating(door, body.group_id)
        assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
        assignment, protocol_type, protocol_name = await door.coordinator.classic_calls.sync(
            body.group_id,
            body.member_id,
            body.generation_id,
            assignments,
            _now_ms,
            getattr(body, "group_instance_id", None),
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
        )
        code = ErrorCode.none
    except GroupRefusal as refusal:
        assignment, code = b"", ErrorCode(refusal.code)
    except RaftlogError as exc:  # the group's record not written
        assignment, code = b"", group_coordinator_code(exc)
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=code,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )


async def heartbeat(door: Door, request: wire.Request) -> Any:
    body = request.body
    code = ErrorCode.none
    try:
        _authorized(door, READ, body.group_id)
        _coordinating(door, body.group_id)
        await door.coordinator.classic_calls.heartbeat(
            body.group_id,
            body.member_id,
            body.generation_id,
            _now_ms,
            getattr(body, "group_instance_id", None),
        )
    except GroupRefusal as refusal:
        code = ErrorCode(refusal.code)
    except RaftlogError as exc:  # the group's record not written
        code = group_coordinator_code(exc)
    return wire.build(
        wire.response_class(request.api_key, request.api_version),
        throttle_time=wire.NO_THROTTLE,
        error_code=code,
    )


async def leave_group(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    leaving = (
        [(m.member_id, m.group_instance_id) for m in body.members]
        if hasattr(body, "members")
        else [(body.member_id, None)]
    )  # v3 on: several members, a static one named by its instance id (an admin's removal)
    code, answers = ErrorCode.none, [ErrorCode.none] * len(leaving)
    try:
        _authorized(door, READ, body.group_id)
        _coordinating(door, body.group_id)
        left = await door.coordinator.classic_calls.leave(body.group_id, leaving, _now_ms)
        answers = [ErrorCode(answer) for answer in left]
    except GroupRefusal as refusal:
        code = ErrorCode(refusal.code)
        answers = [code] * len(leaving)
    except RaftlogError as exc:  # the group's record not written
        code = group_coordinator_code(exc)
        answers = [code] * len(leaving)
    if not hasattr(body, "members"):
        return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=answers[0])
    member_cls = wire.sibling(cls, "MemberResponse")
    members = tuple(
        wire.build(member_cls, member_id=member_id, group_instance_id=instance_id, error_code=answer)
        for (member_id, instance_id), answer in zip(leaving, answers, strict=True)
    )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code, members=members)


# -- OffsetCommit, OffsetFetch ----------------------------------------------------------------------


async def offset_commit(door: Door, request: wire.Request) -> Any:
    body = request.body
    generation = getattr(body, "generation_id_or_member_epoch", getattr(body, "generation_id", -1))
    refusal: ErrorCode | None = None
    asked = _named(door, request.api_version >= TOPIC_IDS_VERSION, body.topics, "partitions")
    readable = {name for name, _, _ in asked if name is not None and door.allows(READ, TOPIC, name)}
    try:
        _authorized(door, READ, body.group_id)
        _coordinating(door, body.group_id)
        consumer, streams = door.coordinator.consumer, door.coordinator.streams
        checked = consumer.check_commit(body.group_id, body.member_id, generation, request.api_version)
        committed = [(name, p.partition_index) for name, _, ps in asked if name in readable for p in ps]
        if not checked and not streams.check_commit(
            body.group_id, body.member_id, generation, request.api_version, partitions=committed
        ):
            door.groups.check_commit(
                body.group_id, body.member_id, generation, getattr(body, "group_instance_id", None)
            )
        if readable:  # the group is listed, and its offsets found, once its members are gone
            await door.coordinator.record_commit(body.group_id, sorted(readable))
    except GroupRefusal as refused:
        refusal = ErrorCode(refused.code)
    except CONSUMER_COMMIT_REFUSALS as exc:  # a consumer protocol member's commit refused
        refusal = code_of(exc)
    except RaftlogError as exc:  # the group's record not written: every partition's answer
        refusal = group_coordinator_code(exc)
    offsets = door.node.cluster.offsets

    async def commit(topic: str, partition: int, offset: int, leader_epoch: int, metadata: str) -> object:
        return await offsets.commit(body.group_id, topic, partition, offset, True, leader_epoch, metadata)

    return await _committed(request, "OffsetCommit", refusal, readable, commit, asked)


async def offset_fetch(door: Door, request: wire.Request) -> Any:
    """v8+ batch groups, v9+ name the member (and its epoch) asking, checked for a consumer protocol
    group as Kafka checks it (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    # v7+: UNSTABLE_OFFSET_COMMIT while an open transaction holds an offset of the group (KIP-447)
    stable = bool(getattr(body, "require_stable", False))
    if request.api_version < 8:
        topic_cls = wire.sibling(cls, "OffsetFetchResponseTopic")
        partition_cls = wire.sibling(cls, "OffsetFetchResponsePartition")
        topics, top = await _fetch_group(
            door, request.api_version, body.group_id, body.topics, stable, topic_cls, partition_cls
        )
        return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=topics, error_code=top)
    group_cls = wire.sibling(cls, "OffsetFetchResponseGroup")
    topic_cls = wire.sibling(cls, "OffsetFetchResponseTopics")
    partition_cls = wire.sibling(cls, "OffsetFetchResponsePartitions")
    groups = []
    for asked in body.groups:
        with Caught() as caught:  # every error is the group's answer
            if door.allows(DESCRIBE, GROUP, asked.group_id):
                member_id = getattr(asked, "member_id", None)
                epoch = getattr(asked, "member_epoch", -1)
                door.coordinator.consumer.check_fetch(asked.group_id, member_id, epoch)
                door.coordinator.streams.check_fetch(asked.group_id, member_id, epoch)
        if caught.failed:
            groups.append(wire.build(group_cls, group_id=asked.group_id, topics=(), error_code=caught.code))
            continue
        topics, top = await _fetch_group(
            door, request.api_version, asked.group_id, asked.topics, stable, topic_cls, partition_cls
        )
        groups.append(wire.build(group_cls, group_id=asked.group_id, topics=topics, error_code=top))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, groups=tuple(groups))


def _named(door: Door, by_id: bool, topics: Any, parts: str) -> list[Asked]:
    """A request's topics by name, id and their parts (the field ``parts``): ``by_id`` (OffsetCommit and
    OffsetFetch from v10, TxnOffsetCommit from v6) each named by its id, looked up here; None for an id no
    topic has (Kafka's zero id too, which kio reads as None)."""
    if not by_id:
        return [(topic.name, None, getattr(topic, parts)) for topic in topics]
    names = names_by_id(door)
    return [(names.get(topic.topic_id), topic.topic_id, getattr(topic, parts)) for topic in topics]


async def _fetch_group(
    door: Door, version: int, group: str, asked_topics: Any, stable: bool, topic_cls: Any, partition_cls: Any
) -> tuple[tuple[Any, ...], ErrorCode]:
    """One group's committed offsets (its topics' answers, its error code). From v10 topics are named by
    id: one no topic has is answered UNKNOWN_TOPIC_ID in each partition asked, no offset, as Kafka's
    ``handleOffsetFetchRequest`` answers it; every topic (no topics asked) with its id."""
    view, offsets = door.node.metadata, door.node.cluster.offsets
    group_refused = not door.allows(DESCRIBE, GROUP, group)
    if asked_topics is None:  # every partition of every topic the group read or committed an offset of
        named: list[str] = []
        if not group_refused:
            recorded = door.coordinator.recorded(group)
            if recorded is None:  # this node may not read the group's table
                if group_coordinator_of(door, group) != door.node.node_id:  # the client finds it, asks there
                    return (), ErrorCode.not_coordinator
                return (), LOAD_IN_PROGRESS  # led here, its table not readable yet: asked again
            named = [] if recorded.group is None else recorded.group.offset_topics()
        existing = view.topics_by_name()  # a topic deleted since has no offsets left
        ids = topic_ids(door, named) if version >= TOPIC_IDS_VERSION else {}
        asked: list[tuple[str | None, uuid.UUID | None, list[int]]] = [
            (t, ids.get(t), list(range(view.topic(t).partitions)))
            for t in named
            if t in existing and door.allows(DESCRIBE, TOPIC, t)
        ]
        only_committed = True
    else:
        named_topics = _named(door, version >= TOPIC_IDS_VERSION, asked_topics, "partition_indexes")
        asked = [(name, topic_id, list(partitions)) for name, topic_id, partitions in named_topics]
        only_committed = False

    async def fetch(topic: str | None, partition: int) -> tuple[GroupOffset, ErrorCode]:
        if group_refused:
            return NONE_COMMITTED, ErrorCode.group_authorization_failed
        if topic is None:
            return NONE_COMMITTED, ErrorCode.unknown_topic_id
        if not door.allows(DESCRIBE, TOPIC, topic):
            return NONE_COMMITTED, ErrorCode.topic_authorization_failed
        found = None
        with Caught() as caught:  # every error is the partition's answer
            found = await offsets.committed(group, topic, partition, stable)
        if caught.failed:
            return NONE_COMMITTED, caught.code
        return found or NONE_COMMITTED, ErrorCode.none

    found = [await asyncio.gather(*(fetch(name, p) for p in partitions)) for name, _, partitions in asked]
    unreachable = any(code is LOAD_IN_PROGRESS for answers in found for _, code in answers)
    if unreachable and version >= 2:
        # an offset not read must not look like none committed: the group's answer, as Kafka's while its
        # offsets load, and the client asks again
        return (), LOAD_IN_PROGRESS
    topics = []
    for (name, topic_id, partitions), answers in zip(asked, found, strict=True):
        parts = tuple(
            wire.build(
                partition_cls,
                partition_index=p,
                committed_offset=committed.offset,
                committed_leader_epoch=committed.leader_epoch,
                metadata=committed.metadata,
                error_code=LOAD_IN_PROGRESS if unreachable else code,  # v1: the group's answer in each
            )
            for p, (committed, code) in zip(partitions, answers, strict=True)
            if not only_committed or committed.offset != NO_OFFSET or unreachable
        )
        if parts or not only_committed:
            topics.append(wire.build(topic_cls, name=name, topic_id=topic_id, partitions=parts))
    top = ErrorCode.group_authorization_failed if group_refused else ErrorCode.none  # v2 on: the group's
    return tuple(topics), top


async def txn_offset_commit(door: Door, request: wire.Request) -> Any:
    """Offsets committed inside a transaction: fenced by the group's metadata (KIP-447), added to the
    transaction (its coordinator must end them), stored pending on each partition's leader. From v5 (Kafka's
    transaction version 2) the producer sends no AddOffsetsToTxn: the request adds the group itself; from
    v6 each topic is named by its id (an id no topic has: UNKNOWN_TOPIC_ID for its partitions)."""
    body = request.body
    asked = _named(door, request.api_version >= TXN_TOPIC_IDS_VERSION, body.topics, "partitions")
    readable = {name for name, _, _ in asked if name is not None and door.allows(READ, TOPIC, name)}
    tps = [TopicPartition(name, p.partition_index) for name, _, ps in asked if name in readable for p in ps]
    transaction = -1  # the transaction's ordinal, once its coordinator added the partitions
    with Caught(functools.partial(_txn_commit_code, request=request)) as caught:  # every partition's answer
        try:
            check_transactional_id(body.transactional_id)
        except InvalidName:
            raise GroupRefusal(ErrorCode.invalid_request, "not a transactional id") from None
        if not door.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            raise GroupRefusal(ErrorCode.transactional_id_authorization_failed)
        _authorized(door, READ, body.group_id)
        _coordinating(door, body.group_id)
        if tps and request.api_version >= TRANSACTION_V2_OFFSETS:  # no AddOffsetsToTxn was sent: the
            # request adds the group, before its offsets are checked (as Kafka's verification does): a
            # refused commit leaves the transaction begun, for the producer's abort to end
            await door.node.cluster.transactions.call(
                TransactionService.add_offsets,
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                body.group_id,
                door.session.principal,
            )
        # (v6's schema calls the generation generation_id_or_member_epoch, as it always was on the wire)
        generation = getattr(body, "generation_id", getattr(body, "generation_id_or_member_epoch", -1))
        member_id = getattr(body, "member_id", "")
        consumer, streams = door.coordinator.consumer, door.coordinator.streams
        checked = consumer.check_commit(body.group_id, member_id, generation, request.api_version, True)
        committed = [(tp.topic, tp.partition) for tp in tps]
        if not checked and not streams.check_commit(
            body.group_id, member_id, generation, request.api_version, True, committed
        ):
            door.groups.check_txn_commit(
                body.group_id, member_id, generation, getattr(body, "group_instance_id", None)
            )
        if readable:  # the group is listed, and its offsets found, once its members are gone
            await door.coordinator.record_commit(body.group_id, sorted(readable))
        if tps:
            transaction = await door.node.cluster.transactions.call(
                TransactionService.add_offset_partitions,
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                body.group_id,
                tps,
                door.session.principal,
            )
    refusal = caught.code if caught.failed else None
    offsets = door.node.cluster.offsets

    async def commit(topic: str, partition: int, offset: int, leader_epoch: int, metadata: str) -> None:
        await offsets.commit_txn(
            body.group_id, topic, partition, offset, body.producer_id, body.producer_epoch, transaction,
            leader_epoch, metadata,
        )  # fmt: skip

    return await _committed(request, "TxnOffsetCommit", refusal, readable, commit, asked)


def _txn_commit_code(error: BaseException, request: wire.Request) -> ErrorCode:
    """Every partition's code of a TxnOffsetCommit refused before its offsets are stored: a refusal's own,
    a consumer protocol member's commit refused, else the transaction coordinator's words
    (``errors.transaction_coordinator_code``), where a coordinator that moved is the group's load in
    progress: not this group coordinator's move (the client would look the group up again); it asks again
    and the call follows the new one."""
    if isinstance(error, GroupRefusal):
        return ErrorCode(error.code)
    if isinstance(error, CONSUMER_COMMIT_REFUSALS):
        return code_of(error)
    code = transaction_coordinator_code(error, request)
    if code in (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.concurrent_transactions,  # v5: the previous transaction still completing
    ):
        return ErrorCode.coordinator_load_in_progress
    return code


async def _committed(
    request: wire.Request,
    response: str,
    refusal: ErrorCode | None,
    readable: set[str],
    commit: Callable[[str, int, int, int, str], Awaitable[object]],
    asked: Sequence[Asked],
) -> Any:
    """The answer to an OffsetCommit or TxnOffsetCommit (``response``: the entity's name) whose partitions
    (``asked``: the request's topics, ``_named``) are each committed by ``commit(topic, partition, offset,
    leader_epoch, metadata)`` (null metadata as "", Kafka's ``NO_METADATA``), all at once:
    GROUP_AUTHORIZATION_FAILED for every one of a request refused it, then UNKNOWN_TOPIC_ID for a topic
    named by an id no topic has (as Kafka's ``handleOffsetCommitRequest`` answers it before the
    coordinator sees the request), ``refusal`` for every other one of a refused request,
    TOPIC_AUTHORIZATION_FAILED for a topic not in ``readable``, else what the commit raised
    (kafka_api.errors: OFFSET_METADATA_TOO_LARGE for that partition alone, as Kafka's) or NONE. When a
    partition's offset could not be stored in time (COORDINATOR_LOAD_IN_PROGRESS), every partition stored
    answers that too: Kafka stores a request's offsets in one append, all or none, and franz-go reads the
    first partition's code alone to retry; a commit asked again stores the same offsets."""
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, f"{response}ResponseTopic")
    partition_cls = wire.sibling(cls, f"{response}ResponsePartition")

    async def answer(
        topic: str | None, partition: int, offset: int, leader_epoch: int, metadata: str
    ) -> ErrorCode:
        if refusal is ErrorCode.group_authorization_failed:
            return refusal
        if topic is None:
            return ErrorCode.unknown_topic_id
        if refusal is not None:
            return refusal
        if topic not in readable:
            return ErrorCode.topic_authorization_failed
        with Caught(_stored_code) as caught:  # every error is the partition's answer
            await commit(topic, partition, offset, leader_epoch, metadata)
        return caught.code

    codes = [
        await asyncio.gather(
            *(
                answer(
                    name, p.partition_index, p.committed_offset,
                    getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),  # v6 on (TxnOffsetCommit: v2)
                    p.committed_metadata or "",
                )
                for p in partitions
            )
        )
        for name, _, partitions in asked
    ]  # fmt: skip
    if any(c is LOAD_IN_PROGRESS for answers in codes for c in answers):
        codes = [[LOAD_IN_PROGRESS if c is ErrorCode.none else c for c in answers] for answers in codes]
    topics = []
    for (name, topic_id, partitions), answers in zip(asked, codes, strict=True):
        parts = tuple(
            wire.build(partition_cls, partition_index=p.partition_index, error_code=c)
            for p, c in zip(partitions, answers, strict=True)
        )
        topics.append(wire.build(topic_cls, name=name, topic_id=topic_id, partitions=parts))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))


# -- ListGroups, DescribeGroups, DeleteGroups -------------------------------------------------------


async def _summaries(door: Door) -> list[GroupSummary]:
    """Every group of the coordinator partitions this node leads, whichever door their members use (as
    Kafka's brokers, each answers for the groups it coordinates; clients ask every broker)."""
    groups = door.node.local.groups
    found: list[GroupSummary] = []
    for partition in range(await groups.coordinator_partitions()):
        try:
            found += await groups.list_groups(partition)
        except RaftlogError:  # led elsewhere (or electing): that broker answers for it
            continue
    return found


async def list_groups(door: Door, request: wire.Request) -> Any:
    """v4 filters by state, v5 by type as well (classic, consumer, share: KIP-848's and KIP-932's), each
    filter's values compared without case, as Kafka's."""
    cls = wire.response_class(request.api_key, request.api_version)
    entry = wire.sibling(cls, "ListedGroup")
    wanted = {s.lower() for s in getattr(request.body, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(request.body, "types_filter", ()) or ()}
    every_group = door.allows(DESCRIBE, ResourceType.CLUSTER)
    typed: dict[str, str] = {"group_type": "classic"} if request.api_version >= 5 else {}
    groups = []
    for g in await _summaries(door):
        if (wanted and g.state.lower() not in wanted) or (types and g.group_type not in types):
            continue
        if not every_group and not door.allows(DESCRIBE, GROUP, g.group):
            continue
        if typed:
            typed["group_type"] = g.group_type
        groups.append(
            wire.build(entry, group_id=g.group, protocol_type=g.protocol_type, group_state=g.state, **typed)
        )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=ErrorCode.none, groups=tuple(groups))


async def describe_groups(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    group_cls = wire.sibling(cls, "DescribedGroup")
    member_cls = wire.sibling(cls, "DescribedGroupMember")

    def described(name: str, code: ErrorCode, state: str = "", protocol_type: str = "", protocol: str = "",
                  members: tuple[Any, ...] = (), message: str | None = None) -> Any:  # fmt: skip
        return wire.build(
            group_cls, error_code=code, group_id=name, group_state=state, protocol_type=protocol_type,
            protocol_data=protocol, members=members, authorized_operations=wire.AUTHORIZED_OPERATIONS_OMITTED,
            error_message=message,
        )  # fmt: skip

    def not_classic(name: str, why: str) -> Any:
        """A group there is not, or not of the classic protocol (KIP-848's, a share group): Kafka 4.4 answers
        it Dead, and from v6 (KIP-1043) GROUP_ID_NOT_FOUND with its words."""
        if request.api_version >= 6:
            return described(name, ErrorCode.group_id_not_found, "Dead", message=why)
        return described(name, ErrorCode.none, "Dead")

    answers = []
    for name in request.body.groups:
        if not door.allows(DESCRIBE, GROUP, name):
            answers.append(described(name, ErrorCode.group_authorization_failed))
            continue
        if group_coordinator_of(door, name) != door.node.node_id:
            answers.append(described(name, ErrorCode.not_coordinator))
            continue
        try:  # as the table holds it when not loaded here yet: a coordinator just elected has its members
            live = door.groups.view(name)
        except GroupRefusal as refused:  # the metadata names this node, the group's partition not yet
            answers.append(described(name, ErrorCode(refused.code)))
            continue
        if live is not None and live.members:  # Kafka clients' members: their own bytes
            protocol = live.protocol or ""
            members = tuple(
                (m.member_id, m.instance_id, m.client_id, m.client_host, dict(m.protocols).get(protocol, b""),
                 m.assignment)
                for m in live.members.values()
            )  # fmt: skip
            state = (live.state.value, live.protocol_type or "", protocol)
        else:
            try:
                group = await door.node.local.groups.describe(name)
            except UnknownGroup:
                answers.append(not_classic(name, f"Group {name} not found."))
                continue
            except RaftlogError as exc:
                answers.append(described(name, code_of(exc)))
                continue
            if group.summary.group_type != "classic":  # HTTP groups are classic ones to Kafka's clients
                answers.append(not_classic(name, f"Group {name} is not a classic group."))
                continue
            members = _http_members(group)
            state = (group.summary.state, group.summary.protocol_type, group.summary.assignor)
        rows = tuple(
            wire.build(
                member_cls,
                member_id=member_id,
                group_instance_id=instance_id,
                client_id=client_id,
                client_host=host,
                member_metadata=metadata,
                member_assignment=assignment,
            )
            for member_id, instance_id, client_id, host, metadata, assignment in members
        )
        answers.append(described(name, ErrorCode.none, *state, rows))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, groups=tuple(answers))


def _http_members(group: GroupDescription) -> tuple[tuple[str, None, str, str, bytes, bytes], ...]:
    """HTTP consumer instances as Kafka's tools read members (id, no group instance id, client id, host,
    metadata, assignment): subscription and assignment in the consumer protocol's bytes."""
    return tuple(
        (
            m.instance_id,
            None,
            m.client_id,
            m.client_host,
            encode_subscription(m.topics),
            encode_assignment([row.tp for row in m.partitions]),
        )
        for m in group.members
    )


async def delete_groups(door: Door, request: wire.Request) -> Any:
    """Kafka's DeleteGroups: an empty group and its committed offsets (NON_EMPTY_GROUP while a member of
    either door is live, GROUP_ID_NOT_FOUND when there is none)."""
    cls = wire.response_class(request.api_key, request.api_version)
    entry = wire.sibling(cls, "DeletableGroupResult")

    async def delete(name: str) -> ErrorCode:
        if not door.allows(DELETE, GROUP, name):
            return ErrorCode.group_authorization_failed
        if group_coordinator_of(door, name) != door.node.node_id:
            return ErrorCode.not_coordinator
        with Caught(group_coordinator_code) as caught:  # every error is this group's answer
            # a partition holding its offsets out of reach, or the group's own electing:
            # COORDINATOR_LOAD_IN_PROGRESS, retried by the clients; the group stays listed until its
            # offsets are gone, so asking again finishes the work
            with contextlib.suppress(UnknownGroup, NotConsumerGroup):  # not a share group
                await share_offsets(door).forget_group(name)  # its records' state in each partition
            await door.node.local.groups.delete_group(name)
        return caught.code

    results = []
    for name in request.body.groups_names:
        code = await delete(name)
        # v3's message (Kafka 4.4; wire.build leaves it out before): its coordinator gives one only where the
        # group's coordinator could not answer (its exception's words), none for what the group decides
        message = COORDINATOR_WORDS.get(code)
        results.append(wire.build(entry, group_id=name, error_code=code, error_message=message))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results=tuple(results))


COORDINATOR_WORDS = {  # Kafka's words (Errors.message())
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.coordinator_load_in_progress: "The coordinator is loading and hence can't process requests.",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
}


# -- OffsetDelete -----------------------------------------------------------------------------------


async def offset_delete(door: Door, request: wire.Request) -> Any:
    """Kafka's OffsetDelete (the admin clients' ``deleteConsumerGroupOffsets``; Kafka Connect resets a
    stopped sink connector's partitions with it): the group's committed offsets of the partitions named,
    as Kafka's coordinator decides. The whole request is refused for a group that does not exist
    (GROUP_ID_NOT_FOUND) or whose live members are not consumers (NON_EMPTY_GROUP: a Connect cluster's
    workers); a consumers' group with members keeps the offsets of the topics they subscribe to
    (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others'. DELETE on the group, READ on each topic."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "OffsetDeleteResponseTopic")
    partition_cls = wire.sibling(cls, "OffsetDeleteResponsePartition")
    try:
        _authorized(door, DELETE, body.group_id)
        _coordinating(door, body.group_id)
        subscribed = door.groups.subscribed_topics(body.group_id)
        if subscribed is None:  # no Kafka members: HTTP members' subscriptions, or nobody's
            try:
                group = await door.node.local.groups.describe(body.group_id)
            except UnknownGroup:
                raise GroupRefusal(ErrorCode.group_id_not_found, f"no group {body.group_id!r}") from None
            subscribed = frozenset(topic for member in group.members for topic in member.topics)
    except GroupRefusal as refusal:
        return wire.build(cls, error_code=ErrorCode(refusal.code), throttle_time=wire.NO_THROTTLE, topics=())
    except RaftlogError as exc:  # the group table not readable here now (leadership moved)
        return wire.build(cls, error_code=code_of(exc), throttle_time=wire.NO_THROTTLE, topics=())
    offsets = door.node.cluster.offsets

    async def delete(topic: str, partition: int) -> ErrorCode:
        if not door.allows(READ, TOPIC, topic):
            return ErrorCode.topic_authorization_failed
        if topic in subscribed:
            return ErrorCode.group_subscribed_to_topic
        with Caught() as caught:  # every error is the partition's answer
            await offsets.delete(body.group_id, topic, partition)
        return caught.code

    codes = [
        await asyncio.gather(*(delete(topic.name, p.partition_index) for p in topic.partitions))
        for topic in body.topics
    ]
    if any(code is LOAD_IN_PROGRESS for answers in codes for code in answers):
        # Kafka's partition codes are the topic's own; the group's answer says "ask again" (the admin
        # clients do), and a delete asked again deletes what is left
        return wire.build(cls, error_code=LOAD_IN_PROGRESS, throttle_time=wire.NO_THROTTLE, topics=())
    topics = []
    for topic, answers in zip(body.topics, codes, strict=True):
        parts = tuple(
            wire.build(partition_cls, partition_index=p.partition_index, error_code=code)
            for p, code in zip(topic.partitions, answers, strict=True)
        )
        topics.append(wire.build(topic_cls, name=topic.name, partitions=parts))
    return wire.build(cls, error_code=ErrorCode.none, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))
