"""A Kafka Connect distributed worker as a user runs it (Apache Kafka's ``connect-distributed.sh``: the class
``org.apache.kafka.connect.cli.ConnectDistributed`` on the jars ``scripts/kafka/install.sh`` copies from Maven
Central, a worker properties file), unchanged, against any bootstrap servers: raftlog's Kafka listeners or
Apache Kafka's. Its REST API listens on 127.0.0.1 on a free port; its internal topics (configs, offsets,
status) are its own, created by the worker itself. ``kill`` is a SIGKILL, ``stop`` a SIGTERM (Connect's
shutdown hook stops its tasks and commits their offsets); every wait is bounded."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from raftlog_bench.kafka_peer import connect_libs, log_config
from raftlog_bench.processes import free_ports

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
REST_TIMEOUT_S = 10.0
HEAP = ("-Xms64m", "-Xmx384m")
MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"


def worker_properties(bootstrap: str, name: str, rest_port: int) -> dict[str, str]:
    """A distributed worker's settings: the group ``name`` and its three internal topics (``name`` +
    -configs/-offsets/-status, replication factor 3, compacted by the worker), the REST listener, and
    timeouts shorter than Kafka's defaults so that a worker back from a SIGKILL gets its connectors and
    their partitions again within seconds rather than minutes."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": name,
        "config.storage.topic": f"{name}-configs",
        "offset.storage.topic": f"{name}-offsets",
        "status.storage.topic": f"{name}-status",
        "config.storage.replication.factor": "3",
        "offset.storage.replication.factor": "3",
        "status.storage.replication.factor": "3",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "listeners": f"http://127.0.0.1:{rest_port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(rest_port),
        # source offsets and sink commits every second (default 60 s): a SIGKILL replays seconds, not all
        "offset.flush.interval.ms": "1000",
        # a worker's assignment lost with it is handed out at once (default: held 5 minutes for its return)
        "scheduled.rebalance.max.delay.ms": "0",
        # a killed worker's (and its sink consumer's) membership expires in 6 s (defaults 10 s and 45 s)
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "2000",
        "consumer.session.timeout.ms": "6000",
        "consumer.heartbeat.interval.ms": "2000",
        # plugins (the FileStream connectors among them) found by their service manifests, not a scan of
        # every class on the class path: seconds faster to start
        "plugin.discovery": "service_load",
    }


class ConnectError(AssertionError):
    """The worker or its REST API did not do what the test waited for (with its log's tail)."""


class ConnectWorker:
    """One distributed worker of group ``name`` against ``bootstrap``; files under ``directory``."""

    def __init__(self, directory: pathlib.Path, bootstrap: str, name: str) -> None:
        libs = connect_libs()  # PeerMissing, naming the installer, when absent
        self._classpath = f"{libs}/*"
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rest_port = free_ports(1)[0]  # as Kafka's brokers' ports are chosen (raftlog_bench.peers)
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.log = directory / "connect.log"
        self._properties = directory / "worker.properties"
        self._properties.write_text(
            "".join(f"{k}={v}\n" for k, v in worker_properties(bootstrap, name, self.rest_port).items()),
            encoding="utf-8",
        )
        self._log4j = directory / "log4j2.properties"
        self._log4j.write_text(
            log_config(str(self.log), info_from=("org.apache.kafka.connect",)), encoding="utf-8"
        )
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the JVM; returns once Connect's health check (``/health``, KIP-1017) says the worker has
        started: its internal topics created or found and checked, its group joined, its configs read."""
        self.launch()
        self.wait(self.healthy, START_TIMEOUT_S, "worker started")

    def launch(self) -> None:
        """Start the JVM and return at once."""
        if self._process is not None and self._process.poll() is None:
            raise ConnectError("the worker is running already")
        command = [
            "java", *HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._log4j}", "-cp", self._classpath, MAIN, str(self._properties),
        ]  # fmt: skip
        with open(self.directory / "stdout.log", "ab") as out:
            self._process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def healthy(self) -> bool:
        health = self.request("GET", "/health")  # 503 while starting (None here), 200 once started
        return bool(health) and health.get("status") == "healthy"

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The REST API's answer as JSON (None for an empty one, or while the worker is not serving:
        refused, a timeout, or a 5xx/409 as Connect answers while it rebalances); other errors raise."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=REST_TIMEOUT_S) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            if error.code >= 500 or error.code in (404, 409):  # not yet, rebalancing, not forwarded
                return None
            raise ConnectError(f"{method} {path}: {error.code} {error.read()!r}") from error
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None
        return json.loads(text) if text else {}

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        """Create (or update) a connector, retried while the worker rebalances."""
        self.wait(
            lambda: self.request("PUT", f"/connectors/{name}/config", config) is not None,
            START_TIMEOUT_S,
            f"connector {name} accepted",
        )

    def running(self, name: str) -> bool:
        """Whether the connector and each of its tasks are RUNNING (a FAILED one fails the test)."""
        status = self.request("GET", f"/connectors/{name}/status")
        if not status or not status.get("tasks"):
            return False
        states = [status["connector"]["state"]] + [task["state"] for task in status["tasks"]]
        if "FAILED" in states:
            traces = [t.get("trace", "") for t in [status["connector"], *status["tasks"]]]
            raise ConnectError(
                f"connector {name} failed: {json.dumps(status)[:500]}\n{''.join(traces)[:3000]}"
            )
        return all(state == "RUNNING" for state in states)

    def wait(self, condition: Any, timeout_s: float, what: str) -> None:
        """Poll ``condition`` until true; a timeout, or the worker's exit, fails with its log's tail."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self._process is None or self._process.poll() is not None:
                raise ConnectError(f"the worker exited while waiting for {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise ConnectError(f"no {what} after {timeout_s:.0f} s:\n{self.tail()}")
            time.sleep(0.25)

    def logged(self, text: str) -> bool:
        return self.log.exists() and text in self.log.read_text(encoding="utf-8", errors="replace")

    def tail(self, lines: int = 40) -> str:
        found = []
        for path in (self.directory / "stdout.log", self.log):
            if path.exists():
                found += path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        return "\n".join(found)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing flushed or committed on the way out."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM (Connect's graceful shutdown: tasks stopped, offsets committed, the group left), SIGKILL
        past ``STOP_TIMEOUT_S``."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired as error:
            self.kill()
            raise ConnectError(
                f"the worker did not stop within {STOP_TIMEOUT_S:.0f} s:\n{self.tail()}"
            ) from error
