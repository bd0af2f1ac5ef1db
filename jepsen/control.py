"""Start, stop, signal and wire up real node processes for a fault run.

Two network modes:

- ``netns``: each node runs in its own network namespace ``<prefix>-nK`` with one veth (``eth0`` inside,
  ``<prefix>-nK`` in the root namespace) attached to a bridge ``<prefix>-br`` in the root namespace. Nodes
  get 10.241.S.K/24 (S unused, and claimed for the run: :func:`claim_subnet`), the bridge 10.241.S.254
  so the harness (root namespace) reaches every node directly. Nothing is routed or forwarded off the
  bridge: traffic stays on it. Partitions are blackhole routes inside the namespaces; delay/loss are
  qdiscs on the root-side veth.
- ``loopback``: every node on 127.0.0.1 on its own ports; partitions and link faults are unavailable.

Cleanup is guaranteed by :meth:`Network.teardown` and :meth:`Cluster.stop_all` (both idempotent, both run
from ``finally``), and :func:`sweep` removes anything left under a prefix by an earlier crashed run.
Everything created carries the run's unique prefix (``jr`` + 6 hex digits).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jepsen import disks, lazyfs
from raftlog_client import probe
from raftlog_dev.layout import DevNode, free_base_port, placement_arguments, plan
from raftlog_node import launch as node_launch

SUBNET_BASE = "10.241"
SUBNET_CLAIMS_DIR = "/tmp/raftlog-jepsen-subnets"  # machine-wide, whatever TMPDIR a run was given
HTTP_PORT = 8081
RAFT_PORT = 8181
GOSSIP_PORT = 8281
KAFKA_PORT = 9092
HOSTILE_SOURCE_OCTETS = (241, 242, 243, 244)  # the bridge's addresses for the hostile-clients fault
STOP_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 10.0
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX_LETTERS = "jr"


class ControlError(RuntimeError):
    """The harness could not set up or drive the cluster (not a finding about the cluster)."""


def new_prefix() -> str:
    return PREFIX_LETTERS + secrets.token_hex(3)


def run_command(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise ControlError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def netns_available() -> tuple[bool, str]:
    """Whether this process may create namespaces, veths and bridges (root, ``ip`` present, probe works)."""
    if sys.platform != "linux":
        return False, f"network namespaces need Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    if shutil.which("ip") is None:
        return False, "the ip command (iproute2) is missing"
    probe = new_prefix() + "-p"
    try:
        done = run_command(["ip", "netns", "add", probe], check=False)
        if done.returncode != 0:
            return False, f"ip netns add failed: {done.stderr.strip()}"
        return True, "ok"
    finally:
        run_command(["ip", "netns", "del", probe], check=False)


def qdisc_available(kind: str) -> bool:
    """Whether the kernel has the qdisc (probed on a throwaway veth in a throwaway namespace)."""
    probe = new_prefix()
    namespace = probe + "-q"
    try:
        run_command(["ip", "netns", "add", namespace])
        run_command(["ip", "-n", namespace, "link", "add", "qa", "type", "veth", "peer", "name", "qb"])
        args = {
            "netem": ["netem", "delay", "1ms"],
            "tbf": ["tbf", "rate", "1mbit", "burst", "32kbit", "latency", "100ms"],
        }[kind]
        tc = ["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", "qa", "root", *args]
        done = run_command(tc, check=False)
        return done.returncode == 0
    except ControlError:
        return False
    finally:
        run_command(["ip", "netns", "del", namespace], check=False)


def sweep(prefix: str) -> list[str]:
    """Delete every namespace and link whose name starts with ``prefix``, and unmount its lazy file
    systems; returns what was removed."""
    removed = lazyfs.sweep(prefix)
    namespaces = run_command(["ip", "netns", "list"], check=False).stdout.split()
    for name in namespaces:
        if name.startswith(prefix):
            run_command(["ip", "netns", "del", name], check=False)
            removed.append(f"netns {name}")
    for name in leftover_links(prefix):
        run_command(["ip", "link", "del", name], check=False)
        removed.append(f"link {name}")
    return removed


def leftover_namespaces(prefix: str) -> list[str]:
    names = run_command(["ip", "netns", "list"], check=False).stdout.split()
    return [n for n in names if n.startswith(prefix)]


def leftover_links(prefix: str) -> list[str]:
    out = run_command(["ip", "-o", "link", "show"], check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(prefix):
                names.append(name)
    return names


@dataclass(frozen=True, slots=True)
class NodeSpec(DevNode):
    """A node of the harness's cluster: ``raftlog dev``'s on loopback, or one in a network namespace of
    its own (its host that namespace's address)."""

    namespace: str | None = None  # netns mode only
    link: str | None = None  # root-side veth (netns mode only)

    def argument(self) -> str:
        """The node as one command-line value, which ``parse`` reads back (``jepsen.hostile --target``)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def parse(cls, text: str) -> NodeSpec:
        return cls(**json.loads(text))


def _used_subnets() -> set[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = run_command(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    found: set[ipaddress.IPv4Network | ipaddress.IPv6Network] = set()
    for line in out.splitlines():
        for word in line.split():
            if "/" in word and word[0].isdigit():
                with contextlib.suppress(ValueError):
                    found.add(ipaddress.ip_interface(word).network)
    return found


@dataclass
class SubnetClaim:
    """10.241.S.0/24 held by one run: an exclusive lock on S's file under ``SUBNET_CLAIMS_DIR``, which the
    kernel drops when the holder releases it or dies. Without it, two runs started at once (the tests'
    parallel workers) both saw S unused and both added it: one harness then drove the other run's nodes
    (refused, another admin token)."""

    third_octet: int
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the file drops its lock
            self.fd = None


def claim_subnet() -> SubnetClaim:
    """An unused 10.241.S.0/24, claimed until ``release`` (``Network.teardown`` releases its own)."""
    os.makedirs(SUBNET_CLAIMS_DIR, exist_ok=True)
    used = _used_subnets()
    for third in range(1, 250):
        net = ipaddress.ip_network(f"{SUBNET_BASE}.{third}.0/24")
        if any(net.overlaps(u) for u in used):
            continue
        fd = os.open(os.path.join(SUBNET_CLAIMS_DIR, str(third)), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another run holds it, its addresses maybe not added yet
            os.close(fd)
            continue
        if any(net.overlaps(u) for u in _used_subnets()):  # left in use by a run that did not clean up
            os.close(fd)
            continue
        return SubnetClaim(third, fd)
    raise ControlError(f"no free /24 under {SUBNET_BASE}.0.0/16")


def plan_loopback(count: int) -> list[NodeSpec]:
    """Ports as ``raftlog dev`` lays them out, from a free base."""
    return [NodeSpec(**dataclasses.asdict(node)) for node in plan(count, free_base_port(count))]


def plan_netns(count: int, prefix: str, third_octet: int) -> list[NodeSpec]:
    return [
        NodeSpec(f"n{i}", HTTP_PORT, RAFT_PORT, GOSSIP_PORT, KAFKA_PORT,
                 host=f"{SUBNET_BASE}.{third_octet}.{i}", namespace=f"{prefix}-n{i}", link=f"{prefix}-n{i}")
        for i in range(1, count + 1)
    ]  # fmt: skip


@dataclass
class Network:
    """The namespaces, veths and bridge of one run (netns mode). ``teardown`` undoes all of it."""

    prefix: str
    claim: SubnetClaim
    nodes: list[NodeSpec]
    created: list[list[str]] = field(default_factory=list)  # undo commands, run in reverse

    @property
    def third_octet(self) -> int:
        return self.claim.third_octet

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    @property
    def hostile_sources(self) -> tuple[str, ...]:
        """Addresses of the bridge that only the hostile clients connect from (not the harness's .254)."""
        return tuple(f"{SUBNET_BASE}.{self.third_octet}.{last}" for last in HOSTILE_SOURCE_OCTETS)

    def setup(self) -> None:
        gateway = f"{SUBNET_BASE}.{self.third_octet}.254/24"
        self._do(["ip", "link", "add", self.bridge, "type", "bridge"], ["ip", "link", "del", self.bridge])
        self._do(["ip", "addr", "add", gateway, "dev", self.bridge])
        for source in self.hostile_sources:
            self._do(["ip", "addr", "add", f"{source}/24", "dev", self.bridge])
        self._do(["ip", "link", "set", self.bridge, "up"])
        for node in self.nodes:
            require_netns(node)
            namespace, link = str(node.namespace), str(node.link)
            inner = f"{self.prefix}-i{node.node_id[1:]}"
            self._do(["ip", "netns", "add", namespace], ["ip", "netns", "del", namespace])
            self._do(["ip", "link", "add", link, "type", "veth", "peer", "name", inner],
                     ["ip", "link", "del", link])  # fmt: skip
            self._do(["ip", "link", "set", inner, "netns", namespace])
            self._do(["ip", "-n", namespace, "link", "set", inner, "name", "eth0"])
            self._do(["ip", "-n", namespace, "addr", "add", f"{node.host}/24", "dev", "eth0"])
            self._do(["ip", "-n", namespace, "link", "set", "eth0", "up"])
            self._do(["ip", "-n", namespace, "link", "set", "lo", "up"])
            self._do(["ip", "link", "set", link, "master", self.bridge])
            self._do(["ip", "link", "set", link, "up"])

    def _do(self, argv: list[str], undo: list[str] | None = None) -> None:
        run_command(argv)
        if undo is not None:
            self.created.append(undo)

    def teardown(self) -> list[str]:
        """Undo everything (namespaces first, which also removes their veth ends); returns problems."""
        problems = []
        for undo in reversed(self.created):
            done = run_command(undo, check=False)
            if done.returncode != 0 and "Cannot find" not in done.stderr and "No such" not in done.stderr:
                problems.append(f"{' '.join(undo)}: {done.stderr.strip()}")
        self.created.clear()
        problems += [f"left behind: {what}" for what in sweep(self.prefix)]
        self.claim.release()
        return problems

    # -- faults --------------------------------------------------------------------------------------

    def cut(self, a: NodeSpec, b: NodeSpec) -> None:
        """Drop a's packets to b at a (one direction; call twice for both)."""
        run_command(["ip", "-n", str(a.namespace), "route", "add", "blackhole", f"{b.host}/32"])

    def heal_all(self) -> None:
        for node in self.nodes:
            out = run_command(["ip", "-n", str(node.namespace), "route", "show", "type", "blackhole"],
                              check=False).stdout  # fmt: skip
            for line in out.splitlines():
                target = line.split()[1] if line.startswith("blackhole") else None
                if target:
                    run_command(["ip", "-n", str(node.namespace), "route", "del", "blackhole", target],
                                check=False)  # fmt: skip

    def shape(self, node: NodeSpec, qdisc: list[str]) -> None:
        """Apply a root qdisc to both ends of the node's link (into and out of the node)."""
        run_command(["tc", "qdisc", "replace", "dev", str(node.link), "root", *qdisc])
        run_command(["ip", "netns", "exec", str(node.namespace), "tc", "qdisc", "replace", "dev", "eth0",
                     "root", *qdisc])  # fmt: skip

    def unshape(self, node: NodeSpec) -> None:
        run_command(["tc", "qdisc", "del", "dev", str(node.link), "root"], check=False)
        run_command(["ip", "netns", "exec", str(node.namespace), "tc", "qdisc", "del", "dev", "eth0", "root"],
                    check=False)  # fmt: skip


def _write_private(path: str, text: str) -> None:
    """``path`` replaced in one rename by a file of ``text`` that only its owner may read (a secret)."""
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def require_netns(node: NodeSpec) -> None:
    if node.namespace is None or node.link is None:
        raise ControlError(f"{node.node_id} has no namespace: netns operation in loopback mode")


@dataclass(frozen=True, slots=True)
class OtherCode:
    """Another release's code (``raftlog_dev.releases``): its version, its worktree and its virtualenv's
    interpreter, which runs that tree's packages when started in it without this checkout on PYTHONPATH."""

    version: str
    tree: str
    python: str


@dataclass
class Cluster:
    """The node processes of one run. Node K's data lives in ``run_dir/data/nK``, its log (all lives,
    appended) in ``run_dir/logs/nK.log``, its fsync trace and clock file in ``run_dir/faults/``. With
    ``disk_mib``, each node's data directory is an ext4 of that size of its own (``jepsen.disks``, the
    image in ``run_dir/disks/``), mounted by :meth:`mount_disks` before the nodes start. With ``fs="lazy"``,
    each node's data directory is a lazy file system (``jepsen.lazyfs``) over ``run_dir/lazy/nK``, mounted
    by :meth:`mount_lazy` before the nodes start and unmounted by :meth:`unmount_lazy` after they stop."""

    run_dir: str
    nodes: list[NodeSpec]
    admin_token: str
    serve_args: list[str] = field(default_factory=list)  # appended to every node's serve options
    shim_args: list[str] = field(default_factory=list)  # jepsen.nodeshim's own options (--break-markers)
    argv: dict[str, list[str]] = field(default_factory=dict)
    processes: dict[str, node_launch.NodeProcess] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    disk_mib: int = 0  # 0: the data directories are plain directories of the run's disk
    small_disks: dict[str, disks.SmallDisk] = field(default_factory=dict)
    fs: str = "plain"  # or "lazy": every data directory on a lazy file system of its own
    prefix: str = ""  # the run's prefix, in the lazy mounts' fsname (control.sweep finds them by it)
    lazy_mounts: dict[str, lazyfs.LazyMount] = field(default_factory=dict)
    _sockets: str = ""  # a short directory for the lazy mounts' control sockets (AF_UNIX: 107 bytes)
    other: OtherCode | None = None  # another release's code a node may run on (the upgrade fault)
    on_other: set[str] = field(default_factory=set)  # the nodes that run on it now (also when restarted)

    def __post_init__(self) -> None:
        for sub in ("data", "logs", "faults"):
            os.makedirs(os.path.join(self.run_dir, sub), exist_ok=True)
        secret_file = os.path.join(self.run_dir, "cluster.secret")
        if not os.path.exists(secret_file):
            _write_private(secret_file, secrets.token_hex(32) + "\n")
        _write_private(self.token_file, self.admin_token + "\n")
        for node in self.nodes:
            self.argv[node.node_id] = self._argv(node, secret_file)
            with open(self.clock_file(node.node_id), "w", encoding="ascii") as f:
                f.write("0\n")

    def spec(self, node_id: str) -> NodeSpec:
        return next(n for n in self.nodes if n.node_id == node_id)

    def mount_disks(self) -> None:
        """Give every node's data directory a small disk of its own (``disk_mib``); ControlError if one
        cannot be made (those made are unmounted by :meth:`unmount_disks`)."""
        os.makedirs(os.path.join(self.run_dir, "disks"), exist_ok=True)
        for node in self.nodes:
            image = os.path.join(self.run_dir, "disks", f"{node.node_id}.img")
            disk = disks.SmallDisk(image, self.data_dir(node.node_id), self.disk_mib)
            try:
                disk.mount()
            except disks.DiskError as exc:
                raise ControlError(f"a disk of its own for {node.node_id}: {exc}") from exc
            self.small_disks[node.node_id] = disk

    def unmount_disks(self) -> list[str]:
        """Unmount the nodes' small disks (after the nodes stopped); returns problems."""
        problems = []
        for node_id, disk in sorted(self.small_disks.items()):
            try:
                disk.unmount()
            except disks.DiskError as exc:
                problems.append(f"{node_id}: {exc}")
        return problems

    def mount_lazy(self) -> None:
        """Put every node's data directory on a lazy file system of its own; ControlError if one cannot
        be mounted (those mounted are unmounted by :meth:`unmount_lazy`)."""
        self._sockets = tempfile.mkdtemp(prefix="raftlog-lazyfs-")
        for node in self.nodes:
            mount = lazyfs.LazyMount(
                backing=os.path.join(self.run_dir, "lazy", node.node_id),
                mount_point=self.data_dir(node.node_id),
                control=os.path.join(self._sockets, f"{node.node_id}.sock"),
                log_path=os.path.join(self.run_dir, "logs", f"{node.node_id}-lazyfs.log"),
                fsname=f"{lazyfs.FSNAME_PREFIX}{self.prefix}-{node.node_id}",
            )
            self.lazy_mounts[node.node_id] = mount
            try:
                mount.mount()
            except lazyfs.LazyMountError as exc:
                raise ControlError(f"a lazy file system for {node.node_id}: {exc}") from exc

    def unmount_lazy(self) -> list[str]:
        """Unmount the lazy file systems and stop their servers (after the nodes stopped); returns
        problems. Every mount is tried, whatever happened to the others."""
        problems = []
        for node_id, mount in sorted(self.lazy_mounts.items()):
            problems += [f"{node_id}: {p}" for p in mount.unmount()]
        if self._sockets:
            shutil.rmtree(self._sockets, ignore_errors=True)
        return problems

    def clear_cache(self, node_id: str) -> dict[str, Any]:
        """Drop the unsynced writes of the node's lazy file system (the node must be down)."""
        if self.running(node_id):
            raise ControlError(f"{node_id} is running: its lazy file system is cleared only once it is down")
        try:
            return self.lazy_mounts[node_id].clear_cache()
        except lazyfs.LazyMountError as exc:
            raise ControlError(str(exc)) from exc

    def data_dir(self, node_id: str) -> str:
        return os.path.join(self.run_dir, "data", node_id)

    @property
    def token_file(self) -> str:
        """The admin token's file, which the nodes read: never on their command line (ps shows it)."""
        return os.path.join(self.run_dir, "admin.token")

    def log_path(self, node_id: str) -> str:
        return os.path.join(self.run_dir, "logs", f"{node_id}.log")

    def trace_file(self, node_id: str) -> str:
        return os.path.join(self.run_dir, "faults", f"{node_id}.fsync")

    def clock_file(self, node_id: str) -> str:
        return os.path.join(self.run_dir, "faults", f"{node_id}.clock")

    def _argv(self, node: NodeSpec, secret_file: str) -> list[str]:
        argv = [sys.executable, "-m", "jepsen.nodeshim", self.trace_file(node.node_id),
                self.clock_file(node.node_id), *self.shim_args,
                *placement_arguments(node, list(self.nodes), self.data_dir(node.node_id), secret_file),
                "--admin-token-file", self.token_file,
                # the test hosts' own addresses on a closed bridge: serve refuses a non-loopback address
                # without authentication unless told the network is closed
                "--allow-unauthenticated"]  # fmt: skip
        argv += self.serve_args
        if node.namespace is not None:
            argv = ["ip", "netns", "exec", node.namespace, *argv]
        return argv

    @property
    def urls(self) -> list[str]:
        return [n.http for n in self.nodes]

    @property
    def bootstrap_servers(self) -> str:
        """Every node's Kafka listener, as Kafka clients take them."""
        return ",".join(n.kafka for n in self.nodes)

    def running(self, node_id: str) -> bool:
        process = self.processes.get(node_id)
        return process is not None and process.poll() is None

    def start(self, node_id: str) -> int:
        if self.running(node_id):
            raise ControlError(f"{node_id} is already running")
        os.makedirs(self.data_dir(node_id), exist_ok=True)
        with open(self.log_path(node_id), "ab") as log:
            log.write(f"\n=== jepsen: starting {node_id} at {time.time():.3f}\n".encode())
            log.flush()
            # ``ip netns exec`` execs the node in place, so the pid is the node's own; where the environment
            # names a node fork server (the test suite's), this checkout's nodes are forked from it,
            # entering the namespace themselves (``raftlog_node/launch.py``)
            argv, cwd, env = self.launch(node_id)
            log.write(f"=== jepsen: {node_id} runs {argv[argv.index('-m') - 1]} in {cwd}\n".encode())
            log.flush()
            self.processes[node_id] = node_launch.launch(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=cwd, env=env,
            )  # fmt: skip
        self.paused.discard(node_id)
        return self.processes[node_id].pid

    def launch(self, node_id: str) -> tuple[list[str], str, dict[str, str]]:
        """The node's argv, folder and environment: this checkout's code, or the other release's when the
        node is in ``on_other`` (its interpreter, started in its tree, ``-m`` taking the tree's
        ``jepsen.nodeshim`` and the tree's server; no PYTHONPATH, which could name this checkout)."""
        argv, env = list(self.argv[node_id]), dict(os.environ)
        if node_id not in self.on_other or self.other is None:
            return argv, REPO_ROOT, env
        argv[argv.index(sys.executable)] = self.other.python
        env.pop("PYTHONPATH", None)
        return argv, self.other.tree, env

    def version(self, node_id: str) -> str:
        """Which code the node runs (its next start's): the other release's version or ``checkout``."""
        return self.other.version if self.other is not None and node_id in self.on_other else "checkout"

    def stop(self, node_id: str) -> None:
        """SIGTERM (resumed first if paused), as an operator stops a node; SIGKILL after a bound."""
        process = self.processes.get(node_id)
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
            process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
        self.paused.discard(node_id)

    def signal(self, node_id: str, signum: int) -> None:
        process = self.processes[node_id]
        if process.poll() is None:
            process.send_signal(signum)

    def kill(self, node_id: str) -> None:
        """SIGKILL, as in a crash; waits until it is gone."""
        process = self.processes.get(node_id)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL)
        process.wait(STOP_TIMEOUT_S)
        self.paused.discard(node_id)

    def pause(self, node_id: str) -> None:
        self.signal(node_id, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: str) -> None:
        self.signal(node_id, signal.SIGCONT)
        self.paused.discard(node_id)

    def ready(self, node_id: str) -> bool:
        return probe.ready(self.spec(node_id).http)

    def wait_ready(self, node_ids: Sequence[str], timeout_s: float) -> list[str]:
        """Wait for the nodes to answer /status/ready; returns those that did not (exited or slow)."""
        deadline = time.monotonic() + timeout_s
        pending = set(node_ids)
        while pending and time.monotonic() < deadline:
            for node_id in sorted(pending):
                if not self.running(node_id) or self.ready(node_id):
                    pending.discard(node_id)
            time.sleep(0.2)
        return sorted(n for n in node_ids if n in pending or not self.running(n))

    def stop_all(self) -> None:
        """Resume paused nodes, SIGTERM everything, SIGKILL what is still there after a bound."""
        for process in self.processes.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGCONT)
                    process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)
        self.paused.clear()

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes.values()]

    def log_tail(self, node_id: str, lines: int = 20) -> str:
        try:
            with open(self.log_path(node_id), encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""
