"""What a :class:`~raftlog.consensus.hub.MuxHub` is told and what it raises: ``HubConfig`` (the hub's
bounds, timers and back-off, checked when made), the ``TransportError`` family its callers see (wire errors
stay inside the hub thread), and ``parse_address`` for its ``host:port`` addresses. Pure: no sockets,
clocks or threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftlog.consensus import wire
from raftlog.errors import RaftlogError, with_fields


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
    # that a peer node is gone (raftlog.consensus.core_quiet, "Quiescence"), so it is kept near an election
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
