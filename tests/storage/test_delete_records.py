"""Deleted records (Kafka's DeleteRecords) in the log: ``Log.advance_start`` moves the log start offset up,
inside a batch if need be, deletes the segments wholly below it, and survives a crash at each step;
``restart_empty_before`` lets a restarted replica's log begin with the batch that holds its start."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.errors import InvariantViolation
from raftlog.storage import Log, ProducerRecord
from raftlog.storage.batch import encode_batch, verify
from raftlog.storage.errors import OffsetOutOfRange
from raftlog.storage.segment import Segment
from tests.storage.helpers import FakeClock, abandon, make_records, read_all, small_config, snapshot
from tests.storage.test_log import Crash, _crash_after, fill, open_log


def test_the_start_moves_inside_a_batch_and_reads_below_it_are_out_of_range(tmp_path):
    log = open_log(tmp_path)
    bounds = fill(log, 40, records_per_batch=3)
    before = {r.offset: r for r in read_all(log)}
    base, end = next((b, e) for b, e in bounds if e - b == 3 and b > 20)
    start = base + 1  # inside the batch
    assert log.advance_start(start) == start
    assert log.log_start_offset == start
    with pytest.raises(OffsetOutOfRange) as refused:
        log.read(start - 1, 1000)
    assert refused.value.log_start_offset == start
    first = log.read_batches(start, 1)[0]
    assert (first.header.base_offset, first.header.end_offset) == (base, end)  # served whole, as Kafka does
    assert [r.offset for r in read_all(log)] == list(range(start, log.end_offset))
    assert all(before[r.offset] == r for r in read_all(log))
    assert log.segment_count < 40  # the segments wholly below went
    assert all(s.base_offset <= start for s in log._segments[:1])


def test_the_start_never_moves_back_and_a_move_to_it_changes_nothing(tmp_path):
    log = open_log(tmp_path)
    fill(log, 20)
    assert log.advance_start(10) == 10
    state = snapshot(log)
    assert log.advance_start(4) == 10
    assert log.advance_start(10) == 10
    assert snapshot(log) == state


def test_a_reopened_log_starts_where_records_were_deleted(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30)
    start = log.end_offset - 7
    log.advance_start(start)
    state = snapshot(log)
    log.close()
    with open_log(tmp_path) as log:
        assert snapshot(log) == state
        assert log.log_start_offset == start
        assert log.append(make_records(1, "x")).base_offset == state.end_offset


def test_deleting_every_record_keeps_the_offsets_going(tmp_path):
    log = open_log(tmp_path)
    fill(log, 12)
    end = log.end_offset
    assert log.advance_start(end) == end
    assert read_all(log) == []
    assert log.append(make_records(2, "after")).base_offset == end  # no offset reused
    log.close()
    with open_log(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset) == (end, end + 2)


def test_a_start_past_the_end_keeps_the_records_until_a_reopen_restarts_the_log_there(tmp_path):
    """A replica behind its peers applies a delete past its log's end: it keeps what it has (recovery
    restarts it there); a crash then reopens it empty at the start, as a reset would leave it."""
    log = open_log(tmp_path)
    fill(log, 10)
    end = log.end_offset
    assert log.advance_start(end + 50) == end + 50
    assert log.end_offset == end
    abandon(log)
    with open_log(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset) == (end + 50, end + 50)
        assert log.append(make_records(1, "x")).base_offset == end + 50


ADVANCE_CRASH_POINTS = [
    ("os", "replace", 0),  # the start offset file written to its temporary name only
    ("Segment", "delete", 0),  # the start offset in place, no segment deleted yet
    ("Segment", "delete", 2),
    (None, None, None),
]


@pytest.mark.parametrize(("target", "name", "calls"), ADVANCE_CRASH_POINTS)
def test_moving_the_start_survives_a_crash_at_each_step(tmp_path, monkeypatch, target, name, calls):
    log = open_log(tmp_path)
    fill(log, 40)
    before = snapshot(log)
    start = log.end_offset - 5
    if target is not None:
        _crash_after(monkeypatch, os if target == "os" else Segment, name, calls)
    try:
        log.advance_start(start)
        crashed = False
    except Crash:
        crashed = True
    monkeypatch.undo()
    assert crashed == (target is not None)
    abandon(log)
    with open_log(tmp_path) as log:
        if (target, name) == ("os", "replace"):
            assert snapshot(log) == before  # the move never became durable: nothing changed
            return
        assert log.log_start_offset == start
        assert [r for r in before.records if r.offset >= start] == read_all(log)
        assert log.segment_count <= 2  # those wholly below went, at the latest when it was opened
        assert not [n for n in os.listdir(tmp_path) if n.endswith(".deleted")]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_sequence_of_moves_reads_as_the_records_at_or_above_the_highest(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("log")
    log = Log.open(str(directory), small_config(), clock=FakeClock())
    fill(log, data.draw(st.integers(1, 30)), seed=data.draw(st.integers(0, 1000)))
    everything = read_all(log)
    highest = 0
    for offset in data.draw(st.lists(st.integers(0, log.end_offset), max_size=5)):
        highest = max(highest, offset)
        assert log.advance_start(offset) == max(highest, log._segments[0].base_offset)
        if data.draw(st.booleans()):
            log.close()
            log = Log.open(str(directory), small_config(), clock=FakeClock())
    assert log.log_start_offset == highest
    assert read_all(log) == [r for r in everything if r.offset >= highest]
    log.close()


# -- restart_empty_before: a replica restarted at a start inside a batch ---------------------------------


def _batch(base: int, count: int, tag: str) -> bytes:
    return encode_batch(base, make_records(count, tag), 1, 1_700_000_000_000)


def test_an_empty_log_restarted_at_its_start_begins_with_the_batch_that_holds_it(tmp_path):
    log = open_log(tmp_path)
    log.truncate_fully_and_start_at(102)  # the peers' logs start at 102, inside their batch 100..104
    log.restart_empty_before(100)
    assert (log.log_start_offset, log.end_offset) == (102, 100)
    batch = _batch(100, 5, "held")
    log.append_batch(batch, verified_header=verify(batch), durable_elsewhere=True)
    assert (log.log_start_offset, log.end_offset) == (102, 105)
    assert [r.offset for r in read_all(log)] == [102, 103, 104]
    log.close()
    with open_log(tmp_path) as log:
        assert [r.offset for r in read_all(log)] == [102, 103, 104]


def test_a_crash_midway_through_the_restart_reopens_the_log_empty_at_its_start(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    log.truncate_fully_and_start_at(102)
    _crash_after(monkeypatch, Segment, "delete", 0)  # the new segment made, the old one not yet gone
    with pytest.raises(Crash):
        log.restart_empty_before(100)
    monkeypatch.undo()
    abandon(log)
    with open_log(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset) == (102, 102)
        assert log.segment_count == 1


def test_only_an_empty_log_restarts_before_its_start(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    with pytest.raises(InvariantViolation):
        log.restart_empty_before(0)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_offset_for_a_time_is_the_first_late_enough_record_at_or_above_the_start(tmp_path_factory, data):
    """Kafka's ListOffsets by timestamp searches from the log start offset: a deleted record, even one
    still in the batch that holds the start, is never the answer."""
    log = Log.open(str(tmp_path_factory.mktemp("log")), small_config(), clock=FakeClock())
    stamps = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=60))
    for first in range(0, len(stamps), 3):
        chunk = stamps[first : first + 3]
        log.append([ProducerRecord(b"v", timestamp_ms=t) for t in chunk])
    start = data.draw(st.integers(0, len(stamps)))
    log.advance_start(start)
    for wanted in range(52):
        expected = next((o for o in range(start, len(stamps)) if stamps[o] >= wanted), None)
        assert log.offset_for_timestamp(wanted) == expected, (wanted, start)
    log.close()
