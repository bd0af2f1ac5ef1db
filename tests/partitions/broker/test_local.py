"""The node's local admin service: which reads it answers from this node's view and which only the
controller leader answers (the cluster-wide service then asks it, as a ``NotLeader`` hint says)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from partitions.broker.local import LocalAdmin
from partitions.controller.state import CONTROLLER_GROUP, TopicMetadata
from raftlog.consensus.errors import NoLeader, NotLeader

APPLIED_HERE = TopicMetadata("orders", 7, (("n1", "n2", "n3"),), {"retention.ms": 3_600_000})


@dataclass
class _Frontend:
    """A node's metadata as far as its replica of the controller has applied it."""

    node_id: str
    leader: str | None

    def controller(self) -> str | None:
        return self.leader

    def topic(self, name: str) -> TopicMetadata:
        assert name == APPLIED_HERE.name
        return APPLIED_HERE


def _admin(node_id: str, leader: str | None) -> LocalAdmin:
    unused = cast(Any, None)
    return LocalAdmin(cast(Any, _Frontend(node_id, leader)), unused, unused, unused, unused)


async def test_a_topic_is_read_from_this_nodes_view_unless_it_must_be_fresh() -> None:
    """A follower of the controller may apply a committed change a moment after the leader answered it: a
    read that must see a change just made (a client describing configs it altered) goes to the leader."""
    follower = _admin("n2", leader="n1")
    assert await follower.topic("orders") is APPLIED_HERE
    with pytest.raises(NotLeader) as hint:
        await follower.topic("orders", fresh=True)
    assert (hint.value.group_id, hint.value.leader_hint) == (CONTROLLER_GROUP, "n1")
    assert await _admin("n1", leader="n1").topic("orders", fresh=True) is APPLIED_HERE
    with pytest.raises(NoLeader):  # no leader known: the cluster-wide service waits for one, then asks
        await _admin("n2", leader=None).topic("orders", fresh=True)
