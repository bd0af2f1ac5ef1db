"""RaftHost (partitions/replicas/raft_host.py), the room that owns a node's Raft machinery: three hosts on
loopback, each with its driver thread and mux hub, open one group with a durable journal under the
node's ``raft/`` directory, commit over the hubs, run work on the driver thread between applies, learn a
peer's new address, and a group reopened on a restarted host rejoins on the journal it left."""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
from collections.abc import AsyncIterator, Callable

import pytest
from in_process import until

from partitions.replicas.raft_host import RAFT_DIR, RaftHost
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.interface import Role

SECRET = b"raft-host-test-secret-0123456789abcdef"
FAST = CoreConfig(election_timeout_min_ms=400, election_timeout_max_ms=800, heartbeat_period_ms=50)
GROUP = "hosted-0"
WAIT_S = 60.0  # elections and commits on a loaded 2-core machine


class Commands:
    """Keeps every applied command, in order, and the thread that applied it."""

    def __init__(self) -> None:
        self.commands: list[bytes] = []
        self.threads: set[str] = set()

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        self.commands.append(bytes(command))
        self.threads.add(threading.current_thread().name)
        return index

    def snapshot(self) -> bytes | None:
        return None  # never compacted: the journal keeps every entry

    def restore(self, snapshot: bytes) -> None:
        raise AssertionError("no snapshots here")


def host(root: pathlib.Path, node_id: str, discarded: list[str]) -> RaftHost:
    return RaftHost(
        node_id,
        str(root / node_id),
        "127.0.0.1:0",
        SECRET,
        {},
        FAST,
        sync_threads=1,
        sync_thread_min_bytes=1 << 20,
        discard=discarded.append,
    )


async def shut(groups: list[ReplicaGroup], hosts: list[RaftHost]) -> None:
    """Every group closed, then each host stopped once its driver ran the closes."""
    for group in groups:
        group.close()
    for one in hosts:
        await one.barrier()
        one.stop()


def introduce(hosts: list[RaftHost]) -> None:
    for one in hosts:
        for other in hosts:
            if other is not one:
                one.learn_peer(other.node_id, other.hub.address)


def leader(groups: list[ReplicaGroup]) -> ReplicaGroup | None:
    leaders = [g for g in groups if g.status().role is Role.LEADER]
    return leaders[0] if len(leaders) == 1 else None


async def commit(groups: list[ReplicaGroup], command: bytes) -> None:
    await until(lambda: leader(groups) is not None, WAIT_S, "a leader")
    chosen = leader(groups)
    assert chosen is not None
    await chosen.propose(command, timeout_ms=int(WAIT_S * 1000))


Hosted = tuple[list[RaftHost], list[ReplicaGroup], list[Commands]]


@pytest.fixture
async def cluster(tmp_path: pathlib.Path) -> AsyncIterator[Hosted]:
    discarded: list[str] = []
    hosts = [host(tmp_path, f"n{i}", discarded) for i in (1, 2, 3)]
    introduce(hosts)
    machines = [Commands() for _ in hosts]
    groups: list[ReplicaGroup] = []
    for one in hosts:
        one.start()
    try:
        voters = [one.node_id for one in hosts]
        for one, machine in zip(hosts, machines, strict=True):
            groups.append(await one.open(GROUP, voters, machine))
        yield hosts, groups, machines
    finally:
        await shut(groups, hosts)


async def test_a_group_opened_on_hosts_commits_over_their_hubs_and_applies_on_the_driver_thread(
    cluster: Hosted,
) -> None:
    hosts, groups, machines = cluster
    commands = [b"c%d" % i for i in range(20)]
    for command in commands:
        await commit(groups, command)
    await until(lambda: all(m.commands == commands for m in machines), WAIT_S, "every replica applied all")
    for one, machine in zip(hosts, machines, strict=True):
        assert machine.threads == {f"raft-{one.node_id}"}  # the host's one driver thread applies
        journal = pathlib.Path(one.group_dir(GROUP))
        assert journal == pathlib.Path(one.root) / GROUP and pathlib.Path(one.root).name == RAFT_DIR
        assert any(journal.joinpath("journal").iterdir()), "the journal is on disk under raft/<group>"
        assert all(one.is_connected(other.node_id) for other in hosts if other is not one)
        assert set(one.stats()) >= {"queued_bytes"}


async def test_run_and_barrier_execute_on_the_driver_thread_in_order(
    cluster: Hosted,
) -> None:
    hosts, _, _ = cluster
    one = hosts[0]
    seen: list[tuple[int, str]] = []

    def note(n: int) -> Callable[[], int]:
        def run() -> int:
            seen.append((n, threading.current_thread().name))
            return n * n

        return run

    answers = await asyncio.gather(*(one.run(note(n)) for n in range(10)))
    await one.barrier()
    assert answers == [n * n for n in range(10)]
    assert seen == [(n, f"raft-{one.node_id}") for n in range(10)]

    def fails() -> None:
        raise ValueError("raised on the driver thread")

    with pytest.raises(ValueError, match="raised on the driver thread"):
        await one.run(fails)
    assert await one.run(lambda: "the driver goes on") == "the driver goes on"


async def test_a_peer_that_moves_is_reached_at_its_new_address(tmp_path: pathlib.Path) -> None:
    """learn_peer with an address a peer's hub no longer listens on, then its real one: the group commits
    once the host knows where its peer is (gossip tells a node a restarted peer's new address)."""
    discarded: list[str] = []
    hosts = [host(tmp_path, f"n{i}", discarded) for i in (1, 2)]
    hosts[0].learn_peer("n2", "127.0.0.1:9")  # nobody there
    hosts[1].learn_peer("n1", hosts[0].hub.address)
    machines = [Commands() for _ in hosts]
    groups: list[ReplicaGroup] = []
    for one in hosts:
        one.start()
    try:
        for one, machine in zip(hosts, machines, strict=True):
            groups.append(await one.open(GROUP, ["n1", "n2"], machine))
        hosts[0].learn_peer("n2", hosts[1].hub.address)
        assert hosts[0].hub.peers.addresses()["n2"] == hosts[1].hub.address
        await commit(groups, b"after the move")
        await until(lambda: all(m.commands == [b"after the move"] for m in machines), WAIT_S, "both applied")
    finally:
        await shut(groups, hosts)


async def test_a_group_reopened_on_a_restarted_host_rejoins_on_its_journal(tmp_path: pathlib.Path) -> None:
    discarded: list[str] = []
    hosts = [host(tmp_path, f"n{i}", discarded) for i in (1, 2, 3)]
    introduce(hosts)
    machines = [Commands() for _ in hosts]
    voters = [one.node_id for one in hosts]
    groups: list[ReplicaGroup] = []
    for one in hosts:
        one.start()
    try:
        for one, machine in zip(hosts, machines, strict=True):
            groups.append(await one.open(GROUP, voters, machine))
        commands = [b"kept%d" % i for i in range(5)]
        for command in commands:
            await commit(groups, command)
        await until(lambda: all(m.commands == commands for m in machines), WAIT_S, "all applied")

        # n3 stops: its group closed, its host stopped; a new host on the same data directory
        groups[2].close()
        await hosts[2].barrier()
        hosts[2].stop()
        hosts[2] = host(tmp_path, "n3", discarded)
        introduce(hosts)
        hosts[2].start()
        machines[2] = Commands()
        groups[2] = await hosts[2].open(GROUP, voters, machines[2])
        await commit(groups, b"after the restart")
        expected = [*commands, b"after the restart"]
        await until(lambda: machines[2].commands == expected, WAIT_S, "the restarted replica replayed all")
        assert os.path.isdir(hosts[2].group_dir(GROUP))
    finally:
        await shut(groups, hosts)
