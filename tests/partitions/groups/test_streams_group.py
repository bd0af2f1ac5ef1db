"""The streams group protocol (KIP-1071) as a pure state machine, and its coordinator over the real group
table with a test clock: Kafka's request rules in Kafka's words, the topology set by the first member and
never changed under it, tasks given only once configured, revoked before another member gets them, never
run by two members at once, sessions that fence, a new leader term that keeps every member, commits checked
by member epoch, and one group one protocol."""

from __future__ import annotations

import asyncio
import random

import msgpack
import pytest

from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator
from partitions.groups.consumer.group import ConsumerGroup, Heartbeat
from partitions.groups.errors import (
    ConsumerProtocolVersion,
    FencedMemberEpoch,
    GroupNotEmpty,
    InvalidGroupRequest,
    InvalidTopology,
    NotConsumerGroup,
    NotStreamsGroup,
    StaleMemberEpoch,
    UnknownGroup,
    UnknownMember,
)
from partitions.groups.group_commands import (
    ConsumerGroupRecord,
    Forget,
    KafkaGeneration,
    StreamsGroupRecord,
    decode,
    encode,
)
from partitions.groups.group_model import Group
from partitions.groups.live import LiveGroup
from partitions.groups.state import GroupTable
from partitions.groups.streams.coordinator import StreamsGroupCoordinator
from partitions.groups.streams.group import StreamsGroup, StreamsHeartbeat, fence, heartbeat
from partitions.groups.streams.reconcile import EMPTY, Tasks
from partitions.groups.streams.topology import (
    ASSIGNMENT_DELAYED,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    STALE_TOPOLOGY,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)

COMPACT = (("cleanup.policy", "compact"),)
# a word count: lines -> (re-key) repartition topic -> counts, with a store and its changelog
TOPOLOGY = StreamsTopology(
    0,
    (
        Subtopology("0", ("lines",), ("app-repartition",)),
        Subtopology(
            "1",
            (),
            (),
            (TopicInfo("app-store-changelog", 0, 0, COMPACT),),
            (TopicInfo("app-repartition"),),
        ),
    ),
)
INTERNAL = {"app-repartition", "app-store-changelog"}


def _join(member: str, process: str, topology: StreamsTopology = TOPOLOGY) -> StreamsHeartbeat:
    return StreamsHeartbeat(
        "app", member, 0, rebalance_timeout_ms=10_000, topology=topology, process_id=process, owned=EMPTY
    )


def _beat(group: StreamsGroup, member: str, owned: Tasks | None = None) -> StreamsHeartbeat:
    m = group.members[member]
    return StreamsHeartbeat("app", member, m.epoch, owned=m.assigned if owned is None else owned)


def _counts(topics: dict[str, int]):  # type: ignore[no-untyped-def]
    return lambda topic: topics.get(topic)


def _all_active(group: StreamsGroup) -> list[tuple[str, int]]:
    return sorted(
        t for m in group.members.values() for tasks in (m.assigned, m.revoking) for t in tasks.active
    )


@pytest.mark.parametrize(
    ("hb", "words"),
    [
        (
            StreamsHeartbeat("app", "", 0, rebalance_timeout_ms=1, topology=TOPOLOGY),
            "MemberId can't be empty.",
        ),
        (StreamsHeartbeat("", "m", 0, rebalance_timeout_ms=1, topology=TOPOLOGY), "GroupId can't be empty."),
        (
            StreamsHeartbeat("app", "m", 0, topology=TOPOLOGY),
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            StreamsHeartbeat("app", "m", 0, rebalance_timeout_ms=1, owned=EMPTY),
            "Topology must be non-null when (re-)joining.",
        ),
        (  # null task lists, as Kafka 4.4 refuses them (asked raw)
            StreamsHeartbeat("app", "m", 0, rebalance_timeout_ms=1, topology=TOPOLOGY),
            "ActiveTasks must be empty when (re-)joining.",
        ),
        (
            StreamsHeartbeat(
                "app", "m", 0, rebalance_timeout_ms=1, topology=TOPOLOGY, owned=Tasks(frozenset({("0", 0)}))
            ),
            "ActiveTasks must be empty when (re-)joining.",
        ),
        (
            StreamsHeartbeat("app", "m", 3, topology=TOPOLOGY),
            "Topology can only be provided when (re-)joining.",
        ),
        (StreamsHeartbeat("app", "m", -3), "MemberEpoch is -3, but must be greater than or equal to -2."),
        (StreamsHeartbeat("app", "m", -2), "InstanceId can't be null."),
        (
            StreamsHeartbeat("app", "m", 0, rebalance_timeout_ms=1, topology=TOPOLOGY, regexes=True),
            "Regular expressions for source topics are not supported yet.",
        ),
    ],
)
def test_a_heartbeat_breaking_kafkas_rules_is_refused_in_kafkas_words(
    hb: StreamsHeartbeat, words: str
) -> None:
    with pytest.raises(InvalidGroupRequest) as refused:
        heartbeat(StreamsGroup("app"), hb, _counts({}))
    assert str(refused.value) == words


def test_a_topology_or_member_past_what_a_group_may_hold_is_refused_and_nothing_is_kept() -> None:
    huge = StreamsTopology(
        0, tuple(Subtopology(str(i), (f"topic-{i:06d}-" + "x" * 180,)) for i in range(6_000))
    )
    with pytest.raises(InvalidGroupRequest, match="past the 1048576 bytes a streams group may hold"):
        heartbeat(StreamsGroup("app"), _join("a", "p1", huge), _counts({}))
    tags = tuple((f"tag-{i}", "v" * 200) for i in range(100))
    with pytest.raises(InvalidGroupRequest, match="past the 4096 bytes a streams group member may hold"):
        heartbeat(
            StreamsGroup("app"),
            StreamsHeartbeat(
                "app", "a", 0, rebalance_timeout_ms=1, topology=TOPOLOGY, client_tags=tags, owned=EMPTY
            ),
            _counts({}),
        )


def test_the_last_member_fenced_leaves_the_empty_target_at_the_new_epoch() -> None:
    """As Kafka 4.4's ``streamsGroupFenceMember`` writes the target assignment metadata when the last
    member goes: an empty group's epochs are equal (``kafka-streams-groups --describe --state``)."""
    joined = heartbeat(StreamsGroup("app"), _join("a", "p1"), _counts({"lines": 1})).group
    empty = fence(joined, "a")
    assert not empty.members and empty.group_epoch == empty.assignment_epoch == joined.group_epoch + 1


def test_internal_topics_missing_are_named_to_create_and_tasks_come_once_they_exist() -> None:
    topics = {"lines": 3}
    first = heartbeat(StreamsGroup("app"), _join("a", "p1"), _counts(topics))
    assert first.tasks == Tasks() and first.group.state == "NotReady"
    assert [code for code, _ in first.status] == [MISSING_INTERNAL_TOPICS]
    # partitions inferred: the repartition topic from its writer, the changelog from its subtopology
    assert {(t.name, t.partitions, t.configs) for t in first.to_create} == {
        ("app-repartition", 3, ()),
        ("app-store-changelog", 3, COMPACT),
    }
    topics.update({name: 3 for name in INTERNAL})
    ready = heartbeat(first.group, _beat(first.group, "a"), _counts(topics))
    assert ready.status == () and ready.to_create == () and ready.group.state == "Stable"
    assert ready.tasks is not None and sorted(ready.tasks.active) == [(s, p) for s in "01" for p in range(3)]
    assert ready.member_epoch == ready.group.group_epoch == 2


def test_a_missing_source_topic_is_a_status_and_no_task() -> None:
    answer = heartbeat(StreamsGroup("app"), _join("a", "p1"), _counts({}))
    assert [code for code, _ in answer.status] == [MISSING_SOURCE_TOPICS]
    assert answer.tasks == Tasks() and answer.to_create == ()


def test_the_topology_is_the_first_members_a_stale_one_is_told_and_another_refused() -> None:
    newer = StreamsTopology(1, TOPOLOGY.subtopologies)
    group = heartbeat(StreamsGroup("app"), _join("a", "p1", newer), _counts({"lines": 1})).group
    stale = heartbeat(group, _join("b", "p2"), _counts({"lines": 1}))
    assert STALE_TOPOLOGY in [code for code, _ in stale.status]
    other = StreamsTopology(1, (Subtopology("0", ("lines",)),))
    with pytest.raises(InvalidGroupRequest, match=r"Topology updates are not supported yet\."):
        heartbeat(group, _join("c", "p3", other), _counts({"lines": 1}))


def test_a_topology_naming_an_unknown_changelog_partition_count_is_invalid() -> None:
    bad = StreamsTopology(0, (Subtopology("0", ("lines",), (), (TopicInfo("c", 2),)),))
    with pytest.raises(InvalidTopology, match="Changelog topic c must have an undefined partition count"):
        heartbeat(StreamsGroup("app"), _join("a", "p1", bad), _counts({"lines": 1}))


def test_tasks_move_to_a_joining_member_only_after_the_holder_revoked_them() -> None:
    topics = {"lines": 2, **{name: 2 for name in INTERNAL}}
    counts = _counts(topics)
    a = heartbeat(StreamsGroup("app"), _join("a", "p1"), counts)
    assert a.tasks is not None and len(a.tasks.active) == 4
    b = heartbeat(a.group, _join("b", "p2"), counts)
    assert b.tasks == Tasks()  # a still runs everything
    revoking = heartbeat(b.group, _beat(b.group, "a"), counts)
    member = revoking.group.members["a"]
    assert member.state == "unrevoked_tasks" and len(member.revoking.active) == 2
    assert _all_active(revoking.group) == sorted(t for s in "01" for t in [(s, 0), (s, 1)])
    # b asks again before a revoked: still nothing
    still = heartbeat(revoking.group, _beat(revoking.group, "b"), counts)
    assert still.group.members["b"].assigned == Tasks()
    done = heartbeat(still.group, _beat(still.group, "a", owned=member.assigned), counts)
    assert done.group.members["a"].state == "stable"
    given = heartbeat(done.group, _beat(done.group, "b"), counts)
    assert given.tasks is not None and given.tasks.active == member.revoking.active
    assert given.group.state == "Stable"


def test_random_heartbeats_never_have_two_members_run_one_task_and_settle_with_every_task_once() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        topics = {"lines": rng.randint(1, 6)}
        topics.update({name: topics["lines"] for name in INTERNAL})
        counts = _counts(topics)
        group = StreamsGroup("app")
        joined: list[str] = []
        for step in range(60):
            if len(joined) < 4 and rng.random() < 0.3:
                member = f"m{len(joined)}"
                group = heartbeat(group, _join(member, f"p{rng.randint(0, 2)}"), counts).group
                joined.append(member)
            elif joined:
                member = rng.choice(joined)
                m = group.members[member]
                released = rng.random() < 0.6
                owned = m.assigned if released else m.assigned.union(m.revoking)
                group = heartbeat(group, StreamsHeartbeat("app", member, m.epoch, owned=owned), counts).group
            active = _all_active(group)
            assert len(active) == len(set(active)), (seed, step)
        for _ in range(3 * len(joined) + 2):  # everyone heartbeats, having revoked: it settles
            for member in joined:
                group = heartbeat(group, _beat(group, member), counts).group
        assert group.state == "Stable", seed
        assert sorted(t for m in group.members.values() for t in m.assigned.active) == sorted(
            (s, p) for s in "01" for p in range(topics["lines"])
        )


def test_an_epoch_from_the_future_or_the_past_is_fenced() -> None:
    counts = _counts({"lines": 1, **{name: 1 for name in INTERNAL}})
    group = heartbeat(StreamsGroup("app"), _join("a", "p1"), counts).group
    with pytest.raises(FencedMemberEpoch):
        heartbeat(group, StreamsHeartbeat("app", "a", 7), counts)
    with pytest.raises(UnknownMember):
        heartbeat(group, StreamsHeartbeat("app", "z", 1), counts)


def test_the_group_round_trips_through_its_row_and_its_table_record() -> None:
    counts = _counts({"lines": 2, **{name: 2 for name in INTERNAL}})
    group = heartbeat(StreamsGroup("app"), _join("a", "p1"), counts).group
    group = heartbeat(group, _join("b", "p2"), counts).group
    assert StreamsGroup.from_row("app", msgpack.unpackb(msgpack.packb(group.to_row()))) == group
    extra = [*group.to_row(), "a field of a later release"]
    assert StreamsGroup.from_row("app", extra) == group
    record = StreamsGroupRecord("app", group, 5)
    assert decode(encode(record)) == record


# -- the coordinator over the real table ----------------------------------------------------------------


class Table:
    """One coordinator partition's table, led here in ``term``."""

    def __init__(self) -> None:
        self.table = GroupTable()
        self.term = 1
        self.topics = {"lines": 2, **{name: 2 for name in INTERNAL}}

    def recorded_group(self, name: str) -> tuple[int, Group | None] | None:
        return self.term, self.table.groups.get(name)

    async def readable(self, name: str) -> None:
        return None  # readable whenever led here

    def live(self, group: str) -> LiveGroup | None:
        return None

    def partition_count(self, topic: str) -> int:
        return self.topics.get(topic, 0)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def led_streams_groups(self) -> list[tuple[str, int, StreamsGroup]]:
        return [(n, self.term, g.streams) for n, g in self.table.groups.items() if g.streams is not None]

    def led_consumer_groups(self) -> list[tuple[str, int, ConsumerGroup]]:
        return [(n, self.term, g.consumer) for n, g in self.table.groups.items() if g.consumer is not None]

    async def record_streams(self, group: str, state: StreamsGroup) -> None:
        result = self.table.apply(encode(StreamsGroupRecord(group, state, 0)))
        if isinstance(result, Exception):
            raise result

    async def record_consumer(self, group: str, state: ConsumerGroup, converts: int | None = None) -> None:
        result = self.table.apply(encode(ConsumerGroupRecord(group, state, 0, converts)))
        if isinstance(result, Exception):
            raise result

    def classic_to_convert(self, group: str) -> None:
        return None  # this table's groups have no classic members to convert

    def drop_classic(self, group: str) -> None:
        raise AssertionError("no classic group to drop")

    async def record_downgrade(self, group: str, classic: object, converts: int) -> None:
        raise AssertionError("no classic member here: no group to downgrade")


def no_delay(group: str) -> dict[str, str]:
    """A group's configs: assigned at the first heartbeat, as Kafka's tests set
    ``group.streams.initial.rebalance.delay.ms`` 0."""
    return {"streams.initial.rebalance.delay.ms": "0"}


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_a_silent_member_is_fenced_after_its_session_and_a_new_term_keeps_every_member() -> None:
    async def scenario() -> None:
        table, clock = Table(), Clock()
        coordinator = StreamsGroupCoordinator(table, clock, no_delay)
        await coordinator.heartbeat(_join("a", "p1"))
        await coordinator.heartbeat(_join("b", "p2"))
        table.term = 2  # a failover: the table's group goes on, sessions start afresh
        clock.now = 40_000
        group = coordinator.describe("app")
        await coordinator.heartbeat(_beat(group, "a"))
        assert await coordinator.expire_due() == []  # b first seen in term 2 now
        clock.now = 40_000 + 45_001
        await coordinator.heartbeat(_beat(coordinator.describe("app"), "a"))
        assert await coordinator.expire_due() == [("app", "b")]
        assert set(coordinator.describe("app").members) == {"a"}

    asyncio.run(scenario())


def test_commits_and_fetches_of_its_members_are_checked_by_member_epoch() -> None:
    async def scenario() -> None:
        table, clock = Table(), Clock()
        coordinator = StreamsGroupCoordinator(table, clock, no_delay)
        a = await coordinator.heartbeat(_join("a", "p1"))
        assert coordinator.check_commit("app", "a", a.member_epoch, 9)
        with pytest.raises(StaleMemberEpoch):  # its task was given in its current epoch
            coordinator.check_commit("app", "a", a.member_epoch - 1, 9, partitions=[("lines", 0)])
        with pytest.raises(StaleMemberEpoch):
            coordinator.check_commit("app", "a", a.member_epoch + 1, 9)
        with pytest.raises(UnknownMember):
            coordinator.check_commit("app", "x", 1, 9)
        with pytest.raises(ConsumerProtocolVersion, match="streams group protocol"):
            coordinator.check_commit("app", "a", a.member_epoch, 8)
        assert coordinator.check_commit("app", "", -1, 3, transactional=True)  # no group metadata
        assert not coordinator.check_commit("other", "a", 1, 9)  # no such group: not this rule's
        with pytest.raises(StaleMemberEpoch):
            coordinator.check_fetch("app", "a", 99)
        coordinator.check_fetch("app", None, -1)  # an admin's

    asyncio.run(scenario())


def test_a_commit_of_an_older_epoch_passes_only_for_tasks_held_since_then() -> None:
    """Kafka 4.4's assignment epoch validator: a commit sent before the heartbeat that moved the member's
    epoch was answered still counts for the tasks it had then, not for those given since."""

    async def scenario() -> None:
        table, clock = Table(), Clock()
        table.topics = {"lines": 4, **{name: 4 for name in INTERNAL}}
        coordinator = StreamsGroupCoordinator(table, clock, no_delay)
        a = await coordinator.heartbeat(_join("a", "p1"))
        first = a.member_epoch
        await coordinator.heartbeat(_join("b", "p2"))
        group = coordinator.describe("app")
        kept = group.members["a"].assigned.active - group.target["b"].active  # a keeps these
        await coordinator.heartbeat(_beat(group, "a", owned=Tasks(kept)))  # a revoked the rest
        await coordinator.heartbeat(_beat(coordinator.describe("app"), "b"))
        group = coordinator.describe("app")
        assert group.members["b"].epoch > first and group.members["b"].assigned.active
        for subtopology, partition in sorted(kept):
            topic = "lines" if subtopology == "0" else "app-repartition"
            assert coordinator.check_commit("app", "a", first, 9, partitions=[(topic, partition)])
        given = sorted(group.members["b"].assigned.active)[0]
        topic = "lines" if given[0] == "0" else "app-repartition"
        with pytest.raises(StaleMemberEpoch):  # b got it in its new epoch, not in the first
            coordinator.check_commit("app", "b", first, 9, partitions=[(topic, given[1])])
        with pytest.raises(StaleMemberEpoch):  # a topic no subtopology reads
            coordinator.check_commit("app", "a", first, 9, partitions=[("elsewhere", 0)])
        assert StreamsGroup.from_row("app", msgpack.unpackb(msgpack.packb(group.to_row()))) == group

    asyncio.run(scenario())


def test_one_group_one_protocol_and_no_deletion_while_members_hold_it() -> None:
    async def scenario() -> None:
        table, clock = Table(), Clock()
        streams = StreamsGroupCoordinator(table, clock, no_delay)
        consumer = ConsumerGroupCoordinator(table, clock)  # type: ignore[arg-type]
        await streams.heartbeat(_join("a", "p1"))
        with pytest.raises(NotConsumerGroup):
            await consumer.heartbeat(
                "app", Heartbeat("", 0, None, None, 1_000, ("lines",), None, frozenset())
            )
        refused = table.table.apply(encode(Forget("app")))
        assert isinstance(refused, GroupNotEmpty)
        await consumer.heartbeat("plain", Heartbeat("", 0, None, None, 1_000, ("lines",), None, frozenset()))
        with pytest.raises(NotStreamsGroup, match="Group plain is not a streams group"):
            await streams.heartbeat(
                StreamsHeartbeat("plain", "s", 0, rebalance_timeout_ms=1, topology=TOPOLOGY)
            )
        # the last member gone, the group is empty and may be deleted
        await streams.heartbeat(StreamsHeartbeat("app", "a", -1))
        assert streams.describe("app").state == "Empty"
        assert not isinstance(table.table.apply(encode(Forget("app"))), Exception)

    asyncio.run(scenario())


def test_heartbeats_naming_groups_there_are_not_leave_nothing_behind_nor_a_deleted_group() -> None:
    async def scenario() -> None:
        table, clock = Table(), Clock()
        streams = StreamsGroupCoordinator(table, clock, no_delay)
        consumer = ConsumerGroupCoordinator(table, clock)  # type: ignore[arg-type]
        for i in range(200):
            with pytest.raises(UnknownGroup):
                await streams.heartbeat(StreamsHeartbeat(f"nope-{i}", "m", 3))
            with pytest.raises(UnknownGroup):
                await consumer.heartbeat(f"nope-{i}", Heartbeat("m", 3))
        assert streams._timers.names() == [] and consumer._timers.names() == []
        await streams.heartbeat(_join("a", "p1"))
        assert streams._timers.names() == ["app"]  # a group that is: its member's session kept
        await streams.heartbeat(StreamsHeartbeat("app", "a", -1))
        assert not isinstance(table.table.apply(encode(Forget("app"))), Exception)  # deleted
        await streams.expire_due()
        assert streams._timers.names() == [], "a deleted group's timers were kept"

    asyncio.run(scenario())


def coordinator_member(consumer: ConsumerGroupCoordinator, group: str) -> str:
    return next(iter(consumer.describe(group).members))


def test_an_empty_streams_group_stays_one_until_it_is_deleted() -> None:
    """As Kafka's: no member of another protocol takes an empty streams group (its topology stays with it);
    deleting it frees the name."""

    async def scenario() -> None:
        table, clock = Table(), Clock()
        streams = StreamsGroupCoordinator(table, clock, no_delay)
        consumer = ConsumerGroupCoordinator(table, clock)  # type: ignore[arg-type]
        await streams.heartbeat(_join("a", "p1"))
        await streams.heartbeat(StreamsHeartbeat("app", "a", -1))
        assert streams.describe("app").state == "Empty"
        with pytest.raises(NotConsumerGroup):
            await consumer.heartbeat(
                "app", Heartbeat("", 0, None, None, 1_000, ("lines",), None, frozenset())
            )
        empty_consumer = ConsumerGroup("app")
        refused = table.table.apply(encode(ConsumerGroupRecord("app", empty_consumer, 0)))
        assert isinstance(refused, GroupNotEmpty)  # the table refuses it too
        # a classic member may take it (Kafka converts an empty streams group to a classic one)
        again = StreamsGroupCoordinator(table, clock, no_delay)
        await again.heartbeat(_join("c", "p3"))
        await again.heartbeat(StreamsHeartbeat("app", "c", -1))
        assert not isinstance(
            table.table.apply(encode(KafkaGeneration("app", "consumer", "range", 1, 0))), Exception
        )
        assert table.table.groups["app"].streams is None
        assert not isinstance(table.table.apply(encode(Forget("app"))), Exception)
        # nor does a streams member take an empty consumer protocol group (Kafka's castToStreamsGroup)
        await consumer.heartbeat("plain", Heartbeat("", 0, None, None, 1_000, ("lines",), None, frozenset()))
        left = coordinator_member(consumer, "plain")
        await consumer.heartbeat("plain", Heartbeat(left, -1))
        assert consumer.describe("plain").state == "Empty"
        with pytest.raises(NotStreamsGroup):
            await streams.heartbeat(
                StreamsHeartbeat("plain", "s", 0, rebalance_timeout_ms=1, topology=TOPOLOGY)
            )
        joined = await consumer.heartbeat(
            "app", Heartbeat("", 0, None, None, 1_000, ("lines",), None, frozenset())
        )
        assert joined.member_epoch == 1

    asyncio.run(scenario())


def test_a_group_joined_empty_waits_its_initial_delay_then_assigns_every_member_that_joined() -> None:
    """Kafka 4.4's initial rebalance delay (``streams.initial.rebalance.delay.ms``, 3 s by default): the
    first member of an empty group gets no tasks and ASSIGNMENT_DELAYED, nor does a second joining within
    the delay; the first heartbeat after it spreads the tasks over both at once (no task given to one and
    moved to the other). A new term forgets the delay (as Kafka's timer goes with its coordinator)."""

    async def scenario() -> None:
        table, clock = Table(), Clock()
        table.topics = {"lines": 4, **{name: 4 for name in INTERNAL}}
        coordinator = StreamsGroupCoordinator(table, clock)  # the default delay: 3,000 ms
        first = await coordinator.heartbeat(_join("a", "p1"))
        assert (first.tasks, [code for code, _ in first.status]) == (EMPTY, [ASSIGNMENT_DELAYED])
        assert first.status[0][1] == "Assignment delayed due to the configured initial rebalance delay."
        clock.now = 2_999
        second = await coordinator.heartbeat(_join("b", "p2"))
        assert second.tasks == EMPTY and [code for code, _ in second.status] == [ASSIGNMENT_DELAYED]
        assert not _all_active(coordinator.describe("app"))
        assert (first.member_epoch, second.member_epoch) == (1, 2)  # the group's, as Kafka 4.4 answers
        clock.now = 3_000
        a = await coordinator.heartbeat(_beat(coordinator.describe("app"), "a"))
        b = await coordinator.heartbeat(_beat(coordinator.describe("app"), "b"))
        assert a.status == () and b.status == ()
        group = coordinator.describe("app")
        mine, theirs = group.members["a"].assigned.active, group.members["b"].assigned.active
        assert mine and theirs and not mine & theirs and not group.members["a"].revoking.active
        assert _all_active(group) == sorted(mine | theirs) and len(_all_active(group)) == 8

        slow = {"app": {"streams.initial.rebalance.delay.ms": "60000"}}
        again = StreamsGroupCoordinator(Table(), clock, lambda name: slow.get(name, {}))
        assert [c for c, _ in (await again.heartbeat(_join("a", "p1"))).status] == [ASSIGNMENT_DELAYED]
        assert await again.expire_due() == [] and again._delays  # running: kept
        clock.now += 60_000
        await again.expire_due()
        assert not again._delays, "an ended delay was kept"

    asyncio.run(scenario())
