"""Reads outside the log's lock: a ``LogView`` is resolved under the lock and read without it, and reads
exactly the batches it covered whatever appends, rolls, retention, handle sweeps or a close do meanwhile."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftlog.storage import Log, ProducerRecord
from raftlog.storage import segment as segment_module
from raftlog.storage.errors import CorruptRecord, LogClosed, OffsetOutOfRange, StorageUnavailable

from .helpers import FakeClock, make_records, open_descriptors_under, read_all, small_config

APPEND_WAIT_S = 5.0


def filled(path: os.PathLike[str], batches: int) -> Log:
    log = Log.open(str(path), small_config(), FakeClock(), discard=os.unlink)
    for i in range(batches):
        log.append(make_records(1 + i % 3, f"b{i}", size=40))
    return log


def test_a_view_reads_what_it_covered_through_appends_rolls_retention_sweeps_and_close(tmp_path):
    log = filled(tmp_path, 60)
    assert log.segment_count >= 4
    expected = log.read_batches(0, 1 << 20)
    expected_records = read_all(log)
    view = log.read_view(0, 1 << 20)
    # everything that may happen to a log while a fetch reads it
    log.append(make_records(3, "after", size=40))
    log.roll()
    log.append(make_records(2, "later", size=40))
    log.reconfigure(small_config(retention_bytes=1))
    assert log.apply_retention(0) >= 3  # every segment the view holds is deleted (renamed aside)
    assert log.release_handles()
    log.truncate_fully_and_start_at(log.end_offset + 5)
    assert log.release_handles()
    log.close()
    assert [b.data for b in view.batches()] == [b.data for b in expected]
    assert view.records() == expected_records
    assert [b.header.base_offset for b in view.batches()] == [b.header.base_offset for b in expected]
    assert [name for name in os.listdir(tmp_path) if name.endswith(".deleted")]  # still held
    view.close()
    assert [name for name in os.listdir(tmp_path) if name.endswith(".deleted")] == []  # let go: discarded
    assert open_descriptors_under(tmp_path) == 0  # the closed log's segments closed with the view
    view.close()  # idempotent


def test_a_view_keeps_the_cuts_of_read_batches(tmp_path):
    log = filled(tmp_path, 40)
    bounds = [(b.header.base_offset, b.header.end_offset) for b in log.read_batches(0, 1 << 20)]
    middle = bounds[5][0] + 1  # inside a batch of several records
    with log.read_view(middle, 0) as view:
        assert [b.header.base_offset for b in view.batches()] == [bounds[5][0]]  # at least one batch
        assert [r.offset for r in view.records()] == list(range(middle, bounds[5][1]))
    with log.read_view(0, 1 << 20, max_offset=bounds[10][0]) as view:
        assert [b.header.base_offset for b in view.batches()] == [b for b, _ in bounds[:10]]
    size = sum(len(b.data) for b in log.read_batches(0, 1 << 20)[:7])
    with log.read_view(0, size) as view:
        assert len(view.batches()) == 7
    with log.read_view(log.end_offset, 100) as view:
        assert view.batches() == [] and view.records() == []
    with pytest.raises(OffsetOutOfRange):
        log.read_view(log.end_offset + 1, 100)
    log.close()
    with pytest.raises(LogClosed):
        log.read_view(0, 100)


def test_a_small_view_holds_only_the_segments_its_budget_needs(tmp_path):
    log = filled(tmp_path, 200)
    assert log.segment_count >= 10
    assert log.release_handles()
    with log.read_view(0, 100) as view:
        assert open_descriptors_under(tmp_path) <= 2  # the first segment's data file (and its index)
        assert len(view.batches()) == 1
    log.close()


def test_a_read_does_not_hold_the_lock_while_it_reads(tmp_path, monkeypatch):
    """Another thread appends while a read is between two preads; under the lock that append would wait
    for the whole read (it would time out here)."""
    log = filled(tmp_path, 40)
    expected = log.read_batches(0, 1 << 20)
    appended = threading.Event()
    walk = segment_module.walk

    def walk_that_waits_for_an_append(fd, start, end, verify):
        for step, item in enumerate(walk(fd, start, end, verify)):
            if step == 1 and not appended.is_set():
                writer = threading.Thread(target=lambda: (log.append([ProducerRecord(b"x")]), appended.set()))
                writer.start()
                writer.join(APPEND_WAIT_S)
            yield item

    monkeypatch.setattr(segment_module, "walk", walk_that_waits_for_an_append)
    got = log.read_batches(0, 1 << 20)
    assert appended.is_set(), "the append waited for the read's lock"
    assert [b.data for b in got] == [b.data for b in expected]  # the append is past the view's end
    appended.clear()
    records = log.read(0, 1 << 20)
    assert appended.is_set()
    assert [r.offset for r in records] == list(range(expected[-1].header.end_offset + 1))  # the first x
    monkeypatch.undo()
    assert [r.value for r in read_all(log)[-2:]] == [b"x", b"x"]
    log.close()


def test_a_streaming_reader_reads_its_segment_while_another_thread_holds_the_lock(tmp_path):
    log = filled(tmp_path, 30)
    everything = read_all(log)
    got = []
    with log.reader(0) as reader:
        got.extend(reader.next_batch().records())  # the reader now holds a view of the first segment
        holding, release = threading.Event(), threading.Event()

        def hold_the_lock() -> None:  # as the driver thread does while it applies
            with log._lock:
                holding.set()
                release.wait(APPEND_WAIT_S * 2)

        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        assert holding.wait(APPEND_WAIT_S)
        read_meanwhile: list = []
        reading = threading.Thread(target=lambda: read_meanwhile.append(reader.next_batch()))
        reading.start()
        reading.join(APPEND_WAIT_S)
        read_while_held = not reading.is_alive()
        release.set()
        holder.join()
        reading.join()
        assert read_while_held, "the reader waited for the lock another thread held"
        assert read_meanwhile and read_meanwhile[0] is not None
        assert read_meanwhile[0].header.base_offset == len(got), "the next batch of the same segment"
        got.extend(read_meanwhile[0].records())
        log.append([ProducerRecord(b"more")])
        for batch in reader:
            got.extend(batch.records())
    assert got[: len(everything)] == everything
    assert [r.value for r in got[len(everything) :]] == [b"more"]  # a later append is read too
    log.close()


def test_a_lookup_by_time_reads_its_batches_without_the_lock(tmp_path, monkeypatch):
    """Offsets by timestamp scan and decode batches too: an append from another thread goes through while
    the lookup is between its preads (under the lock it would wait for the whole scan)."""
    log = Log.open(str(tmp_path), small_config(), FakeClock(), discard=os.unlink)
    for i in range(30):
        log.append([ProducerRecord(b"v%d" % i, timestamp_ms=1_000 + 10 * i)])
    appended = threading.Event()
    walk = segment_module.walk

    def walk_that_waits_for_an_append(fd, start, end, verify):
        for item in walk(fd, start, end, verify):
            if not appended.is_set():
                writer = threading.Thread(target=lambda: (log.append([ProducerRecord(b"x")]), appended.set()))
                writer.start()
                writer.join(APPEND_WAIT_S)
            yield item

    monkeypatch.setattr(segment_module, "walk", walk_that_waits_for_an_append)
    found = log.first_record_at(1_000 + 10 * 17 - 5)
    assert appended.is_set(), "the append waited for the lookup's lock"
    assert found is not None and (found.offset, found.value) == (17, b"v17")
    monkeypatch.undo()
    assert (
        log.first_record_at(2 * 10**12) is None
    )  # after every record, the appended one at the clock's time too
    log.close()
    with pytest.raises(LogClosed):
        log.first_record_at(0)


def test_a_flush_syncs_without_the_lock_and_counts_only_what_it_covered(tmp_path, monkeypatch):
    """Recovery flushes once per chunk while the driver may need the log: the fdatasync runs outside the
    lock. An append made meanwhile is not counted durable until a later flush covers it."""
    log = Log.open(str(tmp_path), small_config(flush_mode="group", flush_interval_ms=3_600_000), FakeClock())
    log.append(make_records(3, "b", size=40))
    covered = log.end_offset
    appended = threading.Event()
    fdatasync = os.fdatasync

    def fdatasync_that_waits_for_an_append(fd: int) -> None:
        if not appended.is_set():
            writer = threading.Thread(target=lambda: (log.append([ProducerRecord(b"x")]), appended.set()))
            writer.start()
            writer.join(APPEND_WAIT_S)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync_that_waits_for_an_append)
    log.flush()
    assert appended.is_set(), "the append waited for the flush's lock"
    assert log.durable_end_offset == covered < log.end_offset
    log.flush()
    assert log.durable_end_offset == log.end_offset
    log.close()


def test_a_flush_that_fails_fails_the_log(tmp_path, monkeypatch):
    log = Log.open(str(tmp_path), small_config(flush_mode="group", flush_interval_ms=3_600_000), FakeClock())
    log.append([ProducerRecord(b"unsynced")])

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken)
    with pytest.raises(StorageUnavailable, match="fsync failed"):
        log.flush()
    monkeypatch.undo()
    with pytest.raises(StorageUnavailable):
        log.append([ProducerRecord(b"after")])
    log.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.integers(1, 40),
    start=st.integers(0, 200),
    budget=st.integers(0, 6_000),
    limit=st.integers(0, 200) | st.none(),
)
def test_a_view_read_as_one_run_is_the_batches_it_yields(tmp_path_factory, batches, start, budget, limit):
    """``read_bytes`` (one pread per segment, the batches checked in place) cuts where ``iter_batches``
    cuts: at the byte budget (the first batch whole however large), at the offset limit, across segment
    rolls; a run the budget ends inside a batch or a header keeps only the whole batches before it."""
    log = filled(tmp_path_factory.mktemp("view"), batches)
    offset = min(start, log.end_offset)
    with log.read_view(offset, budget, max_offset=limit) as view:
        expected = b"".join(batch.data for batch in view.iter_batches())
        assert view.read_bytes() == expected
    log.close()


def test_a_damaged_batch_in_a_run_is_named_and_nothing_past_it_is_answered(tmp_path):
    log = filled(tmp_path, 10)
    log.flush()
    bounds = log.read_batches(0, 1 << 20)
    third = sum(len(b.data) for b in bounds[:2]) + 70  # a byte inside the third batch's records
    data_file = os.path.join(str(tmp_path), "00000000000000000000.log")
    with open(data_file, "r+b") as damaged:
        damaged.seek(third)
        value = damaged.read(1)
        damaged.seek(third)
        damaged.write(bytes([value[0] ^ 0xFF]))
    with log.read_view(0, 1 << 20) as view, pytest.raises(CorruptRecord, match="crc32c mismatch"):
        view.read_bytes()
    with log.read_view(0, sum(len(b.data) for b in bounds[:2])) as view:
        assert view.read_bytes() == bounds[0].data + bounds[1].data  # the budget ends before the damage
    log.close()
