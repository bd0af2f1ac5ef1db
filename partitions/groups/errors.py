"""Typed errors of consumer groups (mapped to HTTP once, in ``api/errors.py``)."""

from __future__ import annotations

from partitions.errors import PartitionError, TopicAuthorizationFailed
from raftlog.errors import with_fields


class GroupError(PartitionError):
    """Base of every consumer-group error."""


class InvalidConsumerConfig(GroupError):
    """A consumer instance setting that cannot be used (unknown format, reset policy, assignor...)."""


@with_fields
class ConsumerFormatMismatch(GroupError):
    """A records read asking for the other format than the instance was created with."""

    group: str
    instance_id: str
    format: str
    asked: str
    template = (
        "consumer instance {instance_id!r} of group {group!r} reads the {format} format; its records "
        'cannot be answered in the {asked} format (create an instance with "format": "{asked}")'
    )


@with_fields
class UnknownConsumerInstance(GroupError):
    """The instance never existed, was deleted, or was evicted after missing its session timeout."""

    group: str
    instance_id: str
    template = "consumer group {group!r} has no instance {instance_id!r} (deleted or timed out)"


@with_fields
class UnknownGroup(GroupError):
    """No consumer group of this name: none ever had members or committed offsets, or it was deleted (or
    forgotten after 7 days empty)."""

    group: str
    template = "consumer group {group!r} does not exist"


@with_fields
class GroupNotEmpty(GroupError):
    """The group has live members: it cannot be deleted, its offsets not reset (their next commit would
    undo it), and members of the other front door cannot join it (one group, one protocol)."""

    group: str
    members: int
    door: str
    template = "consumer group {group!r} has {members} live member(s) joined over {door}"


@with_fields
class ConsumerInstanceExists(GroupError):
    group: str
    instance_id: str
    template = "consumer group {group!r} already has an instance {instance_id!r}"


@with_fields
class GroupFull(GroupError):
    """The group already has its maximum of members (Kafka's group.max.size, group.share.max.size for a
    share group)."""

    group: str
    members_max: int
    template = "group {group!r} already has {members_max} members, its maximum"


@with_fields
class ShareGroupLimitReached(GroupError):
    """A share group not created: the coordinator partition it hashes to already holds the most share
    groups ``--group-share-max-groups`` allows (each holds state in every partition it reads)."""

    group: str
    groups_max: int
    template = (
        "share group {group!r} not created: its coordinator partition of __consumer_groups already holds "
        "{groups_max} share groups, the most --group-share-max-groups allows (delete an unused share "
        "group first)"
    )


@with_fields
class StaleGeneration(GroupError):
    """The group rebalanced since the caller last looked: its assignment may have changed. Read the
    assignment again (GET .../assignments) and go on from there."""

    group: str
    instance_id: str
    given: int
    current: int
    template = (
        "consumer group {group!r} rebalanced: instance {instance_id!r} sent generation {given}, "
        "the current one is {current}; read the assignment again"
    )


@with_fields
class PartitionNotAssigned(GroupError):
    """The instance does not own this partition in the current generation (it moved to another member in
    a rebalance, or was never assigned): its offsets are not this instance's to move."""

    group: str
    instance_id: str
    topic: str
    partition: int
    generation: int
    template = (
        "consumer group {group!r}: partition {topic}/{partition} is not assigned to instance "
        "{instance_id!r} in generation {generation}"
    )


# -- the consumer group protocol (KIP-848, ``consumer/group.py``) ----------------------------------------


@with_fields
class NotCoordinator(GroupError):
    """This node does not lead the group's coordinator partition (now): ask FindCoordinator again."""

    group: str
    template = "this node does not coordinate group {group!r}"


@with_fields
class NotConsumerGroup(GroupError):
    """The group has members of another protocol (classic Kafka members, HTTP instances): a consumer
    protocol member may not join it (Kafka's GROUP_ID_NOT_FOUND), nor a classic one a consumer group."""

    group: str
    held_by: str
    template = "group {group!r} is not a consumer group: members of the {held_by} hold it"


@with_fields
class NotShareGroup(NotConsumerGroup):
    """A share group member may not join a group of another protocol, even an empty consumer protocol
    group (Kafka 4.4's ``getOrMaybeCreateShareGroup``: GROUP_ID_NOT_FOUND, "Group ... is not a share
    group."). Caught and mapped where ``NotConsumerGroup`` is."""

    template = "Group {group} is not a share group: it is held by the {held_by}."


@with_fields
class NotUpgradable(NotConsumerGroup):
    """A consumer protocol member joins a classic group with members that cannot become a consumer
    protocol group (``consumer/from_classic.py``): Kafka's GROUP_ID_NOT_FOUND with its reason ("Cannot
    upgrade classic group ... because ..."). Caught and mapped where ``NotConsumerGroup`` is."""

    reason: str = ""
    template = "{reason}"


@with_fields
class NotStreamsGroup(GroupError):
    """The group is held by members of another protocol: a streams group member may not join it (Kafka's
    GROUP_ID_NOT_FOUND, "Group ... is not a streams group.")."""

    group: str
    held_by: str
    template = "Group {group} is not a streams group: members of the {held_by} hold it."


@with_fields
class UnknownMember(GroupError):
    group: str
    member_id: str
    template = "consumer group {group!r} has no member {member_id!r}"


@with_fields
class FencedMemberEpoch(GroupError):
    """A heartbeat from an epoch the member is not in: it must give up its partitions and rejoin."""

    group: str
    member_id: str
    given: int
    current: int
    template = (
        "member {member_id!r} of consumer group {group!r} sent epoch {given}, its epoch is {current}: "
        "it must abandon its partitions and rejoin"
    )


@with_fields
class StaleMemberEpoch(GroupError):
    """An offset commit or fetch with a member epoch other than the member's current one."""

    group: str
    member_id: str
    given: int
    current: int
    template = "member {member_id!r} of consumer group {group!r} sent epoch {given}, its epoch is {current}"


@with_fields
class UnreleasedInstanceId(GroupError):
    group: str
    instance_id: str
    owner: str
    template = "group {group!r}: instance id {instance_id!r} is still held by member {owner!r}"


@with_fields
class FencedInstanceId(GroupError):
    group: str
    instance_id: str
    member_id: str
    template = (
        "group {group!r}: member {member_id!r} was fenced: another member holds instance id {instance_id!r}"
    )


@with_fields
class UnsupportedAssignor(GroupError):
    assignor: str
    template = "server assignor {assignor!r} is not supported: use uniform or range"


@with_fields
class InvalidRegularExpression(GroupError):
    regex: str
    reason: str
    template = "SubscribedTopicRegex {regex!r} is not a valid regular expression: {reason}"


class InvalidGroupRequest(GroupError):
    """A consumer group heartbeat breaking the protocol's rules (its message says which)."""


class ConsumerProtocolVersion(GroupError):
    """A consumer protocol member committed with an OffsetCommit version below 9."""


@with_fields
class ConsumerProtocolNotFinalized(GroupError):
    """A consumer group protocol (KIP-848) heartbeat while the cluster's feature level predates its group
    table record (a node of release 0.1.0 may still lead the group's partition): refused, as Kafka refuses
    it while ``group.version`` is 0."""

    group: str
    template = "group {group}: the consumer group protocol needs feature raftlog.version 2 finalized"


class InvalidRecordState(GroupError):
    """A share group acknowledgement of a record the member does not hold: never acquired by it, its lock
    expired, or already acknowledged (Kafka's INVALID_RECORD_STATE)."""


@with_fields
class ShareSessionNotFound(GroupError):
    """A share fetch or acknowledgement in a share session this node does not hold (Kafka's
    SHARE_SESSION_NOT_FOUND: the member opens a new one, epoch 0)."""

    group: str
    member_id: str
    template = "group {group!r}: member {member_id!r} has no share session on this node"


@with_fields
class ShareSessionLimitReached(GroupError):
    """A share fetch opening a session on a node holding as many as it may, or on a connection or for a
    user holding as many as one may there (Kafka's SHARE_SESSION_LIMIT_REACHED, retriable: a session ends
    with its connection or its member's last fetch)."""

    limit: int
    holder: str = "this node"
    option: str = ""  # the bound's option, when it is one holder's (a connection's, a user's)

    def describe(self) -> str:
        bound = f" ({self.option})" if self.option else ""
        return f"{self.holder} holds {self.limit} share sessions, as many as it may{bound}: try again later"


@with_fields
class InvalidShareSessionEpoch(GroupError):
    group: str
    member_id: str
    given: int
    expected: int
    template = "group {group!r}: member {member_id!r} sent share session epoch {given}, expected {expected}"


@with_fields
class ShareGroupsNotFinalized(GroupError):
    """A share group request while the cluster's feature level predates the share partition commands (a
    node of an earlier release may hold a replica): refused, as Kafka refuses it while ``share.version``
    is 0."""

    group: str
    template = "group {group}: share groups need feature raftlog.version 2 finalized"


@with_fields
class StreamsGroupsNotFinalized(GroupError):
    """A streams group heartbeat while the cluster's feature level predates its group table record: refused,
    as Kafka refuses it while ``streams.version`` is 0."""

    group: str
    template = "group {group}: streams groups need feature raftlog.version 2 finalized"


class InvalidTopology(GroupError):
    """A streams group topology Kafka refuses with STREAMS_INVALID_TOPOLOGY (error code 130); the message
    says why, in Kafka's words where Kafka has them (``streams.topology``)."""


class GroupTopicsHidden(TopicAuthorizationFailed):
    """A group's description asked by a principal that may not DESCRIBE every topic its members are
    assigned: Kafka's ConsumerGroupDescribe answers TOPIC_AUTHORIZATION_FAILED and shows no member (which
    topic is not said). ``name`` is the group's."""

    template = "The group has described topic(s) that the client is not authorized to describe."
