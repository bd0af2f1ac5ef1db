"""The clusters ``franz_go_suite.py`` runs franz-go's suite against, one system's at a time: a 3-node
``raftlog dev`` or Apache Kafka (``raftlog_bench.kafka_peer``), the SCRAM user the suite's SCRAM tests log
in as, and ``--kill``'s killer, which SIGKILLs a node while a named test runs, sees it gone, starts it
again and sees it back, and keeps when (``Kill``) for the verdict to check."""

from __future__ import annotations

import os
import pathlib
import secrets
import signal
import socket
import sys
import threading
import time

from franz_go_verdict import FINAL, KILLED_DURING, Kill

from raftlog_bench.kafka_peer import KafkaCluster
from raftlog_client.local_cluster import LocalCluster, alive

SCRAM_TIMEOUT_S = 60.0
START_TIMEOUT_S = 300.0  # the 3 nodes ready (raftlog dev's own start bound): minutes on a machine at load 40
RESTART_TIMEOUT_S = 330.0  # a restart's own bounds: raftlog dev's control 300 s, Kafka's start 120 s
DEAD_TIMEOUT_S = 30.0  # a SIGKILLed process gone (reaped by its parent)


class Cluster:
    """One system's 3-node cluster, the servers the suite is given, and a node killed and restarted."""

    def __init__(self, system: str, directory: pathlib.Path, serve_args: list[str]) -> None:
        self.system = system
        self._raftlog: LocalCluster | None = None
        self._kafka: KafkaCluster | None = None
        if system == "raftlog":
            self._raftlog = LocalCluster(str(directory), nodes=3, serve_args=serve_args)
        else:
            self._kafka = KafkaCluster(str(directory))

    def start(self) -> None:
        print(f"franz-go: starting {self.system} (3 nodes)", file=sys.stderr, flush=True)
        if self._raftlog is not None:
            self._raftlog.start(START_TIMEOUT_S)
        elif self._kafka is not None:
            self._kafka.start()

    def stop(self) -> None:
        if self._raftlog is not None:
            self._raftlog.stop()
        elif self._kafka is not None:
            self._kafka.stop()

    @property
    def bootstrap(self) -> str:
        if self._raftlog is not None:
            return self._raftlog.bootstrap_servers
        assert self._kafka is not None
        return self._kafka.bootstrap_servers

    @property
    def sasl_bootstrap(self) -> str:
        """Where a SCRAM login goes: raftlog's Kafka listeners offer SASL; Kafka has SASL_PLAINTEXT ones."""
        if self._kafka is not None:
            return self._kafka.sasl_bootstrap_servers
        return self.bootstrap

    def pid(self, broker: int) -> int:
        """Broker ``broker``'s process (raftlog's node ``n<broker>``)."""
        if self._raftlog is not None:
            return self._raftlog.pids[f"n{broker}"]
        assert self._kafka is not None
        return self._kafka.pids[f"kafka{broker}"]

    def kill(self, broker: int) -> None:
        """SIGKILL broker ``broker``; returns once its process is gone, raises when it is not."""
        pid = self.pid(broker)
        if self._raftlog is not None:  # at once: `raftlog dev stop --kill` takes seconds on a busy machine
            os.kill(pid, signal.SIGKILL)
        elif self._kafka is not None:
            self._kafka.kill(broker - 1)  # waits for the process
        deadline = time.monotonic() + DEAD_TIMEOUT_S
        while alive(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"pid {pid} still alive {DEAD_TIMEOUT_S:g} s after SIGKILL")
            time.sleep(0.05)

    def restart(self, broker: int) -> None:
        """Start it again on its data; returns once it is back: a new process, ready (raftlog dev's start
        answers then; Kafka: every broker registered), its Kafka listener taking connections; raises
        when it is not."""
        old = self.pid(broker)
        if self._raftlog is not None:
            self._raftlog.control("start", f"n{broker}")
        elif self._kafka is not None:
            self._kafka.restart(broker - 1)
        new = self.pid(broker)
        if new == old or not alive(new):
            raise RuntimeError(f"broker {broker} not running again (pid {old} before, {new} now)")
        host, port = self.bootstrap.split(",")[broker - 1].rsplit(":", 1)
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                return
            except OSError as exc:
                if time.monotonic() > deadline or not alive(new):
                    raise RuntimeError(
                        f"broker {broker}'s listener {host}:{port} not answering: {exc}"
                    ) from exc
                time.sleep(0.2)


def scram_user(bootstrap: str) -> tuple[str, str] | None:
    """A SCRAM-SHA-256 user made with AlterUserScramCredentials, once it can be described (Kafka's brokers
    learn it from the metadata log a moment later); None, saying why, when the cluster refuses."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    user, password = "franzgo", secrets.token_hex(8)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
    )
    deadline = time.monotonic() + SCRAM_TIMEOUT_S
    try:
        made = admin.alter_user_scram_credentials([upsert])
        assert isinstance(made, dict)
        made[user].result(SCRAM_TIMEOUT_S)
        while True:
            try:
                # held: a dropped dict cancels its futures
                asked = admin.describe_user_scram_credentials([user])
                assert isinstance(asked, dict)
                asked[user].result(10)
                return user, password
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    except Exception as exc:  # KafkaException, a timeout: the SCRAM tests then skip
        print(f"franz-go: no SCRAM user ({exc}); the SCRAM tests will skip", file=sys.stderr, flush=True)
        return None


class Killer:
    """``--kill``: ``after_s`` after a test of ``KILLED_DURING`` starts or continues (or once the kill
    before it is done, whichever is later), while it runs, its broker is killed with SIGKILL, kept down
    ``down_s`` and started again; one kill at a time, each test's once. ``kills`` holds when each node was
    seen dead and seen back (the verdict checks both fell within its test's run), ``events`` says so in
    words, in seconds since ``began``."""

    def __init__(self, cluster: Cluster, began: float, after_s: float, down_s: float) -> None:
        self.cluster = cluster
        self.began = began
        self.after_s = after_s
        self.down_s = down_s
        self.kills: list[Kill] = []
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._pending: list[tuple[str, float]] = []  # (test, when its kill is due)
        self._killed: set[str] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="killer", daemon=True)
        self._thread.start()

    def saw(self, action: str, test: str) -> None:
        """A test2json event of a top-level test: a parallel test runs, pauses at once, and continues
        when a slot frees (go test's -parallel, GOMAXPROCS), so each run or cont schedules its kill anew."""
        with self._lock:
            if action in ("run", "cont"):
                self._running.add(test)
                queued = any(name == test for name, _ in self._pending)
                if test in KILLED_DURING and test not in self._killed and not queued:
                    self._pending.append((test, time.monotonic() + self.after_s))
            elif action in ("pause", *FINAL):
                self._running.discard(test)

    def _note(self, text: str) -> None:
        line = f"{time.monotonic() - self.began:7.1f}s {text}"
        print(f"franz-go: {self.cluster.system}: {line}", file=sys.stderr, flush=True)

    def _next(self) -> str | None:
        """The test whose kill is due while it runs; None once stopped."""
        while True:
            with self._lock:
                if self._stopped:
                    return None
                if self._pending and self._pending[0][1] <= time.monotonic():
                    test, _ = self._pending.pop(0)
                    if test in self._running:
                        self._killed.add(test)
                        return test
                    continue  # paused: its next cont schedules it again
            time.sleep(0.2)

    def _loop(self) -> None:
        while (test := self._next()) is not None:
            kill = Kill(test, KILLED_DURING[test])
            self.kills.append(kill)
            try:
                self.cluster.kill(kill.broker)
                kill.killed_at = time.time()
                self._note(f"{test}: broker {kill.broker} killed (SIGKILL), seen gone")
                back = time.monotonic() + self.down_s
                while time.monotonic() < back and not self._stopped:
                    time.sleep(0.2)
                self.cluster.restart(
                    kill.broker
                )  # also when the run ended meanwhile: the cluster stops whole
                kill.back_at = time.time()
                self._note(f"{test}: broker {kill.broker} started again, seen back")
            except Exception as exc:  # a kill that did not land: the verdict's to report
                kill.error = f"{type(exc).__name__}: {exc}"
                self._note(f"{test}: broker {kill.broker} kill or restart failed: {kill.error}")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._thread.join(RESTART_TIMEOUT_S + DEAD_TIMEOUT_S + 30)
