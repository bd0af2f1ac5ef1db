"""Which segments retention deletes (pure: no files, no clock; time comes in as ``now_ms``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    size_bytes: int
    max_timestamp_ms: int | None


def segments_to_delete(
    segments: Sequence[SegmentInfo], retention_ms: int, retention_bytes: int, now_ms: int
) -> int:
    """How many leading segments to delete. The last (active) segment is never counted.

    By time: leading segments whose newest record is older than ``retention_ms``.
    By size: leading segments while the log without them still holds at least ``retention_bytes``.
    Either limit is off when -1. Deletion stops at the first segment no rule applies to, so the log stays a
    contiguous suffix.
    """
    closed = segments[:-1]
    count = 0
    if retention_ms >= 0:
        cutoff = now_ms - retention_ms
        while count < len(closed):
            newest = closed[count].max_timestamp_ms
            if newest is None or newest >= cutoff:
                break
            count += 1
    if retention_bytes >= 0:
        excess = sum(s.size_bytes for s in segments) - retention_bytes
        by_size = 0
        while by_size < len(closed) and excess >= closed[by_size].size_bytes:
            excess -= closed[by_size].size_bytes
            by_size += 1
        count = max(count, by_size)
    return count
