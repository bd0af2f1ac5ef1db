"""The consumer group protocol's coordinator over an in-memory group table and a test clock: the session
and rebalance timeouts fence members, a new leader term starts sessions afresh and keeps every member,
offset commits and fetches are checked by member epoch as Kafka checks them."""

from __future__ import annotations

import asyncio

import pytest

from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.classic.members import (
    ClassicGroup,
    ClassicGroupMember,
    GroupCode,
    GroupRefusal,
    GroupState,
    MemberIdRequired,
)
from partitions.groups.consumer.classic_members import ClassicJoin
from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator
from partitions.groups.consumer.group import ConsumerGroup, Heartbeat
from partitions.groups.consumer.to_classic import Downgraded
from partitions.groups.consumer_protocol import encode_assignment
from partitions.groups.errors import (
    ConsumerProtocolVersion,
    NotConsumerGroup,
    NotCoordinator,
    NotUpgradable,
    StaleMemberEpoch,
    UnknownGroup,
    UnknownMember,
)
from partitions.groups.group_commands import ClassicGroupMetadata, ConsumerGroupRecord, encode
from partitions.groups.group_model import ClassicMember, Group
from partitions.groups.live import LiveGroup, LiveMember
from partitions.groups.state import GroupTable


class Table:
    """One coordinator partition's table, led here in ``term`` (None: led elsewhere)."""

    def __init__(self) -> None:
        self.table = GroupTable()
        self.term: int | None = 1
        self.classic: set[str] = set()
        # classic groups with members a consumer protocol member may convert, with the generation the
        # conversion reads from the table (the real table's: ``table_access.ConsumerTable``)
        self.convertible: dict[str, ClassicGroup] = {}
        self.stale: dict[str, int] = {}  # a generation the next conversion reads instead of the table's
        self.dropped: list[str] = []

    def recorded_group(self, name: str) -> tuple[int, Group | None] | None:
        return None if self.term is None else (self.term, self.table.groups.get(name))

    async def readable(self, name: str) -> None:
        return None  # readable whenever led here

    def live(self, group: str) -> LiveGroup | None:
        if group not in self.classic:
            return None
        return LiveGroup(group, "Stable", "consumer", "range", 1, (LiveMember("m", "c", "/h", ()),))

    def partition_count(self, topic: str) -> int:
        return {"t": 4}.get(topic, 0)

    def topics(self) -> list[str]:
        return ["t"]

    def led_consumer_groups(self) -> list[tuple[str, int, ConsumerGroup]]:
        assert self.term is not None
        return [(n, self.term, g.consumer) for n, g in self.table.groups.items() if g.consumer is not None]

    async def record_consumer(self, group: str, state: ConsumerGroup, converts: int | None = None) -> None:
        result = self.table.apply(encode(ConsumerGroupRecord(group, state, 0, converts)))
        if isinstance(result, Exception):
            raise result

    def classic_to_convert(self, group: str) -> tuple[int, int, ClassicGroup] | None:
        classic = self.convertible.get(group)
        if classic is None or self.term is None:
            return None
        held = self.table.groups.get(group)
        if held is None or not held.classic_members:  # converted: consumer protocol members hold it
            return None
        generation = self.stale.pop(group, held.generation)
        return self.term, generation, classic

    def drop_classic(self, group: str) -> None:
        self.dropped.append(group)

    async def record_downgrade(self, group: str, classic: Downgraded, converts: int) -> None:
        command = ClassicGroupMetadata(
            group, "consumer", classic.protocol, classic.generation, classic.leader, classic.members, 0,
            rebalancing=True, converts=converts,
        )  # fmt: skip
        result = self.table.apply(encode(command))
        if isinstance(result, Exception):
            raise result


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _join(rebalance_timeout_ms: int = 10_000) -> Heartbeat:
    return Heartbeat("", 0, None, None, rebalance_timeout_ms, ("t",), None, frozenset())


def _coordinator() -> tuple[ConsumerGroupCoordinator, Table, Clock]:
    table, clock = Table(), Clock()
    ids = iter(["a", "b", "c"])
    return ConsumerGroupCoordinator(table, clock, 45_000, 5_000, lambda: next(ids)), table, clock


def test_a_silent_member_is_fenced_after_its_session_and_its_partitions_go_to_the_others() -> None:
    async def scenario() -> None:
        coordinator, _, clock = _coordinator()
        a = await coordinator.heartbeat("g", _join(60_000))
        b = await coordinator.heartbeat("g", _join())
        assert (a.member_epoch, b.member_id) == (1, "b")
        clock.now = 30_000
        await coordinator.heartbeat("g", Heartbeat("a", 1, owned=a.assignment))  # a revokes half
        clock.now = 46_000  # b silent since 0: past 45 s; a seen at 30 s
        assert await coordinator.expire_due() == [("g", "b")]
        again = await coordinator.heartbeat(
            "g", Heartbeat("a", 1, owned=frozenset(coordinator.describe("g").members["a"].assigned))
        )
        assert again.assignment == frozenset(TP("t", p) for p in range(4))

    asyncio.run(scenario())


def test_a_groups_own_session_timeout_and_heartbeat_interval_apply_from_its_next_heartbeat() -> None:
    async def scenario() -> None:
        coordinator, _, clock = _coordinator()
        configs: dict[str, dict[str, str]] = {}
        coordinator.group_configs = lambda group: configs.get(group, {})
        assert coordinator.timeouts("g") == (45_000, 5_000)  # the node's
        a = await coordinator.heartbeat("g", _join())
        configs["g"] = {"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "7000"}
        assert coordinator.timeouts("g") == (60_000, 7_000)
        assert coordinator.timeouts("other") == (45_000, 5_000)
        clock.now = 46_000  # a's session was scheduled at its heartbeat: 45 s then
        assert await coordinator.expire_due() == [("g", "a")]
        b = await coordinator.heartbeat("g", _join())
        clock.now = 46_000 + 59_000  # b's session is the group's 60 s
        assert await coordinator.expire_due() == []
        clock.now = 46_000 + 60_001
        assert await coordinator.expire_due() == [("g", b.member_id)]
        assert a.member_id != b.member_id

    asyncio.run(scenario())


def test_a_member_not_revoking_within_its_rebalance_timeout_is_fenced() -> None:
    async def scenario() -> None:
        coordinator, _, clock = _coordinator()
        a = await coordinator.heartbeat("g", _join())
        await coordinator.heartbeat("g", _join())
        clock.now = 1_000
        asked = await coordinator.heartbeat("g", Heartbeat("a", 1, owned=a.assignment))  # must revoke 2
        assert coordinator.describe("g").members["a"].revoking
        clock.now = 1_000 + 10_000 + 1  # its rebalance timeout (10 s) passed, still owning them
        await coordinator.heartbeat("g", Heartbeat("b", 2, owned=frozenset()))  # b is alive
        assert asked.member_epoch == 1
        assert await coordinator.expire_due() == [("g", "a")]

    asyncio.run(scenario())


def test_a_new_term_keeps_members_and_starts_their_sessions_afresh() -> None:
    async def scenario() -> None:
        coordinator, table, clock = _coordinator()
        a = await coordinator.heartbeat("g", _join())
        table.term = 2  # a failover: another coordinator, or this one again, in a later term
        clock.now = 100_000
        assert await coordinator.expire_due() == []  # sessions start at first sight in the new term
        kept = await coordinator.heartbeat("g", Heartbeat("a", 1, owned=a.assignment))
        assert (kept.member_epoch, kept.assignment) == (1, None)  # nothing changed for it
        table.term = None
        with pytest.raises(NotCoordinator):
            await coordinator.heartbeat("g", Heartbeat("a", 1))

    asyncio.run(scenario())


def test_commits_and_fetches_are_checked_by_member_epoch() -> None:
    async def scenario() -> None:
        coordinator, _, _ = _coordinator()
        assert not coordinator.check_commit("g", "", -1, 9)  # no consumer group: the classic rules
        await coordinator.heartbeat("g", _join())
        assert coordinator.check_commit("g", "a", 1, 9)
        with pytest.raises(StaleMemberEpoch):
            coordinator.check_commit("g", "a", 0, 9)
        with pytest.raises(UnknownMember):
            coordinator.check_commit("g", "zz", 1, 9)
        with pytest.raises(UnknownMember):
            coordinator.check_commit("g", "", -1, 9)  # from outside while it has members
        with pytest.raises(ConsumerProtocolVersion):
            coordinator.check_commit("g", "a", 1, 8)
        assert coordinator.check_commit("g", "a", 1, 3, transactional=True)
        coordinator.check_fetch("g", None, -1)  # an admin's fetch
        coordinator.check_fetch("g", "a", 1)
        with pytest.raises(StaleMemberEpoch):
            coordinator.check_fetch("g", "a", 2)

    asyncio.run(scenario())


def test_a_group_of_another_protocol_is_not_a_consumer_group() -> None:
    async def scenario() -> None:
        coordinator, table, _ = _coordinator()
        table.classic.add("g")
        with pytest.raises(NotConsumerGroup):
            await coordinator.heartbeat("g", _join())
        with pytest.raises(UnknownGroup):
            await coordinator.heartbeat("h", Heartbeat("a", 3))

    asyncio.run(scenario())


def test_a_classic_member_lives_by_its_own_session_and_commits_by_its_generation() -> None:
    """A classic member taken into a consumer protocol group (``classic_members``): its session is the
    one it joined with (not the group's 45 s), renewed by its SyncGroup and Heartbeat; it may commit
    below OffsetCommit v9, its generation checked against its epoch (ILLEGAL_GENERATION, as Kafka)."""
    subscription = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # v0: topic "t", no user data

    async def scenario() -> None:
        coordinator, _, clock = _coordinator()
        await coordinator.heartbeat("g", _join(60_000))  # "a", the consumer protocol member
        assert coordinator.holds_with_members("g") and not coordinator.holds_with_members("other")
        garbled = ClassicJoin("", "consumer", (("range", b"\x00"),), 6_000, 20_000)
        with pytest.raises(MemberIdRequired):  # Kafka's order: the member id before the subscription is read
            await coordinator.classic_join("g", garbled)
        request = ClassicJoin("c", "consumer", (("range", subscription),), 6_000, 20_000)
        joined = await coordinator.classic_join("g", request)
        assert joined.member_epoch == 2
        assert coordinator.check_commit("g", "c", 2, api_version=2)  # a classic client's OffsetCommit v2
        with pytest.raises(GroupRefusal) as stale:
            coordinator.check_commit("g", "c", 1, api_version=2)
        assert stale.value.code == GroupCode.illegal_generation
        clock.now = 5_000
        coordinator.classic_sync("g", "c", 2, "consumer", "range")  # its session runs again from 5 s
        await coordinator.heartbeat("g", Heartbeat("a", 1, owned=None))
        clock.now = 10_500
        assert await coordinator.expire_due() == []
        clock.now = 11_001  # six seconds after its last call: its own session passed, not the group's
        assert await coordinator.expire_due() == [("g", "c")]
        assert set(coordinator.describe("g").members) == {"a"}

    asyncio.run(scenario())


def _classic_group(table: Table, generation: int = 3) -> None:
    """A classic group of two members holding two partitions each, as its coordinator runs it and as it
    wrote it to the table at ``generation``."""
    subscription = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # v0: topic "t", no user data
    members = {}
    for member_id, partitions in (("x", [0, 1]), ("y", [2, 3])):
        assignment = encode_assignment([TP("t", p) for p in partitions])
        members[member_id] = ClassicGroupMember(
            member_id, "c", "/h", 6_000, 20_000, (("range", subscription),), 0, assignment=assignment
        )
    written = tuple(
        ClassicMember(m.member_id, None, "c", "/h", 20_000, 6_000, subscription, m.assignment)
        for m in members.values()
    )
    table.table.apply(encode(ClassicGroupMetadata("g", "consumer", "range", generation, "x", written, 0)))
    table.convertible["g"] = ClassicGroup(
        "g", GroupState.STABLE, generation, "consumer", "range", "x", members
    )


def test_a_consumer_protocol_member_joining_a_classic_group_with_members_converts_it() -> None:
    """Kafka's online upgrade: the classic group is written as a consumer protocol group in its place
    (its members classic members at the generation, keeping their partitions), the classic coordinator
    lets it go, and the joining member's heartbeat goes on from there: a new group epoch, partitions for
    it once the classic members give them up by rejoining. The converted members live by their own
    session timeouts from the conversion."""

    async def scenario() -> None:
        coordinator, table, clock = _coordinator()
        _classic_group(table)
        answer = await coordinator.heartbeat("g", _join())
        assert (answer.member_id, answer.member_epoch, answer.assignment) == ("a", 4, frozenset())
        assert table.dropped == ["g", "g"]  # before the write, and after it
        held = table.table.groups["g"]
        assert held.classic_members == () and held.consumer is not None
        group = coordinator.describe("g")
        assert (group.group_epoch, group.assignment_epoch) == (4, 4)
        x = group.members["x"]
        assert (x.epoch, x.classic is not None, x.assigned) == (3, True, frozenset({TP("t", 0), TP("t", 1)}))
        with pytest.raises(GroupRefusal) as rejoin:  # behind the assignment: it rejoins, giving one up
            coordinator.classic_heartbeat("g", "x", 3)
        assert rejoin.value.code == GroupCode.rebalance_in_progress
        clock.now = 6_001  # y silent since the conversion: its own 6 s passed; x heard at 0 too
        assert sorted(await coordinator.expire_due()) == [("g", "x"), ("g", "y")]
        assert set(coordinator.describe("g").members) == {"a"}

    asyncio.run(scenario())


def test_a_conversion_reads_the_classic_group_again_when_its_members_wrote_a_generation_meanwhile() -> None:
    async def scenario() -> None:
        coordinator, table, _ = _coordinator()
        _classic_group(table, generation=3)
        table.stale["g"] = 2  # the first read missed the rebalance written since: the table refuses it
        answer = await coordinator.heartbeat("g", _join())
        assert answer.member_epoch == 4
        assert table.table.groups["g"].consumer is not None
        assert table.dropped == ["g", "g", "g"]  # dropped for each attempt, and after the write

    asyncio.run(scenario())


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_a_migration_policy_without_upgrade_refuses_the_conversion(policy: str) -> None:
    """Kafka's ``group.consumer.migration.policy`` (``--group-consumer-migration-policy``): without
    ``upgrade`` the joining member is GROUP_ID_NOT_FOUND with Kafka's reason and the classic group stays;
    ``disabled`` also refuses a classic member joining a consumer protocol group."""

    async def scenario() -> None:
        coordinator, table, _ = _coordinator()
        coordinator.migration_policy = policy
        _classic_group(table)
        with pytest.raises(NotUpgradable, match="online upgrade is disabled"):
            await coordinator.heartbeat("g", _join())
        assert table.table.groups["g"].classic_members and table.dropped == []
        await coordinator.heartbeat("h", _join())
        subscription = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
        request = ClassicJoin("c", "consumer", (("range", subscription),), 6_000, 20_000)
        if policy == "disabled":
            with pytest.raises(GroupRefusal) as refused:
                await coordinator.classic_join("h", request)
            assert refused.value.code == GroupCode.inconsistent_group_protocol
            assert "the group migration is disabled" in str(refused.value)
        else:
            assert (await coordinator.classic_join("h", request)).member_epoch == 2

    asyncio.run(scenario())


def test_an_unknown_migration_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="use one of bidirectional, upgrade, downgrade, disabled"):
        ConsumerGroupCoordinator(Table(), Clock(), migration_policy="sideways")


@pytest.mark.parametrize("policy", ["bidirectional", "downgrade", "upgrade"])
def test_the_last_consumer_protocol_member_leaving_turns_the_group_back_into_a_classic_group(
    policy: str,
) -> None:
    """Kafka's online downgrade: once only classic members are left (the consumer protocol member left or
    was fenced), the group is written as a classic group collecting its members' joins, which the
    classic coordinator loads and runs; a policy without ``downgrade`` keeps it a consumer protocol
    group."""

    async def scenario() -> None:
        coordinator, table, clock = _coordinator()
        _classic_group(table)
        answer = await coordinator.heartbeat("g", _join())  # converted, "a" joins
        coordinator.migration_policy = policy
        await coordinator.heartbeat(
            "g", Heartbeat("a", answer.member_epoch, owned=frozenset(), subscribed=("t",))
        )
        clock.now = 1_000
        left = await coordinator.heartbeat("g", Heartbeat("a", -1))
        assert left.member_epoch == -1
        held = table.table.groups["g"]
        if policy == "upgrade":
            assert held.consumer is not None and set(held.consumer.members) == {"x", "y"}
            return
        assert held.consumer is None and held.classic_rebalancing
        assert {m.member_id for m in held.classic_members} == {"x", "y"}
        assert (held.protocol_type, held.assignor) == ("consumer", "range")
        assert coordinator.state_of("g") is None and not coordinator.holds_with_members("g")
        assert await coordinator.expire_due() == []  # its timers here go with it

    asyncio.run(scenario())
