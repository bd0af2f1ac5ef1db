"""A classic group's members as its coordinator holds them (``partitions.groups.classic.coordinator``): the
group's state, generation, leader and members, and the checks that fence a call (a member of another
generation, or a static member's older incarnation: KIP-345's instance ids)."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


class GroupCode(enum.IntEnum):
    """How the classic protocol answers a member: Kafka's error codes, by their names and numbers (the Kafka
    door sends them as they are)."""

    none = 0
    unknown_server_error = -1
    coordinator_not_available = 15
    not_coordinator = 16
    illegal_generation = 22
    inconsistent_group_protocol = 23
    unknown_member_id = 25
    invalid_session_timeout = 26
    rebalance_in_progress = 27
    non_empty_group = 68
    member_id_required = 79
    group_max_size_reached = 81
    fenced_instance_id = 82


class GroupRefusal(Exception):
    """A group call refused with a Kafka error code: the classic coordinator's ``GroupCode``, or one the
    Kafka door refuses it with before it reaches the coordinator (an ACL, a group id)."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or getattr(code, "name", str(code)))
        self.code = code


@dataclass(frozen=True, slots=True)
class Joined:
    """A JoinGroup answer: ``members`` (id, metadata of the chosen protocol) for the leader only.
    ``skip_assignment``: the leader is a static member back from a restart into a Stable group whose
    assignment stands (KIP-814): it learns the members but must not assign; a client before JoinGroup v9
    cannot be told so, and is answered as Kafka answers it, a follower of ``replaced_leader`` (the
    member id it replaced) with no members."""

    generation: int
    protocol_type: str
    protocol: str
    leader: str
    member_id: str
    members: tuple[tuple[str, bytes], ...]
    skip_assignment: bool = False
    replaced_leader: str = ""


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the client's order of preference
    last_seen_ms: int
    instance_id: str | None = None  # a static member's group.instance.id (KIP-345)
    assignment: bytes = b""
    joining: asyncio.Future[Joined] | None = None
    syncing: asyncio.Future[bytes] | None = None


@dataclass(slots=True)
class InitialDelay:
    """A group's first rebalance (from Empty) waits ``due_ms`` for more members, as Kafka's
    ``group.initial.rebalance.delay.ms``: when it is due and new members joined meanwhile, it waits
    another delay, while the rebalance timeout (``remaining_ms`` of it) lasts. So members starting
    together land in one generation instead of the first taking every partition and the others
    rebalancing it away moments later."""

    due_ms: int
    remaining_ms: int
    new_member_added: bool = False


@dataclass(slots=True)
class ClassicGroup:
    name: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # ids handed out (MEMBER_ID_REQUIRED) -> when
    rebalance_deadline_ms: int = 0
    # a rebalance that began from Empty: collecting its first members until then (``InitialDelay``)
    initial: InitialDelay | None = None
    term: int = 0  # the leader term of its ``__consumer_groups`` partition this node runs it in

    def check_member(self, member_id: str, generation: int) -> ClassicGroupMember:
        member = self.members.get(member_id)
        if member is None:
            raise GroupRefusal(
                GroupCode.unknown_member_id, f"member {member_id!r} is not in group {self.name!r}"
            )
        if generation != self.generation:
            raise GroupRefusal(
                GroupCode.illegal_generation, f"generation {generation}: the group is at {self.generation}"
            )
        return member

    def static(self, instance_id: str) -> ClassicGroupMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def check_instance(self, member_id: str, instance_id: str | None) -> None:
        """FENCED_INSTANCE_ID when ``instance_id`` belongs to another member now (a newer incarnation of
        the same static member took its place)."""
        holder = None if instance_id is None else self.static(instance_id)
        if holder is not None and holder.member_id != member_id:
            raise GroupRefusal(
                GroupCode.fenced_instance_id,
                f"instance {instance_id!r} of group {self.name!r} is now member {holder.member_id!r}",
            )


class MemberIdRequired(GroupRefusal):
    def __init__(self, member_id: str) -> None:
        super().__init__(GroupCode.member_id_required, "join again with the member id given")
        self.member_id = member_id


def fail(member: ClassicGroupMember, error: GroupRefusal) -> None:
    for future in (member.joining, member.syncing):
        if future is not None and not future.done():
            future.set_exception(error)
    member.joining = member.syncing = None
