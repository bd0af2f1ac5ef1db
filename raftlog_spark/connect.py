"""The one way the format's driver and tasks make a client of the servers: as the options' user, trusting
their CA, within their request timeout."""

from __future__ import annotations

from raftlog_client.blocking import BlockingClient
from raftlog_spark.options import Reach, ReadOptions, WriteOptions


def connect(options: ReadOptions | WriteOptions | Reach, first: int = 0) -> BlockingClient:
    """``first``: the server tried first (modulo their number), so tasks spread over the nodes."""
    access = options.access
    return BlockingClient(
        options.servers,
        options.request_timeout_ms,
        first,
        ca=access.ca,
        user=access.user,
        user_token=access.user_token,
    )
