"""The consumer group protocol's state machine (KIP-848), pure: epochs, target assignments, revocation
before assignment, leave, static members, fencing, and the group's row in the replicated table."""

from __future__ import annotations

import pytest

from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.consumer.assignment import STABLE, UNRELEASED, UNREVOKED, uniform_assign
from partitions.groups.consumer.group import (
    ConsumerGroup,
    ConsumerMember,
    Heartbeat,
    fence,
    heartbeat,
)
from partitions.groups.errors import (
    FencedInstanceId,
    FencedMemberEpoch,
    GroupFull,
    GroupNotEmpty,
    InvalidGroupRequest,
    InvalidRegularExpression,
    UnknownMember,
    UnreleasedInstanceId,
    UnsupportedAssignor,
)
from partitions.groups.group_commands import ClassicGroupMetadata, ConsumerGroupRecord, Forget, decode, encode
from partitions.groups.group_model import ClassicMember
from partitions.groups.state import GroupChanged, GroupTable

COUNTS = {"t": 4}
ALL = frozenset(TP("t", p) for p in range(4))


def join(group: ConsumerGroup, member: str, instance: str | None = None, assignor: str | None = None):
    hb = Heartbeat("", 0, instance, None, 30_000, ("t",), assignor, frozenset(), "client", "/127.0.0.1")
    return heartbeat(group, hb, COUNTS, member)


def beat(group: ConsumerGroup, member: str, epoch: int, owned=None, instance: str | None = None):
    return heartbeat(group, Heartbeat(member, epoch, instance, owned=owned), COUNTS, "unused")


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    a = join(ConsumerGroup("g"), "a")
    assert (a.member_id, a.member_epoch, a.assignment) == ("a", 1, ALL)
    assert a.group.group_epoch == a.group.assignment_epoch == 1
    assert a.group.state == "Stable"


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    g = join(ConsumerGroup("g"), "a").group
    b = join(g, "b")
    # b joins: the group epoch is 2, the target splits 2/2, but a still holds everything
    assert b.group.group_epoch == 2 and b.group.state == "Reconciling"
    assert b.member_epoch == 2 and b.assignment == frozenset()
    assert b.group.members["b"].state == UNRELEASED
    target_b = b.group.target["b"]
    assert len(target_b) == 2
    # a's heartbeat: it keeps its half, must revoke the other, stays in epoch 1 meanwhile
    a = beat(b.group, "a", 1, owned=ALL)
    assert a.member_epoch == 1 and a.assignment == ALL - target_b
    assert a.group.members["a"].state == UNREVOKED and a.group.members["a"].revoking == target_b
    # b asks again: a has not revoked yet, b still gets nothing
    b2 = beat(a.group, "b", 2, owned=frozenset())
    assert b2.group.members["b"].assigned == frozenset()
    # a revoked (reports owning only its half): epoch 2, stable
    a2 = beat(b2.group, "a", 1, owned=ALL - target_b)
    assert a2.member_epoch == 2 and a2.group.members["a"].state == STABLE
    # now b gets its half
    b3 = beat(a2.group, "b", 2, owned=frozenset())
    assert b3.assignment == target_b and b3.group.state == "Stable"


def test_a_member_never_holds_a_partition_another_holds() -> None:
    g = ConsumerGroup("g")
    for name in "abc":
        g = join(g, name).group
    owned = {name: frozenset[TP]() for name in "abc"}
    for _ in range(6):  # every member heartbeats in turn, reporting what it owns
        for name in "abc":
            answer = beat(g, name, g.members[name].epoch, owned=owned[name])
            g = answer.group
            owned[name] = g.members[name].assigned
            held = [tp for m in g.members.values() for tp in m.assigned | m.revoking]
            assert len(held) == len(set(held))
    assert g.state == "Stable"
    assert sorted(len(m.assigned) for m in g.members.values()) == [1, 1, 2]
    assert frozenset().union(*(m.assigned for m in g.members.values())) == ALL


def test_epochs_fence_a_member_that_missed_a_step() -> None:
    g = join(ConsumerGroup("g"), "a").group
    with pytest.raises(FencedMemberEpoch):
        beat(g, "a", 5, owned=ALL)
    g = join(g, "b").group
    g = beat(g, "a", 1, owned=ALL).group  # a revokes in epoch 1
    g = beat(g, "a", 1, owned=g.members["a"].assigned).group  # now epoch 2, previous 1
    assert (g.members["a"].epoch, g.members["a"].previous_epoch) == (2, 1)
    # the previous epoch with a subset of its partitions is a lost answer: accepted
    assert beat(g, "a", 1, owned=g.members["a"].assigned).member_epoch == 2
    with pytest.raises(FencedMemberEpoch):
        beat(g, "a", 1, owned=ALL)  # partitions it no longer has
    with pytest.raises(FencedMemberEpoch):
        rejoin = Heartbeat("a", 0, None, None, 1_000, ("t",), None, frozenset())
        heartbeat(g, rejoin, COUNTS, "x")  # an epoch older than its previous one
    with pytest.raises(UnknownMember):
        beat(g, "zz", 1)


def test_leave_frees_partitions_and_bumps_the_group_epoch() -> None:
    g = join(join(ConsumerGroup("g"), "a").group, "b").group
    g = beat(g, "a", 1, owned=ALL).group
    g = beat(g, "a", 1, owned=g.members["a"].assigned).group
    g = beat(g, "b", 2, owned=frozenset()).group
    left = heartbeat(g, Heartbeat("b", -1), COUNTS, "x")
    assert left.member_epoch == -1 and "b" not in left.group.members
    assert left.group.group_epoch == 3
    a = beat(left.group, "a", 2, owned=left.group.members["a"].assigned)
    assert a.member_epoch == 3 and a.assignment == ALL


def test_static_member_leaves_for_a_while_and_comes_back_with_its_partitions() -> None:
    g = join(ConsumerGroup("g"), "a", instance="i1").group
    away = heartbeat(g, Heartbeat("a", -2, "i1"), COUNTS, "x")
    assert away.member_epoch == -2 and away.group.members["a"].epoch == -2
    assert away.group.group_epoch == 1  # no rebalance while it is away
    with pytest.raises(UnreleasedInstanceId):
        join(g, "a2", instance="i1")  # the instance id is still held (not left)
    back = join(away.group, "a2", instance="i1")
    assert back.member_id == "a2" and back.assignment == ALL and back.member_epoch == 1
    assert set(back.group.members) == {"a2"} and back.left is not None and back.left.member_id == "a"
    with pytest.raises(FencedInstanceId):
        beat(back.group, "a", 1, instance="i1")


def test_requests_checked_as_kafka_checks_them() -> None:
    g = ConsumerGroup("g")
    with pytest.raises(InvalidGroupRequest, match="SubscribedTopicNames"):
        heartbeat(g, Heartbeat("", 0, rebalance_timeout_ms=1, owned=frozenset()), COUNTS, "a")
    with pytest.raises(InvalidGroupRequest, match="RebalanceTimeoutMs"):
        heartbeat(g, Heartbeat("", 0, subscribed=("t",), owned=frozenset()), COUNTS, "a")
    with pytest.raises(InvalidGroupRequest, match="MemberEpoch"):
        heartbeat(g, Heartbeat("a", -3), COUNTS, "a")
    with pytest.raises(InvalidRegularExpression, match="longer than 1000"):  # its syntax: RE2's, resolved
        heartbeat(g, Heartbeat("a", 1, subscribed_regex="t" * 1001), COUNTS, "a")
    with pytest.raises(UnsupportedAssignor):
        join(g, "a", assignor="sticky")
    with pytest.raises(GroupFull):
        heartbeat(
            join(g, "a").group, Heartbeat("", 0, None, None, 1, ("t",), None, frozenset()), COUNTS, "b", 1
        )


def test_range_assignor_when_members_ask_for_it() -> None:
    g = join(ConsumerGroup("g"), "a", assignor="range").group
    g = join(g, "b", assignor="range").group
    assert g.assignor == "range"
    assert g.target["a"] == {TP("t", 0), TP("t", 1)} and g.target["b"] == {TP("t", 2), TP("t", 3)}


def test_uniform_is_sticky_and_balanced() -> None:
    first = uniform_assign({"a": ["t"], "b": ["t"]}, {"t": 6}, {})
    assert sorted(len(v) for v in first.values()) == [3, 3]
    second = uniform_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 6}, first)
    assert sorted(len(v) for v in second.values()) == [2, 2, 2]
    assert second["a"] <= first["a"] and second["b"] <= first["b"]  # nobody's kept partition moves


def test_partitions_added_bump_the_epoch() -> None:
    g = join(ConsumerGroup("g"), "a").group
    grown = heartbeat(g, Heartbeat("a", 1, owned=ALL), {"t": 6}, "x")
    assert grown.group.group_epoch == 2 and len(grown.assignment or ()) == 6


def test_regular_expression_subscriptions_follow_the_topics_they_resolve_to() -> None:
    """The coordinator resolves the member's regex (``topic_regex``) and passes the topics in: a change
    of them bumps the group epoch; None keeps what the member resolved to before."""
    hb = Heartbeat("", 0, None, None, 30_000, None, None, frozenset(), subscribed_regex="orders-.*")
    counts = {"orders-1": 2, "orders-2": 1}
    first = heartbeat(ConsumerGroup("g"), hb, counts, "a", regex_topics=("orders-1",))
    assert first.assignment == {TP("orders-1", 0), TP("orders-1", 1)}
    assert first.group.members["a"].regex_topics == ("orders-1",)
    kept = heartbeat(first.group, Heartbeat("a", 1, owned=first.assignment), counts, "")
    assert kept.group == first.group
    grown = heartbeat(
        first.group,
        Heartbeat("a", 1, owned=first.assignment),
        counts,
        "",
        regex_topics=("orders-1", "orders-2"),
    )
    assert grown.group.group_epoch == 2 and TP("orders-2", 0) in (grown.assignment or ())


def test_fenced_member_leaves_the_target() -> None:
    g = join(join(ConsumerGroup("g"), "a").group, "b").group
    gone = fence(g, "b")
    assert "b" not in gone.members and "b" not in gone.target and gone.group_epoch == g.group_epoch + 1
    assert gone.assignment_epoch == g.assignment_epoch  # a target to compute for "a" at the next beat
    empty = fence(gone, "a")
    # the last member gone: the empty target at the new epoch, as Kafka 4.4 writes it
    assert (empty.state, empty.group_epoch, empty.assignment_epoch) == (
        "Empty",
        gone.group_epoch + 1,
        gone.group_epoch + 1,
    )
    again = join(empty, "c")  # a member joining the empty group gets a target at a later epoch
    assert again.group.group_epoch == again.group.assignment_epoch == empty.group_epoch + 1


def test_row_round_trip() -> None:
    g = beat(join(join(ConsumerGroup("g"), "a", instance="i").group, "b").group, "a", 1, owned=ALL).group
    assert ConsumerGroup.from_row("g", g.to_row()) == g


# -- the group's record in the replicated table ------------------------------------------------------


def _stable_pair() -> ConsumerGroup:
    return beat(join(join(ConsumerGroup("g"), "a", instance="i").group, "b").group, "a", 1, owned=ALL).group


def test_the_record_round_trips_and_is_kept_in_snapshots() -> None:
    state = _stable_pair()
    command = ConsumerGroupRecord("g", state, 7)
    assert decode(encode(command)) == command
    table = GroupTable()
    changed = table.apply(encode(command))
    assert isinstance(changed, GroupChanged) and changed.group is not None
    assert (changed.group.protocol_type, changed.group.generation) == ("consumer", state.group_epoch)
    restored = GroupTable.from_rows(table.to_rows())
    assert restored.groups["g"].consumer == state


def test_rows_of_the_release_before_still_decode() -> None:
    # a snapshot row as the release before wrote it: ten fields, no consumer group
    old_row = ["g", "range", 3, [], {}, {"t": 4}, 5, "consumer", ["t"], None]
    assert GroupTable.from_rows([old_row]).groups["g"].consumer is None
    # a member row without the regular expression fields (the first layout of this record)
    member = _stable_pair().members["a"]
    assert ConsumerMember.from_row(member.to_row()[:13]) == member


def test_one_group_one_protocol_in_the_table() -> None:
    table = GroupTable()
    classic = ClassicMember("m", None, "c", "/h", 30_000, 10_000, b"s", b"a")
    table.apply(encode(ClassicGroupMetadata("g", "consumer", "range", 1, "m", (classic,), 1)))
    refused = table.apply(encode(ConsumerGroupRecord("g", _stable_pair(), 2)))
    assert isinstance(refused, GroupNotEmpty)
    table.apply(
        encode(ClassicGroupMetadata("g", "consumer", "", 2, None, (), 3))
    )  # the classic group empties
    assert isinstance(table.apply(encode(ConsumerGroupRecord("g", _stable_pair(), 4))), GroupChanged)
    over = table.apply(encode(ClassicGroupMetadata("g", "consumer", "range", 9, "m", (classic,), 5)))
    assert isinstance(over, GroupNotEmpty)
    assert isinstance(table.apply(encode(Forget("g"))), GroupNotEmpty)


def test_a_conversion_replaces_the_classic_group_only_at_the_generation_it_read() -> None:
    """``ConsumerGroupRecord.converts`` (Kafka's online upgrade): applied over the classic members while
    the table holds the generation the coordinator read; refused once they wrote another (a rebalance
    completed meanwhile), and never over another protocol's group. Its fifth field round-trips, and a
    record without it keeps four."""
    table = GroupTable()
    classic = ClassicMember("m", None, "c", "/h", 30_000, 10_000, b"s", b"a")
    table.apply(encode(ClassicGroupMetadata("g", "consumer", "range", 3, "m", (classic,), 1)))
    state = _stable_pair()
    stale = ConsumerGroupRecord("g", state, 2, converts=2)
    assert decode(encode(stale)) == stale
    assert isinstance(table.apply(encode(stale)), GroupNotEmpty)
    assert table.groups["g"].classic_members == (classic,)
    changed = table.apply(encode(ConsumerGroupRecord("g", state, 2, converts=3)))
    assert isinstance(changed, GroupChanged) and changed.group is not None
    assert (changed.group.classic_members, changed.group.consumer) == ((), state)
    again = table.apply(encode(ConsumerGroupRecord("g", state, 3, converts=3)))  # its members hold it now
    assert isinstance(again, GroupNotEmpty)
    assert len(encode(ConsumerGroupRecord("g", state, 2))) < len(
        encode(ConsumerGroupRecord("g", state, 2, 3))
    )
    fresh = GroupTable()  # no record of the group: a classic group whose first rebalance is not written
    assert isinstance(fresh.apply(encode(ConsumerGroupRecord("h", state, 1, converts=0))), GroupChanged)


def test_a_downgrade_replaces_the_consumer_group_only_at_the_epoch_it_read() -> None:
    """``ClassicGroupMetadata.converts`` (Kafka's online downgrade, a record of version 1): applied over a
    consumer protocol group while the table holds the epoch its coordinator read, the classic group then
    collecting joins; refused otherwise. A version 0 record's extra fields stay a later version's."""
    table = GroupTable()
    state = _stable_pair()
    table.apply(encode(ConsumerGroupRecord("g", state, 1)))
    classic = ClassicMember("m", None, "c", "/h", 30_000, 10_000, b"s", b"a")
    stale = ClassicGroupMetadata("g", "consumer", "range", 9, "m", (classic,), 2, True, state.group_epoch - 1)
    assert decode(encode(stale)) == stale
    assert isinstance(table.apply(encode(stale)), GroupNotEmpty)
    assert table.groups["g"].consumer == state
    down = ClassicGroupMetadata("g", "consumer", "range", 9, "m", (classic,), 2, True, state.group_epoch)
    changed = table.apply(encode(down))
    assert isinstance(changed, GroupChanged) and changed.group is not None
    assert changed.group.consumer is None and changed.group.classic_members == (classic,)
    assert changed.group.classic_rebalancing and changed.group.generation == 9
    assert isinstance(table.apply(encode(down)), GroupNotEmpty)  # no consumer group at that epoch any more
