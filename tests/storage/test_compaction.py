"""Log compaction (cleanup.policy compact): which records a pass keeps (Kafka's rules), that offsets never
change and the log stays dense batch by batch, that reads at removed offsets answer the next record kept,
and that a crash at any step of a pass, or at any byte of the segment it writes, leaves the old segments or
the rewritten one."""

from __future__ import annotations

import os
import random

import pytest

from raftlog.storage import Log, ProducerRecord
from raftlog.storage.batch import encode_batch, verify
from raftlog.storage.cleaner import clean_log
from raftlog.storage.cleaner_threads import Cleaner
from raftlog.storage.compaction import (
    Filtered,
    KeyMap,
    SegmentSummary,
    keeps,
    plan_cleaning,
    rewrite,
)
from raftlog.storage.config import LogConfig
from raftlog.storage.segment import Segment
from raftlog.storage.swap import STAGED, SWAP
from tests.storage.helpers import FakeClock, abandon, read_all, small_config
from tests.storage.test_log import Crash

DAY_MS = 24 * 3600 * 1000


def compacted(**overrides: object) -> LogConfig:
    values: dict[str, object] = {
        "cleanup_policy": "compact",
        "min_cleanable_dirty_ratio": 0.01,
        "segment_bytes": 1024,
    }
    values.update(overrides)
    return small_config(**values)


def write(log: Log, rng: random.Random, count: int, keys: int, tombstones: float = 0.1) -> dict[bytes, tuple]:
    """Keyed records, some of them tombstones, in batches of 1-3; returns each key's last (offset, value)."""
    latest: dict[bytes, tuple] = {}
    written = 0
    while written < count:
        batch = []
        for _ in range(min(rng.randint(1, 3), count - written)):
            key = b"k%d" % rng.randrange(keys)
            value = None if rng.random() < tombstones else b"v%d-" % written + b"x" * rng.randrange(40)
            batch.append(ProducerRecord(value, key))
            written += 1
        result = log.append(batch)
        for position, record in enumerate(batch):
            latest[record.key] = (result.base_offset + position, record.value)
    return latest


def as_rows(records) -> list[tuple]:
    return [(r.offset, r.key, r.value) for r in records]


def assert_dense(log: Log) -> None:
    """Every batch begins where the one before it ends, from the first segment's base to the log's end."""
    expected = log._segments[0].base_offset
    for segment in log._segments:
        for _, header, _ in segment.batches(0):
            assert header.base_offset == expected
            expected = header.end_offset
    assert expected == log.end_offset


# -- the pure rules -----------------------------------------------------------------------------------


def summaries(*segments: tuple[int, int, int, int]) -> list[SegmentSummary]:
    """(base, end, size, newest timestamp) per segment, the last one active."""
    return [SegmentSummary(b, e, size, ts, ts) for b, e, size, ts in segments]


def test_a_pass_is_due_once_the_dirty_share_reaches_the_ratio():
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.5)
    segments = summaries((0, 10, 100, 1), (10, 20, 100, 1), (20, 30, 100, 1), (30, 30, 0, None))
    plan = plan_cleaning(segments, 10, 1000, config)
    assert plan is not None and (plan.dirty_from, plan.end_offset, plan.dirty_bytes) == (10, 30, 200)
    assert plan_cleaning(segments, 20, 1000, config) is None  # a third dirty: below the ratio
    assert plan_cleaning(segments, 30, 1000, config) is None  # nothing dirty
    assert plan_cleaning(segments, 0, 1000, LogConfig(cleanup_policy="delete")) is None


def test_min_lag_keeps_new_segments_out_and_max_lag_forces_a_pass():
    segments = summaries((0, 10, 100, 850), (10, 20, 100, 950), (20, 20, 0, None))
    plan = plan_cleaning(
        segments, 0, 1000, LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.1)
    )
    assert plan is not None and plan.end_offset == 20
    lagging = LogConfig(cleanup_policy="compact", min_compaction_lag_ms=100, min_cleanable_dirty_ratio=0.1)
    plan = plan_cleaning(segments, 0, 1000, lagging)
    assert plan is not None and plan.end_offset == 10  # the second segment holds a record 50 ms old
    segments = summaries((0, 10, 100, 850), (10, 20, 900, 900), (20, 20, 0, None))
    assert (
        plan_cleaning(segments, 10, 1000, LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.95))
        is None
    )
    overdue = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.95, max_compaction_lag_ms=100)
    plan = plan_cleaning(segments, 10, 1000, overdue)
    assert plan is not None and plan.overdue and plan.dirty_ratio == 0.9


def test_what_a_pass_keeps():
    key_map = KeyMap(10)
    key_map.put(b"a", 7)

    def record(offset, key, value, ts=0):
        return encode_batch(offset, [ProducerRecord(value, key, timestamp_ms=ts)], 0, 0)

    from raftlog.storage.batch import decode_records

    def one(offset, key, value, ts=0):
        batch = record(offset, key, value, ts)
        return decode_records(batch, verify(batch))[0]

    assert not keeps(one(3, b"a", b"old"), key_map, 5, 100)  # a later record of its key is mapped
    assert keeps(one(7, b"a", b"new"), key_map, 5, 100)
    assert keeps(one(3, b"b", b"only"), key_map, 5, 100)
    assert not keeps(one(3, None, b"keyless"), key_map, 5, 100)
    assert not keeps(one(3, b"b", None, ts=50), key_map, 5, 100)  # a tombstone a pass kept, old enough
    assert keeps(one(3, b"b", None, ts=150), key_map, 5, 100)  # not old enough yet
    assert keeps(one(6, b"b", None, ts=50), key_map, 5, 100)  # dirty: kept this once


def test_a_full_key_map_refuses_new_keys_only():
    key_map = KeyMap(2)
    assert key_map.put(b"a", 1) and key_map.put(b"b", 2)
    assert not key_map.put(b"c", 3)
    assert key_map.put(b"a", 4) and key_map.latest(b"a") == 4 and key_map.latest(b"c") is None


def test_rewritten_batches_cover_every_offset_and_keep_each_records_offset():
    batches = [
        encode_batch(base, [ProducerRecord(b"v%d" % i, b"k%d" % i) for i in range(3)], 2, 1000)
        for base in (10, 13, 16)
    ]
    from raftlog.storage.batch import decode_records

    filtered = []
    for data in batches:
        header = verify(data)
        records = decode_records(data, header)
        filtered.append((header, data, records))
    kept = [
        Filtered(filtered[0][0], filtered[0][1], ()),  # all gone
        Filtered(filtered[1][0], filtered[1][1], (filtered[1][2][1],)),  # offset 14 stays
        Filtered(filtered[2][0], filtered[2][1], None),  # all stay
    ]
    out = list(rewrite(kept, 10, 19))
    headers = [verify(b) for b in out]
    assert [(h.base_offset, h.end_offset, h.record_count, h.term) for h in headers] == [
        (10, 16, 1, 2),
        (16, 19, 3, 2),
    ]
    assert [r.offset for r in decode_records(out[0], headers[0])] == [14]
    assert out[1] == batches[2]  # untouched
    empty = list(rewrite([Filtered(filtered[0][0], filtered[0][1], ())], 10, 13))
    header = verify(empty[0])
    assert (header.base_offset, header.end_offset, header.record_count) == (10, 13, 0)
    assert (header.max_timestamp_ms, header.term) == (1000, 2)  # the last batch's


# -- passes over a log --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_a_pass_keeps_each_keys_latest_record_at_its_offset(memory_path, seed):
    rng = random.Random(seed)
    clock = FakeClock()
    log = Log.open(str(memory_path), compacted(), clock=clock)
    write(log, rng, 400, keys=rng.choice([3, 20, 80]))
    log.roll()
    tail = write(log, rng, 5, keys=3)
    before = read_all(log)
    cleanable_end = log._segments[-1].base_offset
    report = clean_log(log, clock())
    assert report is not None and report.completed and report.records_removed > 0
    after = read_all(log)
    latest = {}
    for r in before:
        if r.offset < cleanable_end:
            latest[r.key] = r.offset
    expected = [r for r in before if r.offset >= cleanable_end or latest[r.key] == r.offset]
    assert as_rows(after) == as_rows(expected)  # offsets, keys and values unchanged; the rest gone
    assert [r.timestamp_ms for r in after] == [r.timestamp_ms for r in expected]
    assert log.end_offset == before[-1].offset + 1
    assert_dense(log)
    for r in before:  # a read at any offset answers the first record kept at or after it
        first = next(x for x in expected if x.offset >= r.offset)
        assert log.read(r.offset, 1)[0].offset == first.offset
    assert tail  # the active segment's records are all there
    log.close()
    with Log.open(str(memory_path), compacted(), clock=clock) as reopened:
        assert as_rows(read_all(reopened)) == as_rows(expected)
        assert reopened.compacted_below == cleanable_end
        assert clean_log(reopened, clock()) is None  # nothing dirty: no pass


def test_tombstones_stay_for_delete_retention_then_go(memory_path):
    clock = FakeClock()
    log = Log.open(str(memory_path), compacted(delete_retention_ms=DAY_MS), clock=clock)
    log.append([ProducerRecord(b"v", b"gone")])
    log.append([ProducerRecord(b"keep", b"kept")])
    log.append([ProducerRecord(None, b"gone")])
    log.roll()
    log.append([ProducerRecord(b"x", b"other")])
    clean_log(log, clock())
    assert as_rows(read_all(log)) == [(1, b"kept", b"keep"), (2, b"gone", None), (3, b"other", b"x")]
    log.roll()
    log.append([ProducerRecord(b"y", b"other")])
    assert clean_log(log, clock() + DAY_MS // 2) is not None
    assert (2, b"gone", None) in as_rows(read_all(log))  # not yet delete.retention.ms old
    log.roll()
    log.append([ProducerRecord(b"z", b"other")])
    clean_log(log, clock() + DAY_MS + 1)
    assert as_rows(read_all(log)) == [(1, b"kept", b"keep"), (4, b"other", b"y"), (5, b"other", b"z")]
    assert_dense(log)
    log.close()


def test_the_active_segment_and_recent_ones_are_never_cleaned(memory_path):
    clock = FakeClock()
    log = Log.open(str(memory_path), compacted(min_compaction_lag_ms=60_000), clock=clock)
    for i in range(30):
        log.append([ProducerRecord(b"%d" % i, b"same")])
    log.roll()
    log.append([ProducerRecord(b"active", b"same")])
    before = read_all(log)
    assert clean_log(log, clock()) is None  # every closed segment holds a record under a minute old
    report = clean_log(log, clock() + 60_000)
    assert report is not None
    after = read_all(log)
    assert as_rows(after) == [(29, b"same", b"29"), (30, b"same", b"active")]
    assert after[-1] == before[-1]
    log.close()


def test_a_delete_policy_log_is_never_compacted_and_a_compact_one_never_retained(memory_path):
    clock = FakeClock()
    deleting = Log.open(str(memory_path / "d"), small_config(retention_ms=1000), clock=clock)
    keeping = Log.open(str(memory_path / "c"), compacted(retention_ms=1000), clock=clock)
    for log in (deleting, keeping):
        for i in range(40):
            log.append([ProducerRecord(b"%d" % i, b"k%d" % (i % 2))])
        log.roll()
        log.append([ProducerRecord(b"last", b"k0")])
    assert clean_log(deleting, clock()) is None
    clock.advance(10_000)
    assert deleting.apply_retention(clock()) > 0
    assert keeping.apply_retention(clock()) == 0  # cleanup.policy compact alone: nothing goes by age
    assert clean_log(keeping, clock()) is not None
    assert as_rows(read_all(keeping)) == [(38, b"k0", b"38"), (39, b"k1", b"39"), (40, b"k0", b"last")]
    deleting.close()
    keeping.close()


def test_a_full_key_map_cleans_in_parts_and_the_next_pass_goes_on(memory_path):
    clock = FakeClock()
    log = Log.open(str(memory_path), compacted(segment_bytes=4096), clock=clock)
    for round_ in range(3):
        for key in range(20):
            log.append([ProducerRecord(b"r%d" % round_, b"k%d" % key)])
    log.roll()
    log.append([ProducerRecord(b"tail", b"t")])
    first = clean_log(log, clock(), keys_max=5)
    assert first is not None and first.mapped_to < first.rewritten_below + 1
    passes = 1
    while clean_log(log, clock(), keys_max=5) is not None:
        passes += 1
        assert passes < 50
    assert as_rows(read_all(log)) == [(40 + k, b"k%d" % k, b"r2") for k in range(20)] + [(60, b"t", b"tail")]
    assert_dense(log)
    log.close()


def test_rewritten_segments_merge_up_to_segment_bytes(memory_path):
    clock = FakeClock()
    log = Log.open(str(memory_path), compacted(segment_bytes=1024), clock=clock)
    for i in range(300):
        log.append([ProducerRecord(b"v%d" % i, b"k%d" % (i % 5))])
    log.roll()
    log.append([ProducerRecord(b"t", b"t")])
    segments = log.segment_count
    clean_log(log, clock())
    clean_log(log, clock())  # the small rewritten segments group together on the next pass ...
    log.roll()
    log.append([ProducerRecord(b"u", b"t")])
    clean_log(log, clock())  # ... which a new dirty segment triggers
    assert log.segment_count < segments
    assert_dense(log)
    log.close()


def test_the_cleaner_thread_compacts_only_compacted_logs_and_counts(memory_path):
    clock = FakeClock()
    logs = [
        Log.open(str(memory_path / name), config, clock=clock)
        for name, config in (("c", compacted()), ("d", small_config()))
    ]
    for log in logs:
        for i in range(100):
            log.append([ProducerRecord(b"v%d" % i, b"k%d" % (i % 3))])
        log.roll()
        log.append([ProducerRecord(b"t", b"t")])
    cleaner = Cleaner(lambda: logs, clock, rate_bytes_per_s=1 << 30)
    reports = cleaner.run_once(clock())
    assert [r.directory for r in reports] == [str(memory_path / "c")]
    stats = cleaner.stats
    assert stats.passes == 1 and stats.records_removed == 97 and stats.bytes_reclaimed > 0
    assert stats.dirty_bytes == 0 and stats.pass_seconds.snapshot().count == 1
    assert len(read_all(logs[1])) == 101
    for log in logs:
        log.close()


# -- crashes ------------------------------------------------------------------------------------------


def _build(path, clock) -> tuple[Log, list[tuple]]:
    log = Log.open(str(path), compacted(), clock=clock)
    write(log, random.Random(7), 120, keys=10)
    log.roll()
    write(log, random.Random(8), 3, keys=10)
    return log, as_rows(read_all(log))


def _expected_after(memory_path) -> list[tuple]:
    clock = FakeClock()
    log, _ = _build(memory_path / "reference", clock)
    clean_log(log, clock())
    rows = as_rows(read_all(log))
    log.close()
    return rows


_CRASHABLE = [
    (os, "rename"),
    (os, "replace"),
    (os, "unlink"),
    (Segment, "delete"),
    (Segment, "seal"),
    (os, "fsync"),
]


def test_a_crash_at_every_step_of_a_pass_leaves_the_old_log_or_the_compacted_one(memory_path, monkeypatch):
    """Every rename, replace, unlink, delete, seal and fsync of a pass in turn is where the process dies;
    reopened, each group of segments the pass rewrites reads as before it or as after it (the log between
    the two), dense, with nothing staged left; a pass then brings it to the compacted state."""
    after = _expected_after(memory_path)
    outcomes = set()
    for step in range(600):
        clock = FakeClock()
        path = memory_path / f"crash-{step}"
        log, before = _build(path, clock)
        calls = {"n": 0}
        for target, name in _CRASHABLE:
            real = getattr(target, name)

            def dying(*args, _real=real, _calls=calls, _step=step, **kwargs):
                if _calls["n"] == _step:
                    raise Crash(_step)
                _calls["n"] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(target, name, dying)
        try:
            clean_log(log, clock())
            crashed = False
        except Crash:
            crashed = True
        monkeypatch.undo()
        abandon(log)
        with Log.open(str(path), compacted(), clock=clock) as reopened:
            rows = as_rows(read_all(reopened))
            # each rewritten group is either whole as before or compacted: what is read lies between
            assert set(after) <= set(rows) <= set(before), f"crash at step {step}"
            assert rows == sorted(rows), f"crash at step {step}"
            outcomes.add("before" if rows == before else "after" if rows == after else "part")
            assert_dense(reopened)
            assert not [n for n in os.listdir(path) if n.endswith((STAGED, SWAP))]
            clean_log(reopened, clock())
            assert as_rows(read_all(reopened)) == after
        if not crashed:
            break
    else:
        pytest.fail("a pass did not finish in 600 steps")
    assert outcomes == {"before", "part", "after"} and step > 10


def test_a_staged_segment_torn_at_any_byte_leaves_the_old_segments(memory_path):
    """The process dies while the rewritten segment is being written: whatever prefix of it reached the
    disk, opening the log removes it and reads the log as before."""
    clock = FakeClock()
    log, _ = _build(memory_path / "source", clock)
    staged: dict[str, bytes] = {}
    real_rename = os.rename

    def keep_staged(source, target):  # copy each staged file as the commit takes it
        if str(source).endswith(STAGED):
            with open(source, "rb") as f:
                staged[os.path.basename(source)] = f.read()
        return real_rename(source, target)

    os.rename = keep_staged
    try:
        clean_log(log, clock())
    finally:
        os.rename = real_rename
    log.close()
    data = next(name for name in staged if name.endswith(".log" + STAGED))
    size = len(staged[data])
    for cut in sorted({0, 1, 60, 61, 62, size // 3, size // 2, size - 1, size} | set(range(0, size, 97))):
        path = memory_path / f"cut-{cut}"
        log, rows = _build(path, FakeClock())
        log.close()
        for name, content in staged.items():
            with open(path / name, "wb") as f:
                f.write(content[:cut] if name == data else content)
        with Log.open(str(path), compacted(), clock=FakeClock()) as reopened:
            assert as_rows(read_all(reopened)) == rows
            assert not [n for n in os.listdir(path) if n.endswith(STAGED)]


def test_without_a_min_lag_a_record_stamped_ahead_of_the_clock_holds_nothing_back():
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.1)
    segments = summaries((0, 10, 100, 5000), (10, 10, 0, None))
    plan = plan_cleaning(segments, 0, 1000, config)
    assert plan is not None and plan.end_offset == 10


def test_raftlog_log_verify_and_dump_read_a_compacted_log(memory_path):
    from raftlog.storage.inspect import dump_batches, verify_directory

    clock = FakeClock()
    log, _ = _build(memory_path / "log", clock)
    clean_log(log, clock())
    kept = as_rows(read_all(log))
    log.close()
    assert verify_directory(str(memory_path / "log")).ok  # fewer records than offsets is no damage
    dumped = [
        (r.offset, r.key, r.value) for _, records in dump_batches(str(memory_path / "log")) for r in records
    ]
    assert dumped == kept


def test_a_closing_cleaner_ends_its_pass_where_it_is_and_leaves_the_log_whole(memory_path):
    clock = FakeClock()
    log, before = _build(memory_path / "log", clock)
    cleaner = Cleaner(lambda: [log], clock, rate_bytes_per_s=1 << 30)
    real_take = cleaner._pacer.take
    taken = {"bytes": 0}

    def take(amount):  # the node closes once the pass has read a little
        taken["bytes"] += amount
        if taken["bytes"] > 2000:
            cleaner._stop.set()
        real_take(amount)

    cleaner._pacer.take = take
    assert cleaner.run_once(clock()) == []
    assert not [n for n in os.listdir(memory_path / "log") if n.endswith((STAGED, SWAP))]
    rows = as_rows(read_all(log))
    assert set(rows) <= set(before) and rows == sorted(rows)
    assert_dense(log)
    log.close()
