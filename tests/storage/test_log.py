"""Unit tests of one Log: offsets, reads, timestamps, limits, truncation, rolling, retention, recovery."""

from __future__ import annotations

import errno
import os
import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from raftlog.storage import Log, ProducerRecord
from raftlog.storage.batch import HEADER_SIZE, encode_batch, rebase, with_log_append_time
from raftlog.storage.errors import (
    CorruptRecord,
    DiskFull,
    InvalidRecord,
    LogClosed,
    NotBatchBoundary,
    OffsetOutOfRange,
    RecordTooLarge,
    StorageUnavailable,
)
from raftlog.storage.index import OffsetIndex
from raftlog.storage.leader_epochs import CHECKPOINT_FILE
from raftlog.storage.log_cut import delete_oldest_segments
from raftlog.storage.segment import Segment

from .helpers import (
    FakeClock,
    abandon,
    as_stored,
    batch_positions,
    brute_offset_for_timestamp,
    copy_dir,
    corrupt_byte,
    file_contents,
    make_records,
    read_all,
    segment_paths,
    small_config,
    snapshot,
)


def open_log(path, config=None, clock=None):
    return Log.open(str(path), config or small_config(), clock=clock or FakeClock())


def fill(log: Log, batches: int, seed: int = 0, records_per_batch: int = 3) -> list:
    """Append ``batches`` batches of 1..records_per_batch records; return the (base, end) of each."""
    rng = random.Random(seed)
    bounds = []
    for i in range(batches):
        result = log.append(make_records(rng.randint(1, records_per_batch), f"b{i}", size=rng.randint(1, 60)))
        bounds.append((result.base_offset, result.end_offset))
    return bounds


# -- offsets and reads ---------------------------------------------------------------------------------


def test_offsets_are_dense_across_rolls_and_reopen(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, clock=clock)
    expected = []
    for i in range(60):
        records = make_records(1 + i % 4, f"b{i}", size=10 + i)
        result = log.append(records, term=2)
        assert (result.base_offset, result.end_offset) == (len(expected), len(expected) + len(records))
        expected += [as_stored(r, result.base_offset + j, clock.now_ms) for j, r in enumerate(records)]
    assert log.segment_count >= 4, "the test should span several segments"
    assert read_all(log) == expected
    log.close()

    with open_log(tmp_path, clock=clock) as reopened:
        assert reopened.end_offset == len(expected)
        assert read_all(reopened) == expected
        assert reopened.append(make_records(1, "after")).base_offset == len(expected)


def test_read_returns_at_least_one_record_whatever_the_budget(tmp_path):
    log = open_log(tmp_path)
    bounds = fill(log, 30)
    everything = read_all(log)
    for offset in range(log.end_offset):
        for budget in (0, 1, HEADER_SIZE):
            page = log.read(offset, budget)
            batch_end = next(end for base, end in bounds if base <= offset < end)
            # exactly the rest of the batch holding the offset: batches are never split, never exceeded
            assert page == everything[offset:batch_end]


def test_a_read_at_the_end_of_the_log_needs_neither_the_index_nor_a_walk(tmp_path, monkeypatch):
    """What a consumer keeping up asks: the batch the last append wrote is found in memory (its place is
    known), and the read is one read of the data file; after a truncation the index and a walk find it
    again, and the next append is found in memory again."""
    log = open_log(tmp_path)
    bounds = fill(log, 40)
    everything = read_all(log)
    looked_up: list[int] = []
    lookup = OffsetIndex.lookup

    def counted(index: OffsetIndex, offset: int) -> tuple[int, int]:
        looked_up.append(offset)
        return lookup(index, offset)

    monkeypatch.setattr(OffsetIndex, "lookup", counted)
    base, end = bounds[-1]
    for offset in range(base, end):
        assert log.read(offset, 1 << 20) == everything[offset:]
    assert looked_up == []
    log.truncate(bounds[-3][0])  # the last batch is gone: the index finds the new last one
    looked_up.clear()
    assert log.read(bounds[-4][0], 1 << 20) == everything[bounds[-4][0] : bounds[-3][0]]
    assert looked_up != []
    result = log.append(make_records(2, "again"))
    looked_up.clear()
    assert [r.offset for r in log.read(result.base_offset, 1 << 20)] == [
        result.base_offset,
        result.base_offset + 1,
    ]
    assert looked_up == []
    log.close()


def test_read_stays_within_the_byte_budget_after_the_first_batch(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    everything = read_all(log)
    for offset in range(0, log.end_offset, 3):
        for budget in (50, 200, 700):
            batches = log.read_batches(offset, budget)
            sizes = [len(b.data) for b in batches]
            assert sum(sizes) <= max(budget, sizes[0])
            page = log.read(offset, budget)
            assert page == everything[offset : offset + len(page)]
            if batches[-1].header.end_offset < log.end_offset:  # stopped early: the next batch did not fit
                following = log.read_batches(batches[-1].header.end_offset, 0)[0]
                assert sum(sizes) + len(following.data) > budget
        # a big budget is not cut short at segment ends
        assert log.read(offset, 1 << 20) == everything[offset:]


def test_read_never_returns_records_at_or_past_max_offset(tmp_path):
    log = open_log(tmp_path)
    fill(log, 25)
    everything = read_all(log)
    for offset in range(0, log.end_offset, 2):
        for max_offset in range(offset, log.end_offset + 2, 3):
            page = log.read(offset, 1 << 20, max_offset=max_offset)
            assert page == everything[offset:max_offset]


def test_read_outside_the_log_is_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    assert log.read(log.end_offset, 100) == []
    with pytest.raises(OffsetOutOfRange) as raised:
        log.read(log.end_offset + 1, 100)
    assert (raised.value.log_start_offset, raised.value.end_offset) == (0, log.end_offset)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


timestamp_lists = st.lists(
    st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=4), min_size=1, max_size=40
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=timestamp_lists, index_interval=st.sampled_from([1, 64, 256]), data=st.data())
@example(batches=[[5], [0], [0]], index_interval=1, data=None).via("a running max of 5 then smaller ones")
def test_offset_for_timestamp_is_first_record_at_or_after_it(tmp_path_factory, batches, index_interval, data):
    directory = tmp_path_factory.mktemp("log")
    log = open_log(directory, small_config(index_interval_bytes=index_interval))
    rolls = set() if data is None else set(data.draw(st.sets(st.integers(0, len(batches))), label="rolls"))
    for i, timestamps in enumerate(batches):
        if i in rolls:
            log.roll()
        log.append([ProducerRecord(value=b"v" * 30, timestamp_ms=ts) for ts in timestamps])
    records = read_all(log)
    targets = range(-6, 43)
    expected = {t: brute_offset_for_timestamp(records, t) for t in targets}
    assert {t: log.offset_for_timestamp(t) for t in targets} == expected
    log.close()
    with open_log(directory, small_config(index_interval_bytes=index_interval)) as reopened:
        assert {t: reopened.offset_for_timestamp(t) for t in targets} == expected


# -- limits and bad input ------------------------------------------------------------------------------


def test_record_too_large_writes_nothing(tmp_path):
    log = open_log(tmp_path, small_config(max_message_bytes=300))
    fill(log, 5)
    before_end, before_files = log.end_offset, file_contents(str(tmp_path))

    with pytest.raises(RecordTooLarge) as raised:
        log.append([ProducerRecord(value=b"x" * 300)])
    assert raised.value.limit_bytes == 300 and raised.value.size_bytes > 300
    too_big = encode_batch(0, [ProducerRecord(value=b"x" * 300)], 0, 0)
    with pytest.raises(RecordTooLarge):
        log.append_prepared(too_big, term=1)
    with pytest.raises(RecordTooLarge):
        log.append_batch(encode_batch(log.end_offset, [ProducerRecord(value=b"x" * 300)], 0, 0))

    assert log.end_offset == before_end
    assert file_contents(str(tmp_path)) == before_files
    assert log.append([ProducerRecord(value=b"small")]).base_offset == before_end


@pytest.mark.parametrize(
    "attempt",
    [
        pytest.param(lambda log: log.append([]), id="empty-batch"),
        pytest.param(lambda log: log.append([ProducerRecord(value="text")]), id="str-value"),
        pytest.param(lambda log: log.append([b"raw"]), id="not-a-record"),
        pytest.param(lambda log: log.append([ProducerRecord(value=b"v", timestamp_ms=0.5)]), id="float-ts"),
        pytest.param(lambda log: log.append([ProducerRecord(value=b"v")], term=-1), id="negative-term"),
        pytest.param(lambda log: log.append_prepared(b"", term=1), id="prepared-empty"),
        pytest.param(lambda log: log.append_prepared(b"\x00" * 40, term=1), id="prepared-short"),
        pytest.param(lambda log: log.append_prepared(b"\x00" * 100, term=1), id="prepared-zeros"),
        pytest.param(
            lambda log: log.append_prepared(encode_batch(0, [ProducerRecord(value=b"v")], 0, 0), term=-1),
            id="prepared-negative-term",
        ),
        pytest.param(
            lambda log: log.append_batch(
                encode_batch(log.end_offset + 1, [ProducerRecord(value=b"v")], 0, 0)
            ),
            id="batch-leaves-a-gap",
        ),
        pytest.param(
            lambda log: log.append_batch(
                encode_batch(log.end_offset - 1, [ProducerRecord(value=b"v")], 0, 0)
            ),
            id="batch-reuses-an-offset",
        ),
    ],
)
def test_malformed_appends_are_invalid_and_write_nothing(tmp_path, attempt):
    log = open_log(tmp_path)
    fill(log, 3)
    before_end, before_files = log.end_offset, file_contents(str(tmp_path))
    with pytest.raises(InvalidRecord):
        attempt(log)
    assert log.end_offset == before_end
    assert file_contents(str(tmp_path)) == before_files


@pytest.mark.parametrize("position", ["header", "body"])
def test_a_prepared_batch_damaged_in_transit_is_refused_not_resealed(tmp_path, position):
    log = open_log(tmp_path)
    batch = bytearray(encode_batch(0, [ProducerRecord(value=b"payload-bytes", key=b"k")], 0, 0))
    batch[20 if position == "header" else len(batch) - 3] ^= 0x01  # record_count / a value byte
    with pytest.raises(InvalidRecord):
        log.append_prepared(bytes(batch), term=4)
    assert log.end_offset == 0 and read_all(log) == []


def test_append_prepared_and_append_batch_keep_the_records(tmp_path):
    log = open_log(tmp_path)
    records = make_records(3, "p", timestamp_ms=55)
    result = log.append_prepared(encode_batch(999, records, 1, 0, producer_id=7, sequence=3), term=9)
    assert (result.base_offset, result.end_offset, result.term) == (0, 3, 9)
    replica = log.read_batches(0, 1 << 20)[0]
    assert (replica.header.term, replica.header.producer_id, replica.header.sequence) == (9, 7, 3)

    other = open_log(tmp_path / "replica")
    other.append_batch(replica.data)
    assert read_all(other) == read_all(log) == [as_stored(r, i, 0) for i, r in enumerate(records)]


def test_closed_log_refuses_everything(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosed):
        log.append(make_records(1, "x"))
    with pytest.raises(LogClosed):
        log.read(0, 100)


# -- truncation ----------------------------------------------------------------------------------------


def test_truncate_inside_a_batch_raises_and_changes_nothing(tmp_path):
    log = open_log(tmp_path)
    bounds = fill(log, 30, records_per_batch=4)
    assert log.segment_count >= 3
    before, before_files = snapshot(log), file_contents(str(tmp_path))
    inside = [offset for base, end in bounds for offset in range(base + 1, end)]
    assert inside
    for offset in inside:
        with pytest.raises(NotBatchBoundary) as raised:
            log.truncate(offset)
        base, end = next((b, e) for b, e in bounds if b <= offset < e)
        assert (raised.value.batch_base_offset, raised.value.batch_end_offset) == (base, end)
        assert snapshot(log) == before
        assert file_contents(str(tmp_path)) == before_files


def test_truncate_at_each_boundary_keeps_exactly_the_prefix(tmp_path):
    base_dir = tmp_path / "origin"
    log = open_log(base_dir)
    bounds = fill(log, 25)
    everything = read_all(log)
    log.close()
    for index, (base, _) in enumerate(bounds[::3]):
        directory = tmp_path / f"cut{index}"
        copy_dir(str(base_dir), str(directory))
        with open_log(directory) as log:
            log.truncate(base)
            assert (log.end_offset, read_all(log)) == (base, everything[:base])
            assert log.append(make_records(2, "new")).base_offset == base  # a replica rewrites the suffix
            rewritten = read_all(log)
        with open_log(directory) as reopened:
            assert read_all(reopened) == rewritten
            assert reopened.offset_for_timestamp(0) == 0


# -- rolling -------------------------------------------------------------------------------------------


def test_segment_ms_rolls_by_the_clock(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20, segment_ms=1000), clock)
    log.append(make_records(1, "a"))
    clock.advance(999)
    log.append(make_records(1, "b"))
    assert log.segment_count == 1
    clock.advance(1)
    log.append(make_records(1, "c"))
    assert log.segment_count == 2
    assert [s.base_offset for s in log.segment_infos()] == [0, 2]
    clock.advance(500)
    log.append(make_records(1, "d"))
    assert log.segment_count == 2  # the new segment's age counts from its own first append
    assert [r.value[:3] for r in read_all(log)] == [b"a-0", b"b-0", b"c-0", b"d-0"]


def test_an_idle_empty_segment_is_not_rolled(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, small_config(segment_ms=10), clock)
    log.roll()
    clock.advance(10_000)
    log.append(make_records(1, "a"))
    assert log.segment_count == 1
    log.roll()
    log.roll()
    assert log.segment_count == 2


def test_segment_bytes_bounds_every_segment_holding_more_than_one_batch(tmp_path):
    log = open_log(tmp_path, small_config(segment_bytes=1024))
    fill(log, 80)
    infos = log.segment_infos()
    assert len(infos) > 3
    assert all(info.size_bytes <= 1024 for info in infos)


# -- retention -----------------------------------------------------------------------------------------


def test_retention_by_time_deletes_old_segments_but_never_the_active_one(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, small_config(retention_ms=10_000), clock)
    for i in range(6):
        log.append(make_records(2, f"s{i}", timestamp_ms=clock.now_ms))
        log.roll()
        clock.advance(3_000)
    log.append(make_records(2, "active", timestamp_ms=clock.now_ms))  # newest at now
    everything = read_all(log)
    bases = [s.base_offset for s in log.segment_infos()]

    # segments written at t0, t0+3s, ...; at t0+18s those older than t0+8s are gone
    assert log.apply_retention(clock.now_ms) == 3
    assert log.log_start_offset == bases[3]
    assert read_all(log) == everything[bases[3] :]
    with pytest.raises(OffsetOutOfRange):
        log.read(bases[3] - 1, 100)

    remaining = log.segment_count
    assert log.apply_retention(clock.now_ms + 10**9) == remaining - 1
    assert log.segment_count == 1 and log.log_start_offset == bases[-1]
    assert read_all(log) == everything[bases[-1] :]
    # one segment's .log, .index, .timeindex, the format file, the leader epochs and the transactions
    names = set(os.listdir(tmp_path))
    assert len(names) == 6 and {CHECKPOINT_FILE, "transactions-checkpoint"} <= names


def test_retention_by_time_reads_the_time_a_log_append_time_batch_was_stamped(tmp_path):
    """A LogAppendTime batch's records keep their producer's (old) deltas; retention goes by the stamped
    max timestamp, as the time index and offsets by timestamp do."""
    clock = FakeClock()
    log = open_log(tmp_path, small_config(retention_ms=10_000), clock)
    old = encode_batch(0, [ProducerRecord(b"v", timestamp_ms=1)] * 2, 0, 0)
    log.append_prepared(with_log_append_time(old, clock.now_ms), term=1)
    log.roll()
    log.append(make_records(1, "active", timestamp_ms=clock.now_ms))
    assert log.apply_retention(clock.now_ms + 5_000) == 0  # stamped 5 s ago: kept
    assert [r.timestamp_ms for r in log.read(0, 1 << 20, 2)] == [clock.now_ms] * 2
    assert log.offset_for_timestamp(clock.now_ms) == 0 and log.offset_for_timestamp(2) == 0
    assert log.apply_retention(clock.now_ms + 10_001) == 1  # older than retention.ms now
    assert log.log_start_offset == 2


def test_retention_by_size_keeps_at_least_retention_bytes(tmp_path):
    log = open_log(tmp_path, small_config(retention_bytes=3000))
    fill(log, 120)
    assert log.size_bytes > 6000
    log.apply_retention(0)
    infos = log.segment_infos()
    kept = sum(i.size_bytes for i in infos)
    assert kept >= 3000
    assert kept - infos[0].size_bytes < 3000  # one more deletion would go under the limit
    assert read_all(log)[0].offset == log.log_start_offset == infos[0].base_offset
    log.close()
    with open_log(tmp_path, small_config(retention_bytes=3000)) as reopened:
        assert reopened.log_start_offset == infos[0].base_offset


@pytest.mark.parametrize("handed_on", [False, True])
def test_a_reader_keeps_reading_a_segment_that_retention_deleted(tmp_path, handed_on):
    handed: list[
        str
    ] = []  # with a discard that hands files on: the deleted segment's, once the reader let go
    log = Log.open(str(tmp_path), small_config(), FakeClock(), handed.append if handed_on else os.unlink)
    fill(log, 40)
    everything = read_all(log)
    infos = log.segment_infos()
    got = []
    with log.reader(0) as reader:
        got.extend(next(iter(reader)).records())
        # keep exactly what is left without the first segment: retention by size deletes that one
        log.reconfigure(small_config(retention_bytes=log.size_bytes - infos[0].size_bytes))
        assert log.apply_retention(0) == 1
        names = os.listdir(tmp_path)
        assert not [n for n in names if n.startswith(f"{0:020d}.") and not n.endswith(".deleted")]
        aside = sorted(n for n in names if n.endswith(".deleted"))  # renamed out of the log at once
        assert [n.split(".")[1] for n in aside] == ["index", "log", "timeindex"]
        assert log.log_start_offset == infos[1].base_offset
        assert handed == []  # the reader still holds the segment
        for batch in reader:
            got.extend(batch.records())
    assert got == everything
    # discarded once the reader let go: handed on (to be deleted by whoever took them), or unlinked
    left = sorted(n for n in os.listdir(tmp_path) if n.endswith(".deleted"))
    if handed_on:
        assert sorted(os.path.basename(p) for p in handed) == aside == left
    else:
        assert handed == [] and left == []
    with pytest.raises(OffsetOutOfRange):
        log.reader(0)


def test_a_reader_whose_next_segment_was_deleted_stops_with_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    everything = read_all(log)
    infos = log.segment_infos()
    assert len(infos) >= 3
    got = []
    reader = log.reader(0)
    got.extend(reader.next_batch().records())
    assert delete_oldest_segments(log, 2) == 2
    with pytest.raises(OffsetOutOfRange) as raised:
        while (batch := reader.next_batch()) is not None:
            got.extend(batch.records())
    assert raised.value.log_start_offset == infos[2].base_offset
    assert got == everything[: infos[1].base_offset]  # the held segment was read to its end, nothing skipped
    reader.close()


def test_delete_oldest_segments_never_deletes_the_active_one(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30)
    count = log.segment_count
    assert delete_oldest_segments(log, 100) == count - 1
    assert log.segment_count == 1
    assert read_all(log) == read_all(log, log.log_start_offset)
    assert log.append(make_records(1, "x")).base_offset == log.end_offset - 1


def test_with_a_discard_retention_and_truncation_hand_over_unheld_segments_at_once(tmp_path):
    handed: list[str] = []
    log = Log.open(str(tmp_path), small_config(), clock=FakeClock(), discard=handed.append)
    fill(log, 40)
    infos = log.segment_infos()
    assert len(infos) >= 4
    everything = read_all(log)
    log.reconfigure(small_config(retention_bytes=log.size_bytes - infos[0].size_bytes))
    assert log.apply_retention(0) == 1
    assert len(handed) == 3 and all(".deleted" in p for p in handed)
    log.truncate(infos[-2].base_offset)  # deletes the last two segments (the one before ends right there)
    assert len(handed) == 9
    assert read_all(log) == everything[infos[1].base_offset : infos[-2].base_offset]
    assert log.append(make_records(1, "after")).base_offset == infos[-2].base_offset


@pytest.mark.parametrize("reopen_with_discard", [False, True])
def test_files_of_deleted_segments_left_by_a_crash_are_never_taken_back(tmp_path, reopen_with_discard):
    kept: list[str] = []
    log = Log.open(str(tmp_path), small_config(), clock=FakeClock(), discard=kept.append)
    fill(log, 40)
    everything = read_all(log)
    second = log.segment_infos()[1].base_offset
    reader = log.reader(0)
    next(iter(reader))
    assert delete_oldest_segments(log, 1) == 1  # renamed; the crash comes before the reader lets go
    leftovers = sorted(n for n in os.listdir(tmp_path) if n.endswith(".deleted"))
    assert len(leftovers) == 3 and kept == []
    abandon(log)  # the process dies with the reader still open
    handed: list[str] = []
    with Log.open(
        str(tmp_path),
        small_config(),
        clock=FakeClock(),
        discard=handed.append if reopen_with_discard else os.unlink,
    ) as reopened:
        assert sorted(reopened.open_report.removed_files) == leftovers
        assert reopened.log_start_offset == second
        assert read_all(reopened) == everything[second:]
    if reopen_with_discard:
        assert sorted(os.path.basename(p) for p in handed) == leftovers
    else:
        assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path))


# -- recovery ------------------------------------------------------------------------------------------


def _log_with_unordered_timestamps(directory, seed=3):
    """A closed log of several segments whose timestamps go up and down (so index damage would show)."""
    rng = random.Random(seed)
    log = open_log(directory)
    for i in range(60):
        log.append(
            make_records(
                rng.randint(1, 3), f"b{i}", size=rng.randint(1, 40), timestamp_ms=rng.randint(0, 5000)
            )
        )
    log.close()


def _observe(log: Log) -> tuple:
    return (
        snapshot(log),
        log.segment_infos(),
        tuple(log.offset_for_timestamp(t) for t in range(-60, 5100, 37)),
        tuple(tuple(log.read(o, 150)) for o in range(log.log_start_offset, log.end_offset)),
    )


@pytest.mark.parametrize("damage", ["delete", "garbage", "empty"])
@pytest.mark.parametrize("suffixes", [(".index",), (".timeindex",), (".index", ".timeindex")])
def test_lost_or_garbage_indexes_are_rebuilt_with_identical_results(tmp_path, damage, suffixes):
    _log_with_unordered_timestamps(tmp_path)
    with open_log(tmp_path) as log:
        expected = _observe(log)
        assert log.segment_count >= 4
    rng = random.Random(7)
    for suffix in suffixes:
        for path in segment_paths(str(tmp_path), suffix):
            size = os.path.getsize(path)
            if damage == "delete":
                os.unlink(path)
            elif damage == "empty":
                open(path, "wb").close()
            else:
                with open(path, "wb") as f:
                    f.write(rng.randbytes(max(size, 24)))
    with open_log(tmp_path) as log:
        assert _observe(log) == expected
        assert log.open_report.repairs, "the damage should have been repaired"
    with open_log(tmp_path) as log:  # and the rebuilt indexes are themselves good
        assert _observe(log) == expected


@pytest.mark.parametrize("field", ["base_offset", "body"])
def test_corruption_in_a_closed_segment_tail_fails_open_naming_file_and_position(tmp_path, field):
    log = open_log(tmp_path)
    fill(log, 40)
    log.close()
    path = segment_paths(str(tmp_path))[1]
    position, size = batch_positions(path)[-1]
    corrupt_byte(path, position + (17 if field == "base_offset" else size - 2))
    with pytest.raises(CorruptRecord) as raised:
        open_log(tmp_path)
    assert (raised.value.path, raised.value.position) == (path, position)


def test_corruption_anywhere_in_a_closed_segment_is_caught_when_its_index_is_rebuilt(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    log.close()
    path = segment_paths(str(tmp_path))[1]
    batches = batch_positions(path)
    position, size = batches[len(batches) // 2]
    corrupt_byte(path, position + size // 2)
    os.unlink(path.replace(".log", ".index"))
    with pytest.raises(CorruptRecord) as raised:
        open_log(tmp_path)
    assert (raised.value.path, raised.value.position) == (path, position)


def test_corruption_in_the_middle_of_a_closed_segment_is_never_read_silently(tmp_path):
    """Open checks a closed segment only from its last index entry on; earlier damage surfaces on read."""
    log = open_log(tmp_path)
    fill(log, 40)
    everything = read_all(log)
    log.close()
    path = segment_paths(str(tmp_path))[1]
    batches = batch_positions(path)
    position, size = batches[1]
    corrupt_byte(path, position + size - 2)

    log = open_log(tmp_path)
    start = log.segment_infos()[1].base_offset
    with pytest.raises(CorruptRecord) as raised:
        read_all(log)
    assert (raised.value.path, raised.value.position) == (path, position)
    with pytest.raises(CorruptRecord):
        list(log.reader(start))
    with pytest.raises(CorruptRecord):
        log.read(start, 1 << 20)
    # data before and after the damaged batch is still served
    after = log.segment_infos()[2].base_offset
    assert read_all(log, after) == everything[after:]
    assert read_all(log, 0, start) == everything[:start]


def test_corruption_while_open_is_caught_on_read(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    path = segment_paths(str(tmp_path))[0]
    position, size = batch_positions(path)[0]
    corrupt_byte(path, position + size - 1)
    with pytest.raises(CorruptRecord) as raised:
        log.read(0, 1 << 20)
    assert (raised.value.path, raised.value.position) == (path, position)
    with pytest.raises(CorruptRecord):
        log.read_batches(0, 1)


def test_torn_tail_of_the_active_segment_is_cut_and_reported(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30)
    everything = read_all(log)
    abandon(log)
    path = segment_paths(str(tmp_path))[-1]
    batches = batch_positions(path)
    assert len(batches) >= 2
    last_position, last_size = batches[-1]
    os.truncate(path, last_position + last_size - 5)

    with open_log(tmp_path) as log:
        assert log.end_offset < len(everything)
        assert read_all(log) == everything[: log.end_offset]
        assert os.path.getsize(path) == last_position
        [report] = log.open_report.repairs
        assert (report.path, report.truncated_at, report.truncated_bytes) == (
            path,
            last_position,
            last_size - 5,
        )
        assert log.append(make_records(1, "next")).base_offset == log.end_offset - 1
    with open_log(tmp_path) as log:
        assert not log.open_report.repairs  # nothing left to repair


# -- truncate_fully_and_start_at -----------------------------------------------------------------------


class Crash(Exception):
    """Stands for the process dying at this point."""


def _crash_after(monkeypatch, target, name, calls):
    real = getattr(target, name)
    count = {"n": 0}

    def wrapper(*args, **kwargs):
        if count["n"] == calls:
            raise Crash(f"{name} call {calls}")
        count["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, wrapper)


CRASH_POINTS = [
    ("os", "replace", 0),  # start-offset file written to its temporary name only
    ("Segment", "delete", 0),  # start-offset file in place, no segment deleted yet
    ("Segment", "delete", 1),
    ("Segment", "delete", 3),
    ("Segment", "create", 0),  # every old segment gone, the new one not yet created
    (None, None, None),  # no crash
]


@pytest.mark.parametrize(("target", "name", "calls"), CRASH_POINTS)
def test_truncate_fully_and_start_at_survives_a_crash_at_each_step(
    tmp_path, monkeypatch, target, name, calls
):
    log = open_log(tmp_path)
    fill(log, 40)
    before = snapshot(log)
    assert log.segment_count >= 4
    new_start = log.end_offset + 100
    if target is not None:
        _crash_after(monkeypatch, os if target == "os" else Segment, name, calls)
    try:
        log.truncate_fully_and_start_at(new_start)
        crashed = False
    except Crash:
        crashed = True
    monkeypatch.undo()
    assert crashed == (target is not None)
    abandon(log)

    with open_log(tmp_path) as log:
        if (target, name) == ("os", "replace"):
            assert snapshot(log) == before  # the reset never became durable: the old log is intact
            return
        assert (log.log_start_offset, log.end_offset) == (new_start, new_start)
        assert log.read(new_start, 100) == []
        with pytest.raises(OffsetOutOfRange):
            log.read(0, 100)
        assert log.append(make_records(2, "x")).base_offset == new_start  # no offset below it reused
        checkpoints = (CHECKPOINT_FILE, "transactions-checkpoint")
        assert sorted(n for n in os.listdir(tmp_path) if n not in checkpoints) == sorted(
            [f"{new_start:020d}{s}" for s in (".log", ".index", ".timeindex")]
            + ["log-start-offset", "format"]
        )
    with open_log(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset) == (new_start, new_start + 2)


def test_truncate_fully_refuses_to_move_backwards(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5)
    before = snapshot(log)
    with pytest.raises(OffsetOutOfRange):
        log.truncate_fully_and_start_at(log.end_offset - 1)
    assert snapshot(log) == before


# -- flushing ------------------------------------------------------------------------------------------


def test_flush_always_makes_every_append_durable_before_it_returns(tmp_path, monkeypatch):
    synced = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(os.fstat(fd).st_size), real(fd))[1])
    log = open_log(tmp_path, small_config(flush_mode="always"))
    for i in range(20):
        synced.clear()
        result = log.append(make_records(2, f"b{i}"))
        assert log.durable_end_offset == log.end_offset == result.end_offset
        active = log.segment_infos()[-1].size_bytes
        assert active in synced, "the active segment was not fsynced at its new size"


def test_flush_group_lags_until_flush_is_due(tmp_path):
    clock = FakeClock()
    config = small_config(flush_mode="group", flush_interval_ms=50, flush_bytes=10_000, segment_bytes=1 << 20)
    log = open_log(tmp_path, config, clock)
    log.append(make_records(2, "a"))
    assert (log.durable_end_offset, log.end_offset) == (0, 2)
    clock.advance(49)
    assert not log.flush_if_due(clock.now_ms)
    assert log.durable_end_offset == 0
    log.append(make_records(1, "b"))
    clock.advance(1)
    assert log.flush_if_due(clock.now_ms)
    assert log.durable_end_offset == log.end_offset == 3
    assert not log.flush_if_due(clock.now_ms + 1000)  # nothing unflushed

    log.append(make_records(1, "c"))
    assert log.durable_end_offset == 3
    log.flush()
    assert log.durable_end_offset == 4


def test_flush_group_flushes_inline_once_flush_bytes_are_unflushed(tmp_path):
    config = small_config(
        flush_mode="group", flush_interval_ms=3_600_000, flush_bytes=500, segment_bytes=1 << 20
    )
    log = open_log(tmp_path, config)
    durable_seen = set()
    for i in range(20):
        log.append(make_records(1, f"b{i}", size=60))
        assert log.durable_end_offset <= log.end_offset
        assert log.size_bytes - _bytes_below(log, log.durable_end_offset) < 500
        durable_seen.add(log.durable_end_offset)
    assert len(durable_seen) > 2, "flush.bytes should have forced several flushes"


def _bytes_below(log: Log, offset: int) -> int:
    return sum(len(b.data) for b in log.read_batches(0, 1 << 30, max_offset=offset)) if offset else 0


def test_roll_makes_the_closed_segment_durable_in_group_mode(tmp_path):
    log = open_log(
        tmp_path, small_config(flush_mode="group", flush_interval_ms=3_600_000, flush_bytes=1 << 30)
    )
    log.append(make_records(3, "a"))
    assert log.durable_end_offset == 0
    log.roll()
    assert log.durable_end_offset == 3


# -- the directory and the disk ------------------------------------------------------------------------


def test_an_unexpected_file_in_the_log_directory_fails_open_naming_it(tmp_path):
    with open_log(tmp_path) as log:
        fill(log, 3)
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    with pytest.raises(CorruptRecord) as raised:
        open_log(tmp_path)
    assert raised.value.path == str(stray)


@pytest.mark.parametrize("renamed", [False, True])
def test_index_files_left_by_an_interrupted_retention_are_removed(tmp_path, renamed):
    log = open_log(tmp_path)
    fill(log, 40)
    everything = read_all(log)
    second = log.segment_infos()[1].base_offset
    log.close()
    # retention died after taking the data file away (unlinked by an older version, or renamed aside), before
    # its indexes
    data = tmp_path / f"{0:020d}.log"
    aside = [f"{0:020d}.log.0123456789ab.deleted"] if renamed else []
    if renamed:
        os.rename(data, tmp_path / aside[0])
    else:
        os.unlink(data)
    with open_log(tmp_path) as log:
        expected = sorted([*aside, f"{0:020d}.index", f"{0:020d}.timeindex"])
        assert sorted(log.open_report.removed_files) == expected
        assert log.log_start_offset == second
        assert read_all(log) == everything[second:]
    assert not os.path.exists(tmp_path / f"{0:020d}.index")


def test_a_missing_middle_segment_fails_open_instead_of_skipping_offsets(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    infos = log.segment_infos()
    assert len(infos) >= 4
    log.close()
    for suffix in (".log", ".index", ".timeindex"):
        os.unlink(tmp_path / f"{infos[2].base_offset:020d}{suffix}")
    with pytest.raises(CorruptRecord) as raised:
        open_log(tmp_path)
    assert raised.value.path == str(tmp_path / f"{infos[1].base_offset:020d}.log")
    assert str(infos[3].base_offset) in str(raised.value)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch, error):
    """A write that stops midway is cut back. No room (ENOSPC, EDQUOT) is DiskFull and the log takes the
    same append once there is room; any other error fails the log until it is reopened."""
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))  # no roll: the batch goes to this segment
    fill(log, 5)
    before, before_files = snapshot(log), file_contents(str(tmp_path))
    real_pwrite = os.pwrite
    calls = []

    def failing_midway(fd, data, position):
        calls.append(position)
        if len(calls) == 1:
            return real_pwrite(fd, bytes(data)[: len(data) // 2], position)  # a short write ...
        raise OSError(error, os.strerror(error))  # ... then the disk says why it stopped

    monkeypatch.setattr(os, "pwrite", failing_midway)
    with pytest.raises(StorageUnavailable) as raised:
        log.append(make_records(3, "lost", size=100))
    monkeypatch.undo()

    assert len(calls) == 2
    assert isinstance(raised.value, DiskFull) == (error != errno.EIO)
    assert file_contents(str(tmp_path)) == before_files  # the half-written batch was rolled back
    assert snapshot(log) == before  # and reads still work
    if error == errno.EIO:
        with pytest.raises(StorageUnavailable):
            log.append(make_records(1, "refused"))
        log.close()
        log = open_log(tmp_path)
        assert snapshot(log) == before
    assert log.append(make_records(3, "after", size=100)).base_offset == before.end_offset
    assert log.space.refusals == (0 if error == errno.EIO else 1)
    log.close()
    with open_log(tmp_path) as log:
        assert log.end_offset == before.end_offset + 3


def test_a_failed_fsync_never_counts_as_durable_and_fails_the_log(tmp_path, monkeypatch):
    log = open_log(tmp_path, small_config(flush_mode="always"))
    fill(log, 5)
    durable = log.durable_end_offset
    written = read_all(log)

    def failing_fdatasync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    with pytest.raises(StorageUnavailable):
        log.append(make_records(2, "unsure"))
    assert log.durable_end_offset == durable
    monkeypatch.undo()
    with pytest.raises(StorageUnavailable):  # a later fsync could succeed over pages the kernel dropped
        log.append(make_records(1, "refused"))
    with pytest.raises(StorageUnavailable):
        log.flush()
    log.close()
    with open_log(tmp_path) as log:
        # the unsure batch may or may not have reached the disk; nothing else changed
        assert log.end_offset in (durable, durable + 2)
        assert read_all(log)[:durable] == written


def test_a_closed_segment_of_one_large_batch_reopens_without_a_spurious_rebuild(tmp_path):
    from raftlog.storage import LogConfig

    config = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    log = Log.open(str(tmp_path), config)
    log.append([ProducerRecord(b"x" * 2000)])  # one batch far larger than 2 x index.interval.bytes
    log.roll()
    log.append([ProducerRecord(b"y")])
    log.close()
    reopened = Log.open(str(tmp_path), config)
    assert reopened.open_report.repairs == []
    assert [r.value[:1] for r in reopened.read(0, 1 << 20)] == [b"x", b"y"]
    reopened.close()


def test_a_lost_index_of_a_closed_segment_is_still_rebuilt(tmp_path):
    from raftlog.storage import LogConfig

    config = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    log = Log.open(str(tmp_path), config)
    for i in range(30):
        log.append([ProducerRecord(b"%03d" % i * 20)])
    log.roll()
    log.close()
    first_index = next(p for p in sorted(os.listdir(tmp_path)) if p.endswith(".index"))
    os.unlink(os.path.join(tmp_path, first_index))
    reopened = Log.open(str(tmp_path), config)
    assert [r.rebuilt_indexes for r in reopened.open_report.repairs] == [True]
    assert [r.offset for r in reopened.read(17, 1)] == [17]
    reopened.close()


def test_a_reader_keeps_its_segment_through_handle_sweeps_and_its_deletion(tmp_path):
    log = Log.open(str(tmp_path), small_config(), FakeClock())
    fill(log, 40)
    everything = read_all(log)
    infos = log.segment_infos()
    assert log.release_handles()  # idle: every file closed
    got = []
    with log.reader(0) as reader:
        got.extend(next(iter(reader)).records())  # opens the first segment again
        assert log.release_handles()  # the segment the reader holds keeps its files
        log.reconfigure(small_config(retention_bytes=log.size_bytes - infos[0].size_bytes))
        assert log.apply_retention(0) == 1  # renamed away under the reader
        assert log.release_handles()
        for batch in reader:
            got.extend(batch.records())
    assert got == everything
    assert log.release_handles()
    log.append([ProducerRecord(b"after")])
    log.close()
    with open_log(tmp_path) as reopened:
        assert read_all(reopened)[-1].value == b"after"
        assert reopened.log_start_offset == infos[1].base_offset


@given(step=st.integers(min_value=1, max_value=200), count=st.integers(min_value=1, max_value=40))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_stamped_batch_is_written_whole_however_short_each_write(tmp_path, monkeypatch, step, count):
    """``append_prepared`` writes the stamped header and the batch's own bytes after it in one ``pwritev``,
    again from where a short write stopped: the file holds exactly the rebased batch."""
    real = os.pwritev

    def short(fd, pieces, offset):  # at most ``step`` bytes per call, cut anywhere, even inside the header
        taken, left = [], step
        for piece in pieces:
            if left == 0:
                break
            taken.append(memoryview(piece)[:left])
            left -= len(taken[-1])
        return real(fd, taken, offset)

    monkeypatch.setattr(os, "pwritev", short)
    directory = tmp_path / f"log-{step}-{count}"
    with Log.open(str(directory)) as log:
        batch = encode_batch(5, [ProducerRecord(value=b"%d" % i * 20) for i in range(count)], 0, 0)
        log.append_prepared(batch, term=3)
        log.append_prepared(batch, term=4)
        stored = [b.data for b in log.read_batches(0, max_bytes=1 << 20)]
    assert stored == [rebase(batch, 0, 3), rebase(batch, count, 4)]
