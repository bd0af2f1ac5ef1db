"""The threads that run compaction's passes (``raftlog.storage.cleaner``) over a node's compacted logs:
Kafka's ``LogCleaner`` with its ``log.cleaner.threads`` ``CleanerThread``s.

:class:`Cleaner` keeps ``threads()`` of them running, asked again at each look of its first thread, so a
change made while the node runs (``kafka-configs --alter --entity-type brokers --add-config
log.cleaner.threads=N``, kept by the controller: ``partitions.resource_configs``) applies at the next
look: a thread is added, or the last ones end once their pass in progress ends. Each thread looks at the
compacted logs every ``interval_ms`` and cleans those no other thread is cleaning (a log is claimed for
its pass), so no log is ever cleaned by two at once and the passes of different logs overlap.

Shared by every thread: one token bucket (``Pacer``: the node's pace, whatever the number of threads,
as Kafka's one throttler) and the key map bound, shared out among them as Kafka shares its dedupe
buffer (``keys_max`` over the threads, per pass), so more threads never hold more memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from raftlog.errors import RaftlogError
from raftlog.histogram import Histogram
from raftlog.storage.cleaner import (
    INTERVAL_MS_DEFAULT,
    KEYS_MAX_DEFAULT,
    RATE_BYTES_PER_S_DEFAULT,
    PassReport,
    clean_log,
    summary,
)
from raftlog.storage.compaction import SegmentSummary, cleanable_end, dirty_bytes
from raftlog.storage.log import Log
from raftlog.storage.log_cut import hold_closed_segments, release_held
from raftlog.storage.log_open import read_cleaner_offsets
from raftlog.storage.periodic import Periodic

log = logging.getLogger("raftlog.cleaner")

THREADS_MAX = 16  # whatever ``threads()`` says (partitions.resource_configs.CLEANER_THREADS_MAX)


class CleanerStopped(Exception):
    """The node is closing: the pass in progress ends where it is (its staged files removed)."""


class Pacer:
    """A token bucket of ``rate_bytes_per_s`` (burst: one second's worth) that every cleaner thread takes
    from; ``take`` waits for room, and raises ``CleanerStopped`` once ``stop`` is set, so a closing node
    does not wait for a long pass."""

    def __init__(self, rate_bytes_per_s: float, stop: threading.Event) -> None:
        self.rate = rate_bytes_per_s
        self._stop = stop
        self._tokens = rate_bytes_per_s
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self, amount: int) -> None:
        if self._stop.is_set():
            raise CleanerStopped
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate) - amount
            self._at = now
            owed = -self._tokens
        if owed > 0:
            self._stop.wait(owed / self.rate)


@dataclass(slots=True)
class CleanerStats:
    passes: int = 0
    passes_stopped: int = 0
    bytes_read: int = 0
    bytes_reclaimed: int = 0
    records_removed: int = 0
    failures: int = 0
    dirty_bytes: int = 0  # over every compacted log, at each one's last look: the cleaner's lag
    threads: int = 0  # running
    pass_seconds: Histogram = field(default_factory=Histogram)


class Cleaner:
    """The node's compaction threads (``threads()`` of them, 1 to ``THREADS_MAX``): every ``interval_ms``
    each looks at the compacted logs (``logs``) no other is cleaning and runs the pass due, paced by one
    token bucket; a failure on one log is logged with its name and counted, and does not stop the others."""

    def __init__(
        self,
        logs: Callable[[], list[Log]],
        clock: Callable[[], int],
        rate_bytes_per_s: int = RATE_BYTES_PER_S_DEFAULT,
        keys_max: int = KEYS_MAX_DEFAULT,
        interval_ms: int = INTERVAL_MS_DEFAULT,
        threads: Callable[[], int] = lambda: 1,
    ) -> None:
        self._logs = logs
        self._clock = clock
        self.keys_max = keys_max
        self.interval_ms = interval_ms
        self._threads = threads
        self.stats = CleanerStats()
        self._stop = threading.Event()  # the node closes: every thread, and the pass in progress
        self._pacer = Pacer(rate_bytes_per_s, self._stop)
        self._lock = threading.Lock()
        self._claimed: set[str] = set()  # the directories of the logs a pass is running on
        self._lags: dict[str, int] = {}  # a log's dirty bytes at its last look
        self._running: dict[int, Periodic] = {}  # by index; 0 runs as long as the cleaner
        self._ended: list[Periodic] = []  # told to end: joined at close, their pass may still run
        self._started = False

    def wanted(self) -> int:
        """How many threads should run now: ``threads()`` within 1 and ``THREADS_MAX``."""
        return min(max(self._threads(), 1), THREADS_MAX)

    def resize(self) -> int:
        """Start the threads missing, tell those past ``wanted()`` to end after their pass; how many run."""
        wanted = self.wanted()
        with self._lock:
            if not self._started or self._stop.is_set():
                return len(self._running)
            for index in range(wanted):
                if index not in self._running:
                    self._running[index] = self._thread(index)
                    self._running[index].start()
            for index in [i for i in self._running if i >= wanted]:
                ending = self._running.pop(index)
                ending.stop.set()
                self._ended.append(ending)
            self.stats.threads = len(self._running)
        return wanted

    def _thread(self, index: int) -> Periodic:
        def look() -> None:
            if index == 0:
                self.resize()
            self.run_once(self._clock())

        return Periodic(
            f"raftlog-cleaner-{index}", lambda: self.interval_ms / 1000, look, on_failure=self._failed
        )

    def _failed(self) -> None:
        with self._lock:
            self.stats.failures += 1

    def run_once(self, now_ms: int) -> list[PassReport]:
        """One look over the compacted logs: each not claimed by another thread is claimed, cleaned if a
        pass is due, and released; the reports of the passes that ran."""
        reports = []
        keys_max = max(1, self.keys_max // self.wanted())
        logs = self._logs()
        for each in logs:
            if not each.config.compacted or self._stop.is_set():
                continue
            with self._lock:
                if each.directory in self._claimed:
                    continue
                self._claimed.add(each.directory)
            try:
                report = clean_log(each, now_ms, keys_max, self._pacer.take)
                lag = self._lag(each, now_ms)
            except CleanerStopped:
                break
            except (RaftlogError, OSError):
                with self._lock:
                    self.stats.failures += 1
                log.exception("compaction of %s failed", each.directory)
                continue
            finally:
                with self._lock:
                    self._claimed.discard(each.directory)
            with self._lock:
                self._lags[each.directory] = lag
                if report is not None:
                    reports.append(report)
                    self._count(report)
        with self._lock:
            present = {each.directory for each in logs}
            self._lags = {d: lag for d, lag in self._lags.items() if d in present}
            self.stats.dirty_bytes = sum(self._lags.values())
        return reports

    def _lag(self, each: Log, now_ms: int) -> int:
        closed, active_base = hold_closed_segments(each)
        try:
            summaries = [summary(s) for s in closed] + [
                SegmentSummary(active_base, active_base, 0, None, None)
            ]
            dirty_from = read_cleaner_offsets(each.directory).dirty_from
            return dirty_bytes(summaries, dirty_from, cleanable_end(summaries, now_ms, each.config))
        finally:
            release_held(each, closed)

    def _count(self, report: PassReport) -> None:
        stats = self.stats
        stats.passes += 1
        stats.passes_stopped += not report.completed
        stats.bytes_read += report.bytes_read
        stats.bytes_reclaimed += report.bytes_reclaimed
        stats.records_removed += report.records_removed
        stats.pass_seconds.observe(report.seconds)
        log.info(
            "%s: compacted below %d: %d -> %d segments, %d of %d records removed, %d bytes reclaimed, %.3fs",
            report.directory, report.rewritten_below, report.segments_before, report.segments_after,
            report.records_removed, report.records_read, report.bytes_reclaimed, report.seconds,
        )  # fmt: skip

    def start(self) -> None:
        with self._lock:
            self._started = True
        self.resize()

    def close(self) -> None:
        """Stop every thread, the passes in progress with them, and wait for each (10 s at most)."""
        self._stop.set()
        with self._lock:
            threads = [*self._running.values(), *self._ended]
            self._running, self._ended = {}, []
            self.stats.threads = 0
        for thread in threads:
            thread.close()
