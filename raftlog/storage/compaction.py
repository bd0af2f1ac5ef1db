"""Which records log compaction keeps, and the batches that then hold them (pure: no files, no clock; time
comes in as ``now_ms``). Kafka's semantics for ``cleanup.policy`` ``compact``:

- The log splits into a *clean* head, compacted before, and a *dirty* rest from ``dirty_from``; the active
  segment, and every segment from the first that holds a record newer than ``min.compaction.lag.ms``, are
  *uncleanable* and never rewritten. A pass is due when the dirty share of the cleanable bytes reaches
  ``min.cleanable.dirty.ratio``, or when the first dirty record is older than ``max.compaction.lag.ms``
  (:func:`plan_cleaning`).
- A pass maps each key of the dirty part to its latest offset (:class:`KeyMap`, bounded: a full map ends
  the mapped part early, and the next pass goes on from there) and rewrites the cleanable segments keeping
  a record unless a later record of its key is mapped, its key is null, or it is a tombstone (a null
  value) that a pass has kept before and that is older than ``delete.retention.ms`` (:func:`keeps`): a
  reader that keeps up within that time sees every delete.
- Offsets never change. A batch that loses records keeps its base offset, term and producer fields; its
  last offset stretches over the batches removed after it, so the log stays dense batch by batch (each
  batch begins where the one before it ends, the invariant every reader and recovery checks), and a fetch
  at a removed offset answers the batch covering it, whose next record is the next one kept
  (:func:`rewrite`). Only when every record of a rewritten segment goes does one empty batch (no
  records) cover its offsets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from raftlog.storage.batch import BatchHeader, Record, encode_retained
from raftlog.storage.config import LogConfig

DIGEST_BYTES = 16  # a key is mapped by its digest: an entry costs the same whatever the key's size


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """What planning needs of a segment."""

    base_offset: int
    end_offset: int
    size_bytes: int
    first_timestamp_ms: int | None  # its first batch's (None: empty)
    max_timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """One pass: keys of ``[dirty_from, end_offset)`` are mapped, and the segments below ``end_offset``
    (a segment's base) are rewritten."""

    dirty_from: int
    end_offset: int
    dirty_bytes: int
    dirty_ratio: float
    overdue: bool  # max.compaction.lag.ms passed: cleaned whatever the ratio


def cleanable_end(segments: Sequence[SegmentSummary], now_ms: int, config: LogConfig) -> int:
    """The first uncleanable offset: the active (last) segment's base, or that of the first segment
    holding a record newer than ``min.compaction.lag.ms`` (when it is set: a record timestamped ahead of
    the clock holds nothing back without it, as in Kafka)."""
    if config.min_compaction_lag_ms <= 0:
        return segments[-1].base_offset
    for segment in segments[:-1]:
        newest = segment.max_timestamp_ms
        if newest is not None and now_ms - newest < config.min_compaction_lag_ms:
            return segment.base_offset
    return segments[-1].base_offset


def dirty_bytes(segments: Sequence[SegmentSummary], dirty_from: int, end_offset: int) -> int:
    """Bytes of the segments holding dirty records below ``end_offset``: Kafka's cleaner lag."""
    return sum(s.size_bytes for s in segments if s.end_offset > dirty_from and s.base_offset < end_offset)


def plan_cleaning(
    segments: Sequence[SegmentSummary], dirty_from: int, now_ms: int, config: LogConfig
) -> CleaningPlan | None:
    """The pass due now over a log whose segments are ``segments`` (the last one active), or None: the
    policy does not compact, nothing dirty is cleanable, or too little is and none of it is overdue."""
    if not config.compacted or len(segments) < 2:
        return None
    end = cleanable_end(segments, now_ms, config)
    dirty_from = max(dirty_from, segments[0].base_offset)
    if dirty_from >= end:
        return None
    dirty = dirty_bytes(segments, dirty_from, end)
    total = sum(s.size_bytes for s in segments if s.base_offset < end)
    ratio = dirty / total if total else 0.0
    first = next(s for s in segments if s.end_offset > dirty_from)
    overdue = (
        first.first_timestamp_ms is not None
        and now_ms - first.first_timestamp_ms >= config.max_compaction_lag_ms
    )
    if dirty == 0 or (ratio < config.min_cleanable_dirty_ratio and not overdue):
        return None
    return CleaningPlan(dirty_from, end, dirty, ratio, overdue)


def digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()


class KeyMap:
    """Each key's latest offset in the mapped part of the log, by digest, for at most ``keys_max`` keys."""

    def __init__(self, keys_max: int) -> None:
        self.keys_max = keys_max
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset`` (later than any mapped before); False, and nothing mapped, when the
        key is new and the map is full."""
        hashed = digest(key)
        if len(self._latest) >= self.keys_max and hashed not in self._latest:
            return False
        self._latest[hashed] = offset
        return True

    def latest(self, key: bytes) -> int | None:
        return self._latest.get(digest(key))


def keeps(record: Record, key_map: KeyMap, dirty_from: int, tombstones_before_ms: int) -> bool:
    """Whether a pass keeps ``record``: not when a later record of its key is mapped, when it has no key
    (none can be produced to a compacted topic; one written before the topic was compacted goes), or when
    it is a tombstone a pass kept before (below ``dirty_from``) timestamped before
    ``tombstones_before_ms`` (now less ``delete.retention.ms``)."""
    if record.key is None:
        return False
    latest = key_map.latest(record.key)
    if latest is not None and record.offset < latest:
        return False
    return not (
        record.value is None and record.offset < dirty_from and record.timestamp_ms < tombstones_before_ms
    )


@dataclass(frozen=True, slots=True)
class Filtered:
    """A stored batch after filtering: ``kept`` the records that survive, or None when all of them do
    (the batch is copied as it lies, or only its header changes)."""

    header: BatchHeader
    data: bytes
    kept: tuple[Record, ...] | None

    @property
    def survives(self) -> bool:
        return self.kept is None or bool(self.kept)


def rewrite(batches: Iterable[Filtered], base_offset: int, end_offset: int) -> Iterator[bytes]:
    """The batches of one rewritten segment, covering ``[base_offset, end_offset)`` exactly: each batch
    that keeps a record, its last offset stretched up to the next one's base (the last one's up to
    ``end_offset``), the first one's base brought down to ``base_offset``; when none keeps any, one empty
    batch with the last one's term and timestamp. Streams: one batch is held back at a time."""
    pending: Filtered | None = None
    pending_base = base_offset
    last: BatchHeader | None = None
    for batch in batches:
        last = batch.header
        if not batch.survives:
            continue
        if pending is not None:
            yield _stretched(pending, pending_base, batch.header.base_offset)
            pending_base = batch.header.base_offset
        pending = batch
    if pending is None:
        timestamp_ms, term = (0, 0) if last is None else (last.max_timestamp_ms, last.term)
        yield encode_retained(None, None, (), base_offset, end_offset, timestamp_ms, term)
    else:
        yield _stretched(pending, pending_base, end_offset)


def _stretched(batch: Filtered, base_offset: int, end_offset: int) -> bytes:
    header = batch.header
    if batch.kept is None and base_offset == header.base_offset and end_offset == header.end_offset:
        return batch.data  # untouched
    return encode_retained(batch.data, header, batch.kept, base_offset, end_offset)
