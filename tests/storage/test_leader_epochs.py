"""Leader epochs of a log (``raftlog.storage.leader_epochs``): Kafka's answers of OffsetForLeaderEpoch and
the epoch of an offset, and the index following the log through appends across epochs, truncation, a
start moving up (deleted records, retention), resets, clean reopens and crashes at each step, always equal
to what the stored batches' headers say."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.storage import Log, leader_epochs
from raftlog.storage.batch import BatchHeader, decode_header
from raftlog.storage.leader_epochs import (
    CHECKPOINT_FILE,
    NO_EPOCH,
    NO_OFFSET,
    EpochEnd,
    EpochEntry,
    end_offset_for,
    epoch_for_offset,
)
from raftlog.storage.log_cut import delete_oldest_segments
from raftlog.storage.segment import Segment
from tests.storage.helpers import (
    FakeClock,
    abandon,
    batch_positions,
    make_records,
    segment_paths,
    small_config,
)
from tests.storage.test_log import Crash, _crash_after


def open_log(path: object) -> Log:
    return Log.open(str(path), small_config(), clock=FakeClock())


def from_headers(log: Log) -> tuple[EpochEntry, ...]:
    """The oracle: each epoch's first offset read from the log's start, straight from the batches."""
    entries: list[EpochEntry] = []
    start = log.log_start_offset
    if start >= log.end_offset:
        return ()
    for batch in log.read_batches(start, 2**40):
        term = batch.header.term
        if not entries or entries[-1].epoch != term:
            entries.append(EpochEntry(term, max(batch.header.base_offset, start)))
    return tuple(entries)


def append_terms(log: Log, terms: list[int], records: int = 2) -> list[tuple[int, int]]:
    bounds = []
    for i, term in enumerate(terms):
        result = log.append(make_records(records, f"t{term}-{i}", size=40), term=term)
        bounds.append((result.base_offset, result.end_offset))
    return bounds


# -- Kafka's answers -----------------------------------------------------------------------------------

ENTRIES = (EpochEntry(2, 0), EpochEntry(3, 10), EpochEntry(7, 25))


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (-1, EpochEnd(NO_EPOCH, NO_OFFSET)),  # undefined epoch asked
        (0, EpochEnd(0, 0)),  # below every epoch: itself, ending where the first begins
        (2, EpochEnd(2, 10)),
        (3, EpochEnd(3, 25)),
        (5, EpochEnd(3, 25)),  # an epoch with no batch: the largest before it, ending at the next start
        (7, EpochEnd(7, 40)),  # the latest: the log's end
        (8, EpochEnd(NO_EPOCH, NO_OFFSET)),  # above every epoch known
    ],
)
def test_end_offset_for_answers_as_kafkas_leader_epoch_cache(epoch: int, expected: EpochEnd) -> None:
    assert end_offset_for(ENTRIES, epoch, 40) == expected


def test_a_leader_that_has_not_appended_in_its_epoch_answers_it_with_the_log_end() -> None:
    assert end_offset_for(ENTRIES, 9, 40, current_epoch=9) == EpochEnd(9, 40)
    assert end_offset_for(ENTRIES, 7, 40, current_epoch=9) == EpochEnd(7, 40)  # 7 ends where 9 begins
    assert end_offset_for(ENTRIES, 8, 40, current_epoch=9) == EpochEnd(7, 40)
    assert end_offset_for(ENTRIES, 10, 40, current_epoch=9) == EpochEnd(NO_EPOCH, NO_OFFSET)
    assert end_offset_for((), 4, 0, current_epoch=4) == EpochEnd(4, 0)  # an empty log, a leader
    assert end_offset_for((), 4, 0) == EpochEnd(NO_EPOCH, NO_OFFSET)
    assert end_offset_for(ENTRIES, 3, 40, current_epoch=7) == EpochEnd(3, 25)  # its epoch is stored


def test_the_epoch_of_an_offset_is_that_of_the_batch_holding_it() -> None:
    assert [epoch_for_offset(ENTRIES, o) for o in (0, 9, 10, 24, 25, 99)] == [2, 2, 3, 3, 7, 7]
    assert epoch_for_offset(ENTRIES[1:], 5) == NO_EPOCH
    assert epoch_for_offset((), 0) == NO_EPOCH


# -- the index following the log -----------------------------------------------------------------------


def test_appends_across_epochs_start_an_entry_at_each_new_epochs_first_batch(tmp_path) -> None:
    log = open_log(tmp_path)
    bounds = append_terms(log, [1, 1, 1, 4, 4, 5, 9])
    starts = [0, bounds[3][0], bounds[5][0], bounds[6][0]]
    assert log.leader_epochs.entries == tuple(map(EpochEntry, [1, 4, 5, 9], starts))
    assert log.leader_epochs.entries == from_headers(log)
    assert log.segment_count > 1  # rolled: entries cross segments
    log.close()
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == from_headers(reopened)
        assert reopened.leader_epochs.saved_end == reopened.end_offset  # a clean close: nothing to walk


def test_append_batch_and_append_prepared_note_the_stored_epoch(tmp_path) -> None:
    source = open_log(tmp_path / "source")
    append_terms(source, [3, 3, 6])
    copy = open_log(tmp_path / "copy")
    for batch in source.read_batches(0, 2**40):  # a recovering replica copies its peers' batches whole
        copy.append_batch(batch.data)
    assert copy.leader_epochs.entries == source.leader_epochs.entries == from_headers(copy)
    copy.append_prepared(source.read_batches(0, 1)[0].data, term=8)  # apply stamps the entry's term
    assert copy.leader_epochs.entries[-1] == EpochEntry(8, source.end_offset)


def test_truncation_drops_the_epochs_at_or_after_the_new_end(tmp_path) -> None:
    log = open_log(tmp_path)
    bounds = append_terms(log, [1, 2, 2, 3, 5])
    log.truncate(bounds[3][0])  # epoch 3's first batch goes, with everything after it
    assert log.leader_epochs.entries == (EpochEntry(1, 0), EpochEntry(2, bounds[1][0])) == from_headers(log)
    log.truncate(bounds[2][0])  # inside epoch 2: it stays
    assert log.leader_epochs.entries == from_headers(log)
    append_terms(log, [6])
    assert log.leader_epochs.entries[-1] == EpochEntry(6, bounds[2][0])
    abandon(log)
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == from_headers(reopened)


def test_a_start_moving_up_folds_the_epochs_below_it_into_one_at_the_start(tmp_path) -> None:
    log = open_log(tmp_path)
    bounds = append_terms(log, [1, 1, 2, 2, 4, 4], records=3)
    inside = bounds[3][0] + 1  # inside a batch of epoch 2
    log.advance_start(inside)
    assert (
        log.leader_epochs.entries == (EpochEntry(2, inside), EpochEntry(4, bounds[4][0])) == from_headers(log)
    )
    log.advance_start(bounds[4][0])
    assert log.leader_epochs.entries == (EpochEntry(4, bounds[4][0]),)
    log.advance_start(log.end_offset)  # nothing left to read: no epoch either
    assert log.leader_epochs.entries == () == from_headers(log)
    abandon(log)
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == ()


def test_retention_folds_the_epochs_of_the_segments_it_deletes(tmp_path) -> None:
    log = open_log(tmp_path)
    append_terms(log, [1] * 6 + [2] * 6 + [3] * 6)
    first_bases = [s.base_offset for s in log.segment_infos()]
    delete_oldest_segments(log, 2)
    assert log.log_start_offset == first_bases[2]
    assert log.leader_epochs.entries == from_headers(log)
    assert log.leader_epochs.entries[0].start_offset == first_bases[2]


def test_a_reset_to_a_new_start_clears_the_epochs(tmp_path) -> None:
    log = open_log(tmp_path)
    append_terms(log, [1, 2])
    log.truncate_fully_and_start_at(log.end_offset + 50)
    assert log.leader_epochs.entries == ()
    append_terms(log, [3])
    assert log.leader_epochs.entries == (EpochEntry(3, log.log_start_offset),) == from_headers(log)
    abandon(log)
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == from_headers(reopened)


@pytest.mark.parametrize("damage", ["missing", "garbage", "empty", "unordered", "other version"])
def test_a_lost_or_damaged_checkpoint_is_rebuilt_from_the_batches(tmp_path, damage: str) -> None:
    log = open_log(tmp_path)
    append_terms(log, [1, 1, 2, 3, 3, 3, 7])
    expected = log.leader_epochs.entries
    log.close()
    path = os.path.join(tmp_path, CHECKPOINT_FILE)
    text = {
        "garbage": "\x00\x01 not a checkpoint",
        "empty": "",
        "unordered": "1\n40\n2\n3 10\n1 0\n",
        "other version": "0\n2\n1 0\n3 10\n",
    }
    if damage == "missing":
        os.unlink(path)
    else:
        with open(path, "w", encoding="latin-1") as f:
            f.write(text[damage])
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == expected


def test_the_checkpoint_is_written_at_rolls_so_a_crash_walks_at_most_the_active_segment(tmp_path) -> None:
    log = open_log(tmp_path)
    append_terms(log, [1] + [2] * 14 + [3])
    assert log.segment_count > 2
    assert log.leader_epochs.saved_end == log._segments[-1].base_offset
    abandon(log)
    walked: list[int] = []
    real = leader_epochs.headers_from

    def headers_from(segments: Sequence[Segment], offset: int) -> Iterator[tuple[Segment, int, BatchHeader]]:
        for segment, position, header in real(segments, offset):
            walked.append(header.base_offset)
            yield segment, position, header

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(leader_epochs, "headers_from", headers_from)
        reopened = open_log(tmp_path)
    with reopened:
        active_base = reopened._segments[-1].base_offset
        assert walked and min(walked) == active_base  # the active segment only, never a sealed one
        assert reopened.leader_epochs.entries == from_headers(reopened)


def test_a_power_loss_of_the_unflushed_tail_leaves_no_epoch_of_the_lost_batches(tmp_path) -> None:
    log = open_log(tmp_path)
    append_terms(log, [1, 1])
    log.flush()
    append_terms(log, [2, 2])  # not flushed; in the active segment
    assert log.leader_epochs.entries[-1].epoch == 2
    log.flush()  # writes the checkpoint naming epoch 2 ...
    active = segment_paths(str(tmp_path))[-1]
    abandon(log)
    positions = batch_positions(active)
    with open(active, "r+b") as f:  # ... and then the disk lost the batches of epoch 2 anyway
        f.truncate(positions[-2][0] if len(positions) > 1 else 0)
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == from_headers(reopened)


TRUNCATE_CRASHES = [
    ("os", "replace", 0),  # the checkpoint written to its temporary name only
    ("Segment", "truncate_to", 0),  # the later segments deleted, the tail not cut yet
    ("Segment", "delete", 0),  # the checkpoint in place, no segment deleted yet
    ("Segment", "delete", 1),
]


@pytest.mark.parametrize(("target", "name", "calls"), TRUNCATE_CRASHES)
def test_truncation_survives_a_crash_at_each_step(tmp_path, monkeypatch, target, name, calls) -> None:
    log = open_log(tmp_path)
    bounds = append_terms(log, [1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4])
    cut = bounds[3][0]
    _crash_after(monkeypatch, os if target == "os" else Segment, name, calls)
    with pytest.raises(Crash):
        log.truncate(cut)
    monkeypatch.undo()
    abandon(log)
    with open_log(tmp_path) as reopened:
        assert reopened.leader_epochs.entries == from_headers(reopened)
        append_terms(reopened, [9])  # a new epoch after whatever the crash left
        assert reopened.leader_epochs.entries == from_headers(reopened)
    with open_log(tmp_path) as again:
        assert again.leader_epochs.entries == from_headers(again)


def test_a_failed_checkpoint_write_refuses_the_truncation_and_changes_nothing(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path)
    bounds = append_terms(log, [1, 2, 3])
    before = log.leader_epochs.entries

    def refuse(*args: object) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(Exception, match="leader epoch checkpoint"):
        log.truncate(bounds[1][0])
    monkeypatch.undo()
    assert log.leader_epochs.entries == before == from_headers(log)
    assert log.end_offset == bounds[-1][1]


def lose_unflushed_tail(path: str, durable_end_offset: int, choice: int) -> None:
    """Cut the data file at one of its batches that start at or after ``durable_end_offset``."""
    with open(path, "rb") as f:
        data = f.read()
    cuts = [p for p, _ in batch_positions(path) if decode_header(data, p).base_offset >= durable_end_offset]
    if cuts:
        with open(path, "r+b") as f:
            f.truncate(cuts[choice % len(cuts)])


# -- any run of changes --------------------------------------------------------------------------------

steps = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4)),  # term step, records
    st.tuples(st.just("truncate"), st.integers(0, 1000), st.just(0)),
    st.tuples(st.just("advance_start"), st.integers(0, 1000), st.just(0)),
    st.tuples(st.just("retention"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("crash"), st.integers(0, 1000), st.just(0)),
    st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    st.tuples(st.just("reset"), st.integers(0, 20), st.just(0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(steps, min_size=1, max_size=40))
def test_the_epochs_always_equal_those_of_the_stored_batches(tmp_path_factory, run) -> None:
    directory = tmp_path_factory.mktemp("epochs")
    log = open_log(directory)
    term = 0
    try:
        for kind, a, b in run:
            if kind == "append":
                term += a
                log.append(make_records(b, f"t{term}", size=30), term=term)
            elif kind == "truncate" and log.end_offset > log.log_start_offset:
                boundaries = [
                    batch.header.base_offset
                    for batch in log.read_batches(log.log_start_offset, 2**40)
                    if batch.header.base_offset >= log.log_start_offset
                ]
                if boundaries:
                    log.truncate(boundaries[a % len(boundaries)])
            elif kind == "advance_start":
                span = log.end_offset - log.log_start_offset
                log.advance_start(log.log_start_offset + a % (span + 1))
            elif kind == "retention":
                delete_oldest_segments(log, a)
            elif kind == "flush":
                log.flush()
            elif kind in ("crash", "reopen"):
                if kind == "crash":
                    durable = log.durable_end_offset
                    abandon(log)
                    if a % 3 == 0:  # a power loss takes back some of what was not fsynced
                        lose_unflushed_tail(segment_paths(str(directory))[-1], durable, a)
                else:
                    log.close()
                log = open_log(directory)
            elif kind == "reset":
                log.truncate_fully_and_start_at(log.end_offset + a)
            assert log.leader_epochs.entries == from_headers(log), (kind, a, b)
    finally:
        log.close()
