"""The streams group protocol's coordinator (KIP-1071) on the node leading a group's ``__consumer_groups``
partition: runs ``streams.group``'s pure state machine against the group as the replicated table holds it,
writes each changed group there (``StreamsGroupRecord``) before the member is answered, and keeps the
timers Kafka keeps in memory: each member's session (the group's ``streams.session.timeout.ms``, 45 s by
default) and the rebalance timeout of a member asked to revoke tasks. Timers are soft state of the leader
term: a coordinator taking over starts every member's session afresh; the group, its topology, epochs,
members and tasks are the table's, so none is lost.

One group, one protocol (``group_types``): a group held by members of another protocol is not a streams
group (``NotStreamsGroup``, Kafka's GROUP_ID_NOT_FOUND). The internal topics a topology needs and that do
not exist are named in the answer (``StreamsAnswer.to_create``): the Kafka door creates them, as Kafka's
broker does after its coordinator answers. Heartbeats of one group are handled one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from partitions.groups.errors import (
    ConsumerProtocolVersion,
    NotCoordinator,
    StaleMemberEpoch,
    UnknownGroup,
    UnknownMember,
)
from partitions.groups.group_model import Group
from partitions.groups.group_types import GroupType, Holders, check_type
from partitions.groups.live import LiveGroup
from partitions.groups.streams.group import (
    JOIN_EPOCH,
    StreamsAnswer,
    StreamsGroup,
    StreamsHeartbeat,
    fence,
    revocation_overdue,
)
from partitions.groups.streams.group import heartbeat as step
from partitions.resource_configs import streams_settings
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.groups")

TASK_OFFSET_INTERVAL_MS = 60_000  # Kafka's group.streams.task.offset.interval.ms
ACCEPTABLE_RECOVERY_LAG = 10_000  # Kafka's group.streams.acceptable.recovery.lag
OFFSET_COMMIT_STREAMS_VERSION = 9  # the first OffsetCommit a streams group member may use


class StreamsRecords(Protocol):
    """What this coordinator needs of the node's group coordinator (``coordinator.GroupCoordinator``)."""

    def recorded_group(self, name: str) -> tuple[int, Group | None] | None:
        """(term, the table's group) when the group's partition is led here; None otherwise."""
        ...

    def live(self, group: str) -> LiveGroup | None: ...

    def partition_count(self, topic: str) -> int:
        """A topic's partitions; 0 when there is no such topic."""
        ...

    def led_streams_groups(self) -> Iterable[tuple[str, int, StreamsGroup]]: ...

    async def record_streams(self, group: str, state: StreamsGroup) -> None: ...


@dataclass
class _Timers:
    term: int
    expires_ms: dict[str, int] = field(default_factory=dict)  # member -> when its session ends
    revoke_by_ms: dict[tuple[str, int], int] = field(default_factory=dict)  # (member, epoch) -> deadline


class StreamsGroupCoordinator:
    """Event loop only. ``monotonic`` (ms) times sessions and rebalance timeouts."""

    def __init__(
        self,
        records: StreamsRecords,
        monotonic: Callable[[], int],
        group_configs: Callable[[str], Mapping[str, str]] = lambda group: {},
    ) -> None:
        """``group_configs``: a group's configs (``partitions.resource_configs``), read at each use."""
        self._records = records
        self._monotonic = monotonic
        self.group_configs = group_configs
        self._locks: dict[str, asyncio.Lock] = {}
        self._timers: dict[str, _Timers] = {}

    def settings(self, name: str) -> tuple[int, int, int]:
        """The group's session timeout, heartbeat interval (ms) and standby replicas as its configs say."""
        return streams_settings(self.group_configs(name))

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    def _timers_of(self, name: str, term: int) -> _Timers:
        timers = self._timers.get(name)
        if timers is None or timers.term != term:
            timers = self._timers[name] = _Timers(term)  # a new term here: sessions start afresh
        return timers

    def _current(self, name: str, joining: bool) -> tuple[int, StreamsGroup]:
        """The group as the table holds it, led here (NotCoordinator otherwise). A group of another
        protocol with members is NotStreamsGroup; an empty one is taken over by a joining member."""
        found = self._records.recorded_group(name)
        if found is None:
            raise NotCoordinator(name)
        term, group = found
        check_type(name, GroupType.STREAMS, Holders.of(group, self._records.live(name)))
        if group is not None and group.streams is not None:
            return term, group.streams
        if not joining:
            raise UnknownGroup(name)
        return term, StreamsGroup(name)

    def _partitions(self, topic: str) -> int | None:
        count = self._records.partition_count(topic)
        return count if count > 0 else None

    async def heartbeat(self, hb: StreamsHeartbeat) -> StreamsAnswer:
        """A StreamsGroupHeartbeat: the group's next state written, then answered."""
        name = hb.group
        async with self._lock(name):
            term, state = self._current(name, hb.member_epoch == JOIN_EPOCH)
            session_ms, _, standbys = self.settings(name)
            answer = step(state, hb, self._partitions, standby_replicas=standbys)
            if answer.group != state:
                await self._records.record_streams(name, answer.group)
            timers = self._timers_of(name, term)
            if answer.left is not None:
                timers.expires_ms.pop(answer.left.member_id, None)
                log.info("streams group %s: member %s left", name, answer.left.member_id)
            if answer.member_id in answer.group.members:
                timers.expires_ms[answer.member_id] = self._monotonic() + session_ms
                self._schedule_revocation(timers, answer.group, answer.member_id)
            return answer

    def _schedule_revocation(self, timers: _Timers, group: StreamsGroup, member_id: str) -> None:
        """A member asked to revoke has its rebalance timeout to do so (in that epoch); else none runs."""
        for key in [k for k in timers.revoke_by_ms if k[0] == member_id]:
            member = group.members.get(member_id)
            if member is None or not revocation_overdue(member) or member.epoch != key[1]:
                del timers.revoke_by_ms[key]
        member = group.members[member_id]
        if revocation_overdue(member):
            timers.revoke_by_ms.setdefault(
                (member_id, member.epoch), self._monotonic() + member.rebalance_timeout_ms
            )

    async def expire_due(self) -> list[tuple[str, str]]:
        """Fence every member whose session, or whose rebalance timeout while revoking, passed."""
        fenced: list[tuple[str, str]] = []
        for name, term, _ in list(self._records.led_streams_groups()):
            async with self._lock(name):
                try:
                    found_term, state = self._current(name, joining=False)
                except RaftlogError:
                    continue
                if found_term != term:
                    continue
                timers = self._timers_of(name, term)
                now = self._monotonic()
                session_ms, _, _ = self.settings(name)
                due = []
                for member in state.members.values():
                    expires = timers.expires_ms.setdefault(member.member_id, now + session_ms)  # first sight
                    key = (member.member_id, member.epoch)
                    revoke_by = timers.revoke_by_ms.get(key)
                    if revocation_overdue(member) and revoke_by is None:  # revoking since before this term
                        revoke_by = timers.revoke_by_ms[key] = now + member.rebalance_timeout_ms
                    if now > expires or (revoke_by is not None and now > revoke_by):
                        due.append(member.member_id)
                if not due:
                    continue
                next_state = state
                for member_id in due:
                    next_state = fence(next_state, member_id)
                log.info("streams group %s: fenced %s (session or rebalance timeout)", name, ", ".join(due))
                await self._records.record_streams(name, next_state)
                for member_id in due:
                    timers.expires_ms.pop(member_id, None)
                    fenced.append((name, member_id))
        return fenced

    # -- what the other APIs check -----------------------------------------------------------------------

    def streams_group(self, name: str) -> StreamsGroup | None:
        """The group's streams protocol state when the table holds one and it is led here."""
        found = self._records.recorded_group(name)
        if found is None or found[1] is None:
            return None
        return found[1].streams

    def check_commit(
        self, name: str, member_id: str, epoch: int, api_version: int, transactional: bool = False
    ) -> bool:
        """An OffsetCommit or TxnOffsetCommit to a streams group with members, as Kafka's
        ``StreamsGroup.validateOffsetCommit``: UnknownMember, ConsumerProtocolVersion for an OffsetCommit
        below v9, StaleMemberEpoch for an epoch other than the member's; a transactional commit from
        outside every group (no member, epoch -1) passes. True when checked, False when the group is no
        such group (the other protocols' rules apply)."""
        state = self.streams_group(name)
        if state is None or not state.members:
            return False
        if transactional and epoch == -1 and not member_id:
            return True
        member = state.members.get(member_id)
        if member is None:
            raise UnknownMember(name, member_id)
        if not transactional and api_version < OFFSET_COMMIT_STREAMS_VERSION:
            raise ConsumerProtocolVersion(
                f"OffsetCommit version {OFFSET_COMMIT_STREAMS_VERSION} or above must be used by members "
                "using the streams group protocol"
            )
        if epoch != member.epoch:
            raise StaleMemberEpoch(name, member_id, epoch, member.epoch)
        return True

    def check_fetch(self, name: str, member_id: str | None, epoch: int) -> None:
        """An OffsetFetch naming a member of a streams group: it must be one, in its current epoch."""
        if member_id is None and epoch < 0:
            return
        state = self.streams_group(name)
        if state is None:
            return
        member = state.members.get(member_id or "")
        if member is None:
            raise UnknownMember(name, member_id or "")
        if epoch != member.epoch:
            raise StaleMemberEpoch(name, member.member_id, epoch, member.epoch)

    def describe(self, name: str) -> StreamsGroup:
        """The streams group (UnknownGroup when there is none; NotStreamsGroup when another protocol
        holds it; NotCoordinator when not led here)."""
        _, state = self._current(name, joining=False)
        return state
