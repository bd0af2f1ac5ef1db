"""A consumer protocol group (KIP-848) left with classic members only becomes a classic group again: Kafka
4.4's online downgrade (``GroupMetadataManager.consumerGroupFenceMembers`` with
``validateOnlineDowngradeWithFencedMembers`` and ``convertToClassicGroup``, ``ClassicGroup
.fromConsumerGroup``; docs/decisions/0025-online-migration.md). When a fence (a leave, a LeaveGroup, a
session or rebalance timeout) leaves only members that joined with the classic protocol, and the migration
policy allows a downgrade, the group is written as a classic group at the consumer group's epoch, its
members collecting joins again (a rebalance: they are told to rejoin, and the classic coordinator runs
it), each with the protocols it joined with and its target partitions as its assignment, encoded in its
subscription's version.

Pure: the consumer coordinator (``coordinator.py``) writes the result in place of the consumer group
(``ClassicGroupMetadata.converts``), and the classic coordinator loads it from the table as it loads any
group it takes over.
"""

from __future__ import annotations

from dataclasses import dataclass

from partitions.groups.classic.rebalance import vote
from partitions.groups.consumer.classic_members import subscription_of
from partitions.groups.consumer.group import ConsumerGroup
from partitions.groups.consumer_protocol import encode_assignment
from partitions.groups.group_model import GROUP_MEMBERS_MAX, ClassicMember


@dataclass(frozen=True, slots=True)
class Downgraded:
    """The classic group a consumer protocol group becomes: written at ``generation`` collecting joins."""

    protocol: str
    generation: int
    leader: str
    members: tuple[ClassicMember, ...]


def to_classic(
    group: ConsumerGroup, downgrade: bool, members_max: int = GROUP_MEMBERS_MAX
) -> Downgraded | None:
    """The classic group ``group`` becomes, or None when it stays a consumer protocol group: it has a
    member of the consumer protocol, or none at all, or ``downgrade`` (the migration policy) is off, or it
    has more members than a classic group holds (Kafka's checks, in its order)."""
    members = list(group.members.values())
    if not members or any(m.classic is None for m in members):
        return None
    if not downgrade or len(members) > members_max:
        return None
    protocol = vote([m.classic.protocols for m in members if m.classic is not None])
    written = []
    for m in members:
        assert m.classic is not None  # every member is a classic one (above)
        metadata = dict(m.classic.protocols)[protocol]
        version = subscription_of(((protocol, metadata),)).version
        assignment = encode_assignment(sorted(group.target.get(m.member_id, frozenset())), version)
        written.append(
            ClassicMember(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.classic.session_timeout_ms, metadata, assignment,
            )
        )  # fmt: skip
    return Downgraded(protocol, group.group_epoch, written[0].member_id, tuple(written))
