"""Kafka's classic group calls (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as the node answers them,
whichever protocol runs the group: a consumer protocol group (KIP-848) with members takes a classic
member in (``consumer/classic_members.py``, Kafka's online migration; docs/decisions/0025), any other
group is the classic coordinator's (``classic/``, which asks ``group_types`` whether another protocol
holds it). Decided here once, below the Kafka door, which only translates.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic.members import GroupCode, Joined
from partitions.groups.consumer.classic_members import PROTOCOL_TYPE, ClassicJoin
from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator

__all__ = ["ClassicCalls", "ClassicJoin"]  # ClassicJoin: the JoinGroup a door builds and hands here


class ClassicCalls:
    """The classic protocol's entry (``GroupCoordinator.classic_calls``). Event loop only. Each call
    first waits a moment while the group's partition is led here but its table may not be read yet
    (``readable``: a leader just elected, or one whose Raft thread stood still), as the epoch
    protocols' heartbeats do, then reads ``now`` (the clock, ms), so that a session starts when the call
    is served."""

    def __init__(
        self,
        classic: ClassicGroups,
        consumer: ConsumerGroupCoordinator,
        readable: Callable[[str], Awaitable[None]],
    ) -> None:
        self.classic = classic
        self.consumer = consumer
        self._readable = readable

    async def _served_at(self, name: str, now: Callable[[], int]) -> int:
        """The clock once the group's table may be read here (a moment's wait after an election)."""
        await self._readable(name)
        return now()

    async def join(self, name: str, request: ClassicJoin, now: Callable[[], int]) -> Joined:
        """A member (re)joins; answered once its group lets it (``ClassicGroups.join``, or a consumer
        protocol group's ``classic_join``)."""
        now_ms = await self._served_at(name, now)
        if self.consumer.holds_with_members(name):
            answer = await self.consumer.classic_join(name, request)
            member = answer.group.members[answer.member_id]
            protocol = member.classic.protocol if member.classic is not None else ""
            return Joined(answer.member_epoch, PROTOCOL_TYPE, protocol, "", answer.member_id, ())
        return await self.classic.join(
            name, request.member_id, client_id=request.client_id, client_host=request.client_host,
            protocol_type=request.protocol_type, protocols=request.protocols,
            session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=request.rebalance_timeout_ms,
            require_known_id=request.require_known_id, now_ms=now_ms, instance_id=request.instance_id,
        )  # fmt: skip

    async def sync(
        self,
        name: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes],
        now: Callable[[], int],
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> tuple[bytes, str | None, str | None]:
        """A member's SyncGroup: its assignment, and the protocol type and name it is answered with."""
        now_ms = await self._served_at(name, now)
        if self.consumer.holds_with_members(name):
            assignment = self.consumer.classic_sync(name, member_id, generation, protocol_type, protocol_name)
            return assignment, protocol_type, protocol_name
        assignment = await self.classic.sync(name, member_id, generation, assignments, now_ms, instance_id)
        group = self.classic.groups.get(name)
        return assignment, group.protocol_type if group else None, group.protocol if group else None

    async def heartbeat(
        self,
        name: str,
        member_id: str,
        generation: int,
        now: Callable[[], int],
        instance_id: str | None = None,
    ) -> None:
        now_ms = await self._served_at(name, now)
        if self.consumer.holds_with_members(name):
            self.consumer.classic_heartbeat(name, member_id, generation)
            return
        self.classic.heartbeat(name, member_id, generation, now_ms, instance_id)

    async def leave(
        self, name: str, leaving: Sequence[tuple[str, str | None]], now: Callable[[], int]
    ) -> list[GroupCode]:
        """Each (member id, instance id) leaves; its answer, in order."""
        now_ms = await self._served_at(name, now)
        if self.consumer.holds_with_members(name):
            return await self.consumer.classic_leave(name, list(leaving))
        return self.classic.leave(name, leaving, now_ms)
