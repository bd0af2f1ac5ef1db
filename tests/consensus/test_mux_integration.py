"""RaftCore over the multiplexed msgpack+HMAC transport (raftlog.consensus.transport): the patched core's
messages (a term on every append reply, entries as msgpack lists) pass the wire schema, proposals commit,
a new leader takes over when the leader stops, and ReplicaGroups on Drivers work over hubs."""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time
from collections.abc import Iterator

import pytest
from pysyncobj.node import Node

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.driver import Driver
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.interface import Role
from raftlog.consensus.journal import FileJournal
from raftlog.consensus.transport import MuxHub, transport_class

SECRET = b"consensus-core-test-secret-0123456789"


class ListMachine:
    def __init__(self) -> None:
        self.commands: list[bytes] = []

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        self.commands.append(bytes(command))
        return index

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: bytes) -> None:
        raise AssertionError("no snapshots here")


@pytest.fixture
def mux_cluster() -> Iterator[tuple[list[RaftCore], list[ListMachine]]]:
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET) for i in range(3)]
    for hub in hubs:
        for other in hubs:
            if other is not hub:
                hub.set_peer(other.node_id, other.address)
        hub.start()
    machines = [ListMachine() for _ in hubs]
    cores = []
    for hub, machine in zip(hubs, machines, strict=True):
        others = [Node(other.node_id) for other in hubs if other is not hub]
        config = CoreConfig(
            auto_tick=True,
            election_timeout_min_ms=400,
            election_timeout_max_ms=800,
            heartbeat_period_ms=50,
            leader_fallback_timeout_ms=600,
        )
        cores.append(
            RaftCore(
                Node(hub.node_id),
                others,
                machine,
                config,
                transport_class=transport_class(hub, "topic-a/0"),
                node_class=Node,
            )
        )
    yield cores, machines
    for core in cores:
        core.destroy()
    time.sleep(0.2)
    for hub in hubs:
        hub.close()


def wait_leader(cores: list[RaftCore], timeout_s: float = 8.0) -> RaftCore:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [core for core in cores if core.role.value == "leader"]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.02)
    raise AssertionError(f"no single leader within {timeout_s} s")


def propose_many(core: RaftCore, commands: list[bytes], timeout_s: float = 10.0) -> list[int]:
    done = threading.Semaphore(0)
    errors: list[int] = []
    for command in commands:
        core.submit(command, lambda result, error: (errors.append(error) if error else None, done.release()))
    for _ in commands:
        if not done.acquire(timeout=timeout_s):
            raise AssertionError(f"proposals not answered within {timeout_s} s")
    return errors


def test_core_commits_over_mux_and_survives_leader_stop(
    mux_cluster: tuple[list[RaftCore], list[ListMachine]],
) -> None:
    cores, machines = mux_cluster
    leader = wait_leader(cores)
    commands = [b"m%d" % i for i in range(2000)]
    assert propose_many(leader, commands) == []
    deadline = time.monotonic() + 5
    while any(machine.commands != commands for machine in machines):
        assert time.monotonic() < deadline, [len(m.commands) for m in machines]
        time.sleep(0.02)

    leader._SyncObj__transport.send = lambda *args, **kwargs: False
    leader.destroy()
    survivors = [core for core in cores if core is not leader]
    new_leader = wait_leader(survivors)
    assert propose_many(new_leader, [b"after"]) == []
    assert machines[cores.index(new_leader)].commands == [*commands, b"after"]


class WatchedJournal(FileJournal):
    """Records, at every fsync that waits for the disk, the bytes its hub still held for peers."""

    def __init__(self, directory: str, hub: MuxHub) -> None:
        super().__init__(directory)
        self._hub = hub
        self.queued_at_sync: list[int] = []

    def sync(self) -> None:
        if self.sync_pending and self._hub.peers():
            self.queued_at_sync.append(self._hub.stats()["queued_bytes"])
        super().sync()


@pytest.mark.parametrize("hub_io", ["driver", "thread"])
async def test_replica_groups_on_drivers_over_mux(hub_io: str, tmp_path: pathlib.Path) -> None:
    """The product's wiring: per node one MuxHub and one Driver watching the hub's inbound; the hub's I/O
    on the driver thread (as nodes run) or on its own thread. With file journals."""
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET) for i in range(3)]
    drivers = [Driver(name=f"driver-n{i}") for i in range(3)]
    for hub, driver in zip(hubs, drivers, strict=True):
        for other in hubs:
            if other is not hub:
                hub.set_peer(other.node_id, other.address)
        driver.watch_inbound(hub.take_ready_groups, wake_fd=hub.inbound_fd())
        if hub_io == "driver":
            driver.drive_hub(hub)
        else:
            hub.start()
        driver.start()
    machines = [ListMachine() for _ in hubs]
    voters = [hub.node_id for hub in hubs]
    groups: list[ReplicaGroup] = []
    journals = [WatchedJournal(str(tmp_path / hub.node_id), hub) for hub in hubs]
    try:
        for hub, driver, machine, journal in zip(hubs, drivers, machines, journals, strict=True):
            config = CoreConfig(
                election_timeout_min_ms=400, election_timeout_max_ms=800, heartbeat_period_ms=50
            )
            groups.append(
                await ReplicaGroup.open(
                    "topic-b/0",
                    hub.node_id,
                    voters,
                    machine,
                    driver,
                    config,
                    journal=journal,
                    transport_class=transport_class(hub, "topic-b/0"),
                    node_class=Node,
                )
            )
        deadline = time.monotonic() + 8
        while sum(g.status().role is Role.LEADER for g in groups) != 1:
            assert time.monotonic() < deadline, "no leader within 8 s"
            await asyncio.sleep(0.02)
        leader = next(g for g in groups if g.status().role is Role.LEADER)
        for i in range(50):
            await leader.propose(b"seq%d" % i, timeout_ms=5000)
        results = await asyncio.gather(*(leader.propose(b"par%d" % i, timeout_ms=5000) for i in range(500)))
        assert len(set(results)) == 500
        expected = [b"seq%d" % i for i in range(50)] + [b"par%d" % i for i in range(500)]
        deadline = time.monotonic() + 5
        while any(m.commands != expected for m in machines):
            assert time.monotonic() < deadline, [len(m.commands) for m in machines]
            await asyncio.sleep(0.02)
        if hub_io == "driver":
            assert all(not hub._thread.is_alive() for hub in hubs), "polled hubs started a thread"
            # the leader wrote its appends to the sockets before each fsync, so followers wrote meanwhile
            held = journals[groups.index(leader)].queued_at_sync
            assert len(held) > 10 and all(queued == 0 for queued in held), held
    finally:
        for group in groups:
            group.close()
        for driver in drivers:
            done = threading.Event()
            driver.call(done.set)
            assert done.wait(5)
            driver.stop()
        for hub in hubs:
            hub.close()
