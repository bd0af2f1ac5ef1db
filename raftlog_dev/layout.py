"""Where the nodes of a local cluster listen and how each is started: ``plan`` gives node i its HTTP port
(base-port + i - 1), Raft port (+100), gossip port (+200, UDP and TCP) and Kafka port (+1011, so n1's is
9092 when its HTTP port is 8081); ``node_argv`` the ``raftlog serve`` command that starts it, joined to the
others. Tests, benchmarks and the fault harness take free ports from here (``free_port``,
``free_base_port``), below Linux's ephemeral range; ``busy_ports`` says which of a node's ports another
process holds."""

from __future__ import annotations

import os
import random
import socket
import sys
from dataclasses import dataclass

from raftlog_dev.certificates import DevCertificates

RAFT_PORT_OFFSET = 100
GOSSIP_PORT_OFFSET = 200
KAFKA_PORT_OFFSET = 1011  # n1's Kafka listener on 9092 when its HTTP port is 8081


@dataclass(frozen=True, slots=True)
class DevNode:
    """A node of a local cluster: its id, its host and its listeners' ports."""

    node_id: str
    http_port: int
    raft_port: int
    gossip_port: int
    kafka_port: int
    tls: bool = False  # both listeners: raftlog dev --tls
    host: str = "127.0.0.1"

    @property
    def http(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.http_port}"

    @property
    def kafka(self) -> str:
        return f"{self.host}:{self.kafka_port}"


NODES_DEFAULT = 3
BASE_PORT_DEFAULT = 8081


def plan(count: int, base_port: int, tls: bool = False) -> list[DevNode]:
    if not 1 <= count <= 5:
        raise ValueError(f"--nodes {count}: between 1 and 5")
    if not 1024 <= base_port <= 65535 - KAFKA_PORT_OFFSET - count:
        raise ValueError(f"--base-port {base_port}: between 1024 and {65535 - KAFKA_PORT_OFFSET - count}")
    return [
        DevNode(
            f"n{i}",
            base_port + i - 1,
            base_port + RAFT_PORT_OFFSET + i - 1,
            base_port + GOSSIP_PORT_OFFSET + i - 1,
            base_port + KAFKA_PORT_OFFSET + i - 1,
            tls,
        )
        for i in range(1, count + 1)
    ]


# Ports handed out for tests, benchmarks and the fault harness come from below Linux's ephemeral range
# (32768-60999 by default), so an outgoing connection's source port can never take one between the
# check and the bind. Processes choosing ports side by side (parallel test workers) each take their own
# part of it through PORTS_ENV ("LOW-HIGH"), inherited by the processes they start.
UNEPHEMERAL_PORTS = range(10_000, 32_000)
PORTS_ENV = "RAFTLOG_FREE_PORTS"


def port_range() -> range:
    """Where ``free_port`` and ``free_base_port`` choose: ``UNEPHEMERAL_PORTS``, or PORTS_ENV's range."""
    text = os.environ.get(PORTS_ENV)
    if not text:
        return UNEPHEMERAL_PORTS
    low, _, high = text.partition("-")
    try:
        chosen = range(int(low), int(high))
    except ValueError:
        chosen = range(0)
    if not (chosen.start >= 1024 and chosen.stop <= 65536 and len(chosen) >= 2 * KAFKA_PORT_OFFSET):
        raise ValueError(
            f"{PORTS_ENV}={text!r}: expected LOW-HIGH within 1024-65535, "
            f"at least {2 * KAFKA_PORT_OFFSET} ports wide"
        )
    return chosen


def worker_ports(index: int, count: int, ports: range) -> str:
    """Parallel worker ``index`` (of ``count``)'s own part of ``ports``, as PORTS_ENV's value: the parts
    never overlap, so workers never choose the same port. A range too narrow to give each a cluster's
    ports (a pytest run inside a worker, on that worker's part) is shared whole, as it was before."""
    width = len(ports) // max(count, 1)
    if width < 2 * KAFKA_PORT_OFFSET:
        return f"{ports.start}-{ports.stop}"
    low = ports.start + index * width
    return f"{low}-{low + width}"


def free_base_port(count: int, host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """A base port for ``plan(count, base)`` whose HTTP, Raft and gossip ports (TCP and UDP) on ``host``
    are all free right now (for tests, benchmarks and the fault harness; a race with other processes
    choosing ports remains until bound)."""
    rng = rng or random.Random()
    ports = port_range()
    for _ in range(200):
        base = rng.randrange(ports.start, ports.stop - KAFKA_PORT_OFFSET - count)
        offsets = (0, RAFT_PORT_OFFSET, GOSSIP_PORT_OFFSET, KAFKA_PORT_OFFSET)
        if all(_port_free(host, base + offset + i) for offset in offsets for i in range(count)):
            return base
    raise RuntimeError(f"no free range of {count} x 4 ports on {host}")


# Ports free_port handed out lately: several picked before any is bound (a test's three nodes take nine)
# were each free when checked and could be the same port, and the second bind then failed.
_HANDED_OUT: dict[int, None] = {}  # insertion-ordered; the oldest are forgotten past the bound
_HANDED_OUT_MAX = 4096  # and at most half the range: a narrow $RAFTLOG_FREE_PORTS keeps ports to hand out


def free_port(host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """One port free right now for TCP and UDP on ``host``, from below the ephemeral range, and not one
    this process was handed lately (a caller may not have bound that one yet)."""
    rng = rng or random.Random()
    ports = port_range()
    for _ in range(200):
        port = rng.randrange(ports.start, ports.stop)
        if port not in _HANDED_OUT and _port_free(host, port):
            _HANDED_OUT[port] = None
            while len(_HANDED_OUT) > min(_HANDED_OUT_MAX, len(ports) // 2):
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


def serve_arg_refusal(argv: list[str]) -> str | None:
    """Why a node of this checkout would refuse ``argv`` as extra ``raftlog serve`` options (an option it
    has not, a value not of its type or past its bounds), or None: asked before a cluster starts, so a bad
    option is said once (the option table's ``refusal_of``, loaded here only, where nodes start)."""
    from raftlog_node.options import refusal_of

    return refusal_of(argv)


def node_argv(
    node: DevNode,
    cluster: list[DevNode],
    data_dir: str,
    secret_file: str,
    certificates: DevCertificates | None = None,
    auto_create_topics: bool = True,
) -> list[str]:
    from raftlog_node.options import dev_arguments  # as in dev._run_cluster: where nodes start only

    argv = [
        sys.executable, "-m", "raftlog_node",
        *placement_arguments(node, cluster, os.path.join(data_dir, node.node_id), secret_file),
        # what the options' declaration gives every dev node: consumers starting together share the first
        # assignment at once (Kafka's development setting), a producer's first record creates its topic
        *dev_arguments(auto_create_topics),
    ]  # fmt: skip
    if certificates is not None:
        argv += ["--tls-cert", certificates.node_cert, "--tls-key", certificates.node_key,
                 "--tls-ca", certificates.ca]  # fmt: skip
    return argv


def placement_arguments(node: DevNode, cluster: list[DevNode], data_dir: str, secret_file: str) -> list[str]:
    """The ``raftlog serve`` options that place ``node`` in ``cluster`` (which may include it): its name,
    data directory, listeners and secret, and every other node as a peer and a gossip seed. Spelled here
    once for ``raftlog dev`` and the fault harness; the flags are the same since release 0.1.0, so a node
    of the previous release takes them too."""
    argv = [
        "--node-id", node.node_id,
        "--data-dir", data_dir,
        "--http", f"{node.host}:{node.http_port}",
        "--raft", f"{node.host}:{node.raft_port}",
        "--gossip", f"{node.host}:{node.gossip_port}",
        "--kafka", node.kafka,
        "--secret-file", secret_file,
    ]  # fmt: skip
    for peer in cluster:
        if peer.node_id != node.node_id:
            argv += ["--peer", f"{peer.node_id},{peer.host}:{peer.http_port},{peer.host}:{peer.raft_port}"]
            argv += ["--seed", f"{peer.host}:{peer.gossip_port}"]
    return argv


def interpreter_problem(python: str) -> str | None:
    """Why ``python`` cannot run a node (not an executable file), or None. Its path is kept as given, not
    resolved: a virtualenv's interpreter is a link whose target runs without the virtualenv."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        return f"{python} is not an executable file (an interpreter such as CHECKOUT/.venv/bin/python)"
    return None


def _listened(host: str, port: int, udp: bool) -> bool:
    """Whether another socket holds ``port``: for TCP, whether something listens on it (a connection of
    a node stopped moments ago, lingering in TIME_WAIT, does not count: the node rebinds over it); for
    UDP, whether anything is bound to it."""
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    with socket.socket(socket.AF_INET, kind) as probe:
        if not udp:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def busy_ports(node: DevNode) -> list[str]:
    """The node's ports another process holds, each named with what the node needs it for."""
    wanted = [
        (node.http_port, "HTTP", (False,)),
        (node.raft_port, "Raft", (False,)),
        (node.gossip_port, "gossip", (False, True)),
        (node.kafka_port, "Kafka", (False,)),
    ]
    return [
        f"port {port} ({node.node_id}'s {what})"
        for port, what, kinds in wanted
        if any(_listened("127.0.0.1", port, udp) for udp in kinds)
    ]
