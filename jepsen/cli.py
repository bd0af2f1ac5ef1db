"""The harness's command line: `python -m jepsen check DIR` (and `run`, added alongside).

Each subcommand is a `register_*` function that adds its parser and sets `handler`; a handler takes the
parsed arguments and returns the process exit status. To add one, write `register_run(subparsers)` and
append it to SUBCOMMANDS.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from jepsen.checking import check
from jepsen.history import HistoryError, read_history
from jepsen.runner import compared_replicas, register_run

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_USAGE = 3  # unreadable or malformed history, missing directory
VERDICT_EXIT = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}

Handler = Callable[[argparse.Namespace], int]


def register_check(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check DIR/history.jsonl, write DIR/results.json",
        description="Check a run's history for lost, duplicated, reordered or skipped records. "
        "Exit status: 0 valid, 1 invalid, 2 unknown, 3 unreadable history.",
    )
    parser.add_argument("directory", type=pathlib.Path, help="the run directory holding history.jsonl")
    parser.add_argument("--examples", type=int, default=10, help="examples kept per anomaly class")
    parser.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    directory: pathlib.Path = args.directory
    history_path = directory / "history.jsonl"
    try:
        history = read_history(history_path)
    except FileNotFoundError:
        print(f"no history at {history_path}", file=sys.stderr)
        return EXIT_USAGE
    except HistoryError as error:
        print(f"malformed history: {error}", file=sys.stderr)
        return EXIT_USAGE
    results = check(history, examples_per_class=args.examples, replicas=compared_replicas(str(directory)))
    (directory / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    out.write(summary(results))
    return VERDICT_EXIT[results["verdict"]]


def summary(results: dict[str, Any]) -> str:
    """A few human lines: verdict and why, anomaly counts, operations, availability under faults."""
    lines = [f"verdict: {results['verdict'].upper()}"]
    lines += [f"  {reason}" for reason in results["reasons"]]
    found = {kind: count for kind, count in results["anomaly_counts"].items() if count}
    for kind, count in found.items():
        first = results["anomalies"][kind][0]
        lines.append(f"{kind}: {count} (first at indexes {first['indexes']})")
    stats = results["stats"]
    lines.append(
        f"operations: {sum(row['total'] for row in stats['operations'].values())}, "
        f"acked sends: {stats['acked_sends']}, read values: {stats['read_values']}, "
        f"unseen: {results['unseen']['count']}"
    )
    if "transactions" in stats:  # the transactional workload's
        lines.append(f"transactions: {stats['transactions']}")
    for f, row in results["availability"]["outside"].items():
        lines.append(f"  outside faults {f}: ok {row['ok']}/{row['total']}")
    for fault, table in results["availability"]["by_fault"].items():
        for f, row in table.items():
            lines.append(f"  during {fault} {f}: ok {row['ok']}/{row['total']}")
    for number, item in enumerate(results["availability"].get("recoveries", []), start=1):
        lines.append(
            f"  heal {number} at {item['healed_at']} s: first write acknowledged after {item['recovery_s']} s"
            f" (bound {item['bound_s']} s, nodes ready after {item['ready_s']} s): {item['judged']}"
        )
    fault_free = results["availability"].get("fault_free")
    if fault_free is not None:
        lines.append(
            f"  without faults: {fault_free['ok']}/{fault_free['writes']} writes acknowledged in "
            f"{fault_free['seconds']} s"
        )
    return "\n".join(lines) + "\n"


SUBCOMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    register_check,
    register_run,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jepsen", description="raftlog fault-injection harness")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for register in SUBCOMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)
