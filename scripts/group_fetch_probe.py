"""Kafka's ConsumerPerformance on raftlog as one consumer and as a group of three, read twice each in
turns, with the Fetch requests the nodes answered (their /metrics) and the nodes' CPU over each read:

    .venv/bin/python scripts/group_fetch_probe.py [--records 3000000] [--partitions 8] [--dir DIR]

One 3-node cluster (``raftlog dev``'s nodes), a topic of 100 B records written once by
``ProducerPerformance``, then the reads (``raftlog bench kafka-tools``' own runs of the tools). The nodes'
CPU covers each tool's whole run: a group member that stopped short of its share waits the tool's
``--timeout`` (10 s) before it exits, and the nodes' idle CPU over that wait is in the group's figure.
Numbers, not a test: docs/performance.md quotes them.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from raftlog_bench import kafka_tools
from raftlog_client.local_cluster import LocalCluster
from raftlog_contract import METRICS_PATH

FETCH_COUNT = 'raftlog_kafka_request_seconds_count{api="Fetch"'
SIZE = 100


def fetches(cluster: LocalCluster) -> float:
    """Fetch requests the cluster's nodes answered so far (each node's /metrics)."""
    total = 0.0
    for url in cluster.servers:
        with urllib.request.urlopen(url + METRICS_PATH, timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(FETCH_COUNT):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    config = kafka_tools.Config(
        record_sizes=(SIZE,), records=(args.records,), partitions=args.partitions, dir=args.dir
    )
    trouble = kafka_tools.problem(config)
    if trouble is not None:
        print(f"group_fetch_probe: {trouble}", file=sys.stderr)
        return 2
    directory = tempfile.mkdtemp(prefix="group-fetch-probe-", dir=args.dir)
    with LocalCluster(os.path.join(directory, "cluster")) as cluster:
        tools = kafka_tools.Tools("raftlog", cluster.bootstrap_servers, dict(cluster.pids), directory, config)
        kafka_tools.topic_creator("raftlog", cluster.bootstrap_servers)("probe", args.partitions)
        tools.produce("probe", SIZE, args.records, 1)
        for members in (1, 3, 1, 3):
            before = fetches(cluster)
            (run,) = tools.consume("probe", SIZE, args.records, members)
            answered = fetches(cluster) - before
            print(
                f"{'one consumer' if members == 1 else f'a group of {members}'}: {run.value:,.0f} records/s,"
                f" {answered:,.0f} fetches ({args.records / max(1.0, answered):,.0f} records a fetch),"
                f" nodes' CPU {run.servers_cpu_s:.2f} s ({run.cpu_s_per_million:.2f} s a million records)"
                f" over the tools' {run.seconds:.1f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
