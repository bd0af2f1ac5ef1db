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
import os
import secrets
import sys
import time

from raftlog.storage.dirlock import LOCK_FILE, DirectoryLock
from raftlog.storage.errors import DirectoryLocked
from raftlog_client.local_cluster import alive
from raftlog_dev import control
from raftlog_dev import status as cluster_status
from raftlog_dev.certificates import dev_certificates
from raftlog_dev.control import ACTIONS, ControlError, Request
from raftlog_dev.layout import (
    BASE_PORT_DEFAULT,
    NODES_DEFAULT,
    busy_ports,
    free_base_port,
    interpreter_problem,
    plan,
)
from raftlog_dev.secure import dev_security
from raftlog_dev.supervisor import STOP_TIMEOUT_S, Supervisor

# the data folder holds the cluster secret, the admin token, a password, keys and every node's data: its
# owner's alone, as each node keeps its own (``serve.UMASK``)
UMASK = 0o077
DATA_DIR_MODE = 0o700


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
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="start or restart: answer once the node's process started, not once it answers ready (a node "
        "that cannot be ready, such as one of an earlier release the cluster keeps out)",
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
        "--release-version",
        metavar="VERSION",
        help="form the new cluster at this release's feature levels (raftlog format on each node's unused "
        "data directory first), e.g. 0.1.0: a cluster that can still go back to release 0.1.0 until the "
        "level is raised",
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="add ARG to every node's serve options, e.g. --serve-arg=--retention-check-ms=200 (repeatable)",
    )


def _secret_file(data_dir: str) -> str:
    path = os.path.join(data_dir, "cluster.secret")
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path


def _run_cluster(args: argparse.Namespace) -> int:
    # the server's options (and with them its modules): loaded where nodes start, not by ``raftlog dev
    # stop|start|restart|status``, a command a test or a script runs again and again
    from raftlog_node.format import FormatRefused, format_data_dir
    from raftlog_node.options import refusal_of

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
        if args.release_version is not None:
            try:
                for node in cluster:
                    formatted = format_data_dir(os.path.join(data_dir, node.node_id), args.release_version)
                    print(f"raftlog dev: {formatted}")
            except FormatRefused as exc:
                print(f"raftlog dev: --release-version: {exc}", file=sys.stderr)
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
    starting = (args.serve_arg, args.tls, args.secure, args.no_auto_create_topics, args.release_version)
    if args.nodes is not None or args.base_port is not None or any(starting):
        print(
            "raftlog dev: --nodes, --base-port, --tls, --secure, --no-auto-create-topics, --release-version "
            "and --serve-arg go with starting a cluster",
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
    if args.no_wait and args.action == "stop":
        print("raftlog dev: --no-wait goes with start or restart NODE", file=sys.stderr)
        return 2
    python = None if args.python is None else os.path.abspath(args.python)
    try:
        answer = control.ask(data_dir, Request(args.action, args.node, args.kill, python, not args.no_wait))
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
        while status is not None and alive(status.supervisor_pid) and time.monotonic() < deadline:
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
