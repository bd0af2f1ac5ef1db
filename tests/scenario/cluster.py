"""Start and stop real node processes for scenario tests (loopback only, bounded waits)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from raftlog_dev.layout import DevNode, free_base_port, node_argv, plan
from raftlog_node.launch import NodeProcess, launch


@dataclass
class ProcessCluster:
    root: str
    nodes: list[DevNode]
    argv: dict[str, list[str]] = field(default_factory=dict)
    processes: dict[str, NodeProcess] = field(default_factory=dict)

    @classmethod
    def create(cls, root: str, count: int = 3, joining: int = 0) -> ProcessCluster:
        """``count`` nodes that know each other from the start, plus ``joining`` more that know only the
        first node's gossip address and join with ``--join`` (started like the others)."""
        nodes = plan(count + joining, free_base_port(count + joining))
        secret = os.path.join(root, "cluster.secret")
        with open(secret, "w", encoding="ascii") as f:
            f.write("scenario-test-secret-0123456789abcdef\n")
        cluster = cls(root, nodes)
        static = nodes[:count]
        for node in static:
            cluster.argv[node.node_id] = node_argv(node, static, root, secret)
        for node in nodes[count:]:
            seed = f"127.0.0.1:{static[0].gossip_port}"
            cluster.argv[node.node_id] = [*node_argv(node, [node], root, secret), "--join", "--seed", seed]
        return cluster

    @property
    def urls(self) -> list[str]:
        return [n.http for n in self.nodes]

    def url(self, node_id: str) -> str:
        return next(n.http for n in self.nodes if n.node_id == node_id)

    def start(self, node_id: str) -> None:
        os.makedirs(os.path.join(self.root, node_id), exist_ok=True)
        with open(os.path.join(self.root, node_id, "node.log"), "ab") as log:
            self.processes[node_id] = launch(  # forked by the worker's fork server (tests/node_forks.py)
                self.argv[node_id], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def start_all(self, timeout_s: float = 60.0) -> None:
        for node in self.nodes:
            self.start(node.node_id)
        self.wait_ready([n.node_id for n in self.nodes], timeout_s)

    def wait_ready(self, node_ids: list[str], timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        pending = set(node_ids)
        while pending and time.monotonic() < deadline:
            for node_id in sorted(pending):
                process = self.processes[node_id]
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{node_id} exited with {process.returncode}: {self.log_tail(node_id)}"
                    )
                try:
                    with urllib.request.urlopen(self.url(node_id) + "/status/ready", timeout=1) as answer:
                        if answer.status == 200:
                            pending.discard(node_id)
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.1)
        if pending:
            raise RuntimeError(f"not ready within {timeout_s} s: {sorted(pending)}")

    def kill(self, node_id: str) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        process = self.processes[node_id]
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def stop(self, node_id: str, timeout_s: float = 30.0) -> int:
        """SIGTERM, as an operator stops a node; its exit code once it exited (SIGKILL past ``timeout_s``,
        which then answers -9)."""
        process = self.processes[node_id]
        process.terminate()
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def pause(self, node_id: str) -> None:
        """SIGSTOP: the process is there but does nothing (a node too slow to answer)."""
        self.processes[node_id].send_signal(signal.SIGSTOP)

    def resume(self, node_id: str) -> None:
        self.processes[node_id].send_signal(signal.SIGCONT)

    def stop_all(self, timeout_s: float = 20.0) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a paused node would not act on SIGTERM
                process.terminate()
        deadline = time.monotonic() + timeout_s
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def log_tail(self, node_id: str, lines: int = 30) -> str:
        path = os.path.join(self.root, node_id, "node.log")
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
