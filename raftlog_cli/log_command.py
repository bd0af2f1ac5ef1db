"""``raftlog log verify|dump|migrate``: the commands declared; what they run is ``log_files``, imported only
when one of them runs, since it loads the storage engine that no other command needs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def _runs(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from raftlog_cli import log_files

        command: Callable[[argparse.Namespace], int] = getattr(log_files, name)
        return command(args)

    return run


def add_commands(commands: Any) -> None:
    """Register ``log verify|dump|migrate`` under ``commands``."""
    log_command = commands.add_parser(
        "log", help="check, print or migrate a partition's log directory, offline (no server)"
    )
    log_sub = log_command.add_subparsers(dest="log_command", required=True)
    verify_command = log_sub.add_parser(
        "verify", help="check every batch (CRC, framing, codec, records, dense offsets); exit 1 if damaged"
    )
    verify_command.add_argument("directory")
    verify_command.set_defaults(run=_runs("verify"))
    dump_command = log_sub.add_parser(
        "dump", help="print batches and records as JSON lines; at damage, say where it is and exit 1"
    )
    dump_command.add_argument("directory")
    dump_command.add_argument("--offset", type=int, default=0, help="first offset to print (default 0)")
    dump_command.add_argument("--limit", type=int, default=100, help="records to print at most (default 100)")
    dump_command.add_argument("--batches-only", action="store_true", help="print batch headers, no records")
    dump_command.set_defaults(run=_runs("dump"))
    migrate_command = log_sub.add_parser(
        "migrate",
        help="rewrite a stopped node's partition logs of format v1 as Kafka RecordBatch v2 (DATA_DIR: the "
        "node's data directory, or a raftlog dev folder); crash-safe, run it again to resume",
    )
    migrate_command.add_argument("data_dir", metavar="DATA_DIR")
    migrate_command.add_argument(
        "--dry-run", action="store_true", help="say what would change; change no log"
    )
    migrate_command.set_defaults(run=_runs("migrate"))
