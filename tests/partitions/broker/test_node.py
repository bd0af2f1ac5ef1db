"""Three in-process nodes (separate drivers, hubs and data dirs, real TCP on 127.0.0.1): topics, produce,
fetch, idempotence, consumer offsets, leader change and restart, through each node's parts (its data
plane, metadata frontend and metadata view, as a front door and the controller reach them)."""

from __future__ import annotations

import asyncio
import os
import pathlib
import time
from dataclasses import replace
from typing import Any

import pytest
from in_process import configs, controller_leader, fetch, on_controller, partition_leader, produce, until

from partitions.broker.node import Node
from partitions.errors import TopicExists
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.errors import NotLeader
from raftlog.storage import ProducerRecord
from raftlog.storage.dirlock import DirectoryLock
from raftlog.storage.errors import DirectoryLocked, OffsetOutOfRange


async def test_topic_produce_fetch_and_idempotence(cluster: list[Node]) -> None:
    metadata = await on_controller(
        cluster, lambda c: c.topic_changes.create_topic("orders", 2, 3, {"internal.segment.bytes": 4096})
    )
    assert [len(r) for r in metadata.replicas] == [3, 3]
    with pytest.raises(TopicExists):
        await on_controller(cluster, lambda c: c.topic_changes.create_topic("orders", 1, 3, {}))
    await until(lambda: all("orders" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "orders"), what="partition leader")

    first = await produce(leader.data, "orders", 0, [ProducerRecord(b"a"), ProducerRecord(b"b")], 11, 0, 5000)
    second = await produce(leader.data, "orders", 0, [ProducerRecord(b"c")], 11, 1, 5000)
    retry = await produce(leader.data, "orders", 0, [ProducerRecord(b"a"), ProducerRecord(b"b")], 11, 0, 5000)
    assert (first.base_offset, first.end_offset, second.base_offset) == (0, 2, 2)
    assert retry.duplicate and (retry.base_offset, retry.end_offset) == (0, 2)
    records = await fetch(leader, "orders", 0, 0, 1 << 20, 0)
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c")]
    with pytest.raises(OffsetOutOfRange):
        await fetch(leader, "orders", 0, 4, 1 << 20, 0)

    # every replica applied the same records
    for node in cluster:
        replica = node.replicas.get(metadata.group_id(0))
        await until(lambda r=replica: r.machine.high_watermark == 3, what=f"{node.node_id} caught up")
        assert [r.value for r in replica.log.read(0, 1 << 20, 3)] == [b"a", b"b", b"c"]

    # a follower refuses with a hint naming the leader
    follower = next(n for n in cluster if n is not leader)
    with pytest.raises(NotLeader) as refused:
        await produce(follower.data, "orders", 0, [ProducerRecord(b"x")], None, None, 5000)
    assert refused.value.leader_hint == leader.node_id

    # long poll wakes when a record commits
    waiting = asyncio.create_task(fetch(leader, "orders", 0, 3, 1 << 20, 10_000))
    polled = leader.replicas.get(metadata.group_id(0))
    await until(lambda: polled.waiters == 1, what="the long poll counted in")
    assert not waiting.done()
    await produce(leader.data, "orders", 0, [ProducerRecord(b"d")], None, None, 5000)
    assert [r.value for r in await asyncio.wait_for(waiting, 5)] == [b"d"]

    # consumer offsets are replicated and never move backwards unless reset
    assert await leader.data.commit_offset("g", "orders", 0, 3, False, 5000) == 3
    assert await leader.data.commit_offset("g", "orders", 0, 1, False, 5000) == 3
    assert await leader.data.commit_offset("g", "orders", 0, 1, True, 5000) == 1
    assert await leader.data.committed_offset("g", "orders", 0) == 1


async def test_leader_transfer_keeps_every_acknowledged_record(cluster: list[Node]) -> None:
    await on_controller(cluster, lambda c: c.topic_changes.create_topic("t", 1, 3, {}))
    leader = await until(lambda: partition_leader(cluster, "t"), what="partition leader")
    acked = []
    for i in range(20):
        result = await produce(leader.data, "t", 0, [ProducerRecord(b"%d" % i)], None, None, 5000)
        acked.append(result.base_offset)
    target = next(n for n in cluster if n is not leader)
    # returns only once the target was seen leading (OutcomeUnknown otherwise)
    await leader.partition_admin.transfer_leadership("t", 0, target.node_id, 10_000)
    assert leader.partition_admin.partition_state("t", 0).leader != leader.node_id
    # under load a later election may move leadership again; whoever leads has every acked record
    new_leader = await until(lambda: partition_leader(cluster, "t"), what="new leader")
    await produce(new_leader.data, "t", 0, [ProducerRecord(b"after")], None, None, 5000)
    values = [r.value for r in await fetch(new_leader, "t", 0, 0, 1 << 20, 0)]
    assert values == [*(b"%d" % i for i in range(20)), b"after"]
    assert new_leader.partition_admin.partition_state("t", 0).high_watermark == 21


async def test_restart_of_every_node_keeps_records_offsets_and_dedup(tmp_path: pathlib.Path) -> None:
    node_configs = configs(tmp_path)
    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        await on_controller(
            nodes, lambda c: c.topic_changes.create_topic("t", 1, 3, {"internal.segment.bytes": 2048})
        )
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        for i in range(40):
            await produce(leader.data, "t", 0, [ProducerRecord(b"r%d" % i)], 5, i, 5000)
        await leader.data.commit_offset("g", "t", 0, 17, False, 5000)
        sizes = {}
        for node in nodes:
            group_id = node.frontend.topic("t").group_id(0)
            await until(
                lambda n=node, g=group_id: n.replicas.get(g).machine.high_watermark == 40, what="caught up"
            )
            sizes[node.node_id] = node.replicas.get(group_id).log.size_bytes
    finally:
        await asyncio.gather(*(n.close() for n in nodes))

    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        leader = await until(lambda: partition_leader(nodes, "t"), timeout_s=30, what="leader after restart")
        values = [r.value for r in await fetch(leader, "t", 0, 0, 1 << 20, 0)]
        assert values == [b"r%d" % i for i in range(40)]
        retry = await produce(leader.data, "t", 0, [ProducerRecord(b"r39")], 5, 39, 5000)
        assert retry.duplicate and retry.base_offset == 39, "the producer table must survive a restart"
        fresh = await produce(leader.data, "t", 0, [ProducerRecord(b"r40")], 5, 40, 5000)
        assert fresh.base_offset == 40, "offsets continue after a restart, never reused"
        assert await leader.data.committed_offset("g", "t", 0) == 17
        for node in nodes:
            group_id = node.frontend.topic("t").group_id(0)
            replica = node.replicas.get(group_id)
            await until(lambda r=replica: r.machine.high_watermark == 41, what=f"{node.node_id} caught up")
            assert replica.log.size_bytes > sizes[node.node_id]
            assert [r.value for r in replica.log.read(0, 1 << 20, 41)] == [*values, b"r40"]
    finally:
        await asyncio.gather(*(n.close() for n in nodes))


async def test_gossip_reports_members_and_routes_to_partitions_hosted_elsewhere(cluster: list[Node]) -> None:
    await until(
        lambda: all(len([i for i in n.metadata.nodes() if i.state == "alive"]) == 3 for n in cluster),
        what="gossip",
    )
    # one replica each: most nodes host nothing
    metadata = await on_controller(cluster, lambda c: c.topic_changes.create_topic("solo", 3, 1, {}))
    for partition, replicas in enumerate(metadata.replicas):
        host, group_id = replicas[0], metadata.group_id(partition)
        others = [n for n in cluster if n.node_id != host]
        # a node without a replica learns the leader from the host's gossiped leadership claims
        await until(
            lambda o=others, h=host, g=group_id: all(n._view.leader_for(g) == h for n in o),
            what=f"claims for solo/{partition}",
        )
        assert all(n.routing.leader_hint("solo", partition) == host for n in others)
    assert sum(info.leader_of for info in cluster[0].metadata.nodes()) >= 3

    leaving = cluster[2]
    await leaving.close()
    cluster.remove(leaving)  # the fixture closes the rest
    await until(
        lambda: all(
            {i.node_id: i.state for i in n.metadata.nodes()}[leaving.node_id] == "left" for n in cluster
        ),
        what="graceful leave seen",
    )
    assert all(i.incarnation >= 1 for i in cluster[0].metadata.nodes() if i.node_id != leaving.node_id)


async def test_a_partition_without_a_majority_has_no_known_leader(cluster: list[Node]) -> None:
    await on_controller(cluster, lambda c: c.topic_changes.create_topic("t", 1, 3, {}))
    await until(lambda: partition_leader(cluster, "t"), what="partition leader")
    survivor, *stopped = cluster
    for node in stopped:
        await node.close()
    cluster[:] = [survivor]  # the fixture closes the rest
    # health must not mistake a routing guess for a leader once the majority is gone
    await until(lambda: survivor.routing.known_leader("t", 0) is None, timeout_s=20, what="leader lost")


async def test_long_polls_on_every_replica_wake_only_while_someone_waits(cluster: list[Node]) -> None:
    metadata = await on_controller(cluster, lambda c: c.topic_changes.create_topic("polled", 1, 3, {}))
    await until(lambda: all("polled" in n.metadata.topics() for n in cluster), what="topic on every node")
    leader = await until(lambda: partition_leader(cluster, "polled"), what="partition leader")
    replica = leader.replicas.get(metadata.group_id(0))
    events = []
    for value in (b"a", b"b"):  # nobody waits: the event is not replaced (no wake-up was scheduled)
        before = replica.changed
        await produce(leader.data, "polled", 0, [ProducerRecord(value)], None, None, 5000)
        await asyncio.sleep(0.05)  # a negative window: no wake-up is scheduled meanwhile
        events.append(replica.changed is before)
    assert events == [True, True]
    waiting = asyncio.create_task(fetch(leader, "polled", 0, 2, 1 << 20, 10_000))
    await until(lambda: replica.waiters == 1, what="the long poll counted in")
    await produce(leader.data, "polled", 0, [ProducerRecord(b"c")], None, None, 5000)
    assert [r.value for r in await asyncio.wait_for(waiting, 5)] == [b"c"]
    assert replica.waiters == 0


async def test_a_released_journal_segment_leaves_its_directory_at_once_and_is_removed_later(
    tmp_path: pathlib.Path,
) -> None:
    """What the driver thread does when a snapshot covers a journal segment: a rename into trash/ (cheap),
    and the remover deletes it on its own thread."""
    node = Node(configs(tmp_path, count=1)[0])
    await node.start()
    try:
        journal = pathlib.Path(node.config.data_dir) / "raft" / "some-group" / "journal"
        journal.mkdir(parents=True)
        segment = journal / "segment-0000000001.log"
        segment.write_bytes(b"x" * 100_000)
        node.trash.discard_if_present(str(segment))
        assert not segment.exists()
        trash = pathlib.Path(node.config.data_dir) / "trash"
        await until(lambda: not any(trash.glob("segment-0000000001.log.*")), what="the segment removed")
        await until(
            lambda: node.metadata.metrics()["removal_pending_paths"] == 0, what="nothing left to remove"
        )
        assert node.metadata.metrics()["removal_pending_bytes"] == 0
    finally:
        await node.close()


async def test_segments_deleted_by_retention_go_through_the_remover(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention takes a segment out of its log by a rename (under the log's lock, which the driver thread
    needs to apply entries); the node's remover deletes the files on its own thread."""
    import threading

    from raftlog.storage import removal

    removed: list[tuple[str, str]] = []
    remove = removal.remove_tree

    def watched(path: str, *pace: Any) -> None:
        removed.append((threading.current_thread().name, os.path.basename(path)))
        remove(path, *pace)

    monkeypatch.setattr(removal, "remove_tree", watched)
    node = Node(replace(configs(tmp_path, count=1)[0], retention_check_interval_ms=100))
    await node.start()
    try:
        await until(node.frontend.leads, what="controller leader")
        metadata = await node.topic_changes.create_topic(
            "retained", 1, 1, {"internal.segment.bytes": 4096, "retention.bytes": 8192}
        )
        await until(lambda: partition_leader([node], "retained"), what="partition leader")
        for _ in range(12):
            await produce(
                node.data, "retained", 0, [ProducerRecord(b"x" * 1000) for _ in range(3)], None, None, 5000
            )
        log_dir = pathlib.Path(node.config.data_dir) / "logs" / metadata.group_id(0)
        replica = node.replicas.get(metadata.group_id(0))
        await until(lambda: replica.log.log_start_offset > 0, what="retention deleting segments")
        trash = pathlib.Path(node.config.data_dir) / "trash"
        # retention goes on every 100 ms: a later pass may rename one more segment meanwhile, so all three
        # are waited for together (the rename in the log directory, the move to trash, the removal)
        await until(
            lambda: (
                node.metadata.metrics()["removal_pending_paths"] == 0
                and not any(trash.glob("*"))
                and not any(name.endswith(".deleted") for name in os.listdir(log_dir))
            ),
            what="the deleted segments removed",
        )
        segment_files = [name for thread, name in removed if ".deleted." in name]
        assert segment_files and {thread for thread, name in removed if name in segment_files} == {
            "raftlog-remover-n1"
        }
        assert any(name.startswith(f"{0:020d}.log.") for name in segment_files)
    finally:
        await node.close()


async def test_a_start_empties_what_a_crash_left_in_the_trash(tmp_path: pathlib.Path) -> None:
    config = configs(tmp_path, count=1)[0]
    leftover = pathlib.Path(config.data_dir) / "trash" / "t-0.abc" / "segment"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"x" * 4096)
    node = Node(config)
    await node.start()
    try:
        assert not any((pathlib.Path(config.data_dir) / "trash").glob("*"))
    finally:
        await node.close()


async def test_a_node_on_a_data_directory_another_holds_is_refused_and_touches_nothing(
    tmp_path: pathlib.Path,
) -> None:
    config = configs(tmp_path, count=1)[0]
    leftover = pathlib.Path(config.data_dir) / "trash" / "t-0.abc"
    leftover.mkdir(parents=True)  # what the holder is entitled to: the refused node must not empty it
    with DirectoryLock.acquire(config.data_dir, "node n1"):
        with pytest.raises(DirectoryLocked, match=rf"in use by node n1 \(pid {os.getpid()}, since "):
            Node(config)
        assert sorted(os.listdir(config.data_dir)) == [".lock", "trash"] and leftover.is_dir()
    node = Node(config)  # free again once its holder closed it
    await node.start()
    try:
        with pytest.raises(DirectoryLocked, match="in use by node n1"):
            Node(config)
    finally:
        await node.close()
    DirectoryLock.acquire(config.data_dir, "node n1").close()  # and free again once the node closed


SLOW_ELECTIONS = CoreConfig(
    election_timeout_min_ms=6000,
    election_timeout_max_ms=9000,
    heartbeat_period_ms=300,
    timer_grid_ms=400,
    leader_fallback_timeout_ms=6000,
)


async def test_a_new_cluster_and_a_new_topic_are_led_where_placement_says_at_once(
    tmp_path: pathlib.Path,
) -> None:
    """With election timeouts of 6-9 s only the early campaigns of the first controller voter and of each
    partition's preferred replica can elect within the bounds below; every partition is then led by its
    first replica, so the leader balancer has nothing to move."""
    nodes = [Node(replace(c, core=SLOW_ELECTIONS)) for c in configs(tmp_path)]
    started = time.monotonic()
    await asyncio.gather(*(n.start() for n in nodes))
    try:
        controller = await until(lambda: controller_leader(nodes), 4.0, "controller leader")
        assert controller.node_id == "n1", "the first controller voter"
        assert time.monotonic() - started < 5.0
        created = time.monotonic()
        metadata = await controller.topic_changes.create_topic("placed", 6, 3, {})
        assert time.monotonic() - created < 4.0, "create waits for leaders: early ones, not timeouts"
        for partition, replicas in enumerate(metadata.replicas):
            leader = await until(lambda p=partition: partition_leader(nodes, "placed", p), 2.0, "leader")
            assert leader.node_id == replicas[0], f"partition {partition} led by its preferred replica"
        assert sorted(r[0] for r in metadata.replicas) == ["n1", "n1", "n2", "n2", "n3", "n3"]
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
