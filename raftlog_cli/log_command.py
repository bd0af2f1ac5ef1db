"""``raftlog log verify|dump``: a partition's log directory read with the storage engine, without a
server (``raftlog.storage.inspect``), in either batch format."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from raftlog.storage import legacy_batch
from raftlog.storage.batch import TimestampType
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.inspect import BatchInfo, Format, dump_batches, verify_directory

LEGACY_NOTE = (
    "format v1 (raftlog's own, before Kafka's RecordBatch v2): `raftlog log migrate DATA_DIR` rewrites it, "
    "with the node stopped"
)


def text(data: bytes | None) -> str | None:
    """Bytes as UTF-8 text, else ``base64:`` and their base64; None stays None (JSON null)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


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
            "leader_epoch": info.leader_epoch,
            "compression": info.compression.name.lower(),
            "timestamp_type": "LogAppendTime"
            if info.timestamp_type is TimestampType.LOG_APPEND_TIME
            else "CreateTime",
            "producer_id": info.producer_id,
            "producer_epoch": info.producer_epoch,
            "base_sequence": info.base_sequence,
            "max_timestamp": info.max_timestamp_ms,
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
                row = {
                    "offset": record.offset,
                    "timestamp": record.timestamp_ms,
                    "key": text(record.key),
                    "value": text(record.value),
                    "headers": [{"key": k, "value": text(v)} for k, v in record.headers],
                }
                print(json.dumps(row))
                shown += 1
    except CorruptRecord as exc:
        sys.stdout.flush()
        print(f"raftlog log dump: {exc}", file=sys.stderr)
        return 1
    return 0


def add_commands(commands: Any) -> None:
    """Register ``log verify|dump`` under ``commands``."""
    log_command = commands.add_parser(
        "log", help="check or print a partition's log directory, offline (no server)"
    )
    log_sub = log_command.add_subparsers(dest="log_command", required=True)
    verify_command = log_sub.add_parser(
        "verify", help="check every batch (CRC, framing, codec, records, dense offsets); exit 1 if damaged"
    )
    verify_command.add_argument("directory")
    verify_command.set_defaults(run=verify)
    dump_command = log_sub.add_parser(
        "dump", help="print batches and records as JSON lines; at damage, say where it is and exit 1"
    )
    dump_command.add_argument("directory")
    dump_command.add_argument("--offset", type=int, default=0, help="first offset to print (default 0)")
    dump_command.add_argument("--limit", type=int, default=100, help="records to print at most (default 100)")
    dump_command.add_argument("--batches-only", action="store_true", help="print batch headers, no records")
    dump_command.set_defaults(run=dump)
