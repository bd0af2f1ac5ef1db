"""The streams group protocol's coordinator (KIP-1071) on the node leading a group's ``__consumer_groups``
partition: runs ``streams.group``'s pure state machine against the group as the replicated table holds it,
writes each changed group there (``StreamsGroupRecord``) before the member is answered, and keeps the
timers Kafka keeps in memory: each member's session (the group's ``streams.session.timeout.ms``, 45 s by
default) and the rebalance timeout of a member asked to revoke tasks. Timers are soft state of the leader
term (``member_timers``, shared with the consumer protocol's): a coordinator taking over starts every
member's session afresh; the group, its topology, epochs,
members and tasks are the table's, so none is lost.

One group, one protocol (``group_types``): a group held by members of another protocol is not a streams
group (``NotStreamsGroup``, Kafka's GROUP_ID_NOT_FOUND). The internal topics a topology needs and that do
not exist are named in the answer (``StreamsAnswer.to_create``): the Kafka door creates them, as Kafka's
broker does after its coordinator answers. Heartbeats of one group are handled one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from partitions.groups.epoch_coordinator import EpochCoordinator, GroupRecords
from partitions.groups.epoch_members import JOIN_EPOCH
from partitions.groups.errors import (
    ConsumerProtocolVersion,
    StaleMemberEpoch,
    UnknownMember,
)
from partitions.groups.group_model import Group
from partitions.groups.group_types import GroupType
from partitions.groups.streams.group import (
    StreamsAnswer,
    StreamsGroup,
    StreamsHeartbeat,
    StreamsMember,
    fence,
    revocation_overdue,
)
from partitions.groups.streams.group import heartbeat as step
from partitions.resource_configs import streams_initial_delay_ms, streams_settings

TASK_OFFSET_INTERVAL_MS = 60_000  # Kafka's group.streams.task.offset.interval.ms
ACCEPTABLE_RECOVERY_LAG = 10_000  # Kafka's group.streams.acceptable.recovery.lag
OFFSET_COMMIT_STREAMS_VERSION = 9  # the first OffsetCommit a streams group member may use


class StreamsRecords(GroupRecords, Protocol):
    """What this coordinator needs of the node's group coordinator (``coordinator.GroupCoordinator``)."""

    def partition_count(self, topic: str) -> int:
        """A topic's partitions; 0 when there is no such topic."""
        ...

    def led_streams_groups(self) -> Iterable[tuple[str, int, StreamsGroup]]: ...

    async def record_streams(self, group: str, state: StreamsGroup) -> None: ...


class StreamsGroupCoordinator(EpochCoordinator[StreamsGroup, StreamsMember]):
    """Event loop only. ``monotonic`` (ms) times sessions and rebalance timeouts."""

    asking = GroupType.STREAMS
    what = "streams group"

    def __init__(
        self,
        records: StreamsRecords,
        monotonic: Callable[[], int],
        group_configs: Callable[[str], Mapping[str, str]] = lambda group: {},
    ) -> None:
        """``group_configs``: a group's configs (``partitions.resource_configs``), read at each use."""
        super().__init__(records, monotonic, revocation_overdue, group_configs)
        self._streams = records
        self._clock = monotonic
        # the initial rebalance delay of each group a member joined empty: (the term it was led in, when
        # it ends); soft state, as Kafka's timer: a coordinator taking over assigns at the next heartbeat
        self._delays: dict[str, tuple[int, int]] = {}

    def settings(self, name: str) -> tuple[int, int, int]:
        """The group's session timeout, heartbeat interval (ms) and standby replicas as its configs say."""
        return streams_settings(self.group_configs(name))

    def session_ms(self, name: str) -> int:
        return self.settings(name)[0]

    def _of(self, group: Group) -> StreamsGroup | None:
        return group.streams

    def _new(self, name: str) -> StreamsGroup:
        return StreamsGroup(name)

    def _led(self) -> Iterable[tuple[str, int, StreamsGroup]]:
        return self._streams.led_streams_groups()

    def _fence(self, state: StreamsGroup, member_id: str) -> StreamsGroup:
        return fence(state, member_id)

    async def _record(self, name: str, state: StreamsGroup) -> None:
        await self._streams.record_streams(name, state)

    def _partitions(self, topic: str) -> int | None:
        count = self._streams.partition_count(topic)
        return count if count > 0 else None

    async def heartbeat(self, hb: StreamsHeartbeat) -> StreamsAnswer:
        """A StreamsGroupHeartbeat: the group's next state written, then answered."""
        name = hb.group
        await self._records.readable(name)
        async with self._timers.lock(name):
            term, state = self._current(name, hb.member_epoch == JOIN_EPOCH)
            session_ms, _, standbys = self.settings(name)
            delayed = self._delayed(name, term, state)
            answer = step(state, hb, self._partitions, standby_replicas=standbys, assignment_delayed=delayed)
            await self._stepped(name, term, state, answer.group, answer.member_id, answer.left, session_ms)
            return answer

    async def expire_due(self, led: Iterable[tuple[str, int]] | None = None) -> list[tuple[str, str]]:
        """The sweep: members' sessions (``EpochCoordinator``), and the delays that ended forgotten (a
        group deleted meanwhile leaves none behind)."""
        now = self._clock()
        for name in [n for n, (_, ends) in self._delays.items() if now >= ends]:
            del self._delays[name]
        return await super().expire_due(led)

    def _delayed(self, name: str, term: int, state: StreamsGroup) -> bool:
        """Whether the group's initial rebalance delay runs: one starts when a member joins the group
        empty (Kafka's ``scheduleIfAbsent`` in ``streamsGroupHeartbeat``) and ends after the group's
        ``streams.initial.rebalance.delay.ms``; the heartbeat after it computes the assignment of every
        member that joined meanwhile."""
        now = self._clock()
        found = self._delays.get(name)
        if found is not None and (found[0] != term or now >= found[1]):
            del self._delays[name]
            found = None
        if found is None and not state.members:
            delay_ms = streams_initial_delay_ms(self.group_configs(name))
            if delay_ms > 0:
                found = self._delays[name] = (term, now + delay_ms)
        return found is not None

    # -- what the other APIs check -----------------------------------------------------------------------

    def check_commit(
        self,
        name: str,
        member_id: str,
        epoch: int,
        api_version: int,
        transactional: bool = False,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> bool:
        """An OffsetCommit or TxnOffsetCommit of ``partitions`` to a streams group with members, as Kafka
        4.4's ``StreamsGroup.validateOffsetCommit``: UnknownMember, ConsumerProtocolVersion for an
        OffsetCommit below v9, StaleMemberEpoch for an epoch above the member's; an epoch below it passes
        for partitions of tasks the member was given in that epoch or before and still holds (a commit sent
        before the heartbeat that moved its epoch was answered), StaleMemberEpoch otherwise. A transactional
        commit from outside every group (no member, epoch -1) passes. True when checked, False when the
        group is no such group (the other protocols' rules apply)."""
        state = self.state_of(name)
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
        if epoch > member.epoch:
            raise StaleMemberEpoch(name, member_id, epoch, member.epoch)
        if epoch < member.epoch:
            subtopologies = _by_source_topic(state)
            for topic, partition in partitions:
                subtopology = subtopologies.get(topic)
                given = None if subtopology is None else member.task_epoch((subtopology, partition))
                if given is None or epoch < given:
                    raise StaleMemberEpoch(name, member_id, epoch, member.epoch)
        return True


def _by_source_topic(state: StreamsGroup) -> dict[str, str]:
    """The subtopology reading each source and repartition source topic (Kafka's ``sourceTopicMap``)."""
    found: dict[str, str] = {}
    if state.topology is not None:
        for s in state.topology.subtopologies:
            for topic in s.inputs():
                found[topic] = s.subtopology_id
    return found
