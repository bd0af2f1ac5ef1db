"""Client quotas at the Kafka door: what a request counts against its user's and client id's quotas and
how the door answers one past them, as Kafka's ``KafkaApis`` does (KIP-219). The rule (which quota, the
rate, the throttle time) is ``partitions.security.quotas``'s, shared with the HTTP door.

A Produce counts its request's bytes against ``producer_byte_rate``; a Fetch and a ShareFetch (as Kafka
meters it, under the fetch quota) their answer's record bytes against ``consumer_byte_rate`` (their
``max_bytes`` held to what the quota allows in its window, as Kafka's ``getMaxValueInQuotaWindow``, and a
Fetch's partitions read no more than that, so a large fetch is never refused for good); every request
but ApiVersions and SASL's counts its handler's time against ``request_percentage`` (a Fetch's long poll
not counted: waiting is not work). The throttle time is the larger of the two; past zero it is the answer's
``throttle_time_ms``, and the connection is muted that long (``server.py`` reads nothing more from it),
the answer sent at once, for the client to wait on its side. A Produce before v6 and a Fetch before v8
(KIP-219's versions: their clients do not wait on their side) get the answer that much later instead. A
Fetch that comes while its client is already past the quota (another connection of its meter used it
up) is answered without records and its bytes are taken back from the meter, as Kafka's; one that comes
within it is answered whole, and its throttle time keeps the next one back until the rate is at the
quota again: so one answer larger than the quota's window (a batch above ten times the quota) is still
served, and the rate over time stays at the quota (Kafka empties every throttled answer, and a consumer
whose first batch is larger than the window never gets it). A ShareFetch is never emptied: its records
are acquired for the member, and an emptied answer would leave them locked for no one.

Pure, but for the answer's delay.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
from typing import Any

from partitions.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
)

PRODUCE, FETCH, SHARE_FETCH = 0, 1, 78
FETCHES = frozenset({FETCH, SHARE_FETCH})  # their answers' records count against consumer_byte_rate
CLIENT_THROTTLES_FROM = {PRODUCE: 6, FETCH: 8}  # KIP-219: below, the broker holds the answer back instead
EXEMPT = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate (Kafka's exempt APIs)
_WAITED_S: contextvars.ContextVar[float] = contextvars.ContextVar("waited_s", default=0.0)


def waited(seconds: float) -> None:
    """A handler's time spent waiting (a Fetch's long poll), not counted as its work."""
    _WAITED_S.set(_WAITED_S.get() + seconds)


def work_s(elapsed_s: float) -> float:
    """Of a handler's ``elapsed_s`` (awaited in this context), the time it did not spend waiting."""
    return max(0.0, elapsed_s - _WAITED_S.get())


def fetch_max_bytes(quotas: ClientQuotas, user: str | None, client_id: str, max_bytes: int) -> int:
    """A Fetch's ``max_bytes`` held to what its consumer quota allows in one window."""
    window_max = quotas.window_max(CONSUMER_BYTE_RATE, user, client_id)
    return max_bytes if window_max is None else max(1, min(max_bytes, int(window_max)))


def record_bytes(response: Any) -> int:
    """The record bytes of a Fetch or ShareFetch answer."""
    return sum(
        len(partition.records or b"") for topic in response.responses for partition in topic.partitions
    )


def throttle(
    quotas: ClientQuotas,
    api_key: int,
    user: str | None,
    client_id: str,
    request_bytes: int,
    response: Any,
    handler_s: float,
    now_ms: int,
) -> tuple[Any, int]:
    """Record a served request; its answer (``throttle_time_ms`` set; a throttled Fetch's emptied) and
    the throttle time (ms; 0: none)."""
    if api_key in EXEMPT:
        return response, 0
    request_ms = quotas.record(REQUEST_PERCENTAGE, user, client_id, handler_s * 100.0, now_ms)
    bandwidth_ms = 0
    if api_key == PRODUCE:
        bandwidth_ms = quotas.record(PRODUCER_BYTE_RATE, user, client_id, request_bytes, now_ms)
    elif api_key in FETCHES and response is not None:
        fetched = record_bytes(response)
        past = quotas.over(CONSUMER_BYTE_RATE, user, client_id, now_ms) > 0  # before this answer
        bandwidth_ms = quotas.record(CONSUMER_BYTE_RATE, user, client_id, fetched, now_ms)
        if api_key == FETCH and (past or request_ms > 0) and max(bandwidth_ms, request_ms) > 0:
            quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, fetched, now_ms)
            response = dataclasses.replace(response, responses=())
    throttle_ms = max(bandwidth_ms, request_ms)
    if throttle_ms > 0 and response is not None and hasattr(response, "throttle_time"):
        response = dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return response, throttle_ms


def client_waits(api_key: int, version: int) -> bool:
    """Whether a client of this version waits out a throttle on its side (else the answer is held)."""
    return version >= CLIENT_THROTTLES_FROM.get(api_key, 0)
