"""``Periodic``: the daemon thread behind the storage's background work (the ``LogManager``'s flushes,
retention and handle sweeps; the ``Cleaner``'s compaction passes)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Periodic:
    """Calls ``work()`` on a thread of its own every ``interval_s()`` seconds (asked again each time),
    from ``start`` until ``close``. ``stop`` is set from ``close`` on: work that waits looks at it."""

    def __init__(
        self,
        name: str,
        interval_s: Callable[[], float],
        work: Callable[[], object],
        stop: threading.Event | None = None,
    ) -> None:
        self.name = name
        self._interval_s = interval_s
        self._work = work
        self.stop = threading.Event() if stop is None else stop
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self.stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self._interval_s()):
            self._work()

    def close(self) -> None:
        """Stop it and wait for the work in progress (10 s at most)."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
