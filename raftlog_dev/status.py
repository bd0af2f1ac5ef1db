"""``raftlog dev status``: what runs of the local cluster of a data folder, from its ``cluster.json`` and
from asking each process, without the supervisor's help (so it also tells what a crashed supervisor left).

For the supervisor and every node: whether its process lives, and for a node whether its HTTP port
answers ready as that node. Printed as a table, or as JSON with ``--json``; exit status 0 when the
supervisor runs and every node of the cluster runs and is ready, 1 otherwise (a node stopped or gone
included; 3 when there is no cluster.json at all).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from raftlog_client.local_cluster import alive
from raftlog_dev.probe import probe

NO_CLUSTER_EXIT = 3


@dataclass(frozen=True, slots=True)
class NodeStatus:
    id: str
    state: str  # as cluster.json says: running | stopped | exited
    pid: int | None
    alive: bool  # the pid is a live process
    ready: bool  # its HTTP port answers ready as this node and this pid
    http: str
    kafka: str | None


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    data_dir: str
    supervisor_pid: int | None
    supervisor_alive: bool
    nodes: tuple[NodeStatus, ...]

    @property
    def healthy(self) -> bool:
        """The supervisor runs and every node of the cluster runs and answers ready: a node stopped on
        purpose (``raftlog dev stop n3``) or gone (SIGKILL) makes the cluster unhealthy, as it is."""
        return (
            self.supervisor_alive
            and bool(self.nodes)
            and all(n.state == "running" and n.alive and n.ready for n in self.nodes)
        )


def read_status(data_dir: str) -> ClusterStatus | None:
    """None when the folder has no cluster.json (no ``raftlog dev`` ever ran there)."""
    try:
        with open(os.path.join(data_dir, "cluster.json"), encoding="utf-8") as f:
            description: dict[str, Any] = json.load(f)
    except FileNotFoundError:
        return None
    tls = description.get("tls")  # a cluster started with --tls: its CA and client certificate
    token = (description.get("security") or {}).get("admin_token")  # --secure: nodes name themselves to it
    nodes = []
    for entry in description.get("nodes", []):
        pid = entry.get("pid")
        answer = probe(entry["http"], tls, token) if pid is not None else None
        ready = answer is not None and answer.ready and (answer.node_id, answer.pid) == (entry["id"], pid)
        nodes.append(
            NodeStatus(entry["id"], entry["state"], pid, alive(pid), ready, entry["http"], entry.get("kafka"))
        )
    supervisor = description.get("supervisor_pid")
    return ClusterStatus(data_dir, supervisor, alive(supervisor), tuple(nodes))


def render(status: ClusterStatus) -> str:
    supervisor = (
        f"raftlog dev running (pid {status.supervisor_pid})"
        if status.supervisor_alive
        else f"no raftlog dev running (last pid {status.supervisor_pid})"
    )
    lines = [
        f"{supervisor} on {status.data_dir}",
        f"{'NODE':<6}{'STATE':<9}{'PID':<9}{'READY':<7}{'HTTP':<26}KAFKA",
    ]
    for n in status.nodes:
        state = (
            n.state if n.alive or n.state != "running" else "gone"
        )  # cluster.json says running, no process
        lines.append(
            f"{n.id:<6}{state:<9}{n.pid if n.pid is not None else '-':<9}{'yes' if n.ready else 'no':<7}"
            f"{n.http:<26}{n.kafka or '-'}"
        )
    return "\n".join(lines)


def main(data_dir: str, as_json: bool) -> int:
    status = read_status(data_dir)
    if status is None:
        message = (
            f"no cluster in {data_dir} (no cluster.json); start one with: raftlog dev --data-dir {data_dir}"
        )
        print(json.dumps({"data_dir": data_dir, "error": message}) if as_json else message)
        return NO_CLUSTER_EXIT
    if as_json:
        print(json.dumps({**asdict(status), "healthy": status.healthy}, indent=2))
    else:
        print(render(status))
    return 0 if status.healthy else 1
