"""What crosses the Raft port is unreadable to a listener: a record proposed through Raft, and the name of
the topic its group replicates, never appear in the bytes between two nodes (captured by a loopback TCP
proxy sitting on the link), while the record is committed and applied on both nodes."""

from __future__ import annotations

import socket
import threading
import time

from list_machine import ListMachine
from pysyncobj.node import Node

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.transport import transport_class
from tests.waiting import wait_for

SECRET = b"raft-link-encryption-secret-0123456789"
TOPIC_GROUP = "payroll-salaries/0"
RECORD = b"alice-salary=987654-confidential"


class RecordingProxy:
    """Forwards one listening port to ``target`` and keeps every byte it forwards, both ways."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.captured = bytearray()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
                if not data:
                    return
                with self.lock:
                    self.captured += data
                sink.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


def test_records_and_group_ids_do_not_cross_the_raft_port_in_clear() -> None:
    n0 = MuxHub("n0", "127.0.0.1:0", SECRET)
    n1 = MuxHub("n1", "127.0.0.1:0", SECRET)  # n1 > n0: n1 dials n0, through the proxy
    host, port = n0.address.rsplit(":", 1)
    proxy = RecordingProxy((host, int(port)))
    n0.peers.set("n1", n1.address)
    n1.peers.set("n0", proxy.address)
    hubs = [n0, n1]
    for hub in hubs:
        hub.start()
    machines = [ListMachine(), ListMachine()]
    config = CoreConfig(
        auto_tick=True,
        election_timeout_min_ms=400,
        election_timeout_max_ms=800,
        heartbeat_period_ms=50,
        leader_fallback_timeout_ms=600,
    )
    cores = [
        RaftCore(
            Node(hub.node_id),
            [Node(other.node_id) for other in hubs if other is not hub],
            machine,
            config,
            transport_class=transport_class(hub, TOPIC_GROUP),
            node_class=Node,
        )
        for hub, machine in zip(hubs, machines, strict=True)
    ]
    try:
        deadline = time.monotonic() + 30
        while not all(machine.commands == [RECORD] for machine in machines):
            assert time.monotonic() < deadline, "the record was not committed and applied on both nodes"
            leaders = [core for core in cores if core.role.value == "leader"]
            if len(leaders) == 1 and not any(machine.commands for machine in machines):
                done = threading.Event()
                leaders[0].submit(RECORD, lambda result, error, done=done: done.set())
                done.wait(5)
            time.sleep(0.05)
        wait_for(lambda: len(proxy.captured) > 1000, "traffic through the proxy", 10, every_s=0.02)
        with proxy.lock:
            captured = bytes(proxy.captured)
        assert b"n0" in captured  # the proxy saw the link: the handshake names both nodes in clear
        assert RECORD not in captured
        assert TOPIC_GROUP.encode() not in captured
        assert b"payroll" not in captured
    finally:
        for core in cores:
            core.destroy()
        for hub in hubs:
            hub.close()
        proxy.close()
