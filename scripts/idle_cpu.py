"""Idle CPU of a local 3-node cluster holding N partitions x 3 replicas. The logic now lives in the idle
cell of ``raftlog bench cluster`` (raftlog_bench/cluster.py); this wrapper keeps the old command.

    .venv/bin/python scripts/idle_cpu.py [--partitions 100] [--seconds 10] [--settle 5] [--dir DIR]

Other options are passed on to ``raftlog bench cluster`` (e.g. ``--keep``, ``--json OUT``).
"""

from __future__ import annotations

import argparse
import sys

from raftlog_bench import cluster


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait after creating the topic")
    args, rest = parser.parse_known_args()
    return cluster.main(
        [
            "--cells", "idle",
            "--idle-partitions", str(args.partitions),
            "--idle-seconds", str(args.seconds),
            "--idle-settle", str(args.settle),
            *rest,
        ]
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
