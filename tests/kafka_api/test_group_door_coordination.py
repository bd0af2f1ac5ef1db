"""The Kafka door answers NOT_COORDINATOR for a classic group its node does not coordinate as its metadata
sees it, and leaves the group's state to the coordinator below the doors: a view that names no leader for a
moment (an election, gossip behind) must not lose a rebalance under way, which ``ClassicGroups`` keeps
while this node leads the group's partition in its term and lets go once another term or node does
(``tests/partitions/groups/test_classic_groups_failover.py``). It told the coordinator to drop the group."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api.group_apis import _coordinating
from partitions.groups.classic.members import GroupRefusal


class Untouchable:
    """The coordinator's groups: anything the door asks of them fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the door asked the groups' coordinator for {name!r}")


@pytest.mark.parametrize("seen", [None, "n2"])  # no leader known this moment, or another node
def test_a_group_not_coordinated_here_is_answered_and_nothing_of_it_let_go(seen: str | None) -> None:
    door = SimpleNamespace(
        coordinator_of=lambda topic, key: seen, node=SimpleNamespace(node_id="n1"), groups=Untouchable()
    )
    with pytest.raises(GroupRefusal) as refused:
        _coordinating(door, "g")  # type: ignore[arg-type]
    assert refused.value.code == ErrorCode.not_coordinator
