"""Opening a log's directory: its segments found, checked and repaired as a crash or a damaged disk left
them, the files of interrupted deletes removed, and the log start offset, kept in a file of its own."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from raftlog.storage import log_format, swap
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.leader_epochs import CHECKPOINT_FILE
from raftlog.storage.log_format import FORMAT_FILE
from raftlog.storage.salvage import Salvage, set_aside
from raftlog.storage.segment import (
    DELETED_SUFFIX,
    RecoveryReport,
    Segment,
    fsync_directory,
    write_durably,
)
from raftlog.storage.transactions import CHECKPOINT_FILE as TRANSACTIONS_FILE

log = logging.getLogger("raftlog.storage")

START_OFFSET_FILE = "log-start-offset"
CLEANER_FILE = "cleaner-offsets"  # compaction's progress (read_cleaner_offsets)
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


@dataclass(slots=True)
class OpenReport:
    """What opening the log found and repaired."""

    segments: int = 0
    repairs: list[RecoveryReport] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    salvage: Salvage | None = None  # a damaged sealed segment and those after it, set aside (salvage.py)


def open_segments(
    directory: str,
    config: LogConfig,
    discard: Callable[[str], None],
    damaged_to: str | None,
    mark_level: int = 1,
) -> tuple[list[Segment], OpenReport]:
    """The segments of the log in ``directory``, recovered, and what opening found and repaired
    (``Log.open`` says what ``discard``, ``damaged_to`` and ``mark_level`` are)."""
    opening = _Opening(directory, config, discard)
    opening.recover(damaged_to, mark_level)
    return opening.segments, opening.report


class _Opening:
    def __init__(self, directory: str, config: LogConfig, discard: Callable[[str], None]) -> None:
        self.directory = directory
        self.config = config
        self._discard = discard
        self.segments: list[Segment] = []
        self.report = OpenReport()

    def recover(self, damaged_to: str | None, mark_level: int = 1) -> None:
        log_format.check_or_mark(self.directory, mark_level)
        names = set(os.listdir(self.directory)) - {FORMAT_FILE}
        # a compaction pass that stopped part way: finished if it committed, else its files removed
        if any(swap.is_cleaner_file(name) for name in names):
            self.report.removed_files += swap.recover(self.directory, names)
            names = set(os.listdir(self.directory)) - {FORMAT_FILE}
        minimum_start = read_start_offset(self.directory)
        bases = []
        for name in sorted(n for n in names if n.endswith(DELETED_SUFFIX)):
            # a deleted segment's file that a crash or a close left before its discard took it
            names.remove(name)
            self._discard(os.path.join(self.directory, name))
            self.report.removed_files.append(name)
        for name in sorted(names):
            stem, dot, suffix = name.partition(".")
            if name in (
                START_OFFSET_FILE,
                CHECKPOINT_FILE,
                CLEANER_FILE,
                TRANSACTIONS_FILE,
            ) or name.startswith(
                (
                    START_OFFSET_FILE + ".tmp",
                    TRANSACTIONS_FILE + ".tmp",
                    FORMAT_FILE + ".tmp",
                    CHECKPOINT_FILE + ".tmp",
                    CLEANER_FILE + ".tmp",
                )
            ):
                continue
            if not dot or "." + suffix not in _SEGMENT_SUFFIXES or not stem.isdigit() or len(stem) != 20:
                raise CorruptRecord(os.path.join(self.directory, name), 0, "unexpected file in log directory")
            base = int(stem)
            if suffix == "log":
                bases.append(base)
        bases.sort()
        # Segments wholly below the start offset (the next one begins at or below it): those a delete of
        # records or a reset left. The one holding the start offset stays: the start may lie inside it.
        below = {b for b, following in itertools.pairwise(bases) if following <= minimum_start}
        # files of an interrupted delete or reset: indexes without data, or segments below the start offset
        for name in sorted(names):
            stem, _, suffix = name.partition(".")
            if not stem.isdigit():
                continue
            base = int(stem)
            orphan = suffix != "log" and base not in bases
            if orphan or base in below:
                os.unlink(os.path.join(self.directory, name))
                self.report.removed_files.append(name)
        bases = [b for b in bases if b not in below]
        if self.report.removed_files:
            log.warning("%s: removed leftover files %s", self.directory, self.report.removed_files)
            fsync_directory(self.directory)
        if not bases:
            self.segments = [Segment.create(self.directory, minimum_start, self.config.index_interval_bytes)]
        for position, base in enumerate(bases):
            segment = Segment(self.directory, base, self.config.index_interval_bytes)
            if position + 1 < len(bases):
                try:
                    report = segment.recover_closed(bases[position + 1])
                except CorruptRecord as damage:
                    segment.close()
                    if damaged_to is None:
                        raise
                    self._salvage(
                        set_aside(self.directory, bases[position:], str(damage), damaged_to), minimum_start
                    )
                    break
                self.segments.append(segment)
            else:
                self.segments.append(segment)
                report = segment.recover_active()
                report = report if report.truncated_bytes else RecoveryReport(segment.path)
            if report.truncated_bytes or report.rebuilt_indexes:
                self.report.repairs.append(report)
        if self.segments and self.segments[-1].end_offset < minimum_start:
            # A reset to an offset past the log's end (Log.truncate_fully_and_start_at) wrote the start
            # offset and stopped before its empty segment there replaced the old ones: finish it.
            for segment in self.segments:
                self.report.removed_files.append(os.path.basename(segment.path))
                segment.delete(self._discard)
            self.segments = [Segment.create(self.directory, minimum_start, self.config.index_interval_bytes)]
        self.report.segments = len(self.segments)

    def _salvage(self, salvage: Salvage, minimum_start: int) -> None:
        """The log after a damaged sealed segment and those after it were set aside: the segment before
        them, sealed until now, is the active one (checked whole, as one is after a crash), or, when
        the first was damaged, an empty one begins where it began."""
        self.report.salvage = salvage
        if not self.segments:
            start = max(minimum_start, salvage.end_offset)
            self.segments = [Segment.create(self.directory, start, self.config.index_interval_bytes)]
            return
        report = self.segments[-1].recover_active()
        if report.truncated_bytes:
            self.report.repairs.append(report)


def _read_small_file(path: str) -> str | None:
    """The text of a small file written whole (``write_durably``); None when there is none."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_start_offset(directory: str) -> int:
    path = os.path.join(directory, START_OFFSET_FILE)
    text = _read_small_file(path)
    if text is None:
        return 0
    text = text.strip()
    if not text.isdigit():
        raise CorruptRecord(path, 0, f"log start offset file holds {text!r}, not an offset")
    return int(text)


def write_start_offset(directory: str, offset: int) -> None:
    """Raises ``DiskFull`` (no room for the file: the old one stands) or ``StorageUnavailable``."""
    write_durably(os.path.join(directory, START_OFFSET_FILE), f"{offset}\n", f"log start offset {offset}")


@dataclass(frozen=True, slots=True)
class CleanerOffsets:
    """Compaction's progress in a log (``raftlog.storage.cleaner``): records below ``dirty_from`` have been
    through a pass; batches below ``rewritten_below`` may have been rewritten by one (a replayed Raft entry
    there is not compared with the batch on disk)."""

    dirty_from: int = 0
    rewritten_below: int = 0


def read_cleaner_offsets(directory: str) -> CleanerOffsets:
    path = os.path.join(directory, CLEANER_FILE)
    text = _read_small_file(path)
    if text is None:
        return CleanerOffsets()
    parts = text.split()
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise CorruptRecord(path, 0, f"cleaner offsets file holds {parts!r}, not two offsets")
    return CleanerOffsets(int(parts[0]), int(parts[1]))


def write_cleaner_offsets(directory: str, offsets: CleanerOffsets) -> None:
    write_durably(
        os.path.join(directory, CLEANER_FILE),
        f"{offsets.dirty_from} {offsets.rewritten_below}\n",
        f"cleaner offsets {offsets}",
    )
