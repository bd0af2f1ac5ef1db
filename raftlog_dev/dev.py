"""``raftlog dev``: a local cluster on 127.0.0.1, one OS process per node, until Ctrl-C / SIGTERM.

``raftlog dev [--nodes 3] [--data-dir data] [--base-port 8081] [--serve-arg=--opt=value ...]`` supervises
the cluster (``--base-port 0``: any free range of ports; each ``--serve-arg`` is added to every node's
``raftlog serve`` options). It locks the
data folder first (``DATA_DIR/.lock``): a second ``raftlog dev`` on the same folder is refused at once,
naming the first, and changes nothing there. It refuses ports another process listens on, starts each
node, and calls the cluster up only once every node answers ``/status/ready`` as itself (its node id and
the pid of the process started here): never on the word of another process on the same port. It keeps
``DATA_DIR/cluster.json`` true: each node's id, pid (null when not running), state (running, stopped,
exited), HTTP URL and the full argv that starts it again with its data, rewritten (atomically) whenever
one of them changes. A node that exits is reported and the supervisor goes on; Ctrl-C, SIGTERM or the
terminal closing (SIGHUP) stops every node it runs.

``raftlog dev stop|start|restart NODE [--kill] [--data-dir data]`` asks the running supervisor, through
its control socket (``dev_control``), to stop a node (SIGTERM, or SIGKILL with ``--kill``, as a crash),
start it again with the same argv (answered once it is ready), or both; ``raftlog dev stop`` without a
node stops the whole cluster and its supervisor. ``raftlog dev status [--json]`` says what runs
(``dev_status``). Each node is started to receive SIGTERM should its supervisor die, however it dies
(Linux's parent-death signal): no node outlives the ``raftlog dev`` that started it.

``--python PATH`` (with ``raftlog dev``, or ``start|restart NODE``) runs the nodes, or that node from then
on, on another interpreter: another checkout's virtualenv runs that checkout's code on the same data, so a
node can be upgraded, or a cluster started on a previous release (``python -m raftlog_dev.releases 0.1.0``
builds one and prints its interpreter). Such a node is started from its data folder without this
process's PYTHONPATH, so it imports what its interpreter has installed; this supervisor's own interpreter
(``sys.executable``) brings a node back to this supervisor's code.

Node i serves HTTP on base-port + i - 1, Raft on base-port + 100 + i - 1 and gossip (UDP and TCP) on
base-port + 200 + i - 1; every node joins gossip through the others.

``--tls`` serves both doors over TLS with a local CA (``certificates``); ``--secure`` adds authentication on
both and ACLs (``secure``: ``--require-auth``, ``--enforce-acls``, an admin token, an admin user who
is every node's super user, made once the cluster is up). Every node creates topics Kafka clients name
(``--auto-create-topics``, Kafka's default) unless ``--no-auto-create-topics``.
What it prints once up is ``hints``'.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import re
import secrets
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raftlog.errors import InvariantViolation
from raftlog.storage.dirlock import LOCK_FILE, DirectoryLock
from raftlog.storage.errors import DirectoryLocked
from raftlog_dev import control
from raftlog_dev import status as cluster_status
from raftlog_dev.certificates import DevCertificates, dev_certificates, tls_description
from raftlog_dev.control import ACTIONS, Answer, ControlError, Request
from raftlog_dev.hints import raftlog_command, up_text
from raftlog_dev.probe import probe
from raftlog_dev.secure import DevSecurity, create_user, dev_security, write_client_files, write_token
from raftlog_node.options import dev_arguments, refusal_of
from raftlog_node.tls import client_context

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.2  # how often a waiting supervisor looks at its nodes and its control socket
REQUEST_READ_TIMEOUT_S = 5.0  # how long a control connection may take to send its request line
LOG_TAIL_BYTES = 4096  # of a node's log, read to say why it exited
RAFT_PORT_OFFSET = 100
GOSSIP_PORT_OFFSET = 200
KAFKA_PORT_OFFSET = 1011  # n1's Kafka listener on 9092 when its HTTP port is 8081
# the data folder holds the cluster secret, the admin token, a password, keys and every node's data: its
# owner's alone, as each node keeps its own (``serve.UMASK``)
UMASK = 0o077
DATA_DIR_MODE = 0o700


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=(*ACTIONS, "status"),
        help="stop, start or restart one node of the raftlog dev running on --data-dir (stop without a "
        "node: the whole cluster); status: what runs (without an action: run the cluster)",
    )
    parser.add_argument("node", nargs="?", help="the node to stop, start or restart, e.g. n3")
    parser.add_argument("--json", action="store_true", help="status: as JSON")
    parser.add_argument(
        "--kill", action="store_true", help="stop or restart: SIGKILL the node, as a crash, not SIGTERM"
    )
    parser.add_argument("--nodes", type=int, help=f"how many nodes (1-5, default {NODES_DEFAULT})")
    parser.add_argument("--data-dir", default="data", help="cluster data folder (default ./data)")
    parser.add_argument(
        "--base-port", type=int, help=f"HTTP port of n1 (default {BASE_PORT_DEFAULT}; 0: any free range)"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="TLS on every node's HTTP and Kafka listeners, with a local CA made in DATA_DIR/tls "
        "(cluster.json names its files; clients trust ca.pem)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="--tls, authentication and ACLs on both doors: every node with --require-auth and "
        "--enforce-acls, an admin user (a random password; cluster.json's security names it) who is every "
        "node's --super-user",
    )
    parser.add_argument(
        "--no-auto-create-topics",
        action="store_true",
        help="nodes without --auto-create-topics: a Kafka client naming a topic that does not exist gets "
        "UNKNOWN_TOPIC_OR_PARTITION instead of a new topic (on by default, as Kafka's default)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="run the nodes (with start or restart: that node, from then on) on this interpreter, e.g. "
        "another checkout's .venv/bin/python running that checkout's code on the same data",
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="add ARG to every node's serve options, e.g. --serve-arg=--retention-check-ms=200 (repeatable)",
    )


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


def node_argv(
    node: DevNode,
    cluster: list[DevNode],
    data_dir: str,
    secret_file: str,
    certificates: DevCertificates | None = None,
    auto_create_topics: bool = True,
) -> list[str]:
    argv = [
        sys.executable, "-m", "raftlog_node",
        "--node-id", node.node_id,
        "--data-dir", os.path.join(data_dir, node.node_id),
        "--http", f"127.0.0.1:{node.http_port}",
        "--raft", f"127.0.0.1:{node.raft_port}",
        "--gossip", f"127.0.0.1:{node.gossip_port}",
        "--kafka", node.kafka,
        "--secret-file", secret_file,
        # what the options' declaration gives every dev node: consumers starting together share the first
        # assignment at once (Kafka's development setting), a producer's first record creates its topic
        *dev_arguments(auto_create_topics),
    ]  # fmt: skip
    if certificates is not None:
        argv += ["--tls-cert", certificates.node_cert, "--tls-key", certificates.node_key,
                 "--tls-ca", certificates.ca]  # fmt: skip
    for peer in cluster:
        if peer is not node:
            argv += ["--peer", f"{peer.node_id},127.0.0.1:{peer.http_port},127.0.0.1:{peer.raft_port}"]
            argv += ["--seed", f"127.0.0.1:{peer.gossip_port}"]
    return argv


def interpreter_problem(python: str) -> str | None:
    """Why ``python`` cannot run a node (not an executable file), or None. Its path is kept as given, not
    resolved: a virtualenv's interpreter is a link whose target runs without the virtualenv."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        return f"{python} is not an executable file (an interpreter such as CHECKOUT/.venv/bin/python)"
    return None


def _secret_file(data_dir: str) -> str:
    path = os.path.join(data_dir, "cluster.secret")
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path


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


_PR_SET_PDEATHSIG = 1


def _terminate_with_parent() -> None:
    """In a node's process before it runs: SIGTERM when the supervisor dies, even by SIGKILL (Linux's
    parent-death signal; elsewhere the supervisor's own signal handling is all there is)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _say(text: str, error: bool = False) -> None:
    """Print, unless the terminal is gone (a hangup stops the cluster: its printing must not stop that)."""
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr if error else sys.stdout, flush=True)


def _wait_or_kill(node: DevNode, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for a node that was sent a signal to exit; SIGKILL it (and say so) if not."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        _say(f"{node.node_id} did not stop in time; killing it", error=True)
        process.kill()
        process.wait()


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


@dataclass(slots=True)
class _Child:
    """One node the supervisor runs (or ran)."""

    node: DevNode
    argv: list[str]
    log_path: str
    process: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # where the current process's lines begin in its log
    state: str = "stopped"  # running | stopped (asked to) | exited (on its own)
    exit_code: int | None = None
    python: str = sys.executable  # the interpreter that runs it (argv[0])

    def run_on(self, python: str) -> None:
        self.python = python
        self.argv = [python, *self.argv[1:]]

    @property
    def other_code(self) -> bool:
        """Whether it runs another interpreter than this supervisor's (another checkout's code)."""
        return self.python != sys.executable

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.state == "running" else None

    def describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": self.node.node_id,
            "pid": self.pid,
            "state": self.state,
            "http": self.node.http,
            "kafka": self.node.kafka,
            "argv": self.argv,
        }
        if self.other_code:
            entry["python"] = self.python
        if self.state == "exited":
            entry["exit_code"] = self.exit_code
        return entry

    def log_tail(self) -> str:
        """Why the current process exited, as its log says: its last error (a logged ERROR or CRITICAL, or
        the last line of a traceback), or that it logged none; never an unrelated last line."""
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(self.log_offset, size - LOG_TAIL_BYTES))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
        except OSError as exc:
            return f"its log {self.log_path} cannot be read: {exc}"
        return last_error(lines) or f"it logged no error (its log: {self.log_path})"


_LOGGED_ERROR = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) ")  # raftlog_node.logs.FORMAT: time, level, logger
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")  # a traceback's last line


def last_error(lines: Sequence[str]) -> str | None:
    """The last error among a node's log lines: a line logged at ERROR or CRITICAL, or the exception line
    that ends a traceback, whichever came last; None when there is none."""
    for line in reversed(lines):
        if _LOGGED_ERROR.match(line) or _RAISED.match(line):
            return line
    return None


class Supervisor:
    """Runs the nodes of one data folder (whose lock the caller holds) until asked to stop."""

    def __init__(
        self,
        data_dir: str,
        cluster: list[DevNode],
        secret_file: str,
        serve_args: Sequence[str] = (),
        certificates: DevCertificates | None = None,
        security: DevSecurity | None = None,
        auto_create_topics: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.stopping = False
        self.certificates = certificates
        self.ca = None if certificates is None else certificates.ca
        self.tls = None if certificates is None else tls_description(certificates)
        if security is not None and certificates is None:
            raise InvariantViolation("raftlog dev --secure without its certificates")
        self.security = security
        secure_args = [] if security is None else security.serve_args(write_token(data_dir, security))
        self.children = {
            node.node_id: _Child(
                node,
                [
                    *node_argv(node, cluster, data_dir, secret_file, certificates, auto_create_topics),
                    *secure_args,
                    *serve_args,
                ],
                os.path.join(data_dir, node.node_id, "node.log"),
            )
            for node in cluster
        }

    def on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        # the terminal closing stops the nodes too, unless the supervisor runs under nohup
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            signal.signal(signal.SIGHUP, self.on_signal)
        try:
            listener = control.listen(self.data_dir)
        except (ControlError, OSError) as exc:
            print(f"raftlog dev: cannot open the control socket: {exc}", file=sys.stderr)
            return 1
        try:
            for child in self.children.values():
                self.start(child)
            problem = self.wait_ready(list(self.children.values()))
            if self.stopping:
                return 0
            if problem is None:
                problem = self.create_user()
            if problem is not None:
                print(f"raftlog dev: {problem}", file=sys.stderr)
                return 1
            self._print_up()
            while not self.stopping:
                self.reap()
                self.serve_control(listener)
            return 0
        finally:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(control.socket_path(self.data_dir))
            self.stop_all()

    # -- one node ------------------------------------------------------------------------------------

    def start(self, child: _Child) -> None:
        os.makedirs(os.path.dirname(child.log_path), exist_ok=True)
        with open(child.log_path, "ab") as log_file:
            child.log_offset = log_file.tell()
            env, cwd = None, None
            if child.other_code:  # its interpreter's own code: not this checkout's from PYTHONPATH or cwd
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                cwd = os.path.dirname(child.log_path)
            child.process = subprocess.Popen(
                child.argv,
                env=env,
                cwd=cwd,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_terminate_with_parent,
            )
        child.state, child.exit_code = "running", None
        self.write_description()
        node = child.node
        on = f", on {child.python}" if child.other_code else ""
        _say(
            f"started {node.node_id} (pid {child.process.pid}) on {node.http} (Kafka {node.kafka}), "
            f"log {child.log_path}{on}"
        )

    def stop(self, child: _Child, kill: bool = False) -> str:
        """Stop a running node (SIGTERM, SIGKILL after STOP_TIMEOUT_S; SIGKILL at once with ``kill``);
        returns how it ended."""
        process = child.process
        if process is None or child.state != "running":
            raise InvariantViolation(f"stop of {child.node.node_id}, which is {child.state}")
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            _wait_or_kill(child.node, process, STOP_TIMEOUT_S)
        child.state, child.exit_code = "stopped", process.returncode
        self.write_description()
        return f"pid {process.pid}, {_exit_text(process.returncode)}"

    def wait_ready(self, children: list[_Child]) -> str | None:
        """Wait until every node in ``children`` answers ready as itself; what went wrong otherwise."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = {child.node.node_id: child for child in children}
        while pending and not self.stopping and time.monotonic() < deadline:
            for node_id, child in sorted(pending.items()):
                process = child.process
                if process is None or self._exited(child):
                    return f"{node_id} exited with {_exit_text(child.exit_code or 0)}: {child.log_tail()}"
                token = None if self.security is None else self.security.admin_token
                answer = probe(child.node.http, self.tls, token)
                if answer is None or not answer.ready:
                    continue
                if (answer.node_id, answer.pid) != (node_id, process.pid):
                    return (
                        f"port {child.node.http_port} ({node_id}'s HTTP) is answered by another process "
                        f"({answer.node_id or 'no node id'}, pid {answer.pid}), not by {node_id} "
                        f"(pid {process.pid}): stop it or choose another --base-port"
                    )
                del pending[node_id]
                _say(f"{node_id} ready")
            time.sleep(POLL_INTERVAL_S)
        if self.stopping:
            return "raftlog dev is stopping"
        if pending:
            logs = ", ".join(pending[n].log_path for n in sorted(pending))
            return f"not ready within {READY_TIMEOUT_S:.0f} s: {', '.join(sorted(pending))}; see {logs}"
        return None

    def create_user(self) -> str | None:
        """``--secure``: the admin user, made (or given its password again) once the nodes are up."""
        if self.security is None or self.tls is None:
            return None
        context = client_context(self.tls["ca"], self.tls["client_cert"], self.tls["client_key"])
        urls = [child.node.http for child in self.children.values()]
        problem = create_user(urls, self.security, context)
        if problem is None:
            write_client_files(self.data_dir, self.security, self.tls["ca"], urls[0])
            _say(f"user {self.security.user} ready (cluster.json's security has its password)")
        return problem

    def _exited(self, child: _Child) -> bool:
        """Whether a running node's process has exited on its own; recorded if so."""
        process = child.process
        if child.state != "running" or process is None or process.poll() is None:
            return False
        child.state, child.exit_code = "exited", process.returncode
        self.write_description()
        return True

    def reap(self) -> None:
        """Record and report nodes that exited on their own: the supervisor goes on without them."""
        for child in self.children.values():
            if self._exited(child):
                node_id = child.node.node_id
                _say(
                    f"raftlog dev: {node_id} exited with {_exit_text(child.exit_code or 0)}: "
                    f"{child.log_tail()}\n  start it again with: {raftlog_command()} dev start {node_id} "
                    f"--data-dir {shlex.quote(self.data_dir)}",
                    error=True,
                )

    def stop_all(self) -> None:
        running = [c for c in self.children.values() if c.state == "running" and c.process is not None]
        if not running:
            return
        for child in running:
            if child.process is not None and child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in running:
            process = child.process
            if process is None:
                continue
            _wait_or_kill(child.node, process, max(0.1, deadline - time.monotonic()))
            child.state, child.exit_code = "stopped", process.returncode
        self.write_description()
        _say("all nodes stopped")

    # -- control ---------------------------------------------------------------------------------------

    def serve_control(self, listener: socket.socket) -> None:
        """Answer one request if one comes within POLL_INTERVAL_S."""
        try:
            readable, _, _ = select.select([listener], [], [], POLL_INTERVAL_S)
        except InterruptedError:
            return
        if not readable:
            return
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return
        with connection:
            connection.setblocking(True)
            connection.settimeout(REQUEST_READ_TIMEOUT_S)
            try:
                request = Request.decode(control.read_line(connection))
            except (ControlError, OSError) as exc:
                answer = Answer(False, f"bad request: {exc}")
            else:
                _say(f"raftlog dev: {request.action} {request.node or 'all nodes'} requested")
                answer = self.handle(request)
                _say(f"raftlog dev: {answer.message}")
            with contextlib.suppress(OSError):  # the asker may have given up
                connection.sendall(answer.encode())

    def handle(self, request: Request) -> Answer:
        if request.node is None:  # stop, of the whole cluster
            running = sorted(c.node.node_id for c in self.children.values() if c.state == "running")
            self.stop_all()
            self.stopping = True
            return Answer(True, f"stopped {', '.join(running) or 'no running node'}; raftlog dev exits")
        child = self.children.get(request.node)
        if child is None:
            known = ", ".join(sorted(self.children))
            return Answer(False, f"no node {request.node!r} in this cluster ({known})")
        node_id = child.node.node_id
        self.reap()
        how = "SIGKILL" if request.kill else "SIGTERM"
        if request.action == "stop":
            if child.state != "running":
                return Answer(False, f"{node_id} is not running ({child.state})")
            return Answer(True, f"{node_id} stopped by {how} ({self.stop(child, request.kill)})")
        if request.action == "start" and child.state == "running":
            return Answer(False, f"{node_id} is already running (pid {child.pid})")
        if request.python is not None:
            problem = interpreter_problem(request.python)
            if problem is not None:
                return Answer(False, f"{node_id} not {request.action}ed: {problem}")
        stopped = ""
        if request.action == "restart" and child.state == "running":
            stopped = f"{node_id} stopped by {how} ({self.stop(child, request.kill)}); "
        busy = busy_ports(child.node)
        if busy:
            return Answer(False, f"{stopped}{node_id} not started: {', '.join(busy)} held by another process")
        if request.python is not None:
            child.run_on(request.python)
        self.start(child)
        problem = self.wait_ready([child])
        if problem is not None:
            return Answer(False, stopped + problem)
        on = f" on {child.python}" if child.other_code else ""
        return Answer(
            True, f"{stopped}{node_id} started (pid {child.pid}) and ready on {child.node.http}{on}"
        )

    # -- cluster.json ----------------------------------------------------------------------------------

    def write_description(self) -> None:
        """cluster.json, replaced in one rename: a reader sees the old or the new one, never half."""
        description: dict[str, Any] = {
            "supervisor_pid": os.getpid(),
            "nodes": [child.describe() for child in self.children.values()],
        }
        if self.tls is not None:
            description["tls"] = self.tls
        if self.security is not None and self.ca is not None:
            description["security"] = self.security.description(self.ca)
        path = os.path.join(self.data_dir, "cluster.json")
        # readable by its owner only: with --secure it holds a password and the admin token
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(description, f, indent=2)
        os.replace(path + ".tmp", path)

    def _print_up(self) -> None:
        first = next(iter(self.children.values())).node  # any node answers, and bootstraps a Kafka client
        _say(up_text(len(self.children), self.data_dir, first.http, first.kafka, self.ca, self.security))


def _run_cluster(args: argparse.Namespace) -> int:
    if args.kill:
        print("raftlog dev: --kill goes with stop or restart NODE", file=sys.stderr)
        return 2
    count = NODES_DEFAULT if args.nodes is None else args.nodes
    base_port = BASE_PORT_DEFAULT if args.base_port is None else args.base_port
    tls = args.tls or args.secure
    try:
        cluster = plan(count, free_base_port(count) if base_port == 0 and 1 <= count <= 5 else base_port, tls)
    except ValueError as exc:
        print(f"raftlog dev: {exc}", file=sys.stderr)
        return 2
    python = None if args.python is None else os.path.abspath(args.python)
    problem = None if python is None else interpreter_problem(python)
    if problem is not None:
        print(f"raftlog dev: --python: {problem}", file=sys.stderr)
        return 2
    # every node on this code would refuse it: said once, before anything starts (another checkout's
    # nodes, --python, answer for their own options)
    refused = None if python is not None else refusal_of(args.serve_arg)
    if refused is not None:
        print(f"raftlog dev: --serve-arg: {refused} (raftlog serve --help)", file=sys.stderr)
        return 2
    data_dir = os.path.abspath(args.data_dir)
    os.umask(UMASK)
    made = not os.path.exists(data_dir)
    try:
        lock = DirectoryLock.acquire(data_dir, "raftlog dev")
    except DirectoryLocked as exc:
        print(f"raftlog dev: {exc}; nothing was started", file=sys.stderr)
        return 1
    with lock:
        os.chmod(data_dir, DATA_DIR_MODE)  # made by an older version, or by hand
        busy = [port for node in cluster for port in busy_ports(node)]
        if busy:
            print(
                f"raftlog dev: {', '.join(busy)} held by another process (another cluster?); "
                "choose another --base-port; nothing was started",
                file=sys.stderr,
            )
            if made:  # the folder this refused run made holds only its lock: leave nothing behind
                os.unlink(os.path.join(data_dir, LOCK_FILE))
                os.rmdir(data_dir)
            return 1
        certificates = dev_certificates(data_dir) if tls else None
        try:
            security = dev_security(data_dir) if args.secure else None
        except ValueError as exc:
            print(f"raftlog dev: {exc}; nothing was started", file=sys.stderr)
            return 1
        supervisor = Supervisor(
            data_dir,
            cluster,
            _secret_file(data_dir),
            args.serve_arg,
            certificates,
            security,
            auto_create_topics=not args.no_auto_create_topics,
        )
        if python is not None:
            for child in supervisor.children.values():
                child.run_on(python)
        return supervisor.run()


def _control(args: argparse.Namespace) -> int:
    if args.node is None and args.action != "stop":
        print(f"raftlog dev {args.action}: which node? e.g. raftlog dev {args.action} n3", file=sys.stderr)
        return 2
    if args.node is None and args.kill:
        print(
            "raftlog dev stop --kill: name the node to kill, e.g. raftlog dev stop n3 --kill", file=sys.stderr
        )
        return 2
    starting = (args.serve_arg, args.tls, args.secure, args.no_auto_create_topics)
    if args.nodes is not None or args.base_port is not None or any(starting):
        print(
            "raftlog dev: --nodes, --base-port, --tls, --secure, --no-auto-create-topics and --serve-arg go "
            "with starting a cluster",
            file=sys.stderr,
        )
        return 2
    data_dir = os.path.abspath(args.data_dir)
    if args.python is not None and args.action == "stop":
        print(
            "raftlog dev: --python goes with start or restart NODE, or with starting a cluster",
            file=sys.stderr,
        )
        return 2
    python = None if args.python is None else os.path.abspath(args.python)
    try:
        answer = control.ask(data_dir, Request(args.action, args.node, args.kill, python))
    except ControlError as exc:
        print(f"raftlog dev: {exc}", file=sys.stderr)
        return 1
    if not answer.ok:
        print(f"raftlog dev: {answer.message}", file=sys.stderr)
        return 1
    print(answer.message)
    if args.node is None:  # the whole cluster: done once its supervisor exited (and let go of the folder)
        status = cluster_status.read_status(data_dir)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while (
            status is not None and cluster_status.alive(status.supervisor_pid) and time.monotonic() < deadline
        ):
            time.sleep(0.05)
    return 0


def main(args: argparse.Namespace) -> int:
    if args.json and args.action != "status":
        print("raftlog dev: --json goes with status", file=sys.stderr)
        return 2
    if args.action == "status":
        if args.node is not None or args.kill:
            print("raftlog dev status: takes no node and no --kill", file=sys.stderr)
            return 2
        return cluster_status.main(os.path.abspath(args.data_dir), args.json)
    return _run_cluster(args) if args.action is None else _control(args)
