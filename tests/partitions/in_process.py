"""Real nodes in this process for the broker's tests (separate drivers, hubs and data dirs, real TCP on
127.0.0.1): their configs, the leaders to wait for, a node served with its HTTP API (peers fetch batches
over it), and a wait for a condition."""

from __future__ import annotations

import asyncio
import os
import pathlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from aiohttp import web

from api.app import build_app
from membership import GossipConfig
from partitions.broker.node import Node
from partitions.broker.node_config import NodeConfig, PeerConfig
from partitions.controller.state import CONTROLLER_GROUP, ControllerMetadata, ControllerStateMachine
from partitions.data.service import DataService, ProduceResult
from partitions.errors import UnknownTopic
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.consensus.snapshot import decode_snapshot
from raftlog.storage.batch import ProducerRecord, Record, encode_batch
from raftlog.storage.batch_reads import records_from
from raftlog_dev.layout import free_port

T = TypeVar("T")

SECRET = b"test-cluster-secret-0123456789abcdef"
FAST = CoreConfig(
    pre_vote=True,
    election_timeout_min_ms=400,
    election_timeout_max_ms=800,
    heartbeat_period_ms=50,
    leader_fallback_timeout_ms=600,
)


FAST_GOSSIP = GossipConfig(probe_interval_ms=200, probe_timeout_ms=100, gossip_interval_ms=50)


def configs(root: pathlib.Path, count: int = 3) -> list[NodeConfig]:
    peers = tuple(
        PeerConfig(f"n{i}", f"http://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")
        for i in range(1, count + 1)
    )
    gossip = {p.node_id: f"127.0.0.1:{free_port()}" for p in peers}
    return [
        NodeConfig(
            p.node_id,
            str(root / p.node_id),
            p.raft,
            peers,
            SECRET,
            FAST,
            gossip_address=gossip[p.node_id],
            seeds=tuple(address for node, address in gossip.items() if node != p.node_id),
            gossip=FAST_GOSSIP,
        )
        for p in peers
    ]


def snapshot_metadata(node: Node) -> ControllerMetadata | None:
    """The controller metadata of the controller snapshot on ``node``'s disk; None while it has none."""
    path = os.path.join(node.raft.group_dir(CONTROLLER_GROUP), "snapshot")
    try:
        with open(path, "rb") as f:
            state = decode_snapshot(path, f.read())["state"]
    except FileNotFoundError:
        return None
    machine = ControllerStateMachine()
    machine.restore(state)
    return machine.metadata


async def until(predicate, timeout_s: float = 15.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (NotLeader, NoLeader):
            value = None
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout_s} s")


def controller_leader(nodes: list[Node]) -> Node | None:
    leader = nodes[0].metadata.controller()
    return next((n for n in nodes if n.node_id == leader and n.metadata.controller() == leader), None)


async def on_controller(
    nodes: list[Node], call: Callable[[Node], Awaitable[T]], timeout_s: float = 15.0
) -> T:
    """``call(leader)`` on the controller's leader, asked of the next one when the controller's leadership
    moved before it proposed (NotLeader, NoLeader: not done and never will be, so asking again writes
    nothing twice), as a door's forwarding does: under load an election may come between finding the
    leader and proposing (400-800 ms election timeouts, three nodes in one process)."""
    deadline = time.monotonic() + timeout_s
    while True:
        leader = await until(lambda: controller_leader(nodes), timeout_s, "controller leader")
        try:
            return await call(leader)
        except (NotLeader, NoLeader):
            if time.monotonic() >= deadline:
                raise


async def fetch(
    node: Node, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
) -> list[Record]:
    """Records from ``offset`` on, from the partition's leader ``node`` (its data plane, as a front door
    gets them: stored batches, decoded here)."""
    fetched = await node.data.fetch_batches(topic, partition, offset, max_bytes, timeout_ms)
    return records_from(fetched.data, offset)


async def produce(
    data: DataService,
    topic: str,
    partition: int,
    records: Sequence[ProducerRecord],
    producer_id: int | None = None,
    sequence: int | None = None,
    timeout_ms: int = 5000,
) -> ProduceResult:
    """Records produced as the HTTP door produces JSON ones: encoded into one batch (this process's clock
    on those without a timestamp), appended by ``produce_batch``."""
    batch = encode_batch(0, records, 0, time.time_ns() // 1_000_000, producer_id, sequence)
    return await data.produce_batch(topic, partition, batch, timeout_ms)


def partition_leader(nodes: list[Node], topic: str, partition: int = 0) -> Node | None:
    for node in nodes:
        try:
            node.data.offsets_now(topic, partition)
            return node
        except (NotLeader, NoLeader, UnknownTopic):
            continue
    return None


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


def http_of(config: NodeConfig) -> str:
    return next(p.http for p in config.peers if p.node_id == config.node_id)
