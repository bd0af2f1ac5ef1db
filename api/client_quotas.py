"""Client quotas at the HTTP door: the rule is ``partitions.security.quotas``'s, the same the Kafka door
applies, on the same meters of the node. A route that declares a byte quota (``Operation.quota``: produce
``producer_byte_rate``; fetch, a consumer instance's records and a share member's acquire
``consumer_byte_rate``) counts its request's body as read (a chunked one announces no length) or its
answer's bytes (a streamed one's as written), and every route but a long poll its handler's time against
``request_percentage``. A caller whose rate is past a
quota is refused before anything is done: 429 with Retry-After, the seconds until its rate is back
within the quota (``QuotaExceeded``), where the Kafka door answers and throttles. The user is the
caller's (``ANONYMOUS`` without authentication); the HTTP door has no client id (the empty one: a
``<default>`` client quota applies to it)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from api import state
from partitions.errors import QuotaExceeded
from partitions.security.quotas import CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, ClientQuotas, describe

CLIENT_ID = ""


def _user(request: web.Request) -> str | None:
    caller: state.Caller | None = request.get(state.CALLER)
    if caller is None or not caller.principal.startswith("User:"):
        return None
    return str(caller.principal.removeprefix("User:"))


async def served(
    request: web.Request,
    quota: str | None,
    timed: bool,
    serve: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """``timed``: the handler's time counts against ``request_percentage`` (not a long poll's: waiting is
    not work, as at the Kafka door)."""
    quotas: ClientQuotas = state.node(request).metadata.client_quotas()
    if not quotas.active():
        return await serve(request)
    user = _user(request)
    now_ms = int(time.monotonic() * 1000)
    for kind in (REQUEST_PERCENTAGE, quota):
        if kind is None:
            continue
        wait_ms = quotas.over(kind, user, CLIENT_ID, now_ms)
        if wait_ms > 0:
            quotas.throttled[kind] += 1
            applied = quotas.applied(kind, user, CLIENT_ID)
            entity = "?" if applied is None else describe(applied.entity)
            raise QuotaExceeded(kind, entity, wait_ms)
    started = time.perf_counter()
    response = await serve(request)
    now_ms = int(time.monotonic() * 1000)
    if timed:
        quotas.record(REQUEST_PERCENTAGE, user, CLIENT_ID, (time.perf_counter() - started) * 100.0, now_ms)
    if quota is not None:
        size = _answer_bytes(response) if quota == CONSUMER_BYTE_RATE else _body_bytes(request)
        quotas.record(quota, user, CLIENT_ID, size, now_ms)
    return response


def _body_bytes(request: web.Request) -> int:
    """The bytes of the request's body as they were read: a chunked body announces no length, and one
    that announced a length counts what came."""
    return max(request.content.total_bytes, request.content_length or 0)


def _answer_bytes(response: web.StreamResponse) -> int:
    """The bytes of the answer's body: its length, or for an answer streamed as it was made (no length
    known before), what was written of it."""
    if response.content_length is not None:
        return response.content_length
    return response.body_length
