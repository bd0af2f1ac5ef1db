"""What a :class:`~raftlog.consensus.hub.MuxHub` knows of its peers and its connections: ``PeerTable``
(the peers, changed and asked about from any thread under the hub's lock), each ``Peer`` (address,
outbound queue, connection, redial back-off), each ``Connection`` (socket, frame buffers, handshake or
session, timers: the hub thread's alone) and ``Warnings``, which keeps one failing peer from flooding the
log. Records and their bookkeeping: no selector, no socket I/O.
"""

from __future__ import annotations

import collections
import random
import socket
import threading
import time
from collections.abc import Callable
from enum import Enum

from raftlog.consensus import wire, wire_batch, wire_messages
from raftlog.consensus.hub_config import HubClosed, HubConfig, TransportError, parse_address
from raftlog.consensus.hub_inbox import DISCONNECTED, GroupInbox

WARNING_INTERVAL_S = 60.0


class ConnectionState(Enum):
    CONNECTING = "connecting"
    HANDSHAKE = "handshake"
    ESTABLISHED = "established"
    CLOSED = "closed"


class Connection:
    """One TCP connection; touched only by the hub thread."""

    def __init__(self, sock: socket.socket, dialer: bool, peer_id: str | None, now: float, config: HubConfig):
        self.sock = sock
        self.dialer = dialer
        self.peer_id = peer_id
        self.state = ConnectionState.CONNECTING if dialer else ConnectionState.HANDSHAKE
        self.reader = wire.FrameReader(config.frame_bytes_max)
        self.reader.frame_bytes_max = wire.HANDSHAKE_FRAME_BYTES_MAX  # until authenticated
        self.outbuf = bytearray()
        self.handshake: wire.DialerHandshake | wire.AcceptorHandshake | None = None
        self.peer_levels: dict[str, int] | None = None  # what the peer announced in the handshake
        self.session: wire.Session | None = None
        self.batch_encoder = wire_batch.BatchEncoder()
        self.batch_decoder = wire_batch.BatchDecoder()
        self.accepted_at = now
        # an acceptor first waits for a HELLO, which a peer sends at once (see HubConfig.hello_timeout_s)
        hello_s = min(config.hello_timeout_s, config.handshake_timeout_s)
        self.deadline = now + (config.handshake_timeout_s if dialer else hello_s)
        self.last_receive = now
        self.last_send = now
        self.events = 0
        self.address: tuple[str, int] | None = None  # dialers: the address dialed
        self.remote_host = "?"

    def describe(self) -> str:
        role = "to" if self.dialer else "from"
        return f"{role} {self.peer_id or '<unauthenticated>'} ({self.state.value})"


class Peer:
    """A peer node. Fields marked (lock) are shared with tick threads; the rest belong to the hub thread."""

    def __init__(self, node_id: str, address: tuple[str, int]) -> None:
        self.node_id = node_id
        self.address = address
        self.connected = False  # (lock) an authenticated connection exists
        self.queue: collections.deque[tuple[str, bytes]] = collections.deque()  # (lock)
        self.queued_bytes = 0  # (lock)
        self.dropped_queue_full = 0  # (lock)
        self.last_drop_log = 0.0  # (lock)
        self.connection: Connection | None = None  # hub thread: current (dialing or established)
        self.dial_failures = 0
        self.next_dial_at = 0.0

    def schedule_redial(self, now: float, config: HubConfig) -> None:
        """Hub thread: the next dial after a failed or lost one, backing off exponentially (jittered)."""
        delay = min(
            config.reconnect_backoff_max_s,
            config.reconnect_backoff_min_s * (2 ** min(self.dial_failures, 30)),
        )
        self.dial_failures += 1
        self.next_dial_at = now + delay * random.uniform(0.5, 1.0)


class PeerTable:
    """A hub's peers: added, readdressed, removed and disconnected from any thread (the hub thread
    reconciles its connections to them in its next round), and asked about from any thread. It shares
    the hub's lock, which also guards the fields of each ``Peer`` marked (lock)."""

    def __init__(
        self, node_id: str, lock: threading.Lock, inbox: GroupInbox, wake: Callable[[], None]
    ) -> None:
        self._node_id = node_id
        self._lock = lock
        self._inbox = inbox
        self._wake = wake  # the hub thread's next round, soon
        self.by_id: dict[str, Peer] = {}  # (lock)
        self.changed = False  # (lock) the hub thread reconciles in its next round
        self.forced: set[str] = set()  # (lock) disconnects asked for
        self.closed = False  # (lock)

    def set(self, node_id: str, address: str) -> None:
        """Add a peer or change its address (an existing connection to an old address is closed)."""
        wire_messages.check_node_id(node_id)
        if node_id == self._node_id:
            raise TransportError(f"a hub cannot have itself ({node_id!r}) as a peer")
        parsed = parse_address(address)
        with self._lock:
            if self.closed:
                raise HubClosed(f"hub {self._node_id!r} is closed")
            peer = self.by_id.get(node_id)
            if peer is None:
                self.by_id[node_id] = Peer(node_id, parsed)
            elif peer.address != parsed:
                peer.address = parsed
                peer.next_dial_at = 0.0
                peer.dial_failures = 0
            self.changed = True
        self._wake()

    def remove(self, node_id: str) -> None:
        """Forget a peer: its connection is closed and groups see it disconnect."""
        with self._lock:
            peer = self.by_id.pop(node_id, None)
            if peer is not None and peer.connected:
                peer.connected = False
                peer.queue.clear()
                peer.queued_bytes = 0
                self._inbox.broadcast(DISCONNECTED, node_id)
            self.changed = True
        self._wake()

    def disconnect(self, node_id: str) -> None:
        """Close the current connection to a peer (it is re-established as usual)."""
        with self._lock:
            self.forced.add(node_id)
            self.changed = True
        self._wake()

    def addresses(self) -> dict[str, str]:
        with self._lock:
            return {p.node_id: f"{p.address[0]}:{p.address[1]}" for p in self.by_id.values()}

    def knows(self, node_id: str) -> bool:
        with self._lock:
            return node_id in self.by_id

    def is_connected(self, node_id: str) -> bool:
        with self._lock:
            peer = self.by_id.get(node_id)
            return peer is not None and peer.connected

    def last_heard(self, node_id: str) -> float | None:
        """``time.monotonic()`` when the connection to ``node_id`` last received anything (pings
        included); None while not connected."""
        with self._lock:
            peer = self.by_id.get(node_id)
            connection = peer.connection if peer is not None and peer.connected else None
        return None if connection is None else connection.last_receive


class Warnings:
    """At most one warning per key per ``WARNING_INTERVAL_S``, in bounded memory."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def due(self, key: str) -> bool:
        now = time.monotonic()
        if now - self._last.get(key, -WARNING_INTERVAL_S) < WARNING_INTERVAL_S:
            return False
        if len(self._last) > 10_000:
            self._last.clear()
        self._last[key] = now
        return True

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
