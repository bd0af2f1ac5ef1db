"""DescribeGroups on a coordinator that just took a classic group over answers the members the group
table holds, before any of them called it and before its tick loaded the group (as Kafka's new
coordinator, which loads a partition's groups before it answers): it had answered the group with no
members, as if they were gone (``kafka_api.group_apis.describe_groups`` over ``ClassicGroups.view``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.group_apis import describe_groups
from partitions.groups.errors import UnknownGroup
from tests.partitions.groups.test_classic_groups_failover import Replicated, _node, _stable_pair

DESCRIBE_GROUPS = 15


async def _no_http_group(name: str) -> Any:
    raise UnknownGroup(name)  # the HTTP door's groups: none of that name


def _door(groups: Any, node: str, coordinator: str) -> Any:
    return SimpleNamespace(
        allows=lambda operation, kind, name: True,
        coordinator_of=lambda topic, key: coordinator,
        node=SimpleNamespace(
            node_id=node, local=SimpleNamespace(groups=SimpleNamespace(describe=_no_http_group))
        ),
        groups=groups,
    )


def _describe(door: Any) -> Any:
    request = wire.Request(DESCRIBE_GROUPS, 5, 1, "test", SimpleNamespace(groups=("g",)))
    return describe_groups(door, request)


async def test_a_coordinator_that_took_the_group_over_describes_its_members_before_they_call() -> None:
    shared = Replicated()
    a, b = await _stable_pair(_node(shared, "n1"))
    shared.failover("n2")
    second = _node(shared, "n2")  # no call, no tick yet
    (described,) = (await _describe(_door(second, "n2", "n2"))).groups
    assert described.error_code == ErrorCode.none
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert {m.member_id: bytes(m.member_assignment) for m in described.members} == {
        a.member_id: b"A",
        b.member_id: b"B",
    }
    assert "g" not in second.groups  # described, not loaded: the members' sessions start at their call


async def test_a_node_named_coordinator_before_it_leads_the_partition_answers_not_coordinator() -> None:
    shared = Replicated()
    await _stable_pair(_node(shared, "n1"))
    second = _node(shared, "n2")  # the metadata names n2 already; n1 still leads the group's partition
    (described,) = (await _describe(_door(second, "n2", "n2"))).groups
    assert described.error_code == ErrorCode.not_coordinator and described.members == ()
