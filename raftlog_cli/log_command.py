"""``raftlog log verify|dump|migrate|compare``: the commands declared; what they run is ``log_files`` (and
``log_compare``), imported only when one of them runs, since it loads the storage engine that no other
command needs."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any


def _runs(name: str, module: str = "log_files") -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        command: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(f"raftlog_cli.{module}"), name
        )
        return command(args)

    return run


def add_commands(commands: Any) -> None:
    """Register ``log verify|dump|migrate|compare`` under ``commands``."""
    log_command = commands.add_parser(
        "log", help="check, print, migrate or compare partitions' log directories, offline (no server)"
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
    compare_command = log_sub.add_parser(
        "compare",
        help="whether a partition's replicas hold the same bytes, read-only (a running node's too): the "
        "first differing offset and what differs, each replica's offsets and which is behind; exit 1 if "
        "any differs",
        description="Compare replicas batch by batch, byte for byte, from the highest log start (or above "
        "what compaction rewrote) on, as long as two replicas hold batches (a replica that ends earlier is "
        "behind, not different), up to the first difference. PATH: a partition's log directories (DIR "
        "DIR [DIR...]), or with --nodes nodes' data directories or a raftlog dev folder, whose partitions "
        "held by two nodes or more are compared. No lock is taken: a running node's files are compared as "
        "far as they held when read. Exit 0: identical; 1: a partition differs; 2: a usage error.",
    )
    compare_command.add_argument("paths", nargs="+", metavar="PATH")
    compare_command.add_argument(
        "--nodes",
        action="store_true",
        help="PATH: nodes' data directories (each holds logs/) or a raftlog dev folder; compare every "
        "partition held by two of them or more",
    )
    compare_command.add_argument("--json", action="store_true", help="one JSON object per partition")
    compare_command.set_defaults(run=_runs("compare", "log_compare"))
