"""The Kafka listener's bounds (``Limits``) and the pure rules that apply them to a connection: whether a
new connection is admitted (``admission``) and when an open one is cut (``overdue``). No sockets, loop or
clock: the listener (``kafka_api.server``) passes the time in and acts on the answer.

What a connection may hold before it authenticates is small on a listener that requires it: a frame of
at most ``frame_bytes_before_auth_max`` (Kafka's ``sasl.server.max.receive.size``, checked on the size
prefix before the body is read), one of ``unauthenticated_connections_max`` slots for at most
``login_timeout_s``, and its frames' bytes from ``request_bytes_before_login_reserve`` alone (16 MiB by
default), which no logged-in user takes, for at most the login timeout, whatever the clients do.

A frame's bytes must keep coming once its room is taken: after ``frame_timeout_s`` at
``frame_rate_min_bytes_per_s`` (``partitions.security.holds.arrival_overdue``), so a frame whose bytes stop
loses its room (and its connection) ``frame_timeout_s`` after they stopped, whatever size it announced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_api.share_sessions import PER_CONNECTION_MAX_DEFAULT as SHARE_SESSIONS_PER_CONNECTION_MAX_DEFAULT
from kafka_api.share_sessions import PER_USER_MAX_DEFAULT as SHARE_SESSIONS_PER_USER_MAX_DEFAULT
from partitions.security.holds import (
    CONNECTIONS_PER_USER_MAX_DEFAULT,
    IDLE_AT_CAP_TIMEOUT_S_DEFAULT,
    REQUEST_BYTES_BEFORE_LOGIN_RESERVE_DEFAULT,
    REQUEST_BYTES_MAX_DEFAULT,
    REQUEST_BYTES_PER_USER_MAX_DEFAULT,
    REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT,
    SUPER_USER_RESERVE_DEFAULT,
    arrival_overdue,
)

MiB = 1024 * 1024
FRAME_BYTES_MAX_DEFAULT = 100 * MiB  # Kafka's socket.request.max.bytes
FRAME_BYTES_BEFORE_AUTH_MAX_DEFAULT = 512 * 1024  # Kafka's sasl.server.max.receive.size
CONNECTIONS_MAX_DEFAULT = 1000
# Kafka's max.connections.per.ip, which Kafka leaves unbounded: by default no address is held below the
# node-wide bound (a client's test suite on one machine opens hundreds), and at that bound a newcomer
# from an address holding fewer takes the oldest connection of the address holding most (``admission``)
CONNECTIONS_PER_ADDRESS_MAX_DEFAULT = CONNECTIONS_MAX_DEFAULT
UNAUTHENTICATED_CONNECTIONS_MAX_DEFAULT = 200
LOGIN_TIMEOUT_S_DEFAULT = 10.0
IDLE_TIMEOUT_S_DEFAULT = 600.0  # Kafka's connections.max.idle.ms
FRAME_TIMEOUT_S_DEFAULT = 10.0
FRAME_RATE_MIN_BYTES_PER_S_DEFAULT = MiB
TLS_HANDSHAKE_TIMEOUT_S_DEFAULT = 10.0


@dataclass(frozen=True, slots=True)
class Limits:
    frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT
    # a frame's bound until the connection authenticated, on a listener that requires it
    frame_bytes_before_auth_max: int = FRAME_BYTES_BEFORE_AUTH_MAX_DEFAULT
    connections_max: int = CONNECTIONS_MAX_DEFAULT
    connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX_DEFAULT  # open from one client IP
    # open and not yet authenticated, on a listener that requires it: the rest of connections_max is
    # left to authenticated clients
    unauthenticated_connections_max: int = UNAUTHENTICATED_CONNECTIONS_MAX_DEFAULT
    login_timeout_s: float = LOGIN_TIMEOUT_S_DEFAULT  # to authenticate, on a listener that requires it
    idle_timeout_s: float = IDLE_TIMEOUT_S_DEFAULT  # waiting for the next request
    # a frame's bytes must keep coming at the rate once frame_timeout_s passed since its first byte (and
    # since its room was taken): a frame whose bytes stop is cut frame_timeout_s after
    frame_timeout_s: float = FRAME_TIMEOUT_S_DEFAULT
    frame_rate_min_bytes_per_s: int = FRAME_RATE_MIN_BYTES_PER_S_DEFAULT
    tls_handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S_DEFAULT
    # what a logged-in user may hold (``partitions.security.holds``): connections, the room of
    # connections_max only super users' logins take, and when a user at its cap loses its idle ones
    connections_per_user_max: int = CONNECTIONS_PER_USER_MAX_DEFAULT
    super_user_reserve: int = SUPER_USER_RESERVE_DEFAULT
    idle_at_cap_timeout_s: float = IDLE_AT_CAP_TIMEOUT_S_DEFAULT
    # of request_bytes_max, what only super users' requests and only frames before login take
    request_bytes_super_user_reserve: int = REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT
    request_bytes_before_login_reserve: int = REQUEST_BYTES_BEFORE_LOGIN_RESERVE_DEFAULT
    # bytes of requests being received or queued, on the listener and per user (an anonymous
    # connection: per address); reading stops while a request waits for room (Kafka's
    # queued.max.request.bytes)
    request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    request_bytes_per_user_max: int = REQUEST_BYTES_PER_USER_MAX_DEFAULT
    in_flight_max: int = 64  # per connection: requests read and not yet answered
    send_timeout_s: float = 30.0  # how long an answer may wait for the client to read it
    # SO_SNDBUF of each connection (Kafka's socket.send.buffer.bytes); None: the OS's
    send_buffer_bytes: int | None = None
    # share sessions (KIP-932) one connection, one logged-in user may hold on this node (``share_sessions``)
    share_sessions_per_connection_max: int = SHARE_SESSIONS_PER_CONNECTION_MAX_DEFAULT
    share_sessions_per_user_max: int = SHARE_SESSIONS_PER_USER_MAX_DEFAULT

    def __post_init__(self) -> None:
        for name in (
            "frame_bytes_max", "frame_bytes_before_auth_max", "connections_max",
            "connections_per_address_max", "unauthenticated_connections_max", "frame_rate_min_bytes_per_s",
            "in_flight_max", "connections_per_user_max", "request_bytes_max", "request_bytes_per_user_max",
            "share_sessions_per_connection_max", "share_sessions_per_user_max",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"Kafka limit {name} {getattr(self, name)}: must be >= 1")
        for name in (
            "login_timeout_s", "idle_timeout_s", "frame_timeout_s", "tls_handshake_timeout_s",
            "idle_at_cap_timeout_s",
        ):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ValueError(f"Kafka limit {name} {getattr(self, name)}: must be > 0")
        if self.super_user_reserve < 0:  # at connections_max or more: only super users may log in
            raise ValueError(f"Kafka limit super_user_reserve {self.super_user_reserve}: must be >= 0")
        reserves = self.request_bytes_super_user_reserve + self.request_bytes_before_login_reserve
        if min(self.request_bytes_super_user_reserve, self.request_bytes_before_login_reserve) < 1 or (
            reserves >= self.request_bytes_max
        ):
            raise ValueError(
                f"Kafka limits request_bytes_super_user_reserve {self.request_bytes_super_user_reserve} and "
                f"request_bytes_before_login_reserve {self.request_bytes_before_login_reserve}: each must be "
                f">= 1, together below request_bytes_max {self.request_bytes_max}"
            )

    def frame_overdue(self, size: int, received: int | None, elapsed_s: float) -> bool:
        """Whether a frame of ``size`` bytes (0: its size prefix is not whole yet), ``received`` of which
        came (None: not known before it is whole) ``elapsed_s`` after its first byte, comes too slowly."""
        return arrival_overdue(
            size, received, elapsed_s, self.frame_timeout_s, self.frame_rate_min_bytes_per_s
        )


@dataclass(slots=True)
class Clock:
    """A connection's times (seconds on the listener's monotonic clock) as ``overdue`` judges them."""

    opened_s: float
    authenticated: bool = False
    idle_since_s: float | None = None  # waiting for a request's first byte since then
    frame_since_s: float | None = None  # a frame's first byte came then; the frame is not whole yet
    frame_bytes: int = 0  # its announced size (0 until the size prefix is whole)
    frame_received: int | None = None  # of them, come so far (None: not known before the frame is whole)


def overdue(clock: Clock, now_s: float, limits: Limits, login_required: bool) -> tuple[str, str] | None:
    """(what kind of deadline, why) the connection must be cut now, or None."""
    if login_required and not clock.authenticated and now_s - clock.opened_s > limits.login_timeout_s:
        return "login_timeout", f"not authenticated within the login timeout ({limits.login_timeout_s:g} s)"
    if clock.frame_since_s is not None:
        elapsed_s = now_s - clock.frame_since_s
        if limits.frame_overdue(clock.frame_bytes, clock.frame_received, elapsed_s):
            received = "?" if clock.frame_received is None else clock.frame_received
            why = (
                f"a frame of {clock.frame_bytes} bytes, {received} come in {elapsed_s:.3g} s: slower than "
                f"{limits.frame_rate_min_bytes_per_s} bytes/s after {limits.frame_timeout_s:g} s"
            )
            return "frame_timeout", why
    if clock.idle_since_s is not None and now_s - clock.idle_since_s > limits.idle_timeout_s:
        return "idle_timeout", f"no request within the idle timeout ({limits.idle_timeout_s:g} s)"
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a new connection is not admitted as things stand (``kind`` names the bound), and whether it is
    admitted all the same by cutting the oldest unauthenticated connection of ``evict`` (an address)."""

    kind: str
    why: str
    evict: str | None = None


def admission(
    limits: Limits,
    login_required: bool,
    open_count: int,
    from_address: int,
    unauthenticated: dict[str, int],
    address: str,
    holders: Mapping[str, int] | None = None,
) -> Refusal | None:
    """Whether a new connection from ``address`` is admitted: None, or its ``Refusal``.

    ``open_count`` connections are open, ``from_address`` of them from ``address``; ``unauthenticated``
    counts, per address, those not yet authenticated (on a listener that requires it). When the
    unauthenticated slots are full, a newcomer from another address than the one holding most of them
    takes the oldest of that one's (``Refusal.evict``): one address reconnecting at once cannot keep
    clients from other addresses out of the login. Likewise at the node-wide bound on a listener without
    login, where the address is a client's only identity: ``holders`` counts every open connection by
    address, and a newcomer from an address holding fewer than the one holding most takes the oldest of
    that one's, so one address cannot hold the node to itself. With login, at the node-wide bound, the
    newcomer takes the oldest connection not yet authenticated of the address holding most of those (what
    logged-in users hold is bounded per user: ``partitions.security.holds``)."""
    if open_count >= limits.connections_max:
        why = f"{open_count} connections are open (at most {limits.connections_max})"
        if login_required:  # logged-in users are bounded per user; the not yet logged in give way
            evict = (
                _fair_share_evict(unauthenticated, unauthenticated.get(address, 0))
                if unauthenticated
                else None
            )
        else:
            evict = _fair_share_evict(holders, from_address) if holders else None
        return Refusal("connections", why, evict)
    if from_address >= limits.connections_per_address_max:
        bound = limits.connections_per_address_max
        why = f"{from_address} connections are open from {address} (at most {bound} per address)"
        return Refusal("per_address", why)
    if not login_required:
        return None
    waiting = sum(unauthenticated.values())
    if waiting < limits.unauthenticated_connections_max:
        return None
    bound = limits.unauthenticated_connections_max
    why = f"{waiting} connections are not authenticated yet (at most {bound})"
    return Refusal(
        "unauthenticated", why, _fair_share_evict(unauthenticated, unauthenticated.get(address, 0))
    )


def _fair_share_evict(held: Mapping[str, int], newcomers: int) -> str | None:
    """The address holding most of ``held``, when it holds more than the newcomer's address (holding
    ``newcomers``) would once the newcomer is in; else None."""
    most = max(held, key=lambda a: held[a])
    return most if held[most] > newcomers + 1 else None
