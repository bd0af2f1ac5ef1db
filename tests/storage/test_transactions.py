"""Transactions in a log (``raftlog.storage.transactions``): control batches as Kafka writes them, the last
stable offset and the aborted index following the log through appends, truncation, a start moving up,
resets, reopening and crashes, always equal to what a walk of the stored batches says."""

from __future__ import annotations

import os
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.storage import Log
from raftlog.storage.batch import BatchFormatError, ProducerRecord, encode_batch, verify
from raftlog.storage.batch_reads import decode_batch
from raftlog.storage.transactions import (
    ABORT,
    CHECKPOINT_FILE,
    COMMIT,
    AbortedTransaction,
    control_type,
    encode_control_batch,
)
from tests.storage.helpers import FakeClock, abandon, small_config


def open_log(path: object) -> Log:
    return Log.open(str(path), small_config(), clock=FakeClock())


def txn_batch(producer_id: int, records: int = 2, epoch: int = 0, sequence: int = 0) -> bytes:
    """A transactional producer's batch, as Kafka clients send one."""
    rows = [ProducerRecord(key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=1_000) for i in range(records)]
    batch = bytearray(encode_batch(0, rows, 0, 1_000, producer_id, sequence, producer_epoch=epoch))
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def marker(producer_id: int, commit: bool, epoch: int = 0) -> bytes:
    return encode_control_batch(producer_id, epoch, commit, coordinator_epoch=7, timestamp_ms=2_000)


def walked(log: Log) -> tuple[int, list[AbortedTransaction]]:
    """The oracle: the last stable offset and aborted transactions read straight from the stored batches."""
    open_txns: dict[int, int] = {}
    rows = []
    if log.log_start_offset < log.end_offset:
        for batch in log.read_batches(log.log_start_offset, 2**40):
            header = batch.header
            if not header.is_transactional:
                continue
            if not header.is_control:
                open_txns.setdefault(header.producer_id, header.base_offset)
                continue
            first = open_txns.pop(header.producer_id, None)
            kind = control_type(memoryview(batch.data)[61:])
            if first is not None and kind == ABORT:
                rows.append(AbortedTransaction(header.producer_id, first, header.base_offset))
    lso = max(min(open_txns.values(), default=log.end_offset), log.log_start_offset)
    return lso, [r for r in rows if r.last_offset >= log.log_start_offset]


def state(log: Log) -> tuple[int, list[AbortedTransaction]]:
    txns = log.transactions
    return txns.last_stable_offset(log.end_offset, log.log_start_offset), list(txns.rows)


def test_a_control_batch_is_kafkas_marker() -> None:
    batch = marker(42, commit=True, epoch=3)
    header = verify(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.sequence) == (42, 3, -1)
    (record,) = decode_batch(batch).records
    assert record.key == struct.pack(">hh", 0, COMMIT)  # version 0, type 1
    assert record.value == struct.pack(">hi", 0, 7)  # version 0, coordinator epoch
    assert control_type(memoryview(batch)[61:]) == COMMIT
    assert control_type(memoryview(marker(42, commit=False))[61:]) == ABORT
    assert marker(42, True, 3) == batch  # a function of its inputs: every replica writes the same bytes


def test_a_control_record_of_another_shape_is_refused() -> None:
    plain = encode_batch(0, [ProducerRecord(key=b"k", value=b"v")], 0, 1_000)
    with pytest.raises(BatchFormatError):
        control_type(memoryview(plain)[61:])
    with pytest.raises(BatchFormatError):
        control_type(b"\x02")


def test_the_last_stable_offset_stops_at_the_oldest_open_transaction(tmp_path: object) -> None:
    log = open_log(tmp_path)
    log.append_prepared(txn_batch(1), 1)  # 0-1: producer 1 opens
    log.append([ProducerRecord(key=b"a", value=b"b")], term=1)  # 2: not transactional, above the open one
    log.append_prepared(txn_batch(2), 1)  # 3-4: producer 2 opens
    assert state(log) == (0, [])
    log.append_prepared(marker(1, commit=False), 1)  # 5: producer 1 aborts
    assert state(log) == (3, [AbortedTransaction(1, 0, 5)])
    log.append_prepared(marker(2, commit=True), 1)  # 6: producer 2 commits
    assert state(log) == (7, [AbortedTransaction(1, 0, 5)]) == walked(log)
    log.append_prepared(marker(2, commit=True), 1)  # 7: written again (a coordinator's failover)
    assert state(log) == (8, [AbortedTransaction(1, 0, 5)])
    assert log.transactions.aborted_between(0, 2) == [(1, 0)]
    # as Kafka answers: every aborted transaction whose offsets (first to marker) overlap the range
    assert log.transactions.aborted_between(3, 8) == [(1, 0)]
    assert log.transactions.aborted_between(6, 8) == []
    assert log.transactions.is_aborted(1, 1) and not log.transactions.is_aborted(2, 3)
    log.close()


def test_the_index_survives_reopening_and_is_rebuilt_without_its_checkpoint(tmp_path: object) -> None:
    log = open_log(tmp_path)
    for producer in range(1, 6):
        log.append_prepared(txn_batch(producer), 1)
    for producer in (2, 4):
        log.append_prepared(marker(producer, commit=False), 1)
    log.append_prepared(marker(1, commit=True), 1)
    before = state(log)
    assert before == walked(log) and before[0] == 4  # producer 3 opened at 4
    log.close()
    log = open_log(tmp_path)
    assert state(log) == before
    log.close()
    for damage in (b"", b"not a checkpoint", None):
        path = os.path.join(str(tmp_path), CHECKPOINT_FILE)
        if damage is None:
            os.unlink(path)
        else:
            with open(path, "wb") as f:
                f.write(damage)
        log = open_log(tmp_path)
        assert state(log) == before
        log.close()


def test_a_crash_that_loses_the_tail_rebuilds_from_the_batches_left(tmp_path: object) -> None:
    """The checkpoint covers more than a crash left: it is not used, and one true of the log is written
    before any append reuses the offsets it described."""
    log = open_log(tmp_path)
    log.append_prepared(txn_batch(1), 1)
    log.append_prepared(txn_batch(2), 1)
    log.flush()
    log.append_prepared(marker(1, commit=False), 1)
    log.flush()  # the checkpoint now covers the marker
    log.truncate(4)  # as if a crash had cut the marker
    abandon(log)
    log = open_log(tmp_path)
    assert state(log) == walked(log) == (0, [])  # producer 1's transaction is open again
    log.append_prepared(marker(1, commit=True), 1)  # another end takes its offset
    abandon(log)
    log = open_log(tmp_path)
    assert state(log) == walked(log) == (2, [])
    log.close()


def test_truncation_opens_again_what_a_cut_marker_ended(tmp_path: object) -> None:
    log = open_log(tmp_path)
    log.append_prepared(txn_batch(1), 1)  # 0-1
    log.append_prepared(marker(1, commit=False), 1)  # 2
    log.append_prepared(txn_batch(2), 1)  # 3-4
    log.append_prepared(marker(2, commit=True), 1)  # 5
    assert state(log) == (6, [AbortedTransaction(1, 0, 2)])
    log.truncate(5)
    assert state(log) == walked(log) == (3, [AbortedTransaction(1, 0, 2)])
    log.truncate(2)
    assert state(log) == walked(log) == (0, [])
    log.close()
    log = open_log(tmp_path)
    assert state(log) == (0, [])
    log.close()


def test_rows_below_the_start_go_and_a_reset_clears_everything(tmp_path: object) -> None:
    log = open_log(tmp_path)
    log.append_prepared(txn_batch(1), 1)  # 0-1
    log.append_prepared(marker(1, commit=False), 1)  # 2
    log.append_prepared(txn_batch(2), 1)  # 3-4
    log.append_prepared(marker(2, commit=False), 1)  # 5
    log.advance_start(3)
    assert state(log) == (6, [AbortedTransaction(2, 3, 5)])
    log.append_prepared(txn_batch(3), 1)  # 6-7
    log.truncate_fully_and_start_at(100)
    assert state(log) == (100, [])
    log.close()
    log = open_log(tmp_path)
    assert state(log) == (100, [])
    log.close()


# A history: (producer, action) with action 0 write, 1 commit, 2 abort; and where reads begin and end.
actions = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(history=actions, cut=st.integers(0, 100), read=st.tuples(st.integers(0, 100), st.integers(0, 100)))
def test_the_index_is_always_what_the_batches_say(
    tmp_path_factory: pytest.TempPathFactory,
    history: list[tuple[int, int]],
    cut: int,
    read: tuple[int, int],
) -> None:
    log = open_log(tmp_path_factory.mktemp("log"))
    for producer, action in history:
        if action == 0:
            log.append_prepared(txn_batch(producer, records=1 + producer % 3), 1)
        else:
            log.append_prepared(marker(producer, commit=action == 1), 1)
        assert state(log) == walked(log)
    start, end = sorted(read)
    expected = sorted(
        (r.producer_id, r.first_offset)
        for r in walked(log)[1]
        if r.last_offset >= start and r.first_offset < end and start < end  # an empty range reads nothing
    )
    assert sorted(log.transactions.aborted_between(start, end)) == expected
    boundaries = [b.header.base_offset for b in log.read_batches(0, 2**40)] if log.end_offset else []
    at = [b for b in boundaries if b <= cut]
    if at:
        log.truncate(at[-1])
        assert state(log) == walked(log)
    log.close()
    log = open_log(log.directory)
    assert state(log) == walked(log)
    log.close()


def keyed_txn(producer_id: int, key: bytes, value: bytes, sequence: int) -> bytes:
    batch = bytearray(
        encode_batch(0, [ProducerRecord(value, key, timestamp_ms=1_000)], 0, 1_000, producer_id, sequence)
    )
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_the_cleaner_drops_aborted_records_keeps_markers_and_stops_at_the_last_stable_offset(
    tmp_path: object,
) -> None:
    """An aborted write of a key must not hide the key's committed value from compaction; a transaction
    still open may yet abort, so nothing from its first batch on is cleaned."""
    from raftlog.storage.cleaner import clean_log
    from tests.storage.test_compaction import compacted

    clock = FakeClock()
    log = Log.open(str(tmp_path), compacted(), clock=clock)
    log.append([ProducerRecord(b"committed", b"k")], term=1)  # 0
    log.append_prepared(keyed_txn(1, b"k", b"aborted", 0), 1)  # 1
    log.append_prepared(marker(1, commit=False), 1)  # 2
    log.append([ProducerRecord(b"old", b"j")], term=1)  # 3
    log.roll()
    log.append_prepared(keyed_txn(2, b"j", b"open", 0), 1)  # 4: stays open
    log.append([ProducerRecord(b"newer", b"j")], term=1)  # 5: would shadow 3 and 4, were it cleaned
    log.roll()
    assert last_stable(log) == 4
    clean_log(log, clock())
    kept = {
        (r.offset, r.key, r.value)
        for b in log.read_batches(0, 2**40)
        if not b.header.is_control
        for r in b.records()
    }
    assert (0, b"k", b"committed") in kept  # the aborted write did not shadow it
    assert not any(value == b"aborted" for _, _, value in kept)  # gone with its transaction
    # at or past the open transaction nothing is mapped or cleaned
    assert {(3, b"j", b"old"), (4, b"j", b"open"), (5, b"j", b"newer")} <= kept
    controls = [b for b in log.read_batches(0, 2**40) if b.header.is_control]
    assert len(controls) == 1 and controls[0].header.base_offset == 2
    log.close()


def last_stable(log: Log) -> int:
    return log.transactions.last_stable_offset(log.end_offset, log.log_start_offset)


def test_a_read_committed_reader_leaves_out_aborted_records_and_every_marker(tmp_path: object) -> None:
    """As Kafka's consumer: a producer's batches from its aborted transaction's first offset up to its
    ABORT marker are dropped; its next transaction, committed, is read."""
    from raftlog.storage.batch_reads import records_from

    log = open_log(tmp_path)
    log.append_prepared(keyed_txn(1, b"a", b"aborted-1", 0), 1)  # 0
    log.append_prepared(keyed_txn(2, b"b", b"committed-2", 0), 1)  # 1
    log.append_prepared(marker(1, commit=False), 1)  # 2
    log.append_prepared(marker(2, commit=True), 1)  # 3
    log.append_prepared(keyed_txn(1, b"a", b"committed-1", 1), 1)  # 4
    log.append_prepared(marker(1, commit=True), 1)  # 5
    data = b"".join(b.data for b in log.read_batches(0, 2**40))
    aborted = log.transactions.aborted_between(0, log.end_offset)
    assert aborted == [(1, 0)]
    assert [r.value for r in records_from(data, 0, aborted)] == [b"committed-2", b"committed-1"]
    # read_uncommitted: every producer record, still no marker
    assert [r.value for r in records_from(data, 0)] == [b"aborted-1", b"committed-2", b"committed-1"]
    log.close()
