"""Storage engine benchmark: append and read-back throughput next to the machine's raw limits.

Usage: ``python -m raftlog_bench.storage [--seconds S] [--dir DIR] [--json OUT]``

In one run, on one scratch directory (a fresh ``mkdtemp`` under ``--dir``, removed at the end):

1. raw baselines from Python: sequential ``os.write`` of 1 MiB blocks then one ``fsync`` (twice at the
   start, once at the end: on a VM the first pass also pays for backing fresh page-cache memory, so the
   best pass is the baseline); 4 KiB append + ``fsync`` / + ``fdatasync`` (what the engine calls) in a loop;
2. ``Log.append`` for each record size x records per append x flush mode, each cell bounded by a time
   budget and a payload byte cap, plus ``Log.append_prepared`` (a replica applying leader-encoded
   batches) for the largest batches. Logs are opened through a started ``LogManager``, whose background
   thread group-commits as in the server; every cell's elapsed time includes its final fsync;
3. read-back of the group-commit logs with the fewest and the most records per append, right after
   writing them (warm page cache): ``read()`` (decoded records), ``read_batches()`` (raw batches) and
   ``reader()`` (streaming raw batches), with a 1 MiB budget per call where the API takes one;
4. the goals, on the largest batches: group-commit append >= 50% of raw sequential write, read-back
   >= 200 MB/s.

Each measurement also records the CPU other processes used meanwhile: the machine may be shared.
MB is 10^6 bytes. "disk" bytes are the bytes of the segment data files (headers, framing included);
"payload" bytes are the record values handed to ``append`` (keys are None). Numbers, never assertions
about speed; the only checks are that every record appended is read back.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Literal, ParamSpec, TypeVar

from raftlog.errors import check
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.batch import encode_batch
from raftlog.storage.config import FlushMode, KiB, MiB
from raftlog.storage.manager import LogManager
from raftlog_bench.arguments import (
    add_dir_argument,
    add_grid_arguments,
    add_json_argument,
    add_wait_quiet_argument,
    refused,
    standalone_parser,
)
from raftlog_bench.cpu import CpuMeter, other_pct_text, wait_quiet
from raftlog_bench.output import emit, say
from raftlog_bench.stats import MB, Goal, percentile_ms, rate, size_label

RECORD_SIZES = (100, 1 * KiB)
BATCH_SIZES = (1, 100, 1000)
FLUSH_MODES: tuple[FlushMode, ...] = ("always", "group")
READ_BUDGET_BYTES = 1 * MiB
RAW_BLOCK_BYTES = 1 * MiB
FSYNC_BLOCK_BYTES = 4 * KiB
APPEND_GOAL_RATIO = 0.50  # group-commit batched append vs raw sequential write
READ_GOAL_MB_S = 200.0
AppendApi = Literal["append", "append_prepared"]
ReadApi = Literal["read", "read_batches", "reader"]
READ_APIS: tuple[ReadApi, ...] = ("read", "read_batches", "reader")
Arguments = ParamSpec("Arguments")
CellT = TypeVar("CellT", "RawWrite", "RawSync", "AppendCell", "ReadCell")  # each records other_cpu_pct


@dataclass(frozen=True, slots=True)
class Options:
    seconds: float  # time budget of each append cell, read-back pass and fsync loop
    cell_bytes_max: int  # payload cap of each append cell
    raw_bytes_max: int  # cap of the raw sequential write
    record_sizes: tuple[int, ...]
    batch_sizes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RawWrite:
    when: str  # which pass: the first one also makes the VM back fresh page-cache memory
    bytes_written: int
    buffered_mb_s: float  # os.write only
    mb_s: float  # including the final fsync: the baseline
    other_cpu_pct: float | None = None


@dataclass(frozen=True, slots=True)
class RawSync:
    call: str  # "fsync" or "fdatasync"
    block_bytes: int
    operations: int
    per_s: float
    p50_ms: float
    p99_ms: float
    other_cpu_pct: float | None = None


@dataclass(frozen=True, slots=True)
class AppendCell:
    api: AppendApi
    record_bytes: int
    batch_records: int
    flush_mode: FlushMode
    appends: int
    records: int
    seconds: float
    payload_bytes: int
    disk_bytes: int
    appends_per_s: float
    records_per_s: float
    payload_mb_s: float
    disk_mb_s: float
    p50_ms: float  # latency of one append call
    p99_ms: float
    bounded_by: str  # "time" or "bytes"
    other_cpu_pct: float | None = None  # CPU that other processes used meanwhile (100 = one core)


@dataclass(frozen=True, slots=True)
class ReadCell:
    record_bytes: int
    batch_records: int
    api: ReadApi
    calls: int
    records: int
    seconds: float
    payload_bytes: int
    disk_bytes: int
    records_per_s: float
    payload_mb_s: float
    disk_mb_s: float
    complete: bool  # False when the time budget ran out before the end of the log
    other_cpu_pct: float | None = None


# -- raw baselines ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _scratch_file(directory: str, name: str, flags: int = 0) -> Iterator[int]:
    """A new file in ``directory`` open for writing (``flags`` added), closed and removed on leaving."""
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)
        os.unlink(path)


def measure_raw_write(directory: str, bytes_max: int, seconds: float, when: str) -> RawWrite:
    """Sequential 1 MiB ``os.write`` calls until ``bytes_max`` or ``seconds``, then one ``fsync``."""
    block = os.urandom(RAW_BLOCK_BYTES)
    with _scratch_file(directory, "raw-sequential.dat") as fd:
        written = 0
        start = time.perf_counter()
        deadline = start + seconds
        while written < bytes_max and time.perf_counter() < deadline:
            written += os.write(fd, block)
        buffered = time.perf_counter()
        os.fsync(fd)
        end = time.perf_counter()
    return RawWrite(
        when=when,
        bytes_written=written,
        buffered_mb_s=rate(written / MB, buffered - start),
        mb_s=rate(written / MB, end - start),
    )


def measure_raw_sync(directory: str, call: Literal["fsync", "fdatasync"], seconds: float) -> RawSync:
    """Append 4 KiB and sync, in a loop for ``seconds``."""
    sync: Callable[[int], None] = os.fsync if call == "fsync" else os.fdatasync
    block = os.urandom(FSYNC_BLOCK_BYTES)
    latencies: list[float] = []
    with _scratch_file(directory, f"raw-{call}.dat", os.O_APPEND) as fd:
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            before = time.perf_counter()
            if before >= deadline:
                break
            os.write(fd, block)
            sync(fd)
            latencies.append(time.perf_counter() - before)
        elapsed = time.perf_counter() - start
    return RawSync(
        call=call,
        block_bytes=FSYNC_BLOCK_BYTES,
        operations=len(latencies),
        per_s=rate(len(latencies), elapsed),
        p50_ms=percentile_ms(latencies, 50),
        p99_ms=percentile_ms(latencies, 99),
    )


# -- appends ---------------------------------------------------------------------------------------------


def measure_append(
    log: Log,
    record_bytes: int,
    batch_records: int,
    seconds: float,
    bytes_max: int,
    api: AppendApi = "append",
) -> AppendCell:
    """Append batches of ``batch_records`` random values of ``record_bytes`` until the time budget or the
    byte cap; the elapsed time includes the final flush, so every counted byte is fsynced.

    ``api`` "append" encodes each batch in ``Log.append``; "append_prepared" appends one batch encoded up
    front, as a replica applies a committed entry (CRC checks, offset stamping and a full decode).
    """
    value = os.urandom(record_bytes)
    records = [ProducerRecord(value) for _ in range(batch_records)]
    prepared = encode_batch(0, records, 1, time.time_ns() // 1_000_000)
    batch_payload = record_bytes * batch_records
    disk_before = log.size_bytes
    latencies: list[float] = []
    payload = 0
    start = time.perf_counter()
    deadline = start + seconds
    while payload < bytes_max:
        before = time.perf_counter()
        if before >= deadline:
            break
        if api == "append":
            log.append(records, term=1)
        else:
            log.append_prepared(prepared, term=1)
        latencies.append(time.perf_counter() - before)
        payload += batch_payload
    log.flush()
    elapsed = time.perf_counter() - start
    appends = len(latencies)
    disk = log.size_bytes - disk_before
    return AppendCell(
        api=api,
        record_bytes=record_bytes,
        batch_records=batch_records,
        flush_mode=log.config.flush_mode,
        appends=appends,
        records=appends * batch_records,
        seconds=elapsed,
        payload_bytes=payload,
        disk_bytes=disk,
        appends_per_s=rate(appends, elapsed),
        records_per_s=rate(appends * batch_records, elapsed),
        payload_mb_s=rate(payload / MB, elapsed),
        disk_mb_s=rate(disk / MB, elapsed),
        p50_ms=percentile_ms(latencies, 50),
        p99_ms=percentile_ms(latencies, 99),
        bounded_by="bytes" if payload >= bytes_max else "time",
    )


# -- read-back -------------------------------------------------------------------------------------------


def _check_next(base_offset: int, expected: int) -> None:
    check(base_offset == expected, f"read-back met a batch at offset {base_offset}, expected {expected}")


def measure_read(log: Log, api: ReadApi, record_bytes: int, batch_records: int, seconds: float) -> ReadCell:
    """Read the log from its start to its end (or until ``seconds``) through ``api``."""
    start_offset, end_offset = log.log_start_offset, log.end_offset
    offset = start_offset
    calls = 0
    disk = 0
    start = time.perf_counter()
    deadline = start + seconds
    if api == "read":
        while offset < end_offset and time.perf_counter() < deadline:
            records = log.read(offset, READ_BUDGET_BYTES)
            check(bool(records), f"read({offset}) returned nothing below end offset {end_offset}")
            check(records[0].offset == offset, f"read({offset}) started at {records[0].offset}")
            offset = records[-1].offset + 1
            calls += 1
        # decoded records carry no batch sizes; the data files hold offsets in proportion to their bytes
        disk = round(log.size_bytes * (offset - start_offset) / max(1, end_offset - start_offset))
    elif api == "read_batches":
        while offset < end_offset and time.perf_counter() < deadline:
            batches = log.read_batches(offset, READ_BUDGET_BYTES)
            check(bool(batches), f"read_batches({offset}) returned nothing below end offset {end_offset}")
            for batch in batches:
                _check_next(batch.header.base_offset, offset)
                offset = batch.header.end_offset
                disk += len(batch.data)
            calls += 1
    else:
        with log.reader(offset) as reader:
            for batch in reader:
                _check_next(batch.header.base_offset, offset)
                offset = batch.header.end_offset
                disk += len(batch.data)
                calls += 1
                if time.perf_counter() >= deadline:
                    break
    elapsed = time.perf_counter() - start
    records_read = offset - start_offset
    payload = records_read * record_bytes
    return ReadCell(
        record_bytes=record_bytes,
        batch_records=batch_records,
        api=api,
        calls=calls,
        records=records_read,
        seconds=elapsed,
        payload_bytes=payload,
        disk_bytes=disk,
        records_per_s=rate(records_read, elapsed),
        payload_mb_s=rate(payload / MB, elapsed),
        disk_mb_s=rate(disk / MB, elapsed),
        complete=offset == end_offset,
    )


# -- the run ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Results:
    directory: str
    filesystem: str
    machine: dict[str, str | int]
    options: Options
    raw_writes: list[RawWrite] = field(default_factory=list)
    raw_syncs: list[RawSync] = field(default_factory=list)
    appends: list[AppendCell] = field(default_factory=list)
    reads: list[ReadCell] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)


def _filesystem_of(path: str) -> str:
    """The type of the filesystem holding ``path`` (from /proc/mounts), or "?"."""
    best, kind = "", "?"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount_point = parts[1]
                inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
                if inside and len(mount_point) > len(best):
                    best, kind = mount_point, parts[2]
    except OSError:
        return "?"
    return f"{kind} on {best}" if best else "?"


def run(options: Options, directory: str) -> Results:
    """Run every measurement in ``directory`` (which must exist and be empty)."""
    results = Results(
        directory=directory,
        filesystem=_filesystem_of(os.path.realpath(directory)),
        machine={
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count() or 0,
        },
        options=options,
    )
    for when in ("start, pass 1", "start, pass 2"):
        _raw_write_pass(results, directory, when)
    for call in ("fsync", "fdatasync"):
        raw = _with_other_cpu(measure_raw_sync, directory, call, options.seconds)
        results.raw_syncs.append(raw)
        say(f"raw 4 KiB append+{call}: {raw.per_s:.0f}/s, p50 {raw.p50_ms:.3f} ms")

    manager = LogManager(os.path.join(directory, "logs"))
    manager.start()  # the background thread that group-commits, as in the server
    try:
        for record_bytes in options.record_sizes:
            for flush_mode in FLUSH_MODES:
                for batch_records in options.batch_sizes:
                    _append_and_read(results, manager, record_bytes, batch_records, flush_mode)
            # the replicated write path: a replica applies batches the leader encoded
            _append_and_read(
                results, manager, record_bytes, max(options.batch_sizes), "group", "append_prepared"
            )
    finally:
        manager.close()
    _raw_write_pass(results, directory, "end")
    results.goals = _goals(results)
    return results


def _append_and_read(
    results: Results,
    manager: LogManager,
    record_bytes: int,
    batch_records: int,
    flush_mode: FlushMode,
    api: AppendApi = "append",
) -> None:
    """One append cell on a fresh log; then, for group-commit logs of the smallest and largest batches,
    the read-back cells; then the log is deleted."""
    options = results.options
    name = f"bench-{record_bytes}-{flush_mode}-{batch_records}-{api}"
    log = manager.open_log(name, LogConfig(flush_mode=flush_mode))
    cell = _with_other_cpu(
        measure_append, log, record_bytes, batch_records, options.seconds, options.cell_bytes_max, api
    )
    results.appends.append(cell)
    say(
        f"{api:>15} {size_label(record_bytes):>7} x {batch_records:4d} {flush_mode:6s}:"
        f" {cell.records_per_s:10.0f} records/s {cell.disk_mb_s:7.1f} disk MB/s"
        f" ({cell.seconds:.2f} s, bounded by {cell.bounded_by})"
    )
    read_back = {min(options.batch_sizes), max(options.batch_sizes)}
    if api == "append" and flush_mode == "group" and batch_records in read_back:
        for read_api in READ_APIS:
            read = _with_other_cpu(measure_read, log, read_api, record_bytes, batch_records, options.seconds)
            results.reads.append(read)
            say(
                f"{read_api + '()':>15} {size_label(record_bytes):>7} x {batch_records:4d}:"
                f" {read.records_per_s:17.0f} records/s {read.disk_mb_s:7.1f} disk MB/s"
                f" ({read.seconds:.2f} s, {'all' if read.complete else 'time-bounded'})"
            )
    manager.delete_log(name)


def _with_other_cpu(
    measure: Callable[Arguments, CellT], *args: Arguments.args, **kwargs: Arguments.kwargs
) -> CellT:
    """``measure(*args, **kwargs)``'s cell, with the CPU other processes used while it ran."""
    meter = CpuMeter({})
    cell = measure(*args, **kwargs)
    return replace(cell, other_cpu_pct=meter.stop().other_pct)


def _raw_write_pass(results: Results, directory: str, when: str) -> None:
    options = results.options
    raw = _with_other_cpu(
        measure_raw_write, directory, options.raw_bytes_max, max(2.0, options.seconds), when
    )
    results.raw_writes.append(raw)
    say(f"raw sequential write ({when}): {raw.bytes_written // MiB} MiB, {raw.mb_s:.0f} MB/s")


def raw_baseline_mb_s(results: Results) -> float:
    """The best raw sequential write of the run: the strictest baseline for the append goal."""
    return max((raw.mb_s for raw in results.raw_writes), default=0.0)


def _goals(results: Results) -> list[Goal]:
    goals: list[Goal] = []
    baseline = raw_baseline_mb_s(results)
    if baseline > 0:
        batch = max(results.options.batch_sizes)
        for cell in results.appends:
            if cell.api == "append" and cell.flush_mode == "group" and cell.batch_records == batch:
                ratio = cell.disk_mb_s / baseline
                goals.append(
                    Goal(
                        f"group append {size_label(cell.record_bytes)} x {batch} / best raw sequential write",
                        100 * ratio,
                        100 * APPEND_GOAL_RATIO,
                        "%",
                        ratio >= APPEND_GOAL_RATIO,
                    )
                )
    for read in results.reads:
        if read.batch_records != max(results.options.batch_sizes):
            continue
        goals.append(
            Goal(
                f"read-back {size_label(read.record_bytes)} x {read.batch_records} {read.api}()",
                read.disk_mb_s,
                READ_GOAL_MB_S,
                "MB/s",
                read.disk_mb_s >= READ_GOAL_MB_S,
            )
        )
    return goals


# -- output ----------------------------------------------------------------------------------------------


def format_table(results: Results) -> str:
    options = results.options
    defaults = LogConfig()
    lines = [
        "raftlog storage benchmark",
        f"  directory {results.directory} ({results.filesystem}); Python {results.machine['python']},"
        f" {results.machine['cpus']} CPUs",
        f"  MB = 10^6 bytes. Each append cell: <= {options.seconds:g} s and"
        f" <= {options.cell_bytes_max // MiB} MiB of payload; its time includes the final fsync.",
        f"  always = fdatasync per append; group = flush.ms {defaults.flush_interval_ms} and flush.bytes"
        f" {defaults.flush_bytes // MiB} MiB (defaults), flushed by a started LogManager.",
        "  other% = CPU that other processes used meanwhile (100 = one core); high means a disturbed cell.",
        "",
        "Raw machine baselines (this run, same directory)",
        f"  {'measurement':56s} {'amount':>9} {'rate':>13} {'other%':>7}  notes",
    ]
    for raw in results.raw_writes:
        label = f"sequential write, 1 MiB os.write + 1 fsync, {raw.when}"
        lines.append(
            f"  {label:56s} {raw.bytes_written / MiB:5.0f} MiB {raw.mb_s:8.1f} MB/s"
            f" {other_pct_text(raw.other_cpu_pct):>7}"
            f"  {raw.buffered_mb_s:.0f} MB/s before the fsync"
        )
    for sync in results.raw_syncs:
        label = f"4 KiB append + {sync.call}, in a loop"
        lines.append(
            f"  {label:56s} {sync.operations:9d} {sync.per_s:10.0f} /s"
            f" {other_pct_text(sync.other_cpu_pct):>7}"
            f"  p50 {sync.p50_ms:.3f} ms, p99 {sync.p99_ms:.3f} ms"
        )
    raw_mb_s = raw_baseline_mb_s(results)
    lines += [
        "",
        "Appends (random values, key None; append_prepared = a replica applying leader-encoded batches);"
        f" % raw = disk MB/s / best raw sequential write ({raw_mb_s:.0f} MB/s)",
        f"  {'api':>15} {'record':>7} {'batch':>5} {'flush':>6} {'appends/s':>10} {'records/s':>11}"
        f" {'payload MB/s':>12}"
        f" {'disk MB/s':>10} {'% raw':>6} {'p50 ms':>8} {'p99 ms':>8} {'other%':>7}",
    ]
    for cell in results.appends:
        percent = 100 * rate(cell.disk_mb_s, raw_mb_s)
        lines.append(
            f"  {cell.api:>15} {size_label(cell.record_bytes):>7} {cell.batch_records:>5}"
            f" {cell.flush_mode:>6}"
            f" {cell.appends_per_s:>10.0f} {cell.records_per_s:>11.0f} {cell.payload_mb_s:>12.1f}"
            f" {cell.disk_mb_s:>10.1f} {percent:>5.1f}% {cell.p50_ms:>8.3f} {cell.p99_ms:>8.3f}"
            f" {other_pct_text(cell.other_cpu_pct):>7}"
        )
    lines += [
        "",
        "Read-back of the group-commit logs right after writing them (warm page cache; 1 MiB per call)",
        f"  {'record':>7} {'batch':>5} {'api':>14} {'records/s':>11} {'payload MB/s':>12}"
        f" {'disk MB/s':>10} {'read':>6} {'other%':>7}",
    ]
    for read in results.reads:
        lines.append(
            f"  {size_label(read.record_bytes):>7} {read.batch_records:>5} {read.api + '()':>14}"
            f" {read.records_per_s:>11.0f} {read.payload_mb_s:>12.1f} {read.disk_mb_s:>10.1f}"
            f" {'all' if read.complete else 'part':>6} {other_pct_text(read.other_cpu_pct):>7}"
        )
    lines += ["", "Goals (on disk bytes)"]
    for goal in results.goals:
        lines.append(
            f"  {goal.name:56s} {goal.value:8.1f} {goal.unit:4s} (goal >= {goal.target:g} {goal.unit})"
            f"  {'met' if goal.met else 'MISSED'}"
        )
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------------------


DESCRIPTION = "Storage engine append and read-back throughput next to the machine's raw limits."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (also registered by ``raftlog bench storage``)."""
    parser.add_argument("--seconds", type=float, default=1.5, help="time budget of each cell (default 1.5)")
    add_dir_argument(parser, "the scratch directory")
    add_json_argument(parser, "every result")
    add_wait_quiet_argument(parser, "first")
    parser.add_argument(
        "--cell-mib", type=int, default=256, help="payload cap of each append cell, MiB (default 256)"
    )
    parser.add_argument(
        "--raw-mib", type=int, default=512, help="cap of the raw sequential write, MiB (default 512)"
    )
    add_grid_arguments(parser, RECORD_SIZES, BATCH_SIZES, "append")


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("storage", DESCRIPTION, add_arguments).parse_args(argv))


def run_from_args(args: argparse.Namespace) -> int:
    problem = None
    if not 0 < args.seconds <= 600:
        problem = "--seconds must be in (0, 600]"
    elif args.cell_mib < 1 or args.raw_mib < 1:
        problem = "--cell-mib and --raw-mib must be >= 1"
    elif not 0 <= args.wait_quiet <= 3600:
        problem = "--wait-quiet must be in [0, 3600]"
    if problem is not None:
        return refused("storage", problem)
    options = Options(
        seconds=args.seconds,
        cell_bytes_max=args.cell_mib * MiB,
        raw_bytes_max=args.raw_mib * MiB,
        record_sizes=args.record_sizes,
        batch_sizes=args.batch_sizes,
    )
    if args.wait_quiet > 0:
        wait_quiet(args.wait_quiet)
    directory = tempfile.mkdtemp(prefix="raftlog-bench-storage-", dir=args.dir)
    try:
        results = run(options, directory)
    finally:
        shutil.rmtree(directory)
    emit(args.json, format_table(results), asdict(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
