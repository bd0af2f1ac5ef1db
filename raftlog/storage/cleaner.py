"""Log compaction's passes (Kafka's log cleaner): which records go is ``raftlog.storage.compaction``'s
decision, how a rewritten segment takes the old ones' place is ``raftlog.storage.swap``'s; here a pass
reads, maps, writes and swaps; ``raftlog.storage.cleaner_threads`` runs passes on threads of their own.

Each replica cleans its own copy of a partition, as each Kafka broker does: compaction changes no offset
and no record that a reader could still need, so replicas that hold the same records stay equal record
for record once each has cleaned them, and a replica recovering from a compacted peer copies the
compacted batches as they are.

A pass over one log (:func:`clean_log`):

1. The closed segments are held (readers, retention and the swap go on around them) and the pass
   planned (``plan_cleaning``); nothing is due, nothing is done.
2. The dirty part's keys are mapped to their latest offsets (a bounded map; a full one ends the mapped
   part early, and the next pass goes on from there).
3. The cleaner's offsets are written (``rewritten_below``: batches below it may be rewritten from now on,
   so the Raft replay compares no batch there with its entry) before any rewritten batch exists.
4. The segments below the plan's end, in groups that fit one segment, are each rewritten into a staged
   segment beside them (fsynced) and swapped in under the log's lock; a group whose segments changed
   meanwhile (retention, deleted records) ends the pass, its staged files removed.
5. The cleaner's offsets move ``dirty_from`` to where the map ended.

A crash anywhere leaves the old segments or the rewritten one (``raftlog.storage.swap``), and at worst a
``dirty_from`` behind what was cleaned: the next pass cleans it again, which changes nothing.

Transactions: a segment holding a batch at or past the log's last stable offset is never cleaned (a
transaction still open there may yet abort); control batches stay whole, and an aborted transaction's
records map no key and all go, as in Kafka.

Pacing: every byte read or written passes ``pace`` (a token bucket of ``rate_bytes_per_s`` per node), so
a pass never takes more of the disk, or of the interpreter the event loop shares, than that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from raftlog.storage import swap
from raftlog.storage.batch import BatchHeader, Record, decode_header, decode_records
from raftlog.storage.compaction import (
    Filtered,
    KeyMap,
    SegmentSummary,
    keeps,
    plan_cleaning,
    rewrite,
)
from raftlog.storage.defaults import CLEANER_INTERVAL_MS_DEFAULT, CLEANER_RATE_BYTES_PER_S_DEFAULT
from raftlog.storage.log import _MAX_RELATIVE_OFFSET, Log, last_stable_offset
from raftlog.storage.log_cut import hold_closed_segments, release_held, replace_segments
from raftlog.storage.log_open import CleanerOffsets, read_cleaner_offsets, write_cleaner_offsets
from raftlog.storage.segment import Segment, walk_headers

log = logging.getLogger("raftlog.cleaner")

MiB = 1024 * 1024
KEYS_MAX_DEFAULT = 1_000_000  # a map entry costs ~150 bytes: ~150 MB at most, for one log at a time
RATE_BYTES_PER_S_DEFAULT = CLEANER_RATE_BYTES_PER_S_DEFAULT
INTERVAL_MS_DEFAULT = CLEANER_INTERVAL_MS_DEFAULT
_CONTROL = 0x20


@dataclass(slots=True)
class PassReport:
    """What one pass over one log did."""

    directory: str
    dirty_from: int
    mapped_to: int  # keys of [dirty_from, mapped_to) were mapped: the next pass's dirty_from
    rewritten_below: int
    segments_before: int = 0
    segments_after: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    seconds: float = 0.0
    completed: bool = True  # False: a group's segments changed under the pass, which stopped there

    @property
    def bytes_reclaimed(self) -> int:
        return self.bytes_read - self.bytes_written


def summary(segment: Segment) -> SegmentSummary:
    """A held closed segment, as planning sees it (its first batch's header read)."""
    first = next(walk_headers(segment.fd, 0, segment.size), None)
    return SegmentSummary(
        segment.base_offset,
        segment.end_offset,
        segment.size,
        None if first is None else first[1].first_timestamp_ms,
        segment.max_timestamp_ms,
    )


def clean_log(
    log_: Log,
    now_ms: int,
    keys_max: int = KEYS_MAX_DEFAULT,
    pace: Callable[[int], None] = lambda _: None,
) -> PassReport | None:
    """One pass over ``log_`` if one is due (see the module's docstring); None when none is."""
    started = time.monotonic()
    closed, active_base = hold_closed_segments(log_)
    try:
        stable = last_stable_offset(log_)  # a transaction still open is never cleaned (as Kafka's cleaner)
        closed = [s for s in closed if s.end_offset <= stable] if stable < active_base else closed
        if not closed:
            return None
        active_base = min(active_base, stable)
        offsets = read_cleaner_offsets(log_.directory)
        summaries = [summary(s) for s in closed] + [SegmentSummary(active_base, active_base, 0, None, None)]
        plan = plan_cleaning(summaries, offsets.dirty_from, now_ms, log_.config)
        if plan is None:
            return None
        cleanable = [s for s in closed if s.base_offset < plan.end_offset]
        aborted = _aborted_batches(log_)
        key_map, mapped_to = _map_keys(cleanable, plan.dirty_from, plan.end_offset, keys_max, pace, aborted)
        rewrite_end = plan.end_offset
        if mapped_to < plan.end_offset:  # the map filled: rewrite up to the end of the segment it stopped in
            rewrite_end = next(s.end_offset for s in cleanable if s.end_offset >= mapped_to)
        rewritten_below = _note(log_, rewritten_below=rewrite_end).rewritten_below
        report = PassReport(log_.directory, plan.dirty_from, mapped_to, rewritten_below)
        tombstones_before_ms = now_ms - log_.config.delete_retention_ms
        rewriting = _Rewriting(key_map, plan.dirty_from, tombstones_before_ms, aborted, pace, report)
        for group in _groups(
            [s for s in cleanable if s.base_offset < rewrite_end], log_.config.segment_bytes
        ):
            report.segments_before += len(group)
            if not _rewrite_group(log_, group, rewriting):
                report.segments_after += len(group)
                continue
            if not replace_segments(log_, group):
                swap.remove_staged(log_.directory, group[0].base_offset)
                report.completed = False
                break
            report.segments_after += 1
        if report.completed:
            _note(log_, dirty_from=mapped_to)
        report.seconds = time.monotonic() - started
        return report
    finally:
        release_held(log_, closed)


def _aborted_batches(log_: Log) -> Callable[[BatchHeader], bool]:
    """Whether a stored batch holds records of an aborted transaction: they map no key and all go, as
    Kafka's cleaner discards them (a read_committed reader never saw them)."""
    transactions = log_.transactions

    def aborted(header: BatchHeader) -> bool:
        return (
            header.is_transactional
            and header.producer_id is not None
            and transactions.is_aborted(header.producer_id, header.base_offset)
        )

    return aborted


def _map_keys(
    segments: Sequence[Segment],
    dirty_from: int,
    end_offset: int,
    keys_max: int,
    pace: Callable[[int], None],
    aborted: Callable[[BatchHeader], bool],
) -> tuple[KeyMap, int]:
    """Each key of ``[dirty_from, end_offset)`` to its latest offset, and where the mapping stopped
    (``end_offset``, or the first record a full map had no room for). Control batches and aborted
    transactions' records map nothing."""
    key_map = KeyMap(keys_max)
    for segment in segments:
        if segment.end_offset <= dirty_from:
            continue
        for _, header, view in segment.batches(0):
            pace(header.size_bytes)
            if header.end_offset <= dirty_from or header.attributes & _CONTROL or aborted(header):
                continue
            for record in decode_records(view, header):
                if record.offset < dirty_from or record.key is None:
                    continue
                if not key_map.put(record.key, record.offset):
                    return key_map, record.offset
    return key_map, end_offset


def _groups(segments: Sequence[Segment], segment_bytes: int) -> Iterator[list[Segment]]:
    """Consecutive segments rewritten into one: while their bytes fit ``segment.bytes`` and their offsets
    one segment's index (Kafka groups them alike)."""
    group: list[Segment] = []
    for segment in segments:
        if group and (
            sum(s.size for s in group) + segment.size > segment_bytes
            or segment.end_offset - group[0].base_offset > _MAX_RELATIVE_OFFSET
        ):
            yield group
            group = []
        group.append(segment)
    if group:
        yield group


@dataclass(frozen=True, slots=True)
class _Rewriting:
    """What a pass's rewrite of each group of segments goes by: which records stay (``keeps``, with the key
    map, where the dirty part begins and which tombstones expired; ``aborted``: a batch of an aborted
    transaction, whose records all go), the pacing of its reads and writes, and the report it counts in."""

    key_map: KeyMap
    dirty_from: int
    tombstones_before_ms: int
    aborted: Callable[[BatchHeader], bool]
    pace: Callable[[int], None]
    report: PassReport

    def kept(self, header: BatchHeader, records: Sequence[Record]) -> tuple[Record, ...]:
        """The batch's records that stay."""
        if self.aborted(header):
            return ()
        return tuple(r for r in records if keeps(r, self.key_map, self.dirty_from, self.tombstones_before_ms))


def _filtered(group: Sequence[Segment], rewriting: _Rewriting) -> Iterator[Filtered]:
    """Control batches stay whole; an aborted transaction's records all go."""
    report, pace = rewriting.report, rewriting.pace
    for segment in group:
        for _, header, view in segment.batches(0):
            pace(header.size_bytes)
            report.bytes_read += header.size_bytes
            if header.attributes & _CONTROL:
                yield Filtered(header, bytes(view), None)
                continue
            records = decode_records(view, header)
            kept = rewriting.kept(header, records)
            report.records_read += len(records)
            report.records_removed += len(records) - len(kept)
            yield Filtered(header, bytes(view), None if len(kept) == len(records) else kept)


def _rewrite_group(log_: Log, group: Sequence[Segment], rewriting: _Rewriting) -> bool:
    """Write the group's records that stay into a staged segment (fsynced). False, and nothing staged,
    when the group is one segment of which no record goes: there is nothing to swap."""
    directory, base = log_.directory, group[0].base_offset
    report, pace = rewriting.report, rewriting.pace
    swap.remove_staged(directory, base)  # what a failed attempt of this process left
    removed_before, read_before, written_before = (
        report.records_removed,
        report.bytes_read,
        report.bytes_written,
    )
    staged = Segment.create(directory, base, log_.config.index_interval_bytes, staged=swap.STAGED)
    try:
        batches = _filtered(group, rewriting)
        for batch in rewrite(batches, base, group[-1].end_offset):
            staged.append(batch, decode_header(batch), 0)
            report.bytes_written += len(batch)
            pace(len(batch))
        staged.seal()
    except BaseException:
        staged.close()
        swap.remove_staged(directory, base)
        raise
    staged.close()
    if len(group) == 1 and report.records_removed == removed_before:
        swap.remove_staged(directory, base)
        report.bytes_written = written_before + (report.bytes_read - read_before)  # kept as it was
        return False
    return True


def note_rewritten(log_: Log, end_offset: int) -> None:
    """Batches below ``end_offset`` may differ from those first appended (copied from a peer that
    compacted them): recorded before they are written, for the replay (``Log.compacted_below``)."""
    _note(log_, rewritten_below=end_offset)


_OFFSETS_LOCK = threading.Lock()  # passes and recoveries both move a log's cleaner offsets


def _note(log_: Log, dirty_from: int | None = None, rewritten_below: int = 0) -> CleanerOffsets:
    """Move a log's cleaner offsets: ``dirty_from`` to the value given, ``rewritten_below`` up only;
    written (fsynced) before anything relies on them."""
    with _OFFSETS_LOCK:
        now = read_cleaner_offsets(log_.directory)
        moved = CleanerOffsets(
            now.dirty_from if dirty_from is None else dirty_from, max(now.rewritten_below, rewritten_below)
        )
        if moved != now:
            write_cleaner_offsets(log_.directory, moved)
        log_.compacted_below = max(log_.compacted_below, moved.rewritten_below)
        return moved
