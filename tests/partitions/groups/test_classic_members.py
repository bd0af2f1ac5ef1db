"""A classic member of a consumer protocol group (``consumer/classic_members.py``, Kafka's online
migration), step by step on group values: taken in, synced, told to rejoin, revoking by rejoining, left."""

from __future__ import annotations

import struct

import pytest

from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.classic.members import GroupCode, GroupRefusal, MemberIdRequired
from partitions.groups.consumer import classic_members
from partitions.groups.consumer.assignment import STABLE, UNREVOKED
from partitions.groups.consumer.classic_members import ClassicJoin
from partitions.groups.consumer.group import ConsumerGroup, ConsumerMember, Heartbeat, heartbeat
from partitions.groups.consumer_protocol import decode_assignment, read_subscription
from partitions.groups.group_commands import ConsumerGroupRecord, decode, encode

COUNTS = {"t": 4}


def count(topic: str) -> int:
    """A topic's partitions (0: no such topic), as the coordinator gives them to a classic join."""
    return COUNTS.get(topic, 0)


ALL = frozenset(TP("t", p) for p in range(4))


def subscription(version: int, topics: list[str], owned: list[TP] = (), rack: str | None = None) -> bytes:
    """A ConsumerProtocolSubscription as Kafka's clients write it (v0-v3)."""

    def string(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    parts = [struct.pack(">hi", version, len(topics)), *(string(t) for t in topics), struct.pack(">i", -1)]
    if version >= 1:
        by_topic: dict[str, list[int]] = {}
        for tp in owned:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        parts.append(struct.pack(">i", len(by_topic)))
        for topic, numbers in by_topic.items():
            parts += [
                string(topic),
                struct.pack(">i", len(numbers)),
                *(struct.pack(">i", p) for p in numbers),
            ]
    if version >= 2:
        parts.append(struct.pack(">i", 3))
    if version >= 3:
        parts.append(struct.pack(">h", -1) if rack is None else string(rack))
    return b"".join(parts)


def classic_join(member_id: str = "c", owned: list[TP] = (), **changes: object) -> ClassicJoin:
    fields: dict[str, object] = {
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": (("range", subscription(3, ["t"], list(owned))), ("roundrobin", subscription(3, ["t"]))),
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "client_id": "classic-client",
        "client_host": "/127.0.0.1",
    }
    fields.update(changes)
    return ClassicJoin(**fields)  # type: ignore[arg-type]


def modern(group: ConsumerGroup, member: str, epoch: int = 0, owned: frozenset[TP] | None = frozenset()):
    hb = Heartbeat(member if epoch else "", epoch, None, None, 30_000 if not epoch else -1,
                   ("t",) if not epoch else None, None, owned, "modern", "/127.0.0.1")  # fmt: skip
    return heartbeat(group, hb, COUNTS, member)


def refused(code: GroupCode, call: object, *args: object) -> GroupRefusal:
    with pytest.raises(GroupRefusal) as caught:
        call(*args)  # type: ignore[operator]
    assert caught.value.code == code, caught.value
    return caught.value


def test_the_subscription_is_read_whole_in_each_version() -> None:
    for version in range(4):
        owned = [TP("t", 1), TP("u", 0)] if version >= 1 else []
        read = read_subscription(subscription(version, ["t", "u"], owned, "rack-a"))
        assert (read.version, read.topics, list(read.owned)) == (version, ("t", "u"), owned)
        assert read.rack == ("rack-a" if version >= 3 else None)


def test_a_classic_member_is_taken_into_a_consumer_protocol_group_and_shares_its_partitions() -> None:
    group = modern(ConsumerGroup("g"), "m").group  # the consumer protocol member holds all four
    with pytest.raises(MemberIdRequired) as required:  # JoinGroup v4+: a new member joins again with an id
        classic_members.join(group, classic_join(member_id=""), count, "c-new")
    assert required.value.member_id == "c-new"
    joined = classic_members.join(group, classic_join(), count, "unused")
    member = joined.group.members["c"]
    assert member.classic is not None and member.classic.protocol == "range"
    assert member.classic.session_timeout_ms == 10_000 and member.rebalance_timeout_ms == 30_000
    assert joined.group.group_epoch == 2 and joined.member_epoch == 2  # the generation it is answered
    assert member.assigned == frozenset()  # its half is still the consumer protocol member's
    # SyncGroup: its assignment (nothing yet), in its subscription's version
    assignment = classic_members.sync(joined.group, "c", 2, "consumer", "range")
    assert struct.unpack_from(">h", assignment)[0] == 3 and decode_assignment(assignment) == ()
    refused(GroupCode.illegal_generation, classic_members.sync, joined.group, "c", 1, "consumer", "range")
    refused(
        GroupCode.inconsistent_group_protocol, classic_members.sync, joined.group, "c", 2, None, "roundrobin"
    )
    refused(
        GroupCode.unknown_member_id, classic_members.sync, joined.group, "m", 1, None, None
    )  # not classic
    # the consumer protocol member revokes its other half; the classic member's heartbeat says rejoin
    target = joined.group.target["c"]
    revoking = modern(joined.group, "m", 1, owned=ALL)
    released = modern(revoking.group, "m", 1, owned=ALL - target).group
    assert released.members["m"].assigned == ALL - target
    _, _, rejoin = classic_members.check_heartbeat(released, "c", 2)
    assert rejoin is not None and rejoin.code == GroupCode.rebalance_in_progress
    again = classic_members.join(released, classic_join(), count, "unused")
    assert again.group.members["c"].assigned == target and again.group.members["c"].state == STABLE
    assert decode_assignment(classic_members.sync(again.group, "c", 2, "consumer", "range")) == tuple(
        sorted(target)
    )
    assert classic_members.check_heartbeat(again.group, "c", 2)[2] is None  # settled: no rejoin


def test_a_classic_member_revokes_by_rejoining_without_what_it_gave_up() -> None:
    group = classic_members.join(ConsumerGroup("g"), classic_join(), count, "unused").group
    assert group.members["c"].assigned == ALL
    joined = modern(group, "m")  # a consumer protocol member joins: the classic member must give two up
    target = joined.group.target["m"]
    # the classic member learns it at its next heartbeat, and rejoins still owning all four
    _, _, rejoin = classic_members.check_heartbeat(joined.group, "c", 1)
    assert rejoin is not None and rejoin.code == GroupCode.rebalance_in_progress
    kept = classic_members.join(joined.group, classic_join(owned=sorted(ALL)), count, "unused")
    member = kept.group.members["c"]
    assert (member.state, member.revoking, member.assigned) == (UNREVOKED, target, ALL - target)
    assert kept.member_epoch == 1  # revoking in its epoch; SyncGroup answers what it keeps
    assert (
        set(decode_assignment(classic_members.sync(kept.group, "c", 1, "consumer", "range"))) == ALL - target
    )
    assert classic_members.check_heartbeat(kept.group, "c", 1)[2] is not None  # rejoin once revoked
    done = classic_members.join(kept.group, classic_join(owned=sorted(ALL - target)), count, "unused")
    assert done.group.members["c"].state == STABLE and done.member_epoch == 2
    assert modern(done.group, "m", 2, owned=frozenset()).group.members["m"].assigned == target


def test_joins_refused_as_kafka_refuses_them() -> None:
    group = classic_members.join(modern(ConsumerGroup("g"), "m").group, classic_join(), count, "x").group
    words = refused(
        GroupCode.inconsistent_group_protocol, classic_members.join, group,
        classic_join("d", protocol_type="connect"), count, "x",
    )  # fmt: skip
    assert "protocols are not supported" in str(words)
    shared_none = classic_join("d", protocols=(("cooperative-sticky", subscription(1, ["t"])),))
    refused(GroupCode.inconsistent_group_protocol, classic_members.join, group, shared_none, count, "x")
    refused(GroupCode.inconsistent_group_protocol, classic_members.join, group, classic_join("m"), count, "x")
    unknown = refused(
        GroupCode.unknown_member_id, classic_members.join, group, classic_join("d", instance_id="app-1"),
        count, "x",
    )  # fmt: skip
    assert "Instance id app-1 is unknown" in str(unknown)
    garbled = classic_join("d", protocols=(("range", b"\x00"),))
    with pytest.raises(MemberIdRequired):  # as Kafka: the member id first, the subscription read after
        classic_members.join(group, classic_join("", protocols=garbled.protocols), count, "e")
    words = refused(GroupCode.inconsistent_group_protocol, classic_members.join, group, garbled, count, "x")
    assert str(words) == "Malformed embedded consumer protocol in subscription deserialization."
    full = refused(
        GroupCode.group_max_size_reached, classic_members.join, group, classic_join("d"), count, "x", 2
    )
    assert "maximum capacity of 2" in str(full)


def test_leave_fences_each_member_named_and_answers_an_unknown_one_alone() -> None:
    group = classic_members.join(modern(ConsumerGroup("g"), "m").group, classic_join(), count, "x").group
    after, answers, gone = classic_members.leave(group, [("c", None), ("nobody", None)])
    assert answers == [GroupCode.none, GroupCode.unknown_member_id]
    assert [m.member_id for m in gone] == ["c"] and set(after.members) == {"m"}
    assert after.group_epoch == group.group_epoch + 1


def test_a_classic_member_round_trips_in_the_groups_record_and_an_older_row_reads_without_it() -> None:
    group = classic_members.join(modern(ConsumerGroup("g"), "m").group, classic_join(), count, "x").group
    assert ConsumerGroup.from_row("g", group.to_row()) == group
    command = ConsumerGroupRecord("g", group, 7)
    assert decode(encode(command)) == command
    member = group.members["c"]
    assert ConsumerMember.from_row(member.to_row()[:15]).classic is None  # a row written before


def test_a_classic_static_member_joins_at_once_and_a_restarted_instance_takes_its_place() -> None:
    """KIP-345 in a consumer protocol group, as Kafka 4.4's ``getOrMaybeSubscribeStaticConsumerGroupMember``:
    no MEMBER_ID_REQUIRED; without a member id, the instance's member (released or not) is replaced by the
    new id and keeps its partitions; with another member id than its instance's, FENCED_INSTANCE_ID."""
    group = modern(ConsumerGroup("g"), "m").group
    first = classic_members.join(group, classic_join("", instance_id="app-1"), count, "s1")
    assert first.member_id == "s1" and first.group.members["s1"].instance_id == "app-1"
    group = modern(first.group, "m", 1, frozenset()).group  # m gives up what s1 is to get
    group = classic_members.join(group, classic_join("s1", instance_id="app-1"), count, "unused").group
    held = group.members["s1"].assigned
    assert held, group
    again = classic_members.join(
        group, classic_join("", owned=sorted(held), instance_id="app-1"), count, "s2"
    )
    assert again.left is not None and again.left.member_id == "s1"
    assert "s1" not in again.group.members and again.group.members["s2"].instance_id == "app-1"
    assert again.group.members["s2"].assigned == held  # its partitions, under the new id
    fenced = refused(
        GroupCode.fenced_instance_id, classic_members.join, again.group,
        classic_join("s1", instance_id="app-1"), count, "x",
    )  # fmt: skip
    assert "is not the member s2" in str(fenced)
