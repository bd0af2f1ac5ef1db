"""PartitionAdmin (partitions/data/partition_admin.py), the room that answers for a partition on this
node's replica of it, on three in-process nodes: the state an operator sees from the leader (lag, in sync)
and from a follower (the leader it follows, the rest unknown), a leadership transfer, the member view
only the leader gives, and the Raft membership changes a replica move makes, each repeatable."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import pytest
from in_process import Served, configs, controller_leader, partition_leader, produce, until

from partitions.broker.node import Node
from partitions.errors import InvalidReassignment, UnknownPartition
from raftlog.consensus.errors import NoLeader, NotLeader, OutcomeUnknown
from raftlog.storage import ProducerRecord

RECORDS = 5
TIMEOUT_MS = 30_000
WAIT_S = 60.0  # elections and catch-up on a loaded 2-core machine


@pytest.fixture
async def nodes(tmp_path: pathlib.Path) -> AsyncIterator[list[Node]]:
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    try:
        yield [s.node for s in served]
    finally:
        await asyncio.gather(*(s.stop() for s in served))


async def _topic(nodes: list[Node], name: str, replicas: int) -> Node:
    """A one-partition topic with RECORDS records; its leader."""
    controller = await until(lambda: controller_leader(nodes), WAIT_S, "a controller leader")
    await controller.topic_changes.create_topic(name, 1, replicas, {})
    leader = await until(lambda: partition_leader(nodes, name), WAIT_S, f"a leader of {name}")
    for i in range(RECORDS):
        await produce(leader.data, name, 0, [ProducerRecord(b"r%d" % i)], None, None, 5000)
    return leader


async def test_the_leader_tells_lag_and_in_sync_and_a_follower_names_the_leader(nodes: list[Node]) -> None:
    leader = await _topic(nodes, "watched", 3)
    follower = next(n for n in nodes if n is not leader)

    def caught_up() -> bool:
        state = leader.partition_admin.partition_state("watched", 0)
        return all(r.in_sync and r.lag == 0 for r in state.replicas)

    await until(caught_up, WAIT_S, "every replica in sync, holding the whole log")
    state = leader.partition_admin.partition_state("watched", 0)
    assert (state.leader, state.high_watermark, state.log_start_offset) == (leader.node_id, RECORDS, 0)
    assert state.log_bytes is not None and state.log_bytes > 0
    roles = {r.node: (r.role, r.lag) for r in state.replicas}
    assert roles == {n.node_id: ("leader" if n is leader else "follower", 0) for n in nodes}

    seen = follower.partition_admin.partition_state("watched", 0)
    assert seen.leader == leader.node_id
    assert seen.log_bytes is None  # the leader's log is the leader's to tell
    others = [r for r in seen.replicas if r.node != leader.node_id]
    assert {(r.role, r.in_sync, r.lag) for r in others} == {("follower", None, None)}

    with pytest.raises(UnknownPartition):
        leader.partition_admin.partition_state("watched", 1)


async def test_leadership_moves_to_the_named_replica_and_only_the_leader_gives_its_member_view(
    nodes: list[Node],
) -> None:
    leader = await _topic(nodes, "moved", 3)
    target = next(n for n in nodes if n is not leader)
    view = await until(
        lambda: leader.partition_admin.local_member_view("moved", 0), WAIT_S, "the leader ready to act"
    )
    assert view.leader == leader.node_id and view.voters == {n.node_id for n in nodes}
    with pytest.raises((NotLeader, NoLeader)):
        target.partition_admin.member_view("moved", 0)
    assert target.partition_admin.local_member_view("moved", 0) is None

    seen = await leader.partition_admin.transfer_leadership("moved", 0, target.node_id, TIMEOUT_MS)
    assert seen == target.node_id
    await until(lambda: target.partition_admin.local_member_view("moved", 0), WAIT_S, "the new leader")
    with pytest.raises((NotLeader, NoLeader)):
        leader.partition_admin.member_view("moved", 0)


async def test_a_transfer_to_a_node_just_stopped_names_the_partition_not_its_raft_group(
    tmp_path: pathlib.Path,
) -> None:
    """The operator transfers leadership to a node that stopped a moment ago (gossip still says alive): the
    transfer is not observed, and the 504's message names the partition as the operator did, never the
    Raft group's internal id."""
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    stopped: list[Served] = []
    try:
        nodes = [s.node for s in served]
        leader = await _topic(nodes, "orders", 3)
        gone = next(s for s in served if s.node is not leader)
        group_id = leader.routing.partition_topic("orders", 0).group_id(0)  # type: ignore[union-attr]
        stopped.append(gone)
        await gone.stop()
        live = [s.node for s in served if s is not gone]
        unknown: OutcomeUnknown | None = None
        for _ in range(10):  # asked of whichever node leads now (a loaded machine may move the leadership)
            leading = await until(lambda: partition_leader(live, "orders"), WAIT_S, "a leader of orders")
            try:
                await leading.partition_admin.transfer_leadership("orders", 0, gone.node.node_id, 1_500)
            except OutcomeUnknown as exc:
                unknown = exc
                break
            except (NotLeader, NoLeader):
                continue
        assert unknown is not None, "the transfer to the stopped node was never tried on a leader"
        assert str(unknown).startswith("partition orders/0: outcome unknown: "), str(unknown)
        assert group_id not in str(unknown)
    finally:
        await asyncio.gather(*(s.stop() for s in served if s not in stopped))


async def test_membership_changes_of_a_move_are_made_once_and_may_be_repeated(nodes: list[Node]) -> None:
    """The third node joins a partition of two replicas as a learner (shown "learner", in no ISR), is
    promoted, and leaves; each step asked again changes nothing."""
    leader = await _topic(nodes, "grown", 2)
    admin = leader.partition_admin
    await until(lambda: admin.local_member_view("grown", 0), WAIT_S, "the leader ready to act")
    third = next(n for n in nodes if n.node_id not in admin.member_view("grown", 0).voters).node_id

    for _ in range(2):
        await admin.change_membership("grown", 0, "learner", third, TIMEOUT_MS)
    view = admin.member_view("grown", 0)
    assert third in view.learners and third not in view.voters
    joining = {r.node: r for r in admin.partition_state("grown", 0).replicas}[third]
    assert (joining.role, joining.in_sync) == ("learner", False)

    for _ in range(2):
        await admin.change_membership("grown", 0, "promote", third, TIMEOUT_MS)
    assert third in admin.member_view("grown", 0).voters

    for _ in range(2):
        await admin.change_membership("grown", 0, "remove", third, TIMEOUT_MS)
    view = admin.member_view("grown", 0)
    assert third not in view.voters and third not in view.learners

    with pytest.raises(InvalidReassignment, match="unknown membership change"):
        await admin.change_membership("grown", 0, "shuffle", third, TIMEOUT_MS)
