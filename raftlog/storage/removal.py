"""Removing deleted data without stalling everyone else's fsyncs.

On ext4 mounted with ``discard`` (as the machines this runs on are) the blocks a deletion frees are
discarded by the journal commit that follows it, and every fsync on the file system waits for that
commit. ``scripts/deletion_stall_probe.py --mib 2000`` deletes a 2000 MiB file while another thread
loops on 4 KiB write + fdatasync: unlinked at once, that loop's slowest calls took 50-55 ms; shrunk in
8 MiB truncations at 128 MiB/s, 8 ms (at 256 MiB/s, 3 ms; 64 MiB/s had one 30 ms call in its 32 s).
RocksDB rate-limits its file deletions for the same reason. The pace is per call, i.e. per node: nodes
sharing one disk share its discards. ``None`` removes at once (at start, before the node serves).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

STEP_BYTES = 8 << 20
BYTES_PER_S = 128 << 20


class Stopped(Exception):
    """The removal was asked to stop (the node is closing); what is left is removed at the next start."""


def remove_tree(
    path: str,
    bytes_per_s: float | None = BYTES_PER_S,
    step_bytes: int = STEP_BYTES,
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Remove the directory tree at ``path``, deepest entries first, shrinking each file larger than
    ``step_bytes`` by ``step_bytes`` at a time with a pause after each step (``bytes_per_s``) before it
    is unlinked. Raises ``Stopped`` (between steps) once ``stop`` is set, OSError from the file system;
    entries already gone are skipped."""
    if step_bytes <= 0 or (bytes_per_s is not None and bytes_per_s <= 0):
        raise ValueError(f"need step_bytes > 0 and bytes_per_s > 0 or None, got {step_bytes}, {bytes_per_s}")
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
