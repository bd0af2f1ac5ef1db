"""Which connections a :class:`~raftlog.consensus.hub.MuxHub` opens and which it lets in, all on the hub
thread: its listening socket (bound to exactly the address it is given; a wildcard only when allowed),
dials to the peers this node dials (of two nodes, the one with the greater id; a failed or lost dial backs
off, ``Peer.schedule_redial``), connections accepted and admitted to a handshake (:mod:`raftlog.admission`:
bounded per source address and, for addresses that are no known peer's, together; room kept for the
peers' hosts, resolved here), and the closing of connections whose peer was removed, readdressed or asked
to disconnect. What then flows on a connection (handshake, frames, timers) is the hub's.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Mapping

from raftlog import admission
from raftlog.addresses import is_ip_literal, normalize_host
from raftlog.consensus import wire
from raftlog.consensus.hub_config import HubConfig, InvalidAddress, parse_address
from raftlog.consensus.hub_peers import Connection, ConnectionState, Peer, PeerTable, Warnings

log = logging.getLogger(__name__)

_ACCEPTS_PER_EVENT = 64


def dials(node_id: str, peer_id: str) -> bool:
    """Of two nodes, the one with the higher id dials (one connection a pair)."""
    return node_id > peer_id


class Connector:
    """The hub's listener, its dials and its admission of inbound connections; hub thread only. It shares
    the hub's lock (to read the peer table), its set of connections, its counters and its warnings, and
    closes a connection or sets the events the selector watches for it through the hub (``close``,
    ``set_events``)."""

    def __init__(
        self,
        node_id: str,
        secret: bytes,
        bind_address: str,
        config: HubConfig,
        *,
        peers: PeerTable,
        lock: threading.Lock,
        connections: set[Connection],
        counters: collections.Counter[str],
        warnings: Warnings,
        close: Callable[[Connection, str, int], None],
        set_events: Callable[[Connection, int], None],
        levels: Mapping[str, int] | None = None,
    ) -> None:
        """``levels``: the feature levels this node announces in its handshakes (None: none)."""
        self.node_id = node_id
        self._levels = levels
        self.config = config
        self.peers = peers
        self._secret = secret
        self._lock = lock
        self._connections = connections
        self._counters = counters
        self._warnings = warnings
        self._close = close
        self._set_events = set_events
        # the peers' addresses, resolved -> how many peers live there
        self.known_hosts: collections.Counter[str] = collections.Counter()
        self.listener = _bind(bind_address, config)
        host, port = self.listener.getsockname()[:2]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def reconcile(self) -> None:
        """After the peer table changed: learn the peers' hosts again and close the connections of peers
        removed, readdressed or asked to disconnect."""
        with self._lock:
            current = dict(self.peers.by_id)
            forced, self.peers.forced = self.peers.forced, set()
        self.known_hosts = collections.Counter(
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

    def dial_due(self, now: float) -> None:
        """Dial each peer this node dials that has no connection and whose back-off has passed."""
        with self._lock:
            due = [
                p
                for p in self.peers.by_id.values()
                if dials(self.node_id, p.node_id) and p.connection is None and now >= p.next_dial_at
            ]
        for peer in due:
            self._dial(peer, now)

    def _dial(self, peer: Peer, now: float) -> None:
        host, port = peer.address
        try:
            family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            log.warning("cannot resolve peer %r at %s:%d: %s", peer.node_id, host, port, exc)
            peer.schedule_redial(now, self.config)
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = Connection(sock, dialer=True, peer_id=peer.node_id, now=now, config=self.config)
        connection.address = peer.address
        self._counters["dials"] += 1
        error = sock.connect_ex(sockaddr)
        if error not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            sock.close()
            self._counters["dial_failures"] += 1
            log.debug("dial %r at %s:%d failed: %s", peer.node_id, host, port, os.strerror(error))
            peer.schedule_redial(now, self.config)
            return
        peer.connection = connection
        self._connections.add(connection)
        self._set_events(connection, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def accept(self) -> None:
        """The listener is readable: take what waits (a bounded number), each admitted or closed."""
        for _ in range(_ACCEPTS_PER_EVENT):
            try:
                sock, remote = self.listener.accept()
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
            connection = Connection(
                sock, dialer=False, peer_id=None, now=time.monotonic(), config=self.config
            )
            connection.remote_host = host
            connection.handshake = wire.AcceptorHandshake(
                self._secret, self.node_id, os.urandom(wire.NONCE_BYTES), self.peers.knows, self._levels
            )
            self._connections.add(connection)
            self._set_events(connection, selectors.EVENT_READ)

    def _admit(self, host: str) -> bool:
        """Whether a connection just accepted from ``host`` may start a handshake (closing the oldest
        pending one from a known peer's host if that makes room); a refusal is counted and logged at
        most once per ``hub_peers.WARNING_INTERVAL_S`` per cause."""
        config = self.config
        pending = [c for c in self._connections if not c.dialer and c.state is ConnectionState.HANDSHAKE]
        by_host = collections.Counter(c.remote_host for c in pending)
        outsiders = sum(count for h, count in by_host.items() if h not in self.known_hosts)
        verdict = admission.admit(
            host,
            by_host,
            outsiders,
            self.known_hosts,
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
