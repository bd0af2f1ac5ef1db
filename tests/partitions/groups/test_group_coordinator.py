"""Consumer groups without I/O: the replicated group table (apply, codec, snapshot) and the coordinator
(sessions, rebalancing, fencing, failover) over an in-memory log and a hand-driven clock."""

from __future__ import annotations

import asyncio
import pathlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions import commands
from partitions.errors import InvalidCommand, UnknownTopic
from partitions.features import RAFTLOG_VERSION, Features
from partitions.groups.assignors import TopicPartition
from partitions.groups.classic.members import GroupCode, GroupRefusal
from partitions.groups.consumer.group import Heartbeat as ConsumerHeartbeat
from partitions.groups.coordinator import GROUP_FULL_LOG_INTERVAL_MS, READ_GRACE_MS, GroupCoordinator
from partitions.groups.errors import (
    ConsumerInstanceExists,
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
    GroupCommand,
    Join,
    Leave,
    Refresh,
    ShareGroupRecord,
    Subscribe,
    decode,
    encode,
)
from partitions.groups.group_model import (
    DEFAULT_READS,
    EMPTY_GROUP_RETENTION_MS,
    EMPTY_UNCOMMITTED_RETENTION_MS,
    ConsumerInstance,
    InstanceConfig,
    ReadConfig,
)
from partitions.groups.group_types import GroupType
from partitions.groups.share.group import ShareHeartbeat
from partitions.groups.state import GroupChanged, GroupResult, GroupTable
from partitions.replicas.state_machine import PartitionStateMachine
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.storage import Log, LogConfig
from tests.waiting import wait_until


def member(instance_id: str, topics: tuple[str, ...] = ()) -> ConsumerInstance:
    return ConsumerInstance(instance_id, "json", "earliest", 10_000, 5, topics)


def test_codec_round_trips_every_command() -> None:
    commands: list[GroupCommand] = [
        Join("g", member("a"), "round_robin"),
        Leave("g", "a", 7),
        Subscribe("g", "a", ("t", "u"), {"t": 3, "u": 0}, 8),
        Expire("g", ("a", "b"), 9),
        Refresh("g", {"t": 4}, 10),
    ]
    for command in commands:
        assert decode(encode(command)) == command
    with pytest.raises(InvalidCommand):
        decode(b"\x93\x01\x02")


def test_read_configs_ride_in_joins_and_snapshots_and_older_ones_read_as_defaults() -> None:
    reads = ReadConfig(
        fetch_min_bytes=-1, request_timeout_ms=250, auto_commit=True, auto_commit_interval_ms=0
    )
    joined = Join("g", ConsumerInstance("a", "binary", "latest", 10_000, 5, (), reads), "range")
    assert decode(encode(joined)) == joined
    older = msgpack.packb([1, "g", "a", "json", "earliest", 10_000, 5, "range"])  # a join before ReadConfig
    before = decode(older)
    assert isinstance(before, Join) and before.member.reads == DEFAULT_READS == ReadConfig()
    table = GroupTable()
    table.apply(encode(joined))
    assert GroupTable.from_rows(table.to_rows()).groups["g"].members["a"].reads == reads
    rows = table.to_rows()
    rows[0][3][0] = rows[0][3][0][:6]  # a member row of a snapshot written before ReadConfig
    assert GroupTable.from_rows(rows).groups["g"].members["a"].reads == DEFAULT_READS
    for bad in ({"fetch_min_bytes": -2}, {"request_timeout_ms": 60_001}, {"auto_commit_interval_ms": -1}):
        with pytest.raises(InvalidConsumerConfig):
            ReadConfig(**bad)
    with pytest.raises(InvalidCommand):  # a malformed read config in a join is a malformed command
        decode(msgpack.packb([1, "g", "a", "json", "earliest", 10_000, 5, "range", [1, 2]]))


def test_membership_changes_bump_the_generation_and_reassign() -> None:
    table = GroupTable()
    first = table.apply(encode(Join("g", member("a"), "range")))
    assert isinstance(first, GroupChanged) and first.group is not None and first.group.generation == 1
    table.apply(encode(Subscribe("g", "a", ("t",), {"t": 4}, 1)))
    table.apply(encode(Join("g", member("b"), "round_robin")))  # the group keeps its first assignor
    result = table.apply(encode(Subscribe("g", "b", ("t",), {"t": 4}, 2)))
    assert isinstance(result, GroupChanged) and result.group is not None
    group = result.group
    assert (group.generation, group.assignor) == (4, "range")
    assert group.assignment == {
        "a": (TopicPartition("t", 0), TopicPartition("t", 1)),
        "b": (TopicPartition("t", 2), TopicPartition("t", 3)),
    }
    assert isinstance(table.apply(encode(Join("g", member("a"), "range"))), ConsumerInstanceExists)
    assert isinstance(table.apply(encode(Leave("g", "zz", 3))), UnknownConsumerInstance)
    expired = table.apply(encode(Expire("g", ("a", "gone"), 4)))
    assert isinstance(expired, GroupChanged) and expired.removed == ("a",)
    assert expired.group is not None and expired.group.assignment["b"] == tuple(
        TopicPartition("t", p) for p in range(4)
    )
    snapshot = GroupTable.from_rows(table.to_rows())
    assert snapshot == table
    assert isinstance(table.apply(encode(Leave("g", "b", 5))), GroupChanged)
    empty = table.groups["g"]  # Kafka's Empty state: kept, with the topics it read, for describe and reset
    assert (empty.generation, empty.members, empty.assignment) == (6, {}, {})
    assert (empty.partition_counts, empty.changed_ms) == ({"t": 4}, 5)
    assert GroupTable.from_rows(table.to_rows()) == table
    rejoined = table.apply(encode(Join("g", member("c"), "round_robin")))  # an empty group takes its assignor
    assert isinstance(rejoined, GroupChanged) and rejoined.group is not None
    assert (rejoined.group.generation, rejoined.group.assignor) == (7, "round_robin")
    table.apply(encode(Leave("g", "c", 10)))
    kept = table.apply(encode(Expire("g", (), 10 + EMPTY_GROUP_RETENTION_MS - 1)))
    assert isinstance(kept, GroupChanged) and kept.group is table.groups["g"]  # not yet
    gone = table.apply(encode(Expire("g", (), 10 + EMPTY_GROUP_RETENTION_MS)))
    assert isinstance(gone, GroupChanged) and gone.group is None and table.groups == {}


class MemoryLog:
    """One coordinator partition per group-log partition, all led here unless ``leading`` says not."""

    def __init__(self, partitions: int = 2) -> None:
        self.tables = [GroupTable() for _ in range(partitions)]
        self.term = 1
        self.leading = True
        # led here but not readable yet (a leader just elected, its term's first entry not applied)
        self.unready = asyncio.Event()
        self.ready = asyncio.Event()
        self.waiting = 0  # heartbeats that waited for it
        self.topics: dict[str, int] = {}
        self.created = False

    def partitions(self) -> int:
        if not self.created:
            raise UnknownTopic("__consumer_groups")
        return len(self.tables)

    async def ensure_topic(self) -> None:
        self.created = True

    def table(self, partition: int) -> tuple[GroupTable, int]:
        term = self.leader_term(partition)
        if self.unready.is_set():
            raise NoLeader(f"__consumer_groups-{partition}")
        return self.tables[partition], term

    async def readable(self, partition: int) -> None:
        self.leader_term(partition)
        if self.unready.is_set():
            self.waiting += 1
            await self.ready.wait()  # the test says when the wait ends (the node's: 2 s at the most)
            if self.unready.is_set():
                raise NoLeader(f"__consumer_groups-{partition}")

    def leader_term(self, partition: int) -> int:
        if not self.leading:
            raise NotLeader(f"__consumer_groups-{partition}", "n2")
        return self.term

    def led_partitions(self) -> list[int]:
        return list(range(len(self.tables))) if self.leading and self.created else []

    async def propose(self, partition: int, command: GroupCommand) -> GroupResult:
        self.table(partition)
        return self.tables[partition].apply(encode(command))

    def partition_count(self, topic: str) -> int:
        return self.topics.get(topic, 0)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def log() -> MemoryLog:
    memory = MemoryLog()
    memory.topics["t"] = 4
    return memory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def coordinator(log: MemoryLog, clock: Clock) -> GroupCoordinator:
    return GroupCoordinator(log, monotonic=clock, wall=clock)


class LaggingLog(MemoryLog):
    """The coordinator topic made through another node (TopicExists there) and not yet applied to this
    node's metadata: ``ensure_topic`` returns, the topic stays unknown here until ``created``."""

    async def ensure_topic(self) -> None:
        return None


async def test_a_topic_made_but_not_known_here_yet_is_asked_again_never_an_instance_that_is_gone(
    clock: Clock,
) -> None:
    """What a loaded node answered an instance's creation ("no instance '*'", HTTP 404: the client was
    told to give up) is NoLeader now, which both doors answer as a coordinator to ask again (503,
    COORDINATOR_LOAD_IN_PROGRESS): the creation, a commit's record and a share member's call. An instance
    asked of a node with no coordinator topic at all is still one that does not exist."""
    lagging = LaggingLog()
    lagging.topics["t"] = 4
    coordinator = GroupCoordinator(lagging, monotonic=clock, wall=clock)
    with pytest.raises(UnknownConsumerInstance):
        coordinator.view("g", "a")
    with pytest.raises(NoLeader):
        await coordinator.create_instance("g", "a", InstanceConfig())
    with pytest.raises(NoLeader):
        await coordinator.record_commit("g", ["t"])
    with pytest.raises(NoLeader):
        await coordinator.ensure_topic(led="g")
    lagging.created = True  # the metadata applied it: asked again, the creation goes through
    assert (await coordinator.create_instance("g", "a", InstanceConfig())).instance_id == "a"
    assert coordinator.view("g", "a").member.instance_id == "a"


async def test_instances_share_partitions_and_commits_are_fenced(coordinator: GroupCoordinator) -> None:
    a = await coordinator.create_instance("g", "a", InstanceConfig(offset_reset="earliest"))
    with pytest.raises(ConsumerInstanceExists):
        await coordinator.create_instance("g", "a")
    await coordinator.subscribe("g", "a", ["t"])
    before = coordinator.view("g", a.instance_id)
    assert len(before.assigned) == 4
    await coordinator.create_instance("g", "b")
    await coordinator.subscribe("g", "b", ["t"])
    after = coordinator.view("g", "a")
    assert after.generation > before.generation and len(after.assigned) == 2
    assert len(coordinator.view("g", "b").assigned) == 2
    lost = next(tp for tp in before.assigned if tp not in after.assigned)
    with pytest.raises(StaleGeneration):
        coordinator.check_assigned("g", "a", before.generation, after.assigned)
    with pytest.raises(PartitionNotAssigned):
        coordinator.check_assigned("g", "a", None, [lost])
    checked = coordinator.check_assigned("g", "a", after.generation, after.assigned)
    assert checked.generation == after.generation
    assert not coordinator.advance("g", "a", lost, 5)
    with pytest.raises(PartitionNotAssigned):
        coordinator.seek("g", "a", {lost: 0})
    await coordinator.delete_instance("g", "b")
    with pytest.raises(UnknownConsumerInstance):
        coordinator.view("g", "b")
    assert len(coordinator.view("g", "a").assigned) == 4


async def test_a_group_whose_last_member_left_stays_empty_for_the_retention(
    coordinator: GroupCoordinator, clock: Clock
) -> None:
    await coordinator.create_instance("g", "a")
    await coordinator.subscribe("g", "a", ["t"])
    await coordinator.record_commit("g", ["t"])  # it committed an offset: kept for the whole retention
    await coordinator.delete_instance("g", "a")
    empty, positions = coordinator.describe("g")
    assert (empty.members, empty.partition_counts, positions) == ({}, {"t": 4}, {})
    clock.ms += EMPTY_GROUP_RETENTION_MS - 1
    assert await coordinator.expire_due() == [] and coordinator.describe("g")[0] == empty
    clock.ms += 1
    await coordinator.expire_due()  # empty for the whole retention: forgotten
    with pytest.raises(UnknownGroup):
        coordinator.describe("g")


async def test_an_empty_group_that_never_committed_is_forgotten_after_ten_minutes_as_kafka_cleans_it_up(
    coordinator: GroupCoordinator, clock: Clock
) -> None:
    """Kafka's cleanup (every offsets.retention.check.interval.ms, 10 minutes) deletes an empty group
    without offsets: a console consumer's group does not stay listed for the week a group with offsets
    stays."""
    await coordinator.create_instance("g", "a")
    await coordinator.subscribe("g", "a", ["t"])
    await coordinator.delete_instance("g", "a")
    clock.ms += EMPTY_UNCOMMITTED_RETENTION_MS - 1
    await coordinator.expire_due()
    assert coordinator.describe("g")[0].members == {}  # kept: not empty for 10 minutes yet
    clock.ms += 1
    await coordinator.expire_due()
    with pytest.raises(UnknownGroup):
        coordinator.describe("g")


async def test_the_early_forgetting_waits_for_the_feature_level_whose_expire_every_node_reads(
    log: MemoryLog, clock: Clock
) -> None:
    finalized = {RAFTLOG_VERSION: 1}  # a node of the release before reads no Expire with a fifth field
    coordinator = GroupCoordinator(log, monotonic=clock, wall=clock, features=Features(lambda: finalized))
    await coordinator.create_instance("g", "a")
    await coordinator.delete_instance("g", "a")
    clock.ms += EMPTY_UNCOMMITTED_RETENTION_MS
    await coordinator.expire_due()
    assert coordinator.describe("g")[0].members == {}  # kept, as the release before keeps it
    finalized[RAFTLOG_VERSION] = 2
    await coordinator.expire_due()
    with pytest.raises(UnknownGroup):
        coordinator.describe("g")


def test_an_expire_forgets_early_a_group_without_commits_empty_long_enough_but_no_share_group() -> None:
    table = GroupTable()
    table.apply(encode(Join("g", member("a"), "range")))
    table.apply(encode(Leave("g", "a", 100)))
    early = 100 + EMPTY_UNCOMMITTED_RETENTION_MS
    table.apply(encode(Expire("g", (), early - 1, uncommitted=True)))
    assert "g" in table.groups  # empty for less than 10 minutes
    table.apply(encode(Expire("g", (), early)))
    assert "g" in table.groups  # an Expire of the release before: the retention only
    table.apply(encode(Expire("g", (), early, uncommitted=True)))
    assert "g" not in table.groups
    table.apply(encode(Committed("c", ("t",), 100)))  # a group that committed: the retention only
    table.apply(encode(Expire("c", (), early, uncommitted=True)))
    assert "c" in table.groups
    table.apply(encode(Expire("c", (), 100 + EMPTY_GROUP_RETENTION_MS, uncommitted=True)))
    assert "c" not in table.groups
    table.apply(encode(ShareGroupRecord("s", 3, 100)))  # Kafka never expires a share group so
    table.apply(encode(Expire("s", (), early, uncommitted=True)))
    assert "s" in table.groups


def test_an_expire_s_fifth_field_is_written_only_when_it_says_something() -> None:
    plain, early = Expire("g", ("a",), 5), Expire("g", (), 5, uncommitted=True)
    assert len(msgpack.unpackb(encode(plain), raw=False)) == 4  # the release before's bytes
    assert decode(encode(plain)) == plain and decode(encode(early)) == early


async def test_bad_settings_are_refused_before_anything_is_replicated(
    coordinator: GroupCoordinator, log: MemoryLog
) -> None:
    for config in (
        {"format": "xml"},  # avro, jsonschema, protobuf: schema formats
        {"offset_reset": "none"},
        {"session_timeout_ms": 10},
        {"assignor": "x"},
    ):
        with pytest.raises(InvalidConsumerConfig):
            await coordinator.create_instance("g", None, InstanceConfig(**config))  # type: ignore[arg-type]
    assert all(not t.groups for t in log.tables)


async def test_a_silent_member_times_out_and_its_partitions_move(
    coordinator: GroupCoordinator, clock: Clock
) -> None:
    for name in ("a", "b"):
        await coordinator.create_instance("g", name, InstanceConfig(session_timeout_ms=5_000))
        await coordinator.subscribe("g", name, ["t"])
    clock.ms += 4_000
    coordinator.view("g", "a")  # a heartbeat
    read = coordinator.begin_read("g", "b", 30_000)  # a long poll keeps b alive past its timeout
    clock.ms += 4_000
    assert await coordinator.expire_due() == []
    coordinator.end_read("g", "b", read)
    clock.ms += 5_001
    coordinator.view("g", "b")
    assert await coordinator.expire_due() == [("g", "a")]
    assert len(coordinator.view("g", "b").assigned) == 4
    with pytest.raises(UnknownConsumerInstance):
        coordinator.view("g", "a")


async def test_a_read_keeps_its_member_alive_until_it_ends_or_its_deadline_passes(
    coordinator: GroupCoordinator, clock: Clock
) -> None:
    await coordinator.create_instance("g", "a", InstanceConfig(session_timeout_ms=5_000))
    await coordinator.subscribe("g", "a", ["t"])
    long_read = coordinator.begin_read("g", "a", 20_000)
    short_read = coordinator.begin_read("g", "a", 1_000)
    coordinator.end_read("g", "a", short_read)  # the other read still runs
    # the node doing the long read died: no end_read; the member lives until the read's deadline
    clock.ms += 20_000 + READ_GRACE_MS - 1
    assert await coordinator.expire_due() == []
    clock.ms += 2
    assert await coordinator.expire_due() == [("g", "a")]
    with pytest.raises(UnknownConsumerInstance):
        coordinator.end_read("g", "a", long_read)


async def test_a_new_leader_gives_every_member_a_fresh_session(
    coordinator: GroupCoordinator, log: MemoryLog, clock: Clock
) -> None:
    await coordinator.create_instance("g", "a", InstanceConfig(session_timeout_ms=5_000))
    await coordinator.subscribe("g", "a", ["t"])
    tp = coordinator.view("g", "a").assigned[0]
    coordinator.seek("g", "a", {tp: 3})
    log.leading = False
    with pytest.raises(NotLeader):
        coordinator.view("g", "a")
    clock.ms += 60_000
    log.leading, log.term = True, 2  # leadership came back in a later term: soft state starts over
    assert await coordinator.expire_due() == []
    assert coordinator.positions("g", "a") == {}
    clock.ms += 5_001
    assert await coordinator.expire_due() == [("g", "a")]


async def test_a_topic_created_after_subscribing_is_assigned_on_the_next_heartbeat(
    coordinator: GroupCoordinator, log: MemoryLog
) -> None:
    await coordinator.create_instance("g", "a")
    await coordinator.subscribe("g", "a", ["later"])
    assert coordinator.view("g", "a").assigned == ()
    log.topics["later"] = 2
    view = await coordinator.heartbeat("g", "a")
    assert view.assigned == (TopicPartition("later", 0), TopicPartition("later", 1))


async def test_lag_metrics_of_assigned_partitions(coordinator: GroupCoordinator) -> None:
    await coordinator.create_instance("g", "a")
    await coordinator.subscribe("g", "a", ["t"])
    tp = TopicPartition("t", 0)
    coordinator.note_end_offset("g", tp, 10)
    coordinator.note_committed("g", tp, 4)
    metrics = coordinator.metrics()
    assert metrics['consumer_group_lag{group="g",topic="t",partition="0"}'] == 6
    assert metrics['consumer_group_members{group="g"}'] == 1


def test_groups_ride_in_the_partition_state_machine_and_its_snapshot(tmp_path: pathlib.Path) -> None:
    machine = PartitionStateMachine(Log.open(str(tmp_path / "a"), LogConfig()))
    joined = machine.apply(
        1, 1, commands.encode(commands.GroupCommand(encode(Join("g", member("a"), "range"))))
    )
    assert isinstance(joined, GroupChanged) and joined.group is not None and joined.group.generation == 1
    garbage = machine.apply(2, 1, commands.encode(commands.GroupCommand(b"\xc1")))
    assert isinstance(garbage, InvalidCommand)
    copy = PartitionStateMachine(Log.open(str(tmp_path / "b"), LogConfig()))
    copy.restore(machine.snapshot())
    assert copy.groups == machine.groups and "g" in copy.groups.groups


async def test_a_partition_that_comes_back_starts_from_the_committed_offset(
    coordinator: GroupCoordinator,
) -> None:
    await coordinator.create_instance("g", "a")
    await coordinator.subscribe("g", "a", ["t"])
    tps = coordinator.view("g", "a").assigned
    coordinator.seek("g", "a", dict.fromkeys(tps, 7))
    await coordinator.create_instance("g", "b")
    await coordinator.subscribe("g", "b", ["t"])  # a loses half its partitions...
    kept = coordinator.view("g", "a").assigned
    assert coordinator.positions("g", "a") == dict.fromkeys(kept, 7)
    await coordinator.delete_instance("g", "b")  # ...and gets them back: no stale position for those
    assert coordinator.view("g", "a").assigned == tps
    assert coordinator.positions("g", "a") == dict.fromkeys(kept, 7)


GROUP_TOPICS = ("t0", "t1", "t2")
MEMBERS = tuple(f"m{i}" for i in range(5))
command_strategy = st.one_of(
    st.builds(
        lambda m, a: Join("g", member(m), a),
        st.sampled_from(MEMBERS),
        st.sampled_from(["range", "round_robin"]),
    ),
    st.builds(lambda m: Leave("g", m, 1), st.sampled_from(MEMBERS)),
    st.builds(
        lambda m, topics, counts: Subscribe(
            "g", m, tuple(topics), dict(zip(topics, counts, strict=False)), 2
        ),
        st.sampled_from(MEMBERS),
        st.lists(st.sampled_from(GROUP_TOPICS), unique=True, max_size=3),
        st.lists(st.integers(0, 6), min_size=3, max_size=3),
    ),
    st.builds(lambda ms: Expire("g", tuple(ms), 3), st.lists(st.sampled_from(MEMBERS), max_size=3)),
    st.builds(
        lambda counts: Refresh("g", dict(zip(GROUP_TOPICS, counts, strict=True)), 4),
        st.lists(st.integers(0, 6), min_size=3, max_size=3),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(command_strategy, max_size=30))
def test_any_command_sequence_keeps_every_partition_with_exactly_one_subscribed_member(
    sequence: list[GroupCommand],
) -> None:
    table, replica = GroupTable(), GroupTable()
    generation = 0
    for command in sequence:
        before = table.groups.get("g")
        result = table.apply(encode(command))
        replica.apply(encode(command))
        group = table.groups.get("g")
        if group is None:
            generation = 0
            continue
        assert group.generation in (generation, generation + 1)
        if group is not before:
            assert group.generation == generation + 1, f"{command} changed the group without a new generation"
        generation = group.generation
        assert set(group.assignment) == set(group.members)
        owned = [tp for tps in group.assignment.values() for tp in tps]
        expected = {(t, p) for t in group.topics() for p in range(group.partition_counts.get(t, 0))}
        assert len(owned) == len(set(owned)) and set(owned) == expected
        for instance_id, tps in group.assignment.items():
            assert all(tp.topic in group.members[instance_id].topics for tp in tps)
        assert isinstance(
            result, GroupChanged | UnknownConsumerInstance | ConsumerInstanceExists | InvalidCommand
        )
    assert replica == table, "two replicas applying the same commands disagree"
    assert GroupTable.from_rows(table.to_rows()) == table


def test_a_join_past_the_members_bound_is_refused_when_applied_and_older_joins_are_not_bounded() -> None:
    table = GroupTable()
    for name in ("a", "b"):
        assert isinstance(table.apply(encode(Join("g", member(name), "range", members_max=2))), GroupChanged)
    refused = table.apply(encode(Join("g", member("c"), "range", members_max=2)))
    assert isinstance(refused, GroupFull) and refused.members_max == 2
    assert sorted(table.groups["g"].members) == ["a", "b"]
    older = msgpack.packb([1, "g", "c", "json", "earliest", 10_000, 5, "range", DEFAULT_READS.to_row()])
    assert decode(older) == Join("g", member("c"), "range", members_max=None)
    assert isinstance(table.apply(older), GroupChanged)  # replayed as it was first applied: no bound
    assert len(table.groups["g"].members) == 3


async def test_a_group_has_a_maximum_of_members(
    coordinator: GroupCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("partitions.groups.coordinator.GROUP_MEMBERS_MAX", 2)
    await coordinator.create_instance("g", "a")
    await coordinator.create_instance("g", "b")
    with pytest.raises(GroupFull):
        await coordinator.create_instance("g", "c")
    await coordinator.create_instance("other", "c")


async def test_refused_joins_are_logged_in_one_line_a_minute(
    coordinator: GroupCoordinator,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr("partitions.groups.coordinator.GROUP_MEMBERS_MAX", 1)
    await coordinator.create_instance("g", "a")
    for name in ("b", "c", "d"):
        with pytest.raises(GroupFull):
            await coordinator.create_instance("g", name)
    clock.ms += GROUP_FULL_LOG_INTERVAL_MS
    with pytest.raises(GroupFull):
        await coordinator.create_instance("g", "e")
    lines = [r.getMessage() for r in caplog.records if "full group" in r.getMessage()]
    assert [line.split(" consumer")[0] for line in lines] == ["refused 1", "refused 3"], lines


async def test_a_heartbeat_while_the_leader_may_not_read_its_table_yet_waits_for_it(
    log: MemoryLog, coordinator: GroupCoordinator, clock: Clock
) -> None:
    """A leader just elected (its term's first entry not applied) or one whose Raft thread stood still
    may not read its table for a moment: a heartbeat of each protocol meanwhile waits for it, as a
    leader's reads wait, and is answered (a classic one about a group it has no member of: that, as
    Kafka answers it), where it was refused NOT_COORDINATOR (every client looked the
    coordinator up again, and the same node answered). One it still may not read after the wait is
    refused as Kafka's coordinator refuses while it loads (``NoLeader``: COORDINATOR_LOAD_IN_PROGRESS)."""
    log.topics["t"] = 4
    await log.ensure_topic()
    log.unready.set()
    share = asyncio.ensure_future(coordinator.share.heartbeat("s", ShareHeartbeat("m", 0, ("t",))))
    consumer = asyncio.ensure_future(coordinator.consumer.heartbeat("c", ConsumerHeartbeat(
        "", 0, None, None, 10_000, ("t",), None, frozenset())))  # fmt: skip
    classic = asyncio.ensure_future(coordinator.classic_calls.heartbeat("k", "m", 1, clock))
    await wait_until(lambda: log.waiting == 3, "the three heartbeats waiting")
    assert not share.done() and not consumer.done() and not classic.done()
    log.unready.clear()
    log.ready.set()
    assert (await share).member_epoch == 1
    assert (await consumer).member_epoch == 1
    with pytest.raises(GroupRefusal) as unknown:
        await classic
    assert unknown.value.code is GroupCode.unknown_member_id  # not NOT_COORDINATOR
    log.ready.clear()
    log.unready.set()
    refused = asyncio.ensure_future(coordinator.share.heartbeat("s2", ShareHeartbeat("m", 0, ("t",))))
    await wait_until(lambda: log.waiting == 4, "the heartbeat waiting")
    log.ready.set()  # the wait ended, the table still not readable
    with pytest.raises(NoLeader):  # COORDINATOR_LOAD_IN_PROGRESS at the doors, as Kafka's loading one
        await refused


async def test_the_classic_and_share_groups_run_here_are_held_in_the_nodes_one_map(
    log: MemoryLog, coordinator: GroupCoordinator, clock: Clock
) -> None:
    """``held_map``: the node's classic and share coordinators keep their groups in one map by name."""
    await log.ensure_topic()
    assert (await coordinator.share.heartbeat("s", ShareHeartbeat("m", 0, ("t",)))).member_epoch == 1
    joining = coordinator.classic.join(
        "k", "", client_id="c", client_host="", protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=10_000, rebalance_timeout_ms=10_000, require_known_id=False, now_ms=clock(),
    )  # fmt: skip
    assert (
        coordinator.held.holder("s") is GroupType.SHARE and coordinator.held.holder("k") is GroupType.CLASSIC
    )
    assert list(coordinator.classic.groups) == ["k"] and len(coordinator.held) == 2
    joining.cancel()
