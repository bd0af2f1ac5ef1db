"""The pure retention decision against a brute-force reading of its rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.storage.retention import SegmentInfo, segments_to_delete


def reference(segments: list[SegmentInfo], retention_ms: int, retention_bytes: int, now_ms: int) -> int:
    """The largest k < len(segments) such that deleting the first k segments is allowed by some rule:
    by time, every one of them holds only records older than retention_ms; by size, what is left still
    holds at least retention_bytes. -1 switches a rule off."""
    best = 0
    for k in range(len(segments)):  # never k == len: the active segment stays
        deleted, kept = segments[:k], segments[k:]
        by_time = retention_ms != -1 and all(
            s.max_timestamp_ms is not None and s.max_timestamp_ms < now_ms - retention_ms for s in deleted
        )
        by_size = retention_bytes != -1 and sum(s.size_bytes for s in kept) >= retention_bytes
        if by_time or by_size:
            best = k
    return best


segment_lists = st.lists(
    st.builds(
        SegmentInfo,
        base_offset=st.just(0),
        size_bytes=st.integers(min_value=0, max_value=500),
        max_timestamp_ms=st.none() | st.integers(min_value=0, max_value=1000),
    ),
    min_size=1,
    max_size=8,
)
limits = st.just(-1) | st.integers(min_value=0, max_value=2000)


@settings(max_examples=1000)
@given(segments=segment_lists, retention_ms=limits, retention_bytes=limits, now_ms=st.integers(0, 2000))
def test_matches_brute_force(segments, retention_ms, retention_bytes, now_ms):
    count = segments_to_delete(segments, retention_ms, retention_bytes, now_ms)
    assert count == reference(segments, retention_ms, retention_bytes, now_ms)
    assert 0 <= count < len(segments)


def info(size_bytes: int, max_timestamp_ms: int | None) -> SegmentInfo:
    return SegmentInfo(0, size_bytes, max_timestamp_ms)


def test_never_deletes_the_active_segment_even_when_everything_expired():
    segments = [info(100, 1), info(100, 2), info(100, 3)]
    assert segments_to_delete(segments, retention_ms=1, retention_bytes=-1, now_ms=10_000) == 2
    assert segments_to_delete(segments, retention_ms=-1, retention_bytes=1, now_ms=0) == 2
    assert segments_to_delete([info(100, 1)], retention_ms=1, retention_bytes=1, now_ms=10_000) == 0


def test_both_limits_off_deletes_nothing():
    segments = [info(10**9, 0)] * 5
    assert segments_to_delete(segments, retention_ms=-1, retention_bytes=-1, now_ms=10**12) == 0


def test_time_rule_stops_at_the_first_segment_still_in_retention():
    # the third segment is old again, but deleting it would leave a hole: the log stays a suffix
    segments = [info(1, 100), info(1, 900), info(1, 100), info(1, 100)]
    assert segments_to_delete(segments, retention_ms=500, retention_bytes=-1, now_ms=1000) == 1


def test_time_rule_is_strict_at_the_boundary():
    segments = [info(1, 500), info(1, 2000)]
    assert segments_to_delete(segments, retention_ms=500, retention_bytes=-1, now_ms=1000) == 0
    assert segments_to_delete(segments, retention_ms=500, retention_bytes=-1, now_ms=1001) == 1


def test_size_rule_keeps_at_least_retention_bytes():
    segments = [info(100, 0), info(100, 0), info(100, 0), info(50, 0)]  # 350 bytes
    assert segments_to_delete(segments, retention_ms=-1, retention_bytes=250, now_ms=0) == 1
    assert segments_to_delete(segments, retention_ms=-1, retention_bytes=150, now_ms=0) == 2
    assert segments_to_delete(segments, retention_ms=-1, retention_bytes=151, now_ms=0) == 1
    assert segments_to_delete(segments, retention_ms=-1, retention_bytes=351, now_ms=0) == 0


def test_a_segment_without_records_is_not_expired_by_time():
    segments = [info(0, None), info(10, 1)]
    assert segments_to_delete(segments, retention_ms=1, retention_bytes=-1, now_ms=10**9) == 0
