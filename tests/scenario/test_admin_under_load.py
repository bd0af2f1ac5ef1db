"""Operator actions on real node processes while producers and consumers keep running: replica moves
(completed and cancelled), leadership transfer, live config changes, topic deletion, maintenance with the
leader balancer, decommission and recommission. Afterwards every acknowledged record is present exactly
once and in order, consumers saw a prefix of the final log, and every partition is fully replicated.
Bad requests get 4xx and change nothing. A move also survives the crash of the controller leader that
drives it. Every wait is bounded."""

from __future__ import annotations

import asyncio
import glob
import os
import pathlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from partitions.operations.operator import BALANCE_INTERVAL_S
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import ClientError, RequestFailed
from tests.waiting import wait_until

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
TOKEN = "scenario-admin-token"
WAIT_S = 30.0


def admin_token_args(root: str) -> list[str]:
    """The serve options giving a node TOKEN: by a file, as a node takes it (never on its command line)."""
    path = os.path.join(root, "admin.token")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
        f.write(TOKEN)
    return ["--admin-token-file", path]


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path))
    for argv in started.argv.values():
        argv += admin_token_args(str(tmp_path))
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()


@dataclass
class Workload:
    """One idempotent producer per partition writing ``p<partition>-<i>`` in order, and one follower
    reading each partition as it grows."""

    urls: list[str]
    topic: str
    partitions: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    acked: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    uncertain: dict[int, list[str]] = field(default_factory=dict)
    consumed: dict[int, list[str]] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        for partition in range(self.partitions):
            self.acked[partition], self.uncertain[partition], self.consumed[partition] = [], [], []
            self.tasks.append(asyncio.create_task(self._produce(partition)))
            self.tasks.append(asyncio.create_task(self._consume(partition)))

    async def _produce(self, partition: int) -> None:
        async with RaftlogClient(self.urls, retries=80, backoff_max_s=0.3, timeout_s=10) as client:
            index = 0
            while not self.stop.is_set():
                value = f"p{partition}-{index}"
                try:
                    [produced] = await client.produce(self.topic, [Message(value)], partition=partition)
                    self.acked[partition].append((value, produced.offset))
                except ClientError:
                    self.uncertain[partition].append(value)
                index += 1
                await asyncio.sleep(0.02)

    async def _consume(self, partition: int) -> None:
        async with RaftlogClient(self.urls, retries=80, backoff_max_s=0.3, timeout_s=10) as client:
            offset = 0
            while not self.stop.is_set():
                try:
                    records = await client.fetch(self.topic, partition, offset, timeout_ms=200)
                except ClientError:
                    await asyncio.sleep(0.1)
                    continue
                for record in records:
                    self.consumed[partition].append(record.value.decode())
                    offset = record.offset + 1

    async def advanced(self, by: int = 5) -> None:
        """Until every partition has ``by`` more acknowledged writes than now: the workload really runs
        across whatever comes next (a fixed sleep proves nothing on a loaded machine)."""
        goal = {partition: len(acked) + by for partition, acked in self.acked.items()}

        async def there() -> bool:
            return all(len(self.acked[partition]) >= count for partition, count in goal.items())

        await until(f"{by} more writes acknowledged on every partition", there)

    async def finish(self, admin: RaftlogClient) -> None:
        self.stop.set()
        await asyncio.wait_for(asyncio.gather(*self.tasks), WAIT_S)
        for partition in range(self.partitions):
            final = await read_all(admin, self.topic, partition)
            values = [v for v, _ in final]
            assert len(set(values)) == len(values), f"p{partition}: a record appears twice"
            for value, offset in self.acked[partition]:
                assert (value, offset) in final, f"p{partition}: acked {value}@{offset} is missing"
            order = [int(v.rsplit("-", 1)[1]) for v in values]
            assert order == sorted(order), f"p{partition}: records out of order"
            known = {v for v, _ in self.acked[partition]} | set(self.uncertain[partition])
            assert set(values) <= known, f"p{partition}: records nobody produced"
            assert self.consumed[partition] == values[: len(self.consumed[partition])], "consumers diverged"
            assert len(self.acked[partition]) >= 10, f"p{partition}: the workload barely ran"


async def read_all(client: RaftlogClient, topic: str, partition: int) -> list[tuple[str, int]]:
    rows: list[tuple[str, int]] = []
    while True:
        records = await client.fetch(topic, partition, len(rows))
        if not records:
            return rows
        rows += [(r.value.decode(), r.offset) for r in records]


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout_s: float = WAIT_S) -> Any:
    return await wait_until(check, what, timeout_s, retrying=(ClientError,))


async def fully_replicated(admin: RaftlogClient, topic: str, partitions: int, factor: int) -> bool:
    for partition in range(partitions):
        state = await admin.cluster.partition_state(topic, partition)
        replicas = state["replicas"]
        if state["move"] is not None or len(replicas) != factor or not all(r["in_sync"] for r in replicas):
            return False
    health = await admin.cluster.health()
    return bool(health["is_healthy"])


async def refused(call: Awaitable[Any], status: int, code: int) -> None:
    with pytest.raises(RequestFailed) as failure:
        await call
    assert (failure.value.status, failure.value.error_code) == (status, code), failure.value.message


async def replica_sets(admin: RaftlogClient, topic: str) -> list[list[str]]:
    """Each partition's replica nodes: what a refused request must leave alone (leaders may move)."""
    return [[replica["node"] for replica in p["replicas"]] for p in (await admin.topic(topic))["partitions"]]


def test_moves_transfer_configs_and_deletion_under_load(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=40, backoff_max_s=0.5) as admin:
            await admin.create_topic("w", partitions=3, replication_factor=2)
            workload = Workload(cluster.urls, "w", 3)
            workload.start()
            await workload.advanced()

            # bad requests: 4xx, and nothing changes
            before = await replica_sets(admin, "w")
            replicas0 = (await admin.cluster.move_progress("w", 0))["replicas"]
            await refused(admin.cluster.move_replicas("w", 0, [replicas0[0], "n9"]), 404, 40405)
            await refused(admin.cluster.move_replicas("w", 0, [replicas0[0]]), 400, 40002)
            await refused(admin.cluster.move_replicas("w", 0, []), 400, 40002)
            await refused(admin.cluster.move_replicas("w", 0, [replicas0[0], replicas0[0]]), 400, 40002)
            await refused(admin.cluster.alter_topic_configs("w", {"retention.ms": "soon"}), 400, 40001)
            await refused(admin.cluster.cancel_move("w", 0), 404, 40406)
            assert await replica_sets(admin, "w") == before
            async with RaftlogClient(cluster.urls) as anonymous:
                await refused(anonymous.cluster.move_replicas("w", 0, ["n1", "n2"]), 401, 40101)

            # move partition 0 onto the node it lacks, taking the leader's place
            leader = (await admin.cluster.partition_state("w", 0))["leader"]
            spare = next(n for n in ("n1", "n2", "n3") if n not in replicas0)
            target = [spare] + [n for n in replicas0 if n != leader]
            started = await admin.cluster.move_replicas("w", 0, target)
            assert started["move"]["target"] == target
            await refused(admin.cluster.move_replicas("w", 0, replicas0), 409, 40908)

            async def moved() -> bool:
                progress = await admin.cluster.move_progress("w", 0)
                return progress["move"] is None and progress["replicas"] == target

            await until("move of w/0", moved)

            # a move cancelled at once goes back to where it started
            replicas1 = (await admin.cluster.move_progress("w", 1))["replicas"]
            spare1 = next(n for n in ("n1", "n2", "n3") if n not in replicas1)
            await admin.cluster.move_replicas("w", 1, [replicas1[0], spare1])
            cancelled = await admin.cluster.cancel_move("w", 1)
            assert cancelled["move"]["cancelled"] and cancelled["move"]["target"] == replicas1

            async def returned() -> bool:
                progress = await admin.cluster.move_progress("w", 1)
                return progress["move"] is None and set(progress["replicas"]) == set(replicas1)

            await until("cancelled move of w/1", returned)

            # leadership transfer and a live config change
            state2 = await admin.cluster.partition_state("w", 2)
            follower = next(r["node"] for r in state2["replicas"] if r["node"] != state2["leader"])
            assert (await admin.cluster.transfer_leadership("w", 2, follower))["leader"] == follower
            configs = await admin.cluster.alter_topic_configs(
                "w", {"internal.segment.bytes": 4096, "retention.ms": 3_600_000}
            )
            assert configs == {"segment.bytes": 4096, "retention.ms": 3_600_000}  # as stored

            async def rolled_on_every_replica() -> bool:  # records keep flowing into 4 KiB segments
                replicas = (await admin.cluster.move_progress("w", 2))["replicas"]
                return all(
                    len(glob.glob(os.path.join(cluster.root, node, "logs", "w-2.*", "*.log"))) > 1
                    for node in replicas
                )

            await until("segment.bytes applied live on every replica of w/2", rolled_on_every_replica)
            await workload.finish(admin)
            await until("full replication", lambda: fully_replicated(admin, "w", 3, 2))

            # max.message.bytes applies live on the leader
            await admin.cluster.alter_topic_configs("w", {"max.message.bytes": 2000})

            async def too_large() -> bool:
                try:
                    await admin.produce("w", [Message("x" * 5000)], partition=1)
                except RequestFailed as refusal:
                    return (refusal.status, refusal.error_code) == (413, 41301)
                return False

            await until("a 5 kB record refused after max.message.bytes=2000", too_large)

            # deleting a topic removes its data on every node
            await admin.create_topic("gone", partitions=1, replication_factor=3)
            await admin.produce("gone", [Message("x")], partition=0)
            await admin.delete_topic("gone")

            async def deleted() -> bool:
                return not glob.glob(os.path.join(cluster.root, "n*", "*", "gone-0.*"))

            await until("topic data deleted on every node", deleted)

            # a new replica never goes to a node gossip reports dead
            cluster.kill("n3")

            async def n3_dead() -> bool:
                return any(r["node_id"] == "n3" and r["state"] == "dead" for r in await admin.cluster.nodes())

            await until("n3 reported dead", n3_dead)
            for partition in range(3):
                replicas = (await admin.cluster.move_progress("w", partition))["replicas"]
                if "n3" not in replicas:
                    await refused(
                        admin.cluster.move_replicas("w", partition, [replicas[0], "n3"]), 400, 40002
                    )
                    assert (await admin.cluster.move_progress("w", partition)) == {
                        "topic": "w",
                        "partition": partition,
                        "replicas": replicas,
                        "move": None,
                    }

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_maintenance_balancer_and_decommission_under_load(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=40, backoff_max_s=0.5) as admin:
            await admin.create_topic("w", partitions=3, replication_factor=2)
            await admin.create_topic("lead", partitions=6, replication_factor=3)
            workload = Workload(cluster.urls, "w", 3)
            workload.start()
            await workload.advanced()

            async def leads(node: str) -> int:
                rows = await admin.cluster.nodes()
                return int(next(r["leader_of"] for r in rows if r["node_id"] == node))

            # maintenance: n1 is drained of leadership and stays drained
            await admin.cluster.set_maintenance("n1", True)

            async def flagged() -> bool:  # /v1/nodes answers from the serving node's applied metadata
                return bool(
                    next(r for r in await admin.cluster.nodes() if r["node_id"] == "n1")["maintenance"]
                )

            await until("n1 shown in maintenance", flagged)

            async def drained() -> bool:
                return await leads("n1") == 0

            await until("n1 drained of leadership", drained)
            window = time.monotonic() + BALANCE_INTERVAL_S  # a balancer round: nothing comes back
            while time.monotonic() < window:
                assert await leads("n1") == 0
            # cleared: the balancer hands n1 a share of leadership again
            await admin.cluster.set_maintenance("n1", False)

            async def balanced() -> bool:
                return await leads("n1") >= 2

            await until("leadership back on n1", balanced)

            # decommission n3: every replica of "w" it holds moves to n1 or n2 (a 3-replica topic on three
            # nodes could not leave n3: it goes first)
            await admin.delete_topic("lead")
            await refused(admin.cluster.decommission("n9"), 404, 40405)
            await admin.cluster.decommission("n3")

            async def decommissioned() -> dict[str, Any] | None:
                status = await admin.cluster.decommission_status("n3")
                return status if status["done"] else None

            await until("decommission of n3", decommissioned, timeout_s=45)
            for partition in range(3):
                assert "n3" not in (await admin.cluster.move_progress("w", partition))["replicas"]
            await workload.finish(admin)
            await until("full replication", lambda: fully_replicated(admin, "w", 3, 2))

            # the emptied node is stopped: gossip reports it dead, and the cluster stays healthy
            cluster.kill("n3")

            async def healthy_without_n3() -> bool:
                health = await admin.cluster.health()
                gone = any(r["node_id"] == "n3" and r["state"] == "dead" for r in await admin.cluster.nodes())
                return gone and bool(health["is_healthy"]) and health["nodes_down"] == []

            await until("healthy with the decommissioned n3 stopped", healthy_without_n3)
            await admin.cluster.recommission("n3")
            assert not (await admin.cluster.decommission_status("n3"))["decommissioning"]

    asyncio.run(asyncio.wait_for(scenario(), 150))


def test_a_node_that_joins_by_gossip_receives_replicas_under_load(tmp_path: pathlib.Path) -> None:
    cluster = ProcessCluster.create(str(tmp_path), count=3, joining=1)
    for argv in cluster.argv.values():
        argv += admin_token_args(str(tmp_path))

    async def scenario() -> None:
        async with RaftlogClient(cluster.urls[:3], admin_token=TOKEN, retries=40, backoff_max_s=0.5) as admin:

            async def joined() -> bool:
                return any(
                    n["node_id"] == "n4" and n["state"] == "alive" for n in await admin.cluster.nodes()
                )

            await until("n4 known alive by gossip", joined)
            await admin.create_topic("w", partitions=2, replication_factor=2)
            workload = Workload(cluster.urls[:3], "w", 2)
            workload.start()
            await workload.advanced()
            replicas = (await admin.cluster.move_progress("w", 0))["replicas"]
            await admin.cluster.move_replicas("w", 0, ["n4", replicas[1]])

            async def moved() -> bool:
                progress = await admin.cluster.move_progress("w", 0)
                return progress["move"] is None and progress["replicas"] == ["n4", replicas[1]]

            await until("move of w/0 onto n4", moved)
            assert (await admin.cluster.transfer_leadership("w", 0, "n4"))["leader"] == "n4"
            await workload.advanced()  # the workload keeps writing through the new leader
            await workload.finish(admin)
            await until("full replication", lambda: fully_replicated(admin, "w", 2, 2))
        async with RaftlogClient([cluster.url("n4")], admin_token=TOKEN, retries=40) as via_joined:
            # (the leader balancer may have moved leadership on since: n4 keeps its replica)
            assert "n4" in [r["node"] for r in (await via_joined.cluster.partition_state("w", 0))["replicas"]]
            assert len(await read_all(via_joined, "w", 1)) > 0  # any partition, through the joined node

    try:
        cluster.start_all()
        asyncio.run(asyncio.wait_for(scenario(), 120))
    finally:
        cluster.stop_all()


def test_a_move_survives_the_crash_of_the_controller_leader(cluster: ProcessCluster) -> None:
    """...and once the crashed node is back, the leader balancer hands it its share of leadership."""

    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=60, backoff_max_s=0.5) as admin:
            await admin.create_topic("w", partitions=2, replication_factor=2)
            await admin.create_topic("lead", partitions=6, replication_factor=3)
            workload = Workload(cluster.urls, "w", 2)
            workload.start()
            await workload.advanced()
            replicas = (await admin.cluster.move_progress("w", 0))["replicas"]
            spare = next(n for n in ("n1", "n2", "n3") if n not in replicas)
            target = [spare, replicas[1]]
            await admin.cluster.move_replicas("w", 0, target)

            async def joining() -> bool:
                return (await admin.cluster.move_progress("w", 0))["move"]["adding"] == spare

            await until("the spare named as joining", joining)
            controller = (await admin.cluster.health())["controller"]
            cluster.kill(controller)

            async def next_controller() -> bool:
                return (await admin.cluster.health())["controller"] not in (None, controller)

            await until("the next controller leader elected", next_controller)
            cluster.start(controller)
            await asyncio.to_thread(cluster.wait_ready, [controller])

            async def moved() -> bool:
                progress = await admin.cluster.move_progress("w", 0)
                return progress["move"] is None and progress["replicas"] == target

            await until("move of w/0 finished by the next controller leader", moved, timeout_s=45)

            async def rebalanced() -> bool:
                # the balancer's promise, over every partition it balances: no node leads two more than
                # the restarted one (every "lead" partition has a replica on it, so it can receive any)
                led = Counter({node: 0 for node in ("n1", "n2", "n3")})
                for topic, count in (("lead", 6), ("w", 2)):
                    for partition in range(count):
                        leader = (await admin.cluster.partition_state(topic, partition))["leader"]
                        if leader is None:
                            return False
                        led[leader] += 1
                return led[controller] >= max(led.values()) - 1

            await until(f"{controller} leads again after its restart", rebalanced)
            await workload.advanced()
            await workload.finish(admin)
            await until("full replication", lambda: fully_replicated(admin, "w", 2, 2))

    asyncio.run(asyncio.wait_for(scenario(), 150))
