"""Typed errors of consumer groups (mapped to HTTP once, in ``api/errors.py``)."""

from __future__ import annotations

from partitions.errors import PartitionError
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
    """The group already has its maximum of members (Kafka's group.max.size)."""

    group: str
    members_max: int
    template = "consumer group {group!r} already has {members_max} members, its maximum"


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
