"""The event loop the bench's load runs on, the same for every system and in every process of it."""

from __future__ import annotations

import asyncio


def install_event_loop() -> str:
    """uvloop for the load generator when installed (the ``bench`` extra), the same for every system."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"
