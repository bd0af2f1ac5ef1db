"""A throwaway local cluster for benchmarks and tests: ``raftlog dev`` in a child process, as a user would
run it in another terminal, on a free range of loopback ports (``--base-port 0``) with its data in
``directory``. The one way the benchmarks, the Spark connector's benchmark and its tests start a cluster:
what a node is and how it starts stay ``raftlog dev``'s (its supervision, readiness checks and
``cluster.json``), and this module imports nothing of the server; it reads ``cluster.json`` and asks
``/status/ready`` (``probe.py``) and, of a ``raftlog dev --secure`` cluster, whether its user is let in.

    with LocalCluster(directory) as cluster:
        cluster.servers  # ["http://127.0.0.1:PORT", ...], node n1 first
        cluster.bootstrap_servers  # "127.0.0.1:PORT,...": the nodes' Kafka listeners

``stop`` ends it: SIGTERM to ``raftlog dev`` (which stops its nodes), then SIGTERM, and SIGKILL after a
while, to any node process of this directory still alive (one its caller restarted by itself)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import IO, Any

from raftlog_client.probe import PROBE_TIMEOUT_S, ready
from raftlog_contract import FEATURES_PATH, TOPICS_PATH

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
CONTROL_TIMEOUT_S = 300.0
COMMAND = (sys.executable, "-m", "raftlog_cli")  # the raftlog command of this Python


def alive(pid: int | None) -> bool:
    """Whether ``pid`` is a running process. One that exited and waits for its parent to collect its exit
    status (a zombie: a supervisor started by a script that has not waited for it yet) is not."""
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive, not ours
        return True
    return not _exited(pid)


def _exited(pid: int) -> bool:
    """Whether /proc says ``pid`` exited (state Z or X); False without /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # "pid (command) state ...": the command may hold spaces and parentheses, the last ")" ends it
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"Z", b"X")


class LocalCluster:
    """``nodes`` node processes under ``raftlog dev``; ``serve_args`` are added to every node's options.
    After ``start``: ``urls`` and ``pids`` by node id (``pids`` as ``raftlog dev`` last wrote them, or as
    the caller set them after restarting a node itself)."""

    def __init__(
        self,
        directory: str,
        nodes: int = 3,
        serve_args: Sequence[str] = (),
        dev_args: Sequence[str] = (),
    ) -> None:
        self.directory = os.path.abspath(directory)
        self.nodes = nodes
        self.serve_args = list(serve_args)
        self.dev_args = list(dev_args)  # e.g. ["--tls"]
        self.tls: dict[str, str] = {}  # cluster.json's: ca, client_cert, client_key (raftlog dev --tls)
        # cluster.json's: ca, user, password, admin_token (raftlog dev --secure)
        self.security: dict[str, str] = {}
        self.dev_log = os.path.join(self.directory, "dev.log")
        self.urls: dict[str, str] = {}
        self.kafka: dict[str, str] = {}  # node id -> HOST:PORT of its Kafka listener
        self.pids: dict[str, int] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def servers(self) -> list[str]:
        return [self.urls[node] for node in sorted(self.urls)]

    @property
    def bootstrap_servers(self) -> str:
        """Kafka clients' ``bootstrap.servers``: every node's Kafka listener."""
        return ",".join(self.kafka[node] for node in sorted(self.kafka))

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start ``raftlog dev`` and return once every node answers ready; stopped again on failure."""
        os.makedirs(self.directory, exist_ok=True)
        argv = [*COMMAND, "dev", "--nodes", str(self.nodes), "--data-dir", self.directory, "--base-port", "0"]
        argv += [f"--serve-arg={arg}" for arg in self.serve_args] + self.dev_args
        self._log = open(self.dev_log, "ab")  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending: set[str] | None = None
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise RuntimeError(f"raftlog dev exited with {code}; see {self.dev_log}")
            if pending is None:
                nodes = self._described_nodes()
                if nodes is not None and len(nodes) == self.nodes and all(n.get("pid") for n in nodes):
                    self.tls = self._described("tls")
                    self.security = self._described("security")
                    self.urls = {str(n["id"]): str(n["http"]) for n in nodes}
                    self.kafka = {str(n["id"]): str(n["kafka"]) for n in nodes if n.get("kafka")}
                    self.pids = {str(n["id"]): int(n["pid"]) for n in nodes}
                    pending = set(self.urls)
            if pending is not None:
                context = self.ssl_context()
                pending = {node for node in pending if not ready(self.urls[node], context)}
                if (
                    not pending
                    and all(self._user_admitted(url, context) for url in self.servers)
                    and self._levels_finalized(self.servers[0], context)
                ):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the cluster was not ready within {timeout_s:g} s; see {self.dev_log}")

    def _user_admitted(self, url: str, context: ssl.SSLContext | None) -> bool:
        """Whether the node lets cluster.json's user in (``raftlog dev --secure`` creates it once the
        nodes are up); True when the cluster has none."""
        if not self.security:
            return True
        login = base64.b64encode(f"{self.security['user']}:{self.security['password']}".encode()).decode()
        request = urllib.request.Request(url + TOPICS_PATH, headers={"Authorization": f"Basic {login}"})
        try:
            with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S, context=context) as answer:
                return bool(answer.status == 200)
        except urllib.error.HTTPError as exc:
            exc.close()
            return False
        except (urllib.error.URLError, OSError):
            return False

    def _levels_finalized(self, url: str, context: ssl.SSLContext | None) -> bool:
        """Whether the cluster finalized the feature levels its code supports (a new cluster does so once
        every node gossiped them, a moment after they are ready), so a test meets this release's formats
        from its first request; True for a release that has no feature levels (no ``/v1/features``)."""
        token = self.security.get("admin_token")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(url + FEATURES_PATH, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S, context=context) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            exc.close()
            return exc.code == 404
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return bool(body.get("finalized") == body.get("supported"))

    def ssl_context(self) -> ssl.SSLContext | None:
        """What a client of this cluster uses for its https URLs: its CA trusted, its client certificate
        presented (None: plain HTTP)."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.tls["ca"])
        context.load_cert_chain(self.tls["client_cert"], self.tls["client_key"])
        return context

    def _described(self, part: str) -> dict[str, str]:
        """cluster.json's object ``part`` ({} when it has none)."""
        try:
            with open(os.path.join(self.directory, "cluster.json"), encoding="utf-8") as f:
                return dict(json.load(f).get(part) or {})
        except (OSError, ValueError):
            return {}

    def _described_nodes(self) -> list[dict[str, Any]] | None:
        """The nodes of ``cluster.json``, or None while there is none (or it is being replaced)."""
        try:
            with open(os.path.join(self.directory, "cluster.json"), encoding="utf-8") as f:
                nodes = json.load(f)["nodes"]
        except (OSError, ValueError, KeyError):
            return None
        return nodes if isinstance(nodes, list) else None

    def stopped(self) -> list[str]:
        """The nodes ``raftlog dev`` holds stopped (by a request, or found dead) as ``cluster.json`` says."""
        return sorted(str(n["id"]) for n in self._described_nodes() or [] if n.get("pid") is None)

    def control(self, action: str, node: str, kill: bool = False) -> str:
        """``raftlog dev stop|start|restart NODE [--kill]`` through the running supervisor (a start
        answers once the node is ready); its answer. ``pids`` follows."""
        argv = [*COMMAND, "dev", action, node, "--data-dir", self.directory, *(["--kill"] if kill else [])]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CONTROL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"raftlog dev {action} {node}: {done.stderr.strip() or done.stdout.strip()}")
        nodes = self._described_nodes() or []
        self.pids = {str(n["id"]): int(n["pid"]) for n in nodes if n.get("pid") is not None}
        return done.stdout.strip()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(f"raftlog dev (pid {process.pid}) did not stop in {STOP_TIMEOUT_S:g} s; killing it",
                      file=sys.stderr, flush=True)  # fmt: skip
                process.kill()
                process.wait(STOP_TIMEOUT_S)
        # A node the caller restarted itself is not raftlog dev's child: SIGTERM, SIGKILL what stays.
        leftover = {node: pid for node, pid in self.pids.items() if self._is_node(pid)}
        for pid in leftover.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node, pid in leftover.items():
            while self._is_node(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if self._is_node(pid):
                print(f"{node} (pid {pid}) did not stop in {STOP_TIMEOUT_S:g} s of SIGTERM; killing it",
                      file=sys.stderr, flush=True)  # fmt: skip
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None

    def _is_node(self, pid: int) -> bool:
        """Whether ``pid`` is still a node process of this cluster (not a reused pid)."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            return False
        return os.fsencode(self.directory) in b" ".join(argv) and b"--node-id" in argv
