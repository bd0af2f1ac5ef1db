"""A classic group outlives its coordinator (``partitions.groups.classic.coordinator`` over the node's real
group coordinator and group table): what a rebalance completes is written before the members learn it, and
the node that takes over the group's ``__consumer_groups`` partition runs the group on, Stable, with its
members, generation and assignments, as Kafka's new coordinator loads it. Two nodes' coordinators share one
replicated table here; the clock is the test's."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from partitions.errors import FeatureNotFinalized
from partitions.features import RAFTLOG_VERSION, Features
from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic.members import GroupCode, GroupRefusal, GroupState, Joined
from partitions.groups.consumer.group import Heartbeat
from partitions.groups.coordinator import GroupCoordinator
from partitions.groups.errors import ConsumerProtocolNotFinalized, GroupNotEmpty
from partitions.groups.group_commands import GroupCommand, encode
from partitions.groups.group_model import CLASSIC_MEMBER_BYTES_MAX, InstanceConfig
from partitions.groups.state import GroupChanged, GroupResult, GroupTable
from raftlog.consensus.errors import NoLeader, NotLeader, OutcomeUnknown

PROTOCOLS = [("range", b"r-meta"), ("roundrobin", b"rr-meta")]
SESSION_MS = 3000


class Replicated:
    """The ``__consumer_groups`` partitions as every node sees them: one table each, led by ``leader``
    in ``term``; ``failing`` makes the next writes fail as Raft would, ``gate`` holds them; ``unready``:
    the leader may not read its table this moment (its read lease lapsed under load, its Raft thread
    stood still), as ``ready_leader`` refuses it with NoLeader."""

    def __init__(self) -> None:
        self.tables = [GroupTable()]
        self.leader, self.term = "n1", 1
        self.failing: Exception | None = None
        self.gate: asyncio.Event | None = None
        self.unready = False

    def failover(self, to: str) -> None:
        self.leader, self.term = to, self.term + 1


class NodeLog:
    """One node's view of the replicated table (a ``GroupLog``)."""

    def __init__(self, shared: Replicated, node: str) -> None:
        self.shared, self.node = shared, node

    def partitions(self) -> int:
        return len(self.shared.tables)

    async def ensure_topic(self) -> None:
        return None

    def leader_term(self, partition: int) -> int:
        if self.shared.leader != self.node:
            raise NotLeader(f"__consumer_groups-{partition}", self.shared.leader)
        return self.shared.term

    def table(self, partition: int) -> tuple[GroupTable, int]:
        term = self.leader_term(partition)
        if self.shared.unready:
            raise NoLeader(f"__consumer_groups-{partition}")
        return self.shared.tables[partition], term

    def led_partitions(self) -> list[int]:
        return list(range(len(self.shared.tables))) if self.shared.leader == self.node else []

    async def propose(self, partition: int, command: GroupCommand) -> GroupResult:
        self.table(partition)
        if self.shared.gate is not None:
            await self.shared.gate.wait()
        if self.shared.failing is not None:
            raise self.shared.failing
        return self.shared.tables[partition].apply(encode(command))

    def partition_count(self, topic: str) -> int:
        return 0


def _node(shared: Replicated, node: str) -> ClassicGroups:
    return GroupCoordinator(NodeLog(shared, node), classic_initial_delay_ms=0).classic


def _join(groups: ClassicGroups, member_id: str, now: int, instance: str | None = None,
          protocols: list[tuple[str, bytes]] = PROTOCOLS) -> asyncio.Future[Joined]:  # fmt: skip
    return groups.join(
        "g", member_id, client_id="client", client_host="10.0.0.9", protocol_type="consumer",
        protocols=protocols, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=5000,
        require_known_id=False, now_ms=now, instance_id=instance,
    )  # fmt: skip


async def _stable_pair(groups: ClassicGroups, instance: str | None = None) -> tuple[Joined, Joined]:
    """Members a (the leader) and b, Stable at generation 1, assigned b"A" and b"B"."""
    a_join, b_join = _join(groups, "", 0, instance), _join(groups, "", 0)
    groups.tick(1)  # b joined during the first rebalance's delay: it waits once more
    groups.tick(2)
    a, b = await asyncio.gather(a_join, b_join)
    if a.leader != a.member_id:
        a, b = b, a
    follower = asyncio.ensure_future(groups.sync("g", b.member_id, 1, {}, 2))
    assert await groups.sync("g", a.member_id, 1, {a.member_id: b"A", b.member_id: b"B"}, 2) == b"A"
    assert await follower == b"B"
    return a, b


def _recorded(shared: Replicated) -> tuple[int, dict[str, bytes]]:
    group = shared.tables[0].groups["g"]
    return group.generation, {m.member_id: m.assignment for m in group.classic_members}


async def test_a_new_coordinator_runs_the_group_on_with_its_members_generation_and_assignments() -> None:
    shared = Replicated()
    first = _node(shared, "n1")
    a, b = await _stable_pair(first)
    assert _recorded(shared) == (1, {a.member_id: b"A", b.member_id: b"B"})
    shared.failover("n2")  # kill -9 of n1: n2 leads the group's partition in the next term
    second = _node(shared, "n2")
    second.tick(10_000)  # loaded at once: the members' sessions start now
    group = second.groups["g"]
    assert (group.state, group.generation, group.leader) == (GroupState.STABLE, 1, a.member_id)
    live = second.live("g")
    assert live is not None and {m.member_id for m in live.members} == {a.member_id, b.member_id}
    second.heartbeat("g", a.member_id, 1, 10_100)  # NONE: the same generation goes on
    second.heartbeat("g", b.member_id, 1, 10_100)
    second.check_commit("g", b.member_id, 1)
    assert await second.sync("g", b.member_id, 1, {}, 10_200) == b"B"  # a Stable group's answer
    with pytest.raises(GroupRefusal) as stale:
        second.check_commit("g", b.member_id, 0)
    assert stale.value.code is GroupCode.illegal_generation
    with pytest.raises(GroupRefusal) as unknown:
        second.heartbeat("g", "someone-else", 1, 10_200)
    assert unknown.value.code is GroupCode.unknown_member_id
    with pytest.raises(GroupRefusal) as moved:  # the old coordinator lets go
        first.heartbeat("g", a.member_id, 1, 10_300)
    assert moved.value.code is GroupCode.not_coordinator and "g" not in first.groups


async def test_a_commit_before_the_members_call_the_new_coordinator_is_checked_against_the_table() -> None:
    shared = Replicated()
    a, _ = await _stable_pair(_node(shared, "n1"))
    shared.failover("n2")
    second = _node(shared, "n2")
    second.check_commit("g", a.member_id, 1)  # no call, no tick yet: the table vouches for the members
    for member_id, generation, code in (
        (a.member_id, 2, GroupCode.illegal_generation),
        ("stranger", 1, GroupCode.unknown_member_id),
        ("", -1, GroupCode.unknown_member_id),  # from outside the group while it has members
    ):
        with pytest.raises(GroupRefusal) as refused:
            second.check_commit("g", member_id, generation)
        assert refused.value.code is code
    assert "g" not in second.groups


async def test_a_rejoin_with_a_known_member_id_after_a_failover_is_a_normal_rebalance() -> None:
    shared = Replicated()
    a, b = await _stable_pair(_node(shared, "n1"))
    shared.failover("n2")
    second = _node(shared, "n2")
    a_again = _join(second, a.member_id, 100)
    assert second.groups["g"].state is GroupState.PREPARING_REBALANCE
    with pytest.raises(GroupRefusal) as told:
        second.heartbeat("g", b.member_id, 1, 110)
    assert told.value.code is GroupCode.rebalance_in_progress
    b_again = _join(second, b.member_id, 120)
    rejoined = await asyncio.gather(a_again, b_again)
    assert {j.generation for j in rejoined} == {2} and {j.member_id for j in rejoined} == {
        a.member_id,
        b.member_id,
    }
    leader = next(j for j in rejoined if j.leader == j.member_id)
    assert len(leader.members) == 2 and dict(leader.members)[a.member_id] == b"r-meta"
    await second.sync("g", leader.member_id, 2, {a.member_id: b"B", b.member_id: b"A"}, 130)
    assert _recorded(shared) == (2, {a.member_id: b"B", b.member_id: b"A"})


async def test_members_silent_after_a_failover_expire_on_the_new_coordinator_and_that_is_written() -> None:
    shared = Replicated()
    a, b = await _stable_pair(_node(shared, "n1"))
    shared.failover("n2")
    second = _node(shared, "n2")
    second.tick(50_000)  # loaded now: no member expires for a session from here
    second.heartbeat("g", a.member_id, 1, 52_000)
    second.tick(50_000 + SESSION_MS)
    assert set(second.groups["g"].members) == {a.member_id, b.member_id}
    second.tick(50_000 + SESSION_MS + 1)  # b never called: gone, a told to rejoin
    assert set(second.groups["g"].members) == {a.member_id}
    alone = await _join(second, a.member_id, 53_100)
    assert alone.generation == 2
    await second.sync("g", a.member_id, 2, {a.member_id: b"AB"}, 53_200)
    assert _recorded(shared) == (2, {a.member_id: b"AB"})
    second.tick(53_200 + SESSION_MS + 1)  # a dies too: the group empties, and that is written
    for _ in range(5):
        await asyncio.sleep(0)
    group = shared.tables[0].groups["g"]
    assert (group.generation, group.classic_members, group.assignor) == (3, (), "")


@pytest.mark.parametrize("loss", ["leave", "session expiry"])
async def test_a_member_lost_before_a_failover_is_not_waited_for_by_the_new_coordinator(loss: str) -> None:
    """b leaves (or its session expires) and the coordinator dies before a rejoins: what is left, and
    that a rebalance is under way, was written, so the new coordinator asks a to rejoin at its first
    heartbeat and a takes b's partitions at once. (Kafka's new coordinator loads b back, Stable, and a
    waits out b's session before anything moves.)"""
    shared = Replicated()
    first = _node(shared, "n1")
    a, b = await _stable_pair(first)
    if loss == "leave":
        assert first.leave("g", [(b.member_id, None)], 100) == [GroupCode.none]
    else:
        first.heartbeat("g", a.member_id, 1, SESSION_MS)
        first.tick(SESSION_MS + 3)  # b's session ran out; a's did not
    for _ in range(5):
        await asyncio.sleep(0)  # the write
    recorded = shared.tables[0].groups["g"]
    assert recorded.classic_rebalancing and [m.member_id for m in recorded.classic_members] == [a.member_id]
    assert recorded.generation == 1 and recorded.classic_members[0].assignment == b"A"
    shared.failover("n2")
    second = _node(shared, "n2")
    second.tick(10_000)
    group = second.groups["g"]
    assert (group.state, group.generation, set(group.members)) == (
        GroupState.PREPARING_REBALANCE,
        1,
        {a.member_id},
    )
    with pytest.raises(GroupRefusal) as told:
        second.heartbeat("g", a.member_id, 1, 10_100)
    assert told.value.code is GroupCode.rebalance_in_progress
    alone = await _join(second, a.member_id, 10_200)  # the only member rejoined: done, no session waited
    assert (alone.generation, alone.leader) == (2, a.member_id)
    await second.sync("g", a.member_id, 2, {a.member_id: b"AB"}, 10_300)
    assert _recorded(shared) == (2, {a.member_id: b"AB"})
    assert not shared.tables[0].groups["g"].classic_rebalancing


async def test_a_member_that_never_rejoins_a_loaded_rebalance_is_dropped_at_its_rebalance_timeout() -> None:
    """The group was written rebalancing with a alone, and a does not rejoin on the new coordinator
    either: the rebalance ends at the members' rebalance timeout without it, as Kafka ends one."""
    shared = Replicated()
    first = _node(shared, "n1")
    _a, b = await _stable_pair(first)
    first.leave("g", [(b.member_id, None)], 100)
    for _ in range(5):
        await asyncio.sleep(0)
    shared.failover("n2")
    second = _node(shared, "n2")
    second.tick(10_000)
    assert second.groups["g"].rebalance_deadline_ms == 10_000 + 5000  # the members' rebalance timeout
    second.tick(10_000 + 5000)  # nobody rejoined: a is dropped, the group empties, and that is written
    for _ in range(5):
        await asyncio.sleep(0)
    assert second.groups["g"].state is GroupState.EMPTY
    group = shared.tables[0].groups["g"]
    assert (group.generation, group.classic_members, group.classic_rebalancing) == (2, (), False)


async def test_members_learn_their_assignment_only_once_it_is_written() -> None:
    shared = Replicated()
    groups = _node(shared, "n1")
    a_join, b_join = _join(groups, "", 0), _join(groups, "", 0)
    groups.tick(1)
    groups.tick(2)
    a, b = await asyncio.gather(a_join, b_join)
    if a.leader != a.member_id:
        a, b = b, a
    shared.gate = asyncio.Event()
    leader = asyncio.ensure_future(
        groups.sync("g", a.member_id, 1, {a.member_id: b"A", b.member_id: b"B"}, 2)
    )
    follower = asyncio.ensure_future(groups.sync("g", b.member_id, 1, {}, 3))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not leader.done() and not follower.done() and "g" not in shared.tables[0].groups
    assert groups.groups["g"].state is GroupState.COMPLETING_REBALANCE
    shared.gate.set()
    assert (await leader, await follower) == (b"A", b"B")
    assert groups.groups["g"].state is GroupState.STABLE


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (OutcomeUnknown("__consumer_groups-0", "no majority answered"), GroupCode.coordinator_not_available),
        (NotLeader("__consumer_groups-0", "n2"), GroupCode.not_coordinator),
    ],
)
async def test_a_failed_write_answers_every_member_kafkas_error_and_the_group_rebalances(
    failure: Exception, code: GroupCode
) -> None:
    shared = Replicated()
    groups = _node(shared, "n1")
    a_join, b_join = _join(groups, "", 0), _join(groups, "", 0)
    groups.tick(1)
    groups.tick(2)
    a, b = await asyncio.gather(a_join, b_join)
    if a.leader != a.member_id:
        a, b = b, a
    shared.failing = failure
    follower = asyncio.ensure_future(groups.sync("g", b.member_id, 1, {}, 2))
    for waiting in (groups.sync("g", a.member_id, 1, {a.member_id: b"A", b.member_id: b"B"}, 3), follower):
        with pytest.raises(GroupRefusal) as refused:
            await waiting
        assert refused.value.code is code
    group = groups.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    shared.failing = None
    again = await asyncio.gather(_join(groups, a.member_id, 10), _join(groups, b.member_id, 10))
    assert {j.generation for j in again} == {2}


async def test_a_member_past_the_bound_of_its_metadata_is_answered_unknown_server_error() -> None:
    shared = Replicated()
    groups = _node(shared, "n1")
    big = [("range", b"x" * (CLASSIC_MEMBER_BYTES_MAX + 1))]
    joined = _join(groups, "", 0, protocols=big)
    groups.tick(1)
    alone = await joined
    with pytest.raises(GroupRefusal) as refused:
        await groups.sync("g", alone.member_id, 1, {alone.member_id: b"A"}, 2)
    assert refused.value.code is GroupCode.unknown_server_error
    assert "g" not in shared.tables[0].groups


async def test_static_members_survive_a_failover_and_a_restart_after_it_is_written() -> None:
    shared = Replicated()
    a, b = await _stable_pair(_node(shared, "n1"), instance="static-a")
    shared.failover("n2")
    second = _node(shared, "n2")
    second.heartbeat("g", a.member_id, 1, 100, "static-a")
    assert second.groups["g"].static("static-a") is not None
    # its process restarts: the new incarnation takes its place, no rebalance, and that is written
    back = await _join(second, "", 200, instance="static-a")
    assert back.member_id != a.member_id and back.generation == 1 and back.leader == back.member_id
    assert second.groups["g"].state is GroupState.STABLE
    assert _recorded(shared) == (1, {back.member_id: b"A", b.member_id: b"B"})
    with pytest.raises(GroupRefusal) as fenced:
        second.heartbeat("g", a.member_id, 1, 210, "static-a")
    assert fenced.value.code is GroupCode.fenced_instance_id
    shared.failover("n1")  # and back: the new incarnation is the one the next coordinator knows
    first = _node(shared, "n1")
    first.heartbeat("g", back.member_id, 1, 300, "static-a")
    assert await first.sync("g", back.member_id, 1, {}, 310, "static-a") == b"A"


async def test_a_group_recorded_by_the_release_before_loads_empty_at_its_generation() -> None:
    """``KafkaGeneration`` (kind 7), what the release before wrote at each rebalance: its bytes still
    apply; the new coordinator knows the generation, not the members, whose commits of that generation
    it takes until they join again, as that release did."""
    shared = Replicated()
    old = msgpack.packb([7, "g", "consumer", "range", 4, 1_000], use_bin_type=True)
    assert isinstance(shared.tables[0].apply(old), GroupChanged)
    groups = _node(shared, "n1")
    groups.check_commit("g", "member-of-before", 4)
    with pytest.raises(GroupRefusal):
        groups.check_commit("g", "member-of-before", 3)
    with pytest.raises(GroupRefusal) as unknown:
        groups.heartbeat("g", "member-of-before", 4, 10)
    assert unknown.value.code is GroupCode.unknown_member_id
    joined = _join(groups, "", 20)
    groups.tick(21)
    assert (await joined).generation == 5  # its generations go on


async def test_a_static_members_replacement_that_is_not_written_is_reverted() -> None:
    shared = Replicated()
    groups = _node(shared, "n1")
    a, b = await _stable_pair(groups, instance="static-a")
    shared.failing = OutcomeUnknown("__consumer_groups-0", "no majority answered")
    with pytest.raises(GroupRefusal) as refused:
        await _join(groups, "", 100, instance="static-a")
    assert refused.value.code is GroupCode.coordinator_not_available
    group = groups.groups["g"]
    assert set(group.members) == {a.member_id, b.member_id} and group.leader == a.member_id
    assert group.state is GroupState.STABLE and _recorded(shared) == (
        1,
        {a.member_id: b"A", b.member_id: b"B"},
    )


async def test_recorded_members_hold_the_group_against_http_members_and_deletion_before_they_load() -> None:
    shared = Replicated()
    await _stable_pair(_node(shared, "n1"))
    shared.failover("n2")
    coordinator = GroupCoordinator(NodeLog(shared, "n2"))  # its door has not loaded the group yet
    with pytest.raises(GroupNotEmpty) as joining:
        await coordinator.create_instance("g", "rest")
    with pytest.raises(GroupNotEmpty) as deleting:
        coordinator.check_empty("g")
    assert joining.value.members == deleting.value.members == 2


async def test_a_description_before_the_new_coordinator_loads_the_group_shows_its_recorded_members() -> None:
    """Between the election and the next tick that loads the group, a description (the HTTP door's, the
    CLI's) is of the group as the table holds it, as DescribeGroups answers: not an Empty group with no
    members. A whole run beside two CPU burners met that window: the leader balancer had handed the
    partition over and the CLI, a moment later, read 'Empty, 0 member(s)'."""
    shared = Replicated()
    a, b = await _stable_pair(_node(shared, "n1"))
    shared.failover("n2")
    coordinator = GroupCoordinator(NodeLog(shared, "n2"))
    assert coordinator.live("g") is None  # what it runs: nothing yet
    described = coordinator.live("g", recorded=True)
    assert described is not None and "g" not in coordinator.classic.groups  # described, not loaded
    assert (described.state, described.generation) == ("Stable", 1)
    assert {(m.member_id, m.client_id) for m in described.members} == {
        (a.member_id, "client"),
        (b.member_id, "client"),
    }
    shared.failover("n3")  # led elsewhere now: what it still holds, which is nothing
    assert coordinator.live("g", recorded=True) is None


async def test_a_coordinator_that_leads_the_group_again_later_runs_it_as_written_meanwhile() -> None:
    shared = Replicated()
    first = _node(shared, "n1")
    a, b = await _stable_pair(first)
    shared.failover("n2")  # n1 is cut off, not killed: its memory still holds generation 1
    second = _node(shared, "n2")
    rejoined = await asyncio.gather(_join(second, a.member_id, 100), _join(second, b.member_id, 100))
    await second.sync("g", a.member_id, 2, {a.member_id: b"AB"}, 110)
    assert _recorded(shared) == (2, {a.member_id: b"AB", b.member_id: b""})
    assert {j.generation for j in rejoined} == {2}
    shared.failover("n1")  # and leads it again, in a later term: the table rules, not its old memory
    first.heartbeat("g", b.member_id, 2, 200)
    with pytest.raises(GroupRefusal) as stale:
        first.heartbeat("g", b.member_id, 1, 200)
    assert stale.value.code is GroupCode.illegal_generation
    assert await first.sync("g", a.member_id, 2, {}, 210) == b"AB"


async def test_under_the_previous_releases_level_the_metadata_is_not_written() -> None:
    """While the cluster's raftlog.version is 1 (a node of 0.1.0 may lead the group's partition and could
    not read kind 9), a completed rebalance writes nothing: the members are lost at a failover, as in 0.1.0,
    and the group goes on with its members on this coordinator."""
    finalized: dict[str, int] = {}
    shared = Replicated()
    groups = GroupCoordinator(
        NodeLog(shared, "n1"), features=Features(lambda: finalized), classic_initial_delay_ms=0
    ).classic
    a, b = await _stable_pair(groups)
    assert "g" not in shared.tables[0].groups or not shared.tables[0].groups["g"].classic_members
    finalized[RAFTLOG_VERSION] = 2  # every node runs 0.2.0: the next rebalance is written
    rejoin_a, rejoin_b = _join(groups, a.member_id, 3), _join(groups, b.member_id, 3)
    groups.tick(4)
    first, second = await asyncio.gather(rejoin_a, rejoin_b)
    leader, follower = (first, second) if first.leader == first.member_id else (second, first)
    follows = asyncio.ensure_future(groups.sync("g", follower.member_id, leader.generation, {}, 5))
    assignment = {leader.member_id: b"A", follower.member_id: b"B"}
    assert await groups.sync("g", leader.member_id, leader.generation, assignment, 5) == b"A"
    assert await follows == b"B"
    assert _recorded(shared) == (leader.generation, assignment)


async def test_a_consumer_protocol_member_is_refused_until_the_level_is_finalized() -> None:
    """Kind 10 of the group table is unknown to release 0.1.0: a ConsumerGroupHeartbeat is refused, writing
    nothing, while raftlog.version is 1 (as Kafka refuses it while group.version is 0), then served."""
    finalized: dict[str, int] = {}
    shared = Replicated()
    coordinator = GroupCoordinator(NodeLog(shared, "n1"), features=Features(lambda: finalized))
    joining = Heartbeat("", 0, None, None, 10_000, ("t",), None, frozenset())
    with pytest.raises(ConsumerProtocolNotFinalized):
        await coordinator.consumer.heartbeat("g", joining)
    assert "g" not in shared.tables[0].groups
    finalized[RAFTLOG_VERSION] = 2
    answer = await coordinator.consumer.heartbeat("g", joining)
    assert answer.member_epoch == 1 and shared.tables[0].groups["g"].consumer is not None


async def test_a_schema_format_instance_is_refused_until_the_level_is_finalized() -> None:
    """An HTTP consumer instance of format avro, jsonschema or protobuf is a Join release 0.1.0 cannot
    apply (its formats are json and binary): refused, writing nothing, while raftlog.version is 1, then
    created; a json instance is created at either level."""
    finalized: dict[str, int] = {}
    shared = Replicated()
    coordinator = GroupCoordinator(NodeLog(shared, "n1"), features=Features(lambda: finalized))
    for schema_format in ("avro", "jsonschema", "protobuf"):
        with pytest.raises(
            FeatureNotFinalized, match=f"format {schema_format} needs feature raftlog.version"
        ):
            await coordinator.create_instance("g", f"i-{schema_format}", InstanceConfig(format=schema_format))
    assert "g" not in shared.tables[0].groups
    await coordinator.create_instance("g", "plain", InstanceConfig(format="json"))
    finalized[RAFTLOG_VERSION] = 2
    member = await coordinator.create_instance("g", "typed", InstanceConfig(format="protobuf"))
    assert member.format == "protobuf"
    assert {m.instance_id: m.format for m in shared.tables[0].groups["g"].members.values()} == {
        "plain": "json",
        "typed": "protobuf",
    }


async def test_a_rebalance_under_way_survives_a_moment_the_leader_may_not_read_its_table() -> None:
    """franz-go's TestGroupETL on raftlog: the leader of the group's partition lost its read lease for a
    moment under load (same node, same term); its coordinator dropped the group, reloaded it from the
    table at the generation written before, and answered members of the rebalance that had completed in
    memory ILLEGAL_GENERATION (or, with a first generation not written yet, UNKNOWN_MEMBER_ID). Calls
    meanwhile are answered NOT_COORDINATOR (retried: the client finds the same coordinator); the group is
    kept."""
    shared = Replicated()
    groups = _node(shared, "n1")
    a, b = await _stable_pair(groups)
    a_join, b_join = _join(groups, a.member_id, 100), _join(groups, b.member_id, 100)  # generation 2
    a2, b2 = await asyncio.gather(a_join, b_join)
    assert (a2.generation, _recorded(shared)[0]) == (2, 1)  # joined in memory, written once synced
    shared.unready = True
    with pytest.raises(GroupRefusal) as refused:
        groups.sync("g", b2.member_id, 2, {}, 200)
    assert refused.value.code is GroupCode.not_coordinator
    groups.tick(2_000)  # the tick's adoption looks again meanwhile
    shared.unready = False
    leader, follower = (a2, b2) if a2.leader == a2.member_id else (b2, a2)
    waiting = asyncio.ensure_future(groups.sync("g", follower.member_id, 2, {}, 2_100))
    plan = {leader.member_id: b"L", follower.member_id: b"F"}
    assert await groups.sync("g", leader.member_id, 2, plan, 2_100) == b"L"
    assert await waiting == b"F"
    assert _recorded(shared) == (2, plan)


async def test_a_group_led_elsewhere_meanwhile_is_dropped_and_loaded_again_as_written() -> None:
    """The same moment, but another node was elected meanwhile (and this one again later, in a newer
    term): the group is what the table holds, the in-memory rebalance gone, as Kafka's loads it."""
    shared = Replicated()
    groups = _node(shared, "n1")
    a, b = await _stable_pair(groups)
    await asyncio.gather(_join(groups, a.member_id, 100), _join(groups, b.member_id, 100))
    shared.failover("n2")
    groups.tick(2_000)
    assert "g" not in groups.groups
    shared.failover("n1")
    groups.tick(4_000)
    group = groups.groups["g"]
    assert (group.generation, group.state) == (1, GroupState.STABLE)
