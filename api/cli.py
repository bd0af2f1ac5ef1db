"""The ``raftlog`` command line. Subcommands grow with the product; each one is real or absent."""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
from collections.abc import Sequence

from raftlog.storage.inspect import dump_records, verify_directory


def _log_verify(args: argparse.Namespace) -> int:
    report = verify_directory(args.directory)
    for segment in report.segments:
        status = "ok" if not segment.problem else f"CORRUPT: {segment.problem}"
        print(
            f"{segment.path}  offsets [{segment.base_offset}, {segment.end_offset})  "
            f"{segment.batches} batches  {segment.size_bytes} bytes  {status}"
        )
    print(f"{len(report.segments)} segments, {report.records} records: {'ok' if report.ok else 'CORRUPT'}")
    return 0 if report.ok else 1


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def _log_dump(args: argparse.Namespace) -> int:
    for shown, record in enumerate(dump_records(args.directory, args.offset)):
        if shown >= args.limit:
            break
        row = {
            "offset": record.offset,
            "timestamp": record.timestamp_ms,
            "key": _text(record.key),
            "value": _text(record.value),
            "headers": {k: _text(v) for k, v in record.headers},
        }
        print(json.dumps(row))
    return 0


def _bench_storage(args: argparse.Namespace) -> int:
    from raftlog.bench import storage

    return storage.main(args.bench_args)


def _dev(args: argparse.Namespace) -> int:
    print(
        "raftlog dev: the cluster node is not built yet (replicated partitions and the HTTP API come next).\n"
        "Available now: 'raftlog log verify|dump DIR' and 'raftlog bench storage'.",
        file=sys.stderr,
    )
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftlog", description="A Raft-replicated, Kafka-style log service."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(dest="command", required=True)

    log_cmd = commands.add_parser("log", help="inspect a partition's log directory (read-only)")
    log_sub = log_cmd.add_subparsers(dest="log_command", required=True)
    verify = log_sub.add_parser(
        "verify", help="CRC-check every batch and offset contiguity; exit 1 if corrupt"
    )
    verify.add_argument("directory")
    verify.set_defaults(run=_log_verify)
    dump = log_sub.add_parser("dump", help="print records as JSON lines")
    dump.add_argument("directory")
    dump.add_argument("--offset", type=int, default=0, help="first offset to print (default 0)")
    dump.add_argument("--limit", type=int, default=100, help="records to print at most (default 100)")
    dump.set_defaults(run=_log_dump)

    dev = commands.add_parser("dev", help="start a local 3-node cluster (not built yet: says so and exits 2)")
    dev.set_defaults(run=_dev)

    bench = commands.add_parser("bench", help="benchmarks that print numbers")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    bench_storage = bench_sub.add_parser(
        "storage", help="append/read throughput of the segmented log vs raw disk", add_help=False
    )
    bench_storage.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench_storage.set_defaults(run=_bench_storage)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        result: int = args.run(args)
    except BrokenPipeError:
        return 0
    except FileNotFoundError as exc:
        print(f"raftlog: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
