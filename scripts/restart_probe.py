"""A node stopped and started again under many partitions, measured: how long the node took to stop, and
how the produces to a partition whose leader stays up fared meanwhile (one every 100 ms through the other
two nodes, as tests/scenario/test_many_partitions.py sends them). Three real node processes on loopback,
one topic of --partitions partitions (RF 3); bounded in time. With a slower disk:

    PYTHONPATH=scripts/slow_fsync SLOW_FSYNC_S=0.01 .venv/bin/python scripts/restart_probe.py
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.scenario import test_many_partitions as scenario
from tests.scenario.cluster import ProcessCluster

# What each node's replicas did about elections (``raftlog.consensus.group.election_counts``)
ELECTIONS = ("pre_vote_rounds", "pre_votes_granted", "pre_votes_refused_starting", "elections_on_timeout")


def elections(cluster: ProcessCluster, node_id: str) -> dict[str, float]:
    values = scenario.metrics(cluster.url(node_id))
    return {name: values.get(f"raftlog_raft_{name}_total", 0.0) for name in ELECTIONS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=scenario.BIG)
    parser.add_argument(
        "--keep", metavar="DIR", help="run in DIR and keep it (the nodes' logs: DIR/<node>/node.log)"
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        root = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="restart-probe-"))
        os.makedirs(root, exist_ok=True)
        cluster = ProcessCluster.create(root)
        cluster.start_all()
        try:
            print(f"building a topic of {args.partitions} partitions", flush=True)
            scenario.with_big_topic(cluster, args.partitions)
            victim, leader = scenario.pick_victim(cluster)
            survivors = [n.node_id for n in cluster.nodes if n.node_id != victim]
            terms = scenario.controller_terms(cluster, survivors)
            probe_term = scenario.partition_term(cluster, "probe", leader)
            counted = {n: elections(cluster, n) for n in survivors}
            with scenario.probing([cluster.url(n) for n in survivors]) as probe:
                probe.event(f"the probe's leader is {leader}")
                stopped_s = scenario.restart_under_probe(
                    cluster, victim, probe, args.partitions + 1, exit_s=600, open_s=600
                )
            print(f"stop: {stopped_s:.1f} s", flush=True)
            print(
                f"the controller's term on {', '.join(survivors)}: {terms} before, "
                f"{scenario.controller_terms(cluster, survivors)} after",
                flush=True,
            )
            print(
                f"the probe partition's term on {leader}: {probe_term} before, "
                f"{scenario.partition_term(cluster, 'probe', leader)} after",
                flush=True,
            )
            print("during the restart (the restarted node: since it started):", flush=True)
            for node in cluster.nodes:
                now = elections(cluster, node.node_id)
                grew = {k: v - counted.get(node.node_id, {}).get(k, 0.0) for k, v in now.items()}
                print(f"  {node.node_id}: " + ", ".join(f"{k} {v:.0f}" for k, v in grew.items()), flush=True)
            print(probe.report(), flush=True)
        finally:
            cluster.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
