"""Start the kernel writing a file range to disk without waiting for it (Linux ``sync_file_range``).

A partition log applied from Raft is not fsynced per append (ADR 0006), so without help its dirty pages
pile up until the segment's roll fsyncs 128 MiB at once, stalling the thread that rolls it (the node's
consensus driver) for 100 ms or more. Kicking off writeback of every few MiB as they are written keeps
that final fsync short. This is a hint for smoothness, not durability: nothing here waits or promises
that the data reached the disk. Elsewhere than Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable

log = logging.getLogger("raftlog.storage")

SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start writeback of dirty pages in the range, do not wait


def _load() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError) as exc:
        log.warning("sync_file_range unavailable (%s): segment rolls will fsync all their data at once", exc)
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load()
AVAILABLE = _sync_file_range is not None


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Ask the kernel to begin writing ``length`` bytes at ``offset`` of ``fd``; True if it was asked.
    A failure is logged and otherwise ignored (the next fsync still writes everything)."""
    if _sync_file_range is None or length <= 0:
        return False
    if _sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE) != 0:
        error = ctypes.get_errno()
        log.warning("sync_file_range on fd %d failed: %s", fd, os.strerror(error))
        return False
    return True
