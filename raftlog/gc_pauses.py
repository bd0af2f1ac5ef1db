"""How long this process's garbage collections stop it: every collection's duration, any generation,
observed from ``gc.callbacks`` (CPython calls them before and after each collection, on the thread that
collects, holding the GIL: the whole process waits meanwhile). A node watches from its start; the HTTP
edge exports the histogram as ``raftlog_gc_pause_seconds``."""

from __future__ import annotations

import gc
import time
from typing import Any

from raftlog.histogram import Histogram

PAUSE_SECONDS = Histogram()
_started: list[float] = []  # the running collection's start; collections do not nest


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        PAUSE_SECONDS.observe(time.perf_counter() - _started.pop())


def watch() -> None:
    """Observe every later collection into ``PAUSE_SECONDS`` (idempotent)."""
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)
