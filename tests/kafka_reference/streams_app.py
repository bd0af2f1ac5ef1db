"""A Kafka Streams application as a user runs it: ``examples/kafka_streams/WordCount.java`` (exactly_once_v2),
compiled once (``java_build``) against the jars ``scripts/kafka/install.sh`` copies from Maven Central,
each instance a JVM of its own (so kill -9 is real) with its own state directory, against any bootstrap
servers. An instance's stdout is read line by line on a thread of its own, so every wait for a line is
bounded."""

from __future__ import annotations

import os
import pathlib
import queue
import signal
import subprocess
import threading
import time
from typing import IO

from java_build import compiled

from raftlog_bench.kafka_peer import KAFKA_VERSION, kafka_libs, log_config

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "kafka_streams" / "WordCount.java"
HEAP = ("-Xms32m", "-Xmx256m")
STOP_TIMEOUT_S = 30.0


class StreamsError(AssertionError):
    """An instance did not do what the test waited for (with its output's tail)."""


def compile_word_count() -> str:
    """The class path of the compiled application: its classes, then Kafka's jars (Kafka Streams among
    them)."""
    libs = kafka_libs()
    if not (libs / f"kafka-streams-{KAFKA_VERSION}.jar").exists():
        raise StreamsError(f"Kafka Streams is not installed in {libs}: run scripts/kafka/install.sh")
    classes = compiled(SOURCE, f"{libs}/*") / "classes"  # shared by the run's workers (java_build.py)
    return f"{classes}{os.pathsep}{libs}/*"


class StreamsInstance:
    """One instance of the application ``application_id``; its state directory, log and output under
    ``directory`` (kept across restarts: a restarted instance is the same Streams process id, so its
    producer's transactional id is the same and fences its killed self)."""

    def __init__(
        self,
        classpath: str,
        directory: pathlib.Path,
        bootstrap: str,
        application_id: str,
        topics: tuple[str, str],
        session_timeout_ms: int,
        group_protocol: str = "classic",
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.log = directory / "streams.log"
        log4j = directory / "log4j2.properties"
        log4j.write_text(log_config(str(self.log)), encoding="utf-8")
        self.command = [
            "java", *HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, "WordCount",
            "--bootstrap", bootstrap, "--application-id", application_id,
            "--state-dir", str(directory / "state"), "--input", topics[0], "--output", topics[1],
            "--session-timeout-ms", str(session_timeout_ms), "--group-protocol", group_protocol,
        ]  # fmt: skip
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.printed: list[str] = []  # every line the instance printed, restarts included

    def start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            raise StreamsError("the instance is running already")
        self._lines = queue.Queue()
        with open(self.directory / "stdout.log", "a", encoding="utf-8") as out:
            out.write(f"-- started at {time.time():.3f}\n")
        self._process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        threading.Thread(target=self._pump, args=(self._process.stdout, self._lines), daemon=True).start()

    def _pump(self, stream: IO[str], lines: queue.Queue[str | None]) -> None:
        with open(self.directory / "stdout.log", "a", encoding="utf-8") as out:
            for line in stream:
                out.write(line)
                out.flush()
                self.printed.append(line.rstrip("\n"))
                lines.put(line.rstrip("\n"))
        lines.put(None)

    def line(self, prefix: str, timeout_s: float) -> str:
        """The rest of the next line printed that starts with ``prefix``; fails if the JVM ends first."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise StreamsError(f"no {prefix!r} within {timeout_s} s:\n{self.tail()}") from None
            if line is None:
                status = self._process.poll() if self._process is not None else None
                raise StreamsError(
                    f"the instance ended (exit status {status}) before {prefix!r}:\n{self.tail()}"
                )
            if line.startswith(prefix):
                return line[len(prefix) :]

    def running(self, timeout_s: float = 120.0) -> list[str]:
        """Waits for the instance to be RUNNING; its stream threads' transactional ids."""
        while self.line("STATE ", timeout_s) != "RUNNING":
            pass
        return [self.line("TRANSACTIONAL_ID ", timeout_s)]

    def check_alive(self) -> None:
        if self._process is None or self._process.poll() is not None:
            raise StreamsError(f"the instance exited:\n{self.tail()}")

    def uncaught(self) -> list[str]:
        return [line for line in self.printed if line.startswith("UNCAUGHT ")]

    def kill(self) -> None:
        """SIGKILL, as a crash: no transaction ended, no state flushed, the group not left."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM, as a user stops it: Kafka Streams closes (its transactions ended, the group left)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise StreamsError(f"not stopped {STOP_TIMEOUT_S} s after SIGTERM:\n{self.tail()}") from None

    def tail(self, lines: int = 40) -> str:
        found = []
        for path in (self.directory / "stdout.log", self.log):
            if path.exists():
                found += path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        return "\n".join(found)
