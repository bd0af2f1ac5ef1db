"""What a logged-in user may hold of a listener: its connections, and the bytes of its requests being
received or queued. One rule for every door (``kafka_api.server``, ``api.bodies``); each listener holds its
own tables. Pure: no sockets, loop or clock (``now_s`` comes in), except ``RequestBytes.take``, which waits
for room on the running event loop.

Connections (``login_admission``, ``idle_at_cap``), judged when a login names the user:

- a user holds at most ``connections_per_user_max`` logged-in connections: the newest past it is refused;
- ordinary users (not super users) hold at most ``connections_max - super_user_reserve`` of the listener's
  connections together: the rest is room only super users' logins take, so an admin can always log in;
- when that is full, a login of a user holding fewer takes the least-recently-active idle connection of
  the user holding most (never a connection with a request being read or answered), else it is refused;
- a user at its cap (or at it within the last ``idle_at_cap_timeout_s``) has its connections idle longer
  than that closed, so a hold kept alive by a request now and then ends without anyone asking for room.

Request bytes (``RequestBytes``): a request's size is taken from the listener's budget before its body is
read, and given back once it is answered; the door stops reading from a socket while its request waits for
room (backpressure), so what a node buffers is bounded by the budget, and one holder (a user, or for an
anonymous connection its address) takes at most its share. A request larger than the room left is let in
only when the budget (the holder's share) is otherwise empty, so a request of the largest allowed size
always goes through in the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

MiB = 1024 * 1024
CONNECTIONS_PER_USER_MAX_DEFAULT = 500  # half of a Kafka listener's 1000: one user never holds the node
SUPER_USER_RESERVE_DEFAULT = 20  # of a listener's connections, for super users' logins only
# a user at its cap: its connections idle this long are closed (Kafka's connections.max.idle.ms, 600 s,
# stays the bound for everyone else: the Java client closes its own idle connections at 540 s)
IDLE_AT_CAP_TIMEOUT_S_DEFAULT = 60.0
REQUEST_BYTES_MAX_DEFAULT = 256 * MiB  # Kafka's queued.max.request.bytes (unbounded in Kafka)
REQUEST_BYTES_PER_USER_MAX_DEFAULT = 100 * MiB  # one request of Kafka's largest (socket.request.max.bytes)

C = TypeVar("C", bound=Hashable)


@dataclass(frozen=True, slots=True)
class ConnectionVerdict:
    """A login's fate when it is not simply admitted: refused (``evict`` None: the newest connection, the
    one logging in, is closed) or admitted by closing ``evict``. ``kind`` names the bound (a metric)."""

    kind: str
    why: str
    evict: object | None = None


def login_admission(
    user: str,
    super_users: frozenset[str],
    held: Mapping[str, Collection[C]],
    connections_max: int,
    connections_per_user_max: int,
    super_user_reserve: int,
    idle_since_s: Callable[[C], float | None],
) -> ConnectionVerdict | None:
    """Whether a connection logging in as ``user`` may stay (None), given the logged-in connections
    ``held`` by user (oldest first, the one logging in not among them) and when each went idle (None:
    a request of it is being read or answered)."""
    if user in super_users:
        return None
    mine = len(held.get(user, ()))
    if mine >= connections_per_user_max:
        why = f"user {user!r} holds {mine} connections (at most {connections_per_user_max} per user)"
        return ConnectionVerdict("per_user", why)
    ordinary = {name: connections for name, connections in held.items() if name not in super_users}
    room = connections_max - super_user_reserve
    total = sum(len(connections) for connections in ordinary.values())
    if total < room:
        return None
    why = (
        f"ordinary users hold {total} connections (at most {room}: {super_user_reserve} kept for super users)"
    )
    most = max(ordinary, key=lambda name: len(ordinary[name]))
    if len(ordinary[most]) > mine + 1:
        idle = [(since, c) for c in ordinary[most] if (since := idle_since_s(c)) is not None]
        if idle:
            least_recent = min(idle, key=lambda pair: pair[0])[1]
            return ConnectionVerdict(
                "reserved", f"{why}: the least recently active of {most!r}'s", least_recent
            )
    return ConnectionVerdict("reserved", why)


def idle_at_cap(
    held: Mapping[str, Collection[C]],
    super_users: frozenset[str],
    connections_per_user_max: int,
    idle_at_cap_timeout_s: float,
    idle_since_s: Callable[[C], float | None],
    now_s: float,
    pressed_until_s: dict[str, float],
) -> list[C]:
    """The connections of ordinary users at their cap that have been idle past the at-cap timeout.
    ``pressed_until_s`` (the caller's, kept up to date here) says until when a user counts as at its cap:
    for the at-cap timeout after it last held it, so that closing its first idle connection (which takes
    it below its cap) does not spare the others."""
    for user, connections in held.items():
        if user not in super_users and len(connections) >= connections_per_user_max:
            pressed_until_s[user] = now_s + idle_at_cap_timeout_s
    found = []
    for user, until_s in list(pressed_until_s.items()):
        if until_s < now_s or user not in held:
            del pressed_until_s[user]
            continue
        for connection in held[user]:
            since = idle_since_s(connection)
            if since is not None and now_s - since > idle_at_cap_timeout_s:
                found.append(connection)
    return found


class RequestBytes:
    """One listener's budget of request bytes being received or queued, in all and per holder."""

    def __init__(self, total_max: int, per_holder_max: int) -> None:
        if total_max < 1 or per_holder_max < 1:
            raise ValueError(f"request bytes: bounds must be >= 1 ({total_max}, {per_holder_max})")
        self.total_max = total_max
        self.per_holder_max = per_holder_max
        self.held = 0
        self._by_holder: dict[str, int] = {}
        self.waited_total = 0  # requests that waited for room (a metric)
        self._waiters: list[asyncio.Future[None]] = []

    def holding(self, holder: str) -> int:
        return self._by_holder.get(holder, 0)

    def fits(self, holder: str, size: int) -> bool:
        """Whether ``size`` bytes may be taken for ``holder`` now: within the room left of both bounds,
        or, for a request larger than that, when the budget (the holder's share) holds nothing else."""
        mine = self._by_holder.get(holder, 0)
        total_ok = self.held + size <= self.total_max or self.held == 0
        holder_ok = mine + size <= self.per_holder_max or mine == 0
        return total_ok and holder_ok

    def try_take(self, holder: str, size: int) -> bool:
        if size <= 0:
            return True  # an empty body holds nothing (its give_back gives nothing)
        if not self.fits(holder, size):
            return False
        self.held += size
        self._by_holder[holder] = self._by_holder.get(holder, 0) + size
        return True

    def give_back(self, holder: str, size: int) -> None:
        if size <= 0:
            return
        mine = self._by_holder.get(holder, 0)
        if mine < size or self.held < size:
            raise RuntimeError(f"request bytes: {holder} gives back {size}, holding {mine} of {self.held}")
        self.held -= size
        if mine == size:
            del self._by_holder[holder]
        else:
            self._by_holder[holder] = mine - size
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def take(self, holder: str, size: int) -> None:
        """Take ``size`` bytes for ``holder``, waiting for room (the caller reads nothing meanwhile)."""
        if self.try_take(holder, size):
            return
        self.waited_total += 1
        while not self.try_take(holder, size):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
