"""Each leader epoch's start offset in a partition's log: Kafka's leader-epoch cache (KIP-101), which
answers OffsetForLeaderEpoch (KIP-320) and the epoch of an offset.

A stored batch carries the Raft term of the entry that committed it as its partition leader epoch (stamped
by apply, outside the CRC), and the terms of a Raft log never decrease: the log is a run of epochs, each
starting at the base offset of its first batch. :class:`LeaderEpochs` holds those starts, one entry per
epoch present in the log, and follows the log: appends add an entry when a batch brings a new epoch,
truncation drops the entries at or after the new end, and a start moving up (deleted records, retention)
folds the entries below it into one at the new start, as Kafka's ``LeaderEpochFileCache`` does. Given the
same log every replica holds the same entries: they come from the batches alone.

Persisted in the log's directory as ``leader-epoch-checkpoint`` (written to a temporary file, fsynced,
renamed, the directory fsynced), with the log end offset it accounts for (``covered_end``): every epoch
start below it is in the file. Opening the log reads the file and rebuilds what it lacks from batch
headers: entries at or after the log's end are dropped (a crash took the unflushed tail back) and the
headers from ``covered_end`` to the end are walked (what was appended since the file was written; only
the bodies' headers are read). The file is written when an entry changed, at a flush (a Raft snapshot
flushes the log first), at every roll and at close, so after a crash the walk covers at most the active
segment, which opening reads whole anyway; after a clean close, nothing. A log without the file (new, or
written before leader epochs were kept) is walked whole once. A truncation writes the file before any
batch goes, so a file never claims epochs of batches a later append replaced. The file is derived data: a
damaged one is logged and rebuilt from the batches.

Pure but for :func:`open_epochs` and :meth:`LeaderEpochs.save`; the owning ``Log`` calls both under its
lock. Readers on other threads use ``entries``, a tuple replaced whole, never changed in place.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
from collections.abc import Sequence
from typing import NamedTuple

from raftlog.storage.checkpoint import Checkpointed
from raftlog.storage.segment import Segment, headers_from

log = logging.getLogger("raftlog.storage")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 1
NO_EPOCH = -1  # Kafka's UNDEFINED_EPOCH / NO_PARTITION_LEADER_EPOCH
NO_OFFSET = -1  # Kafka's UNDEFINED_EPOCH_OFFSET


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochEnd(NamedTuple):
    """OffsetForLeaderEpoch's answer: the largest epoch at most the one asked for that the log knows, and
    the offset where it ends (the next epoch's start, or the log's end for the latest); both -1 when the
    epoch asked for is unknown (above every epoch, or -1)."""

    epoch: int
    end_offset: int


class LeaderEpochs(Checkpointed):
    """The epoch starts of one log, in increasing epoch and start offset. Not thread-safe for changes
    (the log's lock serialises them); ``entries`` may be read from any thread."""

    checkpoint_file = CHECKPOINT_FILE
    checkpoint_name = "leader epoch checkpoint"

    def __init__(
        self, directory: str, entries: Sequence[EpochEntry] = (), saved_end: int | None = None
    ) -> None:
        # the checkpoint file holds the entries as they were (``dirty`` when they changed since)
        super().__init__(directory, saved_end)
        self.entries: tuple[EpochEntry, ...] = tuple(entries)

    # -- changes ---------------------------------------------------------------------------------------

    def note(self, epoch: int, base_offset: int) -> None:
        """A batch of ``epoch`` was appended at ``base_offset``. Called on every append: the common case
        (the latest epoch again) is one comparison. A batch without an epoch (-1) adds nothing, as in
        Kafka; an epoch or a start below the latest entry's first drops the entries it contradicts
        (Kafka's ``assign``: never in a Raft log, whose terms do not decrease)."""
        entries = self.entries
        if entries and entries[-1].epoch == epoch and base_offset >= entries[-1].start_offset:
            return
        if epoch < 0:
            return
        kept = [e for e in entries if e.epoch < epoch and e.start_offset < base_offset]
        if len(kept) < len(entries) and entries[len(kept)].start_offset != base_offset:
            log.warning(
                "%s: leader epoch %d at offset %d drops the entries %s", self.directory, epoch, base_offset,
                entries[len(kept):],
            )  # fmt: skip
        self.entries = (*kept, EpochEntry(epoch, base_offset))
        self.dirty = True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log ends at ``end_offset`` now: the epochs starting at or after it go."""
        entries = self.entries
        if entries and entries[-1].start_offset >= end_offset:
            self.entries = tuple(e for e in entries if e.start_offset < end_offset)
            self.dirty = True

    def truncate_from_start(self, start_offset: int, end_offset: int) -> None:
        """The log starts at ``start_offset`` now (deleted records, retention) and ends at ``end_offset``:
        the entries at or below the start fold into one, the epoch of the batch holding the start,
        starting there (Kafka's ``truncateFromStart``); none when no batch is left at or after the start
        (the start at the end), so that the entries are always those of the batches read from the start."""
        entries = self.entries
        if not entries or entries[0].start_offset >= start_offset:
            return
        below = bisect.bisect_right([e.start_offset for e in entries], start_offset)
        folded = (EpochEntry(entries[below - 1].epoch, start_offset), *entries[below:])
        self.entries = tuple(e for e in folded if e.start_offset < end_offset)
        self.dirty = True

    def clear(self) -> None:
        """The log holds no batch any more (a reset to a new start)."""
        if self.entries:
            self.entries = ()
            self.dirty = True

    # -- the checkpoint file ---------------------------------------------------------------------------

    def checkpoint(self, end_offset: int) -> str:
        entries = self.entries
        lines = [str(CHECKPOINT_VERSION), str(end_offset), str(len(entries))]
        lines.extend(f"{e.epoch} {e.start_offset}" for e in entries)
        return "\n".join(lines) + "\n"


# -- answers (pure) ------------------------------------------------------------------------------------


def end_offset_for(
    entries: Sequence[EpochEntry], epoch: int, log_end_offset: int, current_epoch: int = NO_EPOCH
) -> EpochEnd:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor``: where ``epoch`` ends in this log.

    ``current_epoch``: the leader's own epoch (its Raft term), when it leads. Kafka's leader adds its
    epoch to the cache at its log end when elected; here the entries come from stored batches only (so
    that every replica holds the same), and a leader that has not yet appended in its term answers as if
    its epoch started at the log's end, which is where its first batch will start: the log holds only
    committed entries, and a leader serves once its own term's no-op is applied, so no batch of an
    earlier term comes after."""
    if current_epoch >= 0 and (not entries or current_epoch > entries[-1].epoch):
        entries = (*entries, EpochEntry(current_epoch, log_end_offset))
    if epoch < 0 or not entries:
        return EpochEnd(NO_EPOCH, NO_OFFSET)
    if epoch == entries[-1].epoch:
        return EpochEnd(epoch, log_end_offset)
    higher = bisect.bisect_right([e.epoch for e in entries], epoch)
    if higher == len(entries):  # above every epoch known
        return EpochEnd(NO_EPOCH, NO_OFFSET)
    if higher == 0:  # below every epoch known: the epoch asked for, ending where the log's first begins
        return EpochEnd(epoch, entries[0].start_offset)
    return EpochEnd(entries[higher - 1].epoch, entries[higher].start_offset)


def epoch_for_offset(entries: Sequence[EpochEntry], offset: int) -> int:
    """The epoch of the batch holding ``offset`` (Kafka's ``epochForOffset``); -1 below the first entry
    or with none."""
    at = bisect.bisect_right([e.start_offset for e in entries], offset)
    return entries[at - 1].epoch if at else NO_EPOCH


# -- opening -------------------------------------------------------------------------------------------


def open_epochs(directory: str, segments: Sequence[Segment], log_start_offset: int) -> LeaderEpochs:
    """The leader epochs of the log whose recovered ``segments`` are given: the checkpoint file's,
    checked against the log and completed from the batch headers it does not cover (module docstring)."""
    first, end = segments[0].base_offset, segments[-1].end_offset
    saved = read_checkpoint(directory)
    if saved is None:
        epochs, covered = LeaderEpochs(directory), first
    else:
        entries, covered = saved
        epochs = LeaderEpochs(directory, entries, covered)
        epochs.truncate_from_end(min(covered, end))
    for _, _, header in headers_from(segments, max(min(covered, end), first)):
        epochs.note(header.term, header.base_offset)
    epochs.truncate_from_start(log_start_offset, end)
    return epochs


def read_checkpoint(directory: str) -> tuple[list[EpochEntry], int] | None:
    """The entries and covered end offset the checkpoint file holds; None when there is none or it
    cannot be read as one (logged: the file is rebuilt from the batches)."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s: unreadable, rebuilt from the log's batches: %s", path, exc)
        return None
    try:
        version, covered, count = (int(line) for line in lines[:3])
        rows = [line.split() for line in lines[3:]]
        entries = [EpochEntry(int(epoch), int(start)) for epoch, start in rows]
    except ValueError:
        version, covered, count, entries = -1, -1, -1, []
    pairs = itertools.pairwise(entries)
    monotonic = all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in pairs)
    valid = (
        version == CHECKPOINT_VERSION
        and count == len(entries)
        and covered >= 0
        and monotonic
        and all(e.epoch >= 0 and 0 <= e.start_offset < max(covered, 1) for e in entries)
    )
    if not valid:
        log.warning("%s: not a leader epoch checkpoint, rebuilt from the log's batches: %r", path, lines[:4])
        return None
    return entries, covered
