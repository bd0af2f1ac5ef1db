"""Typed errors of consumer groups (mapped to HTTP once, in ``api/errors.py``)."""

from __future__ import annotations

from partitions.errors import PartitionError


class GroupError(PartitionError):
    """Base of every consumer-group error."""


class InvalidConsumerConfig(GroupError):
    """A consumer instance setting that cannot be used (unknown format, reset policy, assignor...)."""


class ConsumerFormatMismatch(GroupError):
    """A records read asking for the other format than the instance was created with."""

    def __init__(self, group: str, instance_id: str, format: str, asked: str) -> None:
        super().__init__(
            f"consumer instance {instance_id!r} of group {group!r} reads the {format} format; its records "
            f'cannot be answered in the {asked} format (create an instance with "format": "{asked}")'
        )
        self.format = format
        self.asked = asked


class UnknownConsumerInstance(GroupError):
    """The instance never existed, was deleted, or was evicted after missing its session timeout."""

    def __init__(self, group: str, instance_id: str) -> None:
        super().__init__(f"consumer group {group!r} has no instance {instance_id!r} (deleted or timed out)")
        self.group = group
        self.instance_id = instance_id


class UnknownGroup(GroupError):
    """No consumer group of this name: none ever had members or committed offsets, or it was deleted (or
    forgotten after 7 days empty)."""

    def __init__(self, group: str) -> None:
        super().__init__(f"consumer group {group!r} does not exist")
        self.group = group


class GroupNotEmpty(GroupError):
    """The group has live members: it cannot be deleted, its offsets not reset (their next commit would
    undo it), and members of the other front door cannot join it (one group, one protocol)."""

    def __init__(self, group: str, members: int, door: str) -> None:
        super().__init__(f"consumer group {group!r} has {members} live member(s) joined over {door}")
        self.group = group
        self.members = members
        self.door = door


class ConsumerInstanceExists(GroupError):
    def __init__(self, group: str, instance_id: str) -> None:
        super().__init__(f"consumer group {group!r} already has an instance {instance_id!r}")
        self.group = group
        self.instance_id = instance_id


class GroupFull(GroupError):
    """The group already has its maximum of members (Kafka's group.max.size)."""

    def __init__(self, group: str, members_max: int) -> None:
        super().__init__(f"consumer group {group!r} already has {members_max} members, its maximum")
        self.group = group
        self.members_max = members_max


class StaleGeneration(GroupError):
    """The group rebalanced since the caller last looked: its assignment may have changed. Read the
    assignment again (GET .../assignments) and go on from there."""

    def __init__(self, group: str, instance_id: str, given: int, current: int) -> None:
        super().__init__(
            f"consumer group {group!r} rebalanced: instance {instance_id!r} sent generation {given}, "
            f"the current one is {current}; read the assignment again"
        )
        self.group = group
        self.instance_id = instance_id
        self.given = given
        self.current = current


class PartitionNotAssigned(GroupError):
    """The instance does not own this partition in the current generation (it moved to another member in
    a rebalance, or was never assigned): its offsets are not this instance's to move."""

    def __init__(self, group: str, instance_id: str, topic: str, partition: int, generation: int) -> None:
        super().__init__(
            f"consumer group {group!r}: partition {topic}/{partition} is not assigned to instance "
            f"{instance_id!r} in generation {generation}"
        )
        self.group = group
        self.instance_id = instance_id
        self.topic = topic
        self.partition = partition
        self.generation = generation
