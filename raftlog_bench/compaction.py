"""Compaction benchmark: what the cleaner costs, and what appending to a compacted log costs.

Usage: ``raftlog bench compaction [--mib M] [--record-size B] [--keys K] [--dir DIR] [--json OUT]``

In one run, on a scratch directory (removed at the end):

1. append ``--mib`` MiB of keyed records (``--keys`` distinct keys, in batches of 100, flush policy
   ``group``) to a log with ``cleanup.policy`` ``delete`` and to one with ``compact``: appends/s and MB/s
   of each (compaction runs on its own thread in a node, so an append costs the same: this shows it);
2. a first pass over the compacted log, unpaced (a node paces it at ``--cleaner-rate-mib``): MB/s read,
   CPU seconds per GB read, records and bytes removed;
3. a tenth of the keys overwritten (a tenth of the payload), rolled, and a second pass (the logs'
   ``min.cleanable.dirty.ratio`` is 0.1 here, so that it is due): the steady state, where a pass maps only
   what was written since the last one but rewrites the whole cleanable log, as Kafka's cleaner does.

With ``--compare kafka``, also a compacted topic on a 3-node raftlog cluster and on a 3-node Apache Kafka
cluster through the same client (``raftlog_bench.compaction_compare``): produce rate, and how soon and at
what CPU each system's cleaner compacts it.

Every record kept is checked against a model (each key's last value); the numbers are never asserted.
MB is 10^6 bytes; CPU is this process's (user + system) during the pass.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from raftlog.errors import check
from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.cleaner import PassReport, clean_log
from raftlog.storage.config import MiB
from raftlog_bench.arguments import add_dir_argument, add_json_argument, refused, standalone_parser
from raftlog_bench.output import emit, say
from raftlog_bench.stats import MB

DESCRIPTION = "log compaction: the cleaner's MB/s and CPU per GB, appends to a compacted log"
BATCH_RECORDS = 100
SEGMENT_BYTES = 16 * MiB
DIRTY_RATIO = 0.1  # the second pass's new records are a small share of the compacted log


@dataclass(frozen=True, slots=True)
class AppendRow:
    policy: str
    records: int
    seconds: float
    mb_s: float
    records_s: float


@dataclass(frozen=True, slots=True)
class PassRow:
    name: str
    bytes_read: int
    bytes_written: int
    records_read: int
    records_removed: int
    segments_before: int
    segments_after: int
    seconds: float
    cpu_seconds: float
    mb_s: float
    cpu_s_per_gb: float


def _append(log: Log, rng: random.Random, payload_bytes: int, record_bytes: int, keys: int) -> AppendRow:
    filler = b"x" * max(record_bytes - 16, 0)
    written = records = 0
    started = time.perf_counter()
    while written < payload_bytes:
        batch = [
            ProducerRecord(b"%015d" % records + filler[: record_bytes - 15], b"key-%d" % rng.randrange(keys))
            for records in range(records, records + BATCH_RECORDS)
        ]
        log.append(batch)
        records += BATCH_RECORDS
        written += BATCH_RECORDS * record_bytes
    log.flush()
    seconds = time.perf_counter() - started
    return AppendRow(log.config.cleanup_policy, records, seconds, written / MB / seconds, records / seconds)


def _pass(name: str, log: Log, now_ms: int) -> PassRow:
    cpu = time.process_time()
    started = time.perf_counter()
    report = clean_log(log, now_ms)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu
    check(isinstance(report, PassReport) and report.completed, f"the {name} pass did not run to its end")
    assert report is not None
    return PassRow(
        name, report.bytes_read, report.bytes_written, report.records_read, report.records_removed,
        report.segments_before, report.segments_after, seconds, cpu_seconds,
        report.bytes_read / MB / seconds, cpu_seconds / (report.bytes_read / 1e9),
    )  # fmt: skip


def _check_latest(log: Log, cleanable_end: int) -> int:
    """Every key's record below ``cleanable_end`` is its last there; returns how many records are kept."""
    seen: dict[bytes | None, int] = {}
    kept = 0
    offset = log.log_start_offset
    while offset < cleanable_end:
        page = log.read(offset, 4 * MiB, max_offset=cleanable_end)
        if not page:
            break
        for record in page:
            check(record.key not in seen, f"key {record.key!r} kept twice below {cleanable_end}")
            seen[record.key] = record.offset
        kept += len(page)
        offset = page[-1].offset + 1
    return kept


def run(directory: str, payload_bytes: int, record_bytes: int, keys: int) -> dict[str, Any]:
    rng = random.Random(1)
    appends = []
    logs = {}
    for policy in ("delete", "compact"):
        config = LogConfig(
            segment_bytes=SEGMENT_BYTES,
            flush_mode="group",
            retention_ms=-1,
            cleanup_policy=policy,
            min_cleanable_dirty_ratio=DIRTY_RATIO,
        )
        log = Log.open(f"{directory}/{policy}", config)
        say(f"appending {payload_bytes / MB:.0f} MB of {record_bytes}-byte records to a {policy} log")
        appends.append(_append(log, rng, payload_bytes, record_bytes, keys))
        logs[policy] = log
    logs["delete"].close()
    log = logs["compact"]
    log.roll()
    now_ms = int(time.time() * 1000)
    say("first pass")
    passes = [_pass("first", log, now_ms)]
    kept_first = _check_latest(log, log._segments[-1].base_offset)
    _append(log, rng, max(payload_bytes // 10, BATCH_RECORDS * record_bytes), record_bytes, keys // 10 or 1)
    log.roll()
    say("second pass, a tenth of the keys overwritten")
    passes.append(_pass("steady", log, int(time.time() * 1000)))
    kept_steady = _check_latest(log, log._segments[-1].base_offset)
    log.close()
    return {
        "record_bytes": record_bytes,
        "keys": keys,
        "appends": [asdict(a) for a in appends],
        "passes": [asdict(p) for p in passes],
        "records_kept": [kept_first, kept_steady],
    }


def format_table(results: dict[str, Any]) -> str:
    lines = [f"records of {results['record_bytes']} B, {results['keys']:,} keys, batches of {BATCH_RECORDS}"]
    lines.append(f"{'append to':<12}{'records':>12}{'MB/s':>10}{'records/s':>14}")
    for a in results["appends"]:
        lines.append(f"{a['policy']:<12}{a['records']:>12,}{a['mb_s']:>10.1f}{a['records_s']:>14,.0f}")
    lines.append("")
    lines.append(
        f"{'pass':<8}{'read MB':>10}{'written MB':>12}{'removed':>12}{'segments':>12}{'s':>8}{'MB/s':>8}"
        f"{'CPU s/GB':>10}"
    )
    for p in results["passes"]:
        segments = f"{p['segments_before']}->{p['segments_after']}"
        lines.append(
            f"{p['name']:<8}{p['bytes_read'] / MB:>10.1f}{p['bytes_written'] / MB:>12.1f}"
            f"{p['records_removed']:>12,}{segments:>12}{p['seconds']:>8.2f}{p['mb_s']:>8.1f}"
            f"{p['cpu_s_per_gb']:>10.1f}"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (also registered by ``raftlog bench compaction``)."""
    parser.add_argument("--mib", type=int, default=256, help="payload appended to each log, MiB (256)")
    parser.add_argument("--record-size", type=int, default=100, help="bytes of each record's value (100)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys (10000)")
    add_dir_argument(parser, "the scratch directory")
    add_json_argument(parser, "every result")
    parser.add_argument(
        "--compare",
        choices=("kafka",),
        default=None,
        help="also a compacted topic on raftlog and Apache Kafka clusters, same client",
    )
    parser.add_argument(
        "--compare-records",
        type=int,
        default=200_000,
        help="records produced to each cluster with --compare (200000)",
    )
    parser.add_argument("--compare-keys", type=int, default=1000, help="their keys (1000)")  # fmt: skip


def run_from_args(args: argparse.Namespace) -> int:
    if not 1 <= args.mib <= 65536 or not 16 <= args.record_size <= MiB or not 1 <= args.keys <= 10**7:
        return refused("compaction", "--mib in [1, 65536], --record-size in [16, 1 MiB], --keys in [1, 10^7]")
    if args.compare and not (1 <= args.compare_keys <= args.compare_records <= 10**8):
        return refused("compaction", "1 <= --compare-keys <= --compare-records <= 10^8")
    directory = tempfile.mkdtemp(prefix="raftlog-bench-compaction-", dir=args.dir)
    try:
        results = run(directory, args.mib * MiB, args.record_size, args.keys)
        table = format_table(results)
        if args.compare:
            from raftlog_bench import compaction_compare

            systems = ["raftlog", args.compare]
            rows = compaction_compare.run(systems, args.compare_records, args.compare_keys, directory)
            results["compare"] = rows
            table += "\n\n" + compaction_compare.format_table(rows, args.compare_keys)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    emit(args.json, table, results)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_from_args(standalone_parser("compaction", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
