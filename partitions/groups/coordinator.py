"""The group coordinator: consumer instances, subscriptions, heartbeats, positions and fencing.

A group is coordinated by one partition of the internal topic ``__consumer_groups`` (Kafka's murmur2 of
the group name modulo its partition count); that partition's Raft leader serves every request of the
group. What must survive a failover is replicated through the partition's Raft group (``state.GroupTable``:
members, subscriptions, generations, assignments). What Kafka also keeps only in the coordinator's memory
is soft state here, held per leader term and rebuilt empty when leadership moves:

- last-seen times: a new leader gives every member a fresh session timeout (as Kafka does);
- reads in progress: a member's read is done by the node it called (straight from each partition's
  leader, ``service.py``), announced here by ``begin_read`` with its deadline; until it ends (or its
  deadline passes, should its node die) the member is alive;
- fetch positions: a member's next offset per assigned partition; after a failover, or when a partition
  changes hands, reading resumes from the committed offset (at-least-once), else ``auto.offset.reset``;
- committed offsets and end offsets seen lately, for lag in /metrics.

Committed offsets themselves stay where ``POST /consumers/{group}/offsets`` keeps them: replicated with
each data partition (one source of truth, see docs/decisions/consumer-group-offsets.md). A commit by an
instance is fenced here first: it must name a partition assigned to it in the current generation (and that
generation, when it gives one). Data-partition commits never move backwards, so a fenced-out instance can
neither lower a committed offset nor commit for a partition it lost.

No sockets here: the replicated log is a ``GroupLog`` (the node's Raft groups, or an in-memory table in
tests); time comes from the injected clocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import random
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from partitions.errors import FeatureNotFinalized, UnknownTopic
from partitions.features import EXPIRE_UNCOMMITTED, SCHEMA_CONSUMERS, Features
from partitions.groups.assignors import TopicPartition
from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic_calls import ClassicCalls
from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator
from partitions.groups.defaults import (
    CONSUMER_SESSION_TIMEOUT_MS_DEFAULT,
    INITIAL_DELAY_MS_DEFAULT,
    MIGRATION_POLICY_DEFAULT,
    REGEX_RESOLVE_BUDGET_MS_DEFAULT,
    SHARE_GROUPS_MAX_DEFAULT,
)
from partitions.groups.errors import (
    GroupFull,
    InvalidConsumerConfig,
    PartitionNotAssigned,
    StaleGeneration,
    UnknownConsumerInstance,
    UnknownGroup,
)
from partitions.groups.group_commands import (
    Committed,
    Expire,
    Forget,
    GroupCommand,
    Join,
    Leave,
    Refresh,
    Subscribe,
)
from partitions.groups.group_model import (
    DEFAULT_INSTANCE,
    EMPTY_GROUP_RETENTION_MS,
    EMPTY_UNCOMMITTED_RETENTION_MS,
    GROUP_MEMBERS_MAX,
    SCHEMA_FORMATS,
    SHARE_PROTOCOL_TYPE,
    ConsumerInstance,
    Group,
    InstanceConfig,
    Recorded,
)
from partitions.groups.group_types import GroupType, Holders, check_type, held_by
from partitions.groups.held_map import HeldMap
from partitions.groups.live import LiveGroup
from partitions.groups.share.coordinator import ShareGroupCoordinator
from partitions.groups.state import GroupChanged, GroupResult, GroupTable
from partitions.groups.streams.coordinator import StreamsGroupCoordinator
from partitions.groups.table_access import ClassicTable, ConsumerTable
from partitions.internal_topic import TableLog
from partitions.names import GROUPS_TOPIC, check_group_name, check_instance_name
from raftlog.consensus.errors import ConsensusError, NoLeader
from raftlog.errors import RaftlogError, check
from raftlog.storage.log import wall_clock_ms
from raftlog.storage.partitioner import partition_for_key

log = logging.getLogger("raftlog.groups")

GROUP_PARTITIONS_DEFAULT = 4
SWEEP_INTERVAL_S = 0.25  # how often the leader looks for members whose session timed out
# how often the classic groups run on the clock: sessions, rebalance deadlines, a first rebalance's delay
CLASSIC_TICK_S = 0.1
SUBSCRIBED_TOPICS_MAX = 1_000
GROUP_FULL_LOG_INTERVAL_MS = 60_000  # refused joins are logged in one line at most this often
READ_GRACE_MS = 5_000  # a read's deadline past its wait: the time to fetch, render and report back


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class GroupLog(TableLog[GroupTable, GroupCommand, GroupResult], Protocol):
    """The replicated home of ``GroupTable``s: one per partition of ``__consumer_groups``."""

    def partition_count(self, topic: str) -> int:
        """Partitions of a data topic; 0 when it does not exist (yet)."""
        ...

    def leader_term(self, partition: int) -> int:
        """The term this node leads the partition in, ready to serve reads or not (raises when it does
        not lead it)."""
        ...


Key = tuple[str, str]  # (group, instance_id)


@dataclass
class _Session:
    """Soft state of one coordinator partition, valid while this node leads it in ``term``."""

    term: int
    last_seen_ms: dict[Key, int] = field(default_factory=dict)
    reads: dict[Key, dict[int, int]] = field(default_factory=dict)  # reads in progress: id -> deadline
    positions: dict[Key, dict[TopicPartition, int]] = field(default_factory=dict)
    committed: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    end_offsets: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)

    def reading(self, key: Key, now: int) -> bool:
        """Whether a read of the member is in progress (reads past their deadline are dropped)."""
        reads = self.reads.get(key)
        if not reads:
            return False
        for read_id in [r for r, deadline in reads.items() if deadline <= now]:
            del reads[read_id]
        return bool(reads)

    def reassigned(self, name: str, group: Group | None) -> None:
        """Every assignment change is proposed by this leader, so it sees each one: a member's positions
        of partitions it lost are dropped at once, and a partition that comes back to it later starts
        from the committed offset again (as in Kafka), never from a position it had before."""
        for key in [k for k in self.positions if k[0] == name]:
            kept = set(group.assignment.get(key[1], ())) if group is not None else set()
            self.positions[key] = {tp: o for tp, o in self.positions[key].items() if tp in kept}

    def forget(self, key: Key, group_left: Group | None) -> None:
        """A member left; with its group gone or empty too, the group's offsets seen."""
        self.last_seen_ms.pop(key, None)
        self.reads.pop(key, None)
        self.positions.pop(key, None)
        if group_left is None or not group_left.members:
            for seen in (self.committed, self.end_offsets):
                for stale in [k for k in seen if k[0] == key[0]]:
                    del seen[stale]


@dataclass(frozen=True, slots=True)
class InstanceView:
    """What a consumer instance call needs: the group as committed, and this member in it."""

    group: Group
    member: ConsumerInstance

    @property
    def generation(self) -> int:
        return self.group.generation

    @property
    def assigned(self) -> tuple[TopicPartition, ...]:
        return tuple(self.group.assignment.get(self.member.instance_id, ()))


class GroupCoordinator:
    """Serves the groups whose coordinator partition this node leads; everything else raises NotLeader.
    Event-loop only. ``monotonic`` times sessions; ``wall`` stamps replicated commands (informational)."""

    def __init__(
        self,
        group_log: GroupLog,
        *,
        monotonic: Callable[[], int] = monotonic_ms,
        wall: Callable[[], int] = wall_clock_ms,
        rng: random.Random | None = None,
        topics: Callable[[], Collection[str]] = tuple,
        features: Features | None = None,
        consumer_session_timeout_ms: int = CONSUMER_SESSION_TIMEOUT_MS_DEFAULT,
        consumer_regex_budget_ms: int = REGEX_RESOLVE_BUDGET_MS_DEFAULT,
        consumer_migration_policy: str = MIGRATION_POLICY_DEFAULT,
        share_groups_max: int = SHARE_GROUPS_MAX_DEFAULT,
        classic_initial_delay_ms: int = INITIAL_DELAY_MS_DEFAULT,
    ) -> None:
        """``features``: the gate before a format the previous release cannot read (None: every one);
        the consumer protocol's session timeout, regex budget and migration policy, the share groups a
        coordinator partition holds at most, and a classic group's initial rebalance delay (``raftlog
        serve --group-*``)."""
        self._log = group_log
        # every topic there is, an object replaced whole when they change (regex subscriptions match them)
        self.topics = topics
        self.features = features
        self._monotonic = monotonic
        self.wall = wall  # stamps the commands proposed
        self._rng = rng or random.Random()
        self._sessions: dict[int, _Session] = {}
        self._read_ids = itertools.count(1)
        self._full_logged_ms: int | None = None  # when a refused join was last logged
        self._full_unlogged = 0  # joins refused since
        # the consumer group protocol's groups (KIP-848), kept in the same table
        self.consumer = ConsumerGroupCoordinator(
            ConsumerTable(self),
            monotonic,
            session_timeout_ms=consumer_session_timeout_ms,
            regex_budget_ms=consumer_regex_budget_ms,
            migration_policy=consumer_migration_policy,
        )
        # streams groups (KIP-1071), kept in the same table
        self.streams = StreamsGroupCoordinator(ConsumerTable(self), monotonic)
        # the groups run in memory, share and classic, in one map by name (``held_map``)
        self.held = held = HeldMap()
        # share groups' membership (KIP-932): the coordinator's soft state (``share.coordinator``)
        self.share = ShareGroupCoordinator(
            ConsumerTable(self), monotonic, groups_max=share_groups_max, held=held
        )
        # Kafka's classic groups, whose members live in memory between writes of their metadata (the
        # Kafka door translates its JoinGroup, SyncGroup, Heartbeat and LeaveGroup to them)
        self.classic = ClassicGroups(ClassicTable(self), initial_delay_ms=classic_initial_delay_ms, held=held)
        # the classic protocol's calls, to the classic groups or, as classic members, a consumer group's
        self.classic_calls = ClassicCalls(self.classic, self.consumer, self.readable)

    def live(self, group: str, recorded: bool = False) -> LiveGroup | None:
        """The group's classic members as ``classic`` holds them; None when it has none. ``recorded``
        (a description): as the table holds them while this coordinator has not loaded them yet."""
        found = self.classic.live(group, recorded)
        return found if found is not None and found.members else None

    def live_names(self) -> list[str]:
        return [n for n in self.classic.names() if self.live(n) is not None]

    # -- routing ---------------------------------------------------------------------------------------

    async def ensure_topic(self, led: str | None = None) -> None:
        """Create the coordinator partitions' topic if there is none yet (every front door's groups live
        in it: as many partitions as this node was configured with); with ``led``, a group: then
        NotLeader, naming where to go, unless this node coordinates it now."""
        await self._log.ensure_topic()
        if led is not None:
            self.read(led, made=True)

    def coordinator_partition(self, group: str) -> int:
        return partition_for_key(group.encode("utf-8", "surrogatepass"), self._log.partitions())

    def _session(self, partition: int, term: int) -> _Session:
        session = self._sessions.get(partition)
        if session is None or session.term != term:
            session = _Session(term)  # a new term here: soft state starts over, sessions start afresh
            self._sessions[partition] = session
        return session

    def read(self, group: str, made: bool = False) -> tuple[int, GroupTable, _Session]:
        """The group's coordinator partition, its table and soft state (NotLeader unless this node leads
        it; UnknownConsumerInstance while there is no coordinator topic). ``made``: the topic was made just
        before (``ensure_topic``, here or through another node), so one this node's metadata has not
        applied yet is NoLeader, which both doors answer as a coordinator to ask again (503,
        COORDINATOR_LOAD_IN_PROGRESS), as while its partitions elect their first leaders; never an
        instance that does not exist (a loaded node answered an instance's creation "no instance '*'")."""
        try:
            partition = self.coordinator_partition(group)
        except UnknownTopic:
            if made:
                raise NoLeader(GROUPS_TOPIC) from None
            raise UnknownConsumerInstance(group, "*") from None
        table, term = self._log.table(partition)
        return partition, table, self._session(partition, term)

    def _instance(self, group: str, instance_id: str) -> tuple[int, InstanceView, _Session]:
        """The member, with its session touched (any instance call is a heartbeat)."""
        try:
            partition, table, session = self.read(group)
        except UnknownConsumerInstance:
            raise UnknownConsumerInstance(group, instance_id) from None
        current = table.groups.get(group)
        member = None if current is None else current.members.get(instance_id)
        if current is None or member is None:
            raise UnknownConsumerInstance(group, instance_id)
        session.last_seen_ms[(group, instance_id)] = self._monotonic()
        return partition, InstanceView(current, member), session

    async def propose(self, partition: int, command: GroupCommand) -> Group | None:
        """The command proposed to the partition and applied: the group as it leaves it (None: gone); a
        refusal raised."""
        result = await self._log.propose(partition, command)
        if isinstance(result, Exception):
            raise result
        check(isinstance(result, GroupChanged), f"group command returned {result!r}")
        session = self._sessions.get(partition)
        if session is not None:
            session.reassigned(result.name, result.group)
        return result.group

    # -- instances -------------------------------------------------------------------------------------

    async def create_instance(
        self, group: str, name: str | None, config: InstanceConfig = DEFAULT_INSTANCE, client_host: str = ""
    ) -> ConsumerInstance:
        check_group_name(group)
        if name is not None:
            check_instance_name(name, "name")
        instance_id = name if name is not None else f"rest-consumer-{self._rng.getrandbits(64):016x}"
        member = ConsumerInstance.created(instance_id, config, self.wall(), client_host)
        gate = SCHEMA_CONSUMERS  # a node of 0.1.0 could not apply the Join of such an instance
        if member.format in SCHEMA_FORMATS and self.features is not None and not self.features.allows(gate):
            what = f"a consumer instance of format {member.format}"
            raise FeatureNotFinalized(what, gate.feature, gate.level)
        await self.ensure_topic()
        partition, table, session = self.read(group, made=True)
        current = table.groups.get(group)
        self.check_type(group, GroupType.HTTP)  # one group, one protocol
        try:
            if current is not None and len(current.members) >= GROUP_MEMBERS_MAX:
                raise GroupFull(group, GROUP_MEMBERS_MAX)
            # counted again when applied: joins proposed together all passed the check above
            await self.propose(partition, Join(group, member, config.assignor, GROUP_MEMBERS_MAX))
        except GroupFull as full:
            self._log_full(full)
            raise
        session.last_seen_ms[(group, instance_id)] = self._monotonic()
        return member

    def _log_full(self, full: GroupFull) -> None:
        """One line per ``GROUP_FULL_LOG_INTERVAL_MS`` at most, however many joins are refused."""
        now = self._monotonic()
        self._full_unlogged += 1
        if self._full_logged_ms is not None and now - self._full_logged_ms < GROUP_FULL_LOG_INTERVAL_MS:
            return
        log.warning(
            "refused %d consumer instance(s) joining a full group (latest: %s)", self._full_unlogged, full
        )
        self._full_logged_ms, self._full_unlogged = now, 0

    async def delete_instance(self, group: str, instance_id: str) -> None:
        partition, _, session = self._instance(group, instance_id)
        left = await self.propose(partition, Leave(group, instance_id, self.wall()))
        session.forget((group, instance_id), left)

    async def subscribe(self, group: str, instance_id: str, topics: Sequence[str]) -> Group | None:
        if len(topics) > SUBSCRIBED_TOPICS_MAX:
            raise InvalidConsumerConfig(f"topics: at most {SUBSCRIBED_TOPICS_MAX}")
        partition, view, _ = self._instance(group, instance_id)
        wanted = tuple(sorted(set(topics)))
        if wanted == view.member.topics:
            return view.group
        counts = {t: self._log.partition_count(t) for t in wanted}
        return await self.propose(partition, Subscribe(group, instance_id, wanted, counts, self.wall()))

    async def heartbeat(self, group: str, instance_id: str) -> InstanceView:
        """Touch the member's session; reassign first if a subscribed topic appeared, vanished or grew."""
        partition, view, _ = self._instance(group, instance_id)
        counts = {t: self._log.partition_count(t) for t in view.group.topics()}
        if counts != dict(view.group.partition_counts):
            await self.propose(partition, Refresh(group, counts, self.wall()))
            partition, view, _ = self._instance(group, instance_id)
        return view

    def view(self, group: str, instance_id: str) -> InstanceView:
        return self._instance(group, instance_id)[1]

    def begin_read(self, group: str, instance_id: str, wait_ms: int) -> int:
        """A read of the member begins (anywhere in the cluster) and may last ``wait_ms`` (plus
        ``READ_GRACE_MS``): the member is alive until ``end_read`` or that deadline. Its id, for
        ``end_read``."""
        _, _, session = self._instance(group, instance_id)
        read_id = next(self._read_ids)
        deadline = self._monotonic() + max(0, wait_ms) + READ_GRACE_MS
        session.reads.setdefault((group, instance_id), {})[read_id] = deadline
        return read_id

    def end_read(self, group: str, instance_id: str, read_id: int) -> None:
        """The read ended (a read this leader does not know, begun before a failover, is ignored)."""
        _, _, session = self._instance(group, instance_id)
        session.reads.get((group, instance_id), {}).pop(read_id, None)

    # -- positions -------------------------------------------------------------------------------------

    def positions(self, group: str, instance_id: str) -> dict[TopicPartition, int]:
        """Next offset to read of each assigned partition that has one (soft state); positions of
        partitions no longer assigned are dropped."""
        _, view, session = self._instance(group, instance_id)
        known = session.positions.setdefault((group, instance_id), {})
        assigned = set(view.assigned)
        for tp in [tp for tp in known if tp not in assigned]:
            del known[tp]
        return dict(known)

    def seek(self, group: str, instance_id: str, offsets: dict[TopicPartition, int]) -> None:
        _, view, session = self._instance(group, instance_id)
        for tp in offsets:
            if tp not in view.assigned:
                raise PartitionNotAssigned(group, instance_id, tp.topic, tp.partition, view.generation)
        session.positions.setdefault((group, instance_id), {}).update(offsets)

    def advance(self, group: str, instance_id: str, tp: TopicPartition, offset: int) -> bool:
        """Move a position after a fetch; False (nothing moved) when the partition left this member
        meanwhile (a rebalance): its records must not be handed out by this member."""
        _, view, session = self._instance(group, instance_id)
        if tp not in view.assigned:
            return False
        session.positions.setdefault((group, instance_id), {})[tp] = offset
        return True

    # -- commits ---------------------------------------------------------------------------------------

    def check_assigned(
        self, group: str, instance_id: str, generation: int | None, partitions: Sequence[TopicPartition]
    ) -> InstanceView:
        """Fencing: raise unless every partition is assigned to this instance in the current generation
        (and ``generation``, when given, is the current one)."""
        _, view, _ = self._instance(group, instance_id)
        if generation is not None and generation != view.generation:
            raise StaleGeneration(group, instance_id, generation, view.generation)
        for tp in partitions:
            if tp not in view.assigned:
                raise PartitionNotAssigned(group, instance_id, tp.topic, tp.partition, view.generation)
        return view

    def note_committed(self, group: str, tp: TopicPartition, offset: int) -> None:
        """Remember a committed offset seen here, for lag (soft state; ignored when not led here)."""
        with contextlib.suppress(RaftlogError):
            _, _, session = self.read(group)
            session.committed[(group, tp)] = offset

    def note_end_offset(self, group: str, tp: TopicPartition, offset: int) -> None:
        with contextlib.suppress(RaftlogError):
            _, _, session = self.read(group)
            session.end_offsets[(group, tp)] = offset

    # -- what either door records ----------------------------------------------------------------------

    async def record_commit(self, group: str, topics: Sequence[str]) -> None:
        """The group commits offsets of ``topics``: recorded (once per topic) so that the group is listed
        and its offsets found once its members are gone."""
        check_group_name(group)
        await self.ensure_topic()
        partition, table, _ = self.read(group, made=True)
        current = table.groups.get(group)
        if current is None or not set(topics) <= set(current.committed_topics):
            await self.propose(partition, Committed(group, tuple(sorted(set(topics))), self.wall()))

    def recorded(self, group: str) -> Recorded | None:
        """The group as the table holds it and the term this node leads its partition in; None when
        the partition is not led here (or there is none yet)."""
        try:
            partition = self.coordinator_partition(group)
            table, term = self._log.table(partition)
        except RaftlogError:
            return None
        return Recorded(term, table.groups.get(group))

    async def readable(self, group: str) -> None:
        """Once this node may read the table of the group's partition, when it leads the partition but may
        not read it this moment (its term's first entry not applied yet, or its leadership not confirmed
        since its Raft thread stood still): waited for a moment as a leader's reads wait, so that the
        first heartbeat after an election, or after a stall under load, is answered and not refused
        NOT_COORDINATOR. At once when it may, or when another node leads the partition. Still not after
        the wait: ``NoLeader``, which the doors answer as Kafka's coordinator answers while it loads
        (COORDINATOR_LOAD_IN_PROGRESS: asked again, of the same node); ``NotLeader`` when the leadership
        moved meanwhile (NOT_COORDINATOR: looked up again)."""
        if self.recorded(group) is not None or self.leader_term(group) is None:
            return
        await self._log.readable(self.coordinator_partition(group))

    def leader_term(self, group: str) -> int | None:
        """The term this node leads the group's partition in, whether or not it may read its table this
        moment; None when it does not lead it."""
        try:
            return self._log.leader_term(self.coordinator_partition(group))
        except RaftlogError:
            return None

    def check_type(self, group: str, asking: GroupType | None) -> None:
        """Refused (``group_types.refusal``) when a protocol other than ``asking`` holds the group (``asking``
        None: any protocol), as this node sees it now (the group not coordinated here: as free)."""

        def share() -> int:
            held = self.share.members_of(group)
            return 0 if held is None else len(held.members)

        recorded = self.recorded(group)
        table = None if recorded is None else recorded.group
        check_type(group, asking, Holders.of(table, self.live(group), share))

    def check_empty(self, group: str) -> Group:
        """The recorded group, when no member of either door is live (GroupNotEmpty otherwise;
        UnknownGroup when there is no such group)."""
        current, _ = self.describe(group)
        self.check_type(group, None)
        return current

    async def forget(self, group: str) -> None:
        """Delete the group (empty: ``check_empty``); its offsets are the caller's to delete first."""
        partition, _, _ = self.read(group)
        await self.propose(partition, Forget(group))
        self.classic.forget(group)

    # -- sessions --------------------------------------------------------------------------------------

    async def expire_due(self, led: Sequence[tuple[int, _Session, str, Group]] | None = None) -> list[Key]:
        """Propose the eviction of members whose session timed out in a partition led here (``led``: every
        group led here, as the sweep read them; None: read here)."""
        expired: list[Key] = []
        now = self._monotonic()
        for partition, session, name, group in self.led_groups() if led is None else led:
            if not group.members:  # empty: forgotten once it stayed so for the retention
                holders = Holders.of(group, self.live(name), functools.partial(len, group.share_members))
                if held_by(holders, None) is not None:  # Kafka's or a share group's members hold it
                    continue
                empty_for = self.wall() - group.changed_ms
                if empty_for >= EMPTY_GROUP_RETENTION_MS:
                    log.info(
                        "group %s: empty for %d days; forgotten", name, EMPTY_GROUP_RETENTION_MS // 86_400_000
                    )
                    await self.propose(partition, Expire(name, (), self.wall()))
                elif empty_for >= EMPTY_UNCOMMITTED_RETENTION_MS and self._forgets_uncommitted(group):
                    log.info(
                        "group %s: empty for %d s without a committed offset; forgotten",
                        name,
                        empty_for // 1000,
                    )
                    await self.propose(partition, Expire(name, (), self.wall(), uncommitted=True))
                    self.classic.forget(name)  # an empty classic group it held in memory
                continue
            due = []
            for instance_id, member in group.members.items():
                key = (name, instance_id)
                last = session.last_seen_ms.setdefault(key, now)  # first sight after a failover
                if not session.reading(key, now) and now - last > member.session_timeout_ms:
                    due.append(instance_id)
            if not due:
                continue
            log.info("group %s: session of %s timed out; rebalancing", name, ", ".join(sorted(due)))
            left = await self.propose(partition, Expire(name, tuple(due), self.wall()))
            for instance_id in due:
                session.forget((name, instance_id), left)
                expired.append((name, instance_id))
        return expired

    def _forgets_uncommitted(self, group: Group) -> bool:
        """An empty group that never committed an offset is forgotten early (Kafka's cleanup of a group
        without offsets), once the cluster's feature level lets the table read the Expire that says so;
        a share group never so (Kafka never expires one)."""
        if group.committed_topics or group.protocol_type == SHARE_PROTOCOL_TYPE:
            return False
        return self.features is None or self.features.allows(EXPIRE_UNCOMMITTED)

    def led_groups(self) -> Iterator[tuple[int, _Session, str, Group]]:
        """Every group of every coordinator partition led here, with the partition's soft state. Each
        table's groups are copied at once: the driver thread applies to it meanwhile."""
        for partition in self._log.led_partitions():
            try:
                table, term = self._log.table(partition)
            except ConsensusError:
                continue
            session = self._session(partition, term)
            for name, group in list(table.groups.items()):
                yield partition, session, name, group

    async def run(self, interval_s: float = SWEEP_INTERVAL_S, tick_s: float = CLASSIC_TICK_S) -> None:
        """The groups' clocks on a node: the eviction sweep and the classic groups' tick (cancelled when
        the node closes, and the regex thread with them). Apart, so that a sweep waiting on a write
        holds up no classic group's rebalance."""

        async def tick_classic() -> None:
            """Classic groups' sessions and rebalance deadlines run on the clock, not only on requests;
            a coordinator taking over loads its groups here. While it holds none, it ticks only to look
            for groups to adopt, or when one is made (every wakeup is CPU an idle node spends)."""
            while True:
                if self.classic.groups:
                    await asyncio.sleep(tick_s)
                else:
                    await self.classic.idle(self._monotonic())
                try:
                    self.classic.tick(self._monotonic())
                except Exception:  # a bug: logged loudly with its traceback; the next tick goes on
                    log.exception("classic group tick failed")

        try:
            await asyncio.gather(self._sweep(interval_s), tick_classic())
        finally:
            self.consumer.regexes.close()

    async def _sweep(self, interval_s: float) -> None:
        while True:
            try:  # every group led here read once, each protocol sweeping its own
                led = list(self.led_groups())
                await self.expire_due(led)
                await self.consumer.expire_due([(n, s.term) for _, s, n, g in led if g.consumer is not None])
                await self.streams.expire_due([(n, s.term) for _, s, n, g in led if g.streams is not None])
                await self.share.expire_due([(n, s.term) for _, s, n, g in led if g.share_members])
            except RaftlogError as exc:  # lost leadership mid-way, no quorum: the next sweep retries
                log.info("group session sweep: %s", exc)
            await asyncio.sleep(interval_s)

    # -- admin -----------------------------------------------------------------------------------------

    def describe(self, group: str) -> tuple[Group, dict[str, dict[TopicPartition, int]]]:
        """The group as committed and its members' positions (soft state). Raises UnknownGroup."""
        try:
            _, table, session = self.read(group)
        except UnknownConsumerInstance:
            raise UnknownGroup(group) from None
        current = table.groups.get(group)
        if current is None:
            kafka = self.live(group)
            if kafka is None:
                raise UnknownGroup(group)
            # a Kafka group before its first generation is recorded
            current = Group(group, kafka.protocol, kafka.generation, {}, {}, {}, 0, kafka.protocol_type)
        positions = {
            instance_id: dict(session.positions.get((group, instance_id), {}))
            for instance_id in current.members
        }
        return current, positions

    def groups_of(self, partition: int) -> list[Group]:
        """Every group a coordinator partition led here holds (NotLeader otherwise)."""
        table, _ = self._log.table(partition)
        return sorted(list(table.groups.values()), key=lambda g: g.name)  # copied at once (see metrics)

    def partitions(self) -> int:
        return self._log.partitions()

    def partition_count(self, topic: str) -> int:
        """Partitions of a data topic; 0 when it does not exist."""
        return self._log.partition_count(topic)

    def metrics(self) -> dict[str, float]:
        """Per group led here (either door's): members and generation; per partition assigned to an HTTP
        member: lag (from the end and committed offsets seen lately), labelled by group, topic and
        partition."""
        values: dict[str, float] = {}
        for _, session, name, group in self.led_groups():
            if not _label_safe(name):
                continue
            kafka = self.live(name)  # a group of Kafka clients: its members and generation live there
            members, generation = (
                (len(kafka.members), kafka.generation) if kafka else (len(group.members), group.generation)
            )
            values[f'consumer_group_members{{group="{name}"}}'] = members
            values[f'consumer_group_generation{{group="{name}"}}'] = generation
            for tps in group.assignment.values():  # each partition is one member's: no member label,
                # whose random instance ids would pile up series
                for tp in tps:
                    if not _label_safe(tp.topic):
                        continue
                    committed = session.committed.get((name, tp))
                    end = session.end_offsets.get((name, tp))
                    if committed is None or end is None:
                        continue
                    labels = f'group="{name}",topic="{tp.topic}",partition="{tp.partition}"'
                    values[f"consumer_group_lag{{{labels}}}"] = max(0, end - committed)
        return values


def _label_safe(value: str) -> bool:
    return not any(c in value for c in '"\\\n')
