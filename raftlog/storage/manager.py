"""Many logs under one data directory, plus the background thread that group-commits and retains.

The thread is the only I/O-driving loop here: each tick it fsyncs the logs in flush mode "group" whose
unflushed data is older than ``flush.ms``, every ``retention_check_interval_ms`` it applies retention, and
every ``HANDLE_SWEEP_S`` it closes the files of logs unused for ``handles_idle_s`` and, beyond
``open_logs_max`` logs holding files, of the least recently used ones (a node holds thousands of
partitions, most of them idle: open files follow the partitions in use, not the partitions held).
A failure on one log is logged with the log's name and does not stop the others. Compaction of the logs
whose ``cleanup.policy`` names ``compact`` runs on threads of its own (``cleaner``,
``raftlog.storage.cleaner_threads``), paced, so that a long pass delays no flush.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable

from raftlog.errors import RaftlogError
from raftlog.storage import log_format
from raftlog.storage.cleaner import INTERVAL_MS_DEFAULT, KEYS_MAX_DEFAULT, RATE_BYTES_PER_S_DEFAULT
from raftlog.storage.cleaner_threads import Cleaner
from raftlog.storage.config import LogConfig
from raftlog.storage.defaults import RETENTION_CHECK_MS_DEFAULT
from raftlog.storage.errors import InvalidConfig
from raftlog.storage.log import Log, wall_clock_ms
from raftlog.storage.periodic import Periodic
from raftlog.storage.space import DiskSpace

log = logging.getLogger("raftlog.storage")

_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
IDLE_TICK_MS = 1000
HANDLE_SWEEP_S = 2.0
HANDLES_IDLE_S = 10.0
OPEN_LOGS_MAX = 512
# Threads closing the logs when the manager closes. A log's close is fsyncs (its last segment sealed, its
# checkpoint files written durably): a wait for the disk, not CPU, and the disk takes many at once. One
# after another, 2,001 logs took a node 4 s to close on a quiet disk and 87 s where an fsync costs 10 ms,
# while the node's restart waited. Kafka closes its logs on num.recovery.threads.per.data.dir threads.
CLOSE_THREADS = 8


class LogManager:
    def __init__(
        self,
        root: str,
        clock: Callable[[], int] = wall_clock_ms,
        retention_check_interval_ms: int = RETENTION_CHECK_MS_DEFAULT,
        discard: Callable[[str], None] = os.unlink,
        handles_idle_s: float = HANDLES_IDLE_S,
        open_logs_max: int = OPEN_LOGS_MAX,
        space: DiskSpace | None = None,
        damaged_root: str | None = None,
        cleaner_rate_bytes_per_s: int = RATE_BYTES_PER_S_DEFAULT,
        cleaner_keys_max: int = KEYS_MAX_DEFAULT,
        cleaner_interval_ms: int = INTERVAL_MS_DEFAULT,
        cleaner_threads: Callable[[], int] = lambda: 1,
        fence_level: Callable[[], int] = lambda: 1,
    ) -> None:
        """``fence_level``: the level a log opened is fenced at (``log_format.fence``; 1: none).
        ``discard``: where the files of segments that retention or truncation deletes go (see
        ``Log.open``). ``handles_idle_s``, ``open_logs_max``: see the module's docstring. ``space``: the
        node's knowledge of room on its disk, shared by every log (``raftlog.storage.space``).
        ``damaged_root``: where the damaged segments of a log opened with ``salvage`` are set aside, a
        directory per log and opening (on the same file system as ``root``). ``cleaner_*``: the compaction
        threads' pace, key map bound, interval and how many run (``raftlog.storage.cleaner_threads``)."""
        if retention_check_interval_ms < 1:
            raise InvalidConfig("retention.check.interval.ms", retention_check_interval_ms, "must be >= 1")
        self.root = root
        self._clock = clock
        self._retention_interval_ms = retention_check_interval_ms
        self._discard = discard
        self._damaged_root = damaged_root
        self._fence_level = fence_level
        self.salvaged = 0  # logs opened after setting a damaged segment aside (raftlog.storage.salvage)
        self.space = space if space is not None else DiskSpace()
        self._logs: dict[str, Log] = {}
        self._opening: dict[str, threading.Event] = {}  # names being opened: set once each open ended
        self._group_flushed: dict[str, Log] = {}  # those in flush mode "group": looked at every tick
        self._handles_idle_s = handles_idle_s
        self._open_logs_max = open_logs_max
        self._next_sweep_s = time.monotonic() + HANDLE_SWEEP_S
        self._lock = threading.Lock()
        self._thread = Periodic(
            "raftlog-storage-background", lambda: self._tick_ms() / 1000, lambda: self.run_once(self._clock())
        )
        self._next_retention_ms = clock() + retention_check_interval_ms
        self.cleaner = Cleaner(
            self._open_logs,
            clock,
            cleaner_rate_bytes_per_s,
            cleaner_keys_max,
            cleaner_interval_ms,
            cleaner_threads,
        )
        os.makedirs(root, exist_ok=True)

    def open_log(self, name: str, config: LogConfig, salvage: bool = False) -> Log:
        """Open (or create) the log called ``name`` (e.g. ``orders-0``) under the root directory.
        ``salvage``: its records can be had again elsewhere (a replica with peers), so a damaged sealed
        segment is set aside under ``damaged_root`` rather than refused (``raftlog.storage.salvage``).
        Any thread: logs of different names open side by side (their files and syncs outside the lock);
        a second call for a name being opened waits for the first and has its outcome."""
        if not _NAME.fullmatch(name) or name in (".", ".."):
            raise InvalidConfig("log name", name, "use 1-249 of [A-Za-z0-9._-]")
        while True:
            with self._lock:
                existing = self._logs.get(name)
                if existing is not None:
                    return existing
                opening = self._opening.get(name)
                if opening is None:
                    self._opening[name] = threading.Event()
                    break
            opening.wait()  # the other caller's open ended: opened (returned above) or failed (tried again)
        try:
            return self._open_new(name, config, salvage)
        finally:
            with self._lock:
                self._opening.pop(name).set()

    def _open_new(self, name: str, config: LogConfig, salvage: bool) -> Log:
        damaged_to = None
        if salvage and self._damaged_root is not None:
            damaged_to = os.path.join(self._damaged_root, f"{name}-{self._clock()}")
        directory = os.path.join(self.root, name)
        # a new log marked at the level (one marker written and synced, not two), one of before the level
        # rose fenced before any entry reaches it: the level read again once open, under the lock
        # ``fence_all`` fences each directory under (its fence may have found this one not yet marked)
        opened = Log.open(
            directory, config, self._clock, self._discard, self.space, damaged_to, self._fence_level()
        )
        with self._lock:
            level = self._fence_level()
            if level > 1:
                log_format.fence(directory, level)
            self.salvaged += opened.open_report.salvage is not None
            self._logs[name] = opened
            if config.flush_mode == "group":
                self._group_flushed[name] = opened
        return opened

    def fence_all(self, level: int) -> int:
        """Fence every log under the root at ``level`` (``log_format.fence``: release 0.1.0 then refuses to
        open them); how many markers were rewritten. Any thread; a log opened meanwhile fences itself."""
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return 0
        fenced = 0
        for name in names:
            directory = os.path.join(self.root, name)
            if os.path.isdir(directory):
                with self._lock:
                    fenced += log_format.fence(directory, level)
        return fenced

    def reconfigure(self, name: str, config: LogConfig) -> None:
        """Apply a new configuration to an open log live (``Log.reconfigure``)."""
        with self._lock:
            opened = self._logs.get(name)
            if opened is None:
                return
            opened.reconfigure(config)
            if config.flush_mode == "group":
                self._group_flushed[name] = opened
            else:
                self._group_flushed.pop(name, None)

    def get(self, name: str) -> Log | None:
        with self._lock:
            return self._logs.get(name)

    def _open_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

    def close_log(self, name: str, seal: bool = True) -> None:
        """``seal=False``: no last fsync (the log is about to be deleted; see ``Log.close``)."""
        with self._lock:
            opened = self._logs.pop(name, None)
            self._group_flushed.pop(name, None)
        if opened is not None:
            opened.close(seal)

    def delete_log(self, name: str) -> None:
        """Close the log and remove its directory."""
        self.close_log(name)
        path = os.path.join(self.root, name)
        if os.path.isdir(path):
            shutil.rmtree(path)

    # -- background work -------------------------------------------------------------------------------

    def run_once(self, now_ms: int) -> tuple[int, int]:
        """One tick of background work. Returns (logs flushed, segments deleted by retention)."""
        retention_due = now_ms >= self._next_retention_ms
        with self._lock:
            logs = list((self._logs if retention_due else self._group_flushed).items())
        flushed = deleted = 0
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
        if time.monotonic() >= self._next_sweep_s:
            self.sweep_handles(time.monotonic())
        return flushed, deleted

    def sweep_handles(self, now_s: float) -> int:
        """Close the files of the logs unused for ``handles_idle_s``, and of the least recently used ones
        beyond ``open_logs_max``; a log in use at that moment is left for the next sweep. Returns how many
        logs closed their files."""
        self._next_sweep_s = now_s + HANDLE_SWEEP_S
        with self._lock:
            holding = [opened for opened in self._logs.values() if opened.handles_open]
        holding.sort(key=lambda opened: opened.used_at)
        excess = len(holding) - self._open_logs_max
        released = 0
        for position, opened in enumerate(holding):
            if position >= excess and now_s - opened.used_at < self._handles_idle_s:
                break  # the rest are more recent still
            released += opened.release_handles()
        return released

    def _tick_ms(self) -> int:
        with self._lock:
            intervals = [g.config.flush_interval_ms for g in self._group_flushed.values()]
        return min([*intervals, IDLE_TICK_MS, self._retention_interval_ms])

    def start(self) -> None:
        self._thread.start()
        self.cleaner.start()

    def close(self) -> None:
        """Stop the background threads and close every log (flushing it)."""
        self.cleaner.close()
        self._thread.close()
        names = self.names()
        if not names:
            return
        with concurrent.futures.ThreadPoolExecutor(
            min(CLOSE_THREADS, len(names)), thread_name_prefix="log-close"
        ) as closing:  # each log has its own lock: closes of different logs share nothing
            closes = [closing.submit(self._close_logged, name) for name in names]
        for close in closes:
            close.result()  # what no close may raise (a bug) is raised here, after every log was tried

    def _close_logged(self, name: str) -> None:
        try:
            self.close_log(name)
        except (RaftlogError, OSError):
            log.exception("closing log %s failed", name)
