"""Many logs under one data directory, plus the background thread that group-commits and retains.

The thread is the only I/O-driving loop here: each tick it fsyncs the logs in flush mode "group" whose
unflushed data is older than ``flush.ms``, and every ``retention_check_interval_ms`` it applies retention.
A failure on one log is logged with the log's name and does not stop the others.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable

from raftlog.errors import RaftlogError
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidConfig
from raftlog.storage.log import Log, wall_clock_ms

log = logging.getLogger("raftlog.storage")

_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
IDLE_TICK_MS = 1000


class LogManager:
    def __init__(
        self,
        root: str,
        clock: Callable[[], int] = wall_clock_ms,
        retention_check_interval_ms: int = 60_000,
        discard: Callable[[str], None] = os.unlink,
    ) -> None:
        """``discard``: where the files of segments that retention or truncation deletes go (see
        ``Log.open``)."""
        if retention_check_interval_ms < 1:
            raise InvalidConfig("retention.check.interval.ms", retention_check_interval_ms, "must be >= 1")
        self.root = root
        self._clock = clock
        self._retention_interval_ms = retention_check_interval_ms
        self._discard = discard
        self._logs: dict[str, Log] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_retention_ms = clock() + retention_check_interval_ms
        os.makedirs(root, exist_ok=True)

    def open_log(self, name: str, config: LogConfig) -> Log:
        """Open (or create) the log called ``name`` (e.g. ``orders-0``) under the root directory."""
        if not _NAME.fullmatch(name) or name in (".", ".."):
            raise InvalidConfig("log name", name, "use 1-249 of [A-Za-z0-9._-]")
        with self._lock:
            existing = self._logs.get(name)
            if existing is not None:
                return existing
            opened = Log.open(os.path.join(self.root, name), config, self._clock, self._discard)
            self._logs[name] = opened
            return opened

    def get(self, name: str) -> Log | None:
        with self._lock:
            return self._logs.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

    def close_log(self, name: str) -> None:
        with self._lock:
            opened = self._logs.pop(name, None)
        if opened is not None:
            opened.close()

    def delete_log(self, name: str) -> None:
        """Close the log and remove its directory."""
        self.close_log(name)
        path = os.path.join(self.root, name)
        if os.path.isdir(path):
            shutil.rmtree(path)

    # -- background work -------------------------------------------------------------------------------

    def run_once(self, now_ms: int) -> tuple[int, int]:
        """One tick of background work. Returns (logs flushed, segments deleted by retention)."""
        with self._lock:
            logs = list(self._logs.items())
        flushed = deleted = 0
        retention_due = now_ms >= self._next_retention_ms
        if retention_due:
            self._next_retention_ms = now_ms + self._retention_interval_ms
        for name, opened in logs:
            try:
                if opened.config.flush_mode == "group" and opened.flush_if_due(now_ms):
                    flushed += 1
                if retention_due:
                    deleted += opened.apply_retention(now_ms)
            except (RaftlogError, OSError):
                log.exception("background work failed for log %s", name)
        return flushed, deleted

    def _tick_ms(self) -> int:
        with self._lock:
            intervals = [
                g.config.flush_interval_ms for g in self._logs.values() if g.config.flush_mode == "group"
            ]
        return min([*intervals, IDLE_TICK_MS, self._retention_interval_ms])

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="raftlog-storage-background", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._tick_ms() / 1000):
            self.run_once(self._clock())

    def close(self) -> None:
        """Stop the background thread and close every log (flushing it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for name in self.names():
            try:
                self.close_log(name)
            except (RaftlogError, OSError):
                log.exception("closing log %s failed", name)
