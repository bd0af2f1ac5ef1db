"""A throwaway local raftlog cluster for the benchmark: ``raftlog dev`` in a child process on free
loopback ports. The connector still talks to it over HTTP only; this module just starts and stops the
command, as a user would in another terminal."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import IO

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
PORT_OFFSETS = (0, 100, 200)  # HTTP, Raft, gossip: the port plan of `raftlog dev`


def _free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_base_port(nodes: int) -> int:
    """A base port whose HTTP, Raft and gossip ports for ``nodes`` nodes are free right now."""
    for _ in range(200):
        base = random.randrange(10_000, 32_000 - 300)  # below the ephemeral range (api/dev.py says why)
        if all(_free(base + offset + i) for offset in PORT_OFFSETS for i in range(nodes)):
            return base
    raise RuntimeError(f"no free range of ports for {nodes} nodes on 127.0.0.1")


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/status/ready", timeout=1) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class LocalCluster:
    """``with LocalCluster(data_dir) as cluster: cluster.urls`` -- stopped (SIGTERM to ``raftlog dev``,
    which stops its nodes) when the block ends."""

    def __init__(self, data_dir: str, nodes: int = 3) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.nodes = nodes
        self.urls: list[str] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        base = free_base_port(self.nodes)
        argv = [sys.executable, "-m", "raftlog_cli", "dev", "--nodes", str(self.nodes)]
        argv += ["--data-dir", self.data_dir, "--base-port", str(base)]
        self._log = open(os.path.join(self.data_dir, "dev.log"), "ab")  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        self.urls = [f"http://127.0.0.1:{base + i}" for i in range(self.nodes)]
        deadline = time.monotonic() + READY_TIMEOUT_S
        description = os.path.join(self.data_dir, "cluster.json")
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                raise RuntimeError(f"raftlog dev exited with {code}; see {self._log.name}")
            if os.path.exists(description) and all(_ready(url) for url in self.urls):
                with open(description, encoding="utf-8") as f:
                    self.urls = [node["http"] for node in json.load(f)["nodes"]]
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the cluster was not ready within {READY_TIMEOUT_S:.0f} s; see {self._log.name}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
