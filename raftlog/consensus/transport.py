"""One authenticated, encrypted TCP connection per peer pair, carrying every Raft group of this node.

Two pieces:

* :class:`MuxHub` - one per node process. Owns ONE listening socket (bound to exactly the address it is
  given), one connection per peer and ONE ``selectors`` I/O loop (on its own thread, or on the driver
  thread through :meth:`MuxHub.poll`). It authenticates peers, encrypts every frame after the handshake
  (see :mod:`raftlog.consensus.wire`), splits inbound BATCH frames into per-group inboxes and coalesces the
  outbound messages of all groups into BATCH frames. It never calls into SyncObj.
* :class:`MuxTransport` - a ``pysyncobj.transport.Transport`` for one Raft group, given to SyncObj as
  ``transportClass=functools.partial(MuxTransport, hub=hub, group=group_id)``. Its inbox is drained by an
  on-tick callback (RaftCore drains it first thing in its tick instead), so ``_onMessageReceived``,
  ``_onNodeConnected`` and ``_onNodeDisconnected`` always run on the group's tick thread; ``send()``
  (called on that thread) encodes with msgpack and enqueues.

Threads and ownership:

* Hub thread (or, in polled mode, the thread calling ``poll``): sockets, selector, frame buffers,
  handshakes, reconnect timers. Nothing else touches them.
* Tick thread(s): SyncObj. ``MuxTransport.send`` and the inbox drain run here.
* ``MuxHub._lock`` guards what both sides share: the peer table and per-peer outbound queues, the group
  table, the set of groups with pending inbound messages, the wake flag.

Driving many groups from one thread (``SyncObjConf(autoTick=False)``), two ways::

    hub.start()                         # threaded: the hub has its own I/O thread
    while running:
        for obj in syncobjs:            # or only hub.inbox.take_ready() between timer sweeps
            obj.doTick(0.0)
        hub.inbox.wait(0.005)          # returns early when a message arrives for any group

    while running:                      # polled: the driver thread also runs the hub's I/O
        for obj in syncobjs:
            obj.doTick(0.0)
        hub.poll(0.005)                 # flush sends, read sockets, wait up to 5 ms for input

Polled mode saves a GIL hand-off per syscall between a busy driver and the I/O thread (each can cost
``sys.getswitchinterval()``, 5 ms) and the wake-up pipes between them; threaded mode keeps I/O going
while a tick is slow. Nodes run polled mode through ``Driver.drive_hub``, which also calls
:meth:`MuxHub.flush` before each fsync so that peers receive a leader's appends while it syncs.

With ``autoTick=True`` each transport also registers a wake pipe in SyncObj's poller, so a tick blocked
in ``poll()`` wakes as soon as a message arrives.

Back-pressure and loss (all Raft messages tolerate loss; Raft retries them):

* ``send()`` to a peer that is not connected returns False (as TCPTransport does).
* Each peer has an outbound queue bounded by ``peer_queue_bytes_max``. When full, ``send()`` drops the
  message, counts it (``dropped_queue_full``) and returns False. The hub moves at most
  ``outbound_buffer_bytes_max`` of that queue into the socket buffer at a time, so memory per peer is
  bounded by the two. A leader whose append_entries was dropped advances again on the follower's
  ``next_node_idx`` reply (reset) or its next heartbeat.
* Each group inbox is bounded by ``group_inbox_messages_max``; beyond it inbound messages are dropped and
  counted (``dropped_inbox_full``). Messages for a group this node does not host are dropped and counted
  (``dropped_unknown_group``): a normal transient while a new topic's groups are created.
* Messages queued for a connection that breaks are discarded; SyncObj sees the peer disconnect.

Connections: of two peers, the one with the greater node id dials, with exponential back-off
(``reconnect_backoff_min_s`` .. ``reconnect_backoff_max_s``, jittered; reset after a successful handshake).
A newer authenticated connection from the same peer replaces the older one. A connection that does not
finish its handshake within ``handshake_timeout_s`` (an inbound one that sends no HELLO within
``hello_timeout_s``) or stays silent for ``idle_timeout_s`` is closed; idle connections carry a PING every
``ping_interval_s``. Inbound connections still in their handshake are bounded per source address and, for
addresses that are no known peer's, together; a known peer's host always has room
(:mod:`raftlog.admission`), so an outsider filling the port cannot keep a peer out. Any
malformed, oversized or unauthenticated frame closes the connection with a log line naming the peer and
the reason.

Not supported: pysyncobj read-only nodes (``selfNode=None``) and its admin "utility" messages (they are
not Raft traffic and have no business on the Raft port).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import logging
import os
import random
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.transport import Transport

from raftlog import admission
from raftlog.addresses import is_ip_literal, normalize_host
from raftlog.consensus import wire
from raftlog.consensus.hub_inbox import CONNECTED, DISCONNECTED, GroupInbox, nonblocking_pipe
from raftlog.consensus.messages import RaftMessage
from raftlog.errors import RaftlogError, check, with_fields

log = logging.getLogger(__name__)

_RECV_BYTES = 256 * 1024
_ACCEPTS_PER_EVENT = 64
_WARNING_INTERVAL_S = 60.0
_BATCH_OVERHEAD_BYTES = 16 + wire.GROUP_ID_BYTES_MAX + 8 + wire.MAC_BYTES


class TransportError(RaftlogError):
    """Base of the errors the transport raises to its callers (wire errors stay inside the hub thread)."""


@with_fields
class DuplicateGroup(TransportError):
    """A group id registered twice on one hub (two live SyncObj for one group on one node is a bug)."""

    group: str
    template = "group {group!r} is already registered on this hub"


class HubClosed(TransportError):
    """The hub was closed (or its I/O thread died); it accepts no more groups or peers."""


class InvalidAddress(TransportError):
    """An address that is not ``host:port``, or a wildcard bind address that was not explicitly allowed."""


@dataclass(frozen=True)
class HubConfig:
    frame_bytes_max: int = wire.FRAME_BYTES_MAX_DEFAULT
    batch_bytes_target: int = 1024 * 1024
    """A BATCH frame is closed once it holds this many bytes of messages."""
    peer_queue_bytes_max: int = 64 * 1024 * 1024
    outbound_buffer_bytes_max: int = 4 * 1024 * 1024
    group_inbox_messages_max: int = 100_000
    reconnect_backoff_min_s: float = 0.05
    reconnect_backoff_max_s: float = 2.0
    handshake_timeout_s: float = 5.0
    """A handshake (either side) not finished within it is closed."""
    hello_timeout_s: float = 1.5
    """An inbound connection whose first frame (a valid HELLO) has not arrived within it (or within
    ``handshake_timeout_s`` if that is shorter) is closed: a peer sends it at once, so only an outsider
    holding a pending slot waits that long."""
    # A connection silent for idle_timeout_s is closed: the disconnect is how quiet Raft groups learn
    # that a peer node is gone (raftlog.consensus.core, "Quiescence"), so it is kept near an election
    # timeout; pings keep an idle connection from looking silent.
    ping_interval_s: float = 0.5
    idle_timeout_s: float = 3.0
    pending_handshakes_max: int = 64
    """Inbound connections still in their handshake from addresses that are no known peer's, together
    (see :mod:`raftlog.admission`; known peers' hosts have room of their own)."""
    pending_handshakes_per_address_max: int = 4
    """Inbound connections still in their handshake from one source address."""
    listen_backlog: int = 128
    allow_wildcard_bind: bool = False
    """Binding 0.0.0.0 or :: exposes the Raft port on every interface; refused unless set."""

    def __post_init__(self) -> None:
        problems = []
        if self.frame_bytes_max < wire.HANDSHAKE_FRAME_BYTES_MAX:
            problems.append(f"frame_bytes_max={self.frame_bytes_max} < {wire.HANDSHAKE_FRAME_BYTES_MAX}")
        if not 0 < self.batch_bytes_target <= self.frame_bytes_max // 2:
            problems.append(f"batch_bytes_target={self.batch_bytes_target} not in (0, frame_bytes_max / 2]")
        if self.peer_queue_bytes_max <= 0 or self.outbound_buffer_bytes_max <= 0:
            problems.append("peer_queue_bytes_max and outbound_buffer_bytes_max must be positive")
        if self.group_inbox_messages_max <= 0:
            problems.append(f"group_inbox_messages_max={self.group_inbox_messages_max} must be positive")
        if not 0 < self.reconnect_backoff_min_s <= self.reconnect_backoff_max_s:
            problems.append(
                f"need 0 < reconnect_backoff_min_s={self.reconnect_backoff_min_s}"
                f" <= reconnect_backoff_max_s={self.reconnect_backoff_max_s}"
            )
        if not 0 < self.ping_interval_s < self.idle_timeout_s:
            problems.append(
                f"need 0 < ping_interval_s={self.ping_interval_s} < idle_timeout_s={self.idle_timeout_s}"
            )
        if self.handshake_timeout_s <= 0 or self.pending_handshakes_max <= 0 or self.listen_backlog <= 0:
            problems.append("handshake_timeout_s, pending_handshakes_max, listen_backlog must be positive")
        if self.pending_handshakes_per_address_max <= 0:
            problems.append(
                f"pending_handshakes_per_address_max={self.pending_handshakes_per_address_max}"
                " must be positive"
            )
        if self.hello_timeout_s <= 0:
            problems.append(f"hello_timeout_s={self.hello_timeout_s} must be positive")
        if problems:
            raise ValueError("invalid HubConfig: " + "; ".join(problems))


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (IPv6 as ``"[::1]:port"``) -> ``(host, port)``."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidAddress(f"address must be host:port, got {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


class _State(Enum):
    CONNECTING = "connecting"
    HANDSHAKE = "handshake"
    ESTABLISHED = "established"
    CLOSED = "closed"


class _Connection:
    """One TCP connection; touched only by the hub thread."""

    def __init__(self, sock: socket.socket, dialer: bool, peer_id: str | None, now: float, config: HubConfig):
        self.sock = sock
        self.dialer = dialer
        self.peer_id = peer_id
        self.state = _State.CONNECTING if dialer else _State.HANDSHAKE
        self.reader = wire.FrameReader(config.frame_bytes_max)
        self.reader.frame_bytes_max = wire.HANDSHAKE_FRAME_BYTES_MAX  # until authenticated
        self.outbuf = bytearray()
        self.handshake: wire.DialerHandshake | wire.AcceptorHandshake | None = None
        self.session: wire.Session | None = None
        self.batch_encoder = wire.BatchEncoder()
        self.batch_decoder = wire.BatchDecoder()
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


class _Peer:
    """A peer node. Fields marked (lock) are shared with tick threads; the rest belong to the hub thread."""

    def __init__(self, node_id: str, address: tuple[str, int]) -> None:
        self.node_id = node_id
        self.address = address
        self.connected = False  # (lock) an authenticated connection exists
        self.queue: collections.deque[tuple[str, bytes]] = collections.deque()  # (lock)
        self.queued_bytes = 0  # (lock)
        self.dropped_queue_full = 0  # (lock)
        self.last_drop_log = 0.0  # (lock)
        self.connection: _Connection | None = None  # hub thread: current (dialing or established)
        self.dial_failures = 0
        self.next_dial_at = 0.0


class PeerTable:
    """A hub's peers: added, readdressed, removed and disconnected from any thread (the hub thread
    reconciles its connections to them in its next round), and asked about from any thread. It shares
    the hub's lock, which also guards the fields of each ``_Peer`` marked (lock)."""

    def __init__(
        self, node_id: str, lock: threading.Lock, inbox: GroupInbox, wake: Callable[[], None]
    ) -> None:
        self._node_id = node_id
        self._lock = lock
        self._inbox = inbox
        self._wake = wake  # the hub thread's next round, soon
        self.by_id: dict[str, _Peer] = {}  # (lock)
        self.changed = False  # (lock) the hub thread reconciles in its next round
        self.forced: set[str] = set()  # (lock) disconnects asked for
        self.closed = False  # (lock)

    def set(self, node_id: str, address: str) -> None:
        """Add a peer or change its address (an existing connection to an old address is closed)."""
        wire.check_node_id(node_id)
        if node_id == self._node_id:
            raise TransportError(f"a hub cannot have itself ({node_id!r}) as a peer")
        parsed = parse_address(address)
        with self._lock:
            if self.closed:
                raise HubClosed(f"hub {self._node_id!r} is closed")
            peer = self.by_id.get(node_id)
            if peer is None:
                self.by_id[node_id] = _Peer(node_id, parsed)
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
                self._inbox.broadcast(_DISCONNECTED, node_id)
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


class MuxHub:
    """The node's Raft I/O: one listening port, one connection per peer, one thread for every group.

    ``node_id`` must equal ``selfNode.id`` of every SyncObj using this hub; peers are ``{node_id:
    "host:port"}``. ``bind_address`` is bound exactly (port 0 picks a free port, see :attr:`address`).
    Run its I/O with :meth:`start` (own thread) or by calling :meth:`poll` from the driver thread, and
    :meth:`close` it at shutdown. Peers (``peers.set``, ``peers.remove``) may change at any time
    from any thread; groups register themselves by constructing a :class:`MuxTransport` and leave when
    their SyncObj is destroyed.
    """

    def __init__(
        self,
        node_id: str,
        bind_address: str,
        secret: bytes,
        peers: dict[str, str] | None = None,
        config: HubConfig | None = None,
    ) -> None:
        self.node_id = wire.check_node_id(node_id)
        self.config = config or HubConfig()
        if type(secret) is not bytes or len(secret) < 16:
            raise ValueError("the cluster secret must be bytes, at least 16 of them")
        self._secret = secret
        self._lock = threading.Lock()
        # the groups and what arrives for them; the driver waits on it (inbox.wait, take_ready, fd)
        self.inbox = GroupInbox(self._lock, self._on_poll_thread)
        self.peers = PeerTable(self.node_id, self._lock, self.inbox, self._wake)  # set, remove, ask
        self._dirty_peers: set[str] = set()  # (lock) peers with newly queued messages
        self._wake_pending = False  # (lock)
        self._closing = False  # (lock)
        self._counters: collections.Counter[str] = collections.Counter()  # hub thread (read: any)
        self._connections: set[_Connection] = set()  # hub thread
        self._warnings = _Warnings()  # hub thread
        # hub thread: the peers' addresses, resolved -> how many peers live there
        self._known_hosts: collections.Counter[str] = collections.Counter()
        self._listener = _bind(bind_address, self.config)
        self._wake_read, self._wake_write = nonblocking_pipe()
        self._selector = selectors.DefaultSelector()
        host, port = self._listener.getsockname()[:2]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._selector.register(self._listener, selectors.EVENT_READ, "listen")
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name=f"raft-hub-{node_id}", daemon=True)
        self._mode: str | None = None  # "thread" (start) or "poll" (poll)
        self._poll_thread: int | None = None
        self._shutting_down = False
        self._shut_down = False  # (lock) the wake pipe is closed
        for peer_id, address in (peers or {}).items():
            self.peers.set(peer_id, address)

    # ------------------------------------------------------------------------------- public API

    def start(self) -> None:
        """Threaded mode: run the I/O loop on the hub's own thread."""
        if self._mode is not None:
            raise TransportError(f"MuxHub.start() after the hub already runs in {self._mode} mode")
        self._mode = "thread"
        self._thread.start()

    def poll(self, timeout_s: float) -> None:
        """Polled mode: run one I/O iteration on the calling thread, waiting up to ``timeout_s`` for
        socket events. For a node whose groups all tick on one driver thread this avoids handing the GIL
        between the driver and an I/O thread on every syscall (each hand-off can cost a whole
        ``sys.getswitchinterval()``, 5 ms, while the driver is busy). The driver loop is then
        ``for obj in syncobjs: obj.doTick(0.0)`` followed by ``hub.poll(0.005)``; always the same
        thread, and never together with :meth:`start`."""
        me = threading.get_ident()
        if self._mode is None:
            self._mode, self._poll_thread = "poll", me
        elif self._mode != "poll" or self._poll_thread != me:
            raise TransportError(f"MuxHub.poll() from thread {me} but the hub runs in {self._mode} mode")
        try:
            if not self._loop_once(timeout_s):
                self._shutdown()
        except BaseException:
            log.critical(
                "raft hub %r I/O loop crashed; closing every connection", self.node_id, exc_info=True
            )
            self._shutdown()
            raise

    def _on_poll_thread(self) -> bool:
        """Polled mode, called by the thread that polls: it pumps and takes inbound itself, so nothing
        needs to wake it."""
        return self._mode == "poll" and self._poll_thread == threading.get_ident()

    def fileno(self) -> int:
        """The hub's selector: readable while a socket, the listener or the wake pipe has an event. A
        driver that runs the hub in polled mode waits on it in its own poller."""
        return self._selector.fileno()

    def flush(self) -> None:
        """Polled mode, on the polling thread: write the messages queued so far to their sockets now
        (e.g. a leader's appends before it fsyncs its own journal, so followers write in parallel)."""
        if self._on_poll_thread():
            self._pump_dirty_peers()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the I/O loop and close every socket. Registered transports see all peers disconnect.
        In polled mode, call it from the polling thread or after that thread stopped polling."""
        with self._lock:
            self._closing = self.peers.closed = True
        self._wake()
        if self._mode == "thread":
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise TransportError(f"hub thread of {self.node_id!r} did not stop within {timeout_s}s")
        else:
            self._shutdown()

    def inbound_fd(self) -> int:
        """A file descriptor that turns readable when some group has inbound messages or events, for a
        driver that sleeps in its own poller/select; ``inbox.take_ready`` rearms it."""
        with self._lock:
            if self._shut_down:
                raise HubClosed(f"hub {self.node_id!r} is closed")
            return self.inbox.fd()

    def groups(self) -> list[str]:
        with self._lock:
            return list(self.inbox.transports)

    def stats(self) -> dict[str, int]:
        """Counters: frames/messages in and out, drops by cause, handshake and protocol failures."""
        with self._lock:
            counters = dict(self._counters)
            counters["dropped_queue_full"] = sum(p.dropped_queue_full for p in self.peers.by_id.values())
            counters["queued_bytes"] = sum(p.queued_bytes for p in self.peers.by_id.values())
        return counters

    # --------------------------------------------------------------- called by MuxTransport (tick thread)

    def _register_group(self, group: str, transport: MuxTransport) -> None:
        with self._lock:
            if self._closing:
                raise HubClosed(f"hub {self.node_id!r} is closed")
            if group in self.inbox.transports:
                raise DuplicateGroup(group)
            self.inbox.register(
                group, transport, [p.node_id for p in self.peers.by_id.values() if p.connected]
            )

    def _unregister_group(self, group: str, transport: MuxTransport) -> None:
        with self._lock:
            self.inbox.unregister(group, transport)

    def _replay_connection_state(self, transport: MuxTransport, node_id: str) -> None:
        """After ``addNode``: tell the transport whether that peer is connected right now."""
        with self._lock:
            peer = self.peers.by_id.get(node_id)
            if peer is not None and peer.connected:
                transport._push_event(_CONNECTED, node_id)

    def _enqueue(self, node_id: str, group: str, payload: bytes) -> bool:
        size = len(payload)
        if size + _BATCH_OVERHEAD_BYTES > self.config.frame_bytes_max:
            log.error(
                "dropping a %d-byte message of group %r to %r: above frame_bytes_max=%d",
                size,
                group,
                node_id,
                self.config.frame_bytes_max,
            )
            return False
        with self._lock:
            peer = self.peers.by_id.get(node_id)
            if peer is None or not peer.connected:
                return False
            if peer.queued_bytes + size > self.config.peer_queue_bytes_max:
                peer.dropped_queue_full += 1
                now = time.monotonic()
                if now - peer.last_drop_log > 5.0:
                    peer.last_drop_log = now
                    log.warning(
                        "outbound queue to %r full (%d bytes queued, limit %d): dropped %d messages so far",
                        node_id,
                        peer.queued_bytes,
                        self.config.peer_queue_bytes_max,
                        peer.dropped_queue_full,
                    )
                return False
            peer.queue.append((group, payload))
            peer.queued_bytes += size
            self._dirty_peers.add(node_id)
            if self._wake_pending:
                return True
            self._wake_pending = True
        if self._on_poll_thread():
            return True  # the polling thread pumps before it next waits: no wake-up needed
        self._wake()
        return True

    def _wake(self) -> None:
        with self._lock:  # the lock orders this write before _shutdown closes the pipe
            if self._shut_down:
                return
            with contextlib.suppress(BlockingIOError):  # pipe full: a wake-up is already pending
                os.write(self._wake_write, b"x")

    # ------------------------------------------------------------------------------- hub thread

    def _run(self) -> None:
        try:
            tick_s = min(0.1, self.config.ping_interval_s / 2)
            while self._loop_once(tick_s):
                pass
        except BaseException:
            log.critical(
                "raft hub %r I/O thread crashed; closing every connection", self.node_id, exc_info=True
            )
            raise
        finally:
            self._shutdown()

    def _loop_once(self, timeout_s: float) -> bool:
        """One I/O iteration: timers, dials, socket events, outbound batches. False once closing."""
        with self._lock:
            if self._closing:
                return False
            peers_changed, self.peers.changed = self.peers.changed, False
        now = time.monotonic()
        if peers_changed:
            self._reconcile_peers()
        self._dial_due_peers(now)
        self._pump_dirty_peers()
        for key, mask in self._selector.select(timeout_s):
            if key.data == "listen":
                self._accept()
            elif key.data == "wake":
                _drain(self._wake_read)
            else:
                self._on_socket_event(key.data, mask)
        # After reading: a thread that was not scheduled for longer than idle_timeout_s finds its peers'
        # pings waiting in the sockets, and must not close their connections for a silence of its own.
        self._check_timers(time.monotonic())
        self._pump_dirty_peers()
        return True

    def _shutdown(self) -> None:
        with self._lock:
            if self._shutting_down:
                return
            self._shutting_down = True
        for connection in list(self._connections):
            self._close(connection, "hub closing", logging.DEBUG)
        with self._lock:
            self._closing = self.peers.closed = True
            self._shut_down = True
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self._listener)
            self._listener.close()
            self._selector.close()
            for fd in (self._wake_read, self._wake_write):
                os.close(fd)
            self.inbox.close()

    def _reconcile_peers(self) -> None:
        with self._lock:
            current = dict(self.peers.by_id)
            forced, self.peers.forced = self.peers.forced, set()
        self._known_hosts = collections.Counter(
            host for peer in current.values() for host in _resolve_host(peer.address[0])
        )
        for connection in list(self._connections):
            peer_id = connection.peer_id
            if peer_id is None:
                continue
            peer = current.get(peer_id)
            if peer is None:
                self._close(connection, "peer removed", logging.INFO)
            elif peer_id in forced and peer.connection is connection:
                self._close(connection, "disconnect requested", logging.INFO)
            elif connection.dialer and connection.address != peer.address:
                self._close(connection, f"peer address changed to {peer.address}", logging.INFO)

    def _dial_due_peers(self, now: float) -> None:
        with self._lock:
            due = [
                p
                for p in self.peers.by_id.values()
                if _dials(self.node_id, p.node_id) and p.connection is None and now >= p.next_dial_at
            ]
        for peer in due:
            self._dial(peer, now)

    def _dial(self, peer: _Peer, now: float) -> None:
        host, port = peer.address
        try:
            family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            log.warning("cannot resolve peer %r at %s:%d: %s", peer.node_id, host, port, exc)
            _schedule_redial(peer, now, self.config)
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(sock, dialer=True, peer_id=peer.node_id, now=now, config=self.config)
        connection.address = peer.address
        self._counters["dials"] += 1
        error = sock.connect_ex(sockaddr)
        if error not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            sock.close()
            self._counters["dial_failures"] += 1
            log.debug("dial %r at %s:%d failed: %s", peer.node_id, host, port, os.strerror(error))
            _schedule_redial(peer, now, self.config)
            return
        peer.connection = connection
        self._connections.add(connection)
        self._set_events(connection, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_EVENT):
            try:
                sock, remote = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("accept failed on %s: %s", self.address, exc)
                return
            host = normalize_host(str(remote[0]))
            if not self._admit(host):
                sock.close()
                continue
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as exc:  # reset before we got to it
                sock.close()
                log.debug("dropping connection from %s: %s", remote, exc)
                continue
            connection = _Connection(
                sock, dialer=False, peer_id=None, now=time.monotonic(), config=self.config
            )
            connection.remote_host = host
            connection.handshake = wire.AcceptorHandshake(
                self._secret, self.node_id, os.urandom(wire.NONCE_BYTES), self.peers.knows
            )
            self._connections.add(connection)
            self._set_events(connection, selectors.EVENT_READ)

    def _admit(self, host: str) -> bool:
        """Whether a connection just accepted from ``host`` may start a handshake (closing the oldest
        pending one from a known peer's host if that makes room); a refusal is counted and logged at
        most once per ``_WARNING_INTERVAL_S`` per cause."""
        config = self.config
        pending = [c for c in self._connections if not c.dialer and c.state is _State.HANDSHAKE]
        by_host = collections.Counter(c.remote_host for c in pending)
        outsiders = sum(count for h, count in by_host.items() if h not in self._known_hosts)
        verdict = admission.admit(
            host,
            by_host,
            outsiders,
            self._known_hosts,
            config.pending_handshakes_per_address_max,
            config.pending_handshakes_max,
        )
        if verdict is admission.Admission.ADMIT:
            return True
        if verdict is admission.Admission.ADMIT_EVICTING_OLDEST:
            oldest = min((c for c in pending if c.remote_host == host), key=lambda c: c.accepted_at)
            self._counters["handshakes_evicted"] += 1
            self._close(
                oldest, "a newer connection from this known peer's host needs its slot", logging.WARNING
            )
            return True
        if verdict is admission.Admission.REFUSE_ADDRESS_FULL:
            self._counters["rejected_address_handshakes"] += 1
            limit = f"pending_handshakes_per_address_max={config.pending_handshakes_per_address_max}"
        else:
            self._counters["rejected_too_many_handshakes"] += 1
            limit = f"pending_handshakes_max={config.pending_handshakes_max}"
        if self._warnings.due(f"<{verdict.name}>"):
            log.warning(
                "raft hub %r refusing connections: %s (%s; %d pending from outsiders; latest from %s)",
                self.node_id,
                verdict.value,
                limit,
                outsiders,
                host,
            )
        return False

    def _set_events(self, connection: _Connection, events: int) -> None:
        if connection.events == events:
            return
        if connection.events == 0:
            self._selector.register(connection.sock, events, connection)
        else:
            self._selector.modify(connection.sock, events, connection)
        connection.events = events

    def _check_timers(self, now: float) -> None:
        config = self.config
        for connection in list(self._connections):
            if connection.state is not _State.ESTABLISHED:
                if now > connection.deadline:
                    self._counters["handshake_timeouts"] += 1
                    waited = "no hello" if connection.peer_id is None else "handshake"
                    self._close(connection, f"{waited} timeout", logging.WARNING)
            elif now - connection.last_receive > config.idle_timeout_s:
                self._close(connection, f"nothing received for {config.idle_timeout_s}s", logging.WARNING)
            elif now - connection.last_send > config.ping_interval_s and not connection.outbuf:
                self._write(connection, _session(connection).seal(wire.KIND_PING, b""))

    def _on_socket_event(self, connection: _Connection, mask: int) -> None:
        def handle() -> None:
            if mask & selectors.EVENT_WRITE:
                self._on_writable(connection)
            if mask & selectors.EVENT_READ and connection.state is not _State.CLOSED:
                self._on_readable(connection)

        self._guarded(connection, handle)

    def _guarded(self, connection: _Connection, action: Callable[[], None]) -> None:
        """Run ``action`` for ``connection``; any failure closes that connection only, with a log line."""
        try:
            action()
        except wire.AuthenticationFailed as exc:
            self._counters["authentication_failures"] += 1
            self._close(connection, f"authentication failed: {exc}", logging.WARNING)
        except wire.WireError as exc:
            self._counters["protocol_errors"] += 1
            self._close(connection, f"protocol error: {type(exc).__name__}: {exc}", logging.WARNING)
        except OSError as exc:
            self._close(connection, f"socket error: {exc}", logging.INFO)
        except Exception:  # a bug in this module: log it with the stack, drop only this connection
            self._counters["internal_errors"] += 1
            log.exception("internal error on connection %s; closing it", connection.describe())
            self._close(connection, "internal error", logging.ERROR)

    def _on_writable(self, connection: _Connection) -> None:
        if connection.state is _State.CONNECTING:
            error = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                self._close(connection, f"connect failed: {os.strerror(error)}", logging.DEBUG)
                return
            connection.state = _State.HANDSHAKE
            peer_id = connection.peer_id
            if peer_id is None:
                raise wire.MalformedFrame("dialing connection without a peer id")
            handshake = wire.DialerHandshake(
                self._secret, self.node_id, peer_id, os.urandom(wire.NONCE_BYTES)
            )
            connection.handshake = handshake
            connection.outbuf += handshake.hello()
        self._flush(connection)
        if (
            connection.state is _State.ESTABLISHED
            and not connection.outbuf
            and connection.peer_id is not None
        ):
            self._pump(connection.peer_id)

    def _on_readable(self, connection: _Connection) -> None:
        reader = connection.reader
        if not reader.receive(connection.sock, _RECV_BYTES):
            level = logging.INFO if connection.state is _State.ESTABLISHED else logging.WARNING
            self._close(connection, "closed by peer", level)
            return
        connection.last_receive = time.monotonic()
        delivered: dict[str, list[RaftMessage]] = {}
        while connection.state is not _State.CLOSED:
            item = reader.next_frame()
            if item is None:
                break
            kind, payload = item
            if connection.state is _State.ESTABLISHED:
                session = connection.session
                if session is None:
                    raise wire.MalformedFrame("established connection without a session")
                body = session.open(kind, payload)
                self._counters["frames_received"] += 1
                if kind == wire.KIND_BATCH:
                    for group, message in connection.batch_decoder.decode(body):
                        delivered.setdefault(group, []).append(message)
            else:
                self._on_handshake_frame(connection, kind, bytes(payload))  # small: under the handshake limit
        if delivered and connection.peer_id is not None and connection.state is _State.ESTABLISHED:
            self._deliver(connection.peer_id, delivered)

    def _on_handshake_frame(self, connection: _Connection, kind: int, payload: bytes) -> None:
        handshake = connection.handshake
        if isinstance(handshake, wire.DialerHandshake):
            auth, session = handshake.on_challenge(kind, payload)
            connection.outbuf += auth
            self._established(connection, session)
            self._flush(connection)
        elif isinstance(handshake, wire.AcceptorHandshake):
            if handshake.peer_id is None:
                connection.outbuf += handshake.on_hello(kind, payload)
                connection.peer_id = handshake.peer_id
                connection.deadline = connection.accepted_at + self.config.handshake_timeout_s
                if handshake.peer_id is not None and _dials(self.node_id, handshake.peer_id):
                    raise wire.AuthenticationFailed(
                        f"peer {handshake.peer_id!r} dialed us, but {self.node_id!r} > it so we dial"
                    )
                self._flush(connection)
            else:
                self._established(connection, handshake.on_auth(kind, payload))
        else:
            raise wire.MalformedFrame(f"handshake frame kind {kind} on a connection without a handshake")

    def _established(self, connection: _Connection, session: wire.Session) -> None:
        peer_id = connection.peer_id
        if peer_id is None:
            raise wire.MalformedFrame("authenticated connection without a peer id")
        connection.session = session
        connection.handshake = None
        connection.state = _State.ESTABLISHED
        connection.reader.frame_bytes_max = self.config.frame_bytes_max
        with self._lock:
            peer = self.peers.by_id.get(peer_id)
        if peer is None:
            self._close(connection, "peer removed during handshake", logging.INFO)
            return
        previous = peer.connection
        if previous is not None and previous is not connection:
            self._close(previous, "replaced by a newer connection", logging.INFO)
        peer.connection = connection
        peer.dial_failures = 0
        self._warnings.forget(peer_id)  # its next failure warns again at once
        self._counters["connections_established"] += 1
        with self._lock:
            peer.connected = True
            self.inbox.broadcast(_CONNECTED, peer_id)
        log.info("raft hub %r connected %s", self.node_id, connection.describe())

    def _deliver(self, peer_id: str, delivered: dict[str, list[RaftMessage]]) -> None:
        count, unknown, full = self.inbox.deliver(peer_id, delivered, self.config.group_inbox_messages_max)
        counters = self._counters
        counters["messages_received"] += count
        if unknown:
            counters["dropped_unknown_group"] += unknown
        if full:
            counters["dropped_inbox_full"] += full

    def _pump_dirty_peers(self) -> None:
        with self._lock:
            self._wake_pending = False
            if not self._dirty_peers:
                return
            dirty, self._dirty_peers = self._dirty_peers, set()
        for peer_id in dirty:
            with self._lock:
                peer = self.peers.by_id.get(peer_id)
            connection = peer.connection if peer is not None else None
            if connection is not None:
                self._guarded(connection, functools.partial(self._pump, peer_id))

    def _pump(self, peer_id: str) -> None:
        """Move queued messages for a peer into BATCH frames, as far as the socket buffer bound allows."""
        config = self.config
        with self._lock:
            peer = self.peers.by_id.get(peer_id)
        if peer is None:
            return
        connection = peer.connection
        if connection is None or connection.state is not _State.ESTABLISHED:
            return
        while len(connection.outbuf) < config.outbound_buffer_bytes_max:
            items: list[tuple[str, bytes]] = []
            size = 0
            with self._lock:
                queue = peer.queue
                while queue:
                    group, payload = queue[0]
                    # payload plus an upper bound of its ref and (first time) its group declaration
                    item_bytes = len(payload) + 16 + 4 * len(group)
                    if items and size + item_bytes > config.batch_bytes_target:
                        break
                    queue.popleft()
                    items.append((group, payload))
                    size += item_bytes
                    peer.queued_bytes -= len(payload)
            if not items:
                break
            parts = connection.batch_encoder.encode_parts(items)
            size = 1 + sum(len(part) for part in parts) + wire.MAC_BYTES
            check(
                size <= config.frame_bytes_max,
                f"built a {size + 4}-byte frame for {peer_id!r} above"
                f" frame_bytes_max={config.frame_bytes_max} ({len(items)} messages,"
                f" batch_bytes_target={config.batch_bytes_target})",
            )
            # the pieces go into the socket buffer once, MAC'd there: no joined copy of the body
            _session(connection).seal_into(connection.outbuf, wire.KIND_BATCH, parts)
            self._counters["frames_sent"] += 1
            self._counters["messages_sent"] += len(items)
        self._flush(connection)  # what stays queued is pumped from _on_writable once the buffer drains

    def _write(self, connection: _Connection, data: bytes) -> None:
        connection.outbuf += data
        self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        outbuf = connection.outbuf
        try:
            while outbuf:
                sent = connection.sock.send(outbuf)
                if sent <= 0:
                    break
                del outbuf[:sent]
                connection.last_send = time.monotonic()
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._close(connection, f"send failed: {exc}", logging.INFO)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if outbuf else 0)
        if connection.state is _State.CONNECTING:
            events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self._set_events(connection, events)

    def _close(self, connection: _Connection, reason: str, level: int) -> None:
        if connection.state is _State.CLOSED:
            return
        was_established = connection.state is _State.ESTABLISHED
        # at most one warning a peer (or remote host; all outsiders together) per _WARNING_INTERVAL_S
        key = connection.peer_id or connection.remote_host
        if connection.peer_id is None and connection.remote_host not in self._known_hosts:
            key = "<outsiders>"
        if level >= logging.WARNING and not self._warnings.due(key):
            level = logging.DEBUG  # the same peer keeps failing the same way: do not flood the log
        log.log(level, "raft hub %r closed connection %s: %s", self.node_id, connection.describe(), reason)
        connection.state = _State.CLOSED
        self._connections.discard(connection)
        if connection.events:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(connection.sock)
        with contextlib.suppress(OSError):
            connection.sock.close()
        peer_id = connection.peer_id
        if peer_id is None:
            return
        with self._lock:
            peer = self.peers.by_id.get(peer_id)
            if peer is None or peer.connection is not connection:
                return
            peer.connection = None
            if was_established:
                peer.connected = False
                peer.queue.clear()
                peer.queued_bytes = 0
                self.inbox.broadcast(_DISCONNECTED, peer_id)
        if connection.dialer:
            _schedule_redial(peer, time.monotonic(), self.config)


_MESSAGE = "m"
_CONNECTED = CONNECTED
_DISCONNECTED = DISCONNECTED


class MuxTransport(Transport):  # type: ignore[misc]  # pysyncobj is untyped
    """The pysyncobj transport of one Raft group on a :class:`MuxHub`.

    Pass ``transportClass=functools.partial(MuxTransport, hub=hub, group="topic-a/0")`` and
    ``nodeClass=pysyncobj.Node`` (or TCPNode when node ids are ``host:port`` addresses) to SyncObj;
    ``selfNode.id`` must equal ``hub.node_id`` and every other node's id must be a hub peer
    (TCPNode peers unknown to the hub are added with their address). Destroying the SyncObj
    unregisters the group.
    """

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any, *, hub: MuxHub, group: str) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        if selfNode is None:
            raise TransportError("MuxTransport does not support pysyncobj read-only nodes (selfNode=None)")
        if selfNode.id != hub.node_id:
            raise TransportError(f"selfNode.id {selfNode.id!r} differs from hub.node_id {hub.node_id!r}")
        self._hub = hub
        self._group = wire.check_group_id(group)
        self._syncObj = syncObj
        self._nodes: dict[str, Any] = {}
        self._inbox: collections.deque[tuple[str, str, Any]] = collections.deque()
        self._destroyed = False
        self._wake_fds: tuple[int, int] | None = None
        self._wake_pending = False
        for node in otherNodes:
            self._nodes[node.id] = node
        hub._register_group(self._group, self)  # raises DuplicateGroup before anything else is set up
        for node in otherNodes:
            self._remember(node)
        if syncObj.conf.autoTick:
            self._wake_fds = nonblocking_pipe()
            syncObj._poller.subscribe(self._wake_fds[0], self._on_wake_pipe, POLL_EVENT_TYPE.READ)
            self._kick()  # events queued at registration (peers already connected)
        syncObj.addOnTickCallback(self.receive)

    @property
    def group(self) -> str:
        return self._group

    def _remember(self, node: Any) -> None:
        self._nodes[node.id] = node
        if isinstance(node, TCPNode) and not self._hub.peers.knows(node.id):
            self._hub.peers.set(node.id, node.address)

    # hub thread side (called with the hub lock held)

    def _push_event(self, kind: str, peer_id: str) -> None:
        self._inbox.append((kind, peer_id, None))
        self._kick()

    def _push_messages(self, peer_id: str, messages: list[RaftMessage], inbox_max: int) -> int:
        room = inbox_max - len(self._inbox)
        if room <= 0:
            return 0
        accepted = messages if len(messages) <= room else messages[:room]
        self._inbox.extend((_MESSAGE, peer_id, m) for m in accepted)
        self._kick()
        return len(accepted)

    def _kick(self) -> None:
        if self._wake_fds is not None and not self._wake_pending:
            self._wake_pending = True
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_fds[1], b"x")

    # tick thread side

    def _on_wake_pipe(self, descr: int, event_mask: int) -> None:
        if self._wake_fds is None:
            return
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_fds[0], 4096):
                pass
        self._wake_pending = False
        self.receive()

    def receive(self) -> None:
        """Deliver what was in the inbox when the call began (later arrivals wait for the next tick).
        Registered as an on-tick callback; a tick owner that delivers earlier in its tick (RaftCore does it
        first, so what arrived is acted on in the same tick) removes that callback and calls this."""
        inbox = self._inbox
        nodes = self._nodes
        for _ in range(len(inbox)):
            kind, peer_id, message = inbox.popleft()
            node = nodes.get(peer_id)
            if node is None:
                continue
            if kind == _MESSAGE:
                self._onMessageReceived(node, message)
            elif kind == _CONNECTED:
                self._onNodeConnected(node)
            else:
                self._onNodeDisconnected(node)

    # pysyncobj Transport API (pysyncobj/transport.py:126-185)

    def last_heard(self, node: Any) -> float | None:
        """When this node's connection to ``node`` last received anything (see MuxHub.last_heard)."""
        return self._hub.peers.last_heard(node.id)

    def send(self, node: Any, message: Any) -> bool:
        if self._destroyed:
            return False
        return self._hub._enqueue(node.id, self._group, wire.encode_message(message))

    def addNode(self, node: Any) -> None:
        self._remember(node)
        self._hub._replay_connection_state(self, node.id)

    def dropNode(self, node: Any) -> None:
        self._nodes.pop(node.id, None)

    def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        self._hub._unregister_group(self._group, self)
        self._syncObj.removeOnTickCallback(self.receive)
        if self._wake_fds is not None:
            self._syncObj._poller.unsubscribe(self._wake_fds[0])
            for fd in self._wake_fds:
                os.close(fd)
            self._wake_fds = None
        self._inbox.clear()
        self.setOnMessageReceivedCallback(None)
        self.setOnNodeConnectedCallback(None)
        self.setOnNodeDisconnectedCallback(None)


def transport_class(hub: MuxHub, group: str) -> functools.partial[MuxTransport]:
    """``transportClass`` for SyncObj: ``SyncObj(..., transportClass=transport_class(hub, group))``."""
    return functools.partial(MuxTransport, hub=hub, group=group)


def _bind(bind_address: str, config: HubConfig) -> socket.socket:
    host, port = parse_address(bind_address)
    if host in ("", "0.0.0.0", "::") and not config.allow_wildcard_bind:
        raise InvalidAddress(f"refusing wildcard bind address {bind_address!r} (see allow_wildcard_bind)")
    family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(sockaddr)
        listener.listen(config.listen_backlog)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener


# ------------------------------------------------------------------------------- public API


def _resolve_host(host: str) -> set[str]:
    """The addresses a peer's host name stands for (an IP literal: itself), for admission."""
    if is_ip_literal(host):
        return {normalize_host(host)}
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        log.warning("cannot resolve peer host %r (its connections get no reserved room): %s", host, exc)
        return set()
    return {normalize_host(str(info[4][0])) for info in infos}


def _schedule_redial(peer: _Peer, now: float, config: HubConfig) -> None:
    delay = min(
        config.reconnect_backoff_max_s,
        config.reconnect_backoff_min_s * (2 ** min(peer.dial_failures, 30)),
    )
    peer.dial_failures += 1
    peer.next_dial_at = now + delay * random.uniform(0.5, 1.0)


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


def _session(connection: _Connection) -> wire.Session:
    session = connection.session
    if session is None:
        raise wire.MalformedFrame(f"sealing a frame on {connection.describe()} without a session")
    return session


def _dials(node_id: str, peer_id: str) -> bool:
    """Of two nodes, the one with the higher id dials (one connection a pair)."""
    return node_id > peer_id


class _Warnings:
    """At most one warning per key per ``_WARNING_INTERVAL_S``, in bounded memory."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def due(self, key: str) -> bool:
        now = time.monotonic()
        if now - self._last.get(key, -_WARNING_INTERVAL_S) < _WARNING_INTERVAL_S:
            return False
        if len(self._last) > 10_000:
            self._last.clear()
        self._last[key] = now
        return True

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
