"""A ``recovery.FetchBatches`` over the peers' HTTP API: ``GET /replication/partitions/{t}/{p}/batches``
with the cluster credential, on the node's one aiohttp session. (A typed peer client may replace it: the
recovery needs only the callable.)"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

import aiohttp

from partitions.recovery import FetchBatches, PeerBatches, PeerFetchFailed

FETCH_TIMEOUT_S = 10.0  # one chunk; a peer slower than this is skipped for the next


def http_fetch_batches(
    session: Callable[[], aiohttp.ClientSession],
    address: Callable[[str], str | None],
    credential: str,
    topic: str,
    partition: int,
    timeout_s: float = FETCH_TIMEOUT_S,
) -> FetchBatches:
    """``session()``: the node's session; ``address(node_id)``: a peer's HTTP base URL (None: unknown);
    ``credential``: what the peers' internal endpoints require (``operations.internal_credential``)."""
    path = f"/replication/partitions/{urllib.parse.quote(topic, safe='')}/{partition}/batches"
    headers = {"Authorization": f"Bearer {credential}"}
    timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def fetch(peer: str, offset: int, max_bytes: int) -> PeerBatches:
        base = address(peer)
        if base is None:
            raise PeerFetchFailed(peer, "no known HTTP address")
        params = {"offset": str(offset), "max_bytes": str(max_bytes)}
        try:
            async with session().get(base + path, params=params, headers=headers, timeout=timeout) as answer:
                if answer.status == 200:
                    return PeerBatches(await answer.read())
                body = await answer.json(content_type=None) if answer.status == 416 else None
                start = body.get("log_start_offset") if isinstance(body, dict) else None
                if isinstance(start, int) and start > offset:  # its log starts after our end
                    return PeerBatches(log_start_offset=start)
                raise PeerFetchFailed(peer, f"HTTP {answer.status} at offset {offset}")
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:  # ValueError: a body not JSON
            raise PeerFetchFailed(peer, f"{type(error).__name__}: {error}") from error

    return fetch
