"""Inspecting a log offline (``raftlog.storage.inspect``, ``raftlog log verify|dump``): every kind of
damage is reported with its file and byte position, batches and records are shown as stored (null keys,
values and header values, codecs, producer fields), and a log of format v1 reads as what it holds."""

from __future__ import annotations

import json
import pathlib
import struct

import crc32c
import pytest

from raftlog.storage import Log, ProducerRecord
from raftlog.storage.batch import Compression, TimestampType, encode_batch, with_log_append_time
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.inspect import Format, dump_batches, dump_records, verify_directory
from raftlog.storage.migrate import migrate_log, plan_log
from raftlog.storage.transactions import encode_control_batch
from raftlog_cli.cli import main

from .helpers import batch_positions, corrupt_byte, make_records, segment_paths, small_config
from .legacy_fixture import LOGS, copy_fixture, log_dir

_CRC_AT, _ATTRIBUTES_AT, _MAGIC_AT, _LENGTH_AT = 17, 21, 16, 8


def _damaged_log(directory: pathlib.Path) -> tuple[str, int]:
    """Three batches of two records; the second batch's body corrupted. Returns (data file, its byte)."""
    log = Log.open(str(directory), small_config())
    for i in range(3):
        log.append(make_records(2, f"b{i}"))
    log.close()
    path = segment_paths(str(directory))[0]
    position, size = batch_positions(path)[1]
    corrupt_byte(path, position + size - 2)
    return path, position


def _lines(out: str) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """(batch rows, record rows) of ``raftlog log dump``'s output."""
    rows = [json.loads(line) for line in out.splitlines()]
    return [r["batch"] for r in rows if "batch" in r], [r for r in rows if "batch" not in r]


def test_dump_yields_the_records_before_the_damage_then_names_file_and_position(tmp_path) -> None:
    path, position = _damaged_log(tmp_path)
    seen = []
    with pytest.raises(CorruptRecord) as raised:
        for record in dump_records(str(tmp_path)):
            seen.append(record.offset)
    assert seen == [0, 1]
    assert (raised.value.path, raised.value.position) == (path, position)
    assert "crc32c" in raised.value.reason


def test_log_dump_command_prints_records_then_the_damage_and_exits_non_zero(tmp_path, capsys) -> None:
    path, position = _damaged_log(tmp_path)
    code = main(["log", "dump", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1
    assert [r["offset"] for r in _lines(out)[1]] == [0, 1]
    assert err.splitlines() == [
        f"raftlog log dump: corrupt record batch in {path} at byte {position}: "
        f"crc32c mismatch in batch at offset 2"
    ]


def test_log_dump_of_a_sound_log_exits_zero(tmp_path, capsys) -> None:
    log = Log.open(str(tmp_path), small_config())
    log.append(make_records(3, "ok"))
    log.close()
    assert main(["log", "dump", str(tmp_path), "--offset", "1"]) == 0
    out, err = capsys.readouterr()
    assert [r["offset"] for r in _lines(out)[1]] == [1, 2]
    assert err == ""


# -- what a dump shows ---------------------------------------------------------------------------------


def test_dump_shows_each_batch_header_and_records_with_nulls(tmp_path, capsys) -> None:
    log = Log.open(str(tmp_path), small_config(segment_bytes=1 << 20))
    records = [
        ProducerRecord(b"v1", b"k1", (("h", b"x"), ("empty", None)), 1_000),
        ProducerRecord(None, None, (), 1_005),  # a tombstone without a key
    ]
    batch = encode_batch(0, records, 0, 0, 77, 5, producer_epoch=3, compression=Compression.GZIP)
    log.append_prepared(batch, term=4)
    log.append_prepared(with_log_append_time(encode_batch(0, records[:1], 0, 0), 9_999), term=5)
    log.close()
    [(first, first_records), (second, _)] = list(dump_batches(str(tmp_path)))
    assert (first.base_offset, first.record_count, first.leader_epoch, first.compression) == (
        0,
        2,
        4,
        Compression.GZIP,
    )
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.max_timestamp_ms) == (
        77,
        3,
        5,
        1_005,
    )
    assert first_records[1].value is None and first_records[0].headers == (("h", b"x"), ("empty", None))
    assert (second.timestamp_type, second.max_timestamp_ms, second.producer_id) == (
        TimestampType.LOG_APPEND_TIME,
        9_999,
        None,
    )

    assert main(["log", "dump", str(tmp_path)]) == 0
    batches, rows = _lines(capsys.readouterr().out)
    assert {k: batches[0][k] for k in ("base_offset", "record_count", "leader_epoch", "compression")} == {
        "base_offset": 0,
        "record_count": 2,
        "leader_epoch": 4,
        "compression": "gzip",
    }
    assert (batches[0]["producer_id"], batches[0]["producer_epoch"], batches[0]["base_sequence"]) == (
        77,
        3,
        5,
    )
    assert (batches[1]["timestamp_type"], batches[1]["max_timestamp"], batches[1]["producer_id"]) == (
        "LogAppendTime",
        9_999,
        None,
    )
    assert rows[0] == {
        "offset": 0,
        "timestamp": 1_000,
        "key": "k1",
        "value": "v1",
        "headers": [{"key": "h", "value": "x"}, {"key": "empty", "value": None}],
    }
    assert (rows[1]["key"], rows[1]["value"]) == (None, None)
    assert rows[2]["timestamp"] == 9_999  # LogAppendTime: every record has the batch's time


# -- verify: each kind of damage, where it is --------------------------------------------------------


def _zstd_log(directory: pathlib.Path) -> tuple[str, list[tuple[int, int]]]:
    """Three zstd batches of 20 compressible records. Returns the data file and (position, size) of each."""
    log = Log.open(str(directory), small_config(segment_bytes=1 << 20))
    for i in range(3):
        records = [ProducerRecord(f"batch {i} record {j} ".encode() * 8, f"k{j}".encode()) for j in range(20)]
        log.append_prepared(encode_batch(0, records, 0, 1_000, compression=Compression.ZSTD), term=1)
    log.close()
    path = segment_paths(str(directory))[0]
    return path, batch_positions(path)


def _rewrite(path: str, position: int, change: dict[int, int], fix_crc: bool) -> None:
    """Set bytes at ``position + k`` to ``v``; with ``fix_crc`` store the CRC the changed bytes have (a
    writer's bug, or damage the CRC cannot see), so that only deeper checks catch it."""
    data = bytearray(pathlib.Path(path).read_bytes())
    for at, value in change.items():
        data[position + at] = value
    if fix_crc:
        length = struct.unpack_from(">i", data, position + _LENGTH_AT)[0]
        end = position + 12 + length
        struct.pack_into(">I", data, position + _CRC_AT, crc32c.crc32c(bytes(data[position + 21 : end])))
    pathlib.Path(path).write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "reason", "walked"),
    [
        ("crc", "crc32c mismatch", 3),
        ("length", "the rest is unreadable", 1),  # nothing after it can be found
        ("magic", "unknown magic 7", 3),
        ("codec", "unsupported compression codec 7", 3),
        ("compressed body", "records do not decode (zstd)", 3),
    ],
)
def test_verify_reports_each_kind_of_damage_at_its_file_and_byte(
    tmp_path, capsys, damage: str, reason: str, walked: int
) -> None:
    path, positions = _zstd_log(tmp_path)
    position, size = positions[1]
    if damage == "crc":
        _rewrite(path, position, {_CRC_AT: pathlib.Path(path).read_bytes()[position + _CRC_AT] ^ 0x01}, False)
    elif damage == "length":
        _rewrite(path, position, {_LENGTH_AT: 0x7F}, False)
    elif damage == "magic":
        _rewrite(path, position, {_MAGIC_AT: 7}, False)  # outside the CRC: nothing else notices
    elif damage == "codec":
        _rewrite(path, position, {_ATTRIBUTES_AT + 1: 0x07}, True)
    else:
        _rewrite(
            path, position, {size // 2: pathlib.Path(path).read_bytes()[position + size // 2] ^ 0xFF}, True
        )
    report = verify_directory(str(tmp_path))
    assert not report.ok
    [problem] = report.problems
    assert (problem.path, problem.position) == (path, position)
    assert reason in problem.reason
    assert report.segments[0].batches == walked  # the batches after a damaged one are checked

    assert main(["log", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"  byte {position}: " in out and reason in out and "CORRUPT: 1 damaged batch" in out


def test_verify_reports_every_damaged_batch_and_offsets_out_of_order(tmp_path) -> None:
    path, positions = _zstd_log(tmp_path)
    for position, _ in positions[:2]:
        _rewrite(path, position, {_CRC_AT: 0}, False)
    report = verify_directory(str(tmp_path))
    assert [p.position for p in report.problems] == [positions[0][0], positions[1][0]]

    gap = tmp_path / "gap"
    log = Log.open(str(gap), small_config(segment_bytes=1 << 20))
    log.append(make_records(2, "a"))
    log.close()
    data = pathlib.Path(segment_paths(str(gap))[0]).read_bytes()
    moved = bytearray(data)
    struct.pack_into(">q", moved, 0, 5)  # outside the CRC, like the leader epoch
    pathlib.Path(segment_paths(str(gap))[0]).write_bytes(data + bytes(moved))
    [problem] = verify_directory(str(gap)).problems
    assert (problem.position, "starts at offset 5, expected 2" in problem.reason) == (len(data), True)


def test_a_sound_log_verifies_and_the_command_exits_zero(tmp_path, capsys) -> None:
    _zstd_log(tmp_path)
    report = verify_directory(str(tmp_path))
    assert report.ok and report.records == 60 and report.formats == {Format.V2}
    assert main(["log", "verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 segments, 60 records: ok"


# -- logs of format v1 -----------------------------------------------------------------------------


def _shown(directory: str) -> list[tuple[object, ...]]:
    """What a dump shows of each batch but its format's own fields (magic, size, position)."""
    return [
        (
            i.base_offset,
            i.record_count,
            i.leader_epoch,
            i.producer_id,
            i.base_sequence,
            i.max_timestamp_ms,
            records,
        )
        for i, records in dump_batches(directory)
    ]


@pytest.mark.parametrize(("topic", "partition"), sorted(LOGS))
def test_a_v1_log_verifies_and_dumps_as_the_log_migrated_from_it(tmp_path, capsys, topic, partition) -> None:
    directory = log_dir(copy_fixture(tmp_path), topic, partition)
    report = verify_directory(directory)
    assert report.ok and report.formats == {Format.LEGACY}
    before = _shown(directory)
    assert main(["log", "verify", directory]) == 0
    assert "`raftlog log migrate DATA_DIR` rewrites it" in capsys.readouterr().out

    migrate_log(plan_log(directory))
    assert _shown(directory) == before
    assert verify_directory(directory).formats == {Format.V2}


@pytest.mark.parametrize("batch", [0, 1], ids=["first-batch", "second-batch"])
def test_damage_in_a_v1_log_is_reported_where_it_is(tmp_path, batch: int) -> None:
    directory = log_dir(copy_fixture(tmp_path), "orders", 0)
    path = segment_paths(directory)[1]
    corrupt_byte(path, 100 if batch == 0 else 300)  # inside the first or the second batch of the segment
    report = verify_directory(directory)
    [problem] = report.problems
    assert report.segments[1].format is Format.LEGACY  # a damaged first batch too
    assert (
        problem.path == path
        and (problem.position == 0) is (batch == 0)
        and "crc32c mismatch" in problem.reason
    )
    assert report.segments[1].batches == 18  # the batches after it were checked
    with pytest.raises(CorruptRecord) as raised:
        list(dump_records(directory))
    assert (raised.value.path, raised.value.position) == (path, problem.position)


def test_dump_names_transactional_batches_and_each_markers_outcome(tmp_path, capsys) -> None:
    """Which transaction committed a record is read from the files, as kafka-dump-log shows it: a
    producer's transactional batch, then its COMMIT or ABORT marker with the coordinator's epoch."""
    log = Log.open(str(tmp_path), small_config(segment_bytes=1 << 20))
    batch = bytearray(encode_batch(0, [ProducerRecord(b"v", b"k", (), 1_000)], 0, 0, 9, 0, producer_epoch=2))
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)  # transactional
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    log.append_prepared(bytes(batch), term=3)
    log.append_prepared(encode_control_batch(9, 2, True, coordinator_epoch=5, timestamp_ms=2_000), term=3)
    log.append_prepared(encode_control_batch(9, 2, False, coordinator_epoch=6, timestamp_ms=3_000), term=3)
    log.append_prepared(encode_batch(0, [ProducerRecord(b"plain", None, (), 4_000)], 0, 0), term=3)
    log.close()
    infos = [info for info, _ in dump_batches(str(tmp_path))]
    assert [(i.transactional, i.control) for i in infos] == [
        (True, False),
        (True, True),
        (True, True),
        (False, False),
    ]

    assert main(["log", "dump", str(tmp_path)]) == 0
    batches, rows = _lines(capsys.readouterr().out)
    assert [(b["is_transactional"], b["is_control"]) for b in batches] == [
        (True, False),
        (True, True),
        (True, True),
        (False, False),
    ]
    assert [r.get("marker") for r in rows] == [
        None,
        {"type": "COMMIT", "coordinator_epoch": 5},
        {"type": "ABORT", "coordinator_epoch": 6},
        None,
    ]
