"""``Periodic``: the daemon thread behind the storage's background work (the ``LogManager``'s flushes,
retention and handle sweeps; the ``Cleaner``'s compaction passes)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("raftlog.storage")


class Periodic:
    """Calls ``work()`` on a thread of its own every ``interval_s()`` seconds (asked again each time),
    from ``start`` until ``close``. ``stop`` is set from ``close`` on: work that waits looks at it.

    An exception ``work()`` lets out (the work catches what it expects: a log's I/O errors, a pass that
    fails) is a bug: logged with its traceback, counted in ``failures`` and ``on_failure`` called, and the
    work runs again at the next interval, as Kafka's scheduler goes on after a task's error. Before, the
    thread ended with it, and a node's flushes, retention or compaction stopped with nothing but a
    traceback on its standard error."""

    def __init__(
        self,
        name: str,
        interval_s: Callable[[], float],
        work: Callable[[], object],
        stop: threading.Event | None = None,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._interval_s = interval_s
        self._work = work
        self._on_failure = on_failure
        self.stop = threading.Event() if stop is None else stop
        self.failures = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self.stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self._interval_s()):
            try:
                self._work()
            except Exception:  # a bug: logged loudly with its traceback; the next interval goes on
                self.failures += 1
                log.exception("%s: its background work failed; it runs again at its next interval", self.name)
                if self._on_failure is not None:
                    self._on_failure()

    def close(self) -> None:
        """Stop it and wait for the work in progress (10 s at most)."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
