"""``raftlog dev``: a local cluster on 127.0.0.1, one OS process per node, until Ctrl-C / SIGTERM.

Writes ``DATA_DIR/cluster.json`` with each node's id, pid, HTTP URL and the full argv that starts it
again with its data. Node i serves HTTP on base-port + i - 1, Raft on base-port + 100 + i - 1 and gossip
(UDP and TCP) on base-port + 200 + i - 1; every node joins gossip through the others.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
RAFT_PORT_OFFSET = 100
GOSSIP_PORT_OFFSET = 200


@dataclass(frozen=True, slots=True)
class DevNode:
    node_id: str
    http_port: int
    raft_port: int
    gossip_port: int

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=3, help="how many nodes (1-5, default 3)")
    parser.add_argument("--data-dir", default="data", help="cluster data folder (default ./data)")
    parser.add_argument("--base-port", type=int, default=8081, help="HTTP port of n1 (default 8081)")


def plan(count: int, base_port: int) -> list[DevNode]:
    if not 1 <= count <= 5:
        raise ValueError(f"--nodes {count}: between 1 and 5")
    if not 1024 <= base_port <= 65535 - GOSSIP_PORT_OFFSET - count:
        raise ValueError(f"--base-port {base_port}: between 1024 and {65535 - GOSSIP_PORT_OFFSET - count}")
    return [
        DevNode(
            f"n{i}",
            base_port + i - 1,
            base_port + RAFT_PORT_OFFSET + i - 1,
            base_port + GOSSIP_PORT_OFFSET + i - 1,
        )
        for i in range(1, count + 1)
    ]


# Ports handed out for tests, benchmarks and the fault harness come from below Linux's ephemeral range
# (32768-60999 by default), so an outgoing connection's source port can never take one between the
# check and the bind.
UNEPHEMERAL_PORTS = range(10_000, 32_000)


def free_base_port(count: int, host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """A base port for ``plan(count, base)`` whose HTTP, Raft and gossip ports (TCP and UDP) on ``host``
    are all free right now (for tests, benchmarks and the fault harness; a race with other processes
    choosing ports remains until bound)."""
    rng = rng or random.Random()
    for _ in range(200):
        base = rng.randrange(UNEPHEMERAL_PORTS.start, UNEPHEMERAL_PORTS.stop - GOSSIP_PORT_OFFSET - count)
        ports = [
            base + offset + i for offset in (0, RAFT_PORT_OFFSET, GOSSIP_PORT_OFFSET) for i in range(count)
        ]
        if all(_port_free(host, port) for port in ports):
            return base
    raise RuntimeError(f"no free range of {count} x 3 ports on {host}")


# Ports free_port handed out lately: several picked before any is bound (a test's three nodes take nine)
# were each free when checked and could be the same port, and the second bind then failed.
_HANDED_OUT: dict[int, None] = {}  # insertion-ordered; the oldest are forgotten past the bound
_HANDED_OUT_MAX = 4096


def free_port(host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """One port free right now for TCP and UDP on ``host``, from below the ephemeral range, and not one
    this process was handed lately (a caller may not have bound that one yet)."""
    rng = rng or random.Random()
    for _ in range(200):
        port = rng.randrange(UNEPHEMERAL_PORTS.start, UNEPHEMERAL_PORTS.stop)
        if port not in _HANDED_OUT and _port_free(host, port):
            _HANDED_OUT[port] = None
            while len(_HANDED_OUT) > _HANDED_OUT_MAX:
                del _HANDED_OUT[next(iter(_HANDED_OUT))]
            return port
    raise RuntimeError(f"no free port on {host}")


def _port_free(host: str, port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):  # gossip uses both on its port
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def node_argv(node: DevNode, cluster: list[DevNode], data_dir: str, secret_file: str) -> list[str]:
    argv = [
        sys.executable, "-m", "api.cli", "serve",
        "--node-id", node.node_id,
        "--data-dir", os.path.join(data_dir, node.node_id),
        "--http", f"127.0.0.1:{node.http_port}",
        "--raft", f"127.0.0.1:{node.raft_port}",
        "--gossip", f"127.0.0.1:{node.gossip_port}",
        "--secret-file", secret_file,
    ]  # fmt: skip
    for peer in cluster:
        if peer is not node:
            argv += ["--peer", f"{peer.node_id},127.0.0.1:{peer.http_port},127.0.0.1:{peer.raft_port}"]
            argv += ["--seed", f"127.0.0.1:{peer.gossip_port}"]
    return argv


def _secret_file(data_dir: str) -> str:
    path = os.path.join(data_dir, "cluster.secret")
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/status/ready", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def main(args: argparse.Namespace) -> int:
    try:
        cluster = plan(args.nodes, args.base_port)
    except ValueError as exc:
        print(f"raftlog dev: {exc}", file=sys.stderr)
        return 2
    data_dir = os.path.abspath(args.data_dir)
    os.makedirs(data_dir, exist_ok=True)
    secret_file = _secret_file(data_dir)
    processes: list[tuple[DevNode, subprocess.Popen[bytes], list[str]]] = []
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for node in cluster:
            argv = node_argv(node, cluster, data_dir, secret_file)
            os.makedirs(os.path.join(data_dir, node.node_id), exist_ok=True)
            log_path = os.path.join(data_dir, node.node_id, "node.log")
            with open(log_path, "ab") as log_file:
                process = subprocess.Popen(
                    argv, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
                )
            processes.append((node, process, argv))
            print(f"started {node.node_id} (pid {process.pid}) on {node.http}, log {log_path}", flush=True)
        description = {
            "nodes": [
                {"id": n.node_id, "pid": p.pid, "http": n.http, "argv": argv} for n, p, argv in processes
            ]
        }
        with open(os.path.join(data_dir, "cluster.json"), "w", encoding="utf-8") as f:
            json.dump(description, f, indent=2)
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = {node.node_id for node in cluster}
        while pending and not stopping and time.monotonic() < deadline:
            for node, process, _ in processes:
                if process.poll() is not None:
                    print(f"raftlog dev: {node.node_id} exited with {process.returncode}; see its node.log",
                          file=sys.stderr)  # fmt: skip
                    return 1
                if node.node_id in pending and _ready(node.http):
                    pending.discard(node.node_id)
                    print(f"{node.node_id} ready", flush=True)
            time.sleep(0.2)
        if pending and not stopping:
            print(
                f"raftlog dev: not ready within {READY_TIMEOUT_S:.0f} s: {sorted(pending)}", file=sys.stderr
            )
            return 1
        first = cluster[0].http
        print(
            f"\ncluster of {len(cluster)} up; cluster.json in {data_dir}\n"
            f"  curl -s -XPOST {first}/v1/topics -H 'Content-Type: application/json' "
            f'-d \'{{"name": "orders", "partitions": 3, "replication_factor": {min(3, len(cluster))}}}\'\n'
            f"  curl -s -XPOST {first}/topics/orders -H 'Content-Type: application/vnd.kafka.json.v2+json' "
            f'-d \'{{"records": [{{"key": "k", "value": {{"hello": "world"}}}}]}}\'\n'
            f"  curl -s '{first}/topics/orders/partitions/0/records?offset=0'\n"
            "Ctrl-C stops all nodes.",
            flush=True,
        )
        while not stopping:
            for node, process, _ in processes:
                if process.poll() is not None:
                    print(f"raftlog dev: {node.node_id} exited with {process.returncode}", file=sys.stderr)
                    processes.remove((node, process, _))
                    break
            time.sleep(0.5)
        return 0
    finally:
        for _, process, _ in processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node, process, _ in processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{node.node_id} did not stop in time; killing it", file=sys.stderr)
                process.kill()
                process.wait()
        print("all nodes stopped", flush=True)
