"""A replica whose sealed segment was damaged while its node was down: with peers, the node sets the
damaged segment and those after it aside (``data/damaged/``), the replica opens at once and gets the
records back, from its peers' logs when the leader's journal no longer holds them, or from its own
journal's replay when it does; afterwards its log equals the leader's. A replica with no peer (RF 1)
has nowhere to get them: it is refused and reported failed, as before, and nothing is moved."""

from __future__ import annotations

import asyncio
import pathlib
from dataclasses import replace

import pytest
from in_process import Served, configs, controller_leader, partition_leader, produce, until

from partitions.broker.node import Node
from raftlog.storage import ProducerRecord
from raftlog.storage.batch import HEADER_SIZE

RECORDS = 150


def damage_a_sealed_segment(log_dir: pathlib.Path) -> pathlib.Path:
    """Flip a byte in the records of the last batch of the second segment (open checks a sealed
    segment's tail); the segment's path."""
    segments = sorted(log_dir.glob("*.log"))
    assert len(segments) >= 3, f"{log_dir}: the test needs sealed segments, found {len(segments)}"
    target = segments[1]
    data = bytearray(target.read_bytes())
    position = 0
    while True:  # walk the batches to the last one
        length = int.from_bytes(data[position + 8 : position + 12], "big")
        if position + 12 + length >= len(data):
            break
        position += 12 + length
    data[position + HEADER_SIZE + 2] ^= 0x40
    target.write_bytes(bytes(data))
    return target


async def fill(leader: Node, topic: str) -> None:
    for i in range(RECORDS):
        await produce(leader.data, topic, 0, [ProducerRecord(b"r%d" % i + b"." * 40)], None, None, 5000)


async def restart_damaged(served: list[Served], victim: Served, group_id: str) -> tuple[Served, pathlib.Path]:
    """Stop ``victim``, damage a sealed segment of its replica of ``group_id``, start it again (in its
    place in ``served``); the restarted node and the damaged segment's path."""
    await victim.stop()
    damaged = damage_a_sealed_segment(pathlib.Path(victim.config.data_dir) / "logs" / group_id)
    restarted = Served(victim.config)
    served[served.index(victim)] = restarted
    await restarted.start()
    return restarted, damaged


@pytest.mark.parametrize("compacted", [True, False], ids=["from the peers", "from the journal"])
async def test_a_damaged_replica_with_peers_is_set_aside_and_rebuilt(
    tmp_path: pathlib.Path, compacted: bool
) -> None:
    node_configs = configs(tmp_path)
    if compacted:  # the leader's journal drops what the damaged replica lacks: it comes from a peer's log
        node_configs = [replace(c, core=replace(c.core, compaction_min_entries=20)) for c in node_configs]
    served = [Served(c) for c in node_configs]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        metadata = await controller.topic_changes.create_topic("t", 1, 3, {"internal.segment.bytes": 4096})
        group_id = metadata.group_id(0)
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        await fill(leader, "t")
        victim = next(s for s in served if s.node is not leader)
        await until(
            lambda: victim.node.replicas.get(group_id).machine.high_watermark == RECORDS,
            what="victim applied",
        )
        if compacted:  # the victim's own journal no longer holds the damaged segment's records (its
            # snapshot does, taken on a later tick: on a loaded machine, after the last record is applied)
            log_dir = pathlib.Path(victim.config.data_dir) / "logs" / group_id
            damaged_end = int(sorted(log_dir.glob("*.log"))[2].stem)
            await until(
                lambda: victim.node.replicas.get(group_id).group.core.journal.first_index > damaged_end + 10,
                timeout_s=60,
                what="the victim's journal compacted past the damaged segment",
            )
        restarted, damaged = await restart_damaged(served, victim, group_id)

        def rebuilt() -> bool:
            replica = restarted.node.replicas.get(group_id)
            return (
                replica is not None
                and replica.machine.high_watermark >= RECORDS
                and not replica.machine.behind
            )

        await until(rebuilt, timeout_s=30, what="damaged replica rebuilt")
        assert restarted.node.replicas.failed.get(group_id) is None
        ours = restarted.node.replicas.get(group_id).log
        theirs = leader.replicas.get(group_id).log
        assert [b.data for b in ours.read_batches(0, 1 << 24)] == [
            b.data for b in theirs.read_batches(0, 1 << 24)
        ]
        aside = list((pathlib.Path(victim.config.data_dir) / "damaged").glob(f"{group_id}-*/{damaged.name}"))
        assert len(aside) == 1, "the damaged segment is kept for an operator"
        assert ours.open_report.salvage is not None and ours.open_report.salvage.end_offset == int(
            damaged.stem
        )
        metrics = restarted.node.metadata.metrics()
        assert metrics["partition_logs_salvaged"] == 1
        if compacted:  # a recovery counts itself done after its replica caught up (a hop to the driver
            # thread later, which a loaded machine makes long)
            await until(
                lambda: restarted.node.metadata.metrics()["recovery_completed"] >= 1,
                what="the replica's recovery from a peer counted as done",
            )
        running = [s.node for s in served]  # the restarted node in the victim's place
        now_leading = await until(lambda: partition_leader(running, "t"), what="partition leader")
        await produce(now_leading.data, "t", 0, [ProducerRecord(b"after")], None, None, 5000)
        await until(
            lambda: ours.end_offset == RECORDS + 1, what="the group goes on through the rebuilt replica"
        )
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)


async def test_a_damaged_replica_without_peers_is_refused_and_reported(tmp_path: pathlib.Path) -> None:
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        metadata = await controller.topic_changes.create_topic("solo", 1, 1, {"internal.segment.bytes": 4096})
        group_id = metadata.group_id(0)
        owner = await until(lambda: partition_leader(nodes, "solo"), what="partition leader")
        await fill(owner, "solo")
        victim = next(s for s in served if s.node is owner)
        restarted, _ = await restart_damaged(served, victim, group_id)
        failure = await until(
            lambda: restarted.node.replicas.failed.get(group_id), what="replica reported failed"
        )
        assert "corrupt record batch" in failure.error
        assert restarted.node.replicas.get(group_id) is None
        assert not (pathlib.Path(victim.config.data_dir) / "damaged").exists(), "nothing set aside"
        assert restarted.node.metadata.metrics()["partition_logs_salvaged"] == 0
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)
