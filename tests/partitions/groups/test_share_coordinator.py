"""Share groups' membership (KIP-932) over an in-memory group table and a test clock: members join with
their own ids, heartbeat in the epoch they were given and leave; every member gets every subscribed
partition; sessions time out; the group and its epoch are written to the table, so a coordinator taking
over lists it and goes on from its epoch while its members join again; one group, one protocol."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import msgpack
import pytest

from partitions.errors import InvalidCommand
from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator
from partitions.groups.consumer.group import Heartbeat
from partitions.groups.errors import (
    FencedMemberEpoch,
    GroupFull,
    GroupNotEmpty,
    InvalidGroupRequest,
    NotConsumerGroup,
    ShareGroupLimitReached,
    UnknownGroup,
    UnknownMember,
)
from partitions.groups.group_commands import Committed, Forget, Join, ShareGroupRecord, decode, encode
from partitions.groups.group_model import SHARE_PROTOCOL_TYPE, ConsumerInstance
from partitions.groups.share.coordinator import ShareGroupCoordinator
from partitions.groups.share.group import SHARE_MEMBERS_MAX, ShareHeartbeat, ShareMember
from partitions.groups.state import GroupTable
from tests.partitions.groups.share_table import ShareTable

TOPICS = {"t": 2, "u": 1}  # the topics the groups read, by their partition counts


class Clock:
    now = 0

    def __call__(self) -> int:
        return self.now


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def test_members_join_share_their_topics_partitions_and_leave() -> None:
    table, clock = ShareTable(TOPICS), Clock()
    share = ShareGroupCoordinator(table, clock)
    a = run(share.heartbeat("g", ShareHeartbeat("a", 0, ("t",))))
    assert (a.member_epoch, a.assignment) == (1, frozenset({TP("t", 0), TP("t", 1)}))
    # t shared with a, which keeps what it can
    b = run(share.heartbeat("g", ShareHeartbeat("b", 0, ("t", "u"))))
    assert b.member_epoch == 2 and b.assignment == frozenset({TP("t", 1), TP("u", 0)})
    again = run(share.heartbeat("g", ShareHeartbeat("a", 1)))  # the group moved on: a gets the new epoch
    assert again.member_epoch == 2 and again.assignment == frozenset({TP("t", 0)})
    assert run(share.heartbeat("g", ShareHeartbeat("a", 2))).assignment is None  # nothing new
    with pytest.raises(FencedMemberEpoch):
        run(share.heartbeat("g", ShareHeartbeat("a", 7)))
    with pytest.raises(UnknownMember):
        run(share.heartbeat("g", ShareHeartbeat("c", 3)))
    with pytest.raises(InvalidGroupRequest):
        run(share.heartbeat("g", ShareHeartbeat("c", 0)))  # a join names its topics
    assert run(share.heartbeat("g", ShareHeartbeat("b", -1))).member_epoch == -1
    described = share.describe("g")
    assert list(described.members) == ["a"] and described.state == "Stable"
    assert table.table.groups["g"].protocol_type == SHARE_PROTOCOL_TYPE
    assert table.table.groups["g"].generation == described.group_epoch == 3
    alone = run(share.heartbeat("g", ShareHeartbeat("a", 2)))  # b's partition of t comes back to a
    assert (alone.member_epoch, alone.assignment) == (3, frozenset({TP("t", 0), TP("t", 1)}))


def test_a_member_past_kafkas_share_group_size_is_refused_and_the_members_go_on() -> None:
    table = ShareTable(TOPICS)
    share = ShareGroupCoordinator(table, Clock())
    for i in range(SHARE_MEMBERS_MAX):
        last = run(share.heartbeat("g", ShareHeartbeat(f"m{i}", 0, ("t",))))
    with pytest.raises(GroupFull) as refused:  # Kafka's group.share.max.size, 200: GROUP_MAX_SIZE_REACHED
        run(share.heartbeat("g", ShareHeartbeat("one-more", 0, ("t",))))
    assert SHARE_MEMBERS_MAX == 200 and "already has 200 members" in str(refused.value)
    rejoined = run(share.heartbeat("g", ShareHeartbeat("m0", 0, ("t",))))  # a member rejoins
    assert rejoined.member_epoch == last.member_epoch
    assert run(share.heartbeat("g", ShareHeartbeat("m1", -1))).member_epoch == -1
    joined = run(share.heartbeat("g", ShareHeartbeat("one-more", 0, ("t",))))  # room again
    assert joined.member_epoch > last.member_epoch


def test_a_silent_member_is_removed_after_its_session() -> None:
    table, clock = ShareTable(TOPICS), Clock()
    share = ShareGroupCoordinator(table, clock, session_timeout_ms=1_000)
    run(share.heartbeat("g", ShareHeartbeat("a", 0, ("t",))))
    clock.now = 1_001
    assert run(share.expire_due()) == [("g", "a")]
    assert share.describe("g").state == "Empty"


def test_a_moment_the_leader_may_not_read_drops_nothing() -> None:
    """The sweep meets the group's partition leader unable to read its table for a moment (its read
    lease lapsed under load; same node, same term): the group is kept as it runs, not dropped and
    loaded again from the table, and swept once the table reads again."""
    table, clock = ShareTable(TOPICS), Clock()
    share = ShareGroupCoordinator(table, clock, session_timeout_ms=1_000)
    run(share.heartbeat("g", ShareHeartbeat("a", 0, ("t",))))
    running = share._groups["g"]
    table.unready = True
    clock.now = 1_001
    assert run(share.expire_due()) == []
    assert share._groups["g"] is running
    table.unready = False
    assert run(share.expire_due()) == [("g", "a")]


def test_a_coordinator_taking_over_goes_on_with_the_recorded_members_and_epoch() -> None:
    """A member keeps its id, epoch, subscription and door across a coordinator move. ``a`` was given
    epoch 2 after the last record (which holds it at 1): the new coordinator takes 2 once, then holds it
    to its epoch; a zombie's epoch past the group's is fenced; a restored member that never comes back
    is expired after its session, though nothing touched its group."""
    table, clock = ShareTable(TOPICS), Clock()
    first = ShareGroupCoordinator(table, clock, session_timeout_ms=1_000)
    run(first.heartbeat("g", ShareHeartbeat("a", 0, ("t",))))
    run(first.heartbeat("g", ShareHeartbeat("b", 0, ("t", "u"), door="http")))
    # not written: the group's epoch held
    assert run(first.heartbeat("g", ShareHeartbeat("a", 1))).member_epoch == 2
    assert [(m.member_id, m.epoch) for m in table.table.groups["g"].share_members] == [("a", 1), ("b", 2)]
    table.term = 2  # led here again, or by another node, in a new term
    clock.now = 5_000
    second = ShareGroupCoordinator(table, clock, session_timeout_ms=1_000)
    described = second.describe("g")
    assert (described.state, described.group_epoch) == ("Stable", 2)
    assert {m.member_id: m.door for m in described.members.values()} == {"a": "kafka", "b": "http"}
    assert described.members["b"].assigned == frozenset({TP("t", 1), TP("u", 0)})  # assigned afresh: the same
    answer = run(second.heartbeat("g", ShareHeartbeat("a", 2)))
    assert (answer.member_epoch, answer.assignment) == (2, None)  # nothing new for it
    with pytest.raises(FencedMemberEpoch):
        run(second.heartbeat("g", ShareHeartbeat("a", 1)))  # held to the epoch it came back with
    with pytest.raises(FencedMemberEpoch):
        run(second.heartbeat("g", ShareHeartbeat("b", 3)))
    third = ShareGroupCoordinator(table, clock, session_timeout_ms=1_000)
    table.term = 3
    assert run(third.expire_due()) == []  # the members' sessions start now, in this term
    clock.now = 6_001
    assert sorted(run(third.expire_due())) == [("g", "a"), ("g", "b")]
    assert third.describe("g").state == "Empty" and table.table.groups["g"].share_members == ()
    assert run(third.heartbeat("g", ShareHeartbeat("a", 0, ("t",)))).member_epoch == 5
    with pytest.raises(UnknownGroup):
        second.describe("never")


def test_one_group_one_protocol() -> None:
    table, clock = ShareTable(TOPICS), Clock()
    member = ConsumerInstance("i", "binary", "earliest", 10_000, 0, ())
    table.table.apply(encode(Join("http", member, "range", 10)))
    share = ShareGroupCoordinator(table, clock)
    with pytest.raises(NotConsumerGroup):
        run(share.heartbeat("http", ShareHeartbeat("a", 0, ("t",))))
    refused = table.table.apply(encode(ShareGroupRecord("http", 1, 0)))
    assert isinstance(refused, GroupNotEmpty)
    run(share.heartbeat("s", ShareHeartbeat("a", 0, ("t",))))
    assert isinstance(table.table.apply(encode(Forget("s"))), GroupNotEmpty)  # Kafka's NON_EMPTY_GROUP


def test_the_share_group_record_round_trips_never_goes_back_and_keeps_the_snapshot_row() -> None:
    member = ShareMember("m", 4, None, "client", "/127.0.0.1", ("t",), door="http")
    command = ShareGroupRecord("g", 4, 17, 100, (member,), {"t": 2})
    assert decode(encode(command)) == command
    written_before = msgpack.packb([11, "g", 4, 17])  # a record of the release before the bound: none
    assert decode(written_before) == ShareGroupRecord("g", 4, 17, None)
    before_members = msgpack.packb([11, "g", 4, 17, 100])  # of the release before members were recorded
    assert decode(before_members) == ShareGroupRecord("g", 4, 17, 100)
    table = GroupTable()
    table.apply(encode(command))
    table.apply(encode(ShareGroupRecord("g", 3, 18)))
    assert table.groups["g"].generation == 4 and table.groups["g"].share_members == (member,)
    rows = msgpack.unpackb(msgpack.packb(table.to_rows()), raw=False)
    assert GroupTable.from_rows(rows).groups == table.groups
    previous = GroupTable.from_rows([row[:11] for row in rows])  # the release before's row: no members
    assert previous.groups["g"].protocol_type == SHARE_PROTOCOL_TYPE
    assert previous.groups["g"].share_members == ()
    too_many = tuple(replace(member, member_id=f"m{i}") for i in range(SHARE_MEMBERS_MAX + 1))
    refused = GroupTable().apply(encode(ShareGroupRecord("g", 1, 0, 100, too_many)))
    assert isinstance(refused, InvalidCommand)


def test_a_consumer_protocol_member_may_not_join_a_share_group() -> None:
    table, clock = ShareTable(TOPICS), Clock()
    run(ShareGroupCoordinator(table, clock).heartbeat("g", ShareHeartbeat("a", 0, ("t",))))
    consumers = ConsumerGroupCoordinator(table, clock)  # type: ignore[arg-type]
    hb = Heartbeat(member_id="", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=1_000,
                   subscribed=("t",), server_assignor=None, owned=frozenset())  # fmt: skip
    with pytest.raises(NotConsumerGroup):
        run(consumers.heartbeat("g", hb))


def test_an_http_member_heartbeats_in_the_epoch_it_was_given_and_its_door_is_kept() -> None:
    """Epoch None (the HTTP door's every call): the member's own epoch, the group's new one once it moved
    on; an id that is no member (it left, or never joined) is UnknownMember, never a join."""
    table, clock = ShareTable(TOPICS), Clock()
    share = ShareGroupCoordinator(table, clock)
    run(share.heartbeat("g", ShareHeartbeat("h", 0, ("t",), door="http")))
    run(share.heartbeat("g", ShareHeartbeat("k", 0, ("u",))))  # a Kafka member moves the group to epoch 2
    answer = run(share.heartbeat("g", ShareHeartbeat("h", None, door="http")))
    assert answer.member_epoch == 2 and answer.assignment == frozenset({TP("t", 0), TP("t", 1)})
    assert {m.member_id: m.door for m in share.describe("g").members.values()} == {"h": "http", "k": "kafka"}
    clock.now = 30_000
    run(share.heartbeat("g", ShareHeartbeat("h", None, door="http")))  # its session starts again
    clock.now = 60_000
    assert run(share.expire_due()) == [("g", "k")]
    run(share.heartbeat("g", ShareHeartbeat("h", -1, door="http")))
    for gone in ("h", "never"):
        with pytest.raises(UnknownMember):
            run(share.heartbeat("g", ShareHeartbeat(gone, None, door="http")))


def test_a_share_group_past_the_bound_is_refused_on_both_sides_of_the_log() -> None:
    """``groups_max`` share groups per coordinator partition: the join creating one more is refused,
    naming the bound, and nothing of it is held; its members' groups go on; a deleted group frees its
    place. Records of groups proposed at once (each passed the coordinator's count) are counted again
    when applied, so every replica refuses the same one; a record of the release before counts no
    bound, and a group of another protocol becoming a share group counts as a new one."""
    table, clock = ShareTable(TOPICS), Clock()
    share = ShareGroupCoordinator(table, clock, groups_max=3)
    for name in ("g0", "g1", "g2"):
        run(share.heartbeat(name, ShareHeartbeat("a", 0, ("t",))))
    with pytest.raises(ShareGroupLimitReached) as refused:
        run(share.heartbeat("g3", ShareHeartbeat("a", 0, ("t",))))
    assert "'g3' not created" in str(refused.value) and "3 share groups" in str(refused.value)
    assert "--group-share-max-groups" in str(refused.value)
    assert share.members_of("g3") is None and "g3" not in table.table.groups
    assert sorted(share._locks) == ["g0", "g1", "g2"]  # a refused name leaves nothing behind
    grown = run(share.heartbeat("g1", ShareHeartbeat("b", 0, ("t",))))  # an existing group grows
    assert grown.member_epoch == 2
    assert run(share.heartbeat("g1", ShareHeartbeat("b", -1))).member_epoch == -1
    run(share.heartbeat("g2", ShareHeartbeat("a", -1)))
    assert table.table.apply(encode(Forget("g2"))).group is None  # DeleteGroups of the group emptied
    assert run(share.heartbeat("g3", ShareHeartbeat("a", 0, ("t",)))).member_epoch == 1

    replica = GroupTable()
    proposed = [encode(ShareGroupRecord(f"h{i}", 1, 0, 2)) for i in range(3)]  # all at once
    results = [replica.apply(command) for command in proposed]
    assert [type(r).__name__ for r in results] == ["GroupChanged", "GroupChanged", "ShareGroupLimitReached"]
    again = GroupTable()
    assert [type(again.apply(c)).__name__ for c in proposed] == [type(r).__name__ for r in results]
    assert replica.apply(encode(ShareGroupRecord("h0", 2, 1, 2))).group is not None  # not a new group
    assert not isinstance(replica.apply(msgpack.packb([11, "old", 1, 0])), Exception)
    replica.apply(encode(Committed("c", ("t",), 0)))  # offsets only: not yet a share group
    assert isinstance(replica.apply(encode(ShareGroupRecord("c", 1, 0, 3))), ShareGroupLimitReached)


def test_only_a_live_member_passes_the_check_a_share_session_opens_on() -> None:
    table, clock = ShareTable(TOPICS), Clock()
    share = ShareGroupCoordinator(table, clock, session_timeout_ms=1_000)
    run(share.heartbeat("g", ShareHeartbeat("a", 0, ("t",))))
    share.check_member("g", "a")  # joined: a session may open for it
    for group, member in (("g", "made-up"), ("other", "a")):
        with pytest.raises(UnknownMember):
            share.check_member(group, member)
    clock.now = 1_001  # its session passed, though no sweep removed it yet
    with pytest.raises(UnknownMember):
        share.check_member("g", "a")
    run(share.heartbeat("g", ShareHeartbeat("a", 1)))
    share.check_member("g", "a")
    run(share.heartbeat("g", ShareHeartbeat("a", -1)))  # left
    with pytest.raises(UnknownMember):
        share.check_member("g", "a")
