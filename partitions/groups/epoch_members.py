"""Which member a heartbeat of an epoch protocol comes from, and whether its epoch may speak: the rule the
consumer group protocol (KIP-848, ``consumer/group.py``) and streams groups (KIP-1071, ``streams/group.py``)
share, as Kafka's ``GroupMetadataManager`` applies it to both (``getOrMaybeCreate{Dynamic,Static}Member``,
``throwIf...MemberEpochIsInvalid``). Pure; the members are the protocol's own values.

- A member without an instance id is found by its id; joining (epoch 0) creates it when there is none,
  otherwise an unknown id is UnknownMember.
- A static member (an instance id) joining takes the place of the member holding its instance id once that
  one left with epoch -2 (else UnreleasedInstanceId), under the new member id, at epoch 0; a heartbeat of
  another member id than the instance's is FencedInstanceId.
- An epoch above the member's is FencedMemberEpoch; one below it too, unless it is the member's previous
  epoch and what the heartbeat says it owns is within what it was assigned (a response lost on the way).
- The member a heartbeat comes from is put in the group's members (``put_member``); a static member that
  took another's place takes over its target assignment too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from partitions.groups.errors import FencedInstanceId, FencedMemberEpoch, UnknownMember, UnreleasedInstanceId

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2


class EpochMember(Protocol):
    @property
    def member_id(self) -> str: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def epoch(self) -> int: ...

    @property
    def previous_epoch(self) -> int: ...


M = TypeVar("M", bound=EpochMember)
T = TypeVar("T")  # a member's target assignment: partitions, tasks


def static_member(members: Mapping[str, M], instance_id: str) -> M | None:
    for m in members.values():
        if m.instance_id == instance_id:
            return m
    return None


def check_epoch(group: str, member: EpochMember, given: int, owned_within: bool) -> None:
    """``owned_within``: what the heartbeat says the member owns is within its assignment (False when it
    did not say)."""
    if given > member.epoch:
        raise FencedMemberEpoch(group, member.member_id, given, member.epoch)
    if given < member.epoch and (given != member.previous_epoch or not owned_within):
        raise FencedMemberEpoch(group, member.member_id, given, member.epoch)


def member_of(
    group: str,
    members: Mapping[str, M],
    member_id: str,
    epoch: int,
    instance_id: str | None,
    owned_within: Callable[[M], bool],
    new: Callable[[], M],
    rejoined: Callable[[M], M],
) -> tuple[M, M | None]:
    """The member a heartbeat (``member_id`` at ``epoch``, ``instance_id``) is from, created when joining
    (``new``), and the static member it replaces (``rejoined``: that member under the new id, epoch 0)."""
    joining = epoch == JOIN_EPOCH
    if instance_id is None:
        member = members.get(member_id)
        if member is None:
            if not joining:
                raise UnknownMember(group, member_id)
            return new(), None
        check_epoch(group, member, epoch, owned_within(member))
        return member, None
    static = static_member(members, instance_id)
    if joining:
        if static is None:
            existing = members.get(member_id)
            if existing is not None:
                check_epoch(group, existing, epoch, owned_within(existing))
                return existing, None
            return new(), None
        if static.epoch != STATIC_LEAVE_EPOCH:
            raise UnreleasedInstanceId(group, instance_id, static.member_id)
        return rejoined(static), static
    if static is None:
        raise UnknownMember(group, f"instance {instance_id}")
    if static.member_id != member_id:
        raise FencedInstanceId(group, instance_id, member_id)
    check_epoch(group, static, epoch, owned_within(static))
    return static, None


def put_member(
    members: Mapping[str, M], target: Mapping[str, T], member: M, replaced: M | None, empty: T
) -> tuple[dict[str, M], dict[str, T]]:
    """The group's members and target assignment with ``member`` put in; ``replaced``: the static member
    whose place it took (``member_of``), gone, its target (``empty`` without) now ``member``'s."""
    members = dict(members)
    target = dict(target)
    if replaced is not None:
        del members[replaced.member_id]
        target[member.member_id] = target.pop(replaced.member_id, empty)
    members[member.member_id] = member
    return members, target


def leaving(group: str, members: Mapping[str, M], member_id: str, instance_id: str | None) -> M:
    """The member a leave (epoch -1 or -2) is from: by id, or the static member of the instance id (another
    member id than its: FencedInstanceId)."""
    if instance_id is None:
        member = members.get(member_id)
        if member is None:
            raise UnknownMember(group, member_id)
        return member
    static = static_member(members, instance_id)
    if static is None:
        raise UnknownMember(group, f"instance {instance_id}")
    if static.member_id != member_id:
        raise FencedInstanceId(group, instance_id, member_id)
    return static
