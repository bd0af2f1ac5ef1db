"""Apache Kafka's own Java client (kafka-clients, the reference client) as the tests run it: the scenarios
of ``java/Scenarios.java``, compiled once (``java_build``) against the jars scripts/kafka/install.sh
installed, each run in a JVM of its own. Client settings, passwords included, reach the JVM in a file only
its owner reads, never in its argv.

A JVM's start is mostly loading and verifying kafka-clients' classes: the first scenario that ends well
leaves them in a class-data-sharing archive (``-XX:ArchiveClassesAtExit``, beside the compiled jar),
which every later JVM maps (``-XX:SharedArchiveFile``) and starts in about half the CPU time. An archive
the JVM finds unusable is ignored (it then loads the classes as without one)."""

from __future__ import annotations

import json
import os
import pathlib
import queue
import subprocess
import threading
import time
import uuid
from typing import IO, Any

from java_build import compiled

from raftlog_bench.kafka_peer import kafka_libs

SCENARIOS = pathlib.Path(__file__).resolve().parent / "java" / "Scenarios.java"
TIMEOUT_S = 300.0


class JavaClient:
    def __init__(self, workdir: pathlib.Path) -> None:
        self._classpath = f"{kafka_libs()}/*"
        built = compiled(SCENARIOS, self._classpath, jar=True)  # shared by the run's workers (java_build.py)
        self._jar = built / f"{SCENARIOS.stem}.jar"
        self._archive = built / "scenarios.jsa"  # beside its jar: every worker maps the first one written
        self._settings = workdir / "settings"
        self._settings.mkdir(mode=0o700, parents=True, exist_ok=True)

    def __call__(
        self, scenario: str, settings: dict[str, str], topic: str, argument: str = ""
    ) -> dict[str, Any]:
        """What the scenario observed (its RESULT line); an unexpected failure fails the test with the
        client's output."""
        with self.start(scenario, settings, topic, argument) as run:
            return run.result()

    def start(self, scenario: str, settings: dict[str, str], topic: str, argument: str = "") -> JavaRun:
        """The scenario running, for one that stops half-way (a line it prints, then one it reads on stdin)
        while the test acts on a cluster."""
        path = self._settings / f"{uuid.uuid4().hex}.properties"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            for key, value in settings.items():  # the Properties format's escapes: backslash, newline
                file.write(f"{key}={value.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}\n")
        classpath = f"{self._jar}{os.pathsep}{self._classpath}"
        if self._archive.exists():
            sharing, dumped = f"-XX:SharedArchiveFile={self._archive}", None
        else:  # this JVM writes one of its own name, renamed into place once it ended well
            dumped = self._archive.with_name(f"{uuid.uuid4().hex}.jsa")
            sharing = f"-XX:ArchiveClassesAtExit={dumped}"
        command = [
            "java", "-Xmx384m", "-XX:TieredStopAtLevel=1", sharing, "-Xlog:disable", "-Xlog:all=error:stderr",
            "-cp", classpath, "Scenarios", scenario, str(path), topic, argument,
        ]  # fmt: skip
        return JavaRun(scenario, command, path, (dumped, self._archive) if dumped else None)


class JavaRun:
    """One scenario's JVM: its stdout read line by line (a reader thread, so a wait is bounded), its
    stdin written, its RESULT line; the settings file goes once the JVM has read it (at its end), and a
    class-data archive it wrote at its exit (``archive``: where it is, where it goes) is put in place when
    it ended well."""

    def __init__(
        self,
        scenario: str,
        command: list[str],
        settings: pathlib.Path,
        archive: tuple[pathlib.Path, pathlib.Path] | None = None,
    ) -> None:
        self.scenario = scenario
        self._settings = settings
        self._archive = archive
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self._process.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _pump(self, stream: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stream:
            self._stdout.append(line)
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def _drain(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self._stderr.append(line)

    def lines(self) -> list[str]:
        """Every line printed so far (the reader thread's: ``line`` and ``result`` still find them)."""
        return [line.rstrip("\n") for line in list(self._stdout)]

    def output(self) -> str:
        return "".join(self._stdout)[-2000:] + "".join(self._stderr)[-4000:]

    def line(self, prefix: str, timeout_s: float = TIMEOUT_S) -> str:
        """The rest of the first line printed that starts with ``prefix``; fails if the JVM ends first."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                why = f"{self.scenario}: no {prefix!r} within {timeout_s} s:\n{self.output()}"
                raise AssertionError(f"{why}\n{self.threads()}") from None
            if line is None:
                self._process.wait(timeout=TIMEOUT_S)
                raise AssertionError(f"{self.scenario} ended before {prefix!r}:\n{self.output()}")
            if line.startswith(prefix):
                return line[len(prefix) :]

    def threads(self) -> str:
        """What the JVM's threads are doing now (``jstack``), for a scenario that stopped answering."""
        try:
            dump = subprocess.run(
                ["jstack", str(self._process.pid)], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"(no thread dump: {exc})"
        return f"its threads (jstack):\n{dump.stdout[-12000:]}{dump.stderr[-1000:]}"

    def send(self, line: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()

    def result(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.line("RESULT "))
        code = self._process.wait(timeout=TIMEOUT_S)
        assert code == 0, f"{self.scenario} failed:\n{self.output()}"
        if self._archive is not None and self._archive[0].exists():
            self._archive[0].replace(self._archive[1])
        return found

    def __enter__(self) -> JavaRun:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait(timeout=TIMEOUT_S)
        self._settings.unlink(missing_ok=True)
        if self._archive is not None:
            self._archive[0].unlink(missing_ok=True)


def scram_settings(bootstrap: str, ca: str, user: str, password: str, mechanism: str) -> dict[str, str]:
    """kafka-clients' settings for SASL_SSL with SCRAM, trusting the PEM ``ca``."""
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca,
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{quoted}";'
        ),
    }
