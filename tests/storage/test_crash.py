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
from raftlog.storage.batch import Compression, decode_header, encode_batch, with_log_append_time

from .helpers import (
    FakeClock,
    batch_positions,
    copy_dir,
    file_contents,
    read_all,
    segment_paths,
    small_config,
    snapshot,
)

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
    # on the disk: there a kill lands most often in an append's fsync, between its write and its ack
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


def _record_model_batch(kind: int, rng: random.Random) -> bytes:
    """A batch of Kafka's record model, as a producer or a leader would have encoded it, with tombstones,
    null keys and null header values; ``kind`` picks the rest: snappy, uncompressed, gzip, zstd with
    LogAppendTime, or a producer's lz4 batch with id, epoch and sequence. Values repeat a pattern so
    compression shrinks them."""
    records = [
        ProducerRecord(
            value=None if (kind + j) % 3 == 0 else rng.randbytes(3) * rng.randint(5, 30),
            key=None if j % 2 else f"k{j}".encode(),
            headers=(("trace", None), ("n", str(j).encode())) if j % 2 == 0 else (),
            timestamp_ms=rng.randint(0, 10**6),
        )
        for j in range(rng.randint(1, 4))
    ]
    if kind == 0:
        return encode_batch(0, records, 0, 0, compression=Compression.SNAPPY)
    if kind == 1:
        return encode_batch(0, records, 0, 0)
    if kind == 2:
        return encode_batch(0, records, 0, 0, compression=Compression.GZIP)
    if kind == 3:
        batch = encode_batch(0, records, 0, 0, compression=Compression.ZSTD)
        return with_log_append_time(batch, rng.randint(0, 10**6))
    return encode_batch(
        0, records, 0, 0, 77, rng.randint(0, 2**20), producer_epoch=3, compression=Compression.LZ4
    )


RECORD_MODEL_KINDS = 5


def _write_reference_log(directory: str) -> list:
    """A log of a few closed segments and an active one holding ten batches; returns every record. Plain
    batches alternate with batches of Kafka's record model; the active segment's last five are all of
    that model, ending with gzip, zstd with LogAppendTime and a producer's lz4 batch."""
    rng = random.Random(42)
    with reopen(directory) as log:
        for i in range(80):
            if i == 70:
                log.roll()
            if i % 2 or i >= 75:
                log.append_prepared(_record_model_batch(i % RECORD_MODEL_KINDS, rng), term=1 + i // 10)
                continue
            records = [
                ProducerRecord(value=rng.randbytes(rng.randint(0, 90)), timestamp_ms=rng.randint(0, 10**6))
                for _ in range(rng.randint(1, 4))
            ]
            log.append(records, term=1 + i // 10)
        assert log.segment_count >= 3
        return read_all(log)


def stored_batches(log: Log) -> list[bytes]:
    return [b.data for b in log.read_batches(log.log_start_offset, 1 << 30)]


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


def restore(directory: str, files: dict[str, bytes]) -> None:
    """Make ``directory`` hold exactly ``files`` again (cheaper than a fresh copy per cut)."""
    for name in os.listdir(directory):
        if name not in files:
            os.unlink(os.path.join(directory, name))
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


@pytest.mark.parametrize("garbage", [False, True], ids=["cut", "cut+garbage"])
def test_cut_active_segment_at_any_byte_keeps_exactly_the_whole_batches_before_it(
    memory_path, reference_log, garbage
):
    """Cuts at every byte of the active segment's last three batches (gzip; zstd with LogAppendTime; a
    producer's lz4 batch; the boundaries between them included) and at random bytes before them: the log
    recovers to exactly the whole batches before the cut, byte for byte, and appends at the next offset."""
    source, everything = reference_log
    with reopen(copy_dir(source, str(memory_path / "undamaged"))) as log:
        batches = stored_batches(log)
    original = file_contents(source)
    directory = str(memory_path / "cut")
    os.mkdir(directory)
    active = os.path.basename(segment_paths(source)[-1])
    active_base = int(active[:20])
    target = os.path.join(directory, active)
    spans = batch_spans(os.path.join(source, active))
    size = len(original[active])
    assert len(spans) >= 5
    last_three = spans[-3][0]
    rng = random.Random(99 + garbage)
    cuts = sorted({rng.randint(0, last_three) for _ in range(30)} | {0} | set(range(last_three, size)))
    for cut in cuts:
        restore(directory, original)
        _damage(target, cut, rng, garbage)
        damaged_size = os.path.getsize(target)
        whole = [(p, s, end) for p, s, end in spans if p + s <= cut]
        valid_end, kept = (whole[-1][0] + whole[-1][1], whole[-1][2]) if whole else (0, active_base)
        kept_batches = [b for b in batches if decode_header(b).end_offset <= kept]

        with reopen(directory) as log:
            assert (log.log_start_offset, log.end_offset) == (0, kept), f"cut at byte {cut}"
            recovered = stored_batches(log)
            assert recovered == kept_batches, f"cut at byte {cut}: not the whole batches before it, as stored"
            assert [r for b in log.read_batches(0, 1 << 30) for r in b.records()] == everything[:kept]
            assert os.path.getsize(target) == valid_end
            repairs = [(r.path, r.truncated_at, r.truncated_bytes) for r in log.open_report.repairs]
            dropped = damaged_size - valid_end
            assert repairs == ([(target, valid_end, dropped)] if dropped else [])
            assert log.append([ProducerRecord(value=b"after")]).base_offset == kept
            again = log.append_prepared(_record_model_batch(cut % RECORD_MODEL_KINDS, rng), term=9)
            assert again.base_offset == kept + 1, f"cut at byte {cut}: offsets not dense after recovery"
        with reopen(directory) as log:
            assert stored_batches(log)[: len(kept_batches)] == kept_batches
            assert log.end_offset == again.end_offset


@pytest.mark.parametrize("garbage", [False, True], ids=["cut", "cut+garbage"])
@pytest.mark.parametrize(
    ("segment", "suffix"),
    [("active", ".index"), ("active", ".timeindex"), ("closed", ".index")],
)
def test_cut_index_files_at_any_byte_change_nothing(memory_path, reference_log, garbage, segment, suffix):
    source, _ = reference_log
    with reopen(copy_dir(source, str(memory_path / "undamaged"))) as log:
        expected = (snapshot(log), [log.offset_for_timestamp(t) for t in range(0, 10**6, 9973)])
    paths = segment_paths(source, suffix)
    path = paths[-1] if segment == "active" else paths[0]
    size = os.path.getsize(path)
    assert size > 0
    rng = random.Random(7 + garbage)
    for n, cut in enumerate(sorted({rng.randint(0, size - 1) for _ in range(50)} | {0})):
        directory = copy_dir(source, str(memory_path / f"c{n}"))
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
def test_power_loss_keeps_everything_below_durable_end_offset(memory_path, monkeypatch, flush_mode, trial):
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
    source = str(memory_path / "log")
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
            target = str(memory_path / f"loss{step}")
            tracker.power_loss_copy(source, target, rng)
            with Log.open(target, config, clock=clock) as survivor:
                assert survivor.end_offset >= durable, f"fsynced records lost at step {step}"
                assert [(r.offset, r.value) for r in read_all(survivor)] == written[: survivor.end_offset]
                assert survivor.append([ProducerRecord(value=b"next")]).base_offset == survivor.end_offset - 1
    assert checks >= 10
    assert log.segment_count >= 5
    log.close()
