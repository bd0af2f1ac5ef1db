"""Cutting a log: what takes segments away or puts others in their place, apart from appends and rolls.

Truncation at the end (a replica dropping entries its leader never committed), moving the start (deleted
records, a replica jumping past its leader's log start), deleting the oldest segments (retention) and
swapping in a segment compaction wrote. These are operations of :class:`~raftlog.storage.log.Log`, kept
beside it so the log's module holds its appends, flushes and reads: each takes the log's lock and changes
its segment list, offsets and checkpoints as the log's own methods do. ``Log`` calls them for its public
``truncate``, ``truncate_fully_and_start_at``, ``advance_start`` and ``restart_empty_before``; the cleaner
(``raftlog.storage.cleaner``) holds, releases and replaces segments through them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from raftlog.errors import InvariantViolation
from raftlog.storage import swap
from raftlog.storage.errors import CorruptRecord, OffsetOutOfRange, StorageError, StorageUnavailable
from raftlog.storage.log_open import write_start_offset
from raftlog.storage.log_state import LogState
from raftlog.storage.segment import Segment
from raftlog.storage.transactions import open_transactions


def delete_oldest_segments(log: LogState, count: int) -> int:
    """Delete up to ``count`` of the log's leading segments, oldest first, never its last; how many went
    (retention, deleted records)."""
    with log._lock:
        log._check_writable()
        deleted = 0
        while deleted < count and len(log._segments) > 1:
            log._bases.pop(0)
            log._segments.pop(0).delete(log._discard)
            deleted += 1
        log.leader_epochs.truncate_from_start(log.log_start_offset, log.end_offset)
        log.transactions.truncate_from_start(log.log_start_offset)
        return deleted


def _begin_at(log: LogState, segment: Segment, offset: int) -> None:
    """The log becomes ``segment``, empty and beginning at ``offset``, the segments before it deleted
    already; what described the old records (leader epochs, transactions) is forgotten. Under its lock."""
    log._segments = [segment]
    log._bases = [offset]
    log._unflushed_bytes = 0
    log._durable_end_offset = offset
    log._truncations += 1
    log.leader_epochs.clear()
    log.transactions.clear()
    log.transactions.save_if_behind(offset)


def hold_closed_segments(log: LogState) -> tuple[list[Segment], int]:
    """The log's closed segments, each held (``Segment.acquire``: the caller releases each under the
    log's lock), and the active segment's base; none of a closed or failed log."""
    with log._lock:
        if log._closed or log._failed is not None:
            return [], log._segments[-1].base_offset
        closed = log._segments[:-1]
        for segment in closed:
            segment.acquire()
        return closed, log._segments[-1].base_offset


def release_held(log: LogState, segments: Sequence[Segment]) -> None:
    """Let go of segments :func:`hold_closed_segments` held (a deleted one's files go to their discard)."""
    with log._lock:
        for segment in segments:
            segment.release()


def replace_segments(log: LogState, old: Sequence[Segment]) -> bool:
    """The segment compaction staged beside ``old`` (a run of the log's closed segments, in order; staged
    at the first one's base) takes their place (``raftlog.storage.swap``). False, and nothing changed, when
    they are no longer the log's (retention, deleted records or a truncation took one meanwhile): the
    caller removes the staged files. A failure after the commit point fails the log: opening it again
    finishes the swap."""
    with log._lock:
        if log._closed or log._failed is not None:
            return False
        segments = log._segments
        first = next((i for i, segment in enumerate(segments) if segment is old[0]), None)
        after = None if first is None else first + len(old)
        if (
            after is None
            or after >= len(segments)
            or any(a is not b for a, b in zip(segments[first:after], old, strict=True))
        ):
            return False
        base = old[0].base_offset
        swap.commit(log.directory, base)
        try:
            for segment in old:
                segment.delete(log._discard)
            swap.finish(log.directory, base)
            cleaned = Segment(log.directory, base, log.config.index_interval_bytes)
            cleaned.recover_closed(segments[after].base_offset)
        except (OSError, CorruptRecord) as exc:
            log._fail(f"swapping in the compacted segment at {base}: {exc}")
            raise StorageUnavailable(log.directory, str(exc)) from exc
        segments[first:after] = [cleaned]
        log._bases[first:after] = [base]
        return True


def truncate(log: LogState, offset: int) -> None:
    """Discard every record at or after ``offset`` (a batch boundary). Used by a replica to drop entries
    its leader never committed, and by recovery to take a peer's compacted batch in place of the records
    it covers (``partitions.replicas.recovery``). Later segments are deleted newest first, so a crash
    midway leaves a consistent prefix."""
    with log._lock:
        log._check_writable()
        log._check_offset(offset)
        log._touch()
        if offset == log.end_offset:
            return
        index = log._segment_index(offset)
        segment = log._segments[index]
        if offset == segment.base_offset and index > 0:
            keep = index  # the previous segment ends exactly here
        else:
            keep = index + 1
            segment.check_boundary(offset)  # before deleting anything
        # the checkpoint first: a crash from here on finds no epoch of a batch cut (one it claims that is
        # still there when the log reopens is found again from the batch headers)
        epochs, kept = log.leader_epochs, log.leader_epochs.entries
        epochs.truncate_from_end(offset)
        try:
            epochs.save(offset)
        except StorageError:
            epochs.entries = kept  # nothing cut: the log stays as it was
            raise
        while len(log._segments) > keep:
            doomed = log._segments.pop()
            log._bases.pop()
            doomed.delete(log._discard)
        log._segments[-1].truncate_to(offset)
        log._segments[-1].first_append_ms = None
        log._unflushed_bytes = 0
        log._durable_end_offset = min(log._durable_end_offset, log.end_offset)
        log._truncations += 1
        # a marker cut opens its transaction again, and only the batches say where it began: walked
        # again (from a checkpoint below the cut), and saved before the log takes another append
        log.transactions = open_transactions(log.directory, log._segments, log.log_start_offset)
        log.transactions.save_if_behind(log.end_offset)


def truncate_fully_and_start_at(log: LogState, offset: int) -> None:
    """Replace the whole log with an empty one starting at ``offset`` (>= end offset): a replica that
    fell behind its leader's log start jumps forward. Crash-safe through the start-offset file."""
    with log._lock:
        log._check_writable()
        if offset < log.end_offset:
            raise OffsetOutOfRange(offset, log.end_offset, 2**63 - 1)
        log._touch()
        start = max(offset, log._start_offset)
        write_start_offset(log.directory, start)  # a crash from here on reopens the log starting there
        log._start_offset = start
        active = log._segments[-1]
        if active.base_offset == offset:  # empty, starting there already (offset == end offset)
            keep = active
        else:  # made first: no room for it (DiskFull) leaves the log as it was
            keep = Segment.create(log.directory, offset, log.config.index_interval_bytes)
        for segment in reversed(log._segments):
            if segment is not keep:
                segment.delete(log._discard)
        _begin_at(log, keep, offset)
        log.leader_epochs.save_if_behind(offset)


def advance_start(log: LogState, offset: int) -> int:
    """Move the log start offset up to ``offset`` (Kafka's DeleteRecords); returns the start offset.
    Records below it are no longer read; the segments wholly below it are deleted, the one holding it
    stays (the start may lie inside a batch). Never moves it back. Past the end (a replica behind its
    peers) the log keeps what it has, and recovery restarts it there. Crash-safe: the start offset is
    on disk (fsynced) before any segment goes."""
    with log._lock:
        log._check_writable()
        if offset <= log.log_start_offset:
            return log.log_start_offset
        log._touch()
        write_start_offset(log.directory, offset)
        log._start_offset = offset
        delete_oldest_segments(log, bisect.bisect_right(log._bases, offset) - 1)  # those wholly below it
        log.leader_epochs.truncate_from_start(offset, log.end_offset)
        log.transactions.truncate_from_start(offset)
        return offset


def restart_empty_before(log: LogState, offset: int) -> None:
    """An empty log restarted at its start offset (a replica behind its peers) begins at ``offset``
    instead, below its start: the first batch its peers hold there begins at ``offset`` (the start
    lies inside it) and is copied whole. The start offset stays."""
    with log._lock:
        log._check_writable()
        empty = log._segments[-1]
        if len(log._segments) != 1 or not empty.is_empty or offset > empty.base_offset:
            raise InvariantViolation(
                f"{log.directory}: restart before {empty.base_offset} at {offset} of a log that is "
                f"not empty there ({len(log._segments)} segments, end {log.end_offset})"
            )
        if offset == empty.base_offset:
            return
        log._touch()
        # made first: a crash between leaves it empty below the other, and opening drops it (wholly
        # below the start offset); no room (DiskFull) leaves the log as it was
        begun = Segment.create(log.directory, offset, log.config.index_interval_bytes)
        empty.delete(log._discard)
        _begin_at(log, begun, offset)
