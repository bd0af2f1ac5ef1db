"""Which batch format a log directory holds: a ``format`` marker file, written in every log directory of
Kafka RecordBatch v2 batches (a new log, or one migrated). A directory with data and no marker was
written by an older raftlog: ``Log.open`` refuses it (``LegacyLogFormat``), ``raftlog log migrate``
rewrites it, ``raftlog log verify`` reads it as such. The one place that reads and writes the marker.

A marker may also name a level (``kafka-record-batch-v2 level=2``): the log belongs to a replica whose Raft
journal may hold entries of the cluster's feature level 2, which release 0.1.0 cannot read (it applies some
as refused no-ops, and its log would diverge). Release 0.1.0 knows only the plain marker and refuses to open
a log marked otherwise, so a node started again on it, on its data, serves none of these replicas. A node
fences its logs so (``fence``) once the cluster's ``raftlog.version`` is finalized at 2, and reads both.
"""

from __future__ import annotations

import os

from raftlog.storage.errors import CorruptRecord, LegacyLogFormat
from raftlog.storage.segment import DELETED_SUFFIX, fsync_directory

FORMAT_FILE = "format"
FORMAT = "kafka-record-batch-v2"
LEVEL_PREFIX = FORMAT + " level="


def marker_text(level: int) -> str:
    """The marker of a log of Kafka RecordBatch v2 batches fenced at ``level`` (1: the plain one)."""
    return FORMAT if level <= 1 else f"{LEVEL_PREFIX}{level}"


def marker_level(written: str) -> int | None:
    """The level a marker names (1: the plain one); None when it is no marker of this format."""
    if written == FORMAT:
        return 1
    if written.startswith(LEVEL_PREFIX) and written[len(LEVEL_PREFIX) :].isdigit():
        level = int(written[len(LEVEL_PREFIX) :])
        return level if level >= 2 else None
    return None


def read_marker(directory: str) -> str | None:
    """What the directory's marker says (``FORMAT`` for a current log), None when it has none."""
    try:
        with open(os.path.join(directory, FORMAT_FILE), encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def marked(directory: str) -> bool:
    """Whether the directory is marked as a current log; CorruptRecord when its marker says otherwise."""
    written = read_marker(directory)
    if written is not None and marker_level(written) is None:
        raise CorruptRecord(
            os.path.join(directory, FORMAT_FILE), 0, f"log format {written!r}, expected {FORMAT!r}"
        )
    return written is not None


def fence(directory: str, level: int) -> bool:
    """Mark a current log as fenced at ``level`` unless it is already at or above it (a log of an older
    raftlog, or without a marker, is left to ``check_or_mark``); whether the marker was rewritten."""
    written = read_marker(directory)
    current = None if written is None else marker_level(written)
    if current is None or current >= level:
        return False
    write_marker(directory, level)
    return True


def needs_migration(directory: str) -> bool:
    """A log of an older raftlog: no marker, and a data file holding bytes (an interrupted migration
    included). Reads names and sizes only."""
    if os.path.exists(os.path.join(directory, FORMAT_FILE)):
        return False
    return any(
        name.endswith(".log") and os.path.getsize(os.path.join(directory, name)) > 0
        for name in os.listdir(directory)
        if not name.endswith(DELETED_SUFFIX)
    )


def check_or_mark(directory: str, level: int = 1) -> None:
    """At open: a log of an older raftlog is refused (never read as something else), a wrong marker is
    corruption, and an unmarked log without data (a new one) is marked, fenced at ``level`` (the node's
    feature level: one marker written, not a level-1 one rewritten by ``fence`` straight after)."""
    if marked(directory):
        return
    if needs_migration(directory):
        raise LegacyLogFormat(directory)
    write_marker(directory, level)


def write_marker(directory: str, level: int = 1) -> None:
    """Mark ``directory`` as a log of Kafka RecordBatch v2 batches, fenced at ``level`` (written and
    fsynced, then renamed)."""
    path = os.path.join(directory, FORMAT_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(marker_text(level) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(directory)
