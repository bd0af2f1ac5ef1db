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
import re
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


# A new leader's line (raftlog.consensus.core_elections): the old leader, the new one, and the cause
LEADER_LINE = re.compile(r"leader (\S+) -> (\S+) in term \d+ \((\w+)")


def log_lines(root: str, node_id: str) -> list[str]:
    with open(os.path.join(root, node_id, "node.log"), errors="replace") as log:
        return log.read().splitlines()


def leader_changes(root: str, marks: dict[str, int], victim: str) -> dict[str, int]:
    """The leader changes the nodes logged since ``marks`` (each node's log length before the stop): the
    stopped node's groups its controlled shutdown handed over (transfers); the elections by what they
    replaced: a group the stopped node led, a group with no leader known to the winner, a leader of the
    other two deposed before the restarted node served again or after; and check-quorum step-downs.
    (Each line starts with its time, ``YYYY-MM-DD HH:MM:SS,mmm``.)"""
    new = {node: log_lines(root, node)[mark:] for node, mark in marks.items()}
    restarted_at = next((line[:23] for line in new[victim] if "serving HTTP" in line), "9999")
    counts = dict.fromkeys(
        ("handed over by the stop", "the stopped node's groups", "leaderless groups won",
         "deposed before the restart", "deposed after the restart", "check-quorum step-downs"), 0
    )  # fmt: skip
    for lines in new.values():
        for line in lines:
            if "(check_quorum)" in line and "stepping down" in line:
                counts["check-quorum step-downs"] += 1
            found = LEADER_LINE.search(line)
            if found is not None and found.group(3) == "transfer" and found.group(1) == victim:
                counts["handed over by the stop"] += 1
            if found is None or found.group(3) != "election":
                continue
            old, winner = found.group(1), found.group(2)
            if old == victim:
                counts["the stopped node's groups"] += 1
            elif old == "none":
                counts["leaderless groups won"] += 1
            elif old != winner:
                after = line[:23] >= restarted_at
                counts["deposed after the restart" if after else "deposed before the restart"] += 1
    return counts


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
            marks = {n.node_id: len(log_lines(root, n.node_id)) for n in cluster.nodes}
            with scenario.probing([cluster.url(n) for n in survivors]) as probe:
                probe.event(f"the probe's leader is {leader}")
                stopped_s = scenario.restart_under_probe(
                    cluster, victim, probe, args.partitions + 1, exit_s=600, open_s=600
                )
            print(f"stop: {stopped_s:.1f} s", flush=True)
            handed = [line for line in log_lines(root, victim)[marks[victim] :] if "leaderships in" in line]
            print(f"the stop's controlled shutdown: {handed[0][24:] if handed else 'no line'}", flush=True)
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
            changes = leader_changes(root, marks, victim)
            print(
                "leader changes since the stop: " + ", ".join(f"{k} {v}" for k, v in changes.items()),
                flush=True,
            )
            print(probe.report(), flush=True)
        finally:
            cluster.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
