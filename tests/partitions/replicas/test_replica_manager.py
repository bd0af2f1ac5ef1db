"""ReplicaManager (partitions/replicas/manager.py), the room that owns a node's replica map, on in-process
nodes: a replica that cannot open keeps no other from opening, a deleted topic's replicas are closed and
their directories removed by the node's remover thread (off the event loop), and what a node down during a
deletion left on disk is swept at its next reconciliation, nothing else."""

from __future__ import annotations

import asyncio
import pathlib
import threading
from typing import Any

import pytest
from in_process import configs, controller_leader, partition_leader, produce, until

from partitions.broker.node import Node
from raftlog.storage import ProducerRecord, removal
from raftlog.storage.log_open import START_OFFSET_FILE


async def test_a_corrupt_partition_does_not_keep_a_node_from_opening_its_others(
    tmp_path: pathlib.Path,
) -> None:
    node_configs = configs(tmp_path)
    nodes = [Node(c) for c in node_configs]
    await asyncio.gather(*(n.start() for n in nodes))
    restarted: Node | None = None
    try:
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        metadata = await controller.topic_changes.create_topic("t", 2, 3, {"internal.segment.bytes": 1024})
        for partition in range(2):
            leader = await until(lambda p=partition: partition_leader(nodes, "t", p), what="leader")
            for i in range(40):
                await produce(
                    leader.data, "t", partition, [ProducerRecord(b"v%03d" % i * 10)], None, None, 5000
                )
        victim = next(n for n in nodes if n is not controller)
        for partition in range(2):
            group = metadata.group_id(partition)
            await until(lambda g=group: victim.replicas.get(g).machine.high_watermark == 40, what="caught up")
        await victim.close()
        # damage partition 0's log on the stopped node where no peer's copy can mend it (a damaged
        # segment would be set aside and copied again: tests/partitions/replicas/test_salvage_replica.py)
        log_dir = pathlib.Path(victim.config.data_dir) / "logs" / metadata.group_id(0)
        (log_dir / START_OFFSET_FILE).write_text("not an offset\n")

        restarted = Node(victim.config)
        await restarted.start()
        healthy = metadata.group_id(1)
        await until(
            lambda: (
                restarted.replicas.get(healthy) is not None
                and restarted.replicas.get(healthy).machine.high_watermark == 40
            ),
            timeout_s=30,
            what="the healthy partition opened and caught up despite the corrupt one",
        )
        assert restarted.replicas.get(metadata.group_id(0)) is None
        assert restarted.metadata.metrics()["partition_replicas_failed"] == 1
    finally:
        others = [
            n for n in nodes if n.node_id != (restarted.node_id if restarted else "") and n is not victim
        ]
        await asyncio.gather(*(n.close() for n in others), return_exceptions=True)
        if restarted is not None:
            await restarted.close()


async def test_deleting_a_topic_removes_its_directories_off_the_event_loop(
    cluster: list[Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    removed_on: list[str] = []
    remove = removal.remove_tree

    def watched(path: str, *pace: Any) -> None:
        removed_on.append(threading.current_thread().name)
        remove(path, *pace)

    monkeypatch.setattr(removal, "remove_tree", watched)
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    metadata = await controller.topic_changes.create_topic("doomed", 1, 3, {})
    leader = await until(lambda: partition_leader(cluster, "doomed"), what="partition leader")
    await produce(
        leader.data, "doomed", 0, [ProducerRecord(b"x" * 1000) for _ in range(100)], None, None, 5000
    )
    group = metadata.group_id(0)
    places = [(n, pathlib.Path(n.config.data_dir)) for n in cluster]
    assert all((root / "logs" / group).is_dir() and (root / "raft" / group).is_dir() for _, root in places)

    await controller.topic_changes.delete_topic("doomed")

    def gone() -> bool:
        return all(
            not (root / "logs" / group).exists()
            and not (root / "raft" / group).exists()
            and not any((root / "trash").glob("*"))
            for _, root in places
        )

    await until(gone, what="replica directories and their trash removed on every node")
    # two directories per node (partition log, Raft group), each by that node's remover thread
    assert sorted(removed_on) == sorted(f"raftlog-remover-{n.node_id}" for n in cluster for _ in range(2))


async def test_leftovers_of_deleted_topics_are_removed_and_nothing_else(cluster: list[Node]) -> None:
    """What a node down during a deletion (or a crash before its rename into trash/) leaves on disk: the
    next reconciliation removes directories of topics the metadata proves deleted, and leaves a live
    topic's and one whose id the metadata has not reached yet."""
    controller = await until(lambda: controller_leader(cluster), what="controller leader")
    gone = await controller.topic_changes.create_topic("gone", 1, 3, {})
    kept = await controller.topic_changes.create_topic("kept", 1, 3, {})
    await controller.topic_changes.delete_topic("gone")
    await until(lambda: all("gone" not in n.metadata.topics() for n in cluster), what="deletion applied")
    node = next(n for n in cluster if n is not controller)
    root = pathlib.Path(node.config.data_dir)
    future = f"later-0.{node.frontend.metadata().applied_index + 1000}"  # an id not applied yet
    await node.close()  # the leftovers are from before the node's next start
    for directory in ("logs", "raft"):
        for group in (gone.group_id(0), future):
            (root / directory / group).mkdir(parents=True, exist_ok=True)
            (root / directory / group / "leftover").write_bytes(b"x" * 100)
    restarted = Node(node.config)
    cluster[cluster.index(node)] = restarted  # the fixture closes it
    await restarted.start()

    await controller.topic_changes.create_topic("trigger", 1, 1, {})  # any apply reconciles every node
    await until(
        lambda: not any((root / d / gone.group_id(0)).exists() for d in ("logs", "raft")),
        what="the deleted topic's leftovers removed",
    )
    assert all((root / d / kept.group_id(0)).is_dir() for d in ("logs", "raft"))
    assert all((root / d / future / "leftover").is_file() for d in ("logs", "raft"))
    assert not any((root / "trash").glob("*"))
