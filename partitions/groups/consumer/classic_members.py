"""Members of a consumer protocol group (KIP-848) that joined with Kafka's classic protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), as Kafka 4.4's ``GroupMetadataManager`` takes them in
(``classicGroupJoinToConsumerGroup`` and its siblings; docs/decisions/0025-online-migration.md): a
consumer application moving between the protocols one instance at a time keeps one group.

Pure, on ``ConsumerGroup`` values, as ``group.py``: the coordinator (``coordinator.py``) keeps the timers
and writes the group. A classic member is a consumer protocol member whose ``classic`` holds its session
timeout and protocols:

- **join**: protocol type ``consumer``, protocols every classic member of the group also supports (else
  INCONSISTENT_GROUP_PROTOCOL); its subscription (topics, owned partitions, rack) read from its first
  protocol's metadata; then a heartbeat of the member's own epoch (a new member: 0) through the consumer
  protocol's steps (``group.heartbeat``): a changed subscription bumps the group epoch, a new target is
  computed, and the member is reconciled with the partitions it says it owns, which is how a classic
  member confirms a revocation. It is answered generation = its epoch, its first protocol, no leader and
  no members (the coordinator assigned).
- **sync**: the member known and classic (UNKNOWN_MEMBER_ID), generation its epoch (ILLEGAL_GENERATION),
  protocol type and name its own (INCONSISTENT_GROUP_PROTOCOL), not behind the group's assignment unless
  revoking (REBALANCE_IN_PROGRESS); answered its assigned partitions in its subscription's version.
- **heartbeat**: the same checks, then REBALANCE_IN_PROGRESS while it must rejoin: behind the group's
  assignment, partitions to revoke, or partitions it waited for released. Also (raftlog's, for a group
  left with classic members only that a migration policy without ``downgrade`` keeps, where Kafka has no
  such state) while the group epoch is past its assignment's, so a classic member's join computes the
  target.
- **leave**: each member named (by id, or a static one by instance id) is fenced; an unknown one is
  UNKNOWN_MEMBER_ID on its own.

A classic group with members a consumer protocol member joins becomes such a group first
(``from_classic.py``, Kafka's online upgrade), and one left with classic members only becomes a classic
group again (``to_classic.py``, its online downgrade).

A classic static member (``group.instance.id``, KIP-345) joins as Kafka's
``getOrMaybeSubscribeStaticConsumerGroupMember`` takes it: at once, without MEMBER_ID_REQUIRED; without a
member id it takes the place of its instance's member, released or not (a restarted instance), keeping
its partitions under its new id; with a member id it must be its instance's member (FENCED_INSTANCE_ID
otherwise, UNKNOWN_MEMBER_ID for an instance the group does not know).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from partitions.groups.classic.members import GroupCode, GroupRefusal, MemberIdRequired
from partitions.groups.consumer.assignment import UNRELEASED, UNREVOKED
from partitions.groups.consumer.group import (
    CONSUMER_MEMBERS_MAX,
    Answer,
    ClassicProtocols,
    ConsumerGroup,
    ConsumerMember,
    Heartbeat,
    fence,
    heartbeat,
    with_member,
)
from partitions.groups.consumer_protocol import (
    NotAnAssignment,
    Subscription,
    encode_assignment,
    read_subscription,
)
from partitions.groups.epoch_members import JOIN_EPOCH, STATIC_LEAVE_EPOCH

PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """A JoinGroup to a consumer protocol group (``member_id`` "": a new member)."""

    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    require_known_id: bool = True  # JoinGroup v4+ (KIP-394)


def _inconsistent(message: str) -> GroupRefusal:
    return GroupRefusal(GroupCode.inconsistent_group_protocol, message)


def supports(group: ConsumerGroup, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
    """Kafka's ``ConsumerGroup.supportsClassicProtocols``: type ``consumer``, some protocol, and one that
    every classic member of the group names too."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return False
    names = {name for name, _ in protocols}
    return all(
        names & {name for name, _ in m.classic.protocols}
        for m in group.members.values()
        if m.classic is not None
    )


def subscription_of(protocols: Sequence[tuple[str, bytes]]) -> Subscription:
    """The subscription in the member's first protocol's metadata (INCONSISTENT_GROUP_PROTOCOL when it is
    not one, Kafka's words)."""
    try:
        return read_subscription(protocols[0][1])
    except NotAnAssignment:
        raise _inconsistent("Malformed embedded consumer protocol in subscription deserialization.") from None


def join(
    group: ConsumerGroup,
    request: ClassicJoin,
    partition_count: Callable[[str], int],
    new_member_id: str,
    members_max: int = CONSUMER_MEMBERS_MAX,
) -> Answer:
    """A classic member's JoinGroup (module docstring), checked in Kafka's order before its subscription
    is read. ``partition_count``: a topic's (0: none). MemberIdRequired (with ``new_member_id``) for a new
    member that must join again."""
    member_id = request.member_id or new_member_id
    existing = group.members.get(member_id)
    static = None if request.instance_id is None else group.static_member(request.instance_id)
    if static is not None and request.member_id and static.member_id != request.member_id:
        raise GroupRefusal(
            GroupCode.fenced_instance_id,
            f"Static member {request.member_id} with instance id {request.instance_id} is not the member "
            f"{static.member_id} of the instance id in group {group.name}.",
        )
    if request.instance_id is not None and request.member_id and static is None:
        raise GroupRefusal(
            GroupCode.unknown_member_id, f"Instance id {request.instance_id} is unknown in group {group.name}"
        )
    if existing is None and static is None and len(group.members) >= members_max:
        raise GroupRefusal(
            GroupCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {members_max} members.",
        )
    if not supports(group, request.protocol_type, request.protocols):
        raise _inconsistent(f"Member {member_id}'s protocols are not supported.")
    if existing is not None and existing.classic is None:
        raise _inconsistent(f"Member {member_id} uses the consumer group protocol.")
    if not request.member_id and request.require_known_id and request.instance_id is None:
        raise MemberIdRequired(member_id)  # a static member gets its id at once, as Kafka gives it
    subscription = subscription_of(request.protocols)
    if static is not None and not request.member_id:  # it takes its instance's place, released or not
        group = with_member(group, replace(static, epoch=STATIC_LEAVE_EPOCH))
    hb = Heartbeat(
        member_id,
        JOIN_EPOCH if existing is None else existing.epoch,
        instance_id=request.instance_id,
        rack_id=subscription.rack,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed=subscription.topics,
        owned=frozenset() if existing is None else frozenset(subscription.owned),
        client_id=request.client_id,
        client_host=request.client_host,
        subscribed_regex="",
    )
    topics = sorted(set(group.subscribed_topics()) | set(subscription.topics))
    counts = {topic: partition_count(topic) for topic in topics}
    answer = heartbeat(group, hb, counts, member_id, members_max, regex_topics=(), checked=True)
    classic = ClassicProtocols(request.session_timeout_ms, tuple(request.protocols))
    member = replace(answer.group.members[answer.member_id], classic=classic)
    return replace(answer, group=with_member(answer.group, member), member_epoch=member.epoch)


def classic_member(group: ConsumerGroup, member_id: str) -> tuple[ConsumerMember, ClassicProtocols]:
    """The member, known and classic, with its classic part (UNKNOWN_MEMBER_ID otherwise, Kafka's
    words)."""
    member = group.members.get(member_id)
    if member is None:
        raise GroupRefusal(
            GroupCode.unknown_member_id, f"Member {member_id} is not a member of group {group.name}."
        )
    if member.classic is None:
        raise GroupRefusal(
            GroupCode.unknown_member_id, f"Member {member_id} does not use the classic protocol."
        )
    return member, member.classic


def _check_generation(member: ConsumerMember, generation: int) -> None:
    if generation != member.epoch:
        raise GroupRefusal(
            GroupCode.illegal_generation,
            f"The request generation id {generation} is not equal to the member epoch {member.epoch} of "
            f"member {member.member_id}.",
        )


def sync(
    group: ConsumerGroup,
    member_id: str,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
) -> bytes:
    """A classic member's SyncGroup: its assignment's bytes (module docstring)."""
    member, classic = classic_member(group, member_id)
    _check_generation(member, generation)
    if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
        raise _inconsistent(
            f"The protocol type {protocol_type} from member {member_id} request is not equal to the group "
            f"protocol type {PROTOCOL_TYPE}."
        )
    if protocol_name is not None and protocol_name != classic.protocol:
        raise _inconsistent(
            f"The protocol name {protocol_name} from member {member_id} request is not equal to the protocol "
            f"name {classic.protocol} returned in the join response."
        )
    if group.assignment_epoch > member.epoch and member.state != UNREVOKED:
        raise _rejoin(group, member_id)
    version = subscription_of(classic.protocols).version
    return encode_assignment(sorted(member.assigned), version)


def _rejoin(group: ConsumerGroup, member_id: str) -> GroupRefusal:
    return GroupRefusal(
        GroupCode.rebalance_in_progress,
        f"A new rebalance is triggered in group {group.name} and member {member_id} should rejoin to catch "
        "up.",
    )


def must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Whether a classic member's Heartbeat is answered REBALANCE_IN_PROGRESS (module docstring)."""
    if member.epoch < group.assignment_epoch or member.state == UNREVOKED:
        return True
    if member.state == UNRELEASED:
        target = group.target.get(member.member_id, frozenset())
        waiting = any(group.holder(tp, member.member_id) is not None for tp in target - member.assigned)
        if not waiting:
            return True
    return group.group_epoch > group.assignment_epoch


def check_heartbeat(
    group: ConsumerGroup, member_id: str, generation: int
) -> tuple[ConsumerMember, ClassicProtocols, GroupRefusal | None]:
    """A classic member's Heartbeat: the member and its classic part (the caller renews its session), with
    REBALANCE_IN_PROGRESS when it must rejoin (None: it need not); an unknown member or another
    generation is refused at once."""
    member, classic = classic_member(group, member_id)
    _check_generation(member, generation)
    return member, classic, _rejoin(group, member_id) if must_rejoin(group, member) else None


def leave(
    group: ConsumerGroup, leaving: Sequence[tuple[str, str | None]]
) -> tuple[ConsumerGroup, list[GroupCode], list[ConsumerMember]]:
    """A LeaveGroup of ``leaving`` (member id, instance id): the group without them, each one's answer,
    and the members that left."""
    answers: list[GroupCode] = []
    gone: list[ConsumerMember] = []
    for member_id, instance_id in leaving:
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None or (member_id and member.member_id != member_id):
                answers.append(
                    GroupCode.unknown_member_id if member is None else GroupCode.fenced_instance_id
                )
                continue
        else:
            member = group.members.get(member_id)
            if member is None:
                answers.append(GroupCode.unknown_member_id)
                continue
        answers.append(GroupCode.none)
        gone.append(member)
        group = fence(group, member.member_id)
    return group, answers, gone
