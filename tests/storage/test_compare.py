"""Comparing a partition's replicas offline (``raftlog.storage.compare``, ``raftlog log compare``): replicas
written alike through ``Log`` are identical over every batch; a batch of other bytes, a batch lost (offsets
shifted after it), a batch cut out of a file, a replica behind, one whose start moved (retention,
DeleteRecords) or that compaction rewrote, a running node's growing or torn tail, and damage are each
found and named where they are."""

from __future__ import annotations

import os
import pathlib

import pytest

from raftlog.storage import Log, ProducerRecord
from raftlog.storage.cleaner import clean_log
from raftlog.storage.compare import (
    DifferenceKind,
    ReplicaChanged,
    Unreadable,
    compare,
    compare_partition,
    open_replica,
)
from raftlog.storage.dirlock import DirectoryLock
from raftlog.storage.log_format import write_marker
from raftlog.storage.log_open import read_cleaner_offsets

from .helpers import (
    START_MS,
    FakeClock,
    batch_positions,
    corrupt_byte,
    make_records,
    segment_paths,
    small_config,
)
from .legacy_fixture import copy_fixture, log_dir

BATCHES = 24


def _config(**overrides: object):  # type: ignore[no-untyped-def]
    """Small segments (so that a walk crosses several); group flushes: a test's log needs no fsync each."""
    return small_config(flush_mode="group", **overrides)


def _batches(count: int = BATCHES) -> list[list[ProducerRecord]]:
    """Batches of 2, 3 and 4 records in turn, each distinguishable."""
    return [make_records(2 + i % 3, f"b{i}") for i in range(count)]


def _write(directory: pathlib.Path, batches: list[list[ProducerRecord]], **config: object) -> str:
    """A replica: ``batches`` appended through ``Log`` as a node applies them (same clock, same term)."""
    log = Log.open(str(directory), _config(**config), clock=FakeClock())
    for records in batches:
        log.append(records, term=3)
    log.close()
    return str(directory)


def _offset_of(batches: list[list[ProducerRecord]], index: int) -> int:
    return sum(len(b) for b in batches[:index])


def _pair(
    tmp_path: pathlib.Path, a: list[list[ProducerRecord]], b: list[list[ProducerRecord]]
) -> list[tuple[str, str]]:
    return [("a", _write(tmp_path / "a", a)), ("b", _write(tmp_path / "b", b))]


def test_replicas_written_alike_are_identical_over_every_batch(tmp_path) -> None:
    batches = _batches()
    result = compare_partition("t.0", _pair(tmp_path, batches, batches))
    end = _offset_of(batches, BATCHES)
    assert result.identical and result.difference is None
    assert result.batches == BATCHES
    assert (result.compared_from, result.compared_to) == (0, end)
    assert [(r.log_start_offset, r.end_offset, r.tail_bytes) for r in result.replicas] == [(0, end, 0)] * 2
    assert len(result.replicas[0].segments) >= 3  # the walk crosses segments


def test_a_batch_of_other_bytes_is_named_at_its_offset_with_the_header_fields_that_differ(tmp_path) -> None:
    batches = _batches()
    other = list(batches)
    other[9] = make_records(len(batches[9]), "b9", timestamp_ms=START_MS + 1)  # a producer's other timestamp
    result = compare_partition("t.0", _pair(tmp_path, batches, other))
    difference = result.difference
    assert difference is not None and difference.kind is DifferenceKind.BYTES
    assert difference.offset == _offset_of(batches, 9)
    assert difference.fields == ("CRC", "first timestamp", "max timestamp")  # offsets are the same
    assert result.batches == 9 and result.compared_to == difference.offset
    seen = [b for b in difference.batches if b is not None]
    assert [b.header.base_offset for b in seen] == [difference.offset] * 2
    assert all(b.crc_valid for b in seen)  # each replica's batch is sound: they hold other records


def test_a_lost_batch_shifts_the_offsets_after_it_and_says_so(tmp_path) -> None:
    """A replica that applied one entry as a no-op (what release 0.1.0 does with a batch it cannot read):
    the next batch takes its offsets."""
    batches = _batches()
    lost = batches[:5] + batches[6:]
    result = compare_partition("t.0", _pair(tmp_path, batches, lost))
    difference = result.difference
    assert difference is not None and difference.kind is DifferenceKind.BYTES
    assert difference.offset == _offset_of(batches, 5)
    assert difference.fields == ("length", "CRC", "records count", "last offset delta")
    a, b = difference.batches
    assert a is not None and b is not None
    assert (a.header.end_offset, b.header.end_offset) == (difference.offset + 4, difference.offset + 2)
    shorter = result.replicas[1]
    assert result.behind(shorter) == len(batches[5]) and result.behind(result.replicas[0]) == 0


def test_a_batch_cut_out_of_a_file_is_missing_there(tmp_path) -> None:
    batches = _batches()
    source = _write(tmp_path / "a", batches)
    cut = tmp_path / "b"
    cut.mkdir()
    for name in os.listdir(source):
        (cut / name).write_bytes(pathlib.Path(source, name).read_bytes())
    path = segment_paths(str(cut))[0]
    (position, size), (_, _) = batch_positions(path)[1:3]
    data = pathlib.Path(path).read_bytes()
    pathlib.Path(path).write_bytes(data[:position] + data[position + size :])
    result = compare_partition("t.0", [("a", source), ("b", str(cut))])
    difference = result.difference
    assert difference is not None and difference.kind is DifferenceKind.MISSING_BATCH
    assert difference.offset == _offset_of(batches, 1)
    assert "base offset" in difference.fields
    a, b = difference.batches
    assert a is not None and b is not None
    assert (a.header.base_offset, b.header.base_offset) == (_offset_of(batches, 1), _offset_of(batches, 2))


def test_a_replica_that_ends_earlier_is_behind_not_different(tmp_path) -> None:
    batches = _batches()
    result = compare_partition("t.0", _pair(tmp_path, batches, batches[:15]))
    assert result.identical and result.batches == 15
    assert result.compared_to == _offset_of(batches, 15)
    assert [result.behind(r) for r in result.replicas] == [
        0,
        _offset_of(batches, BATCHES) - _offset_of(batches, 15),
    ]


def test_three_replicas_one_behind_the_other_two_are_compared_to_their_end(tmp_path) -> None:
    batches = _batches()
    other = list(batches)
    other[20] = make_records(len(batches[20]), "changed")
    replicas = [*_pair(tmp_path, batches, other), ("c", _write(tmp_path / "c", batches[:10]))]
    result = compare_partition("t.0", replicas)
    assert result.difference is not None and result.difference.offset == _offset_of(batches, 20)
    assert result.difference.batches[2] is None  # c holds nothing there: it is behind


def test_a_start_moved_by_retention_is_compared_from_there(tmp_path) -> None:
    batches = _batches()
    a = _write(tmp_path / "a", batches)
    log = Log.open(str(tmp_path / "b"), _config(retention_bytes=1500), clock=FakeClock())
    for records in batches:
        log.append(records, term=3)
    assert log.apply_retention(START_MS) > 0
    start = log.log_start_offset
    log.close()
    result = compare_partition("t.0", [("a", a), ("b", str(tmp_path / "b"))])
    assert result.identical and 0 < start == result.compared_from
    assert [r.log_start_offset for r in result.replicas] == [0, start]
    assert result.batches == sum(1 for i in range(BATCHES) if _offset_of(batches, i) >= start)


def test_a_start_moved_inside_a_batch_compares_that_batch_whole(tmp_path) -> None:
    batches = _batches()
    a = _write(tmp_path / "a", batches)
    log = Log.open(str(tmp_path / "b"), _config(), clock=FakeClock())
    for records in batches:
        log.append(records, term=3)
    inside = _offset_of(batches, 4) + 1
    assert log.advance_start(inside) == inside  # DeleteRecords
    log.close()
    result = compare_partition("t.0", [("a", a), ("b", str(tmp_path / "b"))])
    assert result.identical and result.compared_from == inside
    assert result.batches == BATCHES - 4


def test_what_compaction_rewrote_on_one_replica_is_left_out(tmp_path) -> None:
    """Each replica compacts its own copy when its cleaner is due: below what it rewrote, bytes differ on
    purpose."""
    config = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.01}
    keyed = [
        [ProducerRecord(f"v{i}-{j}".encode(), f"k{j % 3}".encode()) for j in range(3)] for i in range(30)
    ]
    a = _write(tmp_path / "a", keyed, **config)
    b = _write(tmp_path / "b", keyed, **config)
    log = Log.open(b, _config(**config), clock=FakeClock())
    report = clean_log(log, START_MS)
    log.close()
    assert report is not None and report.records_removed > 0
    rewritten_below = read_cleaner_offsets(b).rewritten_below
    assert rewritten_below > 0
    whole = compare("t.0", [open_replica("a", a), open_replica("b", b)])
    assert whole.identical and whole.compared_from == rewritten_below
    assert whole.batches == sum(1 for i in range(30) if 3 * i >= rewritten_below)
    sizes = [sum(os.path.getsize(p) for p in segment_paths(d)) for d in (a, b)]
    assert sizes[1] < sizes[0]  # the bytes left out do differ


def test_a_running_node_s_files_are_compared_as_far_as_they_held_when_read(tmp_path) -> None:
    """The replica's log open and appended to after it was read; its lock held as a node holds it; bytes
    of a batch being written after its last whole batch: counted, not compared."""
    batches = _batches()
    node = tmp_path / "n1"
    lock = DirectoryLock.acquire(str(node), "node n1")
    try:
        running = Log.open(str(node / "logs" / "t.0"), _config(), clock=FakeClock())
        for records in batches:
            running.append(records, term=3)
        other = _write(tmp_path / "other", batches + batches[:3])
        replica = open_replica("n1", str(node / "logs" / "t.0"))
        running.append(make_records(2, "after"), term=3)  # appended after it was read
        replicas = [replica, open_replica("other", other)]
        result = compare("t.0", replicas)
        running.close()
    finally:
        lock.close()
    assert result.identical and result.batches == BATCHES
    assert replica.end_offset == _offset_of(batches, BATCHES)
    assert replica.holder is not None and replica.holder.owner == "node n1"
    assert replicas[1].holder is None

    torn = tmp_path / "torn"
    torn_dir = _write(torn, batches)
    last = segment_paths(torn_dir)[-1]
    with open(segment_paths(other)[-1], "rb") as f:  # the head of a batch whose write is under way
        head = f.read()[-30:]
    with open(last, "ab") as f:
        f.write(head)
    torn_replica = open_replica("torn", torn_dir)
    assert torn_replica.tail_bytes == 30 and torn_replica.end_offset == _offset_of(batches, BATCHES)
    assert compare("t.0", [torn_replica, open_replica("a", _write(tmp_path / "a", batches))]).identical


def test_a_segment_deleted_while_read_makes_the_read_start_again(tmp_path) -> None:
    batches = _batches()
    a = _write(tmp_path / "a", batches)
    replicas = [open_replica("a", a), open_replica("b", _write(tmp_path / "b", batches))]
    os.unlink(replicas[0].segments[0][1])  # retention, between the listing and the read
    with pytest.raises(ReplicaChanged):
        compare("t.0", replicas)


def test_damage_in_a_replica_is_a_difference_naming_its_file_and_byte(tmp_path) -> None:
    batches = _batches()
    pair = _pair(tmp_path, batches, batches)
    path = segment_paths(pair[1][1])[0]
    position, _ = batch_positions(path)[2]
    corrupt_byte(path, position + 16, lambda _: 7)  # the magic byte: no batch framing from here
    result = compare_partition("t.0", pair)
    difference = result.difference
    assert difference is not None and difference.kind is DifferenceKind.DAMAGED
    assert difference.offset == _offset_of(batches, 2) and result.batches == 2
    assert f"b: {path} at byte {position}: magic 7" in difference.damage


def test_a_log_fenced_at_a_level_is_a_current_log(tmp_path) -> None:
    batches = _batches()
    pair = _pair(tmp_path, batches, batches)
    write_marker(pair[0][1], 2)
    result = compare_partition("t.0", pair)
    assert result.identical and [r.level for r in result.replicas] == [2, 1]


def test_what_is_no_log_to_compare_is_refused_naming_it(tmp_path) -> None:
    with pytest.raises(Unreadable, match="No such file"):
        open_replica("x", str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(Unreadable, match="holds no segment"):
        open_replica("x", str(tmp_path / "empty"))
    legacy = log_dir(copy_fixture(tmp_path / "legacy"), "orders", 0)
    with pytest.raises(Unreadable, match="raftlog log migrate"):
        open_replica("x", legacy)
