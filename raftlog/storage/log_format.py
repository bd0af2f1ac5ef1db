"""Which batch format a log directory holds: a ``format`` marker file, written in every log directory of
Kafka RecordBatch v2 batches (a new log, or one migrated). A directory with data and no marker was
written by an older raftlog: ``Log.open`` refuses it (``LegacyLogFormat``), ``raftlog log migrate``
rewrites it, ``raftlog log verify`` reads it as such. The one place that reads and writes the marker.
"""

from __future__ import annotations

import os

from raftlog.storage.errors import CorruptRecord, LegacyLogFormat
from raftlog.storage.segment import DELETED_SUFFIX, fsync_directory

FORMAT_FILE = "format"
FORMAT = "kafka-record-batch-v2"


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
    if written is not None and written != FORMAT:
        raise CorruptRecord(
            os.path.join(directory, FORMAT_FILE), 0, f"log format {written!r}, expected {FORMAT!r}"
        )
    return written is not None


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


def check_or_mark(directory: str) -> None:
    """At open: a log of an older raftlog is refused (never read as something else), a wrong marker is
    corruption, and an unmarked log without data (a new one) is marked."""
    if marked(directory):
        return
    if needs_migration(directory):
        raise LegacyLogFormat(directory)
    write_marker(directory)


def write_marker(directory: str) -> None:
    """Mark ``directory`` as a log of Kafka RecordBatch v2 batches (written and fsynced, then renamed)."""
    path = os.path.join(directory, FORMAT_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(FORMAT + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(directory)
