"""A classic group with members becomes a consumer protocol group (KIP-848) when a consumer protocol member
joins it: Kafka 4.4's online upgrade (``GroupMetadataManager.validateOnlineUpgrade`` and
``convertToConsumerGroup``, ``ConsumerGroup.fromClassicGroup``; docs/decisions/0025-online-migration.md),
so a consumer application moves from the classic protocol to ``group.protocol=consumer`` one instance at a
time without stopping the group.

Each classic member becomes a classic member of the consumer protocol group (``consumer/classic_members.py``
serves its calls from then on): at epoch = the classic generation, stable, its current partitions the
assignment it synced (also its target), its subscription (topics, rack) read from its metadata of the
group's protocol, its session timeout and protocols kept (``ClassicProtocols``). The group's epoch and its
assignment's are the generation. The joining member's heartbeat then bumps the group epoch and computes a
new target, and the classic members give partitions up by rejoining, as when they joined a consumer
protocol group themselves.

Refused (``NotUpgradable``, a ``NotConsumerGroup``: Kafka's GROUP_ID_NOT_FOUND, with Kafka's reasons)
as Kafka refuses it: the migration policy not allowing it, a group whose protocol type is not
``consumer`` (Kafka Connect's workers, for instance), more members than a consumer protocol group holds,
metadata that is not the consumer protocol's, an assignment carrying a custom assignor's user data (it
would be lost). And, raftlog's own: a group whose first rebalance has not chosen a protocol yet. A static
member (``group.instance.id``) keeps its instance id.

Pure: the coordinator (``coordinator.py``) gives the classic group as its coordinator holds it, writes the
result in place of the classic group (``ConsumerGroupRecord.converts``) and starts the members' sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from partitions.groups.classic.members import ClassicGroup, ClassicGroupMember
from partitions.groups.consumer.assignment import STABLE
from partitions.groups.consumer.classic_members import PROTOCOL_TYPE
from partitions.groups.consumer.group import (
    CONSUMER_MEMBERS_MAX,
    ClassicProtocols,
    ConsumerGroup,
    ConsumerMember,
)
from partitions.groups.consumer_protocol import NotAnAssignment, read_assignment, read_subscription
from partitions.groups.errors import NotUpgradable

_CANNOT = "Cannot upgrade classic group {name} to consumer group because "


def _refused(name: str, reason: str) -> NotUpgradable:
    return NotUpgradable(name, "classic Kafka protocol", _CANNOT.format(name=name) + reason)


def from_classic(
    group: ClassicGroup,
    partition_count: Callable[[str], int],
    members_max: int = CONSUMER_MEMBERS_MAX,
    upgrade: bool = True,
) -> ConsumerGroup:
    """The consumer protocol group ``group`` becomes (module docstring); ``partition_count``: a topic's
    (0: none); ``upgrade``: whether the migration policy allows it (``--group-consumer-migration-policy``
    ``upgrade`` or ``bidirectional``)."""
    name = group.name
    if not upgrade:
        raise _refused(name, "online upgrade is disabled.")
    if group.protocol_type != PROTOCOL_TYPE:
        raise _refused(name, "the group does not use the consumer embedded protocol.")
    if len(group.members) > members_max:
        raise _refused(name, "the group size exceeds the consumer group maximum size.")
    if group.protocol is None:
        raise _refused(name, "its first rebalance has not chosen a protocol yet (raftlog's refusal).")
    members = {m.member_id: _member(group, m) for m in group.members.values()}
    topics = sorted({t for m in members.values() for t in m.subscribed})
    return ConsumerGroup(
        name,
        group_epoch=group.generation,
        assignment_epoch=group.generation,
        members=MappingProxyType(members),
        target=MappingProxyType({m.member_id: m.assigned for m in members.values()}),
        partition_counts=MappingProxyType({t: partition_count(t) for t in topics}),
    )


def _member(group: ClassicGroup, member: ClassicGroupMember) -> ConsumerMember:
    """One classic member as a classic member of the consumer protocol group."""
    metadata = dict(member.protocols).get(group.protocol or "")
    try:
        if metadata is None:
            raise NotAnAssignment(f"no metadata of protocol {group.protocol!r}")
        subscription = read_subscription(metadata)
        assigned, user_data = read_assignment(member.assignment) if member.assignment else ((), False)
    except NotAnAssignment:
        raise _refused(group.name, "the embedded consumer protocol is malformed.") from None
    if user_data:
        raise _refused(
            group.name,
            "an unsupported custom assignor is in use. Please refer to the documentation or switch to a "
            "default assignor before re-attempting the upgrade.",
        )
    return ConsumerMember(
        member.member_id,
        member.instance_id,
        subscription.rack,
        member.client_id,
        member.client_host,
        group.generation,
        group.generation,
        STABLE,
        member.rebalance_timeout_ms,
        subscription.topics,
        None,
        frozenset(assigned),
        classic=ClassicProtocols(member.session_timeout_ms, member.protocols),
    )
