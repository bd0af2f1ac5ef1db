"""What ``raftlog log verify|dump|migrate`` run (``log_command`` declares them): a partition's log
directory, or a stopped node's data directory, read (and, for ``migrate``, rewritten) with the storage
engine, without a server.

``migrate`` takes a node's data directory (it holds ``logs/``) or a ``raftlog dev`` folder (its nodes'
directories hold one each), locks each one as a node would (a running node, or ``raftlog dev``, is named
and nothing is touched), and rewrites every partition log of batch format v1 as Kafka RecordBatch v2
(``raftlog.storage.migrate``: planned, then converted, a log at a time). Progress goes to stdout: a bar
on a terminal, otherwise a line per log; then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from raftlog.storage import legacy_batch
from raftlog.storage.batch import TimestampType
from raftlog.storage.dirlock import DirectoryLock
from raftlog.storage.errors import CorruptRecord, DirectoryLocked
from raftlog.storage.inspect import BatchInfo, Format, dump_batches, verify_directory
from raftlog.storage.log_format import needs_migration
from raftlog.storage.migrate import (
    LogOutcome,
    LogPlan,
    LogState,
    SegmentKind,
    migrate_log,
    plan_log,
)
from raftlog.storage.transactions import marker
from raftlog_cli.records import text

LOGS_DIR = "logs"  # a node's partition logs, one directory each, under its data directory
MIGRATE_OWNER = "raftlog log migrate"
LEGACY_NOTE = (
    "format v1 (raftlog's own, before Kafka's RecordBatch v2): `raftlog log migrate DATA_DIR` rewrites it, "
    "with the node stopped"
)
BAR_WIDTH = 30
REDRAW_S = 0.1


def _size(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


# -- verify and dump ---------------------------------------------------------------------------------


def verify(args: argparse.Namespace) -> int:
    """Every segment with its format, offsets and size, then each damaged batch under its segment."""
    report = verify_directory(args.directory)
    for segment in report.segments:
        status = "ok" if segment.ok else f"CORRUPT ({len(segment.problems)} damaged)"
        print(
            f"{segment.path}  {segment.format.value}  offsets [{segment.base_offset}, {segment.end_offset})  "
            f"{segment.batches} batches  {segment.size_bytes} bytes  {status}"
        )
        for problem in segment.problems:
            print(f"  byte {problem.position}: {problem.reason}")
    damaged = len(report.problems)
    verdict = "ok" if report.ok else f"CORRUPT: {damaged} damaged batch{'es' if damaged != 1 else ''}"
    print(f"{len(report.segments)} segments, {report.records} records: {verdict}")
    if Format.LEGACY in report.formats:
        print(f"{args.directory}: {LEGACY_NOTE}")
    return 0 if report.ok else 1


def batch_row(info: BatchInfo) -> dict[str, Any]:
    return {
        "batch": {
            "file": info.path,
            "position": info.position,
            "size_bytes": info.size_bytes,
            "magic": info.magic,
            "base_offset": info.base_offset,
            "record_count": info.record_count,
            "last_offset": info.end_offset - 1,
            "leader_epoch": info.leader_epoch,
            "compression": info.compression.name.lower(),
            "timestamp_type": "LogAppendTime"
            if info.timestamp_type is TimestampType.LOG_APPEND_TIME
            else "CreateTime",
            "producer_id": info.producer_id,
            "producer_epoch": info.producer_epoch,
            "base_sequence": info.base_sequence,
            "max_timestamp": info.max_timestamp_ms,
            "is_transactional": info.transactional,
            "is_control": info.control,
        }
    }


def dump(args: argparse.Namespace) -> int:
    """JSON lines: each batch's header, then its records (up to ``--limit`` records in all); at damage,
    what came before it, then where it is on stderr, and exit 1."""
    shown = 0
    legacy_noted = False
    try:
        for info, records in dump_batches(args.directory, args.offset):
            if shown >= args.limit:
                break
            if info.magic == legacy_batch.MAGIC and not legacy_noted:
                print(f"raftlog log dump: {args.directory}: {LEGACY_NOTE}", file=sys.stderr)
                legacy_noted = True
            print(json.dumps(batch_row(info)))
            for record in records:
                if record.offset < args.offset or args.batches_only:
                    continue
                if shown >= args.limit:
                    break
                row: dict[str, Any] = {
                    "offset": record.offset,
                    "timestamp": record.timestamp_ms,
                    "key": text(record.key),
                    "value": text(record.value),
                    "headers": [{"key": k, "value": text(v)} for k, v in record.headers],
                }
                found = marker(record.key, record.value) if info.control else None
                if found is not None:  # a transaction's end, as kafka-dump-log shows it
                    row["marker"] = {"type": found[0], "coordinator_epoch": found[1]}
                print(json.dumps(row))
                shown += 1
    except CorruptRecord as exc:
        sys.stdout.flush()
        print(f"raftlog log dump: {exc}", file=sys.stderr)
        return 1
    return 0


# -- migrate -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """What ``migrate`` was given: the directories to lock, and the nodes' data directories."""

    locked: tuple[str, ...]
    nodes: tuple[str, ...]


def layout(root: str) -> Layout | None:
    """A node's data directory (``root/logs``) or a folder of them (``raftlog dev``); None if neither."""
    if os.path.isdir(os.path.join(root, LOGS_DIR)):
        return Layout((root,), (root,))
    try:
        names = sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return None
    nodes = tuple(
        os.path.join(root, name) for name in names if os.path.isdir(os.path.join(root, name, LOGS_DIR))
    )
    return Layout((root, *nodes), nodes) if nodes else None


def log_directories(node: str) -> list[str]:
    root = os.path.join(node, LOGS_DIR)
    return [
        os.path.join(root, name)
        for name in sorted(os.listdir(root))
        if os.path.isdir(os.path.join(root, name))
    ]


def _legacy_bytes(directory: str) -> int:
    """The data bytes a migration of the log reads (none when it is v2 already): what progress counts."""
    if not needs_migration(directory):
        return 0
    names = os.listdir(directory)
    return sum(os.path.getsize(os.path.join(directory, n)) for n in names if n.endswith(".log"))


class Progress:
    """A bar redrawn in place on a terminal (``\\r``), and a line per log either way."""

    def __init__(self, out: TextIO, terminal: bool, logs: int, total_bytes: int) -> None:
        self._out = out
        self._terminal = terminal
        self.logs = logs
        self.total_bytes = total_bytes
        self.done_logs = 0
        self.done_bytes = 0
        self.batches = 0
        self._drawn_at = 0.0
        self._drawn = False

    def converted(self, batches: int, size_bytes: int) -> None:
        self.batches += batches
        self.done_bytes += size_bytes
        if self._terminal and time.monotonic() - self._drawn_at >= REDRAW_S:
            self._draw()

    def line(self, text: str) -> None:
        if self._drawn:
            self._out.write("\r\033[K")
            self._drawn = False
        self._out.write(text + "\n")
        if self._terminal:
            self._draw()
        self._out.flush()

    def _draw(self) -> None:
        share = self.done_bytes / self.total_bytes if self.total_bytes else 1.0
        filled = int(BAR_WIDTH * min(share, 1.0))
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self._out.write(
            f"\r\033[K[{bar}] {share:4.0%}  {self.done_logs}/{self.logs} logs  {_size(self.done_bytes)} of "
            f"{_size(self.total_bytes)}  {self.batches} batches"
        )
        self._out.flush()
        self._drawn_at = time.monotonic()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            self._out.write("\r\033[K")
            self._out.flush()
            self._drawn = False


def describe(plan: LogPlan, outcome: LogOutcome | None) -> str:
    """One line for one log: what was done, or (no outcome: a dry run) what would be."""
    if plan.state is LogState.MIGRATED:
        return "already Kafka RecordBatch v2: skipped"
    if plan.state is LogState.REFUSED:
        return f"REFUSED, nothing written: {plan.problem}"
    if plan.state is LogState.EMPTY:
        return (
            "no batches: would write the format marker"
            if outcome is None
            else "no batches: format marker written"
        )
    legacy = sum(1 for s in plan.segments if s.kind is SegmentKind.LEGACY)
    resumed = sum(1 for s in plan.segments if s.kind is SegmentKind.CONVERTED)
    segments = f"{legacy} segment{'s' if legacy != 1 else ''}"
    what = f"{segments}, {plan.legacy_batches} batches, {plan.legacy_records} records"
    if outcome is None:
        line = f"would convert {what}, {_size(plan.legacy_bytes)}"
    else:
        line = f"converted {what}, {_size(outcome.bytes_before)} -> {_size(outcome.bytes_after)}"
    if resumed:
        line += f" ({resumed} converted by an interrupted run before)"
    if plan.torn_tail_bytes:
        line += f"; {plan.torn_tail_bytes} bytes of torn tail dropped, as a node's recovery would"
    return line


def _lock_all(directories: tuple[str, ...]) -> list[DirectoryLock]:
    """Lock each directory as a node would; on a refusal release what was taken and raise it."""
    taken: list[DirectoryLock] = []
    try:
        for directory in directories:
            taken.append(DirectoryLock.acquire(directory, MIGRATE_OWNER))
    except BaseException:
        for lock in taken:
            lock.close()
        raise
    return taken


def migrate(args: argparse.Namespace) -> int:
    root = os.path.abspath(args.data_dir)
    found = layout(root)
    if found is None:
        print(
            f"raftlog log migrate: {root} is no node data directory (it holds no {LOGS_DIR}/) nor a folder "
            f"of them (raftlog dev's)",
            file=sys.stderr,
        )
        return 2
    try:
        locks = _lock_all(found.locked)
    except DirectoryLocked as exc:
        print(f"raftlog log migrate: {exc}: stop it first; nothing was changed", file=sys.stderr)
        return 1
    try:
        return _migrate_nodes(root, found, args.dry_run, sys.stdout)
    finally:
        for lock in locks:
            lock.close()


def _migrate_nodes(root: str, found: Layout, dry_run: bool, out: TextIO) -> int:
    """Plan, then (unless ``dry_run``) migrate each log of each node, a line per log, then a summary;
    1 when a log was refused."""
    directories = [d for node in found.nodes for d in log_directories(node)]
    total_bytes = sum(_legacy_bytes(d) for d in directories)
    progress = Progress(out, out.isatty() and not dry_run, len(directories), total_bytes)
    started = time.monotonic()
    states: Counter[LogState] = Counter()
    records = batches = converted_bytes = 0
    for directory in directories:
        plan = plan_log(directory)
        outcome = None if dry_run else migrate_log(plan, progress.converted)
        progress.done_logs += 1
        where = f"[{progress.done_logs}/{progress.logs}] {os.path.relpath(directory, root)}"
        progress.line(f"{where}: {describe(plan, outcome)}")
        states[plan.state] += 1
        records += plan.legacy_records
        batches += plan.legacy_batches
        converted_bytes += plan.legacy_bytes
    progress.finish()
    elapsed_s = time.monotonic() - started
    rate = f" ({converted_bytes / 2**20 / elapsed_s:.1f} MiB/s)" if converted_bytes and not dry_run else ""
    nodes = f"{len(found.nodes)} data director{'ies' if len(found.nodes) != 1 else 'y'}"
    out.write(
        f"{len(directories)} logs in {nodes}: {'would convert' if dry_run else 'converted'} "
        f"{states[LogState.LEGACY]} ({records} records in {batches} batches, {_size(converted_bytes)}), "
        f"{states[LogState.MIGRATED]} already v2, {states[LogState.EMPTY]} without batches, "
        f"{states[LogState.REFUSED]} refused; {elapsed_s:.2f} s{rate}\n"
    )
    if states[LogState.REFUSED]:
        out.write("refused logs are unchanged, and a node refuses to start on them until they are migrated\n")
    out.flush()
    return 1 if states[LogState.REFUSED] else 0
