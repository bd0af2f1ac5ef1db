"""Removing deleted data without stalling everyone else's fsyncs.

On ext4 mounted with ``discard`` (as the machines this runs on are) the blocks a deletion frees are
discarded by the journal commit that follows it, and every fsync on the file system waits for that
commit. ``scripts/deletion_stall_probe.py --mib 2000`` deletes a 2000 MiB file while another thread
loops on 4 KiB write + fdatasync: unlinked at once, that loop's slowest calls took 50-55 ms; shrunk in
8 MiB truncations at 128 MiB/s, 8 ms (at 256 MiB/s, 3 ms; 64 MiB/s had one 30 ms call in its 32 s).
RocksDB rate-limits its file deletions for the same reason. ``None`` removes at once (at start, before
the node serves).

A node removes everything through one ``Remover``: one path after another on one thread, so that
removals do not add up their paces (nodes sharing one disk still share its discards). What it removes:
dropped replicas' directories, the Raft journal's segments once a snapshot covers them (unlinking a
64 MiB segment took 15-44 ms on the driver thread, which every group of the node waits for), and
partition-log segments that retention or truncation deleted, once no reader holds them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable

from raftlog.storage.space import no_space

log = logging.getLogger(__name__)

STEP_BYTES = 8 << 20
BYTES_PER_S = 128 << 20
CATCH_UP_S = 30.0  # a Remover goes faster than BYTES_PER_S when more than this much removal is queued


class Stopped(Exception):
    """The removal was asked to stop (the node is closing); what is left is removed at the next start."""


def remove_tree(
    path: str,
    bytes_per_s: float | None = BYTES_PER_S,
    step_bytes: int = STEP_BYTES,
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Remove the file or directory tree at ``path``, deepest entries first, shrinking each file larger than
    ``step_bytes`` by ``step_bytes`` at a time with a pause after each step (``bytes_per_s``) before it
    is unlinked. Raises ``Stopped`` (between steps) once ``stop`` is set, OSError from the file system;
    entries already gone are skipped."""
    if step_bytes <= 0 or (bytes_per_s is not None and bytes_per_s <= 0):
        raise ValueError(f"need step_bytes > 0 and bytes_per_s > 0 or None, got {step_bytes}, {bytes_per_s}")
    if not os.path.isdir(path) or os.path.islink(path):
        _remove_file(path, bytes_per_s, step_bytes, stop, sleep)
        return
    for root, directories, files in os.walk(path, topdown=False):
        for name in files:
            _remove_file(os.path.join(root, name), bytes_per_s, step_bytes, stop, sleep)
        for name in directories:
            entry = os.path.join(root, name)
            _ignore_missing(os.unlink if os.path.islink(entry) else os.rmdir, entry)
    _ignore_missing(os.rmdir, path)


def _remove_file(
    path: str,
    bytes_per_s: float | None,
    step_bytes: int,
    stop: threading.Event | None,
    sleep: Callable[[float], None],
) -> None:
    if bytes_per_s is not None and not os.path.islink(path):
        try:
            descriptor = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(descriptor).st_size
            while size > step_bytes:
                if stop is not None and stop.is_set():
                    raise Stopped(path)
                size -= step_bytes
                os.ftruncate(descriptor, size)
                sleep(step_bytes / bytes_per_s)
        finally:
            os.close(descriptor)
    _ignore_missing(os.unlink, path)


def _ignore_missing(remove: Callable[[str], None], path: str) -> None:
    try:
        remove(path)
    except FileNotFoundError:
        log.debug("%s was already gone", path)


def tree_bytes(path: str) -> int:
    """Bytes held by the files at or under ``path`` (0 if it is gone)."""
    if not os.path.isdir(path) or os.path.islink(path):
        try:
            return os.lstat(path).st_size
        except FileNotFoundError:
            return 0
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # removed while we walked
                total += os.lstat(os.path.join(root, name)).st_size
    return total


class Remover:
    """Removes the paths it is given on one worker thread, oldest first, each with :func:`remove_tree` at
    ``bytes_per_s``, or faster while more than ``catch_up_s`` seconds of removal at that pace is queued
    (so that a backlog cannot grow without bound when data is deleted faster than the pace).

    ``submit`` may be called from any thread. ``close`` stops the worker between two steps; what is left
    stays where it is, for the next start to remove."""

    def __init__(
        self,
        bytes_per_s: float = BYTES_PER_S,
        step_bytes: int = STEP_BYTES,
        catch_up_s: float = CATCH_UP_S,
        name: str = "raftlog-remover",
    ) -> None:
        if bytes_per_s <= 0 or step_bytes <= 0 or catch_up_s <= 0:
            raise ValueError(
                f"need positive pace, step and catch-up, got {bytes_per_s}, {step_bytes}, {catch_up_s}"
            )
        self._bytes_per_s = bytes_per_s
        self._step_bytes = step_bytes
        self._catch_up_s = catch_up_s
        self._name = name
        self._queue: deque[tuple[str, int]] = deque()
        self._queued_bytes = 0
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.removed = 0  # paths done (removed, or failed and left for the next start)

    def submit(self, path: str) -> None:
        size = tree_bytes(path)
        with self._changed:
            if self._stop.is_set():
                log.info("%s: closed; %s stays for the next start to remove", self._name, path)
                return
            self._queue.append((path, size))
            self._queued_bytes += size
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def pending(self) -> int:
        """Paths submitted and not done yet (the one being removed included)."""
        with self._changed:
            return len(self._queue)

    def backlog_bytes(self) -> int:
        """Bytes of the paths not done yet, as they were when submitted (for metrics)."""
        with self._changed:
            return self._queued_bytes

    def close(self, timeout_s: float = 5.0) -> None:
        with self._changed:
            self._stop.set()
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning(
                    "%s: still removing after %.1f s; left running (a daemon thread)", self._name, timeout_s
                )

    def _pause(self, seconds: float) -> None:
        self._stop.wait(seconds)  # a close ends the pause; remove_tree then stops before its next step

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._stop.is_set():
                    self._changed.wait()
                if self._stop.is_set():
                    return
                path, size = self._queue[0]
                pace = max(self._bytes_per_s, self._queued_bytes / self._catch_up_s)
            try:
                remove_tree(path, pace, self._step_bytes, self._stop, self._pause)
            except Stopped:
                log.info("%s: removal of %s stopped (closing); the next start finishes it", self._name, path)
                return
            except OSError as exc:
                log.error("%s: could not remove %s (retried at the next start): %s", self._name, path, exc)
            with self._changed:
                self._queue.popleft()
                self._queued_bytes -= size
                self.removed += 1


class Trash:
    """Where a node's deleted files go: renamed into ``directory`` at once (one atomic rename on the same
    file system; nothing reads them there) and removed by the ``Remover`` at its pace. ``empty()`` at
    start removes at once whatever a close or a crash left."""

    def __init__(self, directory: str, remover: Remover) -> None:
        self.directory = directory
        self._remover = remover

    def empty(self) -> None:
        """Remove what is in the trash now (a worker thread at start, before the node serves: no pace);
        what cannot be removed stays for the next start."""
        try:
            remove_tree(self.directory, None)
        except OSError as exc:
            log.error("could not empty %s (retried at the next start): %s", self.directory, exc)

    def discard(self, path: str) -> None:
        """Any thread: move ``path`` (a file or a directory tree) to the trash and have it removed later.
        FileNotFoundError when it is gone already."""
        os.makedirs(self.directory, exist_ok=True)
        target = os.path.join(self.directory, f"{os.path.basename(path)}.{uuid.uuid4().hex}")
        try:
            os.rename(path, target)
        except OSError as error:
            if not no_space(error):
                raise
            # the trash's directory needs a block and the disk is full: what would free room goes now,
            # unpaced (raftlog.storage.space)
            log.warning("no room to move %s into the trash: removing it at once", path)
            remove_tree(path, None)
            return
        self._remover.submit(target)

    def discard_if_present(self, path: str) -> None:
        """Like ``discard`` for a file the storage no longer needs whose directory may have gone first (a
        replica dropped while a reader held one of its deleted segments): then it went with it."""
        try:
            self.discard(path)
        except FileNotFoundError:
            log.debug("%s went with its directory", path)
