"""Reading a request's body: once per request, copied once.

``request.read()`` grows a buffer chunk by chunk and then copies it again, which for a ~1 MiB record
batch is most of what the request costs here; the chunks are joined once instead. The body is kept on
the request, so a second read of it returns the same bytes without reading or copying again.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from api.errors import RequestTimeout, RequestTooLarge

_BODY = web.RequestKey("raftlog_body", bytes)


async def read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    """The whole body; ``RequestTooLarge`` (413) beyond ``limit`` bytes, announced or sent;
    ``RequestTimeout`` (408) when it is not whole within ``timeout_s`` (a client dribbling it)."""
    if _BODY in request:
        return request[_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise RequestTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise RequestTooLarge(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeout(timeout_s) from None
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    request[_BODY] = body
    return body
