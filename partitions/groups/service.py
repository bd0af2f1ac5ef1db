"""Consumer groups as a service (``GroupService``), run on each group's coordinator.

``GroupCoordinator`` keeps the members, generations, sessions and positions; this adds what a member's
requests need from the data partitions (their bounds, committed offsets, records), asked of each
partition's leader through the cluster-wide data service. A call for a group coordinated elsewhere raises
``NotLeader`` (from the coordinator's group log), and the cluster-wide group service runs it there.

A member's fetch reads every assigned partition at once, first without waiting (every partition's answer
is kept); while less than its ``fetch.min.bytes`` came, a long poll on all of them that the first
partition with records ends (the others are cancelled: reads, nothing to undo), until the timeout (the
read's, else the member's ``consumer.request.timeout.ms``). Each round gives every partition an equal
share of what is left of ``max_bytes``. Records travel as the stored batches; a position moves to the end
of the last batch returned, and only for a partition still assigned to the member. A partition whose
position fell out of its log (retention) is reset by the member's ``auto.offset.reset``.

A member with ``auto.commit.enable`` has its positions committed at a later read (at most every
``auto.commit.interval.ms``) and when it is deleted: what earlier reads returned, as Kafka's auto commit
does at the next poll, so a record is committed only after a read that followed the one returning it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from partitions.cluster import Served
from partitions.errors import UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.groups.coordinator import GroupCoordinator, InstanceView
from partitions.groups.errors import ConsumerFormatMismatch, StaleGeneration
from partitions.groups.state import ReadConfig
from partitions.services import (
    Assignment,
    CommittedOffset,
    ConsumerCreated,
    ConsumerRecords,
    FetchedBatches,
    FetchedPart,
    GroupDescription,
    GroupSummary,
    MemberDescription,
    MemberPartition,
    PartitionOffsets,
    TimestampOffset,
)
from raftlog.errors import RaftlogError
from raftlog.storage.batch import decode_header, split_batches
from raftlog.storage.errors import OffsetOutOfRange

ASSIGNMENT_POLL_S = 0.05  # how often a member with no partitions looks for a new assignment while it waits
COMMIT_TIMEOUT_MS = 10_000
AUTO_COMMIT_MEMBERS_KEPT = 1_000  # past this many, members gone are dropped from the auto-commit record

log = logging.getLogger(__name__)


class PartitionData(Protocol):
    """The data partitions as the coordinator reaches them, wherever their leaders are
    (``cluster.ClusterData``)."""

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> Served[FetchedBatches]: ...

    async def offsets(self, topic: str, partition: int) -> Served[PartitionOffsets]: ...

    async def commit_offset(
        self, group: str, topic: str, partition: int, offset: int, reset: bool, timeout_ms: int
    ) -> Served[int]: ...

    async def committed_offset(self, group: str, topic: str, partition: int) -> Served[int | None]: ...

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> Served[TimestampOffset | None]: ...


@dataclass(frozen=True, slots=True)
class _Fetched:
    part: FetchedPart | None  # None: nothing came
    next_offset: int | None = None  # the position after the part's last batch
    reset_to: int | None = None  # the position fell out of the log: start again here


class ConsumerService:
    """Implements ``GroupService`` on this node (NotLeader for groups coordinated elsewhere)."""

    def __init__(
        self,
        node_id: str,
        groups: GroupCoordinator,
        data: Callable[[], PartitionData],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``data``: the cluster-wide data service (a callable: it is built after this)."""
        self.node_id = node_id
        self._groups = groups
        self._data = data
        self._monotonic = monotonic
        # (group, instance) -> when its positions were last auto-committed, and what was committed
        self._auto_committed: dict[tuple[str, str], tuple[float, dict[TopicPartition, int]]] = {}

    # -- instances -------------------------------------------------------------------------------------

    async def create_instance(
        self,
        group: str,
        name: str | None,
        format: str,
        offset_reset: str,
        session_timeout_ms: int,
        assignor: str,
        reads: ReadConfig,
    ) -> ConsumerCreated:
        member = await self._groups.create_instance(
            group,
            name,
            format=format,
            offset_reset=offset_reset,
            session_timeout_ms=session_timeout_ms,
            assignor=assignor,
            reads=reads,
        )
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
            bounds = (await self._data().offsets(tp.topic, tp.partition)).value
            offsets[tp] = bounds.high_watermark if end else bounds.log_start_offset
        self._groups.seek(group, instance, offsets)

    async def seek_to_times(self, group: str, instance: str, times: dict[TopicPartition, int]) -> None:
        self._groups.check_assigned(group, instance, None, list(times))  # refused before any lookup
        offsets = {}
        for tp, timestamp_ms in times.items():
            found = (await self._data().offset_for_timestamp(tp.topic, tp.partition, timestamp_ms)).value
            if found is None:  # no record that late: from the end, as a Kafka consumer seeking past it
                offsets[tp] = (await self._data().offsets(tp.topic, tp.partition)).value.high_watermark
            else:
                offsets[tp] = found.offset
        self._groups.seek(group, instance, offsets)

    # -- records ---------------------------------------------------------------------------------------

    async def records(
        self,
        group: str,
        instance: str,
        timeout_ms: int | None,
        max_bytes: int,
        generation: int | None,
        format: str | None,
    ) -> ConsumerRecords:
        groups = self._groups
        loop = asyncio.get_running_loop()
        view = await groups.heartbeat(group, instance)
        member = view.member
        if format is not None and format != member.format:
            raise ConsumerFormatMismatch(group, instance, member.format, format)
        if generation is not None and generation != view.generation:
            raise StaleGeneration(group, instance, generation, view.generation)
        wait_s = (member.reads.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = loop.time() + wait_s
        if member.reads.auto_commit:
            await self._auto_commit(group, instance, force=False)
        min_bytes = (
            max_bytes if member.reads.fetch_min_bytes < 0 else min(member.reads.fetch_min_bytes, max_bytes)
        )
        parts: list[FetchedPart] = []
        failures: list[RaftlogError] = []
        size = 0
        with groups.fetching(group, instance):
            while not view.assigned and loop.time() < deadline:
                await asyncio.sleep(min(ASSIGNMENT_POLL_S, max(0.0, deadline - loop.time())))
                view = groups.view(group, instance)
            positions = groups.positions(group, instance)
            for tp in view.assigned:
                if tp in positions:
                    continue
                try:
                    start = await self._starting_offset(group, view, tp)
                except RaftlogError as exc:  # that partition has no leader right now: read the others
                    failures.append(exc)
                    continue
                if groups.advance(group, instance, tp, start):
                    positions[tp] = start
            # first what every partition has now, then (while too little came) the first to get something
            wait = False
            while True:
                readable = [tp for tp in view.assigned if tp in positions]
                wait_ms = max(0, int((deadline - loop.time()) * 1000)) if wait else 0
                if not readable or (wait and wait_ms == 0):
                    break
                budget = max(1, (max_bytes - size) // len(readable))
                tasks = {
                    tp: asyncio.create_task(self._fetch(group, view, tp, positions[tp], wait_ms, budget))
                    for tp in readable
                }
                results, fetch_failures = await _first_records(tasks, first=wait)
                failures += fetch_failures
                for tp, fetched in sorted(results.items()):
                    moved_to = fetched.reset_to if fetched.reset_to is not None else fetched.next_offset
                    if moved_to is None:
                        continue
                    if not groups.advance(group, instance, tp, moved_to):  # no longer this member's
                        positions.pop(tp, None)
                        continue
                    positions[tp] = moved_to
                    if fetched.reset_to is None and fetched.part is not None:
                        parts.append(fetched.part)
                        size += len(fetched.part.data)
                if min_bytes == 0 or (parts and size >= min_bytes):
                    break
                wait = True
        if not parts and failures:
            raise failures[0]
        current = groups.view(group, instance)
        return ConsumerRecords(current.member.format, current.generation, tuple(parts))

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

    async def _starting_offset(self, group: str, view: InstanceView, tp: TopicPartition) -> int:
        committed = await self._committed(group, tp)
        if committed is not None:
            return committed
        bounds = (await self._data().offsets(tp.topic, tp.partition)).value
        return bounds.log_start_offset if view.member.offset_reset == "earliest" else bounds.high_watermark

    async def _fetch(
        self, group: str, view: InstanceView, tp: TopicPartition, offset: int, timeout_ms: int, max_bytes: int
    ) -> _Fetched:
        try:
            served = await self._data().fetch_batches(tp.topic, tp.partition, offset, max_bytes, timeout_ms)
        except OffsetOutOfRange as exc:
            earliest = view.member.offset_reset == "earliest"
            return _Fetched(None, reset_to=exc.log_start_offset if earliest else exc.end_offset)
        fetched = served.value
        self._groups.note_end_offset(group, tp, fetched.high_watermark)
        if not fetched.data:
            return _Fetched(None)
        last = None
        for batch in split_batches(fetched.data):
            last = batch
        assert last is not None  # data is not empty: split_batches yields at least one batch
        next_offset = decode_header(last).end_offset
        return _Fetched(FetchedPart(tp, offset, fetched.data), next_offset)

    # -- commits ---------------------------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        instance: str,
        offsets: dict[TopicPartition, int] | None,
        generation: int | None,
    ) -> None:
        wanted = self._groups.positions(group, instance) if offsets is None else offsets
        self._groups.check_assigned(group, instance, generation, list(wanted))
        await _all([self._commit(group, tp, offset) for tp, offset in wanted.items()])

    async def _commit(self, group: str, tp: TopicPartition, offset: int) -> None:
        data = self._data()
        stored = await data.commit_offset(group, tp.topic, tp.partition, offset, False, COMMIT_TIMEOUT_MS)
        self._groups.note_committed(group, tp, stored.value)

    async def _committed(self, group: str, tp: TopicPartition) -> int | None:
        """The group's committed offset of a partition (kept with the partition), from its leader."""
        committed = (await self._data().committed_offset(group, tp.topic, tp.partition)).value
        if committed is not None:
            self._groups.note_committed(group, tp, committed)
        return committed

    async def committed(
        self, group: str, instance: str, partitions: list[TopicPartition] | None
    ) -> list[CommittedOffset]:
        view = await self._groups.heartbeat(group, instance)
        wanted = list(view.assigned) if partitions is None else partitions
        rows = []
        for tp in wanted:
            offset = await self._committed(group, tp)
            if offset is not None:
                rows.append(CommittedOffset(tp, offset))
        return rows

    # -- admin -----------------------------------------------------------------------------------------

    async def describe(self, group: str) -> GroupDescription:
        """Members, their partitions, positions, committed offsets and lag (end offset - committed offset;
        None while nothing is committed)."""
        current, positions = self._groups.describe(group)
        members = []
        total = 0
        for instance_id, member in sorted(current.members.items()):
            rows = []
            for tp in current.assignment.get(instance_id, ()):
                committed = await self._committed(group, tp)
                end = (await self._data().offsets(tp.topic, tp.partition)).value.high_watermark
                self._groups.note_end_offset(group, tp, end)
                lag = None if committed is None else max(0, end - committed)
                total += lag or 0
                rows.append(MemberPartition(tp, positions.get(instance_id, {}).get(tp), committed, end, lag))
            members.append(MemberDescription(instance_id, tuple(member.topics), tuple(rows)))
        partition = self._groups.coordinator_partition(group)
        summary = GroupSummary(group, current.generation, current.assignor, len(current.members), partition)
        return GroupDescription(summary, tuple(members), total)

    async def list_groups(self, coordinator_partition: int) -> list[GroupSummary]:
        return [
            GroupSummary(g.name, g.generation, g.assignor, len(g.members), coordinator_partition)
            for g in self._groups.groups_of(coordinator_partition)
        ]

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


async def _first_records(
    tasks: dict[TopicPartition, asyncio.Task[_Fetched]], *, first: bool
) -> tuple[dict[TopicPartition, _Fetched], list[RaftlogError]]:
    """Wait until every partition answered or, with ``first``, one answered with records; cancel the
    rest."""
    results: dict[TopicPartition, _Fetched] = {}
    failures: list[RaftlogError] = []
    by_task = {task: tp for tp, task in tasks.items()}
    pending: set[asyncio.Task[_Fetched]] = set(tasks.values())
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception()
                if isinstance(error, RaftlogError):
                    failures.append(error)
                elif error is not None:
                    raise error
                else:
                    results[by_task[task]] = task.result()
            if first and any(f.part for f in results.values()):
                break
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return results, failures
