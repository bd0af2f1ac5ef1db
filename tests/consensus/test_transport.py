"""The multiplexed Raft transport with stock pysyncobj SyncObj groups on 127.0.0.1.

Every node is a MuxHub (one port, one connection per peer) plus one driver thread that ticks all of its
groups with ``doTick(0)`` - the threading model of the real node.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pytest
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.node import Node

from raftlog.consensus import wire
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.hub_config import DuplicateGroup, HubConfig, InvalidAddress, TransportError
from raftlog.consensus.hub_gate import LevelGate
from raftlog.consensus.transport import MuxTransport, transport_class

SECRET = b"test-cluster-secret-0123456789ab"


class Counter(SyncObj):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.value = 0

    @replicated  # type: ignore[untyped-decorator]
    def increment(self) -> int:
        self.value += 1
        return self.value


class RecordingTransport(MuxTransport):
    """A MuxTransport that records which thread every callback into SyncObj runs on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.callback_threads: set[int] = set()
        self.callbacks = 0
        super().__init__(*args, **kwargs)

    def _record(self) -> None:
        self.callback_threads.add(threading.get_ident())
        self.callbacks += 1

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        self._record()
        super()._onMessageReceived(node, message)

    def _onNodeConnected(self, node: Any) -> None:
        self._record()
        super()._onNodeConnected(node)

    def _onNodeDisconnected(self, node: Any) -> None:
        self._record()
        super()._onNodeDisconnected(node)


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for: {what}")
        time.sleep(0.02)


class Node_:
    """One node: a hub, its groups, and the single driver thread that ticks them."""

    def __init__(
        self,
        node_id: str,
        secret: bytes = SECRET,
        config: HubConfig | None = None,
        mode: str = "thread",
        gate: LevelGate | None = None,
    ) -> None:
        self.node_id = node_id
        self.mode = mode  # "thread": hub I/O thread; "poll": the driver thread runs the hub's I/O
        self.hub = MuxHub(node_id, "127.0.0.1:0", secret, config=config, gate=gate)
        self.groups: dict[str, Counter] = {}
        self._lock = threading.Lock()
        self._pending: list[Callable[[], None]] = []
        self._stop = False
        self.tick_threads: set[int] = set()
        self._thread = threading.Thread(target=self._drive, name=f"driver-{node_id}", daemon=True)

    def start(self) -> None:
        if self.mode == "thread":
            self.hub.start()
        self._thread.start()

    @property
    def driver_thread_id(self) -> int | None:
        return self._thread.ident

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the driver (tick) thread and return its result: SyncObj is not thread-safe."""
        done = threading.Event()
        box: list[Any] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                box.append(fn())
            except BaseException as exc:  # re-raised in the calling thread below
                failure.append(exc)
            finally:
                done.set()

        with self._lock:
            self._pending.append(run)
        if not done.wait(10):
            raise AssertionError(f"driver thread of {self.node_id} did not run the call")
        if failure:
            raise failure[0]
        return box[0]

    def add_group(self, group: str, members: list[str]) -> Counter:
        def create() -> Counter:
            conf = SyncObjConf(autoTick=False, raftMinTimeout=0.5, raftMaxTimeout=1.5)
            others = [Node(m) for m in members if m != self.node_id]
            transport = functools.partial(RecordingTransport, hub=self.hub, group=group)
            obj = Counter(Node(self.node_id), others, conf, nodeClass=Node, transportClass=transport)
            self.groups[group] = obj
            return obj

        result: Counter = self.call(create)
        return result

    def remove_group(self, group: str) -> None:
        self.call(lambda: self.groups.pop(group).destroy())

    def _drive(self) -> None:
        while not self._stop:
            with self._lock:
                pending, self._pending = self._pending, []
            for fn in pending:
                fn()
            for obj in list(self.groups.values()):
                obj.doTick(0.0)
            self.tick_threads.add(threading.get_ident())
            if self.mode == "poll":
                self.hub.poll(0.005)
            else:
                self.hub.inbox.wait(0.005)

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        for obj in self.groups.values():
            obj.destroy()
        self.hub.close()


@contextlib.contextmanager
def cluster(node_ids: list[str], secret: bytes = SECRET, mode: str = "thread") -> Iterator[list[Node_]]:
    nodes = [Node_(n, secret, mode=mode) for n in node_ids]
    try:
        for node in nodes:
            for other in nodes:
                if other is not node:
                    node.hub.peers.set(other.node_id, other.hub.address)
            node.start()
        yield nodes
    finally:
        for node in nodes:
            node.close()


def leader_of(nodes: list[Node_], group: str) -> Counter | None:
    leaders = [n.groups[group] for n in nodes if group in n.groups and n.groups[group]._isLeader()]
    return leaders[0] if len(leaders) == 1 else None


NOT_APPLIED = {
    FAIL_REASON.QUEUE_FULL,
    FAIL_REASON.MISSING_LEADER,
    FAIL_REASON.DISCARDED,
    FAIL_REASON.NOT_LEADER,
    FAIL_REASON.REQUEST_DENIED,
}


def commit(nodes: list[Node_], groups: list[str], count: int, timeout_s: float, retry: bool = False) -> None:
    """Submit ``count`` increments to the leader of every group; wait until all succeed.

    ``retry``: resubmit commands that definitely were not applied (a leader change while they were in
    flight), for scenarios that provoke elections. Ambiguous outcomes always fail the test.
    """
    deadline = time.monotonic() + timeout_s
    pending = dict.fromkeys(groups, count)
    by_node = {n.node_id: n for n in nodes}
    lock = threading.Lock()

    def submit(leader: Counter, n: int, outcomes: list[int]) -> None:
        def callback(result: Any, error: int) -> None:
            with lock:
                outcomes.append(error)

        for _ in range(n):
            leader.increment(callback=callback)

    while pending:
        outcomes: dict[str, list[int]] = {}
        for group, n in pending.items():
            if retry:
                has_leader = functools.partial(lambda g: leader_of(nodes, g) is not None, group)
                wait_until(has_leader, 15, f"a leader in {group}")
            leader = leader_of(nodes, group)
            if leader is None:
                assert retry, f"no single leader in {group}"
                continue
            outcomes[group] = []
            by_node[leader.selfNode.id].call(functools.partial(submit, leader, n, outcomes[group]))
        wait_until(
            functools.partial(lambda o, p: all(len(o[g]) == p[g] for g in o), outcomes, pending),
            max(deadline - time.monotonic(), 0.1),
            "every commit callback",
        )
        failed = [e for g in outcomes for e in outcomes[g] if e != FAIL_REASON.SUCCESS]
        if not retry or any(e not in NOT_APPLIED for e in failed):
            assert failed == [], f"{len(failed)} commands failed: {sorted(set(failed))}"
        pending = {
            g: n - outcomes[g].count(FAIL_REASON.SUCCESS) if g in outcomes else n for g, n in pending.items()
        }
        pending = {g: n for g, n in pending.items() if n}
        assert not pending or time.monotonic() < deadline, f"commands still not applied: {pending}"


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.timeout(40)
@pytest.mark.parametrize("mode", ["thread", "poll"])
def test_fifty_groups_elect_and_commit_over_one_connection_per_peer(mode: str) -> None:
    groups = [f"topic-{i}" for i in range(50)]
    with cluster(["n0", "n1", "n2"], mode=mode) as nodes:
        for group in groups:
            for node in nodes:
                node.add_group(group, ["n0", "n1", "n2"])
        wait_until(lambda: all(leader_of(nodes, g) for g in groups), 20, "a leader in every group")

        commit(nodes, groups, count=5, timeout_s=15)
        wait_until(
            lambda: all(n.groups[g].value == 5 for n in nodes for g in groups),
            10,
            "every replica applied 5 commands",
        )
        for node in nodes:
            stats = node.hub.stats()
            assert stats["connections_established"] == 2, (node.node_id, stats)
            assert stats.get("authentication_failures", 0) == 0 and stats.get("protocol_errors", 0) == 0
            # every callback into every SyncObj ran on the node's one driver thread
            assert node.tick_threads == {node.driver_thread_id}
            for obj in node.groups.values():
                transport = obj._SyncObj__transport
                assert isinstance(transport, RecordingTransport) and transport.callbacks > 0
                assert transport.callback_threads == {node.driver_thread_id}
            # frames carry many groups' messages: far fewer frames than messages
            assert stats["messages_sent"] > stats["frames_sent"], stats


@pytest.mark.timeout(30)
def test_node_with_wrong_secret_cannot_join() -> None:
    with cluster(["n0", "n1", "n2"]) as nodes:
        # Both directions: "a-mallory" is dialed by the good nodes, "z-mallory" dials them.
        intruders = [Node_("a-mallory", b"not-the-cluster-secret-at-all!!"), Node_("z-mallory", b"x" * 32)]
        try:
            for intruder in intruders:
                for node in nodes:
                    node.hub.peers.set(intruder.node_id, intruder.hub.address)
                    intruder.hub.peers.set(node.node_id, node.hub.address)
                intruder.start()
            members = ["n0", "n1", "n2"]
            for node in nodes:
                node.add_group("g", members)
            # The intruders try to take part in the same group as a fourth voter, which they are not.
            spies = [i.add_group("g", [*members, i.node_id]) for i in intruders]
            wait_until(lambda: leader_of(nodes, "g") is not None, 15, "a leader among the good nodes")
            commit(nodes, ["g"], count=3, timeout_s=10)
            wait_until(
                lambda: (
                    all(n.groups["g"].value == 3 for n in nodes)
                    and intruders[1].hub.stats().get("authentication_failures", 0) > 0
                    and sum(n.hub.stats().get("authentication_failures", 0) for n in nodes) > 0
                ),
                60,
                "every good node applied the increments and both intruders' handshakes were refused",
            )  # meanwhile a negative window: none of the intruders' tries got them in

            for intruder, spy in zip(intruders, spies, strict=True):
                assert not any(intruder.hub.peers.is_connected(n.node_id) for n in nodes)
                assert not any(n.hub.peers.is_connected(intruder.node_id) for n in nodes)
                assert intruder.hub.stats().get("messages_received", 0) == 0
                assert intruder.call(functools.partial(lambda s: (s.value, s._getLeader()), spy)) == (0, None)
            assert intruders[1].hub.stats()["authentication_failures"] > 0  # z-mallory's dials fail auth
            assert (
                sum(n.hub.stats().get("authentication_failures", 0) for n in nodes) > 0
            )  # dialing a-mallory
            assert all(n.groups["g"].value == 3 for n in nodes)
        finally:
            for intruder in intruders:
                intruder.close()


@pytest.mark.timeout(40)
def test_reconnects_after_a_socket_is_closed() -> None:
    groups = [f"g{i}" for i in range(5)]
    with cluster(["n0", "n1", "n2"]) as nodes:
        for group in groups:
            for node in nodes:
                node.add_group(group, ["n0", "n1", "n2"])
        wait_until(lambda: all(leader_of(nodes, g) for g in groups), 20, "a leader in every group")
        commit(nodes, groups, count=3, timeout_s=10)

        # Break the n2 -> n0 TCP connection under the hub's feet (as a network reset would).
        n0, n2 = nodes[0], nodes[2]
        connection = n2.hub.peers.by_id["n0"].connection
        assert connection is not None
        connection.sock.shutdown(socket.SHUT_RDWR)
        wait_until(lambda: n0.hub.stats()["connections_established"] >= 3, 10, "n0 accepts a new connection")
        wait_until(
            lambda: n2.hub.peers.is_connected("n0") and n0.hub.peers.is_connected("n2"),
            10,
            "n0 and n2 reconnected",
        )

        # Also an explicit disconnect of the other pair.
        n1 = nodes[1]
        n1.hub.peers.disconnect("n0")
        wait_until(lambda: n0.hub.stats()["connections_established"] >= 4, 10, "n1 reconnects to n0")

        wait_until(lambda: all(leader_of(nodes, g) for g in groups), 20, "a leader in every group")
        commit(nodes, groups, count=4, timeout_s=15, retry=True)
        wait_until(
            lambda: all(n.groups[g].value == 7 for n in nodes for g in groups), 10, "all replicas at 7"
        )


@pytest.mark.timeout(40)
def test_groups_and_peers_change_at_runtime() -> None:
    members = ["n0", "n1", "n2"]
    with cluster(["n0", "n1"]) as nodes:
        for node in nodes:
            node.add_group("early", members)
        wait_until(lambda: leader_of(nodes, "early") is not None, 15, "leader with 2 of 3 voters")
        commit(nodes, ["early"], count=2, timeout_s=10)

        # A new node appears: only now do the others learn its address.
        late = Node_("n2")
        late.hub.peers.set("n0", nodes[0].hub.address)
        late.hub.peers.set("n1", nodes[1].hub.address)
        late.start()
        try:
            for node in nodes:
                node.hub.peers.set("n2", late.hub.address)
            late.add_group("early", members)
            everyone = [*nodes, late]
            wait_until(lambda: late.groups["early"].value == 2, 15, "the late node catches up")

            # A group created after the connections exist (a new topic).
            for node in everyone:
                node.add_group("new-topic", members)
            wait_until(lambda: leader_of(everyone, "new-topic") is not None, 15, "a leader in the new group")
            commit(everyone, ["new-topic"], count=3, timeout_s=15, retry=True)
            wait_until(
                lambda: all(n.groups["new-topic"].value == 3 for n in everyone), 10, "new group replicated"
            )

            # A group cannot be registered twice on one hub, but can be re-created after destroy.
            with pytest.raises(DuplicateGroup):
                late.add_group("new-topic", members)
            for node in everyone:
                node.remove_group("new-topic")
            assert "new-topic" not in late.hub.groups()
            commit(everyone, ["early"], count=1, timeout_s=15, retry=True)
            wait_until(
                lambda: all(n.groups["early"].value == 3 for n in everyone), 10, "early group still works"
            )

            # A peer removed from n0's table is disconnected and refused; re-adding it restores it.
            n0 = nodes[0]
            n0.hub.peers.remove("n2")
            wait_until(lambda: not late.hub.peers.is_connected("n0"), 10, "n2 cut off from n0")
            time.sleep(0.5)  # n2 keeps redialing meanwhile and is refused
            assert not late.hub.peers.is_connected("n0") and "n2" not in n0.hub.peers.addresses()
            n0.hub.peers.set("n2", late.hub.address)
            wait_until(lambda: late.hub.peers.is_connected("n0"), 10, "n2 back in touch with n0")
            commit(everyone, ["early"], count=1, timeout_s=15, retry=True)
            wait_until(lambda: all(n.groups["early"].value == 4 for n in everyone), 10, "all replicas at 4")
        finally:
            late.close()


@pytest.mark.timeout(30)
def test_autotick_groups_are_woken_by_inbound_messages() -> None:
    """SyncObj's own tick threads (autoTick=True) work too: the transport wakes their poll()."""
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET) for i in range(3)]
    objs: list[Counter] = []
    try:
        for hub in hubs:
            for other in hubs:
                if other is not hub:
                    hub.peers.set(other.node_id, other.address)
            hub.start()
        for group in ("a", "b"):
            for hub in hubs:
                others = [Node(h.node_id) for h in hubs if h is not hub]
                conf = SyncObjConf(autoTick=True, raftMinTimeout=0.5, raftMaxTimeout=1.5)
                transport = functools.partial(RecordingTransport, hub=hub, group=group)
                objs.append(
                    Counter(Node(hub.node_id), others, conf, nodeClass=Node, transportClass=transport)
                )
        wait_until(lambda: sum(o._isLeader() for o in objs) == 2, 15, "a leader in both groups")
        results: list[int] = []
        for leader in [o for o in objs if o._isLeader()]:
            for _ in range(3):
                leader.increment(callback=lambda result, error: results.append(error))
        wait_until(lambda: len(results) == 6, 10, "six commits")
        assert results == [0] * 6
        wait_until(lambda: all(o.value == 3 for o in objs), 10, "every replica applied 3 commands")
        for obj in objs:
            transport = obj._SyncObj__transport
            assert transport.callback_threads == {obj._SyncObj__thread.ident}
    finally:
        for obj in objs:
            obj.destroy_synchronous()
        for hub in hubs:
            hub.close()


def raw_dial(hub: MuxHub, node_id: str, secret: bytes = SECRET) -> tuple[socket.socket, wire.Session]:
    """Connect to a hub as peer ``node_id`` and complete the handshake by hand."""
    host, port = hub.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    handshake = wire.DialerHandshake(secret, node_id, hub.node_id, os.urandom(32))
    sock.sendall(handshake.hello())
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX)
    frames: list[tuple[int, bytes]] = []
    while not frames:
        data = sock.recv(65536)
        assert data, "hub closed the connection during the handshake"
        frames = reader.frames(data)
    auth, session = handshake.on_challenge(*frames[0])
    sock.sendall(auth)
    return sock, session


def closed_by_peer(sock: socket.socket, timeout_s: float = 5) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.timeout(30)
def test_bad_frames_close_only_that_connection() -> None:
    hub = MuxHub(
        "n0",
        "127.0.0.1:0",
        SECRET,
        config=HubConfig(frame_bytes_max=1 << 20, batch_bytes_target=1 << 18, handshake_timeout_s=1),
    )
    hub.peers.set("z1", "127.0.0.1:1")  # we never dial it ("n0" < "z1"): it dials us
    hub.start()
    try:
        # Garbage instead of a handshake.
        sock = socket.create_connection(tuple(hub.address.rsplit(":", 1)))  # type: ignore[arg-type]
        sock.sendall(b"\x80\x04\x95 this is a pickle, not a hello")
        assert closed_by_peer(sock)

        # A silent connection is dropped at the handshake deadline.
        sock = socket.create_connection(tuple(hub.address.rsplit(":", 1)))  # type: ignore[arg-type]
        assert closed_by_peer(sock)

        # Authenticated, then a frame header announcing 1 GiB: closed before any body is read.
        sock, _ = raw_dial(hub, "z1")
        wait_until(lambda: hub.peers.is_connected("z1"), 5, "z1 connected")
        sock.sendall((1 << 30).to_bytes(4, "big") + bytes([wire.KIND_BATCH]))
        assert closed_by_peer(sock)
        wait_until(lambda: not hub.peers.is_connected("z1"), 5, "z1 disconnected")

        # Authenticated, then a frame with a forged MAC.
        sock, session = raw_dial(hub, "z1")
        wait_until(lambda: hub.peers.is_connected("z1"), 5, "z1 connected")
        good = session.seal(wire.KIND_PING, b"")
        sock.sendall(good[:-1] + bytes([good[-1] ^ 1]))
        assert closed_by_peer(sock)

        # Authenticated, valid MAC, but a message outside the schema.
        sock, session = raw_dial(hub, "z1")
        body = msgpack.packb([0, "g"]) + msgpack.packb(0) + msgpack.packb({0: 99})
        sock.sendall(session.seal(wire.KIND_BATCH, body))
        assert closed_by_peer(sock)

        # The hub thread survived all of it and still serves a well-behaved peer.
        sock, session = raw_dial(hub, "z1")
        wait_until(lambda: hub.peers.is_connected("z1"), 5, "z1 connected after all the abuse")
        sock.sendall(session.seal(wire.KIND_PING, b""))
        assert not closed_by_peer(sock, timeout_s=0.5)
        stats = hub.stats()
        assert stats["authentication_failures"] >= 1 and stats["protocol_errors"] >= 3, stats
        assert stats["handshake_timeouts"] >= 1, stats
        sock.close()
    finally:
        hub.close()


def test_unauthenticated_connections_are_bounded() -> None:
    hub = MuxHub("n0", "127.0.0.1:0", SECRET, config=HubConfig(pending_handshakes_max=2))
    hub.start()
    host, port = hub.address.rsplit(":", 1)
    silent = [socket.create_connection((host, int(port))) for _ in range(2)]
    try:
        wait_until(lambda: len(hub._connections) == 2, 5, "two pending handshakes")
        extra = socket.create_connection((host, int(port)))
        assert closed_by_peer(extra, timeout_s=2)  # refused at once, not at the handshake deadline
        assert hub.stats()["rejected_too_many_handshakes"] == 1
        assert not closed_by_peer(silent[0], timeout_s=0.2)
    finally:
        for sock in silent:
            sock.close()
        hub.close()


def test_outbound_queue_is_bounded_and_drops_when_full() -> None:
    config = HubConfig(peer_queue_bytes_max=1000)
    hub = MuxHub("n0", "127.0.0.1:0", SECRET, config=config)  # not started: nothing drains the queue
    try:
        hub.peers.set("n1", "127.0.0.1:1")
        assert hub.enqueue("n1", "g", b"x" * 100) is False  # not connected: refused, not queued
        hub.peers.by_id["n1"].connected = True
        accepted = sum(hub.enqueue("n1", "g", b"x" * 100) for _ in range(25))
        assert accepted == 10
        stats = hub.stats()
        assert stats["dropped_queue_full"] == 15 and stats["queued_bytes"] == 1000
        assert hub.enqueue("n1", "g", b"x" * (config.frame_bytes_max + 1)) is False  # never framable
    finally:
        hub.close()


def test_redials_a_missing_peer_with_backoff() -> None:
    with socket.socket() as placeholder:  # a port nobody listens on
        placeholder.bind(("127.0.0.1", 0))
        dead_address = f"127.0.0.1:{placeholder.getsockname()[1]}"
    config = HubConfig(reconnect_backoff_min_s=0.05, reconnect_backoff_max_s=0.4)
    hub = MuxHub("n9", "127.0.0.1:0", SECRET, peers={"n1": dead_address}, config=config)
    hub.start()
    try:
        time.sleep(2.0)  # a negative window with a count: the dials made in it bound the back-off both ways
        dials = hub.stats().get("dials", 0)
        # back-off 0.05, 0.1, 0.2, 0.4, 0.4... (jittered x0.5-1): at least 5 tries, far fewer than a
        # retry on every 0.1 s loop tick would make (~20)
        assert 5 <= dials <= 16, dials
        assert not hub.peers.is_connected("n1")
    finally:
        hub.close()


def test_inbound_fd_wakes_a_driver_sleeping_in_select() -> None:
    n0 = MuxHub("n0", "127.0.0.1:0", SECRET)
    n1 = MuxHub("n1", "127.0.0.1:0", SECRET)
    try:
        fd = n0.inbound_fd()
        assert select.select([fd], [], [], 0.05)[0] == []  # nothing happened yet
        conf = SyncObjConf(autoTick=False)
        obj = Counter(Node("n0"), [Node("n1")], conf, nodeClass=Node, transportClass=transport_class(n0, "g"))
        assert select.select([fd], [], [], 1)[0] == [fd]  # registration is an event for "g"
        assert n0.inbox.take_ready() == {"g"}
        assert select.select([fd], [], [], 0.05)[0] == []  # rearmed
        n0.peers.set("n1", n1.address)
        n1.peers.set("n0", n0.address)
        n0.start()
        n1.start()
        assert select.select([fd], [], [], 5)[0] == [fd]  # n1 connected: "g" has an event
        assert n0.inbox.take_ready() == {"g"}
        obj.doTick(0.0)
        assert obj.isNodeConnected(Node("n1"))
        obj.destroy()
    finally:
        n0.close()
        n1.close()


def test_a_hub_runs_in_exactly_one_mode() -> None:
    hub = MuxHub("n0", "127.0.0.1:0", SECRET)
    try:
        hub.poll(0.0)
        with pytest.raises(TransportError):
            hub.start()
        failures: list[BaseException] = []

        def poll_elsewhere() -> None:
            try:
                hub.poll(0.0)
            except TransportError as exc:
                failures.append(exc)

        other = threading.Thread(target=poll_elsewhere)
        other.start()
        other.join()
        assert len(failures) == 1
    finally:
        hub.close()


def test_binds_only_the_given_address() -> None:
    with pytest.raises(InvalidAddress):
        MuxHub("n0", "0.0.0.0:0", SECRET)
    with pytest.raises(InvalidAddress):
        MuxHub("n0", "localhost", SECRET)
    hub = MuxHub("n0", "127.0.0.1:0", SECRET)
    try:
        assert hub.address.startswith("127.0.0.1:") and not hub.address.endswith(":0")
        assert hub._connector.listener.getsockname()[0] == "127.0.0.1"
    finally:
        hub.close()


def test_transport_refuses_a_self_node_that_is_not_the_hub() -> None:
    hub = MuxHub("n0", "127.0.0.1:0", SECRET)
    try:
        conf = SyncObjConf(autoTick=False)
        with pytest.raises(TransportError, match=r"differs from hub\.node_id"):
            Counter(Node("n9"), [Node("n1")], conf, nodeClass=Node, transportClass=transport_class(hub, "g"))
        assert isinstance(transport_class(hub, "g"), functools.partial)
        assert transport_class(hub, "g").func is MuxTransport
    finally:
        hub.close()


def test_a_polled_hub_not_run_past_its_idle_timeout_reads_before_it_judges_a_peer_silent() -> None:
    """A node's driver thread that was not scheduled for longer than ``idle_timeout_s`` finds the pings
    its peer kept sending waiting in the socket: it reads them before it tests the silence, and keeps
    the connection (it used to close it, waking every group on it into an election)."""
    starved = MuxHub("n0", "127.0.0.1:0", SECRET, config=HubConfig(ping_interval_s=0.1, idle_timeout_s=0.6))
    peer = MuxHub("n1", "127.0.0.1:0", SECRET, config=HubConfig(ping_interval_s=0.1, idle_timeout_s=30.0))
    try:
        starved.peers.set("n1", peer.address)
        peer.peers.set("n0", starved.address)
        peer.start()
        deadline = time.monotonic() + 10
        while not (starved.peers.is_connected("n1") and peer.peers.is_connected("n0")):
            assert time.monotonic() < deadline, "the hubs did not connect"
            starved.poll(0.02)
        established = starved.stats()["connections_established"]
        time.sleep(1.2)  # the stimulus: twice the idle timeout without running; the peer pings all along
        starved.poll(0.0)
        assert starved.peers.is_connected("n1"), "closed a connection whose pings waited unread"
        assert starved.stats()["connections_established"] == established
    finally:
        starved.close()
        peer.close()
