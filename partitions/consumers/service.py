"""Consumer groups as a service (``GroupService``), run on each group's coordinator.

``GroupCoordinator`` keeps the members, generations, sessions and positions; this adds what a member's
requests need from the data partitions (their bounds, committed offsets), asked of each partition's
leader through the cluster-wide data service. A call for a group coordinated elsewhere raises
``NotLeader`` (from the coordinator's group log), and the cluster-wide group service runs it there.

A member's records do not pass through here: ``begin_read`` grants a read (positions, limits, how long it
may wait) and ``end_read`` takes the positions back; the node the member called reads in between,
straight from each partition's leader (``reader.py``). A position moves only for a partition still
assigned to the member when the read ends.

A member with ``auto.commit.enable`` has its positions committed at a later read (at most every
``auto.commit.interval.ms``) and when it is deleted: what earlier reads returned, as Kafka's auto commit
does at the next poll, so a record is committed only after a read that followed the one returning it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from partitions.commands import check_offset_metadata
from partitions.consumers.offsets import GroupOffsets
from partitions.consumers.protocol import (
    Assignment,
    CommittedOffset,
    ConsumerCreated,
    GroupDeleted,
    GroupDescription,
    GroupSummary,
    MemberDescription,
    MemberPartition,
    ReadEnd,
    ReadPlan,
    ShareMembership,
)
from partitions.consumers.reader import PartitionData
from partitions.data.service import NO_LEADER_EPOCH, DataService, GroupOffset
from partitions.errors import UnknownPartition, UnknownTopic
from partitions.features import Features
from partitions.groups.assignors import TopicPartition
from partitions.groups.coordinator import GroupCoordinator
from partitions.groups.errors import ConsumerFormatMismatch, GroupNotEmpty, StaleGeneration, UnknownGroup
from partitions.groups.group_model import SHARE_PROTOCOL_TYPE, STREAMS_PROTOCOL_TYPE, Group, InstanceConfig
from partitions.groups.share.coordinator import LEAVE_EPOCH
from partitions.groups.share.group import ShareHeartbeat
from raftlog.errors import RaftlogError

ASSIGNMENT_POLL_S = 0.05  # how often a member with no partitions looks for a new assignment while it waits
AUTO_COMMIT_MEMBERS_KEPT = 1_000  # past this many, members gone are dropped from the auto-commit record

log = logging.getLogger(__name__)


class ConsumerService:
    """Implements ``GroupService`` on this node (NotLeader for groups coordinated elsewhere)."""

    def __init__(
        self,
        node_id: str,
        groups: GroupCoordinator,
        data: Callable[[], PartitionData],
        monotonic: Callable[[], float] = time.monotonic,
        features: Features | None = None,
    ) -> None:
        """``data``: the cluster-wide data service (a callable: it is built after this); ``features``: the
        gate before a format the previous release cannot read (None: every one)."""
        self._features = features
        self.node_id = node_id
        self._groups = groups
        self._data = data
        self._monotonic = monotonic
        # (group, instance) -> when its positions were last auto-committed, and what was committed
        self._auto_committed: dict[tuple[str, str], tuple[float, dict[TopicPartition, int]]] = {}

    # -- instances -------------------------------------------------------------------------------------

    async def create_instance(
        self, group: str, name: str | None, config: InstanceConfig, client_host: str = ""
    ) -> ConsumerCreated:
        member = await self._groups.create_instance(group, name, config, client_host)
        return ConsumerCreated(member.instance_id, self.node_id)

    async def delete_instance(self, group: str, instance: str) -> None:
        """Leaves the group; an auto-committing member commits its positions first (as Kafka's close)."""
        if self._groups.view(group, instance).member.reads.auto_commit:
            await self._auto_commit(group, instance, force=True)
        await self._groups.delete_instance(group, instance)
        self._auto_committed.pop((group, instance), None)

    async def subscribe(self, group: str, instance: str, topics: list[str]) -> None:
        await self._groups.subscribe(group, instance, topics)

    async def subscription(self, group: str, instance: str) -> list[str]:
        return list(self._groups.view(group, instance).member.topics)

    async def assignment(self, group: str, instance: str) -> Assignment:
        view = await self._groups.heartbeat(group, instance)
        return Assignment(view.assigned, view.generation)

    # -- positions -------------------------------------------------------------------------------------

    async def seek(self, group: str, instance: str, offsets: dict[TopicPartition, int]) -> None:
        self._groups.seek(group, instance, offsets)

    async def seek_to(self, group: str, instance: str, partitions: list[TopicPartition], end: bool) -> None:
        self._groups.check_assigned(group, instance, None, partitions)  # refused before any lookup
        offsets = {}
        for tp in partitions:
            bounds = (await self._data().run(DataService.offsets, tp.topic, tp.partition)).value
            offsets[tp] = bounds.high_watermark if end else bounds.log_start_offset
        self._groups.seek(group, instance, offsets)

    async def seek_to_times(self, group: str, instance: str, times: dict[TopicPartition, int]) -> None:
        self._groups.check_assigned(group, instance, None, list(times))  # refused before any lookup
        offsets = {}
        for tp, timestamp_ms in times.items():
            found = (
                await self._data().run(DataService.offset_for_timestamp, tp.topic, tp.partition, timestamp_ms)
            ).value
            if found is None:  # no record that late: from the end, as a Kafka consumer seeking past it
                offsets[tp] = (
                    await self._data().run(DataService.offsets, tp.topic, tp.partition)
                ).value.high_watermark
            else:
                offsets[tp] = found.offset
        self._groups.seek(group, instance, offsets)

    # -- records ---------------------------------------------------------------------------------------

    async def begin_read(
        self,
        group: str,
        instance: str,
        timeout_ms: int | None,
        generation: int | None,
        format: str | None,
    ) -> ReadPlan:
        groups = self._groups
        loop = asyncio.get_running_loop()
        view = await groups.heartbeat(group, instance)
        member = view.member
        if format is not None and format != member.format:
            raise ConsumerFormatMismatch(group, instance, member.format, format)
        if generation is not None and generation != view.generation:
            raise StaleGeneration(group, instance, generation, view.generation)
        wait_ms = member.reads.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = loop.time() + wait_ms / 1000
        if member.reads.auto_commit:
            await self._auto_commit(group, instance, force=False)
        read_id = groups.begin_read(group, instance, wait_ms)
        try:
            while not view.assigned and loop.time() < deadline:
                await asyncio.sleep(min(ASSIGNMENT_POLL_S, max(0.0, deadline - loop.time())))
                view = groups.view(group, instance)
        except BaseException:
            with contextlib.suppress(RaftlogError):
                groups.end_read(group, instance, read_id)
            raise
        return ReadPlan(
            read_id,
            member.format,
            view.generation,
            view.assigned,
            groups.positions(group, instance),
            member.offset_reset,
            member.reads.fetch_min_bytes,
            max(0, int((deadline - loop.time()) * 1000)),
            member.reads.read_committed,
        )

    async def end_read(
        self,
        group: str,
        instance: str,
        read_id: int,
        positions: dict[TopicPartition, int],
        end_offsets: dict[TopicPartition, int],
    ) -> ReadEnd:
        groups = self._groups
        moved = sorted(positions.items())
        kept = tuple(tp for tp, offset in moved if groups.advance(group, instance, tp, offset))
        for tp, end in end_offsets.items():
            groups.note_end_offset(group, tp, end)
        groups.end_read(group, instance, read_id)
        return ReadEnd(kept, groups.view(group, instance).generation)

    async def _auto_commit(self, group: str, instance: str, *, force: bool) -> None:
        """Commit the positions that moved since the member's last auto commit, once its interval passed
        (``force``: now). A partition the member lost meanwhile is not committed: its new owner's. A
        commit that fails is logged and tried again at the next read, as Kafka's auto commit: the read
        itself goes on."""
        key = (group, instance)
        now = self._monotonic()
        last_at, committed = self._auto_committed.get(key, (float("-inf"), {}))
        view = self._groups.view(group, instance)
        if not force and now - last_at < view.member.reads.auto_commit_interval_ms / 1000:
            return
        assigned = set(view.assigned)
        positions = self._groups.positions(group, instance)
        moved = {tp: o for tp, o in positions.items() if tp in assigned and committed.get(tp) != o}
        try:
            await _all([self._commit(group, tp, offset) for tp, offset in moved.items()])
        except RaftlogError as exc:
            log.info(
                "group %s, instance %s: auto commit failed, retried at its next read: %s",
                group,
                instance,
                exc,
            )
            return
        if key not in self._auto_committed and len(self._auto_committed) >= AUTO_COMMIT_MEMBERS_KEPT:
            self._forget_departed()
        self._auto_committed[key] = (now, {**committed, **moved})

    def _forget_departed(self) -> None:
        """Drops the auto-commit record of members that left or timed out (or moved with their group)."""
        for group, instance in list(self._auto_committed):
            try:
                self._groups.view(group, instance)
            except RaftlogError:
                del self._auto_committed[(group, instance)]

    # -- commits ---------------------------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        instance: str,
        offsets: dict[TopicPartition, int] | None,
        generation: int | None,
        metadata: dict[TopicPartition, str] | None = None,
    ) -> None:
        wanted = self._groups.positions(group, instance) if offsets is None else offsets
        self._groups.check_assigned(group, instance, generation, list(wanted))
        for text in (metadata or {}).values():
            check_offset_metadata(text)  # before any partition is committed
        noted = metadata or {}
        await _all([self._commit(group, tp, offset, noted.get(tp, "")) for tp, offset in wanted.items()])

    def _offsets(self) -> GroupOffsets:
        return GroupOffsets(self._data(), features=self._features)

    async def _commit(self, group: str, tp: TopicPartition, offset: int, metadata: str = "") -> None:
        offsets = self._offsets()
        stored = await offsets.commit(group, tp.topic, tp.partition, offset, False, NO_LEADER_EPOCH, metadata)
        self._groups.note_committed(group, tp, stored)

    async def _committed(self, group: str, tp: TopicPartition) -> GroupOffset | None:
        """The group's committed offset of a partition (kept with the partition), from its leader."""
        found = await self._offsets().committed(group, tp.topic, tp.partition)
        if found is None:
            return None
        self._groups.note_committed(group, tp, found.offset)
        return found

    async def committed(
        self, group: str, instance: str, partitions: list[TopicPartition] | None
    ) -> list[CommittedOffset]:
        view = await self._groups.heartbeat(group, instance)
        wanted = list(view.assigned) if partitions is None else partitions
        rows = []
        for tp in wanted:
            found = await self._committed(group, tp)
            if found is not None:
                rows.append(CommittedOffset(tp, found.offset, found.metadata))
        return rows

    # -- admin -----------------------------------------------------------------------------------------

    async def describe(self, group: str) -> GroupDescription:
        """Members of either door, their partitions, positions, committed offsets and lag (end offset -
        committed offset; None while nothing is committed); the partitions of the topics it read or
        committed that no member holds."""
        current, positions = self._groups.describe(group)
        kafka = self._groups.live(group, recorded=True)

        async def row(tp: TopicPartition, position: int | None) -> MemberPartition:
            found = await self._committed(group, tp)
            committed = None if found is None else found.offset
            end = (await self._data().run(DataService.offsets, tp.topic, tp.partition)).value.high_watermark
            self._groups.note_end_offset(group, tp, end)
            lag = None if committed is None else max(0, end - committed)
            return MemberPartition(tp, position, committed, end, lag)

        members = []
        for instance_id, member in sorted(current.members.items()):
            mine = positions.get(instance_id, {})
            rows = [await row(tp, mine.get(tp)) for tp in current.assignment.get(instance_id, ())]
            members.append(
                MemberDescription(
                    instance_id, tuple(member.topics), tuple(rows), instance_id, member.client_host
                )
            )
        assigned = {tp for tps in current.assignment.values() for tp in tps}
        for live in kafka.members if kafka is not None else ():
            rows = []
            for tp in live.assigned:
                with contextlib.suppress(UnknownTopic, UnknownPartition):  # deleted since
                    rows.append(await row(tp, None))
            topics = tuple(sorted({tp.topic for tp in live.assigned}))
            members.append(
                MemberDescription(live.member_id, topics, tuple(rows), live.client_id, live.client_host)
            )
            assigned.update(live.assigned)
        for cm in current.consumer.members.values() if current.consumer is not None else ():
            rows = []
            for tp in sorted(cm.assigned):  # a consumer group protocol (KIP-848) member's
                with contextlib.suppress(UnknownTopic, UnknownPartition):  # deleted since
                    rows.append(await row(tp, None))
            members.append(
                MemberDescription(cm.member_id, cm.topics(), tuple(rows), cm.client_id, cm.client_host)
            )
            assigned.update(cm.assigned)
        streams = current.streams  # a streams group's members (KIP-1071): the partitions their tasks read
        for stm in streams.members.values() if streams is not None else ():
            reads = streams.source_partitions(stm.assigned.active) if streams is not None else []
            rows = []
            for topic, partition in reads:
                with contextlib.suppress(UnknownTopic, UnknownPartition):  # deleted since
                    rows.append(await row(TopicPartition(topic, partition), None))
            topics = tuple(sorted({r.tp.topic for r in rows}))
            members.append(
                MemberDescription(stm.member_id, topics, tuple(rows), stm.client_id, stm.client_host)
            )
            assigned.update(r.tp for r in rows)
        share = self._groups.share.members_of(group) if current.protocol_type == SHARE_PROTOCOL_TYPE else None
        for sm in sorted(share.members.values(), key=lambda m: m.member_id) if share is not None else ():
            rows = []
            for tp in sorted(sm.assigned):  # a share group member's (KIP-932): records, not offsets, held
                with contextlib.suppress(UnknownTopic, UnknownPartition):  # deleted since
                    rows.append(await row(tp, None))
            members.append(
                MemberDescription(sm.member_id, sm.subscribed, tuple(rows), sm.client_id, sm.client_host)
            )
        unassigned = []
        for topic in current.offset_topics():  # the topics it read or committed, no member holds now
            for tp in (TopicPartition(topic, p) for p in range(self._groups.partition_count(topic))):
                if tp not in assigned:
                    with contextlib.suppress(UnknownTopic, UnknownPartition):  # deleted since
                        unassigned.append(await row(tp, None))
        total = sum(r.lag or 0 for m in members for r in m.partitions) + sum(r.lag or 0 for r in unassigned)
        summary = self._summary(current, self._groups.coordinator_partition(group))
        return GroupDescription(summary, tuple(members), total, tuple(unassigned))

    def _summary(self, group: Group, coordinator_partition: int) -> GroupSummary:
        """One line of a group, whichever door its members use (their state as Kafka names it)."""
        kafka = self._groups.live(group.name, recorded=True)
        if kafka is not None:
            return GroupSummary(
                group.name, kafka.generation, kafka.protocol, len(kafka.members), coordinator_partition,
                kafka.state, kafka.protocol_type, "kafka",
            )  # fmt: skip
        if group.members:
            return GroupSummary(
                group.name, group.generation, group.assignor, len(group.members), coordinator_partition,
                "Stable", "consumer", "http",
            )  # fmt: skip
        consumer = group.consumer  # the consumer group protocol's (KIP-848): its epoch, assignor and state
        if consumer is not None and consumer.members:
            return GroupSummary(
                group.name, consumer.group_epoch, consumer.assignor, len(consumer.members),
                coordinator_partition, consumer.state, "consumer", "kafka", "consumer",
            )  # fmt: skip
        streams = group.streams  # a streams group's (KIP-1071): its epoch, members and state
        if streams is not None:
            return GroupSummary(
                group.name, streams.group_epoch, "sticky", len(streams.members), coordinator_partition,
                streams.state, STREAMS_PROTOCOL_TYPE, "kafka", "streams",
            )  # fmt: skip
        if group.protocol_type == SHARE_PROTOCOL_TYPE:  # a share group (KIP-932): members in memory
            share = self._groups.share.members_of(group.name)
            members = 0 if share is None else len(share.members)
            doors = sorted({m.door for m in share.members.values()}) if share is not None else []
            return GroupSummary(
                group.name, group.generation if share is None else share.group_epoch, group.assignor, members,
                coordinator_partition, "Stable" if members else "Empty", SHARE_PROTOCOL_TYPE,
                ",".join(doors) or None, "share",
            )  # fmt: skip
        protocol_type = "consumer" if group.protocol_type is None else group.protocol_type
        group_type = "consumer" if consumer is not None else "classic"
        return GroupSummary(
            group.name,
            group.generation,
            group.assignor,
            0,
            coordinator_partition,
            "Empty",
            protocol_type,
            group_type=group_type,
        )

    # -- share groups (KIP-932) of the HTTP door ---------------------------------------------------------

    async def share_heartbeat(
        self,
        group: str,
        member: str,
        epoch: int | None,
        topics: list[str] | None,
        client_id: str = "",
        client_host: str = "",
    ) -> ShareMembership:
        await self._groups.ensure_topic(led=group)  # NotLeader: the cluster-wide call goes to the coordinator
        share = self._groups.share

        def assigned() -> tuple[TopicPartition, ...]:
            current = share.members_of(group)
            held = None if current is None else current.members.get(member)
            return () if held is None else tuple(sorted(held.assigned))

        had = assigned() if epoch == LEAVE_EPOCH else ()
        subscribed = None if topics is None else tuple(topics)
        hb = ShareHeartbeat(
            member, epoch, subscribed, client_id=client_id, client_host=client_host, door="http"
        )
        answer = await share.heartbeat(group, hb)
        return ShareMembership(
            member,
            answer.member_epoch,
            had if epoch == LEAVE_EPOCH else assigned(),
            share.heartbeat_interval_ms,
            share.session_timeout_ms,
        )

    async def share_member(self, group: str, member: str) -> None:
        await self._groups.ensure_topic(led=group)  # NotLeader: the cluster-wide call goes to the coordinator
        self._groups.share.check_member(group, member)

    async def list_groups(self, coordinator_partition: int) -> list[GroupSummary]:
        groups = {g.name: g for g in self._groups.groups_of(coordinator_partition)}
        for name in self._groups.live_names():  # a Kafka group before its first generation is recorded
            if name not in groups and self._groups.coordinator_partition(name) == coordinator_partition:
                groups[name], _ = self._groups.describe(name)
        return [self._summary(g, coordinator_partition) for _, g in sorted(groups.items())]

    async def delete_group(self, group: str) -> GroupDeleted:
        """Kafka's DeleteGroups: only an empty group; its committed offsets go first (a failure leaves the
        group listed, and deleting it again finishes the work)."""
        current = self._groups.check_empty(group)
        offsets = self._offsets()
        deleted = 0
        for topic in current.offset_topics():
            for partition in range(self._groups.partition_count(topic)):
                with contextlib.suppress(UnknownTopic, UnknownPartition):  # deleted since
                    deleted += await offsets.delete(group, topic, partition)
        await self._groups.forget(group)
        log.info("group %s deleted with its offsets of %d partition(s)", group, deleted)
        return GroupDeleted(group, deleted)

    async def note_commit(self, group: str, topics: list[str], reset: bool, force: bool) -> None:
        if reset:
            try:
                self._groups.check_empty(group)
            except GroupNotEmpty as busy:
                if not force:
                    raise
                log.warning("offsets of group %s reset with --force while it has members: %s", group, busy)
            except UnknownGroup:
                pass
        await self._groups.record_commit(group, topics)

    async def coordinator_partitions(self) -> int:
        try:
            return self._groups.partitions()
        except UnknownTopic:
            return 0


async def _all(work: list[Awaitable[None]]) -> None:
    """Run every call at once; the first failure is raised after all end."""
    results = await asyncio.gather(*work, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
