"""One group, one protocol: which protocol holds a group, decided here once for every protocol that asks.

A group name is held by the members of one protocol at a time: HTTP consumer instances
(``partitions/consumers``, ``api/consumers.py``), Kafka's classic protocol (``classic/``), the consumer group
protocol (KIP-848, ``consumer/``), a share group (KIP-932, ``share/``) or a streams group (KIP-1071,
``streams/``).
A member of one may not join a group another holds; the asker's refusal is its protocol's own (as each of
Kafka's ``GroupMetadataManager`` typed getters raises its own): a classic member INCONSISTENT_GROUP_PROTOCOL,
a consumer group member ``NotConsumerGroup`` (GROUP_ID_NOT_FOUND), a share group member ``NotShareGroup``
(the same), a streams group member
``NotStreamsGroup`` (GROUP_ID_NOT_FOUND), an HTTP instance
``GroupNotEmpty`` (409); deleting a group or resetting its offsets (no asker) is refused ``GroupNotEmpty``
while any protocol holds it.

A protocol holds a group while it has members there; an empty group is taken over by the first member
joining it (Kafka's offline migration); a classic group with members a consumer protocol member joins is
converted before this is asked (``consumer/from_classic.py``, Kafka's online upgrade). Two exceptions, as
Kafka's: a group recorded as a share group is one even empty (its state stays in every partition it read),
so a consumer protocol member may not take it; and
a streams group is one even empty (its topology stays with it), so only a classic member (which Kafka
lets convert it) may take it before it is deleted; and neither a streams nor a share member may take an
empty consumer protocol group (Kafka converts only an empty classic group to a streams group, and none
to a share group: ``NotShareGroup``).

Pure: the coordinators read the group table, the classic groups in memory and the share coordinator's
members, and give them here as ``Holders``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from partitions.groups.classic.members import GroupCode, GroupRefusal
from partitions.groups.errors import (
    GroupError,
    GroupNotEmpty,
    NotConsumerGroup,
    NotShareGroup,
    NotStreamsGroup,
)
from partitions.groups.group_model import SHARE_PROTOCOL_TYPE, Group
from partitions.groups.live import LiveGroup
from raftlog.errors import check


class GroupType(enum.Enum):
    """The protocols whose members may hold a group, in the order a refusal names them."""

    HTTP = "http"  # REST consumer instances
    CLASSIC = "classic"  # Kafka's classic group protocol
    CONSUMER = "consumer"  # the consumer group protocol (KIP-848)
    SHARE = "share"  # share groups (KIP-932)
    STREAMS = "streams"  # streams groups (KIP-1071)


def _unread() -> int:
    check(False, "a share group's members were read by a rule that was not given them")
    return 0


@dataclass(frozen=True, slots=True)
class Holders:
    """A group's members of each protocol now, as its coordinator sees them. ``share``: read only by a
    rule that needs it (the share coordinator's own ask cannot give it: it is what it is working out)."""

    http: int = 0
    classic: int = 0
    consumer: int = 0
    streams: int = 0
    consumer_recorded: bool = False  # the table records a consumer protocol group, with members or not
    streams_recorded: bool = False  # the table records a streams group of the name, with members or not
    share_recorded: bool = False  # the table records a share group of the name, with members or not
    share: Callable[[], int] = _unread

    @classmethod
    def of(cls, group: Group | None, live: LiveGroup | None, share: Callable[[], int] = _unread) -> Holders:
        """``group``: the table's (None: no record); ``live``: the classic members the classic
        coordinator holds in memory (None: none), which it writes to the table's ``classic_members`` at
        each rebalance; ``share``: how many members the share coordinator holds."""
        if group is None:
            return cls(classic=0 if live is None else len(live.members), share=share)
        consumer = group.consumer
        return cls(
            http=len(group.members),
            classic=len(live.members) if live is not None and live.members else len(group.classic_members),
            consumer=0 if consumer is None else len(consumer.members),
            streams=0 if group.streams is None else len(group.streams.members),
            consumer_recorded=consumer is not None,
            streams_recorded=group.streams is not None,
            share_recorded=group.protocol_type == SHARE_PROTOCOL_TYPE,
            share=share,
        )

    def members(self, held_by: GroupType, asking: GroupType | None) -> int:
        """How many members of ``held_by`` hold the group against ``asking`` (0: it does not hold it)."""
        if held_by is GroupType.SHARE:
            if asking in (GroupType.CONSUMER, GroupType.STREAMS):  # a share group is one even empty
                return 1 if self.share_recorded else 0
            return self.share()
        if held_by is GroupType.HTTP:
            return self.http
        if held_by is GroupType.STREAMS:  # one even empty, but to a classic member and to its deletion
            recorded = self.streams_recorded and asking not in (None, GroupType.CLASSIC)
            return max(self.streams, 1 if recorded else 0)
        if held_by is GroupType.CONSUMER:  # to a streams or a share member, one even empty
            recorded = self.consumer_recorded and asking in (GroupType.STREAMS, GroupType.SHARE)
            return max(self.consumer, 1 if recorded else 0)
        return self.classic


def held_by(holders: Holders, asking: GroupType | None) -> tuple[GroupType, int] | None:
    """The protocol other than ``asking`` that holds the group, with its members; None when the group is
    free for ``asking`` (``asking`` None: held by any protocol)."""
    for other in GroupType:
        if other is asking:
            continue
        members = holders.members(other, asking)
        if members:
            return other, members
    return None


# how each asker's refusal names the protocol holding the group (their texts reach the clients)
_NAMED: dict[GroupType | None, dict[GroupType, str]] = {
    GroupType.CLASSIC: {
        GroupType.HTTP: "members joined over HTTP (REST consumer instances)",
        GroupType.CONSUMER: "members of the consumer group protocol (KIP-848)",
        GroupType.SHARE: "members of a share group (KIP-932)",
        GroupType.STREAMS: "members of a streams group (KIP-1071)",
    },
    GroupType.CONSUMER: {
        GroupType.HTTP: "HTTP API",
        GroupType.CLASSIC: "classic Kafka protocol",
        GroupType.SHARE: "share group protocol (KIP-932)",
        GroupType.STREAMS: "streams group protocol (KIP-1071)",
    },
    GroupType.SHARE: {
        GroupType.HTTP: "HTTP API",
        GroupType.CLASSIC: "classic Kafka protocol",
        GroupType.CONSUMER: "consumer group protocol",
        GroupType.STREAMS: "streams group protocol (KIP-1071)",
    },
    GroupType.STREAMS: {
        GroupType.HTTP: "HTTP API",
        GroupType.CLASSIC: "classic Kafka protocol",
        GroupType.CONSUMER: "consumer group protocol",
        GroupType.SHARE: "share group protocol (KIP-932)",
    },
    GroupType.HTTP: {
        GroupType.CLASSIC: "the Kafka protocol",
        GroupType.CONSUMER: "the Kafka protocol",
        GroupType.SHARE: "the share group protocol (KIP-932)",
        GroupType.STREAMS: "the streams group protocol (KIP-1071)",
    },
    None: {
        GroupType.HTTP: "HTTP",
        GroupType.CLASSIC: "the Kafka protocol",
        GroupType.CONSUMER: "the Kafka protocol",
        GroupType.SHARE: "the share group protocol (KIP-932)",
        GroupType.STREAMS: "the streams group protocol (KIP-1071)",
    },
}


def refusal(name: str, asking: GroupType | None, holders: Holders) -> GroupError | GroupRefusal | None:
    """The error a member of ``asking`` joining group ``name`` is refused with (``asking`` None: the group
    deleted, or its offsets reset); None when no other protocol holds it."""
    held = held_by(holders, asking)
    if held is None:
        return None
    other, members = held
    named = _NAMED[asking][other]
    if asking is GroupType.CLASSIC:
        return GroupRefusal(GroupCode.inconsistent_group_protocol, f"group {name!r} has {named}")
    if asking is GroupType.STREAMS:
        return NotStreamsGroup(name, named)
    if asking is GroupType.SHARE:
        return NotShareGroup(name, named)
    if asking is GroupType.CONSUMER:
        return NotConsumerGroup(name, named)
    if other is GroupType.CLASSIC:  # Kafka's members, whichever of its protocols they use
        members += holders.consumer
    return GroupNotEmpty(name, members, named)


def check_type(name: str, asking: GroupType | None, holders: Holders) -> None:
    """Raise ``refusal`` when another protocol holds the group."""
    refused = refusal(name, asking, holders)
    if refused is not None:
        raise refused
