"""A segment that compaction rewrote, put in place of the segments it replaces: crash-safe at every step.

The cleaner writes the new segment beside the old ones under staged names (``<base>.log.cleaned``, its
indexes alike) and fsyncs it. Then, under the log's lock:

1. :func:`commit`: each staged file is renamed to ``.swap``, the data file last, and the directory synced.
   ``<base>.log.swap`` existing is the commit point: the swap happens, now or when the log next opens.
2. The old segments are deleted (renamed aside, ``Segment.delete``).
3. :func:`finish`: each ``.swap`` file is renamed over its final name (the data file last) and the
   directory synced.

Opening a log (:func:`recover`) removes staged files (a pass that never committed: the old segments are
whole) and swap files without their data file's, and completes a committed swap: the segments it covers
(``[base, end)``, its end read from its batch headers) go, and the swap files take their names. A crash
at any byte therefore leaves either the old segments or the cleaned one, never neither and never both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from raftlog.storage.segment import NAME_DIGITS, fsync_directory, segment_name, walk_headers

STAGED = ".cleaned"
SWAP = ".swap"
_SUFFIXES = (".index", ".timeindex", ".log")  # the data file last: its swap is the commit point


def _path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, segment_name(base_offset, suffix))


def commit(directory: str, base_offset: int) -> None:
    """Staged files -> swap files, the data file last; the directory synced."""
    for suffix in _SUFFIXES:
        path = _path(directory, base_offset, suffix)
        os.rename(path + STAGED, path + SWAP)
    fsync_directory(directory)


def finish(directory: str, base_offset: int) -> None:
    """Swap files -> their final names (over what holds them), the data file last; the directory synced.
    Idempotent: a file already renamed is not looked for again."""
    for suffix in _SUFFIXES:
        path = _path(directory, base_offset, suffix)
        if os.path.exists(path + SWAP):
            os.replace(path + SWAP, path)
    fsync_directory(directory)


def remove_staged(directory: str, base_offset: int) -> None:
    """The staged files of a pass that did not commit."""
    for suffix in _SUFFIXES:
        try:
            os.unlink(_path(directory, base_offset, suffix) + STAGED)
        except FileNotFoundError:
            continue


def is_cleaner_file(name: str) -> bool:
    return name.endswith((STAGED, SWAP))


def swap_end(path: str) -> int:
    """The offset after the last batch of a swap's data file (its batch headers, read)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = None
        for _, header in walk_headers(fd, 0, os.fstat(fd).st_size):
            end = header.end_offset
    finally:
        os.close(fd)
    if end is None:
        raise ValueError(f"{path}: a committed swap holds no batch")
    return end


def recover(directory: str, names: Iterable[str], remove: Callable[[str], None] = os.unlink) -> list[str]:
    """At open, before the segments are read: finish the committed swaps and remove what uncommitted
    passes left. Returns the names of the files removed."""
    names = sorted(names)
    removed = []
    committed = {int(name[:NAME_DIGITS]) for name in names if name.endswith(".log" + SWAP)}
    for name in names:
        leftover = name.endswith(STAGED) or (name.endswith(SWAP) and int(name[:NAME_DIGITS]) not in committed)
        if leftover:
            remove(os.path.join(directory, name))
            removed.append(name)
    for base in sorted(committed):
        end = swap_end(_path(directory, base, ".log") + SWAP)
        for name in names:
            stem, dot, suffix = name.partition(".")
            replaced = stem.isdigit() and base < int(stem) < end and suffix in ("log", "index", "timeindex")
            if dot and replaced:
                remove(os.path.join(directory, name))
                removed.append(name)
        finish(directory, base)
    if removed:
        fsync_directory(directory)
    return removed
