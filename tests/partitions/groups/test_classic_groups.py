"""The classic group protocol's state machine (``partitions.groups.classic.coordinator``), on a clock the
test moves."""

from __future__ import annotations

import asyncio

import pytest

from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic.members import GroupCode, GroupRefusal, GroupState, Joined, MemberIdRequired
from partitions.groups.consumer_protocol import encode_subscription
from partitions.groups.defaults import INITIAL_DELAY_MS_DEFAULT

PROTOCOLS = [("range", b"r-meta"), ("roundrobin", b"rr-meta")]


def _join(groups: ClassicGroups, member_id: str, now: int, protocols=PROTOCOLS, rebalance_ms: int = 5000,  # type: ignore[no-untyped-def]
          instance: str | None = None):  # fmt: skip
    return groups.join(
        "g",
        member_id,
        client_id="c",
        client_host="",
        protocol_type="consumer",
        protocols=protocols,
        session_timeout_ms=3000,
        rebalance_timeout_ms=rebalance_ms,
        require_known_id=instance is not None,  # static members get their id at once anyway
        now_ms=now,
        instance_id=instance,
    )


async def _alone(groups: ClassicGroups, now: int, member_id: str = "", **kwargs) -> Joined:  # type: ignore[no-untyped-def]
    """A group's first member: its rebalance (from Empty) ends on the coordinator's next tick after the
    initial delay (none in these tests unless they say so), never within the join itself."""
    joining = _join(groups, member_id, now, **kwargs)
    await asyncio.sleep(0)
    assert not joining.done(), "a first rebalance ends only on a tick"
    groups.tick(now + groups.initial_delay_ms)
    return await joining


async def test_three_members_join_sync_and_get_the_leaders_assignment() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    joined = await _alone(groups, 0)
    assert joined.generation == 1 and joined.leader == joined.member_id and joined.protocol == "range"
    a = joined.member_id
    # two more join: the group rebalances; it completes once every member (a too) has joined again
    b_join, c_join = _join(groups, "", 10), _join(groups, "", 10)
    assert groups.groups["g"].state is GroupState.PREPARING_REBALANCE and not b_join.done()
    with pytest.raises(GroupRefusal) as refused:
        groups.heartbeat("g", a, 1, 20)
    assert refused.value.code is GroupCode.rebalance_in_progress
    a_join = _join(groups, a, 30)
    results = await asyncio.gather(a_join, b_join, c_join)
    assert {r.generation for r in results} == {2}
    leader = results[0].leader
    assert leader == a and len(results[0].members) == 3 and results[1].members == ()
    ids = [r.member_id for r in results]
    follower = asyncio.ensure_future(groups.sync("g", ids[1], 2, {}, 40))
    await asyncio.sleep(0)
    assert not follower.done(), "a follower waits for the leader's assignment"
    assignments = {ids[0]: b"A", ids[1]: b"B", ids[2]: b"C"}
    assert await groups.sync("g", ids[0], 2, assignments, 41) == b"A"
    assert await follower == b"B"
    assert await groups.sync("g", ids[2], 2, {}, 42) == b"C"
    assert groups.groups["g"].state is GroupState.STABLE
    groups.heartbeat("g", ids[2], 2, 43)
    with pytest.raises(GroupRefusal) as stale:
        groups.heartbeat("g", ids[2], 1, 44)
    assert stale.value.code is GroupCode.illegal_generation


async def test_a_member_that_does_not_rejoin_in_time_is_dropped_and_one_that_leaves_rebalances() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    a = (await _alone(groups, 0, rebalance_ms=1000)).member_id
    b_join = _join(groups, "", 100, rebalance_ms=1000)
    groups.tick(500)
    assert not b_join.done()
    groups.tick(1200)  # a never rejoined within the rebalance timeout
    joined = await b_join
    assert joined.generation == 2 and [m for m, _ in joined.members] == [joined.member_id]
    assert a not in groups.groups["g"].members
    assert groups.leave("g", [(joined.member_id, None), ("nobody", None)], 1300) == [
        GroupCode.none,
        GroupCode.unknown_member_id,
    ]
    assert groups.groups["g"].state is GroupState.EMPTY


async def test_sessions_expire_and_commits_are_fenced_by_generation() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    joined = await _alone(groups, 0)
    await groups.sync("g", joined.member_id, 1, {joined.member_id: b"x"}, 1)
    groups.check_commit("g", joined.member_id, 1)
    with pytest.raises(GroupRefusal) as outside:  # Kafka's rule: from outside only while it has no members
        groups.check_commit("g", "", -1)
    assert outside.value.code is GroupCode.unknown_member_id
    with pytest.raises(GroupRefusal) as old:
        groups.check_commit("g", joined.member_id, 0)
    assert old.value.code is GroupCode.illegal_generation
    groups.tick(2000)
    assert joined.member_id in groups.groups["g"].members
    groups.tick(3500)  # no heartbeat for longer than the 3 s session
    assert joined.member_id not in groups.groups["g"].members
    with pytest.raises(GroupRefusal) as gone:
        groups.check_commit("g", joined.member_id, 1)
    assert gone.value.code is GroupCode.unknown_member_id
    groups.check_commit("g", "", -1)  # empty now: a consumer outside group management (or a reset) may


async def test_new_members_get_an_id_first_and_protocols_must_overlap() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    with pytest.raises(MemberIdRequired) as required:
        groups.join(
            "g",
            "",
            client_id="c",
            client_host="",
            protocol_type="consumer",
            protocols=PROTOCOLS,
            session_timeout_ms=3000,
            rebalance_timeout_ms=1000,
            require_known_id=True,
            now_ms=0,
        )
    member_id = required.value.member_id
    joined = await _alone(groups, 1, member_id)
    assert joined.member_id == member_id
    with pytest.raises(GroupRefusal) as unknown:
        _join(groups, "made-up", 2)
    assert unknown.value.code is GroupCode.unknown_member_id
    with pytest.raises(GroupRefusal) as disjoint:
        _join(groups, "", 3, protocols=[("sticky", b"")])
    assert disjoint.value.code is GroupCode.inconsistent_group_protocol


async def test_a_coordinator_that_loses_the_group_fails_its_waiting_members() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    a = (await _alone(groups, 0)).member_id
    waiting = _join(groups, "", 1)
    groups.drop("g")
    with pytest.raises(GroupRefusal) as lost:
        await waiting
    assert lost.value.code is GroupCode.not_coordinator and "g" not in groups.groups and a


async def _stable_pair(groups: ClassicGroups) -> tuple[str, str]:
    """Static members "a" and "b" in a Stable group at generation 2, assigned b"A" and b"B"."""
    a = (await _alone(groups, 0, instance="a")).member_id
    b_join = _join(groups, "", 10, instance="b")
    a_again = _join(groups, a, 20, instance="a")
    joined_a, joined_b = await asyncio.gather(a_again, b_join)
    b = joined_b.member_id
    assert joined_a.generation == 2 and joined_a.leader == a
    await groups.sync("g", a, 2, {a: b"A", b: b"B"}, 30, "a")
    assert await groups.sync("g", b, 2, {}, 31, "b") == b"B"
    return a, b


async def test_a_static_member_back_from_a_restart_takes_its_place_without_a_rebalance() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    a, b = await _stable_pair(groups)
    back = await _join(groups, "", 1000, instance="b")  # no member id: a new incarnation of "b"
    assert back.generation == 2 and back.member_id != b and back.leader == a and back.members == ()
    assert not back.skip_assignment and back.replaced_leader == "", "a follower assigns nothing anyway"
    group = groups.groups["g"]
    assert group.state is GroupState.STABLE and list(group.members) == [a, back.member_id]
    assert await groups.sync("g", back.member_id, 2, {}, 1001, "b") == b"B", "its assignment is kept"
    groups.heartbeat("g", a, 2, 1002, "a")  # the other member goes on at its generation
    with pytest.raises(GroupRefusal) as fenced:
        groups.heartbeat("g", b, 2, 1003, "b")
    assert fenced.value.code is GroupCode.fenced_instance_id, "the old incarnation is fenced"
    with pytest.raises(GroupRefusal) as fenced:
        groups.check_commit("g", b, 2, "b")
    assert fenced.value.code is GroupCode.fenced_instance_id


async def test_transactional_commits_are_fenced_by_what_they_name_as_kafka_s_coordinator_does() -> None:
    """KIP-447: a TxnOffsetCommit names the member, generation and instance id it holds; each is checked
    when given, and one naming none (a producer outside the group's management) commits whoever holds it."""
    groups = ClassicGroups(initial_delay_ms=0)
    a, b = await _stable_pair(groups)
    groups.check_txn_commit("g", a, 2, "a")
    groups.check_txn_commit("g", "", -1)  # unlike OffsetCommit: allowed while the group has members
    groups.check_txn_commit("g", b, -1)  # a member without its generation
    refusals = {
        "a zombie's generation": (("g", a, 1, "a"), GroupCode.illegal_generation),
        "a member that left": (("g", "gone", 2, None), GroupCode.unknown_member_id),
        "a generation alone, from outside": (("g", "", 1, None), GroupCode.illegal_generation),
        "an instance another member holds": (("g", a, 2, "b"), GroupCode.fenced_instance_id),
        "a group this coordinator has no member of": (("other", a, 2, None), GroupCode.unknown_member_id),
    }
    for what, (arguments, code) in refusals.items():
        with pytest.raises(GroupRefusal) as refused:
            groups.check_txn_commit(*arguments)
        assert refused.value.code is code, what
    back = await _join(groups, "", 1000, instance="b")  # a new incarnation of "b": the old one is fenced
    with pytest.raises(GroupRefusal) as fenced:
        groups.check_txn_commit("g", b, 2, "b")
    assert fenced.value.code is GroupCode.fenced_instance_id
    groups.check_txn_commit("g", back.member_id, 2, "b")


async def test_a_static_leader_back_from_a_restart_is_given_the_members_and_changed_protocols_rebalance() -> (
    None
):
    groups = ClassicGroups(initial_delay_ms=0)
    a, _ = await _stable_pair(groups)
    back = await _join(groups, "", 1000, instance="a")
    assert back.generation == 2 and back.leader == back.member_id and len(back.members) == 2
    # KIP-814: it learns the members but must not assign (the assignment stands); a client before
    # JoinGroup v9 is answered a follower of the member id it replaced (the door's part)
    assert back.skip_assignment and back.replaced_leader == a
    assert await groups.sync("g", back.member_id, 2, {}, 1001, "a") == b"A", "its assignment is kept"
    changed = _join(groups, "", 2000, protocols=[("range", b"other-meta")], instance="b")
    assert groups.groups["g"].state is GroupState.PREPARING_REBALANCE and not changed.done()
    leader_join = _join(groups, back.member_id, 2001, instance="a")
    results = await asyncio.gather(leader_join, changed)
    assert {r.generation for r in results} == {3}


async def test_static_members_join_at_once_and_leave_by_instance_id_or_are_fenced() -> None:
    groups = ClassicGroups(initial_delay_ms=0)
    a, b = await _stable_pair(groups)  # neither was asked to join again for an id (MEMBER_ID_REQUIRED)
    with pytest.raises(GroupRefusal) as unknown:
        _join(groups, "made-up", 100, instance="c")
    assert unknown.value.code is GroupCode.unknown_member_id
    with pytest.raises(GroupRefusal) as fenced:
        _join(groups, a, 100, instance="b")
    assert fenced.value.code is GroupCode.fenced_instance_id
    answers = groups.leave("g", [("", "b"), (b, "a"), ("", "zz")], 200)  # an admin's removal names instances
    assert answers == [GroupCode.none, GroupCode.fenced_instance_id, GroupCode.unknown_member_id]
    assert list(groups.groups["g"].members) == [a]
    assert groups.groups["g"].state is GroupState.PREPARING_REBALANCE
    live = groups.live("g")
    assert live is not None and [m.instance_id for m in live.members] == ["a"]


async def test_members_starting_together_land_in_the_first_generation_together() -> None:
    """Kafka's rule for a group's first rebalance: it ends on a tick with no member new since the last,
    so three consumers starting together share generation 1 (not: the first takes every partition and
    the other two rebalance them away a heartbeat later)."""
    groups = ClassicGroups(initial_delay_ms=0)
    joins = [_join(groups, "", 0), _join(groups, "", 20), _join(groups, "", 40)]
    groups.tick(100)  # two joined since the rebalance began: wait one more tick
    await asyncio.sleep(0)
    assert not any(j.done() for j in joins)
    groups.tick(200)
    results = await asyncio.gather(*joins)
    assert {r.generation for r in results} == {1} and len(results[0].members) == 3


async def test_the_initial_delay_extends_while_new_members_come_within_the_rebalance_timeout() -> None:
    assert ClassicGroups().initial_delay_ms == INITIAL_DELAY_MS_DEFAULT == 3000  # Kafka's default
    groups = ClassicGroups(initial_delay_ms=3000)
    joins = [_join(groups, "", 0, rebalance_ms=10_000)]
    groups.tick(2999)
    joins.append(_join(groups, "", 2500, rebalance_ms=10_000))
    groups.tick(3000)  # due, a member came: 3 s more (7 s of the rebalance timeout left before)
    joins.append(_join(groups, "", 5000, rebalance_ms=10_000))
    groups.tick(6000)  # again: 3 s more, 1 s left after
    joins.append(_join(groups, "", 8000, rebalance_ms=10_000))
    groups.tick(9000)  # again: the last 1 s
    joins.append(_join(groups, "", 9500, rebalance_ms=10_000))
    groups.tick(9999)
    await asyncio.sleep(0)
    assert not any(j.done() for j in joins)
    groups.tick(10_000)  # the rebalance timeout is spent: it ends with everyone who came
    results = await asyncio.gather(*joins)
    assert {r.generation for r in results} == {1} and len(results[0].members) == 5


async def test_a_group_that_emptied_waits_the_initial_delay_again_and_the_delay_is_bounded() -> None:
    groups = ClassicGroups(initial_delay_ms=500)
    a = (await _alone(groups, 0)).member_id
    assert groups.leave("g", [(a, None)], 600) == [GroupCode.none]
    assert groups.groups["g"].state is GroupState.EMPTY
    back = _join(groups, "", 700)
    groups.tick(1199)
    await asyncio.sleep(0)
    assert not back.done()
    groups.tick(1200)
    assert (await back).generation == 3  # 1: a alone, 2: emptied, 3: back
    with pytest.raises(ValueError, match="must be >= 0"):
        ClassicGroups(initial_delay_ms=-1)


async def test_offset_delete_spares_what_consumers_subscribe_to_and_refuses_other_groups_with_members() -> (
    None
):
    """Kafka's coordinator rule for OffsetDelete: no members, nothing held; a consumers' group holds the
    topics its members subscribe to; a group of another protocol type (Kafka Connect's workers) with
    members is refused whole (NON_EMPTY_GROUP)."""
    groups = ClassicGroups(initial_delay_ms=0)
    assert groups.subscribed_topics("g") is None
    protocols = [("range", encode_subscription(["orders", "payments"]))]
    joined = await _alone(groups, 0, protocols=protocols)
    assert groups.subscribed_topics("g") == {"orders", "payments"}
    groups.leave("g", [(joined.member_id, None)], 10)
    assert groups.subscribed_topics("g") is None, "an empty group holds nothing"
    connect = groups.join(
        "workers", "", client_id="c", client_host="", protocol_type="connect",
        protocols=[("sessioned", b"worker-metadata")], session_timeout_ms=3000, rebalance_timeout_ms=5000,
        require_known_id=False, now_ms=20,
    )  # fmt: skip
    groups.tick(20)
    await connect
    with pytest.raises(GroupRefusal) as refused:
        groups.subscribed_topics("workers")
    assert refused.value.code is GroupCode.non_empty_group


async def test_an_idle_tick_waits_for_the_next_look_for_groups_or_a_group_made_meanwhile() -> None:
    """With no group held, the node's tick (``GroupCoordinator.run``) waits in ``idle``: until the next
    look for groups to adopt is due, or a join makes a group, whose rebalance then runs on the tick."""
    groups = ClassicGroups(initial_delay_ms=0)
    await asyncio.wait_for(groups.idle(0), 30)  # never looked for groups yet: due at once
    groups.tick(1_000_000)  # looked at 1,000,000 ms: the next look is due 1 s later
    assert groups.groups == {}
    await asyncio.wait_for(groups.idle(1_000_000 + 1_000), 30)  # due now
    waiting = asyncio.ensure_future(groups.idle(0))  # as if the next look were 1,001 s away
    await asyncio.sleep(0)
    assert not waiting.done()
    joining = _join(groups, "", 1_000_000)
    await asyncio.wait_for(waiting, 30)  # the join made a group: the tick goes on at once
    assert not joining.done()
    groups.tick(1_000_000)
    assert (await joining).generation == 1
