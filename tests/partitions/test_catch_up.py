"""A replica that was down while the leader compacted its Raft journal gets a snapshot instead of the
entries, and copies the missing records from a peer's log: afterwards its log equals the leader's."""

from __future__ import annotations

import asyncio
import pathlib
from dataclasses import replace

import pytest
from aiohttp import web
from test_node import configs, controller_leader, fetch, partition_leader, until

from api.app import build_app
from partitions.catch_up import PeerAnswer, catch_up, split_batches
from partitions.errors import ReplicaBehind
from partitions.node import Node, NodeConfig
from raftlog.storage import Log, LogConfig, ProducerRecord


class Served:
    """A node with its HTTP API on its configured port (peers fetch batches over it)."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node = Node(config)
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        await self.node.start()
        self.runner = web.AppRunner(build_app(self.node))
        await self.runner.setup()
        port = int(
            next(p.http for p in self.config.peers if p.node_id == self.config.node_id).rsplit(":", 1)[1]
        )
        await web.TCPSite(self.runner, "127.0.0.1", port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        await self.node.close()


async def test_a_replica_behind_a_compacted_journal_copies_records_from_a_peer(
    tmp_path: pathlib.Path,
) -> None:
    node_configs = [replace(c, core=replace(c.core, compaction_min_entries=20)) for c in configs(tmp_path)]
    served = [Served(c) for c in node_configs]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.frontend.create_topic("t", 1, 3, {"segment.bytes": 4096})
        leader = await until(lambda: partition_leader(nodes, "t"), what="partition leader")
        laggard = next(s for s in served if s.node is not leader)
        await leader.data.produce("t", 0, [ProducerRecord(b"early")], None, None, 5000)
        await laggard.stop()
        for i in range(150):  # far past compaction_min_entries: the leader's journal no longer has them
            await leader.data.produce("t", 0, [ProducerRecord(b"r%d" % i)], None, None, 5000)
        expected = [r.value for r in await fetch(leader, "t", 0, 0, 1 << 22, 0)]
        assert len(expected) == 151

        restarted = Served(laggard.config)
        served[served.index(laggard)] = restarted
        await restarted.start()
        group_id = leader.frontend.topic("t").group_id(0)

        def caught_up() -> bool:
            replica = restarted.node.replicas.get(group_id)
            return replica is not None and replica.machine.high_watermark >= 151

        await until(caught_up, timeout_s=30, what="restarted replica caught up")
        replica = restarted.node.replicas.get(group_id)
        assert [r.value for r in replica.log.read(0, 1 << 22, 151)] == expected
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)


def _filled_log(path: pathlib.Path, count: int) -> Log:
    log = Log.open(str(path), LogConfig(segment_bytes=2048))
    for i in range(count):
        log.append([ProducerRecord(b"v%d" % i)], term=1)
    return log


def test_catch_up_copies_batches_unchanged_and_tries_the_next_peer(tmp_path: pathlib.Path) -> None:
    source = _filled_log(tmp_path / "source", 30)
    target = Log.open(str(tmp_path / "target"), LogConfig())

    def fetch(peer: str, offset: int) -> PeerAnswer:
        if peer == "down":
            raise OSError("connection refused")
        return PeerAnswer(b"".join(b.data for b in source.read_batches(offset, 200)))

    catch_up(target, 30, ["down", "up"], fetch)
    assert [b.data for b in target.read_batches(0, 1 << 20)] == [
        b.data for b in source.read_batches(0, 1 << 20)
    ]


def test_catch_up_restarts_the_log_where_peers_start_and_fails_without_progress(
    tmp_path: pathlib.Path,
) -> None:
    target = Log.open(str(tmp_path / "target"), LogConfig())
    source = _filled_log(tmp_path / "source", 10)
    calls = []

    def fetch(peer: str, offset: int) -> PeerAnswer:
        calls.append(offset)
        if offset < 5:
            return PeerAnswer(log_start_offset=5)
        data = b"".join(b.data for b in source.read_batches(offset, 1 << 20))
        return PeerAnswer(data)

    catch_up(target, 10, ["p"], fetch)
    assert (target.log_start_offset, target.end_offset) == (5, 10)
    with pytest.raises(ReplicaBehind):
        catch_up(target, 20, ["p"], lambda peer, offset: PeerAnswer(b""))
    assert list(split_batches(b"")) == []
