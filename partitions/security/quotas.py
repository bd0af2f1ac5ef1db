"""Client quotas enforced: one rule for every door (Kafka's ``ClientQuotaManager`` with its default quota
callback, KIP-13/55/124/219). Each node meters its own traffic, as each Kafka broker does.

Which quota applies (``resolve``): for a request of ``user`` (``ANONYMOUS`` when not logged in) and
``client_id``, the first entity of Kafka's order that has a quota of that key: user and client id, user and
the default client, the user; the default user and client id, the default user and default client, the
default user; the client id; the default client. Whose traffic is metered together: the entity's named
components (a quota of ``user=alice`` meters all of alice's clients together; a default entity meters each
user or client id by itself).

How (``ClientQuotas.record``): a rate over ``SAMPLES`` windows of ``WINDOW_MS`` (Kafka's
``quota.window.num`` 11, ``quota.window.size.seconds`` 1), measured as Kafka's ``Rate`` (at least ten whole
windows long). A value is recorded, then the rate compared with the quota: past it, the throttle time is
how long the client must stay quiet for the rate to come back to the quota, ``(rate - quota) / quota *
window`` (Kafka's ``QuotaUtils.throttleTime``; a request-percentage throttle at most ``SAMPLES * WINDOW_MS``).
The Kafka door answers with it in ``throttle_time_ms`` and mutes the connection that long (a throttled
Fetch's answer is empty and its bytes unrecorded, as Kafka's); the HTTP door refuses a request while the
user's rate is past its quota (``over``: 429 with Retry-After) and records what it serves.

Keys: ``producer_byte_rate`` (bytes of produce requests per second), ``consumer_byte_rate`` (bytes of fetch
answers per second), ``request_percentage`` (the time a node spends on a client's requests, in percent of
one second per second, Kafka's request-thread time: here the time a request's handler takes, a Fetch's
long poll not counted).

Connections (KIP-612): an ``ip`` entity (an address, or the default: every address without one of its
own) has one key, ``connection_creation_rate``, new connections per second from that address to this
node, over both doors' listeners. ``ClientQuotas.connection`` records each new connection and answers, past
the quota, how long it must be held before it is closed unserved (at most a window, Kafka's
``ConnectionQuotas``: its acceptor closes such a connection once its throttle time passed).

Pure: no sockets, loop or clock (``now_ms`` comes in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID)  # in the order an entity's components are kept
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
KEYS: Mapping[str, bool] = {  # key -> integral (Kafka's LONG: a byte rate is a whole number)
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
}
CONNECTION_CREATION_RATE = "connection_creation_rate"
IP_KEYS: Mapping[str, bool] = {CONNECTION_CREATION_RATE: True}  # an ip entity's keys (Kafka's INT)

Entity = tuple[tuple[str, str | None], ...]
"""(entity type, name or None for the default), one per type, in ``ENTITY_TYPES`` order."""


def describe(value: Entity) -> str:
    return ",".join(f"{kind}={'<default>' if name is None else name}" for kind, name in value)


SAMPLES = 11  # Kafka's quota.window.num
WINDOW_MS = 1000  # Kafka's quota.window.size.seconds
ANONYMOUS = "ANONYMOUS"  # the user of a connection that did not log in (Kafka's User:ANONYMOUS)
METERS_MAX = 100_000  # meters a node keeps; past it, those idle for a whole window are dropped
KINDS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)


class Rate:
    """Kafka's ``Rate`` over ``SampledStat``: ``SAMPLES`` samples, each ``WINDOW_MS`` long from its first
    value; samples older than all of them together are reset; the rate is their sum over at least
    ``SAMPLES - 1`` whole windows."""

    __slots__ = ("_current", "_samples")

    def __init__(self) -> None:
        self._samples: list[list[float]] = []  # [window start ms, total]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._samples:
            self._samples.append([now_ms, 0.0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= WINDOW_MS:
            self._current = (self._current + 1) % SAMPLES
            if self._current == len(self._samples):
                self._samples.append([now_ms, 0.0])
            else:
                self._samples[self._current] = [now_ms, 0.0]
            sample = self._samples[self._current]
        sample[1] += value

    def rate(self, now_ms: int) -> float:
        """Per second, as measured now."""
        self._purge(now_ms)
        total = sum(sample[1] for sample in self._samples)
        return total / (self.window_ms(now_ms) / 1000.0)

    def window_ms(self, now_ms: int) -> float:
        """The time the rate is measured over now (Kafka's ``Rate.windowSize``)."""
        oldest = min((sample[0] for sample in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        whole = int(elapsed // WINDOW_MS)
        if whole < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - whole) * WINDOW_MS
        return float(elapsed)

    def idle(self, now_ms: int) -> bool:
        return all(now_ms - sample[0] >= SAMPLES * WINDOW_MS for sample in self._samples)

    def _purge(self, now_ms: int) -> None:
        for sample in self._samples:
            if now_ms - sample[0] >= SAMPLES * WINDOW_MS:
                sample[0], sample[1] = now_ms, 0.0


@dataclass(frozen=True, slots=True)
class Applied:
    """The quota a request meets: its bound, the entity it was set on, and whose traffic is metered
    together (user, client id; "" where the entity leaves one out)."""

    bound: float
    entity: Entity
    meter: tuple[str, str]


def resolve(
    quotas: Mapping[Entity, Mapping[str, float]], kind: str, user: str, client_id: str
) -> Applied | None:
    """The quota of ``kind`` a request of ``user`` and ``client_id`` meets (Kafka's order), or None."""
    for entity in (
        ((USER, user), (CLIENT_ID, client_id)),
        ((USER, user), (CLIENT_ID, None)),
        ((USER, user),),
        ((USER, None), (CLIENT_ID, client_id)),
        ((USER, None), (CLIENT_ID, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    ):
        bound = quotas.get(entity, {}).get(kind)
        if bound is not None:
            kinds = dict(entity)
            meter = (user if USER in kinds else "", client_id if CLIENT_ID in kinds else "")
            return Applied(bound, entity, meter)
    return None


def throttle_ms(meter: Rate, bound: float, now_ms: int, cap_ms: int | None = None) -> int:
    """How long the metered client must stay quiet for its rate to come back to ``bound`` (Kafka's
    ``QuotaUtils.throttleTime``), at most ``cap_ms``; 0 when within it."""
    rate = meter.rate(now_ms)
    if rate <= bound:
        return 0
    throttle = round((rate - bound) / bound * meter.window_ms(now_ms))
    return max(1, throttle if cap_ms is None else min(throttle, cap_ms))


def connection_quota(quotas: Mapping[Entity, Mapping[str, float]], address: str) -> float | None:
    """The connection creation rate an address may open connections at: its own ``ip`` entity's, else the
    default ``ip`` entity's, else none (Kafka's ``ConnectionQuotas.connectionRateForIp``)."""
    for entity in (((IP, address),), ((IP, None),)):
        bound = quotas.get(entity, {}).get(CONNECTION_CREATION_RATE)
        if bound is not None:
            return bound
    return None


class ClientQuotas:
    """A node's meters, on the quotas its controller metadata has now (``quotas``, read at each call)."""

    def __init__(self, quotas: Callable[[], Mapping[Entity, Mapping[str, float]]]) -> None:
        self._quotas = quotas
        self._meters: dict[tuple[str, tuple[str, str]], Rate] = {}
        self._connection_meters: dict[str, Rate] = {}  # per client address with a connection quota
        self._resolved: dict[tuple[str, str, str], Applied | None] = {}
        self._resolved_for: object = None
        self.throttled = dict.fromkeys(KINDS, 0)  # requests throttled (Kafka door) or refused (HTTP), by kind
        self.throttled_connections = 0  # new connections closed unserved past their address's quota

    def connection(self, address: str, now_ms: int) -> int:
        """A new connection from ``address``, recorded: how long (ms, at most ``WINDOW_MS``) to hold it
        before it is closed unserved, past its address's ``connection_creation_rate`` (0: serve it; a
        throttled one counts for nothing, as Kafka takes it back)."""
        quotas = self._quotas()
        bound = connection_quota(quotas, address) if quotas else None
        if bound is None:
            return 0
        meter = self._connection_meters.get(address)
        if meter is None:
            if len(self._connection_meters) >= METERS_MAX:
                meters = self._connection_meters.items()
                self._connection_meters = {a: m for a, m in meters if not m.idle(now_ms)}
            meter = self._connection_meters[address] = Rate()
        meter.record(1.0, now_ms)
        held = throttle_ms(meter, bound, now_ms, WINDOW_MS)
        if held:
            meter.record(-1.0, now_ms)
            self.throttled_connections += 1
        return held

    def active(self) -> bool:
        """Whether any quota is set (else nothing is metered)."""
        return bool(self._quotas())

    def entities(self) -> Mapping[Entity, Mapping[str, float]]:
        return self._quotas()

    def applied(self, kind: str, user: str | None, client_id: str) -> Applied | None:
        quotas = self._quotas()
        if not quotas:
            return None
        if quotas is not self._resolved_for:  # a new metadata: resolved again
            self._resolved, self._resolved_for = {}, quotas
        key = (kind, user or ANONYMOUS, client_id)
        if key not in self._resolved:
            if len(self._resolved) >= METERS_MAX:
                self._resolved.clear()
            self._resolved[key] = resolve(quotas, kind, user or ANONYMOUS, client_id)
        return self._resolved[key]

    def record(self, kind: str, user: str | None, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` and answer the throttle time (ms; 0: within the quota or none applies)."""
        applied = self.applied(kind, user, client_id)
        if applied is None:
            return 0
        meter = self._meter(kind, applied, now_ms)
        meter.record(value, now_ms)
        throttle_ms = self._throttle_ms(meter, applied, kind, now_ms)
        if throttle_ms:
            self.throttled[kind] += 1
        return throttle_ms

    def unrecord(self, kind: str, user: str | None, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled Fetch's answer, sent empty)."""
        applied = self.applied(kind, user, client_id)
        if applied is not None:
            self._meter(kind, applied, now_ms).record(-value, now_ms)

    def over(self, kind: str, user: str | None, client_id: str, now_ms: int) -> int:
        """How long (ms) the request's rate stays past its quota with nothing more recorded (0: not past
        it): the HTTP door's refusal before it serves a request."""
        applied = self.applied(kind, user, client_id)
        if applied is None:
            return 0
        meter = self._meters.get((kind, applied.meter))
        return 0 if meter is None else self._throttle_ms(meter, applied, kind, now_ms)

    def window_max(self, kind: str, user: str | None, client_id: str) -> float | None:
        """The most that can be recorded at once without a certain throttle (Kafka's
        ``getMaxValueInQuotaWindow``: a fetch's answer is held to it), None without a quota."""
        applied = self.applied(kind, user, client_id)
        return None if applied is None else applied.bound * (SAMPLES - 1) * WINDOW_MS / 1000

    def describe(self, kind: str, user: str | None, client_id: str) -> str:
        applied = self.applied(kind, user, client_id)
        return "no quota" if applied is None else describe(applied.entity)

    def meters(self) -> int:
        return len(self._meters)

    def _meter(self, kind: str, applied: Applied, now_ms: int) -> Rate:
        key = (kind, applied.meter)
        meter = self._meters.get(key)
        if meter is None:
            if len(self._meters) >= METERS_MAX:
                self._meters = {k: m for k, m in self._meters.items() if not m.idle(now_ms)}
            meter = self._meters[key] = Rate()
        return meter

    @staticmethod
    def _throttle_ms(meter: Rate, applied: Applied, kind: str, now_ms: int) -> int:
        cap = SAMPLES * WINDOW_MS if kind == REQUEST_PERCENTAGE else None
        return throttle_ms(meter, applied.bound, now_ms, cap)
