"""Reading a request's body: once per request, copied once, its bytes taken first from the listener's
budget of request bytes (``partitions.security.holds.RequestBytes``: the node's bound, the caller's share
of it, the super users' reserve), and given back once the request is answered (``give_back``). While a body
waits for room nothing more of it is read (aiohttp stops reading the socket once its small buffer is full).
Once its room is taken its bytes must keep coming (``holds.arrival_due_s``: after a grace, at a minimum
rate), and while they come the body may be cut, with its connection, for a caller below its fair share that
waits for room (``RequestBytes.arriving``): a body announced and never sent holds its room for the grace at
most, and never against a caller below its share.

``request.read()`` grows a buffer chunk by chunk and then copies it again, which for a ~1 MiB record
batch is most of what the request costs here; the chunks are joined once instead. The body is kept on
the request, so a second read of it returns the same bytes without reading or copying again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from api.errors import Overloaded, RequestTimeout, RequestTooLarge
from partitions.security.holds import RequestBytes, arrival_due_s

# A body this small comes in the client's one write (a TCP window by default): it is not paced by the
# grace and rate below, only by the body timeout. Late, it was the node that did not read it (its loop
# held, a loaded machine), not a client dribbling it; and what it holds of the budget is small, its holder
# bounded by its share all the same.
PACED_BODY_BYTES = 64 * 1024
_BODY = web.RequestKey("raftlog_body", bytes)
_HELD = web.RequestKey("raftlog_body_bytes_held", tuple)  # (budget, holder, bytes) until answered
_CUT = web.RequestKey("raftlog_body_cut", bool)  # its body did not come whole in time
_SHED = web.RequestKey("raftlog_body_shed", str)  # why its body was cut for a caller below its share


async def read_body(
    request: web.Request,
    limit: int,
    timeout_s: float,
    budget: RequestBytes | None = None,
    holder: str = "",
    grace_s: float | None = None,
    rate_min_bytes_per_s: float = 1.0,
    shed: Callable[[str], None] | None = None,
) -> bytes:
    """The whole body; ``RequestTooLarge`` (413) beyond ``limit`` bytes, announced or sent;
    ``RequestTimeout`` (408) when it is not whole within ``timeout_s``, or, with ``grace_s`` and more than
    ``PACED_BODY_BYTES`` announced, when its bytes do not keep coming at ``rate_min_bytes_per_s`` once
    ``grace_s`` passed since its room was taken (a client dribbling it, or sending none);
    ``Overloaded`` (503) when ``budget`` had no room for it (its announced size, else ``limit``) for
    ``holder`` within that time, or when it was cut, with its connection, for a caller below its share
    (``shed`` is told why)."""
    if _BODY in request:
        return request[_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise RequestTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + timeout_s
    wanted = limit if request.content_length is None else request.content_length
    arrival = None
    if budget is not None:
        try:
            async with asyncio.timeout_at(deadline_s):
                await budget.take(holder, wanted)
        except TimeoutError:
            raise Overloaded("request-bytes", budget.total_max) from None
        request[_HELD] = (budget, holder, wanted)
        arrival = budget.arriving(holder, wanted, lambda why: _cut(request, why, shed))
    started_s = loop.time()
    try:
        chunks_in = request.content.iter_any()
        while True:
            due_s = deadline_s
            if grace_s is not None and wanted > PACED_BODY_BYTES:
                due_s = min(due_s, started_s + arrival_due_s(wanted, size, grace_s, rate_min_bytes_per_s))
            try:
                async with asyncio.timeout_at(due_s):
                    chunk = await anext(chunks_in)
            except StopAsyncIteration:
                break
            size += len(chunk)
            if size > limit:
                raise RequestTooLarge(limit)
            chunks.append(chunk)
    except TimeoutError:
        request[_CUT] = True
        # how long it had: the body timeout, or less when its bytes stopped coming (the grace)
        raise RequestTimeout(round(min(timeout_s, loop.time() - (deadline_s - timeout_s)), 1)) from None
    except Exception:
        if _SHED in request and budget is not None:
            raise Overloaded("request-bytes", budget.total_max) from None  # its connection is gone
        raise
    finally:
        if arrival is not None and budget is not None:
            budget.arrived(arrival)
    if _SHED in request and budget is not None:
        raise Overloaded("request-bytes", budget.total_max)
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    request[_BODY] = body
    return body


def _cut(request: web.Request, why: str, shed: Callable[[str], None] | None) -> None:
    """Close a request whose body is still coming, for a caller below its share: its reading ends."""
    request[_SHED] = why
    if shed is not None:
        shed(why)
    transport = request.transport
    if transport is not None:
        transport.abort()


def give_back(request: web.Request) -> None:
    """The request's body bytes back to the budget they were taken from, once it is answered."""
    held = request.pop(_HELD, None)
    if held is not None:
        budget, holder, size = held
        budget.give_back(holder, size)


async def end_if_cut(request: web.Request, response: web.StreamResponse) -> None:
    """A request whose body did not come whole in time is answered now and its connection closed once
    the answer is out. Else aiohttp would go on reading what the client still dribbles for up to 10 s
    (its lingering close) before closing: time a slow client holds a connection past its bound."""
    if not request.get(_CUT, False):
        return
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the transport closes once the answer's bytes are written
