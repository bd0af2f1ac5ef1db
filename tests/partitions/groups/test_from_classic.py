"""A classic group with members becoming a consumer protocol group (``consumer/from_classic.py``, Kafka's
online upgrade), pure: each member keeps its partitions at the classic generation, and a group Kafka would
not convert is refused with Kafka's reason."""

from __future__ import annotations

import struct

import pytest

from partitions.groups.assignors import TopicPartition as TP
from partitions.groups.classic.members import ClassicGroup, ClassicGroupMember, GroupState
from partitions.groups.consumer.assignment import STABLE
from partitions.groups.consumer.from_classic import from_classic
from partitions.groups.consumer_protocol import encode_assignment
from partitions.groups.errors import NotConsumerGroup, NotUpgradable

# ConsumerProtocolSubscription v3: topic "t", no user data, no owned partitions, generation 7, rack "r1"
SUBSCRIPTION = (
    struct.pack(">hi", 3, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1) + struct.pack(">i", 0)
    + struct.pack(">i", 7) + struct.pack(">h", 2) + b"r1"
)  # fmt: skip


def _member(member_id: str, partitions: list[int], **changes: object) -> ClassicGroupMember:
    member = ClassicGroupMember(
        member_id, f"client-{member_id}", "/10.0.0.1", 6_000, 20_000,
        (("range", SUBSCRIPTION), ("roundrobin", SUBSCRIPTION)), 0,
        assignment=encode_assignment([TP("t", p) for p in partitions]),
    )  # fmt: skip
    for name, value in changes.items():
        setattr(member, name, value)
    return member


def _group(*members: ClassicGroupMember, **changes: object) -> ClassicGroup:
    group = ClassicGroup(
        "g",
        GroupState.STABLE,
        7,
        "consumer",
        "range",
        members[0].member_id,
        {m.member_id: m for m in members},
    )
    for name, value in changes.items():
        setattr(group, name, value)
    return group


def test_each_member_keeps_its_partitions_at_the_classic_generation() -> None:
    converted = from_classic(
        _group(_member("x", [0, 1]), _member("y", [2, 3]), _member("z", [])), {"t": 4}.get
    )
    assert (converted.group_epoch, converted.assignment_epoch, converted.state) == (7, 7, "Stable")
    assert dict(converted.partition_counts) == {"t": 4}
    x = converted.members["x"]
    assert (x.epoch, x.previous_epoch, x.state, x.subscribed, x.rack_id) == (7, 7, STABLE, ("t",), "r1")
    assert (x.client_id, x.client_host, x.rebalance_timeout_ms) == ("client-x", "/10.0.0.1", 20_000)
    assert x.assigned == frozenset({TP("t", 0), TP("t", 1)}) and converted.target["x"] == x.assigned
    assert x.classic is not None and x.classic.session_timeout_ms == 6_000
    assert [name for name, _ in x.classic.protocols] == ["range", "roundrobin"]  # every protocol it named
    assert converted.members["z"].assigned == frozenset()  # a member that joined since the last sync


@pytest.mark.parametrize(
    ("group", "reason"),
    [
        (_group(_member("x", [0]), protocol_type="connect"), "does not use the consumer embedded protocol"),
        (_group(_member("x", [0]), protocol=None), "has not chosen a protocol yet"),
        (
            _group(_member("x", [0], protocols=(("range", b"\x00"),))),
            "embedded consumer protocol is malformed",
        ),
        (_group(_member("x", [0], assignment=b"\x00\x00\xff")), "embedded consumer protocol is malformed"),
        (
            _group(
                _member("x", [0], assignment=encode_assignment([TP("t", 0)])[:-4] + b"\x00\x00\x00\x02ab")
            ),
            "an unsupported custom assignor is in use",
        ),
        (_group(_member("x", [0]), _member("y", [1])), "exceeds the consumer group maximum size"),
    ],
)
def test_a_group_kafka_would_not_convert_is_refused_with_its_reason(group: ClassicGroup, reason: str) -> None:
    """As Kafka's ``validateOnlineUpgrade`` and ``convertToConsumerGroup`` refuse, and raftlog's own
    refusal (a first rebalance under way)."""
    with pytest.raises(NotUpgradable) as refused:
        from_classic(group, {"t": 4}.get, members_max=1)
    assert isinstance(refused.value, NotConsumerGroup)  # GROUP_ID_NOT_FOUND at the Kafka door
    assert str(refused.value).startswith("Cannot upgrade classic group g to consumer group because ")
    assert reason in str(refused.value)


def test_the_migration_policy_may_refuse_the_upgrade() -> None:
    with pytest.raises(NotUpgradable, match="because online upgrade is disabled"):
        from_classic(_group(_member("x", [0])), {"t": 4}.get, upgrade=False)


def test_a_static_member_keeps_its_instance_id() -> None:
    converted = from_classic(_group(_member("x", [0, 1], instance_id="app-1")), {"t": 4}.get)
    assert converted.static_member("app-1") == converted.members["x"]
