"""A move under Kafka's replication throttles (what ``kafka-reassign-partitions --execute --throttle``
sets): the joining replica, whose leader's journal no longer holds the records, copies them from its
peers' logs at most at the follower rate, and its peers serve them at most at the leader rate; removing
the configs lifts the limit from the next chunk on, and the rest is copied unthrottled. A young
partition, whose leader's journal still holds every record, is throttled all the same. Meanwhile the
joining replica stays a learner and the move in progress; the move ends once its log holds every record.
Counted on the nodes' metrics, not timed."""

from __future__ import annotations

import asyncio
import pathlib
import time
from dataclasses import replace

from in_process import Served, configs, controller_leader, partition_leader, produce, until

from partitions.broker.node import Node
from partitions.errors import InvalidReassignment
from partitions.metadata.service import AdminService
from partitions.metadata.topic_changes import TopicChanges
from partitions.names import broker_id
from partitions.replication_throttles import follower_rate
from partitions.resource_configs import (
    BROKER,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPIC,
)
from raftlog.storage import ProducerRecord

RATE = 4096  # bytes/s, both throttles
RECORDS = 150
VALUE = b"v" * 2000  # 150 records of 2 kB: at RATE the whole copy would take over a minute
YOUNG_RECORDS = 40  # a young partition: its leader's journal holds them all
YOUNG_RATE = 65536  # 80 kB: about a second's worth


async def test_a_throttled_moves_catch_up_is_limited_until_the_throttle_is_removed(
    tmp_path: pathlib.Path,
) -> None:
    node_configs = [replace(c, core=replace(c.core, compaction_min_entries=20)) for c in configs(tmp_path)]
    served = [Served(c) for c in node_configs]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller, group_id, holders, joining, leader = await written_topic(nodes, RECORDS)
        # the leader's journal no longer holds the records: the joining replica gets its snapshot and
        # copies them from its peers' logs
        await until(
            lambda: leader.replicas.get(group_id).group.core.journal.first_index > RECORDS // 2,
            timeout_s=60,
            what="the leader's journal compacted",
        )
        throttles = await throttle(controller, RATE, holders, joining)
        await until(
            lambda: joining.frontend.metadata().resource_configs.get((TOPIC, "t")), what="throttles applied"
        )
        started_s = time.monotonic()
        await move(controller.topic_changes, [*holders, joining.node_id])

        def throttled() -> dict[str, float]:
            return joining.metadata.metrics()

        await until(
            lambda: throttled()["recovery_throttled_bytes"] >= 4 * RATE, timeout_s=60, what="throttled"
        )
        elapsed_s = time.monotonic() - started_s
        before = throttled()
        # the throttle admits a second's worth, then the rate (a chunk of at most a second's worth and
        # a batch in debt at most): never more in the time it took, however slow the machine
        assert before["recovery_throttled_bytes"] <= RATE * (elapsed_s + 2) + len(VALUE) + 200
        served_bytes = sum(n.metadata.metrics()["recovery_served_throttled_bytes"] for n in nodes)
        assert served_bytes > 0, "the peers served under the leader throttle"
        assert joining.metadata.metrics()["recovery_served_throttled_bytes"] == 0, "not listed as a leader"
        assert joining.replicas.get(group_id).machine.behind, "still copying"
        assert ("t", 0) in controller.frontend.metadata().reassignments, "the move is in progress meanwhile"
        assert leader.replicas.get(group_id).group.status().learners == {joining.node_id}, "not yet a voter"

        for (kind, name), values in throttles.items():  # an operator removes them (kafka-configs)
            # through the cluster's admin service, which follows the controller's leadership (a loaded run
            # moved it meanwhile: the controller node asked directly answered NotLeader)
            await controller.cluster.admin.call(
                AdminService.alter_resource_configs, kind, name, dict.fromkeys(values), False
            )
        await until(
            lambda: (
                follower_rate(joining.frontend.metadata().resource_configs, "t", 0, joining.node_id) is None
            ),
            what="throttles removed on the joining node",
        )
        lifted = joining.metadata.metrics()["recovery_throttled_bytes"]

        def caught_up() -> bool:
            replica = joining.replicas.get(group_id)
            return (
                replica is not None
                and replica.machine.high_watermark >= RECORDS
                and not replica.machine.behind
                and joining.metadata.metrics()["recovery_replicas"] == 0
            )

        await until(caught_up, timeout_s=60, what="the joining replica caught up once unthrottled")
        after = joining.metadata.metrics()
        assert after["recovery_completed"] >= 1, "the records came through a recovery"
        total = joining.replicas.get(group_id).log.size_bytes
        assert after["recovery_bytes"] >= total // 2
        assert after["recovery_throttled_bytes"] < total, "the rest was copied unthrottled"
        # past the removal, at most the chunk asked before it is counted
        assert after["recovery_throttled_bytes"] <= lifted + RATE + len(VALUE) + 200
        await until(lambda: not moving(controller), timeout_s=60, what="the move ended")
        voters = leader.replicas.get(group_id).group.status().voters
        assert controller.frontend.metadata().topics["t"].replicas[0] == (*holders, joining.node_id)
        assert joining.node_id in voters, voters
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)


async def test_a_throttled_move_is_limited_while_the_leaders_journal_holds_every_record(
    tmp_path: pathlib.Path,
) -> None:
    """Default compaction settings: the leader's journal still holds every record when the move starts,
    which plain replication would send unthrottled. The leader compacts it first, so the joining replica
    installs a snapshot and copies the records under both throttles, and ends with the leader's log."""
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller, group_id, holders, joining, leader = await written_topic(nodes, YOUNG_RECORDS)
        journal = leader.replicas.get(group_id).group.core.journal
        assert journal.first_index <= 1, "the leader's journal holds every record (nothing compacted)"
        await throttle(controller, YOUNG_RATE, holders, joining)
        await until(
            lambda: all(n.frontend.metadata().resource_configs.get((TOPIC, "t")) for n in nodes),
            what="throttles applied",
        )
        await move(controller.topic_changes, [*holders, joining.node_id])

        def caught_up() -> bool:
            replica = joining.replicas.get(group_id)
            return (
                replica is not None
                and replica.machine.high_watermark >= YOUNG_RECORDS
                and not replica.machine.behind
                and joining.metadata.metrics()["recovery_replicas"] == 0
            )

        await until(caught_up, timeout_s=60, what="the joining replica caught up")
        await until(lambda: not moving(controller), timeout_s=60, what="the move ended")
        moved = joining.replicas.get(group_id).log
        metrics = joining.metadata.metrics()
        assert metrics["recovery_completed"] >= 1, "the records came through a recovery"
        assert metrics["recovery_throttled_bytes"] >= moved.size_bytes // 2, "under the follower throttle"
        served_bytes = sum(n.metadata.metrics()["recovery_served_throttled_bytes"] for n in nodes)
        assert served_bytes > 0, "the peers served under the leader throttle"
        source = leader.replicas.get(group_id).log
        assert [(r.offset, r.key, r.value) for r in moved.read(0, 1 << 24)] == [
            (r.offset, r.key, r.value) for r in source.read(0, 1 << 24)
        ]
        assert moved.end_offset == source.end_offset == YOUNG_RECORDS
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)


def moving(controller: Node) -> bool:
    return ("t", 0) in controller.frontend.metadata().reassignments


async def written_topic(nodes: list[Node], records: int) -> tuple[Node, str, list[str], Node, Node]:
    """Topic t (one partition on two of the three nodes) holding ``records`` records of VALUE: the
    controller leader, the partition's group id, its holders, the node not holding it, its leader."""
    controller = await until(lambda: controller_leader(nodes), what="controller leader")
    metadata = await controller.topic_changes.create_topic("t", 1, 2, {"internal.segment.bytes": 65536})
    group_id, holders = metadata.group_id(0), list(metadata.replicas[0])
    joining = next(n for n in nodes if n.node_id not in holders)
    leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
    for i in range(records):
        await produce(leader.data, "t", 0, [ProducerRecord(b"%d" % i + VALUE)], None, None, 5000)
    return controller, group_id, holders, joining, leader


async def throttle(
    controller: Node, rate: int, holders: list[str], joining: Node
) -> dict[tuple[str, str], dict[str, str]]:
    """Both throttles at ``rate`` (the cluster's default), on t-0's holders as leaders and on the joining
    node as follower, as ``kafka-reassign-partitions --throttle`` sets them; the configs set."""
    throttles = {
        (BROKER, ""): {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)},
        (TOPIC, "t"): {
            LEADER_REPLICAS: ",".join(f"0:{broker_id(n)}" for n in holders),
            FOLLOWER_REPLICAS: f"0:{broker_id(joining.node_id)}",
        },
    }
    for (kind, name), values in throttles.items():
        await controller.topic_changes.alter_resource_configs(kind, name, dict(values), False)
    return throttles


async def move(topic_changes: TopicChanges, replicas: list[str]) -> None:
    """Move t-0 to ``replicas`` once gossip reports the joining node alive (a move needs it)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await topic_changes.move_replicas("t", 0, replicas)
            return
        except InvalidReassignment as refusal:
            if "not alive" not in str(refusal) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
