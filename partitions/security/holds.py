"""What a logged-in user may hold of a listener: its connections, and the bytes of its requests being
received or queued. One rule for every door (``kafka_api.server``, ``api.bodies``); each listener holds its
own tables. Pure: no sockets, loop or clock (``now_s`` comes in), except ``RequestBytes.take``, which waits
for room on the running event loop.

Connections (``login_admission``, ``idle_at_cap``), judged when a login names the user:

- a user holds at most ``connections_per_user_max`` logged-in connections: the newest past it is refused;
- ordinary users (not super users) hold at most ``connections_max - super_user_reserve`` of the listener's
  connections together: the rest is room only super users' logins take, so an admin can always log in;
- when that room is full, each ordinary user holding connections (and the one logging in) has a fair
  share of it (the room / their number, at least 1): a login of a user below its share takes the least
  recently active connection of the user holding most, busy or not (a long-poll in flight or a request
  half sent keeps no one out), when that user holds more than its share; else it is refused;
- a user at its cap (or at it within the last ``idle_at_cap_timeout_s``) has its connections idle longer
  than that closed, so a hold kept alive by a request now and then ends without anyone asking for room.

Request bytes (``RequestBytes``): a request's size is taken from the listener's budget before its body is
read, and given back once it is answered; the door stops reading from a socket while its request waits for
room (backpressure), so what a node buffers is bounded by the budget, and one holder (a user, or for an
anonymous connection its address) takes at most its share. Holders are of three kinds (``kind_of``):
ordinary users share ``total_max - super_user_reserve - before_login_reserve``; super users take that and
their reserve; frames before login (SASL handshakes, ApiVersions) take only their own reserve, so neither
the admin nor a login waits for what ordinary users hold. Waiting requests are served in turns, one per
holder (a holder with many waiting cannot queue ahead of others), holders below their fair share of their
room first. A holder below its fair share that waits has room made for it: the newest request of the
holder holding most above its share whose bytes are still arriving is cut (with its connection), busy or
not. A request whose bytes stop coming loses its room too (``arrival_overdue``). A request larger than the
room left is let in only when its room (the holder's share) is otherwise empty, so a request of the
largest allowed size always goes through in the end.
"""

from __future__ import annotations

import asyncio
from collections import deque
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
# of a listener's request bytes, what only super users take: an admin's requests (Metadata, topics, ACLs,
# configs: kilobytes) never wait for what ordinary users hold, a 16 MiB one (an HTTP body's bound) neither
REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT = 16 * MiB
# of a Kafka listener's request bytes, what only frames before login take (each at most 512 KiB, Kafka's
# sasl.server.max.receive.size; a SASL handshake or ApiVersions is under 1 KiB): 32 of the largest at once
REQUEST_BYTES_BEFORE_LOGIN_RESERVE_DEFAULT = 16 * MiB

ORDINARY, SUPER_USER, BEFORE_LOGIN = "ordinary", "super_user", "before_login"
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
    last_active_s: Callable[[C], float | None],
) -> ConnectionVerdict | None:
    """Whether a connection logging in as ``user`` may stay (None), given the logged-in connections
    ``held`` by user (the one logging in not among them) and when each was last active (a request came or
    was answered; None: not to be chosen, as one already being closed)."""
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
    share = max(1, room // len(ordinary.keys() | {user}))
    why = (
        f"ordinary users hold {total} connections (at most {room}: {super_user_reserve} kept for super "
        f"users; a fair share {share} each)"
    )
    if mine + 1 > share:
        return ConnectionVerdict("reserved", f"{why}: {user!r} holds {mine}")
    most = max(ordinary, key=lambda name: len(ordinary[name]))
    if len(ordinary[most]) > share:
        active = [(since, c) for c in ordinary[most] if (since := last_active_s(c)) is not None]
        if active:
            least_recent = min(active, key=lambda pair: pair[0])[1]
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


def arrival_due_s(size: int, received: int | None, grace_s: float, rate_min_bytes_per_s: float) -> float:
    """How long after its room was taken a request of ``size`` bytes, ``received`` of which came (None:
    not known before it is whole), may go before more of it comes: after ``grace_s`` its bytes must keep
    coming at ``rate_min_bytes_per_s`` (at ``t`` seconds, ``rate * (t - grace_s)`` of them), so a request
    whose bytes stop loses its room ``grace_s`` after they stopped, whatever its size, and one whose
    progress is not known is late after ``grace_s + size / rate``."""
    return grace_s + (size if received is None else received) / rate_min_bytes_per_s


def arrival_overdue(
    size: int, received: int | None, elapsed_s: float, grace_s: float, rate_min_bytes_per_s: float
) -> bool:
    """Whether a request comes too slowly to keep its room, ``elapsed_s`` after it was taken
    (``arrival_due_s``)."""
    if received is not None and received >= size:
        return False
    return elapsed_s > arrival_due_s(size, received, grace_s, rate_min_bytes_per_s)


def holder_kinds(super_users: Collection[str], login_required: bool) -> Callable[[str], str]:
    """The kind of a request-bytes holder (``User:NAME``, or ``address:HOST`` for a caller not logged
    in): a super user's, a frame's before login (on a listener that requires login), else ordinary."""
    names = frozenset(super_users)

    def kind_of(holder: str) -> str:
        if holder.startswith("address:"):
            return BEFORE_LOGIN if login_required else ORDINARY
        return SUPER_USER if holder.removeprefix("User:") in names else ORDINARY

    return kind_of


@dataclass(eq=False, slots=True)
class Arrival:
    """A request whose room is taken and whose bytes are still coming (``RequestBytes.arriving``): ``cut``
    closes it with its connection when another holder below its share needs the room (the door then gives
    its bytes back as for any request)."""

    holder: str
    size: int
    cut: Callable[[str], None]
    cutting: bool = False


@dataclass(eq=False, slots=True)
class _Waiter:
    size: int
    granted: asyncio.Future[None]


class RequestBytes:
    """One listener's budget of request bytes being received or queued: in all, per kind of holder (its
    reserves) and per holder."""

    def __init__(
        self,
        total_max: int,
        per_holder_max: int,
        super_user_reserve: int = 0,
        before_login_reserve: int = 0,
        kind_of: Callable[[str], str] = lambda holder: ORDINARY,
    ) -> None:
        if total_max < 1 or per_holder_max < 1:
            raise ValueError(f"request bytes: bounds must be >= 1 ({total_max}, {per_holder_max})")
        if super_user_reserve < 0 or before_login_reserve < 0:
            raise ValueError(
                f"request bytes: reserves must be >= 0 ({super_user_reserve}, {before_login_reserve})"
            )
        if super_user_reserve + before_login_reserve >= total_max:
            raise ValueError(
                f"request bytes: the reserves ({super_user_reserve} + {before_login_reserve}) leave ordinary "
                f"users nothing of {total_max}"
            )
        self.total_max = total_max
        self.per_holder_max = per_holder_max
        self.super_user_reserve = super_user_reserve
        self.before_login_reserve = before_login_reserve
        self.kind_of = kind_of
        self.held = 0
        self._by_holder: dict[str, int] = {}
        self._by_kind = dict.fromkeys((ORDINARY, SUPER_USER, BEFORE_LOGIN), 0)
        self.waited_total = 0  # requests that waited for room (a metric)
        self.cut_total = 0  # arriving requests cut for a holder below its share (a metric)
        # waiting requests by holder, oldest first; the holders in the order of their turns
        self._waiting: dict[str, deque[_Waiter]] = {}
        self._arrivals: dict[str, dict[Arrival, None]] = {}  # by holder, oldest first

    def holding(self, holder: str) -> int:
        return self._by_holder.get(holder, 0)

    def room(self, kind: str) -> int:
        """What holders of ``kind`` hold at most together."""
        if kind == BEFORE_LOGIN:
            return self.before_login_reserve
        if kind == SUPER_USER:
            return self.total_max - self.before_login_reserve
        return self.total_max - self.before_login_reserve - self.super_user_reserve

    def _pool(self, kind: str) -> int:
        """What counts against ``room(kind)`` now (super users' bytes count against ordinary users' room
        too: what they hold of it is not left to others)."""
        if kind == BEFORE_LOGIN:
            return self._by_kind[BEFORE_LOGIN]
        if kind == SUPER_USER:
            return self._by_kind[ORDINARY] + self._by_kind[SUPER_USER]
        return max(self._by_kind[ORDINARY], self._by_kind[ORDINARY] + self._by_kind[SUPER_USER]
                   - self.super_user_reserve)  # fmt: skip

    def fits(self, holder: str, size: int) -> bool:
        """Whether ``size`` bytes may be taken for ``holder`` now: within the room left of its kind's room
        and its share, or, for a request larger than that, when its room (its share) holds nothing else."""
        mine = self._by_holder.get(holder, 0)
        holder_ok = mine + size <= self.per_holder_max or mine == 0
        kind = self.kind_of(holder)
        pool = self._pool(kind)
        kind_ok = pool + size <= self.room(kind) or pool == 0
        return holder_ok and kind_ok

    def share(self, holder: str) -> int:
        """``holder``'s fair share of its kind's room: the room / the holders of its kind holding or
        waiting (``holder`` among them), at least 1."""
        kind = self.kind_of(holder)
        holders = {h for h in (*self._by_holder, *self._waiting) if self.kind_of(h) == kind} | {holder}
        return max(1, self.room(kind) // len(holders))

    def try_take(self, holder: str, size: int) -> bool:
        if size <= 0:
            return True  # an empty body holds nothing (its give_back gives nothing)
        if not self.fits(holder, size):
            return False
        self._add(holder, size)
        return True

    def _add(self, holder: str, size: int) -> None:
        self.held += size
        self._by_holder[holder] = self._by_holder.get(holder, 0) + size
        self._by_kind[self.kind_of(holder)] += size

    def give_back(self, holder: str, size: int) -> None:
        if size <= 0:
            return
        mine = self._by_holder.get(holder, 0)
        if mine < size or self.held < size:
            raise RuntimeError(f"request bytes: {holder} gives back {size}, holding {mine} of {self.held}")
        self.held -= size
        self._by_kind[self.kind_of(holder)] -= size
        if mine == size:
            del self._by_holder[holder]
        else:
            self._by_holder[holder] = mine - size
        self._grant()

    async def take(self, holder: str, size: int) -> None:
        """Take ``size`` bytes for ``holder``, waiting for room (the caller reads nothing meanwhile) in turn
        with the other holders' waiting requests."""
        if self.try_take(holder, size):
            return
        self.waited_total += 1
        waiter = _Waiter(size, asyncio.get_running_loop().create_future())
        self._waiting.setdefault(holder, deque()).append(waiter)
        self._make_room()
        try:
            await waiter.granted
        except BaseException:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.give_back(holder, size)  # granted as it was cancelled
            else:
                self._forget(holder, waiter)
            raise

    def _forget(self, holder: str, waiter: _Waiter) -> None:
        queue = self._waiting.get(holder)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[holder]
            self._grant()  # what it kept waiting behind it may fit now

    def _drop_cancelled(self) -> None:
        """A waiting request cancelled (its client gone, its handler's timeout) stays queued until its task
        runs again, when ``take`` forgets it. Until then it must be neither granted (its future is done:
        granting raised InvalidStateError in the give_back that tried) nor made room for."""
        for holder in [h for h, queue in self._waiting.items() if any(w.granted.done() for w in queue)]:
            queue = deque(w for w in self._waiting[holder] if not w.granted.done())
            if queue:
                self._waiting[holder] = queue  # keeps its turn
            else:
                del self._waiting[holder]

    def _grant(self) -> None:
        """Grant waiting requests that fit, a turn per holder in order, holders within their share first;
        then make room for one within its share that does not fit."""
        self._drop_cancelled()
        while True:
            chosen: tuple[str, _Waiter] | None = None
            for holder, queue in self._waiting.items():
                waiter = next((w for w in queue if self.fits(holder, w.size)), None)
                if waiter is None:
                    continue
                if self.holding(holder) + waiter.size <= self.share(holder):
                    chosen = holder, waiter
                    break
                if chosen is None:
                    chosen = holder, waiter
            if chosen is None:
                break
            holder, waiter = chosen
            queue = self._waiting.pop(holder)
            queue.remove(waiter)
            if queue:
                self._waiting[holder] = queue  # its next turn after every other holder's
            self._add(holder, waiter.size)
            waiter.granted.set_result(None)
        self._make_room()

    # -- requests still arriving, and the room they give back to holders below their share ------------

    def arriving(self, holder: str, size: int, cut: Callable[[str], None]) -> Arrival:
        """Say that ``size`` bytes taken for ``holder`` are a request still arriving: until ``arrived``,
        ``cut`` may be called (once) to close it for a holder below its share."""
        arrival = Arrival(holder, size, cut)
        self._arrivals.setdefault(holder, {})[arrival] = None
        self._make_room()
        return arrival

    def arrived(self, arrival: Arrival) -> None:
        """The request is whole (or closed): it is no longer cut for room."""
        of_holder = self._arrivals.get(arrival.holder)
        if of_holder is not None:
            of_holder.pop(arrival, None)
            if not of_holder:
                del self._arrivals[arrival.holder]

    def _cutting(self, holder: str) -> int:
        return sum(a.size for a in self._arrivals.get(holder, ()) if a.cutting)

    def _make_room(self) -> None:
        """For each ordinary or before-login holder waiting within its share whose request does not fit,
        cut the newest arriving requests of the holders holding most above their share until what they
        give back would let it in."""
        self._drop_cancelled()
        for holder, queue in list(self._waiting.items()):
            kind = self.kind_of(holder)
            if kind == SUPER_USER:
                continue  # super users have their reserve; their larger requests wait
            size = queue[0].size
            share = self.share(holder)
            if self.holding(holder) + size > share or self.holding(holder) + size > self.per_holder_max:
                continue  # above its share: it waits for room, as it would anyway
            same_kind = [h for h in self._arrivals if self.kind_of(h) == kind]
            leaving = sum(self._cutting(h) for h in same_kind)
            needed = self._pool(kind) + size - self.room(kind) - leaving
            while needed > 0:
                over = [
                    (self.holding(h) - self._cutting(h), h) for h in same_kind
                    if any(not a.cutting for a in self._arrivals.get(h, ()))
                ]  # fmt: skip
                over = [(kept, h) for kept, h in over if kept > share]
                if not over:
                    break
                _, most = max(over)
                arrival = next(a for a in reversed(self._arrivals[most]) if not a.cutting)
                arrival.cutting = True
                needed -= arrival.size
                self.cut_total += 1
                arrival.cut(
                    f"{most} holds {self.holding(most)} request bytes (a fair share is {share}), and "
                    f"{holder}, below its share, waits for room"
                )
