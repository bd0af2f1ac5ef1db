"""Idle CPU of a local cluster holding N partitions: starts `raftlog dev`, creates a topic, waits, and
measures the nodes' CPU time over a window. Prints % of one core, total and per node.

    .venv/bin/python scripts/idle_cpu.py [--partitions 100] [--seconds 10] [--base-port 18081]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait after creating the topic")
    parser.add_argument("--base-port", type=int, default=18081)
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="raftlog-idle-")
    dev = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "dev", "--data-dir", data, "--base-port", str(args.base_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert dev.stdout is not None
        deadline = time.monotonic() + 60
        for line in dev.stdout:
            if "Ctrl-C stops all nodes" in line or time.monotonic() > deadline:
                break
        url = f"http://127.0.0.1:{args.base_port}"
        body = json.dumps({"name": "idle", "partitions": args.partitions, "replication_factor": 3}).encode()
        request = urllib.request.Request(url + "/v1/topics", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            print(f"created topic with {args.partitions} partitions x 3 replicas: HTTP {answer.status}", file=sys.stderr)
        time.sleep(args.settle)
        with open(os.path.join(data, "cluster.json"), encoding="utf-8") as f:
            pids = {n["id"]: n["pid"] for n in json.load(f)["nodes"]}
        before = {node: cpu_seconds(pid) for node, pid in pids.items()}
        time.sleep(args.seconds)
        after = {node: cpu_seconds(pid) for node, pid in pids.items()}
        per_node = {node: 100 * (after[node] - before[node]) / args.seconds for node in pids}
        total = sum(per_node.values())
        print(f"idle CPU, {args.partitions} partitions x 3 replicas on 3 nodes, over {args.seconds:g} s:")
        for node, percent in sorted(per_node.items()):
            print(f"  {node}: {percent:5.1f}% of one core")
        print(f"  total: {total:5.1f}% of one core")
        return 0
    finally:
        dev.send_signal(signal.SIGTERM)
        try:
            dev.wait(30)
        except subprocess.TimeoutExpired:
            dev.kill()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
