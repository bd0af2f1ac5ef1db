"""One authenticated, encrypted TCP connection per peer pair, carrying every Raft group of this node.

The pieces:

* :class:`MuxHub` (here) - one per node process. Owns ONE listening socket (bound to exactly the address it
  is given), one connection per peer and ONE ``selectors`` I/O loop (on its own thread, or on the driver
  thread through :meth:`MuxHub.poll`). It authenticates peers, encrypts every frame after the handshake
  (see :mod:`raftlog.consensus.wire`), splits inbound BATCH frames into per-group inboxes and coalesces the
  outbound messages of all groups into BATCH frames. It never calls into SyncObj. Its parts: the
  ``Connector`` (:mod:`raftlog.consensus.hub_connector`: the listener, dials, admission of inbound
  connections), ``peers`` (:mod:`raftlog.consensus.hub_peers`: the peer table, the peer and connection
  records) and ``inbox`` (:mod:`raftlog.consensus.hub_inbox`: the groups and what arrives for them); its
  configuration and errors are :mod:`raftlog.consensus.hub_config`.
* :class:`~raftlog.consensus.transport.MuxTransport` - a ``pysyncobj.transport.Transport`` for one Raft
  group (:mod:`raftlog.consensus.transport`). Its inbox is drained on the group's tick thread, so
  ``_onMessageReceived``, ``_onNodeConnected`` and ``_onNodeDisconnected`` always run there; ``send()``
  (called on that thread) encodes with msgpack and enqueues on the hub.

Threads and ownership:

* Hub thread (or, in polled mode, the thread calling ``poll``): sockets, selector, frame buffers,
  handshakes, reconnect timers (the hub's and its connector's). Nothing else touches them.
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
while a tick is slow. Nodes run polled mode through ``Driver.drive_hub``, which waits between rounds in
:meth:`MuxHub.poll` only (``MuxHub.wake`` ends the wait) and calls :meth:`MuxHub.flush` before each fsync
so that peers receive a leader's appends while it syncs.

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
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable

from raftlog.consensus import wire, wire_errors, wire_messages
from raftlog.consensus.hub_config import DuplicateGroup, HubClosed, HubConfig, TransportError
from raftlog.consensus.hub_connector import Connector, dials
from raftlog.consensus.hub_gate import LevelGate
from raftlog.consensus.hub_inbox import (
    CONNECTED,
    DISCONNECTED,
    GroupInbox,
    GroupTransport,
    nonblocking_pipe,
)
from raftlog.consensus.hub_peers import Connection, ConnectionState, PeerTable, Warnings
from raftlog.consensus.messages import RaftMessage
from raftlog.errors import check

log = logging.getLogger(__name__)

_RECV_BYTES = 256 * 1024
_BATCH_OVERHEAD_BYTES = 16 + wire_messages.GROUP_ID_BYTES_MAX + 8 + wire.MAC_BYTES


class MuxHub:
    """The node's Raft I/O: one listening port, one connection per peer, one thread for every group.

    ``node_id`` must equal ``selfNode.id`` of every SyncObj using this hub; peers are ``{node_id:
    "host:port"}``. ``bind_address`` is bound exactly (port 0 picks a free port, see :attr:`address`).
    Run its I/O with :meth:`start` (own thread) or by calling :meth:`poll` from the driver thread, and
    :meth:`close` it at shutdown. Peers (``peers.set``, ``peers.remove``) may change at any time
    from any thread; groups register themselves by constructing a
    :class:`~raftlog.consensus.transport.MuxTransport` and leave when their SyncObj is destroyed.
    """

    def __init__(
        self,
        node_id: str,
        bind_address: str,
        secret: bytes,
        peers: dict[str, str] | None = None,
        config: HubConfig | None = None,
        gate: LevelGate | None = None,
    ) -> None:
        """``gate``: what this node announces of its code's feature levels and which peers it lets in by
        theirs (:mod:`raftlog.consensus.hub_gate`; None: announce nothing, let every peer in)."""
        self.node_id = wire_messages.check_node_id(node_id)
        self.config = config or HubConfig()
        self.gate = gate if gate is not None else LevelGate()
        self._recheck_due = False  # (lock) the gate's rule changed: judge every connection again
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
        self._connections: set[Connection] = set()  # hub thread
        self._warnings = Warnings()  # hub thread
        self._connector = Connector(  # hub thread: the listener, dials, admission
            self.node_id,
            secret,
            bind_address,
            self.config,
            peers=self.peers,
            lock=self._lock,
            connections=self._connections,
            counters=self._counters,
            warnings=self._warnings,
            close=self._close,
            set_events=self._set_events,
            levels=self.gate.levels,
        )
        self._wake_read, self._wake_write = nonblocking_pipe()
        self._selector = selectors.DefaultSelector()
        self.address = self._connector.address
        self._selector.register(self._connector.listener, selectors.EVENT_READ, "listen")
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

    def poll(self, timeout_s: float) -> bool:
        """Polled mode: run one I/O iteration on the calling thread, waiting up to ``timeout_s`` for
        socket events (or :meth:`wake`). For a node whose groups all tick on one driver thread this avoids
        handing the GIL between the driver and an I/O thread on every syscall (each hand-off can cost a
        whole ``sys.getswitchinterval()``, 5 ms, while the driver is busy). The driver loop is then
        ``for obj in syncobjs: obj.doTick(0.0)`` followed by ``hub.poll(0.005)``; always the same
        thread, and never together with :meth:`start`. False once the hub is closed (it then waits for
        nothing: the caller sleeps elsewhere)."""
        me = threading.get_ident()
        if self._mode is None:
            self._mode, self._poll_thread = "poll", me
        elif self._mode != "poll" or self._poll_thread != me:
            raise TransportError(f"MuxHub.poll() from thread {me} but the hub runs in {self._mode} mode")
        try:
            if self._loop_once(timeout_s):
                return True
            self._shutdown()
            return False
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
            self._recheck_if_due()
            self._pump_dirty_peers()

    def recheck(self) -> None:
        """Judge every established connection by the gate again (from any thread): the rule changed (the
        cluster's levels rose). Done before the hub next moves a queued message, so a message queued
        after this call never reaches a peer the new rule keeps out."""
        with self._lock:
            self._recheck_due = True
        if not self._on_poll_thread():
            self._wake()

    def _recheck_if_due(self) -> None:
        with self._lock:
            if not self._recheck_due:
                return
            self._recheck_due = False
        for connection in list(self._connections):
            if connection.state is ConnectionState.ESTABLISHED and connection.peer_id is not None:
                reason = self.gate.judge(connection.peer_id, connection.peer_levels)
                if reason is not None:
                    self._counters["peers_kept_out"] += 1
                    self._close(connection, f"kept out: {reason}", logging.WARNING)

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

    def register_group(self, group: str, transport: GroupTransport) -> None:
        with self._lock:
            if self._closing:
                raise HubClosed(f"hub {self.node_id!r} is closed")
            if group in self.inbox.transports:
                raise DuplicateGroup(group)
            self.inbox.register(
                group, transport, [p.node_id for p in self.peers.by_id.values() if p.connected]
            )

    def unregister_group(self, group: str, transport: GroupTransport) -> None:
        with self._lock:
            self.inbox.unregister(group, transport)

    def replay_connection_state(self, transport: GroupTransport, node_id: str) -> None:
        """After ``addNode``: tell the transport whether that peer is connected right now."""
        with self._lock:
            peer = self.peers.by_id.get(node_id)
            if peer is not None and peer.connected:
                transport.push_event(CONNECTED, node_id)

    def enqueue(self, node_id: str, group: str, payload: bytes) -> bool:
        """Queue a group's encoded message for a peer: False (dropped; Raft retries) if the peer is not
        connected, its queue is full or the message could never fit a frame."""
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

    def wake(self) -> bool:
        """Any thread: the thread waiting in :meth:`poll` (or the hub thread) returns now. False once the
        hub is shut down (nothing waits in it then)."""
        with self._lock:  # the lock orders this write before _shutdown closes the pipe
            if self._shut_down:
                return False
            with contextlib.suppress(BlockingIOError):  # pipe full: a wake-up is already pending
                os.write(self._wake_write, b"x")
        return True

    def _wake(self) -> None:
        self.wake()

    def watch_inbox(self) -> None:
        """Polled mode, before the first :meth:`poll`: its wait also ends when the inbox's pipe turns
        readable (a group registered, or an event delivered, by another thread), for a driver that
        waits in :meth:`poll` and nowhere else; the driver's ``inbox.take_ready`` drains the pipe."""
        with self._lock:
            if self._shut_down:
                raise HubClosed(f"hub {self.node_id!r} is closed")
            fd = self.inbox.fd()
        self._selector.register(fd, selectors.EVENT_READ, "inbox")

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
            self._connector.reconcile()
        self._connector.dial_due(now)
        self._recheck_if_due()
        self._pump_dirty_peers()
        for key, mask in self._selector.select(timeout_s):
            if key.data == "listen":
                self._connector.accept()
            elif key.data == "wake":
                _drain(self._wake_read)
            elif key.data == "inbox":
                pass  # drained by inbox.take_ready, which the polling driver calls next
            else:
                self._on_socket_event(key.data, mask)
        # After reading: a thread that was not scheduled for longer than idle_timeout_s finds its peers'
        # pings waiting in the sockets, and must not close their connections for a silence of its own.
        self._check_timers(time.monotonic())
        self._recheck_if_due()
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
                self._selector.unregister(self._connector.listener)
            self._connector.listener.close()
            self._selector.close()
            for fd in (self._wake_read, self._wake_write):
                os.close(fd)
            self.inbox.close()

    def _set_events(self, connection: Connection, events: int) -> None:
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
            if connection.state is not ConnectionState.ESTABLISHED:
                if now > connection.deadline:
                    self._counters["handshake_timeouts"] += 1
                    waited = "no hello" if connection.peer_id is None else "handshake"
                    self._close(connection, f"{waited} timeout", logging.WARNING)
            elif now - connection.last_receive > config.idle_timeout_s:
                self._close(connection, f"nothing received for {config.idle_timeout_s}s", logging.WARNING)
            elif now - connection.last_send > config.ping_interval_s and not connection.outbuf:
                self._write(connection, _session(connection).seal(wire.KIND_PING, b""))

    def _on_socket_event(self, connection: Connection, mask: int) -> None:
        def handle() -> None:
            if mask & selectors.EVENT_WRITE:
                self._on_writable(connection)
            if mask & selectors.EVENT_READ and connection.state is not ConnectionState.CLOSED:
                self._on_readable(connection)

        self._guarded(connection, handle)

    def _guarded(self, connection: Connection, action: Callable[[], None]) -> None:
        """Run ``action`` for ``connection``; any failure closes that connection only, with a log line."""
        try:
            action()
        except wire_errors.AuthenticationFailed as exc:
            self._counters["authentication_failures"] += 1
            self._close(connection, f"authentication failed: {exc}", logging.WARNING)
        except wire_errors.WireError as exc:
            self._counters["protocol_errors"] += 1
            self._close(connection, f"protocol error: {type(exc).__name__}: {exc}", logging.WARNING)
        except OSError as exc:
            self._close(connection, f"socket error: {exc}", logging.INFO)
        except Exception:  # a bug in this module: log it with the stack, drop only this connection
            self._counters["internal_errors"] += 1
            log.exception("internal error on connection %s; closing it", connection.describe())
            self._close(connection, "internal error", logging.ERROR)

    def _on_writable(self, connection: Connection) -> None:
        if connection.state is ConnectionState.CONNECTING:
            error = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                self._close(connection, f"connect failed: {os.strerror(error)}", logging.DEBUG)
                return
            connection.state = ConnectionState.HANDSHAKE
            peer_id = connection.peer_id
            if peer_id is None:
                raise wire_errors.MalformedFrame("dialing connection without a peer id")
            handshake = wire.DialerHandshake(
                self._secret, self.node_id, peer_id, os.urandom(wire.NONCE_BYTES), self.gate.levels
            )
            connection.handshake = handshake
            connection.outbuf += handshake.hello()
        self._flush(connection)
        if (
            connection.state is ConnectionState.ESTABLISHED
            and not connection.outbuf
            and connection.peer_id is not None
        ):
            self._pump(connection.peer_id)

    def _on_readable(self, connection: Connection) -> None:
        reader = connection.reader
        if not reader.receive(connection.sock, _RECV_BYTES):
            level = logging.INFO if connection.state is ConnectionState.ESTABLISHED else logging.WARNING
            self._close(connection, "closed by peer", level)
            return
        connection.last_receive = time.monotonic()
        delivered: dict[str, list[RaftMessage]] = {}
        while connection.state is not ConnectionState.CLOSED:
            item = reader.next_frame()
            if item is None:
                break
            kind, payload = item
            if connection.state is ConnectionState.ESTABLISHED:
                session = connection.session
                if session is None:
                    raise wire_errors.MalformedFrame("established connection without a session")
                body = session.open(kind, payload)
                self._counters["frames_received"] += 1
                if kind == wire.KIND_BATCH:
                    for group, message in connection.batch_decoder.decode(body):
                        delivered.setdefault(group, []).append(message)
            else:
                self._on_handshake_frame(connection, kind, bytes(payload))  # small: under the handshake limit
        if delivered and connection.peer_id is not None and connection.state is ConnectionState.ESTABLISHED:
            self._deliver(connection.peer_id, delivered)

    def _on_handshake_frame(self, connection: Connection, kind: int, payload: bytes) -> None:
        handshake = connection.handshake
        if isinstance(handshake, wire.DialerHandshake):
            auth, session = handshake.on_challenge(kind, payload)
            connection.outbuf += auth
            connection.peer_levels = handshake.peer_levels
            self._established(connection, session)
            if connection.state is ConnectionState.ESTABLISHED:
                self._flush(connection)
        elif isinstance(handshake, wire.AcceptorHandshake):
            if handshake.peer_id is None:
                connection.outbuf += handshake.on_hello(kind, payload)
                connection.peer_id = handshake.peer_id
                connection.deadline = connection.accepted_at + self.config.handshake_timeout_s
                if handshake.peer_id is not None and dials(self.node_id, handshake.peer_id):
                    raise wire_errors.AuthenticationFailed(
                        f"peer {handshake.peer_id!r} dialed us, but {self.node_id!r} > it so we dial"
                    )
                self._flush(connection)
            else:
                session = handshake.on_auth(kind, payload)
                connection.peer_levels = handshake.peer_levels
                self._established(connection, session)
        else:
            raise wire_errors.MalformedFrame(
                f"handshake frame kind {kind} on a connection without a handshake"
            )

    def _established(self, connection: Connection, session: wire.Session) -> None:
        peer_id = connection.peer_id
        if peer_id is None:
            raise wire_errors.MalformedFrame("authenticated connection without a peer id")
        reason = self.gate.judge(peer_id, connection.peer_levels)
        if reason is not None:  # before any group hears of the peer: it receives and sends nothing
            self._counters["peers_kept_out"] += 1
            self._close(connection, f"kept out: {reason}", logging.WARNING)
            return
        connection.session = session
        connection.handshake = None
        connection.state = ConnectionState.ESTABLISHED
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
            self.inbox.broadcast(CONNECTED, peer_id)
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
        if connection is None or connection.state is not ConnectionState.ESTABLISHED:
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

    def _write(self, connection: Connection, data: bytes) -> None:
        connection.outbuf += data
        self._flush(connection)

    def _flush(self, connection: Connection) -> None:
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
        if connection.state is ConnectionState.CONNECTING:
            events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self._set_events(connection, events)

    def _close(self, connection: Connection, reason: str, level: int) -> None:
        if connection.state is ConnectionState.CLOSED:
            return
        was_established = connection.state is ConnectionState.ESTABLISHED
        # at most one warning a peer (or remote host; all outsiders together) per hub_peers.WARNING_INTERVAL_S
        key = connection.peer_id or connection.remote_host
        if connection.peer_id is None and connection.remote_host not in self._connector.known_hosts:
            key = "<outsiders>"
        if level >= logging.WARNING and not self._warnings.due(key):
            level = logging.DEBUG  # the same peer keeps failing the same way: do not flood the log
        log.log(level, "raft hub %r closed connection %s: %s", self.node_id, connection.describe(), reason)
        connection.state = ConnectionState.CLOSED
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
                self.inbox.broadcast(DISCONNECTED, peer_id)
        if connection.dialer:
            peer.schedule_redial(time.monotonic(), self.config)


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


def _session(connection: Connection) -> wire.Session:
    session = connection.session
    if session is None:
        raise wire_errors.MalformedFrame(f"sealing a frame on {connection.describe()} without a session")
    return session
