"""The timers the coordinators of the epoch protocols keep in memory, as Kafka's group coordinator keeps
them (the consumer group protocol, KIP-848, ``consumer/coordinator.py``; streams groups, KIP-1071,
``streams/coordinator.py``): each member's session, renewed at each of its heartbeats, and the rebalance
timeout of a member asked to revoke (its partitions or tasks) in an epoch, after which it is fenced. Timers
are soft state of the leader term of the group's partition: a coordinator taking over starts every session
afresh (a member first seen in a term gets a whole session) and, for a member revoking since before it, a
whole rebalance timeout; the group itself is the replicated table's. Heartbeats of one group are handled
one at a time (``lock``), those of different groups concurrently. Event loop only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from partitions.groups.name_locks import NameLocks
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.groups")


class TimedMember(Protocol):
    """What the timers read of a member."""

    @property
    def member_id(self) -> str: ...

    @property
    def epoch(self) -> int: ...

    @property
    def rebalance_timeout_ms(self) -> int: ...


M = TypeVar("M", bound=TimedMember)
G = TypeVar("G")  # a protocol's group value


@dataclass
class Timers:
    """One group's timers in one leader term."""

    term: int
    expires_ms: dict[str, int] = field(default_factory=dict)  # member -> when its session ends
    revoke_by_ms: dict[tuple[str, int], int] = field(default_factory=dict)  # (member, epoch) -> deadline


class MemberTimers(Generic[M]):
    """Every group's timers on this node; ``revoking``: whether a member is waiting to revoke."""

    def __init__(self, monotonic: Callable[[], int], revoking: Callable[[M], bool]) -> None:
        self._monotonic = monotonic
        self._revoking = revoking
        self._timers: dict[str, Timers] = {}
        self._locks = NameLocks(lambda name: name in self._timers)

    def lock(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while one heartbeat (or sweep) of group ``name`` runs. A name whose work kept no timers (a
        group there is not, refused) keeps no lock either once no one holds or waits for it, so names
        asked at random leave nothing behind."""
        return self._locks.hold(name)

    def of(self, name: str, term: int) -> Timers:
        timers = self._timers.get(name)
        if timers is None or timers.term != term:
            timers = self._timers[name] = Timers(term)  # a new term here: sessions start afresh
        return timers

    def heard(self, timers: Timers, member: M, session_ms: int) -> None:
        """The member heartbeat: its session runs again from now, and a rebalance timeout runs while it
        is revoking in its epoch (none otherwise)."""
        timers.expires_ms[member.member_id] = self._monotonic() + session_ms
        for key in [k for k in timers.revoke_by_ms if k[0] == member.member_id]:
            if not self._revoking(member) or member.epoch != key[1]:
                del timers.revoke_by_ms[key]
        if self._revoking(member):
            key = (member.member_id, member.epoch)
            timers.revoke_by_ms.setdefault(key, self._monotonic() + member.rebalance_timeout_ms)

    def names(self) -> list[str]:
        """The groups with timers or a lock held (for tests and metrics)."""
        return sorted(set(self._timers) | set(self._locks))

    def left(self, timers: Timers, member_id: str) -> None:
        timers.expires_ms.pop(member_id, None)
        for key in [k for k in timers.revoke_by_ms if k[0] == member_id]:
            del timers.revoke_by_ms[key]

    def due(self, timers: Timers, members: Iterable[M], session_ms: int) -> list[str]:
        """The members whose session, or whose rebalance timeout while revoking, passed."""
        now = self._monotonic()
        due = []
        for member in members:
            expires = timers.expires_ms.setdefault(member.member_id, now + session_ms)  # first sight
            key = (member.member_id, member.epoch)
            revoke_by = timers.revoke_by_ms.get(key)
            if self._revoking(member) and revoke_by is None:  # revoking since before this term
                revoke_by = timers.revoke_by_ms[key] = now + member.rebalance_timeout_ms
            if now > expires or (revoke_by is not None and now > revoke_by):
                due.append(member.member_id)
        return due

    async def expire(
        self,
        led: Iterable[tuple[str, int]],
        current: Callable[[str], tuple[int, G]],
        members: Callable[[G], Iterable[M]],
        session_ms: Callable[[str], int],
        fence: Callable[[G, str], G],
        record: Callable[[str, G], Awaitable[None]],
        what: str,
    ) -> list[tuple[str, str]]:
        """Fence every member of the groups ``led`` here ((name, term)) whose session, or whose rebalance
        timeout while revoking, passed: each group read again (``current``: its term and value, raising
        when it is not led here any more), stepped (``fence``) and written (``record``) under its lock.
        The timers of a group no longer among them (deleted, or led elsewhere now) are dropped, unless a
        heartbeat holds its lock (a group it is creating); a group missing for a moment (its table not
        readable then) only has its members' sessions start afresh, which fences no one sooner."""
        fenced: list[tuple[str, str]] = []
        led = list(led)
        for name in set(self._timers) - {name for name, _ in led}:
            if not self._locks.busy(name):
                del self._timers[name]
                self._locks.drop(name)
        for name, term in led:
            async with self.lock(name):
                try:
                    found_term, state = current(name)
                except RaftlogError:
                    continue
                if found_term != term:
                    continue
                timers = self.of(name, term)
                due = self.due(timers, members(state), session_ms(name))
                if not due:
                    continue
                for member_id in due:
                    state = fence(state, member_id)
                log.info("%s %s: fenced %s (session or rebalance timeout)", what, name, ", ".join(due))
                await record(name, state)
                for member_id in due:
                    self.left(timers, member_id)
                    fenced.append((name, member_id))
        return fenced
