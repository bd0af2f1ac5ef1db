"""What the coordinators of the epoch protocols share (the consumer group protocol, KIP-848,
``consumer/coordinator.py``; streams groups, KIP-1071, ``streams/coordinator.py``): the group read from
the replicated table led here with its protocol checked once (``group_types``), the member timers
(``member_timers``) and the sweep that fences on them, a heartbeat's next group written and its member's
timers moved (``_stepped``), a description, and an OffsetFetch of a member checked by its epoch. Each
protocol says which value of the table's group is its own, how a new one starts, how a member is fenced
and how the group is written.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar, Generic, Protocol, TypeVar, cast

from partitions.groups.errors import NotCoordinator, StaleMemberEpoch, UnknownGroup, UnknownMember
from partitions.groups.group_model import Group
from partitions.groups.group_types import GroupType, Holders, check_type
from partitions.groups.live import LiveGroup
from partitions.groups.member_timers import MemberTimers, TimedMember

log = logging.getLogger("raftlog.groups")

M = TypeVar("M", bound=TimedMember)
M_co = TypeVar("M_co", bound=TimedMember, covariant=True)


class EpochGroup(Protocol[M_co]):
    """A protocol's group value: its members by id."""

    @property
    def members(self) -> Mapping[str, M_co]: ...


G = TypeVar("G", bound=EpochGroup[TimedMember])


class GroupRecords(Protocol):
    """What every epoch coordinator needs of the node's group coordinator."""

    def recorded_group(self, name: str) -> tuple[int, Group | None] | None:
        """(term, the table's group) when the group's partition is led here; None otherwise."""
        ...

    async def readable(self, name: str) -> None:
        """Once the group's table may be read here, when this node leads its partition (a moment's wait:
        a leader just elected, or one whose Raft thread stood still); at once otherwise."""
        ...

    def live(self, group: str) -> LiveGroup | None:
        """The group's classic members as the classic coordinator holds them; None without."""
        ...


class EpochCoordinator(ABC, Generic[G, M]):
    """Event loop only. ``monotonic`` (ms) times sessions and rebalance timeouts; ``revoking``: whether a
    member is waiting to revoke (its rebalance timeout runs while it is)."""

    asking: ClassVar[GroupType]  # the protocol, as the one-protocol rule names it
    what: ClassVar[str]  # how the log names its groups

    def __init__(
        self,
        records: GroupRecords,
        monotonic: Callable[[], int],
        revoking: Callable[[M], bool],
        group_configs: Callable[[str], Mapping[str, str]],
    ) -> None:
        """``group_configs``: a group's configs (``partitions.resource_configs``), read at each use."""
        self._records = records
        self.group_configs = group_configs
        self._timers: MemberTimers[M] = MemberTimers(monotonic, revoking)

    @abstractmethod
    def _of(self, group: Group) -> G | None:
        """This protocol's value of the table's group, None when it has none."""

    @abstractmethod
    def _new(self, name: str) -> G:
        """A group a first member creates."""

    @abstractmethod
    def _led(self) -> Iterable[tuple[str, int, G]]:
        """(name, term, value) of every group of this protocol in a partition led here."""

    @abstractmethod
    def session_ms(self, name: str) -> int:
        """The group's session timeout now (its configs, else the node's)."""

    @abstractmethod
    def _fence(self, state: G, member_id: str) -> G: ...

    @abstractmethod
    async def _record(self, name: str, state: G) -> None:
        """Written whole to the table (refused below the feature level that allows it)."""

    async def _stepped(
        self, name: str, term: int, state: G, stepped: G, member_id: str, left: M | None, session_ms: int
    ) -> None:
        """A heartbeat of ``member_id`` stepped the group from ``state`` to ``stepped``: written when it
        changed, then the timers told who ``left`` and whom the heartbeat came from (its session runs
        ``session_ms`` from now)."""
        if stepped != state:
            await self._record(name, stepped)
        timers = self._timers.of(name, term)
        if left is not None:
            self._timers.left(timers, left.member_id)
            log.info("%s %s: member %s left", self.what, name, left.member_id)
        member = cast(M | None, stepped.members.get(member_id))  # G's members are M's
        if member is not None:
            self._timers.heard(timers, member, session_ms)

    def _current(self, name: str, joining: bool) -> tuple[int, G]:
        """The group as the table holds it, led here (NotCoordinator otherwise). A group of another
        protocol with members is refused as ``group_types`` says; one without (an empty classic group, a
        group that only committed offsets) is taken over by a joining member."""
        found = self._records.recorded_group(name)
        if found is None:
            raise NotCoordinator(name)
        term, group = found
        check_type(name, self.asking, Holders.of(group, self._records.live(name)))
        state = None if group is None else self._of(group)
        if state is not None:
            return term, state
        if not joining:
            raise UnknownGroup(name)
        return term, self._new(name)

    def state_of(self, name: str) -> G | None:
        """The group's value of this protocol when the table holds one and it is led here."""
        found = self._records.recorded_group(name)
        if found is None or found[1] is None:
            return None
        return self._of(found[1])

    def describe(self, name: str) -> G:
        """The group (UnknownGroup when there is none; the protocol's refusal when another protocol holds
        it; NotCoordinator when not led here)."""
        _, state = self._current(name, joining=False)
        return state

    def check_fetch(self, name: str, member_id: str | None, epoch: int) -> None:
        """An OffsetFetch v9+ naming a member: it must be one, in its current epoch (Kafka's
        ``validateOffsetFetch``); without one it is an admin's, always answered."""
        if member_id is None and epoch < 0:
            return
        state = self.state_of(name)
        if state is None:  # not a group of this protocol: its members' fetches are not checked here
            return
        member = state.members.get(member_id or "")
        if member is None:
            raise UnknownMember(name, member_id or "")
        if epoch != member.epoch:
            raise StaleMemberEpoch(name, member.member_id, epoch, member.epoch)

    async def expire_due(self, led: Iterable[tuple[str, int]] | None = None) -> list[tuple[str, str]]:
        """Fence every member whose session, or whose rebalance timeout while revoking, passed, in the
        groups of this protocol ``led`` here ((name, term): the node's one sweep reads them for every
        protocol at once; None: read here)."""
        return await self._timers.expire(
            [(name, term) for name, term, _ in self._led()] if led is None else list(led),
            lambda name: self._current(name, joining=False),
            lambda state: cast(Iterable[M], state.members.values()),  # G's members are M's
            self.session_ms,
            self._fence,
            self._record,
            self.what,
        )
