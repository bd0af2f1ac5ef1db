"""An outsider who keeps the Raft port's pending-handshake slots full (issue 35, Broken 4) must not keep
the cluster's own nodes out: their connections come from known peers' addresses and get room of their
own, outsiders are bounded per address, and a connection that sends no HELLO goes within
``hello_timeout_s``.

A 3-node group over real hubs on 127.0.0.1; a separate process floods n0's Raft port from 127.0.0.2..
(never sending a HELLO, reconnecting the moment n0 closes a connection); n0 then loses its links to both
peers, which must reconnect (they dial n0: greater node ids dial) and bring it the records committed
meanwhile."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from list_machine import ListMachine
from pysyncobj.node import Node

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.hub_config import HubConfig
from raftlog.consensus.transport import transport_class
from tests.waiting import wait_for

SECRET = b"raft-port-flood-test-secret-0123456789"
FLOOD = pathlib.Path(__file__).with_name("raft_port_flood.py")
FLOOD_SOURCES = 24  # 127.0.0.2 .. 127.0.0.25
FLOOD_PER_SOURCE = 8  # 192 wanted at once: three times the outsiders' pool of 64
FLOOD_SECONDS = 90.0  # the flood's own bound; the test stops it as soon as it is done
FLOOD_ATTEMPTS_MAX = 2_000_000


@pytest.fixture
def cluster() -> Iterator[tuple[list[MuxHub], list[RaftCore], list[ListMachine]]]:
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET, config=HubConfig()) for i in range(3)]
    for hub in hubs:
        for other in hubs:
            if other is not hub:
                hub.peers.set(other.node_id, other.address)
        hub.start()
    machines = [ListMachine() for _ in hubs]
    config = CoreConfig(
        auto_tick=True,
        election_timeout_min_ms=1000,
        election_timeout_max_ms=2000,
        heartbeat_period_ms=100,
        leader_fallback_timeout_ms=1500,
    )
    cores = [
        RaftCore(
            Node(hub.node_id),
            [Node(other.node_id) for other in hubs if other is not hub],
            machine,
            config,
            transport_class=transport_class(hub, "topic-a/0"),
            node_class=Node,
        )
        for hub, machine in zip(hubs, machines, strict=True)
    ]
    yield hubs, cores, machines
    for core in cores:
        core.destroy()
    for hub in hubs:
        hub.close()


def commit(cores: list[RaftCore], command: bytes, timeout_s: float) -> None:
    """Propose ``command`` on whichever core leads until one answers it committed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [core for core in cores if core.role.value == "leader"]
        if len(leaders) != 1:
            time.sleep(0.05)
            continue
        done = threading.Event()
        errors: list[object] = []

        def answered(
            result: object, error: object, errors: list[object] = errors, done: threading.Event = done
        ) -> None:
            errors.append(error)
            done.set()

        leaders[0].submit(command, answered)
        if done.wait(5.0) and not errors[0]:
            return
    raise AssertionError(f"{command!r} not committed within {timeout_s} s")


@pytest.mark.timeout(180)
def test_peers_reconnect_while_an_outsider_floods_the_raft_port(
    cluster: tuple[list[MuxHub], list[RaftCore], list[ListMachine]],
) -> None:
    hubs, cores, machines = cluster
    n0 = hubs[0]
    commit(cores, b"before", timeout_s=30)
    wait_for(
        lambda: all(m.commands == [b"before"] for m in machines),
        "every node applied 'before'",
        15,
        every_s=0.02,
    )

    host, port = n0.address.rsplit(":", 1)
    flood = subprocess.Popen(
        [
            sys.executable,
            str(FLOOD),
            host,
            port,
            *(str(n) for n in (FLOOD_SOURCES, FLOOD_PER_SOURCE, FLOOD_SECONDS, FLOOD_ATTEMPTS_MAX)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # the flood has filled the pool: n0 refuses its newest connections
        wait_for(lambda: n0.stats().get("rejected_too_many_handshakes", 0) > 0, "pool full", 30, every_s=0.02)
        established = n0.stats()["connections_established"]
        n0.peers.disconnect("n1")
        n0.peers.disconnect("n2")
        wait_for(
            lambda: (
                n0.stats()["connections_established"] >= established + 2
                and n0.peers.is_connected("n1")
                and n0.peers.is_connected("n2")
            ),
            "n1 and n2 reconnected to n0 through the flood",
            45,
            every_s=0.02,
        )
        commit(cores, b"during", timeout_s=30)
        wait_for(
            lambda: machines[0].commands == [b"before", b"during"], "n0 applied 'during'", 30, every_s=0.02
        )
        assert flood.poll() is None, "the flood ended before the peers were tested against it"
        assert n0.stats().get("rejected_too_many_handshakes", 0) > 0
    finally:
        flood.terminate()
        flood.wait(10)
