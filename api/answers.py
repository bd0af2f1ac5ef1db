"""Large answers of the HTTP door (a fetch, a consumer instance's records, a share acquire): their bytes held
in the listener's budget of request bytes, and written to the client as it reads them.

An answer that may be large takes the most it may hold (its ``max_bytes``) from the listener's
``RequestBytes`` for its caller before anything is read (``answer_room``: the request's own body bytes are
given back first, so that it never waits for room it holds itself; 503/50307 when no room came within the
body timeout), holds what it read once read (``AnswerHold.settle``), and gives it back once written out
(``streamed``). Its body is written a slice at a time, each once the transport took the last (aiohttp's
writer waits while the transport holds more than its high-water mark), records rendered a batch at a
time: a client reading slowly holds its answer's bytes and a slice, never a rendered copy of them all. An
answer not read whole by ``deadline_s`` has its connection closed (its bytes given back).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from aiohttp import web

from api import state
from api.bodies import give_back
from api.errors import Overloaded
from partitions.security.acls import client_host
from partitions.security.answer_holds import AnswerHold
from raftlog_contract import LEADER_HEADER

SLICE_BYTES = 256 * 1024  # written at a time; also what a rendering step decodes of the records at most
RATE_MIN_BYTES_PER_S = 1024 * 1024  # a client must read an answer at least this fast (after the timeout)


def deadline_s(body_timeout_s: float, size: int) -> float:
    """How long a client may take to read an answer of ``size`` bytes: the body timeout, and a second per
    MiB (a request body's bound, 16 MiB in 30 s, is about 4.4 Mbit/s; an answer's is its slowest link)."""
    return body_timeout_s + size / RATE_MIN_BYTES_PER_S


async def answer_room(request: web.Request, max_bytes: int) -> tuple[AnswerHold, int]:
    """Room in the listener's budget for the caller's answer (its holder as its body's), taken before the
    answer is read, and what the answer may read: ``max_bytes``, at most the caller's share of the budget
    (the answer still holds at least a batch). Overloaded (503) when no room came within the body timeout."""
    app_state = state.state(request)
    give_back(request)  # the request's own body bytes first: it never waits for room it holds itself
    caller = request.get(state.CALLER)
    holder = caller.principal if caller is not None else f"address:{client_host(request.remote)}"
    budget = app_state.request_bytes
    most = max(1, min(max_bytes, budget.per_holder_max))
    hold = AnswerHold(budget, holder)
    try:
        async with asyncio.timeout(app_state.settings.body_timeout_s):
            await hold.take(most)
    except TimeoutError:
        raise Overloaded("request-bytes", budget.total_max) from None
    return hold, most


async def streamed(
    request: web.Request,
    hold: AnswerHold,
    size: int,
    parts: AsyncIterator[bytes | memoryview],
    headers: dict[str, str],
    content_length: int | None = None,
) -> web.StreamResponse:
    """The answer ``parts`` make, written a slice at a time as the client reads it, then ``hold`` given
    back; a client that does not read it all within its deadline (``size``: what the answer holds) has its
    connection closed. Written here, not by aiohttp after the middlewares: the answer's headers are set
    before (who served it, as ``state.leader_header`` says for every answer), and the
    quota's meter reads what was written (``api.client_quotas``)."""
    response = web.StreamResponse(headers=headers)
    leader = state.leader_header(request)
    if leader is not None:
        response.headers[LEADER_HEADER] = leader
    if content_length is not None:
        response.content_length = content_length
    timeout_s = deadline_s(state.state(request).settings.body_timeout_s, size)
    try:
        async with asyncio.timeout(timeout_s):
            await response.prepare(request)
            async for part in parts:
                view = memoryview(part)
                for start in range(0, len(view), SLICE_BYTES):
                    await response.write(view[start : start + SLICE_BYTES])  # waits while the client lags
            await response.write_eof()
    except TimeoutError:
        if request.transport is not None:
            request.transport.abort()  # not read in time: what it holds is dropped with the connection
    except ConnectionError:
        pass  # the client went
    finally:
        hold.give_back()
    return response


async def of_bytes(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def json_array(
    rows: Iterator[list[bytes]], large: bool, before: str = "[", after: str = "]"
) -> AsyncIterator[bytes]:
    """``before``, the rows ``rows`` yields (a batch's at a time, as the parts of their JSON text, the
    rows separated by ", " within, ``api.rendering``; none for a batch without any) joined as a JSON
    array's items, and ``after``: rendered and joined a slice (``SLICE_BYTES`` of text) at a time, on a
    worker thread when ``large``, so that no more than a slice's records are decoded at once."""
    first = True

    def step() -> tuple[list[bytes], bool]:  # the next slice's parts, and whether any may be left
        nonlocal first
        pieces: list[bytes] = []
        size = 0
        for parts in rows:  # goes on where the last step stopped
            if not parts:
                continue
            if not first:
                pieces.append(b", ")
            first = False
            pieces += parts
            size += sum(map(len, parts))
            if size >= SLICE_BYTES:
                return pieces, True
        return pieces, False

    yield before.encode()
    more = True
    while more:
        pieces, more = await asyncio.to_thread(step) if large else step()
        if pieces:
            yield b"".join(pieces)
    yield after.encode()
