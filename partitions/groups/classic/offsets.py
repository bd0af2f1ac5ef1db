"""What a classic group allows of its committed offsets, as Kafka's coordinator decides it: an OffsetCommit
fenced by member, generation and a static member's instance id (``check_commit``), a TxnOffsetCommit
(``check_txn_commit``, KIP-447) and the topics OffsetDelete may not touch (``subscribed_topics``). Each
is asked of the group ``ClassicGroups`` (``coordinator.py``) runs or reads from the table; the offsets
themselves live on each partition's leader.
"""

from __future__ import annotations

import contextlib

from partitions.groups.classic.held import GroupRecords
from partitions.groups.classic.members import ClassicGroup, GroupCode, GroupRefusal, GroupState
from partitions.groups.consumer_protocol import NotAnAssignment, decode_subscription


def check_commit(
    records: GroupRecords,
    name: str,
    group: ClassicGroup | None,
    member_id: str,
    generation: int,
    instance_id: str | None = None,
) -> None:
    """Fence an OffsetCommit to ``group`` (None when the table holds none): a member of the current
    generation, or no member at all (generation -1, a consumer outside any group management, or an
    operator's reset), which Kafka accepts only while the group has no members (of this protocol, or HTTP
    instances, as ``records`` holds them): their next commit would undo it. A group its coordinator has
    not loaded yet (its members did not call since it took over) is checked as the table holds it."""
    if generation < 0 and not member_id:
        recorded = records.recorded(name)
        if recorded is not None and recorded.group is not None and recorded.group.members:
            raise GroupRefusal(GroupCode.unknown_member_id, "the group has members joined over HTTP")
        if group is not None and group.members:
            raise GroupRefusal(
                GroupCode.unknown_member_id,
                f"group {name!r} has {len(group.members)} member(s): only they may commit its offsets",
            )
        return
    if group is None:
        raise GroupRefusal(GroupCode.unknown_member_id, f"group {name!r} has no members here")
    if not group.members and group.protocol and member_id and 1 <= generation == group.generation:
        # a record of the release before, which wrote generations without members: the generation it
        # recorded vouches for its members until they join here, as then
        return
    group.check_instance(member_id, instance_id)
    group.check_member(member_id, generation)
    if group.state is GroupState.COMPLETING_REBALANCE:
        raise GroupRefusal(GroupCode.rebalance_in_progress)


def check_txn_commit(
    name: str, group: ClassicGroup | None, member_id: str, generation: int, instance_id: str | None = None
) -> None:
    """Fence a TxnOffsetCommit (KIP-447) to ``group`` as Kafka's coordinator does: a static member's
    instance id, the member id and the generation are each checked when given (FENCED_INSTANCE_ID,
    UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION); a producer outside the group's management (none given)
    commits whoever holds the group."""
    if group is not None:
        group.check_instance(member_id, instance_id)
    if member_id and (group is None or member_id not in group.members):
        raise GroupRefusal(GroupCode.unknown_member_id, f"member {member_id!r} is not in group {name!r}")
    current = group.generation if group is not None else 0
    if generation >= 0 and generation != current:
        raise GroupRefusal(
            GroupCode.illegal_generation, f"generation {generation}: the group is at {current}"
        )


def subscribed_topics(name: str, group: ClassicGroup | None) -> frozenset[str] | None:
    """What OffsetDelete may not touch, as Kafka's coordinator decides: None when the group has no
    members here; for a consumers' group (protocol type ``consumer``), the topics its members
    subscribe to (their partitions' offsets answer GROUP_SUBSCRIBED_TO_TOPIC, the rest are deleted);
    a group of another protocol type with members (a Kafka Connect cluster's workers) is refused
    whole, GroupRefusal(NON_EMPTY_GROUP), as Kafka refuses it."""
    if group is None or not group.members:
        return None
    if group.protocol_type != "consumer":
        raise GroupRefusal(
            GroupCode.non_empty_group,
            f"group {name!r} has {len(group.members)} member(s) of protocol type {group.protocol_type!r}",
        )
    topics: set[str] = set()
    for member in group.members.values():
        chosen = group.protocol or member.protocols[0][0]  # before the first choice: its preference
        with contextlib.suppress(NotAnAssignment):  # bytes that are no subscription hold nothing
            topics.update(decode_subscription(dict(member.protocols).get(chosen, b"")))
    return frozenset(topics)
