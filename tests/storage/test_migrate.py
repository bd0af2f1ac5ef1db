"""Migrating a log of format v1 to Kafka RecordBatch v2 (``raftlog.storage.migrate``): the old node's
records come back identical, indexes and time lookups hold, a second run changes nothing, a crash at any
step is finished by running again, and a log that cannot be converted is left untouched."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from raftlog.storage import Log, ProducerRecord, legacy_batch
from raftlog.storage.batch import EPOCH_MAX, decode_header
from raftlog.storage.errors import LegacyLogFormat
from raftlog.storage.index import OffsetIndex
from raftlog.storage.log_format import FORMAT_FILE, needs_migration
from raftlog.storage.migrate import (
    STAGING_DIR,
    LogState,
    SegmentKind,
    migrate_log,
    plan_log,
)
from raftlog_cli.cli import main as cli_main

from .helpers import brute_offset_for_timestamp, file_contents, read_all
from .legacy_fixture import LOGS, copy_fixture, expected_rows, log_dir, rows_of
from .legacy_v1 import encode_v1, write_v1_log

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


class Crash(Exception):
    """Raised by a ``before_step`` hook: the migration stops there, as a killed process would."""


def crash_at(step: int) -> Callable[[str], None]:
    """A ``before_step`` hook that lets ``step`` steps run and stops the migration before the next."""
    seen: list[str] = []

    def before_step(name: str) -> None:
        if len(seen) == step:
            raise Crash(name)
        seen.append(name)

    return before_step


def migrate(directory: str) -> None:
    plan = plan_log(directory)
    assert plan.state in (LogState.LEGACY, LogState.EMPTY, LogState.MIGRATED), plan.problem
    migrate_log(plan)


def records_of(start: int, count: int, tag: str, term: int = 1) -> bytes:
    records = [
        ProducerRecord(f"{tag}-{i}".encode(), None if i % 2 else f"k{i}".encode(), (("h", b"x"),), 1_000 + i)
        for i in range(count)
    ]
    return encode_v1(start, records, term)


def v1_log(directory: str, terms: tuple[int, ...] = (1, 1, 2, 2), per_segment: int = 2) -> str:
    """Batches of three records, ``per_segment`` to a segment, batch i in term ``terms[i]``."""
    batches = [records_of(3 * i, 3, f"b{i}", term) for i, term in enumerate(terms)]
    write_v1_log(directory, [batches[i : i + per_segment] for i in range(0, len(batches), per_segment)])
    return directory


# -- the fixture: what the old node answered ------------------------------------------------------


@pytest.mark.parametrize(("topic", "partition"), sorted(LOGS))
def test_a_migrated_fixture_log_reads_back_what_the_old_node_answered(tmp_path, topic, partition) -> None:
    directory = log_dir(copy_fixture(tmp_path), topic, partition)
    legacy_headers = [
        (b.base_offset, len(b.records), b.term, b.producer_id, b.sequence)
        for path in sorted(pathlib.Path(directory).glob("*.log"))
        for _, b in legacy_batch.batches(path.read_bytes())
    ]
    bases = sorted(p.name for p in pathlib.Path(directory).glob("*.log"))
    migrate(directory)
    assert sorted(p.name for p in pathlib.Path(directory).glob("*.log")) == bases  # same segments
    with Log.open(directory) as log:
        assert not log.open_report.repairs  # indexes consistent: no segment rebuilt or cut
        assert rows_of(read_all(log)) == expected_rows(topic, partition)
        batches = log.read_batches(0, 1 << 30)
        assert [
            (
                b.header.base_offset,
                b.header.record_count,
                b.header.term,
                b.header.producer_id,
                b.header.sequence,
            )
            for b in batches
        ] == legacy_headers
        assert all(b.header.producer_epoch == (None if b.header.producer_id is None else 0) for b in batches)


@pytest.mark.parametrize("source", ["fixture", "larger"])
def test_migrated_indexes_point_at_batches_and_time_lookups_find_every_record(tmp_path, source: str) -> None:
    """The fixture's segments are smaller than the index interval (no entries); the larger log's hold
    entries every 4 KiB, and out-of-order timestamps."""
    if source == "fixture":
        directory = log_dir(copy_fixture(tmp_path), "orders", 0)
    else:
        directory = str(tmp_path / "larger")
        batches = [
            encode_v1(
                10 * i,
                [ProducerRecord(b"v" * 90, timestamp_ms=5_000 + (7 * i + j) % 97) for j in range(10)],
                1,
            )
            for i in range(120)
        ]
        write_v1_log(directory, [batches[i : i + 40] for i in range(0, 120, 40)])
    migrate(directory)
    indexed = 0
    for path in sorted(pathlib.Path(directory).glob("*.index")):
        base = int(path.name.split(".")[0])
        data = path.with_suffix(".log").read_bytes()
        for offset, position in OffsetIndex(str(path), base).entries():
            assert decode_header(data, position).base_offset == offset
            indexed += 1
    assert indexed > 0 or source == "fixture"
    with Log.open(directory) as log:
        assert not log.open_report.repairs
        records = read_all(log)
        for record in records:
            assert log.read(record.offset, 1)[0].offset == record.offset
        for timestamp in sorted(
            {r.timestamp_ms for r in records} | {0, max(r.timestamp_ms for r in records) + 1}
        ):
            assert log.offset_for_timestamp(timestamp) == brute_offset_for_timestamp(records, timestamp)


def test_a_second_run_changes_nothing(tmp_path) -> None:
    directory = log_dir(copy_fixture(tmp_path), "orders", 1)
    migrate(directory)
    before = file_contents(directory)
    plan = plan_log(directory)
    assert plan.state is LogState.MIGRATED
    assert migrate_log(plan).steps == []
    assert file_contents(directory) == before
    assert not needs_migration(directory)


# -- crashes ----------------------------------------------------------------------------------------


def test_a_crash_before_any_step_leaves_a_log_a_node_refuses_and_a_rerun_finishes(tmp_path) -> None:
    reference = log_dir(copy_fixture(tmp_path / "reference"), "orders", 0)
    steps = migrate_log(plan_log(reference)).steps
    expected = file_contents(reference)
    assert len(steps) == 10  # per segment: stage, 3 renames; then staging removed, marker written
    for step in range(len(steps)):
        directory = log_dir(copy_fixture(tmp_path / f"crash{step}"), "orders", 0)
        with pytest.raises(Crash):
            migrate_log(plan_log(directory), before_step=crash_at(step))
        assert needs_migration(directory)
        with pytest.raises(LegacyLogFormat):
            Log.open(directory).close()
        assert plan_log(directory).state is LogState.LEGACY
        migrate(directory)
        assert file_contents(directory) == expected, f"crash before step {step} ({steps[step]})"


def test_a_crash_midway_leaves_converted_segments_that_a_rerun_keeps(tmp_path) -> None:
    directory = log_dir(copy_fixture(tmp_path), "orders", 0)
    with pytest.raises(Crash):  # the first segment renamed in, the second not staged yet
        migrate_log(plan_log(directory), before_step=crash_at(4))
    plan = plan_log(directory)
    assert [s.kind for s in plan.segments] == [SegmentKind.CONVERTED, SegmentKind.LEGACY]
    assert plan.legacy_records == 39
    migrate_log(plan)
    with Log.open(directory) as log:
        assert rows_of(read_all(log)) == expected_rows("orders", 0)


def test_leftover_staging_of_a_killed_run_is_discarded(tmp_path) -> None:
    directory = v1_log(str(tmp_path / "log"))
    staging = os.path.join(directory, STAGING_DIR)
    os.makedirs(staging)
    pathlib.Path(staging, "00000000000000000000.log").write_bytes(b"half a batch")
    outcome = migrate_log(plan_log(directory))
    assert outcome.steps[0] == "discard staging left by an interrupted run"
    assert not os.path.exists(staging)
    with Log.open(directory) as log:
        assert log.end_offset == 12


def test_migrate_killed_midway_then_run_again_gives_the_same_logs(tmp_path, capsys) -> None:
    """A real process killed (SIGKILL) while ``raftlog log migrate`` works through three logs, as soon as
    the first is done (the step-by-step crashes are test_a_crash_before_any_step_...): the command run
    again finishes with the bytes of a migration that never died."""
    source = tmp_path / "source"
    names = ("t-0.1", "t-1.1", "t-2.1")
    for name in names:
        batches = [records_of(50 * i, 50, f"{name}-{i}", term=1 + i // 40) for i in range(300)]
        write_v1_log(str(source / "logs" / name), [batches[i : i + 60] for i in range(0, 300, 60)])
    reference = tmp_path / "reference"
    shutil.copytree(source, reference)
    assert cli_main(["log", "migrate", str(reference)]) == 0
    for logs_done in (1,):
        target = tmp_path / f"killed-after-{logs_done}"
        shutil.copytree(source, target)
        argv = [sys.executable, "-m", "raftlog_cli", "log", "migrate", str(target)]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE) as process:
            assert process.stdout is not None
            lines = [process.stdout.readline() for _ in range(logs_done)]
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        assert all(b"converted" in line for line in lines), lines
        assert any(needs_migration(str(target / "logs" / name)) for name in names)
        assert cli_main(["log", "migrate", str(target)]) == 0
        for name in names:
            got, want = target / "logs" / name, reference / "logs" / name
            assert file_contents(str(got)) == file_contents(str(want)), f"{name}, killed after {logs_done}"
    capsys.readouterr()


# -- logs that are not converted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "named"),
    [
        (records_of(6, 3, "x", term=EPOCH_MAX + 1), f"term {EPOCH_MAX + 1}"),
        (encode_v1(6, [ProducerRecord(b"v", timestamp_ms=1)], 1, 9, 2**31), "sequence 2147483648"),
    ],
    ids=["term-above-a-leader-epoch", "sequence-above-int32"],
)
def test_a_log_that_cannot_become_v2_is_refused_and_left_untouched(
    tmp_path, batch: bytes, named: str
) -> None:
    directory = str(tmp_path / "log")
    write_v1_log(directory, [[records_of(0, 3, "a"), records_of(3, 3, "b")], [batch]])
    before = file_contents(directory)
    plan = plan_log(directory)
    assert plan.state is LogState.REFUSED
    assert named in plan.problem and "00000000000000000006.log" in plan.problem
    assert migrate_log(plan).steps == []
    assert file_contents(directory) == before
    assert FORMAT_FILE not in os.listdir(directory)


def test_damage_in_a_closed_segment_is_refused_a_torn_tail_of_the_last_is_dropped(tmp_path) -> None:
    damaged = v1_log(str(tmp_path / "damaged"))
    first = os.path.join(damaged, "00000000000000000000.log")
    data = bytearray(pathlib.Path(first).read_bytes())
    data[-3] ^= 0xFF
    pathlib.Path(first).write_bytes(bytes(data))
    plan = plan_log(damaged)
    assert plan.state is LogState.REFUSED and "no whole v1 batch with a valid CRC" in plan.problem

    torn = v1_log(str(tmp_path / "torn"))
    last = os.path.join(torn, "00000000000000000006.log")
    size = os.path.getsize(last)
    os.truncate(last, size - 5)
    plan = plan_log(torn)
    assert plan.state is LogState.LEGACY and plan.torn_tail_bytes == size - 5 - len(records_of(6, 3, "b2", 2))
    migrate_log(plan)
    with Log.open(torn) as log:  # what the old node's recovery would have kept
        assert log.end_offset == 9 and not log.open_report.repairs


def test_segments_that_do_not_follow_each_other_are_refused(tmp_path) -> None:
    directory = str(tmp_path / "log")
    write_v1_log(directory, [[records_of(0, 3, "a")], [records_of(5, 3, "b")]])
    plan = plan_log(directory)
    assert plan.state is LogState.REFUSED and "starts at offset 5" in plan.problem


def test_an_empty_log_gets_its_marker_and_what_a_node_refuses_is_what_needs_migrating(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "00000000000000000000.log").write_bytes(b"")
    assert not needs_migration(str(empty))
    plan = plan_log(str(empty))
    assert plan.state is LogState.EMPTY
    migrate_log(plan)
    assert (empty / FORMAT_FILE).exists()

    legacy = v1_log(str(tmp_path / "legacy"))
    for directory, refused in ((legacy, True), (str(empty), False)):
        assert needs_migration(directory) is refused
        try:
            Log.open(directory).close()
            opened = True
        except LegacyLogFormat:
            opened = False
        assert opened is not refused
