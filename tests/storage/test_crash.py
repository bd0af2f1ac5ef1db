"""Crash consistency: a killed writer, torn and garbage tails at every byte, and power loss in group mode.

In each case the reopened log must be exactly a prefix of what was written, hold everything that was
acknowledged (or fsynced), keep offsets dense, and continue without reusing an offset.
"""

from __future__ import annotations

import os
import random
import select
import signal
import stat
import subprocess
import sys
import time

import pytest

from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import decode_header

from .helpers import FakeClock, batch_positions, copy_dir, read_all, segment_paths, small_config, snapshot

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The writer appends batch i = records_for(i) forever, printing "base end" once each append has returned.
WRITER = r"""
import sys
from raftlog.storage import Log, LogConfig, ProducerRecord

def records_for(i):
    return [ProducerRecord(value=(f"{i}:{j}:" * (1 + (i + j) % 9)).encode(), key=f"{j}".encode(),
                           timestamp_ms=1000 * i + j) for j in range(1 + i % 4)]

log = Log.open(sys.argv[1], LogConfig(segment_bytes=4096, index_interval_bytes=128, flush_mode="always"))
start = log.end_offset
for i in range(int(sys.argv[2]), int(sys.argv[2]) + 1_000_000):
    result = log.append(records_for(i))
    sys.stdout.write(f"{result.base_offset} {result.end_offset}\n")
    sys.stdout.flush()
"""


def records_for(i: int) -> list[ProducerRecord]:
    """Batch i of the writer above (kept in sync by test_writer_script_matches_records_for)."""
    return [
        ProducerRecord(
            value=(f"{i}:{j}:" * (1 + (i + j) % 9)).encode(), key=f"{j}".encode(), timestamp_ms=1000 * i + j
        )
        for j in range(1 + i % 4)
    ]


def test_writer_script_matches_records_for():
    namespace: dict = {}
    exec(WRITER.split("log = Log.open")[0], namespace)
    assert all(namespace["records_for"](i) == records_for(i) for i in range(20))


def expected_batches(count: int) -> list[list[tuple]]:
    """The (offset, key, value, timestamp) of every record of batches 0..count-1 written from offset 0."""
    out, offset = [], 0
    for i in range(count):
        batch = []
        for record in records_for(i):
            batch.append((offset, record.key, record.value, record.timestamp_ms))
            offset += 1
        out.append(batch)
    return out


def whole_batches_in(log: Log) -> int:
    """How many of the writer's batches the log holds, asserting it holds nothing else."""
    got = [(r.offset, r.key, r.value, r.timestamp_ms) for r in read_all(log)]
    count, position = 0, 0
    for batch in expected_batches(len(got) + 1):
        if position == len(got):
            break
        assert got[position : position + len(batch)] == batch, f"batch {count} differs or is partial"
        position += len(batch)
        count += 1
    assert position == len(got)
    return count


def run_writer(directory: str, first_batch: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, directory, str(first_batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO_ROOT,
    )


def read_until(process: subprocess.Popen, wanted_lines: int, timeout_s: float) -> bytes:
    """Raw stdout of the writer until it holds ``wanted_lines`` lines (or the deadline passes)."""
    output = b""
    deadline = time.monotonic() + timeout_s
    fd = process.stdout.fileno()
    while output.count(b"\n") < wanted_lines and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            output += os.read(fd, 4096)
        elif process.poll() is not None:
            raise AssertionError(f"writer died: {process.stderr.read().decode()}")
    return output


def writer_log(directory: str) -> Log:
    return Log.open(directory, LogConfig(segment_bytes=4096, index_interval_bytes=128, flush_mode="always"))


@pytest.mark.parametrize("trial", range(5))
def test_sigkill_keeps_every_acknowledged_batch_and_nothing_partial(tmp_path, trial):
    rng = random.Random(1000 + trial)
    directory = str(tmp_path / "log")
    acked: list[str] = []
    for round_number in range(2):  # kill, restart where the log ends, kill again
        with writer_log(directory) as log:
            first = whole_batches_in(log)
        process = run_writer(directory, first)
        try:
            output = read_until(process, rng.randint(1, 150), timeout_s=20)
            time.sleep(rng.uniform(0, 0.02))
        finally:
            process.send_signal(signal.SIGKILL)
            rest, errors = process.communicate(timeout=20)
        assert process.returncode == -signal.SIGKILL, errors.decode()
        acked += (output + rest).decode().split("\n")[:-1]  # a line cut short by the kill is no ack

        with writer_log(directory) as log:
            held = whole_batches_in(log)
            expected = expected_batches(held)
            acknowledged = [tuple(map(int, line.split())) for line in acked]
            # every acknowledged batch is there, at the offsets it was acknowledged with ...
            assert acknowledged == [(b[0][0], b[-1][0] + 1) for b in expected[: len(acknowledged)]]
            # ... and at most the one batch in flight when the kill came is there besides
            assert len(acknowledged) <= held <= len(acknowledged) + 1, (round_number, held, len(acknowledged))
            end = log.end_offset
            # the next append continues right after, reusing no acknowledged offset
            if held > len(acknowledged):
                acked.append(f"{expected[-1][0][0]} {end}")
            assert not acknowledged or end >= acknowledged[-1][1]
        assert end == (expected[-1][-1][0] + 1 if expected else 0)
    with writer_log(directory) as log:
        assert log.append(records_for(len(acked))).base_offset == end


# -- byte cuts -----------------------------------------------------------------------------------------


def reopen(directory: str) -> Log:
    return Log.open(directory, small_config(segment_bytes=4096, index_interval_bytes=100), clock=FakeClock())


def _write_reference_log(directory: str) -> list:
    """A log of a few closed segments and an active one holding many batches; returns every record."""
    rng = random.Random(42)
    with reopen(directory) as log:
        for _ in range(70):
            records = [
                ProducerRecord(value=rng.randbytes(rng.randint(0, 90)), timestamp_ms=rng.randint(0, 10**6))
                for _ in range(rng.randint(1, 4))
            ]
            log.append(records)
        assert log.segment_count >= 3
        return read_all(log)


def _damage(path: str, cut: int, rng: random.Random, garbage: bool) -> None:
    size = os.path.getsize(path)
    os.truncate(path, cut)
    if garbage:
        with open(path, "ab") as f:
            f.write(rng.randbytes(max(size - cut, 1)))


@pytest.fixture(scope="module")
def reference_log(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("reference") / "log")
    records = _write_reference_log(directory)
    return directory, records


def batch_spans(path: str) -> list[tuple[int, int, int]]:
    """(position, size, end_offset) of every batch in an undamaged data file."""
    with open(path, "rb") as f:
        data = f.read()
    return [(p, s, decode_header(data, p).end_offset) for p, s in batch_positions(path)]


@pytest.mark.parametrize("garbage", [False, True], ids=["cut", "cut+garbage"])
def test_cut_active_segment_at_any_byte_keeps_exactly_the_whole_batches_before_it(
    tmp_path, reference_log, garbage
):
    source, everything = reference_log
    active = segment_paths(source)[-1]
    active_base = int(os.path.basename(active)[:20])
    spans = batch_spans(active)
    size = os.path.getsize(active)
    assert len(spans) >= 5
    rng = random.Random(99 + garbage)
    cuts = sorted({rng.randint(0, size - 1) for _ in range(50)} | {0, spans[-1][0], size - 1})
    for n, cut in enumerate(cuts):
        directory = copy_dir(source, str(tmp_path / f"c{n}"))
        target = os.path.join(directory, os.path.basename(active))
        _damage(target, cut, rng, garbage)
        damaged_size = os.path.getsize(target)
        whole = [(p, s, end) for p, s, end in spans if p + s <= cut]
        valid_end, kept = (whole[-1][0] + whole[-1][1], whole[-1][2]) if whole else (0, active_base)

        with reopen(directory) as log:
            assert (log.log_start_offset, log.end_offset) == (0, kept), f"cut at byte {cut}"
            assert read_all(log) == everything[:kept]
            assert os.path.getsize(target) == valid_end
            repairs = [(r.path, r.truncated_at, r.truncated_bytes) for r in log.open_report.repairs]
            dropped = damaged_size - valid_end
            assert repairs == ([(target, valid_end, dropped)] if dropped else [])
            assert log.append([ProducerRecord(value=b"after")]).base_offset == kept
        with reopen(directory) as log:
            assert read_all(log)[:kept] == everything[:kept]
            assert log.end_offset == kept + 1


@pytest.mark.parametrize("garbage", [False, True], ids=["cut", "cut+garbage"])
@pytest.mark.parametrize(
    ("segment", "suffix"),
    [("active", ".index"), ("active", ".timeindex"), ("closed", ".index")],
)
def test_cut_index_files_at_any_byte_change_nothing(tmp_path, reference_log, garbage, segment, suffix):
    source, _ = reference_log
    with reopen(copy_dir(source, str(tmp_path / "undamaged"))) as log:
        expected = (snapshot(log), [log.offset_for_timestamp(t) for t in range(0, 10**6, 9973)])
    paths = segment_paths(source, suffix)
    path = paths[-1] if segment == "active" else paths[0]
    size = os.path.getsize(path)
    assert size > 0
    rng = random.Random(7 + garbage)
    for n, cut in enumerate(sorted({rng.randint(0, size - 1) for _ in range(50)} | {0})):
        directory = copy_dir(source, str(tmp_path / f"c{n}"))
        _damage(os.path.join(directory, os.path.basename(path)), cut, rng, garbage)
        with reopen(directory) as log:
            observed = (snapshot(log), [log.offset_for_timestamp(t) for t in range(0, 10**6, 9973)])
            assert observed == expected, f"{suffix} cut at byte {cut}"
            assert not any(r.truncated_bytes for r in log.open_report.repairs)


# -- power loss ----------------------------------------------------------------------------------------


class SyncTracker:
    """Remembers, per file, its size when it was last fsynced: what a power loss is sure to leave."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.synced_bytes: dict[str, int] = {}
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)

            def sync(fd: int, real=real) -> None:
                real(fd)
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    self.synced_bytes[os.readlink(f"/proc/self/fd/{fd}")] = os.fstat(fd).st_size

            monkeypatch.setattr(os, name, sync)

    def power_loss_copy(self, source: str, target: str, rng: random.Random) -> None:
        """Copy ``source`` as a power loss could leave it: every segment file cut to its fsynced size,
        followed by some of the unsynced bytes and then, sometimes, garbage."""
        copy_dir(source, target)
        for name in os.listdir(target):
            if not name.endswith((".log", ".index", ".timeindex")):
                continue
            path = os.path.join(target, name)
            durable = self.synced_bytes.get(os.path.join(source, name), 0)
            size = os.path.getsize(path)
            assert durable <= size
            cut = rng.choice([durable, rng.randint(durable, size)])
            _damage(path, cut, rng, garbage=rng.random() < 0.5 and cut < size)


@pytest.mark.parametrize("flush_mode", ["group", "always"])
@pytest.mark.parametrize("trial", range(3))
def test_power_loss_keeps_everything_below_durable_end_offset(tmp_path, monkeypatch, flush_mode, trial):
    rng = random.Random(trial * 31 + len(flush_mode))
    tracker = SyncTracker(monkeypatch)
    clock = FakeClock()
    config = small_config(
        segment_bytes=4096,
        index_interval_bytes=128,
        flush_mode=flush_mode,
        flush_interval_ms=50,
        flush_bytes=3000,
    )
    source = str(tmp_path / "log")
    log = Log.open(source, config, clock=clock)
    written = []
    checks = 0
    for step in range(300):
        records = [ProducerRecord(value=rng.randbytes(rng.randint(0, 120))) for _ in range(rng.randint(1, 4))]
        result = log.append(records)
        written += [(result.base_offset + i, r.value) for i, r in enumerate(records)]
        if flush_mode == "always":
            assert log.durable_end_offset == log.end_offset
        log.flush_if_due(clock.advance(rng.randint(0, 30)))
        if rng.random() < 0.1:
            checks += 1
            durable = log.durable_end_offset
            target = str(tmp_path / f"loss{step}")
            tracker.power_loss_copy(source, target, rng)
            with Log.open(target, config, clock=clock) as survivor:
                assert survivor.end_offset >= durable, f"fsynced records lost at step {step}"
                assert [(r.offset, r.value) for r in read_all(survivor)] == written[: survivor.end_offset]
                assert survivor.append([ProducerRecord(value=b"next")]).base_offset == survivor.end_offset - 1
    assert checks >= 10
    assert log.segment_count >= 5
    log.close()
